//! A shard's own io_uring for its client sockets (issue 27): what
//! `tuning/request-floor.c` measured as the kernel's floor for ZooKeeper's
//! request/reply traffic, inside glommio's executor.
//!
//! - Receiving: one multishot recv per connection into a ring of buffers
//!   the shard provides (no system call per receive). Each completion's
//!   bytes are appended to the connection's inbox, the buffer goes straight
//!   back to the ring, and the connection's reader task is woken.
//! - Sending: a reply batch is one SEND entry; entries pushed during a loop
//!   turn (every connection's) go to the kernel together with the next
//!   `io_uring_enter`, which also collects the completions.
//! - The ring is `SINGLE_ISSUER | DEFER_TASKRUN` (completions are produced
//!   only when this thread enters the ring) where the kernel has it, and
//!   signals an eventfd when work arrives. The driver task sleeps on that
//!   eventfd through glommio's own ring (`glommio::net::poll_readable`, the
//!   function vendor/glommio adds), so the shard parks in one place.
//! - Read timeouts (sessionless connections, negotiated session timeouts)
//!   are deadlines a task of the ring sweeps every `SWEEP_EVERY`
//!   (`ClientRing::sweep_every`), not a timer per read.
//!
//! Bounds: the inbox of a connection whose reader does not take its bytes
//! (paused by backpressure) stops receiving at `INBOX_PAUSE_BYTES` (the
//! multishot recv is cancelled) and resumes below half of it; a reader
//! that took the whole inbox (`poll_swap`) may hold as much again while it
//! works through it, and holds nothing while it waits; the provided
//! buffers are `BUF_COUNT` x `BUF_BYTES` per shard (when all are in use a
//! recv ends with ENOBUFS and is re-armed once buffers are back); a
//! connection has at most one SEND in flight.
//!
//! A socket's descriptor is closed (by the ring, IORING_OP_CLOSE) only once
//! no operation of it is in flight, so no completion can name a reused
//! descriptor; every completion also carries its slot's generation.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use futures_lite::future::poll_fn;
use io_uring::{cqueue, opcode, squeue, types, IoUring};

/// Submission queue entries; the completion queue is `CQ_FACTOR` times as
/// many, since one multishot recv posts many completions.
const SQ_ENTRIES: u32 = 1024;
const CQ_FACTOR: u32 = 8;
/// Provided receive buffers per shard (a power of two) and their size. A
/// session's 8 pipelined 1 KiB setData (8.6 KiB) fit one buffer, as in the
/// floor (8 KiB buffers took two receives and two completions for them);
/// 256 x 16 KiB keeps the 4 MiB a shard can take off its sockets in one
/// burst past the inboxes' pause bound (tests/client_ring.rs backpressure).
const BUF_COUNT: u16 = 256;
const BUF_BYTES: usize = 16384;
const BUF_GROUP: u16 = 0;
/// The provided buffers of one shard: allocated at start, resident once
/// the shard has received that much, and kept for the shard's life.
pub const PROVIDED_BUFFERS_BYTES: usize = BUF_COUNT as usize * BUF_BYTES;
/// A connection's inbox past this stops receiving until its reader has
/// taken it below half.
pub const INBOX_PAUSE_BYTES: usize = 256 << 10;
/// A reader's buffer larger than this (it held a frame near jute.maxbuffer)
/// is freed, not handed back to the inbox.
const RECYCLE_BYTES_MAX: usize = INBOX_PAUSE_BYTES + BUF_BYTES;
/// An emptied inbox keeps its capacity until its connection has received
/// nothing for this long.
const INBOX_KEEP_IDLE: Duration = Duration::from_secs(1);
/// How often the driver looks for reads past their timeout.
const SWEEP_EVERY: Duration = Duration::from_millis(25);

/// io_uring_enter's flag that runs deferred work and reaps completions
/// (linux/io_uring.h; the crate does not export it).
const IORING_ENTER_GETEVENTS: u32 = 1;

const KIND_RECV: u64 = 1;
const KIND_SEND: u64 = 2;
const KIND_CANCEL: u64 = 3;
const KIND_CLOSE: u64 = 4;

fn user_data(slot: u32, generation: u32, kind: u64) -> u64 {
    ((slot as u64) << 32) | (((generation & 0xff_ffff) as u64) << 8) | kind
}

fn split_user_data(d: u64) -> (u32, u32, u64) {
    ((d >> 32) as u32, ((d >> 8) & 0xff_ffff) as u32, d & 0xff)
}

/// How a connection's receiving ended.
#[derive(Clone, Copy)]
enum Ended {
    Eof,
    Error(i32),
}

/// What one connection shares with the ring: its inbox, its send, and the
/// wakers of its reader and writer.
struct ConnIo {
    inbox: RefCell<Vec<u8>>,
    /// Bytes of `inbox` the reader has taken.
    inbox_taken: Cell<usize>,
    /// The reader's emptied buffer, parked while it waits: the inbox's next
    /// vector when the reader takes the whole inbox (`poll_swap`).
    spare: RefCell<Vec<u8>>,
    ended: Cell<Option<Ended>>,
    reader: Cell<Option<Waker>>,
    /// When the pending read began waiting, or the last byte came.
    waiting_since: Cell<Instant>,
    read_timeout: Cell<Option<Duration>>,
    timed_out: Cell<bool>,
    /// The multishot recv was cancelled because the inbox is full.
    paused: Cell<bool>,
    send: RefCell<SendState>,
}

