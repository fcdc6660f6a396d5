//! A shard: one executor that owns client connections, their watches and a
//! read view of the tree. Reads are answered here; writes go to the
//! consensus core; commits come back in zxid order and are applied to the
//! view only after their watch events are queued (guarantee 3).

pub mod auth;
pub mod conn;
pub mod reads;

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use glommio::channels::shared_channel::{ConnectedReceiver, ConnectedSender};
use glommio::net::TcpListener;

use crate::admin::four_letter::{self, ClientLine, View};
use crate::admin::stats::{totals, ShardStats};
use crate::config::Config;
use crate::consensus::messages::{AuthIds, Commit, Direct, Reply, ShardBatch, ToCore};
use crate::proto::codes::state;
use crate::proto::{Request, WatcherEvent};
use crate::session::ConnRef;
use crate::tree::Tree;
use crate::watch::WatchTable;

use conn::{Conn, Pending};

pub struct Shard {
    pub id: usize,
    pub config: Arc<Config>,
    stats: Arc<[ShardStats]>,
    to_core: Rc<ConnectedSender<ToCore>>,
    tree: RefCell<Tree>,
    watches: RefCell<WatchTable>,
    conns: RefCell<HashMap<u64, Rc<Conn>>>,
    /// Sessions whose connection is on this shard.
    sessions: RefCell<HashMap<i64, u64>>,
    /// Sessions heard from since the last touch batch (at most one entry
    /// per session of this shard).
    touched: RefCell<HashSet<i64>>,
    next_conn: Cell<u64>,
}

impl Shard {
    fn my_stats(&self) -> &ShardStats {
        &self.stats[self.id]
    }

    pub fn conn_ref(&self, conn: u64) -> ConnRef {
        ConnRef {
            shard: self.id,
            conn,
        }
    }

    pub fn last_zxid(&self) -> i64 {
        self.tree.borrow().last_zxid()
    }

    pub async fn to_core(&self, msg: ToCore) {
        if self.to_core.send(msg).await.is_err() {
            tracing::error!(shard = self.id, "consensus core is gone");
        }
    }

    fn add_conn(&self, conn: Rc<Conn>) {
        self.conns.borrow_mut().insert(conn.id, conn);
        self.my_stats().connections.fetch_add(1, Relaxed);
    }

    fn remove_conn(&self, conn: &Rc<Conn>) {
        self.conns.borrow_mut().remove(&conn.id);
        self.watches.borrow_mut().remove_conn(conn.id);
        self.my_stats().connections.fetch_sub(1, Relaxed);
        let outstanding = conn.pending.borrow().len() as u64;
        self.my_stats().outstanding.fetch_sub(outstanding, Relaxed);
        let session_id = conn.session_id.get();
        let owned = self.sessions.borrow().get(&session_id) == Some(&conn.id);
        if owned {
            self.sessions.borrow_mut().remove(&session_id);
            let msg = ToCore::Disconnected {
                conn: self.conn_ref(conn.id),
                session_id,
            };
            // Cleanup must not wait on the core's queue: send from a task.
            let to_core = self.to_core.clone();
            glommio::spawn_local(async move {
                let _ = to_core.send(msg).await;
            })
            .detach();
        }
    }

    fn bind_session(&self, session_id: i64, conn: u64) {
        self.sessions.borrow_mut().insert(session_id, conn);
    }

    fn note_received(&self, session_id: i64) {
        self.my_stats().packets_received.fetch_add(1, Relaxed);
        if session_id != 0 {
            self.touched.borrow_mut().insert(session_id);
        }
    }

    async fn send_write(&self, conn: &Conn, xid: i32, request: Request) {
        self.my_stats().outstanding.fetch_add(1, Relaxed);
        let ids: AuthIds = conn.ids.borrow().clone();
        self.to_core(ToCore::Write {
            conn: self.conn_ref(conn.id),
            session_id: conn.session_id.get(),
            xid,
            request,
            ids,
        })
        .await;
    }

