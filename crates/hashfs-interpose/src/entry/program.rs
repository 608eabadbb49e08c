//! Starting programs: `execve` and its relatives, `posix_spawn`, `system` and `popen`,
//! each between the backend's preparation (descriptors handed to the next program) and its
//! undoing if the call returns. A program file the backend serves is run here too: the
//! kernel cannot read it, so the backend gives either a copy of it in a memfd, which is
//! run by descriptor, or, for a script (`#!`), its interpreter, which is run as the kernel
//! would run it: `interpreter [argument] path arguments...`, reading the script through
//! the backend since the program keeps the environment that preloads this library.

use crate::call::c_str;
use crate::{forward, Backend, Child, ChildKnown};
use libc::{c_char, c_int};
use std::ffi::{CStr, CString};

/// What runs when a program file the backend serves is executed ([`crate::Process::exec_image`]).
pub enum ExecImage {
    /// A copy of the file in a close-on-exec memfd (the caller's to close if the exec fails).
    Copy(c_int),
    /// A copy, as `Copy`, of a program that needs libraries of the backend's when it starts:
    /// run with them (`entry/linked.rs`).
    Linked(c_int, super::linked::Libraries),
    /// A script's interpreter and its optional argument (the `#!` line's rule).
    Script { interpreter: CString, arg: Option<CString> },
    /// A program the kernel can run, at this path (a symbolic link led out of the backend's
    /// files to it).
    Elsewhere(CString),
}

/// Interpreters a script may go through before a program (as the kernel's limit, ELOOP).
const MAX_SCRIPTS: u32 = 4;

/// How a program runs once found: by path or by a descriptor of its copy (with the
/// environment to give it instead of the caller's, for a program with libraries).
pub(super) enum Run<'a> {
    Path(&'a CStr, Option<Argv>),
    Copy(c_int, Option<Argv>),
}

