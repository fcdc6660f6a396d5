//! Znode path rules (PathUtils.validatePath in Apache ZooKeeper).

/// Returns why `path` is not a valid znode path, or None if it is.
pub fn invalid_reason(path: &str) -> Option<&'static str> {
    let b = path.as_bytes();
    if b.is_empty() {
        return Some("path length must be > 0");
    }
    if b[0] != b'/' {
        return Some("path must start with / character");
    }
    if b.len() == 1 {
        return None;
    }
    if b[b.len() - 1] == b'/' {
        return Some("path must not end with / character");
    }
    if plainly_valid(b) {
        return None;
    }
    // One pass over the bytes, for paths the plain check could not pass.
    // The first bad name wins; characters are judged after the names.
    let mut forbidden_ascii = false;
    let mut non_ascii = false;
    let mut start = 1;
    for i in 1..=b.len() {
        let c = b.get(i).copied();
        if c == Some(b'/') || c.is_none() {
            if let Some(reason) = name_reason(&b[start..i]) {
                return Some(reason);
            }
            start = i + 1;
        } else if let Some(c) = c {
            forbidden_ascii |= c < 0x20 || c == 0x7f;
            non_ascii |= c >= 0x80;
        }
    }
    if forbidden_ascii || (non_ascii && path.chars().any(forbidden_char)) {
        return Some("invalid character");
    }
    None
}

