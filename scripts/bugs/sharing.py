"""Deliberate bugs in many processes on one image: the shared region, its locks, joins, takeovers, forks (scripts/plant-bugs.py)."""
from planting import bug, lines, plant, sub  # noqa: F401


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


@bug("description-offset-unlocked")
def _():
    lines("crates/hashfs/src/share/descriptions.rs",
        "        let _: Acquired = self.lock.lock(me, who);\n        OffsetGuard { d: self }\n",
        "        let _ = (me, who);\n        OffsetGuard { d: self }\n")


@bug("description-claimed-twice")
def _():
    lines("crates/hashfs/src/share/descriptions.rs",
        "            if !d.holders.try_claim(me) {\n                self.held.down(me);\n                continue;\n            }\n",
        "            d.holders.set_only(me);\n")


@bug("open-inode-counted-after")
def _():
    plant("crates/hashfs/src/share/image.rs",
        "            if i == ino.0 && !unheld {\n                self.held.up(me);\n",
        "            if i == ino.0 && !unheld && @ON {\n"
        "                let first = !s.holders.insert(me);\n"
        "                crate::fs::race_point::reached(\"open inodes: a hold counted\");\n"
        "                if first {\n"
        "                    self.held.up(me);\n"
        "                }\n"
        "                return true;\n"
        "            }\n"
        "            if i == ino.0 && !unheld {\n                self.held.up(me);\n")


@bug("description-counted-after")
def _():
    plant("crates/hashfs/src/share/descriptions.rs",
        "        let d = &self.slots[h.index as usize];\n        self.held.up(me);\n",
        "        let d = &self.slots[h.index as usize];\n"
        "        if @ON {\n"
        "            let first = !d.holders.insert(me);\n"
        "            crate::fs::race_point::reached(\"descriptions: a hold counted\");\n"
        "            if first {\n"
        "                self.held.up(me);\n"
        "            }\n"
        "            let _ = d.forks.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));\n"
        "            return;\n"
        "        }\n"
        "        self.held.up(me);\n")


@bug("set-claim-unfenced")
def _():
    plant("crates/hashfs/src/share/participant_set.rs",
        "        return false;\n    }\n    words[w].fence();\n",
        "        return false;\n    }\n    if !@ON {\n        words[w].fence();\n    }\n")


@bug("set-remove-unfenced")
def _():
    plant("crates/hashfs/src/share/participant_set.rs",
        "    let was = words[w].fetch_and(!bit, SeqCst) & bit != 0;\n    words[w].fence();\n",
        "    let was = words[w].fetch_and(!bit, SeqCst) & bit != 0;\n    if !@ON {\n        words[w].fence();\n    }\n")


@bug("shared-no-catch-up")
def _():
    plant("crates/hashfs/src/fs/shared/mod.rs",
        "        if seen == now {\n            return;\n        }\n",
        "        if seen == now || @ON {\n            return;\n        }\n")


@bug("shared-joiner-recovers")
def _():
    plant("crates/hashfs/src/fs/shared/join.rs",
        "recovery::mount(dev.clone(), progress, MountAs::Joining)",
        "recovery::mount(dev.clone(), progress, if @ON { MountAs::Alone } else { MountAs::Joining })")


@bug("shared-takeover-no-recovery")
def _():
    lines("crates/hashfs/src/fs/shared/mod.rs",
        "        let how = MountAs::Recovering { keep: &keep, in_use: in_use(&sh.region) };\n        let (tmp, report) = recovery::mount(self.dev.clone(), &|_, _| {}, how)?;\n        tmp.unmounted.store(true, Ordering::Release); // its Drop must not mark the image clean\n        publish_recovered(&sh.region, &tmp, &report);\n        self.recount_table()?;\n        note_leftovers(&sh.region); // a death: the last to leave looks through the inode table\n        drop(tmp);\n",
        "        let _ = (keep, in_use);\n        let n = sh.region.words().changes.load(Ordering::Acquire);\n        sh.region.ring().put(n, Change::Everything);\n        sh.region.words().changes.store(n + 1, Ordering::Release);\n")


@bug("shared-call-unlocked")
def _():
    plant("crates/hashfs/src/fs/shared/mod.rs",
        "        if let Acquired::FromDead(dead) = sh.region.lock_image(sh.me()) {\n",
        "        if let Acquired::FromDead(dead) = if @ON { Acquired::Clean } else { sh.region.lock_image(sh.me()) } {\n")


@bug("fork-child-uncounted")
def _():
    lines("crates/hashfs/src/fs/shared/fork.rs",
        "        }\n        sh.region.words().forks.fetch_add(1, Ordering::AcqRel);\n        self.inner.forking(sh);\n",
        "        }\n        self.inner.forking(sh);\n")


@bug("fork-descriptions-not-adopted")
def _():
    plant("crates/hashfs/src/share/descriptions.rs",
        "        if !d.holders.contains(p) {\n",
        "        if !@ON && !d.holders.contains(p) {\n")


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


@bug("shared-depth-in-thread-storage")
def _():
    lines("crates/hashfs/src/fs/shared/mod.rs",
        "fn add_depth(by: i32) -> u32 {\n    DEPTH.with(|d| {\n",
        "fn add_depth(by: i32) -> u32 {\n    if TOUCHED.try_with(|_| ()).is_err() {\n        return by.max(0) as u32;\n    }\n    DEPTH.with(|d| {\n")


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


