//! A participant's fork (issue 55; docs/design.md, "Descriptors across fork and exec"):
//! the child becomes a participant of its own, with the parent's open files and their
//! open file descriptions, whose offsets parent and child then share as Linux has them.
//!
//! The child starts from a copy of the parent's memory, caches included. So that copy is
//! one no thread was changing, the parent takes the image lock before `fork` (as a call
//! does: no other thread of it is then inside the file system) and lets go after it. The
//! parent reserves the child's participant slot before the fork, counted in the image's
//! `forks` word, and hands it to the child after (the slot then names the child, and
//! holds the descriptions the parent counted the fork on). The child waits for that, takes
//! the lock under the slot's name (waiting for the parent's to go), catches up with what
//! others changed since, takes its own hold on each inode it has open, and stops counting.
//! Until it has, the `forks` word counts it, so that a parent leaving meanwhile does not
//! take itself for the last participant and mark the image clean under the child, and
//! keeps what it closes for it (`for_children.rs`). A child killed before it joined leaves
//! a dead slot: whoever reaps it uncounts it and releases its descriptions. (Until
//! 2026-12-07 the child took its slot as it joined: one killed before that left the count
//! for good, and the descriptions counted for it were never freed.) With no slot free at
//! the fork, the child looks for one itself as it joins, as before.

use super::{add_depth, release_dead, Entered, TOUCHED};
use crate::fs::api::FileSystem;
use crate::layout::Ino;
use crate::pm::PmDevice;
use crate::share::{Handle, Mark, OffsetGuard, Participant, MAX_PARTICIPANTS};
use crate::{Error, Result};
use std::sync::atomic::Ordering;

/// A fork, exec or spawn under way ([`FileSystem::prepare_fork`] and the others): the
/// descriptions it was counted on, whether it was counted in the image's `forks` word,
/// whether the parent's hold on the image lock is the thread's outermost, and the inodes
/// the parent maps writable and shared ([`Fork::mapped_writable`]).
#[must_use = "a fork's preparation is finished in the parent and in the child"]
#[derive(Default)]
pub struct Fork {
    counted: Vec<Handle>,
    in_image: bool,
    outer: bool,
    writable: Vec<Ino>,
    /// A fork's: the slot reserved for the child, counted in `forks`, and the parent's pid
    /// (None: no slot was free; the child then takes one itself, or fails to).
    child_slot: Option<(Participant, u32)>,
}

impl Fork {
    /// The inodes the parent maps writable and shared as it forks (the front end knows
    /// them: `note_mapped_writable`): the child marks them under its own name as it joins,
    /// before it stops counting as on its way. Marked later (after the join, by the front
    /// end), a parent that unmapped meanwhile could let go of its own mark first, and
    /// another process serve the file by a copy that misses the child's stores.
    pub fn mapped_writable(&mut self, inos: Vec<Ino>) {
        self.writable = inos;
    }

    /// A spawn's ticket ([`FileSystem::prepare_spawn`]): the slot its program is to find
    /// (the front end names it beside the descriptions handed over, and the program gives it
    /// to [`FileSystem::inherited_opened`]). None: no ticket (a `popen` that cannot
    /// read its thread's children, no description in the image, or no slot free).
    pub fn ticket(&self) -> Option<u32> {
        self.child_slot.map(|(t, _)| t.0)
    }
}

impl<D: PmDevice> FileSystem<D> {
    /// On a mount shared by many processes: an open file description of `ino` (the
    /// access mode and status flags `flags`, the offset `offset`) in the image's region,
    /// for a descriptor that a fork shares. None on a mount of one process; TooManyOpen
    /// when the region's table is full.
    pub fn share_description(&self, ino: Ino, flags: u32, offset: u64) -> Result<Option<Handle>> {
        let Some(sh) = self.inner.shared.get() else { return Ok(None) };
        sh.region.descriptions().open(sh.me(), ino, flags, offset).map(Some).ok_or(Error::TooManyOpen)
    }

    /// The image's `forks` word (`hashfs::testing::forks_counted`).
    pub(crate) fn forks_counted(&self) -> Option<u64> {
        self.inner.shared.get().map(|sh| sh.region.words().forks.load(Ordering::Acquire))
    }

