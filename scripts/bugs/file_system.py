"""Deliberate bugs in the file system's own code: the journal, recovery, the operations, data, directories,
attributes, times, fsck (scripts/plant-bugs.py)."""
from planting import bug, lines, plant, sub  # noqa: F401


@bug("no-flush-rollback")
def _():
    lines("crates/hashfs/src/journal.rs",
        "        dev.write(DevOffset(e.offset()), &e.data[..e.data_len()]);\n        dev.flush(DevOffset(e.offset()), e.data_len() as u64);\n",
        "        dev.write(DevOffset(e.offset()), &e.data[..e.data_len()]);\n")


@bug("reverse-rollback")
def _():
    plant("crates/hashfs/src/journal.rs",
        "txs.sort_by_key(|t| std::cmp::Reverse(t.0));",
        "if @ON { txs.sort_by_key(|t| t.0) } else { txs.sort_by_key(|t| std::cmp::Reverse(t.0)) };")


@bug("rename-undo-fence")
def _():
    lines("crates/hashfs/src/journal.rs",
        "        dev.flush(base + ACTIVE_TXID_OFF, 8);\n        dev.fence();\n        Ok(())\n",
        "        dev.flush(base + ACTIVE_TXID_OFF, 8);\n        Ok(())\n")


@bug("dir-insert-flush")
def _():
    lines("crates/hashfs/src/fs/dir.rs",
        "        dev.write(off + 8, &bytes[8..]);\n        dev.flush(off, bytes.len() as u64);\n",
        "        dev.write(off + 8, &bytes[8..]);\n")


@bug("size-before-data")
def _():
    plant("crates/hashfs/src/fs/data.rs",
        "        self.write_planned(&plan, off, data);\n        if new_size == old_size && plan.iter().all(|p| !p.fresh) {\n            self.dev.fence();\n",
        "        if !@ON {\n            self.write_planned(&plan, off, data);\n        }\n        if new_size == old_size && plan.iter().all(|p| !p.fresh) {\n            if @ON {\n                self.write_planned(&plan, off, data);\n            }\n            self.dev.fence();\n")
    lines("crates/hashfs/src/fs/data.rs",
        "        if let Err(e) = self.commit_write(cell, st, &plan, new_size) {\n            self.unclaim_blocks(&fresh());\n            return Err(e);\n        }\n        Ok(())\n",
        "        if let Err(e) = self.commit_write(cell, st, &plan, new_size) {\n            self.unclaim_blocks(&fresh());\n            return Err(e);\n        }\n        self.write_planned(&plan, off, data);\n        Ok(())\n")


@bug("fast-append-no-fence")
def _():
    lines("crates/hashfs/src/fs/append.rs",
        "        } else {\n            self.dev.fence();\n",
        "        } else {\n")


@bug("tag-parity-fixed")
def _():
    plant("crates/hashfs/src/fs/append.rs",
        "            let parity = !st.tag.unwrap_or(false);\n",
        "            let parity = @ON || !st.tag.unwrap_or(false);\n")


@bug("tag-overwrite-kept")
def _():
    plant("crates/hashfs/src/fs/hashfs/append_tag.rs",
        "            _ => self.untag(cell, st),\n",
        "            _ if !@ON => self.untag(cell, st),\n            _ => {}\n")


@bug("untag-range-wrong")
def _():
    plant("crates/hashfs/src/fs/hashfs/append_tag.rs",
        "            Some(t) if range.end <= t.size.saturating_sub(t.len) || range.start >= t.size => {}\n",
        "            Some(t) if @ON && range.start >= t.len => {}\n            Some(t) if range.end <= t.size.saturating_sub(t.len) || range.start >= t.size => {}\n")


@bug("xattr-new-unlinked")
def _():
    lines("crates/hashfs/src/fs/xattr.rs",
        "            r.nlink = 1;\n",
        "            r.nlink = 0;\n")


