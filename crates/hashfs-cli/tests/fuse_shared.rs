//! The mount beside the shim (issue 56): a mount shares its image with shim processes
//! (`hashfs mount -o shared`, or any mount of an image they use), and each side sees the
//! other's changes at its next call; either side killed leaves the other running.

mod fuse_common;

use fuse_common::{fuse_available, hashfs, shim_bash, wait_for, Bounded, BoundedChild, Mounted};
use std::fs;
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

fn shim(image: &Path, script: &str) -> Command {
    shim_bash(image, script)
}

fn shim_ok(image: &Path, script: &str) -> String {
    let o: Output = shim(image, script).output_bounded();
    assert!(o.status.success(), "{script}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A mount of a fresh image, not started.
fn unmounted() -> Mounted {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let (image, mnt) = (dir.path().join("fs.img"), dir.path().join("mnt"));
    fs::create_dir(&mnt).unwrap();
    let st = hashfs().args(["mkfs", image.to_str().unwrap(), "--size", "64M"]).status_bounded();
    assert!(st.success());
    Mounted { dir, image, mnt, daemon: None, beside: None }
}

/// A fresh image, mounted shared.
fn mounted_shared() -> Mounted {
    let mut m = unmounted();
    m.start_with(&["-o", "shared"]);
    m
}

#[test]
fn a_shim_process_and_a_shared_mount_see_each_others_changes() {
    if !fuse_available() {
        return;
    }
    let mut m = mounted_shared();
    let img = m.image.clone();
    // Made by shim processes: seen by the mount's next lookup, stat, open and read.
    shim_ok(&img, "echo one > /pm/a && mkdir /pm/d && echo x > /pm/d/x");
    assert_eq!(fs::read_to_string(m.path("a")).unwrap(), "one\n");
    assert_eq!(fs::read_to_string(m.path("d/x")).unwrap(), "x\n");
    // A file the mount holds open, rewritten and grown by a shim process: the next read
    // through the open descriptor, and its next stat, show it.
    let f = fs::File::open(m.path("a")).unwrap();
    shim_ok(&img, "printf 'ONE and more' > /pm/a");
    let mut buf = [0u8; 32];
    let n = f.read_at(&mut buf, 0).unwrap();
    assert_eq!(&buf[..n], b"ONE and more");
    assert_eq!(f.metadata().unwrap().len(), 12);
    drop(f);
    // Names, permissions and times.
    shim_ok(&img, "mv /pm/a /pm/b && chmod 600 /pm/b && touch -m -d @1000000000 /pm/b");
    assert!(!m.path("a").exists(), "the renamed name is gone from the mount");
    let b = fs::metadata(m.path("b")).unwrap();
    assert_eq!((b.mode() & 0o7777, b.mtime(), b.len()), (0o600, 1_000_000_000, 12));
    // Made through the mount: seen by the next shim process.
    fs::write(m.path("c"), "from the mount").unwrap();
    fs::rename(m.path("b"), m.path("e")).unwrap();
    fs::set_permissions(m.path("e"), fs::Permissions::from_mode(0o640)).unwrap();
    fs::remove_dir_all(m.path("d")).unwrap();
    let out = shim_ok(&img, "cat /pm/c; echo; stat -c %a /pm/e; ls /pm");
    assert_eq!(out, "from the mount\n640\nc\ne\n");
    m.stop();
    m.fsck_clean();
}

#[test]
fn a_mount_of_an_image_that_shim_processes_use_is_shared() {
    if !fuse_available() {
        return;
    }
    let mut m = unmounted();
    let ready = m.dir.path().join("ready");
    // A shim process that has the image while the mount starts, and reads what the mount
    // wrote before it ends.
    let script = format!(
        "echo held > /pm/held && : > {r} && while [ ! -e /pm/from-mount ]; do sleep 0.05; done; cat /pm/from-mount",
        r = ready.display()
    );
    let holder: Child = shim(&m.image, &script).stdout(Stdio::piped()).spawn().unwrap();
    wait_for("the shim process", || ready.exists());
    m.start(); // no option: the image is in use, so the mount is shared
    assert_eq!(fs::read_to_string(m.path("held")).unwrap(), "held\n");
    fs::write(m.path("from-mount"), "seen").unwrap();
    let out = holder.wait_with_output_bounded();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "seen");
    m.stop();
    m.fsck_clean();
}

#[test]
fn either_side_killed_leaves_the_other_running() {
    if !fuse_available() {
        return;
    }
    let mut m = mounted_shared();
    let img = m.image.clone();
    fs::write(m.path("log"), "").unwrap();
    // The daemon killed while a shim process appends: the process goes on, loses nothing.
    let writer = shim(&img, "for i in $(seq 1 3000); do echo $i >> /pm/log; done").spawn().unwrap();
    wait_for("the first appends", || fs::metadata(m.path("log")).map(|x| x.len()).unwrap_or(0) > 100);
    m.kill_daemon();
    let st = writer.wait_with_output_bounded();
    assert!(st.status.success(), "the shim process outlives the daemon");
    assert_eq!(shim_ok(&img, "wc -l < /pm/log").trim(), "3000");
    // A new mount beside it; a shim process killed while it appends: the mount goes on.
    m.start_with(&["-o", "shared"]);
    assert_eq!(fs::read_to_string(m.path("log")).unwrap().lines().count(), 3000);
    let mut writer = shim(&img, "while :; do echo more >> /pm/log; done").spawn().unwrap();
    wait_for("more appends", || fs::metadata(m.path("log")).map(|x| x.len()).unwrap_or(0) > 20_000);
    writer.kill().unwrap();
    writer.wait_bounded();
    let text = fs::read_to_string(m.path("log")).unwrap();
    assert!(text.lines().skip(3000).all(|l| l == "more"), "every line whole");
    fs::write(m.path("after"), "the mount goes on").unwrap();
    assert_eq!(shim_ok(&img, "cat /pm/after"), "the mount goes on");
    m.stop();
    m.fsck_clean();
}

/// One side saves a file the atomic way (a temporary written whole, renamed over the
/// name) again and again while the other reads the name, both ways at once: a shim
/// process saves `s` while the test reads it through the mount, and the test saves `t`
/// through the mount while a shim process reads it. Every read is one save's bytes whole
/// (two blocks, each line naming its save), and the saves seen never go back.
#[test]
fn saves_on_either_side_are_read_whole_on_the_other() {
    if !fuse_available() {
        return;
    }
    const SAVES: u32 = 300;
    let mut m = mounted_shared();
    let img = m.image.clone();
    let content = |i: u32| format!("{i:07}\n").repeat(1024).into_bytes();
    fs::write(m.path("s"), content(0)).unwrap();
    fs::write(m.path("t"), content(0)).unwrap();
    let check = |what: &str, bytes: &[u8], last: &mut u32| {
        let i: u32 =
            std::str::from_utf8(&bytes[..bytes.len().min(7)]).ok().and_then(|t| t.parse().ok()).unwrap_or(u32::MAX);
        assert!(
            i <= SAVES && bytes == content(i).as_slice(),
            "{what}: a read of {} bytes is no save whole",
            bytes.len()
        );
        assert!(i >= *last, "{what}: save {i} read after save {last}");
        *last = i;
    };
    let program = m.dir.path().join("prog.py");
    fs::write(
        &program,
        format!(
            "import os, sys, time\n\
             def content(i): return (b'%07d\\n' % i) * 1024\n\
             if sys.argv[1] == 'save':\n\
             \x20   for i in range(1, {SAVES} + 1):\n\
             \x20       with open('/pm/s.tmp', 'wb') as f: f.write(content(i))\n\
             \x20       os.rename('/pm/s.tmp', '/pm/s')\n\
             else:\n\
             \x20   open('/pm/ready', 'w').close()\n\
             \x20   last, reads, t0 = 0, 0, time.time()\n\
             \x20   while last < {SAVES} and time.time() - t0 < 30:\n\
             \x20       b = open('/pm/t', 'rb').read()\n\
             \x20       i = int(b[:7])\n\
             \x20       assert b == content(i), 'a read of %d bytes is no save whole' % len(b)\n\
             \x20       assert i >= last, 'save %d read after save %d' % (i, last)\n\
             \x20       last, reads = i, reads + 1\n\
             \x20   assert last == {SAVES}, 'the saves through the mount stopped at %d for the shim' % last\n\
             \x20   print(reads)\n"
        ),
    )
    .unwrap();
    let run = |arg: &str| {
        shim(&img, &format!("python3 {} {arg}", program.display()))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (saver, reader) = (run("save"), run("read"));
    // The mount's saves on a thread of their own; the mount's reads on this one.
    let (mount_reads, reader) = std::thread::scope(|sc| {
        let m = &m;
        sc.spawn(move || {
            wait_for("the shim's reader", || m.path("ready").exists());
            for i in 1..=SAVES {
                fs::write(m.path("t.tmp"), content(i)).unwrap();
                fs::rename(m.path("t.tmp"), m.path("t")).unwrap();
            }
        });
        let mut saver = saver;
        let (mut last, mut reads) = (0, 0);
        while saver.try_wait().unwrap().is_none() {
            check("read through the mount", &fs::read(m.path("s")).unwrap(), &mut last);
            reads += 1;
        }
        let o = saver.wait_with_output_bounded();
        assert!(o.status.success(), "the shim's saves: {}", String::from_utf8_lossy(&o.stderr));
        check("the last read through the mount", &fs::read(m.path("s")).unwrap(), &mut last);
        assert_eq!(last, SAVES);
        (reads, reader.wait_with_output_bounded())
    });
    assert!(reader.status.success(), "the shim's reads: {}", String::from_utf8_lossy(&reader.stderr));
    let shim_reads: u32 = String::from_utf8_lossy(&reader.stdout).trim().parse().unwrap();
    // Each side read while the other saved (not only before and after).
    assert!(
        mount_reads > 10 && shim_reads > 10,
        "reads through the mount {mount_reads}, through the shim {shim_reads}"
    );
    m.stop();
    m.fsck_clean();
}

/// A name a shim process saves over again and again (a temporary renamed over it) opens and
/// reads through the mount every time: the mount's lookup keeps the file it found open for
/// the kernel's open and reads that follow (`Nodes::keep_recent`), so a rename over the name
/// between them does not free it under the reader (ESTALE). The saves go on until the mount
/// has read 10,000 times or 15 s have passed: with the bug `mount-lookup-not-kept` (the file
/// not kept) a read failed after 1,092-2,548 reads in five runs of five by hand, where the
/// test above catches it only now and then.
#[test]
fn a_name_saved_over_again_and_again_reads_through_the_mount_every_time() {
    if !fuse_available() {
        return;
    }
    let mut m = mounted_shared();
    let img = m.image.clone();
    fs::write(m.path("n"), "0\n").unwrap();
    let stop = m.dir.path().join("stop");
    let script = format!(
        "python3 -c \"import os\ni = 0\nwhile not os.path.exists('{}'):\n    i += 1\n    \
         with open('/pm/n.tmp', 'w') as f: f.write('%d\\n' % i)\n    os.rename('/pm/n.tmp', '/pm/n')\nprint(i)\"",
        stop.display()
    );
    let saver = shim(&img, &script).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let start = std::time::Instant::now();
    let (mut reads, mut last) = (0u32, 0u64);
    let mut failed = None;
    while reads < 10_000 && start.elapsed() < std::time::Duration::from_secs(15) {
        match fs::read_to_string(m.path("n")) {
            Ok(t) => {
                let i: u64 = t.trim().parse().unwrap_or_else(|_| panic!("read {t:?}: no save whole"));
                assert!(i >= last, "save {i} read after save {last}");
                (last, reads) = (i, reads + 1);
            }
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    fs::write(&stop, "").unwrap();
    let o = saver.wait_with_output_bounded();
    assert!(o.status.success(), "the shim's saves: {}", String::from_utf8_lossy(&o.stderr));
    if let Some(e) = failed {
        panic!("a read through the mount failed after {reads} reads: {e}");
    }
    let saves: u64 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    // The reads ran while the saves did (the last read saw a save, and many saves ran).
    eprintln!("{reads} reads through the mount beside {saves} saves");
    assert!(last > 0 && saves > 100, "{reads} reads saw save {last} of {saves}");
    m.stop();
    m.fsck_clean();
}

/// A directory the mount's kernel still knows (an open descriptor of it) that a shim
/// process removes, and whose inode number a new directory takes: what the kernel knew is
/// gone, never the new directory (the kernel's node IDs carry the inode's generation,
/// `hashfs-fuse/src/nodes.rs`). Through the old descriptor the listing fails or is empty,
/// never the new directory's names; a lookup of the new name finds the new directory.
#[test]
fn a_removed_directory_never_turns_into_the_one_that_takes_its_number() {
    if !fuse_available() {
        return;
    }
    let mut m = mounted_shared();
    let img = m.image.clone();
    fs::create_dir(m.path("d")).unwrap();
    let held = fs::File::open(m.path("d")).unwrap();
    let ino = held.metadata().unwrap().ino();
    let e = shim_ok(&img, "rmdir /pm/d && mkdir /pm/e && touch /pm/e/secret && stat -c %i /pm/e");
    assert_eq!(e.trim(), ino.to_string(), "the test needs the number taken again");
    // Listed before any lookup of the new name through the mount (which shows the kernel
    // the new generation, and the kernel then drops its old inode by itself).
    let through_old = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&held));
    if let Ok(list) = fs::read_dir(&through_old) {
        let names: Vec<_> = list.filter_map(|e| e.ok()).map(|e| e.file_name()).collect();
        assert!(names.is_empty(), "the removed directory lists the new one's names: {names:?}");
    }
    assert!(m.path("e/secret").exists());
    drop(held);
    m.stop();
    m.fsck_clean();
}

/// `git` through the mount on a repository that a shim process keeps committing to, and
/// the other way round: every `git log` through the mount meanwhile succeeds (git replaces
/// its refs by rename, so a reader that sees each rename whole sees a whole history), the
/// history grows to all the commits, `git fsck` is clean, and a commit made through the
/// mount is seen by the shim's git.
#[test]
fn git_through_the_mount_on_a_repository_a_shim_process_changes() {
    if !fuse_available() {
        return;
    }
    if !Command::new("git").arg("--version").output().is_ok_and(|o| o.status.success()) {
        fuse_common::skip("git is not installed");
        return;
    }
    let mut m = mounted_shared();
    let img = m.image.clone();
    let id = "-c user.name=t -c user.email=t@example.com -c safe.directory=*";
    shim_ok(&img, &format!("cd /pm && git init -q r && cd r && echo 0 > f0 && git add f0 && git {id} commit -qm c0"));
    let commits = 30;
    let writer = shim(
        &img,
        &format!("cd /pm/r && for i in $(seq 1 {commits}); do echo $i > f$i && git add f$i && git {id} commit -qm c$i || exit 1; done"),
    )
    .spawn()
    .unwrap();
    let repo = m.path("r");
    let git = |args: &[&str]| {
        Command::new("git").arg("-c").arg("safe.directory=*").arg("-C").arg(&repo).args(args).output_bounded()
    };
    let mut seen = 0;
    let mut writer = writer;
    while writer.try_wait().unwrap().is_none() {
        let o = git(&["log", "--oneline"]);
        assert!(o.status.success(), "git log through the mount: {}", String::from_utf8_lossy(&o.stderr));
        let n = String::from_utf8_lossy(&o.stdout).lines().count();
        assert!(n >= seen, "the history shrank from {seen} to {n} commits");
        seen = n;
    }
    assert!(writer.wait_bounded().success(), "the shim's commits");
    let o = git(&["log", "--oneline"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), commits + 1);
    let o = git(&["fsck", "--strict"]);
    assert!(o.status.success(), "git fsck: {}", String::from_utf8_lossy(&o.stderr));
    // Through the mount, then the shim's git.
    fs::write(repo.join("from-mount"), "m").unwrap();
    assert!(git(&["add", "from-mount"]).status.success());
    let o = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "safe.directory=*", "-C"])
        .arg(&repo)
        .args(["commit", "-qm", "through the mount"])
        .output_bounded();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let log = shim_ok(
        &img,
        "cd /pm/r && git -c safe.directory=* log -1 --format=%s && git -c safe.directory=* status --porcelain",
    );
    assert_eq!(log, "through the mount\n");
    m.stop();
    m.fsck_clean();
}

