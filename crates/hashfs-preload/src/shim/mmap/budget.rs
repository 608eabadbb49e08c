//! A writable shared mapping holds, from its `mmap` on, the most kernel mappings it could
//! come to need. Its holes (and its pages past the end of the file) get blocks when first
//! written through it, from the fault thread (`holes.rs`), where a shortage of kernel
//! mappings has no call to fail: the store would get a signal. So `mmap` reckons the worst
//! case and refuses with ENOMEM, naming the remedy, when the budget (`vm.max_map_count`,
//! `hashfs::pm::vspace::map_budget`) does not leave that much; else the record holds it in
//! the ledger until it is unmapped (`recount`), so that no later mapping takes its room.
//! (Before, LMDB with MDB_WRITEMAP and a 1 GiB map on a default image died with SIGSEGV
//! once its file passed 64 MiB.)

use super::*;

/// HashFS's 2 MiB chunk, in pages.
const CHUNK_PAGES: usize = HUGE / PAGE;

/// The most kernel mappings record `m` (`in_file` of its bytes the file's) could need once
/// every page of it is the file's: a run per run of consecutive blocks mapped now; for the
/// pages not yet mapped, one per page, or on a layout that fills a whole 2 MiB chunk with
/// one aligned extent ([`FileSystem::fills_whole_chunks`]) one per chunk while free aligned
/// extents last; never more than the free blocks can make.
pub(super) fn worst_case(fs: &FileSystem<MmapDevice>, m: &FileMap, in_file: usize) -> usize {
    let first = m.off as usize / PAGE;
    let (in_pages, pages) = (in_file / PAGE, m.len / PAGE);
    let blocks = blocks_of(fs, m.file.ino, first, in_pages);
    let (mut runs, mut unfilled, mut chunks) = (0usize, 0usize, 0usize);
    let (mut prev, mut last_chunk) = (None::<u64>, None::<usize>);
    for i in 0..pages {
        match blocks.get(i).copied().flatten() {
            Some(p) => {
                if prev.is_none_or(|q| q + 1 != p) {
                    runs += 1;
                }
                prev = Some(p);
            }
            None => {
                prev = None;
                unfilled += 1;
                let chunk = (first + i) / CHUNK_PAGES;
                if last_chunk != Some(chunk) {
                    chunks += 1;
                    last_chunk = Some(chunk);
                }
            }
        }
    }
    if unfilled == 0 {
        return runs;
    }
    let free = fs.statfs().blocks_free as usize;
    let fill = if fs.fills_whole_chunks() {
        let aligned = fs.free_aligned_extents() as usize;
        let whole = chunks.min(aligned);
        // Between filled chunks, pieces still holes; past the free aligned extents, one
        // per block of what is left.
        let scattered = free.saturating_sub(aligned * CHUNK_PAGES);
        2 * whole + 1 + unfilled.saturating_sub(whole * CHUNK_PAGES).min(scattered)
    } else {
        unfilled.min(free) + 1
    };
    runs + fill
}

/// The refusal's message.
pub(super) fn refuse(m: &FileMap, worst: usize) -> c_int {
    eprintln!(
        "hashfs_preload: {}: a writable shared mapping of {} bytes could need {worst} kernel mappings once \
         its holes are written (one per block on this image's placement), more than the {} that \
         vm.max_map_count leaves HashFS in this process: mmap fails with ENOMEM. On an image made with \
         `hashfs mkfs --placement regions` (or an allocator mapping) a file's whole 2 MiB chunks are one \
         mapping each; HASHFS_MAP_BUDGET and vm.max_map_count set the budget",
        m.file.fs_path.display(),
        m.len,
        m.cap
    );
    libc::ENOMEM
}
