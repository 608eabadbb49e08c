//! Files made in PM, whose creation the lower file system may lose (issue 58).
//!
//! A file promoted as it is made (SPFS's standalone rules, `standalone.rs`; the directory
//! rule, `dirs.rs`) has all its bytes in PM from its first write, but the lower file
//! system has not made its creation durable: a power failure can take the lower inode,
//! and with it the only thing the PM copy is found by (its file handle). Before, the first
//! fsync of such a file also fsynced the lower file, one disk flush per file made, which is
//! most of what a mail delivery costs (docs/stacked.md, *The directory rule*). Instead, the
//! PM copy records where the file was made (a *made record*: the directory's file handle,
//! the name, the mode and owner), and a mount that finds the copy's lower inode gone makes
//! the file again there from PM. SPFS keeps such a file's name in PM itself (its
//! `name2inode` table); here names stay below, and PM holds what is needed to remake one.
//!
//! Persistence order, the invariants:
//! - Promotion as made writes the made record before the lower handle, which completes a
//!   promotion (`absorb.rs`): a complete copy of a file made in PM always has its record.
//! - The record is removed (in PM) before the file's last lower name is: a lower inode
//!   gone while its copy has a record was lost by the lower file system, not deleted, and
//!   is made again; without a record, the copy is a deleted file's and is dropped.
//! - The record goes with the copy at write-back (after the lower fsync, which makes the
//!   creation durable) and is kept otherwise: a rename below while the lower file system
//!   may still lose the creation is not recorded, so a remade file has the name it was made
//!   with (the rename was not durable either).
//! - A remake creates the file (`O_EXCL`) with an extended attribute naming the copy,
//!   fsyncs it and its directory, and only then points the copy's handle at it and drops
//!   the record. A remake interrupted before that finds its own file by the attribute and
//!   takes it again. A name another file took meanwhile, or a directory gone too, sends
//!   the file to `.hashfs-remade/` under the lower directory, never over another file.

use crate::absorb::{ioe, PmStore, HANDLE_XATTR};
use crate::lower::LowerHandle;
use hashfs::pm::PmDevice;
use hashfs::{Ino, XattrMode};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

/// The made record's extended attribute on a PM copy.
pub const MADE_XATTR: &[u8] = b"user.hashfs.made";
/// On a remade lower file until its copy points at it: the copy's name in `/promoted`.
const REMADE_XATTR: &str = "user.hashfs.remade";
/// Where a file goes whose name or directory could not be had again.
pub const REMADE_DIR: &str = ".hashfs-remade";

/// Where a file was made, to make it again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MadeRecord {
    pub dir: LowerHandle,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub name: Vec<u8>,
}

impl MadeRecord {
    /// The record of `lower` (open on the new file), made as `name` in the directory
    /// `dir_path` leads to.
    pub fn of(lower: BorrowedFd<'_>, dir_path: &Path, name: &[u8]) -> io::Result<MadeRecord> {
        let dir = rustix::fs::open(
            dir_path,
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )?;
        let st = rustix::fs::fstat(lower)?;
        Ok(MadeRecord {
            dir: LowerHandle::of(dir.as_fd())?,
            mode: st.st_mode & 0o7777,
            uid: st.st_uid,
            gid: st.st_gid,
            name: name.to_vec(),
        })
    }

    /// Length of the directory's handle, the handle, mode, uid, gid (4 bytes each,
    /// little-endian), then the name.
    pub fn encode(&self) -> Vec<u8> {
        let h = self.dir.encode();
        let mut v = (h.len() as u32).to_le_bytes().to_vec();
        v.extend_from_slice(&h);
        for x in [self.mode, self.uid, self.gid] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v.extend_from_slice(&self.name);
        v
    }

    pub fn decode(b: &[u8]) -> Option<MadeRecord> {
        let u32_at = |at: usize| b.get(at..at + 4).map(|c| u32::from_le_bytes(c.try_into().expect("4")));
        let hl = u32_at(0)? as usize;
        let dir = LowerHandle::decode(b.get(4..4usize.checked_add(hl)?)?)?;
        let at = 4 + hl;
        let name = b.get(at + 12..)?.to_vec();
        if name.is_empty()
            || name.len() > 255
            || name.contains(&b'/')
            || name.contains(&0)
            || name == b"."
            || name == b".."
        {
            return None;
        }
        Some(MadeRecord { dir, mode: u32_at(at)?, uid: u32_at(at + 4)?, gid: u32_at(at + 8)?, name })
    }
}

