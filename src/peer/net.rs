//! The peer ports on sockets (glommio, the consensus core's executor): the
//! election port's connections (QuorumCnxManager's handshake and rule that
//! only a connection dialled by the higher sid survives) and the quorum
//! port's learner connections (a follower dials its leader; the leader
//! takes FOLLOWERINFO as the connection's first packet). What arrives goes
//! to the runner as [`PeerEvent`]s through one bounded channel. What the
//! runner sends in a turn is corked ([`PeerNet::cork`]) and goes out from
//! its own task with nonblocking sends (several peers' in one
//! `io_uring_enter`, [`super::send_batch`]) while a connection's writer
//! holds nothing; what a socket does not take then is queued per
//! connection and written by that connection's task, so a slow or stalled
//! peer never blocks the core:
//!
//! - election: at most `VOTES_QUEUED_MAX` frames per peer; beyond that a
//!   vote is dropped (the election sends again on its timeouts), and the
//!   last vote to each peer is sent again on every new connection, as
//!   ZooKeeper's SendWorker does;
//! - quorum: at most `QUORUM_QUEUED_BYTES_MAX` bytes per peer; beyond that
//!   the connection closes (the peer must resync). A SNAP's body is not
//!   queued whole: a thread of its own encodes it from an O(1) clone of
//!   the tree into chunks, at most `SNAP_CHUNKS_QUEUED` of
//!   `SNAP_CHUNK_BYTES` ahead of the socket, and the connection's writer
//!   sends them in their place in the queue; so a tree of any size syncs
//!   with bounded memory and the core never serializes it.
//!
//! A frame over its bound, garbage, an unknown sid, an unknown packet type
//! or one this server does not take closes that connection only, logged.
//!
//! Each quorum connection has a generation, and every event read on it
//! carries it through the channel. Once the runner closes a connection
//! (`close_quorum`, `close_quorum_all`), a new one with the same sid
//! replaces it, or the net closes it itself (a peer not reading), nothing
//! read on it reaches the runner any more: not what is still in the channel,
//! not what its reader was waiting to put there, not bytes still buffered
//! (the reader stops decoding). [`PeerEvents::recv`] drops such events as
//! it takes them, so every event of an old connection the runner gets
//! precedes, in the one channel, every event of its successor: an old
//! session's SNAP can never land after a new session's. A connection that
//! ends on its own (end of stream, an error, a protocol violation) still
//! delivers what it read before its `Disconnected`.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::os::unix::io::{IntoRawFd, RawFd};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};
use glommio::net::{TcpListener, TcpStream};

use super::election_wire::{self, WireNotification};
use super::quorum_packet::PacketType;
use super::quorum_packet::{self, QuorumPacket};
use super::send_batch::{Frame, SendBatch};
use super::{quorum_auth, session_packets, zab_msg, Decoded, PeerError};
use crate::config::security::QuorumSasl;
use crate::fast_map::{FastMap, FastSet};
use crate::sasl::digest_md5::{self, DigestMd5Client, DigestMd5Server, Outcome};
use crate::socket::Socket;
use crate::tls::quorum::QuorumTlsContext;
use crate::zab::ensemble::Msg;
use crate::zab::Sid;

/// Votes queued for one peer before newer ones are dropped.
const VOTES_QUEUED_MAX: usize = 16;
/// Bytes queued for one quorum peer before its connection is closed.
pub const QUORUM_QUEUED_BYTES_MAX: usize = 256 << 20;
/// `jute.maxbuffer` plus its default extra allowance: the bound on any
/// buffer in a quorum packet.
const QUORUM_BUFFER_MAX: usize = 2 * 0xfffff;
/// Writes coalesce queued frames up to this many bytes.
const WRITE_CHUNK_BYTES: usize = 256 << 10;
/// A SNAP body goes out in chunks of about this many bytes ...
const SNAP_CHUNK_BYTES: usize = 1 << 20;
/// ... at most this many of them encoded ahead of the socket.
const SNAP_CHUNKS_QUEUED: usize = 8;
/// How often a writer looks for the next SNAP chunk while the encoder is
/// behind.
const SNAP_CHUNK_POLL: Duration = Duration::from_millis(1);
/// ZooKeeper's `cnxTO`: connecting to a peer's election port.
const ELECTION_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a peer has to send its election header.
const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// Events waiting for the runner before readers wait.
const EVENTS_MAX: usize = 4096;

/// Where each voter listens.
#[derive(Clone, Debug)]
pub struct PeerAddrs {
    pub quorum: SocketAddr,
    pub election: SocketAddr,
}

pub enum PeerEvent {
    Received {
        from: Sid,
        msg: Msg,
    },
    /// The quorum connection with this peer ended.
    Disconnected(Sid),
    /// Leader: a follower forwarded a client request.
    Request {
        from: Sid,
        request: session_packets::Forwarded,
    },
    /// Leader: a follower's clients were active (its PING reply).
    Touches {
        from: Sid,
        sessions: Vec<(i64, i32)>,
    },
    /// Follower: the leader answered the oldest forwarded sync.
    SyncAnswered {
        from: Sid,
    },
    /// A REVALIDATE: at the leader, a follower's client reconnected there;
    /// at a follower, the leader's answer.
    Revalidate {
        from: Sid,
        what: session_packets::Revalidate,
    },
    /// Follower: a SNAP and the tree that followed it, as of `zxid`.
    Snapshot {
        from: Sid,
        zxid: i64,
        tree: Box<crate::tree::Tree>,
        sessions: Vec<crate::snapshot::SessionEntry>,
    },
}

/// What a connection's writer sends, in queue order.
enum Out {
    Frame(Vec<u8>),
    /// The chunks of a SNAP body from its encoder thread.
    Stream(std::sync::mpsc::Receiver<SnapChunk>),
}

enum SnapChunk {
    Bytes(Vec<u8>),
    /// The body is complete (without it, a closed channel means the
    /// encoder failed and the stream is cut: the connection closes).
    Done,
}

/// An event and the generation of the quorum connection it was read on
/// (`None`: a vote, which is good whatever connection brought it).
struct Tagged {
    generation: Option<u64>,
    event: PeerEvent,
}

/// The events the runner takes: a bounded channel from which those of a
/// closed or replaced quorum connection are dropped as they come out.
pub struct PeerEvents {
    rx: LocalReceiver<Tagged>,
    net: PeerNet,
}

/// Which connection an event was read on: the runner, which queues
/// events before it handles them, asks [`PeerNet::current`] again when it
/// takes one (the connection may have closed while it waited).
#[derive(Clone, Copy, Debug)]
pub struct EventTag(Option<u64>);

impl PeerEvents {
    /// The next event still current; `None` once the net is gone.
    pub async fn recv(&self) -> Option<PeerEvent> {
        self.recv_tagged().await.map(|(_, e)| e)
    }

    /// The next event still current, with its connection's tag.
    pub async fn recv_tagged(&self) -> Option<(EventTag, PeerEvent)> {
        loop {
            let Tagged { generation, event } = self.rx.recv().await?;
            if self.net.deliverable(generation, &event) {
                return Some((EventTag(generation), event));
            }
        }
    }

    /// [`PeerEvents::recv_tagged`] of what is queued now, without waiting
    /// (and without registering a waker): `None` when nothing current is.
    pub fn try_recv_tagged(&self) -> Option<(EventTag, PeerEvent)> {
        while let Some(Tagged { generation, event }) = self.rx.try_recv() {
            if self.net.deliverable(generation, &event) {
                return Some((EventTag(generation), event));
            }
        }
        None
    }
}

/// One connection's write side.
struct Conn {
    generation: u64,
    sock: Socket,
    out: Rc<LocalSender<Out>>,
    /// Bytes handed to the writer task and not yet written (a SNAP body
    /// counts one while it streams): while it is not zero, everything goes
    /// through the writer, so frames keep their order.
    queued_bytes: Rc<Cell<usize>>,
    /// Frames sent while the net is corked ([`PeerNet::cork`]), in order.
    cork: Vec<u8>,
}

impl Conn {
    fn close(&self) {
        self.sock.shutdown();
    }

    /// Sends `frame` now, from the caller's task, when the writer has
    /// nothing of this connection's (a nonblocking send of a plain
    /// socket: no task hop, no wait for the executor's next turn); what
    /// the socket does not take, or all of it while the writer is busy,
    /// is queued for the writer.
    fn write_now(&self, frame: Vec<u8>) {
        let sent = if self.queued_bytes.get() == 0 {
            self.sock.try_write_now(&frame)
        } else {
            0
        };
        self.queue_rest(frame, sent);
    }

    /// The descriptor to send on from the caller's task, when this
    /// connection takes such sends now (see [`Conn::write_now`]).
    fn direct_fd(&self) -> Option<RawFd> {
        if self.queued_bytes.get() == 0 {
            self.sock.direct_fd()
        } else {
            None
        }
    }

    /// `frame` after its first `sent` bytes went out: the rest to the writer.
    fn queue_rest(&self, frame: Vec<u8>, sent: usize) {
        if sent == frame.len() {
            return;
        }
        let mut rest = frame;
        rest.drain(..sent);
        self.queued_bytes.set(self.queued_bytes.get() + rest.len());
        let _ = self.out.try_send(Out::Frame(rest));
    }

    /// What the cork holds, sent now (see [`Conn::write_now`]).
    fn uncork(&mut self) {
        if !self.cork.is_empty() {
            let frames = std::mem::take(&mut self.cork);
            self.write_now(frames);
        }
    }
}

/// While alive, the quorum frames the net is given are held per
/// connection and sent together when the last cork drops (or at
/// [`PeerNet::flush_corked`]): one send per peer for what one turn of the
/// runner produced, straight from the runner's task.
pub struct Cork(PeerNet);