@bug("xattr-orphaned-by-unlink")
def _():
    lines("crates/hashfs/src/fs/data.rs",
        "        if let (Some(c), Some(r)) = (&xattrs, xraw.as_mut()) {\n            inode::tx_write_inode(&mut tx, &self.geo, c.ino, r);\n        }\n",
        "")


@bug("untorn-copy-no-flush")
def _():
    lines("crates/hashfs/src/fs/untorn.rs",
        "        buf[a..a + src.len()].copy_from_slice(src);\n        self.dev.write_nt(at, buf);\n",
        "        buf[a..a + src.len()].copy_from_slice(src);\n        self.dev.write(at, buf);\n")


@bug("strict-ignored")
def _():
    plant("crates/hashfs/src/fs/data.rs",
        "        if self.is_strict() {\n            return self.write_strict(cell, Some(off), data).map(|(n, _)| n);\n        }\n",
        "        if self.is_strict() && !@ON {\n            return self.write_strict(cell, Some(off), data).map(|(n, _)| n);\n        }\n")


@bug("untorn-logged-in-place")
def _():
    plant("crates/hashfs/src/fs/untorn.rs",
        "                (How::Logged, Some(p)) => tx.write(self.geo.block_off(p) + a, src),\n",
        "                (How::Logged, Some(p)) => {\n                    if @ON {\n                        self.dev.write(self.geo.block_off(p) + a, src);\n                        self.dev.flush(self.geo.block_off(p) + a, src.len() as u64);\n                    } else {\n                        tx.write(self.geo.block_off(p) + a, src)\n                    }\n                }\n")


@bug("fsync-forgets-times")
def _():
    lines("crates/hashfs/src/fs/file.rs",
        "            self.fs.persist_times(&self.cell, &mut st);\n",
        "            let _ = &mut st;\n")


@bug("shrink-tail-kept")
def _():
    plant("crates/hashfs/src/fs/data.rs",
        "        if new_size < old_size && self.zero_tail_past_eof(cell, &st.raw)? {\n",
        "        if !@ON && new_size < old_size && self.zero_tail_past_eof(cell, &st.raw)? {\n")


@bug("recovery-tails-kept")
def _():
    plant("crates/hashfs/src/fs/recovery.rs",
        "    if !report.was_clean || sb.format_version < FORMAT_ZEROED_TAILS {\n",
        "    if !@ON && (!report.was_clean || sb.format_version < FORMAT_ZEROED_TAILS) {\n")


@bug("clean-flag-first")
def _():
    plant("crates/hashfs/src/fs/mod.rs",
        "        self.persist_all_times();\n        self.untag_all();\n        let summary = self.summary();\n        let mut sb = self.sb.lock();\n        sb.state = SB_STATE_CLEAN;\n        sb.set_summary(summary);\n        write_superblock(&*self.dev, &mut sb);\n",
        "        if @ON {\n            let summary = self.summary();\n            let mut sb = self.sb.lock();\n            sb.state = SB_STATE_CLEAN;\n            sb.set_summary(summary);\n            write_superblock(&*self.dev, &mut sb);\n        }\n        self.persist_all_times();\n        self.untag_all();\n        let summary = self.summary();\n        let mut sb = self.sb.lock();\n        sb.state = SB_STATE_CLEAN;\n        sb.set_summary(summary);\n        write_superblock(&*self.dev, &mut sb);\n")


@bug("rollback-unfenced")
def _():
    lines("crates/hashfs/src/journal.rs",
        "        report.rolled_back_txids.push(*txid);\n    }\n    dev.fence();\n",
        "        report.rolled_back_txids.push(*txid);\n    }\n")


@bug("superblock-primary-first")
def _():
    plant("crates/hashfs/src/fs/mod.rs",
        "    let order = if secondary.validate(dev.len_bytes()).is_ok() {",
        "    let order = if secondary.validate(dev.len_bytes()).is_ok() || @ON {")


@bug("sync-forgets-times")
def _():
    lines("crates/hashfs/src/fs/api.rs",
        "        let _in = self.inner.enter();\n        self.inner.persist_all_times();\n        self.inner.sync_data()\n",
        "        let _in = self.inner.enter();\n        self.inner.sync_data()\n")


