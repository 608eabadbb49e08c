"""Deliberate bugs in the LD_PRELOAD shim, the interposer, the FUSE mount and the CLI (scripts/plant-bugs.py)."""
from planting import bug, lines, plant, sub  # noqa: F401


@bug("fork-offset-unshared")
def _():
    plant("crates/hashfs-preload/src/shim/fork.rs",
        "        let shared = self.shared.get().and_then(|&h| joined_fs()?.lock_offset(h));\n",
        "        let shared = if @ON { None } else { self.shared.get().and_then(|&h| joined_fs()?.lock_offset(h)) };\n")


@bug("exec-list-uninterposed", rebuilt=True)
def _():
    sub("crates/hashfs-interpose/src/export.rs",
        "            $crate::list_execs! { $B;\n                execl => Path;\n                execlp => Search;\n                execle => WithEnv;\n            }\n",
        "")


@bug("daemon-uninterposed", rebuilt=True)
def _():
    sub("crates/hashfs-interpose/src/export.rs",
        "                daemon => detach::daemon(nochdir: c_int, noclose: c_int) -> c_int;\n",
        "")


@bug("forkpty-uninterposed", rebuilt=True)
def _():
    sub("crates/hashfs-interpose/src/export.rs",
        "                forkpty => detach::forkpty(",
        "                forkpty_unused => detach::forkpty(")
    sub("crates/hashfs-interpose/src/export.rs",
        "                login_tty => detach::login_tty(fd: c_int) -> c_int;\n",
        "")


@bug("wordexp-uninterposed", rebuilt=True)
def _():
    sub("crates/hashfs-interpose/src/export.rs",
        "                wordexp => program::wordexp(words: *const c_char, we: *mut c_void, flags: c_int) -> c_int;\n",
        "")


@bug("popen-child-unhanded", rebuilt=True)
def _():
    sub("crates/hashfs-interpose/src/entry/program.rs",
        "        |f| (!f.is_null()).then(|| new_child(before.as_deref(), crate::guarded(children_of_thread).flatten())),\n",
        "        |f| (!f.is_null()).then_some(Child::Unknown),\n")


@bug("popen-unticketed", rebuilt=True)
def _():
    sub("crates/hashfs-interpose/src/entry/program.rs",
        "    let known = if before.is_some() { ChildKnown::Pid } else { ChildKnown::Nothing };\n",
        "    let known = ChildKnown::Nothing;\n")
    sub("crates/hashfs-interpose/src/entry/program.rs",
        "        |f| (!f.is_null()).then(|| new_child(before.as_deref(), crate::guarded(children_of_thread).flatten())),\n",
        "        |f| (!f.is_null()).then_some(Child::Unknown),\n")


@bug("umask-not-followed", rebuilt=True)
def _():
    sub("crates/hashfs-interpose/src/entry/process.rs",
        "    UMASK.store(mask & 0o777, std::sync::atomic::Ordering::Release);\n",
        "")


@bug("path-search-unserved", rebuilt=True)
def _():
    sub("crates/hashfs-interpose/src/entry/search.rs",
        "    if !served {\n",
        "    if true {\n")


@bug("kernel-dir-walk-unserved")
def _():
    plant("crates/hashfs-preload/src/shim/path.rs",
        "    let prefix = prefix()?;\n    let first = rel",
        "    if @ON {\n        return None;\n    }\n    let prefix = prefix()?;\n    let first = rel")


@bug("dir-stream-without-descriptor")
def _():
    plant("crates/hashfs-preload/src/shim/dir.rs",
        "        let r = open_dir_stream(&p, fd);\n",
        "        let r = open_dir_stream(&p, if @ON { -1 } else { fd });\n")


@bug("pump-thread-holds-its-file")
def _():
    plant("crates/hashfs-preload/src/shim/pump.rs",
        "        let of = &pumped.of;\n        shim_thread();\n",
        "        let _kept = @ON.then(|| pumped.of.clone());\n        let of = &pumped.of;\n        shim_thread();\n")


