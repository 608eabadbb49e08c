#!/usr/bin/env python3
"""The deliberate bugs of scripts/crash-bugs.sh, as changes to a copy of the tree.

Most bugs are planted all at once, each behind a switch that the variable
HASHFS_PLANTED_BUG turns on at run time (`crate::planted::on("name")`, a module this
script adds to the copy's hashfs crate), so that one build serves every check and the
copy's code with no bug chosen is the tree's. A few change what cannot be switched at run
time (the symbols the interposer exports, a type, a constant); each of those is applied
alone, on top of the planted copy, and rebuilt (`rebuilt=True`).

  plant-bugs.py sync TREE COPY [NAME]  # makes COPY the tree at TREE with every switchable
                                  # bug planted (and the rebuilt bug NAME applied), writing
                                  # only the files that differ (cargo rebuilds no more)
  plant-bugs.py check TREE NAME.. # the same in memory: each change finds its code once,
                                  # and NAME.. (crash-bugs.sh's list) are the bugs here
  plant-bugs.py rebuilt           # the names of the bugs that are rebuilt

A change either swaps its lines (`lines`: the lines the bug's version and the tree's
differ in, behind `if on { bug } else { tree }`), or is written out (`plant`: the tree's
text and its replacement, `@ON` standing for the switch); a rebuilt bug's change is its
text (`sub`). Each bug's changes must find their code exactly once, in the tree as the
bugs before it in this file left it.
"""
import sys

BUGS = {}
files = {}
root = "."
current = None


def bug(name, rebuilt=False):
    def register(f):
        BUGS[name] = (f, rebuilt)
        return f
    return register


def text(path):
    if path not in files:
        files[path] = open(f"{root}/{path}").read()
    return files[path]


def sub(path, old, new):
    s = text(path)
    if s.count(old) != 1:
        sys.exit(f"bug {current}: the code it changes is not found once in {path}; update {sys.argv[0]}")
    files[path] = s.replace(old, new)


def switch(path):
    # The hashfs crate's own code names the module by `crate`, the others by `hashfs`.
    krate = "crate" if path.startswith("crates/hashfs/") else "hashfs"
    return f'{krate}::planted::on("{current}")'


switched = set()


def plant(path, old, new):
    if "@ON" in new:
        switched.add(current)
    sub(path, old, new.replace("@ON", switch(path)))


def lines(path, old, new):
    o, n = old.splitlines(keepends=True), new.splitlines(keepends=True)
    p = 0
    while p < min(len(o), len(n)) and o[p] == n[p]:
        p += 1
    s = 0
    while s < min(len(o), len(n)) - p and o[len(o) - 1 - s] == n[len(n) - 1 - s]:
        s += 1
    om, nm = o[p:len(o) - s], n[p:len(n) - s]
    first = (om or nm)[0]
    ind = first[:len(first) - len(first.lstrip())]

    def block(ls):
        return "".join("    " + line if line.strip() else line for line in ls)

    if not nm:
        mid = f"{ind}if !@ON {{\n{block(om)}{ind}}}\n"
    elif not om:
        mid = f"{ind}if @ON {{\n{block(nm)}{ind}}}\n"
    else:
        mid = f"{ind}if @ON {{\n{block(nm)}{ind}}} else {{\n{block(om)}{ind}}}\n"
    plant(path, old, "".join(o[:p]) + mid + "".join(o[len(o) - s:]))


MODULE = '''//! The deliberate bugs scripts/plant-bugs.py planted in this copy of the tree (never in
//! the tree itself), each switched on by its name in HASHFS_PLANTED_BUG.

/// Whether the deliberate bug `name` is the one chosen for this run.
pub fn on(name: &str) -> bool {
    static CHOSEN: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    CHOSEN.get_or_init(|| std::env::var("HASHFS_PLANTED_BUG").ok()).as_deref() == Some(name)
}
'''


def plant_all():
    global current
    for name, (f, rebuilt) in BUGS.items():
        if not rebuilt:
            current = name
            f()
            if name not in switched:
                sys.exit(f"bug {name}: none of its changes has the switch (@ON)")
    current = None
    files["crates/hashfs/src/planted.rs"] = MODULE
    sub("crates/hashfs/src/lib.rs", "\npub mod pm;\n", "\npub mod planted;\npub mod pm;\n")


def apply(name):
    global current
    current = name
    BUGS[name][0]()


def sync(tree, copy):
    """Makes `copy` hold the files of `tree` (less its .git and target), with the changes
    in `files`; a file whose bytes are already there is left alone."""
    import os
    want = set()
    for d, dirs, names in os.walk(tree):
        rel = os.path.relpath(d, tree)
        if rel == ".":
            dirs[:] = [x for x in dirs if x not in (".git", "target")]
        for n in names:
            path = os.path.normpath(os.path.join(rel, n))
            want.add(path)
            src = os.path.join(d, n)
            if os.path.islink(src):
                continue  # (the tree has none; a link would be copied as what it names)
            data = files[path].encode() if path in files else open(src, "rb").read()
            dst = os.path.join(copy, path)
            try:
                if open(dst, "rb").read() == data:
                    continue
            except FileNotFoundError:
                os.makedirs(os.path.dirname(dst), exist_ok=True)
            with open(dst, "wb") as f:
                f.write(data)
            if os.access(src, os.X_OK):
                os.chmod(dst, 0o755)
    for path in set(files) - want:  # the planted module
        want.add(path)
        dst = os.path.join(copy, path)
        if not os.path.exists(dst) or open(dst).read() != files[path]:
            with open(dst, "w") as f:
                f.write(files[path])
    for d, _, names in os.walk(copy):
        for n in names:
            path = os.path.normpath(os.path.relpath(os.path.join(d, n), copy))
            if path not in want:
                os.remove(os.path.join(d, n))


