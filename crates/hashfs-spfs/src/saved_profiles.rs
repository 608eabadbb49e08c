//! Sync Factors kept across remounts and crashes (issue 58): what the profiler learned
//! about the files that sync, saved in the image beside the PM copies.
//!
//! SPFS keeps a file's Sync Factor in its in-core inode, so a remount forgets it: a file
//! found promoted at mount starts at the value a promotion leaves, and a file below that
//! synced before starts from nothing. Here the stack saves, in `/sync-profiles` of the
//! image, the Sync Factor of every file whose factor is at least [`KEEP_MIN`] (at most
//! [`MAX_KEPT`] of them, the highest), each named by its lower inode's file handle, as a
//! PM copy is (`absorb.rs`): the handle survives renames and reboots, and a deleted file's
//! handle is stale, so its record is dropped at the next mount.
//!
//! When: the write-back thread saves every [`SAVE_EVERY_TICKS`] ticks (4 s by default) if
//! the table changed, and once more when it stops (unmount, the shim's exit). After a
//! crash the next mount finds the factors of the last save.
//!
//! Crash safety: a save writes the whole table to `/sync-profiles.new`, fences it, and
//! renames it over `/sync-profiles` (one HashFS transaction), so a crash leaves the old
//! table or the new one, never a mix (the stacked crash explorer checks it at every fence:
//! `crashtest.rs`, `Step::SaveProfile`). The table carries a checksum: one the media or a
//! user damaged is reported (`hashfs fsck --lower`, the mount's message) and ignored, which
//! loses only the hints it held.
//!
//! Format (little-endian): `HFSSYNC1`, the record count (u32), the CRC-32C of the records
//! (u32); then each record: the encoded handle's length (u8), the handle
//! ([`LowerHandle::encode`]), the Sync Factor (f64).

use crate::absorb::{ioe, Key, PmStore, Recovery};
use crate::lower::LowerHandle;
use crate::profiler::SyncProfile;
use crate::{lock, FileCell, Stack};
use hashfs::pm::PmDevice;
use hashfs::{Access, Ino, Owner, RenameMode};
use std::io;
use std::os::fd::AsFd;
use std::sync::Arc;

const FILE: &[u8] = b"sync-profiles";
const NEW: &[u8] = b"sync-profiles.new";
const MAGIC: &[u8; 8] = b"HFSSYNC1";
const HEADER: usize = 16;
/// The most files whose factors are kept (those with the highest).
pub const MAX_KEPT: usize = 1024;
/// A factor under this is not kept: the file never made a qualifying fsync, or it has
/// faded (a qualifying fsync alone gives α = 0.05; 32 reads after it take it under).
pub const KEEP_MIN: f64 = 0.01;
/// The write-back thread saves every this many ticks (each 250 ms by default).
pub const SAVE_EVERY_TICKS: u64 = 16;
/// The largest table a mount reads (MAX_KEPT records of the largest handle).
const MAX_BYTES: u64 = (HEADER + MAX_KEPT * (1 + 4 + 128 + 8)) as u64;

