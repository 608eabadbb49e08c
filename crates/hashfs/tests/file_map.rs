//! `File::map`: shared mappings of files onto their blocks in the image (writes through a
//! mapping are in the file and the other way round), holes, ranges, files that may not
//! shrink while mapped, and 2 MiB pages for files the aligned allocator placed (on an
//! image with 2 MiB pages).

#[path = "../../hashfs-cli/tests/support/huge.rs"]
mod huge;
#[path = "../../hashfs-cli/tests/support/skip.rs"]
mod skip;

use hashfs::{AllocatorKind, Error, FallocateMode, FileSystem, FormatOptions, MappingKind, OpenOptions, Protection};
use huge::huge_dir;
use std::path::Path;

const MIB: u64 = 1 << 20;

fn image(dir: &Path, mapping: MappingKind) -> FileSystem {
    let path = dir.join("map.img");
    let opts = FormatOptions { mapping, ..FormatOptions::default() };
    FileSystem::format_file(&path, 128 * MIB, &opts, &|_, _| {}).unwrap();
    FileSystem::open(&path).unwrap().0
}

#[test]
fn a_mapping_is_the_file() {
    for mapping in [MappingKind::HashFs, MappingKind::ExtentTree] {
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        let fs = image(dir.path(), mapping);
        let rw = OpenOptions::new().read(true).write(true).create(true).clone();
        let f = fs.open_file(Path::new("/f"), &rw).unwrap();
        f.write_at(0, &vec![7u8; 3 * 4096]).unwrap();
        f.set_len(5 * 4096 + 100).unwrap(); // blocks 3..5 are holes
        let m = f.map(0, 5 * 4096 + 100, Protection::ReadWrite).unwrap();
        assert_eq!(m.len(), 6 * 4096);
        // Through the mapping into the file, and from the file into the mapping.
        m.write_at(4096 * 4, b"mapped").unwrap();
        let mut buf = [0u8; 6];
        f.read_at(4096 * 4, &mut buf).unwrap();
        assert_eq!(&buf, b"mapped", "{mapping:?}");
        f.write_at(10, b"written").unwrap();
        let mut buf = [0u8; 7];
        m.read_at(10, &mut buf).unwrap();
        assert_eq!(&buf, b"written");
        m.read_at(4096 * 3, &mut buf).unwrap();
        assert_eq!(buf, [0; 7], "a hole reads as zeros");
        m.persist(0, m.len()).unwrap();
        // Out of range.
        assert!(matches!(m.write_at(m.len() - 1, b"xx"), Err(Error::Invalid(_))));
        // No shrinking or punching while mapped.
        assert!(matches!(f.set_len(4096), Err(Error::Busy)));
        assert!(matches!(f.fallocate(0, 4096, FallocateMode::PunchHole), Err(Error::Busy)));
        drop(m);
        f.set_len(4096).unwrap();
        // Bad ranges and modes.
        assert!(matches!(f.map(100, 4096, Protection::ReadOnly), Err(Error::Invalid(_))));
        assert!(matches!(f.map(0, 3 * 4096, Protection::ReadOnly), Err(Error::Invalid(_))));
        assert!(matches!(f.map(0, 0, Protection::ReadOnly), Err(Error::Invalid(_))));
        let ro = fs.open_file(Path::new("/f"), OpenOptions::new().read(true)).unwrap();
        assert!(matches!(ro.map(0, 4096, Protection::ReadWrite), Err(Error::BadDescriptor)));
        let m = ro.map(0, 4096, Protection::ReadOnly).unwrap();
        assert!(matches!(m.write_at(0, b"x"), Err(Error::BadDescriptor)));
        drop(m);
        drop((f, ro));
        fs.unmount().unwrap();
    }
}

