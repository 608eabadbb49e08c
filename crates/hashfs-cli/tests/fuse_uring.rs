//! FUSE over io_uring (`hashfs mount -o io_uring`, the transport in
//! vendor/fuser/src/uring.rs): requests reach the daemon through a ring per CPU and get the
//! answers they get through /dev/fuse (data, listings, links, attributes, errors), on an
//! image mount and on SPFS's stacked mount (`--lower`, with and without passthrough); a
//! mount that asks for it where the kernel has it off fails before anything is mounted.
//! scripts/test.sh also runs the fuse_posix and fuse_cache suites over the rings, and the
//! POSIX suite on the stacked mount over them.

mod fuse_common;
#[path = "support/stacked.rs"]
mod stacked;
use fuse_common::*;
use stacked::{counter, kill_under_an_appender, Stacked};
use std::ffi::CString;
use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

const ENABLE: &str = "/sys/module/fuse/parameters/enable_uring";

/// The kernel's switch for FUSE over io_uring is global: a test holds it (and this lock)
/// while it runs, and it is put back as it was after.
struct Switch {
    was: String,
    _serial: MutexGuard<'static, ()>,
}

fn switch(on: bool) -> Option<Switch> {
    static SERIAL: Mutex<()> = Mutex::new(());
    let serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let was = match fs::read_to_string(ENABLE) {
        Ok(s) => s,
        Err(e) => {
            skip(&format!("{ENABLE}: {e}: no FUSE over io_uring in this kernel (Linux 6.14+, CONFIG_FUSE_IO_URING)"));
            return None;
        }
    };
    fs::write(ENABLE, if on { "1" } else { "0" }).expect("enable_uring (needs root)");
    Some(Switch { was, _serial: serial })
}

impl Drop for Switch {
    fn drop(&mut self) {
        let _ = fs::write(ENABLE, if matches!(self.was.trim(), "Y" | "1") { "1" } else { "0" });
    }
}

/// Voluntary context switches of the daemon's threads, summed over the io_uring queue
/// threads (`fuser-ring-N`) and over the /dev/fuse ones (`fuser-N`): each sleeps once per
/// request it waits for when requests come one at a time.
fn switches(pid: u32) -> (u64, u64, usize) {
    let (mut ring, mut dev, mut queues) = (0, 0, 0);
    for t in fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let t = t.unwrap().path();
        let comm = fs::read_to_string(t.join("comm")).unwrap_or_default();
        let status = fs::read_to_string(t.join("status")).unwrap_or_default();
        let n: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .map(|v| v.trim().parse().unwrap())
            .unwrap_or(0);
        if comm.starts_with("fuser-ring-") {
            ring += n;
            queues += 1;
        } else if comm.starts_with("fuser-") {
            dev += n;
        }
    }
    (ring, dev, queues)
}

/// The kernel's `num_possible_cpus` (ranges such as `0-1` or `0-3,8-11`, counted).
fn possible_cpus() -> usize {
    let s = fs::read_to_string("/sys/devices/system/cpu/possible").unwrap();
    s.trim()
        .split(',')
        .map(|p| {
            let (a, b) = p.split_once('-').unwrap_or((p, p));
            b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1
        })
        .sum()
}

fn drop_caches() {
    fs::write("/proc/sys/vm/drop_caches", "3").expect("drop_caches (needs root)");
}

