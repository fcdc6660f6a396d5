//! After the txn log fails at runtime (here: the dataDir's filesystem is
//! full), every health surface says so, and clients can still read, as
//! with Apache ZooKeeper's read-only mode (ReadOnlyZooKeeperServer):
//!
//! - `isro` answers `ro`; `srvr`/`stat` print "READ-ONLY mode; serving
//!   only read-only clients" and `Mode: read-only`; mntr's
//!   `zk_server_state` is `read-only` and `zk_unrecoverable_error_count`
//!   1, and so is Prometheus' `unrecoverable_error_count`; `ruok` still
//!   answers `imok` (RuokCommand answers it in every state);
//! - the server log names the file the log failed on, with the OS error;
//! - the session that saw the failure still reads; its writes answer
//!   SYSTEMERROR (-1);
//! - a new client that did not send canBeReadOnly (or an old client that
//!   sends no readOnly byte) is closed without an answer, as
//!   ReadOnlyZooKeeperServer closes it;
//! - a new client that did is accepted with readOnly=true, reads what was
//!   acknowledged, and its writes and syncs answer NOTREADONLY (-119),
//!   as ReadOnlyRequestProcessor answers them; closeSession ends it.
//!
//! Mounting a tmpfs needs root (CAP_SYS_ADMIN): where it cannot be
//! mounted, the test fails, saying so (`scripts/test-all.sh` runs as root).
//! The filesystem is unmounted and the server killed when the test ends,
//! also on a panic.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::raw::*;
use common::raw_fallible::{multi_body, set_body};
use common::small_tmpfs::SmallTmpfs;
use common::{free_port, start_ringkeeper, Server};

const PROMETHEUS: &str = "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider";
const SYSTEM_ERROR: i32 = -1;
const NOT_READ_ONLY: i32 = -119;
const VALUE_BYTES: usize = 8 << 10;
/// Bound on the write loop.
const WRITES_MAX: usize = 5000;
/// tmpfs size, and what the ballast leaves free.
const TMPFS_MIB: u32 = 16;
const LEFT_FREE_BYTES: u64 = 3 << 20;
const SEGMENT_CFG: &str = "preAllocSize=1024\nringkeeper.segmentBytesMax=1048576\n";

