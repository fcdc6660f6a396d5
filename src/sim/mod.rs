//! Deterministic simulation of the pure `zab` parts (DESIGN.md §5: tests
//! drive replicas of the pure core over a simulated network from a seed).
//! Everything here is driven by [`Rng`] from one seed: the same seed
//! replays the same run, message by message.

pub mod election;
pub mod ensemble;

/// The seeds a simulation test runs: `SIM_SEED=N` replays one,
/// `SIM_SEEDS=N` runs 0..N, and `default` of them otherwise.
pub fn seeds_from_env(default: u64) -> Vec<u64> {
    if let Ok(one) = std::env::var("SIM_SEED") {
        return vec![one.parse().expect("SIM_SEED is a number")];
    }
    let n: u64 = std::env::var("SIM_SEEDS")
        .ok()
        .map(|v| v.parse().expect("SIM_SEEDS is a number"))
        .unwrap_or(default);
    (0..n).collect()
}

/// splitmix64: small, fast, and the same sequence on every machine.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0);
        self.next_u64() % n
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// One of `v` (not empty), uniformly.
    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len() as u64) as usize]
    }
}
