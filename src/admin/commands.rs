//! ZooKeeper's AdminServer commands (org.apache.zookeeper.server.admin.
//! Commands, 3.8) as JSON: names and aliases, which ones need a serving
//! server, and each one's keys, value types and order as Jackson writes
//! ZooKeeper's CommandResponse. The data comes from the same [`View`] the
//! four-letter words print; side effects (stat_reset,
//! connection_stat_reset, set_trace_mask) are the caller's, done before.
//!
//! How a response is assembled (CommandResponse.toMap): the command's
//! entries in order, then `command` (the primary name) and `error` (null);
//! an entry the command itself named `error` keeps its place and value
//! (`leader` on a standalone server, `set_trace_mask` without its
//! argument). An unknown name, and a command that needs a serving server
//! while there is none, answer only `command` (the name as asked) and
//! `error`. Every answer is HTTP 200, as Jetty's CommandServlet sends.
//!
//! Where ringkeeper's answer differs from ZooKeeper's, and why:
//! * `system_properties` (sysp) lists a JVM's system properties; ringkeeper
//!   has no JVM, so it answers as for an unknown command and is not listed
//!   under `/commands`.
//! * `monitor` while no leader is established: ZooKeeper 3.8.0 fails with
//!   HTTP 500 (a NullPointerException, no server object); ringkeeper
//!   answers the monitor values (server_state `looking`) with `error` set
//!   to the not-serving message, so that probes see both.
//! * The keys of `monitor` are mntr's (see `four_letter` and `monitor`):
//!   ZooKeeper's dynamic per-namespace and per-learner-handler summaries
//!   are absent.
//! * `initial_configuration` hides the values of secret keys (passwords,
//!   password files, superDigest): ringkeeper never shows a secret.
//! * `configuration`: data_dir and data_log_dir are the configured
//!   directories (as `conf`); `stats`/`connections` list TLS connections
//!   among `connections` (`secure_connections` stays empty).
//! * The order of a Java bean's properties (server_stats) follows
//!   reflection in ZooKeeper and is not stable between its own runs;
//!   ringkeeper uses the order a standalone 3.8.0 showed. Maps keyed by
//!   session id or path come in id order, paths in Java HashMap order.

use std::net::{IpAddr, SocketAddr};

use super::four_letter::{self, Needs, View};
use super::health::ServerRole;
use super::javafmt::{self, Table};
use super::json::Json;
use super::report::ConnInfo;

/// runCommand's error when a command needs a serving server.
pub const NOT_SERVING: &str = "This ZooKeeper instance is not currently serving requests";

/// One command: its names (the primary first) and whether it needs a
/// serving server (CommandBase.serverRequired).
#[derive(Debug)]
pub struct Command {
    pub names: &'static [&'static str],
    pub server_required: bool,
}

impl Command {
    pub fn primary(&self) -> &'static str {
        self.names[0]
    }
}

const fn cmd(names: &'static [&'static str], server_required: bool) -> Command {
    Command {
        names,
        server_required,
    }
}

/// Every command of ZooKeeper 3.8's Commands that ringkeeper answers.
pub const COMMANDS: &[Command] = &[
    cmd(&["connection_stat_reset", "crst"], true),
    cmd(&["configuration", "conf", "config"], true),
    cmd(&["connections", "cons"], true),
    cmd(&["hash"], true),
    cmd(&["dirs"], true),
    cmd(&["dump"], true),
    cmd(&["environment", "env", "envi"], false),
    cmd(&["get_trace_mask", "gtmk"], false),
    cmd(&["initial_configuration", "icfg"], true),
    cmd(&["is_read_only", "isro"], true),
    cmd(&["last_snapshot", "lsnp"], true),
    cmd(&["leader", "lead"], true),
    cmd(&["monitor", "mntr"], false),
    cmd(&["observer_connection_stat_reset", "orst"], true),
    cmd(&["ruok"], true),
    cmd(&["set_trace_mask", "stmk"], false),
    cmd(&["server_stats", "srvr"], true),
    cmd(&["stats", "stat"], true),
    cmd(&["stat_reset", "srst"], true),
    cmd(&["observers", "obsr"], true),
    cmd(&["voting_view"], true),
    cmd(&["watches", "wchc"], true),
    cmd(&["watches_by_path", "wchp"], true),
    cmd(&["watch_summary", "wchs"], true),
    cmd(&["zabstate"], false),
];

