//! Drives the consensus core on its own executor: one task per shard
//! forwards that shard's requests into a bounded inbox, a ticker asks for
//! session expiry, and the main loop drains the inbox in batches.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use glommio::channels::local_channel;
use glommio::channels::shared_channel::{SharedReceiver, SharedSender};

use super::core::{Core, BATCH_REQUESTS_MAX};
use super::messages::{ShardBatch, ToCore};
use crate::config::Config;

/// Inbox bound: when it is full, shard forwarders wait, and the shards'
/// own bounded queues push back on their connections.
const INBOX_MAX: usize = 4096;

enum Inbox {
    Request(ToCore),
    Tick,
    Reap,
}

pub struct CoreSetup {
    pub config: Arc<Config>,
    pub from_shards: Vec<SharedReceiver<ToCore>>,
    pub to_shards: Vec<SharedSender<ShardBatch>>,
}

pub async fn run(setup: CoreSetup) {
    let (tx, rx) = local_channel::new_bounded::<Inbox>(INBOX_MAX);
    let tx = Rc::new(tx);
    for r in setup.from_shards {
        let tx = tx.clone();
        glommio::spawn_local(async move {
            let r = r.connect().await;
            while let Some(m) = r.recv().await {
                if tx.send(Inbox::Request(m)).await.is_err() {
                    break;
                }
            }
        })
        .detach();
    }
    {
        let tx = tx.clone();
        let every = Duration::from_millis((setup.config.tick_time_ms as u64 / 2).clamp(10, 1000));
        glommio::spawn_local(async move {
            loop {
                glommio::timer::sleep(every).await;
                if tx.send(Inbox::Tick).await.is_err() {
                    break;
                }
            }
        })
        .detach();
    }
    {
        let tx = tx.clone();
        let every = Duration::from_millis(setup.config.container_check_interval_ms);
        glommio::spawn_local(async move {
            loop {
                glommio::timer::sleep(every).await;
                if tx.send(Inbox::Reap).await.is_err() {
                    break;
                }
            }
        })
        .detach();
    }
    let per_pass = (setup.config.container_max_per_minute as u64
        * setup.config.container_check_interval_ms)
        .div_ceil(60_000)
        .max(1) as usize;
    let never_used_ms = setup.config.container_max_never_used_interval_ms;
    let mut senders = Vec::with_capacity(setup.to_shards.len());
    for s in setup.to_shards {
        senders.push(s.connect().await);
    }
    let mut core = Core::new(&setup.config, senders.len());
    tracing::info!(shards = senders.len(), "consensus core running");
    while let Some(first) = rx.recv().await {
        let mut handled = 0;
        let mut next = Some(first);
        while let Some(msg) = next.take() {
            match msg {
                Inbox::Request(m) => core.handle(m),
                Inbox::Tick => core.expire_sessions(),
                Inbox::Reap => core.reap(per_pass, never_used_ms),
            }
            handled += 1;
            if handled < BATCH_REQUESTS_MAX {
                next = futures_lite::future::poll_once(rx.recv()).await.flatten();
            }
        }
        for (sender, batch) in senders.iter().zip(core.finish_batch().await) {
            if let Some(b) = batch {
                if sender.send(b).await.is_err() {
                    tracing::error!("a shard is gone");
                }
            }
        }
    }
}