    async fn send_malformed_write(&self, conn: &Conn, xid: i32) {
        self.my_stats().outstanding.fetch_add(1, Relaxed);
        self.to_core(ToCore::MalformedWrite {
            conn: self.conn_ref(conn.id),
            session_id: conn.session_id.get(),
            xid,
        })
        .await;
    }

    /// Answers a read from the current view.
    fn answer_read(&self, conn: &Conn, xid: i32, request: &Request, started: Instant) {
        let tree = self.tree.borrow();
        let ids = conn.ids.borrow();
        let who = reads::Reader {
            conn: conn.id,
            session_id: conn.session_id.get(),
            ids: &ids,
        };
        let res = reads::serve(&tree, &mut self.watches.borrow_mut(), &who, request);
        for ev in &res.events {
            conn.notify(ev);
        }
        conn.reply(xid, tree.last_zxid(), res.err, res.body.as_ref());
        self.finish_request(started);
    }

    fn finish_request(&self, started: Instant) {
        let s = self.my_stats();
        s.packets_sent.fetch_add(1, Relaxed);
        s.record_latency_ms(started.elapsed().as_millis() as u64);
    }

    /// Applies one batch from the core, commit by commit.
    fn apply_batch(&self, batch: ShardBatch) {
        for commit in batch.commits.iter() {
            match commit {
                Commit::Txn {
                    tree,
                    triggers,
                    reply,
                    closed_session,
                    ..
                } => {
                    self.fire(triggers);
                    *self.tree.borrow_mut() = tree.clone();
                    if let Some(r) = reply {
                        self.deliver(r);
                    }
                    if let Some(sid) = closed_session {
                        self.close_session_conn(*sid);
                    }
                }
                Commit::Barrier(r) => self.deliver(r),
            }
        }
        for d in batch.direct {
            match d {
                Direct::Connected { conn, response } => {
                    if let Some(c) = self.conns.borrow().get(&conn) {
                        c.connect_result(response);
                    }
                }
                Direct::Close { conn } => {
                    if let Some(c) = self.conns.borrow().get(&conn) {
                        tracing::debug!(conn, "session moved to another connection");
                        c.close();
                    }
                }
            }
        }
        let s = self.my_stats();
        let tree = self.tree.borrow();
        s.last_zxid.store(tree.last_zxid(), Relaxed);
        s.node_count.store(tree.node_count() as u64, Relaxed);
        s.watch_count
            .store(self.watches.borrow().count() as u64, Relaxed);
    }

    fn fire(&self, triggers: &[crate::tree::Trigger]) {
        if triggers.is_empty() {
            return;
        }
        let conns = self.conns.borrow();
        let mut watches = self.watches.borrow_mut();
        for t in triggers {
            let targets = watches.trigger(&t.path, t.event_type);
            if targets.is_empty() {
                continue;
            }
            let ev = WatcherEvent {
                event_type: t.event_type,
                state: state::SYNC_CONNECTED,
                path: t.path.to_string(),
            };
            for id in targets {
                if let Some(c) = conns.get(&id) {
                    c.notify(&ev);
                }
            }
        }
    }

    /// The committed reply of a write: answer it, then every read that
    /// waited behind it, from the view that now holds the write.
    fn deliver(&self, r: &Reply) {
        if r.conn.shard != self.id {
            return;
        }
        let Some(conn) = self.conns.borrow().get(&r.conn.conn).cloned() else {
            return;
        };
        let front = conn.pending.borrow_mut().pop_front();
        let started = match front {
            Some(Pending::Write { xid, started }) => {
                assert_eq!(xid, r.xid, "write replies out of order on conn {}", conn.id);
                started
            }
            _ => panic!(
                "conn {}: committed reply {} with no write pending",
                conn.id, r.xid
            ),
        };
        self.my_stats().outstanding.fetch_sub(1, Relaxed);
        conn.reply(r.xid, self.last_zxid(), r.err, r.body.as_ref());
        self.finish_request(started);
        loop {
            let next = {
                let mut p = conn.pending.borrow_mut();
                match p.front() {
                    Some(Pending::Read { .. } | Pending::Error { .. }) => p.pop_front(),
                    _ => None,
                }
            };
            match next {
                Some(Pending::Read {
                    xid,
                    request,
                    started,
                }) => self.answer_read(&conn, xid, &request, started),
                Some(Pending::Error { xid, err, started }) => {
                    conn.reply(xid, self.last_zxid(), err, None);
                    self.finish_request(started);
                }
                _ => break,
            }
        }
        conn.maybe_resume();
    }

