//! The kernel's cache of names and attributes over the mount (`cache_timeout`, 60 s by
//! default, and directory listings with attributes, READDIRPLUS): after every kind of
//! change, what `stat` shows through the cache is what HashFS has. The oracle is the
//! kernel asking again: every check walks the tree, drops the kernel's dentries and
//! inodes (`/proc/sys/vm/drop_caches`), walks it again, and wants the same answers.

#[path = "fuse_common.rs"]
mod common;
use common::*;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

/// What `stat` says of a name, atime aside (the mount is noatime).
#[derive(Debug, PartialEq, Eq)]
struct Stat {
    ino: u64,
    mode: u32,
    nlink: u64,
    uid: u32,
    gid: u32,
    size: u64,
    blocks: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

fn stat_of(m: &fs::Metadata) -> Stat {
    Stat {
        ino: m.ino(),
        mode: m.mode(),
        nlink: m.nlink(),
        uid: m.uid(),
        gid: m.gid(),
        size: m.size(),
        blocks: m.blocks(),
        mtime: (m.mtime(), m.mtime_nsec()),
        ctime: (m.ctime(), m.ctime_nsec()),
    }
}

/// The stat of each name under `root` (None: no such name). By name, not by listing: a
/// listing with attributes (READDIRPLUS) would refresh what the kernel cached.
fn stats(root: &Path, names: &[&str]) -> Vec<Option<Stat>> {
    names.iter().map(|n| fs::symlink_metadata(root.join(n)).ok().map(|m| stat_of(&m))).collect()
}

/// The tests here drop the kernel's caches, which are global: each holds this while it
/// runs, so that none drops what another is checking is kept.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn drop_kernel_caches() {
    fs::write("/proc/sys/vm/drop_caches", "2").expect("drop_caches (needs root)");
}

/// Every name the test below uses.
const NAMES: [&str; 8] = [".", "a", "b", "d", "d/a2", "d/inherits", "d/sub", "sub"];

/// What the cache shows equals what the daemon answers once the cache is gone.
#[track_caller]
fn cache_agrees(m: &Mounted, step: &str) {
    let cached = stats(&m.mnt, &NAMES);
    drop_kernel_caches();
    let fresh = stats(&m.mnt, &NAMES);
    for ((name, c), f) in NAMES.iter().zip(&cached).zip(&fresh) {
        assert_eq!(c, f, "after {step}: the cached stat of {name} differs from HashFS's");
    }
}

#[test]
fn cached_names_and_attributes_follow_every_change() {
    if !fuse_available() {
        return;
    }
    let _serial = serial();
    let m = Mounted::new("64M");
    let p = |s: &str| m.path(s);
    fs::create_dir(p("d")).unwrap();
    fs::write(p("a"), b"first").unwrap();
    fs::write(p("b"), b"second file").unwrap();
    cache_agrees(&m, "creates");

    fs::hard_link(p("a"), p("d/a2")).unwrap();
    cache_agrees(&m, "link");

    let mut f = fs::OpenOptions::new().append(true).open(p("a")).unwrap();
    f.write_all(&[7u8; 10_000]).unwrap();
    drop(f);
    cache_agrees(&m, "a write through one of two names");

    fs::set_permissions(p("d/a2"), fs::Permissions::from_mode(0o640)).unwrap();
    cache_agrees(&m, "chmod through the other name");

    fs::remove_file(p("a")).unwrap();
    cache_agrees(&m, "unlink of one of two names");

    let victim = fs::File::open(p("d/a2")).unwrap();
    fs::rename(p("b"), p("d/a2")).unwrap();
    assert_eq!(victim.metadata().unwrap().nlink(), 0, "the replaced file has no name left");
    drop(victim);
    cache_agrees(&m, "rename over a file");

    fs::create_dir(p("d/sub")).unwrap();
    fs::rename(p("d/sub"), p("sub")).unwrap();
    cache_agrees(&m, "mkdir and a directory moved between parents");

    let st = Command::new("setfacl").args(["-m", "u:1000:rwx,m::r"]).arg(p("d/a2")).status().unwrap();
    assert!(st.success(), "setfacl");
    cache_agrees(&m, "an ACL that changes the mode's group bits");

    let st = Command::new("setfacl").args(["-d", "-m", "u:1000:rw,m::rw"]).arg(p("d")).status().unwrap();
    assert!(st.success(), "setfacl -d");
    fs::write(p("d/inherits"), b"x").unwrap();
    cache_agrees(&m, "a create under a default ACL (the new file's mode comes from it)");

    fs::set_permissions(p("d/a2"), fs::Permissions::from_mode(0o4777)).unwrap();
    as_user(1000, 1000, &[1000], || {
        fs::OpenOptions::new().append(true).open(p("d/a2")).unwrap().write_all(b"user").unwrap();
    });
    assert_eq!(fs::metadata(p("d/a2")).unwrap().mode() & 0o7777, 0o777, "set-user-ID cleared by the write");
    cache_agrees(&m, "a write by another user that clears set-user-ID");

    fs::OpenOptions::new().write(true).open(p("d/a2")).unwrap().set_len(3).unwrap();
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
    fs::File::open(p("d/a2")).unwrap().set_modified(t).unwrap();
    cache_agrees(&m, "truncate and utimes");

    fs::remove_dir(p("sub")).unwrap();
    cache_agrees(&m, "rmdir");
}

