//! Read-only participants' record locks (docs/design.md, *Trust*). A read-only participant
//! may not store to the shared region, so its locks cannot lie in the table of record
//! locks (`lock_table.rs`): they lie where its pins lie (`pins.rs`), as read locks of the
//! kernel's lock manager on bytes of the image file far past its end, through the
//! description it pins with. Inode `ino`'s bytes [s, e] are the image file's
//! [ino·2^31 + s, ino·2^31 + e] (see [`image_range`] past 2 GiB); its `flock` is one byte
//! past every inode's range. A
//! read-only participant takes read locks only (its descriptors are read-only, and a
//! `flock` LOCK_EX is ENOLCK), so what must hold is that a write lock in the table and a
//! reader's lock never stand over one byte at once. Each side announces itself before it
//! looks at the other:
//!
//! - a reader takes its kernel lock, then reads the table (without the table's lock: each
//!   entry is whole after every store) for a live write lock in its way, and lets its
//!   kernel lock go again if one is there;
//! - a writer writes its entries, then asks the kernel (`F_OFD_GETLK`) for a reader's lock
//!   in its way, and takes its entries back if one is there.
//!
//! Every kernel lock call goes through the file's lock list under the kernel's lock, a full
//! barrier, so of the two the one that looks second sees the other (both may back off: an
//! F_SETLK is then EAGAIN, a waiter tries again).
//!
//! That would cost a writer a system call at every write lock. It asks instead, at most
//! once a millisecond ([`REFRESH`]), whether any reader has marked itself ([`PRESENCE`]: a
//! read lock each reader takes before its first record lock), and asks about its own range
//! only when one has, or when that answer is [`SETTLE`] old by the time its entries are
//! written. A reader waits [`SETTLE`] after marking itself before its first lock, so a
//! writer that trusted an answer given before the mark wrote its entries before the reader
//! looks.

use super::lock_table::{Conflict, Kind, Owner, Request, TO_END};
use super::pins::{ofd_lock, RangeLock};
use crate::layout::Ino;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Bytes of a file that stand for themselves (2 GiB, past SQLite's lock bytes at 1 GiB):
/// inode `ino`'s locks lie in the image file's [ino << 31, (ino + 1) << 31).
pub const SPAN_SHIFT: u32 = 31;
const SPAN: u64 = 1 << SPAN_SHIFT;
/// Where `flock` locks lie: one byte per inode, past every inode's record locks.
pub const FLOCK_BASE: i64 = 1 << 62;
/// The byte every reader holds a read lock on once it has taken a record lock.
pub const PRESENCE: i64 = (1 << 62) + (1 << 34);
/// How long a reader waits after marking itself before its first lock, and how long a
/// writer trusts an answer that no reader is marked.
pub const SETTLE: Duration = Duration::from_millis(2);
/// How old a writer's answer may be before it asks again.
pub const REFRESH: Duration = Duration::from_millis(1);

/// The image file's bytes (start, length) standing for bytes [start, end] of inode `ino`
/// (`end` inclusive, [`TO_END`] for the end of the file), or its `flock` byte. Bytes from
/// the span's last on stand as that one byte, and inodes 2^31 apart share a span: a
/// reader's lock there keeps writers out of more than it holds, never out of less (two
/// ranges that share a byte map to ranges that share one).
pub fn image_range(ino: Ino, flock: bool, start: u64, end: u64) -> (i64, i64) {
    if flock {
        return (FLOCK_BASE + i64::from(ino.0), 1);
    }
    let base = (u64::from(ino.0) & (SPAN - 1)) << SPAN_SHIFT;
    let (start, end) = (start.min(SPAN - 1), end.min(SPAN - 1));
    ((base + start) as i64, (end - start + 1) as i64)
}

/// A lock the kernel reported on the image file, as a conflict on the file (a reader's:
/// a read lock, its holder's pid unknown, -1 as Linux reports an OFD lock's).
fn as_conflict(flock: bool, l: RangeLock) -> Conflict {
    if flock {
        return Conflict { start: 0, end: TO_END, write: false, pid: -1 };
    }
    let start = (l.start as u64) & (SPAN - 1);
    let end = if l.len == 0 { TO_END } else { start + l.len as u64 - 1 };
    Conflict { start, end: if end >= SPAN - 1 { TO_END } else { end }, write: false, pid: -1 }
}

/// A read lock of another open file description than `fd`'s over `range`, or Err when
/// the kernel could not say.
fn other_reader(fd: RawFd, range: (i64, i64)) -> std::io::Result<Option<RangeLock>> {
    // SAFETY: the caller's descriptor, borrowed for the probe and not closed here.
    let f = std::mem::ManuallyDrop::new(unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) });
    let l = ofd_lock(&f, libc::F_OFD_GETLK, RangeLock { typ: libc::F_WRLCK, start: range.0, len: range.1 })?;
    Ok((l.typ != libc::F_UNLCK).then_some(l))
}

