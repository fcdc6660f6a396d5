//! One client connection on a shard: a reader task (frames in, requests
//! out in order) and a writer task (replies out), sharing `Conn`.
//!
//! Ordering (guarantee 1): every request takes a place in `pending` unless
//! it can be answered at once. A read is answered at once only when nothing
//! is pending before it; otherwise it waits until the writes ahead of it are
//! committed, and is then answered from the tree version that holds them.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::time::{Duration, Instant};

use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};

use crate::admin::limits::Slot;
use crate::admin::stats::ConnStats;
use crate::proto::codes::{err, op};
use crate::proto::jute::DecodeError;
use crate::proto::{encode_connect_response, encode_notification, encode_reply, encode_reply_with};
use crate::proto::{ConnectRequest, ConnectResponse, Request, Response, WatcherEvent};
use crate::socket::{FrameReader, Socket, IN_BYTES_KEEP};

use super::budget::ReplyBudget;
use super::reads::ReadBody;
use super::{ReplyClock, Shard};

/// Requests one connection may have in flight before its socket is no
/// longer read (backpressure, like ZooKeeper's throttling).
pub const PENDING_PER_CONN_MAX: usize = 1000;
/// Reply bytes queued for a client that does not read them: past this the
/// connection is closed rather than letting memory grow.
pub const OUT_BYTES_MAX: usize = 64 << 20;
/// Capacity an emptied reply buffer keeps once its connection is idle
/// (`shrink_if_idle`); a larger one is freed then, so a connection that
/// once got a big reply does not hold its buffer while idle. A busy one
/// keeps its buffers: freeing them after every write made each batch of
/// replies grow a buffer from nothing again (pipelined 1 KiB reads ran at
/// 0.74x).
const OUT_BYTES_KEEP: usize = 4096;

pub enum Pending {
    Write {
        xid: i32,
        /// The opcode, for the latency metrics.
        op: i32,
        started: Instant,
    },
    Read {
        xid: i32,
        request: Request,
        started: Instant,
        /// The state it must see at least: what any shard had answered
        /// from when it arrived (`visibility`; `i64::MIN` with one shard).
        needs: i64,
    },
    /// A request answered with an error alone, in its turn.
    Error {
        xid: i32,
        op: i32,
        err: i32,
        started: Instant,
    },
}

pub struct Conn {
    pub id: u64,
    pub peer: SocketAddr,
    pub session_id: Cell<i64>,
    pub pending: RefCell<VecDeque<Pending>>,
    /// Authenticated ids: ("ip", address) first, then what auth added.
    pub ids: RefCell<crate::consensus::messages::AuthIds>,
    pub received: Cell<u64>,
    pub sent: Cell<u64>,
    /// The shard's touch round in which this connection's session was last
    /// put in the shard's touched set (once per round is enough).
    pub touched_round: Cell<u64>,
    /// Counters for cons/stat/dump.
    pub stats: ConnStats,
    /// The connection's SASL exchange, once a SASL packet came.
    pub sasl: RefCell<Option<crate::sasl::digest_md5::DigestMd5Server>>,
    /// The session was accepted read-only (the txn log had failed): its
    /// writes answer NOTREADONLY, as ReadOnlyRequestProcessor answers them.
    read_only: Cell<bool>,
    out: RefCell<Vec<u8>>,
    /// The writer's second buffer (empty while the writer holds it): `out`
    /// fills while this one is written.
    spare: RefCell<Vec<u8>>,
    /// Replies written since `shrink_if_idle` last looked.
    wrote: Cell<bool>,
    /// Reply bytes queued and not yet written (in `out` or being written):
    /// this connection's part of the shared `budget`.
    queued_bytes: Cell<usize>,
    budget: Arc<ReplyBudget>,
    /// This connection's shard, for its part of the budget.
    shard_index: usize,
    shard: Weak<Shard>,
    socket: Socket,
    closing: Cell<bool>,
    /// Closed by force (`abort`): nothing more is queued for it.
    aborted: Cell<bool>,
    /// The reader has returned: closing need not wake it (no shutdown, one
    /// system call less per connection a client ends).
    read_ended: Cell<bool>,
    doorbell: LocalSender<()>,
    resume: LocalSender<()>,
    connected: LocalSender<ConnectResponse>,
}

