//! Server configuration: an Apache ZooKeeper `zoo.cfg` plus ringkeeper's own
//! `ringkeeper.*` keys.
//!
//! The file format follows what ZooKeeper 3.8 accepts
//! (`QuorumPeerConfig.parseProperties`): Java-properties style `key=value`
//! lines, `#` and `!` comment lines, blank lines, whitespace around key and
//! value trimmed, and a repeated key replacing the earlier one. Unlike Java
//! properties we insist on `=` as the separator (no `key value` / `key:value`)
//! and do not support `\` line continuations; neither appears in real
//! `zoo.cfg` files, and a line without `=` is far more likely a typo.
//!
//! Keys ZooKeeper knows but ringkeeper does not implement are accepted (with
//! a debug trace) so an existing `zoo.cfg` works unchanged; keys nobody knows
//! produce a warning, kept in [`Config::warnings`] for the caller to show.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};

pub mod jaas;
pub mod security;
mod standalone;
pub mod tls;

/// `tickTime` when not configured, in milliseconds.
pub const DEFAULT_TICK_TIME_MS: u32 = 2000;
/// `jute.maxbuffer` when not configured: ZooKeeper's `0xfffff`.
pub const DEFAULT_JUTE_MAX_BUFFER: usize = 0xfffff;
/// `globalOutstandingLimit` when not configured: ZooKeeper's 1000.
pub const DEFAULT_GLOBAL_OUTSTANDING_LIMIT: u32 = 1000;
/// The client port of [`Config::embedded_default`].
pub const DEFAULT_CLIENT_PORT: u16 = 2181;
/// The leader starts a new epoch before its counter passes
/// `u32::MAX - EPOCH_COUNTER_MARGIN` (ZooKeeper forces an election at
/// 0xffffffff, ZOOKEEPER-1277): room for the batch being built when the
/// limit is reached, which one tick of session expiry can fill with up to
/// SESSIONS_MAX (consensus::core) txns. The highest and default
/// `ringkeeper.epochCounterLimit`; it lives here, below the consensus core
/// that enforces it, so that config does not import consensus.
pub const EPOCH_COUNTER_MARGIN: u32 = 1 << 24;

/// The 4lw command ZooKeeper always enables: `zkServer.sh status` needs it.
const ALWAYS_ALLOWED_WORD: &str = "srvr";

/// Everything the server needs to know at startup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `clientPort`. Required in a file.
    /// 0 when only `secureClientPort` is configured (no plaintext port).
    pub client_port: u16,
    /// `clientPortAddress`; the wildcard address when not configured.
    pub client_port_address: IpAddr,
    /// `secureClientPort`: TLS only on this port.
    pub secure_client_port: Option<u16>,
    /// `secureClientPortAddress`; the wildcard address when not configured.
    pub secure_client_port_address: IpAddr,
    /// `client.portUnification`: TLS and plaintext both on `clientPort`.
    pub client_port_unification: bool,
    /// The client port's TLS settings, when a port above asks for TLS.
    pub client_tls: Option<tls::ClientTls>,
    /// `sslQuorum`: the election and quorum ports' TLS.
    pub quorum_tls: Option<tls::QuorumTls>,
    /// `authProvider.N=...SASLAuthenticationProvider`: sasl ACLs are valid.
    pub sasl_provider: bool,
    /// The JAAS `Server` section's users: SASL (DIGEST-MD5) exchanges run.
    pub sasl_users: Option<BTreeMap<String, tls::Secret>>,
    /// `superUser` (zookeeper.superUser): this SASL user also holds super.
    pub sasl_super_user: Option<String>,
    /// `sessionRequireClientSASLAuth`: a failed exchange answers -124.
    pub sasl_required: bool,
    /// `allowSaslFailedClients`: a failed exchange keeps the connection.
    pub allow_sasl_failed_clients: bool,
    /// `quorum.auth.enableSasl`: DIGEST-MD5 between members.
    pub quorum_sasl: Option<security::QuorumSasl>,
    /// `dataDir`. Required in a file.
    pub data_dir: PathBuf,
    /// `dataLogDir`; `data_dir` when not configured.
    pub data_log_dir: PathBuf,
    /// `tickTime`, always > 0.
    pub tick_time_ms: u32,
    /// `initLimit`, in ticks.
    pub init_limit: u32,
    /// `syncLimit`, in ticks.
    pub sync_limit: u32,
    /// `maxClientCnxns` per client IP; 0 means unlimited.
    pub max_client_cnxns: u32,
    /// `maxCnxns` (ZooKeeper's `zookeeper.maxCnxns`): connections in total;
    /// 0 (default) means unlimited.
    pub max_cnxns: u32,
    /// `globalOutstandingLimit` (`zookeeper.globalOutstandingLimit`):
    /// requests in flight past which connections with requests in flight
    /// stop being read. Each shard enforces `limit / shards`. Default 1000.
    pub global_outstanding_limit: u32,
    /// `zookeeper.nio.sessionlessCnxnTimeout` (`nio.sessionlessCnxnTimeout`
    /// in zoo.cfg): a connection that has sent no byte for this long before
    /// its session is established is closed, as NIOServerCnxnFactory does.
    /// Default 10000.
    pub sessionless_cnxn_timeout_ms: u32,
    /// `ringkeeper.replyBytesMax`: reply bytes queued for clients, all
    /// connections on all shards together. At the bound connections with
    /// replies queued are not read and the one with the most is closed.
    /// Default 256 MiB.
    pub reply_bytes_max: usize,
    /// `minSessionTimeout`; `2 * tickTime` when absent or -1.
    pub min_session_timeout_ms: u32,
    /// `maxSessionTimeout`; `20 * tickTime` when absent or -1.
    pub max_session_timeout_ms: u32,
    /// `4lw.commands.whitelist`.
    pub four_letter_whitelist: FourLetterWhitelist,
    /// `jute.maxbuffer`: the largest packet accepted, in bytes.
    pub jute_max_buffer: usize,
    /// `extendedTypesEnabled` (TTL and container-with-TTL nodes).
    pub extended_types_enabled: bool,
    /// `superDigest`: `user:base64(sha1(user:password))` of the super user.
    pub super_digest: Option<String>,
    /// `enforceQuota` (ZooKeeper's `zookeeper.enforceQuota`): hard quota
    /// limits refuse creates and setData with QUOTAEXCEEDED. Default false.
    pub enforce_quota: bool,
    /// `enforce.auth.enabled` with `enforce.auth.schemes`: the schemes a
    /// connection must have authenticated with before any request but auth
    /// and SASL; None when enforcement is off (the default).
    pub enforce_auth_schemes: Option<Vec<String>>,
    /// `server.N` lines, by server id.
    pub servers: BTreeMap<u64, ServerSpec>,
    /// The `server.N` lines ask for an ensemble (more than one voter, or
    /// `standaloneEnabled=false`): this server runs ZAB with its peers.
    pub ensemble: bool,
    /// This server's id (dataDir/myid), read at startup; `conf` shows it.
    pub myid: Option<u64>,
    /// `quorumListenOnAllIPs`: bind the peer ports on every address
    /// instead of the one this server's `server.N` line names.
    pub quorum_listen_on_all_ips: bool,
    /// `readonlymode.enabled`: an ensemble member without a leader serves
    /// clients that allow read-only sessions (ZooKeeper's
    /// ReadOnlyZooKeeperServer, which ZooKeeper turns on with the Java
    /// system property of that name); off, it serves nobody until it has
    /// a leader, as ZooKeeper by default.
    pub read_only_mode: bool,
    /// `ringkeeper.shards`: number of shard executors; `None` lets the
    /// server choose (cores - 1, at least 1). Set from `ringkeeper.pinCores`
    /// when only that is configured.
    pub shard_count: Option<usize>,
    /// `ringkeeper.pinCores`.
    pub cpu_pinning: CpuPinning,
    /// `ringkeeper.consensusExecutor`: whether the consensus core gets an
    /// executor (thread) of its own or runs as a task on shard 0's.
    pub consensus_executor: ConsensusExecutor,
    /// `znode.container.checkIntervalMs` (a Java system property in
    /// ZooKeeper, accepted here in the file): how often empty containers and
    /// expired TTL nodes are looked for. Default 60000.
    pub container_check_interval_ms: u64,
    /// `znode.container.maxPerMinute`: bound on reaper deletions. Default 10000.
    pub container_max_per_minute: u32,
    /// `znode.container.maxNeverUsedIntervalMs`: containers that never had a
    /// child are reaped after this long; 0 (default) keeps them.
    pub container_max_never_used_interval_ms: u64,
    /// `forceSync`: fdatasync each log batch (default yes). `no` is for
    /// benchmarks only: acknowledged writes can be lost.
    pub force_sync: bool,
    /// `preAllocSize` (KiB in zoo.cfg): log disk reserved per step. Default 64 MiB.
    pub preallocate_bytes: usize,
    /// `ringkeeper.segmentBytesMax`: a log segment rolls past this. Default 64 MiB.
    pub segment_bytes_max: usize,
    /// `ringkeeper.logWrite`: how a batch reaches the disk (direct,
    /// buffered or mmap; default direct).
    pub log_write: crate::log::LogWrite,
    /// `ringkeeper.fsyncBatchTxnsMax`: most txns one fdatasync covers.
    pub fsync_batch_txns_max: usize,
    /// `ringkeeper.fsyncBatchBytesMax`: most log bytes one fdatasync covers.
    pub fsync_batch_bytes_max: usize,
    /// `ringkeeper.fsyncDelayUs`: wait this long for more writes before
    /// starting a sync (0: start as soon as the previous one completes).
    pub fsync_delay_us: u64,
    /// `ringkeeper.spinBeforeParkUs`: how long an idle executor spins before
    /// sleeping, at the price of CPU. glommio spins only on executors
    /// pinned to a CPU (`ringkeeper.pinCores`); unpinned, it is warned about
    /// and has no effect.
    pub spin_before_park_us: u64,
    /// `ringkeeper.transparentHugePages`: let the kernel back the heap with
    /// 2 MiB transparent huge pages (default false: the server turns them
    /// off for itself, see [`crate::memory`]).
    pub transparent_huge_pages: bool,
    /// `ringkeeper.sharedTree`: when the consensus core runs beside the
    /// only shard on one executor (standalone), the two share one tree: the
    /// core preps against it plus its outstanding changes and the shard
    /// applies each committed txn in place (default true). false: the core
    /// keeps its own tree and hands the shard a version of it per batch, as
    /// in every other layout.
    pub shared_tree: bool,
    /// `ringkeeper.clientRing`: each shard drives its client sockets
    /// through an io_uring of its own (multishot receive into provided
    /// buffers, a loop turn's replies in one submission; `src/uring.rs`),
    /// default true. false, or a kernel that refuses the ring: glommio's
    /// streams, as before.
    pub client_ring: bool,
    /// `ringkeeper.epochCounterLimit`: the zxid counter at which the leader
    /// establishes a new epoch (default `u32::MAX - 2^24`, before the
    /// counter can run out as ZOOKEEPER-1277 describes; at least 2). Low
    /// values exist to exercise epoch changes in tests.
    pub epoch_counter_limit: u32,
    /// `ringkeeper.electionFinalizeWaitMs`: once a quorum agrees with its
    /// vote, how long an electing server waits for a better one before it
    /// decides. ZooKeeper waits 200 ms (`finalizeWait`); the wait only
    /// spares a re-election (a quorum agreeing is what makes the choice
    /// safe), so ringkeeper waits 50 ms by default: a failover is that much
    /// shorter. At least 1.
    pub election_finalize_wait_ms: u64,
    /// `electionPortBindRetry`: how many more times a peer port that
    /// cannot be bound is tried, a second apart (ZooKeeper: 3; 0: until it
    /// binds). A port is briefly held, e.g., by a connection another member
    /// made to it while this server was down.
    pub election_port_bind_retry: u32,
    /// `snapCount`: txns between snapshots (randomized down to half).
    pub snap_count: u64,
    /// `ringkeeper.snapshotWriteMBps`: the rate, in MB (10^6 bytes) per
    /// second, at which a background snapshot is encoded and written; 0
    /// writes as fast as the thread can. See [`DEFAULT_SNAPSHOT_WRITE_MBPS`].
    pub snapshot_write_mbps: u64,
    /// `autopurge.snapRetainCount` (at least 3).
    pub snap_retain_count: usize,
    /// `autopurge.purgeInterval` in hours; 0 (default) never purges.
    pub purge_interval_hours: u64,
    /// `metricsProvider.className=`[`PROMETHEUS_PROVIDER`] turns on the
    /// Prometheus endpoint; `None` (the default) serves no metrics.
    pub metrics: Option<MetricsConfig>,
    /// ZooKeeper's AdminServer (`admin.*`): the HTTP commands.
    pub admin: AdminConfig,
    /// Problems that did not stop parsing, e.g. `line 7: unknown key 'foo' ignored`.
    pub warnings: Vec<String>,
}

/// Where the Prometheus metrics endpoint listens (ZooKeeper's
/// PrometheusMetricsProvider settings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsConfig {
    /// `metricsProvider.httpHost`; 0.0.0.0 when not configured.
    pub http_host: IpAddr,
    /// `metricsProvider.httpPort`; 7000 when not configured.
    pub http_port: u16,
}

/// The provider class that turns the metrics endpoint on.
pub const PROMETHEUS_PROVIDER: &str =
    "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider";
/// ZooKeeper's built-in providers: no HTTP endpoint (DefaultMetricsProvider
/// is ZooKeeper's default and feeds mntr only, as ringkeeper always does).
const NO_HTTP_PROVIDERS: [&str; 2] = [
    "org.apache.zookeeper.metrics.impl.DefaultMetricsProvider",
    "org.apache.zookeeper.metrics.impl.NullMetricsProvider",
];
/// `metricsProvider.httpPort` when not configured.
pub const DEFAULT_METRICS_PORT: u16 = 7000;

/// ZooKeeper's AdminServer settings (JettyAdminServer's
/// `zookeeper.admin.*` properties, written `admin.*` in zoo.cfg).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminConfig {
    /// `admin.enableServer`: true unless the value is `false`.
    pub enabled: bool,
    /// `admin.serverAddress`; 0.0.0.0 when not configured (the embedded
    /// default: 127.0.0.1, as its client port).
    pub address: IpAddr,
    /// `admin.serverPort`; 8080 when not configured.
    pub port: u16,
    /// `admin.commandURL`: where the commands are; `/commands` by default.
    pub command_url: String,
    /// `admin.idleTimeout` in ms (30000): the longest one HTTP connection
    /// is kept.
    pub idle_timeout_ms: u64,
    /// The configuration file's text, as read (`initial_configuration`);
    /// None for the embedded default and a parsed string.
    pub initial_config: Option<String>,
}

