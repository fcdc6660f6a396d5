//! Authentication packets (xid -4): the providers Apache ZooKeeper has by
//! default, ip and digest; and SASL packets (op 102): DIGEST-MD5 against
//! the JAAS file's users, or as a ZooKeeper without a SASL login answers.

use base64::Engine;

use super::conn::Conn;
use crate::config::Config;
use crate::proto::jute::Reader;
use crate::proto::Response;
use crate::sasl::digest_md5::Outcome;

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
            let id = digest_id(&crate::proto::java_utf8::decode(auth));
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

/// A SASL request (op 102), answered at once outside the request order
/// (like auth), as ZooKeeperServer.processSasl does.
///
/// Without a JAAS login (no `java.security.auth.login.config`) the
/// connection has no SASL server: the NullPointerException that follows
/// is caught and logged, and the client gets OK with a null token, its
/// own xid and zxid 0. Nothing is authenticated and the connection stays.
///
/// With one, the token goes to the connection's DIGEST-MD5 exchange; when
/// it completes the connection holds `sasl:<user>` (and `super` when the
/// user is `superUser`). A user the JAAS section does not know gets OK
/// with no token and stays unauthenticated, as in ZooKeeper (its password
/// callback leaves the password null, and the NullPointerException that
/// follows is caught as above). A failed exchange answers AUTHFAILED (-115), or
/// SESSIONCLOSEDREQUIRESASLAUTH (-124) when sessionRequireClientSASLAuth is
/// on, and closes the connection; with allowSaslFailedClients (and SASL
/// not required) it answers OK with no token and keeps it.
///
/// A body whose token Java cannot read, or whose token is null (Java then
/// reads its length and throws), closes the connection unanswered. Bytes
/// after the token are ignored.
pub fn answer_sasl(conn: &Conn, xid: i32, body: &[u8], config: &Config) -> Result<(), String> {
    let token = match Reader::new(body).read_buffer_opt() {
        Ok(Some(t)) => t,
        Ok(None) => return Err("SASL request with a null token".into()),
        Err(e) => return Err(format!("unreadable SASL request: {e}")),
    };
    let Some(users) = &config.sasl_users else {
        tracing::error!(
            conn = conn.id,
            "cnxn.saslServer is null: cnxn object did not initialize its saslServer properly."
        );
        conn.reply(xid, 0, 0, Some(&Response::Sasl(None)));
        return Ok(());
    };
    let outcome = conn
        .sasl
        .borrow_mut()
        .get_or_insert_with(Default::default)
        .evaluate(token, |user| {
            users.get(user).map(|p| p.expose().to_string())
        });
    match outcome {
        Ok(Outcome::Continue(challenge)) => {
            conn.reply(xid, 0, 0, Some(&Response::Sasl(Some(challenge))));
            Ok(())
        }
        Ok(Outcome::Done { user, token }) => {
            tracing::info!(
                conn = conn.id,
                "Successfully authenticated client: authenticationID={user}"
            );
            let mut ids = conn.ids.borrow().to_vec();
            crate::java_compat::auth_info_insert(&mut ids, ("sasl".to_string(), user.clone()));
            if config.sasl_super_user.as_deref() == Some(user.as_str()) {
                crate::java_compat::auth_info_insert(
                    &mut ids,
                    ("super".to_string(), String::new()),
                );
            }
            *conn.ids.borrow_mut() = ids.into();
            conn.reply(xid, 0, 0, Some(&Response::Sasl(Some(token))));
            Ok(())
        }
        Ok(Outcome::NoSuchUser(user)) => {
            tracing::warn!(conn = conn.id, "No password found for user: {user}");
            tracing::error!(
                conn = conn.id,
                "cnxn.saslServer is null: cnxn object did not initialize its saslServer properly."
            );
            conn.reply(xid, 0, 0, Some(&Response::Sasl(None)));
            Ok(())
        }
        Err(why) => {
            tracing::warn!(conn = conn.id, peer = %conn.peer, "Client failed to SASL authenticate: {why}");
            if config.allow_sasl_failed_clients && !config.sasl_required {
                tracing::warn!(
                    "Maintaining client connection despite SASL authentication failure."
                );
                *conn.sasl.borrow_mut() = None;
                conn.reply(xid, 0, 0, Some(&Response::Sasl(None)));
                return Ok(());
            }
            let code = if config.sasl_required {
                crate::proto::codes::err::SESSION_CLOSED_REQUIRE_SASL_AUTH
            } else {
                crate::proto::codes::err::AUTH_FAILED
            };
            conn.reply(xid, 0, code, None);
            Err(format!("SASL authentication failed: {why}"))
        }
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
