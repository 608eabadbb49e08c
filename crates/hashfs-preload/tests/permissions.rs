//! Permissions through the shim, as the kernel checks them: a user who may not read,
//! write, search, create or remove gets EACCES or EPERM where the kernel gives them
//! (`fs/perm.rs`). Before, the shim checked no permission but exec's and access's, so any
//! user of the image read root's 0600 files, wrote its 0644 ones and made and removed names
//! in directories it could not write. The same script runs as an unprivileged user on a
//! tmpfs and through the shim, and the answers must be the kernel's.

mod common;
use common::Bounded;

use common::{image_in, p, PY_ANSWERS};
use hashfs::FormatOptions;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

/// As root: files and directories of every kind of permission in the directory argv[1].
const SETUP: &str = r#"
import os, sys
d = sys.argv[1]
os.chmod(d, 0o777)
def f(path, mode, uid=0):
    with open(d + path, "w") as fh:
        fh.write("x")
    os.chmod(d + path, mode)
    os.chown(d + path, uid, uid)
def m(path, mode, uid=0):
    os.mkdir(d + path)
    os.chmod(d + path, mode)
    os.chown(d + path, uid, uid)
f("/secret", 0o600); f("/ro", 0o644); f("/others", 0o604); f("/gone", 0o600)
m("/closed", 0o700); f("/closed/f", 0o644)
m("/noread", 0o711); f("/noread/f", 0o644)
m("/nowrite", 0o755); f("/nowrite/f", 0o666); m("/nowrite/d", 0o777)
m("/sticky", 0o1777); f("/sticky/roots", 0o666)
m("/nobodys", 0o755, 65534); m("/nobodys/roots", 0o755); m("/nobodys/own", 0o755, 65534)
f("/nobodys/mine", 0o400, 65534)
"#;

/// As user nobody: each call's answer (after [`PY_ANSWERS`]).
const ACTIONS: &str = r#"
def w(path, flags):
    os.close(os.open(d + path, flags, 0o644))
t("read secret", lambda: w("/secret", os.O_RDONLY))
t("read ro", lambda: w("/ro", os.O_RDONLY))
t("write ro", lambda: w("/ro", os.O_WRONLY | os.O_APPEND))
t("truncate ro read-only", lambda: w("/ro", os.O_RDONLY | os.O_TRUNC))
t("create over ro", lambda: w("/ro", os.O_WRONLY | os.O_CREAT))
t("exclusive over ro", lambda: w("/ro", os.O_WRONLY | os.O_CREAT | os.O_EXCL))
t("read others as other", lambda: w("/others", os.O_RDONLY))
t("read own 0400", lambda: w("/nobodys/mine", os.O_RDONLY))
t("write own 0400", lambda: w("/nobodys/mine", os.O_WRONLY))
t("access R secret", lambda: os.access(d + "/secret", os.R_OK))
t("access W ro", lambda: os.access(d + "/ro", os.W_OK))
t("eaccess R secret", lambda: os.access(d + "/secret", os.R_OK, effective_ids=True))
t("access bad mode", lambda: os.access(d + "/ro", 0o10))
t("stat in closed", lambda: os.stat(d + "/closed/f"))
t("list closed", lambda: os.listdir(d + "/closed"))
t("O_PATH of closed", lambda: w("/closed", os.O_PATH))
t("chdir closed", lambda: os.chdir(d + "/closed"))
t("list noread", lambda: os.listdir(d + "/noread"))
t("read through noread", lambda: w("/noread/f", os.O_RDONLY))
t("create in nowrite", lambda: w("/nowrite/new", os.O_WRONLY | os.O_CREAT))
t("write in nowrite", lambda: w("/nowrite/f", os.O_WRONLY))
t("mkdir in nowrite", lambda: os.mkdir(d + "/nowrite/dd"))
t("mkdir existing in nowrite", lambda: os.mkdir(d + "/nowrite/d"))
t("symlink in nowrite", lambda: os.symlink("x", d + "/nowrite/l"))
t("mkfifo in nowrite", lambda: os.mkfifo(d + "/nowrite/p"))
t("unlink in nowrite", lambda: os.unlink(d + "/nowrite/f"))
t("unlink missing in nowrite", lambda: os.unlink(d + "/nowrite/none"))
t("unlink a dir in nowrite", lambda: os.unlink(d + "/nowrite/d"))
t("rmdir in nowrite", lambda: os.rmdir(d + "/nowrite/d"))
t("rename out of nowrite", lambda: os.rename(d + "/nowrite/f", d + "/f2"))
t("rename into nowrite", lambda: os.rename(d + "/gone", d + "/nowrite/g"))
t("link into nowrite", lambda: os.link(d + "/nobodys/mine", d + "/nowrite/l2"))
t("link to root's 0644", lambda: os.link(d + "/ro", d + "/ro2"))
t("link to own", lambda: os.link(d + "/nobodys/mine", d + "/mine2"))
t("create in sticky", lambda: w("/sticky/mine", os.O_WRONLY | os.O_CREAT))
t("unlink root's in sticky", lambda: os.unlink(d + "/sticky/roots"))
t("rename root's in sticky", lambda: os.rename(d + "/sticky/roots", d + "/sticky/r2"))
t("replace root's in sticky", lambda: os.rename(d + "/sticky/mine", d + "/sticky/roots"))
t("write root's 0666 in sticky", lambda: w("/sticky/roots", os.O_WRONLY))
t("unlink own in sticky", lambda: os.unlink(d + "/sticky/mine"))
t("move root's dir to another parent", lambda: os.rename(d + "/nobodys/roots", d + "/moved"))
t("rename root's dir in its parent", lambda: os.rename(d + "/nobodys/roots", d + "/nobodys/renamed"))
t("move own dir to another parent", lambda: os.rename(d + "/nobodys/own", d + "/own"))
t("unlink root's 0600 in 0777", lambda: os.unlink(d + "/secret"))
t("chmod root's", lambda: os.chmod(d + "/ro", 0o666))
t("utime root's now", lambda: os.utime(d + "/ro"))
t("truncate root's by path", lambda: os.truncate(d + "/ro", 0))
"#;

