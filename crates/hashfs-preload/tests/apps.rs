//! Unmodified programs through `libhashfs_preload.so`: coreutils (cp, cat, cmp, ls, mv, rm,
//! find, sort -o, wc, tail, tar), SQLite (python3's sqlite3 module: create, insert,
//! transactions, integrity_check), descriptor numbers that never collide with the kernel's,
//! and a second process refused while one owns the image.

mod common;
use common::skip::skip;
use common::{image, image_in, p, Image, PREFIX};
use common::{Bounded, BoundedChild};
use hashfs::FormatOptions;
use std::path::Path;
use std::process::{Command, Output};

/// git inside the image: init, two commits, fsck, status; and mktemp's file and
/// directory. glibc's mkstemp and mkdtemp create with their internal open and mkdir, which
/// reached the kernel (git failed at init: "Unable to create temporary file"); the shim
/// makes the name and the file itself.
#[test]
fn git_and_mktemp_inside_the_image() {
    if Command::new("git").arg("--version").output().is_err() {
        skip("git is not installed");
        return;
    }
    let img = image();
    let r = p("/r");
    let id = "-c user.name=t -c user.email=t@example.com";
    let script = format!(
        "git init -q {r} && cd {r} && echo 0 > f0 && git add f0 && git {id} commit -qm c0 && echo 1 > f1 \
         && git add f1 && git {id} commit -qm c1 && git log --format=%s && git fsck --strict && git status --short"
    );
    assert_eq!(img.ok("bash", &["-c", &script]), "c1\nc0\n");
    let out = img.ok(
        "bash",
        &["-c", &format!("f=$(mktemp {0}/t.XXXXXX) && d=$(mktemp -d {0}/d.XXXXXX) && stat -c '%F %a' $f $d", p(""))],
    );
    assert_eq!(out, "regular empty file 600\ndirectory 700\n");
    img.fsck_clean();
}

/// GNU's build tools inside the image: `autoreconf -i` (Perl, m4 and a dozen `sh -c`
/// pipelines), the `configure` script it makes (hundreds of subshells, redirections into
/// config.log), `make`, and `make distcheck` (a tarball made, unpacked, configured, built,
/// checked, installed and uninstalled in a build directory of its own, then removed).
/// Before 2026-12-07 autoreconf took 13.4 s through the shim (1.9 s on tmpfs): each exec of a
/// pipeline's program with its error output in the image waited a second
/// (`exec::an_exec_with_a_kept_copy_of_its_pumped_error_output_does_not_wait`).
#[test]
fn autoconf_and_automake_configure_build_and_distcheck_inside_the_image() {
    if !have("autoreconf") || !have("automake") {
        skip("autoconf and automake are not installed");
        return;
    }
    let img = image();
    let d = p("/hello");
    let script = format!(
        "set -e; mkdir {d}; cd {d}; \
         printf 'AC_INIT([hello], [1.0])\\nAM_INIT_AUTOMAKE([foreign])\\nAC_PROG_CC\\n\
         AC_CHECK_HEADERS([fcntl.h sys/mman.h])\\nAC_CHECK_FUNCS([mmap pwrite fdatasync])\\nAC_CHECK_SIZEOF([long])\\n\
         AC_CONFIG_HEADERS([config.h])\\nAC_CONFIG_FILES([Makefile])\\nAC_OUTPUT\\n' > configure.ac; \
         printf 'bin_PROGRAMS = hello\\nhello_SOURCES = hello.c\\nTESTS = hello\\n' > Makefile.am; \
         printf '#include \"config.h\"\\n#include <stdio.h>\\nint main(void) {{ printf(\"hello %%d\\\\n\", (int)SIZEOF_LONG); return 0; }}\\n' > hello.c; \
         autoreconf -i > autoreconf.log 2>&1 || {{ cat autoreconf.log; exit 1; }}; \
         ./configure > configure.log 2>&1 || {{ tail -20 config.log; exit 1; }}; \
         make -j2 > make.log 2>&1 || {{ cat make.log; exit 1; }}; ./hello; \
         make distcheck > distcheck.log 2>&1 || {{ tail -30 distcheck.log; exit 1; }}; \
         tar tzf hello-1.0.tar.gz | sort | grep -c .; grep -c 'checking for' config.log > /dev/null"
    );
    let out = img.ok("bash", &["-c", &script]);
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("hello 8"), "{out}");
    let files: usize = lines.next().and_then(|l| l.parse().ok()).unwrap_or(0);
    assert!(files >= 10, "the distribution's tarball holds {files} entries: {out}");
    img.fsck_clean();
}

/// rsync into, within and out of the image. Its receiver walks the destination from a
/// descriptor of `/`, a component at a time (`openat` with `O_NOFOLLOW`): the shim serves a
/// name under a kernel directory that leads into the prefix (before, the receiver's
/// `fstatat(<fd of />, "pm")` reached the kernel and every rsync into the image failed:
/// "change_dir#2 failed: No such file or directory"). Python's `dir_fd` calls from a
/// descriptor of `/` too, and from one of the image's parent through `..`.
#[test]
fn rsync_and_walks_from_a_descriptor_of_the_root() {
    if !have("rsync") {
        return;
    }
    let img = image();
    let outside = tempfile::tempdir().unwrap();
    let src = format!("{}/../hashfs/src/share", env!("CARGO_MANIFEST_DIR"));
    let o = outside.path().display();
    let script = format!(
        "set -e; rsync -a {src}/ {a}/; rsync -a {a}/ {b}/; rsync -a --delete {b}/ {o}/out/; \
         diff -r {src} {a}; diff -r {a} {b}; diff -r {b} {o}/out; echo new > {a}/new; rsync -ai {a}/ {b}/ | grep -c '^>f.* new$'",
        a = p("/a"),
        b = p("/b"),
    );
    assert_eq!(img.ok("bash", &["-c", &script]), "1\n", "rsync sent the new file alone");
    let rel = PREFIX.trim_start_matches('/');
    let walk = format!(
        "import os\nroot = os.open('/', os.O_PATH | os.O_DIRECTORY)\n\
         d = os.open('{rel}', os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=root)\n\
         print(os.stat('a', dir_fd=d).st_size > 0, os.stat('{rel}/b/new', dir_fd=root).st_size)\n\
         tmp = os.open('/tmp', os.O_PATH | os.O_DIRECTORY)\n\
         print(os.stat('../{rel}/a/new', dir_fd=tmp).st_size, os.path.exists('/tmp/{rel}'))\n\
         os.mkdir('{rel}/made', dir_fd=root); print(os.path.isdir('{made}'))",
        made = p("/made"),
    );
    assert_eq!(img.ok("python3", &["-c", &walk]), "True 4\n4 False\nTrue\n");
    img.fsck_clean();
}

