//! Pumps: a standard descriptor redirected to a HashFS file (dup2 onto 0, 1 or 2) becomes
//! a pipe that a thread pumps into (or out of) the file, because glibc's stdio writes it
//! with its internal `write`, which no preload can see. A fork and an exec find the pumps
//! here (`Pump`): a fork waits until each output pump of this process has written all its
//! pipe held, so that the child's writes land after the parent's (`drained_for_fork`), and
//! an exec hands a pump's descriptor to the next program (`exec.rs`).

use super::*;
use std::sync::atomic::AtomicBool;

/// A pump, as a fork or an exec finds it.
pub(super) struct Pump {
    pub(super) of: Arc<OpenFile>,
    pub(super) output: bool,
    /// The process whose thread it is (a forked child has the record, not the thread).
    pub(super) pid: i32,
    /// The pump's own end of the pipe, and the pipe's inode (the standard descriptors that
    /// are this pump's).
    end: c_int,
    pub(super) pipe: u64,
    /// The standard descriptor it serves (for its messages).
    target: c_int,
    /// An input pump stops before its next read (an exec takes over the rest).
    pub(super) stop: AtomicBool,
    pub(super) done: AtomicBool,
    /// An output pump's thread has closed its end (set under the file's position, as it
    /// closes it): [`written_out`] no longer reads it.
    ended: AtomicBool,
}

/// The ends of this process's pumps' pipes in [first, last] (`close_range` keeps them).
pub(super) fn own_ends_in(first: c_uint, last: c_uint) -> Vec<c_int> {
    let pumped = PUMPED.lock();
    let in_range = |p: &&Arc<Pump>| p.end >= 0 && (first..=last).contains(&(p.end as c_uint));
    if !pumped.iter().any(|p| in_range(&p)) {
        return Vec::new(); // without the pid's system call (every close from 100 up asks)
    }
    let me = current_pid();
    let mut ends: Vec<c_int> = pumped.iter().filter(in_range).filter(|p| p.pid == me).map(|p| p.end).collect();
    ends.sort_unstable();
    ends.dedup();
    ends
}

/// A pump, as its thread refers to it (owned by [`PUMPED`]).
struct PumpAt(*const Pump);

// SAFETY: the pump is Sync (atomics, an Arc, plain numbers); the thread reads it through
// the pointer while `PUMPED` owns it.
unsafe impl Send for PumpAt {}

/// The live pumps (each owned here; its thread only borrows it).
pub(super) static PUMPED: Mutex<Vec<Arc<Pump>>> = Mutex::new(Vec::new());

/// The inode of what `fd` refers to, through the system call (no interposed libc).
pub(super) fn inode_of(fd: c_int) -> Option<u64> {
    kernel_stat(fd).map(|st| st.st_ino)
}

/// The kernel's fstat of `fd`, through the system call (no interposed libc).
pub(super) fn kernel_stat(fd: c_int) -> Option<libc::stat> {
    // SAFETY: an all-zero stat is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat fills the struct it is given; a bad descriptor fails with EBADF.
    let r = unsafe { libc::syscall(libc::SYS_fstat, fd, &mut st) };
    (r == 0).then_some(st)
}

/// The standard descriptors that are pumps' pipes, each with its pipe's inode and its
/// file, for as long as it is (the descriptor holds its file open, as the kernel's would):
/// set by [`start_pump`], cleared when the descriptor is closed or replaced
/// ([`take_pump`]) and at exit ([`stop_input_pumps`]).
/// A snapshot on standard input (`snapshot.rs`) is here too.
pub(super) static STANDARD_FILES: Mutex<[Option<StandardFile>; 3]> = Mutex::new([None, None, None]);

/// A standard descriptor's object and the file it stands for.
#[derive(Clone)]
pub(super) struct StandardFile {
    /// The inode of the pipe a pump moves the file through, or of a snapshot's memfd.
    pub(super) object: u64,
    pub(super) of: Arc<OpenFile>,
    /// A snapshot's: its memfd's device (the offset is the memfd's, `snapshot::write_back`).
    pub(super) snapshot: Option<u64>,
}

/// The process leaves the image (exit, or an exec that hands nothing over): the standard
/// descriptors no longer hold their files (a snapshot's offset written back first).
pub(super) fn forget_standard_files() {
    // Dropped after the lock: a file's last close enters the file system, whose wait for
    // the image lock may read /proc (a reader's liveness), and that close comes back here
    // (`take_pump`), which deadlocked a process at exit, found by
    // `programs_share_an_image_of_the_regions_placement`.
    let files = std::mem::take(&mut *STANDARD_FILES.lock());
    for (fd, sf) in (0..).zip(files.iter()) {
        if let Some(sf) = sf {
            super::snapshot::write_back(fd, sf);
        }
    }
    drop(files);
}

