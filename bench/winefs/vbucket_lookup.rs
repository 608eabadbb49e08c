//! Issue 57: would a table of virtual buckets make the regions placement's bucket function
//! cheaper than jump hashing per key? (docs/mappings.md, "What would change the verdict".)
//!
//! Times, as a dependent chain (each lookup's key depends on the last result, as a
//! lookup's slot read depends on its bucket), jump hashing of a key among `n` open groups
//! against a read of a table of virtual buckets sized for an image of 4,096 groups (8 GiB)
//! at 256, 1,024 and 4,096 virtual buckets per group, 4-byte entries. Prints JSON.
//!
//!     rustc -O -o /tmp/vbucket_lookup bench/winefs/vbucket_lookup.rs
//!     /tmp/vbucket_lookup > bench/results/winefs/vbucket-lookup.json
use std::time::Instant;

fn jump(mut key: u64, n: u64) -> u64 {
    let (mut b, mut j) = (-1i64, 0i64);
    while j < n as i64 {
        b = j;
        key = key.wrapping_mul(2_862_933_555_777_941_757).wrapping_add(1);
        j = ((b + 1) as f64 * ((1u64 << 31) as f64 / ((key >> 33) + 1) as f64)) as i64;
    }
    b as u64
}

fn mix(key: u64) -> u64 {
    let mut x = key ^ 0x9E37_79B9_7F4A_7C15;
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

const ITERS: u64 = 5_000_000;
const GROUPS: u64 = 4096;

fn time_jump(n: u64, acc: &mut u64) -> f64 {
    let mut k = 1u64;
    let t = Instant::now();
    for _ in 0..ITERS {
        let b = jump(mix(k), n);
        *acc = acc.wrapping_add(b);
        k = k.wrapping_add(b | 1);
    }
    t.elapsed().as_nanos() as f64 / ITERS as f64
}

fn time_table(per_group: u64, n: u64, acc: &mut u64) -> f64 {
    let v = GROUPS * per_group;
    let tab: Vec<u32> = (0..v).map(|x| jump(mix(x), n) as u32).collect();
    let mut k = 1u64;
    let t = Instant::now();
    for _ in 0..ITERS {
        let vb = ((u128::from(mix(k)) * u128::from(v)) >> 64) as usize;
        let b = u64::from(tab[vb]);
        *acc = acc.wrapping_add(b);
        k = k.wrapping_add(b | 1);
    }
    t.elapsed().as_nanos() as f64 / ITERS as f64
}

fn main() {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| c.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string()))
        .unwrap_or_default();
    let mut acc = 0u64;
    let mut rows = Vec::new();
    for round in 0..3 {
        for n in [300u64, 3000] {
            rows.push(format!(
                "{{\"round\": {round}, \"what\": \"jump per key\", \"open_groups\": {n}, \"ns\": {:.1}}}",
                time_jump(n, &mut acc)
            ));
            for per in [256u64, 1024, 4096] {
                rows.push(format!(
                    "{{\"round\": {round}, \"what\": \"table\", \"per_group\": {per}, \"table_mib\": {}, \"open_groups\": {n}, \"ns\": {:.1}}}",
                    GROUPS * per * 4 >> 20,
                    time_table(per, n, &mut acc)
                ));
            }
        }
    }
    println!(
        "{{\"command\": \"rustc -O -o /tmp/vbucket_lookup bench/winefs/vbucket_lookup.rs && /tmp/vbucket_lookup\", \"cpu\": \"{cpu}\", \"image_groups\": {GROUPS}, \"lookups_per_point\": {ITERS}, \"checksum\": {acc},\n \"rows\": [\n  {}\n ]}}",
        rows.join(",\n  ")
    );
}
