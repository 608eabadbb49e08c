//! The crash-state explorer: proves that every persistence protocol of the file system
//! leaves, after a power failure at any instant, an image that recovers to the state before
//! or after the interrupted operation, and that recovery itself can be interrupted.
//!
//! - [`crate::pm::CrashDevice`] holds the persistence model (which contents each cache line
//!   may have on the media at each instant; docs/design.md, "Persistence model").
//! - [`workload`]: the operations, the fixed tree they start from and random longer
//!   sequences; [`named`]: the named operations (ACE-style) that sequences of one and two
//!   are made of.
//! - [`explore`]: runs a workload under capture and checks every crash state.
//! - [`snapshot`]: what a user can observe, and how a recovered state may match.
//! - [`concurrent`]: transactions open in several journals at once.
//! - `death`: the other failure, a process killed while it changes a shared image.
//!
//! `hashfs crashtest` is the command; `tests/crash_consistency.rs` runs a bounded
//! exploration in CI; `scripts/crash-bugs.sh` shows that it catches deliberate bugs.

#![forbid(unsafe_code)]

pub mod concurrent;
mod death;
pub mod descriptors;
pub mod explore;
pub mod named;
pub mod snapshot;
pub mod workload;

pub use explore::{Config, Failure, FailureModel, Only, Stats};
pub use named::{ace_workloads, ACE_OPS, CHUNK_OPS, DESCRIPTOR_OPS, LARGEST_OPS, MOUNT_OPS, PSWAP_OPS, UNTORN_OPS};
pub use workload::{random_workload, Workload};

use crate::fs::{format, FormatOptions};
use crate::layout::{AllocatorKind, HashPlacement, WriteMode};
use crate::pm::CrashDevice;
use crate::{FileSystem, MappingKind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Bytes of the images the explorer uses: small, so each of the many images it recovers
/// costs little, yet every structure (journals, inodes, table, data) has room.
pub const IMAGE_BYTES: u64 = 1 << 20;

/// The regions placement's target load on the explorer's images: low, so that an
/// opening moves a few dozen keys (each move a transaction the explorer crashes).
const REGION_LOAD_PPM: u32 = 300000;

/// Bytes of the explorer's images for `placement`: HashFS's grouped placement needs
/// whole 2 MiB groups (three of them here).
pub fn image_bytes(placement: HashPlacement) -> u64 {
    match placement {
        HashPlacement::Paper => IMAGE_BYTES,
        HashPlacement::Grouped | HashPlacement::Regions => 8 << 20,
    }
}

/// The named operations the explorer runs for `mapping` and `placement`: the untorn
/// writes; for the grouped placement the ones that write whole 2 MiB chunks (too large for
/// the other images); for ctFS its pswaps.
pub fn ace_ops(mapping: MappingKind, placement: HashPlacement) -> Vec<&'static str> {
    let mut v = ACE_OPS.to_vec();
    v.extend_from_slice(UNTORN_OPS);
    if placement != HashPlacement::Paper && mapping == MappingKind::HashFs {
        v.extend_from_slice(named::CHUNK_OPS);
    }
    if mapping == MappingKind::Ctfs {
        v.extend_from_slice(named::PSWAP_OPS);
    }
    v
}

/// The journals of an explorer image unless [`Config::journals`] says otherwise: two, so
/// that two threads can have transactions open at once.
pub const EXPLORER_JOURNALS: u32 = 2;

/// The format options of an explorer image: the allocator mappings use the bitmap
/// allocator's fragmentation generator when `layout_score` is below 1, else the aligned
/// allocator (the default of new images).
pub fn format_options(mapping: MappingKind, layout_score: f64, placement: HashPlacement) -> FormatOptions {
    let placement = if mapping == MappingKind::HashFs { placement } else { HashPlacement::Paper };
    FormatOptions {
        placement,
        region_load: (placement == HashPlacement::Regions).then_some(REGION_LOAD_PPM as f64 / 1e6),
        journal_count: EXPLORER_JOURNALS,
        journal_blocks: 4,
        inode_count: Some(64),
        hash_seed: Some(0x5EED),
        mapping,
        layout_score: if mapping.uses_allocator() { layout_score } else { 1.0 },
        allocator: if layout_score < 1.0 { AllocatorKind::Bitmap } else { AllocatorKind::Aligned },
        ..Default::default()
    }
}

/// A mounted in-memory image holding the base tree.
pub(crate) struct Scratch {
    pub fs: FileSystem<CrashDevice>,
    pub dev: Arc<CrashDevice>,
}

impl Scratch {
    pub fn new(mapping: MappingKind) -> Scratch {
        Self::with_options(&format_options(mapping, 1.0, HashPlacement::Paper))
    }

