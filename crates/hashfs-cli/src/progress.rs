//! The progress bar of long operations (formatting, mounting, checking, aging), one look for
//! both programs: `hashfs` and `hashfs-bench` (which includes this file).

use indicatif::{ProgressBar, ProgressStyle};

/// What a bar's steps count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Steps {
    Bytes,
    /// Inodes, blocks, items: shown as a plain count.
    #[allow(dead_code)] // hashfs-bench, which includes this file, counts bytes only
    Items,
}

/// A bar of `len` steps, labelled `what`; drawn only on a terminal.
pub fn progress_bar(len: u64, what: &str, steps: Steps) -> ProgressBar {
    let pb = ProgressBar::new(len);
    let tmpl = match steps {
        Steps::Bytes => "{msg} [{bar:40}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta})",
        Steps::Items => "{msg} [{bar:40}] {pos}/{len} ({eta})",
    };
    pb.set_style(ProgressStyle::with_template(tmpl).expect("valid template").progress_chars("=> "));
    pb.set_message(what.to_string());
    pb
}