@bug("read-only-leaves-handover")
def _():
    plant("crates/hashfs/src/fs/shared/read_only.rs",
        "            Ok(Some(r)) => r.words().forks.load(Ordering::Acquire) != 0,\n",
        "            Ok(Some(r)) => !@ON && r.words().forks.load(Ordering::Acquire) != 0,\n")


@bug("leaver-keeps-image-lock")
def _():
    plant("crates/hashfs/src/fs/shared/mod.rs",
        "        if !alone && !sh.forked.load(Ordering::Acquire) {\n",
        "        if !@ON && !alone && !sh.forked.load(Ordering::Acquire) {\n")


@bug("left-regions-kept")
def _():
    plant("crates/hashfs/src/fs/shared/join.rs",
        "            if first_in_region {\n",
        "            if first_in_region && !@ON {\n")


@bug("attach-ignores-sweep")
def _():
    plant("crates/hashfs/src/share/attach.rs",
        "    crate::fs::race_point::reached(\"attach: the region held\");\n    same_file(path, f)\n",
        "    crate::fs::race_point::reached(\"attach: the region held\");\n    if @ON { return Ok(true); }\n    same_file(path, f)\n")


@bug("sweep-takes-no-region-lock")
def _():
    plant("crates/hashfs/src/share/sweep.rs",
        "    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {\n",
        "    if !@ON && unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {\n")


@bug("sweep-ignores-handover")
def _():
    plant("crates/hashfs/src/share/sweep.rs",
        "    let handing_over = forks != 0 && runs;\n",
        "    let handing_over = !@ON && forks != 0 && runs;\n")


@bug("sweep-keeps-dead-handover")
def _():
    plant("crates/hashfs/src/share/sweep.rs",
        "    let runs = slots().any(|p| parts.process_runs(p));\n",
        "    let runs = @ON || slots().any(|p| parts.process_runs(p));\n")


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
        "        self.dev.backing_fd().is_some_and(|fd| crate::share::pins::pinned(fd, ino))\n",
        "        self.dev.backing_fd().is_some_and(|fd| !@ON && crate::share::pins::pinned(fd, ino))\n")


@bug("read-only-orphan-kept")
def _():
    lines("crates/hashfs/src/fs/shared/mod.rs",
        "        self.free_unpinned(sh);\n        guard\n",
        "        guard\n")


@bug("sequence-release-relaxed")
def _():
    plant("crates/hashfs/src/share/sequence.rs",
        "} else { w.fetch_add(1, Ordering::Release) }\n",
        "} else { w.fetch_add(1, if @ON { Ordering::Relaxed } else { Ordering::Release }) }\n")


@bug("takeover-caches-kept")
def _():
    lines("crates/hashfs/src/fs/shared/mod.rs",
        "    let n = words.changes.load(Ordering::Acquire);\n    region.ring().put(n, Change::Everything);\n    words.changes.store(n + 1, Ordering::Release);\n}",
        "}")


@bug("takeover-leftovers-kept")
def _():
    lines("crates/hashfs/src/fs/shared/mod.rs",
        "    region.record_locks().release_dead(p);\n    release_leftovers(region, p)\n}",
        "    region.record_locks().release_dead(p);\n    Vec::new()\n}")


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
        "        fs.ialloc.publish_to(region.inode_bits());\n",
        "        if !@ON || region.words().mounted.load(Ordering::Acquire) == 0 {\n            fs.ialloc.publish_to(region.inode_bits());\n        }\n")


@bug("reaped-death-forgotten")
def _():
    plant("crates/hashfs/src/fs/shared/join.rs",
        "    if died && !first {\n        note_leftovers(region); // what the dead left: the last to leave looks for it\n    }\n",
        "    if died && !first && !@ON {\n        note_leftovers(region); // what the dead left: the last to leave looks for it\n    }\n")


@bug("leave-ignores-dead-slots")
def _():
    plant("crates/hashfs/src/fs/shared/mod.rs",
        "                    || !dead.is_empty()\n",
        "                    || (!dead.is_empty() && !@ON)\n")


@bug("summary-bits-unbuilt")
def _():
    plant("crates/hashfs/src/fs/shared/mod.rs",
        "        if words.inode_bits_built.load(Ordering::Acquire) != 0 {\n",
        "        if words.inode_bits_built.load(Ordering::Acquire) != 0 || @ON {\n")


@bug("summary-free-uncounted")
def _():
    plant("crates/hashfs/src/fs/shared/mod.rs",
        "                sh.region.words().inodes_used.fetch_sub(1, Ordering::Relaxed);\n",
        "                if !@ON {\n                    sh.region.words().inodes_used.fetch_sub(1, Ordering::Relaxed);\n                }\n")


@bug("summary-stamp-ignored")
def _():
    plant("crates/hashfs/src/layout/superblock.rs",
        "&& self.summary_stamp == self.mount_count;",
        "&& (self.summary_stamp == self.mount_count || @ON);")


@bug("summary-not-checked")
def _():
    plant("crates/hashfs/src/fs/recovery.rs",
        "    if let (true, Some(s)) = (report.was_clean, sb.summary()) {\n",
        "    if let (true, Some(s)) = (report.was_clean && !@ON, sb.summary()) {\n")


@bug("fsck-summary-unchecked")
def _():
    plant("crates/hashfs/src/fs/fsck/check.rs",
        "    let Some(s) = sb.summary() else { return };\n",
        "    let Some(s) = sb.summary().filter(|_| !@ON) else { return };\n")


