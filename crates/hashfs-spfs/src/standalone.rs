//! SPFS's standalone placement of new files (issue 58; the paper's §3, *Standalone mode*,
//! and the released code's `spfs_create_interest`): a file made with `O_SYNC`, `O_DSYNC`
//! or `O_DIRECT`, in a directory an administrator marked with the `user.hashfs.boost`
//! extended attribute, or whose name has an extension given with `extension=` starts in
//! PM, where the Sync Point Profiler would wait for 30 fsyncs of its own.
//!
//! What it gives the stack beyond SPFS's reasons: the mount's passthrough (docs/stacked.md)
//! chooses a file's mode at its *first* open, and a file opened once before its first
//! fsync (a write-ahead log) could never be promoted while open. These are the files known
//! to sync before that open. A file made so that then does not sync goes back below as any
//! promoted file does.
//!
//! Differences from the released SPFS: an extension matches a whole dot-separated part of
//! the name (`x.log` and `x.log.1` for `log`, not `x.logger`: SPFS compares a prefix); the
//! attribute counts on the directory it is set on only (SPFS's in-core flag spreads to the
//! subdirectories looked up under it while mounted); `O_DSYNC` counts as `O_SYNC` does
//! (Linux's `O_SYNC` includes its bit). The attribute lives on the lower directory, so it
//! survives remounts and is seen by both front ends; it is read at most once a second per
//! directory (a change through the mount is seen at once).

use crate::absorb::Key;
use crate::{lock, Stack};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The extended attribute that marks a directory whose new files start in PM (SPFS's
/// `user.SPFS.boost`); its value is not read.
pub const BOOST_XATTR: &str = "user.hashfs.boost";

/// How long a directory's attribute, once read, is taken as it was.
const BOOST_TTL: Duration = Duration::from_secs(1);

/// Directories whose attribute is remembered at once.
const MAX_DIRS: usize = 4096;

/// Extensions given at most, and their longest (SPFS: 16 of 8 bytes).
pub const MAX_EXTENSIONS: usize = 32;
pub const MAX_EXTENSION_LEN: usize = 32;

/// A file being made: what the front end knows of it.
pub struct Made<'a> {
    /// The lower directory it is made in, and a path that reaches it (the mount's
    /// `/proc/self/fd` path of its descriptor, the shim's path).
    pub dir: Key,
    pub dir_path: &'a Path,
    pub name: &'a [u8],
    /// The open's flags.
    pub flags: i32,
}

/// Why a file made now starts in PM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// `O_SYNC`, `O_DSYNC` or `O_DIRECT` at its creation.
    Flags,
    /// Its name has one of the mount's extensions.
    Extension,
    /// Its directory carries [`BOOST_XATTR`].
    Boosted,
}

/// Whether `name` has `ext` as one of its dot-separated parts after the first character
/// (case does not matter).
pub fn has_extension(name: &[u8], ext: &str) -> bool {
    let ext = ext.as_bytes();
    name.iter().enumerate().skip(1).filter(|&(_, &c)| c == b'.').any(|(i, _)| {
        let rest = &name[i + 1..];
        rest.len() >= ext.len()
            && rest[..ext.len()].eq_ignore_ascii_case(ext)
            && rest.get(ext.len()).is_none_or(|&c| c == b'.')
    })
}

/// An `extension=` option's value, checked.
pub fn valid_extension(v: &str) -> bool {
    !v.is_empty() && v.len() <= MAX_EXTENSION_LEN && !v.bytes().any(|c| matches!(c, b'.' | b'/' | b',' | 0))
}

/// Directories' attribute as last read.
#[derive(Default)]
pub struct Boosts(Mutex<HashMap<Key, (bool, Instant)>>);

impl Stack {
    /// Why the file being made starts in PM by SPFS's standalone rules, if it does (none
    /// with `standalone=off`). The cheap reasons first; the attribute last.
    pub fn standalone_reason(&self, made: &Made) -> Option<Reason> {
        if !self.cfg.standalone {
            return None;
        }
        if made.flags & (libc::O_SYNC | libc::O_DSYNC | libc::O_DIRECT) != 0 {
            return Some(Reason::Flags);
        }
        if self.cfg.extensions.iter().any(|e| has_extension(made.name, e)) {
            return Some(Reason::Extension);
        }
        self.boosted(made.dir, made.dir_path).then_some(Reason::Boosted)
    }

    /// Whether directory `dir` carries [`BOOST_XATTR`] (read at most once a second).
    pub fn boosted(&self, dir: Key, dir_path: &Path) -> bool {
        let now = Instant::now();
        if let Some(&(b, at)) = lock(&self.boosts.0).get(&dir) {
            if now.saturating_duration_since(at) < BOOST_TTL {
                return b;
            }
        }
        let b = rustix::fs::getxattr(dir_path, BOOST_XATTR, &mut [0u8; 0][..]).is_ok();
        let mut m = lock(&self.boosts.0);
        if m.len() >= MAX_DIRS {
            m.retain(|_, &mut (_, at)| now.saturating_duration_since(at) < BOOST_TTL);
        }
        m.insert(dir, (b, now));
        b
    }

    /// A front end changed `name` on directory `dir`: the attribute is read anew at the
    /// next file made there.
    pub fn xattr_changed(&self, dir: Key, name: &[u8]) {
        if name == BOOST_XATTR.as_bytes() {
            lock(&self.boosts.0).remove(&dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_extension_is_a_whole_dot_separated_part_after_the_first_character() {
        for (name, want) in [
            (&b"000012.log"[..], true),
            (b"x.LOG", true),
            (b"x.log.1", true),
            (b"a.b.log", true),
            (b"x.logger", false),
            (b".log", false),
            (b"log", false),
            (b"x.lo", false),
            (b"xlog", false),
            (b"x.", false),
        ] {
            assert_eq!(has_extension(name, "log"), want, "{}", String::from_utf8_lossy(name));
        }
        assert!(valid_extension("wal") && !valid_extension("") && !valid_extension("a.b"));
        assert!(!valid_extension("a/b") && !valid_extension(&"x".repeat(MAX_EXTENSION_LEN + 1)));
    }
}
