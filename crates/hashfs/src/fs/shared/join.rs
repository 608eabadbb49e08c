//! How a process becomes a participant of a shared mount (docs/design.md, "Many processes
//! on one image", *Joining and leaving*).
//!
//! The first participant (no one has the image mounted, or no one else lives) runs the
//! ordinary mount under the image lock, recovery included, and puts the inode bitmap its
//! scan built in the region; so does one that finds the lock held by a dead participant
//! (it recovers the image, as a takeover does). Any other joins *beside* the others: it
//! reads the superblock and nothing else of the image (nothing is written; HashFS's table
//! keeps no DRAM state but its used count, and the inode bitmap is the region's), then
//! takes the read side and catches up with the ring of changes from where the ring stood
//! before it began. So a join takes the same time on an image of any size; until
//! 2026-12-02 each joiner read the whole inode table (a 4 GiB image's 262,144 inodes,
//! about 40 ms a process), and before that it did so under the image lock.
//!
//! Dead participants' slots are reaped under the lock only: a join that finds one takes
//! the lock for that (its scan already done, it holds the lock for the catch-up alone).

use super::{note_leftovers, publish_recovered, release_dead, KeptForReaders, SharedMount};
use crate::fs::recovery::{self, MountAs, MountReport};
use crate::fs::verbs::{on_map, MapVerbs};
use crate::fs::{FsInner, Progress};
use crate::pm::PmDevice;
use crate::share::{region_bytes, Access, Acquired, Identity, ImageRegion, Participant, Region, MAX_PARTICIPANTS};
use crate::{Error, Result};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What a joining participant holds while it takes its place.
#[derive(Clone, Copy)]
enum Hold {
    /// The read side: no call changes the image meanwhile.
    Read,
    /// The image lock, as it was acquired.
    Lock(Acquired),
}

/// Mounts `dev` as one participant of many (`region_path`: the image's region file, made
/// with `access` if missing). See the module.
pub(crate) fn mount<D: PmDevice>(
    dev: Arc<D>,
    region_path: &Path,
    access: Access,
    progress: Progress<'_>,
) -> Result<(Arc<FsInner<D>>, MountReport)> {
    let (sb, geo, _) = crate::fs::read_superblock(&*dev)?;
    if !crate::fs::hashfs::shared_by_processes(&sb) {
        return Err(Error::Unsupported(
            "only HashFS's mapping is shared by many processes yet; this image is used by one process at a time",
        ));
    }
    let id = Identity::of_image(sb.uuid)?;
    let table = super::table_layout(&sb, &geo);
    let region = std::sync::Arc::new(ImageRegion::new(
        Region::attach_as(region_path, &id, region_bytes(geo.inode_count, table), access)?,
        geo.inode_count,
        table,
    ));
    let me = region.participants().join().ok_or(Error::TooManyProcesses)?;
    region.readers().joined(me);
    let words = region.words();
    let first_in_region = words.mounted.load(Ordering::Acquire) == 0;

    // The image as it is, read beside the others (the ring's position first).
    let beside = if !first_in_region {
        let from = words.changes.load(Ordering::Acquire);
        let read = recovery::mount(dev.clone(), progress, MountAs::Joining).ok();
        read.map(|(inner, report)| Beside { inner, report, from })
    } else {
        None
    };
    crate::fs::race_point::reached("join: the image read beside the others");
    let locked = |region: &ImageRegion| {
        let acquired = region.lock_image(me);
        // A join's stores (a recovery, the first mount's) are not described: a death in
        // them is followed by the whole recovery (`takeover.rs`).
        region.words().scope.unscope();
        (Hold::Lock(acquired), survey(region, me))
    };
    let (hold, found) = if beside.is_some() && region.try_read(me) {
        let found = survey(&region, me);
        if found.joins_reading() {
            (Hold::Read, found)
        } else {
            region.leave_read(me);
            locked(&region)
        }
    } else {
        locked(&region)
    };
    let result = take_place(me, dev, &region, hold, found, beside, progress);
    match hold {
        Hold::Read => region.leave_read(me),
        Hold::Lock(_) => region.unlock_image(),
    }
    match result {
        Ok((inner, report, seen)) => {
            let region_for_scope = region.clone();
            let sh = SharedMount {
                region,
                path: region_path.to_path_buf(),
                me: std::sync::atomic::AtomicU32::new(me.0),
                seen: AtomicU64::new(seen),
                takeovers: AtomicU64::new(0),
                scoped_takeovers: AtomicU64::new(0),
                catching: parking_lot::Mutex::new(()),
                kept_for_readers: parking_lot::Mutex::new(KeptForReaders::default()),
                forked: std::sync::atomic::AtomicBool::new(false),
                readers_asked: AtomicU64::new(0),
                data_readers_asked: AtomicU64::new(0),
                own: super::OwnMarks::new(),
                for_children: Default::default(),
            };
            let made = inner.shared.set(sh);
            debug_assert!(made.is_ok(), "a fresh mount is made shared once");
            inner.journals.only_in_calls(&region_for_scope);
            if first_in_region {
                // Regions whose participants were all killed, which no last leaver removed.
                if let Some(dir) = region_path.parent() {
                    crate::share::sweep_left_regions(dir, region_path, id.boot_id);
                }
            }
            Ok((inner, report))
        }
        Err(e) => {
            region.participants().leave(me);
            Err(e)
        }
    }
}

