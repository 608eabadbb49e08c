//! `execve` and its relatives (`execv`, `execvp`, `execvpe`, `fexecve`): a HashFS
//! descriptor without close-on-exec survives into the next program with its open file
//! description (its file, offset and flags), as Linux keeps it. A shell's `cmd > /pm/f`
//! (the forked child opens the file onto stdout, then execs `cmd`) is the common case.
//!
//! Before the exec, each surviving descriptor's description is made shared in the image's
//! region (`fork.rs`: its position moves there) and counted for the next program, and its
//! placeholder becomes an `O_PATH` descriptor of a memfd named after the description
//! (`hashfs-ofd-<index>-<generation>`, and `-t<slot>` after it for a `posix_spawn`'s
//! ticket, `hashfs::Fork::ticket`), which `/proc/self/fd` shows to the next program.
//! A standard descriptor that is a pump's pipe (`start_pump`) is drained into its file
//! (output) or has its unread bytes given back to its offset (input), then becomes such a
//! named descriptor too; a snapshot on standard input (`snapshot.rs`) stays, and a memfd
//! names its description. As the next program's shim loads, before `main`, it finds the
//! names, joins the image, takes the descriptions over and serves the descriptors (the
//! standard ones through pumps again). The exec'ing participant is marked leaving, so that
//! no one waits for it; the next program's join reaps its slot.
//!
//! The variadic `execl`, `execlp` and `execle` come here through the interposer's array
//! calls (`hashfs_interpose::list_execs!`). A `vfork` whose child would inherit
//! descriptors the shim serves or pumps is a `fork` ([`vfork_needs_fork`]); a child made by
//! `clone` with the parent's memory (glibc's `posix_spawn` does, and is prepared by the
//! parent: `before_spawn`) and an exec in it that the shim did not prepare pass their
//! descriptors as before (EBADF in the next program).

use super::*;
use hashfs::share::Handle;
use hashfs_interpose::{Child, ChildKnown};
use pump::{inode_of, Pump, PUMPED};

/// What a named placeholder's memfd is called, before its index and generation.
/// Makes descriptor `fd` an `O_PATH` descriptor of a memfd named after `h` and the
/// spawn's ticket, if any (`Handle::handed_name`; without close-on-exec); false if the
/// kernel refused a step.
fn name_after(fd: c_int, h: Handle, ticket: Option<u32>) -> bool {
    name_memfd(fd, &h.handed_name(ticket))
}

/// Makes descriptor `fd` an `O_PATH` descriptor of a memfd named `name`.
fn name_memfd(fd: c_int, name: &str) -> bool {
    let Ok(name) = CString::new(name) else { return false };
    // SAFETY: a NUL-terminated name.
    let m = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if m < 0 {
        return false;
    }
    let open = real!(open: fn(*const c_char, c_int, c_uint) -> c_int);
    let close = real!(close: fn(c_int) -> c_int);
    let dup2 = real!(dup2: fn(c_int, c_int) -> c_int);
    let Ok(path) = CString::new(format!("/proc/self/fd/{m}")) else { return false };
    // SAFETY: a NUL-terminated path; the descriptors are ours.
    unsafe {
        let q = open(path.as_ptr(), libc::O_PATH, 0);
        close(m);
        if q < 0 {
            return false;
        }
        let r = dup2(q, fd);
        close(q);
        r == fd
    }
}

/// What a copied descriptor's placeholder is called, before its inode, flags and offset.
const COPY_NAME: &str = "hashfs-rofd-";

/// A read-only participant names no description in the region (it may write nothing
/// there): its descriptor passes to the next program as a copy, named after its inode,
/// status flags and offset (`hashfs-rofd-<ino>-<flags>-<offset>`), which the next program
/// opens again; the two offsets then move apart (docs/design.md, *Trust*).
fn name_copy(fd: c_int, of: &OpenFile) -> bool {
    let at = *of.pos.lock();
    let name = format!("{COPY_NAME}{}-{}-{at}", of.ino.0, of.flags.load(Ordering::Relaxed));
    name_memfd(fd, &name)
}

