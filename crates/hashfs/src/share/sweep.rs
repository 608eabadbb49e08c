//! Regions that no participant will remove: every process of an image's region killed (no
//! last participant left to remove it), and then, as often as not, the image deleted (no
//! next participant to find it). Such a region stays in `/dev/shm` until reboot; the
//! first participant of any image removes those it finds (docs/design.md, "Many processes
//! on one image", *Joining and leaving*).
//!
//! A region may go when nothing can use it any more, which the sweep decides under an
//! exclusive `flock` of the region file, taken without waiting:
//! - no process maps it: a process attaching takes the file's lock shared before it maps
//!   it, and the lock lasts as long as the mapping (which holds the open file description
//!   the lock belongs to), in a forked child's too; so the exclusive lock is had only when
//!   every process that attached has unmapped, exited or exec'd. An attach that opened the
//!   file before the sweep removed it finds, under its shared lock, that the name no longer
//!   leads to its file and makes a fresh region (`attach.rs`): no two processes of one
//!   image ever map two regions;
//! - no forked or exec'd child is counted as on its way (`ImageWords::forks`: a program
//!   an `execve` handed descriptions over to maps nothing until it joins) while a slot's
//!   process still runs (the exec'd program has its predecessor's pid; a forked child maps
//!   the region already);
//! - and, should a participant have come by another way (a build before the sweep, which
//!   let go of the file's lock once mapped), no slot of its table names a live process and
//!   no process holds a lock on its image (the device and inode numbers in its name, as
//!   `/proc/locks` lists them: every participant holds the image's lock from before it
//!   attaches until it is gone).
//!
//! Only files named as regions are, of this boot and this layout, are looked at; a region
//! of another boot has no live process and goes whatever it holds. A file this process
//! may not open or remove is left alone. `/proc/locks` lists only the locks of processes
//! in this process's PID namespace: processes of one image in two namespaces are not
//! supported (the participant table names them by PID already).

use super::attach::{read_header, same_file, HeaderWords, LAYOUT_VERSION};
use super::image::{ImageWords, INODE_BITS_OFF, PARTICIPANTS_OFF, WORDS_OFF};
use super::participants::{Participant, Participants, MAX_PARTICIPANTS};
use super::region::Region;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::Ordering;

/// The device and inode numbers a region's file name gives (`hashfs-DEV-INO.shm`).
fn named_image(name: &str) -> Option<(u64, u64)> {
    let rest = name.strip_prefix("hashfs-")?.strip_suffix(".shm")?;
    let (dev, ino) = rest.split_once('-')?;
    Some((dev.parse().ok()?, ino.parse().ok()?))
}

/// Removes the regions in `dir` (but `keep`'s) that nothing can use any more (see the
/// module); how many went.
pub fn sweep_left_regions(dir: &Path, keep: &Path, boot_id: [u8; 16]) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    let mut locks = None; // /proc/locks, read when a region first needs it
    let mut swept = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(image) = name.to_str().and_then(named_image) else { continue };
        let path = e.path();
        if path == keep {
            continue;
        }
        if sweep_one(&path, image, boot_id, &mut locks).unwrap_or(false) {
            swept += 1;
        }
    }
    swept
}

/// Removes the region at `path` of the image `image` (device, inode) if nothing can use
/// it; whether it did.
fn sweep_one(path: &Path, image: (u64, u64), boot_id: [u8; 16], locks: &mut Option<String>) -> io::Result<bool> {
    let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(path)?;
    // SAFETY: flock on our own descriptor; released when `f` closes.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Ok(false); // a process is attaching to it, or sweeping it
    }
    crate::fs::race_point::reached("sweep: the region locked");
    if !same_file(path, &f)? {
        return Ok(false);
    }
    let Some(h) = read_header(&f)? else { return Ok(false) };
    let removable = if h.boot != super::attach::words(&boot_id) {
        true // no process of another boot runs
    } else {
        h.version == LAYOUT_VERSION && !image_locked(image, locks) && nothing_alive(&f, &h)?
    };
    if removable {
        super::remove_region(path)?;
    }
    Ok(removable)
}

