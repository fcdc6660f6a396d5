//! The pair of bounded channels between one shard and the consensus core.
//!
//! When they run on different executors the link is glommio's shared
//! (cross-thread) channel. When the core runs as a task on the shard's own
//! executor (`ringkeeper.consensusExecutor=shared`) it is a local channel: a
//! send then wakes the receiving task directly, where a shared channel's
//! receiver is only woken at the executor's next reactor turn (a round of
//! io_uring_enter calls and timer re-arming, plus a membarrier when the
//! executor parks).

use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};
use glommio::channels::shared_channel::{
    self, ConnectedReceiver, ConnectedSender, SharedReceiver, SharedSender,
};
use glommio::{GlommioError, ResourceType};

use super::messages::{ShardBatch, ToCore};

/// The receiving side is gone.
#[derive(Debug)]
pub struct Closed;

pub enum LinkSender<T: Send + 'static> {
    Shared(ConnectedSender<T>),
    Local(LocalSender<T>),
}

impl<T: Send + 'static> LinkSender<T> {
    /// Sends `item`, waiting while the channel is full (backpressure).
    pub async fn send(&self, item: T) -> Result<(), Closed> {
        match self {
            LinkSender::Shared(s) => s.send(item).await.map_err(|_| Closed),
            LinkSender::Local(s) => send_local(s, item).await,
        }
    }
}

/// Sends on a local channel: pushed at once when there is room, without
/// `send`'s waiter (a future and a waker registration per message); waits
/// only while the channel is full (backpressure).
pub async fn send_local<T>(s: &LocalSender<T>, item: T) -> Result<(), Closed> {
    match s.try_send(item) {
        Ok(()) => Ok(()),
        Err(GlommioError::WouldBlock(ResourceType::Channel(item))) => {
            s.send(item).await.map_err(|_| Closed)
        }
        Err(_) => Err(Closed),
    }
}

pub enum LinkReceiver<T: Send + 'static> {
    Shared(ConnectedReceiver<T>),
    Local(LocalReceiver<T>),
}

impl<T: Send + 'static> LinkReceiver<T> {
    /// The next item, or None once the sender is gone.
    pub async fn recv(&self) -> Option<T> {
        match self {
            LinkReceiver::Shared(r) => r.recv().await,
            LinkReceiver::Local(r) => r.recv().await,
        }
    }

    /// An item already queued on a local link, without waiting; None when
    /// there is none (or the link is shared: then `recv` takes it).
    pub fn try_recv(&self) -> Option<T> {
        match self {
            LinkReceiver::Shared(_) => None,
            LinkReceiver::Local(r) => r.try_recv(),
        }
    }
}

/// A shard's ends of its link, connected on the shard's executor.
pub struct ShardEnds {
    pub to_core: LinkSender<ToCore>,
    pub from_core: LinkReceiver<ShardBatch>,
}

/// The core's ends of one shard's link, connected on the core's executor.
pub struct CoreEnds {
    pub from_shard: LinkReceiver<ToCore>,
    pub to_shard: LinkSender<ShardBatch>,
}

/// A shard's ends of a shared link, not yet connected: these can move to
/// the shard's executor.
pub struct SharedShardEnds {
    to_core: SharedSender<ToCore>,
    from_core: SharedReceiver<ShardBatch>,
}

impl SharedShardEnds {
    /// Connects on the calling executor; completes once the core connected too.
    pub async fn connect(self) -> ShardEnds {
        ShardEnds {
            to_core: LinkSender::Shared(self.to_core.connect().await),
            from_core: LinkReceiver::Shared(self.from_core.connect().await),
        }
    }
}

/// The core's ends of a shared link, not yet connected.
pub struct SharedCoreEnds {
    from_shard: SharedReceiver<ToCore>,
    to_shard: SharedSender<ShardBatch>,
}

impl SharedCoreEnds {
    /// Connects on the calling executor; completes once the shard connected too.
    pub async fn connect(self) -> CoreEnds {
        CoreEnds {
            from_shard: LinkReceiver::Shared(self.from_shard.connect().await),
            to_shard: LinkSender::Shared(self.to_shard.connect().await),
        }
    }
}

/// A link across executors: `to_core_max` requests queued for the core and
/// `to_shard_max` commit batches queued for the shard before senders wait.
pub fn shared(to_core_max: usize, to_shard_max: usize) -> (SharedShardEnds, SharedCoreEnds) {
    let (to_core, from_shard) = shared_channel::new_bounded(to_core_max);
    let (to_shard, from_core) = shared_channel::new_bounded(to_shard_max);
    (
        SharedShardEnds { to_core, from_core },
        SharedCoreEnds {
            from_shard,
            to_shard,
        },
    )
}

/// A link within one executor, with the same bounds as [`shared`].
pub fn local(to_core_max: usize, to_shard_max: usize) -> (ShardEnds, CoreEnds) {
    let (to_core, from_shard) = local_channel::new_bounded(to_core_max);
    let (to_shard, from_core) = local_channel::new_bounded(to_shard_max);
    (
        ShardEnds {
            to_core: LinkSender::Local(to_core),
            from_core: LinkReceiver::Local(from_core),
        },
        CoreEnds {
            from_shard: LinkReceiver::Local(from_shard),
            to_shard: LinkSender::Local(to_shard),
        },
    )
}
