//! The server side of SASL DIGEST-MD5 (RFC 2831) as ZooKeeper runs it:
//! `Sasl.createSaslServer("DIGEST-MD5", "zookeeper", "zk-sasl-md5", ...)`,
//! so the realm offered is `zk-sasl-md5` and the digest-uri the client must
//! use is `zookeeper/zk-sasl-md5`; qop `auth` only (no security layer).
//!
//! Three steps: an empty first token gets the challenge; the client's
//! digest-response is checked against the user's password and answered
//! with `rspauth`; the exchange is then complete and the session holds
//! `sasl:<user>`.

use std::collections::BTreeMap;

use md5::{Digest, Md5};

pub const REALM: &str = "zk-sasl-md5";
pub const DIGEST_URI: &str = "zookeeper/zk-sasl-md5";
/// The quorum's (QuorumAuth: protocol zookeeper-quorum, server name
/// zk-quorum-sasl-md5).
pub const QUORUM_REALM: &str = "zk-quorum-sasl-md5";
pub const QUORUM_DIGEST_URI: &str = "zookeeper-quorum/zk-quorum-sasl-md5";

enum Step {
    /// Nothing sent yet: the next token (empty) gets the challenge.
    Start,
    /// Challenge sent with this nonce: the next token is the response.
    Challenged {
        nonce: String,
    },
    Complete,
}

pub struct DigestMd5Server {
    step: Step,
    realm: &'static str,
    uri: &'static str,
}

/// What a token led to.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Send this token back and wait for the next.
    Continue(Vec<u8>),
    /// Authenticated as this user; send the token (rspauth) back.
    Done { user: String, token: Vec<u8> },
    /// The user has no password in the JAAS section. ZooKeeper's callback
    /// handler then sets none, Java's DigestMD5Server fails with a
    /// NullPointerException rather than a SaslException, and processSasl
    /// answers OK with no token and keeps the connection, unauthenticated.
    NoSuchUser(String),
}

impl Default for DigestMd5Server {
    /// The client port's exchange.
    fn default() -> Self {
        DigestMd5Server::new(REALM, DIGEST_URI)
    }
}

impl DigestMd5Server {
    pub fn new(realm: &'static str, uri: &'static str) -> DigestMd5Server {
        DigestMd5Server {
            step: Step::Start,
            realm,
            uri,
        }
    }

    pub fn is_complete(&self) -> bool {
        matches!(self.step, Step::Complete)
    }

    /// Takes the client's token; `password` looks a user's password up.
    /// An error fails the exchange (the reason is for the log only).
    pub fn evaluate(
        &mut self,
        token: &[u8],
        password: impl Fn(&str) -> Option<String>,
    ) -> Result<Outcome, String> {
        match std::mem::replace(&mut self.step, Step::Complete) {
            Step::Start => {
                // DigestMD5Server answers any first token with its challenge
                // (the initial response, if any, is ignored).
                let nonce = fresh_nonce();
                let challenge = format!(
                    "realm=\"{}\",nonce=\"{nonce}\",qop=\"auth\",charset=utf-8,\
                     algorithm=md5-sess",
                    self.realm
                );
                self.step = Step::Challenged { nonce };
                Ok(Outcome::Continue(challenge.into_bytes()))
            }
            Step::Challenged { nonce } => {
                let text = std::str::from_utf8(token)
                    .map_err(|_| "DIGEST-MD5: response is not UTF-8".to_string())?;
                let d = directives(text)?;
                let get = |k: &str| {
                    d.get(k)
                        .map(String::as_str)
                        .ok_or_else(|| format!("DIGEST-MD5: response lacks {k}"))
                };
                let user = get("username")?;
                let cnonce = get("cnonce")?;
                let nc = get("nc")?;
                let uri = get("digest-uri")?;
                let response = get("response")?;
                let qop = d.get("qop").map_or("auth", String::as_str);
                let realm = d.get("realm").map_or("", String::as_str);
                if get("nonce")? != nonce {
                    return Err("DIGEST-MD5: nonce does not match".into());
                }
                if qop != "auth" {
                    return Err(format!("DIGEST-MD5: qop {qop} not offered"));
                }
                if uri != self.uri {
                    return Err(format!("DIGEST-MD5: mismatched digest-uri {uri}"));
                }
                if nc != "00000001" {
                    return Err(format!("DIGEST-MD5: nonce count {nc}"));
                }
                let authzid = d.get("authzid").map(String::as_str);
                let Some(pass) = password(user) else {
                    return Ok(Outcome::NoSuchUser(user.to_string()));
                };
                let a1 = a1(user, realm, &pass, &nonce, cnonce, authzid);
                let expected = kd(&a1, &nonce, nc, cnonce, qop, &format!("AUTHENTICATE:{uri}"));
                if !response.eq_ignore_ascii_case(&expected) {
                    return Err(format!("DIGEST-MD5: wrong password for {user}"));
                }
                let rspauth = kd(&a1, &nonce, nc, cnonce, qop, &format!(":{uri}"));
                Ok(Outcome::Done {
                    user: user.to_string(),
                    token: format!("rspauth={rspauth}").into_bytes(),
                })
            }
            Step::Complete => Err("DIGEST-MD5: exchange already complete".into()),
        }
    }
}

