//! Where the grouped placements keep their volatile state (`groups.rs`, `regions.rs`): the
//! process's own DRAM, built from the table at mount, or, on a mount many processes share
//! (`fs/shared/`), the image's shared region (`share::TableLayout`), taken over once at
//! the mount before any other thread uses the table.

#![forbid(unsafe_code)]

use crate::share::{RegionCells, Shared};
use std::ops::Deref;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::OnceLock;

/// A word of volatile state that can be copied (for [`Cells::share`]).
pub trait Word: Shared {
    fn get(&self) -> u64;
    fn set(&self, v: u64);
}

macro_rules! word {
    ($t:ty, $n:ty) => {
        impl Word for $t {
            #[inline]
            fn get(&self) -> u64 {
                u64::from(self.load(Ordering::Relaxed))
            }
            #[inline]
            fn set(&self, v: u64) {
                self.store(v as $n, Ordering::Relaxed)
            }
        }
    };
}
word!(AtomicU8, u8);
word!(AtomicU32, u32);
word!(AtomicU64, u64);

/// Cells of volatile state: the process's own until [`Cells::share`], the region's after.
pub struct Cells<T: Word> {
    own: Box<[T]>,
    shared: OnceLock<RegionCells<T>>,
}

impl<T: Word> Cells<T> {
    pub fn new(own: impl Iterator<Item = T>) -> Cells<T> {
        Cells { own: own.collect(), shared: OnceLock::new() }
    }

    /// Uses the region's `cells` from here on (as many as its own), first copying its
    /// own into them if `publish` (the mount that built the state from the table), else
    /// taking theirs (a mount joining others). False if the cells do not fit or were
    /// taken already. Before any other thread uses them.
    pub fn share(&self, cells: RegionCells<T>, publish: bool) -> bool {
        if cells.len() != self.own.len() {
            return false;
        }
        if publish {
            for (to, from) in cells.iter().zip(self.own.iter()) {
                to.set(from.get());
            }
        }
        self.shared.set(cells).is_ok()
    }
}

impl<T: Word> Deref for Cells<T> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        match self.shared.get() {
            Some(s) => s,
            None => &self.own,
        }
    }
}
