//! Property tests of the wire codec (src/proto): every request and response
//! round-trips through encode/decode, the handshake round-trips with and
//! without the readOnly byte, and decoding hostile bytes never panics.

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use ringkeeper::proto::codes::op;
use ringkeeper::proto::{
    Acl, ConnectRequest, ConnectResponse, Id, Request, Response, SetWatches, Stat,
};

/// Moderate case counts: the machine is shared. No regression files are
/// written (minimal failing cases are kept as plain tests below instead).
fn config() -> ProptestConfig {
    ProptestConfig {
        // PROPTEST_CASES still overrides, for a longer hunt.
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(256),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Every opcode Request::decode knows, plus a few it does not.
const REQUEST_OPCODES: &[i32] = &[
    op::CREATE,
    op::DELETE,
    op::EXISTS,
    op::GET_DATA,
    op::SET_DATA,
    op::GET_ACL,
    op::SET_ACL,
    op::GET_CHILDREN,
    op::SYNC,
    op::PING,
    op::GET_CHILDREN2,
    op::CHECK,
    op::MULTI,
    op::CREATE2,
    op::RECONFIG,
    op::CHECK_WATCHES,
    op::REMOVE_WATCHES,
    op::CREATE_CONTAINER,
    op::DELETE_CONTAINER,
    op::CREATE_TTL,
    op::MULTI_READ,
    op::AUTH,
    op::SET_WATCHES,
    op::SASL,
    op::GET_EPHEMERALS,
    op::GET_ALL_CHILDREN_NUMBER,
    op::SET_WATCHES2,
    op::ADD_WATCH,
    op::WHO_AM_I,
    op::CREATE_SESSION,
    op::CLOSE_SESSION,
    op::ERROR,
    op::NOTIFICATION,
    10,
    23,
    99,
    108,
    i32::MAX,
    i32::MIN,
];

// ---------------------------------------------------------------- strategies

/// Strings within the BMP: the server writes a character beyond it as
/// two CESU-8 surrogates, as Java does, which a client reads back as two
/// U+FFFD, so such strings do not round-trip through a reply by design
/// (tests/java_strings.rs holds the reader and writer to Java's).
fn any_string() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "/[a-z]{1,6}(/[a-z0-9]{1,6}){0,2}",
        2 => "\\PC{0,16}".prop_map(|s: String| s
            .chars()
            .map(|c| if (c as u32) > 0xffff { '\u{fffd}' } else { c })
            .collect()),
        1 => Just(String::new()),
    ]
}

fn any_bytes() -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..48)
}

fn any_acl() -> impl Strategy<Value = Acl> {
    (any::<i32>(), any_string(), any_string()).prop_map(|(perms, scheme, id)| Acl {
        perms,
        id: Id { scheme, id },
    })
}

fn any_acls() -> impl Strategy<Value = Vec<Acl>> {
    vec(any_acl(), 0..4)
}

fn any_strings() -> impl Strategy<Value = Vec<String>> {
    vec(any_string(), 0..4)
}

fn any_stat() -> impl Strategy<Value = Stat> {
    (
        (any::<i64>(), any::<i64>(), any::<i64>(), any::<i64>()),
        (any::<i32>(), any::<i32>(), any::<i32>()),
        any::<i64>(),
        (any::<i32>(), any::<i32>()),
        any::<i64>(),
    )
        .prop_map(
            |(
                (czxid, mzxid, ctime, mtime),
                (version, cversion, aversion),
                ephemeral_owner,
                (data_length, num_children),
                pzxid,
            )| Stat {
                czxid,
                mzxid,
                ctime,
                mtime,
                version,
                cversion,
                aversion,
                ephemeral_owner,
                data_length,
                num_children,
                pzxid,
            },
        )
}

fn any_set_watches(with_persistent: bool) -> impl Strategy<Value = SetWatches> {
    (
        any::<i64>(),
        any_strings(),
        any_strings(),
        any_strings(),
        any_strings(),
        any_strings(),
    )
        .prop_map(
            move |(relative_zxid, data, exist, child, persistent, persistent_recursive)| {
                SetWatches {
                    relative_zxid,
                    data,
                    exist,
                    child,
                    // setWatches (101) has no persistent lists on the wire.
                    persistent: if with_persistent { persistent } else { vec![] },
                    persistent_recursive: if with_persistent {
                        persistent_recursive
                    } else {
                        vec![]
                    },
                }
            },
        )
}

