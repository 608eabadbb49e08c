//! Workloads: the operations the explorer interrupts, the small fixed tree they start from
//! (after ACE, the workload generator of CrashMonkey), and random longer sequences in which
//! most operations succeed (the named operations of its sequences of one and two are in
//! `named.rs`).

#![forbid(unsafe_code)]

use super::descriptors::{Descriptors, OpenAs, Through};
use super::snapshot::Lagging;
use crate::fs::api::{FallocateMode, File};
use crate::layout::Ino;
use crate::pm::PmDevice;
use crate::{FileSystem, OpenOptions, RenameMode, Result, SetAttr, SetTime};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::fmt;
use std::path::Path;

/// One file-system operation with all its arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Create {
        path: String,
    },
    Mkdir {
        path: String,
    },
    /// A write into an existing file (not created by it).
    Write {
        path: String,
        off: u64,
        len: usize,
        seed: u8,
    },
    Append {
        path: String,
        len: usize,
        seed: u8,
    },
    /// An untorn write (`File::write_atomic_at`) at `off`, or at the end of file (None).
    Untorn {
        path: String,
        off: Option<u64>,
        len: usize,
        seed: u8,
    },
    Truncate {
        path: String,
        size: u64,
    },
    Fallocate {
        path: String,
        off: u64,
        len: u64,
    },
    Punch {
        path: String,
        off: u64,
        len: u64,
    },
    /// fallocate(ZERO_RANGE), with KEEP_SIZE or not.
    ZeroRange {
        path: String,
        off: u64,
        len: u64,
        keep_size: bool,
    },
    Link {
        from: String,
        to: String,
    },
    Symlink {
        target: String,
        path: String,
    },
    Unlink {
        path: String,
    },
    /// Open, unlink, close: the space is freed at the close.
    UnlinkOpen {
        path: String,
    },
    Rmdir {
        path: String,
    },
    Rename {
        from: String,
        to: String,
        mode: RenameMode,
    },
    Chmod {
        path: String,
        perm: u32,
    },
    Chown {
        path: String,
        uid: u32,
        gid: u32,
    },
    Utimens {
        path: String,
        atime: i64,
        mtime: i64,
    },
    Fsync {
        path: String,
    },
    /// setxattr (`len` bytes of `data_for(seed)`) with flags `mode`.
    SetXattr {
        path: String,
        name: String,
        len: usize,
        seed: u8,
    },
    RemoveXattr {
        path: String,
        name: String,
    },
    /// mknod: a FIFO, device (with its number) or socket.
    Mknod {
        path: String,
        ftype: crate::FileType,
        rdev: u64,
    },
    /// A clean unmount's work (`FileSystem::shutdown`): times still in DRAM stored,
    /// one-fence appends' sizes made plain, the clean flag last. Nothing a user sees
    /// changes; a crash part way must recover to the same tree. Last in a workload (the
    /// image is clean afterwards).
    Unmount,
    /// A clean unmount, then a mount of the same image (its superblock written, its caches
    /// built again from the media): what follows runs on the new mount. Crashed in both
    /// halves; nothing a user sees changes.
    Remount,
    /// `sync`/`syncfs` (`FileSystem::sync`): the times writes left in DRAM stored.
    Sync,
    /// ctFS's pswap (`File::swap_pages`): `len` bytes at `off_a` of `a` and `off_b` of `b`
    /// exchange their pages.
    SwapPages {
        a: String,
        off_a: u64,
        b: String,
        off_b: u64,
        len: u64,
    },
    /// Opens `path` as descriptor number `fd`, which stays open for the operations after
    /// it (`descriptors.rs`): several descriptors of one file or directory at once.
    Open {
        fd: u8,
        path: String,
        how: OpenAs,
    },
    /// An operation through descriptor `fd`.
    Through {
        fd: u8,
        act: Through,
    },
}

/// The bytes a write with `seed` puts at file offset `off`: never zero, so a hole or a lost
/// write never passes for data.
pub fn data_for(seed: u8, off: u64, len: usize) -> Vec<u8> {
    (0..len as u64).map(|i| seed.wrapping_mul(31).wrapping_add(((off + i) % 253) as u8) | 1).collect()
}

fn p(s: &str) -> &Path {
    Path::new(s)
}

