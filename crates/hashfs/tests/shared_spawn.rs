//! A program started by `posix_spawn` with descriptions handed over (`fs/shared/fork.rs`):
//! its count in the image's `forks` word lives in a ticket, a participant slot the parent
//! reserves before the spawn and hands to the program's pid once the spawn returns, and is
//! taken exactly once, by the program (as it joins, or once it has opened its files) or by
//! whoever reaps the ticket after the program has ended. Before 2026-12-07 the parent
//! reserved a slot only after the spawn returned: a program that had already joined,
//! opened its files, uncounted itself and left got a counted slot after it, which its
//! reaper uncounted a second time (another program on its way then lost its count).
//!
//! The program is this test binary run again (`program`, below), so that it is another
//! process with a pid of its own; the parent's `posix_spawn` returning late is its call
//! of `FileSystem::spawned` made late.

mod common;

use common::shared_image::Image;
use hashfs::share::Handle;
use hashfs::testing::forks_counted;
use hashfs::{Access, FileSystem, OpenOptions};
use std::io::{BufRead, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

/// The program's side, when this binary is run as one: `HASHFS_SPAWN_ROLE` says which;
/// `HASHFS_SHARED_CHILD` names the image, `HASHFS_SPAWN_HANDED` the description handed
/// over (`index-generation`), `HASHFS_SPAWN_TICKET` the spawn's ticket (as the
/// descriptors' names carry them to the shim).
///
/// - `program`: joins, adopts the description, opens its file, tells the ticket, leaves,
///   says `left`, and lives on until its standard input closes.
/// - `execs`: the same until it has told the ticket; says `opened`, waits for a line, and
///   hands the description over to the program it execs (this binary again, `successor`).
/// - `late`: joins, says `joined`, waits for a line, adopts, opens, tells the ticket, says
///   `opened` (still a participant) and leaves once its standard input closes.
/// - `successor`: joins, adopts, opens, says `left` (still a participant) and leaves once
///   its standard input closes.
#[test]
fn program() {
    let Ok(role) = std::env::var("HASHFS_SPAWN_ROLE") else { return };
    let image = std::env::var("HASHFS_SHARED_CHILD").unwrap();
    let handed = std::env::var("HASHFS_SPAWN_HANDED").unwrap();
    let (i, g) = handed.split_once('-').unwrap();
    let h = Handle { index: i.parse().unwrap(), generation: g.parse().unwrap() };
    let ticket = std::env::var("HASHFS_SPAWN_TICKET").ok().map(|t| t.parse().unwrap());
    let fs = FileSystem::open_shared(Path::new(&image)).unwrap().0;
    let mut stdin = std::io::stdin().lock();
    if role == "late" {
        println!("joined");
        stdin.read_line(&mut String::new()).unwrap();
    }
    let (ino, _) = fs.adopt_inherited(&[h])[0].expect("the description handed over is there");
    let f = fs.open_ino(ino, Access { read: true, write: false, append: false }).unwrap();
    fs.inherited_opened(if role == "successor" { None } else { ticket });
    match role.as_str() {
        "program" => {
            drop(f);
            fs.release_description(h);
            fs.shutdown().unwrap();
            println!("left");
            let _ = stdin.read_to_end(&mut Vec::new());
        }
        "execs" => {
            println!("opened");
            let mut line = String::new();
            stdin.read_line(&mut line).unwrap();
            std::mem::forget(fs.prepare_exec(&[h]).expect("a shared mount"));
            let e = Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "program", "--nocapture", "--test-threads", "1"])
                .env("HASHFS_SPAWN_ROLE", "successor")
                .exec();
            panic!("exec: {e}");
        }
        "late" => {
            println!("opened");
            let _ = stdin.read_to_end(&mut Vec::new());
            drop(f);
            fs.release_description(h);
            fs.shutdown().unwrap();
        }
        "successor" => {
            println!("left");
            let _ = stdin.read_to_end(&mut Vec::new());
            drop(f);
            fs.release_description(h);
            fs.shutdown().unwrap();
        }
        other => panic!("no role {other}"),
    }
}

