//! FUSE over io_uring: the kernel's per-CPU request queues (Linux 6.14 and later, FUSE ABI
//! 7.42, turned on by `/sys/module/fuse/parameters/enable_uring`). Added to fuser 0.17 for
//! HashFS; fuser itself has the INIT flag and no transport.
//!
//! How it works. After INIT has granted `FUSE_OVER_IO_URING`, one thread per possible CPU
//! (pinned to it) opens an io_uring with 128-byte SQEs and registers `depth` entries with
//! the kernel, each a header buffer and a payload buffer. The kernel then queues a request
//! on the ring of the CPU its caller runs on: it writes the `fuse_in_header`, the opcode's
//! fixed argument and the rest of the arguments into a free entry and completes that entry's
//! command. The thread rebuilds the request as `/dev/fuse` would have delivered it,
//! dispatches it, and hands the entry back with `COMMIT_AND_FETCH`, which carries the reply
//! (out header in the header buffer, out arguments in the payload) and waits for the next
//! request in one submission. A request thus costs one `io_uring_enter` on the CPU that
//! asked, in place of a wake-up of a reader thread, a `read` and a `writev`.
//!
//! What stays on `/dev/fuse`: INIT, FORGET and BATCH_FORGET, INTERRUPT, and any request sent
//! before every queue has registered; the ordinary event loop threads keep serving them.
//!
//! Replies must be sent before the filesystem method returns (HashFS's always are): the
//! entry goes back to the kernel right after. A reply still missing then is answered EIO and
//! logged, and a late one is refused (its entry may already hold another request).

use std::io;
use std::io::IoSlice;
use std::os::fd::AsFd;
use std::os::fd::AsRawFd;
use std::os::fd::FromRawFd;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use io_uring::IoUring;
use io_uring::cqueue;
use io_uring::opcode;
use io_uring::squeue;
use io_uring::types;
use log::debug;
use log::error;
use log::warn;
use parking_lot::Mutex;

use crate::Filesystem;
use crate::ReplyEmpty;
use crate::channel::ChannelSender;
use crate::ll::Operation;
use crate::request::RequestWithSender;
use crate::session::SessionEventLoop;

/// `fuse_uring_req_header`: `in_out` (128 bytes), `op_in` (128), `fuse_uring_ent_in_out` (32).
const OP_IN: usize = 128;
const OP_IN_SIZE: usize = 128;
const ENT_IN_OUT: usize = 256;
const HEADER_SIZE: usize = 288;
/// `fuse_in_header` and `fuse_out_header`.
const IN_HEADER_SIZE: usize = 40;
const OUT_HEADER_SIZE: usize = 16;
/// `enum fuse_uring_cmd`.
const CMD_REGISTER: u32 = 1;
const CMD_COMMIT_AND_FETCH: u32 = 2;
/// The user data of the shutdown poll; entries use their index.
const SHUTDOWN: u64 = u64::MAX;

/// What the session needs to start the queues.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UringParams {
    /// Entries per queue.
    pub(crate) depth: usize,
    /// At least the kernel's `max_payload_sz` for this connection.
    pub(crate) payload_size: usize,
}

impl UringParams {
    /// The payload the kernel requires of every entry: the larger of its minimum read
    /// buffer, `max_write`, and `max_pages` pages (32 when `FUSE_MAX_PAGES` is not granted).
    pub(crate) fn new(depth: usize, max_write: u32, max_pages: u16) -> Self {
        let page = page_size::get();
        let pages = usize::from(max_pages).max(32) * page;
        let payload_size = (max_write as usize).max(8192).max(pages);
        Self {
            depth: depth.max(1),
            payload_size,
        }
    }
}

/// One ring entry's buffers. The kernel writes them while the entry is its own; the
/// queue's thread reads the request and the reply writes the answer while it is ours.
struct EntryBuffers {
    header: Box<[u8; HEADER_SIZE]>,
    payload: Box<[u8]>,
    /// The two iovecs a REGISTER points the kernel at (they must outlive the command).
    iov: Box<[libc::iovec; 2]>,
    /// The request whose reply may be written now, if any.
    armed: Option<u64>,
    replied: bool,
}

