//! Namespace operations on inodes: create, link, unlink, rmdir, rename, setattr, readdir,
//! readlink. Each is one journaled transaction, atomic and durable when it returns.

use super::data::MapGroup;
use super::dir::{self, check_name, DirIndex, EntryRef, RawDirEntry, SlotAlloc};
use super::inode::{self, InodeCell, InodeMem};
use super::FsInner;
use crate::journal::Tx;
use crate::layout::dirent::FileType;
use crate::layout::inode::{InodeRaw, S_IFDIR, S_IFLNK, S_IFMT, S_IFREG};
use crate::layout::{Ino, BLOCK_BYTES, MAX_LINKS, MAX_NAME_BYTES, MAX_SYMLINK_BYTES};
use crate::pm::PmDevice;
use crate::{Error, Result};
use parking_lot::RwLockWriteGuard;
use std::sync::Arc;

/// What to create.
#[derive(Clone, Debug)]
pub enum NodeSpec<'a> {
    File {
        perm: u32,
    },
    Dir {
        perm: u32,
    },
    Symlink {
        target: &'a [u8],
    },
    /// A FIFO, character or block device, or socket (`rdev` for devices only).
    Special {
        ftype: FileType,
        perm: u32,
        rdev: u64,
    },
}

impl NodeSpec<'_> {
    /// What mknod and symlink refuse before anything is allocated.
    fn validate(&self) -> Result<()> {
        match *self {
            NodeSpec::Special { ftype, rdev, .. } => {
                if !ftype.is_special() {
                    return Err(Error::Invalid("mknod: not a FIFO, device or socket"));
                }
                if rdev != 0 && !matches!(ftype, FileType::CharDevice | FileType::BlockDevice) {
                    return Err(Error::Invalid("mknod: a device number on a file that is not a device"));
                }
            }
            NodeSpec::Symlink { target: [] } => return Err(Error::NotFound),
            NodeSpec::Symlink { target } if target.len() as u64 > MAX_SYMLINK_BYTES => return Err(Error::NameTooLong),
            _ => {}
        }
        Ok(())
    }
}

/// Owner of a new inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
}

impl Owner {
    pub const ROOT: Owner = Owner { uid: 0, gid: 0 };
    /// The effective user and group of this process.
    pub fn current() -> Owner {
        // SAFETY: geteuid/getegid have no preconditions and cannot fail.
        unsafe { Owner { uid: libc::geteuid(), gid: libc::getegid() } }
    }
}

/// Which kind of entry `remove` may delete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemoveKind {
    /// unlink: anything but a directory.
    NonDir,
    /// rmdir: an empty directory.
    Dir,
}

/// rename(2) flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RenameMode {
    /// Replace the target if it exists (POSIX rename).
    #[default]
    Replace,
    /// Fail with Exists if the target exists (RENAME_NOREPLACE).
    NoReplace,
    /// Swap source and target, which must both exist (RENAME_EXCHANGE).
    Exchange,
}

/// A timestamp to set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetTime {
    Now,
    At(i64),
}

/// Attribute changes (chmod, chown, truncate, utimens).
#[derive(Clone, Copy, Debug, Default)]
pub struct SetAttr {
    pub perm: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<SetTime>,
    pub mtime: Option<SetTime>,
}

fn ftype_of(raw: &InodeRaw) -> FileType {
    FileType::from_mode(raw.mode).expect("checked inode has a known type")
}

/// A directory entry on its way in: slots chosen (a new directory block reserved and zeroed
/// if needed), header and name written, the inode word still 0.
pub(crate) struct PendingEntry {
    alloc: SlotAlloc,
    slot_off: u64,
    ftype: FileType,
}

