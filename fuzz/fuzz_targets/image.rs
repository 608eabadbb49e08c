//! An image made from a real one by the fuzzer's patches goes through fsck, mount, a walk
//! of the tree, a change, unmount, fsck --repair and a mount of the repair
//! (`hashfs::testing::fuzz::run`, which says what counts as a bug).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(
    init: {
        // Each run copies a few images of 1 MiB; from the heap rather than fresh mappings
        // (glibc maps anything over 128 KiB by default), they cost no page faults.
        // SAFETY: mallopt only sets allocator parameters; no allocation is in flight in
        // this single-threaded initializer.
        unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 64 << 20) };
        // SAFETY: as above.
        unsafe { libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20) };
    },
    |data: &[u8]| hashfs::testing::fuzz::run(data)
);
