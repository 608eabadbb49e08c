//! The named operations over [`base_tree`](super::workload::base_tree) that the explorer's
//! sequences are made of (`ace:NAME,NAME`), after ACE, CrashMonkey's workload generator:
//! each name stands for one operation with fixed arguments.

#![forbid(unsafe_code)]

use super::descriptors::{OpenAs, Through};
use super::workload::{Op, Workload};
use crate::fs::api::FallocateMode;
use crate::pm::PmDevice;
use crate::{FileSystem, RenameMode, Result};
use std::path::Path;

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
    "unlink-small",
    "rmdir",
    "rename",
    "rename-across",
    "rename-replace",
    "rename-over-small",
    "rename-dir",
    "rename-long",
    "exchange",
    "chmod",
    "chown",
    "chown-same",
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
        // A file with no attribute, which the death model's survivor does not hold open:
        // on HashFS freed in the unlink's own transaction (`fs/hashfs/unlink.rs`).
        "unlink-small" => Op::Unlink { path: s("/g") },
        "rmdir" => Op::Rmdir { path: s("/A/sub") },
        "rename" => Op::Rename { from: s("/A/f"), to: s("/A/f2"), mode: RenameMode::Replace },
        "rename-across" => Op::Rename { from: s("/A/f"), to: s("/B/f"), mode: RenameMode::Replace },
        "rename-replace" => Op::Rename { from: s("/g"), to: s("/A/f"), mode: RenameMode::Replace },
        // The replaced file has no attribute and the death model's survivor does not hold it:
        // on HashFS freed in the rename's own transaction (`fs/hashfs/unlink.rs`).
        "rename-over-small" => Op::Rename { from: s("/A/f"), to: s("/g"), mode: RenameMode::Replace },
        "rename-dir" => Op::Rename { from: s("/A/sub"), to: s("/B/sub"), mode: RenameMode::Replace },
        "rename-long" => Op::Rename { from: s("/g"), to: format!("/B/{}", LONG_NAME), mode: RenameMode::Replace },
        "exchange" => Op::Rename { from: s("/A/f"), to: s("/g"), mode: RenameMode::Exchange },
        "chmod" => Op::Chmod { path: s("/g"), perm: 0o600 },
        "chown" => Op::Chown { path: s("/g"), uid: 7, gid: 8 },
        // To the owner the file has (the base tree's files are this process's): only the
        // change time moves, stored in place (`fs/ops.rs` setattr).
        "chown-same" => {
            let o = crate::fs::ops::Owner::current();
            Op::Chown { path: s("/g"), uid: o.uid, gid: o.gid }
        }
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
        _ => return descriptor_op(name).or_else(|| largest_op(name)),
    })
}

/// Named operations through descriptors a workload holds open (`descriptors.rs`): two
/// read-write descriptors of the three-block file and one with O_APPEND, two of the empty
/// subdirectory; not in ACE_OPS (an `fdN-…` operation fails, changing nothing, unless its
/// `fdN-open` came first).
pub const DESCRIPTOR_OPS: &[&str] = &[
    "fd1-open",
    "fd2-open",
    "fd3-open-append",
    "fd1-write",
    "fd2-truncate",
    "fd2-fallocate",
    "fd2-punch",
    "fd3-append",
    "fd1-fsync",
    "fd1-close",
    "fd2-close",
    "fd3-close",
    "dir1-open",
    "dir2-open",
    "dir1-create",
    "dir2-create",
    "dir1-close",
    "dir2-close",
    "unlink-sub-x",
    "unlink-sub-y",
];

fn descriptor_op(name: &str) -> Option<Op> {
    let open = |fd, path: &str, how| Op::Open { fd, path: path.to_string(), how };
    let through = |fd, act| Op::Through { fd, act };
    Some(match name {
        "fd1-open" => open(1, "/A/f", OpenAs::ReadWrite),
        "fd2-open" => open(2, "/A/f", OpenAs::ReadWrite),
        "fd3-open-append" => open(3, "/A/f", OpenAs::Append),
        // Across the second and third blocks, past the end a truncate through fd2 left.
        "fd1-write" => through(1, Through::Write { off: 6000, len: 3000, seed: 40 }),
        "fd2-truncate" => through(2, Through::Truncate { size: 100 }),
        "fd2-fallocate" => through(2, Through::Fallocate { off: 8192, len: 16_384, mode: FallocateMode::Allocate }),
        "fd2-punch" => through(2, Through::Fallocate { off: 0, len: 8192, mode: FallocateMode::PunchHole }),
        "fd3-append" => through(3, Through::Append { len: 3000, seed: 41 }),
        "fd1-fsync" => through(1, Through::Fsync),
        "fd1-close" => through(1, Through::Close),
        "fd2-close" => through(2, Through::Close),
        "fd3-close" => through(3, Through::Close),
        "dir1-open" => open(4, "/A/sub", OpenAs::Directory),
        "dir2-open" => open(5, "/A/sub", OpenAs::Directory),
        "dir1-create" => through(4, Through::Create { name: "x".to_string() }),
        "dir2-create" => through(5, Through::Create { name: "y".to_string() }),
        "dir1-close" => through(4, Through::Close),
        "dir2-close" => through(5, Through::Close),
        "unlink-sub-x" => Op::Unlink { path: "/A/sub/x".to_string() },
        "unlink-sub-y" => Op::Unlink { path: "/A/sub/y".to_string() },
        _ => return None,
    })
}