#[derive(Default)]
struct SendState {
    buf: Vec<u8>,
    sent: usize,
    done: Option<io::Result<()>>,
    writer: Option<Waker>,
}

impl ConnIo {
    fn inbox_len(&self) -> usize {
        self.inbox.borrow().len() - self.inbox_taken.get()
    }

    fn wake_reader(&self) {
        if let Some(w) = self.reader.take() {
            w.wake();
        }
    }
}

struct Slot {
    generation: u32,
    fd: RawFd,
    io: Rc<ConnIo>,
    recv_armed: bool,
    send_in_flight: bool,
    /// The socket was dropped: the descriptor closes once nothing is in
    /// flight.
    retired: bool,
}

/// The provided-buffer ring: `BUF_COUNT` entries the kernel takes buffers
/// from, and the buffers themselves.
struct BufRing {
    entries: *mut types::BufRingEntry,
    entries_len: usize,
    data: Vec<u8>,
    tail: u16,
}

impl BufRing {
    fn new() -> io::Result<BufRing> {
        let entries_len = BUF_COUNT as usize * std::mem::size_of::<types::BufRingEntry>();
        // SAFETY: an anonymous private mapping, page aligned as the kernel
        // requires for a buffer ring; unmapped in Drop.
        let entries = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                entries_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if entries == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mut ring = BufRing {
            entries: entries as *mut types::BufRingEntry,
            entries_len,
            data: vec![0; BUF_COUNT as usize * BUF_BYTES],
            tail: 0,
        };
        for bid in 0..BUF_COUNT {
            ring.put_back(bid);
        }
        ring.publish();
        Ok(ring)
    }

    /// Gives buffer `bid` back to the kernel (seen at the next `publish`).
    fn put_back(&mut self, bid: u16) {
        let at = (self.tail & (BUF_COUNT - 1)) as usize;
        // SAFETY: `at` < BUF_COUNT, inside the mapping.
        let e = unsafe { &mut *self.entries.add(at) };
        e.set_addr(self.data.as_ptr() as u64 + bid as u64 * BUF_BYTES as u64);
        e.set_len(BUF_BYTES as u32);
        e.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&self) {
        // SAFETY: the tail field of the first entry, which the kernel reads
        // with acquire semantics; it lives as long as the mapping.
        let tail = unsafe { &*(types::BufRingEntry::tail(self.entries) as *const AtomicU16) };
        tail.store(self.tail, Ordering::Release);
    }

    fn bytes(&self, bid: u16, len: usize) -> &[u8] {
        let at = bid as usize * BUF_BYTES;
        &self.data[at..at + len.min(BUF_BYTES)]
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, of that length.
        unsafe { libc::munmap(self.entries as *mut libc::c_void, self.entries_len) };
    }
}

/// One shard's ring for its client sockets. Lives on the shard's thread.
pub struct ClientRing {
    ring: RefCell<IoUring>,
    event_fd: OwnedFd,
    bufs: RefCell<BufRing>,
    slots: RefCell<Vec<Option<Slot>>>,
    free_slots: RefCell<Vec<u32>>,
    next_generation: Cell<u32>,
    /// The driver's waker while it sleeps: pushing an entry wakes it.
    driver: Cell<Option<Waker>>,
    /// Completions gathered in one turn (kept to reuse its allocation).
    completions: RefCell<Vec<(u64, i32, u32)>>,
    /// The eventfd is kept off while the driver is awake
    /// (`eventfd_on_unless_pending`): only on a DEFER_TASKRUN ring, whose
    /// completions are all posted by this thread inside its own calls, and
    /// on x86_64, where the kernel's `atomic_or` of IORING_SQ_TASKRUN is a
    /// full barrier before it reads the eventfd's flag (on arm64 that read
    /// may pass the store, and work that came while the flag was being
    /// cleared would wait for the next sweep).
    quiet_eventfd: bool,
}

