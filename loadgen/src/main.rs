//! ringkeeper-loadgen: the ZooKeeper paper's throughput and latency
//! experiments, against any ZooKeeper-compatible server.

mod mix;
mod session;

use std::time::Duration;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(version, about)]
struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Saturated throughput as the read percentage varies (paper, Figure 5).
    Mix {
        /// Server addresses (host:port, comma separated); sessions are spread over them.
        #[arg(long, value_delimiter = ',', default_value = "127.0.0.1:2181")]
        target: Vec<String>,
        #[arg(long, default_value_t = 32)]
        sessions: usize,
        /// Requests in flight per session.
        #[arg(long, default_value_t = 100)]
        outstanding: usize,
        /// Read percentages to measure, one point each.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "0,10,20,30,40,50,60,70,80,90,100"
        )]
        reads: Vec<u32>,
        #[arg(long, default_value_t = 100)]
        znodes: usize,
        #[arg(long, default_value_t = 1024)]
        value_bytes: usize,
        #[arg(long, default_value_t = 2)]
        warmup_s: u64,
        #[arg(long, default_value_t = 10)]
        duration_s: u64,
        /// Client executors (threads).
        #[arg(long, default_value_t = 1)]
        threads: usize,
        /// Parent znode of the benchmark's znodes.
        #[arg(long, default_value = "/rk-loadgen")]
        root: String,
    },
}

fn main() {
    let args = Args::parse();
    match args.cmd {
        Cmd::Mix {
            target,
            sessions,
            outstanding,
            reads,
            znodes,
            value_bytes,
            warmup_s,
            duration_s,
            threads,
            root,
        } => {
            let p = mix::MixParams {
                targets: target,
                sessions,
                outstanding,
                znodes: znodes.max(1),
                value_bytes,
                warmup: Duration::from_secs(warmup_s),
                duration: Duration::from_secs(duration_s),
                threads: threads.max(1),
                root,
            };
            if let Err(e) = mix::prepare(&p) {
                eprintln!("ringkeeper-loadgen: setup failed: {e}");
                std::process::exit(1);
            }
            println!(
                "{:>6} {:>10} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>7}",
                "read%",
                "ops/s",
                "reads/s",
                "writes/s",
                "r_p50us",
                "r_p99us",
                "w_p50us",
                "w_p99us",
                "w_p999us",
                "max_us",
                "cpu_us/op",
                "errors"
            );
            for pct in reads {
                match mix::run_point(&p, pct.min(100)) {
                    Ok(r) => {
                        let max = r.read_us.max().max(r.write_us.max());
                        let errors: u64 = r.errors.values().sum();
                        println!(
                            "{:>6} {:>10.0} {:>10.0} {:>10.0} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8.2} {:>7}",
                            r.read_pct,
                            r.ops_per_s(),
                            r.reads as f64 / r.seconds,
                            r.writes as f64 / r.seconds,
                            r.read_us.value_at_quantile(0.5),
                            r.read_us.value_at_quantile(0.99),
                            r.write_us.value_at_quantile(0.5),
                            r.write_us.value_at_quantile(0.99),
                            r.write_us.value_at_quantile(0.999),
                            max,
                            r.client_cpu_us_per_op(),
                            errors
                        );
                        if !r.errors.is_empty() {
                            println!("        errors by code: {:?}", r.errors);
                        }
                        if r.failed_sessions > 0 {
                            println!("        {} sessions failed", r.failed_sessions);
                        }
                    }
                    Err(e) => {
                        eprintln!("ringkeeper-loadgen: point {pct}% failed: {e}");
                        std::process::exit(1);
                    }
                }
            }
        }
    }
}