/// When `path` names a program file the backend serves: runs `run` with what to execute
/// and the arguments to pass (a script's rewritten as the kernel would), after resolving
/// its interpreter the same way; returns run's result, or the error number why the file
/// cannot be run. None when the backend does not serve `path` (the caller execs it as it
/// is).
///
/// # Safety
/// `path` is null or a NUL-terminated string and `argv` a null-terminated array of them,
/// as exec's contract says.
unsafe fn run_served<B: Backend>(
    path: *const c_char,
    argv: Argv,
    envp: Argv,
    start: Start,
    run: &mut dyn FnMut(Run<'_>, Argv) -> c_int,
) -> Option<Result<c_int, c_int>> {
    // SAFETY: the caller's contract.
    let p = unsafe { c_str(path) }?;
    // SAFETY: exec's contract for envp.
    let library_path = unsafe { super::linked::library_path(envp) };
    let Some(image) = crate::guarded(|| B::exec_image(p, library_path)).flatten() else {
        let spawn = start == Start::Spawn;
        // SAFETY: the caller's contract.
        return unsafe { super::loader::run_loader::<B>(p, argv, envp, library_path, spawn, run) }
            .or_else(|| unsafe { with_libraries::<B>(p, argv, envp, library_path?, spawn, run) });
    };
    let call = Call { envp, library_path, start };
    // SAFETY: as above.
    Some(unsafe { run_image::<B>(p, image, argv, &call, run, 0) })
}

/// A program the kernel runs, started with `LD_LIBRARY_PATH` naming a directory of the
/// backend's that holds libraries it needs: run with them (`linked.rs`). None when it
/// needs none of the backend's.
///
/// # Safety
/// exec's contract for `argv` and `envp`.
unsafe fn with_libraries<B: Backend>(
    p: &CStr,
    argv: Argv,
    envp: Argv,
    library_path: &CStr,
    spawn: bool,
    run: &mut dyn FnMut(Run<'_>, Argv) -> c_int,
) -> Option<Result<c_int, c_int>> {
    let libs = match crate::guarded(|| B::kernel_program_libraries(p, library_path)).flatten()? {
        Ok(libs) => libs,
        Err(e) => return Some(Err(e.0)),
    };
    // SAFETY: the caller's contract.
    Some(Ok(unsafe { super::linked::run_with(libs, envp, spawn, |env| run(Run::Path(p, Some(env)), argv)) }))
}

/// Whether a program is started by an exec (which returns only if it failed) or a spawn
/// (which returns 0 once the child runs the program).
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Start {
    Exec,
    Spawn,
}

/// The call's environment, its `LD_LIBRARY_PATH` and how it starts the program.
struct Call<'a> {
    envp: Argv,
    library_path: Option<&'a CStr>,
    start: Start,
}

unsafe fn run_image<B: Backend>(
    path: &CStr,
    image: Result<ExecImage, crate::Errno>,
    argv: Argv,
    call: &Call<'_>,
    run: &mut dyn FnMut(Run<'_>, Argv) -> c_int,
    depth: u32,
) -> Result<c_int, c_int> {
    match image {
        Err(e) => Err(e.0),
        Ok(ExecImage::Copy(fd)) => {
            let r = run(Run::Copy(fd, None), argv);
            let e = crate::errno();
            forward!(close(fd): fn(c_int) -> c_int);
            crate::set_errno(e);
            Ok(r)
        }
        Ok(ExecImage::Linked(fd, libs)) => {
            let spawn = call.start == Start::Spawn;
            // SAFETY: exec's contract for the environment.
            let r =
                unsafe { super::linked::run_with(libs, call.envp, spawn, |env| run(Run::Copy(fd, Some(env)), argv)) };
            let e = crate::errno();
            forward!(close(fd): fn(c_int) -> c_int);
            crate::set_errno(e);
            Ok(r)
        }
        Ok(ExecImage::Elsewhere(p)) => Ok(run(Run::Path(&p, None), argv)),
        Ok(ExecImage::Script { interpreter, arg }) => {
            if depth >= MAX_SCRIPTS {
                return Err(libc::ELOOP);
            }
            // interpreter [arg] path argv[1..]
            let mut args = ArgList::new();
            args.push(interpreter.as_ptr());
            if let Some(a) = &arg {
                args.push(a.as_ptr());
            }
            args.push(path.as_ptr());
            // SAFETY: the caller's contract: argv is null or null-terminated.
            unsafe { args.push_after_first(argv) };
            match crate::guarded(|| B::exec_image(&interpreter, call.library_path)).flatten() {
                // SAFETY: args is null-terminated, its strings alive across the call.
                Some(inner) => unsafe { run_image::<B>(&interpreter, inner, args.as_ptr(), call, run, depth + 1) },
                None => Ok(run(Run::Path(&interpreter, None), args.as_ptr())),
            }
        }
    }
}

/// The `/proc/self/fd/N` path of descriptor `fd`, for a call that takes a path (a spawned
/// child opens it before its exec closes the descriptor).
pub(super) fn fd_path(fd: c_int) -> CString {
    CString::new(format!("/proc/self/fd/{fd}")).expect("no NUL in a number")
}

/// Whether an exec-by-search name is a path (it has a slash): then it is not searched for.
fn is_path(file: *const c_char) -> bool {
    // SAFETY: file is null or NUL-terminated (exec's contract).
    unsafe { c_str(file) }.is_some_and(|f| f.to_bytes().contains(&b'/'))
}

/// Runs `exec` (the real call) between the backend's preparation and, if it returns, its
/// undoing.
fn exec_with<B: Backend>(exec: impl FnOnce() -> c_int) -> c_int {
    exec_of::<B>(Target::Unknown, exec)
}

/// What an exec runs, as far as the kernel is asked before it: a program that is not
/// there or may not be run fails at once, and then nothing is prepared (the process that
/// mounted the image leaves it before an exec that hands nothing over, and could not come
/// back after one that fails: dash's exec tries each directory of `PATH` in turn).
#[derive(Clone, Copy)]
enum Target {
    /// A path, as execve takes it.
    Path(*const c_char),
    /// A name execvp searches `PATH` for (a slash in it makes it a path).
    Searched(*const c_char),
    /// A descriptor (fexecve), or not known.
    Unknown,
}

/// Whether the kernel's exec of `target` would fail for want of the file or of execute
/// permission (by the effective ids, as execve's). Allocates nothing: a `vfork` child
/// execs through here.
fn fails_at_once(target: Target) -> bool {
    const SYS_FACCESSAT2: libc::c_long = 439;
    let missing = |p: *const c_char| {
        // SAFETY: a NUL-terminated path; faccessat2 reads it and changes nothing.
        let r = unsafe {
            raw_syscall(SYS_FACCESSAT2, [libc::AT_FDCWD as _, p as _, libc::X_OK as _, libc::AT_EACCESS as _])
        };
        matches!(-r as c_int, libc::ENOENT | libc::ENOTDIR | libc::EACCES)
    };
    match target {
        Target::Unknown => false,
        Target::Path(p) => !p.is_null() && (missing(p) || not_a_program(p)),
        Target::Searched(f) => {
            // SAFETY: exec's contract: f is null or a NUL-terminated string.
            let Some(f) = (unsafe { c_str(f) }).map(CStr::to_bytes).filter(|f| !f.is_empty()) else { return false };
            if f.contains(&b'/') {
                return missing(f.as_ptr().cast());
            }
            // SAFETY: getenv's result is null or a NUL-terminated string; nothing allocated.
            let path = unsafe { libc::getenv(c"PATH".as_ptr()) };
            let path = match path.is_null() {
                true => &b"/bin:/usr/bin"[..],
                // SAFETY: a non-null getenv result is a NUL-terminated string.
                false => unsafe { CStr::from_ptr(path) }.to_bytes(),
            };
            let mut buf = [0u8; 4096];
            !path.split(|&b| b == b':').any(|dir| {
                let dir = if dir.is_empty() { &b"."[..] } else { dir };
                let n = dir.len() + 1 + f.len();
                if n >= buf.len() {
                    return true; // not judged here: prepared as before
                }
                buf[..dir.len()].copy_from_slice(dir);
                buf[dir.len()] = b'/';
                buf[dir.len() + 1..n].copy_from_slice(f);
                buf[n] = 0;
                !missing(buf.as_ptr().cast())
            })
        }
    }
}

/// Whether file `p` begins as neither an ELF file nor a script (`#!`): execve's ENOEXEC
/// (execvp then runs it by `/bin/sh`, so a searched name is not asked). A file that cannot
/// be read is not judged. System calls only, as above.
fn not_a_program(p: *const c_char) -> bool {
    // SAFETY: a NUL-terminated path; the descriptor is ours, read into our buffer and closed.
    unsafe {
        let flags = (libc::O_RDONLY | libc::O_CLOEXEC) as libc::c_long;
        let fd = raw_syscall(libc::SYS_openat, [libc::AT_FDCWD as _, p as _, flags, 0]);
        if fd < 0 {
            return false;
        }
        let mut head = [0u8; 4];
        let n = raw_syscall(libc::SYS_read, [fd, head.as_mut_ptr() as _, head.len() as _, 0]);
        raw_syscall(libc::SYS_close, [fd, 0, 0, 0]);
        n >= 0 && head[..n as usize] != *b"\x7fELF" && !head[..n as usize].starts_with(b"#!")
    }
}

/// System call `n` by the instruction itself: the result, or minus the error number (errno
/// is left alone). Not through `syscall()`, which the shim interposes and serves for some
/// numbers: there a `close` of the number this check opened took that number out of the
/// shim's table, which in a `vfork` child is the parent's (Python's subprocess execs from
/// one through each directory of `PATH`: the parent's descriptors became EBADF).
///
/// # Safety
/// The arguments are what system call `n` takes.
unsafe fn raw_syscall(n: libc::c_long, [a, b, c, d]: [libc::c_long; 4]) -> libc::c_long {
    let ret: libc::c_long;
    // SAFETY: the caller's contract; the instruction clobbers rcx and r11 only.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") n => ret,
            in("rdi") a,
            in("rsi") b,
            in("rdx") c,
            in("r10") d,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack)
        );
    }
    ret
}