impl Conn {
    pub fn is_closing(&self) -> bool {
        self.closing.get()
    }

    /// Reply bytes queued and not yet written.
    pub fn queued_bytes(&self) -> usize {
        self.queued_bytes.get()
    }

    /// Appends to `out` with `encode`, counting the bytes in the budget.
    fn queue(&self, encode: impl FnOnce(&mut Vec<u8>)) {
        if self.aborted.get() {
            // Its replies were dropped and its budget released: bytes
            // queued now would count against the budget with no
            // connection left to close for them.
            return;
        }
        let added = {
            let mut out = self.out.borrow_mut();
            let before = out.len();
            encode(&mut out);
            out.len() - before
        };
        self.queued_bytes.set(self.queued_bytes.get() + added);
        self.budget
            .add(self.shard_index, added, self.queued_bytes.get());
    }

    /// Takes up to `bytes` off this connection's part of the budget (all of
    /// it when closed by force, so a write that never ends does not keep it).
    fn release(&self, bytes: usize) {
        let bytes = bytes.min(self.queued_bytes.get());
        self.queued_bytes.set(self.queued_bytes.get() - bytes);
        self.budget.release(bytes);
    }

    /// Queues one framed reply.
    pub fn reply(&self, xid: i32, zxid: i64, err: i32, body: Option<&Response>) {
        self.send(|out| encode_reply(out, xid, zxid, err, body));
    }

    /// Queues one framed reply to a read served on this shard.
    pub fn reply_read(&self, xid: i32, zxid: i64, err: i32, body: Option<&ReadBody>) {
        self.send(|out| {
            encode_reply_with(out, xid, zxid, err, |out| {
                if let Some(b) = body {
                    b.encode(out);
                }
            })
        });
    }

    pub fn notify(&self, ev: &WatcherEvent) {
        self.send(|out| encode_notification(out, ev));
    }

    /// Queues one framed message for the client, counts it sent and rings
    /// the writer.
    fn send(&self, encode: impl FnOnce(&mut Vec<u8>)) {
        self.queue(encode);
        self.sent.set(self.sent.get() + 1);
        self.ring();
    }

    pub fn connect_result(&self, response: ConnectResponse) {
        let _ = self.connected.try_send(response);
    }

    /// Closes after everything queued so far is written.
    pub fn close(&self) {
        self.closing.set(true);
        let _ = self.resume.try_send(());
        let _ = self.doorbell.try_send(());
    }

    /// Frees reply buffers past OUT_BYTES_KEEP if nothing was written since
    /// the last call (the shard calls it every half tick).
    pub fn shrink_if_idle(&self) {
        if self.wrote.replace(false) {
            return;
        }
        for buf in [&self.out, &self.spare] {
            let mut b = buf.borrow_mut();
            if b.is_empty() && b.capacity() > OUT_BYTES_KEEP {
                *b = Vec::new();
            }
        }
    }

    /// Closes now, dropping what is queued: for a client that does not
    /// read, whose pending write would otherwise never end.
    pub fn abort(&self) {
        self.aborted.set(true);
        let dropped = std::mem::take(&mut *self.out.borrow_mut());
        drop(dropped);
        self.release(usize::MAX);
        self.socket.shutdown();
        self.close();
    }

    /// Wakes the reader if it waits for room in `pending` (it checks the
    /// shard's outstanding limit again itself).
    pub fn maybe_resume(&self) {
        if self.pending.borrow().len() < PENDING_PER_CONN_MAX {
            let _ = self.resume.try_send(());
        }
    }

    /// Whether the reader must wait before taking another request: this
    /// connection has PENDING_PER_CONN_MAX requests in flight, or it has
    /// any in flight and the shard is past its share of
    /// globalOutstandingLimit (ZooKeeper's shouldThrottle) or this
    /// connection has its fair part of that share. A connection with none
    /// in flight may always send one, so every connection keeps making
    /// progress; a paused one has replies coming, and each wakes it.
    fn must_pause(&self, shard: &Shard) -> bool {
        let pending = self.pending.borrow().len();
        pending >= PENDING_PER_CONN_MAX
            || (pending > 0 && (shard.over_outstanding_limit() || pending >= shard.fair_share()))
            || (self.queued_bytes.get() > 0 && self.budget.is_over())
    }

