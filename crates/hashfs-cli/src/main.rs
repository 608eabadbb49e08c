//! `hashfs`: format, check, inspect and use HashFS images without mounting them, run the
//! demonstration workload, and run benchmarks.

mod age;
mod bench;
mod copy;
mod crashtest;
mod demo;
mod mountcmd;
mod mounthelper;

use clap::{Parser, Subcommand};
use hashfs::fsck::{self, fsck, FsckMode};
use hashfs::pm::{MmapDevice, OpenMode};
use hashfs::{AllocatorKind, FormatOptions, HashPlacement, WriteMode};
use hashfs::{FileSystem, FileType, MappingKind};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Parser)]
#[command(name = "hashfs", version, about = "HashFS: a persistent-memory file system with hash-based file mapping")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Create (or overwrite) IMAGE and format it.
    Mkfs {
        image: PathBuf,
        /// Image size, e.g. 1G, 512M, 65536K or a byte count (a multiple of 4 KiB).
        #[arg(long, value_parser = parse_size)]
        size: u64,
        /// File-mapping structure: hashfs, extent-tree, extent-tree-cached, radix-tree,
        /// cuckoo, extent-hash or ctfs (each file contiguous in a virtual partition).
        #[arg(long, default_value = "hashfs")]
        mapping: String,
        /// Fragmentation generator for the allocator mappings (paper §4): the layout score
        /// files reach, from 1.0 (contiguous) to 0.0 (every block placed at random).
        #[arg(long, default_value_t = 1.0)]
        layout_score: f64,
        /// Block allocator of the allocator mappings: aligned (WineFS's alignment-aware
        /// allocator: whole 2 MiB extents kept for large files, so memory-mapped files get
        /// 2 MiB pages) or bitmap (the HashFS paper's baseline, with the fragmentation
        /// generator). Default: aligned, or bitmap with a --layout-score below 1.
        #[arg(long)]
        allocator: Option<String>,
        /// Where HashFS places blocks: paper (each block where its key hashes, the HashFS
        /// paper's), grouped (experimental: whole 2 MiB chunks of a file in whole 2 MiB
        /// groups of slots, found through a group directory, so that memory-mapped files
        /// get 2 MiB pages; small files' lookups slow down once many groups are claimed)
        /// or regions (experimental: grouped's chunks, and every other block in a region
        /// of whole groups that grows by jump hashing, so that free groups stay whole on
        /// an aged image). docs/mappings.md. Default: paper.
        #[arg(long)]
        placement: Option<String>,
        /// The regions placement's target load of its open groups, a fraction or a
        /// percentage (default 80%): lower opens groups sooner, for shorter probes and
        /// fewer whole groups left to large files.
        #[arg(long, value_parser = age::parse_fraction)]
        region_load: Option<f64>,
        /// Seeds the image's hashing (HashFS's table, cuckoo, extent hashing) and the
        /// fragmentation generator (default: a random seed). Two images made with one seed
        /// place the same writes alike: `hashfs age` then leaves them the same.
        #[arg(long)]
        seed: Option<u64>,
        /// Inode table entries (default: one per 16 KiB).
        #[arg(long)]
        inodes: Option<u64>,
        /// Undo journals (one per CPU is a good choice).
        #[arg(long, default_value_t = 8)]
        journals: u32,
        /// Blocks of 4 KiB per journal. One transaction fits one journal, which bounds the
        /// untorn-write limit: 16 gives 1 MiB for HashFS and 256 KiB for the block
        /// mappings, 64 gives 1 MiB for every mapping.
        #[arg(long, default_value_t = 16)]
        journal_blocks: u32,
        /// relaxed (the papers' default: an overwrite may be torn by a crash) or strict
        /// (every write of up to the untorn-write limit is whole or absent after a crash;
        /// larger ones are, piece by piece). Where every mount starts; `mount -o strict`
        /// or `-o relaxed` changes it for one mount.
        #[arg(long, default_value = "relaxed")]
        write_mode: String,
        /// Leave the image file sparse. By default mkfs allocates it whole on the host file
        /// system (fallocate) and, on tmpfs, touches every page once (tmpfs zeroes a
        /// fallocated page at its first use, 2 MiB at a time on a huge=always mount), so
        /// that no write waits for the host to allocate or zero a page; PM has no such cost.
        #[arg(long)]
        sparse: bool,
    },
    /// Check every on-media invariant; exit 0 clean, 1 corrected, 4 errors left, 8 failure.
    /// Check an image. An image that was not cleanly unmounted is first recovered, as a
    /// mount would (and as e2fsck replays its journal). Exit codes: 0 clean (after recovery),
    /// 1 errors corrected, 4 errors left, 8 operational error.
    Fsck {
        image: PathBuf,
        /// Fix what can be fixed.
        #[arg(long, conflicts_with = "no_recover")]
        repair: bool,
        /// Write nothing: no recovery; what a crash left (and recovery would clear) is
        /// listed as "needs recovery", apart from errors, and does not fail the check.
        #[arg(short = 'n', long = "no-recover")]
        no_recover: bool,
        /// An image used by `hashfs mount --lower DIR`: check its PM copies against DIR
        /// too (with --repair, make the repairs a stacked mount makes; with -n, on a
        /// copy-on-write view of the image, writing to neither).
        #[arg(long, value_name = "DIR")]
        lower: Option<PathBuf>,
    },
    /// Geometry, mapping, space and inode use.
    Info { image: PathBuf },
    /// Copy a host file or directory tree into the image.
    Put { image: PathBuf, host_path: PathBuf, fs_path: String },
    /// Copy a file or directory tree out of the image.
    Get { image: PathBuf, fs_path: String, host_path: PathBuf },
    /// List a directory.
    Ls {
        image: PathBuf,
        #[arg(default_value = "/")]
        fs_path: String,
        /// Long format: type, permissions, links, owner, size.
        #[arg(short, long)]
        long: bool,
    },
    /// Write a file's contents to standard output.
    Cat { image: PathBuf, fs_path: String },
    /// Create a directory.
    Mkdir {
        image: PathBuf,
        fs_path: String,
        /// Create parents as needed.
        #[arg(short, long)]
        parents: bool,
    },
    /// Remove a file, symlink or empty directory.
    Rm {
        image: PathBuf,
        fs_path: String,
        /// Remove directories and their contents.
        #[arg(short, long)]
        recursive: bool,
    },
    /// Mount IMAGE at MOUNTPOINT through FUSE (a daemon unless --foreground).
    Mount {
        image: PathBuf,
        mountpoint: PathBuf,
        /// Stay in the foreground (serve until unmounted).
        #[arg(long)]
        foreground: bool,
        /// Request-serving threads.
        #[arg(long, default_value_t = mountcmd::DEFAULT_THREADS)]
        threads: usize,
        /// Mount options, as mount(8)'s: ro, rw, nodev, nosuid, noexec, noatime, ...;
        /// strict or relaxed (the write mode of this mount; default: the image's);
        /// writeback_cache (writes durable at fsync or close, not at return) or direct_io
        /// (no page cache for file data: large writes at about 2 GB/s); cache_timeout=SECONDS
        /// (how long the kernel may cache names and attributes; 60); io_uring or
        /// io_uring=N (requests through FUSE over io_uring, N entries per CPU, 4; needs
        /// /sys/module/fuse/parameters/enable_uring on); for a stacked mount:
        /// promote_after=N (30), sync_interval_ms=N (1000), sf_limit=X|none (0.05),
        /// high_water=X (0.8).
        #[arg(short = 'o', default_value = "")]
        options: String,
        /// SPFS's stacked mode: present DIR's tree (any file system) at MOUNTPOINT, with
        /// the image absorbing files that fsync often with little written between.
        #[arg(long, value_name = "DIR")]
        lower: Option<PathBuf>,
    },
    /// Link this program as DIR/mount.fuse.hashfs, so that `mount -t fuse.hashfs IMAGE DIR`
    /// and /etc/fstab lines of type fuse.hashfs work (options: ro, rw, nodev, nosuid,
    /// noexec, noatime and the other atime options, threads=N, strict, relaxed,
    /// writeback_cache, direct_io, cache_timeout=SECONDS, and fstab's own).
    InstallMountHelper {
        #[arg(default_value = "/sbin")]
        dir: PathBuf,
    },
    /// Unmount a HashFS mount point and wait until its image is cleanly closed.
    Umount {
        mountpoint: PathBuf,
        /// A stacked mount: write every promoted file back to the lower directory first
        /// (without it they stay in the image, and the next stacked mount serves them).
        #[arg(long)]
        writeback: bool,
    },
    /// Format an image and run a short demonstration workload, printing what it did.
    Demo {
        #[arg(long, default_value = "/dev/shm/hashfs-demo.img")]
        image: PathBuf,
        #[arg(long, value_parser = parse_size, default_value = "1G")]
        size: u64,
    },
    /// Age an image as Geriatrix does: create files from a size profile up to a fullness,
    /// then create and delete at that fullness; reports the free aligned 2 MiB extents.
    Age(age::AgeArgs),
    /// Explore crash states: run workloads on a crash-simulating device, recover every
    /// image a power failure could leave, and check it (exit 1 on any failure).
    Crashtest(crashtest::CrashtestArgs),
    /// Benchmarks (not tests).
    Bench {
        #[command(subcommand)]
        which: bench::BenchCmd,
    },
}

