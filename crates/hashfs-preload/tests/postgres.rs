//! PostgreSQL through the shim (issue 55): `initdb`, then a server whose postmaster forks a
//! backend per connection and its helpers (checkpointer, WAL writer, autovacuum), each a
//! participant of its own on the image; `pgbench`'s TPC-B-like transactions from four
//! clients; a server stopped at once (`pg_ctl stop -m immediate`) and started again, its
//! WAL replayed from the image; every server process killed with SIGKILL mid-run (shim
//! participants dying inside calls) and the server started again. The database's own
//! invariant holds after each: the sum of the accounts' balances is the sum of the
//! history's deltas (and the tellers' and branches'), one history row per transaction.

mod common;
use common::skip::skip;
use common::Bounded;
use common::{image_in, p, shim_path, PREFIX};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The server's programs (Debian's postgresql package), or None (a skip; a failure under CI).
fn bin_dir() -> Option<PathBuf> {
    let found = std::fs::read_dir("/usr/lib/postgresql").ok().and_then(|d| {
        d.filter_map(|e| e.ok().map(|e| e.path().join("bin")))
            .filter(|b| b.join("initdb").exists() && b.join("pgbench").exists())
            .max()
    });
    if found.is_none() {
        skip("PostgreSQL's server (Debian's postgresql package) is not installed");
    }
    found
}

/// The postgres account's uid and gid (the server refuses to run as root).
fn postgres_ids() -> Option<(u32, u32)> {
    let out = Command::new("id").arg("postgres").output().ok()?;
    let s = String::from_utf8_lossy(&out.stdout).into_owned();
    let num = |key: &str| s.split(key).nth(1)?.split('(').next()?.parse().ok();
    Some((num("uid=")?, num("gid=")?))
}

struct Cluster {
    bin: PathBuf,
    image: PathBuf,
    socket_dir: PathBuf,
    log: PathBuf,
    ids: (u32, u32),
}

impl Cluster {
    /// A program of the server's as the postgres account; through the shim when `shim`.
    fn cmd(&self, prog: &str, shim: bool) -> Command {
        let mut c = Command::new(self.bin.join(prog));
        c.uid(self.ids.0).gid(self.ids.1).env("HOME", "/tmp").env("PGHOST", &self.socket_dir).env("PGPORT", "5432");
        if shim {
            c.env("LD_PRELOAD", shim_path()).env("HASHFS_IMAGE", &self.image).env("HASHFS_MOUNT", PREFIX);
        }
        c
    }

    fn ok(&self, prog: &str, shim: bool, args: &[&str]) -> String {
        let o = self.cmd(prog, shim).args(args).output_bounded();
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        assert!(
            o.status.success(),
            "{prog} {args:?}: {}{}\nserver log:\n{log}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn pg_ctl(&self, args: &[&str]) {
        let data = p("/data");
        // Room for more backends at once than 64 processes (the shim's bound until 2026-12-07).
        let opts = format!("-k {} -c listen_addresses='' -c max_connections=100", self.socket_dir.display());
        let log = self.log.to_str().unwrap().to_string();
        let mut all = vec!["-D", &data, "-w", "-t", "60", "-l", &log, "-o", &opts];
        all.extend_from_slice(args);
        self.ok("pg_ctl", true, &all);
    }

    /// The balances' sum, the history's deltas' sum, and the history's rows.
    fn invariant(&self) -> (i64, i64, i64) {
        let q = "select (select sum(abalance) from pgbench_accounts), (select coalesce(sum(delta), 0) from \
                 pgbench_history), (select count(*) from pgbench_history)";
        let out = self.ok("psql", false, &["-d", "postgres", "-Atc", q]);
        let v: Vec<i64> = out.trim().split('|').map(|x| x.parse().unwrap()).collect();
        (v[0], v[1], v[2])
    }

    /// The tellers' and the branches' balance sums.
    fn other_sums(&self) -> (i64, i64) {
        let q = "select (select sum(tbalance) from pgbench_tellers), (select sum(bbalance) from pgbench_branches)";
        let out = self.ok("psql", false, &["-d", "postgres", "-Atc", q]);
        let v: Vec<i64> = out.trim().split('|').map(|x| x.parse().unwrap()).collect();
        (v[0], v[1])
    }

    /// Every process of the server (the postmaster, named in its pid file, and its children)
    /// killed with SIGKILL.
    fn kill_all(&self) -> usize {
        let o = Command::new("cat")
            .arg(p("/data/postmaster.pid"))
            .env("LD_PRELOAD", shim_path())
            .env("HASHFS_IMAGE", &self.image)
            .env("HASHFS_MOUNT", PREFIX)
            .output_bounded();
        let pidfile = String::from_utf8_lossy(&o.stdout).into_owned();
        let pm: i32 = pidfile.lines().next().unwrap().trim().parse().unwrap();
        let mut victims = vec![pm];
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
            let ppid = stat.rsplit(')').next().and_then(|r| r.split_whitespace().nth(1)).and_then(|x| x.parse().ok());
            if ppid == Some(pm) {
                victims.push(pid);
            }
        }
        for &v in &victims {
            // SAFETY: kill(2) of the server's processes.
            unsafe { libc::kill(v, libc::SIGKILL) };
        }
        // Gone, or the next start takes a dead postmaster for a live one. The postmaster,
        // whose pg_ctl has exited, is this process's child (a subreaper: the test makes
        // itself one, so as not to count on an init that reaps, which a container may lack).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while victims.iter().any(|v| Path::new(&format!("/proc/{v}")).exists()) && std::time::Instant::now() < deadline
        {
            reap_children();
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        victims.len()
    }
}

/// Reaps this process's children that have exited (the servers orphaned to it).
fn reap_children() {
    // SAFETY: waitpid with WNOHANG on any child; a null status pointer is allowed.
    while unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) } > 0 {}
}

