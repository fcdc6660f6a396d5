//! ACLs against Apache ZooKeeper 3.8.
//!
//! `acl_matrix` generates every combination of
//! * an op: create, create2, createContainer, delete, exists, getData,
//!   setData, getACL, setACL, getChildren, getChildren2,
//!   getAllChildrenNumber, sync, check in a multi, multi, multiRead,
//!   addWatch, removeWatches, getEphemerals;
//! * the permissions of the node the op acts on (the parent, for create and
//!   delete): none, each bit alone, READ|ADMIN, ALL;
//! * an identity: the ACL's scheme and id, who set it, and the session that
//!   runs the op (world, auth after addauth digest, digest with a matching,
//!   another and no user, ip 127.0.0.1 / 127.0.0.0/8 / 10.0.0.1 from
//!   127.0.0.1 and from 127.0.0.2, the super user of superDigest, ...);
//!
//! runs each row on both servers and compares the rows' transcripts (result
//! codes, data, stats and ACLs, normalized), printing every row that
//! differs. The scripted `acl_cases` cover INVALIDACL, duplicate entries,
//! "auth" expansion, setACL's aversion check, getACL's redaction of digests
//! for a session without ADMIN, the super user and whoAmI after several
//! addauths. See differential.rs for the transcript conventions.

mod common;
mod diff;

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use base64::Engine;
use diff::ops::{self, mode, Op, Runner};
use diff::wire::{op, Acl};
use diff::{diff_cases, other_flavor, side_name, start_pair, Case, DIFF_CFG};
use ops::{children, children2, create, create_v1, delete, exists, get, set, sync};

/// super:test, ZooKeeper's documented example.
const SUPER_DIGEST: &str = "super:D/InIHSb7yEEbrWz8b9l71RjZJU=";

fn cfg() -> String {
    format!("{DIFF_CFG}DigestAuthenticationProvider.superDigest={SUPER_DIGEST}\n")
}

/// The digest ACL id of "user:password", computed here independently of
/// the servers: user:base64(sha1(user:password)).
fn digest(user_password: &str) -> String {
    let user = user_password.split(':').next().unwrap();
    let hash = sha1_smol::Sha1::from(user_password.as_bytes())
        .digest()
        .bytes();
    format!(
        "{user}:{}",
        base64::engine::general_purpose::STANDARD.encode(hash)
    )
}

fn add_auth(scheme: &str, auth: &[u8]) -> Op {
    Op::AddAuth {
        scheme: scheme.into(),
        auth: auth.to_vec(),
    }
}

fn with_acl(opcode: i32, path: &str, acl: Vec<Acl>) -> Op {
    Op::Create {
        opcode,
        path: path.into(),
        data: b"x".to_vec(),
        acl,
        flags: if opcode == op::CREATE_CONTAINER {
            mode::CONTAINER
        } else {
            mode::PERSISTENT
        },
        ttl: 0,
    }
}

fn set_acl(path: &str, acl: Vec<Acl>, version: i32) -> Op {
    Op::SetAcl {
        path: path.into(),
        acl,
        version,
    }
}

fn get_acl(path: &str) -> Op {
    Op::GetAcl { path: path.into() }
}

// ------------------------------------------------------------------ matrix

/// Sessions of the matrix: SU is the super user (addauth super:test), W has
/// only its ip, AL is alice, BO is bob, AB is both, IP2 connects from
/// 127.0.0.2.
fn open_sessions(r: &mut Runner) {
    for s in ["SU", "W", "AL", "BO", "AB"] {
        r.open(s);
    }
    r.open_from("IP2", Ipv4Addr::new(127, 0, 0, 2));
    r.run("SU", &add_auth("digest", b"super:test"));
    r.run("AL", &add_auth("digest", b"alice:pw"));
    r.run("BO", &add_auth("digest", b"bob:pw"));
    r.run("AB", &add_auth("digest", b"alice:pw"));
    r.run("AB", &add_auth("digest", b"bob:pw"));
    for s in ["SU", "W", "AL", "BO", "AB", "IP2"] {
        r.run(s, &Op::WhoAmI);
    }
}

