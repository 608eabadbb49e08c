//! POSIX conformance through the FUSE mount: for each operation, the success cases and the
//! errno of each failure, as Linux file systems behave, including EACCES and EPERM for
//! non-root users, sticky directories, set-group-ID inheritance, and who may chmod, chown
//! and set times.

#[path = "fuse_common.rs"]
mod common;
use common::*;
use std::ffi::CString;
use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

fn c(p: &Path) -> CString {
    CString::new(p.as_os_str().as_encoded_bytes()).unwrap()
}

fn rc(r: i32) -> std::io::Result<()> {
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[test]
fn errno_of_each_failure() {
    if !fuse_available() {
        return;
    }
    let m = Mounted::new("64M");
    let p = |s: &str| m.path(s);
    fs::create_dir(p("d")).unwrap();
    fs::write(p("f"), b"data").unwrap();
    // ENOENT
    assert_eq!(errno(fs::metadata(p("nope"))), libc::ENOENT);
    assert_eq!(errno(fs::read(p("d/nope"))), libc::ENOENT);
    assert_eq!(errno(fs::remove_file(p("nope"))), libc::ENOENT);
    assert_eq!(errno(fs::rename(p("nope"), p("x"))), libc::ENOENT);
    assert_eq!(errno(fs::write(p("nodir/x"), b"")), libc::ENOENT);
    // EEXIST
    assert_eq!(errno(fs::create_dir(p("d"))), libc::EEXIST);
    assert_eq!(errno(fs::OpenOptions::new().write(true).create_new(true).open(p("f"))), libc::EEXIST);
    assert_eq!(errno(std::os::unix::fs::symlink("x", p("f"))), libc::EEXIST);
    assert_eq!(errno(fs::hard_link(p("f"), p("d"))), libc::EEXIST);
    // ENOTDIR
    assert_eq!(errno(fs::metadata(p("f/x"))), libc::ENOTDIR);
    assert_eq!(errno(fs::create_dir(p("f/x"))), libc::ENOTDIR);
    assert_eq!(errno(fs::remove_dir(p("f"))), libc::ENOTDIR);
    assert_eq!(errno(fs::rename(p("d"), p("f"))), libc::ENOTDIR);
    // EISDIR
    assert_eq!(errno(fs::OpenOptions::new().write(true).open(p("d"))), libc::EISDIR);
    assert_eq!(errno(fs::remove_file(p("d"))), libc::EISDIR);
    assert_eq!(errno(fs::rename(p("f"), p("d"))), libc::EISDIR);
    // ENOTEMPTY
    fs::write(p("d/inner"), b"").unwrap();
    assert_eq!(errno(fs::remove_dir(p("d"))), libc::ENOTEMPTY);
    fs::create_dir(p("e")).unwrap();
    fs::create_dir(p("e/sub")).unwrap();
    assert_eq!(errno(fs::rename(p("e"), p("d"))), libc::ENOTEMPTY);
    // ENAMETOOLONG
    let long = "n".repeat(256);
    assert_eq!(errno(fs::write(p(&long), b"")), libc::ENAMETOOLONG);
    assert_eq!(errno(fs::create_dir(p(&long))), libc::ENAMETOOLONG);
    fs::write(p(&"n".repeat(255)), b"ok").unwrap();
    // ELOOP
    std::os::unix::fs::symlink("l2", p("l1")).unwrap();
    std::os::unix::fs::symlink("l1", p("l2")).unwrap();
    assert_eq!(errno(fs::read(p("l1"))), libc::ELOOP);
    // EINVAL: a directory into itself.
    assert_eq!(errno(fs::rename(p("e"), p("e/sub/x"))), libc::EINVAL);
    // EBADF: writing a read-only descriptor, reading a write-only one.
    let mut r = fs::File::open(p("f")).unwrap();
    assert_eq!(errno(r.write(b"x")), libc::EBADF);
    let mut w = fs::OpenOptions::new().write(true).open(p("f")).unwrap();
    let mut buf = [0u8; 4];
    assert_eq!(errno(w.read(&mut buf)), libc::EBADF);
    // EPERM: hard link to a directory.
    assert_eq!(errno(fs::hard_link(p("d"), p("dl"))), libc::EPERM);
    drop((r, w));
    // renameat2 flags.
    fs::write(p("x"), b"X").unwrap();
    fs::write(p("y"), b"Y").unwrap();
    let rename2 = |a: &str, b: &str, flags: u32| {
        // SAFETY: valid C strings; renameat2 has no other preconditions.
        rc(unsafe { libc::renameat2(libc::AT_FDCWD, c(&p(a)).as_ptr(), libc::AT_FDCWD, c(&p(b)).as_ptr(), flags) })
    };
    assert_eq!(errno(rename2("x", "y", libc::RENAME_NOREPLACE)), libc::EEXIST);
    rename2("x", "y", libc::RENAME_EXCHANGE).unwrap();
    assert_eq!(fs::read(p("x")).unwrap(), b"Y");
    assert_eq!(fs::read(p("y")).unwrap(), b"X");
    assert_eq!(errno(rename2("x", "zz", libc::RENAME_EXCHANGE)), libc::ENOENT);
    drop(m);
}

#[test]
fn success_cases() {
    if !fuse_available() {
        return;
    }
    let mut m = Mounted::new("64M");
    let p = |s: &str| m.path(s);
    // Data, holes, append, truncate.
    let mut f = fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(p("data")).unwrap();
    f.write_all(b"hello").unwrap();
    f.seek(SeekFrom::Start(100_000)).unwrap();
    f.write_all(b"world").unwrap();
    f.sync_all().unwrap();
    let all = fs::read(p("data")).unwrap();
    assert_eq!(all.len(), 100_005);
    assert!(all[5..100_000].iter().all(|&b| b == 0));
    f.set_len(3).unwrap();
    assert_eq!(fs::read(p("data")).unwrap(), b"hel");
    let mut a = fs::OpenOptions::new().append(true).open(p("data")).unwrap();
    a.write_all(b"-end").unwrap();
    assert_eq!(fs::read(p("data")).unwrap(), b"hel-end");
    // fallocate.
    let fa = fs::OpenOptions::new().write(true).create(true).truncate(false).open(p("alloc")).unwrap();
    // SAFETY: a valid descriptor; posix_fallocate returns an errno value.
    assert_eq!(unsafe { libc::posix_fallocate(std::os::fd::AsRawFd::as_raw_fd(&fa), 0, 1 << 20) }, 0);
    let md = fs::metadata(p("alloc")).unwrap();
    assert_eq!(md.len(), 1 << 20);
    assert_eq!(md.blocks(), (1 << 20) / 512);
    // Punch a hole (fallocate -p keeps the size; the range reads as zeros).
    fs::write(p("holey"), vec![7u8; 40_000]).unwrap();
    let st = std::process::Command::new("fallocate")
        .args(["-p", "-o", "4096", "-l", "16384"])
        .arg(p("holey"))
        .status()
        .unwrap();
    assert!(st.success());
    let h = fs::read(p("holey")).unwrap();
    assert_eq!(h.len(), 40_000);
    assert!(h[4096..20480].iter().all(|&b| b == 0) && h[..4096].iter().chain(&h[20480..]).all(|&b| b == 7));
    assert_eq!(fs::metadata(p("holey")).unwrap().blocks(), (40_960 - 16_384) / 512);
    // Metadata.
    fs::set_permissions(p("data"), fs::Permissions::from_mode(0o640)).unwrap();
    assert_eq!(fs::metadata(p("data")).unwrap().mode() & 0o7777, 0o640);
    std::os::unix::fs::chown(p("data"), Some(1234), Some(5678)).unwrap();
    let md = fs::metadata(p("data")).unwrap();
    assert_eq!((md.uid(), md.gid()), (1234, 5678));
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
    fs::File::options().write(true).open(p("data")).unwrap().set_modified(t).unwrap();
    assert_eq!(fs::metadata(p("data")).unwrap().modified().unwrap(), t);
    // Links, symlinks, readdir.
    fs::hard_link(p("data"), p("data2")).unwrap();
    assert_eq!(fs::metadata(p("data")).unwrap().nlink(), 2);
    std::os::unix::fs::symlink("data", p("sym")).unwrap();
    assert_eq!(fs::read_link(p("sym")).unwrap(), Path::new("data"));
    assert_eq!(fs::read(p("sym")).unwrap(), b"hel-end");
    fs::create_dir_all(p("a/b/c")).unwrap();
    assert_eq!(fs::metadata(p("a")).unwrap().nlink(), 3);
    let mut names: Vec<String> =
        fs::read_dir(m.path("")).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["a", "alloc", "data", "data2", "holey", "sym"]);
    for i in 0..3000 {
        fs::write(p(&format!("a/b/many-{i:04}")), b"").unwrap();
    }
    assert_eq!(fs::read_dir(p("a/b")).unwrap().count(), 3001);
    // Rename across directories, replacing.
    fs::rename(p("data2"), p("a/b/c/moved")).unwrap();
    fs::rename(p("a/b/c/moved"), p("sym")).unwrap();
    assert!(!fs::symlink_metadata(p("sym")).unwrap().file_type().is_symlink());
    // statfs.
    let out =
        std::process::Command::new("stat").args(["-f", "-c", "%S %b %c", m.mnt.to_str().unwrap()]).output().unwrap();
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.starts_with("4096 "), "{s}");
    // Unlinked while open: readable until closed.
    let mut h = fs::File::open(p("alloc")).unwrap();
    fs::remove_file(p("alloc")).unwrap();
    let mut v = Vec::new();
    h.read_to_end(&mut v).unwrap();
    assert_eq!(v.len(), 1 << 20);
    drop(h);
    drop(f);
    drop(a);
    drop(fa);
    m.stop();
    m.fsck_clean();
}

