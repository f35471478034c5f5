//! What keeps a web page from driving the server through a user's browser:
//!
//! - **Host.** A request must name this server in `Host`: the address it is bound to, a loopback
//!   name of the same port (`localhost`, `127.0.0.1`, `[::1]`), or a name given with
//!   `--allowed-host`. A page on a rebound DNS name (`evil.example` → 127.0.0.1) is refused.
//!   Bound to every interface (`0.0.0.0`) without `--allowed-host`, the server cannot know its
//!   names and accepts any Host, so such a bind needs tokens: with `--insecure` (no tokens) it
//!   is refused ([`check_open_host`]).
//! - **Origin.** A request that carries an `Origin` (browsers add it to every cross-origin
//!   request, to every POST and to every WebSocket handshake) must come from the server's own
//!   origin, a loopback origin of the same port, or a `--cors-origin`. Others get 403.
//! - **Content-Type.** A state-changing request (POST, PUT, PATCH, DELETE) must send
//!   `Content-Type: application/json` — a body-less one sends `{}` — so no HTML form or
//!   `no-cors` fetch (which can only send `text/plain`, form or multipart bodies) can make one.
//! - **CORS.** Only for the `--cors-origin` list: preflights answered, `Authorization`,
//!   `Content-Type` and `Last-Event-ID` allowed, the export's headers and the LangGraph routes'
//!   (`Content-Location`, `X-Pagination-*`) exposed. No other origin
//!   is ever told it may read an answer.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::auth::Tokens;
use crate::error::ApiError;

/// Who may address the server: derived from the bound address and the configuration.
#[derive(Clone, Debug)]
pub struct Site {
    bind: Option<SocketAddr>,
    /// `--allowed-host` names, lower-cased: `name` (any port) or `name:port`.
    hosts: Vec<String>,
    /// `--cors-origin` origins, lower-cased, without a trailing slash.
    cors: Vec<String>,
}

impl Site {
    pub fn new(bind: Option<SocketAddr>, hosts: &[String], cors: &[String]) -> Self {
        let norm = |s: &String| s.trim().trim_end_matches('/').to_ascii_lowercase();
        Self {
            bind,
            hosts: hosts.iter().map(norm).collect(),
            cors: cors.iter().map(norm).collect(),
        }
    }

    /// Is `host` (a `Host` header value) this server?
    fn host_ok(&self, host: &str) -> bool {
        let host = host.to_ascii_lowercase();
        let Some(bind) = self.bind else {
            return true;
        };
        let (name, port) = split_host(&host);
        if self.hosts.iter().any(|h| *h == host || *h == name) {
            return true;
        }
        if self.any_host() {
            return true;
        }
        let same_port = port.unwrap_or(80) == bind.port();
        same_port && (is_loopback(name) || ip_of(name) == Some(bind.ip()))
    }

    /// Whether any `Host` is this server: bound to every interface with no `--allowed-host`, it
    /// cannot tell its own names from any other.
    fn any_host(&self) -> bool {
        self.bind.is_some_and(|b| b.ip().is_unspecified()) && self.hosts.is_empty()
    }

    /// May a page of `origin` send this request (whose `Host` is already known to be ours)?
    fn origin_ok(&self, origin: &str, host: &str) -> bool {
        let lower = origin.trim_end_matches('/').to_ascii_lowercase();
        self.cors.contains(&lower) || self.own_origin(origin, host)
    }

    /// Is `origin` this server's own (the origin of its pages, the console's), not merely one
    /// it lets read answers (`--cors-origin`)? A console session cookie is honoured only from it.
    pub(crate) fn own_origin(&self, origin: &str, host: &str) -> bool {
        let origin = origin.trim_end_matches('/').to_ascii_lowercase();
        let Some((scheme, authority)) = origin.split_once("://") else {
            return false;
        };
        if scheme != "http" && scheme != "https" {
            return false;
        }
        if authority == host.to_ascii_lowercase() {
            return true;
        }
        let (name, port) = split_host(authority);
        let default_port = if scheme == "https" { 443 } else { 80 };
        is_loopback(name)
            && self
                .bind
                .is_some_and(|b| port.unwrap_or(default_port) == b.port())
    }

