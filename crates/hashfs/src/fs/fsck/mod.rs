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

mod check;

pub(crate) use check::Findings;

use super::verbs::on_map;
use super::{read_superblock, write_superblock, FileSystem, Progress};
use crate::layout::dirent::FileType;
use crate::layout::inode::InodeRaw;
use crate::layout::journal::{JournalHeader, JOURNAL_MAGIC};
use crate::layout::{
    Geometry, Ino, Lblk, Pblk, Superblock, BLOCK_BYTES, INODE_BYTES, SB_STATE_CLEAN, SB_STATE_MOUNTED,
};
use crate::mapping::hashfs::TOMBSTONE;
use crate::mapping::FileMap;
use crate::pm::overlay::Overlay;
use crate::pm::{DevOffset, PmDevice};
use crate::{Error, Result};
use bytemuck::Zeroable;
use check::check;
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
pub(crate) enum Fix {
    None,
    PrimarySuperblockFromCopy,
    SecondarySuperblockFromPrimary,
    ResetJournal(u32),
    /// Fixed by mounting (journal rollback, crash leftovers).
    Mount,
    TombstoneSlot(u64),
    /// A global table's entry that no lookup or removal treats as whole: the word at `off`
    /// becomes `clear`, and the bitmap is rebuilt without its blocks.
    ClearTableEntry {
        off: DevOffset,
        clear: u64,
    },
    ClearInode(Ino),
    ClearDirent {
        off: DevOffset,
    },
    DirentWord1 {
        off: DevOffset,
        word: u64,
    },
    RewriteInode(Ino, Box<InodeRaw>),
    /// Bytes past EOF in a file's last block (F2).
    ZeroBytes {
        off: DevOffset,
        len: u64,
    },
    Reconnect(Ino),
    RepairProbePaths,
    /// Allocator mappings: rewrite the bitmap from the blocks the files reach.
    RebuildBitmap,
    /// The superblock's counts of a clean unmount dropped (done first by every repair).
    ForgetSummary,
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
    // The counts a clean unmount left describe the image no more once the repair writes
    // to it outside a mount (and may be what was wrong); a mount's unmount leaves new ones.
    forget_summary(&*dev)?;
    if repair_before_mount(&dev, &geo, &findings)? {
        // Mount as after a crash, so that recovery collects every leftover.
        let (mut sb, _, _) = read_superblock(&*dev)?;
        sb.state = SB_STATE_MOUNTED;
        write_superblock(&*dev, &mut sb);
        let (fs, _) = FileSystem::mount(dev.clone(), &|_, _| {})?;
        fs.unmount()?;
    }
    let (second, _) = check(dev.clone(), &|_, _| {})?;
    let reconnect = repair_structure(&*dev, &geo, &second);
    if !reconnect.is_empty() {
        let (mut sb, _, _) = read_superblock(&*dev)?;
        sb.state = SB_STATE_CLEAN;
        sb.set_summary(None);
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
        let mut fixed_any = false;
        for f in &again {
            if let Fix::RewriteInode(ino, raw) = &f.fix {
                rewrite_inode(&*dev, &geo, *ino, raw);
                fixed_any = true;
            }
        }
        dev.fence();
        if !fixed_any {
            break;
        }
        forget_summary(&*dev)?;
    }
    let (last, _) = check(dev.clone(), &|_, _| {})?;
    report.remaining = last.iter().map(|f| f.what.clone()).collect();
    report.fixed =
        report.findings.len().saturating_sub(report.remaining.len()).max(usize::from(report.remaining.is_empty()));
    Ok(report)
}

/// Drops the counts the last clean unmount left in the superblock (`Superblock::summary`).
fn forget_summary<D: PmDevice>(dev: &D) -> Result<()> {
    let (mut sb, _, _) = read_superblock(dev)?;
    if sb.summary_stamp != 0 {
        sb.set_summary(None);
        write_superblock(dev, &mut sb);
    }
    Ok(())
}