/// The guarantee for memory mappings through a shared mount (docs/design.md, "A mount
/// beside the shim"): a mapping made through an open that started after a shim process's
/// change shows it (the open asks the daemon for the file's attributes, there being no
/// timeout, and the kernel drops a file's cached pages when its modification time or size
/// changed); a mapping made before may keep pages it faulted in before the change.
#[test]
fn a_mapping_through_an_open_after_a_change_shows_it() {
    if !fuse_available() {
        return;
    }
    let mut m = mounted_shared();
    let img = m.image.clone();
    let page = |c: char| c.to_string().repeat(4096);
    shim_ok(&img, &format!("printf '%s' {} > /pm/mapped", page('a')));
    let mapped_byte = |path: &Path| -> u8 {
        let f = fs::File::open(path).unwrap();
        // SAFETY: a fresh read-only shared mapping of the file's first page, read once and
        // unmapped before it goes.
        unsafe {
            use std::os::fd::AsRawFd;
            let p = libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_READ, libc::MAP_SHARED, f.as_raw_fd(), 0);
            assert_ne!(p, libc::MAP_FAILED, "mmap: {}", std::io::Error::last_os_error());
            let b = *p.cast::<u8>().add(100);
            libc::munmap(p, 4096);
            b
        }
    };
    assert_eq!(mapped_byte(&m.path("mapped")), b'a');
    shim_ok(&img, &format!("printf '%s' {} > /pm/mapped", page('b')));
    assert_eq!(mapped_byte(&m.path("mapped")), b'b', "a mapping through a new open shows the change");
    m.stop();
    m.fsck_clean();
}

