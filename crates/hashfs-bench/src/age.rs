//! `hashfs-bench age`: ages an image the way Geriatrix does (Kadekodi et al., ATC '18; the
//! WineFS paper ages its images with it): files whose sizes follow a measured profile are
//! created until the image is as full as asked, then files are created and deleted at
//! that fullness until the requested amount of churn (whole-image rewrites) has been
//! written. Every file is created with one `fallocate` of its whole size, as Geriatrix's
//! POSIX back end does. Reproducible from its seed: one thread, pinned to one CPU (the
//! aligned allocator's pools are per CPU).
//!
//! What is left out of Geriatrix: its age distribution (a deleted file is chosen
//! uniformly, not by age) and its directory-depth distribution (files are spread over 64
//! directories); the sizes follow the profile's weights.

use crate::{fail, mount, progress_bar, Failure, Steps};
use hashfs::pm::MmapDevice;
use hashfs::units::parse_fraction;
use hashfs::{FileSystem, Lblk, OpenOptions};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::path::{Path, PathBuf};

/// Geriatrix's `profiles/agrawal/size_distribution.txt` (Agrawal et al., FAST '07): file
/// size in bytes and its weight.
const AGRAWAL: [(u64, u64); 11] = [
    (8, 1),
    (32, 7),
    (128, 16),
    (512, 40),
    (2048, 50),
    (8192, 46),
    (32768, 35),
    (131_072, 20),
    (524_288, 10),
    (2_097_152, 4),
    (8_388_608, 1),
];

const DIRS: u64 = 64;

#[derive(clap::Args, Debug)]
pub struct AgeArgs {
    pub image: PathBuf,
    /// Fullness to age to, e.g. 75% or 0.75.
    #[arg(long, value_parser = parse_fraction)]
    pub to: f64,
    /// File-size profile (Geriatrix's): agrawal.
    #[arg(long, default_value = "agrawal")]
    pub profile: String,
    /// Churn after filling: bytes created (and as many deleted) at the target fullness,
    /// in multiples of the image's data capacity.
    #[arg(long, default_value_t = 2.0)]
    pub churn: f64,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Also append the run's figures, with the image's mapping and allocator, as one JSON
    /// line to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// What an aging run did.
#[derive(Debug, Default)]
pub struct Aged {
    pub created: u64,
    pub deleted: u64,
    pub bytes_written: u64,
    pub aligned_before: u64,
    pub aligned_after: u64,
    pub full_after: f64,
    pub live_files: u64,
    /// Live 2 MiB chunks of files (whole 2 MiB of a file), and those on one aligned extent
    /// each (what a memory-mapped file needs for 2 MiB pages).
    pub file_chunks: u64,
    pub file_chunks_aligned: u64,
}

/// Whether the file's 2 MiB chunk `c` lies on one 2 MiB-aligned extent of the image.
fn chunk_aligned(fs: &FileSystem<MmapDevice>, ino: hashfs::Ino, c: u64) -> bool {
    let phase = fs.geometry().data_off / 4096;
    let Ok(Some(first)) = fs.physical_block(ino, Lblk(c * 512)) else { return false };
    if !(first.pblk.0 + phase).is_multiple_of(512) {
        return false;
    }
    let mut l = 0;
    while l < 512 {
        match fs.physical_block(ino, Lblk(c * 512 + l)) {
            Ok(Some(e)) if e.pblk.0 == first.pblk.0 + l => l += e.len.max(1),
            _ => return false,
        }
    }
    true
}

struct Ager<'a> {
    fs: &'a FileSystem<MmapDevice>,
    rng: SmallRng,
    profile: &'static [(u64, u64)],
    total_weight: u64,
    /// Where this run's files go: /aged, or /aged-2, /aged-3... when an earlier run's
    /// files are there.
    root: String,
    /// Live files: (directory, number, bytes).
    live: Vec<(u64, u64, u64)>,
    next: u64,
    out: Aged,
}

