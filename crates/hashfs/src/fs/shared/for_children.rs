//! What a parent keeps for the children it forked until they
//! have joined the image (`fork.rs`).
//!
//! A child inherits its parent's open files and mappings, but takes them over under its
//! own name (a hold on each inode, its marks) only as it joins, after `fork` returned in
//! the parent. Were the parent to let go of them meanwhile (a close, an unmap, right after
//! the fork: the common case, since the parent's next call usually takes the image lock
//! before the child's first), no participant would hold them for a moment, and another
//! participant, or the parent itself, could act on that: free an unlinked file the child
//! still has open (its reads then fail with ENOENT, its blocks go to the next file made),
//! free or move the blocks of a file the child maps, or keep a copy of a file the child
//! stores to through a writable mapping. So while a child it forked may not have joined
//! (it forked since it last found the image's `forks` count at 0), a participant keeps,
//! of the files it had open or mapped at the fork, its hold of each it closes (one
//! unlinked counts as open elsewhere: no one frees it) and its marks of each it unmaps;
//! the first call that finds no child on its way (the count at 0, under the image lock)
//! lets them go ([`FsInner::settle_for_children`]).
//!
//! The count is the image's, not the parent's own: another participant's child on its way
//! keeps this one's too, a little longer than needed. A child killed before it joined
//! leaves the count until the image is next mounted by no one else: what its parent kept
//! is then kept until the parent leaves (an unlinked file it kept is freed by the next
//! mount's recovery), never let go early; it is at most what was open at its forks.

use super::SharedMount;
use crate::fs::inode::InodeCell;
use crate::fs::FsInner;
use crate::layout::Ino;
use crate::pm::PmDevice;
use crate::share::Mark;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// [`SharedMount::for_children`].
#[derive(Default)]
pub(crate) struct ForChildren {
    /// This participant forked since it last found no child on its way.
    forked: AtomicBool,
    /// The files it had open or mapped at those forks (what a child may have inherited):
    /// only they wait. So what waits stays bounded by what was open at a fork also when the
    /// count stays up for long (a child killed before it joined, or a program exec'd
    /// without the shim that was handed descriptors).
    inherited: parking_lot::Mutex<Vec<Ino>>,
    /// Whether anything waits (read at every call without the mutex).
    any: AtomicBool,
    kept: parking_lot::Mutex<Kept>,
}

/// What waits for the children to join.
#[derive(Default)]
struct Kept {
    /// Files whose blocks this process no longer maps: their blocks marks.
    unpinned: Vec<Arc<InodeCell>>,
    /// Files this process no longer maps writable: their writable marks.
    unmarked: Vec<Ino>,
    /// Files this process closed: their holds (and, unlinked, the files).
    closed: Vec<Arc<InodeCell>>,
}

impl ForChildren {
    /// In a forked child: what its parent kept is the parent's.
    pub(super) fn forget_parents(&self) {
        self.forked.store(false, Ordering::Release);
        self.any.store(false, Ordering::Release);
        self.inherited.lock().clear();
        *self.kept.lock() = Kept::default();
    }

    fn keep(&self, f: impl FnOnce(&mut Kept)) {
        f(&mut self.kept.lock());
        self.any.store(true, Ordering::Release);
    }
}

impl<D: PmDevice> FsInner<D> {
    /// Before a fork, which counts a child in the image's `forks` (under the image lock):
    /// notes what the child may inherit.
    pub(super) fn forking(&self, sh: &SharedMount) {
        let fc = &sh.for_children;
        let mut inherited = fc.inherited.lock();
        let open =
            |c: &&Arc<InodeCell>| c.open_count.load(Ordering::Acquire) > 0 || c.map_count.load(Ordering::Acquire) > 0;
        inherited.extend(self.inodes.cells().iter().filter(open).map(|c| c.ino));
        inherited.sort_unstable();
        inherited.dedup();
        fc.forked.store(true, Ordering::Release);
    }