    fn close_session_conn(&self, session_id: i64) {
        let Some(conn_id) = self.sessions.borrow_mut().remove(&session_id) else {
            return;
        };
        if let Some(c) = self.conns.borrow().get(&conn_id) {
            c.close();
        }
    }

    fn four_letter(&self, word: &str) -> Option<String> {
        let clients = self
            .conns
            .borrow()
            .values()
            .map(|c| ClientLine {
                addr: c.peer.to_string(),
                queued: c.pending.borrow().len() as u64,
                received: c.received.get(),
                sent: c.sent.get(),
            })
            .collect();
        let view = View {
            config: &self.config,
            totals: totals(&self.stats),
            clients,
        };
        let reset = || self.stats.iter().for_each(ShardStats::reset);
        four_letter::answer(word, &view, &reset)
    }
}

/// Everything a shard executor needs, handed over from the launcher.
pub struct ShardSetup {
    pub id: usize,
    pub config: Arc<Config>,
    pub stats: Arc<[ShardStats]>,
    pub to_core: glommio::channels::shared_channel::SharedSender<ToCore>,
    pub from_core: glommio::channels::shared_channel::SharedReceiver<ShardBatch>,
    /// The recovered tree: the view until the first commit arrives.
    pub tree: Tree,
}

/// Runs a shard until its executor stops.
pub async fn run(setup: ShardSetup) {
    let addr =
        std::net::SocketAddr::new(setup.config.client_port_address, setup.config.client_port);
    // glommio sets SO_REUSEPORT: every shard binds the same port and the
    // kernel spreads connections over them.
    let listener = match TcpListener::bind(addr) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(shard = setup.id, %addr, "cannot listen: {e}");
            std::process::exit(1);
        }
    };
    let to_core: ConnectedSender<ToCore> = setup.to_core.connect().await;
    let from_core: ConnectedReceiver<ShardBatch> = setup.from_core.connect().await;
    let shard = Rc::new(Shard {
        id: setup.id,
        config: setup.config.clone(),
        stats: setup.stats,
        to_core: Rc::new(to_core),
        tree: RefCell::new(setup.tree),
        watches: RefCell::new(WatchTable::default()),
        conns: RefCell::new(HashMap::new()),
        sessions: RefCell::new(HashMap::new()),
        touched: RefCell::new(HashSet::new()),
        next_conn: Cell::new(1),
    });
    {
        let s = shard.my_stats();
        let tree = shard.tree.borrow();
        s.last_zxid.store(tree.last_zxid(), Relaxed);
        s.node_count.store(tree.node_count() as u64, Relaxed);
    }
    tracing::info!(shard = shard.id, %addr, "shard listening");
    let commits = {
        let shard = shard.clone();
        glommio::spawn_local(async move {
            while let Some(batch) = from_core.recv().await {
                shard.apply_batch(batch);
            }
        })
    };
    glommio::spawn_local(touch_loop(shard.clone())).detach();
    commits.detach();
    loop {
        match listener.accept().await {
            Ok(stream) => {
                let id = shard.next_conn.get();
                shard.next_conn.set(id + 1);
                glommio::spawn_local(conn::serve(shard.clone(), stream, id)).detach();
            }
            Err(e) => {
                tracing::warn!(shard = shard.id, "accept failed: {e}");
                glommio::timer::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// Tells the core which sessions were heard from, every half tick.
async fn touch_loop(shard: Rc<Shard>) {
    let every = Duration::from_millis((shard.config.tick_time_ms as u64 / 2).clamp(10, 1000));
    loop {
        glommio::timer::sleep(every).await;
        let ids: Vec<i64> = shard.touched.borrow_mut().drain().collect();
        if !ids.is_empty() {
            shard.to_core(ToCore::Touch(ids)).await;
        }
    }
}