impl<D: PmDevice> FsInner<D> {
    /// Chooses slots for `name` in the locked directory and writes the entry's header and
    /// name; [`tx_add_entry`](Self::tx_add_entry) then makes it live.
    pub(crate) fn prepare_entry(
        &self,
        dir: &InodeCell,
        st: &mut InodeMem,
        name: &[u8],
        ftype: FileType,
    ) -> Result<PendingEntry> {
        let idx = self.index(dir, st)?;
        let alloc =
            idx.alloc(&*self.dev, &self.geo, &|lblk| self.claim_blocks(dir.ino.0, &[lblk], None), name.len())?;
        idx.write_pending_entry(&*self.dev, &self.geo, &alloc, name, ftype);
        let slot_off = idx.slot_dev_off(&self.geo, alloc.pos);
        Ok(PendingEntry { alloc, slot_off, ftype })
    }

    /// Adds to `tx` what makes the entry live (its inode word, the directory's new block,
    /// and `also`: a new symlink's block, mapped in the same structure change) and counts
    /// it in the directory inode `draw`.
    pub(crate) fn tx_add_entry<'a>(
        &'a self,
        tx: &mut Tx<'a, D>,
        dir: Ino,
        draw: &mut InodeRaw,
        e: &PendingEntry,
        ino: Ino,
        also: Option<(Ino, &mut InodeRaw, u64)>,
    ) -> Result<()> {
        let dir_pair = e.alloc.new_block.map(|(lblk, s)| [(lblk as u64, s)]);
        let sym_pair = also.as_ref().map(|a| [(0u64, a.2)]);
        let mut groups = Vec::with_capacity(2);
        // The directory's new block lies past its durable size, and the symlink's inode is
        // free on the media until the transaction commits: both keys may be unlogged.
        let dir_blocks = draw.size.div_ceil(BLOCK_BYTES);
        if let Some(p) = &dir_pair {
            groups.push(MapGroup { ino: dir.0, raw: &mut *draw, pairs: p, logged_below: dir_blocks });
        }
        if let (Some((sino, sraw, _)), Some(p)) = (also, &sym_pair) {
            groups.push(MapGroup { ino: sino.0, raw: sraw, pairs: p, logged_below: 0 });
        }
        if !groups.is_empty() {
            self.tx_map_blocks(tx, &mut groups)?;
        }
        if dir_pair.is_some() {
            draw.size += BLOCK_BYTES;
            draw.blocks += 1;
        }
        tx.write_u64(e.slot_off, ino.get());
        draw.dir_entries += 1;
        Ok(())
    }

    /// Records the entry in the directory index once its transaction committed, or gives
    /// its slots back when it did not.
    pub(crate) fn finish_entry(&self, st: &mut InodeMem, name: &[u8], e: PendingEntry, ino: Ino, committed: bool) {
        let idx = st.dir.as_mut().expect("a prepared entry's directory has its index");
        if committed {
            idx.insert(name, EntryRef { ino, ftype: e.ftype, pos: e.alloc.pos, nslots: e.alloc.nslots });
        } else {
            idx.unalloc(&|s| self.unclaim_blocks(&[s]), &e.alloc);
        }
    }
}

