//! SPFS's stacked mode through the real daemon: `hashfs mount --lower DIR`. The lower
//! directory is on the disk's file system (the temporary directory), the image in it too.
//! Each test checks the merged view against a model, the lower file against what must
//! (not) have reached it, and the PM side through `hashfs info` on the mount point. The
//! kill -9 tests are in `fuse_stacked_kill.rs`; the helper both use, in `support/stacked.rs`.

mod fuse_common;
#[path = "support/stacked.rs"]
mod stacked;
use fuse_common::{fuse_available, hashfs};
use stacked::{counter, is_mounted, pattern, Stacked};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Held by the tests that drop the kernel's page cache or check what it keeps (the cache
/// is global: one would drop what the other checks).
fn page_cache_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Writes `data` at `off` through `f` and the model, then fsyncs.
fn put(f: &File, model: &mut Vec<u8>, off: usize, data: &[u8]) {
    f.write_all_at(data, off as u64).unwrap();
    if model.len() < off + data.len() {
        model.resize(off + data.len(), 0);
    }
    model[off..off + data.len()].copy_from_slice(data);
    f.sync_data().unwrap();
}

#[test]
fn promotion_absorbs_fsyncs_merges_reads_and_survives_kill_and_writeback() {
    if !fuse_available() {
        return;
    }
    let mut s = Stacked::new("64M", "promote_after=3,sf_limit=none");
    // A lower file that exists before the mount: 5 blocks and a tail.
    let mut model = pattern(5 * 4096 + 1000, 7);
    fs::write(s.low("db"), &model).unwrap();
    s.start();
    let info = s.info();
    assert!(info.contains("front end: requests through /dev/fuse, files below through the daemon"), "{info}");
    assert_eq!(fs::read(s.p("db")).unwrap(), model);
    let f = OpenOptions::new().read(true).write(true).open(s.p("db")).unwrap();
    // Four small synced writes: the first starts the profile, three qualify: promoted.
    for i in 0..4 {
        put(&f, &mut model, 100 + i * 10, b"early");
    }
    assert_eq!(s.promoted(), 1, "{}", s.info());
    let lower_at_promotion = fs::read(s.low("db")).unwrap();
    assert_eq!(lower_at_promotion, model, "before promotion every fsync reached the lower file");
    // Partial writes into blocks not in PM yet (their other bytes come from below), a
    // write across a block boundary, and an append past the end.
    put(&f, &mut model, 4096 + 5, b"inside block one");
    put(&f, &mut model, 3 * 4096 - 3, b"straddles two blocks");
    put(&f, &mut model, 5 * 4096 + 1000 + 50, b"past the end, with a gap");
    assert_eq!(fs::read(s.p("db")).unwrap(), model, "merged view");
    assert_eq!(fs::read(s.low("db")).unwrap(), lower_at_promotion, "absorbed writes stay out of the lower file");
    assert!(s.info().contains("fsyncs absorbed in PM: 3"), "{}", s.info());
    drop(f);
    // kill -9: every fsynced write is in the merged view after the remount.
    s.kill();
    s.start();
    assert_eq!(fs::read(s.p("db")).unwrap(), model, "after kill -9 and remount");
    assert_eq!(s.promoted(), 1);
    // A clean unmount keeps the file in PM; --writeback brings it down.
    s.umount(false);
    assert_eq!(fs::read(s.low("db")).unwrap(), lower_at_promotion);
    s.start();
    assert_eq!(fs::read(s.p("db")).unwrap(), model);
    s.umount(true);
    assert_eq!(fs::read(s.low("db")).unwrap(), model, "written back");
    s.start();
    assert_eq!(s.promoted(), 0);
    assert_eq!(fs::read(s.p("db")).unwrap(), model);
    s.umount(false);
}