@bug("standard-sync-to-kernel", rebuilt=True)
def _():
    sub("crates/hashfs-interpose/src/entry/io.rs",
        "    B::claims(fd) || (0..=2).contains(&fd)\n",
        "    B::claims(fd)\n")


@bug("dot-dot-out-unserved")
def _():
    plant("crates/hashfs-preload/src/shim/path.rs",
        "    let prefix = prefix()?;\n    let bytes = path.to_bytes();\n    let rel",
        "    if @ON {\n        return None;\n    }\n    let prefix = prefix()?;\n    let bytes = path.to_bytes();\n    let rel")


@bug("realpath-unserved", rebuilt=True)
def _():
    sub("crates/hashfs-interpose/src/entry/realpath.rs",
        "    if !super::starts_in_backend::<B>(p) {\n",
        "    if true {\n")


@bug("hole-fault-after-fill-denied")
def _():
    plant("crates/hashfs/src/pm/holefault.rs",
        "            } else if let Some(f) = self.filler(addr) {\n                if !f.fill(addr) {\n                    deny(addr);\n                }\n            }\n",
        "            } else if let Some(f) = self.filler(addr) {\n                if !f.fill(addr) {\n                    deny(addr);\n                }\n            } else if @ON {\n                deny(addr);\n            }\n")


@bug("spawn-chdir-to-kernel", rebuilt=True)
def _():
    sub("crates/hashfs-interpose/src/entry/spawn_dir.rs",
        "    if !super::starts_in_backend::<B>(p) {\n",
        "    if true {\n")


@bug("dlopen-called-not-jumped", rebuilt=True)
def _():
    sub("crates/hashfs-interpose/src/export.rs",
        '                    "mov rdi, rax",\n                    "jmp rdx",\n',
        '                    "mov rdi, rax",\n                    "sub rsp, 8",\n                    "call rdx",\n                    "add rsp, 8",\n                    "ret",\n')


@bug("dlopen-deps-not-first", rebuilt=True)
def _():
    sub("crates/hashfs-interpose/src/entry/library.rs",
        "            for dep in lib.first {\n",
        "            for dep in lib.first.into_iter().filter(|_| false) {\n")


@bug("dlopen-deps-held", rebuilt=True)
def _():
    sub("crates/hashfs-interpose/src/entry/library.rs",
        "    for slot in &HELD {\n",
        "    for slot in HELD.iter().filter(|_| false) {\n")


@bug("fifo-open-unserved")
def _():
    plant("crates/hashfs-preload/src/shim/fd.rs",
        "        if md.file_type == FileType::Fifo {\n",
        "        if md.file_type == FileType::Fifo && !@ON {\n")


@bug("fifo-node-kept")
def _():
    plant("crates/hashfs-preload/src/shim/names.rs",
        "            if let Some(m) = fifo {\n",
        "            if let Some(m) = fifo.filter(|_| !@ON) {\n")


@bug("fifo-dir-with-region")
def _():
    plant("crates/hashfs/src/share/attach.rs",
        "    let _ = std::fs::remove_dir(&dir);\n",
        "    let _ = if @ON { std::fs::remove_dir_all(&dir) } else { std::fs::remove_dir(&dir) };\n")


@bug("dot-dot-out-names-unserved")
def _():
    plant("crates/hashfs-preload/src/shim/names.rs",
        "        return kernel_call0(dirfd, path, kernel).map(|r| r.map(|()| T::default()));\n",
        "        if @ON {\n            return None;\n        }\n        return kernel_call0(dirfd, path, kernel).map(|r| r.map(|()| T::default()));\n")


@bug("dot-dot-out-attrs-unserved")
def _():
    plant("crates/hashfs-preload/src/shim/meta.rs",
        "            return kernel_call0(dirfd, path, |k| unsafe { libc::fchmodat(libc::AT_FDCWD, k.as_ptr(), mode, flags) });\n",
        "            if @ON {\n                return None;\n            }\n            return kernel_call0(dirfd, path, |k| unsafe { libc::fchmodat(libc::AT_FDCWD, k.as_ptr(), mode, flags) });\n")