/// The command one of whose names is `name` (case matters, as in ZooKeeper).
pub fn lookup(name: &str) -> Option<&'static Command> {
    COMMANDS.iter().find(|c| c.names.contains(&name))
}

/// What a command needs gathered from every shard (see `four_letter`),
/// and which word's tree facts.
pub fn needs(primary: &str) -> (Needs, &'static str) {
    match primary {
        "monitor" => (Needs::Counts, "mntr"),
        "dump" => (Needs::Full, "dump"),
        "stats" | "connections" | "watches" | "watches_by_path" | "watch_summary" => {
            (Needs::Full, "")
        }
        _ => (Needs::Nothing, ""),
    }
}

/// Whether the command reads dataDir's snapshots (the shard lists them
/// into `View::last_snapshot`, since admin sits below the snapshot module).
pub fn lists_snapshots(primary: &str) -> bool {
    primary == "last_snapshot"
}

/// Whether the server serves requests (ZooKeeperServer.isRunning): an
/// ensemble member without an established leader does not, unless it
/// serves read-only.
pub fn serving(view: &View) -> bool {
    view.serving()
}

/// JettyAdminServer.commandLinks: a link per primary name, sorted, each
/// line followed by `<br/>` (println: line ends are `\n`).
pub fn links(command_url: &str) -> String {
    let mut names: Vec<&str> = COMMANDS.iter().map(Command::primary).collect();
    names.sort_unstable();
    let mut out = String::new();
    for n in names {
        out.push_str(&format!("<a href=\"{command_url}/{n}\">{n}</a>\n<br/>\n"));
    }
    out
}

/// set_trace_mask's argument: Ok(None) when absent, Err with the text
/// when it is not a Java long.
pub fn trace_mask_arg(kwargs: &[(String, String)]) -> Result<Option<i64>, String> {
    match kwarg(kwargs, "traceMask") {
        None => Ok(None),
        Some(v) => parse_java_long(v).map(Some).ok_or_else(|| v.to_string()),
    }
}

/// Jetty's getParameterMap then `entry.getValue()[0]`: the first value of
/// a parameter.
fn kwarg<'a>(kwargs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    kwargs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// Long.parseLong: an optional sign, decimal digits, in range.
fn parse_java_long(v: &str) -> Option<i64> {
    let digits = v.strip_prefix(['+', '-']).unwrap_or(v);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse().ok()
}

/// A query string as Jetty's parameter map: `&`-separated `key=value`
/// pairs, `+` and percent escapes decoded; a key without `=` has an
/// empty value. Pairs that do not decode are dropped.
pub fn parse_query(query: Option<&str>) -> Vec<(String, String)> {
    let Some(q) = query else {
        return Vec::new();
    };
    q.split('&')
        .filter(|p| !p.is_empty())
        .filter_map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let k = super::httpd::percent_decode(k, true)?;
            let v = super::httpd::percent_decode(v, true)?;
            Some((k, v))
        })
        .collect()
}

/// The whole answer to `/commands/<name>` (the name decoded, as asked).
pub fn run(name: &str, kwargs: &[(String, String)], view: &View) -> Json {
    let Some(command) = lookup(name) else {
        return bare(name, &format!("Unknown command: {name}"));
    };
    let serving = serving(view);
    if command.server_required && !serving {
        return bare(name, NOT_SERVING);
    }
    let primary = command.primary();
    let data = data(primary, kwargs, view);
    let mut out = to_map(primary, data);
    if primary == "monitor" && !serving {
        out.put("error", Json::str(NOT_SERVING));
    }
    out
}

/// A response with only `command` and `error`.
fn bare(name: &str, error: &str) -> Json {
    let mut o = Json::obj();
    o.put("command", Json::str(name));
    o.put("error", Json::str(error));
    o
}

