//! The kernel's references to inodes, and the file each referenced regular file is read
//! and written through when the kernel opens files without asking the daemon.
//!
//! FUSE's no-open mode (`FUSE_NO_OPEN_SUPPORT`, libfuse's answer of ENOSYS to the first
//! OPEN): the kernel then opens and closes files by itself, with no OPEN or RELEASE round
//! trip, and sends their reads, writes, fsyncs and fallocates with file handle 0. The
//! daemon serves those through one HashFS file per inode, opened at the first such
//! request. What the kernel's handles used to do for an unlinked file, keep it until its
//! last close, this table does for every inode the kernel still knows: the kernel holds an
//! inode while any of its files is open and sends FORGET with the lookups it was given
//! when it lets the inode go. So every reply that hands the kernel an inode (a lookup, a
//! new inode, a readdirplus entry) counts one here, FORGET takes its count back, and at
//! zero the inode's file is closed (which frees the inode if it was unlinked, or leaves it
//! for recovery if the daemon dies first, as an open handle did). An unlink or a rename
//! over a file the kernel knows opens that file first ([`Nodes::hold`]), so that the
//! kernel's open files still read and write it afterwards.
//!
//! Counting too many is safe (an unlinked inode then waits for the unmount, or for the
//! next mount's recovery after a crash); counting too few is not, which is why every reply that carries an inode goes through
//! [`Nodes::looked_up`].

use hashfs::pm::PmDevice;
use hashfs::{Access, Error, File, FileSystem, FileType, Ino};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Shards of the table, so that the daemon's threads rarely meet on one lock.
const SHARDS: usize = 16;

struct Node<D: PmDevice> {
    lookups: u64,
    file: Option<Arc<File<D>>>,
}

pub(crate) struct Nodes<D: PmDevice> {
    shards: Vec<Mutex<HashMap<u32, Node<D>>>>,
}

/// Read and write: the kernel checked the caller's access when it opened its own file,
/// and sends writes only for files it opened for writing.
const ACCESS: Access = Access { read: true, write: true, append: false };

impl<D: PmDevice> Nodes<D> {
    pub(crate) fn new() -> Self {
        Nodes { shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect() }
    }

    fn shard(&self, ino: Ino) -> std::sync::MutexGuard<'_, HashMap<u32, Node<D>>> {
        self.shards[ino.0 as usize % SHARDS].lock().expect("node table")
    }

    /// The kernel was given `ino` once more.
    pub(crate) fn looked_up(&self, ino: Ino) {
        self.shard(ino).entry(ino.0).or_insert(Node { lookups: 0, file: None }).lookups += 1;
    }

    /// The kernel was given a new inode, open: its handle-less requests go through the
    /// inode's file from now on (a CREATE's handle may never be released once the kernel
    /// opens files by itself, so none is handed out then).
    pub(crate) fn created(&self, fs: &FileSystem<D>, ino: Ino) -> Result<(), Error> {
        let mut s = self.shard(ino);
        let node = s.entry(ino.0).or_insert(Node { lookups: 0, file: None });
        node.lookups += 1;
        if node.file.is_none() {
            node.file = Some(Arc::new(fs.open_ino(ino, ACCESS)?));
        }
        Ok(())
    }

    /// The kernel let go of `n` of its lookups of `ino`; at none left the inode's file is
    /// closed (after the table's lock is released: closing may free the inode).
    pub(crate) fn forget(&self, ino: Ino, n: u64) {
        let closed = {
            let mut s = self.shard(ino);
            match s.get_mut(&ino.0) {
                Some(node) if node.lookups > n => {
                    node.lookups -= n;
                    None
                }
                Some(_) => s.remove(&ino.0).and_then(|node| node.file),
                None => None,
            }
        };
        drop(closed);
    }

    /// How many lookups of `ino` the kernel holds (tests).
    #[cfg(test)]
    fn lookups(&self, ino: Ino) -> u64 {
        self.shard(ino).get(&ino.0).map_or(0, |n| n.lookups)
    }

    /// The file the kernel's handle-less requests on `ino` go through: kept while the
    /// kernel knows the inode; opened for this request alone if it does not (it always
    /// does when it sends one; this is only the safe answer if it did not).
    pub(crate) fn file(&self, fs: &FileSystem<D>, ino: Ino) -> Result<Arc<File<D>>, Error> {
        let mut s = self.shard(ino);
        match s.get_mut(&ino.0) {
            Some(Node { file: Some(f), .. }) => Ok(f.clone()),
            Some(node) => {
                let f = Arc::new(fs.open_ino(ino, ACCESS)?);
                node.file = Some(f.clone());
                Ok(f)
            }
            None => {
                drop(s);
                Ok(Arc::new(fs.open_ino(ino, ACCESS)?))
            }
        }
    }

    /// Before `name` in `parent` is unlinked or renamed over: if it is a regular file the
    /// kernel knows, its file is opened and kept until the kernel forgets it, so that the
    /// kernel's open files of it go on working once it has no name (as POSIX has it).
    pub(crate) fn hold(&self, fs: &FileSystem<D>, parent: Ino, name: &[u8]) {
        let Ok(m) = fs.lookup(parent, name) else { return };
        if m.file_type != FileType::Regular {
            return;
        }
        let mut s = self.shard(m.ino);
        if let Some(node) = s.get_mut(&m.ino.0) {
            if node.file.is_none() {
                // An inode that cannot be opened now is one the unlink will not free
                // under an open file either (it is not there).
                node.file = fs.open_ino(m.ino, ACCESS).ok().map(Arc::new);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hashfs::pm::MmapDevice;
    use hashfs::{FormatOptions, Owner};

    fn fs(dir: &std::path::Path) -> FileSystem<MmapDevice> {
        let img = dir.join("img");
        FileSystem::format_file(&img, 16 << 20, &FormatOptions::default(), &|_, _| {}).unwrap();
        FileSystem::open(&img).unwrap().0
    }

    /// An unlinked file the kernel still knows stays readable until the kernel forgets
    /// it, through every lookup it was given, and is freed then.
    #[test]
    fn a_known_file_outlives_its_name_until_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let fs = fs(dir.path());
        let nodes = Nodes::new();
        let root = Ino(1);
        let m = fs.create_file_at(root, b"f", 0o644, Owner { uid: 0, gid: 0 }).unwrap();
        let blocks = fs.statfs().blocks_free;
        nodes.created(&fs, m.ino).unwrap(); // the kernel's CREATE: one lookup, and open
        nodes.file(&fs, m.ino).unwrap().write_at(0, b"still here").unwrap();
        nodes.file(&fs, m.ino).unwrap().write_at(1 << 20, b"!").unwrap();
        assert_eq!(nodes.lookups(m.ino), 1);
        nodes.looked_up(m.ino);
        assert_eq!(nodes.lookups(m.ino), 2);
        nodes.hold(&fs, root, b"f");
        fs.unlink_at(root, b"f").unwrap();
        let free = fs.statfs().inodes_free;
        nodes.forget(m.ino, 1);
        let mut buf = [0u8; 10];
        nodes.file(&fs, m.ino).unwrap().read_at(0, &mut buf).unwrap();
        assert_eq!(&buf, b"still here", "the file went with its name while the kernel knew it");
        assert_eq!(fs.statfs().inodes_free, free, "freed before the kernel forgot it");
        nodes.forget(m.ino, 1);
        assert_eq!(fs.statfs().inodes_free, free + 1, "not freed once the kernel forgot it");
        assert!(nodes.file(&fs, m.ino).is_err());
        assert_eq!(fs.statfs().blocks_free, blocks, "its blocks were not freed");
    }
}