impl Drop for Cork {
    fn drop(&mut self) {
        let last = {
            let mut inner = self.0 .0.borrow_mut();
            inner.cork_depth -= 1;
            inner.cork_depth == 0
        };
        if last {
            self.0.flush_corked();
        }
    }
}

/// A quorum connection just registered: its queue and generation.
struct Registered {
    queued: Rc<Cell<usize>>,
    out: Rc<LocalSender<Out>>,
    generation: u64,
}

struct Inner {
    /// sslQuorum: both peer ports' connections use TLS.
    tls: Option<Arc<QuorumTlsContext>>,
    /// quorum.auth.enableSasl: DIGEST-MD5 on both peer ports.
    sasl: Option<Arc<QuorumSasl>>,
    myid: Sid,
    peers: BTreeMap<Sid, PeerAddrs>,
    /// The election address this server announces in its header.
    my_election: String,
    /// `initLimit * tickTime`: connecting to a leader, and its first packet.
    init_timeout: Duration,
    election: FastMap<Sid, Conn>,
    election_dialing: FastSet<Sid>,
    last_vote: FastMap<Sid, Vec<u8>>,
    quorum: FastMap<Sid, Conn>,
    quorum_dialing: FastMap<Sid, Vec<Vec<u8>>>,
    /// Per sid, the only generation whose events still reach the runner:
    /// set when a connection registers, or to a generation of its own
    /// when the net reports a break it made (a peer not reading, a failed
    /// dial); kept when a connection ends on its own (its last events and
    /// its `Disconnected` are good); gone once the runner closes it.
    quorum_live: FastMap<Sid, u64>,
    next_generation: u64,
    events: Rc<LocalSender<Tagged>>,
    /// Corks alive ([`PeerNet::cork`]).
    cork_depth: usize,
    /// Sends to several peers in one system call, made when first needed.
    send_batch: Option<SendBatch>,
    /// The kernel refused that ring, or it failed: one send per peer.
    send_batch_refused: bool,
    /// `flush_corked`'s scratch: the frames sent from the caller's task,
    /// and their connections.
    direct: Vec<Frame>,
    direct_sids: Vec<Sid>,
    /// Connections whose cork holds frames, in the order they got them.
    corked: Vec<Sid>,
}

/// The peer ports of this server. Cheap to clone (shared state).
#[derive(Clone)]
pub struct PeerNet(Rc<RefCell<Inner>>);

/// Binds `addr` without SO_REUSEPORT, so a port another process holds
/// fails with "Address already in use"; tried `retries` more times a second
/// apart (0: until it binds), as ZooKeeper's `electionPortBindRetry`.
pub fn bind(addr: SocketAddr, what: &str, retries: u32) -> Result<std::net::TcpListener, String> {
    let mut failed = 0u32;
    loop {
        match std::net::TcpListener::bind(addr) {
            Ok(l) => return Ok(l),
            Err(e) if retries == 0 || failed < retries => {
                failed += 1;
                tracing::warn!(
                    "cannot bind the {what} port {addr}: {e}: trying again in 1 s ({failed})"
                );
                std::thread::sleep(Duration::from_secs(1));
            }
            Err(e) => return Err(format!("cannot bind the {what} port {addr}: {e}")),
        }
    }
}

impl PeerNet {
    /// Starts accepting on both listeners; returns the net and the events
    /// the runner must take.
    pub fn start(
        myid: Sid,
        peers: BTreeMap<Sid, PeerAddrs>,
        init_timeout: Duration,
        election_listener: std::net::TcpListener,
        quorum_listener: std::net::TcpListener,
        tls: Option<Arc<QuorumTlsContext>>,
        sasl: Option<Arc<QuorumSasl>>,
    ) -> (PeerNet, PeerEvents) {
        let (tx, rx) = local_channel::new_bounded(EVENTS_MAX);
        let my_election = peers
            .get(&myid)
            .map(|p| p.election.to_string())
            .unwrap_or_default();
        let net = PeerNet(Rc::new(RefCell::new(Inner {
            tls,
            sasl,
            myid,
            peers,
            my_election,
            init_timeout,
            election: FastMap::default(),
            election_dialing: FastSet::default(),
            last_vote: FastMap::default(),
            quorum: FastMap::default(),
            quorum_dialing: FastMap::default(),
            quorum_live: FastMap::default(),
            next_generation: 0,
            events: Rc::new(tx),
            cork_depth: 0,
            send_batch: None,
            send_batch_refused: false,
            direct: Vec::new(),
            direct_sids: Vec::new(),
            corked: Vec::new(),
        })));
        let (e, q) = (to_glommio(election_listener), to_glommio(quorum_listener));
        let n = net.clone();
        glommio::spawn_local(async move { n.accept_election(e).await }).detach();
        let n = net.clone();
        glommio::spawn_local(async move { n.accept_quorum(q).await }).detach();
        let events = PeerEvents {
            rx,
            net: net.clone(),
        };
        (net, events)
    }

    fn myid(&self) -> Sid {
        self.0.borrow().myid
    }

    /// Whether `event`, read on the connection `tag` names, is still of
    /// the current connection with its peer.
    pub fn current(&self, tag: EventTag, event: &PeerEvent) -> bool {
        self.deliverable(tag.0, event)
    }

    /// Whether an event tagged `generation` may still reach the runner.
    fn deliverable(&self, generation: Option<u64>, event: &PeerEvent) -> bool {
        let Some(generation) = generation else {
            return true;
        };
        let sid = match event {
            PeerEvent::Received { from, .. }
            | PeerEvent::Request { from, .. }
            | PeerEvent::Touches { from, .. }
            | PeerEvent::SyncAnswered { from }
            | PeerEvent::Revalidate { from, .. }
            | PeerEvent::Snapshot { from, .. } => *from,
            PeerEvent::Disconnected(sid) => *sid,
        };
        let live = self.0.borrow().quorum_live.get(&sid) == Some(&generation);
        if !live {
            tracing::debug!(
                peer = sid,
                generation,
                "dropped an event of a closed quorum connection"
            );
        }
        live
    }

    /// Whether quorum connection `generation` with `sid` is still open and
    /// current: its reader stops as soon as it is not.
    fn quorum_open(&self, sid: Sid, generation: u64) -> bool {
        self.0.borrow().quorum.get(&sid).map(|c| c.generation) == Some(generation)
    }

    /// Reports a break with `sid` the net found or made itself (no reader
    /// will): under a generation of its own, so that it is dropped if the
    /// runner closes `sid` or a new connection registers first, and so
    /// that nothing read on the broken connection follows it.
    fn report_break(inner: &mut Inner, sid: Sid) {
        inner.next_generation += 1;
        let generation = inner.next_generation;
        inner.quorum_live.insert(sid, generation);
        notify(
            &inner.events,
            Some(generation),
            PeerEvent::Disconnected(sid),
        );
    }

    /// Sends `msg` to `to`: a vote on the election port, anything else on
    /// the quorum connection with `to` (dialled first if there is none).
    pub fn send(&self, to: Sid, msg: &Msg) {
        match msg {
            Msg::Vote(n) => {
                let mut frame = Vec::with_capacity(64);
                let wire = WireNotification::from_election(n, &self.config_text());
                election_wire::encode_notification(&wire, &mut frame);
                self.send_vote(to, frame);
            }
            Msg::Proposal(t) => {
                let mut frame = Vec::new();
                quorum_packet::encode_plain(
                    PacketType::Proposal,
                    t.zxid,
                    Some(&t.data),
                    &mut frame,
                );
                self.send_quorum(to, frame, false);
            }
            other => match zab_msg::to_packet(other, self.myid()) {
                Some(p) => {
                    let mut frame = Vec::new();
                    p.encode(&mut frame);
                    // Only a learner dials, and FOLLOWERINFO is its first packet.
                    let dial = matches!(other, Msg::FollowerInfo { .. });
                    self.send_quorum(to, frame, dial);
                }
                None => {
                    tracing::error!(
                        peer = to,
                        "cannot send {} yet: closing the connection",
                        msg_name(other)
                    );
                    self.close_quorum(to);
                }
            },
        }
    }

    /// Sends a client's request to the leader `to` as a REQUEST.
    pub fn send_request(&self, to: Sid, f: &session_packets::Forwarded) {
        let mut frame = Vec::new();
        session_packets::encode_request(f, &mut frame);
        self.send_quorum(to, frame, false);
    }

    /// Sends a packet as it is on the quorum connection with `to` (session
    /// packets: REQUEST, SYNC, a PING reply with touches).
    pub fn send_packet(&self, to: Sid, p: &QuorumPacket) {
        let mut frame = Vec::new();
        p.encode(&mut frame);
        self.send_quorum(to, frame, false);
    }

    /// Holds quorum frames until the returned cork (and every other) drops:
    /// the runner corks a turn, so that what the turn sends goes out in
    /// one send per peer, from its own task, at the points it chooses.
    pub fn cork(&self) -> Cork {
        self.0.borrow_mut().cork_depth += 1;
        Cork(self.clone())
    }