/// Standard descriptor `fd` is about to be replaced or closed: it no longer holds its file
/// (a snapshot's offset written back first).
pub(super) fn forget_standard(fd: c_int) {
    let Some(slot) = usize::try_from(fd).ok().filter(|&i| i < 3) else { return };
    let taken = STANDARD_FILES.lock()[slot].take();
    if let Some(sf) = &taken {
        super::snapshot::write_back(fd, sf);
    }
    drop(taken); // the descriptor no longer holds its file (outside the lock)
}

/// The file that standard descriptor `fd` stands for, if it is a pump's pipe, for the
/// calls on the file's attributes rather than its bytes (futimens, fchmod, fchown, the f*xattr
/// calls; `meta::fd_target`): `touch` reopens its file onto standard input and sets its
/// times there. fstat answers the file for an output pump and a snapshot ([`stat_file`]).
pub(super) fn pumped_file(fd: c_int) -> Option<Arc<OpenFile>> {
    let slot = usize::try_from(fd).ok().filter(|&i| i < 3)?;
    let files = STANDARD_FILES.lock();
    let sf = files[slot].as_ref()?;
    (inode_of(fd) == Some(sf.object)).then(|| sf.of.clone())
}

/// At exit: this process's input pumps stop, and the standard descriptors that are their
/// pipes' read ends are closed (a pump blocked on a full pipe then gets EPIPE: its thread
/// blocks SIGPIPE), so that their threads end and let go of their files before the image
/// is left (a file still open keeps it from being marked clean).
pub(super) fn stop_input_pumps() {
    forget_standard_files();
    let me = current_pid();
    let pumps: Vec<Arc<Pump>> = PUMPED.lock().iter().filter(|p| !p.output && p.pid == me).cloned().collect();
    let close = real!(close: fn(c_int) -> c_int);
    for p in &pumps {
        p.stop.store(true, Ordering::Release);
        for fd in 0..=2 {
            if p.pipe != 0 && inode_of(fd) == Some(p.pipe) {
                // SAFETY: the process's end of our pipe, at exit.
                unsafe { close(fd) };
            }
        }
    }
}

/// Before a fork, with `of`'s position held by the caller: if `of` is an output pump's
/// file in this process, waits (a second at most) until its pipe is empty, the position
/// let go meanwhile so that the pump can write. A pump reads its pipe only while it holds
/// the position, so an empty pipe under the held position means all was written.
pub(super) fn drained_for_fork<'a>(
    of: &'a Arc<OpenFile>,
    held: hashfs::ForkMutexGuard<'a, u64>,
) -> hashfs::ForkMutexGuard<'a, u64> {
    let me = current_pid();
    let Some(end) = PUMPED.lock().iter().find(|p| p.output && p.pid == me && Arc::ptr_eq(&p.of, of)).map(|p| p.end)
    else {
        return held;
    };
    let mut held = held;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    loop {
        let mut queued: c_int = 0;
        // SAFETY: FIONREAD stores the pipe's byte count in `queued`.
        let r = unsafe { libc::ioctl(end, libc::FIONREAD, &mut queued) };
        if r != 0 || queued == 0 || std::time::Instant::now() > deadline {
            return held;
        }
        drop(held);
        std::thread::sleep(std::time::Duration::from_micros(100));
        held = of.pos.local_lock();
    }
}

