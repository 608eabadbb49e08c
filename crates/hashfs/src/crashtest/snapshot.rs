//! What a user can observe of a file system: everything `stat`, `readlink`, `readdir` and
//! `read` show, per path, and the two ways a recovered state may match the states around
//! the interrupted operation (exactly, or byte by byte for the operations that are not
//! atomic in relaxed mode).

#![forbid(unsafe_code)]

use crate::pm::PmDevice;
use crate::{FileSystem, FileType, Result};
use std::collections::BTreeMap;
use std::fmt;

/// One path's observable state.
#[derive(Clone, PartialEq, Eq)]
pub struct Entry {
    pub ino: u32,
    pub file_type: FileType,
    pub perm: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u32,
    pub size: u64,
    pub blocks: u64,
    pub atime_ns: i64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    /// File data, or a symlink's target; empty for directories.
    pub content: Vec<u8>,
    /// Extended attributes (name, value), sorted.
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} ino {} perm {:o} uid {} gid {} nlink {} size {} blocks {} times {}/{}/{} content {} bytes (crc {:08x}) xattrs {:?}",
            self.file_type,
            self.ino,
            self.perm,
            self.uid,
            self.gid,
            self.nlink,
            self.size,
            self.blocks,
            self.atime_ns,
            self.mtime_ns,
            self.ctime_ns,
            self.content.len(),
            crc32c::crc32c(&self.content),
            self.xattrs.iter().map(|(k, v)| (String::from_utf8_lossy(k), v.len())).collect::<Vec<_>>()
        )
    }
}

/// Every path of a file system (the root is "/").
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Snapshot(pub BTreeMap<String, Entry>);

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (p, e) in &self.0 {
            writeln!(f, "  {p}: {e:?}")?;
        }
        Ok(())
    }
}

impl Snapshot {
    /// Walks the whole tree.
    pub fn of<D: PmDevice>(fs: &FileSystem<D>) -> Result<Snapshot> {
        Self::of_tree(fs, "/")
    }

    /// Walks the tree below `root` (included).
    pub fn of_tree<D: PmDevice>(fs: &FileSystem<D>, root: &str) -> Result<Snapshot> {
        let mut out = BTreeMap::new();
        let mut stack = vec![(root.to_string(), fs.resolve_nofollow(std::path::Path::new(root))?)];
        while let Some((path, ino)) = stack.pop() {
            let m = fs.getattr(ino)?;
            let content = match m.file_type {
                FileType::Directory => {
                    let mut cookie = 0;
                    loop {
                        let batch = fs.readdir_ino(ino, cookie, 256)?;
                        let Some(last) = batch.last() else { break };
                        cookie = last.cookie;
                        for e in batch {
                            let name = String::from_utf8_lossy(&e.name);
                            let child = if path == "/" { format!("/{name}") } else { format!("{path}/{name}") };
                            stack.push((child, e.ino));
                        }
                    }
                    Vec::new()
                }
                FileType::Symlink => fs.readlink_ino(ino)?,
                FileType::Fifo | FileType::CharDevice | FileType::BlockDevice | FileType::Socket => {
                    m.rdev.to_le_bytes().to_vec()
                }
                FileType::Regular => {
                    let f = fs.open_ino(ino, crate::fs::api::Access { read: true, ..Default::default() })?;
                    let mut data = vec![0u8; m.size as usize];
                    let mut done = 0;
                    while done < data.len() {
                        let n = f.read_at(done as u64, &mut data[done..])?;
                        if n == 0 {
                            return Err(crate::Error::corrupt(format!("{path}: read {done} of {} bytes", m.size)));
                        }
                        done += n;
                    }
                    data
                }
            };
            out.insert(
                path,
                Entry {
                    ino: m.ino.0,
                    file_type: m.file_type,
                    perm: m.perm,
                    uid: m.uid,
                    gid: m.gid,
                    nlink: m.nlink,
                    size: m.size,
                    blocks: m.blocks,
                    atime_ns: m.atime_ns,
                    mtime_ns: m.mtime_ns,
                    ctime_ns: m.ctime_ns,
                    content,
                    xattrs: fs
                        .list_xattr(ino)?
                        .into_iter()
                        .map(|k| fs.get_xattr(ino, &k).map(|v| (k, v)))
                        .collect::<Result<_>>()?,
                },
            );
        }
        Ok(Snapshot(out))
    }

    /// The first difference from `other`, for messages.
    pub fn first_difference(&self, other: &Snapshot) -> String {
        for (p, e) in &self.0 {
            match other.0.get(p) {
                None => return format!("{p} exists here, not there"),
                Some(o) if o != e => {
                    let mut s = format!("{p}: here {e:?}\n    there {o:?}");
                    if let Some(i) = e.content.iter().zip(&o.content).position(|(a, b)| a != b) {
                        s += &format!("\n    first differing byte at {i}");
                    }
                    return s;
                }
                Some(_) => {}
            }
        }
        match other.0.keys().find(|p| !self.0.contains_key(*p)) {
            Some(p) => format!("{p} exists there, not here"),
            None => "none".into(),
        }
    }
}

