//! rename(2), in passes: check the names, lock the directories (ancestor first), look up
//! and validate the entries, lock the moved and replaced inodes, stage every change in one
//! journaled transaction, commit, then mirror the committed change in DRAM.

#![forbid(unsafe_code)]

use super::dir::{check_name, DirIndex, EntryRef};
use super::inode::{self, InodeCell, InodeMem};
use super::ops::{PendingEntry, RenameMode};
use super::perm::{MAY_EXEC, MAY_WRITE};
use super::race_point;
use super::FsInner;
use crate::journal::Tx;
use crate::layout::dirent::FileType;
use crate::layout::inode::InodeRaw;
use crate::layout::{Ino, MAX_NAME_BYTES};
use crate::pm::PmDevice;
use crate::{Error, Result};
use parking_lot::RwLockWriteGuard;

type Guard<'a> = RwLockWriteGuard<'a, InodeMem>;

/// The two directories of a rename, write-locked; `dst` is `None` when both names live in
/// one directory.
struct Dirs<'a> {
    src: Guard<'a>,
    dst: Option<Guard<'a>>,
}

impl Dirs<'_> {
    /// The directory that receives the name.
    fn target(&mut self) -> &mut InodeMem {
        self.dst.as_deref_mut().unwrap_or(&mut self.src)
    }

    fn target_index(&self) -> &DirIndex {
        self.dst.as_deref().unwrap_or(&self.src).dir.as_ref().expect("locked directories are indexed")
    }

    fn src_index(&self) -> &DirIndex {
        self.src.dir.as_ref().expect("locked directories are indexed")
    }
}

/// One rename: its names and the entries they found.
#[derive(Clone, Copy)]
struct Move<'n> {
    sp: Ino,
    sname: &'n [u8],
    dp: Ino,
    dname: &'n [u8],
    mode: RenameMode,
    src: EntryRef,
    dst: Option<EntryRef>,
    /// The replaced file's last link goes, and the rename's transaction frees it (HashFS,
    /// `fs/hashfs/unlink.rs`).
    free_replaced: bool,
}

impl Move<'_> {
    fn src_is_dir(&self) -> bool {
        self.src.ftype == FileType::Directory
    }

    fn dst_is_dir(&self) -> bool {
        self.dst.is_some_and(|d| d.ftype == FileType::Directory)
    }
}

/// The inodes a rename rewrites, as they are once it commits.
struct Staged {
    /// The source directory (also the target directory when they are one).
    sdir: InodeRaw,
    /// The target directory when it is another.
    ddir: Option<InodeRaw>,
    moved: InodeRaw,
    replaced: Option<InodeRaw>,
    /// A new entry in the target directory (the target name did not exist).
    pending: Option<PendingEntry>,
}

impl<D: PmDevice> FsInner<D> {
    pub(crate) fn rename(&self, sp: Ino, sname: &[u8], dp: Ino, dname: &[u8], mode: RenameMode) -> Result<()> {
        check_rename_names(sname, dname)?;
        let _rename = self.rename_lock.lock();
        let scell = self.cell(sp)?;
        let dcell = self.cell(dp)?;
        // Ancestry is read before any directory is locked (the walk takes read locks).
        let sp_chain = self.ancestors(sp)?;
        let dp_chain = self.ancestors(dp)?;
        let mut dirs = self.lock_dirs(&scell, &dcell, &sp_chain, &dp_chain)?;
        let src = dirs.src_index().get(sname).ok_or(Error::NotFound)?;
        let dst = dirs.target_index().get(dname);
        if check_rename_kinds(mode, sp, src, dst, &sp_chain, &dp_chain)? == RenameCheck::Nothing {
            return Ok(());
        }
        let mut mv = Move { sp, sname, dp, dname, mode, src, dst, free_replaced: false };
        // Lock the moved inode and the replaced one (children of the locked directories).
        let src_cell = self.cell(src.ino)?;
        let dst_cell = dst.map(|d| self.cell(d.ino)).transpose()?;
        let (mut moved, mut replaced) = lock_children(&src_cell, dst_cell.as_deref());
        self.may_rename(&mv, &dirs, &moved, replaced.as_deref())?;
        if let (Some(g), RenameMode::Replace | RenameMode::NoReplace) = (&replaced, mode) {
            if g.raw.is_dir() && g.raw.dir_entries > 0 {
                return Err(Error::NotEmpty);
            }
        }
        let tcell = if dirs.dst.is_some() { &dcell } else { &scell };
        // A replaced file's last link: on HashFS freed in this transaction, as an unlink's
        // (`fs/hashfs/unlink.rs`).
        let freeing = match (mode, dst_cell.as_deref(), replaced.as_deref(), dst) {
            (RenameMode::Replace, Some(dc), Some(g), Some(d)) if d.ftype != FileType::Directory && g.raw.nlink == 1 => {
                self.plan_free_with_name(dc, g)
            }
            _ => None,
        };
        mv.free_replaced = freeing.is_some();
        let mut tx = self.journals.begin();
        let staged = self.stage(&mut tx, &mv, &mut dirs, tcell, &moved, replaced.as_deref())?;
        if let Err(e) = tx.commit() {
            if let Some(entry) = staged.pending {
                self.drop_entry(dirs.target(), entry);
            }
            return Err(e);
        }
        self.mirror(&mv, &mut dirs, &mut moved, replaced.as_deref_mut(), staged);
        drop(dirs);
        drop(moved);
        if let (Some(dc), Some(mut g), RenameMode::Replace) = (dst_cell.as_ref(), replaced, mode) {
            match freeing {
                Some(planned) => self.finish_free_with_name(dc, &mut g, &planned),
                None => self.maybe_free(dc, &mut g)?,
            }
        }
        Ok(())
    }

