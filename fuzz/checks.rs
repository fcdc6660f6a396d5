//! The checks behind each fuzz target, one function per target: the
//! cargo-fuzz targets (fuzz_targets/) call them on libFuzzer's inputs, and
//! tests/fuzz_corpus.rs replays every corpus and regression input through
//! them on stable Rust in `cargo test`. Each must return for any input,
//! panicking only on a broken property.
#![allow(dead_code)]

use std::sync::{Arc, OnceLock};

use ringkeeper::log::{record, txn_codec};
use ringkeeper::peer::snap_stream::SnapReader;
use ringkeeper::peer::{election_wire, quorum_packet, session_packets, zk_txn, Decoded};
use ringkeeper::proto::{ConnectRequest, Request};
use ringkeeper::sasl::digest_md5::{DigestMd5Server, Outcome};
use ringkeeper::tls::TlsSession;

/// The client codec: any opcode with any body, and the connect request,
/// must decode or fail cleanly; what decodes must encode and decode again
/// to the same request, except a multi, whose creates decoding rewrites as
/// ZooKeeper's MultiOperationRecord does (a createTTL with other flags
/// becomes a create that keeps them, which no longer decodes on its own).
pub fn client_request(data: &[u8]) {
    let _ = ConnectRequest::decode(data);
    if data.len() < 4 {
        return;
    }
    let opcode = i32::from_be_bytes(data[..4].try_into().unwrap());
    let body = &data[4..];
    if let Ok(req) = Request::decode(opcode, body) {
        let mut again = Vec::new();
        req.encode(&mut again);
        let back = Request::decode(req.opcode(), &again);
        if !matches!(req, Request::Multi(_)) {
            let back = back.expect("an encoded request decodes");
            assert_eq!(format!("{back:?}"), format!("{req:?}"));
        }
    }
}

fn used<T>(d: &Decoded<T>, len: usize) {
    if let Decoded::Item(_, n) = d {
        assert!(*n <= len, "decoder took {n} of {len} bytes");
    }
}

/// The peer protocol's decoders (election handshake and notifications,
/// quorum packets, the txns Java peers send, forwarded session packets):
/// any bytes decode or fail cleanly, and never claim more bytes than given.
pub fn peer_packets(data: &[u8]) {
    if let Ok(d) = election_wire::decode_initial(data) {
        used(&d, data.len());
    }
    if let Ok(d) = election_wire::decode_notification(data) {
        used(&d, data.len());
    }
    if let Ok(d) = quorum_packet::decode(data, 1 << 20) {
        used(&d, data.len());
        if let Decoded::Item(p, _) = d {
            let _ = session_packets::parse_request(p);
        }
    }
    let _ = quorum_packet::parse_learner_info(data);
    let _ = session_packets::parse_revalidate(data);
    let _ = session_packets::parse_touches(data);
    let _ = zk_txn::decode(data);
}

/// A SNAP stream from a leader: items decoded and applied one after
/// another from any bytes, until the stream fails or ends.
pub fn snap_stream(data: &[u8]) {
    let mut r = SnapReader::default();
    let mut at = 0;
    while at <= data.len() && !r.is_done() {
        match r.decode(&data[at..]) {
            Ok(Decoded::Item(item, n)) => {
                assert!(n <= data.len() - at);
                if n == 0 || r.accept(item).is_err() {
                    return;
                }
                at += n;
            }
            _ => return,
        }
    }
    if r.is_done() {
        let _ = r.finish(1);
    }
}

/// Recovery from arbitrary bytes: the log's records walked as recovery
/// walks a segment (each payload decoded as a txn), and a snapshot file.
pub fn log_and_snapshot(data: &[u8]) {
    let mut at = 0;
    while at < data.len() {
        match record::read(&data[at..]) {
            record::Read::Record(_, payload, next) => {
                let _ = txn_codec::decode(payload);
                assert!(next > 0 && next <= data.len() - at);
                at += next;
            }
            _ => break,
        }
    }
    let _ = ringkeeper::snapshot::decode(data);
}

/// zoo.cfg and JAAS text from anyone: parsed or refused with a message,
/// never a panic (files named in it are read only if they exist).
pub fn config_and_jaas(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = ringkeeper::config::Config::parse(text, "fuzz.cfg");
    let _ = ringkeeper::config::jaas::jaas_users(text, "Server");
}