    fn ring(&self) {
        if self.queued_bytes.get() > OUT_BYTES_MAX {
            tracing::warn!(
                conn = self.id,
                peer = %self.peer,
                queued_bytes = self.queued_bytes.get(),
                "client reads too slowly: closing"
            );
            self.abort();
            return;
        }
        if self.budget.is_over() {
            if let Some(shard) = self.shard.upgrade() {
                shard.relieve_replies();
            }
        }
        // A full doorbell already holds a wake-up: nothing is lost.
        let _ = self.doorbell.try_send(());
    }
}

/// How a connection arrived: bytes already read from it (port
/// unification looked at them) and the ids its client certificate gives it.
#[derive(Default)]
pub struct Arrival {
    pub prefix: Vec<u8>,
    pub certificate_ids: Vec<(String, String)>,
}

/// Runs one accepted connection to its end. `_slot` holds its place in the
/// connection limits until then.
pub async fn serve(
    shard: Rc<Shard>,
    socket: Socket,
    peer: SocketAddr,
    id: u64,
    _slot: Slot,
    arrival: Arrival,
) {
    // NIOServerCnxnFactory closes a connection that stays silent past
    // sessionlessCnxnTimeout until its session is established.
    socket.set_read_timeout(Duration::from_millis(
        shard.config.sessionless_cnxn_timeout_ms.max(1) as u64,
    ));
    let (doorbell, doorbell_rx) = local_channel::new_bounded(1);
    let (resume, resume_rx) = local_channel::new_bounded(1);
    let (connected, connected_rx) = local_channel::new_bounded(1);
    let conn = Rc::new(Conn {
        id,
        peer,
        session_id: Cell::new(0),
        pending: RefCell::new(VecDeque::new()),
        ids: RefCell::new(std::sync::Arc::from({
            let mut ids = vec![("ip".to_string(), peer.ip().to_string())];
            for id in arrival.certificate_ids {
                crate::java_compat::auth_info_insert(&mut ids, id);
            }
            ids
        })),
        received: Cell::new(0),
        touched_round: Cell::new(u64::MAX),
        sent: Cell::new(0),
        stats: ConnStats::new(),
        sasl: RefCell::new(None),
        read_only: Cell::new(false),
        out: RefCell::new(Vec::new()),
        spare: RefCell::new(Vec::new()),
        wrote: Cell::new(false),
        queued_bytes: Cell::new(0),
        budget: shard.reply_budget.clone(),
        shard_index: shard.id,
        shard: Rc::downgrade(&shard),
        socket: socket.clone(),
        closing: Cell::new(false),
        aborted: Cell::new(false),
        read_ended: Cell::new(false),
        doorbell,
        resume,
        connected,
    });
    tracing::debug!(conn = id, %peer, "connection accepted");
    shard.add_conn(conn.clone());
    let write_task = glommio::spawn_local(write_loop(conn.clone(), doorbell_rx));
    let mut reader = FrameReader::with_prefix(IN_BYTES_KEEP, &arrival.prefix);
    let end = read_loop(&shard, &conn, &socket, &mut reader, resume_rx, connected_rx).await;
    drop(reader);
    tracing::debug!(conn = id, %peer, reason = %end, "connection closing");
    conn.read_ended.set(true);
    conn.close();
    write_task.await;
    conn.release(usize::MAX);
    shard.remove_conn(&conn);
}

