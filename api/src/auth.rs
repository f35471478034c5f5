//! Principals: bearer tokens map to principals (`--tokens FILE` of `principal token [admin]`
//! lines, or `CHRONICLE_API_TOKEN` for one `admin`). With no tokens configured everyone is
//! `local`, who owns everything. The principal is what the engine records as `decided_by` / `by`,
//! and what owns the runs it starts; a client never names itself.
//!
//! Tokens travel only in `Authorization: Bearer` (the scheme in any case). Browsers cannot set
//! that header on an `EventSource` or a WebSocket, so a stream may instead carry a *stream
//! ticket* in its query (`?ticket=`): issued by `POST /api/v1/stream-tickets` to an
//! authenticated caller, good for one stream within [`TICKET_TTL_MS`]. A long-lived token never
//! appears in a URL, and request logs carry paths only.
//!
//! The web console signs a person in once: a token typed on its login page is exchanged for a
//! *console session* ([`Sessions`]), an `HttpOnly; SameSite=Strict` cookie the page's script
//! cannot read, so the long-lived token is never kept by the page. When a request carries both,
//! `Authorization` (or `X-Api-Key`) wins over the cookie. A request that changes state
//! with the cookie alone must also come from this server's own origin (not a `--cors-origin`
//! page: no cookie is honoured for one) and carry the session's `X-CSRF-Token`.
//!
//! Tokens, tickets and sessions are kept as their BLAKE3 hashes: a lookup compares digests (in
//! constant time), never the secret's bytes one by one.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, header};

use crate::browser::Site;
use crate::error::{ApiError, ApiResult};

/// The shortest token accepted, in bytes.
pub const TOKEN_BYTES_MIN: usize = 16;
/// How long a stream ticket stays good, in milliseconds.
pub const TICKET_TTL_MS: u64 = 60_000;
/// Tickets outstanding at once (issued, neither used nor expired); beyond it issuing answers 503.
pub const TICKETS_MAX: usize = 10_000;
/// Tickets one principal may hold outstanding at once: no more than the streams it may open
/// (the default `streams_per_principal_max`), and far below [`TICKETS_MAX`], so one principal
/// cannot take every ticket and lock everyone's browser streams out.
pub const TICKETS_PER_PRINCIPAL_MAX: usize = 256;

/// Token → principal. Empty = authentication off. On a node of a cluster, also the secret the
/// nodes prove themselves with when one sends another a request on a caller's behalf.
#[derive(Clone, Debug, Default)]
pub struct Tokens(
    Arc<HashMap<blake3::Hash, chronicle_engine::Principal>>,
    Option<blake3::Hash>,
);

/// Why a token cannot be accepted.
fn check_token(token: &str) -> Result<(), String> {
    if token.len() < TOKEN_BYTES_MIN {
        return Err(format!(
            "a token must be at least {TOKEN_BYTES_MIN} characters, got {}",
            token.len()
        ));
    }
    if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("a token cannot contain whitespace or control characters".into());
    }
    Ok(())
}

impl Tokens {
    pub fn none() -> Self {
        Self::default()
    }

    /// One token for one principal with the `admin` role.
    pub fn single(principal: &str, token: &str) -> Result<Self, String> {
        check_token(token)?;
        let admin = chronicle_engine::Principal::admin(principal);
        Ok(Self(
            Arc::new([(blake3::hash(token.as_bytes()), admin)].into()),
            None,
        ))
    }

