//! The hash of the integer-keyed caches that every call consults (the inode cache, the
//! shim's descriptor table): one multiply by 2^64 / φ (Fibonacci hashing). Their keys are
//! numbers the file system or the kernel hands out, not keys a caller picks to collide, so
//! std's SipHash (its defence against that) buys nothing there; it took about 20 ns of a
//! call through the shim (perf, SQLite's WAL calls). A product's low bits depend only on
//! the key's low bits, and hashbrown picks the bucket by the low bits: so `finish` rotates
//! the well-mixed high bits down, as rustc-hash 2 does (else the inode cache's shards, whose
//! keys are 64 apart, would use one bucket in 64).

use std::hash::{BuildHasherDefault, Hasher};

/// The multiplier: odd, so distinct keys have distinct products.
const K: u64 = 0x9E37_79B9_7F4A_7C15;

/// See the module.
#[derive(Clone, Copy, Debug, Default)]
pub struct IntHasher(u64);

impl Hasher for IntHasher {
    fn finish(&self) -> u64 {
        self.0.rotate_left(26)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(K);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
    fn write_i32(&mut self, n: i32) {
        self.write_u64(u64::from(n as u32));
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(K);
    }
}

/// A `HashMap`'s hasher builder for [`IntHasher`].
pub type IntHash = BuildHasherDefault<IntHasher>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    /// Keys that differ only in their low bits (consecutive inode numbers, one shard's
    /// numbers 64 apart) get distinct low bits, and their high bits are not all alike.
    #[test]
    fn nearby_keys_spread_over_buckets_and_tags() {
        let h = IntHash::default();
        for step in [1u32, 64] {
            let hashes: Vec<u64> = (0..1024u32).map(|i| h.hash_one(1 + i * step)).collect();
            let buckets: std::collections::HashSet<u64> = hashes.iter().map(|x| x & 1023).collect();
            // Random hashes would fill 1 - 1/e of them, about 647.
            assert!(buckets.len() > 560, "step {step}: {} buckets of 1024", buckets.len());
            let tags: std::collections::HashSet<u64> = hashes.iter().map(|x| x >> 57).collect();
            assert!(tags.len() > 100, "step {step}: {} tags", tags.len());
        }
    }
}