/// On a fresh shared mount, `/pm/mapped` (a page of `a`s) mapped through the mount before a
/// shim process runs `script`, which takes a line per change and answers "ok" after it: 40
/// changes (`line(k, c)` makes the line of the `k`th, byte `c`, for the script), each seen
/// at the page's byte 100 through the mapping within 1 s of its "ok" (the bound asserted;
/// the slowest is printed, after `what`).
fn changes_reach_a_mapping_through_the_mount(script: &str, line: impl Fn(usize, u8) -> String, what: &str) {
    let mut m = mounted_shared();
    let img = m.image.clone();
    shim_ok(&img, &format!("printf '%s' {} > /pm/mapped", "a".repeat(4096)));
    let f = fs::File::open(m.path("mapped")).unwrap();
    // SAFETY: a read-only shared mapping of the file's first page, read through volatile
    // loads while it lives and unmapped at the end.
    let p = unsafe {
        use std::os::fd::AsRawFd;
        libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_READ, libc::MAP_SHARED, f.as_raw_fd(), 0)
    };
    assert_ne!(p, libc::MAP_FAILED, "mmap: {}", std::io::Error::last_os_error());
    // SAFETY: inside the live mapping.
    let byte = || unsafe { std::ptr::read_volatile(p.cast::<u8>().add(100)) };
    assert_eq!(byte(), b'a');
    let mut writer = shim(&img, script).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let mut answers = std::io::BufReader::new(writer.stdout.take().unwrap());
    let mut slowest = std::time::Duration::ZERO;
    for (k, c) in (b'b'..=b'z').chain(b'A'..=b'O').enumerate() {
        std::io::Write::write_all(writer.stdin.as_mut().unwrap(), line(k, c).as_bytes()).unwrap();
        let mut answer = String::new();
        std::io::BufRead::read_line(&mut answers, &mut answer).unwrap();
        assert_eq!(answer.trim(), "ok");
        let start = std::time::Instant::now();
        while byte() != c {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(1),
                "the mapping through the mount still shows {:?} a second after {what} {:?}",
                byte() as char,
                c as char
            );
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
        slowest = slowest.max(start.elapsed());
    }
    drop(writer.stdin.take());
    assert!(writer.wait_bounded().success());
    eprintln!("the slowest of {what} reached the mapping through the mount in {slowest:?}");
    // SAFETY: the mapping made above, no longer used.
    unsafe { libc::munmap(p, 4096) };
    drop(f);
    m.stop();
    m.fsck_clean();
}