/// Whether `r` is a state an interrupted non-atomic data operation (an overwrite, a hole
/// punch or a fallocate in relaxed mode) may leave between `before` and `after`: the same
/// paths, every path that the operation did not change equal to both, and in the one that
/// it changed the same type, ownership and mode, a size between the old and the new (an
/// operation of several transactions grows the size at each), each byte (zero past an
/// end) old or new, and a block count and each timestamp between the two (it sets the
/// times at each transaction too).
pub fn torn_between(r: &Snapshot, before: &Snapshot, after: &Snapshot) -> bool {
    if r.0.len() != before.0.len() || before.0.len() != after.0.len() {
        return false;
    }
    r.0.iter().all(|(p, e)| {
        let (Some(b), Some(a)) = (before.0.get(p), after.0.get(p)) else { return false };
        if b == a {
            return e == b;
        }
        let between = |x: i64, y: i64, z: i64| y.min(z) <= x && x <= y.max(z);
        let byte = |c: &[u8], i: usize| c.get(i).copied().unwrap_or(0);
        e.ino == b.ino
            && e.file_type == b.file_type
            && (e.perm, e.uid, e.gid, e.nlink) == (b.perm, b.uid, b.gid, b.nlink)
            && e.xattrs == b.xattrs
            && b.xattrs == a.xattrs
            && (b.perm, b.uid, b.gid, b.nlink) == (a.perm, a.uid, a.gid, a.nlink)
            && between(e.size as i64, b.size as i64, a.size as i64)
            && e.blocks >= b.blocks.min(a.blocks)
            && e.blocks <= b.blocks.max(a.blocks)
            && between(e.atime_ns, b.atime_ns, a.atime_ns)
            && between(e.mtime_ns, b.mtime_ns, a.mtime_ns)
            && between(e.ctime_ns, b.ctime_ns, a.ctime_ns)
            && e.content.len() as u64 == e.size
            && e.content.iter().enumerate().all(|(i, &x)| x == byte(&b.content, i) || x == byte(&a.content, i))
    })
}

/// Whether `r` is what a growing write that persists without a transaction (a fast
/// append: data, then size and block count, then times, each an 8-byte store) may leave:
/// every path equal to its state before or after the write except for the modification
/// and change times, which lie between the two. Its data and size are whole or absent;
/// only the times, which no program can rely on after a crash before fsync, may lag
/// behind them or run ahead.
pub fn times_between(r: &Snapshot, before: &Snapshot, after: &Snapshot) -> bool {
    if r.0.len() != before.0.len() || before.0.len() != after.0.len() {
        return false;
    }
    let between = |x: i64, y: i64, z: i64| y.min(z) <= x && x <= y.max(z);
    r.0.iter().all(|(p, e)| {
        let (Some(b), Some(a)) = (before.0.get(p), after.0.get(p)) else { return false };
        let untimed = |x: &Entry| Entry { mtime_ns: 0, ctime_ns: 0, ..x.clone() };
        let u = untimed(e);
        (u == untimed(b) || u == untimed(a))
            && between(e.mtime_ns, b.mtime_ns, a.mtime_ns)
            && between(e.ctime_ns, b.ctime_ns, a.ctime_ns)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(content: &[u8], mtime: i64) -> Entry {
        Entry {
            ino: 2,
            file_type: FileType::Regular,
            perm: 0o644,
            uid: 0,
            gid: 0,
            nlink: 1,
            size: content.len() as u64,
            blocks: 1,
            atime_ns: 0,
            mtime_ns: mtime,
            ctime_ns: mtime,
            content: content.to_vec(),
            xattrs: Vec::new(),
        }
    }

    fn snap(e: Entry) -> Snapshot {
        Snapshot([("/f".to_string(), e)].into_iter().collect())
    }

    #[test]
    fn torn_states_mix_old_and_new_bytes_only() {
        let before = snap(file(b"aaaa", 1));
        let after = snap(file(b"bbbb", 2));
        assert!(torn_between(&snap(file(b"abab", 2)), &before, &after));
        assert!(torn_between(&snap(file(b"aaaa", 1)), &before, &after));
        assert!(!torn_between(&snap(file(b"abac", 2)), &before, &after), "a byte neither old nor new");
        assert!(!torn_between(&snap(file(b"abab", 3)), &before, &after), "a time outside old..new");
        let mut other_perm = file(b"abab", 2);
        other_perm.perm = 0o600;
        assert!(!torn_between(&snap(other_perm), &before, &after));
    }

    /// A fast append's crash states: data and size whole or absent, times anywhere between.
    #[test]
    fn appends_may_lag_in_their_times_only() {
        let before = snap(file(b"aa", 1));
        let after = snap(file(b"aabb", 5));
        assert!(times_between(&snap(file(b"aabb", 1)), &before, &after), "new size, old times");
        assert!(times_between(&snap(file(b"aa", 5)), &before, &after), "old size, new times");
        assert!(times_between(&snap(file(b"aabb", 3)), &before, &after));
        assert!(!times_between(&snap(file(b"aab", 5)), &before, &after), "part of the data");
        assert!(!times_between(&snap(file(b"aa\0\0", 5)), &before, &after), "the size without the data");
        assert!(!times_between(&snap(file(b"aabb", 6)), &before, &after), "a time outside old..new");
    }
}
