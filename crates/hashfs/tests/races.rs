//! Threads on one mount at once (issue 53, races): what one directory's lock and one
//! file's lock must make whole. Randomized stress with invariant checks; each test names
//! the planted race it catches (`scripts/crash-bugs.sh`).

mod common;
use common::*;
use hashfs::{Error, OpenOptions};
use rand::{rngs::SmallRng, seq::SliceRandom, SeedableRng};
use std::path::Path;

const THREADS: u64 = 3;

/// Three threads create one set of names (files, and symlinks whose targets take a block)
/// in one directory, in one order or each in its own: every
/// name is made once (the others get EEXIST), the directory lists each once, and fsck
/// finds nothing. With the check for the name and the insert under two takes of the
/// directory's lock, two threads both find a name free and both insert it
/// (`dir-insert-split-lock`).
#[test]
fn threads_creating_one_set_of_names_make_each_once() {
    const NAMES: u64 = 200;
    let target = "t".repeat(1000);
    for round in 0..10u64 {
        let (fs, dev) = new_fs(8 << 20, &hashfs::FormatOptions { inode_count: Some(1024), ..small_opts() });
        fs.create_dir(Path::new("/d"), 0o755).unwrap();
        let start = std::sync::Barrier::new(THREADS as usize);
        let made: Vec<Vec<u64>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..THREADS)
                .map(|t| {
                    let (fs, start, target) = (&fs, &start, &target);
                    s.spawn(move || {
                        // Half the rounds in one order (every create contends for the same
                        // name), half in an order of each thread's own.
                        let mut order: Vec<u64> = (0..NAMES).collect();
                        if round % 2 == 1 {
                            order.shuffle(&mut SmallRng::seed_from_u64(round * 10 + t));
                        }
                        start.wait();
                        let mut mine = Vec::new();
                        for i in order {
                            let p = format!("/d/n{i}");
                            // Files, and symlinks whose target takes a block of its own.
                            let made = if i % 2 == 0 {
                                fs.open_file(Path::new(&p), OpenOptions::new().write(true).create_new(true)).map(drop)
                            } else {
                                fs.symlink(Path::new(&target), Path::new(&p))
                            };
                            match made {
                                Ok(()) => mine.push(i),
                                Err(Error::Exists) => {}
                                Err(e) => panic!("{p}: {e}"),
                            }
                        }
                        mine
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().expect("no panic")).collect()
        });
        let mut all: Vec<u64> = made.into_iter().flatten().collect();
        all.sort_unstable();
        assert_eq!(all, (0..NAMES).collect::<Vec<_>>(), "round {round}: each name made once");
        let listed = fs.read_dir(Path::new("/d")).unwrap();
        assert_eq!(listed.len() as u64, NAMES, "round {round}: the directory lists each name once");
        drop(fs);
        assert_fsck_clean(&dev);
    }
}

/// Three threads append records to one file at once (O_APPEND, each through its own
/// descriptor), in rounds started together: the file ends as long as every record, and
/// holds each whole, once. An append that reads the end of file before it takes the
/// file's lock writes over another thread's record (`append-offset-unlocked`: one round in
/// about eight lost one when the machine was busy, so there are 400).
#[test]
fn threads_appending_to_one_file_lose_no_record() {
    const ROUNDS: u64 = 400;
    const RECORDS: u64 = 100;
    const LEN: usize = 100;
    let (fs, dev) = new_fs(16 << 20, &small_opts());
    for round in 0..ROUNDS {
        let path = format!("/log{}", round % 4);
        fs.write(Path::new(&path), b"").unwrap();
        let start = std::sync::Barrier::new(THREADS as usize);
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (fs, start, path) = (&fs, &start, &path);
                s.spawn(move || {
                    let f = fs.open_file(Path::new(path), OpenOptions::new().append(true)).unwrap();
                    start.wait();
                    for i in 0..RECORDS {
                        let mut rec = format!("{t} {i:05} ").into_bytes();
                        rec.resize(LEN - 1, b'.');
                        rec.push(b'\n');
                        assert_eq!(f.append(&rec).unwrap().0, LEN);
                    }
                });
            }
        });
        let data = fs.read(Path::new(&path)).unwrap();
        assert_eq!(data.len() as u64, THREADS * RECORDS * LEN as u64, "round {round}: the file holds every record");
        let mut seen = std::collections::BTreeSet::new();
        for rec in data.chunks(LEN) {
            let text = std::str::from_utf8(rec).expect("a whole record");
            assert!(text.ends_with('\n') && text.split(' ').count() == 3, "round {round}: a torn record: {text:?}");
            assert!(seen.insert(text[..8].to_string()), "round {round}: a record twice: {text:?}");
        }
        assert_eq!(seen.len() as u64, THREADS * RECORDS);
    }
    drop(fs);
    assert_fsck_clean(&dev);
}

