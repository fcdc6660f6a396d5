//! Four-letter words (FourLetterCommands.java): a connection whose first four
//! bytes spell a known word gets a text answer and is closed.

use std::fmt::Write;

use super::stats::Totals;
use crate::config::Config;

pub const VERSION: &str = concat!("3.9.3-ringkeeper-", env!("CARGO_PKG_VERSION"));
pub const BUILD_DATE: &str = env!("RINGKEEPER_BUILD_DATE");

const KNOWN: [&str; 18] = [
    "conf", "cons", "crst", "dirs", "dump", "envi", "gtmk", "ruok", "stmk", "srvr", "srst", "stat",
    "wchc", "wchp", "wchs", "mntr", "isro", "hash",
];

/// Telnet's "interrupt process" sequence, which ZooKeeper also treats as a word.
const TELNET_CLOSE: [u8; 4] = [0xff, 0xf4, 0xff, 0xfd];

/// The word the first four bytes of a connection spell, if any.
pub fn word_of(first: [u8; 4]) -> Option<&'static str> {
    if first == TELNET_CLOSE {
        return Some("telnet close");
    }
    KNOWN.iter().copied().find(|w| w.as_bytes() == first)
}

pub fn full_version() -> String {
    format!("{VERSION}, built on {BUILD_DATE}")
}

/// One client line of `stat`: address, queued, received, sent.
pub struct ClientLine {
    pub addr: String,
    pub queued: u64,
    pub received: u64,
    pub sent: u64,
}

pub struct View<'a> {
    pub config: &'a Config,
    pub totals: Totals,
    pub clients: Vec<ClientLine>,
}

/// The answer to `word`, or None for words that close without an answer.
/// `reset` is called for srst.
pub fn answer(word: &str, view: &View, reset: &dyn Fn()) -> Option<String> {
    if word == "telnet close" {
        return None;
    }
    if !view.config.four_letter_whitelist.allows(word) {
        return Some(format!(
            "{word} is not executed because it is not in the whitelist.\n"
        ));
    }
    let mut out = String::new();
    match word {
        "ruok" => out.push_str("imok"),
        "isro" => out.push_str("rw"),
        "srvr" | "stat" => stat(&mut out, view, word == "stat"),
        "envi" => envi(&mut out),
        "srst" => {
            reset();
            out.push_str("Server stats reset.\n");
        }
        "wchs" => {
            let _ = writeln!(
                out,
                "{} connections watching {} paths\nTotal watches:{}",
                view.totals.connections, 0, view.totals.watch_count
            );
        }
        _ => {
            // Known to ZooKeeper but not answered here yet: say so plainly.
            let _ = writeln!(out, "{word} is not supported by ringkeeper yet.");
        }
    }
    Some(out)
}

fn stat(out: &mut String, view: &View, with_clients: bool) {
    let t = &view.totals;
    let _ = writeln!(out, "Zookeeper version: {}", full_version());
    if with_clients {
        out.push_str("Clients:\n");
        for c in &view.clients {
            let _ = writeln!(
                out,
                " /{}[1](queued={},recved={},sent={})",
                c.addr, c.queued, c.received, c.sent
            );
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "Latency min/avg/max: {}/{}/{}",
        t.latency_min_ms,
        java_double(t.latency_avg_ms),
        t.latency_max_ms
    );
    let _ = writeln!(out, "Received: {}", t.packets_received);
    let _ = writeln!(out, "Sent: {}", t.packets_sent);
    let _ = writeln!(out, "Connections: {}", t.connections);
    let _ = writeln!(out, "Outstanding: {}", t.outstanding);
    let _ = writeln!(out, "Zxid: 0x{:x}", t.last_zxid);
    out.push_str("Mode: standalone\n");
    let _ = writeln!(out, "Node count: {}", t.node_count);
}

fn envi(out: &mut String) {
    out.push_str("Environment:\n");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "<NA>".into());
    let env = |k: &str| std::env::var(k).unwrap_or_else(|_| "<NA>".into());
    let os_version = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|_| "<NA>".into());
    let cwd = std::env::current_dir()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "<NA>".into());
    let entries = [
        ("zookeeper.version", full_version()),
        ("host.name", host),
        ("os.name", "Linux".to_string()),
        ("os.arch", std::env::consts::ARCH.to_string()),
        ("os.version", os_version),
        ("user.name", env("USER")),
        ("user.home", env("HOME")),
        ("user.dir", cwd),
    ];
    for (k, v) in entries {
        let _ = writeln!(out, "{k}={v}");
    }
}

/// Java's Double.toString for the small values latency averages take:
/// always at least one decimal ("0.0", "1.5", "0.482").
pub fn java_double(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_recognised() {
        assert_eq!(word_of(*b"ruok"), Some("ruok"));
        assert_eq!(word_of(*b"srvr"), Some("srvr"));
        assert_eq!(word_of([0, 0, 0, 45]), None);
        assert_eq!(word_of(TELNET_CLOSE), Some("telnet close"));
    }

    #[test]
    fn doubles_print_like_java() {
        assert_eq!(java_double(0.0), "0.0");
        assert_eq!(java_double(0.482), "0.482");
        assert_eq!(java_double(12.0), "12.0");
    }

    #[test]
    fn srvr_has_zookeepers_nine_lines() {
        let config = Config::embedded_default();
        let view = View {
            config: &config,
            totals: Totals {
                last_zxid: 0x1909,
                node_count: 5,
                ..Default::default()
            },
            clients: vec![],
        };
        let out = answer("srvr", &view, &|| {}).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 9);
        assert!(lines[0].starts_with("Zookeeper version: 3.9.3-ringkeeper-"));
        assert!(lines[0].ends_with(" UTC"));
        assert_eq!(lines[1], "Latency min/avg/max: 0/0.0/0");
        assert_eq!(lines[6], "Zxid: 0x1909");
        assert_eq!(lines[7], "Mode: standalone");
        assert_eq!(lines[8], "Node count: 5");
    }
}
