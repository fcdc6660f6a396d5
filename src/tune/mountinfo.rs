//! /proc/self/mountinfo: which mount holds a path, its filesystem type,
//! source device and options.

use std::path::Path;

/// One mount.
#[derive(Debug, Clone, PartialEq)]
pub struct Mount {
    /// `major:minor` of the filesystem (st_dev of its files).
    pub dev: (u32, u32),
    pub mount_point: String,
    pub options: String,
    pub fs_type: String,
    /// `/dev/vda1`, `tmpfs`, `server:/export` ...
    pub source: String,
    pub super_options: String,
}

/// Undoes mountinfo's octal escapes (`\040` for a space, `\011`, `\012`,
/// `\134`).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses mountinfo: `id parent major:minor root mount_point options
/// [optional fields...] - fs_type source super_options`.
pub fn parse(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let l: Vec<&str> = left.split_whitespace().collect();
            let r: Vec<&str> = right.split_whitespace().collect();
            if l.len() < 6 || r.is_empty() {
                return None;
            }
            let (major, minor) = l[2].split_once(':')?;
            Some(Mount {
                dev: (major.parse().ok()?, minor.parse().ok()?),
                mount_point: unescape(l[4]),
                options: l[5].to_string(),
                fs_type: r[0].to_string(),
                source: r.get(1).map(|s| unescape(s)).unwrap_or_default(),
                super_options: r.get(2).map(|s| s.to_string()).unwrap_or_default(),
            })
        })
        .collect()
}

/// The mount holding `path` (absolute, symlinks resolved): the longest
/// mount point that is a prefix of it; of mounts stacked on one point, the
/// last listed (the one on top).
pub fn mount_of<'a>(mounts: &'a [Mount], path: &Path) -> Option<&'a Mount> {
    let mut best: Option<&Mount> = None;
    for m in mounts {
        if path.starts_with(&m.mount_point)
            && best.is_none_or(|b| m.mount_point.len() >= b.mount_point.len())
        {
            best = Some(m);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
36 27 259:2 / /var/lib/ring\\040keeper rw,noatime shared:5 - xfs /dev/nvme0n1p2 rw,attr2,nobarrier
37 27 0:40 / /tmp rw,nosuid shared:7 master:1 - tmpfs tmpfs rw,size=1024k
38 37 0:41 / /tmp rw - ramfs ramfs rw
bad line
";

    #[test]
    fn lines_parse_with_optional_fields_and_escapes() {
        let m = parse(TEXT);
        assert_eq!(m.len(), 5);
        assert_eq!(m[1].dev, (254, 0));
        assert_eq!(m[1].fs_type, "ext4");
        assert_eq!(m[1].source, "/dev/vda");
        assert_eq!(m[2].mount_point, "/var/lib/ring keeper");
        assert_eq!(m[2].options, "rw,noatime");
        assert_eq!(m[2].super_options, "rw,attr2,nobarrier");
        assert_eq!(m[3].fs_type, "tmpfs");
        assert_eq!(unescape("a\\134b\\011"), "a\\b\t");
    }

    #[test]
    fn the_longest_and_topmost_mount_holds_a_path() {
        let m = parse(TEXT);
        let at = |p: &str| mount_of(&m, Path::new(p)).map(|m| m.fs_type.as_str());
        assert_eq!(at("/var/lib/ring keeper/log"), Some("xfs"));
        assert_eq!(at("/var/lib/ringkeeper"), Some("ext4"));
        assert_eq!(at("/tmp/x"), Some("ramfs"));
        assert_eq!(at("/proc/1"), Some("proc"));
        assert_eq!(at("/procfs"), Some("ext4"));
        assert_eq!(mount_of(&[], Path::new("/")), None);
    }
}
