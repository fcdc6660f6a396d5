//! Prep: turns a write request into a txn against the tree plus every txn
//! prepped before it (ZooKeeper's PrepRequestProcessor with its outstanding
//! changes), read through [`Facts`]: either a tree that already applied
//! every prepped txn, or the committed tree with the outstanding changes
//! laid over it ([`super::outstanding`]).
//! The order of checks follows PrepRequestProcessor, because it decides
//! which error a request with several problems gets.

use std::sync::Arc;

use bytes::Bytes;

use crate::proto::codes::{
    err, op, perm, CreateMode, CONTAINER_EPHEMERAL_OWNER, MAX_TTL_MS, TTL_OWNER_MASK,
};
use crate::proto::{Acl, Request};
use crate::tree::path::{is_valid, split_parent};
use crate::tree::{NodeKind, Tree, TxnOp, CONFIG_PATH, QUOTA_PATH, ZOOKEEPER_PATH};

use super::outstanding::{Facts, NodeFacts, Scratch};

pub struct PrepContext<'a> {
    pub session_id: i64,
    pub extended_types_enabled: bool,
    /// `enforceQuota`: hard quota limits refuse creates and setData.
    pub enforce_quota: bool,
    /// The optional auth providers registered: x509 (TLS on the client
    /// port, as ZooKeeper's configureSSLAuth registers it) and sasl
    /// (authProvider.N): their ACLs are valid.
    pub providers: crate::acl::AuthProviders,
    /// The session's ids (scheme, id), its ip first: for ACL checks and
    /// for expanding the "auth" ACL scheme.
    pub ids: &'a [(String, String)],
}

/// Preps one write against `view` (the tree plus every txn prepped before
/// this one). `quota_tree` is the tree hard quotas are checked against:
/// ZooKeeper's checkQuota reads its DataTree, whatever is outstanding.
/// Errors become an `Error` txn: ZooKeeper logs failed writes too, and they
/// take a zxid. A txn that carries data (create, setData) takes it out of
/// `req` rather than sharing it: the request is kept only to answer.
pub fn prep(view: &impl Facts, quota_tree: &Tree, ctx: &PrepContext, req: &mut Request) -> TxnOp {
    prep_reading(view, quota_tree, ctx, req).0
}

/// [`prep`], and what it read of the node whose facts recording the op's
/// changes looks up first (see [`ReadBefore`]).
pub fn prep_reading(
    view: &impl Facts,
    quota_tree: &Tree,
    ctx: &PrepContext,
    req: &mut Request,
) -> (TxnOp, ReadBefore) {
    match req {
        Request::Multi(ops) => (prep_multi(view, quota_tree, ctx, ops), None),
        Request::CloseSession => (
            TxnOp::CloseSession {
                ephemerals: view.ephemerals_of(ctx.session_id),
            },
            None,
        ),
        single => prep_single(view, quota_tree, ctx, single)
            .unwrap_or_else(|code| (TxnOp::Error { code }, None)),
    }
}

/// The facts prep read, before the op, of the node that recording a single
/// op's changes starts from: the node for setData and setACL, the parent
/// for create and delete (None for anything else). Recording right after
/// prep, with nothing applied or recorded in between, would read the same
/// facts again with another walk of the tree.
pub type ReadBefore = Option<NodeFacts>;

fn prep_multi(
    view: &impl Facts,
    quota_tree: &Tree,
    ctx: &PrepContext,
    ops: &mut [Request],
) -> TxnOp {
    // Each op sees the ones before it.
    let mut scratch = Scratch::new(view);
    let mut done = Vec::with_capacity(ops.len());
    let count = ops.len();
    for (i, o) in ops.iter_mut().enumerate() {
        let res = if is_multi_op(o) {
            prep_single(&scratch, quota_tree, ctx, o).map(|(op, _)| op)
        } else {
            Err(err::BAD_ARGUMENTS)
        };
        match res {
            Ok(txn_op) => {
                scratch.record(&txn_op);
                done.push(txn_op);
            }
            // ZooKeeper's prep threw something other than a KeeperException
            // (a quota limit its StatsTrack cannot parse): the whole multi
            // is answered with that error in the reply header.
            Err(code @ err::MARSHALLING_ERROR) => return TxnOp::Error { code },
            Err(code) => {
                let mut codes = vec![0; i];
                codes.push(code);
                codes.resize(count, err::RUNTIME_INCONSISTENCY);
                return TxnOp::MultiError { codes };
            }
        }
    }
    TxnOp::Multi(done)
}

