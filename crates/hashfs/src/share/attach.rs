//! Finding or making an image's shared region, with any number of processes doing so at
//! once (docs/design.md, "Many processes on one image").
//!
//! A region file is only ever put in place whole: it is written under a name of its own
//! (header and length set), then linked to the region's name, which fails if another
//! process linked one first (that one is used). A region whose header names another boot
//! (no process of it can be alive) or another image (the image file was replaced) is
//! stale: whoever finds it takes an exclusive record lock on it, checks that the name
//! still leads to it, and renames a fresh one over it; a process that raced it finds, under the
//! lock, that the name moved and starts again. A file at the name without the magic, or a
//! region of another layout version in this boot, is refused with a clear error: someone
//! else's file, or a program of another version still using it.
//!
//! Every process that maps a region holds its file's lock shared, from before it maps it
//! (checking, under the lock, that the name still leads to the file it opened) for as long
//! as it is mapped: the first participant of an image removes the regions that nothing
//! maps any more and no participant will remove (`sweep.rs`).

use super::region::{Region, Shared};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// The region header's magic ("HFSSHARE").
const MAGIC: u64 = u64::from_le_bytes(*b"HFSSHARE");
/// The layout of the region this code reads and writes (14: spawn tickets, whose index the
/// names of descriptors handed over carry, which a program of an earlier build would not
/// take for handed descriptors; `fs/shared/fork.rs`).
pub const LAYOUT_VERSION: u32 = 15;
/// Bytes reserved for the header at the start of every region: its users' structures
/// begin here.
pub const HEADER_BYTES: usize = 4096;

/// What a region belongs to: one image (its superblock's UUID), in one boot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    pub image_uuid: [u8; 16],
    pub boot_id: [u8; 16],
}

impl Identity {
    /// The image's identity in the running boot (`/proc/sys/kernel/random/boot_id`).
    pub fn of_image(image_uuid: [u8; 16]) -> io::Result<Identity> {
        Ok(Identity { image_uuid, boot_id: boot_id()? })
    }
}

/// The header at offset 0.
#[repr(C)]
struct Header {
    magic: AtomicU64,
    version: AtomicU32,
    _pad: AtomicU32,
    len: AtomicU64,
    image_uuid: [AtomicU64; 2],
    boot_id: [AtomicU64; 2],
}

// SAFETY: atomics only.
unsafe impl Shared for Header {}

pub(super) fn words(b: &[u8; 16]) -> [u64; 2] {
    [u64::from_le_bytes(b[..8].try_into().expect("8")), u64::from_le_bytes(b[8..].try_into().expect("8"))]
}

/// The running boot's id, as 16 bytes.
fn boot_id() -> io::Result<[u8; 16]> {
    let text = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")?;
    let hex: String = text.trim().chars().filter(|c| *c != '-').collect();
    let bad = || io::Error::new(io::ErrorKind::InvalidData, format!("boot id {text:?} is not a UUID"));
    if hex.len() != 32 {
        return Err(bad());
    }
    let mut out = [0u8; 16];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(out)
}

/// The region file of the image open as `image`: on `/dev/shm`, named by the image file's
/// device and inode numbers.
pub fn region_path(image: &File) -> io::Result<PathBuf> {
    let m = image.metadata()?;
    Ok(PathBuf::from(format!("/dev/shm/hashfs-{}-{}.shm", m.dev(), m.ino())))
}

/// The directory beside an image's region where the shim keeps a kernel FIFO for each FIFO
/// of the image that a process opened (`hashfs-preload`'s `shim/fifo.rs`): `region` with
/// the extension `fifos`. It holds nothing persistent.
pub fn fifo_dir_path(region: &Path) -> PathBuf {
    region.with_extension("fifos")
}

/// Removes region file `region`, and its FIFO directory ([`fifo_dir_path`]) if that is
/// empty: a FIFO's node in it stays while its FIFO has a name, since a process that left
/// the image may still have it open (a shell's `cmd < fifo` execs a program that holds no
/// descriptor of the image), and the next open by another process must reach the same
/// FIFO. A UNIX socket's node goes (the shim's `socket.rs`): no participant is left to
/// listen on it, and a connect to the socket's name then finds nothing bound, as the
/// kernel's finds a socket file whose server has gone. (Before 2026-12-07 they stayed, and
/// the directory with them, in /dev/shm until reboot: a test run left 18.)
pub(crate) fn remove_region(region: &Path) -> io::Result<()> {
    std::fs::remove_file(region)?;
    let dir = fifo_dir_path(region);
    if let Ok(nodes) = std::fs::read_dir(&dir) {
        use std::os::unix::fs::FileTypeExt;
        for n in nodes.flatten() {
            if n.file_type().is_ok_and(|t| t.is_socket()) {
                let _ = std::fs::remove_file(n.path());
            }
        }
    }
    let _ = std::fs::remove_dir(&dir);
    Ok(())
}

/// What the file at a region's name is.
enum Found {
    Current,
    Stale,
}

/// A region header's words, as read from its file.
pub(super) struct HeaderWords {
    pub version: u32,
    pub len: u64,
    pub uuid: [u64; 2],
    pub boot: [u64; 2],
}

