//! Administration: four-letter words and server counters.
pub mod four_letter;
pub mod stats;