/// The system's Python, which user nobody may run (root's PATH may lead elsewhere).
const PYTHON: &str = "/usr/bin/python3";

/// As root that took nobody's effective ids (a server that drops privileges): `access`
/// answers for the real ids, the path's search included, `faccessat` with `AT_EACCESS` for
/// the effective ones. (A program started with real and effective ids apart runs in
/// secure mode, where the loader ignores LD_PRELOAD.)
const ACCESS_IDS: &str = r#"
import os, sys
d = sys.argv[1]
os.setegid(65534)
os.seteuid(65534)
print("ids", os.getuid(), os.geteuid())
for path in ["/ro", "/closed/f", "/nobodys/mine"]:
    print(path, os.access(d + path, os.R_OK), os.access(d + path, os.W_OK),
          os.access(d + path, os.R_OK, effective_ids=True), os.access(d + path, os.W_OK, effective_ids=True))
"#;

fn as_nobody(cmd: &mut Command, script: &str, dir: &str) -> String {
    as_user(cmd, &["--reuid=65534", "--regid=65534"], script, dir)
}

fn as_user(cmd: &mut Command, ids: &[&str], script: &str, dir: &str) -> String {
    let o = cmd.args(ids).args(["--clear-groups", PYTHON, "-c", script, dir]).output_bounded();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn an_unprivileged_user_gets_the_kernels_answers() {
    // SAFETY: no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        assert!(std::env::var_os("CI").is_none(), "CI runs the suite as root");
        eprintln!("skipped: the test makes files of other users (run as root)");
        return;
    }
    // The kernel's answers on a tmpfs.
    let kdir = tempfile::tempdir_in("/dev/shm").unwrap();
    let kpath = kdir.path().to_str().unwrap();
    let o = Command::new(PYTHON).args(["-c", SETUP, kpath]).output_bounded();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let actions = format!("{PY_ANSWERS}{ACTIONS}");
    let kernel = as_nobody(&mut Command::new("setpriv"), &actions, kpath);
    // The shim's, on an image nobody may write (in a directory it may search).
    let img = image_in(std::path::Path::new("/dev/shm"), 64 << 20, &FormatOptions::default());
    std::fs::set_permissions(img.path.parent().unwrap(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&img.path, std::fs::Permissions::from_mode(0o666)).unwrap();
    img.ok(PYTHON, &["-c", SETUP, &p("")]);
    let shim = as_nobody(&mut img.cmd("setpriv"), &actions, &p(""));
    assert!(kernel.contains("EACCES") && kernel.contains("EPERM"), "{kernel}");
    let (k, s): (Vec<&str>, Vec<&str>) = (kernel.lines().collect(), shim.lines().collect());
    let differ: Vec<String> =
        k.iter().zip(&s).filter(|(a, b)| a != b).map(|(a, b)| format!("kernel: {a:<40} shim: {b}")).collect();
    assert!(differ.is_empty() && k.len() == s.len(), "answers differ:\n{}", differ.join("\n"));
    let o = Command::new(PYTHON).args(["-c", ACCESS_IDS, kpath]).output_bounded();
    let kernel_ids = String::from_utf8_lossy(&o.stdout);
    assert!(kernel_ids.starts_with("ids 0 65534\n") && kernel_ids.contains("True True False False"), "{kernel_ids}");
    assert_eq!(img.ok(PYTHON, &["-c", ACCESS_IDS, &p("")]), kernel_ids, "access by real ids");
    img.fsck_clean();
}