    /// As Linux's `vfs_rename` (`fs/perm.rs`): the source's removal from its directory,
    /// and the replaced entry's removal from (or a new name's addition to) the target's;
    /// a directory moving to another parent needs write permission of its own (its `..`
    /// changes), in an exchange each way.
    fn may_rename(&self, mv: &Move<'_>, dirs: &Dirs<'_>, moved: &InodeMem, replaced: Option<&InodeMem>) -> Result<()> {
        let (sdir, ddir) = (&dirs.src.raw, &dirs.dst.as_deref().unwrap_or(&dirs.src).raw);
        self.may_delete(sdir, &moved.raw)?;
        match replaced {
            Some(r) => self.may_delete(ddir, &r.raw)?,
            None => self.may(ddir, MAY_WRITE | MAY_EXEC)?,
        }
        if mv.sp != mv.dp {
            let exchanged = replaced.filter(|_| mv.mode == RenameMode::Exchange);
            for m in std::iter::once(moved).chain(exchanged) {
                if m.raw.is_dir() {
                    self.may(&m.raw, MAY_WRITE)?;
                }
            }
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
            if p == 0 {
                return Err(Error::corrupt(format!("directory {d} has no valid parent")));
            }
            d = Ino(p);
            chain.push(d);
        }
        Err(Error::corrupt("directory parent chain has a cycle"))
    }

