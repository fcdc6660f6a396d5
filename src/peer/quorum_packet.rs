//! The quorum port (2888): `QuorumPacket` records back to back, no length
//! prefix (`type`, `zxid`, `data` buffer, `authinfo` vector of Ids), with
//! jute's bounds on every buffer and string. ZAB-PROTOCOL-NOTES §2.1-2.2.

use super::{Decoded, PeerError};
use crate::proto::java_utf8;

/// `Leader.java`'s packet types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketType {
    Request = 1,
    Proposal = 2,
    Ack = 3,
    Commit = 4,
    Ping = 5,
    Revalidate = 6,
    Sync = 7,
    Inform = 8,
    CommitAndActivate = 9,
    NewLeader = 10,
    FollowerInfo = 11,
    UpToDate = 12,
    Diff = 13,
    Trunc = 14,
    Snap = 15,
    ObserverInfo = 16,
    LeaderInfo = 17,
    AckEpoch = 18,
    InformAndActivate = 19,
}

impl TryFrom<i32> for PacketType {
    type Error = PeerError;

    fn try_from(t: i32) -> Result<PacketType, PeerError> {
        use PacketType::*;
        const ALL: [PacketType; 19] = [
            Request,
            Proposal,
            Ack,
            Commit,
            Ping,
            Revalidate,
            Sync,
            Inform,
            CommitAndActivate,
            NewLeader,
            FollowerInfo,
            UpToDate,
            Diff,
            Trunc,
            Snap,
            ObserverInfo,
            LeaderInfo,
            AckEpoch,
            InformAndActivate,
        ];
        ALL.into_iter()
            .find(|p| *p as i32 == t)
            .ok_or_else(|| PeerError::Bad {
                what: "quorum packet",
                detail: format!("unknown type {t}"),
            })
    }
}

/// `LearnerInfo.protocolVersion` and `LEADERINFO`'s: ZAB 1.0.
pub const PROTOCOL_VERSION: i32 = 0x10000;
/// Set in the protocol version a ringkeeper server sends in FOLLOWERINFO
/// and LEADERINFO: it takes one ACK or COMMIT for a run of proposals
/// (`zab::ensemble::Msg::FollowerInfo`). Java servers only check that the
/// version is at least `PROTOCOL_VERSION` (LearnerHandler, Learner), and
/// send exactly that.
pub const RINGKEEPER_PEER: i32 = 0x100;
/// Most auth ids a REQUEST may carry (a connection has a few).
pub const AUTH_IDS_MAX: usize = 64;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuorumPacket {
    pub kind: PacketType,
    pub zxid: i64,
    /// None: jute's null buffer (-1).
    pub data: Option<Vec<u8>>,
    /// (scheme, id) pairs; None: a null vector.
    pub auth: Option<Vec<(String, String)>>,
}

impl QuorumPacket {
    pub fn new(kind: PacketType, zxid: i64, data: Option<Vec<u8>>) -> QuorumPacket {
        QuorumPacket {
            kind,
            zxid,
            data,
            auth: None,
        }
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.reserve(self.encoded_len());
        encode_head(self.kind, self.zxid, self.data.as_deref(), out);
        put_auth(out, self.auth.as_deref());
    }
}

impl QuorumPacket {
    /// The bytes `encode` appends.
    pub fn encoded_len(&self) -> usize {
        let buffer = |b: Option<&[u8]>| 4 + b.map_or(0, |b| b.len());
        let auth = self.auth.as_ref().map_or(0, |ids| {
            ids.iter()
                .map(|(s, i)| 8 + java_utf8::encoded_len(s) + java_utf8::encoded_len(i))
                .sum()
        });
        4 + 8 + buffer(self.data.as_deref()) + 4 + auth
    }
}

/// A packet whose data is `data`'s pieces one after the other, appended to
/// `out`: what `QuorumPacket::encode` appends for the joined data, without
/// joining them first (a REQUEST's header and its request's bytes).
pub fn encode_pieces(
    kind: PacketType,
    zxid: i64,
    data: &[&[u8]],
    auth: Option<&[(String, String)]>,
    out: &mut Vec<u8>,
) {
    let data_len: usize = data.iter().map(|d| d.len()).sum();
    let auth_len = auth.map_or(0, |ids| {
        ids.iter()
            .map(|(s, i)| 8 + s.len() + i.len())
            .sum::<usize>()
    });
    out.reserve(4 + 8 + 4 + data_len + 4 + auth_len);
    out.extend_from_slice(&(kind as i32).to_be_bytes());
    out.extend_from_slice(&zxid.to_be_bytes());
    out.extend_from_slice(&(data_len as i32).to_be_bytes());
    for d in data {
        out.extend_from_slice(d);
    }
    put_auth(out, auth);
}

