//! The processes sharing a region, one slot each: its pid and its start time (so that a
//! dead process's pid, reused by another, does not pass for it). A slot whose process no
//! longer runs belongs to a dead participant, whose leftovers (its locks) its survivors
//! take over. A participant also holds a lock of the kernel's on its slot's byte of the
//! region file, which answers most questions of liveness without reading `/proc`
//! (`liveness.rs`).

use super::liveness;
use super::region::Shared;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Participants a region holds at once.
pub const MAX_PARTICIPANTS: usize = 256;

/// A participant: the index of its slot in the table, which names it as the owner of its
/// locks and the holder of its descriptions until its slot is reaped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Participant(pub u32);

impl std::fmt::Display for Participant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// [`Slot::leaving`]: the participant has begun to leave (it still owns its locks).
const LEAVING: u32 = 1;
/// [`Slot::leaving`]: the participant counts once in the image's `forks` word (a forked
/// child until it has joined, a program exec'd with descriptions handed over until its
/// successor has opened them): whoever reaps the slot of one that died so uncounts it.
const COUNTED: u32 = 2;

/// One participant's slot.
#[repr(C)]
pub struct Slot {
    pid: AtomicU32,
    /// [`LEAVING`] and [`COUNTED`].
    leaving: AtomicU32,
    /// The process's start time (`/proc/PID/stat`'s 22nd field), 0 while the slot is
    /// being filled.
    start: AtomicU64,
    /// Which program image of the process joined ([`image_nonce`]): a process that
    /// `execve`s keeps its pid and start time, but the program it was is gone.
    image: AtomicU64,
}

/// A number drawn once per program image (statics start over at `execve`), which tells
/// this program's slots from those the process left before it exec'd.
fn image_nonce() -> u64 {
    static NONCE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *NONCE.get_or_init(|| {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
        h.finish() | 1
    })
}

/// The participant table.
#[repr(C)]
pub struct Participants {
    slots: [Slot; MAX_PARTICIPANTS],
}

// SAFETY: atomics only.
unsafe impl Shared for Slot {}
// SAFETY: an array of Shared.
unsafe impl Shared for Participants {}

impl Participants {
    /// Takes a free slot for this process; its index, or None when none is free. A dead
    /// participant's slot is not free until a survivor has taken over what it held and
    /// called [`Participants::reap`]: its index still names it as the owner of its locks.
    pub fn join(&self) -> Option<Participant> {
        let pid = std::process::id();
        // `leaving` 0 clears the mark of the participant that gave the slot back
        // ([`Participants::leave`] keeps it). Until it is cleared this one, being filled,
        // counts as leaving, as if it came a moment later.
        let me = self.take_free(pid, 0, image_nonce(), own_start_time()?)?;
        self.hold(me);
        Some(me)
    }

    /// This process, whose participant `i` now is (it joined, or took the slot its parent
    /// reserved for it before a fork), holds the slot's lock of the kernel's
    /// (`liveness.rs`).
    pub fn hold(&self, i: Participant) {
        liveness::hold(self as *const Participants as usize, i.0);
    }

    /// Takes a free slot for process `pid` (started at `start`), with the leaving word
    /// `leaving` and program nonce `image`, stored in that order before the start time (a
    /// slot whose start time is 0 is being filled); None when none is free.
    fn take_free(&self, pid: u32, leaving: u32, image: u64, start: u64) -> Option<Participant> {
        for (i, s) in self.slots.iter().enumerate() {
            if s.pid.compare_exchange(0, pid, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                s.leaving.store(leaving, Ordering::Release);
                s.image.store(image, Ordering::Release);
                s.start.store(start, Ordering::Release);
                return Some(Participant(i as u32));
            }
        }
        None
    }

    /// Frees dead participant `i`'s slot, once its leftovers are dealt with.
    pub fn reap(&self, i: Participant) {
        if !self.alive(i) {
            self.leave(i);
        }
    }

