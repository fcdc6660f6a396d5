//! The SNAP payload (ZAB-PROTOCOL-NOTES §3.2): what follows a SNAP packet
//! on the quorum port, unframed. ZKDatabase.serializeSnapshot: the
//! sessions, the ACL cache, the nodes parents first ("" for the root, "/"
//! ends them), then LearnerHandler's signature "BenWasHere".
//!
//! [`SnapReader`] takes it item by item as bytes arrive (a snapshot can be
//! far larger than any buffer we would hold twice), bounding every count
//! and length, and builds the tree as it goes. [`encode`] writes one.

use std::collections::HashMap;
use std::sync::Arc;

use super::{Decoded, PeerError};
use crate::proto::{Acl, Id};
use crate::snapshot::SessionEntry;
use crate::tree::{Node, Tree};

pub const SIGNATURE: &str = "BenWasHere";
/// ReferenceCountedACLCache's id for OPEN_ACL_UNSAFE (a null ACL).
const OPEN_ACL_INDEX: i64 = -1;
const SESSIONS_MAX: usize = 10_000_000;
const ACL_LISTS_MAX: usize = 10_000_000;
const ACL_ENTRIES_MAX: usize = 1 << 16;
/// BinaryInputArchive.checkLength's bound with the defaults: jute.maxbuffer
/// plus zookeeper.jute.maxbuffer.extrasize (which defaults to it). A client
/// can put a string of up to about 1 MiB in an ACL id; written as jute
/// writes it (a character beyond the BMP in 6 bytes where UTF-8 takes 4) it
/// can take half as much again.
const STRING_BYTES_MAX: usize = 2 * 0xfffff;
const DATA_BYTES_MAX: usize = 64 << 20;
/// StatPersisted: czxid, mzxid, ctime, mtime, version, cversion, aversion,
/// ephemeralOwner, pzxid.
const STAT_BYTES: usize = 8 * 4 + 4 * 3 + 8 * 2;

#[derive(Debug, PartialEq, Eq)]
enum Expect {
    SessionCount,
    Sessions(usize),
    AclCount,
    Acls(usize),
    Nodes,
    Signature,
    Done,
}

/// One SNAP payload being read.
pub struct SnapReader {
    expect: Expect,
    sessions: Vec<SessionEntry>,
    acls: HashMap<i64, Arc<[Acl]>>,
    tree: Tree,
    open_acl: Arc<[Acl]>,
    /// Nodes whose ACL number the snapshot's ACL cache does not hold, and
    /// the number: see [`SnapReader::unresolved_acls`].
    unresolved: Vec<(Arc<str>, i64)>,
}

/// What one step of the stream held.
pub enum Item {
    Count(usize),
    Session(SessionEntry),
    Acl(i64, Vec<Acl>),
    Node {
        path: String,
        data: Option<Vec<u8>>,
        acl: i64,
        stat: [i64; 9],
    },
    EndOfNodes,
    Signature,
}

/// A cursor that says "more" instead of failing when bytes run out.
struct Cur<'a> {
    b: &'a [u8],
    at: usize,
}

type Step<T> = Result<Option<T>, PeerError>;

fn bad(what: &'static str, detail: impl Into<String>) -> PeerError {
    PeerError::Bad {
        what,
        detail: detail.into(),
    }
}

