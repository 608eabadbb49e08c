//! A read-only participant (docs/design.md, "Many processes on one image", *Trust*): a
//! process that may read the image file but not write it. It maps the image and the
//! region read-only, so that it cannot change what the others share (a store would
//! fault); it takes no lock word, holds no slot and names no open file in the region (its
//! record locks and pins are the kernel's, on the image file: `share/read_only_locks.rs`,
//! `share/pins.rs`). Every
//! call that would change the image fails with EROFS; every other call reads under the
//! image lock's sequence word (`ImageWords::writing`, odd while a participant holds the
//! lock): it waits for an even sequence, catches up with the ring of changes, runs, and
//! runs again if the sequence moved meanwhile. The read side's in-place overwrites take
//! no image lock: such a read may see one half done, as a read of a participant does.
//!
//! With no region (no writer has the image), the image must be clean: a process that may
//! write it has to recover it first. A writer that comes later makes the region; each
//! call looks for it after it ran, and one that appeared sends the call round again with
//! the region attached and the whole ring read (the newcomer's first mount publishes a
//! refresh of everything). The region stays while this process holds the image file's
//! shared lock: the last writer to leave removes it only when no other process holds it.
//!
//! A read-only participant names no open file in the region, so a file it has open that
//! another process unlinks is freed at that process's last close; its reads then fail with
//! ESTALE.

use crate::fs::inode::InodeCell;
use crate::fs::recovery::{self, MountAs, MountReport};
use crate::fs::{FsInner, Progress};
use crate::layout::SB_STATE_CLEAN;
use crate::pm::PmDevice;
use crate::share::{region_bytes, Identity, ImageRegion, Region};
use crate::{Error, Result};
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// How long a read-only participant waits for a lock a dead participant left held to be
/// taken over by a live one (it cannot recover the image itself).
const PATIENCE: Duration = Duration::from_secs(2);

/// A read-only participant's view of the image's region.
pub(crate) struct ReadOnlyMount {
    /// The region once a writer made it (attached at mount, or by the first call after).
    region: OnceLock<Arc<ImageRegion>>,
    path: PathBuf,
    id: Identity,
    /// The image's inode count and table state layout (the region's size depends on them).
    inodes: u64,
    table: crate::share::TableLayout,
    /// Whether a writer may come and make the region (HashFS's shared mapping; other
    /// images' writers take the image file's lock exclusive, which this process's shared
    /// hold keeps out).
    watch: bool,
    /// Changes of the ring this process's caches reflect.
    seen: AtomicU64,
    /// Held while this process's threads catch up.
    catching: parking_lot::Mutex<()>,
    /// This process's own descriptor of the image (a new open file description, so that
    /// a forked child, which makes its own, never lets go of the parent's pins), through
    /// which it pins the inodes it has open and holds its record locks; held while a
    /// file's open count moves and through a record lock call.
    pub(super) pins: super::ForkMutex<Pins>,
    /// Held shared by every call, exclusive across a fork (so that the child's copy of
    /// the caches is one no thread was changing, as a writer's image lock makes it).
    calls: super::ForkRwLock<()>,
}

thread_local! {
    /// Whether this thread is inside a read-only participant's call (nested calls run as
    /// part of it). No destructor, as `DEPTH` in `mod.rs`.
    static IN_CALL: Cell<bool> = const { Cell::new(false) };
}