@bug("spawn-fchdir-to-kernel", rebuilt=True)
def _():
    sub("crates/hashfs-interpose/src/entry/spawn_dir.rs",
        "    let Some(dir) = crate::guarded(|| B::dir_path(fd)).flatten() else {\n",
        "    let Some(dir) = crate::guarded(|| B::dir_path(fd)).flatten().filter(|_| false) else {\n")


@bug("linked-libraries-unserved")
def _():
    plant("crates/hashfs-preload/src/shim/library.rs",
        "    let dynamic = dynamic_of(fd, len);\n",
        "    if @ON {\n        return Ok(None);\n    }\n    let dynamic = dynamic_of(fd, len);\n")


@bug("linked-path-kept", rebuilt=True)
def _():
    sub("crates/hashfs-interpose/src/entry/linked.rs",
        "    match was.as_ref().map(|w| w.as_bytes()).and_then(|w| w.strip_prefix(b\"=\")) {\n",
        "    match None::<&[u8]> {\n")


@bug("linked-links-left", rebuilt=True)
def _():
    sub("crates/hashfs-interpose/src/entry/linked.rs",
        "    remove_links(&dir, true);\n",
        "")


@bug("passed-cwd-above-limit")
def _():
    plant("crates/hashfs-preload/src/shim/exec.rs",
        "        if high < 0 {\n            return m;\n        }\n",
        "        if high < 0 && !@ON {\n            return m;\n        }\n")


@bug("fifo-dir-by-reader")
def _():
    plant("crates/hashfs-preload/src/shim/fifo.rs",
        "    node_of(ino, generation, !fs.is_read_only())\n",
        "    node_of(ino, generation, !fs.is_read_only() || @ON)\n")


@bug("fifo-node-race")
def _():
    plant("crates/hashfs-preload/src/shim/fifo.rs",
        "            libc::EEXIST => break c,\n",
        "            libc::EEXIST if !@ON => break c,\n")


@bug("fifo-dir-trusted-by-name")
def _():
    plant("crates/hashfs-preload/src/shim/fifo.rs",
        "            m.is_dir() && m.dev() == CHECKED[0].load(Ordering::Acquire)",
        "            m.is_dir() && @ON || m.is_dir() && m.dev() == CHECKED[0].load(Ordering::Acquire)")


@bug("exec-image-unserved")
def _():
    plant("crates/hashfs-preload/src/shim/cwd.rs",
        "        super::program::exec_image(path, library_path)\n",
        "        if @ON {\n            return None;\n        }\n        super::program::exec_image(path, library_path)\n")


@bug("vfork-kept-with-descriptors")
def _():
    plant("crates/hashfs-preload/src/shim/cwd.rs",
        "        super::exec::vfork_needs_fork()\n",
        "        !@ON && super::exec::vfork_needs_fork()\n")


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


@bug("spawn-system-unprepared", rebuilt=True)
def _():
    sub("crates/hashfs-interpose/src/export.rs",
        "                system => program::system(command: *const c_char) -> c_int;\n                popen => program::popen(command: *const c_char, mode: *const c_char) -> *mut FILE;\n",
        "")


@bug("shim-locks-always-succeed")
def _():
    plant("crates/hashfs-preload/src/shim/locks.rs",
        "    let fs = shim().fs()?;\n    let ofd = matches!",
        "    if @ON && !matches!(cmd, libc::F_GETLK | libc::F_OFD_GETLK) {\n        return Ok(0);\n    }\n    let fs = shim().fs()?;\n    let ofd = matches!")


@bug("shared-description-cleared")
def _():
    plant("crates/hashfs-preload/src/shim/locks.rs",
        "    if !(last || alone) {\n",
        "    if !(@ON || last || alone) {\n")


@bug("kept-descriptor-closed")
def _():
    plant("crates/hashfs-preload/src/shim/fd.rs",
        "            if fd >= 100 && hashfs::pm::is_kept(fd) {\n",
        "            if fd >= 100 && !@ON && hashfs::pm::is_kept(fd) {\n")