/// The header of the region file `f`; None when it has none (too short, or no magic).
pub(super) fn read_header(f: &File) -> io::Result<Option<HeaderWords>> {
    let have = f.metadata()?.len();
    let mut raw = [0u8; std::mem::size_of::<Header>()];
    let n = if have >= raw.len() as u64 { std::os::unix::fs::FileExt::read_at(f, &mut raw, 0)? } else { 0 };
    let word = |i: usize| u64::from_le_bytes(raw[i * 8..i * 8 + 8].try_into().expect("8"));
    if n < raw.len() || word(0) != MAGIC {
        return Ok(None);
    }
    Ok(Some(HeaderWords { version: word(1) as u32, len: word(2), uuid: [word(3), word(4)], boot: [word(5), word(6)] }))
}

/// Reads the header of `f` (a file at the region's name) and says what it is, or why it
/// cannot be used.
fn examine(f: &File, path: &Path, id: &Identity, len: usize) -> io::Result<Found> {
    let refuse = |why: String| Err(io::Error::new(io::ErrorKind::InvalidData, format!("{}: {why}", path.display())));
    let Some(h) = read_header(f)? else {
        return refuse("not a HashFS shared region (no header); remove it if nothing uses it".into());
    };
    if h.boot != words(&id.boot_id) || h.uuid != words(&id.image_uuid) {
        return Ok(Found::Stale); // no process of another boot lives; another image's is gone
    }
    let (version, rlen) = (h.version, h.len);
    if version != LAYOUT_VERSION || rlen != len as u64 || f.metadata()?.len() != len as u64 {
        return refuse(format!(
            "a shared region of layout {version} and {rlen} bytes is in use in this boot (this program uses layout \
             {LAYOUT_VERSION}, {len} bytes): a program of another HashFS version shares the image"
        ));
    }
    Ok(Found::Current)
}

/// Takes `f`'s `flock` shared and says whether `path` still leads to `f`. The lock lasts
/// while `f`, or a mapping of it, is open (the mapping holds the open file description):
/// a sweep of left regions (`sweep.rs`) removes one only under the lock exclusive, so a
/// region found still in place under it stays while any process maps it.
fn hold_in_place(path: &Path, f: &File) -> io::Result<bool> {
    crate::fs::race_point::reached("attach: the region examined");
    // SAFETY: flock on our own descriptor.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_SH) } != 0 {
        return Err(io::Error::last_os_error());
    }
    crate::fs::race_point::reached("attach: the region held");
    same_file(path, f)
}

/// Who a new region file belongs to: its permission bits and, if the maker may give it
/// away (root), its owner and group (the image file's, so that the image's permissions are
/// the region's).
#[derive(Clone, Copy, Debug)]
pub struct Access {
    pub mode: u32,
    pub owner: Option<(u32, u32)>,
}

impl Access {
    /// The image file `image`'s permission bits (read and write), owner and group.
    pub fn of_image(image: &File) -> io::Result<Access> {
        let m = image.metadata()?;
        Ok(Access { mode: m.mode() & 0o666, owner: Some((m.uid(), m.gid())) })
    }
}

/// A fresh region file under a name of its own beside `path`, header written, `len` bytes.
fn make_fresh(path: &Path, id: &Identity, len: usize, access: Access) -> io::Result<PathBuf> {
    // Unique to this call: two threads of one process may read one clock value (in the
    // quick tier two racing attaches did, and one failed with EEXIST).
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let tmp = PathBuf::from(format!("{}.new-{}-{seq}-{nanos}", path.display(), std::process::id()));
    let f = OpenOptions::new().read(true).write(true).create_new(true).mode(access.mode).open(&tmp)?;
    if let Some((uid, gid)) = access.owner {
        // Only root may give a file away; anyone else's region stays its own (the image's
        // owner, or a user it lets write the image).
        let _ = std::os::unix::fs::fchown(&f, Some(uid), Some(gid));
        // The umask may have cleared bits of the image's mode.
        let _ = f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(access.mode));
    }
    let fill = || -> io::Result<()> {
        f.set_len(len as u64)?;
        let r = Region::map(&f, len)?;
        let h = r.at::<Header>(0);
        h.version.store(LAYOUT_VERSION, Ordering::Relaxed);
        h.len.store(len as u64, Ordering::Relaxed);
        for (w, v) in h.image_uuid.iter().zip(words(&id.image_uuid)) {
            w.store(v, Ordering::Relaxed);
        }
        for (w, v) in h.boot_id.iter().zip(words(&id.boot_id)) {
            w.store(v, Ordering::Relaxed);
        }
        h.magic.store(MAGIC, Ordering::Release);
        Ok(())
    };
    if let Err(e) = fill() {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(tmp)
}

/// The same file (device and inode) as `f`?
pub(super) fn same_file(path: &Path, f: &File) -> io::Result<bool> {
    let (a, b) = (std::fs::metadata(path), f.metadata()?);
    Ok(matches!(a, Ok(a) if a.dev() == b.dev() && a.ino() == b.ino()))
}

