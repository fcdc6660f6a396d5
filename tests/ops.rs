//! Every client operation through a real client library (`zookeeper-client`),
//! plus raw-protocol checks for what that library cannot express
//! (checkWatches/removeWatches, multi failure encoding, null data).
//!
//! Every expectation here was observed on Apache ZooKeeper 3.8
//! (`RK_TEST_TARGET=zookeeper`); ringkeeper must behave the same way.

mod common;

use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{start_target, Server};
use zk::{
    Acl, Acls, AuthId, AuthUser, Client, CreateMode, CreateOptions, MultiReadResult,
    MultiWriteError, MultiWriteResult, Permission, Stat,
};
use zookeeper_client as zk;

use common::raw::*;

const TEST_LIMIT: Duration = Duration::from_secs(60);

/// Bounds a whole test body in time.
async fn bounded<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(TEST_LIMIT, f)
        .await
        .expect("test did not finish in time")
}

async fn connect(server: &Server) -> Client {
    Client::connector()
        .with_session_timeout(Duration::from_secs(30))
        .connect(&server.addr())
        .await
        .expect("connect")
}

fn persistent() -> CreateOptions<'static> {
    CreateMode::Persistent.with_acls(Acls::anyone_all())
}

fn mode(m: CreateMode) -> CreateOptions<'static> {
    m.with_acls(Acls::anyone_all())
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn assert_fresh_stat(stat: &Stat, data_len: usize, owner: i64) {
    assert!(!stat.is_invalid(), "{stat:?}");
    assert!(stat.czxid > 0, "{stat:?}");
    assert_eq!(stat.mzxid, stat.czxid, "{stat:?}");
    assert_eq!(stat.pzxid, stat.czxid, "{stat:?}");
    assert_eq!(stat.ctime, stat.mtime, "{stat:?}");
    assert!(
        (stat.ctime - now_ms()).abs() < 60_000,
        "ctime is wall-clock ms: {stat:?}"
    );
    assert_eq!(
        (stat.version, stat.cversion, stat.aversion),
        (0, 0, 0),
        "{stat:?}"
    );
    assert_eq!(stat.ephemeral_owner, owner, "{stat:?}");
    assert_eq!(stat.data_length, data_len as i32, "{stat:?}");
    assert_eq!(stat.num_children, 0, "{stat:?}");
}

#[tokio::test]
async fn create_get_exists() {
    let server = start_target("");
    bounded(async {
        let zk = connect(&server).await;

        // create2 (the library's default create).
        let (stat, seq) = zk.create("/a", b"hello", &persistent()).await.unwrap();
        assert_eq!(seq.into_i64(), -1);
        assert_fresh_stat(&stat, 5, 0);
        let (data, got) = zk.get_data("/a").await.unwrap();
        assert_eq!(data, b"hello");
        assert_eq!(got, stat);
        assert_eq!(zk.check_stat("/a").await.unwrap(), Some(stat));
        assert_eq!(zk.check_stat("/nope").await.unwrap(), None);
        assert_eq!(zk.get_data("/nope").await, Err(zk::Error::NoNode));

        // Empty data.
        let (stat, _) = zk.create("/empty", b"", &persistent()).await.unwrap();
        assert_fresh_stat(&stat, 0, 0);
        assert_eq!(zk.get_data("/empty").await.unwrap().0, b"");

        // Every write takes the next zxid.
        let (s1, _) = zk.create("/z1", b"", &persistent()).await.unwrap();
        let (s2, _) = zk.create("/z2", b"", &persistent()).await.unwrap();
        assert_eq!(s2.czxid, s1.czxid + 1);

        // The parent's child bookkeeping.
        let (children, root) = zk.get_children("/").await.unwrap();
        assert_eq!(
            sorted(children),
            vec!["a", "empty", "z1", "z2", "zookeeper"]
        );
        assert_eq!(root.num_children, 5);
        assert_eq!(root.pzxid, s2.czxid);
        // cversion = 2 * creates - children, and the built-in /zookeeper
        // was never created: 2 * 4 - 5.
        assert_eq!(root.cversion, 3);

        // Errors.
        assert_eq!(
            zk.create("/a", b"", &persistent()).await,
            Err(zk::Error::NodeExists)
        );
        assert_eq!(
            zk.create("/missing/child", b"", &persistent()).await,
            Err(zk::Error::NoNode)
        );

        // Ephemerals carry the owner and cannot have children.
        let (stat, _) = zk
            .create("/eph", b"e", &mode(CreateMode::Ephemeral))
            .await
            .unwrap();
        assert_fresh_stat(&stat, 1, zk.session_id().0);
        assert_eq!(
            zk.create("/eph/c", b"", &persistent()).await,
            Err(zk::Error::NoChildrenForEphemerals)
        );
        assert_eq!(
            zk.create("/eph/s-", b"", &mode(CreateMode::EphemeralSequential))
                .await,
            Err(zk::Error::NoChildrenForEphemerals)
        );
    })
    .await;
}