/// A ring entry as the reply of one request sees it.
#[derive(Debug)]
pub(crate) struct Slot(Mutex<EntryBuffers>, ChannelSender);

impl std::fmt::Debug for EntryBuffers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EntryBuffers")
            .field("armed", &self.armed)
            .finish()
    }
}

// SAFETY: the raw pointers in `iov` point into `header` and `payload`, which the struct
// owns; they are only handed to the kernel, never dereferenced in user space.
unsafe impl Send for EntryBuffers {}

impl Slot {
    fn new(payload_size: usize, ch: ChannelSender) -> Arc<Slot> {
        let mut header = Box::new([0u8; HEADER_SIZE]);
        let mut payload = vec![0u8; payload_size].into_boxed_slice();
        let iov = Box::new([
            libc::iovec {
                iov_base: header.as_mut_ptr().cast(),
                iov_len: HEADER_SIZE,
            },
            libc::iovec {
                iov_base: payload.as_mut_ptr().cast(),
                iov_len: payload.len(),
            },
        ]);
        Arc::new(Slot(
            Mutex::new(EntryBuffers {
                header,
                payload,
                iov,
                armed: None,
                replied: false,
            }),
            ch,
        ))
    }

    /// The `/dev/fuse` channel of the session (notifications, backing files).
    pub(crate) fn channel(&self) -> ChannelSender {
        self.1.clone()
    }

    /// Writes a reply (`fuse_out_header` then the out arguments) into the entry.
    pub(crate) fn reply(&self, data: &[IoSlice<'_>]) -> io::Result<()> {
        let mut e = self.0.lock();
        let Some(unique) = e.armed.take() else {
            return Err(io::Error::other(
                "a reply to an io_uring request after its entry was handed back",
            ));
        };
        e.replied = true;
        let payload: usize = data.iter().skip(1).map(|d| d.len()).sum();
        let header_ok = data.first().is_some_and(|h| h.len() == OUT_HEADER_SIZE);
        if !header_ok || payload > e.payload.len() {
            error!("io_uring reply of {payload} bytes does not fit its entry; answered EIO");
            write_out_header(&mut e, unique, -libc::EIO);
            return Ok(());
        }
        e.header[..OUT_HEADER_SIZE].copy_from_slice(&data[0]);
        let mut at = 0;
        for d in &data[1..] {
            e.payload[at..at + d.len()].copy_from_slice(d);
            at += d.len();
        }
        set_payload_size(&mut e, payload);
        Ok(())
    }
}

fn write_out_header(e: &mut EntryBuffers, unique: u64, errno: i32) {
    e.header[0..4].copy_from_slice(&(OUT_HEADER_SIZE as u32).to_ne_bytes());
    e.header[4..8].copy_from_slice(&errno.to_ne_bytes());
    e.header[8..16].copy_from_slice(&unique.to_ne_bytes());
    set_payload_size(e, 0);
}

fn set_payload_size(e: &mut EntryBuffers, size: usize) {
    let at = ENT_IN_OUT + 16;
    e.header[at..at + 4].copy_from_slice(&(size as u32).to_ne_bytes());
}

fn read_u32(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn read_u64(b: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// A REGISTER or COMMIT_AND_FETCH command for entry `index` of queue `qid`.
fn command(
    fd: i32,
    qid: u16,
    index: usize,
    slot: &Slot,
    op: u32,
    commit_id: u64,
) -> squeue::Entry128 {
    // `struct fuse_uring_cmd_req`: flags, commit_id, qid.
    let mut cmd = [0u8; 80];
    cmd[8..16].copy_from_slice(&commit_id.to_ne_bytes());
    cmd[16..18].copy_from_slice(&qid.to_ne_bytes());
    let mut b = opcode::UringCmd80::new(types::Fd(fd), op).cmd(cmd);
    if op == CMD_REGISTER {
        b = b.addr(Some(slot.0.lock().iov.as_ptr() as u64));
    }
    let sqe = b.build().user_data(index as u64);
    if op != CMD_REGISTER {
        return sqe;
    }
    // A REGISTER names its two iovecs in `sqe->len`, which the builder does not set.
    // SAFETY: `Entry128` is `repr(C)`: a 64-byte `io_uring_sqe` then 64 bytes of command,
    // plain integers in which every bit pattern is valid; `len` is the u32 at byte 24.
    let mut raw: [u8; 128] = unsafe { std::mem::transmute(sqe) };
    raw[24..28].copy_from_slice(&2u32.to_ne_bytes());
    // SAFETY: as above, the bytes came from an `Entry128` and stay a valid one.
    unsafe { std::mem::transmute::<[u8; 128], squeue::Entry128>(raw) }
}

fn push(
    ring: &mut IoUring<squeue::Entry128, cqueue::Entry>,
    sqe: &squeue::Entry128,
) -> io::Result<()> {
    // SAFETY: every buffer a command names (the iovecs, header and payload of its slot)
    // lives in a slot kept alive until the ring is dropped.
    unsafe { ring.submission().push(sqe) }
        .map_err(|_| io::Error::other("io_uring submission queue full"))
}

fn pin_to_cpu(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET stays inside it for
    // cpu < CPU_SETSIZE, checked; sched_setaffinity only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu < libc::CPU_SETSIZE as usize {
            libc::CPU_SET(cpu, &mut set);
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                warn!(
                    "io_uring queue {cpu}: could not pin its thread: {}",
                    io::Error::last_os_error()
                );
            }
        }
    }
}

