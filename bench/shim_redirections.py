#!/usr/bin/env python3
"""A shell's redirections into the image through the shim (issue 55): bash runs N times
`echo LINE >> FILE` (each an open, a dup2 onto standard output and its undoing) and N times
`echo LINE >&5` onto a file it opened once (`exec 5>> FILE`: a dup2 and its undoing, as
configure scripts write config.log), then N times `read LINE < FILE` (an input redirection
of the first file, N lines long). Through the shim each redirection of standard output
to a file of the image starts a pump (a pipe and a thread, `shim/pump.rs`) and writes it
out when the shell puts its output back. Builds of the preload shim (each on a fresh image)
and tmpfs take turns within each round, the first changing from round to round. Reports
microseconds per redirection for each loop, with its 95% interval, and the ratio to the
first build within each round. With --autoreconf, each target also runs autoconf's
`autoreconf -i` on a small automake project (its error output in the image, as a build's
log would be: a dozen `sh -c 'prog 2>&1 | ...'` pipelines) and reports its seconds
(`autoreconf_ms`, in milliseconds). With --inputs, each target also times input
redirections of files it wrote: `head -c 10 < BIG` of a 12 MB file (`head_of_12MB_input`,
microseconds each: a snapshot copies the file, a pump only what head reads), `{ read x;
read y; } < FILE` of the N-line file (`two_reads_input`, each) and a `while read` loop over
it (`while_read_line`, each line). Not a test.

Usage: python3 bench/shim_redirections.py --shim NAME=PATH [--shim NAME=PATH ...] [--rounds N]
                                          [--lines N] [--autoreconf] [--inputs] [--json FILE]
Needs: the release `hashfs` binary (cargo build --release --workspace), bash; autoconf and
automake for --autoreconf.
"""
import argparse, os, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from three_targets import builds_in_rounds, ratio_table, write_builds_json  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HASHFS = os.path.join(ROOT, "target/release/hashfs")
PREFIX = "/hashfs-redirections"
LOOPS = ["append_redirection", "dup_onto_stdout", "input_redirection"]

# $1 the directory, $2 the count; prints the times at the loops' starts and end, and fails
# unless every line reached its file.
SCRIPT = r"""
set -e
d=$1 n=$2
t0=$EPOCHREALTIME
for ((i = 0; i < n; i++)); do echo "line $i" >> "$d/a"; done
t1=$EPOCHREALTIME
exec 5>> "$d/b"
for ((i = 0; i < n; i++)); do echo "line $i" >&5; done
t2=$EPOCHREALTIME
exec 5>&-
for ((i = 0; i < n; i++)); do read l < "$d/a"; done
t3=$EPOCHREALTIME
[ "$(wc -l < "$d/a")" -eq "$n" ] && [ "$(wc -l < "$d/b")" -eq "$n" ] && [ "$l" = "line 0" ]
echo "$t0 $t1 $t2 $t3"
"""

# $1 a new directory: an automake project made there, then `autoreconf -i` timed with its
# output and errors in a file of the directory; prints the times before and after.
AUTORECONF = r"""
set -e
mkdir "$1"; cd "$1"
printf 'AC_INIT([hello], [1.0])\nAM_INIT_AUTOMAKE([foreign])\nAC_PROG_CC\nAC_CONFIG_FILES([Makefile])\nAC_OUTPUT\n' > configure.ac
printf 'bin_PROGRAMS = hello\nhello_SOURCES = hello.c\n' > Makefile.am
printf 'int main(void) { return 0; }\n' > hello.c
t0=$EPOCHREALTIME
autoreconf -i > autoreconf.log 2>&1
t1=$EPOCHREALTIME
[ -x configure ]
echo "$t0 $t1"
"""

# $1 the directory (with the N-line file a), $2 the count; prints the loops' times.
INPUTS = r"""
set -e
d=$1 n=$2
head -c 12000000 /dev/zero > "$d/big"
t0=$EPOCHREALTIME
for ((i = 0; i < 50; i++)); do head -c 10 < "$d/big" > /dev/null; done
t1=$EPOCHREALTIME
for ((i = 0; i < n; i++)); do { read x; read y; } < "$d/a"; done
t2=$EPOCHREALTIME
while read l; do :; done < "$d/a"
t3=$EPOCHREALTIME
[ "$y" = "line 1" ]
echo "$t0 $t1 $t2 $t3"
"""
INPUT_LOOPS = ["head_of_12MB_input", "two_reads_input", "while_read_line"]


def one(target, path, n, tmp, autoreconf=False, inputs=False):
    if path is None:  # tmpfs
        d = os.path.join(tmp, "files")
        os.mkdir(d)
        env, where = dict(os.environ), d
    else:
        image = os.path.join(tmp, "redirections.img")
        subprocess.run([HASHFS, "mkfs", image, "--size", "256M"], check=True, capture_output=True)
        env, where = dict(os.environ, LD_PRELOAD=path, HASHFS_IMAGE=image, HASHFS_MOUNT=PREFIX), PREFIX
    out = subprocess.run(["bash", "-c", SCRIPT, "bash", where, str(n)], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{target}: {out.stderr}")
    t = [float(x) for x in out.stdout.split()]
    res = [1e6 * (t[i + 1] - t[i]) / n for i in range(3)]
    if inputs:
        out = subprocess.run(["bash", "-c", INPUTS, "bash", where, str(n)], env=env, capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"{target}: inputs: {out.stderr}")
        t = [float(x) for x in out.stdout.split()]
        res += [1e6 * (t[1] - t[0]) / 50, 1e6 * (t[2] - t[1]) / n, 1e6 * (t[3] - t[2]) / n]
    if autoreconf:
        out = subprocess.run(["bash", "-c", AUTORECONF, "bash", f"{where}/project"], env=env, capture_output=True,
                             text=True)
        if out.returncode != 0:
            sys.exit(f"{target}: autoreconf: {out.stderr}")
        t = [float(x) for x in out.stdout.split()]
        res.append(1e3 * (t[1] - t[0]))
    if path is None:
        subprocess.run(["rm", "-rf", d], check=True)
    else:
        os.remove(image)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shim", action="append", required=True, help="NAME=PATH of a libhashfs_preload.so")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--lines", type=int, default=2000)
    ap.add_argument("--dir", default="/dev/shm")
    ap.add_argument("--autoreconf", action="store_true")
    ap.add_argument("--inputs", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args()
    loops = LOOPS + (INPUT_LOOPS if a.inputs else []) + (["autoreconf_ms"] if a.autoreconf else [])
    targets = [tuple(s.split("=", 1)) for s in a.shim] + [("tmpfs", None)]
    with tempfile.TemporaryDirectory(dir=a.dir) as tmp:
        res = builds_in_rounds(targets, a.rounds, loops, lambda name, path: one(name, path, a.lines, tmp, a.autoreconf,
                                                                               a.inputs))
    summary = ratio_table(res, [n for n, _ in targets], loops, "us_per_redirection", "loop", 20, 24,
                          lambda m, h, rm: f"{m:7.2f} ±{h:5.2f} {rm:5.2f}x")
    if a.json:
        write_builds_json(a.json, a.dir, targets, a.rounds, {"lines": a.lines}, summary)


if __name__ == "__main__":
    main()
