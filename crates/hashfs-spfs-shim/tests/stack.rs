//! SPFS's stacked mode through the preload shim: programs (Python scripts,
//! `tests/scripts/stack_ops.py`) run with `libhashfs_spfs_shim.so` over a lower directory
//! on ext4 (`/var/tmp`; tmpfs may not export file handles), and the test checks the lower
//! file itself, the merged view another run of the shim sees, and the PM side
//! (`PmStore::check`, as `hashfs fsck --lower` does).

#[path = "../../hashfs-cli/tests/support/loop_ext4.rs"]
mod loop_ext4;
#[path = "../../hashfs-cli/tests/support/skip.rs"]
mod skip;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

fn shim_path() -> PathBuf {
    // target/<profile>/deps/stack-xxxx -> target/<profile>/libhashfs_spfs_shim.so
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().unwrap().parent().unwrap();
    // `cargo test` builds the crate only as an rlib for the test: build the cdylib too, with
    // the whole workspace's features (as scripts/test.sh's `cargo build --workspace`), so
    // that this build reuses that one instead of compiling the libraries again.
    static BUILT: std::sync::Once = std::sync::Once::new();
    BUILT.call_once(|| {
        let mut c = Command::new(env!("CARGO"));
        c.args(["build", "--workspace", "--lib"]);
        // In the profile of the test's own build (`cargo test` builds with `test`, whose
        // libraries it then reuses, in target/debug; `cargo test --release` with `release`;
        // scripts/crash-bugs.sh with `crash-bugs`): another profile's library would be
        // another build's, perhaps an old one.
        match profile_dir.file_name().and_then(|n| n.to_str()) {
            Some("release") => c.arg("--release"),
            Some("debug") | None => c.args(["--profile", "test"]),
            Some(other) => c.args(["--profile", other]),
        };
        assert!(c.status().unwrap().success(), "building libhashfs_spfs_shim.so");
    });
    let so = profile_dir.join("libhashfs_spfs_shim.so");
    assert!(so.exists(), "{} not built", so.display());
    so
}

fn python() -> &'static str {
    // The system interpreter: a version manager's wrapper scripts would run (and take the
    // image) before it.
    if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/scripts/stack_ops.py");

struct Stack {
    dir: tempfile::TempDir,
}

impl Stack {
    fn new() -> Stack {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        std::fs::create_dir(dir.path().join("lower")).unwrap();
        let opts = hashfs::FormatOptions { mapping: hashfs::MappingKind::ExtentHash, ..Default::default() };
        hashfs::FileSystem::format_file(&dir.path().join("pm.img"), 64 << 20, &opts, &|_, _| {}).unwrap();
        Stack { dir }
    }
    fn lower(&self) -> PathBuf {
        self.dir.path().join("lower")
    }
    fn cmd(&self, keep: bool, args: &[&str]) -> Command {
        let mut c = Command::new(python());
        c.arg(SCRIPT)
            .args(&args[..1])
            .arg(self.lower())
            .args(&args[1..])
            .env("LD_PRELOAD", shim_path())
            .env("HASHFS_IMAGE", self.dir.path().join("pm.img"))
            .env("HASHFS_LOWER", self.lower())
            .env("HASHFS_STACK_STATUS", "1")
            .env("HASHFS_STACK_KEEP", if keep { "1" } else { "0" });
        c
    }
    fn run(&self, keep: bool, args: &[&str]) -> (String, String) {
        let o: Output = self.cmd(keep, args).output().unwrap();
        let (out, err) =
            (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned());
        assert!(o.status.success(), "{args:?} failed: {}\n{out}\n{err}", o.status);
        (out, err)
    }
    /// (promoted files sound, problems) of the PM side against the lower directory.
    fn check(&self) -> (usize, Vec<String>) {
        let dev =
            hashfs::pm::MmapDevice::open(&self.dir.path().join("pm.img"), hashfs::pm::OpenMode::Existing).unwrap();
        let (fs, _) = hashfs::FileSystem::mount(Arc::new(dev), &|_, _| {}).unwrap();
        hashfs_spfs::absorb::PmStore::check(fs, &self.lower()).unwrap()
    }
}