#[test]
fn permissions_for_other_users() {
    if !fuse_available() {
        return;
    }
    let m = Mounted::new("64M");
    let p = |s: &str| m.path(s);
    fs::write(p("secret"), b"root only").unwrap();
    fs::set_permissions(p("secret"), fs::Permissions::from_mode(0o600)).unwrap();
    fs::create_dir(p("rootdir")).unwrap();
    fs::set_permissions(p("rootdir"), fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(p("rootdir/file"), b"").unwrap();

    as_user(1000, 1000, &[1000], || {
        assert_eq!(errno(fs::read(p("secret"))), libc::EACCES);
        assert_eq!(errno(fs::write(p("rootdir/x"), b"")), libc::EACCES);
        assert_eq!(errno(fs::remove_file(p("rootdir/file"))), libc::EACCES);
        assert_eq!(errno(fs::set_permissions(p("secret"), fs::Permissions::from_mode(0o777))), libc::EPERM);
        assert_eq!(errno(std::os::unix::fs::chown(p("secret"), Some(1000), None)), libc::EPERM);
        // Explicit times need ownership; "now" needs write access.
        // SAFETY: valid C string; a null times pointer means "now".
        let now = rc(unsafe { libc::utimensat(libc::AT_FDCWD, c(&p("secret")).as_ptr(), std::ptr::null(), 0) });
        assert_eq!(errno(now), libc::EACCES);
        // Own files: new files belong to the caller.
        fs::write(p("mine"), b"1000's").unwrap();
        let md = fs::metadata(p("mine")).unwrap();
        assert_eq!((md.uid(), md.gid()), (1000, 1000));
        fs::set_permissions(p("mine"), fs::Permissions::from_mode(0o604)).unwrap();
        // chown to another user: EPERM; to own group: fine.
        assert_eq!(errno(std::os::unix::fs::chown(p("mine"), Some(0), None)), libc::EPERM);
        std::os::unix::fs::chown(p("mine"), None, Some(1000)).unwrap();
    });

    // Sticky directory: only the owner of an entry (or of the directory) may remove it.
    fs::create_dir(p("tmp")).unwrap();
    fs::set_permissions(p("tmp"), fs::Permissions::from_mode(0o1777)).unwrap();
    as_user(1000, 1000, &[1000], || fs::write(p("tmp/a"), b"a").unwrap());
    as_user(1001, 1001, &[1001], || {
        assert_eq!(errno(fs::remove_file(p("tmp/a"))), libc::EPERM);
        assert_eq!(errno(fs::rename(p("tmp/a"), p("tmp/b"))), libc::EPERM);
        fs::write(p("tmp/own"), b"").unwrap();
        fs::remove_file(p("tmp/own")).unwrap();
    });
    as_user(1000, 1000, &[1000], || fs::remove_file(p("tmp/a")).unwrap());

    // Set-group-ID directory: new entries take its group; new directories inherit the bit.
    fs::create_dir(p("shared")).unwrap();
    std::os::unix::fs::chown(p("shared"), None, Some(500)).unwrap();
    fs::set_permissions(p("shared"), fs::Permissions::from_mode(0o2777)).unwrap();
    as_user(1000, 1000, &[1000], || {
        fs::write(p("shared/f"), b"").unwrap();
        fs::create_dir(p("shared/sub")).unwrap();
    });
    let f = fs::metadata(p("shared/f")).unwrap();
    let d = fs::metadata(p("shared/sub")).unwrap();
    assert_eq!((f.uid(), f.gid()), (1000, 500));
    assert_eq!(d.gid(), 500);
    assert_ne!(d.mode() & 0o2000, 0, "subdirectory inherits set-group-ID");
    // A group member may chown to that group; chmod by a non-member clears set-group-ID.
    fs::write(p("g"), b"").unwrap();
    std::os::unix::fs::chown(p("g"), Some(1000), Some(1000)).unwrap();
    as_user(1000, 1000, &[1000, 600], || {
        std::os::unix::fs::chown(p("g"), None, Some(600)).unwrap();
        assert_eq!(errno(std::os::unix::fs::chown(p("g"), None, Some(700))), libc::EPERM);
    });
    as_user(1000, 1000, &[1000], || {
        fs::set_permissions(p("g"), fs::Permissions::from_mode(0o2755)).unwrap();
        assert_eq!(fs::metadata(p("g")).unwrap().mode() & 0o2000, 0, "not in group 600: S_ISGID dropped");
    });
    // Group permission through a supplementary group.
    fs::write(p("grp"), b"for group 600").unwrap();
    std::os::unix::fs::chown(p("grp"), Some(0), Some(600)).unwrap();
    fs::set_permissions(p("grp"), fs::Permissions::from_mode(0o640)).unwrap();
    as_user(1002, 1002, &[1002, 600], || assert_eq!(fs::read(p("grp")).unwrap(), b"for group 600"));
    as_user(1003, 1003, &[1003], || assert_eq!(errno(fs::read(p("grp"))), libc::EACCES));
    // O_CREAT with a mode: the umask applies.
    let f = fs::OpenOptions::new().write(true).create(true).truncate(false).mode(0o666).open(p("masked")).unwrap();
    drop(f);
    // SAFETY: umask only reads/sets the process mask; we restore nothing as it is only read.
    let mask = unsafe {
        let old = libc::umask(0o022);
        libc::umask(old);
        old
    };
    assert_eq!(fs::metadata(p("masked")).unwrap().mode() & 0o777, 0o666 & !mask);
    drop(m);
}

/// FIFOs, devices and sockets through the mount: made by mkfifo, mknod and bind, with
/// their types and device numbers in stat, and their behaviour from the kernel (a pipe
/// carries bytes, O_NONBLOCK|O_WRONLY with no reader is ENXIO, /dev/null's number opens
/// /dev/null's driver, a bound socket accepts a connection); they survive a remount.
#[test]
fn special_files_through_the_mount() {
    use std::os::unix::fs::FileTypeExt;
    use std::os::unix::net::{UnixListener, UnixStream};
    if !fuse_available() {
        return;
    }
    let mut m = Mounted::new("64M");
    let fifo = m.path("fifo");
    // SAFETY: valid NUL-terminated paths for mkfifo and mknod.
    unsafe {
        rc(libc::mkfifo(c(&fifo).as_ptr(), 0o640)).unwrap();
        rc(libc::mknod(c(&m.path("null")).as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3))).unwrap();
        rc(libc::mknod(c(&m.path("blk")).as_ptr(), libc::S_IFBLK | 0o600, libc::makedev(7, 200))).unwrap();
        assert_eq!(errno(rc(libc::mkfifo(c(&fifo).as_ptr(), 0o640))), libc::EEXIST);
    }
    let md = fs::symlink_metadata(&fifo).unwrap();
    assert!(md.file_type().is_fifo());
    assert_eq!(md.mode() & 0o7777, 0o640 & !0o022);
    // No reader yet: a non-blocking writer gets ENXIO, as on any Linux file system.
    assert_eq!(errno(fs::OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(&fifo)), libc::ENXIO);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || fs::read(fifo).unwrap())
    };
    fs::OpenOptions::new().write(true).open(&fifo).unwrap().write_all(b"through the pipe").unwrap();
    assert_eq!(reader.join().unwrap(), b"through the pipe");
    let null = fs::metadata(m.path("null")).unwrap();
    assert!(null.file_type().is_char_device());
    assert_eq!(null.rdev(), libc::makedev(1, 3));
    fs::write(m.path("null"), b"discarded").unwrap();
    assert_eq!(fs::read(m.path("null")).unwrap(), b"");
    let blk = fs::metadata(m.path("blk")).unwrap();
    assert!(blk.file_type().is_block_device());
    assert_eq!(blk.rdev(), libc::makedev(7, 200));
    let sock = m.path("sock");
    let listener = UnixListener::bind(&sock).unwrap();
    assert!(fs::symlink_metadata(&sock).unwrap().file_type().is_socket());
    let mut client = UnixStream::connect(&sock).unwrap();
    client.write_all(b"hello").unwrap();
    let (mut server, _) = listener.accept().unwrap();
    let mut got = [0u8; 5];
    server.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"hello");
    drop((client, server, listener));
    let names: Vec<_> = fs::read_dir(&m.mnt).unwrap().map(|e| e.unwrap()).collect();
    for e in &names {
        let t = e.file_type().unwrap();
        assert!(t.is_fifo() || t.is_char_device() || t.is_block_device() || t.is_socket(), "{:?}", e.path());
    }
    assert_eq!(names.len(), 4);
    drop(names); // a DirEntry keeps its directory open
    m.stop();
    m.fsck_clean();
    let o = hashfs().args(["ls", "-l", m.image.to_str().unwrap(), "/"]).output().unwrap();
    let ls = String::from_utf8_lossy(&o.stdout);
    assert!(ls.lines().any(|l| l.starts_with('p') && l.ends_with("fifo")), "{ls}");
    assert!(ls.lines().any(|l| l.starts_with('c') && l.contains("1, 3") && l.ends_with("null")), "{ls}");
    assert!(ls.lines().any(|l| l.starts_with('b') && l.contains("7, 200")), "{ls}");
    assert!(ls.lines().any(|l| l.starts_with('s') && l.ends_with("sock")), "{ls}");
    m.start();
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    assert_eq!(fs::metadata(m.path("blk")).unwrap().rdev(), libc::makedev(7, 200));
    for n in ["fifo", "null", "blk", "sock"] {
        fs::remove_file(m.path(n)).unwrap();
    }
    m.stop();
    m.fsck_clean();
}