/// perl's in-place edit (`perl -pi`, with and without a backup) inside the image: perl
/// makes its work file beside the file and renames it over with `renameat` on the
/// directory stream's descriptor (`dirfd` of `opendir`), which the shim's streams did not
/// have (-1: "failed to rename work file ... Bad file descriptor", the work file left).
#[test]
fn perl_edits_files_in_place() {
    if !have("perl") {
        return;
    }
    let img = image();
    let d = p("/d");
    let script = format!(
        "set -e; mkdir {d}; cd {d}; printf 'a\\nb\\n' > f; perl -pi -e 's/a/x/' f; perl -pi.bak -e 's/b/y/' {d}/f; \
         cat f f.bak; ls -A {d}"
    );
    assert_eq!(img.ok("bash", &["-c", &script]), "x\ny\nx\nb\nf\nf.bak\n");
    img.fsck_clean();
}

/// Syncs of what the shim serves beside its own descriptors: dd's `conv=fsync` and
/// `conv=fdatasync` sync its output, which dd reopens onto standard output (a pipe the
/// shim pumps into the file: the kernel's fsync of it fails with EINVAL); a program's
/// fsync of its redirected standard output returns once the pump has written everything
/// before it (the file's size says so); `sync -f` (syncfs) and `sync FILE` of a file in
/// the image (syncfs reached the kernel with the shim's placeholder: EBADF).
/// An fsync that does not wait for the pump fails the size check only now and then (about
/// one run in two here, none in three of a loaded quick tier), so it has no deliberate bug.
#[test]
fn syncs_of_redirected_output_and_of_the_image() {
    let img = image();
    let (d, s) = (p("/d"), p("/s"));
    let script = format!(
        "set -e; dd if=/dev/zero of={d} bs=4k count=4 conv=fsync status=none; \
         dd if=/dev/zero bs=4k count=2 conv=fdatasync status=none > {d}2; \
         python3 -c \"import os\nshort = 0\nfor i in range(1, 101):\n    os.write(1, b'x' * 60000)\n    os.fsync(1)\n    \
         short += os.stat('{s}').st_size < 60000 * i\nos.write(2, b'%d' % short)\" > {s}; echo; \
         sync -f {d}; sync {d}; stat -c %s {d} {d}2 {s}"
    );
    let o = img.run("bash", &["-c", &script]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "\n16384\n8192\n6000000\n");
    assert_eq!(String::from_utf8_lossy(&o.stderr), "0", "fsyncs of a pump that returned before the file had the bytes");
    img.fsck_clean();
}

/// dd's `seek=` on its output, which it reopens onto standard output (a pump's pipe
/// standing for the file): lseek on a standard descriptor moves where its output pump
/// writes, once the pipe is written out. Before, the kernel answered for the pipe and dd
/// failed ("cannot seek: Illegal seek").
#[test]
fn dd_seeks_in_the_output_it_reopens_onto_standard_output() {
    let img = image();
    let f = p("/f");
    let script = format!(
        "set -e; printf ABCDEFGH > {f}; printf xy | dd of={f} bs=1 seek=2 conv=notrunc status=none; cat {f}; echo; \
         printf zz | dd of={f} bs=1 seek=5 status=none; cat {f}; echo; \
         python3 -c \"import os\nos.write(1, b'12345')\nos.lseek(1, 1, os.SEEK_SET)\nos.write(1, b'-')\nprint(os.lseek(1, 0, os.SEEK_CUR), os.lseek(1, -1, os.SEEK_END), file=__import__('sys').stderr)\" > {f}; cat {f}"
    );
    let o = img.run("bash", &["-c", &script]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "ABxyEFGH\nABxyEzz\n1-345");
    assert_eq!(String::from_utf8_lossy(&o.stderr), "2 4\n");
    img.fsck_clean();
}

/// A standard output redirected to a file of the image (a pump's pipe standing for the
/// file) is that file to fstat, to `[ -f /dev/stdout ]` and to a stat of its links, as on
/// Linux: GNU cat refuses to copy a file onto itself and tar to put its archive in itself.
/// Before, fstat answered the pipe, and `cat f >> f` appended f to itself until the image
/// was full (ENOSPC, then SIGPIPE).
#[test]
fn a_redirected_output_is_its_file_to_fstat() {
    let img = image();
    let (f, g, d) = (p("/f"), p("/g"), p("/d"));
    let script = format!(
        "head -c 300000 /dev/zero | tr '\\0' a > {f}; cat {f} >> {f} && echo copied; stat -c %s {f}; \
         [ -f /dev/stdout ] > {g} && echo regular; \
         python3 -c \"import os, stat\nt = [os.fstat(1), os.stat('/dev/stdout'), os.stat('/proc/self/fd/1')]\n\
         print(all(stat.S_ISREG(s.st_mode) and s.st_ino == os.stat('{g}').st_ino for s in t))\" > {g}; cat {g}; \
         mkdir {d}; echo x > {d}/x; tar -C {d} -cf - . > {d}/self.tar; tar -tf {d}/self.tar | sort"
    );
    let o = img.run("bash", &["-c", &script]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "300000\nregular\nTrue\n./\n./x\n", "{err}");
    assert!(err.contains("input file is output file"), "{err}");
    assert!(err.contains("file is the archive; not dumped"), "{err}");
    img.fsck_clean();
}

/// A shell's loop of redirections into the image, output and input (`echo x >> f`: a
/// pump, a pipe and a thread of the pool; `read l < f`: a snapshot), three thousand passes:
/// every line reaches its file, the shell's kernel mappings stay few, and the pumps' threads
/// are kept for the next (one waits, idle, after the loop), but not by forked children
/// (subshells redirect as fast as the shell). Before 2026-12-07 the ended
/// pumps' threads were joined only at exit, each keeping its stack (two mappings): the
/// shell had 4,050 mappings after 2,000 passes, and past 30,000 no thread could be made and
/// the shell died on the shim's panic ("failed to spawn thread"). Before 2026-12-07 each
/// pump made a thread of its own, a third of an `echo x >> f`'s time (`shim/workers.rs`).
#[test]
fn a_loop_of_redirections_keeps_no_thread_stacks() {
    let img = image();
    let f = p("/loop");
    let script = format!(
        "for i in $(seq 3000); do echo \"line $i\" >> {f}; read l < {f}; done; wc -l < {f}; \
         n=0; while read -r _; do n=$((n + 1)); done < /proc/$$/maps; echo $n; \
         sleep 0.3; t=(/proc/$$/task/*); echo ${{#t[@]}}; \
         s=$EPOCHREALTIME; for i in 1 2 3 4 5; do (echo \"sub $i\" >> {f}); done; e=$EPOCHREALTIME; \
         echo $(( (${{e/./}} - ${{s/./}}) / 1000 )); tail -n 1 {f}"
    );
    let out = img.ok("bash", &["-c", &script]);
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("3000"), "{out}");
    let maps: usize = lines.next().and_then(|l| l.parse().ok()).expect("the shell's count of mappings");
    assert!(maps < 1_000, "the shell has {maps} kernel mappings after 6,000 redirections");
    let threads: usize = lines.next().and_then(|l| l.parse().ok()).expect("the shell's count of threads");
    assert!(
        (2..=5).contains(&threads),
        "the shell has {threads} threads after its loop: the main one and 1-4 idle pump threads"
    );
    // Forked children, which have none of the shell's idle threads, pump with threads of
    // their own: five subshells' redirections, not five waits for a pump that never runs.
    let ms: u64 = lines.next().and_then(|l| l.parse().ok()).expect("the subshells' milliseconds");
    assert!(ms < 2_500, "five subshells' redirections took {ms} ms");
    assert_eq!(lines.next(), Some("sub 5"), "{out}");
    img.fsck_clean();
}