impl ClientRing {
    /// A ring for this thread, or why the kernel refused one (the shard
    /// then uses glommio's sockets).
    pub fn new() -> io::Result<Rc<ClientRing>> {
        let mut defer_taskrun = true;
        let ring = IoUring::builder()
            .setup_cqsize(SQ_ENTRIES * CQ_FACTOR)
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_taskrun_flag()
            .build(SQ_ENTRIES)
            .or_else(|_| {
                defer_taskrun = false;
                // Kernels before 6.1 have no DEFER_TASKRUN.
                IoUring::builder()
                    .setup_cqsize(SQ_ENTRIES * CQ_FACTOR)
                    .setup_coop_taskrun()
                    .setup_taskrun_flag()
                    .build(SQ_ENTRIES)
            })?;
        // SAFETY: eventfd returns a new descriptor or -1.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if efd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: just created, owned by nothing else.
        let event_fd = unsafe { OwnedFd::from_raw_fd(efd) };
        ring.submitter().register_eventfd(event_fd.as_raw_fd())?;
        let bufs = BufRing::new()?;
        // SAFETY: the entries mapping lives as long as the ring (both are
        // fields of ClientRing; the ring is dropped first, see Drop).
        unsafe {
            ring.submitter().register_buf_ring_with_flags(
                bufs.entries as u64,
                BUF_COUNT,
                BUF_GROUP,
                0,
            )?;
        }
        let ring = ClientRing {
            ring: RefCell::new(ring),
            event_fd,
            bufs: RefCell::new(bufs),
            slots: RefCell::new(Vec::new()),
            free_slots: RefCell::new(Vec::new()),
            next_generation: Cell::new(1),
            driver: Cell::new(None),
            completions: RefCell::new(Vec::with_capacity(256)),
            quiet_eventfd: defer_taskrun && cfg!(target_arch = "x86_64"),
        };
        ring.probe_multishot_recv()?;
        Ok(Rc::new(ring))
    }

    /// Receives one byte through a multishot recv on a socket pair: a
    /// kernel before 6.0 takes the ring and the buffers but fails the
    /// receive itself, which would end every connection at its first byte.
    fn probe_multishot_recv(&self) -> io::Result<()> {
        let mut fds = [0; 2];
        // SAFETY: socketpair writes two descriptors into `fds`.
        if unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        } < 0
        {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both are new descriptors owned by nothing else.
        let (ours, theirs) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: writes one byte from a live buffer.
        if unsafe { libc::write(theirs.as_raw_fd(), b"p".as_ptr() as *const libc::c_void, 1) } != 1
        {
            return Err(io::Error::last_os_error());
        }
        const PROBE: u64 = u64::MAX;
        let entry = opcode::RecvMulti::new(types::Fd(ours.as_raw_fd()), BUF_GROUP)
            .build()
            .user_data(PROBE);
        let cancel = opcode::AsyncCancel::new(PROBE).build().user_data(PROBE - 1);
        let mut ring = self.ring.borrow_mut();
        // SAFETY: the entry names the provided buffers, which the ring owns.
        unsafe { ring.submission().push(&entry) }
            .map_err(|_| io::Error::other("probe: submission queue full"))?;
        ring.submit_and_wait(1)?;
        let mut received = None;
        let mut bid = None;
        for c in ring.completion() {
            if c.user_data() == PROBE {
                received = Some(c.result());
                bid = cqueue::buffer_select(c.flags());
            }
        }
        // End the multishot receive before the probe's socket closes.
        // SAFETY: a cancel names no memory.
        unsafe { ring.submission().push(&cancel) }
            .map_err(|_| io::Error::other("probe: submission queue full"))?;
        ring.submit_and_wait(1)?;
        ring.completion().for_each(drop);
        drop(ring);
        if let Some(bid) = bid {
            let mut bufs = self.bufs.borrow_mut();
            bufs.put_back(bid);
            bufs.publish();
        }
        match received {
            Some(1) => Ok(()),
            Some(r) if r < 0 => Err(io::Error::other(format!(
                "multishot recv unsupported: {}",
                io::Error::from_raw_os_error(-r)
            ))),
            other => Err(io::Error::other(format!(
                "multishot recv probe got {other:?}"
            ))),
        }
    }

    /// Takes `fd` (a connected stream socket) onto the ring and starts
    /// receiving from it.
    pub fn adopt(self: &Rc<Self>, fd: OwnedFd) -> RingSocket {
        let io = Rc::new(ConnIo {
            inbox: RefCell::new(Vec::new()),
            inbox_taken: Cell::new(0),
            spare: RefCell::new(Vec::new()),
            ended: Cell::new(None),
            reader: Cell::new(None),
            waiting_since: Cell::new(Instant::now()),
            read_timeout: Cell::new(None),
            timed_out: Cell::new(false),
            paused: Cell::new(false),
            send: RefCell::new(SendState::default()),
        });
        let generation = self.next_generation.get();
        self.next_generation
            .set(generation.wrapping_add(1) & 0xff_ffff);
        let slot = Slot {
            generation,
            fd: fd.into_raw_fd(),
            io: io.clone(),
            recv_armed: false,
            send_in_flight: false,
            retired: false,
        };
        let index = match self.free_slots.borrow_mut().pop() {
            Some(i) => {
                self.slots.borrow_mut()[i as usize] = Some(slot);
                i
            }
            None => {
                let mut slots = self.slots.borrow_mut();
                slots.push(Some(slot));
                (slots.len() - 1) as u32
            }
        };
        self.arm_recv(index);
        RingSocket {
            ring: self.clone(),
            slot: index,
            io,
        }
    }

