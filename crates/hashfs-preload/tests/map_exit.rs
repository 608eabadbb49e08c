//! A process that exits with HashFS files still mapped (most programs never unmap before
//! they exit) leaves the image marked clean: the kernel unmaps the pages with the process,
//! and the shim's records of them (open files, pinned blocks) go at exit before the image
//! is shut down. Before, such a process printed "image not marked clean at exit: device or
//! resource busy" and the next one ran recovery.

mod common;

use common::{image, p};

const SCRIPT: &str = r#"
import ctypes, mmap, os, sys
libc = ctypes.CDLL(None)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
with open(sys.argv[1], "wb") as f:
    f.write(b"a" * 3 * 4096)
ro = os.open(sys.argv[1], os.O_RDONLY)
rw = os.open(sys.argv[1], os.O_RDWR)
a = libc.mmap(None, 3 * 4096, mmap.PROT_READ, mmap.MAP_SHARED, ro, 0)
b = libc.mmap(None, 8 * 4096, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, rw, 0)
ctypes.memmove(b, b"b" * 10, 10)
print("mapped", ctypes.string_at(a, 10))
"#;

#[test]
fn exiting_with_mappings_live_leaves_the_image_clean() {
    let img = image();
    let o = img.run("python3", &["-c", SCRIPT, &p("/mapped")]);
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{out}{err}");
    assert!(out.contains("mapped b'bbbbbbbbbb'"), "{out}");
    assert!(!err.contains("not marked clean"), "{err}");
    img.fsck_clean();
}
