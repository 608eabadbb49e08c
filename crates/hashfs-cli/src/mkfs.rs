//! `hashfs mkfs`: create (or overwrite) an image and format it.

use crate::{fail, progress_bar, Failure, Steps};
use hashfs::units::{parse_fraction, parse_size};
use hashfs::{AllocatorKind, FileSystem, FormatOptions, HashPlacement, MappingKind, WriteMode};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    pub image: PathBuf,
    /// Image size, e.g. 1G, 512M, 65536K or a byte count (a multiple of 4 KiB).
    #[arg(long, value_parser = parse_size)]
    pub size: u64,
    /// File-mapping structure: hashfs, extent-tree, extent-tree-cached, radix-tree,
    /// cuckoo, extent-hash or ctfs (each file contiguous in a virtual partition).
    #[arg(long, default_value = "hashfs")]
    pub mapping: String,
    /// Fragmentation generator for the allocator mappings (paper §4): the layout score
    /// files reach, from 1.0 (contiguous) to 0.0 (every block placed at random).
    #[arg(long, default_value_t = 1.0)]
    pub layout_score: f64,
    /// Block allocator of the allocator mappings: aligned (WineFS's alignment-aware
    /// allocator: whole 2 MiB extents kept for large files, so memory-mapped files get
    /// 2 MiB pages) or bitmap (the HashFS paper's baseline, with the fragmentation
    /// generator). Default: aligned, or bitmap with a --layout-score below 1.
    #[arg(long)]
    pub allocator: Option<String>,
    /// Where HashFS places blocks: paper (each block where its key hashes, the HashFS
    /// paper's), grouped (experimental: whole 2 MiB chunks of a file in whole 2 MiB
    /// groups of slots, found through a group directory, so that memory-mapped files
    /// get 2 MiB pages; small files' lookups slow down once many groups are claimed)
    /// or regions (experimental: grouped's chunks, and every other block in a region
    /// of whole groups that grows by jump hashing, so that free groups stay whole on
    /// an aged image). docs/mappings.md. Default: paper.
    #[arg(long)]
    pub placement: Option<String>,
    /// The regions placement's target load of its open groups, a fraction or a
    /// percentage (default 80%): lower opens groups sooner, for shorter probes and
    /// fewer whole groups left to large files.
    #[arg(long, value_parser = parse_fraction)]
    pub region_load: Option<f64>,
    /// Seeds the image's hashing (HashFS's table, cuckoo, extent hashing) and the
    /// fragmentation generator (default: a random seed). Two images made with one seed
    /// place the same writes alike: `hashfs-bench age` then leaves them the same.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Inode table entries (default: one per 16 KiB).
    #[arg(long)]
    pub inodes: Option<u64>,
    /// Undo journals (one per CPU is a good choice).
    #[arg(long, default_value_t = 8)]
    pub journals: u32,
    /// Blocks of 4 KiB per journal. One transaction fits one journal, which bounds the
    /// untorn-write limit: 16 gives 1 MiB for HashFS and 256 KiB for the block
    /// mappings, 64 gives 1 MiB for every mapping.
    #[arg(long, default_value_t = 16)]
    pub journal_blocks: u32,
    /// relaxed (the papers' default: an overwrite may be torn by a crash) or strict
    /// (every write of up to the untorn-write limit is whole or absent after a crash;
    /// larger ones are, piece by piece). Where every mount starts; `mount -o strict`
    /// or `-o relaxed` changes it for one mount.
    #[arg(long, default_value = "relaxed")]
    pub write_mode: String,
    /// Leave the image file sparse. By default mkfs allocates it whole on the host file
    /// system (fallocate) and, on tmpfs, touches every page once (tmpfs zeroes a
    /// fallocated page at its first use, 2 MiB at a time on a huge=always mount), so
    /// that no write waits for the host to allocate or zero a page; PM has no such cost.
    #[arg(long)]
    pub sparse: bool,
}

pub fn run(a: Args) -> Result<u8, Failure> {
    let Args {
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
    } = a;
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
        Some(name) => HashPlacement::parse(name).map_err(fail)?,
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
    let pb = progress_bar(size, "formatting", Steps::Bytes);
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