/// Before this process leaves the image: the pumps that went on without a descriptor
/// ([`settle_pump`]) end as their pipes' last writers go (an exec's leaving comes right after
/// a shell's `cmd > f` was undone, whose pump is reading its last bytes); each is waited for
/// ([`wait_for_output_pump`]), so that its file is closed when the image is.
pub(super) fn finish_detached() {
    let detached: Vec<_> = {
        let mut pumps = PUMPS.lock();
        let (gone, kept) = std::mem::take(&mut *pumps).into_iter().partition(|(fd, _, _)| *fd < -1);
        *pumps = kept;
        gone
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    for (_, pipe, h) in detached {
        wait_for_output_pump(pipe, h, deadline);
    }
}

/// Waits for an output pump of this process, on pipe `pipe`, that is not on a descriptor
/// any more, and joins it if it ended: until `deadline` while another process may still
/// write its pipe (a program that does not load the shim, holding a copy), but up to ten
/// seconds once no one can (the pipe is hung up): its thread then only has to be given a
/// CPU to end. On a loaded machine a second was not always enough, and the process left
/// the image with the pump's file open: "image not marked clean at exit: device or
/// resource busy" (`exec.rs::a_shell_with_its_output_in_the_image_redirects_again`, once
/// in a quick tier beside other builds, 2026-12-07).
pub(super) fn wait_for_output_pump(pipe: u64, h: super::workers::Running, deadline: std::time::Instant) {
    let until = if !h.is_finished() && writers_gone(pipe) {
        deadline.max(std::time::Instant::now() + std::time::Duration::from_secs(10))
    } else {
        deadline
    };
    let _ = h.join_by(until); // one that goes on is let go (its pipe's other writer has it)
}

/// Whether no process can write the pipe of this process's output pump on `pipe` any
/// more: its end hung up (POLLHUP), or the pump already closed it.
fn writers_gone(pipe: u64) -> bool {
    let me = current_pid();
    let Some(p) = PUMPED.lock().iter().find(|p| p.output && p.pid == me && p.pipe == pipe).cloned() else {
        return true; // its record gone: the pump has ended
    };
    if p.ended.load(Ordering::Acquire) {
        return true;
    }
    let mut at = libc::pollfd { fd: p.end, events: libc::POLLIN, revents: 0 };
    // SAFETY: one pollfd, no wait.
    let r = unsafe { libc::poll(&mut at, 1, 0) };
    r > 0 && at.revents & (libc::POLLHUP | libc::POLLNVAL) != 0
}

/// Before an exec that leaves the image (`leave_before_exec`): this process's close-on-exec
/// copies of the write ends of the pipes of pumps that went on without a descriptor
/// ([`settle_pump`]) are closed now, as the exec would close them, so that those pumps
/// reach their pipes' ends and [`finish_detached`] need not wait its second for them.
/// dash keeps such a copy of a standard descriptor it replaces to put it back
/// (`sh -c 'm4 --help 2>&1 | grep x'`: the copy of standard error in the child that execs
/// m4); before 2026-12-07 each such exec waited a second, and autoconf's `autoreconf`, which
/// runs a dozen of them, took 13.4 s through the shim (2.3 s since, 1.9 s on tmpfs:
/// `bench/results/shared/shim-redirections.json`). A copy without
/// close-on-exec stays for the next program, and the wait with it.
pub(super) fn close_exec_write_ends() {
    let pipes: Vec<u64> = PUMPS.lock().iter().filter(|(fd, _, _)| *fd < -1).map(|&(_, pipe, _)| pipe).collect();
    close_write_ends(&pipes, true);
}

/// After `dup2(copy, target)` of a kernel descriptor onto a standard one: if `target` is
/// now the pipe of an output pump of this process that went on without a descriptor (a
/// shell restoring its standard output from the copy it kept), that pump serves `target`
/// again: its file stands for it (the calls on its attributes, `pumped_file`) and the next
/// replacement of `target` settles it (`take_pump`). Before 2026-12-07, without this the
/// exit waited a second for the pump and could not leave the image (EBUSY); since, the exit
/// closes every write end of such a pump's pipe (`close_write_ends`), and no test tells
/// whether a restored descriptor rejoined its pump (its deliberate bug was retired).
pub(super) fn rejoin(target: c_int) {
    let Some(pipe) = inode_of(target) else { return };
    let me = current_pid();
    let Some(of) = PUMPED.lock().iter().find(|p| p.output && p.pid == me && p.pipe == pipe).map(|p| p.of.clone())
    else {
        return;
    };
    let mut pumps = PUMPS.lock();
    let Some(entry) = pumps.iter_mut().find(|(fd, p, _)| *fd < -1 && *p == pipe) else { return };
    entry.0 = target;
    drop(pumps);
    if let Some(slot) = STANDARD_FILES.lock().get_mut(target as usize) {
        *slot = Some(StandardFile { object: pipe, of, snapshot: None });
    }
}

/// lseek on standard descriptor `fd` when an output pump of this process writes its pipe
/// into a file: what the pipe holds is written first (as for a fork), then the position
/// the pump writes at moves (dd's `seek=` on the output it reopens onto standard output).
/// None for any other descriptor: a snapshot's memfd is sought by the kernel, and an input
/// pump's pipe holds bytes read ahead, so a seek on it stays the kernel's ESPIPE (dd's
/// `skip=` reads past them instead).
pub(super) fn seek_pumped(fd: c_int, off: libc::off_t, whence: c_int) -> Option<Result<i64, c_int>> {
    let of = output_pumped(fd)?;
    drop(written_out(&of));
    Some(super::io::seek_in(&of, off, whence))
}

/// ftruncate on standard descriptor `fd` when an output pump of this process writes its
/// pipe into a file: what the pipe holds is written first, then the file's length is set
/// (dd truncates its output at `seek=`). None for any other descriptor (the kernel's).
pub(super) fn truncate_pumped(fd: c_int, len: libc::off_t) -> Option<Result<(), c_int>> {
    let of = output_pumped(fd)?;
    let held = written_out(&of);
    let file = of.file.as_ref()?;
    let r = (|| {
        if len < 0 {
            return Err(libc::EINVAL);
        }
        // Shrinking under a shared mapping would leave it on freed blocks (as `truncate_fd`).
        if super::is_mapped(of.ino) && (len as u64) < file.metadata().map_err(|e| e.errno())?.size {
            return Err(libc::EBUSY);
        }
        file.set_len(len as u64).map_err(|e| e.errno())?;
        super::mmap::file_changed(&of, 0, 0);
        Ok(())
    })();
    drop(held);
    Some(r)
}

/// The file whose attributes fstat of standard descriptor `fd` answers (and a stat of
/// its links, `/dev/stdout`, `/proc/self/fd/1`): the file an output pump of this process
/// writes its pipe into, once the pipe is written out (its size is what was written). A
/// program learns there that its output is a regular file, and which: GNU cat refuses to
/// copy a file onto itself (`cat f >> f`), tar to put its archive in itself, and `[ -f
/// /dev/stdout ]` holds, as on Linux; the calls a regular output takes beyond writes
/// (lseek, ftruncate, the syncs, the attribute calls) act on the file. Before 2026-12-07
/// fstat answered the pipe, and `cat f >> f` through the shim appended f to itself until
/// the image was full. A snapshot on standard input (`snapshot.rs`) answers its file too;
/// an input pump's descriptor (a file over 16 MiB, `0<> f`) still answers its pipe: its
/// bytes are read ahead, and a program that saw a regular file would seek it (`head -c
/// -N` fails where lseek does).
pub(super) fn stat_file(fd: c_int) -> Option<Arc<OpenFile>> {
    let Some(of) = output_pumped(fd) else { return super::snapshot::on(fd) };
    drop(written_out(&of));
    Some(of)
}

/// The file an output pump of this process writes standard descriptor `fd`'s pipe into.
fn output_pumped(fd: c_int) -> Option<Arc<OpenFile>> {
    let of = pumped_file(fd)?;
    let me = current_pid();
    PUMPED.lock().iter().any(|p| p.output && p.pid == me && Arc::ptr_eq(&p.of, &of)).then_some(of)
}

/// `of`'s position, held, once what this process's output pump of `of` (if any) had in its
/// pipe is in the file: written here, by the caller, as the pump's thread would (the
/// thread reads its pipe only under the position, so the two never interleave). Before
/// 2026-12-07 the caller slept until the thread had done it (`drained_for_fork`, as a
/// fork still does), and a shell's `echo x >> f` (a pump started for the redirection, its
/// pipe written out when standard output is put back) took 231 us, most of it waiting for
/// the new thread to be scheduled (50 us since; 33 us once pumps ran on a pool of threads,
/// `workers.rs`).
fn written_out(of: &Arc<OpenFile>) -> super::fork::PosGuard<'_> {
    let me = current_pid();
    let pump = PUMPED.lock().iter().find(|p| p.output && p.pid == me && Arc::ptr_eq(&p.of, of)).cloned();
    let mut pos = of.pos.lock();
    let (Some(p), Some(file)) = (pump, of.file.as_ref()) else { return pos };
    let readr = real!(read: fn(c_int, *mut c_void, size_t) -> ssize_t);
    let mut buf = [0u8; 16 * 1024];
    while !p.ended.load(Ordering::Acquire) {
        // SAFETY: buf is valid for its length; the pump's end is open until `ended` is set,
        // which its thread does under the position we hold.
        let n = unsafe { readr(p.end, buf.as_mut_ptr() as *mut c_void, buf.len()) };
        if n <= 0 {
            break; // empty (EAGAIN: the end is non-blocking), or at its end
        }
        if !pump_into(of, file, &mut pos, &buf[..n as usize], p.target) {
            break;
        }
    }
    pos
}

