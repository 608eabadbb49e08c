//! fsck: checks every invariant in docs/design.md and, in repair mode, fixes what it can.
//!
//! Check mode never writes: when the journals hold uncommitted transactions it rolls them
//! back in a copy-on-write overlay and checks the result. Repair mode fixes the superblock
//! copies and journal headers, clears invalid table entries and corrupt inodes, mounts the
//! image (which rolls back the journals and frees crash leftovers), then fixes directory
//! entries, link counts, parents, block counts and unreachable inodes (reconnected under
//! /lost+found), and checks again.
//!
//! A crash leaves things that recovery is designed to clear (uncommitted transactions,
//! reservations of interrupted writes, unlinked files that were still open, blocks
//! allocated but not yet reachable). Check mode reports them apart, as "needs recovery",
//! and they are no error; [`recover_then_check`] (the command's default) runs that
//! recovery first, as a mount would and as e2fsck replays its journal, then checks.
//!
//! Exit codes follow e2fsck: 0 clean (or clean once recovered), 1 errors corrected, 4
//! errors left, 8 operational error.

#![forbid(unsafe_code)]

use super::dir::{parse_block, Run};
use super::inode::read_raw;
use super::recovery::mappable_blocks;
use super::{read_superblock, write_superblock, FileSystem, Progress};
use crate::journal::{self, JournalHeader, JOURNAL_MAGIC};
use crate::layout::dirent::{FileType, SLOTS_PER_BLOCK};
use crate::layout::inode::{InodeRaw, InodeState};
use crate::layout::superblock::{SB_PRIMARY_OFF, SB_SECONDARY_OFF};
use crate::layout::{Geometry, Ino, Superblock, BLOCK_BYTES, INODE_BYTES, SB_STATE_CLEAN, SB_STATE_MOUNTED};
use crate::mapping::hashfs::{classify, key, Entry, HashTable, TOMBSTONE};
use crate::mapping::{BlockMap, Mapped};
use crate::pm::overlay::Overlay;
use crate::pm::PmDevice;
use crate::{Error, Result};
use bytemuck::Zeroable;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsckMode {
    Check,
    Repair,
}

/// One problem found.
#[derive(Clone, Debug)]
pub struct Finding {
    pub what: String,
    fix: Fix,
    /// Left by a crash and cleared by recovery (a mount): not an error.
    pending: bool,
}

#[derive(Clone, Debug)]
enum Fix {
    None,
    PrimarySuperblockFromCopy,
    SecondarySuperblockFromPrimary,
    ResetJournal(u32),
    /// Fixed by mounting (journal rollback, crash leftovers).
    Mount,
    TombstoneSlot(u64),
    ClearInode(Ino),
    ClearDirent {
        off: u64,
    },
    DirentWord1 {
        off: u64,
        word: u64,
    },
    RewriteInode(Ino, Box<InodeRaw>),
    Reconnect(Ino),
    RepairProbePaths,
    /// Allocator mappings: rewrite the bitmap from the blocks the files reach.
    RebuildBitmap,
}

/// What fsck found and did.
#[derive(Clone, Debug, Default)]
pub struct FsckReport {
    /// Every problem found on the first pass.
    pub findings: Vec<String>,
    /// Those of `findings` that a crash leaves and recovery clears ("needs recovery").
    pub pending: Vec<String>,
    pub fixed: usize,
    /// Problems still present at the end.
    pub remaining: Vec<String>,
    pub inodes_used: u64,
    pub blocks_used: u64,
    pub directories: u64,
}

impl FsckReport {
    pub fn exit_code(&self) -> i32 {
        if self.remaining.iter().any(|r| !self.pending.contains(r)) {
            4
        } else if self.fixed > 0 {
            1
        } else {
            0
        }
    }
    /// Nothing found, not even crash leftovers.
    pub fn is_clean(&self) -> bool {
        self.findings.is_empty()
    }
    /// Nothing found but what recovery clears.
    pub fn is_clean_after_recovery(&self) -> bool {
        self.findings.iter().all(|f| self.pending.contains(f))
    }
}