/// CommandResponse.toMap.
fn to_map(primary: &str, data: Json) -> Json {
    let mut m = data.clone();
    m.put("command", Json::str(primary));
    m.put("error", Json::Null);
    if let Json::Obj(entries) = data {
        for (k, v) in entries {
            m.put(k, v);
        }
    }
    m
}

fn int(v: impl TryInto<i64>) -> Json {
    Json::Int(v.try_into().unwrap_or(i64::MAX))
}

/// A command's own entries.
fn data(primary: &str, kwargs: &[(String, String)], view: &View) -> Json {
    let mut d = Json::obj();
    let config = &view.config;
    match primary {
        "ruok" | "connection_stat_reset" | "stat_reset" | "observer_connection_stat_reset" => {}
        "configuration" => configuration(&mut d, view),
        "connections" => {
            d.put("connections", connections(view, false));
            d.put("secure_connections", Json::Arr(Vec::new()));
        }
        "dirs" => {
            d.put("datadir_size", int(four_letter::dir_size(&config.data_dir)));
            d.put(
                "logdir_size",
                int(four_letter::dir_size(&config.data_log_dir)),
            );
        }
        "dump" => dump(&mut d, view),
        "environment" => {
            for (k, v) in four_letter::environment() {
                d.put(k, Json::str(v));
            }
        }
        // DigestCommand: the digest log, empty (see the `hash` word).
        "hash" => d.put("digests", Json::Arr(Vec::new())),
        "get_trace_mask" => d.put("tracemask", Json::Int(view.trace_mask)),
        "set_trace_mask" => match trace_mask_arg(kwargs) {
            Ok(Some(mask)) => d.put("tracemask", Json::Int(mask)),
            Ok(None) => d.put(
                "error",
                Json::str("setTraceMask requires long traceMask argument"),
            ),
            Err(v) => d.put(
                "error",
                Json::str(format!(
                    "setTraceMask requires long traceMask argument, got {v}"
                )),
            ),
        },
        // ZooKeeperServer.getInitialConfig: the file's text on a standalone
        // server (ZooKeeperServerMain keeps it); null on an ensemble
        // member, whose QuorumPeer does not hand it over.
        "initial_configuration" => d.put(
            "initial_configuration",
            match &config.admin.initial_config {
                Some(text) if !config.ensemble => Json::str(redact_secrets(text)),
                _ => Json::Null,
            },
        ),
        "is_read_only" => d.put("read_only", Json::Bool(view.read_only)),
        "last_snapshot" => {
            let (zxid, timestamp) = match &view.last_snapshot {
                Some((zxid, path)) => (*zxid, mtime_secs(path)),
                None => (-1, -1),
            };
            d.put("zxid", Json::str(format!("{:x}", zxid as u64)));
            d.put("timestamp", Json::Int(timestamp));
        }
        "leader" => leader(&mut d, view),
        "monitor" => {
            for (k, v) in monitor_values(view) {
                d.put(k, v);
            }
        }
        "observers" => {
            // No observers (their server lines stop startup).
            d.put("synced_observers", Json::Int(0));
            d.put("observers", Json::Arr(Vec::new()));
        }
        "server_stats" => server_stats(&mut d, view),
        "stats" => {
            server_stats(&mut d, view);
            d.put("connections", connections(view, true));
            d.put("secure_connections", Json::Arr(Vec::new()));
        }
        "voting_view" => voting_view(&mut d, view),
        "watches" => {
            let mut by_session: Vec<(i64, Vec<&str>)> = view
                .shards
                .iter()
                .flat_map(|s| s.data_watches.iter())
                .map(|(sid, ps)| (*sid, ps.iter().map(String::as_str).collect()))
                .collect();
            by_session.sort_by_key(|(sid, _)| *sid);
            let mut m = Json::obj();
            for (sid, mut paths) in by_session {
                paths.sort_unstable();
                javafmt::string_order(&mut paths, Table::HashMap);
                m.put(
                    sid.to_string(),
                    Json::Arr(paths.into_iter().map(Json::str).collect()),
                );
            }
            d.put("session_id_to_watched_paths", m);
        }
        "watches_by_path" => {
            let mut by_path: std::collections::BTreeMap<&str, Vec<i64>> = Default::default();
            for (sid, ps) in view.shards.iter().flat_map(|s| s.data_watches.iter()) {
                for p in ps {
                    by_path.entry(p.as_str()).or_default().push(*sid);
                }
            }
            let mut paths: Vec<(&str, Vec<i64>)> = by_path.into_iter().collect();
            javafmt::hash_order(&mut paths, Table::HashMap, |(p, _)| {
                crate::java_compat::string_hash(p)
            });
            let mut m = Json::obj();
            for (p, mut sids) in paths {
                sids.sort_unstable();
                m.put(p, Json::Arr(sids.into_iter().map(Json::Int).collect()));
            }
            d.put("path_to_session_ids", m);
        }
        "watch_summary" => {
            let mut paths = std::collections::HashSet::new();
            let (mut watchers, mut total) = (0usize, 0usize);
            for (_, ps) in view.shards.iter().flat_map(|s| s.data_watches.iter()) {
                watchers += 1;
                total += ps.len();
                paths.extend(ps.iter().map(String::as_str));
            }
            d.put("num_connections", int(watchers));
            d.put("num_paths", int(paths.len()));
            d.put("num_total_watches", int(total));
        }
        "zabstate" => zabstate(&mut d, view),
        _ => unreachable!("every command in COMMANDS has its data: {primary}"),
    }
    d
}

