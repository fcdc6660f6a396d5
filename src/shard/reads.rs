//! Reads served on the connection's shard from its tree version, as
//! Apache ZooKeeper's FinalRequestProcessor answers them. No lock, no hop.

use crate::proto::codes::{err, event, op, perm};
use crate::proto::jute::Writer;
use crate::proto::{Request, Response, SetWatches, Stat, WatcherEvent};
use crate::tree::{Node, Tree};
use crate::watch::{WatchKind, WatchTable};

/// Who is reading: the connection (watches belong to it) and its session.
pub struct Reader<'a> {
    pub conn: u64,
    pub session_id: i64,
    pub ids: &'a [(String, String)],
}

/// The answer to a read: error code, body, and watch events to send before
/// the reply (setWatches on changes the client missed).
pub struct ReadResult<'t> {
    pub err: i32,
    pub body: Option<ReadBody<'t>>,
    pub events: Vec<WatcherEvent>,
}

/// A read's reply body. getData's borrows the node's bytes from the tree:
/// the shard encodes the reply while it holds the tree, so the bytes are
/// copied once, into the reply, with no handle on the node made for it.
pub enum ReadBody<'t> {
    Response(Response),
    Data { data: Option<&'t [u8]>, stat: Stat },
}

impl ReadBody<'_> {
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            ReadBody::Response(r) => r.encode(out),
            ReadBody::Data { data, stat } => {
                let mut w = Writer::new(out);
                w.opt_buffer(*data);
                stat.encode(&mut w);
            }
        }
    }
}

impl<'t> ReadResult<'t> {
    fn ok(body: Response) -> ReadResult<'t> {
        ReadResult {
            err: 0,
            body: Some(ReadBody::Response(body)),
            events: Vec::new(),
        }
    }

    fn err(code: i32) -> ReadResult<'t> {
        ReadResult {
            err: code,
            body: None,
            events: Vec::new(),
        }
    }
}

/// ZooKeeper's node map has "" as an alias of the root.
fn lookup(path: &str) -> &str {
    if path.is_empty() {
        "/"
    } else {
        path
    }
}

pub fn serve<'t>(
    tree: &'t Tree,
    watches: &mut WatchTable,
    who: &Reader,
    req: &Request,
) -> ReadResult<'t> {
    match serve_one(tree, watches, who, req) {
        Ok(r) => r,
        Err(code) => ReadResult::err(code),
    }
}

/// The node at `path` if it exists and `who` may read it.
fn readable<'t>(tree: &'t Tree, who: &Reader, path: &str) -> Result<&'t Node, i32> {
    let n = tree.get(lookup(path)).ok_or(err::NO_NODE)?;
    allowed(n, who, perm::READ)?;
    Ok(n)
}

fn allowed(n: &Node, who: &Reader, wanted: i32) -> Result<(), i32> {
    if crate::acl::allowed(&n.acl, who.ids, wanted) {
        Ok(())
    } else {
        Err(err::NO_AUTH)
    }
}