/// The image as a joining participant read it beside the others.
struct Beside<D: PmDevice> {
    inner: Arc<FsInner<D>>,
    report: MountReport,
    /// The ring of changes' position before the read.
    from: u64,
}

/// The other participants' slots, as the joining one finds them.
struct Survey {
    /// Taken by a process that no longer runs (its leftovers released, its slot reaped,
    /// under the lock).
    dead: Vec<Participant>,
    live_others: bool,
    mounted: bool,
}

impl Survey {
    /// Whether a participant may join on the read side: others have the image mounted and
    /// no slot needs reaping.
    fn joins_reading(&self) -> bool {
        self.mounted && self.live_others && self.dead.is_empty()
    }
}

fn survey(region: &ImageRegion, me: Participant) -> Survey {
    let parts = region.participants();
    let mut s =
        Survey { dead: Vec::new(), live_others: false, mounted: region.words().mounted.load(Ordering::Acquire) != 0 };
    for p in (0..MAX_PARTICIPANTS as u32).map(Participant) {
        if p == me {
            continue;
        }
        if parts.alive(p) {
            s.live_others = true;
        } else if !parts.is_free(p) {
            s.dead.push(p);
        }
    }
    s
}

/// Under `hold` (`found`: the slots as found under it): the participant's file system,
/// its report, and the ring position its caches reflect. `beside`: the image as read
/// beside the others, and the ring's position before that read.
fn take_place<D: PmDevice>(
    me: Participant,
    dev: Arc<D>,
    region: &Arc<ImageRegion>,
    hold: Hold,
    found: Survey,
    beside: Option<Beside<D>>,
    progress: Progress<'_>,
) -> Result<(Arc<FsInner<D>>, MountReport, u64)> {
    let words = region.words();
    let first = !found.mounted || !found.live_others;
    // The program this process was before its `execve`, which handed descriptions over:
    // this one carries its count in `forks` on until it has opened them
    // (`FileSystem::inherited_opened`). (A first mount clears the count.)
    // One count at most: a second is a spawn's ticket handed to the program before it
    // after that program had opened its files (`FileSystem::inherited_opened`), whose
    // count protects nothing any more.
    let parts = region.participants();
    let mut carried = 0;
    for &p in found.dead.iter().filter(|&&p| parts.of_this_process(p)) {
        carried += usize::from(parts.take_counted(p));
    }
    for _ in 1..carried {
        super::fork::uncount_forks(region);
    }
    if carried > 0 && !first {
        parts.set_counted(me, true);
    }
    // None under the read side (`Survey::joins_reading`): reaping needs the lock.
    for &p in &found.dead {
        release_dead(region, p);
    }
    let died = !found.dead.is_empty();
    let from_dead = matches!(hold, Hold::Lock(Acquired::FromDead(_)));
    let (inner, report, seen) = match beside {
        Some(Beside { inner, report, from }) if !first && !from_dead => {
            // Its first call catches up with the ring from where it stood before the read.
            adopt_words(region, &inner);
            super::share_table(&inner, region, false)?;
            (inner, report, from)
        }
        beside => {
            if let Some(Beside { inner: unused, .. }) = beside {
                unused.unmounted.store(true, Ordering::Release); // its Drop must not unmount
            }
            debug_assert!(matches!(hold, Hold::Lock(_)), "the read side is taken to join others only");
            if first {
                // Forks counted by participants that are gone: their children died before
                // they joined, or join a recovered image (and read everything again).
                words.forks.store(0, Ordering::Release);
            }
            let opens = region.open_inodes();
            let keep = |ino| opens.held(ino);
            let how = match (first, from_dead) {
                (true, _) => MountAs::First,
                (false, true) => MountAs::Recovering { keep: &keep, in_use: super::in_use(region) },
                (false, false) => MountAs::Joining,
            };
            let (inner, report) = recovery::mount(dev, progress, how)?;
            if matches!(how, MountAs::Joining) {
                adopt_words(region, &inner);
                super::share_table(&inner, region, false)?;
            } else {
                // Everyone else (none, when first) reads everything again; the table's
                // state is this mount's, counted after its recovery.
                publish_recovered(region, &inner, &report);
                super::share_table(&inner, region, true)?;
            }
            if first {
                // What a participant before left, this mount's recovery settled and freed
                // (but orphans it kept for read-only participants).
                words.leftovers.store(u64::from(report.orphans_kept > 0), Ordering::Release);
            } else if from_dead || report.orphans_kept > 0 {
                note_leftovers(region);
            }
            words.mounted.store(1, Ordering::Release);
            (inner, report, words.changes.load(Ordering::Acquire))
        }
    };
    if died && !first {
        note_leftovers(region); // what the dead left: the last to leave looks for it
    }
    for p in found.dead {
        region.participants().reap(p);
    }
    Ok((inner, report, seen))
}