/// What [`recover_then_check`] did before checking.
#[derive(Debug)]
pub enum Recovery {
    /// The image was cleanly unmounted: nothing to recover.
    NotNeeded,
    /// Recovery ran (a mount and a clean unmount), with its report.
    Ran(super::MountReport),
    /// Recovery could not run (the image is damaged): the check ran on the image as it
    /// is, without writing.
    Failed(String),
}

/// fsck's default: when the image was not cleanly unmounted, recover it as a mount would
/// (roll back the journals, free crash leftovers) and then check. A recovery that fails
/// leaves the image untouched and the check reports why.
pub fn recover_then_check<D: PmDevice>(dev: Arc<D>, progress: Progress<'_>) -> Result<(Recovery, FsckReport)> {
    let recovery = match read_superblock(&*dev) {
        Ok((sb, _, _)) if sb.state == SB_STATE_CLEAN => Recovery::NotNeeded,
        Ok(_) => match FileSystem::mount(dev.clone(), &|_, _| {}).and_then(|(fs, r)| fs.unmount().map(|()| r)) {
            Ok(r) => Recovery::Ran(r),
            Err(e) => Recovery::Failed(e.to_string()),
        },
        Err(e) => Recovery::Failed(e.to_string()),
    };
    let report = fsck(dev, FsckMode::Check, progress)?;
    Ok((recovery, report))
}

