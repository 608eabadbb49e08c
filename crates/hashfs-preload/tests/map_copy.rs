//! Mappings served by a copy when the kernel mappings run short (`shim/mmap/copy.rs`): a
//! scattered file is one kernel mapping per page, and past the shim's budget a read-only
//! shared or a private mapping is one anonymous mapping filled with the file's bytes. The
//! tests set a small budget (`HASHFS_MAP_BUDGET`) and check that such a mapping is one
//! kernel mapping, reads the file, follows every change made through the shim (pwrite,
//! append, growth past its old end, fallocate's zeroing), refuses to become writable, and
//! keeps writable shared mappings of its file away; that a mapping whose file grows past
//! the budget becomes one; and that LevelDB, whose tables are such mappings, runs its
//! workloads when most of them are copies. (LMDB past the budget: `tests/apps.rs`.)

mod common;
use common::Bounded;

use common::{image, p, Image};

/// What every script below starts with: libc's mapping calls through ctypes, the page
/// size, and a count of the kernel mappings (lines of /proc/self/maps) inside a range.
const PRELUDE: &str = r#"
import ctypes, errno, mmap, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
P = 4096

def kernel_maps(start, length):
    count = 0
    for line in open("/proc/self/maps"):
        lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
        count += lo < start + length and hi > start
    return count
"#;

/// A script: [`PRELUDE`], then `body`.
fn script(body: &str) -> String {
    format!("{PRELUDE}{body}")
}

/// Runs [`script`]`(body)` with `args` through the shim on `img`, its environment given
/// `env`; checks that it succeeded and left the image clean, and returns what it printed.
fn run_script(img: &Image, body: &str, env: &[(&str, &str)], args: &[&str]) -> String {
    let o = img.cmd("python3").envs(env.iter().copied()).arg("-c").arg(script(body)).args(args).output_bounded();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{out}{}", String::from_utf8_lossy(&o.stderr));
    img.fsck_clean();
    out
}