/// A vector of (scheme, id) pairs; None: a null vector.
fn put_auth(out: &mut Vec<u8>, auth: Option<&[(String, String)]>) {
    match auth {
        None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        Some(ids) => {
            out.extend_from_slice(&(ids.len() as i32).to_be_bytes());
            for (scheme, id) in ids {
                java_utf8::put_ustring(scheme, out);
                java_utf8::put_ustring(id, out);
            }
        }
    }
}

/// A packet without auth ids (every packet but REQUEST), appended to `out`
/// from its parts: a PROPOSAL's txn goes out without a copy of its own.
pub fn encode_plain(kind: PacketType, zxid: i64, data: Option<&[u8]>, out: &mut Vec<u8>) {
    out.reserve(4 + 8 + 4 + data.map_or(0, |d| d.len()) + 4);
    encode_head(kind, zxid, data, out);
    out.extend_from_slice(&(-1i32).to_be_bytes());
}

/// The type, zxid and data of a packet.
fn encode_head(kind: PacketType, zxid: i64, data: Option<&[u8]>, out: &mut Vec<u8>) {
    out.extend_from_slice(&(kind as i32).to_be_bytes());
    out.extend_from_slice(&zxid.to_be_bytes());
    put_buffer(out, data);
}

fn put_buffer(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        Some(b) => {
            out.extend_from_slice(&(b.len() as i32).to_be_bytes());
            out.extend_from_slice(b);
        }
    }
}

/// A cursor that asks for more instead of failing at the end of the bytes.
struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
    buffer_max: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.at..self.at + n)?;
        self.at += n;
        Some(s)
    }

    fn i32(&mut self) -> Option<i32> {
        self.take(4)
            .map(|s| i32::from_be_bytes(s.try_into().expect("4")))
    }

    fn i64(&mut self) -> Option<i64> {
        self.take(8)
            .map(|s| i64::from_be_bytes(s.try_into().expect("8")))
    }

    /// A buffer: Ok(None) when more bytes are needed, Err over the bound.
    fn buffer(&mut self, what: &'static str) -> Result<Option<Option<&'a [u8]>>, PeerError> {
        let Some(len) = self.i32() else {
            return Ok(None);
        };
        if len == -1 {
            return Ok(Some(None));
        }
        if len < 0 || len as usize > self.buffer_max {
            return Err(PeerError::TooLong {
                what,
                len: len as i64,
                max: self.buffer_max,
            });
        }
        Ok(self.take(len as usize).map(Some))
    }
}

/// One packet at the front of `b`. `buffer_max` bounds each buffer and
/// string (jute.maxbuffer plus its extra allowance, as
/// `BinaryInputArchive.checkLength`).
pub fn decode(b: &[u8], buffer_max: usize) -> Result<Decoded<QuorumPacket>, PeerError> {
    let mut c = Cursor {
        b,
        at: 0,
        buffer_max,
    };
    macro_rules! need {
        ($e:expr) => {
            match $e {
                Some(v) => v,
                None => return Ok(Decoded::More),
            }
        };
    }
    let kind = PacketType::try_from(need!(c.i32()))?;
    let zxid = need!(c.i64());
    let data = need!(c.buffer("quorum packet data")?).map(<[u8]>::to_vec);
    let count = need!(c.i32());
    let auth = if count == -1 {
        None
    } else if count < 0 || count as usize > AUTH_IDS_MAX {
        return Err(PeerError::TooLong {
            what: "quorum packet auth ids",
            len: count as i64,
            max: AUTH_IDS_MAX,
        });
    } else {
        let mut ids = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let scheme = need!(c.buffer("auth scheme")?).unwrap_or(&[]);
            let id = need!(c.buffer("auth id")?).unwrap_or(&[]);
            ids.push((
                java_utf8::decode_keeping_pairs(scheme),
                java_utf8::decode_keeping_pairs(id),
            ));
        }
        Some(ids)
    };
    Ok(Decoded::Item(
        QuorumPacket {
            kind,
            zxid,
            data,
            auth,
        },
        c.at,
    ))
}

/// `LearnerInfo`: FOLLOWERINFO's data.
pub fn learner_info(sid: u64, version: i32, config_version: i64) -> Vec<u8> {
    let mut b = Vec::with_capacity(20);
    b.extend_from_slice(&(sid as i64).to_be_bytes());
    b.extend_from_slice(&version.to_be_bytes());
    b.extend_from_slice(&config_version.to_be_bytes());
    b
}

