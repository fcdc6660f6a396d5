//! Starts the executors: N shards and the consensus core, wired by one link
//! (a pair of bounded SPSC channels) per shard. The core has an executor of
//! its own, or (`ringkeeper.consensusExecutor`, by default with a single
//! shard) runs as a task on shard 0's executor, linked to it by local
//! channels.

use std::sync::Arc;

use glommio::{LocalExecutorBuilder, Placement};

use crate::admin::health::Health;
use crate::admin::metrics::group_commit::CoreMetrics;
use crate::admin::metrics::MetricsSetup;
use crate::admin::stats::ShardStats;
use crate::config::{Config, ConsensusExecutor, CpuPinning};
use crate::consensus::link;
use crate::consensus::runner::{self, CoreSetup};
use crate::peer::net::PeerAddrs;
use crate::shard::{self, ShardSetup};
use crate::startup::{self, StartError};

/// Requests one shard may have queued for the core before it waits.
/// Memory each executor reserves up front for registered (DMA) buffers.
/// glommio's default is 10 MiB, touched at start: 10 MiB of RSS per
/// executor. Only the log's direct-I/O mode uses such buffers (its
/// batches, a few at a time), and a buffer past the pool comes from the
/// heap instead.
const IO_MEMORY_BYTES: usize = 1 << 20;
const SHARD_TO_CORE_MAX: usize = 4096;
/// Commit batches queued for one shard before the core waits for it.
const CORE_TO_SHARD_MAX: usize = 256;

/// What an executor runs: the core, a shard, or both.
type ExecutorMain = std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>;

/// The default shard count: one core left for the consensus core.
pub fn default_shard_count() -> usize {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    cpus.saturating_sub(1).max(1)
}

fn placement(pinning: &CpuPinning, index: usize) -> Placement {
    match pinning {
        CpuPinning::None => Placement::Unbound,
        CpuPinning::Cpus(cpus) => Placement::Fixed(cpus[index % cpus.len()]),
    }
}

/// Binds the metrics endpoint's socket when metrics are on. Bound here, not
/// on the shard, so that a port in use stops the server with a clear error
/// (as ZooKeeper's provider does), and without SO_REUSEPORT, so that two
/// servers can never share it.
fn metrics_listener(config: &Config) -> Result<Option<std::net::TcpListener>, String> {
    let Some(m) = &config.metrics else {
        return Ok(None);
    };
    let addr = std::net::SocketAddr::new(m.http_host, m.http_port);
    let listener = std::net::TcpListener::bind(addr)
        .map_err(|e| format!("cannot start the metrics endpoint on {addr}: {e}"))?;
    tracing::info!(%addr, "metrics endpoint: Prometheus text format at /metrics");
    Ok(Some(listener))
}

/// Binds ZooKeeper's AdminServer socket (`admin.*`) when it is enabled.
/// A socket that cannot be bound is logged and the server runs without
/// the AdminServer, as an ensemble member of ZooKeeper 3.8 does
/// (QuorumPeer.start: "Problem starting AdminServer"). A standalone
/// ZooKeeper exits instead (code 4); ringkeeper does not, so that servers
/// whose zoo.cfg leaves the AdminServer on by default (port 8080) can run
/// side by side, as the project's own tests start them.
fn admin_listener(config: &Config) -> Option<crate::admin::admin_server::AdminSetup> {
    match crate::admin::admin_server::bind(&config.admin) {
        Ok(setup) => setup,
        Err(e) => {
            tracing::warn!("{e}; running without the AdminServer");
            None
        }
    }
}

/// One line with the configuration in effect (after defaults, the
/// resolved directories and the executor layout), so that a log shows what
/// the server ran with.
fn log_effective_config(config: &Config, shard_count: usize, layout: ConsensusExecutor) {
    let metrics = match &config.metrics {
        Some(m) => format!("on ({}:{})", m.http_host, m.http_port),
        None => "off".to_string(),
    };
    tracing::info!(
        version = crate::admin::four_letter::VERSION,
        client = %std::net::SocketAddr::new(config.client_port_address, config.client_port),
        secure_client = ?config
            .secure_client_port
            .map(|p| std::net::SocketAddr::new(config.secure_client_port_address, p)),
        port_unification = config.client_port_unification,
        data_dir = %config.data_dir.display(),
        data_log_dir = %config.data_log_dir.display(),
        force_sync = config.force_sync,
        log_write = ?config.log_write,
        shards = shard_count,
        pinning = ?config.cpu_pinning,
        consensus_executor = ?layout,
        metrics,
        enforce_auth = ?config.enforce_auth_schemes,
        transparent_huge_pages = config.transparent_huge_pages,
        "starting ringkeeper"
    );
}