@bug("kept-descriptor-closed-in-range")
def _():
    plant("crates/hashfs-preload/src/shim/fd.rs",
        "        if last >= 100 {\n            keep.extend(",
        "        if last >= 100 && !@ON {\n            keep.extend(")


@bug("kept-descriptor-replaced")
def _():
    plant("crates/hashfs-preload/src/shim/fd.rs",
        "        if fd != newfd && newfd >= 100 && hashfs::pm::is_kept(newfd) {\n",
        "        if fd != newfd && newfd >= 100 && !@ON && hashfs::pm::is_kept(newfd) {\n")


@bug("posix-close-keeps-locks")
def _():
    plant("crates/hashfs-preload/src/shim/locks.rs",
        "    fs.release_record_locks(owner, Some(ino));\n}\n",
        "    if !@ON {\n        fs.release_record_locks(owner, Some(ino));\n    }\n}\n")


@bug("lockf-unserved", rebuilt=True)
def _():
    sub("crates/hashfs-interpose/src/entry/fd.rs",
        "    if !B::claims(fd) {\n        return forward!(lockf(",
        "    if true {\n        return forward!(lockf(")


@bug("loader-unserved", rebuilt=True)
def _():
    sub("crates/hashfs-interpose/src/entry/loader.rs",
        "    let loader = loader_of(path.to_bytes())?;\n",
        "    let loader = loader_of(path.to_bytes()).filter(|_| false)?;\n")


@bug("bare-name-in-image-unserved", rebuilt=True)
def _():
    sub("crates/hashfs-interpose/src/entry/library.rs",
        "        along_library_path::<B>(p)\n",
        "        None\n")


@bug("kernel-program-libraries-unserved")
def _():
    plant("crates/hashfs-preload/src/shim/library.rs",
        "    let fs = shim().fs().ok()?;\n    // SAFETY: a NUL-terminated path (inside the shim, libc's open is the kernel's).\n",
        "    if @ON {\n        return None;\n    }\n    let fs = shim().fs().ok()?;\n    // SAFETY: a NUL-terminated path (inside the shim, libc's open is the kernel's).\n")


@bug("soname-not-given")
def _():
    plant("crates/hashfs-preload/src/shim/library.rs",
        "    for d in deps.iter().filter(|d| !d.copy.dynamic.has_soname && !named_as(&mut copies, d)) {\n",
        "    for d in deps.iter().filter(|d| !d.copy.dynamic.has_soname && (@ON || !named_as(&mut copies, d))) {\n")


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


@bug("mount-locks-local")
def _():
    lines("crates/hashfs-cli/src/mountcmd.rs",
        "        daemon = daemon.with_image_locks();\n",
        "        let _ = &mut daemon;\n")


@bug("mount-close-keeps-locks")
def _():
    plant("crates/hashfs-fuse/src/locks.rs",
        "        fs.release_record_locks(self.owner(owner), Some(ino));\n",
        "        if !@ON {\n            fs.release_record_locks(self.owner(owner), Some(ino));\n        }\n")


@bug("mount-watch-off")
def _():
    plant("crates/hashfs-cli/src/mountcmd.rs",
        "    let watch = hashfs_fuse::watch_changes(watched, session.notifier(), stop.clone());\n",
        "    let watch = if @ON { None } else { hashfs_fuse::watch_changes(watched, session.notifier(), stop.clone()) };\n")


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


@bug("shim-open-trunc-skipped")
def _():
    plant("crates/hashfs-preload/src/shim/fd.rs",
        "        if flags & libc::O_TRUNC != 0 && flags & libc::O_PATH == 0 && !created.get() {\n",
        "        if flags & libc::O_TRUNC != 0 && flags & libc::O_PATH == 0 && !created.get() && !@ON {\n")


@bug("exec-prepared-when-it-fails-at-once", rebuilt=True)
def _():
    sub("crates/hashfs-interpose/src/entry/program.rs",
        "    if fails_at_once(target) {\n",
        "    if fails_at_once(Target::Unknown) {\n")