/// Parses sizes such as 4096, 64K, 512M, 1G, 2GiB.
fn print_recovery(r: &fsck::Recovery) {
    match r {
        fsck::Recovery::NotNeeded => {}
        fsck::Recovery::Ran(m) => println!(
            "recovered (the image was not cleanly unmounted): {} transactions rolled back, {} reservations and {} unlinked inodes freed",
            m.rolled_back_txids.len(),
            m.stray_slots_freed,
            m.orphans_freed
        ),
        fsck::Recovery::Failed(e) => println!("recovery failed ({e}); checking the image as it is"),
    }
}

fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    if digits == 0 {
        return Err(format!("not a size: {s:?} (examples: 4096, 64K, 512M, 1G)"));
    }
    let n: u64 = t[..digits].parse().map_err(|_| format!("not a size: {s:?}"))?;
    let mult = match t[digits..].to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        "G" | "GB" | "GIB" => 1 << 30,
        "T" | "TB" | "TIB" => 1 << 40,
        other => return Err(format!("unknown size unit {other:?} in {s:?}")),
    };
    n.checked_mul(mult).ok_or_else(|| format!("size {s:?} is too large"))
}

/// An error for the user, with the exit code to use.
#[derive(Debug)]
struct Failure {
    msg: String,
    code: u8,
}

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure { msg: e.to_string(), code: 1 }
    }
}