struct Identity {
    name: &'static str,
    /// The node's ACL for a permission set.
    acl: fn(i32) -> Vec<Acl>,
    /// Who sets the ACL (it matters for the "auth" scheme).
    setter: &'static str,
    /// Who runs the op.
    actor: &'static str,
}

fn alice(p: i32) -> Vec<Acl> {
    vec![Acl::new(p, "digest", &digest("alice:pw"))]
}

const IDENTITIES: &[Identity] = &[
    Identity {
        name: "world",
        acl: |p| vec![Acl::new(p, "world", "anyone")],
        setter: "SU",
        actor: "W",
    },
    Identity {
        name: "auth-self",
        acl: |p| vec![Acl::new(p, "auth", "")],
        setter: "AL",
        actor: "AL",
    },
    Identity {
        name: "auth-other",
        acl: |p| vec![Acl::new(p, "auth", "")],
        setter: "AL",
        actor: "BO",
    },
    Identity {
        name: "auth-two-ids",
        acl: |p| vec![Acl::new(p, "auth", "")],
        setter: "AB",
        actor: "BO",
    },
    Identity {
        name: "digest-match",
        acl: alice,
        setter: "SU",
        actor: "AL",
    },
    Identity {
        name: "digest-other-user",
        acl: alice,
        setter: "SU",
        actor: "BO",
    },
    Identity {
        name: "digest-second-id",
        acl: |p| vec![Acl::new(p, "digest", &digest("bob:pw"))],
        setter: "SU",
        actor: "AB",
    },
    Identity {
        name: "digest-no-auth",
        acl: alice,
        setter: "SU",
        actor: "W",
    },
    Identity {
        name: "digest-wrong-password",
        acl: |p| vec![Acl::new(p, "digest", &digest("alice:other"))],
        setter: "SU",
        actor: "AL",
    },
    Identity {
        name: "ip-exact",
        acl: |p| vec![Acl::new(p, "ip", "127.0.0.1")],
        setter: "SU",
        actor: "W",
    },
    Identity {
        name: "ip-cidr",
        acl: |p| vec![Acl::new(p, "ip", "127.0.0.0/8")],
        setter: "SU",
        actor: "W",
    },
    Identity {
        name: "ip-other",
        acl: |p| vec![Acl::new(p, "ip", "10.0.0.1")],
        setter: "SU",
        actor: "W",
    },
    Identity {
        name: "ip-exact-from-127.0.0.2",
        acl: |p| vec![Acl::new(p, "ip", "127.0.0.1")],
        setter: "SU",
        actor: "IP2",
    },
    Identity {
        name: "ip-cidr-from-127.0.0.2",
        acl: |p| vec![Acl::new(p, "ip", "127.0.0.0/8")],
        setter: "SU",
        actor: "IP2",
    },
    Identity {
        name: "ip-cidr31-from-127.0.0.2",
        acl: |p| vec![Acl::new(p, "ip", "127.0.0.0/31")],
        setter: "SU",
        actor: "IP2",
    },
    Identity {
        name: "super",
        acl: |p| vec![Acl::new(p, "ip", "10.0.0.1")],
        setter: "SU",
        actor: "SU",
    },
    Identity {
        name: "world-read+digest-no-auth",
        acl: |p| {
            let mut a = alice(p);
            a.insert(0, Acl::new(1, "world", "anyone"));
            a
        },
        setter: "SU",
        actor: "W",
    },
    Identity {
        name: "world-read+digest-match",
        acl: |p| {
            let mut a = alice(p);
            a.insert(0, Acl::new(1, "world", "anyone"));
            a
        },
        setter: "SU",
        actor: "AL",
    },
];

/// Permission sets of the node an op acts on.
const PERMS: &[(i32, &str)] = &[
    (0, "NONE"),
    (1, "READ"),
    (2, "WRITE"),
    (4, "CREATE"),
    (8, "DELETE"),
    (16, "ADMIN"),
    (17, "READ|ADMIN"),
    (14, "WRITE|CREATE|DELETE"),
    (15, "ALL-ADMIN"),
    (30, "ALL-READ"),
    (31, "ALL"),
];