fn any_create() -> impl Strategy<Value = Request> {
    (
        prop_oneof![
            Just(op::CREATE),
            Just(op::CREATE2),
            Just(op::CREATE_CONTAINER),
            Just(op::CREATE_TTL),
        ],
        any_string(),
        any_bytes(),
        any_acls(),
        prop_oneof![0..7i32, any::<i32>()],
        any::<i64>(),
    )
        .prop_map(|(opcode, path, data, acl, flags, ttl)| Request::Create {
            opcode,
            path,
            data: Some(data.into()),
            acl,
            flags,
            // Only createTTL carries a ttl on the wire; the others decode as -1.
            ttl: if opcode == op::CREATE_TTL { ttl } else { -1 },
        })
}

/// Every Request variant except multi / multiRead.
fn leaf_request() -> impl Strategy<Value = Request> {
    prop_oneof![
        any_create(),
        (any_string(), any::<i32>()).prop_map(|(path, version)| Request::Delete { path, version }),
        (any_string(), any::<bool>()).prop_map(|(path, watch)| Request::Exists { path, watch }),
        (any_string(), any::<bool>()).prop_map(|(path, watch)| Request::GetData { path, watch }),
        (any_string(), any_bytes(), any::<i32>()).prop_map(|(path, data, version)| {
            Request::SetData {
                path,
                data: Some(data.into()),
                version,
            }
        }),
        any_string().prop_map(|path| Request::GetAcl { path }),
        (any_string(), any_acls(), any::<i32>()).prop_map(|(path, acl, version)| Request::SetAcl {
            path,
            acl,
            version
        }),
        (any_string(), any::<bool>())
            .prop_map(|(path, watch)| Request::GetChildren { path, watch }),
        (any_string(), any::<bool>())
            .prop_map(|(path, watch)| Request::GetChildren2 { path, watch }),
        any_string().prop_map(|path| Request::Sync { path }),
        (any_string(), any::<i32>()).prop_map(|(path, version)| Request::Check { path, version }),
        (any_string(), any_string(), any_string(), any::<i64>()).prop_map(
            |(joining, leaving, new_members, cur_config_id)| Request::Reconfig {
                joining,
                leaving,
                new_members,
                cur_config_id,
            }
        ),
        // WatcherType 1..=3 (3.8); other values do not decode (MARSHALLINGERROR).
        (any_string(), 1..=3i32)
            .prop_map(|(path, watcher_type)| Request::CheckWatches { path, watcher_type }),
        (any_string(), 1..=3i32)
            .prop_map(|(path, watcher_type)| Request::RemoveWatches { path, watcher_type }),
        (any::<i32>(), any_string(), any_bytes()).prop_map(|(auth_type, scheme, auth)| {
            Request::Auth {
                auth_type,
                scheme,
                auth,
            }
        }),
        any_set_watches(false).prop_map(|s| Request::SetWatches(Box::new(s))),
        any_set_watches(true).prop_map(|s| Request::SetWatches2(Box::new(s))),
        any_bytes().prop_map(|token| Request::Sasl { token }),
        any_string().prop_map(|prefix| Request::GetEphemerals { prefix }),
        any_string().prop_map(|path| Request::GetAllChildrenNumber { path }),
        (any_string(), 0..=1i32).prop_map(|(path, mode)| Request::AddWatch { path, mode }),
        Just(Request::WhoAmI),
        Just(Request::Ping),
        Just(Request::CloseSession),
    ]
}

/// The ops ZooKeeper's MultiOperationRecord accepts in a multi.
/// Creates come back from the decoder typed by their flags, as 3.8.0's
/// MultiOperationRecord rebuilds them, so generate them in that form.
fn zk_multi_op() -> impl Strategy<Value = Request> {
    let create = (any_string(), any_bytes(), 0..=6i32, 1..=0xFF_FFFF_FFFFi64).prop_map(
        |(path, data, flags, ttl)| {
            let (opcode, ttl) = match flags {
                5 | 6 => (op::CREATE_TTL, ttl),
                4 => (op::CREATE_CONTAINER, -1),
                _ => (op::CREATE, -1),
            };
            Request::Create {
                opcode,
                path,
                data: Some(data.into()),
                acl: vec![],
                flags,
                ttl,
            }
        },
    );
    prop_oneof![
        create,
        (any_string(), any::<i32>()).prop_map(|(path, version)| Request::Delete { path, version }),
        (any_string(), any_bytes(), any::<i32>()).prop_map(|(path, data, version)| {
            Request::SetData {
                path,
                data: Some(data.into()),
                version,
            }
        }),
        (any_string(), any::<i32>()).prop_map(|(path, version)| Request::Check { path, version }),
    ]
}

