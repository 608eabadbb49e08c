//! `fork`: the child of a process that uses the image becomes a participant of its own
//! (`FileSystem::after_fork_in_child`), keeps every descriptor its parent had, and shares
//! each one's open file description with the parent as Linux has it: one offset, moved
//! under the description's lock by whichever process reads or writes through it.
//!
//! A descriptor's position is the process's own until a fork shares its description;
//! from then on it lives in the image's region (`hashfs::share::Descriptions`), in the
//! parent as in the child. So that the child's copy of the shim's memory is one no thread
//! was changing, the parent holds, across the fork, the descriptor table, the directory
//! streams, every position and the image lock (no thread of it is then inside the file
//! system). Other locks of the shim (its mappings' records, a pump's list) are not held: a
//! thread holding one at the moment of a fork leaves it taken in the child, as with any
//! library that has no fork handler for its locks.

use super::*;
use hashfs::share::{Handle, OffsetGuard};
use hashfs::{ForkMutex, ForkMutexGuard};

/// A descriptor's file position (its open file description's offset).
pub(super) struct Position {
    local: ForkMutex<u64>,
    /// The description in the image's region, once a fork shared it.
    shared: OnceLock<Handle>,
}

/// A position held for a read, a write or a seek (the kernel's `f_pos_lock`).
pub(super) struct PosGuard<'a> {
    local: ForkMutexGuard<'a, u64>,
    shared: Option<OffsetGuard<'static>>,
}

/// The mount, unless this process is a child that could not join it.
pub(super) fn joined_fs() -> Option<&'static FileSystem<MmapDevice>> {
    SHIM.get().filter(|_| !FORKED.load(Ordering::Relaxed)).and_then(|s| s.fs.as_ref())
}

impl Position {
    pub(super) fn new() -> Position {
        Position { local: ForkMutex::new(0), shared: OnceLock::new() }
    }

    /// A position of this process's alone, at `at` (a read-only participant's inherited
    /// descriptor, `exec.rs`).
    pub(super) fn at(at: u64) -> Position {
        Position { local: ForkMutex::new(at), shared: OnceLock::new() }
    }

    /// The position of a descriptor a program inherited across `execve` (`exec.rs`): the
    /// description's.
    pub(super) fn adopted(h: Handle) -> Position {
        let shared = OnceLock::new();
        let _ = shared.set(h);
        Position { local: ForkMutex::new(0), shared }
    }

    /// The description this position lives in, made now (at the position it has) if a fork
    /// or exec has not shared it yet. None on a mount of one process.
    pub(super) fn share(&self, fs: &FileSystem<MmapDevice>, ino: Ino, flags: c_int) -> hashfs::Result<Option<Handle>> {
        let held = self.local.lock();
        self.share_at(fs, ino, flags, *held)
    }

    /// As [`Self::share`], with the position's lock held by the caller (`at`: the position).
    fn share_at(&self, fs: &FileSystem<MmapDevice>, ino: Ino, flags: c_int, at: u64) -> hashfs::Result<Option<Handle>> {
        if let Some(&h) = self.shared.get() {
            return Ok(Some(h));
        }
        let made = fs.share_description(ino, flags as u32, at)?;
        if let Some(h) = made {
            let _ = self.shared.set(h);
        }
        Ok(made)
    }

    /// The process's own copy of the position, locked (a fork holds it across).
    pub(super) fn local_lock(&self) -> ForkMutexGuard<'_, u64> {
        self.local.lock()
    }

    pub(super) fn lock(&self) -> PosGuard<'_> {
        let mut local = self.local.lock();
        let shared = self.shared.get().and_then(|&h| joined_fs()?.lock_offset(h));
        if let Some(g) = &shared {
            *local = g.get();
        }
        PosGuard { local, shared }
    }

    /// The descriptor's description is closed in this process (its last descriptor here).
    /// None when no fork or exec shared it; else whether no other process holds it now.
    pub(super) fn release(&self) -> Option<bool> {
        let &h = self.shared.get()?;
        Some(joined_fs().is_some_and(|fs| fs.release_description(h)))
    }
}

impl std::ops::Deref for PosGuard<'_> {
    type Target = u64;
    fn deref(&self) -> &u64 {
        &self.local
    }
}

impl std::ops::DerefMut for PosGuard<'_> {
    fn deref_mut(&mut self) -> &mut u64 {
        &mut self.local
    }
}

impl Drop for PosGuard<'_> {
    fn drop(&mut self) {
        if let Some(g) = &mut self.shared {
            g.set(*self.local);
        }
    }
}

/// What the parent holds across `fork`.
struct Prepared {
    /// The library copies (`library.rs`), whose lock a thread may hold while it copies.
    copies: ForkMutexGuard<'static, super::library::Copies>,
    descriptors: ForkMutexGuard<'static, FdTable>,
    /// The directory streams (a thread reading one must not leave its lock taken in the
    /// child's copy).
    streams: ForkMutexGuard<'static, HashMap<usize, Box<DirStream>>>,
    /// The records of mappings (`mmap.rs`, [`super::mmap::held_for_fork`]).
    maps: super::mmap::MapsHeld,
    /// The open files whose positions are locked (their guards forgotten) until after.
    files: Vec<Arc<OpenFile>>,
    /// The mount's own preparation; None when the child cannot join (a mount of one
    /// process, or the region's table of descriptions full): it then gets EIO.
    fork: Option<hashfs::Fork>,
}