/// The inode, flags and offset a copy's placeholder names: `/memfd:hashfs-rofd-I-F-O (deleted)`.
fn named_copy(link: &[u8]) -> Option<(Ino, c_int, u64)> {
    let s = std::str::from_utf8(link).ok()?.strip_prefix("/memfd:")?.strip_prefix(COPY_NAME)?;
    let mut parts = s.split(' ').next()?.splitn(3, '-');
    let ino = Ino(parts.next()?.parse().ok()?);
    let flags = parts.next()?.parse().ok()?;
    Some((ino, flags, parts.next()?.parse().ok()?))
}

/// How a descriptor passes to the next program.
#[derive(Clone, Copy)]
enum Passed {
    /// Its description in the image's region.
    Shared(Handle),
    /// A copy (a read-only participant's: [`name_copy`]).
    Copied,
}

/// Names `fd` for the next program as `passed` says.
fn name_passed(fd: c_int, passed: Passed, of: &OpenFile) -> bool {
    match passed {
        Passed::Shared(h) => name_after(fd, h, None),
        Passed::Copied => name_copy(fd, of),
    }
}

/// The description a named placeholder stands for, and the ticket of the spawn that
/// handed it over if any: `/memfd:hashfs-ofd-I-G[-tT] (deleted)`.
fn named(link: &[u8]) -> Option<(Handle, Option<u32>)> {
    let s = std::str::from_utf8(link).ok()?.strip_prefix("/memfd:")?;
    Handle::from_handed_name(s.split(' ').next()?)
}

/// The memfd that passes the working directory inside the image to the next program (its
/// bytes are the directory's path in the image).
const CWD_NAME: &str = "hashfs-cwd";

/// A memfd named [`CWD_NAME`] holding `dir`, without close-on-exec, at a high number; -1 if
/// the kernel refused.
fn pass_cwd(dir: &Path) -> c_int {
    // SAFETY: a NUL-terminated name (CWD_NAME's); no close-on-exec: it is for the next
    // program.
    let m = unsafe { libc::memfd_create(c"hashfs-cwd".as_ptr(), 0) };
    if m < 0 {
        return -1;
    }
    let bytes = dir.as_os_str().as_bytes();
    let write = real!(write: fn(c_int, *const c_void, size_t) -> ssize_t);
    let fcntl = real!(fcntl: fn(c_int, c_int, libc::c_ulong) -> c_int);
    let close = real!(close: fn(c_int) -> c_int);
    // SAFETY: writes `bytes` to our memfd; moves it high (F_DUPFD keeps it open across exec).
    unsafe {
        if write(m, bytes.as_ptr().cast(), bytes.len()) != bytes.len() as ssize_t {
            close(m);
            return -1;
        }
        // (Below a descriptor limit under 900, wherever there is room: memfd_create's own
        // number has close-on-exec cleared already.)
        let high = fcntl(m, libc::F_DUPFD, 900);
        if high < 0 {
            return m;
        }
        close(m);
        high
    }
}

/// This process's pid, as its own memory has it (set as the shim loads and in a fork's
/// child): a `vfork` child, which runs in its parent's memory, finds its parent's here.
pub(super) static PROCESS_PID: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Standard descriptors named after their pumps' descriptions, with their files.
type Pumped = Vec<(c_int, Arc<OpenFile>)>;

/// What an exec prepared: undone if it fails.
struct Prepared {
    /// The participant's part (None: this program did not use the image).
    exec: Option<hashfs::Fork>,
    /// The memfd passing the working directory on (-1: none).
    cwd: c_int,
    /// This participant left the image before the exec (it had nothing to hand over).
    left: bool,
    /// Standard descriptors that were pumps' pipes, named now.
    pumped: Pumped,
    /// The memfd naming standard input's snapshot to the next program (-1: none).
    snapshot: c_int,
}