impl<'a> Cur<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.at..self.at + n)?;
        self.at += n;
        Some(s)
    }
    fn i32(&mut self) -> Option<i32> {
        self.take(4)
            .map(|s| i32::from_be_bytes(s.try_into().unwrap()))
    }
    fn i64(&mut self) -> Option<i64> {
        self.take(8)
            .map(|s| i64::from_be_bytes(s.try_into().unwrap()))
    }
    /// A length-prefixed buffer; `None` inside for null (-1).
    fn buffer(&mut self, what: &'static str, max: usize) -> Step<Option<&'a [u8]>> {
        let Some(len) = self.i32() else {
            return Ok(None);
        };
        if len == -1 {
            return Ok(Some(None));
        }
        if len < 0 || len as usize > max {
            return Err(PeerError::TooLong {
                what,
                len: len as i64,
                max,
            });
        }
        Ok(self.take(len as usize).map(Some))
    }
    fn string(&mut self, what: &'static str) -> Step<String> {
        Ok(self
            .buffer(what, STRING_BYTES_MAX)?
            .map(|b| crate::proto::java_utf8::decode_keeping_pairs(b.unwrap_or(&[]))))
    }
    fn count(&mut self, what: &'static str, max: usize) -> Step<usize> {
        let Some(n) = self.i32() else {
            return Ok(None);
        };
        if n == -1 {
            return Ok(Some(0));
        }
        if n < 0 || n as usize > max {
            return Err(PeerError::TooLong {
                what,
                len: n as i64,
                max,
            });
        }
        Ok(Some(n as usize))
    }
}

/// `?` for a step: an error returns, "need more" returns `More`.
macro_rules! need {
    ($e:expr) => {
        match $e? {
            Some(v) => v,
            None => return Ok(Decoded::More),
        }
    };
}

impl Default for SnapReader {
    fn default() -> Self {
        let open_acl: Arc<[Acl]> = Arc::from(vec![Acl {
            perms: crate::proto::codes::perm::ALL,
            id: Id {
                scheme: "world".into(),
                id: "anyone".into(),
            },
        }]);
        SnapReader {
            expect: Expect::SessionCount,
            sessions: Vec::new(),
            acls: HashMap::new(),
            tree: Tree::empty(),
            open_acl,
            unresolved: Vec::new(),
        }
    }
}

impl SnapReader {
    pub fn is_done(&self) -> bool {
        self.expect == Expect::Done
    }

    /// The next item in `b`, if it is all there.
    pub fn decode(&self, b: &[u8]) -> Result<Decoded<Item>, PeerError> {
        let mut c = Cur { b, at: 0 };
        let item = match self.expect {
            Expect::SessionCount => Item::Count(need!(c.count("session count", SESSIONS_MAX))),
            Expect::AclCount => Item::Count(need!(c.count("ACL cache size", ACL_LISTS_MAX))),
            Expect::Sessions(_) => {
                let id = need!(Ok::<_, PeerError>(c.i64()));
                let timeout_ms = need!(Ok::<_, PeerError>(c.i32()));
                Item::Session(SessionEntry { id, timeout_ms })
            }
            Expect::Acls(_) => {
                let index = need!(Ok::<_, PeerError>(c.i64()));
                let n = need!(c.count("ACL list", ACL_ENTRIES_MAX));
                let mut list = Vec::with_capacity(n.min(64));
                for _ in 0..n {
                    let perms = need!(Ok::<_, PeerError>(c.i32()));
                    let scheme = need!(c.string("ACL scheme"));
                    let id = need!(c.string("ACL id"));
                    list.push(Acl {
                        perms,
                        id: Id { scheme, id },
                    });
                }
                Item::Acl(index, list)
            }
            Expect::Nodes => {
                let path = need!(c.string("node path"));
                if path == "/" {
                    Item::EndOfNodes
                } else {
                    let data = need!(c.buffer("node data", DATA_BYTES_MAX)).map(<[u8]>::to_vec);
                    let acl = need!(Ok::<_, PeerError>(c.i64()));
                    let Some(raw) = c.take(STAT_BYTES) else {
                        return Ok(Decoded::More);
                    };
                    let mut r = Cur { b: raw, at: 0 };
                    let mut stat = [0i64; 9];
                    for (i, v) in stat.iter_mut().enumerate() {
                        *v = if (4..7).contains(&i) {
                            r.i32().unwrap() as i64
                        } else {
                            r.i64().unwrap()
                        };
                    }
                    Item::Node {
                        path,
                        data,
                        acl,
                        stat,
                    }
                }
            }
            Expect::Signature => {
                let s = need!(c.string("signature"));
                if s != SIGNATURE {
                    return Err(bad("SNAP signature", format!("{s:?}")));
                }
                Item::Signature
            }
            Expect::Done => return Err(bad("SNAP", "bytes after the signature")),
        };
        Ok(Decoded::Item(item, c.at))
    }