    /// A slot for process `pid`, another program this one started (`posix_spawn`) and handed
    /// descriptions over to: leaving (no one waits for it) and counted in the image's `forks`
    /// word ([`COUNTED`]), of no program image of that process's own, so that the program,
    /// if it joins, finds it dead and carries the count on (as after an `execve`), and
    /// whoever reaps it once the process has ended uncounts it. None if `pid` has a slot
    /// already (the program joins, or joined: it uncounts itself), if it has ended (had it
    /// joined, it uncounted itself; had it not, its count stays), or if none is free. Under
    /// the image lock. A program that takes a slot of its own meanwhile finds this one as
    /// it joins, and carries the count on.
    pub fn reserve_for(&self, pid: u32) -> Option<Participant> {
        let start = start_time(pid).filter(|&t| process_alive(pid, t))?; // a zombie has ended
        if self.slots.iter().any(|s| s.pid.load(Ordering::Acquire) == pid) {
            return None;
        }
        self.take_free(pid, LEAVING | COUNTED, 0, start) // image 0: no program's nonce (each is odd)
    }

    /// A ticket for the program a `posix_spawn` of this process is about to start with
    /// descriptions handed over: a slot counted in the image's `forks` word ([`COUNTED`]),
    /// leaving (no one waits for it), named after this process and program image until the
    /// spawn returns the program's pid ([`Self::hand_to_program`]), so alive meanwhile
    /// for everyone, this process included. The program learns its index from the names of
    /// the descriptors handed to it, and a program that finds the ticket naming it takes
    /// its count, once. (Before 2026-12-07 the slot was reserved after the spawn returned,
    /// [`Self::reserve_for`]: a program that had joined, opened its files, uncounted itself
    /// and left by then got a counted slot after it, which its reaper uncounted a second
    /// time; one that had ended without joining got none, and its count stayed.) None when
    /// no slot is free.
    pub fn reserve_ticket(&self) -> Option<Participant> {
        let pid = std::process::id();
        self.take_free(pid, LEAVING | COUNTED, image_nonce(), own_start_time()?)
    }

    /// The spawn with ticket `i` ([`Self::reserve_ticket`]) made process `child`: the
    /// ticket names it from now on, of no program image (each is odd), as a slot
    /// [`Self::reserve_for`] keeps: dead to the program, which carries its count on as it
    /// joins (or takes it once it finds the ticket naming it); to everyone else alive
    /// while the process runs, and its count its reaper's once the process has ended (a
    /// program that never joined, or ended before its spawn returned). Under the image
    /// lock. On the way (its start time 0) it is alive while the pid it names runs.
    pub fn hand_to_program(&self, i: Participant, child: u32) {
        let s = &self.slots[i.0 as usize];
        s.start.store(0, Ordering::Release);
        s.pid.store(child, Ordering::Release);
        s.image.store(0, Ordering::Release);
        s.start.store(start_time(child).unwrap_or(0), Ordering::Release);
    }

    /// A slot for the child of a fork this process is about to make (under the image lock,
    /// which the parent holds across the fork): counted in the image's `forks` word
    /// ([`COUNTED`]) and named after this process, of this program image (which the child
    /// shares until it execs), until the parent hands it to the child
    /// ([`Self::hand_to_child`]). The count so lives in a slot from before the fork: a
    /// child killed before it joined leaves a dead slot, which its reaper uncounts (before,
    /// the child counted itself only once it had taken a slot, and a child killed before
    /// that left the count for good). None when no slot is free.
    pub fn reserve_for_child(&self) -> Option<Participant> {
        let pid = std::process::id();
        self.take_free(pid, COUNTED, image_nonce(), own_start_time()?)
    }

    /// The parent's fork made process `child`: slot `i`, reserved for it
    /// ([`Self::reserve_for_child`]), names it from now on (the parent's call, under the
    /// image lock; the child waits for it, [`Self::names`]). A slot being filled meanwhile
    /// (start time 0): alive while the pid it names runs.
    pub fn hand_to_child(&self, i: Participant, child: u32) {
        let s = &self.slots[i.0 as usize];
        s.start.store(0, Ordering::Release);
        s.pid.store(child, Ordering::Release);
        s.start.store(start_time(child).unwrap_or(0), Ordering::Release);
    }

