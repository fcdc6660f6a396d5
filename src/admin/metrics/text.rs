//! The Prometheus text exposition format, version 0.0.4: `# HELP` and
//! `# TYPE` once per family, then its samples, each family's samples
//! together.

use std::fmt::Write;

/// What `# TYPE` says of a family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Summary,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Summary => "summary",
        }
    }
}

/// A sample's value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    Int(u64),
    Float(f64),
}

impl From<u64> for Value {
    fn from(v: u64) -> Value {
        Value::Int(v)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Float(v)
    }
}

/// Builds one exposition.
#[derive(Default)]
pub struct Exposition {
    out: String,
    /// The family being written, whose samples must share its name.
    family: Option<(String, Kind)>,
    #[cfg(debug_assertions)]
    seen: std::collections::HashSet<String>,
}

impl Exposition {
    /// Starts a family: its HELP and TYPE lines.
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) {
        debug_assert!(is_metric_name(name), "bad metric name {name:?}");
        #[cfg(debug_assertions)]
        assert!(self.seen.insert(name.to_string()), "family {name} twice");
        let _ = writeln!(self.out, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.out, "# TYPE {name} {}", kind.as_str());
        self.family = Some((name.to_string(), kind));
    }

    /// One sample of the current family; `suffix` is "" or, for a summary,
    /// "_sum" / "_count".
    pub fn sample(&mut self, suffix: &str, labels: &[(&str, &str)], value: impl Into<Value>) {
        let (name, kind) = self.family.as_ref().expect("a family was started");
        debug_assert!(
            suffix.is_empty() || (*kind == Kind::Summary && ["_sum", "_count"].contains(&suffix)),
            "suffix {suffix} on {name}"
        );
        self.out.push_str(name);
        self.out.push_str(suffix);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (label, value)) in labels.iter().enumerate() {
                debug_assert!(is_label_name(label), "bad label name {label:?}");
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{label}=\"{}\"", escape_label(value));
            }
            self.out.push('}');
        }
        self.out.push(' ');
        push_value(&mut self.out, value.into());
        self.out.push('\n');
    }

    pub fn finish(self) -> String {
        self.out
    }
}

fn push_value(out: &mut String, v: Value) {
    match v {
        Value::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Value::Float(f) if f.is_nan() => out.push_str("NaN"),
        Value::Float(f) if f == f64::INFINITY => out.push_str("+Inf"),
        Value::Float(f) if f == f64::NEG_INFINITY => out.push_str("-Inf"),
        // Rust prints finite floats without an exponent: Go's ParseFloat,
        // which Prometheus uses, reads that.
        Value::Float(f) => {
            let _ = write!(out, "{f}");
        }
    }
}

/// HELP text: backslash and newline escaped.
fn escape_help(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

/// Label values: backslash, double quote and newline escaped.
fn escape_label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn is_metric_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn is_label_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_samples_and_escapes() {
        let mut e = Exposition::default();
        e.family("a_total", Kind::Counter, "Things\\done\nso far");
        e.sample("", &[], 3u64);
        e.family("lat_us", Kind::Summary, "Latency");
        e.sample("", &[("op", "x\"y\\z\n"), ("quantile", "0.5")], 1.5);
        e.sample("", &[("op", "x"), ("quantile", "0.9")], f64::NAN);
        e.sample("_sum", &[("op", "x")], 7u64);
        e.sample("_count", &[("op", "x")], f64::INFINITY);
        assert_eq!(
            e.finish(),
            "# HELP a_total Things\\\\done\\nso far\n\
             # TYPE a_total counter\n\
             a_total 3\n\
             # HELP lat_us Latency\n\
             # TYPE lat_us summary\n\
             lat_us{op=\"x\\\"y\\\\z\\n\",quantile=\"0.5\"} 1.5\n\
             lat_us{op=\"x\",quantile=\"0.9\"} NaN\n\
             lat_us_sum{op=\"x\"} 7\n\
             lat_us_count{op=\"x\"} +Inf\n"
        );
    }

    #[test]
    fn names() {
        assert!(is_metric_name("zk:a_b1"));
        assert!(!is_metric_name("1a") && !is_metric_name("") && !is_metric_name("a-b"));
        assert!(is_label_name("_x1") && !is_label_name("a:b"));
    }
}
