//! fsck's check, pass by pass: superblocks, journals (rolled back in the caller's view),
//! inodes, the mapping (its own pass, beside it: `fs/hashfs/fsck.rs` for the HashFS
//! table, `fs/blocks/fsck.rs` for an allocator mapping and its bitmap),
//! directories, reachability from the root, extended attributes, and per-inode counts.
//! Each pass reads the image and what the earlier passes found, and adds findings; none
//! writes (check mode runs on a copy-on-write overlay).

use super::{Finding, Fix, FsckVerbs};
use crate::fs::dir::{parse_block, Run};
use crate::fs::inode::read_raw;
use crate::fs::verbs::on_map;
use crate::fs::Progress;
use crate::journal;
use crate::layout::dirent::{FileType, SLOTS_PER_BLOCK};
use crate::layout::inode::{InodeRaw, InodeState};
use crate::layout::superblock::{FORMAT_ZEROED_TAILS, SB_PRIMARY_OFF, SB_SECONDARY_OFF};
use crate::layout::{Geometry, HashPlacement, Ino, Lblk, MappingKind, Pblk, Superblock, BLOCK_BYTES, SB_STATE_CLEAN};
use crate::mapping::FileMap;
use crate::pm::{DevOffset, PmDevice};
use crate::Result;
use bytemuck::Zeroable;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// Inodes in use, blocks in use, directories.
pub(super) type Stats = (u64, u64, u64);

/// The findings so far; what a crash leaves (fixed by a mount) is marked pending.
#[derive(Default)]
pub(crate) struct Findings(pub Vec<Finding>);

impl Findings {
    pub(crate) fn add(&mut self, what: String, fix: Fix) {
        let pending = matches!(fix, Fix::Mount);
        self.0.push(Finding { what, fix, pending })
    }
}

/// Runs every pass over the image on `dev`.
pub(super) fn check<D: PmDevice>(dev: Arc<D>, progress: Progress<'_>) -> Result<(Vec<Finding>, Stats)> {
    let mut out = Findings::default();
    let Some((sb, geo)) = superblocks(&*dev, &mut out) else { return Ok((out.0, (0, 0, 0))) };
    let dirty = sb.state != SB_STATE_CLEAN;
    journals(&*dev, &geo, &mut out)?;
    let map = FileMap::open(dev.clone(), &geo, &sb)?;
    if dirty {
        on_map!(map map, m => m.settle_appends(&dev, &geo, &mut out))?;
    }
    let (inodes, used_inodes) = read_inodes(&*dev, &geo, progress, &mut out);
    if !inodes[1].is_some_and(|r| r.is_dir()) {
        out.add("root inode is missing or not a directory".into(), Fix::None);
        return Ok((out.0, (used_inodes, 0, 0)));
    }
    let mut counts = vec![0u64; inodes.len()];
    let used_blocks = on_map!(map map, m => m.check(&geo, &inodes, &mut counts, dirty, progress, &mut out));
    summary(&sb, used_inodes, used_blocks, &mut out);
    let tree = directories(&*dev, &geo, &map, &inodes, &mut out);
    let mut reached = reachability(&inodes, &tree.children);
    let xattr_owner = xattrs(&*dev, &geo, &map, &inodes, &mut reached, &mut out);
    per_inode(&inodes, &tree, &reached, &xattr_owner, &counts, dirty, &mut out);
    // Before format 6 they could be stale; a mount zeroes them.
    eof_tails(&*dev, &geo, &map, &inodes, dirty || sb.format_version < FORMAT_ZEROED_TAILS, &mut out);
    Ok((out.0, (used_inodes, used_blocks, tree.directories)))
}

