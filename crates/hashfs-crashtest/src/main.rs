//! `hashfs-crashtest`: `hashfs crashtest` as a program of its own, which links the file
//! system alone (not the mount, the stacked mode or the benchmarks): scripts/crash-bugs.sh
//! rebuilds it once per deliberate bug, and this is what each rebuild compiles and links.

#![forbid(unsafe_code)]

use clap::Parser;

/// Explore crash states: run workloads on a crash-simulating device, recover every image a
/// power failure could leave, and check it (exit 1 on any failure).
#[derive(Parser)]
#[command(name = "hashfs-crashtest")]
struct Cli {
    #[command(flatten)]
    args: hashfs_crashtest::CrashtestArgs,
}

fn main() -> std::process::ExitCode {
    match hashfs_crashtest::run(Cli::parse().args) {
        Ok(0) => std::process::ExitCode::SUCCESS,
        Ok(_) => std::process::ExitCode::from(1),
        Err(e) => {
            eprintln!("hashfs-crashtest: {e}");
            std::process::ExitCode::from(2)
        }
    }
}