    /// Sends what the corks hold now; a cork stays in place.
    /// Frames for several peers go out in one system call
    /// ([`SendBatch`]); for one, with a plain `send`.
    pub fn flush_corked(&self) {
        let mut guard = self.0.borrow_mut();
        let inner = &mut *guard;
        // Scratch kept across turns: no allocation per flush.
        let mut corked = std::mem::take(&mut inner.corked);
        let mut direct = std::mem::take(&mut inner.direct);
        let mut direct_sids = std::mem::take(&mut inner.direct_sids);
        for sid in &corked {
            let Some(c) = inner.quorum.get_mut(sid) else {
                continue; // closed meanwhile: its frames went with it
            };
            if c.cork.is_empty() {
                continue;
            }
            match c.direct_fd() {
                Some(fd) => {
                    direct_sids.push(*sid);
                    direct.push(Frame {
                        fd,
                        bytes: std::mem::take(&mut c.cork),
                        sent: 0,
                    });
                }
                None => c.uncork(),
            }
        }
        if direct.len() > 1 && inner.send_batch.is_none() && !inner.send_batch_refused {
            match SendBatch::new() {
                Ok(b) => inner.send_batch = Some(b),
                Err(e) => {
                    tracing::info!("no io_uring for batched peer sends ({e}): one send per peer");
                    inner.send_batch_refused = true;
                }
            }
        }
        match inner.send_batch.as_mut() {
            Some(batch) if direct.len() > 1 => {
                if let Err(e) = batch.send(&mut direct) {
                    // Dropped before the frames are: what the kernel did not
                    // take goes to the writers, counted in `sent`.
                    tracing::warn!("batched peer sends failed ({e}): one send per peer");
                    inner.send_batch = None;
                    inner.send_batch_refused = true;
                }
            }
            _ => {
                for (sid, frame) in direct_sids.iter().zip(direct.iter_mut()) {
                    if let Some(c) = inner.quorum.get(sid) {
                        frame.sent = c.sock.try_write_now(&frame.bytes);
                    }
                }
            }
        }
        for (sid, frame) in direct_sids.drain(..).zip(direct.drain(..)) {
            if let Some(c) = inner.quorum.get(&sid) {
                c.queue_rest(frame.bytes, frame.sent);
            }
        }
        corked.clear();
        if inner.corked.is_empty() {
            inner.corked = corked;
        }
        inner.direct = direct;
        inner.direct_sids = direct_sids;
    }

    /// SNAP: the packet, then the tree and sessions as ZooKeeper streams
    /// them (ZAB-PROTOCOL-NOTES §3.2), in the learner's queue in order.
    pub fn send_snapshot(
        &self,
        to: Sid,
        zxid: i64,
        tree: crate::tree::Tree,
        sessions: Vec<crate::snapshot::SessionEntry>,
    ) {
        let mut frame = Vec::new();
        QuorumPacket::new(PacketType::Snap, zxid, None).encode(&mut frame);
        self.send_quorum(to, frame, false);
        let mut inner = self.0.borrow_mut();
        let Some(c) = inner.quorum.get_mut(&to) else {
            return; // closed meanwhile: the learner reconnects and syncs again
        };
        // The SNAP packet, and anything before it, goes first.
        c.uncork();
        let (tx, rx) = std::sync::mpsc::sync_channel(SNAP_CHUNKS_QUEUED);
        let spawned = std::thread::Builder::new()
            .name("snap-encode".into())
            .spawn(move || {
                let sent = super::snap_stream::encode_chunked(
                    &tree,
                    &sessions,
                    SNAP_CHUNK_BYTES,
                    |chunk| tx.send(SnapChunk::Bytes(chunk)).is_ok(),
                );
                if sent {
                    let _ = tx.send(SnapChunk::Done);
                }
            });
        match spawned {
            Ok(_) => {
                // The body counts one queued byte while it streams: nothing
                // is sent past the writer meanwhile.
                c.queued_bytes.set(c.queued_bytes.get() + 1);
                let _ = c.out.try_send(Out::Stream(rx));
            }
            Err(e) => {
                tracing::error!(
                    peer = to,
                    "cannot start a SNAP encoder: {e}: closing the connection"
                );
                c.close();
            }
        }
    }

    /// The configuration as ZooKeeper's `QuorumVerifier.toString()` shows
    /// it, carried in notifications (version 0: reconfig is off).
    fn config_text(&self) -> String {
        let inner = self.0.borrow();
        let mut s = String::new();
        for (sid, p) in &inner.peers {
            s.push_str(&format!(
                "server.{sid}={}:{}:{}:participant\n",
                p.quorum.ip(),
                p.quorum.port(),
                p.election.port()
            ));
        }
        s.push_str("version=0");
        s
    }

    /// Closes every quorum connection (this server left its role).
    /// Nothing read on any of them reaches the runner after this.
    pub fn close_quorum_all(&self) {
        let conns: Vec<Conn> = {
            let mut inner = self.0.borrow_mut();
            inner.quorum_live.clear();
            inner.quorum_dialing.clear();
            inner.quorum.drain().map(|(_, c)| c).collect()
        };
        for c in conns {
            c.close();
        }
    }

    /// Closes the quorum connection with `sid`: nothing read on it reaches
    /// the runner after this, nor its `Disconnected`.
    pub fn close_quorum(&self, sid: Sid) {
        let conn = {
            let mut inner = self.0.borrow_mut();
            inner.quorum_live.remove(&sid);
            inner.quorum.remove(&sid)
        };
        if let Some(c) = conn {
            c.close();
        }
    }

    fn send_vote(&self, to: Sid, frame: Vec<u8>) {
        let mut inner = self.0.borrow_mut();
        if !inner.peers.contains_key(&to) || to == inner.myid {
            return;
        }
        inner.last_vote.insert(to, frame.clone());
        if let Some(c) = inner.election.get(&to) {
            // Full: the vote is dropped; the election sends again.
            let _ = c.out.try_send(Out::Frame(frame));
            return;
        }
        if inner.election_dialing.insert(to) {
            drop(inner);
            let n = self.clone();
            glommio::spawn_local(async move { n.dial_election(to).await }).detach();
        }
    }

    /// Queues `frame` on the quorum connection with `to`. With none open,
    /// it waits for one being dialled, or `dial` opens one (a learner
    /// reaching its leader); otherwise it is dropped: a leader never dials
    /// a learner, whose connection ended and who will connect again.
    fn send_quorum(&self, to: Sid, frame: Vec<u8>, dial: bool) {
        let mut inner = self.0.borrow_mut();
        let corking = inner.cork_depth > 0;
        if let Some(c) = inner.quorum.get_mut(&to) {
            let queued = c.queued_bytes.get() + c.cork.len() + frame.len();
            if queued > QUORUM_QUEUED_BYTES_MAX {
                tracing::warn!(
                    peer = to,
                    queued,
                    "peer not reading: over {QUORUM_QUEUED_BYTES_MAX} bytes queued, closing"
                );
                let c = inner.quorum.remove(&to).expect("present");
                Self::report_break(&mut inner, to);
                drop(inner);
                c.close();
                return;
            }
            if !corking {
                c.write_now(frame);
            } else if c.cork.is_empty() {
                c.cork = frame;
                inner.corked.push(to);
            } else {
                c.cork.extend_from_slice(&frame);
            }
            return;
        }
        if let Some(waiting) = inner.quorum_dialing.get_mut(&to) {
            waiting.push(frame);
            return;
        }
        if !dial || !inner.peers.contains_key(&to) {
            tracing::debug!(peer = to, "no quorum connection: a packet dropped");
            return;
        }
        inner.quorum_dialing.insert(to, vec![frame]);
        drop(inner);
        let n = self.clone();
        glommio::spawn_local(async move { n.dial_quorum(to).await }).detach();
    }

    // ---- TLS (sslQuorum) ----------------------------------------------

    /// An accepted peer connection as sslQuorum has it: TLS, its
    /// certificate checked against the address it came from; with
    /// portUnification plaintext too, told apart by its first bytes within
    /// ssl.quorum.handshakeDetectionTimeoutMillis (UnifiedServerSocket:
    /// nothing in time is plaintext). The bytes read to tell are the
    /// stream buffer's start.
    async fn secure_accepted(&self, stream: TcpStream) -> Result<(Socket, StreamBuf), String> {
        let _ = stream.set_nodelay(true);
        let peer = stream.peer_addr().map_err(|e| e.to_string())?;
        let sock = Socket::new(stream);
        let tls = self.0.borrow().tls.clone();
        let Some(tls) = tls else {
            return Ok((sock, StreamBuf::default()));
        };
        let mut prefix = Vec::new();
        if tls.port_unification {
            let sniff = async {
                let mut b = [0u8; 512];
                loop {
                    if let Some(is_tls) = crate::tls::looks_like_tls(&prefix) {
                        return Ok(is_tls);
                    }
                    match sock.read(&mut b).await {
                        Ok(0) => return Err("end of stream".to_string()),
                        Ok(n) => prefix.extend_from_slice(&b[..n]),
                        Err(e) => return Err(e.to_string()),
                    }
                }
            };
            let undecided = async {
                glommio::timer::sleep(tls.detection_timeout).await;
                Ok(false)
            };
            if !futures_lite::future::or(sniff, undecided).await? {
                return Ok((sock, StreamBuf::with_prefix(prefix)));
            }
        }
        let handshake = sock.accept_tls(tls.server(), &prefix);
        let sock = with_handshake_timeout(handshake).await?;
        sock.with_tls(|s| tls.check_peer(s.peer_leaf(), peer.ip()))
            .expect("a TLS socket")?;
        Ok((sock, StreamBuf::default()))
    }

    /// A dialed peer connection as sslQuorum has it: TLS with this
    /// member's certificate, the peer's checked against `addr`.
    async fn secure_dialed(&self, stream: TcpStream, addr: SocketAddr) -> Result<Socket, String> {
        let _ = stream.set_nodelay(true);
        let sock = Socket::new(stream);
        let tls = self.0.borrow().tls.clone();
        let Some(tls) = tls.filter(|t| t.ssl_quorum) else {
            return Ok(sock);
        };
        let name = QuorumTlsContext::server_name(addr.ip());
        with_handshake_timeout(sock.connect_tls(tls.client(), name)).await
    }

    // ---- SASL (quorum.auth.enableSasl) ----------------------------------

