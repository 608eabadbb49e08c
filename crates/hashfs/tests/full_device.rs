//! A full device: writes fail with ENOSPC (NoSpace) at 100%, nothing already written is
//! lost, and the space comes back after deletes.

mod common;
use common::*;
use hashfs::{Error, OpenOptions};
use std::path::Path;

#[test]
fn enospc_at_full_and_space_returns() {
    let (fs, dev) = new_fs(4 << 20, &small_opts());
    let total = fs.statfs().blocks_total;
    let mut files = Vec::new();
    let block = vec![0x5Au8; 4096];
    'fill: for i in 0.. {
        let path = format!("/f{i}");
        let f = match fs.open_file(Path::new(&path), OpenOptions::new().write(true).create(true)) {
            Ok(f) => f,
            Err(Error::NoSpace) => break,
            Err(e) => panic!("{e}"),
        };
        for b in 0..8u64 {
            match f.write_at(b * 4096, &block) {
                Ok(4096) => {}
                Ok(n) => panic!("short write {n}"),
                Err(Error::NoSpace) => {
                    files.push((path, b));
                    break 'fill;
                }
                Err(e) => panic!("{e}"),
            }
        }
        files.push((path, 8));
    }
    let st = fs.statfs();
    // HashFS fills every block. A tree mapping may be left with a few blocks that no write
    // can use: a new data block may need new tree nodes too (a leaf split up to the root).
    let slack = if test_mapping() == hashfs::MappingKind::HashFs { 0 } else { 4 };
    assert!(st.blocks_free <= slack, "the device is full ({} free of {total})", st.blocks_free);
    // Every further allocation fails cleanly, and a multi-block write changes nothing.
    let last = &files.last().unwrap().0;
    let f = fs.open_file(Path::new(last), OpenOptions::new().write(true)).unwrap();
    let size_before = f.metadata().unwrap().size;
    assert!(matches!(f.write_at(size_before, &vec![1u8; 3 * 4096]), Err(Error::NoSpace)));
    assert_eq!(f.metadata().unwrap().size, size_before);
    drop(f);
    // Nothing written is lost.
    for (path, blocks) in &files {
        let data = fs.read(Path::new(path)).unwrap();
        assert_eq!(data.len() as u64, blocks * 4096, "{path}");
        assert!(data.iter().all(|&b| b == 0x5A), "{path}");
    }
    // Deleting gives the space back and writes work again.
    for (path, _) in files.iter().take(files.len() / 2) {
        fs.remove_file(Path::new(path)).unwrap();
    }
    assert!(fs.statfs().blocks_free > total / 3);
    fs.write(Path::new("/after"), &vec![7u8; 100_000]).unwrap();
    assert_eq!(fs.read(Path::new("/after")).unwrap().len(), 100_000);
    let (fs, dev) = remount(fs, dev);
    drop(fs);
    assert_fsck_clean(&dev);
}

#[test]
fn inode_table_full_gives_nospace() {
    let (fs, dev) = new_fs(4 << 20, &hashfs::FormatOptions { inode_count: Some(20), ..small_opts() });
    let mut n = 0;
    loop {
        match fs.write(Path::new(&format!("/i{n}")), b"x") {
            Ok(()) => n += 1,
            Err(Error::NoSpace) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(n, 19, "root takes one inode");
    assert_eq!(fs.statfs().inodes_free, 0);
    fs.remove_file(Path::new("/i3")).unwrap();
    fs.write(Path::new("/again"), b"y").unwrap();
    drop(fs);
    assert_fsck_clean(&dev);
}