/// Writes `bytes` a pump took from its pipe into `of`'s file at `pos` (at its end for an
/// appending description), moving `pos`; false (said on stderr) when the write failed.
fn pump_into(of: &OpenFile, file: &hashfs::File<MmapDevice>, pos: &mut u64, bytes: &[u8], target: c_int) -> bool {
    let written = if of.flags.load(Ordering::Relaxed) & libc::O_APPEND != 0 {
        file.append(bytes)
    } else {
        file.write_at(*pos, bytes).map(|k| (k, *pos + k as u64))
    };
    match written {
        Ok((_, end)) => {
            *pos = end;
            true
        }
        Err(e) => {
            eprintln!("hashfs_preload: write to redirected descriptor {target} failed: {e}");
            false
        }
    }
}

/// A sync of a standard descriptor that stands for `of`: once its output pump (if any) has
/// written all its pipe held, as for a fork, the file's.
pub(super) fn sync_pumped(of: &Arc<OpenFile>, scope: SyncScope) -> Result<(), c_int> {
    drop(written_out(of));
    let file = of.file.as_ref().ok_or(libc::EINVAL)?;
    file.sync(scope).map_err(|e| e.errno())
}

/// Standard descriptors redirected to HashFS files (dup2 onto 0, 1 or 2): glibc's stdio
/// writes them with its internal write, which no preload can see, so they become pipes that
/// a thread pumps into (or out of) the file.
pub(super) static PUMPS: Mutex<Vec<(c_int, u64, super::workers::Running)>> = Mutex::new(Vec::new());