/// CLOCK_MONOTONIC in nanoseconds (one clock for every process on the machine).
fn now() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// `clock` read, in nanoseconds.
pub(crate) fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec for the kernel to fill.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A writer's view of the readers' locks: through `fd`, its descriptor of the image file
/// (whose own description holds none of them), and the mount's last answer to "is any
/// reader marked?" in `asked`: when it was asked (before the question, in ns of
/// CLOCK_MONOTONIC) shifted left by two, whether a writer found it stale in bit 1, and the
/// answer in bit 0; 0: never asked.
pub struct Readers<'a> {
    pub fd: RawFd,
    pub asked: &'a AtomicU64,
}

const PRESENT: u64 = 1;
const STALE: u64 = 2;
const TIME_SHIFT: u32 = 2;

impl Readers<'_> {
    /// Before a write request's entries are written: asks whether any reader is marked,
    /// if no answer was had or a writer found the last one [`REFRESH`] old (no clock is
    /// read here: a lock call reads it once, in [`Self::in_the_way`]).
    pub fn before_write(&self) {
        let asked = self.asked.load(Ordering::Acquire);
        if asked != 0 && asked & STALE == 0 {
            return;
        }
        let t = now();
        // A probe that failed counts as a reader there: the range is asked about.
        let marked = !matches!(other_reader(self.fd, (PRESENCE, 1)), Ok(None));
        self.asked.store((t << TIME_SHIFT) | (u64::from(marked) * PRESENT), Ordering::Release);
    }

    /// After the request's entries are visible (or for F_GETLK): a reader's lock in `r`'s
    /// way, if any. None without a question to the kernel while the last answer says no
    /// reader is marked and is younger than [`SETTLE`] now; one [`REFRESH`] old is marked
    /// stale, for the next call to ask again.
    pub fn in_the_way(&self, r: &Request) -> Option<Conflict> {
        let asked = self.asked.load(Ordering::Acquire);
        let age = now().saturating_sub(asked >> TIME_SHIFT);
        if age >= REFRESH.as_nanos() as u64 && asked & STALE == 0 {
            self.asked.fetch_or(STALE, Ordering::AcqRel);
        }
        if asked != 0 && asked & PRESENT == 0 && age < SETTLE.as_nanos() as u64 {
            return None;
        }
        let range = image_range(r.ino, r.flock, r.start, r.end);
        match other_reader(self.fd, range) {
            Ok(found) => found.map(|l| as_conflict(r.flock, l)),
            // Not known: the request is refused as if a reader held all of it.
            Err(_) => Some(Conflict { start: r.start, end: r.end, write: false, pid: -1 }),
        }
    }
}

/// A read-only participant's own locks: each owner's read-locked ranges in this process,
/// which the kernel holds the union of per file, through the participant's description.
#[derive(Default)]
pub struct ReaderLocks {
    held: Vec<Range>,
    /// Whether this process marked itself ([`PRESENCE`]) and waited [`SETTLE`].
    marked: bool,
}

/// One owner's read lock over [start, end] of a file (or its `flock`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Range {
    owner: Owner,
    ino: u32,
    flock: bool,
    start: u64,
    end: u64,
}

