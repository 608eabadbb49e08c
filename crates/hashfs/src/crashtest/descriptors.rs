//! Descriptors a workload keeps open across its operations (issue 53: several descriptors
//! of one file or one directory at once): [`Op::Open`](super::workload::Op::Open) opens
//! one under a number, [`Op::Through`](super::workload::Op::Through) works through it,
//! and the file system sees what a program with several open descriptors does (a
//! truncate through one while another writes past the new end, an unlinked file written
//! and freed at its last close, a create in a directory removed under an open handle).

#![forbid(unsafe_code)]

use crate::fs::api::{Access, FallocateMode, File};
use crate::layout::Ino;
use crate::pm::PmDevice;
use crate::{Error, FileSystem, OpenOptions, Owner, Result};
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// How [`Op::Open`](super::workload::Op::Open) opens its path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenAs {
    /// A regular file, for reading and writing.
    ReadWrite,
    /// A regular file with O_APPEND (every write at the end).
    Append,
    /// A directory (read-only, as `open(O_DIRECTORY)`), for creates inside it.
    Directory,
}

/// An operation through an open descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Through {
    Write {
        off: u64,
        len: usize,
        seed: u8,
    },
    Append {
        len: usize,
        seed: u8,
    },
    Truncate {
        size: u64,
    },
    Fallocate {
        off: u64,
        len: u64,
        mode: FallocateMode,
    },
    Fsync,
    /// A new regular file named `name` in the directory the descriptor is open on.
    Create {
        name: String,
    },
    Close,
}

/// The open descriptors of one workload's run, by number.
pub struct Descriptors<D: PmDevice>(BTreeMap<u8, File<D>>);

impl<D: PmDevice> Default for Descriptors<D> {
    fn default() -> Self {
        Descriptors(BTreeMap::new())
    }
}

impl<D: PmDevice> Descriptors<D> {
    /// The inode descriptor `fd` is open on, if it is open.
    pub fn ino(&self, fd: u8) -> Option<Ino> {
        self.0.get(&fd).map(File::ino)
    }

    /// Opens `path` as descriptor `fd` (which must not be open).
    pub fn open(&mut self, fs: &FileSystem<D>, fd: u8, path: &str, how: OpenAs) -> Result<()> {
        if self.0.contains_key(&fd) {
            return Err(Error::Invalid("the descriptor is open already"));
        }
        let file = match how {
            OpenAs::ReadWrite => fs.open_file(Path::new(path), OpenOptions::new().read(true).write(true))?,
            OpenAs::Append => fs.open_file(Path::new(path), OpenOptions::new().append(true))?,
            OpenAs::Directory => {
                let ino = fs.resolve(Path::new(path))?;
                if !fs.getattr(ino)?.is_dir() {
                    return Err(Error::NotDir);
                }
                fs.open_ino(ino, Access { read: true, ..Default::default() })?
            }
        };
        self.0.insert(fd, file);
        Ok(())
    }

    /// Runs `act` through descriptor `fd`.
    pub fn run(&mut self, fs: &FileSystem<D>, fd: u8, act: &Through) -> Result<()> {
        let f = self.0.get(&fd).ok_or(Error::BadDescriptor)?;
        match act {
            Through::Write { off, len, seed } => super::workload::write_all(f, *off, *len, *seed),
            Through::Append { len, seed } => super::workload::append_seeded(f, *len, *seed),
            Through::Truncate { size } => f.set_len(*size),
            Through::Fallocate { off, len, mode } => f.fallocate(*off, *len, *mode),
            Through::Fsync => f.sync_all(),
            Through::Create { name } => fs.create_file_at(f.ino(), name.as_bytes(), 0o644, Owner::ROOT).map(drop),
            Through::Close => {
                self.0.remove(&fd);
                Ok(())
            }
        }
    }
}

impl fmt::Display for Through {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Through::Write { off, len, seed } => write!(f, "write at {off}, {len} bytes (seed {seed})"),
            Through::Append { len, seed } => write!(f, "append {len} bytes (seed {seed})"),
            Through::Truncate { size } => write!(f, "truncate to {size}"),
            Through::Fallocate { off, len, mode } => write!(f, "fallocate {off}+{len} {mode:?}"),
            Through::Fsync => write!(f, "fsync"),
            Through::Create { name } => write!(f, "create {name} in it"),
            Through::Close => write!(f, "close"),
        }
    }
}