/// `admin.serverPort` when not configured.
pub const DEFAULT_ADMIN_PORT: u16 = 8080;
/// `admin.commandURL` when not configured.
pub const DEFAULT_ADMIN_COMMAND_URL: &str = "/commands";
/// `admin.idleTimeout` when not configured (JettyAdminServer's 30 s).
pub const DEFAULT_ADMIN_IDLE_TIMEOUT_MS: u64 = 30_000;

impl AdminConfig {
    fn new(address: IpAddr) -> AdminConfig {
        AdminConfig {
            enabled: true,
            address,
            port: DEFAULT_ADMIN_PORT,
            command_url: DEFAULT_ADMIN_COMMAND_URL.to_string(),
            idle_timeout_ms: DEFAULT_ADMIN_IDLE_TIMEOUT_MS,
            initial_config: None,
        }
    }
}

/// Which four-letter-word commands may run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FourLetterWhitelist {
    /// `*`: every command.
    All,
    /// Only these commands.
    Words(BTreeSet<String>),
}

/// One `server.N` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    /// Host name or IP literal (IPv6 without brackets), not resolved: peers
    /// need not be resolvable when this server starts.
    pub host: String,
    /// Port followers use to connect to the leader.
    pub quorum_port: u16,
    /// Port used for leader election.
    pub election_port: u16,
    /// `:observer` was given.
    pub observer: bool,
    /// The `;[clientAddr:]clientPort` part; the address is 0.0.0.0 when
    /// only a port is given, as in ZooKeeper.
    pub client_addr: Option<SocketAddr>,
}

/// `ringkeeper.pinCores`: where to pin executors.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum CpuPinning {
    /// Let the OS schedule every executor.
    #[default]
    None,
    /// The consensus core runs on `cpus[0]`, shard `i` on `cpus[i + 1]`.
    /// Always holds at least two distinct CPU ids.
    Cpus(Vec<usize>),
}

/// `ringkeeper.consensusExecutor`: where the consensus core runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ConsensusExecutor {
    /// `shared` with one unpinned shard (the default layout on a 2-core
    /// machine), `own` otherwise.
    #[default]
    Auto,
    /// An executor of its own: the design card's layout.
    Own,
    /// A task on shard 0's executor: no thread hop between that shard and
    /// the core, and one thread fewer to wake per write.
    Shared,
}

impl ConsensusExecutor {
    /// The layout `Auto` stands for, given the shard count and pinning.
    pub fn resolve(self, shard_count: usize, pinning: &CpuPinning) -> ConsensusExecutor {
        match self {
            ConsensusExecutor::Auto if shard_count == 1 && *pinning == CpuPinning::None => {
                ConsensusExecutor::Shared
            }
            ConsensusExecutor::Auto => ConsensusExecutor::Own,
            chosen => chosen,
        }
    }
}

/// Why a configuration could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A line that cannot be parsed; `message` names the key when there is one.
    #[error("{path}: line {line}: {message}")]
    Line {
        path: String,
        line: usize,
        message: String,
    },
    /// A problem with the file as a whole, e.g. a required key is missing.
    #[error("{path}: {message}")]
    File { path: String, message: String },
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl Config {
    /// The server.N lines as QuorumVerifier.toString() prints them, with
    /// reconfig disabled (version 0): `conf` and /zookeeper/config.
    pub fn membership_text(&self) -> String {
        let mut s = String::new();
        for (id, spec) in &self.servers {
            let host = if spec.host.contains(':') {
                format!("[{}]", spec.host)
            } else {
                spec.host.clone()
            };
            s.push_str(&format!(
                "server.{id}={host}:{}:{}:{}",
                spec.quorum_port,
                spec.election_port,
                if spec.observer {
                    "observer"
                } else {
                    "participant"
                }
            ));
            if let Some(client) = spec.client_addr {
                s.push_str(&format!(";{client}"));
            }
            s.push('\n');
        }
        s.push_str("version=0");
        s
    }
    /// Parses the text of a `zoo.cfg`; `source_name` names it in errors.
    pub fn parse(text: &str, source_name: &str) -> Result<Config, ConfigError> {
        let mut builder = Builder::new();
        for entry in last_wins(scan(text, source_name)?) {
            builder
                .apply(&entry, source_name)
                .map_err(|reason| ConfigError::Line {
                    path: source_name.to_string(),
                    line: entry.line,
                    message: format!("{}: {reason}", entry.key),
                })?;
        }
        builder.finish(source_name)
    }

    /// Reads and parses a `zoo.cfg`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let name = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| ConfigError::Io {
            path: name.clone(),
            source,
        })?;
        // Java reads properties as ISO-8859-1, so stray non-UTF-8 bytes (say
        // in a comment) must not make the file unreadable.
        let text = String::from_utf8_lossy(&bytes);
        let mut cfg = Config::parse(&text, &name)?;
        cfg.admin.initial_config = Some(text.into_owned());
        Ok(cfg)
    }

    /// The embedded default: 127.0.0.1:2181, dataDir ./data, everything
    /// else default.
    pub fn embedded_default() -> Config {
        let tick = DEFAULT_TICK_TIME_MS;
        Config {
            client_port: DEFAULT_CLIENT_PORT,
            client_port_address: IpAddr::V4(Ipv4Addr::LOCALHOST),
            secure_client_port: None,
            secure_client_port_address: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            client_port_unification: false,
            client_tls: None,
            quorum_tls: None,
            sasl_provider: false,
            sasl_users: None,
            sasl_super_user: None,
            sasl_required: false,
            allow_sasl_failed_clients: false,
            quorum_sasl: None,
            data_dir: PathBuf::from("./data"),
            data_log_dir: PathBuf::from("./data"),
            tick_time_ms: tick,
            init_limit: 10,
            sync_limit: 5,
            max_client_cnxns: 60,
            max_cnxns: 0,
            global_outstanding_limit: DEFAULT_GLOBAL_OUTSTANDING_LIMIT,
            sessionless_cnxn_timeout_ms: 10_000,
            reply_bytes_max: 256 << 20,
            min_session_timeout_ms: default_min_session_timeout(tick),
            max_session_timeout_ms: default_max_session_timeout(tick),
            four_letter_whitelist: FourLetterWhitelist::default(),
            jute_max_buffer: DEFAULT_JUTE_MAX_BUFFER,
            extended_types_enabled: false,
            super_digest: None,
            enforce_quota: false,
            enforce_auth_schemes: None,
            servers: BTreeMap::new(),
            ensemble: false,
            myid: None,
            quorum_listen_on_all_ips: false,
            read_only_mode: false,
            shard_count: None,
            cpu_pinning: CpuPinning::None,
            consensus_executor: ConsensusExecutor::Auto,
            container_check_interval_ms: 60_000,
            container_max_per_minute: 10_000,
            container_max_never_used_interval_ms: 0,
            force_sync: true,
            preallocate_bytes: 64 << 20,
            segment_bytes_max: 64 << 20,
            log_write: crate::log::LogWrite::Direct,
            fsync_batch_txns_max: DEFAULT_FSYNC_BATCH_TXNS_MAX,
            fsync_batch_bytes_max: DEFAULT_FSYNC_BATCH_BYTES_MAX,
            fsync_delay_us: 0,
            spin_before_park_us: 0,
            transparent_huge_pages: false,
            shared_tree: true,
            client_ring: true,
            epoch_counter_limit: u32::MAX - EPOCH_COUNTER_MARGIN,
            election_finalize_wait_ms: 50,
            election_port_bind_retry: 3,
            snap_count: 100_000,
            snapshot_write_mbps: DEFAULT_SNAPSHOT_WRITE_MBPS,
            snap_retain_count: 3,
            purge_interval_hours: 0,
            metrics: None,
            // Loopback-only, as the embedded default's client port.
            admin: AdminConfig::new(IpAddr::V4(Ipv4Addr::LOCALHOST)),
            warnings: Vec::new(),
        }
    }

    /// Clamps a client's requested session timeout into
    /// `[min_session_timeout_ms, max_session_timeout_ms]`, as ZooKeeper does
    /// when it answers a ConnectRequest.
    pub fn session_timeout_clamp(&self, requested_ms: i32) -> i32 {
        let min = to_i32(self.min_session_timeout_ms);
        let max = to_i32(self.max_session_timeout_ms);
        // Not `i32::clamp`: it panics if a hand-built Config has min > max.
        requested_ms.max(min).min(max)
    }
}

fn to_i32(ms: u32) -> i32 {
    i32::try_from(ms).unwrap_or(i32::MAX)
}

/// Session timeouts travel as Java ints, so defaults stop at `i32::MAX`.
fn default_min_session_timeout(tick_ms: u32) -> u32 {
    tick_ms.saturating_mul(2).min(i32::MAX as u32)
}

fn default_max_session_timeout(tick_ms: u32) -> u32 {
    tick_ms.saturating_mul(20).min(i32::MAX as u32)
}

impl Default for FourLetterWhitelist {
    /// ZooKeeper's default: only `srvr`.
    fn default() -> Self {
        FourLetterWhitelist::Words(BTreeSet::from([ALWAYS_ALLOWED_WORD.to_string()]))
    }
}

impl FourLetterWhitelist {
    /// Parses a `4lw.commands.whitelist` value the way ZooKeeper's
    /// `FourLetterCommands.isEnabled` does: comma separated, entries
    /// trimmed, empty entries skipped, `*` anywhere means all, and `srvr` is
    /// always allowed.
    pub fn parse(list: &str) -> Self {
        let mut words = BTreeSet::from([ALWAYS_ALLOWED_WORD.to_string()]);
        for word in list.split(',').map(str::trim) {
            match word {
                "*" => return FourLetterWhitelist::All,
                "" => {}
                w => {
                    words.insert(w.to_string());
                }
            }
        }
        FourLetterWhitelist::Words(words)
    }

    /// Whether `word` may run. Case-sensitive, as in ZooKeeper.
    pub fn allows(&self, word: &str) -> bool {
        match self {
            FourLetterWhitelist::All => true,
            FourLetterWhitelist::Words(words) => words.contains(word),
        }
    }
}

// ---------------------------------------------------------------------------
// Lines

/// One `key=value` line.
#[derive(Debug)]
struct Entry<'a> {
    line: usize,
    key: &'a str,
    value: &'a str,
}

/// Splits the text into entries, skipping blank and comment lines.
fn scan<'a>(text: &'a str, source: &str) -> Result<Vec<Entry<'a>>, ConfigError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut entries = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        if let Some(entry) = scan_line(raw, line).map_err(|message| ConfigError::Line {
            path: source.to_string(),
            line,
            message,
        })? {
            entries.push(entry);
        }
    }
    Ok(entries)
}

fn scan_line(raw: &str, line: usize) -> Result<Option<Entry<'_>>, String> {
    let trimmed = raw.trim();
    // As in Java properties, a comment must start the line: `a=1 # x` is the
    // value `1 # x` (and ZooKeeper then fails to parse it as a number).
    if trimmed.is_empty() || trimmed.starts_with(['#', '!']) {
        return Ok(None);
    }
    let Some((key, value)) = trimmed.split_once('=') else {
        return Err(format!("expected key=value, found '{}'", shorten(trimmed)));
    };
    let key = key.trim();
    if key.is_empty() {
        return Err(format!("missing key before '=' in '{}'", shorten(trimmed)));
    }
    Ok(Some(Entry {
        line,
        key,
        value: value.trim(),
    }))
}

/// Keeps only the last occurrence of each key (Java properties semantics:
/// an earlier, even malformed, value is never looked at), in file order.
fn last_wins(entries: Vec<Entry<'_>>) -> Vec<Entry<'_>> {
    let last: HashMap<&str, usize> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| (e.key, i))
        .collect();
    entries
        .into_iter()
        .enumerate()
        .filter(|(i, e)| last[e.key] == *i)
        .map(|(_, e)| e)
        .collect()
}

/// Cuts long text for error messages.
fn shorten(text: &str) -> String {
    const MAX: usize = 60;
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_string(),
    }
}

// ---------------------------------------------------------------------------
// Keys

/// Accumulates entries; the fields whose defaults depend on other keys or
/// that are required stay `Option` until [`Builder::finish`].
struct Builder {
    cfg: Config,
    client_port: Option<u16>,
    data_dir: Option<PathBuf>,
    data_log_dir: Option<PathBuf>,
    min_session_timeout_ms: Option<u32>,
    max_session_timeout_ms: Option<u32>,
    /// `metricsProvider.className` named the Prometheus provider.
    metrics_on: bool,
    /// The `admin.*` settings the file made (without `admin.`): they win
    /// over `-Dzookeeper.admin.*` flags, as in ZooKeeper.
    admin_keys: BTreeSet<String>,
    /// `metricsProvider.httpHost` / `httpPort` as (line, value): checked in
    /// `finish`, and only when the endpoint is on (ZooKeeper's other
    /// providers never read them).
    metrics_host: Option<(usize, String)>,
    metrics_port: Option<(usize, String)>,
    /// The line that set `ringkeeper.spinBeforeParkUs`, for its warning.
    spin_line: Option<usize>,
    /// The line of each `server.N`, for the standalone check.
    server_lines: BTreeMap<u64, usize>,
    /// `standaloneEnabled` (ZooKeeper's default: true).
    standalone_enabled: bool,
    /// `enforce.auth.enabled` and `enforce.auth.schemes` as (line, value),
    /// checked together in `finish`.
    enforce_auth_enabled: Option<(usize, bool)>,
    enforce_auth_schemes: Option<(usize, String)>,
    /// The client port's `ssl.*` keys, settled in `finish` when TLS is on.
    ssl: tls::SslKeys,
    /// `secureClientPortAddress`'s line, for the check against the port.
    secure_address_line: Option<usize>,
    /// The line of `secureClientPort` or `client.portUnification=true`,
    /// for errors about the TLS they ask for.
    client_tls_line: Option<usize>,
    /// `X509AuthenticationProvider.superUser`.
    x509_super_user: Option<String>,
    /// `netty.server.outstandingHandshake.limit` (positive: a limit).
    handshake_limit: Option<usize>,
    /// `client.certReload`.
    cert_reload: bool,
    /// The `ssl.quorum.*` keys.
    quorum_ssl: tls::SslKeys,
    /// `sslQuorum` and `portUnification` (their lines when true).
    ssl_quorum: Option<usize>,
    quorum_port_unification: Option<usize>,
    /// `sslQuorumReloadCertFiles`.
    quorum_reload: bool,
    /// `java.security.auth.login.config` as (line, path).
    jaas_path: Option<(usize, String)>,
    /// `zookeeper.sasl.serverconfig`: the JAAS section (default Server).
    jaas_section: Option<String>,
    /// `quorum.auth.enableSasl=true`'s line, and the other quorum.auth keys.
    quorum_sasl_line: Option<usize>,
    quorum_learner_require: bool,
    quorum_server_require: bool,
    quorum_learner_context: Option<String>,
    quorum_server_context: Option<String>,
}