fn xattr(path: &Path, name: &str, value: Option<&[u8]>) -> std::io::Result<Vec<u8>> {
    let p = CString::new(path.as_os_str().as_bytes()).unwrap();
    let n = CString::new(name).unwrap();
    let mut buf = vec![0u8; 256];
    // SAFETY: NUL-terminated strings and buffers that live across the calls, with their lengths.
    let r = unsafe {
        match value {
            Some(v) => libc::setxattr(p.as_ptr(), n.as_ptr(), v.as_ptr().cast(), v.len(), 0) as isize,
            None => libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()),
        }
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    buf.truncate(if value.is_some() { 0 } else { r as usize });
    Ok(buf)
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn requests_go_through_the_rings_and_are_answered_as_through_dev_fuse() {
    if !fuse_available() {
        return;
    }
    let Some(_on) = switch(true) else { return };
    let mut m = Mounted::new_in_with("256M", Path::new("/dev/shm"), &["-o", "io_uring=2"]);
    let pid = m.daemon.as_ref().unwrap().id();
    let (ring0, dev0, queues) = switches(pid);
    assert_eq!(queues, possible_cpus(), "one io_uring queue thread per possible CPU");

    // Small files, each written and read back past the page cache.
    let d = m.path("d");
    fs::create_dir(&d).unwrap();
    for i in 0..200u64 {
        fs::write(d.join(format!("f{i:03}")), pattern(i, 100 + i as usize * 37)).unwrap();
    }
    drop_caches();
    for i in 0..200u64 {
        assert_eq!(fs::read(d.join(format!("f{i:03}"))).unwrap(), pattern(i, 100 + i as usize * 37), "f{i:03}");
    }
    // A listing of them all (several READDIRPLUS replies, each a full payload).
    let mut names: Vec<String> =
        fs::read_dir(&d).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names, (0..200).map(|i| format!("f{i:03}")).collect::<Vec<_>>());

    // A large file in the largest writes the kernel sends, and a read of a range of it.
    let big = pattern(7, 3 << 20);
    let mut f = fs::File::create(m.path("big")).unwrap();
    for c in big.chunks(1 << 20) {
        f.write_all(c).unwrap();
    }
    f.sync_all().unwrap();
    drop(f);
    drop_caches();
    assert_eq!(fs::read(m.path("big")).unwrap(), big, "a 3 MiB file written in 1 MiB writes");
    let mut f = fs::File::open(m.path("big")).unwrap();
    f.seek(SeekFrom::Start(1_000_003)).unwrap();
    let mut part = vec![0u8; 70_001];
    f.read_exact(&mut part).unwrap();
    assert_eq!(part, big[1_000_003..1_070_004]);
    drop(f);

    // Names, links, attributes, extended attributes.
    fs::rename(d.join("f000"), m.path("moved")).unwrap();
    fs::hard_link(m.path("moved"), m.path("linked")).unwrap();
    std::os::unix::fs::symlink("moved", m.path("sym")).unwrap();
    assert_eq!(fs::read_link(m.path("sym")).unwrap(), Path::new("moved"));
    assert_eq!(fs::metadata(m.path("linked")).unwrap().len(), 100);
    assert_eq!(std::os::unix::fs::MetadataExt::nlink(&fs::metadata(m.path("moved")).unwrap()), 2);
    xattr(&m.path("moved"), "user.k", Some(b"value")).unwrap();
    assert_eq!(xattr(&m.path("moved"), "user.k", None).unwrap(), b"value");
    let f = fs::OpenOptions::new().write(true).open(m.path("big")).unwrap();
    f.set_len(12_345).unwrap();
    drop(f);
    assert_eq!(fs::metadata(m.path("big")).unwrap().len(), 12_345);

    // Errors come back as errors.
    assert_eq!(errno(fs::read(m.path("no-such-file"))), libc::ENOENT);
    assert_eq!(errno(fs::create_dir(&d)), libc::EEXIST);
    assert_eq!(errno(fs::write(m.path(&"n".repeat(300)), b"x")), libc::ENAMETOOLONG);
    assert_eq!(errno(xattr(&m.path("moved"), "user.none", None)), libc::ENODATA);
    assert_eq!(errno(fs::remove_dir(&d)), libc::ENOTEMPTY);

    for i in 1..200u64 {
        fs::remove_file(d.join(format!("f{i:03}"))).unwrap();
    }
    fs::remove_dir(&d).unwrap();

    let (ring1, dev1, _) = switches(pid);
    let (ring, dev) = (ring1 - ring0, dev1 - dev0);
    eprintln!("io_uring queue threads woke {ring} times, /dev/fuse threads {dev} times");
    assert!(ring >= 1000, "the io_uring queues served only {ring} requests");
    assert!(ring > 3 * dev, "most requests went through /dev/fuse ({dev}) rather than the rings ({ring})");
    m.stop();
    m.fsck_clean();
}