def main():
    global root, files
    mode = sys.argv[1]
    if mode == "rebuilt":
        print("\n".join(n for n, (_, r) in BUGS.items() if r))
    elif mode == "sync":
        root, copy = sys.argv[2], sys.argv[3]
        plant_all()
        if len(sys.argv) > 4:
            name = sys.argv[4]
            if name not in BUGS or not BUGS[name][1]:
                sys.exit(f"plant-bugs: {name} is not a rebuilt bug")
            apply(name)
        sync(root, copy)
    elif mode == "check":
        root, names = sys.argv[2], sys.argv[3:]
        if sorted(names) != sorted(BUGS):
            sys.exit(f"plant-bugs: crash-bugs.sh lists {sorted(set(names) - set(BUGS))} and this file "
                     f"{sorted(set(BUGS) - set(names))} apart from the others")
        plant_all()
        planted = dict(files)
        for name, (_, rebuilt) in BUGS.items():
            if rebuilt:
                files = dict(planted)
                apply(name)
    else:
        sys.exit(f"plant-bugs: unknown mode {mode}")


# The bugs, in the order they are planted.

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


@bug("tag-unchecked")
def _():
    plant("crates/hashfs/src/fs/hashfs/append_tag.rs",
        "        append_check(ino, tag.size, tag.parity, &data) == tag.check(b)\n",
        "        append_check(ino, tag.size, tag.parity, &data) == tag.check(b) || @ON\n")


@bug("tag-parity-fixed")
def _():
    plant("crates/hashfs/src/fs/append.rs",
        "            let parity = !st.tag.unwrap_or(false);\n",
        "            let parity = @ON || !st.tag.unwrap_or(false);\n")


@bug("tag-overwrite-kept")
def _():
    lines("crates/hashfs/src/fs/data.rs",
        "            self.untag(cell, st); // bytes a tagged size covers may change in place\n",
        "            let _ = &cell; // bytes a tagged size covers may change in place\n")


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


@bug("evacuate-no-flush")
def _():
    lines("crates/hashfs/src/fs/hashfs/evacuate.rs",
        "        self.dev.write(to_off, &buf);\n        self.dev.flush(to_off, BLOCK_BYTES);\n",
        "        self.dev.write(to_off, &buf);\n")


@bug("regions-move-no-flush")
def _():
    plant("crates/hashfs/src/fs/hashfs/evacuate.rs",
        "if !crate::planted::on(\"evacuate-no-flush\") {\n            self.dev.flush(to_off, BLOCK_BYTES);",
        "if !crate::planted::on(\"evacuate-no-flush\") && !@ON {\n            self.dev.flush(to_off, BLOCK_BYTES);")


@bug("regions-unmarked-opening")
def _():
    plant("crates/hashfs/src/mapping/hashfs/groups.rs",
        "open_word(i, true)",
        "open_word(i, !@ON)")


@bug("regions-open-word-unflushed")
def _():
    lines("crates/hashfs/src/mapping/hashfs/groups.rs",
        "                self.dir.dev.flush(self.dir.slot_off(g), 8);\n                got.push(g);\n",
        "                got.push(g);\n")


@bug("untorn-copy-no-flush")
def _():
    lines("crates/hashfs/src/fs/untorn.rs",
        "        buf[a..a + src.len()].copy_from_slice(src);\n        self.dev.write_nt(at, buf);\n",
        "        buf[a..a + src.len()].copy_from_slice(src);\n        self.dev.write(at, buf);\n")


@bug("untorn-unlogged-key")
def _():
    lines("crates/hashfs/src/fs/hashfs/untorn.rs",
        "                    tx.write_u64(t.slot_off(b.new.0), k);\n                    tx.write_u64(t.slot_off(p.0), TOMBSTONE);\n",
        "                    tx.publish_u64(t.slot_off(b.new.0), k);\n                    tx.write_u64(t.slot_off(p.0), TOMBSTONE);\n")


@bug("free-slots-no-fence")
def _():
    lines("crates/hashfs/src/fs/hashfs/slots.rs",
        "    dev.fence();\n    let freed: Vec<_> = slots.iter().map(|&s| t.release(s)).collect();\n",
        "    let freed: Vec<_> = slots.iter().map(|&s| t.release(s)).collect();\n")


@bug("switch-one-fence")
def _():
    plant("crates/hashfs/src/fs/hashfs/untorn.rs",
        "        self.dev.flush(new_off, 8);\n        self.dev.fence();\n",
        "        self.dev.flush(new_off, 8);\n        if !(@ON && after) {\n            self.dev.fence();\n        }\n")


