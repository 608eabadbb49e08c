//! File-mapping structures. HashFS (paper §3.2.2) is the global linear-probing table in
//! [`hashfs`]; [`simd`] hashes eight keys at once; [`tcache`] is the per-file DRAM
//! translation cache.

pub mod extent_hash;
pub mod hashfs;
pub mod simd;
pub mod tcache;