/// SPFS's stacked mount over the rings (issue 58: a maildir delivery is a handful of round
/// trips, each cheaper on its caller's CPU): files made where files sync are absorbed, a
/// file below is served by passthrough (whose backing file is registered through
/// /dev/fuse while its open's answer goes through a ring) and promoted at its next open
/// once its fsyncs ask, and most requests are the queue threads'.
#[test]
fn a_stacked_mount_serves_absorbs_and_passes_through_over_the_rings() {
    if !fuse_available() {
        return;
    }
    let Some(_on) = switch(true) else { return };
    let mut s = Stacked::new("64M", "io_uring=2,promote_after=3,sf_limit=none,sync_interval_ms=60000,passthrough=on");
    let below = stacked::pattern(3 * 4096, 5);
    fs::write(s.low("db"), &below).unwrap();
    s.start();
    let pid = s.daemon.as_ref().unwrap().id();
    let (ring0, dev0, queues) = switches(pid);
    assert_eq!(queues, possible_cpus(), "one io_uring queue thread per possible CPU: {}", s.log());
    assert!(!s.log().contains("lacks"), "{}", s.log());
    let info = s.info();
    assert!(info.contains("front end: requests through FUSE over io_uring, files below passthrough"), "{info}");

    // The directory rule: three synced messages make `mail` hot; the next is made in PM.
    fs::create_dir(s.p("mail")).unwrap();
    for i in 0..4u8 {
        let mut f = fs::File::create_new(s.p(&format!("mail/m{i}"))).unwrap();
        f.write_all(&stacked::pattern(300 + i as usize, i)).unwrap();
        f.sync_data().unwrap();
    }
    let info = s.info();
    assert_eq!(counter(&info, "promoted as made (directory rule)"), 1, "{info}");
    assert!(fs::read(s.low("mail/m3")).unwrap().is_empty(), "the message made in PM reached the lower file");
    assert_eq!(fs::read(s.p("mail/m3")).unwrap(), stacked::pattern(303, 3));

    // A file below by passthrough, synced until it asks for promotion, then reopened.
    let mut model = below.clone();
    let opens = counter(&s.info(), "passthrough opens");
    let f = fs::OpenOptions::new().read(true).write(true).open(s.p("db")).unwrap();
    assert_eq!(counter(&s.info(), "passthrough opens"), opens + 1, "{}", s.info());
    for i in 0..5usize {
        std::os::unix::fs::FileExt::write_all_at(&f, b"synced below", (10 + i * 100) as u64).unwrap();
        model[10 + i * 100..22 + i * 100].copy_from_slice(b"synced below");
        f.sync_data().unwrap();
    }
    assert_eq!(fs::read(s.low("db")).unwrap(), model, "a passthrough handle writes the lower file");
    assert_eq!(counter(&s.info(), "promotions deferred to the next open"), 1, "{}", s.info());
    drop(f);
    let t = std::time::Instant::now();
    while counter(&s.info(), "handles open") > 0 {
        assert!(t.elapsed() < std::time::Duration::from_secs(10), "handles never released: {}", s.info());
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let f = fs::OpenOptions::new().read(true).write(true).open(s.p("db")).unwrap();
    assert_eq!(s.promoted(), 2, "{}", s.info());
    std::os::unix::fs::FileExt::write_all_at(&f, b"absorbed in PM", 5000).unwrap();
    model[5000..5014].copy_from_slice(b"absorbed in PM");
    f.sync_data().unwrap();
    drop(f);
    assert_ne!(fs::read(s.low("db")).unwrap(), model, "the absorbed write reached the lower file");
    assert_eq!(fs::read(s.p("db")).unwrap(), model);

    // Enough small requests that the queues' share shows.
    for i in 0..150u64 {
        let p = s.p(&format!("f{i:03}"));
        fs::write(&p, pattern(i, 100 + i as usize)).unwrap();
        assert_eq!(fs::read(&p).unwrap(), pattern(i, 100 + i as usize), "f{i:03}");
        fs::remove_file(&p).unwrap();
    }
    let (ring1, dev1, _) = switches(pid);
    let (ring, dev) = (ring1 - ring0, dev1 - dev0);
    eprintln!("io_uring queue threads woke {ring} times, /dev/fuse threads {dev} times");
    assert!(ring >= 1000, "the io_uring queues served only {ring} requests");
    assert!(ring > 3 * dev, "most requests went through /dev/fuse ({dev}) rather than the rings ({ring})");
    s.umount(true);
    assert_eq!(fs::read(s.low("db")).unwrap(), model, "written back at the unmount");
    assert_eq!(fs::read(s.low("mail/m3")).unwrap(), stacked::pattern(303, 3), "written back at the unmount");
    s.fsck_clean();
}

/// Issue 58, item 5, over the rings: kill -9 of the stacked mount's daemon at random points
/// under a writer that appends a record and fsyncs it; after each remount (over the rings
/// again) every acknowledged record is there once, in order, and at the end the lower file
/// holds them all and `fsck --lower` is clean.
#[test]
fn a_stacked_mount_over_the_rings_killed_loses_no_fsynced_record() {
    if !fuse_available() {
        return;
    }
    let Some(_on) = switch(true) else { return };
    let mut s = Stacked::new("64M", "io_uring=2,promote_after=5,sf_limit=none");
    s.start();
    kill_under_an_appender(&mut s, 5, 0x5851_f42d_4c95_7f2d);
    s.fsck_clean();
}

#[test]
fn asking_for_io_uring_where_the_kernel_has_it_off_fails_before_mounting() {
    if !fuse_available() {
        return;
    }
    let Some(_off) = switch(false) else { return };
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let image = dir.path().join("fs.img");
    assert!(hashfs().args(["mkfs", image.to_str().unwrap(), "--size", "64M"]).status().unwrap().success());
    let mnt = dir.path().join("mnt");
    fs::create_dir(&mnt).unwrap();
    let lower = dir.path().join("lower");
    fs::create_dir(&lower).unwrap();
    let runs = [
        hashfs().args(["mount", "--foreground", "-o", "io_uring"]).arg(&image).arg(&mnt).output().unwrap(),
        hashfs().args(["mount", "-o", "io_uring=8"]).arg(&image).arg(&mnt).output().unwrap(),
        hashfs().args(["mount", "-o", "io_uring", "--lower"]).arg(&lower).arg(&image).arg(&mnt).output().unwrap(),
        hashfs_bench().args(["fuse-ceiling", "--io-uring", "2"]).arg(&lower).arg(&mnt).output().unwrap(),
    ];
    for o in runs {
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "a mount asking for io_uring succeeded with it off");
        assert!(err.contains("enable_uring"), "the error does not say what to turn on: {err}");
    }
    let info = fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!info.contains(mnt.to_str().unwrap()), "something was mounted");
    // Bad depths are refused by name.
    let o = hashfs().args(["mount", "-o", "io_uring=0"]).arg(&image).arg(&mnt).output().unwrap();
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("io_uring=0"));
    // The image is as mkfs left it.
    let o = hashfs().args(["fsck", image.to_str().unwrap()]).output().unwrap();
    assert_eq!(o.status.code(), Some(0));
}
