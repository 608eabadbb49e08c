//! Many processes on one image through the shim (issue 55): a shell and the programs it
//! starts, a second program while the first holds files open, appends from two processes,
//! and record locks that exclude another process; an image of the regions placement. An
//! image whose mapping is not shared yet is still used by one process at a time.

mod common;

use common::{image, image_in, p};
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

#[test]
fn a_shell_and_the_programs_it_starts_share_the_image() {
    let img = image();
    let script = format!(
        "set -e; echo hi > {a}; cat {a}; cat {a} | wc -c; cp {a} {b}; mkdir {d}; touch {d}/x; mv {d}/x {d}/y; ls {d}; \
         rm {d}/y; rmdir {d}; ls {root}; echo a-longer-line > {b}; echo x > {b}; cat {b}",
        a = p("/a"),
        b = p("/b"),
        d = p("/d"),
        root = p("/"),
    );
    let out = img.ok("bash", &["-c", &script]);
    // The last `>` truncates the file that exists; the first made its file and
    // truncated nothing.
    assert_eq!(out, "hi\n3\ny\na\nb\nx\n");
    img.fsck_clean();
}

/// Programs that run at once on one image: `tar c | tar x` (a reader and a writer of the
/// image in one pipeline), `find | xargs`, `cp -a`.
#[test]
fn pipelines_of_programs_on_one_image_at_once() {
    let img = image();
    let script = format!(
        "set -e -o pipefail; mkdir -p {src}/sub; for i in $(seq 1 40); do echo line$i > {src}/f$i; done; \
         echo deep > {src}/sub/g; ln -s f1 {src}/link; \
         tar -C {src} -cf - . | tar -C {dst} -xf -; \
         find {dst} -name 'f*' | sort | xargs cat | wc -l; cat {dst}/sub/g; readlink {dst}/link; \
         cp -a {src} {copy}; diff -r {src} {copy} && echo same",
        src = p("/src"),
        dst = p("/dst"),
        copy = p("/copy"),
    );
    let out = img.ok("bash", &["-c", &format!("mkdir {}; {script}", p("/dst"))]);
    assert_eq!(out, "40\ndeep\nf1\nsame\n");
    let out = img.ok("bash", &["-c", &format!("find {} -type f | wc -l; ls {} | wc -l", p("/dst"), p("/copy"))]);
    assert_eq!(out, "41\n42\n", "every file reached the other side");
    img.fsck_clean();
}

#[test]
fn a_second_program_uses_the_image_while_the_first_holds_files_open() {
    let img = image();
    let mut first = img
        .cmd("python3")
        .args([
            "-c",
            &format!(
                "import sys, time\nf = open('{}', 'w'); f.write('x'); f.flush(); print('ready', flush=True)\n\
                 sys.stdin.readline(); f.write('y'); f.close(); print(open('{}').read(), flush=True)",
                p("/held"),
                p("/other")
            ),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(first.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "ready");
    assert_eq!(img.ok("cat", &[&p("/held")]), "x", "a write of a program still running");
    img.ok("bash", &["-c", &format!("echo from-the-second > {}", p("/other"))]);
    std::io::Write::write_all(first.stdin.as_mut().unwrap(), b"\n").unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "from-the-second", "a file another program made");
    assert!(first.wait().unwrap().success());
    assert_eq!(img.ok("cat", &[&p("/held")]), "xy");
    img.fsck_clean();
}

#[test]
fn appends_from_two_processes_at_once_lose_nothing() {
    let img = image();
    let script = |who: &str| {
        format!(
            "import os\nfd = os.open('{}', os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)\n\
             for i in range(400):\n    os.write(fd, b'{who}%04d' % i + b'.' * 50 + b'\\n')\n",
            p("/log")
        )
    };
    let kids: Vec<_> =
        ["a", "b"].iter().map(|w| img.cmd("python3").args(["-c", &script(w)]).spawn().unwrap()).collect();
    for mut k in kids {
        assert!(k.wait().unwrap().success());
    }
    let log = img.ok("cat", &[&p("/log")]);
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 800, "an append overwrote another");
    for who in ["a", "b"] {
        let mine: Vec<&str> = lines.iter().filter(|l| l.starts_with(who)).copied().collect();
        assert_eq!(mine.len(), 400);
        for (i, l) in mine.iter().enumerate() {
            assert_eq!(*l, format!("{who}{i:04}{}", ".".repeat(50)), "appends of one process keep their order");
        }
    }
    img.fsck_clean();
}