/// fsck on an image whose daemon was killed with an unlinked file still open: `-n` lists
/// the leftover as "needs recovery" and exits 0 without writing; the default recovers,
/// then checks, and finds nothing; a real error still exits 4.
#[test]
fn fsck_after_a_crash_says_clean_after_recovery() {
    if !fuse_available() {
        return;
    }
    let mut m = Mounted::new("64M");
    fs::write(m.path("keep"), b"kept").unwrap();
    let mut f = fs::OpenOptions::new().create(true).truncate(true).write(true).open(m.path("tmp")).unwrap();
    f.write_all(&vec![7u8; 100_000]).unwrap();
    fs::remove_file(m.path("tmp")).unwrap();
    m.kill_daemon();
    drop(f);
    let img = m.image.to_str().unwrap();
    let before = fs::read(&m.image).unwrap();
    let o = hashfs().args(["fsck", "-n", img]).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("needs recovery: inode") && out.contains("0 problems found"), "{out}");
    assert!(fs::read(&m.image).unwrap() == before, "fsck -n wrote to the image");
    let o = hashfs().args(["fsck", img]).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(
        out.contains("recovered (the image was not cleanly unmounted)") && out.contains("1 unlinked inodes freed"),
        "{out}"
    );
    assert!(!out.contains("needs recovery"), "{out}");
    let o = hashfs().args(["fsck", img]).output().unwrap();
    assert!(!String::from_utf8_lossy(&o.stdout).contains("recovered"));
    assert_eq!(o.status.code(), Some(0));
    // A real error is still one: a flipped bit in the first inode past the root.
    let mut bytes = fs::read(&m.image).unwrap();
    let o = hashfs().args(["info", img]).output().unwrap();
    let info = String::from_utf8_lossy(&o.stdout);
    let off: usize = info
        .lines()
        .find_map(|l| l.strip_prefix("inode table").and_then(|r| r.split("offset ").nth(1)))
        .expect("inode table offset in info")
        .trim()
        .parse()
        .unwrap();
    bytes[off + 128 + 8] ^= 1; // inode 2's gid
    fs::write(&m.image, &bytes).unwrap();
    let o = hashfs().args(["fsck", "-n", img]).output().unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", String::from_utf8_lossy(&o.stdout));
}

