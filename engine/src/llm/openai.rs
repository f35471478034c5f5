//! The OpenAI-compatible chat-completions client (`POST {base_url}/chat/completions`) and its
//! configuration. The API key never leaves this file except in the `Authorization` header.

use std::fmt;
use std::time::Duration;

use serde_json::{Value, json};

use super::redact::{REDACTED, Redactor};
use super::{ChatRequest, ChatResponse, Delta, LlmError, LlmProvider, Message, OnDelta, ToolCall};

/// The model when `CHRONICLE_LLM_MODEL` is unset (seed 002's intent model).
pub const DEFAULT_MODEL: &str = "gpt-4o-mini";
/// The base URL when only a key is configured.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
/// Seed 002's agent timeout, also used for one model call.
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// Seed 002 asks for consistent, not creative, answers.
const CHAT_TEMPERATURE: f64 = 0.3;
/// Seed 002's largest `max_tokens` (planning and formatting); intent analysis needs less, but
/// one bound keeps the client simple.
const CHAT_MAX_TOKENS: u32 = 2_000;
/// A completion of `CHAT_MAX_TOKENS` tokens is a few KiB; anything far larger is a broken or
/// hostile server, and reading it would only waste memory.
const RESPONSE_BYTES_MAX: usize = 1 << 20;

/// Where the model lives and how long to wait for it.
#[derive(Clone, PartialEq, Eq)]
pub struct LlmConfig {
    /// `http://127.0.0.1:8000/v1`; `/chat/completions` is appended.
    pub base_url: String,
    pub model: String,
    /// Sent as a bearer token; never printed.
    pub api_key: Option<String>,
    pub timeout_ms: u64,
}

impl fmt::Debug for LlmConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| REDACTED))
            .field("timeout_ms", &self.timeout_ms)
            .finish()
    }
}

impl LlmConfig {
    /// Reads `CHRONICLE_LLM_BASE_URL`, `CHRONICLE_LLM_MODEL`, `CHRONICLE_LLM_API_KEY` (else
    /// `OPENAI_API_KEY`) and `CHRONICLE_LLM_TIMEOUT_MS`. `None` when neither a base URL nor a key
    /// is set: then there is no provider and the rules answer.
    pub fn from_env() -> Option<Self> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// `from_env` over any lookup, so tests need not mutate the process environment.
    fn from_vars(var: impl Fn(&str) -> Option<String>) -> Option<Self> {
        let var = |name: &str| {
            var(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let base_url = var("CHRONICLE_LLM_BASE_URL");
        let api_key = var("CHRONICLE_LLM_API_KEY").or_else(|| var("OPENAI_API_KEY"));
        if base_url.is_none() && api_key.is_none() {
            return None;
        }
        let timeout_ms = match var("CHRONICLE_LLM_TIMEOUT_MS") {
            None => DEFAULT_TIMEOUT_MS,
            Some(text) => match text.parse::<u64>() {
                Ok(ms) if ms > 0 => ms,
                _ => {
                    tracing::warn!(value = %text, default_ms = DEFAULT_TIMEOUT_MS, "ignoring a bad CHRONICLE_LLM_TIMEOUT_MS");
                    DEFAULT_TIMEOUT_MS
                }
            },
        };
        Some(Self {
            base_url: base_url.unwrap_or_else(|| OPENAI_BASE_URL.to_owned()),
            model: var("CHRONICLE_LLM_MODEL").unwrap_or_else(|| DEFAULT_MODEL.to_owned()),
            api_key,
            timeout_ms,
        })
    }
}

/// An OpenAI-compatible chat-completions client (OpenAI, vLLM, llama.cpp, Ollama, LiteLLM ...).
#[derive(Clone)]
pub struct OpenAiCompat {
    client: reqwest::Client,
    endpoint: String,
    model: String,
    api_key: Option<String>,
    /// Finds the key in what comes back, in every form it could take.
    redactor: Option<Redactor>,
    timeout_ms: u64,
    json_mode: bool,
}

impl fmt::Debug for OpenAiCompat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiCompat")
            .field("endpoint", &self.endpoint)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| REDACTED))
            .field("timeout_ms", &self.timeout_ms)
            .field("json_mode", &self.json_mode)
            .finish()
    }
}

