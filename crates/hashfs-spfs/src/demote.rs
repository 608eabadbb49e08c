//! The write-back thread: SPFS's demotion (§3.2.1). A promoted file goes back to the
//! lower file system when its Sync Factor falls under the hard limit and it has been
//! quiet for a while, or, when PM use passes the high-water mark, in order of rising
//! Sync Factor (quiet files first) until use falls under the low-water mark. The same
//! thread saves the Sync Factors now and then, and when it stops (`saved_profiles.rs`).

use crate::Stack;
use std::time::Instant;

pub(crate) fn run(stack: &Stack) {
    let mut ticks = 0u64;
    let mut next = Instant::now() + stack.cfg.tick;
    stack.settled.runs_on(std::thread::current());
    while !stack.stopped() {
        // A syncfs, if one is wanted (`settled.rs`): a hot directory's files below are
        // promoted at their opens only once it is done, so the thread is woken for it.
        stack.settle();
        let now = Instant::now();
        if now < next {
            std::thread::park_timeout(next - now);
            continue;
        }
        next = now + stack.cfg.tick;
        pass(stack);
        ticks += 1;
        if ticks.is_multiple_of(crate::saved_profiles::SAVE_EVERY_TICKS) {
            save(stack);
        }
    }
    save(stack); // at unmount, or the shim's exit
}

/// Saves the Sync Factors (`saved_profiles.rs`); a failure (PM full) is reported and the
/// next tick tries again.
fn save(stack: &Stack) {
    if let Err(e) = stack.save_profiles() {
        eprintln!("hashfs: saving the Sync Factors failed (the last saved ones stay): {e}");
    }
}

fn pm_use(stack: &Stack) -> f64 {
    let (used, total) = stack.store.usage();
    used as f64 / total.max(1) as f64
}

/// One look at every promoted file.
pub(crate) fn pass(stack: &Stack) {
    let now = Instant::now();
    let cfg = &stack.cfg;
    let mut candidates = Vec::new();
    for (key, sh) in stack.promoted() {
        let mut st = sh.lock();
        let quiet = st.profile.idle(cfg.quiet, now);
        if quiet && st.profile.below_limit(&cfg.profiler) {
            if let Err(e) = stack.write_back_locked(&mut st) {
                eprintln!("hashfs: write-back failed (the file stays in PM): {e}");
            }
            continue;
        }
        candidates.push((!quiet, st.profile.sync_factor(), key, sh.clone()));
    }
    if pm_use(stack) <= cfg.high_water {
        return;
    }
    candidates.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    for (_, _, _, sh) in candidates {
        if pm_use(stack) < cfg.low_water {
            break;
        }
        let mut st = sh.lock();
        if let Err(e) = stack.write_back_locked(&mut st) {
            eprintln!("hashfs: write-back failed (the file stays in PM): {e}");
            break;
        }
        stack.counters.pm_full_demotions.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}
