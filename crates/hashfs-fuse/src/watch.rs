//! A shared mount's watch on the image's ring of changes (issue 56): the kernel caches a
//! file's pages while a program maps it through the mount, and shim processes change the
//! image behind it. A thread of the daemon reads the ring every [`WATCH_PERIOD`]
//! (`hashfs::FileSystem::changes_since`, without the image lock) and tells the kernel to
//! drop what it caches of each inode named there (`notify_inval_inode`: attributes and
//! pages, mapped ones unmapped, so the next access reads them again through the daemon).
//! Overwrites in place, which that ring does not name (they change no byte another
//! participant caches), are noted in the image's ring of data changes while this mount
//! watches it (`hashfs::FileSystem::watch_data`), and read the same way. The bound on what
//! a mapping through the mount shows stale is thus the period plus the invalidation's own
//! time, for every change made through calls. A shim process's stores through its own
//! writable shared mapping of a file reach no ring: while another participant marks a file
//! mapped so (`hashfs::FileSystem::mapped_writable_elsewhere`, a mark published as a change
//! of the file before the first store, `hashfs/src/fs/shared/mapped.rs`), the watch drops
//! the kernel's pages of it at every reading, so what the mount shows of those stores is a
//! period and the invalidation behind them too (until 2026-12-06 it showed them only when a
//! call changed the file after them). Changes the daemon made itself are invalidated too (the ring
//! does not say who made a change): harmless, the kernel reads them again.

use fuser::Notifier;
use hashfs::pm::PmDevice;
use hashfs::{Changed, FileSystem};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the ring is read.
pub const WATCH_PERIOD: Duration = Duration::from_millis(1);

/// Starts the watch of `fs` (a shared mount; None otherwise), until `stop` is set.
pub fn watch_changes<D: PmDevice + 'static>(
    fs: FileSystem<D>,
    notifier: Notifier,
    stop: Arc<AtomicBool>,
) -> Option<JoinHandle<()>> {
    let mut seen = fs.changes_now()?;
    let mut seen_data = fs.watch_data()?;
    // Files another participant maps writable and shared (taken after the position in the
    // ring: a mark published after it is read there).
    let mut mapped = fs.mapped_writable_elsewhere_all();
    std::thread::Builder::new()
        .name("hashfs-watch".into())
        .spawn(move || {
            while !stop.load(Ordering::Acquire) {
                std::thread::sleep(WATCH_PERIOD);
                let (Some((now, changed)), Some((now_data, data))) =
                    (fs.changes_since(seen), fs.data_changes_since(seen_data))
                else {
                    return;
                };
                let mut inos = Vec::new();
                for c in [changed, data] {
                    match c {
                        Changed::Inodes(v) => inos.extend(v),
                        Changed::Everything => {
                            inos.extend(fs.cached_inodes());
                            mapped = fs.mapped_writable_elsewhere_all();
                        }
                    }
                }
                mapped.extend_from_slice(&inos);
                mapped.sort_unstable();
                mapped.dedup();
                mapped.retain(|&i| fs.mapped_writable_elsewhere(i));
                inos.extend_from_slice(&mapped);
                inos.sort_unstable();
                inos.dedup();
                for ino in inos {
                    // The kernel knows the inode by its node ID (`nodes.rs`); one freed
                    // meanwhile has nothing left to show (the kernel's next request for
                    // it is ESTALE). ENOENT: the kernel does not cache it. Nothing else
                    // can fail here that a later change would not retry.
                    if let Ok(m) = fs.peek_attr(ino) {
                        let _ = notifier.inval_inode(crate::nodes::node_id(&m), 0, 0);
                    }
                }
                (seen, seen_data) = (now, now_data);
            }
        })
        .ok()
}