/// An op of the matrix: runs as `actor` on node `n` (which has a child
/// `n/c` with an open ACL; `n` carries the ACL under test).
type MatrixOp = fn(&mut Runner, &str, &str) -> ops::Parsed;

const OPS: &[(&str, MatrixOp)] = &[
    ("create", |r, a, n| {
        r.run(a, &with_acl(op::CREATE, &format!("{n}/new"), Acl::open()))
    }),
    ("create2", |r, a, n| {
        r.run(a, &with_acl(op::CREATE2, &format!("{n}/new"), Acl::open()))
    }),
    ("createContainer", |r, a, n| {
        r.run(
            a,
            &with_acl(op::CREATE_CONTAINER, &format!("{n}/new"), Acl::open()),
        )
    }),
    ("delete", |r, a, n| r.run(a, &delete(&format!("{n}/c"), -1))),
    ("exists", |r, a, n| {
        r.run(a, &exists(n, true));
        // Whether the watch was set, and its event delivered.
        r.run("SU", &set(n, "changed", -1));
        r.run(a, &sync("/"))
    }),
    ("getData", |r, a, n| r.run(a, &get(n, false))),
    ("setData", |r, a, n| r.run(a, &set(n, "w", -1))),
    ("getACL", |r, a, n| r.run(a, &get_acl(n))),
    ("setACL", |r, a, n| r.run(a, &set_acl(n, Acl::open(), -1))),
    ("getChildren", |r, a, n| {
        r.run(a, &children(n, true));
        r.run("SU", &create(&format!("{n}/w"), "", mode::PERSISTENT));
        r.run(a, &sync("/"))
    }),
    ("getChildren2", |r, a, n| r.run(a, &children2(n, false))),
    ("getAllChildrenNumber", |r, a, n| {
        r.run(a, &Op::GetAllChildrenNumber { path: n.into() })
    }),
    ("sync", |r, a, n| r.run(a, &sync(n))),
    ("check-in-multi", |r, a, n| {
        r.run(a, &Op::Multi(vec![ops::check(n, 0)]))
    }),
    ("multi", |r, a, n| {
        r.run(
            a,
            &Op::Multi(vec![
                set(n, "m", -1),
                create_v1(&format!("{n}/m"), "", 0),
                delete(&format!("{n}/c"), -1),
            ]),
        )
    }),
    ("multiRead", |r, a, n| {
        r.run(a, &Op::MultiRead(vec![get(n, false), children(n, false)]))
    }),
    ("addWatch", |r, a, n| {
        r.run(
            a,
            &Op::AddWatch {
                path: n.into(),
                mode: 1,
            },
        );
        r.run("SU", &set(n, "changed", -1));
        r.run("SU", &create(&format!("{n}/w"), "", mode::PERSISTENT));
        r.run("SU", &delete(&format!("{n}/c"), -1));
        r.run(a, &sync("/"))
    }),
    ("removeWatches", |r, a, n| {
        // The data watch is only set when getData may read the node.
        r.run(a, &get(n, true));
        r.run(
            a,
            &Op::RemoveWatches {
                path: n.into(),
                typ: 2,
            },
        )
    }),
    ("getEphemerals", |r, a, n| {
        r.run(a, &create(&format!("{n}/e"), "", mode::EPHEMERAL));
        r.run(a, &Op::GetEphemerals { prefix: n.into() })
    }),
];

/// One row of the matrix and its transcript.
type Row = (String, Vec<String>);

