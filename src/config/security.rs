//! Security settings: `enforce.auth.enabled` / `enforce.auth.schemes`
//! (implemented as in ZooKeeper 3.8's `AuthenticationHelper`), and every
//! other security-relevant key that ringkeeper does not implement (TLS on
//! the client port is config/tls.rs, matched before these), which it
//! refuses: an operator who asked for TLS, SASL or another provider must
//! not get a server that silently runs without it.

/// The auth schemes ringkeeper's server has providers for: ZooKeeper's
/// defaults (`ProviderRegistry.initialize`), ip and digest.
pub const AVAILABLE_SCHEMES: &[&str] = &["ip", "digest"];

/// Security keys ringkeeper refuses, compared after an optional
/// `zookeeper.` prefix (zoo.cfg keys become `zookeeper.<key>` system
/// properties in ZooKeeper, and some are written out in full).
const UNSUPPORTED_KEYS: &[&str] = &[
    "skipACL",
    "requireKerberosConfig",
    "authProvider",
    "DigestAuthenticationProvider.enabled",
    "DigestAuthenticationProvider.digestAlg",
];

/// Families of security keys ringkeeper refuses, by prefix (after an
/// optional `zookeeper.`).
const UNSUPPORTED_PREFIXES: &[&str] = &[
    "authProvider.",
    "ssl.",
    "ssl",
    "quorum.ssl",
    "kerberos.",
    "sasl.",
    "SASLAuthenticationProvider.",
    "X509AuthenticationProvider.",
    "superUser.",
    "enforce.auth.",
];

/// Quorum SASL (quorum.auth.enableSasl): DIGEST-MD5 between members with
/// the JAAS file's QuorumServer users and QuorumLearner login.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumSasl {
    /// `quorum.auth.learnerRequireSasl`: this member authenticates when it
    /// dials a peer (otherwise it sends nothing).
    pub learner_require: bool,
    /// `quorum.auth.serverRequireSasl`: a peer that dials this member must
    /// authenticate (otherwise one that does not is let through).
    pub server_require: bool,
    pub server_users: std::collections::BTreeMap<String, super::tls::Secret>,
    pub learner_login: (String, super::tls::Secret),
}

/// ZooKeeper's SASL provider, as `authProvider.N` names it.
pub const SASL_PROVIDER: &str = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider";

/// Whether `key` is a security setting ringkeeper does not implement.
/// Call it after the implemented keys (`enforce.auth.enabled`,
/// `enforce.auth.schemes`, superDigest) have been matched.
pub fn is_unsupported(key: &str) -> bool {
    let k = key.strip_prefix("zookeeper.").unwrap_or(key);
    UNSUPPORTED_KEYS.contains(&k) || UNSUPPORTED_PREFIXES.iter().any(|p| k.starts_with(p))
}

/// The error for such a key (the caller prefixes the line and key).
pub fn unsupported_reason() -> String {
    "security setting not supported by ringkeeper yet: refusing to start rather than \
     ignore it (remove the line to run without it)"
        .to_string()
}

/// `enforce.auth.schemes` as `AuthenticationHelper` splits it: Java's
/// `String.split(",")` (trailing empty pieces dropped), each piece trimmed.
pub fn split_schemes(v: &str) -> Vec<String> {
    let mut pieces: Vec<&str> = v.split(',').collect();
    while pieces.last() == Some(&"") {
        pieces.pop();
    }
    pieces.into_iter().map(|p| p.trim().to_string()).collect()
}

/// Checks the two keys together as `validateConfiguredProperties` does;
/// returns the schemes to enforce, or None when enforcement is off.
/// Errors are (which key, reason).
pub fn enforce_auth(
    enabled: bool,
    schemes: Option<&str>,
    sasl_provider: bool,
) -> Result<Option<Vec<String>>, (&'static str, String)> {
    if !enabled {
        return Ok(None);
    }
    let schemes = schemes.map(split_schemes).unwrap_or_default();
    let available = |s: &str| AVAILABLE_SCHEMES.contains(&s) || (sasl_provider && s == "sasl");
    if schemes.is_empty() {
        return Err((
            "enforce.auth.enabled",
            "enforce.auth.enabled is true but enforce.auth.schemes is not set (ZooKeeper \
             requires it too)"
                .into(),
        ));
    }
    if let Some(s) = schemes.iter().find(|s| !available(s)) {
        return Err((
            "enforce.auth.schemes",
            format!(
                "authentication scheme '{s}' is not available (ringkeeper has {})",
                AVAILABLE_SCHEMES.join(", ") + if sasl_provider { ", sasl" } else { "" }
            ),
        ));
    }
    Ok(Some(schemes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes_split_as_java_does() {
        assert_eq!(split_schemes("digest"), ["digest"]);
        assert_eq!(split_schemes(" digest , ip,,"), ["digest", "ip"]);
        assert_eq!(split_schemes(",digest"), ["", "digest"]);
        assert_eq!(split_schemes(""), Vec::<String>::new());
    }

    #[test]
    fn enforcement_needs_available_schemes() {
        assert_eq!(enforce_auth(false, Some("nope"), false), Ok(None));
        assert_eq!(
            enforce_auth(true, Some("digest, ip"), false),
            Ok(Some(vec!["digest".into(), "ip".into()]))
        );
        assert_eq!(
            enforce_auth(true, None, false).unwrap_err().0,
            "enforce.auth.enabled"
        );
        assert_eq!(
            enforce_auth(true, Some(""), false).unwrap_err().0,
            "enforce.auth.enabled"
        );
        let (key, why) = enforce_auth(true, Some("digest,sasl"), false).unwrap_err();
        assert!(enforce_auth(true, Some("digest,sasl"), true).is_ok());
        assert_eq!(key, "enforce.auth.schemes");
        assert!(why.contains("'sasl' is not available"), "{why}");
    }

    #[test]
    fn security_keys_are_recognised_with_and_without_the_prefix() {
        for key in [
            "authProvider.1",
            "zookeeper.authProvider.sasl",
            "ssl.keyStore.location",
            "zookeeper.ssl.keyStore.location",
            "skipACL",
            "enforce.auth.somethingElse",
        ] {
            assert!(is_unsupported(key), "{key}");
        }
        for key in [
            "tickTime",
            "admin.enableServer",
            "quorumListenOnAllIPs",
            "snapCount",
        ] {
            assert!(!is_unsupported(key), "{key}");
        }
    }
}