impl Ager<'_> {
    fn fullness(&self) -> f64 {
        let st = self.fs.statfs();
        (st.blocks_total - st.blocks_free) as f64 / st.blocks_total as f64
    }

    fn path(&self, dir: u64, n: u64) -> PathBuf {
        PathBuf::from(format!("{}/d{dir:02}/f{n}", self.root))
    }

    fn draw_size(&mut self) -> u64 {
        let mut r = self.rng.random_range(0..self.total_weight);
        for &(size, w) in self.profile {
            if r < w {
                return size;
            }
            r -= w;
        }
        self.profile[self.profile.len() - 1].0
    }

    /// Creates one file of a drawn size; false when the image has no room for it.
    fn create(&mut self) -> Result<bool, Failure> {
        let size = self.draw_size();
        let dir = self.rng.random_range(0..DIRS);
        let n = self.next;
        self.next += 1;
        let path = self.path(dir, n);
        let f = self
            .fs
            .open_file(&path, OpenOptions::new().write(true).create_new(true))
            .map_err(|e| fail(format!("age: create {}: {e}", path.display())))?;
        match f.allocate(0, size) {
            Ok(()) => {}
            Err(hashfs::Error::NoSpace) => {
                drop(f);
                self.fs.remove_file(&path).map_err(|e| fail(format!("age: {}: {e}", path.display())))?;
                return Ok(false);
            }
            Err(e) => return Err(fail(format!("age: fallocate {}: {e}", path.display()))),
        }
        self.live.push((dir, n, size));
        self.out.created += 1;
        self.out.bytes_written += size;
        Ok(true)
    }

    /// Creates files until the image is `to` full (or 100 creates in a row find no room).
    fn fill(&mut self, to: f64, progress: &dyn Fn(u64)) -> Result<(), Failure> {
        let mut misses = 0;
        while self.fullness() < to && misses < 100 {
            if self.create()? {
                misses = 0;
            } else {
                misses += 1;
            }
            progress(self.out.bytes_written);
        }
        Ok(())
    }

    fn delete(&mut self) -> Result<(), Failure> {
        if self.live.is_empty() {
            return Ok(());
        }
        let i = self.rng.random_range(0..self.live.len());
        let (dir, n, _) = self.live.swap_remove(i);
        let path = self.path(dir, n);
        self.fs.remove_file(&path).map_err(|e| fail(format!("age: delete {}: {e}", path.display())))?;
        self.out.deleted += 1;
        Ok(())
    }
}

/// Pins this thread to the first CPU it may run on, so that the per-CPU allocation pool
/// is the same in every run; the thread's CPUs come back on drop.
struct Pinned(Option<libc::cpu_set_t>);

#[allow(unsafe_code)] // the crate's only system calls without a safe wrapper
fn pin_to_one_cpu() -> Pinned {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity and
    // sched_setaffinity read and write only the set passed, of the size passed.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Pinned(None);
        }
        let Some(cpu) = (0..libc::CPU_SETSIZE as usize).find(|&c| libc::CPU_ISSET(c, &set)) else {
            return Pinned(None);
        };
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut one);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &one);
        Pinned(Some(set))
    }
}

impl Drop for Pinned {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        if let Some(set) = &self.0 {
            // SAFETY: restoring the set sched_getaffinity gave, of its size.
            unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) };
        }
    }
}

/// Whether aging draws its progress bar (on a terminal).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    Shown,
    Hidden,
}

