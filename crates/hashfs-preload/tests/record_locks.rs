//! Record locks between the processes on one image through the shim (issue 55): `fcntl`'s
//! POSIX and OFD locks, `lockf` and `flock` exclude another process, a close drops a
//! process's locks on its file, a description's go with its last holder, a killed holder's
//! go at once, POSIX locks stay across `execve`, a wait that closes a cycle is refused and
//! a signal ends a wait as Linux ends it. All of them lie in the image's shared region
//! (`hashfs::share::lock_table`).

mod common;
use common::BoundedChild;

use common::{image, p};
use std::io::{BufRead, BufReader, Lines};
use std::process::{ChildStdout, Command, Stdio};

/// A child process killed when the test ends, passing or failing: a failed assertion must
/// not leave a holder waiting on its standard input, keeping the image's region.
struct Killed(std::process::Child);

impl Killed {
    /// Starts `cmd` with its standard input and output piped: the child, and its output's
    /// lines (the steps it reports).
    fn spawn(cmd: &mut Command) -> (Killed, Lines<BufReader<ChildStdout>>) {
        let mut c = Killed(cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap());
        let lines = BufReader::new(c.0.stdout.take().unwrap()).lines();
        (c, lines)
    }

    /// Lets it go on: a line on its standard input.
    fn go_on(&mut self) {
        std::io::Write::write_all(self.0.stdin.as_mut().unwrap(), b"\n").unwrap();
    }
}

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Process A holds a write lock; process B is refused, sees A's pid, and gets the lock
/// once A closes the file (POSIX) or its description (flock, OFD).
#[test]
fn record_locks_and_flock_exclude_another_process() {
    let img = image();
    img.ok("bash", &["-c", &format!("echo data > {}", p("/db"))]);
    let holder = |how: &str| {
        let take = match how {
            "posix" => "fcntl.lockf(f, fcntl.LOCK_EX, 10, 0)",
            "flock" => "fcntl.flock(f, fcntl.LOCK_EX)",
            _ => unreachable!(),
        };
        let mut c = img
            .cmd("python3")
            .args([
                "-c",
                &format!(
                    "import fcntl, os, sys\nf = open('{}', 'r+')\n{take}\nprint(os.getpid(), flush=True)\n\
                     sys.stdin.readline()\nf.close()\nprint('closed', flush=True)\nsys.stdin.readline()",
                    p("/db")
                ),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(c.stdout.take().unwrap()).lines();
        let pid: u32 = lines.next().unwrap().unwrap().parse().unwrap();
        (c, lines, pid)
    };
    let try_lock = |how: &str| {
        let code = match how {
            "posix" => format!(
                "import fcntl, struct\nf = open('{db}', 'r+')\n\
                 got = fcntl.fcntl(f, fcntl.F_GETLK, struct.pack('hhqqi', fcntl.F_WRLCK, 0, 5, 1, 0))\n\
                 t, _, s, l, pid = struct.unpack('hhqqi', got)\nprint(t == fcntl.F_WRLCK, s, l, pid)\n\
                 try:\n    fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 5); print('locked')\n\
                 except OSError as e:\n    print('refused')",
                db = p("/db")
            ),
            _ => format!(
                "import fcntl\nf = open('{}')\ntry:\n    fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB); print('locked')\n\
                 except OSError as e:\n    print('refused')",
                p("/db")
            ),
        };
        img.ok("python3", &["-c", &code])
    };
    for how in ["posix", "flock"] {
        let (mut c, mut lines, pid) = holder(how);
        let out = try_lock(how);
        if how == "posix" {
            assert_eq!(out, format!("True 0 10 {pid}\nrefused\n"), "F_GETLK names the holder, F_SETLK is refused");
        } else {
            assert_eq!(out, "refused\n", "{how}");
        }
        std::io::Write::write_all(c.stdin.as_mut().unwrap(), b"\n").unwrap();
        assert_eq!(lines.next().unwrap().unwrap(), "closed");
        let after = try_lock(how);
        assert!(after.ends_with("locked\n") && !after.contains("refused"), "{how} after the close: {after}");
        std::io::Write::write_all(c.stdin.as_mut().unwrap(), b"\n").unwrap();
        assert!(c.wait_bounded().success());
    }
    img.fsck_clean();
}

/// A process's POSIX locks are the process's until it closes a descriptor of *their* file:
/// a `flock` or an OFD lock it takes on other files, and the close of those files, leave
/// them held (every file's locks lie in the one image file, and the kernel drops a
/// process's POSIX locks on a file at the close of any of its descriptors of it). The
/// descriptor a closed description leaves for the next one has no lock left; one that a
/// forked child shares keeps the child's `flock` until the child closes it, and a child's
/// new description never shares a descriptor with its parent's.
#[test]
fn posix_locks_outlive_the_processs_flock_and_ofd_locks_on_other_files() {
    let img = image();
    img.ok("bash", &["-c", &format!("for f in a b c d e m{{0..19}}; do echo data > {}/$f; done", p(""))]);
    let holder = format!(
        "import fcntl, os, struct, sys\n\
         P = '{root}'\n\
         def step(name):\n    print(name, flush=True)\n    sys.stdin.readline()\n\
         a = open(P + '/a', 'r+'); fcntl.lockf(a, fcntl.LOCK_EX)\n\
         b = open(P + '/b', 'r+'); fcntl.flock(b, fcntl.LOCK_EX)\n\
         c = open(P + '/c', 'r+'); fcntl.fcntl(c, fcntl.F_OFD_SETLK, struct.pack('hhqqi', fcntl.F_WRLCK, 0, 0, 0, 0))\n\
         step('taken')\n\
         b.close(); c.close()\n\
         step('closed')\n\
         d = open(P + '/d', 'r+'); fcntl.flock(d, fcntl.LOCK_EX)\n\
         step('reused')\n\
         many = [open(P + '/m%d' % i, 'r+') for i in range(20)]\n\
         for m in many: fcntl.flock(m, fcntl.LOCK_EX)\n\
         for m in many: m.close()\n\
         step('many closed')\n\
         e = open(P + '/e', 'r+'); fcntl.flock(e, fcntl.LOCK_EX)\n\
         r, w = os.pipe()\n\
         if os.fork() == 0:\n    os.close(w); os.read(r, 1); e.close(); os._exit(0)\n\
         e.close()\n\
         step('forked')\n\
         os.write(w, b'x'); os.wait()\n\
         step('child closed')\n\
         d.close()\n\
         r2, w2 = os.pipe()\n\
         if os.fork() == 0:\n    os.close(w); c2 = open(P + '/c', 'r+'); fcntl.flock(c2, fcntl.LOCK_EX); os.write(w2, b'x'); os.read(r, 1); os._exit(0)\n\
         os.read(r2, 1)\n\
         c = open(P + '/c', 'r+')\n\
         try:\n    fcntl.flock(c, fcntl.LOCK_EX | fcntl.LOCK_NB); step('c granted beside the child')\n\
         except OSError:\n    step('c refused beside the child')\n\
         os.write(w, b'x'); os.wait()\n",
        root = p("")
    );
    let (mut c, mut lines) = Killed::spawn(img.cmd("python3").args(["-c", &holder]));
    // What another process gets, without waiting, on each file: "x" refused, "-" free.
    let probe = || {
        let code = format!(
            "import fcntl\nout = ''\nfor f in 'abcde':\n    \
             h = open('{root}/' + f, 'r+')\n    \
             try:\n        fcntl.lockf(h, fcntl.LOCK_EX | fcntl.LOCK_NB); lk = '-'\n    except OSError: lk = 'x'\n    \
             try:\n        fcntl.flock(h, fcntl.LOCK_EX | fcntl.LOCK_NB); fl = '-'\n    except OSError: fl = 'x'\n    \
             out += f + lk + fl + ' '\n    h.close()\nprint(out.strip())",
            root = p("")
        );
        img.ok("python3", &["-c", &code]).trim().to_string()
    };
    // More descriptions closed than spares are kept: every one's flock goes all the same.
    let many = format!(
        "import fcntl\nrefused = 0\nfor i in range(20):\n    h = open('{root}/m%d' % i, 'r+')\n    \
         try:\n        fcntl.flock(h, fcntl.LOCK_EX | fcntl.LOCK_NB)\n    except OSError:\n        refused += 1\n    \
         h.close()\nprint(refused)",
        root = p("")
    );
    let mut step = |name: &str, want: &str| {
        assert_eq!(lines.next().unwrap().unwrap(), name);
        assert_eq!(probe(), want, "{name}: each file's (POSIX lock, flock) for another process");
        if name == "many closed" {
            assert_eq!(img.ok("python3", &["-c", &many]), "0\n", "flocks of closed descriptions still held");
        }
        c.go_on();
    };
    // (An OFD lock and a POSIX lock meet, as on Linux; a flock meets neither.)
    step("taken", "ax- b-x cx- d-- e--");
    step("closed", "ax- b-- c-- d-- e--");
    step("reused", "ax- b-- c-- d-x e--");
    step("many closed", "ax- b-- c-- d-x e--");
    step("forked", "ax- b-- c-- d-x e-x");
    step("child closed", "ax- b-- c-- d-x e--");
    // A child's new description never takes a descriptor the parent kept for its own next
    // ones: their `flock`s meet.
    step("c refused beside the child", "ax- b-- c-x d-- e--");
    assert!(c.0.wait_bounded().success());
    img.fsck_clean();
}

/// `lockf`, which glibc runs through its own internal `fcntl` (before, it reached the
/// placeholder and failed with EBADF): a lock one process takes refuses another's
/// F_TLOCK and F_TEST, its own F_TEST says free, and F_ULOCK lets the other in.
#[test]
fn lockf_locks_exclude_another_process() {
    const LOCKF: &str = r#"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
static const char *what(int r) { return r == 0 ? "ok" : strerror(errno); }
int main(int argc, char **argv) {
    int fd = open(argv[1], O_RDWR);
    if (fd < 0) { perror("open"); return 1; }
    if (argv[2][0] == 'h') {
        printf("tlock %s\n", what(lockf(fd, F_TLOCK, 10)));
        printf("own test %s\n", what(lockf(fd, F_TEST, 10)));
        fflush(stdout);
        getchar();
        printf("ulock %s\n", what(lockf(fd, F_ULOCK, 10)));
        fflush(stdout);
        getchar();
    } else {
        printf("test %s, ", what(lockf(fd, F_TEST, 0)));
        printf("tlock %s\n", what(lockf(fd, F_TLOCK, 0)));
    }
    return 0;
}
"#;
    let img = image();
    let Some(prog) = common::c_program(img._dir.path(), "lockf", LOCKF) else { return };
    let prog = prog.to_str().unwrap();
    img.ok("bash", &["-c", &format!("echo data > {}", p("/l"))]);
    let (mut h, mut lines) = Killed::spawn(img.cmd(prog).args([&p("/l"), "hold"]));
    assert_eq!(lines.next().unwrap().unwrap(), "tlock ok");
    assert_eq!(lines.next().unwrap().unwrap(), "own test ok");
    let other = img.ok(prog, &[&p("/l"), "try"]);
    assert!(other.starts_with("test Permission denied, tlock ") && !other.contains("tlock ok"), "{other}");
    h.go_on();
    assert_eq!(lines.next().unwrap().unwrap(), "ulock ok");
    assert_eq!(img.ok(prog, &[&p("/l"), "try"]), "test ok, tlock ok\n");
    h.go_on();
    assert!(h.0.wait_bounded().success());
}

/// A C program for the tests below: `hold`, `try`, `wait` a write lock on byte `a`;
/// `cycle` holds byte `a` and at a line waits for byte `b`; `alarm` and `alarm-restart`
/// wait for byte `a` with a timer's handler (without and with SA_RESTART) every 50 ms.
const LOCKER: &str = r#"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>
static volatile int handled;
static void on_alarm(int s) { (void)s; handled++; }
static int lk(int fd, int cmd, long s) {
    struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = s, .l_len = 1};
    return fcntl(fd, cmd, &l);
}
static const char *what(int r) { return r == 0 ? "ok" : strerror(errno); }
int main(int argc, char **argv) {
    int fd = open(argv[1], O_RDWR);
    if (fd < 0) { perror("open"); return 1; }
    const char *mode = argv[2];
    long a = argc > 3 ? atol(argv[3]) : 0, b = argc > 4 ? atol(argv[4]) : 0;
    if (!strcmp(mode, "hold")) {
        printf("held %s\n", what(lk(fd, F_SETLK, a)));
        fflush(stdout);
        getchar();
    } else if (!strcmp(mode, "try")) {
        printf("%s\n", what(lk(fd, F_SETLK, a)));
    } else if (!strcmp(mode, "wait")) {
        printf("%s\n", what(lk(fd, F_SETLKW, a)));
    } else if (!strcmp(mode, "cycle")) {
        printf("held %s\n", what(lk(fd, F_SETLK, a)));
        fflush(stdout);
        getchar();
        printf("%s\n", what(lk(fd, F_SETLKW, b)));
        fflush(stdout);
        getchar();
    } else {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_alarm;
        sa.sa_flags = strcmp(mode, "alarm-restart") == 0 ? SA_RESTART : 0;
        sigaction(SIGALRM, &sa, NULL);
        struct itimerval it = {{0, 50000}, {0, 50000}};
        setitimer(ITIMER_REAL, &it, NULL);
        int r = lk(fd, F_SETLKW, a);
        printf("%s after %s\n", what(r), handled ? "a handler" : "none");
    }
    return 0;
}
"#;

/// What `child` wrote on its standard output, once it exits; killed (and what it wrote by
/// then) if it runs past `secs` seconds: a wait that never ends fails the test instead of
/// holding it.
fn output_within(mut child: std::process::Child, secs: u64) -> String {
    let t = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() && t.elapsed().as_secs() < secs {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let _ = child.kill();
    String::from_utf8_lossy(&child.wait_with_output_bounded().stdout).into_owned()
}

/// The locker program built in `img`'s directory, and a file of the image to lock.
fn locker(img: &common::Image) -> Option<(String, String)> {
    let prog = common::c_program(img._dir.path(), "locker", LOCKER)?;
    img.ok("bash", &["-c", &format!("echo data > {}", p("/l"))]);
    Some((prog.to_str().unwrap().to_string(), p("/l")))
}

/// A holder killed with SIGKILL: a process waiting for its lock gets it, and one that
/// asks after gets it at once (its holder exited without unlocking: found gone).
#[test]
fn a_killed_holders_lock_goes_to_the_waiter_and_then_the_next() {
    let img = image();
    let Some((prog, f)) = locker(&img) else { return };
    let (mut a, mut lines) = Killed::spawn(img.cmd(&prog).args([&f, "hold", "0"]));
    assert_eq!(lines.next().unwrap().unwrap(), "held ok");
    assert_eq!(img.ok(&prog, &[&f, "try", "0"]), "Resource temporarily unavailable\n");
    let waiter = img.cmd(&prog).args([&f, "wait", "0"]).stdout(Stdio::piped()).spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    a.0.kill().unwrap();
    a.0.wait_bounded();
    assert_eq!(output_within(waiter, 10), "ok\n", "the waiter got the killed holder's lock");
    // The waiter exited holding it: the next asker finds it gone.
    assert_eq!(img.ok(&prog, &[&f, "try", "0"]), "ok\n");
    img.fsck_clean();
}

/// Two processes each holding the byte the other waits for: the second to wait is told
/// EDEADLK; once it exits, the first gets its lock.
#[test]
fn a_wait_that_closes_a_cycle_between_processes_is_refused() {
    let img = image();
    let Some((prog, f)) = locker(&img) else { return };
    let (mut a, mut a_lines) = Killed::spawn(img.cmd(&prog).args([&f, "cycle", "1", "2"]));
    let (mut b, mut b_lines) = Killed::spawn(img.cmd(&prog).args([&f, "cycle", "2", "1"]));
    assert_eq!(a_lines.next().unwrap().unwrap(), "held ok");
    assert_eq!(b_lines.next().unwrap().unwrap(), "held ok");
    let (tx, rx) = std::sync::mpsc::channel();
    for (name, mut lines) in [("a", a_lines), ("b", b_lines)] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let _ = tx.send((name, lines.next().and_then(|l| l.ok()).unwrap_or_default()));
        });
    }
    b.go_on();
    std::thread::sleep(std::time::Duration::from_millis(50));
    a.go_on();
    let wait = std::time::Duration::from_secs(10);
    let (first, said) = rx.recv_timeout(wait).expect("neither wait was refused: a deadlock");
    assert_eq!(said, "Resource deadlock avoided", "{first}");
    if first == "a" {
        a.go_on()
    } else {
        b.go_on()
    }
    let (second, said) = rx.recv_timeout(wait).expect("the other wait never ended");
    assert_eq!((second != first, said.as_str()), (true, "ok"));
    if second == "a" {
        a.go_on()
    } else {
        b.go_on()
    }
}