fn is_multi_op(r: &Request) -> bool {
    matches!(
        r,
        Request::Create { .. }
            | Request::Delete { .. }
            | Request::SetData { .. }
            | Request::Check { .. }
    )
}

/// `quota_tree` is the tree quota checks read. ZooKeeper's checkQuota reads
/// its DataTree, not the outstanding changes, so the ops of a multi are
/// checked against the tree as it was before the multi (and, when the core
/// preps against a committed tree plus outstanding changes, against the
/// committed tree).
fn prep_single(
    tree: &impl Facts,
    quota_tree: &Tree,
    ctx: &PrepContext,
    req: &mut Request,
) -> Result<(TxnOp, ReadBefore), i32> {
    match req {
        Request::Create {
            opcode,
            path,
            data,
            acl,
            flags,
            ttl,
        } => {
            let (txn, parent) = prep_create(tree, ctx, *opcode, path, data, acl, *flags, *ttl)?;
            if let (true, TxnOp::Create { path, data, .. }) = (ctx.enforce_quota, &txn) {
                // Last of the create checks (PrepRequestProcessor).
                let bytes = data.as_ref().map_or(0, |d| d.len() as i64);
                quota_tree.check_quota(path, bytes, 1)?;
            }
            Ok((txn, Some(parent)))
        }
        Request::Delete { path, version } => {
            if path.contains('\0') || is_special(path) {
                return Err(err::BAD_ARGUMENTS);
            }
            let (parent, _) = split_parent(path).ok_or(err::BAD_ARGUMENTS)?;
            let parent = tree.node(parent).ok_or(err::NO_NODE)?;
            check_acl(&parent.acl, ctx, perm::DELETE)?;
            let node = tree.node(path).ok_or(err::NO_NODE)?;
            check_version(node.version, *version)?;
            if node.children != 0 {
                return Err(err::NOT_EMPTY);
            }
            Ok((
                TxnOp::Delete {
                    path: Arc::from(path.as_str()),
                },
                Some(parent),
            ))
        }
        Request::SetData {
            path,
            data,
            version,
        } => {
            validate_path(path)?;
            let node = tree.node(path).ok_or(err::NO_NODE)?;
            check_acl(&node.acl, ctx, perm::WRITE)?;
            if ctx.enforce_quota {
                let new_bytes = data.as_ref().map_or(0, |d| d.len() as i64);
                quota_tree.check_quota(path, new_bytes - node.data_len as i64, 0)?;
            }
            check_version(node.version, *version)?;
            let op = TxnOp::SetData {
                path: Arc::from(path.as_str()),
                data: data.take(),
                version: node.version + 1,
            };
            Ok((op, Some(node)))
        }
        Request::SetAcl { path, acl, version } => {
            validate_path(path)?;
            let acl = fixup_acl(acl, ctx.ids, ctx.providers)?;
            let node = tree.node(path).ok_or(err::NO_NODE)?;
            check_acl(&node.acl, ctx, perm::ADMIN)?;
            check_version(node.aversion, *version)?;
            let op = TxnOp::SetAcl {
                path: Arc::from(path.as_str()),
                acl,
                aversion: node.aversion + 1,
            };
            Ok((op, Some(node)))
        }
        Request::Check { path, version } => {
            validate_path(path)?;
            let node = tree.node(path).ok_or(err::NO_NODE)?;
            check_acl(&node.acl, ctx, perm::READ)?;
            check_version(node.version, *version)?;
            let op = TxnOp::Check {
                path: Arc::from(path.as_str()),
            };
            Ok((op, None))
        }
        // Standalone, reconfigEnabled=false: ZooKeeper refuses in prep.
        Request::Reconfig { .. } => Err(err::RECONFIG_DISABLED),
        _ => Err(err::UNIMPLEMENTED),
    }
}