/// Before `fork`, in the parent.
pub(super) fn before_fork() -> Option<Box<dyn std::any::Any>> {
    let s = SHIM.get()?;
    let fs = joined_fs()?;
    if EXITING.load(Ordering::Relaxed) {
        return None;
    }
    // The library copies' lock first (nothing is looked up under it that waits for the
    // others), the positions next (a thread may hold one while it looks up another
    // descriptor), then the table.
    let copies = super::library::held_for_fork();
    let mut files: Vec<Arc<OpenFile>> = s.fds.lock().values().cloned().collect();
    // The files this process's pumps write or read: shared too (a forked child's standard
    // descriptors are the pumps' pipes, or become descriptors of their files at its exec).
    let me = current_pid();
    files.extend(pump::PUMPED.lock().iter().filter(|p| p.pid == me).map(|p| p.of.clone()));
    files.sort_by_key(|f| Arc::as_ptr(f) as usize);
    files.dedup_by_key(|f| Arc::as_ptr(f) as usize);
    let mut handles = Vec::with_capacity(files.len());
    let mut shareable = true;
    for of in &files {
        // An output pump's pipe is written out first: the child's writes come after.
        let held = pump::drained_for_fork(of, of.pos.local.lock());
        let at = *held;
        std::mem::forget(held); // unlocked after the fork, in both processes
        match of.pos.share_at(fs, of.ino, of.flags.load(Ordering::Relaxed), at) {
            Ok(Some(h)) => handles.push(h),
            // A read-only participant writes nothing in the region: the child's offsets
            // are copies of the parent's (docs/design.md, *Trust*).
            Ok(None) if fs.is_read_only() => {}
            Ok(None) => shareable = false,
            Err(e) => {
                eprintln!("hashfs_preload: a forked child cannot share the parent's files: {e}");
                shareable = false;
            }
        }
    }
    // The records of mappings, which the follower thread changes (`mmap/follow.rs`): a
    // child must not start with them locked. After the positions (a write holds its
    // position while it updates the records), before the file system's fork lock (the
    // follower waits for that lock holding the records).
    let maps = super::mmap::held_for_fork();
    let descriptors = s.fds.lock();
    let streams = s.dirs.lock();
    let mut fork = if shareable { fs.prepare_fork(&handles) } else { None };
    if let Some(f) = &mut fork {
        // Marked under the child's name as it joins (`hashfs/src/fs/shared/fork.rs`).
        f.mapped_writable(maps.writable());
    }
    Some(Box::new(Prepared { copies, maps, descriptors, streams, files, fork }))
}

/// After `fork`, in both processes (`pid` 0 in the child).
pub(super) fn after_fork(prepared: Option<Box<dyn std::any::Any>>, pid: libc::pid_t) {
    let Some(Prepared { copies, maps, descriptors, streams, files, fork }) =
        prepared.and_then(|p| p.downcast().ok()).map(|p| *p)
    else {
        return;
    };
    // Not `joined_fs`: glibc's fork handlers (`after_fork_in_child` in shim.rs) marked the
    // child before this runs.
    let fs = SHIM.get().and_then(|s| s.fs.as_ref());
    if pid == 0 {
        // (PROCESS_PID is the child's already: glibc's fork handler, `after_fork_in_child`.)
        OWNER_PID.store(current_pid(), Ordering::Relaxed);
        // The parent's pump threads are not the child's: never joined here.
        if let Some(mut pumps) = PUMPS.try_lock() {
            std::mem::forget(std::mem::take(&mut *pumps));
        }
        let joined = match (fork, fs) {
            (Some(f), Some(fs)) => fs.after_fork_in_child(f).map_err(|e| e.to_string()),
            _ => Err("the image is not shared by many processes".into()),
        };
        match joined {
            // The fork handler (`after_fork_in_child` below) marked the child; it joined.
            Ok(()) => FORKED.store(false, Ordering::Relaxed),
            Err(e) => {
                eprintln!("hashfs_preload: this forked child cannot use the image ({e}); its paths fail with EIO");
                FORKED.store(true, Ordering::Relaxed);
            }
        }
    } else if let (Some(f), Some(fs)) = (fork, fs) {
        if pid > 0 {
            fs.after_fork_in_parent(f, pid);
        } else {
            fs.fork_failed(f);
        }
    }
    for of in &files {
        // SAFETY: locked by before_fork in this thread (the child's copy of the lock too),
        // its guard forgotten.
        unsafe { of.pos.local.force_unlock() };
    }
    drop(streams);
    drop(descriptors);
    drop(maps);
    drop(copies);
    if pid == 0 && !FORKED.load(Ordering::Relaxed) {
        // The parent's mappings are the joined child's: so is following them.
        super::mmap::follow_in_child();
        super::pump::own_pumps_in_child();
    }
}
