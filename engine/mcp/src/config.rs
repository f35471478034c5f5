//! What an MCP server entry says (`[[mcp_server]]` in an agents TOML, or built in code): how to
//! reach the server, what its tools are called, when they wait for a person, and its limits;
//! and the checks that turn it into a [`Resolved`] entry before anything starts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::Error;

/// How long one call may take when the entry names no `timeout_ms`.
pub const CALL_TIMEOUT_MS_DEFAULT: u64 = 30_000;
/// The longest `timeout_ms` an entry may ask for: a run must not hang on one call for longer.
pub const CALL_TIMEOUT_MS_MAX: u64 = 600_000;
/// How long a session's server may sit unused before it is stopped, when the entry names no
/// `idle_ms`.
pub const IDLE_MS_DEFAULT: u64 = 300_000;
/// The longest `idle_ms` an entry may ask for (a day).
pub const IDLE_MS_MAX: u64 = 86_400_000;
/// Server names are tool prefixes and appear in logs and events, so they are one short word.
const NAME_CHARS_MAX: usize = 64;
/// Environment variables a stdio server gets from the engine's environment besides its `env`:
/// enough to find programs and to run, and nothing that could hold a secret (the model's key,
/// tokens). An entry forwards others by naming them: `env = { X = "${X}" }`.
pub const INHERITED_ENV: [&str; 7] = ["PATH", "HOME", "USER", "LANG", "LC_ALL", "TMPDIR", "TZ"];

/// Where a server's processes live.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// One process (or HTTP session) for the whole engine.
    #[default]
    Server,
    /// One process per conversation, started in the conversation's workspace directory on its
    /// first call and stopped when it has been idle for `idle_ms`. Its tools are listed at start
    /// by a process started in a temporary directory and stopped again.
    Session,
}

/// One MCP server, as an agents TOML's `[[mcp_server]]` table declares it (the same fields in
/// code). Exactly one of `command` (a child process spoken to over stdio) and `url` (streamable
/// HTTP) is set.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// The server's name: in logs, errors and every recorded call (`ToolCallRequested.server`),
    /// and the tools' prefix unless `prefix` says otherwise. 1-64 characters of a-z, 0-9, `_`,
    /// `-`.
    pub name: String,
    /// What the model sees a tool as: `<prefix>_<tool>`, or `<tool>` when the prefix is empty.
    /// `None`: the server's name.
    #[serde(default)]
    pub prefix: Option<String>,
    /// The program of a stdio server: found on `PATH`, or a path (relative to
    /// [`base_dir`](Self::base_dir) when relative and containing a `/`).
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment variables of a stdio server besides [`INHERITED_ENV`]; `${NAME}` in a value is
    /// the engine's `NAME`.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The working directory of a server-scoped stdio server (relative to `base_dir`). A
    /// session-scoped one runs in the conversation's workspace instead.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// The endpoint of a streamable-HTTP server.
    #[serde(default)]
    pub url: Option<String>,
    /// Headers sent with every HTTP request; `${NAME}` in a value is the engine's environment
    /// variable `NAME`, so secrets stay out of the file (and no header is ever recorded).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default)]
    pub scope: Scope,
    /// The server's tools (as the server names them) that wait for a person under the HITL
    /// policy `tools`, besides those whose annotations say `destructiveHint: true`.
    #[serde(default)]
    pub gated: Vec<String>,
    /// How long one call may take, in ms ([`CALL_TIMEOUT_MS_DEFAULT`] when unset).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// How long a session's process may be idle before it is stopped, in ms (session scope only).
    #[serde(default)]
    pub idle_ms: Option<u64>,
    /// The directory relative `command` paths and `cwd` are resolved against: the config file's
    /// (set by whoever reads the file); `None`: the engine's working directory.
    #[serde(skip)]
    pub base_dir: Option<PathBuf>,
}

/// How a server is reached, checked and with its variables expanded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Transport {
    Stdio {
        command: PathBuf,
        args: Vec<String>,
        env: Vec<(String, String)>,
        cwd: Option<PathBuf>,
    },
    Http {
        url: String,
        headers: Vec<(http::HeaderName, http::HeaderValue)>,
    },
}

/// An entry that passed every check.
#[derive(Clone, Debug)]
pub(crate) struct Resolved {
    pub name: String,
    pub prefix: String,
    pub transport: Transport,
    pub scope: Scope,
    pub gated: Vec<String>,
    pub timeout: Duration,
    pub idle: Duration,
}

impl Resolved {
    /// The name the model sees for the server's tool `tool`.
    pub(crate) fn tool_name(&self, tool: &str) -> String {
        if self.prefix.is_empty() {
            tool.to_owned()
        } else {
            format!("{}_{tool}", self.prefix)
        }
    }
}