fn fail(msg: impl Into<String>) -> Failure {
    Failure { msg: msg.into(), code: 1 }
}

pub(crate) fn progress_bar(len: u64, what: &str, bytes: bool) -> ProgressBar {
    let pb = ProgressBar::new(len);
    let tmpl = if bytes {
        "{msg} [{bar:40}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta})"
    } else {
        "{msg} [{bar:40}] {pos}/{len} ({eta})"
    };
    pb.set_style(ProgressStyle::with_template(tmpl).expect("valid template").progress_chars("=> "));
    pb.set_message(what.to_string());
    pb
}

pub(crate) fn open_image(image: &Path) -> Result<Arc<MmapDevice>, Failure> {
    MmapDevice::open(image, OpenMode::Existing)
        .map(Arc::new)
        .map_err(|e| fail(format!("cannot open image {}: {e}", image.display())))
}

/// What `hashfs fsck --lower` may write.
#[derive(Clone, Copy, PartialEq, Eq)]
enum StackedCheck {
    /// Mount the image (recovering it) and check.
    Recover,
    /// `-n`: mount a copy-on-write view of the image: nothing is written, to the image or
    /// to the lower directory (the check itself only reads the lower files).
    NoWrite,
    /// `--repair`: check, then make the repairs a stacked mount makes.
    Repair,
}