/// A pump taken off its standard descriptor ([`take_pump`]): its thread and its pipe's inode.
pub(super) struct Taken {
    thread: super::workers::Running,
    pipe: Option<u64>,
}

/// Before `target` (a standard descriptor) is replaced or closed: the output pump feeding
/// the file from it, taken out of the list. After the replacement, [`settle_pump`] lets it
/// write what the pipe still holds, so that the file has the data before the program goes
/// on (a shell's `echo a > f; echo b >> f` must not race two pumps).
pub(super) fn take_pump(target: c_int) -> Option<Taken> {
    let pipe = inode_of(target);
    forget_standard(target);
    let mut pumps = PUMPS.lock();
    let i = pumps.iter().position(|(fd, _, _)| *fd == target)?;
    Some(Taken { thread: pumps.swap_remove(i).2, pipe })
}

/// Waits for a taken pump to reach the end of its pipe, at most a second (another copy of
/// the pipe's write end, such as `2>&1` made, keeps it open; the pump then finishes on its
/// own when that copy goes, and is joined at exit).
///
/// An output pump whose pipe another descriptor still writes (a shell keeps a copy of its
/// standard output to restore it after `cmd >> f`) does not end: it is settled once what
/// its pipe held is in the file (its pipe empty under the file's position, as for a fork),
/// and goes on. Before, every such redirection waited the whole second (a shell script run
/// after `exec > /pm/log` took a second per redirection).
pub(super) fn settle_pump(taken: Option<Taken>, target: c_int) {
    let Some(Taken { thread: h, pipe }) = taken else { return };
    let me = current_pid();
    let writing = pipe.and_then(|pipe| {
        PUMPED.lock().iter().find(|p| p.output && p.pid == me && p.pipe == pipe).map(|p| p.of.clone())
    });
    if let Some(of) = writing {
        drop(written_out(&of));
        if let Some(h) = h.join_by(std::time::Instant::now()) {
            // It ends with its pipe's last writer; joined at exit, or standard descriptor
            // `target` again if a copy of the pipe comes back onto it ([`rejoin`]).
            PUMPS.lock().push((-2 - target, pipe.unwrap_or(0), h));
        }
        return;
    }
    if let Some(h) = h.join_by(std::time::Instant::now() + std::time::Duration::from_secs(1)) {
        PUMPS.lock().push((-2 - target, pipe.unwrap_or(0), h)); // still writing: joined at exit, not closed there
    }
}

/// At exit: closes every descriptor of this process that is a write end of one of `pipes`
/// (output pumps'; their read ends, the pumps', stay), so that each pump reaches its pipe's
/// end unless another process writes it; before an exec, only the close-on-exec ones
/// (`close_on_exec_only`, [`close_exec_write_ends`]). One look through the descriptors for all.
pub(super) fn close_write_ends(pipes: &[u64], close_on_exec_only: bool) {
    if pipes.iter().all(|&p| p == 0) {
        return;
    }
    let (close, fcntl) = (real!(close: fn(c_int) -> c_int), real!(fcntl: fn(c_int, c_int, libc::c_ulong) -> c_int));
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else { return };
    let fds: Vec<c_int> = dir.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect();
    for fd in fds {
        // SAFETY: F_GETFD on a descriptor number; a closed one fails.
        if close_on_exec_only && unsafe { fcntl(fd, libc::F_GETFD, 0) } <= 0 {
            continue;
        }
        if write_end_of(fd).is_some_and(|i| i != 0 && pipes.contains(&i)) {
            // SAFETY: a write end of our pipe, at exit (or one the exec closes).
            unsafe { close(fd) };
        }
    }
}

/// The inode of what descriptor `fd` refers to, if it is open for writing only (a pipe's
/// write end, where it is a pipe's).
fn write_end_of(fd: c_int) -> Option<u64> {
    let fcntl = real!(fcntl: fn(c_int, c_int, libc::c_ulong) -> c_int);
    // SAFETY: F_GETFL on a descriptor number; a closed one fails.
    let flags = unsafe { fcntl(fd, libc::F_GETFL, 0) };
    (flags >= 0 && flags & libc::O_ACCMODE == libc::O_WRONLY).then(|| inode_of(fd)).flatten()
}

/// After a pump was put on standard output `fd` in place of pipe `pipe`: the other standard
/// output that was a copy of that pipe (`2>&1`) becomes a copy of `fd`, one pump for both.
pub(super) fn pump_its_copy(fd: c_int, pipe: u64) {
    let dup2 = real!(dup2: fn(c_int, c_int) -> c_int);
    for other in (1..=2).filter(|&o| o != fd && inode_of(o) == Some(pipe)) {
        // SAFETY: this process's descriptors; the kernel replaces `other`.
        unsafe { dup2(fd, other) };
    }
}

