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
    pub content: Content,
    /// Extended attributes (name, value), sorted.
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} ino {} perm {:o} uid {} gid {} nlink {} size {} blocks {} times {}/{}/{} content {} bytes not zero (crc {:08x}) xattrs {:?}",
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
            self.content.bytes(),
            self.content.crc(),
            self.xattrs.iter().map(|(k, v)| (String::from_utf8_lossy(k), v.len())).collect::<Vec<_>>()
        )
    }
}

/// Bytes as a user reads them, kept as the blocks of [`BLOCK`] bytes that are not all
/// zero (a hole and written zeros read alike), by block index: a file of 5 GiB with a few
/// blocks written costs those blocks. Equal contents are equal values.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Content(BTreeMap<u64, Vec<u8>>);

impl fmt::Debug for Content {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} bytes in {} blocks not zero (crc {:08x})", self.bytes(), self.0.len(), self.crc())
    }
}

/// The unit [`Content`] keeps.
pub const BLOCK: u64 = 4096;

impl Content {
    /// `bytes` read from offset `at` (a multiple of [`BLOCK`]) added.
    pub fn add(&mut self, at: u64, bytes: &[u8]) {
        debug_assert_eq!(at % BLOCK, 0);
        for (i, b) in bytes.chunks(BLOCK as usize).enumerate() {
            if b.iter().any(|&x| x != 0) {
                self.0.insert(at / BLOCK + i as u64, b.to_vec());
            }
        }
    }

    pub fn from_bytes(bytes: &[u8]) -> Content {
        let mut c = Content::default();
        c.add(0, bytes);
        c
    }

    /// The byte at `i` (zero where no block is kept).
    pub fn byte(&self, i: u64) -> u8 {
        self.0.get(&(i / BLOCK)).and_then(|b| b.get((i % BLOCK) as usize)).copied().unwrap_or(0)
    }

    /// The first `len` bytes, dense (for small files).
    pub fn to_vec(&self, len: u64) -> Vec<u8> {
        (0..len).map(|i| self.byte(i)).collect()
    }

    /// Bytes kept (in blocks not all zero).
    pub fn bytes(&self) -> u64 {
        self.0.values().map(|b| b.len() as u64).sum()
    }

    pub fn crc(&self) -> u32 {
        self.0.iter().fold(0, |crc, (k, b)| crc32c::crc32c_append(crc32c::crc32c_append(crc, &k.to_le_bytes()), b))
    }

