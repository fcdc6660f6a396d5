//! The metrics endpoint's HTTP side, on the shared server (`admin::httpd`).
//!
//! One request per connection (`Connection: close`): `GET /metrics` and
//! `GET /` (and HEAD) answer the exposition; any other path is 404, any
//! other method 405, a request head that is not HTTP/1.x is 400 (505 for
//! another HTTP version), one longer than [`HEAD_BYTES_MAX`] is 431. Every
//! error answer closes the connection. At most [`CONNS_MAX`] connections at
//! once (more are closed at accept), [`CONN_TIME_MAX`] for a whole exchange.

use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

use glommio::net::TcpListener;

use crate::admin::httpd::{self, Limits, Request, Response};

pub use crate::admin::httpd::{head_end, HEAD_BYTES_MAX};

/// Most metrics connections served at once.
pub const CONNS_MAX: usize = 16;
/// Longest one connection lives, from accept to close.
pub const CONN_TIME_MAX: Duration = Duration::from_secs(10);

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
    let limits = Limits {
        name: "metrics endpoint",
        conns_max: CONNS_MAX,
        conn_time_max: CONN_TIME_MAX,
    };
    httpd::serve(listener, limits, move |request| {
        let scrape = scrape.clone();
        async move {
            match route_request(&request) {
                Route::Metrics { head_only } => {
                    let body = scrape().await;
                    let mut r = Response::new(200, Some(CONTENT_TYPE), body);
                    r.head_only = head_only;
                    r
                }
                Route::Status(code) => status_response(code),
            }
        }
    })
    .await
}

fn status_response(code: u16) -> Response {
    let mut r = Response::status_text(code);
    if code == 405 {
        r.headers.push(("Allow", "GET, HEAD".into()));
    }
    r
}

/// Decides the answer to a complete request head.
pub fn route(head: &[u8]) -> Route {
    match httpd::parse_head(head) {
        Ok(request) => route_request(&request),
        Err(status) => Route::Status(status),
    }
}

fn route_request(request: &Request) -> Route {
    let path = &request.path[1..];
    if !(path.is_empty() || path == "metrics") {
        return Route::Status(404);
    }
    match request.method.as_str() {
        "GET" => Route::Metrics { head_only: false },
        "HEAD" => Route::Metrics { head_only: true },
        _ => Route::Status(405),
    }
}

/// A whole response; every one closes the connection.
pub fn response(code: u16, content_type: &str, body: &[u8], head_only: bool) -> Vec<u8> {
    let mut r = status_response(code);
    r.content_type = Some(content_type.to_string());
    r.body = body.to_vec();
    r.head_only = head_only;
    r.encode()
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