/// A mapping through the mount made before a shim process's overwrites shows each soon
/// after (the daemon's watch drops the kernel's pages of each inode the rings name,
/// `hashfs_fuse::watch_changes`): one shim process overwrites the page 40 times in quick
/// succession (most of them in place on the read side, within one tick of the coarse
/// clock, which the ring of changes does not name: the ring of data changes does), and
/// each overwrite is seen through the same mapping within 1 s of its return.
#[test]
fn an_existing_mapping_through_the_mount_sees_a_change_soon() {
    if !fuse_available() {
        return;
    }
    // The writer: a byte per line in, the page overwritten with it.
    let script = "python3 -c \"import os, sys\nfd = os.open('/pm/mapped', os.O_WRONLY)\nfor l in sys.stdin:\n    \
                  os.pwrite(fd, l.strip().encode() * 4096, 0)\n    print('ok', flush=True)\"";
    changes_reach_a_mapping_through_the_mount(script, |_, c| format!("{}\n", c as char), "the overwrite with");
}

/// A shim process's stores through its writable shared mapping reach no ring: the mount's
/// watch drops the kernel's pages of a file another participant marks mapped writable at
/// every reading (`hashfs_fuse::watch_changes`, `hashfs/src/fs/shared/mapped.rs`). A
/// mapping through the mount, made first, shows each of 40 stores within 1 s, the last one
/// made right before the shim process unmaps (the unmark is published, so the watch drops
/// the pages once more).
#[test]
fn a_mapping_through_the_mount_sees_stores_through_a_shim_processs_mapping() {
    if !fuse_available() {
        return;
    }
    // The writer: a byte per line in, stored through its mapping; at "last" the store is
    // followed by the unmap at once.
    let script = "python3 -c \"import mmap, os, sys\nfd = os.open('/pm/mapped', os.O_RDWR)\n\
                  w = mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)\n\
                  for l in sys.stdin:\n    c, *last = l.split()\n    w[100] = ord(c)\n    \
                  if last:\n        w.close()\n    print('ok', flush=True)\"";
    let line = |k: usize, c: u8| if k == 39 { format!("{} last\n", c as char) } else { format!("{}\n", c as char) };
    changes_reach_a_mapping_through_the_mount(script, line, "the store of");
}

