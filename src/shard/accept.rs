//! Waiting after a failed accept. At the process or system descriptor
//! limit (EMFILE, ENFILE) every accept fails at once until a descriptor is
//! freed; retrying every 10 ms logged a warning 100 times a second. The wait
//! doubles from ACCEPT_BACKOFF_MIN to ACCEPT_BACKOFF_MAX, and an episode of
//! failures is logged once when it starts and once when it ends.

use std::time::Duration;

const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

pub struct Backoff {
    shard: usize,
    wait: Duration,
    failures: u64,
}

impl Backoff {
    pub fn new(shard: usize) -> Backoff {
        Backoff {
            shard,
            wait: ACCEPT_BACKOFF_MIN,
            failures: 0,
        }
    }

    /// An accept failed: how long to wait before the next.
    pub fn failed(&mut self, e: &dyn std::fmt::Display) -> Duration {
        if self.failures == 0 {
            tracing::warn!(
                shard = self.shard,
                "accept failed: {e}; retrying with backoff up to {ACCEPT_BACKOFF_MAX:?}"
            );
        }
        self.failures += 1;
        let wait = self.wait;
        self.wait = (self.wait * 2).min(ACCEPT_BACKOFF_MAX);
        wait
    }

    /// An accept succeeded: ends an episode of failures.
    pub fn succeeded(&mut self) {
        if self.failures > 0 {
            tracing::warn!(
                shard = self.shard,
                failures = self.failures,
                "accepting connections again"
            );
        }
        self.failures = 0;
        self.wait = ACCEPT_BACKOFF_MIN;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_the_cap_and_resets() {
        let mut b = Backoff::new(0);
        let waits: Vec<u64> = (0..10)
            .map(|_| b.failed(&"EMFILE").as_millis() as u64)
            .collect();
        assert_eq!(waits, [10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000]);
        b.succeeded();
        assert_eq!(b.failed(&"EMFILE"), ACCEPT_BACKOFF_MIN);
    }
}
