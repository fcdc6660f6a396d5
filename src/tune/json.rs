//! `--json` output, written by hand (the server has no JSON dependency):
//! strings escaped as RFC 8259 requires, numbers finite.

use std::fmt::Write as _;
use std::io::{self, Write};

use super::{Check, Context, Value};

/// `s` as a JSON string literal.
pub fn string(s: &str) -> String {
    crate::admin::json::string(s)
}

pub fn value(v: &Value) -> String {
    match v {
        Value::Int(i) => i.to_string(),
        Value::Num(f) if f.is_finite() => {
            let s = format!("{f:.3}");
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        }
        Value::Num(_) => "null".to_string(),
        Value::Text(t) => string(t),
    }
}

/// `{"name":...,"status":...,"found":...,"why":...,"fix":...,"values":{...}}`
pub fn check(c: &Check) -> String {
    let mut o = format!(
        "{{\"name\":{},\"title\":{},\"status\":{},\"found\":{},\"why\":{},\"fix\":{},\"values\":{{",
        string(c.name),
        string(c.title),
        string(c.status.as_str()),
        string(&c.found),
        string(&c.why),
        string(&c.fix)
    );
    for (i, (k, v)) in c.values.iter().enumerate() {
        if i > 0 {
            o.push(',');
        }
        let _ = write!(o, "{}:{}", string(k), value(v));
    }
    o.push_str("}}");
    o
}

pub fn write_checks(ctx: &Context, checks: &[Check], out: &mut dyn Write) -> io::Result<()> {
    let failed = checks
        .iter()
        .filter(|c| c.status == super::Status::Fail)
        .count();
    writeln!(out, "{{")?;
    writeln!(out, "  \"config\": {},", string(&ctx.config_source))?;
    writeln!(
        out,
        "  \"data_log_dir\": {},",
        string(&ctx.log_dir.display().to_string())
    )?;
    writeln!(out, "  \"shards\": {},", ctx.shards)?;
    writeln!(out, "  \"failed\": {failed},")?;
    writeln!(out, "  \"checks\": [")?;
    for (i, c) in checks.iter().enumerate() {
        let comma = if i + 1 < checks.len() { "," } else { "" };
        writeln!(out, "    {}{comma}", check(c))?;
    }
    writeln!(out, "  ]")?;
    writeln!(out, "}}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped() {
        assert_eq!(string("a\"b\\c\nd\u{1}"), "\"a\\\"b\\\\c\\nd\\u0001\"");
        assert_eq!(string("µs"), "\"µs\"");
    }

    #[test]
    fn numbers_are_plain() {
        assert_eq!(value(&Value::Num(12.5)), "12.5");
        assert_eq!(value(&Value::Num(3.0)), "3");
        assert_eq!(value(&Value::Num(f64::NAN)), "null");
        assert_eq!(value(&Value::Int(-4)), "-4");
    }
}