    /// Whether slot `i` names process `pid`.
    pub fn names(&self, i: Participant, pid: u32) -> bool {
        self.slots.get(i.0 as usize).is_some_and(|s| s.pid.load(Ordering::Acquire) == pid)
    }

    /// Gives slot `i` back (at exit). Its leaving mark stays until the next participant
    /// to take the slot clears it ([`Participants::join`]): cleared here, the slot would
    /// name a live process that is not leaving from then until its pid is cleared (its start
    /// time 0 makes it a slot being filled, alive while its pid runs), and the last
    /// participant to leave, counting it as staying, would not mark the image clean, while
    /// this one had already counted that participant as staying (each saw the other).
    pub fn leave(&self, i: Participant) {
        let s = &self.slots[i.0 as usize];
        if s.pid.load(Ordering::Acquire) == std::process::id() && s.image.load(Ordering::Acquire) == image_nonce() {
            // This program's slot: its lock goes first (the next to take the slot takes it).
            liveness::let_go(self as *const Participants as usize, i.0);
        }
        s.start.store(0, Ordering::Release);
        s.image.store(0, Ordering::Release);
        crate::fs::race_point::reached("participants: a slot given back but for its pid");
        s.pid.store(0, Ordering::Release);
    }

    /// Fills slot `i` as process `pid`, started at `start`, took it (tests).
    #[cfg(test)]
    pub(crate) fn fill(&self, i: u32, pid: u32, start: u64) {
        let s = &self.slots[i as usize];
        s.pid.store(pid, Ordering::Release);
        s.start.store(start, Ordering::Release);
    }

    /// Makes participant `i`, of this process, count as dead: its slot then names the program
    /// this process was before an `execve`. The crash explorer's process deaths
    /// (`crashtest/death.rs`) kill a participant so, inside one process.
    pub(crate) fn pretend_dead(&self, i: Participant) {
        let s = &self.slots[i.0 as usize];
        debug_assert_eq!(s.pid.load(Ordering::Acquire), std::process::id(), "a slot of this process");
        liveness::let_go(self as *const Participants as usize, i.0); // as its exec would
        s.image.store(image_nonce() ^ 2, Ordering::Release);
    }

    /// Participant `i` has begun to leave: it no longer counts as staying
    /// ([`Participants::staying`]), though it still owns its locks.
    pub fn set_leaving(&self, i: Participant) {
        self.slots[i.0 as usize].leaving.fetch_or(LEAVING, Ordering::AcqRel);
    }

    /// Participant `i` counts in the image's `forks` word, or (`on` false) no longer does.
    pub fn set_counted(&self, i: Participant, on: bool) {
        let w = &self.slots[i.0 as usize].leaving;
        if on {
            w.fetch_or(COUNTED, Ordering::AcqRel);
        } else {
            w.fetch_and(!COUNTED, Ordering::AcqRel);
        }
    }

    /// Whether participant `i` counted in the image's `forks` word; it no longer does.
    pub fn take_counted(&self, i: Participant) -> bool {
        self.slots.get(i.0 as usize).is_some_and(|s| s.leaving.fetch_and(!COUNTED, Ordering::AcqRel) & COUNTED != 0)
    }

    /// Whether slot `i` was taken by this process (a program it was before an `execve`,
    /// or this one).
    pub fn of_this_process(&self, i: Participant) -> bool {
        self.slots.get(i.0 as usize).is_some_and(|s| s.pid.load(Ordering::Acquire) == std::process::id())
    }

    /// Participant `i` stays after all (its `execve`, which began its leaving, failed).
    pub fn set_staying(&self, i: Participant) {
        self.slots[i.0 as usize].leaving.store(0, Ordering::Release);
    }

    /// Whether participant `i` lives and has not begun to leave.
    pub fn staying(&self, i: Participant) -> bool {
        self.alive(i) && !self.marked_leaving(i)
    }

