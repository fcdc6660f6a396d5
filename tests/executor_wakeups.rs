//! The vendored glommio keeps its latency preemption timer armed across
//! loop passes instead of cancelling and re-arming it at every pass
//! (vendor/glommio/RINGKEEPER-PATCH.md, patch 2), and an executor going to
//! sleep on a user timer keeps an armed one that fires no later. A kept
//! timer that has in fact already fired must not stand in for the user
//! timer: the executor would sleep with nothing to wake it (a load
//! generator run stalled that way for minutes before the fix). Here an
//! executor with a short preemption period is busy for about that long
//! before each sleep, so that the timer keeps firing around the moment the
//! loop decides to sleep; every sleep must end.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use glommio::{LocalExecutorBuilder, Placement};

const SLEEPS: u32 = 4000;
/// Far longer than any sleep here: a sleep not over by then never ends.
const STALL: Duration = Duration::from_secs(5);

#[test]
fn every_timer_sleep_ends_while_the_preemption_timer_keeps_firing() {
    let (done, progress) = mpsc::channel();
    // Detached: if a sleep never ends, the test fails and the thread is
    // left to the process's exit.
    std::thread::spawn(move || {
        let ex = LocalExecutorBuilder::new(Placement::Unbound)
            .preempt_timer(Duration::from_micros(500))
            .make()
            .expect("an executor");
        ex.run(async move {
            let mut rng = 0x9e37_79b9_7f4a_7c15u64;
            for i in 0..SLEEPS {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let busy = Duration::from_micros(300 + rng % 400);
                let start = Instant::now();
                while start.elapsed() < busy {
                    std::hint::spin_loop();
                }
                glommio::timer::sleep(Duration::from_micros(100 + (rng >> 20) % 900)).await;
                if done.send(i).is_err() {
                    return;
                }
            }
        });
    });
    for i in 0..SLEEPS {
        if progress.recv_timeout(STALL).is_err() {
            panic!("sleep {i} of {SLEEPS} did not end within {STALL:?}: the executor slept past its timer");
        }
    }
}