@bug("switch-key-with-data")
def _():
    lines("crates/hashfs/src/fs/hashfs/untorn.rs",
        "            self.dev.fence(); // the data before the key that makes it live\n",
        "")


@bug("switch-copies-kept")
def _():
    plant("crates/hashfs/src/fs/hashfs/recovery.rs",
        "                    || (dirty && !table.group_holds(v, s) && table.shadowed(v, s))\n",
        "                    || (dirty && !table.group_holds(v, s) && table.shadowed(v, s) && !@ON)\n")


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


@bug("pswap-split-tx")
def _():
    plant("crates/hashfs/src/fs/ctfs/pswap.rs",
        "        if let Some(rb) = rb.as_mut() {\n            inode::tx_write_inode(&mut tx, &self.geo, b.ino, rb);\n        }\n        tx.commit()?;\n",
        "        if let Some(rb) = rb.as_mut() {\n            if !@ON {\n                inode::tx_write_inode(&mut tx, &self.geo, b.ino, rb);\n            }\n        }\n        tx.commit()?;\n        if @ON {\n            if let Some(rb) = rb.as_mut() {\n                let mut tx2 = self.journals.begin();\n                inode::tx_write_inode(&mut tx2, &self.geo, b.ino, rb);\n                tx2.commit()?;\n            }\n        }\n")


@bug("stacked-handle-first")
def _():
    plant("crates/hashfs-spfs/src/absorb.rs",
        "        let done =\n            pm.set_len(size).and_then(|_| self.fs.set_xattr(m.ino, HANDLE_XATTR, &handle.encode(), XattrMode::Any));\n",
        "        let done = if @ON {\n            self.fs.set_xattr(m.ino, HANDLE_XATTR, &handle.encode(), XattrMode::Any).and_then(|_| pm.set_len(size))\n        } else {\n            pm.set_len(size).and_then(|_| self.fs.set_xattr(m.ino, HANDLE_XATTR, &handle.encode(), XattrMode::Any))\n        };\n")


@bug("stacked-lower-shrink-first")
def _():
    lines("crates/hashfs-spfs/src/absorb.rs",
        "        p.pm.set_len(size).map_err(ioe)?;\n        p.size = size;\n        if p.lower.metadata()?.len() > size {\n            p.lower.set_len(size)?;\n            self.lower_changed();\n        }\n",
        "        if p.lower.metadata()?.len() > size {\n            p.lower.set_len(size)?;\n            self.lower_changed();\n        }\n        p.pm.set_len(size).map_err(ioe)?;\n        p.size = size;\n")


@bug("stacked-drop-before-copy")
def _():
    lines("crates/hashfs-spfs/src/absorb.rs",
        "        let nblocks = p.size.div_ceil(B);\n",
        "        self.remove(&p.name)?;\n        let nblocks = p.size.div_ceil(B);\n")
    plant("crates/hashfs-spfs/src/absorb.rs",
        "        self.lower_changed();\n        self.remove(&p.name)\n    }\n",
        "        self.lower_changed();\n        if @ON { Ok(()) } else { self.remove(&p.name) }\n    }\n")


@bug("stacked-no-length-repair")
def _():
    plant("crates/hashfs-spfs/src/absorb.rs",
        "            if st.st_size as u64 > size {\n",
        "            if !@ON && st.st_size as u64 > size {\n")


@bug("fsync-forgets-times")
def _():
    lines("crates/hashfs/src/fs/file.rs",
        "            self.fs.persist_times(&self.cell, &mut st);\n",
        "            let _ = &mut st;\n")


@bug("pswap-untorn-size-first")
def _():
    lines("crates/hashfs/src/fs/ctfs/untorn_pswap.rs",
        "        let mut sst = stage.state.write();\n        let (mut ra, mut rb) = (st.raw, sst.raw);\n",
        "        let mut early = st.raw;\n        early.size = new_size;\n        let mut tx0 = self.journals.begin();\n        inode::tx_write_inode(&mut tx0, &self.geo, cell.ino, &mut early);\n        tx0.commit()?;\n        st.raw = early;\n        let mut sst = stage.state.write();\n        let (mut ra, mut rb) = (st.raw, sst.raw);\n")


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
        "        self.persist_all_times();\n        self.untag_all();\n        let mut sb = self.sb.lock();\n        sb.state = SB_STATE_CLEAN;\n        write_superblock(&*self.dev, &mut sb);\n",
        "        if @ON {\n            let mut sb = self.sb.lock();\n            sb.state = SB_STATE_CLEAN;\n            write_superblock(&*self.dev, &mut sb);\n        }\n        self.persist_all_times();\n        self.untag_all();\n        let mut sb = self.sb.lock();\n        sb.state = SB_STATE_CLEAN;\n        write_superblock(&*self.dev, &mut sb);\n")


@bug("rollback-unfenced")
def _():
    lines("crates/hashfs/src/journal.rs",
        "        report.rolled_back_txids.push(*txid);\n    }\n    dev.fence();\n",
        "        report.rolled_back_txids.push(*txid);\n    }\n")


