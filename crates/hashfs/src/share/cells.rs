//! Cells of a shared region held apart from it: a slice of the region's words that the
//! structure using them keeps beside its own DRAM copy (HashFS's table state on a shared
//! mount, `mapping/hashfs/cells.rs`), with the region kept mapped as long as it is.

use super::image::ImageRegion;
use super::region::Shared;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::Arc;

/// Cells of an image's region (see the module).
pub struct RegionCells<T: Shared> {
    ptr: NonNull<T>,
    len: usize,
    /// Keeps the mapping the cells lie in.
    _region: Arc<ImageRegion>,
}

// SAFETY: the cells are `Shared` (atomics, Sync), in a mapping `_region` keeps alive.
unsafe impl<T: Shared> Send for RegionCells<T> {}
// SAFETY: as above.
unsafe impl<T: Shared> Sync for RegionCells<T> {}

impl<T: Shared> RegionCells<T> {
    /// The cells `pick` chooses of `region`.
    pub fn of(region: &Arc<ImageRegion>, pick: impl FnOnce(&ImageRegion) -> &[T]) -> RegionCells<T> {
        let cells = pick(region);
        RegionCells { ptr: NonNull::from(cells).cast(), len: cells.len(), _region: region.clone() }
    }
}

impl<T: Shared> Deref for RegionCells<T> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        // SAFETY: `len` cells borrowed from the region's mapping, which `_region` keeps
        // mapped (a `Region` unmaps only when dropped); atomics, shared by address.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}