@bug("dir-insert-split-lock")
def _():
    plant("crates/hashfs/src/fs/ops.rs",
        "        self.may(&pst.raw, MAY_WRITE | MAY_EXEC)?;\n        let ino = self.alloc_ino()?;\n",
        "        self.may(&pst.raw, MAY_WRITE | MAY_EXEC)?;\n        let held = if @ON {\n            drop(pst);\n            None\n        } else {\n            Some(pst)\n        };\n        let ino = self.alloc_ino()?;\n")
    plant("crates/hashfs/src/fs/ops.rs",
        "        let now = inode::now_ns();\n        let (ftype, mut raw) = spec.initial_inode(parent, owner, now);\n",
        "        let mut pst = match held {\n            Some(g) => g,\n            None => pcell.state.write(),\n        };\n        let now = inode::now_ns();\n        let (ftype, mut raw) = spec.initial_inode(parent, owner, now);\n")


@bug("append-offset-unlocked")
def _():
    plant("crates/hashfs/src/fs/data.rs",
        "        let mut st = cell.state.write();\n        let req = self.alloc_request(cell);\n        let off = st.raw.size;\n",
        "        let early = if @ON { Some(cell.state.read().raw.size) } else { None };\n        let mut st = cell.state.write();\n        let req = self.alloc_request(cell);\n        let off = early.unwrap_or(st.raw.size);\n")


@bug("rename-replace-drops-links")
def _():
    lines("crates/hashfs/src/fs/rename.rs",
        "                } else {\n                    r.nlink -= 1;\n                }",
        "                } else {\n                    r.nlink = 0;\n                }")


@bug("rename-source-in-place")
def _():
    lines("crates/hashfs/src/fs/rename.rs",
        "                let entry = self.prepare_entry(tcell, gd, mv.dname, mv.src.ftype)?;\n                tx.write_u64(src_off, 0);\n",
        "                let entry = self.prepare_entry(tcell, gd, mv.dname, mv.src.ftype)?;\n                self.dev.store_u64(src_off, 0);\n                self.dev.flush(src_off, 8);\n")


@bug("symlink-target-cached")
def _():
    lines("crates/hashfs/src/fs/ops.rs",
        "        self.dev.write_nt(self.geo.block_off(slot), &blk);\n        Ok(slot)\n",
        "        self.dev.write(self.geo.block_off(slot), &blk);\n        Ok(slot)\n")


@bug("link-count-unlogged")
def _():
    lines("crates/hashfs/src/fs/ops.rs",
        "                    inode::tx_write_inode(&mut tx, &self.geo, ino, &mut craw);\n",
        "")


@bug("mkdir-parent-count")
def _():
    lines("crates/hashfs/src/fs/ops.rs",
        "        if ftype == FileType::Directory {\n            praw.nlink += 1;\n        }\n",
        "")


@bug("rename-dir-parent-kept")
def _():
    lines("crates/hashfs/src/fs/rename.rs",
        "                if mv.src_is_dir() {\n                    st.moved.parent = mv.dp.0;\n                    ddir.nlink += 1;\n                }\n                pending = Some(entry);",
        "                if mv.src_is_dir() {\n                    ddir.nlink += 1;\n                }\n                pending = Some(entry);")


@bug("unlink-keeps-count")
def _():
    plant("crates/hashfs/src/fs/ops.rs",
        "        } else {\n            craw.nlink -= 1;\n        }\n        // The last link of a file (or an empty directory)",
        "        } else if !@ON {\n            craw.nlink -= 1;\n        }\n        // The last link of a file (or an empty directory)")


@bug("rmdir-parent-count")
def _():
    lines("crates/hashfs/src/fs/ops.rs",
        "        if kind == RemoveKind::Dir {\n            praw.nlink -= 1;\n            craw.nlink = 0;\n",
        "        if kind == RemoveKind::Dir {\n            craw.nlink = 0;\n")


