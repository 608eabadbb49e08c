//! A `DT_SONAME` for the copy of a library that has none (`library.rs`): `dlopen` loads the
//! libraries in the image that a library needs before it, by their copies' `/proc/self/fd`
//! names, and the loader then takes each for a `DT_NEEDED` name only by its `DT_SONAME`.
//! A library built without one (`cc -shared` without `-Wl,-soname`) was loaded and then
//! looked for on disk, where the kernel cannot see the image: the load failed.
//!
//! The copy is a private file of the process, so it is given one: the name is written in
//! the page padding after the end of the loadable segment that holds the string table (the
//! loader maps whole pages, so those bytes are mapped, and a segment without a `.bss` gets
//! them as the file has them), and the first of two `DT_NULL` entries at the end of the
//! dynamic section becomes a `DT_SONAME` whose offset from `DT_STRTAB` reaches it. GNU ld
//! leaves spare `DT_NULL` entries there; a library without them, or without room, keeps
//! its copy as it is (and its load fails as before, with the shim's message).

use object::elf::{FileHeader64, DT_NULL, DT_SONAME, DT_STRTAB, PF_W, PT_DYNAMIC, PT_LOAD};
use object::read::elf::{FileHeader, ProgramHeader};
use object::Endianness;

/// The page size the loader maps by (4 KiB on x86-64; a larger one only leaves more room).
const PAGE: u64 = 4096;

/// Gives `data` (a 64-bit little-endian ELF library, all of its copy's bytes) the
/// `DT_SONAME` `name`, in place; false (nothing written) when it has no room for it.
pub(super) fn give_soname(data: &mut [u8], name: &[u8]) -> bool {
    let Some((entry, value, at)) = plan(data, name) else { return false };
    data[at..at + name.len()].copy_from_slice(name);
    data[at + name.len()] = 0;
    data[entry..entry + 8].copy_from_slice(&(DT_SONAME.0 as u64).to_le_bytes());
    data[entry + 8..entry + 16].copy_from_slice(&value.to_le_bytes());
    true
}

/// Where the new entry goes (its byte offset in the file), its value (the name's offset
/// from the string table) and where the name goes (its byte offset in the file).
fn plan(data: &[u8], name: &[u8]) -> Option<(usize, u64, usize)> {
    let header = FileHeader64::<Endianness>::parse(data).ok()?;
    let endian = header.endian().ok()?;
    if endian != Endianness::Little || name.is_empty() || name.contains(&0) {
        return None;
    }
    let phdrs = header.program_headers(endian, data).ok()?;
    let dynamic = phdrs.iter().find(|p| p.p_type(endian) == PT_DYNAMIC)?;
    let (start, size) = (dynamic.p_offset(endian) as usize, dynamic.p_filesz(endian) as usize);
    let entries = data.get(start..start.checked_add(size)?)?;
    let word = |e: &[u8], i: usize| u64::from_le_bytes(e[i..i + 8].try_into().expect("8 bytes"));
    let mut strtab = None;
    let mut first_null = None;
    for (i, e) in entries.chunks_exact(16).enumerate() {
        let tag = word(e, 0);
        if tag == DT_SONAME.0 as u64 {
            return None; // it has one
        }
        if tag == DT_STRTAB.0 as u64 {
            strtab = Some(word(e, 8));
        }
        if tag == DT_NULL.0 as u64 {
            first_null = Some(i);
            break;
        }
    }
    let (strtab, i) = (strtab?, first_null?);
    // The entry after it must be a DT_NULL too: it ends the section once this one is used.
    let next = entries.get((i + 1) * 16..(i + 2) * 16)?;
    if word(next, 0) != DT_NULL.0 as u64 {
        return None;
    }
    // The read-only loadable segment that holds the string table, with no .bss.
    let seg = phdrs.iter().find(|p| {
        let (va, mem) = (p.p_vaddr(endian), p.p_memsz(endian));
        p.p_type(endian) == PT_LOAD
            && p.p_flags(endian).0 & PF_W.0 == 0
            && (va..va.saturating_add(mem)).contains(&strtab)
    })?;
    if seg.p_memsz(endian) != seg.p_filesz(endian) {
        return None;
    }
    // (Sums checked: the file is the image's, whatever its bytes say.)
    let end = seg.p_offset(endian).checked_add(seg.p_filesz(endian))?;
    let mut limit = end.div_ceil(PAGE).checked_mul(PAGE)?;
    for p in phdrs.iter().filter(|p| p.p_type(endian) == PT_LOAD) {
        let o = p.p_offset(endian);
        if o >= end {
            limit = limit.min(o);
        }
    }
    limit = limit.min(data.len() as u64);
    let room = limit.checked_sub(end)? as usize;
    let at = end as usize;
    if room < name.len() + 1 || data[at..at + name.len() + 1].iter().any(|&b| b != 0) {
        return None;
    }
    let value = seg.p_vaddr(endian).checked_add(seg.p_filesz(endian))?.checked_sub(strtab)?;
    Some((start + i * 16, value, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A library built here without a soname gets one, in its dynamic section and its
    /// page padding; one that has a soname is left alone.
    #[test]
    fn a_library_without_a_soname_gets_one() {
        let dir = std::env::temp_dir().join(format!("hashfs-soname-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("d.c"), "int dep(void) { return 1; }\n").unwrap();
        let built = |args: &[&str]| {
            std::process::Command::new("cc").current_dir(&dir).args(args).status().is_ok_and(|s| s.success())
        };
        if !built(&["-shared", "-fPIC", "-o", "libd.so", "d.c"])
            || !built(&["-shared", "-fPIC", "-Wl,-soname,libd.so.1", "-o", "libs.so", "d.c"])
        {
            eprintln!("cc is not installed: nothing to check");
            return;
        }
        let mut data = std::fs::read(dir.join("libd.so")).unwrap();
        let (_, _, at) = plan(&data, b"libd.so").expect("room for a soname");
        assert!(give_soname(&mut data, b"libd.so"));
        assert_eq!(&data[at..at + 8], b"libd.so\0");
        let out = dir.join("patched.so");
        std::fs::write(&out, &data).unwrap();
        // (readelf reads the name through the string table's section, which does not reach
        // it, so it shows the offset; the loader reads it by address: tests/libraries.rs.)
        let read = std::process::Command::new("readelf").arg("-d").arg(&out).output().unwrap();
        let text = String::from_utf8_lossy(&read.stdout);
        assert!(text.contains("(SONAME)"), "{text}");
        assert!(!give_soname(&mut data, b"libd.so"), "a second soname");
        // A file cut short, or bytes that are no ELF file, are left alone (no panic).
        let mut cut = std::fs::read(dir.join("libd.so")).unwrap();
        for len in [0, 16, 64, 200, cut.len() / 2] {
            let mut part = cut[..len].to_vec();
            assert!(!give_soname(&mut part, b"libd.so"), "{len} bytes");
        }
        cut.iter_mut().skip(64).for_each(|b| *b = 0xff);
        assert!(!give_soname(&mut cut, b"libd.so"));
        let mut other = std::fs::read(dir.join("libs.so")).unwrap();
        assert!(!give_soname(&mut other, b"libs.so"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
