//! The regions placement's bucket function without division (issue 57): *jump back*.
//!
//! Jump hashing (Lamping and Veach) gives key `k` among `n` buckets the highest of its
//! *hits* below `n`, where every bucket `j >= 1` is a hit independently with probability
//! `1/(j+1)` (seeded by the key): it walks the hits upward from 0, each step a
//! floating-point division, about ln n dependent steps (docs/mappings.md measured them as
//! most of what a single block's lookup costs beyond the paper's placement). The same set
//! of hits can be walked down from `n` instead, in a constant number of steps expected:
//!
//! - Split the buckets into the intervals `[2^i, 2^(i+1))`. An interval holds at least one
//!   hit with probability `1 - prod j/(j+1) = 1/2`, independently of the others, and given
//!   one, its highest hit is uniform over the interval (`P(max < x) = x/2^(i+1)`).
//! - Below a hit `m`, the next hit is `floor(u * m)` for a uniform `u` in [0, 1)
//!   (`P(next < x) = prod_{j=x}^{m-1} j/(j+1) = x/m`).
//!
//! So the bucket among `n` is found by starting at the interval that holds `n - 1`: draw
//! whether it has a hit and its highest one; step down from there (`m = u*m`, a multiply)
//! while the hit is `>= n`; if that leaves the interval, go to the next interval down,
//! where any hit is below `n`. Each interval and each step draws from the key's hash and
//! its own index only, never from `n`, so the hits are one fixed set per key and the
//! bucket among `n + 1` is the one among `n` or `n` itself: jump hashing's consistency
//! (an opening moves only the keys whose bucket becomes a new group) and its balance (each
//! key's bucket uniform), with about two intervals and one step expected, and a multiply
//! where jump hashing divides. (Otmar Ertl's JumpBackHash, 2024, walks down the same way;
//! this is derived from jump hashing's hits here, and its draws are its own.)
//!
//! Images made before it (`Superblock::region_buckets` 0) keep jump hashing.

use super::regions::mix;

/// One uniform draw of the key's hash `h` for interval `i` (64 bits).
#[inline]
fn draw(h: u64, i: u64) -> u64 {
    mix(h, i.wrapping_mul(0xD6E8_FEB8_6659_FD93))
}

/// The bucket of the key whose hash is `h` among `n` buckets (0 when `n <= 1`).
#[inline]
pub fn back(h: u64, n: u64) -> u64 {
    if n <= 1 {
        return 0;
    }
    let mut i = u64::from(63 - (n - 1).leading_zeros());
    loop {
        let r = draw(h, i);
        if r & 1 == 1 {
            let lo = 1u64 << i;
            let mut m = lo + ((r >> 1) & (lo - 1));
            let mut s = r;
            while m >= n {
                s = mix(s, 0);
                m = ((s >> 32) * m) >> 32;
            }
            if m >= lo {
                return m;
            }
        }
        if i == 0 {
            return 0;
        }
        i -= 1;
    }
}

/// Every bucket the key took as the count grew from `from` to `n`, highest first: its
/// bucket among `n`, each hit below it down to the first one under `from` (its bucket
/// among `from`), which is last; all of them down to 0 when `from` is 0.
pub fn back_tops(h: u64, from: u64, n: u64, out: &mut impl Extend<u64>) {
    let mut b = back(h, n);
    out.extend([b]);
    while b >= from && b > 0 {
        b = back(h, b);
        out.extend([b]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_one_higher_keeps_the_bucket_or_gives_the_new_one() {
        for key in 0..5000u64 {
            let h = mix(key, 3);
            let mut prev = back(h, 1);
            assert_eq!(prev, 0);
            for n in 2..700 {
                let b = back(h, n);
                assert!(b < n);
                assert!(b == prev || b == n - 1, "key {key}: {prev} -> {b} at {n}");
                prev = b;
            }
        }
    }

    #[test]
    fn buckets_are_as_even_as_independent_keys_make_them() {
        for n in [7u64, 50, 300, 1000] {
            let keys = 400 * n;
            let mut counts = vec![0u32; n as usize];
            for key in 0..keys {
                counts[back(mix(key, 1), n) as usize] += 1;
            }
            let var = counts.iter().map(|&c| (f64::from(c) - 400.0).powi(2)).sum::<f64>() / n as f64;
            // Independent keys: a standard deviation of about 20 (sqrt 400); not more.
            assert!(var.sqrt() < 25.0, "n {n}: sd {:.1}", var.sqrt());
            let (lo, hi) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
            assert!(*lo > 300 && *hi < 500, "n {n}: {lo}..{hi}");
        }
    }

    #[test]
    fn the_tops_are_the_buckets_taken_since_from() {
        for key in 0..2000u64 {
            let h = mix(key, 9);
            for (from, n) in [(0u64, 40u64), (10, 40), (39, 40), (40, 40), (100, 170)] {
                let mut got = Vec::new();
                back_tops(h, from, n, &mut got);
                // What the key took as the count grew: its buckets among from..=n, the
                // one among `from` included (among 0 and 1 it is 0).
                let mut want: Vec<u64> = (from.max(1)..=n).map(|m| back(h, m)).collect();
                if from == 0 {
                    want.push(0);
                }
                want.sort_unstable();
                want.dedup();
                want.reverse();
                assert_eq!(got, want, "key {key}, {from}..{n}");
            }
        }
    }
}
