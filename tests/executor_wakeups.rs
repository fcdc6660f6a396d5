//! The vendored glommio keeps its latency preemption timer armed across
//! loop passes instead of cancelling and re-arming it at every pass
//! (vendor/glommio/RINGKEEPER-PATCH.md, patch 5). A kept timer can fire
//! between the pass that kept it and the executor's check for preemption
//! before it runs its queues. glommio 0.9 took that as "nothing ran" and
//! parked with runnable tasks; if none of them had a timer pending, the
//! executor slept for good (a load generator run stalled that way for
//! minutes when the timer was first kept). Here an executor with a short
//! preemption period is busy for about that long before each sleep, so
//! that the timer keeps firing around the moment the loop decides to
//! sleep; every sleep must end.
//!
//! It also keeps the timer a sleep arms while later sleeps need no earlier
//! one (patch 7): a sleep that needs a nearer timer must arm it.

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
    spawn_executor(Duration::from_micros(500), move || async move {
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
    for i in 0..SLEEPS {
        if progress.recv_timeout(STALL).is_err() {
            panic!("sleep {i} of {SLEEPS} did not end within {STALL:?}: the executor slept past its timer");
        }
    }
}

/// The kept preemption timer may end one sleep of an executor that has
/// gone idle, but no more: an idle executor must not wake once a period
/// for a timer that preempts nothing.
#[test]
fn an_idle_executor_stops_waking_for_its_preemption_timer() {
    const PERIOD: Duration = Duration::from_millis(20);
    let (idle, tid) = mpsc::channel();
    spawn_executor(PERIOD, move || async move {
        // Passes with work and user timers: the preemption timer is
        // armed and kept across them.
        for _ in 0..200 {
            let start = Instant::now();
            while start.elapsed() < Duration::from_micros(100) {
                std::hint::spin_loop();
            }
            glommio::timer::sleep(Duration::from_micros(200)).await;
        }
        // SAFETY: gettid has no arguments and cannot fail.
        let _ = idle.send(unsafe { libc::gettid() });
        std::future::pending::<()>().await;
    });
    let tid = tid
        .recv_timeout(STALL)
        .expect("the executor ran its timers");
    let wakes = || voluntary_switches(tid);
    // At most one wake of the kept timer falls in here.
    std::thread::sleep(PERIOD * 5);
    let before = wakes();
    std::thread::sleep(PERIOD * 50);
    let during = wakes() - before;
    assert!(
        during <= 2,
        "an idle executor woke {during} times in {:?} (preemption timer {PERIOD:?})",
        PERIOD * 50
    );
}

/// Patch 7 keeps the timer a sleep armed for later sleeps that need no
/// earlier one. Here the executor sleeps towards a far timer (30 s) until
/// another thread writes to a socket, then sleeps 5 ms: that sleep must arm
/// its own timer rather than keep the far one, and end in milliseconds
/// (not seconds: `LATE` is 400 times the sleep, a bound on correctness, not
/// on speed).
#[test]
fn a_nearer_timer_ends_the_next_sleep_though_a_far_one_is_armed() {
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;

    const ROUNDS: u32 = 20;
    const FAR: Duration = Duration::from_secs(30);
    const NEAR: Duration = Duration::from_millis(5);
    const LATE: Duration = Duration::from_secs(2);
    let (mut ours, mut theirs) = std::os::unix::net::UnixStream::pair().expect("a socket pair");
    ours.set_nonblocking(true).expect("non-blocking");
    let (slept, took) = mpsc::channel();
    // A preemption timer as long as FAR: none ends a sleep early here.
    spawn_executor(FAR, move || async move {
        glommio::spawn_local(glommio::timer::sleep(FAR)).detach();
        for _ in 0..ROUNDS {
            // Asleep towards FAR until the byte comes.
            glommio::net::poll_readable(ours.as_raw_fd())
                .await
                .expect("poll the socket");
            let mut byte = [0u8; 1];
            ours.read_exact(&mut byte).expect("the byte");
            let start = Instant::now();
            glommio::timer::sleep(NEAR).await;
            if slept.send(start.elapsed()).is_err() {
                return;
            }
        }
    });
    for round in 0..ROUNDS {
        std::thread::sleep(Duration::from_millis(20));
        theirs.write_all(&[1]).expect("wake the executor");
        let took = took
            .recv_timeout(STALL)
            .unwrap_or_else(|_| panic!("round {round}: a {NEAR:?} sleep did not end within {STALL:?}: it kept the {FAR:?} timer"));
        // Kept, the far timer (or the preemption timer, made as long)
        // would end the sleep after seconds.
        assert!(
            took >= NEAR && took < LATE,
            "round {round}: a {NEAR:?} sleep ended after {took:?}"
        );
    }
}

/// Patch 7 cancels a kept sleep timer when the next pass has no timer at
/// all; the cancellation must reach the kernel before the executor sleeps,
/// or the timer of a dropped `Timer` still wakes an idle executor. Here the
/// executor sleeps towards a 300 ms timer, a byte from another thread wakes
/// it, the timer is dropped, and the executor idles: it must not wake at
/// the 300 ms mark.
#[test]
fn an_idle_executor_does_not_wake_for_a_dropped_timer() {
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;

    const DROPPED: Duration = Duration::from_millis(300);
    let (mut ours, mut theirs) = std::os::unix::net::UnixStream::pair().expect("a socket pair");
    ours.set_nonblocking(true).expect("non-blocking");
    let (idle, tid) = mpsc::channel();
    // No preemption timer ends a sleep within the test.
    spawn_executor(Duration::from_secs(30), move || async move {
        // SAFETY: gettid has no arguments and cannot fail.
        let _ = idle.send(unsafe { libc::gettid() });
        let fd = ours.as_raw_fd();
        futures_lite::future::or(
            async {
                glommio::timer::sleep(DROPPED).await;
                panic!("the byte comes before the timer");
            },
            async {
                glommio::net::poll_readable(fd)
                    .await
                    .expect("poll the socket");
            },
        )
        .await;
        let mut byte = [0u8; 1];
        ours.read_exact(&mut byte).expect("the byte");
        std::future::pending::<()>().await;
    });
    let tid = tid.recv_timeout(STALL).expect("the executor started");
    let wakes = || voluntary_switches(tid);
    std::thread::sleep(Duration::from_millis(50));
    let start = Instant::now();
    theirs.write_all(&[1]).expect("wake the executor");
    // Past the wake-up the byte caused, well before the dropped timer.
    std::thread::sleep(Duration::from_millis(100));
    let before = wakes();
    std::thread::sleep(DROPPED * 2 - start.elapsed());
    let during = wakes() - before;
    assert_eq!(
        during, 0,
        "an idle executor woke {during} times after its only timer was dropped"
    );
}

/// An executor with nothing else to do parks with the I/O its last task
/// queued still in the ring's submission queue: the park's sleep submits
/// it (patch 9) where glommio 0.9 entered the kernel once to submit and
/// again to sleep. That I/O must still reach the kernel and end the sleep:
/// here a task waits for a socket to turn readable, again and again, with
/// the byte written by another thread before or after the wait is queued.
#[test]
fn io_queued_just_before_the_executor_parks_ends_its_sleep() {
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;

    const ROUNDS: u32 = 2000;
    let (mut ours, mut theirs) = std::os::unix::net::UnixStream::pair().expect("a socket pair");
    ours.set_nonblocking(true).expect("non-blocking");
    let (asked, ask) = mpsc::channel::<u32>();
    let (done, progress) = mpsc::channel();
    spawn_executor(Duration::from_secs(30), move || async move {
        let fd = ours.as_raw_fd();
        for i in 0..ROUNDS {
            if asked.send(i).is_err() {
                return;
            }
            glommio::net::poll_readable(fd)
                .await
                .expect("poll the socket");
            let mut byte = [0u8; 1];
            ours.read_exact(&mut byte).expect("the byte");
            if done.send(i).is_err() {
                return;
            }
        }
    });
    for i in 0..ROUNDS {
        ask.recv_timeout(STALL).expect("the executor asks");
        if i % 2 == 1 {
            // Most often after the executor parked with the wait queued.
            std::thread::sleep(Duration::from_micros(200));
        }
        theirs.write_all(&[1]).expect("a byte");
        if progress.recv_timeout(STALL).is_err() {
            panic!("round {i} of {ROUNDS}: the wait never ended: its poll was not submitted");
        }
    }
}

/// Runs `body` on an unpinned executor whose latency preemption period is
/// `preempt`, on a thread of its own, detached: if the executor never gets
/// on, the test fails and the thread is left to the process's exit.
fn spawn_executor<F, Fut>(preempt: Duration, body: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    std::thread::spawn(move || {
        let ex = LocalExecutorBuilder::new(Placement::Unbound)
            .preempt_timer(preempt)
            .make()
            .expect("an executor");
        ex.run(body());
    });
}

/// How many times thread `tid` of this process has gone to sleep.
fn voluntary_switches(tid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status"))
        .expect("the executor's thread status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|n| n.trim().parse::<u64>().ok())
        .expect("a voluntary context switch count")
}
