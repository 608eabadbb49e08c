//! Workloads: the operations the explorer interrupts, the small fixed tree they start from
//! (after ACE, the workload generator of CrashMonkey), the named operations that make up
//! its sequences of one and two, and random longer sequences in which most operations
//! succeed.

#![forbid(unsafe_code)]

use super::snapshot::Lagging;
use crate::fs::api::FallocateMode;
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
}

/// The bytes a write with `seed` puts at file offset `off`: never zero, so a hole or a lost
/// write never passes for data.
pub fn data_for(seed: u8, off: u64, len: usize) -> Vec<u8> {
    (0..len as u64).map(|i| seed.wrapping_mul(31).wrapping_add(((off + i) % 253) as u8) | 1).collect()
}

fn p(s: &str) -> &Path {
    Path::new(s)
}

impl Op {
    /// Whether, run on `fs` as it is now, the operation may be interrupted part way
    /// (relaxed mode): a write over blocks already mapped (bytes old or new), a hole punch
    /// (bytes old or zero), fallocate (one transaction per run of holes), and a write too
    /// large for one transaction (a prefix of it, the size growing at each). A smaller
    /// write that maps only new blocks (past EOF or into holes) appears whole or not at all,
    /// and so does an untorn write, and in strict mode every write of up to the untorn
    /// limit.
    pub fn is_torn_on<D: PmDevice>(&self, fs: &FileSystem<D>) -> bool {
        let strict = fs.write_mode() == crate::WriteMode::Strict;
        match self {
            Op::Punch { .. } | Op::Fallocate { .. } | Op::ZeroRange { .. } => true,
            Op::Untorn { .. } => false,
            Op::Write { len, .. } if strict && *len as u64 <= fs.untorn_write_max() => false,
            Op::Write { len, .. } if *len >= MULTI_TX_WRITE => true,
            Op::Write { path, off, len, .. } => {
                let Ok(ino) = fs.resolve(p(path)) else { return false };
                let last = (off + *len as u64).saturating_sub(1) / crate::layout::BLOCK_BYTES;
                (off / crate::layout::BLOCK_BYTES..=last)
                    .any(|l| fs.physical_block(ino, crate::layout::Lblk(l)).is_ok_and(|b| b.is_some()))
            }
            _ => false,
        }
    }

    /// Whether the operation's times may lag behind its data and size after a crash, until
    /// the file's next fsync: a relaxed-mode write or append (`fs/times.rs`), and on HashFS
    /// an untorn or strict-mode one too (its key switch inside one block keeps a relaxed
    /// overwrite's times, `fs/untorn.rs`).
    pub fn times_may_lag<D: PmDevice>(&self, fs: &FileSystem<D>) -> bool {
        let hashfs = fs.mapping() == crate::layout::MappingKind::HashFs;
        match self {
            Op::Write { .. } | Op::Append { .. } => fs.write_mode() == crate::WriteMode::Relaxed || hashfs,
            Op::Untorn { .. } => hashfs,
            _ => false,
        }
    }

    /// Before the operation runs as operation `k`: a write whose times may lag adds its
    /// file to `lag` (its times may be those of any state from `k` on).
    pub fn start_lag<D: PmDevice>(&self, fs: &FileSystem<D>, lag: &mut Lagging, k: usize) {
        if let (true, Op::Write { path, .. } | Op::Append { path, .. } | Op::Untorn { path, .. }) =
            (self.times_may_lag(fs), self)
        {
            if let Ok(ino) = fs.resolve(p(path)) {
                lag.entry(ino.0).or_insert(k);
            }
        }
    }

    /// After the operation ran (`ok`: it succeeded): an fsync made its file's times durable.
    pub fn end_lag<D: PmDevice>(&self, fs: &FileSystem<D>, lag: &mut Lagging, ok: bool) {
        if let (true, Op::Unmount | Op::Remount | Op::Sync) = (ok, self) {
            lag.clear(); // each stores every file's times
            return;
        }
        if let (true, Op::Fsync { path }) = (ok, self) {
            if let Ok(ino) = fs.resolve(p(path)) {
                lag.remove(&ino.0);
            }
        }
    }