impl Builder {
    fn new() -> Builder {
        let mut cfg = Config::embedded_default();
        // A file without clientPortAddress listens on all interfaces, as
        // ZooKeeper does; only the embedded default is loopback-only.
        cfg.client_port_address = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
        cfg.admin.address = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
        Builder {
            cfg,
            client_port: None,
            data_dir: None,
            data_log_dir: None,
            min_session_timeout_ms: None,
            max_session_timeout_ms: None,
            metrics_on: false,
            admin_keys: BTreeSet::new(),
            metrics_host: None,
            metrics_port: None,
            spin_line: None,
            server_lines: BTreeMap::new(),
            standalone_enabled: true,
            enforce_auth_enabled: None,
            enforce_auth_schemes: None,
            ssl: tls::SslKeys::default(),
            secure_address_line: None,
            client_tls_line: None,
            x509_super_user: None,
            handshake_limit: None,
            cert_reload: false,
            quorum_ssl: tls::SslKeys::new("ssl.quorum."),
            ssl_quorum: None,
            quorum_port_unification: None,
            quorum_reload: false,
            jaas_path: None,
            jaas_section: None,
            quorum_sasl_line: None,
            quorum_learner_require: false,
            quorum_server_require: false,
            quorum_learner_context: None,
            quorum_server_context: None,
        }
    }

    /// Applies one entry; the error is the reason, without the key.
    fn apply(&mut self, e: &Entry<'_>, source: &str) -> Result<(), String> {
        let (cfg, v) = (&mut self.cfg, e.value);
        match e.key {
            "clientPort" => self.client_port = Some(parse_num(v, "a port number (0-65535)")?),
            "clientPortAddress" => cfg.client_port_address = resolve_ip(v)?,
            "dataDir" => self.data_dir = Some(parse_path(v)?),
            "dataLogDir" => self.data_log_dir = Some(parse_path(v)?),
            "tickTime" => cfg.tick_time_ms = parse_tick_time(v)?,
            "initLimit" => cfg.init_limit = parse_num(v, UINT)?,
            "syncLimit" => cfg.sync_limit = parse_num(v, UINT)?,
            "maxClientCnxns" => cfg.max_client_cnxns = parse_num(v, UINT)?,
            "maxCnxns" | "zookeeper.maxCnxns" => cfg.max_cnxns = parse_num(v, UINT)?,
            "globalOutstandingLimit" | "zookeeper.globalOutstandingLimit" => {
                cfg.global_outstanding_limit = parse_num(v, UINT)?
            }
            "nio.sessionlessCnxnTimeout" | "zookeeper.nio.sessionlessCnxnTimeout" => {
                cfg.sessionless_cnxn_timeout_ms = parse_num::<u32>(v, UINT)?.max(1)
            }
            "ringkeeper.replyBytesMax" => {
                cfg.reply_bytes_max = parse_num::<usize>(v, UINT)?;
                // Below one reply of jute.maxbuffer's default size, every
                // large read would close its connection.
                if cfg.reply_bytes_max < 1 << 20 {
                    return Err("must be at least 1048576 (1 MiB)".into());
                }
            }
            "minSessionTimeout" => self.min_session_timeout_ms = parse_session_timeout(v)?,
            "maxSessionTimeout" => self.max_session_timeout_ms = parse_session_timeout(v)?,
            "4lw.commands.whitelist" | "zookeeper.4lw.commands.whitelist" => {
                cfg.four_letter_whitelist = FourLetterWhitelist::parse(v)
            }
            "jute.maxbuffer" | "zookeeper.jute.maxbuffer" => {
                cfg.jute_max_buffer = parse_jute_max_buffer(v)?
            }
            "extendedTypesEnabled" | "zookeeper.extendedTypesEnabled" => {
                cfg.extended_types_enabled = parse_bool(v)?
            }
            "superDigest"
            | "DigestAuthenticationProvider.superDigest"
            | "zookeeper.DigestAuthenticationProvider.superDigest" => {
                cfg.super_digest = parse_super_digest(v)?
            }
            // ZooKeeper reads it with Boolean.parseBoolean: anything but
            // "true" (any case) is false, never an error.
            "enforceQuota" | "zookeeper.enforceQuota" => {
                cfg.enforce_quota = v.eq_ignore_ascii_case("true")
            }
            "znode.container.checkIntervalMs" => {
                cfg.container_check_interval_ms = parse_num::<u64>(v, UINT)?.max(1)
            }
            "znode.container.maxPerMinute" => {
                cfg.container_max_per_minute = parse_num::<u32>(v, UINT)?.max(1)
            }
            "znode.container.maxNeverUsedIntervalMs" => {
                cfg.container_max_never_used_interval_ms = parse_num(v, UINT)?
            }
            "forceSync" | "zookeeper.forceSync" => cfg.force_sync = parse_yes_no(v)?,
            "preAllocSize" | "zookeeper.preAllocSize" => {
                cfg.preallocate_bytes = parse_num::<usize>(v, UINT)?.max(1) * 1024
            }
            "snapCount" | "zookeeper.snapCount" => {
                cfg.snap_count = parse_num::<u64>(v, UINT)?.max(2)
            }
            "ringkeeper.snapshotWriteMBps" => cfg.snapshot_write_mbps = parse_num(v, UINT)?,
            "autopurge.snapRetainCount" => cfg.snap_retain_count = parse_num(v, UINT)?,
            "autopurge.purgeInterval" => cfg.purge_interval_hours = parse_num(v, UINT)?,
            "ringkeeper.segmentBytesMax" => {
                cfg.segment_bytes_max = parse_num::<usize>(v, UINT)?.max(4096)
            }
            "ringkeeper.logWrite" => cfg.log_write = parse_log_write(v)?,
            "ringkeeper.fsyncBatchTxnsMax" => {
                cfg.fsync_batch_txns_max = parse_num::<usize>(v, UINT)?.max(1)
            }
            "ringkeeper.fsyncBatchBytesMax" => {
                cfg.fsync_batch_bytes_max = parse_num::<usize>(v, UINT)?.max(1)
            }
            "ringkeeper.fsyncDelayUs" => cfg.fsync_delay_us = parse_num(v, UINT)?,
            "ringkeeper.epochCounterLimit" => {
                let max = u32::MAX - EPOCH_COUNTER_MARGIN;
                let n: u32 = parse_num(v, UINT)?;
                if !(2..=max).contains(&n) {
                    return Err(format!("'{n}' is not between 2 and {max}"));
                }
                cfg.epoch_counter_limit = n;
            }
            "electionPortBindRetry" | "zookeeper.electionPortBindRetry" => {
                cfg.election_port_bind_retry = parse_num(v, UINT)?
            }
            "ringkeeper.electionFinalizeWaitMs" => {
                cfg.election_finalize_wait_ms = parse_num::<u64>(v, UINT)?.max(1)
            }
            "ringkeeper.spinBeforeParkUs" => {
                cfg.spin_before_park_us = parse_num(v, UINT)?;
                self.spin_line = Some(e.line);
            }
            "ringkeeper.transparentHugePages" => cfg.transparent_huge_pages = parse_bool(v)?,
            "ringkeeper.sharedTree" => cfg.shared_tree = parse_bool(v)?,
            "ringkeeper.clientRing" => cfg.client_ring = parse_bool(v)?,
            // Boolean.parseBoolean, as AuthenticationHelper reads it.
            "enforce.auth.enabled" | "zookeeper.enforce.auth.enabled" => {
                self.enforce_auth_enabled = Some((e.line, v.eq_ignore_ascii_case("true")))
            }
            "enforce.auth.schemes" | "zookeeper.enforce.auth.schemes" => {
                self.enforce_auth_schemes = Some((e.line, v.to_string()))
            }
            "standaloneEnabled" => self.standalone_enabled = parse_bool(v)?,
            "quorumListenOnAllIPs" => cfg.quorum_listen_on_all_ips = parse_bool(v)?,
            "readonlymode.enabled" => cfg.read_only_mode = parse_bool(v)?,
            "reconfigEnabled" => {
                if parse_bool(v)? {
                    return Err("dynamic reconfiguration is not supported yet".into());
                }
            }
            "dynamicConfigFile" => {
                return Err("not supported yet: put the server.N lines in this file".into())
            }
            k if k.starts_with("group.") || k.starts_with("weight.") => {
                return Err(
                    "hierarchical quorums (group.N / weight.N) are not supported \
                            yet: ringkeeper counts a majority of the server.N lines"
                        .into(),
                )
            }
            "peerType" => {
                if v != "participant" {
                    return Err(format!("peerType={v}: only participants are supported yet"));
                }
            }
            "ringkeeper.shards" => cfg.shard_count = Some(parse_shard_count(v)?),
            "ringkeeper.pinCores" => cfg.cpu_pinning = parse_pinning(v)?,
            "ringkeeper.consensusExecutor" => cfg.consensus_executor = parse_consensus_executor(v)?,
            key if key.starts_with("admin.") => {
                let name = &key["admin.".len()..];
                apply_admin(&mut cfg.admin, name, v)?;
                self.admin_keys.insert(name.to_string());
            }
            "metricsProvider.className" => self.metrics_on = parse_metrics_provider(v)?,
            "metricsProvider.httpHost" => self.metrics_host = Some((e.line, v.to_string())),
            "metricsProvider.httpPort" => self.metrics_port = Some((e.line, v.to_string())),
            "metricsProvider.exportJvmInfo" => tracing::info!(
                source,
                line = e.line,
                "metricsProvider.exportJvmInfo={v} ignored: ringkeeper has no JVM to export"
            ),
            key => self.apply_other(key, v, e.line, source)?,
        }
        Ok(())
    }

    /// The client port's TLS keys (with or without `zookeeper.`): Some
    /// when `key` is one of them.
    fn apply_tls(&mut self, key: &str, v: &str, line: usize) -> Option<Result<(), String>> {
        let k = key.strip_prefix("zookeeper.").unwrap_or(key);
        let cfg = &mut self.cfg;
        let r = match k {
            "secureClientPort" => parse_num(v, "a port number (0-65535)").map(|p: u16| {
                // ZooKeeper treats 0 as not set.
                cfg.secure_client_port = (p != 0).then_some(p);
                self.client_tls_line = Some(line);
            }),
            "secureClientPortAddress" => resolve_ip(v).map(|ip| {
                cfg.secure_client_port_address = ip;
                self.secure_address_line = Some(line);
            }),
            // Boolean.getBoolean: only "true" (any case) is true.
            "client.portUnification" => {
                cfg.client_port_unification = v.trim().eq_ignore_ascii_case("true");
                if cfg.client_port_unification {
                    self.client_tls_line.get_or_insert(line);
                }
                Ok(())
            }
            // Netty or NIO: ringkeeper's shards serve both ways alike.
            "serverCnxnFactory" => Ok(()),
            "X509AuthenticationProvider.superUser" => {
                self.x509_super_user = Some(v.to_string());
                Ok(())
            }
            "authProvider.x509" => {
                if v.trim() == "org.apache.zookeeper.server.auth.X509AuthenticationProvider" {
                    Ok(())
                } else {
                    Err(format!(
                        "only ZooKeeper's X509AuthenticationProvider is available, not '{v}'"
                    ))
                }
            }
            "netty.server.outstandingHandshake.limit" => v
                .trim()
                .parse::<i64>()
                .map(|n| self.handshake_limit = (n > 0).then_some(n as usize))
                .map_err(|_| format!("'{v}' is not an integer")),
            // Boolean.getBoolean: only "true" (any case) is true.
            "client.certReload" => {
                self.cert_reload = v.trim().eq_ignore_ascii_case("true");
                Ok(())
            }
            // Boolean.parseBoolean, as QuorumPeerConfig reads them.
            "sslQuorum" => {
                self.ssl_quorum = v.trim().eq_ignore_ascii_case("true").then_some(line);
                Ok(())
            }
            "portUnification" => {
                self.quorum_port_unification =
                    v.trim().eq_ignore_ascii_case("true").then_some(line);
                Ok(())
            }
            "sslQuorumReloadCertFiles" => {
                self.quorum_reload = v.trim().eq_ignore_ascii_case("true");
                Ok(())
            }
            _ if k.starts_with("ssl.quorum.") => return self.quorum_ssl.take(k, v, line),
            _ => return self.ssl.take(k, v, line),
        };
        Some(r)
    }

    /// SASL keys (with or without `zookeeper.`): Some when `key` is one.
    fn apply_sasl(&mut self, key: &str, v: &str, line: usize) -> Option<Result<(), String>> {
        let k = key.strip_prefix("zookeeper.").unwrap_or(key);
        let cfg = &mut self.cfg;
        // Boolean.parseBoolean: only "true" (any case) is true.
        let on = v.trim().eq_ignore_ascii_case("true");
        match k {
            _ if k.starts_with("authProvider.") && v.trim() == security::SASL_PROVIDER => {
                cfg.sasl_provider = true
            }
            // The JVM's property, which zkServer.sh passes with
            // SERVER_JVMFLAGS; ringkeeper also takes it from zoo.cfg.
            "java.security.auth.login.config" => self.jaas_path = Some((line, v.to_string())),
            "sasl.serverconfig" => self.jaas_section = Some(v.trim().to_string()),
            "quorum.auth.enableSasl" => self.quorum_sasl_line = on.then_some(line),
            "quorum.auth.learnerRequireSasl" => self.quorum_learner_require = on,
            "quorum.auth.serverRequireSasl" => self.quorum_server_require = on,
            "quorum.auth.learner.saslLoginContext" => {
                self.quorum_learner_context = Some(v.trim().to_string())
            }
            "quorum.auth.server.saslLoginContext" => {
                self.quorum_server_context = Some(v.trim().to_string())
            }
            // Kerberos only; the thread count is Java's.
            "quorum.auth.kerberos.servicePrincipal" | "quorum.cnxn.threads.size" => {}
            "superUser" => cfg.sasl_super_user = Some(v.to_string()),
            "sessionRequireClientSASLAuth" => cfg.sasl_required = on,
            "allowSaslFailedClients" => cfg.allow_sasl_failed_clients = on,
            _ => return None,
        }
        Some(Ok(()))
    }