/// Mounts `dev` (mapped read-only) as a read-only participant (see the module).
pub(crate) fn mount_read_only<D: PmDevice>(
    dev: Arc<D>,
    region_path: &Path,
    progress: Progress<'_>,
) -> Result<(Arc<FsInner<D>>, MountReport)> {
    let (sb, geo, _) = crate::fs::read_superblock(&*dev)?;
    let id = Identity::of_image(sb.uuid)?;
    let needs_recovery = || {
        Error::Io(std::io::Error::other(
            "the image was not unmounted cleanly and is not mounted by a live process: a process that may write \
             it must recover it (mount it once) before a read-only one can read it",
        ))
    };
    // Images of other mappings are used by one process at a time, which takes the image
    // file's lock exclusive: the shared lock this process holds keeps such a writer out.
    let watch = crate::fs::hashfs::shared_by_processes(&sb);
    let inodes = geo.inode_count;
    let table = super::table_layout(&sb, &geo);
    let region = if watch {
        Region::attach_read_only(region_path, &id, region_bytes(inodes, table))?
            .map(|r| Arc::new(ImageRegion::new(r, inodes, table)))
    } else {
        None
    };
    let from = match &region {
        Some(r) => {
            let words = r.words();
            r.sequence_even(PATIENCE).map_err(|_| needs_recovery())?;
            if words.mounted.load(Ordering::Acquire) != 0 {
                let parts = r.participants();
                let live =
                    (0..crate::share::MAX_PARTICIPANTS as u32).any(|p| parts.alive(crate::share::Participant(p)));
                if !live {
                    return Err(needs_recovery());
                }
            } else if sb.state != SB_STATE_CLEAN {
                return Err(needs_recovery());
            }
            words.changes.load(Ordering::Acquire)
        }
        None if sb.state != SB_STATE_CLEAN => return Err(needs_recovery()),
        None => 0,
    };
    // As a participant joining beside the others reads it (`join.rs`): what a call
    // changes meanwhile is named in the ring after `from`, read again at the first call.
    let (inner, report) = recovery::mount(dev, progress, MountAs::Reading)?;
    inner.unmounted.store(true, Ordering::Release); // nothing to write at the end
    let ro = ReadOnlyMount {
        region: OnceLock::new(),
        path: region_path.to_path_buf(),
        id,
        inodes,
        table,
        watch,
        seen: AtomicU64::new(from),
        catching: parking_lot::Mutex::new(()),
        calls: super::ForkRwLock::new(()),
        pins: super::ForkMutex::new(Pins::default()),
    };
    ro.pins.lock().file = Some(reopen(&*inner.dev)?);
    if let Some(r) = region {
        // The writers' table state from here on (the grouped placements').
        super::share_table(&inner, &r, false)?;
        let _ = ro.region.set(r);
    }
    let made = inner.read_only.set(ro);
    debug_assert!(made.is_ok(), "a fresh mount is made read-only once");
    Ok((inner, report))
}

impl ReadOnlyMount {
    /// Before `fork`: no call of this process's runs until [`Self::after_fork`] (in the
    /// parent, and in the child, which continues with the parent's caches and holds
    /// nothing in the region either). `for_child` makes the child's pins (under the pins'
    /// lock: no file opens or closes meanwhile).
    pub(super) fn before_fork(&self, for_child: impl FnOnce(bool) -> Option<std::fs::File>) {
        std::mem::forget(self.calls.write());
        let mut pins = self.pins.lock();
        pins.for_child = for_child(pins.watching);
        std::mem::forget(pins);
    }

    /// This reader follows the ring of data changes from now on (its copies of files take
    /// the writers' overwrites in place, which only that ring names), once: it marks itself
    /// by a lock ([`crate::share::pins::WATCHES_DATA`]) and waits [`WATCH_SETTLE`]. A
    /// writer notes an overwrite while it finds the mark, and trusts a "none" for less than
    /// that ([`FsInner::reader_watches_data`]): so an overwrite it let pass was stored
    /// before this returns, before the copy is filled.
    pub(super) fn watch_data(&self) -> Result<()> {
        let mut pins = self.pins.lock();
        if pins.watching {
            return Ok(());
        }
        let f = pins.file.as_ref().ok_or(Error::Unsupported("a read-only participant without its pins"))?;
        crate::share::pins::watch_data(f, libc::F_RDLCK)?;
        pins.watching = true;
        drop(pins);
        std::thread::sleep(WATCH_SETTLE);
        Ok(())
    }

    /// After `fork` in the parent (or one that failed): its descriptor of the child's pins
    /// goes; the description, and the pins on it, are the child's.
    pub(super) fn after_fork_in_parent(&self) {
        self.after_fork();
        self.pins.lock().for_child = None;
    }

    /// After `fork` (or one that failed), in either process.
    pub(super) fn after_fork(&self) {
        // SAFETY: held by `before_fork` in this thread (the child's copies of them too),
        // their guards forgotten.
        unsafe {
            self.pins.force_unlock();
            self.calls.force_unlock_write();
        }
    }

    /// The region, attached if a writer made it since.
    pub(super) fn region(&self) -> Result<Option<&Arc<ImageRegion>>> {
        self.region_adopting(|_| Ok(()))
    }

    /// [`Self::region`], calling `adopt` on it when this call attached it.
    fn region_adopting(
        &self,
        adopt: impl FnOnce(&Arc<ImageRegion>) -> Result<()>,
    ) -> Result<Option<&Arc<ImageRegion>>> {
        if let Some(r) = self.region.get() {
            return Ok(Some(r));
        }
        match Region::attach_read_only(&self.path, &self.id, region_bytes(self.inodes, self.table))? {
            None => Ok(None),
            Some(r) => {
                // Every change since the region was made is in its ring from 0 (or the
                // ring says to read everything again).
                self.seen.store(0, Ordering::Relaxed);
                let r = Arc::new(ImageRegion::new(r, self.inodes, self.table));
                if self.region.set(r.clone()).is_ok() {
                    adopt(&r)?;
                }
                Ok(self.region.get())
            }
        }
    }
}