/// Whether a process holds any lock on the image with device and inode numbers `image`,
/// as `/proc/locks` says (held when it cannot be read).
fn image_locked((dev, ino): (u64, u64), locks: &mut Option<String>) -> bool {
    if locks.is_none() {
        *locks = std::fs::read_to_string("/proc/locks").ok();
    }
    let Some(text) = locks.as_deref() else { return true };
    // Each lock's file as MAJOR:MINOR:INODE, the first two in hexadecimal.
    let want = format!("{:02x}:{:02x}:{ino}", libc::major(dev), libc::minor(dev));
    text.lines().any(|line| line.split_whitespace().any(|w| w == want))
}

/// Whether the region `f` (header `h`, an image region of this layout) has no slot of a
/// live process and no child on its way.
fn nothing_alive(f: &File, h: &HeaderWords) -> io::Result<bool> {
    let len = usize::try_from(h.len).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
    if len <= INODE_BITS_OFF || f.metadata()?.len() != h.len {
        return Ok(false); // not an image's region
    }
    let region = Region::map_read_only(f, len)?;
    let parts = region.at::<Participants>(PARTICIPANTS_OFF);
    let slots = || (0..MAX_PARTICIPANTS as u32).map(Participant);
    let live = slots().any(|p| parts.alive(p));
    // A child counted as on its way: a forked one maps the region (its lock is held); an
    // exec'd program has its predecessor's pid, in a slot whose process still runs. Once
    // no slot's process runs, no handover can complete (a region left so stayed for good).
    let forks = region.at::<ImageWords>(WORDS_OFF).forks.load(Ordering::Acquire);
    let runs = slots().any(|p| parts.process_runs(p));
    let handing_over = forks != 0 && runs;
    Ok(!live && !handing_over)
}

#[cfg(test)]
mod tests {
    use super::{named_image, sweep_left_regions};
    use crate::fs::race_point::with_between;
    use crate::share::image::{PARTICIPANTS_OFF, WORDS_OFF};
    use crate::share::{region_bytes, Identity, ImageWords, Participants, Region, HEADER_BYTES};
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn a_regions_name_gives_its_images_numbers() {
        assert_eq!(named_image("hashfs-27-1502203.shm"), Some((27, 1502203)));
        for other in ["hashfs-27-1502203.shm.new-1-0-5", "hashfs-x-1.shm", "PostgreSQL.123", "hashfs-1.shm"] {
            assert_eq!(named_image(other), None, "{other}");
        }
    }

    fn id() -> Identity {
        Identity::of_image([0x5E; 16]).unwrap()
    }

    fn len() -> usize {
        region_bytes(64, Default::default())
    }

    /// A directory of its own on /dev/shm, with an "image" file (its device and inode
    /// numbers name the regions) and the region's path.
    struct Scratch {
        dir: tempfile::TempDir,
        image: PathBuf,
        region: PathBuf,
    }

    fn scratch() -> Scratch {
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        let image = dir.path().join("image");
        std::fs::write(&image, b"").unwrap();
        let m = std::fs::metadata(&image).unwrap();
        let region = dir.path().join(format!("hashfs-{}-{}.shm", m.dev(), m.ino()));
        Scratch { dir, image, region }
    }

    impl Scratch {
        fn sweep(&self) -> usize {
            sweep_left_regions(self.dir.path(), Path::new("/none"), id().boot_id)
        }
    }

    /// `f` run on the region at `s.region`, attached and then let go of (its file's lock
    /// goes with its mapping).
    fn with_region(s: &Scratch, f: impl FnOnce(&Participants, &ImageWords)) {
        let r = Region::attach(&s.region, &id(), len(), 0o600).unwrap();
        f(r.at::<Participants>(PARTICIPANTS_OFF), r.at::<ImageWords>(WORDS_OFF));
    }