impl OpenAiCompat {
    pub fn new(config: LlmConfig) -> Result<Self, LlmError> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_millis(config.timeout_ms))
            .build()
            .map_err(|e| LlmError::Http(format!("cannot build the http client: {e}")))?;
        Ok(Self {
            client,
            endpoint: format!("{}/chat/completions", config.base_url.trim_end_matches('/')),
            model: config.model,
            redactor: config.api_key.as_deref().and_then(Redactor::new),
            api_key: config.api_key,
            timeout_ms: config.timeout_ms,
            json_mode: false,
        })
    }

    /// Asks for `response_format: {"type": "json_object"}`. Off by default because not every
    /// compatible server accepts the field; the prompts ask for JSON either way.
    pub fn with_json_mode(mut self, on: bool) -> Self {
        self.json_mode = on;
        self
    }

    /// Removes the key, in every form [`Redactor`] knows, from a text that came back from the
    /// server (an answer or an error), in case the server or a proxy echoes it.
    fn redact(&self, message: String) -> String {
        match &self.redactor {
            Some(r) => r.redact(&message),
            None => message,
        }
    }

    fn transport_error(&self, e: reqwest::Error) -> LlmError {
        if e.is_timeout() {
            return LlmError::Timeout(self.timeout_ms);
        }
        // reqwest's Display omits the cause ("connection refused" ...), which is the useful part.
        let mut message = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(cause) = source {
            message.push_str(": ");
            message.push_str(&cause.to_string());
            source = cause.source();
        }
        LlmError::Http(self.redact(message))
    }
}

#[async_trait::async_trait]
impl LlmProvider for OpenAiCompat {
    fn model(&self) -> &str {
        &self.model
    }

    async fn chat(&self, system: &str, user: &str) -> Result<String, LlmError> {
        let mut body = json!({
            "model": self.model,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
            "temperature": CHAT_TEMPERATURE,
            "max_tokens": CHAT_MAX_TOKENS,
        });
        if self.json_mode {
            body["response_format"] = json!({"type": "json_object"});
        }
        let parsed = self.post(&body).await?;
        // Redacted because the content is recorded in an event, and a server may echo headers.
        parsed
            .pointer("/choices/0/message/content")
            .and_then(Value::as_str)
            .map(|content| self.redact(content.to_owned()))
            .ok_or_else(|| {
                LlmError::BadResponse("no choices[0].message.content in the body".into())
            })
    }

    async fn complete(
        &self,
        request: &ChatRequest,
        on_delta: &OnDelta<'_>,
    ) -> Result<ChatResponse, LlmError> {
        let mut body = json!({
            "model": request.model.as_deref().unwrap_or(&self.model),
            "messages": request.messages.iter().map(wire_message).collect::<Vec<_>>(),
            "temperature": CHAT_TEMPERATURE,
            "max_tokens": CHAT_MAX_TOKENS,
        });
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.name, "description": t.description, "parameters": t.parameters,
                    }})
                })
                .collect();
        }
        let parsed = self.post(&body).await?;
        let message = parsed
            .pointer("/choices/0/message")
            .ok_or_else(|| LlmError::BadResponse("no choices[0].message in the body".into()))?;
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(|t| self.redact(t.to_owned()));
        let content = text(message.get("content"));
        let reasoning = text(
            message
                .get("reasoning_content")
                .or(message.get("reasoning")),
        );
        let tool_calls = match message.get("tool_calls") {
            None | Some(Value::Null) => Vec::new(),
            Some(calls) => calls
                .as_array()
                .ok_or_else(|| LlmError::BadResponse("tool_calls is not an array".into()))?
                .iter()
                .map(|call| {
                    let field = |path: &str| call.pointer(path).and_then(Value::as_str);
                    match (field("/id"), field("/function/name")) {
                        (Some(id), Some(name)) => Ok(ToolCall {
                            id: id.to_owned(),
                            name: name.to_owned(),
                            arguments: self
                                .redact(field("/function/arguments").unwrap_or("{}").to_owned()),
                        }),
                        _ => Err(LlmError::BadResponse(
                            "a tool call without id or function.name".into(),
                        )),
                    }
                })
                .collect::<Result<_, _>>()?,
        };
        if let Some(r) = &reasoning {
            on_delta(Delta::Reasoning(r));
        }
        if let Some(c) = &content {
            on_delta(Delta::Text(c));
        }
        Ok(ChatResponse {
            content,
            reasoning,
            tool_calls,
            usage: parsed
                .get("usage")
                .and_then(|u| serde_json::from_value(u.clone()).ok()),
            finish_reason: parsed
                .pointer("/choices/0/finish_reason")
                .and_then(Value::as_str)
                .map(str::to_owned),
        })
    }
}