#[test]
fn deletion_truncation_and_stale_copies() {
    if !fuse_available() {
        return;
    }
    let mut s = Stacked::new("64M", "promote_after=2,sf_limit=none");
    fs::write(s.low("t"), pattern(3 * 4096, 1)).unwrap();
    s.start();
    let promote = |path: PathBuf, model: &mut Vec<u8>| {
        let f = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path).unwrap();
        for i in 0..3 {
            put(&f, model, i * 7, b"abc");
        }
        f
    };
    // Truncation inside a block that is not in PM, then growth: the gap reads zero, not
    // the lower file's old bytes.
    let mut model = pattern(3 * 4096, 1);
    let f = promote(s.p("t"), &mut model);
    assert_eq!(s.promoted(), 1);
    f.set_len(4096 + 100).unwrap();
    model.truncate(4096 + 100);
    put(&f, &mut model, 3 * 4096 + 10, b"tail");
    assert_eq!(fs::read(s.p("t")).unwrap(), model);
    drop(f);
    s.kill();
    s.start();
    assert_eq!(fs::read(s.p("t")).unwrap(), model, "after kill -9");
    // Renamed, hard-linked and unlinked: the PM copy follows the inode and goes with it.
    fs::rename(s.p("t"), s.p("u")).unwrap();
    fs::hard_link(s.p("u"), s.p("v")).unwrap();
    fs::remove_file(s.p("u")).unwrap();
    assert_eq!(fs::read(s.p("v")).unwrap(), model);
    assert_eq!(s.promoted(), 1);
    fs::remove_file(s.p("v")).unwrap();
    assert_eq!(s.promoted(), 0, "{}", s.info());
    // A crash between the lower unlink and the PM removal: the mount drops the stale copy.
    let mut m2 = Vec::new();
    drop(promote(s.p("w"), &mut m2));
    assert_eq!(s.promoted(), 1);
    s.kill();
    fs::remove_file(s.low("w")).unwrap();
    // fsck -n sees it on a view of the crashed image, writing to neither side (it was
    // refused: the check mounted, and so recovered, the image).
    let image_before = fs::read(&s.image).unwrap();
    let lower_before: Vec<_> = fs::read_dir(&s.lower).unwrap().map(|e| e.unwrap().file_name()).collect();
    let o = hashfs().args(["fsck", "-n"]).arg(&s.image).arg("--lower").arg(&s.lower).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(4), "{out}{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("its lower file is deleted") && out.contains("0 promoted files sound, 1 problems"), "{out}");
    assert!(fs::read(&s.image).unwrap() == image_before, "fsck -n --lower wrote to the image");
    let lower_after: Vec<_> = fs::read_dir(&s.lower).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(lower_after, lower_before);
    // fsck sees the stale copy (and changes nothing without --repair).
    let o = hashfs().arg("fsck").arg(&s.image).arg("--lower").arg(&s.lower).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(4), "{out}");
    assert!(out.contains("its lower file is deleted") && out.contains("0 promoted files sound, 1 problems"), "{out}");
    s.start();
    assert_eq!(s.promoted(), 0);
    assert!(s.log().contains("1 copies of deleted files removed"), "{}", s.log());
    // Removed, not just skipped: the next mount finds nothing to repair.
    s.umount(false);
    s.start();
    assert!(!s.log().contains("stacked recovery"), "{}", s.log());
    s.umount(false);
    let o = hashfs().arg("fsck").arg(&s.image).arg("--lower").arg(&s.lower).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stdout));
}

#[test]
fn sync_factor_and_full_pm_write_files_back() {
    if !fuse_available() {
        return;
    }
    let _cache = page_cache_lock();
    // A hard limit just under the promotion-time Sync Factor: reads make it fall.
    let mut s = Stacked::new("16M", "promote_after=3,sf_limit=0.12");
    s.start();
    let mut model = Vec::new();
    let f = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(s.p("log")).unwrap();
    for i in 0..4 {
        put(&f, &mut model, i * 4096, &pattern(4096, i as u8));
    }
    assert_eq!(s.promoted(), 1, "{}", s.info());
    // Reads that reach the daemon (the page cache is dropped between them) lower the SF.
    let mut buf = vec![0u8; 4096];
    for _ in 0..20 {
        f.read_at(&mut buf, 0).unwrap();
        let _ = fs::write("/proc/sys/vm/drop_caches", "1");
    }
    let t = Instant::now();
    while s.promoted() > 0 {
        assert!(t.elapsed() < Duration::from_secs(10), "not written back: {}", s.info());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(fs::read(s.low("log")).unwrap(), model, "the written-back lower file");
    drop(f);
    // PM full: a promoted file that cannot take a write goes down with it.
    let mut s = Stacked::new("16M", "promote_after=3,sf_limit=none,high_water=1.0");
    s.start();
    let mut model = Vec::new();
    let f = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(s.p("big")).unwrap();
    for i in 0..4 {
        put(&f, &mut model, i * 10, b"small");
    }
    assert_eq!(s.promoted(), 1);
    let big = pattern(24 << 20, 3);
    put(&f, &mut model, 100, &big);
    assert_eq!(s.promoted(), 0, "{}", s.info());
    assert!(s.info().contains("(1 for space)"), "{}", s.info());
    assert_eq!(fs::read(s.p("big")).unwrap(), model);
    assert_eq!(fs::read(s.low("big")).unwrap(), model);
    drop(f);
    s.umount(false);
}

#[test]
fn an_image_holding_promoted_files_refuses_another_lower_directory() {
    if !fuse_available() {
        return;
    }
    let mut s = Stacked::new("16M", "promote_after=2,sf_limit=none");
    s.start();
    let f = OpenOptions::new().write(true).create(true).truncate(true).open(s.p("a")).unwrap();
    for _ in 0..3 {
        f.write_all_at(b"x", 0).unwrap();
        f.sync_data().unwrap();
    }
    drop(f);
    assert_eq!(s.promoted(), 1);
    s.umount(false);
    let other = s._dir.path().join("other");
    fs::create_dir(&other).unwrap();
    let o = hashfs().args(["mount", "--lower"]).arg(&other).arg(&s.image).arg(&s.mnt).output().unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("holds 1 promoted files of the lower directory"), "{err}");
    assert!(!is_mounted(&s.mnt));
}

#[test]
fn a_file_reopened_at_every_sync_is_still_profiled() {
    if !fuse_available() {
        return;
    }
    // A mail spool's pattern: open, append, fsync, close, at every delivery. The profile
    // lives with the kernel's inode, not with one open file.
    let mut s = Stacked::new("16M", "promote_after=3,sf_limit=none");
    s.start();
    let mut model = Vec::new();
    for i in 0..5 {
        let f = OpenOptions::new().append(true).create(true).open(s.p("mbox")).unwrap();
        let msg = pattern(700, i);
        (&f).write_all(&msg).unwrap();
        f.sync_data().unwrap();
        model.extend_from_slice(&msg);
    }
    assert_eq!(s.promoted(), 1, "{}", s.info());
    assert_eq!(fs::read(s.p("mbox")).unwrap(), model);
    s.umount(true);
    assert_eq!(fs::read(s.low("mbox")).unwrap(), model);
}