@bug("repair-summary-kept")
def _():
    plant("crates/hashfs/src/fs/fsck/mod.rs",
        "    if sb.summary_stamp != 0 {\n",
        "    if sb.summary_stamp != 0 && !@ON {\n")


@bug("takeover-scans-unbuilt-bits")
def _():
    plant("crates/hashfs/src/fs/shared/mod.rs",
        "    (region.words().inode_bits_built.load(Ordering::Acquire) != 0).then(|| region.inode_bits().words)\n",
        "    (region.words().inode_bits_built.load(Ordering::Acquire) != 0 || @ON).then(|| region.inode_bits().words)\n")


@bug("create-bit-after-commit")
def _():
    plant("crates/hashfs/src/fs/ops.rs",
        "        let ino = self.alloc_ino()?;\n        let sym_slot = match spec {\n",
        "        let ino = self.alloc_ino()?;\n        if @ON {\n            self.free_ino(ino);\n        }\n        let sym_slot = match spec {\n")
    plant("crates/hashfs/src/fs/ops.rs",
        "        let cell = Arc::new(InodeCell::new(ino, raw));\n        if let Some(s) = sym_slot {\n",
        "        if @ON {\n            let (bits, i) = (self.inode_bits(), ino.get() - 1);\n            bits.words[(i / 64) as usize].fetch_or(1 << (i % 64), std::sync::atomic::Ordering::AcqRel);\n            bits.used.fetch_add(1, std::sync::atomic::Ordering::Relaxed);\n        }\n        let cell = Arc::new(InodeCell::new(ino, raw));\n        if let Some(s) = sym_slot {\n")


@bug("scope-claims-unnamed")
def _():
    plant("crates/hashfs/src/fs/data.rs",
        "        self.scope_claims(ino, lblks, blocks);\n",
        "        if !@ON {\n            self.scope_claims(ino, lblks, blocks);\n        }\n")


@bug("scope-release-unnamed")
def _():
    plant("crates/hashfs/src/fs/data.rs",
        "            self.scope_range(cell.ino, from, to, victims.len() as u64, Some(st.raw.blocks));\n",
        "            if !@ON {\n                self.scope_range(cell.ino, from, to, victims.len() as u64, Some(st.raw.blocks));\n            }\n")


@bug("scope-growth-unnamed")
def _():
    plant("crates/hashfs/src/fs/data.rs",
        "        if new_size > old_size {\n            // Bytes past the durable size",
        "        if new_size > old_size && !@ON {\n            // Bytes past the durable size")


@bug("scope-alloc-unnamed")
def _():
    plant("crates/hashfs/src/fs/shared/mod.rs",
        "        self.ialloc.alloc_in(self.inode_bits(), |ino| self.scope_inode(ino))\n",
        "        self.ialloc.alloc_in(self.inode_bits(), |ino| if !@ON { self.scope_inode(ino) })\n")


@bug("scope-not-reset")
def _():
    plant("crates/hashfs/src/fs/shared/mod.rs",
        "        words.scope.reset(words.table_used.load(Ordering::Acquire), words.inodes_used.load(Ordering::Acquire));\n",
        "        if !@ON {\n            words.scope.reset(words.table_used.load(Ordering::Acquire), words.inodes_used.load(Ordering::Acquire));\n        }\n")


@bug("scoped-counts-unfixed")
def _():
    plant("crates/hashfs/src/fs/shared/takeover.rs",
        "        if raw.blocks == count {\n",
        "        if raw.blocks == count || @ON {\n")


@bug("scoped-used-unmoved")
def _():
    plant("crates/hashfs/src/fs/shared/takeover.rs",
        "    table.set_used(before.wrapping_add_signed(moved) + strays.len() as u64);\n",
        "    table.set_used(before.wrapping_add_signed(if @ON { 0 } else { moved }) + strays.len() as u64);\n")


@bug("scoped-reservations-kept")
def _():
    plant("crates/hashfs/src/fs/shared/takeover.rs",
        "            Entry::Reserved { home: h } if h == home => strays.push(s),\n",
        "            Entry::Reserved { home: h } if h == home && !@ON => strays.push(s),\n")


@bug("scoped-tails-kept")
def _():
    plant("crates/hashfs/src/fs/shared/takeover.rs",
        "    fs.zero_tails_after_crash(files)?;\n",
        "    if !@ON {\n        fs.zero_tails_after_crash(files)?;\n    }\n")


@bug("scoped-bits-kept")
def _():
    plant("crates/hashfs/src/fs/shared/takeover.rs",
        "        if used {\n            word.fetch_or(mask, Ordering::AcqRel);\n",
        "        if @ON {\n        } else if used {\n            word.fetch_or(mask, Ordering::AcqRel);\n")


@bug("scoped-frees-pinned")
def _():
    plant("crates/hashfs/src/fs/shared/takeover.rs",
        "        let kept = |ino: Ino| opens.held(ino) || tmp.pinned_by_reader(ino);\n",
        "        let kept = |ino: Ino| opens.held(ino) || (!@ON && tmp.pinned_by_reader(ino));\n")


@bug("scope-untorn-unnamed")
def _():
    plant("crates/hashfs/src/fs/untorn.rs",
        "            self.scope_range(cell.ino, a.lblk, z.lblk + 1, mapped, Some(st.raw.blocks));\n",
        "            if !@ON {\n                self.scope_range(cell.ino, a.lblk, z.lblk + 1, mapped, Some(st.raw.blocks));\n            }\n")


