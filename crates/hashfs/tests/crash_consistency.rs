//! Crash consistency, through the crash-state explorer (`hashfs::testing::crashtest`): every named
//! operation over the base tree, a fixed share of the sequences of two, random longer
//! sequences, two threads with transactions open in both journals, and a directory that
//! grows a block; at every fence every crash state (sampled past 4,096), recovered, checked
//! against the states before and after, fsck-checked, and recovery itself crashed.
//!
//! The mapping is `HASHFS_TEST_MAPPING` (scripts/test.sh runs every one); samples are
//! seeded by `HASHFS_CRASH_SEED` (default 1), printed with every failure and its
//! reproducer. `hashfs crashtest` runs the same explorer at full scale.

mod common;
use common::*;
use hashfs::format;
use hashfs::pm::CrashDevice;
use hashfs::testing::crashtest::{self, concurrent, explore::explore, Config, Failure, FailureModel, Stats, Workload};
use hashfs::{FileSystem, FormatOptions, OpenOptions};
use std::path::Path;
use std::sync::Arc;

fn seed() -> u64 {
    std::env::var("HASHFS_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(1)
}

/// `HASHFS_CRASH_RECOVERY_IMAGES=N` crashes recovery on at most N images per crash point
/// (default: every image); scripts/test.sh bounds the mappings other than HashFS with it.
fn recovery_images_per_point() -> u64 {
    std::env::var("HASHFS_CRASH_RECOVERY_IMAGES").ok().and_then(|s| s.parse().ok()).unwrap_or(u64::MAX)
}

/// `HASHFS_CRASH_PAIRS=STRIDE:OFFSET` explores every STRIDE-th pair of operations from
/// the OFFSET-th (default 13:0); scripts/test.sh gives each mapping other than HashFS a
/// wider stride and an offset of its own, so that together they cover more pairs.
fn pair_stride_offset() -> (usize, usize) {
    let Ok(v) = std::env::var("HASHFS_CRASH_PAIRS") else { return (13, 0) };
    let parsed = v.split_once(':').and_then(|(s, o)| Some((s.parse().ok()?, o.parse().ok()?)));
    match parsed {
        Some((s, o)) if s > 0 && o < s => (s, o),
        _ => panic!("HASHFS_CRASH_PAIRS={v:?}: want STRIDE:OFFSET, OFFSET below STRIDE"),
    }
}

fn config() -> Config {
    Config {
        seed: seed(),
        placement: test_placement(),
        recovery_images_per_point: recovery_images_per_point(),
        ..Config::default()
    }
}

fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Named workloads by their ids (`ace:op,op,...`).
fn workloads(ids: &[&str]) -> Vec<Workload> {
    ids.iter().map(|id| Workload::from_id(id).expect("known workload")).collect()
}

/// Which operations of workload `id` succeed, run from `base`: a workload meant to
/// explore an operation must not explore its failure instead.
fn successes(base: &[u8], id: &str) -> Vec<bool> {
    let dev = Arc::new(CrashDevice::from_image(base));
    let (fs, _) = FileSystem::mount(dev, &|_, _| {}).unwrap();
    let mut fds = Default::default();
    Workload::from_id(id).unwrap().ops.iter().map(|op| op.apply(&fs, &mut fds).is_ok()).collect()
}

/// Fails with every reproducer; prints what was explored.
fn report(what: &str, stats: &Stats, failures: &[Failure]) {
    eprintln!(
        "{what} on {}: {} workloads, {} crash points, {} states ({} crash images, {} of crashed recoveries, {} of process deaths), seed {}",
        test_mapping().name(),
        stats.workloads,
        stats.crash_points,
        stats.total_states(),
        stats.states,
        stats.recovery_states,
        stats.deaths,
        seed()
    );
    if recovery_images_per_point() != u64::MAX {
        eprintln!("  (recovery crashed on the first {} images of each crash point)", recovery_images_per_point());
    }
    let all: Vec<String> = failures.iter().map(|f| f.to_string()).collect();
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), all.join("\n\n"));
}