    /// `server.N` lines, and keys ringkeeper does not use.
    fn apply_other(&mut self, key: &str, v: &str, line: usize, src: &str) -> Result<(), String> {
        if let Some(r) = self.apply_tls(key, v, line) {
            return r;
        }
        if let Some(r) = self.apply_sasl(key, v, line) {
            return r;
        }
        if let Some(id) = key.strip_prefix("server.") {
            let id = id.parse::<u64>().map_err(|_| {
                format!("server id '{id}' is not a non-negative integer (expected server.N)")
            })?;
            self.cfg.servers.insert(id, parse_server(v)?);
            self.server_lines.insert(id, line);
        } else if security::is_unsupported(key) {
            // Before the known keys: some of these are listed there too.
            return Err(security::unsupported_reason());
        } else if is_known_zookeeper_key(key) {
            tracing::debug!(
                source = src,
                line,
                key,
                "ZooKeeper option not used by ringkeeper"
            );
        } else {
            tracing::warn!(source = src, line, key, "unknown configuration key ignored");
            let warning = format!("line {line}: unknown key '{key}' ignored");
            self.cfg.warnings.push(warning);
        }
        Ok(())
    }

    fn finish(self, source: &str) -> Result<Config, ConfigError> {
        let file_error = |message: String| ConfigError::File {
            path: source.to_string(),
            message,
        };
        let mut cfg = self.cfg;
        for var in ["SERVER_JVMFLAGS", "JVMFLAGS"] {
            if let Ok(flags) = std::env::var(var) {
                apply_admin_flags(&mut cfg.admin, &self.admin_keys, &flags)
                    .map_err(|message| file_error(format!("{var}: {message}")))?;
            }
        }
        if let (Some(line), None) = (self.secure_address_line, cfg.secure_client_port) {
            return Err(ConfigError::Line {
                path: source.to_string(),
                line,
                message: "secureClientPortAddress is set but secureClientPort is not set".into(),
            });
        }
        cfg.client_port = match (self.client_port, cfg.secure_client_port) {
            (Some(p), _) => p,
            (None, Some(_)) => 0,
            (None, None) => return Err(file_error("clientPort is not set".into())),
        };
        if cfg.secure_client_port.is_some() || cfg.client_port_unification {
            let tls = self
                .ssl
                .settle(
                    self.client_tls_line.unwrap_or(0),
                    self.x509_super_user.clone(),
                    self.handshake_limit,
                    self.cert_reload,
                )
                .map_err(|(line, message)| ConfigError::Line {
                    path: source.to_string(),
                    line,
                    message,
                })?;
            cfg.client_tls = Some(tls);
        }
        if let Some(at) = self.ssl_quorum.or(self.quorum_port_unification) {
            let tls = self
                .quorum_ssl
                .settle_quorum(
                    at,
                    self.ssl_quorum.is_some(),
                    self.quorum_port_unification.is_some(),
                    self.quorum_reload,
                )
                .map_err(|(line, message)| ConfigError::Line {
                    path: source.to_string(),
                    line,
                    message,
                })?;
            cfg.quorum_tls = Some(tls);
        }
        cfg.data_dir = self
            .data_dir
            .ok_or_else(|| file_error("dataDir is not set".into()))?;
        cfg.data_log_dir = self.data_log_dir.unwrap_or_else(|| cfg.data_dir.clone());
        let tick = cfg.tick_time_ms;
        cfg.min_session_timeout_ms = self
            .min_session_timeout_ms
            .unwrap_or_else(|| default_min_session_timeout(tick));
        cfg.max_session_timeout_ms = self
            .max_session_timeout_ms
            .unwrap_or_else(|| default_max_session_timeout(tick));
        if cfg.min_session_timeout_ms > cfg.max_session_timeout_ms {
            return Err(file_error(format!(
                "minSessionTimeout ({} ms) must not be larger than maxSessionTimeout ({} ms)",
                cfg.min_session_timeout_ms, cfg.max_session_timeout_ms
            )));
        }
        cfg.ensemble = standalone::check(&cfg.servers, &self.server_lines, self.standalone_enabled)
            .map_err(|(line, message)| ConfigError::Line {
                path: source.to_string(),
                line,
                message,
            })?;
        let enabled = self.enforce_auth_enabled;
        let mut schemes = self.enforce_auth_schemes;
        if cfg.sasl_required {
            // AuthenticationHelper: sessionRequireClientSASLAuth turns
            // enforcement on with sasl among the schemes.
            let (line, list) = schemes.take().unwrap_or((0, String::new()));
            let list = if list.trim().is_empty() {
                "sasl".to_string()
            } else {
                format!("{list},sasl")
            };
            schemes = Some((line, list));
        }
        cfg.enforce_auth_schemes = security::enforce_auth(
            enabled.is_some_and(|(_, on)| on) || cfg.sasl_required,
            schemes.as_ref().map(|(_, v)| v.as_str()),
            cfg.sasl_provider,
        )
        .map_err(|(key, message)| {
            let line = match key {
                "enforce.auth.schemes" => schemes.as_ref().map(|(l, _)| *l),
                _ => enabled.map(|(l, _)| l),
            };
            ConfigError::Line {
                path: source.to_string(),
                line: line.unwrap_or(0),
                message: format!("{key}: {message}"),
            }
        })?;
        let quorum_keys = self.quorum_sasl_line.map(|line| QuorumSaslKeys {
            line,
            learner_require: self.quorum_learner_require,
            server_require: self.quorum_server_require,
            learner_context: self
                .quorum_learner_context
                .unwrap_or_else(|| "QuorumLearner".into()),
            server_context: self
                .quorum_server_context
                .unwrap_or_else(|| "QuorumServer".into()),
        });
        (cfg.sasl_users, cfg.quorum_sasl) = finish_jaas(
            self.jaas_path,
            self.jaas_section.as_deref(),
            quorum_keys,
            source,
        )?;
        reconcile_shards(&mut cfg, source);
        if let Some(line) = self.spin_line {
            if cfg.spin_before_park_us > 0 && cfg.cpu_pinning == CpuPinning::None {
                // glommio only spins on an executor bound to a CPU.
                let warning = format!(
                    "line {line}: ringkeeper.spinBeforeParkUs has no effect without \
                     ringkeeper.pinCores (only pinned executors spin)"
                );
                tracing::warn!(source, "{warning}");
                cfg.warnings.push(warning);
            }
        }
        cfg.metrics = finish_metrics(
            self.metrics_on,
            self.metrics_host,
            self.metrics_port,
            &mut cfg.warnings,
            source,
        )?;
        Ok(cfg)
    }
}

/// The JAAS `Server` section's users and, with quorum SASL, its quorum
/// sections, from zoo.cfg's `java.security.auth.login.config` or, as
/// zkServer.sh passes it, a `-Djava.security.auth.login.config=` in
/// SERVER_JVMFLAGS or JVMFLAGS.
fn finish_jaas(
    key: Option<(usize, String)>,
    section: Option<&str>,
    quorum: Option<QuorumSaslKeys>,
    source: &str,
) -> Result<(Option<SaslUsers>, Option<security::QuorumSasl>), ConfigError> {
    const FLAG: &str = "-Djava.security.auth.login.config=";
    let from_env = || {
        ["SERVER_JVMFLAGS", "JVMFLAGS"].iter().find_map(|var| {
            let flags = std::env::var(var).ok()?;
            let path = flags
                .split_whitespace()
                .find_map(|f| f.strip_prefix(FLAG))?;
            Some((var.to_string(), path.to_string()))
        })
    };
    let located = match (key, from_env()) {
        (Some((line, path)), _) => {
            Some((line, "java.security.auth.login.config".to_string(), path))
        }
        (None, Some((var, path))) => Some((0, format!("{var} ({FLAG}...)"), path)),
        (None, None) => None,
    };
    let Some((line, origin, path)) = located else {
        return match quorum {
            Some(q) => Err(ConfigError::Line {
                path: source.to_string(),
                line: q.line,
                message: "quorum.auth.enableSasl: needs a JAAS file \
                          (java.security.auth.login.config) with QuorumServer and QuorumLearner \
                          sections"
                    .into(),
            }),
            None => Ok((None, None)),
        };
    };
    let fail = |message: String| ConfigError::Line {
        path: source.to_string(),
        line,
        message: format!("{origin}: {message}"),
    };
    let text = std::fs::read_to_string(path.trim())
        .map_err(|e| fail(format!("cannot read the JAAS file {path}: {e}")))?;
    let section = section.unwrap_or("Server");
    let users = match jaas::jaas_users(&text, section) {
        Ok(users) => Some(users),
        // A file written for quorum SASL alone leaves client SASL off.
        Err(e) if quorum.is_some() && e.starts_with("no JAAS section") => None,
        Err(e) => return Err(fail(format!("{path}: {e}"))),
    };
    let quorum = match quorum {
        Some(q) => {
            let server_users = jaas::jaas_users(&text, &q.server_context)
                .map_err(|e| fail(format!("{path}: {e}")))?;
            let learner_login = jaas::jaas_login(&text, &q.learner_context)
                .map_err(|e| fail(format!("{path}: {e}")))?;
            Some(security::QuorumSasl {
                learner_require: q.learner_require,
                server_require: q.server_require,
                server_users,
                learner_login,
            })
        }
        None => None,
    };
    Ok((users, quorum))
}

/// A JAAS section's users and their passwords.
type SaslUsers = BTreeMap<String, tls::Secret>;

/// The quorum SASL keys, collected while the file is read.
struct QuorumSaslKeys {
    /// The line of `quorum.auth.enableSasl=true`.
    line: usize,
    learner_require: bool,
    server_require: bool,
    learner_context: String,
    server_context: String,
}

/// The metrics endpoint, when `metricsProvider.className` turned it on.
/// Otherwise a configured host or port only earns a warning: ZooKeeper's
/// other providers ignore them too, but whoever wrote them expected metrics.
fn finish_metrics(
    on: bool,
    host: Option<(usize, String)>,
    port: Option<(usize, String)>,
    warnings: &mut Vec<String>,
    source: &str,
) -> Result<Option<MetricsConfig>, ConfigError> {
    if !on {
        for (key, (line, _)) in [("httpHost", &host), ("httpPort", &port)]
            .into_iter()
            .filter_map(|(k, v)| Some((k, v.as_ref()?)))
        {
            let warning = format!(
                "line {line}: metricsProvider.{key} has no effect without \
                 metricsProvider.className={PROMETHEUS_PROVIDER}"
            );
            tracing::warn!(source, "{warning}");
            warnings.push(warning);
        }
        return Ok(None);
    }
    let line_error = |line: usize, key: &str, reason: String| ConfigError::Line {
        path: source.to_string(),
        line,
        message: format!("metricsProvider.{key}: {reason}"),
    };
    let http_host = match host {
        Some((line, v)) => resolve_ip(&v).map_err(|r| line_error(line, "httpHost", r))?,
        None => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
    };
    let http_port = match port {
        Some((line, v)) => {
            parse_num(&v, "a port number (0-65535)").map_err(|r| line_error(line, "httpPort", r))?
        }
        None => DEFAULT_METRICS_PORT,
    };
    Ok(Some(MetricsConfig {
        http_host,
        http_port,
    }))
}

/// With `ringkeeper.pinCores` alone the shard count is the number of shard
/// CPUs listed; with both keys and a mismatch, `ringkeeper.shards` wins and
/// executors share CPUs (or some listed CPUs stay idle), which is worth a
/// warning but still a valid setup (e.g. oversubscribing in tests).
fn reconcile_shards(cfg: &mut Config, source: &str) {
    let CpuPinning::Cpus(cpus) = &cfg.cpu_pinning else {
        return;
    };
    let pinned = cpus.len() - 1;
    match cfg.shard_count {
        None => cfg.shard_count = Some(pinned),
        Some(n) if n != pinned => {
            let warning = format!(
                "ringkeeper.shards={n} does not match the {pinned} shard CPUs in ringkeeper.pinCores"
            );
            tracing::warn!(source, "{warning}");
            cfg.warnings.push(warning);
        }
        Some(_) => {}
    }
}

/// ZooKeeper options ringkeeper accepts but ignores. ZooKeeper turns any
/// key it does not parse itself into the system property `zookeeper.<key>`,
/// so the names here are those properties without the prefix, plus the keys
/// `parseProperties` handles directly.
const KNOWN_KEYS: &[&str] = &[
    "allowSaslFailedClients",
    "bitHashCacheSize",
    "clientCnxnSocket",
    "clientPortListenBacklog",
    "clientTcpKeepAlive",
    "closeSessionTxn.enabled",
    "cnxTimeout",
    "commitLogCount",
    "connectToLearnerMasterLimit",
    "datadir.autocreate",
    "db.autocreate",
    "disableAutoWatchReset",
    "dynamicConfigFile",
    "electionAlg",
    "emulate353TTLNodes",
    "enableEagerACLCheck",
    "ensembleAuthName",
    "fips-mode",
    "flushDelay",
    "forceSnapshotSync",
    "forceSync",
    "fsync.warningthresholdms",
    "intBufferStartingSizeBytes",
    "kinit",
    "largeRequestMaxBytes",
    "largeRequestThreshold",
    "leaderConnectDelayDuringRetryMs",
    "leaderServes",
    "localSessionsEnabled",
    "localSessionsUpgradingEnabled",
    "maxBatchSize",
    "maxGetChildrenResponseCacheSize",
    "maxInProcessingDeadWatchers",
    "maxResponseCacheSize",
    "maxWriteQueuePollTime",
    "observerMasterPort",
    "oraclePath",
    "peerType",
    "portUnification",
    "preAllocSize",
    "quorumCnxnTimeoutMs",
    "quorumListenOnAllIPs",
    "reconfigEnabled",
    "requireKerberosConfig",
    "secureClientPort",
    "secureClientPortAddress",
    "serverCnxnFactory",
    "sessionRequireClientSASLAuth",
    "skipACL",
    "snapCount",
    "snapSizeLimitInKb",
    "snapshotSizeFactor",
    "sslQuorum",
    "sslQuorumReloadCertFiles",
    "superUser",
    "syncEnabled",
    "tcpKeepAlive",
    "throttled_op_wait_time",
    "txnLogSizeLimitInKb",
    "version",
    "watchManagerName",
    "watcherCleanIntervalInSeconds",
    "watcherCleanThreadsNum",
    "watcherCleanThreshold",
];

