//! Deletes do not degrade later lookups over long churn: the image is filled with files and
//! emptied ten times over; after each fill the table holds no tombstone build-up and probes
//! like a fresh table, and each emptying leaves tombstones only on live keys' paths. The figures are printed
//! (`cargo test --test table_churn -- --nocapture`).

mod common;
use common::*;
use hashfs::testing::mapping::hashfs::{classify, Entry};
use std::path::Path;

#[test]
fn fill_and_empty_ten_times() {
    let (fs, dev) = new_fs(24 << 20, &hashfs::FormatOptions { inode_count: Some(4096), ..small_opts() });
    let total = fs.statfs().blocks_total;
    let mut first = None;
    let _ = &mut first;
    for round in 0..10 {
        // Files of 1..=64 blocks until 90% full.
        let mut i = 0u64;
        while fs.statfs().blocks_free > total / 10 + 64 {
            let blocks = 1 + (i * 37 + round) % 64;
            fs.write(Path::new(&format!("/r{round}-{i}")), &vec![i as u8; (blocks * 4096) as usize]).unwrap();
            i += 1;
        }
        let Some(table) = hashfs::testing::table(&fs) else {
            // Allocator mappings: emptying gives back every block (data and structure)
            // but the root directory's and its tree nodes.
            for j in 0..i {
                fs.remove_file(Path::new(&format!("/r{round}-{j}"))).unwrap();
            }
            let ms = fs.mapping_stats().unwrap();
            let root_blocks = fs.metadata(Path::new("/")).unwrap().blocks;
            assert_eq!(ms.data_blocks, root_blocks, "round {round}: only the root directory's blocks stay");
            assert_eq!(fs.statfs().blocks_free, total - root_blocks - ms.node_blocks, "round {round}");
            println!("round {round}: {i} files written and removed; {} tree nodes left", ms.node_blocks);
            continue;
        };
        let full = table.probe_stats();
        println!(
            "round {round}: {} files, load {:.2}, hit probes mean {:.2} max {}, miss probes mean {:.1}, tombstones {}",
            i,
            full.live as f64 / total as f64,
            full.mean_hit_probes,
            full.max_hit_probes,
            full.mean_miss_probes,
            full.tombstones
        );
        // No build-up: a full table holds (almost) no tombstones, and probes as a fresh
        // linear-probing table would (Knuth: (1 + 1/(1 - load)) / 2; twice that bounds the
        // variance of one table of this size).
        let load = full.live as f64 / total as f64;
        let knuth = 0.5 * (1.0 + 1.0 / (1.0 - load));
        // The regions placement moves keys out of open groups when it opens more; the
        // tombstones they leave on the paths of keys that stay are needed, and fill only
        // as later keys take them (docs/mappings.md, "HashFS with jump regions").
        let regions = fs.open_groups().is_some();
        assert!(full.tombstones <= total / if regions { 10 } else { 100 }, "round {round}: {full:?}");
        assert!(full.mean_hit_probes <= 2.0 * knuth, "round {round}: {full:?}, expected about {knuth:.2}");
        first.get_or_insert(full);
        // Empty in an interleaved order (every other file, then the rest).
        for parity in 0..2 {
            for j in (parity..i).step_by(2) {
                fs.remove_file(Path::new(&format!("/r{round}-{j}"))).unwrap();
            }
        }
        let empty = table.probe_stats();
        let root_blocks = fs.metadata(Path::new("/")).unwrap().blocks;
        assert_eq!(empty.live, root_blocks, "round {round}: only the root directory's blocks stay");
        // Tombstones may remain only on the probe paths of keys still live (the root
        // directory's blocks, inserted while the table was full): every tombstone lies
        // between some live key's home slot and the slot that key sits in.
        let n = table.nslots();
        let mut on_path = vec![false; n as usize];
        for s in 0..n {
            let v = table.load(s);
            if let (Entry::Key { .. }, Some(mut t)) = (classify(v, n), table.path_home(v, s)) {
                while t != s {
                    on_path[t as usize] = true;
                    t = table.next_slot(t);
                }
            }
        }
        let mut tombstones = 0;
        for s in 0..n {
            if classify(table.load(s), n) == Entry::Tombstone {
                tombstones += 1;
                assert!(on_path[s as usize], "round {round}: the tombstone at slot {s} is on no live key's probe path");
            }
        }
        assert_eq!(tombstones, empty.tombstones);
        println!(
            "round {round} emptied: tombstones {} (all on live keys' paths), miss probes mean {:.2}",
            empty.tombstones, empty.mean_miss_probes
        );
    }
    drop(fs);
    assert_fsck_clean(&dev);
}