const SCRIPT: &str = r#"
R, RW = mmap.PROT_READ, mmap.PROT_READ | mmap.PROT_WRITE
path, n = sys.argv[1], 64
data = bytearray((i * 7 + i // P) % 251 for i in range(n * P))
with open(path, "wb") as f:
    f.write(data)

def mapping(length, prot, flags):
    a = libc.mmap(None, length, prot, flags, fd, 0)
    if a in (None, ctypes.c_void_p(-1).value):
        return None, errno.errorcode.get(ctypes.get_errno())
    return a, None

fd = os.open(path, os.O_RDWR)
# Read-only shared, 70 pages over a 64-page file.
L = 70 * P
m, _ = mapping(L, R, mmap.MAP_SHARED)
print("shared_maps", kernel_maps(m, L))
print("shared_bytes", ctypes.string_at(m, n * P) == bytes(data), ctypes.string_at(m + n * P, 6 * P) == bytes(6 * P))
# A change through the shim is in the mapping at once.
os.pwrite(fd, b"x" * 100, 5000)
data[5000:5100] = b"x" * 100
print("after_pwrite", ctypes.string_at(m, n * P) == bytes(data))
# The file grows past the mapping's old end: the new bytes show, zeros after them.
os.lseek(fd, 0, os.SEEK_END)
os.write(fd, b"y" * (P + 10))
data += b"y" * (P + 10)
print("after_growth", ctypes.string_at(m, len(data)) == bytes(data), ctypes.string_at(m + len(data), L - len(data)) == bytes(L - len(data)))
# A hole punched in a mapped file is zeroed in place.
r = libc.fallocate(fd, 0x02 | 0x01, 3 * P, 2 * P)  # PUNCH_HOLE | KEEP_SIZE
data[3 * P:5 * P] = bytes(2 * P)
print("after_punch", r, ctypes.string_at(m, len(data)) == bytes(data))
# Made writable, its stores would reach the file only if it is the file's pages.
r = libc.mprotect(m, P, RW)
print("mprotect", r, errno.errorcode.get(ctypes.get_errno()) if r else None)
# A writable shared mapping of the file would change it behind a copy.
w, err = mapping(P, RW, mmap.MAP_SHARED)
print("writable_shared", err or "made")
if w:
    libc.munmap(w, P)
# Private: its stores its own.
q, _ = mapping(n * P, RW, mmap.MAP_PRIVATE)
count = kernel_maps(q, n * P)
ctypes.memmove(q, b"zzzz", 4)
print("private_maps", count, ctypes.string_at(q + 4, n * P - 4) == bytes(data[4:n * P]), os.pread(fd, 4, 0) == bytes(data[:4]))
libc.munmap(q, n * P)
libc.munmap(m, L)
# With no copy left, a writable shared mapping is made.
w, err = mapping(2 * P, RW, mmap.MAP_SHARED)
if w:
    ctypes.memmove(w, b"wwww", 4)
    libc.munmap(w, 2 * P)
print("writable_after", err, os.pread(fd, 4, 0) == b"wwww")
"#;

#[test]
fn a_mapping_past_the_budget_is_a_copy_that_follows_the_file() {
    let img = image();
    let out = run_script(&img, SCRIPT, &[("HASHFS_MAP_BUDGET", "8")], &[&p("/scattered")]);
    for want in [
        "shared_maps 1\n",
        "shared_bytes True True\n",
        "after_pwrite True\n",
        "after_growth True True\n",
        "after_punch 0 True\n",
        "mprotect -1 EACCES\n",
        "writable_shared ENOMEM\n",
        "private_maps 1 True True\n",
        "writable_after None True\n",
    ] {
        assert!(out.contains(want), "{want:?} in:\n{out}");
    }
}

const GROW: &str = r#"
path = sys.argv[1]
data = bytearray((i * 13 + i // P) % 251 for i in range(2 * P))
with open(path, "wb") as f:
    f.write(data)
fd = os.open(path, os.O_RDWR)
L = 80 * P
m = libc.mmap(None, L, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)

print("small_ok", ctypes.string_at(m, 2 * P) == bytes(data))
# The file grows by 62 pages (each a block of its own) past the mapping's budget.
more = bytes((i * 3) % 253 for i in range(62 * P))
os.lseek(fd, 0, os.SEEK_END)
os.write(fd, more)
data += more
print("grown", ctypes.string_at(m, len(data)) == bytes(data), ctypes.string_at(m + len(data), L - len(data)) == bytes(L - len(data)))
print("grown_maps", kernel_maps(m, L))
os.pwrite(fd, b"q" * 10, 40 * P)
data[40 * P:40 * P + 10] = b"q" * 10
print("then_pwrite", ctypes.string_at(m, len(data)) == bytes(data))
libc.munmap(m, L)
"#;

/// A read-only shared mapping made under the budget, whose file then grows past it (as
/// LMDB's map does): it becomes a copy, one kernel mapping, that shows the new bytes and
/// follows later writes. (Before, the pages it could not map stayed zeros.)
#[test]
fn a_mapping_that_grows_past_the_budget_becomes_a_copy() {
    let img = image();
    // Made as the file's pages (no copy for scattered blocks): a copy only once it grows.
    let env = [("HASHFS_MAP_BUDGET", "8"), ("HASHFS_MAP_COPY_MAX", "0")];
    let out = run_script(&img, GROW, &env, &[&p("/growing")]);
    for want in ["small_ok True\n", "grown True True\n", "grown_maps 1\n", "then_pwrite True\n"] {
        assert!(out.contains(want), "{want:?} in:\n{out}");
    }
}

/// With copies for scattered blocks turned off (`HASHFS_MAP_COPY_MAX=0`), under the
/// default budget the same read-only mapping is the file's own pages, one kernel mapping
/// per run of blocks (a copy is then only the fallback).
#[test]
fn under_the_budget_a_mapping_is_the_files_pages() {
    let img = image();
    let out = run_script(&img, SCRIPT, &[("HASHFS_MAP_COPY_MAX", "0")], &[&p("/scattered")]);
    assert!(maps_of(&out, "shared_maps") > 1, "the scattered file's pages mapped where they lie: {out}");
    assert!(out.contains("after_pwrite True\n") && out.contains("after_growth True True\n"), "{out}");
    assert!(out.contains("writable_shared made\n"), "{out}");
}

fn maps_of(out: &str, what: &str) -> usize {
    out.lines()
        .find_map(|l| l.strip_prefix(what).and_then(|n| n.trim().split(' ').next()?.parse().ok()))
        .unwrap_or_else(|| panic!("{what} in {out}"))
}

const GIVE_BACK: &str = r#"
path, n = sys.argv[1], 64
data = bytes((i * 11 + i // P) % 241 for i in range(n * P))
with open(path, "wb") as f:
    f.write(data)
fd = os.open(path, os.O_RDWR)

r = libc.mmap(None, n * P, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
print("ro_maps", kernel_maps(r, n * P), ctypes.string_at(r, n * P) == data)
w = libc.mmap(None, n * P, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
print("rw_made", w not in (None, ctypes.c_void_p(-1).value))
print("ro_maps_after", kernel_maps(r, n * P))
ctypes.memmove(w + 3 * P + 7, b"STORED", 6)
print("store_seen", ctypes.string_at(r + 3 * P + 7, 6) == b"STORED", os.pread(fd, 6, 3 * P + 7) == b"STORED")
libc.munmap(w, n * P)
libc.munmap(r, n * P)
"#;

/// By default a small read-only mapping of a file whose blocks lie apart is a copy (one
/// kernel mapping); a writable shared mapping of the same file then turns it back into the
/// file's pages, so that a store through the writable one is seen through it at once.
#[test]
fn a_scattered_read_only_mapping_is_a_copy_until_the_file_is_mapped_writable() {
    let img = image();
    let out = run_script(&img, GIVE_BACK, &[], &[&p("/scattered")]);
    assert!(out.contains("ro_maps 1 True\n"), "a copy, one kernel mapping: {out}");
    assert!(out.contains("rw_made True\n"), "{out}");
    assert!(maps_of(&out, "ro_maps_after") > 1, "the file's pages again: {out}");
    assert!(out.contains("store_seen True True\n"), "{out}");
}

/// LevelDB maps every table it opens (2 MiB, one kernel mapping per page here): with a
/// budget of two tables' pages most of them are copies, and YCSB's workloads A-F read
/// what they wrote. (A database of 3 million records, about 400 MB of tables, needs more
/// mappings than a process has: its load failed with ENOMEM before copies.)
#[test]
fn leveldb_with_most_tables_copies() {
    let img = image();
    let Some(exe) = common::ycsb_driver(&img) else { return };
    let o = img
        .cmd(exe.to_str().unwrap())
        .env("HASHFS_MAP_BUDGET", "1024")
        .args([&p("/leveldb"), "100000", "20000", "ABCDEF"])
        .output_bounded();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}{}", String::from_utf8_lossy(&o.stderr));
    common::assert_ycsb_ok(&out, "ABCDEF");
    img.fsck_clean();
}

const LEDGER: &str = r#"
fa, fb, fc = (os.open(x, os.O_RDWR | os.O_CREAT, 0o644) for x in sys.argv[1:4])
b_first = sys.argv[4] == "b-first"

def map_b():
    m = libc.mmap(None, 64 * P, mmap.PROT_READ, mmap.MAP_SHARED, fb, 0)
    print("b_maps", kernel_maps(m, 64 * P))
    print("b_bytes", ctypes.string_at(m, 64 * P) == b"".join(bytes([k + 1]) * (16 * P) for k in range(4)))
    return m

# a: 200 pages, each a run of its own (appends interleaved with c's).
for i in range(200):
    os.write(fa, bytes([i % 251]) * P)
    os.write(fc, b"c" * P)
# b: 4 runs of 16 pages.
for k in range(4):
    os.write(fb, bytes([k + 1]) * (16 * P))
    os.write(fc, b"c" * P)

def image_maps():
    # Kernel mappings of the image file: the device's, the view's pieces, b's pieces.
    return sum(1 for line in open("/proc/self/maps") if line.rstrip().endswith(os.environ["HASHFS_IMAGE"]))

if b_first:
    m = map_b()
# Reading a takes ctFS's view of the image as many kernel mappings as the budget leaves.
before = image_maps()
print("a_bytes", os.pread(fa, 200 * P, 0) == b"".join(bytes([i % 251]) * P for i in range(200)))
print("view_maps", image_maps() - before)
if not b_first:
    m = map_b()
libc.munmap(m, 64 * P)
"#;

/// On a ctFS image the view of the image (`mapping/ctfs/view.rs`) and the shim's mappings
/// share one budget (`hashfs::pm::vspace::map_budget`): once reading a fragmented file has
/// taken the view nearly all of it, a mapping of a file in four runs, which the budget
/// alone would let the shim map piece by piece, is a copy; once that file is mapped in
/// pieces, the view maps fewer (each taking half of the limit for itself, the two could
/// leave the program none).
#[test]
fn ctfs_view_mappings_count_against_the_shims_budget() {
    let opts = hashfs::FormatOptions { mapping: hashfs::MappingKind::Ctfs, ..hashfs::FormatOptions::default() };
    // A new image each time, so that every file is laid out the same way.
    let run = |budget: &str, order: &str| {
        let img = common::image_in(&std::env::temp_dir(), 64 << 20, &opts);
        // A copy only for want of kernel mappings.
        let env = [("HASHFS_MAP_BUDGET", budget), ("HASHFS_MAP_COPY_MAX", "0")];
        let out = run_script(&img, LEDGER, &env, &[&p("/a"), &p("/b"), &p("/c"), order]);
        assert!(out.contains("a_bytes True\n") && out.contains("b_bytes True\n"), "{out}");
        (maps_of(&out, "b_maps"), maps_of(&out, "view_maps"))
    };
    // With room (a budget the view does not fill), b is its four runs.
    assert_eq!(run("4096", "a-first").0, 4, "b's four runs mapped where they lie");
    // The view has taken the budget: b is one copy.
    assert_eq!(run("16", "a-first").0, 1, "b served by a copy");
    // The other way round: b's four pieces leave the view less than its budget alone would.
    let (b_maps, view_maps) = run("16", "b-first");
    eprintln!("b-first: b {b_maps} kernel mappings, the view {view_maps}");
    assert_eq!(b_maps, 4);
    assert!(view_maps <= 16 - 4, "the view took {view_maps} mappings beside b's 4, budget 16");
}

/// A copy unmapped, or replaced by a MAP_FIXED mapping, while the follower thread refreshes
/// it (`follow.rs`: another process overwrites its file in a loop): its record goes with
/// its pages, under the records' lock, so the thread never writes into pages that are no
/// longer the copy's. The script maps a 4 MiB file (blocks apart: a copy) read-only, then
/// either unmaps it and maps anonymous memory at the same address, or maps anonymous memory
/// over it with MAP_FIXED, and checks that memory stays zeros a moment, for 4 s. Before
/// (bug `unmap-record-after-pages`: munmap dropped the record after the kernel's call, and
/// a MAP_FIXED mapping over one never), the thread wrote the file's bytes into the new
/// anonymous memory, made its pages inaccessible ("could not take a change"), or wrote into
/// pages already unmapped: the process died of SIGSEGV (stop 95's CI, in fsx with copies).
#[test]
fn a_copy_unmapped_while_the_follower_refreshes_it_takes_its_record_with_it() {
    let img = image();
    let body = r#"
import subprocess, time
path, N = sys.argv[1], 4 << 20
with open(path, "wb") as f:
    f.write(b"\xab" * N)
writer = subprocess.Popen([sys.executable, "-c", """
import os, sys, time
fd, k = os.open(sys.argv[1], os.O_WRONLY), 0
while not os.path.exists(sys.argv[1] + ".stop") and os.getppid() == int(sys.argv[2]):
    os.pwrite(fd, b"\\xab" * 4096, (k * 7919 * 4096) % (4 << 20))
    k += 1
    time.sleep(0.0002)
""", path, str(os.getpid())])
fd = os.open(path, os.O_RDONLY)
ZERO, FAILED = bytes(N), ctypes.c_void_p(-1).value
anon = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
rounds = placed = written = 0
end = time.time() + 4
while time.time() < end:
    rounds += 1
    a = libc.mmap(None, N, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    assert a not in (None, FAILED), ctypes.get_errno()
    assert ctypes.string_at(a + N - P, 4) == b"\xab" * 4
    if rounds % 2:
        libc.munmap(a, N)
        q = libc.mmap(a, N, mmap.PROT_READ | mmap.PROT_WRITE, anon | 0x100000, -1, 0)  # MAP_FIXED_NOREPLACE
    else:
        q = libc.mmap(a, N, mmap.PROT_READ | mmap.PROT_WRITE, anon | 0x10, -1, 0)  # MAP_FIXED
    if q in (None, FAILED):
        continue  # another mapping took the address meanwhile
    placed += q == a
    time.sleep(0.0005)
    written += ctypes.string_at(q, N) != ZERO
    libc.munmap(q, N)
open(path + ".stop", "w").close()
writer.wait()
print("placed at the copy's address", placed > rounds // 2, "written by the shim", written)
"#;
    let o = img.cmd("python3").arg("-c").arg(script(body)).arg(p("/f")).output_bounded();
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{} {out}{err}", o.status);
    assert_eq!(out, "placed at the copy's address True written by the shim 0\n", "{err}");
    assert!(err.is_empty(), "{err}");
    img.fsck_clean();
}

/// Another process's side of [`A_FILE_MAPPED_WRITABLE_BY_ANOTHER_PROCESS`]: commands on
/// stdin, an answer a line each; it leaves at EOF (its parent gone).
const READER: &str = r#"
import time
path, n = sys.argv[1], 64
fd = os.open(path, os.O_RDONLY)
r = None
for line in sys.stdin:
    cmd, *arg = line.split()
    if cmd == "map":
        if r:
            libc.munmap(r, n * P)
        r = libc.mmap(None, n * P, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        print(kernel_maps(r, n * P), flush=True)
    elif cmd == "wait_pages":
        end = time.time() + 5
        while kernel_maps(r, n * P) == 1 and time.time() < end:
            time.sleep(0.002)
        print(kernel_maps(r, n * P), flush=True)
    elif cmd == "read":
        print(ctypes.string_at(r + int(arg[0]), 6).decode("latin-1"), flush=True)
"#;

const A_FILE_MAPPED_WRITABLE_BY_ANOTHER_PROCESS: &str = r#"
import subprocess, time
path, n, reader = sys.argv[1], 64, sys.argv[2]
data = bytes((i * 13 + i // P) % 239 for i in range(n * P))
with open(path, "wb") as f:
    f.write(data)
fd = os.open(path, os.O_RDWR)
env = dict(os.environ)
env.pop("HASHFS_MAP_COPY_MAX")  # the reader's small mappings of the scattered file are copies
child = subprocess.Popen([sys.executable, "-c", reader, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True, env=env)
def ask(cmd):
    child.stdin.write(cmd + "\n")
    child.stdin.flush()
    return child.stdout.readline().strip()
R, RW = mmap.PROT_READ, mmap.PROT_READ | mmap.PROT_WRITE
print("reader_copy", ask("map"))
# This process's mapping (the file's pages: no copies here) made writable by mprotect: the
# reader's copy becomes the file's pages, and shows every store through it at once.
w = libc.mmap(None, n * P, R, mmap.MAP_SHARED, fd, 0)
print("mprotect", libc.mprotect(w, n * P, RW))
print("reader_pages", int(ask("wait_pages")) > 1)
ctypes.memmove(w + 3 * P + 7, b"STORE1", 6)
print("reader_reads", ask(f"read {3 * P + 7}"))
# Unmapped here: the reader's next mapping is a copy again.
libc.munmap(w, n * P)
print("copy_again", ask("map"))
# A writable mapping made here first: the reader's next mapping is the file's pages.
w = libc.mmap(None, n * P, RW, mmap.MAP_SHARED, fd, 0)
print("reader_new_pages", int(ask("map")) > 1)
ctypes.memmove(w + 9 * P + 1, b"STORE2", 6)
print("reader_reads", ask(f"read {9 * P + 1}"))
# A forked child keeps the mapping after this process unmapped it: the child marked the
# file under its own name as it joined (before fork returned there), so once it has, this
# process's mark goes at the unmap, and the reader's next mapping is still the file's
# pages. (An unmap before the child joined keeps this process's mark until it has,
# hashfs/src/fs/shared/for_children.rs: tests/shared_fork_closes.rs.)
go_r, go_w = os.pipe()
joined_r, joined_w = os.pipe()
pid = os.fork()
if pid == 0:
    os.write(joined_w, b"j")
    os.read(go_r, 1)
    ctypes.memmove(w + 20 * P + 5, b"STORE3", 6)
    os._exit(0)
os.read(joined_r, 1)
libc.munmap(w, n * P)
print("reader_pages_beside_child", int(ask("map")) > 1)
os.write(go_w, b"x")
os.waitpid(pid, 0)
print("reader_reads", ask(f"read {20 * P + 5}"))
child.stdin.close()
child.wait()
"#;

/// Issue 55, item 4 (one set of bytes for a file mapped shared in two processes): a store
/// through one process's writable shared mapping reaches no call, so another process's
/// mapping of the file must not be a copy. Another process's copy becomes the file's pages
/// when this one maps the file writable (here by mprotect), a mapping made while it does is
/// the file's pages from the start, once it unmaps copies come back, and a forked child's
/// inherited mapping counts as the child's; each store is read at once.
#[test]
fn a_file_mapped_writable_by_another_process_is_never_a_copy_there() {
    let img = image();
    let out = run_script(
        &img,
        A_FILE_MAPPED_WRITABLE_BY_ANOTHER_PROCESS,
        &[("HASHFS_MAP_COPY_MAX", "0")],
        &[&p("/scattered"), &script(READER)],
    );
    assert_eq!(
        out,
        "reader_copy 1\nmprotect 0\nreader_pages True\nreader_reads STORE1\ncopy_again 1\n\
         reader_new_pages True\nreader_reads STORE2\nreader_pages_beside_child True\nreader_reads STORE3\n"
    );
}

/// A copy takes this process's writes through `/proc/self/mem` (`shim/mmap/self_mem.rs`),
/// which keeps its 2 MiB page whole (two `mprotect`s split it), and a forked child opens its
/// own: the descriptor it inherits writes into its parent's memory. Here the parent writes
/// to its copy (opening its descriptor), forks, unmaps the copy and puts zeroed anonymous
/// memory at its address; the child writes to the file, which its own copy shows, and the
/// parent's memory stays zeros.
#[test]
fn a_copy_takes_writes_through_this_processs_own_memory() {
    let img = image();
    let body = r#"
path, N = sys.argv[1], 64 * P
with open(path, "wb") as f:
    f.write(b"a" * N)
fd = os.open(path, os.O_RDWR)
c = libc.mmap(None, N, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
print("copy", kernel_maps(c, N))
os.pwrite(fd, b"p", 5 * P + 3)
print("parent_sees", ctypes.string_at(c + 5 * P + 3, 1).decode(), kernel_maps(c, N))
go_r, go_w = os.pipe()
done_r, done_w = os.pipe()
pid = os.fork()
if pid == 0:
    os.read(go_r, 1)
    os.pwrite(fd, b"CHILD", 9 * P + 1)
    seen = ctypes.string_at(c + 9 * P + 1, 5)
    os.write(done_w, seen)
    os._exit(0)
libc.munmap(c, N)
q = libc.mmap(c, N, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x10, -1, 0)
assert q == c
os.write(go_w, b"x")
print("child_sees", os.read(done_r, 5).decode())
os.waitpid(pid, 0)
print("parent_memory_zero", ctypes.string_at(q, N) == bytes(N))
"#;
    let out = run_script(&img, body, &[], &[&p("/f")]);
    assert_eq!(out, "copy 1\nparent_sees p 1\nchild_sees CHILD\nparent_memory_zero True\n");
}

/// A copy maps none of its file's blocks, so it holds no pin on them: another process may
/// shrink a file this one maps only as a copy (as it could before pins were shared between
/// processes, 2026-12-06), and the copy shows zeros past the new end once its follower read
/// the change (Linux would raise SIGBUS there), never the bytes of a file written after.
#[test]
fn a_file_mapped_here_as_a_copy_may_be_shrunk_by_another_process() {
    let img = image();
    let body = r#"
import subprocess, time
path, other, N = sys.argv[1], sys.argv[2], 64 * P
data = bytes(97 + (i * 5 + i // P) % 26 for i in range(N))  # a-z: no B
with open(path, "wb") as f:
    f.write(data)
fd = os.open(path, os.O_RDONLY)
c = libc.mmap(None, N, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
print("copy", kernel_maps(c, N))
r = subprocess.run([sys.executable, "-c", "import os, sys\nos.truncate(sys.argv[1], 8 * 4096)\n"
                    "open(sys.argv[2], 'wb').write(b'B' * (1 << 20))", path, other])
print("shrunk", r.returncode, os.fstat(fd).st_size)
end = time.time() + 2
while ctypes.string_at(c + 8 * P, N - 8 * P) != bytes(N - 8 * P) and time.time() < end:
    time.sleep(0.002)
s = ctypes.string_at(c, N)
print("zeros_past_end", s[8 * P:] == bytes(N - 8 * P), "head", s[:8 * P] == data[:8 * P], "other_file", b"B" in s)
"#;
    let out = run_script(&img, body, &[], &[&p("/f"), &p("/other")]);
    assert_eq!(out, "copy 1\nshrunk 0 32768\nzeros_past_end True head True other_file False\n");
}