/// Writes `len` bytes of `data_for(seed)` at `off` of `f`, in as many calls as it takes.
pub(super) fn write_all<D: PmDevice>(f: &File<D>, off: u64, len: usize, seed: u8) -> Result<()> {
    let data = data_for(seed, off, len);
    let mut done = 0;
    while done < data.len() {
        done += f.write_at(off + done as u64, &data[done..])?;
    }
    Ok(())
}

/// Appends `len` bytes of `data_for(seed)` (at the offset they land at) to `f`.
pub(super) fn append_seeded<D: PmDevice>(f: &File<D>, len: usize, seed: u8) -> Result<()> {
    f.append(&data_for(seed, f.metadata()?.size, len)).map(drop)
}

impl Op {
    /// Whether, run on `fs` as it is now, the operation may be interrupted part way
    /// (relaxed mode): a write over blocks already mapped (bytes old or new), a hole punch
    /// (bytes old or zero), fallocate (one transaction per run of holes), and a write too
    /// large for one transaction (a prefix of it, the size growing at each). A smaller
    /// write that maps only new blocks (past EOF or into holes) appears whole or not at all,
    /// and so does an untorn write, and in strict mode every write of up to the untorn
    /// limit.
    pub fn is_torn_on<D: PmDevice>(&self, fs: &FileSystem<D>, fds: &Descriptors<D>) -> bool {
        let strict = fs.write_mode() == crate::WriteMode::Strict;
        let write = |off: u64, len: usize| {
            if strict && len as u64 <= fs.untorn_write_max() {
                return false;
            }
            if len >= MULTI_TX_WRITE {
                return true;
            }
            let Some(ino) = self.target(fs, fds) else { return false };
            let last = (off + len as u64).saturating_sub(1) / crate::layout::BLOCK_BYTES;
            (off / crate::layout::BLOCK_BYTES..=last)
                .any(|l| fs.physical_block(ino, crate::layout::Lblk(l)).is_ok_and(|b| b.is_some()))
        };
        match self {
            Op::Punch { .. } | Op::Fallocate { .. } | Op::ZeroRange { .. } => true,
            Op::Through { act: Through::Fallocate { .. }, .. } => true,
            Op::Untorn { .. } => false,
            Op::Write { off, len, .. } | Op::Through { act: Through::Write { off, len, .. }, .. } => write(*off, *len),
            _ => false,
        }
    }

    /// The inode the operation works on, where the checks above need it: a path's or a
    /// descriptor's.
    fn target<D: PmDevice>(&self, fs: &FileSystem<D>, fds: &Descriptors<D>) -> Option<Ino> {
        match self {
            Op::Through { fd, .. } => fds.ino(*fd),
            Op::Write { path, .. } | Op::Append { path, .. } | Op::Untorn { path, .. } | Op::Fsync { path } => {
                fs.resolve(p(path)).ok()
            }
            _ => None,
        }
    }

    /// Whether the operation's times may lag behind its data and size after a crash, until
    /// the file's next fsync: a relaxed-mode write or append (`fs/times.rs`), and on HashFS
    /// an untorn or strict-mode one too (its key switch inside one block keeps a relaxed
    /// overwrite's times, `fs/untorn.rs`).
    pub fn times_may_lag<D: PmDevice>(&self, fs: &FileSystem<D>) -> bool {
        let hashfs = fs.mapping() == crate::layout::MappingKind::HashFs;
        match self {
            Op::Write { .. }
            | Op::Append { .. }
            | Op::Through { act: Through::Write { .. } | Through::Append { .. }, .. } => {
                fs.write_mode() == crate::WriteMode::Relaxed || hashfs
            }
            Op::Untorn { .. } => hashfs,
            _ => false,
        }
    }

    /// Before the operation runs as operation `k`: a write whose times may lag adds its
    /// file to `lag` (its times may be those of any state from `k` on).
    pub fn start_lag<D: PmDevice>(&self, fs: &FileSystem<D>, fds: &Descriptors<D>, lag: &mut Lagging, k: usize) {
        if let (true, Some(ino)) = (self.times_may_lag(fs), self.target(fs, fds)) {
            lag.entry(ino.0).or_insert(k);
        }
    }