/// A listing of more entries than one reply holds gives every name once, each with its
/// own attributes, and a name removed or added after a listing is seen at once.
#[test]
fn listings_with_attributes_are_complete_and_current() {
    if !fuse_available() {
        return;
    }
    let _serial = serial();
    let m = Mounted::new("64M");
    let d = m.path("many");
    fs::create_dir(&d).unwrap();
    for i in 0..600usize {
        fs::write(d.join(format!("file-with-a-longish-name-{i:04}")), vec![1u8; i]).unwrap();
    }
    drop_kernel_caches();
    let mut seen = 0;
    for e in fs::read_dir(&d).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        let i: usize = name.rsplit('-').next().unwrap().parse().unwrap();
        assert_eq!(e.metadata().unwrap().len(), i as u64, "{name}");
        seen += 1;
    }
    assert_eq!(seen, 600);
    // The attributes a listing brought into the cache are what HashFS has: stat each name
    // right after a listing (served from the cache), then again once the cache is gone.
    drop_kernel_caches();
    let names: Vec<_> = fs::read_dir(&d).unwrap().map(|e| e.unwrap().path()).collect();
    let from_listing: Vec<_> = names.iter().map(|p| stat_of(&fs::symlink_metadata(p).unwrap())).collect();
    drop_kernel_caches();
    for (p, cached) in names.iter().zip(&from_listing) {
        assert_eq!(cached, &stat_of(&fs::symlink_metadata(p).unwrap()), "{}", p.display());
    }

    fs::remove_file(d.join("file-with-a-longish-name-0007")).unwrap();
    fs::write(d.join("file-with-a-longish-name-0007"), b"again").unwrap();
    assert_eq!(fs::metadata(d.join("file-with-a-longish-name-0007")).unwrap().len(), 5);
    assert_eq!(fs::read_dir(&d).unwrap().count(), 600);
}

/// Drops the kernel's cached file pages (and nothing HashFS holds).
fn drop_page_cache() {
    fs::write("/proc/sys/vm/drop_caches", "1").expect("drop_caches (needs root)");
}

/// What a new open reads through the kernel's cache equals what HashFS has (read again
/// once the cache is gone), and equals `want`.
#[track_caller]
fn data_agrees(path: &Path, want: &[u8], step: &str) {
    let cached = fs::read(path).unwrap();
    drop_page_cache();
    let fresh = fs::read(path).unwrap();
    assert!(cached == fresh, "after {step}: the cached data differs from HashFS's");
    assert!(fresh == want, "after {step}: HashFS's data is not what was written");
}