impl OpenAiCompat {
    /// POSTs `body` to the endpoint and reads the JSON answer (bounded in size).
    async fn post(&self, body: &Value) -> Result<Value, LlmError> {
        let mut request = self.client.post(&self.endpoint).json(body);
        if let Some(key) = &self.api_key {
            // bearer_auth marks the header sensitive, so reqwest never prints it either.
            request = request.bearer_auth(key);
        }
        let mut response = request.send().await.map_err(|e| self.transport_error(e))?;
        let status = response.status();
        if !status.is_success() {
            return Err(LlmError::Status(status.as_u16()));
        }
        if response
            .content_length()
            .is_some_and(|n| n > RESPONSE_BYTES_MAX as u64)
        {
            return Err(LlmError::BadResponse(format!(
                "a body of {} bytes exceeds {RESPONSE_BYTES_MAX}",
                response.content_length().unwrap_or_default()
            )));
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| self.transport_error(e))?
        {
            if bytes.len() + chunk.len() > RESPONSE_BYTES_MAX {
                return Err(LlmError::BadResponse(format!(
                    "a body of more than {RESPONSE_BYTES_MAX} bytes"
                )));
            }
            bytes.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&bytes)
            .map_err(|e| LlmError::BadResponse(format!("the body is not JSON: {e}")))
    }
}

