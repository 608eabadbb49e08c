//! A writable shared mapping that the shim could not serve in full fails at `mmap` with
//! ENOMEM (`shim/mmap/budget.rs`), never with a signal at a later store: its holes get
//! blocks when first written, from the fault thread, where a shortage of kernel mappings
//! has no call to fail. Before, such a mapping was made, and the store that needed one
//! mapping more than the budget died with SIGSEGV.

mod common;
use common::Bounded;

use common::{image, p};

/// argv: path, bytes to map. Makes a sparse file of that size, maps it shared and
/// writable, stores into every page, and reads each back through `pread`.
const SCRIPT: &str = r#"
import ctypes, mmap, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
n = int(sys.argv[2])
fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR, 0o644)
os.ftruncate(fd, n)
a = libc.mmap(None, n, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
if a in (None, ctypes.c_void_p(-1).value):
    print("mmap", os.strerror(ctypes.get_errno()))
    sys.exit(0)
for page in range(n // 4096):
    ctypes.memmove(a + page * 4096 + 7, b"%d" % page, len(b"%d" % page))
assert all(os.pread(fd, len(b"%d" % pg), pg * 4096 + 7) == b"%d" % pg for pg in range(n // 4096))
print("stored", n // 4096)
"#;

#[test]
fn a_writable_mapping_past_the_budget_fails_at_mmap_not_at_a_store() {
    // HashFS's placement: every block a kernel mapping of its own. A budget of 300.
    let img = image();
    let run = |name: &str, bytes: u64| {
        let o = img
            .cmd("python3")
            .args(["-c", SCRIPT, &p(name), &bytes.to_string()])
            .env("HASHFS_MAP_BUDGET", "300")
            .output_bounded();
        let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert_eq!(o.status.code(), Some(0), "no signal: {out}{err}");
        (out.trim().to_string(), err.into_owned())
    };
    // 256 pages: at most 257 mappings, served whole.
    assert_eq!(run("/small", 1 << 20).0, "stored 256");
    // 512 pages: refused at mmap, with the remedy named.
    let (out, err) = run("/large", 2 << 20);
    assert_eq!(out, "mmap Cannot allocate memory");
    assert!(err.contains("could need") && err.contains("--placement regions"), "{err}");
    img.fsck_clean();
}