/// The ops ZooKeeper's MultiOperationRecord accepts in a multiRead.
fn zk_multi_read_op() -> impl Strategy<Value = Request> {
    prop_oneof![
        (any_string(), any::<bool>())
            .prop_map(|(path, watch)| Request::GetChildren { path, watch }),
        (any_string(), any::<bool>()).prop_map(|(path, watch)| Request::GetData { path, watch }),
    ]
}

/// Every Request variant: leaves, and ZooKeeper-shaped multi and multiRead
/// (anything else inside them fails to decode, as in ZooKeeper).
fn any_request() -> impl Strategy<Value = Request> {
    prop_oneof![
        6 => leaf_request(),
        2 => vec(zk_multi_op(), 0..10).prop_map(Request::Multi),
        1 => vec(zk_multi_read_op(), 0..10).prop_map(Request::MultiRead),
    ]
}

fn path_resp() -> impl Strategy<Value = String> {
    any_string()
}

/// One result of a multi, shaped as ZooKeeper's MultiResponse carries it:
/// create, create2, delete, setData, check or error (op -1).
fn multi_result() -> impl Strategy<Value = (i32, Result<Response, i32>)> {
    prop_oneof![
        path_resp().prop_map(|path| (op::CREATE, Ok(Response::Create { path }))),
        (path_resp(), any_stat())
            .prop_map(|(path, stat)| (op::CREATE2, Ok(Response::Create2 { path, stat }))),
        Just((op::DELETE, Ok(Response::Empty))),
        Just((op::CHECK, Ok(Response::Empty))),
        any_stat().prop_map(|stat| (op::SET_DATA, Ok(Response::Stat(stat)))),
        any::<i32>().prop_map(|code| (op::ERROR, Err(code))),
    ]
}

/// One result of a multiRead: getChildren, getData or error.
fn multi_read_result() -> impl Strategy<Value = (i32, Result<Response, i32>)> {
    prop_oneof![
        any_strings().prop_map(|c| (op::GET_CHILDREN, Ok(Response::Children(c)))),
        (any_bytes(), any_stat()).prop_map(|(data, stat)| (
            op::GET_DATA,
            Ok(Response::GetData {
                data: Some(data.into()),
                stat
            })
        )),
        any::<i32>().prop_map(|code| (op::ERROR, Err(code))),
    ]
}

/// (opcode of the request, a response ZooKeeper can send for it).
fn any_response() -> impl Strategy<Value = (i32, Response)> {
    let stat_or_empty = prop_oneof![any_stat().prop_map(Response::Stat), Just(Response::Empty)];
    prop_oneof![
        path_resp().prop_map(|path| (op::CREATE, Response::Create { path })),
        (
            prop_oneof![
                Just(op::CREATE2),
                Just(op::CREATE_CONTAINER),
                Just(op::CREATE_TTL)
            ],
            path_resp(),
            any_stat()
        )
            .prop_map(|(o, path, stat)| (o, Response::Create2 { path, stat })),
        (
            prop_oneof![
                Just(op::EXISTS),
                Just(op::SET_DATA),
                Just(op::SET_ACL),
                Just(op::CHECK)
            ],
            stat_or_empty
        ),
        (any_bytes(), any_stat()).prop_map(|(data, stat)| (
            op::GET_DATA,
            Response::GetData {
                data: Some(data.into()),
                stat
            }
        )),
        (any_acls(), any_stat())
            .prop_map(|(acl, stat)| (op::GET_ACL, Response::GetAcl { acl, stat })),
        any_strings().prop_map(|c| (op::GET_CHILDREN, Response::Children(c))),
        (any_strings(), any_stat()).prop_map(|(children, stat)| (
            op::GET_CHILDREN2,
            Response::Children2 { children, stat }
        )),
        path_resp().prop_map(|p| (op::SYNC, Response::Path(p))),
        any_strings().prop_map(|s| (op::GET_EPHEMERALS, Response::Strings(s))),
        any::<i32>().prop_map(|n| (op::GET_ALL_CHILDREN_NUMBER, Response::Number(n))),
        any::<i32>().prop_map(|n| (op::ADD_WATCH, Response::ErrorBody(n))),
        vec((any_string(), any_string()), 0..4).prop_map(|v| (op::WHO_AM_I, Response::WhoAmI(v))),
        proptest::option::of(any_bytes()).prop_map(|t| (op::SASL, Response::Sasl(t))),
        prop_oneof![
            Just(op::DELETE),
            Just(op::PING),
            Just(op::SET_WATCHES),
            Just(op::SET_WATCHES2),
            Just(op::CHECK_WATCHES),
            Just(op::REMOVE_WATCHES),
            Just(op::CLOSE_SESSION),
            Just(op::AUTH),
        ]
        .prop_map(|o| (o, Response::Empty)),
        vec(multi_result(), 0..10).prop_map(|r| (op::MULTI, Response::Multi(r))),
        vec(multi_read_result(), 0..10).prop_map(|r| (op::MULTI_READ, Response::Multi(r))),
    ]
}