/// Standard input redirected from files of the image, smaller and larger than a pipe holds,
/// read-only (a snapshot, `input_snapshots.rs`) and read-write (a pipe: the rest of a small
/// file is put in it at once, with no pump thread; a large one is pumped as it is read),
/// read whole by `cat`, line by line by the shell, and in part by programs that share the
/// descriptor (a group's `read` then `cat`).
#[test]
fn redirected_inputs_small_and_large_read_whole() {
    let img = image();
    let (s, l) = (p("/small"), p("/large"));
    let script = format!(
        "set -e; seq 1 1000 > {s}; seq 1 100000 > {l}; \
         for f in {s} {l}; do [ \"$(cat < $f | md5sum)\" = \"$(md5sum < $f)\" ] && [ \"$(cat $f | md5sum)\" = \"$(md5sum < $f)\" ] \
           && [ \"$(cat 0<> $f | md5sum)\" = \"$(md5sum < $f)\" ]; done; \
         n=0; while read x; do n=$((n + x)); done < {s}; echo $n; n=0; while read x; do n=$((n + x)); done 0<> {s}; echo $n; \
         {{ read a; read b; cat; }} < {s} | wc -l; {{ read a; cat; }} < {l} | tail -1; \
         {{ read a; read b; cat; }} 0<> {s} | wc -l; {{ read a; cat; }} 0<> {l} | tail -1; \
         for i in $(seq 50); do read x < {s}; done; echo $x"
    );
    assert_eq!(img.ok("bash", &["-c", &script]), "500500\n500500\n998\n100000\n998\n100000\n1\n");
    img.fsck_clean();
}

/// A program a test runs that hangs fails its test within the limit, with its processes
/// named, and they are killed (`common::output_within`): a hang no longer runs into CI's
/// limit with nothing said.
#[test]
fn a_program_past_its_time_limit_fails_its_test_and_is_killed() {
    let mut c = Command::new("bash");
    c.args(["-c", "sleep 1000 & wait"]);
    let limit = std::time::Duration::from_millis(300);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| common::output_within(&mut c, limit)));
    let msg = *r.expect_err("a hang passed").downcast::<String>().unwrap();
    assert!(msg.contains("sleep 1000") && msg.contains("waits in"), "{msg}");
    let pids: Vec<u32> = msg.lines().filter_map(|l| l.strip_prefix("== ")?.split(':').next()?.parse().ok()).collect();
    assert_eq!(pids.len(), 2, "bash and its sleep: {msg}");
    let gone = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map_or(true, |s| s.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z')))
    };
    let t = std::time::Instant::now();
    while !pids.iter().all(|&p| gone(p)) && t.elapsed() < std::time::Duration::from_secs(5) {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(pids.iter().all(|&p| gone(p)), "a stuck process still runs: {msg}");
}

/// Paths that leave the image through `..`: from a working directory inside it (the
/// kernel's is a placeholder directory elsewhere, so `ls ..` at the image's root listed the
/// placeholder's parent, /tmp), and through the prefix (`/pm/..`, which the kernel, with no
/// `/pm`, did not find): each reaches the kernel's file that the path names lexically, for
/// stat, access, open, opendir and the xattr reads (`ls -l`'s), and for the calls that
/// change names, modes, owners, times and sizes.
#[test]
fn paths_out_of_the_image_through_dot_dot_reach_the_kernels_files() {
    let img = image();
    let script = format!(
        "set -e; mkdir -p {pre}/a; cd {pre}; stat -c %i .. / {pre}/..; ls .. | grep -cx etc; cat ../etc/hostname > /dev/null; \
         test -d ../etc; ls -lad {pre}/.. > /dev/null; cd a; stat -c %i ../..; ls ../.. | grep -cx etc; \
         python3 -c \"import os; print(sorted(os.listdir('..')) == sorted(os.listdir('/')), os.access('../../etc', os.R_OK))\"",
        pre = PREFIX,
    );
    let o = img.run("bash", &["-c", &script]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stderr), "");
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let lines: Vec<&str> = out.lines().collect();
    let root = lines[1];
    assert_eq!(lines, [root, root, root, "1", root, "1", "False True"], "{out}");
    // The calls that change names and attributes, on a kernel directory reached from the
    // image's root through `..` (they reached the kernel as written, against its
    // placeholder working directory: ENOENT or, worse, a file beside the placeholder).
    let kernel = tempfile::tempdir().unwrap();
    let k = format!("..{}", kernel.path().display());
    let script = format!(
        "set -e; cd {PREFIX}; mkdir {k}/d; echo data > {k}/f; chmod 600 {k}/f; stat -c %a {k}/f; \
         touch -d @1000000000 {k}/f; stat -c %Y {k}/f; chown 1:1 {k}/f; stat -c %u:%g {k}/f; ln -s f {k}/l; \
         readlink {k}/l; ln {k}/f {k}/h; stat -c %h {k}/f; mv {k}/h {k}/h2; truncate -s 2 {k}/h2; stat -c %s {k}/f; \
         mkfifo {k}/p; stat -c %F {k}/p; rm {k}/l {k}/h2 {k}/p; rmdir {k}/d; setfattr -n user.a -v 1 {k}/f; \
         getfattr --only-values -n user.a {k}/f; echo; setfattr -x user.a {k}/f; \
         python3 -c 'import os, sys; os.rename(sys.argv[1] + \"/f\", sys.argv[1] + \"/g\")' {k}"
    );
    assert_eq!(img.ok("bash", &["-c", &script]), "600\n1000000000\n1:1\nf\n2\n2\nfifo\n1\n");
    let names: Vec<_> = std::fs::read_dir(kernel.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["g"]);
    assert_eq!(std::fs::read(kernel.path().join("g")).unwrap(), b"da");
    let listed =
        Command::new("getfattr").args(["-d", "--absolute-names"]).arg(kernel.path().join("g")).output_bounded();
    assert_eq!(String::from_utf8_lossy(&listed.stdout), "", "the attribute set and removed through `..`");
    img.fsck_clean();
}