    /// The dialing side's DIGEST-MD5 exchange (SaslQuorumAuthLearner),
    /// when quorum.auth.learnerRequireSasl asks for it: an empty token,
    /// the server's challenge answered, its SUCCESS and rspauth checked.
    async fn sasl_learner(&self, sock: &Socket) -> Result<(), String> {
        let sasl = self.0.borrow().sasl.clone();
        let Some(sasl) = sasl.filter(|s| s.learner_require) else {
            return Ok(());
        };
        let (user, password) = &sasl.learner_login;
        let mut client =
            DigestMd5Client::new(user, password.expose(), digest_md5::QUORUM_DIGEST_URI);
        let mut buf = StreamBuf::default();
        let mut out = Vec::new();
        quorum_auth::encode(quorum_auth::IN_PROGRESS, Some(&[]), &mut out);
        sock.write_all(&out).await.map_err(|e| e.to_string())?;
        for _ in 0..SASL_ROUNDS_MAX {
            let p = buf.next(sock, quorum_auth::decode).await?;
            match p.status {
                quorum_auth::IN_PROGRESS => {
                    let response = client.respond(p.token.as_deref().unwrap_or_default())?;
                    out.clear();
                    quorum_auth::encode(quorum_auth::IN_PROGRESS, Some(&response), &mut out);
                    sock.write_all(&out).await.map_err(|e| e.to_string())?;
                }
                quorum_auth::SUCCESS => {
                    client.verify(p.token.as_deref().unwrap_or_default())?;
                    return Ok(());
                }
                status => return Err(format!("quorum SASL refused by the peer (status {status})")),
            }
        }
        Err("quorum SASL: too many rounds".into())
    }

    /// The accepting side's exchange (SaslQuorumAuthServer): a peer that
    /// does not start one is let through unless quorum.auth.serverRequireSasl;
    /// a failed one is answered ERROR, and closes the connection only when
    /// SASL is required (as ZooKeeper keeps the rest, logging it).
    async fn sasl_server(&self, sock: &Socket, buf: &mut StreamBuf) -> Result<(), String> {
        let sasl = self.0.borrow().sasl.clone();
        let Some(sasl) = sasl else {
            return Ok(());
        };
        let is_auth = buf
            .next(sock, |b| {
                Ok(match quorum_auth::next_is_auth(b) {
                    Some(auth) => Decoded::Item(auth, 0),
                    None => Decoded::More,
                })
            })
            .await?;
        if !is_auth {
            return if sasl.server_require {
                Err("the peer does not authenticate and quorum.auth.serverRequireSasl is on".into())
            } else {
                Ok(())
            };
        }
        let mut server =
            DigestMd5Server::new(digest_md5::QUORUM_REALM, digest_md5::QUORUM_DIGEST_URI);
        let users = |u: &str| sasl.server_users.get(u).map(|p| p.expose().to_string());
        let mut out = Vec::new();
        let failure = 'exchange: {
            for _ in 0..SASL_ROUNDS_MAX {
                let p = buf.next(sock, quorum_auth::decode).await?;
                out.clear();
                match server.evaluate(p.token.as_deref().unwrap_or_default(), users) {
                    Ok(Outcome::Continue(challenge)) => {
                        quorum_auth::encode(quorum_auth::IN_PROGRESS, Some(&challenge), &mut out);
                    }
                    Ok(Outcome::Done { user, token }) => {
                        quorum_auth::encode(quorum_auth::SUCCESS, Some(&token), &mut out);
                        sock.write_all(&out).await.map_err(|e| e.to_string())?;
                        tracing::info!(user, "quorum SASL: a peer authenticated");
                        return Ok(());
                    }
                    Ok(Outcome::NoSuchUser(user)) => {
                        break 'exchange format!("no such user: {user}")
                    }
                    Err(e) => break 'exchange e,
                }
                sock.write_all(&out).await.map_err(|e| e.to_string())?;
            }
            "too many rounds".to_string()
        };
        out.clear();
        quorum_auth::encode(quorum_auth::ERROR, Some(&[]), &mut out);
        let _ = sock.write_all(&out).await;
        if sasl.server_require {
            Err(format!("quorum SASL failed: {failure}"))
        } else {
            tracing::warn!(
                "quorum SASL failed ({failure}); keeping the connection: \
                 quorum.auth.serverRequireSasl is off"
            );
            Ok(())
        }
    }

    // ---- election port -------------------------------------------------

    async fn accept_election(self, listener: TcpListener) {
        loop {
            match listener.accept().await {
                Ok(stream) => {
                    let n = self.clone();
                    glommio::spawn_local(async move { n.election_accepted(stream).await }).detach();
                }
                Err(e) => {
                    tracing::warn!("election port: accept failed: {e}");
                    glommio::timer::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }

    async fn election_accepted(self, stream: TcpStream) {
        let (sock, mut buf) = match self.secure_accepted(stream).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("election port: closing a connection: {e}");
                return;
            }
        };
        sock.set_read_timeout(HEADER_TIMEOUT);
        let header = match buf.next(&sock, election_wire::decode_initial).await {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!("election port: closing a connection: {e}");
                sock.shutdown();
                return;
            }
        };
        if let Err(e) = self.sasl_server(&sock, &mut buf).await {
            tracing::warn!(sid = header.sid, "election port: closing a connection: {e}");
            sock.shutdown();
            return;
        }
        let (myid, known) = {
            let inner = self.0.borrow();
            (inner.myid, inner.peers.contains_key(&header.sid))
        };
        if !known || header.sid == myid {
            tracing::warn!(
                sid = header.sid,
                "election port: closing a connection from a server not in the configuration"
            );
            sock.shutdown();
            return;
        }
        if header.sid < myid {
            // Only the higher sid's connection survives: dial back.
            sock.shutdown();
            let dial = self.0.borrow_mut().election_dialing.insert(header.sid);
            if dial {
                self.dial_election(header.sid).await;
            }
            return;
        }
        self.election_connected(header.sid, sock, buf).await;
    }

    async fn dial_election(self, to: Sid) {
        let (addr, myid, header) = {
            let inner = self.0.borrow();
            let Some(p) = inner.peers.get(&to) else {
                return;
            };
            let mut header = Vec::new();
            election_wire::encode_initial(inner.myid, &inner.my_election, &mut header);
            (p.election, inner.myid, header)
        };
        let result = async {
            let stream = TcpStream::connect_timeout(addr, ELECTION_CONNECT_TIMEOUT)
                .await
                .map_err(|e| e.to_string())?;
            let sock = self.secure_dialed(stream, addr).await?;
            sock.write_all(&header).await.map_err(|e| e.to_string())?;
            self.sasl_learner(&sock).await?;
            Ok::<_, String>(sock)
        }
        .await;
        self.0.borrow_mut().election_dialing.remove(&to);
        match result {
            Ok(sock) if to > myid => {
                // The higher sid dials back; ours is closed (ZooKeeper's rule).
                sock.shutdown();
            }
            Ok(sock) => {
                self.election_connected(to, sock, StreamBuf::default())
                    .await
            }
            Err(e) => tracing::debug!(peer = to, %addr, "election port: cannot connect: {e}"),
        }
    }

    /// Registers the election connection with `sid` and reads votes off it
    /// until it ends.
    async fn election_connected(self, sid: Sid, sock: Socket, mut buf: StreamBuf) {
        // Votes keep coming while the election runs; a silent connection is fine.
        sock.set_read_timeout(Duration::from_secs(3600));
        let (tx, rx) = local_channel::new_bounded(VOTES_QUEUED_MAX);
        let generation = {
            let mut inner = self.0.borrow_mut();
            inner.next_generation += 1;
            let generation = inner.next_generation;
            if let Some(last) = inner.last_vote.get(&sid) {
                let _ = tx.try_send(Out::Frame(last.clone()));
            }
            let old = inner.election.insert(
                sid,
                Conn {
                    generation,
                    sock: sock.clone(),
                    out: Rc::new(tx),
                    queued_bytes: Rc::new(Cell::new(0)),
                    cork: Vec::new(),
                },
            );
            if let Some(old) = old {
                old.close();
            }
            generation
        };
        spawn_writer(sock.clone(), rx, None);
        let events = self.0.borrow().events.clone();
        let reason = loop {
            match buf.next(&sock, election_wire::decode_notification).await {
                Ok(wire) => {
                    if let Some(n) = wire.to_election() {
                        let msg = Msg::Vote(n);
                        let event = PeerEvent::Received { from: sid, msg };
                        if events
                            .send(Tagged {
                                generation: None,
                                event,
                            })
                            .await
                            .is_err()
                        {
                            break "the core stopped".to_string();
                        }
                    }
                }
                Err(e) => break e,
            }
        };
        tracing::debug!(peer = sid, "election connection ended: {reason}");
        sock.shutdown();
        let mut inner = self.0.borrow_mut();
        if inner.election.get(&sid).map(|c| c.generation) == Some(generation) {
            inner.election.remove(&sid);
        }
    }

    // ---- quorum port ---------------------------------------------------

    async fn accept_quorum(self, listener: TcpListener) {
        loop {
            match listener.accept().await {
                Ok(stream) => {
                    let n = self.clone();
                    glommio::spawn_local(async move { n.learner_accepted(stream).await }).detach();
                }
                Err(e) => {
                    tracing::warn!("quorum port: accept failed: {e}");
                    glommio::timer::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }

    /// A learner connected: its first packet, FOLLOWERINFO, names it.
    async fn learner_accepted(self, stream: TcpStream) {
        let (sock, mut buf) = match self.secure_accepted(stream).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("quorum port: closing a learner connection: {e}");
                return;
            }
        };
        sock.set_read_timeout(self.0.borrow().init_timeout);
        if let Err(e) = self.sasl_server(&sock, &mut buf).await {
            tracing::warn!("quorum port: closing a learner connection: {e}");
            sock.shutdown();
            return;
        }
        let first = match buf
            .next(&sock, |b| quorum_packet::decode(b, QUORUM_BUFFER_MAX))
            .await
        {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!("quorum port: closing a learner connection: {e}");
                sock.shutdown();
                return;
            }
        };
        let sid = match zab_msg::learner_sid(&first) {
            Ok(sid) if sid != self.myid() && self.0.borrow().peers.contains_key(&sid) => sid,
            Ok(sid) => {
                tracing::warn!(
                    sid,
                    "quorum port: closing a connection from a server not in the configuration"
                );
                sock.shutdown();
                return;
            }
            Err(e) => {
                tracing::warn!("quorum port: closing a learner connection: {e}");
                sock.shutdown();
                return;
            }
        };
        // A bad first packet closes this connection before it can replace
        // a good one with the same sid.
        let msg = match zab_msg::from_packet(first) {
            Ok(msg) => msg,
            Err(e) => {
                tracing::warn!(peer = sid, "quorum port: closing a learner connection: {e}");
                sock.shutdown();
                return;
            }
        };
        self.quorum_connected(sid, sock, buf, msg).await;
    }

    async fn dial_quorum(self, to: Sid) {
        let (addr, timeout) = {
            let inner = self.0.borrow();
            (inner.peers[&to].quorum, inner.init_timeout)
        };
        // ZooKeeper's learner tries 5 times, a second apart, within initLimit.
        let mut result = Err("no attempt".to_string());
        for attempt in 0..5 {
            if attempt > 0 {
                glommio::timer::sleep(Duration::from_millis(200)).await;
            }
            if !self.0.borrow().quorum_dialing.contains_key(&to) {
                return; // given up on meanwhile
            }
            result = match TcpStream::connect_timeout(addr, timeout).await {
                Ok(stream) => match self.secure_dialed(stream, addr).await {
                    Ok(sock) => self.sasl_learner(&sock).await.map(|()| sock),
                    Err(e) => Err(e),
                },
                Err(e) => Err(e.to_string()),
            };
            if result.is_ok() {
                break;
            }
        }
        let waiting = self.0.borrow_mut().quorum_dialing.remove(&to);
        let Some(waiting) = waiting else {
            return;
        };
        match result {
            Ok(sock) => {
                let conn = self.register_quorum(to, sock.clone());
                for frame in waiting {
                    conn.queued.set(conn.queued.get() + frame.len());
                    let _ = conn.out.try_send(Out::Frame(frame));
                }
                self.read_quorum(to, sock, StreamBuf::default(), conn.generation)
                    .await;
            }
            Err(e) => {
                tracing::info!(peer = to, %addr, "cannot connect to the leader: {e}");
                Self::report_break(&mut self.0.borrow_mut(), to);
            }
        }
    }

    /// Registers a quorum connection (closing any older one with `sid`).
    fn register_quorum(&self, sid: Sid, sock: Socket) -> Registered {
        let (tx, rx) = local_channel::new_unbounded();
        let tx = Rc::new(tx);
        let queued = Rc::new(Cell::new(0));
        let mut inner = self.0.borrow_mut();
        inner.next_generation += 1;
        let generation = inner.next_generation;
        // From here on, nothing read on an older connection with `sid` is
        // delivered.
        inner.quorum_live.insert(sid, generation);
        let old = inner.quorum.insert(
            sid,
            Conn {
                generation,
                sock: sock.clone(),
                out: tx.clone(),
                queued_bytes: queued.clone(),
                cork: Vec::new(),
            },
        );
        drop(inner);
        if let Some(old) = old {
            old.close();
        }
        spawn_writer(sock, rx, Some(queued.clone()));
        Registered {
            queued,
            out: tx,
            generation,
        }
    }

    /// A learner's connection, named by its first packet `first`.
    async fn quorum_connected(self, sid: Sid, sock: Socket, buf: StreamBuf, first: Msg) {
        let generation = self.register_quorum(sid, sock.clone()).generation;
        let event = PeerEvent::Received {
            from: sid,
            msg: first,
        };
        if let Err(e) = self.deliver(sid, generation, event).await {
            // Closed or replaced meanwhile: its reader has nothing to report.
            tracing::debug!(peer = sid, "quorum connection ended: {e}");
            sock.shutdown();
            return;
        }
        self.read_quorum(sid, sock, buf, generation).await;
    }

    /// Puts an event read on quorum connection `generation` with `sid` in
    /// the runner's channel, waiting while it is full; an error, and the
    /// reader stops, when the connection was closed or replaced before or
    /// meanwhile (the event is then dropped here or as it comes out).
    async fn deliver(&self, sid: Sid, generation: u64, event: PeerEvent) -> Result<(), String> {
        if !self.quorum_open(sid, generation) {
            return Err(STALE.into());
        }
        let events = self.0.borrow().events.clone();
        let tagged = Tagged {
            generation: Some(generation),
            event,
        };
        if events.send(tagged).await.is_err() {
            return Err("the core stopped".into());
        }
        if !self.quorum_open(sid, generation) {
            return Err(STALE.into());
        }
        Ok(())
    }

    /// Reads packets off a quorum connection until it ends, then reports it
    /// (unless the runner closed or replaced it: then it stops at once,
    /// decoding nothing more, and reports nothing).
    async fn read_quorum(self, sid: Sid, sock: Socket, mut buf: StreamBuf, generation: u64) {
        // Liveness is the state machine's (syncLimit, in ticks); this only
        // stops a dead connection from being held forever. A watchdog, not
        // a read timeout: glommio arms and removes a timer for every read
        // that waits (3-5k instructions of each member's write).
        sock.clear_read_timeout();
        let idle = self.0.borrow().init_timeout.max(Duration::from_secs(1)) * 4;
        let progress = Rc::new(ReadProgress::default());
        buf.progress = Some(progress.clone());
        // Dropped (cancelled) when this reader ends.
        let _watchdog = glommio::spawn_local(watch_reads(sock.clone(), progress.clone(), idle));
        let open = || self.quorum_open(sid, generation);
        let reason = loop {
            let p = match buf
                .next_while(
                    &sock,
                    |b| quorum_packet::decode(b, QUORUM_BUFFER_MAX),
                    &open,
                )
                .await
            {
                Ok(p) => p,
                Err(e) => break e,
            };
            if p.kind == PacketType::Snap {
                let (tree, sessions) = match read_snapshot(&sock, &mut buf, p.zxid, &open).await {
                    Ok(t) => t,
                    Err(e) => break format!("reading a SNAP: {e}"),
                };
                let event = PeerEvent::Snapshot {
                    from: sid,
                    zxid: p.zxid,
                    tree: Box::new(tree),
                    sessions,
                };
                if let Err(e) = self.deliver(sid, generation, event).await {
                    break e;
                }
                continue;
            }
            let event = match session_event(sid, p) {
                Ok(e) => e,
                Err(e) => break e.to_string(),
            };
            if let Some(touches) = event.touches {
                if let Err(e) = self.deliver(sid, generation, touches).await {
                    break e;
                }
            }
            if let Err(e) = self.deliver(sid, generation, event.main).await {
                break e;
            }
        };
        let reason = if progress.idle.get() {
            format!("nothing read for {} s", idle.as_secs())
        } else {
            reason
        };
        sock.shutdown();
        let mut inner = self.0.borrow_mut();
        if inner.quorum.get(&sid).map(|c| c.generation) == Some(generation) {
            // Ended on its own: what it read is delivered, then this.
            inner.quorum.remove(&sid);
            tracing::info!(peer = sid, "quorum connection ended: {reason}");
            notify(
                &inner.events,
                Some(generation),
                PeerEvent::Disconnected(sid),
            );
        } else {
            tracing::debug!(peer = sid, "quorum connection ended: {reason}");
        }
    }
}

