//! Descriptors across `execve` through the shim (issue 55): a HashFS descriptor without
//! close-on-exec reaches the exec'd program with its open file description (its file, its
//! offset, its flags), as Linux keeps it. The shell's redirections of external commands
//! are the common case: `cmd > f`, `cmd < f`, `cmd >> f`, `2>&1`, a group's output with
//! builtins and programs in turn, a descriptor opened with `exec 4>f` and written by a
//! program, and a `read` builtin taking lines before `cat` takes the rest (in a forked
//! child, and in the process itself through `exec cat`, whose pump hands over the bytes
//! it had put in the pipe).

mod common;
use common::Bounded;

use common::{c_program, image, p};

#[test]
fn a_shells_redirections_reach_the_programs_it_execs() {
    let img = image();
    let script = format!(
        "set -e; export LC_ALL=C; seq 1 5 > {a}; wc -l < {a}; seq 1 100000 > {b}; wc -l < {b}; tail -n 1 < {b}; \
         sort -r {a} > {c}; head -n 2 {c}; seq 6 7 >> {a}; wc -l < {a}; \
         exec 4>{d}; echo one >&4; sh -c 'echo two >&4'; echo three >&4; exec 4>&-; cat {d}; \
         tr a-z A-Z < {d} > {e}; cat {e}; \
         {{ echo first; sh -c 'echo second'; echo third; seq 4 5; }} > {g}; cat {g}; \
         {{ echo out; ls /nonexistent-path || true; }} > {h} 2>&1; cat {h}; \
         {{ read l1; cat; }} < {a}; ( read l1; read l2; exec cat ) < {a}",
        a = p("/a"),
        b = p("/b"),
        c = p("/c"),
        d = p("/d"),
        e = p("/e"),
        g = p("/g"),
        h = p("/h"),
    );
    let out = img.ok("bash", &["-c", &script]);
    let want = "5\n100000\n100000\n5\n4\n7\none\ntwo\nthree\nONE\nTWO\nTHREE\nfirst\nsecond\nthird\n4\n5\nout\n\
                ls: cannot access '/nonexistent-path': No such file or directory\n2\n3\n4\n5\n6\n7\n3\n4\n5\n6\n7\n";
    assert_eq!(out, want);
    img.fsck_clean();
    img.region_removed();
}

/// A program exec'd by a program (not a shell): python opens a file without close-on-exec,
/// writes, and execs another python that writes through the inherited descriptor at the
/// inherited offset, seeks it, and reads it back; and a python that reads part of a
/// redirected standard input execs `cat`, which reads the rest. (With the bytes not given
/// back, the shell's `( read; read; exec cat ) < f` in the test above still passed now
/// and then: its file is smaller than a pipe, and a pump that has pushed all of it and ended
/// has nothing to hand over.)
#[test]
fn an_execd_program_inherits_a_descriptor_and_its_offset() {
    let img = image();
    let second = "import os, sys\nfd = int(sys.argv[1])\nos.write(fd, b'-after')\nos.lseek(fd, 0, os.SEEK_SET)\n\
                  print(os.read(fd, 100).decode())";
    let first = format!(
        "import os, sys\nfd = os.open('{f}', os.O_RDWR | os.O_CREAT, 0o644)\nos.set_inheritable(fd, True)\n\
         os.write(fd, b'before')\nos.execv(sys.executable, [sys.executable, '-c', {second:?}, str(fd)])",
        f = p("/f")
    );
    let out = img.ok("python3", &["-c", &first]);
    assert_eq!(out, "before-after\n");
    // A standard input redirected to a file is a pipe the shim's pump fills: a program
    // reads part of it, then execs another, which must go on where the first stopped (the
    // bytes the pump put in the pipe that no one read go back to the offset). The file is
    // larger than a pipe holds, so that the pump is still at work when the exec comes, and
    // opened read-write (a read-only one would be a snapshot, `input_snapshots.rs`).
    let stdin = format!(
        "import os\nopen('{g}', 'wb').write(b'x' * 200000)\nos.dup2(os.open('{g}', os.O_RDWR), 0)\n\
         print(len(os.read(0, 3)), flush=True)\nos.execvp('wc', ['wc', '-c'])",
        g = p("/g")
    );
    assert_eq!(img.ok("python3", &["-c", &stdin]), "3\n199997\n");
    img.fsck_clean();
    img.region_removed();
}

/// A group's output: the shell's builtins write it through a pump (a pipe the shim drains
/// into the file), and a forked child's program writes it directly; the child's bytes must
/// land after everything the shell wrote before the fork, though the pump may lag (the
/// fork waits until the pump's pipe is empty).
#[test]
fn a_programs_output_lands_after_what_the_shell_wrote_before_it() {
    let img = image();
    let script = format!(
        "for r in 1 2 3; do {{ printf '%.0s-' {{1..200000}}; sh -c 'echo X'; printf '%.0s=' {{1..1000}}; echo; }} > {x}; \
         head -c 200002 {x} | tail -c 3; wc -c < {x}; done",
        x = p("/x")
    );
    let out = img.ok("bash", &["-c", &script]);
    assert_eq!(out, "-X\n201003\n".repeat(3), "the child's line lands where the shell's output ended");
    img.fsck_clean();
}

