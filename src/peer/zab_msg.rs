//! `zab::ensemble::Msg` as Apache ZooKeeper's learner protocol carries it
//! (ZAB-PROTOCOL-NOTES §2.2): each quorum message is one `QuorumPacket`.
//! Votes travel on the election port instead (`election_wire`).

use super::quorum_packet::{learner_info, parse_learner_info, PacketType, QuorumPacket};
use super::{quorum_packet, PeerError};
use crate::zab::ensemble::{Msg, Txn};
use crate::zab::{zxid, Sid};

/// The packet for `msg`, sent by server `myid`. `None` for a vote (election
/// port) and for a SNAP, whose payload is a serialized tree this server
/// does not write yet.
pub fn to_packet(msg: &Msg, myid: Sid) -> Option<QuorumPacket> {
    use PacketType as P;
    let epoch_zxid = |e: u32| zxid::make(e, 0);
    let i32_data = |v: i32| Some(v.to_be_bytes().to_vec());
    Some(match msg {
        Msg::Vote(_) | Msg::Snap { .. } => return None,
        Msg::FollowerInfo {
            accepted_epoch,
            ringkeeper,
        } => QuorumPacket::new(
            P::FollowerInfo,
            epoch_zxid(*accepted_epoch),
            Some(learner_info(myid, version(*ringkeeper), 0)),
        ),
        Msg::LeaderInfo { epoch, ringkeeper } => QuorumPacket::new(
            P::LeaderInfo,
            epoch_zxid(*epoch),
            i32_data(version(*ringkeeper)),
        ),
        Msg::AckEpoch {
            last_zxid,
            current_epoch,
        } => QuorumPacket::new(
            P::AckEpoch,
            *last_zxid,
            i32_data(current_epoch.map_or(-1, |e| e as i32)),
        ),
        Msg::Diff => QuorumPacket::new(P::Diff, 0, None),
        Msg::Trunc { to } => QuorumPacket::new(P::Trunc, *to, None),
        Msg::Proposal(t) => QuorumPacket::new(P::Proposal, t.zxid, Some(t.data.clone())),
        Msg::Commit(z) => QuorumPacket::new(P::Commit, *z, None),
        Msg::NewLeader { epoch } => QuorumPacket::new(P::NewLeader, epoch_zxid(*epoch), None),
        Msg::Ack(z) => QuorumPacket::new(P::Ack, *z, None),
        Msg::UpToDate => QuorumPacket::new(P::UpToDate, -1, None),
        Msg::Ping => QuorumPacket::new(P::Ping, 0, None),
        // LearnerHandler's SYNC: no zxid, no data.
        Msg::SyncAnswer => QuorumPacket::new(P::Sync, 0, None),
    })
}

/// The protocol version this server sends, with `RINGKEEPER_PEER` when it
/// speaks as ringkeeper.
fn version(ringkeeper: bool) -> i32 {
    if ringkeeper {
        quorum_packet::PROTOCOL_VERSION | quorum_packet::RINGKEEPER_PEER
    } else {
        quorum_packet::PROTOCOL_VERSION
    }
}

fn is_ringkeeper(version: i32) -> bool {
    version & quorum_packet::RINGKEEPER_PEER != 0
}

fn bad(what: &'static str, detail: impl Into<String>) -> PeerError {
    PeerError::Bad {
        what,
        detail: detail.into(),
    }
}

/// The epoch in a `epoch << 32` zxid field; the low half must be zero.
fn epoch_of(what: &'static str, z: i64) -> Result<u32, PeerError> {
    if zxid::counter(z) != 0 || z < 0 {
        return Err(bad(what, format!("zxid {} is not an epoch", zxid::hex(z))));
    }
    // One more must still be an epoch this server can write and read back
    // (epoch_files refuses more than EPOCH_MAX).
    if zxid::epoch(z) > crate::zab::EPOCH_MAX - 1 {
        return Err(bad(
            what,
            format!("epoch {} is out of range", zxid::epoch(z)),
        ));
    }
    Ok(zxid::epoch(z))
}

fn i32_of(what: &'static str, data: &Option<Vec<u8>>) -> Result<i32, PeerError> {
    match data.as_deref() {
        Some(b) if b.len() >= 4 => Ok(i32::from_be_bytes(b[..4].try_into().expect("4 bytes"))),
        _ => Err(bad(what, "data is not a 4-byte int")),
    }
}