    /// Whether slot `i`'s participant has begun to leave ([`Participants::set_leaving`]),
    /// alive or not.
    pub fn marked_leaving(&self, i: Participant) -> bool {
        self.slots.get(i.0 as usize).is_some_and(|s| s.leaving.load(Ordering::Acquire) & LEAVING != 0)
    }

    /// Whether the process in slot `i` still runs, whatever program it runs now (one that
    /// `execve`d keeps its pid and start time: the program it handed descriptions over to
    /// may yet join).
    pub fn process_runs(&self, i: Participant) -> bool {
        let Some(s) = self.slots.get(i.0 as usize) else { return false };
        runs(s.pid.load(Ordering::Acquire), s.start.load(Ordering::Acquire))
    }

    /// Whether slot `i` is free (no process, live or dead, holds it).
    pub fn is_free(&self, i: Participant) -> bool {
        self.slots.get(i.0 as usize).is_none_or(|s| s.pid.load(Ordering::Acquire) == 0)
    }

    /// Whether slot `i` holds a process that still runs (a slot being filled counts as
    /// live while its pid runs: a process killed between taking the slot and storing its
    /// start time leaves a dead slot, not a live one forever).
    pub fn alive(&self, i: Participant) -> bool {
        let Some(s) = self.slots.get(i.0 as usize) else { return false };
        let pid = s.pid.load(Ordering::Acquire);
        if pid == 0 {
            // A free slot, without asking the kernel this process's id: a join surveys
            // every slot, and asked 256 times (half a `cat`'s system calls, 2026-12-07).
            return false;
        }
        let start = s.start.load(Ordering::Acquire);
        if pid == std::process::id() && start != 0 {
            // This process: alive if this program joined it, dead if the program the
            // process was before an execve did.
            return s.image.load(Ordering::Acquire) == image_nonce();
        }
        if start != 0 && liveness::held_by(self as *const Participants as usize, i.0, pid) {
            // The slot's process holds its lock: it runs, as the program that took the slot.
            return true;
        }
        runs(pid, start)
    }
}

/// Whether the process a slot names by `pid` and `start` runs (a slot being filled, its
/// start time 0, by its pid alone).
fn runs(pid: u32, start: u64) -> bool {
    match (pid, start) {
        (0, _) => false,
        (pid, 0) => stat_fields(pid).is_some_and(|(state, _)| !gone(pid, state)),
        (pid, start) => process_alive(pid, start),
    }
}

/// Whether process `pid` runs, whenever it started (a zombie, exited and not yet reaped,
/// does not; see [`process_alive`]).
pub fn process_runs(pid: u32) -> bool {
    runs(pid, 0)
}

/// Whether process `pid`, started at `start`, still runs (a zombie, killed and not yet
/// reaped, does not).
pub fn process_alive(pid: u32, start: u64) -> bool {
    match stat_fields(pid) {
        Some((state, t)) => t == start && !gone(pid, state),
        None => false,
    }
}

/// Whether process `pid`, whose main thread's state is `state`, has ended. A zombie main
/// thread is not enough: while another thread of the process runs `execve`, the main
/// thread is a zombie until the exec takes its place (the kernel's `de_thread`), pid and
/// start time kept; the process runs on as the new program, which may be taking over the
/// descriptions the old one handed over. A process whose main thread is a zombie ended if
/// no thread of it is left running, the main one read again too (an exec that ended since
/// the first read left one thread, the new program's, under the main thread's number).
fn gone(pid: u32, state: char) -> bool {
    if state != 'Z' && state != 'X' {
        return false;
    }
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return true };
    !tasks
        .flatten()
        .any(|t| t.file_name().to_str().and_then(|n| n.parse::<u32>().ok()).is_some_and(|tid| thread_runs(pid, tid)))
}

/// Whether thread `tid` of process `pid` is neither a zombie nor dead.
fn thread_runs(pid: u32, tid: u32) -> bool {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")) else { return false };
    let state = s.rfind(')').and_then(|i| s.get(i + 2..)).and_then(|r| r.chars().next());
    state.is_some_and(|c| c != 'Z' && c != 'X')
}

