//! Every four-letter word, compared with Apache ZooKeeper 3.8.
//!
//! The same scenario (two sessions, ephemeral nodes, data and child
//! watches) runs against Apache ZooKeeper (the reference, always) and the
//! server under test (ringkeeper, or ZooKeeper with RK_TEST_TARGET=zookeeper,
//! which checks the normalization itself). Each word's answer is normalized
//! (version strings, ports, session ids, paths, times, sizes, and orders that
//! come from Java identity hashes) and must then be equal.

mod common;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::raw::{frame, put_buf, put_i32};
use common::{four_letter, Flavor, Server};

// ---------------------------------------------------------------------------
// A minimal raw client.

const OP_CREATE: i32 = 1;
const OP_EXISTS: i32 = 3;
const OP_GET_DATA: i32 = 4;
const OP_SET_DATA: i32 = 5;
const OP_GET_CHILDREN: i32 = 8;
const EPHEMERAL: i32 = 1;

fn read_frame(s: &mut TcpStream) -> Vec<u8> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).expect("frame length");
    let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).expect("frame body");
    body
}

struct Client {
    s: TcpStream,
    session_id: i64,
    local_port: u16,
    xid: i32,
}

impl Client {
    fn connect(port: u16) -> Client {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut b = Vec::new();
        put_i32(&mut b, 0);
        b.extend_from_slice(&0i64.to_be_bytes());
        put_i32(&mut b, 30_000);
        b.extend_from_slice(&0i64.to_be_bytes());
        put_buf(&mut b, &[0; 16]);
        b.push(0);
        s.write_all(&frame(&b)).unwrap();
        let r = read_frame(&mut s);
        let session_id = i64::from_be_bytes(r[8..16].try_into().unwrap());
        assert_ne!(session_id, 0);
        let local_port = s.local_addr().unwrap().port();
        Client {
            s,
            session_id,
            local_port,
            xid: 0,
        }
    }

    /// Sends a request and returns its error code (skipping notifications).
    fn call(&mut self, op: i32, body: &[u8]) -> i32 {
        self.xid += 1;
        let mut b = Vec::new();
        put_i32(&mut b, self.xid);
        put_i32(&mut b, op);
        b.extend_from_slice(body);
        self.s.write_all(&frame(&b)).unwrap();
        loop {
            let r = read_frame(&mut self.s);
            let xid = i32::from_be_bytes(r[0..4].try_into().unwrap());
            if xid == self.xid {
                return i32::from_be_bytes(r[12..16].try_into().unwrap());
            }
        }
    }

    fn create(&mut self, path: &str, data: &[u8], flags: i32) -> i32 {
        let mut b = Vec::new();
        put_buf(&mut b, path.as_bytes());
        put_buf(&mut b, data);
        put_i32(&mut b, 1);
        put_i32(&mut b, 31);
        put_buf(&mut b, b"world");
        put_buf(&mut b, b"anyone");
        put_i32(&mut b, flags);
        self.call(OP_CREATE, &b)
    }

    fn set_data(&mut self, path: &str, data: &[u8]) -> i32 {
        let mut b = Vec::new();
        put_buf(&mut b, path.as_bytes());
        put_buf(&mut b, data);
        put_i32(&mut b, -1);
        self.call(OP_SET_DATA, &b)
    }

    fn read(&mut self, op: i32, path: &str, watch: bool) -> i32 {
        let mut b = Vec::new();
        put_buf(&mut b, path.as_bytes());
        b.push(watch as u8);
        self.call(op, &b)
    }
}

/// Sends raw bytes as a word and returns the whole answer.
fn raw_word(port: u16, bytes: &[u8]) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(bytes).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

// ---------------------------------------------------------------------------
// Scenario and normalization.

/// Two sessions with ephemerals and watches; what the words will show.
struct Scene {
    server: Server,
    a: Client,
    b: Client,
}