    /// The CORS layer for the `--cors-origin` list (none when the list is empty).
    pub fn cors_layer(&self) -> Option<CorsLayer> {
        if self.cors.is_empty() {
            return None;
        }
        let origins: Vec<HeaderValue> = self
            .cors
            .iter()
            .filter_map(|o| HeaderValue::from_str(o).ok())
            .collect();
        Some(
            CorsLayer::new()
                .allow_origin(AllowOrigin::list(origins))
                .allow_methods([Method::GET, Method::POST, Method::DELETE])
                .allow_headers([
                    header::AUTHORIZATION,
                    header::CONTENT_TYPE,
                    header::HeaderName::from_static("last-event-id"),
                    header::HeaderName::from_static("x-api-key"),
                ])
                .expose_headers([
                    header::RETRY_AFTER,
                    header::HeaderName::from_static(chronicle_wire::audit::HEAD_OFFSET_HEADER),
                    header::HeaderName::from_static(chronicle_wire::audit::RUN_HEAD_SEQ_HEADER),
                    header::HeaderName::from_static(chronicle_wire::audit::RUN_HEAD_HASH_HEADER),
                    // What LangGraph clients read: a run's URL and the pages of a search.
                    header::CONTENT_LOCATION,
                    header::LOCATION,
                    header::HeaderName::from_static("x-pagination-total"),
                    header::HeaderName::from_static("x-pagination-next"),
                ])
                .max_age(Duration::from_secs(600)),
        )
    }
}

/// Refuses to serve without tokens (`--insecure`) a server that accepts any `Host`: bound to
/// every interface without `--allowed-host`. Any web page could then drive it through the
/// browser of anyone who can reach it, by DNS rebinding (a name of the page's site made to
/// resolve to the server), reading and deciding every run. A warning would sit in a log nobody
/// reads while the server is open; naming the hosts is one flag.
pub fn check_open_host(
    bind: SocketAddr,
    tokens: &Tokens,
    allowed_hosts: &[String],
) -> Result<(), String> {
    if tokens.is_empty() && Site::new(Some(bind), allowed_hosts, &[]).any_host() {
        return Err(format!(
            "refusing to serve {bind} without tokens and without --allowed-host: bound to every interface, the server cannot tell its own names from a page's, and any web page could drive it by DNS rebinding; name each host clients use with --allowed-host NAME (repeatable), bind one address, or configure tokens"
        ));
    }
    Ok(())
}

/// `name[:port]` of a Host or origin authority (`[v6]:port` keeps its brackets).
fn split_host(authority: &str) -> (&str, Option<u16>) {
    let colon = if authority.starts_with('[') {
        authority.find("]:").map(|i| i + 1)
    } else {
        authority.rfind(':')
    };
    match colon {
        Some(i) => match authority[i + 1..].parse() {
            Ok(port) => (&authority[..i], Some(port)),
            Err(_) => (authority, None),
        },
        None => (authority, None),
    }
}

fn ip_of(name: &str) -> Option<IpAddr> {
    name.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

fn is_loopback(name: &str) -> bool {
    name == "localhost" || ip_of(name).is_some_and(|ip| ip.is_loopback())
}

fn changes_state(method: &Method) -> bool {
    matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    )
}

/// Is the request's `Content-Type` JSON (`application/json`, any parameters)?
fn is_json(req: &Request) -> bool {
    req.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"))
}

/// A request to a LangGraph route with no body and no `Content-Type`: LangGraph clients send
/// `DELETE`s and fieldless `POST`s (copy, cancel) so. A page of another origin cannot send one
/// unnoticed: it carries an `Origin`, which the Origin check refuses.
fn bodiless_langgraph(req: &Request) -> bool {
    let h = req.headers();
    let empty = match h.get(header::CONTENT_LENGTH) {
        Some(len) => len == "0",
        None => !h.contains_key(header::TRANSFER_ENCODING),
    };
    empty
        && !h.contains_key(header::CONTENT_TYPE)
        && crate::langgraph::detail::is_route(req.uri().path())
}

/// The Host and Origin checks, before anything else sees the request.
pub async fn guard(
    State((site, tokens)): State<(Arc<Site>, crate::auth::Tokens)>,
    req: Request,
    next: Next,
) -> Response {
    // A request another node of the cluster sent on: that node checked its Host and Origin.
    if tokens.is_from_cluster(req.headers()) {
        return next.run(req).await;
    }
    match check(&site, &req) {
        Ok(()) => next.run(req).await,
        Err(e) => e.into_response(),
    }
}

