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
//!
//! The kernel knows inodes by node ID, and an ID must not name another inode while the
//! kernel still knows it. On a shared mount another participant may free an inode the
//! kernel knows (a rename over its name) and a new file take its number, so the ID is the
//! inode number with the inode's generation above it ([`node_id`]; the root is FUSE's 1):
//! a request for an ID whose inode is gone, or whose number another inode has now, is
//! ESTALE ([`ino_of`] tells the number, `HashFsFuse::ino` checks the generation), and the
//! kernel looks the path up again.

use fuser::INodeNo;
use hashfs::pm::PmDevice;
use hashfs::{Access, Error, File, FileSystem, FileType, Ino, Metadata};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The node ID the kernel is given for the inode `m`.
pub(crate) fn node_id(m: &Metadata) -> INodeNo {
    if m.ino == Ino::ROOT {
        INodeNo(1)
    } else {
        INodeNo(m.ino.get() | u64::from(m.generation) << 32)
    }
}

/// The inode number in a node ID, and the generation it was given with (0 for the root).
pub(crate) fn ino_of(node: INodeNo) -> (Ino, u32) {
    (Ino(node.0 as u32), (node.0 >> 32) as u32)
}

/// Opens the inode node ID `id` names: ESTALE if it is gone or its number is another
/// inode's now (checked once open: the open holds it).
pub(crate) fn open<D: PmDevice>(fs: &FileSystem<D>, id: INodeNo, access: Access) -> Result<File<D>, Error> {
    let ino = ino_of(id).0;
    let f = fs.open_ino(ino, access).map_err(|e| if matches!(e, Error::NotFound) { Error::Stale(ino.0) } else { e })?;
    if node_id(&f.metadata()?) != id {
        return Err(Error::Stale(ino.0));
    }
    Ok(f)
}

/// Shards of the table, so that the daemon's threads rarely meet on one lock.
const SHARDS: usize = 16;

struct Node<D: PmDevice> {
    lookups: u64,
    file: Option<Arc<File<D>>>,
}

pub(crate) struct Nodes<D: PmDevice> {
    shards: Vec<Mutex<HashMap<u64, Node<D>>>>,
    /// On a shared mount, the regular files last handed to the kernel, kept open
    /// ([`Nodes::keep_recent`]).
    recent: Mutex<std::collections::VecDeque<File<D>>>,
}

/// How many of the regular files last handed to the kernel a shared mount keeps open.
const RECENT: usize = 64;

/// Read and write: the kernel checked the caller's access when it opened its own file,
/// and sends writes only for files it opened for writing.
const ACCESS: Access = Access { read: true, write: true, append: false };

impl<D: PmDevice> Nodes<D> {
    pub(crate) fn new() -> Self {
        Nodes { shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(), recent: Default::default() }
    }