/// Ends a script's background jobs when it exits: a writer blocked opening a FIFO whose
/// reader failed would keep the script's output open, and the test waiting, for ever.
const STOP_JOBS: &str = "trap 's=$?; kill $(jobs -p) 2>/dev/null || true; exit $s' EXIT;";

/// A FIFO made in the image carries bytes between processes (it could not be opened
/// through the shim before: EOPNOTSUPP): a process that may only read the image makes no
/// kernel FIFO for it (EROFS; one it made would be its user's), a shell's reader and
/// writer, a loop reading it
/// as its standard input (`done < fifo`: the shell opens it), a program writing it and
/// another reading it, non-blocking ends. Every process's open reaches one kernel FIFO
/// beside the image's region, whose node stays while the FIFO has a name (after the last
/// process left the image) and goes with it, its directory with the last node. Each script
/// runs under `timeout` (its whole process group): a writer whose reader failed would
/// otherwise wait for ever, and the test with it.
#[test]
fn fifos_in_the_image_carry_bytes_between_processes() {
    let img = image();
    let (f, g) = (p("/d/f"), p("/g"));
    let region = hashfs::share::region_path(&std::fs::File::open(&img.path).unwrap()).unwrap();
    let dir = hashfs::share::fifo_dir_path(&region);
    // The kernel FIFOs go even when the test fails (a deliberate bug's run).
    struct Gone(std::path::PathBuf);
    impl Drop for Gone {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _gone = Gone(dir.clone());
    let script = format!(
        "{STOP_JOBS} set -e; mkdir {d}; mkfifo {f} {g}; \
         HASHFS_READ_ONLY=1 python3 -c 'import os, sys
try: os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)
except OSError as e: print(e.strerror)' {g}; test -e {dir} || echo no directory; \
         stat -c %F {f}; (seq 1 3 > {f}) & cat {f}; wait; \
         (seq 4 5 > {f}) & while read l; do echo got $l; done < {f}; wait; \
         python3 -c 'import sys; open(sys.argv[1], \"w\").write(\"from python\\n\")' {f} & head -n 1 < {f}; wait; \
         python3 -c '
import os, sys
r = os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)
w = os.open(sys.argv[1], os.O_WRONLY | os.O_NONBLOCK)
os.write(w, b\"0123456789\"); print(len(os.read(r, 100)))
print(os.fstat(w).st_mode & 0o170000 == 0o010000)' {g}",
        d = p("/d"),
        dir = dir.display(),
    );
    assert_eq!(
        img.ok("timeout", &["-k", "5", "60", "bash", "-c", &script]),
        "Read-only file system\nno directory\nfifo\n1\n2\n3\ngot 4\ngot 5\nfrom python\n10\nTrue\n"
    );
    img.region_removed();
    let nodes = || std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0);
    assert_eq!(nodes(), 2, "a node for each FIFO with a name, in {}", dir.display());
    img.ok("rm", &[&g]);
    assert_eq!(nodes(), 1, "the unlinked FIFO's node went");
    assert_eq!(
        img.ok(
            "timeout",
            &["-k", "5", "60", "bash", "-c", &format!("{STOP_JOBS} (echo again > {f}) & cat {f}; rm {f}")]
        ),
        "again\n"
    );
    // Four writers open a new FIFO at once, each making its kernel FIFO if none is there:
    // one makes it, the others take it (EEXIST), and the reader gets all four lines.
    let h = p("/h");
    let racing = format!(
        "{STOP_JOBS} set -e; mkfifo {h}; for i in 1 2 3 4; do (echo w$i > {h}) & done; sleep 0.3; sort < {h}; wait; rm {h}"
    );
    assert_eq!(img.ok("timeout", &["-k", "5", "60", "bash", "-c", &racing]), "w1\nw2\nw3\nw4\n");
    assert!(!dir.exists(), "the FIFO directory {} goes with its last node", dir.display());
    // One process's FIFO directory goes with its last node, and a user who may not write
    // the image makes one of that name: the process's next FIFO is refused, not opened
    // there (the directory it checked before is gone).
    let (a, b) = (p("/a"), p("/b"));
    let swapped = format!(
        "import os, sys
os.mkfifo('{a}'); os.close(os.open('{a}', os.O_RDONLY | os.O_NONBLOCK)); os.unlink('{a}')
assert not os.path.exists(sys.argv[1])
os.mkdir(sys.argv[1], 0o1777); os.chown(sys.argv[1], 65534, 65534)
os.mkfifo('{b}')
try: os.open('{b}', os.O_RDONLY | os.O_NONBLOCK); print('opened')
except OSError as e: print(e.strerror)
os.unlink('{b}')"
    );
    let o = img.run("python3", &["-c", &swapped, &dir.display().to_string()]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "Permission denied\n", "{}", String::from_utf8_lossy(&o.stderr));
    img.fsck_clean();
}

/// libc's `realpath` and `canonicalize_file_name` of paths in the image (glibc resolves
/// with its own lstat and readlink, which no preload sees: every one failed with ENOENT,
/// and cargo could not build a crate in the image): `.` and `..`, a relative path from a
/// working directory inside the image, a link inside, a link out, and the errors (a missing
/// file, a file as a directory, a loop of links).
#[test]
fn realpath_resolves_paths_in_the_image() {
    let img = image();
    let pre = PREFIX;
    let script = format!(
        "set -e; mkdir -p {pre}/d/src; touch {pre}/d/src/f; ln -s src {pre}/d/lnk; ln -s /etc {pre}/out; \
         ln -s l2 {pre}/l1; ln -s l1 {pre}/l2; cd {pre}/d; python3 -c \"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.realpath.restype = libc.canonicalize_file_name.restype = ctypes.c_char_p
for p in [b'{pre}/d/./src/../src', b'src', b'.', b'..', b'lnk/f', b'{pre}/out/hostname', b'{pre}/none', b'src/f/x', b'{pre}/l1']:
    r = libc.realpath(p, None)
    print((r or b'').decode() or os.strerror(ctypes.get_errno()))
print(libc.canonicalize_file_name(b'lnk').decode())\""
    );
    let want = format!(
        "{pre}/d/src\n{pre}/d/src\n{pre}/d\n{pre}\n{pre}/d/src/f\n/etc/hostname\nNo such file or directory\n\
         Not a directory\nToo many levels of symbolic links\n{pre}/d/src\n"
    );
    assert_eq!(img.ok("bash", &["-c", &script]), want);
    img.fsck_clean();
}