/// A Python program that takes a POSIX record lock (`fcntl.lockf`) on `path`, over
/// `len` bytes from `start` (0: to the end), says "locked" and holds it until a line
/// arrives on its input; with `try_only`, it only tries (without waiting) and exits 0 if
/// it got the lock, 3 if another holder has it.
fn locker(path: &str, start: u64, len: u64, try_only: bool) -> String {
    let tail = if try_only { "sys.exit(0)" } else { "print('locked', flush=True); sys.stdin.readline()" };
    format!(
        "python3 -c \"import fcntl, os, sys\nfd = os.open('{path}', os.O_RDWR)\ntry:\n    fcntl.lockf(fd, \
         fcntl.LOCK_EX | fcntl.LOCK_NB, {len}, {start})\nexcept OSError:\n    sys.exit(3)\n{tail}\""
    )
}

/// Starts `cmd` (a holder from [`locker`]) and waits until it holds its lock.
fn holding(mut cmd: Command) -> Child {
    let mut c = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(c.stdout.as_mut().unwrap()), &mut line).unwrap();
    assert_eq!(line.trim(), "locked", "the holder took its lock");
    c
}

fn release(mut c: Child) {
    std::io::Write::write_all(c.stdin.as_mut().unwrap(), b"\n").unwrap();
    assert!(c.wait_bounded().success());
}