/// What stands for a secret's value in `initial_configuration`.
pub const HIDDEN: &str = "********";

/// The configuration text with the values of secret keys (passwords,
/// password files, superDigest) hidden: ZooKeeper shows the file as it
/// is, but ringkeeper never shows a secret (issue 28 §3). Every other
/// byte stays as written.
pub fn redact_secrets(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let secret = !trimmed.starts_with(['#', '!'])
            && trimmed.split_once('=').is_some_and(|(key, _)| {
                let key = key.trim().to_ascii_lowercase();
                key.contains("password") || key.contains("passwd") || key.ends_with("superdigest")
            });
        if secret {
            let (key, _) = line.split_once('=').expect("checked");
            let end = if line.ends_with("\r\n") {
                "\r\n"
            } else if line.ends_with('\n') {
                "\n"
            } else {
                ""
            };
            out.push_str(&format!("{key}={HIDDEN}{end}"));
        } else {
            out.push_str(line);
        }
    }
    out
}

/// A file's modification time in seconds (File.lastModified() / 1000).
fn mtime_secs(path: &std::path::Path) -> i64 {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .map(|t| javafmt::wall_ms(t) / 1000)
        .unwrap_or(0)
}

/// ZooKeeperServerConf.toMap.
fn configuration(d: &mut Json, view: &View) {
    let c = &view.config;
    let client_port = if c.client_port != 0 {
        i64::from(c.client_port)
    } else {
        -1
    };
    d.put("client_port", Json::Int(client_port));
    d.put("data_dir", Json::str(four_letter::absolute(&c.data_dir)));
    d.put(
        "data_log_dir",
        Json::str(four_letter::absolute(&c.data_log_dir)),
    );
    d.put("tick_time", int(c.tick_time_ms));
    d.put("max_client_cnxns", int(c.max_client_cnxns));
    d.put("min_session_timeout", int(c.min_session_timeout_ms));
    d.put("max_session_timeout", int(c.max_session_timeout_ms));
    let server_id = c.myid.filter(|_| c.ensemble).unwrap_or(0);
    d.put("server_id", int(server_id));
    // clientPortListenBacklog is not used: the kernel default applies.
    d.put("client_port_listen_backlog", Json::Int(-1));
}

/// InetSocketAddress as Jackson writes it: "127.0.0.1:2181", IPv6 in
/// brackets.
fn socket_address(addr: SocketAddr) -> String {
    match addr.ip() {
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_none() => {
            format!("[{}]:{}", javafmt::host_address(addr.ip()), addr.port())
        }
        ip => format!("{}:{}", javafmt::host_address(ip), addr.port()),
    }
}

