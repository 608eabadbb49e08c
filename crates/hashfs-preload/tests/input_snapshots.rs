//! Standard input redirected from a file of the image (`shim/snapshot.rs`): a read-only
//! redirection of a file of at most 16 MiB is a sealed copy at the description's offset,
//! which programs seek as they would the file (bash's `read`, `head` and `tail`, `split
//! -n`, `dd skip=`), whose fstat is the file's (GNU cat refuses to copy a file onto itself),
//! and whose offset goes back to the description when it is let go (another descriptor of
//! it, in the shell, goes on where the reader stopped). Larger files and `0<>` stay pumped.

mod common;

use common::{image, p};

/// A shell script of redirected inputs, run on a tmpfs and through the shim: the same
/// output, line for line. Before 2026-12-07 the shim's standard input was a pipe: the
/// second `head` printed nothing (the first had read the pipe's whole content), `split -n`
/// failed ("cannot determine file size"), `cat < f >> f` appended the file to itself
/// until the image was full, and `[ -f /dev/stdin ]` was false.
#[test]
fn redirected_inputs_answer_as_the_kernels() {
    let script = r#"
set -e; export LC_ALL=C; d=$1
seq 1 9 > $d/f
{ head -n1; head -n1; } < $d/f
split -n 2 $d/f $d/part.; cat $d/part.aa; echo ==; cat $d/part.ab
cat < $d/f >> $d/f 2> /dev/null || echo refused; wc -c < $d/f
[ -f /dev/stdin ] < $d/f && echo stdin-is-a-file
exec 3< $d/f; head -n1 <&3; read x <&3; echo "read $x"; { head -n1; } <&3; read y <&3; echo "then $y"; sh -c 'read z; echo "sh $z"' <&3; read w <&3; echo "after $w"; exec 3<&-
( read a; read b; exec python3 -c 'import os, sys; s = os.fstat(0); f = os.stat(sys.argv[1]); print(s.st_ino == f.st_ino, s.st_size, sys.stdin.read().split())' $d/f ) < $d/f
python3 -c 'import os, sys; os.read(0, 4); p = os.posix_spawn("/usr/bin/python3", ["python3", "-c", "import os, sys; print(os.fstat(0).st_ino == os.stat(sys.argv[1]).st_ino, sys.stdin.read().split())", sys.argv[1]], dict(os.environ)); os.waitpid(p, 0); print(os.lseek(0, 0, os.SEEK_CUR))' $d/f < $d/f
tail -c 4 < $d/f; head -c -14 < $d/f; echo
dd bs=1 skip=2 count=5 < $d/f 2> /dev/null; echo
n=0; while read l; do n=$((n + l)); done < $d/f; echo sum $n
[ "$(md5sum < $d/f)" = "$(md5sum $d/f | sed "s| .*|  -|")" ] && echo same
"#;
    let img = image();
    let shim = img.ok("bash", &["-c", script, "bash", &p("")]);
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let kernel = std::process::Command::new("bash").args(["-c", script, "bash"]).arg(dir.path()).output().unwrap();
    assert!(kernel.status.success(), "{}", String::from_utf8_lossy(&kernel.stderr));
    let kernel = String::from_utf8_lossy(&kernel.stdout);
    assert_eq!(shim, kernel, "the shim's output, then the kernel's");
    for line in [
        "1\n2\n",
        "refused\n18\n",
        "stdin-is-a-file\n",
        "read 2\n3\nthen 4\nsh 5\nafter 6\n",
        "True 18 ['3', '4'",
        "sum 45\n",
    ] {
        assert!(kernel.contains(line), "{line:?} in {kernel}");
    }
    img.fsck_clean();
    img.region_removed();
}

/// A file larger than a snapshot's limit, and a read-write redirection, are pumped through
/// a pipe as before: read whole, and in part by programs that share the descriptor.
#[test]
fn large_and_read_write_inputs_are_pumped() {
    let img = image();
    let (big, small) = (p("/big"), p("/small"));
    let script = format!(
        "set -e; seq 1 2500000 > {big}; seq 1 1000 > {small}; wc -c < {big}; \
         {{ read a; cat; }} < {big} | tail -1; [ -p /dev/stdin ] < {big} && echo big-is-a-pipe; \
         [ -p /dev/stdin ] 0<> {small} && echo read-write-is-a-pipe; {{ read a; read b; cat; }} 0<> {small} | wc -l"
    );
    let out = img.ok("bash", &["-c", &script]);
    assert_eq!(out, "18888896\n2500000\nbig-is-a-pipe\nread-write-is-a-pipe\n998\n");
    img.fsck_clean();
}

/// A pumped input that is also its program's output (`cat < f >> f`, which `cat` refuses
/// on the kernel's file, seeing its input's fstat; a pump's pipe hides that) is read to the
/// size the file had when the pump began, not on into what the program appends: `f` is
/// appended to itself once (and by up to a pipe's worth more, `pump::feeds_itself`), and
/// the shim says so. Before, `f` grew until the image was full
/// (`input-pump-feeds-itself`).
#[test]
fn an_input_that_is_its_programs_output_is_read_to_its_size() {
    let img = image();
    let big = p("/big");
    let script = format!("set -e; seq 1 2500000 > {big}; cat < {big} >> {big}; wc -c < {big}");
    let o = img.run("bash", &["-c", &script]);
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{err}");
    let size: u64 = out.trim().parse().unwrap();
    assert!((2 * 18_888_896..=2 * 18_888_896 + (1 << 17)).contains(&size), "{size} bytes: {err}");
    assert!(err.contains("also writes as its output"), "{err}");
    img.fsck_clean();
}
