//! [`Llm`]: how a planner asks the model. One call: send a system and a user prompt, parse the
//! answer with the caller's checks, keep the call (failed ones too) for the `LlmCalled` event.
//! Without a configured model, or when the call or the parse fails, the caller gets `None` and
//! answers by its rules. While the model writes, what it writes can go to the run's live
//! subscribers ([`Llm::streaming`]); only the whole answer is recorded.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use chronicle_schemas::Hash;
use serde_json::{Map, Value};

use super::answer::AnswerText;
use super::{Delta, LlmCall, LlmError, LlmProvider};
use crate::plugin::chunks::ChunkSink;

/// A hard bound on one model call, whatever the provider's own timeout: a custom provider that
/// never answers must not hold a run forever.
pub(crate) const CALL_TIMEOUT_MS_MAX: u64 = 120_000;
/// Bytes of a model's answer kept in an `LlmCall`. The answer goes into an `LlmCalled` event,
/// and the store refuses events over 64 KiB.
const RECORDED_RESPONSE_BYTES_MAX: usize = 32 * 1024;

/// The model as one node of a run sees it: asks, and keeps every call for the run's log.
#[derive(Default)]
pub struct Llm {
    provider: Option<Arc<dyn LlmProvider>>,
    calls: Mutex<Vec<LlmCall>>,
    /// Where what the model writes goes while it writes, and what of it.
    stream: Option<(ChunkSink, Streamed)>,
}

/// What of a model's answer goes to the run's subscribers while the model writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Streamed {
    /// The model's reasoning (when the server sends it apart from the answer).
    Reasoning,
    /// The reasoning and the answer's text: the message a person reads. A JSON answer's
    /// `answer` string is that text (decoded as it arrives); any other answer is the text as is.
    Answer,
}

impl std::fmt::Debug for Llm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Llm")
            .field("model", &self.model())
            .finish_non_exhaustive()
    }
}

impl Llm {
    /// With `None`, every `ask` answers `None` and nothing is recorded.
    pub fn new(provider: Option<Arc<dyn LlmProvider>>) -> Self {
        Self {
            provider,
            calls: Mutex::new(Vec::new()),
            stream: None,
        }
    }

    /// Sends what the model writes to `chunks` while it writes (see [`Streamed`]).
    pub fn streaming(mut self, chunks: ChunkSink, what: Streamed) -> Self {
        self.stream = Some((chunks, what));
        self
    }

    /// The configured model, if any.
    pub fn model(&self) -> Option<&str> {
        self.provider.as_deref().map(LlmProvider::model)
    }

    /// One model call: `None` without a model; otherwise the parsed answer, or `None` when the
    /// call or `parse` failed. The call is kept either way (see [`Llm::take_calls`]).
    pub async fn ask<T>(
        &self,
        purpose: &str,
        system: &str,
        user: &str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Option<T> {
        let provider = self.provider.as_ref()?;
        let prompt_hash = prompt_hash(system, user);
        let started = Instant::now();
        let message = Mutex::new(AnswerText::default());
        let on_delta = |delta: Delta<'_>| match (&self.stream, delta) {
            (Some((chunks, _)), Delta::Reasoning(_)) => chunks.send(delta),
            (Some((chunks, Streamed::Answer)), Delta::Text(text)) => {
                let piece = message
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(text);
                if !piece.is_empty() {
                    chunks.send(Delta::Text(&piece));
                }
            }
            _ => {}
        };
        let answer = tokio::time::timeout(
            Duration::from_millis(CALL_TIMEOUT_MS_MAX),
            provider.chat_streaming(system, user, &on_delta),
        )
        .await
        .unwrap_or(Err(LlmError::Timeout(CALL_TIMEOUT_MS_MAX)));
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let (value, response, error) = match answer {
            Ok(text) => match parse(&text) {
                Ok(value) => (Some(value), text, None),
                Err(why) => (None, text, Some(LlmError::BadResponse(why).to_string())),
            },
            Err(e) => (None, String::new(), Some(e.to_string())),
        };
        if let Some(error) = &error {
            tracing::warn!(purpose, model = provider.model(), %error, "llm call not usable, the rules answer instead");
        }
        let call = LlmCall {
            purpose: purpose.to_owned(),
            model: provider.model().to_owned(),
            prompt_hash,
            response: bounded_response(response),
            duration_ms,
            error,
        };
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(call);
        value
    }

