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