/// One process saves a file the atomic way (a temporary written whole, renamed over the
/// name) while another reads the name: every read is one save whole. The reader's open
/// resolved the name and opened its inode in two holds of the image lock, so a rename
/// over the name and the next temporary's create between them gave the freed inode number
/// to a new, empty file, which the open then opened: 11 to 57 of 300 to 3,000 reads were
/// empty or another save's in each of four runs by hand, before the open held the lock
/// across both (`FileSystem::hold_image`).
#[test]
fn an_atomic_save_is_read_whole_by_another_process() {
    const PROG: &str = r#"
import os, sys, time
def content(i): return (b'%07d\n' % i) * 1024
t, tmp, n = sys.argv[2], sys.argv[2] + '.tmp', 2000
if sys.argv[1] == 'first':
    open(t, 'wb').write(content(0))
elif sys.argv[1] == 'save':
    for i in range(1, n + 1):
        with open(tmp, 'wb') as f: f.write(content(i))
        os.rename(tmp, t)
else:
    bad, reads, t0 = [], 0, time.time()
    while time.time() - t0 < 20:
        b = open(t, 'rb').read()
        reads += 1
        if not b[:7].isdigit() or b != content(int(b[:7])): bad.append(len(b))
        if b[:7] == b'%07d' % n: break
    print(reads, bad[:5], len(bad))
"#;
    let img = image();
    let t = p("/t");
    img.ok("python3", &["-c", PROG, "first", &t]);
    let reader = img.cmd("python3").args(["-c", PROG, "read", &t]).stdout(Stdio::piped()).spawn().unwrap();
    let saver = img.cmd("python3").args(["-c", PROG, "save", &t]).status().unwrap();
    assert!(saver.success());
    let out = reader.wait_with_output().unwrap();
    assert!(out.status.success());
    let out = String::from_utf8_lossy(&out.stdout);
    assert!(out.trim_end().ends_with("[] 0"), "reads, the first torn ones' lengths, how many: {out}");
    img.fsck_clean();
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
        assert!(c.wait().unwrap().success());
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
    assert!(c.0.wait().unwrap().success());
    img.fsck_clean();
}

/// A POSIX lock call under way (another process holds the range, so this thread waits in
/// the kernel) keeps every descriptor of the image open, as a lock held does: the kernel
/// would drop a lock it grants to the waiting call at any close of one, and the call notes
/// its inode only once it returns. Twenty `flock`ed descriptions closed meanwhile keep
/// their descriptors (sixteen spares and four deferred) instead of closing the four past
/// the spares.
#[test]
fn a_posix_lock_call_under_way_keeps_the_images_descriptors() {
    let img = image();
    img.ok("bash", &["-c", &format!("for f in a m{{0..19}}; do echo data > {}/$f; done", p(""))]);
    let blocker = format!(
        "import fcntl, sys\na = open('{root}/a', 'r+'); fcntl.lockf(a, fcntl.LOCK_EX)\n\
         print('held', flush=True); sys.stdin.readline()\n",
        root = p("")
    );
    let (mut b, mut held) = Killed::spawn(img.cmd("python3").args(["-c", &blocker]));
    assert_eq!(held.next().unwrap().unwrap(), "held");
    let waiter = format!(
        "import fcntl, os, sys, threading, time\n\
         IMG = os.path.realpath(sys.argv[1])\n\
         def image_fds():\n    n = 0\n    for fd in os.listdir('/proc/self/fd'):\n        \
         try:\n            n += os.path.realpath('/proc/self/fd/' + fd) == IMG\n        except OSError: pass\n    return n\n\
         a = open('{root}/a', 'r+')\n\
         t = threading.Thread(target=lambda: fcntl.lockf(a, fcntl.LOCK_EX)); t.start()\n\
         time.sleep(0.5)\n\
         assert t.is_alive(), 'the lock was granted while another process held it'\n\
         before = image_fds()\n\
         many = [open('{root}/m%d' % i, 'r+') for i in range(20)]\n\
         for m in many: fcntl.flock(m, fcntl.LOCK_EX)\n\
         for m in many: m.close()\n\
         print(image_fds() - before, flush=True)\n\
         sys.stdin.readline(); t.join()\n",
        root = p("")
    );
    let (mut w, mut kept) = Killed::spawn(img.cmd("python3").args(["-c", &waiter, img.path.to_str().unwrap()]));
    let got = kept.next().unwrap().unwrap();
    // Let both go: the blocker unlocks by exiting, the waiter's lock is granted.
    b.go_on();
    assert!(b.0.wait().unwrap().success());
    w.go_on();
    assert!(w.0.wait().unwrap().success());
    assert_eq!(got, "20", "descriptors of the image kept while a POSIX lock call waited");
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
    assert!(h.0.wait().unwrap().success());
}