/// Checks (and in repair mode fixes) the image on `dev`.
pub fn fsck<D: PmDevice>(dev: Arc<D>, mode: FsckMode, progress: Progress<'_>) -> Result<FsckReport> {
    let overlay = Arc::new(Overlay::new(dev.clone()));
    let (findings, stats) = check(overlay, progress)?;
    let mut report = FsckReport {
        findings: findings.iter().map(|f| f.what.clone()).collect(),
        pending: findings.iter().filter(|f| f.pending).map(|f| f.what.clone()).collect(),
        inodes_used: stats.0,
        blocks_used: stats.1,
        directories: stats.2,
        ..Default::default()
    };
    if mode == FsckMode::Check || findings.is_empty() {
        report.remaining = report.findings.clone();
        return Ok(report);
    }
    // The geometry does not change during a repair (only the superblock's state does).
    let (_, geo, _) = read_superblock(&*dev)?;
    // Pass 1: what blocks a mount.
    let mut needs_mount = false;
    for f in &findings {
        match &f.fix {
            Fix::PrimarySuperblockFromCopy | Fix::SecondarySuperblockFromPrimary => {
                if let Ok((mut sb, _, _)) = read_superblock(&*dev) {
                    write_superblock(&*dev, &mut sb);
                }
            }
            Fix::ResetJournal(i) => {
                let base = geo.journal_base(*i);
                let h = JournalHeader { magic: JOURNAL_MAGIC, index: *i, ..JournalHeader::zeroed() };
                dev.zero(base, geo.journal_blocks as u64 * BLOCK_BYTES);
                dev.write(base, bytemuck::bytes_of(&h));
                dev.flush(base, geo.journal_blocks as u64 * BLOCK_BYTES);
                dev.fence();
            }
            Fix::TombstoneSlot(s) => {
                dev.store_u64(geo.slot_off(*s), TOMBSTONE);
                dev.flush(geo.slot_off(*s), 8);
                needs_mount = true;
            }
            Fix::ClearInode(ino) => {
                dev.zero(geo.inode_off(ino.get()), INODE_BYTES as u64);
                dev.flush(geo.inode_off(ino.get()), INODE_BYTES as u64);
                needs_mount = true;
            }
            Fix::Mount | Fix::RepairProbePaths => needs_mount = true,
            _ => {}
        }
    }
    dev.fence();
    if findings.iter().any(|f| matches!(f.fix, Fix::RebuildBitmap)) {
        rebuild_bitmap(&dev, &geo)?;
        needs_mount = true;
    }
    if needs_mount {
        // Mount as after a crash, so that recovery collects every leftover.
        let (mut sb, _, _) = read_superblock(&*dev)?;
        sb.state = SB_STATE_MOUNTED;
        write_superblock(&*dev, &mut sb);
        let (fs, _) = FileSystem::mount(dev.clone(), &|_, _| {})?;
        fs.unmount()?;
    }
    // Pass 2: structural fixes on the recovered image.
    let (second, _) = check(dev.clone(), &|_, _| {})?;
    let mut reconnect = Vec::new();
    for f in &second {
        match &f.fix {
            Fix::ClearDirent { off } => {
                dev.store_u64(*off, 0);
                dev.flush(*off, 8);
            }
            Fix::DirentWord1 { off, word } => {
                dev.store_u64(*off, *word);
                dev.flush(*off, 8);
            }
            Fix::RewriteInode(ino, raw) => {
                let mut raw = **raw;
                raw.seal(*ino);
                dev.write(geo.inode_off(ino.get()), bytemuck::bytes_of(&raw));
                dev.flush(geo.inode_off(ino.get()), INODE_BYTES as u64);
            }
            Fix::Reconnect(ino) => reconnect.push(*ino),
            _ => {}
        }
    }
    dev.fence();
    if !reconnect.is_empty() {
        let (mut sb, _, _) = read_superblock(&*dev)?;
        sb.state = SB_STATE_CLEAN;
        write_superblock(&*dev, &mut sb);
        let (fs, _) = FileSystem::mount(dev.clone(), &|_, _| {})?;
        for ino in reconnect {
            fs.inner.reconnect(ino)?;
        }
        fs.unmount()?;
    }
    // Counts may need one more pass after reconnecting.
    for _ in 0..2 {
        let (again, _) = check(dev.clone(), &|_, _| {})?;
        let fixable: Vec<_> = again.iter().filter(|f| matches!(f.fix, Fix::RewriteInode(..))).collect();
        if fixable.is_empty() {
            break;
        }
        for f in fixable {
            if let Fix::RewriteInode(ino, raw) = &f.fix {
                let mut raw = **raw;
                raw.seal(*ino);
                dev.write(geo.inode_off(ino.get()), bytemuck::bytes_of(&raw));
                dev.flush(geo.inode_off(ino.get()), INODE_BYTES as u64);
            }
        }
        dev.fence();
    }
    let (last, _) = check(dev.clone(), &|_, _| {})?;
    report.remaining = last.iter().map(|f| f.what.clone()).collect();
    report.fixed =
        report.findings.len().saturating_sub(report.remaining.len()).max(usize::from(report.remaining.is_empty()));
    Ok(report)
}

type Stats = (u64, u64, u64);