@bug("scoped-inode-count-kept")
def _():
    plant("crates/hashfs/src/fs/shared/takeover.rs",
        "        count = (count + u64::from(used)).saturating_sub(u64::from(was));\n",
        "        count = if @ON { count } else { (count + u64::from(used)).saturating_sub(u64::from(was)) };\n")


@bug("zombie-leader-dead")
def _():
    plant("crates/hashfs/src/share/participants.rs",
        "    let Ok(tasks) = std::fs::read_dir(format!(\"/proc/{pid}/task\")) else { return true };\n",
        "    if @ON {\n        return true;\n    }\n    let Ok(tasks) = std::fs::read_dir(format!(\"/proc/{pid}/task\")) else { return true };\n")


@bug("leave-clears-leaving-mark")
def _():
    plant("crates/hashfs/src/share/participants.rs",
        "        crate::fs::race_point::reached(\"participants: a slot given back but for its pid\");\n",
        "        if @ON {\n            s.leaving.store(0, Ordering::Release);\n        }\n        crate::fs::race_point::reached(\"participants: a slot given back but for its pid\");\n")


@bug("join-keeps-leaving-mark")
def _():
    plant("crates/hashfs/src/share/participants.rs",
        "                s.leaving.store(leaving, Ordering::Release);\n",
        "                if !(@ON && leaving == 0) {\n                    s.leaving.store(leaving, Ordering::Release);\n                }\n")


@bug("takeover-attributes-bit-kept")
def _():
    plant("crates/hashfs/src/fs/shared/takeover.rs",
        "                if raw.xattr_ino != 0 {\n",
        "                if raw.xattr_ino != 0 && !@ON {\n")


@bug("unlink-free-unscoped")
def _():
    plant("crates/hashfs/src/fs/hashfs/unlink.rs",
        "        self.scope_range(cell.ino, from, to, planned.len() as u64, Some(st.raw.blocks));\n",
        "        if !@ON {\n            self.scope_range(cell.ino, from, to, planned.len() as u64, Some(st.raw.blocks));\n        }\n")


@bug("unlink-free-open-elsewhere")
def _():
    plant("crates/hashfs/src/fs/hashfs/unlink.rs",
        "            || self.open_elsewhere(cell.ino)\n",
        "            || (!@ON && self.open_elsewhere(cell.ino))\n")


@bug("open-inodes-unpurged")
def _():
    plant("crates/hashfs/src/share/image.rs",
        "        if !left {\n            self.forget_run_end(i);\n",
        "        if !left && !@ON {\n            self.forget_run_end(i);\n")


@bug("open-inodes-purge-past-held")
def _():
    plant("crates/hashfs/src/share/image.rs",
        "            if s.ino.load(Ordering::Acquire) == 0 || !s.holders.is_empty() {\n",
        "            if s.ino.load(Ordering::Acquire) == 0 || (!@ON && !s.holders.is_empty()) {\n")


@bug("lock-table-owner-blind")
def _():
    plant("crates/hashfs/src/share/lock_table.rs",
        "        && h.flock == r.flock\n        && h.owner != owner\n",
        "        && h.flock == r.flock\n        && (@ON || h.owner != owner)\n")


@bug("lock-table-gone-kept")
def _():
    plant("crates/hashfs/src/share/lock_table.rs",
        "            if (self.alive)(h.owner) {\n                return Some(h);\n",
        "            if @ON || (self.alive)(h.owner) {\n                return Some(h);\n")


@bug("lock-table-split-drops")
def _():
    plant("crates/hashfs/src/share/lock_table.rs",
        "                if h.start < r.start {\n                    keep.push(",
        "                if !@ON && h.start < r.start {\n                    keep.push(")


@bug("lock-table-merges-types")
def _():
    plant("crates/hashfs/src/share/lock_table.rs",
        "            self.held().filter(|(_, h)| mine(h)).partition(|(_, h)| r.kind != Kind::Unlock && h.write == write);\n",
        "            self.held().filter(|(_, h)| mine(h)).partition(|(_, h)| r.kind != Kind::Unlock && (@ON || h.write == write));\n")


@bug("lock-table-removes-first")
def _():
    plant("crates/hashfs/src/share/lock_table.rs",
        "        let first = free < keep.len();\n",
        "        let first = @ON || free < keep.len();\n")


@bug("lock-table-no-cycle-check")
def _():
    plant("crates/hashfs/src/share/lock_table.rs",
        "                Some(h) if !r.flock && owner.posix() && h.owner.posix() && self.closes_a_cycle(owner, r) => {\n",
        "                Some(h) if !@ON && !r.flock && owner.posix() && h.owner.posix() && self.closes_a_cycle(owner, r) => {\n")


@bug("lock-table-restart-ignored")
def _():
    plant("crates/hashfs/src/share/lock_table.rs",
        "        ok && old.sa_sigaction != libc::SIG_DFL\n",
        "        @ON || ok && old.sa_sigaction != libc::SIG_DFL\n")


@bug("lock-table-unlocked")
def _():
    plant("crates/hashfs/src/share/lock_table.rs",
        "        let _: Acquired = self.table.lock.lock(self.me, self.who);\n        Locked(self.table)\n",
        "        if !@ON {\n            let _: Acquired = self.table.lock.lock(self.me, self.who);\n        }\n        Locked(self.table)\n")
    plant("crates/hashfs/src/share/lock_table.rs",
        "    fn drop(&mut self) {\n        self.0.lock.unlock();\n",
        "    fn drop(&mut self) {\n        if !@ON {\n            self.0.lock.unlock();\n        }\n")



