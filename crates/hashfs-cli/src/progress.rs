//! The progress bar of long operations (formatting, mounting, checking, aging), one look for
//! both programs: `hashfs` and `hashfs-bench` (which includes this file).

use indicatif::{ProgressBar, ProgressStyle};

/// A bar of `len` steps (bytes when `bytes`), labelled `what`; drawn only on a terminal.
pub fn progress_bar(len: u64, what: &str, bytes: bool) -> ProgressBar {
    let pb = ProgressBar::new(len);
    let tmpl = if bytes {
        "{msg} [{bar:40}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta})"
    } else {
        "{msg} [{bar:40}] {pos}/{len} ({eta})"
    };
    pb.set_style(ProgressStyle::with_template(tmpl).expect("valid template").progress_chars("=> "));
    pb.set_message(what.to_string());
    pb
}