    /// Takes an item [`SnapReader::decode`] returned.
    pub fn accept(&mut self, item: Item) -> Result<(), PeerError> {
        self.expect = match (std::mem::replace(&mut self.expect, Expect::Done), item) {
            (Expect::SessionCount, Item::Count(n)) => {
                counted(n, Expect::Sessions, Expect::AclCount)
            }
            (Expect::Sessions(left), Item::Session(s)) => {
                self.sessions.push(s);
                counted(left - 1, Expect::Sessions, Expect::AclCount)
            }
            (Expect::AclCount, Item::Count(n)) => counted(n, Expect::Acls, Expect::Nodes),
            (Expect::Acls(left), Item::Acl(index, list)) => {
                self.acls.insert(index, Arc::from(list));
                counted(left - 1, Expect::Acls, Expect::Nodes)
            }
            (
                Expect::Nodes,
                Item::Node {
                    path,
                    data,
                    acl,
                    stat,
                },
            ) => {
                self.add_node(path, data, acl, stat)?;
                Expect::Nodes
            }
            (Expect::Nodes, Item::EndOfNodes) => {
                if self.tree.znode_count() == 0 {
                    return Err(bad("SNAP", "no root node"));
                }
                Expect::Signature
            }
            (Expect::Signature, Item::Signature) => Expect::Done,
            (e, _) => return Err(bad("SNAP", format!("item out of order (expected {e:?})"))),
        };
        Ok(())
    }

    fn add_node(
        &mut self,
        path: String,
        data: Option<Vec<u8>>,
        acl: i64,
        stat: [i64; 9],
    ) -> Result<(), PeerError> {
        // DataTree.serialize names the root "".
        let path: Arc<str> = if path.is_empty() {
            Arc::from("/")
        } else {
            Arc::from(path)
        };
        let name = match crate::tree::path::split_parent(&path) {
            Some((_, name)) => name,
            None if &*path == "/" => "",
            None => return Err(bad("SNAP node path", format!("{path:?}"))),
        };
        let acl = if acl == OPEN_ACL_INDEX {
            self.open_acl.clone()
        } else if let Some(list) = self.acls.get(&acl) {
            list.clone()
        } else {
            // A fuzzy snapshot: ZooKeeper serializes its ACL cache first
            // and the nodes after, while it goes on applying txns, so a
            // setACL in between leaves a node naming a list the cache it
            // wrote does not hold. ZooKeeper keeps the number (addUsage
            // logs "Ignoring acl") and the replayed setACL gives the node
            // its list. Here the node holds an empty list, which no
            // client request can give a node (InvalidACL), until then.
            self.unresolved.push((path.clone(), acl));
            Arc::from(Vec::new())
        };
        let mut node = Node::with(name, data.as_deref(), acl);
        let [czxid, mzxid, ctime, mtime, version, cversion, aversion, owner, pzxid] = stat;
        if pzxid < 0 {
            return Err(bad("SNAP node", format!("{path}: pzxid {pzxid:#x}")));
        }
        node.czxid = czxid;
        node.mzxid = mzxid;
        node.ctime = ctime;
        node.mtime = mtime;
        node.version = version as i32;
        node.set_cversion(cversion as i32);
        node.aversion = aversion as i32;
        node.ephemeral_owner = owner;
        node.set_pzxid(pzxid);
        self.tree
            .restore_node(path, node)
            .map_err(|e| bad("SNAP node", e))
    }

    /// The nodes (path, ACL number) whose ACL list the snapshot's cache did
    /// not hold: each holds an empty list, which the txns after the fuzzy
    /// snapshot must replace with a setACL.
    pub fn unresolved_acls(&self) -> &[(Arc<str>, i64)] {
        &self.unresolved
    }

    /// Whether the nodes have ended ("/" read): where a snapshot file,
    /// which has no signature, has its checksum seal.
    pub fn nodes_done(&self) -> bool {
        self.expect == Expect::Signature
    }