/// A read-only participant's own description of the image and what it holds there.
#[derive(Default)]
pub(super) struct Pins {
    pub(super) file: Option<std::fs::File>,
    /// Across a fork: a description of the image made for the child, holding the pins of
    /// everything the parent has open or maps ([`FsInner::pins_for_child`]).
    for_child: Option<std::fs::File>,
    /// Whether [`Self::file`] holds the mark that this reader follows the ring of data
    /// changes ([`ReadOnlyMount::watch_data`]).
    watching: bool,
    /// Its record locks (`share/read_only_locks.rs`).
    pub(super) locks: crate::share::read_only_locks::ReaderLocks,
}

/// A new open file description of `dev`'s image file (read-only).
fn reopen<D: PmDevice>(dev: &D) -> Result<std::fs::File> {
    let fd = dev.backing_fd().ok_or(Error::Unsupported("a read-only participant needs an image file"))?;
    let f = crate::pm::out_of_the_way(std::fs::File::open(format!("/proc/self/fd/{fd}"))?);
    crate::pm::keep(&f); // its pins are locks on its description
    Ok(f)
}

/// What a read-only participant waits once, after it marks itself as following the ring
/// of data changes, before it fills its first copy ([`ReadOnlyMount::watch_data`]).
const WATCH_SETTLE: std::time::Duration = std::time::Duration::from_millis(10);

/// The clock a writer reads to age its last answer to whether a reader follows the ring of
/// data changes, and how long (ns of it) a "no" is trusted: `CLOCK_MONOTONIC_COARSE` when
/// it ticks at least every 4 ms (a reading lags the time by up to a tick: trusted for
/// [`WATCH_SETTLE`] less a tick and a millisecond), else `CLOCK_MONOTONIC`, for 1 ms.
fn watch_clock() -> (libc::clockid_t, u64) {
    static CLOCK: std::sync::OnceLock<(libc::clockid_t, u64)> = std::sync::OnceLock::new();
    *CLOCK.get_or_init(|| {
        let mut res = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: a valid timespec for the kernel to fill.
        let ok = unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut res) } == 0;
        let tick = res.tv_sec as u64 * 1_000_000_000 + res.tv_nsec as u64;
        let settle = WATCH_SETTLE.as_nanos() as u64;
        if ok && tick <= 4_000_000 {
            (libc::CLOCK_MONOTONIC_COARSE, settle - tick - 1_000_000)
        } else {
            (libc::CLOCK_MONOTONIC, 1_000_000)
        }
    })
}

impl<D: PmDevice> FsInner<D> {
    /// A writer, about to note an overwrite in place: whether a read-only participant
    /// follows the ring of data changes ([`ReadOnlyMount::watch_data`]). The kernel is
    /// asked again once the last answer is older than [`watch_clock`]'s trust (less than
    /// the [`WATCH_SETTLE`] a reader waits after it marks itself, the clock's coarseness
    /// counted); the answer and when it was asked (before the question) are kept in
    /// `sh.data_readers_asked` as `time << 1 | answer`. A clock read per overwrite in
    /// place on a shared mount (8 ns coarse, 30 precise, measured 2026-12-06 by hand).
    pub(super) fn reader_watches_data(&self, sh: &super::SharedMount) -> bool {
        let (clock, trust) = watch_clock();
        let asked = sh.data_readers_asked.load(Ordering::Acquire);
        let t = crate::share::read_only_locks::clock_ns(clock);
        if asked != 0 && t.saturating_sub(asked >> 1) < trust {
            return asked & 1 != 0;
        }
        let yes = self.dev.backing_fd().is_some_and(crate::share::pins::data_watched);
        sh.data_readers_asked.store(t << 1 | u64::from(yes), Ordering::Release);
        yes
    }