impl<D: PmDevice> PmStore<D> {
    /// The made record of the copy `ino`, if it has one (a malformed one is an error).
    pub(crate) fn made_record(&self, ino: Ino) -> Result<Option<MadeRecord>, String> {
        match self.fs.get_xattr(ino, MADE_XATTR) {
            Ok(v) => MadeRecord::decode(&v).map(Some).ok_or_else(|| "a malformed made record".to_string()),
            Err(hashfs::Error::NoData) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Drops the made record of a copy: its lower creation is durable, or its last name is
    /// about to go.
    pub fn forget_made(&self, p: &crate::absorb::Promoted<D>) -> io::Result<()> {
        match self.fs.remove_xattr(p.pm.ino(), MADE_XATTR) {
            Ok(()) | Err(hashfs::Error::NoData) => Ok(()),
            Err(e) => Err(ioe(e)),
        }
    }

    /// Makes again the lower file of copy `ino` (`copy` its name in `/promoted`), whose
    /// lower inode a crash took: returns the new lower file, open for reading and writing.
    pub(crate) fn remake(&self, ino: Ino, copy: &[u8], rec: &MadeRecord) -> Result<OwnedFd, String> {
        let why = |e: io::Error| format!("remaking a file made in PM ({}): {e}", String::from_utf8_lossy(&rec.name));
        let root = self.lower_dir();
        let dir = rec.dir.open(root, libc::O_PATH | libc::O_DIRECTORY).ok();
        let mut made = match &dir {
            Some(d) => self.make_in(d.as_fd(), &rec.name, copy, rec).map_err(why)?.map(|fd| (fd, d.as_fd())),
            None => None,
        };
        let spare;
        if made.is_none() {
            // The directory is gone too, or the name is another file's now.
            spare = match rustix::fs::mkdirat(root, REMADE_DIR, rustix::fs::Mode::from_raw_mode(0o700)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => rustix::fs::openat(
                    root,
                    REMADE_DIR,
                    rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
                    rustix::fs::Mode::empty(),
                )
                .map_err(|e| why(e.into()))?,
                Err(e) => return Err(why(e.into())),
            };
            let mut name = rec.name.clone();
            name.extend_from_slice(b".");
            name.extend_from_slice(copy);
            made = self.make_in(spare.as_fd(), &name, copy, rec).map_err(why)?.map(|fd| (fd, spare.as_fd()));
        }
        let (fd, dir) = made.ok_or_else(|| why(io::Error::from_raw_os_error(libc::EEXIST)))?;
        let f = std::fs::File::from(fd);
        f.sync_all().map_err(why)?;
        crate::lower::reopen(dir.as_fd(), libc::O_RDONLY | libc::O_DIRECTORY)
            .and_then(|d| d.sync_all())
            .map_err(why)?;
        let handle = LowerHandle::of(f.as_fd()).map_err(why)?;
        self.fs.set_xattr(ino, HANDLE_XATTR, &handle.encode(), XattrMode::Any).map_err(|e| why(ioe(e)))?;
        match self.fs.remove_xattr(ino, MADE_XATTR) {
            Ok(()) | Err(hashfs::Error::NoData) => {}
            Err(e) => return Err(why(ioe(e))),
        }
        let _ = rustix::fs::fremovexattr(&f, REMADE_XATTR);
        Ok(OwnedFd::from(f))
    }

    /// Creates `name` in `dir` for copy `copy`, or takes the file an interrupted remake of
    /// the same copy left there: None if the name is another file's.
    fn make_in(&self, dir: BorrowedFd<'_>, name: &[u8], copy: &[u8], rec: &MadeRecord) -> io::Result<Option<OwnedFd>> {
        use rustix::fs::{Mode, OFlags};
        let name: &std::ffi::OsStr = std::os::unix::ffi::OsStrExt::from_bytes(name);
        match rustix::fs::openat(
            dir,
            name,
            OFlags::CREATE | OFlags::EXCL | OFlags::RDWR | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::from_raw_mode(0o600),
        ) {
            Ok(fd) => {
                // Best effort, both: without the mark (a lower file system without user
                // attributes), a remake cut short leaves an empty file and the next one goes
                // to REMADE_DIR; without the owner (the shim, not root), the file is its
                // user's.
                let _ = rustix::fs::fsetxattr(&fd, REMADE_XATTR, copy, rustix::fs::XattrFlags::empty());
                let (uid, gid) = (rustix::fs::Uid::from_raw(rec.uid), rustix::fs::Gid::from_raw(rec.gid));
                let _ = rustix::fs::fchown(&fd, Some(uid), Some(gid));
                rustix::fs::fchmod(&fd, Mode::from_raw_mode(rec.mode))?;
                Ok(Some(fd))
            }
            Err(rustix::io::Errno::EXIST) => {
                // Ours, from a remake a crash cut short?
                let Ok(fd) =
                    rustix::fs::openat(dir, name, OFlags::RDWR | OFlags::CLOEXEC | OFlags::NOFOLLOW, Mode::empty())
                else {
                    return Ok(None);
                };
                let mut mark = [0u8; 64];
                let ours = rustix::fs::fgetxattr(&fd, REMADE_XATTR, &mut mark[..]).is_ok_and(|n| mark[..n] == *copy);
                Ok(ours.then_some(fd))
            }
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_made_record_reads_back_and_a_malformed_one_does_not() {
        let r = MadeRecord {
            dir: LowerHandle { kind: 1, bytes: vec![7; 8] },
            mode: 0o640,
            uid: 1000,
            gid: 100,
            name: b"m42".to_vec(),
        };
        let b = r.encode();
        assert_eq!(MadeRecord::decode(&b), Some(r));
        assert_eq!(MadeRecord::decode(&b[..b.len() - 3]), None, "no name");
        assert_eq!(MadeRecord::decode(&b[..10]), None);
        let mut bad = b.clone();
        bad.push(b'/');
        assert_eq!(MadeRecord::decode(&bad), None, "a name with a slash");
    }
}