/// `make -j2` of a C project inside the image: make starts its recipes with `posix_spawn`,
/// gcc its passes with `vfork` and exec; each program finds the working directory inside
/// the image (an exec and a spawn pass it on) and the files make and the compiler wrote.
/// The program is built in the image and run from a copy outside it (the kernel cannot
/// exec a file in the image).
#[test]
fn make_builds_a_c_project_inside_the_image() {
    for tool in ["make", "cc"] {
        if std::process::Command::new(tool).arg("--version").output().is_err() {
            common::skip::skip(&format!("{tool} is not installed"));
            return;
        }
    }
    let img = image();
    let out_dir = tempfile::tempdir().unwrap();
    let copy = out_dir.path().join("prog");
    let script = format!(
        "set -e; export LC_ALL=C; mkdir -p {proj}; cd {proj}; for i in 1 2 3 4; do echo \"int f$i(void) {{ return $i; }}\" > f$i.c; done; \
         printf '#include <stdio.h>\\nint f1(void); int f2(void); int f3(void); int f4(void);\\n\
         int main(void) {{ printf(\"%%d\\\\n\", f1() + f2() + f3() + f4()); return 0; }}\\n' > main.c; \
         printf 'OBJS = main.o f1.o f2.o f3.o f4.o\\nprog: $(OBJS)\\n\\tcc -o $@ $(OBJS)\\n%%.o: %%.c\\n\\tcc -c -o $@ $<\\ncheck: prog\\n\\t./prog\\n' > Makefile; \
         make -j2 -s; cp prog {copy}; ls; make -s -q prog && echo up-to-date; make -s check; ./prog",
        proj = p("/proj"),
        copy = copy.display()
    );
    let out = img.ok("bash", &["-c", &script]);
    // `make check` and the shell run the program where it was built (a copy the kernel
    // can run: `shim/program.rs`).
    assert_eq!(
        out,
        "Makefile\nf1.c\nf1.o\nf2.c\nf2.o\nf3.c\nf3.o\nf4.c\nf4.o\nmain.c\nmain.o\nprog\nup-to-date\n10\n10\n"
    );
    let run = std::process::Command::new(&copy).output_bounded();
    assert_eq!(String::from_utf8_lossy(&run.stdout), "10\n", "the program built in the image");
    img.fsck_clean();
}

/// A program file in the image runs, as the kernel would run it from a file system it can
/// read: a binary as a copy (a memfd run by descriptor), a script by its `#!` interpreter
/// with its one argument and the script's path before the caller's arguments, a script
/// whose interpreter is a script in turn; one without an execute bit is refused (EACCES),
/// by `execve` and by `posix_spawn` (python's `os.posix_spawn`, and `subprocess`, which
/// forks and execs). Without the shim's copy (`exec-image-unserved`) every one of them
/// fails with ENOENT: the kernel cannot see the image.
#[test]
fn programs_and_scripts_in_the_image_run() {
    let img = image();
    let spawn = "import os, sys, subprocess\n\
                 pid = os.posix_spawn(sys.argv[1], ['e', 'spawned'], os.environ)\n\
                 print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n\
                 print(subprocess.run([sys.argv[1], 'forked'], capture_output=True, text=True).stdout.strip())\n\
                 try:\n    os.posix_spawn(sys.argv[2], ['x'], os.environ)\nexcept OSError as e:\n    print(e.errno)";
    let script = format!(
        "set -e; export LC_ALL=C; mkdir {d}; cd {d}; cp /bin/echo e; ./e from a copy; \
         printf '#!/bin/sh\\necho script \"$0\" \"$1\" \"$2\"\\n' > s; chmod +x s; ./s one two; \
         printf '#! {d}/s  -x \\n' > s2; chmod +x s2; {d}/s2 y; printf '#!{d}/s' > s3; chmod +x s3; ./s3; \
         cp e never; chmod -x never; ./never 2>/dev/null || echo refused $?; \
         python3 -c \"{spawn}\" {d}/e {d}/never",
        d = p("/bin"),
    );
    let out = img.ok("bash", &["-c", &script]);
    let d = p("/bin");
    assert_eq!(
        out,
        format!("from a copy\nscript ./s one two\nscript {d}/s -x {d}/s2\nscript {d}/s ./s3 \nrefused 126\nspawned\n0\nforked\n13\n")
    );
    img.fsck_clean();
}

/// Programs in the image found on `PATH` by programs that search it with libc (`env`,
/// `xargs`, python's `os.posix_spawnp`): glibc searches with its own `execve`, which the
/// shim does not see, so the shim searches when a directory of `PATH` is the image's, as
/// glibc does: a file not executable there is passed over for the next directory's, a file
/// that is no program runs by `/bin/sh`, a name found nowhere fails with ENOENT. Without
/// the shim's search (`path-search-unserved`) `env tool` fails with ENOENT and
/// `env echo` runs the system's echo.
#[test]
fn programs_in_the_image_are_found_on_path() {
    let img = image();
    let script = format!(
        "set -e; export LC_ALL=C; mkdir {b}; cp /bin/echo {b}/tool; \
         printf 'echo no shebang \"$0\" \"$1\"\\n' > {b}/plain; chmod +x {b}/plain; \
         printf '#!/bin/sh\\necho image echo \"$@\"\\n' > {b}/echo; chmod +x {b}/echo; \
         printf 'not run' > {b}/hidden; export PATH={b}:$PATH; \
         env tool found by env; echo by xargs | xargs tool; env plain arg; env {b}/plain slash; env echo shadowed; \
         chmod -x {b}/echo; env echo passed over; env hidden 2>/dev/null || echo hidden $?; \
         env nowhere 2>/dev/null || echo nowhere $?; \
         python3 -c \"import os; os.waitpid(os.posix_spawnp('tool', ['tool', 'spawned'], os.environ), 0)\"",
        b = p("/bin"),
    );
    let out = img.ok("bash", &["-c", &script]);
    let b = p("/bin");
    assert_eq!(
        out,
        format!(
            "found by env\nby xargs\nno shebang {b}/plain arg\nno shebang {b}/plain slash\nimage echo shadowed\n\
             passed over\nhidden 126\nnowhere 127\nspawned\n"
        )
    );
    img.fsck_clean();
}