/// The tree that follows a SNAP packet, read as it arrives.
async fn read_snapshot(
    sock: &Socket,
    buf: &mut StreamBuf,
    zxid: i64,
    open: &dyn Fn() -> bool,
) -> Result<(crate::tree::Tree, Vec<crate::snapshot::SessionEntry>), String> {
    let mut reader = super::snap_stream::SnapReader::default();
    while !reader.is_done() {
        let item = buf.next_while(sock, |b| reader.decode(b), open).await?;
        reader.accept(item).map_err(|e| e.to_string())?;
    }
    Ok(reader.finish(zxid))
}

/// What a packet from `from` means to the runner: a session packet, or a
/// ZAB message (a PING reply also carries touches).
struct Incoming {
    touches: Option<PeerEvent>,
    main: PeerEvent,
}

fn session_event(from: Sid, p: QuorumPacket) -> Result<Incoming, PeerError> {
    let main = |main| Incoming {
        touches: None,
        main,
    };
    match p.kind {
        PacketType::Request => Ok(main(PeerEvent::Request {
            from,
            request: session_packets::parse_request(p)?,
        })),
        PacketType::Sync => Ok(main(PeerEvent::SyncAnswered { from })),
        PacketType::Revalidate => Ok(main(PeerEvent::Revalidate {
            from,
            what: session_packets::parse_revalidate(p.data.as_deref().unwrap_or(&[]))?,
        })),
        PacketType::Ping if p.data.as_ref().is_some_and(|d| !d.is_empty()) => {
            let sessions = session_packets::parse_touches(p.data.as_deref().unwrap_or(&[]))?;
            Ok(Incoming {
                touches: Some(PeerEvent::Touches { from, sessions }),
                main: PeerEvent::Received {
                    from,
                    msg: Msg::Ping,
                },
            })
        }
        _ => Ok(main(PeerEvent::Received {
            from,
            msg: zab_msg::from_packet(p)?,
        })),
    }
}

fn msg_name(m: &Msg) -> &'static str {
    match m {
        Msg::Snap { .. } => "a SNAP (a serialized tree)",
        _ => "this message",
    }
}

/// Reports an event without waiting: a full channel means the runner is
/// far behind, and it will learn of the break from the missing traffic.
fn notify(events: &Rc<LocalSender<Tagged>>, generation: Option<u64>, event: PeerEvent) {
    let _ = events.try_send(Tagged { generation, event });
}

/// Why a reader stops when its connection is no longer current.
const STALE: &str = "closed or replaced";