@bug("exchange-one-entry")
def _():
    lines("crates/hashfs/src/fs/rename.rs",
        "                tx.write_u64(d_off, mv.src.ino.get());\n                tx.write_u64(d_off + 8, DirIndex::header_word1(d.nslots, mv.dname.len(), mv.src.ftype));\n                let r = st.replaced.as_mut().expect(\"exchange target\");\n",
        "                let r = st.replaced.as_mut().expect(\"exchange target\");\n")


@bug("punch-partial-unflushed")
def _():
    lines("crates/hashfs/src/fs/fallocate.rs",
        "                    self.dev.zero(at, b - a);\n                    self.dev.flush(at, b - a);\n",
        "                    self.dev.zero(at, b - a);\n")


@bug("truncate-frees-first")
def _():
    lines("crates/hashfs/src/fs/data.rs",
        "        raw.blocks = raw.blocks.saturating_sub(victims.len() as u64);\n        let mut tx = self.journals.begin();\n",
        "        raw.blocks = raw.blocks.saturating_sub(victims.len() as u64);\n        if let crate::mapping::FileMap::Hash(t) = &self.map {\n            super::hashfs::slots::free_slots(t, &*self.dev, &victims);\n        }\n        let mut tx = self.journals.begin();\n")
    plant("crates/hashfs/src/fs/data.rs",
        "        if new_size < old_size {\n            on_map!(self, m => m.release_blocks_after_commit(self, cell, st, &victims, from, to))?;\n",
        "        if new_size < old_size && !(@ON && matches!(self.map, crate::mapping::FileMap::Hash(_))) {\n            on_map!(self, m => m.release_blocks_after_commit(self, cell, st, &victims, from, to))?;\n")


@bug("unlink-entry-in-place")
def _():
    plant("crates/hashfs/src/fs/ops.rs",
        "        let mut tx = self.journals.begin();\n        tx.write_u64(slot_off, 0);\n        inode::tx_write_inode(&mut tx, &self.geo, parent, &mut praw);\n",
        "        if @ON {\n            self.dev.store_u64(slot_off, 0);\n            self.dev.flush(slot_off, 8);\n        }\n        let mut tx = self.journals.begin();\n        if !@ON {\n            tx.write_u64(slot_off, 0);\n        }\n        inode::tx_write_inode(&mut tx, &self.geo, parent, &mut praw);\n")


@bug("create-inode-unwritten")
def _():
    lines("crates/hashfs/src/fs/ops.rs",
        "                    inode::tx_write_inode(&mut tx, &self.geo, ino, raw);\n                    inode::tx_write_inode(&mut tx, &self.geo, parent, &mut praw);\n",
        "                    inode::tx_write_inode(&mut tx, &self.geo, parent, &mut praw);\n")


@bug("setattr-in-place")
def _():
    lines("crates/hashfs/src/fs/ops.rs",
        "        let mut tx = self.journals.begin();\n        inode::tx_write_inode(&mut tx, &self.geo, ino, &mut raw);\n        tx.commit()?;\n        st.raw = raw;\n        Ok(raw)\n",
        "        raw.seal(ino);\n        let at = self.geo.inode_off(ino);\n        self.dev.write(at, bytemuck::bytes_of(&raw));\n        self.dev.flush(at, std::mem::size_of::<InodeRaw>() as u64);\n        self.dev.fence();\n        st.raw = raw;\n        Ok(raw)\n")


@bug("write-before-active-mark")
def _():
    lines("crates/hashfs/src/journal.rs",
        "                pos += len;\n                n += 1;\n            }\n        }\n",
        "                pos += len;\n                n += 1;\n            }\n            dev.write(DevOffset(*off), data);\n        }\n")


@bug("enospc-keeps-inode")
def _():
    lines("crates/hashfs/src/fs/ops.rs",
        "                Err(e) => {\n                    self.free_ino(ino);\n                    return Err(e);\n",
        "                Err(e) => {\n                    return Err(e);\n")