/// The longest name a directory entry holds (NAME_MAX): `tag`, then `-` to 255 bytes.
pub fn name_max(tag: &str) -> String {
    format!("{tag:-<255}")
}

/// The longest symlink target (PATH_MAX less its NUL), over a block: 4,095 bytes that
/// lead to the three-block file (`/./././…/A/f`).
fn long_target() -> String {
    let t = format!("/{}/A/f", "./".repeat(2045));
    debug_assert_eq!(t.len(), 4095);
    t
}

/// Links of the small file in the large directory (`/D`) of [`large_directory`]: with
/// names of 255 bytes (9 slots each, 14 to a block), 5 blocks.
pub const LARGE_DIRECTORY_LINKS: usize = 64;

/// Named operations at the largest sizes: names of 255 bytes, a symlink target of 4,095
/// bytes, changes in a directory of many blocks (`/D`, made by [`large_directory`]; on
/// the base tree alone those fail, changing nothing), and a sparse file past 4 GiB (byte
/// offsets past 32 bits, logical blocks past 2^20): a write across the 4 GiB boundary
/// into the small file, a truncate of the three-block file up past 5 GiB, and after the
/// write, a punch, a shrink and an untorn write past 4 GiB (each also runs alone, on the
/// small file).
pub const LARGEST_OPS: &[&str] = &[
    "create-max",
    "rename-max",
    "link-max",
    "symlink-max",
    "big-dir-create",
    "big-dir-unlink",
    "big-dir-rename-out",
    "big-dir-rename-in",
    "big-dir-replace",
    "write-past-4g",
    "truncate-past-4g",
    "punch-past-4g",
    "shrink-past-4g",
    "untorn-past-4g",
];

/// 4 GiB: offsets past it need more than 32 bits.
const G4: u64 = 1 << 32;

fn largest_op(name: &str) -> Option<Op> {
    let s = |x: &str| x.to_string();
    let d = |i: usize| format!("/D/{}", name_max(&format!("link{i}")));
    let mid = LARGE_DIRECTORY_LINKS / 2;
    Some(match name {
        "create-max" => Op::Create { path: format!("/A/{}", name_max("new")) },
        "rename-max" => {
            Op::Rename { from: s("/g"), to: format!("/B/{}", name_max("renamed")), mode: RenameMode::Replace }
        }
        "link-max" => Op::Link { from: s("/A/f"), to: format!("/B/{}", name_max("linked")) },
        "symlink-max" => Op::Symlink { target: long_target(), path: s("/A/long-target") },
        "big-dir-create" => Op::Create { path: format!("/D/{}", name_max("new")) },
        "big-dir-unlink" => Op::Unlink { path: d(mid) },
        "big-dir-rename-out" => {
            Op::Rename { from: d(mid), to: format!("/B/{}", name_max("out")), mode: RenameMode::Replace }
        }
        "big-dir-rename-in" => {
            Op::Rename { from: s("/A/f"), to: format!("/D/{}", name_max("in")), mode: RenameMode::Replace }
        }
        // A name of the small file replaced by the three-block one: the small file loses a link.
        "big-dir-replace" => Op::Rename { from: s("/A/f"), to: d(mid + 1), mode: RenameMode::Replace },
        "write-past-4g" => Op::Write { path: s("/g"), off: G4 - 100, len: 5000, seed: 42 },
        "truncate-past-4g" => Op::Truncate { path: s("/A/f"), size: 5 * (G4 / 4) + 7 },
        "punch-past-4g" => Op::Punch { path: s("/g"), off: G4, len: 4096 },
        "shrink-past-4g" => Op::Truncate { path: s("/g"), size: G4 + 10 },
        "untorn-past-4g" => Op::Untorn { path: s("/g"), off: Some(G4 + 10), len: 50, seed: 43 },
        _ => return None,
    })
}

/// Adds to the base tree a directory `/D` of many blocks: [`LARGE_DIRECTORY_LINKS`] links
/// of the small file `/g` with names of 255 bytes.
pub fn large_directory<D: PmDevice>(fs: &FileSystem<D>) -> Result<()> {
    fs.create_dir(Path::new("/D"), 0o755)?;
    for i in 0..LARGE_DIRECTORY_LINKS {
        fs.hard_link(Path::new("/g"), Path::new(&format!("/D/{}", name_max(&format!("link{i}")))))?;
    }
    Ok(())
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
