//! The OpenAI-compatible chat-completions client (`POST {base_url}/chat/completions`) and its
//! configuration. The API key never leaves this file except in the `Authorization` header.

use std::fmt;
use std::time::Duration;

use serde_json::{Value, json};

use super::redact::{REDACTED, Redactor, StreamRedactor};
use super::{ChatRequest, ChatResponse, Delta, LlmError, LlmProvider, Message, OnDelta, ToolCall};

/// The model when `CHRONICLE_LLM_MODEL` is unset: small and cheap, enough for intent analysis.
pub const DEFAULT_MODEL: &str = "gpt-4o-mini";
/// The base URL when only a key is configured.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
/// An agent's default timeout (30 s), also used for one model call.
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// Low: a supervisor wants consistent, not creative, answers.
const CHAT_TEMPERATURE: f64 = 0.3;
/// The most a supervisor's prompts need (planning and formatting); intent analysis needs less, but
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
        self.chat_streaming(system, user, &|_| {}).await
    }

    async fn chat_streaming(
        &self,
        system: &str,
        user: &str,
        on_delta: &OnDelta<'_>,
    ) -> Result<String, LlmError> {
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
        self.exchange(body, on_delta)
            .await?
            .content
            .ok_or_else(|| LlmError::BadResponse("the answer has no content".into()))
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
        self.exchange(body, on_delta).await
    }
}