fn serve_one<'t>(
    tree: &'t Tree,
    watches: &mut WatchTable,
    who: &Reader,
    req: &Request,
) -> Result<ReadResult<'t>, i32> {
    Ok(match req {
        Request::Ping => ReadResult {
            err: 0,
            body: None,
            events: Vec::new(),
        },
        Request::Exists { path, watch } => {
            if path.contains('\0') {
                return Err(err::BAD_ARGUMENTS);
            }
            // exists is not ACL-checked in ZooKeeper 3.8.
            let n = tree.get(lookup(path));
            // The watch is set whether or not the node exists.
            if *watch {
                watches.add(WatchKind::Data, path, who.conn, tree.last_zxid());
            }
            ReadResult::ok(Response::Stat(n.ok_or(err::NO_NODE)?.stat()))
        }
        Request::GetData { path, watch } => {
            let n = readable(tree, who, path)?;
            if *watch {
                watches.add(WatchKind::Data, path, who.conn, tree.last_zxid());
            }
            ReadResult {
                err: 0,
                body: Some(ReadBody::Data {
                    data: n.data(),
                    stat: n.stat(),
                }),
                events: Vec::new(),
            }
        }
        Request::GetChildren { path, watch } | Request::GetChildren2 { path, watch } => {
            let n = readable(tree, who, path)?;
            if *watch {
                watches.add(WatchKind::Child, path, who.conn, tree.last_zxid());
            }
            let children = n.children.zookeeper_order();
            ReadResult::ok(if matches!(req, Request::GetChildren { .. }) {
                Response::Children(children)
            } else {
                Response::Children2 {
                    children,
                    stat: n.stat(),
                }
            })
        }
        Request::GetAcl { path } => {
            let n = tree.get(lookup(path)).ok_or(err::NO_NODE)?;
            allowed(n, who, perm::READ | perm::ADMIN)?;
            ReadResult::ok(Response::GetAcl {
                acl: crate::acl::redact_for(&n.acl, who.ids),
                stat: n.stat(),
            })
        }
        Request::GetAllChildrenNumber { path } => {
            readable(tree, who, path)?;
            // DataTree.getAllChildrenNumber counts map keys under path + "/",
            // so "" (the root's alias) counts the root itself too.
            let count = if path.is_empty() {
                tree.znode_count() as i32
            } else {
                tree.descendant_count(path).ok_or(err::NO_NODE)?
            };
            ReadResult::ok(Response::Number(count))
        }
        Request::GetEphemerals { prefix } => {
            let all = tree.ephemerals_of(who.session_id);
            let p = prefix.trim();
            let list = all
                .iter()
                .filter(|e| p.is_empty() || p == "/" || e.starts_with(prefix.as_str()))
                .map(|e| e.to_string())
                .collect();
            ReadResult::ok(Response::Strings(list))
        }
        Request::WhoAmI => ReadResult::ok(Response::WhoAmI(
            who.ids
                .iter()
                .map(|(s, id)| (s.clone(), user_name(s, id)))
                .collect(),
        )),
        Request::AddWatch { path, mode } => {
            watches.add_persistent(path, who.conn, *mode == 1, tree.last_zxid());
            ReadResult::ok(Response::ErrorBody(0))
        }
        Request::CheckWatches { path, watcher_type } => {
            if !watches.contains(path, who.conn, *watcher_type, tree.last_zxid()) {
                return Err(err::NO_WATCHER);
            }
            ReadResult::ok(Response::Empty)
        }
        Request::RemoveWatches { path, watcher_type } => {
            if !watches.remove(path, who.conn, *watcher_type) {
                return Err(err::NO_WATCHER);
            }
            ReadResult::ok(Response::Empty)
        }
        Request::SetWatches(sw) | Request::SetWatches2(sw) => {
            let events = set_watches(tree, watches, who.conn, sw);
            ReadResult {
                err: 0,
                body: None,
                events,
            }
        }
        Request::MultiRead(ops) => {
            let mut results = Vec::with_capacity(ops.len());
            for o in ops {
                // Op.getData / Op.getChildren in multiRead never set watches.
                let r = match o {
                    // The results outlive this borrow of the tree: the
                    // data is shared with the node, not borrowed.
                    Request::GetData { path, .. } => {
                        readable(tree, who, path).map(|n| Response::GetData {
                            data: n.data_shared(),
                            stat: n.stat(),
                        })
                    }
                    Request::GetChildren { path, .. } => readable(tree, who, path)
                        .map(|n| Response::Children(n.children.zookeeper_order())),
                    _ => Err(err::BAD_ARGUMENTS),
                };
                results.push(match r {
                    Ok(body) => (o.opcode(), Ok(body)),
                    Err(code) => (op::ERROR, Err(code)),
                });
            }
            ReadResult::ok(Response::Multi(results))
        }
        _ => return Err(err::UNIMPLEMENTED),
    })
}

/// AuthenticationProvider.getUserName: digest ids show their user only;
/// an id whose scheme has no provider (super) shows none.
fn user_name(scheme: &str, id: &str) -> String {
    match scheme {
        "digest" => id.split(':').next().unwrap_or(id).to_string(),
        "super" => String::new(),
        _ => id.to_string(),
    }
}

/// DataTree.setWatches: fire at once for what changed after the client's
/// last zxid, register the rest.
fn set_watches(
    tree: &Tree,
    watches: &mut WatchTable,
    conn: u64,
    sw: &SetWatches,
) -> Vec<WatcherEvent> {
    let mut events = Vec::new();
    let fire = |events: &mut Vec<WatcherEvent>, t: i32, p: &str| {
        events.push(WatcherEvent {
            event_type: t,
            state: crate::proto::codes::state::SYNC_CONNECTED,
            path: p.to_string(),
        })
    };
    for p in &sw.data {
        match tree.get(p) {
            None => fire(&mut events, event::NODE_DELETED, p),
            Some(n) if n.mzxid > sw.relative_zxid => fire(&mut events, event::NODE_DATA_CHANGED, p),
            Some(_) => watches.add(WatchKind::Data, p, conn, tree.last_zxid()),
        }
    }
    for p in &sw.exist {
        match tree.get(p) {
            Some(_) => fire(&mut events, event::NODE_CREATED, p),
            None => watches.add(WatchKind::Data, p, conn, tree.last_zxid()),
        }
    }
    for p in &sw.child {
        match tree.get(p) {
            None => fire(&mut events, event::NODE_DELETED, p),
            Some(n) if n.pzxid() > sw.relative_zxid => {
                fire(&mut events, event::NODE_CHILDREN_CHANGED, p)
            }
            Some(_) => watches.add(WatchKind::Child, p, conn, tree.last_zxid()),
        }
    }
    for p in &sw.persistent {
        watches.add_persistent(p, conn, false, tree.last_zxid());
    }
    for p in &sw.persistent_recursive {
        watches.add_persistent(p, conn, true, tree.last_zxid());
    }
    events
}

/// Requests a shard answers itself (everything but writes, sync, auth).
pub fn is_read(req: &Request) -> bool {
    !(req.is_write()
        || matches!(
            req,
            Request::Sync { .. } | Request::Auth { .. } | Request::Reconfig { .. }
        ))
}
