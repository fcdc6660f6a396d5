//! ringkeeper: a ZooKeeper-compatible coordination server, thread-per-core.
//! Reading the module names top-down follows a write: a shard takes the
//! request (shard), the consensus core preps and logs it (consensus, log),
//! applies it to the tree (tree) and the shards fire watches (watch).
//!
//! The modules form layers, each naming only modules below it: formats and
//! data (proto, tree, log, config, admin, snapshot, session, recovery,
//! startup), then peer and consensus, then shard and server on top.
//! tests/module_layers.rs fails on an import cycle between them.
pub mod acl;
pub mod admin;
pub mod aligned;
pub mod allocator;
pub mod config;
pub mod consensus;
pub mod fast_map;
pub mod fault;
pub mod inspect;
pub mod java_compat;
pub mod log;
pub mod memory;
pub mod migrate;
pub mod peer;
pub mod proto;
pub mod recovery;
pub mod sasl;
pub mod server;
pub mod session;
pub mod shard;
pub mod sim;
pub mod snapshot;
pub(crate) mod socket;
pub mod startup;
pub mod tls;
pub mod tree;
pub mod tune;
pub mod uring;
pub mod watch;
pub mod zab;