#[allow(clippy::too_many_arguments)]
fn prep_create(
    tree: &impl Facts,
    ctx: &PrepContext,
    opcode: i32,
    path: &str,
    data: &mut Option<Bytes>,
    acl: &[Acl],
    flags: i32,
    ttl: i64,
) -> Result<(TxnOp, NodeFacts), i32> {
    let mode = CreateMode::from_flags(flags).ok_or(err::BAD_ARGUMENTS)?;
    if mode.ttl && !ctx.extended_types_enabled {
        return Err(err::UNIMPLEMENTED);
    }
    let ttl_ok = if mode.ttl {
        ttl > 0 && ttl <= MAX_TTL_MS
    } else {
        ttl < 0
    };
    if !ttl_ok {
        return Err(err::BAD_ARGUMENTS);
    }
    if path.contains('\0') {
        return Err(err::BAD_ARGUMENTS);
    }
    let (parent_path, _) = split_parent(path).ok_or(err::BAD_ARGUMENTS)?;
    let acl = fixup_acl(acl, ctx.ids, ctx.providers)?;
    let parent = tree.node(parent_path).ok_or(err::NO_NODE)?;
    check_acl(&parent.acl, ctx, perm::CREATE)?;
    let final_path: Arc<str> = if mode.sequential {
        Arc::from(format!("{path}{:010}", parent.cversion))
    } else {
        Arc::from(path)
    };
    validate_path(&final_path)?;
    if tree.node(&final_path).is_some() {
        return Err(err::NODE_EXISTS);
    }
    if matches!(parent.kind(), NodeKind::Ephemeral(_)) {
        return Err(err::NO_CHILDREN_FOR_EPHEMERALS);
    }
    // The txn type follows the opcode, not the flags (PrepRequestProcessor):
    // create2 with container flags makes a plain persistent node, and
    // createContainer with persistent flags makes a container.
    let ephemeral_owner = if opcode == op::CREATE_CONTAINER {
        CONTAINER_EPHEMERAL_OWNER
    } else if opcode == op::CREATE_TTL {
        TTL_OWNER_MASK | ttl.max(0)
    } else if mode.ephemeral {
        ctx.session_id
    } else {
        0
    };
    let op = TxnOp::Create {
        path: final_path,
        data: data.take(),
        acl,
        ephemeral_owner,
        parent_cversion: parent.cversion + 1,
        create2: opcode == op::CREATE2,
    };
    Ok((op, parent))
}

fn check_acl(acl: &[Acl], ctx: &PrepContext, wanted: i32) -> Result<(), i32> {
    if crate::acl::allowed(acl, ctx.ids, wanted) {
        Ok(())
    } else {
        Err(err::NO_AUTH)
    }
}

fn validate_path(path: &str) -> Result<(), i32> {
    if is_valid(path) {
        Ok(())
    } else {
        Err(err::BAD_ARGUMENTS)
    }
}

fn check_version(current: i32, expected: i32) -> Result<(), i32> {
    if expected != -1 && expected != current {
        Err(err::BAD_VERSION)
    } else {
        Ok(())
    }
}

fn is_special(path: &str) -> bool {
    matches!(path, "/" | ZOOKEEPER_PATH | QUOTA_PATH | CONFIG_PATH)
}

