//! Many participants on an image of HashFS's regions placement (issues 55 and 57): the
//! placement's volatile state (the open groups, each group's keys, the claims and their
//! filter, the spills) lives in the image's shared region (`mapping/hashfs/cells.rs`,
//! `share::TableLayout`), so what one participant opens, claims or frees, every other's next
//! lookup finds; a participant killed inside a call leaves that state to the survivor's
//! takeover, which counts it again from the recovered table. Two mounts in one test process
//! are two participants; the killed one is this binary run again (`HASHFS_SHARED_CHILD`).

mod common;

use common::shared_image::{start_child_named, Image};
use common::{regions_pattern, small_len};
use hashfs::{FileSystem, FormatOptions, HashPlacement, Lblk, MappingKind};
use std::path::Path;

const MIB: u64 = 1 << 20;

fn p(s: &str) -> &Path {
    Path::new(s)
}

fn regions_image(name: &str) -> Image {
    let opts = FormatOptions {
        mapping: MappingKind::HashFs,
        placement: HashPlacement::Regions,
        inode_count: Some(2048),
        hash_seed: Some(0x5EED),
        ..Default::default()
    };
    Image::with(name, 64 * MIB, &opts)
}

/// Whether chunk `c` of `path` lies on one aligned group, in order, as `fs` finds it.
fn chunk_grouped(fs: &FileSystem, path: &str, c: u64) -> bool {
    let ino = fs.metadata(p(path)).unwrap().ino;
    let phase = fs.geometry().data_off / 4096;
    let Some(first) = fs.physical_block(ino, Lblk(c * 512)).unwrap().map(|e| e.pblk.0) else { return false };
    (first + phase).is_multiple_of(512)
        && (0..512).all(|l| fs.physical_block(ino, Lblk(c * 512 + l)).unwrap().map(|e| e.pblk.0) == Some(first + l))
}

/// One participant's small files open groups (each opening moving keys into the new
/// ones) and another finds every one of them; the second's large file claims whole groups
/// and the first finds its chunks there; what one frees, the other sees freed.
#[test]
fn openings_and_claims_of_one_participant_are_found_by_another() {
    let img = regions_image("regions-seen");
    let (a, b) = (img.join(), img.join());
    a.create_dir(p("/s"), 0o755).unwrap();
    let first = a.open_groups().unwrap().0;
    for i in 0..400 {
        a.write(p(&format!("/s/f{i}")), &regions_pattern(small_len(i), i)).unwrap();
        if i % 50 == 49 {
            // Every file so far, found by the other after each batch of openings.
            for j in 0..=i {
                assert!(b.read(p(&format!("/s/f{j}"))).unwrap() == regions_pattern(small_len(j), j), "f{j} after {i}");
            }
        }
    }
    let (opened, _) = a.open_groups().unwrap();
    assert!(opened >= first + 4, "the small files opened groups: {first} -> {opened}");
    assert_eq!(b.open_groups(), a.open_groups(), "one list of open groups");

    let big = regions_pattern((6 * MIB) as usize, 77);
    b.write(p("/big"), &big).unwrap();
    assert_eq!(a.claimed_groups(), Some(3), "the other's claims, counted once for both");
    assert!(a.read(p("/big")).unwrap() == big, "the other's large file");
    for c in 0..3 {
        assert!(chunk_grouped(&a, "/big", c), "chunk {c} on its group, as the other participant finds it");
    }
    // Small files written by the second go where the first looks for them, and the
    // reverse, while both write.
    for i in 400..600 {
        let (w, r) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
        w.write(p(&format!("/s/f{i}")), &regions_pattern(small_len(i), i)).unwrap();
        assert!(r.read(p(&format!("/s/f{i}"))).unwrap() == regions_pattern(small_len(i), i), "f{i}");
    }
    a.remove_file(p("/big")).unwrap();
    assert_eq!(b.claimed_groups(), Some(0), "a claim dropped by one participant is dropped for both");
    for i in (0..600).step_by(3) {
        b.remove_file(p(&format!("/s/f{i}"))).unwrap();
    }
    for i in 0..600u32 {
        let got = a.read(p(&format!("/s/f{i}")));
        match i % 3 {
            0 => assert!(got.is_err(), "f{i} was removed"),
            _ => assert!(got.unwrap() == regions_pattern(small_len(i), i), "f{i}"),
        }
    }
    assert_eq!(a.statfs().blocks_free, b.statfs().blocks_free, "the free blocks");
    let t = hashfs::testing::table(&b).unwrap();
    t.groups().unwrap().verify(t).unwrap();
    drop((a, b));
    img.check();
}