    fn push(&self, entry: squeue::Entry) {
        let mut ring = self.ring.borrow_mut();
        let mut busy_tries = 0;
        loop {
            // SAFETY: every entry pushed names memory that outlives its
            // operation: the provided buffers (the ring's own), a send's
            // buffer (held by the slot's ConnIo until its completion).
            if unsafe { ring.submission().push(&entry) }.is_ok() {
                break;
            }
            // Full: hand what is queued to the kernel now. The kernel takes
            // entries even when completions back up (they overflow into
            // its list with IORING_FEAT_NODROP); an error here is a broken
            // ring, which ends the process rather than spin.
            if let Err(e) = ring.submit() {
                busy_tries += 1;
                let transient = matches!(e.raw_os_error(), Some(libc::EINTR | libc::EBUSY));
                if !transient || busy_tries > 1000 {
                    panic!("client ring: submit failed with a full queue: {e}");
                }
            }
        }
        drop(ring);
        if let Some(w) = self.driver.take() {
            w.wake();
        }
    }

    fn arm_recv(&self, index: u32) {
        let entry = {
            let mut slots = self.slots.borrow_mut();
            let Some(slot) = slots[index as usize].as_mut() else {
                return;
            };
            if slot.recv_armed || slot.retired || slot.io.ended.get().is_some() {
                return;
            }
            slot.recv_armed = true;
            opcode::RecvMulti::new(types::Fd(slot.fd), BUF_GROUP)
                .build()
                .user_data(user_data(index, slot.generation, KIND_RECV))
        };
        self.push(entry);
    }

    fn send_in_flight(&self, index: u32) -> bool {
        self.slots.borrow()[index as usize]
            .as_ref()
            .map(|s| s.send_in_flight)
            .unwrap_or(false)
    }

    fn cancel_recv(&self, index: u32) {
        let entry = {
            let slots = self.slots.borrow();
            let Some(slot) = slots[index as usize].as_ref() else {
                return;
            };
            if !slot.recv_armed {
                return;
            }
            opcode::AsyncCancel::new(user_data(index, slot.generation, KIND_RECV))
                .build()
                .user_data(user_data(index, slot.generation, KIND_CANCEL))
        };
        self.push(entry);
    }

    fn submit_send(&self, index: u32) {
        let entry = {
            let mut slots = self.slots.borrow_mut();
            let Some(slot) = slots[index as usize].as_mut() else {
                return;
            };
            let send = slot.io.send.borrow();
            let rest = &send.buf[send.sent..];
            slot.send_in_flight = true;
            opcode::Send::new(types::Fd(slot.fd), rest.as_ptr(), rest.len() as u32)
                .flags(libc::MSG_NOSIGNAL)
                .build()
                .user_data(user_data(index, slot.generation, KIND_SEND))
        };
        self.push(entry);
    }

    /// The socket of slot `index` was dropped: stop receiving, and close
    /// the descriptor once nothing of it is in flight.
    fn retire(&self, index: u32) {
        self.cancel_recv(index);
        if let Some(slot) = self.slots.borrow_mut()[index as usize].as_mut() {
            slot.retired = true;
        }
        self.close_if_idle(index);
    }

    fn close_if_idle(&self, index: u32) {
        let entry = {
            let mut slots = self.slots.borrow_mut();
            match slots[index as usize].as_ref() {
                Some(s) if s.retired && !s.recv_armed && !s.send_in_flight => {}
                _ => return,
            }
            let slot = slots[index as usize].take().expect("checked above");
            self.free_slots.borrow_mut().push(index);
            opcode::Close::new(types::Fd(slot.fd))
                .build()
                .user_data(user_data(index, slot.generation, KIND_CLOSE))
        };
        self.push(entry);
    }

    /// One turn: submits what was pushed, collects completions and
    /// dispatches them. Returns whether anything happened.
    fn turn(&self, now: Instant) -> bool {
        let submitted = {
            let mut ring = self.ring.borrow_mut();
            let mut sq = ring.submission();
            sq.sync();
            let queued = sq.len();
            let must_enter = queued > 0 || sq.taskrun() || sq.cq_overflow();
            drop(sq);
            if must_enter {
                // SAFETY: no argument is passed; GETEVENTS runs the
                // deferred work that produces completions.
                let r = unsafe {
                    ring.submitter().enter::<libc::sigset_t>(
                        queued as u32,
                        0,
                        IORING_ENTER_GETEVENTS,
                        None,
                    )
                };
                if let Err(e) = r {
                    if e.raw_os_error() != Some(libc::EINTR)
                        && e.raw_os_error() != Some(libc::EBUSY)
                    {
                        tracing::error!("client ring: enter failed: {e}");
                    }
                }
            }
            queued > 0
        };
        let mut completions = self.completions.borrow_mut();
        {
            let mut ring = self.ring.borrow_mut();
            completions.extend(
                ring.completion()
                    .map(|c| (c.user_data(), c.result(), c.flags())),
            );
        }
        let any = !completions.is_empty();
        let mut buffers_back = false;
        for &(data, result, flags) in completions.iter() {
            buffers_back |= self.complete(data, result, flags, now);
        }
        completions.clear();
        if buffers_back {
            self.bufs.borrow().publish();
        }
        // A kernel may run only part of the deferred work per enter and
        // leave the flag set (without signalling the eventfd again): look
        // again before sleeping.
        let pending = self.ring.borrow_mut().submission().taskrun();
        submitted || any || pending
    }

