//! Administration: four-letter words, server counters, connection limits,
//! metrics over HTTP, ZooKeeper's AdminServer (HTTP commands).
pub mod admin_server;
pub mod commands;
pub mod four_letter;
pub mod health;
pub mod httpd;
pub mod javafmt;
pub mod json;
pub mod limits;
pub mod mailbox;
pub mod metrics;
pub mod monitor;
pub mod report;
pub mod stats;