async fn write_loop(conn: Rc<Conn>, doorbell: LocalReceiver<()>) {
    while doorbell.recv().await.is_some() {
        loop {
            let mut spare = std::mem::take(&mut *conn.spare.borrow_mut());
            std::mem::swap(&mut *conn.out.borrow_mut(), &mut spare);
            if spare.is_empty() {
                *conn.spare.borrow_mut() = spare;
                break;
            }
            let (mut spare, written) = conn.socket.write_owned(spare).await;
            conn.release(spare.len());
            conn.wrote.set(true);
            spare.clear();
            *conn.spare.borrow_mut() = spare;
            if written.is_err() {
                conn.closing.set(true);
                break;
            }
        }
        // Replies written: a reader paused at the reply budget may go on.
        let _ = conn.resume.try_send(());
        if conn.closing.get() {
            if !conn.read_ended.get() {
                // Wakes the reader, whose read now ends.
                conn.socket.shutdown();
            }
            break;
        }
    }
}

/// How [`FrameReader`] says the client closed its socket (end of stream).
const PEER_CLOSED: &str = "end of stream";

/// A read ended with `why`: the client closing a connection the server did
/// not close counts as a dropped connection (ZooKeeper's
/// connection_drop_count, counted in NIOServerCnxn.handleFailedRead).
fn note_read_end(shard: &Shard, conn: &Conn, why: &str) {
    if why == PEER_CLOSED && !conn.is_closing() {
        shard.note_connection_drop();
    }
}

async fn read_loop(
    shard: &Rc<Shard>,
    conn: &Rc<Conn>,
    sock: &Socket,
    r: &mut FrameReader,
    resume: LocalReceiver<()>,
    connected: LocalReceiver<ConnectResponse>,
) -> String {
    let max = shard.config.jute_max_buffer;
    let first: [u8; 4] = match r.take(sock, 4).await {
        Ok(b) => b.try_into().expect("4 bytes"),
        Err(e) => {
            note_read_end(shard, conn, &e);
            return e;
        }
    };
    if let Some(word) = crate::admin::four_letter::word_of(first) {
        shard.note_four_letter(conn);
        let text = match crate::admin::four_letter::refusal(word, &shard.config) {
            Some(refusal) => {
                shard.note_four_letter_sent(&refusal);
                Some(refusal)
            }
            None if word == "stmk" => match read_trace_mask(sock, r).await {
                Some(mask) => shard.four_letter(word, Some(mask)).await,
                None => return "stmk without its 8-byte mask".into(),
            },
            None => shard.four_letter(word, None).await,
        };
        if let Some(text) = text {
            conn.queue(|out| out.extend_from_slice(text.as_bytes()));
        }
        return format!("four-letter word {word}");
    }
    let body = match r.body(sock, i32::from_be_bytes(first), max).await {
        Ok(b) => b,
        Err(e) => {
            note_read_end(shard, conn, &e);
            return e;
        }
    };
    shard.note_connect_received(conn);
    match handshake(shard, conn, body, &connected).await {
        // After the handshake ZooKeeper's connection expiry uses the
        // negotiated session timeout (NIOServerCnxn.setSessionTimeout).
        Ok(timeout_ms) => sock.set_read_timeout(Duration::from_millis(timeout_ms.max(1) as u64)),
        Err(reason) => return reason,
    }
    // When the frames were received: the clock is read when a frame needed
    // a read from the socket, or after a pause (throttling, or a wait for
    // room on the core's channel), and frames that came in the same read
    // share its reading (one vDSO call per read, not per request).
    let mut received = Instant::now();
    let mut answers = ReplyClock::new();
    let mut waited = false;
    loop {
        let mut paused = waited;
        while conn.must_pause(shard) && !conn.is_closing() {
            conn.stats.interest.set(0);
            resume.recv().await;
            paused = true;
        }
        conn.stats.interest.set(1);
        if conn.is_closing() {
            return "closed by server".into();
        }
        let buffered = r.has_whole_frame() && !paused;
        let frame = match r.frame(sock, max).await {
            Ok(f) => f,
            Err(e) => {
                note_read_end(shard, conn, &e);
                return e;
            }
        };
        if !buffered {
            received = Instant::now();
        }
        if !buffered {
            // Reads answered in line share a clock reading per socket read
            // (renewed every few replies, and after any costly read).
            answers = ReplyClock::new();
        }
        match handle_frame(shard, conn, frame, received, &mut answers).await {
            Ok(w) => waited = w,
            Err(reason) => return reason,
        }
    }
}