/// The named operations of this run's mapping and placement; `HASHFS_CRASH_OPS=a,b,...`
/// keeps only those (CI's bounded runs of the regions placement, whose every write opens a
/// group and moves keys).
fn chosen_ops() -> Vec<&'static str> {
    let mut ops = crashtest::ace_ops(test_mapping(), test_placement());
    if let Ok(only) = std::env::var("HASHFS_CRASH_OPS") {
        let only: Vec<&str> = only.split(',').collect();
        assert!(only.iter().all(|o| ops.contains(o)), "HASHFS_CRASH_OPS={only:?}: not all known");
        ops.retain(|o| only.contains(o));
    }
    ops
}

#[test]
fn explore_every_single_operation() {
    let ops = chosen_ops();
    let w = crashtest::ace_workloads(&ops, 1);
    let (stats, failures) =
        crashtest::run(&config(), test_mapping(), test_layout_score(), &w, threads(), &|_, _, _| {});
    report("single operations", &stats, &failures);
    assert_eq!(stats.workloads, ops.len() as u64);
    // (About 200 states an operation on every mapping; CI's bounded runs name fewer.)
    assert!(stats.total_states() > 100 * ops.len() as u64, "too few states explored: {}", stats.total_states());
}

/// Process death (a participant of a shared image killed after any store, every store it
/// made seen by the survivor, none after): every named operation alone and (on the paper
/// placement's small images) the pairs `explore_pairs_of_operations` takes, each death
/// repaired by recovery, checked, and followed by the survivor's own operations
/// (`crashtest/death.rs`).
#[test]
fn explore_process_deaths() {
    let ops = chosen_ops();
    let (stride, offset) = pair_stride_offset();
    let mut w = crashtest::ace_workloads(&ops, 1);
    if test_placement() == hashfs::HashPlacement::Paper {
        w.extend(crashtest::ace_workloads(&ops, 2).into_iter().skip(ops.len() + offset).step_by(stride));
    }
    let cfg = Config { model: FailureModel::ProcessDeath, ..config() };
    let (stats, failures) = crashtest::run(&cfg, test_mapping(), test_layout_score(), &w, threads(), &|_, _, _| {});
    report("process deaths", &stats, &failures);
    assert_eq!(stats.states + stats.recovery_states, 0, "power failures explored too");
    assert!(stats.deaths >= 10 * w.len() as u64, "too few deaths explored: {} for {} workloads", stats.deaths, w.len());
}

/// Process deaths in the free of a file with attributes, by an unlink or a rename over it:
/// a survivor that finishes the free frees the attributes' inode with it, and its bit in
/// the region's inode bitmap goes too (it stayed taken, its inode free, until 2026-12-05:
/// `setxattr,unlink-small` came up only when a new operation moved the pairs the test
/// samples).
#[test]
fn process_deaths_in_frees_of_files_with_attributes() {
    let w =
        workloads(&["ace:setxattr,unlink-small", "ace:setxattr,rename-over-small", "ace:setxattr-big,unlink-small"]);
    let cfg = Config { model: FailureModel::ProcessDeath, ..config() };
    let (stats, failures) = crashtest::run(&cfg, test_mapping(), test_layout_score(), &w, threads(), &|_, _, _| {});
    report("process deaths in frees of files with attributes", &stats, &failures);
    assert!(stats.deaths >= 10 * w.len() as u64, "too few deaths explored: {}", stats.deaths);
}