fn mntr(server: &Server) -> BTreeMap<String, String> {
    server
        .four_letter("mntr")
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn health_words(server: &Server) -> (String, String, String) {
    (
        server.four_letter("ruok"),
        server.four_letter("isro"),
        server.four_letter("srvr"),
    )
}

/// A new connection's handshake with `read_only` as the readOnly byte
/// (None: an old client that sends none); the answer, if any.
fn connect(port: u16, read_only: Option<bool>) -> (std::net::TcpStream, Option<ConnectResponse>) {
    Conn::open(port, &connect_body(30_000, 0, &[0; 16], 0, read_only))
}

#[test]
fn a_failed_txn_log_shows_on_every_health_surface_and_reads_go_on() {
    let fs = SmallTmpfs::mount(TMPFS_MIB).unwrap_or_else(|why| {
        panic!(
            "cannot mount a {TMPFS_MIB} MiB tmpfs: {why}\nthis test needs root \
             (CAP_SYS_ADMIN, to mount; in a container, run it privileged)"
        )
    });
    let data = fs.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let mport = free_port();
    let server = start_ringkeeper(&format!(
        "dataDir={}\n{SEGMENT_CFG}metricsProvider.className={PROMETHEUS}\n\
         metricsProvider.httpHost=127.0.0.1\nmetricsProvider.httpPort={mport}\n",
        data.display()
    ));

    // Healthy: the answers of a standalone ZooKeeper.
    let (ruok, isro, srvr) = health_words(&server);
    assert_eq!((ruok.as_str(), isro.as_str()), ("imok", "rw"));
    assert!(srvr.contains("\nMode: standalone\n"), "{srvr}");
    assert!(!srvr.contains("READ-ONLY"), "{srvr}");
    let m = mntr(&server);
    assert_eq!(m["zk_server_state"], "standalone");
    assert_eq!(m["zk_unrecoverable_error_count"], "0");

    // Fill the disk until a write fails.
    let mut a = Conn::handshake(server.port, 30_000);
    let (r, _) = a.call(1, OP_CREATE, &create_body("/ok", b"still here", 0));
    assert_eq!(r.err, 0);
    let (r, _) = a.call(2, OP_CREATE, &create_body("/fill", b"", 0));
    assert_eq!(r.err, 0);
    fs.fill_leaving(&fs.path().join("ballast"), LEFT_FREE_BYTES);
    let value = vec![b'v'; VALUE_BYTES];
    let mut acked = Vec::new();
    let mut xid = 10;
    let failed_at = loop {
        assert!(acked.len() < WRITES_MAX, "no write failed in {WRITES_MAX}");
        xid += 1;
        let path = format!("/fill/n{xid}");
        let (r, _) = a.call(xid, OP_CREATE, &create_body(&path, &value, 0));
        match r.err {
            0 => acked.push(path),
            SYSTEM_ERROR => break path,
            other => panic!("create {path}: {other}"),
        }
    };
    assert!(!acked.is_empty(), "the first write already failed");

    // Every health surface says the server is read-only now.
    let (ruok, isro, srvr) = health_words(&server);
    assert_eq!(ruok, "imok", "RuokCommand answers imok in every state");
    assert_eq!(isro, "ro");
    let mut lines = srvr.lines();
    assert!(lines.next().unwrap().starts_with("Zookeeper version: "));
    assert_eq!(
        lines.next(),
        Some("READ-ONLY mode; serving only read-only clients")
    );
    assert!(srvr.contains("\nMode: read-only\n"), "{srvr}");
    let stat = server.four_letter("stat");
    assert!(stat.contains("\nREAD-ONLY mode; serving only read-only clients\nClients:\n"));
    assert!(stat.contains("\nMode: read-only\n"), "{stat}");
    let m = mntr(&server);
    assert_eq!(m["zk_server_state"], "read-only");
    assert_eq!(m["zk_unrecoverable_error_count"], "1");
    let e = common::prom::scrape(mport);
    assert_eq!(e.value("unrecoverable_error_count"), 1.0);

    // The log names the file and the OS error.
    let log = std::fs::read_to_string(server.dir.path().join("server.log")).unwrap();
    let line = log
        .lines()
        .find(|l| l.contains("txn log failed at "))
        .unwrap_or_else(|| panic!("no 'txn log failed at' line:\n{log}"));
    assert!(line.contains(&data.display().to_string()), "{line}");
    assert!(line.contains("No space left on device"), "{line}");

    // The session that saw the failure reads; its writes fail.
    let (r, _) = a.call(5000, OP_GET_DATA, &get_body("/ok", false));
    assert_eq!(r.err, 0);
    let (r, _) = a.call(5001, OP_EXISTS, &get_body(&failed_at, false));
    assert_eq!(r.err, -101, "the failed create {failed_at} is not there");
    let (r, _) = a.call(5002, OP_SET_DATA, &set_body("/ok", b"x", -1));
    assert_eq!(r.err, SYSTEM_ERROR);

    // Clients that did not ask for read-only are closed without an answer.
    for read_only in [Some(false), None] {
        let (_s, answer) = connect(server.port, read_only);
        assert!(
            answer.is_none(),
            "readOnly {read_only:?}: answered {answer:?}"
        );
    }

    // A read-only client is accepted and reads what was acknowledged.
    let (s, answer) = connect(server.port, Some(true));
    let answer = answer.expect("a read-only client is answered");
    assert_ne!(answer.session_id, 0);
    assert_eq!(answer.read_only, Some(true));
    assert_eq!(answer.timeout, 30_000);
    let mut ro = Conn {
        s,
        session_id: answer.session_id,
        passwd: answer.passwd,
        timeout: answer.timeout,
    };
    ro.s.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let (r, _) = ro.call(1, OP_GET_DATA, &get_body("/ok", false));
    assert_eq!(r.err, 0);
    assert!(r.body.windows(10).any(|w| w == b"still here"));
    let (r, _) = ro.call(2, OP_GET_DATA, &get_body(acked.last().unwrap(), false));
    assert_eq!(r.err, 0);
    let (r, _) = ro.call(3, OP_GET_CHILDREN, &get_body("/fill", false));
    assert_eq!(r.err, 0);
    // ...and every write (and sync) answers NOTREADONLY.
    let writes: Vec<(i32, Vec<u8>)> = vec![
        (OP_CREATE, create_body("/new", b"x", 0)),
        (OP_SET_DATA, set_body("/ok", b"x", -1)),
        (OP_DELETE, {
            let mut b = path_body("/ok");
            put_i32(&mut b, -1);
            b
        }),
        (OP_SYNC, path_body("/")),
        (
            OP_MULTI,
            multi_body(&[(OP_CREATE, create_body("/m", b"", 0))]),
        ),
    ];
    for (i, (op, body)) in writes.iter().enumerate() {
        let (r, _) = ro.call(10 + i as i32, *op, body);
        assert_eq!(r.err, NOT_READ_ONLY, "op {op}");
        assert!(r.body.is_empty(), "op {op}: an error header only");
    }
    let (r, _) = ro.call(20, OP_EXISTS, &get_body("/new", false));
    assert_eq!(r.err, -101, "nothing was written");
    // closeSession ends the read-only session and its connection.
    let (r, _) = ro.call(21, OP_CLOSE_SESSION, &[]);
    assert_eq!(r.err, 0);
    assert!(
        ro.recv().is_none(),
        "the connection closes after closeSession"
    );

    // Still read-only, still counted once.
    assert_eq!(server.four_letter("isro"), "ro");
    assert_eq!(mntr(&server)["zk_unrecoverable_error_count"], "1");
    drop(a);
    drop(server);
    drop(fs);
}
