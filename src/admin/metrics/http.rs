//! A deliberately tiny HTTP/1.1 server for the metrics endpoint.
//!
//! One request per connection (`Connection: close`): `GET /metrics` and
//! `GET /` (and HEAD) answer the exposition; any other path is 404, any
//! other method 405, a request head that is not HTTP/1.x is 400 (505 for
//! another HTTP version), one longer than [`HEAD_BYTES_MAX`] is 431. Every
//! error answer closes the connection. Bounds, so that no client can hold
//! the shard's resources: at most [`CONNS_MAX`] connections at once (more
//! are closed at accept), [`CONN_TIME_MAX`] for a whole exchange (a client
//! that sends or reads too slowly is cut off), and a bounded lingering close.
//! The server runs as tasks on a shard's executor: a slow client costs a
//! parked task and a socket, never a blocked thread.

use std::cell::Cell;
use std::future::Future;
use std::net::Shutdown;
use std::rc::Rc;
use std::time::Duration;

use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::{TcpListener, TcpStream};

/// Largest request head (request line and headers) read.
pub const HEAD_BYTES_MAX: usize = 8 * 1024;
/// Most metrics connections served at once.
pub const CONNS_MAX: usize = 16;
/// Longest one connection lives, from accept to close.
pub const CONN_TIME_MAX: Duration = Duration::from_secs(10);
/// After answering, what is still read (and dropped) before closing, so
/// that unread request bytes do not turn the close into a reset that could
/// destroy the answer before the client reads it.
const LINGER_BYTES_MAX: usize = 64 * 1024;
const LINGER_TIME: Duration = Duration::from_secs(1);

pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What a request head asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// The exposition; `head_only` for HEAD.
    Metrics { head_only: bool },
    /// An error status, answered with a short text and a close.
    Status(u16),
}

/// Serves the endpoint on `listener` until the executor stops; `scrape`
/// produces the exposition for each request.
pub async fn serve<F, Fut>(listener: TcpListener, scrape: F)
where
    F: Fn() -> Fut + 'static,
    Fut: Future<Output = String> + 'static,
{
    let scrape = Rc::new(scrape);
    let active = Rc::new(Cell::new(0usize));
    loop {
        let stream = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("metrics endpoint: accept failed: {e}");
                glommio::timer::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if active.get() >= CONNS_MAX {
            tracing::debug!("metrics endpoint: {CONNS_MAX} connections open, closing a new one");
            continue;
        }
        let slot = Slot::take(&active);
        let scrape = scrape.clone();
        glommio::spawn_local(async move {
            let exchange = exchange(stream, &*scrape);
            let deadline = async { glommio::timer::sleep(CONN_TIME_MAX).await };
            futures_lite::future::or(exchange, deadline).await;
            drop(slot);
        })
        .detach();
    }
}

/// A place among the CONNS_MAX connections, given back when dropped.
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

async fn exchange<F, Fut>(mut stream: TcpStream, scrape: &F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = String>,
{
    let route = match read_head(&mut stream).await {
        Ok(Some(head)) => route(&head),
        Ok(None) => return,
        Err(status) => Route::Status(status),
    };
    let answer = match route {
        Route::Metrics { head_only } => {
            let body = scrape().await;
            response(200, CONTENT_TYPE, body.as_bytes(), head_only)
        }
        Route::Status(code) => {
            let body = format!("{code} {}\n", reason(code));
            response(code, "text/plain; charset=utf-8", body.as_bytes(), false)
        }
    };
    if stream.write_all(&answer).await.is_err() || stream.flush().await.is_err() {
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

/// Decides the answer to a complete request head.
pub fn route(head: &[u8]) -> Route {
    let bad = Route::Status(400);
    let Ok(text) = std::str::from_utf8(head) else {
        return bad;
    };
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let mut parts = lines.next().unwrap_or_default().split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return bad;
    };
    if method.is_empty() || !method.bytes().all(is_tchar) {
        return bad;
    }
    let http_1_1 = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        v if is_http_version(v) => return Route::Status(505),
        _ => return bad,
    };
    let mut hosts = 0;
    for line in lines.take_while(|l| !l.is_empty()) {
        // No whitespace before the colon, no folded continuation lines.
        let Some((name, value)) = line.split_once(':') else {
            return bad;
        };
        if name.is_empty() || !name.bytes().all(is_tchar) || value.bytes().any(is_bad_value_byte) {
            return bad;
        }
        if name.eq_ignore_ascii_case("host") {
            hosts += 1;
        }
    }
    // RFC 9112 §3.2: exactly one Host in HTTP/1.1, at most one in 1.0.
    if hosts > 1 || (http_1_1 && hosts == 0) {
        return bad;
    }
    let Some(path) = target
        .strip_prefix('/')
        .map(|rest| rest.split('?').next().unwrap_or_default())
    else {
        return bad;
    };
    if !(path.is_empty() || path == "metrics") {
        return Route::Status(404);
    }
    match method {
        "GET" => Route::Metrics { head_only: false },
        "HEAD" => Route::Metrics { head_only: true },
        _ => Route::Status(405),
    }
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

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        505 => "HTTP Version Not Supported",
        _ => "Error",
    }
}