fn word(s: &str) -> bool {
    s.len() <= NAME_CHARS_MAX
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// `${NAME}` in `text` replaced by the environment's `NAME` (read through `var`); `field` names
/// the value in the error for an unset variable or a `${` without its `}`.
pub(crate) fn expand(
    server: &str,
    field: &str,
    text: &str,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<String, Error> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let end = after.find('}').ok_or_else(|| Error::BadTemplate {
            server: server.to_owned(),
            field: field.to_owned(),
        })?;
        let name = &after[..end];
        let value = var(name).ok_or_else(|| Error::MissingEnv {
            server: server.to_owned(),
            field: field.to_owned(),
            var: name.to_owned(),
        })?;
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

impl McpServerConfig {
    /// Checks the entry and expands its variables from the process environment.
    pub(crate) fn resolve(&self) -> Result<Resolved, Error> {
        self.resolve_with(&|name| std::env::var(name).ok())
    }

    pub(crate) fn resolve_with(
        &self,
        var: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Resolved, Error> {
        let name = self.name.clone();
        if name.is_empty() || !word(&name) {
            return Err(Error::BadName { name });
        }
        let prefix = self.prefix.clone().unwrap_or_else(|| name.clone());
        if !word(&prefix) {
            return Err(Error::BadPrefix {
                server: name,
                prefix,
            });
        }
        let timeout_ms = self.timeout_ms.unwrap_or(CALL_TIMEOUT_MS_DEFAULT);
        if !(1..=CALL_TIMEOUT_MS_MAX).contains(&timeout_ms) {
            return Err(Error::BadTimeout {
                server: name,
                timeout_ms,
            });
        }
        let idle_ms = self.idle_ms.unwrap_or(IDLE_MS_DEFAULT);
        if self.idle_ms.is_some() && self.scope != Scope::Session {
            return Err(Error::NotForScope {
                server: name,
                field: "idle_ms",
            });
        }
        if !(1..=IDLE_MS_MAX).contains(&idle_ms) {
            return Err(Error::BadIdle {
                server: name,
                idle_ms,
            });
        }
        let transport = self.transport(&name, var)?;
        if self.scope == Scope::Session && !matches!(transport, Transport::Stdio { .. }) {
            return Err(Error::SessionNeedsCommand { server: name });
        }
        if self.scope == Scope::Session && self.cwd.is_some() {
            return Err(Error::NotForScope {
                server: name,
                field: "cwd",
            });
        }
        Ok(Resolved {
            name,
            prefix,
            transport,
            scope: self.scope,
            gated: self.gated.clone(),
            timeout: Duration::from_millis(timeout_ms),
            idle: Duration::from_millis(idle_ms),
        })
    }

    fn transport(
        &self,
        name: &str,
        var: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Transport, Error> {
        let not_for = |field: &'static str, transport: &'static str| Error::NotForTransport {
            server: name.to_owned(),
            field,
            transport,
        };
        match (&self.command, &self.url) {
            (Some(_), Some(_)) => Err(Error::TwoTransports {
                server: name.to_owned(),
            }),
            (None, None) => Err(Error::NoTransport {
                server: name.to_owned(),
            }),
            (Some(command), None) => {
                if !self.headers.is_empty() {
                    return Err(not_for("headers", "stdio"));
                }
                self.stdio(name, command, var)
            }
            (None, Some(url)) => {
                for (set, field) in [
                    (!self.args.is_empty(), "args"),
                    (!self.env.is_empty(), "env"),
                    (self.cwd.is_some(), "cwd"),
                ] {
                    if set {
                        return Err(not_for(field, "streamable HTTP"));
                    }
                }
                self.http(name, url, var)
            }
        }
    }

    fn stdio(
        &self,
        name: &str,
        command: &str,
        var: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Transport, Error> {
        if command.trim().is_empty() {
            return Err(Error::NoTransport {
                server: name.to_owned(),
            });
        }
        let base = self.base_dir.as_deref().unwrap_or(Path::new("."));
        let command_path = if command.contains('/') && Path::new(command).is_relative() {
            base.join(command)
        } else {
            PathBuf::from(command)
        };
        let mut env: Vec<(String, String)> = INHERITED_ENV
            .iter()
            .filter_map(|k| var(k).map(|v| ((*k).to_owned(), v)))
            .collect();
        for (k, v) in &self.env {
            let value = expand(name, &format!("env.{k}"), v, var)?;
            env.retain(|(key, _)| key != k);
            env.push((k.clone(), value));
        }
        let cwd = self.cwd.as_ref().map(|c| base.join(c));
        if let Some(dir) = &cwd
            && !dir.is_dir()
        {
            return Err(Error::BadCwd {
                server: name.to_owned(),
                cwd: dir.clone(),
            });
        }
        Ok(Transport::Stdio {
            command: command_path,
            args: self.args.clone(),
            env,
            cwd,
        })
    }

    fn http(
        &self,
        name: &str,
        url: &str,
        var: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Transport, Error> {
        let bad_url = |reason: String| Error::BadUrl {
            server: name.to_owned(),
            url: url.to_owned(),
            reason,
        };
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| bad_url("no scheme".into()))?;
        if !matches!(scheme, "http" | "https") {
            return Err(bad_url(format!("scheme {scheme} is not http or https")));
        }
        if rest.is_empty() || rest.starts_with('/') {
            return Err(bad_url("no host".into()));
        }
        let mut headers = Vec::with_capacity(self.headers.len());
        for (k, v) in &self.headers {
            let field = format!("headers.{k}");
            let bad = |reason: String| Error::BadHeader {
                server: name.to_owned(),
                header: k.clone(),
                reason,
            };
            let header =
                http::HeaderName::from_bytes(k.as_bytes()).map_err(|e| bad(e.to_string()))?;
            let value = expand(name, &field, v, var)?;
            let mut value = http::HeaderValue::from_str(&value).map_err(|e| bad(e.to_string()))?;
            value.set_sensitive(true);
            headers.push((header, value));
        }
        Ok(Transport::Http {
            url: url.to_owned(),
            headers,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(name: &str) -> Option<String> {
        match name {
            "PATH" => Some("/usr/bin".into()),
            "TOKEN" => Some("s3cret".into()),
            _ => None,
        }
    }

    fn stdio(name: &str) -> McpServerConfig {
        McpServerConfig {
            name: name.into(),
            command: Some("python3".into()),
            ..McpServerConfig::default()
        }
    }

    fn err(c: McpServerConfig) -> String {
        c.resolve_with(&vars).unwrap_err().to_string()
    }

    #[test]
    fn an_entry_resolves_with_its_prefix_env_and_limits() {
        let mut c = stdio("duckdb");
        c.env.insert("AUTH".into(), "Bearer ${TOKEN}".into());
        c.env.insert("PATH".into(), "/opt/bin".into());
        let r = c.resolve_with(&vars).unwrap();
        assert_eq!(r.tool_name("run_sql"), "duckdb_run_sql");
        assert_eq!(r.timeout, Duration::from_millis(CALL_TIMEOUT_MS_DEFAULT));
        let Transport::Stdio { env, .. } = &r.transport else {
            panic!("stdio")
        };
        assert_eq!(
            env,
            &[
                ("AUTH".to_owned(), "Bearer s3cret".to_owned()),
                ("PATH".to_owned(), "/opt/bin".to_owned())
            ],
            "the entry's env wins over the inherited one; nothing else is inherited"
        );
        let bare = McpServerConfig {
            prefix: Some(String::new()),
            ..stdio("data")
        };
        assert_eq!(
            bare.resolve_with(&vars).unwrap().tool_name("run_sql"),
            "run_sql"
        );
        let http = McpServerConfig {
            name: "remote".into(),
            url: Some("https://mcp.example.com/mcp".into()),
            headers: [("Authorization".to_owned(), "Bearer ${TOKEN}".to_owned())].into(),
            ..McpServerConfig::default()
        };
        let Transport::Http { headers, .. } = http.resolve_with(&vars).unwrap().transport else {
            panic!("http")
        };
        assert_eq!(headers[0].1, "Bearer s3cret");
        assert!(headers[0].1.is_sensitive(), "kept out of debug output");
    }

    #[test]
    fn bad_entries_name_the_server_and_the_field() {
        assert_eq!(
            err(stdio("Duck DB")),
            "mcp_server name \"Duck DB\" must be 1-64 characters of a-z, 0-9, `_` or `-`"
        );
        assert_eq!(
            err(McpServerConfig {
                command: None,
                ..stdio("db")
            }),
            "mcp_server `db` needs `command` (stdio) or `url` (streamable HTTP)"
        );
        assert_eq!(
            err(McpServerConfig {
                url: Some("http://x".into()),
                ..stdio("db")
            }),
            "mcp_server `db`: give `command` or `url`, not both"
        );
        assert_eq!(
            err(McpServerConfig {
                timeout_ms: Some(0),
                ..stdio("db")
            }),
            "mcp_server `db`: timeout_ms 0 is outside 1..=600000"
        );
        let mut c = stdio("db");
        c.env.insert("KEY".into(), "${UNSET_VARIABLE}".into());
        assert_eq!(
            err(c),
            "mcp_server `db`: env.KEY names the environment variable UNSET_VARIABLE, which is not set"
        );
        assert_eq!(
            err(McpServerConfig {
                name: "web".into(),
                url: Some("ftp://host/mcp".into()),
                ..McpServerConfig::default()
            }),
            "mcp_server `web`: url \"ftp://host/mcp\" is not an http(s) URL: scheme ftp is not http or https"
        );
        assert_eq!(
            err(McpServerConfig {
                name: "web".into(),
                url: Some("http://host/mcp".into()),
                scope: Scope::Session,
                ..McpServerConfig::default()
            }),
            "mcp_server `web`: scope \"session\" needs a `command` (a process per conversation)"
        );
        assert_eq!(
            err(McpServerConfig {
                idle_ms: Some(10),
                ..stdio("db")
            }),
            "mcp_server `db`: `idle_ms` is not a field of this scope"
        );
        assert_eq!(
            err(McpServerConfig {
                cwd: Some("/no/such/dir".into()),
                ..stdio("db")
            }),
            "mcp_server `db`: cwd /no/such/dir is not a directory"
        );
    }
}