    /// Dispatches one completion; returns whether a buffer went back.
    fn complete(&self, data: u64, result: i32, flags: u32, now: Instant) -> bool {
        let (index, generation, kind) = split_user_data(data);
        let buffer = cqueue::buffer_select(flags);
        let mut buffer_back = false;
        let current = {
            let slots = self.slots.borrow();
            slots
                .get(index as usize)
                .and_then(|s| s.as_ref())
                .filter(|s| s.generation == generation)
                .map(|s| s.io.clone())
        };
        match kind {
            KIND_RECV => {
                let more = cqueue::more(flags);
                if let (Some(io), Some(bid)) = (&current, buffer) {
                    if result > 0 {
                        let bufs = self.bufs.borrow();
                        let mut inbox = io.inbox.borrow_mut();
                        let taken = io.inbox_taken.get();
                        if taken > 0 && (taken == inbox.len() || taken >= inbox.len() / 2) {
                            // Bytes the reader took go before the vector
                            // grows: what is left is at most as much as
                            // what is dropped, so moving it stays cheap.
                            inbox.drain(..taken);
                            io.inbox_taken.set(0);
                        }
                        inbox.extend_from_slice(bufs.bytes(bid, result as usize));
                        io.waiting_since.set(now);
                    }
                }
                if let Some(bid) = buffer {
                    self.bufs.borrow_mut().put_back(bid);
                    buffer_back = true;
                }
                let Some(io) = current else {
                    return buffer_back;
                };
                if result == 0 {
                    io.ended.set(Some(Ended::Eof));
                } else if result < 0
                    && result != -libc::ENOBUFS
                    && result != -libc::ECANCELED
                    && io.ended.get().is_none()
                {
                    io.ended.set(Some(Ended::Error(-result)));
                }
                if !more {
                    if let Some(s) = self.slots.borrow_mut()[index as usize].as_mut() {
                        s.recv_armed = false;
                    }
                    if io.inbox_len() >= INBOX_PAUSE_BYTES {
                        io.paused.set(true);
                    } else if !io.paused.get() {
                        // ENOBUFS, or the kernel ended it: receive on.
                        self.arm_recv(index);
                    }
                    self.close_if_idle(index);
                } else if io.inbox_len() >= INBOX_PAUSE_BYTES && !io.paused.get() {
                    io.paused.set(true);
                    self.cancel_recv(index);
                }
                io.wake_reader();
            }
            KIND_SEND => {
                let Some(io) = current else {
                    return false;
                };
                if let Some(s) = self.slots.borrow_mut()[index as usize].as_mut() {
                    s.send_in_flight = false;
                }
                let again = {
                    let mut send = io.send.borrow_mut();
                    if result < 0 {
                        send.done = Some(Err(io::Error::from_raw_os_error(-result)));
                        false
                    } else if result == 0 && send.sent < send.buf.len() {
                        send.done = Some(Err(io::ErrorKind::WriteZero.into()));
                        false
                    } else {
                        send.sent += result as usize;
                        if send.sent < send.buf.len() {
                            true
                        } else {
                            send.done = Some(Ok(()));
                            false
                        }
                    }
                };
                let retired = self.slots.borrow()[index as usize]
                    .as_ref()
                    .map(|s| s.retired)
                    .unwrap_or(true);
                if again && !retired {
                    self.submit_send(index);
                } else {
                    if again {
                        io.send.borrow_mut().done = Some(Err(io::ErrorKind::BrokenPipe.into()));
                    }
                    let writer = io.send.borrow_mut().writer.take();
                    if let Some(w) = writer {
                        w.wake();
                    }
                    self.close_if_idle(index);
                }
            }
            _ => {}
        }
        buffer_back
    }

    /// Wakes readers that have waited past their timeout, and frees the
    /// inbox capacity of connections idle for `INBOX_KEEP_IDLE`.
    fn sweep(&self, now: Instant) {
        for s in self.slots.borrow().iter().flatten() {
            let io = &s.io;
            if io.inbox_len() == 0 && now.duration_since(io.waiting_since.get()) >= INBOX_KEEP_IDLE
            {
                if let Ok(mut inbox) = io.inbox.try_borrow_mut() {
                    if inbox.capacity() > BUF_BYTES {
                        inbox.clear();
                        inbox.shrink_to(BUF_BYTES);
                        io.inbox_taken.set(0);
                    }
                }
                if let Ok(mut spare) = io.spare.try_borrow_mut() {
                    *spare = Vec::new();
                }
            }
            let Some(timeout) = io.read_timeout.get() else {
                continue;
            };
            let waiting = io.reader.take();
            match waiting {
                Some(w) if now.duration_since(io.waiting_since.get()) >= timeout => {
                    io.timed_out.set(true);
                    w.wake();
                }
                w => io.reader.set(w),
            }
        }
    }