/// The table's bytes.
pub fn encode(recs: &[(LowerHandle, f64)]) -> Vec<u8> {
    let mut body = Vec::new();
    for (h, sf) in recs {
        let e = h.encode();
        body.push(e.len() as u8);
        body.extend_from_slice(&e);
        body.extend_from_slice(&sf.to_le_bytes());
    }
    let mut out = Vec::with_capacity(HEADER + body.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(recs.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// The records of a table, or what is wrong with it.
pub fn decode(b: &[u8]) -> Result<Vec<(LowerHandle, f64)>, String> {
    if b.len() < HEADER || &b[..8] != MAGIC {
        return Err("not a table of Sync Factors (no header)".into());
    }
    let count = u32::from_le_bytes(b[8..12].try_into().expect("4 bytes")) as usize;
    let crc = u32::from_le_bytes(b[12..16].try_into().expect("4 bytes"));
    let body = &b[HEADER..];
    if crc32c::crc32c(body) != crc {
        return Err("checksum mismatch".into());
    }
    if count > MAX_KEPT {
        return Err(format!("{count} records, more than the {MAX_KEPT} kept"));
    }
    let mut recs = Vec::with_capacity(count);
    let mut at = 0;
    for i in 0..count {
        let bad = || format!("record {i} is malformed");
        let len = *body.get(at).ok_or_else(bad)? as usize;
        let h = body.get(at + 1..at + 1 + len).and_then(LowerHandle::decode).ok_or_else(bad)?;
        let sf = body.get(at + 1 + len..at + 9 + len).ok_or_else(bad)?;
        let sf = f64::from_le_bytes(sf.try_into().expect("8 bytes"));
        if !(0.0..=1.0).contains(&sf) {
            return Err(format!("record {i}: Sync Factor {sf} is not in [0, 1]"));
        }
        recs.push((h, sf));
        at += 9 + len;
    }
    if at != body.len() {
        return Err(format!("{} bytes after the last record", body.len() - at));
    }
    Ok(recs)
}

impl<D: PmDevice> PmStore<D> {
    /// Replaces the saved table with `recs`: written apart, fenced, renamed over the old.
    pub fn save_profiles(&self, recs: &[(LowerHandle, f64)]) -> io::Result<()> {
        let bytes = encode(recs);
        let root = Ino::ROOT;
        match self.fs.unlink_at(root, NEW) {
            Ok(()) | Err(hashfs::Error::NotFound) => {}
            Err(e) => return Err(ioe(e)),
        }
        let m = self.fs.create_file_at(root, NEW, 0o600, Owner::ROOT).map_err(ioe)?;
        let f = self.fs.open_ino(m.ino, Access { read: false, write: true, append: false }).map_err(ioe)?;
        let mut at = 0;
        while at < bytes.len() {
            at += f.write_at(at as u64, &bytes[at..]).map_err(ioe)?;
        }
        f.sync_data().map_err(ioe)?;
        drop(f);
        self.fs.rename_at(root, NEW, root, FILE, RenameMode::Replace).map_err(ioe)
    }

    /// The saved table: empty if there is none; an error names what is wrong with it.
    pub fn load_profiles(&self) -> Result<Vec<(LowerHandle, f64)>, String> {
        let m = match self.fs.lookup(Ino::ROOT, FILE) {
            Ok(m) => m,
            Err(hashfs::Error::NotFound) => return Ok(Vec::new()),
            Err(e) => return Err(format!("/sync-profiles: {e}")),
        };
        if m.size > MAX_BYTES {
            return Err(format!("/sync-profiles: {} bytes, more than a table holds", m.size));
        }
        let buf = self.fs.read(std::path::Path::new("/sync-profiles")).map_err(|e| format!("/sync-profiles: {e}"))?;
        decode(&buf).map_err(|e| format!("/sync-profiles: {e}"))
    }

    /// Forgets the saved table (the image is bound to another lower directory, whose
    /// handles these are not).
    pub(crate) fn forget_profiles(&self) -> io::Result<()> {
        for name in [FILE, NEW] {
            match self.fs.unlink_at(Ino::ROOT, name) {
                Ok(()) | Err(hashfs::Error::NotFound) => {}
                Err(e) => return Err(ioe(e)),
            }
        }
        Ok(())
    }
}

impl Stack {
    /// At open: gives each saved file whose lower inode still exists its Sync Factor (a
    /// promoted one's replaces the value a promotion leaves). A table that cannot be read
    /// is reported in `rec` and removed (it holds hints only; `hashfs fsck --lower
    /// --repair` does the same).
    pub(crate) fn restore_profiles(&self, rec: &mut Recovery) {
        let recs = match self.store.load_profiles() {
            Ok(r) => r,
            Err(e) => {
                eprintln!("hashfs: the saved Sync Factors are unreadable ({e}); removed, every file starts afresh");
                if let Err(e) = self.store.forget_profiles() {
                    eprintln!("hashfs: removing them failed: {e} (the next save replaces them)");
                }
                rec.profiles_problem = Some(e);
                return;
            }
        };
        let mut files = lock(&self.files);
        for (h, sf) in recs {
            let Ok(fd) = h.open(self.store.lower_dir(), libc::O_PATH) else {
                rec.profiles_dropped += 1; // deleted (ESTALE), or not to be reached
                continue;
            };
            let Ok(st) = rustix::fs::fstat(&fd) else { continue };
            if st.st_mode & libc::S_IFMT != libc::S_IFREG {
                rec.profiles_dropped += 1;
                continue;
            }
            let key: Key = (st.st_dev, st.st_ino);
            let cell = files.entry(key).or_insert_with(|| Arc::new(FileCell::default()));
            let mut st = cell.lock();
            st.profile = SyncProfile::kept(sf);
            st.handle = Some(h);
            rec.profiles_restored += 1;
        }
    }

    /// Saves the Sync Factors worth keeping, if they changed since the last save; states
    /// kept only for their factor that no longer are among the kept are forgotten.
    /// Returns whether the table was written.
    pub fn save_profiles(&self) -> io::Result<bool> {
        let all: Vec<(Key, crate::Shared)> = lock(&self.files).iter().map(|(k, s)| (*k, s.clone())).collect();
        let mut recs = Vec::new();
        for (key, sh) in &all {
            let mut st = sh.lock();
            let sf = st.profile.sync_factor();
            if sf < KEEP_MIN {
                continue;
            }
            if st.handle.is_none() {
                st.handle = st.pm.as_ref().and_then(|p| LowerHandle::of(p.lower.as_fd()).ok());
            }
            if let Some(h) = st.handle.clone() {
                recs.push((sf, *key, h));
            }
        }
        recs.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        for (_, key, _) in recs.iter().skip(MAX_KEPT) {
            self.prune_unkept(*key);
        }
        recs.truncate(MAX_KEPT);
        let recs: Vec<(LowerHandle, f64)> = recs.into_iter().map(|(sf, _, h)| (h, sf)).collect();
        let bytes = encode(&recs);
        let mut last = lock(&self.profiles_saved);
        if *last == bytes {
            return Ok(false);
        }
        self.store.save_profiles(&recs)?;
        *last = bytes;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StackConfig;
    use proptest::prelude::*;
    use std::fs::File;
    use std::path::Path;

    fn h(n: u8, len: usize) -> LowerHandle {
        LowerHandle { kind: 1, bytes: vec![n; len] }
    }

    #[test]
    fn a_table_reads_back_as_it_was_written() {
        let recs = vec![(h(1, 8), 0.785), (h(2, 128), 0.05), (h(3, 0), 1.0)];
        assert_eq!(decode(&encode(&recs)).unwrap(), recs);
        assert_eq!(decode(&encode(&[])).unwrap(), vec![]);
    }

    #[test]
    fn every_damaged_byte_is_refused() {
        let b = encode(&[(h(1, 8), 0.5), (h(2, 12), 0.25)]);
        for i in 0..b.len() {
            let mut c = b.clone();
            c[i] ^= 0x10;
            assert!(decode(&c).is_err(), "byte {i} changed, the table still read");
        }
        assert!(decode(&b[..b.len() - 1]).is_err(), "a cut table read");
    }

    proptest! {
        #[test]
        fn any_bytes_give_records_or_an_error(b in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = decode(&b);
            let mut with_header = encode(&[]);
            with_header.extend_from_slice(&b);
            let _ = decode(&with_header);
        }
    }

    fn image(dir: &Path) -> std::path::PathBuf {
        let img = dir.join("pm.img");
        hashfs::FileSystem::format_file(&img, 32 << 20, &hashfs::FormatOptions::default(), &|_, _| {}).unwrap();
        std::fs::create_dir(dir.join("lower")).unwrap();
        img
    }

    fn open(dir: &Path) -> (Arc<Stack>, Recovery) {
        let dev = hashfs::pm::MmapDevice::open(&dir.join("pm.img"), hashfs::pm::OpenMode::Existing).unwrap();
        let (fs, _) = hashfs::FileSystem::mount(Arc::new(dev), &|_, _| {}).unwrap();
        Stack::open(fs, &dir.join("lower"), StackConfig::default()).unwrap()
    }

    fn key(f: &File) -> Key {
        use std::os::unix::fs::MetadataExt;
        let m = f.metadata().unwrap();
        (m.dev(), m.ino())
    }

    fn rw(path: &Path) -> File {
        std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path).unwrap()
    }

    /// Writes and fsyncs `file` `n` times, a little each time.
    fn syncs(s: &Stack, f: &File, n: u64) {
        let sh = s.opened(key(f));
        for i in 0..n {
            let mut st = sh.lock();
            s.write(&mut st, f, i * 100, &[7u8; 100]).unwrap();
            s.fsync(&mut st, f, hashfs::SyncScope::DataOnly).unwrap();
        }
        s.closed(key(f), &sh);
    }

    fn sf(s: &Stack, f: &File) -> f64 {
        s.existing(key(f)).expect("a state").lock().profile.sync_factor()
    }

    #[test]
    fn sync_factors_come_back_after_a_remount_and_deleted_files_drop_out() {
        // ext4 under /var/tmp exports file handles.
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        image(dir.path());
        let (a_path, b_path, c_path) =
            (dir.path().join("lower/a"), dir.path().join("lower/b"), dir.path().join("lower/c"));
        let (kept_a, kept_b) = {
            let (s, _) = open(dir.path());
            let (a, b, c) = (rw(&a_path), rw(&b_path), rw(&c_path));
            syncs(&s, &a, 40); // promoted after 30
            assert!(s.existing(key(&a)).unwrap().promoted());
            let sh = s.opened(key(&a));
            for _ in 0..7 {
                s.read(&mut sh.lock(), &a, 0, &mut [0u8; 10]).unwrap();
            }
            s.closed(key(&a), &sh);
            syncs(&s, &b, 5); // below, four qualifying fsyncs
            syncs(&s, &c, 5);
            let (sa, sb) = (sf(&s, &a), sf(&s, &b));
            assert!(sa > 0.2 && sb > 0.1, "{sa} {sb}");
            assert!(s.save_profiles().unwrap(), "a first save writes");
            assert!(!s.save_profiles().unwrap(), "nothing changed: no write");
            s.stop();
            s.close_all();
            (sa, sb)
        };
        std::fs::remove_file(&c_path).unwrap();
        let (s, rec) = open(dir.path());
        assert_eq!((rec.promoted, rec.profiles_restored, rec.profiles_dropped), (1, 2, 1), "{rec:?}");
        let (a, b) = (rw(&a_path), rw(&b_path));
        assert!(s.existing(key(&a)).unwrap().promoted());
        assert_eq!(sf(&s, &a), kept_a, "a promoted file's factor is the saved one");
        assert_eq!(sf(&s, &b), kept_b, "a file below keeps its factor");
        s.close_all();
    }

    #[test]
    fn a_kept_factor_outlives_the_kernels_forget_but_not_the_files_last_name() {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        image(dir.path());
        let (s, _) = open(dir.path());
        let path = dir.path().join("lower/m");
        let f = rw(&path);
        syncs(&s, &f, 5);
        let k = key(&f);
        s.prune(k);
        assert!(s.existing(k).is_some(), "a state kept for its Sync Factor outlives the kernel's forget");
        drop(f);
        std::fs::remove_file(&path).unwrap();
        s.name_removed(Some(k));
        assert!(s.existing(k).is_none(), "a deleted file's factor would go to the next file on its inode number");
        // A promoted file deleted while open: forgotten at its last close.
        let path = dir.path().join("lower/p");
        let f = rw(&path);
        syncs(&s, &f, 40);
        let k = key(&f);
        assert!(s.existing(k).unwrap().promoted());
        assert!(s.save_profiles().unwrap(), "saved (its handle taken)");
        let sh = s.opened(k);
        std::fs::remove_file(&path).unwrap();
        s.name_removed(Some(k));
        assert!(s.existing(k).is_some(), "open: still there");
        s.closed(k, &sh);
        assert!(s.existing(k).is_none(), "a deleted promoted file's state outlived its last close");
    }

    #[test]
    fn a_damaged_table_is_reported_and_the_stack_opens_without_it() {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        image(dir.path());
        {
            let (s, _) = open(dir.path());
            let f = rw(&dir.path().join("lower/a"));
            syncs(&s, &f, 3);
            assert!(s.save_profiles().unwrap());
            // A byte of the saved table damaged in PM.
            let m = s.store.fs.lookup(Ino::ROOT, FILE).unwrap();
            let pm = s.store.fs.open_ino(m.ino, Access { read: true, write: true, append: false }).unwrap();
            pm.write_at(20, b"\xff").unwrap();
            s.stop();
        }
        let dev = hashfs::pm::MmapDevice::open(&dir.path().join("pm.img"), hashfs::pm::OpenMode::Existing).unwrap();
        let (fs, _) = hashfs::FileSystem::mount(Arc::new(dev), &|_, _| {}).unwrap();
        let (_, problems) = PmStore::check(fs, &dir.path().join("lower")).unwrap();
        assert!(
            problems.len() == 1 && problems[0].starts_with("/sync-profiles: checksum mismatch"),
            "fsck --lower: {problems:?}"
        );
        let (s, rec) = open(dir.path());
        assert_eq!(rec.profiles_problem.as_deref(), Some("/sync-profiles: checksum mismatch"), "{rec:?}");
        assert_eq!(rec.profiles_restored, 0);
        assert_eq!(s.store.load_profiles(), Ok(vec![]), "the damaged table is removed");
        assert!(s.save_profiles().unwrap(), "the next save writes a new one");
    }
}