/// The queue threads' nice value. A queue's thread is pinned to its CPU, so it cannot
/// move to an idle one: at the default priority it waits its turn behind every runnable
/// caller on that CPU while the caller it serves (and whatever that caller holds, a
/// directory's or a file's lock in the kernel) waits for it. Measured with filebench's web
/// server (100 threads, appends to one shared log under the kernel's inode lock) through
/// HashFS: 150-172 K ops/s at nice 0, 189 K at -10, against 185-208 K through /dev/fuse
/// (one round of 15 s each; the median append 0.15 ms but the mean 18 ms at nice 0);
/// unpinned, 44 K. Where the daemon may not raise it (not root), it stays as it is.
const QUEUE_NICE: i32 = -10;

fn raise_priority(qid: usize) {
    // SAFETY: gettid and setpriority take and return plain integers.
    let r =
        unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, QUEUE_NICE) };
    if r != 0 {
        debug!(
            "io_uring queue {qid}: nice {QUEUE_NICE} refused: {}",
            io::Error::last_os_error()
        );
    }
}

/// How many queues the kernel expects: one per possible CPU (`num_possible_cpus`, the
/// count of `/sys/devices/system/cpu/possible`); every one must register before the
/// kernel sends a request through any.
pub(crate) fn possible_cpus() -> io::Result<usize> {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/possible")?;
    let mut n = 0;
    for part in s.trim().split(',') {
        let bad = || {
            io::Error::other(format!(
                "unreadable /sys/devices/system/cpu/possible: {s:?}"
            ))
        };
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (usize, usize) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
        if a > b {
            return Err(bad());
        }
        n += b - a + 1;
    }
    Ok(n)
}

/// The running queues: a shutdown event each and their threads.
#[derive(Debug)]
pub(crate) struct Queues {
    stops: Vec<OwnedFd>,
    threads: Vec<std::thread::JoinHandle<io::Result<()>>>,
}