/// Process deaths on an image whose data area is nearly full: on HashFS every table slot
/// but a few holds a key, so a freed slot lies on other keys' probe paths and its purge
/// must leave it a tombstone. A takeover after a death repairs no probe path
/// (`fs/hashfs/recovery.rs`: a death leaves every store visible, and each keeps them
/// whole): a store that made a path's slot EMPTY for a moment would leave keys behind it
/// unreachable, which the survivor's walk and fsck find here (the small images of the
/// other tests hold too few keys for a freed slot to lie on another key's path).
#[test]
fn explore_process_deaths_on_a_crowded_table() {
    let base = nearly_full_image(8);
    let w = workloads(&[
        "ace:unlink",
        "ace:truncate-down",
        "ace:punch",
        "ace:rename-replace",
        "ace:untorn-overwrite",
        "ace:append,unlink",
        "ace:unlink-small",
        "ace:append,unlink-small",
        "ace:rename-over-small",
    ]);
    let cfg = Config { model: FailureModel::ProcessDeath, ..config() };
    let (stats, failures) = crashtest::run_from(&cfg, test_mapping(), &base, &w, threads(), &|_, _, _| {});
    report("process deaths on a crowded table", &stats, &failures);
    assert!(stats.deaths >= 10 * w.len() as u64, "too few deaths explored: {} for {} workloads", stats.deaths, w.len());
}

#[test]
fn explore_pairs_of_operations() {
    // Every thirteenth pair by default (the full set is `hashfs crashtest --seq 2`), with
    // fewer samples at the large crash points.
    let ops = crashtest::ace_ops(test_mapping(), test_placement());
    let (stride, offset) = pair_stride_offset();
    let w: Vec<Workload> =
        crashtest::ace_workloads(&ops, 2).into_iter().skip(ops.len() + offset).step_by(stride).collect();
    let cfg = Config { samples: 12, ..config() };
    let (stats, failures) = crashtest::run(&cfg, test_mapping(), test_layout_score(), &w, threads(), &|_, _, _| {});
    let th = |n: usize| match (n % 10, n % 100) {
        (1, r) if r != 11 => format!("{n}st"),
        (2, r) if r != 12 => format!("{n}nd"),
        (3, r) if r != 13 => format!("{n}rd"),
        _ => format!("{n}th"),
    };
    report(&format!("pairs of operations (every {} from the {})", th(stride), th(offset)), &stats, &failures);
    assert!(stats.workloads >= (ops.len() * ops.len() / stride / 2) as u64, "{} pairs", stats.workloads);
}

/// Strict mode: every write of up to the untorn limit whole or absent (overwrites inside
/// and across blocks, over holes, appends, writes past EOF, and one of 100 KiB: pieces on
/// most mappings, one pswap on ctfs), alone and in random sequences.
#[test]
fn explore_strict_mode_writes() {
    let ops =
        ["overwrite", "overwrite-small", "write-past-eof", "fill-hole", "append", "untorn-hole", "overwrite-large"];
    let mut w = crashtest::ace_workloads(&ops, 1);
    w.extend((0..4).map(|i| crashtest::random_workload(seed() + 100, i, 6)));
    let cfg = Config { samples: 16, write_mode: hashfs::WriteMode::Strict, ..config() };
    let (stats, failures) = crashtest::run(&cfg, test_mapping(), test_layout_score(), &w, threads(), &|_, _, _| {});
    report("strict-mode writes", &stats, &failures);
    assert_eq!(stats.workloads, w.len() as u64);
}

/// Untorn writes inside one block, again and again on the same block: on HashFS the key
/// switch without the journal alternates between a new slot after the old one on the
/// probe path (the first write) and one before it (the tombstone the first left), each
/// with its own order of stores (`fs/untorn.rs`, `switch_one`), then a hole punched
/// over the block (freeing the live copy while the older one's tombstone may still be
/// pending); also in strict mode.
#[test]
fn explore_repeated_untorn_writes_to_one_block() {
    let w: Vec<Workload> = workloads(&[
        "ace:untorn-small,untorn-small,untorn-small",
        "ace:untorn-block,untorn-block,fsync",
        "ace:untorn-block,untorn-block,punch",
    ]);
    let (stats, failures) =
        crashtest::run(&config(), test_mapping(), test_layout_score(), &w, threads(), &|_, _, _| {});
    report("repeated untorn writes to one block", &stats, &failures);
    let strict: Vec<Workload> = workloads(&["ace:overwrite-small,overwrite-small,overwrite-small"]);
    let cfg = Config { write_mode: hashfs::WriteMode::Strict, ..config() };
    let (stats2, failures2) =
        crashtest::run(&cfg, test_mapping(), test_layout_score(), &strict, threads(), &|_, _, _| {});
    report("repeated strict overwrites of one block", &stats2, &failures2);
    assert_eq!(stats.workloads + stats2.workloads, 4);
}

