//! The kernel's limit on a FUSE mount's dirty pages. Linux gives every FUSE mount's
//! backing device 1% of the dirty page limit, enforced strictly (`max_ratio` 1,
//! `strict_limit` 1 under `/sys/class/bdi/MAJ:MIN/`), so that a daemon that stops
//! answering cannot pin much memory. With the write-back cache, a writer that dirties
//! pages faster than the daemon takes them is then held to the daemon's pace: 4 KiB
//! random writes without sync through the stacked mount ran at 0.28-0.30x of ext4
//! (docs/stacked.md). The stacked mount's daemon is the system's own, run by root, so it
//! gives its mount a block device's limits (`max_ratio` 100, no strict limit), as ext4
//! below has; `-o dirty_limit=fuse` keeps the kernel's.

use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

/// `MAJ:MIN` of the newest FUSE mount on `mountpoint` (canonical), from
/// /proc/self/mountinfo (no request to the daemon: this runs while it serves INIT).
fn device_of(mountpoint: &Path) -> Option<String> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mp = mountpoint.to_string_lossy().replace('\\', "\\134").replace(' ', "\\040").replace('\t', "\\011");
    info.lines()
        .rev()
        .find(|l| {
            let fstype = l.split(" - ").nth(1).and_then(|a| a.split(' ').next());
            l.split(' ').nth(4) == Some(mp.as_str()) && fstype.is_some_and(|t| t == "fuse" || t.starts_with("fuse."))
        })
        .and_then(|l| l.split(' ').nth(2).map(str::to_string))
}

/// Gives the FUSE mount on `mountpoint` a block device's dirty page limits, waiting up to
/// `wait` for the mount to appear. Returns the backing device's name.
pub fn relax(mountpoint: &Path, wait: Duration) -> io::Result<String> {
    let mountpoint = std::fs::canonicalize(mountpoint)?;
    let t = Instant::now();
    let dev = loop {
        if let Some(d) = device_of(&mountpoint) {
            break d;
        }
        if t.elapsed() > wait {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "the mount did not appear in /proc/self/mountinfo"));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let bdi = Path::new("/sys/class/bdi").join(&dev);
    std::fs::write(bdi.join("strict_limit"), "0")?;
    std::fs::write(bdi.join("max_ratio"), "100")?;
    Ok(dev)
}