/// `hashfs fsck --lower`: the stacked mode's PM copies against the lower directory.
fn stacked_fsck(image: &Path, lower: &Path, how: StackedCheck) -> Result<u8, Failure> {
    let lower = std::fs::canonicalize(lower).map_err(|e| fail(format!("lower directory {}: {e}", lower.display())))?;
    let repair = how == StackedCheck::Repair;
    let checked = if how == StackedCheck::NoWrite {
        let view = Arc::new(hashfs::pm::overlay::Overlay::new(open_image(image)?));
        let (fs, _) = FileSystem::mount(view, &|_, _| {})
            .map_err(|e| fail(format!("cannot mount a view of {}: {e}", image.display())))?;
        hashfs_spfs::absorb::PmStore::check(fs, &lower)
    } else {
        hashfs_spfs::absorb::PmStore::check(mount(image)?, &lower)
    };
    let (sound, problems) = checked.map_err(fail)?;
    for p in &problems {
        println!("{}{p}", if repair { "FIXED: " } else { "" });
    }
    if repair && !problems.is_empty() {
        let (_, rec) = hashfs_spfs::Stack::open(mount(image)?, &lower, Default::default()).map_err(fail)?;
        println!(
            "stacked repairs: {} unfinished promotions and {} copies of deleted files removed, {} lower files truncated",
            rec.unfinished_removed, rec.orphans_removed, rec.lower_truncated
        );
    }
    println!("PM side over {}: {sound} promoted files sound, {} problems", lower.display(), problems.len());
    Ok(match (problems.is_empty(), repair) {
        (true, _) => 0,
        (false, true) => 1,
        (false, false) => 4,
    })
}

pub(crate) fn mount(image: &Path) -> Result<FileSystem<MmapDevice>, Failure> {
    mount_dev(open_image(image)?, image)
}

/// Mounts the opened image, with a progress bar and the recovery report on stderr.
pub(crate) fn mount_dev(dev: Arc<MmapDevice>, image: &Path) -> Result<FileSystem<MmapDevice>, Failure> {
    let pb = progress_bar(0, "mounting", false);
    let (fs, report) = FileSystem::mount(dev, &|done, total| {
        pb.set_length(total);
        pb.set_position(done);
    })
    .map_err(|e| fail(format!("cannot mount {}: {e}", image.display())))?;
    pb.finish_and_clear();
    if !report.was_clean {
        eprintln!(
            "hashfs: {} was not cleanly unmounted; recovered: {} transactions rolled back, {} stray blocks and {} orphan inodes freed",
            image.display(),
            report.rolled_back_txids.len(),
            report.stray_slots_freed,
            report.orphans_freed
        );
    }
    if !report.corrupt_inodes.is_empty() {
        eprintln!("hashfs: warning: {} corrupt inodes; run hashfs fsck --repair", report.corrupt_inodes.len());
    }
    Ok(fs)
}

