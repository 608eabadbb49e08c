//! One error type for the whole library, with one mapping to errno for every front end.

#![forbid(unsafe_code)]

use std::io;

/// Everything that can go wrong. "The image is corrupt", "the host failed" and the
/// ordinary POSIX outcomes stay apart.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("image is corrupt: {0}")]
    Corrupt(String),
    #[error("host I/O error: {0}")]
    Io(#[from] io::Error),
    #[error("invalid parameter: {0}")]
    InvalidParameter(String),
    #[error("no such file or directory")]
    NotFound,
    #[error("file exists")]
    Exists,
    #[error("not a directory")]
    NotDir,
    #[error("is a directory")]
    IsDir,
    #[error("directory not empty")]
    NotEmpty,
    #[error("file name too long (the limit is 255 bytes)")]
    NameTooLong,
    #[error("too many levels of symbolic links")]
    Loop,
    #[error("invalid argument: {0}")]
    Invalid(&'static str),
    #[error("no space left on device")]
    NoSpace,
    #[error("file too large (the limit is 16 TiB)")]
    FileTooBig,
    #[error("too many links")]
    TooManyLinks,
    #[error("permission denied")]
    Access,
    #[error("operation not permitted")]
    NotPermitted,
    #[error("bad file descriptor")]
    BadDescriptor,
    #[error("device or resource busy")]
    Busy,
    #[error("journal full: a transaction needs more than {0} entries")]
    JournalFull(u64),
    #[error("stale inode {0}: it has been freed")]
    Stale(u32),
    #[error("operation not supported: {0}")]
    Unsupported(&'static str),
    #[error("no such attribute")]
    NoData,
    #[error("name or buffer out of range")]
    Range,
    #[error("attribute value too large")]
    TooBig,
    #[error("too many files open across the processes sharing the image")]
    TooManyOpen,
    /// Every slot of the shared region's participant table is taken
    /// (`share::MAX_PARTICIPANTS`).
    #[error("too many processes use the image at once (256 at most)")]
    TooManyProcesses,
    #[error("read-only file system: this process may only read the image")]
    ReadOnly,
    /// The path outside that a symbolic link led to (its target, then the rest of the path).
    #[error("a symbolic link leads out of the file system, to {}", String::from_utf8_lossy(.0))]
    LinkOutside(Vec<u8>),
}

pub type Result<T> = std::result::Result<T, Error>;

const _: () = assert!(crate::share::MAX_PARTICIPANTS == 256, "Error::TooManyProcesses says 256");

/// EUCLEAN ("structure needs cleaning"), which Linux file systems return for corruption.
pub const EUCLEAN: i32 = 117;

impl Error {
    pub fn corrupt(msg: impl Into<String>) -> Error {
        Error::Corrupt(msg.into())
    }

    /// The errno a POSIX front end returns for this error.
    pub fn errno(&self) -> i32 {
        match self {
            Error::Corrupt(_) => EUCLEAN,
            Error::Io(e) => e.raw_os_error().unwrap_or(match e.kind() {
                // The image's lock held by another process (`MmapDevice::open`).
                io::ErrorKind::ResourceBusy => libc::EBUSY,
                _ => libc::EIO,
            }),
            Error::InvalidParameter(_) | Error::Invalid(_) => libc::EINVAL,
            Error::NotFound => libc::ENOENT,
            Error::Exists => libc::EEXIST,
            Error::NotDir => libc::ENOTDIR,
            Error::IsDir => libc::EISDIR,
            Error::NotEmpty => libc::ENOTEMPTY,
            Error::NameTooLong => libc::ENAMETOOLONG,
            Error::Loop => libc::ELOOP,
            Error::NoSpace => libc::ENOSPC,
            Error::FileTooBig => libc::EFBIG,
            Error::TooManyLinks => libc::EMLINK,
            Error::Access => libc::EACCES,
            Error::NotPermitted => libc::EPERM,
            Error::BadDescriptor => libc::EBADF,
            Error::Busy => libc::EBUSY,
            Error::JournalFull(_) => libc::EIO,
            Error::Stale(_) => libc::ESTALE,
            Error::Unsupported(_) => libc::EOPNOTSUPP,
            Error::NoData => libc::ENODATA,
            Error::Range => libc::ERANGE,
            Error::TooBig => libc::E2BIG,
            Error::TooManyOpen | Error::TooManyProcesses => libc::ENFILE,
            Error::ReadOnly => libc::EROFS,
            Error::LinkOutside(_) => libc::EXDEV,
        }
    }
}

impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        match e {
            Error::Io(inner) => inner,
            other => {
                let errno = other.errno();
                io::Error::new(io::Error::from_raw_os_error(errno).kind(), other)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_mapping() {
        assert_eq!(Error::NotFound.errno(), libc::ENOENT);
        assert_eq!(Error::NoSpace.errno(), libc::ENOSPC);
        assert_eq!(Error::corrupt("x").errno(), EUCLEAN);
        let io: io::Error = Error::NotFound.into();
        assert_eq!(io.kind(), io::ErrorKind::NotFound);
    }
}