/// ServerCnxn.getConnectionInfo(brief).
fn connection(c: &ConnInfo, brief: bool) -> Json {
    let mut o = Json::obj();
    o.put("remote_socket_address", Json::str(socket_address(c.peer)));
    o.put("interest_ops", int(c.interest));
    o.put("outstanding_requests", int(c.queued));
    o.put("packets_received", int(c.received));
    o.put("packets_sent", int(c.sent));
    if !brief {
        o.put("session_id", Json::Int(c.session_id));
        o.put("last_operation", Json::str(c.last_op));
        o.put("established", Json::Int(c.established_ms));
        o.put("session_timeout", int(c.timeout_ms));
        o.put("last_cxid", Json::Int(c.last_cxid));
        o.put("last_zxid", Json::Int(c.last_zxid));
        o.put("last_response_time", Json::Int(c.last_response_ms));
        o.put("last_latency", int(c.last_latency_ms));
        o.put("min_latency", int(c.min_latency_ms));
        o.put("avg_latency", int(c.avg_latency_ms));
        o.put("max_latency", int(c.max_latency_ms));
    }
    o
}

fn connections(view: &View, brief: bool) -> Json {
    Json::Arr(view.conns().map(|c| connection(c, brief)).collect())
}

/// DumpCommand: ZooKeeperServer.getSessionExpiryMap and getEphemerals.
fn dump(d: &mut Json, view: &View) {
    let tick = i64::from(view.config.tick_time_ms.max(1));
    let mut sets: std::collections::BTreeMap<i64, Vec<i64>> = Default::default();
    for s in view.shards.iter().flat_map(|s| s.sessions.iter()) {
        // ExpiryQueue.roundToNextInterval of the last packet + timeout.
        let expiry = ((s.last_heard_ms + i64::from(s.timeout_ms)) / tick + 1) * tick;
        sets.entry(expiry).or_default().push(s.id);
    }
    let mut expiry = Json::obj();
    for (time, mut ids) in sets {
        ids.sort_unstable();
        expiry.put(
            time.to_string(),
            Json::Arr(ids.into_iter().map(Json::Int).collect()),
        );
    }
    d.put("expiry_time_to_session_ids", expiry);
    let mut eph: Vec<&(i64, Vec<String>)> = view.tree.ephemerals.iter().collect();
    eph.sort_by_key(|(sid, _)| *sid);
    let mut owners = Json::obj();
    for (sid, paths) in eph {
        let mut paths: Vec<&str> = paths.iter().map(String::as_str).collect();
        paths.sort_unstable();
        javafmt::string_order(&mut paths, Table::HashMap);
        owners.put(
            sid.to_string(),
            Json::Arr(paths.into_iter().map(Json::str).collect()),
        );
    }
    d.put("session_id_to_ephemeral_paths", owners);
}

/// mntr's lines as JSON entries: the same keys without `zk_`, in the same
/// order; whole numbers as numbers, Java doubles as doubles, the rest
/// (version, server_state, peer_state) as strings.
pub fn monitor_values(view: &View) -> Vec<(String, Json)> {
    let text = four_letter::mntr_lines(view);
    text.lines()
        .filter_map(|line| {
            let (key, value) = line.split_once('\t')?;
            let key = key.strip_prefix("zk_").unwrap_or(key).to_string();
            let json = if let Ok(n) = value.parse::<i64>() {
                Json::Int(n)
            } else if value.contains('.') && value.parse::<f64>().is_ok() {
                Json::Double(value.to_string())
            } else {
                Json::str(value)
            };
            Some((key, json))
        })
        .collect()
}

/// BufferStats as Jackson writes it.
fn buffer_stats(last: Json, min: Json, max: Json) -> Json {
    let mut o = Json::obj();
    o.put("last_buffer_size", last);
    o.put("min_buffer_size", min);
    o.put("max_buffer_size", max);
    o
}

