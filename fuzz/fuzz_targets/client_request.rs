//! libFuzzer entry for checks::client_request (see checks.rs for what it checks).
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "../checks.rs"]
mod checks;

fuzz_target!(|data: &[u8]| checks::client_request(data));