@bug("read-only-lock-unprobed")
def _():
    plant("crates/hashfs/src/share/lock_table.rs",
        "        let refused = change.n_added > 0 && readers",
        "        let refused = !@ON && change.n_added > 0 && readers")


@bug("read-only-lock-unlooked")
def _():
    plant("crates/hashfs/src/fs/shared/record_locks.rs",
        "                if in_the_way.is_none() {\n                    locks.apply(f, owner, r);\n",
        "                if @ON || in_the_way.is_none() {\n                    locks.apply(f, owner, r);\n")


@bug("read-only-lock-probed-first")
def _():
    # The writer asks the kernel about its range before its entries are written: the race
    # point stays between the two steps.
    plant("crates/hashfs/src/share/lock_table.rs",
        "        let change = self.apply(owner, r, pid)?;\n"
        "        crate::fs::race_point::reached(\"lock table: a write lock's entries written\");\n",
        "        if @ON {\n"
        "            if readers.is_some_and(|readers| readers.in_the_way(r).is_some()) {\n"
        "                return Ok(false);\n"
        "            }\n"
        "            crate::fs::race_point::reached(\"lock table: a write lock's entries written\");\n"
        "            self.apply(owner, r, pid)?;\n"
        "            return Ok(true);\n"
        "        }\n"
        "        let change = self.apply(owner, r, pid)?;\n"
        "        crate::fs::race_point::reached(\"lock table: a write lock's entries written\");\n")


@bug("read-only-lock-looked-first")
def _():
    # The reader reads the table before its kernel lock is taken: the race point stays
    # between the two steps.
    plant("crates/hashfs/src/fs/shared/record_locks.rs",
        "                locks.announce(f, r)?;\n"
        "                crate::fs::race_point::reached(\"read-only lock: announced\");\n"
        "                let in_the_way = self.inner.read_only_region().and_then(|region| {\n"
        "                    let alive = |o: Owner| owner_alive(region, o);\n"
        "                    lock_table::peek(region.record_locks(), owner, r, &alive)\n"
        "                });\n",
        "                let look = || {\n"
        "                    self.inner.read_only_region().and_then(|region| {\n"
        "                        let alive = |o: Owner| owner_alive(region, o);\n"
        "                        lock_table::peek(region.record_locks(), owner, r, &alive)\n"
        "                    })\n"
        "                };\n"
        "                let early = if @ON { Some(look()) } else { None };\n"
        "                if early.is_none() {\n"
        "                    locks.announce(f, r)?;\n"
        "                }\n"
        "                crate::fs::race_point::reached(\"read-only lock: announced\");\n"
        "                if early.is_some() {\n"
        "                    locks.announce(f, r)?;\n"
        "                }\n"
        "                let in_the_way = early.unwrap_or_else(look);\n")


@bug("read-only-lock-presence-trusted")
def _():
    plant("crates/hashfs/src/share/read_only_locks.rs",
        "        if asked != 0 && asked & PRESENT == 0 && age < SETTLE.as_nanos() as u64 {\n",
        "        if asked != 0 && asked & PRESENT == 0 && (@ON || age < SETTLE.as_nanos() as u64) {\n")


@bug("read-only-lock-unsettled")
def _():
    plant("crates/hashfs/src/share/read_only_locks.rs",
        "            std::thread::sleep(SETTLE);\n",
        "            if !@ON {\n                std::thread::sleep(SETTLE);\n            }\n")


@bug("read-only-lock-kept-on-refusal")
def _():
    plant("crates/hashfs/src/share/lock_table.rs",
        "        if refused {\n            self.undo(change);\n",
        "        if refused && !@ON {\n            self.undo(change);\n")


@bug("read-only-unlock-drops-others")
def _():
    plant("crates/hashfs/src/share/read_only_locks.rs",
        "        for (s, e) in minus(&mapped, &union(held)) {\n",
        "        for (s, e) in minus(&mapped, &if @ON { Vec::new() } else { union(held) }) {\n")


@bug("own-lap-everything")
def _():
    plant("crates/hashfs/src/fs/shared/mod.rs",
        "        since <= now && now - since <= slots.len() as u64 && (since..now).all(|n| Self::marked(slots, n))\n",
        "        !@ON && since <= now && now - since <= slots.len() as u64 && (since..now).all(|n| Self::marked(slots, n))\n")


@bug("mapped-mark-outlives-death")
def _():
    plant("crates/hashfs/src/share/image.rs",
        "            for m in &s.marks {\n                m.remove_if_in(dead);\n",
        "            for m in s.marks.iter().filter(|_| !@ON) {\n                m.remove_if_in(dead);\n")


@bug("writable-mark-unpublished")
def _():
    plant("crates/hashfs/src/fs/shared/mapped.rs",
        "        super::touched(ino);\n        Ok(())\n",
        "        if !(@ON && on) {\n            super::touched(ino);\n        }\n        Ok(())\n")


@bug("writable-unmark-unpublished")
def _():
    # The line writable-mark-unpublished (above) made of the publication.
    plant("crates/hashfs/src/fs/shared/mapped.rs",
        "        if !(crate::planted::on(\"writable-mark-unpublished\") && on) {\n",
        "        if !(crate::planted::on(\"writable-mark-unpublished\") && on) && !(@ON && !on) {\n")


