//! ZooKeeper's AdminServer (JettyAdminServer) over the shared HTTP server
//! (`httpd`): what each request gets, as Jetty 9.4 with ZooKeeper's
//! CommandServlet answers it. The commands themselves are in `commands`;
//! the shard side (gathering the data, side effects) in `shard::admin_server`.
//!
//! * `GET <commandURL>/<name>`: the command's JSON, 200, whatever the
//!   command says (unknown names and a server not serving included).
//!   Query parameters are the command's arguments (set_trace_mask's
//!   `traceMask`). The name is the rest of the path after `<commandURL>/`,
//!   percent-decoded (`/commands/ruok/x` asks for `ruok/x`).
//! * `GET <commandURL>` or `<commandURL>/`: links to every command, 200.
//! * Any other path: 404. HEAD: GET's headers without the body.
//! * POST: 405, PUT and DELETE: 405 without a body, TRACE: 403 (ZooKeeper
//!   constrains it), OPTIONS: 200 with `Allow`, other methods: 501.
//! * Error pages are HTML in Jetty's layout (not byte for byte: no
//!   servlet class names and no "Powered by" line).
//!
//! Unlike Jetty, every connection carries one request (`Connection:
//! close`); at most [`CONNS_MAX`] are open at once, each for at most
//! `admin.idleTimeout`.

use std::time::Duration;

use super::httpd::{self, Limits, Request, Response};
use super::json::Json;
use crate::config::AdminConfig;

/// Most AdminServer connections served at once (more are closed at accept).
pub const CONNS_MAX: usize = 32;

/// The AdminServer's socket, bound at startup, for the shard that serves it.
pub struct AdminSetup {
    pub listener: std::net::TcpListener,
}

/// Binds the AdminServer's socket when it is enabled. Err: the reason it
/// could not be bound (JettyAdminServer's "Problem starting AdminServer").
pub fn bind(admin: &AdminConfig) -> Result<Option<AdminSetup>, String> {
    if !admin.enabled {
        return Ok(None);
    }
    let addr = std::net::SocketAddr::new(admin.address, admin.port);
    let listener = std::net::TcpListener::bind(addr).map_err(|e| {
        format!(
            "Problem starting AdminServer on address {}, port {} and command URL {}: {e}",
            admin.address, admin.port, admin.command_url
        )
    })?;
    Ok(Some(AdminSetup { listener }))
}

pub fn limits(admin: &AdminConfig) -> Limits {
    Limits {
        name: "AdminServer",
        conns_max: CONNS_MAX,
        conn_time_max: Duration::from_millis(admin.idle_timeout_ms),
    }
}

/// What a request asks of the AdminServer.
#[derive(Debug, PartialEq)]
pub enum Routed {
    /// Run the command `name` (as asked) with `kwargs`.
    Command {
        name: String,
        kwargs: Vec<(String, String)>,
        head_only: bool,
    },
    /// The list of commands.
    Links { head_only: bool },
    /// A fixed answer.
    Answer(Response),
}

/// Decides what `request` gets, `command_url` being `admin.commandURL`.
pub fn route(request: &Request, command_url: &str) -> Routed {
    let Some(path) = httpd::percent_decode(&request.path, false).and_then(|p| normalize(&p)) else {
        return Routed::Answer(error_page(400, "Bad Request", &request.path));
    };
    let head_only = match request.method.as_str() {
        "GET" => false,
        "HEAD" => true,
        "POST" => {
            let message = "HTTP method POST is not supported by this URL";
            return Routed::Answer(error_page(405, message, &path));
        }
        "PUT" | "DELETE" => return Routed::Answer(Response::new(405, None, "")),
        "TRACE" => return Routed::Answer(Response::new(403, None, "")),
        "OPTIONS" => {
            let mut r = Response::new(200, None, "");
            r.headers
                .push(("Allow", "GET, HEAD, TRACE, OPTIONS".to_string()));
            return Routed::Answer(r);
        }
        _ => return Routed::Answer(Response::new(501, None, "")),
    };
    let rest = path.strip_prefix(command_url);
    match rest {
        Some("") | Some("/") => Routed::Links { head_only },
        Some(r) if r.starts_with('/') => Routed::Command {
            name: r[1..].to_string(),
            kwargs: super::commands::parse_query(request.query.as_deref()),
            head_only,
        },
        _ => {
            let mut page = error_page(404, "Not Found", &path);
            page.head_only = head_only;
            Routed::Answer(page)
        }
    }
}

/// Removes `.` and `..` segments as Jetty's URI canonicalization does;
/// None when `..` climbs above the root.
fn normalize(path: &str) -> Option<String> {
    if !path.split('/').any(|s| s == "." || s == "..") {
        return Some(path.to_string());
    }
    let mut out: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let last = segments.len().saturating_sub(1);
    for (i, seg) in segments.into_iter().enumerate() {
        match seg {
            "." => {
                if i == last {
                    out.push("");
                }
            }
            ".." => {
                out.pop()?;
                if i == last {
                    out.push("");
                }
            }
            s => out.push(s),
        }
    }
    Some(format!("/{}", out.join("/")))
}