    /// The tree and sessions of a snapshot file (no signature), as of
    /// `zxid`.
    pub fn finish_file(mut self, zxid: i64) -> (Tree, Vec<SessionEntry>) {
        assert!(self.nodes_done(), "a snapshot read to its end of nodes");
        self.tree.set_last_zxid(zxid);
        (self.tree, self.sessions)
    }

    /// The tree as of `zxid` (the SNAP packet's) and the sessions.
    pub fn finish(mut self, zxid: i64) -> (Tree, Vec<SessionEntry>) {
        assert!(self.is_done(), "a SNAP read to its signature");
        self.tree.set_last_zxid(zxid);
        (self.tree, self.sessions)
    }
}

fn counted(left: usize, more: fn(usize) -> Expect, next: Expect) -> Expect {
    if left == 0 {
        next
    } else {
        more(left)
    }
}

/// ZKDatabase.serializeSnapshot + the signature: what a leader sends
/// after SNAP. ACL lists are numbered here as ReferenceCountedACLCache
/// numbers them (from 1; the open ACL is -1).
pub fn encode(tree: &Tree, sessions: &[SessionEntry], out: &mut Vec<u8>) {
    encode_chunked(tree, sessions, usize::MAX, |chunk| {
        out.extend_from_slice(&chunk);
        true
    });
}

/// [`encode`] in pieces: `emit` gets each piece once it holds at least
/// `chunk_bytes` (and the rest at the end); when it returns false (the
/// receiver is gone) nothing more is encoded, and this returns false.
pub fn encode_chunked(
    tree: &Tree,
    sessions: &[SessionEntry],
    chunk_bytes: usize,
    emit: impl FnMut(Vec<u8>) -> bool,
) -> bool {
    encode_body(tree, sessions, chunk_bytes, true, emit)
}

/// What a snapshot file holds after its header, before its seal
/// (`FileSnap.serialize`): the SNAP payload without the signature.
pub fn encode_file_body(
    tree: &Tree,
    sessions: &[SessionEntry],
    chunk_bytes: usize,
    emit: impl FnMut(Vec<u8>) -> bool,
) -> bool {
    encode_body(tree, sessions, chunk_bytes, false, emit)
}