fn exec_of<B: Backend>(target: Target, exec: impl FnOnce() -> c_int) -> c_int {
    if fails_at_once(target) {
        return exec();
    }
    let prepared = crate::guarded(B::before_exec).flatten();
    let r = exec();
    let e = crate::errno();
    crate::guarded(|| B::exec_failed(prepared));
    crate::set_errno(e);
    r
}

pub(super) type Argv = *const *const c_char;

extern "C" {
    /// The process's environment (`execv` passes it on).
    static environ: Argv;
}

/// An exec of `path` when it is a program file the backend serves (its copy, or its
/// script's interpreter, with `envp`); else `otherwise`, the caller's own exec.
///
/// # Safety
/// execve's contract for `path`, `argv` and `envp`.
unsafe fn exec_served_or<B: Backend>(
    path: *const c_char,
    argv: Argv,
    envp: Argv,
    otherwise: impl FnOnce() -> c_int,
) -> c_int {
    let mut run = |what: Run<'_>, argv: Argv| match what {
        Run::Path(p, env) => {
            let (p, envp) = (p.as_ptr(), env.unwrap_or(envp));
            exec_of::<B>(Target::Path(p), || forward!(execve(p, argv, envp): fn(*const c_char, Argv, Argv) -> c_int))
        }
        Run::Copy(fd, env) => {
            let envp = env.unwrap_or(envp);
            exec_with::<B>(|| forward!(fexecve(fd, argv, envp): fn(c_int, Argv, Argv) -> c_int))
        }
    };
    // SAFETY: the caller's contract.
    match unsafe { run_served::<B>(path, argv, envp, Start::Exec, &mut run) } {
        Some(Ok(r)) => r,
        Some(Err(e)) => crate::fail(e),
        None => otherwise(),
    }
}