/// The counts the last clean unmount left (`Superblock::summary`), against the tables': a
/// shared mount's first participant takes them instead of scanning. HashFS's table counts
/// its keys (with the paper placement, the only one shared; the others count their groups'
/// slots too).
fn summary(sb: &Superblock, used_inodes: u64, used_blocks: u64, out: &mut Findings) {
    let Some(s) = sb.summary() else { return };
    let paper = sb.mapping_kind == MappingKind::HashFs as u32 && sb.placement == HashPlacement::Paper as u32;
    if s.inodes != used_inodes || (paper && s.slots != used_blocks) {
        out.add(
            format!(
                "superblock: the last clean unmount counted {} inodes and {} table slots in use, the tables hold \
                 {used_inodes} and {used_blocks}",
                s.inodes, s.slots
            ),
            Fix::ForgetSummary,
        );
    }
}

/// Both superblock copies; the one to trust and its geometry, or None if neither is valid.
fn superblocks<D: PmDevice>(dev: &D, out: &mut Findings) -> Option<(Superblock, Geometry)> {
    let read = |off| {
        let mut sb = Superblock::zeroed();
        dev.read(off, bytemuck::bytes_of_mut(&mut sb));
        sb
    };
    if dev.len_bytes() < 2 * BLOCK_BYTES {
        out.add(format!("image of {} bytes is too small to be a HashFS image", dev.len_bytes()), Fix::None);
        return None;
    }
    let (p, s) = (read(SB_PRIMARY_OFF), read(SB_SECONDARY_OFF));
    let (pv, sv) = (p.validate(dev.len_bytes()), s.validate(dev.len_bytes()));
    match (&pv, &sv) {
        (Ok(g), _) => {
            if sv.is_err() || s != p {
                let why = sv.as_ref().err().map(|e| e.to_string()).unwrap_or_else(|| "differs from the primary".into());
                out.add(format!("superblock copy: {why}"), Fix::SecondarySuperblockFromPrimary);
            }
            Some((p, *g))
        }
        (Err(e), Ok(g)) => {
            out.add(format!("primary superblock: {e} (the copy is good)"), Fix::PrimarySuperblockFromCopy);
            Some((s, *g))
        }
        (Err(e), Err(_)) => {
            out.add(format!("no valid superblock: {e}"), Fix::None);
            None
        }
    }
}

/// Journal headers, and the rollback of pending transactions (on the caller's device:
/// in check mode, the overlay).
fn journals<D: PmDevice>(dev: &D, geo: &Geometry, out: &mut Findings) -> Result<()> {
    let mut journals_ok = true;
    for st in &journal::inspect(dev, geo) {
        if !st.header_ok {
            out.add(format!("journal {}: header corrupt", st.index), Fix::ResetJournal(st.index));
            journals_ok = false;
        } else if st.active_txid != 0 {
            out.add(
                format!("journal {}: uncommitted transaction {} (recovery rolls it back)", st.index, st.active_txid),
                Fix::Mount,
            );
        }
    }
    if journals_ok {
        journal::recover(dev, geo)?;
    }
    Ok(())
}

/// Every inode checked (checksum, type, sizes): the valid ones by number (index 0 unused),
/// and how many there are.
fn read_inodes<D: PmDevice>(
    dev: &D,
    geo: &Geometry,
    progress: Progress<'_>,
    out: &mut Findings,
) -> (Vec<Option<InodeRaw>>, u64) {
    let n = geo.inode_count as usize;
    let mut inodes: Vec<Option<InodeRaw>> = vec![None; n + 1];
    let mut used = 0;
    #[allow(clippy::needless_range_loop)] // i is the inode number, not just an index
    for i in 1..=n {
        let ino = Ino(i as u32);
        let raw = read_raw(dev, geo, ino);
        match raw.check(ino) {
            InodeState::Free => {}
            InodeState::Allocated => {
                inodes[i] = Some(raw);
                used += 1;
            }
            InodeState::Corrupt(why) => out.add(format!("inode {ino}: {why}"), Fix::ClearInode(ino)),
        }
        if i % 65536 == 0 {
            progress(i as u64, (n as u64) + geo.data_blocks);
        }
    }
    (inodes, used)
}