fn matrix_rows(addr: &str) -> Vec<Row> {
    let mut r = Runner::new(addr);
    // Sessions sit idle while other identities' rows run: keep them alive.
    r.timeout_ms = 40_000;
    let mut rows = Vec::new();
    open_sessions(&mut r);
    r.run("SU", &create("/m", "", mode::PERSISTENT));
    rows.push(("sessions".to_string(), std::mem::take(&mut r.out)));
    let mut last_ping = Instant::now();
    for id in IDENTITIES {
        for &(perms, perms_name) in PERMS {
            for (op_name, run_op) in OPS {
                let n = format!("/m/{}.{perms}.{op_name}", id.name);
                r.reset_norm();
                r.run(
                    "SU",
                    &Op::Multi(vec![
                        create_v1(&n, "d", 0),
                        create_v1(&format!("{n}/c"), "", 0),
                    ]),
                );
                r.run(id.setter, &set_acl(&n, (id.acl)(perms), -1));
                run_op(&mut r, id.actor, &n);
                let label = format!("{} perms={perms_name} {op_name}", id.name);
                rows.push((label, std::mem::take(&mut r.out)));
                if last_ping.elapsed() > Duration::from_secs(2) {
                    r.keepalive();
                    last_ping = Instant::now();
                }
            }
        }
    }
    r.close_all();
    rows.push(("close".to_string(), std::mem::take(&mut r.out)));
    rows
}