impl<D: PmDevice> FsInner<D> {
    /// The directory index of a locked directory, built on first use.
    pub(crate) fn index<'a>(&self, cell: &InodeCell, st: &'a mut InodeMem) -> Result<&'a mut DirIndex> {
        st.check_dir()?;
        if st.dir.is_none() {
            let raw = st.raw;
            let nblocks = raw.size / BLOCK_BYTES;
            let lookup = |lblk: u64| Ok(self.translate(cell, &raw, lblk, nblocks)?.map(|(p, _)| p));
            st.dir = Some(DirIndex::build(&*self.dev, &self.geo, &lookup, cell.ino, raw.size)?);
        }
        Ok(st.dir.as_mut().expect("just built"))
    }

    /// The inode a directory entry names; an entry naming a free inode is corruption.
    pub(crate) fn lookup(&self, parent: Ino, name: &[u8]) -> Result<(Ino, FileType)> {
        let (ino, ft) = self.lookup_entry(parent, name)?;
        match self.cell(ino) {
            Ok(_) => Ok((ino, ft)),
            Err(Error::Stale(i)) => Err(Error::corrupt(format!("directory {parent}: an entry names free inode {i}"))),
            Err(e) => Err(e),
        }
    }

    fn lookup_entry(&self, parent: Ino, name: &[u8]) -> Result<(Ino, FileType)> {
        if name.len() > MAX_NAME_BYTES {
            return Err(Error::NameTooLong);
        }
        let pcell = self.cell(parent)?;
        {
            let st = pcell.state.read();
            st.check_dir()?;
            if let Some(idx) = &st.dir {
                return idx.get(name).map(|e| (e.ino, e.ftype)).ok_or(Error::NotFound);
            }
        }
        let mut st = pcell.state.write();
        let idx = self.index(&pcell, &mut st)?;
        idx.get(name).map(|e| (e.ino, e.ftype)).ok_or(Error::NotFound)
    }

    pub(crate) fn create_node(
        &self,
        parent: Ino,
        name: &[u8],
        spec: NodeSpec<'_>,
        owner: Owner,
    ) -> Result<Arc<InodeCell>> {
        check_name(name)?;
        spec.validate()?;
        let pcell = self.cell(parent)?;
        let mut pst = pcell.state.write();
        if pst.raw.is_dir() && pst.raw.nlink == 0 {
            return Err(Error::NotFound);
        }
        let is_dir = matches!(spec, NodeSpec::Dir { .. });
        {
            let idx = self.index(&pcell, &mut pst)?;
            if idx.get(name).is_some() {
                return Err(Error::Exists);
            }
        }
        if is_dir && pst.raw.nlink >= MAX_LINKS {
            return Err(Error::TooManyLinks);
        }
        let ino = self.ialloc.alloc()?;
        let mut sym_slot = None;
        if let NodeSpec::Symlink { target } = spec {
            match self.claim_blocks(ino.0, &[0], None).map(|v| v[0]) {
                Ok(slot) => {
                    let mut blk = vec![0u8; BLOCK_BYTES as usize];
                    blk[..target.len()].copy_from_slice(target);
                    self.dev.write_nt(self.geo.block_off(slot), &blk);
                    sym_slot = Some(slot);
                }
                Err(e) => {
                    self.ialloc.free(ino);
                    return Err(e);
                }
            }
        }
        let now = inode::now_ns();
        let (ftype, mode, nlink, size, blocks) = match spec {
            NodeSpec::File { perm } => (FileType::Regular, S_IFREG | (perm & 0o7777), 1, 0, 0),
            NodeSpec::Dir { perm } => (FileType::Directory, S_IFDIR | (perm & 0o7777), 2, 0, 0),
            NodeSpec::Symlink { target } => (FileType::Symlink, S_IFLNK | 0o777, 1, target.len() as u64, 1),
            NodeSpec::Special { ftype, perm, .. } => (ftype, ftype.mode_bits() | (perm & 0o7777), 1, 0, 0),
        };
        let mut raw = inode::fresh_raw(mode, owner.uid, owner.gid, now);
        raw.nlink = nlink;
        raw.size = size;
        raw.blocks = blocks;
        raw.parent = if is_dir { parent.get() } else { 0 };
        if let NodeSpec::Special { rdev, .. } = spec {
            raw.reserved[0] = rdev; // special files map nothing: the area holds rdev
        }

        let entry = match self.prepare_entry(&pcell, &mut pst, name, ftype) {
            Ok(e) => e,
            Err(e) => {
                if let Some(s) = sym_slot {
                    self.unclaim_blocks(&[s]);
                }
                self.ialloc.free(ino);
                return Err(e);
            }
        };
        let mut praw = pst.raw;
        if is_dir {
            praw.nlink += 1;
        }
        praw.mtime_ns = now;
        praw.ctime_ns = now;

        let committed = {
            let mut tx = self.journals.begin();
            match self.tx_add_entry(&mut tx, parent, &mut praw, &entry, ino, sym_slot.map(|s| (ino, &mut raw, s))) {
                Ok(()) => {
                    inode::tx_write_inode(&mut tx, &self.geo, ino, &mut raw);
                    inode::tx_write_inode(&mut tx, &self.geo, parent, &mut praw);
                    tx.commit()
                }
                Err(e) => Err(e),
            }
        };
        self.finish_entry(&mut pst, name, entry, ino, committed.is_ok());
        if let Err(e) = committed {
            if let Some(s) = sym_slot {
                self.unclaim_blocks(&[s]);
            }
            self.ialloc.free(ino);
            return Err(e);
        }
        pst.raw = praw;
        let cell = Arc::new(InodeCell::new(ino, raw));
        if let (Some(s), crate::mapping::FileMap::Hash(_)) = (sym_slot, &self.map) {
            cell.tcache.put(0, s);
        }
        self.inodes.insert(cell.clone());
        Ok(cell)
    }

    pub(crate) fn link(&self, ino: Ino, new_parent: Ino, name: &[u8]) -> Result<()> {
        check_name(name)?;
        let pcell = self.cell(new_parent)?;
        let ccell = self.cell(ino)?;
        let mut pst = pcell.state.write();
        if pst.raw.is_dir() && pst.raw.nlink == 0 {
            return Err(Error::NotFound);
        }
        // As Linux: an existing name is reported before the directory check.
        if self.index(&pcell, &mut pst)?.get(name).is_some() {
            return Err(Error::Exists);
        }
        if ccell.ino == new_parent || ccell.state.read().raw.is_dir() {
            return Err(Error::NotPermitted);
        }
        let mut cst = ccell.state.write();
        if cst.freed || cst.raw.nlink == 0 {
            return Err(Error::NotFound);
        }
        if cst.raw.nlink >= MAX_LINKS {
            return Err(Error::TooManyLinks);
        }
        let ftype = ftype_of(&cst.raw);
        let entry = self.prepare_entry(&pcell, &mut pst, name, ftype)?;
        let now = inode::now_ns();
        let mut praw = pst.raw;
        praw.mtime_ns = now;
        praw.ctime_ns = now;
        let mut craw = cst.raw;
        craw.nlink += 1;
        craw.ctime_ns = now;
        let committed = {
            let mut tx = self.journals.begin();
            match self.tx_add_entry(&mut tx, new_parent, &mut praw, &entry, ino, None) {
                Ok(()) => {
                    inode::tx_write_inode(&mut tx, &self.geo, new_parent, &mut praw);
                    inode::tx_write_inode(&mut tx, &self.geo, ino, &mut craw);
                    tx.commit()
                }
                Err(e) => Err(e),
            }
        };
        self.finish_entry(&mut pst, name, entry, ino, committed.is_ok());
        committed?;
        pst.raw = praw;
        cst.raw = craw;
        Ok(())
    }

    pub(crate) fn remove(&self, parent: Ino, name: &[u8], kind: RemoveKind) -> Result<()> {
        if name.len() > MAX_NAME_BYTES {
            return Err(Error::NameTooLong);
        }
        if name == b"." || name == b".." {
            return Err(if kind == RemoveKind::Dir && name == b".." {
                Error::NotEmpty
            } else {
                Error::Invalid("cannot remove . or ..")
            });
        }
        let pcell = self.cell(parent)?;
        let mut pst = pcell.state.write();
        let e = self.index(&pcell, &mut pst)?.get(name).ok_or(Error::NotFound)?;
        match (kind, e.ftype) {
            (RemoveKind::NonDir, FileType::Directory) => return Err(Error::IsDir),
            (RemoveKind::Dir, t) if t != FileType::Directory => return Err(Error::NotDir),
            _ => {}
        }
        let ccell = self.cell(e.ino)?;
        let mut cst = ccell.state.write();
        if kind == RemoveKind::Dir && cst.raw.dir_entries > 0 {
            return Err(Error::NotEmpty);
        }
        let now = inode::now_ns();
        let slot_off = pst.dir.as_ref().expect("index built").slot_dev_off(&self.geo, e.pos);
        let mut praw = pst.raw;
        praw.dir_entries -= 1;
        praw.mtime_ns = now;
        praw.ctime_ns = now;
        let mut craw = cst.raw;
        craw.ctime_ns = now;
        if kind == RemoveKind::Dir {
            praw.nlink -= 1;
            craw.nlink = 0;
        } else {
            craw.nlink -= 1;
        }
        let mut tx = self.journals.begin();
        tx.write_u64(slot_off, 0);
        inode::tx_write_inode(&mut tx, &self.geo, parent, &mut praw);
        inode::tx_write_inode(&mut tx, &self.geo, e.ino, &mut craw);
        tx.commit()?;
        pst.raw = praw;
        cst.raw = craw;
        pst.dir.as_mut().expect("index built").remove(name);
        drop(pst);
        self.maybe_free(&ccell, &mut cst)
    }

    /// Frees an inode once it has neither links nor open handles.
    pub(crate) fn maybe_free(&self, cell: &InodeCell, st: &mut InodeMem) -> Result<()> {
        if st.raw.nlink == 0 && !st.freed && cell.open_count.load(std::sync::atomic::Ordering::Acquire) == 0 {
            self.free_inode_locked(cell, st)?;
        }
        Ok(())
    }

    /// `d` and its ancestors up to the root. Parent pointers change only under the rename
    /// lock, so the chain is stable while the caller holds it.
    fn ancestors(&self, mut d: Ino) -> Result<Vec<Ino>> {
        self.cell(d)?.state.read().check_dir()?;
        let mut chain = vec![d];
        for _ in 0..=self.geo.inode_count {
            if d == Ino::ROOT {
                return Ok(chain);
            }
            let p = self.cell(d)?.state.read().raw.parent;
            if p == 0 || p > u32::MAX as u64 {
                return Err(Error::corrupt(format!("directory {d} has no valid parent")));
            }
            d = Ino(p as u32);
            chain.push(d);
        }
        Err(Error::corrupt("directory parent chain has a cycle"))
    }

    pub(crate) fn rename(&self, sp: Ino, sname: &[u8], dp: Ino, dname: &[u8], mode: RenameMode) -> Result<()> {
        check_rename_names(sname, dname)?;
        let _rename = self.rename_lock.lock();
        let scell = self.cell(sp)?;
        let dcell = self.cell(dp)?;
        // Ancestry is read before any directory is locked (the walk takes read locks).
        let sp_chain = self.ancestors(sp)?;
        let dp_chain = self.ancestors(dp)?;
        // Lock the two directories, ancestor first (else by number).
        let src_first = if sp == dp || dp_chain.contains(&sp) {
            true
        } else if sp_chain.contains(&dp) {
            false
        } else {
            sp < dp
        };
        let (mut g1, mut g2): (RwLockWriteGuard<'_, InodeMem>, Option<RwLockWriteGuard<'_, InodeMem>>);
        if sp == dp {
            g1 = scell.state.write();
            g2 = None;
        } else if src_first {
            g1 = scell.state.write();
            g2 = Some(dcell.state.write());
        } else {
            let d = dcell.state.write();
            g1 = scell.state.write();
            g2 = Some(d);
        }
        // From here on g1 is the source directory and g2 (if any) the target directory.
        for (c, g) in [(&scell, Some(&mut g1)), (&dcell, g2.as_mut())] {
            if let Some(g) = g {
                let st: &mut InodeMem = g;
                self.index(c, st)?;
                if st.raw.nlink == 0 {
                    return Err(Error::NotFound);
                }
            }
        }
        let src = g1.dir.as_ref().expect("index").get(sname).ok_or(Error::NotFound)?;
        let dst = match &g2 {
            Some(g) => g.dir.as_ref().expect("index").get(dname),
            None => g1.dir.as_ref().expect("index").get(dname),
        };
        if check_rename_kinds(mode, sp, src, dst, &sp_chain, &dp_chain)? == RenameCheck::Nothing {
            return Ok(());
        }
        let src_is_dir = src.ftype == FileType::Directory;
        // Lock the moved inode and the replaced one (children of the locked directories).
        let src_cell = self.cell(src.ino)?;
        let dst_cell = match dst {
            Some(d) => Some(self.cell(d.ino)?),
            None => None,
        };
        let (mut sg, mut dg) = match &dst_cell {
            Some(dc) if dc.ino < src_cell.ino => {
                let d = dc.state.write();
                (src_cell.state.write(), Some(d))
            }
            Some(dc) => {
                let s = src_cell.state.write();
                (s, Some(dc.state.write()))
            }
            None => (src_cell.state.write(), None),
        };
        if let (Some(g), RenameMode::Replace | RenameMode::NoReplace) = (&dg, mode) {
            if g.raw.is_dir() && g.raw.dir_entries > 0 {
                return Err(Error::NotEmpty);
            }
        }

        let now = inode::now_ns();
        let same_dir = g2.is_none();
        let mut sraw = g1.raw;
        let mut draw_dir = g2.as_ref().map(|g| g.raw);
        let mut moved = sg.raw;
        let mut replaced = dg.as_ref().map(|g| g.raw);
        let src_off = g1.dir.as_ref().expect("index").slot_dev_off(&self.geo, src.pos);
        let mut tx = self.journals.begin();
        let mut pending = None;
        {
            // The target directory's inode: the source directory's when they are one.
            let ddir_raw: &mut InodeRaw = draw_dir.as_mut().unwrap_or(&mut sraw);
            match (mode, dst) {
                (RenameMode::Exchange, Some(d)) => {
                    let d_off = match &g2 {
                        Some(g) => g.dir.as_ref().expect("index").slot_dev_off(&self.geo, d.pos),
                        None => g1.dir.as_ref().expect("index").slot_dev_off(&self.geo, d.pos),
                    };
                    tx.write_u64(src_off, d.ino.get());
                    tx.write_u64(src_off + 8, DirIndex::header_word1(src.nslots, sname.len(), d.ftype));
                    tx.write_u64(d_off, src.ino.get());
                    tx.write_u64(d_off + 8, DirIndex::header_word1(d.nslots, dname.len(), src.ftype));
                    let r = replaced.as_mut().expect("exchange target");
                    r.ctime_ns = now;
                    if !same_dir {
                        if src_is_dir {
                            moved.parent = dp.get();
                            ddir_raw.nlink += 1;
                        }
                        if d.ftype == FileType::Directory {
                            r.parent = sp.get();
                            ddir_raw.nlink -= 1;
                        }
                    }
                }
                (_, Some(d)) => {
                    let d_off = match &g2 {
                        Some(g) => g.dir.as_ref().expect("index").slot_dev_off(&self.geo, d.pos),
                        None => g1.dir.as_ref().expect("index").slot_dev_off(&self.geo, d.pos),
                    };
                    tx.write_u64(src_off, 0);
                    tx.write_u64(d_off, src.ino.get());
                    tx.write_u64(d_off + 8, DirIndex::header_word1(d.nslots, dname.len(), src.ftype));
                    let r = replaced.as_mut().expect("target");
                    r.ctime_ns = now;
                    if d.ftype == FileType::Directory {
                        r.nlink = 0;
                        ddir_raw.nlink -= 1;
                    } else {
                        r.nlink -= 1;
                    }
                    if src_is_dir {
                        moved.parent = dp.get();
                        ddir_raw.nlink += 1;
                    }
                }
                (_, None) => {
                    let (gd, dcell_ref) = match g2.as_mut() {
                        Some(g) => (g, &dcell),
                        None => (&mut g1, &scell),
                    };
                    let entry = self.prepare_entry(dcell_ref, gd, dname, src.ftype)?;
                    tx.write_u64(src_off, 0);
                    if let Err(e) = self.tx_add_entry(&mut tx, dp, ddir_raw, &entry, src.ino, None) {
                        self.finish_entry(gd, dname, entry, src.ino, false);
                        return Err(e);
                    }
                    if src_is_dir {
                        moved.parent = dp.get();
                        ddir_raw.nlink += 1;
                    }
                    pending = Some(entry);
                }
            }
            ddir_raw.mtime_ns = now;
            ddir_raw.ctime_ns = now;
        }
        if mode != RenameMode::Exchange {
            sraw.dir_entries -= 1;
            if src_is_dir {
                sraw.nlink -= 1;
            }
        } else if !same_dir {
            if src_is_dir {
                sraw.nlink -= 1;
            }
            if dst.is_some_and(|d| d.ftype == FileType::Directory) {
                sraw.nlink += 1;
            }
        }
        sraw.mtime_ns = now;
        sraw.ctime_ns = now;
        moved.ctime_ns = now;
        inode::tx_write_inode(&mut tx, &self.geo, sp, &mut sraw);
        if let Some(r) = draw_dir.as_mut() {
            inode::tx_write_inode(&mut tx, &self.geo, dp, r);
        }
        inode::tx_write_inode(&mut tx, &self.geo, src.ino, &mut moved);
        if let (Some(r), Some(d)) = (replaced.as_mut(), dst) {
            inode::tx_write_inode(&mut tx, &self.geo, d.ino, r);
        }
        if let Err(e) = tx.commit() {
            if let Some(entry) = pending {
                let gd = g2.as_mut().unwrap_or(&mut g1);
                self.finish_entry(gd, dname, entry, src.ino, false);
            }
            return Err(e);
        }
        // Mirror the committed change in DRAM.
        g1.raw = sraw;
        if let (Some(g), Some(r)) = (g2.as_mut(), draw_dir) {
            g.raw = r;
        }
        sg.raw = moved;
        if let (Some(g), Some(r)) = (dg.as_mut(), replaced) {
            g.raw = r;
        }
        match (mode, dst) {
            (RenameMode::Exchange, Some(d)) => {
                g1.dir.as_mut().expect("index").replace(sname, d.ino, d.ftype);
                let gd = g2.as_mut().unwrap_or(&mut g1);
                gd.dir.as_mut().expect("index").replace(dname, src.ino, src.ftype);
            }
            (_, Some(_)) => {
                g1.dir.as_mut().expect("index").remove(sname);
                let gd = g2.as_mut().unwrap_or(&mut g1);
                gd.dir.as_mut().expect("index").replace(dname, src.ino, src.ftype);
            }
            (_, None) => {
                g1.dir.as_mut().expect("index").remove(sname);
                let gd = g2.as_mut().unwrap_or(&mut g1);
                self.finish_entry(gd, dname, pending.expect("a new entry"), src.ino, true);
            }
        }
        drop(g2);
        drop(g1);
        drop(sg);
        if let (Some(dc), Some(mut g), RenameMode::Replace) = (dst_cell.as_ref(), dg, mode) {
            self.maybe_free(dc, &mut g)?;
        }
        Ok(())
    }

    pub(crate) fn setattr(&self, ino: Ino, attr: &SetAttr) -> Result<InodeRaw> {
        let cell = self.cell(ino)?;
        let mut st = cell.state.write();
        if st.freed {
            return Err(Error::NotFound);
        }
        if let Some(size) = attr.size {
            if st.raw.is_dir() {
                return Err(Error::IsDir);
            }
            if !st.raw.is_reg() {
                return Err(Error::Invalid("size of a non-regular file"));
            }
            self.set_len_locked(&cell, &mut st, size)?;
        }
        let now = inode::now_ns();
        let mut raw = st.raw;
        if let Some(p) = attr.perm {
            raw.mode = (raw.mode & S_IFMT) | (p & 0o7777);
        }
        if let Some(u) = attr.uid {
            raw.uid = u;
        }
        if let Some(g) = attr.gid {
            raw.gid = g;
        }
        let t = |s: SetTime| match s {
            SetTime::Now => now,
            SetTime::At(v) => v,
        };
        if let Some(a) = attr.atime {
            raw.atime_ns = t(a);
        }
        if let Some(m) = attr.mtime {
            raw.mtime_ns = t(m);
        }
        raw.ctime_ns = now;
        let mut tx = self.journals.begin();
        inode::tx_write_inode(&mut tx, &self.geo, ino, &mut raw);
        tx.commit()?;
        st.raw = raw;
        Ok(raw)
    }

    pub(crate) fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        let cell = self.cell(ino)?;
        let st = cell.state.read();
        if !st.raw.is_symlink() {
            return Err(Error::Invalid("not a symbolic link"));
        }
        let (slot, _) = self
            .translate(&cell, &st.raw, 0, 1)?
            .ok_or_else(|| Error::corrupt(format!("symlink {ino} has no data block")))?;
        let mut buf = vec![0u8; st.raw.size as usize];
        self.dev.read(self.geo.block_off(slot), &mut buf);
        Ok(buf)
    }

    pub(crate) fn readdir(&self, ino: Ino, cookie: u64, max: usize) -> Result<Vec<RawDirEntry>> {
        let cell = self.cell(ino)?;
        let mut st = cell.state.write();
        self.index(&cell, &mut st)?;
        dir::list_from(&*self.dev, &self.geo, st.dir.as_ref().expect("index"), cookie, max)
    }
}