impl Scene {
    fn new(server: Server) -> Scene {
        let mut a = Client::connect(server.port);
        let mut b = Client::connect(server.port);
        assert_eq!(a.create("/a", b"hello", 0), 0);
        assert_eq!(a.create("/a/e", b"x", EPHEMERAL), 0);
        assert_eq!(b.create("/b", b"", 0), 0);
        assert_eq!(b.create("/b/e2", b"", EPHEMERAL), 0);
        // Data watches: A on /a, B on /a and /nope; child watches: A on
        // /a, B on /b (counted by mntr, not shown by wch*).
        assert_eq!(a.read(OP_GET_DATA, "/a", true), 0);
        assert_eq!(a.read(OP_GET_CHILDREN, "/a", true), 0);
        assert_eq!(b.read(OP_GET_DATA, "/a", true), 0);
        assert_eq!(b.read(OP_EXISTS, "/nope", true), -101);
        assert_eq!(b.read(OP_GET_CHILDREN, "/b", true), 0);
        Scene { server, a, b }
    }

    fn word(&self, w: &str) -> String {
        four_letter(self.server.port, w).unwrap_or_else(|e| panic!("{w}: {e}"))
    }

    /// Replaces what differs between runs and servers.
    fn norm(&self, text: &str) -> String {
        let mut names: HashMap<String, &str> = HashMap::new();
        names.insert(format!("0x{:x}", self.a.session_id), "0xA");
        names.insert(format!("0x{:x}", self.b.session_id), "0xB");
        names.insert(format!("127.0.0.1:{}", self.a.local_port), "127.0.0.1:A");
        names.insert(format!("127.0.0.1:{}", self.b.local_port), "127.0.0.1:B");
        let mut out = String::with_capacity(text.len());
        for line in text.split_inclusive('\n') {
            let mut l = line.to_string();
            for (from, to) in &names {
                l = replace_token(&l, from, to);
            }
            // Any other client port is a word's own connection.
            l = replace_ports(&l);
            out.push_str(&l);
        }
        out
    }
}

