//! The commands that read or change files in an unmounted image: `ls`, `cat`, `mkdir`,
//! `rm` (`put` and `get`, which copy trees, are in [`crate::copy`]).

use crate::{fail, mount, Failure};
use hashfs::FileType;
use std::path::Path;

/// How `ls` shows each entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listing {
    Names,
    /// `-l`: as `ls -l` shows it.
    Long,
}

/// What `mkdir` does about missing parents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parents {
    /// They must exist.
    Required,
    /// `-p`: they are made.
    Made,
}

/// What `rm` removes of a directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removal {
    /// An empty one only.
    Entry,
    /// `-r`: it and everything below it.
    Tree,
}

/// `hashfs ls`: a directory's entries (or one file's).
pub fn ls(image: &Path, fs_path: &str, listing: Listing) -> Result<u8, Failure> {
    let fs = mount(image)?;
    let p = Path::new(fs_path);
    let m = fs.metadata(p).map_err(|e| fail(format!("{fs_path}: {e}")))?;
    let mut entries = if m.is_dir() {
        fs.read_dir(p).map_err(|e| fail(format!("{fs_path}: {e}")))?
    } else {
        vec![hashfs::DirEntry { name: fs_path.as_bytes().to_vec(), ino: m.ino, file_type: m.file_type, cookie: 0 }]
    };
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    for e in entries {
        let name = String::from_utf8_lossy(&e.name);
        if listing == Listing::Long {
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
            println!("{t}{:04o} {:>3} {:>5} {:>5} {:>12} {name}{target}", md.perm, md.nlink, md.uid, md.gid, size);
        } else {
            println!("{name}{}", if e.file_type == FileType::Directory { "/" } else { "" });
        }
    }
    Ok(0)
}

/// `hashfs cat`: a file's bytes to standard output.
pub fn cat(image: &Path, fs_path: &str) -> Result<u8, Failure> {
    use std::io::Write;
    let fs = mount(image)?;
    let f = fs
        .open_file(Path::new(fs_path), hashfs::OpenOptions::new().read(true))
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

/// `hashfs mkdir`.
pub fn mkdir(image: &Path, fs_path: &str, parents: Parents) -> Result<u8, Failure> {
    let fs = mount(image)?;
    let p = Path::new(fs_path);
    let r = match parents {
        Parents::Made => fs.create_dir_all(p, 0o755),
        Parents::Required => fs.create_dir(p, 0o755).map(|_| ()),
    };
    r.map_err(|e| fail(format!("{fs_path}: {e}")))?;
    Ok(0)
}

/// `hashfs rm`: a file, symlink or directory (empty, or as `removal` says).
pub fn rm(image: &Path, fs_path: &str, removal: Removal) -> Result<u8, Failure> {
    let fs = mount(image)?;
    let p = Path::new(fs_path);
    let m = fs.symlink_metadata(p).map_err(|e| fail(format!("{fs_path}: {e}")))?;
    let r = match (m.is_dir(), removal) {
        (true, Removal::Tree) => fs.remove_dir_all(p),
        (true, Removal::Entry) => fs.remove_dir(p),
        (false, _) => fs.remove_file(p),
    };
    r.map_err(|e| fail(format!("{fs_path}: {e}")))?;
    Ok(0)
}
