//! Named points in an operation where a unit test can stop the thread that reaches them
//! and run another thread's operation in between: a deterministic interleaving where a
//! randomized stress test (`tests/races.rs`) hits the same window only now and then.
//!
//! Outside `cargo test` of this crate a point compiles to nothing. A hook is set per
//! thread, so tests running beside each other in one binary do not see each other's.

#[cfg(test)]
use std::cell::RefCell;

/// What runs at each point a thread reaches.
#[cfg(test)]
type Hook = Box<dyn FnMut(&'static str)>;

#[cfg(test)]
thread_local! {
    static HOOK: RefCell<Option<Hook>> = const { RefCell::new(None) };
}

/// The calling thread has reached the point `name`; a hook set on this thread runs here.
#[inline(always)]
pub(crate) fn reached(name: &'static str) {
    #[cfg(test)]
    {
        // Taken out while it runs: an operation the hook makes on this thread reaches no
        // point of its own.
        if let Some(mut hook) = HOOK.with(|h| h.borrow_mut().take()) {
            hook(name);
            HOOK.with(|h| *h.borrow_mut() = Some(hook));
        }
    }
    #[cfg(not(test))]
    let _ = name;
}

/// Runs `hook` at every point this thread reaches until the guard is dropped.
#[cfg(test)]
pub(crate) fn on_this_thread(hook: impl FnMut(&'static str) + 'static) -> Unset {
    HOOK.with(|h| *h.borrow_mut() = Some(Box::new(hook)));
    Unset
}

#[cfg(test)]
pub(crate) struct Unset;

#[cfg(test)]
impl Drop for Unset {
    fn drop(&mut self) {
        HOOK.with(|h| *h.borrow_mut() = None);
    }
}

/// Runs `f` on this thread with `other` run on another thread, to its end, when this
/// thread reaches the point `at` (the first time).
#[cfg(test)]
pub(crate) fn with_between<T>(at: &'static str, other: impl FnOnce() + Send, f: impl FnOnce() -> T) -> T {
    use std::sync::mpsc;
    let (go, went) = mpsc::channel::<()>();
    let (done, finished) = mpsc::channel::<()>();
    std::thread::scope(|s| {
        s.spawn(move || {
            if went.recv().is_ok() {
                other();
                let _ = done.send(());
            }
        });
        let mut stopped = false;
        let _unset = on_this_thread(move |point| {
            if point == at && !stopped {
                stopped = true;
                go.send(()).unwrap();
                finished
                    .recv_timeout(std::time::Duration::from_secs(10))
                    .expect("the other thread waits for nothing this one holds");
            }
        });
        f()
    })
}

/// A small formatted image in memory, mounted, for the tests that use points.
#[cfg(test)]
pub(crate) fn small_fs() -> (crate::FileSystem<crate::pm::CrashDevice>, std::sync::Arc<crate::pm::CrashDevice>) {
    let dev = std::sync::Arc::new(crate::pm::CrashDevice::new(8 << 20));
    let opts =
        crate::FormatOptions { journal_count: 2, journal_blocks: 4, inode_count: Some(64), ..Default::default() };
    crate::format(&*dev, &opts, &|_, _| {}).expect("format");
    let (fs, _) = crate::FileSystem::mount(dev.clone(), &|_, _| {}).expect("mount");
    (fs, dev)
}

#[cfg(test)]
mod tests {
    use super::{small_fs, with_between};
    use crate::{Error, Ino, Owner};

    /// O_CREAT on a name another thread (or process) makes between the open's lookup and
    /// its create: the open opens what the other made (None: the name exists), and with
    /// O_EXCL fails with EEXIST. An open that gives up at the create's EEXIST fails where
    /// open(2) never does (`create-lost-not-retried`; SQLite then opens its files
    /// read-only).
    #[test]
    fn a_create_that_loses_the_name_to_another_opens_what_the_other_made() {
        let (fs, _) = small_fs();
        let owner = Owner::ROOT;
        for (name, exclusive) in [(&b"plain"[..], false), (&b"excl"[..], true)] {
            let made = std::sync::Mutex::new(None);
            let r = with_between(
                "create: the lookup found no name",
                || {
                    *made.lock().unwrap() =
                        Some(fs.create_file_at(Ino::ROOT, name, 0o644, owner).expect("the other's create"))
                },
                || fs.create_unless_exists(Ino::ROOT, name, 0o644, || owner, exclusive),
            );
            assert!(made.lock().unwrap().is_some(), "the other thread ran at the point");
            if exclusive {
                assert!(matches!(r, Err(Error::Exists)), "O_EXCL on a name made meanwhile: {r:?}");
            } else {
                assert!(matches!(r, Ok(None)), "O_CREAT on a name made meanwhile: {r:?}");
            }
        }
    }
}
