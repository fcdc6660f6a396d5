//! libFuzzer entry for checks::request_handling (see checks.rs for what it checks).
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "../checks.rs"]
mod checks;

fuzz_target!(|data: &[u8]| checks::request_handling(data));