/// Absolute symbolic links in the image, as a program sees them: one under the prefix
/// leads back in (a file, a directory, the root); one elsewhere leads out to the kernel's
/// file, which the shim follows to open, run or stat it (a virtual environment's python is
/// such a link) and refuses for the rest, loudly (EXDEV and a message), rather than
/// looking for that path inside the image.
#[test]
fn absolute_links_lead_into_the_image_or_out_of_it() {
    let img = image();
    let outside = tempfile::tempdir().unwrap();
    let o = outside.path().display();
    let script = format!(
        "export LC_ALL=C; cd /; echo inside > {x}; mkdir {d}; ln -s {x} {d}/abs; ln -s {d} {dl}; ln -s {root} {rl}; \
         cat {d}/abs {dl}/abs {rl}/x; ln -s /bin/echo {e}; {e} run through a link out; test -x {e} && stat -L -c %F {e}; \
         echo kernel file > {o}/k; ln -s {o}/k {out}; cat {out}; ln -s {o} {od}; echo made > {od}/new; cat {o}/new; \
         rm {od}/new 2>&1; echo rc=$?",
        x = p("/x"),
        d = p("/d"),
        dl = p("/dl"),
        root = p(""),
        rl = p("/rl"),
        e = p("/e"),
        out = p("/out"),
        od = p("/od"),
    );
    let out = img.ok("bash", &["-c", &script]);
    let want = format!(
        "inside\ninside\ninside\nrun through a link out\nregular file\nkernel file\nmade\n\
         hashfs_preload: a symbolic link in the image leads out of it, to {o}; the shim follows such links \
         only to open, run or stat what they name (this call fails with EXDEV; `hashfs mount` follows them all)\n\
         rm: cannot remove '{}': Invalid cross-device link\nrc=1\n",
        p("/od/new")
    );
    assert_eq!(out, want);
    if std::process::Command::new("python3").arg("--version").output().is_ok() {
        let venv = format!(
            "python3 -m venv --without-pip {v} && {v}/bin/python -c 'import sys; print(sys.prefix)'",
            v = p("/venv")
        );
        assert_eq!(img.ok("bash", &["-c", &venv]), format!("{}\n", p("/venv")));
    } else {
        common::skip::skip("python3 is not installed");
    }
    img.fsck_clean();
}

/// `system` and `popen` start `sh -c` through glibc's own spawn, which no preload sees: the
/// shim prepares the child's inheritance around them, so a command with relative paths
/// runs in the working directory inside the image (python's `os.system`, and a C program's
/// `popen`).
#[test]
fn system_and_popen_run_commands_in_the_working_directory_inside_the_image() {
    let img = image();
    let script = format!(
        "import os\nos.mkdir('{d}'); os.chdir('{d}')\nopen('f', 'w').write('hello\\n')\n\
         print(os.system('cat f > g'), open('g').read().strip())",
        d = p("/d")
    );
    assert_eq!(img.ok("python3", &["-c", &script]), "0 hello\n");
    let dir = tempfile::tempdir().unwrap();
    let Some(prog) = common::c_program(
        dir.path(),
        "popen",
        r#"#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (chdir(argv[1]) != 0) return 2;
    FILE *p = popen("cat f", "r");
    if (!p) return 3;
    char buf[64] = {0};
    size_t n = fread(buf, 1, sizeof buf - 1, p);
    printf("%zu %d %s", n, pclose(p), buf);
    return 0;
}
"#,
    ) else {
        return;
    };
    assert_eq!(img.ok(prog.to_str().unwrap(), &[&p("/d")]), "6 0 hello\n");
    img.fsck_clean();
}

/// The variadic execs, `execl`, `execlp` and `execle` (glibc's call its own `execve`
/// inside, which no preload sees; the shim's gather the list and exec through its
/// `execv`, `execvp` and `execve`): a C program writes through a descriptor of a file in
/// the image and execs itself with ten arguments (five past the registers), and the new
/// program writes through the inherited descriptor, reads the file back and prints its
/// arguments' count, its last, and execle's environment. And the same `execl` from a
/// `vfork` child (made a `fork` by the shim, since it inherits a HashFS descriptor), after
/// which the parent reads the file.
#[test]
fn the_variadic_execs_hand_descriptors_over() {
    let img = image();
    let dir = tempfile::tempdir().unwrap();
    let Some(prog) = common::c_program(
        dir.path(),
        "lists",
        r#"#include <fcntl.h>
#include <sys/wait.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
extern char **environ;
int main(int argc, char **argv) {
    if (argc > 2 && strcmp(argv[1], "second") == 0) {
        int fd = atoi(argv[2]);
        if (write(fd, "-after", 6) != 6) { perror("write"); return 4; }
        char buf[64] = {0};
        if (pread(fd, buf, sizeof buf - 1, 0) < 0) { perror("pread"); return 5; }
        const char *mark = getenv("LISTS_MARK");
        printf("%s %d %s %s\n", buf, argc, argv[argc - 1], mark ? mark : "-");
        return 0;
    }
    int fd = open(argv[2], O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, "before", 6) != 6) { perror("open"); return 2; }
    char fds[16];
    snprintf(fds, sizeof fds, "%d", fd);
    const char *self = argv[0];
    if (strcmp(argv[1], "l") == 0) {
        execl(self, self, "second", fds, "a", "b", "c", "d", "e", "f", "g", (char *)0);
    } else if (strcmp(argv[1], "vfork") == 0) {
        fflush(stdout);
        pid_t pid = vfork();
        if (pid == 0) {
            execl(self, self, "second", fds, "a", "b", "c", "d", "e", "f", "g", (char *)0);
            _exit(127);
        }
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "child: %d\n", status);
            return 6;
        }
        char buf[64] = {0};
        if (pread(fd, buf, sizeof buf - 1, 0) < 0) { perror("pread"); return 7; }
        printf("parent %s\n", buf);
        return 0;
    } else if (strcmp(argv[1], "lp") == 0) {
        char copy[4096];
        snprintf(copy, sizeof copy, "%s", self);
        setenv("PATH", dirname(copy), 1);
        execlp("lists", "lists", "second", fds, "a", "b", "c", "d", "e", "f", "g", (char *)0);
    } else {
        int n = 0;
        while (environ[n]) n++;
        char **env = calloc(n + 2, sizeof *env);
        memcpy(env, environ, n * sizeof *env);
        env[n] = "LISTS_MARK=env";
        execle(self, self, "second", fds, "a", "b", "c", "d", "e", "f", "g", (char *)0, env);
    }
    perror("exec");
    return 3;
}
"#,
    ) else {
        return;
    };
    for (kind, mark) in [("l", "-"), ("lp", "-"), ("le", "env")] {
        let out = img.ok(prog.to_str().unwrap(), &[kind, &p(&format!("/{kind}"))]);
        assert_eq!(out, format!("before-after 10 g {mark}\n"), "exec{kind}");
    }
    let out = img.ok(prog.to_str().unwrap(), &["vfork", &p("/vfork")]);
    assert_eq!(out, "before-after 10 g -\nparent before-after\n", "vfork, then execl");
    img.fsck_clean();
    img.region_removed();
}

