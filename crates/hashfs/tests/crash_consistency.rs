//! Crash consistency: every metadata operation, and short sequences of them, run over the
//! crash-simulating device; at every fence (and at the end) the images a power failure
//! could leave (only what was fenced, everything stored, and random subsets of the unfenced
//! words) are recovered by mount, checked by fsck, and compared: the result must be the
//! state before or after the interrupted operation, and every earlier operation survives.

mod common;
use common::model::{self, snapshot, Snapshot};
use common::*;
use hashfs::fs::ops::RenameMode;
use hashfs::pm::{CrashPoint, PmDevice};
use hashfs::{OpenOptions, SetAttr};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::path::Path;

type Step = Box<dyn Fn(&Fs)>;

const IMAGE_BYTES: u64 = 2 << 20;
const RANDOM_SUBSETS: usize = 6;

fn p(s: &str) -> &Path {
    Path::new(s)
}

/// Checks one crash point: each image must recover to one of `allowed`.
fn check_point(label: &str, point: &CrashPoint, allowed: &[&Snapshot], rng: &mut SmallRng) {
    let mut images = vec![("fenced only", point.image_durable_only()), ("all stored", point.image_all_pending())];
    for i in 0..RANDOM_SUBSETS {
        let prob = [0.5, 0.1, 0.9][i % 3];
        images.push(("random subset", point.image_with(|_| rng.random_bool(prob))));
    }
    for (kind, img) in images {
        let ctx = format!("{label}, fence {}, {kind} ({} pending words)", point.fence_index, point.lines.len());
        let (fs, _report, dev) = mount_image(&img).unwrap_or_else(|e| panic!("{ctx}: mount failed: {e}"));
        let snap = snapshot(&fs).unwrap_or_else(|e| panic!("{ctx}: walk failed: {e}"));
        assert!(
            allowed.iter().any(|a| **a == snap),
            "{ctx}: recovered state is neither before nor after.\nrecovered: {snap:#?}\nallowed: {allowed:#?}"
        );
        fs.unmount().unwrap_or_else(|e| panic!("{ctx}: unmount: {e}"));
        let r = hashfs::fs::fsck(dev.clone(), hashfs::fs::FsckMode::Check, &|_, _| {}).expect("fsck runs");
        assert!(r.findings.is_empty(), "{ctx}: fsck findings after recovery: {:#?}", r.findings);
    }
}

/// Runs `steps` after `setup`, crashing at every fence of every step.
fn crash_case(label: &str, setup: &dyn Fn(&Fs), steps: &[Step]) {
    let (fs, dev) = new_fs(IMAGE_BYTES, &small_opts());
    setup(&fs);
    let mut states = vec![snapshot(&fs).unwrap()];
    let mut boundaries = Vec::new();
    dev.set_capture(true);
    for s in steps {
        boundaries.push(dev.stats().snapshot().fences);
        s(&fs);
        states.push(snapshot(&fs).unwrap());
    }
    dev.set_capture(false);
    let points = dev.take_points();
    let end = dev.crash_point_now();
    let mut rng = SmallRng::seed_from_u64(label.len() as u64 * 7919);
    // (A step whose operation fails, as random ones may, issues no fence at all.)
    for point in &points {
        let k = boundaries.iter().rposition(|&b| b <= point.fence_index).expect("inside a step");
        check_point(&format!("{label} (step {k})"), point, &[&states[k], &states[k + 1]], &mut rng);
    }
    check_point(&format!("{label} (after the last step)"), &end, &[states.last().unwrap()], &mut rng);
    drop(fs);
}

fn base_setup(fs: &Fs) {
    fs.create_dir(p("/d"), 0o755).unwrap();
    fs.create_dir(p("/e"), 0o755).unwrap();
    fs.create_dir(p("/e/x"), 0o755).unwrap();
    fs.write(p("/d/f"), &model::data_for(1, 0, 10_000)).unwrap();
    fs.write(p("/g"), &model::data_for(2, 0, 100)).unwrap();
    fs.symlink(p("/d/f"), p("/s")).unwrap();
    // A sparse file: a block at 0 and one at 40960.
    let h = fs.open_file(p("/h"), OpenOptions::new().write(true).create(true)).unwrap();
    h.write_at(0, b"head").unwrap();
    h.write_at(40_960, b"tail").unwrap();
}

macro_rules! case {
    ($name:ident, $body:expr) => {
        #[test]
        fn $name() {
            let step: Step = Box::new($body);
            crash_case(stringify!($name), &base_setup, &[step]);
        }
    };
}