/// A file that is not promoted may be changed in the lower directory directly: an open
/// through the mount reads what is there now, not pages the kernel cached before. A
/// promoted one changes only through the mount, and its cached pages survive an open.
#[test]
fn an_open_reads_a_change_made_below_and_keeps_a_promoted_files_pages() {
    if !fuse_available() {
        return;
    }
    let _cache = page_cache_lock();
    let mut s = Stacked::new("64M", "promote_after=2,sf_limit=none");
    fs::write(s.low("plain"), pattern(16384, 1)).unwrap();
    s.start();
    assert_eq!(fs::read(s.p("plain")).unwrap(), pattern(16384, 1));
    fs::write(s.low("plain"), pattern(16384, 2)).unwrap(); // same size, below the mount
    assert!(fs::read(s.p("plain")).unwrap() == pattern(16384, 2), "an open read pages cached before the change below");

    let mut model = Vec::new();
    let f = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(s.p("hot")).unwrap();
    for i in 0..3 {
        put(&f, &mut model, i * 4096, &pattern(4096, i as u8));
    }
    drop(f);
    assert_eq!(s.promoted(), 1, "{}", s.info());
    assert_eq!(fs::read(s.p("hot")).unwrap(), model);
    let f = File::open(s.p("hot")).unwrap();
    assert_eq!(fuse_common::cached_pages(&f, model.len()), 3, "an open of a promoted file dropped its pages");
    drop(f);
    s.umount(false);
}

/// Runs `script` with sh in `dir` as user 1000 (groups 1000 and 1002), umask 002.
fn as_user_1000(dir: &Path, script: &str) -> String {
    let o = Command::new("setpriv")
        .args(["--reuid=1000", "--regid=1000", "--groups=1000,1002", "sh", "-c"])
        .arg(format!("umask 002 && cd '{}' && {script}", dir.display()))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{script}: {out}{}", String::from_utf8_lossy(&o.stderr));
    out
}

fn tool(name: &str) -> bool {
    let ok = Command::new("sh").args(["-c", &format!("command -v {name}")]).output().is_ok_and(|o| o.status.success());
    if !ok {
        fuse_common::skip(&format!("{name} is not installed"));
    }
    ok
}