    /// A read-only participant opens `cell` (its open count up; the first open pins it).
    pub(crate) fn hold_read_only(&self, cell: &InodeCell) -> Result<()> {
        let Some(ro) = self.read_only.get() else { return Ok(()) };
        let pins = ro.pins.lock();
        if cell.open_count.load(Ordering::Acquire) == 0 {
            let f = pins.file.as_ref().ok_or(Error::Unsupported("a read-only participant without its pins"))?;
            crate::share::pins::pin(f, cell.ino, libc::F_RDLCK)?;
        }
        cell.open_count.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// A read-only participant closes `cell` (the last close lets go of its pin).
    pub(crate) fn release_read_only(&self, cell: &InodeCell) {
        let Some(ro) = self.read_only.get() else { return };
        let pins = ro.pins.lock();
        if cell.open_count.fetch_sub(1, Ordering::AcqRel) == 1 {
            if let Some(f) = pins.file.as_ref() {
                let _ = crate::share::pins::pin(f, cell.ino, libc::F_UNLCK);
            }
        }
    }

    /// Before a read-only participant's fork (under the pins' lock): a description of the
    /// image of the child's own, pinning what the parent has open and maps. The child
    /// inherits it, and the parent closes its descriptor after the fork: the pins are then
    /// the child's alone, from before the fork on. (Until 2026-12-06 the child made them
    /// itself after the fork, and a parent that closed a file at once let go of its pin
    /// first: a writer could free the file between the two, under the child.)
    pub(super) fn pins_for_child(&self, watching: bool) -> Option<std::fs::File> {
        let f = reopen(&*self.dev).ok()?;
        self.pin_all_on(&f, watching).ok()?;
        Some(f)
    }

    /// Pins on `f` everything this process has open or maps, and the mark that it follows
    /// the ring of data changes if it does.
    fn pin_all_on(&self, f: &std::fs::File, watching: bool) -> Result<()> {
        if watching {
            crate::share::pins::watch_data(f, libc::F_RDLCK)?;
        }
        for cell in self.inodes.cells() {
            if cell.open_count.load(Ordering::Acquire) > 0 {
                crate::share::pins::pin(f, cell.ino, libc::F_RDLCK)?;
            }
            if cell.map_count.load(Ordering::Acquire) > 0 {
                crate::share::pins::pin_blocks(f, cell.ino, libc::F_RDLCK)?;
            }
        }
        Ok(())
    }

    /// In a read-only participant's forked child: its own description's pins, made by the
    /// parent before the fork ([`Self::pins_for_child`]; or made now, if the parent could
    /// not), and no record lock (the parent's stay the parent's, on its description).
    pub(crate) fn repin_after_fork(&self) {
        let Some(ro) = self.read_only.get() else { return };
        let mut pins = ro.pins.lock();
        pins.locks.forget();
        let watching = pins.watching;
        pins.file = match pins.for_child.take() {
            Some(f) => Some(f),
            None => reopen(&*self.dev).ok().filter(|f| self.pin_all_on(f, watching).is_ok()),
        };
        pins.watching = watching && pins.file.is_some();
    }

    /// A read-only participant's first mapping of `cell`'s blocks (`on`, its map count
    /// just up from 0), or its last one gone: the pin on the blocks taken or let go
    /// (`share/pins.rs`). Under the pins' lock, so that a pin and an unpin of the file at
    /// once end as its map count says.
    pub(crate) fn pin_blocks_read_only(&self, cell: &InodeCell, on: bool) {
        let Some(ro) = self.read_only.get() else { return };
        let pins = ro.pins.lock();
        let Some(f) = pins.file.as_ref() else { return };
        let mapped = cell.map_count.load(Ordering::Acquire) > 0;
        if on && mapped {
            if crate::share::pins::pin_blocks(f, cell.ino, libc::F_RDLCK).is_err() {
                eprintln!("hashfs: inode {}: could not pin the blocks a mapping of it maps", cell.ino.0);
            }
        } else if !on && !mapped {
            let _ = crate::share::pins::pin_blocks(f, cell.ino, libc::F_UNLCK);
        }
    }

    /// A read-only participant leaves (its mount dropped): if no other process holds the
    /// image, the region goes, as the last writer to leave removes it (`leave_shared`).
    /// A writer that left while this process held the image kept it; without this it
    /// stayed until a writer used the image again (until reboot if the image was removed
    /// meanwhile). No other process holds the image's lock, so none uses the region or is
    /// attaching it (each takes the lock shared before it attaches); one of another user
    /// may own the region file, which then stays (`/dev/shm` is sticky).
    ///
    /// Save when a writer's `execve` handed descriptions over to the program it starts
    /// (`fork.rs`, counted in `ImageWords::forks`): between the exec and that program's
    /// join no one holds the image's lock (the writer's descriptor of it closed on exec),
    /// and the program finds what it inherited in this region.
    pub(crate) fn leave_read_only(&self) {
        let Some(ro) = self.read_only.get() else { return };
        if !ro.watch || !self.dev.try_lock_alone() {
            return;
        }
        let handed_over = match ro.region() {
            Ok(Some(r)) => r.words().forks.load(Ordering::Acquire) != 0,
            Ok(None) => false,
            Err(_) => true, // not read: kept, as a writer would keep it
        };
        if !handed_over {
            let _ = crate::share::remove_region(&ro.path);
        }
    }

    /// Whether this is a read-only participant's mount.
    /// A read-only participant's view of the region, if a writer made one.
    pub(crate) fn read_only_region(&self) -> Option<&Arc<ImageRegion>> {
        self.read_only.get()?.region().ok().flatten()
    }

    pub(crate) fn is_read_only(&self) -> bool {
        self.read_only.get().is_some()
    }

    /// EROFS on a read-only participant's mount: the caller would change the image.
    pub(crate) fn writable(&self) -> Result<()> {
        if self.is_read_only() {
            return Err(Error::ReadOnly);
        }
        Ok(())
    }

    /// Runs `call`, which changes nothing: on a read-only participant's mount, under the
    /// image lock's sequence, again until no participant held the lock while it ran (see
    /// the module); elsewhere once (the caller takes what it needs).
    pub(crate) fn read_call<T>(&self, mut call: impl FnMut() -> Result<T>) -> Result<T> {
        let Some(ro) = self.read_only.get() else { return call() };
        if IN_CALL.with(Cell::get) {
            return call();
        }
        struct Out;
        impl Drop for Out {
            fn drop(&mut self) {
                IN_CALL.with(|c| c.set(false));
            }
        }
        IN_CALL.with(|c| c.set(true));
        let _out = Out;
        let _calls = ro.calls.read();
        loop {
            // A region attached now brings the writers' table state (a call of this
            // process's own beside it is tried again: it ran before the region was there).
            match ro.region_adopting(|r| super::share_table(self, r, false))? {
                Some(region) => {
                    let seq = region.sequence_even(PATIENCE).map_err(|owner| {
                        Error::Io(std::io::Error::other(format!(
                            "participant {owner:?} died holding the image lock and no process that may write the \
                             image has recovered it"
                        )))
                    })?;
                    self.catch_up_with(region, &ro.seen, &ro.catching);
                    let out = call();
                    crate::fs::race_point::reached("read-only: a call read the image");
                    if region.sequence_unchanged(seq) {
                        return out;
                    }
                }
                None => {
                    let out = call();
                    crate::fs::race_point::reached("read-only: a call read the image");
                    // Again if a writer made the region meanwhile (attached now); a stale
                    // file at its name (another boot's) is not one.
                    if !ro.watch || ro.region()?.is_none() {
                        return out;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_image::{check_and_remove, image};
    use crate::fs::race_point::with_between;
    use crate::layout::inode::InodeState;
    use crate::{Error, FileSystem, OpenOptions};
    use std::path::Path;
    use std::sync::atomic::Ordering;

    /// A read-only participant reads what a writer made, is refused every change with
    /// EROFS, and leaves the image's bytes as they were.
    #[test]
    fn a_read_only_participant_reads_and_changes_nothing() {
        let image = &image("ro-refused");
        let (a, _) = FileSystem::open_shared(image).unwrap();
        a.create_dir(Path::new("/d"), 0o755).unwrap();
        a.write(Path::new("/d/f"), b"the writer's").unwrap();
        let (b, _) = FileSystem::open_read_only(image).unwrap();
        assert!(b.is_read_only());
        let before = std::fs::read(image).unwrap();
        assert_eq!(b.read(Path::new("/d/f")).unwrap(), b"the writer's");
        assert_eq!(b.read_dir(Path::new("/d")).unwrap().len(), 1);
        let p = Path::new;
        let refused: Vec<(&str, Result<(), Error>)> = vec![
            ("write", b.write(p("/d/f"), b"mine")),
            ("create", b.write(p("/d/g"), b"mine")),
            ("mkdir", b.create_dir(p("/e"), 0o755).map(drop)),
            ("unlink", b.remove_file(p("/d/f"))),
            ("rmdir", b.remove_dir(p("/d"))),
            ("rename", b.rename(p("/d/f"), p("/d/h"))),
            ("link", b.hard_link(p("/d/f"), p("/d/h"))),
            ("symlink", b.symlink(p("/d/f"), p("/d/s"))),
            ("chmod", b.set_permissions(p("/d/f"), 0o600)),
            ("open for writing", b.open_file(p("/d/f"), OpenOptions::new().write(true)).map(drop)),
            ("open to create", b.open_file(p("/d/n"), OpenOptions::new().write(true).create(true)).map(drop)),
        ];
        for (what, r) in refused {
            assert!(matches!(r, Err(Error::ReadOnly)), "{what}: {r:?}");
        }
        let f = b.open_file(p("/d/f"), OpenOptions::new().read(true)).unwrap();
        assert!(matches!(f.write_at(0, b"x"), Err(Error::BadDescriptor)));
        f.sync_all().unwrap();
        drop(f);
        drop(b);
        assert!(std::fs::read(image).unwrap() == before, "a read-only participant changed the image");
        assert_eq!(a.read(Path::new("/d/f")).unwrap(), b"the writer's");
        drop(a);
        check_and_remove(image);
    }

    /// A writer rewrites a file (truncated, then written longer: HashFS's table gives its
    /// first block the same slot, so the new bytes land where the old ones were) while a
    /// read-only participant reads it, after its open and before its read. The reader must
    /// answer with the old bytes or the new ones, never the new bytes cut to the old size:
    /// it reads again because the image lock's sequence moved. A reader that trusts its
    /// first pass (`read-only-unvalidated`) returns the cut bytes.
    #[test]
    fn a_read_beside_a_change_is_read_again() {
        let image = &image("ro-again");
        let (a, _) = FileSystem::open_shared(image).unwrap();
        a.write(Path::new("/f"), b"old bytes of f").unwrap();
        let (b, _) = FileSystem::open_read_only(image).unwrap();
        let read = with_between(
            "read: the file opened",
            || a.write(Path::new("/f"), b"NEW BYTES OF F, LONGER").unwrap(),
            || b.read(Path::new("/f")).unwrap(),
        );
        assert!(read == b"old bytes of f" || read == b"NEW BYTES OF F, LONGER", "{:?}", String::from_utf8_lossy(&read));
        assert_eq!(b.read(Path::new("/f")).unwrap(), b"NEW BYTES OF F, LONGER");
        drop((a, b));
        check_and_remove(image);
    }

    /// A writer's file `/f` that a read-only participant opens while, when the reader
    /// reaches the race point `at`, the writer renames a new file over it and makes an empty
    /// one, which takes the freed inode (asserted): the bytes the reader's open reads, or its
    /// error. The image is checked and removed either way.
    fn read_beside_a_rename(name: &str, at: &'static str) -> crate::Result<Vec<u8>> {
        let image = &image(name);
        let (a, _) = FileSystem::open_shared(image).unwrap();
        a.write(Path::new("/f"), b"the old file").unwrap();
        let old = a.metadata(Path::new("/f")).unwrap().ino;
        let (b, _) = FileSystem::open_read_only(image).unwrap();
        let took = std::sync::Mutex::new(None);
        let f = with_between(
            at,
            || {
                a.write(Path::new("/t"), b"the new file").unwrap();
                a.rename(Path::new("/t"), Path::new("/f")).unwrap();
                a.write(Path::new("/empty"), b"").unwrap();
                *took.lock().unwrap() = Some(a.metadata(Path::new("/empty")).unwrap().ino);
            },
            || b.open_file(Path::new("/f"), OpenOptions::new().read(true)),
        );
        assert_eq!(took.lock().unwrap().take(), Some(old), "the empty file takes the freed inode");
        let read = f.map(|f| {
            let mut buf = [0u8; 64];
            let n = f.read_at(0, &mut buf).unwrap();
            buf[..n].to_vec()
        });
        drop((a, b));
        check_and_remove(image);
        read
    }

    /// A writer renames a file over the one a read-only participant is opening (after the
    /// reader resolved the name, before it found the inode) and makes a new empty file,
    /// which takes the freed inode: the reader must open the old file or the new one under
    /// that name, never the empty file. Its name is resolved and its inode found in one
    /// call; found in a call of their own (`read-only-open-split`), which catches up with
    /// the writer first, the reader opens the empty file. (The shim, which resolves and
    /// opens in calls of its own, runs them as one with `FileSystem::read_together`.)
    #[test]
    fn an_open_beside_a_rename_opens_a_file_the_name_had() {
        let read = read_beside_a_rename("ro-open", "open: a read-only participant resolved the name").unwrap();
        assert!(read == b"the old file" || read == b"the new file", "{:?}", String::from_utf8_lossy(&read));
    }

    /// A writer renames a file over the one a read-only participant is opening after the
    /// reader found its inode and before it pinned it, and makes a new empty file, which
    /// takes the freed inode: the pin finds the inode's generation changed, and the open
    /// resolves the name again and opens the file renamed over it. Planted: the generation
    /// not asked again after the pin (`read-only-pin-unchecked`: the reader opens the
    /// empty file), the stale open not tried again (`open-stale-not-retried`: ESTALE).
    #[test]
    fn an_open_whose_inode_is_freed_before_its_pin_opens_the_name_again() {
        let read = read_beside_a_rename("ro-pin", "open: a read-only participant found the inode")
            .expect("the open, tried again, finds the new file");
        assert_eq!(read, b"the new file", "{:?}", String::from_utf8_lossy(&read));
    }

    /// A file a read-only participant has open stays whole when a writer removes it and
    /// makes another (the reader's pin keeps the inode and its blocks, as an open file
    /// stays on Linux), and is freed once the reader lets go: fsck finds no orphan.
    #[test]
    fn a_file_a_read_only_participant_has_open_stays_until_it_closes() {
        let image = &image("ro-pinned");
        let (a, _) = FileSystem::open_shared(image).unwrap();
        a.write(Path::new("/f"), b"the old file").unwrap();
        let old = a.metadata(Path::new("/f")).unwrap().ino;
        let (b, _) = FileSystem::open_read_only(image).unwrap();
        let f = b.open_file(Path::new("/f"), OpenOptions::new().read(true)).unwrap();
        a.remove_file(Path::new("/f")).unwrap();
        for i in 0..8 {
            a.write(Path::new(&format!("/new{i}")), b"a new file in the freed space?").unwrap();
        }
        let mut buf = [0u8; 64];
        let n = f.read_at(0, &mut buf).unwrap();
        assert_eq!(&buf[..n], b"the old file", "the open file changed under the reader");
        assert!(matches!(b.read(Path::new("/f")), Err(Error::NotFound)));
        drop(f);
        std::thread::sleep(std::time::Duration::from_millis(2));
        a.set_permissions(Path::new("/new0"), 0o600).unwrap(); // a call after the close frees the orphan
        let mut raw = crate::fs::inode::read_raw(&*a.inner.dev, &a.inner.geo, old);
        crate::fs::hashfs::append_tag::read_plain(&mut raw);
        assert_eq!(raw.check(old), crate::layout::inode::InodeState::Free, "the orphan outlived the reader's close");
        drop(b);
        drop(a);
        check_and_remove(image);
    }

    /// A file a read-only participant pins stays when a writer dies in a call that named
    /// it and the next takes over: the scoped takeover (`takeover.rs`) frees the unlinked
    /// inodes the dead call named only if no one has them open and no reader pins them.
    /// `scoped-frees-pinned` (the pin not asked) frees it under the reader.
    #[test]
    fn a_file_a_read_only_participant_pins_outlives_a_takeover() {
        let image = &image("ro-pinned-takeover");
        let (a, _) = FileSystem::open_shared(image).unwrap();
        a.write(Path::new("/f"), b"the old file").unwrap();
        let ino = a.metadata(Path::new("/f")).unwrap().ino;
        let (b, _) = FileSystem::open_read_only(image).unwrap();
        let f = b.open_file(Path::new("/f"), OpenOptions::new().read(true)).unwrap();
        a.remove_file(Path::new("/f")).unwrap(); // kept for the reader
                                                 // A second writer dies holding the lock, inside a call that named the file.
        let (c, _) = FileSystem::open_shared(image).unwrap();
        let (region, dying) = c.inner.shared_parts().unwrap();
        let _ = region.lock_image(dying);
        let words = region.words();
        words.scope.reset(words.table_used.load(Ordering::Acquire), words.inodes_used.load(Ordering::Acquire));
        words.scope.inode(ino, || true);
        region.participants().pretend_dead(dying);
        std::mem::forget(c); // dead: it neither leaves nor unmaps
        a.set_permissions(Path::new("/"), 0o755).unwrap(); // takes the lock over
        assert_eq!((a.shared_takeovers(), a.shared_takeovers_scoped()), (Some(1), Some(1)));
        let mut raw = crate::fs::inode::read_raw(&*a.inner.dev, &a.inner.geo, ino);
        crate::fs::hashfs::append_tag::read_plain(&mut raw);
        assert_eq!(raw.check(ino), InodeState::Allocated, "the takeover freed a file the reader has open");
        let mut buf = [0u8; 64];
        let n = f.read_at(0, &mut buf).unwrap();
        assert_eq!(&buf[..n], b"the old file");
        drop(f);
        std::thread::sleep(std::time::Duration::from_millis(2));
        a.set_permissions(Path::new("/"), 0o755).unwrap(); // a call after the close frees it
        drop(b);
        drop(a);
        // The dead writer's descriptor still holds the image: fsck reads a copy.
        let copy = format!("{}.copy", image.display());
        std::fs::copy(image, &copy).unwrap();
        let dev = crate::pm::MmapDevice::open(Path::new(&copy), crate::pm::OpenMode::Existing).unwrap();
        let r = crate::fsck::fsck(std::sync::Arc::new(dev), crate::fsck::FsckMode::Check, &|_, _| {});
        let _ = std::fs::remove_file(&copy);
        assert!(r.unwrap().findings.is_empty(), "fsck after the takeover");
    }

    /// A read-only participant that came before any writer (no region yet) sees what a
    /// writer that comes later changes: its calls look for the region the writer makes.
    #[test]
    fn a_writer_that_comes_after_a_read_only_participant_is_seen() {
        let image = &image("ro-later");
        let (a, _) = FileSystem::open_shared(image).unwrap();
        a.write(Path::new("/f"), b"first").unwrap();
        drop(a); // the region goes with the last writer
        let (b, _) = FileSystem::open_read_only(image).unwrap();
        assert_eq!(b.read(Path::new("/f")).unwrap(), b"first");
        let (a, _) = FileSystem::open_shared(image).unwrap();
        a.write(Path::new("/f"), b"second, longer").unwrap();
        a.write(Path::new("/g"), b"new").unwrap();
        assert_eq!(b.read(Path::new("/f")).unwrap(), b"second, longer");
        assert_eq!(b.read(Path::new("/g")).unwrap(), b"new");
        drop(a);
        // The writer left; the region stays while the reader holds the image's lock.
        assert_eq!(b.read(Path::new("/g")).unwrap(), b"new");
        drop(b);
        check_and_remove(image);
    }

    /// A stale region at the region's name (another boot's: no writer of this boot made
    /// it) is not a writer come meanwhile: the reader's calls return, and do not run again
    /// and again looking for one.
    #[test]
    fn a_stale_region_does_not_send_the_reader_round_forever() {
        let image = &image("ro-stale");
        let (a, _) = FileSystem::open_shared(image).unwrap();
        a.write(Path::new("/f"), b"kept").unwrap();
        drop(a);
        let uuid = {
            let dev = crate::pm::MmapDevice::open(image, crate::pm::OpenMode::Existing).unwrap();
            crate::fs::read_superblock(&dev).unwrap().0.uuid
        };
        let path = crate::share::region_path(&std::fs::File::open(image).unwrap()).unwrap();
        let other_boot = crate::share::Identity { image_uuid: uuid, boot_id: [9; 16] };
        drop(
            crate::share::Region::attach(&path, &other_boot, crate::share::region_bytes(64, Default::default()), 0o600)
                .unwrap(),
        );
        let (b, _) = FileSystem::open_read_only(image).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        // A thread of its own, left behind if the read never returns.
        let t = std::thread::spawn(move || {
            let _ = tx.send(b.read(Path::new("/f")).map_err(|e| e.to_string()));
        });
        let got = rx.recv_timeout(std::time::Duration::from_secs(10)).expect("the read never returned");
        assert_eq!(got.unwrap(), b"kept");
        t.join().unwrap();
        check_and_remove(image);
    }

    /// An image a writer left unclean (killed, or a power failure) with no one to recover
    /// it is refused with a clear error: a read-only participant cannot recover it.
    #[test]
    fn an_unclean_image_with_no_writer_is_refused() {
        let image = &image("ro-unclean");
        let (a, _) = FileSystem::open(image).unwrap();
        a.write(Path::new("/f"), b"x").unwrap();
        // The image as a crash would leave it: marked in use, no region.
        let crashed = image.with_extension("crashed");
        std::fs::copy(image, &crashed).unwrap();
        drop(a);
        let r = FileSystem::open_read_only(&crashed);
        let e = r.err().expect("an unclean image read without recovery");
        assert!(e.to_string().contains("must recover it"), "{e}");
        let _ = std::fs::remove_file(&crashed);
        check_and_remove(image);
    }
}

#[cfg(test)]
mod stress {
    use crate::FileSystem;
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// A writer writes a new file and renames it over another, 2,000 times, while a
    /// read-only participant reads that file in a loop: every read is one whole version,
    /// none fails (a file freed under the reader, `read-only-pin-ignored`, is ESTALE to it),
    /// and no orphan is left behind.
    #[test]
    fn a_read_only_participant_reads_whole_files_beside_renames() {
        let image = std::path::PathBuf::from(format!("/dev/shm/hashfs-ro-stress-{}.img", std::process::id()));
        FileSystem::format_file(&image, 64 << 20, &crate::FormatOptions::default(), &|_, _| {}).unwrap();
        let (a, _) = FileSystem::open_shared(&image).unwrap();
        a.write(Path::new("/f"), &[b'0'; 65536]).unwrap();
        let (b, _) = FileSystem::open_read_only(&image).unwrap();
        let stop = AtomicBool::new(false);
        let (reads, torn, failed) = std::thread::scope(|s| {
            s.spawn(|| {
                struct Stop<'a>(&'a AtomicBool);
                impl Drop for Stop<'_> {
                    fn drop(&mut self) {
                        self.0.store(true, Ordering::Relaxed);
                    }
                }
                let _stop = Stop(&stop);
                for i in 1..2000u32 {
                    a.write(Path::new("/t"), &[b'0' + (i % 10) as u8; 65536]).unwrap();
                    a.rename(Path::new("/t"), Path::new("/f")).unwrap();
                    // Room for the reader: a writer's every call sends a read-only
                    // participant's call in progress round again.
                    std::thread::sleep(std::time::Duration::from_micros(100));
                }
            });
            let (mut reads, mut torn, mut failed) = (0u64, 0u64, 0u64);
            while !stop.load(Ordering::Relaxed) {
                match b.read(Path::new("/f")) {
                    Ok(v) if v.len() == 65536 && v.iter().all(|&c| c == v[0]) => reads += 1,
                    Ok(_) => torn += 1,
                    Err(_) => failed += 1,
                }
            }
            (reads, torn, failed)
        });
        assert!(reads > 0 && torn == 0 && failed == 0, "reads {reads}, torn {torn}, failed {failed}");
        let region = crate::share::region_path(&std::fs::File::open(&image).unwrap()).unwrap();
        drop(a);
        assert!(region.exists(), "the writer left while the reader held the image: the region stays");
        drop(b);
        assert!(!region.exists(), "the reader, the last to leave, removes the region");
        super::super::test_image::check_and_remove(&image);
    }
}
