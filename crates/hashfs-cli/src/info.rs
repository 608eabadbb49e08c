//! `hashfs info`: an image's geometry, mapping, space and inode use (or a stacked mount's
//! state, given its mount point).

use crate::{fail, mount, open_image, Failure};
use hashfs::{AllocatorKind, HashPlacement, MappingKind, WriteMode};
use std::path::Path;

pub fn run(image: &Path) -> Result<u8, Failure> {
    if image.is_dir() {
        return match crate::mountcmd::stacked_status(image) {
            Ok(s) => {
                println!("stacked mount  {}", image.display());
                print!("{s}");
                Ok(0)
            }
            Err(e) => Err(fail(format!(
                "{} is a directory, not an image or a stacked HashFS mount (its status: {e})",
                image.display()
            ))),
        };
    }
    let dev = open_image(image)?;
    let (sb, g) = hashfs::fsck::geometry_of(&*dev).map_err(|e| fail(format!("{}: {e}", image.display())))?;
    println!("image          {}", image.display());
    println!("size           {} bytes", g.image_bytes);
    println!("mapping        {}", MappingKind::from_u32(sb.mapping_kind).map(|m| m.name()).unwrap_or("?"));
    println!(
        "state          {}",
        if sb.state == hashfs::testing::layout::SB_STATE_CLEAN { "clean" } else { "not cleanly unmounted" }
    );
    println!("mounts         {}", sb.mount_count);
    if let Some(s) = sb.summary() {
        // What a shim process alone on the image takes instead of scanning both tables.
        println!("in use         {} inodes, {} table slots (counted at the last clean unmount)", s.inodes, s.slots);
    }
    println!("journals       {} x {} KiB", g.journal_count, g.journal_blocks * 4);
    let mode = WriteMode::from_u32(sb.write_mode).map(|m| m.name()).unwrap_or("?");
    let (any, aligned) = (hashfs::untorn_limit(&g), hashfs::untorn_aligned_limit(&g));
    match aligned > any {
        true => {
            println!("write mode     {mode} (untorn writes up to {} KiB, {} KiB aligned)", any / 1024, aligned / 1024)
        }
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
    let fs = mount(image)?;
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
