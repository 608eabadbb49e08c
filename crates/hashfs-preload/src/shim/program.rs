//! Executing a program file in the image (`hashfs_interpose::Process::exec_image`): the
//! kernel cannot read it, so an exec gets a copy of it in a memfd, run by descriptor, or,
//! for a script, its `#!` interpreter, which reads the script through the shim (the
//! interposer rewrites the arguments as the kernel would). Permission is checked as the
//! kernel checks it (an execute bit for the effective ids; root needs one of the three).
//! A copy keeps no set-user-ID or set-group-ID bit: it runs with the caller's ids. A
//! program that needs libraries in the image at start gets them beside its copy
//! (`library::for_program`, `hashfs_interpose::entry::linked`).

use super::*;
use hashfs_interpose::entry::program::ExecImage;
use hashfs_interpose::{Errno, Served};

/// The longest `#!` line read, as the kernel's (`BINPRM_BUF_SIZE`).
const SHEBANG_MAX: usize = 256;

pub(super) fn exec_image(path: &CStr, library_path: Option<&CStr>) -> Served<ExecImage> {
    let p = fs_path_of(path)?;
    Some(image_of(&p, library_path).map_err(Errno))
}

fn image_of(p: &Path, library_path: Option<&CStr>) -> Result<ExecImage, c_int> {
    let fs = shim().fs()?;
    // The name resolved and the program opened under one hold of the image (as an open's:
    // `fd.rs`), so that another process's rename of a new build over it cannot free the
    // inode between the two, nor give its number to another file.
    let opened = following_out(|| {
        super::path::holding(fs, super::path::Hold::Lock, || {
            let ino = fs.resolve(p)?;
            let md = fs.peek_attr(ino)?;
            if md.file_type != FileType::Regular || !permitted(&md, libc::X_OK) {
                return Ok(Err(libc::EACCES));
            }
            Ok(Ok((md, fs.open_ino(ino, Access { read: true, write: false, append: false })?)))
        })
    });
    let (md, file) = match opened {
        // A link out of the image (a virtual environment's python): the kernel runs what
        // it leads to.
        Err(Error::LinkOutside(out)) => {
            return CString::new(out).map(ExecImage::Elsewhere).map_err(|_| libc::EINVAL);
        }
        r => r.map_err(|e| e.errno())??,
    };
    let mut head = [0u8; SHEBANG_MAX];
    let n = file.read_at(0, &mut head).map_err(|e| e.errno())?;
    if let Some(line) = head[..n].strip_prefix(b"#!") {
        return script(line, n < SHEBANG_MAX);
    }
    let fd = memfd_copy(&file, p)?;
    // The libraries in the image it needs at start, if any (`shim/library.rs`).
    match super::library::for_program(fs, p, fd, md.size, library_path.map(CStr::to_bytes)) {
        Ok(None) => Ok(ExecImage::Copy(fd)),
        Ok(Some(libs)) => Ok(ExecImage::Linked(fd, libs)),
        Err(e) => {
            // SAFETY: our own descriptor.
            unsafe { libc::close(fd) };
            Err(e)
        }
    }
}

/// A script's interpreter and its argument, from the bytes after `#!`: up to the line's
/// end (or the file's, `whole`: the file was shorter than the bytes read), blanks around;
/// the interpreter up to the first blank, the rest one argument.
fn script(line: &[u8], whole: bool) -> Result<ExecImage, c_int> {
    let end = match line.iter().position(|&c| c == b'\n') {
        Some(end) => end,
        None if whole => line.len(),
        None => return Err(libc::ENOEXEC),
    };
    let blank = |c: &u8| *c == b' ' || *c == b'\t';
    let line = &line[..end];
    let start = line.iter().position(|c| !blank(c)).ok_or(libc::ENOEXEC)?;
    let line = &line[start..];
    let (interp, rest) = match line.iter().position(blank) {
        Some(i) => (&line[..i], &line[i..]),
        None => (line, &b""[..]),
    };
    let rest = match (rest.iter().position(|c| !blank(c)), rest.iter().rposition(|c| !blank(c))) {
        (Some(a), Some(b)) => &rest[a..=b],
        _ => &b""[..],
    };
    let interpreter = CString::new(interp).map_err(|_| libc::ENOEXEC)?;
    let arg = if rest.is_empty() { None } else { Some(CString::new(rest).map_err(|_| libc::ENOEXEC)?) };
    Ok(ExecImage::Script { interpreter, arg })
}

/// A close-on-exec memfd holding `file`'s bytes, named "hashfs:" and the last name of `p`
/// (a program's copy here, a library's in `library.rs`).
pub(super) fn memfd_copy(file: &File<MmapDevice>, p: &Path) -> Result<c_int, c_int> {
    let name = p.file_name().map(|n| n.as_bytes()).unwrap_or(b"program");
    let name = CString::new([b"hashfs:", name].concat()).map_err(|_| libc::EINVAL)?;
    // SAFETY: a NUL-terminated name; the descriptor is ours.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(hashfs_interpose::errno());
    }
    let fail = |e: c_int| {
        // SAFETY: our own descriptor.
        unsafe { libc::close(fd) };
        Err(e)
    };
    let mut buf = vec![0u8; 1 << 20];
    let mut off = 0u64;
    loop {
        let n = match file.read_at(off, &mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => return fail(e.errno()),
        };
        let mut done = 0;
        while done < n {
            // SAFETY: writes from our buffer to our descriptor (a shim's own call: the
            // guard passes it to the kernel).
            let w = unsafe { libc::write(fd, buf[done..n].as_ptr().cast(), n - done) };
            if w < 0 {
                return fail(hashfs_interpose::errno());
            }
            done += w as usize;
        }
        off += n as u64;
    }
    Ok(fd)
}