    /// Parses `principal token [admin]` lines (`#` comments and blank lines allowed).
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut map = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut parts = line.split_whitespace();
            let (Some(principal), Some(token), role, None) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return Err(format!(
                    "line {}: expected `principal token [admin]`",
                    i + 1
                ));
            };
            let principal = match role {
                None => chronicle_engine::Principal::user(principal),
                Some("admin") => chronicle_engine::Principal::admin(principal),
                Some(other) => {
                    return Err(format!(
                        "line {}: unknown role {other:?} (the one role is `admin`)",
                        i + 1
                    ));
                }
            };
            check_token(token)
                .map_err(|e| format!("line {} (principal {}): {e}", i + 1, principal.name))?;
            if map
                .insert(blake3::hash(token.as_bytes()), principal)
                .is_some()
            {
                return Err(format!("line {}: a token is listed twice", i + 1));
            }
        }
        Ok(Self(Arc::new(map), None))
    }

    pub fn from_file(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// These tokens, and the cluster's secret (checked as a token is: at least
    /// [`TOKEN_BYTES_MIN`] characters, no whitespace).
    pub fn with_cluster_secret(self, secret: &str) -> Result<Self, String> {
        check_token(secret).map_err(|e| format!("the cluster token: {e}"))?;
        Ok(Self(self.0, Some(blake3::hash(secret.as_bytes()))))
    }

    /// Whether the request carries the cluster's secret: another node sent it on.
    pub(crate) fn is_from_cluster(&self, headers: &HeaderMap) -> bool {
        let sent = headers
            .get(crate::cluster::CLUSTER_TOKEN)
            .and_then(|v| v.to_str().ok());
        // `blake3::Hash` compares in constant time.
        matches!((sent, self.1), (Some(s), Some(secret)) if blake3::hash(s.trim().as_bytes()) == secret)
    }

    /// The principal a node of the cluster sent a request on behalf of: refused unless the
    /// request carries the cluster's secret.
    fn forwarded(&self, headers: &HeaderMap) -> Result<chronicle_engine::Principal, ApiError> {
        let refused = || ApiError::unauthorized("the cluster token is not this cluster's");
        let secret = headers
            .get(crate::cluster::CLUSTER_TOKEN)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(refused)?;
        // `blake3::Hash` compares in constant time.
        if self.1 != Some(blake3::hash(secret.trim().as_bytes())) {
            return Err(refused());
        }
        headers
            .get(crate::cluster::PRINCIPAL)
            .and_then(|v| v.to_str().ok())
            .and_then(crate::cluster::principal_from_header)
            .ok_or_else(|| ApiError::unauthorized("a forwarded request names no principal"))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The principal of an `Authorization` header value, if it is a known bearer token.
    pub fn principal(&self, header: Option<&str>) -> Result<chronicle_engine::Principal, ApiError> {
        if self.is_empty() {
            return Ok(chronicle_engine::Principal::local());
        }
        let header = header.ok_or_else(|| {
            ApiError::unauthorized("a bearer token is required (Authorization: Bearer <token>)")
        })?;
        let token = match header.trim().split_once(' ') {
            Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => token.trim(),
            _ => {
                return Err(ApiError::unauthorized(
                    "the Authorization header must be `Bearer <token>`",
                ));
            }
        };
        self.of_token(token)
    }

    pub(crate) fn of_token(&self, token: &str) -> Result<chronicle_engine::Principal, ApiError> {
        self.0
            .get(&blake3::hash(token.as_bytes()))
            .cloned()
            .ok_or_else(|| ApiError::unauthorized("unknown token"))
    }

    /// The principal of a request's `Authorization: Bearer` header or, without one, of its
    /// `X-Api-Key` header (where LangGraph clients put their key).
    pub(crate) fn of_headers(
        &self,
        headers: &HeaderMap,
    ) -> Result<chronicle_engine::Principal, ApiError> {
        if headers.contains_key(crate::cluster::CLUSTER_TOKEN) {
            return self.forwarded(headers);
        }
        if !self.is_empty()
            && !headers.contains_key(header::AUTHORIZATION)
            && let Some(key) = headers.get(X_API_KEY)
        {
            let key = key
                .to_str()
                .map_err(|_| ApiError::unauthorized("the X-Api-Key header is not text"))?;
            return self.of_token(key.trim());
        }
        let header = headers
            .get(header::AUTHORIZATION)
            .map(|v| {
                v.to_str()
                    .map_err(|_| ApiError::unauthorized("the Authorization header is not text"))
            })
            .transpose()?;
        self.principal(header)
    }
}

/// The header LangGraph clients send their key in.
pub(crate) const X_API_KEY: &str = "x-api-key";

/// The authenticated principal of a request: its `Authorization` header (or `X-Api-Key`), or
/// else its console session cookie ([`Sessions::check`]).
#[derive(Clone, Debug)]
pub struct Principal(pub chronicle_engine::Principal);

impl<S: Send + Sync> FromRequestParts<S> for Principal
where
    Tokens: FromRef<S>,
    Arc<Sessions>: FromRef<S>,
    Arc<Site>: FromRef<S>,
{
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let tokens = Tokens::from_ref(state);
        if let Some(cookie) = session_cookie(&tokens, &parts.headers) {
            let sessions = Arc::<Sessions>::from_ref(state);
            return sessions
                .check(cookie, parts, &Arc::<Site>::from_ref(state))
                .map(|s| Principal(s.principal));
        }
        tokens.of_headers(&parts.headers).map(Principal)
    }
}

