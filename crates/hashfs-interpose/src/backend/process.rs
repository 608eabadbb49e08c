//! The working directory, file-system statistics, sockets at paths, ioctl and exit
//! ([`crate::entry::process`]).

use crate::call::{Errno, Next, Served};
use libc::{c_int, c_ulong, c_void};
use std::ffi::{CStr, CString};
use std::path::PathBuf;

/// What statfs and statvfs report, whichever structure the call fills.
#[derive(Clone, Copy, Debug, Default)]
pub struct FsStats {
    /// statfs's `f_type`.
    pub magic: i64,
    pub block_bytes: u64,
    pub blocks_total: u64,
    pub blocks_free: u64,
    pub inodes_total: u64,
    pub inodes_free: u64,
    pub name_max: u64,
}

/// ioctl's third argument: the caller's pointer, read or written as the request says.
pub struct IoctlArg(pub(crate) *mut c_void);

impl IoctlArg {
    /// Stores `v` where the argument points (EFAULT for null).
    ///
    /// # Safety
    /// The request is one whose argument points to an `int` (FIONREAD, FIGETBSZ...).
    pub unsafe fn put_int(&self, v: c_int) -> Result<(), Errno> {
        if self.0.is_null() {
            return Err(Errno::FAULT);
        }
        // SAFETY: the caller's contract, and ioctl's for the request.
        unsafe { *(self.0 as *mut c_int) = v };
        Ok(())
    }

    /// The `int` the argument points to (EFAULT for null).
    ///
    /// # Safety
    /// As [`IoctlArg::put_int`].
    pub unsafe fn get_int(&self) -> Result<c_int, Errno> {
        if self.0.is_null() {
            return Err(Errno::FAULT);
        }
        // SAFETY: as put_int.
        Ok(unsafe { *(self.0 as *const c_int) })
    }
}