/// A signal's handler ends a wait with EINTR when it was installed without SA_RESTART, and
/// the wait goes on after one installed with it (as Linux has F_SETLKW).
#[test]
fn a_signal_ends_a_wait_as_linux_ends_it() {
    let img = image();
    let Some((prog, f)) = locker(&img) else { return };
    let (mut a, mut lines) = Killed::spawn(img.cmd(&prog).args([&f, "hold", "0"]));
    assert_eq!(lines.next().unwrap().unwrap(), "held ok");
    assert_eq!(img.ok(&prog, &[&f, "alarm", "0"]), "Interrupted system call after a handler\n");
    let restarted = img.cmd(&prog).args([&f, "alarm-restart", "0"]).stdout(Stdio::piped()).spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    a.go_on();
    assert_eq!(output_within(restarted, 10), "ok after a handler\n");
}

/// POSIX locks are the process's across `execve` (Linux keeps them): the new program
/// still holds its predecessor's lock until it closes a descriptor of the file.
#[test]
fn posix_locks_stay_across_exec_until_a_close() {
    let img = image();
    let Some((prog, f)) = locker(&img) else { return };
    let code = format!(
        "import fcntl, os, sys\nfd = os.open('{f}', os.O_RDWR)\nos.set_inheritable(fd, True)\n\
         fcntl.lockf(fd, fcntl.LOCK_EX, 1, 0)\n\
         os.execv(sys.executable, [sys.executable, '-c', \
         'import os, sys\\nprint(\"execd\", flush=True)\\nsys.stdin.readline()\\nos.close(%d)\\n\
         print(\"closed\", flush=True)\\nsys.stdin.readline()' % fd])"
    );
    let (mut c, mut lines) = Killed::spawn(img.cmd("python3").args(["-c", &code]));
    assert_eq!(lines.next().unwrap().unwrap(), "execd");
    assert_eq!(img.ok(&prog, &[&f, "try", "0"]), "Resource temporarily unavailable\n", "held across the exec");
    c.go_on();
    assert_eq!(lines.next().unwrap().unwrap(), "closed");
    assert_eq!(img.ok(&prog, &[&f, "try", "0"]), "ok\n", "dropped at the close");
    c.go_on();
    assert!(c.0.wait_bounded().success());
}