fn encode_body(
    tree: &Tree,
    sessions: &[SessionEntry],
    chunk_bytes: usize,
    signature: bool,
    mut emit: impl FnMut(Vec<u8>) -> bool,
) -> bool {
    let mut buf = Vec::new();
    let mut w = crate::proto::jute::Writer::new(&mut buf);
    w.i32(sessions.len() as i32);
    for s in sessions {
        w.i64(s.id).i32(s.timeout_ms);
    }
    let open = SnapReader::default().open_acl;
    // Lists in the order first seen, numbered from 1; the map finds a
    // list's number in one lookup (a tree with many distinct lists).
    let mut index: Vec<(Arc<[Acl]>, i64)> = Vec::new();
    let mut numbers: HashMap<Arc<[Acl]>, i64> = HashMap::new();
    let mut node_acls: Vec<i64> = Vec::with_capacity(tree.znode_count());
    tree.visit(|_, n| {
        let i = if *n.acl == *open {
            OPEN_ACL_INDEX
        } else if let Some(i) = numbers.get(&n.acl) {
            *i
        } else {
            let i = index.len() as i64 + 1;
            index.push((n.acl.clone(), i));
            numbers.insert(n.acl.clone(), i);
            i
        };
        node_acls.push(i);
    });
    w.i32(index.len() as i32);
    for (acl, i) in &index {
        w.i64(*i);
        crate::proto::encode_acls(&mut w, acl);
    }
    let mut k = 0;
    let mut open_end = true;
    tree.visit(|p, n| {
        if !open_end {
            return;
        }
        let mut w = crate::proto::jute::Writer::new(&mut buf);
        w.string(if p == "/" { "" } else { p })
            .opt_buffer(n.data())
            .i64(node_acls[k]);
        w.i64(n.czxid)
            .i64(n.mzxid)
            .i64(n.ctime)
            .i64(n.mtime)
            .i32(n.version)
            .i32(n.cversion())
            .i32(n.aversion)
            .i64(n.ephemeral_owner)
            .i64(n.pzxid());
        k += 1;
        if buf.len() >= chunk_bytes {
            open_end = emit(std::mem::take(&mut buf));
        }
    });
    if !open_end {
        return false;
    }
    let mut w = crate::proto::jute::Writer::new(&mut buf);
    w.string("/");
    if signature {
        w.string(SIGNATURE);
    }
    emit(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `bytes` to a reader `chunk` bytes at a time, as a socket would.
    fn read_all(bytes: &[u8], chunk: usize) -> Result<(Tree, Vec<SessionEntry>), PeerError> {
        let mut r = SnapReader::default();
        let mut buf: Vec<u8> = Vec::new();
        let mut fed = 0;
        while !r.is_done() {
            match r.decode(&buf)? {
                Decoded::Item(item, used) => {
                    buf.drain(..used);
                    r.accept(item)?;
                }
                Decoded::More => {
                    if fed == bytes.len() {
                        return Err(bad("test", "stream ended"));
                    }
                    let end = (fed + chunk).min(bytes.len());
                    buf.extend_from_slice(&bytes[fed..end]);
                    fed = end;
                }
            }
        }
        assert_eq!(fed, bytes.len());
        assert!(buf.is_empty());
        Ok(r.finish(7))
    }

    fn sample_tree() -> Tree {
        use crate::tree::{Txn, TxnOp};
        let mut t = Tree::new();
        let secret: Arc<[Acl]> = Arc::from(vec![Acl {
            perms: 1,
            id: Id {
                scheme: "digest".into(),
                id: "u:x".into(),
            },
        }]);
        for (i, (path, acl)) in [("/a", None), ("/a/b", Some(secret.clone())), ("/c", None)]
            .into_iter()
            .enumerate()
        {
            t.apply(&Txn {
                zxid: i as i64 + 1,
                session_id: 5,
                cxid: i as i32,
                time_ms: 1000,
                op: TxnOp::Create {
                    path: path.into(),
                    data: Some(bytes::Bytes::from(vec![i as u8; 3])),
                    acl: acl.unwrap_or_else(|| t.get("/").unwrap().acl.clone()),
                    ephemeral_owner: 0,
                    parent_cversion: 1,
                    create2: false,
                },
            });
        }
        t
    }

    #[test]
    fn a_tree_round_trips_in_any_chunking() {
        let t = sample_tree();
        let sessions = [SessionEntry {
            id: 5,
            timeout_ms: 4000,
        }];
        let mut bytes = Vec::new();
        encode(&t, &sessions, &mut bytes);
        for chunk in [1, 3, 17, bytes.len()] {
            let (back, s) = read_all(&bytes, chunk).unwrap();
            assert_eq!(s, sessions);
            assert_eq!(back.znode_count(), t.znode_count());
            let mut a = Vec::new();
            let mut b = Vec::new();
            t.visit(|p, n| {
                a.push((
                    p.to_string(),
                    n.data().map(<[u8]>::to_vec),
                    n.acl.clone(),
                    n.stat(),
                ))
            });
            back.visit(|p, n| {
                b.push((
                    p.to_string(),
                    n.data().map(<[u8]>::to_vec),
                    n.acl.clone(),
                    n.stat(),
                ))
            });
            assert_eq!(a, b);
        }
    }

    /// An ACL id a client could set (about 700 KB of UTF-8), of characters
    /// beyond the BMP: over 1 MiB as jute writes it, and still read back.
    #[test]
    fn a_long_acl_id_beyond_the_bmp_round_trips() {
        use crate::tree::{Txn, TxnOp};
        let mut t = Tree::new();
        let id = format!("{}:x", "\u{1f600}".repeat(175_000));
        let acl: Arc<[Acl]> = Arc::from(vec![Acl {
            perms: 31,
            id: Id {
                scheme: "digest".into(),
                id: id.clone(),
            },
        }]);
        t.apply(&Txn {
            zxid: 1,
            session_id: 5,
            cxid: 1,
            time_ms: 1000,
            op: TxnOp::Create {
                path: "/n".into(),
                data: None,
                acl,
                ephemeral_owner: 0,
                parent_cversion: 1,
                create2: false,
            },
        });
        let mut bytes = Vec::new();
        encode(&t, &[], &mut bytes);
        assert!(bytes.len() > 1 << 20, "{} bytes", bytes.len());
        let (back, _) = read_all(&bytes, 64 << 10).unwrap();
        assert_eq!(back.get("/n").unwrap().acl[0].id.id, id);
    }

    #[test]
    fn chunked_encoding_is_the_same_bytes_and_stops_when_told() {
        let t = sample_tree();
        let sessions = [SessionEntry {
            id: 5,
            timeout_ms: 4000,
        }];
        let mut whole = Vec::new();
        encode(&t, &sessions, &mut whole);
        for chunk_bytes in [1, 40, 100, usize::MAX] {
            let mut pieces: Vec<Vec<u8>> = Vec::new();
            assert!(encode_chunked(&t, &sessions, chunk_bytes, |c| {
                pieces.push(c);
                true
            }));
            assert_eq!(pieces.concat(), whole, "chunks of {chunk_bytes}");
            if chunk_bytes == 1 {
                // One piece per node (4 with the root) and the end.
                assert_eq!(pieces.len(), t.znode_count() + 1);
            }
        }
        let mut calls = 0;
        assert!(!encode_chunked(&t, &sessions, 1, |_| {
            calls += 1;
            false
        }));
        assert_eq!(calls, 1, "nothing is encoded for a receiver that is gone");
    }

    #[test]
    fn bad_streams_are_refused_not_panicked_on() {
        let t = sample_tree();
        let mut bytes = Vec::new();
        encode(&t, &[], &mut bytes);
        // Wrong signature.
        let mut wrong = bytes.clone();
        let n = wrong.len();
        wrong[n - 1] ^= 1;
        assert!(read_all(&wrong, 5).is_err());
        // A session count over the bound.
        assert!(read_all(&[0x7f, 0xff, 0xff, 0xff], 4).is_err());
        // Truncated: asks for more, never an item.
        assert!(read_all(&bytes[..bytes.len() - 3], 4).is_err());
        // Garbage never panics.
        for seed in 0..200u32 {
            let g: Vec<u8> = (0..64u32)
                .map(|i| ((i * 7919 + seed * 104729) % 251) as u8)
                .collect();
            let _ = read_all(&g, 7);
        }
    }

    /// A node naming an ACL list the cache does not hold (a setACL during
    /// a fuzzy snapshot) is kept with an empty list and reported.
    #[test]
    fn an_acl_number_missing_from_the_cache_is_kept_and_reported() {
        let mut b = Vec::new();
        let mut w = crate::proto::jute::Writer::new(&mut b);
        w.i32(0).i32(0); // no sessions, an empty ACL cache
        let stat = |w: &mut crate::proto::jute::Writer| {
            w.i64(1)
                .i64(1)
                .i64(0)
                .i64(0)
                .i32(0)
                .i32(0)
                .i32(0)
                .i64(0)
                .i64(1);
        };
        w.string("").null_buffer().i64(OPEN_ACL_INDEX);
        stat(&mut w);
        w.string("/a").buffer(b"x").i64(3);
        stat(&mut w);
        w.string("/").string(SIGNATURE);
        let mut r = SnapReader::default();
        let mut at = 0;
        while !r.is_done() {
            match r.decode(&b[at..]).unwrap() {
                Decoded::Item(item, n) => {
                    at += n;
                    r.accept(item).unwrap();
                }
                Decoded::More => panic!("whole stream given"),
            }
        }
        assert_eq!(r.unresolved_acls(), &[(Arc::from("/a"), 3)]);
        let (t, _) = r.finish(1);
        assert!(t.get("/a").unwrap().acl.is_empty());
    }
}
