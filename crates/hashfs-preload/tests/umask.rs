//! The file-mode creation mask through the shim: what it creates in the image gets the mode
//! asked for less the process's umask, as the kernel's files do, and it reads the mask
//! without setting it, so that a thread creating a file outside the image meanwhile gets
//! the program's mask (reading it by setting and restoring it, as the shim did until
//! 2026-12-03, let such a file be made with 022 for a moment).

mod common;
use common::Bounded;

use common::{c_program, image, p};

const PROGRAM: &str = r#"
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *pm, *out;
static volatile int done;
static volatile long made;

static void *inside(void *arg) {
    char path[4096];
    /* Until the other thread has made enough files beside these creates (a loaded
       machine may run it little meanwhile). */
    for (int i = 0; i < 4000 || made < 200; i++) {
        snprintf(path, sizeof path, "%s/f%d", pm, i % 50);
        int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0666);
        if (fd < 0) { perror(path); exit(2); }
        close(fd);
        unlink(path);
    }
    done = 1;
    return arg;
}

int main(int argc, char **argv) {
    pm = argv[1];
    out = argv[2];
    char path[4096];
    struct stat st;
    /* The shim reads the mask at a first create, then must follow umask. */
    snprintf(path, sizeof path, "%s/before", pm);
    int b = open(path, O_CREAT | O_WRONLY, 0666);
    if (b < 0) { perror(path); return 2; }
    fstat(b, &st);
    close(b);
    printf("before %o\n", st.st_mode & 0777);
    umask(077);
    snprintf(path, sizeof path, "%s/file", pm);
    int fd = open(path, O_CREAT | O_WRONLY, 0666);
    if (fd < 0) { perror(path); return 2; }
    close(fd);
    snprintf(path, sizeof path, "%s/dir", pm);
    if (mkdir(path, 0777) != 0) { perror(path); return 2; }
    snprintf(path, sizeof path, "%s/file", pm);
    stat(path, &st);
    printf("file %o\n", st.st_mode & 0777);
    snprintf(path, sizeof path, "%s/dir", pm);
    stat(path, &st);
    printf("dir %o\n", st.st_mode & 0777);
    pthread_t t;
    pthread_create(&t, NULL, inside, NULL);
    long loose = 0;
    while (!done) {
        snprintf(path, sizeof path, "%s/g", out);
        int g = open(path, O_CREAT | O_EXCL | O_WRONLY, 0666);
        if (g < 0) { perror(path); return 2; }
        fstat(g, &st);
        close(g);
        unlink(path);
        made++;
        if ((st.st_mode & 0777) != 0600) loose++;
    }
    pthread_join(t, NULL);
    printf("outside %ld made, %ld not 600\n", made, loose);
    return 0;
}
"#;

#[test]
fn files_get_the_programs_umask_in_the_image_and_beside_it() {
    let img = image();
    let Some(prog) = c_program(img._dir.path(), "umask_race", PROGRAM) else { return };
    let outside = img._dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let mut cmd = img.cmd(prog.to_str().unwrap());
    cmd.args([p(""), outside.to_str().unwrap().to_string()]);
    // SAFETY: umask in the child before it execs (this process is not under the shim).
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            libc::umask(0o022);
            Ok(())
        });
    }
    let o = cmd.output_bounded();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text} {}", String::from_utf8_lossy(&o.stderr));
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("before 644"), "{text}");
    assert_eq!(lines.next(), Some("file 600"), "{text}");
    assert_eq!(lines.next(), Some("dir 700"), "{text}");
    let last = lines.next().unwrap_or_default();
    let made: u64 = last.split(' ').nth(1).and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!(made > 100, "too few files made outside beside the creates in the image: {last}");
    assert!(last.ends_with(", 0 not 600"), "files made outside the image while it created its own: {last}");
    img.fsck_clean();
}
