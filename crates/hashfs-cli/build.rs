//! Records the commit this binary is built from (HASHFS_BUILD_COMMIT), so that benchmark
//! and crash-test JSON name the code that ran, not whatever the working directory holds.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let o = Command::new("git").args(args).output().ok().filter(|o| o.status.success())?;
    Some(String::from_utf8_lossy(&o.stdout).trim().to_string())
}

fn main() {
    // Read when the script runs, not when it is compiled: a script binary built for one
    // checkout is reused by another that shares the target directory.
    let Ok(manifest) = std::env::var("CARGO_MANIFEST_DIR") else {
        println!("cargo:rustc-env=HASHFS_BUILD_COMMIT=unknown");
        return;
    };
    let root = Path::new(&manifest).join("../..");
    for p in ["crates", "Cargo.toml", "Cargo.lock", ".git/HEAD", ".git/refs/heads", ".git/index"] {
        println!("cargo:rerun-if-changed={}", root.join(p).display());
    }
    let commit = match git(&["-C", &root.to_string_lossy(), "rev-parse", "--short", "HEAD"]) {
        None => "unknown".to_string(),
        Some(head) => {
            // The code built differs from the commit (results and docs do not count).
            let status = git(&[
                "-C",
                &root.to_string_lossy(),
                "status",
                "--porcelain",
                "--",
                "crates",
                "Cargo.toml",
                "Cargo.lock",
            ]);
            match status {
                Some(s) if !s.is_empty() => format!("{head}-dirty"),
                _ => head,
            }
        }
    };
    println!("cargo:rustc-env=HASHFS_BUILD_COMMIT={commit}");
}