/// Families of ZooKeeper options, matched by prefix. `zookeeper.` covers
/// system-property style keys written out in full.
const KNOWN_PREFIXES: &[&str] = &[
    "zookeeper.",
    "audit.",
    "authProvider.",
    "autopurge.",
    "client.",
    "commitProcessor.",
    "connection_throttle_",
    "digest.",
    "DigestAuthenticationProvider.",
    "enforce.auth.",
    "fastleader.",
    "follower.",
    "group.",
    "jute.",
    "jvm.pause.",
    "leader.",
    "learner.",
    "messageTracker.",
    "metricsProvider.",
    "multiAddress.",
    "netty.",
    "nio.",
    "observer.",
    "observerMaster.",
    "pathStats.",
    "quorum.",
    "request_",
    "SASLAuthenticationProvider.",
    "sasl.",
    "snapshot.",
    "ssl.",
    "kerberos.",
    "weight.",
    "X509AuthenticationProvider.",
];

fn is_known_zookeeper_key(key: &str) -> bool {
    KNOWN_KEYS.contains(&key) || KNOWN_PREFIXES.iter().any(|p| key.starts_with(p))
}

// ---------------------------------------------------------------------------
// Values

/// A background snapshot's pace. Unpaced, a snapshot of 1M znodes
/// (~190 MB) is encoded in ~1.5 s by a thread that, even at nice 19, takes
/// a core's worth of CPU and disk bandwidth the serving threads share
/// (on SMT siblings and on one disk): writes/s fell to ~0.6 of the rate
/// between snapshots. Paced, the same work is spread thin
/// (tuning/scale.md, "Snapshot pace").
pub const DEFAULT_SNAPSHOT_WRITE_MBPS: u64 = 32;

/// Group-commit bounds, chosen from measurements on the 2-core dev machine
/// (tuning/fsync.md).
pub const DEFAULT_FSYNC_BATCH_TXNS_MAX: usize = 10_000;
pub const DEFAULT_FSYNC_BATCH_BYTES_MAX: usize = 16 << 20;

const UINT: &str = "a non-negative integer";

fn parse_num<T: std::str::FromStr>(v: &str, expected: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("'{}' is not {expected}", shorten(v)))
}

/// ZooKeeper's forceSync takes "yes"/"no" (anything but "no" means yes).
fn parse_yes_no(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "no" | "false" => Ok(false),
        "yes" | "true" => Ok(true),
        _ => Err(format!("'{}' is not yes or no", shorten(v))),
    }
}

fn parse_path(v: &str) -> Result<PathBuf, String> {
    if v.is_empty() {
        return Err("empty path".into());
    }
    Ok(PathBuf::from(v))
}

fn parse_tick_time(v: &str) -> Result<u32, String> {
    match parse_num::<u32>(v, "a positive integer")? {
        0 => Err("must be greater than 0".into()),
        t if t > i32::MAX as u32 => Err(format!("{t} is too large (max {})", i32::MAX)),
        t => Ok(t),
    }
}

/// `-1` means "the default", as in ZooKeeper. Other values must fit the
/// Java int the timeout is sent as.
fn parse_session_timeout(v: &str) -> Result<Option<u32>, String> {
    if v == "-1" {
        return Ok(None);
    }
    let expected = "a timeout in ms (a non-negative integer, or -1 for the default)";
    match parse_num::<u32>(v, expected)? {
        t if t > i32::MAX as u32 => Err(format!("{t} is too large (max {})", i32::MAX)),
        t => Ok(Some(t)),
    }
}

/// Packet lengths are Java ints, and 0 would reject every packet.
fn parse_jute_max_buffer(v: &str) -> Result<usize, String> {
    let expected = "a positive integer";
    match parse_num::<u32>(v, expected)? {
        0 => Err("must be greater than 0".into()),
        n if n > i32::MAX as u32 => Err(format!("{n} is too large (max {})", i32::MAX)),
        n => Ok(n as usize),
    }
}

/// ZooKeeper's `parseBoolean`: `true` or `false`, any case.
fn parse_bool(v: &str) -> Result<bool, String> {
    if v.eq_ignore_ascii_case("true") {
        Ok(true)
    } else if v.eq_ignore_ascii_case("false") {
        Ok(false)
    } else {
        Err(format!("'{}' is not true or false", shorten(v)))
    }
}

/// One AdminServer setting, `name` being the key without `admin.`.
fn apply_admin(admin: &mut AdminConfig, name: &str, v: &str) -> Result<(), String> {
    match name {
        "enableServer" => admin.enabled = parse_admin_enable(v)?,
        "serverAddress" => admin.address = resolve_ip(v)?,
        "serverPort" => admin.port = parse_num(v, "a port number (0-65535)")?,
        "commandURL" => admin.command_url = parse_command_url(v)?,
        "idleTimeout" => admin.idle_timeout_ms = parse_idle_timeout(v)?,
        "httpVersion" => parse_http_version(v)?,
        "portUnification" | "forceHttps" => {
            if parse_bool(v)? {
                return Err("HTTPS on the AdminServer is not supported by ringkeeper \
                    (serve it behind a TLS-terminating proxy, or leave it false)"
                    .into());
            }
        }
        _ => {
            return Err(format!(
                "not an AdminServer setting of ZooKeeper 3.8 (enableServer, serverAddress, \
                 serverPort, commandURL, idleTimeout, httpVersion, portUnification, \
                 forceHttps); 'admin.{name}' would be ignored"
            ))
        }
    }
    Ok(())
}

/// The AdminServer's settings as JVM flags (`-Dzookeeper.admin.<name>=`),
/// which zkServer.sh passes from SERVER_JVMFLAGS and JVMFLAGS: applied
/// for the settings the file does not make (zoo.cfg's `admin.*` become the
/// same system properties when ZooKeeper reads it, replacing the flags).
fn apply_admin_flags(
    admin: &mut AdminConfig,
    from_file: &BTreeSet<String>,
    flags: &str,
) -> Result<(), String> {
    const PREFIX: &str = "-Dzookeeper.admin.";
    for flag in flags.split_whitespace() {
        let Some((name, v)) = flag.strip_prefix(PREFIX).and_then(|f| f.split_once('=')) else {
            continue;
        };
        if from_file.contains(name) {
            continue;
        }
        apply_admin(admin, name, v).map_err(|reason| format!("{flag}: {reason}"))?;
    }
    Ok(())
}

/// `admin.enableServer`: AdminServerFactory turns the server off only for
/// the exact value `false` (anything else, `FALSE` and `no` included,
/// leaves it on); values other than `true` and `false` are refused here
/// rather than read as "on" against their writer's likely intent.
fn parse_admin_enable(v: &str) -> Result<bool, String> {
    match v {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!(
            "'{}' is not true or false (ZooKeeper would leave the AdminServer on for any value \
             but exactly 'false')",
            shorten(v)
        )),
    }
}

/// `admin.commandURL`: the path under which Jetty maps the command servlet
/// (`<url>/*`): it starts with `/`, and holds no `?`, `#`, `%`, `*`,
/// whitespace or trailing `/`.
fn parse_command_url(v: &str) -> Result<String, String> {
    let ok = v.len() > 1
        && v.starts_with('/')
        && !v.ends_with('/')
        && !v.contains("//")
        && v.bytes()
            .all(|b| b.is_ascii_graphic() && !b"?#%*".contains(&b));
    if ok {
        Ok(v.to_string())
    } else {
        Err(format!(
            "'{}' is not a URL path such as /commands (a leading /, no trailing /, \
             no ? # % * or spaces)",
            shorten(v)
        ))
    }
}

/// `admin.idleTimeout`: milliseconds, more than 0.
fn parse_idle_timeout(v: &str) -> Result<u64, String> {
    match parse_num::<u64>(v, "a number of milliseconds")? {
        0 => Err("must be greater than 0".into()),
        n if n > i32::MAX as u64 => Err(format!("{n} is too large (max {})", i32::MAX)),
        n => Ok(n),
    }
}

/// `admin.httpVersion` only shapes ZooKeeper's HTTPS connector, which
/// ringkeeper does not have: accepted when it is a version Jetty knows.
fn parse_http_version(v: &str) -> Result<(), String> {
    match v {
        "9" | "10" | "11" | "20" => Ok(()),
        _ => Err(format!(
            "'{}' is not an HTTP version as Jetty numbers them (9, 10, 11 or 20)",
            shorten(v)
        )),
    }
}

/// An empty value unsets the digest; otherwise it must look like
/// `user:digest`, the form clients' digest ids are compared against.
fn parse_super_digest(v: &str) -> Result<Option<String>, String> {
    if v.is_empty() {
        return Ok(None);
    }
    match v.split_once(':') {
        Some((user, digest)) if !user.is_empty() && !digest.is_empty() => Ok(Some(v.to_string())),
        _ => Err("expected user:base64digest".into()),
    }
}

/// `metricsProvider.className`: true for the Prometheus provider, false for
/// ZooKeeper's built-in providers without an HTTP endpoint. Any other class
/// (a custom provider, a typo) would leave the operator without the metrics
/// they configured, so it stops the server.
fn parse_metrics_provider(v: &str) -> Result<bool, String> {
    if v == PROMETHEUS_PROVIDER {
        Ok(true)
    } else if NO_HTTP_PROVIDERS.contains(&v) {
        Ok(false)
    } else {
        Err(format!(
            "'{}' is not supported: ringkeeper serves metrics only as {PROMETHEUS_PROVIDER} \
             does (or none, with {})",
            shorten(v),
            NO_HTTP_PROVIDERS[0]
        ))
    }
}

fn parse_shard_count(v: &str) -> Result<usize, String> {
    match parse_num::<usize>(v, "a positive integer")? {
        0 => Err("must be at least 1".into()),
        n => Ok(n),
    }
}

/// One of a key's named values, matched without regard to case.
fn parse_choice<T: Copy>(v: &str, what: &str, choices: &[(&str, T)]) -> Result<T, String> {
    if let Some((_, value)) = choices
        .iter()
        .find(|(name, _)| v.eq_ignore_ascii_case(name))
    {
        return Ok(*value);
    }
    let names: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
    let (last, rest) = names.split_last().expect("at least one choice");
    Err(format!(
        "'{}' is not {what} (expected {} or {last})",
        shorten(v),
        rest.join(", ")
    ))
}

fn parse_log_write(v: &str) -> Result<crate::log::LogWrite, String> {
    use crate::log::LogWrite;
    let choices = [
        ("direct", LogWrite::Direct),
        ("buffered", LogWrite::Buffered),
        ("mmap", LogWrite::Mmap),
    ];
    parse_choice(v, "a log write mode", &choices)
}

fn parse_consensus_executor(v: &str) -> Result<ConsensusExecutor, String> {
    let choices = [
        ("auto", ConsensusExecutor::Auto),
        ("own", ConsensusExecutor::Own),
        ("shared", ConsensusExecutor::Shared),
    ];
    parse_choice(v, "a consensus executor", &choices)
}

/// `none`, or the consensus CPU followed by at least one shard CPU.
fn parse_pinning(v: &str) -> Result<CpuPinning, String> {
    if v.eq_ignore_ascii_case("none") {
        return Ok(CpuPinning::None);
    }
    let mut cpus = Vec::new();
    for item in v.split(',').map(str::trim) {
        let cpu: usize = parse_num(
            item,
            "a CPU id (expected 'none' or a comma list of CPU ids)",
        )?;
        if cpus.contains(&cpu) {
            return Err(format!("CPU {cpu} is listed twice"));
        }
        cpus.push(cpu);
    }
    if cpus.len() < 2 {
        return Err("list the consensus CPU and at least one shard CPU, or 'none'".into());
    }
    Ok(CpuPinning::Cpus(cpus))
}

const SERVER_FORMAT: &str =
    "expected host:quorumPort:electionPort[:participant|:observer][;[clientAddr:]clientPort]";

/// Parses the value of a `server.N` line (ZooKeeper's
/// `QuorumServer.initializeWithAddressString`, minus multi-address `|`
/// lists, which ZooKeeper also rejects unless `multiAddress.enabled`).
fn parse_server(v: &str) -> Result<ServerSpec, String> {
    let (server_part, client_part) = match v.split_once(';') {
        Some((_, c)) if c.contains(';') => return Err(SERVER_FORMAT.into()),
        Some((s, c)) => (s, Some(c)),
        None => (v, None),
    };
    if server_part.contains('|') {
        return Err("multiple addresses ('|') are not supported".into());
    }
    let parts = split_host_and_ports(server_part.trim())?;
    if !(3..=4).contains(&parts.len()) {
        return Err(SERVER_FORMAT.into());
    }
    let host = check_host(&parts[0])?;
    let quorum_port = parse_peer_port(&parts[1])?;
    let election_port = parse_peer_port(&parts[2])?;
    if quorum_port == election_port {
        return Err(format!(
            "quorum and election ports must differ (both {quorum_port})"
        ));
    }
    Ok(ServerSpec {
        host,
        quorum_port,
        election_port,
        observer: parts
            .get(3)
            .map(|t| parse_peer_type(t))
            .transpose()?
            .unwrap_or(false),
        client_addr: client_part.map(parse_client_addr).transpose()?,
    })
}

fn parse_peer_port(v: &str) -> Result<u16, String> {
    match parse_num::<u16>(v.trim(), "a port number (1-65535)")? {
        0 => Err("port 0 is not allowed for a peer".into()),
        p => Ok(p),
    }
}

/// Returns whether the type is `observer`.
fn parse_peer_type(v: &str) -> Result<bool, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "observer" => Ok(true),
        "participant" => Ok(false),
        _ => Err(format!(
            "unknown peer type '{}' (expected participant or observer)",
            v.trim()
        )),
    }
}