fn to_glommio(l: std::net::TcpListener) -> TcpListener {
    l.set_nonblocking(true).expect("a nonblocking listener");
    // SAFETY: the descriptor comes from a listener we own and give up here.
    unsafe { <TcpListener as std::os::unix::io::FromRawFd>::from_raw_fd(l.into_raw_fd()) }
}

/// Writes what is queued for one connection, coalescing frames, until the
/// queue closes or a write fails (then the socket is shut down, which ends
/// its reader).
fn spawn_writer(sock: Socket, rx: LocalReceiver<Out>, queued: Option<Rc<Cell<usize>>>) {
    glommio::spawn_local(async move {
        let mut chunk = Vec::new();
        let mut next = rx.recv().await;
        while let Some(first) = next.take() {
            let first = match first {
                Out::Frame(f) => f,
                Out::Stream(chunks) => {
                    if write_stream(&sock, chunks).await.is_err() {
                        sock.shutdown();
                        break;
                    }
                    if let Some(q) = &queued {
                        q.set(q.get().saturating_sub(1));
                    }
                    next = rx.recv().await;
                    continue;
                }
            };
            if first.len() >= WRITE_CHUNK_BYTES {
                // A turn's remainder or a large packet: written as it is,
                // not copied into (and then kept as) the chunk.
                let written = first.len();
                if sock.write_owned(first).await.1.is_err() {
                    sock.shutdown();
                    break;
                }
                if let Some(q) = &queued {
                    q.set(q.get().saturating_sub(written));
                }
                next = rx.recv().await;
                continue;
            }
            chunk.clear();
            chunk.extend_from_slice(&first);
            while chunk.len() < WRITE_CHUNK_BYTES {
                match futures_lite::future::poll_once(rx.recv()).await.flatten() {
                    // A large frame goes on its own, next (see above).
                    Some(Out::Frame(more)) if more.len() >= WRITE_CHUNK_BYTES => {
                        next = Some(Out::Frame(more));
                        break;
                    }
                    Some(Out::Frame(more)) => chunk.extend_from_slice(&more),
                    Some(stream) => {
                        next = Some(stream);
                        break;
                    }
                    None => break,
                }
            }
            if sock.write_all(&chunk).await.is_err() {
                sock.shutdown();
                break;
            }
            // Written: only now may a sender pass the writer (Conn::write_now).
            if let Some(q) = &queued {
                q.set(q.get().saturating_sub(chunk.len()));
            }
            // At most two chunks' worth is kept for the connection's life.
            chunk.shrink_to(2 * WRITE_CHUNK_BYTES);
            if next.is_none() {
                next = rx.recv().await;
            }
        }
    })
    .detach();
}

/// Writes a SNAP body's chunks as its encoder thread hands them over.
async fn write_stream(
    sock: &Socket,
    chunks: std::sync::mpsc::Receiver<SnapChunk>,
) -> Result<(), String> {
    use std::sync::mpsc::TryRecvError;
    loop {
        match chunks.try_recv() {
            Ok(SnapChunk::Bytes(b)) => sock.write_all(&b).await.map_err(|e| e.to_string())?,
            Ok(SnapChunk::Done) => return Ok(()),
            Err(TryRecvError::Empty) => glommio::timer::sleep(SNAP_CHUNK_POLL).await,
            Err(TryRecvError::Disconnected) => {
                tracing::error!("the SNAP encoder stopped before the end: closing the connection");
                return Err("SNAP encoder failed".into());
            }
        }
    }
}

/// How much a peer read asks the socket for at least, and the step the
/// buffer grows by while a packet longer than it arrives.
const READ_CHUNK: usize = 64 * 1024;

/// Bytes read off a stream and not yet decoded: `buf[start..end]`. The
/// buffer keeps its length between reads, so its bytes are zeroed once
/// when it grows, not on every read (a 64 KiB memset per packet was 2% of
/// a leader's CPU under one session's writes). It grows by
/// [`READ_CHUNK`] only while a packet does not fit, as far as the decoder's
/// bound on a packet lets it, and shrinks back once such a packet is
/// consumed and little is left behind it.
#[derive(Default)]
struct StreamBuf {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Counts the reads that brought bytes, for a watchdog.
    progress: Option<Rc<ReadProgress>>,
}

/// A connection's reads as its watchdog sees them.
#[derive(Default)]
struct ReadProgress {
    reads: Cell<u64>,
    /// The watchdog closed the connection.
    idle: Cell<bool>,
}

/// Shuts `sock` down once nothing has been read on it for `idle` (checked
/// every half of it: closed between `idle` and one and a half times it),
/// which ends its reader's pending read. One timer per connection, where a
/// read timeout is one per read.
async fn watch_reads(sock: Socket, progress: Rc<ReadProgress>, idle: Duration) {
    let mut seen = progress.reads.get();
    let mut quiet = 0;
    loop {
        glommio::timer::sleep(idle / 2).await;
        let now = progress.reads.get();
        quiet = if now == seen { quiet + 1 } else { 0 };
        seen = now;
        if quiet >= 2 {
            progress.idle.set(true);
            sock.shutdown();
            return;
        }
    }
}

/// Rounds of a quorum SASL exchange before it fails (SaslQuorumAuthServer's
/// MAX_RETRIES); DIGEST-MD5 takes two.
const SASL_ROUNDS_MAX: usize = 5;

/// A TLS handshake bounded as Netty bounds one (10 s).
async fn with_handshake_timeout(
    handshake: impl std::future::Future<Output = Result<Socket, String>>,
) -> Result<Socket, String> {
    let timeout = async {
        glommio::timer::sleep(crate::socket::TLS_HANDSHAKE_TIMEOUT).await;
        Err("TLS handshake not done in time".to_string())
    };
    futures_lite::future::or(handshake, timeout).await
}

impl StreamBuf {
    /// A buffer that starts with bytes already read from its socket.
    fn with_prefix(prefix: Vec<u8>) -> StreamBuf {
        let end = prefix.len();
        StreamBuf {
            buf: prefix,
            start: 0,
            end,
            progress: None,
        }
    }

    /// The next item `decode` finds, reading more as it asks; an error for
    /// a bad item, the end of the stream or a read error.
    async fn next<T>(
        &mut self,
        sock: &Socket,
        decode: impl Fn(&[u8]) -> Result<Decoded<T>, PeerError>,
    ) -> Result<T, String> {
        self.next_while(sock, decode, &|| true).await
    }