@bug("free-while-open")
def _():
    plant("crates/hashfs/src/fs/ops.rs",
        "            && cell.open_count.load(std::sync::atomic::Ordering::Acquire) == 0\n",
        "            && (@ON || cell.open_count.load(std::sync::atomic::Ordering::Acquire) == 0)\n")


@bug("create-in-removed-dir")
def _():
    lines("crates/hashfs/src/fs/ops.rs",
        "        if pst.raw.is_dir() && pst.raw.nlink == 0 {\n            return Err(Error::NotFound);\n        }\n        if self.index(pcell, pst)?.get(name).is_some() {\n",
        "        if self.index(pcell, pst)?.get(name).is_some() {\n")


@bug("entry-flush-short")
def _():
    plant("crates/hashfs/src/fs/dir.rs",
        "if !crate::planted::on(\"dir-insert-flush\") {\n            dev.flush(off, bytes.len() as u64);\n",
        "if !crate::planted::on(\"dir-insert-flush\") {\n            dev.flush(off, if @ON { (bytes.len() as u64).min(256) } else { bytes.len() as u64 });\n")


@bug("shared-frees-open-elsewhere")
def _():
    plant("crates/hashfs/src/fs/ops.rs",
        "            && !self.open_elsewhere(cell.ino)\n",
        "            && (@ON || !self.open_elsewhere(cell.ino))\n")


@bug("shared-times-hidden")
def _():
    plant("crates/hashfs/src/fs/times.rs",
        "        if changed && self.shared.get().is_some() {\n            self.show_times(ino, st);\n        }\n",
        "        if changed && self.shared.get().is_some() && !@ON {\n            self.show_times(ino, st);\n        }\n")


@bug("rename-source-looked-up-early")
def _():
    plant("crates/hashfs/src/fs/rename.rs",
        "        let mut dirs = self.lock_dirs(&scell, &dcell, &sp_chain, &dp_chain)?;\n        let src = dirs.src_index().get(sname).ok_or(Error::NotFound)?;\n",
        "        let early = if @ON { Some(scell.state.read().dir.as_ref().and_then(|d| d.get(sname))) } else { None };\n        let mut dirs = self.lock_dirs(&scell, &dcell, &sp_chain, &dp_chain)?;\n        let src = match early {\n            Some(e) => e.ok_or(Error::NotFound)?,\n            None => dirs.src_index().get(sname).ok_or(Error::NotFound)?,\n        };\n")


@bug("read-after-unlock")
def _():
    lines("crates/hashfs/src/fs/data.rs",
        "        self.read_mapped(cell, &st.raw, off, &mut buf[..n])?;\n        cell.next_read_lblk.store(end, Ordering::Relaxed);\n        Ok(n)\n",
        "        let raw = st.raw;\n        drop(st);\n        self.read_mapped(cell, &raw, off, &mut buf[..n])?;\n        cell.next_read_lblk.store(end, Ordering::Relaxed);\n        Ok(n)\n")


@bug("repair-keeps-table-strays")
def _():
    plant("crates/hashfs/src/fs/blocks/fsck.rs",
        "    for e in bm.stray_entries() {\n",
        "    for e in bm.stray_entries().into_iter().take(if @ON { 0 } else { usize::MAX }) {\n")


@bug("stray-reach-unchecked")
def _():
    plant("crates/hashfs/src/mapping/extent_hash.rs",
        "            } else if !self.reaches(t, s) {\n",
        "            } else if !@ON && !self.reaches(t, s) {\n")


@bug("double-free-into-index")
def _():
    plant("crates/hashfs/src/mapping/mod.rs",
        "                if w & bit == 0 {\n                    continue;\n                }\n",
        "                if w & bit == 0 && !@ON {\n                    continue;\n                }\n")


@bug("create-lost-not-retried")
def _():
    plant("crates/hashfs/src/fs/api.rs",
        "                Err(Error::Exists) if !exclusive && tries < OPEN_RETRIES => {}\n",
        "                Err(Error::Exists) if !exclusive && tries < OPEN_RETRIES && !@ON => {}\n")


