use std::path::PathBuf;

use clap::{Parser, Subcommand};
use ringkeeper::config::Config;

/// Requests are allocated on a shard and freed on the consensus core (and
/// the reverse for replies); glibc's malloc spends ~15% of a write-heavy
/// profile on that traffic, mimalloc's per-thread free lists much less.
/// mimalloc v2 rather than v3: at 1M znodes of 100 bytes v3 held 282-285
/// MiB of RSS against v2's 266-273, at 5M 1,335-1,340 against
/// 1,257-1,266 MiB, and its tree updates ran 3-10% slower
/// (`cargo bench --bench tree_scale -- create_growing`, `tuning/scale.md`).
/// Entered through its plain functions where it can be
/// ([`ringkeeper::allocator`]).
#[global_allocator]
static GLOBAL: ringkeeper::allocator::Mimalloc = ringkeeper::allocator::Mimalloc;

/// ringkeeper: a ZooKeeper-compatible coordination server.
#[derive(Parser)]
#[command(version, about)]
struct Args {
    /// An Apache ZooKeeper zoo.cfg (plus ringkeeper.* keys). Without it the
    /// server runs standalone on 127.0.0.1:2181 with dataDir ./data.
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Overrides clientPort of the embedded default (no --config): for a
    /// quick local server, or a test, on another port.
    #[arg(long, conflicts_with = "config")]
    port: Option<u16>,
    #[command(subcommand)]
    tool: Option<Tool>,
}

#[derive(Subcommand)]
enum Tool {
    /// Txn log files: dump one segment, or verify every segment in a dir.
    Log {
        #[command(subcommand)]
        what: LogTool,
    },
    /// Snapshot files.
    Snapshot {
        #[command(subcommand)]
        what: SnapshotTool,
    },
    /// Read an Apache ZooKeeper dataDir (3.4-3.9: its newest valid
    /// snapshot and the txn logs after it, replayed as ZooKeeper does, its
    /// digests checked) and write a ringkeeper dataDir with the same
    /// znodes, sessions, epoch files and myid. The output directory must
    /// be new or empty; it appears only when complete.
    Import {
        /// ZooKeeper's dataDir (the one holding version-2/).
        #[arg(long)]
        zookeeper_datadir: PathBuf,
        /// ZooKeeper's dataLogDir, when it is not dataDir.
        #[arg(long)]
        zookeeper_datalogdir: Option<PathBuf>,
        /// The ringkeeper dataDir to write.
        #[arg(long)]
        datadir: PathBuf,
        /// Import even when the tree differs from a digest ZooKeeper wrote.
        #[arg(long)]
        no_digest_check: bool,
    },
    /// Write a stopped ringkeeper dataDir as an Apache ZooKeeper dataDir
    /// (a 3.8 snapshot with its digest, the epoch files and myid) that
    /// ZooKeeper loads and serves unchanged: the way back.
    Export {
        /// The ringkeeper dataDir.
        #[arg(long)]
        datadir: PathBuf,
        /// ringkeeper's dataLogDir, when it is not dataDir.
        #[arg(long)]
        datalogdir: Option<PathBuf>,
        /// The ZooKeeper dataDir to write (new or empty).
        #[arg(long)]
        zookeeper_datadir: PathBuf,
    },
    /// Host checks and zoo.cfg suggestions: `tune check`, `tune suggest`.
    Tune {
        #[command(subcommand)]
        what: ringkeeper::tune::TuneCommand,
    },
}

#[derive(Subcommand)]
enum LogTool {
    /// Print every txn of a log segment (ringkeeper's or Apache
    /// ZooKeeper's), one line each as ZooKeeper's TxnLogToolkit does (or
    /// one JSON object per line with --json).
    Dump {
        file: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Check every checksum of every segment in a directory.
    Verify { dir: PathBuf },
}

#[derive(Subcommand)]
enum SnapshotTool {
    /// Print the sessions and nodes of a snapshot (ringkeeper's, or
    /// Apache ZooKeeper's, plain, .gz or .snappy), or with --json one JSON
    /// object for the snapshot and one per node.
    Dump {
        file: PathBuf,
        #[arg(long)]
        json: bool,
    },
}

fn run_tool(tool: Tool) -> ! {
    let mut out = std::io::stdout().lock();
    let result = match tool {
        Tool::Log {
            what: LogTool::Dump { file, json },
        } => {
            use ringkeeper::inspect::DumpFormat;
            let format = if json {
                DumpFormat::Json
            } else {
                DumpFormat::Text
            };
            ringkeeper::inspect::dump_log(&file, format, &mut out)
        }
        Tool::Log {
            what: LogTool::Verify { dir },
        } => ringkeeper::inspect::verify_log(&dir, &mut out),
        Tool::Snapshot {
            what: SnapshotTool::Dump { file, json },
        } => {
            use ringkeeper::inspect::DumpFormat;
            let format = if json {
                DumpFormat::Json
            } else {
                DumpFormat::Text
            };
            ringkeeper::inspect::dump_snapshot(&file, format, &mut out)
        }
        Tool::Import {
            zookeeper_datadir,
            zookeeper_datalogdir,
            datadir,
            no_digest_check,
        } => {
            use std::io::Write;
            let options = ringkeeper::migrate::ImportOptions {
                zookeeper_data_dir: zookeeper_datadir,
                zookeeper_data_log_dir: zookeeper_datalogdir,
                out: datadir,
                check_digests: !no_digest_check,
            };
            ringkeeper::migrate::import(&options)
                .map_err(|e| e.to_string())
                .and_then(|r| write!(out, "{r}").map_err(|e| e.to_string()))
        }
        Tool::Export {
            datadir,
            datalogdir,
            zookeeper_datadir,
        } => {
            use std::io::Write;
            let options = ringkeeper::migrate::ExportOptions {
                data_dir: datadir,
                data_log_dir: datalogdir,
                out: zookeeper_datadir,
            };
            ringkeeper::migrate::export(&options)
                .map_err(|e| e.to_string())
                .and_then(|r| write!(out, "{r}").map_err(|e| e.to_string()))
        }
        Tool::Tune { what } => match ringkeeper::tune::run(what, &mut out) {
            Ok(code) => std::process::exit(code),
            Err(e) => Err(e),
        },
    };
    match result {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            eprintln!("ringkeeper: {e}");
            std::process::exit(1);
        }
    }
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal, never in log files.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    // A panic on any thread is a bug this process cannot get past: a dead
    // consensus core would leave shards answering pings and reads from a
    // frozen tree, and a dead shard its clients unanswered. The process
    // ends, as ZooKeeper exits when a critical thread fails, and the
    // ensemble (or a supervisor) carries on without it.
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        tracing::error!("a thread panicked ({info}): stopping the server");
        std::process::abort();
    }));
    let args = Args::parse();
    if let Some(tool) = args.tool {
        run_tool(tool);
    }
    let config = match &args.config {
        Some(path) => match Config::load(path) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("ringkeeper: {e}");
                std::process::exit(ringkeeper::startup::EXIT_INVALID_INVOCATION);
            }
        },
        None => {
            let mut c = Config::embedded_default();
            if let Some(port) = args.port {
                c.client_port = port;
            }
            c
        }
    };
    if let Err(e) = ringkeeper::server::run(config) {
        eprintln!("ringkeeper: {e}");
        std::process::exit(e.exit_code);
    }
}