/// Two threads move a set of files back and forth between two directories while a third
/// unlinks them and makes them anew (each file's bytes begin with its name): no call fails
/// but with NotFound, every name left reads back as its own file, and fsck finds nothing.
/// A rename that looks its source entry up before it write-locks the directories moves an
/// entry that an unlink already removed (the moved name then names a freed inode, or a
/// free counts an inode twice); this stress hits that window only now and then (under
/// load it missed `rename-source-looked-up-early` in three runs), so the planted bug is
/// checked by the unit test that stops a rename in it (`fs/rename.rs`). (Its first runs found a
/// bug: a create-or-open whose path named an inode that a rename over it freed before the
/// open failed with ESTALE, or NotFound, instead of opening what the path named then.)
#[test]
fn threads_renaming_unlinking_and_making_names_keep_the_tree_whole() {
    const NAMES: u64 = 6;
    const STEPS: u64 = 3000;
    for round in 0..6u64 {
        let (fs, dev) = new_fs(16 << 20, &hashfs::FormatOptions { inode_count: Some(1024), ..small_opts() });
        for d in ["/a", "/b"] {
            fs.create_dir(Path::new(d), 0o755).unwrap();
        }
        let content = |i: u64, gen: u64| format!("n{i}:{gen}:").repeat(40).into_bytes();
        for i in 0..NAMES {
            fs.write(Path::new(&format!("/a/n{i}")), &content(i, 0)).unwrap();
        }
        let start = std::sync::Barrier::new(THREADS as usize);
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (fs, start) = (&fs, &start);
                s.spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(round * 10 + t);
                    start.wait();
                    for step in 0..STEPS {
                        let i = rand::Rng::random_range(&mut rng, 0..NAMES);
                        let (from, to) = if rand::Rng::random_bool(&mut rng, 0.5) { ("a", "b") } else { ("b", "a") };
                        let (src, dst) = (format!("/{from}/n{i}"), format!("/{to}/n{i}"));
                        let r = if t < 2 {
                            fs.rename(Path::new(&src), Path::new(&dst))
                        } else if step % 2 == 0 {
                            fs.remove_file(Path::new(&src))
                        } else {
                            fs.write(Path::new(&src), &content(i, step))
                        };
                        match r {
                            Ok(()) | Err(Error::NotFound) => {}
                            Err(e) => panic!("thread {t}, step {step}: {src}: {e}"),
                        }
                    }
                });
            }
        });
        for d in ["a", "b"] {
            for e in fs.read_dir(Path::new(&format!("/{d}"))).unwrap() {
                let name = String::from_utf8_lossy(&e.name).into_owned();
                let data = fs
                    .read(Path::new(&format!("/{d}/{name}")))
                    .unwrap_or_else(|err| panic!("round {round}: /{d}/{name} is listed but does not read: {err}"));
                assert!(
                    data.starts_with(format!("{name}:").as_bytes()),
                    "round {round}: /{d}/{name} holds another file's bytes"
                );
            }
        }
        drop(fs);
        assert_fsck_clean(&dev);
    }
}

/// One thread empties a file and writes it anew, again and again (each time every block
/// of one byte value of its own), a second writes and removes other files (which take
/// the blocks the first frees; every byte 0xEE), and a third reads the first file whole:
/// every byte a read returns is of one generation (the file is emptied and written under
/// its lock), never zeros of an emptied file or another file's bytes.
/// On HashFS's mapping and on the extent tree (whose allocator gives freed blocks out
/// again at once). A read that copies the data after it lets the file's lock go reads
/// blocks a truncation freed and another file took (`read-after-unlock`).
#[test]
fn reads_racing_truncations_see_only_the_files_bytes() {
    const BLOCKS: usize = 16;
    const BLOCK: usize = 4096;
    for mapping in [hashfs::MappingKind::HashFs, hashfs::MappingKind::ExtentTree] {
        let opts = hashfs::FormatOptions {
            mapping,
            layout_score: 1.0,
            placement: hashfs::HashPlacement::Paper,
            ..small_opts()
        };
        let (fs, dev) = new_fs(8 << 20, &opts);
        fs.write(Path::new("/f"), &[1u8; BLOCKS * BLOCK]).unwrap();
        let stop = std::sync::atomic::AtomicBool::new(false);
        let reads = std::thread::scope(|s| {
            let fs = &fs;
            let stop = &stop;
            s.spawn(move || {
                let f = fs.open_file(Path::new("/f"), OpenOptions::new().write(true)).unwrap();
                for gen in 0..2000u32 {
                    f.set_len(0).unwrap();
                    let v = 1 + (gen % 200) as u8;
                    f.write_at(0, &[v; BLOCKS * BLOCK]).unwrap();
                }
                stop.store(true, std::sync::atomic::Ordering::Release);
            });
            s.spawn(move || {
                let mut k = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Acquire) {
                    let p = format!("/other{}", k % 4);
                    fs.write(Path::new(&p), &[0xEE; BLOCKS * BLOCK]).unwrap();
                    fs.remove_file(Path::new(&p)).unwrap();
                    k += 1;
                }
            });
            let reader = s.spawn(move || {
                let f = fs.open_file(Path::new("/f"), OpenOptions::new().read(true)).unwrap();
                let mut buf = vec![0u8; BLOCKS * BLOCK];
                let mut reads = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Acquire) {
                    let n = f.read_at(0, &mut buf).unwrap();
                    // The file is emptied and written whole under its lock: a read sees
                    // one generation in every byte it returns.
                    let v = buf[0];
                    for (b, block) in buf[..n].chunks(BLOCK).enumerate() {
                        assert!(
                            v != 0 && v != 0xEE && block.iter().all(|&x| x == v),
                            "{mapping:?}: read {reads} of {n} bytes, block {b} holds bytes the file did not hold \
                             with its first's ({v}): {:?}",
                            &block[..8]
                        );
                    }
                    reads += 1;
                }
                reads
            });
            reader.join().unwrap()
        });
        assert!(reads > 0);
        drop(fs);
        assert_fsck_clean(&dev);
    }
}