/// A write's times may lag until the file's fsync (`fs/times.rs`), not after it: writes
/// and appends (fast ones on HashFS), then the file's fsync, then more work.
#[test]
fn explore_fsync_makes_write_times_durable() {
    let ids = [
        "ace:overwrite,fsync",
        "ace:overwrite-small,fsync-g",
        "ace:append,write-past-eof,fsync-g,chmod",
        "ace:append,fsync,fsync-g,overwrite",
    ];
    let w = workloads(&ids);
    let cfg = Config { samples: 16, ..config() };
    let (stats, failures) = crashtest::run(&cfg, test_mapping(), test_layout_score(), &w, threads(), &|_, _, _| {});
    report("writes then fsync", &stats, &failures);
    assert_eq!(stats.workloads, w.len() as u64);
}

#[test]
fn explore_random_sequences() {
    let w: Vec<Workload> = (0..8).map(|i| crashtest::random_workload(seed(), i, 6)).collect();
    let cfg = Config { samples: 24, ..config() };
    let (stats, failures) = crashtest::run(&cfg, test_mapping(), test_layout_score(), &w, threads(), &|_, _, _| {});
    report("random sequences", &stats, &failures);
}

#[test]
fn explore_two_threads_with_both_journals_open() {
    let cfg = Config { samples: 6, ..config() };
    let base = crashtest::base_image(test_mapping(), test_layout_score(), test_placement());
    let mut failures = Vec::new();
    let mut stats = Stats::default();
    let mut both_open = 0;
    for round in 0..40 {
        let (s, o) = concurrent::explore_two_threads(&cfg, test_mapping().name(), &base, round, 6, &mut failures);
        stats.add(&s);
        both_open += o;
        if both_open >= 5 && round >= 10 {
            break;
        }
    }
    report("two threads", &stats, &failures);
    assert!(both_open > 0, "no crash point had transactions open in both journals");
}

#[test]
fn explore_create_needing_a_new_directory_block() {
    // 128 one-slot entries fill a directory's first block; the next create adds a block.
    let dev = Arc::new(CrashDevice::new(crashtest::image_bytes(test_placement())));
    let opts = hashfs::testing::crashtest::format_options(test_mapping(), test_layout_score(), test_placement());
    format(&*dev, &FormatOptions { inode_count: Some(256), ..opts }, &|_, _| {}).unwrap();
    let (fs, _) = FileSystem::mount(dev.clone(), &|_, _| {}).unwrap();
    fs.create_dir(Path::new("/A"), 0o755).unwrap();
    for i in 0..128 {
        fs.open_file(Path::new(&format!("/A/{i:03}")), OpenOptions::new().write(true).create(true)).unwrap();
    }
    assert_eq!(fs.metadata(Path::new("/A")).unwrap().size, 4096);
    fs.unmount().unwrap();
    let base = dev.live_image();
    let w = Workload::from_id("ace:create").unwrap();
    let mut failures = Vec::new();
    let stats = explore(&config(), test_mapping().name(), &base, &w, &mut failures);
    report("create with a new directory block", &stats, &failures);
    assert!(stats.states > 0);
}

/// Regression: on HashFS, a write or fallocate filling a hole inside EOF published its
/// block's key unlogged; when its transaction rolled back, recovery kept the key, and the
/// new data showed with the old times and block count (found by the explorer as
/// `random:2:13:6`). The keys of such blocks are now logged.
#[test]
fn explore_hole_fills_roll_back_whole() {
    let w: Vec<Workload> = workloads(&["ace:fill-hole", "ace:fallocate", "ace:punch,fill-hole"]);
    let (stats, failures) =
        crashtest::run(&config(), test_mapping(), test_layout_score(), &w, threads(), &|_, _, _| {});
    report("hole fills", &stats, &failures);
}