    /// The calls made so far, oldest first; the list is emptied.
    pub fn take_calls(&self) -> Vec<LlmCall> {
        std::mem::take(&mut *self.calls.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// `blake3(system ‖ "\n" ‖ user)`: identifies the exact prompt without storing it.
fn prompt_hash(system: &str, user: &str) -> Hash {
    Hash::of_content(format!("{system}\n{user}").as_bytes())
}

/// The answer cut to `RECORDED_RESPONSE_BYTES_MAX` on a char boundary, saying so.
fn bounded_response(mut text: String) -> String {
    if text.len() <= RECORDED_RESPONSE_BYTES_MAX {
        return text;
    }
    let total = text.len();
    let mut cut = RECORDED_RESPONSE_BYTES_MAX;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    text.push_str(&format!("…[truncated, {total} bytes in all]"));
    text
}

/// The JSON object in a model's answer, tolerating ```json fences and chatter around it.
pub fn json_object(text: &str) -> Result<Map<String, Value>, String> {
    let trimmed = text.trim();
    let unfenced = match trimmed.strip_prefix("```") {
        // The fence's first line may name a language (```json).
        Some(rest) => {
            let body = rest
                .split_once('\n')
                .map_or("", |(_, body)| body)
                .trim_end();
            body.strip_suffix("```").unwrap_or(body).trim()
        }
        None => trimmed,
    };
    let first_error = match serde_json::from_str::<Value>(unfenced) {
        Ok(Value::Object(map)) => return Ok(map),
        Ok(other) => {
            return Err(format!(
                "the answer is JSON but not an object: {}",
                crate::plugin::agents::json_type(&other)
            ));
        }
        Err(e) => e,
    };
    if let (Some(start), Some(end)) = (unfenced.find('{'), unfenced.rfind('}'))
        && start < end
        && let Ok(Value::Object(map)) = serde_json::from_str::<Value>(&unfenced[start..=end])
    {
        return Ok(map);
    }
    Err(format!("the answer is not JSON: {first_error}"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::plugin::llm::openai::{LlmConfig, OpenAiCompat};
    use chronicle_testkit::model::{Reply, TestServer};

    const KEY: &str = "sk-ask-3c9e1f7a2b5d";

    fn llm(server: &TestServer, timeout_ms: u64) -> Llm {
        let config = LlmConfig {
            base_url: server.base_url.clone(),
            model: "gpt-4o-mini".into(),
            api_key: Some(KEY.into()),
            timeout_ms,
        };
        Llm::new(Some(Arc::new(OpenAiCompat::new(config).expect("client"))))
    }

    fn object(text: &str) -> Result<Map<String, Value>, String> {
        json_object(text)
    }

    #[tokio::test]
    async fn without_a_model_nothing_is_asked_or_recorded() {
        let llm = Llm::new(None);
        assert_eq!(llm.model(), None);
        assert_eq!(llm.ask("p", "s", "u", object).await, None);
        assert!(llm.take_calls().is_empty());
    }

    #[tokio::test]
    async fn answers_are_parsed_and_every_call_is_kept_without_the_key() {
        let server = TestServer::start(Some(KEY), |body| {
            match body["messages"][1]["content"].as_str() {
                Some("good") => Reply::Content("```json\n{\"ok\": true}\n```".into()),
                Some("chatty") => Reply::Content("Sure! {\"ok\": 1} hope it helps".into()),
                Some("bad") => Reply::Content("no json here".into()),
                _ => Reply::Status(500),
            }
        })
        .await;
        let llm = llm(&server, 5_000);
        assert_eq!(
            llm.ask("a", "sys", "good", object).await,
            Some(json!({"ok": true}).as_object().unwrap().clone())
        );
        assert!(llm.ask("b", "sys", "chatty", object).await.is_some());
        assert_eq!(llm.ask("c", "sys", "bad", object).await, None);
        assert_eq!(llm.ask("d", "sys", "boom", object).await, None);
        let calls = llm.take_calls();
        let summary: Vec<(&str, bool)> = calls
            .iter()
            .map(|c| (c.purpose.as_str(), c.error.is_some()))
            .collect();
        assert_eq!(
            summary,
            [("a", false), ("b", false), ("c", true), ("d", true)]
        );
        assert_eq!(calls[0].prompt_hash, prompt_hash("sys", "good"));
        assert!(calls[3].error.as_deref().unwrap().contains("500"));
        assert!(!format!("{calls:?}").contains(KEY));
        assert!(llm.take_calls().is_empty(), "taking empties the list");
    }

    #[tokio::test]
    async fn a_slow_model_times_out_into_none_and_is_recorded() {
        let server = TestServer::start(Some(KEY), |_| {
            Reply::Delay(
                Duration::from_millis(2_000),
                Box::new(Reply::Content("{}".into())),
            )
        })
        .await;
        let llm = llm(&server, 100);
        assert_eq!(llm.ask("slow", "s", "u", object).await, None);
        let calls = llm.take_calls();
        assert_eq!(calls.len(), 1);
        assert!(calls[0].error.as_deref().unwrap().contains("timed out"));
    }

    #[tokio::test]
    async fn a_streaming_llm_sends_the_answer_text_and_the_reasoning_while_it_comes() {
        use chronicle_testkit::model::Piece;
        let answer = r#"{"answer": "Sunny, \"18°C\" in Seoul and a long sentence after it", "sources": ["kma"]}"#;
        let pieces: Vec<Piece> = std::iter::once(Piece::Reasoning("checking the forecast".into()))
            .chain(
                answer
                    .as_bytes()
                    .chunks(5)
                    .map(|c| Piece::Content(String::from_utf8_lossy(c).into_owned())),
            )
            .collect();
        let server = TestServer::start(Some(KEY), move |_| Reply::Stream(pieces.clone())).await;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = {
            let seen = seen.clone();
            ChunkSink::new(move |d| seen.lock().unwrap().push(format!("{d:?}")))
        };
        let llm = llm(&server, 5_000).streaming(sink, Streamed::Answer);
        let parsed = llm.ask("response", "s", "u", object).await.expect("parsed");
        assert_eq!(parsed["sources"], json!(["kma"]));
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen[0], "Reasoning(\"checking the forecast\")");
        let text: String = seen[1..]
            .iter()
            .map(|d| {
                d.strip_prefix("Text(")
                    .and_then(|d| d.strip_suffix(')'))
                    .and_then(|d| serde_json::from_str::<String>(d).ok())
                    .unwrap_or_else(|| panic!("not a text delta: {d}"))
            })
            .collect();
        assert_eq!(
            text,
            "Sunny, \"18°C\" in Seoul and a long sentence after it"
        );
        assert!(seen.len() > 3, "several pieces: {seen:?}");
        // The whole answer is recorded, once.
        let calls = llm.take_calls();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].response, answer);

        // Only the reasoning streams from a node whose answer is not the message.
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = {
            let seen = seen.clone();
            ChunkSink::new(move |d| seen.lock().unwrap().push(format!("{d:?}")))
        };
        let llm = super::Llm::new(llm.provider.clone()).streaming(sink, Streamed::Reasoning);
        assert!(llm.ask("plan", "s", "u", object).await.is_some());
        assert_eq!(
            *seen.lock().unwrap(),
            ["Reasoning(\"checking the forecast\")"]
        );
    }

    #[test]
    fn json_is_found_in_fences_and_chatter() {
        for text in [
            "{\"a\": 1}",
            "```json\n{\"a\": 1}\n```",
            "```\n{\"a\": 1}\n```",
            "Here you go: {\"a\": 1} — anything else?",
        ] {
            assert_eq!(json_object(text).unwrap()["a"], 1, "{text}");
        }
        assert!(
            json_object("[1, 2]")
                .unwrap_err()
                .contains("not an object: an array")
        );
        assert!(json_object("nope").unwrap_err().contains("not JSON"));
    }

    #[test]
    fn recorded_responses_are_bounded() {
        let short = "가".repeat(10);
        assert_eq!(bounded_response(short.clone()), short);
        let long = "가".repeat(RECORDED_RESPONSE_BYTES_MAX);
        let cut = bounded_response(long);
        assert!(cut.len() < RECORDED_RESPONSE_BYTES_MAX + 64);
        assert!(cut.ends_with("bytes in all]"), "{}", &cut[cut.len() - 40..]);
    }
}
