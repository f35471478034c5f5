//! Principals: bearer tokens map to principals (`--tokens FILE` of `principal token [admin]`
//! lines, or `CHRONICLE_API_TOKEN` for one `admin`). With no tokens configured everyone is
//! `local`, who owns everything. The principal is what the engine records as `decided_by` / `by`,
//! and what owns the runs it starts; a client never names itself.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use crate::error::ApiError;
use crate::state::AppState;

/// Token → principal. Empty = authentication off.
#[derive(Clone, Debug, Default)]
pub struct Tokens(Arc<HashMap<String, chronicle_engine::Principal>>);

impl Tokens {
    pub fn none() -> Self {
        Self::default()
    }

    /// One token for one principal with the `admin` role.
    pub fn single(principal: &str, token: &str) -> Self {
        let admin = chronicle_engine::Principal::admin(principal);
        Self(Arc::new([(token.to_owned(), admin)].into()))
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
            if token.len() < 8 {
                return Err(format!(
                    "line {}: the token of {} is shorter than 8 characters",
                    i + 1,
                    principal.name
                ));
            }
            if map.insert(token.to_owned(), principal).is_some() {
                return Err(format!("line {}: a token is listed twice", i + 1));
            }
        }
        Ok(Self(Arc::new(map)))
    }

    pub fn from_file(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The principal of an `Authorization` header value, if it is a known bearer token.
    pub fn principal(&self, header: Option<&str>) -> Result<chronicle_engine::Principal, ApiError> {
        if self.is_empty() {
            return Ok(chronicle_engine::Principal::local());
        }
        let token = header
            .and_then(|h| h.strip_prefix("Bearer "))
            .ok_or_else(|| ApiError::unauthorized("a bearer token is required"))?;
        self.0
            .get(token.trim())
            .cloned()
            .ok_or_else(|| ApiError::unauthorized("unknown token"))
    }
}

/// The authenticated principal of a request.
#[derive(Clone, Debug)]
pub struct Principal(pub chronicle_engine::Principal);

impl FromRequestParts<AppState> for Principal {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let header = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        // WebSocket clients in browsers cannot set headers: accept `?token=` there too.
        let query_token = parts
            .uri
            .query()
            .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("token=")))
            .map(|t| format!("Bearer {t}"));
        state
            .tokens
            .principal(header.or(query_token.as_deref()))
            .map(Principal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_file() {
        use chronicle_engine::Principal as P;
        let t = Tokens::parse(
            "# team\nalice tok-alice-123\n\nbob   tok-bob-4567\nroot tok-root-8910 admin\n",
        )
        .unwrap();
        assert_eq!(
            t.principal(Some("Bearer tok-alice-123")).unwrap(),
            P::user("alice")
        );
        assert_eq!(
            t.principal(Some("Bearer tok-bob-4567")).unwrap(),
            P::user("bob")
        );
        assert_eq!(
            t.principal(Some("Bearer tok-root-8910")).unwrap(),
            P::admin("root")
        );
        assert!(
            Tokens::parse("x tok-12345678 owner")
                .unwrap_err()
                .contains("unknown role \"owner\"")
        );
        assert_eq!(
            t.principal(Some("Bearer nope")).unwrap_err().code,
            "unauthorized"
        );
        assert_eq!(t.principal(None).unwrap_err().code, "unauthorized");
        assert!(Tokens::parse("alice").unwrap_err().contains("line 1"));
        assert!(
            Tokens::parse("alice short")
                .unwrap_err()
                .contains("shorter than 8")
        );
        assert!(
            Tokens::parse("a tok-12345678\nb tok-12345678")
                .unwrap_err()
                .contains("twice")
        );
        assert_eq!(Tokens::none().principal(None).unwrap(), P::local());
        assert!(
            Tokens::single("admin", "tok-12345678")
                .principal(Some("Bearer tok-12345678"))
                .unwrap()
                .admin
        );
    }
}