pub unsafe fn execve<B: Backend>(path: *const c_char, argv: Argv, envp: Argv) -> c_int {
    let libc_s = || {
        exec_of::<B>(Target::Path(path), || forward!(execve(path, argv, envp): fn(*const c_char, Argv, Argv) -> c_int))
    };
    // SAFETY: execve's contract.
    unsafe { exec_served_or::<B>(path, argv, envp, libc_s) }
}

pub unsafe fn execv<B: Backend>(path: *const c_char, argv: Argv) -> c_int {
    let libc_s = || exec_of::<B>(Target::Path(path), || forward!(execv(path, argv): fn(*const c_char, Argv) -> c_int));
    // SAFETY: execv's contract; the process's environment, as libc's execv passes it.
    unsafe { exec_served_or::<B>(path, argv, environ, libc_s) }
}

/// Which array call a variadic exec (`execl`, `execlp`, `execle`) becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListExec {
    /// `execl`: `execv`.
    Path,
    /// `execlp`: `execvp`, which searches `PATH`.
    Search,
    /// `execle`: `execve`, the environment after the list's null.
    WithEnv,
}

/// Arguments a variadic exec gathers on the stack before it needs the heap.
const LIST_ON_STACK: usize = 64;

/// An argument array built without allocating for its first [`LIST_ON_STACK`] entries (a
/// `vfork` child shares its parent's heap).
pub(super) struct ArgList {
    small: [*const c_char; LIST_ON_STACK],
    large: Vec<*const c_char>,
    n: usize,
}

