//! Links GCC's unwinder into the shim (`libgcc_eh.a`, whole, its symbols kept local by the
//! library's version script) instead of loading `libgcc_s.so.1` beside it: Rust's panics
//! need an unwinder, and loading that library into every program the shim starts cost each
//! process about a tenth of a millisecond (its mapping, and its constructor's `cpuid`s,
//! which trap on a virtual machine; `bench/results/shared/process-start-unwinder.json`).
//! Where the C compiler does not know the archive, the shim links `libgcc_s` as before.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let Ok(out) = std::process::Command::new(&cc).arg("-print-file-name=libgcc_eh.a").output() else { return };
    let path = std::path::PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    // An unknown file is printed back as its bare name.
    if !out.status.success() || !path.is_absolute() || !path.exists() {
        return;
    }
    if let Some(dir) = path.parent() {
        println!("cargo:rustc-link-search=native={}", dir.display());
        println!("cargo:rustc-link-lib=static:+whole-archive,-bundle=gcc_eh");
    }
}