fn run(cli: Cli) -> Result<u8, Failure> {
    match cli.cmd {
        Cmd::Mkfs {
            image,
            size,
            mapping,
            layout_score,
            allocator,
            placement,
            region_load,
            seed,
            inodes,
            journals,
            journal_blocks,
            write_mode,
            sparse,
        } => {
            let write_mode = WriteMode::from_name(&write_mode)
                .ok_or_else(|| fail(format!("unknown write mode {write_mode:?} (choose relaxed or strict)")))?;
            let mapping = MappingKind::from_name(&mapping).ok_or_else(|| {
                let names: Vec<&str> = MappingKind::ALL.iter().map(|m| m.name()).collect();
                fail(format!("unknown mapping {mapping:?} (choose one of: {})", names.join(", ")))
            })?;
            if !(0.0..=1.0).contains(&layout_score) {
                return Err(fail(format!("--layout-score {layout_score} is not between 0.0 and 1.0")));
            }
            if mapping == MappingKind::HashFs && layout_score != 1.0 {
                return Err(fail("--layout-score applies to the allocator mappings; HashFS places blocks by hash"));
            }
            let allocator = match allocator.as_deref() {
                None if layout_score < 1.0 => AllocatorKind::Bitmap,
                None => AllocatorKind::Aligned,
                Some(_) if mapping == MappingKind::HashFs => {
                    return Err(fail("--allocator applies to the allocator mappings; HashFS places blocks by hash"))
                }
                Some(name) => AllocatorKind::from_name(name)
                    .ok_or_else(|| fail(format!("unknown allocator {name:?} (choose aligned or bitmap)")))?,
            };
            if allocator == AllocatorKind::Aligned && layout_score < 1.0 {
                return Err(fail("--layout-score below 1 needs --allocator bitmap (its fragmentation generator)"));
            }
            let placement = match placement.as_deref() {
                None => HashPlacement::Paper,
                Some(_) if mapping != MappingKind::HashFs => {
                    return Err(fail("--placement applies to HashFS; the other mappings use an allocator"))
                }
                Some(name) => HashPlacement::from_name(name)
                    .ok_or_else(|| fail(format!("unknown placement {name:?} (choose paper, grouped or regions)")))?,
            };
            let opts = FormatOptions {
                mapping,
                inode_count: inodes,
                journal_count: journals,
                journal_blocks,
                write_mode,
                layout_score,
                allocator,
                placement,
                region_load,
                hash_seed: seed,
                preallocate: !sparse,
                ..Default::default()
            };
            let pb = progress_bar(size, "formatting", true);
            let g = FileSystem::format_file(&image, size, &opts, &|d, t| {
                pb.set_length(t);
                pb.set_position(d);
            })
            .map_err(|e| fail(format!("mkfs {}: {e}", image.display())))?;
            pb.finish_and_clear();
            println!(
                "{}: {} bytes, {} data blocks of 4 KiB, {} inodes, {} journals, mapping {}",
                image.display(),
                g.image_bytes,
                g.data_blocks,
                g.inode_count,
                g.journal_count,
                mapping.name()
            );
            Ok(0)
        }
        Cmd::Fsck { image, repair, no_recover, lower } => {
            let dev = match MmapDevice::open(&image, OpenMode::Existing) {
                Ok(d) => Arc::new(d),
                Err(e) => return Err(Failure { msg: format!("cannot open image {}: {e}", image.display()), code: 8 }),
            };
            let pb = progress_bar(0, "checking", false);
            let progress = |d, t| {
                pb.set_length(t);
                pb.set_position(d);
            };
            let op_err = |e: hashfs::Error| Failure { msg: format!("fsck {}: {e}", image.display()), code: 8 };
            let report = if repair {
                fsck(dev, FsckMode::Repair, &progress).map_err(op_err)?
            } else if no_recover {
                fsck(dev, FsckMode::Check, &progress).map_err(op_err)?
            } else {
                let (recovery, report) = fsck::recover_then_check(dev, &progress).map_err(op_err)?;
                pb.suspend(|| print_recovery(&recovery));
                report
            };
            pb.finish_and_clear();
            for f in &report.findings {
                let fixed = repair && !report.remaining.contains(f);
                let tag = if fixed {
                    "FIXED: "
                } else if report.pending.contains(f) {
                    "needs recovery: "
                } else {
                    ""
                };
                println!("{tag}{f}");
            }
            let errors = report.findings.len() - report.pending.len();
            println!(
                "{}: {} inodes, {} blocks, {} directories; {} problems found, {} left{}",
                image.display(),
                report.inodes_used,
                report.blocks_used,
                report.directories,
                errors,
                report.remaining.iter().filter(|r| !report.pending.contains(r)).count(),
                if !repair && !report.pending.is_empty() {
                    format!(
                        "; needs recovery ({} crash leftovers, cleared by a mount or by fsck without -n)",
                        report.pending.len()
                    )
                } else {
                    String::new()
                }
            );
            let code = report.exit_code() as u8;
            match lower {
                Some(lower) if code & 4 == 0 => {
                    let how = match (repair, no_recover) {
                        (true, _) => StackedCheck::Repair,
                        (false, true) => StackedCheck::NoWrite,
                        (false, false) => StackedCheck::Recover,
                    };
                    Ok(code | stacked_fsck(&image, &lower, how)?)
                }
                Some(_) => {
                    println!("the PM side is not checked: the image has errors left");
                    Ok(code)
                }
                None => Ok(code),
            }
        }
        Cmd::Info { image } if image.is_dir() => match mountcmd::stacked_status(&image) {
            Some(s) => {
                println!("stacked mount  {}", image.display());
                print!("{s}");
                Ok(0)
            }
            None => Err(fail(format!("{} is a directory, not an image or a stacked HashFS mount", image.display()))),
        },
        Cmd::Info { image } => {
            let dev = open_image(&image)?;
            let (sb, g) = hashfs::fsck::geometry_of(&*dev).map_err(|e| fail(format!("{}: {e}", image.display())))?;
            println!("image          {}", image.display());
            println!("size           {} bytes", g.image_bytes);
            println!("mapping        {}", MappingKind::from_u32(sb.mapping_kind).map(|m| m.name()).unwrap_or("?"));
            println!(
                "state          {}",
                if sb.state == hashfs::testing::layout::SB_STATE_CLEAN { "clean" } else { "not cleanly unmounted" }
            );
            println!("mounts         {}", sb.mount_count);
            println!("journals       {} x {} KiB", g.journal_count, g.journal_blocks * 4);
            let mode = WriteMode::from_u32(sb.write_mode).map(|m| m.name()).unwrap_or("?");
            let (any, aligned) = (hashfs::untorn_limit(&g), hashfs::untorn_aligned_limit(&g));
            match aligned > any {
                true => println!(
                    "write mode     {mode} (untorn writes up to {} KiB, {} KiB aligned)",
                    any / 1024,
                    aligned / 1024
                ),
                false => println!("write mode     {mode} (untorn writes up to {} KiB)", any / 1024),
            }
            println!("inode table    {} inodes at offset {}", g.inode_count, g.inode_table_off);
            if g.mapping == MappingKind::HashFs {
                println!("hash table     {} slots at offset {}", g.data_blocks, g.map_off);
                let placement = HashPlacement::from_u32(sb.placement).map(|p| p.name()).unwrap_or("?");
                println!("placement      {placement}");
            } else {
                println!("bitmap         at offset {} (then the structure's table, if any)", g.map_off);
                let alloc = AllocatorKind::from_u32(sb.allocator).map(|a| a.name()).unwrap_or("?");
                println!("allocator      {alloc}");
                if sb.allocator == AllocatorKind::Bitmap as u32 {
                    println!("layout score   {:.2} (the allocator's target)", sb.layout_score_ppm as f64 / 1e6);
                }
            }
            println!("data region    {} blocks of 4 KiB at offset {}", g.data_blocks, g.data_off);
            println!(
                "mapping region {:.0} bytes per GiB of data region ({:.3}%)",
                g.mapping_bytes_per_gib(),
                g.mapping_bytes_per_gib() / (1u64 << 30) as f64 * 100.0
            );
            drop(dev);
            let fs = mount(&image)?;
            let st = fs.statfs();
            println!(
                "blocks         {} used, {} free ({:.1}% full)",
                st.blocks_total - st.blocks_free,
                st.blocks_free,
                (st.blocks_total - st.blocks_free) as f64 * 100.0 / st.blocks_total as f64
            );
            println!("inodes         {} used, {} free", st.inodes_total - st.inodes_free, st.inodes_free);
            println!(
                "aligned 2 MiB  {} free extents ({:.1}% of free space)",
                fs.free_aligned_extents(),
                if st.blocks_free == 0 {
                    0.0
                } else {
                    fs.free_aligned_extents() as f64 * 512.0 * 100.0 / st.blocks_free as f64
                }
            );
            if let Some(n) = fs.claimed_groups() {
                println!("groups         {n} of 2 MiB claimed by files' 2 MiB chunks");
            }
            if let Some((n, opening)) = fs.open_groups() {
                let moves = if opening { "; an opening's moves wait (a file is busy or mapped)" } else { "" };
                println!("region         {n} groups of 2 MiB open to small files{moves}");
            }
            let ms = fs.mapping_stats().map_err(|e| fail(format!("{}: {e}", image.display())))?;
            println!(
                "mapped         {} blocks in {} files; measured layout score {:.3}",
                ms.data_blocks, ms.files, ms.layout_score
            );
            println!(
                "structure      {} entries ({} bytes), {} tree nodes, {} bytes of table, {} bytes of bitmap",
                ms.entries, ms.entry_bytes, ms.node_blocks, ms.table_bytes, ms.bitmap_bytes
            );
            println!(
                "metadata/GiB   {:.0} bytes of structure per GiB of mapped data ({:.3}%)",
                ms.bytes_per_gib(),
                ms.bytes_per_gib() / (1u64 << 30) as f64 * 100.0
            );
            if let Some(ps) = fs.partition_stats().map_err(|e| fail(format!("{}: {e}", image.display())))? {
                print_partitions(&ps, ms.data_blocks);
            }
            if let Some(t) = hashfs::testing::table(&fs) {
                let ps = t.probe_stats();
                println!(
                    "probe length   {:.2} mean, {} max (lookups that hit); {:.2} mean (misses); {} tombstones",
                    ps.mean_hit_probes, ps.max_hit_probes, ps.mean_miss_probes, ps.tombstones
                );
                println!("simd           {}", t.simd().name());
            }
            println!("flush          {}", hashfs::pm::flush_kind().name());
            Ok(0)
        }
        Cmd::Put { image, host_path, fs_path } => {
            let fs = mount(&image)?;
            let n = copy::put(&fs, &host_path, &fs_path)?;
            println!(
                "copied {} files, {} directories, {} symlinks, {} special files, {} bytes",
                n.files, n.dirs, n.symlinks, n.special, n.bytes
            );
            Ok(0)
        }
        Cmd::Get { image, fs_path, host_path } => {
            let fs = mount(&image)?;
            let n = copy::get(&fs, &fs_path, &host_path)?;
            println!(
                "copied {} files, {} directories, {} symlinks, {} special files, {} bytes",
                n.files, n.dirs, n.symlinks, n.special, n.bytes
            );
            Ok(0)
        }
        Cmd::Ls { image, fs_path, long } => {
            let fs = mount(&image)?;
            let p = Path::new(&fs_path);
            let m = fs.metadata(p).map_err(|e| fail(format!("{fs_path}: {e}")))?;
            let mut entries = if m.is_dir() {
                fs.read_dir(p).map_err(|e| fail(format!("{fs_path}: {e}")))?
            } else {
                vec![hashfs::DirEntry {
                    name: fs_path.clone().into_bytes(),
                    ino: m.ino,
                    file_type: m.file_type,
                    cookie: 0,
                }]
            };
            entries.sort_by(|a, b| a.name.cmp(&b.name));
            for e in entries {
                let name = String::from_utf8_lossy(&e.name);
                if long {
                    let md = fs.getattr(e.ino)?;
                    let t = match md.file_type {
                        FileType::Directory => 'd',
                        FileType::Symlink => 'l',
                        FileType::Regular => '-',
                        FileType::Fifo => 'p',
                        FileType::CharDevice => 'c',
                        FileType::BlockDevice => 'b',
                        FileType::Socket => 's',
                    };
                    let size = if matches!(md.file_type, FileType::CharDevice | FileType::BlockDevice) {
                        format!("{}, {}", libc::major(md.rdev), libc::minor(md.rdev))
                    } else {
                        md.size.to_string()
                    };
                    let target = if md.is_symlink() {
                        format!(" -> {}", String::from_utf8_lossy(&fs.readlink_ino(e.ino)?))
                    } else {
                        String::new()
                    };
                    println!(
                        "{t}{:04o} {:>3} {:>5} {:>5} {:>12} {name}{target}",
                        md.perm, md.nlink, md.uid, md.gid, size
                    );
                } else {
                    println!("{name}{}", if e.file_type == FileType::Directory { "/" } else { "" });
                }
            }
            Ok(0)
        }
        Cmd::Cat { image, fs_path } => {
            use std::io::Write;
            let fs = mount(&image)?;
            let f = fs
                .open_file(Path::new(&fs_path), hashfs::OpenOptions::new().read(true))
                .map_err(|e| fail(format!("{fs_path}: {e}")))?;
            let mut out = std::io::stdout().lock();
            let mut buf = vec![0u8; 1 << 20];
            let mut off = 0;
            loop {
                let n = f.read_at(off, &mut buf).map_err(|e| fail(format!("{fs_path}: {e}")))?;
                if n == 0 {
                    break;
                }
                out.write_all(&buf[..n])?;
                off += n as u64;
            }
            Ok(0)
        }
        Cmd::Mkdir { image, fs_path, parents } => {
            let fs = mount(&image)?;
            let p = Path::new(&fs_path);
            let r = if parents { fs.create_dir_all(p, 0o755) } else { fs.create_dir(p, 0o755).map(|_| ()) };
            r.map_err(|e| fail(format!("{fs_path}: {e}")))?;
            Ok(0)
        }
        Cmd::Rm { image, fs_path, recursive } => {
            let fs = mount(&image)?;
            let p = Path::new(&fs_path);
            let m = fs.symlink_metadata(p).map_err(|e| fail(format!("{fs_path}: {e}")))?;
            let r = match (m.is_dir(), recursive) {
                (true, true) => fs.remove_dir_all(p),
                (true, false) => fs.remove_dir(p),
                (false, _) => fs.remove_file(p),
            };
            r.map_err(|e| fail(format!("{fs_path}: {e}")))?;
            Ok(0)
        }
        Cmd::Mount { image, mountpoint, foreground, threads, options, lower } => {
            let mut o = mounthelper::parse_options(&options, false)?;
            o.lower = lower.or(o.lower);
            o.threads = Some(o.threads.unwrap_or(threads));
            if foreground {
                mountcmd::run_foreground_with(&image, &mountpoint, &o).map(|_| 0)
            } else {
                mountcmd::run_background_with(&image, &mountpoint, &o).map(|_| 0)
            }
        }
        Cmd::InstallMountHelper { dir } => mounthelper::install(&dir).map(|l| {
            println!("installed {}", l.display());
            0
        }),
        Cmd::Umount { mountpoint, writeback } => mountcmd::umount(&mountpoint, writeback).map(|_| 0),
        Cmd::Demo { image, size } => demo::run(&image, size).map(|_| 0),
        Cmd::Age(args) => age::run(&args).map(|_| 0),
        Cmd::Bench { which } => bench::run(which).map(|_| 0),
        Cmd::Crashtest(args) => crashtest::run(args).map(|failed| u8::from(failed > 0)).map_err(fail),
    }
}