    /// Write-locks the two directories, ancestor first (else by number), builds their
    /// indexes and checks that neither was removed.
    fn lock_dirs<'a>(
        &self,
        scell: &'a InodeCell,
        dcell: &'a InodeCell,
        sp_chain: &[Ino],
        dp_chain: &[Ino],
    ) -> Result<Dirs<'a>> {
        race_point::reached("rename: before the directories are locked");
        let (sp, dp) = (scell.ino, dcell.ino);
        let src_first = if sp == dp || dp_chain.contains(&sp) {
            true
        } else if sp_chain.contains(&dp) {
            false
        } else {
            sp < dp
        };
        let mut dirs = if sp == dp {
            Dirs { src: scell.state.write(), dst: None }
        } else if src_first {
            let src = scell.state.write();
            Dirs { src, dst: Some(dcell.state.write()) }
        } else {
            let dst = dcell.state.write();
            Dirs { src: scell.state.write(), dst: Some(dst) }
        };
        for (c, st) in [(scell, Some(&mut *dirs.src)), (dcell, dirs.dst.as_deref_mut())] {
            if let Some(st) = st {
                self.index(c, st)?;
                if st.raw.nlink == 0 {
                    return Err(Error::NotFound);
                }
            }
        }
        Ok(dirs)
    }

    /// Stages the whole rename in `tx`: the entries, then the link counts and times, then
    /// the four inodes (the replaced one freed when `mv.free_replaced`).
    fn stage<'a>(
        &'a self,
        tx: &mut Tx<'a, D>,
        mv: &Move<'_>,
        dirs: &mut Dirs<'_>,
        tcell: &InodeCell,
        moved: &InodeMem,
        replaced: Option<&InodeMem>,
    ) -> Result<Staged> {
        let now = inode::now_ns();
        let mut st = Staged {
            sdir: dirs.src.raw,
            ddir: dirs.dst.as_ref().map(|g| g.raw),
            moved: moved.raw,
            replaced: replaced.map(|g| g.raw),
            pending: None,
        };
        st.pending = self.stage_entries(tx, mv, dirs, tcell, &mut st, now)?;
        stage_source_dir(mv, &mut st.sdir, dirs.dst.is_none(), now);
        st.moved.ctime_ns = now;
        inode::tx_write_inode(tx, &self.geo, mv.sp, &mut st.sdir);
        if let Some(r) = st.ddir.as_mut() {
            inode::tx_write_inode(tx, &self.geo, mv.dp, r);
        }
        inode::tx_write_inode(tx, &self.geo, mv.src.ino, &mut st.moved);
        if let (Some(r), Some(d)) = (st.replaced.as_mut(), mv.dst) {
            if mv.free_replaced {
                inode::tx_free_inode(tx, &self.geo, d.ino);
            } else {
                inode::tx_write_inode(tx, &self.geo, d.ino, r);
            }
        }
        Ok(st)
    }

    /// The entry words (exchanged, replaced, or a new entry added and the old one cleared)
    /// and what they change in the target directory, the moved and the replaced inode.
    fn stage_entries<'a>(
        &'a self,
        tx: &mut Tx<'a, D>,
        mv: &Move<'_>,
        dirs: &mut Dirs<'_>,
        tcell: &InodeCell,
        st: &mut Staged,
        now: i64,
    ) -> Result<Option<PendingEntry>> {
        let src_off = dirs.src_index().slot_dev_off(&self.geo, mv.src.pos);
        let same_dir = dirs.dst.is_none();
        // The target directory's inode: the source directory's when they are one.
        let ddir: &mut InodeRaw = st.ddir.as_mut().unwrap_or(&mut st.sdir);
        let mut pending = None;
        match (mv.mode, mv.dst) {
            (RenameMode::Exchange, Some(d)) => {
                let d_off = dirs.target_index().slot_dev_off(&self.geo, d.pos);
                tx.write_u64(src_off, d.ino.get());
                tx.write_u64(src_off + 8, DirIndex::header_word1(mv.src.nslots, mv.sname.len(), d.ftype));
                tx.write_u64(d_off, mv.src.ino.get());
                tx.write_u64(d_off + 8, DirIndex::header_word1(d.nslots, mv.dname.len(), mv.src.ftype));
                let r = st.replaced.as_mut().expect("exchange target");
                r.ctime_ns = now;
                if !same_dir {
                    if mv.src_is_dir() {
                        st.moved.parent = mv.dp.0;
                        ddir.nlink += 1;
                    }
                    if d.ftype == FileType::Directory {
                        r.parent = mv.sp.0;
                        ddir.nlink -= 1;
                    }
                }
            }
            (_, Some(d)) => {
                let d_off = dirs.target_index().slot_dev_off(&self.geo, d.pos);
                tx.write_u64(src_off, 0);
                tx.write_u64(d_off, mv.src.ino.get());
                tx.write_u64(d_off + 8, DirIndex::header_word1(d.nslots, mv.dname.len(), mv.src.ftype));
                let r = st.replaced.as_mut().expect("target");
                r.ctime_ns = now;
                if d.ftype == FileType::Directory {
                    r.nlink = 0;
                    ddir.nlink -= 1;
                } else {
                    r.nlink -= 1;
                }
                if mv.src_is_dir() {
                    st.moved.parent = mv.dp.0;
                    ddir.nlink += 1;
                }
            }
            (_, None) => {
                let gd = dirs.target();
                let entry = self.prepare_entry(tcell, gd, mv.dname, mv.src.ftype)?;
                tx.write_u64(src_off, 0);
                if let Err(e) = self.tx_add_entry(tx, mv.dp, ddir, &entry, mv.src.ino, None) {
                    self.drop_entry(gd, entry);
                    return Err(e);
                }
                if mv.src_is_dir() {
                    st.moved.parent = mv.dp.0;
                    ddir.nlink += 1;
                }
                pending = Some(entry);
            }
        }
        ddir.mtime_ns = now;
        ddir.ctime_ns = now;
        Ok(pending)
    }

    /// Mirrors the committed rename in DRAM: the four inodes and the two indexes.
    fn mirror(
        &self,
        mv: &Move<'_>,
        dirs: &mut Dirs<'_>,
        moved: &mut InodeMem,
        replaced: Option<&mut InodeMem>,
        st: Staged,
    ) {
        dirs.src.raw = st.sdir;
        if let (Some(g), Some(r)) = (dirs.dst.as_mut(), st.ddir) {
            g.raw = r;
        }
        moved.raw = st.moved;
        if let (Some(g), Some(r)) = (replaced, st.replaced) {
            g.raw = r;
        }
        let (sname, dname, src) = (mv.sname, mv.dname, mv.src);
        match (mv.mode, mv.dst) {
            (RenameMode::Exchange, Some(d)) => {
                dirs.src.dir.as_mut().expect("index").replace(sname, d.ino, d.ftype);
                dirs.target().dir.as_mut().expect("index").replace(dname, src.ino, src.ftype);
            }
            (_, Some(_)) => {
                dirs.src.dir.as_mut().expect("index").remove(sname);
                dirs.target().dir.as_mut().expect("index").replace(dname, src.ino, src.ftype);
            }
            (_, None) => {
                dirs.src.dir.as_mut().expect("index").remove(sname);
                let entry = st.pending.expect("a new entry");
                self.record_entry(dirs.target(), dname, entry, src.ino);
            }
        }
    }
}