    /// The offsets of the blocks kept by any of `cs`, in order: every byte outside them
    /// is zero in all.
    fn blocks_of_any<'a>(cs: &'a [&'a Content]) -> impl Iterator<Item = u64> + 'a {
        let keys: std::collections::BTreeSet<u64> = cs.iter().flat_map(|c| c.0.keys().copied()).collect();
        keys.into_iter().map(|k| k * BLOCK)
    }

    /// The first byte where `self` and `other` differ.
    pub fn first_difference(&self, other: &Content) -> Option<u64> {
        Self::blocks_of_any(&[self, other]).flat_map(|at| at..at + BLOCK).find(|&i| self.byte(i) != other.byte(i))
    }

    /// Whether each of the first `len` bytes is that of `a` or that of `b`.
    pub fn each_byte_of(&self, len: u64, a: &Content, b: &Content) -> bool {
        Self::blocks_of_any(&[self, a, b])
            .flat_map(|at| at..(at + BLOCK).min(len))
            .all(|i| self.byte(i) == a.byte(i) || self.byte(i) == b.byte(i))
    }
}

/// Files up to this size are read whole for a snapshot; larger ones (sparse files past
/// 4 GiB) only where their mapping has blocks (`FileSystem::mapped_runs`).
const READ_WHOLE: u64 = 64 << 20;

/// The bytes of the regular file `f` of `size` bytes.
fn file_content<D: PmDevice>(fs: &FileSystem<D>, path: &str, ino: crate::Ino, size: u64) -> Result<Content> {
    let f = fs.open_ino(ino, crate::fs::api::Access { read: true, ..Default::default() })?;
    let ranges: Vec<(u64, u64)> = if size <= READ_WHOLE {
        vec![(0, size)]
    } else {
        fs.mapped_runs(ino)?
            .into_iter()
            .map(|(l, n)| (l.0 * BLOCK, ((l.0 + n) * BLOCK).min(size)))
            .filter(|(a, b)| a < b)
            .collect()
    };
    let mut content = Content::default();
    for (from, to) in ranges {
        let mut at = from;
        while at < to {
            let mut data = vec![0u8; (to - at).min(READ_WHOLE) as usize];
            let mut done = 0;
            while done < data.len() {
                let n = f.read_at(at + done as u64, &mut data[done..])?;
                if n == 0 {
                    return Err(crate::Error::corrupt(format!("{path}: read {} of {size} bytes", at + done as u64)));
                }
                done += n;
            }
            content.add(at, &data);
            at += data.len() as u64;
        }
    }
    Ok(content)
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
                    Content::default()
                }
                FileType::Symlink => Content::from_bytes(&fs.readlink_ino(ino)?),
                FileType::Fifo | FileType::CharDevice | FileType::BlockDevice | FileType::Socket => {
                    Content::from_bytes(&m.rdev.to_le_bytes())
                }
                FileType::Regular => {
                    let data = file_content(fs, &path, ino, m.size)?;
                    // F2 (`fs/data.rs`): what a mapping of the last block shows past EOF.
                    let tail = fs.bytes_past_eof(ino)?;
                    if let Some(i) = tail.iter().position(|&b| b != 0) {
                        return Err(crate::Error::corrupt(format!(
                            "{path}: byte {} (past EOF at {}) is {:#04x}, not zero",
                            m.size + i as u64,
                            m.size,
                            tail[i]
                        )));
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
                    if let Some(i) = e.content.first_difference(&o.content) {
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
            && e.content.each_byte_of(e.size, &b.content, &a.content)
    })
}

/// Files whose modification and change times may lag on the media: in relaxed mode a
/// write or append sets them in DRAM, and they reach the media at the file's fsync (or
/// earlier, with its next transaction; `fs/times.rs`). Each inode number maps to the
/// index of the first recorded state whose times may still be on the media (the state
/// before its first write since its last fsync).
pub type Lagging = BTreeMap<u32, usize>;

/// Checks that in `r` each lagging file's modification and change times lie between the
/// least and the greatest that file had (under any path) in `states[since..]`, where
/// `states` ends with the state after the interrupted operation. The rest of `r` is
/// compared with its times cleared ([`without_times`]).
pub fn lagging_times_ok(r: &Snapshot, states: &[Snapshot], lag: &Lagging) -> std::result::Result<(), String> {
    for (p, e) in &r.0 {
        let Some(&since) = lag.get(&e.ino) else { continue };
        let (mut lo, mut hi) = ([i64::MAX; 2], [i64::MIN; 2]);
        for x in states[since.min(states.len())..].iter().flat_map(|s| s.0.values()).filter(|x| x.ino == e.ino) {
            for (i, t) in [x.mtime_ns, x.ctime_ns].into_iter().enumerate() {
                lo[i] = lo[i].min(t);
                hi[i] = hi[i].max(t);
            }
        }
        for (i, (what, t)) in [("modification", e.mtime_ns), ("change", e.ctime_ns)].into_iter().enumerate() {
            if !(lo[i] <= t && t <= hi[i]) {
                return Err(format!(
                    "{p}: {what} time {t} is outside the times the file had since its last fsync ({}..={})",
                    lo[i], hi[i]
                ));
            }
        }
    }
    Ok(())
}

/// `s` with the modification and change times of every lagging file cleared.
pub fn without_times(s: &Snapshot, lag: &Lagging) -> Snapshot {
    let mut out = s.clone();
    for e in out.0.values_mut().filter(|e| lag.contains_key(&e.ino)) {
        e.mtime_ns = 0;
        e.ctime_ns = 0;
    }
    out
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
            content: Content::from_bytes(content),
            xattrs: Vec::new(),
        }
    }

    fn snap(e: Entry) -> Snapshot {
        Snapshot([("/f".to_string(), e)].into_iter().collect())
    }

    /// A sparse content keeps only blocks not all zero, and compares, finds differences
    /// and mixes bytes as the dense bytes would.
    #[test]
    fn contents_keep_blocks_not_all_zero() {
        let mut c = Content::default();
        c.add(0, &[0u8; 8192]);
        assert_eq!(c, Content::default(), "zeros are a hole");
        c.add(5 << 30, &[7u8; 10]);
        assert_eq!((c.bytes(), c.byte(5 << 30), c.byte((5 << 30) + 10), c.byte(3)), (10, 7, 0, 0));
        let mut d = Content::default();
        d.add(5 << 30, &[7, 7, 7, 9, 7, 7, 7, 7, 7, 7]);
        assert_eq!(c.first_difference(&d), Some((5 << 30) + 3));
        assert_eq!(c.first_difference(&c.clone()), None);
        // Each byte old or new: a block neither keeps has to be zero in both.
        let len = (5 << 30) + 10;
        assert!(d.each_byte_of(len, &c, &d) && c.each_byte_of(len, &c, &d));
        assert!(!Content::default().each_byte_of(len, &c, &d), "zeros where both have sevens");
        assert!(d.each_byte_of((5 << 30) + 3, &Content::default(), &c), "the nine lies past the length");
        assert!(!d.each_byte_of(len, &Content::default(), &c), "a nine neither has");
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

    /// A write's times may be any the file had since its last fsync; nothing else may lag.
    #[test]
    fn writes_may_lag_in_their_times_only() {
        // Three writes since the last fsync (state 1): times 2, 5, 9.
        let states = [snap(file(b"a", 1)), snap(file(b"aa", 2)), snap(file(b"aab", 5)), snap(file(b"aabb", 9))];
        let lag: Lagging = [(2, 1)].into_iter().collect();
        assert!(lagging_times_ok(&snap(file(b"aabb", 2)), &states, &lag).is_ok(), "the times of an earlier write");
        assert!(lagging_times_ok(&snap(file(b"aabb", 7)), &states, &lag).is_ok(), "between two writes' times");
        let err = lagging_times_ok(&snap(file(b"aabb", 1)), &states, &lag).unwrap_err();
        assert!(err.contains("outside"), "times from before the last fsync: {err}");
        assert!(lagging_times_ok(&snap(file(b"aabb", 10)), &states, &lag).is_err(), "a time never set");
        assert!(
            lagging_times_ok(&snap(file(b"aabb", 1)), &states, &Lagging::new()).is_ok(),
            "nothing lags: not its job"
        );
        // Compared with the times cleared, data and size must still match exactly.
        let r = without_times(&snap(file(b"aabb", 2)), &lag);
        assert!(r == without_times(&states[3], &lag));
        assert!(without_times(&snap(file(b"aab", 9)), &lag) != without_times(&states[3], &lag), "part of the data");
        assert!(without_times(&snap(file(b"aabb", 2)), &Lagging::new()) != without_times(&states[3], &Lagging::new()));
    }
}