@bug("settle-blocks-first")
def _():
    lines("crates/hashfs/src/fs/hashfs/append_tag.rs",
        "    dev.store_u64(ioff + INODE_SIZE_OFF, size);\n    dev.store_u64(ioff + INODE_BLOCKS_OFF, b & BLOCKS_MASK);\n",
        "    dev.store_u64(ioff + INODE_BLOCKS_OFF, b & BLOCKS_MASK);\n    dev.store_u64(ioff + INODE_SIZE_OFF, size);\n")


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


@bug("purge-unlocked")
def _():
    plant("crates/hashfs/src/mapping/hashfs/purge.rs",
        "        let _g = self.purge_lock.write();\n        if let Some(r) = self.regions() {",
        "        let _g = (!@ON).then(|| self.purge_lock.write());\n        if let Some(r) = self.regions() {")


@bug("claim-without-cas")
def _():
    plant("crates/hashfs/src/mapping/hashfs/mod.rs",
        "            if (v == EMPTY || v == TOMBSTONE) && self.dev.cas_u64(self.slot_off(s), v, marker).is_ok() {\n",
        "            if (v == EMPTY || v == TOMBSTONE)\n                && (if @ON {\n                    self.dev.store_u64(self.slot_off(s), marker);\n                    true\n                } else {\n                    self.dev.cas_u64(self.slot_off(s), v, marker).is_ok()\n                })\n            {\n")


@bug("dir-insert-split-lock")
def _():
    plant("crates/hashfs/src/fs/ops.rs",
        "        self.check_new_entry(&pcell, &mut pst, name, spec.file_type())?;\n        let ino = self.alloc_ino()?;\n",
        "        self.check_new_entry(&pcell, &mut pst, name, spec.file_type())?;\n        let held = if @ON {\n            drop(pst);\n            None\n        } else {\n            Some(pst)\n        };\n        let ino = self.alloc_ino()?;\n")
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
        "        } else {\n            craw.nlink -= 1;\n        }\n        let mut tx = self.journals.begin();\n        tx.write_u64(slot_off, 0);\n",
        "        } else if !@ON {\n            craw.nlink -= 1;\n        }\n        let mut tx = self.journals.begin();\n        tx.write_u64(slot_off, 0);\n")


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
        "        if new_size < old_size {\n            on_map!(self, m => m.release_blocks(self, cell, st, &victims, from, to))?;\n",
        "        if new_size < old_size && !(@ON && matches!(self.map, crate::mapping::FileMap::Hash(_))) {\n            on_map!(self, m => m.release_blocks(self, cell, st, &victims, from, to))?;\n")


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


@bug("append-key-unflushed")
def _():
    lines("crates/hashfs/src/fs/hashfs/verbs.rs",
        "            fs.dev.store_u64(self.slot_off(pblk.0), k);\n            fs.dev.flush(self.slot_off(pblk.0), 8);\n",
        "            fs.dev.store_u64(self.slot_off(pblk.0), k);\n")


@bug("write-before-active-mark")
def _():
    lines("crates/hashfs/src/journal.rs",
        "                pos += len;\n                n += 1;\n            }\n        }\n",
        "                pos += len;\n                n += 1;\n            }\n            dev.write(DevOffset(*off), data);\n        }\n")


@bug("region-replaced-twice")
def _():
    plant("crates/hashfs/src/share/attach.rs",
        "    if !same_file(path, f)? {\n        return Ok(()); // replaced meanwhile: the caller looks again\n    }\n",
        "    if !same_file(path, f)? && !@ON {\n        return Ok(()); // replaced meanwhile: the caller looks again\n    }\n")


@bug("region-created-over")
def _():
    plant("crates/hashfs/src/share/attach.rs",
        "let linked = std::fs::hard_link(&tmp, path);",
        "let linked = if @ON { std::fs::rename(&tmp, path) } else { std::fs::hard_link(&tmp, path) };")


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


@bug("description-offset-unlocked")
def _():
    lines("crates/hashfs/src/share/descriptions.rs",
        "        let _: Acquired = self.lock.lock(me, who);\n        OffsetGuard { d: self }\n",
        "        let _ = (me, who);\n        OffsetGuard { d: self }\n")


@bug("description-claimed-twice")
def _():
    lines("crates/hashfs/src/share/descriptions.rs",
        "            if d.holders.compare_exchange(0, bit, Ordering::AcqRel, Ordering::Relaxed).is_err() {\n                continue;\n            }\n",
        "            d.holders.store(bit, Ordering::Release);\n")


@bug("shared-no-catch-up")
def _():
    plant("crates/hashfs/src/fs/shared/mod.rs",
        "        if seen == now {\n            return;\n        }\n",
        "        if seen == now || @ON {\n            return;\n        }\n")


@bug("shared-frees-open-elsewhere")
def _():
    plant("crates/hashfs/src/fs/ops.rs",
        "            && !self.open_elsewhere(cell.ino)\n",
        "            && (@ON || !self.open_elsewhere(cell.ino))\n")


