//! Faults a test can ask for through the environment, to check what the
//! server does when its own code fails. Nothing here runs unless the
//! variable is set; it is read once.

use std::sync::OnceLock;

/// Panics the consensus core at its Nth tick (of either driver): a test
/// checks that a dead core ends the process (DESIGN.md §5) instead of
/// leaving shards that answer pings from a frozen tree.
pub const PANIC_CORE_AT_TICK: &str = "RINGKEEPER_FAULT_PANIC_CORE_AT_TICK";

fn panic_core_at_tick() -> Option<u64> {
    static AT: OnceLock<Option<u64>> = OnceLock::new();
    *AT.get_or_init(|| std::env::var(PANIC_CORE_AT_TICK).ok()?.parse().ok())
}

/// Called by the consensus core on every tick, counting them in `ticks`.
pub fn core_ticked(ticks: &mut u64) {
    let Some(at) = panic_core_at_tick() else {
        return;
    };
    *ticks += 1;
    if *ticks >= at {
        panic!("{PANIC_CORE_AT_TICK}={at}: the consensus core fails on purpose");
    }
}