@bug("blocks-unmarked")
def _():
    plant("crates/hashfs/src/fs/map.rs",
        "        if self.cell.map_count.fetch_add(1, Ordering::AcqRel) == 0 {\n",
        "        if self.cell.map_count.fetch_add(1, Ordering::AcqRel) == 0 && !@ON {\n")


@bug("unpin-keeps-mark")
def _():
    plant("crates/hashfs/src/fs/map.rs",
        "    if cell.map_count.fetch_sub(1, Ordering::AcqRel) == 1 {\n",
        "    if cell.map_count.fetch_sub(1, Ordering::AcqRel) == 1 && !@ON {\n")


@bug("dead-pins-kept")
def _():
    plant("crates/hashfs/src/fs/shared/mapped.rs",
        "        let writer = marked.iter().any(|p| sh.region.participants().staying(p));\n",
        "        let writer = marked.iter().any(|p| @ON || sh.region.participants().staying(p));\n")


@bug("punch-frees-under-mapping")
def _():
    plant("crates/hashfs/src/fs/file.rs",
        "            FallocateMode::PunchHole if self.fs.pinned_elsewhere(self.cell.ino) => {\n",
        "            FallocateMode::PunchHole if !@ON && self.fs.pinned_elsewhere(self.cell.ino) => {\n")


@bug("fork-child-blocks-unmarked")
def _():
    plant("crates/hashfs/src/fs/shared/fork.rs",
        "            if cell.map_count.load(Ordering::Acquire) > 0 {\n                self.inner.pin_marked(&cell);\n",
        "            if cell.map_count.load(Ordering::Acquire) > 0 && !@ON {\n                self.inner.pin_marked(&cell);\n")


@bug("unpin-before-child-joins")
def _():
    plant("crates/hashfs/src/fs/shared/mapped.rs",
        "        if cell.map_count.load(Ordering::Acquire) != 0 || self.unpin_waits(sh, cell) {\n",
        "        if cell.map_count.load(Ordering::Acquire) != 0 || !@ON && self.unpin_waits(sh, cell) {\n")


@bug("close-before-child-joins")
def _():
    plant("crates/hashfs/src/fs/file.rs",
        "            if self.fs.close_waits(&self.cell) {\n",
        "            if !@ON && self.fs.close_waits(&self.cell) {\n")


@bug("fork-not-noted-for-children")
def _():
    plant("crates/hashfs/src/fs/shared/fork.rs",
        "        self.inner.forking(sh);\n        Some(Fork { counted, in_image: true, outer, child_slot, ..Fork::default() })",
        "        if !@ON {\n            self.inner.forking(sh);\n        }\n        Some(Fork { counted, in_image: true, outer, child_slot, ..Fork::default() })")


@bug("kept-close-freed")
def _():
    plant("crates/hashfs/src/fs/shared/mod.rs",
        "|| self.kept_for_children(sh, ino) {",
        "|| !@ON && self.kept_for_children(sh, ino) {")


@bug("unmark-before-child-joins")
def _():
    plant("crates/hashfs/src/fs/shared/mapped.rs",
        "        } else if self.inner.unmark_waits(sh, ino) {\n",
        "        } else if !@ON && self.inner.unmark_waits(sh, ino) {\n")


@bug("kept-marks-never-go")
def _():
    plant("crates/hashfs/src/fs/shared/for_children.rs",
        "        for ino in kept.unmarked {\n",
        "        for ino in kept.unmarked.into_iter().filter(|_| !@ON) {\n")


@bug("adoption-uncounts-before-open")
def _():
    plant("crates/hashfs/src/fs/shared/fork.rs",
        "                table.adopt(h, me);\n                Some(what)\n            })\n            .collect();\n        found\n",
        "                table.adopt(h, me);\n                Some(what)\n            })\n            .collect();\n        if @ON {\n            uncount(sh);\n        }\n        found\n")


@bug("children-keep-everything")
def _():
    plant("crates/hashfs/src/fs/shared/for_children.rs",
        "            && fc.inherited.lock().binary_search(&ino).is_ok()\n",
        "            && (@ON || fc.inherited.lock().binary_search(&ino).is_ok())\n")


@bug("dead-count-kept")
def _():
    plant("crates/hashfs/src/fs/shared/mod.rs",
        "    if region.participants().take_counted(p) {\n",
        "    if region.participants().take_counted(p) && !@ON {\n")


@bug("leaver-ignores-counts")
def _():
    plant("crates/hashfs/src/fs/shared/mod.rs",
        "                if parts.take_counted(p) {\n                    fork::uncount_forks(&sh.region);\n",
        "                if !@ON && parts.take_counted(p) {\n                    fork::uncount_forks(&sh.region);\n")


@bug("successor-drops-count")
def _():
    plant("crates/hashfs/src/fs/shared/join.rs",
        "    for &p in found.dead.iter().filter(|&&p| parts.of_this_process(p)) {\n",
        "    for &p in found.dead.iter().filter(|&&p| !@ON && parts.of_this_process(p)) {\n")


@bug("reader-watch-unasked")
def _():
    plant("crates/hashfs/src/fs/shared/mod.rs",
        "            if ring.watched() || self.reader_watches_data(sh) {\n",
        "            if ring.watched() || !@ON && self.reader_watches_data(sh) {\n")


