//! Whether a participant's process runs, asked of the kernel's lock manager first
//! (docs/design.md, "Many processes on one image", *Who is alive*).
//!
//! A slot names its process by pid and start time, and a survivor that finds it reads
//! `/proc/PID/stat` to tell whether that process still runs (`participants.rs`). That read
//! costs about 7 us, and a join reads it for every live participant three times (its
//! survey, and its leaving twice): a `cat` beside 21 other participants spent 0.5 ms of its
//! 2.5 on them (2026-12-08, by hand), and each backend PostgreSQL forks joins beside all
//! the others.
//!
//! So each participant also holds a write lock of the kernel's (a POSIX record lock, the
//! process's) on one byte of the region file, [`SLOT_BYTES`] plus its slot's index, for as
//! long as it is a participant; a survivor asks `F_GETLK` (under half a microsecond) and
//! counts the slot alive when the lock is there and its holder is the pid the slot names.
//! A POSIX lock is what makes the answer true:
//!
//! - it belongs to the process, not to a descriptor: a child made by `fork` (or `clone`)
//!   does not inherit it, so a killed participant's children cannot keep it alive (an OFD
//!   lock would live in every child still holding the descriptor);
//! - the kernel lets it go when the process ends (its files closed, before it is a zombie)
//!   and at `execve`, since the descriptor is close-on-exec (closing any descriptor of the
//!   file lets go of the process's locks on it): a program that exec'd no longer holds
//!   its predecessor's slot, as the slot's image nonce says;
//! - only a process that may write the region file can take a write lock, and `F_GETLK`
//!   names the holder's pid: a read-only participant cannot make a dead slot look alive.
//!
//! The lock only ever answers "alive": a slot whose byte is not locked (its process is
//! filling it, or is another's child or spawned program named by a reservation, or lost
//! the lock because the process closed another descriptor of the region file, or the
//! table of kept files below is full) is asked of `/proc` as before. So a lock that is
//! missing costs time, never a wrong answer; a lock held where the slot is dead would be
//! wrong, and the three properties above, the pid check and the lock let go before a slot
//! is given back ([`let_go`]) keep that from happening.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};

/// The region file's byte standing for slot 0 (past any region's length; the region's
/// own bytes are locked only whole, by a replacement of a stale region, `attach.rs`).
pub const SLOT_BYTES: i64 = 1 << 40;

/// Region mappings of this process whose files it keeps open for these locks: the first
/// byte of the mapping (0: an unused entry; `usize::MAX`: one being filled or emptied), the
/// byte past its end, and the descriptor. A participant table at an address in a mapping
/// is that file's. Entries are registered by [`Region`](super::Region) as it maps a file
/// and removed as it unmaps it (no reference into the mapping outlives it, so no lookup
/// for its addresses runs meanwhile); atomics, not a lock, so that a forked child never
/// finds it held by a thread that did not come along.
struct Kept {
    start: AtomicUsize,
    end: AtomicUsize,
    fd: AtomicI32,
}

const KEPT_FILES: usize = 16;
static KEPT: [Kept; KEPT_FILES] =
    [const { Kept { start: AtomicUsize::new(0), end: AtomicUsize::new(0), fd: AtomicI32::new(-1) } }; KEPT_FILES];

/// Registers the mapping [start, end) of the region file open as `fd`. False when the
/// table is full (the mapping's slots are then asked of `/proc` only).
pub(super) fn register(start: usize, end: usize, fd: RawFd) -> bool {
    for k in &KEPT {
        if k.start.compare_exchange(0, usize::MAX, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            k.end.store(end, Ordering::Release);
            k.fd.store(fd, Ordering::Release);
            k.start.store(start, Ordering::Release);
            return true;
        }
    }
    false
}

/// Removes the mapping that starts at `start` ([`register`]).
pub(super) fn unregister(start: usize) {
    for k in &KEPT {
        if k.start.compare_exchange(start, usize::MAX, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            k.fd.store(-1, Ordering::Release);
            k.end.store(0, Ordering::Release);
            k.start.store(0, Ordering::Release);
        }
    }
}

/// The descriptor of the region file mapped at `addr`, if it is kept.
fn file_at(addr: usize) -> Option<RawFd> {
    KEPT.iter().find_map(|k| {
        let start = k.start.load(Ordering::Acquire);
        (start != 0 && start != usize::MAX && addr >= start && addr < k.end.load(Ordering::Acquire))
            .then(|| k.fd.load(Ordering::Acquire))
            .filter(|&fd| fd >= 0)
    })
}

/// `fcntl(fd, cmd, {typ, byte, 1})`: the struct as the kernel left it, or None on error.
fn record_lock(fd: RawFd, cmd: i32, typ: i32, byte: i64) -> Option<libc::flock> {
    // SAFETY: a plain C struct, valid zeroed.
    let mut l: libc::flock = unsafe { std::mem::zeroed() };
    l.l_type = typ as libc::c_short;
    l.l_whence = libc::SEEK_SET as libc::c_short;
    l.l_start = byte;
    l.l_len = 1;
    // SAFETY: a record lock command with a valid struct flock on a descriptor this process
    // keeps open (the mapping's entry lives as long as the descriptor); the kernel reads
    // and, for F_GETLK, writes that struct only.
    (unsafe { libc::fcntl(fd, cmd, &mut l as *mut libc::flock) } == 0).then_some(l)
}