/// A read-only participant (one that may not write the image, nor so the region) holds its
/// read locks beside the writers' in the table (`share/read_only_locks.rs`): it sees a
/// writer's lock through F_GETLK and is refused a read lock under it, a writer is refused
/// a write lock over its read lock (and `flock` LOCK_EX over its LOCK_SH), its F_SETLKW
/// waits for the writer, and its locks go with it when it is killed. A write lock on its
/// read-only descriptor is EBADF (as Linux), a `flock` LOCK_EX ENOLCK.
#[test]
fn a_read_only_participants_read_locks_and_the_writers_exclude_each_other() {
    let img = image();
    let Some((prog, f)) = locker(&img) else { return };
    let (mut a, mut lines) = Killed::spawn(img.cmd(&prog).args([&f, "hold", "0"]));
    assert_eq!(lines.next().unwrap().unwrap(), "held ok");
    let code = format!(
        "import fcntl, os, struct, sys\nfd = os.open('{f}', os.O_RDONLY)\n\
         def lk(cmd, t, s):\n    try:\n        fcntl.fcntl(fd, cmd, struct.pack('hhqqi', t, 0, s, 1, 0)); return 'ok'\n\
         \x20   except OSError as e:\n        return os.strerror(e.errno)\n\
         def fl(op):\n    try:\n        fcntl.flock(fd, op); return 'ok'\n\
         \x20   except OSError as e:\n        return os.strerror(e.errno)\n\
         got = fcntl.fcntl(fd, fcntl.F_GETLK, struct.pack('hhqqi', fcntl.F_RDLCK, 0, 0, 1, 0))\n\
         t, _, s, l, pid = struct.unpack('hhqqi', got)\nprint(t == fcntl.F_WRLCK, s, l, pid == {pid})\n\
         print(lk(fcntl.F_SETLK, fcntl.F_RDLCK, 0), lk(fcntl.F_SETLK, fcntl.F_RDLCK, 5), \
         lk(fcntl.F_SETLK, fcntl.F_WRLCK, 5), sep=', ')\n\
         print(fl(fcntl.LOCK_SH), fl(fcntl.LOCK_EX | fcntl.LOCK_NB), sep=', ', flush=True)\n\
         sys.stdin.readline()\nprint(lk(fcntl.F_SETLKW, fcntl.F_RDLCK, 0), flush=True)\nsys.stdin.readline()",
        pid = a.0.id()
    );
    let (mut r, mut r_lines) = Killed::spawn(img.cmd("python3").args(["-c", &code]).env("HASHFS_READ_ONLY", "1"));
    assert_eq!(r_lines.next().unwrap().unwrap(), "True 0 1 True", "F_GETLK sees the writer's lock");
    assert_eq!(r_lines.next().unwrap().unwrap(), "Resource temporarily unavailable, ok, Bad file descriptor");
    assert_eq!(r_lines.next().unwrap().unwrap(), "ok, No locks available");
    assert_eq!(img.ok(&prog, &[&f, "try", "5"]), "Resource temporarily unavailable\n", "over the reader's lock");
    assert_eq!(img.ok(&prog, &[&f, "try", "6"]), "ok\n");
    let flock_ex = format!(
        "import fcntl, os\nfd = os.open('{f}', os.O_RDWR)\ntry:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB); print('ok')\n\
         except OSError as e:\n    print(os.strerror(e.errno))"
    );
    assert_eq!(img.ok("python3", &["-c", &flock_ex]), "Resource temporarily unavailable\n", "over its LOCK_SH");
    r.go_on(); // the reader waits for byte 0, which the writer holds until it exits
    std::thread::sleep(std::time::Duration::from_millis(200));
    a.go_on();
    assert!(a.0.wait_bounded().success());
    assert_eq!(r_lines.next().unwrap().unwrap(), "ok", "the reader's wait ended with the writer");
    let waiter = img.cmd(&prog).args([&f, "wait", "5"]).stdout(Stdio::piped()).spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    r.0.kill().unwrap();
    r.0.wait_bounded();
    assert_eq!(output_within(waiter, 10), "ok\n", "the killed reader's lock went with it");
    img.fsck_clean();
}