/// A joining participant takes what the region holds of the image: the next transaction
/// id and the table's used count.
fn adopt_words<D: PmDevice>(region: &ImageRegion, inner: &FsInner<D>) {
    let words = region.words();
    inner.journals.raise_next_txid(words.next_txid.load(Ordering::Acquire));
    on_map!(inner, m => m.adopt_shared_count(words.table_used.load(Ordering::Acquire)));
}

#[cfg(test)]
mod tests {
    use super::super::test_image::{check_and_remove, image};
    use crate::fs::race_point::with_between;
    use crate::share::{Handle, Participant};
    use crate::FileSystem;
    use std::path::Path;

    /// `execs` calls `execve` with description `h` handed over (`FileSystem::prepare_exec`,
    /// as the shim does first): its slot then names the program the process was, dead, and
    /// it runs no more code (its state forgotten, as `execve` leaves it). `survivor` is
    /// another participant of the image. Returns the dead slot.
    fn exec_away(execs: FileSystem, h: Handle, survivor: &FileSystem) -> Participant {
        let exec = execs.prepare_exec(&[h]).expect("a shared mount");
        let dying = execs.inner.shared_parts().unwrap().1;
        survivor.inner.shared_parts().unwrap().0.participants().pretend_dead(dying);
        std::mem::forget((exec, execs));
        dying
    }