/// Before an exec, in the program that calls it.
pub(super) fn before_exec() -> Option<Box<dyn std::any::Any>> {
    // The working directory inside the image goes on whether or not this program used the
    // image itself (`env` exec'ing a shell from there), and from a `vfork` child too (gcc
    // starts cc1 so): system calls only, nothing allocated.
    let cwd = cwd::with_virtual_cwd(pass_cwd).unwrap_or(-1);
    if PROCESS_PID.load(Ordering::Relaxed) != current_pid() {
        // A vfork child: its memory, the shim's state included, is its parent's. (Its
        // memfd, if the exec fails, goes with the child.)
        return None;
    }
    let (exec, pumped, snapshot, left) = match prepare_descriptors() {
        Handover::Counted(exec, pumped, snapshot) => (Some(exec), pumped, snapshot, false),
        Handover::Left => (None, Vec::new(), -1, true),
        Handover::NotJoined => (None, Vec::new(), -1, false),
    };
    if exec.is_none() && !left && cwd < 0 {
        return None;
    }
    Some(Box::new(Prepared { exec, cwd, pumped, snapshot, left }))
}

/// What an exec does about the image.
enum Handover {
    /// Descriptors counted for the next program, which takes this participant's place
    /// (and the memfd naming standard input's snapshot to it, -1 if none).
    Counted(hashfs::Fork, Pumped, c_int),
    /// Nothing to hand over: this participant left the image (`leave_before_exec`).
    Left,
    /// This program did not use the image.
    NotJoined,
}

/// The shim's descriptors that an exec or a spawn keeps (without close-on-exec).
fn surviving(s: &Shim) -> Vec<(c_int, Arc<OpenFile>)> {
    let fcntl = real!(fcntl: fn(c_int, c_int, libc::c_ulong) -> c_int);
    // SAFETY: F_GETFD on a descriptor number; a closed one fails.
    let survives =
        |fd: c_int| matches!(unsafe { fcntl(fd, libc::F_GETFD, 0) }, f if f >= 0 && f & libc::FD_CLOEXEC == 0);
    s.fds.lock().iter().filter(|(&fd, _)| survives(fd)).map(|(&fd, of)| (fd, of.clone())).collect()
}

/// Whether a `vfork` child would need the shim's state as its own: this participant has
/// descriptors the shim serves, or pumps. The child runs in its parent's memory, where an
/// exec cannot hand descriptors over, and it may make a close-on-exec one inheritable or
/// put one on a standard descriptor before its exec (Python's subprocess with `pass_fds`,
/// or `stdout=` a file of the image: the output was lost and the parent aborted at exit
/// joining the pump thread its child had started), or close them one by one (Python's
/// does when `close_range` refuses, which took them out of the parent's table): so
/// `vfork` becomes `fork` then (`hashfs_interpose`'s `vfork`). Until 2026-12-05 only
/// descriptors without close-on-exec counted. gcc's `vfork` children, whose parent has
/// none, stay `vfork`s.
pub(super) fn vfork_needs_fork() -> bool {
    match (SHIM.get(), fork::joined_fs()) {
        (Some(s), Some(_)) => !s.fds.lock().is_empty() || !pump::PUMPS.lock().is_empty(),
        _ => false,
    }
}