/// The console session cookie a request is to be authenticated by: on a server with tokens, a
/// request without `Authorization` and `X-Api-Key` that carries one.
pub(crate) fn session_cookie<'h>(tokens: &Tokens, headers: &'h HeaderMap) -> Option<&'h str> {
    if tokens.is_empty()
        || headers.contains_key(header::AUTHORIZATION)
        || headers.contains_key(X_API_KEY)
        || headers.contains_key(crate::cluster::CLUSTER_TOKEN)
    {
        return None;
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|kv| {
            let (k, v) = kv.trim().split_once('=')?;
            (k == SESSION_COOKIE).then_some(v)
        })
}

/// The principal of a request as far as its credentials go, without the checks a change
/// needs: for counting a write against its principal's quota before the handler runs.
pub(crate) fn principal_of(
    tokens: &Tokens,
    sessions: &Sessions,
    headers: &HeaderMap,
) -> Option<chronicle_engine::Principal> {
    match session_cookie(tokens, headers) {
        Some(cookie) => sessions.find(cookie).map(|s| s.principal),
        None => tokens.of_headers(headers).ok(),
    }
}

/// The name of the console session cookie.
pub const SESSION_COOKIE: &str = "chronicle_session";
/// A console session ends after this long without a request.
pub const SESSION_IDLE_MS: u64 = 8 * 60 * 60 * 1000;
/// A console session ends this long after sign-in, however busy.
pub const SESSION_LIFETIME_MS: u64 = 24 * 60 * 60 * 1000;
/// Console sessions open at once; beyond it signing in answers 503 until some end.
pub const SESSIONS_MAX: usize = 10_000;
/// Console sessions one principal may hold open at once (every browser it signs in from).
pub const SESSIONS_PER_PRINCIPAL_MAX: usize = 64;
/// How long a sign-in refused for too many sessions is told to wait, in seconds.
const SESSIONS_FULL_RETRY_S: u64 = 60;
/// The header a console change carries its session's CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// A signed-in console session: who, and the token its page sends with each change.
#[derive(Clone, Debug)]
pub struct LoginSession {
    pub principal: chronicle_engine::Principal,
    /// The CSRF token the pages of this session carry and send back in [`CSRF_HEADER`] with
    /// each change (it is no secret from the page; it is one from every other site).
    pub csrf_token: String,
    created: Instant,
    used: Instant,
}

/// The console sessions open: cookie hash → session. A restart signs everyone out.
#[derive(Debug, Default)]
pub struct Sessions(Mutex<HashMap<blake3::Hash, LoginSession>>);

/// 256 random bits, as 64 hex characters.
fn secret() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

impl Sessions {
    /// Signs `who` in: the cookie value and the session.
    pub(crate) fn open(
        &self,
        who: chronicle_engine::Principal,
    ) -> ApiResult<(String, LoginSession)> {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        map.retain(|_, s| live(s, now));
        let held = map
            .values()
            .filter(|s| s.principal.name == who.name)
            .count();
        if held >= SESSIONS_PER_PRINCIPAL_MAX || map.len() >= SESSIONS_MAX {
            let whose = if held >= SESSIONS_PER_PRINCIPAL_MAX {
                format!(
                    "{} holds {SESSIONS_PER_PRINCIPAL_MAX} console sessions, its most",
                    who.name
                )
            } else {
                format!("{SESSIONS_MAX} console sessions are open")
            };
            return Err(ApiError::capped(
                "too_many_sessions",
                format!("{whose}; sign out elsewhere or wait for them to expire"),
                SESSIONS_FULL_RETRY_S,
            ));
        }
        let cookie = secret();
        let csrf_token = secret();
        let session = LoginSession {
            principal: who,
            csrf_token,
            created: now,
            used: now,
        };
        map.insert(blake3::hash(cookie.as_bytes()), session.clone());
        Ok((cookie, session))
    }

    /// The live session of `cookie` (now used), if any.
    pub(crate) fn find(&self, cookie: &str) -> Option<LoginSession> {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let key = blake3::hash(cookie.as_bytes());
        let now = Instant::now();
        match map.get_mut(&key) {
            Some(s) if live(s, now) => {
                s.used = now;
                Some(s.clone())
            }
            Some(_) => {
                map.remove(&key);
                None
            }
            None => None,
        }
    }

    /// Signs the session of `cookie` out; whether there was one.
    pub(crate) fn close(&self, cookie: &str) -> bool {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.remove(&blake3::hash(cookie.as_bytes())).is_some()
    }