/// Runs the server until a fatal error; returns only on failure to start.
/// The state on disk. An ensemble member whose log is damaged beyond a
/// torn tail sets its files aside and starts empty, to be synced by the
/// leader (startup::damaged); a standalone server refuses to start.
fn recover(config: &Config) -> Result<crate::recovery::Recovered, String> {
    use crate::recovery::RecoverError;
    let again = || {
        crate::recovery::recover(
            &config.data_dir,
            &config.data_log_dir,
            config.max_session_timeout_ms as i32,
        )
    };
    match again() {
        Err(RecoverError::Damaged(why)) if config.ensemble => {
            let moved =
                crate::startup::damaged::set_aside(&config.data_dir, &config.data_log_dir, &why)
                    .map_err(|e| format!("{why}; setting the damaged files aside failed: {e}"))?;
            tracing::error!(
                damage = %why,
                moved_to = ?moved,
                "the txn log is damaged: its snapshots and segments are set aside and this \
                 member starts empty; it does not vote or count toward a new epoch until a \
                 leader established without it has synced it"
            );
            Ok(again()?)
        }
        other => Ok(other?),
    }
}

pub fn run(mut config: Config) -> Result<(), StartError> {
    // Before the recovered tree fills the heap.
    if let Err(e) = crate::memory::allow_transparent_huge_pages(config.transparent_huge_pages) {
        tracing::warn!("cannot set transparent huge pages for the server: {e}");
    }
    // Holds the directories' locks: alive until run returns, which it only
    // does when the server stops.
    let dirs = startup::dirs::prepare(&config.data_dir, &config.data_log_dir)?;
    config.data_dir = dirs.data_dir.clone();
    config.data_log_dir = dirs.data_log_dir.clone();
    if !config.force_sync {
        tracing::warn!(
            "forceSync=no: acknowledged writes can be lost in a crash (benchmarks only)"
        );
    }
    // Before anything is recovered: a key store that cannot be read stops
    // the server at once, naming the key.
    let tls = match &config.client_tls {
        Some(t) => {
            let ctx = Arc::new(
                crate::tls::server_config(t).map_err(|e| StartError::from(format!("TLS: {e}")))?,
            );
            if t.cert_reload {
                crate::tls::watch_stores(ctx.clone()).map_err(|e| {
                    StartError::from(format!("TLS: cannot start client.certReload: {e}"))
                })?;
            }
            Some(ctx)
        }
        None => None,
    };
    let mut recovered = recover(&config)?;
    if config.ensemble {
        recovered.tree.set_config_node(
            config.membership_text().as_bytes(),
            crate::consensus::core::now_ms(),
        );
    }
    let tree = recovered.tree.clone();
    let myid = crate::consensus::epoch_files::read_myid(&config.data_dir)?;
    config.myid = myid;
    let health = Arc::new(Health::default());
    if config.ensemble {
        // An ensemble member serves nothing until it follows or leads. Set
        // here, before any shard listens: with the consensus core on its
        // own executor, shards answered srvr as "standalone" (and took
        // sessions) until the core got to setting it.
        health.set_role(crate::admin::health::ServerRole::Looking);
    }
    let sessions = Arc::new(crate::session::board::SessionBoard::default());
    let shard_count = config.shard_count.unwrap_or_else(default_shard_count);
    assert!(shard_count >= 1);
    let core_metrics = config
        .metrics
        .as_ref()
        .map(|_| Arc::new(CoreMetrics::default()));
    let config = Arc::new(config);
    let core_setup = if config.ensemble {
        ensemble_setup(
            config.clone(),
            myid,
            recovered,
            core_metrics.clone(),
            health.clone(),
            sessions.clone(),
        )?
    } else {
        standalone_setup(
            config.clone(),
            myid,
            recovered,
            core_metrics.clone(),
            health.clone(),
            sessions.clone(),
        )?
    };
    let stats: Arc<[ShardStats]> = (0..shard_count).map(|_| ShardStats::new()).collect();
    let mut metrics_setup = metrics_listener(&config)?.map(|listener| MetricsSetup {
        listener,
        core: core_metrics.clone().expect("metrics are on"),
    });
    let mut admin_setup = admin_listener(&config);
    // Last, just before the shards bind: the window in which a second server
    // could slip in (see startup::port) is as short as it can be.
    if config.client_port != 0 {
        let client_addr = std::net::SocketAddr::new(config.client_port_address, config.client_port);
        startup::port::check_free(client_addr)?;
    }
    if let Some(port) = config.secure_client_port {
        startup::port::check_free(std::net::SocketAddr::new(
            config.secure_client_port_address,
            port,
        ))?;
    }
    let mut setups = Vec::new();
    let reply_budget = Arc::new(crate::shard::budget::ReplyBudget::new(
        config.reply_bytes_max,
        shard_count,
    ));
    // With one shard, a read can never be behind what was answered.
    let answered =
        (shard_count > 1).then(|| Arc::new(crate::shard::visibility::AnsweredZxid::new()));
    // With one shard, its own table is every watch of the server.
    let watch_presence =
        (shard_count > 1).then(|| Arc::new(crate::watch::presence::WatchPresence::new()));
    for id in 0..shard_count {
        setups.push(ShardSetup {
            id,
            config: config.clone(),
            stats: stats.clone(),
            tree: tree.clone(),
            // Shard 0 serves the metrics endpoint and the AdminServer.
            metrics: metrics_setup.take(),
            admin: admin_setup.take(),
            health: health.clone(),
            reply_budget: reply_budget.clone(),
            sessions: sessions.clone(),
            tls: tls.clone(),
            answered: answered.clone(),
            watch_presence: watch_presence.clone(),
        });
    }
    // Held here, the recovered version would outlive every change the
    // executors make to their trees (each of which would then copy its path
    // once, and keep the old nodes alive).
    drop(tree);
    let spin = std::time::Duration::from_micros(config.spin_before_park_us);
    let layout = config
        .consensus_executor
        .resolve(shard_count, &config.cpu_pinning);
    log_effective_config(&config, shard_count, layout);
    let start = |name: &str, cpu_index: usize, f: Box<dyn FnOnce() -> ExecutorMain + Send>| {
        LocalExecutorBuilder::new(placement(&config.cpu_pinning, cpu_index))
            .name(name)
            .spin_before_park(spin)
            .io_memory(IO_MEMORY_BYTES)
            .spawn(move || {
                glommio::spawn_local(crate::memory::collect_foreign_frees()).detach();
                f()
            })
            .map_err(|e| format!("cannot start {name}: {e}"))
    };
    let shared = layout == ConsensusExecutor::Shared;
    // The core beside the only shard shares its tree (ringkeeper.sharedTree).
    let share_tree = shared && shard_count == 1 && config.shared_tree && core_setup.standalone;
    // Shard 0's link is local when the core shares its executor.
    let (shard_links, core_links): (Vec<_>, Vec<_>) = (usize::from(shared)..shard_count)
        .map(|_| link::shared(SHARD_TO_CORE_MAX, CORE_TO_SHARD_MAX))
        .unzip();
    let connect_core_links = |local: Option<link::CoreEnds>| async move {
        let mut links: Vec<_> = local.into_iter().collect();
        for l in core_links {
            links.push(l.connect().await);
        }
        links
    };
    let mut setups = setups.into_iter();
    let mut shard_links = shard_links.into_iter();
    let mut handles = Vec::new();
    if shared {
        // The core becomes one more task on shard 0's executor: the hand-offs
        // between them are local wake-ups instead of cross-thread ones.
        let setup = setups.next().expect("at least one shard");
        handles.push(start(
            "rk-shard-0",
            1,
            Box::new(move || {
                Box::pin(async move {
                    let (shard_end, core_end) = link::local(SHARD_TO_CORE_MAX, CORE_TO_SHARD_MAX);
                    let mut setup = setup;
                    let tree = setup.take_view();
                    let core_tree = share_tree.then(|| tree.clone());
                    glommio::spawn_local(async move {
                        let links = connect_core_links(Some(core_end)).await;
                        runner::run(core_setup, links, core_tree).await
                    })
                    .detach();
                    shard::run(setup, shard_end, tree).await
                })
            }),
        )?);
    } else {
        handles.push(start(
            "rk-core",
            0,
            Box::new(move || {
                Box::pin(async move {
                    let links = connect_core_links(None).await;
                    runner::run(core_setup, links, None).await
                })
            }),
        )?);
    }
    for (setup, ends) in setups.zip(shard_links.by_ref()) {
        let name = format!("rk-shard-{}", setup.id);
        let cpu_index = setup.id + 1;
        handles.push(start(
            &name,
            cpu_index,
            Box::new(move || {
                Box::pin(async move {
                    let mut setup = setup;
                    let tree = setup.take_view();
                    shard::run(setup, ends.connect().await, tree).await
                })
            }),
        )?);
    }
    assert!(shard_links.next().is_none(), "one link per shard");
    for h in handles {
        let _ = h.join();
    }
    drop(dirs);
    Err(StartError::from("executors stopped".to_string()))
}