@bug("standard-seek-to-kernel", rebuilt=True)
def _():
    sub("crates/hashfs-interpose/src/entry/io.rs",
        "        B::claims(fd) || (0..=2).contains(&fd),\n        |next| B::lseek(",
        "        B::claims(fd),\n        |next| B::lseek(")


@bug("shim-open-resolve-unheld")
def _():
    path = "crates/hashfs-preload/src/shim/fd.rs"
    plant(path,
        "                fs.hold_image(|| attempt(&mut resolved))\n",
        "                if @ON { attempt(&mut resolved) } else { fs.hold_image(|| attempt(&mut resolved)) }\n")
    # The reader descheduled between its two holds, as a loaded machine does now and then:
    # from 2026-12-08 (liveness asked of the kernel's lock manager, share/liveness.rs) the
    # test's saver no longer fell into the gap within the test's time (0 of 3 runs).
    plant(path,
        "        let f = fs.open_ino(ino, if access.read || access.write { access } else { Access { read: true, ..access } })?;\n",
        "        if @ON {\n            std::thread::sleep(std::time::Duration::from_micros(200));\n        }\n"
        "        let f = fs.open_ino(ino, if access.read || access.write { access } else { Access { read: true, ..access } })?;\n")


@bug("mprotect-writes-read-only-map")
def _():
    plant("crates/hashfs-preload/src/shim/mmap.rs",
        "(m.copy || read_only(m))) {\n",
        "(m.copy || read_only(m) && !@ON)) {\n")


@bug("cwd-kept-by-path")
def _():
    plant("crates/hashfs-preload/src/shim/cwd.rs",
        "    let now = inside(&mut || Some(super::path::path_now(&dir.path, dir.ino, &dir.found_at))).unwrap_or(kept.clone());\n",
        "    let now = if @ON { kept.clone() } else { inside(&mut || Some(super::path::path_now(&dir.path, dir.ino, &dir.found_at))).unwrap_or(kept.clone()) };\n")


@bug("dir-claim-inside-shim", rebuilt=True)
def _():
    sub("crates/hashfs-interpose/src/entry/streams.rs",
        "    !crate::in_shim() && B::claims_dir(d as usize)\n",
        "    B::claims_dir(d as usize)\n")


@bug("vfork-child-chdir-shared")
def _():
    plant("crates/hashfs-preload/src/shim/cwd.rs",
        "    if in_vfork_child() {\n        *VFORK_CWD.lock() = Some(Some(path.to_path_buf()));\n",
        "    if in_vfork_child() && !@ON {\n        *VFORK_CWD.lock() = Some(Some(path.to_path_buf()));\n")


@bug("descriptor-link-unserved")
def _():
    plant("crates/hashfs-preload/src/shim/path.rs",
        "    let (n, rest) = link_number(path)?;\n",
        "    if @ON {\n        return None;\n    }\n    let (n, rest) = link_number(path)?;\n")


@bug("descriptor-link-reopened-by-name")
def _():
    plant("crates/hashfs-preload/src/shim/fd.rs",
        "    Some(open_once(&of.fs_path, flags, mode, Some(of.ino)))\n",
        "    Some(open_once(&of.fs_path, flags, mode, if @ON { None } else { Some(of.ino) }))\n")


@bug("cwd-link-unserved")
def _():
    plant("crates/hashfs-preload/src/shim/path.rs",
        "    let (dir, removed) = super::cwd::image_cwd()?;\n",
        "    if @ON {\n        return None;\n    }\n    let (dir, removed) = super::cwd::image_cwd()?;\n")


@bug("vfork-kept-with-close-on-exec-files")
def _():
    plant("crates/hashfs-preload/src/shim/exec.rs",
        "        (Some(s), Some(_)) => !s.fds.lock().is_empty() || !pump::PUMPS.lock().is_empty(),\n",
        "        (Some(s), Some(_)) if @ON => !surviving(s).is_empty(),\n        (Some(s), Some(_)) => !s.fds.lock().is_empty() || !pump::PUMPS.lock().is_empty(),\n")