fn check<D: PmDevice>(dev: Arc<D>, progress: Progress<'_>) -> Result<(Vec<Finding>, Stats)> {
    let mut out = Vec::new();
    let mut add = |what: String, fix: Fix| {
        let pending = matches!(fix, Fix::Mount);
        out.push(Finding { what, fix, pending })
    };

    // Superblocks.
    let read = |off| {
        let mut sb = Superblock::zeroed();
        dev.read(off, bytemuck::bytes_of_mut(&mut sb));
        sb
    };
    if dev.len_bytes() < 2 * BLOCK_BYTES {
        add(format!("image of {} bytes is too small to be a HashFS image", dev.len_bytes()), Fix::None);
        return Ok((out, (0, 0, 0)));
    }
    let (p, s) = (read(SB_PRIMARY_OFF), read(SB_SECONDARY_OFF));
    let (pv, sv) = (p.validate(dev.len_bytes()), s.validate(dev.len_bytes()));
    let (sb, geo) = match (&pv, &sv) {
        (Ok(g), _) => {
            if sv.is_err() || s != p {
                let why = sv.as_ref().err().map(|e| e.to_string()).unwrap_or_else(|| "differs from the primary".into());
                add(format!("superblock copy: {why}"), Fix::SecondarySuperblockFromPrimary);
            }
            (p, *g)
        }
        (Err(e), Ok(g)) => {
            add(format!("primary superblock: {e} (the copy is good)"), Fix::PrimarySuperblockFromCopy);
            (s, *g)
        }
        (Err(e), Err(_)) => {
            add(format!("no valid superblock: {e}"), Fix::None);
            return Ok((out, (0, 0, 0)));
        }
    };
    let dirty = sb.state != SB_STATE_CLEAN;

    // Journals: roll back pending transactions (in the overlay, in check mode).
    let statuses = journal::inspect(&*dev, &geo);
    let mut journals_ok = true;
    for st in &statuses {
        if !st.header_ok {
            add(format!("journal {}: header corrupt", st.index), Fix::ResetJournal(st.index));
            journals_ok = false;
        } else if st.active_txid != 0 {
            add(
                format!("journal {}: uncommitted transaction {} (recovery rolls it back)", st.index, st.active_txid),
                Fix::Mount,
            );
        }
    }
    if journals_ok {
        journal::recover(&*dev, &geo)?;
    }

    // Inodes.
    let n = geo.inode_count as usize;
    let mut inodes: Vec<Option<InodeRaw>> = vec![None; n + 1];
    let mut used_inodes = 0;
    #[allow(clippy::needless_range_loop)] // i is the inode number, not just an index
    for i in 1..=n {
        let ino = Ino(i as u32);
        let raw = read_raw(&*dev, &geo, ino);
        match raw.check(ino) {
            InodeState::Free => {}
            InodeState::Allocated => {
                inodes[i] = Some(raw);
                used_inodes += 1;
            }
            InodeState::Corrupt(why) => add(format!("inode {ino}: {why}"), Fix::ClearInode(ino)),
        }
        if i % 65536 == 0 {
            progress(i as u64, (n as u64) + geo.data_blocks);
        }
    }
    match &inodes[1] {
        Some(r) if r.is_dir() => {}
        _ => {
            add("root inode is missing or not a directory".into(), Fix::None);
            return Ok((out, (used_inodes, 0, 0)));
        }
    }

    // The mapping.
    let mut counts = vec![0u64; n + 1];
    let mut used_blocks = 0;
    let kind = crate::layout::MappingKind::from_u32(sb.mapping_kind).expect("validated");
    let block_map = if kind == crate::layout::MappingKind::HashFs {
        None
    } else {
        Some(BlockMap::new(dev.clone(), geo, &sb, kind)?)
    };
    let table = HashTable::new(dev.clone(), &geo, sb.hash_seed);
    if let Some(bm) = &block_map {
        used_blocks = check_block_map(bm, &inodes, &mut counts, &mut add);
    } else {
        let mut seen: HashMap<u64, u64> = HashMap::new();
        let mut unreachable_keys = 0u64;
        for slot in 0..table.nslots() {
            let v = table.load(slot);
            match classify(v, table.nslots()) {
                Entry::Empty | Entry::Tombstone => {}
                Entry::Invalid => add(format!("table slot {slot}: invalid value {v:#x}"), Fix::TombstoneSlot(slot)),
                Entry::Reserved { .. } => {
                    let what = format!("table slot {slot}: reservation left by an interrupted write");
                    add(what, if dirty { Fix::Mount } else { Fix::TombstoneSlot(slot) });
                }
                Entry::Key { ino, lblk } => {
                    used_blocks += 1;
                    let Some(raw) = inodes.get(ino as usize).and_then(|r| r.as_ref()) else {
                        add(
                            format!("table slot {slot}: maps block {lblk} of free or invalid inode {ino}"),
                            if dirty { Fix::Mount } else { Fix::TombstoneSlot(slot) },
                        );
                        continue;
                    };
                    if lblk as u64 >= mappable_blocks(raw.size) {
                        add(
                            format!(
                                "table slot {slot}: block {lblk} of inode {ino} lies past its end ({} bytes)",
                                raw.size
                            ),
                            if dirty { Fix::Mount } else { Fix::TombstoneSlot(slot) },
                        );
                        continue;
                    }
                    if let Some(other) = seen.insert(v, slot) {
                        add(
                            format!("table slots {other} and {slot} both map block {lblk} of inode {ino}"),
                            Fix::TombstoneSlot(slot),
                        );
                        continue;
                    }
                    if table.lookup(v) != Some(slot) {
                        unreachable_keys += 1;
                    }
                    counts[ino as usize] += 1;
                }
            }
            if slot % 262_144 == 0 {
                progress(n as u64 + slot, n as u64 + geo.data_blocks);
            }
        }
        if unreachable_keys > 0 {
            add(
                format!("table: {unreachable_keys} keys cannot be reached from their home slot"),
                if dirty { Fix::Mount } else { Fix::RepairProbePaths },
            );
        }
    }
    // A tree cursor remembers one file's last leaf: each lookup takes a fresh one, since
    // consecutive lookups here are of different files (a shared cursor would answer for
    // one file with another's leaf).
    let dir_block = |d: usize, draw: &InodeRaw, lblk: u64| -> Option<u64> {
        let cursor = crate::mapping::Cursor::default();
        match &block_map {
            Some(bm) => bm.lookup(d as u32, draw, &cursor, lblk).ok().flatten().map(|(p, _)| p),
            None => table.lookup(key(d as u32, lblk as u32)),
        }
    };

    // Directories: entries, references, parents.
    let mut refs = vec![0u32; n + 1];
    let mut subdirs = vec![0u32; n + 1];
    let mut parent_seen = vec![0u32; n + 1];
    let mut children: Vec<Vec<u32>> = vec![Vec::new(); n + 1];
    let mut directories = 0;
    let mut buf = vec![0u8; BLOCK_BYTES as usize];
    for d in 1..=n {
        let Some(draw) = inodes[d] else { continue };
        if !draw.is_dir() {
            continue;
        }
        directories += 1;
        let mut live = 0u64;
        let mut names: HashMap<Vec<u8>, u64> = HashMap::new();
        for lblk in 0..draw.size / BLOCK_BYTES {
            let Some(slot) = dir_block(d, &draw, lblk) else {
                add(format!("directory {d}: block {lblk} is not mapped"), Fix::None);
                continue;
            };
            dev.read(geo.block_off(slot), &mut buf);
            let runs = match parse_block(&buf, lblk) {
                Ok(r) => r,
                Err(e) => {
                    add(format!("directory {d}: {e}"), Fix::None);
                    continue;
                }
            };
            for run in runs {
                let Run::Entry { pos, nslots, ino, ftype, name } = run else { continue };
                let off = geo.block_off(slot) + (pos % SLOTS_PER_BLOCK) * 32;
                let target = if ino <= n as u64 { inodes[ino as usize] } else { None };
                let Some(traw) = target else {
                    add(
                        format!(
                            "directory {d}: entry {:?} points to free or invalid inode {ino}",
                            String::from_utf8_lossy(&name)
                        ),
                        Fix::ClearDirent { off },
                    );
                    continue;
                };
                if names.insert(name.clone(), pos).is_some() {
                    add(
                        format!("directory {d}: duplicate name {:?}", String::from_utf8_lossy(&name)),
                        Fix::ClearDirent { off },
                    );
                    continue;
                }
                let want = FileType::from_mode(traw.mode).expect("checked");
                if FileType::from_u8(ftype) != Some(want) {
                    let word = super::dir::DirIndex::header_word1(nslots, name.len(), want);
                    add(
                        format!("directory {d}: entry {:?} has the wrong file type", String::from_utf8_lossy(&name)),
                        Fix::DirentWord1 { off: off + 8, word },
                    );
                }
                if traw.is_dir() {
                    parent_seen[ino as usize] += 1;
                    subdirs[d] += 1;
                    if traw.parent != d as u64 {
                        let mut fixed = traw;
                        fixed.parent = d as u64;
                        add(
                            format!("directory {ino}: parent is {} but it is listed in {d}", traw.parent),
                            Fix::RewriteInode(Ino(ino as u32), Box::new(fixed)),
                        );
                    }
                }
                refs[ino as usize] += 1;
                children[d].push(ino as u32);
                live += 1;
            }
        }
        if draw.dir_entries != live {
            let mut fixed = draw;
            fixed.dir_entries = live;
            add(
                format!("directory {d}: counts {} entries but holds {live}", draw.dir_entries),
                Fix::RewriteInode(Ino(d as u32), Box::new(fixed)),
            );
        }
    }

    // Reachability from the root.
    let mut reached = vec![false; n + 1];
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

    // Extended attributes: an owner reaches its xattr inode, which must be its own (a
    // regular inode of mode 0, nlink 1, `parent` naming the owner) and hold a valid blob.
    // (An owner that is itself unreachable is reported for itself: after a crash, an
    // unlinked file still open takes its attributes with it when recovery frees it.)
    let mut xattr_owner = vec![0u32; n + 1];
    for i in 1..=n {
        let Some(raw) = inodes[i] else { continue };
        let x = raw.xattr_ino as usize;
        if x == 0 {
            continue;
        }
        let ok = x <= n
            && x != i
            && inodes[x].is_some_and(|xr| {
                xr.is_reg() && xr.mode & 0o7777 == 0 && xr.parent == i as u64 && xr.nlink == 1 && xr.xattr_ino == 0
            })
            && xattr_owner[x] == 0;
        if !ok {
            let mut fixed = raw;
            fixed.xattr_ino = 0;
            add(
                format!("inode {i}: names attribute inode {x}, which is not its own (attributes dropped)"),
                Fix::RewriteInode(Ino(i as u32), Box::new(fixed)),
            );
            continue;
        }
        xattr_owner[x] = i as u32;
        reached[x] = true;
        let xr = inodes[x].expect("checked");
        let mut blob = vec![0u8; (xr.size as usize).min(super::xattr::XATTR_BLOB_MAX + 4096)];
        for (lblk, chunk) in blob.chunks_mut(BLOCK_BYTES as usize).enumerate() {
            if let Some(slot) = dir_block(x, &xr, lblk as u64) {
                dev.read(geo.block_off(slot), &mut buf);
                chunk.copy_from_slice(&buf[..chunk.len()]);
            }
        }
        if let Err(e) = super::xattr::decode(&blob) {
            let mut fixed = raw;
            fixed.xattr_ino = 0;
            add(format!("inode {i}: {e} (attributes dropped)"), Fix::RewriteInode(Ino(i as u32), Box::new(fixed)));
        }
    }

    // Per-inode counts.
    for i in 1..=n {
        let Some(raw) = inodes[i] else { continue };
        let ino = Ino(i as u32);
        if !reached[i] {
            if raw.nlink == 0 && dirty {
                add(format!("inode {ino}: unlinked, awaiting release (recovery frees it)"), Fix::Mount);
            } else {
                add(format!("inode {ino}: allocated but not reachable from the root"), Fix::Reconnect(ino));
            }
            continue;
        }
        let mut fixed = raw;
        let mut problems = Vec::new();
        if raw.is_dir() {
            if i != 1 && parent_seen[i] != 1 {
                problems.push(format!("directory listed {} times", parent_seen[i]));
            }
            let want = 2 + subdirs[i];
            if raw.nlink != want {
                problems.push(format!("link count {} should be {want}", raw.nlink));
                fixed.nlink = want;
            }
            if i == 1 && raw.parent != 1 {
                problems.push("root's parent is not itself".into());
                fixed.parent = 1;
            }
        } else if raw.nlink != refs[i] && xattr_owner[i] == 0 {
            problems.push(format!("link count {} should be {}", raw.nlink, refs[i]));
            fixed.nlink = refs[i];
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
            add(format!("inode {ino}: {}", problems.join("; ")), fix);
        }
    }
    Ok((out, (used_inodes, used_blocks, directories)))
}