/// A message as chat completions takes it (a tool call as `{id, type, function}`).
fn wire_message(m: &Message) -> Value {
    match m {
        Message::Assistant {
            content,
            tool_calls,
        } if !tool_calls.is_empty() => json!({
            "role": "assistant",
            "content": content,
            "tool_calls": tool_calls.iter().map(|c| json!({
                "id": c.id, "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            })).collect::<Vec<_>>(),
        }),
        other => serde_json::to_value(other).unwrap_or(Value::Null),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::time::Instant;

    use super::*;
    use chronicle_testkit::model::{Reply, TestServer};

    const KEY: &str = "sk-test-7f3a9c1e5b2d4680";

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| map.get(name).cloned()
    }

    fn config(base_url: &str, timeout_ms: u64) -> LlmConfig {
        LlmConfig {
            base_url: base_url.to_owned(),
            model: DEFAULT_MODEL.to_owned(),
            api_key: Some(KEY.to_owned()),
            timeout_ms,
        }
    }

    #[test]
    fn config_from_the_environment() {
        assert_eq!(LlmConfig::from_vars(vars(&[])), None);
        assert_eq!(
            LlmConfig::from_vars(vars(&[
                ("CHRONICLE_LLM_MODEL", "x"),
                ("CHRONICLE_LLM_BASE_URL", " ")
            ])),
            None
        );

        let only_key = LlmConfig::from_vars(vars(&[("OPENAI_API_KEY", KEY)]));
        assert_eq!(
            only_key,
            Some(LlmConfig {
                base_url: OPENAI_BASE_URL.into(),
                model: DEFAULT_MODEL.into(),
                api_key: Some(KEY.into()),
                timeout_ms: DEFAULT_TIMEOUT_MS,
            })
        );

        let full = LlmConfig::from_vars(vars(&[
            ("CHRONICLE_LLM_BASE_URL", "http://127.0.0.1:9/v1"),
            ("CHRONICLE_LLM_MODEL", "qwen2.5"),
            ("CHRONICLE_LLM_API_KEY", "chronicle-key"),
            ("OPENAI_API_KEY", KEY),
            ("CHRONICLE_LLM_TIMEOUT_MS", "1500"),
        ]));
        assert_eq!(
            full,
            Some(LlmConfig {
                base_url: "http://127.0.0.1:9/v1".into(),
                model: "qwen2.5".into(),
                api_key: Some("chronicle-key".into()),
                timeout_ms: 1500,
            })
        );

        let local = LlmConfig::from_vars(vars(&[
            ("CHRONICLE_LLM_BASE_URL", "http://127.0.0.1:9/v1"),
            ("CHRONICLE_LLM_TIMEOUT_MS", "soon"),
        ]));
        assert_eq!(
            local.as_ref().map(|c| (c.api_key.clone(), c.timeout_ms)),
            Some((None, DEFAULT_TIMEOUT_MS))
        );
    }

    #[test]
    fn debug_never_shows_the_key() {
        let config = config("http://127.0.0.1:9/v1", 1000);
        let text = format!("{config:?} {config:#?}");
        assert!(!text.contains(KEY), "{text}");
        assert!(text.contains(REDACTED), "{text}");
        let client = OpenAiCompat::new(config).expect("client");
        let text = format!("{client:?} {client:#?}");
        assert!(!text.contains(KEY), "{text}");
        assert!(
            text.contains("http://127.0.0.1:9/v1/chat/completions"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn a_chat_sends_the_openai_body_with_the_bearer_key() {
        let server =
            TestServer::start(Some(KEY), |_| Reply::Content("{\"ok\": true}".into())).await;
        let client = OpenAiCompat::new(config(&server.base_url, 5_000)).expect("client");
        let answer = client.chat("system text", "user text").await;
        assert_eq!(answer.ok().as_deref(), Some("{\"ok\": true}"));

        let seen = server.requests();
        assert_eq!(seen.len(), 1);
        assert_eq!(
            seen[0].authorization.as_deref(),
            Some(format!("Bearer {KEY}").as_str())
        );
        assert_eq!(
            seen[0].body,
            json!({
                "model": DEFAULT_MODEL,
                "messages": [
                    {"role": "system", "content": "system text"},
                    {"role": "user", "content": "user text"},
                ],
                "temperature": 0.3,
                "max_tokens": 2000,
            })
        );

        let json_mode = client.with_json_mode(true);
        assert!(json_mode.chat("s", "u").await.is_ok());
        assert_eq!(
            server.requests()[1].body["response_format"],
            json!({"type": "json_object"})
        );
    }

    #[tokio::test]
    async fn a_completion_offers_tools_and_reads_the_calls_back() {
        let server = TestServer::start(Some(KEY), |_| Reply::ToolCalls {
            content: Some("looking".into()),
            calls: vec![("read_file".into(), json!({"path": "a.md"}))],
        })
        .await;
        let client = OpenAiCompat::new(config(&server.base_url, 5_000)).expect("client");
        let request = ChatRequest {
            model: Some("other-model".into()),
            messages: vec![
                Message::System {
                    content: "s".into(),
                },
                Message::Assistant {
                    content: None,
                    tool_calls: vec![ToolCall {
                        id: "c0".into(),
                        name: "ls".into(),
                        arguments: "{}".into(),
                    }],
                },
                Message::Tool {
                    tool_call_id: "c0".into(),
                    content: "[\"a.md\"]".into(),
                },
            ],
            tools: vec![super::super::ToolSpec {
                name: "read_file".into(),
                description: "reads a file".into(),
                parameters: json!({"type": "object"}),
            }],
        };
        let deltas = std::sync::Mutex::new(Vec::new());
        let answer = client
            .complete(&request, &|d| deltas.lock().unwrap().push(format!("{d:?}")))
            .await
            .expect("an answer");
        assert_eq!(answer.content.as_deref(), Some("looking"));
        assert_eq!(
            answer.tool_calls,
            [ToolCall {
                id: "call_0".into(),
                name: "read_file".into(),
                arguments: "{\"path\":\"a.md\"}".into(),
            }]
        );
        assert_eq!(answer.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(answer.usage.map(|u| u.total_tokens), Some(15));
        assert_eq!(*deltas.lock().unwrap(), ["Text(\"looking\")"]);

        let body = &server.requests()[0].body;
        assert_eq!(body["model"], "other-model");
        assert_eq!(
            body["messages"][1],
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "c0", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]})
        );
        assert_eq!(
            body["messages"][2],
            json!({"role": "tool", "tool_call_id": "c0", "content": "[\"a.md\"]"})
        );
        assert_eq!(
            body["tools"],
            json!([{"type": "function", "function": {"name": "read_file", "description": "reads a file", "parameters": {"type": "object"}}}])
        );
    }

    #[tokio::test]
    async fn errors_carry_the_status_and_never_the_key() {
        let server = TestServer::start(Some(KEY), |_| Reply::Status(500)).await;
        let client = OpenAiCompat::new(config(&server.base_url, 5_000)).expect("client");
        let err = client.chat("s", "u").await.err();
        assert!(matches!(err, Some(LlmError::Status(500))), "{err:?}");

        // The server refuses a wrong key, which shows it checks the header.
        let wrong = OpenAiCompat::new(LlmConfig {
            api_key: Some("sk-wrong".into()),
            ..config(&server.base_url, 5_000)
        })
        .expect("client");
        assert!(matches!(
            wrong.chat("s", "u").await,
            Err(LlmError::Status(401))
        ));

        let garbage = TestServer::start(Some(KEY), |_| Reply::Body("<html>".into())).await;
        let client = OpenAiCompat::new(config(&garbage.base_url, 5_000)).expect("client");
        let err = client
            .chat("s", "u")
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.starts_with("llm response is not usable: the body is not JSON"),
            "{err}"
        );

        let empty = TestServer::start(Some(KEY), |_| Reply::Body("{\"choices\": []}".into())).await;
        let client = OpenAiCompat::new(config(&empty.base_url, 5_000)).expect("client");
        let err = client
            .chat("s", "u")
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert_eq!(
            err,
            "llm response is not usable: no choices[0].message.content in the body"
        );

        // Nothing listens on the port of a stopped server.
        let base_url = empty.base_url.clone();
        drop(empty);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let client = OpenAiCompat::new(config(&base_url, 5_000)).expect("client");
        let err = client.chat("s", "u").await.err();
        let text = format!(
            "{err:?} {}",
            err.as_ref().map(ToString::to_string).unwrap_or_default()
        );
        assert!(matches!(err, Some(LlmError::Http(_))), "{text}");
        assert!(!text.contains(KEY), "{text}");
    }

    #[tokio::test]
    async fn a_slow_server_hits_the_timeout() {
        let server = TestServer::start(Some(KEY), |_| {
            Reply::Delay(
                Duration::from_secs(5),
                Box::new(Reply::Content("late".into())),
            )
        })
        .await;
        let client = OpenAiCompat::new(config(&server.base_url, 200)).expect("client");
        let started = Instant::now();
        let err = client.chat("s", "u").await.err();
        assert!(matches!(err, Some(LlmError::Timeout(200))), "{err:?}");
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(
            err.map(|e| e.to_string()).as_deref(),
            Some("llm call timed out after 200 ms")
        );
    }

    #[tokio::test]
    async fn an_echoed_key_is_redacted_from_the_answer() {
        let server = TestServer::start(Some(KEY), |_| Reply::EchoAuthorization).await;
        let client = OpenAiCompat::new(config(&server.base_url, 5_000)).expect("client");
        let answer = client.chat("s", "u").await.ok();
        assert_eq!(answer.as_deref(), Some("Bearer <redacted>"));
    }

    #[tokio::test]
    async fn an_oversized_body_is_refused() {
        let huge = format!(
            "{{\"choices\": [{{\"message\": {{\"content\": \"{}\"}}}}]}}",
            "x".repeat(RESPONSE_BYTES_MAX)
        );
        let server = TestServer::start(None, move |_| Reply::Body(huge.clone())).await;
        let client = OpenAiCompat::new(LlmConfig {
            api_key: None,
            ..config(&server.base_url, 5_000)
        })
        .expect("client");
        let err = client
            .chat("s", "u")
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains(&format!("exceeds {RESPONSE_BYTES_MAX}")),
            "{err}"
        );
        assert_eq!(server.requests()[0].authorization, None);
    }
}