/// The descriptors' part of an exec's preparation: the participant's, and the standard
/// descriptors named after their pumps' descriptions; with nothing to hand over, this
/// participant leaves the image now.
fn prepare_descriptors() -> Handover {
    let (Some(s), Some(fs)) = (SHIM.get(), fork::joined_fs()) else { return Handover::NotJoined };
    let moving = surviving(s);
    let mut pumped = Vec::new();
    let me = current_pid();
    // An input pump of the parent's stays with the parent (`hand_over_pumps`).
    for p in PUMPED.lock().iter().filter(|p| p.output || p.pid == me) {
        for fd in 0..=2 {
            if p.pipe != 0 && inode_of(fd) == Some(p.pipe) {
                pumped.push((fd, p.clone()));
            }
        }
    }
    // A snapshot on standard input stays there (the memfd, which the next program reads
    // as it is); its description is named to the next program (`snapshot.rs`).
    let snapshot = super::snapshot::handed_over();
    if moving.is_empty() && pumped.is_empty() && snapshot.is_none() {
        leave_before_exec();
        return Handover::Left;
    }
    // Each description once (descriptors dup'd from one another share one).
    let mut handles: Vec<Handle> = Vec::new();
    let mut of_handle = |of: &OpenFile| -> Option<Passed> {
        if fs.is_read_only() {
            return Some(Passed::Copied);
        }
        match of.pos.share(fs, of.ino, of.flags.load(Ordering::Relaxed)) {
            Ok(Some(h)) => {
                if !handles.contains(&h) {
                    handles.push(h);
                }
                Some(Passed::Shared(h))
            }
            Ok(None) => None,
            Err(e) => {
                eprintln!("hashfs_preload: a descriptor cannot pass to the exec'd program: {e}");
                None
            }
        }
    };
    let moving: Vec<(c_int, Arc<OpenFile>, Passed)> =
        moving.into_iter().filter_map(|(fd, of)| of_handle(&of).map(|h| (fd, of, h))).collect();
    let pumped: Vec<(c_int, Arc<Pump>, Passed)> =
        pumped.into_iter().filter_map(|(fd, p)| of_handle(&p.of).map(|h| (fd, p, h))).collect();
    let snapshot = snapshot.and_then(|(memfd, of)| of_handle(&of).map(|h| (memfd, of, h)));
    let Some(exec) = fs.prepare_exec(&handles) else { return Handover::NotJoined };
    for (fd, of, passed) in &moving {
        if !name_passed(*fd, *passed, of) {
            eprintln!("hashfs_preload: descriptor {fd} cannot pass to the exec'd program (memfd refused)");
        }
    }
    hand_over_pumps(&pumped);
    let mut pumped: Pumped = pumped.into_iter().map(|(fd, p, _)| (fd, p.of.clone())).collect();
    let named = match snapshot {
        Some((memfd, _, Passed::Shared(h))) => pass_pump(0, memfd, h, None).unwrap_or(-1),
        Some((_, of, Passed::Copied)) => {
            // A read-only participant's: a copy, which the next program snapshots again.
            name_copy(0, &of);
            pumped.push((0, of));
            -1
        }
        None => -1,
    };
    Handover::Counted(exec, pumped, named)
}

