//! Streaming answers, black-box over a real listener with a scripted OpenAI-compatible model on
//! loopback: the supervisor's answer reaches SSE and WebSocket clients as `message.chunk`s
//! (without ids, never stored) before its one durable `message.final`; the phase and note that
//! announce a model call are durable before the model is asked; a client that reconnects with
//! `Last-Event-ID` gets the events it missed and then the next chunks; the key, split across the
//! model's chunks, never reaches a client; and subscribers that do not read never hold the run up.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use chronicle_api::{ApiConfig, Tokens};
use chronicle_client::{EventStream, EventsFrom, StreamItem};
use chronicle_engine::llm::{LlmConfig, OpenAiCompat};
use chronicle_engine::store::Store;
use chronicle_engine::{Live, Settings};
use chronicle_schemas::{Event, HitlMode, Phase, RunId};
use chronicle_testkit::model::{Gate, Piece, Reply, TestServer};
use chronicle_wire::names::ChunkType;
use chronicle_wire::{ChunkData, RunRequest};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::connect_async;
use tokio_tungstenite::tungstenite::Message;

use crate::api_support::{Server, server_settings};

/// A guard against a hang, never a measurement.
const GUARD: Duration = Duration::from_secs(30);
const KEY: &str = "sk-stream-Q7w2E9r4T6y1";
const QUERY: &str = "강남역 근처 30평대 아파트 매매 시세 알려줘";
/// The system prompt of the real-estate planner's answer: the one request whose answer streams.
const FORMAT_PROMPT: &str = "formatting real estate information";

/// What the scripted model saw when it was asked: the system prompt, and the durable events of
/// the log at that moment (kind, and the phase of a phase change).
#[derive(Clone, Debug)]
struct Asked {
    system: String,
    durable: Vec<String>,
}

/// A model that answers the answer-formatting request with `answer` (a stream of pieces) and
/// every other request with a 500 (so the rules plan, quickly), and notes what the log held when
/// it was asked.
struct Model {
    server: TestServer,
    store: Arc<OnceLock<Store>>,
    asked: Arc<Mutex<Vec<Asked>>>,
}

impl Model {
    async fn start(answer: Vec<Piece>) -> Model {
        let store: Arc<OnceLock<Store>> = Arc::default();
        let asked: Arc<Mutex<Vec<Asked>>> = Arc::default();
        let (seen_store, seen) = (store.clone(), asked.clone());
        let server = TestServer::start(Some(KEY), move |body| {
            let system = body["messages"][0]["content"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let durable = seen_store.get().map(durable_kinds).unwrap_or_default();
            let formatting = system.contains(FORMAT_PROMPT);
            seen.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Asked { system, durable });
            if formatting {
                Reply::Stream(answer.clone())
            } else {
                Reply::Status(500)
            }
        })
        .await;
        Model {
            server,
            store,
            asked,
        }
    }