/// SrvrCommand.
fn server_stats(d: &mut Json, view: &View) {
    let mntr: Vec<(String, Json)> = monitor_values(view);
    let m = |k: &str| {
        mntr.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
            .unwrap_or(Json::Int(0))
    };
    let t = &view.totals;
    let client_response = || {
        buffer_stats(
            m("last_client_response_size"),
            m("min_client_response_size"),
            m("max_client_response_size"),
        )
    };
    d.put("version", Json::str(four_letter::full_version()));
    d.put("read_only", Json::Bool(view.read_only));
    let mut s = Json::obj();
    s.put("packets_sent", int(t.packets_sent));
    s.put("packets_received", int(t.packets_received));
    s.put(
        "fsync_threshold_exceed_count",
        m("fsync_threshold_exceed_count"),
    );
    s.put("client_response_stats", client_response());
    s.put(
        "data_dir_size",
        int(four_letter::dir_size(&view.config.data_dir)),
    );
    s.put(
        "log_dir_size",
        int(four_letter::dir_size(&view.config.data_log_dir)),
    );
    s.put("provider_null", Json::Bool(false));
    s.put("server_state", Json::str(four_letter::server_state(view)));
    s.put("last_processed_zxid", Json::Int(t.last_zxid));
    s.put("outstanding_requests", int(t.outstanding));
    s.put(
        "avg_latency",
        Json::Double(javafmt::double(t.latency_avg_ms)),
    );
    s.put("max_latency", int(t.latency_max_ms));
    s.put("min_latency", int(t.latency_min_ms));
    s.put("num_alive_client_connections", int(t.connections));
    s.put("uptime", int(t.uptime_ms));
    s.put("auth_failed_count", m("auth_failed_count"));
    s.put("non_mtlsremote_conn_count", m("non_mtls_remote_conn_count"));
    s.put("non_mtlslocal_conn_count", m("non_mtls_local_conn_count"));
    d.put("server_stats", s);
    d.put("client_response", client_response());
    if view.role == ServerRole::Leader && !view.read_only {
        let e = &view.ensemble;
        d.put(
            "proposal_stats",
            buffer_stats(
                Json::Int(e.last_proposal_bytes),
                Json::Int(e.min_proposal_bytes),
                Json::Int(e.max_proposal_bytes),
            ),
        );
    }
    d.put("node_count", int(t.node_count));
}

/// Whether this server is an ensemble member (a QuorumZooKeeperServer),
/// leading or following.
fn in_quorum(view: &View) -> bool {
    matches!(view.role, ServerRole::Leader | ServerRole::Follower) && view.config.ensemble
}

/// LeaderCommand.
fn leader(d: &mut Json, view: &View) {
    match view.leader_id.filter(|_| in_quorum(view)) {
        Some(id) => {
            d.put("is_leader", Json::Bool(view.role == ServerRole::Leader));
            d.put("leader_id", int(id));
            // QuorumPeer.getLeaderAddress: the leader's quorum host.
            let ip = view
                .config
                .servers
                .get(&id)
                .map(|s| s.host.clone())
                .unwrap_or_default();
            d.put("leader_ip", Json::str(ip));
        }
        None => d.put("error", Json::str("server is not initialized")),
    }
}

/// QuorumServer.delimitedHostString with the port.
fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// This member's client address as QuorumPeer knows it: its server line's
/// `;client` part, else clientPortAddress:clientPort.
fn own_client_address(view: &View, id: u64) -> String {
    let c = &view.config;
    match c.servers.get(&id).and_then(|s| s.client_addr) {
        Some(addr) => socket_address(addr),
        None => socket_address(SocketAddr::new(c.client_port_address, c.client_port)),
    }
}

/// VotingViewCommand.
fn voting_view(d: &mut Json, view: &View) {
    let mut current = Json::obj();
    if in_quorum(view) {
        let me = view.config.myid;
        for (id, s) in &view.config.servers {
            if s.observer {
                continue;
            }
            let mut o = Json::obj();
            o.put(
                "server_addresses",
                Json::Arr(vec![Json::str(host_port(&s.host, s.quorum_port))]),
            );
            o.put(
                "election_addresses",
                Json::Arr(vec![Json::str(host_port(&s.host, s.election_port))]),
            );
            let client = match s.client_addr {
                Some(addr) => socket_address(addr),
                None if me == Some(*id) => own_client_address(view, *id),
                None => String::new(),
            };
            o.put("client_address", Json::str(client));
            o.put("learner_type", Json::str("participant"));
            current.put(id.to_string(), o);
        }
    }
    d.put("current_config", current);
}