/// Opens keep a file's cached pages (FOPEN_KEEP_CACHE: a file read once is not read
/// through the daemon again at every open), and what the cache shows after every kind of
/// change to the data is what HashFS has.
#[test]
fn cached_file_data_survives_opens_and_follows_every_change() {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileExt;
    if !fuse_available() {
        return;
    }
    let _serial = serial();
    let m = Mounted::new("64M");
    let p = m.path("f");
    const LEN: usize = 64 << 10;
    let mut want: Vec<u8> = (0..LEN).map(|i| (i * 7 % 251) as u8).collect();
    fs::write(&p, &want).unwrap();
    drop_page_cache();
    assert_eq!(fs::read(&p).unwrap(), want);
    let f = fs::File::open(&p).unwrap();
    assert_eq!(cached_pages(&f, LEN), LEN / 4096, "a new open dropped the pages read before it");
    drop(f);
    // A reader that stays open across the changes, reading through the same cache.
    let reader = fs::File::open(&p).unwrap();

    let w = fs::OpenOptions::new().write(true).open(&p).unwrap();
    w.write_all_at(&[1u8; 5000], 3000).unwrap();
    want[3000..8000].fill(1);
    drop(w);
    data_agrees(&p, &want, "a write through another descriptor");

    let rw = fs::OpenOptions::new().read(true).write(true).open(&p).unwrap();
    // SAFETY: a shared writable mapping of the file's first 16 KiB, stored to, synced and
    // unmapped here.
    unsafe {
        let at = libc::mmap(
            std::ptr::null_mut(),
            16384,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            rw.as_raw_fd(),
            0,
        );
        assert_ne!(at, libc::MAP_FAILED);
        std::ptr::write_bytes((at as *mut u8).add(100), 2, 9000);
        assert_eq!(libc::msync(at, 16384, libc::MS_SYNC), 0);
        libc::munmap(at, 16384);
    }
    want[100..9100].fill(2);
    data_agrees(&p, &want, "stores through a shared mapping");

    // SAFETY: fallocate on an open descriptor with in-range arguments.
    let punched =
        unsafe { libc::fallocate(rw.as_raw_fd(), libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE, 8192, 8192) };
    assert_eq!(punched, 0, "punch: {}", std::io::Error::last_os_error());
    want[8192..16384].fill(0);
    data_agrees(&p, &want, "a punched hole");
    // SAFETY: as above.
    let zeroed = unsafe { libc::fallocate(rw.as_raw_fd(), libc::FALLOC_FL_ZERO_RANGE, 20000, 10000) };
    assert_eq!(zeroed, 0, "zero range: {}", std::io::Error::last_os_error());
    want[20000..30000].fill(0);
    data_agrees(&p, &want, "a zeroed range");

    let src = m.path("src");
    fs::write(&src, [3u8; 6000]).unwrap();
    let s = fs::File::open(&src).unwrap();
    let (mut so, mut doff) = (0i64, 40000i64);
    // SAFETY: both descriptors are open; the offsets are plain integers.
    let n = unsafe { libc::copy_file_range(s.as_raw_fd(), &mut so, rw.as_raw_fd(), &mut doff, 6000, 0) };
    assert_eq!(n, 6000, "copy_file_range: {}", std::io::Error::last_os_error());
    want[40000..46000].fill(3);
    data_agrees(&p, &want, "copy_file_range into the file");

    rw.set_len(10000).unwrap();
    rw.set_len(LEN as u64).unwrap();
    want[10000..].fill(0);
    data_agrees(&p, &want, "a truncation down and up again");

    let mut a = fs::OpenOptions::new().append(true).open(&p).unwrap();
    a.write_all(b"appended").unwrap();
    want.extend_from_slice(b"appended");
    data_agrees(&p, &want, "an append");

    let mut buf = vec![0u8; want.len()];
    reader.read_exact_at(&mut buf, 0).unwrap();
    assert!(buf == want, "the descriptor open across the changes reads stale data");

    fs::write(&p, b"short").unwrap();
    data_agrees(&p, b"short", "an open with O_TRUNC and a shorter write");
}

/// Blocks free on the mount (statvfs).
fn free_blocks(m: &Mounted) -> u64 {
    let c = std::ffi::CString::new(m.path("").to_str().unwrap()).unwrap();
    // SAFETY: a valid path and a zeroed statvfs for the kernel to fill.
    unsafe {
        let mut s: libc::statvfs = std::mem::zeroed();
        assert_eq!(libc::statvfs(c.as_ptr(), &mut s), 0);
        s.f_bfree
    }
}

