//! The JAAS login configuration ZooKeeper's SASL reads
//! (`java.security.auth.login.config`): the users of its `Server` section
//! (or the one `zookeeper.sasl.serverconfig` names), given to ZooKeeper's
//! DigestLoginModule as `user_<name>="<password>"` options.
//!
//! Kerberos (GSSAPI) is not implemented: a section with another login
//! module stops startup, naming it.

use std::collections::BTreeMap;

use super::tls::Secret;

/// ZooKeeper's DigestLoginModule, the one login module ringkeeper reads.
pub const DIGEST_LOGIN_MODULE: &str = "org.apache.zookeeper.server.auth.DigestLoginModule";

/// The users of section `section` of the JAAS file text `text`.
pub fn jaas_users(text: &str, section: &str) -> Result<BTreeMap<String, Secret>, String> {
    Ok(section_options(text, section)?
        .into_iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("user_")?.to_string(), Secret::new(v))))
        .collect())
}

/// The `username` and `password` of section `section` (a login a learner
/// presents: QuorumLearner).
pub fn jaas_login(text: &str, section: &str) -> Result<(String, Secret), String> {
    let options = section_options(text, section)?;
    let get = |key: &str| {
        options
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .ok_or_else(|| format!("JAAS section {section}: no {key}"))
    };
    Ok((get("username")?, Secret::new(get("password")?)))
}

/// The options of section `section`, whose login module must be
/// ZooKeeper's DigestLoginModule.
fn section_options(text: &str, section: &str) -> Result<Vec<(String, String)>, String> {
    let text = strip_comments(text);
    let mut rest = text.as_str();
    while let Some(open) = rest.find('{') {
        let name = rest[..open].trim().trim_end_matches(';').trim();
        let name = name.rsplit([';', '}']).next().unwrap_or("").trim();
        let close = rest[open..]
            .find("};")
            .map(|i| open + i)
            .ok_or_else(|| format!("JAAS section {name}: no closing '}};'"))?;
        let body = &rest[open + 1..close];
        if name == section {
            return section_entries(name, body);
        }
        rest = &rest[close + 2..];
    }
    Err(format!("no JAAS section named '{section}'"))
}

fn section_entries(name: &str, body: &str) -> Result<Vec<(String, String)>, String> {
    let mut options = Vec::new();
    for entry in body.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let mut tokens = tokenize(entry)?.into_iter();
        let module = tokens.next().unwrap_or_default();
        let _flag = tokens.next();
        if module != DIGEST_LOGIN_MODULE {
            return Err(format!(
                "JAAS section {name}: login module {module} is not supported by ringkeeper \
                 (only {DIGEST_LOGIN_MODULE}; Kerberos/GSSAPI is not implemented)"
            ));
        }
        for option in tokens {
            let (k, v) = option.split_once('=').ok_or_else(|| {
                format!("JAAS section {name}: option '{option}' is not key=value")
            })?;
            options.push((k.to_string(), v.to_string()));
        }
    }
    Ok(options)
}

/// Words of a login module entry; a quoted value keeps its spaces and
/// loses its quotes (`user_bob="s e"` -> `user_bob=s e`).
fn tokenize(entry: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = entry.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => loop {
                match chars.next() {
                    Some('"') => break,
                    Some('\\') => cur.extend(chars.next()),
                    Some(c) => cur.push(c),
                    None => return Err("JAAS: unterminated quoted value".into()),
                }
            },
            c if c.is_whitespace() => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    Ok(out)
}

fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let line = rest.find("//");
        let block = rest.find("/*");
        let quote = rest.find('"');
        let next = [line, block].into_iter().flatten().min();
        match (next, quote) {
            (Some(n), Some(q)) if q < n => {
                // A quoted value may hold "//": copy it whole.
                let end = rest[q + 1..].find('"').map_or(rest.len(), |e| q + 2 + e);
                out.push_str(&rest[..end]);
                rest = &rest[end..];
            }
            (Some(n), _) if Some(n) == line => {
                out.push_str(&rest[..n]);
                rest = rest[n..].find('\n').map_or("", |e| &rest[n + e..]);
            }
            (Some(n), _) => {
                out.push_str(&rest[..n]);
                rest = rest[n..].find("*/").map_or("", |e| &rest[n + e + 2..]);
            }
            (None, _) => {
                out.push_str(rest);
                return out;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const JAAS: &str = r#"
// the server's users
Server {
       org.apache.zookeeper.server.auth.DigestLoginModule required
       user_super="adminsecret"
       user_bob="bob // secret";
};
/* another section */
Client {
       org.apache.zookeeper.server.auth.DigestLoginModule required
       username="bob"
       password="bobsecret";
};
"#;

    #[test]
    fn reads_the_server_section_users() {
        let users = jaas_users(JAAS, "Server").unwrap();
        assert_eq!(users.len(), 2);
        assert_eq!(users["super"].expose(), "adminsecret");
        assert_eq!(users["bob"].expose(), "bob // secret");
        assert!(jaas_users(JAAS, "Client").unwrap().is_empty());
        let (user, password) = jaas_login(JAAS, "Client").unwrap();
        assert_eq!((user.as_str(), password.expose()), ("bob", "bobsecret"));
        assert!(jaas_login(JAAS, "Server")
            .unwrap_err()
            .contains("no username"));
        assert!(jaas_users(JAAS, "Other")
            .unwrap_err()
            .contains("no JAAS section"));
    }

    #[test]
    fn kerberos_is_refused_by_name() {
        let krb = "Server {\n com.sun.security.auth.module.Krb5LoginModule required\n useKeyTab=true;\n};\n";
        let err = jaas_users(krb, "Server").unwrap_err();
        assert!(
            err.contains("Krb5LoginModule") && err.contains("GSSAPI"),
            "{err}"
        );
    }
}