fn any_connect_request() -> impl Strategy<Value = ConnectRequest> {
    (
        any::<i32>(),
        any::<i64>(),
        any::<i32>(),
        any::<i64>(),
        vec(any::<u8>(), 0..20),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(protocol_version, last_zxid_seen, timeout_ms, session_id, passwd, ro, has_ro)| {
                ConnectRequest {
                    protocol_version,
                    last_zxid_seen,
                    timeout_ms,
                    session_id,
                    passwd,
                    read_only: ro && has_ro,
                    has_read_only: has_ro,
                }
            },
        )
}

fn any_connect_response() -> impl Strategy<Value = ConnectResponse> {
    (
        any::<i32>(),
        any::<i32>(),
        any::<i64>(),
        vec(any::<u8>(), 0..20),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(protocol_version, timeout_ms, session_id, passwd, ro, has_ro)| ConnectResponse {
                protocol_version,
                timeout_ms,
                session_id,
                passwd,
                read_only: ro && has_ro,
                has_read_only: has_ro,
            },
        )
}

/// Hostile input built from jute-shaped tokens: lengths and counts near the
/// limits, -1 (null / multi end), opcodes, bools, and raw bytes. Finds far
/// more of the decoder's paths than uniformly random bytes.
fn hostile_token() -> impl Strategy<Value = Vec<u8>> {
    let int = prop_oneof![
        Just(-1i32),
        Just(0),
        Just(1),
        Just(2),
        Just(4),
        Just(12),
        Just(68),
        Just(i32::MAX),
        Just(i32::MIN),
        Just(-2),
        proptest::sample::select(REQUEST_OPCODES),
        -4..64i32,
    ];
    prop_oneof![
        4 => int.prop_map(|v| v.to_be_bytes().to_vec()),
        2 => prop_oneof![Just(vec![0u8]), Just(vec![1u8])],
        1 => any::<i64>().prop_map(|v| v.to_be_bytes().to_vec()),
        2 => vec(any::<u8>(), 0..8),
    ]
}

fn hostile_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        2 => vec(hostile_token(), 0..40).prop_map(|t| t.concat()),
        1 => multi_shaped_bytes(),
        1 => vec(any::<u8>(), 0..256),
    ]
}

/// Multi-shaped input: MultiHeaders (type, done, err) each followed by a few
/// tokens, so error results with a mismatched code and nested ops show up.
fn multi_shaped_bytes() -> impl Strategy<Value = Vec<u8>> {
    let header = (
        prop_oneof![Just(op::ERROR), proptest::sample::select(REQUEST_OPCODES),],
        any::<bool>(),
        -3..3i32,
    )
        .prop_map(|(t, done, err)| {
            let mut b = t.to_be_bytes().to_vec();
            b.push(u8::from(done));
            b.extend_from_slice(&err.to_be_bytes());
            b
        });
    let small = (-3..3i32).prop_map(|v| v.to_be_bytes().to_vec());
    vec(
        (header, vec(prop_oneof![small, hostile_token()], 0..3)),
        0..8,
    )
    .prop_map(|parts| {
        parts
            .into_iter()
            .flat_map(|(h, rest)| h.into_iter().chain(rest.concat()))
            .collect::<Vec<u8>>()
    })
}

fn encode_request(r: &Request) -> Vec<u8> {
    let mut b = Vec::new();
    r.encode(&mut b);
    b
}

fn encode_response(r: &Response) -> Vec<u8> {
    let mut b = Vec::new();
    r.encode(&mut b);
    b
}

/// Decoding must not panic; `catch_unwind` turns a panic into a test failure
/// that names the input instead of aborting the whole run.
fn no_panic<T>(
    what: &str,
    f: impl FnOnce() -> T + std::panic::UnwindSafe,
) -> Result<T, TestCaseError> {
    std::panic::catch_unwind(f).map_err(|_| TestCaseError::fail(format!("{what} panicked")))
}

