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
/// which no name is empty or starts with a dot is valid. One branch-free
/// pass the compiler vectorizes; anything else goes the long way (a name
/// like ".a" is fine, but is told from "." and ".." there).
fn plainly_valid(b: &[u8]) -> bool {
    let mut odd = false;
    for w in b.windows(2) {
        odd |= (w[0] == b'/') & ((w[1] == b'/') | (w[1] == b'.'));
        odd |= (w[1] < 0x20) | (w[1] >= 0x7f);
    }
    !odd
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
            ]), 0..12)
        ) {
            let path: String = chars.into_iter().collect();
            proptest::prop_assert_eq!(invalid_reason(&path), reference(&path), "{:?}", path);
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
