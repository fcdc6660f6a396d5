//! Majorities of the voting members (`QuorumMaj`): more than half.

use std::collections::{BTreeMap, BTreeSet};

use super::Sid;

/// Whether `members` (only voters count) are a majority of `voters`.
pub fn is_quorum<'a>(voters: &BTreeSet<Sid>, members: impl IntoIterator<Item = &'a Sid>) -> bool {
    let n = members.into_iter().filter(|s| voters.contains(s)).count();
    n * 2 > voters.len()
}

/// The highest zxid that a majority of `voters` has acknowledged through:
/// each voter's ack covers everything up to its zxid (acks come in order),
/// so this is the majority-th highest ack. None while no majority has
/// acknowledged anything.
pub fn acknowledged_by_quorum(voters: &BTreeSet<Sid>, acked: &BTreeMap<Sid, i64>) -> Option<i64> {
    let mut zxids: Vec<i64> = voters
        .iter()
        .filter_map(|v| acked.get(v).copied())
        .collect();
    let majority = voters.len() / 2 + 1;
    if zxids.len() < majority {
        return None;
    }
    zxids.sort_unstable_by(|a, b| b.cmp(a));
    Some(zxids[majority - 1])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn set(v: &[Sid]) -> BTreeSet<Sid> {
        v.iter().copied().collect()
    }

    #[test]
    fn majorities() {
        assert!(is_quorum(&set(&[1]), &[1]));
        assert!(!is_quorum(&set(&[1]), &[2]), "only voters count");
        assert!(is_quorum(&set(&[1, 2, 3]), &[1, 3]));
        assert!(!is_quorum(&set(&[1, 2, 3]), &[2]));
        assert!(
            !is_quorum(&set(&[1, 2, 3, 4]), &[1, 2]),
            "half is not a majority"
        );
        assert!(is_quorum(&set(&[1, 2, 3, 4, 5]), &[5, 4, 1]));
    }

    #[test]
    fn quorum_point() {
        let voters = set(&[1, 2, 3]);
        let acked: BTreeMap<Sid, i64> = [(1, 9), (2, 4), (3, 7)].into();
        assert_eq!(acknowledged_by_quorum(&voters, &acked), Some(7));
        let acked: BTreeMap<Sid, i64> = [(1, 9), (7, 9)].into();
        assert_eq!(
            acknowledged_by_quorum(&voters, &acked),
            None,
            "7 is not a voter"
        );
        assert_eq!(
            acknowledged_by_quorum(&set(&[4]), &[(4, 3)].into()),
            Some(3)
        );
    }

    proptest! {
        /// The point is acknowledged by a majority, and nothing higher is.
        #[test]
        fn point_is_the_highest_a_majority_holds(acks in proptest::collection::vec(proptest::option::of(0i64..20), 1..8)) {
            let voters: BTreeSet<Sid> = (1..=acks.len() as Sid).collect();
            let acked: BTreeMap<Sid, i64> = acks.iter().enumerate()
                .filter_map(|(i, a)| a.map(|z| (i as Sid + 1, z))).collect();
            let holders = |z: i64| acked.iter().filter(|(_, a)| **a >= z).map(|(s, _)| s).collect::<Vec<_>>();
            match acknowledged_by_quorum(&voters, &acked) {
                Some(p) => {
                    prop_assert!(is_quorum(&voters, holders(p)));
                    prop_assert!(!is_quorum(&voters, holders(p + 1)));
                }
                None => prop_assert!(!is_quorum(&voters, acked.keys())),
            }
        }
    }
}