/// Whether a rename that passed its checks has anything to do.
#[derive(Debug, PartialEq, Eq)]
enum RenameCheck {
    Proceed,
    /// Source and target are two links to one inode: POSIX says do nothing.
    Nothing,
}

/// rename's checks on the names alone.
fn check_rename_names(sname: &[u8], dname: &[u8]) -> Result<()> {
    for n in [sname, dname] {
        if n.len() > MAX_NAME_BYTES {
            return Err(Error::NameTooLong);
        }
    }
    if sname == b"." || sname == b".." {
        return Err(Error::Invalid("cannot rename . or .."));
    }
    check_name(dname).map_err(|e| {
        if matches!(e, Error::Invalid(_)) {
            Error::Invalid("cannot rename onto . or ..")
        } else {
            e
        }
    })
}

/// rename's rules on what the entries are: the mode against the target's existence, a
/// directory never moved into itself, types matched (a directory replaces only a
/// directory), and the target directory not the source's own parent.
fn check_rename_kinds(
    mode: RenameMode,
    sp: Ino,
    src: EntryRef,
    dst: Option<EntryRef>,
    sp_chain: &[Ino],
    dp_chain: &[Ino],
) -> Result<RenameCheck> {
    match (mode, dst) {
        (RenameMode::NoReplace, Some(_)) => return Err(Error::Exists),
        (RenameMode::Exchange, None) => return Err(Error::NotFound),
        _ => {}
    }
    if dst.is_some_and(|d| d.ino == src.ino) {
        return Ok(RenameCheck::Nothing);
    }
    let src_is_dir = src.ftype == FileType::Directory;
    if src_is_dir && dp_chain.contains(&src.ino) {
        return Err(Error::Invalid("cannot move a directory into itself"));
    }
    if let Some(d) = dst {
        let dst_is_dir = d.ftype == FileType::Directory;
        if mode == RenameMode::Exchange {
            if dst_is_dir && sp_chain.contains(&d.ino) {
                return Err(Error::Invalid("cannot move a directory into itself"));
            }
        } else if src_is_dir && !dst_is_dir {
            return Err(Error::NotDir);
        } else if !src_is_dir && dst_is_dir {
            return Err(Error::IsDir);
        } else if d.ino == sp {
            return Err(Error::NotEmpty); // the target directory holds the source
        }
    }
    Ok(RenameCheck::Proceed)
}