fn config() -> Arc<rustls::ServerConfig> {
    static CONFIG: OnceLock<Arc<rustls::ServerConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let key = rcgen::KeyPair::generate().unwrap();
            let cert = rcgen::CertificateParams::new(vec!["localhost".into()])
                .unwrap()
                .self_signed(&key)
                .unwrap();
            let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
            let key = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
            Arc::new(
                rustls::ServerConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .unwrap()
                    .with_no_client_auth()
                    .with_single_cert(vec![cert.der().clone()], key)
                    .unwrap(),
            )
        })
        .clone()
}

/// The server side of the TLS handshake (client port and quorum), fed
/// whatever a stranger sends, in chunks: it fails cleanly or goes on.
pub fn tls_handshake(data: &[u8]) {
    let mut s = TlsSession::new(config()).unwrap();
    let mut out = Vec::new();
    let mut plain = [0u8; 4096];
    for chunk in data.chunks(97) {
        if s.feed(chunk).is_err() {
            let _ = s.take_outgoing(&mut out);
            return;
        }
        let _ = s.take_outgoing(&mut out);
        let _ = s.read_plain(&mut plain);
    }
}

/// SASL DIGEST-MD5 responses from anyone, after the server's challenge:
/// refused, unknown user, or (only with the password) authenticated.
pub fn sasl_digest(data: &[u8]) {
    let mut s = DigestMd5Server::default();
    let users = |u: &str| (u == "bob").then(|| "bobsecret".to_string());
    let Ok(Outcome::Continue(_)) = s.evaluate(b"", users) else {
        panic!("the first token gets the challenge");
    };
    if let Ok(Outcome::Done { user, .. }) = s.evaluate(data, users) {
        // The nonce is random: a fuzzer cannot know it.
        panic!("authenticated {user} without the nonce");
    }
}

/// Request handling without the sockets: the input is a session's
/// requests (each: opcode, a 2-byte length, the body); every one that
/// decodes is handled as the server handles it, writes prepped (ACL
/// checks, versions, paths, quotas, multi) and applied to one tree, reads
/// served from it with watches set, by a session holding ip, digest, x509
/// and sasl ids with every provider on. Nothing may panic, and the tree
/// must keep its counts.
pub fn request_handling(data: &[u8]) {
    use ringkeeper::consensus::prep::{prep, PrepContext};
    use ringkeeper::shard::reads::{self, Reader};
    use ringkeeper::tree::{Tree, Txn};
    use ringkeeper::watch::WatchTable;

    let ids: Vec<(String, String)> = vec![
        ("ip".into(), "127.0.0.1".into()),
        ("digest".into(), "bob:x".into()),
        ("x509".into(), "CN=client".into()),
        ("sasl".into(), "bob".into()),
    ];
    let ctx = PrepContext {
        session_id: 0x100,
        extended_types_enabled: true,
        enforce_quota: true,
        providers: ringkeeper::acl::AuthProviders {
            x509: true,
            sasl: true,
        },
        ids: &ids,
    };
    let mut tree = Tree::new();
    let mut watches = WatchTable::default();
    let who = Reader {
        conn: 1,
        session_id: 0x100,
        ids: &ids,
    };
    let mut zxid = 1;
    let mut rest = data;
    while rest.len() >= 6 {
        let opcode = i32::from_be_bytes(rest[..4].try_into().unwrap());
        let len = (u16::from_be_bytes([rest[4], rest[5]]) as usize).min(rest.len() - 6);
        let body = &rest[6..6 + len];
        rest = &rest[6 + len..];
        let Ok(mut req) = Request::decode(opcode, body) else {
            continue;
        };
        if req.is_write() {
            let op = prep(&tree, &tree, &ctx, &mut req);
            tree.apply(&Txn {
                zxid,
                time_ms: 1_700_000_000_000 + zxid,
                session_id: 0x100,
                cxid: zxid as i32,
                op,
            });
            zxid += 1;
        } else {
            let _ = reads::serve(&tree, &mut watches, &who, &req);
        }
    }
    assert!(tree.node_count() >= 1, "the root is gone");
}
