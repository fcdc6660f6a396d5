//! Strings as Apache ZooKeeper's Java code turns them into bytes and back.
//!
//! - jute's `BinaryOutputArchive.writeString` encodes each UTF-16 code unit
//!   on its own, so a character outside the BMP goes out as two 3-byte
//!   surrogates (CESU-8): [`put_ustring`].
//! - `BinaryInputArchive.readString` is `new String(bytes, UTF_8)`, which
//!   replaces what is not UTF-8 with U+FFFD by the JDK's own rules (an
//!   encoded surrogate is one replacement per 3 bytes; std's
//!   `from_utf8_lossy` makes three): [`decode`]. It never yields a lone
//!   surrogate, so the result is always a valid `str`.
//!
//! What a client sends and what it is answered follow these exactly. What
//! members send each other and what a member writes to its own disk is
//! encoded the same way (a Java member reads it), but read back with
//! [`decode_keeping_pairs`]: a surrogate pair in CESU-8 is the character
//! it encodes. Java reads it as two replacements, so a Java follower (or a
//! Java member reading its own snapshot) ends up with other ACL ids than its
//! leader; a ringkeeper member keeps what its leader holds.

const REPLACEMENT: char = '\u{fffd}';

/// `s` as a jute `ustring` (`BinaryOutputArchive.writeString`): its
/// length, then its bytes. One pass over `s` finds both the length and
/// whether it is plain UTF-8 (no character beyond the BMP).
pub fn put_ustring(s: &str, out: &mut Vec<u8>) {
    let len = encoded_len(s);
    out.extend_from_slice(&(len as i32).to_be_bytes());
    if len == s.len() {
        out.extend_from_slice(s.as_bytes());
    } else {
        out.reserve(len);
        encode_beyond_bmp(s, out);
    }
}

/// jute's bytes for `s` beyond the BMP (`BinaryOutputArchive.stringToByteBuffer`).
fn encode_beyond_bmp(s: &str, out: &mut Vec<u8>) {
    for c in s.chars() {
        if (c as u32) <= 0xffff {
            let mut b = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                put_unit3(*unit, out);
            }
        }
    }
}

/// The length of jute's bytes for `s`.
pub fn encoded_len(s: &str) -> usize {
    if s.is_ascii() {
        // A word at a time: most strings.
        return s.len();
    }
    // Each 4-byte UTF-8 sequence becomes 6 bytes; its lead is >= 0xf0.
    s.len() + 2 * s.bytes().filter(|&b| b >= 0xf0).count()
}

fn put_unit3(u: u16, out: &mut Vec<u8>) {
    out.push(0xe0 | (u >> 12) as u8);
    out.push(0x80 | ((u >> 6) & 0x3f) as u8);
    out.push(0x80 | (u & 0x3f) as u8);
}

/// Most strings on the wire (paths, schemes, ids) are ASCII: checked a
/// word at a time, they need none of UTF-8's validation.
fn ascii(b: &[u8]) -> Option<String> {
    if !b.is_ascii() {
        return None;
    }
    // SAFETY: ASCII bytes are valid UTF-8.
    Some(unsafe { std::str::from_utf8_unchecked(b) }.to_owned())
}

/// `new String(bytes, StandardCharsets.UTF_8)` (the JDK 17 decoder, with
/// replacement).
pub fn decode(b: &[u8]) -> String {
    if let Some(s) = ascii(b) {
        return s;
    }
    match std::str::from_utf8(b) {
        Ok(s) => s.to_owned(),
        Err(_) => decode_slow(b, false),
    }
}

/// As [`decode`], except that a CESU-8 high surrogate followed at once by a
/// CESU-8 low surrogate is the supplementary character the pair encodes
/// (what [`put_ustring`] wrote for it).
pub fn decode_keeping_pairs(b: &[u8]) -> String {
    if let Some(s) = ascii(b) {
        return s;
    }
    match std::str::from_utf8(b) {
        Ok(s) => s.to_owned(),
        Err(_) => decode_slow(b, true),
    }
}

fn cont(b: u8) -> bool {
    b & 0xc0 == 0x80
}