/// The physical block of `lblk` of inode `ino` (an index of the inode table) in the
/// image's mapping, if it maps one inside the data area (a damaged mapping may name any
/// number, which the passes that read file data must not follow off the device).
fn block<D: PmDevice>(map: &FileMap<D>, geo: &Geometry, ino: usize, raw: &InodeRaw, lblk: Lblk) -> Option<Pblk> {
    let ino = Ino(u32::try_from(ino).ok()?);
    on_map!(map map, m => m.block_of(ino, raw, lblk)).filter(|&p| geo.holds_blocks(p, 1))
}

/// What the directories say about every inode.
struct Tree {
    /// Entries naming each inode.
    refs: Vec<u32>,
    /// Subdirectories of each directory.
    subdirs: Vec<u32>,
    /// Directories listing each directory.
    parent_seen: Vec<u32>,
    children: Vec<Vec<u32>>,
    directories: u64,
}

/// Every directory's blocks parsed; entries against their inodes (type, uniqueness,
/// parents), entry counts.
fn directories<D: PmDevice>(
    dev: &D,
    geo: &Geometry,
    map: &FileMap<D>,
    inodes: &[Option<InodeRaw>],
    out: &mut Findings,
) -> Tree {
    let n = inodes.len() - 1;
    let mut t = Tree {
        refs: vec![0; n + 1],
        subdirs: vec![0; n + 1],
        parent_seen: vec![0; n + 1],
        children: vec![Vec::new(); n + 1],
        directories: 0,
    };
    let mut buf = vec![0u8; BLOCK_BYTES as usize];
    for d in 1..=n {
        let Some(draw) = inodes[d] else { continue };
        if !draw.is_dir() {
            continue;
        }
        t.directories += 1;
        let mut names: HashMap<Vec<u8>, u64> = HashMap::new();
        let mut live = 0u64;
        if draw.size / BLOCK_BYTES > geo.data_blocks {
            // A damaged size: its blocks are not walked (billions of them, found by the
            // fuzzer), and mount refuses the directory too (`DirIndex::build`).
            out.add(format!("directory {d}: size {} is more blocks than the device has", draw.size), Fix::None);
            continue;
        }
        for lblk in 0..draw.size / BLOCK_BYTES {
            let Some(slot) = block(map, geo, d, &draw, Lblk(lblk)) else {
                out.add(format!("directory {d}: block {lblk} is not mapped inside the data area"), Fix::None);
                continue;
            };
            dev.read(geo.block_off(slot), &mut buf);
            let runs = match parse_block(&buf, lblk) {
                Ok(r) => r,
                Err(e) => {
                    out.add(format!("directory {d}: {e}"), Fix::None);
                    continue;
                }
            };
            for run in runs {
                let Run::Entry { pos, nslots, ino, ftype, name } = run else { continue };
                let at = EntryAt { dir: d, off: geo.block_off(slot) + (pos % SLOTS_PER_BLOCK) * 32, pos, nslots };
                if check_entry(inodes, &at, ino, ftype, name, &mut names, &mut t, out) {
                    live += 1;
                }
            }
        }
        if draw.dir_entries != live {
            let mut fixed = draw;
            fixed.dir_entries = live;
            out.add(
                format!("directory {d}: counts {} entries but holds {live}", draw.dir_entries),
                Fix::RewriteInode(Ino(d as u32), Box::new(fixed)),
            );
        }
    }
    t
}

/// Where a directory entry lies: its directory, the device offset of its first slot, its
/// slot index and length.
struct EntryAt {
    dir: usize,
    off: DevOffset,
    pos: u64,
    nslots: u8,
}