/// A script that takes a `flock` LOCK_EX on `path` without waiting (exit status 3 when
/// refused); unless `try_only`, it says "locked", closes the file at a line, says
/// "closed", and exits at the next.
fn flocker(path: &str, try_only: bool) -> String {
    let tail = if try_only {
        "sys.exit(0)"
    } else {
        "print('locked', flush=True)\nsys.stdin.readline()\nos.close(fd)\nprint('closed', flush=True)\nsys.stdin.readline()"
    };
    format!(
        "python3 -c \"import fcntl, os, sys\nfd = os.open('{path}', os.O_RDWR)\ntry:\n    fcntl.flock(fd, \
         fcntl.LOCK_EX | fcntl.LOCK_NB)\nexcept OSError:\n    sys.exit(3)\n{tail}\""
    )
}

fn plain_bash(script: &str) -> Command {
    let mut c = Command::new("bash");
    c.args(["-c", script]);
    c
}

/// Record locks through a shared mount and through the shim exclude each other (the
/// daemon takes the mount's in the image's table of record locks, where the shim takes
/// its own):
/// a lock held through either side refuses the same range to the other, leaves another
/// range free, and is released by its holder's exit.
#[test]
fn record_locks_through_the_mount_and_the_shim_exclude_each_other() {
    if !fuse_available() {
        return;
    }
    let mut m = mounted_shared();
    let img = m.image.clone();
    fs::write(m.path("f"), vec![0u8; 100]).unwrap();
    let mnt_f = m.path("f").to_str().unwrap().to_string();
    let try_mount = |start, len| plain_bash(&locker(&mnt_f, start, len, true)).status_bounded().code();
    let try_shim = |start, len| shim(&img, &locker("/pm/f", start, len, true)).status_bounded().code();
    // Held through the shim: refused through the mount where the ranges meet.
    let h = holding(shim(&img, &locker("/pm/f", 0, 10, false)));
    assert_eq!(try_mount(5, 10), Some(3), "a range the shim's lock covers, refused through the mount");
    assert_eq!(try_mount(10, 10), Some(0), "a range beside it, free");
    release(h);
    assert_eq!(try_mount(0, 0), Some(0), "free once its holder let go");
    // Held through the mount: refused through the shim.
    let h = holding(plain_bash(&locker(&mnt_f, 20, 0, false)));
    assert_eq!(try_shim(50, 1), Some(3), "a range the mount's lock covers, refused through the shim");
    assert_eq!(try_shim(0, 20), Some(0), "a range before it, free");
    // Killed holding it: released with its descriptors.
    let mut h = h;
    h.kill().unwrap();
    h.wait_bounded();
    wait_for("the killed holder's lock released", || try_shim(0, 0) == Some(0));
    m.stop();
    m.fsck_clean();
}

