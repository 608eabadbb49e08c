//! Two files on a ctFS image whose every block is a run of its own (their appends
//! interleaved), for the tests of the view's budget of kernel mappings, each in a binary of
//! its own because each sets the budget through the environment.

use hashfs::{File, FileSystem, FormatOptions, MappingKind, OpenOptions};
use std::path::Path;

pub struct Fragmented {
    pub fs: FileSystem,
    pub a: File,
    pub b: File,
    /// Holds the image's directory (removed when dropped).
    pub dir: tempfile::TempDir,
}

/// Block `i` of file `tag` (1: a, 2: b).
pub fn page(tag: u8, i: u64) -> Vec<u8> {
    (0..4096u64).map(|j| (i * 7 + j + tag as u64 * 13) as u8).collect()
}

/// A 64 MiB ctFS image on /dev/shm with files `/a` and `/b` of `blocks` blocks each.
pub fn ctfs_fragmented(blocks: u64) -> Fragmented {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = dir.path().join("ctfs.img");
    let opts = FormatOptions { mapping: MappingKind::Ctfs, ..FormatOptions::default() };
    FileSystem::format_file(&path, 64 << 20, &opts, &|_, _| {}).unwrap();
    let (fs, _) = FileSystem::open(&path).unwrap();
    let rw = OpenOptions::new().read(true).write(true).create(true).clone();
    let (a, b) = (fs.open_file(Path::new("/a"), &rw).unwrap(), fs.open_file(Path::new("/b"), &rw).unwrap());
    // Interleaved appends: neither file has two adjacent blocks.
    for i in 0..blocks {
        a.append(&page(1, i)).unwrap();
        b.append(&page(2, i)).unwrap();
    }
    Fragmented { fs, a, b, dir }
}

/// Reads the `blocks` blocks of file `f` (tag 1 or 2) in one request and checks each.
pub fn check(f: &File, tag: u8, blocks: u64) {
    let mut buf = vec![0u8; (blocks * 4096) as usize];
    assert_eq!(f.read_at(0, &mut buf).unwrap(), buf.len());
    for i in 0..blocks {
        assert!(buf[(i * 4096) as usize..((i + 1) * 4096) as usize] == page(tag, i)[..], "file {tag}, block {i}");
    }
}