    /// Runs `call` on `fs` in a thread of its own: its answer comes through the receiver
    /// (nothing, if it waits for ever).
    fn on_a_thread<T: Send + 'static>(
        fs: &std::sync::Arc<FileSystem>,
        call: impl FnOnce(&FileSystem) -> T + Send + 'static,
    ) -> std::sync::mpsc::Receiver<T> {
        let (tx, rx) = std::sync::mpsc::channel();
        let fs = fs.clone();
        std::thread::spawn(move || {
            let _ = tx.send(call(&fs));
        });
        rx
    }

    /// A file another participant makes while one joins beside it (after the join's
    /// reads, before it takes its place) is seen by the joiner, whose next create does not
    /// take the other's inode. A joiner that allocated from a bitmap of its own, read from
    /// the inode table as it joined (`inode-bits-own`), hands the other's inode out again.
    #[test]
    fn a_file_made_while_a_participant_joins_is_seen_by_it() {
        let image = &image("join-made");
        let (a, _) = FileSystem::open_shared(image).unwrap();
        a.write(Path::new("/before"), b"first").unwrap();
        let made = std::sync::Mutex::new(None);
        let (b, _) = with_between(
            "join: the image read beside the others",
            || {
                a.write(Path::new("/other"), b"the other's").unwrap();
                *made.lock().unwrap() = Some(a.metadata(Path::new("/other")).unwrap().ino);
            },
            || FileSystem::open_shared(image).unwrap(),
        );
        let other = made.lock().unwrap().expect("the other participant ran at the point");
        assert_eq!(b.read(Path::new("/other")).unwrap(), b"the other's");
        b.write(Path::new("/mine"), b"the joiner's").unwrap();
        assert_ne!(b.metadata(Path::new("/mine")).unwrap().ino, other, "the joiner took the other's inode");
        assert_eq!(a.read(Path::new("/other")).unwrap(), b"the other's");
        assert_eq!(a.read(Path::new("/mine")).unwrap(), b"the joiner's");
        drop((a, b));
        check_and_remove(image);
    }

    /// The only other participant leaves while one joins beside it (after the joiner's
    /// read, before it takes its place): the image stays marked in use (the leaver counts
    /// the joiner's slot as staying, and the joiner, finding no one else, mounts it as the
    /// first does), never used under a clean flag that a crash would leave standing.
    #[test]
    fn a_participant_that_joins_as_the_last_other_leaves_mounts_the_image() {
        let image = &image("join-alone");
        let (a, _) = FileSystem::open_shared(image).unwrap();
        a.write(Path::new("/f"), b"kept").unwrap();
        let (b, _) = with_between(
            "join: the image read beside the others",
            move || drop(a),
            || FileSystem::open_shared(image).unwrap(),
        );
        let (sb, _, _) = crate::fs::read_superblock(&*b.inner.dev).unwrap();
        assert_ne!(sb.state, crate::layout::SB_STATE_CLEAN, "a mounted image marked clean");
        assert_eq!(b.read(Path::new("/f")).unwrap(), b"kept");
        drop(b);
        check_and_remove(image);
    }

    /// A program exec'd with a description handed over (`FileSystem::prepare_exec`) carries
    /// the handover's count in the image's `forks` on as it joins and reaps the slot of the
    /// program its process was, until it has opened the description's file
    /// (`inherited_opened`): a parent that closed the file after forking waits until then
    /// (`for_children.rs`). Reaped as any dead participant's (`successor-drops-count`), the
    /// slot's count went as the program joined, before it opened anything.
    #[test]
    fn an_execd_program_carries_its_handover_count_until_it_opened_its_files() {
        use crate::fs::file::Access;
        use std::sync::atomic::Ordering;
        let image = &image("exec-carries");
        let (parent, _) = FileSystem::open_shared(image).unwrap();
        let (execs, _) = FileSystem::open_shared(image).unwrap();
        execs.write(Path::new("/f"), b"handed over").unwrap();
        let ino = execs.metadata(Path::new("/f")).unwrap().ino;
        let h = execs.share_description(ino, libc::O_RDONLY as u32, 0).unwrap().expect("a shared mount");
        exec_away(execs, h, &parent);
        let (region, _) = parent.inner.shared_parts().unwrap();
        let forks = || region.words().forks.load(Ordering::Acquire);
        assert_eq!(forks(), 1);
        let (next, _) = FileSystem::open_shared(image).unwrap();
        assert_eq!(forks(), 1, "the program that joined let go of the handover before it opened its files");
        assert_eq!(next.adopt_inherited(&[h]), vec![Some((ino, libc::O_RDONLY as u32))]);
        let f = next.open_ino(ino, Access { read: true, write: false, append: false }).unwrap();
        next.inherited_opened(None);
        assert_eq!(forks(), 0, "the program that opened its files still counts as on its way");
        drop(f);
        next.release_description(h);
        drop((next, parent));
    }

    /// A program whose threads held a description's offset lock and the record locks'
    /// table lock when the process exec'd (a shim's pump, killed mid-write by `execve`; a
    /// thread in `fcntl`) leaves them to whoever reaps its slot: once reaped, the slot's
    /// index goes to the next participant to join, which would own the locks for good.
    /// Without the releases (`dead-offset-lock-kept`, `dead-table-lock-kept`) the exec'd
    /// program's next write through the description, or anyone's next record lock, waited
    /// for ever (a shell script's `python3 ... > /pm/f` through pyenv's scripts, one run
    /// in a few hundred). So does the note of what a waiter blocked in `F_SETLKW` waited
    /// for, whose owner (the process, which keeps its POSIX locks across the exec) lives
    /// on: kept (`dead-wait-note-kept`), the deadlock check followed it, and a wait that
    /// closes no cycle failed with EDEADLK.
    #[test]
    fn locks_held_by_a_program_gone_by_exec_are_free_for_its_successor() {
        use crate::share::lock_table::{Kind, Owner, Request, TO_END};
        let image = &image("exec-offset-lock");
        let (parent, _) = FileSystem::open_shared(image).unwrap();
        let (execs, _) = FileSystem::open_shared(image).unwrap();
        execs.write(Path::new("/f"), b"handed over").unwrap();
        let ino = execs.metadata(Path::new("/f")).unwrap().ino;
        let h = execs.share_description(ino, libc::O_WRONLY as u32, 0).unwrap().expect("a shared mount");
        std::mem::forget(execs.lock_offset(h).expect("a held description")); // its pump, killed
        let pid = std::process::id();
        let start = crate::share::start_time(pid).unwrap();
        let (a, b) = (Owner::Mount { pid, start, owner: 1 }, Owner::Mount { pid, start, owner: 2 });
        let range = move |start, end, kind| Request { ino, flock: false, start, end, kind };
        execs.with_record_locks(|s| s.note_waiting_for_good(a, &range(0, 9, Kind::Write))).unwrap();
        execs.with_record_locks(|s| s.hold_for_good()).unwrap();
        let dying = exec_away(execs, h, &parent);
        let (next, _) = FileSystem::open_shared(image).unwrap(); // reaps the dead slot
        let (third, _) = FileSystem::open_shared(image).unwrap();
        assert_eq!(third.inner.shared_parts().unwrap().1, dying, "the reaped slot's index taken again");
        assert_eq!(next.adopt_inherited(&[h]), vec![Some((ino, libc::O_WRONLY as u32))]);
        let next = std::sync::Arc::new(next);
        let ten_s = std::time::Duration::from_secs(10);
        let got = on_a_thread(&next, move |fs| fs.lock_offset(h).map(|g| g.get())).recv_timeout(ten_s);
        assert_eq!(got, Ok(Some(0)), "the successor waits for the offset lock of the program it replaced");
        let owner = Owner::Process { pid, start };
        let got =
            on_a_thread(&next, move |fs| fs.set_record_lock(owner, &range(40, TO_END, Kind::Write), pid as i32, None))
                .recv_timeout(ten_s);
        assert_eq!(got, Ok(Ok(())), "a record lock waits for the table lock of the program gone");
        // Owner `a` waits for nothing now: `b`'s wait for what `a` holds closes no cycle.
        next.set_record_lock(a, &range(20, 29, Kind::Write), 1, None).unwrap();
        next.set_record_lock(b, &range(0, 9, Kind::Write), 2, None).unwrap();
        let rx = on_a_thread(&next, move |fs| fs.set_record_lock(b, &range(20, 29, Kind::Write), 2, Some(&|| false)));
        let early = rx.recv_timeout(std::time::Duration::from_millis(300));
        assert_eq!(early, Err(std::sync::mpsc::RecvTimeoutError::Timeout), "b's wait ended while a held the range");
        next.set_record_lock(a, &range(20, 29, Kind::Unlock), 1, None).unwrap();
        assert_eq!(rx.recv_timeout(ten_s), Ok(Ok(())), "b's wait, once a let go");
        next.inherited_opened(None);
        next.release_description(h);
        drop((third, parent));
    }

    /// An exec'd program holds the unlinked file it was handed by its description alone
    /// between its join (which lets go of its predecessor's holds) and its open of the
    /// file: a third participant's last close of the file meanwhile, before the program
    /// adopted the description or after, leaves it (a live description of it while a
    /// program is on its way counts as open elsewhere). Without that
    /// (`description-holds-nothing`), or with the program uncounted as it adopts
    /// (`adoption-uncounts-before-open`), the close freed it and the program's open failed.
    #[test]
    fn an_execd_programs_unlinked_file_outlives_a_close_before_its_open() {
        use crate::fs::file::Access;
        let image = &image("exec-unlinked");
        let (other, _) = FileSystem::open_shared(image).unwrap();
        let read = Access { read: true, write: false, append: false };
        for close_after_adoption in [false, true] {
            let (execs, _) = FileSystem::open_shared(image).unwrap();
            execs.write(Path::new("/f"), b"handed over").unwrap();
            let ino = execs.metadata(Path::new("/f")).unwrap().ino;
            let held_by_execs = execs.open_ino(ino, read).unwrap();
            let mut held_by_other = Some(other.open_ino(ino, read).unwrap());
            execs.remove_file(Path::new("/f")).unwrap();
            let h = execs.share_description(ino, libc::O_RDONLY as u32, 0).unwrap().expect("a shared mount");
            std::mem::forget(held_by_execs);
            exec_away(execs, h, &other);
            let (next, _) = FileSystem::open_shared(image).unwrap();
            if !close_after_adoption {
                held_by_other = None; // the last hold of the unlinked file but the program's
            }
            assert_eq!(next.adopt_inherited(&[h]), vec![Some((ino, libc::O_RDONLY as u32))]);
            drop(held_by_other.take());
            let f = next.open_ino(ino, read).unwrap_or_else(|e| {
                panic!("closed after the adoption: {close_after_adoption}: the program's file was freed: {e}")
            });
            let mut buf = [0u8; 11];
            assert_eq!(f.read_at(0, &mut buf).unwrap(), 11);
            assert_eq!(&buf, b"handed over");
            next.inherited_opened(None);
            drop(f);
            next.release_description(h);
            drop(next);
        }
        drop(other);
    }
}