/// In a forked child that joined the image: each standard output descriptor that is its
/// parent's output pump's pipe gets a pump of the child's own (a new pipe onto it; the
/// description, which the fork shared, its file), one for a pipe that two of them share
/// (`2>&1`). Before 2026-12-07 the child wrote into its parent's pipe: the parent's exit
/// waited for the child's end, however long it ran (`exec > f; (sleep 60; echo) &` held
/// the shell for a minute, a background loop for good), and what the child wrote after its
/// parent's exec was lost (the thread that read the pipe was gone).
///
/// An input pump's pipe stays the parent's (one stream for both, as a shared offset gives),
/// but the child lets go of its copy of the pump's end, which it has no thread to write
/// through: it kept the pipe open, so a program reading it after the parent had gone waited
/// for ever (`exec < f; (sleep 1; wc -l) <&0 &` then exit: `wc` never ended).
pub(super) fn own_pumps_in_child() {
    let me = current_pid();
    // Not waited for: a thread of the parent's (a pump taking its record out as it ended)
    // may have held the list at the fork, and the child has no such thread to let it go.
    // Then the child writes through its parent's pipes, as before 2026-12-07.
    let Some(list) = PUMPED.try_lock() else { return };
    let parents: Vec<Arc<Pump>> = list.iter().filter(|p| p.pid != me).cloned().collect();
    drop(list);
    let close = real!(close: fn(c_int) -> c_int);
    for p in parents.iter().filter(|p| !p.output && p.end >= 0 && inode_of(p.end) == Some(p.pipe)) {
        // Its thread may have closed the number: only that pipe's write end goes.
        if write_end_of(p.end) == Some(p.pipe) {
            // SAFETY: this process's copy of the parent's pump end.
            unsafe { close(p.end) };
        }
    }
    if !parents.iter().any(|p| p.output) {
        return; // (a fork of a process with no output pump asks the kernel nothing more)
    }
    for fd in 1..=2 {
        let Some(pipe) = inode_of(fd) else { continue };
        let Some(p) = parents.iter().find(|p| p.output && p.pipe == pipe) else { continue };
        if start_pump(p.of.clone(), fd) >= 0 {
            pump_its_copy(fd, pipe);
        } else {
            eprintln!("hashfs_preload: this forked child's standard descriptor {fd} stays its parent's pipe (no pipe or thread)");
        }
    }
}

