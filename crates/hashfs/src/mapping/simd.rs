//! Vector hashing of HashFS keys: AVX-512 (8 lanes), AVX2 (4 lanes, 64-bit multiply
//! built from 32-bit ones) or scalar, chosen once at start-up. Every backend computes
//! exactly the same function, because the hash decides where data lives on the media.
//! `HASHFS_SIMD=scalar|avx2|avx512` forces a backend (tests run all of them).

use std::sync::OnceLock;

const MUL: u64 = 0xd6e8_feb8_6659_fd93;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimdKind {
    Avx512,
    Avx2,
    Scalar,
}

impl SimdKind {
    pub fn name(self) -> &'static str {
        match self {
            SimdKind::Avx512 => "avx512",
            SimdKind::Avx2 => "avx2",
            SimdKind::Scalar => "scalar",
        }
    }

    /// The backends this CPU can run.
    pub fn available() -> Vec<SimdKind> {
        let mut v = vec![SimdKind::Scalar];
        if std::arch::is_x86_feature_detected!("avx2") {
            v.push(SimdKind::Avx2);
        }
        if std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx512dq") {
            v.push(SimdKind::Avx512);
        }
        v
    }
}

/// The backend in use.
pub fn simd_kind() -> SimdKind {
    static KIND: OnceLock<SimdKind> = OnceLock::new();
    *KIND.get_or_init(|| {
        let avail = SimdKind::available();
        let best = *avail.last().expect("scalar is always available");
        match std::env::var("HASHFS_SIMD").ok().as_deref() {
            Some("scalar") => SimdKind::Scalar,
            Some("avx2") if avail.contains(&SimdKind::Avx2) => SimdKind::Avx2,
            _ => best,
        }
    })
}

/// The home slot of `key` in a table of `nslots` (< 2^32) slots.
#[inline]
pub fn home_slot(key: u64, seed: u64, nslots: u64) -> u64 {
    let mut x = key ^ seed;
    x ^= x >> 32;
    x = x.wrapping_mul(MUL);
    x ^= x >> 32;
    x = x.wrapping_mul(MUL);
    x ^= x >> 32;
    ((x >> 32) * nslots) >> 32
}

/// Home slots of up to 8 keys at once.
pub fn home_slots(kind: SimdKind, keys: &[u64], seed: u64, nslots: u64, out: &mut [u64]) {
    assert!(keys.len() <= 8 && out.len() >= keys.len() && nslots < (1 << 32));
    if keys.len() < 8 || kind == SimdKind::Scalar {
        for (o, &k) in out.iter_mut().zip(keys) {
            *o = home_slot(k, seed, nslots);
        }
        return;
    }
    let keys8: &[u64; 8] = keys.try_into().expect("8 keys");
    let out8: &mut [u64; 8] = (&mut out[..8]).try_into().expect("8 outputs");
    match kind {
        // SAFETY: Avx512 is chosen only when the CPU has avx512f and avx512dq.
        SimdKind::Avx512 => unsafe { hash8_avx512(keys8, seed, nslots, out8) },
        // SAFETY: Avx2 is chosen only when the CPU has avx2.
        SimdKind::Avx2 => unsafe {
            hash4_avx2(&keys8[..4], seed, nslots, &mut out8[..4]);
            hash4_avx2(&keys8[4..], seed, nslots, &mut out8[4..]);
        },
        SimdKind::Scalar => unreachable!(),
    }
}

/// Eight keys' home slots at once.
///
/// # Safety
/// The CPU has AVX-512F and AVX-512DQ (checked once at start-up by the caller's dispatch).
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn hash8_avx512(keys: &[u64; 8], seed: u64, nslots: u64, out: &mut [u64; 8]) {
    use core::arch::x86_64::*;
    // SAFETY: unaligned loads/stores of exactly 64 bytes from/to the given arrays.
    unsafe {
        let mul = _mm512_set1_epi64(MUL as i64);
        let mut x = _mm512_xor_si512(_mm512_loadu_si512(keys.as_ptr() as *const _), _mm512_set1_epi64(seed as i64));
        x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 32));
        x = _mm512_mullo_epi64(x, mul);
        x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 32));
        x = _mm512_mullo_epi64(x, mul);
        x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 32));
        let hi = _mm512_srli_epi64(x, 32);
        let prod = _mm512_mul_epu32(hi, _mm512_set1_epi64(nslots as i64));
        _mm512_storeu_si512(out.as_mut_ptr() as *mut _, _mm512_srli_epi64(prod, 32));
    }
}

/// Four keys' home slots at once (`keys` and `out` hold four each).
///
/// # Safety
/// The CPU has AVX2 (checked once at start-up by the caller's dispatch).
#[target_feature(enable = "avx2")]
unsafe fn hash4_avx2(keys: &[u64], seed: u64, nslots: u64, out: &mut [u64]) {
    use core::arch::x86_64::*;
    /// 64-bit lane-wise low multiply from 32-bit multiplies (AVX2 has no `mullo_epi64`).
    ///
    /// # Safety
    /// The CPU has AVX2.
    #[inline(always)]
    unsafe fn mullo64(a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: register-only AVX2 arithmetic; the caller has AVX2.
        unsafe {
            let lo = _mm256_mul_epu32(a, b);
            let t1 = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), b);
            let t2 = _mm256_mul_epu32(a, _mm256_srli_epi64(b, 32));
            _mm256_add_epi64(lo, _mm256_slli_epi64(_mm256_add_epi64(t1, t2), 32))
        }
    }
    assert!(keys.len() == 4 && out.len() == 4);
    // SAFETY: unaligned loads/stores of exactly 32 bytes from/to 4-element slices.
    unsafe {
        let mul = _mm256_set1_epi64x(MUL as i64);
        let mut x = _mm256_xor_si256(_mm256_loadu_si256(keys.as_ptr() as *const _), _mm256_set1_epi64x(seed as i64));
        x = _mm256_xor_si256(x, _mm256_srli_epi64(x, 32));
        x = mullo64(x, mul);
        x = _mm256_xor_si256(x, _mm256_srli_epi64(x, 32));
        x = mullo64(x, mul);
        x = _mm256_xor_si256(x, _mm256_srli_epi64(x, 32));
        let prod = _mm256_mul_epu32(_mm256_srli_epi64(x, 32), _mm256_set1_epi64x(nslots as i64));
        _mm256_storeu_si256(out.as_mut_ptr() as *mut _, _mm256_srli_epi64(prod, 32));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_backend_computes_the_same_hash() {
        let mut rng = 0x1234_5678_9abc_def0u64;
        for round in 0..2000 {
            let mut keys = [0u64; 8];
            for k in keys.iter_mut() {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                *k = rng;
            }
            let nslots = [17u64, 1000, (1 << 32) - 1, 123_456_789][round % 4];
            let seed = rng.rotate_left(7);
            let mut want = [0u64; 8];
            home_slots(SimdKind::Scalar, &keys, seed, nslots, &mut want);
            for kind in SimdKind::available() {
                let mut got = [0u64; 8];
                home_slots(kind, &keys, seed, nslots, &mut got);
                assert_eq!(got, want, "{kind:?}");
            }
            assert!(want.iter().all(|&s| s < nslots));
        }
    }

    #[test]
    fn consecutive_blocks_spread_out() {
        let n = 1 << 20;
        let slots: std::collections::HashSet<u64> = (0..1000u64).map(|b| home_slot((5u64 << 32) | b, 42, n)).collect();
        assert!(slots.len() > 990);
    }
}
