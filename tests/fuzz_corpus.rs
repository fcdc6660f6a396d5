//! Every fuzz target's corpus and regression inputs (fuzz/corpus/<target>,
//! fuzz/regressions/<target>: what cargo-fuzz grew and the crashes it
//! found) replayed through the same checks the targets run
//! (fuzz/checks.rs), on stable Rust, in every `cargo test`: a fixed bug
//! stays fixed without a nightly toolchain. The fuzzing itself is
//! `fuzz/run.sh SECONDS` (fuzz/README.md).

#[path = "../fuzz/checks.rs"]
mod checks;

use std::path::Path;

fn replay(target: &str, check: fn(&[u8])) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut inputs = 0;
    for dir in ["corpus", "regressions"] {
        let dir = root.join(dir).join(target);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries {
            let path = e.unwrap().path();
            let data = std::fs::read(&path).unwrap();
            let outcome = std::panic::catch_unwind(|| check(&data));
            assert!(
                outcome.is_ok(),
                "{target}: {} fails its check",
                path.display()
            );
            inputs += 1;
        }
    }
    assert!(inputs > 0, "{target}: no corpus in fuzz/corpus/{target}");
}

#[test]
fn client_request() {
    replay("client_request", checks::client_request);
}

#[test]
fn peer_packets() {
    replay("peer_packets", checks::peer_packets);
}

#[test]
fn snap_stream() {
    replay("snap_stream", checks::snap_stream);
}

#[test]
fn log_and_snapshot() {
    replay("log_and_snapshot", checks::log_and_snapshot);
}

#[test]
fn config_and_jaas() {
    replay("config_and_jaas", checks::config_and_jaas);
}

#[test]
fn tls_handshake() {
    replay("tls_handshake", checks::tls_handshake);
}

#[test]
fn sasl_digest() {
    replay("sasl_digest", checks::sasl_digest);
}

#[test]
fn request_handling() {
    replay("request_handling", checks::request_handling);
}