/// `flock` through a shared mount and through the shim exclude each other (the daemon
/// takes the mount's in the image's table, FUSE_FLOCK_LOCKS): held through either side,
/// refused to the other; apart from record locks; another open file description of the
/// holder's refused too; let go at the holder's close of its file.
#[test]
fn flock_through_the_mount_and_the_shim_exclude_each_other() {
    if !fuse_available() {
        return;
    }
    let mut m = mounted_shared();
    let img = m.image.clone();
    fs::write(m.path("f"), vec![0u8; 100]).unwrap();
    let mnt_f = m.path("f").to_str().unwrap().to_string();
    let try_mount = || plain_bash(&flocker(&mnt_f, true)).status_bounded().code();
    let try_shim = || shim(&img, &flocker("/pm/f", true)).status_bounded().code();
    let next = |c: &mut Child, want: &str| {
        std::io::Write::write_all(c.stdin.as_mut().unwrap(), b"\n").unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(c.stdout.as_mut().unwrap()), &mut line).unwrap();
        assert_eq!(line.trim(), want);
    };
    // Held through the mount: refused through the shim, not its record locks.
    let mut h = holding(plain_bash(&flocker(&mnt_f, false)));
    assert_eq!(try_shim(), Some(3), "the mount's flock, refused through the shim");
    assert_eq!(try_mount(), Some(3), "another open file description through the mount");
    assert_eq!(shim(&img, &locker("/pm/f", 0, 0, true)).status_bounded().code(), Some(0), "flock apart");
    next(&mut h, "closed");
    assert_eq!(try_shim(), Some(0), "let go at the holder's close");
    release(h);
    // Held through the shim: refused through the mount.
    let h = holding(shim(&img, &flocker("/pm/f", false)));
    assert_eq!(try_mount(), Some(3), "the shim's flock, refused through the mount");
    release(h);
    assert_eq!(try_mount(), Some(0), "free once its holder let go");
    m.stop();
    m.fsck_clean();
}