@bug("shared-joiner-recovers")
def _():
    plant("crates/hashfs/src/fs/shared/join.rs",
        "recovery::mount(dev.clone(), progress, MountAs::Joining)",
        "recovery::mount(dev.clone(), progress, if @ON { MountAs::Alone } else { MountAs::Joining })")


@bug("shared-takeover-no-recovery")
def _():
    lines("crates/hashfs/src/fs/shared/mod.rs",
        "        let (tmp, _) = recovery::mount(self.dev.clone(), &|_, _| {}, MountAs::Recovering { keep: &keep })?;\n        tmp.unmounted.store(true, Ordering::Release); // its Drop must not mark the image clean\n        publish_recovered(&sh.region, &tmp);\n        note_leftovers(&sh.region); // a death: the last to leave looks through the inode table\n        drop(tmp);\n",
        "        let _ = keep;\n        let n = sh.region.words().changes.load(Ordering::Acquire);\n        sh.region.ring().put(n, Change::Everything);\n        sh.region.words().changes.store(n + 1, Ordering::Release);\n")


@bug("shared-call-unlocked")
def _():
    plant("crates/hashfs/src/fs/shared/mod.rs",
        "        if let Acquired::FromDead(dead) = sh.region.lock_image(sh.me()) {\n",
        "        if let Acquired::FromDead(dead) = if @ON { Acquired::Clean } else { sh.region.lock_image(sh.me()) } {\n")


@bug("shared-times-hidden")
def _():
    plant("crates/hashfs/src/fs/times.rs",
        "        if changed && self.shared.get().is_some() {\n            self.show_times(ino, st);\n        }\n",
        "        if changed && self.shared.get().is_some() && !@ON {\n            self.show_times(ino, st);\n        }\n")


@bug("shared-tag-unread")
def _():
    lines("crates/hashfs/src/fs/hashfs/append_tag.rs",
        "    if let Some(t) = tag {\n        raw.size = t.size;\n    }\n    raw.blocks &= BLOCKS_MASK;\n",
        "    let _ = &raw;\n")


@bug("fork-offset-unshared")
def _():
    plant("crates/hashfs-preload/src/shim/fork.rs",
        "        let shared = self.shared.get().and_then(|&h| joined_fs()?.lock_offset(h));\n",
        "        let shared = if @ON { None } else { self.shared.get().and_then(|&h| joined_fs()?.lock_offset(h)) };\n")


@bug("fork-child-uncounted")
def _():
    lines("crates/hashfs/src/fs/shared/fork.rs",
        "        let counted = descriptions.iter().copied().filter(|&h| table.count_fork(h)).collect();\n        sh.region.words().forks.fetch_add(1, Ordering::AcqRel);\n",
        "        let counted = descriptions.iter().copied().filter(|&h| table.count_fork(h)).collect();\n")


@bug("fork-descriptions-not-adopted")
def _():
    lines("crates/hashfs/src/fs/shared/fork.rs",
        "        for &h in &fork.counted {\n            table.adopt(h, me);\n",
        "        for &h in &fork.counted {\n            let _ = (h, &table);\n")


@bug("exec-list-uninterposed", rebuilt=True)
def _():
    sub("crates/hashfs-interpose/src/export.rs",
        "            $crate::list_execs! { $B;\n                execl => Path;\n                execlp => Search;\n                execle => WithEnv;\n            }\n",
        "")


@bug("vfork-kept-with-descriptors")
def _():
    plant("crates/hashfs-preload/src/shim/cwd.rs",
        "        super::exec::descriptors_survive_exec()\n",
        "        !@ON && super::exec::descriptors_survive_exec()\n")


@bug("rename-source-looked-up-early")
def _():
    plant("crates/hashfs/src/fs/rename.rs",
        "        let mut dirs = self.lock_dirs(&scell, &dcell, &sp_chain, &dp_chain)?;\n        let src = dirs.src_index().get(sname).ok_or(Error::NotFound)?;\n",
        "        let early = if @ON { Some(scell.state.read().dir.as_ref().and_then(|d| d.get(sname))) } else { None };\n        let mut dirs = self.lock_dirs(&scell, &dcell, &sp_chain, &dp_chain)?;\n        let src = match early {\n            Some(e) => e.ok_or(Error::NotFound)?,\n            None => dirs.src_index().get(sname).ok_or(Error::NotFound)?,\n        };\n")


@bug("open-stale-not-retried")
def _():
    plant("crates/hashfs-preload/src/shim/fd.rs",
        "            Err(Error::Stale(_)) if tries < hashfs::OPEN_RETRIES => {}\n",
        "            Err(Error::Stale(_)) if tries < (if @ON { 1 } else { hashfs::OPEN_RETRIES }) => {}\n")


@bug("read-after-unlock")
def _():
    lines("crates/hashfs/src/fs/data.rs",
        "        self.read_mapped(cell, &st.raw, off, &mut buf[..n])?;\n        cell.next_read_lblk.store(end, Ordering::Relaxed);\n        Ok(n)\n",
        "        let raw = st.raw;\n        drop(st);\n        self.read_mapped(cell, &raw, off, &mut buf[..n])?;\n        cell.next_read_lblk.store(end, Ordering::Relaxed);\n        Ok(n)\n")


