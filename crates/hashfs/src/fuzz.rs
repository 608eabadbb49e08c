//! The image fuzzer's harness (issue 53): an image whose bytes a fuzzer chooses, made from
//! a real one, goes through what reads an image a user hands us: fsck, mount (with its
//! recovery), a walk of the tree that reads every file, a change, an unmount, fsck
//! --repair, and a mount and fsck of what the repair left. Nothing may panic, hang or
//! allocate without bound: every refusal is an error, and an image that fsck --repair
//! says it repaired mounts and checks clean.
//!
//! An input is a recipe: its first byte picks a real image ([`bases`]: the explorer's base
//! tree on each mapping, cleanly unmounted, and one left mounted so that mount scans it),
//! and the rest are patches, each a little-endian `u32` offset (taken modulo the image's
//! length), a length byte and that many bytes. So a fuzzer's small mutations stay small
//! changes of a real image. `fuzz/` drives it with libFuzzer (`cargo +nightly fuzz run
//! image`); `tests/fuzz_images.rs` replays the committed corpus and seeded mutations of it
//! in every test run.

#![forbid(unsafe_code)]

use crate::crashtest;
use crate::fs::fsck::{fsck, FsckMode};
use crate::layout::{HashPlacement, MappingKind};
use crate::pm::mem::MemDevice;
use crate::pm::{CrashDevice, PmDevice};
use crate::{FileSystem, FileType, Ino};
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// The real images, by index: the base tree on each mapping (`MappingKind::ALL`), unmounted cleanly,
/// then HashFS's left mounted (its superblock says so, and mount runs its full scan), then
/// HashFS's grouped and regions placements (`mapping/hashfs/groups.rs`, `regions.rs`; 8 MiB
/// images), each with a file of a whole 2 MiB chunk and more, so that their group
/// directory, claims and open groups are on the image for patches to reach (mount counts
/// them from there). Indices only grow: a committed input keeps the image it picks.
pub fn bases() -> &'static [Vec<u8>] {
    static BASES: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    BASES.get_or_init(|| {
        let mut v: Vec<Vec<u8>> =
            MappingKind::ALL.iter().map(|&m| crashtest::base_image(m, 1.0, HashPlacement::Paper)).collect();
        let dev = Arc::new(CrashDevice::from_image(&v[0]));
        let (fs, _) = FileSystem::mount(dev.clone(), &|_, _| {}).expect("the base image mounts");
        fs.write(Path::new("/A/open"), &[7; 5000]).expect("a write fits");
        v.push(dev.live_image());
        drop(fs);
        let chunked = |fs: &FileSystem<CrashDevice>| fs.write(Path::new("/chunked"), &[3; (2 << 20) + 5000]);
        for placement in [HashPlacement::Grouped, HashPlacement::Regions] {
            v.push(crashtest::base_image_with(MappingKind::HashFs, 1.0, placement, &chunked));
        }
        v
    })
}

/// The image an input stands for.
pub fn image_from(input: &[u8]) -> Vec<u8> {
    let bases = bases();
    let Some((&pick, mut rest)) = input.split_first() else { return bases[0].clone() };
    let mut img = bases[pick as usize % bases.len()].clone();
    while rest.len() >= 5 {
        let off = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize % img.len();
        let len = (rest[4] as usize).min(rest.len() - 5);
        let bytes = &rest[5..5 + len];
        let end = (off + len).min(img.len());
        img[off..end].copy_from_slice(&bytes[..end - off]);
        rest = &rest[5 + len..];
    }
    img
}

/// Runs one input. Panics only on a bug: a panic inside the file system, or a repaired
/// image that does not mount or check clean.
pub fn run(input: &[u8]) {
    let img = image_from(input);
    // Plain DRAM devices: no crash states are needed here, and a CrashDevice's copies and
    // line logs cost most of an input's time (`pm/mem.rs`).
    let dev = Arc::new(MemDevice::from_image(img.clone()));
    let _ = fsck(dev.clone(), FsckMode::Check, &|_, _| {});
    if let Ok((fs, _)) = FileSystem::mount(dev.clone(), &|_, _| {}) {
        walk(&fs);
        let _ = fs.write(Path::new("/fuzz"), b"after");
        let _ = fs.create_dir(Path::new("/A/fuzz-dir"), 0o755);
        let _ = fs.remove_file(Path::new("/g"));
        let _ = fs.unmount();
    }
    let dev = Arc::new(MemDevice::from_image(img));
    let Ok(report) = fsck(dev.clone(), FsckMode::Repair, &|_, _| {}) else { return };
    if report.exit_code() > 1 {
        return; // fsck said it could not repair the image
    }
    let (fs, _) = match FileSystem::mount(dev.clone(), &|_, _| {}) {
        Ok(m) => m,
        Err(e) => panic!("fsck --repair answered {} but the image does not mount: {e}", report.exit_code()),
    };
    walk(&fs);
    drop(fs);
    let again = fsck(dev, FsckMode::Check, &|_, _| {}).expect("a repaired image is checked");
    assert!(again.findings.is_empty(), "findings after fsck --repair: {:?}", again.findings);
}

/// Bytes read of each file, from its start and before its end: enough to reach every
/// mapping's lookups without reading a corrupt size's worth.
const READ_BYTES: usize = 16 << 10;

/// Every entry of the tree (at most 10,000), its attributes, extended attributes, link
/// target, and the first and last bytes of each file. Errors are the image's and are
/// ignored; only a panic or a hang is a finding.
fn walk<D: PmDevice>(fs: &FileSystem<D>) {
    let mut stack = vec![Ino::ROOT];
    let mut seen = 0;
    while let Some(ino) = stack.pop() {
        seen += 1;
        if seen > 10_000 {
            return;
        }
        let Ok(m) = fs.getattr(ino) else { continue };
        let _ = fs.list_xattr(ino).map(|names| {
            for n in names {
                let _ = fs.get_xattr(ino, &n);
            }
        });
        match m.file_type {
            FileType::Directory => {
                let mut cookie = 0;
                while let Ok(batch) = fs.readdir_ino(ino, cookie, 256) {
                    let Some(last) = batch.last() else { break };
                    if last.cookie <= cookie {
                        break;
                    }
                    cookie = last.cookie;
                    stack.extend(batch.iter().map(|e| e.ino));
                    let _ = batch.first().map(|e| fs.lookup(ino, &e.name));
                }
            }
            FileType::Symlink => {
                let _ = fs.readlink_ino(ino);
            }
            FileType::Regular => {
                let Ok(f) = fs.open_ino(ino, crate::fs::api::Access { read: true, ..Default::default() }) else {
                    continue;
                };
                let mut buf = vec![0u8; READ_BYTES];
                let _ = f.read_at(0, &mut buf);
                let _ = f.read_at(m.size.saturating_sub(READ_BYTES as u64), &mut buf);
            }
            _ => {}
        }
    }
}
