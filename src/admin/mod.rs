//! Administration: four-letter words, server counters, connection limits,
//! metrics over HTTP.
pub mod four_letter;
pub mod health;
pub mod javafmt;
pub mod limits;
pub mod mailbox;
pub mod metrics;
pub mod monitor;
pub mod report;
pub mod stats;