impl<D: PmDevice> super::FsInner<D> {
    /// fsck: links an unreachable inode into /lost+found as "#<ino>". A file gets one
    /// link; a directory gets lost+found as its parent (its link count is fixed by the
    /// next pass if needed).
    pub(crate) fn reconnect(&self, ino: Ino) -> Result<()> {
        let lf = match self.lookup(Ino::ROOT, b"lost+found") {
            Ok((i, FileType::Directory)) => i,
            Ok(_) => return Err(Error::Exists),
            Err(Error::NotFound) => {
                self.create_node(
                    Ino::ROOT,
                    b"lost+found",
                    super::ops::NodeSpec::Dir { perm: 0o700 },
                    super::ops::Owner::ROOT,
                )?
                .ino
            }
            Err(e) => return Err(e),
        };
        let name = format!("#{ino}");
        let pcell = self.cell(lf)?;
        let mut pst = pcell.state.write();
        let cell = self.cell(ino)?;
        let mut cst = cell.state.write();
        let ftype = FileType::from_mode(cst.raw.mode).expect("checked inode");
        let entry = self.prepare_entry(&pcell, &mut pst, name.as_bytes(), ftype)?;
        let mut craw = cst.raw;
        let mut praw = pst.raw;
        if ftype == FileType::Directory {
            craw.parent = lf.get();
            praw.nlink += 1;
        } else {
            craw.nlink = 1;
        }
        let committed = {
            let mut tx = self.journals.begin();
            match self.tx_add_entry(&mut tx, lf, &mut praw, &entry, ino, None) {
                Ok(()) => {
                    super::inode::tx_write_inode(&mut tx, &self.geo, lf, &mut praw);
                    super::inode::tx_write_inode(&mut tx, &self.geo, ino, &mut craw);
                    tx.commit()
                }
                Err(e) => Err(e),
            }
        };
        self.finish_entry(&mut pst, name.as_bytes(), entry, ino, committed.is_ok());
        committed?;
        pst.raw = praw;
        cst.raw = craw;
        Ok(())
    }
}