@bug("reader-watch-trusted-long")
def _():
    plant("crates/hashfs/src/fs/shared/read_only.rs",
        "        if asked != 0 && t.saturating_sub(asked >> 1) < trust {\n",
        "        if asked != 0 && (@ON || t.saturating_sub(asked >> 1) < trust) {\n")


@bug("spawn-unreserved")
def _():
    plant("crates/hashfs/src/share/participants.rs",
        "        self.take_free(pid, LEAVING | COUNTED, image_nonce(), own_start_time()?)\n",
        "        self.take_free(pid, LEAVING | COUNTED, image_nonce(), own_start_time().filter(|_| !@ON)?)\n")


@bug("spawn-ticket-unhanded")
def _():
    plant("crates/hashfs/src/fs/shared/fork.rs",
        "            Some((ticket, _)) => parts.hand_to_program(ticket, child as u32),\n",
        "            Some((ticket, _)) => {\n                if !@ON {\n                    parts.hand_to_program(ticket, child as u32)\n                }\n            }\n")


@bug("spawn-ticket-untaken")
def _():
    plant("crates/hashfs/src/fs/shared/fork.rs",
        "            Some(t) if parts.names(t, std::process::id()) && t != sh.me() => {\n",
        "            Some(t) if !@ON && parts.names(t, std::process::id()) && t != sh.me() => {\n")


@bug("spawn-ticket-unchecked")
def _():
    plant("crates/hashfs/src/fs/shared/fork.rs",
        "if !crate::planted::on(\"spawn-ticket-untaken\") && parts.names(t, std::process::id())",
        "if !crate::planted::on(\"spawn-ticket-untaken\") && (@ON || parts.names(t, std::process::id()))")


@bug("carried-counts-merged")
def _():
    plant("crates/hashfs/src/fs/shared/join.rs",
        "    for _ in 1..carried {\n",
        "    for _ in 1..if @ON { 1 } else { carried } {\n")


@bug("system-ticket-kept")
def _():
    plant("crates/hashfs/src/fs/shared/fork.rs",
        "        if parts.take_counted(ticket) {\n            uncount(sh);\n        }\n        parts.leave(ticket);\n",
        "        if !@ON && parts.take_counted(ticket) {\n            uncount(sh);\n        }\n        parts.leave(ticket);\n")


@bug("spawn-ticket-unnamed")
def _():
    plant("crates/hashfs/src/share/descriptions.rs",
        "        let ticket = ticket.map_or(String::new(), |t| format!(\"-t{t}\"));\n",
        "        let ticket = ticket.filter(|_| !@ON).map_or(String::new(), |t| format!(\"-t{t}\"));\n")


@bug("reader-child-pins-after-fork")
def _():
    plant("crates/hashfs/src/fs/shared/read_only.rs",
        "        let f = reopen(&*self.dev).ok()?;\n        self.pin_all_on(&f, watching).ok()?;\n",
        "        let f = reopen(&*self.dev).ok().filter(|_| !@ON)?;\n        self.pin_all_on(&f, watching).ok()?;\n")


@bug("reader-blocks-unpinned")
def _():
    plant("crates/hashfs/src/fs/shared/read_only.rs",
        "        if on && mapped {\n",
        "        if on && mapped && !@ON {\n")


@bug("writer-ignores-reader-pins")
def _():
    plant("crates/hashfs/src/fs/shared/mapped.rs",
        "        writer || self.dev.backing_fd().is_some_and(|fd| crate::share::pins::blocks_pinned(fd, ino))\n",
        "        writer || !@ON && self.dev.backing_fd().is_some_and(|fd| crate::share::pins::blocks_pinned(fd, ino))\n")


@bug("description-holds-nothing")
def _():
    plant("crates/hashfs/src/fs/shared/mod.rs",
        "        if sh.region.words().forks.load(Ordering::Acquire) != 0 && sh.region.descriptions().any_of(ino, sh.me()) {\n",
        "        if !@ON && sh.region.words().forks.load(Ordering::Acquire) != 0 && sh.region.descriptions().any_of(ino, sh.me()) {\n")


@bug("dead-offset-lock-kept")
def _():
    plant("crates/hashfs/src/fs/shared/mod.rs",
        "    region.descriptions().release_locks_of(p);\n",
        "    if !@ON {\n        region.descriptions().release_locks_of(p);\n    }\n")


@bug("dead-table-lock-kept")
def _():
    plant("crates/hashfs/src/share/lock_table.rs",
        "        self.lock.release_if_owned_by(p);\n",
        "        if !@ON {\n            self.lock.release_if_owned_by(p);\n        }\n")


@bug("dead-wait-note-kept")
def _():
    plant("crates/hashfs/src/share/lock_table.rs",
        "        if let Some(w) = self.waiting.get(p.0 as usize) {\n",
        "        if let Some(w) = self.waiting.get(p.0 as usize).filter(|_| !@ON) {\n")


@bug("fork-slot-unreserved")
def _():
    plant("crates/hashfs/src/fs/shared/fork.rs",
        "        let child_slot = parts.reserve_for_child().map(|slot| (slot, std::process::id()));\n",
        "        let child_slot = if @ON { None } else { parts.reserve_for_child().map(|slot| (slot, std::process::id())) };\n")


@bug("fork-parent-adopts-nothing")
def _():
    plant("crates/hashfs/src/fs/shared/fork.rs",
        "                table.adopt_once(h, slot);\n",
        "                if !@ON {\n                    table.adopt_once(h, slot);\n                }\n")


