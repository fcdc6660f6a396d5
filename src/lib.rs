//! ringkeeper: a ZooKeeper-compatible coordination server, thread-per-core.
pub mod proto;