/// A clean unmount crashed at every fence (issue 53): its work (times left in DRAM stored,
/// one-fence appends' sizes made plain) must be durable before the clean flag, which tells
/// the next mount to skip recovery. With the flag first, a crash after it leaves a tagged
/// size on a "clean" image: "inode 7: size beyond the largest file"
/// (`scripts/crash-bugs.sh clean-flag-first`).
#[test]
fn explore_unmount_after_changes() {
    let w = workloads(&[
        "ace:unmount",
        "ace:append-small,unmount",
        "ace:write-past-eof,unmount",
        "ace:truncate-down,unmount",
    ]);
    let (stats, failures) =
        crashtest::run(&config(), test_mapping(), test_layout_score(), &w, threads(), &|_, _, _| {});
    report("unmount after changes", &stats, &failures);
}

/// One journal, as on a machine with one CPU (NOVA's recovery once read out of bounds
/// there): operations that open transactions of every kind, random sequences, and two
/// threads, which then take turns for the one journal.
#[test]
fn explore_one_journal() {
    // (Recovery crashed on the first 4 images of each crash point at most: the crashed
    // recoveries were 90% of this test's time, and they are explored with two journals.)
    let c = config();
    let cfg = Config { journals: 1, samples: 16, recovery_images_per_point: c.recovery_images_per_point.min(4), ..c };
    let mut w = workloads(&[
        "ace:create",
        "ace:rename-across",
        "ace:rename-replace",
        "ace:unlink",
        "ace:append",
        "ace:write-past-eof",
        "ace:truncate-down",
        "ace:setxattr-big",
        "ace:untorn-overwrite",
    ]);
    w.extend((0..2).map(|i| crashtest::random_workload(seed() + 200, i, 6)));
    let (stats, failures) = crashtest::run(&cfg, test_mapping(), test_layout_score(), &w, threads(), &|_, _, _| {});
    report("one journal", &stats, &failures);
    assert_eq!(stats.workloads, w.len() as u64);
    let base =
        crashtest::base_image_in(test_mapping(), test_layout_score(), test_placement(), hashfs::WriteMode::Relaxed, 1);
    let mut failures = Vec::new();
    let mut stats = Stats::default();
    for round in 0..2 {
        let (s, _) = concurrent::explore_two_threads(&cfg, test_mapping().name(), &base, round, 6, &mut failures);
        stats.add(&s);
    }
    report("two threads, one journal", &stats, &failures);
}

/// Several descriptors of one file and of one directory at once (issue 53): a truncate
/// through one while another writes past the new end, a punch and a preallocation under
/// an O_APPEND descriptor's appends, a file unlinked while two are open (written and
/// truncated through them, freed at the last close), and creates through two handles of a
/// directory, which, once removed, takes no new entry. Process deaths too: a participant
/// killed while it holds these descriptors, recovered by the next mount and, on HashFS,
/// by a survivor's takeover (`crashtest/death.rs`).
#[test]
fn explore_several_descriptors() {
    let w = workloads(&[
        "ace:fd1-open,fd2-open,fd2-truncate,fd1-write",
        "ace:fd1-open,fd3-open-append,fd1-write,fd3-append,fd2-open,fd2-punch,fd3-append",
        "ace:fd1-open,fd2-open,unlink,fd1-write,fd1-close,fd2-truncate,fd2-close",
        "ace:fd1-open,fd2-open,fd2-fallocate,fd1-write,fd1-fsync",
        "ace:dir1-open,dir2-open,dir1-create,dir2-create,unlink-sub-x,unlink-sub-y,rmdir,dir1-create,dir1-close,dir2-close",
    ]);
    let base = crashtest::base_image(test_mapping(), test_layout_score(), test_placement());
    for wl in &w {
        let ok = successes(&base, &wl.id);
        // Every operation succeeds but the create in the removed directory.
        let want: Vec<bool> = wl.ops.iter().enumerate().map(|(i, _)| !(wl.id.contains("rmdir") && i == 7)).collect();
        assert_eq!(ok, want, "{}", wl.id);
    }
    let (stats, failures) =
        crashtest::run(&config(), test_mapping(), test_layout_score(), &w, threads(), &|_, _, _| {});
    report("several descriptors", &stats, &failures);
    assert_eq!(stats.workloads, w.len() as u64);
    // Apart: on a shared image a death's workload runs as a shared participant, whose
    // stores a power failure of the mount of one process would not explore.
    let cfg = Config { model: FailureModel::ProcessDeath, ..config() };
    let (stats, failures) = crashtest::run(&cfg, test_mapping(), test_layout_score(), &w, threads(), &|_, _, _| {});
    report("several descriptors, process deaths", &stats, &failures);
    assert!(stats.deaths >= 10 * w.len() as u64, "too few deaths explored: {}", stats.deaths);
}