    /// Reads and resets the eventfd's count (0 when it was not signalled;
    /// the eventfd is nonblocking).
    fn take_eventfd(&self) -> u64 {
        let mut count = 0u64;
        // SAFETY: reads 8 bytes into `count`.
        let n = unsafe {
            libc::read(
                self.event_fd.as_raw_fd(),
                &mut count as *mut u64 as *mut libc::c_void,
                8,
            )
        };
        if n == 8 {
            count
        } else {
            0
        }
    }

    /// Stops the kernel signalling the eventfd while the driver is awake
    /// (where `quiet_eventfd` allows).
    fn eventfd_off(&self) {
        if self.quiet_eventfd {
            self.ring.borrow_mut().completion().disable_eventfd();
        }
    }

    /// Lets the kernel signal the eventfd again, just before the driver
    /// sleeps on it. Returns whether work came in while it was off: the
    /// driver must then turn again rather than sleep, since that work
    /// signalled nothing.
    ///
    /// While the driver is awake the eventfd is off: completions posted
    /// during its own `io_uring_enter` (a reply's SEND completes inside the
    /// call that submits it) would otherwise signal it, fire the readiness
    /// wait it sleeps on, and cost a wake-up, a `read` and a re-armed poll
    /// per reply. Work that arrives while it is off (a client's bytes) sets
    /// `IORING_SQ_TASKRUN`, which the check below reads after the flag is
    /// cleared (with a full fence); the kernel sets TASKRUN before it reads
    /// the eventfd flag, so one side or the other sees the work, where
    /// `quiet_eventfd` says that order holds.
    fn eventfd_on_unless_pending(&self) -> bool {
        if !self.quiet_eventfd {
            return false;
        }
        let mut ring = self.ring.borrow_mut();
        ring.completion().enable_eventfd();
        std::sync::atomic::fence(Ordering::SeqCst);
        let pending = {
            let sq = ring.submission();
            !sq.is_empty() || sq.taskrun() || sq.cq_overflow()
        } || !ring.completion().is_empty();
        if pending {
            ring.completion().disable_eventfd();
        }
        pending
    }

    /// Looks for reads past their timeout every `SWEEP_EVERY`, for the
    /// shard's life. A task of its own with one sleep per sweep: the driver
    /// used to arm a glommio timer for the next sweep at each of its sleeps
    /// (an insert into and a removal from the reactor's timer map per idle
    /// request).
    pub async fn sweep_every(self: Rc<Self>) {
        loop {
            glommio::timer::sleep(SWEEP_EVERY).await;
            self.sweep(Instant::now());
        }
    }

    /// Runs the ring for the shard's life: turns while there is work,
    /// sleeps on the eventfd (in glommio's ring) when there is none.
    pub async fn drive(self: Rc<Self>) {
        let efd = self.event_fd.as_raw_fd();
        let mut readable: Option<Pin<Box<dyn Future<Output = io::Result<()>>>>> = None;
        let mut event_pending = false;
        // Off while awake: see `eventfd_on_unless_pending`.
        self.eventfd_off();
        loop {
            let busy = self.turn(Instant::now());
            if busy {
                futures_lite::future::yield_now().await;
                continue;
            }
            if event_pending {
                // Reset the eventfd before looking once more, so that a
                // completion after this read signals it again.
                self.take_eventfd();
                event_pending = false;
                continue;
            }
            if self.eventfd_on_unless_pending() {
                continue;
            }
            let fut = readable.get_or_insert_with(|| Box::pin(glommio::net::poll_readable(efd)));
            poll_fn(|cx| {
                if fut.as_mut().poll(cx).is_ready() {
                    event_pending = true;
                    return Poll::Ready(());
                }
                self.driver.set(Some(cx.waker().clone()));
                let sq_len = self.ring.borrow_mut().submission().len();
                if sq_len > 0 {
                    self.driver.take();
                    return Poll::Ready(());
                }
                Poll::Pending
            })
            .await;
            self.driver.take();
            self.eventfd_off();
            if event_pending {
                readable = None;
            }
        }
    }
}

impl Drop for ClientRing {
    fn drop(&mut self) {
        // Descriptors still open (the shard is stopping): close them here.
        for s in self.slots.get_mut().iter().flatten() {
            // SAFETY: the slot owns its descriptor.
            unsafe { libc::close(s.fd) };
        }
    }
}

/// A client socket on a shard's ring.
pub struct RingSocket {
    ring: Rc<ClientRing>,
    slot: u32,
    io: Rc<ConnIo>,
}

impl RingSocket {
    pub fn fd(&self) -> RawFd {
        self.ring.slots.borrow()[self.slot as usize]
            .as_ref()
            .map(|s| s.fd)
            .unwrap_or(-1)
    }

    pub fn set_read_timeout(&self, timeout: Duration) {
        self.io.read_timeout.set(Some(timeout));
    }

    pub fn clear_read_timeout(&self) {
        self.io.read_timeout.set(None);
    }