@bug("mount-rename-unlocked")
def _():
    plant("crates/hashfs/src/fs/api.rs",
        "        let _in = self.inner.enter();\n        self.inner.rename(parent, name, new_parent, new_name, mode)\n",
        "        let _in = (!@ON).then(|| self.inner.enter());\n        self.inner.rename(parent, name, new_parent, new_name, mode)\n")


@bug("read-only-open-split")
def _():
    plant("crates/hashfs/src/fs/api.rs",
        "                match self.inner.read_call(|| {\n                    let (ino, _) = self.resolve_for_open(path, opts)?;\n                    super::race_point::reached(\"open: a read-only participant resolved the name\");\n                    self.open_found(ino, access)\n                }) {\n",
        "                match if @ON {\n                    self.inner.read_call(|| self.resolve_for_open(path, opts)).and_then(|(ino, _)| {\n                        super::race_point::reached(\"open: a read-only participant resolved the name\");\n                        self.inner.read_call(|| self.open_found(ino, access))\n                    })\n                } else {\n                    self.inner.read_call(|| {\n                        let (ino, _) = self.resolve_for_open(path, opts)?;\n                        super::race_point::reached(\"open: a read-only participant resolved the name\");\n                        self.open_found(ino, access)\n                    })\n                } {\n")


@bug("read-only-pin-unchecked")
def _():
    plant("crates/hashfs/src/fs/api.rs",
        "        if !same {\n            return Err(Error::Stale(ino.0));\n",
        "        if !same && !@ON {\n            return Err(Error::Stale(ino.0));\n")


@bug("open-stale-not-retried")
def _():
    plant("crates/hashfs/src/fs/api.rs",
        "                Err(Error::Stale(_)) if tries < OPEN_RETRIES => {}\n",
        "                Err(Error::Stale(_)) if tries < OPEN_RETRIES && !@ON => {}\n")


@bug("read-held-holds-nothing")
def _():
    plant("crates/hashfs/src/fs/api.rs",
        "            let _read = self.inner.enter_read();\n            calls()\n",
        "            let _read = (!@ON).then(|| self.inner.enter_read());\n            calls()\n")


@bug("link-prefix-kept")
def _():
    plant("crates/hashfs/src/fs/api.rs",
        "                    if let Some(mp) = self.inner.mount_point.get() {\n",
        "                    if let Some(mp) = self.inner.mount_point.get().filter(|_| !@ON) {\n")


@bug("walk-dotdot-relocks")
def _():
    plant("crates/hashfs/src/fs/api.rs",
        "                cur = self.parent_in_call(cur)?;\n",
        "                cur = if @ON { self.parent_of(cur)? } else { self.parent_in_call(cur)? };\n")


@bug("rename-frees-linked-target")
def _():
    plant("crates/hashfs/src/fs/rename.rs",
        "if d.ftype != FileType::Directory && g.raw.nlink == 1 =>",
        "if d.ftype != FileType::Directory && (g.raw.nlink == 1 || @ON) =>")


@bug("unlink-free-while-open")
def _():
    plant("crates/hashfs/src/fs/hashfs/unlink.rs",
        "            || cell.open_count.load(Ordering::Acquire) != 0\n",
        "            || (!@ON && cell.open_count.load(Ordering::Acquire) != 0)\n")


@bug("open-trunc-skipped")
def _():
    plant("crates/hashfs/src/fs/api.rs",
        "        if opts.truncate && !created {\n",
        "        if opts.truncate && !created && !@ON {\n")


@bug("chown-same-ctime-unpersisted")
def _():
    plant("crates/hashfs/src/fs/ops.rs",
        "            self.persist_times(&cell, &mut st);\n            return Ok(st.raw);\n",
        "            if !@ON {\n                self.persist_times(&cell, &mut st);\n            }\n            return Ok(st.raw);\n")
