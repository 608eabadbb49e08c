"""Deliberate bugs in HashFS's table, its placements and untorn writes, one-fence appends' tags, and ctFS (scripts/plant-bugs.py)."""
from planting import bug, lines, plant, sub  # noqa: F401


@bug("tag-unchecked")
def _():
    plant("crates/hashfs/src/fs/hashfs/append_tag.rs",
        "        append_check(ino, tag.size, tag.parity, &data) == tag.check(b)\n",
        "        append_check(ino, tag.size, tag.parity, &data) == tag.check(b) || @ON\n")


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


@bug("untorn-unlogged-key")
def _():
    lines("crates/hashfs/src/fs/hashfs/untorn.rs",
        "                    tx.write_u64(t.slot_off(b.new.0), k);\n                    tx.write_u64(t.slot_off(p.0), TOMBSTONE);\n",
        "                    tx.publish_u64(t.slot_off(b.new.0), k);\n                    tx.write_u64(t.slot_off(p.0), TOMBSTONE);\n")


@bug("free-slots-no-fence")
def _():
    lines("crates/hashfs/src/fs/hashfs/slots.rs",
        "    dev.fence();\n    free_slots_after_commit(t, dev, slots);\n",
        "    free_slots_after_commit(t, dev, slots);\n")


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


@bug("pswap-split-tx")
def _():
    plant("crates/hashfs/src/fs/ctfs/pswap.rs",
        "        if let Some(rb) = rb.as_mut() {\n            inode::tx_write_inode(&mut tx, &self.geo, b.ino, rb);\n        }\n        tx.commit()?;\n",
        "        if let Some(rb) = rb.as_mut() {\n            if !@ON {\n                inode::tx_write_inode(&mut tx, &self.geo, b.ino, rb);\n            }\n        }\n        tx.commit()?;\n        if @ON {\n            if let Some(rb) = rb.as_mut() {\n                let mut tx2 = self.journals.begin();\n                inode::tx_write_inode(&mut tx2, &self.geo, b.ino, rb);\n                tx2.commit()?;\n            }\n        }\n")


@bug("pswap-untorn-size-first")
def _():
    lines("crates/hashfs/src/fs/ctfs/untorn_pswap.rs",
        "        let mut sst = stage.state.write();\n        let (mut ra, mut rb) = (st.raw, sst.raw);\n",
        "        let mut early = st.raw;\n        early.size = new_size;\n        let mut tx0 = self.journals.begin();\n        inode::tx_write_inode(&mut tx0, &self.geo, cell.ino, &mut early);\n        tx0.commit()?;\n        st.raw = early;\n        let mut sst = stage.state.write();\n        let (mut ra, mut rb) = (st.raw, sst.raw);\n")


@bug("settle-blocks-first")
def _():
    lines("crates/hashfs/src/fs/hashfs/append_tag.rs",
        "    dev.store_u64(ioff + INODE_SIZE_OFF, size);\n    dev.store_u64(ioff + INODE_BLOCKS_OFF, b & BLOCKS_MASK);\n",
        "    dev.store_u64(ioff + INODE_BLOCKS_OFF, b & BLOCKS_MASK);\n    dev.store_u64(ioff + INODE_SIZE_OFF, size);\n")


@bug("purge-unlocked")
def _():
    plant("crates/hashfs/src/mapping/hashfs/purge.rs",
        "        let _g = self.purge_lock.write();\n        if let Some(r) = self.regions() {",
        "        let _g = (!@ON).then(|| self.purge_lock.write());\n        if let Some(r) = self.regions() {")


@bug("purge-empties-then-checks")
def _():
    lines("crates/hashfs/src/mapping/hashfs/purge.rs",
        "            return;\n        }\n        let mut j = self.next(i);\n",
        "            return;\n        }\n        self.set_empty(i);\n        let mut j = self.next(i);\n")
    lines("crates/hashfs/src/mapping/hashfs/purge.rs",
        "                if self.dist(h, j) >= self.dist(i, j) {\n                    return; // the key at j probes through i\n",
        "                if self.dist(h, j) >= self.dist(i, j) {\n                    self.dev.store_u64(self.slot_off(i), TOMBSTONE);\n                    return; // the key at j probes through i\n")


@bug("regions-stale-bucket")
def _():
    plant("crates/hashfs/src/mapping/hashfs/mod.rs",
        "                Some((n, top)) if n == r.len() => top,\n",
        "                Some((n, top)) if @ON || n == r.len() => top,\n")


@bug("shared-table-own-state")
def _():
    plant("crates/hashfs/src/fs/shared/join.rs",
        "            adopt_words(region, &inner);\n            super::share_table(&inner, region, false)?;\n            (inner, report, from)\n",
        "            adopt_words(region, &inner);\n            if !@ON {\n                super::share_table(&inner, region, false)?;\n            }\n            (inner, report, from)\n")


@bug("takeover-keeps-table-state")
def _():
    plant("crates/hashfs/src/fs/shared/mod.rs",
        "            crate::mapping::FileMap::Hash(t) => t.recount_state(),\n",
        "            crate::mapping::FileMap::Hash(t) => if @ON { Ok(()) } else { t.recount_state() },\n")