/// Every request's path comes through here: a path of printable ASCII in
/// which no name is empty or starts with a dot is valid. Checked eight
/// bytes at a time, in windows that start seven bytes apart so that every
/// pair of neighbours lies within one window; anything else goes the long
/// way (a name like ".a" is fine, but is told from "." and ".." there).
fn plainly_valid(b: &[u8]) -> bool {
    if b.len() < 8 {
        // Padded with a byte that is printable and neither '/' nor '.'.
        let mut w = [b'a'; 8];
        w[..b.len()].copy_from_slice(b);
        return plain_window(u64::from_le_bytes(w));
    }
    let mut ok = true;
    let mut at = 0;
    loop {
        let start = at.min(b.len() - 8);
        let w: [u8; 8] = b[start..start + 8].try_into().expect("eight bytes");
        ok &= plain_window(u64::from_le_bytes(w));
        if start + 8 == b.len() {
            return ok;
        }
        at += 7;
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// 0x80 in every byte of `x` that is zero, 0 in the others (exact: no
/// carry crosses a byte).
fn zero_bytes(x: u64) -> u64 {
    let low_nonzero = (x & !HIGHS).wrapping_add(!HIGHS);
    !(low_nonzero | x | !HIGHS)
}

/// Eight path bytes (the first in the low byte): all printable ASCII
/// (0x20..=0x7e), and no '/' followed by '/' or '.'.
fn plain_window(x: u64) -> bool {
    let high = x & HIGHS;
    // Below 0x20: adding 0x60 to the low seven bits leaves the top clear.
    let control = !((x & !HIGHS).wrapping_add(ONES * 0x60)) & HIGHS;
    let del = zero_bytes(x ^ (ONES * 0x7f));
    let slash = zero_bytes(x ^ (ONES * u64::from(b'/')));
    // '.' is 0x2e and '/' 0x2f: setting the low bit makes either a '/'.
    let slash_or_dot = zero_bytes((x | ONES) ^ (ONES * u64::from(b'/')));
    let pair = slash & (slash_or_dot >> 8);
    (high | control | del | pair) == 0
}

/// Why one name between slashes is refused, if it is.
fn name_reason(name: &[u8]) -> Option<&'static str> {
    match name {
        b"" => Some("empty node name specified"),
        b"." | b".." => Some("relative paths not allowed"),
        _ => None,
    }
}

pub fn is_valid(path: &str) -> bool {
    invalid_reason(path).is_none()
}

/// Characters ZooKeeper refuses. Java checks UTF-16 code units, so every
/// character outside the BMP (a surrogate pair there) is refused too.
fn forbidden_char(c: char) -> bool {
    let c = c as u32;
    c == 0
        || (0x01..=0x1f).contains(&c)
        || (0x7f..=0x9f).contains(&c)
        || (0xd800..=0xf8ff).contains(&c)
        || c >= 0xfff0
}

/// Splits "/a/b" into ("/a", "b") and "/a" into ("/", "a"). ZooKeeper's
/// parent of a top-level node is "" (an alias of the root); we use "/".
pub fn split_parent(path: &str) -> Option<(&str, &str)> {
    let i = path.rfind('/')?;
    let parent = if i == 0 { "/" } else { &path[..i] };
    Some((parent, &path[i + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_and_refuses_like_zookeeper() {
        for ok in [
            "/",
            "/a",
            "/a/b",
            "/a.b",
            "/...",
            "/a/.b",
            "/zookeeper",
            "/é",
        ] {
            assert!(is_valid(ok), "{ok}");
        }
        for bad in [
            "",
            "a",
            "/a/",
            "//",
            "/a//b",
            "/.",
            "/..",
            "/a/./b",
            "/a/..",
            "/a\u{0}",
            "/a\u{1}",
            "/\u{7f}",
            "/\u{e000}",
            "/\u{fff5}",
            "/\u{1f600}",
        ] {
            assert!(!is_valid(bad), "{bad:?}");
        }
    }

    /// The checks as written before they became one pass over the bytes.
    fn reference(path: &str) -> Option<&'static str> {
        if path.is_empty() {
            return Some("path length must be > 0");
        }
        if !path.starts_with('/') {
            return Some("path must start with / character");
        }
        if path.len() == 1 {
            return None;
        }
        if path.ends_with('/') {
            return Some("path must not end with / character");
        }
        for segment in path[1..].split('/') {
            if segment.is_empty() {
                return Some("empty node name specified");
            }
            if segment == "." || segment == ".." {
                return Some("relative paths not allowed");
            }
        }
        if path.chars().any(forbidden_char) {
            return Some("invalid character");
        }
        None
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]
        #[test]
        fn one_pass_gives_the_same_reason_as_the_checks_it_replaced(
            chars in proptest::collection::vec(proptest::sample::select(vec![
                '/', '/', '/', '.', '.', 'a', 'z', '0', '\u{0}', '\u{1f}', '\u{7f}', '\u{80}',
                '\u{9f}', '\u{a0}', 'é', '\u{d7ff}', '\u{e000}', '\u{f8ff}', '\u{f900}',
                '\u{ffef}', '\u{fff0}', '\u{10000}',
            ]), 0..24)
        ) {
            let path: String = chars.into_iter().collect();
            proptest::prop_assert_eq!(invalid_reason(&path), reference(&path), "{:?}", path);
        }
    }

    /// The byte-at-a-time check the windows replaced.
    fn plainly_valid_bytewise(b: &[u8]) -> bool {
        b.windows(2).all(|w| {
            let pair = w[0] == b'/' && (w[1] == b'/' || w[1] == b'.');
            !pair && (0x20..0x7f).contains(&w[1])
        }) && b.first().is_none_or(|c| (0x20..0x7f).contains(c))
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(8192))]
        #[test]
        fn windows_judge_as_bytes_do(
            bytes in proptest::collection::vec(proptest::sample::select(vec![
                b'/', b'/', b'/', b'.', b'.', b'a', b'a', b'a', b'z', 0x00, 0x1f, 0x20,
                0x2e, 0x30, 0x7e, 0x7f, 0x80, 0xa0, 0xff,
            ]), 0..40)
        ) {
            proptest::prop_assert_eq!(plainly_valid(&bytes), plainly_valid_bytewise(&bytes), "{:?}", bytes);
        }
    }

    #[test]
    fn parents() {
        assert_eq!(split_parent("/a"), Some(("/", "a")));
        assert_eq!(split_parent("/a/b"), Some(("/a", "b")));
        assert_eq!(split_parent("/"), Some(("/", "")));
        assert_eq!(split_parent("a"), None);
    }
}