    /// The session of a request authenticated by `cookie`: 401 when it is unknown or expired,
    /// or the request comes from another origin than this server's; 403 when it changes state
    /// without its session's CSRF token, or from a page of another site.
    pub(crate) fn check(
        &self,
        cookie: &str,
        parts: &Parts,
        site: &Site,
    ) -> ApiResult<LoginSession> {
        let headers = &parts.headers;
        let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
        let host = headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if let Some(origin) = origin
            && !site.own_origin(origin, host)
        {
            return Err(ApiError::unauthorized(format!(
                "a console session is not accepted from pages of {origin:?}: send a bearer token"
            )));
        }
        let session = self.find(cookie).ok_or_else(|| {
            ApiError::unauthorized("the console session is unknown or expired: sign in again")
        })?;
        if changes_state(&parts.method) {
            if origin.is_none() {
                return Err(ApiError::forbidden(
                    "a change made with a console session must carry this server's Origin",
                ));
            }
            let fetch_site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
            if fetch_site.is_some_and(|s| s != "same-origin") {
                return Err(ApiError::forbidden(
                    "a change made with a console session must come from the console's own pages",
                ));
            }
            let sent = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok());
            // Compared as digests: `blake3::Hash` equality takes the same time wherever the
            // two differ.
            let expected = blake3::hash(session.csrf_token.as_bytes());
            if sent.is_none_or(|t| blake3::hash(t.as_bytes()) != expected) {
                return Err(ApiError::forbidden(format!(
                    "a change made with a console session must carry the session's {CSRF_HEADER} header"
                )));
            }
        }
        Ok(session)
    }
}

fn live(s: &LoginSession, now: Instant) -> bool {
    now.duration_since(s.used) < Duration::from_millis(SESSION_IDLE_MS)
        && now.duration_since(s.created) < Duration::from_millis(SESSION_LIFETIME_MS)
}

fn changes_state(method: &Method) -> bool {
    matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    )
}

/// The principal of a stream request: its `Authorization` header or, when it has none, a
/// stream ticket in `?ticket=` (used up by this request), or the console session cookie. A
/// server without tokens needs none of them (every request is `local`) and does not look.
#[derive(Clone, Debug)]
pub struct StreamPrincipal(pub chronicle_engine::Principal);

impl<S: Send + Sync> FromRequestParts<S> for StreamPrincipal
where
    Tokens: FromRef<S>,
    Arc<Tickets>: FromRef<S>,
    Arc<Sessions>: FromRef<S>,
    Arc<Site>: FromRef<S>,
{
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let tokens = Tokens::from_ref(state);
        if tokens.is_empty()
            || parts.headers.contains_key(header::AUTHORIZATION)
            || parts.headers.contains_key(X_API_KEY)
            || parts.headers.contains_key(crate::cluster::CLUSTER_TOKEN)
        {
            return tokens.of_headers(&parts.headers).map(StreamPrincipal);
        }
        let ticket = parts
            .uri
            .query()
            .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("ticket=")));
        // A WebSocket carries changes (decisions, commands) in its messages, where no CSRF
        // header goes: a console session does not open one (the console does not need it).
        let websocket = parts
            .headers
            .get(header::UPGRADE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
        let cookie = session_cookie(&tokens, &parts.headers).filter(|_| !websocket);
        match (ticket, cookie) {
            (Some(ticket), _) => Arc::<Tickets>::from_ref(state)
                .redeem(ticket)
                .map(StreamPrincipal),
            (None, Some(cookie)) => Arc::<Sessions>::from_ref(state)
                .check(cookie, parts, &Arc::<Site>::from_ref(state))
                .map(|s| StreamPrincipal(s.principal)),
            (None, None) => tokens.principal(None).map(StreamPrincipal),
        }
    }
}

/// Stream tickets issued and not yet used: ticket hash → (principal, expiry).
#[derive(Debug, Default)]
pub struct Tickets(Mutex<HashMap<blake3::Hash, (chronicle_engine::Principal, Instant)>>);

impl Tickets {
    /// A new ticket for `who`, good for one stream until it expires.
    pub(crate) fn issue(&self, who: chronicle_engine::Principal) -> ApiResult<String> {
        let mut tickets = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        tickets.retain(|_, (_, expires)| *expires > now);
        let held = tickets.values().filter(|(p, _)| p.name == who.name).count();
        if held >= TICKETS_PER_PRINCIPAL_MAX {
            return Err(ApiError::capped(
                "too_many_tickets",
                format!(
                    "{} holds {TICKETS_PER_PRINCIPAL_MAX} unused stream tickets, its most; use one or let them expire",
                    who.name
                ),
                TICKET_TTL_MS / 1000,
            ));
        }
        if tickets.len() >= TICKETS_MAX {
            return Err(ApiError::capped(
                "too_many_tickets",
                format!("{TICKETS_MAX} stream tickets are outstanding; try again shortly"),
                TICKET_TTL_MS / 1000,
            ));
        }
        let ticket = format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        let expires = now + Duration::from_millis(TICKET_TTL_MS);
        tickets.insert(blake3::hash(ticket.as_bytes()), (who, expires));
        Ok(ticket)
    }