/// A standalone server's consensus core: a lone voter (DESIGN.md §5)
/// that resumes the epoch its log is in, numbering txns on as Apache
/// ZooKeeper's standalone server does (a new epoch comes when the counter
/// reaches its limit). It keeps no history for peers and binds no peer
/// ports.
fn standalone_setup(
    config: Arc<Config>,
    myid: Option<crate::zab::Sid>,
    recovered: crate::recovery::Recovered,
    metrics: Option<Arc<CoreMetrics>>,
    health: Arc<Health>,
    sessions: Arc<crate::session::board::SessionBoard>,
) -> Result<CoreSetup, StartError> {
    let last_zxid = recovered.tree.last_zxid();
    let epochs = crate::consensus::epoch_files::load(&config.data_dir, last_zxid)?;
    Ok(CoreSetup {
        config,
        myid: myid.unwrap_or(0),
        standalone: true,
        epochs,
        recovered,
        history: Vec::new(),
        history_base: last_zxid,
        disk_lost: false,
        peers: Default::default(),
        listeners: None,
        quorum_tls: None,
        health,
        sessions,
        metrics,
    })
}

/// An ensemble member: its id (`dataDir/myid`, which must name one of the
/// `server.N` lines), its epochs, its log as the history ZAB syncs from,
/// and its peer ports, bound now (a port in use stops startup).
fn ensemble_setup(
    config: Arc<Config>,
    myid: Option<crate::zab::Sid>,
    recovered: crate::recovery::Recovered,
    metrics: Option<Arc<CoreMetrics>>,
    health: Arc<Health>,
    sessions: Arc<crate::session::board::SessionBoard>,
) -> Result<CoreSetup, StartError> {
    let myid_path = config.data_dir.join(crate::consensus::epoch_files::MYID);
    let myid = myid.ok_or_else(|| {
        format!(
            "{} is missing: an ensemble member needs its server id there (one of {})",
            myid_path.display(),
            config
                .servers
                .keys()
                .map(|id| format!("server.{id}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    })?;
    let Some(me) = config.servers.get(&myid) else {
        return Err(format!(
            "{}: server id {myid} has no server.{myid} line in the configuration",
            myid_path.display()
        )
        .into());
    };
    let last_zxid = recovered.tree.last_zxid();
    let epochs = crate::consensus::epoch_files::load_for_ensemble(&config.data_dir, last_zxid)?;
    let mut peers = std::collections::BTreeMap::new();
    for (id, spec) in &config.servers {
        let resolve = |port: u16| -> Result<std::net::SocketAddr, String> {
            use std::net::ToSocketAddrs;
            (spec.host.as_str(), port)
                .to_socket_addrs()
                .ok()
                .and_then(|mut a| a.next())
                .ok_or_else(|| format!("server.{id}: cannot resolve {}", spec.host))
        };
        peers.insert(
            *id,
            PeerAddrs {
                quorum: resolve(spec.quorum_port)?,
                election: resolve(spec.election_port)?,
            },
        );
    }
    let mine = &peers[&myid];
    let bind_ip = |a: std::net::SocketAddr| {
        if config.quorum_listen_on_all_ips {
            std::net::SocketAddr::new(std::net::Ipv4Addr::UNSPECIFIED.into(), a.port())
        } else {
            a
        }
    };
    let retries = config.election_port_bind_retry;
    let election_listener = crate::peer::net::bind(bind_ip(mine.election), "election", retries)?;
    let quorum_listener = crate::peer::net::bind(bind_ip(mine.quorum), "quorum", retries)?;
    // The history starts after the newest snapshot: restarting reads what
    // recovery replays, not the whole log (older followers get a SNAP).
    let history_base = crate::consensus::ensemble_history::newest_snapshot(&config.data_dir)?;
    let history = crate::consensus::ensemble_history::read(&config.data_log_dir, history_base)?;
    tracing::info!(
        myid,
        host = %me.host,
        quorum = %mine.quorum,
        election = %mine.election,
        servers = config.servers.len(),
        last_zxid = format_args!("{last_zxid:#x}"),
        history_txns = history.len(),
        "ensemble member"
    );
    let disk_lost = crate::startup::damaged::disk_lost(&config.data_dir);
    if disk_lost {
        tracing::warn!(
            marker = %config.data_dir.join(crate::startup::damaged::LOST_DISK_MARKER).display(),
            "this member lost its disk: it does not vote or count toward a new epoch until a \
             leader established without it has synced it"
        );
    }
    let quorum_tls = match &config.quorum_tls {
        Some(t) => {
            let ctx = Arc::new(
                crate::tls::quorum::quorum_config(t)
                    .map_err(|e| StartError::from(format!("quorum TLS: {e}")))?,
            );
            if t.reload {
                crate::tls::quorum::watch_stores(ctx.clone()).map_err(|e| {
                    StartError::from(format!(
                        "quorum TLS: cannot start sslQuorumReloadCertFiles: {e}"
                    ))
                })?;
            }
            Some(ctx)
        }
        None => None,
    };
    Ok(CoreSetup {
        config,
        myid,
        standalone: false,
        epochs,
        recovered,
        history,
        history_base,
        disk_lost,
        peers,
        listeners: Some((election_listener, quorum_listener)),
        quorum_tls,
        health,
        sessions,
        metrics,
    })
}
