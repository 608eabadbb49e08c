//! `posix_spawn_file_actions_addchdir_np` (and `addfchdir_np` with a descriptor) to a
//! directory of the backend's: the kernel's
//! child cannot change into it (its spawn failed with ENOENT: Rust's `Command` with
//! `current_dir`, which cargo gives every test it runs). The action is kept here instead of
//! in the kernel's list, and a spawn with those actions tells the backend to start the child
//! in that directory (the preload shim passes its working directory in the image to the
//! child, as for its own); destroying the actions forgets it.

use crate::call::c_str;
use crate::{forward, Backend};
use libc::{c_char, c_int};
use std::ffi::CString;
use std::sync::Mutex;

type Actions = *mut libc::posix_spawn_file_actions_t;

/// Action lists (by address) whose last change of directory is the backend's.
static DIRS: Mutex<Vec<(usize, CString)>> = Mutex::new(Vec::new());

pub unsafe fn posix_spawn_file_actions_addchdir_np<B: Backend>(actions: Actions, path: *const c_char) -> c_int {
    let raw = || forward!(posix_spawn_file_actions_addchdir_np(actions, path): fn(Actions, *const c_char) -> c_int);
    // SAFETY: the function's contract: path is a NUL-terminated string.
    let Some(p) = (unsafe { c_str(path) }) else { return raw() };
    let mut dirs = DIRS.lock().unwrap_or_else(|e| e.into_inner());
    dirs.retain(|(a, _)| *a != actions as usize);
    if !super::starts_in_backend::<B>(p) {
        drop(dirs);
        return raw(); // a later kernel directory replaces an earlier one of ours
    }
    // The directory as the parent names it now (a relative one from its working directory).
    let dir = if p.to_bytes().first() != Some(&b'/') {
        let mut buf = match super::realpath::cwd() {
            Ok(cwd) => cwd,
            Err(e) => return e,
        };
        buf.push(b'/');
        buf.extend_from_slice(p.to_bytes());
        CString::new(buf).expect("no NUL inside")
    } else {
        p.to_owned()
    };
    dirs.push((actions as usize, dir));
    0
}

/// `posix_spawn_file_actions_addfchdir_np` to a directory descriptor of the backend's:
/// kept as its path (the kernel's child would change into the descriptor's placeholder,
/// which is no directory). Another descriptor is the kernel's action.
pub unsafe fn posix_spawn_file_actions_addfchdir_np<B: Backend>(actions: Actions, fd: c_int) -> c_int {
    let raw = || forward!(posix_spawn_file_actions_addfchdir_np(actions, fd): fn(Actions, c_int) -> c_int);
    let mut dirs = DIRS.lock().unwrap_or_else(|e| e.into_inner());
    dirs.retain(|(a, _)| *a != actions as usize);
    let Some(dir) = crate::guarded(|| B::dir_path(fd)).flatten() else {
        drop(dirs);
        return raw();
    };
    dirs.push((actions as usize, dir));
    0
}

pub unsafe fn posix_spawn_file_actions_destroy<B: Backend>(actions: Actions) -> c_int {
    DIRS.lock().unwrap_or_else(|e| e.into_inner()).retain(|(a, _)| *a != actions as usize);
    forward!(posix_spawn_file_actions_destroy(actions): fn(Actions) -> c_int)
}

/// The backend's directory the next spawn with `actions` starts its child in, if any.
pub(super) fn dir_of(actions: *const libc::posix_spawn_file_actions_t) -> Option<CString> {
    if actions.is_null() {
        return None;
    }
    DIRS.lock().unwrap_or_else(|e| e.into_inner()).iter().find(|(a, _)| *a == actions as usize).map(|(_, d)| d.clone())
}
