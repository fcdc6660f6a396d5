//! Authentication packets (xid -4): the providers Apache ZooKeeper has by
//! default, ip and digest. SASL is not offered.

use base64::Engine;

use super::conn::Conn;

/// DigestAuthenticationProvider.generateDigest: "user:password" becomes
/// "user:" + base64(sha1("user:password")).
pub fn digest_id(user_password: &str) -> Option<String> {
    let (user, _) = user_password.split_once(':')?;
    let hash = sha1_smol::Sha1::from(user_password.as_bytes())
        .digest()
        .bytes();
    Some(format!(
        "{user}:{}",
        base64::engine::general_purpose::STANDARD.encode(hash)
    ))
}

/// The ids an auth packet adds to the connection, or None when it fails
/// (the server then answers AUTHFAILED and closes).
pub fn authenticate(
    scheme: &str,
    auth: &[u8],
    conn: &Conn,
    super_digest: Option<&str>,
) -> Option<Vec<(String, String)>> {
    match scheme {
        "digest" => {
            let id = digest_id(std::str::from_utf8(auth).ok()?)?;
            let mut ids = Vec::new();
            if super_digest == Some(id.as_str()) {
                ids.push(("super".to_string(), String::new()));
            }
            ids.push(("digest".to_string(), id));
            Some(ids)
        }
        "ip" => Some(vec![("ip".to_string(), conn.peer.ip().to_string())]),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_matches_zookeeper() {
        // From ZooKeeper's documentation / DigestAuthenticationProvider tests:
        // super:test -> super:D/InIHSb7yEEbrWz8b9l71RjZJU=
        assert_eq!(
            digest_id("super:test").unwrap(),
            "super:D/InIHSb7yEEbrWz8b9l71RjZJU="
        );
        assert_eq!(digest_id("nocolon"), None);
    }
}