/// Every change at the largest sizes (issue 53): names of 255 bytes, a symlink target of
/// 4,095 bytes, creates, unlinks and renames in a directory of five blocks (64 links of
/// one file, each name 255 bytes), and writes, appends, punches, shrinks and untorn writes
/// of a sparse file past 4 GiB.
#[test]
fn explore_largest_sizes() {
    let base = crashtest::base_image_with(test_mapping(), test_layout_score(), test_placement(), &|fs| {
        crashtest::named::large_directory(fs)
    });
    let w: Vec<Workload> = crashtest::LARGEST_OPS
        .iter()
        .map(|n| format!("ace:{n}"))
        .chain(
            [
                "ace:big-dir-unlink,big-dir-create",
                "ace:big-dir-rename-out,rename-max",
                "ace:write-past-4g,append-small",
                "ace:write-past-4g,append",
                "ace:write-past-4g,punch-past-4g",
                "ace:write-past-4g,shrink-past-4g",
                "ace:write-past-4g,untorn-past-4g",
                "ace:truncate-past-4g,truncate-down",
            ]
            .map(String::from),
        )
        .map(|id| Workload::from_id(&id).expect("known"))
        .collect();
    for wl in &w {
        assert!(successes(&base, &wl.id).iter().all(|&ok| ok), "{}: an operation failed", wl.id);
    }
    let (fs, _) = FileSystem::mount(Arc::new(CrashDevice::from_image(&base)), &|_, _| {}).unwrap();
    assert_eq!(fs.metadata(Path::new("/D")).unwrap().size, 5 * 4096, "the large directory's blocks");
    let (stats, failures) = crashtest::run_from(&config(), test_mapping(), &base, &w, threads(), &|_, _, _| {});
    report("largest sizes", &stats, &failures);
    assert_eq!(stats.workloads, w.len() as u64);
}

/// The operations that take blocks (data, directory blocks, attribute blobs, untorn
/// writes' copies), for the full-device workloads.
const ALLOCATING_OPS: &[&str] = &[
    "append",
    "append-cross",
    "write-past-eof",
    "fill-hole",
    "fallocate",
    "zero-range-grow",
    "mkdir",
    "create-long",
    "symlink-max",
    "setxattr-big",
    "setxattr-replace",
    "untorn-overwrite",
    "untorn-hole",
    "untorn-limit",
];

/// A base image whose data area is full but for `left` blocks: one file, `/fill`, written a
/// block at a time until the device is full, then cut by `left` blocks.
fn nearly_full_image(left: u64) -> Vec<u8> {
    crashtest::base_image_with(test_mapping(), test_layout_score(), test_placement(), &|fs| {
        let f = fs.open_file(Path::new("/fill"), OpenOptions::new().write(true).create(true))?;
        let block = vec![0x5A; 4096];
        let mut blocks = 0;
        loop {
            match f.write_at(blocks * 4096, &block) {
                Ok(_) => blocks += 1,
                Err(hashfs::Error::NoSpace) => break,
                Err(e) => return Err(e),
            }
        }
        f.set_len((blocks - left) * 4096)
    })
}