// ---------------------------------------------------------------- properties

proptest! {
    #![proptest_config(config())]

    #[test]
    fn request_round_trips(req in any_request()) {
        let bytes = encode_request(&req);
        let back = Request::decode(req.opcode(), &bytes);
        prop_assert_eq!(back.as_ref(), Ok(&req));
        // The encoding is canonical: re-encoding what was decoded gives the same bytes.
        prop_assert_eq!(encode_request(&back.unwrap()), bytes);
    }

    #[test]
    fn truncated_request_is_an_error_or_another_value(req in any_request()) {
        let bytes = encode_request(&req);
        let opcode = req.opcode();
        for cut in 0..bytes.len() {
            let prefix = &bytes[..cut];
            let got = no_panic("Request::decode of a prefix", || Request::decode(opcode, prefix))?;
            if let Ok(v) = got {
                prop_assert_ne!(v, req.clone(), "prefix of {} / {} bytes decodes to the original", cut, bytes.len());
            }
        }
    }

    #[test]
    fn request_decode_never_panics(
        opcode in prop_oneof![3 => proptest::sample::select(REQUEST_OPCODES), 1 => any::<i32>()],
        bytes in hostile_bytes(),
    ) {
        let _ = no_panic("Request::decode", || Request::decode(opcode, &bytes))?;
    }

    #[test]
    fn response_round_trips((opcode, resp) in any_response()) {
        let bytes = encode_response(&resp);
        let back = Response::decode(opcode, &bytes);
        prop_assert_eq!(back.as_ref(), Ok(&resp));
        prop_assert_eq!(encode_response(&back.unwrap()), bytes);
    }

    #[test]
    fn truncated_response_is_an_error_or_another_value((opcode, resp) in any_response()) {
        let bytes = encode_response(&resp);
        for cut in 0..bytes.len() {
            let prefix = &bytes[..cut];
            let got = no_panic("Response::decode of a prefix", || Response::decode(opcode, prefix))?;
            if let Ok(v) = got {
                prop_assert_ne!(v, resp.clone(), "prefix of {} / {} bytes decodes to the original", cut, bytes.len());
            }
        }
    }

    /// The client side decodes server bytes; it must not panic either.
    #[test]
    fn response_decode_never_panics(
        opcode in prop_oneof![3 => proptest::sample::select(REQUEST_OPCODES), 1 => any::<i32>()],
        bytes in hostile_bytes(),
    ) {
        let _ = no_panic("Response::decode", || Response::decode(opcode, &bytes))?;
    }

    #[test]
    fn multi_decode_never_panics(
        opcode in prop_oneof![Just(op::MULTI), Just(op::MULTI_READ)],
        bytes in multi_shaped_bytes(),
    ) {
        let _ = no_panic("Request::decode", || Request::decode(opcode, &bytes))?;
        let _ = no_panic("Response::decode", || Response::decode(opcode, &bytes))?;
    }

    #[test]
    fn connect_request_round_trips(c in any_connect_request()) {
        let mut bytes = Vec::new();
        c.encode(&mut bytes);
        // protocolVersion, lastZxidSeen, timeOut, sessionId, passwd, [readOnly]
        prop_assert_eq!(bytes.len(), 4 + 8 + 4 + 8 + 4 + c.passwd.len() + usize::from(c.has_read_only));
        prop_assert_eq!(ConnectRequest::decode(&bytes), Ok(c.clone()));
        for cut in 0..bytes.len() {
            if let Ok(v) = no_panic("ConnectRequest::decode", || ConnectRequest::decode(&bytes[..cut]))? {
                prop_assert_ne!(v, c.clone());
            }
        }
        if c.has_read_only {
            // A pre-3.4 client omits the byte: the same request without it.
            let old = ConnectRequest::decode(&bytes[..bytes.len() - 1]).unwrap();
            prop_assert!(!old.has_read_only && !old.read_only);
            prop_assert_eq!(ConnectRequest { read_only: c.read_only, has_read_only: true, ..old }, c);
        }
    }

    #[test]
    fn connect_response_round_trips(c in any_connect_response()) {
        let mut bytes = Vec::new();
        c.encode(&mut bytes);
        prop_assert_eq!(bytes.len(), 4 + 4 + 8 + 4 + c.passwd.len() + usize::from(c.has_read_only));
        prop_assert_eq!(ConnectResponse::decode(&bytes), Ok(c.clone()));
        for cut in 0..bytes.len() {
            if let Ok(v) = no_panic("ConnectResponse::decode", || ConnectResponse::decode(&bytes[..cut]))? {
                prop_assert_ne!(v, c.clone());
            }
        }
    }

    #[test]
    fn connect_decode_never_panics(bytes in hostile_bytes()) {
        let _ = no_panic("ConnectRequest::decode", || ConnectRequest::decode(&bytes))?;
        let _ = no_panic("ConnectResponse::decode", || ConnectResponse::decode(&bytes))?;
    }

    /// The framed reply is `len | xid | zxid | err | body`, body only when err is 0.
    #[test]
    fn framed_reply_carries_the_body_only_without_error(
        xid in any::<i32>(),
        zxid in any::<i64>(),
        err in prop_oneof![Just(0i32), any::<i32>()],
        (opcode, resp) in any_response(),
    ) {
        let mut out = Vec::new();
        ringkeeper::proto::encode_reply(&mut out, xid, zxid, err, Some(&resp));
        let len = i32::from_be_bytes(out[0..4].try_into().unwrap());
        prop_assert_eq!(len as usize, out.len() - 4);
        prop_assert_eq!(i32::from_be_bytes(out[4..8].try_into().unwrap()), xid);
        prop_assert_eq!(i64::from_be_bytes(out[8..16].try_into().unwrap()), zxid);
        prop_assert_eq!(i32::from_be_bytes(out[16..20].try_into().unwrap()), err);
        if err == 0 {
            prop_assert_eq!(Response::decode(opcode, &out[20..]), Ok(resp));
        } else {
            prop_assert_eq!(out.len(), 20);
        }
    }
}