const SPAWN_IN: &str = r#"
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
extern char **environ;

/* argv[1]: the directory; argv[2] "fd": by a descriptor of it (addfchdir_np). */
int main(int argc, char **argv) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (argc > 2 && strcmp(argv[2], "fd") == 0) {
        int d = open(argv[1], O_RDONLY | O_DIRECTORY);
        if (d < 0) { perror("open"); return 1; }
        posix_spawn_file_actions_addfchdir_np(&fa, d);
    } else {
        posix_spawn_file_actions_addchdir_np(&fa, argv[1]);
    }
    char *args[] = {"sh", "-c", "pwd; cat made-here", NULL};
    pid_t pid;
    int r = posix_spawnp(&pid, "sh", &fa, NULL, args, environ);
    if (r != 0) { printf("spawn failed: %d\n", r); return 1; }
    int st;
    waitpid(pid, &st, 0);
    posix_spawn_file_actions_destroy(&fa);
    return WEXITSTATUS(st);
}
"#;

/// A spawn whose file actions change into a directory of the image
/// (`posix_spawn_file_actions_addchdir_np`, which Rust's `Command::current_dir` uses, and so
/// cargo for every test binary it runs): the kernel's child cannot change into it (the spawn
/// failed with ENOENT); the shim starts the child there instead, by an absolute path and by
/// one relative to the parent's working directory, and by a descriptor of it
/// (`posix_spawn_file_actions_addfchdir_np`: the kernel's child changed into the
/// descriptor's placeholder and failed with ENOTDIR). Without it: `spawn-chdir-to-kernel`,
/// `spawn-fchdir-to-kernel`.
#[test]
fn a_spawn_changes_into_a_directory_of_the_image() {
    let img = image();
    let Some(prog) = c_program(img._dir.path(), "spawn_in", SPAWN_IN) else { return };
    let d = p("/d");
    let script = format!(
        "set -e; mkdir -p {d}/sub; echo here > {d}/sub/made-here; {prog} {d}/sub; cd {d}; {prog} sub; {prog} sub fd",
        prog = prog.display()
    );
    assert_eq!(img.ok("bash", &["-c", &script]), format!("{d}/sub\nhere\n{d}/sub\nhere\n{d}/sub\nhere\n"));
    img.fsck_clean();
}