/// The client side, as Java's DigestMD5Client answers a challenge for a
/// learner (QuorumLearner's username and password, no authzid).
pub struct DigestMd5Client {
    user: String,
    password: String,
    uri: &'static str,
    /// What the server's rspauth must be, once the response is sent.
    expected_rspauth: Option<String>,
}

impl DigestMd5Client {
    pub fn new(user: &str, password: &str, uri: &'static str) -> DigestMd5Client {
        DigestMd5Client {
            user: user.to_string(),
            password: password.to_string(),
            uri,
            expected_rspauth: None,
        }
    }

    /// The digest-response to the server's challenge.
    pub fn respond(&mut self, challenge: &[u8]) -> Result<Vec<u8>, String> {
        let text = std::str::from_utf8(challenge)
            .map_err(|_| "DIGEST-MD5: challenge is not UTF-8".to_string())?;
        let d = directives(text)?;
        let nonce = d
            .get("nonce")
            .ok_or("DIGEST-MD5: challenge lacks a nonce")?;
        let realm = d.get("realm").map_or("", String::as_str);
        if !d
            .get("qop")
            .is_none_or(|q| q.split(',').any(|q| q.trim() == "auth"))
        {
            return Err("DIGEST-MD5: the server offers no qop=auth".into());
        }
        let cnonce = fresh_nonce();
        let nc = "00000001";
        let a1 = a1(&self.user, realm, &self.password, nonce, &cnonce, None);
        let response = kd(
            &a1,
            nonce,
            nc,
            &cnonce,
            "auth",
            &format!("AUTHENTICATE:{}", self.uri),
        );
        self.expected_rspauth = Some(kd(
            &a1,
            nonce,
            nc,
            &cnonce,
            "auth",
            &format!(":{}", self.uri),
        ));
        Ok(format!(
            "charset=utf-8,username=\"{}\",realm=\"{realm}\",nonce=\"{nonce}\",nc={nc},\
             cnonce=\"{cnonce}\",digest-uri=\"{}\",maxbuf=65536,response={response},qop=auth",
            quote(&self.user),
            self.uri
        )
        .into_bytes())
    }

    /// The server's final token must prove it knows the password too.
    pub fn verify(&self, token: &[u8]) -> Result<(), String> {
        let text = std::str::from_utf8(token).map_err(|_| "DIGEST-MD5: rspauth is not UTF-8")?;
        let got = directives(text)?
            .remove("rspauth")
            .ok_or("DIGEST-MD5: no rspauth")?;
        match &self.expected_rspauth {
            Some(want) if want.eq_ignore_ascii_case(&got) => Ok(()),
            _ => Err("DIGEST-MD5: the server's rspauth does not match".into()),
        }
    }
}