/// Starts this binary as a program of `role` on `img`, handed `h` with the spawn's `ticket`
/// (None: a spawn without one, as before 2026-12-07);
/// its lines come through the receiver.
fn start(img: &Image, role: &str, h: Handle, ticket: Option<u32>) -> (Child, Receiver<String>) {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", "program", "--nocapture", "--test-threads", "1"])
        .env("HASHFS_SPAWN_ROLE", role)
        .env("HASHFS_SHARED_CHILD", &img.path)
        .env("HASHFS_SPAWN_HANDED", format!("{}-{}", h.index, h.generation));
    if let Some(t) = ticket {
        c.env("HASHFS_SPAWN_TICKET", t.to_string());
    }
    let mut child = c.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let out: ChildStdout = child.stdout.take().unwrap();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(|l| l.ok()) {
            let _ = tx.send(line);
        }
    });
    (child, rx)
}

/// Waits for the program to say `what` (20 s at most).
fn wait_for(lines: &Receiver<String>, what: &str) {
    loop {
        match lines.recv_timeout(Duration::from_secs(20)) {
            Ok(l) if l.ends_with(what) => return,
            Ok(_) => {}
            Err(e) => panic!("the program never said {what}: {e}"),
        }
    }
}

/// A file whose description a spawn hands over, and a second spawn on its way all along,
/// whose count must outlive everything the first one's program does.
fn setup(img: &Image) -> (FileSystem, hashfs::File, Handle, hashfs::Fork) {
    let fs = img.join();
    let f = fs.open_file(Path::new("/f"), OpenOptions::new().write(true).create(true)).unwrap();
    f.write_at(0, b"handed over").unwrap();
    let ino = f.metadata().unwrap().ino;
    let h = fs.share_description(ino, libc::O_RDONLY as u32, 0).unwrap().expect("a shared mount");
    let other = fs.prepare_spawn(&[h], true).expect("a shared mount");
    (fs, f, h, other)
}

/// What is left once the spawn on its way all along has failed: no count, and an image
/// its last participant marks clean.
fn finish(img: &Image, fs: FileSystem, f: hashfs::File, h: Handle, other: hashfs::Fork) {
    fs.spawn_failed(other);
    assert_eq!(forks_counted(&fs), Some(0));
    drop(f);
    fs.release_description(h);
    fs.unmount().unwrap();
    assert!(img.marked_clean(), "the last to leave found a program on its way");
    img.check();
}

/// The program joins, opens its file and leaves before the parent's spawn returns (the
/// parent was not scheduled meanwhile): its count goes once, when the ticket, handed to
/// it after, is reaped.
#[test]
fn a_program_that_left_before_its_spawn_returned_is_uncounted_once() {
    let img = Image::new("spawn-left");
    let (fs, f, h, other) = setup(&img);
    let spawn = fs.prepare_spawn(&[h], true).expect("a shared mount");
    assert_eq!(forks_counted(&fs), Some(2));
    let (mut child, lines) = start(&img, "program", h, spawn.ticket());
    wait_for(&lines, "left");
    fs.spawned(spawn, child.id() as libc::pid_t);
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success(), "the program failed");
    // A participant joins, reaping the ended program's ticket.
    img.join().shutdown().unwrap();
    assert_eq!(forks_counted(&fs), Some(1), "the program's count went twice, or stayed");
    finish(&img, fs, f, h, other);
}

/// The parent's spawn returns after the program joined and before it opened its files:
/// the program, finding the ticket naming it once it has, takes its count then (it no
/// longer counts as on its way), not only as it leaves or at its reaping.
#[test]
fn a_program_that_joined_before_its_spawn_returned_stops_counting_once_it_opened_its_files() {
    let img = Image::new("spawn-late");
    let (fs, f, h, other) = setup(&img);
    let spawn = fs.prepare_spawn(&[h], true).expect("a shared mount");
    let (mut child, lines) = start(&img, "late", h, spawn.ticket());
    wait_for(&lines, "joined");
    fs.spawned(spawn, child.id() as libc::pid_t);
    writeln!(child.stdin.as_mut().unwrap(), "go").unwrap();
    wait_for(&lines, "opened");
    assert_eq!(forks_counted(&fs), Some(1), "the program still counts as on its way, or went twice");
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success(), "the program failed");
    img.join().shutdown().unwrap();
    assert_eq!(forks_counted(&fs), Some(1), "the program's count went twice");
    finish(&img, fs, f, h, other);
}