/// ENOSPC in the middle of a transaction (issue 53): the base tree on a device filled
/// to its last two free blocks, and each operation that takes blocks, alone; those that
/// need more fail part way (some blocks claimed, a transaction open) and must leave
/// nothing behind (the tree, the free blocks and inodes) on the live file system, and at
/// every crash point; and a hole fill and a write that take the last blocks, then
/// operations that find none (a symlink whose target block fails after its inode was
/// taken).
#[test]
fn explore_full_device() {
    use hashfs::testing::crashtest::snapshot::Snapshot;
    let base = nearly_full_image(2);
    let mut w: Vec<Workload> = ALLOCATING_OPS.iter().map(|n| Workload::from_id(&format!("ace:{n}")).unwrap()).collect();
    w.extend(workloads(&[
        "ace:fill-hole,write-past-eof,append",
        "ace:fill-hole,write-past-eof,symlink-max,setxattr-big,mkdir",
    ]));
    // Which fail, and that a failure changes nothing a user sees.
    let mut failed = 0;
    for wl in &w {
        let dev = Arc::new(CrashDevice::from_image(&base));
        let (fs, _) = FileSystem::mount(dev, &|_, _| {}).unwrap();
        let mut fds = Default::default();
        for op in &wl.ops {
            let free = |fs: &FileSystem<CrashDevice>| (fs.statfs().blocks_free, fs.statfs().inodes_free);
            let (before, was_free) = (Snapshot::of(&fs).unwrap(), free(&fs));
            match op.apply(&fs, &mut fds) {
                Ok(()) => {}
                Err(hashfs::Error::NoSpace) => {
                    failed += 1;
                    assert_eq!(Snapshot::of(&fs).unwrap(), before, "{}: {op} failed and changed the tree", wl.id);
                    assert_eq!(free(&fs), was_free, "{}: {op} failed and kept blocks or an inode", wl.id);
                }
                Err(e) => panic!("{}: {op}: {e}", wl.id),
            }
        }
    }
    assert!(failed >= 4, "only {failed} operations found the device full");
    let (stats, failures) = crashtest::run_from(&config(), test_mapping(), &base, &w, threads(), &|_, _, _| {});
    report(&format!("full device ({failed} operations failed with ENOSPC)"), &stats, &failures);
}

/// Hard links across directories with renames over them (link counts after a rename
/// replaces one name of a linked file, a rename between two names of one inode, an
/// exchange and an unlink of a linked name), the bug classes Chipmunk and NOVA's fuzzer
/// found in other PM file systems.
#[test]
fn explore_links_with_renames() {
    let w = workloads(&[
        "ace:link,rename-replace",
        "ace:link,rename-over-link",
        "ace:link,exchange",
        "ace:link,unlink,rename-across",
        "ace:link,rename-across,unlink-open",
    ]);
    let (stats, failures) =
        crashtest::run(&config(), test_mapping(), test_layout_score(), &w, threads(), &|_, _, _| {});
    report("links with renames", &stats, &failures);
    assert_eq!(stats.workloads, w.len() as u64);
}

/// The calls of SQLite's rollback journal that HashFS makes cheaper
/// (`tests/fence_costs.rs`): a rewrite of bytes a one-fence append's check does
/// not cover, which leaves its size tagged, and an unlink that frees its file in the
/// transaction that removes the name (or a rename over the file's last link), with the
/// freed number taken again; under power failure and process death.
#[test]
fn explore_a_rollback_journals_calls() {
    let w = workloads(&[
        "ace:append-small,overwrite-small",
        "ace:append-cross,overwrite-small",
        "ace:append-small,overwrite-small,append-small",
        "ace:append-small,unlink-small",
        "ace:unlink-small,create",
        "ace:unlink-small,remount,create",
        "ace:rename-over-small,create",
        "ace:append,rename-over-small",
    ]);
    for model in [FailureModel::PowerFailure, FailureModel::ProcessDeath] {
        let cfg = Config { model, ..config() };
        let (stats, failures) = crashtest::run(&cfg, test_mapping(), test_layout_score(), &w, threads(), &|_, _, _| {});
        report(&format!("a rollback journal's calls ({model:?})"), &stats, &failures);
        assert_eq!(stats.workloads, w.len() as u64);
    }
}