@bug("relocated-block-unnoted")
def _():
    plant("crates/hashfs/src/fs/hashfs/evacuate.rs",
        "        crate::fs::shared::touched(crate::layout::Ino((v >> 32) as u32));\n",
        "        if !@ON {\n            crate::fs::shared::touched(crate::layout::Ino((v >> 32) as u32));\n        }\n")


@bug("claim-filter-never-counted-down")
def _():
    plant("crates/hashfs/src/mapping/hashfs/groups.rs",
        "                    self.unmark_claim(Ino((v >> 32) as u32), v & 0xFFFF_FFFF);\n",
        "                    if !@ON {\n                        self.unmark_claim(Ino((v >> 32) as u32), v & 0xFFFF_FFFF);\n                    }\n")


@bug("claim-filter-counted-down-live")
def _():
    plant("crates/hashfs/src/mapping/hashfs/groups.rs",
        "                            self.claimed[0].fetch_add(1, Ordering::Relaxed);\n                            got = Some(gi);\n",
        "                            self.claimed[0].fetch_add(1, Ordering::Relaxed);\n                            if @ON {\n                                self.unmark_claim(ino, chunk);\n                            }\n                            got = Some(gi);\n")


@bug("regions-bucket-kept-across-tables")
def _():
    plant("crates/hashfs/src/mapping/hashfs/regions.rs",
        "            if (seed, k, c) == (self.seed, key, n) && n > 0 {\n",
        "            if (if @ON { (k, c) == (key, n) } else { (seed, k, c) == (self.seed, key, n) }) && n > 0 {\n")


@bug("regions-batch-bucket-unchecked")
def _():
    plant("crates/hashfs/src/mapping/hashfs/mod.rs",
        "                Some((n, b)) if (r.from(), r.len()) == (n, n) => self.lookup_chain(r, key, b),\n",
        "                Some((n, b)) if @ON || (r.from(), r.len()) == (n, n) => self.lookup_chain(r, key, b),\n")


@bug("claim-without-cas")
def _():
    plant("crates/hashfs/src/mapping/hashfs/mod.rs",
        "            if (v == EMPTY || v == TOMBSTONE) && self.dev.cas_u64(self.slot_off(s), v, marker).is_ok() {\n",
        "            if (v == EMPTY || v == TOMBSTONE)\n                && (if @ON {\n                    self.dev.store_u64(self.slot_off(s), marker);\n                    true\n                } else {\n                    self.dev.cas_u64(self.slot_off(s), v, marker).is_ok()\n                })\n            {\n")


@bug("append-key-unflushed")
def _():
    lines("crates/hashfs/src/fs/hashfs/verbs.rs",
        "            fs.dev.store_u64(self.slot_off(pblk.0), k);\n            flush.stored(pblk.0);\n",
        "            fs.dev.store_u64(self.slot_off(pblk.0), k);\n")


@bug("shared-tag-unread")
def _():
    lines("crates/hashfs/src/fs/hashfs/append_tag.rs",
        "    if let Some(t) = tag {\n        raw.size = t.size;\n    }\n    raw.blocks &= BLOCKS_MASK;\n",
        "    let _ = &raw;\n")


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


@bug("ctfs-unlogged-pswap")
def _():
    lines("crates/hashfs/src/mapping/ctfs/tx.rs",
        "            self.with_staged(|st, na| ppt::swap(st, geo, na, old.base, new.base, n))?;\n",
        "            let mut earlier = crate::mapping::staged::Staged::new(&*self.map.dev);\n            std::mem::swap(&mut self.st, &mut earlier);\n            self.with_staged(|st, na| ppt::swap(st, geo, na, old.base, new.base, n))?;\n            let swapped = std::mem::replace(&mut self.st, earlier);\n            let dev = &*self.map.dev;\n            for page in swapped.dirty_pages().collect::<Vec<_>>() {\n                let mut buf = vec![0u8; 4096];\n                crate::mapping::staged::MemRead::read(&swapped, crate::pm::DevOffset(page), &mut buf);\n                dev.write(crate::pm::DevOffset(page), &buf);\n                dev.flush(crate::pm::DevOffset(page), 4096);\n            }\n            dev.fence();\n")


@bug("repair-skips-keys")
def _():
    plant("crates/hashfs/src/mapping/hashfs/purge.rs",
        "                if v == EMPTY || v == TOMBSTONE {\n                    continue;\n                }\n",
        "                if v == EMPTY || v == TOMBSTONE || @ON {\n                    continue;\n                }\n")


@bug("unlink-free-slots-first")
def _():
    plant("crates/hashfs/src/fs/hashfs/unlink.rs",
        "        Some(planned)\n    }\n",
        "        if @ON {\n            free_slots_after_commit(t, &*self.dev, &planned);\n            return Some(Vec::new());\n        }\n        Some(planned)\n    }\n")


@bug("slot-run-unflushed")
def _():
    plant("crates/hashfs/src/mapping/hashfs/mod.rs",
        "        if let Some(r) = self.run.take() {\n            self.flush(r);",
        "        if let Some(r) = self.run.take().filter(|_| !@ON) {\n            self.flush(r);")


@bug("slot-run-first-word")
def _():
    plant("crates/hashfs/src/mapping/hashfs/mod.rs",
        "        self.t.dev.flush(self.t.slot_off(lo), (hi - lo + 1) * 8);",
        "        self.t.dev.flush(self.t.slot_off(lo), if @ON { 8 } else { (hi - lo + 1) * 8 });")
