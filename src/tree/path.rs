//! Znode path rules (PathUtils.validatePath in Apache ZooKeeper).

/// Returns why `path` is not a valid znode path, or None if it is.
pub fn invalid_reason(path: &str) -> Option<&'static str> {
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

    #[test]
    fn parents() {
        assert_eq!(split_parent("/a"), Some(("/", "a")));
        assert_eq!(split_parent("/a/b"), Some(("/a", "b")));
        assert_eq!(split_parent("/"), Some(("/", "")));
        assert_eq!(split_parent("a"), None);
    }
}