/// An exec that fails for want of its program prepares nothing: the process that mounted
/// the image left it before such an exec (it had no descriptor to hand over) and could
/// not come back, so dash, whose exec tries each directory of `PATH` in turn, said "an exec
/// failed after this process had left the image" once per directory, and a program whose
/// exec failed found its image paths EIO after it.
#[test]
fn an_exec_that_fails_at_once_leaves_the_image_as_it_was() {
    let img = image();
    let script = format!("echo kept > {f}; PATH=/nonexistent-dir:/also-not-here:/usr/bin; exec cat {f}", f = p("/f"));
    let out = img.run("dash", &["-c", &script]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "kept\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "dash's exec through PATH");
    // Kernel files that are no program: one without execute permission (EACCES), one with
    // it whose bytes are neither ELF nor a script (ENOEXEC).
    let dir = tempfile::tempdir().unwrap();
    let (plain, text) = (dir.path().join("plain"), dir.path().join("text"));
    std::fs::write(&plain, "x").unwrap();
    std::fs::write(&text, "just text").unwrap();
    std::fs::set_permissions(&text, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let py = format!(
        "import os\nopen({f:?}, 'w').write('after')\n\
         for prog in ('/nonexistent-program', {plain:?}, {text:?}):\n    try:\n        os.execv(prog, [prog])\n    except OSError as e:\n        print(e.errno)\n\
         print(open({f:?}).read())",
        f = p("/g"),
        plain = plain.to_str().unwrap(),
        text = text.to_str().unwrap(),
    );
    let out = img.run("python3", &["-c", &py]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "2\n13\n8\nafter\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    img.fsck_clean();
    img.region_removed();
}

/// A program exec'd without the shim (its environment cleared: a setuid program, a static
/// binary, `env -i`) that was handed a descriptor never joins to take it over; once it has
/// ended, whoever reaps its slot uncounts the handover (`Participants::take_counted`): the
/// last to leave (first run), or a forked child as it joins (second run, whose child also
/// closes the file right after its fork, which then waits for no one). The third run starts
/// the program by `posix_spawn`, which leaves it no slot of its own: the parent keeps one
/// for it, the spawn's ticket, reaped as the others (`true`, which is often gone by the
/// time `posix_spawn` returns to the parent: before 2026-12-07 the slot was kept only
/// after that, and such a program got none and stayed counted). The fourth and fifth start
/// `sh` by `system`, which tells no pid but returns once its child has ended: its ticket
/// is taken back then, whether the shell joined (fourth) or, without `LD_PRELOAD`, never
/// did (fifth; before 2026-12-07 `system` took no ticket and that shell's count stayed:
/// `system-ticket-kept`). The sixth and seventh start it by `popen`, which tells neither,
/// but whose child is the one new among the thread's children as it returns: the ticket
/// is handed to it as a `posix_spawn`'s, whether the shell joins (sixth) or not (seventh;
/// `popen-child-unhanded`: a ticket left naming the parent counts it as on its way until
/// it leaves; `popen-unticketed`: without a ticket, as before 2026-12-07, the seventh's
/// shell stayed counted).
/// The eighth spawns `cat` with the shim, which joins, reads the file from its standard
/// input and takes the ticket's count (`tests/shared_spawn.rs` has the orders in which
/// its join and the spawn's return can come).
/// Until 2026-12-06 the image's `forks` word kept counting it: the last process to leave
/// took a child to be on its way, left the image unclean and the region in /dev/shm, and
/// a parent that forked kept what it closed until it left.
#[test]
fn a_program_execd_without_the_shim_leaves_the_image_clean() {
    let img = image();
    let py = format!(
        "import os, subprocess, sys\n\
         fd = os.open({f:?}, os.O_CREAT | os.O_RDWR, 0o644)\n\
         os.write(fd, b'handed')\n\
         if sys.argv[1] == 'spawn':\n    os.set_inheritable(fd, True)\n    pid = os.posix_spawn('/bin/true', ['/bin/true'], {{}})\n    assert os.waitpid(pid, 0)[1] == 0\n\
         elif sys.argv[1] == 'system':\n    os.set_inheritable(fd, True)\n    assert os.system('true') == 0\n\
         elif sys.argv[1] == 'system-unjoined':\n    del os.environ['LD_PRELOAD']\n    os.set_inheritable(fd, True)\n    assert os.system('true') == 0\n\
         elif sys.argv[1].startswith('popen'):\n    import ctypes\n    libc = ctypes.CDLL(None)\n    libc.popen.restype = ctypes.c_void_p\n    libc.pclose.argtypes = [ctypes.c_void_p]\n    if sys.argv[1] == 'popen-unjoined':\n        del os.environ['LD_PRELOAD']\n    os.set_inheritable(fd, True)\n    assert libc.pclose(libc.popen(b'cat > /dev/null', b'w')) == 0\n\
         elif sys.argv[1] == 'spawn-joins':\n    os.set_inheritable(fd, True)\n    os.lseek(fd, 0, 0)\n    acts = [(os.POSIX_SPAWN_DUP2, fd, 0), (os.POSIX_SPAWN_OPEN, 1, '/dev/null', os.O_WRONLY, 0)]\n    pid = os.posix_spawn('/bin/cat', ['cat'], os.environ, file_actions=acts)\n    assert os.waitpid(pid, 0)[1] == 0\n\
         else:\n    subprocess.run(['/bin/true'], env={{}}, pass_fds=(fd,), check=True)\n\
         os.close(fd)\n\
         if sys.argv[1] == 'fork':\n    pid = os.fork()\n    if pid == 0:\n        os._exit(0)\n    os.waitpid(pid, 0)\n\
         print(open({f:?}).read())",
        f = p("/f"),
    );
    for how in ["leave", "fork", "spawn", "system", "system-unjoined", "popen", "popen-unjoined", "spawn-joins"] {
        let out = img.run("python3", &["-c", &py, how]);
        assert!(out.status.success(), "{out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "handed\n");
        img.fsck_clean();
        img.region_removed();
    }
}

/// The check that an exec fails at once must not go through the shim: Python's subprocess
/// execs from a `vfork` child through each directory of `PATH`, and the check's own open
/// and close by `syscall()` (which the shim serves) took the closed number out of the
/// shim's table, in that child the parent's: the parent's descriptors were EBADF after
/// `subprocess.run(["true"])` (found 2026-12-05, a regression of the check). Since a vfork
/// of a process that holds the shim's descriptors is a fork (d07a3db), that child no longer
/// runs in the parent's memory, and the check's bug (`exec-check-through-syscall`) was
/// taken out of the planted ones: it cannot be reached.
#[test]
fn a_subprocess_through_path_leaves_the_parents_descriptors() {
    let img = image();
    let py = format!(
        "import os, subprocess\nopen({f:?}, 'w').write('kept')\nfds = [os.open({f:?}, os.O_RDONLY) for _ in range(4)]\n\
         for _ in range(3):\n    subprocess.run(['true'], check=True)\n\
         print([os.pread(fd, 4, 0) for fd in fds])",
        f = p("/f")
    );
    let out = img.run("python3", &["-c", &py]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "[b'kept', b'kept', b'kept', b'kept']\n");
    img.fsck_clean();
}

/// Python's subprocess with a file of the image as a child's standard output or input, or
/// passed with `pass_fds`: its `vfork` child makes close-on-exec descriptors inheritable,
/// puts them on standard descriptors and closes the rest one by one (when `close_range`
/// refuses an empty range) in its parent's memory. The child's output was lost, the parent
/// aborted at exit joining the pump thread the child had started, a passed descriptor was
/// `/dev/null` in the child, and the parent's other descriptors were EBADF after (found
/// 2026-12-05). A `vfork` of a process with the shim's descriptors or pumps is a `fork`
/// now, and the child's `close_range` (or close of every descriptor) keeps the pump it
/// started for its standard input or output (it closed the pump's pipe end: the next
/// program read nothing, 3 runs in 3 at one point, or its output was lost).
#[test]
fn a_subprocess_given_files_of_the_image_gets_them_and_leaves_the_parents() {
    let img = image();
    let py = format!(
        "import os, subprocess\n\
         for _ in range(3):\n    with open({out:?}, 'w') as f: subprocess.run(['echo', 'hi'], stdout=f, check=True)\n    print(repr(open({out:?}).read()))\n\
         open({f:?}, 'w').write('hello')\n\
         a = os.open({f:?}, os.O_RDONLY); b = os.open({f:?}, os.O_RDONLY)\n\
         r = subprocess.run(['cat', f'/dev/fd/{{a}}'], pass_fds=[a], capture_output=True, text=True)\n\
         print(repr(r.stdout), os.pread(a, 5, 0), os.pread(b, 5, 0))\n\
         open({big:?}, 'w').write('x' * 300000)\n\
         for _ in range(3):\n    with open({big:?}) as f: print(repr(subprocess.run(['wc', '-c'], stdin=f, capture_output=True, text=True).stdout))",
        out = p("/out"),
        f = p("/f"),
        big = p("/big")
    );
    // A minute at most (it takes a second): a vfork child that does its parent's work in
    // the parent's memory may leave a lock taken and the parent waiting for ever.
    let out = common::output_within(img.cmd("python3").args(["-c", &py]), std::time::Duration::from_secs(60));
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "'hi\\n'\n'hi\\n'\n'hi\\n'\n'hello' b'hello' b'hello'\n'300000\\n'\n'300000\\n'\n'300000\\n'\n"
    );
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    img.fsck_clean();
}

/// A child whose standard output goes into the image and that closes every descriptor from
/// 3 on, by `close_range` or glibc's `closefrom` (OpenSSH's, daemons'; glibc's calls the
/// interposed `close_range`), closed its pump's pipe end: its next write died of SIGPIPE
/// (found 2026-12-05). The pump's end is kept now.
const CLOSEFROM: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <unistd.h>
#include <sys/wait.h>
#include <linux/close_range.h>
int main(int argc, char **argv) {
    for (int round = 0; round < 3; round++) {
        int f = open(argv[1], O_WRONLY | O_APPEND | O_CLOEXEC);
        pid_t p = fork();
        if (p == 0) {
            dup2(f, 1);
            if (argv[2][0] == 'f') closefrom(3); else close_range(3, ~0U, 0);
            if (write(1, "before\n", 7) != 7) _exit(2);
            execlp("echo", "echo", "after", (char *)0);
            _exit(127);
        }
        int st;
        waitpid(p, &st, 0);
        close(f);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) return 1;
    }
    return 0;
}
"#;

#[test]
fn a_child_that_closes_from_a_number_on_keeps_its_output_into_the_image() {
    let img = image();
    let Some(prog) = c_program(img._dir.path(), "closefrom", CLOSEFROM) else { return };
    img.ok("python3", &["-c", "import sys; open(sys.argv[1], 'w')", &p("/log")]);
    for how in ["closefrom", "close_range"] {
        img.ok(prog.to_str().unwrap(), &[&p("/log"), how]);
    }
    let log = img.ok("cat", &[&p("/log")]);
    assert_eq!(log, "before\nafter\n".repeat(6));
    img.fsck_clean();
}

/// A shell whose standard output went into the image (`exec > f`) redirects commands
/// again: each `cmd >> g` replaces its standard output, whose pump the shell's saved copy
/// of the pipe keeps going, and puts the copy back after. The replaced pump is settled
/// once its pipe is written out (it waited a second for an end that the copy never let
/// come, per redirection) and serves the descriptor again when the copy comes back (it ran
/// on unnamed, so the exit waited for it and could not leave the image: "image not marked
/// clean at exit: device or resource busy", once per `sh` that xargs started).
#[test]
fn a_shell_with_its_output_in_the_image_redirects_again() {
    let img = image();
    let script = format!(
        "exec > {all}; echo a; for i in 1 2 3; do echo $i >> {xs}; done; echo b; \
         seq 1 3 | xargs -I{{}} sh -c 'echo {{}} >> {ys}; echo in-sh'; echo c",
        all = p("/all"),
        xs = p("/xs"),
        ys = p("/ys")
    );
    let out = img.run("bash", &["-c", &script]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "messages at exit");
    let all = img.ok("cat", &[&p("/all")]);
    assert_eq!(all, "a\nb\nin-sh\nin-sh\nin-sh\nc\n");
    assert_eq!(img.ok("cat", &[&p("/xs"), &p("/ys")]), "1\n2\n3\n1\n2\n3\n");
    img.fsck_clean();
    img.region_removed();
}

/// A shell whose output went into the image puts its own standard output back while a
/// background job still writes the pipe the shim's pump drains (the job's builtins write
/// it, after a pause), then execs a program with nothing of the image: the shell leaves
/// the image at the exec, and waits there (a second at most) for the pump to write what the
/// job wrote and close the file (`pump::finish_detached`). Without the wait the exec ended
/// the pump: the file stayed empty and the job's output was lost, and the leaving process
/// said "image not marked clean at exit: device or resource busy".
#[test]
fn an_exec_after_a_redirection_was_undone_waits_for_the_pump_that_goes_on() {
    let img = image();
    let script = format!(
        "exec 3>&1; exec > {f}; (sleep 0.1; for i in $(seq 1 300); do echo $i; done) & exec 1>&3; exec sleep 1",
        f = p("/f")
    );
    let out = img.run("bash", &["-c", &script]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "messages at the exec or at exit");
    let want: String = (1..=300).map(|i| format!("{i}\n")).collect();
    assert!(img.ok("cat", &[&p("/f")]) == want, "the background job's lines are not all in the file");
    img.fsck_clean();
    img.region_removed();
}

/// A pipeline's program whose error output is put on its standard output (`sh -c 'prog
/// 2>&1 | cat'`) while the shell's error output goes into the image: dash, in the child
/// that execs the program, keeps a close-on-exec copy of its standard error (the pipe of
/// the child's own pump) to put it back, replaces it, and execs. The exec leaves the image
/// with that pump still going on its copy; the shim closes the copy as the exec would
/// (`pump::close_exec_write_ends`) rather than wait a second for it. Before 2026-12-07 each
/// such exec waited the second: autoconf's `autoreconf` runs a dozen (13.4 s through the
/// shim against 1.9 s on tmpfs). Twenty pipelines in 10 s: a second each would be 20 s;
/// they take a fraction of one.
#[test]
fn an_exec_with_a_kept_copy_of_its_pumped_error_output_does_not_wait() {
    let img = image();
    let script = format!(
        "exec 2> {e}; s=$(date +%s%N); for i in $(seq 20); do sh -c '/bin/echo out 2>&1 | cat > /dev/null'; done; \
         echo $((($(date +%s%N) - s) / 1000000))",
        e = p("/e")
    );
    let out = img.run("bash", &["-c", &script]);
    assert!(out.status.success(), "{out:?}");
    let ms: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().expect("milliseconds");
    assert!(ms < 10_000, "twenty pipelines took {ms} ms: their execs waited for the pumps of their error output");
    img.fsck_clean();
    img.region_removed();
}

/// A program that closes every descriptor it does not know of (a daemon's start: a loop of
/// `close`, or `close_range`) or `dup2`s onto the number of the shim's descriptor of the
/// image, on a ctFS image, whose view maps the image's pages through that descriptor
/// (`mapping/ctfs/view.rs`): its file still reads back what it wrote. Before, the close
/// left the view to map through a closed number (the read failed with EBADF), and the
/// `dup2` made it map the program's own file (SIGBUS past that file's end, its bytes
/// within it). A close of the kept descriptor is EBADF, a `dup2` onto it EBUSY.
#[test]
fn closing_or_replacing_the_shims_image_descriptor_leaves_the_image_whole() {
    const CLOSER: &str = r#"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static char buf[1 << 20], back[1 << 20];
int main(int argc, char **argv) {
    int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, "x", 1) != 1) { perror("first write"); return 1; }
    if (argv[3][0] == 'l') {
        for (int n = 3; n < 65536; n++) if (n != fd) close(n);
    } else if (argv[3][0] == 'r') {
        close_range(3, fd - 1, 0);
        close_range(fd + 1, ~0U, 0);
    } else {
        char want[PATH_MAX], link[64], got[PATH_MAX];
        if (!realpath(argv[2], want)) { perror("realpath"); return 1; }
        int kept = -1;
        for (int n = 3; n < 65536 && kept < 0; n++) {
            snprintf(link, sizeof link, "/proc/self/fd/%d", n);
            ssize_t k = readlink(link, got, sizeof got - 1);
            if (k > 0 && (got[k] = 0, strcmp(got, want) == 0)) kept = n;
        }
        int other = open("/dev/zero", O_RDONLY);
        int r = dup2(other, kept);
        printf("dup2 onto %s: %s\n", kept >= 100 ? "the kept number" : "?", r < 0 ? strerror(errno) : "done");
    }
    for (int i = 0; i < (int)sizeof buf; i++) buf[i] = (char)(i * 7);
    if (pwrite(fd, buf, sizeof buf, 0) != (ssize_t)sizeof buf) { perror("write"); return 1; }
    if (pread(fd, back, sizeof back, 0) != (ssize_t)sizeof back) { perror("read"); return 1; }
    printf("%s\n", memcmp(buf, back, sizeof buf) == 0 ? "same" : "different");
    return 0;
}
"#;
    let opts = hashfs::FormatOptions { mapping: hashfs::MappingKind::Ctfs, ..hashfs::FormatOptions::default() };
    let img = common::image_in(&std::env::temp_dir(), 64 << 20, &opts);
    let Some(prog) = c_program(img._dir.path(), "closer", CLOSER) else { return };
    let image = img.path.to_str().unwrap();
    for (how, want) in [
        ("loop", "same\n"),
        ("range", "same\n"),
        ("dup2", "dup2 onto the kept number: Device or resource busy\nsame\n"),
    ] {
        let o = img.run(prog.to_str().unwrap(), &[&p("/f"), image, how]);
        assert_eq!(String::from_utf8_lossy(&o.stdout), want, "{how}: {}", String::from_utf8_lossy(&o.stderr));
    }
    img.fsck_clean();
}