/// Repair pass 1, on the image as found: what would stop a mount (superblock copies,
/// journal headers, invalid table entries, corrupt inodes, the allocation bitmap).
/// Returns whether a recovering mount must follow.
fn repair_before_mount<D: PmDevice>(dev: &Arc<D>, geo: &Geometry, findings: &[Finding]) -> Result<bool> {
    let (mut needs_mount, mut rebuild) = (false, false);
    for f in findings {
        match &f.fix {
            Fix::PrimarySuperblockFromCopy | Fix::SecondarySuperblockFromPrimary => {
                if let Ok((mut sb, _, _)) = read_superblock(&**dev) {
                    write_superblock(&**dev, &mut sb);
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
            Fix::ClearTableEntry { off, clear } => {
                dev.store_u64(*off, *clear);
                dev.flush(*off, 8);
                rebuild = true;
                needs_mount = true;
            }
            Fix::ClearInode(ino) => {
                dev.zero(geo.inode_off(*ino), INODE_BYTES as u64);
                dev.flush(geo.inode_off(*ino), INODE_BYTES as u64);
                needs_mount = true;
            }
            Fix::Mount | Fix::RepairProbePaths => needs_mount = true,
            _ => {}
        }
    }
    dev.fence();
    if rebuild || findings.iter().any(|f| matches!(f.fix, Fix::RebuildBitmap)) {
        rebuild_bitmap(dev, geo)?;
        needs_mount = true;
    }
    Ok(needs_mount)
}

/// Repair pass 2, on the recovered image: directory entries and inode fields. Returns
/// the unreachable inodes to reconnect under /lost+found.
fn repair_structure<D: PmDevice>(dev: &D, geo: &Geometry, findings: &[Finding]) -> Vec<Ino> {
    let mut reconnect = Vec::new();
    for f in findings {
        match &f.fix {
            Fix::ClearDirent { off } => {
                dev.store_u64(*off, 0);
                dev.flush(*off, 8);
            }
            Fix::DirentWord1 { off, word } => {
                dev.store_u64(*off, *word);
                dev.flush(*off, 8);
            }
            Fix::RewriteInode(ino, raw) => rewrite_inode(dev, geo, *ino, raw),
            Fix::ZeroBytes { off, len } => {
                dev.zero(*off, *len);
                dev.flush(*off, *len);
            }
            Fix::Reconnect(ino) => reconnect.push(*ino),
            _ => {}
        }
    }
    dev.fence();
    reconnect
}

/// Writes a corrected inode (sealed) and flushes it; the caller fences.
fn rewrite_inode<D: PmDevice>(dev: &D, geo: &Geometry, ino: Ino, raw: &InodeRaw) {
    let mut raw = *raw;
    raw.seal(ino);
    dev.write(geo.inode_off(ino), bytemuck::bytes_of(&raw));
    dev.flush(geo.inode_off(ino), INODE_BYTES as u64);
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
            craw.parent = lf.0;
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
        self.finish_entry(&mut pst, name.as_bytes(), entry, ino, &committed);
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

/// What fsck asks of the mapping the superblock names (implemented beside each mapping:
/// `fs/hashfs/fsck.rs`, `fs/blocks/fsck.rs`). Every pass reads; none writes but
/// `settle_appends` (check mode runs on a copy-on-write overlay) and `rebuild_allocation`
/// (a repair).
pub(crate) trait FsckVerbs<D: PmDevice> {
    /// After a crash, before the other passes: tagged sizes settled as mount settles them
    /// (HashFS's one-fence appends); an append that is dropped is a finding.
    fn settle_appends(&self, dev: &Arc<D>, geo: &Geometry, out: &mut Findings) -> Result<()>;

    /// The mapping's own pass: its entries against the inodes (`dirty`: the image was not
    /// cleanly unmounted, so a crash's leftovers are pending, not errors), each inode's
    /// blocks counted into `counts`. Returns the blocks in use.
    #[allow(clippy::too_many_arguments)] // the pass's inputs and outputs, each needed
    fn check(
        &self,
        geo: &Geometry,
        inodes: &[Option<InodeRaw>],
        counts: &mut [u64],
        dirty: bool,
        progress: Progress<'_>,
        out: &mut Findings,
    ) -> u64;

    /// The physical block of `lblk` of inode `ino`, for the passes that read file data.
    fn block_of(&self, ino: Ino, raw: &InodeRaw, lblk: Lblk) -> Option<Pblk>;

    /// Rewrites the allocation state from the blocks that valid inodes reach.
    fn rebuild_allocation(&self, dev: &Arc<D>, geo: &Geometry) -> Result<()>;
}

/// Rewrites the mapping's allocation state (an allocator mapping's bitmap) from the blocks
/// that valid inodes reach.
fn rebuild_bitmap<D: PmDevice>(dev: &Arc<D>, geo: &Geometry) -> Result<()> {
    let (sb, _, _) = read_superblock(&**dev)?;
    let map = FileMap::open(dev.clone(), geo, &sb)?;
    on_map!(map map, m => m.rebuild_allocation(dev, geo))
}