#[test]
fn acl_matrix() {
    let (a, b) = start_pair(&cfg());
    eprintln!(
        "ACL matrix: zookeeper on {} vs {} on {}",
        a.addr(),
        side_name(other_flavor()),
        b.addr()
    );
    let t0 = Instant::now();
    let (addr_a, addr_b) = (a.addr(), b.addr());
    let ta = std::thread::spawn(move || matrix_rows(&addr_a));
    let tb = std::thread::spawn(move || matrix_rows(&addr_b));
    let ra = ta.join().expect("reference side panicked");
    let rb = tb.join().expect("other side panicked");
    eprintln!("{} rows in {:?}", ra.len(), t0.elapsed());
    assert_eq!(ra.len(), rb.len());
    if diff::dump_enabled() {
        for (label, lines) in &ra {
            eprintln!("==== {label}");
            for l in lines {
                eprintln!("{l}");
            }
        }
    }
    let mismatches: Vec<String> = ra
        .iter()
        .zip(&rb)
        .filter(|((_, la), (_, lb))| la != lb)
        .map(|((label, la), (_, lb))| {
            let mut s = format!("row {label}:\n");
            for (name, lines) in [("zookeeper", la), (side_name(other_flavor()), lb)] {
                s.push_str(&format!("  {name}:\n"));
                for l in lines {
                    s.push_str(&format!("    {l}\n"));
                }
            }
            s
        })
        .collect();
    let shown = 60;
    assert!(
        mismatches.is_empty(),
        "{} of {} ACL matrix rows differ (first {shown} shown):\n\n{}",
        mismatches.len(),
        ra.len(),
        mismatches
            .iter()
            .take(shown)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

// ------------------------------------------------------------------ cases

const CASES: &[(&str, Case)] = &[
    ("invalid_acls", invalid_acls),
    (
        "auth_expansion_and_duplicates",
        auth_expansion_and_duplicates,
    ),
    ("setacl_versions", setacl_versions),
    ("getacl_redaction", getacl_redaction),
    ("super_user", super_user),
    ("whoami_after_addauths", whoami_after_addauths),
];

fn invalid_acls(r: &mut Runner) {
    r.open("W");
    r.open("AL");
    r.run("AL", &add_auth("digest", b"alice:pw"));
    r.run("W", &create("/inv", "", mode::PERSISTENT));
    let mut lists: Vec<Vec<Acl>> = vec![vec![]];
    for (scheme, id) in [
        ("nosuch", "x"),
        ("x509", "CN=a"),
        ("sasl", "alice"),
        ("super", ""),
        ("key", "x"),
        ("WORLD", "anyone"),
        ("world", "someone"),
        ("world", "Anyone"),
        ("world", ""),
        ("auth", ""),
        ("auth", "alice"),
        ("ip", "999.1.2.3"),
        ("ip", "1.2.3"),
        ("ip", "1.2.3.4.5"),
        ("ip", "::1"),
        ("ip", "127.0.0.1/33"),
        ("ip", "127.0.0.1/"),
        ("ip", "127.0.0.1/-1"),
        ("ip", "127.0.0.1/a"),
        ("ip", "a.b.c.d"),
        ("ip", " 1.2.3.4"),
        ("ip", "1.2.3.4 "),
        ("ip", "1..2.3"),
        ("ip", ""),
        ("ip", "+1.2.3.4"),
        ("ip", "010.0.0.1"),
        ("ip", "-0.0.0.0"),
        ("ip", "1.2.3.4/-0"),
        ("ip", "1.2.3.4/+8"),
        ("ip", "0.0.0.0/0"),
        ("ip", "1.2.3.4/32"),
        ("digest", "nocolon"),
        ("digest", "a:"),
        ("digest", "a::"),
        ("digest", ":"),
        ("digest", ""),
        ("digest", "a:b:c"),
        ("digest", ":b"),
        ("digest", "a:b:"),
        ("digest", "a::b"),
    ] {
        lists.push(vec![Acl::new(31, scheme, id)]);
    }
    // One bad entry spoils a list.
    lists.push(vec![Acl::open()[0].clone(), Acl::new(31, "ip", "bad")]);
    for (i, acl) in lists.iter().enumerate() {
        for who in ["W", "AL"] {
            let p = format!("/inv/{who}{i}");
            r.run(who, &with_acl(op::CREATE2, &p, acl.clone()));
            r.run(who, &set_acl("/inv", acl.clone(), -1));
        }
    }
    r.run("W", &get_acl("/inv"));
    // INVALIDACL comes before NONODE, on create and setACL.
    r.run("W", &with_acl(op::CREATE2, "/inv/missing/x", vec![]));
    r.run("W", &set_acl("/inv/missing", vec![], 3));
    // A null ACL vector (count -1).
    let mut raw = Vec::new();
    raw.extend_from_slice(&6i32.to_be_bytes());
    raw.extend_from_slice(b"/inv/n");
    raw.extend_from_slice(&0i32.to_be_bytes());
    raw.extend_from_slice(&(-1i32).to_be_bytes());
    raw.extend_from_slice(&0i32.to_be_bytes());
    r.run(
        "W",
        &Op::Raw {
            opcode: op::CREATE2,
            body: raw,
        },
    );
    // Permission bits outside ALL are kept as given.
    r.run(
        "W",
        &with_acl(
            op::CREATE2,
            "/inv/bits",
            vec![Acl::new(-1, "world", "anyone")],
        ),
    );
    r.run("W", &get_acl("/inv/bits"));
    r.run("W", &set("/inv/bits", "x", -1));
}

fn auth_expansion_and_duplicates(r: &mut Runner) {
    r.open("W");
    r.open("AL");
    r.open("AB");
    r.open("SU");
    r.open("IPA");
    r.run("AL", &add_auth("digest", b"alice:pw"));
    r.run("AB", &add_auth("digest", b"alice:pw"));
    r.run("AB", &add_auth("digest", b"bob:pw"));
    r.run("SU", &add_auth("digest", b"super:test"));
    r.run("IPA", &add_auth("ip", b"whatever"));
    r.run("IPA", &Op::WhoAmI);
    r.run("W", &create("/ax", "", mode::PERSISTENT));
    let alice = digest("alice:pw");
    let lists = [
        vec![Acl::new(31, "auth", "")],
        vec![Acl::new(31, "auth", ""), Acl::new(31, "auth", "")],
        vec![Acl::new(31, "auth", ""), Acl::new(1, "auth", "")],
        vec![Acl::new(31, "auth", "ignored")],
        vec![Acl::new(31, "auth", ""), Acl::new(31, "digest", &alice)],
        vec![Acl::new(31, "digest", &alice), Acl::new(31, "auth", "")],
        vec![
            Acl::new(31, "world", "anyone"),
            Acl::new(31, "world", "anyone"),
            Acl::new(1, "ip", "127.0.0.1"),
            Acl::new(1, "ip", "127.0.0.1"),
            Acl::new(1, "world", "anyone"),
            Acl::new(31, "world", "anyone"),
        ],
        vec![Acl::new(5, "auth", ""), Acl::new(2, "world", "anyone")],
    ];
    for (i, acl) in lists.iter().enumerate() {
        for who in ["W", "AL", "AB", "SU", "IPA"] {
            let p = format!("/ax/{who}{i}");
            r.run(who, &with_acl(op::CREATE2, &p, acl.clone()));
            r.run("SU", &get_acl(&p));
            let q = format!("/ax/{who}{i}s");
            r.run("SU", &create(&q, "", mode::PERSISTENT));
            r.run(who, &set_acl(&q, acl.clone(), -1));
            r.run("SU", &get_acl(&q));
        }
    }
}

fn setacl_versions(r: &mut Runner) {
    r.open("A");
    r.open("B");
    r.run("B", &add_auth("digest", b"bob:pw"));
    r.run("A", &create("/av", "", mode::PERSISTENT));
    r.run("A", &create("/av/n", "", mode::PERSISTENT));
    for v in [0, 0, 1, -1, 5, -2, 2, 3] {
        r.run("A", &set_acl("/av/n", Acl::open(), v));
    }
    r.run("A", &get_acl("/av/n"));
    // setData and check see the data version, not the ACL version.
    r.run("A", &set("/av/n", "x", 0));
    r.run("A", &Op::Multi(vec![ops::check("/av/n", 1)]));
    // No ADMIN: NOAUTH before the version is looked at; INVALIDACL first.
    r.run(
        "A",
        &set_acl("/av/n", vec![Acl::new(31, "digest", &digest("bob:pw"))], -1),
    );
    r.run("A", &set_acl("/av/n", Acl::open(), 99));
    r.run("A", &set_acl("/av/n", vec![Acl::new(31, "auth", "")], 99));
    r.run("B", &set_acl("/av/n", Acl::open(), 99));
    r.run("B", &set_acl("/av/n", Acl::open(), 7));
    r.run("B", &get_acl("/av/n"));
    r.run("A", &set_acl("/av/missing", Acl::open(), 4));
    r.run("A", &set_acl("/av/missing", vec![], 4));
    // A failed setACL leaves the aversion as it was.
    r.run("A", &exists("/av/n", false));
}

fn getacl_redaction(r: &mut Runner) {
    r.open("W");
    r.open("AL");
    r.open("BO");
    r.open("SU");
    r.run("AL", &add_auth("digest", b"alice:pw"));
    r.run("BO", &add_auth("digest", b"bob:pw"));
    r.run("SU", &add_auth("digest", b"super:test"));
    r.run("W", &create("/rd", "", mode::PERSISTENT));
    let acl = vec![
        Acl::new(1, "digest", &digest("alice:pw")),
        Acl::new(16, "digest", &digest("bob:pw")),
        Acl::new(1, "ip", "127.0.0.1"),
        Acl::new(1, "world", "anyone"),
        Acl::new(2, "digest", ":empty-user"),
        // getACL redacts with replaceAll(":.*", ":x"): '.' stops at a line
        // terminator.
        Acl::new(2, "digest", "weird:b\nc"),
        Acl::new(2, "digest", "line\n:b"),
        Acl::new(2, "digest", "cr:a\rb"),
        Acl::new(2, "digest", "crlf:a\r\nb"),
        Acl::new(2, "digest", "nel:a\u{85}b"),
        Acl::new(2, "digest", "ls:a\u{2028}b"),
        Acl::new(2, "digest", "ps:a\u{2029}b"),
        Acl::new(2, "digest", "tab:a\tb"),
        Acl::new(2, "digest", "trail:b:"),
    ];
    r.run("W", &with_acl(op::CREATE2, "/rd/n", acl));
    for who in ["W", "AL", "BO", "SU"] {
        r.run(who, &get_acl("/rd/n"));
    }
    // READ alone is enough to see the (redacted) list; ADMIN alone too.
    r.run(
        "W",
        &with_acl(
            op::CREATE2,
            "/rd/admin-only",
            vec![
                Acl::new(16, "world", "anyone"),
                Acl::new(31, "digest", &digest("alice:pw")),
            ],
        ),
    );
    r.run("W", &get_acl("/rd/admin-only"));
    r.run(
        "W",
        &with_acl(
            op::CREATE2,
            "/rd/nothing",
            vec![
                Acl::new(2 | 4 | 8, "world", "anyone"),
                Acl::new(31, "digest", &digest("alice:pw")),
            ],
        ),
    );
    for who in ["W", "AL", "BO", "SU"] {
        r.run(who, &get_acl("/rd/nothing"));
    }
}

fn super_user(r: &mut Runner) {
    r.open("SU");
    r.open("NS");
    r.open("W");
    r.run("SU", &add_auth("digest", b"super:test"));
    // The wrong password gives a plain digest id, not super.
    r.run("NS", &add_auth("digest", b"super:wrong"));
    r.run("SU", &Op::WhoAmI);
    r.run("NS", &Op::WhoAmI);
    r.run("W", &create("/su", "", mode::PERSISTENT));
    let locked = vec![Acl::new(0, "ip", "10.0.0.1")];
    r.run("W", &with_acl(op::CREATE2, "/su/locked", locked));
    for who in ["SU", "NS", "W"] {
        r.run(who, &get("/su/locked", false));
        r.run(who, &set("/su/locked", who, -1));
        r.run(who, &get_acl("/su/locked"));
        r.run(who, &create(&format!("/su/locked/{who}"), "", 0));
        r.run(who, &children2("/su/locked", false));
        r.run(who, &delete(&format!("/su/locked/{who}"), -1));
    }
    // Super's own "auth" ACL expands to its digest id only.
    r.run(
        "SU",
        &with_acl(op::CREATE2, "/su/mine", vec![Acl::new(31, "auth", "")]),
    );
    r.run("SU", &get_acl("/su/mine"));
    r.run("NS", &get("/su/mine", false));
    r.run("SU", &set_acl("/su/locked", Acl::open(), -1));
    r.run("W", &get("/su/locked", false));
}

fn whoami_after_addauths(r: &mut Runner) {
    r.open("A");
    r.run("A", &Op::WhoAmI);
    let auths: [(&str, &[u8]); 12] = [
        ("digest", b"alice:pw"),
        ("digest", b"bob:pw"),
        ("digest", b"alice:pw"),
        ("digest", b"alice:other"),
        ("ip", b"ignored"),
        ("digest", b"super:test"),
        ("digest", b"nocolon"),
        ("digest", b":pw"),
        ("digest", b""),
        ("digest", b"u:p:q"),
        ("digest", "\u{fc}ser:pw".as_bytes()),
        ("digest", b"\xff\xfe:x"),
    ];
    for (scheme, auth) in auths {
        r.run("A", &add_auth(scheme, auth));
        r.run("A", &Op::WhoAmI);
    }
    // Enough ids to make ZooKeeper's auth info set grow.
    for i in 0..20 {
        r.run("A", &add_auth("digest", format!("user{i}:pw").as_bytes()));
    }
    r.run("A", &Op::WhoAmI);
    // The ids work: "nocolon" is user "nocolon".
    let acl = vec![Acl::new(31, "digest", &digest("nocolon"))];
    r.run("A", &with_acl(op::CREATE2, "/wa", acl));
    r.run("A", &get("/wa", false));
    r.run("A", &get_acl("/wa"));
    r.open_from("B", Ipv4Addr::new(127, 0, 0, 2));
    r.run("B", &Op::WhoAmI);
    r.run("B", &add_auth("ip", b""));
    r.run("B", &Op::WhoAmI);
    r.run("B", &get("/wa", false));
    // An unknown scheme fails and closes the connection.
    r.run("B", &add_auth("nosuch", b"x"));
    r.run("B", &Op::WhoAmI);
}

#[test]
fn acl_cases() {
    let (a, b) = start_pair(&cfg());
    eprintln!(
        "ACL cases: zookeeper on {} vs {} on {}",
        a.addr(),
        side_name(other_flavor()),
        b.addr()
    );
    diff_cases(&a, &b, CASES).assert_all_identical("ACL");
}