    /// Waits for received bytes: how many the inbox holds, 0 at the end of
    /// the stream.
    fn poll_inbox(&self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let io = &self.io;
        let available = io.inbox_len();
        if available > 0 {
            // Bytes came after the sweep found this read late: it was not
            // silent after all, and the next wait starts afresh.
            io.timed_out.set(false);
            return Poll::Ready(Ok(available));
        }
        match io.ended.get() {
            Some(Ended::Eof) => return Poll::Ready(Ok(0)),
            Some(Ended::Error(e)) => return Poll::Ready(Err(io::Error::from_raw_os_error(e))),
            None => {}
        }
        if io.paused.get() {
            io.paused.set(false);
            self.ring.arm_recv(self.slot);
        }
        if io.timed_out.replace(false) {
            return Poll::Ready(Err(io::ErrorKind::TimedOut.into()));
        }
        if io.reader.replace(Some(cx.waker().clone())).is_none() {
            io.waiting_since.set(Instant::now());
        }
        Poll::Pending
    }

    /// After the reader took bytes: a paused receive resumes below half
    /// the pause bound.
    fn resume_if_drained(&self) {
        let io = &self.io;
        if io.paused.get() && io.inbox_len() < INBOX_PAUSE_BYTES / 2 {
            io.paused.set(false);
            self.ring.arm_recv(self.slot);
        }
    }

    pub fn poll_read(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        let available = match self.poll_inbox(cx) {
            Poll::Ready(Ok(0)) => return Poll::Ready(Ok(0)),
            Poll::Ready(Ok(available)) => available,
            other => return other,
        };
        let io = &self.io;
        let n = available.min(buf.len());
        let taken = io.inbox_taken.get();
        {
            let mut inbox = io.inbox.borrow_mut();
            buf[..n].copy_from_slice(&inbox[taken..taken + n]);
            if taken + n == inbox.len() {
                // Emptied: the capacity stays for the next bursts (a
                // busy pipelining connection would otherwise grow it
                // again from nothing every time); `sweep` frees it once
                // the connection is idle.
                inbox.clear();
                io.inbox_taken.set(0);
            } else {
                io.inbox_taken.set(taken + n);
            }
        }
        self.resume_if_drained();
        Poll::Ready(Ok(n))
    }

    /// Takes every received byte at once, without copying: `buf` (the
    /// reader's emptied buffer; its contents are dropped) becomes the
    /// inbox's next vector and the inbox becomes `buf`. Returns the bytes
    /// now in `buf`, 0 at the end of the stream. While it waits, `buf`'s
    /// capacity is parked beside the inbox, where `sweep` frees it once the
    /// connection is idle.
    pub fn poll_swap(&self, cx: &mut Context<'_>, buf: &mut Vec<u8>) -> Poll<io::Result<usize>> {
        let io = &self.io;
        match self.poll_inbox(cx) {
            Poll::Ready(Ok(0)) => return Poll::Ready(Ok(0)),
            Poll::Ready(Ok(_)) => {}
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => {
                // The reader holds nothing while it waits: its buffer is
                // parked for the inbox (where the idle sweep frees it) or,
                // too large to keep, freed now.
                let emptied = std::mem::take(buf);
                let mut spare = io.spare.borrow_mut();
                if emptied.capacity() > spare.capacity() && emptied.capacity() <= RECYCLE_BYTES_MAX
                {
                    *spare = emptied;
                }
                return Poll::Pending;
            }
        }
        {
            let mut inbox = io.inbox.borrow_mut();
            let taken = io.inbox_taken.replace(0);
            if taken > 0 {
                inbox.drain(..taken);
            }
            let mut next = std::mem::take(&mut *io.spare.borrow_mut());
            if buf.capacity() > next.capacity() {
                next = std::mem::take(buf);
            }
            if next.capacity() > RECYCLE_BYTES_MAX {
                next = Vec::new();
            }
            next.clear();
            *buf = std::mem::replace(&mut *inbox, next);
        }
        self.resume_if_drained();
        Poll::Ready(Ok(buf.len()))
    }