/// Geometry of the image on `dev`, for `hashfs info`.
pub fn geometry_of<D: PmDevice>(dev: &D) -> Result<(Superblock, Geometry)> {
    let (sb, g, _) = read_superblock(dev)?;
    Ok((sb, g))
}

/// Checks an allocator mapping: every file's structure, blocks mapped twice, and the
/// bitmap against the blocks the files reach. Returns the blocks in use.
fn check_block_map<D: PmDevice>(
    bm: &BlockMap<D>,
    inodes: &[Option<InodeRaw>],
    counts: &mut [u64],
    add: &mut dyn FnMut(String, Fix),
) -> u64 {
    let geo = bm.geo;
    let mut owner: Vec<u32> = vec![0; geo.data_blocks as usize];
    let mut twice = 0u64;
    let mut past_end = Vec::new();
    let mut claim = |p: u64, len: u64, ino: u32, twice: &mut u64| {
        for b in p..(p + len).min(geo.data_blocks) {
            if owner[b as usize] != 0 {
                *twice += 1;
            }
            owner[b as usize] = ino;
        }
    };
    let mut visit = |m: Mapped, twice: &mut u64, past_end: &mut Vec<u32>, counts: &mut [u64]| match m {
        Mapped::Data { ino, lblk, pblk, len } => {
            claim(pblk, len, ino, twice);
            match inodes.get(ino as usize).and_then(|r| r.as_ref()) {
                Some(raw) if lblk + len <= mappable_blocks(raw.size) => counts[ino as usize] += len,
                _ => past_end.push(ino),
            }
        }
        Mapped::Node { ino, pblk } => claim(pblk, 1, ino, twice),
    };
    if bm.is_global() {
        let dummy = InodeRaw::zeroed();
        if let Err(e) = bm.walk(0, &dummy, &mut |m| visit(m, &mut twice, &mut past_end, counts)) {
            add(format!("{} table: {e}", bm.kind.name()), Fix::None);
        }
    } else {
        for (i, raw) in inodes.iter().enumerate() {
            let Some(raw) = raw else { continue };
            let mut found = Vec::new();
            match bm.walk(i as u32, raw, &mut |m| found.push(m)) {
                Ok(()) => found.into_iter().for_each(|m| visit(m, &mut twice, &mut past_end, counts)),
                Err(e) => add(format!("inode {i}: {e}"), Fix::ClearInode(Ino(i as u32))),
            }
        }
    }
    past_end.sort_unstable();
    past_end.dedup();
    for ino in past_end {
        let what = format!("inode {ino}: the {} maps blocks past its end or it is free", bm.kind.name());
        add(what, Fix::Mount);
    }
    if twice > 0 {
        add(format!("{twice} blocks are mapped more than once"), Fix::None);
    }
    let (mut leaked, mut unmarked, mut used) = (0u64, 0u64, 0u64);
    for b in 0..geo.data_blocks {
        let marked = bm.dev.load_u64(geo.bitmap_off() + (b / 64) * 8) & (1 << (b % 64)) != 0;
        let reached = owner[b as usize] != 0;
        used += u64::from(reached);
        match (marked, reached) {
            (true, false) => leaked += 1,
            (false, true) => unmarked += 1,
            _ => {}
        }
    }
    if leaked > 0 || unmarked > 0 {
        add(
            format!("bitmap: {leaked} blocks marked used but unreachable, {unmarked} in use but marked free"),
            Fix::RebuildBitmap,
        );
    }
    used
}