impl Queues {
    /// Starts one queue per possible CPU, serving `event_loop`'s filesystem, and returns
    /// once each has registered its entries (or stops them all and returns the first error).
    pub(crate) fn start<FS: Filesystem>(
        make_loop: impl Fn(usize) -> SessionEventLoop<FS>,
        params: UringParams,
    ) -> io::Result<Queues> {
        let cpus = possible_cpus()?;
        let mut q = Queues {
            stops: Vec::new(),
            threads: Vec::new(),
        };
        let (tx, rx) = std::sync::mpsc::channel::<(usize, io::Result<()>)>();
        for qid in 0..cpus {
            // SAFETY: eventfd has no memory preconditions; the result is checked.
            let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
            if efd < 0 {
                let e = io::Error::last_os_error();
                let _ = q.stop();
                return Err(e);
            }
            // SAFETY: `efd` is a new descriptor nothing else owns.
            let stop = unsafe { OwnedFd::from_raw_fd(efd) };
            let event_loop = make_loop(qid);
            let tx = tx.clone();
            q.stops.push(stop);
            let spawned = std::thread::Builder::new()
                .name(format!("fuser-ring-{qid}"))
                .spawn(move || run_queue(qid, &event_loop, params, efd, tx));
            match spawned {
                Ok(t) => q.threads.push(t),
                Err(e) => {
                    let _ = q.stop();
                    return Err(e);
                }
            }
        }
        drop(tx);
        for _ in 0..cpus {
            let failed = match rx.recv() {
                Ok((_, Ok(()))) => continue,
                Ok((qid, Err(e))) => io::Error::new(e.kind(), format!("queue {qid}: {e}")),
                Err(_) => io::Error::other("an io_uring queue thread ended before registering"),
            };
            let _ = q.stop();
            return Err(failed);
        }
        Ok(q)
    }

    /// Stops every queue and waits for its thread; the first error, if any.
    pub(crate) fn stop(self) -> io::Result<()> {
        for s in &self.stops {
            let one = 1u64;
            // SAFETY: writes 8 bytes from a live u64 to an eventfd we own.
            unsafe { libc::write(s.as_raw_fd(), (&one as *const u64).cast(), 8) };
        }
        let mut first = Ok(());
        for t in self.threads {
            let r = t
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("an io_uring queue thread panicked")));
            if let (Err(e), true) = (r, first.is_ok()) {
                first = Err(e);
            }
        }
        first
    }
}

fn run_queue<FS: Filesystem>(
    qid: usize,
    el: &SessionEventLoop<FS>,
    params: UringParams,
    stop: i32,
    started: std::sync::mpsc::Sender<(usize, io::Result<()>)>,
) -> io::Result<()> {
    pin_to_cpu(qid);
    raise_priority(qid);
    let r = serve(qid, el, params, stop, &started);
    if let Err(e) = &r {
        // After a failed start the session reports it; later, the queue is gone and the
        // kernel's requests on this CPU with it: say so where the daemon's errors go.
        let _ = started.send((qid, Err(io::Error::new(e.kind(), e.to_string()))));
        error!("FUSE over io_uring, queue {qid}: {e}");
        eprintln!("FUSE over io_uring, queue {qid}: {e}");
    }
    r
}

