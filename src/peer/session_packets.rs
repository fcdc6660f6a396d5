//! The quorum packets that carry client sessions rather than ZAB itself
//! (ZAB-PROTOCOL-NOTES §4.2-4.3): a follower's REQUEST forwarding a
//! client's write, sync, createSession or closeSession; the leader's SYNC
//! answering a forwarded sync; and the follower's PING reply carrying its
//! clients' session touches.

use super::quorum_packet::{PacketType, QuorumPacket, AUTH_IDS_MAX};
use super::PeerError;

/// A client request a follower forwards: `data = i64 sessionId, i32 cxid,
/// i32 type` and the request body as the client sent it; `authinfo` the
/// connection's ids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Forwarded {
    pub session_id: i64,
    pub cxid: i32,
    pub op: i32,
    pub body: Vec<u8>,
    pub auth: Vec<(String, String)>,
}

pub fn request_packet(f: &Forwarded) -> QuorumPacket {
    let mut data = Vec::with_capacity(16 + f.body.len());
    data.extend_from_slice(&f.session_id.to_be_bytes());
    data.extend_from_slice(&f.cxid.to_be_bytes());
    data.extend_from_slice(&f.op.to_be_bytes());
    data.extend_from_slice(&f.body);
    let mut p = QuorumPacket::new(PacketType::Request, -1, Some(data));
    p.auth = Some(f.auth.iter().take(AUTH_IDS_MAX).cloned().collect());
    p
}

/// The frame of `request_packet(f)`, appended to `out` without the packet's
/// own copy of the request.
pub fn encode_request(f: &Forwarded, out: &mut Vec<u8>) {
    let mut head = [0u8; 16];
    head[..8].copy_from_slice(&f.session_id.to_be_bytes());
    head[8..12].copy_from_slice(&f.cxid.to_be_bytes());
    head[12..].copy_from_slice(&f.op.to_be_bytes());
    super::quorum_packet::encode_pieces(
        PacketType::Request,
        -1,
        &[&head, &f.body],
        Some(&f.auth[..f.auth.len().min(AUTH_IDS_MAX)]),
        out,
    );
}

pub fn parse_request(p: QuorumPacket) -> Result<Forwarded, PeerError> {
    let data = p.data.unwrap_or_default();
    if data.len() < 16 {
        return Err(PeerError::Bad {
            what: "REQUEST",
            detail: format!("{} bytes, fewer than 16", data.len()),
        });
    }
    Ok(Forwarded {
        session_id: i64::from_be_bytes(data[0..8].try_into().expect("8")),
        cxid: i32::from_be_bytes(data[8..12].try_into().expect("4")),
        op: i32::from_be_bytes(data[12..16].try_into().expect("4")),
        body: data[16..].to_vec(),
        auth: p.auth.unwrap_or_default(),
    })
}

/// A follower asks the leader whether a client's session may reconnect
/// here (Learner.validateSession): `data = i64 sessionId, i32 timeout`.
pub fn revalidate_request(session_id: i64, timeout_ms: i32) -> QuorumPacket {
    let mut data = Vec::with_capacity(12);
    data.extend_from_slice(&session_id.to_be_bytes());
    data.extend_from_slice(&timeout_ms.to_be_bytes());
    QuorumPacket::new(PacketType::Revalidate, -1, Some(data))
}

/// The leader's answer (LearnerMaster.revalidateSession): `data = i64
/// sessionId, bool valid`.
pub fn revalidate_answer(session_id: i64, valid: bool) -> QuorumPacket {
    let mut data = Vec::with_capacity(9);
    data.extend_from_slice(&session_id.to_be_bytes());
    data.push(valid as u8);
    QuorumPacket::new(PacketType::Revalidate, -1, Some(data))
}

/// A REVALIDATE: a follower's question (12 bytes) or the leader's answer
/// (9 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Revalidate {
    Asked { session_id: i64, timeout_ms: i32 },
    Answered { session_id: i64, valid: bool },
}

pub fn parse_revalidate(data: &[u8]) -> Result<Revalidate, PeerError> {
    let id = |d: &[u8]| i64::from_be_bytes(d[0..8].try_into().expect("8"));
    match data.len() {
        12 => Ok(Revalidate::Asked {
            session_id: id(data),
            timeout_ms: i32::from_be_bytes(data[8..12].try_into().expect("4")),
        }),
        9 => Ok(Revalidate::Answered {
            session_id: id(data),
            valid: data[8] != 0,
        }),
        n => Err(PeerError::Bad {
            what: "REVALIDATE",
            detail: format!("{n} bytes of data"),
        }),
    }
}

/// A follower's PING reply: `(session, timeout)` for each session that
/// was active since the last one.
pub fn ping_reply(zxid: i64, touches: &[(i64, i32)]) -> QuorumPacket {
    let mut data = Vec::with_capacity(12 * touches.len());
    for (id, timeout) in touches {
        data.extend_from_slice(&id.to_be_bytes());
        data.extend_from_slice(&timeout.to_be_bytes());
    }
    QuorumPacket::new(PacketType::Ping, zxid, Some(data))
}

/// The touch table in a PING reply's data.
pub fn parse_touches(data: &[u8]) -> Result<Vec<(i64, i32)>, PeerError> {
    if !data.len().is_multiple_of(12) {
        return Err(PeerError::Bad {
            what: "PING",
            detail: format!("touch table of {} bytes", data.len()),
        });
    }
    Ok(data
        .chunks_exact(12)
        .map(|c| {
            (
                i64::from_be_bytes(c[0..8].try_into().expect("8")),
                i32::from_be_bytes(c[8..12].try_into().expect("4")),
            )
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revalidate_questions_and_answers_round_trip() {
        let q = revalidate_request(0x0300_0000_0000_0007, 4000);
        assert_eq!(
            parse_revalidate(q.data.as_deref().unwrap()),
            Ok(Revalidate::Asked {
                session_id: 0x0300_0000_0000_0007,
                timeout_ms: 4000
            })
        );
        let a = revalidate_answer(7, true);
        assert_eq!(
            parse_revalidate(a.data.as_deref().unwrap()),
            Ok(Revalidate::Answered {
                session_id: 7,
                valid: true
            })
        );
        assert!(parse_revalidate(&[0; 5]).is_err());
    }

    #[test]
    fn requests_and_touches_survive_the_wire() {
        let f = Forwarded {
            session_id: 0x0200_0000_0000_0001,
            cxid: 7,
            op: 1,
            body: vec![1, 2, 3],
            auth: vec![("ip".into(), "127.0.0.1".into())],
        };
        let mut b = Vec::new();
        request_packet(&f).encode(&mut b);
        let mut direct = Vec::new();
        encode_request(&f, &mut direct);
        assert_eq!(
            direct, b,
            "the frame without the packet's copy is the packet's"
        );
        let p = match super::super::quorum_packet::decode(&b, 1 << 20).unwrap() {
            super::super::Decoded::Item(p, _) => p,
            super::super::Decoded::More => panic!("whole"),
        };
        assert_eq!(parse_request(p).unwrap(), f);
        let t = vec![(5, 3000), (-1, 10)];
        let p = ping_reply(9, &t);
        assert_eq!(parse_touches(p.data.as_deref().unwrap()).unwrap(), t);
        assert!(parse_touches(&[0; 13]).is_err());
        let short = QuorumPacket::new(PacketType::Request, -1, Some(vec![0; 15]));
        assert!(parse_request(short).is_err());
    }
}