/// Ages a mounted file system (the library entry of `hashfs-bench age`).
pub fn age_fs(fs: &FileSystem<MmapDevice>, a: &AgeArgs, progress: Progress) -> Result<Aged, Failure> {
    let profile: &'static [(u64, u64)] = match a.profile.as_str() {
        "agrawal" => &AGRAWAL,
        p => return Err(fail(format!("unknown aging profile {p:?} (profiles: agrawal)"))),
    };
    if !(a.churn >= 0.0 && a.churn.is_finite()) {
        return Err(fail(format!("--churn {}: must be 0 or more", a.churn)));
    }
    let _pinned = pin_to_one_cpu();
    let st = fs.statfs();
    let capacity = st.blocks_total * st.block_bytes;
    let mut ager = Ager {
        fs,
        rng: SmallRng::seed_from_u64(a.seed),
        profile,
        total_weight: profile.iter().map(|p| p.1).sum(),
        root: (1..)
            .map(|k: u32| if k == 1 { "/aged".to_string() } else { format!("/aged-{k}") })
            .find(|r| !fs.exists(Path::new(r)))
            .expect("a free name"),
        live: Vec::new(),
        next: 0,
        out: Aged { aligned_before: fs.free_aligned_extents(), ..Aged::default() },
    };
    if ager.fullness() > a.to {
        return Err(fail(format!(
            "the image is already {:.1}% full, more than --to {:.1}%",
            ager.fullness() * 100.0,
            a.to * 100.0
        )));
    }
    for d in 0..DIRS {
        fs.create_dir_all(Path::new(&format!("{}/d{d:02}", ager.root)), 0o755)
            .map_err(|e| fail(format!("age: mkdir: {e}")))?;
    }
    let churn_bytes = (a.churn * capacity as f64) as u64;
    let fill_bytes = ((a.to - ager.fullness()) * capacity as f64) as u64;
    let pb = progress_bar(fill_bytes + churn_bytes, "aging", Steps::Bytes);
    if progress == Progress::Hidden {
        pb.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    // Fill to the target.
    ager.fill(a.to, &|written| pb.set_position(written.min(fill_bytes)))?;
    // Churn at the target: create below it, delete above it.
    let start = ager.out.bytes_written;
    while ager.out.bytes_written - start < churn_bytes {
        if ager.fullness() < a.to {
            if !ager.create()? {
                ager.delete()?;
            }
        } else {
            ager.delete()?;
        }
        pb.set_position(fill_bytes + (ager.out.bytes_written - start).min(churn_bytes));
    }
    // The churn may end just after a delete: back up to the target.
    ager.fill(a.to, &|_| {})?;
    pb.finish_and_clear();
    fs.sync().map_err(|e| fail(format!("age: sync: {e}")))?;
    ager.out.aligned_after = fs.free_aligned_extents();
    ager.out.full_after = ager.fullness();
    ager.out.live_files = ager.live.len() as u64;
    for &(dir, n, size) in &ager.live {
        let chunks = size / (2 << 20);
        if chunks == 0 {
            continue;
        }
        let ino = fs.metadata(&ager.path(dir, n)).map_err(|e| fail(format!("age: {e}")))?.ino;
        ager.out.file_chunks += chunks;
        ager.out.file_chunks_aligned += (0..chunks).filter(|&c| chunk_aligned(fs, ino, c)).count() as u64;
    }
    Ok(ager.out)
}

pub fn run(a: &AgeArgs) -> Result<(), Failure> {
    let fs = mount(&a.image)?;
    let st = fs.statfs();
    let free_pct = |aligned: u64, free: u64| if free == 0 { 0.0 } else { aligned as f64 * 512.0 * 100.0 / free as f64 };
    let before_free = st.blocks_free;
    let out = age_fs(&fs, a, Progress::Shown)?;
    let after_free = fs.statfs().blocks_free;
    println!(
        "aged {} (profile {}, seed {}): {} files created, {} deleted, {:.1} GiB written; {} files live, {:.1}% full",
        a.image.display(),
        a.profile,
        a.seed,
        out.created,
        out.deleted,
        out.bytes_written as f64 / (1u64 << 30) as f64,
        out.live_files,
        out.full_after * 100.0
    );
    println!(
        "free aligned 2 MiB extents: {} before ({:.1}% of free space), {} after ({:.1}% of free space)",
        out.aligned_before,
        free_pct(out.aligned_before, before_free),
        out.aligned_after,
        free_pct(out.aligned_after, after_free)
    );
    println!(
        "files' whole 2 MiB chunks on an aligned extent (2 MiB pages when mapped): {} of {}",
        out.file_chunks_aligned, out.file_chunks
    );
    if let Some(path) = &a.json {
        let (sb, _) = hashfs::fsck::geometry_of(&**fs.device()).map_err(|e| fail(format!("{e}")))?;
        let allocator = if fs.mapping().uses_allocator() {
            hashfs::AllocatorKind::from_u32(sb.allocator).map_or("?", |k| k.name())
        } else {
            "table"
        };
        let line = serde_json::json!({
            "image_bytes": fs.geometry().image_bytes,
            "mapping": fs.mapping().name(),
            "allocator": allocator,
            "to": a.to, "churn": a.churn, "seed": a.seed, "profile": a.profile,
            "created": out.created, "deleted": out.deleted, "bytes_written": out.bytes_written,
            "live_files": out.live_files, "full_after": out.full_after,
            "free_aligned_before": out.aligned_before, "free_aligned_after": out.aligned_after,
            "free_blocks_after": after_free,
            "file_chunks": out.file_chunks, "file_chunks_aligned": out.file_chunks_aligned,
            "git_commit": crate::git_commit(),
        });
        use std::io::Write;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| writeln!(f, "{line}"))
            .map_err(|e| fail(format!("{}: {e}", path.display())))?;
    }
    fs.unmount().map_err(|e| fail(format!("unmount {}: {e}", a.image.display())))
}