/// One entry against the inode it names: live, unique, of the right type, a directory's
/// parent pointing back. Counts it in `t` and returns whether it stays live.
#[allow(clippy::too_many_arguments)]
fn check_entry(
    inodes: &[Option<InodeRaw>],
    at: &EntryAt,
    ino: Ino,
    ftype: u8,
    name: Vec<u8>,
    names: &mut HashMap<Vec<u8>, u64>,
    t: &mut Tree,
    out: &mut Findings,
) -> bool {
    let (d, off) = (at.dir, at.off);
    let ino = ino.0 as usize;
    let shown = String::from_utf8_lossy(&name).into_owned();
    let target = inodes.get(ino).copied().flatten();
    let Some(traw) = target else {
        out.add(
            format!("directory {d}: entry {shown:?} points to free or invalid inode {ino}"),
            Fix::ClearDirent { off },
        );
        return false;
    };
    let want = FileType::from_mode(traw.mode).expect("checked");
    let name_len = name.len();
    if names.insert(name, at.pos).is_some() {
        out.add(format!("directory {d}: duplicate name {shown:?}"), Fix::ClearDirent { off });
        return false;
    }
    if FileType::from_u8(ftype) != Some(want) {
        let word = crate::fs::dir::DirIndex::header_word1(at.nslots, name_len, want);
        out.add(
            format!("directory {d}: entry {shown:?} has the wrong file type"),
            Fix::DirentWord1 { off: off + 8, word },
        );
    }
    if traw.is_dir() {
        t.parent_seen[ino] += 1;
        t.subdirs[d] += 1;
        if traw.parent as usize != d {
            let mut fixed = traw;
            fixed.parent = d as u32;
            out.add(
                format!("directory {ino}: parent is {} but it is listed in {d}", traw.parent),
                Fix::RewriteInode(Ino(ino as u32), Box::new(fixed)),
            );
        }
    }
    t.refs[ino] += 1;
    t.children[d].push(ino as u32);
    true
}

/// Which inodes the root reaches through directory entries.
fn reachability(inodes: &[Option<InodeRaw>], children: &[Vec<u32>]) -> Vec<bool> {
    let mut reached = vec![false; inodes.len()];
    reached[1] = true;
    let mut queue = VecDeque::from([1u32]);
    while let Some(d) = queue.pop_front() {
        for &c in &children[d as usize] {
            if !reached[c as usize] {
                reached[c as usize] = true;
                if inodes[c as usize].is_some_and(|r| r.is_dir()) {
                    queue.push_back(c);
                }
            }
        }
    }
    reached
}

/// Extended attributes: an owner reaches its xattr inode, which must be its own (a regular
/// inode of mode 0, nlink 1, `parent` naming the owner) and hold a valid blob. (An owner
/// that is itself unreachable is reported for itself: after a crash, an unlinked file
/// still open takes its attributes with it when recovery frees it.) Returns each
/// attribute inode's owner (0 for the others).
fn xattrs<D: PmDevice>(
    dev: &D,
    geo: &Geometry,
    map: &FileMap<D>,
    inodes: &[Option<InodeRaw>],
    reached: &mut [bool],
    out: &mut Findings,
) -> Vec<u32> {
    let n = inodes.len() - 1;
    let mut owner = vec![0u32; n + 1];
    let mut buf = vec![0u8; BLOCK_BYTES as usize];
    for i in 1..=n {
        let Some(raw) = inodes[i] else { continue };
        let x = raw.xattr_ino as usize;
        if x == 0 {
            continue;
        }
        let drop_them = |why: String, out: &mut Findings| {
            let mut fixed = raw;
            fixed.xattr_ino = 0;
            out.add(
                format!("inode {i}: {why} (attributes dropped)"),
                Fix::RewriteInode(Ino(i as u32), Box::new(fixed)),
            );
        };
        let own = x <= n
            && x != i
            && inodes[x].is_some_and(|xr| {
                xr.is_reg() && xr.mode & 0o7777 == 0 && xr.parent as usize == i && xr.nlink == 1 && xr.xattr_ino == 0
            })
            && owner[x] == 0;
        if !own {
            drop_them(format!("names attribute inode {x}, which is not its own"), out);
            continue;
        }
        owner[x] = i as u32;
        reached[x] = true;
        let xr = inodes[x].expect("checked");
        let mut blob = vec![0u8; (xr.size as usize).min(crate::fs::xattr::XATTR_BLOB_MAX + 4096)];
        for (lblk, chunk) in blob.chunks_mut(BLOCK_BYTES as usize).enumerate() {
            if let Some(slot) = block(map, geo, x, &xr, Lblk(lblk as u64)) {
                dev.read(geo.block_off(slot), &mut buf);
                chunk.copy_from_slice(&buf[..chunk.len()]);
            }
        }
        if let Err(e) = crate::fs::xattr::decode(&blob) {
            drop_them(e.to_string(), out);
        }
    }
    owner
}