/// MultipleAddresses as Jackson writes the bean (one address per member
/// line: ringkeeper's server lines carry one).
fn multiple_addresses(host: &str, port: u16) -> Json {
    let one = Json::str(host_port(host, port));
    let wildcard = if host.contains(':') {
        "[::]"
    } else {
        "0.0.0.0"
    };
    let mut o = Json::obj();
    o.put("empty", Json::Bool(false));
    o.put("all_addresses", Json::Arr(vec![one.clone()]));
    o.put("all_reachable_addresses", Json::Arr(vec![one.clone()]));
    o.put("one", one.clone());
    o.put("reachable_address", one.clone());
    o.put(
        "wildcard_addresses",
        Json::Arr(vec![Json::str(format!("{wildcard}:{port}"))]),
    );
    o.put("all_ports", Json::Arr(vec![int(port)]));
    o.put("all_host_strings", Json::Arr(vec![Json::str(host)]));
    o.put(
        "all_reachable_addresses_or_all",
        Json::Arr(vec![one.clone()]),
    );
    o.put("reachable_or_one", one);
    o
}

/// ZabStateCommand.
fn zabstate(d: &mut Json, view: &View) {
    let me = view
        .config
        .myid
        .and_then(|id| view.config.servers.get(&id).map(|s| (id, s)));
    let Some((id, spec)) = me.filter(|_| in_quorum(view)) else {
        d.put("voting", Json::Bool(false));
        d.put("zabstate", Json::str(""));
        return;
    };
    let zxid = view.totals.last_zxid;
    d.put("myid", int(id));
    d.put("is_leader", Json::Bool(view.role == ServerRole::Leader));
    d.put(
        "quorum_address",
        multiple_addresses(&spec.host, spec.quorum_port),
    );
    d.put(
        "election_address",
        multiple_addresses(&spec.host, spec.election_port),
    );
    d.put("client_address", Json::str(own_client_address(view, id)));
    d.put("voting", Json::Bool(!spec.observer));
    d.put("last_zxid", Json::str(format!("0x{:x}", zxid as u64)));
    d.put("zab_epoch", Json::Int(zxid >> 32));
    d.put("zab_counter", Json::Int(zxid & 0xffff_ffff));
    d.put("zabstate", Json::str(view.ensemble.phase));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::four_letter::TreeFacts;
    use crate::admin::report::ShardCounts;
    use crate::admin::stats::Totals;
    use crate::config::Config;
    use std::sync::Arc;

    fn view() -> View {
        View {
            config: Arc::new(Config::embedded_default()),
            totals: Totals::default(),
            shards: vec![],
            counts: ShardCounts::default(),
            tree: TreeFacts::default(),
            trace_mask: 306,
            read_only: false,
            unrecoverable_errors: 0,
            role: ServerRole::Standalone,
            ensemble: Default::default(),
            leader_id: None,
            last_snapshot: None,
        }
    }

    #[test]
    fn every_name_is_unique_and_found() {
        let mut seen = std::collections::HashSet::new();
        for c in COMMANDS {
            for n in c.names {
                assert!(seen.insert(*n), "{n} twice");
                assert_eq!(lookup(n).unwrap().primary(), c.primary());
            }
        }
        assert!(lookup("RUOK").is_none());
        assert!(lookup("system_properties").is_none());
    }

    #[test]
    fn ruok_and_unknown_as_zookeeper() {
        let v = view();
        assert_eq!(
            run("ruok", &[], &v).render(),
            "{\n  \"command\" : \"ruok\",\n  \"error\" : null\n}"
        );
        assert_eq!(
            run("nosuch", &[], &v).render(),
            "{\n  \"command\" : \"nosuch\",\n  \"error\" : \"Unknown command: nosuch\"\n}"
        );
    }

    #[test]
    fn not_serving_names_the_command_as_asked() {
        let mut v = view();
        v.role = ServerRole::Looking;
        assert_eq!(
            run("srvr", &[], &v).render(),
            format!("{{\n  \"command\" : \"srvr\",\n  \"error\" : \"{NOT_SERVING}\"\n}}")
        );
        // zabstate needs no server: voting false, zabstate "".
        let z = run("zabstate", &[], &v);
        assert_eq!(z.get("zabstate"), Some(&Json::str("")));
        assert_eq!(z.get("error"), Some(&Json::Null));
        // monitor answers with its values and the error.
        let m = run("mntr", &[], &v);
        assert_eq!(m.get("server_state"), Some(&Json::str("looking")));
        assert_eq!(m.get("command"), Some(&Json::str("monitor")));
        assert_eq!(m.get("error"), Some(&Json::str(NOT_SERVING)));
        // Read-only members serve.
        v.read_only = true;
        assert_eq!(run("ruok", &[], &v).get("error"), Some(&Json::Null));
    }

    #[test]
    fn leader_on_a_standalone_server_puts_its_error_first() {
        assert_eq!(
            run("lead", &[], &view()).render(),
            "{\n  \"error\" : \"server is not initialized\",\n  \"command\" : \"leader\"\n}"
        );
    }

    #[test]
    fn set_trace_mask_arguments() {
        let v = view();
        let kw = |s: &str| parse_query(Some(s));
        assert_eq!(
            run("stmk", &kw("traceMask=306"), &v).render(),
            "{\n  \"tracemask\" : 306,\n  \"command\" : \"set_trace_mask\",\n  \"error\" : null\n}"
        );
        assert_eq!(
            run("stmk", &[], &v).render(),
            "{\n  \"error\" : \"setTraceMask requires long traceMask argument\",\n  \
             \"command\" : \"set_trace_mask\"\n}"
        );
        assert_eq!(
            run("stmk", &kw("traceMask=abc"), &v).get("error"),
            Some(&Json::str(
                "setTraceMask requires long traceMask argument, got abc"
            ))
        );
        assert_eq!(
            trace_mask_arg(&kw("traceMask=-5&traceMask=7")),
            Ok(Some(-5))
        );
        assert_eq!(trace_mask_arg(&kw("traceMask=1e3")), Err("1e3".into()));
        assert_eq!(trace_mask_arg(&kw("traceMask=%2B12")), Ok(Some(12)));
    }

    #[test]
    fn monitor_keeps_mntr_keys_and_types() {
        let m = run("monitor", &[], &view());
        let Json::Obj(entries) = &m else {
            panic!("not an object")
        };
        assert_eq!(entries[0].0, "version");
        assert!(matches!(entries[0].1, Json::Str(_)));
        assert_eq!(m.get("server_state"), Some(&Json::str("standalone")));
        assert_eq!(m.get("avg_latency"), Some(&Json::Double("0.0".into())));
        assert_eq!(m.get("last_client_response_size"), Some(&Json::Int(-1)));
        let n = entries.len();
        assert_eq!(entries[n - 2].0, "command");
        assert_eq!(entries[n - 1].0, "error");
    }

    #[test]
    fn secrets_are_hidden_in_the_initial_configuration() {
        let text = "clientPort=1\nssl.keyStore.password = s3cret\r\n# ssl.trustStore.password=x\n\
                    superDigest=super:abc=\nssl.quorum.trustStore.passwordPath=/p\ndataDir=/d";
        assert_eq!(
            redact_secrets(text),
            "clientPort=1\nssl.keyStore.password =********\r\n# ssl.trustStore.password=x\n\
             superDigest=********\nssl.quorum.trustStore.passwordPath=********\ndataDir=/d"
        );
    }

    #[test]
    fn links_are_sorted_primary_names() {
        let l = links("/commands");
        assert!(l.starts_with(
            "<a href=\"/commands/configuration\">configuration</a>\n<br/>\n\
             <a href=\"/commands/connection_stat_reset\">connection_stat_reset</a>\n<br/>\n"
        ));
        assert!(l.ends_with("<a href=\"/commands/zabstate\">zabstate</a>\n<br/>\n"));
        assert_eq!(l.matches("<br/>").count(), COMMANDS.len());
    }
}