/// The length of the killed participant's file `f{i}`: every 40th 2 MiB, the others small.
fn child_len(i: u32) -> usize {
    if i % 40 == 39 {
        (2 * MIB) as usize
    } else {
        small_len(i)
    }
}

/// The killed participant: writes small files (opening groups as the region fills) and a
/// large one now and then (claiming groups), removing older ones, forever. It numbers its
/// files on from the last child's, so that the files alive stay the last 150 or so (a child
/// that began again at `f0` left an earlier, longer-lived child's last 150 behind it, and
/// twelve rounds could fill the image: `NoSpace` in the survivor under load, 2026-12-05).
#[test]
fn regions_child() {
    let Ok(image) = std::env::var("HASHFS_SHARED_CHILD") else { return };
    let (fs, _) = FileSystem::open_shared(Path::new(&image)).unwrap();
    let _ = fs.create_dir(p("/c"), 0o755);
    let first = (fs.read_dir(p("/c")).unwrap().iter())
        .filter_map(|e| std::str::from_utf8(&e.name).ok()?.strip_prefix('f')?.parse::<u32>().ok())
        .max()
        .map_or(0, |last| last + 1);
    println!("joined");
    std::io::Write::flush(&mut std::io::stdout()).unwrap();
    for i in first.. {
        let len = child_len(i);
        fs.write(p(&format!("/c/f{i}")), &regions_pattern(len, i)).unwrap();
        if i >= 150 {
            let _ = fs.remove_file(p(&format!("/c/f{}", i - 150)));
        }
        if i % 10 == 5 && i >= first + 75 {
            // An older file written again (truncated, then its blocks claimed anew).
            let j = i - 75;
            fs.write(p(&format!("/c/f{j}")), &regions_pattern(child_len(j), j)).unwrap();
        }
    }
}

/// A participant killed inside its calls (openings, claims, frees half done): the
/// survivor's next call takes over, recovers the image and counts the placement's state
/// again, and finds every file the dead one finished whole; its own files too.
#[test]
fn a_participant_killed_while_it_opens_and_claims_is_recovered_by_the_next() {
    let img = regions_image("regions-killed");
    let survivor = img.join();
    survivor.create_dir(p("/mine"), 0o755).unwrap();
    let mut takeovers = 0;
    for round in 0..12u32 {
        let child = start_child_named(&img, "regions_child");
        assert!(child.is_some(), "round {round}: the child could not join the image");
        std::thread::sleep(std::time::Duration::from_millis(40 + 53 * u64::from(round % 5)));
        drop(child);
        for e in survivor.read_dir(p("/c")).unwrap_or_default() {
            let name = String::from_utf8(e.name.clone()).unwrap();
            let Some(i) = name.strip_prefix('f').and_then(|n| n.parse::<u32>().ok()) else { continue };
            let data = survivor.read(&p("/c").join(&name)).unwrap();
            let len = child_len(i);
            // A file the dead call was writing may be short (its size not yet grown).
            assert!(data.len() <= len, "{name} grew past what was written");
            assert!(data == regions_pattern(len, i)[..data.len()], "{name}'s bytes");
        }
        let mine = format!("/mine/r{round}");
        survivor.write(p(&mine), &regions_pattern(small_len(round + 1000), round)).unwrap();
        for r in 0..=round {
            assert!(
                survivor.read(p(&format!("/mine/r{r}"))).unwrap() == regions_pattern(small_len(r + 1000), r),
                "r{r}"
            );
        }
        takeovers = survivor.shared_takeovers().unwrap();
        // The placement's state in the region is the recovered table's (a takeover that
        // kept the dead call's half-made counts leaves groups with keys counted free).
        let t = hashfs::testing::table(&survivor).unwrap();
        if let Err(e) = t.groups().unwrap().verify(t) {
            panic!("round {round}, after {takeovers} takeovers: {e}");
        }
    }
    assert!(takeovers > 0, "no kill landed inside a call: the test exercised no takeover");
    survivor.unmount().unwrap();
    img.check();
}