fn slot_byte(slot: u32) -> i64 {
    SLOT_BYTES + i64::from(slot)
}

/// This process takes slot `slot`'s lock of the table at `table` (it has just taken the
/// slot). Nothing happens if the file is not kept or the byte is locked by another process.
pub(super) fn hold(table: usize, slot: u32) {
    if let Some(fd) = file_at(table) {
        let _ = record_lock(fd, libc::F_SETLK, libc::F_WRLCK, slot_byte(slot));
    }
}

/// This process lets go of slot `slot`'s lock (before it gives the slot back, or when it
/// plays dead in the crash explorer).
pub(super) fn let_go(table: usize, slot: u32) {
    if let Some(fd) = file_at(table) {
        let _ = record_lock(fd, libc::F_SETLK, libc::F_UNLCK, slot_byte(slot));
    }
}

/// Whether process `pid` (another than this one: `F_GETLK` does not report the caller's own
/// locks) holds slot `slot`'s lock of the table at `table`.
pub(super) fn held_by(table: usize, slot: u32, pid: u32) -> bool {
    let Some(fd) = file_at(table) else { return false };
    let Some(l) = record_lock(fd, libc::F_GETLK, libc::F_WRLCK, slot_byte(slot)) else { return false };
    let write = i32::from(l.l_type) == libc::F_WRLCK;
    let holder = l.l_pid == pid as libc::pid_t;
    write && holder
}

#[cfg(test)]
mod tests {
    use super::SLOT_BYTES;
    use crate::share::participants::tests::table_region;
    use crate::share::{start_time, Participant, Participants, HEADER_BYTES};
    use std::io::BufRead;
    use std::path::Path;
    use std::process::{Child, Command, Stdio};

    /// A process that opens `path` (for writing when `write`) and holds a record lock on
    /// each of slots `slots`' bytes (a write lock, or a read lock when not `write`), ready
    /// once it has them all.
    fn holder(path: &Path, write: bool, slots: &[u32]) -> Child {
        let script = format!(
            "import fcntl, sys, time\n\
             f = open({path:?}, {mode:?})\n\
             for s in {slots:?}:\n    fcntl.lockf(f, {how} | fcntl.LOCK_NB, 1, {SLOT_BYTES} + s)\n\
             print('ready', flush=True)\n\
             time.sleep(60)\n",
            path = path.to_str().unwrap(),
            mode = if write { "r+" } else { "r" },
            how = if write { "fcntl.LOCK_EX" } else { "fcntl.LOCK_SH" },
        );
        let mut child = Command::new("python3").args(["-c", &script]).stdout(Stdio::piped()).spawn().expect("python3");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line, "ready\n", "the holder took its locks");
        child
    }

    /// Whether some other process holds slot `slot`'s byte of `path` (a write lock asked for).
    fn taken_elsewhere(path: &Path, slot: u32) -> bool {
        let script = format!(
            "import fcntl\nf = open({:?}, 'r+')\ntry:\n    fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, {SLOT_BYTES} + {slot})\n    print('free')\nexcept OSError:\n    print('taken')\n",
            path.to_str().unwrap()
        );
        let out = Command::new("python3").args(["-c", &script]).output().expect("python3");
        String::from_utf8_lossy(&out.stdout).trim() == "taken"
    }

    /// A slot counts as alive by its lock only when the lock is a write lock held by the
    /// pid the slot names: a slot naming a dead process whose byte another process holds is
    /// dead (a lock taken for the slot's own, without the holder's pid checked:
    /// `liveness-holder-unchecked`), and so is one whose process is not the one that took
    /// it (its start time differs, as for a pid used again) whose byte that process holds
    /// with a read lock, which a process that may only read the region can take
    /// (`liveness-read-lock-counts`). A participant lets go of its lock before it gives its
    /// slot back: the next process to take the slot takes the lock (`liveness-kept-at-leave`).
    #[test]
    fn a_slot_is_alive_by_its_lock_only_when_the_slots_process_holds_it() {
        let (path, r) = table_region("liveness", 0x4A);
        let who = r.at::<Participants>(HEADER_BYTES);
        let table = who as *const Participants as usize;

        let mut writer = holder(&path, true, &[3, 4]);
        let mut reader = holder(&path, false, &[5]);
        let mut gone = Command::new("true").spawn().unwrap();
        let dead = gone.id();
        let dead_start = start_time(dead).unwrap_or(1);
        gone.wait().unwrap();

        who.fill(3, dead, dead_start);
        assert!(!who.alive(Participant(3)), "a dead process's slot counts as alive by another's lock");
        let (w, r_pid) = (writer.id(), reader.id());
        who.fill(4, w, start_time(w).unwrap());
        assert!(super::held_by(table, 4, w) && who.alive(Participant(4)));
        who.fill(5, r_pid, start_time(r_pid).unwrap() + 1);
        assert!(!who.alive(Participant(5)), "a read lock makes a dead slot count as alive");

        let me = who.join().unwrap();
        assert!(taken_elsewhere(&path, me.0), "a participant holds no lock on its slot's byte");
        who.leave(me);
        assert!(!taken_elsewhere(&path, me.0), "a participant that gave its slot back kept its lock");

        for c in [&mut writer, &mut reader] {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }
}