#[tokio::test]
async fn create_v1_opcode_returns_path_only() {
    let server = start_target("");
    bounded(async {
        // Claiming an old server makes the library send opcode 1 (create)
        // instead of 15 (create2): the reply carries only the path.
        let zk = Client::connector()
            .with_server_version(3, 4, 0)
            .connect(&server.addr())
            .await
            .unwrap();
        let (stat, _) = zk.create("/v1", b"x", &persistent()).await.unwrap();
        assert!(stat.is_invalid());
        let (stat, seq) = zk
            .create("/v1/s-", b"", &mode(CreateMode::PersistentSequential))
            .await
            .unwrap();
        assert!(stat.is_invalid());
        assert_eq!(seq.into_i64(), 0);
        assert_eq!(zk.get_data("/v1").await.unwrap().0, b"x");
        assert_eq!(zk.list_children("/v1").await.unwrap(), vec!["s-0000000000"]);
    })
    .await;
}

#[tokio::test]
async fn sequential_names_come_from_the_parent_create_count() {
    let server = start_target("");
    bounded(async {
        let zk = connect(&server).await;
        zk.create("/seq", b"", &persistent()).await.unwrap();
        zk.create("/seq/x", b"", &persistent()).await.unwrap();
        let (_, n1) = zk
            .create("/seq/n-", b"", &mode(CreateMode::PersistentSequential))
            .await
            .unwrap();
        assert_eq!(n1.into_i64(), 1);
        assert_eq!(n1.to_string(), "0000000001");
        let (_, n2) = zk
            .create("/seq/n-", b"", &mode(CreateMode::EphemeralSequential))
            .await
            .unwrap();
        assert_eq!(n2.into_i64(), 2);

        // A delete bumps the client-visible cversion but not the sequence
        // counter: ZooKeeper stores the number of creates and reports
        // cversion = 2 * creates - children.
        zk.delete("/seq/x", None).await.unwrap();
        let (_, stat) = zk.get_children("/seq").await.unwrap();
        assert_eq!(stat.cversion, 4, "3 creates + 1 delete");
        assert_eq!(stat.num_children, 2);
        let (_, n3) = zk
            .create("/seq/m-", b"", &mode(CreateMode::PersistentSequential))
            .await
            .unwrap();
        assert_eq!(n3.into_i64(), 3, "sequence = number of creates so far");
        let (_, stat) = zk.get_children("/seq").await.unwrap();
        assert_eq!(stat.cversion, 5);

        assert_eq!(
            sorted(zk.list_children("/seq").await.unwrap()),
            vec!["m-0000000003", "n-0000000001", "n-0000000002"]
        );
        // The sequential name is not checked for collisions beforehand: if
        // it exists, the create fails and the counter does not move.
        zk.create("/seq2", b"", &persistent()).await.unwrap();
        zk.create("/seq2/p0000000001", b"", &persistent())
            .await
            .unwrap();
        for _ in 0..2 {
            assert_eq!(
                zk.create("/seq2/p", b"", &mode(CreateMode::PersistentSequential))
                    .await,
                Err(zk::Error::NodeExists)
            );
        }
        zk.create("/seq2/other", b"", &persistent()).await.unwrap();
        let (_, s) = zk
            .create("/seq2/p", b"", &mode(CreateMode::PersistentSequential))
            .await
            .unwrap();
        assert_eq!(s.into_i64(), 2);
    })
    .await;
}

#[tokio::test]
async fn containers_and_ttl_disabled() {
    let server = start_target("");
    bounded(async {
        let zk = connect(&server).await;
        let (stat, _) = zk
            .create("/ct", b"c", &mode(CreateMode::Container))
            .await
            .unwrap();
        // Clients see ephemeralOwner 0 for containers.
        assert_fresh_stat(&stat, 1, 0);
        zk.create("/ct/child", b"", &persistent()).await.unwrap();
        assert_eq!(zk.list_children("/ct").await.unwrap(), vec!["child"]);

        // createTTL without extendedTypesEnabled: -6, and the session lives on.
        let ttl = persistent().with_ttl(Duration::from_secs(10));
        assert_eq!(
            zk.create("/ttl", b"", &ttl).await,
            Err(zk::Error::Unimplemented)
        );
        let ttl_seq = mode(CreateMode::PersistentSequential).with_ttl(Duration::from_secs(10));
        assert_eq!(
            zk.create("/ttl-", b"", &ttl_seq).await,
            Err(zk::Error::Unimplemented)
        );
        assert_eq!(zk.check_stat("/ttl").await.unwrap(), None);
        // A TTL create inside multi fails the same way.
        let mut w = zk.new_multi_writer();
        w.add_create("/ttl-m", b"", &ttl).unwrap();
        match w.commit().await {
            Err(MultiWriteError::OperationFailed { index: 0, source }) => {
                assert_eq!(source, zk::Error::Unimplemented)
            }
            other => panic!("{other:?}"),
        }
    })
    .await;
}