/// cargo inside the image: a new crate built, run and tested. It takes what the shim
/// learned from it: realpath of the crate's paths (cargo could not canonicalize them), the
/// linker writing its output through a shared mapping from several threads (a fault on a
/// page another fault had filled was denied: rust-lld died with SIGSEGV), and the test
/// binary spawned with its directory changed into the image (ENOENT).
#[test]
fn cargo_builds_runs_and_tests_a_crate_inside_the_image() {
    if !have("cargo") {
        return;
    }
    let img = image_in(&std::env::temp_dir(), 1 << 30, &FormatOptions::default());
    let script = format!(
        "set -e; cd {pre}; cargo new -q --vcs none hello; cd hello; \
         printf 'fn main() {{ println!(\"built here\"); }}\\n#[test]\\nfn t() {{ assert_eq!(1 + 1, 2); }}\\n' > src/main.rs; \
         cargo run -q --offline; cargo test -q --offline 2>&1 | grep -c 'test result: ok. 1 passed'",
        pre = PREFIX
    );
    assert_eq!(img.ok("bash", &["-c", &script]), "built here\n1\n");
    img.fsck_clean();
}

/// `touch -m -d` and `touch -a -d` reopen their file onto standard input and set its
/// times there (futimens on descriptor 0), which the shim makes a pipe pumped from the
/// file: the times are the file's, not the pipe's (they reached the kernel's pipe before,
/// and touch reported success).
#[test]
fn touch_sets_the_times_it_is_given() {
    let img = image();
    let f = p("/t");
    img.ok(
        "bash",
        &["-c", &format!("echo a > {f}; touch -m -d @1000000000 {f}; touch -a -d @900000000 {f}; chmod 640 {f}")],
    );
    assert_eq!(img.ok("stat", &["-c", "%Y %X %a", &f]), "1000000000 900000000 640\n");
    img.fsck_clean();
}

#[test]
fn coreutils() {
    let img = image();
    let src = env!("CARGO_MANIFEST_DIR");
    // mkdir -p changes directory through the parents (chdir into the prefix).
    img.ok("mkdir", &["-p", &p("/a/b")]);
    img.ok("cp", &["-r", &format!("{src}/src"), &p("/a/b/")]);
    img.ok("cmp", &[&format!("{src}/src/shim.rs"), &p("/a/b/src/shim.rs")]);
    let ls = img.ok("ls", &["-l", &p("/a/b/src")]);
    assert!(ls.contains("shim.rs") && ls.contains("lib.rs"), "{ls}");
    let find = img.ok("find", &[&p("/a"), "-type", "f"]);
    let host_files = img.ok("find", &[&format!("{src}/src"), "-type", "f"]).lines().count();
    assert_eq!(find.lines().count(), host_files, "{find}");
    // tar -C and relative paths inside the prefix.
    img.ok("tar", &["-C", &p("/a/b"), "-cf", &p("/src.tar"), "src"]);
    img.ok("mkdir", &[&p("/untar")]);
    img.ok("tar", &["-C", &p("/untar"), "-xf", &p("/src.tar")]);
    img.ok("cmp", &[&format!("{src}/src/shim/mmap.rs"), &p("/untar/src/shim/mmap.rs")]);
    img.ok("sort", &[&p("/a/b/src/shim.rs"), "-o", &p("/sorted")]);
    let mut want: Vec<String> =
        std::fs::read_to_string(format!("{src}/src/shim.rs")).unwrap().lines().map(String::from).collect();
    want.sort();
    let got = img.ok("cat", &[&p("/sorted")]);
    assert_eq!(got.lines().count(), want.len());
    let wc = img.ok("wc", &["-l", &p("/sorted")]);
    assert!(wc.starts_with(&want.len().to_string()), "{wc}");
    img.ok("mv", &[&p("/sorted"), &p("/a/sorted2")]);
    assert_eq!(img.ok("tail", &["-n", "1", &p("/a/sorted2")]).trim_end(), want.last().unwrap().as_str());
    let tar = img.ok("tar", &["-cf", "-", &p("/a/b/src")]);
    assert!(!tar.is_empty());
    let stat = img.ok("stat", &["-c", "%s %h %F", &p("/a/b/src/lib.rs")]);
    let size = std::fs::metadata(format!("{src}/src/lib.rs")).unwrap().len();
    assert_eq!(stat.trim(), format!("{size} 1 regular file"));
    // fallocate(1): preallocate, then punch a hole.
    img.ok("fallocate", &["-l", "65536", &p("/fa")]);
    img.ok("fallocate", &["-p", "-o", "8192", "-l", "8192", &p("/fa")]);
    assert_eq!(img.ok("stat", &["-c", "%s %b", &p("/fa")]).trim(), "65536 112");
    // ZERO_RANGE maps the punched blocks again; COLLAPSE_RANGE is refused.
    img.ok("fallocate", &["-z", "-o", "4096", "-l", "16384", &p("/fa")]);
    assert_eq!(img.ok("stat", &["-c", "%s %b", &p("/fa")]).trim(), "65536 128");
    assert!(!img.run("fallocate", &["-c", "-o", "0", "-l", "4096", &p("/fa")]).status.success());
    img.ok("rm", &[&p("/fa")]);
    img.ok("rm", &["-r", &p("/a"), &p("/untar"), &p("/src.tar")]);
    assert_eq!(img.ok("ls", &["-A", PREFIX]), "");
    // Errors come back as the right errno messages.
    let o = img.run("cat", &[&p("/missing")]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("No such file or directory"));
    img.fsck_clean();
}

#[test]
fn sqlite() {
    sqlite_on(image());
}

/// SQLite on an image made in strict mode (every write untorn).
#[test]
fn sqlite_in_strict_mode() {
    let opts = FormatOptions { write_mode: hashfs::WriteMode::Strict, ..FormatOptions::default() };
    sqlite_on(image_in(&std::env::temp_dir(), 64 << 20, &opts));
}

