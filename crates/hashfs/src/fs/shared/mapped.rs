//! Mappings across participants (issue 55, item 4: a shared mapping of one file in two
//! processes shows one set of bytes): two marks each participant keeps on the inodes it has
//! open, in the region's open-inode table (`share/image.rs::Mark`).
//!
//! *Writable.* A store through a writable shared mapping goes straight to the file's blocks
//! in the image: no call, so no ring names it. A front end that serves another process's
//! mapping of that file by a copy (the shim's `mmap/copy.rs`) would keep the old bytes. So
//! each participant marks the inodes it maps writable and shared
//! ([`FileSystem::note_mapped_writable`]), and a front end keeps no copy of a file another
//! participant marked ([`FileSystem::mapped_writable_elsewhere`]): it gives it back to the
//! file's pages. The order that makes it whole: the marker stores its mark, publishes the
//! inode in the ring of changes (its call's publication), and only then returns to map the
//! file (so before its first store). A front end reads the ring from a position taken
//! before its first copy was made, and asks about the mark after each copy is recorded and
//! for each change of the file it reads. So a copy recorded before the mark was stored is
//! given back when the mark's publication is read, and one recorded after it sees the
//! mark. A mark goes with its participant's last writable mapping of the file, its last
//! close, and its death (`OpenInodes::release_all_of`).
//!
//! *Blocks.* A mapping of a file's pages sits on its blocks: freed under it, they would
//! show (and take the stores of) the file that gets them next. Each participant marks the
//! inodes whose blocks it maps, from its first pin to its last (`fs/map.rs`), and no
//! participant frees or moves the blocks of a file another marked
//! ([`FsInner::mapped_anywhere`]); a read-only participant, which may not store to the
//! region, pins them with a lock on the image file instead (`share/pins.rs`).

use crate::fs::api::FileSystem;
use crate::fs::inode::InodeCell;
use crate::fs::FsInner;
use crate::layout::Ino;
use crate::pm::PmDevice;
use crate::share::Mark;
use crate::{Error, Result};
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl<D: PmDevice> FileSystem<D> {
    /// On a mount shared by many processes: this process maps `ino` writable and shared
    /// (`on`: before its first store through the mapping can be made), or no longer does
    /// (after its last such mapping of `ino` went). Both are published as a change of
    /// `ino`, so that the others' followers see them. Nothing on a mount of one process;
    /// `Invalid` when this process does not have `ino` open (a mapping holds its file).
    pub fn note_mapped_writable(&self, ino: Ino, on: bool) -> Result<()> {
        let Some(sh) = self.inner.shared.get() else { return Ok(()) };
        let _in = self.inner.enter();
        if on {
            self.inner.marked_again(sh, ino);
        } else if self.inner.unmark_waits(sh, ino) {
            return Ok(()); // a child on its way may store through the mapping it inherited
        }
        if !sh.region.open_inodes().set_mark(ino, sh.me(), Mark::Writable, on) {
            return Err(Error::Invalid("a file mapped writable is open"));
        }
        // Published either way: the mark before the first store, for the others' copies;
        // its end after the last, for a mount's kernel (`hashfs-fuse/src/watch.rs`), which
        // drops its pages of the file at each reading while it is marked, and so may have
        // read the pages between its last reading and the last stores.
        super::touched(ino);
        Ok(())
    }

    /// Whether another participant maps `ino` writable and shared (read without the image
    /// lock; false on a mount of one process). A read-only participant asks its writers'
    /// region, once there is one.
    pub fn mapped_writable_elsewhere(&self, ino: Ino) -> bool {
        if let Some(sh) = self.inner.shared.get() {
            return sh.region.open_inodes().marked_by_others(ino, Some(sh.me()), Mark::Writable);
        }
        self.change_region().is_some_and(|r| r.open_inodes().marked_by_others(ino, None, Mark::Writable))
    }

    /// The inodes other participants map writable and shared (a look through the region's
    /// open-inode table, without the image lock: for a front end that starts to follow
    /// them, such as a mount whose kernel caches pages). Empty on a mount of one process.
    pub fn mapped_writable_elsewhere_all(&self) -> Vec<Ino> {
        if let Some(sh) = self.inner.shared.get() {
            return sh.region.open_inodes().marked_inodes(Some(sh.me()), Mark::Writable);
        }
        self.change_region().map(|r| r.open_inodes().marked_inodes(None, Mark::Writable)).unwrap_or_default()
    }
}

