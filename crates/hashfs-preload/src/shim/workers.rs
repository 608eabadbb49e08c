//! The threads pumps run on (`pump.rs`): a pump's work is handed to an idle thread of this
//! process, or to a new one when none is idle, and the thread waits for the next pump when
//! it is done (a few seconds at most, [`IDLE_FOR`]; [`KEPT`] idle threads at most). Before
//! 2026-12-07 each pump started a thread of its own, and the thread's making (the kernel's
//! `clone`) was a third of a shell's `echo x >> f` through the shim.
//!
//! A forked child has none of its parent's threads: its list of idle threads is emptied as
//! it starts ([`forget_in_child`]), whatever state the fork caught it in.

use super::*;
use std::sync::Condvar;

/// How long a thread waits for the next pump before it ends (a few milliseconds in the
/// unit test, so that jobs come as waits end).
const IDLE_FOR: std::time::Duration =
    if cfg!(test) { std::time::Duration::from_millis(2) } else { std::time::Duration::from_secs(5) };
/// The idle threads kept at most (a thread finding the list full ends).
const KEPT: usize = 4;

type Job = Box<dyn FnOnce() + Send>;

/// A pump's work on a thread: whether it has ended, and a wait for its end.
pub(super) enum Running {
    /// On a thread of the pool.
    Pooled(Arc<Finished>),
    /// On a thread of its own (a `vfork` child's: [`run`]). Its join returns when the thread
    /// is gone, also when an exec ended it (the kernel clears its id), where a flag would
    /// never be set: the parent then waited for ever at its exit.
    Own(std::thread::JoinHandle<()>),
}

pub(super) struct Finished {
    done: std::sync::Mutex<bool>,
    cv: Condvar,
}

impl Running {
    pub(super) fn is_finished(&self) -> bool {
        match self {
            Running::Pooled(f) => *f.done.lock().unwrap_or_else(|e| e.into_inner()),
            Running::Own(h) => h.is_finished(),
        }
    }

    /// Joins the work if it ends by `deadline` (waited for in steps of 200 us); else gives
    /// it back, still running.
    pub(super) fn join_by(self, deadline: std::time::Instant) -> Option<Running> {
        while !self.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        if self.is_finished() {
            self.join();
            return None;
        }
        Some(self)
    }

    /// Waits until the work has ended (returned, or panicked: caught on its thread).
    pub(super) fn join(self) {
        match self {
            Running::Pooled(f) => {
                let mut done = f.done.lock().unwrap_or_else(|e| e.into_inner());
                while !*done {
                    done = f.cv.wait(done).unwrap_or_else(|e| e.into_inner());
                }
            }
            Running::Own(h) => {
                let _ = h.join();
            }
        }
    }
}

/// A thread of the pool: its next job is put in `job` and the thread woken.
struct Worker {
    job: std::sync::Mutex<Option<Job>>,
    cv: Condvar,
}

impl Worker {
    /// The job given to this thread, waited for `patience` at most (None: none came).
    fn next_job(&self, patience: Option<std::time::Duration>) -> Option<Job> {
        let deadline = patience.map(|p| std::time::Instant::now() + p);
        let mut slot = self.job.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(job) = slot.take() {
                return Some(job);
            }
            slot = match deadline {
                None => self.cv.wait(slot).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let now = std::time::Instant::now();
                    if now >= d {
                        return None;
                    }
                    self.cv.wait_timeout(slot, d - now).unwrap_or_else(|e| e.into_inner()).0
                }
            };
        }
    }
}

/// This process's idle threads.
static IDLE: Mutex<Vec<Arc<Worker>>> = Mutex::new(Vec::new());

