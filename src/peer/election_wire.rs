//! The election port (3888): the connection header an initiator sends
//! (`QuorumCnxManager.InitialMessage`) and the length-framed notifications
//! (`FastLeaderElection.buildMsg`), as ZooKeeper 3.8 writes and reads them.

use super::{Decoded, PeerError};
use crate::zab::election::{Notification, PeerState, Vote};
use crate::zab::Sid;

/// `PROTOCOL_VERSION_V1` (3.5+): what an initiator sends (ZOOKEEPER-3720).
pub const PROTOCOL_V1: i64 = -65536;
/// `PROTOCOL_VERSION_V2` (3.6+, multiple addresses).
pub const PROTOCOL_V2: i64 = -65535;
/// `InitialMessage`'s bound on the address (`maxBuffer`).
pub const ADDRESS_BYTES_MAX: usize = 2048;
/// `PACKETMAXSIZE`: the bound on one election message.
pub const MESSAGE_BYTES_MAX: usize = 512 * 1024;
/// The notification version 3.8 sends.
pub const NOTIFICATION_VERSION: i32 = 2;

/// Who dialled: the initiator's sid and its election addresses ("host:port";
/// empty in the pre-3.5 form).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitialMessage {
    pub sid: Sid,
    pub addresses: Vec<String>,
}

pub fn encode_initial(sid: Sid, address: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(&PROTOCOL_V1.to_be_bytes());
    out.extend_from_slice(&(sid as i64).to_be_bytes());
    out.extend_from_slice(&(address.len() as i32).to_be_bytes());
    out.extend_from_slice(address.as_bytes());
}

