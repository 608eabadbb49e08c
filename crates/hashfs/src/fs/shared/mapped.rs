//! Writable shared mappings across participants (issue 55, item 4: a shared mapping of one
//! file in two processes shows one set of bytes).
//!
//! A store through a writable shared mapping goes straight to the file's blocks in the
//! image: no call, so no ring names it. A front end that serves another process's mapping of
//! that file by a copy (the shim's `mmap/copy.rs`) would keep the old bytes. So each
//! participant marks, in the open-inode table, the inodes it maps writable and shared
//! ([`FileSystem::note_mapped_writable`]), and a front end keeps no copy of a file another
//! participant marked ([`FileSystem::mapped_writable_elsewhere`]): it gives it back to the
//! file's pages.
//!
//! The order that makes it whole: the marker stores its mark, publishes the inode in the
//! ring of changes (its call's publication), and only then returns to map the file (so
//! before its first store). A front end reads the ring from a position taken before its
//! first copy was made, and asks about the mark after each copy is recorded and for each
//! change of the file it reads. So a copy recorded before the mark was stored is given back
//! when the mark's publication is read, and one recorded after it sees the mark. A mark
//! goes with its participant's last writable mapping of the file, its last close, and its
//! death (`OpenInodes::release_all_of`).

use crate::fs::api::FileSystem;
use crate::layout::Ino;
use crate::pm::PmDevice;
use crate::{Error, Result};

impl<D: PmDevice> FileSystem<D> {
    /// On a mount shared by many processes: this process maps `ino` writable and shared
    /// (`on`: before its first store through the mapping can be made), or no longer does
    /// (after its last such mapping of `ino` went). Both are published as a change of
    /// `ino`, so that the others' followers see them. Nothing on a mount of one process;
    /// `Invalid` when this process does not have `ino` open (a mapping holds its file).
    pub fn note_mapped_writable(&self, ino: Ino, on: bool) -> Result<()> {
        let Some(sh) = self.inner.shared.get() else { return Ok(()) };
        let _in = self.inner.enter();
        if !sh.region.open_inodes().set_mapped(ino, sh.me(), on) {
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
            return sh.region.open_inodes().mapped_by_others(ino, Some(sh.me()));
        }
        self.change_region().is_some_and(|r| r.open_inodes().mapped_by_others(ino, None))
    }

    /// The inodes other participants map writable and shared (a look through the region's
    /// open-inode table, without the image lock: for a front end that starts to follow
    /// them, such as a mount whose kernel caches pages). Empty on a mount of one process.
    pub fn mapped_writable_elsewhere_all(&self) -> Vec<Ino> {
        if let Some(sh) = self.inner.shared.get() {
            return sh.region.open_inodes().mapped_inodes(Some(sh.me()));
        }
        self.change_region().map(|r| r.open_inodes().mapped_inodes(None)).unwrap_or_default()
    }
}