/// Runs `job` on an idle thread of this process, or on a new one; Err when no thread could
/// be made.
pub(super) fn run(job: impl FnOnce() + Send + 'static) -> std::io::Result<Running> {
    let finished = Arc::new(Finished { done: std::sync::Mutex::new(false), cv: Condvar::new() });
    let signal = finished.clone();
    let job: Job = Box::new(move || {
        // A pump that panicked must still be seen to end (its waiters would wait for ever).
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
        *signal.done.lock().unwrap_or_else(|e| e.into_inner()) = true;
        signal.cv.notify_all();
    });
    if super::exec::PROCESS_PID.load(Ordering::Relaxed) != current_pid() {
        // A `vfork` child, in its parent's memory: the parent's list is not its own, and a
        // thread it makes dies at its exec, before it can say it has ended. A thread of its
        // own, for this pump only, as before the pool, joined as a thread (with a flag, the
        // parent waited for ever at its exit when the bug `vfork-kept-with-close-on-exec-files`
        // was planted).
        let own = move || {
            hashfs::pm::block_signals();
            job();
        };
        return Ok(Running::Own(std::thread::Builder::new().spawn(own)?));
    }
    // Taken out of the list: no other caller can give it a job.
    let idle = IDLE.lock().pop();
    let w = match idle {
        Some(w) => w,
        None => {
            let w = Arc::new(Worker { job: std::sync::Mutex::new(None), cv: Condvar::new() });
            let served = w.clone();
            std::thread::Builder::new().spawn(move || serve(served))?;
            w
        }
    };
    *w.job.lock().unwrap_or_else(|e| e.into_inner()) = Some(job);
    w.cv.notify_one();
    Ok(Running::Pooled(finished))
}

/// A thread's life: the jobs it is given, until it has waited [`IDLE_FOR`] for one or
/// finds [`KEPT`] threads idle. Every signal that can be is blocked on it
/// (`hashfs::pm::block_signals`): a signal sent to the process goes to one of the
/// program's threads, whose handler's calls the shim serves (on a shim thread they would
/// reach the kernel), and a pump's write to a pipe whose reader is gone fails with EPIPE
/// instead of killing the process.
fn serve(w: Arc<Worker>) {
    hashfs::pm::block_signals();
    let mut job = w.next_job(None);
    loop {
        if let Some(j) = job.take() {
            j();
        }
        {
            let mut idle = IDLE.lock();
            if idle.len() >= KEPT {
                return;
            }
            idle.push(w.clone());
        }
        job = w.next_job(Some(IDLE_FOR));
        if job.is_none() {
            // The unit test widens the window in which a caller takes this thread out of
            // the list after its wait ended (a race point).
            #[cfg(test)]
            std::thread::sleep(std::time::Duration::from_micros(500));
            let mut idle = IDLE.lock();
            if let Some(i) = idle.iter().position(|x| Arc::ptr_eq(x, &w)) {
                idle.swap_remove(i);
                return;
            }
            drop(idle);
            // A caller took it out of the list after the wait: its job is on its way.
            job = w.next_job(None);
        }
    }
}

/// In a forked child: its parent's idle threads are not its own. The list is replaced
/// without being read (a thread of the parent's may have been changing it at the fork) and
/// its lock let go (its holder, if any, is not in the child).
pub(super) fn forget_in_child() {
    // SAFETY: the child has one thread, this one; the old list is leaked, never read.
    unsafe {
        std::ptr::write(IDLE.data_ptr(), Vec::new());
        if IDLE.is_locked() {
            IDLE.force_unlock();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Jobs from four threads at once, spaced around the idle threads' wait (2 ms here), so
    /// that callers take threads from the list as their waits end: every job runs once
    /// and is seen to end. A thread that ended when its wait did, though a caller had
    /// taken it out of the list meanwhile (the handoff `serve` makes after its wait), left
    /// that caller's job unrun; its wait is bounded here, and fails.
    #[test]
    fn every_job_runs_once_while_idle_threads_come_and_go() {
        super::super::exec::PROCESS_PID.store(current_pid(), Ordering::Relaxed);
        let ran = Arc::new(AtomicUsize::new(0));
        let callers: Vec<_> = (0..4u64)
            .map(|t| {
                let ran = ran.clone();
                std::thread::spawn(move || {
                    let mut jobs = Vec::new();
                    for i in 0..150u64 {
                        let ran = ran.clone();
                        jobs.push(run(move || {
                            ran.fetch_add(1, Ordering::Relaxed);
                        }));
                        // 0 to 3 ms apart: around the end of an idle thread's wait.
                        std::thread::sleep(std::time::Duration::from_micros((i * 397 + t * 131) % 3_000));
                    }
                    jobs
                })
            })
            .collect();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        for c in callers {
            for job in c.join().unwrap() {
                let job = job.expect("a thread for the job");
                while !job.is_finished() {
                    assert!(std::time::Instant::now() < deadline, "a job handed to a pool thread never ran");
                    std::thread::sleep(std::time::Duration::from_micros(100));
                }
                job.join();
            }
        }
        assert_eq!(ran.load(Ordering::Relaxed), 600);
        assert!(IDLE.lock().len() <= KEPT);
    }
}