/// An image of HashFS's regions placement (issue 57), whose open groups, claims and spills
/// live in the shared region: a shell's programs write enough small files to open groups
/// (each opening moving blocks of files another process reads next), copy them through a
/// pipeline, and a file one program writes in whole 2 MiB chunks (each write claiming a
/// group) is read by the next.
#[test]
fn programs_share_an_image_of_the_regions_placement() {
    let opts = hashfs::FormatOptions { placement: hashfs::HashPlacement::Regions, ..Default::default() };
    let img = image_in(&std::env::temp_dir(), 64 << 20, &opts);
    let script = format!(
        "set -e -o pipefail; mkdir {src} {dst}; for i in $(seq 1 300); do head -c $((4096 + i * 37)) /dev/urandom > {src}/f$i; done; \
         tar -C {src} -cf - . | tar -C {dst} -xf -; diff -r {src} {dst} && echo same; \
         python3 -c 'import os, sys; f = open(sys.argv[1], \"wb\"); [f.write(os.urandom(2 << 20)) for _ in range(3)]' {big}; sha256sum < {big} > {sum}; sha256sum < {big} | cmp - {sum} && echo whole",
        src = p("/src"),
        dst = p("/dst"),
        big = p("/big"),
        sum = p("/big.sum"),
    );
    assert_eq!(img.ok("bash", &["-c", &script]), "same\nwhole\n");
    // Another program, after those ended, finds everything where they left it.
    let out = img.ok(
        "bash",
        &[
            "-c",
            &format!("ls {} | wc -l; sha256sum < {} | cmp - {} && echo whole", p("/dst"), p("/big"), p("/big.sum")),
        ],
    );
    assert_eq!(out, "300\nwhole\n");
    let dev = std::sync::Arc::new(hashfs::pm::MmapDevice::open(&img.path, hashfs::pm::OpenMode::Existing).unwrap());
    let (fs, _) = hashfs::FileSystem::mount(dev, &|_, _| {}).unwrap();
    let (open, _) = fs.open_groups().unwrap();
    assert!(open > 2, "the small files opened groups ({open} open)");
    assert_eq!(fs.claimed_groups(), Some(3), "the large file's chunks claimed groups");
    fs.unmount().unwrap();
    img.fsck_clean();
}