    /// Sends all of `buf` and gives it back (the ring holds it meanwhile).
    pub async fn write_owned(&self, buf: Vec<u8>) -> (Vec<u8>, io::Result<()>) {
        if buf.is_empty() {
            return (buf, Ok(()));
        }
        if let Some(Ended::Error(e)) = self.io.ended.get() {
            return (buf, Err(io::Error::from_raw_os_error(e)));
        }
        // A send whose future was dropped may still be in flight: the
        // kernel reads its buffer until the completion, so it is neither
        // replaced nor freed before then.
        poll_fn(|cx| {
            let mut send = self.io.send.borrow_mut();
            if self.ring.send_in_flight(self.slot) {
                send.writer = Some(cx.waker().clone());
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        })
        .await;
        {
            let mut send = self.io.send.borrow_mut();
            send.buf = buf;
            send.sent = 0;
            send.done = None;
        }
        self.ring.submit_send(self.slot);
        let result = poll_fn(|cx| {
            let mut send = self.io.send.borrow_mut();
            match send.done.take() {
                Some(r) => Poll::Ready(r),
                None => {
                    send.writer = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
        .await;
        let buf = std::mem::take(&mut self.io.send.borrow_mut().buf);
        (buf, result)
    }

    /// Ends both directions: the pending read sees end of file, a send
    /// fails.
    pub fn shutdown(&self) {
        let fd = self.fd();
        if fd >= 0 {
            // SAFETY: shutdown takes no memory; the descriptor stays open
            // until the slot is closed.
            unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
        }
    }
}

impl Drop for RingSocket {
    fn drop(&mut self) {
        self.ring.retire(self.slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The driver keeps one `poll_readable` future across its sleeps and
    /// polls it at every wake-up (every sweep, every push). Each poll must
    /// not leave another waker behind: glommio counts a task's wakers in an
    /// i16 and panics past 32,767, which an idle shard reached after about
    /// seven minutes while the patch used a list of wakers.
    #[test]
    fn a_readiness_wait_polled_many_times_keeps_one_waker() {
        glommio::LocalExecutor::default().run(async {
            // SAFETY: eventfd returns a new descriptor or -1.
            let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
            assert!(fd >= 0);
            // SAFETY: just created, owned here.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            let mut wait = Box::pin(glommio::net::poll_readable(fd.as_raw_fd()));
            for _ in 0..40_000 {
                assert!(futures_lite::future::poll_once(wait.as_mut())
                    .await
                    .is_none());
            }
            let one = 1u64;
            // SAFETY: writes 8 bytes from `one`.
            let wrote = unsafe {
                libc::write(fd.as_raw_fd(), &one as *const u64 as *const libc::c_void, 8)
            };
            assert_eq!(wrote, 8);
            wait.await.expect("readable once written");
        });
    }

    /// While the driver is awake the eventfd stays quiet: a SEND that
    /// completes inside the driver's own `io_uring_enter` signals nothing
    /// (it used to, which fired the driver's readiness wait for nothing
    /// after every reply). Bytes that arrive meanwhile signal nothing
    /// either, so the check before sleeping must see them; once the eventfd
    /// is on, arrivals signal it again.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_eventfd_is_quiet_while_the_driver_is_awake_and_what_came_meanwhile_is_seen() {
        glommio::LocalExecutor::default().run(async {
            let ring = ClientRing::new().expect("a client ring on this kernel");
            assert!(
                ring.quiet_eventfd,
                "this kernel has DEFER_TASKRUN (6.1 and later): the eventfd is kept quiet"
            );
            let mut fds = [0; 2];
            // SAFETY: socketpair writes two descriptors into `fds`.
            let rc = unsafe {
                libc::socketpair(
                    libc::AF_UNIX,
                    libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
                    0,
                    fds.as_mut_ptr(),
                )
            };
            assert_eq!(rc, 0);
            // SAFETY: both are new descriptors owned by nothing else.
            let (ours, theirs) =
                unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
            let sock = ring.adopt(ours);
            ring.eventfd_off();
            ring.turn(Instant::now());
            ring.take_eventfd();

            let mut send = Box::pin(sock.write_owned(b"reply".to_vec()));
            assert!(futures_lite::future::poll_once(send.as_mut())
                .await
                .is_none());
            ring.turn(Instant::now());
            let (_, sent) = send.await;
            sent.expect("the reply is sent");
            assert_eq!(ring.take_eventfd(), 0, "a reply's completion signalled");
            let mut got = [0u8; 16];
            // SAFETY: reads into a live buffer.
            let n = unsafe {
                libc::read(
                    theirs.as_raw_fd(),
                    got.as_mut_ptr() as *mut libc::c_void,
                    got.len(),
                )
            };
            assert_eq!(&got[..n as usize], b"reply");

            let write = |bytes: &[u8]| {
                // SAFETY: writes from a live buffer.
                let n = unsafe {
                    libc::write(
                        theirs.as_raw_fd(),
                        bytes.as_ptr() as *const libc::c_void,
                        bytes.len(),
                    )
                };
                assert_eq!(n, bytes.len() as isize);
            };
            write(b"request");
            assert_eq!(ring.take_eventfd(), 0, "signalled while off");
            assert!(
                ring.eventfd_on_unless_pending(),
                "bytes that came while the eventfd was off must keep the driver awake"
            );
            assert!(ring.ring.borrow_mut().completion().eventfd_disabled());
            ring.turn(Instant::now());
            assert_eq!(&sock.io.inbox.borrow()[..], b"request");

            assert!(!ring.eventfd_on_unless_pending(), "nothing is pending");
            write(b"more");
            assert!(
                ring.take_eventfd() > 0,
                "an arrival while it sleeps signals"
            );
        });
    }

    /// A ring comes up on this kernel (the CI machine's): the probe's
    /// multishot recv works, so servers here run their clients on it.
    #[test]
    fn a_ring_comes_up_and_probes_multishot_recv() {
        glommio::LocalExecutor::default().run(async {
            ClientRing::new().expect("a client ring on this kernel");
        });
    }
}
