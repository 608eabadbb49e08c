//! SPFS's stacked mode through the real daemon, killed (kill -9) at random points under
//! writers that fsync: every acknowledged write is there after each remount, none twice,
//! and `hashfs fsck --lower` is clean at the end. The stacked mount's other tests are in
//! `fuse_stacked.rs`; the helper both use, in `support/stacked.rs`.

mod fuse_common;
#[path = "support/stacked.rs"]
mod stacked;
use fuse_common::fuse_available;
use stacked::{check_wal, counter, kill_under_an_appender, pattern, spawn_appender, Stacked};
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::time::Duration;

#[test]
fn kill_at_random_points_loses_no_fsynced_record_and_writes_none_twice() {
    if !fuse_available() {
        return;
    }
    let mut s = Stacked::new("64M", "promote_after=5,sf_limit=none");
    s.start();
    kill_under_an_appender(&mut s, 6, 0x9e37_79b9_7f4a_7c15);
}

/// Issue 58, item 5, for files settled below (`hashfs-spfs/src/settled.rs`): kill -9 of
/// the daemon under a writer that appends a record to one of 200 messages delivered below
/// and fsyncs it, message after message, in one directory. Once the directory is hot
/// and the write-back thread's syncfs has run, the messages are promoted at their opens
/// with no lower fsync; after every kill and remount each message holds its delivered bytes
/// and every acknowledged record, in order (then perhaps the start of the record the kill
/// cut), and the image passes `hashfs fsck --lower` at the end.
#[test]
fn kill_under_appends_to_settled_messages_loses_no_acknowledged_fsync() {
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    use std::sync::Arc;
    if !fuse_available() {
        return;
    }
    const MESSAGES: usize = 200;
    let mut s = Stacked::new("64M", "promote_after=5,sf_limit=none");
    s.start();
    fs::create_dir(s.p("box")).unwrap();
    let body = |i: usize| pattern(1000 + 37 * i, i as u8);
    let record = |i: usize, k: usize| format!("[record {k} of message {i}]\n").into_bytes();
    for i in 0..MESSAGES {
        fs::write(s.p(&format!("box/m{i:03}")), body(i)).unwrap();
    }
    std::thread::sleep(Duration::from_millis(100)); // older than the first syncfs by its margin
    let mut acked = vec![0usize; MESSAGES];
    let (mut settled, mut rng) = (0, 0x9e37_79b9_7f4a_7c15u64);
    for round in 0..4 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let stop = Arc::new(AtomicBool::new(false));
        let (st, dir, mut mine, start) = (stop.clone(), s.p("box"), acked.clone(), rng as usize);
        let appender = std::thread::spawn(move || {
            // Six small fsyncs in "box" make it hot (this mount learns it anew), which
            // asks for the syncfs; then each message in turn, its first open of the
            // round after the syncfs.
            if let Ok(mut f) = OpenOptions::new().append(true).create(true).open(dir.join("warm")) {
                for _ in 0..6 {
                    let _ = f.write_all(b"warm\n").and_then(|_| f.sync_data());
                }
            }
            std::thread::sleep(Duration::from_millis(100));
            for k in 0.. {
                if st.load(Relaxed) {
                    break;
                }
                let i = (start + k * 7919) % MESSAGES;
                let done = OpenOptions::new()
                    .append(true)
                    .open(dir.join(format!("m{i:03}")))
                    .and_then(|mut f| f.write_all(&record(i, mine[i])).and_then(|_| f.sync_data()));
                if done.is_err() {
                    break;
                }
                mine[i] += 1;
            }
            mine
        });
        std::thread::sleep(Duration::from_millis(400 + rng % 400));
        settled += counter(&s.info(), "promoted at open (settled below)");
        s.kill();
        stop.store(true, Relaxed);
        acked = appender.join().unwrap();
        s.start();
        for (i, &n) in acked.iter().enumerate() {
            let path = s.p(&format!("box/m{i:03}"));
            let got = fs::read(&path).unwrap();
            let mut want = body(i);
            for k in 0..n {
                want.extend(record(i, k));
            }
            assert!(got.starts_with(&want), "round {round}: message {i} lost an acknowledged record");
            // A relaxed-mode append cut by the kill: a length up to the record's, each byte
            // the record's or zero.
            let (cut, next) = (&got[want.len()..], record(i, n));
            assert!(
                cut.len() <= next.len() && cut.iter().zip(&next).all(|(&c, &n)| c == n || c == 0),
                "round {round}: message {i} holds bytes past its acknowledged records: {:?}",
                String::from_utf8_lossy(cut)
            );
            if !cut.is_empty() {
                let f = OpenOptions::new().write(true).open(&path).unwrap();
                f.set_len(want.len() as u64).unwrap();
                f.sync_all().unwrap();
            }
        }
    }
    let total: usize = acked.iter().sum();
    eprintln!("kill -9 x4: {total} records acknowledged, {settled} messages promoted at their opens");
    assert!(total > 100 && settled > 0, "progress: {total} records, {settled} promoted at their opens");
    s.umount(true);
    s.fsck_clean();
}