impl ArgList {
    pub(super) fn new() -> ArgList {
        ArgList { small: [std::ptr::null(); LIST_ON_STACK], large: Vec::new(), n: 0 }
    }

    pub(super) fn push(&mut self, a: *const c_char) {
        if self.n < LIST_ON_STACK {
            self.small[self.n] = a;
        } else {
            if self.n == LIST_ON_STACK {
                self.large.extend_from_slice(&self.small);
            }
            self.large.push(a);
        }
        self.n += 1;
    }

    /// The entries of `argv` after its first (the program's own name, which a script's
    /// path replaces), then the terminating null.
    ///
    /// # Safety
    /// `argv` is null or a null-terminated array (exec's contract).
    pub(super) unsafe fn push_after_first(&mut self, argv: Argv) {
        if !argv.is_null() {
            // SAFETY: the contract above.
            unsafe {
                let mut i = usize::from(!(*argv).is_null());
                while !(*argv.add(i)).is_null() {
                    self.push(*argv.add(i));
                    i += 1;
                }
            }
        }
        self.push(std::ptr::null());
    }

    /// The array as pushed (the caller pushes its terminating null).
    pub(super) fn as_ptr(&self) -> *const *const c_char {
        if self.n <= LIST_ON_STACK {
            self.small.as_ptr()
        } else {
            self.large.as_ptr()
        }
    }
}

/// `execl`, `execlp` and `execle`, reached from [`export!`](crate::export)'s register
/// spill: the argument list is gathered into an array and the array call made through
/// this interposer (`execv`, `execvp`, `execve`), so that the backend prepares the exec
/// as for those. (glibc's own variadic execs call its `execve` inside, which no preload
/// sees.) Up to [`LIST_ON_STACK`] arguments are gathered without allocating (a `vfork`
/// child shares its parent's heap).
///
/// # Safety
/// `regs` points to the five argument words the caller passed in registers after the path
/// (x86-64 System V: rsi, rdx, rcx, r8, r9) and `stack` to the first it passed on the
/// stack; the list is null-terminated (for `execle`, the environment pointer follows the
/// null), as libc requires of the caller.
pub unsafe fn exec_list<B: Backend>(
    kind: ListExec,
    path: *const c_char,
    regs: *const *const c_char,
    stack: *const *const c_char,
) -> c_int {
    // SAFETY: the words the caller passed, in order: five in registers, the rest on the
    // stack; read only up to the list's null and, for execle, the word after it.
    let word = |i: usize| unsafe {
        if i < 5 {
            *regs.add(i)
        } else {
            *stack.add(i - 5)
        }
    };
    let mut list = ArgList::new();
    let mut n = 0;
    loop {
        let a = word(n);
        list.push(a);
        n += 1;
        if a.is_null() {
            break;
        }
    }
    let argv = list.as_ptr();
    // SAFETY: argv is a null-terminated array of the caller's strings, alive across the
    // call; envp (execle) is the caller's, as execle's contract says.
    unsafe {
        match kind {
            ListExec::Path => execv::<B>(path, argv),
            ListExec::Search => execvp::<B>(path, argv),
            ListExec::WithEnv => execve::<B>(path, argv, word(n) as Argv),
        }
    }
}

/// `execvp` and `execvpe`: a name with a slash is a path, not searched for, and served as
/// `execve` serves it when it is the backend's (a file there that is no program runs by
/// `/bin/sh`, as libc runs one of the kernel's); a name without one is searched for here
/// when a directory of `PATH` is the backend's (`search.rs`), else by libc.
pub unsafe fn execvp<B: Backend>(file: *const c_char, argv: Argv) -> c_int {
    let libc_s =
        || exec_of::<B>(Target::Searched(file), || forward!(execvp(file, argv): fn(*const c_char, Argv) -> c_int));
    // SAFETY: execvp's contract; the process's environment, as libc passes it.
    unsafe { exec_p::<B>(file, argv, environ, libc_s) }
}

