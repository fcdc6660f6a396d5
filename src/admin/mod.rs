//! Administration: four-letter words, server counters, connection limits.
pub mod four_letter;
pub mod javafmt;
pub mod limits;
pub mod mailbox;
pub mod monitor;
pub mod report;
pub mod stats;