/// Kills the server if the test ends early (a failed assertion): a server left running
/// would hold its SysV shared memory key, which the next run's data directory reuses.
impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.kill_all()));
        }
    }
}

#[test]
fn postgresql_server_and_its_forked_backends_run_through_the_shim() {
    let Some(bin) = bin_dir() else { return };
    // The servers pg_ctl starts are orphaned to this process, which reaps them (`kill_all`).
    // SAFETY: prctl with an integer argument.
    assert_eq!(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) }, 0);
    let ids = postgres_ids().expect("the postgres account (Debian's postgresql package makes it)");
    // A directory the postgres account can reach, holding the image, the socket and the log.
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let img = image_in(dir.path(), 384 << 20, &hashfs::FormatOptions::default());
    std::fs::set_permissions(img._dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    std::os::unix::fs::chown(&img.path, Some(ids.0), Some(ids.1)).unwrap();
    let socket_dir = dir.path().join("socket");
    std::fs::create_dir(&socket_dir).unwrap();
    std::os::unix::fs::chown(&socket_dir, Some(ids.0), Some(ids.1)).unwrap();
    let c = Cluster { bin, image: img.path.clone(), socket_dir, log: dir.path().join("server.log"), ids };
    // The image's root belongs to root: the data directory is made for postgres first.
    {
        let (fs, _) = hashfs::FileSystem::open(&img.path).unwrap();
        fs.create_dir(Path::new("/data"), 0o700).unwrap();
        fs.set_owner(Path::new("/data"), Some(ids.0), Some(ids.1)).unwrap();
    }
    c.ok("initdb", true, &["-D", &p("/data"), "-A", "trust", "--no-sync", "-U", "postgres"]);
    c.pg_ctl(&["start"]);
    c.ok("pgbench", false, &["-i", "-s", "1", "-q", "postgres"]);
    let run = c.ok("pgbench", false, &["-c", "4", "-j", "2", "-t", "150", "postgres"]);
    assert!(run.contains("number of failed transactions: 0"), "{run}");
    eprintln!("pgbench through the shim:\n{run}");
    let (balances, deltas, rows) = c.invariant();
    assert_eq!((balances, rows), (deltas, 600), "the accounts and the history disagree after the run");
    // Killed at once: the postmaster and every backend exit without a checkpoint.
    c.pg_ctl(&["stop", "-m", "immediate"]);
    c.pg_ctl(&["start"]);
    assert_eq!(c.invariant(), (balances, deltas, rows), "WAL replay from the image lost or changed work");
    c.ok("pgbench", false, &["-c", "2", "-t", "50", "-n", "postgres"]);
    let (b2, d2, r2) = c.invariant();
    assert_eq!((b2, r2), (d2, 700));
    // Every server process killed with SIGKILL while four clients run transactions: shim
    // participants die inside calls, the next to take the image lock recovers it, and the
    // server started again replays its WAL. Committed work stays, and stays whole.
    let mut clients =
        c.cmd("pgbench", false).args(["-c", "4", "-j", "2", "-T", "60", "-n", "postgres"]).spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let killed = c.kill_all();
    assert!(killed >= 6, "the postmaster, its helpers and four backends: {killed}");
    let _ = clients.wait(); // (kill_all may have reaped it)
                            // The postmaster's pid file and shared memory stay behind a SIGKILL, as on any file
                            // system; pg_ctl start finds the pid dead and starts over.
    c.pg_ctl(&["start"]);
    let (b3, d3, r3) = c.invariant();
    assert_eq!(b3, d3, "after the kill: the accounts and the history disagree");
    assert_eq!(c.other_sums(), (b3, b3), "after the kill: the tellers or branches disagree");
    assert!(r3 > 700, "transactions committed before the kill are kept ({r3} history rows)");
    // Eighty clients at once: 80 backends beside the server's own processes, each a
    // participant of the image (with 64 at most, the 65th process's paths failed with EIO
    // and its client lost its connection).
    let run = c.ok("pgbench", false, &["-c", "80", "-j", "2", "-t", "5", "-n", "postgres"]);
    assert!(run.contains("number of failed transactions: 0"), "{run}");
    let (b4, d4, r4) = c.invariant();
    assert_eq!((b4, r4), (d4, r3 + 400), "after eighty clients: the accounts and the history disagree");
    c.pg_ctl(&["stop"]);
    reap_children();
    img.fsck_clean();
}