pub unsafe fn execvpe<B: Backend>(file: *const c_char, argv: Argv, envp: Argv) -> c_int {
    let libc_s = || {
        exec_of::<B>(
            Target::Searched(file),
            || forward!(execvpe(file, argv, envp): fn(*const c_char, Argv, Argv) -> c_int),
        )
    };
    // SAFETY: execvpe's contract.
    unsafe { exec_p::<B>(file, argv, envp, libc_s) }
}

/// [`execvp`] and [`execvpe`] (`libc_s`: libc's own call).
///
/// # Safety
/// execvpe's contract.
unsafe fn exec_p<B: Backend>(file: *const c_char, argv: Argv, envp: Argv, libc_s: impl FnOnce() -> c_int) -> c_int {
    // SAFETY: file is null or NUL-terminated (exec's contract).
    let Some(f) = (unsafe { c_str(file) }).filter(|f| !f.is_empty()) else { return libc_s() };
    if !f.to_bytes().contains(&b'/') {
        // SAFETY: the caller's contract.
        return unsafe { super::search::exec_searched::<B>(f, argv, envp) }.unwrap_or_else(libc_s);
    }
    if !super::serves::<B>(f) {
        // A program of the kernel's: a loader or libraries of the backend's may still be its.
        // SAFETY: the caller's contract.
        return unsafe { exec_served_or::<B>(file, argv, envp, libc_s) };
    }
    // SAFETY: the caller's contract.
    unsafe {
        exec_served_or::<B>(file, argv, envp, libc_s);
        if crate::errno() == libc::ENOEXEC {
            super::search::exec_by_shell::<B>(f, argv, envp);
        }
    }
    -1
}

pub unsafe fn fexecve<B: Backend>(fd: c_int, argv: Argv, envp: Argv) -> c_int {
    exec_with::<B>(|| forward!(fexecve(fd, argv, envp): fn(c_int, Argv, Argv) -> c_int))
}

pub(super) type SpawnActions = *const libc::posix_spawn_file_actions_t;
pub(super) type SpawnAttr = *const libc::posix_spawnattr_t;

/// Runs `spawn` (the real call, which returns an error number and stores the child's pid
/// where it is given) between the backend's preparation and its completion, which is told
/// the child's pid: the caller's `pid`, or one of ours where the caller passed none.
fn spawn_with<B: Backend>(pid: *mut libc::pid_t, spawn: impl FnOnce(*mut libc::pid_t) -> c_int) -> c_int {
    let mut own: libc::pid_t = 0;
    let at = if pid.is_null() { &raw mut own } else { pid };
    // SAFETY: `at` is the caller's pid (posix_spawn's contract: valid when not null) or
    // ours, which the spawn filled when it returned 0.
    spawned_by::<B, c_int>(ChildKnown::Pid, || spawn(at), |&r| (r == 0).then(|| Child::Pid(unsafe { *at })))
}

/// [`spawn_with`] for a spawn with `actions`, whose change of directory may be the
/// backend's (`spawn_dir.rs`).
fn spawn_with_actions<B: Backend>(
    actions: SpawnActions,
    pid: *mut libc::pid_t,
    spawn: impl FnOnce(*mut libc::pid_t) -> c_int,
) -> c_int {
    let dir = super::spawn_dir::dir_of(actions);
    if dir.is_some() {
        crate::guarded(|| B::spawn_in(dir.as_deref()));
    }
    let r = spawn_with::<B>(pid, spawn);
    if dir.is_some() {
        crate::guarded(|| B::spawn_in(None));
    }
    r
}

/// Runs `spawn` (a real call that starts a child program: posix_spawn, system, popen)
/// between the backend's preparation and its completion (`known`: what the call tells of
/// its child; `made`: whether it made a child, and what is known of it).
fn spawned_by<B: Backend, T>(
    known: ChildKnown,
    spawn: impl FnOnce() -> T,
    made: impl FnOnce(&T) -> Option<Child>,
) -> T {
    let prepared = crate::guarded(|| B::before_spawn(known)).flatten();
    let r = spawn();
    let e = crate::errno();
    match made(&r) {
        Some(child) => crate::guarded(|| B::after_spawn(prepared, child)),
        None => crate::guarded(|| B::spawn_failed(prepared)),
    };
    crate::set_errno(e);
    r
}