    /// After the operation ran (`ok`: it succeeded): an fsync made its file's times durable.
    pub fn end_lag<D: PmDevice>(&self, fs: &FileSystem<D>, fds: &Descriptors<D>, lag: &mut Lagging, ok: bool) {
        match (ok, self) {
            (true, Op::Unmount | Op::Remount | Op::Sync) => lag.clear(), // each stores every file's times
            (true, Op::Fsync { .. } | Op::Through { act: Through::Fsync, .. }) => {
                if let Some(ino) = self.target(fs, fds) {
                    lag.remove(&ino.0);
                }
            }
            _ => {}
        }
    }

    /// Runs the operation (`fds`: the descriptors the workload holds open).
    pub fn apply<D: PmDevice>(&self, fs: &FileSystem<D>, fds: &mut Descriptors<D>) -> Result<()> {
        let rw = || OpenOptions::new().read(true).write(true).clone();
        match self {
            Op::Create { path } => fs.open_file(p(path), OpenOptions::new().write(true).create_new(true)).map(drop),
            Op::Mkdir { path } => fs.create_dir(p(path), 0o755).map(drop),
            Op::Write { path, off, len, seed } => write_all(&fs.open_file(p(path), &rw())?, *off, *len, *seed),
            Op::Append { path, len, seed } => {
                append_seeded(&fs.open_file(p(path), OpenOptions::new().append(true))?, *len, *seed)
            }
            Op::Untorn { path, off, len, seed } => {
                let f = fs.open_file(p(path), OpenOptions::new().write(true).append(off.is_none()))?;
                let at = match off {
                    Some(o) => *o,
                    None => f.metadata()?.size,
                };
                f.write_atomic_at(at, &data_for(*seed, at, *len)).map(drop)
            }
            Op::Truncate { path, size } => fs.open_file(p(path), &rw())?.set_len(*size),
            Op::Fallocate { path, off, len } => {
                fs.open_file(p(path), &rw())?.fallocate(*off, *len, FallocateMode::Allocate)
            }
            Op::Punch { path, off, len } => {
                fs.open_file(p(path), &rw())?.fallocate(*off, *len, FallocateMode::PunchHole)
            }
            Op::ZeroRange { path, off, len, keep_size } => {
                let mode = if *keep_size { FallocateMode::ZeroRangeKeepSize } else { FallocateMode::ZeroRange };
                fs.open_file(p(path), &rw())?.fallocate(*off, *len, mode)
            }
            Op::Link { from, to } => fs.hard_link(p(from), p(to)),
            Op::Symlink { target, path } => fs.symlink(p(target), p(path)),
            Op::Unlink { path } => fs.remove_file(p(path)),
            Op::UnlinkOpen { path } => {
                let f = fs.open_file(p(path), OpenOptions::new().read(true))?;
                fs.remove_file(p(path))?;
                drop(f);
                Ok(())
            }
            Op::Rmdir { path } => fs.remove_dir(p(path)),
            Op::Rename { from, to, mode } => fs.rename_with(p(from), p(to), *mode),
            Op::Chmod { path, perm } => fs.set_permissions(p(path), *perm),
            Op::Chown { path, uid, gid } => fs.set_owner(p(path), Some(*uid), Some(*gid)),
            Op::Utimens { path, atime, mtime } => {
                let ino = fs.resolve(p(path))?;
                let attr = SetAttr {
                    atime: Some(SetTime::At(*atime)),
                    mtime: Some(SetTime::At(*mtime)),
                    ..Default::default()
                };
                fs.setattr(ino, &attr).map(drop)
            }
            Op::Fsync { path } => fs.open_file(p(path), OpenOptions::new().read(true))?.sync_all(),
            Op::SetXattr { path, name, len, seed } => {
                let ino = fs.resolve(p(path))?;
                fs.set_xattr(ino, name.as_bytes(), &data_for(*seed, 0, *len), crate::fs::xattr::XattrMode::Any)
            }
            Op::RemoveXattr { path, name } => fs.remove_xattr(fs.resolve(p(path))?, name.as_bytes()),
            Op::Mknod { path, ftype, rdev } => {
                let (parent, name) = fs.resolve_parent(p(path))?;
                fs.mknod_at(parent, &name, *ftype, 0o640, *rdev, crate::Owner::ROOT).map(drop)
            }
            // (The explorer mounts the image again after a remount's unmount half.)
            Op::Unmount | Op::Remount => fs.shutdown(),
            Op::Sync => fs.sync(),
            Op::SwapPages { a, off_a, b, off_b, len } => {
                let fa = fs.open_file(p(a), &rw())?;
                let fb = fs.open_file(p(b), &rw())?;
                fa.swap_pages(*off_a, &fb, *off_b, *len).map(drop)
            }
            Op::Open { fd, path, how } => fds.open(fs, *fd, path, *how),
            Op::Through { fd, act } => fds.run(fs, *fd, act),
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Create { path } => write!(f, "create {path}"),
            Op::Mkdir { path } => write!(f, "mkdir {path}"),
            Op::Write { path, off, len, seed } => write!(f, "write {path} at {off}, {len} bytes (seed {seed})"),
            Op::Append { path, len, seed } => write!(f, "append {len} bytes to {path} (seed {seed})"),
            Op::Untorn { path, off: Some(off), len, seed } => {
                write!(f, "untorn write {path} at {off}, {len} bytes (seed {seed})")
            }
            Op::Untorn { path, off: None, len, seed } => write!(f, "untorn append {len} bytes to {path} (seed {seed})"),
            Op::Truncate { path, size } => write!(f, "truncate {path} to {size}"),
            Op::Fallocate { path, off, len } => write!(f, "fallocate {path} {off}+{len}"),
            Op::Punch { path, off, len } => write!(f, "punch {path} {off}+{len}"),
            Op::ZeroRange { path, off, len, keep_size } => {
                write!(f, "zero range {path} {off}+{len}{}", if *keep_size { " keep size" } else { "" })
            }
            Op::Link { from, to } => write!(f, "link {from} {to}"),
            Op::Symlink { target, path } => write!(f, "symlink {path} -> {target}"),
            Op::Unlink { path } => write!(f, "unlink {path}"),
            Op::UnlinkOpen { path } => write!(f, "open, unlink, close {path}"),
            Op::Rmdir { path } => write!(f, "rmdir {path}"),
            Op::Rename { from, to, mode } => write!(f, "rename {from} {to} ({mode:?})"),
            Op::Chmod { path, perm } => write!(f, "chmod {perm:o} {path}"),
            Op::Chown { path, uid, gid } => write!(f, "chown {uid}:{gid} {path}"),
            Op::Utimens { path, atime, mtime } => write!(f, "utimens {path} {atime} {mtime}"),
            Op::Fsync { path } => write!(f, "fsync {path}"),
            Op::Mknod { path, ftype, rdev } => write!(f, "mknod {path} {ftype:?} {rdev:#x}"),
            Op::SetXattr { path, name, len, seed } => write!(f, "setxattr {path} {name} {len} bytes (seed {seed})"),
            Op::RemoveXattr { path, name } => write!(f, "removexattr {path} {name}"),
            Op::Unmount => write!(f, "unmount"),
            Op::Remount => write!(f, "remount"),
            Op::Sync => write!(f, "sync"),
            Op::SwapPages { a, off_a, b, off_b, len } => {
                write!(f, "pswap {a} at {off_a} and {b} at {off_b}, {len} bytes")
            }
            Op::Open { fd, path, how } => write!(f, "open {path} ({how:?}) as descriptor {fd}"),
            Op::Through { fd, act } => write!(f, "through descriptor {fd}: {act}"),
        }
    }
}

