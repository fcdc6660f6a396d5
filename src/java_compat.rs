//! Java hashing, where Apache ZooKeeper's observable orders come from a
//! Java hash table's iteration order (children lists, a connection's auth
//! ids). Reproducing the hash reproduces the order clients see.

/// java.lang.String.hashCode (over UTF-16 code units).
pub fn string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, u| h.wrapping_mul(31).wrapping_add(u as i32))
}

/// HashMap.hash / ConcurrentHashMap.spread (without the sign mask, which
/// does not change the low bits a table index uses).
pub fn spread(h: i32) -> u32 {
    let h = h as u32;
    h ^ (h >> 16)
}

/// The hashCode jute generates for org.apache.zookeeper.data.Id.
pub fn id_hash(scheme: &str, id: &str) -> i32 {
    let mut result = 17i32;
    result = result.wrapping_mul(37).wrapping_add(string_hash(scheme));
    result.wrapping_mul(37).wrapping_add(string_hash(id))
}

/// `s.split(String.valueOf(sep)).length` in Java: trailing empty strings
/// are dropped (and an all-empty result has length 0, or 1 for "").
pub fn split_len(s: &str, sep: char) -> usize {
    if s.is_empty() {
        return 1;
    }
    let parts: Vec<&str> = s.split(sep).collect();
    let trailing_empty = parts.iter().rev().take_while(|p| p.is_empty()).count();
    parts.len() - trailing_empty
}

/// Integer.parseInt: an optional sign, then decimal digits, in i32 range.
pub fn parse_int(s: &str) -> Option<i32> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i64>().ok().and_then(|v| i32::try_from(v).ok())
}

/// `s.split(String.valueOf(sep))` in Java: a leading empty string is kept,
/// trailing empty strings are dropped (and "" splits into [""]).
pub fn split(s: &str, sep: char) -> Vec<&str> {
    if s.is_empty() {
        return vec![s];
    }
    let mut parts: Vec<&str> = s.split(sep).collect();
    while parts.last().is_some_and(|p| p.is_empty()) {
        parts.pop();
    }
    parts
}

/// Long.parseLong: an optional sign, then decimal digits, in i64 range.
pub fn parse_long(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i64>().ok()
}

/// Orders a connection's auth ids as ServerCnxn's authInfo set (a
/// ConcurrentHashMap of 16 buckets while it holds few ids) iterates them:
/// by bucket, then by insertion.
pub fn auth_info_order(ids: &mut [(String, String)]) {
    let mut capacity = 16usize;
    while ids.len() * 4 > capacity * 3 {
        capacity *= 2;
    }
    let mask = capacity as u32 - 1;
    // A stable sort keeps insertion order within a bucket.
    ids.sort_by_key(|(s, i)| spread(id_hash(s, i)) & mask);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_and_parse_like_java() {
        assert_eq!(split_len("user:hash", ':'), 2);
        assert_eq!(split_len("user:", ':'), 1);
        assert_eq!(split_len(":", ':'), 0);
        assert_eq!(split_len("user:hash:", ':'), 2);
        assert_eq!(split_len(":a:", ':'), 2);
        assert_eq!(parse_int("010"), Some(10));
        assert_eq!(parse_int("+1"), Some(1));
        assert_eq!(parse_int("-0"), Some(0));
        assert_eq!(parse_int("1a"), None);
        assert_eq!(parse_int(""), None);
        assert_eq!(split("", '='), vec![""]);
        assert_eq!(split("=", '='), Vec::<&str>::new());
        assert_eq!(split("=5", '='), vec!["", "5"]);
        assert_eq!(split("a==", '='), vec!["a"]);
        assert_eq!(split("a==1", '='), vec!["a", "", "1"]);
        assert_eq!(parse_long("-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_long("9223372036854775808"), None);
        assert_eq!(parse_long("+7"), Some(7));
        assert_eq!(parse_long("-"), None);
        assert_eq!(parse_long(" 1"), None);
    }

    #[test]
    fn string_hash_matches_java() {
        assert_eq!(string_hash(""), 0);
        assert_eq!(string_hash("a"), 97);
        // "hello".hashCode() == 99162322
        assert_eq!(string_hash("hello"), 99162322);
    }

    #[test]
    fn auth_ids_order_like_zookeeper() {
        // Observed from Apache ZooKeeper 3.8.0's whoAmI after digest auth.
        let mut ids = vec![
            ("ip".to_string(), "127.0.0.1".to_string()),
            (
                "digest".to_string(),
                "alice:aYXlLOpEooaV1cRAvUL1fp9Qt7E=".to_string(),
            ),
        ];
        auth_info_order(&mut ids);
        assert_eq!(ids[0].0, "digest");
    }
}