/// stmk's argument: the 8 bytes after the word. ZooKeeper reads them with
/// the word and closes without an answer when they are not there; here
/// they may trail the word by up to a second.
async fn read_trace_mask(sock: &Socket, r: &mut FrameReader) -> Option<i64> {
    let read = async {
        r.take(sock, 8)
            .await
            .ok()
            .map(|b| i64::from_be_bytes(b.try_into().expect("8 bytes")))
    };
    let timeout = async {
        glommio::timer::sleep(std::time::Duration::from_secs(1)).await;
        None
    };
    futures_lite::future::or(read, timeout).await
}

async fn handshake(
    shard: &Rc<Shard>,
    conn: &Rc<Conn>,
    body: &[u8],
    connected: &LocalReceiver<ConnectResponse>,
) -> Result<i32, String> {
    let started = Instant::now();
    let req = ConnectRequest::decode(body).map_err(|e| format!("bad connect request: {e}"))?;
    if shard.health.takes_no_clients(shard.config.read_only_mode) {
        // No leader and read-only mode off: the data here may hold txns
        // nobody committed; the client tries another server.
        tracing::info!(
            "Refusing session request for client {}: no leader",
            conn.peer
        );
        return Err("session refused: this ensemble member has no leader".into());
    }
    if !req.read_only && shard.health.takes_only_read_only_clients() {
        // ZooKeeperServer.processConnectRequest on a ReadOnlyZooKeeperServer:
        // closed without an answer, so the client tries another server.
        tracing::info!(
            "Refusing session request for not-read-only client {}",
            conn.peer
        );
        return Err("not-read-only client refused: the server is read-only".into());
    }
    if req.last_zxid_seen > shard.last_zxid() && shard.view_reaches(req.last_zxid_seen).await {
        tracing::debug!(
            conn = conn.id,
            "the client's last zxid was a batch ahead of this shard: waited for it"
        );
    }
    let last = shard.last_zxid();
    if req.last_zxid_seen > last {
        // ZooKeeper refuses without an answer: the client tries another server.
        return Err(format!(
            "client has seen zxid {:#x}, this server only {last:#x}",
            req.last_zxid_seen
        ));
    }
    let timeout_ms = shard.config.session_timeout_clamp(req.timeout_ms);
    shard
        .to_core(crate::consensus::messages::ToCore::Connect {
            conn: shard.conn_ref(conn.id),
            session_id: req.session_id,
            passwd: req.passwd.clone(),
            timeout_ms,
            has_read_only: req.has_read_only,
            can_be_read_only: req.read_only,
        })
        .await;
    let response = connected
        .recv()
        .await
        .ok_or_else(|| "shard stopping".to_string())?;
    conn.queue(|out| encode_connect_response(out, &response));
    shard.note_handshake(conn, &response, started);
    conn.ring();
    if response.session_id == 0 {
        return Err(format!("session {:#x} refused", req.session_id));
    }
    conn.session_id.set(response.session_id);
    conn.read_only.set(response.read_only);
    shard.bind_session(response.session_id, conn.id);
    Ok(response.timeout_ms)
}