/// The kernel opens and closes files without asking the daemon (its first OPEN is
/// answered ENOSYS, its first FLUSH too): shown by killing the daemon, after which an open,
/// a read of cached pages and a close still succeed (any request would fail, nobody
/// serves the mount). Files the kernel opened itself still outlive their names, as POSIX
/// has it: one unlinked and one renamed over while open are read (past a dropped page
/// cache, so through the daemon) and written, and their blocks are freed once their last
/// descriptor is closed (when the kernel forgets the inode), not before.
#[test]
fn opens_cost_no_round_trip_and_unlinked_files_live_until_closed() {
    if !fuse_available() {
        return;
    }
    let _serial = serial();
    let mut m = Mounted::new("64M");
    let big = |b: u8| vec![b; 1 << 20];
    fs::write(m.path("a"), big(1)).unwrap();
    // The first open: answered ENOSYS. Created after it (their handles are never
    // released): u and r are opened by the kernel alone below, x is looked up again
    // after its inode is dropped.
    assert_eq!(fs::read(m.path("a")).unwrap(), big(1));
    for (n, b) in [("u", 2u8), ("r", 3), ("x", 4)] {
        fs::write(m.path(n), big(b)).unwrap();
    }
    drop_kernel_caches();
    let mut u = fs::OpenOptions::new().read(true).write(true).open(m.path("u")).unwrap();
    let r = fs::File::open(m.path("r")).unwrap();
    let full = free_blocks(&m);
    fs::remove_file(m.path("u")).unwrap();
    fs::rename(m.path("x"), m.path("r")).unwrap();
    drop_kernel_caches();
    drop_page_cache();
    assert_eq!(free_blocks(&m), full, "an open file's blocks were freed with its name");
    let read_all = |mut f: &fs::File| {
        use std::io::{Read, Seek};
        let mut v = Vec::new();
        f.seek(std::io::SeekFrom::Start(0)).unwrap();
        f.read_to_end(&mut v).unwrap();
        v
    };
    assert!(read_all(&u) == big(2), "the unlinked open file lost its data");
    assert!(read_all(&r) == big(3), "the renamed-over open file lost its data");
    u.write_all(b"still writable").unwrap();
    drop_page_cache();
    assert_eq!(&read_all(&u)[1 << 20..], b"still writable");
    drop(u);
    drop(r);
    drop_kernel_caches();
    let freed = (0..100).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(20));
        free_blocks(&m) >= full + 2 * 256
    });
    assert!(freed, "the files' blocks were not freed after their last close: {} -> {}", full, free_blocks(&m));

    // Cached again. The daemon's death detaches the mount: the name is reached from a
    // directory descriptor opened before, and stays in the kernel's cache of names while
    // a descriptor of it is open (a lookup would ask the daemon).
    assert_eq!(fs::read(m.path("a")).unwrap(), big(1));
    let root = fs::File::open(m.path("")).unwrap();
    let pinned = fs::File::open(m.path("a")).unwrap();
    m.kill_daemon();
    let f = {
        use std::os::fd::{AsRawFd, FromRawFd};
        // SAFETY: a valid directory descriptor and NUL-terminated name; the new
        // descriptor is owned by the File.
        let fd = unsafe { libc::openat(root.as_raw_fd(), c"a".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        assert!(fd >= 0, "an open asked the daemon, which is gone: {}", std::io::Error::last_os_error());
        // SAFETY: fd is a new descriptor owned by nobody else.
        unsafe { fs::File::from_raw_fd(fd) }
    };
    assert!(read_all(&f) == big(1), "the cached pages were not kept");
    // A close that sent FLUSH would fail (RELEASE's answer is not waited for).
    // SAFETY: the descriptor is taken out of the File, closed once here.
    let closed = unsafe { libc::close(std::os::fd::IntoRawFd::into_raw_fd(f)) };
    assert_eq!(closed, 0, "a close asked the daemon, which is gone: {}", std::io::Error::last_os_error());
    drop((root, pinned));
    m.start();
    assert_eq!(fs::read(m.path("r")).unwrap(), big(4));
    assert!(!m.path("u").exists() && !m.path("x").exists());
    m.stop();
    m.fsck_clean();
}