    fn shard(&self, node: INodeNo) -> std::sync::MutexGuard<'_, HashMap<u64, Node<D>>> {
        self.shards[ino_of(node).0 .0 as usize % SHARDS].lock().expect("node table")
    }

    /// The kernel was given `node` once more.
    pub(crate) fn looked_up(&self, node: INodeNo) {
        self.shard(node).entry(node.0).or_insert(Node { lookups: 0, file: None }).lookups += 1;
    }

    /// The kernel was given a new inode, open: its handle-less requests go through the
    /// inode's file from now on (a CREATE's handle may never be released once the kernel
    /// opens files by itself, so none is handed out then).
    pub(crate) fn created(&self, fs: &FileSystem<D>, m: &Metadata) -> Result<(), Error> {
        let id = node_id(m);
        let mut s = self.shard(id);
        let node = s.entry(id.0).or_insert(Node { lookups: 0, file: None });
        node.lookups += 1;
        if node.file.is_none() {
            node.file = Some(Arc::new(fs.open_ino(m.ino, ACCESS)?));
        }
        Ok(())
    }

    /// On a shared mount, keeps the regular file `m` that a reply is about to hand the
    /// kernel open until [`RECENT`] more have been: the kernel's open follows its lookup
    /// (and the permission check's GETATTR) by a few round trips, in which another
    /// participant's rename over the name would free the inode, and the open would fail
    /// (ESTALE, which the kernel retries once, and a rename loop can hit twice). Kept
    /// open, the inode outlives its name until the open has it. Not every inode the kernel
    /// knows: it keeps those it looked up for as long as it likes, and the table of open
    /// inodes every participant shares is bounded (`hashfs::share::MAX_OPEN_INODES`).
    /// False when the inode is gone already (the caller looks the name up again).
    pub(crate) fn keep_recent(&self, fs: &FileSystem<D>, m: &Metadata) -> bool {
        if m.file_type != FileType::Regular {
            return true;
        }
        let read = Access { read: true, write: false, append: false };
        let Ok(f) = fs.open_ino(m.ino, read) else { return false };
        if f.metadata().map(|now| node_id(&now)).ok() != Some(node_id(m)) {
            return false; // freed, and its number another inode's already
        }
        let out = {
            let mut r = self.recent.lock().expect("recent files");
            r.push_back(f);
            if r.len() > RECENT {
                r.pop_front()
            } else {
                None
            }
        };
        drop(out); // closed outside the lock (a close may free the inode)
        true
    }

    /// The kernel let go of `n` of its lookups of `node`; at none left the inode's file is
    /// closed (after the table's lock is released: closing may free the inode).
    pub(crate) fn forget(&self, id: INodeNo, n: u64) {
        let closed = {
            let mut s = self.shard(id);
            match s.get_mut(&id.0) {
                Some(node) if node.lookups > n => {
                    node.lookups -= n;
                    None
                }
                Some(_) => s.remove(&id.0).and_then(|node| node.file),
                None => None,
            }
        };
        drop(closed);
    }

    /// How many lookups of `ino` the kernel holds (tests).
    #[cfg(test)]
    fn lookups(&self, id: INodeNo) -> u64 {
        self.shard(id).get(&id.0).map_or(0, |n| n.lookups)
    }

    /// The file the kernel's handle-less requests on `ino` go through: kept while the
    /// kernel knows the inode; opened for this request alone if it does not (it always
    /// does when it sends one; this is only the safe answer if it did not).
    pub(crate) fn file(&self, fs: &FileSystem<D>, id: INodeNo) -> Result<Arc<File<D>>, Error> {
        let mut s = self.shard(id);
        match s.get_mut(&id.0) {
            Some(Node { file: Some(f), .. }) => Ok(f.clone()),
            Some(node) => {
                let f = Arc::new(open(fs, id, ACCESS)?);
                node.file = Some(f.clone());
                Ok(f)
            }
            None => {
                drop(s);
                Ok(Arc::new(open(fs, id, ACCESS)?))
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
        let id = node_id(&m);
        let mut s = self.shard(id);
        if let Some(node) = s.get_mut(&id.0) {
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
        let id = node_id(&m);
        nodes.created(&fs, &m).unwrap(); // the kernel's CREATE: one lookup, and open
        nodes.file(&fs, id).unwrap().write_at(0, b"still here").unwrap();
        nodes.file(&fs, id).unwrap().write_at(1 << 20, b"!").unwrap();
        assert_eq!(nodes.lookups(id), 1);
        nodes.looked_up(id);
        assert_eq!(nodes.lookups(id), 2);
        nodes.hold(&fs, root, b"f");
        fs.unlink_at(root, b"f").unwrap();
        let free = fs.statfs().inodes_free;
        nodes.forget(id, 1);
        let mut buf = [0u8; 10];
        nodes.file(&fs, id).unwrap().read_at(0, &mut buf).unwrap();
        assert_eq!(&buf, b"still here", "the file went with its name while the kernel knew it");
        assert_eq!(fs.statfs().inodes_free, free, "freed before the kernel forgot it");
        nodes.forget(id, 1);
        assert_eq!(fs.statfs().inodes_free, free + 1, "not freed once the kernel forgot it");
        assert!(nodes.file(&fs, id).is_err());
        assert_eq!(fs.statfs().blocks_free, blocks, "its blocks were not freed");
    }
}