/// `clientPort` or `clientAddr:clientPort`.
fn parse_client_addr(v: &str) -> Result<SocketAddr, String> {
    let parts = split_host_and_ports(v.trim())?;
    let (host, port) = match parts.as_slice() {
        [port] => (IpAddr::V4(Ipv4Addr::UNSPECIFIED), port),
        [host, port] => (resolve_ip(host)?, port),
        _ => return Err(SERVER_FORMAT.into()),
    };
    Ok(SocketAddr::new(
        host,
        parse_num(port.trim(), "a port number (0-65535)")?,
    ))
}

/// ZooKeeper's `ConfigUtils.getHostAndPort`: splits on `:`, except that a
/// leading `[...]` is an IPv6 host kept whole (without brackets).
fn split_host_and_ports(s: &str) -> Result<Vec<String>, String> {
    let Some(rest) = s.strip_prefix('[') else {
        return Ok(s.split(':').map(str::to_string).collect());
    };
    let Some((host, after)) = rest.split_once(']') else {
        return Err(format!(
            "'{}' starts with '[' but has no matching ']'",
            shorten(s)
        ));
    };
    let Some(ports) = after.strip_prefix(':').filter(|p| !p.is_empty()) else {
        return Err(format!("'{}' has no port after the address", shorten(s)));
    };
    let mut parts = vec![host.to_string()];
    parts.extend(ports.split(':').map(str::to_string));
    Ok(parts)
}

/// Accepts an IP literal or something shaped like a host name; does not
/// resolve it.
fn check_host(host: &str) -> Result<String, String> {
    let host = host.trim();
    if host.parse::<IpAddr>().is_ok() || is_host_name(host) {
        Ok(host.to_string())
    } else {
        Err(format!(
            "'{}' is not an IP address or host name",
            shorten(host)
        ))
    }
}

/// Letters, digits, `-`, `_` (seen in container names) and dots between
/// non-empty labels, at most 253 characters.
fn is_host_name(host: &str) -> bool {
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    !host.is_empty() && host.len() <= 253 && host.split('.').all(label_ok)
}

