//! ACL checks (ZooKeeperServer.checkACL) with Apache ZooKeeper's default
//! providers: world, ip (IPv4 address or CIDR, as 3.8 implements it),
//! digest, x509 (a TLS client certificate's subject), and the super user
//! from superDigest or X509AuthenticationProvider.superUser.

use crate::proto::codes::perm;
use crate::proto::Acl;

/// The auth providers beyond ZooKeeper's defaults that are registered:
/// their schemes are valid in ACLs and expand "auth".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AuthProviders {
    /// X509AuthenticationProvider (TLS on the client port).
    pub x509: bool,
    /// SASLAuthenticationProvider (authProvider.N).
    pub sasl: bool,
}

/// Whether a session holding `ids` (scheme, id) may do `wanted` (any of
/// its bits) on a node with `acl`.
pub fn allowed(acl: &[Acl], ids: &[(String, String)], wanted: i32) -> bool {
    if acl.is_empty() || ids.iter().any(|(s, _)| s == "super") {
        return true;
    }
    acl.iter().filter(|a| a.perms & wanted != 0).any(|a| {
        let (scheme, expr) = (a.id.scheme.as_str(), a.id.id.as_str());
        if scheme == "world" && expr == "anyone" {
            return true;
        }
        ids.iter()
            .filter(|(s, _)| s == scheme)
            .any(|(_, id)| match scheme {
                "ip" => ip_matches(id, expr),
                // X509AuthenticationProvider.matches: the subject exactly.
                "digest" | "x509" => id == expr,
                // SASLAuthenticationProvider.matches: the user, or a user
                // named "super".
                "sasl" => id == expr || id == "super",
                _ => false,
            })
    })
}

/// The ACL list as getACL shows it to a session without ADMIN: digest
/// passwords hidden as "user:x" (FinalRequestProcessor).
pub fn redact_for(acl: &[Acl], ids: &[(String, String)]) -> Vec<Acl> {
    if allowed(acl, ids, perm::ADMIN) {
        return acl.to_vec();
    }
    acl.iter()
        .map(|a| {
            let mut a = a.clone();
            if a.id.scheme == "digest" {
                a.id.id = redact_digest(&a.id.id);
            }
            a
        })
        .collect()
}

/// Java's `id.replaceAll(":.*", ":x")`: each ':' and the rest of its line
/// ('.' stops at a line terminator) become ":x".
fn redact_digest(id: &str) -> String {
    let is_line_end = |c: char| matches!(c, '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}');
    let mut out = String::with_capacity(id.len());
    let mut chars = id.chars().peekable();
    while let Some(c) = chars.next() {
        if c != ':' {
            out.push(c);
            continue;
        }
        out.push_str(":x");
        while chars.next_if(|&n| !is_line_end(n)).is_some() {}
    }
    out
}

/// IPAuthenticationProvider.isValid: a dotted IPv4 address, optionally "/bits".
pub fn ip_acl_valid(expr: &str) -> bool {
    let (addr, bits) = split_cidr(expr);
    v4_bytes(addr).is_some() && bits.is_none_or(|b| parse_bits(b).is_some())
}

fn split_cidr(expr: &str) -> (&str, Option<&str>) {
    match expr.split_once('/') {
        Some((a, b)) => (a, Some(b)),
        None => (expr, None),
    }
}

fn parse_bits(b: &str) -> Option<u32> {
    crate::java_compat::parse_int(b)
        .filter(|n| (0..=32).contains(n))
        .map(|n| n as u32)
}

fn v4_bytes(addr: &str) -> Option<u32> {
    // v4addr2Bytes: split(".", -1) keeps empty parts; each part is parsed
    // with Integer.parseInt (signs and leading zeros allowed).
    let parts: Vec<&str> = addr.split('.').collect();
    if parts.len() != 4 {
        return None;
    }
    let mut v = 0u32;
    for p in parts {
        let n = crate::java_compat::parse_int(p).filter(|n| (0..=255).contains(n))?;
        v = (v << 8) | n as u32;
    }
    Some(v)
}

fn ip_matches(id: &str, expr: &str) -> bool {
    let (addr, bits) = split_cidr(expr);
    let (Some(acl_addr), Some(remote)) = (v4_bytes(addr), v4_bytes(id)) else {
        return false;
    };
    let bits = match bits {
        None => 32,
        Some(b) => match parse_bits(b) {
            Some(n) => n,
            None => return false,
        },
    };
    let mask = if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits)
    };
    acl_addr & mask == remote & mask
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::Id;

    fn acl(perms: i32, scheme: &str, id: &str) -> Acl {
        Acl {
            perms,
            id: Id {
                scheme: scheme.into(),
                id: id.into(),
            },
        }
    }

    fn ids(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn schemes() {
        let me = ids(&[("ip", "127.0.0.1"), ("digest", "bob:hash")]);
        assert!(allowed(
            &[acl(perm::READ, "world", "anyone")],
            &me,
            perm::READ
        ));
        assert!(!allowed(
            &[acl(perm::READ, "world", "anyone")],
            &me,
            perm::WRITE
        ));
        assert!(allowed(
            &[acl(perm::ALL, "ip", "127.0.0.0/8")],
            &me,
            perm::WRITE
        ));
        assert!(!allowed(
            &[acl(perm::ALL, "ip", "10.0.0.1")],
            &me,
            perm::WRITE
        ));
        assert!(allowed(
            &[acl(perm::ALL, "digest", "bob:hash")],
            &me,
            perm::ADMIN
        ));
        assert!(!allowed(
            &[acl(perm::ALL, "digest", "eve:hash")],
            &me,
            perm::ADMIN
        ));
        assert!(allowed(
            &[acl(perm::READ, "digest", "eve:hash")],
            &ids(&[("super", "")]),
            perm::ADMIN
        ));
        assert!(allowed(&[], &me, perm::ADMIN));
    }

    #[test]
    fn ip_acls_are_ipv4_as_in_zookeeper_3_8() {
        assert!(ip_acl_valid("10.1.2.3"));
        assert!(ip_acl_valid("10.0.0.0/8"));
        assert!(!ip_acl_valid("10.0.0.0/33"));
        assert!(!ip_acl_valid("::1"));
        assert!(!ip_acl_valid("300.1.1.1"));
        assert!(ip_acl_valid("010.0.0.1"));
        assert!(ip_acl_valid("+1.2.3.4"));
        assert!(ip_acl_valid("1.2.3.4/-0"));
    }

    #[test]
    fn digest_redacted_without_admin() {
        let a = [acl(perm::READ, "digest", "bob:secret")];
        let r = redact_for(&a, &ids(&[("ip", "127.0.0.1")]));
        assert_eq!(r[0].id.id, "bob:x");
        assert_eq!(redact_digest("a:b\nc:d"), "a:x\nc:x");
        assert_eq!(redact_digest("a:b\tc"), "a:x");
        assert_eq!(redact_digest("a:b\r\nc\u{2028}:"), "a:x\r\nc\u{2028}:x");
        assert_eq!(redact_digest(":b:"), ":x");
    }
}