/// Regression (issue 52): objects an ordinary user made through the stacked mount belonged
/// to root (the daemon's ownership change was made on a descriptor that refuses it, and the
/// error dropped), took the daemon's umask instead of the caller's, lost their set-ID bits,
/// and ignored a set-group-ID directory's group; `initdb` failed with "Permission denied".
/// Now each is made with the caller's identity, so the lower file system applies Linux's
/// rules (checked on the lower inodes).
#[test]
fn objects_belong_to_their_maker_with_its_umask_set_id_bits_and_group() {
    if !fuse_available() || !tool("setpriv") || !tool("python3") {
        return;
    }
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let mut s = Stacked::new("64M", "sf_limit=none");
    fs::set_permissions(s._dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(&s.lower, fs::Permissions::from_mode(0o777)).unwrap();
    s.start();
    as_user_1000(
        &s.mnt,
        "mkdir d && mkfifo d/fifo && touch d/file && ln -s file d/link && \
         python3 -c 'import os, socket; socket.socket(socket.AF_UNIX).bind(\"d/sock\"); \
         os.close(os.open(\"d/suid\", os.O_CREAT | os.O_WRONLY, 0o4755)); \
         os.close(os.open(\"d/sgid\", os.O_CREAT | os.O_WRONLY, 0o2775))' && \
         mkdir sg && chgrp 1002 sg && chmod 2775 sg && mkdir sg/sub && touch sg/f && touch d/inside-my-dir",
    );
    let st = |p: &str| fs::symlink_metadata(s.low(p)).unwrap();
    for p in
        ["d", "d/fifo", "d/file", "d/link", "d/sock", "d/suid", "d/sgid", "sg", "sg/sub", "sg/f", "d/inside-my-dir"]
    {
        assert_eq!(st(p).uid(), 1000, "{p}: owner");
    }
    for (p, mode) in [("d", 0o775), ("d/fifo", 0o664), ("d/file", 0o664), ("d/sock", 0o775), ("d/suid", 0o4755)] {
        assert_eq!(st(p).mode() & 0o7777, mode, "{p}: mode under umask 002");
    }
    assert_eq!((st("d/sgid").mode() & 0o7777, st("d/sgid").gid()), (0o2775, 1000), "set-group-ID kept: its group");
    assert_eq!(st("d").gid(), 1000);
    assert_eq!(
        (st("sg/sub").gid(), st("sg/sub").mode() & 0o7777),
        (1002, 0o2775),
        "a set-group-ID directory's group, and its bit"
    );
    assert_eq!(st("sg/f").gid(), 1002, "a set-group-ID directory's group");
    s.umount(false);
}

/// Regression (issue 52): an existing file opened with O_NOFOLLOW failed with ELOOP (the
/// daemon reopened the lower file through /proc/self/fd/N, a symlink, with the caller's
/// flag): SQLite could not open an existing database, and git ignored every .gitignore.
/// O_NOFOLLOW is ELOOP for a symlink only, as on Linux.
#[test]
fn o_nofollow_refuses_only_symlinks_and_sqlite_and_git_work() {
    if !fuse_available() || !tool("sqlite3") || !tool("git") {
        return;
    }
    use std::os::unix::fs::OpenOptionsExt;
    let mut s = Stacked::new("64M", "sf_limit=none");
    s.start();
    fs::write(s.p("plain"), b"x").unwrap();
    std::os::unix::fs::symlink("plain", s.p("link")).unwrap();
    let nofollow = |p: &Path| OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(p);
    assert!(nofollow(&s.p("plain")).is_ok(), "an existing file with O_NOFOLLOW");
    assert_eq!(nofollow(&s.p("link")).unwrap_err().raw_os_error(), Some(libc::ELOOP));
    let db = s.p("db.sqlite");
    let sql = |q: &str| {
        let o = Command::new("sqlite3").arg(&db).arg(q).output().unwrap();
        assert!(o.status.success(), "{q}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    sql("create table t(x); insert into t values (1), (2);");
    sql("insert into t values (3);"); // an existing database
    assert_eq!(sql("select sum(x) from t;"), "6");
    let repo = s.p("repo");
    fs::create_dir(&repo).unwrap();
    let git = |args: &[&str]| {
        let o = Command::new("git").arg("-C").arg(&repo).args(args).output().unwrap();
        assert!(o.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    git(&["init", "-q"]);
    fs::write(repo.join(".gitignore"), "*.o\nbuild/\n").unwrap();
    fs::write(repo.join("main.c"), "int main(void) { return 0; }\n").unwrap();
    fs::write(repo.join("main.o"), b"obj").unwrap();
    fs::create_dir(repo.join("build")).unwrap();
    fs::write(repo.join("build/out"), b"out").unwrap();
    let status = git(&["status", "--porcelain", "--untracked-files=all"]);
    let mut listed: Vec<&str> = status.lines().collect();
    listed.sort();
    assert_eq!(listed, ["?? .gitignore", "?? main.c"], "the build outputs are ignored");
    s.umount(false);
}

/// Waits until the daemon has seen every handle closed: the kernel sends a handle's
/// release after close(2) returned, and until the daemon has it, the next open of the file
/// shares the closed handles' mode (passthrough), as it must while they are open.
fn released(s: &Stacked) {
    let t = Instant::now();
    while counter(&s.info(), "handles open") > 0 {
        assert!(t.elapsed() < Duration::from_secs(10), "handles never released: {}", s.info());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `passthrough=on` (issue 58): a file below that is not syncing is served by the kernel
/// from the lower file; every handle opened while one is open shares its mode (the kernel
/// keeps one per inode), so a file whose fsyncs ask for promotion meanwhile is promoted at
/// the next open after the last such handle closed, and from then on absorbs its fsyncs.
/// A shared mapping and an O_DIRECT handle of a file below go to the lower file too.
#[test]
fn passthrough_serves_files_below_and_promotes_at_the_next_open() {
    if !fuse_available() {
        return;
    }
    let mut s = Stacked::new("64M", "promote_after=3,sf_limit=none,passthrough=on");
    let mut model = pattern(3 * 4096, 5);
    fs::write(s.low("db"), &model).unwrap();
    s.start();
    assert!(!s.log().contains("lacks FUSE passthrough"), "{}", s.log());
    let info = s.info();
    assert!(info.contains("front end: requests through /dev/fuse, files below passthrough"), "{info}");
    let f = OpenOptions::new().read(true).write(true).open(s.p("db")).unwrap();
    let reader = File::open(s.p("db")).unwrap(); // open elsewhere, in the same mode
    assert_eq!(counter(&s.info(), "passthrough opens"), 2, "{}", s.info());
    for i in 0..5 {
        put(&f, &mut model, 10 + i * 100, b"synced below");
    }
    let info = s.info();
    assert_eq!(
        (counter(&info, "promotions"), counter(&info, "promotions deferred to the next open")),
        (0, 1),
        "{info}"
    );
    assert_eq!(fs::read(s.low("db")).unwrap(), model, "a passthrough handle writes the lower file");
    let mut seen = vec![0u8; model.len()];
    reader.read_exact_at(&mut seen, 0).unwrap();
    assert_eq!(seen, model, "the other handle reads the same bytes");
    drop((f, reader));
    released(&s);
    // The next open promotes the file and is the daemon's: its fsyncs are absorbed.
    let f = OpenOptions::new().read(true).write(true).open(s.p("db")).unwrap();
    assert_eq!(s.promoted(), 1, "{}", s.info());
    let below = fs::read(s.low("db")).unwrap();
    put(&f, &mut model, 5000, b"absorbed in PM");
    assert_eq!(fs::read(s.low("db")).unwrap(), below, "an absorbed write reached the lower file");
    assert_eq!(fs::read(s.p("db")).unwrap(), model);
    assert_eq!(counter(&s.info(), "passthrough opens"), 2);
    drop(f);

    // A shared mapping of a file below, written through the mapping.
    let len = 8192usize;
    fs::write(s.low("mapped"), vec![0u8; len]).unwrap();
    let m = OpenOptions::new().read(true).write(true).open(s.p("mapped")).unwrap();
    // SAFETY: a fresh shared mapping of `len` bytes of an open file, unmapped below.
    let p = unsafe {
        libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, m.as_raw_fd(), 0)
    };
    assert_ne!(p, libc::MAP_FAILED, "mmap of a file below: {}", std::io::Error::last_os_error());
    // SAFETY: inside the mapping.
    unsafe { std::ptr::copy_nonoverlapping(b"through the map".as_ptr(), p.cast::<u8>().add(4000), 15) };
    // SAFETY: the mapping made above, its length.
    assert_eq!(unsafe { libc::msync(p, len, libc::MS_SYNC) }, 0);
    // SAFETY: the same.
    assert_eq!(unsafe { libc::munmap(p, len) }, 0);
    drop(m);
    assert_eq!(&fs::read(s.low("mapped")).unwrap()[4000..4015], b"through the map");
    assert_eq!(&fs::read(s.p("mapped")).unwrap()[4000..4015], b"through the map");

    // O_DIRECT, aligned, through the lower file.
    use std::os::unix::fs::OpenOptionsExt;
    let d = OpenOptions::new().read(true).write(true).custom_flags(libc::O_DIRECT).open(s.p("mapped")).unwrap();
    let layout = std::alloc::Layout::from_size_align(4096, 4096).unwrap();
    // SAFETY: a non-zero size; freed below with the same layout.
    let buf = unsafe { std::alloc::alloc_zeroed(layout) };
    // SAFETY: `buf` holds 4096 bytes.
    let block = unsafe { std::slice::from_raw_parts_mut(buf, 4096) };
    block.fill(b'D');
    d.write_all_at(block, 4096).unwrap();
    block.fill(0);
    d.read_exact_at(block, 4096).unwrap();
    let direct_ok = block.iter().all(|&c| c == b'D');
    // SAFETY: allocated above with this layout.
    unsafe { std::alloc::dealloc(buf, layout) };
    drop(d);
    assert!(direct_ok, "an O_DIRECT read did not see the O_DIRECT write");
    assert!(fs::read(s.low("mapped")).unwrap()[4096..].iter().all(|&c| c == b'D'), "O_DIRECT went below");
    assert!(!s.log().contains("passthrough open failed"), "{}", s.log());
    s.umount(true);
    assert_eq!(fs::read(s.low("db")).unwrap(), model, "written back");
}

/// `passthrough=on`: a file reopened at every delivery (a mail spool) is promoted at the
/// open after its fsyncs asked for it, and a file in a run of fsyncs opens through the
/// daemon (where it can be promoted while open), not by passthrough.
#[test]
fn passthrough_leaves_a_syncing_file_to_the_daemon() {
    if !fuse_available() {
        return;
    }
    // A long interval: every fsync comes soon enough, however slow the disk below.
    let mut s = Stacked::new("16M", "promote_after=3,sf_limit=none,passthrough=on,sync_interval_ms=60000");
    s.start();
    let mut model = Vec::new();
    for i in 0..6 {
        let f = OpenOptions::new().append(true).create(true).open(s.p("mbox")).unwrap();
        let msg = pattern(700, i);
        (&f).write_all(&msg).unwrap();
        f.sync_data().unwrap();
        model.extend_from_slice(&msg);
        if i == 2 {
            // Opened through the daemon (syncing): a second handle meanwhile is too (a
            // passthrough one beside it the kernel would refuse, EIO).
            assert_eq!(fs::read(s.p("mbox")).unwrap(), model, "a second open beside a daemon-served one");
        }
        drop(f);
        released(&s); // each delivery's open comes after the last one's release
    }
    let info = s.info();
    assert_eq!(s.promoted(), 1, "{info}");
    // The first two opens: nothing known, passthrough; from the third the file was in a
    // run of qualifying fsyncs.
    assert_eq!(counter(&info, "passthrough opens"), 2, "{info}");
    assert_eq!(fs::read(s.p("mbox")).unwrap(), model);
    // Large writes between fsyncs through passthrough (the daemon counts them from the
    // lower file's dirty pages at each fsync): 5 MiB on average, over the profiler's 4
    // MiB, so no fsync qualifies and nothing waits for promotion.
    let big = OpenOptions::new().write(true).create(true).truncate(true).open(s.p("big")).unwrap();
    for i in 0..5u64 {
        big.write_all_at(&pattern(5 << 20, i as u8), i * (5 << 20)).unwrap();
        big.sync_data().unwrap();
    }
    drop(big);
    assert_eq!(counter(&s.info(), "promotions deferred to the next open"), 0, "{}", s.info());
    s.umount(true);
    assert_eq!(fs::read(s.low("mbox")).unwrap(), model);
}

/// The directory rule (issue 58, `hashfs-spfs/src/dirs.rs`): after a directory's files made
/// a run of small fsyncs (here `promote_after=3` of them), a file created there starts in
/// PM and its first fsync is absorbed; one created in another directory stays below; and
/// `dir_rule=off` turns it off.
#[test]
fn the_directory_rule_absorbs_files_made_where_files_sync_often() {
    if !fuse_available() {
        return;
    }
    for rule in ["on", "off"] {
        let opts = format!("promote_after=3,sf_limit=none,sync_interval_ms=60000,dir_rule={rule}");
        let mut s = Stacked::new("16M", &opts);
        s.start();
        for d in ["mail", "other"] {
            fs::create_dir(s.p(d)).unwrap();
        }
        for i in 0..3u8 {
            let f = OpenOptions::new().write(true).create_new(true).open(s.p(&format!("mail/m{i}"))).unwrap();
            f.write_all_at(&pattern(300, i), 0).unwrap();
            f.sync_data().unwrap();
        }
        for d in ["mail", "other"] {
            let f = OpenOptions::new().write(true).create_new(true).open(s.p(&format!("{d}/late"))).unwrap();
            f.write_all_at(&pattern(500, 9), 0).unwrap();
            f.sync_data().unwrap();
            assert_eq!(fs::read(s.p(&format!("{d}/late"))).unwrap(), pattern(500, 9));
        }
        let info = s.info();
        let absorbed = fs::read(s.low("mail/late")).unwrap().is_empty();
        // The three files' lower fsyncs and other/late's; mail/late's too without the
        // rule. With it, mail/late is made in PM, its creation recorded there for a mount
        // that finds it lost below (`remake.rs`), and its fsync is absorbed.
        let lower_fsyncs = if rule == "on" { 4 } else { 5 };
        assert_eq!(counter(&info, "fsyncs on the lower file system"), lower_fsyncs, "{info}");
        if rule == "on" {
            assert_eq!(counter(&info, "promoted as made (directory rule)"), 1, "{info}");
            assert!(absorbed, "mail/late's data reached the lower file: {info}");
        } else {
            assert_eq!(counter(&info, "promoted as made (directory rule)"), 0, "{info}");
            assert!(!absorbed, "dir_rule=off absorbed mail/late");
        }
        assert_eq!(fs::read(s.low("other/late")).unwrap(), pattern(500, 9), "other/late was absorbed");
        // Deleted while promoted: its PM copy goes with it.
        fs::remove_file(s.p("mail/late")).unwrap();
        assert_eq!(s.promoted(), 0, "{}", s.info());
        s.umount(false);
    }
}

/// Messages delivered below before their directory turned hot (`hashfs-spfs/src/settled.rs`):
/// the first opened for appending there goes below and asks for a syncfs; one opened after
/// the syncfs is promoted at the open, its append's fsync absorbed; with `settled=off` every
/// fsync goes below.
#[test]
fn a_message_settled_below_is_absorbed_at_its_open_in_a_hot_directory() {
    if !fuse_available() {
        return;
    }
    for settled in ["on", "off"] {
        let opts = format!("promote_after=3,sf_limit=none,sync_interval_ms=60000,settled={settled}");
        let mut s = Stacked::new("16M", &opts);
        s.start();
        fs::create_dir(s.p("mail")).unwrap();
        for (name, seed) in [("mail/early", 4), ("mail/old", 1)] {
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(s.p(name))
                .unwrap()
                .write_all(&pattern(700, seed))
                .unwrap();
        }
        std::thread::sleep(Duration::from_millis(100));
        for i in 0..3u8 {
            let f = OpenOptions::new().write(true).create_new(true).open(s.p(&format!("mail/m{i}"))).unwrap();
            f.write_all_at(&pattern(300, i), 0).unwrap();
            f.sync_data().unwrap();
        }
        // The directory is hot. The first message appended to there has had no syncfs: it
        // goes below, and the write-back thread is woken for one.
        let append = |name: &str, seed: u8| {
            let mut f = OpenOptions::new().append(true).open(s.p(name)).unwrap();
            f.write_all(&pattern(200, seed)).unwrap();
            f.sync_data().unwrap();
        };
        append("mail/early", 5);
        std::thread::sleep(Duration::from_millis(300));
        append("mail/old", 2);
        let mut want = pattern(700, 1);
        want.extend(pattern(200, 2));
        assert_eq!(fs::read(s.p("mail/old")).unwrap(), want);
        let info = s.info();
        if settled == "on" {
            assert_eq!(counter(&info, "promoted at open (settled below)"), 1, "{info}");
            assert_eq!(counter(&info, "fsyncs on the lower file system"), 4, "{info}");
            assert_eq!(fs::read(s.low("mail/old")).unwrap(), pattern(700, 1), "the append reached the lower file");
        } else {
            assert_eq!(counter(&info, "promoted at open (settled below)"), 0, "{info}");
            assert_eq!(counter(&info, "fsyncs on the lower file system"), 5, "{info}");
        }
        s.umount(false);
    }
}

/// Sets (or with `None` removes) extended attribute `name` of `path`.
fn set_xattr(path: &Path, name: &str, value: Option<&[u8]>) {
    let p = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    let n = std::ffi::CString::new(name).unwrap();
    // SAFETY: NUL-terminated strings and a value of the length given, for the call.
    let r = unsafe {
        match value {
            Some(v) => libc::setxattr(p.as_ptr(), n.as_ptr(), v.as_ptr().cast(), v.len(), 0),
            None => libc::removexattr(p.as_ptr(), n.as_ptr()),
        }
    };
    assert_eq!(r, 0, "{name} on {}: {}", path.display(), std::io::Error::last_os_error());
}

/// SPFS's standalone rules (issue 58, `hashfs-spfs/src/standalone.rs`), on a passthrough
/// mount, where they matter most: a file made as a WAL (`extension=log`), with O_SYNC, or
/// in a directory marked `user.hashfs.boost` (through the mount) starts in PM and is served
/// by the daemon from its first open, so its fsyncs are absorbed though it stays open; a
/// file made otherwise, or after the mark was removed, is served by passthrough and its
/// bytes go below; `standalone=off` turns the rules off.
#[test]
fn files_made_to_sync_start_in_pm_and_skip_passthrough() {
    if !fuse_available() {
        return;
    }
    use std::os::unix::fs::OpenOptionsExt;
    for on in [true, false] {
        let opts = format!("passthrough=on,extension=log,standalone={}", if on { "on" } else { "off" });
        let mut s = Stacked::new("16M", &opts);
        s.start();
        fs::create_dir(s.p("boosted")).unwrap();
        set_xattr(&s.p("boosted"), "user.hashfs.boost", Some(b""));
        let make = |name: &str, flags: i32, seed: u8| {
            let f = OpenOptions::new().write(true).create_new(true).custom_flags(flags).open(s.p(name)).unwrap();
            // Written and fsynced three times while open (a WAL's life).
            for k in 0..3usize {
                f.write_all_at(&pattern(300, seed + k as u8), 300 * k as u64).unwrap();
                f.sync_data().unwrap();
            }
            f
        };
        let mut open = Vec::new();
        let mut want = Vec::new();
        for (i, (name, flags)) in
            [("000001.log", 0), ("sync", libc::O_SYNC), ("boosted/m", 0), ("x.logger", 0), ("plain", 0)]
                .into_iter()
                .enumerate()
        {
            open.push(make(name, flags, 10 * i as u8));
            want.push((name, (0..3).flat_map(|k| pattern(300, 10 * i as u8 + k)).collect::<Vec<u8>>()));
        }
        set_xattr(&s.p("boosted"), "user.hashfs.boost", None);
        open.push(make("boosted/n", 0, 50));
        want.push(("boosted/n", (0..3).flat_map(|k| pattern(300, 50 + k)).collect()));
        let info = s.info();
        let in_pm = ["000001.log", "sync", "boosted/m"];
        for (name, bytes) in &want {
            assert_eq!(&fs::read(s.p(name)).unwrap(), bytes, "{name} through the mount");
            let below = fs::read(s.low(name)).unwrap();
            if on && in_pm.contains(name) {
                assert!(below.is_empty(), "{name}: an absorbed write reached the lower file: {info}");
            } else {
                assert_eq!(&below, bytes, "{name} below (standalone {on}): {info}");
            }
        }
        let made = if on { in_pm.len() as u64 } else { 0 };
        assert_eq!(counter(&info, "promoted as made (standalone)"), made, "{info}");
        // Every file not made in PM was opened by passthrough; those made in PM were not.
        assert_eq!(counter(&info, "passthrough opens"), want.len() as u64 - made, "{info}");
        // Each file made in PM has every fsync (and "sync"'s O_SYNC writes) absorbed, its
        // creation recorded in PM (`remake.rs`); the passthrough files' three each reach
        // the daemon, which fsyncs them below.
        assert!(counter(&info, "fsyncs absorbed in PM") >= 3 * made, "{info}");
        if on {
            assert_eq!(counter(&info, "fsyncs on the lower file system"), 3 * (want.len() as u64 - made), "{info}");
        }
        drop(open);
        s.umount(true);
        for (name, bytes) in &want {
            assert_eq!(&fs::read(s.low(name)).unwrap(), bytes, "{name} written back");
        }
    }
}

/// A file made in PM (`hashfs-spfs/src/remake.rs`) keeps a record of where it was made,
/// so its fsyncs need no lower fsync: a power failure that takes its lower creation is
/// repaired from PM at the next mount. Here the lower file system "loses" two such files
/// (removed below while the daemon is dead); one is made again at its name, the other,
/// whose name another file took meanwhile, under `.hashfs-remade/`, that file untouched; a
/// file unlinked through the mount (while open, when the daemon died), in the same mount
/// or the next, is not made again.
#[test]
fn a_file_made_in_pm_is_made_again_when_the_lower_file_system_loses_its_creation() {
    if !fuse_available() {
        return;
    }
    let mut s = Stacked::new("16M", "extension=log");
    s.start();
    let made = |name: &str, seed: u8| {
        let f = OpenOptions::new().write(true).create_new(true).open(s.p(name)).unwrap();
        f.write_all_at(&pattern(6000, seed), 0).unwrap();
        f.sync_data().unwrap();
        f
    };
    drop(made("a.log", 1));
    let b = made("b.log", 2);
    drop(made("c.log", 3));
    drop(made("d.log", 4));
    fs::remove_file(s.p("b.log")).unwrap(); // unlinked while open
    let info = s.info();
    assert_eq!(counter(&info, "promoted as made (standalone)"), 4, "{info}");
    assert_eq!(counter(&info, "fsyncs on the lower file system"), 0, "{info}");
    s.kill();
    drop(b);
    // The lower file system lost a.log's and c.log's creations; another file took c.log.
    fs::remove_file(s.low("a.log")).unwrap();
    fs::remove_file(s.low("c.log")).unwrap();
    fs::write(s.low("c.log"), b"another file").unwrap();
    s.start();
    assert!(s.log().contains("2 files made in PM whose creation the lower file system lost made again"), "{}", s.log());
    assert_eq!(fs::read(s.p("a.log")).unwrap(), pattern(6000, 1));
    assert!(!s.p("b.log").exists() && !s.low("b.log").exists(), "an unlinked file came back");
    assert_eq!(fs::read(s.p("c.log")).unwrap(), b"another file");
    // d.log, made in PM in the mount before, unlinked in this one while open: its record
    // goes with its last name here too.
    let d = File::open(s.p("d.log")).unwrap();
    fs::remove_file(s.p("d.log")).unwrap();
    s.kill();
    drop(d);
    s.start();
    assert!(!s.p("d.log").exists() && !s.low("d.log").exists(), "a file unlinked after a remount came back");
    let spare: Vec<_> = fs::read_dir(s.low(".hashfs-remade")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(spare.len(), 1, "{spare:?}");
    assert!(spare[0].file_name().unwrap().to_str().unwrap().starts_with("c.log."), "{spare:?}");
    s.umount(true);
    assert_eq!(fs::read(&spare[0]).unwrap(), pattern(6000, 3), "c.log's bytes, made again aside");
    assert_eq!(fs::read(s.low("a.log")).unwrap(), pattern(6000, 1), "written back");
    let o = hashfs().arg("fsck").arg(&s.image).arg("--lower").arg(&s.lower).output().unwrap();
    assert!(o.status.success(), "{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
}

/// The mount's backing device gets a block device's dirty page limits, not the kernel's
/// 1%, strict, for FUSE (`hashfs-fuse/src/dirty_limit.rs`), unless `dirty_limit=fuse`.
#[test]
fn the_mount_has_a_block_devices_dirty_page_limits() {
    if !fuse_available() {
        return;
    }
    use std::os::unix::fs::MetadataExt;
    for (opt, want) in [("", ("100", "0")), ("dirty_limit=fuse", ("1", "1"))] {
        let mut s = Stacked::new("16M", opt);
        s.start();
        let dev = fs::metadata(&s.mnt).unwrap().dev();
        let bdi = PathBuf::from(format!("/sys/class/bdi/{}:{}", libc::major(dev), libc::minor(dev)));
        let read = |f: &str| fs::read_to_string(bdi.join(f)).unwrap().trim().to_string();
        let t = Instant::now();
        while (read("max_ratio"), read("strict_limit")) != (want.0.to_string(), want.1.to_string())
            && t.elapsed() < Duration::from_secs(5)
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(200)); // nothing changes them later
        assert_eq!((read("max_ratio"), read("strict_limit")), (want.0.into(), want.1.into()), "{opt:?}: {}", s.log());
        s.umount(false);
    }
}

/// The sync factor `hashfs info` shows for the promoted file at `path` (3 decimals).
fn shown_factor(info: &str, path: &Path) -> String {
    let line = info.lines().find(|l| l.trim_start().starts_with(path.to_str().unwrap()));
    let line = line.unwrap_or_else(|| panic!("{} is not promoted: {info}", path.display()));
    line.rsplit("sync factor ").next().unwrap().trim().to_string()
}

/// Sync Factors persist (issue 58, `hashfs-spfs/src/saved_profiles.rs`): a promoted file's
/// comes back after an unmount and after a kill -9 (as of the last save, every 4 s), and a
/// file written back keeps its own, so that with `passthrough=on` its first open after a
/// remount is the daemon's (it syncs often), where its fsyncs promote it while open.
#[test]
fn sync_factors_survive_unmounts_and_kills() {
    if !fuse_available() {
        return;
    }
    let mut s = Stacked::new("64M", "promote_after=3,sf_limit=none,sync_interval_ms=60000");
    s.start();
    let mut model = Vec::new();
    let f = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(s.p("wal")).unwrap();
    for i in 0..5 {
        put(&f, &mut model, i * 100, b"record");
    }
    drop(f);
    let low = fs::canonicalize(s.low("wal")).unwrap();
    // Four qualifying fsyncs (the first only starts the clock): 1 - 0.95^4 = 0.185, less
    // what reads of the kernel took; a promotion alone (three) leaves 0.143, which is what
    // a mount that forgets shows.
    let first = shown_factor(&s.info(), &low);
    assert_ne!(first, "0.143", "{}", s.info());
    s.umount(false);
    s.start();
    assert_eq!(shown_factor(&s.info(), &low), first, "after an unmount: {}", s.info());
    let f = OpenOptions::new().read(true).write(true).open(s.p("wal")).unwrap();
    for i in 0..11 {
        put(&f, &mut model, 600 + i * 100, b"record");
    }
    drop(f);
    // The first fsync after the mount starts the clock again: 10 more qualify (0.5 or so).
    let second = shown_factor(&s.info(), &low);
    assert!(second.as_str() > "0.4" && second != first, "{}", s.info());
    std::thread::sleep(Duration::from_millis(4500)); // a save (every 16 ticks of 250 ms)
    assert!(counter(&s.info(), "sync factors saved for the next mount") >= 1, "{}", s.info());
    s.kill();
    s.start();
    assert_eq!(shown_factor(&s.info(), &low), second, "after kill -9: {}", s.info());
    assert_eq!(fs::read(s.p("wal")).unwrap(), model);
    s.umount(true);
    assert_eq!(fs::read(s.low("wal")).unwrap(), model, "written back");

    // (The directory rule off: the directory's files synced, so it would make "other" in PM.)
    s.opts = "promote_after=3,sf_limit=none,sync_interval_ms=60000,passthrough=on,dir_rule=off".into();
    s.start();
    let f = OpenOptions::new().read(true).write(true).open(s.p("wal")).unwrap();
    assert_eq!(counter(&s.info(), "passthrough opens"), 0, "a file that syncs often is the daemon's: {}", s.info());
    for i in 0..4 {
        put(&f, &mut model, 2000 + i * 100, b"again");
    }
    let info = s.info();
    assert_eq!((s.promoted(), counter(&info, "promotions deferred to the next open")), (1, 0), "{info}");
    drop(f);
    let other = OpenOptions::new().write(true).create(true).truncate(true).open(s.p("other")).unwrap();
    drop(other);
    assert_eq!(counter(&s.info(), "passthrough opens"), 1, "a file with no history is passthrough");
    s.umount(true);
    assert_eq!(fs::read(s.low("wal")).unwrap(), model);
}