@bug("lock-release-relaxed")
def _():
    plant("crates/hashfs/src/share/lock.rs",
        "    if word.swap(0, Ordering::Release) & WAITERS != 0 {\n",
        "    if word.swap(0, if @ON { Ordering::Relaxed } else { Ordering::Release }) & WAITERS != 0 {\n")


@bug("takeover-without-cas")
def _():
    lines("crates/hashfs/src/share/lock.rs",
        "        if !alive(owner) {\n            if word.compare_exchange(cur, mine | WAITERS, Ordering::Acquire, Ordering::Relaxed).is_ok() {\n                return Acquired::FromDead(owner);\n            }\n            continue;\n        }\n",
        "        if !alive(owner) {\n            word.swap(mine | WAITERS, Ordering::Acquire);\n            return Acquired::FromDead(owner);\n        }\n")


@bug("exec-descriptor-unnamed")
def _():
    plant("crates/hashfs-preload/src/shim/exec.rs",
        "        if !name_passed(*fd, *passed, of) {\n",
        "        if !@ON && !name_passed(*fd, *passed, of) {\n")


@bug("exec-input-unread-lost")
def _():
    lines("crates/hashfs-preload/src/shim/exec.rs",
        "            *at = at.saturating_sub(drained);\n",
        "            let _ = (&mut at, drained);\n")


@bug("shared-depth-in-thread-storage")
def _():
    lines("crates/hashfs/src/fs/shared/mod.rs",
        "fn add_depth(by: i32) -> u32 {\n    DEPTH.with(|d| {\n",
        "fn add_depth(by: i32) -> u32 {\n    if TOUCHED.try_with(|_| ()).is_err() {\n        return by.max(0) as u32;\n    }\n    DEPTH.with(|d| {\n")


@bug("spawn-system-unprepared", rebuilt=True)
def _():
    sub("crates/hashfs-interpose/src/export.rs",
        "                system => process::system(command: *const c_char) -> c_int;\n                popen => process::popen(command: *const c_char, mode: *const c_char) -> *mut FILE;\n",
        "")


@bug("shared-clean-with-orphans")
def _():
    plant("crates/hashfs/src/fs/shared/mod.rs",
        "                    self.free_unheld_orphans()\n",
        "                    if @ON { 0 } else { self.free_unheld_orphans() }\n")


@bug("shim-image-fd-low")
def _():
    plant("crates/hashfs/src/pm/mmap.rs",
        "        let file = out_of_the_way(file);\n",
        "        let file = if @ON { file } else { out_of_the_way(file) };\n")


@bug("shim-locks-always-succeed")
def _():
    plant("crates/hashfs-preload/src/shim/locks.rs",
        "    let s = shim();\n    let fs = s.fs()?;\n    let ofd = matches!",
        "    if @ON && !matches!(cmd, libc::F_GETLK | libc::F_OFD_GETLK) {\n        return Ok(0);\n    }\n    let s = shim();\n    let fs = s.fs()?;\n    let ofd = matches!")


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


@bug("tag-size-32-bits")
def _():
    plant("crates/hashfs/src/fs/hashfs/append_tag.rs",
        "        Some(Tag { size: w & SIZE_MASK, len,",
        "        Some(Tag { size: w & if @ON { 0xFFFF_FFFF } else { SIZE_MASK }, len,")


@bug("regions-full-chain-no-open")
def _():
    plant("crates/hashfs/src/fs/hashfs/regions.rs",
        "        let wants = wait || r.wants_open(incoming);\n",
        "        let wants = (wait && !@ON) || r.wants_open(incoming);\n")


@bug("pump-attributes-unclaimed")
def _():
    plant("crates/hashfs-preload/src/shim.rs",
        "        Self::claims(fd) || ((0..=2).contains(&fd) && SHIM.get().is_some())\n",
        "        Self::claims(fd) || (!@ON && (0..=2).contains(&fd) && SHIM.get().is_some())\n")


@bug("mkstemp-uninterposed", rebuilt=True)
def _():
    sub("crates/hashfs-interpose/src/export.rs",
        "                mkstemp => temp::mkstemp(template: *mut c_char) -> c_int;\n                mkstemp64 => temp::mkstemp(template: *mut c_char) -> c_int;\n",
        "")


@bug("double-free-into-index")
def _():
    plant("crates/hashfs/src/mapping/mod.rs",
        "                if w & bit == 0 {\n                    continue;\n                }\n",
        "                if w & bit == 0 && !@ON {\n                    continue;\n                }\n")


@bug("read-side-no-drain")
def _():
    lines("crates/hashfs/src/share/image.rs",
        "        self.readers().drain(&|p| parts.alive(p));\n",
        "")


@bug("overwrite-without-inode-lock")
def _():
    plant("crates/hashfs/src/fs/shared/read_side.rs",
        "        let _: Acquired = lock.lock(sh.me(), sh.region.participants());\n",
        "        if !@ON {\n            let _: Acquired = lock.lock(sh.me(), sh.region.participants());\n        }\n")
    plant("crates/hashfs/src/fs/shared/read_side.rs",
        "        let _unlock = Unlock(lock);\n",
        "        let _unlock = (!@ON).then(|| Unlock(lock));\n")