fn setx(p: &Path, name: &str, value: &[u8], flags: i32) -> std::io::Result<()> {
    let n = CString::new(name).unwrap();
    // SAFETY: valid path, name and value buffer.
    rc(unsafe { libc::setxattr(c(p).as_ptr(), n.as_ptr(), value.as_ptr() as *const _, value.len(), flags) })
}

fn getx(p: &Path, name: &str) -> std::io::Result<Vec<u8>> {
    let n = CString::new(name).unwrap();
    let mut buf = vec![0u8; 70_000];
    // SAFETY: valid path and name; buf holds its length.
    let r = unsafe { libc::getxattr(c(p).as_ptr(), n.as_ptr(), buf.as_mut_ptr() as *mut _, buf.len()) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    buf.truncate(r as usize);
    Ok(buf)
}

fn listx(p: &Path) -> Vec<String> {
    let mut buf = vec![0u8; 70_000];
    // SAFETY: valid path; buf holds its length.
    let r = unsafe { libc::listxattr(c(p).as_ptr(), buf.as_mut_ptr() as *mut _, buf.len()) };
    assert!(r >= 0, "{}", std::io::Error::last_os_error());
    buf[..r as usize].split(|&b| b == 0).filter(|s| !s.is_empty()).map(|s| String::from_utf8_lossy(s).into()).collect()
}

fn sh(cmd: &str, args: &[&str]) -> String {
    let o = std::process::Command::new(cmd).args(args).output().unwrap();
    assert!(o.status.success(), "{cmd} {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Extended attributes and POSIX ACLs through the mount: the calls' errnos (ENODATA,
/// EEXIST, ERANGE, E2BIG, EOPNOTSUPP), other users' EACCES and EPERM, setfacl/getfacl,
/// ACL enforcement by the kernel, default-ACL inheritance, chmod keeping the ACL in step,
/// and everything kept across a remount.
#[test]
fn xattrs_and_acls_through_the_mount() {
    if !fuse_available() {
        return;
    }
    if std::process::Command::new("setfacl").arg("--version").output().is_err() {
        skip("setfacl is not installed (Debian package acl)");
        return;
    }
    let mut m = Mounted::new("64M");
    let mnt = m.mnt.clone();
    let p = move |s: &str| mnt.join(s);
    fs::write(p("f"), b"data").unwrap();
    setx(&p("f"), "user.color", b"blue", 0).unwrap();
    assert_eq!(getx(&p("f"), "user.color").unwrap(), b"blue");
    assert_eq!(errno(setx(&p("f"), "user.color", b"red", libc::XATTR_CREATE)), libc::EEXIST);
    assert_eq!(errno(setx(&p("f"), "user.other", b"x", libc::XATTR_REPLACE)), libc::ENODATA);
    assert_eq!(errno(getx(&p("f"), "user.none")), libc::ENODATA);
    assert_eq!(errno(setx(&p("f"), "unknown.ns", b"x", 0)), libc::EOPNOTSUPP);
    assert_eq!(errno(setx(&p("f"), "user.big", &vec![1u8; 65_537], 0)), libc::E2BIG);
    setx(&p("f"), "user.big", &vec![7u8; 65_536], 0).unwrap();
    setx(&p("f"), "trusted.t", b"root's", 0).unwrap();
    let n = CString::new("user.color").unwrap();
    let mut small = [0u8; 2];
    // SAFETY: valid path and name; small holds 2 bytes.
    let r = unsafe { libc::getxattr(c(&p("f")).as_ptr(), n.as_ptr(), small.as_mut_ptr() as *mut _, 2) };
    assert_eq!((r, std::io::Error::last_os_error().raw_os_error()), (-1, Some(libc::ERANGE)));
    // SAFETY: size 0 asks for the size.
    let r = unsafe { libc::getxattr(c(&p("f")).as_ptr(), n.as_ptr(), std::ptr::null_mut(), 0) };
    assert_eq!(r, 4);
    fs::set_permissions(p("f"), fs::Permissions::from_mode(0o644)).unwrap();
    as_user(1000, 1000, &[1000], || {
        assert_eq!(getx(&p("f"), "user.color").unwrap(), b"blue", "read permission is enough to read");
        assert_eq!(errno(setx(&p("f"), "user.color", b"mine", 0)), libc::EACCES, "no write permission");
        assert_eq!(errno(setx(&p("f"), "trusted.x", b"", 0)), libc::EPERM, "trusted needs CAP_SYS_ADMIN");
        assert!(!listx(&p("f")).iter().any(|n| n.starts_with("trusted.")), "trusted names hidden from users");
    });
    let mut names = listx(&p("f"));
    names.sort();
    assert_eq!(names, ["trusted.t", "user.big", "user.color"]);

    // ACLs: a named user gets read access to a root-only file; another user does not.
    fs::write(p("acl"), b"shared with 1000").unwrap();
    fs::set_permissions(p("acl"), fs::Permissions::from_mode(0o600)).unwrap();
    let acl_path = p("acl");
    let acl = acl_path.to_str().unwrap();
    sh("setfacl", &["-m", "u:1000:r", acl]);
    let got = sh("getfacl", &["-cn", acl]);
    assert!(got.contains("user:1000:r--") && got.contains("mask::r--"), "{got}");
    assert_eq!(fs::metadata(p("acl")).unwrap().mode() & 0o777, 0o640, "the group bits show the mask");
    as_user(1000, 1000, &[1000], || assert_eq!(fs::read(p("acl")).unwrap(), b"shared with 1000"));
    as_user(1001, 1001, &[1001], || assert_eq!(errno(fs::read(p("acl"))), libc::EACCES));
    // chmod rewrites the mask: named entries lose what the group bits no longer allow.
    fs::set_permissions(p("acl"), fs::Permissions::from_mode(0o600)).unwrap();
    assert!(sh("getfacl", &["-cn", acl]).contains("mask::---"));
    as_user(1000, 1000, &[1000], || assert_eq!(errno(fs::read(p("acl"))), libc::EACCES));
    // Default ACLs are inherited by new files and directories (instead of the umask).
    fs::create_dir(p("d")).unwrap();
    sh("setfacl", &["-d", "-m", "u:1000:rwx", p("d").to_str().unwrap()]);
    fs::write(p("d/new"), b"").unwrap();
    fs::create_dir(p("d/sub")).unwrap();
    let new = sh("getfacl", &["-cn", p("d/new").to_str().unwrap()]);
    assert!(new.contains("user:1000:rwx") && new.contains("mask::rw-"), "{new}");
    let sub = sh("getfacl", &["-cn", p("d/sub").to_str().unwrap()]);
    assert!(sub.contains("default:user:1000:rwx") && sub.contains("user:1000:rwx"), "{sub}");
    as_user(1000, 1000, &[1000], || fs::write(p("d/sub/by-1000"), b"allowed by the ACL").unwrap());
    // Non-owners cannot change an ACL.
    as_user(1001, 1001, &[1001], || {
        // A valid ACL (owner rw, group r, other r) in the kernel's xattr format.
        let mut acl = 2u32.to_le_bytes().to_vec();
        for (tag, perm) in [(1u16, 6u16), (4, 4), (0x20, 4)] {
            acl.extend_from_slice(&tag.to_le_bytes());
            acl.extend_from_slice(&perm.to_le_bytes());
            acl.extend_from_slice(&u32::MAX.to_le_bytes());
        }
        assert_eq!(errno(setx(&p("acl"), "system.posix_acl_access", &acl, 0)), libc::EPERM);
    });
    m.stop();
    m.fsck_clean();
    m.start();
    assert_eq!(getx(&p("f"), "user.big").unwrap(), vec![7u8; 65_536]);
    assert!(sh("getfacl", &["-cn", acl]).contains("user:1000:r--"));
    fs::remove_file(p("f")).unwrap();
    m.stop();
    m.fsck_clean();
}

/// fallocate through the mount: ZERO_RANGE (with and without KEEP_SIZE) zeroes the range
/// and keeps or grows the size; COLLAPSE_RANGE and INSERT_RANGE are EOPNOTSUPP.
#[test]
fn fallocate_modes_through_the_mount() {
    use std::os::fd::AsRawFd;
    if !fuse_available() {
        return;
    }
    let m = Mounted::new("64M");
    let f = fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(m.path("z")).unwrap();
    (&f).write_all(&[7u8; 20_000]).unwrap();
    let fd = f.as_raw_fd();
    // SAFETY: fallocate on an open descriptor.
    let fa = |mode: i32, off: i64, len: i64| rc(unsafe { libc::fallocate(fd, mode, off, len) });
    fa(libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE, 1000, 30_000).unwrap();
    assert_eq!(f.metadata().unwrap().len(), 20_000);
    fa(libc::FALLOC_FL_ZERO_RANGE, 15_000, 10_000).unwrap();
    assert_eq!(f.metadata().unwrap().len(), 25_000);
    let mut back = Vec::new();
    (&f).seek(SeekFrom::Start(0)).unwrap();
    (&f).read_to_end(&mut back).unwrap();
    assert_eq!(&back[..1000], &[7u8; 1000][..]);
    assert!(back[1000..].iter().all(|&b| b == 0));
    assert_eq!(errno(fa(libc::FALLOC_FL_COLLAPSE_RANGE, 0, 4096)), libc::EOPNOTSUPP);
    assert_eq!(errno(fa(libc::FALLOC_FL_INSERT_RANGE, 0, 4096)), libc::EOPNOTSUPP);
}

/// Set-user-ID and set-group-ID (with group execute) go when another user writes or
/// truncates the file (the daemon does it: FUSE_HANDLE_KILLPRIV_V2), and stay when root
/// writes; a set-group-ID file without group execute keeps the bit.
#[test]
fn writes_by_others_clear_set_id_bits() {
    if !fuse_available() {
        return;
    }
    let m = Mounted::new("64M");
    let p = |s: &str| m.path(s);
    for (name, mode) in [("su", 0o4777), ("sg", 0o2777), ("sg-noexec", 0o2767)] {
        fs::write(p(name), b"x").unwrap();
        fs::set_permissions(p(name), fs::Permissions::from_mode(mode)).unwrap();
    }
    // Root's own write keeps the bits.
    fs::OpenOptions::new().append(true).open(p("su")).unwrap().write_all(b"root").unwrap();
    assert_eq!(fs::metadata(p("su")).unwrap().mode() & 0o7777, 0o4777);
    as_user(1000, 1000, &[1000], || {
        fs::OpenOptions::new().append(true).open(p("su")).unwrap().write_all(b"user").unwrap();
        fs::OpenOptions::new().write(true).open(p("sg")).unwrap().set_len(0).unwrap();
        fs::OpenOptions::new().append(true).open(p("sg-noexec")).unwrap().write_all(b"user").unwrap();
    });
    assert_eq!(fs::metadata(p("su")).unwrap().mode() & 0o7777, 0o777, "write by another user");
    assert_eq!(fs::metadata(p("sg")).unwrap().mode() & 0o7777, 0o777, "truncation by another user");
    assert_eq!(fs::metadata(p("sg-noexec")).unwrap().mode() & 0o7777, 0o2767, "no group execute: kept");
    assert_eq!(fs::read(p("su")).unwrap(), b"xrootuser");
    // O_TRUNC by another user.
    fs::set_permissions(p("su"), fs::Permissions::from_mode(0o4777)).unwrap();
    as_user(1000, 1000, &[1000], || drop(fs::OpenOptions::new().write(true).truncate(true).open(p("su")).unwrap()));
    assert_eq!(fs::metadata(p("su")).unwrap().mode() & 0o7777, 0o777, "O_TRUNC by another user");
    drop(m);
}

/// An owner or group change clears set-user-ID, and set-group-ID when the group may
/// execute, on every file type but directories, for root and for an owner changing its
/// file's group (Linux's chown; with FUSE_HANDLE_KILLPRIV_V2 the daemon must do it, and it
/// did only on truncation: a set-user-ID program given to another owner kept its bit).
#[test]
fn chown_clears_set_id_bits_of_non_directories() {
    if !fuse_available() {
        return;
    }
    let m = Mounted::new("64M");
    let p = |s: &str| m.path(s);
    // SAFETY: a NUL-terminated path.
    let chmod = |path: &Path, mode: u32| rc(unsafe { libc::chmod(c(path).as_ptr(), mode) }).unwrap();
    let chown = |path: &Path, uid: u32, gid: u32| {
        // SAFETY: a NUL-terminated path; lchown never follows a symlink.
        rc(unsafe { libc::lchown(c(path).as_ptr(), uid, gid) })
    };
    let mode = |name: &str| fs::symlink_metadata(p(name)).unwrap().mode() & 0o7777;
    fs::write(p("file"), b"#!/bin/sh\n").unwrap();
    fs::create_dir(p("dir")).unwrap();
    // SAFETY: NUL-terminated paths.
    unsafe {
        rc(libc::mkfifo(c(&p("fifo")).as_ptr(), 0o644)).unwrap();
        rc(libc::mknod(c(&p("chr")).as_ptr(), libc::S_IFCHR | 0o644, libc::makedev(1, 3))).unwrap();
        rc(libc::mknod(c(&p("sock")).as_ptr(), libc::S_IFSOCK | 0o644, 0)).unwrap();
    }
    for name in ["file", "dir", "fifo", "chr", "sock"] {
        // Root: to another owner, to another group, and to the same owner (still a change
        // as Linux counts it).
        for (uid, gid) in [(1000, u32::MAX), (u32::MAX, 1001), (1000, 1001)] {
            for (set, left) in [(0o6755, 0o0755), (0o6745, 0o2745), (0o4700, 0o0700)] {
                chmod(&p(name), set);
                chown(&p(name), uid, gid).unwrap();
                let want = if name == "dir" { set } else { left };
                assert_eq!(mode(name), want, "{name} {set:o} chown({uid}, {gid}) by root");
            }
        }
        // The owner (1000) moving its file to another of its groups.
        chown(&p(name), 1000, 1000).unwrap();
        chmod(&p(name), 0o6775);
        as_user(1000, 1000, &[1000, 1002], || chown(&p(name), u32::MAX, 1002)).unwrap();
        assert_eq!(fs::symlink_metadata(p(name)).unwrap().gid(), 1002);
        assert_eq!(mode(name), if name == "dir" { 0o6775 } else { 0o0775 }, "{name}: chgrp by its owner");
    }
    // A symlink has no set-ID bits to lose; its owner changes.
    std::os::unix::fs::symlink("file", p("link")).unwrap();
    chown(&p("link"), 1000, 1001).unwrap();
    let l = fs::symlink_metadata(p("link")).unwrap();
    assert_eq!((l.uid(), l.gid(), mode("link")), (1000, 1001, 0o777));
    drop(m);
}

/// `-o writeback_cache` and `-o direct_io`: writes of every shape (appends, partial
/// pages, writes through a write-only descriptor, mmap) read back the same through the
/// mount, and after close and a remount, as without them.
#[test]
fn cache_modes_keep_every_write() {
    if !fuse_available() {
        return;
    }
    for opt in ["writeback_cache", "direct_io"] {
        if opt == "writeback_cache" && shared_mounts() {
            continue; // refused beside shim processes: the kernel would cache writes they do not see
        }
        let mut m = Mounted::new("64M");
        m.stop();
        m.start_with(&["-o", opt]);
        let mnt = m.mnt.clone();
        let p = |s: &str| mnt.join(s);
        let mut want = Vec::new();
        fs::write(p("log"), b"").unwrap();
        // A write-only descriptor, then an appending one (the write-back cache writes pages
        // back through either, and reads around partial pages through them).
        let mut w = fs::OpenOptions::new().write(true).open(p("log")).unwrap();
        let mut a = fs::OpenOptions::new().append(true).open(p("log")).unwrap();
        for i in 0..300u32 {
            let rec = format!("record {i} {}\n", "x".repeat((i % 37) as usize));
            a.write_all(rec.as_bytes()).unwrap();
            want.extend_from_slice(rec.as_bytes());
        }
        w.seek(SeekFrom::Start(5000)).unwrap();
        w.write_all(b"PATCHED").unwrap();
        want[5000..5007].copy_from_slice(b"PATCHED");
        drop(w);
        drop(a);
        assert_eq!(fs::read(p("log")).unwrap(), want, "{opt}: appends and a write inside them");
        // Inside a page the kernel has not cached (after a remount), through a write-only
        // descriptor: the write-back cache must read the rest of the page through it.
        m.stop();
        m.start_with(&["-o", opt]);
        let mut w = fs::OpenOptions::new().write(true).open(p("log")).unwrap();
        w.seek(SeekFrom::Start(6000)).unwrap();
        w.write_all(b"AGAIN").unwrap();
        drop(w);
        want[6000..6005].copy_from_slice(b"AGAIN");
        assert_eq!(fs::read(p("log")).unwrap(), want, "{opt}: a partial page through a write-only descriptor");
        let mut big = vec![0u8; 3 << 20];
        big.iter_mut().enumerate().for_each(|(i, b)| *b = (i % 251) as u8);
        fs::write(p("big"), &big).unwrap();
        assert_eq!(fs::read(p("big")).unwrap(), big, "{opt}: 3 MiB");
        // A shared mapping's stores reach the file.
        let f = fs::OpenOptions::new().read(true).write(true).open(p("big")).unwrap();
        // SAFETY: a fresh shared mapping of an open file, unmapped below; nothing else maps it.
        let mapped = unsafe {
            let a = libc::mmap(
                std::ptr::null_mut(),
                8192,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                std::os::fd::AsRawFd::as_raw_fd(&f),
                0,
            );
            if a != libc::MAP_FAILED {
                std::ptr::copy_nonoverlapping(b"MAPPED".as_ptr(), (a as *mut u8).add(100), 6);
                libc::msync(a, 8192, libc::MS_SYNC);
                libc::munmap(a, 8192);
                true
            } else {
                false
            }
        };
        drop(f);
        assert!(mapped, "{opt}: a shared mapping (direct_io: FUSE_DIRECT_IO_ALLOW_MMAP, Linux 6.6)");
        big[100..106].copy_from_slice(b"MAPPED");
        assert_eq!(fs::read(p("big")).unwrap(), big, "{opt}: stores through the mapping");
        m.stop();
        m.fsck_clean();
        m.start();
        assert_eq!(fs::read(m.path("log")).unwrap(), want, "{opt}: after a remount");
        assert_eq!(fs::read(m.path("big")).unwrap(), big, "{opt}: after a remount");
        drop(m);
    }
}

/// On an image in memory (tmpfs here; DAX alike) a write through the mount is answered
/// once it is as durable as an fsync would make it, its times too, and fsync sends the
/// daemon nothing: the kernel was told there is nothing to send (ENOSYS, once). Shown by
/// killing the daemon: an fsync on a descriptor opened before still succeeds (a request
/// would fail, nobody serves the mount) and, after recovery, the file has the data, size
/// and modification time that `stat` showed before the kill.
#[test]
fn fsync_on_an_image_in_memory_sends_nothing_and_loses_nothing() {
    if !fuse_available() {
        return;
    }
    let mut m = Mounted::new_in("64M", Path::new("/dev/shm"));
    let p = m.path("f");
    let mut f = fs::OpenOptions::new().create(true).truncate(true).write(true).open(&p).unwrap();
    f.write_all(b"first").unwrap();
    f.sync_all().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    f.write_all(&[9u8; 10_000]).unwrap();
    let before = fs::metadata(&p).unwrap();
    assert_eq!(before.len(), 10_005);
    m.kill_daemon();
    f.sync_all().expect("fsync asked the daemon, which is gone");
    f.sync_data().expect("fdatasync asked the daemon, which is gone");
    drop(f);
    m.start();
    let after = fs::metadata(&p).unwrap();
    assert_eq!(after.len(), 10_005);
    assert_eq!(
        (after.mtime(), after.mtime_nsec()),
        (before.mtime(), before.mtime_nsec()),
        "the last write's modification time was lost in the crash"
    );
    assert_eq!(&fs::read(&p).unwrap()[..5], b"first");
    m.stop();
    m.fsck_clean();
}

/// lseek's SEEK_DATA and SEEK_HOLE reach the daemon (`FileSystem::seek`): a run, a hole
/// between runs, a hole at the end, at and past the end (a directory's lseek the kernel
/// answers itself). Before 2026-12-06 the daemon answered ENOSYS and the kernel took the
/// whole file for data.
#[test]
fn seek_data_and_seek_hole_find_the_holes() {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileExt;
    if !fuse_available() {
        return;
    }
    const B: i64 = 4096;
    let m = Mounted::new("64M");
    let f = fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(m.path("sparse")).unwrap();
    f.write_all_at(&[1u8; 3 * B as usize], 0).unwrap();
    f.write_all_at(b"x", 7 * B as u64 + 10).unwrap();
    f.set_len(10 * B as u64).unwrap();
    let at = |f: &fs::File, off: i64, whence: i32| {
        // SAFETY: lseek on a descriptor this test holds open; no memory is passed.
        let r = unsafe { libc::lseek(f.as_raw_fd(), off, whence) };
        if r < 0 {
            Err(std::io::Error::last_os_error().raw_os_error().unwrap())
        } else {
            Ok(r)
        }
    };
    let (data, hole) = (libc::SEEK_DATA, libc::SEEK_HOLE);
    assert_eq!(at(&f, 0, hole), Ok(3 * B), "the first hole");
    assert_eq!(at(&f, 100, data), Ok(100), "inside data: the offset itself");
    assert_eq!(at(&f, 3 * B, data), Ok(7 * B), "the next run");
    assert_eq!(at(&f, 7 * B, hole), Ok(8 * B));
    assert_eq!(at(&f, 8 * B, data), Err(libc::ENXIO), "no data after the last run");
    assert_eq!(at(&f, 9 * B, hole), Ok(9 * B), "the hole at the end");
    assert_eq!(at(&f, 10 * B, hole), Err(libc::ENXIO), "at the end");
    assert_eq!(at(&f, -1, data), Err(libc::ENXIO));
}
