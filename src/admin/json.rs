//! JSON as ZooKeeper's AdminServer writes it: Jackson's ObjectMapper with
//! INDENT_OUTPUT (DefaultPrettyPrinter). Objects put each entry on a line
//! of its own, indented two spaces per enclosing object, `"key" : value`;
//! arrays stay on one line, `[ a, b ]` (an object inside opens on that
//! line); empty ones are `{ }` and `[ ]`; no line end after the last brace.
//! Keys keep the order they were added in (a LinkedHashMap in ZooKeeper).

/// A value. Doubles are kept as the text Java's Double.toString gives them
/// (see `javafmt::double`), so that they print exactly as ZooKeeper's.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Int(i64),
    /// A Java double, as Double.toString prints it ("0.0", "3.1667").
    Double(String),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    pub fn str(s: impl Into<String>) -> Json {
        Json::Str(s.into())
    }

    pub fn obj() -> Json {
        Json::Obj(Vec::new())
    }

    /// Adds or replaces `key` (a replaced key keeps its place, as in a
    /// LinkedHashMap). Does nothing on a value that is not an object.
    pub fn put(&mut self, key: impl Into<String>, value: Json) {
        if let Json::Obj(entries) = self {
            let key = key.into();
            match entries.iter_mut().find(|(k, _)| *k == key) {
                Some(slot) => slot.1 = value,
                None => entries.push((key, value)),
            }
        }
    }

    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Obj(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The pretty-printed text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.write(&mut out, 0);
        out
    }

    fn write(&self, out: &mut String, depth: usize) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Int(n) => out.push_str(&n.to_string()),
            Json::Double(d) => out.push_str(d),
            Json::Str(s) => quote(out, s),
            Json::Arr(items) if items.is_empty() => out.push_str("[ ]"),
            Json::Arr(items) => {
                // Arrays are inline: they add no indentation level.
                out.push_str("[ ");
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    item.write(out, depth);
                }
                out.push_str(" ]");
            }
            Json::Obj(entries) if entries.is_empty() => out.push_str("{ }"),
            Json::Obj(entries) => {
                out.push('{');
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push('\n');
                    indent(out, depth + 1);
                    quote(out, k);
                    out.push_str(" : ");
                    v.write(out, depth + 1);
                }
                out.push('\n');
                indent(out, depth);
                out.push('}');
            }
        }
    }
}

fn indent(out: &mut String, depth: usize) {
    for _ in 0..depth {
        out.push_str("  ");
    }
}

/// `s` as a JSON string literal, escaped as [`quote`] does: the one JSON
/// string escaping of the crate (the AdminServer, `tune --json`, the dumps).
pub fn string(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    quote(&mut o, s);
    o
}

/// Jackson's string escaping: `"` and `\`, the short escapes for
/// control characters that have one, `\u00XX` for the other ones below
/// 0x20; everything else as is (UTF-8).
pub fn quote(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_as_jackson_does() {
        let mut conn = Json::obj();
        conn.put("remote_socket_address", Json::str("127.0.0.1:49618"));
        conn.put("interest_ops", Json::Int(1));
        let mut top = Json::obj();
        top.put("connections", Json::Arr(vec![conn]));
        top.put("secure_connections", Json::Arr(vec![]));
        top.put(
            "paths",
            Json::Arr(vec![Json::str("/a"), Json::str("/nope")]),
        );
        top.put("map", Json::obj());
        top.put("avg", Json::Double("0.0".into()));
        top.put("command", Json::str("stats"));
        top.put("error", Json::Null);
        assert_eq!(
            top.render(),
            "{\n  \"connections\" : [ {\n    \"remote_socket_address\" : \"127.0.0.1:49618\",\n    \
             \"interest_ops\" : 1\n  } ],\n  \"secure_connections\" : [ ],\n  \"paths\" : [ \"/a\", \
             \"/nope\" ],\n  \"map\" : { },\n  \"avg\" : 0.0,\n  \"command\" : \"stats\",\n  \
             \"error\" : null\n}"
        );
    }

    #[test]
    fn escapes_as_jackson_does() {
        assert_eq!(
            Json::str("a\"b\\c\nd\te\u{1}/é").render(),
            "\"a\\\"b\\\\c\\nd\\te\\u0001/é\""
        );
    }

    #[test]
    fn a_replaced_key_keeps_its_place() {
        let mut o = Json::obj();
        o.put("error", Json::str("x"));
        o.put("command", Json::str("leader"));
        o.put("error", Json::Null);
        assert_eq!(
            o.render(),
            "{\n  \"error\" : null,\n  \"command\" : \"leader\"\n}"
        );
    }
}