fn rec(i: usize) -> Vec<u8> {
    format!("record {i:06} ").repeat(8).into_bytes().into_iter().chain([b'\n']).collect()
}

fn recs(n: usize) -> Vec<u8> {
    (0..n).flat_map(rec).collect()
}

/// The number a status line says: "promotions: 2  write-backs: ..." -> 2.
fn counter(status: &str, name: &str) -> u64 {
    let at = status.find(&format!("{name}: ")).unwrap_or_else(|| panic!("no {name} in {status}"));
    status[at + name.len() + 2..].split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn fsynced_appends_are_absorbed_merged_and_written_back_at_exit() {
    let s = Stack::new();
    let (out, err) = s.run(true, &["promote"]);
    let total = recs(100).len();
    assert!(out.contains(&format!("fstat {total}")) && out.contains(&format!("stat {total}")), "{out}");
    assert!(out.contains("read-ok True") && out.contains("pread-ok True") && out.contains("tail-ok True"), "{out}");
    assert_eq!(counter(&err, "promotions"), 1, "{err}");
    assert!(counter(&err, "fsyncs absorbed in PM") >= 60, "{err}");
    // Kept in PM: the lower file has what was fsynced before the promotion only.
    let below = std::fs::read(s.lower().join("wal")).unwrap();
    assert!(below.len() < total && recs(100).starts_with(&below), "lower file {} bytes", below.len());
    assert_eq!(s.check(), (1, vec![]));
    // The next run sees the merged file, and writes it back when it exits.
    let (out, _) = s.run(false, &["read"]);
    assert!(out.contains(&format!("size {total} {total}")) && out.contains("records 100 exact True"), "{out}");
    assert_eq!(std::fs::read(s.lower().join("wal")).unwrap(), recs(100));
    assert_eq!(s.check(), (0, vec![]));
}

#[test]
fn kill_9_loses_no_fsynced_record() {
    let s = Stack::new();
    let mut next = 0usize;
    // Three random points (printed on failure): before, around and well after the promotion.
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos() as usize;
    let points = [1 + seed % 40, 20 + seed / 7 % 40, 60 + seed / 49 % 120];
    for (round, stop_after) in points.into_iter().enumerate() {
        let mut child = s.cmd(true, &["writer", &next.to_string()]).stdout(Stdio::piped()).spawn().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut acked = next;
        for _ in 0..stop_after {
            acked = lines.next().unwrap().unwrap().trim().parse::<usize>().unwrap() + 1;
        }
        child.kill().unwrap(); // SIGKILL, somewhere in the next write or fdatasync
        child.wait().unwrap();
        let (out, _) = s.run(true, &["read"]);
        let n: usize = out.split("records ").nth(1).unwrap().split_whitespace().next().unwrap().parse().unwrap();
        assert!(n >= acked, "round {round} of {points:?}: {acked} records were fsynced, {n} came back: {out}");
        assert!(out.contains("exact True") || n == acked || n == acked + 1, "{out}");
        next = n;
    }
    // The last record may be torn (written, not fsynced): the next run writes it back as it is,
    // and everything before it is whole.
    s.run(false, &["read"]);
    let below = std::fs::read(s.lower().join("wal")).unwrap();
    assert!(below.starts_with(&recs(next)), "written back: {} bytes", below.len());
    assert_eq!(s.check(), (0, vec![]));
}

#[test]
fn truncation_of_a_promoted_file_cuts_pm_and_the_lower_file() {
    let s = Stack::new();
    let (out, err) = s.run(true, &["truncate"]);
    assert!(out.contains("after-otrunc 0") && out.contains("content abcd") && out.contains("final abZ"), "{out}");
    assert_eq!(counter(&err, "promotions"), 1, "{err}");
    assert!(std::fs::read(s.lower().join("wal")).unwrap().len() <= 3, "the lower file is never longer than PM's");
    s.run(false, &["read"]);
    assert_eq!(std::fs::read(s.lower().join("wal")).unwrap(), b"abZ");
}

#[test]
fn mapping_a_promoted_file_writes_it_back_and_keeps_it_below() {
    let s = Stack::new();
    let (out, err) = s.run(true, &["mmap"]);
    assert!(out.contains("mapped-ok True") && out.contains("read-ok True"), "{out}");
    assert_eq!((counter(&err, "promotions"), counter(&err, "write-backs")), (1, 1), "{err}");
    // 40 more fsyncs after the mapping: the file stayed below, so they all reached ext4.
    assert_eq!(std::fs::read(s.lower().join("wal")).unwrap(), recs(80));
    assert_eq!(s.check(), (0, vec![]));
}

/// (The directory rule is off: with it, every file made after the first fsync in the
/// directory starts in PM, and the count would depend on which new file ext4 gives the
/// deleted inode's number; it made this test fail when that was not the first.)
#[test]
fn a_new_file_on_a_deleted_promoted_files_inode_is_promoted_again() {
    let s = Stack::new();
    let o = s.cmd(true, &["reuse"]).env("HASHFS_STACK_OPTIONS", "dir_rule=off").output().unwrap();
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{out}{err}");
    if out.contains("not-reused") {
        eprintln!("ext4 gave no new file the deleted inode's number: nothing to check");
        return;
    }
    assert_eq!(counter(&err, "promotions"), 2, "{out}{err}");
    assert_eq!(s.check(), (1, vec![]), "the deleted file's copy is gone, the new file's kept");
}

#[test]
fn other_processes_and_forked_children_are_refused_not_bypassed() {
    let s = Stack::new();
    let mut holder = s.cmd(true, &["hold"]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let mut lines = BufReader::new(holder.stdout.take().unwrap()).lines();
    let line = lines.next().unwrap().unwrap();
    assert_eq!(line, format!("child-errno {}", libc::EIO), "a forked child gets EIO under the lower directory");
    let (out, err) = s.run(true, &["open"]);
    assert!(out.contains(&format!("errno {} ", libc::EBUSY)), "another process: EBUSY\n{out}{err}");
    assert!(out.contains("opened /proc/self/status"), "files elsewhere are untouched\n{out}");
    assert!(err.contains("in use"), "{err}");
    writeln!(holder.stdin.as_mut().unwrap()).unwrap();
    assert!(holder.wait().unwrap().success());
}

/// The directory rule (issue 58, `hashfs-spfs/src/dirs.rs`): once a directory's files have
/// synced often (40 messages of varmail's flow), a file made there starts in PM, so its
/// first fsync is absorbed; a file made in another directory stays below.
#[test]
fn a_file_made_where_files_sync_often_starts_in_pm() {
    let s = Stack::new();
    let o = s.cmd(true, &["maildir"]).env("HASHFS_STACK_OPTIONS", "dir_rule=on").output().unwrap();
    let (out, err) = (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned());
    assert!(o.status.success(), "{out}{err}");
    assert!(out.contains("mail merged-ok True") && out.contains("other merged-ok True"), "{out}");
    // Two small fsyncs a message: the 30th (m14's second) makes "mail" hot, and m15 to
    // m39 and "late" are made in PM.
    assert_eq!(counter(&err, "promoted as made (directory rule)"), 26, "{err}");
    // Kept in PM (HASHFS_STACK_KEEP): the lower "late" in mail is still empty; other's has
    // its record.
    assert_eq!(std::fs::read(s.lower().join("mail/late")).unwrap(), b"", "mail/late reached the lower file");
    assert_eq!(std::fs::read(s.lower().join("other/late")).unwrap(), rec(7));
    assert_eq!(s.check().1, Vec::<String>::new());
}

/// Messages delivered below before their directory turned hot (`hashfs-spfs/src/settled.rs`):
/// the first appended to there goes below and asks for a syncfs; one appended to after it
/// is promoted at the open, its fsync absorbed (kept in PM at exit, the lower file still
/// holds only what was delivered); with `settled=off` both go below.
#[test]
fn a_message_settled_below_starts_in_pm_at_its_open() {
    for on in [true, false] {
        let s = Stack::new();
        let opts = format!("promote_after=3,sync_interval_ms=60000,settled={}", if on { "on" } else { "off" });
        let o = s.cmd(true, &["settled"]).env("HASHFS_STACK_OPTIONS", opts).output().unwrap();
        let (out, err) =
            (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned());
        assert!(o.status.success(), "{out}{err}");
        assert!(out.contains("old merged-ok True"), "{out}");
        assert_eq!(counter(&err, "promoted at open (settled below)"), on as u64, "{err}");
        let below = std::fs::read(s.lower().join("mail/old")).unwrap();
        assert_eq!(below, if on { rec(1) } else { [rec(1), rec(2)].concat() }, "settled={on}");
        assert_eq!(s.check(), (if on { 1 } else { 0 }, vec![]));
    }
}

/// SPFS's standalone rules (issue 58, `hashfs-spfs/src/standalone.rs`): a file made as a
/// WAL (an extension given with `extension=`), with O_SYNC or O_DSYNC, or in a directory
/// marked `user.hashfs.boost` starts in PM, so its first fsync is absorbed; other files,
/// and a directory whose mark was removed, stay below; `standalone=off` turns it off.
#[test]
fn files_made_to_sync_start_in_pm() {
    let names = ["000001.log", "x.logger", "plain", "sync", "dsync", "boosted/m", "unmarked/m"];
    let in_pm = ["000001.log", "sync", "dsync", "boosted/m"];
    for on in [true, false] {
        let s = Stack::new();
        let opts = if on { "extension=log" } else { "extension=log,standalone=off" };
        let o = s.cmd(true, &["standalone"]).env("HASHFS_STACK_OPTIONS", opts).output().unwrap();
        let (out, err) =
            (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned());
        assert!(o.status.success(), "{out}{err}");
        for name in names {
            assert!(out.contains(&format!("{name} merged-ok True")), "{name}: {out}");
        }
        let made = counter(&err, "promoted as made (standalone)");
        assert_eq!(made, if on { in_pm.len() as u64 } else { 0 }, "{err}");
        // Kept in PM (HASHFS_STACK_KEEP): the lower files of those made in PM are still
        // empty; the others have their record.
        for (i, name) in names.iter().enumerate() {
            let below = std::fs::read(s.lower().join(name)).unwrap();
            let want = if on && in_pm.contains(name) { vec![] } else { rec(i) };
            assert_eq!(below, want, "{name} below (standalone {on})");
        }
        assert_eq!(s.check(), (if on { in_pm.len() } else { 0 }, vec![]));
    }
}

/// A file made in PM keeps a record of where it was made (`hashfs-spfs/src/remake.rs`),
/// so that a run that finds its lower creation lost (here: removed below between runs)
/// makes it again from PM (also when the first call of the run is an open of it that
/// cuts it); a file unlinked while open, whose copy stayed in PM at exit, is not made again.
#[test]
fn a_file_made_in_pm_is_made_again_when_its_creation_is_lost_below() {
    let s = Stack::new();
    let run = |cmd: &str| {
        let o = s.cmd(true, &[cmd]).env("HASHFS_STACK_OPTIONS", "extension=log").output().unwrap();
        let (out, err) =
            (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned());
        assert!(o.status.success(), "{cmd}: {out}{err}");
        (out, err)
    };
    let (out, err) = run("made");
    assert!(out.contains("unlinked-open 0"), "{out}");
    assert_eq!(counter(&err, "promoted as made (standalone)"), 3, "{err}");
    assert_eq!(counter(&err, "fsyncs on the lower file system"), 0, "{err}");
    // The copies stayed in PM; the lower file system "loses" a.log's and c.log's creations.
    std::fs::remove_file(s.lower().join("a.log")).unwrap();
    std::fs::remove_file(s.lower().join("c.log")).unwrap();
    let (out, err) = run("made-read");
    // c.log's open with O_TRUNC, the first call under the lower directory, found nothing,
    // opened the stack (c.log made again), and cut the file it opened then.
    assert!(out.contains("c.log trunc-ok True"), "{out}{err}");
    assert!(out.contains("a.log exists True ok True"), "{out}{err}");
    assert!(out.contains("b.log exists False"), "an unlinked file came back: {out}{err}");
    assert_eq!(std::fs::read(s.lower().join("a.log")).unwrap(), b"", "a.log made again below, its bytes in PM");
}

/// A listing of the lower directory that is a run's first call there shows a file made
/// again at the stack's opening (the shim opens the stack before the kernel lists).
#[test]
fn a_listing_first_shows_a_file_made_again() {
    let s = Stack::new();
    let run = |cmd: &str| {
        let o = s.cmd(true, &[cmd]).env("HASHFS_STACK_OPTIONS", "extension=log").output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(o.status.success(), "{cmd}: {out}{}", String::from_utf8_lossy(&o.stderr));
        out
    };
    run("made");
    std::fs::remove_file(s.lower().join("a.log")).unwrap();
    let out = run("made-list");
    assert!(out.contains("listed ['a.log', 'c.log']"), "{out}");
}

/// Reads of a file below lower its Sync Factor in the shim too (issue 58), though they
/// take no lock: counted apart and applied at the next fsync. (While no file is promoted
/// the shim leaves every call to the kernel: "quiet" is promoted first; the directory
/// rule is off, so that "read" is promoted by its own fsyncs.)
#[test]
fn reads_of_a_file_below_lower_its_sync_factor() {
    let s = Stack::new();
    let o = s.cmd(true, &["reads"]).env("HASHFS_STACK_OPTIONS", "dir_rule=off").output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    let sf = |name: &str| -> f64 {
        let line =
            err.lines().find(|l| l.contains(&format!("/{name}  size"))).unwrap_or_else(|| panic!("{name}: {err}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert_eq!(counter(&err, "promotions"), 2, "{err}");
    // 39 qualifying fsyncs each; "read" also 200 reads before its promotion: 0.95^200 of
    // what it had then.
    assert!(sf("read") < sf("quiet") - 0.05, "reads below left the Sync Factor as it was: {err}");
}

/// Sync Factors persist from one run to the next (issue 58, `hashfs-spfs/src/saved_profiles.rs`):
/// files kept in PM at exit come back in the next process with the factors they had, not
/// the value a promotion leaves (0.785).
#[test]
fn sync_factors_come_back_in_the_next_run() {
    let s = Stack::new();
    let run = |args: &[&str]| {
        let o = s.cmd(true, args).env("HASHFS_STACK_OPTIONS", "dir_rule=off").output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "{err}");
        err
    };
    let sf = |err: &str, name: &str| -> String {
        let line =
            err.lines().find(|l| l.contains(&format!("/{name}  size"))).unwrap_or_else(|| panic!("{name}: {err}"));
        line.rsplit(' ').next().unwrap().to_string()
    };
    let first = run(&["reads"]);
    let (quiet, read) = (sf(&first, "quiet"), sf(&first, "read"));
    assert_ne!(quiet, read, "{first}");
    let next = run(&["touch"]); // uses neither file
    assert_eq!((sf(&next, "quiet"), sf(&next, "read")), (quiet, read), "{next}");
}

fn message(n: usize) -> Vec<u8> {
    format!("message {n:05}\n").into_bytes().repeat(300 + n % 400)
}

/// A power cut of both sides at once under a program that uses the stack in its own
/// process (issue 58, item 5, for the shim): `stack_ops.py powercut` delivers messages into
/// a directory that turns hot, appends to 100 messages delivered there first and to a log,
/// over ext4 on a loop device (`support/loop_ext4.rs`), and prints each write its
/// fdatasync acknowledged. The process is stopped (SIGSTOP: PM and the lower disk stay as
/// they are), the loop device's backing file and the PM image are copied, and a stack over
/// the copies must show every acknowledged write.
#[test]
fn a_power_cut_of_both_sides_loses_no_acknowledged_fsync_in_the_process() {
    if let Some(why) = loop_ext4::missing() {
        skip::skip(why);
        return;
    }
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let d = dir.path();
    let (backing, cut, image, pm_cut, lower) =
        (d.join("lower.img"), d.join("lower-cut.img"), d.join("pm.img"), d.join("pm-cut.img"), d.join("lower"));
    std::fs::File::create(&backing).unwrap().set_len(256 << 20).unwrap();
    let opts = hashfs::FormatOptions { mapping: hashfs::MappingKind::ExtentHash, ..Default::default() };
    hashfs::FileSystem::format_file(&image, 64 << 20, &opts, &|_, _| {}).unwrap();
    let acks = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    {
        let _ext4 = loop_ext4::Ext4::up(&backing, &lower, true);
        let mut child = Command::new(python())
            .arg(SCRIPT)
            .arg("powercut")
            .arg(&lower)
            .env("LD_PRELOAD", shim_path())
            .env("HASHFS_IMAGE", &image)
            .env("HASHFS_LOWER", &lower)
            .env("HASHFS_STACK_OPTIONS", "promote_after=5,sf_limit=none")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let a = acks.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                a.lock().unwrap().push(line);
            }
        });
        std::thread::sleep(std::time::Duration::from_millis(1500));
        // SAFETY: a signal to our child.
        unsafe { libc::kill(child.id() as i32, libc::SIGSTOP) };
        std::thread::sleep(std::time::Duration::from_millis(200)); // the lines it wrote, read
        let taken = acks.lock().unwrap().clone();
        std::fs::copy(&backing, &cut).unwrap();
        std::fs::copy(&image, &pm_cut).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        reader.join().unwrap();
        *acks.lock().unwrap() = taken;
    }
    let acks = acks.lock().unwrap().clone();
    let (mut delivered, mut appended, mut logged) = (0, vec![0usize; 100], 0);
    for l in &acks {
        let f: Vec<usize> = l.split_whitespace().skip(1).map(|x| x.parse().unwrap()).collect();
        match l.as_bytes()[0] {
            b'D' => delivered = f[0] + 1,
            b'A' => appended[f[0]] = f[1] + 1,
            _ => logged = f[0] + 1,
        }
    }
    assert!(delivered > 10, "{delivered} messages delivered");
    let _ext4 = loop_ext4::Ext4::up(&cut, &lower, false);
    let dev = hashfs::pm::MmapDevice::open(&pm_cut, hashfs::pm::OpenMode::Existing).unwrap();
    let (fs, _) = hashfs::FileSystem::mount(Arc::new(dev), &|_, _| {}).unwrap();
    let cfg = hashfs_spfs::StackConfig::default();
    let (s, _) = hashfs_spfs::Stack::open(fs, &lower, cfg).unwrap();
    let view = |path: &Path| -> Vec<u8> {
        let Ok(f) = std::fs::File::open(path) else { return Vec::new() };
        let m = f.metadata().unwrap();
        let sh = s.state((std::os::unix::fs::MetadataExt::dev(&m), std::os::unix::fs::MetadataExt::ino(&m)));
        let mut st = sh.lock();
        let size = st.pm.as_ref().map_or(m.len(), |p| p.size) as usize;
        let mut buf = vec![0u8; size];
        let n = s.read(&mut st, &f, 0, &mut buf).unwrap();
        buf.truncate(n);
        buf
    };
    let bx = lower.join("box");
    for n in 0..delivered {
        let got = view(&bx.join(format!("new{n:05}")));
        assert!(got == message(1000 + n), "delivered message {n}: {} bytes after the cut", got.len());
    }
    for (i, &n) in appended.iter().enumerate() {
        let got = view(&bx.join(format!("old{i:03}")));
        let mut want = message(i);
        for k in 0..n {
            want.extend(format!("[record {k} of {i}]\n").into_bytes());
        }
        assert!(
            got.starts_with(&want),
            "old message {i}: {} bytes after the cut, {} acknowledged",
            got.len(),
            want.len()
        );
    }
    let got = view(&lower.join("log"));
    let want: Vec<u8> = (0..logged).flat_map(|k| format!("log record {k:06}\n").into_bytes().repeat(20)).collect();
    assert!(got.starts_with(&want), "log: {} bytes after the cut, {} acknowledged", got.len(), want.len());
    // The paths taken: messages made in PM, old ones promoted at their opens.
    let in_pm = |name: String| {
        let m = std::fs::metadata(bx.join(name)).unwrap();
        let k = (std::os::unix::fs::MetadataExt::dev(&m), std::os::unix::fs::MetadataExt::ino(&m));
        s.state(k).lock().pm.is_some()
    };
    let made = (0..delivered).filter(|&n| in_pm(format!("new{n:05}"))).count();
    let settled = (0..100).filter(|&i| in_pm(format!("old{i:03}"))).count();
    eprintln!(
        "power cut: {delivered} messages ({made} in PM), {} appends ({settled} old messages in PM), {logged} log records found",
        appended.iter().sum::<usize>()
    );
    assert!(made > 0 && settled > 0, "{made} messages made in PM, {settled} old ones promoted");
}