fn i64_at(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

fn i32_at(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// A length field that must lie in 1..=max.
fn bounded_len(len: i32, max: usize, what: &'static str) -> Result<usize, PeerError> {
    if len <= 0 || len as usize > max {
        return Err(PeerError::TooLong {
            what,
            len: len as i64,
            max,
        });
    }
    Ok(len as usize)
}

/// The connection header at the front of `b` (`InitialMessage.parse`).
pub fn decode_initial(b: &[u8]) -> Result<Decoded<InitialMessage>, PeerError> {
    if b.len() < 8 {
        return Ok(Decoded::More);
    }
    let first = i64_at(b, 0);
    if first >= 0 {
        // Pre-3.5: the sid alone.
        return Ok(Decoded::Item(
            InitialMessage {
                sid: first as Sid,
                addresses: Vec::new(),
            },
            8,
        ));
    }
    if first != PROTOCOL_V1 && first != PROTOCOL_V2 {
        return Err(PeerError::Bad {
            what: "election connection header",
            detail: format!("protocol version {first}"),
        });
    }
    if b.len() < 20 {
        return Ok(Decoded::More);
    }
    let sid = i64_at(b, 8);
    let len = bounded_len(i32_at(b, 16), ADDRESS_BYTES_MAX, "election address")?;
    let end = 20 + len;
    if b.len() < end {
        return Ok(Decoded::More);
    }
    let text = std::str::from_utf8(&b[20..end]).map_err(|_| PeerError::Bad {
        what: "election address",
        detail: "not UTF-8".into(),
    })?;
    if sid < 0 {
        return Err(PeerError::Bad {
            what: "election connection header",
            detail: format!("sid {sid}"),
        });
    }
    Ok(Decoded::Item(
        InitialMessage {
            sid: sid as Sid,
            addresses: text.split('|').map(str::to_string).collect(),
        },
        end,
    ))
}

/// A notification as it travels: the election's fields plus the sender's
/// view of the configuration (`QuorumVerifier.toString()`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireNotification {
    /// 0 LOOKING, 1 FOLLOWING, 2 LEADING, 3 OBSERVING.
    pub state: i32,
    pub leader: i64,
    pub zxid: i64,
    pub election_epoch: i64,
    pub peer_epoch: i64,
    pub config: String,
}

impl WireNotification {
    pub fn from_election(n: &Notification, config: &str) -> WireNotification {
        WireNotification {
            state: match n.state {
                PeerState::Looking => 0,
                PeerState::Following => 1,
                PeerState::Leading => 2,
            },
            leader: n.vote.leader as i64,
            zxid: n.vote.zxid,
            election_epoch: n.round as i64,
            peer_epoch: n.vote.peer_epoch as i64,
            config: config.to_string(),
        }
    }

    /// The election's view; None for an observer's notification or fields
    /// out of range (negative sids, rounds or epochs: a non-voter's
    /// Long.MIN_VALUE vote).
    pub fn to_election(&self) -> Option<Notification> {
        let state = match self.state {
            0 => PeerState::Looking,
            1 => PeerState::Following,
            2 => PeerState::Leading,
            _ => return None,
        };
        if self.leader < 0
            || self.election_epoch < 0
            || !(0..=u32::MAX as i64).contains(&self.peer_epoch)
        {
            return None;
        }
        Some(Notification {
            state,
            vote: Vote {
                leader: self.leader as Sid,
                zxid: self.zxid,
                peer_epoch: self.peer_epoch as u32,
            },
            round: self.election_epoch as u64,
        })
    }
}

/// One framed notification (`i32 len` + version 2 payload).
pub fn encode_notification(n: &WireNotification, out: &mut Vec<u8>) {
    let len = 44 + n.config.len();
    out.extend_from_slice(&(len as i32).to_be_bytes());
    out.extend_from_slice(&n.state.to_be_bytes());
    out.extend_from_slice(&n.leader.to_be_bytes());
    out.extend_from_slice(&n.zxid.to_be_bytes());
    out.extend_from_slice(&n.election_epoch.to_be_bytes());
    out.extend_from_slice(&n.peer_epoch.to_be_bytes());
    out.extend_from_slice(&NOTIFICATION_VERSION.to_be_bytes());
    out.extend_from_slice(&(n.config.len() as i32).to_be_bytes());
    out.extend_from_slice(n.config.as_bytes());
}

/// One framed notification at the front of `b`, in any of the lengths a
/// 3.8 receiver accepts: 28 bytes (no peerEpoch: the zxid's epoch), 40 (no
/// version), 44 and more (version, then a config when version > 1).
pub fn decode_notification(b: &[u8]) -> Result<Decoded<WireNotification>, PeerError> {
    if b.len() < 4 {
        return Ok(Decoded::More);
    }
    let len = bounded_len(i32_at(b, 0), MESSAGE_BYTES_MAX, "election message")?;
    let end = 4 + len;
    if b.len() < end {
        return Ok(Decoded::More);
    }
    let p = &b[4..end];
    if p.len() < 28 {
        return Err(PeerError::Bad {
            what: "notification",
            detail: format!("{} bytes, fewer than 28", p.len()),
        });
    }
    let zxid = i64_at(p, 12);
    let mut n = WireNotification {
        state: i32_at(p, 0),
        leader: i64_at(p, 4),
        zxid,
        election_epoch: i64_at(p, 20),
        peer_epoch: zxid >> 32,
        config: String::new(),
    };
    if p.len() >= 36 {
        n.peer_epoch = i64_at(p, 28);
    }
    if p.len() >= 44 {
        let version = i32_at(p, 36);
        if version > 1 {
            let config_len = i32_at(p, 40);
            if config_len < 0 || 44 + config_len as usize > p.len() {
                return Err(PeerError::Bad {
                    what: "notification",
                    detail: format!("config length {config_len} in {} bytes", p.len()),
                });
            }
            n.config = String::from_utf8_lossy(&p[44..44 + config_len as usize]).into_owned();
        }
    }
    if !(0..=3).contains(&n.state) {
        return Err(PeerError::Bad {
            what: "notification",
            detail: format!("state {}", n.state),
        });
    }
    Ok(Decoded::Item(n, end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn initial_message_v1_bytes() {
        let mut b = Vec::new();
        encode_initial(3, "10.0.0.3:3888", &mut b);
        assert_eq!(&b[..8], &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0]);
        assert_eq!(&b[8..16], &3i64.to_be_bytes());
        assert_eq!(&b[16..20], &13i32.to_be_bytes());
        for cut in 0..b.len() {
            assert_eq!(decode_initial(&b[..cut]), Ok(Decoded::More), "cut {cut}");
        }
        let want = InitialMessage {
            sid: 3,
            addresses: vec!["10.0.0.3:3888".into()],
        };
        assert_eq!(decode_initial(&b), Ok(Decoded::Item(want, b.len())));
    }

    #[test]
    fn initial_message_other_forms() {
        // Pre-3.5: the sid alone.
        let legacy = 7i64.to_be_bytes();
        assert_eq!(
            decode_initial(&legacy),
            Ok(Decoded::Item(
                InitialMessage {
                    sid: 7,
                    addresses: vec![]
                },
                8
            ))
        );
        // V2: several addresses.
        let mut b = PROTOCOL_V2.to_be_bytes().to_vec();
        b.extend_from_slice(&2i64.to_be_bytes());
        let a = "h1:1|h2:2";
        b.extend_from_slice(&(a.len() as i32).to_be_bytes());
        b.extend_from_slice(a.as_bytes());
        match decode_initial(&b).unwrap() {
            Decoded::Item(m, _) => assert_eq!(m.addresses, ["h1:1", "h2:2"]),
            other => panic!("{other:?}"),
        }
        // Refused: an unknown version, an address over 2048 bytes or empty.
        assert!(decode_initial(&(-3i64).to_be_bytes()).is_err());
        let mut b = PROTOCOL_V1.to_be_bytes().to_vec();
        b.extend_from_slice(&2i64.to_be_bytes());
        for len in [0i32, 2049, -1] {
            let mut c = b.clone();
            c.extend_from_slice(&len.to_be_bytes());
            assert!(decode_initial(&c).is_err(), "length {len}");
        }
    }

    #[test]
    fn notification_bytes_and_old_lengths() {
        let n = WireNotification {
            state: 1,
            leader: 3,
            zxid: 0x2_0000_0005,
            election_epoch: 9,
            peer_epoch: 2,
            config: "server.1=a:2888:3888:participant\nversion=0".into(),
        };
        let mut b = Vec::new();
        encode_notification(&n, &mut b);
        assert_eq!(i32_at(&b, 0) as usize, b.len() - 4);
        assert_eq!(i32_at(&b, 40), NOTIFICATION_VERSION);
        assert_eq!(
            decode_notification(&b),
            Ok(Decoded::Item(n.clone(), b.len()))
        );
        // 40 bytes: no version, no config.
        let mut old = (40i32).to_be_bytes().to_vec();
        old.extend_from_slice(&b[4..44]);
        let Decoded::Item(m, _) = decode_notification(&old).unwrap() else {
            panic!()
        };
        assert_eq!((m.peer_epoch, m.config.as_str()), (2, ""));
        // 28 bytes: the peer epoch is the zxid's.
        let mut older = (28i32).to_be_bytes().to_vec();
        older.extend_from_slice(&b[4..32]);
        let Decoded::Item(m, _) = decode_notification(&older).unwrap() else {
            panic!()
        };
        assert_eq!(m.peer_epoch, 2);
        // Refused: too short, too long, a bad state, a config overrunning.
        let short = [&(20i32).to_be_bytes()[..], &[0u8; 20]].concat();
        assert!(decode_notification(&short).is_err());
        assert!(decode_notification(&(512 * 1024 + 1i32).to_be_bytes()).is_err());
        let mut bad_state = b.clone();
        bad_state[4..8].copy_from_slice(&9i32.to_be_bytes());
        assert!(decode_notification(&bad_state).is_err());
        let mut overrun = b.clone();
        overrun[44..48].copy_from_slice(&1000i32.to_be_bytes());
        assert!(decode_notification(&overrun).is_err());
    }

    #[test]
    fn election_view_round_trips() {
        let n = Notification {
            state: PeerState::Leading,
            vote: Vote {
                leader: 5,
                zxid: 0x1_0000_0002,
                peer_epoch: 1,
            },
            round: 4,
        };
        assert_eq!(
            WireNotification::from_election(&n, "").to_election(),
            Some(n)
        );
        let mut observer = WireNotification::from_election(&n, "");
        observer.state = 3;
        assert_eq!(observer.to_election(), None);
        let mut non_voter = WireNotification::from_election(&n, "");
        non_voter.leader = i64::MIN;
        assert_eq!(non_voter.to_election(), None);
    }

    proptest! {
        /// Garbage never panics, and a refusal or a frame never reads past
        /// what was given.
        #[test]
        fn garbage_is_refused_or_framed(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(Decoded::Item(_, used)) = decode_notification(&b) {
                prop_assert!(used <= b.len());
            }
            if let Ok(Decoded::Item(_, used)) = decode_initial(&b) {
                prop_assert!(used <= b.len());
            }
        }
    }
}
