//! Scraping a Prometheus endpoint in tests: a plain HTTP GET and a parser
//! of the text format 0.0.4 that checks what exporters must do (HELP and
//! TYPE before a family's samples, a family's samples together, summary
//! samples with a quantile, `_sum`/`_count` without one, no duplicate
//! series). A copy of the parser in tests/metrics.rs, kept there unchanged
//! so that file's tests stay as they were written.

use std::collections::{BTreeMap, HashSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Summary,
    Histogram,
    Untyped,
}

#[derive(Debug)]
pub struct Family {
    pub kind: Kind,
    pub help: String,
}

#[derive(Debug)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

#[derive(Debug)]
pub struct Exposition {
    pub families: BTreeMap<String, Family>,
    pub samples: Vec<Sample>,
}

/// GET http://127.0.0.1:port/metrics; panics on anything but a 200 with
/// a valid exposition.
pub fn scrape(port: u16) -> Exposition {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to the metrics port");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let req = format!("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).expect("a UTF-8 answer");
    let (head, body) = raw.split_once("\r\n\r\n").expect("a complete head");
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    Exposition::parse(body).unwrap_or_else(|why| panic!("bad exposition: {why}\n{body}"))
}

fn is_metric_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && c.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn parse_value(s: &str) -> Result<f64, String> {
    match s {
        "NaN" => Ok(f64::NAN),
        "+Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        _ => s.parse().map_err(|_| format!("bad value {s:?}")),
    }
}

/// `{a="x",b="y"}` (a trailing comma allowed, as the Java client writes);
/// label values here never hold escapes.
fn parse_labels(s: &str) -> Result<(BTreeMap<String, String>, &str), String> {
    let close = s.find('}').ok_or("unterminated labels")?;
    let mut labels = BTreeMap::new();
    for pair in s[1..close].split(',').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').ok_or("label without '='")?;
        let v = v
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .ok_or("label value not quoted")?;
        if labels.insert(k.to_string(), v.to_string()).is_some() {
            return Err(format!("label {k} twice"));
        }
    }
    Ok((labels, &s[close + 1..]))
}

impl Exposition {
    pub fn parse(text: &str) -> Result<Exposition, String> {
        if !text.ends_with('\n') {
            return Err("the last line has no newline".into());
        }
        let mut families: BTreeMap<String, (Option<Kind>, Option<String>)> = BTreeMap::new();
        let mut samples = Vec::new();
        let mut closed: HashSet<String> = HashSet::new();
        let mut current: Option<String> = None;
        let mut series = HashSet::new();
        for (n, line) in text.lines().enumerate() {
            let at = |why: &str| format!("line {}: {why}: {line:?}", n + 1);
            if line.is_empty() {
                continue;
            }
            if let Some(comment) = line.strip_prefix("# ") {
                let mut t = comment.splitn(3, ' ');
                let (what, name, rest) = (t.next(), t.next(), t.next().unwrap_or_default());
                if !matches!(what, Some("HELP") | Some("TYPE")) {
                    continue;
                }
                let name = name.filter(|n| is_metric_name(n)).ok_or(at("bad name"))?;
                if closed.contains(name) {
                    return Err(at("family comes back after others"));
                }
                if current.as_deref() != Some(name) {
                    if let Some(c) = current.replace(name.to_string()) {
                        closed.insert(c);
                    }
                }
                let f = families.entry(name.to_string()).or_default();
                if what == Some("HELP") {
                    if f.1.replace(rest.to_string()).is_some() {
                        return Err(at("HELP twice"));
                    }
                } else {
                    let kind = match rest {
                        "counter" => Kind::Counter,
                        "gauge" => Kind::Gauge,
                        "summary" => Kind::Summary,
                        "histogram" => Kind::Histogram,
                        "untyped" => Kind::Untyped,
                        _ => return Err(at("unknown type")),
                    };
                    if f.0.replace(kind).is_some() {
                        return Err(at("TYPE twice"));
                    }
                }
                continue;
            }
            let name_end = line.find(['{', ' ']).ok_or(at("no value"))?;
            let name = &line[..name_end];
            let (labels, rest) = if line[name_end..].starts_with('{') {
                parse_labels(&line[name_end..]).map_err(|e| at(&e))?
            } else {
                (BTreeMap::new(), &line[name_end..])
            };
            let value = rest
                .strip_prefix(' ')
                .ok_or(at("no space before the value"))?;
            let value = parse_value(value.split(' ').next().unwrap()).map_err(|e| at(&e))?;
            let family = ["_sum", "_count", "_bucket"]
                .iter()
                .find_map(|s| {
                    let base = name.strip_suffix(s)?;
                    let kind = families.get(base)?.0?;
                    matches!(kind, Kind::Summary | Kind::Histogram).then_some(base)
                })
                .unwrap_or(name);
            let (kind, help) = families.get(family).ok_or(at("sample without HELP/TYPE"))?;
            let kind = kind.ok_or(at("family without TYPE"))?;
            help.as_ref().ok_or(at("family without HELP"))?;
            if current.as_deref() != Some(family) {
                return Err(at("sample away from its family"));
            }
            if kind == Kind::Summary && (name == family) != labels.contains_key("quantile") {
                return Err(at("summary quantile label misplaced"));
            }
            if !series.insert((name.to_string(), labels.clone())) {
                return Err(at("duplicate series"));
            }
            samples.push(Sample {
                name: name.to_string(),
                labels,
                value,
            });
        }
        let families = families
            .into_iter()
            .map(|(name, (kind, help))| {
                let f = Family {
                    kind: kind.ok_or(format!("{name} has no TYPE"))?,
                    help: help.ok_or(format!("{name} has no HELP"))?,
                };
                Ok((name, f))
            })
            .collect::<Result<_, String>>()?;
        Ok(Exposition { families, samples })
    }

    /// The one sample `name` without labels.
    pub fn value(&self, name: &str) -> f64 {
        self.labelled(name, &[])
    }

    /// The one sample `name` with exactly `labels`.
    pub fn labelled(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let want: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.samples
            .iter()
            .find(|s| s.name == name && s.labels == want)
            .unwrap_or_else(|| panic!("no sample {name}{labels:?}"))
            .value
    }

    pub fn kind(&self, family: &str) -> Kind {
        self.families
            .get(family)
            .unwrap_or_else(|| panic!("no family {family}"))
            .kind
    }

    /// The quantile labels of a summary's samples, in the order printed.
    pub fn quantiles(&self, family: &str) -> Vec<String> {
        self.samples
            .iter()
            .filter(|s| s.name == family)
            .filter_map(|s| s.labels.get("quantile").cloned())
            .collect()
    }
}