/// Puts `of`'s file on standard descriptor `target`: a snapshot for a read-only standard
/// input of at most 16 MiB (`snapshot.rs`), else a pipe and a pump; `target`, or -1 (errno
/// set) if the kernel refused a pipe.
pub(super) fn start_pump(of: Arc<OpenFile>, target: c_int) -> c_int {
    if target == 0 && super::snapshot::put(&of) {
        return target;
    }
    let pipe2 = real!(pipe2: fn(*mut c_int, c_int) -> c_int);
    let dup2r = real!(dup2: fn(c_int, c_int) -> c_int);
    let closer = real!(close: fn(c_int) -> c_int);
    let readr = real!(read: fn(c_int, *mut c_void, size_t) -> ssize_t);
    let writer = real!(write: fn(c_int, *const c_void, size_t) -> ssize_t);
    let mut fds = [0 as c_int; 2];
    // SAFETY: fds holds two descriptors.
    if unsafe { pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return -1;
    }
    // The caller may have closed `target` before dup2 onto it (a shell saving and closing
    // its stdout first), so one end of the new pipe can land on `target` itself; moved
    // elsewhere, or the dup2 below would close it.
    let fcntlr = real!(fcntl: fn(c_int, c_int, libc::c_ulong) -> c_int);
    for fd in fds.iter_mut() {
        if *fd == target {
            // SAFETY: duplicating our own pipe end (target is taken, so the copy lands
            // elsewhere), then closing the original.
            let moved = unsafe { fcntlr(*fd, libc::F_DUPFD_CLOEXEC, 3) };
            if moved < 0 {
                // SAFETY: both ends are ours.
                unsafe {
                    closer(fds[0]);
                    closer(fds[1]);
                }
                return -1;
            }
            // SAFETY: the original end, now duplicated.
            unsafe { closer(*fd) };
            *fd = moved;
        }
    }
    let (r, w) = (fds[0], fds[1]);
    let output = target != 0;
    // (An input pump has no entry for its descriptor: only its file, or a snapshot's offset.)
    let older = take_pump(target);
    // SAFETY: plain descriptor operations on descriptors we own.
    unsafe {
        if dup2r(if output { w } else { r }, target) < 0 {
            closer(r);
            closer(w);
            return -1;
        }
        closer(if output { w } else { r });
    }
    settle_pump(older, target);
    // Our end, out of the way of the program's dup2 (`hashfs::pm::out_of_the_way`); an
    // output pump's reads it without blocking, under the file's position (`poll` waits).
    let keep = {
        use std::os::fd::{FromRawFd, IntoRawFd};
        // SAFETY: our own pipe end, owned by nothing else.
        hashfs::pm::out_of_the_way(unsafe { std::fs::File::from_raw_fd(if output { r } else { w }) }).into_raw_fd()
    };
    if output {
        // SAFETY: F_SETFL on our own end.
        unsafe { fcntlr(keep, libc::F_SETFL, libc::O_NONBLOCK as libc::c_ulong) };
    } else if filled_whole(&of, keep) {
        // No thread: the pipe holds the rest of the file and ends there.
        if let Some(slot) = STANDARD_FILES.lock().get_mut(target as usize) {
            *slot = Some(StandardFile { object: inode_of(target).unwrap_or(0), of, snapshot: None });
        }
        // SAFETY: our end of the pipe, written out.
        unsafe { closer(keep) };
        return target;
    }
    let pumped = Arc::new(Pump {
        of: of.clone(),
        output,
        pid: current_pid(),
        end: keep,
        pipe: inode_of(target).unwrap_or(0),
        stop: AtomicBool::new(false),
        done: AtomicBool::new(false),
        ended: AtomicBool::new(false),
        target,
    });
    if let Some(slot) = STANDARD_FILES.lock().get_mut(target as usize) {
        *slot = Some(StandardFile { object: pumped.pipe, of: of.clone(), snapshot: None });
    }
    drop(of);
    // The thread owns no reference to its pump or its file: `PUMPED` does, until the
    // thread takes its record out as it ends. A forked child has a copy of the thread's
    // memory but not the thread; a reference there would keep the file open in the child
    // for good, and the child could not leave the image at its exit (every `$(...)` of a
    // shell whose output went to a file in the image printed "image not marked clean at
    // exit" and left its slot to be reaped). The child drops its parent's records at exit.
    let pumped_pipe = pumped.pipe;
    let record = Arc::as_ptr(&pumped);
    let at = PumpAt(record);
    PUMPED.lock().push(pumped);
    join_ended();
    let spawned = super::workers::run(move || {
        let at = at; // the whole wrapper: the closure would take its pointer alone, not Send
                     // SAFETY: `PUMPED` holds the pump until this thread takes its record out, at its end.
        let pumped: &Pump = unsafe { &*at.0 };
        let of = &pumped.of;
        shim_thread();
        // (SIGPIPE is blocked on the pool's threads, `workers.rs`: a write to a pipe whose
        // reader is gone fails with EPIPE here instead of killing the process,
        // `stop_input_pumps`.)
        let Some(file) = of.file.as_ref() else { return };
        let mut buf = vec![0u8; 64 * 1024];
        // An input pump's file as it was when the pump began (see `feeds_itself`).
        let size_at_start = if output { u64::MAX } else { file.metadata().map_or(u64::MAX, |m| m.size) };
        loop {
            if output {
                let mut wait = libc::pollfd { fd: keep, events: libc::POLLIN, revents: 0 };
                // SAFETY: one pollfd; -1: wait until readable or hung up.
                if unsafe { libc::poll(&mut wait, 1, -1) } < 0 {
                    continue; // EINTR
                }
                let mut pos = of.pos.lock();
                // SAFETY: buf is valid for its length.
                let n = unsafe { readr(keep, buf.as_mut_ptr() as *mut c_void, buf.len()) };
                if n < 0 && hashfs_interpose::errno() == libc::EAGAIN {
                    continue; // written out by a caller (`written_out`): poll woke for nothing
                }
                if n <= 0 || !pump_into(of, file, &mut pos, &buf[..n as usize], target) {
                    // Closed under the position: `written_out` reads the end only under it.
                    pumped.ended.store(true, Ordering::Release);
                    // SAFETY: our end of the pipe.
                    unsafe { closer(keep) };
                    break;
                }
            } else {
                if pumped.stop.load(Ordering::Acquire) {
                    break; // an execve takes over the rest (`exec.rs`)
                }
                let mut pos = of.pos.lock();
                if *pos >= size_at_start && feeds_itself(of, size_at_start) {
                    break;
                }
                let n = match file.read_at(*pos, &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                *pos += n as u64;
                drop(pos);
                // SAFETY: buf holds n bytes.
                if unsafe { writer(keep, buf.as_ptr() as *const c_void, n) } < 0 {
                    break;
                }
            }
        }
        if !output {
            // SAFETY: our end of the pipe (an output pump's is closed above).
            unsafe { closer(keep) };
        }
        pumped.done.store(true, Ordering::Release);
        let mine = {
            let mut list = PUMPED.lock();
            list.iter().position(|q| std::ptr::eq(Arc::as_ptr(q), at.0)).map(|i| list.remove(i))
        };
        drop(mine); // the pump and its file's reference, outside the list's lock; not used after
    });
    let handle = match spawned {
        Ok(h) => h,
        Err(e) => {
            // No thread (the process's limit): the pipe stays on `target` with no one to
            // move its bytes, so writes to it fail (EPIPE) and reads find its end; said
            // here, never a panic in the program's call.
            eprintln!("hashfs_preload: no thread to pump standard descriptor {target} ({e}): its transfers fail");
            let mine = {
                let mut list = PUMPED.lock();
                list.iter().position(|q| std::ptr::eq(Arc::as_ptr(q), record)).map(|i| list.remove(i))
            };
            drop(mine);
            if let Some(slot) = STANDARD_FILES.lock().get_mut(target as usize) {
                *slot = None;
            }
            // SAFETY: our end of the pipe, which no thread uses.
            unsafe { closer(keep) };
            return -1;
        }
    };
    PUMPS.lock().push((if output { target } else { -1 }, pumped_pipe, handle));
    target
}

/// Whether the file an input pump reads, past the `size` it had when the pump began, is
/// this process's output too (an output pump of this process writes it): `cat < f >> f`,
/// which on the kernel's file `cat` refuses ("input file is output file", from the fstat
/// of its standard input), here appended `f` to itself until the image was full (an input
/// of at most 16 MiB is a snapshot, whose fstat `cat` sees, `snapshot.rs`). The pump then
/// ends its input where the file ended when it began, and says so once: `f` is appended to
/// itself once, and by up to a pipe's worth more when the pump began in an exec'd program,
/// which may have appended what the pipe held before its own pump began. An input another
/// process appends to is read on to its end, as the kernel's is.
fn feeds_itself(of: &OpenFile, size: u64) -> bool {
    let pid = current_pid();
    let writes_it = PUMPED.lock().iter().any(|p| p.output && p.pid == pid && p.of.ino == of.ino);
    if writes_it {
        eprintln!(
            "hashfs_preload: standard input is a file this program also writes as its output: read to \
             {size} bytes, its size when the pump began, not on into what the program appends"
        );
    }
    writes_it
}

/// An input pump's whole work at once, when the rest of `of`'s file fits in the pipe (64
/// KiB): it is read and written into the pipe through `end` here, under the position, and
/// the caller closes the pipe (its reader finds the end there). A shell's `read l < f`
/// then starts no thread, and makes no record a fork or an exec must deal with: the pipe
/// carries the bytes to whoever reads it, as a pump's would. False when the rest does
/// not fit (or a read fails): what was written stays written, and the pump goes on.
/// Before 2026-12-07 every input redirection started a thread (86 us a `read l < f`
/// through the shim here, 9 us on tmpfs).
fn filled_whole(of: &OpenFile, end: c_int) -> bool {
    let Some(file) = of.file.as_ref() else { return false };
    let fcntlr = real!(fcntl: fn(c_int, c_int, libc::c_ulong) -> c_int);
    let writer = real!(write: fn(c_int, *const c_void, size_t) -> ssize_t);
    // SAFETY: F_GETPIPE_SZ on our own end.
    let capacity = unsafe { fcntlr(end, libc::F_GETPIPE_SZ, 0) }.max(0) as u64;
    let mut pos = of.pos.lock();
    let Ok(size) = file.metadata().map(|m| m.size) else { return false };
    let rest = size.saturating_sub(*pos);
    if rest > capacity {
        return false;
    }
    let mut buf = vec![0u8; rest as usize];
    let Ok(n) = file.read_at(*pos, &mut buf) else { return false };
    let mut done = 0;
    while done < n {
        // SAFETY: buf holds n bytes; the pipe is new and empty, with room for them all.
        let w = unsafe { writer(end, buf[done..].as_ptr() as *const c_void, n - done) };
        if w <= 0 {
            break;
        }
        done += w as usize;
    }
    *pos += done as u64;
    done == n
}

/// Drops the records of pumps that have ended but were not waited for (a pump that went
/// on without a descriptor, [`settle_pump`], or an input pump), before another starts.
/// Until 2026-12-07 their threads were joined only at exit, each keeping its stack: a
/// shell's loop of redirections into the image (`for ...; do echo x >> f; done`) grew by
/// two kernel mappings a pass until, past 30,000 passes, no thread could be made
/// (`vm.max_map_count`) and the shell died on the shim's panic. Since 2026-12-07 a pump's
/// thread goes back to the pool when its work is done (`workers.rs`), and this keeps the
/// list short.
fn join_ended() {
    let mut pumps = PUMPS.lock();
    let mut i = 0;
    while i < pumps.len() {
        if pumps[i].0 < 0 && pumps[i].2.is_finished() {
            let (_, _, h) = pumps.swap_remove(i);
            h.join(); // ended: returns at once
        } else {
            i += 1;
        }
    }
}