/// Replaces the stale region `f` at `path` with a fresh one, unless another process did
/// first (under `f`'s exclusive record lock, the name no longer leads to `f`). A record
/// lock (open file description's, over the region's bytes), not `flock`: processes that
/// still map the stale file hold its `flock` shared (`hold_in_place`), and the two kinds do
/// not meet. The lock ends before the participants' bytes (`liveness.rs`), which live
/// processes of a replaced image may still hold.
fn replace_stale(path: &Path, f: &File, id: &Identity, len: usize, access: Access) -> io::Result<()> {
    // SAFETY: a zeroed flock is a valid value; every field used is set below.
    let mut whole: libc::flock = unsafe { std::mem::zeroed() };
    whole.l_type = libc::F_WRLCK as libc::c_short;
    whole.l_whence = libc::SEEK_SET as libc::c_short;
    whole.l_len = super::liveness::SLOT_BYTES;
    // SAFETY: fcntl on our own descriptor with a valid flock.
    if unsafe { libc::fcntl(f.as_raw_fd(), libc::F_OFD_SETLKW, &whole) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // The lock goes with `f`'s description when the caller drops it.
    if !same_file(path, f)? {
        return Ok(()); // replaced meanwhile: the caller looks again
    }
    let tmp = make_fresh(path, id, len, access)?;
    let r = std::fs::rename(&tmp, path);
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

impl Region {
    /// The region at `path` for `id`, mapped read-only, for a process that may only read
    /// the image (`fs/shared/read_only.rs`); None when there is none, or only a stale one
    /// (no participant of this boot made it: one that comes replaces it).
    pub fn attach_read_only(path: &Path, id: &Identity, len: usize) -> io::Result<Option<Region>> {
        let f = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        match examine(&f, path, id, len)? {
            Found::Current if hold_in_place(path, &f)? => Region::map_read_only(&f, len).map(Some),
            // Swept meanwhile: nothing to read beside.
            Found::Current | Found::Stale => Ok(None),
        }
    }

    /// Finds the region at `path` for `id`, or makes it (`len` bytes, the first
    /// [`HEADER_BYTES`] its header, the rest zeros; created with `mode`), whoever else
    /// does so at the same time; a stale one is replaced (module documentation).
    pub fn attach(path: &Path, id: &Identity, len: usize, mode: u32) -> io::Result<Region> {
        Region::attach_as(path, id, len, Access { mode, owner: None })
    }

    /// [`Region::attach`], a new region made with `access`.
    pub fn attach_as(path: &Path, id: &Identity, len: usize, access: Access) -> io::Result<Region> {
        assert!(len > HEADER_BYTES, "a region holds more than its header");
        for _ in 0..64 {
            let f = match OpenOptions::new().read(true).write(true).open(path) {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!(
                            "{}: the image's shared region is not writable by this user (made when the image had \
                             other permissions, or by another user); remove it when no process uses the image",
                            path.display()
                        ),
                    ))
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    let tmp = make_fresh(path, id, len, access)?;
                    let linked = std::fs::hard_link(&tmp, path);
                    let _ = std::fs::remove_file(&tmp);
                    match linked {
                        Ok(()) => continue, // open what is at the name now (ours, or a replacement)
                        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                        Err(e) => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            };
            match examine(&f, path, id, len)? {
                Found::Current if hold_in_place(path, &f)? => return Region::map_kept(f, len),
                Found::Current => {} // swept meanwhile: look again
                Found::Stale => replace_stale(path, &f, id, len, access)?,
            }
        }
        Err(io::Error::other(format!("{}: kept changing while it was opened", path.display())))
    }
}

#[cfg(test)]
mod tests {
    use super::{fifo_dir_path, remove_region};
    use std::os::unix::ffi::OsStrExt;

    /// A region's removal takes the UNIX socket nodes beside it (no participant is left to
    /// listen on them) and keeps a FIFO's (a process that left the image may still have it
    /// open), and their directory with it.
    #[test]
    fn a_regions_removal_takes_its_socket_nodes_and_keeps_its_fifos() {
        let dir = tempfile::tempdir().unwrap();
        let region = dir.path().join("hashfs-1-2.shm");
        let nodes = fifo_dir_path(&region);
        for with_fifo in [true, false] {
            std::fs::write(&region, b"").unwrap();
            std::fs::create_dir_all(&nodes).unwrap();
            let socket = std::os::unix::net::UnixListener::bind(nodes.join("7-1")).unwrap();
            let fifo = nodes.join("8-1");
            if with_fifo {
                let path = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
                // SAFETY: a NUL-terminated path.
                assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
            }
            remove_region(&region).unwrap();
            assert!(!region.exists());
            assert!(std::fs::symlink_metadata(nodes.join("7-1")).is_err(), "a socket's node stayed");
            assert_eq!(fifo.exists(), with_fifo, "a FIFO's node went");
            assert_eq!(nodes.exists(), with_fifo, "the nodes' directory");
            drop(socket);
            let _ = std::fs::remove_file(&fifo);
            let _ = std::fs::remove_dir(&nodes);
        }
    }
}
