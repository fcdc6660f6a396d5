//! zxids: `epoch << 32 | counter`, as ZooKeeper's `ZxidUtils`. An epoch's
//! first txn has counter 1 (counter 0 is the epoch itself, as NEWLEADER
//! and LEADERINFO carry it).

/// The epoch of a zxid (its high 32 bits).
pub fn epoch(zxid: i64) -> u32 {
    (zxid >> 32) as u32
}

/// The counter of a zxid within its epoch (its low 32 bits).
pub fn counter(zxid: i64) -> u32 {
    zxid as u32
}

/// The zxid of `counter` in `epoch`.
pub fn make(epoch: u32, counter: u32) -> i64 {
    ((epoch as i64) << 32) | counter as i64
}

/// The zxid of a txn's successor in the same epoch; None when the epoch's
/// counter is exhausted (ZooKeeper then forces a new election:
/// `Leader.propose` on counter 0xffffffff).
pub fn next_in_epoch(zxid: i64) -> Option<i64> {
    (counter(zxid) != u32::MAX).then_some(zxid + 1)
}

/// Whether `next` may directly follow `prev` in a log: the next counter of
/// the same epoch, or the first txn (counter 1) of a later epoch. A log
/// holds no gaps within an epoch; between epochs, the txns a new leader
/// never proposed do not exist anywhere.
pub fn follows(prev: i64, next: i64) -> bool {
    if epoch(next) == epoch(prev) {
        counter(prev) != u32::MAX && next == prev + 1
    } else {
        epoch(next) > epoch(prev) && counter(next) == 1
    }
}

/// A zxid as ZooKeeper prints one (`0x` and lower-case hex).
pub fn hex(zxid: i64) -> String {
    format!("{zxid:#x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parts() {
        let z = make(3, 7);
        assert_eq!(z, 0x3_0000_0007);
        assert_eq!((epoch(z), counter(z)), (3, 7));
        assert_eq!(hex(z), "0x300000007");
        assert_eq!(next_in_epoch(make(1, u32::MAX)), None);
        assert_eq!(next_in_epoch(make(1, 5)), Some(make(1, 6)));
    }

    #[test]
    fn continuity() {
        assert!(follows(make(1, 4), make(1, 5)));
        assert!(!follows(make(1, 4), make(1, 6)), "a gap within an epoch");
        assert!(!follows(make(1, 4), make(1, 4)), "a repeat");
        assert!(follows(make(1, 4), make(2, 1)), "a new epoch starts at 1");
        assert!(follows(make(1, 4), make(9, 1)), "epochs may be skipped");
        assert!(
            !follows(make(1, 4), make(2, 2)),
            "a new epoch's first txn is missing"
        );
        assert!(!follows(make(2, 1), make(1, 5)), "epochs never go back");
        assert!(!follows(make(1, u32::MAX), make(2, 0)));
        assert!(follows(make(1, u32::MAX), make(2, 1)));
        // The empty log's last zxid is 0 (epoch 0, counter 0).
        assert!(follows(0, 1));
        assert!(follows(0, make(1, 1)));
    }

    proptest! {
        #[test]
        fn parts_round_trip(e in 0u32..0x7fff_fffe, c in any::<u32>()) {
            let z = make(e, c);
            prop_assert_eq!((epoch(z), counter(z)), (e, c));
            // zxids (positive: epochs below 2^31) order as (epoch, counter).
            prop_assert!(make(e + 1, 0) > z);
        }

        #[test]
        fn exactly_one_successor_per_epoch(e in 0u32..1000, c in 0u32..u32::MAX, later in 1u32..5) {
            let prev = make(e, c);
            prop_assert!(follows(prev, make(e, c + 1)));
            prop_assert!(follows(prev, make(e + later, 1)));
            prop_assert!(!follows(prev, make(e + later, 2)));
            if c < u32::MAX - 1 {
                prop_assert!(!follows(prev, make(e, c + 2)));
            }
        }
    }
}