/// A writable mapping of a file that is all hole, twice the image's size: mapping and
/// reading allocate nothing; each first write, through the safe copy or a raw pointer,
/// gives its 2 MiB of the file blocks (at most), and the file holds what was written.
#[test]
fn holes_get_blocks_when_first_written_through_a_mapping() {
    for mapping in [MappingKind::HashFs, MappingKind::ExtentTree] {
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        let fs = image(dir.path(), mapping);
        let rw = OpenOptions::new().read(true).write(true).create(true).clone();
        let f = fs.open_file(Path::new("/sparse"), &rw).unwrap();
        f.set_len(256 * MIB).unwrap();
        let free0 = fs.statfs().blocks_free;
        let m = f.map(0, 256 * MIB as usize, Protection::ReadWrite).unwrap();
        let mut buf = [1u8; 4096];
        m.read_at(100 * MIB as usize, &mut buf).unwrap();
        assert_eq!(
            (buf, fs.statfs().blocks_free),
            ([0; 4096], free0),
            "{mapping:?}: mapping and reading allocate nothing"
        );
        m.write_at(100 * MIB as usize + 10, b"first").unwrap();
        let used = free0 - fs.statfs().blocks_free;
        assert!((1..=512).contains(&used), "{mapping:?}: one write, {used} blocks");
        // A page read first (a write-protected zero page), then written by a raw store.
        m.read_at(200 * MIB as usize, &mut buf).unwrap();
        // SAFETY: inside the live, writable mapping.
        unsafe { m.as_ptr().add(200 * MIB as usize + 7).copy_from_nonoverlapping(b"raw".as_ptr(), 3) };
        m.persist(0, m.len()).unwrap();
        let used = free0 - fs.statfs().blocks_free;
        assert!((2..=1024).contains(&used), "{mapping:?}: two writes, {used} blocks");
        let mut got = [0u8; 5];
        f.read_at(100 * MIB + 10, &mut got).unwrap();
        assert_eq!(&got, b"first");
        f.read_at(200 * MIB + 7, &mut got[..3]).unwrap();
        assert_eq!(&got[..3], b"raw");
        drop(m);
        drop(f);
        fs.unmount().unwrap();
    }
}

#[test]
fn aligned_files_are_mapped_with_2mib_pages() {
    let Some(huge) = huge_dir() else {
        skip::skip("no tmpfs with huge=always (mounting one needs root)");
        return;
    };
    let mut kib = Vec::new();
    for allocator in [AllocatorKind::Aligned, AllocatorKind::Bitmap] {
        let dir = tempfile::tempdir_in(&huge).unwrap();
        let path = dir.path().join("huge.img");
        let opts = FormatOptions { mapping: MappingKind::ExtentTree, allocator, ..FormatOptions::default() };
        FileSystem::format_file(&path, 256 * MIB, &opts, &|_, _| {}).unwrap();
        let fs = FileSystem::open(&path).unwrap().0;
        fs.write(Path::new("/small"), b"s").unwrap();
        let f = fs.open_file(Path::new("/big"), OpenOptions::new().read(true).write(true).create(true)).unwrap();
        f.allocate(0, 8 * MIB).unwrap();
        let m = f.map(0, 8 * MIB as usize, Protection::ReadWrite).unwrap();
        let chunk = vec![0xA5u8; MIB as usize];
        for i in 0..8 {
            m.write_at(i * MIB as usize, &chunk).unwrap();
        }
        kib.push(m.pmd_mapped_kib().unwrap());
        drop(m);
        let mut back = vec![0u8; MIB as usize];
        f.read_at(7 * MIB, &mut back).unwrap();
        assert!(back.iter().all(|&b| b == 0xA5));
        drop(f);
        fs.unmount().unwrap();
    }
    assert_eq!(kib[0], 8192, "aligned allocator: every 2 MiB on a huge page ({kib:?})");
    assert!(kib[1] < 8192, "bitmap allocator: {kib:?}");
}

#[test]
fn every_mapping_of_a_file_sees_a_hole_filled() {
    for mapping in [MappingKind::HashFs, MappingKind::ExtentTree] {
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        let fs = image(dir.path(), mapping);
        let rw = OpenOptions::new().read(true).write(true).create(true).clone();
        let f = fs.open_file(Path::new("/f"), &rw).unwrap();
        f.set_len(4 * MIB).unwrap(); // all holes
        let ro = f.map(0, (4 * MIB) as usize, Protection::ReadOnly).unwrap();
        let b = f.map(0, (4 * MIB) as usize, Protection::ReadWrite).unwrap();
        let a = f.map(0, (4 * MIB) as usize, Protection::ReadWrite).unwrap();
        let mut buf = [0u8; 6];
        b.read_at(8192, &mut buf).unwrap(); // B touches the hole first
        a.write_at(8192, b"mapped").unwrap();
        for (name, m) in [("read-only", &ro), ("writable", &b)] {
            m.read_at(8192, &mut buf).unwrap();
            assert_eq!(&buf, b"mapped", "{mapping:?}: {name} mapping after a fill through another");
        }
        f.write_at(3 * MIB, b"writes").unwrap();
        for (name, m) in [("read-only", &ro), ("writable a", &a), ("writable b", &b)] {
            m.read_at((3 * MIB) as usize, &mut buf).unwrap();
            assert_eq!(&buf, b"writes", "{mapping:?}: {name} mapping after a write into a hole");
        }
    }
}