    /// [`StreamBuf::next`] while `open()`: once it is not, an error, and
    /// nothing more is decoded (not even bytes already buffered).
    async fn next_while<T>(
        &mut self,
        sock: &Socket,
        decode: impl Fn(&[u8]) -> Result<Decoded<T>, PeerError>,
        open: &dyn Fn() -> bool,
    ) -> Result<T, String> {
        loop {
            if !open() {
                return Err(STALE.into());
            }
            debug_assert!(self.start <= self.end && self.end <= self.buf.len());
            match decode(&self.buf[self.start..self.end]).map_err(|e| e.to_string())? {
                Decoded::Item(_, used) if used > self.end - self.start => {
                    // A decoder's fault, not the peer's; still only this
                    // connection pays for it.
                    return Err(format!(
                        "the decoder took {used} of {} bytes",
                        self.end - self.start
                    ));
                }
                Decoded::Item(item, used) => {
                    self.start += used;
                    let live = self.end - self.start;
                    if self.buf.len() > 4 * READ_CHUNK && live <= READ_CHUNK / 2 {
                        // A big packet (a SNAP's) is done: give its room
                        // back, keeping what came in after it.
                        let mut small = vec![0; READ_CHUNK];
                        small[..live].copy_from_slice(&self.buf[self.start..self.end]);
                        self.buf = small;
                        (self.start, self.end) = (0, live);
                    } else if live == 0 {
                        (self.start, self.end) = (0, 0);
                    }
                    return Ok(item);
                }
                Decoded::More => {
                    if self.start > 0 {
                        self.buf.copy_within(self.start..self.end, 0);
                        self.end -= self.start;
                        self.start = 0;
                    }
                    if self.buf.len() - self.end < READ_CHUNK / 2 {
                        self.buf.resize(self.buf.len() + READ_CHUNK, 0);
                    }
                    match sock.read(&mut self.buf[self.end..]).await {
                        Ok(0) => return Err("end of stream".into()),
                        Ok(n) => {
                            self.end += n;
                            if let Some(p) = &self.progress {
                                p.reads.set(p.reads.get() + 1);
                            }
                        }
                        Err(e) => return Err(e.to_string()),
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zab::ensemble::Txn;
    use std::io::Read;

    /// Server 1's listeners (election, quorum), the quorum listeners of
    /// servers 2, 3, ... (a test plays them), and every server's addresses.
    struct Servers {
        my_election: std::net::TcpListener,
        my_quorum: std::net::TcpListener,
        other_quorum: Vec<std::net::TcpListener>,
        _other_election: Vec<std::net::TcpListener>,
        peers: BTreeMap<Sid, PeerAddrs>,
    }

    /// Server 1 and `others` more.
    fn servers(others: usize) -> Servers {
        let listen = || std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let (my_election, my_quorum) = (listen(), listen());
        let addrs = |q: &std::net::TcpListener, e: &std::net::TcpListener| PeerAddrs {
            quorum: q.local_addr().unwrap(),
            election: e.local_addr().unwrap(),
        };
        let mut peers = BTreeMap::new();
        peers.insert(1, addrs(&my_quorum, &my_election));
        let (mut other_quorum, mut other_election) = (Vec::new(), Vec::new());
        for sid in 2..2 + others as Sid {
            let (q, e) = (listen(), listen());
            peers.insert(sid, addrs(&q, &e));
            other_quorum.push(q);
            other_election.push(e);
        }
        Servers {
            my_election,
            my_quorum,
            other_quorum,
            _other_election: other_election,
            peers,
        }
    }

    /// Server 1's peer net (no TLS, no SASL, a 2 s init timeout), on the
    /// current executor.
    fn start_server_1(
        peers: BTreeMap<Sid, PeerAddrs>,
        my_election: std::net::TcpListener,
        my_quorum: std::net::TcpListener,
    ) -> (PeerNet, PeerEvents) {
        PeerNet::start(
            1,
            peers,
            Duration::from_secs(2),
            my_election,
            my_quorum,
            None,
            None,
        )
    }

    /// The connection server 1 dials to `listener` within 10 s, blocking,
    /// its reads timing out after `read_timeout`.
    fn accept_dialled(
        listener: &std::net::TcpListener,
        read_timeout: Duration,
    ) -> std::net::TcpStream {
        listener.set_nonblocking(true).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let stream = loop {
            match listener.accept() {
                Ok((s, _)) => break s,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    assert!(std::time::Instant::now() < deadline, "nothing dialled");
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => panic!("accept: {e}"),
            }
        };
        stream.set_nonblocking(false).unwrap();
        stream.set_read_timeout(Some(read_timeout)).unwrap();
        stream
    }

    /// A leader whose learner connection is gone drops what it has for
    /// that learner; only FOLLOWERINFO, a learner's first packet, dials.
    #[test]
    fn only_followerinfo_opens_a_quorum_connection() {
        let Servers {
            my_election,
            my_quorum,
            other_quorum,
            _other_election,
            peers,
        } = servers(1);
        let other_quorum = &other_quorum[0];
        let follower_info = Msg::FollowerInfo {
            accepted_epoch: 1,
            ringkeeper: true,
        };
        let mut expected = Vec::new();
        zab_msg::to_packet(&follower_info, 1)
            .expect("FOLLOWERINFO encodes")
            .encode(&mut expected);
        let executor = glommio::LocalExecutorBuilder::default()
            .spawn(move || async move {
                let (net, _events) = start_server_1(peers, my_election, my_quorum);
                let zxid = (1i64 << 32) | 1;
                let txn = Txn {
                    zxid,
                    data: vec![1, 2, 3],
                };
                net.send(2, &Msg::Proposal(txn));
                net.send(2, &Msg::Commit(zxid));
                net.send(2, &Msg::UpToDate);
                glommio::timer::sleep(Duration::from_millis(300)).await;
                net.send(2, &follower_info);
                glommio::timer::sleep(Duration::from_millis(500)).await;
                net.close_quorum_all();
                glommio::timer::sleep(Duration::from_millis(100)).await;
            })
            .expect("an executor");
        let mut stream = accept_dialled(other_quorum, Duration::from_secs(10));
        let mut received = Vec::new();
        stream
            .read_to_end(&mut received)
            .expect("read until closed");
        executor.join().expect("the executor ends");
        assert_eq!(
            received, expected,
            "the connection carries FOLLOWERINFO and nothing sent before it"
        );
        assert!(
            other_quorum.accept().is_err(),
            "no second connection was dialled"
        );
    }

    /// What reached the consumer of a leader's events (server 1) when
    /// learner 2's quorum connection was left with the events channel
    /// full and a reader blocked behind it, then closed by the runner
    /// (`close_first`) or replaced by a new connection from 2, which sends
    /// FOLLOWERINFO and `NEW` ACKs: `(old, new)`, the old connection's ACKs
    /// and FOLLOWERINFO, and the new one's, in the order they arrived.
    fn events_around_a_replaced_connection(close_first: bool) -> (Vec<String>, Vec<String>) {
        use std::io::Write;
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        const OLD: i64 = EVENTS_MAX as i64 + 1000;
        const NEW: i64 = 100;
        const NEW_BASE: i64 = 1 << 40;
        let listen = || std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let (other_quorum, other_election) = (listen(), listen());
        let (my_election, my_quorum) = (listen(), listen());
        let quorum_addr = my_quorum.local_addr().unwrap();
        let addrs = |q: &std::net::TcpListener, e: &std::net::TcpListener| PeerAddrs {
            quorum: q.local_addr().unwrap(),
            election: e.local_addr().unwrap(),
        };
        let mut peers = BTreeMap::new();
        peers.insert(1, addrs(&my_quorum, &my_election));
        peers.insert(2, addrs(&other_quorum, &other_election));
        let packet = |m: &Msg| {
            let mut b = Vec::new();
            zab_msg::to_packet(m, 2).unwrap().encode(&mut b);
            b
        };
        // The old connection's FOLLOWERINFO says epoch 1, the new one's 2.
        let follower_info = |accepted_epoch| {
            packet(&Msg::FollowerInfo {
                accepted_epoch,
                ringkeeper: true,
            })
        };
        let (closed, reconnected) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let (closed2, reconnected2) = (closed.clone(), reconnected.clone());
        let executor = glommio::LocalExecutorBuilder::default()
            .spawn(move || async move {
                let (net, events) = start_server_1(peers, my_election, my_quorum);
                // Nothing is taken until the channel is full and the old
                // connection's reader waits behind it.
                glommio::timer::sleep(Duration::from_millis(700)).await;
                if close_first {
                    net.close_quorum(2);
                }
                closed2.store(true, Ordering::SeqCst);
                while !reconnected2.load(Ordering::SeqCst) {
                    glommio::timer::sleep(Duration::from_millis(10)).await;
                }
                // The new connection is registered once its FOLLOWERINFO is read.
                glommio::timer::sleep(Duration::from_millis(300)).await;
                let (mut old, mut new) = (Vec::new(), Vec::new());
                let deadline = std::time::Instant::now() + Duration::from_secs(10);
                while std::time::Instant::now() < deadline {
                    let got = futures_lite::future::or(async { events.recv().await }, async {
                        glommio::timer::sleep(Duration::from_millis(500)).await;
                        None
                    })
                    .await;
                    let Some(e) = got else {
                        if new.len() as i64 == NEW + 1 {
                            break;
                        }
                        continue;
                    };
                    let (is_new, what) = match e {
                        PeerEvent::Received {
                            msg: Msg::Ack(z), ..
                        } => (z >= NEW_BASE, format!("ACK {z:#x}")),
                        PeerEvent::Received {
                            msg:
                                Msg::FollowerInfo {
                                    accepted_epoch,
                                    ringkeeper: true,
                                },
                            ..
                        } => (
                            accepted_epoch == 2,
                            format!("FOLLOWERINFO {accepted_epoch}"),
                        ),
                        PeerEvent::Disconnected(sid) => (false, format!("Disconnected({sid})")),
                        _ => (false, "another event".into()),
                    };
                    if is_new {
                        new.push(what);
                    } else {
                        old.push(what);
                    }
                }
                (old, new)
            })
            .expect("an executor");
        let mut first = std::net::TcpStream::connect(quorum_addr).unwrap();
        let mut wire = follower_info(1);
        for z in 1..=OLD {
            wire.extend_from_slice(&packet(&Msg::Ack(z)));
        }
        first.write_all(&wire).unwrap();
        while !closed.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut second = std::net::TcpStream::connect(quorum_addr).unwrap();
        let mut wire = follower_info(2);
        for i in 0..NEW {
            wire.extend_from_slice(&packet(&Msg::Ack(NEW_BASE + i)));
        }
        second.write_all(&wire).unwrap();
        reconnected.store(true, Ordering::SeqCst);
        let got = executor.join().expect("the executor ends");
        drop((first, second));
        got
    }

    fn assert_only_the_new_connection(close_first: bool) {
        let (old, new) = events_around_a_replaced_connection(close_first);
        let shown: Vec<&String> = old.iter().take(3).collect();
        assert!(
            old.is_empty(),
            "{} events of the old connection reached the consumer after it was {}, \
             the first: {shown:?}",
            old.len(),
            if close_first { "closed" } else { "replaced" },
        );
        let mut want = vec!["FOLLOWERINFO 2".to_string()];
        want.extend((0..100).map(|i| format!("ACK {:#x}", (1i64 << 40) + i)));
        assert_eq!(new, want, "the new connection's events, all and in order");
    }

    /// Issue 26 defect 7: a reader of a closed quorum connection blocked on
    /// a full events channel, and the packets still buffered behind it,
    /// must not reach the runner once the runner closed that connection
    /// and the learner connected again (an old session's SNAP would roll
    /// the new session back).
    #[test]
    fn no_event_of_a_closed_quorum_connection_reaches_the_runner() {
        assert_only_the_new_connection(true);
    }

    /// The same when the learner's new connection replaces the old one
    /// without the runner closing it first.
    #[test]
    fn no_event_of_a_replaced_quorum_connection_reaches_the_runner() {
        assert_only_the_new_connection(false);
    }

    /// A decoder that claims more bytes than it was given (a codec bug)
    /// ends that connection with an error, not the process with a panic.
    #[test]
    fn a_decoder_taking_more_than_it_has_is_an_error() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let writer = std::thread::spawn(move || {
            use std::io::Write;
            let (mut s, _) = listener.accept().unwrap();
            s.write_all(&[1, 2, 3, 4]).unwrap();
            s
        });
        let err = glommio::LocalExecutorBuilder::default()
            .spawn(move || async move {
                let sock = Socket::new(TcpStream::connect(addr).await.unwrap());
                let mut buf = StreamBuf::default();
                let greedy = |b: &[u8]| {
                    Ok(if b.len() < 4 {
                        Decoded::More
                    } else {
                        Decoded::Item((), b.len() + 1)
                    })
                };
                buf.next(&sock, greedy).await.err()
            })
            .unwrap()
            .join()
            .unwrap();
        drop(writer.join().unwrap());
        let err = err.expect("an error");
        assert!(err.contains("took 5 of 4 bytes"), "{err}");
    }

    /// Length-prefixed frames (4-byte big-endian length), at most `max`.
    fn frames(max: usize) -> impl Fn(&[u8]) -> Result<Decoded<Vec<u8>>, PeerError> {
        move |b: &[u8]| {
            if b.len() < 4 {
                return Ok(Decoded::More);
            }
            let len = u32::from_be_bytes(b[..4].try_into().unwrap()) as usize;
            if len > max {
                return Err(PeerError::TooLong {
                    what: "frame",
                    len: len as i64,
                    max,
                });
            }
            if b.len() < 4 + len {
                return Ok(Decoded::More);
            }
            Ok(Decoded::Item(b[4..4 + len].to_vec(), 4 + len))
        }
    }

    /// Small frames, one bigger than many reads (a SNAP's), small ones
    /// again, all written in odd pieces: each comes out whole and in order;
    /// the buffer gives the big one's room back after it; a frame over the
    /// decoder's bound is an error.
    #[test]
    fn stream_buf_reassembles_frames_across_reads_and_gives_big_buffers_back() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let big: Vec<u8> = (0..1_000_003u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut sent: Vec<Vec<u8>> = (0..50u8).map(|i| vec![i; i as usize * 3]).collect();
        sent.push(big);
        sent.extend((0..50u8).map(|i| vec![i; 100 - i as usize]));
        let mut wire = Vec::new();
        for f in &sent {
            wire.extend_from_slice(&(f.len() as u32).to_be_bytes());
            wire.extend_from_slice(f);
        }
        // Then one frame over the bound.
        wire.extend_from_slice(&(3_000_000u32).to_be_bytes());
        let writer = std::thread::spawn(move || {
            use std::io::Write;
            let (mut s, _) = listener.accept().unwrap();
            let mut at = 0;
            let mut step = 1;
            while at < wire.len() {
                let n = step.min(wire.len() - at);
                s.write_all(&wire[at..at + n]).unwrap();
                at += n;
                step = step * 3 % 70_001 + 1;
            }
        });
        let got = glommio::LocalExecutorBuilder::default()
            .spawn(move || async move {
                let sock = Socket::new(TcpStream::connect(addr).await.unwrap());
                let mut buf = StreamBuf::default();
                let mut got = Vec::new();
                let err = loop {
                    match buf.next(&sock, frames(2_000_000)).await {
                        Ok(f) => {
                            if f.len() > 4 * READ_CHUNK {
                                assert!(buf.buf.len() <= READ_CHUNK, "room given back");
                            }
                            got.push(f);
                        }
                        Err(e) => break e,
                    }
                };
                (got, err)
            })
            .unwrap()
            .join()
            .unwrap();
        writer.join().unwrap();
        let (got, err) = got;
        assert_eq!(got, sent);
        assert!(err.contains("over the bound"), "{err}");
    }

    /// A quorum connection's watchdog leaves it open while bytes keep
    /// coming (a frame every 50 ms for 1.5 s, checked every 0.5 s), and
    /// closes it, ending the pending read, once nothing came for its idle
    /// time (1 s), and no later than one and a half times that.
    #[test]
    fn a_watchdog_closes_a_connection_only_once_nothing_is_read() {
        const FRAMES: u32 = 30;
        const IDLE: Duration = Duration::from_secs(1);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let writer = std::thread::spawn(move || {
            use std::io::Write;
            let (mut s, _) = listener.accept().unwrap();
            for i in 0..FRAMES {
                let frame = [4u32.to_be_bytes(), i.to_be_bytes()].concat();
                if s.write_all(&frame).is_err() {
                    // Closed early: the reader's assertions say so.
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            // Silent, and open until the reader's side closes.
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest);
        });
        let (read, idle, quiet_for) = glommio::LocalExecutorBuilder::default()
            .spawn(move || async move {
                let sock = Socket::new(TcpStream::connect(addr).await.unwrap());
                let progress = Rc::new(ReadProgress::default());
                let mut buf = StreamBuf {
                    progress: Some(progress.clone()),
                    ..StreamBuf::default()
                };
                let _watchdog =
                    glommio::spawn_local(watch_reads(sock.clone(), progress.clone(), IDLE));
                let reading = async {
                    let mut read = 0;
                    let mut last = std::time::Instant::now();
                    while buf.next(&sock, frames(64)).await.is_ok() {
                        read += 1;
                        last = std::time::Instant::now();
                    }
                    Some((read, progress.idle.get(), last.elapsed()))
                };
                // Bounded: a watchdog that never fires fails the test.
                let bound = async {
                    glommio::timer::sleep(IDLE * 10).await;
                    None
                };
                futures_lite::future::or(reading, bound).await
            })
            .unwrap()
            .join()
            .unwrap()
            .expect("the watchdog closed the connection");
        writer.join().unwrap();
        assert_eq!(read, FRAMES, "closed while frames were coming");
        assert!(idle, "closed by the watchdog");
        assert!(
            quiet_for >= IDLE,
            "closed after {quiet_for:?} without reads"
        );
        assert!(
            quiet_for < IDLE * 3,
            "closed {quiet_for:?} after the last read"
        );
    }

    /// A quorum connection's frames arrive whole and in the order they were
    /// sent, whichever way each went: corked or not, sent from the caller's
    /// task while the writer was idle (to several peers in one system call,
    /// or to one), or queued behind a writer waiting on a peer that reads
    /// slowly (tens of MB each, far past the socket buffers). Two peers
    /// that read at different speeds, so that a batch often sends all of
    /// one frame and part of the other.
    #[test]
    fn frames_keep_their_order_through_cork_direct_sends_and_the_writer() {
        const PROPOSALS: i64 = 600;
        const LEARNERS: [Sid; 2] = [2, 3];
        let Servers {
            my_election,
            my_quorum,
            other_quorum,
            _other_election,
            peers,
        } = servers(LEARNERS.len());
        let payload = |i: i64| vec![(i % 251) as u8; 1024 + (i as usize * 997) % (96 << 10)];
        let executor = glommio::LocalExecutorBuilder::default()
            .spawn(move || async move {
                let (net, _events) = start_server_1(peers, my_election, my_quorum);
                let follower_info = Msg::FollowerInfo {
                    accepted_epoch: 1,
                    ringkeeper: true,
                };
                for to in LEARNERS {
                    net.send(to, &follower_info);
                }
                glommio::timer::sleep(Duration::from_millis(300)).await;
                let send = |i: i64| {
                    let m = Msg::Proposal(Txn {
                        zxid: i,
                        data: payload(i),
                    });
                    for to in LEARNERS {
                        net.send(to, &m);
                    }
                };
                let mut i = 1;
                while i <= PROPOSALS {
                    match i % 4 {
                        0 => {
                            // A corked run, flushed halfway and at its end.
                            let cork = net.cork();
                            for j in i..(i + 5).min(PROPOSALS + 1) {
                                send(j);
                                if j == i + 2 {
                                    net.flush_corked();
                                }
                            }
                            drop(cork);
                            i += 5;
                        }
                        1 => {
                            // Nested corks: only the last one sends.
                            let outer = net.cork();
                            let inner = net.cork();
                            send(i);
                            drop(inner);
                            send(i + 1);
                            drop(outer);
                            i += 2;
                        }
                        _ => {
                            send(i);
                            i += 1;
                        }
                    }
                    if i % 7 == 0 {
                        // Let the writers run now and then.
                        glommio::timer::sleep(Duration::from_millis(1)).await;
                    }
                }
                // The readers drain what is queued, then the net closes.
                for _ in 0..400 {
                    let queued: usize = net
                        .0
                        .borrow()
                        .quorum
                        .values()
                        .map(|c| c.queued_bytes.get() + c.cork.len())
                        .sum();
                    if queued == 0 {
                        break;
                    }
                    glommio::timer::sleep(Duration::from_millis(50)).await;
                }
                net.close_quorum_all();
                glommio::timer::sleep(Duration::from_millis(100)).await;
            })
            .expect("an executor");
        let readers: Vec<_> = other_quorum
            .into_iter()
            .enumerate()
            .map(|(k, listener)| {
                std::thread::spawn(move || {
                    let mut stream = accept_dialled(&listener, Duration::from_secs(20));
                    // Slow readers: small reads with pauses (the second
                    // learner's longer), so that the sender's socket
                    // buffers fill and its writers take over now and then.
                    std::thread::sleep(Duration::from_millis(150));
                    let mut received = Vec::new();
                    let mut buf = vec![0u8; 16 << 10];
                    let mut reads = 0u32;
                    loop {
                        let n = stream.read(&mut buf).expect("read until closed");
                        if n == 0 {
                            break;
                        }
                        received.extend_from_slice(&buf[..n]);
                        reads += 1;
                        if reads.is_multiple_of(64) {
                            std::thread::sleep(Duration::from_millis(2 + 3 * k as u64));
                        }
                    }
                    received
                })
            })
            .collect();
        let received: Vec<Vec<u8>> = readers
            .into_iter()
            .map(|r| r.join().expect("a reader ends"))
            .collect();
        executor.join().expect("the executor ends");
        for (received, learner) in received.iter().zip(LEARNERS) {
            let mut at = 0;
            let mut zxids = Vec::new();
            while at < received.len() {
                match quorum_packet::decode(&received[at..], QUORUM_BUFFER_MAX)
                    .expect("a whole packet")
                {
                    Decoded::Item(p, used) => {
                        if p.kind == PacketType::Proposal {
                            assert_eq!(
                                p.data.as_deref(),
                                Some(&payload(p.zxid)[..]),
                                "proposal {} to {learner} arrived whole",
                                p.zxid
                            );
                            zxids.push(p.zxid);
                        }
                        at += used;
                    }
                    Decoded::More => panic!(
                        "a packet to {learner} cut at byte {at} of {}",
                        received.len()
                    ),
                }
            }
            assert_eq!(zxids, (1..=PROPOSALS).collect::<Vec<_>>(), "to {learner}");
        }
    }
}