@bug("pump-end-closed-by-close-range")
def _():
    plant("crates/hashfs-preload/src/shim/pump.rs",
        "    let me = current_pid();\n    let mut ends: Vec<c_int> = pumped",
        "    if @ON {\n        return Vec::new();\n    }\n    let me = current_pid();\n    let mut ends: Vec<c_int> = pumped")



@bug("detached-pump-not-waited")
def _():
    plant("crates/hashfs-preload/src/shim/pump.rs",
        "pub(super) fn finish_detached() {\n    let detached: Vec<_> = {\n",
        "pub(super) fn finish_detached() {\n    if @ON {\n        return;\n    }\n    let detached: Vec<_> = {\n")


@bug("exec-keeps-pump-copies")
def _():
    plant("crates/hashfs-preload/src/shim/pump.rs",
        "pub(super) fn close_exec_write_ends() {\n",
        "pub(super) fn close_exec_write_ends() {\n    if @ON {\n        return;\n    }\n")


@bug("mapping-not-followed")
def _():
    plant("crates/hashfs-preload/src/shim/mmap/follow.rs",
        "    if followed == 0 {\n        return;\n    }\n",
        "    if followed == 0 || @ON {\n        return;\n    }\n")


@bug("follow-data-unwatched")
def _():
    plant("crates/hashfs-preload/src/shim/mmap/follow.rs",
        "        if seen_data.is_none() && COPIES.load(Ordering::Relaxed) > 0 {\n",
        "        if seen_data.is_none() && COPIES.load(Ordering::Relaxed) > 0 && !@ON {\n")


@bug("follow-holes-unmapped")
def _():
    plant("crates/hashfs-preload/src/shim/mmap.rs",
        "    let mut stale = Vec::new();\n    for (i, m) in maps.iter_mut().enumerate() {\n",
        "    let mut stale = Vec::new();\n    if @ON && std::thread::current().name() == Some(\"hashfs-map-follow\") {\n        return stale;\n    }\n    for (i, m) in maps.iter_mut().enumerate() {\n")


@bug("follow-not-in-child")
def _():
    plant("crates/hashfs-preload/src/shim/mmap.rs",
        "    if MAP_COUNT.load(Ordering::Relaxed) > 0 {\n        follow::watch_in_child();\n",
        "    if MAP_COUNT.load(Ordering::Relaxed) > 0 && !@ON {\n        follow::watch_in_child();\n")


@bug("close-range-uninterposed", rebuilt=True)
def _():
    sub("crates/hashfs-interpose/src/export.rs",
        "                close_range => fd::close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int;\n",
        "")


@bug("freopen-mode-kept", rebuilt=True)
def _():
    sub("crates/hashfs-interpose/src/entry/compose.rs",
        "        set_stream_mode(fp, flags);\n",
        "")


@bug("mount-flock-local")
def _():
    plant("crates/hashfs-fuse/src/lib.rs",
        "        if self.locks.is_some() && config.add_capabilities(InitFlags::FUSE_FLOCK_LOCKS).is_err() {\n",
        "        if !@ON && self.locks.is_some() && config.add_capabilities(InitFlags::FUSE_FLOCK_LOCKS).is_err() {\n")


@bug("mount-flock-kept-at-release")
def _():
    plant("crates/hashfs-fuse/src/lib.rs",
        "        if let (Some(l), Some(owner), Ok(i)) = (&self.locks, lock_owner, self.ino(i)) {\n",
        "        if let (false, Some(l), Some(owner), Ok(i)) = (@ON, &self.locks, lock_owner, self.ino(i)) {\n")