    /// A region goes when no process maps it, no process holds its image's lock, no slot
    /// names a live process and no child is on its way; while any of these holds, it stays.
    #[test]
    fn a_region_goes_when_nothing_can_use_it_and_only_then() {
        let s = scratch();
        let mapped = Region::attach(&s.region, &id(), len(), 0o600).unwrap();
        assert_eq!(s.sweep(), 0, "a region a process maps was removed");
        drop(mapped);

        // A participant alive (this process).
        let mut me = None;
        with_region(&s, |parts, _| me = parts.join());
        assert_eq!(s.sweep(), 0, "a region with a live participant was removed");
        with_region(&s, |parts, _| parts.leave(me.unwrap()));

        // A program an exec handed descriptions over to, on its way: its predecessor's
        // slot (this process, as the program before an execve) and the count.
        with_region(&s, |parts, words| {
            me = parts.join();
            parts.pretend_dead(me.unwrap());
            words.forks.store(1, Ordering::Release);
        });
        assert_eq!(s.sweep(), 0, "a region with a child on its way was removed");
        // Its process gone (here: its slot given back), no handover can complete: the
        // count alone keeps nothing (the rest of this test leaves it at 1).
        with_region(&s, |parts, _| parts.leave(me.unwrap()));

        // A process with the image open and locked (a participant about to attach).
        let image = std::fs::File::open(&s.image).unwrap();
        // SAFETY: flock on our own descriptor.
        assert_eq!(unsafe { libc::flock(image.as_raw_fd(), libc::LOCK_SH) }, 0);
        assert_eq!(s.sweep(), 0, "a region whose image a process holds was removed");
        drop(image);

        assert!(s.region.exists());
        assert_eq!(s.sweep(), 1, "a region nothing can use stayed (a handover counted whose process is gone)");
        assert!(!s.region.exists());
    }

    /// A sweep that removes the region between an attach's examination of it and its
    /// mapping: the attach finds, under its lock, that the name no longer leads to the file
    /// it opened, and maps the fresh region that the next process also finds.
    #[test]
    fn an_attach_that_a_sweep_overtakes_maps_the_region_in_place() {
        let s = scratch();
        drop(Region::attach(&s.region, &id(), len(), 0o600).unwrap());
        let swept = std::sync::Mutex::new(0);
        let r = with_between(
            "attach: the region examined",
            || *swept.lock().unwrap() = s.sweep(),
            || Region::attach(&s.region, &id(), len(), 0o600).unwrap(),
        );
        assert_eq!(*swept.lock().unwrap(), 1, "the sweep removed the region before the attach held it");
        r.at::<AtomicU64>(HEADER_BYTES).store(0xA77AC4, Ordering::Release);
        let next = Region::attach(&s.region, &id(), len(), 0o600).unwrap();
        assert_eq!(
            next.at::<AtomicU64>(HEADER_BYTES).load(Ordering::Acquire),
            0xA77AC4,
            "the attach mapped a region no longer in place: two processes of one image in two regions"
        );
    }

    /// A sweep while an attach holds the region (between its lock and its mapping) leaves
    /// the region.
    #[test]
    fn a_sweep_leaves_a_region_an_attach_holds() {
        let s = scratch();
        drop(Region::attach(&s.region, &id(), len(), 0o600).unwrap());
        let swept = std::sync::Mutex::new(usize::MAX);
        let r = with_between(
            "attach: the region held",
            || *swept.lock().unwrap() = s.sweep(),
            || Region::attach(&s.region, &id(), len(), 0o600).unwrap(),
        );
        assert_eq!(*swept.lock().unwrap(), 0, "the sweep removed a region an attach held");
        r.at::<AtomicU64>(HEADER_BYTES).store(0x4E1D, Ordering::Release);
        let next = Region::attach(&s.region, &id(), len(), 0o600).unwrap();
        assert_eq!(next.at::<AtomicU64>(HEADER_BYTES).load(Ordering::Acquire), 0x4E1D);
    }

    /// A region of another boot goes whatever it holds.
    #[test]
    fn a_region_of_another_boot_goes() {
        let s = scratch();
        let other = Identity { boot_id: [0x0B; 16], ..id() };
        let r = Region::attach(&s.region, &other, len(), 0o600).unwrap();
        r.at::<ImageWords>(WORDS_OFF).forks.store(3, Ordering::Release);
        drop(r);
        assert_eq!(s.sweep(), 1);
        assert!(!s.region.exists());
    }
}