    /// Description `h`'s offset under its lock, held until the guard is dropped (the
    /// kernel's `f_pos_lock`): a read or write through a shared description moves it once.
    /// None if `h` no longer names a held description.
    pub fn lock_offset(&self, h: Handle) -> Option<OffsetGuard<'_>> {
        let sh = self.inner.shared.get()?;
        let d = sh.region.descriptions().get(h)?;
        Some(d.lock_offset(sh.me(), sh.region.participants()))
    }

    /// This process closed its last descriptor of description `h`; true when no other
    /// process holds it any more.
    pub fn release_description(&self, h: Handle) -> bool {
        self.inner.shared.get().is_some_and(|sh| sh.region.descriptions().release(h, sh.me()))
    }

    /// Before `fork`, in the parent: takes the image lock (until
    /// [`Self::after_fork_in_parent`]) and counts the fork on each of `descriptions` (the
    /// child's to take over) and in the image. None on a mount of one process, whose
    /// image a child cannot join.
    pub fn prepare_fork(&self, descriptions: &[Handle]) -> Option<Fork> {
        if let Some(ro) = self.inner.read_only.get() {
            // A read-only participant's child reads on with the parent's caches.
            ro.before_fork(|watching| self.inner.pins_for_child(watching));
            return Some(Fork::default());
        }
        let sh = self.inner.shared.get()?;
        sh.forked.store(true, Ordering::Release); // the image's lock shared with the child
        let entered = self.inner.enter();
        let outer = entered.outer;
        std::mem::forget(entered); // let go in the parent, forgotten in the child
        let table = sh.region.descriptions();
        let counted = descriptions.iter().copied().filter(|&h| table.count_fork(h)).collect();
        // The child's count lives in a slot from now on (`Participants::reserve_for_child`).
        let parts = sh.region.participants();
        let child_slot = parts.reserve_for_child().map(|slot| (slot, std::process::id()));
        if let Some((slot, _)) = child_slot {
            sh.region.readers().joined(slot);
        }
        sh.region.words().forks.fetch_add(1, Ordering::AcqRel);
        self.inner.forking(sh);
        Some(Fork { counted, in_image: true, outer, child_slot, ..Fork::default() })
    }

    /// After `fork` made process `child`, in the parent: hands the slot reserved for the
    /// child over to it, with the descriptions counted for it (so that a child killed
    /// before it joins leaves a dead participant, whose reaper uncounts it and releases
    /// them), and lets go of the image lock.
    pub fn after_fork_in_parent(&self, fork: Fork, child: libc::pid_t) {
        if let Some(ro) = self.inner.read_only.get() {
            return ro.after_fork_in_parent();
        }
        let Some(sh) = self.inner.shared.get() else { return };
        if let Some((slot, _)) = fork.child_slot {
            sh.region.participants().hand_to_child(slot, child as u32);
            let table = sh.region.descriptions();
            for &h in &fork.counted {
                table.adopt_once(h, slot);
            }
        }
        drop(Entered { fs: &*self.inner, outer: fork.outer });
    }

    /// After a `fork` that made no child: uncounts it and lets go of the image lock.
    pub fn fork_failed(&self, fork: Fork) {
        if let Some(ro) = self.inner.read_only.get() {
            return ro.after_fork_in_parent();
        }
        let Some(sh) = self.inner.shared.get() else { return };
        undo(sh, &fork);
        drop(Entered { fs: &*self.inner, outer: fork.outer });
    }

    /// After `fork`, in the child: joins the image as a participant of its own and takes
    /// over the descriptions counted for it and the parent's open inodes. On error (no
    /// free participant slot) the counts are undone and the child must not use this mount.
    pub fn after_fork_in_child(&self, fork: Fork) -> Result<()> {
        if let Some(ro) = self.inner.read_only.get() {
            ro.after_fork();
            self.inner.repin_after_fork();
            return Ok(());
        }
        let sh = self.inner.shared.get().ok_or(Error::Invalid("a fork is prepared on a shared mount"))?;
        if fork.outer {
            // The copy of the parent's hold: the parent lets go of the lock itself.
            add_depth(-1);
            let _ = TOUCHED.try_with(|t| t.borrow_mut().clear());
        }
        let parts = sh.region.participants();
        let me = match fork.child_slot {
            // The slot the parent reserved, counted: the parent hands it over as its fork
            // returns, holding the image lock (so this waits no longer than for the lock).
            Some((slot, parent)) if wait_for_slot(parts, slot, parent) => {
                parts.hold(slot); // the parent's lock is its own, not the child's
                slot
            }
            _ => {
                let Some(me) = parts.join() else {
                    if fork.child_slot.is_none() {
                        undo(sh, &fork);
                    }
                    return Err(Error::TooManyProcesses);
                };
                if fork.child_slot.is_none() {
                    // Counted until it has joined: a reaper of its slot uncounts it if it
                    // dies first. (With a reserved slot, whose parent died before handing
                    // it over, the count is that slot's, and its reaper's to take.)
                    parts.set_counted(me, true);
                }
                me
            }
        };
        sh.me.store(me.0, Ordering::Relaxed);
        sh.for_children.forget_parents();
        sh.region.readers().joined(me);
        let _in = self.inner.enter();
        // Slots of participants that died outside a call (a child that exec'd another
        // program, one killed): what they held is released and their slots reaped, so
        // that forks in a loop do not run out of slots.
        for p in (0..MAX_PARTICIPANTS as u32).map(Participant) {
            if p != me && !parts.is_free(p) && !parts.alive(p) {
                release_dead(&sh.region, p);
                parts.reap(p);
            }
        }
        let table = sh.region.descriptions();
        for &h in &fork.counted {
            table.adopt_once(h, me); // the parent adopted them for a slot it handed over
        }
        for cell in self.inner.inodes.cells() {
            if cell.open_count.load(Ordering::Acquire) > 0 {
                self.inner.note_open(cell.ino)?;
            }
            // The parent's mappings are the child's too: their blocks stay put for it.
            if cell.map_count.load(Ordering::Acquire) > 0 {
                self.inner.pin_marked(&cell);
            }
        }
        // The parent's writable marks (kept until this child stops counting) are its too.
        let marks = sh.region.open_inodes();
        for &ino in &fork.writable {
            if marks.set_mark(ino, me, Mark::Writable, true) {
                super::touched(ino);
            }
        }
        if parts.take_counted(me) {
            uncount(sh);
        }
        Ok(())
    }
}

