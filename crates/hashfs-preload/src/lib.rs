//! `libhashfs_preload.so`: with `LD_PRELOAD=libhashfs_preload.so HASHFS_IMAGE=IMG
//! HASHFS_MOUNT=/prefix`, paths under the prefix are served inside the process by the
//! HashFS library (no system call on the data path); everything else goes to libc.
//!
//! Descriptors: each HashFS file holds a real kernel descriptor (an `O_PATH` descriptor of
//! /dev/null), whose number is the one the program sees, so numbers never collide with the
//! kernel's, and any call the shim does not intercept fails with EBADF in the kernel
//! instead of acting on /dev/null. A bitmap of those numbers keeps the check on every read
//! and write cheap. docs/shim.md lists what is served and what is refused.
//!
//! Reentrancy: the shim's own calls into libc (the library opening and mapping the image,
//! Rust's std) pass straight through, by a per-thread guard.
//!
//! Many processes share an image (the library's shared mount, `FileSystem::mount_shared`;
//! an image whose mapping is not shared yet is held by one process, and a second gets an
//! error naming the owner's lock). A child created by fork() joins as a participant of its
//! own with its parent's descriptors (`shim/fork.rs`); a descriptor without close-on-exec
//! reaches the program an exec starts (`shim/exec.rs`). Redirected standard descriptors
//! are pipes pumped into their files (`shim/pump.rs`). The shim's own descriptors sit at
//! high numbers, out of the way of the program's dup2.
//!
//! Record locks (fcntl F_SETLK & co.) and flock exclude other processes through the
//! kernel's lock manager, on ranges of the image file (`shim/locks.rs`).
//!
//! The exported libc functions are `hashfs-interpose`'s (written once, shared with the
//! stacked shim); this crate is the backend behind them, [`Preload`]. Modules by concern:
//! `shim.rs` holds the shared state, `shim/` one module per family of calls, each
//! implementing that family's trait (`io`: Data; `fd`: Descriptors; `stat`: Attributes;
//! `names`: Names; `meta`: Metadata; `copy`: Copies; `mmap`: Mappings; `xattr`: Xattrs;
//! `dir`: Streams, with `stdio`; `cwd`: Process, with `statfs`, `socket`, `ioctl`, `fork`,
//! `exec`), and `path` (which paths are ours), `vector` (the vector calls' work), `pump`.

mod shim;

pub use shim::*;