/// The standard descriptors that are pumps' pipes become named placeholders: an output
/// pump writes what its pipe still holds into the file first; an input pump stops, and the
/// bytes it put in the pipe that the program has not read go back to the offset.
fn hand_over_pumps(pumped: &[(c_int, Arc<Pump>, Passed)]) {
    let fcntl = real!(fcntl: fn(c_int, c_int, libc::c_ulong) -> c_int);
    let read = real!(read: fn(c_int, *mut c_void, size_t) -> ssize_t);
    let me = current_pid();
    for (fd, p, h) in pumped {
        if p.pid != me {
            // A forked child's copy of its parent's pipe: the parent's pump goes on with
            // what the parent writes; the child's end becomes the description's (an input
            // pipe stays: parent and child read one stream).
            if p.output {
                name_passed(*fd, *h, &p.of);
            }
            continue;
        }
        if p.output {
            let thread = take_pump(*fd);
            name_passed(*fd, *h, &p.of); // closes this end of the pipe: the pump reads to its end
            settle_pump(thread, *fd);
            continue;
        }
        p.stop.store(true, Ordering::Release);
        // SAFETY: F_SETFL on our pipe's read end, which is replaced below.
        unsafe { fcntl(*fd, libc::F_SETFL, libc::O_NONBLOCK as libc::c_ulong) };
        let mut drained = 0u64;
        let mut buf = [0u8; 16 * 1024];
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        loop {
            // SAFETY: buf is valid for its length.
            let n = unsafe { read(*fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n > 0 {
                drained += n as u64;
                continue;
            }
            if n == 0 || p.done.load(Ordering::Acquire) || std::time::Instant::now() > deadline {
                break;
            }
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
        {
            let mut at = p.of.pos.lock();
            *at = at.saturating_sub(drained);
        }
        name_passed(*fd, *h, &p.of);
    }
}

/// What a `posix_spawn` prepared: the working directory's memfd (closed in the parent
/// once the child has its copy) and the descriptors' counts.
struct Spawned {
    cwd: c_int,
    spawn: Option<hashfs::Fork>,
    /// The memfds naming the pumps' pipes the program inherits ([`pumps_for_spawn`]).
    passed: Vec<c_int>,
}

thread_local! {
    /// The directory in the image the next spawn on this thread starts its child in, when
    /// its file actions change into one (`Process::spawn_in`).
    static SPAWN_IN: std::cell::RefCell<Option<PathBuf>> = const { std::cell::RefCell::new(None) };
}

pub(super) fn spawn_in(dir: Option<PathBuf>) {
    SPAWN_IN.with(|d| *d.borrow_mut() = dir);
}

/// Before `posix_spawn`: the child's program inherits the working directory inside the
/// image and the HashFS descriptors without close-on-exec, as after an exec (their
/// placeholders named after their descriptions, counted for it); the parent keeps them.
/// A redirected standard output stays its pump's pipe, but the program, if it joins, puts
/// a pump of its own on it ([`pumps_for_spawn`]).
pub(super) fn before_spawn(known: ChildKnown) -> Option<Box<dyn std::any::Any>> {
    let cwd = match SPAWN_IN.with(|d| d.borrow().clone()) {
        Some(dir) => pass_cwd(&dir),
        None => cwd::with_virtual_cwd(pass_cwd).unwrap_or(-1),
    };
    // A ticket where the call tells the child's pid, or that it has ended (`system`):
    // where it tells neither (a `popen` that cannot read the thread's children), its
    // program uncounts itself.
    let (spawn, passed) = spawn_descriptors(known != ChildKnown::Nothing);
    if cwd < 0 && spawn.is_none() {
        return None;
    }
    Some(Box::new(Spawned { cwd, spawn, passed }))
}

/// The descriptors a spawn's program inherits, counted for it and named after their
/// descriptions and the spawn's ticket, if it takes one (`hashfs::Fork::ticket`). Each is
/// named after the counts are made, so that every name carries the ticket: a descriptor
/// the kernel refuses to name (out of descriptors) is not the program's, and its
/// description's count stays until the next first mount, as a program's that never joins.
fn spawn_descriptors(ticket: bool) -> (Option<hashfs::Fork>, Vec<c_int>) {
    let (Some(s), Some(fs)) = (SHIM.get(), fork::joined_fs()) else { return (None, Vec::new()) };
    let moving = surviving(s);
    let mut shared = Vec::new();
    for (fd, of) in moving {
        if fs.is_read_only() {
            name_copy(fd, &of);
        } else if let Ok(Some(h)) = of.pos.share(fs, of.ino, of.flags.load(Ordering::Relaxed)) {
            shared.push((fd, h));
        }
    }
    let pumps = if fs.is_read_only() { Vec::new() } else { pumps_for_spawn(fs) };
    let mut handles: Vec<Handle> = shared.iter().map(|&(_, h)| h).chain(pumps.iter().map(|&(_, h)| h)).collect();
    handles.sort_by_key(|h| (h.index, h.generation));
    handles.dedup();
    if handles.is_empty() {
        return (None, Vec::new());
    }
    let Some(spawn) = fs.prepare_spawn(&handles, ticket) else { return (None, Vec::new()) };
    for (fd, h) in shared {
        name_after(fd, h, spawn.ticket());
    }
    let passed = pumps.iter().filter_map(|&((fd, pipe), h)| pass_pump(fd, pipe, h, spawn.ticket())).collect();
    (Some(spawn), passed)
}

/// This process's standard output descriptors (1, 2) that are its output pumps' pipes, each
/// with its pipe's inode and its description (shared now). A program a spawn starts
/// inherits them as they are, the pipes; named to it ([`pass_pump`]), it puts a pump of its
/// own on each as it joins, so that it no longer writes through this process's thread.
/// Before 2026-12-07 it did, and this process's exit waited for the program's end (a
/// program a server started in the background held its exit for as long as it ran).
fn pumps_for_spawn(fs: &FileSystem<MmapDevice>) -> Vec<((c_int, u64), Handle)> {
    let me = current_pid();
    let mine: Vec<Arc<Pump>> = PUMPED.lock().iter().filter(|p| p.output && p.pid == me).cloned().collect();
    let mut got = Vec::new();
    // A snapshot on standard input stays the memfd it is; the program adopts its
    // description as it joins (`snapshot.rs`).
    if let Some((memfd, of)) = super::snapshot::handed_over() {
        if let Ok(Some(h)) = of.pos.share(fs, of.ino, of.flags.load(Ordering::Relaxed)) {
            got.push(((0, memfd), h));
        }
    }
    for fd in 1..=2 {
        let Some(pipe) = inode_of(fd) else { continue };
        if got.iter().any(|&((_, named), _)| named == pipe) {
            continue; // `2>&1`: the program puts its pump on both
        }
        let Some(p) = mine.iter().find(|p| p.pipe == pipe) else { continue };
        if let Ok(Some(h)) = p.of.pos.share(fs, p.of.ino, p.of.flags.load(Ordering::Relaxed)) {
            got.push(((fd, pipe), h));
        }
    }
    got
}

/// A memfd, inherited by the spawn's program, that tells it standard descriptor `fd` is
/// pipe `pipe` of a pump of description `h` (`hashfs-pump-<fd>-<pipe>-hashfs-ofd-...`, the
/// spawn's ticket in it): its number, for the parent to close once the spawn returned, or
/// None if the kernel refused one (the program then writes through this process's pump).
fn pass_pump(fd: c_int, pipe: u64, h: Handle, ticket: Option<u32>) -> Option<c_int> {
    let name = CString::new(format!("{PUMP_NAME}{fd}-{pipe}-{}", h.handed_name(ticket))).ok()?;
    // SAFETY: a NUL-terminated name; no close-on-exec: it is for the program.
    let m = unsafe { libc::memfd_create(name.as_ptr(), 0) };
    // A standard descriptor the program had closed stays closed for the next program (which
    // the shim may not load): the name goes from 3 up.
    super::snapshot::above_standard(m, libc::F_DUPFD)
}

/// The beginning of the name [`pass_pump`] gives.
const PUMP_NAME: &str = "hashfs-pump-";

/// A standard descriptor a spawn's parent named to this program as its pump's pipe
/// ([`pass_pump`]): the descriptor, and the description, if the descriptor is that pipe
/// still (the spawn's file actions may have put something else there: the description,
/// counted for this program all the same, is then adopted and let go, -1).
fn named_pump(link: &[u8]) -> Option<(c_int, u64, Handle, Option<u32>)> {
    let s = std::str::from_utf8(link).ok()?.strip_prefix("/memfd:")?.split(' ').next()?;
    let mut parts = s.strip_prefix(PUMP_NAME)?.splitn(3, '-');
    let fd: c_int = parts.next()?.parse().ok()?;
    let pipe: u64 = parts.next()?.parse().ok()?;
    let (h, ticket) = Handle::from_handed_name(parts.next()?)?;
    let fd = if (0..=2).contains(&fd) && inode_of(fd) == Some(pipe) { fd } else { -1 };
    Some((fd, pipe, h, ticket))
}

/// Whether a spawn made a child (its pid, where the call told it).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Spawn {
    Started(Child),
    Failed,
}

/// After `posix_spawn`, in the parent.
pub(super) fn after_spawn(prepared: Option<Box<dyn std::any::Any>>, outcome: Spawn) {
    let Some(p) = prepared.and_then(|p| p.downcast::<Spawned>().ok()) else { return };
    for &m in p.passed.iter().chain((p.cwd >= 0).then_some(&p.cwd)) {
        // SAFETY: our memfd; the child has its own copy.
        unsafe { real!(close: fn(c_int) -> c_int)(m) };
    }
    match (outcome, fork::joined_fs(), p.spawn) {
        (Spawn::Failed, Some(fs), Some(spawn)) => fs.spawn_failed(spawn),
        // Its program counts as on its way until it has opened what it adopted; one that
        // never joins (it does not load the shim) is uncounted once it has ended.
        (Spawn::Started(Child::Pid(child)), Some(fs), Some(spawn)) => fs.spawned(spawn, child),
        // `system` returned, or `popen`'s child was reaped already: its program has ended,
        // whether it joined or not.
        (Spawn::Started(Child::Ended), Some(fs), Some(spawn)) => fs.spawn_ended(spawn),
        // A ticket that stays the parent's is taken once the parent has ended; without one,
        // the program uncounts itself.
        _ => {}
    }
}

/// The exec failed: the participant stays, the counts go, and the standard descriptors
/// named for the next program are pumps again. (Other named placeholders serve as before.)
pub(super) fn exec_failed(prepared: Option<Box<dyn std::any::Any>>) {
    let Some(p) = prepared.and_then(|p| p.downcast::<Prepared>().ok()) else { return };
    if let (Some(fs), Some(exec)) = (fork::joined_fs(), p.exec) {
        fs.exec_failed(exec);
    }
    if p.left {
        eprintln!("hashfs_preload: an exec failed after this process had left the image; its paths fail with EIO");
    }
    for m in [p.cwd, p.snapshot].into_iter().filter(|&m| m >= 0) {
        // SAFETY: our memfd, for an exec that did not happen.
        unsafe { real!(close: fn(c_int) -> c_int)(m) };
    }
    for (fd, of) in p.pumped {
        start_pump(of, fd);
    }
}

/// A descriptor a read-only participant passed on as a copy: its inode, flags, offset.
type Copy = (c_int, (Ino, c_int, u64));

/// What this program inherited across an exec or spawn.
#[derive(Default)]
struct Inherited {
    /// Its descriptors' descriptions.
    found: Vec<(c_int, Handle)>,
    /// The ticket of the spawn that started it, which its descriptors' names carry (any
    /// one of them: two spawns at once may each have renamed them; a ticket is taken once,
    /// whoever takes it, `FileSystem::inherited_opened`).
    ticket: Option<u32>,
    /// A read-only participant's descriptors, passed as copies.
    copies: Vec<Copy>,
    /// The working directory inside the image (its memfd is read and closed here).
    cwd: Option<PathBuf>,
    /// Standard descriptors that are the spawn's parent's pumps' pipes, with each pipe's
    /// inode ([`named_pump`]).
    pipes: Vec<(c_int, u64)>,
}

fn inherited() -> Inherited {
    let mut got = Inherited::default();
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else { return got };
    for e in dir.flatten() {
        let Some(fd) = e.file_name().to_str().and_then(|n| n.parse::<c_int>().ok()) else { continue };
        let Ok(link) = std::fs::read_link(e.path()) else { continue };
        let link = link.as_os_str().as_bytes();
        if let Some((h, ticket)) = named(link) {
            got.found.push((fd, h));
            got.ticket = got.ticket.or(ticket);
        } else if let Some((on, pipe, h, ticket)) = named_pump(link) {
            got.found.push((on, h));
            if on >= 0 {
                got.pipes.push((on, pipe));
            }
            got.ticket = got.ticket.or(ticket);
            // SAFETY: the parent's memfd, read by its name; this program's to close.
            unsafe { real!(close: fn(c_int) -> c_int)(fd) };
        } else if let Some(c) = named_copy(link) {
            got.copies.push((fd, c));
        } else if link.starts_with(format!("/memfd:{CWD_NAME} ").as_bytes()) {
            got.cwd = read_cwd(fd);
        }
    }
    got
}

/// The directory a [`pass_cwd`] memfd holds; the descriptor is closed.
fn read_cwd(fd: c_int) -> Option<PathBuf> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    let pread = real!(pread: fn(c_int, *mut c_void, size_t, off_t) -> ssize_t);
    // SAFETY: reads into buf, within its length; then closes the inherited memfd.
    let n = unsafe {
        let n = pread(fd, buf.as_mut_ptr().cast(), buf.len(), 0);
        real!(close: fn(c_int) -> c_int)(fd);
        n
    };
    (n > 0).then(|| PathBuf::from(std::ffi::OsStr::from_bytes(&buf[..n as usize])))
}

/// As the shim loads, before `main`: serves the HashFS descriptors the program before the
/// exec left (nothing to do, and no mount, when there are none).
extern "C" fn adopt_at_start() {
    PROCESS_PID.store(current_pid(), Ordering::Relaxed);
    // SAFETY: registering a plain function to run in every fork's child (the shim's exit
    // work is the library's destructor, AT_EXIT).
    unsafe { libc::pthread_atfork(None, None, Some(after_fork_in_child)) };
    guarded(|| {
        // A program started with libraries of the image: its environment as it was given.
        hashfs_interpose::entry::linked::at_start();
        if prefix_bytes().is_none() {
            return;
        }
        let Inherited { found, ticket, copies, cwd, pipes } = inherited();
        if let Some(dir) = cwd {
            cwd::inherit_cwd(dir);
        }
        if found.is_empty() && copies.is_empty() {
            return;
        }
        let s = shim();
        let Ok(fs) = s.fs() else { return };
        for (fd, (ino, flags, at)) in copies {
            match open_inherited(fs, ino, flags, fork::Position::at(at)) {
                Ok(of) if (0..=2).contains(&fd) && of.file.is_some() => {
                    start_pump(of, fd);
                }
                Ok(of) => {
                    s.fds.lock().insert(fd, of);
                    s.mark(fd);
                }
                Err(e) => eprintln!("hashfs_preload: an inherited descriptor cannot be opened again: {e}"),
            }
        }
        if found.is_empty() {
            return;
        }
        let mut handles: Vec<Handle> = found.iter().map(|&(_, h)| h).collect();
        handles.sort_by_key(|h| (h.index, h.generation));
        handles.dedup();
        let infos = fs.adopt_inherited(&handles);
        // None for each when a first mount cleared the handover (and its count).
        let adopted = infos.iter().any(Option::is_some);
        let mut files: HashMap<(u32, u64), Arc<OpenFile>> = HashMap::new();
        for (h, info) in handles.iter().zip(infos) {
            let Some((ino, flags)) = info else {
                eprintln!("hashfs_preload: an inherited descriptor's open file is gone; its uses fail with EBADF");
                continue;
            };
            match open_adopted(fs, *h, ino, flags as c_int) {
                Ok(of) => {
                    files.insert((h.index, h.generation), of);
                }
                Err(e) => eprintln!("hashfs_preload: an inherited descriptor cannot be opened again: {e}"),
            }
        }
        if adopted {
            fs.inherited_opened(ticket);
        }
        for (fd, h) in found {
            let Some(of) = files.get(&(h.index, h.generation)) else { continue };
            if fd < 0 {
                continue; // a pump's pipe the spawn's file actions replaced: let go
            }
            if fd == 0 && pipes.iter().any(|&(on, memfd)| on == 0 && super::snapshot::adopt(of, memfd)) {
                // A snapshot its parent named: it stays, and stands for the file here too.
            } else if (0..=2).contains(&fd) && of.file.is_some() {
                start_pump(of.clone(), fd);
            } else {
                s.fds.lock().insert(fd, of.clone());
                s.mark(fd);
            }
        }
        // `2>&1` in the parent: one pipe on both, so one pump on both here too.
        for (fd, pipe) in pipes.into_iter().filter(|&(fd, _)| fd != 0) {
            pump::pump_its_copy(fd, pipe);
        }
    });
}

/// The open file of an inherited description: its inode opened with its access mode.
fn open_adopted(fs: &FileSystem<MmapDevice>, h: Handle, ino: Ino, flags: c_int) -> hashfs::Result<Arc<OpenFile>> {
    open_inherited(fs, ino, flags, fork::Position::adopted(h))
}

/// The open file of an inherited descriptor: its inode opened with its access mode, at `pos`.
fn open_inherited(
    fs: &FileSystem<MmapDevice>,
    ino: Ino,
    flags: c_int,
    pos: fork::Position,
) -> hashfs::Result<Arc<OpenFile>> {
    let acc = flags & libc::O_ACCMODE;
    let access = Access {
        read: acc == libc::O_RDONLY || acc == libc::O_RDWR,
        write: acc == libc::O_WRONLY || acc == libc::O_RDWR,
        append: flags & libc::O_APPEND != 0,
    };
    let file = if fs.peek_attr(ino)?.is_dir() { None } else { Some(fs.open_ino(ino, access)?) };
    Ok(Arc::new(OpenFile {
        file,
        ino,
        // Its name is not known here (it may have been renamed or unlinked since).
        fs_path: prefix().map(Path::to_path_buf).unwrap_or_default(),
        pos,
        flags: std::sync::atomic::AtomicI32::new(flags),
        lock_owner: OnceLock::new(),
        found_at: Mutex::new(None),
    }))
}

#[used]
#[link_section = ".init_array"]
static ADOPT_AT_START: extern "C" fn() = adopt_at_start;