/// `system`: glibc starts `sh -c` with its own spawn, which no preload sees; the backend
/// prepares the child's inheritance around it as for `posix_spawn`.
pub unsafe fn system<B: Backend>(command: *const c_char) -> c_int {
    spawned_by::<B, c_int>(
        ChildKnown::Ended,
        || forward!(system(command): fn(*const c_char) -> c_int),
        |&r| (r != -1).then_some(Child::Ended),
    )
}

/// `wordexp`: glibc runs each command substitution (`$(cmd)`, unless `WRDE_NOCMD`) in a
/// `sh -c` it starts with its own spawn, and returns once each has ended: prepared as for
/// `system` (before 2026-12-07 that shell ran in the kernel's working directory, not the
/// image's, and a descriptor of the image it inherited was a placeholder: `$(cat f)` gave
/// nothing). Each shell adopts what it finds; the ticket is taken back when the call returns.
pub unsafe fn wordexp<B: Backend>(words: *const c_char, we: *mut libc::c_void, flags: c_int) -> c_int {
    let call = || forward!(wordexp(words, we, flags): fn(*const c_char, *mut libc::c_void, c_int) -> c_int);
    if flags & WRDE_NOCMD != 0 {
        return call();
    }
    spawned_by::<B, c_int>(ChildKnown::Ended, call, |_| Some(Child::Ended))
}

/// glibc's `<wordexp.h>`: no command substitution.
const WRDE_NOCMD: c_int = 1 << 2;

/// `popen`: as `system`, but the call tells neither its child's pid nor its end. glibc
/// starts the child from this thread, so it is the one pid that is new among this thread's
/// children when the call returns (`/proc/thread-self/children`, which lists a child until
/// it is reaped); none is new when another thread reaped it already (it has ended).
pub unsafe fn popen<B: Backend>(command: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    let before = crate::guarded(children_of_thread).flatten();
    let known = if before.is_some() { ChildKnown::Pid } else { ChildKnown::Nothing };
    spawned_by::<B, *mut libc::FILE>(
        known,
        || forward!(popen(command, mode): fn(*const c_char, *const c_char) -> *mut libc::FILE),
        |f| (!f.is_null()).then(|| new_child(before.as_deref(), crate::guarded(children_of_thread).flatten())),
    )
}

/// The children of this thread, or None when they cannot be read (a kernel without
/// `CONFIG_PROC_CHILDREN`, no /proc, no descriptor left).
fn children_of_thread() -> Option<Vec<libc::pid_t>> {
    let list = std::fs::read_to_string("/proc/thread-self/children").ok()?;
    list.split_ascii_whitespace().map(|p| p.parse().ok()).collect()
}

/// What is known of the one child a call made, from this thread's children before and
/// after it.
fn new_child(before: Option<&[libc::pid_t]>, after: Option<Vec<libc::pid_t>>) -> Child {
    let (Some(before), Some(after)) = (before, after) else { return Child::Unknown };
    let mut new = after.into_iter().filter(|p| !before.contains(p));
    match (new.next(), new.next()) {
        (Some(pid), None) => Child::Pid(pid),
        (None, _) => Child::Ended,
        // A signal handler forked meanwhile: which is the call's cannot be told.
        (Some(_), Some(_)) => Child::Unknown,
    }
}

