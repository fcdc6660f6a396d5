//! Jute binary encoding: big-endian ints, length-prefixed buffers and strings,
//! counted vectors. The reference is Apache ZooKeeper's BinaryInputArchive /
//! BinaryOutputArchive.

use thiserror::Error;

use super::java_utf8;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("truncated record: needed {needed} bytes at offset {offset}")]
    Truncated { offset: usize, needed: usize },
    #[error("negative or oversized length {len} at offset {offset}")]
    BadLength { offset: usize, len: i32 },
    #[error("unknown opcode {0}")]
    UnknownOpcode(i32),
    #[error("{0}")]
    Invalid(&'static str),
}

/// Cursor over one frame's payload. Every read is bounds-checked; lengths are
/// checked against what is left in the frame, so a hostile length never
/// allocates more than the frame itself holds.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Strings read as a member wrote them (`java_utf8::decode_keeping_pairs`)
    /// rather than as Java reads what a client sent.
    member_strings: bool,
}

impl<'a> Reader<'a> {
    /// A reader of what a client sent: strings are read as ZooKeeper reads
    /// them (`java_utf8::decode`).
    pub fn new(buf: &'a [u8]) -> Self {
        Reader {
            buf,
            pos: 0,
            member_strings: false,
        }
    }

    /// A reader of what a member wrote (a peer's txns and snapshots, this
    /// server's log and snapshots): a character outside the BMP, which jute
    /// writes as two CESU-8 surrogates, reads back as itself.
    pub fn of_member(buf: &'a [u8]) -> Self {
        Reader {
            buf,
            pos: 0,
            member_strings: true,
        }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn position(&self) -> usize {
        self.pos
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.remaining() < n {
            return Err(DecodeError::Truncated {
                offset: self.pos,
                needed: n,
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub fn read_i32(&mut self) -> Result<i32, DecodeError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn read_i64(&mut self) -> Result<i64, DecodeError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }

    pub fn read_u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    pub fn read_bool(&mut self) -> Result<bool, DecodeError> {
        Ok(self.take(1)?[0] != 0)
    }

    fn read_len(&mut self) -> Result<Option<usize>, DecodeError> {
        let offset = self.pos;
        let len = self.read_i32()?;
        if len == -1 {
            return Ok(None);
        }
        if len < 0 || len as usize > self.remaining() {
            return Err(DecodeError::BadLength { offset, len });
        }
        Ok(Some(len as usize))
    }

    /// A jute `buffer`; null (-1) reads as `None`.
    pub fn read_buffer_opt(&mut self) -> Result<Option<&'a [u8]>, DecodeError> {
        match self.read_len()? {
            None => Ok(None),
            Some(n) => Ok(Some(self.take(n)?)),
        }
    }

    /// A jute `buffer`; null reads as empty, as ZooKeeper's server does.
    pub fn read_buffer(&mut self) -> Result<&'a [u8], DecodeError> {
        Ok(self.read_buffer_opt()?.unwrap_or(&[]))
    }

    /// A jute `ustring`; null reads as empty. Bytes that are not UTF-8
    /// become U+FFFD by the JDK's rules, as `new String(bytes, UTF_8)` in
    /// BinaryInputArchive.readString makes them (`java_utf8`): ZooKeeper
    /// then handles the request as usual, so a path with one is refused by
    /// path validation (BADARGUMENTS) where it is validated and simply not
    /// found elsewhere, and the connection stays open. (Refusing it here
    /// answered -5.)
    pub fn read_string(&mut self) -> Result<String, DecodeError> {
        let b = self.read_buffer()?;
        Ok(if self.member_strings {
            java_utf8::decode_keeping_pairs(b)
        } else {
            java_utf8::decode(b)
        })
    }

    /// A jute `vector` count; null (-1) reads as zero elements. Each element
    /// takes at least `min_elem_bytes`, which bounds the count by the frame.
    pub fn read_count(&mut self, min_elem_bytes: usize) -> Result<usize, DecodeError> {
        let offset = self.pos;
        let n = self.read_i32()?;
        if n == -1 {
            return Ok(0);
        }
        if n < 0 || (n as usize).saturating_mul(min_elem_bytes.max(1)) > self.remaining() {
            return Err(DecodeError::BadLength { offset, len: n });
        }
        Ok(n as usize)
    }

    pub fn read_string_vec(&mut self) -> Result<Vec<String>, DecodeError> {
        let n = self.read_count(4)?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(self.read_string()?);
        }
        Ok(v)
    }
}

/// Appends jute-encoded values to a byte vector.
/// About how many bytes a record with this path, data and number of ACLs
/// encodes to (a few fixed fields besides): the capacity to start a
/// buffer with, so that a 1 KiB payload is not grown into.
pub fn record_size_hint(path: &str, data: Option<&[u8]>, acls: usize) -> usize {
    64 + path.len() + data.map_or(0, |d| d.len()) + acls * 32
}

pub struct Writer<'a> {
    pub buf: &'a mut Vec<u8>,
    /// Strings in UTF-8 rather than as Java writes them.
    utf8_strings: bool,
}

