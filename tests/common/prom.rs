//! Scraping a Prometheus endpoint in tests: a plain HTTP GET and a strict
//! parser of the text format 0.0.4, plus our own rules: every family has
//! HELP and TYPE before its samples, its samples are together, summary
//! samples carry a quantile in 0..1 and `_sum`/`_count` none, no series twice.

use std::collections::{BTreeMap, HashSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

// together.

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
    pub kind: Option<Kind>,
    pub help: Option<String>,
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

/// GET http://127.0.0.1:port/metrics; panics on anything but a 200 of
/// the text format 0.0.4 holding a valid exposition.
pub fn scrape(port: u16) -> Exposition {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to the metrics port");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let req = format!("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: */*\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).expect("a UTF-8 answer");
    let (head, body) = raw.split_once("\r\n\r\n").expect("a complete head");
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    let content_type = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        .map(|(_, v)| v.trim());
    assert_eq!(
        content_type,
        Some("text/plain; version=0.0.4; charset=utf-8"),
        "{head}"
    );
    Exposition::parse(body).unwrap_or_else(|why| panic!("not a valid exposition: {why}\n{body}"))
}

/// Scrapes until `done` holds for an exposition, for at most `within`.
pub fn scrape_until(
    port: u16,
    what: &str,
    within: Duration,
    done: impl Fn(&Exposition) -> bool,
) -> Exposition {
    let start = std::time::Instant::now();
    loop {
        let e = scrape(port);
        if done(&e) {
            return e;
        }
        assert!(start.elapsed() < within, "metrics never showed {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn is_metric_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && c.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn is_label_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && c.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn parse_value(s: &str) -> Result<f64, String> {
    match s {
        "NaN" => Ok(f64::NAN),
        "+Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        _ if s.chars().all(|c| c.is_ascii_digit() || "+-.eE".contains(c)) => {
            s.parse().map_err(|_| format!("bad value {s:?}"))
        }
        _ => Err(format!("bad value {s:?}")),
    }
}

/// Checks escapes: only \\, \" (labels) and \n.
fn unescape(s: &str, quote_allowed: bool) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\\') => out.push('\\'),
            Some('n') => out.push('\n'),
            Some('"') if quote_allowed => out.push('"'),
            other => return Err(format!("bad escape \\{other:?} in {s:?}")),
        }
    }
    Ok(out)
}

/// Parses `{a="x",b="y"}` at the start of `s`; returns the labels and the rest.
fn parse_labels(s: &str) -> Result<(BTreeMap<String, String>, &str), String> {
    let mut labels = BTreeMap::new();
    let mut rest = s.strip_prefix('{').unwrap();
    loop {
        if let Some(r) = rest.strip_prefix('}') {
            return Ok((labels, r));
        }
        let eq = rest.find('=').ok_or("label without '='")?;
        let name = &rest[..eq];
        if !is_label_name(name) {
            return Err(format!("bad label name {name:?}"));
        }
        rest = rest[eq + 1..]
            .strip_prefix('"')
            .ok_or("label value not quoted")?;
        let mut end = None;
        let mut escaped = false;
        for (i, c) in rest.char_indices() {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => {
                    end = Some(i);
                    break;
                }
                (false, '\n') => return Err("newline in a label value".into()),
                _ => {}
            }
        }
        let end = end.ok_or("unterminated label value")?;
        let value = unescape(&rest[..end], true)?;
        if labels.insert(name.to_string(), value).is_some() {
            return Err(format!("label {name} twice"));
        }
        rest = &rest[end + 1..];
        if let Some(r) = rest.strip_prefix(',') {
            rest = r;
        } else if !rest.starts_with('}') {
            return Err(format!("expected ',' or '}}' at {rest:?}"));
        }
    }
}

impl Exposition {
    pub fn parse(text: &str) -> Result<Exposition, String> {
        if !text.ends_with('\n') {
            return Err("the last line has no newline".into());
        }
        let mut e = Exposition {
            families: BTreeMap::new(),
            samples: Vec::new(),
        };
        // Families whose samples are over: none may come back.
        let mut closed: HashSet<String> = HashSet::new();
        let mut current: Option<String> = None;
        let mut series: HashSet<(String, BTreeMap<String, String>)> = HashSet::new();
        for (n, line) in text.lines().enumerate() {
            let at = |why: String| format!("line {}: {why}: {line:?}", n + 1);
            if line.is_empty() {
                continue;
            }
            if let Some(comment) = line.strip_prefix('#') {
                let mut t = comment.trim_start().splitn(3, ' ');
                let (what, name, rest) = (t.next(), t.next(), t.next());
                if !matches!(what, Some("HELP") | Some("TYPE")) {
                    continue; // a plain comment
                }
                let name = name.ok_or_else(|| at("no metric name".into()))?;
                if !is_metric_name(name) {
                    return Err(at("bad metric name".into()));
                }
                if closed.contains(name) {
                    return Err(at("family comes back after others".into()));
                }
                if current.as_deref() != Some(name) {
                    if let Some(c) = current.replace(name.to_string()) {
                        closed.insert(c);
                    }
                }
                if e.samples.iter().any(|s| family_of(&e, &s.name) == name) {
                    return Err(at("HELP/TYPE after samples".into()));
                }
                let f = e.families.entry(name.to_string()).or_insert(Family {
                    kind: None,
                    help: None,
                });
                let rest = rest.unwrap_or_default();
                if what == Some("HELP") {
                    if f.help.replace(unescape(rest, false).map_err(at)?).is_some() {
                        return Err(at("HELP twice".into()));
                    }
                } else {
                    let kind = match rest {
                        "counter" => Kind::Counter,
                        "gauge" => Kind::Gauge,
                        "summary" => Kind::Summary,
                        "histogram" => Kind::Histogram,
                        "untyped" => Kind::Untyped,
                        _ => return Err(at("unknown type".into())),
                    };
                    if f.kind.replace(kind).is_some() {
                        return Err(at("TYPE twice".into()));
                    }
                }
                continue;
            }
            let name_end = line.find(['{', ' ']).ok_or_else(|| at("no value".into()))?;
            let name = &line[..name_end];
            if !is_metric_name(name) {
                return Err(at("bad metric name".into()));
            }
            let (labels, rest) = if line[name_end..].starts_with('{') {
                parse_labels(&line[name_end..]).map_err(at)?
            } else {
                (BTreeMap::new(), &line[name_end..])
            };
            let rest = rest
                .strip_prefix(' ')
                .ok_or_else(|| at("no space before the value".into()))?;
            let mut t = rest.split(' ');
            let value = parse_value(t.next().unwrap()).map_err(at)?;
            if let Some(ts) = t.next() {
                ts.parse::<i64>().map_err(|_| at("bad timestamp".into()))?;
            }
            if t.next().is_some() {
                return Err(at("trailing text".into()));
            }
            let family = family_of(&e, name).to_string();
            let f = e
                .families
                .get(&family)
                .ok_or_else(|| at("sample without HELP/TYPE".into()))?;
            if f.kind.is_none() || f.help.is_none() {
                return Err(at("family lacks HELP or TYPE".into()));
            }
            if current.as_deref() != Some(family.as_str()) {
                return Err(at("sample away from its family".into()));
            }
            if f.kind == Some(Kind::Summary) {
                let quantile = labels.get("quantile");
                if name == family {
                    let q = quantile.ok_or_else(|| at("summary sample without quantile".into()))?;
                    let q: f64 = parse_value(q).map_err(at)?;
                    if !(0.0..=1.0).contains(&q) {
                        return Err(at("quantile out of 0..1".into()));
                    }
                } else if quantile.is_some() {
                    return Err(at("quantile on _sum/_count".into()));
                }
            }
            if !series.insert((name.to_string(), labels.clone())) {
                return Err(at("duplicate series".into()));
            }
            e.samples.push(Sample {
                name: name.to_string(),
                labels,
                value,
            });
        }
        Ok(e)
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

    /// The sum of every sample `name`, whatever its labels.
    pub fn sum(&self, name: &str) -> f64 {
        self.samples
            .iter()
            .filter(|s| s.name == name)
            .map(|s| s.value)
            .sum()
    }

    pub fn kind(&self, family: &str) -> Kind {
        self.families
            .get(family)
            .and_then(|f| f.kind)
            .unwrap_or_else(|| panic!("no family {family} with a TYPE"))
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

/// The family a sample name belongs to: summaries and histograms own their
/// `_sum`, `_count` (and `_bucket`) series.
pub fn family_of<'a>(e: &Exposition, name: &'a str) -> &'a str {
    for suffix in ["_sum", "_count", "_bucket"] {
        if let Some(base) = name.strip_suffix(suffix) {
            if let Some(f) = e.families.get(base) {
                if matches!(f.kind, Some(Kind::Summary) | Some(Kind::Histogram)) {
                    return base;
                }
            }
        }
    }
    name
}
