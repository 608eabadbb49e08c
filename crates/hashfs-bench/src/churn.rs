//! `hashfs-bench churn`: fill to 90% with files of 1..64 blocks, delete them all in an
//! interleaved order, ten times over, and report the table's probe lengths each round.

#![forbid(unsafe_code)]

use crate::Failure;
use hashfs::FileSystem;
use hashfs::FormatOptions;
use std::path::Path;

pub fn run(image: &Path, size: u64, rounds: u32) -> Result<(), Failure> {
    FileSystem::format_file(image, size, &FormatOptions::default(), &|_, _| {})?;
    let (fs, _) = FileSystem::open(image)?;
    let Some(table) = hashfs::testing::table(&fs) else {
        return Err(crate::fail("bench churn measures the HashFS table"));
    };
    let total = fs.statfs().blocks_total;
    println!(
        "# bench churn: image {} ({} MiB, {} blocks), {rounds} rounds of fill to 90% and delete all",
        image.display(),
        size >> 20,
        total
    );
    println!(
        "{:>5} {:>7} {:>6} {:>10} {:>9} {:>11} {:>10} {:>11}",
        "round", "files", "load", "hit_mean", "hit_max", "miss_mean", "tombs", "tombs_empty"
    );
    let block = vec![0xA5u8; 64 * 4096];
    for round in 0..rounds {
        let mut i = 0u64;
        while fs.statfs().blocks_free > total / 10 + 64 {
            let blocks = 1 + (i * 37 + round as u64) % 64;
            fs.write(Path::new(&format!("/r{round}-{i}")), &block[..(blocks * 4096) as usize])?;
            i += 1;
        }
        let full = table.probe_stats();
        for parity in 0..2 {
            for j in (parity..i).step_by(2) {
                fs.remove_file(Path::new(&format!("/r{round}-{j}")))?;
            }
        }
        let empty = table.probe_stats();
        println!(
            "{:>5} {:>7} {:>6.3} {:>10.2} {:>9} {:>11.1} {:>10} {:>11}",
            round,
            i,
            full.live as f64 / total as f64,
            full.mean_hit_probes,
            full.max_hit_probes,
            full.mean_miss_probes,
            full.tombstones,
            empty.tombstones
        );
    }
    Ok(())
}
