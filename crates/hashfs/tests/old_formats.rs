//! Every earlier format version still opens: each committed image (tests/images/README.md
//! says how each was made) passes fsck, mounts, shows the tree it was written with, takes
//! new writes, is stamped with the current format version, and passes fsck again.

use hashfs::fsck::{fsck, FsckMode};
use hashfs::pm::{MmapDevice, OpenMode};
use hashfs::testing::layout::superblock::FORMAT_VERSION;
use hashfs::FileSystem;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

fn images() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/images");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/images")
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".img.gz"))
        .collect();
    v.sort();
    v
}

/// Decompresses a committed image into a scratch file.
fn unpack(gz: &Path, dir: &Path) -> PathBuf {
    let out = dir.join(gz.file_stem().unwrap());
    let o = Command::new("gzip").arg("-dc").arg(gz).output().expect("gzip runs");
    assert!(o.status.success(), "gzip -dc {}", gz.display());
    std::fs::write(&out, o.stdout).unwrap();
    out
}

fn open(img: &Path) -> Arc<MmapDevice> {
    Arc::new(MmapDevice::open(img, OpenMode::Existing).expect("the image opens"))
}

fn assert_clean(img: &Path) {
    let r = fsck(open(img), FsckMode::Check, &|_, _| {}).expect("fsck runs");
    assert!(r.findings.is_empty(), "{}: {:#?}", img.display(), r.findings);
}

#[test]
fn every_earlier_format_opens_and_keeps_its_files() {
    let imgs = images();
    let versions: Vec<String> =
        imgs.iter().map(|p| p.file_name().unwrap().to_string_lossy()[6..7].to_string()).collect();
    for v in 1..=FORMAT_VERSION {
        assert!(versions.contains(&v.to_string()), "no committed image of format {v}");
    }
    let dir = tempfile_dir();
    for gz in &imgs {
        let name = gz.file_name().unwrap().to_string_lossy().into_owned();
        let version: u32 = name[6..7].parse().unwrap();
        let img = unpack(gz, &dir);
        assert_clean(&img);
        let dev = open(&img);
        assert_eq!(hashfs::read_superblock(&*dev).unwrap().0.format_version, version, "{name}");
        let (fs, _) = FileSystem::mount(dev, &|_, _| {}).unwrap_or_else(|e| panic!("{name}: {e}"));
        let p = Path::new;
        assert_eq!(fs.read(p("/tree/hello.txt")).unwrap(), b"hello from an old format\n", "{name}");
        let big: Vec<u8> = (0..300_000u64).map(|i| ((i * 7 + 3) % 251) as u8).collect();
        assert_eq!(fs.read(p("/tree/docs/big.bin")).unwrap(), big, "{name}");
        assert_eq!(fs.read(p("/tree/docs/deep/small")).unwrap(), vec![b'x'; 5000], "{name}");
        assert_eq!(fs.read_link(p("/tree/link")).unwrap(), p("docs/deep/small"), "{name}");
        if version >= 3 {
            assert!(fs.metadata(p("/tree/fifo")).is_ok(), "{name}: the FIFO");
            let ino = fs.resolve(p("/tree/hello.txt")).unwrap();
            assert_eq!(fs.get_xattr(ino, b"user.origin").unwrap(), format!("format{version}").as_bytes(), "{name}");
        }
        // New writes on the old image, across a remount: a new file, and appends to an
        // old one (before format 4 the inode's sum covers its size, so the first append
        // is a transaction that reseals it; the later ones store the size in place).
        fs.write(p("/tree/new.txt"), b"written by the current build").unwrap();
        let f = fs.open_file(p("/tree/hello.txt"), hashfs::OpenOptions::new().append(true)).unwrap();
        for _ in 0..3 {
            f.append(b"appended\n").unwrap();
        }
        drop(f);
        fs.unmount().unwrap();
        let dev = open(&img);
        assert_eq!(hashfs::read_superblock(&*dev).unwrap().0.format_version, FORMAT_VERSION, "{name}: stamped");
        let (fs, _) = FileSystem::mount(dev, &|_, _| {}).unwrap();
        assert_eq!(fs.read(p("/tree/new.txt")).unwrap(), b"written by the current build");
        assert_eq!(
            fs.read(p("/tree/hello.txt")).unwrap(),
            b"hello from an old format\nappended\nappended\nappended\n",
            "{name}"
        );
        assert_eq!(fs.read(p("/tree/docs/big.bin")).unwrap(), big, "{name}");
        fs.unmount().unwrap();
        assert_clean(&img);
        std::fs::remove_file(&img).unwrap();
    }
    std::fs::remove_dir(&dir).unwrap();
}

/// A scratch directory, removed when the test passes.
fn tempfile_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("hashfs-old-formats-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Format 6 keeps the bytes past EOF in a file's last block zero (F2), which older builds
/// let be stale: on a format-5 image such bytes are a pending fsck finding (not an error),
/// and the first mount by this build zeroes them before it stamps format 6.
#[test]
fn a_mount_zeroes_the_bytes_past_eof_that_older_formats_let_be_stale() {
    let dir = tempfile_dir().join("stale-tails");
    std::fs::create_dir_all(&dir).unwrap();
    let gz = images().into_iter().find(|p| p.to_string_lossy().ends_with("format5-hashfs.img.gz")).unwrap();
    let img = unpack(&gz, &dir);
    let p = Path::new("/tree/docs/deep/small"); // 5,000 bytes: 3,192 past EOF in its last block
    let (fs, _) = FileSystem::mount(open(&img), &|_, _| {}).unwrap();
    let ino = fs.resolve(p).unwrap();
    let at = fs.geometry().block_off(fs.physical_block(ino, hashfs::Lblk(1)).unwrap().unwrap().pblk) + (5000 - 4096);
    drop(fs); // (a mount by this build has zeroed and stamped: restore the image)
    let img = unpack(&gz, &dir);
    let mut bytes = std::fs::read(&img).unwrap();
    bytes[at.0 as usize + 100] = 0xEE;
    std::fs::write(&img, &bytes).unwrap();
    let r = fsck(open(&img), FsckMode::Check, &|_, _| {}).unwrap();
    assert!(r.findings.iter().any(|f| f.contains("past EOF")) && r.exit_code() == 0, "pending: {:?}", r.findings);
    let (fs, report) = FileSystem::mount(open(&img), &|_, _| {}).unwrap();
    assert_eq!(report.tails_zeroed, 1);
    assert!(fs.bytes_past_eof(ino).unwrap().iter().all(|&b| b == 0));
    assert_eq!(fs.read(p).unwrap(), vec![b'x'; 5000]);
    fs.unmount().unwrap();
    assert_clean(&img);
    std::fs::remove_dir_all(&dir).unwrap();
}