/// PrepRequestProcessor.fixupACL: drops duplicates, expands "auth" to the
/// session's authenticated ids, refuses what no provider accepts.
pub fn fixup_acl(
    acls: &[Acl],
    auth_ids: &[(String, String)],
    providers: crate::acl::AuthProviders,
) -> Result<Arc<[Acl]>, i32> {
    let mut unique: Vec<&Acl> = Vec::with_capacity(acls.len());
    for a in acls {
        if !unique.contains(&a) {
            unique.push(a);
        }
    }
    if unique.is_empty() {
        return Err(err::INVALID_ACL);
    }
    let mut out = Vec::with_capacity(unique.len());
    for a in unique {
        match a.id.scheme.as_str() {
            "world" if a.id.id == "anyone" => out.push(a.clone()),
            "auth" => {
                let mut any = false;
                // Only ids of providers that count as authenticated expand
                // "auth": digest, x509 and sasl. Not ip, and not super (no
                // provider).
                for (scheme, id) in auth_ids.iter().filter(|(s, _)| {
                    s == "digest"
                        || (providers.x509 && s == "x509")
                        || (providers.sasl && s == "sasl")
                }) {
                    any = true;
                    out.push(Acl {
                        perms: a.perms,
                        id: crate::proto::Id {
                            scheme: scheme.clone(),
                            id: id.clone(),
                        },
                    });
                }
                if !any {
                    return Err(err::INVALID_ACL);
                }
            }
            "digest" if crate::java_compat::split_len(&a.id.id, ':') == 2 => out.push(a.clone()),
            "ip" if crate::acl::ip_acl_valid(&a.id.id) => out.push(a.clone()),
            "x509" if providers.x509 && crate::tls::x509::is_valid_dn(&a.id.id) => {
                out.push(a.clone())
            }
            "sasl" if providers.sasl && crate::sasl::is_valid_id(&a.id.id) => out.push(a.clone()),
            _ => return Err(err::INVALID_ACL),
        }
    }
    Ok(Arc::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> PrepContext<'static> {
        PrepContext {
            session_id: 7,
            extended_types_enabled: false,
            enforce_quota: false,
            providers: Default::default(),
            ids: &[],
        }
    }

    fn create(path: &str, flags: i32) -> Request {
        Request::Create {
            opcode: op::CREATE,
            path: path.into(),
            data: Some(Bytes::new()),
            acl: vec![Acl::world_all()],
            flags,
            ttl: -1,
        }
    }

    #[test]
    fn create_errors_follow_zookeeper_order() {
        let t = Tree::new();
        let code = |r: &Request| match prep(&t, &t, &ctx(), &mut r.clone()) {
            TxnOp::Error { code } => code,
            _ => 0,
        };
        assert_eq!(code(&create("/a", 0)), 0);
        assert_eq!(code(&create("/x/y/", 0)), err::NO_NODE);
        assert_eq!(code(&create("/zookeeper/", 0)), err::BAD_ARGUMENTS);
        assert_eq!(code(&create("a", 0)), err::BAD_ARGUMENTS);
        assert_eq!(code(&create("/", 0)), err::NODE_EXISTS);
        assert_eq!(code(&create("/a", 9)), err::BAD_ARGUMENTS);
        assert_eq!(code(&create("/a", 5)), err::UNIMPLEMENTED);
        let mut bad_acl = create("/a", 0);
        if let Request::Create { acl, .. } = &mut bad_acl {
            acl.clear();
        }
        assert_eq!(code(&bad_acl), err::INVALID_ACL);
    }

    /// The txn says whether the request was create2 (ZooKeeper's txn
    /// type 15), whatever the flags; containers and TTL nodes are their
    /// own types.
    #[test]
    fn create2_requests_make_create2_txns() {
        let t = Tree::new();
        let ctx = PrepContext {
            extended_types_enabled: true,
            ..ctx()
        };
        let create2_of = |opcode: i32, flags: i32, ttl: i64| {
            let mut r = create("/a", flags);
            if let Request::Create {
                opcode: o, ttl: t, ..
            } = &mut r
            {
                *o = opcode;
                *t = ttl;
            }
            match prep(&t, &t, &ctx, &mut r) {
                TxnOp::Create { create2, .. } => create2,
                other => panic!("{other:?}"),
            }
        };
        assert!(!create2_of(op::CREATE, 0, -1));
        assert!(create2_of(op::CREATE2, 0, -1));
        assert!(create2_of(op::CREATE2, 1, -1));
        assert!(create2_of(op::CREATE2, 4, -1));
        assert!(!create2_of(op::CREATE_CONTAINER, 4, -1));
        assert!(!create2_of(op::CREATE_TTL, 5, 1000));
    }

    #[test]
    fn failed_multi_encodes_like_zookeeper() {
        let t = Tree::new();
        let m = Request::Multi(vec![
            create("/a", 0),
            create("/a/b", 0),
            create("/a", 0),
            create("/c", 0),
        ]);
        assert_eq!(
            prep(&t, &t, &ctx(), &mut m.clone()),
            TxnOp::MultiError {
                codes: vec![0, 0, err::NODE_EXISTS, err::RUNTIME_INCONSISTENCY]
            }
        );
    }
}
