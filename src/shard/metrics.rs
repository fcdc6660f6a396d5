//! A shard's side of the metrics endpoint (see `admin::metrics`): its part
//! of a scrape, and, on shard 0, the HTTP endpoint that gathers every
//! shard's part through the admin mailbox.

use std::os::unix::io::{FromRawFd, IntoRawFd};
use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use crate::admin::four_letter;
use crate::admin::health::ServerRole;
use crate::admin::mailbox::Ask;
use crate::admin::metrics::group_commit::CoreMetrics;
use crate::admin::metrics::process::ProcessView;
use crate::admin::metrics::{self, http, CoreView, MetricsSetup, Scrape, ShardMetrics, ShardView};
use crate::admin::stats::totals;

use super::Shard;

impl Shard {
    /// This shard's part of a scrape (on this shard's executor).
    pub(super) fn metrics_report(&self) -> ShardMetrics {
        ShardMetrics {
            latency: self.latency.snapshot(),
            counts: self.report(false).counts,
        }
    }

    /// The whole exposition: this shard's part built here, the others'
    /// asked for through the mailbox (each built on its own shard).
    async fn scrape(&self, core: &CoreMetrics) -> String {
        let mine = Arc::new(self.metrics_report());
        let asked = self.ask_others(Ask::Metrics).await;
        let facts = self.tree_facts("mntr");
        let mut s = Scrape {
            version: four_letter::VERSION.to_string(),
            totals: totals(&self.stats),
            node_count: facts.node_count,
            ephemerals_count: facts.ephemerals_count,
            approximate_data_size: facts.approximate_data_size,
            open_fds: four_letter::open_fds(),
            max_fds: four_letter::max_fds(),
            core: CoreView::read(core),
            unrecoverable_errors: self.health.unrecoverable_errors(),
            process: ProcessView::read(),
            ensemble: match self.health.role() {
                ServerRole::Leader | ServerRole::Follower => Some((
                    self.health.role() == ServerRole::Leader,
                    self.health
                        .ensemble
                        .view(crate::consensus::core::now_ms() as u64),
                )),
                _ => None,
            },
            ..Default::default()
        };
        for (id, stats) in self.stats.iter().enumerate() {
            // A shard that did not answer in time shows its previous part.
            let part = if id == self.id {
                Some(mine.clone())
            } else {
                debug_assert!(asked.contains(&id));
                stats.mailbox.metrics()
            };
            let counts = part.as_ref().map(|p| p.counts).unwrap_or_default();
            if let Some(p) = &part {
                s.latency_us.merge(&p.latency);
            }
            s.watch_count += counts.watch_count;
            s.sessions += counts.sessions;
            s.shards.push(ShardView {
                id,
                connections: stats.connections.load(Relaxed),
                outstanding: stats.outstanding.load(Relaxed),
                packets_received: stats.packets_received.load(Relaxed),
                packets_sent: stats.packets_sent.load(Relaxed),
                watches: counts.watch_count,
                sessions: counts.sessions,
            });
        }
        // Every session of the core's tracker, connected or not.
        s.sessions = self.session_board.count();
        metrics::render(&s)
    }
}

/// Starts the metrics endpoint on this (shard 0's) executor.
pub(super) fn start(shard: Rc<Shard>, setup: MetricsSetup) {
    let addr = setup.listener.local_addr().ok();
    // SAFETY: the descriptor comes from a listening std socket whose
    // ownership `into_raw_fd` gives up; glommio's listener now owns it.
    let listener = unsafe { glommio::net::TcpListener::from_raw_fd(setup.listener.into_raw_fd()) };
    let core = setup.core;
    tracing::info!(shard = shard.id, addr = ?addr, "metrics endpoint listening");
    let scrape = move || {
        let (shard, core) = (shard.clone(), core.clone());
        async move { shard.scrape(&core).await }
    };
    glommio::spawn_local(http::serve(listener, scrape)).detach();
}
