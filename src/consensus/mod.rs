//! The consensus core: prep, zxid assignment, log, commit, fan-out.
pub mod core;
pub mod ensemble_history;
pub mod epoch_files;
pub mod forward;
pub mod link;
pub mod messages;
pub mod outstanding;
pub mod prep;
pub mod runner;
pub mod session_owners;
pub mod snap_files;