/// `wordexp`'s command substitutions run in shells glibc starts with its own spawn: they
/// ran in the kernel's working directory, not the image's, and a descriptor of the image
/// they inherited was a placeholder (`$(cat f)` and `$(cat <&3)` gave nothing; found
/// 2026-12-07). Prepared as for `system` now; `WRDE_NOCMD` starts nothing.
const WORDEXP: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <wordexp.h>
int main(int argc, char **argv) {
    int fd = open(argv[1], O_RDONLY);
    if (fd != 3) return 2;
    wordexp_t w;
    int r = wordexp("$(cat f) $(cat <&3) $(pwd)", &w, 0);
    printf("%d", r);
    for (size_t i = 0; r == 0 && i < w.we_wordc; i++) printf(" %s", w.we_wordv[i]);
    printf(" %d\n", wordexp("$(cat f)", &w, WRDE_NOCMD));
    return 0;
}
"#;

#[test]
fn wordexp_substitutes_commands_in_the_image() {
    let img = image();
    let Some(prog) = c_program(img._dir.path(), "wordexp", WORDEXP) else { return };
    let script = format!("cd {d} && echo inside > f && echo three > g && {prog} g", d = p("/"), prog = prog.display());
    let out = img.ok("bash", &["-c", &script]);
    // 4: WRDE_CMDSUB, a substitution refused under WRDE_NOCMD.
    assert_eq!(out, format!("0 inside three {} 4\n", p("")));
    img.fsck_clean();
    img.region_removed();
}