/// The tree every workload starts from: two directories (one with an empty subdirectory),
/// a three-block file (with an extended attribute), a small file, a sparse file and a
/// symlink.
pub fn base_tree<D: PmDevice>(fs: &FileSystem<D>) -> Result<()> {
    fs.create_dir(p("/A"), 0o755)?;
    fs.create_dir(p("/A/sub"), 0o755)?;
    fs.create_dir(p("/B"), 0o755)?;
    fs.write(p("/A/f"), &data_for(1, 0, 10_000))?;
    let f = fs.resolve(p("/A/f"))?;
    fs.set_xattr(f, b"user.base", &data_for(4, 0, 10), crate::fs::xattr::XattrMode::Create)?;
    fs.write(p("/g"), &data_for(2, 0, 100))?;
    fs.symlink(p("/A/f"), p("/s"))?;
    let h = fs.open_file(p("/h"), OpenOptions::new().write(true).create(true))?;
    h.write_at(0, &data_for(3, 0, 4))?;
    h.write_at(40_960, &data_for(3, 40_960, 4))?;
    Ok(())
}

/// Writes of this many bytes or more may take several transactions (HashFS maps 256
/// blocks per transaction; the other mappings as many as their undo records fit in a
/// journal, fewer on the explorer's small journals).
pub const MULTI_TX_WRITE: usize = 128 << 10;

