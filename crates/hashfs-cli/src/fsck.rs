//! `hashfs fsck`: check an image (recovering it first, as a mount would, unless `-n`),
//! optionally repair it, and with `--lower` check a stacked mount's PM copies against its
//! lower directory. Exit codes as e2fsck's.

use crate::{fail, mount, open_image, progress_bar, Failure, Steps};
use hashfs::fsck::{self, fsck, FsckMode};
use hashfs::pm::{MmapDevice, OpenMode};
use hashfs::FileSystem;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(clap::Args)]
pub struct Args {
    pub image: PathBuf,
    /// Fix what can be fixed.
    #[arg(long, conflicts_with = "no_recover")]
    pub repair: bool,
    /// Write nothing: no recovery; what a crash left (and recovery would clear) is
    /// listed as "needs recovery", apart from errors, and does not fail the check.
    #[arg(short = 'n', long = "no-recover")]
    pub no_recover: bool,
    /// An image used by `hashfs mount --lower DIR`: check its PM copies against DIR
    /// too (with --repair, make the repairs a stacked mount makes; with -n, on a
    /// copy-on-write view of the image, writing to neither).
    #[arg(long, value_name = "DIR")]
    pub lower: Option<PathBuf>,
}

pub fn run(a: Args) -> Result<u8, Failure> {
    let Args { image, repair, no_recover, lower } = a;
    let dev = match MmapDevice::open(&image, OpenMode::Existing) {
        Ok(d) => Arc::new(d),
        Err(e) => return Err(Failure { msg: format!("cannot open image {}: {e}", image.display()), code: 8 }),
    };
    let pb = progress_bar(0, "checking", Steps::Items);
    let progress = |d, t| {
        pb.set_length(t);
        pb.set_position(d);
    };
    let op_err = |e: hashfs::Error| Failure { msg: format!("fsck {}: {e}", image.display()), code: 8 };
    let report = if repair {
        fsck(dev, FsckMode::Repair, &progress).map_err(op_err)?
    } else if no_recover {
        fsck(dev, FsckMode::Check, &progress).map_err(op_err)?
    } else {
        let (recovery, report) = fsck::recover_then_check(dev, &progress).map_err(op_err)?;
        pb.suspend(|| print_recovery(&recovery));
        report
    };
    pb.finish_and_clear();
    for f in &report.findings {
        let fixed = repair && !report.remaining.contains(f);
        let tag = if fixed {
            "FIXED: "
        } else if report.pending.contains(f) {
            "needs recovery: "
        } else {
            ""
        };
        println!("{tag}{f}");
    }
    let errors = report.findings.len() - report.pending.len();
    println!(
        "{}: {} inodes, {} blocks, {} directories; {} problems found, {} left{}",
        image.display(),
        report.inodes_used,
        report.blocks_used,
        report.directories,
        errors,
        report.remaining.iter().filter(|r| !report.pending.contains(r)).count(),
        if !repair && !report.pending.is_empty() {
            format!(
                "; needs recovery ({} crash leftovers, cleared by a mount or by fsck without -n)",
                report.pending.len()
            )
        } else {
            String::new()
        }
    );
    let code = report.exit_code() as u8;
    match lower {
        Some(lower) if code & 4 == 0 => {
            let how = match (repair, no_recover) {
                (true, _) => StackedCheck::Repair,
                (false, true) => StackedCheck::NoWrite,
                (false, false) => StackedCheck::Recover,
            };
            Ok(code | stacked_fsck(&image, &lower, how)?)
        }
        Some(_) => {
            println!("the PM side is not checked: the image has errors left");
            Ok(code)
        }
        None => Ok(code),
    }
}

fn print_recovery(r: &fsck::Recovery) {
    match r {
        fsck::Recovery::NotNeeded => {}
        fsck::Recovery::Ran(m) => println!(
            "recovered (the image was not cleanly unmounted): {} transactions rolled back, {} reservations and {} unlinked inodes freed",
            m.rolled_back_txids.len(),
            m.stray_slots_freed,
            m.orphans_freed
        ),
        fsck::Recovery::Failed(e) => println!("recovery failed ({e}); checking the image as it is"),
    }
}

/// What `hashfs fsck --lower` may write.
#[derive(Clone, Copy, PartialEq, Eq)]
enum StackedCheck {
    /// Mount the image (recovering it) and check.
    Recover,
    /// `-n`: mount a copy-on-write view of the image: nothing is written, to the image or
    /// to the lower directory (the check itself only reads the lower files).
    NoWrite,
    /// `--repair`: check, then make the repairs a stacked mount makes.
    Repair,
}

/// `hashfs fsck --lower`: the stacked mode's PM copies against the lower directory.
fn stacked_fsck(image: &Path, lower: &Path, how: StackedCheck) -> Result<u8, Failure> {
    let lower = std::fs::canonicalize(lower).map_err(|e| fail(format!("lower directory {}: {e}", lower.display())))?;
    let repair = how == StackedCheck::Repair;
    let checked = if how == StackedCheck::NoWrite {
        let view = Arc::new(hashfs::pm::overlay::Overlay::new(open_image(image)?));
        let (fs, _) = FileSystem::mount(view, &|_, _| {})
            .map_err(|e| fail(format!("cannot mount a view of {}: {e}", image.display())))?;
        hashfs_spfs::absorb::PmStore::check(fs, &lower)
    } else {
        hashfs_spfs::absorb::PmStore::check(mount(image)?, &lower)
    };
    let (sound, problems) = checked.map_err(fail)?;
    for p in &problems {
        println!("{}{p}", if repair { "FIXED: " } else { "" });
    }
    if repair && !problems.is_empty() {
        let (_, rec) = hashfs_spfs::Stack::open(mount(image)?, &lower, Default::default()).map_err(fail)?;
        println!("stacked repairs: {}", rec.repairs());
    }
    println!("PM side over {}: {sound} promoted files sound, {} problems", lower.display(), problems.len());
    Ok(match (problems.is_empty(), repair) {
        (true, _) => 0,
        (false, true) => 1,
        (false, false) => 4,
    })
}