/// Turns an address value (IP literal, `[IPv6]`, or host name) into an IP,
/// like Java's `InetAddress.getByName`. Host names other than `localhost`
/// are resolved with the system resolver, preferring IPv4.
fn resolve_ip(v: &str) -> Result<IpAddr, String> {
    let v = v.trim();
    let bare = v
        .strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .unwrap_or(v);
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(ip);
    }
    let host = check_host(bare)?;
    // Java resolves localhost to 127.0.0.1; the system resolver may put ::1
    // first, and binding there would surprise IPv4-only clients.
    if host.eq_ignore_ascii_case("localhost") {
        return Ok(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    let addrs: Vec<SocketAddr> = (host.as_str(), 0)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve '{host}': {e}"))?
        .collect();
    let ip = addrs.iter().find(|a| a.is_ipv4()).or(addrs.first());
    ip.map(SocketAddr::ip)
        .ok_or_else(|| format!("'{host}' resolves to no address"))
}

// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv6Addr;

    const MINIMAL: &str = "clientPort=2181\ndataDir=/var/zk\n";

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, "zoo.cfg")
    }

    fn parse_ok(extra: &str) -> Config {
        parse(&format!("{MINIMAL}{extra}")).unwrap()
    }

    /// The error text for `MINIMAL` followed by `extra` (lines 3 onwards).
    fn parse_err(extra: &str) -> String {
        parse(&format!("{MINIMAL}{extra}")).unwrap_err().to_string()
    }

    fn words(list: &[&str]) -> FourLetterWhitelist {
        FourLetterWhitelist::Words(list.iter().map(|w| w.to_string()).collect())
    }

    fn server(v: &str) -> Result<ServerSpec, String> {
        parse_server(v)
    }

    #[test]
    fn embedded_default_values() {
        let c = Config::embedded_default();
        assert_eq!(c.client_port, 2181);
        assert_eq!(c.client_port_address, IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert_eq!(c.data_dir, PathBuf::from("./data"));
        assert_eq!(c.data_log_dir, PathBuf::from("./data"));
        assert_eq!(c.tick_time_ms, 2000);
        assert_eq!((c.init_limit, c.sync_limit), (10, 5));
        assert_eq!(c.max_client_cnxns, 60);
        assert_eq!(c.max_cnxns, 0);
        assert_eq!(c.global_outstanding_limit, 1000);
        assert_eq!(c.min_session_timeout_ms, 4000);
        assert_eq!(c.max_session_timeout_ms, 40000);
        assert_eq!(c.four_letter_whitelist, words(&["srvr"]));
        assert_eq!(c.jute_max_buffer, 1_048_575);
        assert!(!c.extended_types_enabled);
        assert_eq!(c.super_digest, None);
        assert!(c.servers.is_empty());
        assert_eq!(c.shard_count, None);
        assert_eq!(c.cpu_pinning, CpuPinning::None);
        assert!(c.warnings.is_empty());
    }

    #[test]
    fn minimal_file_gets_defaults() {
        let c = parse(MINIMAL).unwrap();
        let mut expected = Config::embedded_default();
        expected.client_port_address = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
        // So is the AdminServer (ZooKeeper's 0.0.0.0:8080).
        expected.admin.address = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
        expected.data_dir = PathBuf::from("/var/zk");
        expected.data_log_dir = PathBuf::from("/var/zk");
        assert_eq!(c, expected);
    }

    #[test]
    fn every_key() {
        let text = "\
# a comment
   ! another comment

  tickTime = 1000
initLimit=20
syncLimit=7
dataDir=/var/lib/zk
dataLogDir=/fast/zk-log
clientPort=2281
clientPortAddress=10.1.2.3
maxClientCnxns=0
maxCnxns=500
globalOutstandingLimit=64
minSessionTimeout=3000
maxSessionTimeout=90000
4lw.commands.whitelist=ruok, stat
jute.maxbuffer=4194304
extendedTypesEnabled=TRUE
superDigest=super:D/InIHSb7yEEbrWz8b9l71RjZJU=
ringkeeper.shards=3
ringkeeper.pinCores=0, 1,2 ,3
ringkeeper.consensusExecutor=OWN
ringkeeper.snapshotWriteMBps=0
server.1=zk1:2888:3888;2181
";
        let c = parse(text).unwrap();
        assert_eq!(c.tick_time_ms, 1000);
        assert_eq!((c.init_limit, c.sync_limit), (20, 7));
        assert_eq!(c.data_dir, PathBuf::from("/var/lib/zk"));
        assert_eq!(c.data_log_dir, PathBuf::from("/fast/zk-log"));
        assert_eq!(c.client_port, 2281);
        assert_eq!(c.client_port_address, "10.1.2.3".parse::<IpAddr>().unwrap());
        assert_eq!(c.max_client_cnxns, 0);
        assert_eq!((c.max_cnxns, c.global_outstanding_limit), (500, 64));
        assert_eq!(
            (c.min_session_timeout_ms, c.max_session_timeout_ms),
            (3000, 90000)
        );
        assert_eq!(c.four_letter_whitelist, words(&["ruok", "stat", "srvr"]));
        assert_eq!(c.jute_max_buffer, 4 << 20);
        assert!(c.extended_types_enabled);
        assert_eq!(
            c.super_digest.as_deref(),
            Some("super:D/InIHSb7yEEbrWz8b9l71RjZJU=")
        );
        assert_eq!(c.shard_count, Some(3));
        assert_eq!(c.cpu_pinning, CpuPinning::Cpus(vec![0, 1, 2, 3]));
        assert_eq!(c.consensus_executor, ConsensusExecutor::Own);
        assert_eq!(c.snapshot_write_mbps, 0);
        assert_eq!(
            parse_ok("").snapshot_write_mbps,
            DEFAULT_SNAPSHOT_WRITE_MBPS
        );
        assert_eq!(c.servers.len(), 1);
        assert!(!c.servers[&1].observer);
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    }

    #[test]
    fn zookeeper_prefixed_aliases() {
        let c = parse_ok(
            "zookeeper.extendedTypesEnabled=true\n\
             zookeeper.DigestAuthenticationProvider.superDigest=su:abc\n\
             zookeeper.4lw.commands.whitelist=*\n\
             zookeeper.jute.maxbuffer=100\n\
             zookeeper.globalOutstandingLimit=7\n\
             zookeeper.maxCnxns=9\n",
        );
        assert_eq!((c.global_outstanding_limit, c.max_cnxns), (7, 9));
        assert!(c.extended_types_enabled);
        assert_eq!(c.super_digest.as_deref(), Some("su:abc"));
        assert_eq!(c.four_letter_whitelist, FourLetterWhitelist::All);
        assert_eq!(c.jute_max_buffer, 100);
        let c = parse_ok("DigestAuthenticationProvider.superDigest=a:b\n");
        assert_eq!(c.super_digest.as_deref(), Some("a:b"));
    }

    #[test]
    fn abuse_bounds() {
        let c = parse_ok("");
        assert_eq!(c.sessionless_cnxn_timeout_ms, 10_000);
        assert_eq!(c.reply_bytes_max, 256 << 20);
        let c = parse_ok("nio.sessionlessCnxnTimeout=500\nringkeeper.replyBytesMax=8388608\n");
        assert_eq!(
            (c.sessionless_cnxn_timeout_ms, c.reply_bytes_max),
            (500, 8 << 20)
        );
        let c = parse_ok("zookeeper.nio.sessionlessCnxnTimeout=700\n");
        assert_eq!(c.sessionless_cnxn_timeout_ms, 700);
        assert!(parse_err("ringkeeper.replyBytesMax=1000\n").contains("at least 1048576"));
        assert!(parse_err("nio.sessionlessCnxnTimeout=soon\n").contains("soon"));
    }

    #[test]
    fn election_finalize_wait() {
        assert_eq!(parse_ok("").election_finalize_wait_ms, 50);
        let c = parse_ok("ringkeeper.electionFinalizeWaitMs=200\n");
        assert_eq!(c.election_finalize_wait_ms, 200);
        assert_eq!(
            parse_ok("ringkeeper.electionFinalizeWaitMs=0\n").election_finalize_wait_ms,
            1
        );
        assert!(parse_err("ringkeeper.electionFinalizeWaitMs=-5\n").contains("-5"));
        assert_eq!(parse_ok("").election_port_bind_retry, 3);
        let c = parse_ok("electionPortBindRetry=0\n");
        assert_eq!(c.election_port_bind_retry, 0);
    }

    #[test]
    fn enforce_quota_is_a_java_boolean() {
        assert!(!parse_ok("").enforce_quota);
        assert!(parse_ok("enforceQuota=true\n").enforce_quota);
        assert!(parse_ok("enforceQuota=TRUE\n").enforce_quota);
        assert!(parse_ok("zookeeper.enforceQuota=true\n").enforce_quota);
        // Boolean.parseBoolean: anything else is false, not an error.
        let c = parse_ok("enforceQuota=yes\n");
        assert!(!c.enforce_quota);
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    }

    #[test]
    fn session_timeout_defaults_follow_tick_time() {
        let c = parse_ok("tickTime=500\n");
        assert_eq!(
            (c.min_session_timeout_ms, c.max_session_timeout_ms),
            (1000, 10000)
        );
        let c = parse_ok("tickTime=500\nminSessionTimeout=-1\nmaxSessionTimeout=-1\n");
        assert_eq!(
            (c.min_session_timeout_ms, c.max_session_timeout_ms),
            (1000, 10000)
        );
        // Order in the file does not matter.
        let c = parse("maxSessionTimeout=-1\nclientPort=1\ndataDir=d\ntickTime=100\n").unwrap();
        assert_eq!(c.max_session_timeout_ms, 2000);
    }

    #[test]
    fn clamp() {
        let c = parse_ok("minSessionTimeout=4000\nmaxSessionTimeout=40000\n");
        assert_eq!(c.session_timeout_clamp(0), 4000);
        assert_eq!(c.session_timeout_clamp(-5), 4000);
        assert_eq!(c.session_timeout_clamp(4000), 4000);
        assert_eq!(c.session_timeout_clamp(10_000), 10_000);
        assert_eq!(c.session_timeout_clamp(40_000), 40_000);
        assert_eq!(c.session_timeout_clamp(i32::MAX), 40_000);
    }

    #[test]
    fn clamp_survives_hand_built_min_above_max() {
        let mut c = Config::embedded_default();
        c.min_session_timeout_ms = 10;
        c.max_session_timeout_ms = 5;
        assert_eq!(c.session_timeout_clamp(7), 5);
        c.max_session_timeout_ms = u32::MAX;
        assert_eq!(c.session_timeout_clamp(i32::MAX), i32::MAX);
    }

    #[test]
    fn min_above_max_is_an_error() {
        let err = parse_err("minSessionTimeout=50000\nmaxSessionTimeout=40000\n");
        assert_eq!(
            err,
            "zoo.cfg: minSessionTimeout (50000 ms) must not be larger than maxSessionTimeout (40000 ms)"
        );
        // Against the default maximum (20 ticks) too.
        let err = parse_err("minSessionTimeout=50000\n");
        assert!(err.contains("must not be larger"), "{err}");
        // Equal is fine.
        let c = parse_ok("minSessionTimeout=5000\nmaxSessionTimeout=5000\n");
        assert_eq!(c.session_timeout_clamp(1), 5000);
    }

    #[test]
    fn whitelist_parsing() {
        let w = FourLetterWhitelist::parse(" ruok , stat,, mntr ,");
        assert_eq!(w, words(&["ruok", "stat", "mntr", "srvr"]));
        assert!(w.allows("ruok") && w.allows("mntr") && w.allows("srvr"));
        assert!(!w.allows("dump") && !w.allows("RUOK"));
        assert_eq!(
            FourLetterWhitelist::parse("ruok, * "),
            FourLetterWhitelist::All
        );
        assert!(FourLetterWhitelist::All.allows("anything"));
        assert_eq!(FourLetterWhitelist::parse(""), words(&["srvr"]));
        assert!(FourLetterWhitelist::default().allows("srvr"));
        assert!(!FourLetterWhitelist::default().allows("ruok"));
        let c = parse_ok("4lw.commands.whitelist = stat, ruok \n");
        assert!(c.four_letter_whitelist.allows("stat"));
        assert!(c.four_letter_whitelist.allows("ruok"));
    }

    #[test]
    fn server_lines_valid() {
        let s = server("zk1.example.com:2888:3888").unwrap();
        assert_eq!(
            s,
            ServerSpec {
                host: "zk1.example.com".into(),
                quorum_port: 2888,
                election_port: 3888,
                observer: false,
                client_addr: None,
            }
        );
        assert!(!server("zk1:2888:3888:participant").unwrap().observer);
        assert!(server("zk1:2888:3888:Observer").unwrap().observer);
        let s = server("10.0.0.1:2888:3888;2181").unwrap();
        assert_eq!(s.client_addr, Some("0.0.0.0:2181".parse().unwrap()));
        let s = server("zk1:2888:3888:observer;127.0.0.1:2182").unwrap();
        assert_eq!(s.client_addr, Some("127.0.0.1:2182".parse().unwrap()));
        let s = server("[::1]:2888:3888;[::1]:2181").unwrap();
        assert_eq!(s.host, "::1");
        let v6 = IpAddr::V6(Ipv6Addr::LOCALHOST);
        assert_eq!(s.client_addr, Some(SocketAddr::new(v6, 2181)));
        let s = server("zk1:2888:3888;localhost:2181").unwrap();
        assert_eq!(s.client_addr, Some("127.0.0.1:2181".parse().unwrap()));
    }

    #[test]
    fn server_lines_in_file() {
        let c = parse_ok("server.3=b:1:2\nserver.3=c:1:2\n");
        assert_eq!(c.servers.keys().copied().collect::<Vec<_>>(), vec![3]);
        assert_eq!(c.servers[&3].host, "c");
    }

    /// One participant runs standalone, as in ZooKeeper; more voters, or
    /// standaloneEnabled=false, run an ensemble; observers are refused,
    /// naming their line.
    #[test]
    fn server_lines_choose_standalone_or_ensemble() {
        let c = parse_ok("server.1=a:1:2\nserver.3=b:1:2\nserver.1=c:1:2\n");
        assert!(c.ensemble);
        assert!(parse_ok("standaloneEnabled=false\nserver.1=a:1:2\n").ensemble);
        assert!(!parse_ok("standaloneEnabled=true\nserver.1=a:1:2\n").ensemble);
        assert!(!parse_ok("").ensemble);
        let err = parse_err("server.1=a:1:2:observer\n");
        assert!(err.contains("only server is an observer"), "{err}");
        let err = parse_err("server.1=a:1:2\nserver.2=b:1:2:observer\n");
        assert!(
            err.contains("line 4: server.2: observers are not supported yet"),
            "{err}"
        );
        assert!(parse_err("reconfigEnabled=true\n").contains("not supported yet"));
        assert!(parse_ok("reconfigEnabled=false\nserver.1=a:1:2\nserver.2=b:1:2\n").ensemble);
        assert!(parse_err("peerType=observer\n").contains("only participants"));
        assert!(parse_err("group.1=1:2:3\n").contains("hierarchical quorums"));
        assert!(parse_err("weight.1=1\n").contains("hierarchical quorums"));
        assert!(parse_ok("quorumListenOnAllIPs=true\n").quorum_listen_on_all_ips);
        assert!(!parse_ok("").read_only_mode);
        assert!(parse_ok("readonlymode.enabled=true\n").read_only_mode);
        assert!(parse_err("standaloneEnabled=maybe\n").contains("not true or false"));
    }

    #[test]
    fn server_lines_invalid() {
        let cases = [
            ("zk1:2888", "expected host:quorumPort"),
            ("zk1:2888:3888:observer:x", "expected host:quorumPort"),
            ("zk1:x:3888", "'x' is not a port number"),
            ("zk1:2888:99999", "'99999' is not a port number"),
            ("zk1:0:3888", "port 0"),
            ("zk1:2888:2888", "must differ"),
            ("zk1:2888:3888:leader", "unknown peer type 'leader'"),
            ("zk1:2888:3888;2181;2182", "expected host:quorumPort"),
            ("zk1:2888:3888;", "is not a port number"),
            ("zk1:2888:3888;a:b:c", "expected host:quorumPort"),
            (
                "zk1:2888:3888;bad!host:2181",
                "not an IP address or host name",
            ),
            ("zk1:2888:3888|zk2:2888:3888", "multiple addresses"),
            ("bad host:2888:3888", "not an IP address or host name"),
            (":2888:3888", "not an IP address or host name"),
            ("[::1:2888:3888", "no matching ']'"),
            ("[::1]", "no port"),
        ];
        for (value, expected) in cases {
            let err = server(value).unwrap_err();
            assert!(err.contains(expected), "{value}: {err}");
        }
    }

    #[test]
    fn bad_server_line_names_line_and_key() {
        assert_eq!(
            parse_err("server.1=zk1:2888\n"),
            format!("zoo.cfg: line 3: server.1: {SERVER_FORMAT}")
        );
        assert_eq!(
            parse_err("server.x=zk1:2888:3888\n"),
            "zoo.cfg: line 3: server.x: server id 'x' is not a non-negative integer (expected server.N)"
        );
    }

    #[test]
    fn errors_name_line_and_key() {
        let text = "# comment\nclientPort=2181\n\ntickTime=abc\ndataDir=/x\n";
        let err = parse(text).unwrap_err();
        assert!(matches!(err, ConfigError::Line { line: 4, .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            "zoo.cfg: line 4: tickTime: 'abc' is not a positive integer"
        );
        let cases = [
            (
                "clientPort=70000\n",
                "line 3: clientPort: '70000' is not a port number",
            ),
            (
                "clientPort=2181 # inline\n",
                "line 3: clientPort: '2181 # inline' is not",
            ),
            (
                "initLimit=-3\n",
                "line 3: initLimit: '-3' is not a non-negative integer",
            ),
            ("syncLimit=1.5\n", "line 3: syncLimit: "),
            ("maxClientCnxns=\n", "line 3: maxClientCnxns: '' is not"),
            ("tickTime=0\n", "line 3: tickTime: must be greater than 0"),
            (
                "minSessionTimeout=-2\n",
                "line 3: minSessionTimeout: '-2' is not a timeout",
            ),
            (
                "maxSessionTimeout=3000000000\n",
                "line 3: maxSessionTimeout: 3000000000 is too",
            ),
            (
                "jute.maxbuffer=0\n",
                "line 3: jute.maxbuffer: must be greater",
            ),
            ("jute.maxbuffer=1k\n", "line 3: jute.maxbuffer: '1k' is not"),
            (
                "extendedTypesEnabled=yes\n",
                "line 3: extendedTypesEnabled: 'yes' is not true",
            ),
            (
                "superDigest=nocolon\n",
                "line 3: superDigest: expected user:base64digest",
            ),
            (
                "clientPortAddress=not an ip\n",
                "line 3: clientPortAddress: 'not an ip' is not",
            ),
            ("dataDir=\n", "line 3: dataDir: empty path"),
            (
                "ringkeeper.shards=0\n",
                "line 3: ringkeeper.shards: must be at least 1",
            ),
            (
                "ringkeeper.shards=many\n",
                "line 3: ringkeeper.shards: 'many' is not",
            ),
            (
                "ringkeeper.pinCores=0,x\n",
                "line 3: ringkeeper.pinCores: 'x' is not a CPU id",
            ),
            (
                "ringkeeper.logWrite=fast\n",
                "line 3: ringkeeper.logWrite: 'fast' is not a log write mode",
            ),
            (
                "ringkeeper.consensusExecutor=core0\n",
                "line 3: ringkeeper.consensusExecutor: 'core0' is not a consensus executor",
            ),
            (
                "ringkeeper.pinCores=1,1\n",
                "line 3: ringkeeper.pinCores: CPU 1 is listed twice",
            ),
            (
                "ringkeeper.pinCores=3\n",
                "line 3: ringkeeper.pinCores: list the consensus",
            ),
            (
                "ringkeeper.pinCores=0,,1\n",
                "line 3: ringkeeper.pinCores: '' is not",
            ),
            (
                "just some words\n",
                "line 3: expected key=value, found 'just some words'",
            ),
            ("=value\n", "line 3: missing key before '='"),
        ];
        for (extra, expected) in cases {
            let err = parse_err(extra);
            assert!(err.starts_with("zoo.cfg: "), "{err}");
            assert!(err.contains(expected), "{extra:?}: {err}");
        }
    }

    #[test]
    fn long_lines_are_shortened_in_errors() {
        let err = parse_err(&format!("{}\n", "x".repeat(500)));
        assert!(err.len() < 150, "{err}");
        assert!(err.ends_with("...'"), "{err}");
    }

    #[test]
    fn required_keys() {
        let err = parse("dataDir=/x\n").unwrap_err();
        assert!(matches!(err, ConfigError::File { .. }));
        assert_eq!(err.to_string(), "zoo.cfg: clientPort is not set");
        let err = parse("clientPort=1\n").unwrap_err().to_string();
        assert_eq!(err, "zoo.cfg: dataDir is not set");
        assert!(parse("").is_err());
    }

    #[test]
    fn client_port_address_forms() {
        let ip = |v: &str| parse_ok(&format!("clientPortAddress={v}\n")).client_port_address;
        assert_eq!(ip("127.0.0.1"), IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert_eq!(ip("::1"), IpAddr::V6(Ipv6Addr::LOCALHOST));
        assert_eq!(ip("[::1]"), IpAddr::V6(Ipv6Addr::LOCALHOST));
        assert_eq!(ip("localhost"), IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert_eq!(ip(" 0.0.0.0 "), IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    }

    #[test]
    fn client_port_zero_is_accepted() {
        // Port 0 asks the OS for a free port, handy in tests.
        assert_eq!(parse("clientPort=0\ndataDir=d\n").unwrap().client_port, 0);
    }

    #[test]
    fn unknown_key_warns_with_line() {
        let c = parse_ok("\nfoo=bar\nringkeeper.shardz=2\n");
        assert_eq!(
            c.warnings,
            vec![
                "line 4: unknown key 'foo' ignored".to_string(),
                "line 5: unknown key 'ringkeeper.shardz' ignored".to_string(),
            ]
        );
    }

    #[test]
    fn known_zookeeper_keys_are_silent() {
        let text = "\
admin.enableServer=false
admin.serverPort=8080
autopurge.snapRetainCount=3
autopurge.purgeInterval=1
standaloneEnabled=true
reconfigEnabled=false
preAllocSize=65536
snapCount=100000
forceSync=yes
globalOutstandingLimit=1000
metricsProvider.className=org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider
metricsProvider.httpPort=7000
syncEnabled=true
electionAlg=3
peerType=participant
quorumListenOnAllIPs=true
maxCnxns=0
localSessionsEnabled=false
readonlymode.enabled=true
zookeeper.snapshot.trust.empty=true
jvm.pause.monitor=false
version=100000000
";
        let c = parse_ok(text);
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    }

    /// The client port's TLS keys: settled when a secure port or port
    /// unification asks for TLS, errors naming their line.
    #[test]
    fn client_tls_keys() {
        let c = parse_ok(
            "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n\
             ssl.keyStore.location=/k/server.pem\nzookeeper.ssl.clientAuth=none\n",
        );
        assert_eq!(c.client_tls, None, "ssl.* alone turns nothing on");
        let c = parse_ok(
            "secureClientPort=2281\nssl.keyStore.location=/k/server.pem\n\
             ssl.trustStore.location=/k/ca.pem\nX509AuthenticationProvider.superUser=CN=a\n\
             netty.server.outstandingHandshake.limit=50\n",
        );
        assert_eq!(c.secure_client_port, Some(2281));
        assert_eq!(c.client_port, 2181);
        let tls = c.client_tls.expect("TLS settled");
        assert_eq!(tls.x509_super_user.as_deref(), Some("CN=a"));
        assert_eq!(tls.handshake_limit, Some(50));
        let err = parse_err("secureClientPort=2281\nssl.trustStore.location=/k/ca.pem\n");
        assert!(
            err.contains("line 3") && err.contains("keyStore.location"),
            "{err}"
        );
        let err = parse_err("secureClientPortAddress=127.0.0.1\n");
        assert!(
            err.contains("line 3") && err.contains("secureClientPort is not set"),
            "{err}"
        );
        let err = parse_err("ssl.crl=true\n");
        assert!(
            err.contains("line 3: ssl.crl: certificate revocation"),
            "{err}"
        );
        let only_secure = parse(
            "dataDir=/tmp/x\nsecureClientPort=2281\nssl.keyStore.location=/k/s.pem\n\
             ssl.clientAuth=none\n",
        )
        .unwrap();
        assert_eq!(only_secure.client_port, 0, "no plaintext port");
    }

    /// SASL: the provider, the JAAS file's users (a file that cannot be
    /// read or uses Kerberos stops startup naming the line), superUser,
    /// sessionRequireClientSASLAuth turning enforcement on for sasl.
    #[test]
    fn sasl_keys() {
        let dir = std::env::temp_dir().join(format!("rk-jaas-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let jaas = dir.join("server.jaas");
        std::fs::write(
            &jaas,
            "Server {\n org.apache.zookeeper.server.auth.DigestLoginModule required\n \
             user_bob=\"pw\";\n};\n",
        )
        .unwrap();
        let c = parse_ok(&format!(
            "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n\
             java.security.auth.login.config={}\nzookeeper.superUser=bob\n\
             sessionRequireClientSASLAuth=true\n",
            jaas.display()
        ));
        assert!(c.sasl_provider);
        assert_eq!(c.sasl_users.unwrap()["bob"].expose(), "pw");
        assert_eq!(c.sasl_super_user.as_deref(), Some("bob"));
        assert_eq!(c.enforce_auth_schemes, Some(vec!["sasl".to_string()]));
        let err = parse_err("java.security.auth.login.config=/nonexistent/jaas\n");
        assert!(
            err.contains("line 3") && err.contains("cannot read the JAAS file"),
            "{err}"
        );
        std::fs::write(
            &jaas,
            "Server {\n com.sun.security.auth.module.Krb5LoginModule required;\n};\n",
        )
        .unwrap();
        let err = parse_err(&format!(
            "java.security.auth.login.config={}\n",
            jaas.display()
        ));
        assert!(err.contains("Krb5LoginModule"), "{err}");
        let err = parse_err("sessionRequireClientSASLAuth=true\n");
        assert!(err.contains("'sasl' is not available"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Security settings ringkeeper does not implement stop startup,
    /// naming the line; enforce.auth is read as ZooKeeper reads it.
    #[test]
    fn security_keys() {
        for key in [
            "requireKerberosConfig=true",
            "skipACL=yes",
            "authProvider.1=com.example.CustomAuthenticationProvider",
            "SASLAuthenticationProvider.superPassword=pw",
            "zookeeper.sasl.client.canonicalize.hostname=true",
            "kerberos.removeHostFromPrincipal=true",
        ] {
            let err = parse_err(key);
            let name = key.split('=').next().unwrap();
            assert!(
                err.starts_with(&format!(
                    "zoo.cfg: line 3: {name}: security setting not supported"
                )),
                "{err}"
            );
        }
        assert_eq!(parse_ok("").enforce_auth_schemes, None);
        assert_eq!(
            parse_ok("enforce.auth.enabled=yes\nenforce.auth.schemes=sasl").enforce_auth_schemes,
            None
        );
        let c = parse_ok("enforce.auth.enabled=TRUE\nenforce.auth.schemes=digest, ip");
        assert_eq!(
            c.enforce_auth_schemes,
            Some(vec!["digest".into(), "ip".into()])
        );
        let c =
            parse_ok("zookeeper.enforce.auth.enabled=true\nzookeeper.enforce.auth.schemes=digest");
        assert_eq!(c.enforce_auth_schemes, Some(vec!["digest".into()]));
        let err = parse_err("enforce.auth.enabled=true\n");
        assert!(
            err.starts_with("zoo.cfg: line 3: enforce.auth.enabled: "),
            "{err}"
        );
        let err = parse_err("enforce.auth.enabled=true\nenforce.auth.schemes=digest,sasl");
        assert!(err.starts_with("zoo.cfg: line 4: enforce.auth.schemes: authentication scheme 'sasl' is not available"), "{err}");
    }

    #[test]
    fn metrics_are_off_by_default() {
        assert_eq!(parse_ok("").metrics, None);
        assert_eq!(Config::embedded_default().metrics, None);
        let c = parse_ok(
            "metricsProvider.className=org.apache.zookeeper.metrics.impl.DefaultMetricsProvider\n",
        );
        assert_eq!(c.metrics, None);
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    }

    #[test]
    fn prometheus_provider_turns_metrics_on() {
        let on = format!("metricsProvider.className={PROMETHEUS_PROVIDER}\n");
        let c = parse_ok(&on);
        assert_eq!(
            c.metrics,
            Some(MetricsConfig {
                http_host: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                http_port: 7000,
            })
        );
        let c = parse_ok(&format!(
            "metricsProvider.httpPort = 7071\nmetricsProvider.httpHost=127.0.0.1\n\
             metricsProvider.exportJvmInfo=false\nmetricsProvider.numWorkerThreads=2\n{on}"
        ));
        assert_eq!(
            c.metrics,
            Some(MetricsConfig {
                http_host: IpAddr::V4(Ipv4Addr::LOCALHOST),
                http_port: 7071,
            })
        );
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    }

    #[test]
    fn metrics_errors_name_the_line() {
        let err = parse_err("metricsProvider.className=com.example.MyProvider\n");
        assert!(
            err.starts_with("zoo.cfg: line 3: metricsProvider.className: 'com.example.MyProvider' is not supported"),
            "{err}"
        );
        assert!(err.contains(PROMETHEUS_PROVIDER), "{err}");
        let on = format!("metricsProvider.className={PROMETHEUS_PROVIDER}\n");
        let err = parse_err(&format!("{on}metricsProvider.httpPort=70000\n"));
        assert_eq!(
            err,
            "zoo.cfg: line 4: metricsProvider.httpPort: '70000' is not a port number (0-65535)"
        );
        let err = parse_err(&format!("metricsProvider.httpHost=not a host\n{on}"));
        assert!(
            err.starts_with("zoo.cfg: line 3: metricsProvider.httpHost: "),
            "{err}"
        );
    }

    #[test]
    fn admin_server_defaults_as_zookeeper() {
        let a = parse_ok("").admin;
        assert!(a.enabled);
        assert_eq!(a.address, IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        assert_eq!(a.port, 8080);
        assert_eq!(a.command_url, "/commands");
        assert_eq!(a.idle_timeout_ms, 30_000);
        assert_eq!(a.initial_config, None);
        // The embedded default listens on loopback only.
        let e = Config::embedded_default().admin;
        assert_eq!(e.address, IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert!(e.enabled);
    }

    #[test]
    fn admin_server_keys() {
        let a = parse_ok(
            "admin.enableServer=true\nadmin.serverAddress=127.0.0.2\nadmin.serverPort=9090\n\
             admin.commandURL=/zk/cmds\nadmin.idleTimeout=5000\nadmin.httpVersion=11\n\
             admin.portUnification=false\nadmin.forceHttps=false\n",
        )
        .admin;
        assert!(a.enabled);
        assert_eq!(a.address, "127.0.0.2".parse::<IpAddr>().unwrap());
        assert_eq!(a.port, 9090);
        assert_eq!(a.command_url, "/zk/cmds");
        assert_eq!(a.idle_timeout_ms, 5000);
        // The later key wins, as in ZooKeeper's properties.
        assert!(
            !parse_ok("admin.enableServer=true\nadmin.enableServer=false\n")
                .admin
                .enabled
        );
        assert!(
            parse_ok("admin.enableServer=false\nadmin.enableServer=true\n")
                .admin
                .enabled
        );
    }

    #[test]
    fn admin_server_errors_name_the_line() {
        for (text, message) in [
            (
                "admin.enableServer=no\n",
                "admin.enableServer: 'no' is not true or false",
            ),
            (
                "admin.enableServer=FALSE\n",
                "admin.enableServer: 'FALSE' is not true or false",
            ),
            (
                "admin.serverPort=80800\n",
                "admin.serverPort: '80800' is not a port number",
            ),
            (
                "admin.commandURL=commands\n",
                "admin.commandURL: 'commands' is not a URL path",
            ),
            (
                "admin.commandURL=/commands/\n",
                "admin.commandURL: '/commands/' is not a URL path",
            ),
            (
                "admin.commandURL=/\n",
                "admin.commandURL: '/' is not a URL path",
            ),
            (
                "admin.idleTimeout=0\n",
                "admin.idleTimeout: must be greater than 0",
            ),
            (
                "admin.idleTimeout=x\n",
                "admin.idleTimeout: 'x' is not a number of milliseconds",
            ),
            (
                "admin.httpVersion=3\n",
                "admin.httpVersion: '3' is not an HTTP version",
            ),
            (
                "admin.forceHttps=true\n",
                "admin.forceHttps: HTTPS on the AdminServer is not supported",
            ),
            (
                "admin.portUnification=true\n",
                "admin.portUnification: HTTPS on the AdminServer",
            ),
            (
                "admin.serverport=1\n",
                "admin.serverport: not an AdminServer setting",
            ),
        ] {
            let err = parse_err(text);
            assert!(
                err.starts_with(&format!("zoo.cfg: line 3: {message}")),
                "{text}: {err}"
            );
        }
        assert!(parse_err("admin.serverAddress=not a host\n")
            .starts_with("zoo.cfg: line 3: admin.serverAddress: "));
    }

    #[test]
    fn admin_server_jvm_flags_apply_where_the_file_is_silent() {
        let mut admin = AdminConfig::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        let from_file = BTreeSet::from(["serverPort".to_string()]);
        apply_admin_flags(
            &mut admin,
            &from_file,
            "-Xmx1g -Dzookeeper.admin.enableServer=false -Dzookeeper.admin.serverPort=1 \
             -Dzookeeper.admin.commandURL=/c -Dother=x",
        )
        .unwrap();
        assert!(!admin.enabled);
        assert_eq!(admin.port, 8080, "the file's setting wins");
        assert_eq!(admin.command_url, "/c");
        let err = apply_admin_flags(&mut admin, &from_file, "-Dzookeeper.admin.idleTimeout=0")
            .unwrap_err();
        assert_eq!(
            err,
            "-Dzookeeper.admin.idleTimeout=0: must be greater than 0"
        );
    }

    #[test]
    fn load_keeps_the_file_text_for_initial_configuration() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("zoo.cfg");
        let text = "clientPort=2181\ndataDir=/var/zk\n# a comment\n";
        std::fs::write(&path, text).unwrap();
        let c = Config::load(&path).unwrap();
        assert_eq!(c.admin.initial_config.as_deref(), Some(text));
    }

    #[test]
    fn metrics_settings_without_the_provider_warn() {
        let c = parse_ok("metricsProvider.httpPort=x\n");
        assert_eq!(c.metrics, None);
        assert_eq!(
            c.warnings,
            vec![format!(
                "line 3: metricsProvider.httpPort has no effect without \
                 metricsProvider.className={PROMETHEUS_PROVIDER}"
            )]
        );
    }

    #[test]
    fn spinning_without_pinning_warns() {
        let c = parse_ok("ringkeeper.spinBeforeParkUs=50\n");
        assert_eq!(c.spin_before_park_us, 50);
        assert_eq!(
            c.warnings,
            vec![
                "line 3: ringkeeper.spinBeforeParkUs has no effect without \
                  ringkeeper.pinCores (only pinned executors spin)"
            ]
        );
        let pinned = parse_ok("ringkeeper.spinBeforeParkUs=50\nringkeeper.pinCores=0,1\n");
        assert!(pinned.warnings.is_empty(), "{:?}", pinned.warnings);
        assert!(parse_ok("ringkeeper.spinBeforeParkUs=0\n")
            .warnings
            .is_empty());
    }

    #[test]
    fn transparent_huge_pages_are_off_unless_asked_for() {
        assert!(!parse_ok("").transparent_huge_pages);
        assert!(parse_ok("ringkeeper.transparentHugePages=true\n").transparent_huge_pages);
        assert!(!parse_ok("ringkeeper.transparentHugePages=false\n").transparent_huge_pages);
        assert!(parse_err("ringkeeper.transparentHugePages=yes\n").contains("line 3"));
        assert!(parse_ok("").shared_tree);
        assert!(!parse_ok("ringkeeper.sharedTree=false\n").shared_tree);
        assert!(parse_err("ringkeeper.sharedTree=no\n").contains("line 3"));
        assert!(parse_ok("").client_ring);
        assert!(!parse_ok("ringkeeper.clientRing=false\n").client_ring);
        assert!(parse_err("ringkeeper.clientRing=off\n").contains("line 3"));
    }

    #[test]
    fn duplicate_keys_last_wins() {
        let c = parse_ok("tickTime=abc\ntickTime=1000\nclientPort=3000\n");
        assert_eq!(c.tick_time_ms, 1000);
        assert_eq!(c.client_port, 3000);
        let err = parse_err("tickTime=1000\ntickTime=abc\n");
        assert!(err.starts_with("zoo.cfg: line 4: tickTime:"), "{err}");
        // Aliases are separate keys: the later line wins.
        let c = parse_ok("zookeeper.extendedTypesEnabled=true\nextendedTypesEnabled=false\n");
        assert!(!c.extended_types_enabled);
    }

    #[test]
    fn comments_blank_lines_and_whitespace() {
        let text = "\u{feff}#x=1\n  !y=2\n\t\n  clientPort\t=  2181  \r\ndataDir = /a b \r\n";
        let c = parse(text).unwrap();
        assert_eq!(c.client_port, 2181);
        assert_eq!(c.data_dir, PathBuf::from("/a b"));
        assert!(c.warnings.is_empty());
        // Values may contain '='.
        let c = parse_ok("superDigest=super:abc=\n");
        assert_eq!(c.super_digest.as_deref(), Some("super:abc="));
        assert_eq!(parse_ok("superDigest=\n").super_digest, None);
    }

    #[test]
    fn consensus_executor_auto_shares_only_a_lone_unpinned_shard() {
        let pinned = CpuPinning::Cpus(vec![0, 1]);
        let auto = ConsensusExecutor::Auto;
        assert_eq!(
            auto.resolve(1, &CpuPinning::None),
            ConsensusExecutor::Shared
        );
        assert_eq!(auto.resolve(2, &CpuPinning::None), ConsensusExecutor::Own);
        assert_eq!(auto.resolve(1, &pinned), ConsensusExecutor::Own);
        let own = ConsensusExecutor::Own;
        assert_eq!(own.resolve(1, &CpuPinning::None), own);
        let shared = ConsensusExecutor::Shared;
        assert_eq!(shared.resolve(3, &pinned), shared);
        assert_eq!(parse_ok("").consensus_executor, auto);
        let c = parse_ok("ringkeeper.consensusExecutor=shared\n");
        assert_eq!(c.consensus_executor, shared);
    }

    #[test]
    fn log_write_modes() {
        use crate::log::LogWrite;
        assert_eq!(parse_ok("").log_write, LogWrite::Direct);
        for (v, mode) in [
            ("direct", LogWrite::Direct),
            ("Buffered", LogWrite::Buffered),
            ("MMAP", LogWrite::Mmap),
        ] {
            let c = parse_ok(&format!("ringkeeper.logWrite={v}\n"));
            assert_eq!(c.log_write, mode);
        }
    }

    #[test]
    fn pinning_sets_and_checks_shard_count() {
        let c = parse_ok("ringkeeper.pinCores=2,4,6\n");
        assert_eq!(c.cpu_pinning, CpuPinning::Cpus(vec![2, 4, 6]));
        assert_eq!(c.shard_count, Some(2));
        let c = parse_ok("ringkeeper.pinCores=NONE\nringkeeper.shards=5\n");
        assert_eq!((c.cpu_pinning, c.shard_count), (CpuPinning::None, Some(5)));
        let c = parse_ok("ringkeeper.pinCores=0,1,2\nringkeeper.shards=4\n");
        assert_eq!(c.shard_count, Some(4));
        assert_eq!(
            c.warnings,
            vec!["ringkeeper.shards=4 does not match the 2 shard CPUs in ringkeeper.pinCores"]
        );
    }

    #[test]
    fn load_reads_a_file() {
        let dir = std::env::temp_dir().join(format!("rk-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("zoo.cfg");
        std::fs::write(&path, b"# caf\xe9\nclientPort=2190\ndataDir=/d\nbogus=1\n").unwrap();
        let c = Config::load(&path).unwrap();
        assert_eq!(c.client_port, 2190);
        assert_eq!(c.warnings, vec!["line 4: unknown key 'bogus' ignored"]);
        std::fs::write(&path, "clientPort=x\n").unwrap();
        let err = Config::load(&path).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "{}: line 1: clientPort: 'x' is not a port number (0-65535)",
                path.display()
            )
        );
        std::fs::remove_dir_all(&dir).unwrap();
        let err = Config::load(&path).unwrap_err();
        assert!(matches!(err, ConfigError::Io { .. }), "{err:?}");
        assert!(err.to_string().starts_with(&path.display().to_string()));
    }
}