// ------------------------------------------------ minimal cases, kept as tests

/// A multi reply whose ErrorResponse code disagrees with its header's err
/// field trips a `debug_assert_eq!` in Response::decode: a panic on bytes
/// from the network (debug builds).
#[test]
fn multi_response_with_mismatched_error_codes_does_not_panic() {
    let mut body = Vec::new();
    body.extend_from_slice(&op::ERROR.to_be_bytes()); // type -1
    body.push(0); // done = false
    body.extend_from_slice(&0i32.to_be_bytes()); // header err 0
    body.extend_from_slice(&1i32.to_be_bytes()); // ErrorResponse err 1
    body.extend_from_slice(&(-1i32).to_be_bytes());
    body.push(1);
    body.extend_from_slice(&(-1i32).to_be_bytes());
    let r = std::panic::catch_unwind(|| Response::decode(op::MULTI, &body));
    assert!(r.is_ok(), "Response::decode(MULTI, {body:02x?}) panicked");
}

/// Nested multi headers (opcode 14, done=false, err) cost 9 bytes per level
/// and Request::decode recurses once per level: a frame within the default
/// jute.maxbuffer must not overflow the stack of the thread decoding it.
/// ZooKeeper's MultiOperationRecord refuses nested multis ("Invalid type of op").
///
/// A stack overflow aborts the process, so the decode runs in a child process
/// (this test binary, re-run on the ignored test below).
#[test]
fn deeply_nested_multi_does_not_overflow_the_stack() {
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args([
            "--exact",
            "nested_multi_decode_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("RINGKEEPER_NESTED_MULTI_CHILD", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "decoding a {} byte frame of nested multi headers killed the process: {:?}\n{}",
        nested_multi_frame().len(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

fn nested_multi_frame() -> Vec<u8> {
    let levels = ringkeeper::proto::JUTE_MAX_BUFFER_DEFAULT / 9;
    let mut body = Vec::with_capacity(levels * 9);
    for _ in 0..levels {
        body.extend_from_slice(&op::MULTI.to_be_bytes());
        body.push(0);
        body.extend_from_slice(&(-1i32).to_be_bytes());
    }
    body
}

#[test]
#[ignore = "run by deeply_nested_multi_does_not_overflow_the_stack in a child process"]
fn nested_multi_decode_child() {
    if std::env::var_os("RINGKEEPER_NESTED_MULTI_CHILD").is_none() {
        return;
    }
    let body = nested_multi_frame();
    // A shard's reactor thread: 2 MiB, Rust's default for spawned threads.
    let r = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || Request::decode(op::MULTI, &body).is_err())
        .unwrap()
        .join()
        .unwrap();
    // Truncated (no end marker): an error, not a crash.
    assert!(r);
}
