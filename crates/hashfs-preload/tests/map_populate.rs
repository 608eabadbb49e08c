//! A shared mapping of a HashFS file through the shim is filled at `mmap` where its blocks
//! lie apart (`shim/mmap.rs`: runs shorter than the kernel's fault-around are mapped with
//! `MAP_POPULATE`, else every page of them would fault on its own): right after `mmap`,
//! before a byte is read, every page of the mapping is resident (`Rss` in
//! `/proc/self/smaps`), and the bytes are the file's. Such a mapping is placed into a hole
//! of the address space (`shim/mmap/place.rs`), which other threads' `mmap` calls may take
//! before it is filled: their pages stay theirs.

mod common;
use common::Bounded;

use common::{image, p};

const SCRIPT: &str = r#"
import ctypes, mmap, os, sys
path, n = sys.argv[1], 16
data = bytes((i * 7 + i // 4096) % 251 for i in range(n * 4096))
with open(path, "wb") as f:
    f.write(data)
fd = os.open(path, os.O_RDWR)
m = mmap.mmap(fd, n * 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
start = ctypes.addressof(ctypes.c_char.from_buffer(m))
end = start + n * 4096
rss, lo, hi = 0, 0, 0
for line in open("/proc/self/smaps"):
    head = line.split()[0]
    if "-" in head and not head.endswith(":"):
        lo, hi = (int(x, 16) for x in head.split("-"))
    elif head == "Rss:" and lo < end and hi > start:
        rss += int(line.split()[1])
print("rss_kib", rss)
print("data_ok", m[:] == data)
"#;

#[test]
fn a_scattered_file_is_resident_right_after_mmap() {
    let img = image();
    let out = img.ok("python3", &["-c", SCRIPT, &p("/scattered")]);
    img.fsck_clean();
    assert!(out.contains("data_ok True"), "{out}");
    assert!(out.contains("rss_kib 64"), "every page of the 64 KiB mapping resident before it is read: {out}");
}

const RACE: &str = r#"
import ctypes, mmap, os, random, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
RW, ANON = mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
path, n, rounds = sys.argv[1], 256, 300
data = bytes((i * 7 + i // 4096) % 251 for i in range(n * 4096))
with open(path, "wb") as f:
    f.write(data)
stop, bad, made = threading.Event(), [], [0]

def intruder(tag):
    # Anonymous mappings of its own, each filled with its tag and checked before it goes.
    live, rng = [], random.Random(tag)
    while not stop.is_set() or live:
        if live and (stop.is_set() or len(live) > 32 or rng.random() < 0.4):
            p, ln = live.pop(rng.randrange(len(live)))
            if ctypes.string_at(p, ln) != bytes([tag]) * ln:
                bad.append(("intruder", tag, hex(p)))
            libc.munmap(p, ln)
            continue
        ln = 4096 * rng.choice((1, 1, 2, 16, 64))
        p = libc.mmap(None, ln, RW, ANON, -1, 0)
        ctypes.memset(p, tag, ln)
        live.append((p, ln))
        made[0] += 1

threads = [threading.Thread(target=intruder, args=(t,)) for t in (0x5A, 0xA5)]
for t in threads:
    t.start()
fd = os.open(path, os.O_RDONLY)
for r in range(rounds):
    m = mmap.mmap(fd, n * 4096, mmap.MAP_SHARED, mmap.PROT_READ)
    if m[:] != data:
        bad.append(("file", r))
    m.close()
stop.set()
for t in threads:
    t.join()
print("intruder_maps", made[0])
print("bad", len(bad), bad[:3])
"#;

/// Two threads map, fill, check and unmap anonymous memory while the main thread maps a
/// scattered file 300 times (one kernel mapping per page, placed into a hole): the file's
/// bytes are right every time and no thread's pages are replaced. With the pieces placed
/// by `MAP_FIXED` instead (they would replace whatever another thread mapped into the
/// hole), the intruders' pages are taken and the process crashes, three runs of three.
#[test]
fn a_mapping_placed_into_a_hole_leaves_other_threads_pages_alone() {
    let img = image();
    // HASHFS_MAP_COPY_MAX=0: the file's own pages, not a copy (shim/mmap/copy.rs).
    let o = img.cmd("python3").env("HASHFS_MAP_COPY_MAX", "0").args(["-c", RACE, &p("/scattered")]).output_bounded();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}{}", String::from_utf8_lossy(&o.stderr));
    img.fsck_clean();
    assert!(out.contains("bad 0 []"), "{out}");
    assert!(!out.contains("intruder_maps 0\n"), "the intruders ran: {out}");
}