/// The message a packet carries. Packets this server does not take yet
/// (SNAP, REQUEST, SYNC, REVALIDATE, INFORM, the reconfig ones, an
/// observer's) are errors: the caller closes that connection.
pub fn from_packet(p: QuorumPacket) -> Result<Msg, PeerError> {
    use PacketType as P;
    Ok(match p.kind {
        P::FollowerInfo => Msg::FollowerInfo {
            accepted_epoch: epoch_of("FOLLOWERINFO", p.zxid)?,
            // `learner_sid` checked the LearnerInfo of the connection's
            // first packet; a later one without it is a Java learner's.
            ringkeeper: p
                .data
                .as_deref()
                .and_then(|d| quorum_packet::parse_learner_info(d).ok())
                .is_some_and(|(_, v, _)| is_ringkeeper(v)),
        },
        P::LeaderInfo => {
            let version = i32_of("LEADERINFO", &p.data)?;
            if version < quorum_packet::PROTOCOL_VERSION {
                return Err(bad(
                    "LEADERINFO",
                    format!("protocol version {version:#x} predates ZAB 1.0"),
                ));
            }
            Msg::LeaderInfo {
                epoch: epoch_of("LEADERINFO", p.zxid)?,
                ringkeeper: is_ringkeeper(version),
            }
        }
        P::AckEpoch => {
            let current = i32_of("ACKEPOCH", &p.data)?;
            Msg::AckEpoch {
                last_zxid: p.zxid,
                current_epoch: match current {
                    -1 => None,
                    c if c >= 0 && c as u32 <= crate::zab::EPOCH_MAX => Some(c as u32),
                    c => return Err(bad("ACKEPOCH", format!("current epoch {c}"))),
                },
            }
        }
        P::Diff => Msg::Diff,
        P::Trunc => Msg::Trunc { to: p.zxid },
        P::Proposal => Msg::Proposal(Txn {
            zxid: p.zxid,
            data: p.data.ok_or_else(|| bad("PROPOSAL", "no txn"))?,
        }),
        P::Commit => Msg::Commit(p.zxid),
        P::NewLeader => Msg::NewLeader {
            epoch: epoch_of("NEWLEADER", p.zxid)?,
        },
        P::Ack => Msg::Ack(p.zxid),
        P::UpToDate => Msg::UpToDate,
        P::Ping => Msg::Ping,
        other => {
            return Err(bad(
                "quorum packet",
                format!("{other:?} is not supported by this server yet"),
            ))
        }
    })
}

/// The learner's sid in a FOLLOWERINFO (the first packet on a learner
/// connection); OBSERVERINFO and anything else are refused.
pub fn learner_sid(p: &QuorumPacket) -> Result<Sid, PeerError> {
    match p.kind {
        PacketType::FollowerInfo => {}
        PacketType::ObserverInfo => {
            return Err(bad("learner", "observers are not supported yet"));
        }
        other => {
            return Err(bad(
                "learner",
                format!("first packet is {other:?}, not FOLLOWERINFO"),
            ))
        }
    }
    let data = p
        .data
        .as_deref()
        .ok_or_else(|| bad("FOLLOWERINFO", "no LearnerInfo"))?;
    let (sid, version, _config) = parse_learner_info(data)?;
    if version < quorum_packet::PROTOCOL_VERSION {
        return Err(bad(
            "FOLLOWERINFO",
            format!("protocol version {version:#x} predates ZAB 1.0"),
        ));
    }
    Ok(sid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zab::zxid::make;

    #[test]
    fn every_quorum_message_survives_the_wire() {
        let msgs = [
            Msg::FollowerInfo {
                accepted_epoch: 3,
                ringkeeper: true,
            },
            Msg::FollowerInfo {
                accepted_epoch: 3,
                ringkeeper: false,
            },
            Msg::LeaderInfo {
                epoch: 4,
                ringkeeper: true,
            },
            Msg::LeaderInfo {
                epoch: 4,
                ringkeeper: false,
            },
            Msg::AckEpoch {
                last_zxid: make(3, 9),
                current_epoch: Some(3),
            },
            Msg::AckEpoch {
                last_zxid: make(3, 9),
                current_epoch: None,
            },
            Msg::Diff,
            Msg::Trunc { to: make(2, 7) },
            Msg::Proposal(Txn {
                zxid: make(4, 1),
                data: vec![1, 2, 3],
            }),
            Msg::Commit(make(4, 1)),
            Msg::NewLeader { epoch: 4 },
            Msg::Ack(make(4, 0)),
            Msg::UpToDate,
            Msg::Ping,
        ];
        for m in msgs {
            let p = to_packet(&m, 7).expect("a quorum message");
            let mut bytes = Vec::new();
            p.encode(&mut bytes);
            let back = match quorum_packet::decode(&bytes, 1 << 20).unwrap() {
                super::super::Decoded::Item(p, n) => {
                    assert_eq!(n, bytes.len());
                    p
                }
                super::super::Decoded::More => panic!("whole packet"),
            };
            if let Msg::FollowerInfo { .. } = m {
                assert_eq!(learner_sid(&back).unwrap(), 7);
            }
            assert_eq!(from_packet(back).unwrap(), m);
        }
    }

    #[test]
    fn packets_out_of_this_protocol_are_refused() {
        let p = QuorumPacket::new(PacketType::FollowerInfo, make(1, 5), None);
        assert!(from_packet(p).is_err(), "an epoch zxid with a counter");
        // Epochs past what epoch files hold (issue 26, 11): a peer's
        // bad input, refused at the wire, not a member that cannot restart.
        let p = QuorumPacket::new(PacketType::FollowerInfo, make(0x7fff_ffff, 0), None);
        assert!(from_packet(p).is_err(), "epoch 2^31 - 1");
        let p = QuorumPacket::new(
            PacketType::AckEpoch,
            make(1, 1),
            Some(0x7fff_ffffi32.to_be_bytes().to_vec()),
        );
        assert!(from_packet(p).is_err(), "current epoch 2^31 - 1");
        let p = QuorumPacket::new(PacketType::LeaderInfo, make(1, 0), Some(vec![0, 0, 0, 1]));
        assert!(from_packet(p).is_err(), "pre-1.0 LEADERINFO");
        let p = QuorumPacket::new(PacketType::Request, -1, Some(vec![0; 16]));
        assert!(from_packet(p).is_err());
        let p = QuorumPacket::new(
            PacketType::ObserverInfo,
            0,
            Some(learner_info(2, quorum_packet::PROTOCOL_VERSION, 0)),
        );
        assert!(learner_sid(&p).is_err());
        let p = QuorumPacket::new(PacketType::Ack, 0, None);
        assert!(learner_sid(&p).is_err());
    }
}
