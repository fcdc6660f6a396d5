//! Fast leader election over a simulated network (issue 12, step 2, for
//! the election): `SIM_SEEDS` seeds (10,000 by default) of 3, 5 or 7 voters
//! with random logs, delays, duplication, and, in half of them, loss and a
//! cut-off minority until the network stabilizes (src/sim/election.rs says
//! what is checked). A failing seed prints the command that replays it.
//!
//!     SIM_SEEDS=100000 cargo test --release --test sim_election
//!     SIM_SEED=1234 cargo test --release --test sim_election

use ringkeeper::sim::election;

fn seeds() -> Vec<u64> {
    ringkeeper::sim::seeds_from_env(10_000)
}

#[test]
fn elections_end_with_one_leader_and_the_best_one_when_the_network_allows() {
    for seed in seeds() {
        if let Err(e) = election::run(seed) {
            panic!("seed {seed}: {e}\nreplay: SIM_SEED={seed} cargo test --release --test sim_election");
        }
    }
}

#[test]
fn a_seed_replays_exactly() {
    for seed in [3, 77, 4242] {
        let a = format!("{:?}", election::run(seed));
        let b = format!("{:?}", election::run(seed));
        assert_eq!(a, b, "seed {seed}");
    }
}