fn main() -> ExitCode {
    // Like other Unix tools, end quietly when the reader of our output goes away
    // (`hashfs cat IMAGE F | head`) instead of failing on EPIPE.
    // SAFETY: called before any thread starts; SIG_DFL is a valid disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // Run by mount(8) as /sbin/mount.fuse.hashfs IMAGE DIR -o OPTIONS.
    let args: Vec<String> = std::env::args().collect();
    if args.first().and_then(|a| Path::new(a).file_name()).is_some_and(|n| n == "mount.fuse.hashfs") {
        return match mounthelper::run(&args[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(f) => {
                eprintln!("mount.fuse.hashfs: {}", f.msg);
                ExitCode::from(32) // mount(8)'s "mount failure"
            }
        };
    }
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            eprintln!("hashfs: {}", f.msg);
            ExitCode::from(f.code)
        }
    }
}

/// `hashfs info` on a `ctfs` image: the levels in use and the virtual space.
fn print_partitions(ps: &hashfs::PartitionStats, mapped_pages: u64) {
    let size = |pages: u64| {
        let b = pages * 4096;
        match b {
            _ if b >= 1 << 40 => format!("{} TiB", b >> 40),
            _ if b >= 1 << 30 => format!("{} GiB", b >> 30),
            _ if b >= 1 << 20 => format!("{} MiB", b >> 20),
            _ => format!("{} KiB", b >> 10),
        }
    };
    for l in ps.levels.iter().filter(|l| l.files > 0 || l.empty > 0) {
        println!("partitions L{}  {:>7}: {} holding a file, {} empty", l.level, size(l.pages), l.files, l.empty);
    }
    let amount = |pages: u64| {
        let b = (pages * 4096) as f64;
        match b {
            _ if b >= (1u64 << 40) as f64 => format!("{:.3} TiB", b / (1u64 << 40) as f64),
            _ if b >= (1u64 << 30) as f64 => format!("{:.2} GiB", b / (1u64 << 30) as f64),
            _ if b >= (1u64 << 20) as f64 => format!("{:.1} MiB", b / (1u64 << 20) as f64),
            _ => format!("{:.0} KiB", b / 1024.0),
        }
    };
    println!(
        "virtual space  {}: {} in files' partitions ({} of it mapped), {} empty",
        size(ps.space_pages),
        amount(ps.allocated_pages()),
        amount(mapped_pages),
        amount(ps.empty_pages())
    );
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert!(parse_size("x").is_err());
        assert!(parse_size("1Q").is_err());
        assert!(parse_size("99999999999T").is_err());
    }
}