    fn asked(&self) -> Vec<Asked> {
        self.asked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The durable events of the whole log, as `Kind` or `PhaseChanged:phase`.
fn durable_kinds(store: &Store) -> Vec<String> {
    store
        .read_range(0, store.durable_next_offset())
        .map(|e| {
            let e = e.expect("a readable log");
            match e.event {
                Event::PhaseChanged { phase } => format!("PhaseChanged:{}", phase.as_str()),
                other => other.kind().to_owned(),
            }
        })
        .collect()
}

/// A server with the real-estate agents and the scripted model (with the key).
async fn streaming_server(model: &Model) -> Server {
    let config = LlmConfig {
        base_url: model.server.base_url.clone(),
        model: "test-model".into(),
        api_key: Some(KEY.into()),
        timeout_ms: 30_000,
    };
    let settings = Settings {
        llm: Some(Arc::new(OpenAiCompat::new(config).unwrap())),
        ..chronicle_realestate::settings()
    };
    let srv = server_settings(Tokens::none(), settings, ApiConfig::default()).await;
    model
        .store
        .set(srv.engine.store().clone())
        .unwrap_or_else(|_| panic!("one store"));
    srv
}

/// The model's JSON answer in pieces: `{"answer": "` + `text` in pieces of `size` bytes' worth
/// of characters + `"}`.
fn json_answer(text: &str, size: usize) -> Vec<Piece> {
    let mut pieces = vec![Piece::Content("{\"answer\": \"".into())];
    let chars: Vec<char> = text.chars().collect();
    pieces.extend(
        chars
            .chunks(size)
            .map(|c| Piece::Content(c.iter().collect())),
    );
    pieces.push(Piece::Content("\", \"insights\": []}".into()));
    pieces
}

/// A long answer: the key may start in any of the last bytes, so a streamed answer is held back
/// by a few dozen bytes; this one is long enough to stream well before its end.
const ANSWER: &str = "강남역 근처 30평대 아파트 매매 시세는 13억에서 15억 사이입니다. \
    역에서 가까울수록 비싸고, 최근 석 달 동안 거래가 조금 늘었습니다. 자세한 매물은 목록을 보세요.";

async fn start(srv: &Server) -> RunId {
    let req = RunRequest {
        hitl: Some(HitlMode::None),
        ..RunRequest::new(QUERY)
    };
    srv.client.start_run(&req).await.unwrap().run_id
}

async fn next_item(events: &mut EventStream) -> Option<StreamItem> {
    tokio::time::timeout(GUARD, events.next_item())
        .await
        .expect("an SSE message or the end of the stream")
        .map(|e| e.expect("a well-formed message"))
}

/// Everything a stream sends until it ends.
async fn all_items(events: &mut EventStream) -> Vec<StreamItem> {
    let mut items = Vec::new();
    while let Some(item) = next_item(events).await {
        items.push(item);
    }
    items
}

fn chunk_text(items: &[StreamItem]) -> String {
    items
        .iter()
        .filter_map(|i| match i {
            StreamItem::Chunk(c) if c.kind_type == ChunkType::Message => {
                Some(c.content.text.as_str())
            }
            _ => None,
        })
        .collect()
}

/// The position of the event named `name` among `items`.
fn position(items: &[StreamItem], name: &str) -> usize {
    items
        .iter()
        .position(|i| matches!(i, StreamItem::Event(e) if e.name == name))
        .unwrap_or_else(|| panic!("no {name} in {items:?}"))
}

/// The final answer's text, from the run's state.
async fn final_answer(srv: &Server, run: RunId) -> String {
    let s = srv.engine.state(run, None).unwrap();
    s.supervisor.final_response.as_ref().unwrap()["answer"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_answer_streams_over_sse_as_chunks_without_ids_before_its_one_durable_message() {
    // The key, split across the model's chunks, is in the answer too.
    let mut pieces = json_answer(ANSWER, 3);
    pieces.insert(5, Piece::Content(format!(" {}", &KEY[..7])));
    pieces.insert(6, Piece::Content(format!("{} ", &KEY[7..])));
    // The model reasons before it answers (as `reasoning_content`).
    pieces.insert(0, Piece::Reasoning("매물 목록과 시세를 ".into()));
    pieces.insert(1, Piece::Reasoning("살펴보는 중".into()));
    let model = Model::start(pieces).await;
    let srv = streaming_server(&model).await;
    // The all-runs stream, open before the run starts.
    let mut everything = srv.client.all_events(EventsFrom::default()).await.unwrap();
    let run = start(&srv).await;
    let mut events = srv
        .client
        .run_events(run, EventsFrom::default())
        .await
        .unwrap();
    let items = all_items(&mut events).await;
    let mut across = Vec::new();
    while !across
        .iter()
        .any(|i| matches!(i, StreamItem::Event(e) if e.name == "run.end"))
    {
        across.push(
            next_item(&mut everything)
                .await
                .expect("the stream goes on"),
        );
    }

    // The chunks come after the phase that announced the answer and before the final message;
    // each is the run's, of the message, with no TODO (the supervisor's own answer).
    let chunks: Vec<&ChunkData> = items
        .iter()
        .filter_map(|i| match i {
            StreamItem::Chunk(c) => Some(c),
            StreamItem::Event(_) => None,
        })
        .collect();
    assert!(chunks.len() >= 3, "several chunks: {chunks:?}");
    for c in &chunks {
        assert_eq!(
            (c.run_id, &c.content.todo_id, &c.content.agent),
            (run, &None, &None)
        );
    }
    let reasoning: String = chunks
        .iter()
        .filter(|c| c.kind_type == ChunkType::Reasoning)
        .map(|c| c.content.text.as_str())
        .collect();
    assert_eq!(reasoning, "매물 목록과 시세를 살펴보는 중");
    let first_chunk = items
        .iter()
        .position(|i| matches!(i, StreamItem::Chunk(_)))
        .unwrap();
    let last_chunk = items
        .iter()
        .rposition(|i| matches!(i, StreamItem::Chunk(_)))
        .unwrap();
    let phase = items
        .iter()
        .position(|i| {
            matches!(i, StreamItem::Event(e)
                if e.data.event().ok() == Some(Event::PhaseChanged { phase: Phase::ResponseGeneration }))
        })
        .expect("the response_generation phase");
    assert!(phase < first_chunk, "{items:?}");
    assert!(last_chunk < position(&items, "message.final"), "{items:?}");

    // Joined, the chunks are the answer a person reads, the key redacted as in the record.
    let answer = final_answer(&srv, run).await;
    assert!(answer.contains("<redacted>"), "{answer}");
    assert_eq!(chunk_text(&items).trim(), answer);
    // The all-runs stream sends the same chunks among the run's events (ids: global offsets).
    // It takes chunks and events as they come, favouring neither, so the last chunks may come
    // after the run's end.
    while chunk_text(&across).trim().len() < answer.len() {
        across.push(
            next_item(&mut everything)
                .await
                .expect("the stream goes on"),
        );
    }
    assert_eq!(chunk_text(&across).trim(), answer);
    assert!(position(&across, "message.final") > 0);
    let streamed: String = chunks.iter().map(|c| c.content.text.as_str()).collect();
    for w in KEY.as_bytes().windows(8) {
        let w = std::str::from_utf8(w).unwrap();
        assert!(!streamed.contains(w), "{w} of the key in {streamed}");
    }

    // Nothing of the chunks is stored: the log is exactly the events the stream sent, with one
    // final message, and the model's whole answer is one recorded call.
    let sent: Vec<u64> = items
        .iter()
        .filter_map(|i| match i {
            StreamItem::Event(e) => Some(e.id),
            StreamItem::Chunk(_) => None,
        })
        .collect();
    let log = srv.client.log(run, 0).await.unwrap();
    assert_eq!(sent, log.iter().map(|e| e.seq).collect::<Vec<_>>());
    let finals = log
        .iter()
        .filter(|e| matches!(e.event, Event::ResponseGenerated { .. }))
        .count();
    assert_eq!(finals, 1);
    assert!(log.iter().any(|e| matches!(&e.event,
        Event::LlmCalled { purpose, error: None, .. } if purpose == "response_formatting")));

    // The model was asked to stream, and only once the phase announcing each call was durable:
    // planning before the intent request, response generation and its note before the answer.
    let asked = model.asked();
    assert!(model.server.requests().iter().all(|r| r.streams()));
    let intent = &asked[0];
    assert_eq!(intent.durable.last().unwrap(), "PhaseChanged:planning");
    let formatting = asked
        .iter()
        .find(|a| a.system.contains(FORMAT_PROMPT))
        .unwrap();
    let n = formatting.durable.len();
    assert_eq!(
        formatting.durable[n - 2..],
        ["PhaseChanged:response_generation", "Reasoning"]
    );
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_answer_streams_over_the_websocket_as_event_frames_before_final() {
    let model = Model::start(json_answer(ANSWER, 4)).await;
    let srv = streaming_server(&model).await;
    let url = format!("{}/ws", srv.base.replacen("http://", "ws://", 1));
    let (mut ws, _) = connect_async(url).await.unwrap();
    let message = json!({"type": "message", "content": QUERY}).to_string();
    ws.send(Message::text(message)).await.unwrap();
    let mut frames: Vec<Value> = Vec::new();
    while frames.last().is_none_or(|f| f["type"] != "final") {
        let msg = tokio::time::timeout(GUARD, ws.next())
            .await
            .expect("a frame")
            .expect("an open socket")
            .unwrap();
        if let Message::Text(t) = msg {
            frames.push(serde_json::from_str(t.as_str()).unwrap());
        }
    }
    // Stored `reasoning` events have the subtype `chunk` too: a live chunk is told by its kind,
    // and has no seq.
    let chunks: Vec<&Value> = frames
        .iter()
        .filter(|f| f["type"] == "event" && f["data"]["kind"] == "MessageChunk")
        .collect();
    assert!(chunks.len() >= 3, "{frames:?}");
    for c in &chunks {
        assert_eq!(
            (&c["data"]["type"], &c["data"]["subtype"]),
            (&json!("message"), &json!("chunk"))
        );
        assert!(c["data"].get("seq").is_none(), "a chunk has no seq: {c}");
    }
    assert!(frames.iter().all(|f| f["data"]["kind"] != "ReasoningChunk"));
    let final_event = frames
        .iter()
        .position(|f| f["type"] == "event" && f["data"]["kind"] == "ResponseGenerated")
        .unwrap();
    let last_chunk = frames
        .iter()
        .rposition(|f| f["data"]["kind"] == "MessageChunk")
        .unwrap();
    assert!(last_chunk < final_event, "{frames:?}");
    let text: String = chunks
        .iter()
        .map(|c| c["data"]["content"]["text"].as_str().unwrap())
        .collect();
    let final_frame = frames.last().unwrap();
    assert_eq!(text.trim(), final_frame["content"]["answer"]);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconnect_with_last_event_id_gets_the_missed_events_then_the_next_chunks() {
    let gate = Gate::new();
    let (before, after) = ANSWER.split_at(ANSWER.find("최근").unwrap());
    let mut pieces = json_answer(before, 2);
    pieces.pop(); // the closing of the JSON comes after the rest
    pieces.push(Piece::Wait(gate.clone()));
    pieces.extend(json_answer(after, 2).into_iter().skip(1));
    let model = Model::start(pieces).await;
    let srv = streaming_server(&model).await;
    let run = start(&srv).await;

    // The first connection reads until the answer has begun to stream, then drops.
    let mut first = srv
        .client
        .run_events(run, EventsFrom::default())
        .await
        .unwrap();
    let mut seen = Vec::new();
    while !seen.iter().any(|i| matches!(i, StreamItem::Chunk(_))) {
        seen.push(next_item(&mut first).await.expect("the answer streams"));
    }
    let last_id = first.last_id().expect("events before the answer");
    drop(first);

    // Some events may have come since; the reconnect gets them (after `last_id`, no gap), and
    // then the chunks written from now on: the answer's rest.
    let from = EventsFrom {
        last_event_id: Some(last_id),
        ..EventsFrom::default()
    };
    let mut second = srv.client.run_events(run, from).await.unwrap();
    gate.open();
    let items = all_items(&mut second).await;
    let ids: Vec<u64> = items
        .iter()
        .filter_map(|i| match i {
            StreamItem::Event(e) => Some(e.id),
            StreamItem::Chunk(_) => None,
        })
        .collect();
    let head = srv.engine.state(run, None).unwrap().last_seq.unwrap();
    assert_eq!(ids, (last_id + 1..=head).collect::<Vec<_>>());
    let answer = final_answer(&srv, run).await;
    let (early, late) = (chunk_text(&seen), chunk_text(&items));
    assert!(!early.is_empty() && answer.starts_with(early.trim_start()));
    assert!(answer.ends_with(&late), "{late:?} ends {answer:?}");
    assert!(late.contains(after.trim_end()), "{late:?}");
    assert!(position(&items, "message.final") > 0);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribers_that_do_not_read_never_hold_the_run_up() {
    // Far more chunks than any buffer on the way holds.
    let long: String = (0..1_500).map(|i| format!("조각{i:04} ")).collect();
    let model = Model::start(json_answer(&long, 6)).await;
    let srv = streaming_server(&model).await;
    let run = start(&srv).await;
    // A subscriber of the engine that never reads, and SSE clients that never read their body.
    let stalled = srv.engine.subscribe_live(run, 0).unwrap();
    let mut raw = Vec::new();
    for _ in 0..3 {
        let res = srv
            .http
            .get(srv.url(&format!("/api/v1/agent/{run}/events")))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        raw.push(res);
    }
    let state = srv
        .engine
        .wait_until(run, GUARD, |s| s.supervisor.run_status.is_terminal())
        .await
        .expect("the run ends while its subscribers sleep");
    assert!(state.supervisor.final_response.is_some());

    // Read late, the stalled subscriber still has every durable event, in order, and lost
    // chunks rather than holding them all.
    let mut stalled = stalled;
    let head = state.last_seq.unwrap();
    let (mut seqs, mut chunks) = (Vec::new(), 0usize);
    while seqs.last() != Some(&head) {
        match tokio::time::timeout(GUARD, stalled.next()).await.unwrap() {
            Some(Ok(Live::Event(e))) => seqs.push(e.seq),
            Some(Ok(Live::Chunk(_))) => chunks += 1,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(seqs, (0..=head).collect::<Vec<_>>());
    // At most what its own channel held, the one in its hand and the run's chunk buffer.
    let held_max = 16 + 1 + Settings::default().bus_buffer_chunks;
    assert!(
        chunks <= held_max,
        "{chunks} chunks were kept for a reader that did not read"
    );
    // The answer came in over a thousand chunks.
    let answer = final_answer(&srv, run).await;
    assert!(answer.len() > 10_000 && answer.contains("조각1499"));
    drop(raw);
    srv.stop().await;
}

/// An agent that writes through its chunk sink once the test is listening.
struct Writer {
    info: chronicle_engine::agents::AgentInfo,
    gate: Gate,
}

#[async_trait::async_trait]
impl chronicle_engine::agents::Agent for Writer {
    fn info(&self) -> &chronicle_engine::agents::AgentInfo {
        &self.info
    }
    async fn run(
        &self,
        ctx: &chronicle_engine::agents::AgentContext,
        _: Value,
    ) -> Result<chronicle_engine::agents::AgentOutput, chronicle_engine::agents::AgentError> {
        use chronicle_engine::llm::Delta;
        self.gate.wait().await;
        ctx.chunks.send(Delta::Reasoning("thinking"));
        ctx.chunks.send(Delta::Text("a draft"));
        Ok(chronicle_engine::agents::AgentOutput {
            result: json!({"answer": "a draft"}),
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_chunks_name_its_todo_and_come_between_its_start_and_its_result() {
    let gate = Gate::new();
    let mut registry = chronicle_engine::agents::Registry::empty();
    registry.register(Arc::new(Writer {
        info: chronicle_engine::agents::AgentInfo::new("writer", "test", "writes"),
        gate: gate.clone(),
    }));
    let dir = tempfile::tempdir().unwrap();
    let engine = crate::support::engine_in(dir.path(), registry).await;
    let config = crate::support::plan_config(
        vec![crate::agents::step("writer", &[], false, 0)],
        HitlMode::None,
        chronicle_schemas::Strategy::Sequential,
    );
    let run = crate::support::start(&engine, config).await;
    let mut live = engine.subscribe_live(run, 0).unwrap();
    let mut seen = Vec::new();
    let mut gate_open = false;
    while !seen.iter().any(|s: &String| s == "RunCompleted") {
        // The agent writes once this subscriber has sent what came before its chunks (its start
        // and the note after it): a subscriber that is behind sends what is durable first.
        if !gate_open && seen.ends_with(&["AgentStarted".into(), "Reasoning".into()]) {
            gate.open();
            gate_open = true;
        }
        let item = tokio::time::timeout(GUARD, live.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        seen.push(match item {
            Live::Event(e) => e.event.kind().to_owned(),
            Live::Chunk(c) => {
                let d = &c.data;
                assert_eq!(d.run_id, run);
                assert_eq!(
                    d.content.todo_id.as_ref().map(|t| t.as_str()),
                    Some("todo_001")
                );
                assert_eq!(d.content.agent.as_deref(), Some("writer"));
                format!("{}:{}", d.name(), d.content.text)
            }
        });
    }
    let at = |s: &str| {
        seen.iter()
            .position(|x| x == s)
            .unwrap_or_else(|| panic!("no {s} in {seen:?}"))
    };
    assert!(
        at("AgentStarted") < at("reasoning.chunk:thinking"),
        "{seen:?}"
    );
    assert!(at("reasoning.chunk:thinking") < at("message.chunk:a draft"));
    assert!(
        at("message.chunk:a draft") < at("AgentCompleted"),
        "{seen:?}"
    );
    engine.shutdown().await;
}