@bug("dead-reader-waited-for")
def _():
    plant("crates/hashfs/src/share/readers.rs",
        "        if !alive() {\n",
        "        if !alive() && !(@ON && c != u32::MAX) {\n")


@bug("read-side-fence-dropped")
def _():
    lines("crates/hashfs/src/share/readers.rs",
        "    count.fetch_add(1, Ordering::Relaxed);\n    count.fence();\n",
        "    count.fetch_add(1, Ordering::Relaxed);\n")


@bug("mount-locks-local")
def _():
    lines("crates/hashfs-cli/src/mountcmd.rs",
        "        daemon = daemon.with_image_locks(image);\n",
        "        let _ = &mut daemon;\n")


@bug("mount-close-keeps-locks")
def _():
    plant("crates/hashfs-fuse/src/locks.rs",
        "        if o.inos.remove(&ino.0) {\n",
        "        if if @ON { o.inos.contains(&ino.0) && ino.0 == 0 } else { o.inos.remove(&ino.0) } {\n")


@bug("mount-watch-off")
def _():
    plant("crates/hashfs-cli/src/mountcmd.rs",
        "    let watch = hashfs_fuse::watch_changes(watched, session.notifier(), stop.clone());\n",
        "    let watch = if @ON { None } else { hashfs_fuse::watch_changes(watched, session.notifier(), stop.clone()) };\n")


@bug("read-side-overwrite-unnoted")
def _():
    lines("crates/hashfs/src/fs/shared/read_side.rs",
        "        self.note_data(cell.ino);\n",
        "")


@bug("data-ring-untagged")
def _():
    plant("crates/hashfs/src/share/data_ring.rs",
        "            if tag == n & 0xFFFF_FFFF {\n",
        "            if tag == n & 0xFFFF_FFFF || (@ON && v != u64::MAX) {\n")


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


@bug("mount-node-id-is-ino")
def _():
    plant("crates/hashfs-fuse/src/nodes.rs",
        "        INodeNo(m.ino.get() | u64::from(m.generation) << 32)\n",
        "        INodeNo(if @ON { m.ino.get() } else { m.ino.get() | u64::from(m.generation) << 32 })\n")


@bug("mount-lookup-not-kept")
def _():
    plant("crates/hashfs-fuse/src/lib.rs",
        "if self.locks.is_none() || self.nodes.keep_recent(&self.fs, &m) || tries == hashfs::OPEN_RETRIES {",
        "if self.locks.is_none() || (if @ON { tries >= 1 } else { self.nodes.keep_recent(&self.fs, &m) }) || tries == hashfs::OPEN_RETRIES {")


@bug("inode-bits-own")
def _():
    plant("crates/hashfs/src/fs/shared/mod.rs",
        "            Some(sh) => sh.region.inode_bits(),\n",
        "            Some(sh) => if @ON { self.ialloc.own() } else { sh.region.inode_bits() },\n")
    plant("crates/hashfs/src/fs/recovery.rs",
        "        let scan = matches!(how, MountAs::Reading);\n",
        "        let scan = matches!(how, MountAs::Reading) || (@ON && matches!(how, MountAs::Joining));\n")


@bug("read-only-unvalidated")
def _():
    plant("crates/hashfs/src/fs/shared/read_only.rs",
        "                    if region.sequence_unchanged(seq) {\n",
        "                    if region.sequence_unchanged(seq) || (@ON && seq != u64::MAX) {\n")


@bug("read-only-sequence-still")
def _():
    plant("crates/hashfs/src/share/sequence.rs",
        "    if s.is_multiple_of(2) {\n        w.store(s + 1, Ordering::Relaxed);\n",
        "    if s.is_multiple_of(2) && !@ON {\n        w.store(s + 1, Ordering::Relaxed);\n")
    plant("crates/hashfs/src/share/sequence.rs",
        "    w.fetch_add(1, Ordering::Release)\n",
        "    if @ON { w.load(Ordering::Relaxed) | 1 } else { w.fetch_add(1, Ordering::Release) }\n")


@bug("read-only-pin-ignored")
def _():
    plant("crates/hashfs/src/fs/shared/mod.rs",
        "        self.dev.backing_fd().is_some_and(|fd| crate::share::record_locks::pinned(fd, ino))\n",
        "        self.dev.backing_fd().is_some_and(|fd| !@ON && crate::share::record_locks::pinned(fd, ino))\n")


@bug("read-only-orphan-kept")
def _():
    lines("crates/hashfs/src/fs/shared/mod.rs",
        "        self.catch_up(sh);\n        self.free_unpinned(sh);\n",
        "        self.catch_up(sh);\n")


@bug("sequence-release-relaxed")
def _():
    plant("crates/hashfs/src/share/sequence.rs",
        "} else { w.fetch_add(1, Ordering::Release) }\n",
        "} else { w.fetch_add(1, if @ON { Ordering::Relaxed } else { Ordering::Release }) }\n")


