//! Shared libraries in the image, loaded by `dlopen` through the shim (`shim/library.rs`):
//! the dynamic loader opens with its own system calls, so before, every library built or
//! installed in the image failed to load ("cannot open shared object file"), a compiled
//! Python extension in a virtual environment there among them.

mod common;

use common::skip::skip;
use common::{image, p};
use std::path::Path;
use std::process::Command;

/// A C host that loads each library named (`!cmd` runs cmd instead), calls its `plug`,
/// loads it again to compare handles, and closes both.
const HOST: &str = r#"
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '!') { if (system(argv[i] + 1) != 0) return 1; continue; }
        void *h = dlopen(argv[i], RTLD_NOW);
        if (!h) { printf("%s: error\n", argv[i]); continue; }
        int (*f)(void) = (int (*)(void))dlsym(h, "plug");
        void *again = dlopen(argv[i], RTLD_NOW);
        printf("%s: %d %s\n", argv[i], f ? f() : -1, h == again ? "same" : "other");
        dlclose(again);
        dlclose(h);
    }
    return 0;
}
"#;

/// A Python extension module.
const EXTENSION: &str = r#"
#include <Python.h>
static PyObject *answer(PyObject *self, PyObject *args) { return PyLong_FromLong(42); }
static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, 0}, {0}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "hello", 0, -1, methods};
PyMODINIT_FUNC PyInit_hello(void) { return PyModule_Create(&module); }
"#;

/// Debian's python3's header directory and extension suffix, if its headers are installed.
fn python_build() -> Option<(String, String)> {
    let o = Command::new("/usr/bin/python3")
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['include']); print(sysconfig.get_config_var('EXT_SUFFIX'))",
        ])
        .output()
        .ok()?;
    let out = String::from_utf8(o.stdout).ok()?;
    let mut lines = out.lines();
    let (inc, suffix) = (lines.next()?.to_string(), lines.next()?.to_string());
    Path::new(&inc).join("Python.h").exists().then_some((inc, suffix))
}

/// Libraries built in the image and loaded from it: by absolute and relative path, twice
/// (one handle), with a dependency in the image found through `$ORIGIN` and loaded first;
/// a rebuilt dependency loaded again in the same process is the new one; a directory fails
/// with the loader's error and the shim's reason; a bare name
/// is still searched along the *caller's* RUNPATH (the exported `dlopen` jumps to libc's
/// with the caller's return address); and a Python extension module imported from the
/// image.
#[test]
fn libraries_in_the_image_load_with_dlopen() {
    let Some((include, suffix)) = python_build() else {
        skip("Debian's python3 headers (python3-dev) are not installed");
        return;
    };
    let img = image();
    let dir = img._dir.path();
    // The host, with a RUNPATH to a kernel directory holding libkernel.so.
    let kdir = dir.join("kernel-libs");
    std::fs::create_dir(&kdir).unwrap();
    std::fs::write(dir.join("host.c"), HOST).unwrap();
    std::fs::write(dir.join("k.c"), "int plug(void) { return 7; }\n").unwrap();
    let cc = |args: &[&str]| {
        let st = Command::new("cc").current_dir(dir).args(args).status();
        if !st.is_ok_and(|s| s.success()) {
            skip("cc is not installed");
            return false;
        }
        true
    };
    let k = kdir.join("libkernel.so");
    if !cc(&["-shared", "-fPIC", "-o", k.to_str().unwrap(), "k.c"])
        || !cc(&["-o", "host", "host.c", &format!("-Wl,-rpath,{},--enable-new-dtags", kdir.display())])
    {
        return;
    }
    std::fs::write(dir.join("hello.c"), EXTENSION).unwrap();
    let (lib, plug) = (p("/lib"), p("/plug"));
    let host = dir.join("host");
    let script = format!(
        "set -e; mkdir -p {lib} {plug} {py}; cd {lib}; \
         echo 'int dep(void) {{ return 40; }}' > dep.c; echo 'int dep(void); int plug(void) {{ return dep() + 2; }}' > plug.c; \
         cc -shared -fPIC -Wl,-soname,libdep.so -o libdep.so dep.c; \
         cd {plug}; cc -shared -fPIC -o libplug.so {lib}/plug.c -L{lib} -ldep '-Wl,-rpath,$ORIGIN/../lib'; \
         {host} {plug}/libplug.so ./libplug.so libkernel.so \
           \"!sed -i s/40/41/ {lib}/dep.c && cc -shared -fPIC -Wl,-soname,libdep.so -o {lib}/libdep.so {lib}/dep.c\" \
           {plug}/libplug.so {plug}/none.so {plug}; \
         cc -shared -fPIC -I{include} -o {py}/hello{suffix} {dir}/hello.c; \
         PYTHONPATH={py} /usr/bin/python3 -c 'import hello; print(hello.answer())'",
        py = p("/py"),
        host = host.display(),
        dir = dir.display(),
    );
    let o = img.run("bash", &["-c", &script]);
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{out}{err}");
    assert_eq!(
        out,
        format!(
            "{plug}/libplug.so: 42 same\n./libplug.so: 42 same\nlibkernel.so: 7 same\n{plug}/libplug.so: 43 same\n\
             {plug}/none.so: error\n{plug}: error\n42\n"
        ),
        "{err}"
    );
    assert_eq!(err.matches("could not be copied for the loader").count(), 1, "{err}");
    assert!(err.contains(&format!("dlopen {plug}: the library in the image could not be copied")), "{err}");
    img.fsck_clean();
}