/// Handles one request frame, received at `started`. Says whether it had to
/// wait for room on the consensus core's channel (frames buffered behind it
/// then count as received after the wait).
async fn handle_frame(
    shard: &Rc<Shard>,
    conn: &Rc<Conn>,
    frame: &[u8],
    started: Instant,
    answers: &mut ReplyClock,
) -> Result<bool, String> {
    if frame.len() < 8 {
        return Err("frame shorter than a request header".into());
    }
    let xid_v = i32::from_be_bytes(frame[0..4].try_into().unwrap());
    let opcode = i32::from_be_bytes(frame[4..8].try_into().unwrap());
    conn.received.set(conn.received.get() + 1);
    shard.note_received(conn, opcode, started);
    if opcode == op::SASL {
        return super::auth::answer_sasl(conn, xid_v, &frame[8..], &shard.config).map(|()| false);
    }
    if opcode != op::AUTH {
        if let Some(schemes) = &shard.config.enforce_auth_schemes {
            super::auth::enforce(conn, xid_v, schemes)?;
        }
    }
    let request = match Request::decode(opcode, &frame[8..]) {
        Ok(r) => r,
        Err(DecodeError::UnknownOpcode(_)) => {
            // UnimplementedRequestProcessor: answer -6 (zxid -1), then close.
            conn.reply(xid_v, -1, err::UNIMPLEMENTED, None);
            return Err(format!("unknown opcode {opcode}"));
        }
        Err(e) => {
            // ZooKeeper answers MARSHALLINGERROR and keeps the connection.
            tracing::debug!(conn = conn.id, opcode, "malformed request: {e}");
            if Request::is_write_opcode(opcode) {
                shard.push_pending(
                    conn,
                    Pending::Write {
                        xid: xid_v,
                        op: opcode,
                        started,
                    },
                );
                return Ok(shard.send_malformed_write(conn, xid_v).await);
            } else if conn.pending.borrow().is_empty() {
                conn.reply(xid_v, shard.last_zxid(), err::MARSHALLING_ERROR, None);
            } else {
                shard.push_pending(
                    conn,
                    Pending::Error {
                        xid: xid_v,
                        op: opcode,
                        err: err::MARSHALLING_ERROR,
                        started,
                    },
                );
            }
            return Ok(false);
        }
    };
    match request {
        Request::Auth { scheme, auth, .. } => {
            // ZooKeeper handles auth as it arrives, outside the request
            // order, and answers with the request's xid (-4 from Java).
            let super_digest = shard.config.super_digest.as_deref();
            match super::auth::authenticate(&scheme, &auth, conn, super_digest) {
                Some(new_ids) => {
                    let mut ids = conn.ids.borrow().to_vec();
                    for id in new_ids {
                        crate::java_compat::auth_info_insert(&mut ids, id);
                    }
                    *conn.ids.borrow_mut() = ids.into();
                    conn.reply(xid_v, 0, 0, None);
                }
                None => {
                    conn.reply(xid_v, 0, err::AUTH_FAILED, None);
                    return Err(format!("auth failed for scheme {scheme}"));
                }
            }
        }
        r if super::reads::is_read(&r) => {
            let needs = shard.read_needs();
            let behind_a_request = !conn.pending.borrow().is_empty();
            // Or behind the view: another shard answered from a batch this
            // one has not applied yet (`visibility`).
            let behind_the_view = !behind_a_request && needs > shard.last_zxid();
            if behind_a_request || behind_the_view {
                shard.push_pending(
                    conn,
                    Pending::Read {
                        xid: xid_v,
                        request: r,
                        started,
                        needs,
                    },
                );
                if behind_the_view {
                    shard.wait_for_view(conn, needs);
                }
            } else {
                // A cheap read's answer time is the shared reading; any
                // other read (children lists, multi reads) reads the clock
                // after it is served, so that its own work counts.
                let cheap = matches!(
                    r,
                    Request::GetData { .. } | Request::Exists { .. } | Request::Ping
                );
                shard.answer_read(conn, xid_v, &r, started, || {
                    if cheap {
                        answers.now()
                    } else {
                        answers.fresh()
                    }
                });
            }
        }
        _ if conn.read_only.get() && opcode != op::CLOSE_SESSION => {
            // ReadOnlyRequestProcessor: every write and sync (closeSession
            // excepted) answers NOTREADONLY, here in the session's order.
            if conn.pending.borrow().is_empty() {
                conn.reply(xid_v, shard.last_zxid(), err::NOT_READ_ONLY, None);
                shard.finish_request(conn, xid_v, opcode, started, Instant::now());
            } else {
                shard.push_pending(
                    conn,
                    Pending::Error {
                        xid: xid_v,
                        op: opcode,
                        err: err::NOT_READ_ONLY,
                        started,
                    },
                );
            }
        }
        r => {
            if opcode == op::CLOSE_SESSION {
                tracing::debug!(conn = conn.id, "client closes its session");
            }
            shard.push_pending(
                conn,
                Pending::Write {
                    xid: xid_v,
                    op: opcode,
                    started,
                },
            );
            return Ok(shard.send_write(conn, xid_v, r, &frame[8..]).await);
        }
    }
    Ok(false)
}