/// Issue 58, item 5: kill -9 of the daemon under the work the stack's options change, with
/// `passthrough=on` and `dir_rule=on`: an appender that fsyncs every record (opened once a
/// round: passthrough first, promoted at a later open), a maildir flow (a message made in
/// `tmp/`, fsynced, renamed into `new/`: once `tmp/` is hot, made in PM) and random 4 KiB
/// overwrites with an fsync every 8. After every kill and remount each acknowledged fsync's
/// bytes are there (a block holds its last acknowledged write or a later one), and the image
/// passes `hashfs fsck --lower` at the end.
#[test]
fn kill_under_passthrough_and_the_directory_rule_loses_no_acknowledged_fsync() {
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    use std::sync::Arc;
    if !fuse_available() {
        return;
    }
    const BLOCKS: usize = 64;
    let mut s = Stacked::new("64M", "promote_after=5,sf_limit=none,passthrough=on,dir_rule=on");
    s.start();
    for d in ["mail", "mail/tmp", "mail/new"] {
        fs::create_dir(s.p(d)).unwrap();
    }
    let message = |i: usize| format!("message {i}\n{}", "body ".repeat(50 + i % 200)).into_bytes();
    let db = OpenOptions::new().write(true).create(true).truncate(true).open(s.p("db")).unwrap();
    db.write_all_at(&vec![0u8; BLOCKS * 4096], 0).unwrap();
    db.sync_all().unwrap();
    drop(db);
    // For each block of "db": the seeds written to it, in order, and how many of them an
    // fsync acknowledged (seed 0: the zeros above).
    let mut history: Vec<Vec<u8>> = vec![vec![0]; BLOCKS];
    let mut acked_writes = vec![1usize; BLOCKS];
    let block = |seed: u8| if seed == 0 { vec![0u8; 4096] } else { pattern(4096, seed) };
    let (mut acked, mut delivered, mut db_syncs) = (0usize, 0usize, 0usize);
    let (mut passthrough_opens, mut promotions) = (0, 0);
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for round in 0..6 {
        let stop = Arc::new(AtomicBool::new(false));
        let appender = spawn_appender(s.p("wal"), acked, stop.clone());
        let (st, mail) = (stop.clone(), s.p("mail"));
        let mailer = std::thread::spawn(move || {
            let mut n = delivered;
            while !st.load(Relaxed) {
                let name = format!("msg-{n:05}");
                let tmp = mail.join("tmp").join(&name);
                let done = OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(&tmp)
                    .and_then(|mut f| f.write_all(&message(n)).and_then(|_| f.sync_all()))
                    .and_then(|_| fs::rename(&tmp, mail.join("new").join(&name)));
                if done.is_err() {
                    break;
                }
                n += 1;
            }
            n
        });
        let (st, path, seed0) = (stop.clone(), s.p("db"), next());
        let (mut hist, mut acks) = (history.clone(), acked_writes.clone());
        let writer = std::thread::spawn(move || {
            let mut r = seed0 | 1;
            let mut syncs = 0;
            if let Ok(f) = OpenOptions::new().write(true).open(&path) {
                'run: while !st.load(Relaxed) {
                    for _ in 0..8 {
                        r ^= r << 13;
                        r ^= r >> 7;
                        r ^= r << 17;
                        let (b, seed) = ((r % BLOCKS as u64) as usize, ((r >> 32) as u8).max(1));
                        // Recorded first: a write cut by the kill may have landed.
                        hist[b].push(seed);
                        if f.write_all_at(&block(seed), b as u64 * 4096).is_err() {
                            break 'run;
                        }
                    }
                    if f.sync_data().is_err() {
                        break;
                    }
                    syncs += 1;
                    for b in 0..BLOCKS {
                        acks[b] = hist[b].len();
                    }
                }
            }
            (hist, acks, syncs)
        });
        std::thread::sleep(Duration::from_millis(100 + next() % 400));
        let info = s.info(); // the counters of this mount, which the kill ends
        passthrough_opens += counter(&info, "passthrough opens");
        promotions += counter(&info, "promotions") + counter(&info, "promoted as made (directory rule)");
        s.kill();
        stop.store(true, Relaxed);
        acked = appender.join().unwrap();
        delivered = mailer.join().unwrap();
        let (h, a, n) = writer.join().unwrap();
        (history, acked_writes, db_syncs) = (h, a, db_syncs + n);
        s.start();

        check_wal(&s, acked, round);
        for i in 0..delivered {
            let m = fs::read(s.p(&format!("mail/new/msg-{i:05}")));
            assert_eq!(m.ok(), Some(message(i)), "round {round}: delivered message {i}");
        }
        let got = fs::read(s.p("db")).unwrap();
        assert_eq!(got.len(), BLOCKS * 4096, "round {round}: db's length");
        for b in 0..BLOCKS {
            let now = &got[b * 4096..(b + 1) * 4096];
            let allowed = &history[b][acked_writes[b] - 1..];
            let Some(&seed) = allowed.iter().find(|&&seed| block(seed) == now) else {
                panic!("round {round}: block {b} holds neither its last acknowledged write nor a later one");
            };
            // What it holds now is what a later kill must keep.
            (history[b], acked_writes[b]) = (vec![seed], 1);
        }
    }
    assert!(
        acked > 20 && delivered > 10 && db_syncs > 10,
        "progress: {acked} records, {delivered} messages, {db_syncs} syncs"
    );
    eprintln!(
        "kill -9 x6: {acked} records, {delivered} messages, {db_syncs} db fsyncs acknowledged; \
         {passthrough_opens} passthrough opens, {promotions} promotions"
    );
    assert!(passthrough_opens > 0 && promotions > 0, "{passthrough_opens} passthrough opens, {promotions} promotions");
    s.umount(true);
    s.fsck_clean();
}
