//! Bytes past EOF read as zeros through every way in (invariant F2, `fs/eof_tail.rs`).
//! Before, a shrink left the rest of the new last block as it was: through the shim, 16 KiB
//! of 0xAA truncated to 5,000 bytes and mapped showed 3,192 bytes of 0xAA past EOF (on
//! every mapping and write mode), where Linux shows zeros; and fsx-style random operations
//! with mapped reads and writes failed with "non-zero data past EOF".

mod common;
use common::Bounded;

use common::{image_in, p, PREFIX};
use hashfs::{FormatOptions, MappingKind, WriteMode};

/// The issue's case: write, shrink, map the file's first 8 KiB (shared, writable and
/// read-only), then the same after a 10-byte append.
const SHRINK_THEN_MAP: &str = r#"
import ctypes, mmap, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
os.write(fd, b"\xaa" * 16384)
os.ftruncate(fd, 5000)
def past_eof(size):
    out = []
    for prot in (mmap.PROT_READ | mmap.PROT_WRITE, mmap.PROT_READ):
        a = libc.mmap(None, 8192, prot, mmap.MAP_SHARED, fd, 0)
        assert a not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
        b = ctypes.string_at(a, 8192)
        assert b[:size] == b"\xaa" * 5000 + b"\xbb" * (size - 5000), "the file's own bytes"
        out.append(sum(1 for x in b[size:] if x))
        libc.munmap(a, 8192)
    return out
print("after shrink", *past_eof(5000))
os.lseek(fd, 0, os.SEEK_END)
os.write(fd, b"\xbb" * 10)
print("after append", *past_eof(5010))
"#;

fn opts(mapping: MappingKind, write_mode: WriteMode) -> FormatOptions {
    FormatOptions { mapping, write_mode, ..FormatOptions::default() }
}

#[test]
fn a_shrunk_files_old_bytes_are_not_readable_through_a_mapping() {
    let cases = [
        (MappingKind::HashFs, WriteMode::Relaxed),
        (MappingKind::HashFs, WriteMode::Strict),
        (MappingKind::Ctfs, WriteMode::Relaxed),
        (MappingKind::Ctfs, WriteMode::Strict),
        (MappingKind::ExtentTree, WriteMode::Relaxed),
    ];
    for (mapping, mode) in cases {
        // With copies off too: a read-only mapping of the blocks themselves.
        for copy_max in ["8M", "0"] {
            let img = image_in(&std::env::temp_dir(), 64 << 20, &opts(mapping, mode));
            let o = img
                .cmd("python3")
                .args(["-c", SHRINK_THEN_MAP, &p("/f")])
                .env("HASHFS_MAP_COPY_MAX", copy_max)
                .output_bounded();
            let out = String::from_utf8_lossy(&o.stdout);
            assert!(o.status.success(), "{mapping:?} {mode:?}: {out}{}", String::from_utf8_lossy(&o.stderr));
            assert_eq!(
                out.lines().collect::<Vec<_>>(),
                ["after shrink 0 0", "after append 0 0"],
                "{mapping:?} {mode:?}, HASHFS_MAP_COPY_MAX={copy_max}: non-zero bytes past EOF (writable, read-only)"
            );
            img.fsck_clean();
        }
    }
}

/// fsx-style random operations (tests/scripts/fsx.py: writes, mapped writes, reads, mapped
/// reads with fsx's check of the bytes past EOF, truncates, fallocate, punched and zeroed
/// ranges) against a model, on every mapping, with the shim's copies of read-only mappings
/// on and off, and in strict mode. CI runs `HASHFS_FSX_OPS` operations (10,000 by default)
/// of seed 1; the full run is `HASHFS_FSX_OPS=100000 HASHFS_FSX_SEEDS=4`.
#[test]
fn fsx_random_operations_with_mappings_on_every_mapping() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/scripts/fsx.py");
    let ops: u64 = std::env::var("HASHFS_FSX_OPS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let seeds: u64 = std::env::var("HASHFS_FSX_SEEDS").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let mut cases: Vec<(MappingKind, WriteMode, &str)> = MappingKind::ALL
        .iter()
        .enumerate()
        .map(|(i, &m)| (m, WriteMode::Relaxed, if i % 2 == 0 { "8M" } else { "0" }))
        .collect();
    cases.push((MappingKind::HashFs, WriteMode::Strict, "0"));
    cases.push((MappingKind::Ctfs, WriteMode::Strict, "8M"));
    for seed in 1..=seeds {
        for &(mapping, mode, copy_max) in &cases {
            let img = image_in(&std::env::temp_dir(), 64 << 20, &opts(mapping, mode));
            let o = img
                .cmd("python3")
                .args([script, &format!("{PREFIX}/fsx"), &seed.to_string(), &ops.to_string()])
                .env("HASHFS_MAP_COPY_MAX", copy_max)
                .output_bounded();
            let out = String::from_utf8_lossy(&o.stdout);
            assert!(
                o.status.success() && out.starts_with(&format!("ok {ops} ")),
                "{mapping:?} {mode:?} copies {copy_max} seed {seed} ({}): {out}{}",
                o.status,
                String::from_utf8_lossy(&o.stderr)
            );
            img.fsck_clean();
        }
    }
}
