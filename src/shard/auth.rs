//! Authentication packets (xid -4): the providers Apache ZooKeeper has by
//! default, ip and digest. SASL is answered as a ZooKeeper without a SASL
//! login (no JAAS configuration) answers it.

use base64::Engine;

use super::conn::Conn;
use crate::proto::jute::Reader;
use crate::proto::Response;

/// DigestAuthenticationProvider.generateDigest: "user:password" becomes
/// "user:" + base64(sha1("user:password")). The user is what precedes the
/// first ':', or all of it when there is none ("nocolon" authenticates as
/// user "nocolon", as in ZooKeeper).
pub fn digest_id(user_password: &str) -> String {
    let user = user_password
        .split_once(':')
        .map_or(user_password, |(user, _)| user);
    let hash = sha1_smol::Sha1::from(user_password.as_bytes())
        .digest()
        .bytes();
    format!(
        "{user}:{}",
        base64::engine::general_purpose::STANDARD.encode(hash)
    )
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
            // `new String(authData)` (UTF-8 here): bytes that are not UTF-8
            // become U+FFFD instead of failing.
            let id = digest_id(&String::from_utf8_lossy(auth));
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

/// `enforce.auth.enabled`, as ZooKeeper 3.8's
/// `AuthenticationHelper.enforceAuthentication` does it for every request
/// but auth and SASL (pings, closeSession and setWatches included), before
/// the request is even decoded: a connection that holds no id of one of
/// `schemes` gets SESSIONCLOSEDREQUIRESASLAUTH (-124, zxid 0) for it and is
/// closed. The session is not closed: it expires unless the client
/// reconnects and authenticates in time. The `ip` id every connection
/// holds from the start counts, as in ZooKeeper.
pub fn enforce(conn: &Conn, xid: i32, schemes: &[String]) -> Result<(), String> {
    if conn
        .ids
        .borrow()
        .iter()
        .any(|(scheme, _)| schemes.contains(scheme))
    {
        return Ok(());
    }
    let held: Vec<String> = conn.ids.borrow().iter().map(|(s, _)| s.clone()).collect();
    tracing::error!(
        conn = conn.id,
        "Client authentication scheme(s) {held:?} does not match with any of the expected \
         authentication scheme {schemes:?}, closing session."
    );
    conn.reply(
        xid,
        0,
        crate::proto::codes::err::SESSION_CLOSED_REQUIRE_SASL_AUTH,
        None,
    );
    Err("request before the authentication enforce.auth.schemes requires".into())
}

/// A SASL request (op 102) as ZooKeeperServer.processSasl handles it when
/// the server has no SASL login: the connection has no SASL server, the
/// NullPointerException that follows is caught and logged, and the client
/// gets OK with a null token, its own xid and zxid 0, at once (outside the
/// request order, like auth). Nothing is authenticated and the connection
/// stays. A body whose token Java cannot read, or whose token is null (Java
/// then reads its length and throws), closes the connection unanswered.
/// Bytes after the token are ignored.
pub fn answer_sasl(conn: &Conn, xid: i32, body: &[u8]) -> Result<(), String> {
    match Reader::new(body).read_buffer_opt() {
        Ok(Some(_)) => {
            tracing::error!(
                conn = conn.id,
                "cnxn.saslServer is null: cnxn object did not initialize its saslServer properly."
            );
            conn.reply(xid, 0, 0, Some(&Response::Sasl(None)));
            Ok(())
        }
        Ok(None) => Err("SASL request with a null token".into()),
        Err(e) => Err(format!("unreadable SASL request: {e}")),
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
            digest_id("super:test"),
            "super:D/InIHSb7yEEbrWz8b9l71RjZJU="
        );
        assert!(digest_id("nocolon").starts_with("nocolon:"));
        assert!(digest_id(":pw").starts_with(":"));
    }
}
