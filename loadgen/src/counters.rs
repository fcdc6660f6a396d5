//! The honesty check: the servers' own request counters (srvr "Received:")
//! against the frames this process sent. Apache ZooKeeper counts every
//! frame it reads, ConnectRequests and four-letter words included
//! (ServerCnxn.packetReceived); a server that does not count ConnectRequests
//! will be short by the number of connects, which the check reports.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use serde::Serialize;

use crate::session::{CONNECTS_SENT, FRAMES_SENT};

/// Sends a four-letter word and returns the whole answer. In plaintext,
/// also for a `tcp+tls://` target: measure TLS on a port that takes both
/// (client.portUnification).
pub fn four_letter(addr: &str, word: &str) -> std::io::Result<String> {
    let plain = addr
        .strip_prefix("tcp+tls://")
        .or_else(|| addr.strip_prefix("tcp://"))
        .unwrap_or(addr);
    let mut s = TcpStream::connect(plain)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.set_write_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(word.as_bytes())?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

/// srvr's "Received:" of one server.
pub fn received(addr: &str) -> Option<u64> {
    let text = four_letter(addr, "srvr").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("Received:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Sum of srvr "Received:" over an ensemble; None if any server did not say.
pub fn ensemble_received(servers: &[String]) -> Option<u64> {
    servers.iter().map(|s| received(s)).sum()
}

/// Counts taken before a run.
pub struct CounterSnapshot {
    server: Option<u64>,
    frames: u64,
    connects: u64,
}

/// What the check found over one run.
#[derive(Clone, Debug, Serialize)]
pub struct CounterCheck {
    /// Request frames the loadgen sent (ConnectRequests included).
    pub client_sent: u64,
    /// ConnectRequests among them.
    pub client_connects: u64,
    /// The servers' srvr Received delta (None: srvr unavailable or reset).
    pub server_received: Option<u64>,
    /// (server - client) / client, percent.
    pub diff_pct: Option<f64>,
    /// Why the servers' delta is not comparable, when it is not.
    pub void_reason: Option<String>,
}

impl CounterCheck {
    /// Drops the servers' side: their counters cannot be compared.
    pub fn void(mut self, reason: &str) -> CounterCheck {
        self.server_received = None;
        self.diff_pct = None;
        self.void_reason = Some(reason.to_string());
        self
    }

    /// Within 1%.
    pub fn agrees(&self) -> Option<bool> {
        self.diff_pct.map(|d| d.abs() <= 1.0)
    }

    pub fn describe(&self) -> String {
        match (self.server_received, self.diff_pct) {
            (Some(srv), Some(d)) => format!(
                "sent {} requests ({} connects), servers counted {} ({:+.3}%){}",
                self.client_sent,
                self.client_connects,
                srv,
                d,
                if d.abs() <= 1.0 { "" } else { "  DISAGREE" }
            ),
            _ => format!(
                "sent {} requests ({} connects), servers' counters not compared: {}",
                self.client_sent,
                self.client_connects,
                self.void_reason
                    .as_deref()
                    .unwrap_or("srvr unavailable, or reset by a restart")
            ),
        }
    }
}

impl CounterSnapshot {
    pub fn take(servers: &[String]) -> CounterSnapshot {
        let server = ensemble_received(servers);
        CounterSnapshot {
            server,
            frames: FRAMES_SENT.load(Relaxed),
            connects: CONNECTS_SENT.load(Relaxed),
        }
    }

    pub fn finish(&self, servers: &[String]) -> CounterCheck {
        let after = ensemble_received(servers);
        let client_sent = FRAMES_SENT.load(Relaxed) - self.frames;
        let client_connects = CONNECTS_SENT.load(Relaxed) - self.connects;
        // ZooKeeper counts four-letter words too: the closing srvr probe
        // (one per server) is inside its delta; ringkeeper does not count it.
        let server_received = match (self.server, after) {
            (Some(a), Some(b)) if b >= a => Some(b - a),
            _ => None,
        };
        let diff_pct = server_received
            .map(|srv| (srv as f64 - client_sent as f64) * 100.0 / (client_sent.max(1) as f64));
        CounterCheck {
            client_sent,
            client_connects,
            server_received,
            diff_pct,
            void_reason: None,
        }
    }
}
