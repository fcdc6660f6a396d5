//! Quorum SASL's packets (QuorumAuthPacket: magic, status, token, with no
//! length prefix, as BinaryOutputArchive writes the record) and the two
//! sides of the DIGEST-MD5 exchange on a peer connection, as ZooKeeper's
//! SaslQuorumAuthLearner (the side that dials) and SaslQuorumAuthServer
//! (the side that accepts) run it: the learner sends an empty token, the
//! server a challenge (IN_PROGRESS), the learner its response, the server
//! SUCCESS with its rspauth (or ERROR).

use super::{Decoded, PeerError};

/// QuorumAuth.QUORUM_AUTH_MAGIC_NUMBER.
/// Java writes it `-0xa0dbcafecafe1234L`: the hex literal is the long with
/// those bits (negative), then negated.
pub const MAGIC: i64 = (0xa0dbcafecafe1234u64 as i64).wrapping_neg();
/// QuorumAuth.Status.
pub const IN_PROGRESS: i32 = 0;
pub const SUCCESS: i32 = 1;
pub const ERROR: i32 = -1;
/// A token is a DIGEST-MD5 challenge or response: a few hundred bytes.
const TOKEN_MAX: usize = 64 << 10;

#[derive(Debug, PartialEq, Eq)]
pub struct AuthPacket {
    pub status: i32,
    pub token: Option<Vec<u8>>,
}

pub fn encode(status: i32, token: Option<&[u8]>, out: &mut Vec<u8>) {
    out.extend_from_slice(&MAGIC.to_be_bytes());
    out.extend_from_slice(&status.to_be_bytes());
    match token {
        Some(t) => {
            out.extend_from_slice(&(t.len() as i32).to_be_bytes());
            out.extend_from_slice(t);
        }
        None => out.extend_from_slice(&(-1i32).to_be_bytes()),
    }
}

/// Whether the next bytes are an auth packet (QuorumAuth.nextPacketIsAuth:
/// the first 8 are the magic); None until 8 bytes are there.
pub fn next_is_auth(b: &[u8]) -> Option<bool> {
    (b.len() >= 8).then(|| i64::from_be_bytes(b[..8].try_into().unwrap()) == MAGIC)
}

pub fn decode(b: &[u8]) -> Result<Decoded<AuthPacket>, PeerError> {
    if b.len() < 16 {
        return Ok(Decoded::More);
    }
    let magic = i64::from_be_bytes(b[..8].try_into().unwrap());
    if magic != MAGIC {
        return Err(PeerError::Bad {
            what: "quorum auth packet",
            detail: format!("magic {magic:#x}"),
        });
    }
    let status = i32::from_be_bytes(b[8..12].try_into().unwrap());
    let len = i32::from_be_bytes(b[12..16].try_into().unwrap());
    if len < 0 {
        return Ok(Decoded::Item(
            AuthPacket {
                status,
                token: None,
            },
            16,
        ));
    }
    if len as usize > TOKEN_MAX {
        return Err(PeerError::TooLong {
            what: "quorum auth token",
            len: len as i64,
            max: TOKEN_MAX,
        });
    }
    let end = 16 + len as usize;
    if b.len() < end {
        return Ok(Decoded::More);
    }
    Ok(Decoded::Item(
        AuthPacket {
            status,
            token: Some(b[16..end].to_vec()),
        },
        end,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packets_survive_the_wire_and_are_bounded() {
        for token in [None, Some(&b""[..]), Some(&b"realm=\"x\""[..])] {
            let mut b = Vec::new();
            encode(IN_PROGRESS, token, &mut b);
            assert_eq!(next_is_auth(&b), Some(true));
            assert_eq!(decode(&b[..b.len() - 1]).unwrap(), Decoded::More);
            match decode(&b).unwrap() {
                Decoded::Item(p, n) => {
                    assert_eq!(n, b.len());
                    assert_eq!(p.token.as_deref(), token);
                }
                Decoded::More => panic!("whole packet"),
            }
        }
        let mut b = Vec::new();
        encode(SUCCESS, None, &mut b);
        b[12..16].copy_from_slice(&(1i32 << 30).to_be_bytes());
        assert!(decode(&b).is_err());
        assert_eq!(next_is_auth(&[0; 8]), Some(false));
        assert_eq!(next_is_auth(&[0; 7]), None);
    }
}