    /// The principal of `ticket`, which is used up; 401 if it is unknown, used or expired.
    fn redeem(&self, ticket: &str) -> Result<chronicle_engine::Principal, ApiError> {
        let mut tickets = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match tickets.remove(&blake3::hash(ticket.as_bytes())) {
            Some((who, expires)) if expires > Instant::now() => Ok(who),
            _ => Err(ApiError::unauthorized(
                "unknown, used or expired stream ticket: ask POST /api/v1/stream-tickets for a new one",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_file() {
        use chronicle_engine::Principal as P;
        let t = Tokens::parse(
            "# team\nalice tok-alice-123456789\n\nbob   tok-bob-4567890123\nroot tok-root-89101112 admin\n",
        )
        .unwrap();
        let of = |h: &str| t.principal(Some(h));
        assert_eq!(of("Bearer tok-alice-123456789").unwrap(), P::user("alice"));
        // The scheme is case-insensitive; surrounding space is not part of the token.
        assert_eq!(of("bearer tok-bob-4567890123").unwrap(), P::user("bob"));
        assert_eq!(of("BEARER  tok-bob-4567890123 ").unwrap(), P::user("bob"));
        assert_eq!(of("Bearer tok-root-89101112").unwrap(), P::admin("root"));
        for bad in [
            "Bearer nope",
            "Basic tok-bob-4567890123",
            "tok-bob-4567890123",
            "Bearer",
        ] {
            assert_eq!(of(bad).unwrap_err().code, "unauthorized", "{bad}");
        }
        assert_eq!(t.principal(None).unwrap_err().code, "unauthorized");
        assert!(
            Tokens::parse("x tok-1234567890123 owner")
                .unwrap_err()
                .contains("unknown role \"owner\"")
        );
        assert!(Tokens::parse("alice").unwrap_err().contains("line 1"));
        // The minimum length, at its boundary.
        let short = Tokens::parse("alice 123456789012345").unwrap_err();
        assert!(short.contains("at least 16 characters, got 15"), "{short}");
        assert!(Tokens::parse("alice 1234567890123456").is_ok());
        assert!(Tokens::single("admin", "123456789012345").is_err());
        assert!(
            Tokens::parse("a tok-1234567890123\nb tok-1234567890123")
                .unwrap_err()
                .contains("twice")
        );
        assert_eq!(Tokens::none().principal(None).unwrap(), P::local());
        let single = Tokens::single("admin", "tok-1234567890123").unwrap();
        assert!(
            single
                .principal(Some("Bearer tok-1234567890123"))
                .unwrap()
                .admin
        );
    }

    #[test]
    fn a_ticket_is_good_once() {
        let tickets = Tickets::default();
        let t = tickets
            .issue(chronicle_engine::Principal::user("alice"))
            .unwrap();
        assert_eq!(t.len(), 64);
        assert_eq!(tickets.redeem(&t).unwrap().name, "alice");
        assert_eq!(tickets.redeem(&t).unwrap_err().code, "unauthorized");
        assert_eq!(tickets.redeem("forged").unwrap_err().code, "unauthorized");
        // An expired one is refused (and forgotten).
        let old = tickets
            .issue(chronicle_engine::Principal::user("bob"))
            .unwrap();
        let hash = blake3::hash(old.as_bytes());
        tickets.0.lock().unwrap().get_mut(&hash).unwrap().1 = Instant::now();
        assert_eq!(tickets.redeem(&old).unwrap_err().code, "unauthorized");
    }

    #[test]
    fn one_principal_cannot_take_everyones_tickets() {
        use chronicle_engine::Principal as P;
        let tickets = Tickets::default();
        let held: Vec<String> = (0..TICKETS_PER_PRINCIPAL_MAX)
            .map(|_| tickets.issue(P::user("bob")).unwrap())
            .collect();
        let e = tickets.issue(P::user("bob")).unwrap_err();
        assert_eq!(e.code, "too_many_tickets");
        assert!(e.message.contains("bob holds 256"), "{}", e.message);
        // Everyone else still gets theirs.
        let alices = tickets.issue(P::user("alice")).unwrap();
        assert_eq!(tickets.redeem(&alices).unwrap().name, "alice");
        // A ticket used frees its place.
        tickets.redeem(&held[0]).unwrap();
        assert!(tickets.issue(P::user("bob")).is_ok());
    }
}
