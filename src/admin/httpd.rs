//! A deliberately tiny HTTP/1.1 server, shared by the metrics endpoint
//! (`metrics::http`) and the AdminServer (`admin_server`).
//!
//! One request per connection (`Connection: close`). A request head that
//! is not HTTP/1.x is 400 (505 for another HTTP version), one longer than
//! [`HEAD_BYTES_MAX`] is 431; what a well-formed request gets is the
//! endpoint's business (its handler). Bounds, so that no client can hold
//! the shard's resources: at most `Limits::conns_max` connections at once
//! (more are closed at accept), `Limits::conn_time_max` for a whole
//! exchange (a client that sends or reads too slowly is cut off), and a
//! bounded lingering close. The server runs as tasks on a shard's
//! executor: a slow client costs a parked task and a socket, never a
//! blocked thread. A request body is never read (GET, HEAD and the error
//! answers need none); what a client sends after the head is drained by
//! the lingering close, up to a bound.

use std::cell::Cell;
use std::future::Future;
use std::net::Shutdown;
use std::rc::Rc;
use std::time::Duration;

use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::{TcpListener, TcpStream};

/// Largest request head (request line and headers) read: Jetty's default
/// (requestHeaderSize, 8 KiB), past which it answers 431 too.
pub const HEAD_BYTES_MAX: usize = 8 * 1024;
/// After answering, what is still read (and dropped) before closing, so
/// that unread request bytes do not turn the close into a reset that could
/// destroy the answer before the client reads it.
const LINGER_BYTES_MAX: usize = 64 * 1024;
const LINGER_TIME: Duration = Duration::from_secs(1);

/// How much of the shard one endpoint may use.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// For log lines ("metrics endpoint", "AdminServer").
    pub name: &'static str,
    /// Connections served at once; more are closed at accept.
    pub conns_max: usize,
    /// Longest one connection lives, from accept to close.
    pub conn_time_max: Duration,
}

/// A well-formed request head.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// The target's path, still percent-encoded, without the query.
    pub path: String,
    /// What follows the first `?`, if anything did.
    pub query: Option<String>,
}

/// An answer; every one closes the connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
    /// HEAD: the headers (Content-Length included) without the body.
    pub head_only: bool,
    /// Other headers (`Allow`, `Cache-Control`).
    pub headers: Vec<(&'static str, String)>,
}

impl Response {
    pub fn new(status: u16, content_type: Option<&str>, body: impl Into<Vec<u8>>) -> Response {
        Response {
            status,
            content_type: content_type.map(str::to_string),
            body: body.into(),
            head_only: false,
            headers: Vec::new(),
        }
    }

    /// The short text answer of an error status.
    pub fn status_text(status: u16) -> Response {
        let body = format!("{status} {}\n", reason(status));
        Response::new(status, Some("text/plain; charset=utf-8"), body)
    }

    /// The bytes on the wire.
    pub fn encode(&self) -> Vec<u8> {
        let mut head = format!("HTTP/1.1 {} {}\r\n", self.status, reason(self.status));
        if let Some(ct) = &self.content_type {
            head.push_str(&format!("Content-Type: {ct}\r\n"));
        }
        head.push_str(&format!("Content-Length: {}\r\n", self.body.len()));
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("Connection: close\r\n\r\n");
        let mut out = head.into_bytes();
        if !self.head_only {
            out.extend_from_slice(&self.body);
        }
        out
    }
}

/// Serves `listener` until the executor stops; `handler` answers each
/// well-formed request.
pub async fn serve<F, Fut>(listener: TcpListener, limits: Limits, handler: F)
where
    F: Fn(Request) -> Fut + 'static,
    Fut: Future<Output = Response> + 'static,
{
    let handler = Rc::new(handler);
    let active = Rc::new(Cell::new(0usize));
    loop {
        let stream = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("{}: accept failed: {e}", limits.name);
                glommio::timer::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if active.get() >= limits.conns_max {
            tracing::debug!(
                "{}: {} connections open, closing a new one",
                limits.name,
                limits.conns_max
            );
            continue;
        }
        let slot = Slot::take(&active);
        let handler = handler.clone();
        glommio::spawn_local(async move {
            let exchange = exchange(stream, &*handler);
            let deadline = async { glommio::timer::sleep(limits.conn_time_max).await };
            futures_lite::future::or(exchange, deadline).await;
            drop(slot);
        })
        .detach();
    }
}

/// A place among the `conns_max` connections, given back when dropped.
struct Slot(Rc<Cell<usize>>);

impl Slot {
    fn take(active: &Rc<Cell<usize>>) -> Slot {
        active.set(active.get() + 1);
        Slot(active.clone())
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

async fn exchange<F, Fut>(mut stream: TcpStream, handler: &F)
where
    F: Fn(Request) -> Fut,
    Fut: Future<Output = Response>,
{
    let answer = match read_head(&mut stream).await {
        Ok(Some(head)) => match parse_head(&head) {
            Ok(request) => handler(request).await,
            Err(status) => Response::status_text(status),
        },
        Ok(None) => return,
        Err(status) => Response::status_text(status),
    };
    let bytes = answer.encode();
    if stream.write_all(&bytes).await.is_err() || stream.flush().await.is_err() {
        return;
    }
    linger(stream).await;
}

/// Reads up to the end of the request head. Ok(None): the client closed
/// without sending anything; Err: the status to answer.
async fn read_head(stream: &mut TcpStream) -> Result<Option<Vec<u8>>, u16> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream.read(&mut chunk).await.map_err(|_| 400u16)?;
        if n == 0 {
            return if buf.is_empty() { Ok(None) } else { Err(400) };
        }
        // The end may straddle the chunk boundary: look a little back.
        let from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = head_end(&buf, from) {
            // The bound holds however the head arrived (its end may come
            // in the read that crosses it).
            if end > HEAD_BYTES_MAX {
                return Err(431);
            }
            buf.truncate(end);
            return Ok(Some(buf));
        }
        if buf.len() > HEAD_BYTES_MAX {
            return Err(431);
        }
    }
}