/// A workload: a name that reruns it, and its operations.
#[derive(Clone, Debug)]
pub struct Workload {
    /// `ace:NAME,NAME` or `random:SEED:INDEX`.
    pub id: String,
    pub ops: Vec<Op>,
}

impl Workload {
    /// Parses an id back into its workload.
    pub fn from_id(id: &str) -> Option<Workload> {
        if let Some(names) = id.strip_prefix("ace:") {
            let ops = names.split(',').map(super::named::ace_op).collect::<Option<Vec<Op>>>()?;
            return Some(Workload { id: id.to_string(), ops });
        }
        let mut parts = id.strip_prefix("random:")?.split(':');
        let seed = parts.next()?.parse().ok()?;
        let index = parts.next()?.parse().ok()?;
        let len = parts.next().map(|l| l.parse().ok()).unwrap_or(Some(RANDOM_LEN))?;
        Some(random_workload(seed, index, len))
    }
}

/// Operations in a random sequence.
pub const RANDOM_LEN: usize = 6;

/// A random sequence of `len` operations over a small set of paths in the base tree, each
/// chosen among candidates so that it succeeds on the state the earlier ones left (tried
/// on a scratch file system; after eight failed candidates the last is kept).
pub fn random_workload(seed: u64, index: u64, len: usize) -> Workload {
    let mut rng = SmallRng::seed_from_u64(seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let scratch = super::Scratch::new(crate::MappingKind::HashFs);
    let mut ops = Vec::new();
    for _ in 0..len {
        let mut chosen = random_op(&mut rng);
        for _ in 0..8 {
            if chosen.apply(&scratch.fs, &mut Descriptors::default()).is_ok() {
                break;
            }
            chosen = random_op(&mut rng);
        }
        ops.push(chosen);
    }
    Workload { id: format!("random:{seed}:{index}:{len}"), ops }
}

fn random_op(rng: &mut SmallRng) -> Op {
    const PATHS: [&str; 10] = ["/A/f", "/g", "/h", "/A/x", "/B/y", "/A/sub", "/B/z", "/s", "/A/sub/w", "/B"];
    let mut path = || PATHS[rng.random_range(0..PATHS.len())].to_string();
    let (a, b) = (path(), path());
    match rng.random_range(0..100) {
        0..=11 => Op::Create { path: a },
        12..=17 => Op::Mkdir { path: a },
        18..=29 => {
            let off = if rng.random_bool(0.3) { 0 } else { rng.random_range(0..12_000) };
            Op::Write { path: a, off, len: rng.random_range(1..6000), seed: rng.random() }
        }
        30..=39 => Op::Append { path: a, len: rng.random_range(1..6000), seed: rng.random() },
        40..=46 => Op::Truncate { path: a, size: rng.random_range(0..20_000) },
        47..=49 => Op::Fallocate { path: a, off: rng.random_range(0..8192), len: rng.random_range(1..12_000) },
        50..=53 => Op::Punch { path: a, off: rng.random_range(0..8192), len: rng.random_range(1..12_000) },
        54..=59 => Op::Link { from: a, to: b },
        60..=62 => Op::Symlink { target: b, path: a },
        63..=70 => Op::Unlink { path: a },
        71..=73 => Op::Rmdir { path: a },
        74..=85 => {
            let mode = [RenameMode::Replace, RenameMode::NoReplace, RenameMode::Exchange][rng.random_range(0..3)];
            Op::Rename { from: a, to: b, mode }
        }
        86..=90 => Op::Chmod { path: a, perm: rng.random_range(0..0o777) },
        91..=94 => Op::Chown { path: a, uid: rng.random_range(0..5), gid: rng.random_range(0..5) },
        95..=97 => Op::Utimens { path: a, atime: rng.random_range(0..1 << 40), mtime: rng.random_range(0..1 << 40) },
        _ => Op::Fsync { path: a },
    }
}