fn sqlite_on(img: Image) {
    let script = format!(
        r#"
import sqlite3
db = sqlite3.connect("{db}")
db.execute("create table kv(k integer primary key, v text)")
with db:
    for i in range(5000):
        db.execute("insert into kv values(?, ?)", (i, "v%d" % i * 5))
try:
    with db:
        db.execute("insert into kv values(1, 'dup')")
except sqlite3.IntegrityError:
    pass
with db:
    db.execute("update kv set v = 'changed' where k % 7 = 0")
    db.execute("delete from kv where k % 11 = 0")
db.execute("vacuum")
assert db.execute("pragma integrity_check").fetchone()[0] == "ok"
n = db.execute("select count(*) from kv").fetchone()[0]
c = db.execute("select count(*) from kv where v = 'changed'").fetchone()[0]
db.close()
db = sqlite3.connect("{db}")
assert db.execute("pragma integrity_check").fetchone()[0] == "ok"
print(n, c, db.execute("select count(*) from kv").fetchone()[0])
"#,
        db = p("/test.db")
    );
    let out = img.ok("python3", &["-c", &script]);
    let want_n = (0..5000).filter(|i| i % 11 != 0).count();
    let want_c = (0..5000).filter(|i| i % 7 == 0 && i % 11 != 0).count();
    assert_eq!(out.trim(), format!("{want_n} {want_c} {want_n}"));
    img.fsck_clean();
}

#[test]
fn descriptors_never_collide() {
    let img = image();
    let script = format!(
        r#"
import os, tempfile
real = tempfile.mkdtemp()
fds = []
for i in range(50):
    a = os.open("{pre}/f%d" % i, os.O_CREAT | os.O_RDWR)
    b = os.open(real + "/g%d" % i, os.O_CREAT | os.O_RDWR)
    os.write(a, b"shim %d" % i)
    os.write(b, b"real %d" % i)
    fds += [a, b]
assert len(set(fds)) == len(fds)
d = os.dup(fds[0]); os.lseek(d, 0, 0); assert os.read(d, 100) == b"shim 0"
os.dup2(fds[2], 200); os.lseek(200, 0, 0); assert os.read(200, 100) == b"shim 1"
for i in range(50):
    os.lseek(fds[2*i], 0, 0); os.lseek(fds[2*i+1], 0, 0)
    assert os.read(fds[2*i], 100) == b"shim %d" % i
    assert os.read(fds[2*i+1], 100) == b"real %d" % i
# access() checks the permission bits (root: execute needs an execute bit).
os.close(os.open("{pre}/noexec", os.O_CREAT | os.O_WRONLY, 0o644))
assert os.access("{pre}/noexec", os.R_OK | os.W_OK) and not os.access("{pre}/noexec", os.X_OK)
os.chmod("{pre}/noexec", 0o755)
assert os.access("{pre}/noexec", os.X_OK) and not os.access("{pre}/missing", os.F_OK)
# O_APPEND set after open appends, and never overwrites the start.
import fcntl
a = os.open("{pre}/late-append", os.O_CREAT | os.O_WRONLY)
os.write(a, b"start")
fcntl.fcntl(a, fcntl.F_SETFL, os.O_APPEND)
os.lseek(a, 0, 0)
os.write(a, b"-end")
os.close(a)
assert open("{pre}/late-append", "rb").read() == b"start-end"
for f in fds: os.close(f)
assert sorted(os.listdir("{pre}"))[:3] == ["f0", "f1", "f10"]
print("ok")
"#,
        pre = PREFIX
    );
    assert_eq!(img.ok("python3", &["-c", &script]).trim(), "ok");
    img.fsck_clean();
}

/// A shell's own redirections onto a HashFS file (dash closes its stdout before the dup2,
/// so the shim's pipe once landed on the descriptor it replaced: EPIPE), in order, one after
/// another, and a shell that ends with `_exit` (as dash does) still leaves the image clean
/// with everything written.
#[test]
fn shell_redirections_reach_the_file_in_order() {
    let img = image();
    let script =
        format!("echo a > {f}; echo bb >> {f}; printf 'c%s\\n' 1 2 >> {f}; echo x > {g}", f = p("/r"), g = p("/s"));
    img.ok("sh", &["-c", &script]);
    img.fsck_clean();
    let (fs, _) = hashfs::FileSystem::open(&img.path).unwrap();
    assert_eq!(fs.read(Path::new("/r")).unwrap(), b"a\nbb\nc1\nc2\n");
    assert_eq!(fs.read(Path::new("/s")).unwrap(), b"x\n");
    fs.unmount().unwrap();
}

#[test]
fn programs_outside_the_prefix_are_untouched() {
    let img = image();
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("plain");
    let out =
        img.ok("sh", &["-c", &format!("echo plain > {0} && cat {0} && ls {1}", f.display(), Path::new("/").display())]);
    assert!(out.starts_with("plain\n"));
    // The shell never touched the prefix, so it never took the image.
    img.fsck_clean();
}

/// Whether `prog` is installed; under CI it must be (the test command installs it).
fn have(prog: &str) -> bool {
    let ok = Command::new("sh").args(["-c", &format!("command -v {prog}")]).output().is_ok_and(|o| o.status.success());
    if !ok {
        skip(&format!("{prog} is not installed"));
    }
    ok
}

#[test]
fn mmap_shared_and_private() {
    let img = image();
    let script = format!(
        r#"
import mmap, os
fd = os.open("{f}", os.O_CREAT | os.O_RDWR)
os.write(fd, b"a" * 10000)
m = mmap.mmap(fd, 8192, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
m[0:5] = b"HELLO"
m[8190:8192] = b"ZZ"
m.flush()
m.close()
r = mmap.mmap(fd, 10000, mmap.MAP_PRIVATE, mmap.PROT_READ)
assert r[0:5] == b"HELLO" and r[8190:8192] == b"ZZ" and r[9999:10000] == b"a"
r.close()
os.lseek(fd, 0, 0)
data = os.read(fd, 20000)
assert data[0:5] == b"HELLO" and data[8190:8192] == b"ZZ" and len(data) == 10000
# A shared mapping keeps the file; truncating it meanwhile is refused.
m = mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
for trunc in (lambda: os.ftruncate(fd, 0), lambda: os.truncate("{f}", 0)):
    try:
        trunc()
        raise SystemExit("truncate of a mapped file succeeded")
    except OSError as e:
        assert e.errno == 16, e
m.close()
os.ftruncate(fd, 0)
os.close(fd)
print("ok")
"#,
        f = p("/mapped")
    );
    assert_eq!(img.ok("python3", &["-c", &script]).trim(), "ok");
    img.fsck_clean();
}

#[test]
fn fio_with_verification() {
    if !have("fio") {
        return;
    }
    let img = image();
    for (name, rw) in [("randrw", "randrw"), ("append", "write")] {
        // fio keeps its verification state in its working directory: a temporary one.
        let o = img
            .cmd("fio")
            .current_dir(img._dir.path())
            .args([
                &format!("--name={name}"),
                &format!("--filename={}", p(&format!("/fio-{name}"))),
                "--size=16m",
                "--bs=4k",
                &format!("--rw={rw}"),
                "--ioengine=psync",
                "--verify=crc32c",
                "--do_verify=1",
                "--thread",
                "--output-format=terse",
            ])
            .output_bounded();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "fio {name}: {out} {}", String::from_utf8_lossy(&o.stderr));
        // Terse format: field 5 is the error count.
        assert_eq!(out.lines().last().unwrap().split(';').nth(4), Some("0"), "{out}");
    }
    img.fsck_clean();
}