/// The union of sorted-or-not inclusive ranges, sorted and merged (touching ones too).
fn union(mut v: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    v.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(v.len());
    for (s, e) in v {
        match out.last_mut() {
            Some(last) if s <= last.1.saturating_add(1) => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// What of `a` lies outside every range of `b` (both inclusive).
fn minus(a: &[(u64, u64)], b: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for &(s, e) in a {
        let mut pieces = vec![(s, e)];
        for &(bs, be) in b {
            pieces = pieces
                .into_iter()
                .flat_map(|(ps, pe)| {
                    if be < ps || bs > pe {
                        return vec![(ps, pe)];
                    }
                    let mut left = Vec::new();
                    if ps < bs {
                        left.push((ps, bs - 1));
                    }
                    if pe > be {
                        left.push((be + 1, pe));
                    }
                    left
                })
                .collect();
        }
        out.extend(pieces);
    }
    out
}

impl ReaderLocks {
    /// Forgets everything (a forked child: its description is a new one, holding none).
    pub fn forget(&mut self) {
        *self = ReaderLocks::default();
    }

    /// Marks this process as a reader that locks, once, and waits [`SETTLE`] (see the module).
    pub fn mark(&mut self, fd: &std::fs::File) -> Result<(), i32> {
        if !self.marked {
            ofd_lock(fd, libc::F_OFD_SETLK, RangeLock { typ: libc::F_RDLCK, start: PRESENCE, len: 1 })
                .map_err(|e| e.raw_os_error().unwrap_or(libc::ENOLCK))?;
            std::thread::sleep(SETTLE);
            self.marked = true;
        }
        Ok(())
    }

    /// Announces a read lock over `r` to the writers (the kernel's lock through `fd`),
    /// before the caller looks at the table.
    pub fn announce(&self, fd: &std::fs::File, r: &Request) -> Result<(), i32> {
        let (start, len) = image_range(r.ino, r.flock, r.start, r.end);
        ofd_lock(fd, libc::F_OFD_SETLK, RangeLock { typ: libc::F_RDLCK, start, len })
            .map(drop)
            .map_err(|e| e.raw_os_error().unwrap_or(libc::ENOLCK))
    }

    /// Takes back an announcement the table refused: lets go of what of `r` no owner of
    /// this process holds.
    pub fn withdraw(&self, fd: &std::fs::File, r: &Request) {
        self.let_go(fd, r, &[(r.start, r.end)]);
    }

    /// Records `owner`'s read lock or unlock `r` (announced, if a lock), and lets the kernel
    /// go of what the owner held and no owner holds any more.
    pub fn apply(&mut self, fd: &std::fs::File, owner: Owner, r: &Request) {
        let lock = r.kind != Kind::Unlock;
        let (mine, others): (Vec<Range>, Vec<Range>) =
            self.held.iter().partition(|h| h.owner == owner && h.ino == r.ino.0 && h.flock == r.flock);
        let ranges: Vec<(u64, u64)> = mine.iter().map(|h| (h.start, h.end)).collect();
        let ranges =
            if lock { union([ranges, vec![(r.start, r.end)]].concat()) } else { minus(&ranges, &[(r.start, r.end)]) };
        self.held = others;
        self.held.extend(ranges.into_iter().map(|(start, end)| Range {
            owner,
            ino: r.ino.0,
            flock: r.flock,
            start,
            end,
        }));
        self.let_go(fd, r, &mine.iter().map(|h| (h.start, h.end)).collect::<Vec<_>>());
    }

    /// Drops `owner`'s locks (on inode `ino` only, if given).
    pub fn release(&mut self, fd: &std::fs::File, owner: Owner, ino: Option<Ino>) {
        let files: Vec<(u32, bool)> = self
            .held
            .iter()
            .filter(|h| h.owner == owner && ino.is_none_or(|n| n.0 == h.ino))
            .map(|h| (h.ino, h.flock))
            .collect();
        for (i, flock) in files {
            let r = Request { ino: Ino(i), flock, start: 0, end: TO_END, kind: Kind::Unlock };
            self.apply(fd, owner, &r);
        }
    }

    /// Whether a POSIX owner of process `pid` holds a lock on `ino` (a close asks).
    pub fn holds_any(&self, pid: u32, ino: Ino) -> bool {
        self.held.iter().any(|h| matches!(h.owner, Owner::Process { pid: p, .. } if p == pid) && h.ino == ino.0)
    }

    /// F_GETLK among this process's own owners: another owner's lock in the way of a write
    /// request `r` (read locks share).
    pub fn test(&self, owner: Owner, r: &Request) -> Option<Conflict> {
        if r.kind != Kind::Write {
            return None;
        }
        self.held
            .iter()
            .find(|h| {
                h.owner != owner && h.ino == r.ino.0 && h.flock == r.flock && h.start <= r.end && r.start <= h.end
            })
            .map(|h| Conflict {
                start: h.start,
                end: h.end,
                write: false,
                pid: match h.owner {
                    Owner::Process { pid, .. } => pid as i32,
                    _ => -1,
                },
            })
    }

    /// F_GETLK against other readers: a read lock of another process in the way of a write
    /// request `r`.
    pub fn test_others(fd: &std::fs::File, r: &Request) -> Option<Conflict> {
        use std::os::fd::AsRawFd;
        if r.kind != Kind::Write {
            return None;
        }
        let range = image_range(r.ino, r.flock, r.start, r.end);
        other_reader(fd.as_raw_fd(), range).ok().flatten().map(|l| as_conflict(r.flock, l))
    }

    /// Lets the kernel go of `pieces` of `r`'s file, save the bytes that stand for what
    /// this process's owners still hold (a span's last byte stands for all past it, which another
    /// range may hold; inodes 2^31 apart share a span).
    fn let_go(&self, fd: &std::fs::File, r: &Request, pieces: &[(u64, u64)]) {
        let (ino, flock) = (r.ino, r.flock);
        let held: Vec<(u64, u64)> = self
            .held
            .iter()
            .filter(|h| {
                h.flock == flock && (flock && h.ino == ino.0 || !flock && (h.ino ^ ino.0) as u64 & (SPAN - 1) == 0)
            })
            .map(|h| {
                let (s, l) = image_range(Ino(h.ino), flock, h.start, h.end);
                (s as u64, (s + l - 1) as u64)
            })
            .collect();
        let mapped: Vec<(u64, u64)> = pieces
            .iter()
            .map(|&(s, e)| {
                let (s, l) = image_range(ino, flock, s, e);
                (s as u64, (s + l - 1) as u64)
            })
            .collect();
        for (s, e) in minus(&mapped, &union(held)) {
            let _ = ofd_lock(
                fd,
                libc::F_OFD_SETLK,
                RangeLock { typ: libc::F_UNLCK, start: s as i64, len: (e - s + 1) as i64 },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bytes(v: &[(u64, u64)]) -> std::collections::BTreeSet<u64> {
        v.iter().flat_map(|&(s, e)| s..=e).collect()
    }

    proptest! {
        /// The interval arithmetic against sets of bytes.
        #[test]
        fn union_and_minus_are_the_sets(a in prop::collection::vec((0u64..40, 0u64..8), 0..6),
                                        b in prop::collection::vec((0u64..40, 0u64..8), 0..6)) {
            let a: Vec<(u64, u64)> = a.into_iter().map(|(s, l)| (s, s + l)).collect();
            let b: Vec<(u64, u64)> = b.into_iter().map(|(s, l)| (s, s + l)).collect();
            let u = union(a.clone());
            prop_assert_eq!(bytes(&u), bytes(&a));
            prop_assert!(u.windows(2).all(|w| w[0].1 + 1 < w[1].0), "{:?}", u);
            let m = minus(&a, &b);
            let want: std::collections::BTreeSet<u64> = bytes(&a).difference(&bytes(&b)).copied().collect();
            prop_assert_eq!(bytes(&m), want);
        }
    }

    #[test]
    fn ranges_map_into_their_inodes_span() {
        assert_eq!(image_range(Ino(3), false, 10, 19), ((3 << 31) + 10, 10));
        assert_eq!(image_range(Ino(3), false, 10, TO_END), ((3 << 31) + 10, (1 << 31) - 10));
        // Past the span: its last byte; an inode 2^31 on: the same span.
        assert_eq!(image_range(Ino(3), false, 5 << 31, TO_END), ((4 << 31) - 1, 1));
        assert_eq!(image_range(Ino(3 + (1 << 31)), false, 10, 19), ((3 << 31) + 10, 10));
        assert!(image_range(Ino(u32::MAX), false, TO_END, TO_END).0 < FLOCK_BASE);
        assert_eq!(image_range(Ino(7), true, 0, TO_END), (FLOCK_BASE + 7, 1));
        let c = as_conflict(false, RangeLock { typ: libc::F_RDLCK, start: (3 << 31) + 10, len: (1 << 31) - 10 });
        assert_eq!((c.start, c.end), (10, TO_END));
    }
}