fn malformed3(b1: u8, b2: u8, b3: u8) -> bool {
    (b1 == 0xe0 && b2 & 0xe0 == 0x80) || !cont(b2) || !cont(b3)
}

fn malformed3_2(b1: u8, b2: u8) -> bool {
    (b1 == 0xe0 && b2 & 0xe0 == 0x80) || !cont(b2)
}

/// How many bytes of a malformed 3-byte sequence one replacement covers.
fn malformed3_len(b1: u8, b2: u8) -> usize {
    if (b1 == 0xe0 && b2 & 0xe0 == 0x80) || !cont(b2) {
        1
    } else {
        2
    }
}

fn malformed4_2(b1: u8, b2: u8) -> bool {
    (b1 == 0xf0 && !(0x90..=0xbf).contains(&b2)) || (b1 == 0xf4 && b2 & 0xf0 != 0x80) || !cont(b2)
}

/// How many bytes of a malformed 4-byte sequence one replacement covers.
fn malformed4_len(b: &[u8]) -> usize {
    let (b1, b2) = (b[0], b[1]);
    if b1 > 0xf4
        || (b1 == 0xf0 && !(0x90..=0xbf).contains(&b2))
        || (b1 == 0xf4 && b2 & 0xf0 != 0x80)
        || !cont(b2)
    {
        1
    } else if !cont(b[2]) {
        2
    } else {
        3
    }
}

fn decode3(b1: u8, b2: u8, b3: u8) -> u32 {
    ((b1 as u32 & 0x0f) << 12) | ((b2 as u32 & 0x3f) << 6) | (b3 as u32 & 0x3f)
}

/// The JDK's `String.decodeUTF8_UTF16` with `doReplace`, writing a `str`:
/// every surrogate it meets in a 3-byte sequence is replaced, unless
/// `pairs` and it is a high one followed by a low one.
fn decode_slow(b: &[u8], pairs: bool) -> String {
    let mut out = String::with_capacity(b.len() + 8);
    let n = b.len();
    let mut sp = 0;
    while sp < n {
        let b1 = b[sp];
        sp += 1;
        if b1 < 0x80 {
            out.push(b1 as char);
        } else if b1 >> 5 == 0b110 && b1 & 0x1e != 0 {
            // Two bytes (C2..DF).
            if sp < n {
                let b2 = b[sp];
                if cont(b2) {
                    sp += 1;
                    let c = ((b1 as u32 & 0x1f) << 6) | (b2 as u32 & 0x3f);
                    out.push(char::from_u32(c).expect("a 2-byte value is a char"));
                } else {
                    out.push(REPLACEMENT);
                }
                continue;
            }
            out.push(REPLACEMENT);
            break;
        } else if b1 >> 4 == 0b1110 {
            // Three bytes.
            if sp + 1 < n {
                let (b2, b3) = (b[sp], b[sp + 1]);
                if malformed3(b1, b2, b3) {
                    out.push(REPLACEMENT);
                    sp = sp - 1 + malformed3_len(b1, b2);
                } else {
                    sp += 2;
                    let c = decode3(b1, b2, b3);
                    if (0xd800..0xe000).contains(&c) {
                        match low_after(b, sp).filter(|_| pairs && c < 0xdc00) {
                            Some(low) => {
                                let cp = 0x10000 + ((c - 0xd800) << 10) + (low - 0xdc00);
                                out.push(char::from_u32(cp).expect("a pair is a char"));
                                sp += 3;
                            }
                            None => out.push(REPLACEMENT),
                        }
                    } else {
                        out.push(char::from_u32(c).expect("not a surrogate"));
                    }
                }
                continue;
            }
            if sp < n && malformed3_2(b1, b[sp]) {
                out.push(REPLACEMENT);
                continue;
            }
            out.push(REPLACEMENT);
            break;
        } else if b1 >> 3 == 0b11110 {
            // Four bytes (F0..F7).
            if sp + 2 < n {
                let (b2, b3, b4) = (b[sp], b[sp + 1], b[sp + 2]);
                let uc = ((b1 as u32 & 0x07) << 18)
                    | ((b2 as u32 & 0x3f) << 12)
                    | ((b3 as u32 & 0x3f) << 6)
                    | (b4 as u32 & 0x3f);
                if !cont(b2) || !cont(b3) || !cont(b4) || !(0x10000..=0x10ffff).contains(&uc) {
                    out.push(REPLACEMENT);
                    sp = sp - 1 + malformed4_len(&b[sp - 1..]);
                } else {
                    sp += 3;
                    out.push(char::from_u32(uc).expect("a supplementary code point"));
                }
                continue;
            }
            if b1 > 0xf4 || (sp < n && malformed4_2(b1, b[sp])) {
                out.push(REPLACEMENT);
                continue;
            }
            sp += 1;
            out.push(REPLACEMENT);
            if sp < n && !cont(b[sp]) {
                continue;
            }
            break;
        } else {
            out.push(REPLACEMENT);
        }
    }
    out
}