#[test]
fn rocksdb_db_bench() {
    if !have("db_bench") {
        return;
    }
    let img = image();
    let o = img.run(
        "db_bench",
        &[
            &format!("--db={}", p("/rocksdb")),
            "--benchmarks=fillseq,fillrandom,overwrite,readrandom",
            "--num=20000",
            "--value_size=100",
            "--compression_type=none",
            "--verify_checksum=1",
        ],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "db_bench: {out} {}", String::from_utf8_lossy(&o.stderr));
    for b in ["fillseq", "fillrandom", "overwrite", "readrandom"] {
        assert!(out.lines().any(|l| l.starts_with(b) && l.contains("ops/sec")), "{b} missing: {out}");
    }
    img.fsck_clean();
}

#[test]
fn leveldb_ycsb_a_to_f() {
    let img = image();
    let Some(exe) = common::ycsb_driver(&img) else { return };
    let out = img.ok(exe.to_str().unwrap(), &[&p("/leveldb"), "100000", "20000", "ABCDEF"]);
    common::assert_ycsb_ok(&out, "ABCDEF");
    img.fsck_clean();
}

/// The calls beyond read and write, through the shim (tests/scripts/shim_calls.py): the
/// vector and v2 family with their flags, copy_file_range, sendfile and splice in every
/// direction, loud failure of calls it does not intercept, shared mappings (read-only and
/// writable) that see every write, mappings that grow with the file, munmap of odd lengths
/// and partial ranges, and chdir into the prefix with relative paths.
#[test]
fn calls_beyond_read_and_write() {
    let img = image();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/scripts/shim_calls.py");
    let o = img.run("python3", &[script, PREFIX]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "ok");
    img.fsck_clean();
}

/// LMDB through the shim (Debian's python3-lmdb): 10,000 puts, then every value checked in
/// new transactions, after deletes and overwrites, and after reopening
/// (tests/scripts/lmdb_check.py); in its default mode (a read-only shared map, writes with
/// pwrite) and with MDB_WRITEMAP and a 512 MiB map (LMDB sizes the file to the map and
/// writes through a writable shared map of all of it).
fn lmdb(
    mode: &str,
    map_mib: u64,
    image_bytes: u64,
    mapping: hashfs::MappingKind,
    placement: hashfs::HashPlacement,
) -> Option<Output> {
    lmdb_with(mode, map_mib, image_bytes, mapping, placement, None).map(|(o, img)| {
        img.fsck_clean();
        o
    })
}

/// [`lmdb`] with the shim's budget of kernel mappings (`HASHFS_MAP_BUDGET`) set, and the
/// image left to the caller.
fn lmdb_with(
    mode: &str,
    map_mib: u64,
    image_bytes: u64,
    mapping: hashfs::MappingKind,
    placement: hashfs::HashPlacement,
    map_budget: Option<&str>,
) -> Option<(Output, Image)> {
    let python = "/usr/bin/python3";
    let has_lmdb = Command::new(python).args(["-c", "import lmdb"]).output().is_ok_and(|o| o.status.success());
    if !has_lmdb {
        skip("python3-lmdb is not installed");
        return None;
    }
    let opts = hashfs::FormatOptions { mapping, placement, ..hashfs::FormatOptions::default() };
    let img = common::image_in(&std::env::temp_dir(), image_bytes, &opts);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/scripts/lmdb_check.py");
    let mut c = img.cmd(python);
    if let Some(b) = map_budget {
        c.env("HASHFS_MAP_BUDGET", b);
    }
    let o = c.args([script, PREFIX, mode, &map_mib.to_string()]).output_bounded();
    Some((o, img))
}

fn assert_lmdb_ok(o: Option<Output>) {
    if let Some(o) = o {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "ok 6666");
    }
}

#[test]
fn lmdb_default_mode() {
    assert_lmdb_ok(lmdb("default", 256, 64 << 20, hashfs::MappingKind::HashFs, hashfs::HashPlacement::Paper));
}

/// LMDB's read-only map grows with its file: past the shim's budget of kernel mappings
/// (here 64 pages' worth; by default half of `vm.max_map_count`, a 64 MiB database with
/// HashFS's placement) the map becomes a copy that follows LMDB's writes
/// (`shim/mmap/copy.rs`). Before, the pages past the limit stayed zeros, and LMDB stopped
/// with MDB_CORRUPTED ("Located page was wrong type") once its file passed 64 MiB.
#[test]
fn lmdb_default_mode_past_the_budget() {
    let o = lmdb_with("default", 256, 64 << 20, hashfs::MappingKind::HashFs, hashfs::HashPlacement::Paper, Some("64"));
    assert_lmdb_ok(o.map(|(o, img)| {
        img.fsck_clean();
        o
    }));
}

/// A writable shared map cannot be a copy, and its holes get blocks at a store, where a
/// shortage of kernel mappings has no call to fail. So its `mmap` reckons the worst case
/// (`shim/mmap/budget.rs`): LMDB with MDB_WRITEMAP and a 1 GiB map on a default 256 MiB
/// image (HashFS's placement: a kernel mapping per block, up to the image's 64,000 free
/// blocks) fails at open with ENOMEM, and the shim names the remedy. Before, it opened, and
/// died with SIGSEGV at a store once its file passed 64 MiB.
#[test]
fn lmdb_writemap_too_large_for_the_budget_fails_at_open() {
    let o = lmdb_with("writemap", 1024, 256 << 20, hashfs::MappingKind::HashFs, hashfs::HashPlacement::Paper, None);
    let Some((o, img)) = o else { return };
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "an error at open, not a signal: {err}");
    assert!(err.contains("lmdb.MemoryError") && err.contains("Cannot allocate memory"), "{err}");
    assert!(err.contains("could need") && err.contains("--placement regions"), "{err}");
    img.fsck_clean();
}

/// LMDB with MDB_WRITEMAP sizes its file to the map (four times the image) and writes a
/// few MiB of it through a writable shared mapping: the holes get blocks when first
/// written, 2 MiB at a time, so the map fits an image smaller than itself, on an allocator
/// mapping (each 2 MiB one extent, one kernel mapping) and on HashFS's regions placement
/// (each 2 MiB a claimed group; the mapped file's other keys wait while openings move
/// keys), with a 1 GiB map on a 256 MiB image; on HashFS's placement (one kernel mapping
/// per block) with a 256 MiB map on a 64 MiB image, whose free blocks are fewer than the
/// budget of kernel mappings.
#[test]
fn lmdb_writemap_with_a_map_larger_than_the_image() {
    use hashfs::{HashPlacement, MappingKind};
    for (mapping, placement, map_mib, image_bytes) in [
        (MappingKind::ExtentTree, HashPlacement::Paper, 1024, 256 << 20),
        (MappingKind::HashFs, HashPlacement::Regions, 1024, 256 << 20),
        (MappingKind::HashFs, HashPlacement::Paper, 256, 64 << 20),
    ] {
        assert_lmdb_ok(lmdb("writemap", map_mib, image_bytes, mapping, placement));
    }
}

