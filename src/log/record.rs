//! Record framing in a log segment:
//!
//! ```text
//! u32 payload_len | u32 crc32c | i64 zxid | i64 durable_zxid | payload | zero pad to 8
//! ```
//!
//! The crc covers every field but itself, and the payload. `durable_zxid`
//! is the highest zxid known durable (covered by a completed fdatasync)
//! when the record was appended: recovery uses it to tell a torn tail (a
//! batch whose fsync never completed, which may reach disk in any page
//! order) from corruption of a record that had been acknowledged. A zero
//! length marks the end of the written part of a preallocated segment.

pub const HEADER_BYTES: usize = 24;
/// Bound on one record's payload: a txn is at most a request (jute.maxbuffer
/// is 1 MiB by default) plus its metadata.
pub const PAYLOAD_BYTES_MAX: usize = 64 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub payload_len: u32,
    pub zxid: i64,
    pub durable_zxid: i64,
}

/// Bytes a record with `payload_len` bytes of payload takes, padding included.
pub fn framed_len(payload_len: usize) -> usize {
    (HEADER_BYTES + payload_len + 7) & !7
}

/// The crc of the record framed at the start of `rec`, whose header fields
/// other than the crc are in place: its length, then the zxids and the
/// payload, which follow the crc field in one run (two calls where a field
/// at a time took four: the small calls cost as much as a 1 KiB payload's).
fn crc_in_place(rec: &[u8], payload_len: usize) -> u32 {
    let c = crc32c::crc32c(&rec[0..4]);
    crc32c::crc32c_append(c, &rec[8..HEADER_BYTES + payload_len])
}

/// Writes one framed record into `out` (which must be `framed_len` long).
pub fn write(out: &mut [u8], zxid: i64, durable_zxid: i64, payload: &[u8]) {
    let len = payload.len() as u32;
    assert_eq!(out.len(), framed_len(payload.len()));
    out[0..4].copy_from_slice(&len.to_be_bytes());
    out[8..16].copy_from_slice(&zxid.to_be_bytes());
    out[16..24].copy_from_slice(&durable_zxid.to_be_bytes());
    out[HEADER_BYTES..HEADER_BYTES + payload.len()].copy_from_slice(payload);
    out[HEADER_BYTES + payload.len()..].fill(0);
    let crc = crc_in_place(out, payload.len());
    out[4..8].copy_from_slice(&crc.to_be_bytes());
}

/// Frames a record whose payload was encoded in place: `buf[start..]`
/// holds `HEADER_BYTES` of room followed by the payload. Pads and fills the
/// header (saves copying the payload once more).
pub fn finish_in_place(buf: &mut Vec<u8>, start: usize, zxid: i64, durable_zxid: i64) {
    let payload_len = buf.len() - start - HEADER_BYTES;
    let len = payload_len as u32;
    buf.resize(start + framed_len(payload_len), 0);
    let rec = &mut buf[start..];
    rec[0..4].copy_from_slice(&len.to_be_bytes());
    rec[8..16].copy_from_slice(&zxid.to_be_bytes());
    rec[16..24].copy_from_slice(&durable_zxid.to_be_bytes());
    let crc = crc_in_place(rec, payload_len);
    rec[4..8].copy_from_slice(&crc.to_be_bytes());
}