    /// Whether a child this participant forked may not have joined yet and may have
    /// inherited `ino` (under the image lock: the count changes under it). False on a
    /// mount of one process.
    fn children_on_their_way(&self, sh: &SharedMount, ino: Ino) -> bool {
        let fc = &sh.for_children;
        fc.forked.load(Ordering::Acquire)
            && sh.region.words().forks.load(Ordering::Acquire) != 0
            && fc.inherited.lock().binary_search(&ino).is_ok()
    }

    /// The last pin of `cell`'s blocks went (under the lock): true when its mark must wait
    /// for the children, and now does.
    pub(super) fn unpin_waits(&self, sh: &SharedMount, cell: &Arc<InodeCell>) -> bool {
        let waits = self.children_on_their_way(sh, cell.ino);
        if waits {
            sh.for_children.keep(|k| k.unpinned.push(cell.clone()));
        }
        waits
    }

    /// This process's last writable mapping of `ino` went (under the lock): true when its
    /// mark must wait for the children, and now does. A mark made again meanwhile
    /// ([`Self::marked_again`]) takes it off the list.
    pub(super) fn unmark_waits(&self, sh: &SharedMount, ino: Ino) -> bool {
        let waits = self.children_on_their_way(sh, ino);
        if waits {
            sh.for_children.keep(|k| k.unmarked.push(ino));
        }
        waits
    }

    /// `ino` is mapped writable here again: no mark of it waits to go.
    pub(super) fn marked_again(&self, sh: &SharedMount, ino: Ino) {
        if sh.for_children.any.load(Ordering::Acquire) {
            sh.for_children.kept.lock().unmarked.retain(|&i| i != ino);
        }
    }

    /// This process closed its last handle of `cell` (under the lock): true when its hold
    /// must wait for the children, and now does.
    pub(crate) fn close_waits(&self, cell: &Arc<InodeCell>) -> bool {
        let Some(sh) = self.shared.get() else { return false };
        let waits = self.children_on_their_way(sh, cell.ino);
        if waits {
            sh.for_children.keep(|k| k.closed.push(cell.clone()));
        }
        waits
    }

    /// Whether this process keeps `ino` open for a child on its way (a close that waits):
    /// such a file is open elsewhere, and not freed ([`Self::open_elsewhere`]).
    pub(super) fn kept_for_children(&self, sh: &SharedMount, ino: Ino) -> bool {
        let fc = &sh.for_children;
        fc.any.load(Ordering::Acquire) && fc.kept.lock().closed.iter().any(|c| c.ino == ino)
    }

    /// At each call that takes the image lock: once no child is on its way, what waited
    /// for the children goes (a mark not made again, a hold of a file not opened again,
    /// an unlinked file open nowhere). A process that makes no such call keeps them until
    /// it leaves.
    pub(super) fn settle_for_children(&self, sh: &SharedMount) {
        let fc = &sh.for_children;
        if !fc.forked.load(Ordering::Acquire) || sh.region.words().forks.load(Ordering::Acquire) != 0 {
            return;
        }
        fc.forked.store(false, Ordering::Release);
        fc.inherited.lock().clear();
        if !fc.any.swap(false, Ordering::AcqRel) {
            return;
        }
        let kept = std::mem::take(&mut *fc.kept.lock());
        let table = sh.region.open_inodes();
        for cell in kept.unpinned {
            if cell.map_count.load(Ordering::Acquire) == 0 {
                table.set_mark(cell.ino, sh.me(), Mark::Blocks, false);
            }
        }
        for ino in kept.unmarked {
            table.set_mark(ino, sh.me(), Mark::Writable, false);
            super::touched(ino);
        }
        for cell in kept.closed {
            let mut st = cell.state.write();
            if cell.open_count.load(Ordering::Acquire) == 0 {
                self.note_close(cell.ino);
                // Errors here cannot be returned; the next mount frees an orphan left behind.
                let _ = self.maybe_free(&cell, &mut st);
            }
        }
    }
}