/// In a forked child: waits until the slot its parent reserved names it (the parent hands
/// it over as its `fork` returns); false if the parent died first (the child is then
/// another process's child), or the slot was reaped.
fn wait_for_slot(parts: &crate::share::Participants, slot: Participant, parent: u32) -> bool {
    let me = std::process::id();
    loop {
        if parts.names(slot, me) {
            return true;
        }
        // SAFETY: getppid cannot fail.
        if unsafe { libc::getppid() } as u32 != parent || !parts.names(slot, parent) {
            return parts.names(slot, me);
        }
        std::thread::sleep(std::time::Duration::from_micros(50));
    }
}

impl<D: PmDevice> FileSystem<D> {
    /// Before `execve`, which keeps `descriptions`' descriptors for the next program: counts
    /// the exec on each (as a fork; the next program takes them over,
    /// [`Self::adopt_inherited`]) and in the image, and marks this participant leaving, so
    /// that no one waits for it: its slot, still its process's by pid and start time, is
    /// reaped when the next program joins. None on a mount of one process.
    pub fn prepare_exec(&self, descriptions: &[Handle]) -> Option<Fork> {
        let exec = self.hand_over(descriptions)?;
        if self.inner.is_read_only() {
            return Some(exec);
        }
        let sh = self.inner.shared.get()?;
        let parts = sh.region.participants();
        parts.set_leaving(sh.me());
        if exec.in_image {
            // For the next program, which carries the count on as it joins (`join.rs`);
            // one that never joins (exec'd without the shim) is uncounted by whoever reaps
            // this slot once the process has ended.
            parts.set_counted(sh.me(), true);
        }
        Some(exec)
    }