fn quote(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn md5(parts: &[&[u8]]) -> [u8; 16] {
    let mut h = Md5::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

/// A1 for md5-sess: H(user:realm:password):nonce:cnonce[:authzid]. RFC
/// 2831: with charset=utf-8, strings whose characters all fit ISO 8859-1
/// are hashed in ISO 8859-1 (as Java's DigestMD5Base does).
fn a1(
    user: &str,
    realm: &str,
    pass: &str,
    nonce: &str,
    cnonce: &str,
    authzid: Option<&str>,
) -> Vec<u8> {
    let inner = md5(&[
        &latin1_or_utf8(user),
        b":",
        &latin1_or_utf8(realm),
        b":",
        &latin1_or_utf8(pass),
    ]);
    let mut a1 = inner.to_vec();
    a1.extend_from_slice(format!(":{nonce}:{cnonce}").as_bytes());
    if let Some(z) = authzid {
        a1.push(b':');
        a1.extend_from_slice(z.as_bytes());
    }
    a1
}

fn latin1_or_utf8(s: &str) -> Vec<u8> {
    if s.chars().all(|c| (c as u32) < 256) {
        s.chars().map(|c| c as u8).collect()
    } else {
        s.as_bytes().to_vec()
    }
}

/// HEX(KD(HEX(H(A1)), nonce:nc:cnonce:qop:HEX(H(A2)))).
fn kd(a1: &[u8], nonce: &str, nc: &str, cnonce: &str, qop: &str, a2: &str) -> String {
    let ha1 = hex(&md5(&[a1]));
    let ha2 = hex(&md5(&[a2.as_bytes()]));
    hex(&md5(&[
        format!("{ha1}:{nonce}:{nc}:{cnonce}:{qop}:{ha2}").as_bytes()
    ]))
}

fn fresh_nonce() -> String {
    use base64::Engine;
    let mut bytes = [0u8; 24];
    // SAFETY: getrandom writes at most `len` bytes into the buffer.
    let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    assert_eq!(n, bytes.len() as isize, "getrandom failed for a SASL nonce");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// `key=value` or `key="quoted, value"` directives, comma-separated.
fn directives(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let eq = rest
            .find('=')
            .ok_or_else(|| format!("DIGEST-MD5: bad directive in {text:?}"))?;
        let key = rest[..eq].trim().to_ascii_lowercase();
        rest = rest[eq + 1..].trim_start();
        let value;
        if let Some(q) = rest.strip_prefix('"') {
            let mut v = String::new();
            let mut chars = q.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, n)) = chars.next() {
                            v.push(n);
                        }
                    }
                    '"' => {
                        end = Some(i);
                        break;
                    }
                    _ => v.push(c),
                }
            }
            let end = end.ok_or_else(|| "DIGEST-MD5: unterminated quoted value".to_string())?;
            value = v;
            rest = q[end + 1..].trim_start();
        } else {
            let end = rest.find(',').unwrap_or(rest.len());
            value = rest[..end].trim().to_string();
            rest = &rest[end..];
        }
        rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
        if out.insert(key.clone(), value).is_some() && key != "realm" {
            return Err(format!("DIGEST-MD5: directive {key} given twice"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client as RFC 2831 computes it (and as Java's DigestMD5Client).
    fn client_response(challenge: &str, user: &str, pass: &str, authzid: Option<&str>) -> String {
        let d = directives(challenge).unwrap();
        let nonce = &d["nonce"];
        let cnonce = "OA6MHXh6VqTrRk";
        let a1 = a1(user, REALM, pass, nonce, cnonce, authzid);
        let resp = kd(
            &a1,
            nonce,
            "00000001",
            cnonce,
            "auth",
            &format!("AUTHENTICATE:{DIGEST_URI}"),
        );
        let z = authzid
            .map(|z| format!(",authzid=\"{z}\""))
            .unwrap_or_default();
        format!(
            "charset=utf-8,username=\"{user}\",realm=\"{REALM}\",nonce=\"{nonce}\",nc=00000001,\
             cnonce=\"{cnonce}\",digest-uri=\"{DIGEST_URI}\",maxbuf=65536,response={resp},\
             qop=auth{z}"
        )
    }

    fn users(u: &str) -> Option<String> {
        (u == "bob").then(|| "bobsecret".to_string())
    }

    #[test]
    fn a_client_with_the_password_is_authenticated() {
        for authzid in [None, Some("bob")] {
            let mut s = DigestMd5Server::default();
            let Outcome::Continue(ch) = s.evaluate(b"", users).unwrap() else {
                panic!("a challenge first")
            };
            let ch = String::from_utf8(ch).unwrap();
            assert!(ch.contains("realm=\"zk-sasl-md5\"") && ch.contains("qop=\"auth\""));
            let r = client_response(&ch, "bob", "bobsecret", authzid);
            match s.evaluate(r.as_bytes(), users).unwrap() {
                Outcome::Done { user, token } => {
                    assert_eq!(user, "bob");
                    assert!(token.starts_with(b"rspauth="));
                }
                o => panic!("{o:?}"),
            }
            assert!(s.is_complete());
        }
    }

    #[test]
    fn a_wrong_password_or_user_or_uri_fails() {
        let mut s = DigestMd5Server::default();
        let Outcome::Continue(ch) = s.evaluate(b"", users).unwrap() else {
            panic!()
        };
        let r = client_response(std::str::from_utf8(&ch).unwrap(), "bob", "wrong", None);
        assert!(s.evaluate(r.as_bytes(), users).is_err(), "a wrong password");
        let mut s = DigestMd5Server::default();
        let Outcome::Continue(ch) = s.evaluate(b"", users).unwrap() else {
            panic!()
        };
        let r = client_response(std::str::from_utf8(&ch).unwrap(), "eve", "bobsecret", None);
        assert_eq!(
            s.evaluate(r.as_bytes(), users),
            Ok(Outcome::NoSuchUser("eve".into()))
        );
        assert!(s.evaluate(b"", users).is_err(), "no second exchange");
        let mut s = DigestMd5Server::default();
        let Outcome::Continue(ch) = s.evaluate(b"", users).unwrap() else {
            panic!()
        };
        let r = client_response(std::str::from_utf8(&ch).unwrap(), "bob", "bobsecret", None)
            .replace(DIGEST_URI, "zookeeper/elsewhere");
        assert!(s.evaluate(r.as_bytes(), users).is_err());
    }

    #[test]
    fn our_client_and_server_agree_on_the_quorum_realm() {
        let mut server = DigestMd5Server::new(QUORUM_REALM, QUORUM_DIGEST_URI);
        let mut client = DigestMd5Client::new("bob", "bobsecret", QUORUM_DIGEST_URI);
        let Outcome::Continue(ch) = server.evaluate(b"", users).unwrap() else {
            panic!()
        };
        let response = client.respond(&ch).unwrap();
        let Outcome::Done { user, token } = server.evaluate(&response, users).unwrap() else {
            panic!("authenticated")
        };
        assert_eq!(user, "bob");
        client.verify(&token).unwrap();
        let mut wrong = DigestMd5Client::new("bob", "nope", QUORUM_DIGEST_URI);
        let mut server = DigestMd5Server::new(QUORUM_REALM, QUORUM_DIGEST_URI);
        let Outcome::Continue(ch) = server.evaluate(b"", users).unwrap() else {
            panic!()
        };
        assert!(server
            .evaluate(&wrong.respond(&ch).unwrap(), users)
            .is_err());
        assert!(client.verify(b"rspauth=00").is_err());
    }

    #[test]
    fn rfc_2831_example_digest() {
        // RFC 2831 §4's IMAP example: chris / secret at elwood.innosoft.com.
        let a1 = a1(
            "chris",
            "elwood.innosoft.com",
            "secret",
            "OA6MG9tEQGm2hh",
            "OA6MHXh6VqTrRk",
            None,
        );
        assert_eq!(
            kd(
                &a1,
                "OA6MG9tEQGm2hh",
                "00000001",
                "OA6MHXh6VqTrRk",
                "auth",
                "AUTHENTICATE:imap/elwood.innosoft.com"
            ),
            "d388dad90d4bbd760a152321f2143af7"
        );
        assert_eq!(
            kd(
                &a1,
                "OA6MG9tEQGm2hh",
                "00000001",
                "OA6MHXh6VqTrRk",
                "auth",
                ":imap/elwood.innosoft.com"
            ),
            "ea40f60335c427b5527b84dbabcdfffd"
        );
    }

    #[test]
    fn directives_parse_quotes_and_escapes() {
        let d = directives(r#"a=1, b="x,y", c="q\"d",d=plain"#).unwrap();
        assert_eq!(d["a"], "1");
        assert_eq!(d["b"], "x,y");
        assert_eq!(d["c"], "q\"d");
        assert_eq!(d["d"], "plain");
        assert!(directives("a=\"open").is_err());
        assert!(directives("a=1,a=2").is_err());
    }
}