/// A spawn of `path` when it is a program file the backend serves: the child execs its
/// copy by its /proc path (the descriptor is open until that exec) or its script's
/// interpreter; else `otherwise`, the caller's own spawn.
///
/// # Safety
/// posix_spawn's contract for every argument.
unsafe fn spawn_served_or<B: Backend>(
    pid: *mut libc::pid_t,
    path: *const c_char,
    actions: SpawnActions,
    attr: SpawnAttr,
    argv: Argv,
    envp: Argv,
    otherwise: impl FnOnce() -> c_int,
) -> c_int {
    let mut run = |what: Run<'_>, argv: Argv| {
        let by_fd;
        let (p, envp) = match what {
            Run::Path(p, env) => (p.as_ptr(), env.unwrap_or(envp)),
            Run::Copy(fd, env) => {
                by_fd = fd_path(fd);
                (by_fd.as_ptr(), env.unwrap_or(envp))
            }
        };
        spawn_with_actions::<B>(
            actions,
            pid,
            |at| forward!(posix_spawn(at, p, actions, attr, argv, envp): fn(*mut libc::pid_t, *const c_char, SpawnActions, SpawnAttr, Argv, Argv) -> c_int),
        )
    };
    // SAFETY: the caller's contract (exec's for path and argv).
    match unsafe { run_served::<B>(path, argv, envp, Start::Spawn, &mut run) } {
        Some(Ok(r)) | Some(Err(r)) => r,
        None => otherwise(),
    }
}

pub unsafe fn posix_spawn<B: Backend>(
    pid: *mut libc::pid_t,
    path: *const c_char,
    actions: SpawnActions,
    attr: SpawnAttr,
    argv: Argv,
    envp: Argv,
) -> c_int {
    let libc_s = || {
        spawn_with_actions::<B>(
            actions,
            pid,
            |at| forward!(posix_spawn(at, path, actions, attr, argv, envp): fn(*mut libc::pid_t, *const c_char, SpawnActions, SpawnAttr, Argv, Argv) -> c_int),
        )
    };
    // SAFETY: posix_spawn's contract.
    unsafe { spawn_served_or::<B>(pid, path, actions, attr, argv, envp, libc_s) }
}

/// `posix_spawnp`: a name with a slash is a path, served as `posix_spawn` serves it when
/// it is the backend's; a name without one is searched for here when a directory of
/// `PATH` is the backend's (`search.rs`), else by libc.
pub unsafe fn posix_spawnp<B: Backend>(
    pid: *mut libc::pid_t,
    file: *const c_char,
    actions: SpawnActions,
    attr: SpawnAttr,
    argv: Argv,
    envp: Argv,
) -> c_int {
    let libc_s = || {
        spawn_with_actions::<B>(
            actions,
            pid,
            |at| forward!(posix_spawnp(at, file, actions, attr, argv, envp): fn(*mut libc::pid_t, *const c_char, SpawnActions, SpawnAttr, Argv, Argv) -> c_int),
        )
    };
    if !is_path(file) {
        // SAFETY: file is null or NUL-terminated (posix_spawnp's contract).
        let Some(f) = (unsafe { c_str(file) }).filter(|f| !f.is_empty()) else { return libc_s() };
        // SAFETY: posix_spawnp's contract.
        return unsafe { super::search::spawn_searched::<B>(pid, f, actions, attr, argv, envp) }.unwrap_or_else(libc_s);
    }
    // SAFETY: posix_spawnp's contract.
    unsafe { spawn_served_or::<B>(pid, file, actions, attr, argv, envp, libc_s) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_popen_child_is_the_one_new_child_of_the_thread() {
        let before = children_of_thread().expect("this kernel lists a thread's children");
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let after = children_of_thread();
        let found = new_child(Some(&before), after);
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(found, Child::Pid(child.id() as libc::pid_t));
        // Reaped: no new child, so it has ended.
        assert_eq!(new_child(Some(&before), children_of_thread()), Child::Ended);
        assert_eq!(new_child(Some(&[1]), Some(vec![1, 7, 9])), Child::Unknown);
        assert_eq!(new_child(None, Some(vec![7])), Child::Unknown);
    }
}
