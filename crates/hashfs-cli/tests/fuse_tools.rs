//! Unmodified tools against the FUSE mount (cp -a, tar, find, diff -r, rsync), several
//! processes at once, and a daemon killed with SIGKILL: no completed operation is lost
//! and the next mount recovers.

#[path = "fuse_common.rs"]
mod common;
use common::*;
use std::fs;
use std::path::Path;
use std::process::Command;

fn sh(cmd: &str) {
    let st = Command::new("sh").arg("-c").arg(cmd).status().unwrap();
    assert!(st.success(), "failed: {cmd}");
}

fn out(cmd: &str) -> String {
    let o = Command::new("sh").arg("-c").arg(cmd).output().unwrap();
    assert!(o.status.success(), "failed: {cmd}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A source tree: this crate's sources plus files of assorted sizes, a symlink, a hard link
/// and modes.
fn make_source(root: &Path) {
    fs::create_dir_all(root.join("deep/er/still")).unwrap();
    sh(&format!("cp -a {}/src {}/", env!("CARGO_MANIFEST_DIR"), root.display()));
    for (i, size) in [0usize, 1, 4095, 4096, 4097, 1 << 20, (3 << 20) + 7].iter().enumerate() {
        let data: Vec<u8> = (0..*size).map(|j| (j * 7 + i) as u8).collect();
        fs::write(root.join(format!("deep/er/f{i}")), data).unwrap();
    }
    std::os::unix::fs::symlink("er/f1", root.join("deep/link")).unwrap();
    fs::hard_link(root.join("deep/er/f2"), root.join("deep/er/still/hard")).unwrap();
    sh(&format!("chmod 0600 {0}/deep/er/f3 && chmod 0750 {0}/deep/er/still", root.display()));
}

#[test]
fn cp_tar_find_diff_rsync() {
    if !fuse_available() {
        return;
    }
    let mut m = Mounted::new("256M");
    let src = m.dir.path().join("src");
    make_source(&src);
    let mnt = m.mnt.display().to_string();
    let s = src.display().to_string();
    // cp -a in, diff -r, and the same listing from find on both sides.
    sh(&format!("cp -a {s} {mnt}/cp"));
    sh(&format!("diff -r {s} {mnt}/cp"));
    // Sizes of files and links, not of directories: a directory's size is its file
    // system's own (4096 on ext4 and HashFS, 20 bytes a name on tmpfs), which no copy keeps.
    let list = |d: &str| {
        out(&format!(
            "cd {d} && find . \\( -type d -printf '%p %y %m - %n\\n' \\) -o -printf '%p %y %m %s %n %l\\n' | sort"
        ))
    };
    assert_eq!(list(&s), list(&format!("{mnt}/cp")));
    // tar out of the mount and into it.
    sh(&format!("tar -C {mnt}/cp -cf {mnt}/archive.tar ."));
    sh(&format!("mkdir {mnt}/untar && tar -C {mnt}/untar -xf {mnt}/archive.tar"));
    sh(&format!("diff -r {s} {mnt}/untar"));
    // rsync in (archive mode, hard links), then again: nothing to transfer.
    sh(&format!("rsync -aH {s}/ {mnt}/rs/"));
    sh(&format!("diff -r {s} {mnt}/rs"));
    let again = out(&format!("rsync -aHi {s}/ {mnt}/rs/"));
    assert!(again.trim().is_empty(), "second rsync transferred: {again}");
    assert_eq!(list(&s), list(&format!("{mnt}/rs")));
    // And back out.
    let back = m.dir.path().join("back");
    sh(&format!("cp -a {mnt}/rs {}", back.display()));
    sh(&format!("diff -r {s} {}", back.display()));
    m.stop();
    m.fsck_clean();
}

#[test]
fn several_processes_at_once() {
    if !fuse_available() {
        return;
    }
    let mut m = Mounted::new("256M");
    let mnt = m.mnt.display().to_string();
    // Four writer processes, each its own directory, and readers of a shared file.
    fs::write(m.path("shared"), vec![9u8; 1 << 20]).unwrap();
    let mut children = Vec::new();
    for w in 0..4 {
        children.push(
            Command::new("sh")
                .arg("-c")
                .arg(format!(
                    "mkdir {mnt}/w{w} && for i in $(seq 1 200); do head -c $((i * 97)) /dev/urandom > {mnt}/w{w}/f$i; done && \
                     for i in $(seq 1 200); do test $(stat -c %s {mnt}/w{w}/f$i) -eq $((i * 97)) || exit 1; done"
                ))
                .spawn()
                .unwrap(),
        );
    }
    for _ in 0..2 {
        children.push(
            Command::new("sh")
                .arg("-c")
                .arg(format!("for i in $(seq 1 50); do cmp -s {mnt}/shared {mnt}/shared || exit 1; done"))
                .spawn()
                .unwrap(),
        );
    }
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    for w in 0..4 {
        assert_eq!(fs::read_dir(m.path(&format!("w{w}"))).unwrap().count(), 200);
    }
    m.stop();
    m.fsck_clean();
}

#[test]
fn sigkill_loses_no_completed_operation() {
    if !fuse_available() {
        return;
    }
    let mut m = Mounted::new("64M");
    fs::create_dir(m.path("kept")).unwrap();
    for i in 0..100 {
        fs::write(m.path(&format!("kept/f{i}")), format!("file {i}").repeat(i + 1)).unwrap();
    }
    fs::rename(m.path("kept/f0"), m.path("renamed")).unwrap();
    fs::remove_file(m.path("kept/f1")).unwrap();
    // A file unlinked while open: freed by the recovery after the kill.
    let open = fs::File::open(m.path("kept/f2")).unwrap();
    fs::remove_file(m.path("kept/f2")).unwrap();
    m.kill_daemon();
    drop(open);
    m.start();
    assert_eq!(fs::read_to_string(m.path("renamed")).unwrap(), "file 0");
    assert!(!m.path("kept/f1").exists() && !m.path("kept/f2").exists());
    for i in 3..100 {
        assert_eq!(fs::read_to_string(m.path(&format!("kept/f{i}"))).unwrap(), format!("file {i}").repeat(i + 1));
    }
    m.stop();
    m.fsck_clean();
}

#[test]
fn fio_with_verification_on_the_mount() {
    if !fuse_available() {
        return;
    }
    if Command::new("fio").arg("--version").output().is_err() {
        skip("fio is not installed");
        return;
    }
    let mut m = Mounted::new("256M");
    for (name, rw) in [("randrw", "randrw"), ("seqwrite", "write")] {
        // fio keeps its verification state in its working directory: a temporary one.
        let o = Command::new("fio")
            .current_dir(m.dir.path())
            .args([
                &format!("--name={name}"),
                &format!("--directory={}", m.mnt.display()),
                "--size=32m",
                "--bs=4k",
                &format!("--rw={rw}"),
                "--ioengine=psync",
                "--verify=crc32c",
                "--do_verify=1",
                "--numjobs=2",
                "--output-format=terse",
            ])
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "fio {name}: {out} {}", String::from_utf8_lossy(&o.stderr));
        for line in out.lines().filter(|l| l.starts_with("3;")) {
            assert_eq!(line.split(';').nth(4), Some("0"), "{line}");
        }
    }
    m.stop();
    m.fsck_clean();
}

#[test]
fn sqlite_and_leveldb_on_the_mount() {
    if !fuse_available() {
        return;
    }
    let mut m = Mounted::new("256M");
    let db = m.path("test.db");
    let script = format!(
        "import sqlite3\ndb = sqlite3.connect('{}')\ndb.execute('create table t(k integer primary key, v text)')\n\
         with db:\n    db.executemany('insert into t values(?, ?)', ((i, 'v%d' % i) for i in range(20000)))\n\
         with db:\n    db.execute('delete from t where k % 3 = 0')\n\
         assert db.execute('pragma integrity_check').fetchone()[0] == 'ok'\n\
         print(db.execute('select count(*) from t').fetchone()[0])\n",
        db.display()
    );
    assert_eq!(
        out(&format!("python3 -c \"{}\"", script.replace('"', "\\\""))).trim(),
        (0..20000).filter(|i| i % 3 != 0).count().to_string()
    );
    if Path::new("/usr/include/leveldb/db.h").exists() {
        let exe = m.dir.path().join("leveldb_ycsb");
        sh(&format!("bash {}/../../apps/ycsb/build.sh {}", env!("CARGO_MANIFEST_DIR"), exe.display()));
        let o = out(&format!("{} {} 50000 10000 ABCDEF", exe.display(), m.path("leveldb").display()));
        assert!(o.contains("all correct"), "{o}");
    } else {
        assert!(std::env::var_os("CI").is_none(), "CI must have libleveldb-dev");
    }
    m.stop();
    m.fsck_clean();
}

/// mount(8) integration: with the helper linked as /sbin/mount.fuse.hashfs, `mount -t
/// fuse.hashfs` (ro is read-only: EROFS) and an fstab line (given with `mount -T`) mount
/// the image; an unknown option fails with its name; umount(8) unmounts.
#[test]
fn mount_helper_and_fstab() {
    if !fuse_available() {
        return;
    }
    if std::process::Command::new("mount").arg("-V").output().is_err() {
        skip("mount(8) is not installed");
        return;
    }
    let link = Path::new("/sbin/mount.fuse.hashfs");
    let before = std::fs::read_link(link).ok();
    let o = hashfs().args(["install-mount-helper", "/sbin"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut m = Mounted::new("64M");
    m.stop();
    let (img, mnt) = (m.image.to_str().unwrap().to_string(), m.mnt.to_str().unwrap().to_string());
    let run = |args: &[&str]| std::process::Command::new(args[0]).args(&args[1..]).output().unwrap();
    let wait_clean = || {
        // umount(8) returns before the daemon has closed the image.
        for _ in 0..300 {
            if hashfs().args(["fsck", "-n", &img]).output().unwrap().status.success() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        panic!("the image stayed in use after umount");
    };
    let o = run(&["mount", "-t", "fuse.hashfs", &img, &mnt, "-o", "ro,noatime"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(errno(std::fs::write(Path::new(&mnt).join("x"), b"")), libc::EROFS);
    assert!(run(&["umount", &mnt]).status.success());
    wait_clean();
    let fstab = m.dir.path().join("fstab");
    std::fs::write(&fstab, format!("{img} {mnt} fuse.hashfs defaults,noatime,nodev 0 0\n")).unwrap();
    let o = run(&["mount", "-T", fstab.to_str().unwrap(), &mnt]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::write(Path::new(&mnt).join("via-fstab"), b"ok").unwrap();
    assert!(run(&["umount", &mnt]).status.success());
    wait_clean();
    let o = run(&["mount", "-t", "fuse.hashfs", &img, &mnt, "-o", "bogus"]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("bogus"), "{o:?}");
    let ls = hashfs().args(["ls", &img]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&ls.stdout), "via-fstab\n");
    match before {
        Some(t) => {
            let _ = std::fs::remove_file(link);
            std::os::unix::fs::symlink(t, link).unwrap();
        }
        None => {
            let _ = std::fs::remove_file(link);
        }
    }
}

/// `hashfs mount` (the background form) hands every option to the daemon it starts.
#[test]
fn background_mount_passes_its_options_on() {
    if !fuse_available() {
        return;
    }
    let mut m = Mounted::new("64M");
    m.stop();
    let (img, mnt) = (m.image.to_str().unwrap().to_string(), m.mnt.to_str().unwrap().to_string());
    for opt in ["direct_io", "writeback_cache", "strict,nodev"] {
        let o = hashfs().args(["mount", &img, &mnt, "-o", opt]).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let out = String::from_utf8_lossy(&o.stdout).to_string();
        let pid = out.split("daemon pid ").nth(1).and_then(|s| s.trim().trim_end_matches(')').parse::<u32>().ok());
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", pid.expect("the daemon's pid"))).unwrap();
        let args: Vec<String> = cmdline.split(|&b| b == 0).map(|a| String::from_utf8_lossy(a).to_string()).collect();
        let list = &args[args.iter().position(|a| a == "-o").expect("-o") + 1];
        for want in opt.split(',') {
            assert!(list.split(',').any(|o| o == want), "{want} not in the daemon's options {list}");
        }
        std::fs::write(Path::new(&mnt).join("f"), opt).unwrap();
        assert!(hashfs().args(["umount", &mnt]).status().unwrap().success());
        for _ in 0..300 {
            if hashfs().args(["fsck", "-n", &img]).output().unwrap().status.success() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    let cat = hashfs().args(["cat", &img, "/f"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&cat.stdout), "strict,nodev");
}

/// `hashfs umount` of a mount that a process holds busy (a file open there) tries again for
/// a moment: a holder gone within it (a child forked while a file was open, not yet at its
/// exec) lets the unmount through; one that stays gets a clear error after the wait that
/// says what to look for, and the mount stays usable. Before, the first EBUSY failed the
/// unmount (a stacked test's umount right after its last close did, under load).
#[test]
fn umount_waits_a_moment_for_a_busy_mount_and_says_why_it_stays_busy() {
    if !fuse_available() {
        return;
    }
    let mut m = Mounted::new("16M");
    fs::write(m.path("/f"), b"held").unwrap();
    // A process that holds the file open for `secs`, once it has it open.
    let hold = |secs: &str| {
        let script = format!("exec 3< '{}'; sleep {secs}", m.path("/f").display());
        let c = Command::new("bash").arg("-c").arg(script).spawn().unwrap();
        wait_for("the holder's open", || fs::read_dir(format!("/proc/{}/fd", c.id())).is_ok_and(|d| d.count() > 3));
        c
    };
    // Held for 20 s: the unmount gives up after its wait, saying why.
    let mut long = hold("20");
    let t = std::time::Instant::now();
    let o = hashfs().args(["umount", m.mnt.to_str().unwrap()]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("busy") && err.contains("fuser"), "{err}");
    assert!(t.elapsed() >= std::time::Duration::from_secs(2), "gave up at once: {:?}", t.elapsed());
    assert_eq!(fs::read(m.path("/f")).unwrap(), b"held", "still mounted and served");
    long.kill().unwrap();
    long.wait().unwrap();
    // Held for half a second more: the unmount waits it out.
    let mut short = hold("0.5");
    m.stop();
    short.wait().unwrap();
    m.fsck_clean();
}