case!(create_file, |fs: &Fs| {
    fs.open_file(p("/d/new"), OpenOptions::new().write(true).create(true)).unwrap();
});
case!(mkdir, |fs: &Fs| {
    fs.create_dir(p("/d/sub"), 0o700).unwrap();
});
case!(symlink, |fs: &Fs| fs.symlink(p("../g"), p("/d/ln")).unwrap());
case!(hard_link, |fs: &Fs| fs.hard_link(p("/d/f"), p("/e/f2")).unwrap());
case!(unlink_file_with_data, |fs: &Fs| fs.remove_file(p("/d/f")).unwrap());
case!(unlink_symlink, |fs: &Fs| fs.remove_file(p("/s")).unwrap());
case!(rmdir, |fs: &Fs| fs.remove_dir(p("/e/x")).unwrap());
case!(rename_same_dir, |fs: &Fs| fs.rename(p("/d/f"), p("/d/f2")).unwrap());
case!(rename_across_dirs, |fs: &Fs| fs.rename(p("/d/f"), p("/e/f")).unwrap());
case!(rename_replacing_file, |fs: &Fs| fs.rename(p("/g"), p("/d/f")).unwrap());
case!(rename_dir_across, |fs: &Fs| fs.rename(p("/e/x"), p("/d/x")).unwrap());
case!(rename_dir_replacing_empty_dir, |fs: &Fs| {
    fs.rename(p("/d"), p("/e/x")).unwrap();
});
case!(rename_exchange, |fs: &Fs| fs.rename_with(p("/d/f"), p("/g"), RenameMode::Exchange).unwrap());
case!(rename_exchange_dirs_across, |fs: &Fs| fs.rename_with(p("/d"), p("/e/x"), RenameMode::Exchange).unwrap());
case!(append_small, |fs: &Fs| {
    let f = fs.open_file(p("/g"), OpenOptions::new().append(true)).unwrap();
    f.write_at(0, b"appended").unwrap();
});
case!(write_extending_several_blocks, |fs: &Fs| {
    let f = fs.open_file(p("/d/f"), OpenOptions::new().write(true)).unwrap();
    f.write_at(10_000, &model::data_for(9, 10_000, 3 * 4096 + 17)).unwrap();
});
case!(write_past_eof_leaving_gap, |fs: &Fs| {
    let f = fs.open_file(p("/g"), OpenOptions::new().write(true)).unwrap();
    f.write_at(9000, b"far").unwrap();
});
case!(write_filling_hole, |fs: &Fs| {
    let f = fs.open_file(p("/h"), OpenOptions::new().write(true)).unwrap();
    f.write_at(8192, &[5u8; 4096]).unwrap();
});
case!(truncate_down, |fs: &Fs| {
    fs.open_file(p("/d/f"), OpenOptions::new().write(true)).unwrap().set_len(100).unwrap();
});
case!(truncate_up, |fs: &Fs| {
    fs.open_file(p("/g"), OpenOptions::new().write(true)).unwrap().set_len(50_000).unwrap();
});
case!(truncate_sparse_to_zero, |fs: &Fs| {
    fs.open_file(p("/h"), OpenOptions::new().write(true)).unwrap().set_len(0).unwrap();
});
case!(chmod_chown_utimens, |fs: &Fs| {
    let ino = fs.resolve(p("/g")).unwrap();
    let attr = SetAttr {
        perm: Some(0o600),
        uid: Some(7),
        gid: Some(8),
        mtime: Some(hashfs::SetTime::At(5)),
        ..Default::default()
    };
    fs.setattr(ino, &attr).unwrap();
});

#[test]
fn create_needing_a_new_directory_block() {
    // 128 one-slot entries fill the first block; the next create adds a block.
    let setup = |fs: &Fs| {
        fs.create_dir(p("/many"), 0o755).unwrap();
        for i in 0..128 {
            fs.open_file(p(&format!("/many/{i:03}")), OpenOptions::new().write(true).create(true)).unwrap();
        }
        assert_eq!(fs.metadata(p("/many")).unwrap().size, 4096);
    };
    let step: Step = Box::new(|fs: &Fs| {
        fs.open_file(p("/many/next"), OpenOptions::new().write(true).create(true)).unwrap();
        assert_eq!(fs.metadata(p("/many")).unwrap().size, 8192);
    });
    crash_case("create_needing_a_new_directory_block", &setup, &[step]);
}