impl<D: PmDevice> FsInner<D> {
    /// This process's first pin of `cell`'s blocks (a mapping of its pages, `fs/map.rs`),
    /// inside a call: marked in the region, so that no other participant frees or moves
    /// them under the mapping.
    pub(crate) fn pin_marked(&self, cell: &InodeCell) {
        if let Some(sh) = self.shared.get() {
            sh.region.open_inodes().set_mark(cell.ino, sh.me(), Mark::Blocks, true);
        }
        // A read-only participant, which may not store to the region, pins them with a
        // lock on the image file instead.
        self.pin_blocks_read_only(cell, true);
    }

    /// This process's last pin of `cell`'s blocks went (outside the lock): the mark goes,
    /// unless a pin came again meanwhile (counted before its mark, under the lock), or a
    /// child forked and not yet joined may have inherited the mapping: the child marks the
    /// blocks under its own name only as it joins (`fork.rs`), so this mark stays until
    /// every such child has (`for_children.rs`). Without that wait another process could
    /// free the blocks between this unmap and the child's join, under the child's mapping.
    pub(crate) fn unpinned(&self, cell: &Arc<InodeCell>) {
        self.pin_blocks_read_only(cell, false);
        let Some(sh) = self.shared.get() else { return };
        let _in = self.enter();
        if cell.map_count.load(Ordering::Acquire) != 0 || self.unpin_waits(sh, cell) {
            return;
        }
        sh.region.open_inodes().set_mark(cell.ino, sh.me(), Mark::Blocks, false);
    }

    /// Whether another participant that stays (alive, not leaving at its `execve`) maps
    /// the blocks of `ino`, or a read-only participant does (its lock on the image file:
    /// a system call, asked only when no writer's mark answered). A dead one's marks go
    /// when it is reaped; until then they are passed over here.
    pub(crate) fn pinned_elsewhere(&self, ino: Ino) -> bool {
        let Some(sh) = self.shared.get() else { return false };
        let marked = sh.region.open_inodes().marked(ino, Mark::Blocks).without(Some(sh.me()));
        let writer = marked.iter().any(|p| sh.region.participants().staying(p));
        writer || self.dev.backing_fd().is_some_and(|fd| crate::share::pins::blocks_pinned(fd, ino))
    }

    /// Whether a mapping of `cell`'s blocks lives in this process or another (a reader's
    /// included): its blocks may then not be freed or moved.
    pub(crate) fn mapped_anywhere(&self, cell: &InodeCell) -> bool {
        cell.map_count.load(Ordering::Acquire) > 0 || self.pinned_elsewhere(cell.ino)
    }

    /// Whether a writer's mapping of `cell`'s blocks lives in this process or another (no
    /// question to the kernel): one that may store into the file, which a one-fence
    /// append's tag must not cover (`fs/hashfs/append_tag.rs`; a read-only participant's
    /// mappings store nothing).
    pub(crate) fn mapped_by_a_writer(&self, cell: &InodeCell) -> bool {
        cell.map_count.load(Ordering::Acquire) > 0
            || self
                .shared
                .get()
                .is_some_and(|sh| sh.region.open_inodes().marked_by_others(cell.ino, Some(sh.me()), Mark::Blocks))
    }
}

/// A file system a pin of a file's blocks tells of the file's last unpin in this process
/// ([`FsInner::unpinned`]; `fs/map.rs`'s `BlockPin`, which is not generic over the device).
pub(crate) trait PinOwner: Send + Sync {
    fn unpinned(&self, cell: &Arc<InodeCell>);
}

impl<D: PmDevice> PinOwner for FsInner<D> {
    fn unpinned(&self, cell: &Arc<InodeCell>) {
        FsInner::unpinned(self, cell)
    }
}