/// The low surrogate a CESU-8 sequence at `at` encodes, if it is one.
fn low_after(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at + 3)?;
    if s[0] != 0xed || malformed3(s[0], s[1], s[2]) {
        return None;
    }
    let c = decode3(s[0], s[1], s[2]);
    (0xdc00..0xe000).contains(&c).then_some(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// jute's bytes for `s`, without the length.
    fn encode(s: &str, out: &mut Vec<u8>) {
        let mut framed = Vec::new();
        put_ustring(s, &mut framed);
        out.extend_from_slice(&framed[4..]);
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn characters_outside_the_bmp_go_out_as_two_surrogates() {
        let mut out = Vec::new();
        encode("a\u{1f600}\u{e9}\0", &mut out);
        assert_eq!(hex(&out), "61eda0bdedb880c3a900");
        assert_eq!(encoded_len("a\u{1f600}\u{e9}\0"), out.len());
        let mut plain = Vec::new();
        encode("/a/\u{20ac}", &mut plain);
        assert_eq!(plain, "/a/\u{20ac}".as_bytes());
    }

    /// Outputs of the JDK 17 decoder (`new String(b, UTF_8)`, printed as
    /// UTF-8) for inputs where std's `from_utf8_lossy` answers otherwise
    /// or where the rules are easy to get wrong.
    #[test]
    fn invalid_bytes_are_replaced_as_java_replaces_them() {
        let r = "\u{fffd}";
        let cases: &[(&[u8], String)] = &[
            (b"\xed\xa0\xbd\xed\xb8\x80", r.repeat(2)),
            (b"\xed\xa0\xbd", r.to_string()),
            (b"a\xffb", format!("a{r}b")),
            (b"\xc0\xaf", r.repeat(2)),
            (b"\xe2\x82", r.to_string()),
            (b"\xe0\x80\x80", r.repeat(3)),
            (b"\xf0\x9f\x98", r.to_string()),
            (b"\xf0\x9f", r.to_string()),
            (b"\xf4\x90\x80\x80", r.repeat(4)),
            (b"\xf5\x80\x80\x80", r.repeat(4)),
        ];
        for (input, want) in cases {
            assert_eq!(&decode(input), want, "{}", hex(input));
        }
    }

    #[test]
    fn pairs_are_kept_only_where_asked() {
        let mut out = Vec::new();
        encode("x\u{1f600}y\u{10ffff}", &mut out);
        assert_eq!(decode_keeping_pairs(&out), "x\u{1f600}y\u{10ffff}");
        assert_eq!(decode(&out), "x\u{fffd}\u{fffd}y\u{fffd}\u{fffd}");
        // A low surrogate first, or a high one alone, is still replaced.
        assert_eq!(
            decode_keeping_pairs(b"\xed\xb8\x80\xed\xa0\xbd"),
            "\u{fffd}\u{fffd}"
        );
        assert_eq!(decode_keeping_pairs(b"\xed\xa0\xbdz"), "\u{fffd}z");
    }

    #[test]
    fn valid_utf8_reads_as_itself() {
        for s in ["", "/a", "\u{1f600}", "\0\u{7ff}\u{ffff}"] {
            assert_eq!(decode(s.as_bytes()), s);
            assert_eq!(decode_keeping_pairs(s.as_bytes()), s);
        }
    }
}