/// Rewrites the allocation bitmap from the blocks that valid inodes reach.
fn rebuild_bitmap<D: PmDevice>(dev: &Arc<D>, geo: &Geometry) -> Result<()> {
    let (sb, _, _) = read_superblock(&**dev)?;
    let kind = crate::layout::MappingKind::from_u32(sb.mapping_kind).expect("validated");
    let bm = BlockMap::new(dev.clone(), *geo, &sb, kind)?;
    let mut words = vec![0u64; geo.data_blocks.div_ceil(64) as usize];
    let mut mark = |m: Mapped| {
        let (p, len) = match m {
            Mapped::Data { pblk, len, .. } => (pblk, len),
            Mapped::Node { pblk, .. } => (pblk, 1),
        };
        for b in p..(p + len).min(geo.data_blocks) {
            words[(b / 64) as usize] |= 1 << (b % 64);
        }
    };
    if bm.is_global() {
        bm.walk(0, &InodeRaw::zeroed(), &mut mark)?;
    } else {
        for i in 1..=geo.inode_count {
            let raw = read_raw(&**dev, geo, Ino(i as u32));
            if raw.check(Ino(i as u32)) == InodeState::Allocated {
                let _ = bm.walk(i as u32, &raw, &mut mark);
            }
        }
    }
    for (i, w) in words.iter().enumerate() {
        dev.store_u64(geo.bitmap_off() + i as u64 * 8, *w);
    }
    dev.flush(geo.bitmap_off(), words.len() as u64 * 8);
    dev.fence();
    Ok(())
}