/// A script that sends its output into the image (`exec > log 2>&1`) and starts a
/// background subshell, then exits (first run) or execs a program (second run). The
/// subshell writes after that, with builtins (stdio: the pipe the shim pumps) and a program.
/// Before 2026-12-07 the script's exit never came: at exit the shim closed the standard
/// descriptor its pump was started for but not the copy `2>&1` made, so the pump waited
/// for an end of its pipe that the process itself held (every `exec > f 2>&1` script hung;
/// bug `exit-pump-copies-open`); and a forked child wrote into its parent's pipe, so the
/// parent's exit waited for the child's end (here for ever: the child waits for the test,
/// which waits for the parent), and after the parent's exec what the child's builtins wrote
/// was lost (bug `child-writes-parents-pipe`). A forked child now has pumps of its own. The
/// pipeline's `echo` (a forked child that puts the pipeline's pipe on 1 over its own pump,
/// which goes on for the copy on 2) waited a second at exit and left the image unclean,
/// its message in the log, until the exit closed the pipes of such pumps too (bug
/// `exit-pump-detached-kept`). The message reached the log only when the pump read it
/// before the child's end, so the test also times five such pipelines: under 4 s, where
/// the second each waited would make them 5 s at least.
#[test]
fn a_background_subshell_writes_after_its_scripts_exit_or_exec() {
    let img = image();
    let timed = format!(
        "exec > {log} 2>&1; s=$(date +%s%N); for i in 1 2 3 4 5; do echo piped | cat; done; \
         echo $((($(date +%s%N) - s) / 1000000)) > {ms}",
        log = p("/timed.log"),
        ms = p("/timed.ms")
    );
    let out = common::output_within(img.cmd("bash").args(["-c", &timed]), std::time::Duration::from_secs(30));
    assert!(out.status.success(), "{out:?}");
    let ms: u64 = img.ok("cat", &[&p("/timed.ms")]).trim().parse().expect("milliseconds");
    assert!(ms < 4_000, "five pipelines took {ms} ms: each pipeline's echo waited for its pump at exit");
    assert_eq!(img.ok("cat", &[&p("/timed.log")]), "piped\n".repeat(5));
    for (run, end) in [("exit", "echo parent-done"), ("exec", "exec /bin/echo parent-exec")] {
        let (log, go, done) = (p(&format!("/{run}.log")), p(&format!("/{run}.go")), p(&format!("/{run}.done")));
        let script = format!(
            "exec > {log} 2>&1; echo first; echo piped | cat; \
             ( echo $BASHPID > {done}; while [ ! -e {go} ]; do sleep 0.05; done; echo late-subshell; echo late-err >&2; /bin/echo late-program ) & {end}"
        );
        let out = common::output_within(img.cmd("bash").args(["-c", &script]), std::time::Duration::from_secs(30));
        assert!(out.status.success(), "{run}: {out:?}");
        assert!(let_go_and_wait(&img, &go, &done), "{run}: the subshell did not finish");
        let last = if run == "exit" { "parent-done" } else { "parent-exec" };
        assert_eq!(
            img.ok("cat", &[&log]),
            format!("first\npiped\n{last}\nlate-subshell\nlate-err\nlate-program\n"),
            "{run}"
        );
    }
    img.fsck_clean();
    img.region_removed();
}

