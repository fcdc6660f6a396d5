//! SASL for client sessions (op 102) as ZooKeeper 3.8 runs it: DIGEST-MD5
//! exchanges ([`digest_md5`]) against the users of the JAAS login
//! configuration (config/jaas.rs), and the `sasl` auth id they give a
//! session (SASLAuthenticationProvider).

pub mod digest_md5;

/// SASLAuthenticationProvider.isValid: the id parses as a KerberosName
/// (`name`, `name@REALM` or `name/host@REALM`).
pub fn is_valid_id(id: &str) -> bool {
    // KerberosName: without '@' any string is a simple name; with one it
    // must read ([^/@]*)(/([^/@]*))?@([^/@]*).
    let Some((principal, realm)) = id.split_once('@') else {
        return true;
    };
    let host_ok = match principal.split_once('/') {
        Some((_, host)) => !host.contains('/'),
        None => true,
    };
    host_ok && !realm.contains('@') && !realm.contains('/')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sasl_ids_are_kerberos_names() {
        assert!(is_valid_id("bob"));
        assert!(is_valid_id("bob@EXAMPLE.COM"));
        assert!(is_valid_id("zookeeper/host@EXAMPLE.COM"));
        assert!(!is_valid_id("a@b@c"));
        assert!(!is_valid_id("a/b/c@R"));
        assert!(is_valid_id("a/b/c"), "no realm: a simple name");
    }
}
