//! The hash maps on the request path: std's `HashMap` and `HashSet` with
//! ahash's hasher in place of SipHash-1-3 (which took about 2% of a write's
//! CPU over the pending-change, connection and session maps, issue 27).
//! ahash is keyed per map from a random seed, so paths a client chooses
//! cannot be made to collide on purpose, as SipHash's keys already ensured.

pub type FastMap<K, V> = std::collections::HashMap<K, V, ahash::RandomState>;
pub type FastSet<K> = std::collections::HashSet<K, ahash::RandomState>;
