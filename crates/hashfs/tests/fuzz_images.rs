//! The image fuzzer's bounded run (issue 53; `hashfs::testing::fuzz`): every input of the
//! committed corpus (`fuzz/corpus/image/`, found by libFuzzer's coverage-guided runs,
//! `cargo +nightly fuzz run image`), then seeded random inputs (a base image and up to
//! eight patches of up to 16 bytes, most of them in the metadata at the front of the
//! image). No input may panic or hang: mount, fsck and the tree walk answer a damaged image
//! with errors, and fsck --repair leaves what it says it repaired mounting and clean.
//! `HASHFS_FUZZ_INPUTS` sets how many random inputs (default 10,000, about 5 s).

use hashfs::testing::fuzz;
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

/// Runs `input` on another thread; fails if it panics or takes more than 20 s.
fn run_bounded(what: &str, input: Vec<u8>) {
    let (tx, rx) = mpsc::channel();
    let keep = input.clone();
    let worker = std::thread::spawn(move || {
        fuzz::run(&input);
        let _ = tx.send(());
    });
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(()) => {}
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            let _ = worker.join();
            panic!("{what} panicked; the input (hex): {}", hex(&keep));
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what} hung; the input (hex): {}", hex(&keep)),
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn the_committed_corpus_runs_clean() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/image");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no corpus in {}", dir.display());
    for f in &files {
        run_bounded(&f.display().to_string(), std::fs::read(f).unwrap());
    }
    eprintln!("{} corpus inputs", files.len());
}

#[test]
fn seeded_random_inputs_run_clean() {
    let n: u64 = std::env::var("HASHFS_FUZZ_INPUTS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let bases = fuzz::bases();
    let mut rng = SmallRng::seed_from_u64(0xF022);
    for i in 0..n {
        let mut input = vec![rng.random_range(0..bases.len() as u8)];
        for _ in 0..rng.random_range(1..=8) {
            // Three patches in four land in the first 256 KiB (superblocks, journals,
            // inode table, the mapping's structures); the rest anywhere.
            let off: u32 = if rng.random_bool(0.75) { rng.random_range(0..256 << 10) } else { rng.random() };
            let len = rng.random_range(1..=16u8);
            input.extend_from_slice(&off.to_le_bytes());
            input.push(len);
            input.extend((0..len).map(|_| rng.random::<u8>()));
        }
        run_bounded(&format!("random input {i}"), input);
    }
}

/// libFuzzer's finding of 2026-11-29 (after 787,671 executions): on the extent hash's
/// base image, a byte of the primary superblock and two bytes of one extent-hash entry
/// patched, which changed the entry's key in place (inode 7 became 59, a free inode). The
/// recovering mount of `fsck --repair` could not free the entry (its removal looks the key
/// up, and the key no longer hashes to where the entry lies), so the repaired image, marked
/// clean, still held it and the next mount refused it. fsck now clears every entry of a
/// global table that no lookup or removal treats as whole (`BlockMap::stray_entries`).
#[test]
fn a_misplaced_extent_hash_entry_is_cleared_by_repair() {
    // Its first byte picked the base 0x1d % 8 = 5 (the extent hash's) when there were eight;
    // it names 5 itself since the bases grew (`fuzz::bases`).
    let input = [0x05, 0, 0, 0, 0x1d, 0x01, 0x10, 0xa3, 0xe0, 0x00, 0xb8, 0x80, 0x00, 0x3b];
    run_bounded("libFuzzer's crash-053a7935", input.to_vec());
}

/// libFuzzer's finding of 2026-11-29 (the eleventh session, one of two jobs, after
/// 3,429,982 executions; `fuzz/findings/crash-6a28448b`): on the WineFS allocator's base
/// image, a file whose mapping names a data block the bitmap counts free. The mount's
/// recovery freed it again, the block went into the allocator's free-run index a second
/// time (overlapping the free run that already held it), and the next write's allocation
/// panicked in `FreeIndex::take` ("inside a free run"). A change now gives back to the
/// allocator only the blocks whose bitmap bit it clears (`mapping/mod.rs`, `finish`), so
/// the index stays the bitmap's whatever a damaged image maps.
#[test]
fn a_block_freed_twice_goes_back_to_the_allocator_once() {
    let input = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/findings/crash-6a28448b")).unwrap();
    run_bounded("libFuzzer's crash-6a28448b", input);
}