/// A command's answer: CommandServlet's 200 with the JSON.
pub fn command_response(json: &Json, head_only: bool) -> Response {
    let mut r = Response::new(200, Some("application/json"), json.render());
    r.head_only = head_only;
    r
}

/// The list of commands (no Content-Type, as Jetty sends it).
pub fn links_response(command_url: &str, head_only: bool) -> Response {
    let mut r = Response::new(200, None, super::commands::links(command_url));
    r.head_only = head_only;
    r
}

/// Jetty's error page layout.
fn error_page(status: u16, message: &str, uri: &str) -> Response {
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
    };
    let (message, uri) = (esc(message), esc(uri));
    let body = format!(
        "<html>\n<head>\n<meta http-equiv=\"Content-Type\" content=\"text/html;charset=ISO-8859-1\"/>\n\
         <title>Error {status} {message}</title>\n</head>\n<body><h2>HTTP ERROR {status} {message}</h2>\n\
         <table>\n<tr><th>URI:</th><td>{uri}</td></tr>\n<tr><th>STATUS:</th><td>{status}</td></tr>\n\
         <tr><th>MESSAGE:</th><td>{message}</td></tr>\n</table>\n\n</body>\n</html>\n"
    );
    let mut r = Response::new(status, Some("text/html;charset=iso-8859-1"), body);
    r.headers
        .push(("Cache-Control", "must-revalidate,no-cache,no-store".into()));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(method: &str, target: &str) -> Request {
        let head = format!("{method} {target} HTTP/1.0\r\n\r\n");
        httpd::parse_head(head.as_bytes()).unwrap()
    }

    fn status(r: Routed) -> u16 {
        match r {
            Routed::Answer(resp) => resp.status,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn routes_as_jetty() {
        let url = "/commands";
        let command = |name: &str, head_only| Routed::Command {
            name: name.into(),
            kwargs: vec![],
            head_only,
        };
        assert_eq!(
            route(&req("GET", "/commands/ruok"), url),
            command("ruok", false)
        );
        assert_eq!(
            route(&req("HEAD", "/commands/ruok"), url),
            command("ruok", true)
        );
        assert_eq!(
            route(&req("GET", "/commands/%72uok"), url),
            command("ruok", false)
        );
        assert_eq!(
            route(&req("GET", "/commands/ruok/x"), url),
            command("ruok/x", false)
        );
        assert_eq!(
            route(&req("GET", "/commands//ruok"), url),
            command("/ruok", false)
        );
        assert_eq!(
            route(&req("GET", "/commands/../commands/ruok"), url),
            command("ruok", false)
        );
        assert_eq!(
            route(&req("GET", "/commands/stmk?traceMask=1&x"), url),
            Routed::Command {
                name: "stmk".into(),
                kwargs: vec![("traceMask".into(), "1".into()), ("x".into(), "".into())],
                head_only: false
            }
        );
        assert_eq!(
            route(&req("GET", "/commands"), url),
            Routed::Links { head_only: false }
        );
        assert_eq!(
            route(&req("GET", "/commands/"), url),
            Routed::Links { head_only: false }
        );
        for target in ["/", "/foo", "/Commands/ruok", "/commandsx", "/commandsruok"] {
            assert_eq!(status(route(&req("GET", target), url)), 404, "{target}");
        }
        assert_eq!(status(route(&req("POST", "/commands/ruok"), url)), 405);
        assert_eq!(status(route(&req("POST", "/foo"), url)), 405);
        assert_eq!(status(route(&req("PUT", "/commands/ruok"), url)), 405);
        assert_eq!(status(route(&req("TRACE", "/commands/ruok"), url)), 403);
        assert_eq!(status(route(&req("OPTIONS", "/commands/ruok"), url)), 200);
        assert_eq!(status(route(&req("FOO", "/commands/ruok"), url)), 501);
        assert_eq!(status(route(&req("GET", "/commands/%zz"), url)), 400);
        assert_eq!(status(route(&req("GET", "/../x"), url)), 400);
        // Another commandURL.
        assert_eq!(
            route(&req("GET", "/zk/c/ruok"), "/zk/c"),
            command("ruok", false)
        );
        assert_eq!(status(route(&req("GET", "/commands/ruok"), "/zk/c")), 404);
    }

    #[test]
    fn answers_carry_jettys_headers() {
        let r = command_response(&Json::obj(), false);
        let text = String::from_utf8(r.encode()).unwrap();
        assert!(text.starts_with("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"));
        let r = links_response("/commands", true);
        let text = String::from_utf8(r.encode()).unwrap();
        assert!(!text.contains("Content-Type"), "{text}");
        assert!(text.ends_with("\r\n\r\n"), "{text}");
    }
}