/// A remount (a clean unmount, then a mount that writes its superblock and builds its
/// caches again from the media) between changes, crashed in both halves, with work on the
/// new mount after it; and `sync` after writes whose times it stores (a crash after it must
/// show them). `scripts/crash-bugs.sh sync-forgets-times` leaves them in DRAM.
#[test]
fn explore_remount_and_sync() {
    let w = workloads(&[
        "ace:remount",
        "ace:append-small,remount,append-small",
        "ace:truncate-down,remount,write-past-eof",
        "ace:unlink,remount,create",
        "ace:sync",
        "ace:overwrite,append,sync,chmod",
    ]);
    let (stats, failures) =
        crashtest::run(&config(), test_mapping(), test_layout_score(), &w, threads(), &|_, _, _| {});
    report("remount and sync", &stats, &failures);
    assert_eq!(stats.workloads, w.len() as u64);
}

/// fsck on a freshly crashed image: at every fence of operations that leave crash
/// leftovers (reservations of writes, unlinked open files, half-freed blocks, two copies of
/// a key from an untorn write's key switch), the check without recovery finds no error,
/// only "needs recovery" items, and exits 0; the default (recovery, then check) finds
/// nothing at all.
#[test]
fn fsck_of_crashed_images_needs_only_recovery() {
    use hashfs::fsck::{fsck, recover_then_check, FsckMode, Recovery};
    let base = crashtest::base_image(test_mapping(), test_layout_score(), test_placement());
    let (mut images, mut with_pending) = (0, 0);
    for id in [
        "ace:append",
        "ace:overwrite",
        "ace:unlink-open",
        "ace:truncate-down",
        "ace:mkdir,create",
        "ace:untorn-small,untorn-small",
    ] {
        let dev = Arc::new(CrashDevice::from_image(&base));
        let (fs, _) = FileSystem::mount(dev.clone(), &|_, _| {}).unwrap();
        dev.set_capture(true);
        // Keep a file open across the workload: an unlinked open file is a leftover too.
        let _held = fs.open_file(Path::new("/g"), OpenOptions::new().read(true)).unwrap();
        for op in Workload::from_id(id).unwrap().ops {
            op.apply(&fs, &mut Default::default()).unwrap();
        }
        fs.remove_file(Path::new("/g")).unwrap();
        let mut points = dev.take_points();
        points.push(dev.crash_point_now());
        for (i, point) in points.iter().enumerate() {
            for image in [point.image_durable_only(), point.image_all_pending()] {
                images += 1;
                let crashed = Arc::new(CrashDevice::from_image(&image));
                let check = fsck(crashed.clone(), FsckMode::Check, &|_, _| {}).unwrap();
                assert!(check.is_clean_after_recovery(), "{id} fence {i}: errors in {:?}", check.findings);
                assert_eq!(check.exit_code(), 0, "{id} fence {i}: {:?}", check.findings);
                with_pending += usize::from(!check.pending.is_empty());
                let (recovery, after) = recover_then_check(crashed, &|_, _| {}).unwrap();
                assert!(matches!(recovery, Recovery::Ran(_)), "{id} fence {i}: {recovery:?}");
                assert!(after.is_clean(), "{id} fence {i}: after recovery {:?}", after.findings);
            }
        }
    }
    eprintln!("{images} crashed images, {with_pending} with crash leftovers for recovery");
    assert!(with_pending > 0, "no image had anything for recovery to clear: the test proves nothing");
}