/// Replaces `from` where it is not followed by more hex digits.
fn replace_token(s: &str, from: &str, to: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find(from) {
        let after = &rest[i + from.len()..];
        out.push_str(&rest[..i]);
        if after.starts_with(|c: char| c.is_ascii_hexdigit()) {
            out.push_str(from);
        } else {
            out.push_str(to);
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// "127.0.0.1:<digits>" to "127.0.0.1:W".
fn replace_ports(s: &str) -> String {
    let key = "127.0.0.1:";
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find(key) {
        out.push_str(&rest[..i + key.len()]);
        let after = &rest[i + key.len()..];
        let digits = after.chars().take_while(char::is_ascii_digit).count();
        if digits > 0 {
            out.push('W');
        }
        rest = &after[digits..];
    }
    out.push_str(rest);
    out
}

/// `key=value`-style fields whose values vary: the value becomes N.
fn blank_fields(s: &str, keys: &[&str]) -> String {
    let mut out = s.to_string();
    for k in keys {
        let pat = format!("{k}=");
        let mut result = String::new();
        let mut rest = out.as_str();
        while let Some(i) = rest.find(&pat) {
            result.push_str(&rest[..i + pat.len()]);
            let after = &rest[i + pat.len()..];
            let n = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '.')
                .count();
            result.push('N');
            rest = &after[n..];
        }
        result.push_str(rest);
        out = result;
    }
    out
}

/// Lines after `header_lines`, sorted (orders from Java identity hashes).
fn sorted_lines(s: &str, header_lines: usize) -> String {
    let mut lines: Vec<&str> = s.lines().collect();
    let tail = header_lines.min(lines.len());
    lines[tail..].sort_unstable();
    lines.join("\n")
}

fn is_num(s: &str) -> bool {
    !s.is_empty()
        && s.trim_start_matches('-')
            .chars()
            .all(|c| c.is_ascii_digit())
}

fn is_double(s: &str) -> bool {
    s.contains('.') && s.parse::<f64>().is_ok()
}

/// Zookeeper version line to "V"; Latency/Received/Sent/Outstanding values
/// to their format.
fn norm_stat(s: &str) -> String {
    s.lines()
        .map(|l| {
            if l.starts_with("Zookeeper version: ") {
                "Zookeeper version: V".to_string()
            } else if let Some(v) = l.strip_prefix("Latency min/avg/max: ") {
                let parts: Vec<&str> = v.split('/').collect();
                assert_eq!(parts.len(), 3, "{l}");
                assert!(
                    is_num(parts[0]) && is_double(parts[1]) && is_num(parts[2]),
                    "{l}"
                );
                "Latency min/avg/max: N/D/N".to_string()
            } else if let Some((k, v)) = l.split_once(": ") {
                if (k == "Received" || k == "Sent") && is_num(v) {
                    format!("{k}: N")
                } else {
                    l.to_string()
                }
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Word connections' stats differ with what else ran: a `[0]` line of a
/// word connection keeps only its shape.
fn norm_clients(s: &str) -> String {
    blank_fields(s, &["est", "lresp", "llat", "minlat", "avglat", "maxlat"])
}

/// dump: dates, set counts and the empty sets ZooKeeper keeps until they
/// expire go; the entries of each section are sorted (how sessions fall
/// into expiry sets depends on timing, and the order of sessions with
/// ephemerals on their ids' hashes).
fn norm_dump(s: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut entries: Vec<String> = Vec::new();
    let flush = |out: &mut Vec<String>, entries: &mut Vec<String>| {
        entries.sort();
        out.append(entries);
    };
    for l in s.lines() {
        if l.starts_with('\t') {
            match entries.last_mut() {
                // A path under a "0x<session>:" header.
                Some(block) if block.starts_with("0x") => {
                    block.push('\n');
                    block.push_str(l);
                }
                _ => entries.push(l.to_string()),
            }
            continue;
        }
        if l.starts_with("0x") && l.ends_with(':') {
            entries.push(l.to_string());
            continue;
        }
        if let Some(i) = l.find(" expire at ") {
            let date = &l[i + " expire at ".len()..];
            assert!(is_num(&l[..i]), "{l}");
            assert!(looks_like_java_date(date.trim_end_matches(':')), "{l}");
            entries.push(String::new());
            continue;
        }
        entries.retain(|e| !e.is_empty());
        flush(&mut out, &mut entries);
        if let Some(rest) = l.strip_suffix("):") {
            if let Some((head, counts)) = rest.split_once(" Sets (") {
                let (_, total) = counts.split_once(")/(").expect(l);
                out.push(format!("{head} Sets (K)/({total}):"));
                continue;
            }
        }
        out.push(l.to_string());
    }
    entries.retain(|e| !e.is_empty());
    flush(&mut out, &mut entries);
    out.join("\n")
}

/// "Sun Nov 22 04:13:54 UTC 2026".
fn looks_like_java_date(d: &str) -> bool {
    let f: Vec<&str> = d.split(' ').collect();
    f.len() == 6
        && f[0].len() == 3
        && f[1].len() == 3
        && f[2].len() == 2
        && f[3].len() == 8
        && f[3].split(':').all(is_num)
        && f[5].len() == 4
        && is_num(f[5])
}

/// mntr: (key, value) pairs; values of keys whose values legitimately
/// differ become their type.
fn norm_mntr(s: &str) -> Vec<(String, String)> {
    const EXACT: [&str; 9] = [
        "zk_server_state",
        "zk_ephemerals_count",
        "zk_num_alive_connections",
        "zk_outstanding_requests",
        "zk_znode_count",
        "zk_watch_count",
        "zk_global_sessions",
        "zk_approximate_data_size",
        "zk_local_sessions",
    ];
    s.lines()
        .filter(|l| !l.contains("_per_namespace\t"))
        .map(|l| {
            let (k, v) = l
                .split_once('\t')
                .unwrap_or_else(|| panic!("mntr line {l:?}"));
            let v = if EXACT.contains(&k) {
                v.to_string()
            } else if k == "zk_version" {
                "V".to_string()
            } else if is_num(v) {
                "N".to_string()
            } else if is_double(v) {
                "D".to_string()
            } else {
                format!("?{v}")
            };
            (k.to_string(), v)
        })
        .collect()
}

/// conf/dirs/envi: keys in order; values only by shape.
fn keys_of(s: &str, sep: char) -> Vec<String> {
    s.lines()
        .map(|l| match l.split_once(sep) {
            Some((k, _)) => k.to_string(),
            None => l.to_string(),
        })
        .collect()
}

// ---------------------------------------------------------------------------

/// Starts Apache ZooKeeper and the server under test with the same
/// config, concurrently; neither outlives a failure.
fn start_pair(cfg: &str) -> (Server, Server) {
    let cfg_ref = cfg.to_string();
    let reference = std::thread::spawn(move || common::start(Flavor::ZooKeeper, &cfg_ref));
    let subject = std::panic::catch_unwind(|| common::start_target(cfg));
    match (reference.join(), subject) {
        (Ok(r), Ok(s)) => (r, s),
        (r, Err(e)) => {
            drop(r);
            std::panic::resume_unwind(e)
        }
        (Err(e), s) => {
            drop(s);
            std::panic::resume_unwind(e)
        }
    }
}

/// One word's answers on both sides, normalized by `f`, must be equal.
fn same<T: PartialEq + std::fmt::Debug>(
    word: &str,
    zk: &Scene,
    rk: &Scene,
    f: impl Fn(&Scene, &str) -> T,
) -> (String, String) {
    let (zk_raw, rk_raw) = (zk.word(word), rk.word(word));
    let (zn, rn) = (f(zk, &zk_raw), f(rk, &rk_raw));
    assert_eq!(
        rn, zn,
        "\n{word}: the server under test (left) differs from ZooKeeper (right)\n\
         --- raw, under test:\n{rk_raw}\n--- raw, ZooKeeper:\n{zk_raw}"
    );
    (zk_raw, rk_raw)
}

#[test]
fn every_word_matches_zookeeper() {
    let (zk, rk) = start_pair("");
    let (mut zk, mut rk) = (Scene::new(zk), Scene::new(rk));

    for w in ["ruok", "isro", "gtmk", "hash"] {
        same(w, &zk, &rk, |_, s| s.to_string());
    }
    // stmk echoes the mask it sets; gtmk then shows it.
    let stmk = |port| {
        let mut b = b"stmk".to_vec();
        b.extend_from_slice(&0x132i64.to_be_bytes());
        raw_word(port, &b)
    };
    assert_eq!(stmk(rk.server.port), stmk(zk.server.port));
    assert_eq!(stmk(rk.server.port), "306");

    same("conf", &zk, &rk, |_, s| keys_of(s, '='));
    let (zk_conf, rk_conf) = (zk.word("conf"), rk.word("conf"));
    for conf in [&zk_conf, &rk_conf] {
        assert!(conf.contains("\ntickTime=2000\n"), "{conf}");
        assert!(conf.contains("\nmaxClientCnxns=60\n"), "{conf}");
        assert!(conf.contains("\nminSessionTimeout=4000\n"), "{conf}");
        assert!(conf.ends_with("\nserverId=0\n"), "{conf}");
    }
    same("dirs", &zk, &rk, |_, s| keys_of(s, ':'));
    same("envi", &zk, &rk, |_, s| keys_of(s, '='));

    let (wchs, _) = same("wchs", &zk, &rk, |_, s| s.to_string());
    assert_eq!(wchs, "2 connections watching 2 paths\nTotal watches:3\n");
    same("wchc", &zk, &rk, |sc, s| {
        // Watchers come in identity-hash order: compare per watcher.
        let n = sc.norm(s);
        let mut blocks: Vec<String> = Vec::new();
        for l in n.lines() {
            if l.starts_with('\t') {
                let last = blocks.last_mut().expect("path before watcher");
                last.push('\n');
                last.push_str(l);
            } else {
                blocks.push(l.to_string());
            }
        }
        blocks.sort();
        (blocks, n.ends_with("\n\n"))
    });
    same("wchp", &zk, &rk, |sc, s| {
        let n = sc.norm(s);
        (sorted_lines(&n, 0), n.ends_with("\n\n"))
    });

    let (_, rk_cons) = same("cons", &zk, &rk, |sc, s| {
        let n = norm_clients(&sc.norm(s));
        (sorted_lines(&n, 0), n.ends_with(")\n\n"))
    });
    assert!(
        rk_cons.contains("(queued=0,recved=1,sent=0)\n"),
        "{rk_cons}"
    );
    same("stat", &zk, &rk, |sc, s| {
        let n = norm_stat(&sc.norm(s));
        // Client lines (between "Clients:" and the blank line) are unordered.
        let (head, rest) = n.split_once("Clients:\n").expect("Clients:");
        let (clients, tail) = rest.split_once("\n\n").expect("blank line");
        let mut c: Vec<&str> = clients.lines().collect();
        c.sort_unstable();
        format!("{head}Clients:\n{}\n\n{tail}", c.join("\n"))
    });
    same("srvr", &zk, &rk, |_, s| norm_stat(s));
    same("dump", &zk, &rk, |sc, s| norm_dump(&sc.norm(s)));
    same("mntr", &zk, &rk, |_, s| norm_mntr(s));

    // crst resets every connection's counters; cons then shows them so.
    same("crst", &zk, &rk, |_, s| s.to_string());
    let (_, cons) = same("cons", &zk, &rk, |sc, s| {
        let n = norm_clients(&sc.norm(s));
        sorted_lines(&n, 0)
    });
    assert!(
        cons.contains(",lop=NA,") && cons.contains(",lzxid=0xffffffffffffffff,lresp=0,"),
        "{cons}"
    );

    // srst resets the server's counters: the next srvr counts itself as
    // received and srst's answer as sent.
    same("srst", &zk, &rk, |_, s| s.to_string());
    let (zk_srvr, _) = same("srvr", &zk, &rk, |_, s| {
        let l: Vec<&str> = s.lines().collect();
        (l[2].to_string(), l[3].to_string())
    });
    assert!(zk_srvr.contains("\nReceived: 1\nSent: 1\n"), "{zk_srvr}");

    // Notifications count as packets sent; fired watches are gone.
    assert_eq!(zk.a.set_data("/a", b"again"), 0);
    assert_eq!(rk.a.set_data("/a", b"again"), 0);
    same("wchs", &zk, &rk, |_, s| s.to_string());
    same("stat", &zk, &rk, |sc, s| {
        let n = sc.norm(s);
        let mut clients: Vec<&str> = n.lines().filter(|l| l.starts_with(" /")).collect();
        clients.sort_unstable();
        clients.join("\n")
    });
    // A long answer goes out in 8 KiB packets, each counted as sent.
    same("srst", &zk, &rk, |_, s| s.to_string());
    let (zk_mntr, rk_mntr) = same("mntr", &zk, &rk, |_, _| ());
    let (zk_srvr, rk_srvr) = same("srvr", &zk, &rk, |_, _| ());
    for (mntr, srvr) in [(zk_mntr, zk_srvr), (rk_mntr, rk_srvr)] {
        let sent = 1 + mntr.len().div_ceil(8192);
        assert!(
            srvr.contains(&format!("\nReceived: 2\nSent: {sent}\n")),
            "srst, mntr ({} bytes), srvr: {srvr}",
            mntr.len()
        );
    }

    // With every word allowed, telnet's interrupt sequence closes silently;
    // bytes that are no word are a bad frame length: closed too.
    let telnet = [0xff, 0xf4, 0xff, 0xfd];
    assert_eq!(raw_word(rk.server.port, &telnet), "");
    assert_eq!(raw_word(zk.server.port, &telnet), "");
    same("xyzw", &zk, &rk, |_, s| s.to_string());
}

#[test]
fn whitelist_refuses_with_zookeepers_text() {
    let (zk, rk) = start_pair("4lw.commands.whitelist=ruok, stat\n");
    let refused = [
        "conf", "cons", "crst", "dirs", "dump", "envi", "gtmk", "stmk", "srst", "wchc", "wchp",
        "wchs", "mntr", "isro", "hash",
    ];
    for w in refused {
        let expected = format!("{w} is not executed because it is not in the whitelist.\n");
        assert_eq!(rk.four_letter(w), expected, "under test: {w}");
        assert_eq!(zk.four_letter(w), expected, "ZooKeeper: {w}");
    }
    let telnet = [0xff, 0xf4, 0xff, 0xfd];
    let expected = "telnet close is not executed because it is not in the whitelist.\n";
    assert_eq!(raw_word(rk.port, &telnet), expected);
    assert_eq!(raw_word(zk.port, &telnet), expected);
    // Listed words run; srvr always does (zkServer.sh needs it).
    for server in [&rk, &zk] {
        assert_eq!(server.four_letter("ruok"), "imok");
        assert!(server.four_letter("stat").contains("\nClients:\n"));
        assert!(server.four_letter("srvr").contains("\nMode: standalone\n"));
    }
    // A refused srst changed nothing.
    let before = rk.four_letter("srvr");
    assert!(!before.contains("\nReceived: 0\n"), "{before}");
}

/// With several shards, the words that need every shard's connections and
/// watches (asked through each shard's mailbox) still see all of them.
#[test]
fn words_see_every_shard() {
    let server = common::start_target("ringkeeper.shards=2\n");
    let mut clients: Vec<Client> = (0..8).map(|_| Client::connect(server.port)).collect();
    for (i, c) in clients.iter_mut().enumerate() {
        assert_eq!(c.create(&format!("/n{i}"), b"", EPHEMERAL), 0);
        assert_eq!(c.read(OP_GET_DATA, &format!("/n{i}"), true), 0);
        assert_eq!(c.read(OP_EXISTS, "/shared", true), -101);
    }
    let sids: Vec<String> = clients
        .iter()
        .map(|c| format!("sid=0x{:x},", c.session_id))
        .collect();
    for _ in 0..3 {
        let cons = server.four_letter("cons");
        for sid in &sids {
            assert!(cons.contains(sid.as_str()), "cons misses {sid}: {cons}");
        }
        // 8 clients and the word's own connection.
        assert_eq!(
            cons.lines().filter(|l| l.starts_with(" /")).count(),
            9,
            "{cons}"
        );
        assert_eq!(
            server.four_letter("wchs"),
            "8 connections watching 9 paths\nTotal watches:16\n"
        );
        let wchp = server.four_letter("wchp");
        let shared = wchp.split("/shared\n").nth(1).expect("/shared watched");
        assert_eq!(
            shared.lines().take_while(|l| l.starts_with('\t')).count(),
            8
        );
        let mntr = server.four_letter("mntr");
        assert!(mntr.contains("\nzk_watch_count\t16\n"), "{mntr}");
        assert!(mntr.contains("\nzk_global_sessions\t8\n"), "{mntr}");
        assert!(mntr.contains("\nzk_ephemerals_count\t8\n"), "{mntr}");
        assert!(mntr.contains("\nzk_num_alive_connections\t9\n"), "{mntr}");
        let dump = server.four_letter("dump");
        assert!(dump.contains("Session Sets ("), "{dump}");
        assert!(dump.contains(")/(8):\n"), "{dump}");
        assert!(dump.contains("Sessions with Ephemerals (8):\n"), "{dump}");
        assert!(dump.contains("Connections Sets ("), "{dump}");
        assert!(dump.contains(")/(9):\n"), "{dump}");
    }
    // crst reaches every shard before it answers.
    assert_eq!(server.four_letter("crst"), "Connection stats reset.\n");
    let cons = server.four_letter("cons");
    assert_eq!(cons.matches(",lop=NA,").count(), 8, "{cons}");
}