    /// The `execve` failed: this participant stays, and the counts go.
    pub fn exec_failed(&self, exec: Fork) {
        self.spawn_failed(exec);
        if let Some(sh) = self.inner.shared.get() {
            sh.region.participants().set_staying(sh.me());
        }
    }

    /// Before `posix_spawn`, `system` or `popen`, whose child program inherits
    /// `descriptions`' descriptors: counts them for it, as for an exec
    /// ([`Self::adopt_inherited`] takes them over), this participant staying. With `ticket`
    /// (a call that tells the child's pid, `posix_spawn`, `popen` through the thread's
    /// children, or that it has ended, `system`),
    /// the count lives in a slot reserved now (`Participants::reserve_ticket`), whose index
    /// the front end passes to the program ([`Fork::ticket`]) and which [`Self::spawned`]
    /// hands to it, or [`Self::spawn_ended`] takes back; without (a `popen` that cannot read them), the program
    /// uncounts itself once it has opened its files, and one that never does leaves the
    /// count up. None on a mount of one process.
    pub fn prepare_spawn(&self, descriptions: &[Handle], ticket: bool) -> Option<Fork> {
        let mut spawn = self.hand_over(descriptions)?;
        if ticket && spawn.in_image {
            if let Some(sh) = self.inner.shared.get() {
                let _in = self.inner.enter();
                let t = sh.region.participants().reserve_ticket();
                spawn.child_slot = t.map(|t| (t, std::process::id()));
            }
        }
        Some(spawn)
    }

    /// The spawn made process `child`, whose program is to adopt what [`Self::prepare_spawn`]
    /// counted: the spawn's ticket names it from now on (`Participants::hand_to_program`),
    /// so that a program that never joins (one that does not load the shim), or ended
    /// before its spawn returned, is uncounted by whoever reaps the ticket once it has
    /// ended; one that joins carries the count on until it has opened its files, or takes
    /// it from the ticket then, once. Without a ticket (no slot was free at the spawn), a
    /// slot is reserved now as before 2026-12-07 (`Participants::reserve_for`).
    pub fn spawned(&self, spawn: Fork, child: libc::pid_t) {
        let Some(sh) = self.inner.shared.get() else { return };
        if !spawn.in_image || child <= 0 {
            return;
        }
        let _in = self.inner.enter();
        let parts = sh.region.participants();
        match spawn.child_slot {
            Some((ticket, _)) => parts.hand_to_program(ticket, child as u32),
            // No slot was free at the spawn (and the program may have joined and left by
            // now: then its reaper uncounts it a second time).
            None => {
                let _ = parts.reserve_for(child as u32);
            }
        }
    }

    /// The spawn's program has ended, and the spawn told no pid (`system` returned): its
    /// ticket, never handed over, goes with its count. The program never took it (a ticket
    /// naming its parent is not its), whether it joined or not; before 2026-12-07 `system`
    /// took no ticket, and a program it started that never joined (a shell without the
    /// shim) left its count up.
    pub fn spawn_ended(&self, spawn: Fork) {
        let Some(sh) = self.inner.shared.get() else { return };
        let Some((ticket, _)) = spawn.child_slot else { return };
        let _in = self.inner.enter();
        let parts = sh.region.participants();
        if parts.take_counted(ticket) {
            uncount(sh);
        }
        parts.leave(ticket);
    }

    /// The spawn failed (or the exec that followed [`Self::prepare_exec`]): the counts go,
    /// and the spawn's ticket.
    pub fn spawn_failed(&self, spawn: Fork) {
        let Some(sh) = self.inner.shared.get() else { return };
        let _in = self.inner.enter();
        undo(sh, &spawn);
    }