/// Per inode: reachability, link counts, parents, block counts.
fn per_inode(
    inodes: &[Option<InodeRaw>],
    tree: &Tree,
    reached: &[bool],
    xattr_owner: &[u32],
    counts: &[u64],
    dirty: bool,
    out: &mut Findings,
) {
    for (i, raw) in inodes.iter().enumerate().skip(1) {
        let Some(raw) = *raw else { continue };
        let ino = Ino(i as u32);
        if !reached[i] {
            if raw.nlink == 0 && dirty {
                out.add(format!("inode {ino}: unlinked, awaiting release (recovery frees it)"), Fix::Mount);
            } else {
                out.add(format!("inode {ino}: allocated but not reachable from the root"), Fix::Reconnect(ino));
            }
            continue;
        }
        let mut fixed = raw;
        let mut problems = Vec::new();
        if raw.is_dir() {
            if i != 1 && tree.parent_seen[i] != 1 {
                problems.push(format!("directory listed {} times", tree.parent_seen[i]));
            }
            let want = 2 + tree.subdirs[i];
            if raw.nlink != want {
                problems.push(format!("link count {} should be {want}", raw.nlink));
                fixed.nlink = want;
            }
            if i == 1 && raw.parent != 1 {
                problems.push("root's parent is not itself".into());
                fixed.parent = 1;
            }
        } else if raw.nlink != tree.refs[i] && xattr_owner[i] == 0 {
            problems.push(format!("link count {} should be {}", raw.nlink, tree.refs[i]));
            fixed.nlink = tree.refs[i];
        }
        // After a crash, recovery recounts blocks (a write's or a truncate's count may
        // have rolled back while its blocks did not yet).
        let count_only = problems.is_empty();
        if raw.blocks != counts[i] {
            problems.push(format!("counts {} blocks but maps {}", raw.blocks, counts[i]));
            fixed.blocks = counts[i];
        }
        if raw.is_symlink() && counts[i] != 1 {
            problems.push("symbolic link has no target block".into());
        }
        if !problems.is_empty() {
            let fix = if dirty && count_only && problems.len() == 1 && raw.blocks != counts[i] {
                Fix::Mount
            } else if fixed != raw {
                Fix::RewriteInode(ino, Box::new(fixed))
            } else {
                Fix::None
            };
            out.add(format!("inode {ino}: {}", problems.join("; ")), fix);
        }
    }
}

/// F2: the bytes past EOF in each file's last block are zero (a mapping of the block shows
/// them). After a crash (`pending`) some may not be yet: recovery zeroes them.
fn eof_tails<D: PmDevice>(
    dev: &D,
    geo: &Geometry,
    map: &FileMap<D>,
    inodes: &[Option<InodeRaw>],
    pending: bool,
    out: &mut Findings,
) {
    for (i, raw) in inodes.iter().enumerate().skip(1) {
        let Some(raw) = raw else { continue };
        let in_blk = raw.size % BLOCK_BYTES;
        if in_blk == 0 || raw.is_dir() || raw.is_symlink() || raw.is_special() {
            continue;
        }
        let Some(pblk) = block(map, geo, i, raw, Lblk::of_byte(raw.size)) else {
            continue;
        };
        let (at, len) = (geo.block_off(pblk) + in_blk, BLOCK_BYTES - in_blk);
        let mut tail = vec![0u8; len as usize];
        dev.read(at, &mut tail);
        if let Some(k) = tail.iter().position(|&b| b != 0) {
            let what = format!(
                "inode {i}: byte {} past EOF ({}) in its last block is not zero",
                raw.size + k as u64,
                raw.size
            );
            out.add(what, if pending { Fix::Mount } else { Fix::ZeroBytes { off: at, len } });
        }
    }
}