pub trait Process {
    /// Every chdir; `next` changes directory in the kernel, to the caller's path (None)
    /// or the one given.
    fn chdir(_path: &CStr, _next: Next<'_, (), Option<CString>>) -> Served<()> {
        None
    }
    /// Every fchdir.
    fn fchdir(_fd: c_int, _next: Next<'_, ()>) -> Served<()> {
        None
    }
    /// The working directory, when the backend keeps it (getcwd and get_current_dir_name
    /// then answer it, under their buffer rules). Asked on every getcwd, the backend's
    /// own included, outside the guard: it must call nothing interposed.
    fn working_dir() -> Option<PathBuf> {
        None
    }
    /// Whether the working directory `working_dir` gives was removed (getcwd's ENOENT).
    fn working_dir_removed() -> bool {
        false
    }
    /// statfs, statvfs (and their `64` names) of a path.
    fn statfs(_path: &CStr) -> Served<FsStats> {
        None
    }
    /// fstatfs and fstatvfs of a claimed descriptor.
    fn fstatfs(_fd: c_int) -> Served<FsStats> {
        None
    }
    /// bind and connect of UNIX socket `fd` to `path` (not an abstract one): the backend
    /// binds or connects the socket itself where the path is its.
    fn bind_unix(_fd: c_int, _path: &CStr) -> Served<()> {
        None
    }
    fn connect_unix(_fd: c_int, _path: &CStr) -> Served<()> {
        None
    }
    /// The kernel's path for a datagram sent to UNIX socket `path` (`sendto`, `sendmsg`),
    /// where the path is the backend's.
    fn unix_peer(_path: &CStr) -> Served<CString> {
        None
    }
    fn ioctl(_fd: c_int, _request: c_ulong, _arg: IoctlArg, _next: Next<'_, c_int>) -> Served<c_int> {
        None
    }
    /// Before `_exit` and `_Exit` end the process (which run no exit handlers).
    fn before_exit() {}
    /// Before `fork`, in the parent: what [`Self::after_fork`] gets in the parent and in
    /// the child (a shim's preparation: locks it holds across the fork, counts it makes).
    fn before_fork() -> Option<Box<dyn std::any::Any>> {
        None
    }
    /// After `fork`, with what [`Self::before_fork`] returned: `pid` is fork's result (0
    /// in the child, -1 in a parent whose fork failed). Runs before fork returns to the
    /// program; errno is restored after it.
    fn after_fork(_prepared: Option<Box<dyn std::any::Any>>, _pid: libc::pid_t) {}
    /// Whether `vfork` must be a `fork` (with [`Self::before_fork`] and
    /// [`Self::after_fork`]): a `vfork` child runs in its parent's memory, where a shim
    /// cannot act for it, so one whose program would inherit descriptors the shim serves
    /// is made a child of its own. False: libc's `vfork`.
    fn vfork_as_fork() -> bool {
        false
    }
    /// Before `execve` and its relatives replace the program: what the backend does for
    /// the descriptors that survive (a shim hands their open files to the next program).
    /// Its value goes to [`Self::exec_failed`] if the call returns.
    fn before_exec() -> Option<Box<dyn std::any::Any>> {
        None
    }
    /// What runs when program file `path` is executed (`execve` and its relatives,
    /// `posix_spawn`), if it is the backend's: a copy the kernel can run (with the
    /// libraries of the backend's it needs, found also along `library_path`, the exec's
    /// `LD_LIBRARY_PATH`: `entry/linked.rs`), or a script's interpreter
    /// (`entry/program.rs`). None: not the backend's (the kernel runs it).
    fn exec_image(_path: &CStr, _library_path: Option<&CStr>) -> Served<crate::entry::program::ExecImage> {
        None
    }
    /// The libraries of the backend's that program `path`, which the kernel runs, needs
    /// when it starts, found along `library_path` (the exec's `LD_LIBRARY_PATH`, which
    /// names a directory of the backend's): a directory of links for the loader, as a
    /// program of the backend's gets them (`entry/linked.rs`). None: it needs none.
    fn kernel_program_libraries(_path: &CStr, _library_path: &CStr) -> Served<crate::entry::linked::Libraries> {
        None
    }
    /// Whether `path`, were it a program, would be the backend's to run: then `execvp`
    /// and `posix_spawnp` search a `PATH` with such a directory in it themselves, since
    /// libc's search reaches the kernel alone (`entry/search.rs`).
    fn serves_program(_path: &CStr) -> bool {
        false
    }
    /// The path, as the program names it, of directory descriptor `fd` if it is the
    /// backend's (a spawn's `posix_spawn_file_actions_addfchdir_np` into it starts the child
    /// there: `entry/spawn_dir.rs`). None: not the backend's directory.
    fn dir_path(_fd: c_int) -> Option<CString> {
        None
    }
    /// The copy the dynamic loader is to open when `dlopen` is given `path` (a name with a
    /// slash), if it names a library of the backend's, with the copies of the libraries of
    /// the backend's it needs (`entry/library.rs`). None: not the backend's (the loader
    /// opens `path` itself).
    fn library(_path: &CStr) -> Served<crate::entry::library::Library> {
        None
    }
    /// The exec failed (the program goes on): [`Self::before_exec`]'s work is undone.
    /// errno is restored after it.
    fn exec_failed(_prepared: Option<Box<dyn std::any::Any>>) {}
    /// Before `posix_spawn` and `posix_spawnp` start a program in a child (which runs no
    /// code of ours before its exec), or `system` and `popen` (`known`: what the call
    /// tells of its child once it returns): what the child's program is to inherit. Its
    /// value goes to [`Self::after_spawn`] once a child was made, or to
    /// [`Self::spawn_failed`].
    fn before_spawn(_known: ChildKnown) -> Option<Box<dyn std::any::Any>> {
        None
    }
    /// The next [`Self::before_spawn`] on this thread starts its child in `dir` (a directory
    /// of the backend's that the spawn's file actions change into: `entry/spawn_dir.rs`),
    /// not the working directory; None again after it.
    fn spawn_in(_dir: Option<&CStr>) {}
    /// A child was made (`child`: what is known of it once the call returned).
    fn after_spawn(_prepared: Option<Box<dyn std::any::Any>>, _child: Child) {}
    /// No child was made: [`Self::before_spawn`]'s work is undone.
    fn spawn_failed(_prepared: Option<Box<dyn std::any::Any>>) {}
}

/// What a call that starts a child program will tell of it once it returns
/// ([`Process::before_spawn`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildKnown {
    /// Its pid (`posix_spawn`, `posix_spawnp`; `popen`'s is found in
    /// `/proc/thread-self/children`), or that it has ended.
    Pid,
    /// That it has ended (`system`, which waits for it).
    Ended,
    /// Nothing (`popen` where this thread's children cannot be read).
    Nothing,
}

/// What is known of a child a call made, once the call returned ([`Process::after_spawn`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Child {
    /// It runs, or ran, as this pid.
    Pid(libc::pid_t),
    /// It has ended (`system`; a `popen` child already reaped when the call returned).
    Ended,
    /// Nothing more.
    Unknown,
}