/// A program started by `posix_spawn` inherits its parent's standard output as it is, the
/// pipe of the parent's pump (no code of the shim runs between the spawn and the exec).
/// Named to it, it puts a pump of its own there as it joins (one for `2>&1`'s two), so the
/// parent's exit no longer waits for its end: before 2026-12-07 it did (here for ever: the
/// program waits for the test, which waits for the script; bug `spawn-pumps-unnamed`). A
/// standard descriptor the spawn's file actions replaced (a pipe the parent reads) is left
/// as it is (`spawn-pump-pipe-unchecked`: the output went into the file instead).
#[test]
fn a_spawned_program_writes_after_its_parents_exit() {
    let img = image();
    let (log, go, done) = (p("/spawn.log"), p("/spawn.go"), p("/spawn.done"));
    let py = format!(
        "import os\n\
         r, w = os.pipe()\n\
         pid = os.posix_spawn('/bin/echo', ['echo', 'captured'], os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, w, 1)])\n\
         os.close(w)\nos.waitpid(pid, 0)\nprint('got', os.read(r, 100).decode().strip(), flush=True)\n\
         os.posix_spawn('/bin/sh', ['sh', '-c', 'echo $$ > {done}; echo spawned; while [ ! -e {go} ]; do sleep 0.05; done; echo late; echo late-err >&2'], os.environ)\n\
         os.write(1, b'python-exits\\n')"
    );
    let script = format!("exec > {log} 2>&1; echo first; python3 -c \"$1\"; echo parent-done");
    let out =
        common::output_within(img.cmd("bash").args(["-c", &script, "bash", &py]), std::time::Duration::from_secs(30));
    assert!(out.status.success(), "{out:?}");
    assert!(let_go_and_wait(&img, &go, &done), "the spawned program did not finish");
    let text = img.ok("cat", &[&log]);
    // The spawned program's first line races python's and the script's last; the rest is
    // in order. (Python's line is one write: with PYTHONUNBUFFERED set, as on some hosts,
    // `print` writes its text and its newline apart, and the spawned line could come
    // between them, as on Linux.)
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 7, "{text}");
    assert_eq!((&lines[..2], &lines[5..]), (&["first", "got captured"][..], &["late", "late-err"][..]), "{text}");
    let mut racing = lines[2..5].to_vec();
    let at = |l: &str| racing.iter().position(|&r| r == l);
    assert!(at("python-exits") < at("parent-done"), "{text}");
    racing.sort_unstable();
    assert_eq!(racing, ["parent-done", "python-exits", "spawned"], "{text}");
    img.fsck_clean();
    img.region_removed();
}

/// Lets a background process that wrote its pid into `done` and waits for file `go` go
/// on, then waits until it has ended (left the image): whether it did within 30 s (if not,
/// it and its children are killed).
fn let_go_and_wait(img: &common::Image, go: &str, done: &str) -> bool {
    img.ok("touch", &[go]);
    let wait = format!(
        "for i in $(seq 600); do [ -s {done} ] && break; sleep 0.05; done; pid=$(cat {done}) || exit 1; \
         for i in $(seq 600); do {{ [ -e /proc/$pid ] && ! grep -q '^State:.*Z' /proc/$pid/status; }} || exit 0; sleep 0.05; done; \
         pkill -9 -P $pid; kill -9 $pid; exit 1"
    );
    img.run("bash", &["-c", &wait]).status.success()
}

/// A background subshell reading the script's standard input, a file of the image, after
/// the script has exited. Its input stays the parent's pump's pipe (one stream for both);
/// the child kept a copy of the pump's end of it, so once the parent had gone, `wc` waited
/// for ever for an end of its input (found 2026-12-07; bug `child-keeps-input-pump-end`).
/// It ends now; what it reads after the parent's exit is what the pipe held then (the
/// rest of the file is not pumped: docs/shim.md). The input is opened read-write (`0<>`):
/// a read-only one of this size is a snapshot, which the child shares with no pump.
#[test]
fn a_background_reader_of_the_scripts_input_ends_after_the_script() {
    let img = image();
    let (input, count, go, done) = (p("/in"), p("/count"), p("/in.go"), p("/in.done"));
    img.ok("bash", &["-c", &format!("seq 1 100000 > {input}")]);
    let script = format!(
        "exec 0<> {input}; read first; echo $first; \
         ( echo $BASHPID > {done}; while [ ! -e {go} ]; do sleep 0.05; done; wc -l > {count} ) <&0 > /dev/null 2>&1 & echo parent-exits"
    );
    let out = common::output_within(img.cmd("bash").args(["-c", &script]), std::time::Duration::from_secs(30));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "1\nparent-exits\n", "{out:?}");
    assert!(let_go_and_wait(&img, &go, &done), "the reader did not end");
    let lines: u64 = img.ok("cat", &[&count]).trim().parse().unwrap();
    assert!((1..=99_999).contains(&lines), "{lines}");
    img.fsck_clean();
    img.region_removed();
}