/// A whole response; every one closes the connection.
pub fn response(code: u16, content_type: &str, body: &[u8], head_only: bool) -> Vec<u8> {
    let allow = if code == 405 {
        "Allow: GET, HEAD\r\n"
    } else {
        ""
    };
    let mut out = format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         {allow}Connection: close\r\n\r\n",
        reason(code),
        body.len()
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(body);
    }
    out
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

    fn r(head: &str) -> Route {
        route(head.as_bytes())
    }

    const METRICS: Route = Route::Metrics { head_only: false };

    #[test]
    fn finds_the_end_of_the_head() {
        assert_eq!(head_end(b"GET / HTTP/1.0\r\n\r\nrest", 0), Some(18));
        assert_eq!(head_end(b"GET / HTTP/1.0\n\nrest", 0), Some(16));
        assert_eq!(head_end(b"GET / HTTP/1.0\r\nHost: x\r\n", 0), None);
        assert_eq!(head_end(b"GET / HTTP/1.0\r\n\r", 0), None);
    }

    #[test]
    fn routes_metrics_paths() {
        assert_eq!(r("GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n"), METRICS);
        assert_eq!(
            r("GET / HTTP/1.1\r\nhost: a\r\nAccept: */*\r\n\r\n"),
            METRICS
        );
        assert_eq!(r("GET /metrics?x=1 HTTP/1.0\r\n\r\n"), METRICS);
        assert_eq!(r("GET / HTTP/1.0\n\n"), METRICS);
        assert_eq!(
            r("HEAD /metrics HTTP/1.1\r\nHost: a\r\n\r\n"),
            Route::Metrics { head_only: true }
        );
        assert_eq!(
            r("GET /metricsx HTTP/1.1\r\nHost: a\r\n\r\n"),
            Route::Status(404)
        );
        assert_eq!(r("GET /x/metrics HTTP/1.0\r\n\r\n"), Route::Status(404));
        assert_eq!(
            r("POST /metrics HTTP/1.1\r\nHost: a\r\n\r\n"),
            Route::Status(405)
        );
    }

    #[test]
    fn rejects_malformed_heads() {
        for head in [
            "",
            "\r\n",
            "GET\r\n\r\n",
            "GET /\r\n\r\n",
            "GET  / HTTP/1.0\r\n\r\n",
            "GET / HTTP/1.0 x\r\n\r\n",
            "GET / http/1.0\r\n\r\n",
            "GET / FTP/1.0\r\n\r\n",
            "G(T / HTTP/1.0\r\n\r\n",
            "GET metrics HTTP/1.0\r\n\r\n",
            "GET * HTTP/1.0\r\n\r\n",
            "GET / HTTP/1.1\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
            "GET / HTTP/1.0\r\nno colon\r\n\r\n",
            "GET / HTTP/1.0\r\nName : v\r\n\r\n",
            "GET / HTTP/1.0\r\nA: b\r\n folded\r\n\r\n",
            "GET / HTTP/1.0\r\nA: b\x01\r\n\r\n",
        ] {
            assert_eq!(r(head), Route::Status(400), "{head:?}");
        }
        assert_eq!(route(b"GET /\xff HTTP/1.0\r\n\r\n"), Route::Status(400));
        assert_eq!(r("GET / HTTP/2.0\r\n\r\n"), Route::Status(505));
        assert_eq!(r("GET / HTTP/3\r\n\r\n"), Route::Status(505));
    }

    #[test]
    fn responses_close_and_count_their_body() {
        let out = response(200, CONTENT_TYPE, b"a 1\n", false);
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
             Content-Length: 4\r\nConnection: close\r\n\r\na 1\n"
        );
        let head = String::from_utf8(response(200, CONTENT_TYPE, b"a 1\n", true)).unwrap();
        assert!(head.ends_with("Content-Length: 4\r\nConnection: close\r\n\r\n"));
        let text = String::from_utf8(response(405, "text/plain", b"", false)).unwrap();
        assert!(text.contains("\r\nAllow: GET, HEAD\r\n"), "{text}");
    }
}