/// The source directory loses the entry (unless exchanged) and, when a directory leaves
/// or arrives, a link (its `..`).
fn stage_source_dir(mv: &Move<'_>, sdir: &mut InodeRaw, same_dir: bool, now: i64) {
    if mv.mode != RenameMode::Exchange {
        sdir.dir_entries -= 1;
        if mv.src_is_dir() {
            sdir.nlink -= 1;
        }
    } else if !same_dir {
        if mv.src_is_dir() {
            sdir.nlink -= 1;
        }
        if mv.dst_is_dir() {
            sdir.nlink += 1;
        }
    }
    sdir.mtime_ns = now;
    sdir.ctime_ns = now;
}

/// Write-locks the moved inode and the replaced one, by inode number.
fn lock_children<'a>(src: &'a InodeCell, dst: Option<&'a InodeCell>) -> (Guard<'a>, Option<Guard<'a>>) {
    match dst {
        Some(d) if d.ino < src.ino => {
            let dg = d.state.write();
            (src.state.write(), Some(dg))
        }
        Some(d) => {
            let sg = src.state.write();
            (sg, Some(d.state.write()))
        }
        None => (src.state.write(), None),
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

#[cfg(test)]
mod tests {
    use super::race_point;
    use crate::fs::fsck::{fsck, FsckMode};
    use crate::Error;
    use std::path::Path;

    /// A rename stopped before it locks its two directories, while another thread unlinks
    /// its source and makes a file in the source directory (which takes the freed inode),
    /// finds no source: the rename fails with ENOENT, the other file keeps its one name,
    /// and fsck finds nothing. The deterministic form of `tests/races.rs`'s stress, whose
    /// window it hits now and then; a source entry looked up before the directories are
    /// locked moves the new file's inode under the old name (`rename-source-looked-up-early`).
    #[test]
    fn a_rename_finds_its_source_under_the_directories_locks() {
        let (fs, dev) = race_point::small_fs();
        for d in ["/a", "/b"] {
            fs.create_dir(Path::new(d), 0o755).unwrap();
        }
        fs.write(Path::new("/a/n"), b"old").unwrap();
        let r = race_point::with_between(
            "rename: before the directories are locked",
            || {
                fs.remove_file(Path::new("/a/n")).expect("the other's unlink");
                fs.write(Path::new("/a/m"), b"new").expect("the other's create");
            },
            || fs.rename(Path::new("/a/n"), Path::new("/b/n")),
        );
        assert!(matches!(r, Err(Error::NotFound)), "the rename of an unlinked source: {r:?}");
        assert!(matches!(fs.read(Path::new("/b/n")), Err(Error::NotFound)));
        assert_eq!(fs.read(Path::new("/a/m")).unwrap(), b"new");
        let names: Vec<Vec<u8>> = fs.read_dir(Path::new("/a")).unwrap().into_iter().map(|e| e.name).collect();
        assert_eq!(names, [b"m".to_vec()]);
        drop(fs);
        let report = fsck(dev, FsckMode::Check, &|_, _| {}).expect("fsck ran");
        assert!(report.findings.is_empty(), "fsck findings: {:#?}", report.findings);
    }
}