/// A program takes a ticket's count only while the ticket names it: a ticket that was
/// handed elsewhere, reaped and taken again (here by the parent's next spawn) before the
/// program opened its files is another's count. (The ticket is handed to a process that
/// has ended, as if the pid the spawn returned were another's.)
#[test]
fn a_ticket_reaped_and_taken_again_is_not_the_programs() {
    let img = Image::new("spawn-reaped");
    let (fs, f, h, other) = setup(&img);
    let spawn = fs.prepare_spawn(&[h], true).expect("a shared mount");
    let ticket = spawn.ticket();
    let (mut child, lines) = start(&img, "late", h, ticket);
    wait_for(&lines, "joined");
    let mut gone = Command::new("true").spawn().unwrap();
    let gone_pid = gone.id() as libc::pid_t;
    gone.wait().unwrap();
    fs.spawned(spawn, gone_pid);
    img.join().shutdown().unwrap(); // reaps the ticket
    assert_eq!(forks_counted(&fs), Some(1));
    let next = fs.prepare_spawn(&[h], true).expect("a shared mount");
    assert_eq!(next.ticket(), ticket, "the next spawn took another slot than the reaped ticket's");
    writeln!(child.stdin.as_mut().unwrap(), "go").unwrap();
    wait_for(&lines, "opened");
    assert_eq!(forks_counted(&fs), Some(2), "the program took the next spawn's count");
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success(), "the program failed");
    fs.spawn_failed(next);
    finish(&img, fs, f, h, other);
}

/// The program opens its files before the parent's spawn returns (its ticket still names
/// the parent: nothing to take), then execs with the description handed over; the ticket
/// is handed to it meanwhile. The program after the exec finds two counts of its process
/// (the exec's and the ticket's) and carries one on.
#[test]
fn a_program_that_execs_before_its_spawn_returned_passes_one_count_on() {
    let img = Image::new("spawn-execs");
    let (fs, f, h, other) = setup(&img);
    let spawn = fs.prepare_spawn(&[h], true).expect("a shared mount");
    let (mut child, lines) = start(&img, "execs", h, spawn.ticket());
    wait_for(&lines, "opened");
    fs.spawned(spawn, child.id() as libc::pid_t);
    writeln!(child.stdin.as_mut().unwrap(), "go").unwrap();
    wait_for(&lines, "left");
    assert_eq!(forks_counted(&fs), Some(1), "the exec'd program's counts went twice, or stayed");
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success(), "the program failed");
    finish(&img, fs, f, h, other);
}

/// A program that ended (without joining: it does not load the shim) before its spawn
/// returned: the ticket, handed to a process that no longer runs, is reaped and uncounted
/// by the next participant to join. (With the slot reserved after the spawn, none was:
/// the count stayed.)
#[test]
fn a_program_that_ended_before_its_spawn_returned_is_uncounted_by_a_reaper() {
    let img = Image::new("spawn-ended");
    let (fs, f, h, other) = setup(&img);
    let spawn = fs.prepare_spawn(&[h], true).expect("a shared mount");
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id() as libc::pid_t;
    // Ended, not yet waited for (a zombie), as when posix_spawn returns to a late parent.
    let zombie = || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z'))
    };
    while !zombie() {
        std::thread::sleep(Duration::from_millis(1));
    }
    fs.spawned(spawn, pid);
    img.join().shutdown().unwrap();
    assert_eq!(forks_counted(&fs), Some(1), "the ended program's count stayed");
    child.wait().unwrap();
    finish(&img, fs, f, h, other);
}
