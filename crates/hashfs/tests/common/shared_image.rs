//! Images shared by participants (issue 55): two mounts in one test process are two
//! participants, and a child participant is the test binary run again.

use hashfs::fsck::{fsck, FsckMode};
use hashfs::FileSystem;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// An image on /dev/shm (the region lives beside it there too), removed with its region.
pub struct Image {
    pub path: PathBuf,
}

impl Image {
    pub fn new(name: &str) -> Image {
        Image::with(name, 64 << 20, &hashfs::FormatOptions { hash_seed: Some(7), ..Default::default() })
    }
    /// An image of `bytes` formatted with `opts`.
    pub fn with(name: &str, bytes: u64, opts: &hashfs::FormatOptions) -> Image {
        let path = PathBuf::from(format!("/dev/shm/hashfs-shared-{name}-{}.img", std::process::id()));
        FileSystem::format_file(&path, bytes, opts, &|_, _| {}).unwrap();
        Image { path }
    }
    pub fn join(&self) -> FileSystem {
        FileSystem::open_shared(&self.path).unwrap().0
    }
    pub fn region(&self) -> PathBuf {
        hashfs::share::region_path(&std::fs::File::open(&self.path).unwrap()).unwrap()
    }
    /// Whether the image is marked clean (read from a copy of its bytes: it may still be
    /// open, and locked, in this process).
    pub fn marked_clean(&self) -> bool {
        let dev = hashfs::pm::CrashDevice::from_image(&std::fs::read(&self.path).unwrap());
        let (sb, _) = hashfs::fsck::geometry_of(&dev).unwrap();
        sb.state == hashfs::testing::layout::SB_STATE_CLEAN
    }
    /// fsck of the image, which no one may use any more.
    pub fn check(&self) {
        let dev =
            std::sync::Arc::new(hashfs::pm::MmapDevice::open(&self.path, hashfs::pm::OpenMode::Existing).unwrap());
        let r = fsck(dev, FsckMode::Check, &|_, _| {}).unwrap();
        assert!(r.findings.is_empty(), "fsck: {:?}", r.findings);
    }
}

impl Drop for Image {
    fn drop(&mut self) {
        if let Ok(f) = std::fs::File::open(&self.path) {
            if let Ok(r) = hashfs::share::region_path(&f) {
                let _ = std::fs::remove_file(r);
            }
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A child participant, killed and waited for when dropped, also
/// when a test fails.
pub struct Killed {
    child: std::process::Child,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Killed {
    /// The child's process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

/// Starts test `name` of this binary as a child participant on `img` (`HASHFS_SHARED_CHILD`
/// names the image) and waits until it prints that it joined (20 s at most): None when it
/// could not.
pub fn start_child_named(img: &Image, name: &str) -> Option<Killed> {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads", "1"])
        .env("HASHFS_SHARED_CHILD", &img.path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(out)).map_while(|l| l.ok()) {
            if line.ends_with("joined") {
                let _ = tx.send(());
            }
        }
    });
    let k = Killed { child, reader: Some(reader) };
    rx.recv_timeout(Duration::from_secs(20)).ok().map(|_| k)
}
