use std::path::PathBuf;

use clap::Parser;
use ringkeeper::config::Config;

/// ringkeeper: a ZooKeeper-compatible coordination server.
#[derive(Parser)]
#[command(version, about)]
struct Args {
    /// An Apache ZooKeeper zoo.cfg (plus ringkeeper.* keys). Without it the
    /// server runs standalone on 127.0.0.1:2181 with dataDir ./data.
    #[arg(long, short)]
    config: Option<PathBuf>,
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let config = match &args.config {
        Some(path) => match Config::load(path) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("ringkeeper: {e}");
                std::process::exit(2);
            }
        },
        None => Config::embedded_default(),
    };
    if let Err(e) = ringkeeper::server::run(config) {
        eprintln!("ringkeeper: {e}");
        std::process::exit(1);
    }
}
