//! A process that may only read the image (issue 55, the trust boundary): through the shim
//! it reads the image beside the processes that write it, and every change fails with
//! EROFS; it never changes a byte of the image (`fs/shared/read_only.rs`).

mod common;
use common::{Bounded, BoundedChild};

use common::{image, p, skip};
use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;

/// Each change a shell script tries on the image, refused with EROFS (printed otherwise).
fn refusals() -> String {
    let tries = [
        format!("echo x > {}", p("/d/a")),
        format!("echo x >> {}", p("/d/a")),
        format!("mkdir {}", p("/e")),
        format!("rm {}", p("/d/a")),
        format!("mv {} {}", p("/d/a"), p("/d/b")),
        format!("touch {}", p("/d/new")),
        format!("chmod 600 {}", p("/d/a")),
        format!("ln -s a {}", p("/d/s")),
        format!("truncate -s 0 {}", p("/d/a")),
    ];
    tries
        .iter()
        .map(|c| {
            format!(
                "if err=$(bash -c '{c}' 2>&1); then echo 'not refused: {c}'; else case \"$err\" in *'Read-only file \
                 system'*) ;; *) echo \"wrong error: {c}: $err\";; esac; fi; "
            )
        })
        .collect()
}

/// A read-only process (told so by `HASHFS_READ_ONLY=1`, or a user that may only read the
/// image file) runs a shell script of readers: `cat`, a pipe, a descriptor passed to the
/// next program across exec, `tar c | tar t`, `cp -a` out of the image; and every change is
/// EROFS. The image's bytes are the same after.
#[test]
fn a_process_that_may_only_read_the_image_reads_it_and_changes_nothing() {
    let img = image();
    img.ok("bash", &["-c", &format!("mkdir {d}; seq 1 20000 > {d}/big; echo hello > {d}/a", d = p("/d"))]);
    let before = std::fs::read(&img.path).unwrap();
    let out_dir = img._dir.path().join("out");
    let script = format!(
        "set -u; cat {d}/a; wc -l < {d}/big; exec 3<{d}/big; head -1 <&3; cat {d}/a | tr a-z A-Z; \
         tar cf - -C {d} . | tar tf - | sort | tr '\\n' ' '; echo; cp -a {d} {out} && diff -r {out} {d} && echo copied; \
         {refused} echo done",
        d = p("/d"),
        out = out_dir.display(),
        refused = refusals(),
    );
    let o = img.cmd("bash").env("HASHFS_READ_ONLY", "1").args(["-c", &script]).output_bounded();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(out, "hello\n20000\n1\nHELLO\n./ ./a ./big \ncopied\ndone\n", "{}", String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::read(&img.path).unwrap() == before, "a read-only process changed the image");

    // A user who may read the image file but not write it is a read-only participant
    // without being told.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        skip::skip("switching to another user needs root");
        return;
    }
    std::fs::set_permissions(img._dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&img.path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let script = format!("id -u; cat {a}; {refused} echo done", a = p("/d/a"), refused = refusals());
    let o = match img
        .cmd("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "bash", "-c", &script])
        .current_dir("/")
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            skip::skip(&format!("setpriv (util-linux) cannot run: {e}"));
            return;
        }
    };
    assert_eq!(String::from_utf8_lossy(&o.stdout), "65534\nhello\ndone\n", "{}", String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::read(&img.path).unwrap() == before, "a user that may only read the image changed it");
    img.fsck_clean();
}

/// A writer replaces a file again and again (each version its own byte, written to a new
/// name and renamed over the file: freed inodes and blocks are taken again at once) while a
/// read-only process reads the file in a loop: each read is one whole version, never bytes
/// of two (a reader that trusted a pass a change ran beside, `read-only-unvalidated`, reads
/// torn files).
#[test]
fn a_read_only_process_reads_whole_files_while_a_writer_replaces_them() {
    let img = image();
    let (f, t) = (p("/f"), p("/t"));
    std::fs::write(img._dir.path().join("v0"), "0".repeat(64 << 10)).unwrap();
    img.ok("bash", &["-c", &format!("cp {} {f}", img._dir.path().join("v0").display())]);
    // The writer starts once the reader runs (it says so in a file outside the image).
    let ready = img._dir.path().join("ready");
    let writer = format!(
        r#"import os, time
while not os.path.exists('{ready}'):
    time.sleep(0.001)
start = time.time()
i = 0
while time.time() < start + 1.5:
    i += 1
    with open('{t}', 'wb') as w:
        w.write(str(i % 10).encode() * {n})
    os.rename('{t}', '{f}')
open('{done}', 'w').close()
"#,
        ready = ready.display(),
        n = 64 << 10,
        done = p("/done"),
    );
    // A file freed under the reader (renamed over) is ESTALE to it, not read on as the
    // file that took its inode: read again.
    let reader = format!(
        r#"import errno, os, sys
open('{ready}', 'w').close()
bad = stale = reads = 0
while not os.path.exists('{done}'):
    try:
        b = open('{f}', 'rb').read()
    except FileNotFoundError:
        continue
    except OSError as e:
        if e.errno != errno.ESTALE:
            raise
        stale += 1
        continue
    reads += 1
    if len(b) != {n} or b.count(b[:1]) != len(b):
        bad += 1
        print('torn:', len(b), sorted(set(b))[:4], file=sys.stderr)
print(reads, bad, stale)
"#,
        ready = ready.display(),
        n = 64 << 10,
        done = p("/done"),
    );
    let w = img.cmd("python3").args(["-c", &writer]).stdout(Stdio::piped()).spawn().unwrap();
    let r = img.cmd("python3").env("HASHFS_READ_ONLY", "1").args(["-c", &reader]).output_bounded();
    let wo = w.wait_with_output_bounded();
    assert!(wo.status.success(), "{}", String::from_utf8_lossy(&wo.stderr));
    let out = String::from_utf8_lossy(&r.stdout);
    assert!(r.status.success(), "{out} {}", String::from_utf8_lossy(&r.stderr));
    eprintln!("reads, torn, stale: {out} {}", String::from_utf8_lossy(&r.stderr));
    let counts: Vec<u64> = out.split_whitespace().map(|n| n.parse().unwrap()).collect();
    assert!(counts[0] >= 20, "the reader ran beside the writer: reads, torn reads, stale reads: {out}");
    assert_eq!(counts[1], 0, "reads, torn reads, stale reads: {out}");
    img.fsck_clean();
}