fn serve<FS: Filesystem>(
    qid: usize,
    el: &SessionEventLoop<FS>,
    params: UringParams,
    stop: i32,
    started: &std::sync::mpsc::Sender<(usize, io::Result<()>)>,
) -> io::Result<()> {
    let depth = params.depth;
    let fd = el.ch.as_fd().as_raw_fd();
    let qid16 = u16::try_from(qid).map_err(|_| io::Error::other("too many CPUs for a queue id"))?;
    let mut ring: IoUring<squeue::Entry128, cqueue::Entry> = IoUring::builder()
        .setup_cqsize(2 * depth as u32 + 2)
        .build(depth as u32 + 1)?;
    let slots: Vec<Arc<Slot>> = (0..depth)
        .map(|_| Slot::new(params.payload_size, el.ch.sender()))
        .collect();
    for (i, slot) in slots.iter().enumerate() {
        push(&mut ring, &command(fd, qid16, i, slot, CMD_REGISTER, 0))?;
    }
    let poll = opcode::PollAdd::new(types::Fd(stop), libc::POLLIN as u32)
        .build()
        .user_data(SHUTDOWN);
    push(&mut ring, &poll.into())?;
    // The kernel registers an entry while it takes the command, and fails it there: what
    // did not complete with an error now is registered (it completes when a request comes).
    ring.submit()?;
    let mut done: Vec<(u64, i32)> = ring
        .completion()
        .map(|c| (c.user_data(), c.result()))
        .collect();
    if let Some(&(_, res)) = done.iter().find(|(i, res)| *i != SHUTDOWN && *res < 0) {
        return Err(io::Error::other(format!(
            "registering: {}",
            io::Error::from_raw_os_error(-res)
        )));
    }
    let _ = started.send((qid, Ok(())));

    let mut live = depth;
    let mut request = Vec::with_capacity(params.payload_size + IN_HEADER_SIZE + OP_IN_SIZE);
    loop {
        for &(index, res) in &done {
            if index == SHUTDOWN {
                return Ok(());
            }
            let i = index as usize;
            let Some(slot) = slots.get(i) else {
                return Err(io::Error::other(format!(
                    "a completion for no entry ({index})"
                )));
            };
            if res < 0 {
                match -res {
                    libc::EINTR | libc::EAGAIN => {
                        // The entry's commit did not go through: hand it back again.
                        let id = read_u64(&slot.0.lock().header[..], ENT_IN_OUT + 8);
                        push(
                            &mut ring,
                            &command(fd, qid16, i, slot, CMD_COMMIT_AND_FETCH, id),
                        )?;
                    }
                    // The connection is going away (unmount or abort).
                    libc::ENOTCONN | libc::ENODEV | libc::ECANCELED => {
                        live -= 1;
                        if live == 0 {
                            return Ok(());
                        }
                    }
                    e => return Err(io::Error::from_raw_os_error(e)),
                }
                continue;
            }
            let commit_id = handle(el, slot, &mut request);
            push(
                &mut ring,
                &command(fd, qid16, i, slot, CMD_COMMIT_AND_FETCH, commit_id),
            )?;
        }
        loop {
            match ring.submit_and_wait(1) {
                Ok(_) => break,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => return Err(e),
            }
        }
        done.clear();
        done.extend(ring.completion().map(|c| (c.user_data(), c.result())));
    }
}

/// Serves the request in `slot`; returns the commit id to hand it back with.
fn handle<FS: Filesystem>(
    el: &SessionEventLoop<FS>,
    slot: &Arc<Slot>,
    request: &mut Vec<u8>,
) -> u64 {
    let (commit_id, unique) = {
        let mut e = slot.0.lock();
        let h = &e.header[..];
        let commit_id = read_u64(h, ENT_IN_OUT + 8);
        let payload = read_u32(h, ENT_IN_OUT + 16) as usize;
        let len = read_u32(h, 0) as usize;
        let unique = read_u64(h, 8);
        // The opcode's fixed argument is whatever of the length the payload does not hold.
        let op_in = len.checked_sub(IN_HEADER_SIZE + payload);
        match op_in {
            Some(op_in) if op_in <= OP_IN_SIZE && payload <= e.payload.len() => {
                request.clear();
                request.extend_from_slice(&h[..IN_HEADER_SIZE]);
                request.extend_from_slice(&h[OP_IN..OP_IN + op_in]);
                request.extend_from_slice(&e.payload[..payload]);
                e.armed = Some(unique);
                e.replied = false;
            }
            _ => {
                error!(
                    "io_uring request of {len} bytes with a {payload}-byte payload is malformed; answered EIO"
                );
                write_out_header(&mut e, unique, -libc::EIO);
                return commit_id;
            }
        }
        (commit_id, unique)
    };
    match RequestWithSender::new_ring(slot.clone(), request) {
        Some(req) => {
            if let Ok(Operation::Destroy(_)) = req.request.operation() {
                req.reply::<ReplyEmpty>().ok();
            } else {
                req.dispatch(el);
            }
        }
        None => error!("io_uring request {unique} could not be parsed"),
    }
    let mut e = slot.0.lock();
    if !e.replied {
        e.armed = None;
        error!(
            "io_uring request {unique} was not answered before its method returned; answered EIO"
        );
        write_out_header(&mut e, unique, -libc::EIO);
    }
    commit_id
}