#[derive(Debug, PartialEq, Eq)]
pub enum Read<'a> {
    /// A valid record and its total framed length.
    Record(Header, &'a [u8], usize),
    /// Zero length: nothing was written here.
    End,
    /// Something that is not a valid record.
    Bad(&'static str),
}

/// Reads the record at the start of `buf`.
/// The header fields at the start of `buf`, unchecked (no checksum): for
/// a scan that only wants records whose header says something, before it
/// pays for the checksum of a payload that may be megabytes long.
pub fn peek_header(buf: &[u8]) -> Option<Header> {
    if buf.len() < HEADER_BYTES {
        return None;
    }
    let i64_at = |i: usize| i64::from_be_bytes(buf[i..i + 8].try_into().expect("8 bytes"));
    Some(Header {
        payload_len: u32::from_be_bytes(buf[0..4].try_into().expect("4 bytes")),
        zxid: i64_at(8),
        durable_zxid: i64_at(16),
    })
}

pub fn read(buf: &[u8]) -> Read<'_> {
    if buf.len() < HEADER_BYTES {
        return if buf.iter().all(|b| *b == 0) {
            Read::End
        } else {
            Read::Bad("truncated header")
        };
    }
    let u32_at = |i: usize| u32::from_be_bytes(buf[i..i + 4].try_into().unwrap());
    let i64_at = |i: usize| i64::from_be_bytes(buf[i..i + 8].try_into().unwrap());
    let len = u32_at(0);
    if len == 0 {
        return if buf[..HEADER_BYTES].iter().all(|b| *b == 0) {
            Read::End
        } else {
            Read::Bad("zero length with a non-zero header")
        };
    }
    let total = framed_len(len as usize);
    if len as usize > PAYLOAD_BYTES_MAX || total > buf.len() {
        return Read::Bad("length runs past the segment");
    }
    let header = Header {
        payload_len: len,
        zxid: i64_at(8),
        durable_zxid: i64_at(16),
    };
    let payload = &buf[HEADER_BYTES..HEADER_BYTES + len as usize];
    if crc_in_place(buf, len as usize) != u32_at(4) {
        return Read::Bad("checksum mismatch");
    }
    Read::Record(header, payload, total)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The crc as the format defines it, a field at a time.
    fn crc_by_fields(len: u32, zxid: i64, durable: i64, payload: &[u8]) -> u32 {
        let mut c = crc32c::crc32c(&len.to_be_bytes());
        c = crc32c::crc32c_append(c, &zxid.to_be_bytes());
        c = crc32c::crc32c_append(c, &durable.to_be_bytes());
        crc32c::crc32c_append(c, payload)
    }

    proptest::proptest! {
        /// Records framed either way carry the crc of the format's fields
        /// in its order, and read back.
        #[test]
        fn crc_is_the_formats(
            zxid in proptest::prelude::any::<i64>(),
            durable in proptest::prelude::any::<i64>(),
            payload in proptest::collection::vec(proptest::prelude::any::<u8>(), 1..3000),
        ) {
            let n = framed_len(payload.len());
            let mut out = vec![0xffu8; n];
            write(&mut out, zxid, durable, &payload);
            let want = crc_by_fields(payload.len() as u32, zxid, durable, &payload);
            proptest::prop_assert_eq!(u32::from_be_bytes(out[4..8].try_into().unwrap()), want);
            let mut in_place = vec![9u8; 5];
            in_place.resize(5 + HEADER_BYTES, 0);
            in_place.extend_from_slice(&payload);
            finish_in_place(&mut in_place, 5, zxid, durable);
            proptest::prop_assert_eq!(&in_place[5..], &out[..]);
            proptest::prop_assert!(matches!(read(&out), Read::Record(_, p, t) if p == &payload[..] && t == n));
        }
    }

    #[test]
    fn frame_round_trip_and_damage() {
        let payload = b"hello txn";
        let mut buf = vec![0u8; framed_len(payload.len()) + 64];
        let n = framed_len(payload.len());
        write(&mut buf[..n], 5, 4, payload);
        match read(&buf) {
            Read::Record(h, p, total) => {
                assert_eq!((h.zxid, h.durable_zxid, p, total), (5, 4, &payload[..], n));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(read(&buf[n..]), Read::End);
        for i in 0..HEADER_BYTES + payload.len() {
            let mut damaged = buf.clone();
            damaged[i] ^= 0x40;
            assert!(
                !matches!(read(&damaged), Read::Record(..)),
                "flip at {i} undetected"
            );
        }
        assert!(matches!(read(&buf[..n - 1]), Read::Bad(_)));
        let mut in_place = vec![0u8; HEADER_BYTES];
        in_place.extend_from_slice(payload);
        finish_in_place(&mut in_place, 0, 5, 4);
        assert_eq!(&in_place[..], &buf[..n]);
    }
}