impl OpenAiCompat {
    /// POSTs `body` asking for a streamed answer and reads it (bounded in size): the pieces of
    /// text and reasoning go to `on_delta` as they arrive, redacted. A server that ignores
    /// `stream` and answers one JSON completion is read as that, its text sent once.
    async fn exchange(
        &self,
        mut body: Value,
        on_delta: &OnDelta<'_>,
    ) -> Result<ChatResponse, LlmError> {
        body["stream"] = json!(true);
        // The token counts come in a last chunk only when asked for.
        body["stream_options"] = json!({"include_usage": true});
        let mut request = self.client.post(&self.endpoint).json(&body);
        if let Some(key) = &self.api_key {
            // bearer_auth marks the header sensitive, so reqwest never prints it either.
            request = request.bearer_auth(key);
        }
        if let Some(tp) = crate::plugin::trace::traceparent() {
            request = request.header("traceparent", tp);
        }
        let response = request.send().await.map_err(|e| self.transport_error(e))?;
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
        let streamed = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("text/event-stream"));
        if streamed {
            self.read_stream(response, on_delta).await
        } else {
            let parsed = self.read_json(response).await?;
            let answer = self.completion(&parsed)?;
            if let Some(r) = &answer.reasoning {
                on_delta(Delta::Reasoning(r));
            }
            if let Some(c) = &answer.content {
                on_delta(Delta::Text(c));
            }
            Ok(answer)
        }
    }

    /// The whole body as JSON (bounded in size).
    async fn read_json(&self, mut response: reqwest::Response) -> Result<Value, LlmError> {
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

    /// A `chat.completion` object as the answer, every text redacted.
    fn completion(&self, parsed: &Value) -> Result<ChatResponse, LlmError> {
        let message = parsed
            .pointer("/choices/0/message")
            .ok_or_else(|| LlmError::BadResponse("no choices[0].message in the body".into()))?;
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(|t| self.redact(t.to_owned()));
        let tool_calls = match message.get("tool_calls") {
            None | Some(Value::Null) => Vec::new(),
            Some(calls) => calls
                .as_array()
                .ok_or_else(|| LlmError::BadResponse("tool_calls is not an array".into()))?
                .iter()
                .map(|call| {
                    let field = |path: &str| call.pointer(path).and_then(Value::as_str);
                    self.tool_call(
                        field("/id"),
                        field("/function/name"),
                        field("/function/arguments"),
                    )
                })
                .collect::<Result<_, _>>()?,
        };
        Ok(ChatResponse {
            content: text(message.get("content")),
            reasoning: text(reasoning_of(message)),
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

    /// One tool call of the answer, its arguments redacted (they are recorded).
    fn tool_call(
        &self,
        id: Option<&str>,
        name: Option<&str>,
        arguments: Option<&str>,
    ) -> Result<ToolCall, LlmError> {
        match (id, name) {
            (Some(id), Some(name)) if !id.is_empty() && !name.is_empty() => Ok(ToolCall {
                id: id.to_owned(),
                name: name.to_owned(),
                arguments: self.redact(
                    arguments
                        .filter(|a| !a.is_empty())
                        .unwrap_or("{}")
                        .to_owned(),
                ),
            }),
            _ => Err(LlmError::BadResponse(
                "a tool call without id or function.name".into(),
            )),
        }
    }

    /// Reads a stream of `chat.completion.chunk` events up to `data: [DONE]`, sending the pieces
    /// of text and reasoning on as they arrive (each through its own [`StreamRedactor`], so a key
    /// split across chunks is still found before anything of it leaves), and assembles the
    /// answer: the text, the reasoning, the tool calls from their fragments by index, the usage
    /// and the finish reason. A stream that breaks or reports an error before its end is an error.
    async fn read_stream(
        &self,
        mut response: reqwest::Response,
        on_delta: &OnDelta<'_>,
    ) -> Result<ChatResponse, LlmError> {
        let mut buf: Vec<u8> = Vec::new();
        let mut read = 0usize;
        let mut answer = Assembly::default();
        let mut text = StreamRedactor::new(self.redactor.as_ref());
        let mut reasoning = StreamRedactor::new(self.redactor.as_ref());
        let send = |piece: String, is_reasoning: bool| match piece.as_str() {
            "" => {}
            p if is_reasoning => on_delta(Delta::Reasoning(p)),
            p => on_delta(Delta::Text(p)),
        };
        let mut done = false;
        while !done {
            let Some(chunk) = response
                .chunk()
                .await
                .map_err(|e| self.transport_error(e))?
            else {
                break;
            };
            read += chunk.len();
            if read > RESPONSE_BYTES_MAX {
                return Err(LlmError::BadResponse(format!(
                    "a streamed answer of more than {RESPONSE_BYTES_MAX} bytes"
                )));
            }
            // Lines may end in CRLF; JSON data never holds a raw CR.
            buf.extend(chunk.iter().filter(|b| **b != b'\r'));
            while let Some(data) = take_event(&mut buf) {
                if data.trim() == "[DONE]" {
                    done = true;
                    break;
                }
                let chunk: Value = serde_json::from_str(&data).map_err(|e| {
                    LlmError::BadResponse(format!("a streamed chunk is not JSON: {e}"))
                })?;
                if let Some(error) = chunk.get("error") {
                    let message = error
                        .get("message")
                        .and_then(Value::as_str)
                        .map_or_else(|| error.to_string(), str::to_owned);
                    return Err(LlmError::BadResponse(self.redact(format!(
                        "the server reported an error in the stream: {message}"
                    ))));
                }
                let (text_piece, reasoning_piece) = answer.add(&chunk);
                if let Some(piece) = reasoning_piece {
                    send(reasoning.push(&piece), true);
                }
                if let Some(piece) = text_piece {
                    // The reasoning is over once the answer's text begins.
                    send(reasoning.finish(), true);
                    send(text.push(&piece), false);
                }
            }
        }
        if !done && answer.finish_reason.is_none() {
            return Err(LlmError::BadResponse(
                "the stream ended before the answer was complete".into(),
            ));
        }
        send(reasoning.finish(), true);
        send(text.finish(), false);
        answer.finish(self)
    }
}

/// The reasoning beside a message or a delta, under either name servers use.
fn reasoning_of(v: &Value) -> Option<&Value> {
    v.get("reasoning_content").or(v.get("reasoning"))
}

/// Takes the `data` of the first complete server-sent event (ended by a blank line) out of
/// `buf`; events without data (comments, keep-alives) are skipped.
fn take_event(buf: &mut Vec<u8>) -> Option<String> {
    loop {
        let end = buf.windows(2).position(|w| w == b"\n\n")?;
        let event: Vec<u8> = buf.drain(..end + 2).collect();
        let text = String::from_utf8_lossy(&event);
        let data: Vec<&str> = text
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(|d| d.strip_prefix(' ').unwrap_or(d))
            .collect();
        if !data.is_empty() {
            return Some(data.join("\n"));
        }
    }
}

/// A streamed answer as its chunks build it up.
#[derive(Default)]
struct Assembly {
    content: Option<String>,
    reasoning: Option<String>,
    /// Tool calls by their `index`: id, name and the arguments' fragments joined.
    calls: std::collections::BTreeMap<u64, (String, String, String)>,
    usage: Option<super::Usage>,
    finish_reason: Option<String>,
}

impl Assembly {
    /// Adds one chunk; answers the pieces of text and of reasoning it carried.
    fn add(&mut self, chunk: &Value) -> (Option<String>, Option<String>) {
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = serde_json::from_value(usage.clone()).ok();
        }
        let Some(choice) = chunk.pointer("/choices/0") else {
            return (None, None);
        };
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_owned());
        }
        let delta = &choice["delta"];
        let piece = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
        let text = piece(delta.get("content"));
        let reasoning = piece(reasoning_of(delta));
        if let Some(t) = &text {
            self.content.get_or_insert_default().push_str(t);
        }
        if let Some(r) = &reasoning {
            self.reasoning.get_or_insert_default().push_str(r);
        }
        for (position, call) in delta["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let index = call["index"].as_u64().unwrap_or(position as u64);
            let (id, name, arguments) = self.calls.entry(index).or_default();
            let field = |path: &str| call.pointer(path).and_then(Value::as_str);
            if let Some(i) = field("/id") {
                i.clone_into(id);
            }
            if let Some(n) = field("/function/name") {
                name.push_str(n);
            }
            if let Some(a) = field("/function/arguments") {
                arguments.push_str(a);
            }
        }
        (text, reasoning)
    }

    /// The answer, every text redacted whole (the pieces sent on were redacted as they went).
    fn finish(self, client: &OpenAiCompat) -> Result<ChatResponse, LlmError> {
        let tool_calls = self
            .calls
            .into_values()
            .map(|(id, name, arguments)| client.tool_call(Some(&id), Some(&name), Some(&arguments)))
            .collect::<Result<_, _>>()?;
        Ok(ChatResponse {
            content: self.content.map(|c| client.redact(c)),
            reasoning: self.reasoning.map(|r| client.redact(r)),
            tool_calls,
            usage: self.usage,
            finish_reason: self.finish_reason,
        })
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
    use chronicle_testkit::model::{Gate, Piece, Reply, TestServer};

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
                "stream": true,
                "stream_options": {"include_usage": true},
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
        // Streamed in pieces, but a text this short is held back whole until the end: the key
        // could still begin in it.
        assert_eq!(*deltas.lock().unwrap(), ["Text(\"looking\")"]);
        assert!(server.requests()[0].streams());

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
            "llm response is not usable: no choices[0].message in the body"
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

    /// A client without a key (nothing is held back for redaction) that records its deltas.
    fn keyless(server: &TestServer) -> OpenAiCompat {
        OpenAiCompat::new(LlmConfig {
            api_key: None,
            ..config(&server.base_url, 5_000)
        })
        .expect("client")
    }

    #[tokio::test]
    async fn a_streamed_answer_reaches_on_delta_while_the_model_still_writes() {
        let gate = Gate::new();
        let reply = Reply::Stream(vec![
            Piece::Reasoning("weighing ".into()),
            Piece::Reasoning("it".into()),
            Piece::Content("Hel".into()),
            Piece::Content("lo".into()),
            Piece::Wait(gate.clone()),
            Piece::Content(" world".into()),
        ]);
        let server = TestServer::start(None, move |_| reply.clone()).await;
        let client = keyless(&server);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let call = tokio::spawn(async move {
            let on_delta = |d: Delta<'_>| {
                let _ = tx.send(format!("{d:?}"));
            };
            client.chat_streaming("s", "u", &on_delta).await
        });
        // The first pieces arrive while the server still holds the rest back.
        let mut seen = Vec::new();
        while seen.last().map(String::as_str) != Some("Text(\"lo\")") {
            seen.push(rx.recv().await.expect("a delta"));
        }
        assert_eq!(
            seen,
            [
                "Reasoning(\"weighing \")",
                "Reasoning(\"it\")",
                "Text(\"Hel\")",
                "Text(\"lo\")"
            ]
        );
        gate.open();
        let answer = call.await.unwrap().expect("an answer");
        assert_eq!(answer, "Hello world");
        assert_eq!(rx.recv().await.as_deref(), Some("Text(\" world\")"));
    }

    #[tokio::test]
    async fn a_stream_assembles_reasoning_and_tool_calls_from_their_fragments() {
        let server = TestServer::start(None, |_| Reply::ToolCalls {
            content: None,
            calls: vec![
                ("read_file".into(), json!({"path": "notes/a long name.md"})),
                ("ls".into(), json!({})),
            ],
        })
        .await;
        let client = keyless(&server);
        let answer = client
            .complete(&ChatRequest::default(), &|_| {})
            .await
            .expect("an answer");
        assert_eq!(answer.content, None);
        assert_eq!(
            answer.tool_calls,
            [
                ToolCall {
                    id: "call_0".into(),
                    name: "read_file".into(),
                    arguments: json!({"path": "notes/a long name.md"}).to_string(),
                },
                ToolCall {
                    id: "call_1".into(),
                    name: "ls".into(),
                    arguments: "{}".into(),
                },
            ]
        );
        assert_eq!(answer.usage.map(|u| u.total_tokens), Some(15));

        let reasoning = Reply::Stream(vec![
            Piece::Reasoning("a".into()),
            Piece::Reasoning("b".into()),
            Piece::Content("c".into()),
        ]);
        let server = TestServer::start(None, move |_| reasoning.clone()).await;
        let answer = keyless(&server)
            .complete(&ChatRequest::default(), &|_| {})
            .await
            .expect("an answer");
        assert_eq!(
            (answer.reasoning.as_deref(), answer.content.as_deref()),
            (Some("ab"), Some("c"))
        );
        assert_eq!(answer.finish_reason.as_deref(), Some("stop"));
    }

    #[tokio::test]
    async fn a_key_split_across_chunks_never_leaves_in_a_delta() {
        let pieces = Reply::Stream(vec![
            Piece::Content("Bearer sk-te".into()),
            Piece::Content("st-7f3a9".into()),
            Piece::Content("c1e5b2d4680 and ".into()),
            Piece::Content("the rest of a longer answer that streams on".into()),
        ]);
        let server = TestServer::start(Some(KEY), move |_| pieces.clone()).await;
        let client = OpenAiCompat::new(config(&server.base_url, 5_000)).expect("client");
        let deltas = std::sync::Mutex::new(Vec::<String>::new());
        let on_delta = |d: Delta<'_>| {
            if let Delta::Text(t) = d {
                deltas.lock().unwrap().push(t.to_owned());
            }
        };
        let answer = client.chat_streaming("s", "u", &on_delta).await.unwrap();
        let expected = "Bearer <redacted> and the rest of a longer answer that streams on";
        assert_eq!(answer, expected);
        let deltas = deltas.into_inner().unwrap();
        assert_eq!(deltas.concat(), expected);
        for d in &deltas {
            assert!(!d.contains("sk-te") && !d.contains("7f3a9"), "{deltas:?}");
        }

        // The header echoed back, streamed in pieces of four characters.
        let echo = TestServer::start(Some(KEY), |_| Reply::EchoAuthorization).await;
        let client = OpenAiCompat::new(config(&echo.base_url, 5_000)).expect("client");
        let deltas = std::sync::Mutex::new(String::new());
        let on_delta = |d: Delta<'_>| {
            if let Delta::Text(t) = d {
                deltas.lock().unwrap().push_str(t);
            }
        };
        assert_eq!(
            client.chat_streaming("s", "u", &on_delta).await.unwrap(),
            "Bearer <redacted>"
        );
        assert_eq!(deltas.into_inner().unwrap(), "Bearer <redacted>");
    }

    #[tokio::test]
    async fn a_server_that_ignores_stream_is_read_as_one_completion() {
        let body = json!({"choices": [{"message": {"role": "assistant", "content": "whole",
            "reasoning_content": "why"}, "finish_reason": "stop"}]});
        let server = TestServer::start(None, move |_| Reply::Body(body.to_string())).await;
        let deltas = std::sync::Mutex::new(Vec::new());
        let answer = keyless(&server)
            .complete(&ChatRequest::default(), &|d| {
                deltas.lock().unwrap().push(format!("{d:?}"))
            })
            .await
            .expect("an answer");
        assert_eq!(answer.content.as_deref(), Some("whole"));
        assert_eq!(
            *deltas.lock().unwrap(),
            ["Reasoning(\"why\")", "Text(\"whole\")"]
        );
        assert!(server.requests()[0].streams());
    }

    #[tokio::test]
    async fn a_stream_that_fails_midway_is_an_error_without_the_key() {
        let reported = Reply::Stream(vec![
            Piece::Content("part".into()),
            Piece::Error(format!("overloaded, key {KEY}")),
        ]);
        let server = TestServer::start(Some(KEY), move |_| reported.clone()).await;
        let client = OpenAiCompat::new(config(&server.base_url, 5_000)).expect("client");
        let err = client.chat("s", "u").await.err();
        let text = err.as_ref().map(ToString::to_string).unwrap_or_default();
        assert!(matches!(err, Some(LlmError::BadResponse(_))), "{text}");
        assert!(text.contains("overloaded, key <redacted>"), "{text}");

        let cut = Reply::Stream(vec![Piece::Content("part".into()), Piece::Drop]);
        let server = TestServer::start(None, move |_| cut.clone()).await;
        let err = keyless(&server).chat("s", "u").await.err();
        assert!(
            matches!(err, Some(LlmError::Http(_) | LlmError::BadResponse(_))),
            "{err:?}"
        );

        let huge = Reply::Stream(vec![Piece::Content("x".repeat(RESPONSE_BYTES_MAX))]);
        let server = TestServer::start(None, move |_| huge.clone()).await;
        let err = keyless(&server).chat("s", "u").await.err();
        assert!(
            err.as_ref()
                .is_some_and(|e| e.to_string().contains("a streamed answer of more than")),
            "{err:?}"
        );
    }
}