/// SQLite in a read-only process (`mode=ro`, rollback journal) reads beside a writer: at
/// once while the writer is idle, and after the writer's commit while it holds the
/// database's EXCLUSIVE lock (the reader's busy handler waits). Before its read locks lay
/// beside the writers' (2026-12-06), each read said "database is locked".
#[test]
fn sqlite_reads_in_a_read_only_process_beside_a_writer() {
    let img = image();
    let db = p("/ro.db");
    img.ok(
        "python3",
        &[
            "-c",
            &format!(
                "import sqlite3\nc = sqlite3.connect('{db}')\nc.execute('create table t(x)')\n\
              c.executemany('insert into t values(?)', [(i,) for i in range(100)])\nc.commit()"
            ),
        ],
    );
    let writer = format!(
        "import sqlite3, sys\nc = sqlite3.connect('{db}', isolation_level=None)\nprint('idle', flush=True)\n\
         sys.stdin.readline()\nc.execute('begin exclusive')\nc.execute('insert into t values(100)')\n\
         print('exclusive', flush=True)\nsys.stdin.readline()\nc.execute('commit')\nprint('committed', flush=True)\n\
         sys.stdin.readline()"
    );
    let reader = format!(
        "import sqlite3\nc = sqlite3.connect('file:{db}?mode=ro', uri=True, timeout=10)\n\
         print(c.execute('select count(*) from t').fetchone()[0])"
    );
    let read = || {
        img.cmd("python3").args(["-c", &reader]).env("HASHFS_READ_ONLY", "1").stdout(Stdio::piped()).spawn().unwrap()
    };
    let (mut w, mut lines) = Killed::spawn(img.cmd("python3").args(["-c", &writer]));
    assert_eq!(lines.next().unwrap().unwrap(), "idle");
    assert_eq!(output_within(read(), 10), "100\n", "beside an idle writer");
    w.go_on();
    assert_eq!(lines.next().unwrap().unwrap(), "exclusive");
    let waiting = read();
    std::thread::sleep(std::time::Duration::from_millis(300));
    w.go_on();
    assert_eq!(lines.next().unwrap().unwrap(), "committed");
    assert_eq!(output_within(waiting, 10), "101\n", "after the writer's commit");
    w.go_on();
    assert!(w.0.wait_bounded().success());
    img.fsck_clean();
}
