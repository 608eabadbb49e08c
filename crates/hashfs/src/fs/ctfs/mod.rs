//! What the file system does only on ctFS images (the persistent page table,
//! `mapping/ctfs/`): `pswap` between files (`pswap.rs`) and untorn writes staged and
//! pswapped into place (`untorn_pswap.rs`).

mod pswap;
mod stats;
pub(super) mod untorn_pswap;