    fn with_options(opts: &FormatOptions) -> Scratch {
        let dev = Arc::new(CrashDevice::new(image_bytes(opts.placement)));
        format(&*dev, opts, &|_, _| {}).expect("the explorer's image formats");
        let (fs, _) = FileSystem::mount(dev.clone(), &|_, _| {}).expect("a fresh image mounts");
        workload::base_tree(&fs).expect("the base tree fits");
        if opts.placement == HashPlacement::Grouped {
            // Small files in every group, so that a whole-chunk write must move blocks
            // out of one (`fs/hashfs/evacuate.rs`) and the explorer crashes it there.
            for i in 0..24u8 {
                fs.write(std::path::Path::new(&format!("/S{i}")), &[i; 4096]).expect("small files fit");
            }
            assert_eq!(fs.free_aligned_extents(), 0, "every group holds a block");
        }
        if opts.placement == HashPlacement::Regions {
            // The one open group one key short of its target load, so that each write of
            // the workloads opens a second one and moves about half the keys into it (under
            // the writer's lock, its own keys left to wait), and the explorer crashes the
            // moves.
            let limit = (REGION_LOAD_PPM as u64 * 512).div_ceil(1_000_000);
            let used = |fs: &FileSystem<CrashDevice>| fs.statfs().blocks_total - fs.statfs().blocks_free;
            let mut i = 0u8;
            for blocks in [4, 1] {
                while used(&fs) + blocks < limit {
                    fs.write(std::path::Path::new(&format!("/S{i}")), &vec![i; blocks as usize * 4096])
                        .expect("small files fit");
                    i += 1;
                }
            }
            assert_eq!(fs.open_groups(), Some((1, false)), "one group open, no opening yet");
        }
        Scratch { fs, dev }
    }
}

/// The cleanly unmounted image every workload of `mapping` starts from.
pub fn base_image(mapping: MappingKind, layout_score: f64, placement: HashPlacement) -> Vec<u8> {
    base_image_in(mapping, layout_score, placement, WriteMode::Relaxed, EXPLORER_JOURNALS)
}

/// [`base_image`], made with write mode `mode` (where every mount of it starts) and
/// `journals` journals (the explorer's default is 2; 1 is a machine with one CPU).
pub fn base_image_in(
    mapping: MappingKind,
    layout_score: f64,
    placement: HashPlacement,
    mode: WriteMode,
    journals: u32,
) -> Vec<u8> {
    let opts =
        FormatOptions { write_mode: mode, journal_count: journals, ..format_options(mapping, layout_score, placement) };
    let s = Scratch::with_options(&opts);
    s.fs.unmount().expect("the base image unmounts");
    s.dev.live_image()
}

/// [`base_image`] with more made on it by `extra` (such as [`named::large_directory`]).
pub fn base_image_with(
    mapping: MappingKind,
    layout_score: f64,
    placement: HashPlacement,
    extra: &dyn Fn(&FileSystem<CrashDevice>) -> crate::Result<()>,
) -> Vec<u8> {
    let s = Scratch::with_options(&format_options(mapping, layout_score, placement));
    extra(&s.fs).expect("the extra tree fits");
    s.fs.unmount().expect("the base image unmounts");
    s.dev.live_image()
}

/// Explores `workloads` on `mapping` with `threads` threads; `progress(done, stats, new
/// failures)` is called after each workload. Returns the totals and every failure (one per
/// workload).
pub fn run(
    cfg: &Config,
    mapping: MappingKind,
    layout_score: f64,
    workloads: &[Workload],
    threads: usize,
    progress: &(dyn Fn(usize, &Stats, &[Failure]) + Sync),
) -> (Stats, Vec<Failure>) {
    let base = base_image_in(mapping, layout_score, cfg.placement, cfg.write_mode, cfg.journals);
    run_from(cfg, mapping, &base, workloads, threads, progress)
}

/// [`run`] from the image `base` (made for `mapping` and `cfg`'s placement).
pub fn run_from(
    cfg: &Config,
    mapping: MappingKind,
    base: &[u8],
    workloads: &[Workload],
    threads: usize,
    progress: &(dyn Fn(usize, &Stats, &[Failure]) + Sync),
) -> (Stats, Vec<Failure>) {
    // As the reproducer's `--mapping` argument.
    let mut name = match (mapping, cfg.placement) {
        (MappingKind::HashFs, HashPlacement::Grouped) => "hashfs --placement grouped".to_string(),
        (MappingKind::HashFs, HashPlacement::Regions) => "hashfs --placement regions".to_string(),
        _ => mapping.name().to_string(),
    };
    if cfg.write_mode == WriteMode::Strict {
        name.push_str(" --write-mode strict");
    }
    let next = AtomicUsize::new(0);
    let total = Mutex::new((Stats::default(), Vec::new(), 0usize));
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(w) = workloads.get(i) else { break };
                let mut failures = Vec::new();
                let st = explore::explore(cfg, &name, base, w, &mut failures);
                let mut t = total.lock().expect("no panic while holding the totals");
                t.0.add(&st);
                t.2 += 1;
                progress(t.2, &t.0, &failures);
                t.1.extend(failures);
            });
        }
    });
    let (stats, failures, _) = total.into_inner().expect("no panic while holding the totals");
    (stats, failures)
}