    /// Runs the operation.
    pub fn apply<D: PmDevice>(&self, fs: &FileSystem<D>) -> Result<()> {
        let rw = || OpenOptions::new().read(true).write(true).clone();
        match self {
            Op::Create { path } => fs.open_file(p(path), OpenOptions::new().write(true).create_new(true)).map(drop),
            Op::Mkdir { path } => fs.create_dir(p(path), 0o755).map(drop),
            Op::Write { path, off, len, seed } => {
                let f = fs.open_file(p(path), &rw())?;
                let data = data_for(*seed, *off, *len);
                let mut done = 0;
                while done < data.len() {
                    done += f.write_at(off + done as u64, &data[done..])?;
                }
                Ok(())
            }
            Op::Append { path, len, seed } => {
                let f = fs.open_file(p(path), OpenOptions::new().append(true))?;
                let off = f.metadata()?.size;
                f.append(&data_for(*seed, off, *len)).map(drop)
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

/// A 200-byte name: seven directory slots, spanning four cache lines.
const LONG_NAME: &str = "a-name-long-enough-to-take-several-directory-slots-and-cross-cache-lines-0123456789abcdefghijklmnopqrstuvwxyz-0123456789abcdefghijklmnopqrstuvwxyz-0123456789abcdefghijklmnopqrstuvwxyz-0123456789abcdef";

/// Operations on the whole mount, named in `--workload` sequences only (not paired by
/// `--seq`): a clean unmount (last), an unmount and mount, a sync.
pub const MOUNT_OPS: &[&str] = &["unmount", "remount", "sync"];

/// The named operations over [`base_tree`] that sequences are built from.
pub const ACE_OPS: &[&str] = &[
    "create",
    "create-long",
    "mkdir",
    "append",
    "append-small",
    "append-cross",
    "overwrite-tail",
    "overwrite",
    "overwrite-small",
    "write-past-eof",
    "fill-hole",
    "truncate-up",
    "truncate-down",
    "fallocate",
    "punch",
    "link",
    "symlink",
    "unlink",
    "unlink-open",
    "rmdir",
    "rename",
    "rename-across",
    "rename-replace",
    "rename-dir",
    "rename-long",
    "exchange",
    "chmod",
    "chown",
    "utimens",
    "fsync",
    "mkfifo",
    "mknod-char",
    "setxattr",
    "setxattr-big",
    "setxattr-replace",
    "removexattr",
    "zero-range",
    "zero-range-grow",
];

/// Named untorn writes (`File::write_atomic_at`): inside a block, a whole block, across blocks, an
/// append, over mapped blocks and holes growing the file, and one of 64 KiB spanning 17
/// blocks (the block mappings' limit on the explorer's small journals).
pub const UNTORN_OPS: &[&str] =
    &["untorn-small", "untorn-block", "untorn-overwrite", "untorn-append", "untorn-hole", "untorn-limit"];

/// Named pswaps (`ctfs` images): data pages of one file with holes of another, a file's
/// own pages, and a range past the small file's partition (after `truncate-up`, which
/// makes it large enough; alone it fails and changes nothing) whose swap moves the file
/// to a larger partition in the same transaction. And untorn writes larger than the
/// copy-on-write path takes (64 KiB on the explorer's journals), which are staged and
/// pswapped (`fs/ctfs/untorn_pswap.rs`): an overwrite growing the file, and an append that moves
/// the small file to a larger partition.
pub const PSWAP_OPS: &[&str] = &["pswap", "pswap-self", "pswap-grow", "untorn-pswap", "untorn-pswap-append"];

/// Writes of this many bytes or more may take several transactions (HashFS maps 256
/// blocks per transaction; the other mappings as many as their undo records fit in a
/// journal, fewer on the explorer's small journals).
pub const MULTI_TX_WRITE: usize = 128 << 10;

/// Named operations that write whole 2 MiB chunks (the grouped placement's claims), for
/// images of 8 MiB ([`super::image_bytes`]).
pub const CHUNK_OPS: &[&str] = &["fallocate-chunk", "write-chunk", "grow-chunk", "truncate-chunk", "punch-chunk"];

/// The operation a name of [`ACE_OPS`], [`UNTORN_OPS`], [`CHUNK_OPS`] or [`PSWAP_OPS`]
/// stands for.
pub fn ace_op(name: &str) -> Option<Op> {
    let s = |x: &str| x.to_string();
    Some(match name {
        "create" => Op::Create { path: s("/A/new") },
        // A name of several directory slots, across cache lines.
        "create-long" => Op::Create { path: format!("/A/{}", LONG_NAME) },
        "mkdir" => Op::Mkdir { path: s("/B/newdir") },
        "append" => Op::Append { path: s("/g"), len: 5000, seed: 11 },
        // Appends of less than 4 KiB take one fence on HashFS (`fs/hashfs/append_tag.rs`): inside
        // the small file's block, and across into a new one.
        "append-small" => Op::Append { path: s("/g"), len: 200, seed: 31 },
        "append-cross" => Op::Append { path: s("/g"), len: 4050, seed: 32 },
        // Over the bytes `append-small` adds, and on past the end: the tagged size must be
        // plain before they change.
        "overwrite-tail" => Op::Write { path: s("/g"), off: 200, len: 400, seed: 33 },
        "overwrite" => Op::Write { path: s("/A/f"), off: 1000, len: 6000, seed: 12 },
        // More than the copy-on-write path's untorn limit on the explorer's journals (not
        // in ACE_OPS: strict mode's, where ctfs stages and pswaps it whole).
        "overwrite-large" => Op::Write { path: s("/A/f"), off: 100, len: 100 << 10, seed: 29 },
        "overwrite-small" => Op::Write { path: s("/g"), off: 10, len: 50, seed: 13 },
        "write-past-eof" => Op::Write { path: s("/g"), off: 9000, len: 3, seed: 14 },
        "fill-hole" => Op::Write { path: s("/h"), off: 8192, len: 4096, seed: 15 },
        "untorn-small" => Op::Untorn { path: s("/g"), off: Some(10), len: 50, seed: 21 },
        "untorn-block" => Op::Untorn { path: s("/A/f"), off: Some(4096), len: 4096, seed: 26 },
        "untorn-overwrite" => Op::Untorn { path: s("/A/f"), off: Some(1000), len: 6000, seed: 22 },
        "untorn-append" => Op::Untorn { path: s("/g"), off: None, len: 5000, seed: 23 },
        "untorn-hole" => Op::Untorn { path: s("/h"), off: Some(4000), len: 40_000, seed: 24 },
        "untorn-limit" => Op::Untorn { path: s("/A/f"), off: Some(100), len: 64 << 10, seed: 25 },
        "truncate-up" => Op::Truncate { path: s("/g"), size: 50_000 },
        "truncate-down" => Op::Truncate { path: s("/A/f"), size: 100 },
        "fallocate" => Op::Fallocate { path: s("/g"), off: 0, len: 16_384 },
        "punch" => Op::Punch { path: s("/A/f"), off: 100, len: 9000 },
        "link" => Op::Link { from: s("/A/f"), to: s("/B/f2") },
        // After `link`: a rename between two names of one inode, which POSIX makes a no-op
        // (NotFound, and so nothing, without the link).
        "rename-over-link" => Op::Rename { from: s("/B/f2"), to: s("/A/f"), mode: RenameMode::Replace },
        "symlink" => Op::Symlink { target: s("../g"), path: s("/A/ln") },
        "unlink" => Op::Unlink { path: s("/A/f") },
        "unlink-open" => Op::UnlinkOpen { path: s("/A/f") },
        "rmdir" => Op::Rmdir { path: s("/A/sub") },
        "rename" => Op::Rename { from: s("/A/f"), to: s("/A/f2"), mode: RenameMode::Replace },
        "rename-across" => Op::Rename { from: s("/A/f"), to: s("/B/f"), mode: RenameMode::Replace },
        "rename-replace" => Op::Rename { from: s("/g"), to: s("/A/f"), mode: RenameMode::Replace },
        "rename-dir" => Op::Rename { from: s("/A/sub"), to: s("/B/sub"), mode: RenameMode::Replace },
        "rename-long" => Op::Rename { from: s("/g"), to: format!("/B/{}", LONG_NAME), mode: RenameMode::Replace },
        "exchange" => Op::Rename { from: s("/A/f"), to: s("/g"), mode: RenameMode::Exchange },
        "chmod" => Op::Chmod { path: s("/g"), perm: 0o600 },
        "chown" => Op::Chown { path: s("/g"), uid: 7, gid: 8 },
        "utimens" => Op::Utimens { path: s("/g"), atime: 5_000_000_000, mtime: 6_000_000_000 },
        "fsync" => Op::Fsync { path: s("/A/f") },
        // The small file's, after an append to it (not in ACE_OPS: for sequences by name).
        "fsync-g" => Op::Fsync { path: s("/g") },
        "mkfifo" => Op::Mknod { path: s("/A/fifo"), ftype: crate::FileType::Fifo, rdev: 0 },
        "mknod-char" => Op::Mknod { path: s("/B/tty"), ftype: crate::FileType::CharDevice, rdev: libc::makedev(4, 64) },
        "setxattr" => Op::SetXattr { path: s("/g"), name: s("user.new"), len: 100, seed: 16 },
        // A blob of several blocks.
        "setxattr-big" => Op::SetXattr { path: s("/A/f"), name: s("user.big"), len: 20_000, seed: 17 },
        "setxattr-replace" => Op::SetXattr { path: s("/A/f"), name: s("user.base"), len: 3000, seed: 18 },
        "removexattr" => Op::RemoveXattr { path: s("/A/f"), name: s("user.base") },
        // Over mapped blocks and part of the sparse file's hole, keeping the size.
        "zero-range" => Op::ZeroRange { path: s("/A/f"), off: 100, len: 9000, keep_size: true },
        "zero-range-grow" => Op::ZeroRange { path: s("/h"), off: 4000, len: 50_000, keep_size: false },
        // Whole 2 MiB chunks: a preallocation past EOF, a write over a sparse file's hole
        // and its one mapped block (claims, and the transactions that fill them), then a
        // truncate into the middle of a chunk and a punch of part of one (drops).
        "fallocate-chunk" => Op::Fallocate { path: s("/g"), off: 0, len: (2 << 20) + 4096 },
        "write-chunk" => Op::Write { path: s("/h"), off: 0, len: 2 << 20, seed: 19 },
        // A large file growing into its second chunk in a piece smaller than a chunk: the
        // chunk is claimed, 16 of its blocks filled (`FsInner::claim_span`).
        "grow-chunk" => Op::Write { path: s("/h"), off: 2 << 20, len: 64 << 10, seed: 30 },
        "unmount" => Op::Unmount,
        "remount" => Op::Remount,
        "sync" => Op::Sync,
        "pswap" => Op::SwapPages { a: s("/A/f"), off_a: 0, b: s("/h"), off_b: 4096, len: 8192 },
        "pswap-self" => Op::SwapPages { a: s("/h"), off_a: 0, b: s("/h"), off_b: 36_864, len: 4096 },
        "untorn-pswap" => Op::Untorn { path: s("/A/f"), off: Some(100), len: 100 << 10, seed: 27 },
        "untorn-pswap-append" => Op::Untorn { path: s("/g"), off: None, len: 80 << 10, seed: 28 },
        "pswap-grow" => Op::SwapPages { a: s("/g"), off_a: 8192, b: s("/A/f"), off_b: 0, len: 8192 },
        "truncate-chunk" => Op::Truncate { path: s("/h"), size: 1 << 20 },
        "punch-chunk" => Op::Punch { path: s("/h"), off: 4096, len: (2 << 20) - 8192 },
        _ => return None,
    })
}

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
            let ops = names.split(',').map(ace_op).collect::<Option<Vec<Op>>>()?;
            return Some(Workload { id: id.to_string(), ops });
        }
        let mut parts = id.strip_prefix("random:")?.split(':');
        let seed = parts.next()?.parse().ok()?;
        let index = parts.next()?.parse().ok()?;
        let len = parts.next().map(|l| l.parse().ok()).unwrap_or(Some(RANDOM_LEN))?;
        Some(random_workload(seed, index, len))
    }
}

/// Every sequence of one, or of one and two, of `names`.
pub fn ace_workloads(names: &[&str], seq: usize) -> Vec<Workload> {
    let mut out: Vec<Workload> = names.iter().map(|n| Workload::from_id(&format!("ace:{n}")).expect("known")).collect();
    if seq >= 2 {
        for a in names {
            for b in names {
                out.push(Workload::from_id(&format!("ace:{a},{b}")).expect("known"));
            }
        }
    }
    out
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
            if chosen.apply(&scratch.fs).is_ok() {
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