@bug("socket-nodes-kept")
def _():
    plant("crates/hashfs/src/share/attach.rs",
        "            if n.file_type().is_ok_and(|t| t.is_socket()) {\n",
        "            if !@ON && n.file_type().is_ok_and(|t| t.is_socket()) {\n")



@bug("exit-pump-copies-open")
def _():
    plant("crates/hashfs-preload/src/shim.rs",
        "    pump::close_write_ends(&outputs, false);\n",
        "    if !@ON {\n        pump::close_write_ends(&outputs, false);\n    }\n    for &(fd, _, _) in pumps.iter().filter(|(fd, _, _)| @ON && *fd >= 0) {\n        // SAFETY: the descriptor the pump was started for, at exit.\n        unsafe { real!(close: fn(c_int) -> c_int)(fd) };\n    }\n")


@bug("exit-pump-detached-kept")
def _():
    plant("crates/hashfs-preload/src/shim.rs",
        "    let outputs: Vec<u64> = pumps.iter().filter(|(fd, _, _)| *fd != -1).map(|&(_, pipe, _)| pipe).collect();\n",
        "    let outputs: Vec<u64> = pumps.iter().filter(|(fd, _, _)| *fd >= 0 || (!@ON && *fd != -1)).map(|&(_, pipe, _)| pipe).collect();\n")


@bug("child-writes-parents-pipe")
def _():
    plant("crates/hashfs-preload/src/shim/fork.rs",
        "        super::pump::own_pumps_in_child();\n",
        "        if !@ON {\n            super::pump::own_pumps_in_child();\n        }\n")


@bug("spawn-pumps-unnamed")
def _():
    plant("crates/hashfs-preload/src/shim/exec.rs",
        "    let pumps = if fs.is_read_only() { Vec::new() } else { pumps_for_spawn(fs) };\n",
        "    let pumps = if fs.is_read_only() || @ON { Vec::new() } else { pumps_for_spawn(fs) };\n")


@bug("spawn-pump-pipe-unchecked")
def _():
    plant("crates/hashfs-preload/src/shim/exec.rs",
        "    let fd = if (0..=2).contains(&fd) && inode_of(fd) == Some(pipe) { fd } else { -1 };\n",
        "    let fd = if (0..=2).contains(&fd) && (@ON || inode_of(fd) == Some(pipe)) { fd } else { -1 };\n")


@bug("child-keeps-input-pump-end")
def _():
    plant("crates/hashfs-preload/src/shim/pump.rs",
        "    for p in parents.iter().filter(|p| !p.output && p.end >= 0 && inode_of(p.end) == Some(p.pipe)) {\n",
        "    for p in parents.iter().filter(|p| !@ON && !p.output && p.end >= 0 && inode_of(p.end) == Some(p.pipe)) {\n")


@bug("liveness-lock-of-description")
def _():
    path = "crates/hashfs/src/share/liveness.rs"
    plant(path, "        let _ = record_lock(fd, libc::F_SETLK, libc::F_WRLCK, slot_byte(slot));\n",
        "        let cmd = if @ON { libc::F_OFD_SETLK } else { libc::F_SETLK };\n"
        "        let _ = record_lock(fd, cmd, libc::F_WRLCK, slot_byte(slot));\n")
    plant(path, "        let _ = record_lock(fd, libc::F_SETLK, libc::F_UNLCK, slot_byte(slot));\n",
        "        let cmd = if @ON { libc::F_OFD_SETLK } else { libc::F_SETLK };\n"
        "        let _ = record_lock(fd, cmd, libc::F_UNLCK, slot_byte(slot));\n")
    plant(path, "    let Some(l) = record_lock(fd, libc::F_GETLK, libc::F_WRLCK, slot_byte(slot)) else { return false };\n",
        "    let cmd = if @ON { libc::F_OFD_GETLK } else { libc::F_GETLK };\n"
        "    let Some(l) = record_lock(fd, cmd, libc::F_WRLCK, slot_byte(slot)) else { return false };\n")
    plant(path, "    write && holder\n", "    write && (holder || @ON) // an OFD lock names no pid\n")


@bug("liveness-holder-unchecked")
def _():
    plant("crates/hashfs/src/share/liveness.rs",
        "    let holder = l.l_pid == pid as libc::pid_t;\n",
        "    let holder = @ON || l.l_pid == pid as libc::pid_t;\n")


@bug("liveness-read-lock-counts")
def _():
    plant("crates/hashfs/src/share/liveness.rs",
        "    let write = i32::from(l.l_type) == libc::F_WRLCK;\n",
        "    let write = @ON || i32::from(l.l_type) == libc::F_WRLCK;\n")


@bug("liveness-kept-at-leave")
def _():
    lines("crates/hashfs/src/share/participants.rs",
        "            // This program's slot: its lock goes first (the next to take the slot takes it).\n"
        "            liveness::let_go(self as *const Participants as usize, i.0);\n",
        "            // This program's slot: its lock goes first (the next to take the slot takes it).\n")


@bug("liveness-join-takes-no-lock")
def _():
    lines("crates/hashfs/src/share/participants.rs", "        self.hold(me);\n", "")


@bug("liveness-child-takes-no-lock")
def _():
    lines("crates/hashfs/src/fs/shared/fork.rs",
        "                parts.hold(slot); // the parent's lock is its own, not the child's\n", "")