/// The length of the head through its blank line (CRLF or bare LF lines,
/// as RFC 9112 allows recipients to accept), searching from `from`.
pub fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    (from..buf.len()).find_map(|i| {
        if buf[i] != b'\n' {
            return None;
        }
        match &buf[i + 1..] {
            [b'\n', ..] => Some(i + 2),
            [b'\r', b'\n', ..] => Some(i + 3),
            _ => None,
        }
    })
}

/// Checks a complete request head; Err is the status to answer.
pub fn parse_head(head: &[u8]) -> Result<Request, u16> {
    let Ok(text) = std::str::from_utf8(head) else {
        return Err(400);
    };
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let mut parts = lines.next().unwrap_or_default().split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(400);
    };
    if method.is_empty() || !method.bytes().all(is_tchar) {
        return Err(400);
    }
    let http_1_1 = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        v if is_http_version(v) => return Err(505),
        _ => return Err(400),
    };
    let mut hosts = 0;
    for line in lines.take_while(|l| !l.is_empty()) {
        // No whitespace before the colon, no folded continuation lines.
        let Some((name, value)) = line.split_once(':') else {
            return Err(400);
        };
        if name.is_empty() || !name.bytes().all(is_tchar) || value.bytes().any(is_bad_value_byte) {
            return Err(400);
        }
        if name.eq_ignore_ascii_case("host") {
            hosts += 1;
        }
    }
    // RFC 9112 §3.2: exactly one Host in HTTP/1.1, at most one in 1.0.
    if hosts > 1 || (http_1_1 && hosts == 0) {
        return Err(400);
    }
    if !target.starts_with('/') {
        return Err(400);
    }
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, Some(q.to_string())),
        None => (target, None),
    };
    Ok(Request {
        method: method.to_string(),
        path: path.to_string(),
        query,
    })
}

/// Percent-decodes a path segment or query part (`plus_space`: `+` is a
/// space, as in a query). None when an escape is malformed or the bytes
/// are not UTF-8.
pub fn percent_decode(s: &str, plus_space: bool) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3)?;
                let hex = std::str::from_utf8(hex).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' if plus_space => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// RFC 9110 token characters (methods, header names).
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn is_bad_value_byte(b: u8) -> bool {
    (b < 0x20 && b != b'\t') || b == 0x7f
}

fn is_http_version(v: &str) -> bool {
    let Some(num) = v.strip_prefix("HTTP/") else {
        return false;
    };
    let mut it = num.split('.');
    let digit =
        |s: Option<&str>| s.is_some_and(|s| s.len() == 1 && s.as_bytes()[0].is_ascii_digit());
    let ok = digit(it.next());
    ok && (num.len() == 1 || (digit(it.next()) && it.next().is_none()))
}

pub fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        500 => "Server Error",
        501 => "Not Implemented",
        505 => "HTTP Version Not Supported",
        _ => "Error",
    }
}

/// Half-closes, then drops what the client still sends for a bounded time.
async fn linger(mut stream: TcpStream) {
    if stream.shutdown(Shutdown::Write).await.is_err() {
        return;
    }
    let drain = async {
        let mut buf = [0u8; 4096];
        let mut left = LINGER_BYTES_MAX;
        while left > 0 {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    };
    futures_lite::future::or(drain, glommio::timer::sleep(LINGER_TIME)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_path_and_query() {
        let r = parse_head(b"GET /commands/x?a=1&b HTTP/1.0\r\n\r\n").unwrap();
        assert_eq!(r.method, "GET");
        assert_eq!(r.path, "/commands/x");
        assert_eq!(r.query.as_deref(), Some("a=1&b"));
        let r = parse_head(b"HEAD / HTTP/1.1\r\nHost: h\r\n\r\n").unwrap();
        assert_eq!((r.path.as_str(), r.query), ("/", None));
    }

    #[test]
    fn decodes_percent_escapes() {
        assert_eq!(percent_decode("%72uok", false).as_deref(), Some("ruok"));
        assert_eq!(percent_decode("a+b%20c", true).as_deref(), Some("a b c"));
        assert_eq!(percent_decode("a+b", false).as_deref(), Some("a+b"));
        assert_eq!(percent_decode("%7", false), None);
        assert_eq!(percent_decode("%zz", false), None);
        assert_eq!(percent_decode("%ff", false), None);
    }

    #[test]
    fn encodes_with_optional_headers() {
        let mut r = Response::new(405, None, "");
        r.headers.push(("Allow", "GET".into()));
        assert_eq!(
            String::from_utf8(r.encode()).unwrap(),
            "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nAllow: GET\r\n\
             Connection: close\r\n\r\n"
        );
    }
}