@bug("fork-maps-not-held", rebuilt=True)
def _():
    sub("crates/hashfs-preload/src/shim/mmap.rs",
        "pub(super) struct MapsHeld(hashfs::ForkMutexGuard<'static, Vec<FileMap>>);\n",
        "pub(super) struct MapsHeld;\n")
    sub("crates/hashfs-preload/src/shim/mmap.rs",
        "    MapsHeld(MAPS.lock())\n",
        "    MapsHeld\n")
    sub("crates/hashfs-preload/src/shim/mmap.rs",
        "        writable_inos(&self.0)\n",
        "        MAPS.try_lock().map_or_else(Vec::new, |m| writable_inos(&m))\n")


@bug("unmap-record-after-pages")
def _():
    plant("crates/hashfs-preload/src/shim/mmap.rs",
        "    let mut maps = MAPS.lock();\n    let r = unmap();\n",
        "    let mut unmap = Some(unmap);\n"
        "    let early = if @ON { unmap.take().map(|f| f()) } else { None };\n"
        "    let mut maps = MAPS.lock();\n"
        "    let r = match early {\n        Some(r) => r,\n        None => (unmap.take().expect(\"once\"))(),\n    };\n")


@bug("library-opened-unheld")
def _():
    plant("crates/hashfs-preload/src/shim/library.rs",
        "    following_out(|| super::path::holding(fs, super::path::Hold::Lock, open))\n",
        "    following_out(|| if @ON { open() } else { super::path::holding(fs, super::path::Hold::Lock, open) })\n")


@bug("follower-keeps-copies")
def _():
    plant("crates/hashfs-preload/src/shim/mmap/follow.rs",
        "    super::copy::yield_to_writers(fs, &mut maps, ino);\n",
        "    if !@ON {\n        super::copy::yield_to_writers(fs, &mut maps, ino);\n    }\n")


@bug("copy-recorded-unasked")
def _():
    plant("crates/hashfs-preload/src/shim/mmap.rs",
        "    copy::yield_to_writers(fs, &mut maps, ino);\n    recount(&maps);\n    Ok(start as *mut c_void)\n",
        "    if !@ON {\n        copy::yield_to_writers(fs, &mut maps, ino);\n    }\n    recount(&maps);\n    Ok(start as *mut c_void)\n")


@bug("mprotect-writable-unmarked")
def _():
    plant("crates/hashfs-preload/src/shim/mmap.rs",
        "        for m in maps.iter_mut().filter(|m| meets(m)) {\n",
        "        for m in maps.iter_mut().filter(|m| meets(m) && !@ON) {\n")


@bug("mapped-mark-outlives-unmap")
def _():
    plant("crates/hashfs-preload/src/shim/mmap.rs",
        "    for &ino in marked.1.iter().filter(|i| now.binary_search(i).is_err()) {\n",
        "    for &ino in marked.1.iter().filter(|i| now.binary_search(i).is_err() && !@ON) {\n")


@bug("fork-child-unmarked")
def _():
    plant("crates/hashfs/src/fs/shared/fork.rs",
        "            if marks.set_mark(ino, me, Mark::Writable, true) {\n",
        "            if !@ON && marks.set_mark(ino, me, Mark::Writable, true) {\n")


@bug("mount-ignores-marks")
def _():
    plant("crates/hashfs-fuse/src/watch.rs",
        "                inos.extend_from_slice(&mapped);\n",
        "                if !@ON {\n                    inos.extend_from_slice(&mapped);\n                }\n")


@bug("self-mem-inherited")
def _():
    plant("crates/hashfs-preload/src/shim/mmap/self_mem.rs",
        "    if mem.0 != me {\n",
        "    if mem.0 != me && !(@ON && mem.1.is_some()) {\n")


@bug("copy-keeps-pin")
def _():
    plant("crates/hashfs-preload/src/shim/mmap/copy.rs",
        "    m._pin = None;\n",
        "    if !@ON {\n        m._pin = None;\n    }\n")


@bug("socket-bind-refused")
def _():
    plant("crates/hashfs-preload/src/shim/socket.rs",
        "    Some(bind_at(fd, &p))\n",
        "    Some(if @ON { Err(libc::EOPNOTSUPP) } else { bind_at(fd, &p) })\n")


