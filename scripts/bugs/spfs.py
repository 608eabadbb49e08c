"""Deliberate bugs in SPFS's stacked mode (scripts/plant-bugs.py)."""
from planting import bug, lines, plant, sub  # noqa: F401


@bug("stacked-handle-first")
def _():
    plant("crates/hashfs-spfs/src/absorb.rs",
        "        let done = (if size > 0 { pm.set_len(size) } else { Ok(()) })\n",
        "        let done = (if @ON { self.fs.set_xattr(m.ino, HANDLE_XATTR, &handle.encode(), XattrMode::Any) } else { Ok(()) })\n            .and_then(|_| if size > 0 { pm.set_len(size) } else { Ok(()) })\n")


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


@bug("standalone-flags-ignored")
def _():
    plant("crates/hashfs-spfs/src/standalone.rs",
        "        if made.flags & (libc::O_SYNC | libc::O_DSYNC | libc::O_DIRECT) != 0 {\n",
        "        if !@ON && made.flags & (libc::O_SYNC | libc::O_DSYNC | libc::O_DIRECT) != 0 {\n")


@bug("standalone-extension-prefix")
def _():
    plant("crates/hashfs-spfs/src/standalone.rs",
        "            && rest.get(ext.len()).is_none_or(|&c| c == b'.')\n",
        "            && (@ON || rest.get(ext.len()).is_none_or(|&c| c == b'.'))\n")


@bug("standalone-boost-stale")
def _():
    plant("crates/hashfs-spfs/src/standalone.rs",
        "        if name == BOOST_XATTR.as_bytes() {\n",
        "        if !@ON && name == BOOST_XATTR.as_bytes() {\n")


@bug("standalone-made-after-open")
def _():
    plant("crates/hashfs-fuse/src/stacked.rs",
        "            self.stack.created_in(&made, key, &lower);\n            let (state, backing) = self.counted_open(key, &lower, |f| reply.open_backing(f));\n",
        "            if !@ON {\n                self.stack.created_in(&made, key, &lower);\n            }\n            let (state, backing) = self.counted_open(key, &lower, |f| reply.open_backing(f));\n            if @ON {\n                self.stack.created_in(&made, key, &lower);\n            }\n")


@bug("made-without-record")
def _():
    plant("crates/hashfs-spfs/src/absorb.rs",
        "                Some(r) => self.fs.set_xattr(m.ino, MADE_XATTR, &r.encode(), XattrMode::Any),\n                None => Ok(()),\n",
        "                Some(r) if !@ON => self.fs.set_xattr(m.ino, MADE_XATTR, &r.encode(), XattrMode::Any),\n                _ => Ok(()),\n")


@bug("made-record-kept-at-unlink")
def _():
    plant("crates/hashfs-spfs/src/file.rs",
        "        self.store.forget_made(p)\n",
        "        if @ON { Ok(()) } else { self.store.forget_made(p) }\n")


@bug("remake-over-another-file")
def _():
    plant("crates/hashfs-spfs/src/remake.rs",
        "            OFlags::CREATE | OFlags::EXCL | OFlags::RDWR | OFlags::CLOEXEC | OFlags::NOFOLLOW,\n",
        "            if @ON { OFlags::CREATE } else { OFlags::CREATE | OFlags::EXCL } | OFlags::RDWR | OFlags::CLOEXEC | OFlags::NOFOLLOW,\n")


@bug("dirty-limit-kept")
def _():
    plant("crates/hashfs-cli/src/mountcmd.rs",
        "    if stack.cfg.device_dirty_limit {\n",
        "    if !@ON && stack.cfg.device_dirty_limit {\n")


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


@bug("settled-ctime-ignored")
def _():
    plant("crates/hashfs-spfs/src/settled.rs",
        "        if !self.settled.mark().is_some_and(|mark| settled_before(m.ctime(), m.ctime_nsec(), mark)) {\n",
        "        if !@ON && !self.settled.mark().is_some_and(|mark| settled_before(m.ctime(), m.ctime_nsec(), mark)) {\n")


@bug("settled-open-under-handles")
def _():
    plant("crates/hashfs-spfs/src/settled.rs",
        "        if st.pm.is_some() || st.opens > 0 || !lock(&self.dirs)",
        "        if st.pm.is_some() || (st.opens > 0 && !@ON) || !lock(&self.dirs)")


@bug("settled-not-asked-at-open")
def _():
    plant("crates/hashfs-spfs/src/settled.rs",
        "            self.settled.want();\n",
        "            if !@ON {\n                self.settled.want();\n            }\n")


@bug("settled-mark-without-syncfs")
def _():
    plant("crates/hashfs-spfs/src/settled.rs",
        "        match rustix::fs::syncfs(self.store.lower_dir()) {\n",
        "        match (if @ON { Ok(()) } else { rustix::fs::syncfs(self.store.lower_dir()) }) {\n")


@bug("writeback-without-lower-fsync")
def _():
    plant("crates/hashfs-spfs/src/absorb.rs",
        "        p.lower.sync_all()?;\n",
        "        if !@ON {\n            p.lower.sync_all()?;\n        }\n")


@bug("promoted-before-lower-fsync")
def _():
    plant("crates/hashfs-spfs/src/file.rs",
        "        crate::lower::sync(lower, scope)?;\n        self.counters.lower_syncs",
        "        if !@ON {\n            crate::lower::sync(lower, scope)?;\n        }\n        self.counters.lower_syncs")
    plant("crates/hashfs-spfs/src/file.rs",
        "                self.promote(st, lower);\n            }\n        }\n        Ok(())\n",
        "                self.promote(st, lower);\n            }\n        }\n        if @ON && st.pm.is_none() {\n            crate::lower::sync(lower, scope)?;\n        }\n        Ok(())\n")


@bug("deferred-promotion-unsynced")
def _():
    plant("crates/hashfs-spfs/src/file.rs",
        "            match crate::lower::sync(lower, SyncScope::DataOnly) {\n",
        "            match (if @ON { Ok(()) } else { crate::lower::sync(lower, SyncScope::DataOnly) }) {\n")


@bug("stacked-uring-not-asked")
def _():
    plant("crates/hashfs-fuse/src/stacked.rs",
        "        if self.io_uring && config.add_capabilities(InitFlags::FUSE_OVER_IO_URING).is_err() {\n",
        "        if !@ON && self.io_uring && config.add_capabilities(InitFlags::FUSE_OVER_IO_URING).is_err() {\n")
