//! Namespace operations on inodes: create, link, unlink, rmdir, rename, setattr, readdir,
//! readlink. Each is one journaled transaction, atomic and durable when it returns.

use super::data::MapGroup;
use super::dir::{self, check_name, DirIndex, EntryRef, RawDirEntry, SlotAlloc};
use super::inode::{self, InodeCell, InodeMem};
use super::perm::{MAY_EXEC, MAY_WRITE};
use super::verbs::{on_map, MapVerbs};
use super::FsInner;
use crate::journal::Tx;
use crate::layout::dirent::FileType;
use crate::layout::inode::{InodeRaw, S_IFDIR, S_IFLNK, S_IFMT, S_IFREG};
use crate::layout::{Ino, Lblk, Pblk, BLOCK_BYTES, MAX_LINKS, MAX_NAME_BYTES, MAX_SYMLINK_BYTES};
use crate::pm::{DevOffset, PmDevice};
use crate::{Error, Result};
use std::sync::Arc;

/// The set-group-ID bit.
const S_ISGID: u32 = 0o2000;

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
    fn file_type(&self) -> FileType {
        match *self {
            NodeSpec::File { .. } => FileType::Regular,
            NodeSpec::Dir { .. } => FileType::Directory,
            NodeSpec::Symlink { .. } => FileType::Symlink,
            NodeSpec::Special { ftype, .. } => ftype,
        }
    }

    /// The new inode's type and contents.
    fn initial_inode(&self, parent: Ino, owner: Owner, now: i64) -> (FileType, InodeRaw) {
        let (ftype, mode, nlink, size, blocks) = match *self {
            NodeSpec::File { perm } => (FileType::Regular, S_IFREG | (perm & 0o7777), 1, 0, 0),
            NodeSpec::Dir { perm } => (FileType::Directory, S_IFDIR | (perm & 0o7777), 2, 0, 0),
            NodeSpec::Symlink { target } => (FileType::Symlink, S_IFLNK | 0o777, 1, target.len() as u64, 1),
            NodeSpec::Special { ftype, perm, .. } => (ftype, ftype.mode_bits() | (perm & 0o7777), 1, 0, 0),
        };
        let mut raw = inode::fresh_raw(mode, owner.uid, owner.gid, now);
        raw.nlink = nlink;
        raw.size = size;
        raw.blocks = blocks;
        raw.parent = if ftype == FileType::Directory { parent.0 } else { 0 };
        if let NodeSpec::Special { rdev, .. } = *self {
            raw.set_rdev(rdev); // special files map nothing: the mapping area holds rdev
        }
        (ftype, raw)
    }

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

/// The permission bits left when Linux drops a file's set-ID privileges: on every owner
/// or group change (root's chown too), and on a write or truncation by a caller without
/// CAP_FSETID: set-user-ID cleared, and set-group-ID when the group may execute (without
/// group execute it marks mandatory locking and stays); a directory keeps both. Every
/// front end applies it (the shim's chown; the mount's setattr and writes, where
/// FUSE_HANDLE_KILLPRIV_V2 leaves it to the daemon; the stacked mount's writes).
pub fn perm_without_set_id(perm: u32, ftype: FileType) -> u32 {
    if ftype == FileType::Directory {
        return perm;
    }
    let p = perm & !0o4000;
    if p & 0o010 != 0 {
        p & !0o2000
    } else {
        p
    }
}

fn ftype_of(raw: &InodeRaw) -> FileType {
    FileType::from_mode(raw.mode).expect("checked inode has a known type")
}

