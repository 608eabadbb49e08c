//! Model-based testing: long random operation sequences, checked operation by operation
//! (result and errno class) and state by state against the in-memory model, over many
//! seeds; and concurrent threads, each with its own subtree and model, plus threads
//! sharing one file.

mod common;
use common::model::{apply_fs, random_op, snapshot, Model, Snapshot};
use common::*;
use hashfs::OpenOptions;
use rand::{rngs::SmallRng, SeedableRng};
use std::path::Path;
use std::sync::Arc;

fn subtree(s: &Snapshot, root: &str) -> Snapshot {
    s.iter().filter(|(k, _)| k.starts_with(&format!("{root}/"))).map(|(k, v)| (k.clone(), v.clone())).collect()
}

#[test]
fn random_sequences_match_the_model() {
    let seeds = std::env::var("HASHFS_MODEL_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(40u64);
    for seed in 0..seeds {
        let (fs, dev) = new_fs(16 << 20, &hashfs::FormatOptions { inode_count: Some(512), ..small_opts() });
        let mut model = Model::default();
        let mut rng = SmallRng::seed_from_u64(seed);
        for step in 0..400 {
            let op = random_op(&mut rng, "", 20_000);
            let want = model.apply(&op);
            let got = apply_fs(&fs, &op);
            assert_eq!(got, want, "seed {seed} step {step}: {op:?}");
            if step % 50 == 49 {
                assert_eq!(snapshot(&fs).unwrap(), model.snapshot(), "seed {seed} step {step}");
            }
        }
        let (fs, dev) = remount(fs, dev);
        assert_eq!(snapshot(&fs).unwrap(), model.snapshot(), "seed {seed} after remount");
        drop(fs);
        assert_fsck_clean(&dev);
    }
}

#[test]
fn concurrent_threads_match_their_models() {
    let (fs, dev) =
        new_fs(32 << 20, &hashfs::FormatOptions { inode_count: Some(2048), journal_count: 4, ..small_opts() });
    const THREADS: usize = 4;
    for t in 0..THREADS {
        fs.create_dir(Path::new(&format!("/t{t}")), 0o755).unwrap();
    }
    let models: Vec<Model> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let fs = fs.clone();
                s.spawn(move || {
                    let root = format!("/t{t}");
                    let mut model = Model::with_dir(&root);
                    let mut rng = SmallRng::seed_from_u64(1000 + t as u64);
                    for step in 0..1500 {
                        let op = random_op(&mut rng, &root, 12_000);
                        let want = model.apply(&op);
                        let got = apply_fs(&fs, &op);
                        assert_eq!(got, want, "thread {t} step {step}: {op:?}");
                    }
                    model
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    let snap = snapshot(&fs).unwrap();
    for (t, m) in models.iter().enumerate() {
        let root = format!("/t{t}");
        let want: Snapshot = subtree(&m.snapshot(), &root);
        assert_eq!(subtree(&snap, &root), want, "thread {t}");
    }
    let (fs, dev) = remount(fs, dev);
    let snap2 = snapshot(&fs).unwrap();
    assert_eq!(snap, snap2);
    drop(fs);
    assert_fsck_clean(&dev);
}

#[test]
fn concurrent_writers_and_readers_of_one_file() {
    let (fs, dev) = new_fs(32 << 20, &small_opts());
    let f =
        Arc::new(fs.open_file(Path::new("/shared"), OpenOptions::new().read(true).write(true).create(true)).unwrap());
    const THREADS: u64 = 4;
    const BLOCKS: u64 = 64;
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let f = f.clone();
            s.spawn(move || {
                // Thread t owns blocks b with b % THREADS == t, written in several rounds.
                for round in 0..4u8 {
                    for b in (t..BLOCKS).step_by(THREADS as usize) {
                        let fill = (t as u8 + 1) * 16 + round;
                        f.write_at(b * 4096, &[fill; 4096]).unwrap();
                    }
                }
            });
        }
        let f = f.clone();
        s.spawn(move || {
            let mut buf = vec![0u8; 4096];
            for _ in 0..2000 {
                for b in [0u64, 17, 63] {
                    let n = f.read_at(b * 4096, &mut buf).unwrap();
                    // A block is never torn between two writers' values mid-4KiB by a
                    // concurrent write of the same owner: all bytes agree.
                    if n == 4096 {
                        assert!(buf.iter().all(|&x| x == buf[0]), "torn block {b}");
                    }
                }
            }
        });
    });
    let mut buf = vec![0u8; 4096];
    for b in 0..BLOCKS {
        f.read_at(b * 4096, &mut buf).unwrap();
        let want = ((b % THREADS) as u8 + 1) * 16 + 3;
        assert!(buf.iter().all(|&x| x == want), "block {b}");
    }
    assert_eq!(f.metadata().unwrap().size, BLOCKS * 4096);
    drop(f);
    drop(fs);
    let img = dev.live_image();
    let (fs, _, dev) = mount_image(&img).unwrap();
    drop(fs);
    assert_fsck_clean(&dev);
}
