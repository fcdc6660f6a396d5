//! A client certificate's identity as ZooKeeper's X509AuthenticationProvider
//! names it: the subject as `X500Principal.getName()` prints it, RFC 2253
//! in the JDK's way (sun.security.x509.AVA.toRFC2253String): the most
//! specific RDN first, RDNs joined by ',', multi-valued ones by '+',
//! keywords only for the nine RFC 2253 knows, every other attribute as its
//! OID with the DER value in lowercase hex after '#'.

use x509_parser::der_parser::asn1_rs::{Any, Tag};
use x509_parser::prelude::{FromDer, X509Certificate};

/// The keywords the JDK prints in RFC 2253 form (AVAKeyword with
/// rfc2253Compliant set), by OID.
const KEYWORDS: &[(&str, &str)] = &[
    ("2.5.4.3", "CN"),
    ("2.5.4.6", "C"),
    ("2.5.4.7", "L"),
    ("2.5.4.8", "ST"),
    ("2.5.4.10", "O"),
    ("2.5.4.11", "OU"),
    ("2.5.4.9", "STREET"),
    ("0.9.2342.19200300.100.1.25", "DC"),
    ("0.9.2342.19200300.100.1.1", "UID"),
];

/// The subject of the DER certificate `der`, or why it cannot be read.
pub fn subject_rfc2253(der: &[u8]) -> Result<String, String> {
    let (_, cert) =
        X509Certificate::from_der(der).map_err(|e| format!("unreadable certificate: {e}"))?;
    let rdns: Vec<String> = cert
        .subject()
        .iter()
        .map(|rdn| {
            rdn.iter()
                .map(|ava| attribute(&ava.attr_type().to_id_string(), ava.attr_value()))
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect();
    Ok(rdns.into_iter().rev().collect::<Vec<_>>().join(","))
}

fn attribute(oid: &str, value: &Any<'_>) -> String {
    let keyword = KEYWORDS.iter().find(|(o, _)| *o == oid).map(|(_, k)| *k);
    match (keyword, string_value(value)) {
        (Some(k), Some(s)) => format!("{k}={}", escape(&s)),
        (k, _) => format!("{}=#{}", k.unwrap_or(oid), der_hex(value)),
    }
}

/// The value as text when its type is one the JDK prints as a string
/// (DerValue.isDerString, not canonical: T61, Printable, IA5, General,
/// BMP, UTF8).
fn string_value(value: &Any<'_>) -> Option<String> {
    let data = value.data;
    match value.tag() {
        Tag::PrintableString | Tag::Ia5String | Tag::Utf8String => {
            std::str::from_utf8(data).ok().map(str::to_string)
        }
        // T61 and General strings: the JDK decodes them as ISO-8859-1.
        Tag::T61String | Tag::GeneralString => Some(data.iter().map(|&b| b as char).collect()),
        Tag::BmpString => {
            let units: Vec<u16> = data
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect();
            String::from_utf16(&units).ok()
        }
        _ => None,
    }
}

/// AVA.toRFC2253String's escaping: the special characters get a
/// backslash, NUL becomes "\00", and leading or trailing spaces (and CRs)
/// are escaped.
fn escape(s: &str) -> String {
    const ESCAPEES: &str = ",=+<>#;\"\\";
    let mut chars: Vec<char> = Vec::with_capacity(s.len());
    for c in s.chars() {
        if ESCAPEES.contains(c) {
            chars.push('\\');
            chars.push(c);
        } else if c == '\0' {
            chars.extend(['\\', '0', '0']);
        } else {
            chars.push(c);
        }
    }
    let blank = |c: &char| *c == ' ' || *c == '\r';
    let lead = chars.iter().take_while(|c| blank(c)).count();
    let trail = chars.len() - chars.iter().rev().take_while(|c| blank(c)).count();
    let mut out = String::with_capacity(chars.len() + 4);
    for (i, c) in chars.iter().enumerate() {
        if i < lead || i >= trail.max(lead) {
            out.push('\\');
        }
        out.push(*c);
    }
    out
}

/// The attribute value's whole DER encoding (tag, length, contents) in
/// lowercase hex.
fn der_hex(value: &Any<'_>) -> String {
    let mut der = Vec::with_capacity(value.data.len() + 4);
    der.push(value.header.raw_tag().map_or(value.tag().0 as u8, |t| t[0]));
    let n = value.data.len();
    if n < 0x80 {
        der.push(n as u8);
    } else {
        let bytes = n.to_be_bytes();
        let skip = bytes.iter().take_while(|&&b| b == 0).count();
        der.push(0x80 | (bytes.len() - skip) as u8);
        der.extend_from_slice(&bytes[skip..]);
    }
    der.extend_from_slice(value.data);
    der.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `id` reads as a distinguished name (X509AuthenticationProvider
/// .isValid builds an X500Principal from it): empty, or RDNs of
/// `keyword=value` separated by unescaped ',' (or ';') and '+'.
pub fn is_valid_dn(id: &str) -> bool {
    if id.is_empty() {
        return true;
    }
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut chars = id.chars();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                cur.push(c);
                match chars.next() {
                    Some(n) => cur.push(n),
                    None => return false,
                }
            }
            '"' => {
                quoted = !quoted;
                cur.push(c);
            }
            ',' | ';' | '+' if !quoted => parts.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    if quoted {
        return false;
    }
    parts.push(cur);
    parts.iter().all(|p| {
        let Some((k, _)) = p.split_once('=') else {
            return false;
        };
        let k = k.trim();
        let k = k
            .strip_prefix("OID.")
            .or_else(|| k.strip_prefix("oid."))
            .unwrap_or(k);
        let keyword = !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        let oid = !k.is_empty()
            && k.split('.')
                .all(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        keyword || oid
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_as_the_jdk_does() {
        assert_eq!(escape("plain"), "plain");
        assert_eq!(escape("a,b=c+d"), "a\\,b\\=c\\+d");
        assert_eq!(escape("#x"), "\\#x");
        assert_eq!(escape(" lead and trail "), "\\ lead and trail\\ ");
        assert_eq!(escape("   "), "\\ \\ \\ ");
        assert_eq!(escape("q\"\\"), "q\\\"\\\\");
    }

    #[test]
    fn distinguished_names_are_checked_like_x500principal() {
        assert!(is_valid_dn(""));
        assert!(is_valid_dn("CN=client,OU=test,O=Example,C=US"));
        assert!(is_valid_dn("CN=a\\,b+UID=7"));
        assert!(is_valid_dn(
            "1.2.840.113549.1.9.1=#160d61406578616d706c652e636f6d"
        ));
        assert!(!is_valid_dn("client"));
        assert!(!is_valid_dn("CN=a,"));
        assert!(!is_valid_dn("=x"));
    }
}
