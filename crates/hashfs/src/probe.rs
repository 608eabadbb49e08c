//! Cycle accounting of the file-mapping share of the IO path, for the paper experiments
//! (`hashfs-bench paper`).
//!
//! The HashFS paper (§4) reports "the latency of the file mapping operation ... including
//! all overhead associated with the mapping structure, such as hash computation and undo
//! logging" and, for insertions, "the overhead of the block allocator", measured with
//! `rdtscp`. The IO path marks those spans itself: every translation (translation cache,
//! cursor, structure), every block claim (HashFS slot reservation or allocator), every
//! staged structure change, and the commit that makes the change durable, each with a
//! guard ([`map`], [`commit`]) that lives as long as the span. Translations ([`translate`])
//! are mapping spans counted a second time on their own, for the claims about translation
//! alone (ctFS: offset to address by one addition).
//!
//! Compiled in only with the cargo feature `probe` (the paper benchmark's build,
//! `scripts/bench-paper.sh`). Without it a guard is an empty type with no `Drop`, so the IO
//! path carries no benchmark code at all. With it, the counters are reached through
//! [`crate::testing::probe`] and each span costs one relaxed load and a predictable branch
//! while accounting is off.

#[cfg(feature = "probe")]
pub use on::*;

/// A span in progress; adds its cycles to this thread's counts when dropped.
#[cfg(not(feature = "probe"))]
pub(crate) struct Span;

/// Starts a mapping span (translation, claim, staged structure change).
#[cfg(not(feature = "probe"))]
#[inline(always)]
pub(crate) fn map() -> Span {
    Span
}

/// Starts a commit span (the transaction that makes mapping changes durable).
#[cfg(not(feature = "probe"))]
#[inline(always)]
pub(crate) fn commit() -> Span {
    Span
}

/// Starts a translation span (a mapping span that only finds where a block lies).
#[cfg(not(feature = "probe"))]
#[inline(always)]
pub(crate) fn translate() -> Span {
    Span
}

#[cfg(feature = "probe")]
mod on {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicBool, Ordering};

    static ON: AtomicBool = AtomicBool::new(false);

    /// Cycles (time-stamp counter ticks) spent by this thread since the last [`take`].
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct Counts {
        /// Translation, allocation and staging of structure changes.
        pub map_cycles: u64,
        /// Spans counted in `map_cycles`.
        pub map_spans: u64,
        /// Commits of transactions that changed the mapping (undo log, flushes, fences; the
        /// same transaction also persists the inode's new size and block count).
        pub commit_cycles: u64,
        pub commit_spans: u64,
        /// Of `map_cycles`, translation alone (finding where blocks lie: translation
        /// cache, cursor, structure lookup, ctFS's view), without claims and changes.
        pub translate_cycles: u64,
        pub translate_spans: u64,
    }

    thread_local! {
        static COUNTS: Cell<Counts> = const {
            Cell::new(Counts { map_cycles: 0, map_spans: 0, commit_cycles: 0, commit_spans: 0, translate_cycles: 0, translate_spans: 0 })
        };
    }

    /// Whether this CPU has `rdtscp` (CPUID 0x8000_0001, EDX bit 27).
    pub fn supported() -> bool {
        let max = core::arch::x86_64::__cpuid(0x8000_0000).eax;
        max >= 0x8000_0001 && core::arch::x86_64::__cpuid(0x8000_0001).edx & (1 << 27) != 0
    }

    /// Turns the accounting on for every thread. Fails when the CPU lacks `rdtscp`.
    pub fn enable() -> Result<(), &'static str> {
        if !supported() {
            return Err("this CPU has no rdtscp instruction");
        }
        ON.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Turns the accounting off for every thread.
    pub fn disable() {
        ON.store(false, Ordering::Relaxed);
    }

    /// The time-stamp counter, read with `rdtscp` (waits for earlier instructions).
    /// Only call after [`enable`] succeeded (or [`supported`] returned true).
    #[inline]
    pub fn rdtscp() -> u64 {
        let mut aux = 0u32;
        // SAFETY: callers reach this only on CPUs with rdtscp (checked by `enable`/`supported`);
        // the instruction reads the counter and IA32_TSC_AUX into `aux`.
        unsafe { core::arch::x86_64::__rdtscp(&mut aux) }
    }

    #[inline]
    fn start() -> u64 {
        if ON.load(Ordering::Relaxed) {
            rdtscp()
        } else {
            0
        }
    }

    /// Which counters a span adds to.
    #[derive(Clone, Copy)]
    enum Kind {
        Map,
        Commit,
        /// Counted as mapping and, besides, as translation.
        Translate,
    }

    /// A span in progress; adds its cycles to this thread's counts when dropped.
    pub struct Span {
        t0: u64,
        kind: Kind,
    }

    impl Drop for Span {
        #[inline]
        fn drop(&mut self) {
            if self.t0 == 0 {
                return;
            }
            let d = rdtscp().wrapping_sub(self.t0);
            COUNTS.with(|c| {
                let mut v = c.get();
                match self.kind {
                    Kind::Map => {
                        v.map_cycles += d;
                        v.map_spans += 1;
                    }
                    Kind::Commit => {
                        v.commit_cycles += d;
                        v.commit_spans += 1;
                    }
                    Kind::Translate => {
                        v.map_cycles += d;
                        v.map_spans += 1;
                        v.translate_cycles += d;
                        v.translate_spans += 1;
                    }
                }
                c.set(v);
            });
        }
    }

    /// Starts a mapping span (translation, claim, staged structure change).
    #[inline]
    pub fn map() -> Span {
        Span { t0: start(), kind: Kind::Map }
    }

    /// Starts a commit span (the transaction that makes mapping changes durable).
    #[inline]
    pub fn commit() -> Span {
        Span { t0: start(), kind: Kind::Commit }
    }

    /// Starts a translation span: counted as mapping, and as translation besides.
    #[inline]
    pub fn translate() -> Span {
        Span { t0: start(), kind: Kind::Translate }
    }

    /// An empty span (counted as mapping), for calibrating the accounting's own cost.
    pub fn probe_span() {
        drop(map());
    }

    /// This thread's counts since the last call; resets them.
    pub fn take() -> Counts {
        COUNTS.with(|c| c.replace(Counts::default()))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn spans_are_counted_only_when_on() {
            if !supported() {
                return;
            }
            take();
            drop(map());
            assert_eq!(take(), Counts::default(), "off: nothing counted");
            enable().unwrap();
            {
                let _s = map();
                std::hint::black_box((0..1000u64).sum::<u64>());
            }
            drop(commit());
            {
                let _s = translate();
                std::hint::black_box((0..1000u64).sum::<u64>());
            }
            let c = take();
            disable();
            assert_eq!((c.map_spans, c.commit_spans, c.translate_spans), (2, 1, 1));
            assert!(c.translate_cycles > 0 && c.map_cycles > c.translate_cycles, "translation is part of mapping");
            assert_eq!(take(), Counts::default(), "take resets");
        }
    }
}