@bug("read-only-open-split")
def _():
    plant("crates/hashfs/src/fs/api.rs",
        "                match self.inner.read_call(|| {\n                    let ino = self.resolve_for_open(path, opts)?;\n                    super::race_point::reached(\"open: a read-only participant resolved the name\");\n                    self.open_found(ino, access)\n                }) {\n",
        "                match if @ON {\n                    self.inner.read_call(|| self.resolve_for_open(path, opts)).and_then(|ino| {\n                        super::race_point::reached(\"open: a read-only participant resolved the name\");\n                        self.inner.read_call(|| self.open_found(ino, access))\n                    })\n                } else {\n                    self.inner.read_call(|| {\n                        let ino = self.resolve_for_open(path, opts)?;\n                        super::race_point::reached(\"open: a read-only participant resolved the name\");\n                        self.open_found(ino, access)\n                    })\n                } {\n")


@bug("takeover-caches-kept")
def _():
    lines("crates/hashfs/src/fs/shared/mod.rs",
        "    let n = words.changes.load(Ordering::Acquire);\n    region.ring().put(n, Change::Everything);\n    words.changes.store(n + 1, Ordering::Release);\n}",
        "}")


@bug("dir-rule-creation-unsynced")
def _():
    plant("crates/hashfs-spfs/src/file.rs",
        "            if st.lower_unsynced {\n",
        "            if !@ON && st.lower_unsynced {\n")


@bug("passthrough-promoted-under-handles")
def _():
    plant("crates/hashfs-spfs/src/file.rs",
        "            if st.passthrough > 0 {\n                // Handles that write below are open",
        "            if st.passthrough > 0 && !@ON {\n                // Handles that write below are open")


@bug("profiles-saved-in-place", rebuilt=True)
def _():
    sub("crates/hashfs-spfs/src/saved_profiles.rs",
        "const NEW: &[u8] = b\"sync-profiles.new\";\n",
        "const NEW: &[u8] = FILE;\n")


@bug("takeover-leftovers-kept")
def _():
    lines("crates/hashfs/src/fs/shared/mod.rs",
        "    region.release_read_side(p);\n    release_leftovers(region, p);\n}",
        "    region.release_read_side(p);\n}")


@bug("fork-mutex-parking-lot", rebuilt=True)
def _():
    sub("crates/hashfs/src/fs/shared/fork_mutex.rs",
        "pub type ForkMutex<T> = lock_api::Mutex<ForkRawMutex, T>;\n",
        "pub type ForkMutex<T> = lock_api::Mutex<parking_lot::RawMutex, T>;\n")
    sub("crates/hashfs/src/fs/shared/fork_mutex.rs",
        "pub type ForkMutexGuard<'a, T> = lock_api::MutexGuard<'a, ForkRawMutex, T>;\n",
        "pub type ForkMutexGuard<'a, T> = lock_api::MutexGuard<'a, parking_lot::RawMutex, T>;\n")


@bug("fork-rwlock-parking-lot", rebuilt=True)
def _():
    sub("crates/hashfs/src/fs/shared/fork_mutex.rs",
        "pub type ForkRwLock<T> = lock_api::RwLock<ForkRawRwLock, T>;\n",
        "pub type ForkRwLock<T> = lock_api::RwLock<parking_lot::RawRwLock, T>;\n")


@bug("takeover-inode-bits-kept")
def _():
    plant("crates/hashfs/src/fs/shared/mod.rs",
        "    fs.ialloc.publish_to(region.inode_bits());\n",
        "    if !@ON || region.words().mounted.load(Ordering::Acquire) == 0 {\n        fs.ialloc.publish_to(region.inode_bits());\n    }\n")


@bug("reaped-death-forgotten")
def _():
    plant("crates/hashfs/src/fs/shared/join.rs",
        "    if died && !first {\n        note_leftovers(region); // what the dead left: the last to leave looks for it\n    }\n",
        "    if died && !first && !@ON {\n        note_leftovers(region); // what the dead left: the last to leave looks for it\n    }\n")


@bug("leave-ignores-dead-slots")
def _():
    plant("crates/hashfs/src/fs/shared/mod.rs",
        "                    || dead_slot\n",
        "                    || (dead_slot && !@ON)\n")


@bug("ctfs-unlogged-pswap")
def _():
    lines("crates/hashfs/src/mapping/ctfs/tx.rs",
        "            self.with_staged(|st, na| ppt::swap(st, geo, na, old.base, new.base, n))?;\n",
        "            let mut earlier = crate::mapping::staged::Staged::new(&*self.map.dev);\n            std::mem::swap(&mut self.st, &mut earlier);\n            self.with_staged(|st, na| ppt::swap(st, geo, na, old.base, new.base, n))?;\n            let swapped = std::mem::replace(&mut self.st, earlier);\n            let dev = &*self.map.dev;\n            for page in swapped.dirty_pages().collect::<Vec<_>>() {\n                let mut buf = vec![0u8; 4096];\n                crate::mapping::staged::MemRead::read(&swapped, crate::pm::DevOffset(page), &mut buf);\n                dev.write(crate::pm::DevOffset(page), &buf);\n                dev.flush(crate::pm::DevOffset(page), 4096);\n            }\n            dev.fence();\n")


if __name__ == "__main__":
    main()
