//! A shared mapping of a HashFS file through the shim is filled at `mmap` where its blocks
//! lie apart (`shim/mmap.rs`: runs shorter than the kernel's fault-around are mapped with
//! `MAP_POPULATE`, else every page of them would fault on its own): right after `mmap`,
//! before a byte is read, every page of the mapping is resident (`Rss` in
//! `/proc/self/smaps`), and the bytes are the file's.

mod common;

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