@bug("socket-node-unshared")
def _():
    plant("crates/hashfs-preload/src/shim/socket.rs",
        "    super::fifo::node_of(m.ino, m.generation, make)\n",
        "    super::fifo::node_of(m.ino, m.generation, make).map(|n| if @ON { n.with_extension(std::process::id().to_string()) } else { n })\n")


@bug("socket-failed-bind-named")
def _():
    plant("crates/hashfs-preload/src/shim/socket.rs",
        "    if bound.is_err() {\n",
        "    if bound.is_err() && !@ON {\n")


@bug("socket-datagram-unserved")
def _():
    plant("crates/hashfs-preload/src/shim/socket.rs",
        "    let p = fs_path_of(path)?;\n    Some(peer_node(&p)",
        "    let p = fs_path_of(path).filter(|_| !@ON)?;\n    Some(peer_node(&p)")



@bug("snapshot-offset-kept-at-exit")
def _():
    plant("crates/hashfs-preload/src/shim/pump.rs",
        "        if let Some(sf) = sf {\n            super::snapshot::write_back(fd, sf);\n",
        "        if let Some(sf) = sf.as_ref().filter(|_| !@ON) {\n            super::snapshot::write_back(fd, sf);\n")


@bug("snapshot-offset-kept-at-replace")
def _():
    plant("crates/hashfs-preload/src/shim/pump.rs",
        "    if let Some(sf) = &taken {\n",
        "    if let Some(sf) = taken.as_ref().filter(|_| !@ON) {\n")


@bug("snapshot-unnamed-at-exec")
def _():
    plant("crates/hashfs-preload/src/shim/exec.rs",
        "    let snapshot = super::snapshot::handed_over();\n",
        "    let snapshot = super::snapshot::handed_over().filter(|_| !@ON);\n")


@bug("spawn-snapshot-unnamed")
def _():
    plant("crates/hashfs-preload/src/shim/exec.rs",
        "    if let Some((memfd, of)) = super::snapshot::handed_over() {\n",
        "    if let Some((memfd, of)) = super::snapshot::handed_over().filter(|_| !@ON) {\n")


@bug("snapshot-fstat-memfd")
def _():
    plant("crates/hashfs-preload/src/shim/pump.rs",
        "let Some(of) = output_pumped(fd) else { return super::snapshot::on(fd) };",
        "let Some(of) = output_pumped(fd) else { return super::snapshot::on(fd).filter(|_| !@ON) };")


@bug("pump-workers-not-kept")
def _():
    plant("crates/hashfs-preload/src/shim/workers.rs",
        "            if idle.len() >= KEPT {\n",
        "            if @ON || idle.len() >= KEPT {\n")


@bug("workers-kept-in-child")
def _():
    plant("crates/hashfs-preload/src/shim/workers.rs",
        "pub(super) fn forget_in_child() {\n",
        "pub(super) fn forget_in_child() {\n    if @ON {\n        return;\n    }\n")


@bug("pump-threads-take-signals")
def _():
    plant("crates/hashfs/src/pm/mod.rs",
        "        libc::sigfillset(&mut all);\n",
        "        if !@ON {\n            libc::sigfillset(&mut all);\n        } else {\n            libc::sigemptyset(&mut all);\n            libc::sigaddset(&mut all, libc::SIGPIPE);\n        }\n")


@bug("pool-taken-thread-ends")
def _():
    plant("crates/hashfs-preload/src/shim/workers.rs",
        "            // A caller took it out of the list after the wait: its job is on its way.\n            job = w.next_job(None);\n",
        "            // A caller took it out of the list after the wait: its job is on its way.\n            if @ON {\n                return;\n            }\n            job = w.next_job(None);\n")


@bug("input-pump-feeds-itself")
def _():
    plant("crates/hashfs-preload/src/shim/pump.rs",
        "    let writes_it = PUMPED.lock().iter().any(|p| p.output && p.pid == pid && p.of.ino == of.ino);\n",
        "    let writes_it = !@ON && PUMPED.lock().iter().any(|p| p.output && p.pid == pid && p.of.ino == of.ino);\n")