/// An image whose mapping is not shared by many processes yet: the first program owns it
/// and a second is refused with EBUSY until it exits.
#[test]
fn a_second_process_is_refused_on_an_image_not_shared_yet() {
    let opts = hashfs::FormatOptions { mapping: hashfs::MappingKind::ExtentTree, ..Default::default() };
    let img = image_in(&std::env::temp_dir(), 64 << 20, &opts);
    let mut owner = img
        .cmd("python3")
        .args([
            "-c",
            &format!(
                "import time; f = open('{}', 'w'); f.write('x'); f.flush(); print('ready', flush=True); time.sleep(3)",
                p("/held")
            ),
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(owner.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    let o = img.run("cat", &[&p("/held")]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("in use by another process") && err.contains("Device or resource busy"), "{err}");
    assert!(owner.wait().unwrap().success());
    assert_eq!(img.ok("cat", &[&p("/held")]), "x");
    img.fsck_clean();
}

/// SQLite with two writer processes, in rollback-journal and in WAL mode (WAL's index is
/// a file both map, and both lock): no row lost, the database whole.
#[test]
fn sqlite_with_two_writer_processes_loses_no_row() {
    for mode in ["delete", "wal"] {
        let img = image();
        let db = p("/t.db");
        let setup = format!(
            "import sqlite3\ncon = sqlite3.connect('{db}')\ncon.execute('pragma journal_mode={mode}')\n\
             con.execute('create table t(who text, i int)')\ncon.commit()"
        );
        img.ok("python3", &["-c", &setup]);
        let writer = |who: &str| {
            format!(
                "import sqlite3\ncon = sqlite3.connect('{db}', timeout=60, isolation_level=None)\n\
                 for i in range(150):\n    con.execute('begin immediate')\n    \
                 con.execute('insert into t values (?, ?)', ('{who}', i))\n    con.execute('commit')\n"
            )
        };
        let kids: Vec<_> =
            ["a", "b"].iter().map(|w| img.cmd("python3").args(["-c", &writer(w)]).spawn().unwrap()).collect();
        for mut k in kids {
            assert!(k.wait().unwrap().success(), "{mode}: a writer failed");
        }
        let check = format!(
            "import sqlite3\ncon = sqlite3.connect('{db}')\nprint(con.execute('pragma integrity_check').fetchone()[0])\n\
             print(con.execute('select who, count(*), sum(i) from t group by who order by who').fetchall())"
        );
        assert_eq!(img.ok("python3", &["-c", &check]), "ok\n[('a', 150, 11175), ('b', 150, 11175)]\n", "{mode}");
        img.fsck_clean();
    }
}

/// A file mapped shared by two processes is one set of bytes: what one stores through its
/// mapping (into a hole, which gets a block then) the other reads through its own.
#[test]
fn a_file_mapped_in_two_processes_is_one_set_of_bytes() {
    let img = image();
    let f = p("/shm");
    let first = format!(
        "import mmap, os, sys\nfd = os.open('{f}', os.O_RDWR | os.O_CREAT, 0o644)\nos.ftruncate(fd, 65536)\n\
         m = mmap.mmap(fd, 65536, mmap.MAP_SHARED)\nm[8192:8197] = b'hello'\nprint('ready', flush=True)\n\
         sys.stdin.readline()\nprint(bytes(m[16384:16389]).decode(), flush=True)"
    );
    let mut a = img.cmd("python3").args(["-c", &first]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let mut lines = BufReader::new(a.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "ready");
    let second = format!(
        "import mmap, os\nfd = os.open('{f}', os.O_RDWR)\nm = mmap.mmap(fd, 65536, mmap.MAP_SHARED)\n\
         print(bytes(m[8192:8197]).decode())\nm[16384:16389] = b'world'\nm.flush()"
    );
    assert_eq!(img.ok("python3", &["-c", &second]), "hello\n", "the first's store, through the second's mapping");
    std::io::Write::write_all(a.stdin.as_mut().unwrap(), b"\n").unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "world", "the second's store, through the first's mapping");
    assert!(a.wait().unwrap().success());
    img.fsck_clean();
}

/// A program's own `atexit` handler runs after the thread's storage is torn down and
/// before the shim's exit work (the library's destructor): it still has the image, and its
/// nested calls (a rmdir resolves the parent inside its call) do not wait on the image
/// lock they hold (initdb removes its data directory so after a failed start).
#[test]
fn a_programs_atexit_handler_still_has_the_image() {
    let img = image();
    let dir = tempfile::tempdir().unwrap();
    let Some(prog) = common::c_program(
        dir.path(),
        "atexit",
        r#"#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
static const char *base;
static char d[4096], f[4096];
static void cleanup(void) {
    int ok = unlink(f) == 0 && rmdir(d) == 0 && access(d, F_OK) != 0;
    FILE *out = fopen(base, "w");
    if (out) { fputs(ok ? "cleaned" : "left", out); fclose(out); }
}
int main(int argc, char **argv) {
    base = argv[2];
    snprintf(d, sizeof d, "%s/work", argv[1]);
    snprintf(f, sizeof f, "%s/work/tmp", argv[1]);
    if (mkdir(d, 0755) != 0) return 2;
    FILE *t = fopen(f, "w");
    if (!t) return 3;
    fputs("scratch", t);
    fclose(t);
    atexit(cleanup);
    return 0;
}
"#,
    ) else {
        return;
    };
    let out = img.run("timeout", &["5", prog.to_str().unwrap(), &p(""), &p("/report")]);
    assert!(out.status.success(), "the program hung or failed: {out:?}");
    assert_eq!(img.ok("cat", &[&p("/report")]), "cleaned");
    img.fsck_clean();
}

/// Two processes open the same new names with O_CREAT (no O_EXCL) in one order, each
/// racing the other to make them: every open succeeds, whichever made the file. An open
/// that finds a name free and then loses the create to the other process opens what the
/// other made (before, it failed with EEXIST, and SQLite, which opens its WAL and its
/// shared-memory file that way and falls back to read-only on any failure, stopped with
/// "attempt to write a readonly database"). The window is narrow (this test hit it in
/// two runs of three before the fix), so the planted `create-lost-not-retried` is
/// checked by a unit test that stops an open in it (`fs/race_point.rs`).
#[test]
fn two_processes_creating_one_name_both_open_it() {
    let img = image();
    img.ok("mkdir", &[&p("/d")]);
    let opener = format!(
        "import os, sys\nbad = 0\nfor i in range(1500):\n    try:\n        os.close(os.open('{d}/n%d' % i, os.O_RDWR | os.O_CREAT, 0o644))\n    except OSError as e:\n        bad += 1\n        print(e, file=sys.stderr)\nprint(bad)",
        d = p("/d")
    );
    let a = img
        .cmd("python3")
        .args(["-c", &opener])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let b = img.cmd("python3").args(["-c", &opener]).output().unwrap();
    let a = a.wait_with_output().unwrap();
    for out in [a, b] {
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "0\n",
            "opens failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    img.fsck_clean();
}

/// One process saves a file the atomic way, again and again (write a temporary file,
/// rename it over the name), while another stats, lists and reads the name: rename
/// replaces the name atomically, so no call may fail (stat, listxattr, open). (Each resolves its path
/// and then uses the inode, two calls that another process's rename can come between: the
/// inode is then freed, and the path is resolved again rather than fail with ENOENT or
/// ESTALE.)
#[test]
fn a_name_renamed_over_in_one_process_always_opens_in_another() {
    let img = image();
    img.ok("python3", &["-c", &format!("open('{}', 'w').write('0')", p("/f"))]);
    let saver = format!(
        "import os\nfor i in range(3000):\n    open('{t}', 'w').write(str(i))\n    os.rename('{t}', '{f}')",
        t = p("/t"),
        f = p("/f")
    );
    let reader = format!(
        "import os, sys\nbad = 0\nfor i in range(6000):\n    try:\n        os.stat('{f}')\n        os.listxattr('{f}')\n        open('{f}').read()\n    except OSError as e:\n        bad += 1\n        print(e, file=sys.stderr)\nprint(bad)",
        f = p("/f")
    );
    let mut s = img.cmd("python3").args(["-c", &saver]).spawn().unwrap();
    let out = img.cmd("python3").args(["-c", &reader]).output().unwrap();
    assert!(s.wait().unwrap().success(), "the saver failed");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "0\n", "calls failed: {}", String::from_utf8_lossy(&out.stderr));
    img.fsck_clean();
}
