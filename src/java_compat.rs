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

/// Adds `id` to a connection's auth ids, kept in the order ServerCnxn's
/// authInfo (a set backed by a ConcurrentHashMap) iterates them: by bucket
/// (spread hash & (capacity - 1)), each bucket in chain order. An id is
/// appended to its bucket's chain; the table starts with 16 buckets and
/// doubles when it comes to hold 3/4 of its capacity, and a doubling
/// reorders chains as ConcurrentHashMap.transfer does. A duplicate is
/// ignored (a set).
pub fn auth_info_insert(ids: &mut Vec<(String, String)>, id: (String, String)) {
    if ids.contains(&id) {
        return;
    }
    let capacity = chm_capacity(ids.len());
    let bucket = |e: &(String, String)| chm_hash(e) & (capacity - 1);
    let b = bucket(&id);
    let at = ids
        .iter()
        .rposition(|e| bucket(e) <= b)
        .map_or(0, |i| i + 1);
    ids.insert(at, id);
    if ids.len() * 4 >= capacity as usize * 3 {
        chm_transfer(ids, capacity);
    }
}

fn chm_hash(id: &(String, String)) -> u32 {
    spread(id_hash(&id.0, &id.1))
}

/// The table size of a ConcurrentHashMap that grew to hold `n` entries.
fn chm_capacity(n: usize) -> u32 {
    let mut capacity = 16u32;
    while n * 4 >= capacity as usize * 3 {
        capacity *= 2;
    }
    capacity
}

/// ConcurrentHashMap.transfer from `n` to `2n` buckets: each chain splits
/// by hash & n; its last run of nodes going the same way keeps its order,
/// the nodes before it are pushed in front of their new chain.
fn chm_transfer(ids: &mut Vec<(String, String)>, n: u32) {
    let mut table: Vec<std::collections::VecDeque<(String, String)>> =
        (0..2 * n).map(|_| Default::default()).collect();
    let mut i = 0;
    while i < ids.len() {
        let b = chm_hash(&ids[i]) & (n - 1);
        let len = ids[i..]
            .iter()
            .take_while(|e| chm_hash(e) & (n - 1) == b)
            .count();
        let chain = &ids[i..i + len];
        let side = |e: &(String, String)| chm_hash(e) & n != 0;
        let mut last_run = 0;
        for (k, e) in chain.iter().enumerate().skip(1) {
            if side(e) != side(&chain[last_run]) {
                last_run = k;
            }
        }
        let run_side = side(&chain[last_run]);
        let index = |high: bool| (b + if high { n } else { 0 }) as usize;
        table[index(run_side)].extend(chain[last_run..].iter().cloned());
        for e in &chain[..last_run] {
            table[index(side(e))].push_front(e.clone());
        }
        i += len;
    }
    *ids = table.into_iter().flatten().collect();
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
        let mut ids = vec![("ip".to_string(), "127.0.0.1".to_string())];
        let alice = "alice:aYXlLOpEooaV1cRAvUL1fp9Qt7E=".to_string();
        auth_info_insert(&mut ids, ("digest".to_string(), alice.clone()));
        auth_info_insert(&mut ids, ("digest".to_string(), alice));
        assert_eq!(ids.len(), 2);
        assert_eq!(ids[0].0, "digest");
    }

    #[test]
    fn auth_ids_keep_every_id_across_table_growth() {
        let mut ids = vec![("ip".to_string(), "127.0.0.1".to_string())];
        for i in 0..40 {
            auth_info_insert(&mut ids, ("digest".to_string(), format!("u{i}:x")));
            let capacity = chm_capacity(ids.len());
            let buckets: Vec<u32> = ids.iter().map(|e| chm_hash(e) & (capacity - 1)).collect();
            assert!(buckets.windows(2).all(|w| w[0] <= w[1]), "{buckets:?}");
        }
        assert_eq!(ids.len(), 41);
    }
}