/// A directory entry on its way in: slots chosen (a new directory block reserved and zeroed
/// if needed), header and name written, the inode word still 0.
pub(crate) struct PendingEntry {
    alloc: SlotAlloc,
    slot_off: DevOffset,
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
        let blocks = Some(st.raw.blocks);
        let idx = self.index(dir, st)?;
        let alloc = idx.alloc(
            &*self.dev,
            &self.geo,
            &|lblk| Ok(self.claim_blocks(dir.ino, &[lblk], None, blocks)?[0]),
            name.len(),
        )?;
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
        also: Option<(Ino, &mut InodeRaw, Pblk)>,
    ) -> Result<()> {
        let dir_pair = e.alloc.new_block.map(|pair| [pair]);
        let sym_pair = also.as_ref().map(|a| [(Lblk(0), a.2)]);
        let mut groups = Vec::with_capacity(2);
        // The directory's new block lies past its durable size, and the symlink's inode is
        // free on the media until the transaction commits: both keys may be unlogged.
        let dir_blocks = Lblk(draw.size.div_ceil(BLOCK_BYTES));
        if let Some(p) = &dir_pair {
            groups.push(MapGroup { ino: dir, raw: &mut *draw, pairs: p, logged_below: dir_blocks });
        }
        if let (Some((sino, sraw, _)), Some(p)) = (also, &sym_pair) {
            groups.push(MapGroup { ino: sino, raw: sraw, pairs: p, logged_below: Lblk(0) });
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

    /// Records a prepared entry in the directory index once its transaction committed.
    pub(crate) fn record_entry(&self, st: &mut InodeMem, name: &[u8], e: PendingEntry, ino: Ino) {
        let idx = st.dir.as_mut().expect("a prepared entry's directory has its index");
        idx.insert(name, EntryRef { ino, ftype: e.ftype, pos: e.alloc.pos, nslots: e.alloc.nslots });
    }

    /// Gives a prepared entry's slots back: its transaction did not commit.
    pub(crate) fn drop_entry(&self, st: &mut InodeMem, e: PendingEntry) {
        let idx = st.dir.as_mut().expect("a prepared entry's directory has its index");
        idx.unalloc(&|s| self.unclaim_blocks(&[s]), &e.alloc);
    }

    /// [`record_entry`](Self::record_entry) or [`drop_entry`](Self::drop_entry), as the
    /// entry's transaction ended (`committed`).
    pub(crate) fn finish_entry(
        &self,
        st: &mut InodeMem,
        name: &[u8],
        e: PendingEntry,
        ino: Ino,
        committed: &Result<()>,
    ) {
        match committed {
            Ok(_) => self.record_entry(st, name, e, ino),
            Err(_) => self.drop_entry(st, e),
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
            let lookup = |lblk: Lblk| Ok(self.translate(cell, &raw, lblk, nblocks)?.map(|e| e.pblk));
            st.dir = Some(DirIndex::build(&*self.dev, &self.geo, &lookup, cell.ino, raw.size)?);
        }
        Ok(st.dir.as_mut().expect("just built"))
    }

    /// The inode a directory entry names; an entry naming a free inode is corruption.
    ///
    /// The entry is read under the directory's lock and the inode after it: a remove in
    /// another thread may take the name away and free the inode between the two (the
    /// races test saw it under load). So a free inode is looked up again, and only an
    /// entry that still names it is corruption; one gone is NotFound, as a lookup after
    /// the remove would say, and a name taken again gives its new inode.
    pub(crate) fn lookup(&self, parent: Ino, name: &[u8]) -> Result<(Ino, FileType)> {
        let (mut ino, mut ft) = self.lookup_entry(parent, name)?;
        for _ in 0..8 {
            match self.cell(ino) {
                Err(Error::Stale(_)) => {}
                r => return r.map(|_| (ino, ft)),
            }
            let (again, aft) = self.lookup_entry(parent, name)?;
            if again == ino {
                break;
            }
            (ino, ft) = (again, aft);
        }
        Err(Error::corrupt(format!("directory {parent}: an entry names free inode {ino}")))
    }

    fn lookup_entry(&self, parent: Ino, name: &[u8]) -> Result<(Ino, FileType)> {
        if name.len() > MAX_NAME_BYTES {
            return Err(Error::NameTooLong);
        }
        let pcell = self.cell(parent)?;
        {
            let st = pcell.state.read();
            st.check_dir()?;
            self.may(&st.raw, MAY_EXEC)?;
            if let Some(idx) = &st.dir {
                return idx.get(name).map(|e| (e.ino, e.ftype)).ok_or(Error::NotFound);
            }
        }
        let mut st = pcell.state.write();
        let idx = self.index(&pcell, &mut st)?;
        idx.get(name).map(|e| (e.ino, e.ftype)).ok_or(Error::NotFound)
    }

    /// Creates `name` in `parent` in one transaction: the new inode (and a symlink's
    /// block), the entry, and the parent's link count and times.
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
        self.check_new_entry(&pcell, &mut pst, name, spec.file_type())?;
        self.may(&pst.raw, MAY_WRITE | MAY_EXEC)?;
        let ino = self.alloc_ino()?;
        let sym_slot = match spec {
            NodeSpec::Symlink { target } => match self.write_symlink_block(ino, target) {
                Ok(slot) => Some(slot),
                Err(e) => {
                    self.free_ino(ino);
                    return Err(e);
                }
            },
            _ => None,
        };
        let now = inode::now_ns();
        let (ftype, mut raw) = spec.initial_inode(parent, owner, now);
        // A set-group-ID directory gives what is made in it its group, and a new
        // directory the bit too (Linux's inode_init_owner; the mount's daemon asks for the
        // same already, the shim's caller's group).
        if pst.raw.mode & S_ISGID != 0 {
            raw.gid = pst.raw.gid;
            if ftype == FileType::Directory {
                raw.mode |= S_ISGID;
            }
        }
        if let Err(e) = self.commit_new_node(&pcell, &mut pst, name, ino, ftype, &mut raw, sym_slot, now) {
            if let Some(s) = sym_slot {
                self.unclaim_blocks(&[s]);
            }
            self.free_ino(ino);
            return Err(e);
        }
        let cell = Arc::new(InodeCell::new(ino, raw));
        if let Some(s) = sym_slot {
            on_map!(self, m => m.mapped(&cell, &[(Lblk(0), s)]));
        }
        self.inodes.insert(cell.clone());
        Ok(cell)
    }

    /// create's refusals that depend on the parent: removed, name taken, too many links.
    fn check_new_entry(&self, pcell: &InodeCell, pst: &mut InodeMem, name: &[u8], ftype: FileType) -> Result<()> {
        if pst.raw.is_dir() && pst.raw.nlink == 0 {
            return Err(Error::NotFound);
        }
        if self.index(pcell, pst)?.get(name).is_some() {
            return Err(Error::Exists);
        }
        if ftype == FileType::Directory && pst.raw.nlink >= MAX_LINKS {
            return Err(Error::TooManyLinks);
        }
        Ok(())
    }

    /// Claims a symlink's block and writes its target there (not yet mapped).
    fn write_symlink_block(&self, ino: Ino, target: &[u8]) -> Result<Pblk> {
        // The new inode is free on the media until its transaction commits.
        let slot = self.claim_blocks(ino, &[Lblk(0)], None, None)?[0];
        let mut blk = vec![0u8; BLOCK_BYTES as usize];
        blk[..target.len()].copy_from_slice(target);
        self.dev.write_nt(self.geo.block_off(slot), &blk);
        Ok(slot)
    }

    /// The transaction of a create: entry, symlink block mapping, new inode, parent.
    #[allow(clippy::too_many_arguments)]
    fn commit_new_node(
        &self,
        pcell: &InodeCell,
        pst: &mut InodeMem,
        name: &[u8],
        ino: Ino,
        ftype: FileType,
        raw: &mut InodeRaw,
        sym_slot: Option<Pblk>,
        now: i64,
    ) -> Result<()> {
        let parent = pcell.ino;
        let entry = self.prepare_entry(pcell, pst, name, ftype)?;
        let mut praw = pst.raw;
        if ftype == FileType::Directory {
            praw.nlink += 1;
        }
        praw.mtime_ns = now;
        praw.ctime_ns = now;
        let committed = {
            let mut tx = self.journals.begin();
            match self.tx_add_entry(&mut tx, parent, &mut praw, &entry, ino, sym_slot.map(|s| (ino, &mut *raw, s))) {
                Ok(()) => {
                    inode::tx_write_inode(&mut tx, &self.geo, ino, raw);
                    inode::tx_write_inode(&mut tx, &self.geo, parent, &mut praw);
                    tx.commit()
                }
                Err(e) => Err(e),
            }
        };
        self.finish_entry(pst, name, entry, ino, &committed);
        committed?;
        pst.raw = praw;
        Ok(())
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
        self.may(&pst.raw, MAY_WRITE | MAY_EXEC)?;
        if ccell.ino == new_parent || ccell.state.read().raw.is_dir() {
            return Err(Error::NotPermitted);
        }
        self.may_link(&ccell.state.read().raw)?;
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
        self.finish_entry(&mut pst, name, entry, ino, &committed);
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
        let ccell = self.cell(e.ino)?;
        let mut cst = ccell.state.write();
        // As Linux's may_delete: permission before the entry's kind.
        self.may_delete(&pst.raw, &cst.raw)?;
        match (kind, e.ftype) {
            (RemoveKind::NonDir, FileType::Directory) => return Err(Error::IsDir),
            (RemoveKind::Dir, t) if t != FileType::Directory => return Err(Error::NotDir),
            _ => {}
        }
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
        // The last link of a file (or an empty directory) no one has open: on HashFS freed
        // in this transaction (`fs/hashfs/unlink.rs`).
        let freeing = if craw.nlink == 0 { self.plan_free_with_name(&ccell, &cst) } else { None };
        let mut tx = self.journals.begin();
        tx.write_u64(slot_off, 0);
        inode::tx_write_inode(&mut tx, &self.geo, parent, &mut praw);
        if freeing.is_some() {
            inode::tx_free_inode(&mut tx, &self.geo, e.ino);
        } else {
            inode::tx_write_inode(&mut tx, &self.geo, e.ino, &mut craw);
        }
        tx.commit()?;
        pst.raw = praw;
        cst.raw = craw;
        pst.dir.as_mut().expect("index built").remove(name);
        drop(pst);
        match freeing {
            Some(planned) => {
                self.finish_free_with_name(&ccell, &mut cst, &planned);
                Ok(())
            }
            None => self.maybe_free(&ccell, &mut cst),
        }
    }

    /// Frees an inode once it has neither links nor open handles.
    pub(crate) fn maybe_free(&self, cell: &InodeCell, st: &mut InodeMem) -> Result<()> {
        if st.raw.nlink == 0
            && !st.freed
            && cell.open_count.load(std::sync::atomic::Ordering::Acquire) == 0
            && !self.open_elsewhere(cell.ino)
        {
            self.free_inode_locked(cell, st)?;
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
        if raw == st.raw {
            // Nothing moves but the change time (a chown to the owner the file has, as
            // SQLite's on each rollback journal it makes): the times lie outside the
            // inode's checksum and are stored in place, with the times a write left
            // pending, durable when the call returns as a transaction's would be, with
            // one fence for its three.
            st.raw.ctime_ns = now;
            self.note_times_pending(&mut st);
            self.persist_times(&cell, &mut st);
            return Ok(st.raw);
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
        let e = self
            .translate(&cell, &st.raw, Lblk(0), 1)?
            .ok_or_else(|| Error::corrupt(format!("symlink {ino} has no data block")))?;
        let mut buf = vec![0u8; st.raw.size as usize];
        self.dev.read(self.geo.block_off(e.pblk), &mut buf);
        Ok(buf)
    }

    pub(crate) fn readdir(&self, ino: Ino, cookie: u64, max: usize) -> Result<Vec<RawDirEntry>> {
        let cell = self.cell(ino)?;
        let mut st = cell.state.write();
        self.index(&cell, &mut st)?;
        dir::list_from(&*self.dev, &self.geo, st.dir.as_ref().expect("index"), cookie, max)
    }
}
