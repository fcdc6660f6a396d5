//! The ZooKeeper wire protocol (jute records).
pub mod codes;
pub mod jute;