#[test]
fn unlink_of_open_file_then_close() {
    // The last close frees the blocks; a crash anywhere leaves the name gone and the
    // space either still held (freed by recovery) or already free.
    let setup = |fs: &Fs| base_setup(fs);
    let steps: Vec<Step> = vec![Box::new(|fs: &Fs| {
        let f = fs.open_file(p("/d/f"), OpenOptions::new().read(true)).unwrap();
        fs.remove_file(p("/d/f")).unwrap();
        drop(f);
    })];
    crash_case("unlink_of_open_file_then_close", &setup, &steps);
}

#[test]
fn overwrite_in_place_is_per_byte_old_or_new() {
    // Relaxed mode: an overwrite of mapped blocks is not atomic, but every byte is the old
    // or the new value, and nothing else changes.
    let (fs, dev) = new_fs(IMAGE_BYTES, &small_opts());
    base_setup(&fs);
    let old = fs.read(p("/d/f")).unwrap();
    let new = vec![0xEEu8; 6000];
    dev.set_capture(true);
    fs.open_file(p("/d/f"), OpenOptions::new().write(true)).unwrap().write_at(1000, &new).unwrap();
    dev.set_capture(false);
    let mut points = dev.take_points();
    points.push(dev.crash_point_now());
    let mut rng = SmallRng::seed_from_u64(3);
    for point in &points {
        for _ in 0..4 {
            let img = point.image_with(|_| rng.random_bool(0.5));
            let (fs2, _, _) = mount_image(&img).unwrap();
            let got = fs2.read(p("/d/f")).unwrap();
            assert_eq!(got.len(), old.len());
            for (i, &b) in got.iter().enumerate() {
                let in_range = (1000..7000).contains(&i);
                assert!(b == old[i] || (in_range && b == new[i - 1000]), "byte {i}");
            }
        }
    }
}

#[test]
fn punch_hole_is_per_byte_old_or_zero() {
    // Like an overwrite, punching a hole is not atomic: after a crash every byte of the
    // range is its old value or zero, nothing else changes, and the image checks clean.
    let (fs, dev) = new_fs(IMAGE_BYTES, &small_opts());
    base_setup(&fs);
    let old = fs.read(p("/d/f")).unwrap();
    dev.set_capture(true);
    let f = fs.open_file(p("/d/f"), OpenOptions::new().write(true)).unwrap();
    f.fallocate(100, 9000, hashfs::fs::FallocateMode::PunchHole).unwrap();
    drop(f);
    dev.set_capture(false);
    let mut points = dev.take_points();
    points.push(dev.crash_point_now());
    let mut rng = SmallRng::seed_from_u64(4);
    for point in &points {
        for img in [point.image_durable_only(), point.image_all_pending(), point.image_with(|_| rng.random_bool(0.5))] {
            let (fs2, _, dev2) = mount_image(&img).unwrap();
            let got = fs2.read(p("/d/f")).unwrap();
            assert_eq!(got.len(), old.len());
            for (i, &b) in got.iter().enumerate() {
                let in_range = (100..9100).contains(&i);
                assert!(b == old[i] || (in_range && b == 0), "byte {i} at fence {}", point.fence_index);
            }
            fs2.unmount().unwrap();
            assert_fsck_clean(&dev2);
        }
    }
}

#[test]
fn random_short_sequences() {
    let mut rng = SmallRng::seed_from_u64(0xC4A5);
    for round in 0..24 {
        // A random prefix that completes, then three random operations under capture.
        let prefix: Vec<model::Op> = (0..12).map(|_| model::random_op(&mut rng, "", 6000)).collect();
        let ops: Vec<model::Op> = (0..3).map(|_| model::random_op(&mut rng, "", 6000)).collect();
        let setup = move |fs: &Fs| {
            for op in &prefix {
                model::apply_fs(fs, op);
            }
        };
        // Writes that create a file are two operations (create, then write), so the crash
        // test uses only operations that are one transaction each or extend atomically.
        let steps: Vec<Step> = ops
            .into_iter()
            .map(|op| {
                let op = match op {
                    model::Op::Write { path, off, len, seed } => {
                        model::Op::Truncate { path: path.clone(), size: off + len as u64 + seed as u64 }
                    }
                    other => other,
                };
                Box::new(move |fs: &Fs| {
                    model::apply_fs(fs, &op);
                }) as Step
            })
            .collect();
        crash_case(&format!("random sequence {round}"), &setup, &steps);
    }
}