/// Process `pid`'s start time (`/proc/PID/stat`'s field 22).
pub fn start_time(pid: u32) -> Option<u64> {
    stat_fields(pid).map(|(_, t)| t)
}

/// This process's start time, read once per process (a forked child reads its own): a
/// shell's every fork reserves a slot named after it.
fn own_start_time() -> Option<u64> {
    static OWN: (AtomicU32, AtomicU64) = (AtomicU32::new(0), AtomicU64::new(0));
    let pid = std::process::id();
    // The start first, then the pid: a reader that finds its pid finds its start.
    if OWN.0.load(Ordering::Acquire) == pid {
        return Some(OWN.1.load(Ordering::Acquire));
    }
    let start = start_time(pid)?;
    OWN.0.store(0, Ordering::Release);
    OWN.1.store(start, Ordering::Release);
    OWN.0.store(pid, Ordering::Release);
    Some(start)
}

/// `/proc/PID/stat`'s state and start time.
fn stat_fields(pid: u32) -> Option<(char, u64)> {
    // Read into one buffer until the line's end (the kernel gives it whole to the first
    // read): `read_to_string` asked the file's size, then read in growing pieces, nine
    // system calls for a line a join reads for every live participant, several times.
    use std::io::Read;
    let mut f = std::fs::File::open(format!("/proc/{pid}/stat")).ok()?;
    let mut buf = [0u8; 1024];
    let mut n = 0;
    while n < buf.len() && !buf[..n].ends_with(b"\n") {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    let s = std::str::from_utf8(&buf[..n]).ok()?;
    // The command name, in parentheses, may hold spaces and parentheses: fields count
    // from the last ')'.
    let rest = &s[s.rfind(')')? + 2..];
    let mut f = rest.split(' ');
    let state = f.next()?.chars().next()?;
    let start = f.nth(18)?.parse().ok()?; // field 22 overall; state is field 3
    Some((state, start))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::share::{Identity, Region, HEADER_BYTES};

    /// A region file of its own (named after `name` and this process, removed as the path
    /// drops, also when the test fails) with a participant table at [`HEADER_BYTES`], of an
    /// image whose identity is made of `image`.
    pub(crate) fn table_region(name: &str, image: u8) -> (tempfile::TempPath, Region) {
        let path = std::env::temp_dir().join(format!("hashfs-{name}-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let path = tempfile::TempPath::try_from_path(path).unwrap();
        let id = Identity::of_image([image; 16]).unwrap();
        let r = Region::attach(&path, &id, HEADER_BYTES + std::mem::size_of::<Participants>(), 0o600).unwrap();
        (path, r)
    }

    /// The main thread's state in `/proc/PID/stat`, polled (5 s at most) until `want` says so.
    fn until_state(pid: u32, want: impl Fn(char) -> bool) {
        let t = std::time::Instant::now();
        while !stat_fields(pid).is_some_and(|(s, _)| want(s)) {
            assert!(t.elapsed() < std::time::Duration::from_secs(5), "process {pid}: {:?}", stat_fields(pid));
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    /// A process whose main thread is a zombie while another thread runs, as during an
    /// `execve` from a thread other than the main one, runs (it was taken for dead: a
    /// read-only participant opening in that window of a writer's exec handover found no
    /// live writer and was refused, about one run in three of the exec test); once every
    /// thread has ended, unreaped, it does not. The main thread ends by `pthread_exit`
    /// here, which leaves the process in that state for as long as the other thread runs.
    #[test]
    fn a_process_runs_while_a_thread_outlives_its_main_one() {
        let script = "import ctypes, threading, time\n\
                      threading.Thread(target=time.sleep, args=(60,)).start()\n\
                      print('ready', flush=True)\n\
                      ctypes.CDLL(None).pthread_exit(None)\n";
        let mut child = std::process::Command::new("python3")
            .args(["-c", script])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
        assert_eq!(line, "ready\n");
        let pid = child.id();
        until_state(pid, |s| s == 'Z');
        let start = start_time(pid).unwrap();
        assert!(process_alive(pid, start), "a process with a running thread taken for dead");
        assert!(runs(pid, 0), "a process with a running thread taken for dead");
        child.kill().unwrap();
        let t = std::time::Instant::now();
        while std::fs::read_dir(format!("/proc/{pid}/task")).map(|d| d.count()).unwrap_or(0) > 1 {
            assert!(t.elapsed() < std::time::Duration::from_secs(5), "the killed process's threads stayed");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        until_state(pid, |s| s == 'Z' || s == 'X');
        assert!(!process_alive(pid, start), "a killed process, not reaped, taken for alive");
        child.wait().unwrap();
    }

    /// A process killed after it took a slot and before it stored its start time leaves a
    /// dead slot, which its survivors can reap.
    #[test]
    fn a_slot_left_half_filled_by_a_dead_process_is_dead() {
        let (path, r) = table_region("participants", 0x3C);
        let who = r.at::<Participants>(HEADER_BYTES);
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        who.slots[3].pid.store(pid, Ordering::Release); // start time never stored
        assert!(!who.alive(Participant(3)), "a half-filled slot of a dead process counts as alive");
        who.slots[4].pid.store(std::process::id(), Ordering::Release);
        assert!(who.alive(Participant(4)), "a half-filled slot of a live process counts as dead");
        who.reap(Participant(3));
        assert_eq!(who.slots[3].pid.load(Ordering::Acquire), 0);
        // The program this process was before an execve: its pid and start time, not its
        // image.
        let me = who.join().unwrap();
        assert!(who.alive(me));
        who.slots[me.0 as usize].image.fetch_add(2, Ordering::AcqRel);
        assert!(!who.alive(me), "a slot of the program before an execve counts as alive");
        std::fs::remove_file(&path).unwrap();
    }

    /// The table holds [`MAX_PARTICIPANTS`] at once, and refuses the next.
    #[test]
    fn the_table_holds_its_bound_and_refuses_the_next() {
        let r = Region::anonymous(std::mem::size_of::<Participants>()).unwrap();
        let who = r.at::<Participants>(0);
        let all: Vec<Participant> = (0..MAX_PARTICIPANTS).map(|_| who.join().expect("a free slot")).collect();
        assert_eq!(all.last(), Some(&Participant(MAX_PARTICIPANTS as u32 - 1)));
        assert_eq!(who.join(), None, "a slot past the bound");
        who.leave(all[100]);
        assert_eq!(who.join(), Some(all[100]), "the slot given back is taken again");
    }

    /// A participant giving its slot back never counts as staying once it began to leave,
    /// at any step (the last two processes of an atomic-save test each counted the other as
    /// staying, 1 run in 40 under load, and neither marked the image clean); the next
    /// participant to take the slot is not leaving.
    #[test]
    fn a_slot_given_back_never_counts_as_staying_again() {
        let (path, r) = table_region("participants-leave", 0x3D);
        // The point's hook lives as long as the thread: so does the region.
        let r: &'static Region = Box::leak(Box::new(r));
        let who = r.at::<Participants>(HEADER_BYTES);
        let me = who.join().unwrap();
        assert!(who.staying(me));
        who.set_leaving(me);
        let points = std::rc::Rc::new(std::cell::Cell::new(0));
        let seen = points.clone();
        let _hook = crate::fs::race_point::on_this_thread(move |_| {
            seen.set(seen.get() + 1);
            assert!(!who.staying(me), "a participant giving its slot back counts as staying");
        });
        who.leave(me);
        assert_eq!(points.get(), 1, "the point inside leave was not reached");
        assert!(!who.staying(me) && who.is_free(me));
        let again = who.join().unwrap();
        assert_eq!(again, me, "the slot given back is the first free one");
        assert!(who.staying(again), "a participant that took a slot given back counts as leaving");
        std::fs::remove_file(&path).unwrap();
    }
}