/// The Content-Type check of a request that a route takes (so a wrong method is still 405).
pub async fn json_only(req: Request, next: Next) -> Response {
    if changes_state(req.method()) && !is_json(&req) && !bodiless_langgraph(&req) {
        return ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "a request that changes state must send Content-Type: application/json (a request without fields sends {})",
        )
        .into_response();
    }
    next.run(req).await
}

fn check(site: &Site, req: &Request) -> Result<(), ApiError> {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| req.uri().authority().map(|a| a.as_str()))
        .ok_or_else(|| ApiError::bad_request("the request has no Host header"))?;
    if !site.host_ok(host) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_host",
            format!("Host {host:?} is not a name of this server (add it with --allowed-host)"),
        ));
    }
    if let Some(origin) = req.headers().get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("null");
        if !site.origin_ok(origin, host) {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden_origin",
                format!(
                    "requests from pages of {origin:?} are not allowed (allow a browser UI's origin with --cors-origin)"
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(bind: &str, hosts: &[&str], cors: &[&str]) -> Site {
        let own = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        Site::new(Some(bind.parse().unwrap()), &own(hosts), &own(cors))
    }

    #[test]
    fn hosts() {
        let s = site("127.0.0.1:8080", &["chronicle.example.com"], &[]);
        for ok in [
            "127.0.0.1:8080",
            "localhost:8080",
            "LOCALHOST:8080",
            "[::1]:8080",
            "chronicle.example.com",
            "chronicle.example.com:443",
        ] {
            assert!(s.host_ok(ok), "{ok}");
        }
        for bad in [
            "evil.example:8080",
            "localhost:8081",
            "127.0.0.1",
            "10.0.0.1:8080",
            "",
        ] {
            assert!(!s.host_ok(bad), "{bad}");
        }
        // Every interface, no names given: any Host.
        assert!(site("0.0.0.0:8080", &[], &[]).host_ok("whatever:1"));
        // With names given, only those (and loopback).
        let named = site("0.0.0.0:8080", &["api.example"], &[]);
        assert!(named.host_ok("api.example:8080") && named.host_ok("localhost:8080"));
        assert!(!named.host_ok("evil.example:8080"));
        assert!(site("10.1.2.3:9000", &[], &[]).host_ok("10.1.2.3:9000"));
    }

    #[test]
    fn any_host_without_tokens_is_refused() {
        let none = Tokens::none();
        let hosts = vec!["api.example".to_owned()];
        for bind in ["0.0.0.0:8080", "[::]:8080"] {
            let bind = bind.parse().unwrap();
            let err = check_open_host(bind, &none, &[]).unwrap_err();
            assert!(err.contains("--allowed-host"), "{err}");
            assert!(check_open_host(bind, &none, &hosts).is_ok());
            let tokens = Tokens::single("admin", "tok-admin-0123456789").unwrap();
            assert!(
                check_open_host(bind, &tokens, &[]).is_ok(),
                "tokens guard it"
            );
        }
        for bind in ["10.1.2.3:8080", "127.0.0.1:8080"] {
            assert!(
                check_open_host(bind.parse().unwrap(), &none, &[]).is_ok(),
                "{bind}"
            );
        }
    }

    #[test]
    fn origins() {
        let s = site("127.0.0.1:8080", &[], &["https://ui.example.com/"]);
        let host = "127.0.0.1:8080";
        for ok in [
            "http://127.0.0.1:8080",
            "http://localhost:8080",
            "http://[::1]:8080",
            "https://ui.example.com",
        ] {
            assert!(s.origin_ok(ok, host), "{ok}");
        }
        for bad in [
            "http://127.0.0.1:8081",
            "http://localhost:3000",
            "null",
            "http://evil.example",
            "file://",
            "https://ui.example.com:8443",
        ] {
            assert!(!s.origin_ok(bad, host), "{bad}");
        }
        // The server's own origin under a configured name.
        assert!(s.origin_ok("https://api.example", "api.example"));
        // A --cors-origin page may read answers, but it is not the server's own origin.
        assert!(!s.own_origin("https://ui.example.com", host));
        assert!(s.own_origin("http://localhost:8080", host));
    }

    #[test]
    fn split() {
        assert_eq!(split_host("a:1"), ("a", Some(1)));
        assert_eq!(split_host("[::1]:8"), ("[::1]", Some(8)));
        assert_eq!(split_host("[::1]"), ("[::1]", None));
        assert_eq!(split_host("a"), ("a", None));
    }
}