#[tokio::test]
async fn ttl_nodes_with_extended_types() {
    let server = start_target("extendedTypesEnabled=true");
    bounded(async {
        let zk = connect(&server).await;
        let ttl = persistent().with_ttl(Duration::from_secs(30));
        let (stat, _) = zk.create("/ttl", b"t", &ttl).await.unwrap();
        // Clients see ephemeralOwner 0 for TTL nodes too.
        assert_fresh_stat(&stat, 1, 0);
        assert_eq!(zk.get_data("/ttl").await.unwrap().0, b"t");
        let ttl_seq = mode(CreateMode::PersistentSequential).with_ttl(Duration::from_secs(30));
        let (_, seq) = zk.create("/ttl/s-", b"", &ttl_seq).await.unwrap();
        assert_eq!(seq.into_i64(), 0);
        assert_eq!(
            zk.list_children("/ttl").await.unwrap(),
            vec!["s-0000000000"]
        );
        // Plain creates still work.
        zk.create("/plain", b"", &persistent()).await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn delete_and_set_data() {
    let server = start_target("");
    bounded(async {
        let zk = connect(&server).await;
        let (created, _) = zk.create("/d", b"v0", &persistent()).await.unwrap();

        // setData bumps version and mzxid, keeps czxid/pzxid/ctime.
        let s1 = zk.set_data("/d", b"v1-longer", None).await.unwrap();
        assert_eq!(s1.version, 1);
        assert_eq!(s1.czxid, created.czxid);
        assert_eq!(s1.pzxid, created.pzxid);
        assert_eq!(s1.ctime, created.ctime);
        assert!(s1.mzxid > created.mzxid);
        assert!(s1.mtime >= created.mtime);
        assert_eq!(s1.data_length, 9);
        assert_eq!(
            zk.get_data("/d").await.unwrap(),
            (b"v1-longer".to_vec(), s1)
        );

        assert_eq!(
            zk.set_data("/d", b"x", Some(0)).await,
            Err(zk::Error::BadVersion)
        );
        let s2 = zk.set_data("/d", b"v2", Some(1)).await.unwrap();
        assert_eq!(s2.version, 2);
        // Setting identical data is still a write.
        let s3 = zk.set_data("/d", b"v2", None).await.unwrap();
        assert_eq!(s3.version, 3);
        assert_eq!(s3.mzxid, s2.mzxid + 1);
        assert_eq!(
            zk.set_data("/nope", b"x", None).await,
            Err(zk::Error::NoNode)
        );

        // delete.
        zk.create("/d/c", b"", &persistent()).await.unwrap();
        assert_eq!(zk.delete("/d", None).await, Err(zk::Error::NotEmpty));
        assert_eq!(zk.delete("/d/c", Some(7)).await, Err(zk::Error::BadVersion));
        zk.delete("/d/c", Some(0)).await.unwrap();
        let (_, parent) = zk.get_children("/d").await.unwrap();
        assert_eq!(parent.num_children, 0);
        assert_eq!(parent.cversion, 2);
        assert!(parent.pzxid > s3.mzxid, "a delete moves the parent's pzxid");
        assert_eq!(zk.delete("/d/c", None).await, Err(zk::Error::NoNode));
        assert_eq!(zk.delete("/d", Some(2)).await, Err(zk::Error::BadVersion));
        zk.delete("/d", Some(3)).await.unwrap();
        assert_eq!(zk.check_stat("/d").await.unwrap(), None);
        assert_eq!(
            zk.delete("/nope/deeper", None).await,
            Err(zk::Error::NoNode)
        );
    })
    .await;
}

#[tokio::test]
async fn acls_and_auth() {
    let server = start_target("");
    bounded(async {
        let zk = connect(&server).await;
        let other = connect(&server).await;
        let anyone_all = vec![Acl::new(Permission::ALL, AuthId::anyone())];
        let anyone_read = vec![Acl::new(Permission::READ, AuthId::anyone())];

        let (acl, stat) = zk.get_acl("/").await.unwrap();
        assert_eq!(acl, anyone_all);
        assert_eq!(stat.aversion, 0);
        assert_eq!(zk.get_acl("/nope").await, Err(zk::Error::NoNode));

        // READ only: no write, no create under it, no setACL (needs ADMIN).
        zk.create(
            "/ro",
            b"r",
            &CreateMode::Persistent.with_acls(Acls::anyone_read()),
        )
        .await
        .unwrap();
        assert_eq!(zk.get_acl("/ro").await.unwrap().0, anyone_read);
        assert_eq!(zk.get_data("/ro").await.unwrap().0, b"r");
        assert_eq!(zk.set_data("/ro", b"x", None).await, Err(zk::Error::NoAuth));
        assert_eq!(
            zk.create("/ro/c", b"", &persistent()).await,
            Err(zk::Error::NoAuth)
        );
        assert_eq!(
            zk.set_acl("/ro", &anyone_all, None).await,
            Err(zk::Error::NoAuth)
        );

        // setACL bumps aversion and checks it (after the ADMIN permission).
        let read_admin = vec![Acl::new(
            Permission::READ | Permission::ADMIN,
            AuthId::anyone(),
        )];
        zk.create("/acl", b"", &persistent()).await.unwrap();
        let stat = zk.set_acl("/acl", &read_admin, Some(0)).await.unwrap();
        assert_eq!(stat.aversion, 1);
        assert_eq!(stat.version, 0);
        assert_eq!(
            zk.set_acl("/acl", &read_admin, Some(0)).await,
            Err(zk::Error::BadVersion)
        );
        assert_eq!(
            zk.set_acl("/nope", &anyone_read, None).await,
            Err(zk::Error::NoNode)
        );
        assert_eq!(
            zk.set_acl("/acl", &[], None).await,
            Err(zk::Error::InvalidAcl)
        );
        let (acl, stat) = zk.get_acl("/acl").await.unwrap();
        assert_eq!((acl, stat.aversion), (read_admin.clone(), 1));
        let stat = zk.set_acl("/acl", &anyone_read, Some(1)).await.unwrap();
        assert_eq!(stat.aversion, 2);
        // Without ADMIN the permission check comes before the version check.
        assert_eq!(
            zk.set_acl("/acl", &anyone_read, Some(0)).await,
            Err(zk::Error::NoAuth)
        );

        // auth:creator without any authenticated identity is invalid.
        assert_eq!(
            zk.create(
                "/c",
                b"",
                &CreateMode::Persistent.with_acls(Acls::creator_all())
            )
            .await,
            Err(zk::Error::InvalidAcl)
        );

        // digest auth, whoAmI, and creator ACLs.
        assert_eq!(
            zk.list_auth_users().await.unwrap(),
            vec![AuthUser::new("ip", "127.0.0.1")]
        );
        zk.auth("digest", b"alice:secret").await.unwrap();
        let mut users = zk.list_auth_users().await.unwrap();
        users.sort_by(|a, b| a.scheme().cmp(b.scheme()));
        assert_eq!(
            users,
            vec![
                AuthUser::new("digest", "alice"),
                AuthUser::new("ip", "127.0.0.1")
            ]
        );
        zk.create(
            "/private",
            b"p",
            &CreateMode::Persistent.with_acls(Acls::creator_all()),
        )
        .await
        .unwrap();
        let (acl, _) = zk.get_acl("/private").await.unwrap();
        assert_eq!(
            acl,
            vec![Acl::new(
                Permission::ALL,
                // base64(sha1("alice:secret"))
                AuthId::new("digest", "alice:aYXlLOpEooaV1cRAvUL1fp9Qt7E=")
            )]
        );
        assert_eq!(zk.get_data("/private").await.unwrap().0, b"p");
        // Another session has no right to read it, nor its ACL or children,
        // but exists() is not ACL-checked.
        assert_eq!(other.get_data("/private").await, Err(zk::Error::NoAuth));
        assert_eq!(other.get_acl("/private").await, Err(zk::Error::NoAuth));
        assert_eq!(
            other.list_children("/private").await,
            Err(zk::Error::NoAuth)
        );
        assert!(other.check_stat("/private").await.unwrap().is_some());
        // The same identity on another session has the rights.
        other.auth("digest", b"alice:secret").await.unwrap();
        assert_eq!(other.get_data("/private").await.unwrap().0, b"p");

        // /zookeeper/config is world-readable only.
        assert_eq!(
            zk.set_data("/zookeeper/config", b"x", None).await,
            Err(zk::Error::NoAuth)
        );
        assert_eq!(
            sorted(zk.list_children("/zookeeper").await.unwrap()),
            vec!["config", "quota"]
        );
    })
    .await;
}

#[tokio::test]
async fn auth_with_unknown_scheme_fails_the_session() {
    let server = start_target("");
    bounded(async {
        let zk = connect(&server).await;
        let mut state = zk.state_watcher();
        assert_eq!(zk.auth("nosuch", b"x").await, Err(zk::Error::AuthFailed));
        loop {
            let s = state.changed().await;
            if s.is_terminated() {
                assert_eq!(s, zk::SessionState::AuthFailed);
                break;
            }
        }
        assert_eq!(zk.get_data("/").await, Err(zk::Error::AuthFailed));
    })
    .await;
}

#[tokio::test]
async fn children_counts_ephemerals_sync() {
    let server = start_target("");
    bounded(async {
        let zk = connect(&server).await;
        let other = connect(&server).await;

        // getChildren (op 8) and getChildren2 (op 12).
        zk.create("/p", b"", &persistent()).await.unwrap();
        for c in ["b", "a", "c"] {
            zk.create(&format!("/p/{c}"), b"", &persistent())
                .await
                .unwrap();
        }
        zk.create("/p/a/deep", b"", &persistent()).await.unwrap();
        assert_eq!(
            sorted(zk.list_children("/p").await.unwrap()),
            vec!["a", "b", "c"]
        );
        let (children, stat) = zk.get_children("/p").await.unwrap();
        assert_eq!(sorted(children), vec!["a", "b", "c"]);
        assert_eq!((stat.num_children, stat.cversion), (3, 3));
        assert!(zk.list_children("/p/b").await.unwrap().is_empty());
        assert_eq!(zk.list_children("/nope").await, Err(zk::Error::NoNode));
        assert_eq!(zk.get_children("/nope").await, Err(zk::Error::NoNode));

        // getAllChildrenNumber counts all descendants.
        assert_eq!(zk.count_descendants_number("/p").await.unwrap(), 4);
        assert_eq!(zk.count_descendants_number("/p/b").await.unwrap(), 0);
        // "/" counts /zookeeper, /zookeeper/config and /zookeeper/quota too.
        assert_eq!(zk.count_descendants_number("/").await.unwrap(), 5 + 3);
        assert_eq!(
            zk.count_descendants_number("/nope").await,
            Err(zk::Error::NoNode)
        );

        // getEphemerals: this session's ephemerals whose path starts with
        // the given string (a plain string prefix, not a subtree).
        zk.create("/e", b"", &persistent()).await.unwrap();
        zk.create("/e/1", b"", &mode(CreateMode::Ephemeral))
            .await
            .unwrap();
        zk.create("/ex", b"", &mode(CreateMode::Ephemeral))
            .await
            .unwrap();
        zk.create("/p/b/e", b"", &mode(CreateMode::Ephemeral))
            .await
            .unwrap();
        other
            .create("/e/2", b"", &mode(CreateMode::Ephemeral))
            .await
            .unwrap();
        assert_eq!(
            sorted(zk.list_ephemerals("/").await.unwrap()),
            vec!["/e/1", "/ex", "/p/b/e"]
        );
        assert_eq!(
            sorted(zk.list_ephemerals("/e").await.unwrap()),
            vec!["/e/1", "/ex"]
        );
        assert_eq!(zk.list_ephemerals("/ex").await.unwrap(), vec!["/ex"]);
        assert!(zk.list_ephemerals("/nope").await.unwrap().is_empty());
        assert_eq!(other.list_ephemerals("/").await.unwrap(), vec!["/e/2"]);

        // sync answers OK, even for a missing path.
        zk.sync("/").await.unwrap();
        zk.sync("/p/a").await.unwrap();
        zk.sync("/nope").await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn multi_write() {
    let server = start_target("");
    bounded(async {
        let zk = connect(&server).await;

        let mut w = zk.new_multi_writer();
        w.add_create("/m", b"0", &persistent()).unwrap();
        w.add_set_data("/m", b"1", Some(0)).unwrap();
        w.add_check_version("/m", 1).unwrap();
        w.add_create("/m/c", b"", &persistent()).unwrap();
        w.add_create("/m/s-", b"", &mode(CreateMode::PersistentSequential))
            .unwrap();
        w.add_delete("/m/c", Some(0)).unwrap();
        let results = w.commit().await.unwrap();
        assert_eq!(results.len(), 6);
        assert!(matches!(&results[0], MultiWriteResult::Create { path, .. } if path == "/m"));
        let MultiWriteResult::SetData { stat } = &results[1] else {
            panic!("{results:?}")
        };
        assert_eq!(stat.version, 1);
        assert_eq!(results[2], MultiWriteResult::Check);
        assert!(matches!(&results[3], MultiWriteResult::Create { path, .. } if path == "/m/c"));
        // The sequence counts the create of /m/c.
        assert!(
            matches!(&results[4], MultiWriteResult::Create { path, .. } if path == "/m/s-0000000001"),
            "{results:?}"
        );
        assert_eq!(results[5], MultiWriteResult::Delete);
        // One transaction: one zxid for everything.
        let (data, stat) = zk.get_data("/m").await.unwrap();
        assert_eq!(data, b"1");
        assert_eq!(stat.czxid, stat.mzxid);
        assert_eq!(stat.pzxid, stat.czxid);
        assert_eq!(zk.list_children("/m").await.unwrap(), vec!["s-0000000001"]);

        // A failing op aborts everything; the error names the first failure.
        let mut w = zk.new_multi_writer();
        w.add_create("/f1", b"", &persistent()).unwrap();
        w.add_create("/m", b"", &persistent()).unwrap();
        w.add_set_data("/f1", b"x", None).unwrap();
        assert_eq!(
            w.commit().await,
            Err(MultiWriteError::OperationFailed {
                index: 1,
                source: zk::Error::NodeExists
            })
        );
        assert_eq!(zk.check_stat("/f1").await.unwrap(), None);

        let mut w = zk.new_multi_writer();
        w.add_check_version("/m", 99).unwrap();
        w.add_delete("/m", None).unwrap();
        assert_eq!(
            w.commit().await,
            Err(MultiWriteError::OperationFailed {
                index: 0,
                source: zk::Error::BadVersion
            })
        );
        let mut w = zk.new_multi_writer();
        w.add_set_data("/m", b"", None).unwrap();
        w.add_delete("/m", None).unwrap();
        assert_eq!(
            w.commit().await,
            Err(MultiWriteError::OperationFailed {
                index: 1,
                source: zk::Error::NotEmpty
            })
        );
        let mut w = zk.new_multi_writer();
        w.add_check_version("/nope", -1).unwrap();
        assert_eq!(
            w.commit().await,
            Err(MultiWriteError::OperationFailed {
                index: 0,
                source: zk::Error::NoNode
            })
        );
        // Nothing of the failed ones happened.
        let (data, stat) = zk.get_data("/m").await.unwrap();
        assert_eq!((data.as_slice(), stat.version), (&b"1"[..], 1));

        // Later ops see earlier ops of the same multi.
        let mut w = zk.new_multi_writer();
        w.add_delete("/m/s-0000000001", None).unwrap();
        w.add_delete("/m", Some(1)).unwrap();
        w.add_create("/m", b"again", &persistent()).unwrap();
        w.add_check_version("/m", 0).unwrap();
        assert_eq!(w.commit().await.unwrap().len(), 4);
        assert_eq!(zk.get_data("/m").await.unwrap().0, b"again");
    })
    .await;
}

#[tokio::test]
async fn multi_read() {
    let server = start_target("");
    bounded(async {
        let zk = connect(&server).await;
        let (created, _) = zk.create("/r", b"data", &persistent()).await.unwrap();
        zk.create("/r/x", b"", &persistent()).await.unwrap();
        let mut r = zk.new_multi_reader();
        r.add_get_data("/r").unwrap();
        r.add_get_children("/r").unwrap();
        r.add_get_data("/missing").unwrap();
        r.add_get_children("/missing").unwrap();
        let results = r.commit().await.unwrap();
        assert_eq!(results.len(), 4, "{results:?}");
        match &results[0] {
            MultiReadResult::Data { data, stat } => {
                assert_eq!(data, b"data");
                assert_eq!(stat.czxid, created.czxid);
                assert_eq!(stat.num_children, 1);
            }
            other => panic!("{other:?}"),
        }
        match &results[1] {
            MultiReadResult::Children { children } => assert_eq!(children, &["x"]),
            other => panic!("{other:?}"),
        }
        for res in &results[2..] {
            match res {
                MultiReadResult::Error { err } => assert_eq!(err, &zk::Error::NoNode),
                other => panic!("{other:?}"),
            }
        }
    })
    .await;
}

// ---------------------------------------------------------------------------
// Raw protocol: what the library cannot express.

fn exists_zxid(c: &mut Conn, path: &str) -> i64 {
    let (r, _) = c.call(900, OP_EXISTS, &get_body(path, false));
    r.zxid
}

#[test]
fn multi_failure_encoding() {
    let server = start_target("");
    let mut c = Conn::handshake(server.port, 30_000);
    let (r, _) = c.call(1, OP_CREATE, &create_body("/m", b"", 0));
    assert_eq!(r.err, 0);
    let before = r.zxid;

    // create ok, create existing, check: everything fails.
    let mut b = Vec::new();
    put_multi_header(&mut b, OP_CREATE, false, -1);
    b.extend_from_slice(&create_body("/m1", b"", 0));
    put_multi_header(&mut b, OP_CREATE, false, -1);
    b.extend_from_slice(&create_body("/m", b"", 0));
    put_multi_header(&mut b, OP_CHECK, false, -1);
    put_str(&mut b, "/");
    put_i32(&mut b, -1);
    put_multi_header(&mut b, -1, true, -1);
    let (r, _) = c.call(2, OP_MULTI, &b);
    // The reply header says OK; the failure is in the body.
    assert_eq!(r.err, 0);
    // A failed multi is still a transaction: it takes a zxid.
    assert_eq!(r.zxid, before + 1);
    let mut rd = Rd(&r.body);
    // Ops before the failure: ErrorResult(0); the failing op: its code;
    // ops after it: RUNTIMEINCONSISTENCY (-2). Each as type -1.
    for expected in [0, -110, -2] {
        assert_eq!((rd.i32(), rd.bool(), rd.i32()), (-1, false, expected));
        assert_eq!(rd.i32(), expected, "ErrorResult body");
    }
    assert_eq!((rd.i32(), rd.bool(), rd.i32()), (-1, true, -1));
    assert!(rd.0.is_empty());
    assert_eq!(exists_zxid(&mut c, "/m1"), before + 1);

    // A successful multi: create, check, setData, delete.
    let mut b = Vec::new();
    put_multi_header(&mut b, OP_CREATE2, false, -1);
    b.extend_from_slice(&create_body("/m2", b"", 0));
    put_multi_header(&mut b, OP_CHECK, false, -1);
    put_str(&mut b, "/m2");
    put_i32(&mut b, 0);
    put_multi_header(&mut b, OP_SET_DATA, false, -1);
    put_str(&mut b, "/m2");
    put_buf(&mut b, b"x");
    put_i32(&mut b, 0);
    put_multi_header(&mut b, OP_DELETE, false, -1);
    put_str(&mut b, "/m2");
    put_i32(&mut b, 1);
    put_multi_header(&mut b, -1, true, -1);
    let (r, _) = c.call(3, OP_MULTI, &b);
    assert_eq!((r.err, r.zxid), (0, before + 2));
    let mut rd = Rd(&r.body);
    // Create result: type 1 (3.8.0) or 15 with a stat (3.8.2+), then path.
    let (t, done, err) = (rd.i32(), rd.bool(), rd.i32());
    assert!(t == OP_CREATE || t == OP_CREATE2, "create result type {t}");
    assert_eq!((done, err), (false, 0));
    assert_eq!(rd.str(), "/m2");
    if t == OP_CREATE2 {
        rd.0 = &rd.0[STAT_LEN..];
    }
    assert_eq!((rd.i32(), rd.bool(), rd.i32()), (OP_CHECK, false, 0));
    assert_eq!((rd.i32(), rd.bool(), rd.i32()), (OP_SET_DATA, false, 0));
    let stat = &rd.0[..STAT_LEN];
    assert_eq!(Rd(&stat[8..16]).i64(), before + 2, "mzxid");
    assert_eq!(Rd(&stat[32..36]).i32(), 1, "version");
    rd.0 = &rd.0[STAT_LEN..];
    assert_eq!((rd.i32(), rd.bool(), rd.i32()), (OP_DELETE, false, 0));
    assert_eq!((rd.i32(), rd.bool(), rd.i32()), (-1, true, -1));
    assert!(rd.0.is_empty());

    // An empty multi: OK, just the end marker, and a zxid.
    let mut b = Vec::new();
    put_multi_header(&mut b, -1, true, -1);
    let (r, _) = c.call(4, OP_MULTI, &b);
    assert_eq!((r.err, r.zxid), (0, before + 3));
    assert_eq!(r.body, b);

    // multiRead: per-op results; an error is type -1 with the code in the
    // header and in the body; no zxid is taken.
    let mut b = Vec::new();
    put_multi_header(&mut b, OP_GET_DATA, false, -1);
    b.extend_from_slice(&get_body("/m", false));
    put_multi_header(&mut b, OP_GET_CHILDREN, false, -1);
    b.extend_from_slice(&get_body("/m", false));
    put_multi_header(&mut b, OP_GET_DATA, false, -1);
    b.extend_from_slice(&get_body("/nope", false));
    put_multi_header(&mut b, -1, true, -1);
    let (r, _) = c.call(5, OP_MULTI_READ, &b);
    assert_eq!((r.err, r.zxid), (0, before + 3));
    let mut rd = Rd(&r.body);
    assert_eq!((rd.i32(), rd.bool(), rd.i32()), (OP_GET_DATA, false, 0));
    assert_eq!(rd.buf(), Some(vec![]));
    rd.0 = &rd.0[STAT_LEN..];
    assert_eq!((rd.i32(), rd.bool(), rd.i32()), (OP_GET_CHILDREN, false, 0));
    assert_eq!(rd.i32(), 0, "no children");
    assert_eq!((rd.i32(), rd.bool(), rd.i32()), (-1, false, -101));
    assert_eq!(rd.i32(), -101);
    assert_eq!((rd.i32(), rd.bool(), rd.i32()), (-1, true, -1));
    assert!(rd.0.is_empty());
}

#[test]
fn check_and_remove_watches() {
    let server = start_target("");
    let mut c = Conn::handshake(server.port, 30_000);
    let (r, _) = c.call(1, OP_CREATE, &create_body("/w", b"", 0));
    assert_eq!(r.err, 0);
    let (r, _) = c.call(2, OP_GET_DATA, &get_body("/w", true));
    assert_eq!(r.err, 0);

    let mut xid = 10;
    let mut watch_op = |c: &mut Conn, op: i32, path: &str, kind: i32| {
        xid += 1;
        let mut b = Vec::new();
        put_str(&mut b, path);
        put_i32(&mut b, kind);
        let (r, events) = c.call(xid, op, &b);
        assert!(r.body.is_empty());
        assert!(events.is_empty(), "no notifications: {events:?}");
        r.err
    };
    const CHILD: i32 = 1;
    const DATA: i32 = 2;
    const ANY: i32 = 3;
    assert_eq!(watch_op(&mut c, OP_CHECK_WATCHES, "/w", DATA), 0);
    assert_eq!(watch_op(&mut c, OP_CHECK_WATCHES, "/w", ANY), 0);
    assert_eq!(
        watch_op(&mut c, OP_CHECK_WATCHES, "/w", CHILD),
        ERR_NO_WATCHER
    );
    assert_eq!(
        watch_op(&mut c, OP_CHECK_WATCHES, "/nope", DATA),
        ERR_NO_WATCHER
    );
    // An unknown watcher type is a marshalling error.
    assert_eq!(watch_op(&mut c, OP_CHECK_WATCHES, "/w", 7), ERR_MARSHALLING);
    assert_eq!(
        watch_op(&mut c, OP_REMOVE_WATCHES, "/w", CHILD),
        ERR_NO_WATCHER
    );
    assert_eq!(watch_op(&mut c, OP_REMOVE_WATCHES, "/w", DATA), 0);
    assert_eq!(
        watch_op(&mut c, OP_CHECK_WATCHES, "/w", DATA),
        ERR_NO_WATCHER
    );
    assert_eq!(
        watch_op(&mut c, OP_REMOVE_WATCHES, "/w", ANY),
        ERR_NO_WATCHER
    );
    // The removed watch does not fire (and removal sent no notification).
    let mut b = Vec::new();
    put_str(&mut b, "/w");
    put_buf(&mut b, b"x");
    put_i32(&mut b, -1);
    let (r, events) = c.call(3, OP_SET_DATA, &b);
    assert_eq!(r.err, 0);
    let (_, more) = c.call(4, OP_SYNC, &path_body("/"));
    assert!(events.is_empty() && more.is_empty(), "{events:?} {more:?}");

    // Child and exist watches.
    c.call(5, OP_GET_CHILDREN, &get_body("/w", true));
    c.call(6, OP_EXISTS, &get_body("/missing", true));
    assert_eq!(watch_op(&mut c, OP_CHECK_WATCHES, "/w", CHILD), 0);
    assert_eq!(
        watch_op(&mut c, OP_CHECK_WATCHES, "/w", DATA),
        ERR_NO_WATCHER
    );
    assert_eq!(watch_op(&mut c, OP_CHECK_WATCHES, "/missing", DATA), 0);
    assert_eq!(watch_op(&mut c, OP_REMOVE_WATCHES, "/w", ANY), 0);
    assert_eq!(
        watch_op(&mut c, OP_CHECK_WATCHES, "/w", ANY),
        ERR_NO_WATCHER
    );
    assert_eq!(watch_op(&mut c, OP_REMOVE_WATCHES, "/missing", ANY), 0);

    // Persistent watches answer to every type and go with ANY.
    let mut b = Vec::new();
    put_str(&mut b, "/w");
    put_i32(&mut b, 0);
    let (r, _) = c.call(7, OP_ADD_WATCH, &b);
    assert_eq!(r.err, 0);
    assert_eq!(r.body, [0, 0, 0, 0], "addWatch answers an ErrorResponse(0)");
    assert_eq!(watch_op(&mut c, OP_CHECK_WATCHES, "/w", ANY), 0);
    assert_eq!(watch_op(&mut c, OP_CHECK_WATCHES, "/w", DATA), 0);
    assert_eq!(watch_op(&mut c, OP_CHECK_WATCHES, "/w", CHILD), 0);
    // Persistent types are not valid watcher types for check/remove.
    assert_eq!(watch_op(&mut c, OP_CHECK_WATCHES, "/w", 4), ERR_MARSHALLING);
    assert_eq!(watch_op(&mut c, OP_REMOVE_WATCHES, "/w", ANY), 0);
    assert_eq!(
        watch_op(&mut c, OP_CHECK_WATCHES, "/w", ANY),
        ERR_NO_WATCHER
    );

    // addWatch on a missing path is fine; an unknown mode is -5.
    let mut b = Vec::new();
    put_str(&mut b, "/not/yet");
    put_i32(&mut b, 1);
    let (r, _) = c.call(8, OP_ADD_WATCH, &b);
    assert_eq!(r.err, 0);
    assert_eq!(watch_op(&mut c, OP_CHECK_WATCHES, "/not/yet", ANY), 0);
    let mut b = Vec::new();
    put_str(&mut b, "/w");
    put_i32(&mut b, 7);
    let (r, _) = c.call(9, OP_ADD_WATCH, &b);
    assert_eq!(r.err, ERR_MARSHALLING);
}

#[test]
fn raw_reads_and_null_data() {
    let server = start_target("");
    let mut c = Conn::handshake(server.port, 30_000);

    // A create with null data (-1 length) keeps null: getData answers -1.
    let mut b = Vec::new();
    put_str(&mut b, "/null");
    put_i32(&mut b, -1);
    b.extend_from_slice(&create_body("", b"", 0)[8..]);
    let (r, _) = c.call(1, OP_CREATE, &b);
    assert_eq!(r.err, 0);
    let mut rd = Rd(&r.body);
    assert_eq!(rd.str(), "/null", "create answers the path");
    let (r, _) = c.call(2, OP_GET_DATA, &get_body("/null", false));
    let mut rd = Rd(&r.body);
    assert_eq!(rd.buf(), None, "null data stays null");
    assert_eq!(Rd(&rd.0[52..56]).i32(), 0, "dataLength of null is 0");

    // exists on a missing node is -101 with an empty body.
    let (r, _) = c.call(3, OP_EXISTS, &get_body("/nope", false));
    assert_eq!((r.err, r.body.len()), (ERR_NO_NODE, 0));

    // sync answers the path it was given.
    let mut b = Vec::new();
    put_str(&mut b, "/nope");
    let (r, _) = c.call(4, OP_SYNC, &b);
    assert_eq!(r.err, 0);
    assert_eq!(Rd(&r.body).str(), "/nope");

    // whoAmI: a list of (scheme, user).
    let (r, _) = c.call(5, OP_WHO_AM_I, &[]);
    let mut rd = Rd(&r.body);
    assert_eq!(rd.i32(), 1);
    assert_eq!(
        (rd.str(), rd.str()),
        ("ip".to_string(), "127.0.0.1".to_string())
    );

    // Reads answer with the last committed zxid, writes with their own.
    let (w, _) = c.call(6, OP_CREATE, &create_body("/z", b"", 0));
    let (r, _) = c.call(7, OP_GET_DATA, &get_body("/z", false));
    assert_eq!(r.zxid, w.zxid);
    let (p, _) = c.call(-2, OP_PING, &[]);
    assert_eq!(
        (p.err, p.zxid),
        (0, w.zxid),
        "ping carries the last zxid too"
    );
}
