//! The holes of a shared mapping: which pages are watched for their first write, and the
//! fill that gives them blocks (from the fault thread, or before the shim itself copies a
//! file's bytes into such a page).

use super::*;

/// Gives the watched hole page at `addr` blocks, with the rest of its 2 MiB of the file
/// that lies in the same hole (one aligned extent for the aligned allocator, so one huge
/// page), and maps them. Ok when the page is the file's now (or already was).
pub(super) fn fill(addr: usize) -> Result<(), c_int> {
    let fs = shim().fs()?;
    let mut maps = MAPS.lock();
    let m = maps.iter_mut().find(|m| !m.private && m.covers(addr)).ok_or(libc::EFAULT)?;
    let rel = (addr - m.start) / PAGE * PAGE;
    let Some((lo, hi)) = m.holes.fill_span(rel, m.off) else {
        return Ok(()); // filled by an earlier fault or a write
    };
    let (lo, hi) = (m.off + lo as u64, m.off + hi as u64);
    let ino = m.file.ino;
    give_blocks(fs, ino, lo, hi)?;
    // This mapping and every other shared mapping of the file with a hole there.
    let stale = remap_filled(fs, &mut maps, ino, lo, hi);
    if !stale.is_empty() {
        if let Ok(attr) = fs.peek_attr(ino) {
            copy::take_over(fs, &mut maps, &stale, attr.size);
        }
    }
    recount(&maps);
    let filled = maps.iter().any(|m| !m.private && m.covers(addr) && m.holes.containing(addr - m.start).is_none());
    if filled {
        Ok(())
    } else {
        Err(libc::EIO)
    }
}

/// Fills the watched holes under `buf` before the shim copies a file's bytes into it: the
/// copy holds the source file's lock, which the fault thread's fill could need.
pub(in crate::shim) fn fill_holes_in(buf: &[u8]) -> Result<(), c_int> {
    if HOLE_MAPS.load(Ordering::Relaxed) == 0 || buf.is_empty() {
        return Ok(());
    }
    let (a, e) = (buf.as_ptr() as usize, buf.as_ptr() as usize + buf.len());
    for _ in 0..=buf.len().div_ceil(PAGE) {
        let next = MAPS.lock().iter().filter(|m| !m.private && m.start < e && a < m.start + m.len).find_map(|m| {
            let (lo, hi) = ((a.max(m.start) - m.start) / PAGE * PAGE, e.min(m.start + m.len) - m.start);
            m.holes.overlapping(lo, hi).first().map(|&(s, _)| m.start + s)
        });
        match next {
            None => return Ok(()),
            Some(page) => fill(page).map_err(|_| libc::EFAULT)?,
        }
    }
    Err(libc::EFAULT)
}