impl<'a> Writer<'a> {
    /// A writer of what Java would write: strings as jute's writeString
    /// (`java_utf8::put_ustring`).
    pub fn new(buf: &'a mut Vec<u8>) -> Self {
        Writer {
            buf,
            utf8_strings: false,
        }
    }

    /// A writer of strings in UTF-8: a client request passed on as a
    /// non-Java client sent it. Whatever a client sent, Java reads these
    /// bytes as the string it read from the client's own (it would have
    /// passed the client's bytes on as they were), where jute's CESU-8 would
    /// read as two U+FFFD for each character outside the BMP.
    pub fn utf8(buf: &'a mut Vec<u8>) -> Self {
        Writer {
            buf,
            utf8_strings: true,
        }
    }

    pub fn i32(&mut self, v: i32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.buf.push(v as u8);
        self
    }

    pub fn buffer(&mut self, v: &[u8]) -> &mut Self {
        self.i32(v.len() as i32);
        self.buf.extend_from_slice(v);
        self
    }

    pub fn null_buffer(&mut self) -> &mut Self {
        self.i32(-1)
    }

    /// A buffer that may be null (-1).
    pub fn opt_buffer(&mut self, v: Option<&[u8]>) -> &mut Self {
        match v {
            Some(b) => self.buffer(b),
            None => self.null_buffer(),
        }
    }

    /// A jute `ustring` as Java writes it: a character outside the BMP
    /// as two CESU-8 surrogates (`java_utf8::put_ustring`).
    pub fn string(&mut self, v: &str) -> &mut Self {
        if self.utf8_strings {
            return self.buffer(v.as_bytes());
        }
        java_utf8::put_ustring(v, self.buf);
        self
    }

    pub fn string_vec<S: AsRef<str>>(&mut self, v: &[S]) -> &mut Self {
        self.i32(v.len() as i32);
        for s in v {
            self.string(s.as_ref());
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_that_are_not_utf8_read_with_replacement_characters() {
        let mut buf = Vec::new();
        Writer::new(&mut buf).buffer(b"/a\xffb");
        assert_eq!(Reader::new(&buf).read_string().unwrap(), "/a\u{fffd}b");
    }

    #[test]
    fn primitives_round_trip() {
        let mut buf = Vec::new();
        Writer::new(&mut buf)
            .i32(-7)
            .i64(1 << 40)
            .bool(true)
            .string("héllo")
            .buffer(b"\x00\x01")
            .null_buffer()
            .string_vec(&["a", "bc"]);
        let mut r = Reader::new(&buf);
        assert_eq!(r.read_i32().unwrap(), -7);
        assert_eq!(r.read_i64().unwrap(), 1 << 40);
        assert!(r.read_bool().unwrap());
        assert_eq!(r.read_string().unwrap(), "héllo");
        assert_eq!(r.read_buffer().unwrap(), b"\x00\x01");
        assert_eq!(r.read_buffer_opt().unwrap(), None);
        assert_eq!(r.read_string_vec().unwrap(), vec!["a", "bc"]);
        assert_eq!(r.remaining(), 0);
    }

    #[test]
    fn hostile_lengths_are_rejected_without_allocating() {
        let mut buf = Vec::new();
        Writer::new(&mut buf).i32(i32::MAX);
        assert!(matches!(
            Reader::new(&buf).read_buffer(),
            Err(DecodeError::BadLength { .. })
        ));
        assert!(matches!(
            Reader::new(&buf).read_count(4),
            Err(DecodeError::BadLength { .. })
        ));
        let mut buf = Vec::new();
        Writer::new(&mut buf).i32(-5);
        assert!(Reader::new(&buf).read_string().is_err());
        assert!(matches!(
            Reader::new(&[0, 0]).read_i32(),
            Err(DecodeError::Truncated { .. })
        ));
    }
}