/// (sid, protocol version, config version) from a LearnerInfo; the
/// pre-3.4 forms (8 and 12 bytes) read with what they have.
pub fn parse_learner_info(b: &[u8]) -> Result<(u64, i32, i64), PeerError> {
    let bad = |detail: String| PeerError::Bad {
        what: "LearnerInfo",
        detail,
    };
    if b.len() < 8 {
        return Err(bad(format!("{} bytes", b.len())));
    }
    let sid = i64::from_be_bytes(b[0..8].try_into().expect("8"));
    if sid < 0 {
        return Err(bad(format!("sid {sid}")));
    }
    let version = b
        .get(8..12)
        .map_or(0, |s| i32::from_be_bytes(s.try_into().expect("4")));
    let config = b
        .get(12..20)
        .map_or(0, |s| i64::from_be_bytes(s.try_into().expect("8")));
    Ok((sid as u64, version, config))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MAX: usize = 2 * 0xfffff;

    fn round_trip(p: &QuorumPacket) {
        let mut b = Vec::new();
        p.encode(&mut b);
        for cut in 0..b.len() {
            assert_eq!(
                decode(&b[..cut], MAX),
                Ok(Decoded::More),
                "{p:?} cut at {cut}"
            );
        }
        // Two back to back: the first ends where the second starts.
        let mut two = b.clone();
        two.extend_from_slice(&b);
        assert_eq!(decode(&two, MAX), Ok(Decoded::Item(p.clone(), b.len())));
    }

    #[test]
    fn packets_round_trip() {
        round_trip(&QuorumPacket::new(PacketType::Ack, 0x3_0000_0000, None));
        round_trip(&QuorumPacket::new(
            PacketType::FollowerInfo,
            0x2_0000_0000,
            Some(learner_info(3, PROTOCOL_VERSION, 0)),
        ));
        round_trip(&QuorumPacket::new(
            PacketType::UpToDate,
            -1,
            Some(Vec::new()),
        ));
        round_trip(&QuorumPacket {
            kind: PacketType::Request,
            zxid: -1,
            data: Some(vec![1, 2, 3]),
            auth: Some(vec![
                ("ip".into(), "127.0.0.1".into()),
                ("digest".into(), "u:x".into()),
            ]),
        });
    }

    #[test]
    fn ack_bytes_as_java_writes_them() {
        let mut b = Vec::new();
        QuorumPacket::new(PacketType::Ack, 0x1_0000_0002, None).encode(&mut b);
        let want: Vec<u8> = [
            &3i32.to_be_bytes()[..],
            &0x1_0000_0002i64.to_be_bytes(),
            &(-1i32).to_be_bytes(),
            &(-1i32).to_be_bytes(),
        ]
        .concat();
        assert_eq!(b, want);
    }

    #[test]
    fn refusals() {
        let mut b = Vec::new();
        QuorumPacket::new(PacketType::Ping, 1, None).encode(&mut b);
        let mut unknown = b.clone();
        unknown[0..4].copy_from_slice(&77i32.to_be_bytes());
        assert!(decode(&unknown, MAX).is_err(), "an unknown type");
        let mut huge = b.clone();
        huge[12..16].copy_from_slice(&(MAX as i32 + 1).to_be_bytes());
        assert!(matches!(decode(&huge, MAX), Err(PeerError::TooLong { .. })));
        let mut negative = b.clone();
        negative[12..16].copy_from_slice(&(-2i32).to_be_bytes());
        assert!(decode(&negative, MAX).is_err());
        let mut many_ids = b.clone();
        many_ids[16..20].copy_from_slice(&1000i32.to_be_bytes());
        assert!(decode(&many_ids, MAX).is_err());
    }

    #[test]
    fn learner_info_forms() {
        assert_eq!(
            parse_learner_info(&learner_info(7, PROTOCOL_VERSION, 0)),
            Ok((7, PROTOCOL_VERSION, 0))
        );
        assert_eq!(parse_learner_info(&7i64.to_be_bytes()), Ok((7, 0, 0)));
        assert!(parse_learner_info(&[0; 4]).is_err());
        assert!(parse_learner_info(&(-1i64).to_be_bytes()).is_err());
    }

    proptest! {
        #[test]
        fn garbage_is_refused_or_framed(b in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(Decoded::Item(_, used)) = decode(&b, MAX) {
                prop_assert!(used <= b.len());
            }
        }

        #[test]
        fn any_packet_round_trips(
            t in 1i32..=19,
            zxid in any::<i64>(),
            data in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..64)),
            auth in proptest::option::of(proptest::collection::vec(("[a-z]{0,8}", "[ -~]{0,16}"), 0..4)),
        ) {
            let p = QuorumPacket { kind: PacketType::try_from(t).unwrap(), zxid, data, auth };
            let mut b = Vec::new();
            p.encode(&mut b);
            prop_assert_eq!(decode(&b, MAX), Ok(Decoded::Item(p, b.len())));
        }
    }
}
