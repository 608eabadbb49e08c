//! ctFS's live view (`mapping/ctfs/view.rs`): on an image file, reads and in-place writes
//! of a `ctfs` file are copies through the image's pages mapped where the page table puts
//! them. Checked against a model through every change that removes or moves pages
//! (truncation, hole punching, partition moves, untorn copy-on-write, unlink and reuse of
//! the blocks by another file), with the view shown to serve the reads.

use hashfs::{FallocateMode, FileSystem, FormatOptions, MappingKind, OpenOptions};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::path::Path;

const MIB: u64 = 1 << 20;

fn image(dir: &Path) -> FileSystem {
    let path = dir.join("ctfs.img");
    let opts = FormatOptions { mapping: MappingKind::Ctfs, ..FormatOptions::default() };
    FileSystem::format_file(&path, 96 * MIB, &opts, &|_, _| {}).unwrap();
    FileSystem::open(&path).unwrap().0
}

fn check(fs: &FileSystem, name: &str, model: &[u8], rng: &mut SmallRng) {
    let f = fs.open_file(Path::new(name), OpenOptions::new().read(true)).unwrap();
    assert_eq!(f.metadata().unwrap().size, model.len() as u64, "{name}: size");
    for _ in 0..20 {
        let off = rng.random_range(0..=model.len());
        let len = rng.random_range(0..=(model.len() - off).min(40_000));
        let mut buf = vec![0xEEu8; len];
        let n = f.read_at(off as u64, &mut buf).unwrap();
        assert_eq!(n, len);
        assert!(buf == model[off..off + len], "{name}: bytes {off}..{} differ from the model", off + len);
    }
}

#[test]
fn the_view_serves_reads_and_writes_and_forgets_what_changes_remove() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let fs = image(dir.path());
    let rw = OpenOptions::new().read(true).write(true).create(true).clone();
    let mut rng = SmallRng::seed_from_u64(17);
    let names = ["/a", "/b", "/c"];
    let mut models: Vec<Vec<u8>> = vec![Vec::new(); names.len()];
    let mut served = 0u64;
    for step in 0..1500u32 {
        let i = rng.random_range(0..names.len());
        let (name, model) = (names[i], &mut models[i]);
        let f = fs.open_file(Path::new(name), &rw).unwrap();
        let byte = (step % 251) as u8 + 1;
        match rng.random_range(0..20) {
            0..=6 => {
                // Appends and overwrites, small and large (partition moves as files grow).
                let len = if rng.random_bool(0.2) {
                    rng.random_range(1..3 * MIB as usize)
                } else {
                    rng.random_range(1..9000)
                };
                let off = if rng.random_bool(0.5) { model.len() } else { rng.random_range(0..=model.len()) };
                f.write_at(off as u64, &vec![byte; len]).unwrap();
                if model.len() < off + len {
                    model.resize(off + len, 0);
                }
                model[off..off + len].fill(byte);
            }
            7..=9 => {
                let ino = f.metadata().unwrap().ino;
                let before = fs.ctfs_view_pages(ino).expect("an image file has a view");
                check(&fs, name, model, &mut rng);
                served += u64::from(fs.ctfs_view_pages(ino).unwrap() > before);
            }
            10..=11 => {
                let new = rng.random_range(0..=model.len());
                f.set_len(new as u64).unwrap();
                model.resize(new, 0);
            }
            12..=13 if model.len() > 8192 => {
                let off = rng.random_range(0..model.len() - 4096);
                let len = rng.random_range(1..(model.len() - off).min(300_000));
                f.fallocate(off as u64, len as u64, FallocateMode::PunchHole).unwrap();
                model[off..off + len].fill(0);
            }
            14..=15 if model.len() >= 8192 => {
                let off = rng.random_range(0..model.len() / 4096) * 4096;
                let len = 4096.min(model.len() - off);
                if len == 4096 {
                    f.write_atomic_at(off as u64, &[byte; 4096]).unwrap();
                    model[off..off + 4096].fill(byte);
                }
            }
            16 => {
                drop(f);
                fs.remove_file(Path::new(name)).unwrap();
                fs.open_file(Path::new(name), &rw).unwrap();
                model.clear();
            }
            _ => check(&fs, name, model, &mut rng),
        }
    }
    for (name, model) in names.iter().zip(&models) {
        check(&fs, name, model, &mut rng);
    }
    assert!(served > 50, "the view mapped pages for only {served} checks: it did not serve the reads");
}

/// The case the view's give-back exists for: a file's blocks freed by a truncation and
/// taken by another file must not be read through the first file's old mapping.
#[test]
fn freed_blocks_taken_by_another_file_are_not_read_through_an_old_mapping() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let fs = image(dir.path());
    let rw = OpenOptions::new().read(true).write(true).create(true).clone();
    let a = fs.open_file(Path::new("/a"), &rw).unwrap();
    a.write_at(0, &[b'A'; 8 * 4096]).unwrap();
    let mut buf = vec![0u8; 8 * 4096];
    a.read_at(0, &mut buf).unwrap();
    let ino = a.metadata().unwrap().ino;
    assert!(fs.ctfs_view_pages(ino).unwrap() >= 8, "the read went through the view");
    a.set_len(0).unwrap();
    let b = fs.open_file(Path::new("/b"), &rw).unwrap();
    b.write_at(0, &[b'B'; 8 * 4096]).unwrap();
    a.set_len(8 * 4096).unwrap(); // holes again
    a.read_at(0, &mut buf).unwrap();
    assert!(buf.iter().all(|&x| x == 0), "a truncated file reads another file's blocks through its old view");
    a.write_at(0, &[b'C'; 4096]).unwrap();
    a.read_at(0, &mut buf[..4096]).unwrap();
    assert!(buf[..4096].iter().all(|&x| x == b'C'));
}