/// setfacl, getfacl, setfattr, getfattr and `cp -a` (which copies attributes) through the
/// shim; a non-owner's setfacl fails with EPERM.
#[test]
fn acl_and_xattr_tools() {
    if !have("setfacl") || !have("setfattr") {
        return;
    }
    let img = image();
    img.ok("touch", &[&p("/f")]);
    img.ok("setfacl", &["-m", "u:1000:rw", &p("/f")]);
    img.ok("setfattr", &["-n", "user.note", "-v", "kept", &p("/f")]);
    let acl = img.ok("getfacl", &["-cn", &p("/f")]);
    assert!(acl.contains("user:1000:rw-") && acl.contains("mask::rw-"), "{acl}");
    assert!(img.ok("ls", &["-l", &p("/f")]).starts_with("-rw-rw-r--+"), "ls shows the ACL");
    img.ok("cp", &["-a", &p("/f"), &p("/copy")]);
    let copied = img.ok("getfattr", &["-d", "-m", "-", &p("/copy")]);
    assert!(copied.contains("user.note=\"kept\"") && copied.contains("system.posix_acl_access"), "{copied}");
    // The other user must be able to open the image itself.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(img.path.parent().unwrap(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&img.path, std::fs::Permissions::from_mode(0o666)).unwrap();
    let o = img
        .cmd("setpriv")
        .args(["--reuid=1000", "--regid=1000", "--clear-groups", "setfacl", "-m", "u:1001:r", &p("/f")])
        .output_bounded();
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("Operation not permitted"), "{o:?}");
    img.fsck_clean();
}

/// Random IO with verification through the shim (tests/scripts/random_io.py): vector and
/// v2 writes and reads, truncates, punched and zeroed ranges, stores through shared
/// mappings of odd lengths and partial munmaps, each read checked against a model. (It
/// found that a hole punched under a shared mapping freed blocks the mapping still showed;
/// such a punch now zeroes in place.)
#[test]
fn random_io_with_verification() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/scripts/random_io.py");
    for seed in 1..=4 {
        let img = image();
        let o = img.run("python3", &[script, PREFIX, &seed.to_string(), "1500"]);
        assert!(o.status.success(), "seed {seed}: {}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "ok 1500");
        img.fsck_clean();
    }
}

/// Regression (issue 52): Debian's redis-server hung at start under the shim. It links the
/// system jemalloc, which calls `readlink("/etc/malloc.conf")` while it initialises; the
/// shim's check of whether the path was its own allocated, which re-entered jemalloc. The
/// check now answers "not ours" without touching the heap. Redis starts, serves (its
/// append-only file synced at every write), and SAVE writes its dump into the image;
/// BGSAVE and BGREWRITEAOF write theirs from a forked child (issue 55: the child is a
/// participant of its own), and `redis-check-rdb` finds the dump sound. Its UNIX socket
/// lies in the image beside its files.
#[test]
fn redis_linked_to_jemalloc_starts_and_saves_through_the_shim() {
    if !have("redis-server") || !have("redis-cli") {
        return;
    }
    let img = image();
    let port = (20_000 + std::process::id() % 20_000).to_string();
    let mut server = img
        .cmd("redis-server")
        .args([
            "--port",
            &port,
            "--bind",
            "127.0.0.1",
            "--dir",
            PREFIX,
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--unixsocket",
            &p("/redis.sock"),
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let cli = |args: &[&str]| {
        let o = Command::new("redis-cli").args(["-p", &port]).args(args).output_bounded();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    let start = std::time::Instant::now();
    while cli(&["ping"]) != "PONG" {
        if start.elapsed() > std::time::Duration::from_secs(20) {
            let _ = server.kill();
            panic!("redis-server did not answer within 20 s (hung in its allocator's start-up?)");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(cli(&["set", "key", "kept in the image"]), "OK");
    assert_eq!(cli(&["save"]), "OK");
    assert_eq!(cli(&["get", "key"]), "kept in the image");
    // Its UNIX socket lies in the image too, reached by a client through the shim
    // (`shim/socket.rs`; before 2026-12-07 its bind failed with EOPNOTSUPP).
    assert_eq!(img.ok("redis-cli", &["-s", &p("/redis.sock"), "get", "key"]).trim(), "kept in the image");
    // The forked savers: each reports its end in INFO persistence.
    for (start, running, status) in [
        ("bgsave", "rdb_bgsave_in_progress:0", "rdb_last_bgsave_status:ok"),
        ("bgrewriteaof", "aof_rewrite_in_progress:0", "aof_last_bgrewrite_status:ok"),
    ] {
        assert_eq!(cli(&["set", start, "written by a forked child"]), "OK");
        assert!(cli(&[start]).starts_with("Background"), "{start} started");
        let begun = std::time::Instant::now();
        let info = loop {
            std::thread::sleep(std::time::Duration::from_millis(50));
            let info = cli(&["info", "persistence"]);
            if info.contains(running) && !info.contains("aof_rewrite_scheduled:1") {
                break info;
            }
            assert!(begun.elapsed() < std::time::Duration::from_secs(20), "{start} never ended: {info}");
        };
        assert!(info.contains(status), "{start} failed in its forked child: {info}");
    }
    cli(&["shutdown", "nosave"]);
    assert!(server.wait_bounded().success());
    img.fsck_clean();
    if have("redis-check-rdb") {
        let check = img.ok("redis-check-rdb", &[&p("/dump.rdb")]);
        assert!(check.contains("RDB looks OK"), "{check}");
    }
    let (fs, _) = hashfs::FileSystem::open(&img.path).unwrap();
    let dump = fs.read(Path::new("/dump.rdb")).unwrap();
    assert!(dump.starts_with(b"REDIS"), "an RDB file: {:?}", &dump[..dump.len().min(9)]);
    assert!(dump.windows(17).any(|w| w == b"kept in the image"));
    assert!(dump.windows(6).any(|w| w == b"bgsave"), "BGSAVE's child wrote the dump");
    let aof = fs.read_dir(Path::new("/appendonlydir")).unwrap();
    assert!(
        aof.iter().any(|e| e.name.windows(4).any(|w| w == b"base")),
        "BGREWRITEAOF's child wrote the rewritten base file"
    );
}