    /// Counts `descriptions` for a program that is to adopt them, and, if any, that
    /// program in the image's `forks` (which its adoption uncounts).
    fn hand_over(&self, descriptions: &[Handle]) -> Option<Fork> {
        if self.inner.is_read_only() {
            // Nothing counted: a read-only participant's descriptors pass as copies.
            return Some(Fork::default());
        }
        let sh = self.inner.shared.get()?;
        let _in = self.inner.enter();
        let table = sh.region.descriptions();
        let counted: Vec<Handle> = descriptions.iter().copied().filter(|&h| table.count_fork(h)).collect();
        let in_image = !counted.is_empty();
        if in_image {
            // Nothing is kept for the program (`for_children.rs`): it inherits no mapping,
            // and the files it inherits stay by their descriptions while it is on its way
            // (`FsInner::open_elsewhere`).
            sh.region.words().forks.fetch_add(1, Ordering::AcqRel);
        }
        Some(Fork { counted, in_image, ..Fork::default() })
    }

    /// In a program started by `execve`, as it starts: takes over the descriptions the
    /// program before it counted for it ([`Self::prepare_exec`]); for each, its inode and
    /// status flags, or None when it is no longer there (an exec whose counts a first mount
    /// cleared, after everyone else had gone). The program still counts as on its way
    /// until it has opened their files ([`Self::inherited_opened`]).
    pub fn adopt_inherited(&self, descriptions: &[Handle]) -> Vec<Option<(Ino, u32)>> {
        let Some(sh) = self.inner.shared.get() else { return vec![None; descriptions.len()] };
        let _in = self.inner.enter();
        let table = sh.region.descriptions();
        let me = sh.me();
        let found = descriptions
            .iter()
            .map(|&h| {
                let d = table.get(h)?;
                let what = (d.ino(), d.flags());
                table.adopt(h, me);
                Some(what)
            })
            .collect();
        found
    }

    /// The program started by `execve` or `posix_spawn` opened the files of the
    /// descriptions it adopted ([`Self::adopt_inherited`], which found one at least): it no
    /// longer counts as on its way. Not before: the program's predecessor, which held them,
    /// was let go of as the program joined, and until the program has opened them their
    /// descriptions alone hold them, which count as open elsewhere only while it counts
    /// (`FsInner::open_elsewhere`; so does what a forked parent keeps, `for_children.rs`).
    ///
    /// `ticket`: the spawn's ticket its descriptors named ([`Fork::ticket`]). Its count is
    /// taken once, by whoever finds it first: this program, as it joined (the ticket was
    /// handed to it by then: a dead slot of its own process, as an exec's) or now (the
    /// ticket names it), else by the ticket's reaper once the program has ended (the spawn
    /// had not returned yet). A program with no ticket (an exec's, or a `popen`'s that could not be told)
    /// uncounts once, whether or not it carried a count on.
    pub fn inherited_opened(&self, ticket: Option<u32>) {
        let Some(sh) = self.inner.shared.get() else { return };
        let _in = self.inner.enter();
        let parts = sh.region.participants();
        let carried = parts.take_counted(sh.me());
        let took = match ticket.map(Participant) {
            Some(t) if parts.names(t, std::process::id()) && t != sh.me() => {
                let took = parts.take_counted(t);
                // Handed to this program after it joined: its slot in all but name, dead to
                // it, holding nothing; freed now rather than left until the process ends.
                release_dead(&sh.region, t);
                parts.reap(t);
                carried || took
            }
            Some(_) => carried,
            None => true,
        };
        if took {
            uncount(sh);
        }
    }
}

/// A fork, exec or spawn that made no child or program, or a child that could not join:
/// the counts it made go, and the slot it reserved (a fork's child's, a spawn's ticket).
fn undo(sh: &super::SharedMount, fork: &Fork) {
    if let Some((slot, _)) = fork.child_slot {
        let parts = sh.region.participants();
        parts.take_counted(slot); // the count goes below, once
        parts.leave(slot);
    }
    for &h in &fork.counted {
        sh.region.descriptions().fork_failed(h);
    }
    if fork.in_image {
        uncount(sh);
    }
}

/// One fork fewer waits to join (never below zero: a first mount clears the count).
fn uncount(sh: &super::SharedMount) {
    uncount_forks(&sh.region);
}

/// [`uncount`], in `region` (a reaper's, for a participant that died counted:
/// `Participants::take_counted`).
pub(super) fn uncount_forks(region: &crate::share::ImageRegion) {
    let _ = region.words().forks.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
}
