//! The typed routes.

use std::time::Duration;

use chronicle_schemas::{ApprovalId, CheckpointId, Envelope, RunId};
use chronicle_wire::audit::{
    Format, HEAD_OFFSET_HEADER, RUN_HEAD_HASH_HEADER, RUN_HEAD_SEQ_HEADER,
};
use chronicle_wire::{
    ApprovalView, CancelRequest, ChatCommand, ChatRequest, ChatTurn, ChatWaiting, CheckpointList,
    CommandOutcome, CommandRequest, DecisionAccepted, DecisionRequest, ErrorBody, ExportQuery,
    Health, Inbox, InboxQuery, LogQuery, MemoriesQuery, RestoreRequest, Restored, ResumeRequest,
    RunCancelled, RunList, RunRequest, RunSummary, RunsQuery, SessionCheckpoints,
    SessionDeletedView, SessionDetail, SessionList, SessionSummary, SessionView, SessionsQuery,
    Started, StateQuery, Status, TodoList, UserMemories,
};
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{Error, Result, root_cause};
use crate::sse::{EventStream, EventsFrom, Target};

/// How long a connection attempt may take before the server counts as unreachable.
const CONNECT_TIMEOUT_MS: u64 = 10_000;
/// How long one ordinary request (not a stream) may take by default. Longer than the server's
/// wait for a chat turn (60 s), which answers 202 when the run is still working.
const REQUEST_TIMEOUT_MS: u64 = 120_000;

/// A Chronicle server. Cheap to clone (the connection pool is shared).
#[derive(Clone, Debug)]
pub struct Client {
    base: String,
    token: Option<String>,
    http: reqwest::Client,
    request_timeout: Duration,
}

/// The answer to a chat turn (`POST /chat`, `resume`).
#[derive(Clone, Debug, PartialEq)]
pub enum ChatReply {
    /// 200: the run ended.
    Done(ChatTurn),
    /// 202: the run is still working after the server's wait.
    Working(ChatTurn),
    /// 409 `waiting_for_human`: the run waits for an approval; `message` is the question.
    /// (Boxed: the approvals are large beside the other answers.)
    Waiting {
        message: String,
        waiting: Box<ChatWaiting>,
    },
    /// A slash command's outcome on the session's latest run.
    Command(ChatCommand),
}

/// An audit export being received: what the server says it read, then the body in chunks.
#[derive(Debug)]
pub struct Export {
    pub format: Format,
    /// The durable next offset the export read below.
    pub head_offset: Option<u64>,
    /// With a run: the run's last seq and the hash of that event.
    pub run_head: Option<(u64, String)>,
    url: String,
    response: Response,
}

impl Export {
    /// The next chunk of the body; `None` at its end. A body that breaks off is an error, never
    /// a short export.
    pub async fn chunk(&mut self) -> Result<Option<Vec<u8>>> {
        match self.response.chunk().await {
            Ok(c) => Ok(c.map(|b| b.to_vec())),
            Err(e) => Err(Error::Connection {
                url: self.url.clone(),
                cause: format!("the export broke off: {}", root_cause(&e)),
            }),
        }
    }

    /// The whole body as text.
    pub async fn text(mut self) -> Result<String> {
        let mut all = Vec::new();
        while let Some(c) = self.chunk().await? {
            all.extend(c);
        }
        String::from_utf8(all).map_err(|e| Error::Protocol(format!("the export is not UTF-8: {e}")))
    }
}

impl Client {
    /// A client of the server at `base` (`http://127.0.0.1:8080`).
    pub fn new(base: &str) -> Result<Client> {
        let url = reqwest::Url::parse(base)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
            .ok_or_else(|| Error::Url(base.to_owned()))?;
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(CONNECT_TIMEOUT_MS))
            .build()
            .map_err(|e| Error::Connection {
                url: base.to_owned(),
                cause: root_cause(&e),
            })?;
        Ok(Client {
            base: url.as_str().trim_end_matches('/').to_owned(),
            token: None,
            http,
            request_timeout: Duration::from_millis(REQUEST_TIMEOUT_MS),
        })
    }

    /// Sends `Authorization: Bearer <token>` with every request (none for `None` or empty).
    pub fn with_token(mut self, token: Option<String>) -> Self {
        self.token = token.filter(|t| !t.is_empty());
        self
    }

    /// How long an ordinary request may take (streams have no overall limit).
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// The server's base URL, without a trailing `/`.
    pub fn base(&self) -> &str {
        &self.base
    }

    pub(crate) fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let rb = self.http.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(t) => rb.bearer_auth(t),
            None => rb,
        }
    }

    /// Sends a request: a transport failure is [`Error::Connection`], an answer outside 2xx
    /// [`Error::Http`] with its decoded error body.
    pub(crate) async fn send(&self, rb: RequestBuilder) -> Result<Response> {
        let res = rb.send().await.map_err(|e| self.connection(&e))?;
        if res.status().is_success() {
            return Ok(res);
        }
        Err(self.http_error(res).await)
    }

    pub(crate) fn connection(&self, e: &reqwest::Error) -> Error {
        Error::Connection {
            url: self.base.clone(),
            cause: root_cause(e),
        }
    }

    /// The error of an answer outside 2xx; a body that is not the API's error shape (a proxy's
    /// page) becomes its text under the code `http_<status>`.
    pub(crate) async fn http_error(&self, res: Response) -> Error {
        let status = res.status().as_u16();
        let text = res.text().await.unwrap_or_default();
        let body = serde_json::from_str::<ErrorBody>(&text)
            .unwrap_or_else(|_| ErrorBody::new(format!("http_{status}"), text.trim()));
        Error::Http { status, body }
    }

    async fn call<T: DeserializeOwned>(&self, rb: RequestBuilder, what: &str) -> Result<T> {
        let res = self.send(rb.timeout(self.request_timeout)).await?;
        decode(res, what).await
    }

    async fn get<T: DeserializeOwned>(&self, path: &str, query: &impl Serialize) -> Result<T> {
        let rb = self.request(Method::GET, path).query(query);
        self.call(rb, &format!("GET {path}")).await
    }

    async fn post<T: DeserializeOwned>(&self, path: &str, body: &impl Serialize) -> Result<T> {
        let rb = self.request(Method::POST, path).json(body);
        self.call(rb, &format!("POST {path}")).await
    }

    // ------------------------------------------------------------------------------ runs

    /// `POST /api/v1/agent/run`.
    pub async fn start_run(&self, req: &RunRequest) -> Result<Started> {
        self.post("/api/v1/agent/run", req).await
    }

    /// `POST /api/v1/agent/run` with an `Idempotency-Key`: the same key again (a retry after a
    /// lost answer) gives the run the first request started.
    pub async fn start_run_once(&self, req: &RunRequest, key: &str) -> Result<Started> {
        let path = "/api/v1/agent/run";
        let rb = self
            .request(Method::POST, path)
            .header("idempotency-key", key)
            .json(req);
        self.call(rb, &format!("POST {path}")).await
    }

    /// `GET /api/v1/agent/{run}/status`.
    pub async fn status(&self, run: RunId) -> Result<Status> {
        self.get(&format!("/api/v1/agent/{run}/status"), &()).await
    }

    /// `GET /api/v1/agent/{run}/state[?at=SEQ]`: the projected state (`chronicle_projections::
    /// RunState`, which the caller names: this crate does not depend on the projections).
    pub async fn state<S: DeserializeOwned>(&self, run: RunId, at: Option<u64>) -> Result<S> {
        self.get(&format!("/api/v1/agent/{run}/state"), &StateQuery { at })
            .await
    }

    /// `GET /api/v1/agent/{run}/log`: one page of stored events.
    pub async fn log_page(&self, run: RunId, query: &LogQuery) -> Result<Vec<Envelope>> {
        self.get(&format!("/api/v1/agent/{run}/log"), query).await
    }

    /// Every stored event of `run` from seq `from`, page after page until an empty one.
    pub async fn log(&self, run: RunId, from: u64) -> Result<Vec<Envelope>> {
        let mut events: Vec<Envelope> = Vec::new();
        let mut next = from;
        loop {
            let query = LogQuery {
                from: Some(next),
                limit: None,
            };
            let page = self.log_page(run, &query).await?;
            let Some(last) = page.last() else {
                return Ok(events);
            };
            next = last.seq + 1;
            events.extend(page);
        }
    }

    /// `GET /api/v1/agent/{run}/todos`.
    pub async fn todos(&self, run: RunId) -> Result<TodoList> {
        self.get(&format!("/api/v1/agent/{run}/todos"), &()).await
    }

    /// `GET /api/v1/agent/{run}/checkpoints`.
    pub async fn checkpoints(&self, run: RunId) -> Result<CheckpointList> {
        self.get(&format!("/api/v1/agent/{run}/checkpoints"), &())
            .await
    }

    /// `POST /api/v1/agent/{run}/checkpoints/{checkpoint}/restore`.
    pub async fn restore(&self, run: RunId, checkpoint: &CheckpointId) -> Result<Restored> {
        let path = format!("/api/v1/agent/{run}/checkpoints/{checkpoint}/restore");
        self.post(&path, &RestoreRequest {}).await
    }

    /// `POST /api/v1/stream-tickets`: a ticket for one stream, for a client that cannot send
    /// the `Authorization` header on it (pass it as `?ticket=`).
    pub async fn stream_ticket(&self) -> Result<chronicle_wire::StreamTicket> {
        self.post(
            "/api/v1/stream-tickets",
            &chronicle_wire::StreamTicketRequest {},
        )
        .await
    }

    /// `POST /api/v1/agent/{run}/cancel`.
    pub async fn cancel(&self, run: RunId, req: &CancelRequest) -> Result<RunCancelled> {
        self.post(&format!("/api/v1/agent/{run}/cancel"), req).await
    }

    /// `POST /api/v1/agent/{run}/commands`. A refused command (400 with `help`) is an outcome,
    /// [`CommandOutcome::Refused`], as the engine gives it.
    pub async fn command(&self, run: RunId, command: &str) -> Result<CommandOutcome> {
        let req = CommandRequest {
            command: command.to_owned(),
        };
        match self
            .post(&format!("/api/v1/agent/{run}/commands"), &req)
            .await
        {
            // A command that does not parse (400) or that the run's state refuses (409, "no
            // approval is pending") comes with the help: a refusal to show, not a failure.
            Err(Error::Http {
                status: 400 | 409,
                body,
            }) if body.help().is_some() => Ok(CommandOutcome::Refused {
                help: body.help().unwrap_or_default().to_owned(),
                error: body.error.message,
            }),
            other => other,
        }
    }

    /// `GET /api/v1/runs`: one page.
    pub async fn runs_page(&self, query: &RunsQuery) -> Result<RunList> {
        self.get("/api/v1/runs", query).await
    }

    /// Every run `query` matches, oldest first, page after page.
    pub async fn runs(&self, query: &RunsQuery) -> Result<Vec<RunSummary>> {
        let mut query = query.clone();
        let mut all = Vec::new();
        loop {
            let page = self.runs_page(&query).await?;
            all.extend(page.runs);
            match page.next {
                Some(next) => query.after = Some(next),
                None => return Ok(all),
            }
        }
    }

    // ------------------------------------------------------------------------- approvals

    /// `GET /api/v1/agent/{run}/approvals`: every approval of the run.
    pub async fn approvals(&self, run: RunId) -> Result<Vec<ApprovalView>> {
        self.get(&format!("/api/v1/agent/{run}/approvals"), &())
            .await
    }

    /// `GET /api/v1/agent/{run}/approvals/{approval}`.
    pub async fn approval(&self, run: RunId, approval: &ApprovalId) -> Result<ApprovalView> {
        self.get(&format!("/api/v1/agent/{run}/approvals/{approval}"), &())
            .await
    }

    /// `POST /api/v1/agent/{run}/approvals/{approval}/decision`.
    pub async fn decide(
        &self,
        run: RunId,
        approval: &ApprovalId,
        req: &DecisionRequest,
    ) -> Result<DecisionAccepted> {
        let path = format!("/api/v1/agent/{run}/approvals/{approval}/decision");
        self.post(&path, req).await
    }

    /// `GET /api/v1/approvals`: the inbox across runs.
    pub async fn inbox(&self, query: &InboxQuery) -> Result<Inbox> {
        self.get("/api/v1/approvals", query).await
    }

    /// `GET /api/v1/audit/approvals`: starts receiving the export (its body is read from the
    /// returned [`Export`]).
    pub async fn audit_export(&self, query: &ExportQuery) -> Result<Export> {
        let want = match query.format.as_deref() {
            None => Format::Jsonl,
            Some(f) => Format::parse(f).unwrap_or(Format::Jsonl),
        };
        let res = self
            .send(
                self.request(Method::GET, "/api/v1/audit/approvals")
                    .query(query),
            )
            .await?;
        let header = |name: &str| {
            res.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let got = header(reqwest::header::CONTENT_TYPE.as_str()).unwrap_or_default();
        let want_type = want.content_type();
        let essence = |t: &str| t.split(';').next().unwrap_or("").trim().to_owned();
        if essence(&got) != essence(want_type) {
            return Err(Error::Protocol(format!(
                "the server sent {got:?}, expected {want_type}"
            )));
        }
        let run_head = match (header(RUN_HEAD_SEQ_HEADER), header(RUN_HEAD_HASH_HEADER)) {
            (Some(seq), Some(hash)) => seq.parse().ok().map(|seq| (seq, hash)),
            _ => None,
        };
        Ok(Export {
            format: want,
            head_offset: header(HEAD_OFFSET_HEADER).and_then(|v| v.parse().ok()),
            run_head,
            url: self.base.clone(),
            response: res,
        })
    }

    // ------------------------------------------------------------------------------ chat

    /// `POST /chat`: one turn.
    pub async fn chat(&self, req: &ChatRequest) -> Result<ChatReply> {
        let rb = self.request(Method::POST, "/chat").json(req);
        self.turn(rb, "POST /chat").await
    }

    /// `POST /api/sessions/{thread}/resume`.
    pub async fn resume(&self, thread: &str, req: &ResumeRequest) -> Result<ChatReply> {
        let path = format!("/api/sessions/{thread}/resume");
        let rb = self.request(Method::POST, &path).json(req);
        self.turn(rb, &format!("POST {path}")).await
    }

    async fn turn(&self, rb: RequestBuilder, what: &str) -> Result<ChatReply> {
        let res = rb
            .timeout(self.request_timeout)
            .send()
            .await
            .map_err(|e| self.connection(&e))?;
        let status = res.status();
        if status == StatusCode::CONFLICT {
            return match self.http_error(res).await {
                Error::Http { body, .. } if body.error.code == "waiting_for_human" => {
                    let waiting =
                        body.extra_as()
                            .map(Box::new)
                            .map_err(|source| Error::Decode {
                                what: what.to_owned(),
                                source,
                            })?;
                    Ok(ChatReply::Waiting {
                        message: body.error.message,
                        waiting,
                    })
                }
                other => Err(other),
            };
        }
        if !status.is_success() {
            return Err(self.http_error(res).await);
        }
        let v: Value = decode(res, what).await?;
        let decoded = if v.get("result").is_some() {
            serde_json::from_value(v).map(ChatReply::Command)
        } else if status == StatusCode::OK {
            serde_json::from_value(v).map(ChatReply::Done)
        } else {
            serde_json::from_value(v).map(ChatReply::Working)
        };
        decoded.map_err(|source| Error::Decode {
            what: what.to_owned(),
            source,
        })
    }

    /// `GET /api/sessions/{thread}`.
    pub async fn session(&self, thread: &str) -> Result<SessionView> {
        self.get(&format!("/api/sessions/{thread}"), &()).await
    }

    /// `GET /api/sessions/{thread}/checkpoints`: the latest run's tree, and every turn's.
    pub async fn session_checkpoints(&self, thread: &str) -> Result<SessionCheckpoints> {
        self.get(&format!("/api/sessions/{thread}/checkpoints"), &())
            .await
    }

    /// `GET /api/v1/sessions`: one page of sessions, the most recently active first.
    pub async fn sessions_page(&self, query: &SessionsQuery) -> Result<SessionList> {
        self.get("/api/v1/sessions", query).await
    }

    /// Every session `query` matches, the most recently active first, page after page.
    pub async fn sessions(&self, query: &SessionsQuery) -> Result<Vec<SessionSummary>> {
        let mut query = query.clone();
        let mut all = Vec::new();
        loop {
            let page = self.sessions_page(&query).await?;
            all.extend(page.sessions);
            match page.next_cursor {
                Some(next) => query.cursor = Some(next),
                None => return Ok(all),
            }
        }
    }

    /// `GET /api/v1/sessions/{session}`: the session and all its turns.
    pub async fn session_detail(&self, session: &str) -> Result<SessionDetail> {
        self.get(&format!("/api/v1/sessions/{session}"), &()).await
    }

    /// `GET /api/v1/users/{user}/memories`: one page of the user's memory, newest first
    /// (`next_before` continues it).
    pub async fn memories_page(&self, user: &str, query: &MemoriesQuery) -> Result<UserMemories> {
        self.get(&format!("/api/v1/users/{user}/memories"), query)
            .await
    }

    /// `DELETE /api/v1/sessions/{session}`: deletes the session (a recorded tombstone).
    pub async fn delete_session(&self, session: &str) -> Result<SessionDeletedView> {
        let path = format!("/api/v1/sessions/{session}");
        let rb = self
            .request(Method::DELETE, &path)
            .json(&chronicle_wire::DeleteSessionRequest {});
        self.call(rb, &format!("DELETE {path}")).await
    }

    // --------------------------------------------------------------------------- streams

    /// `GET /api/v1/agent/{run}/events`: the run's events, history then live. The connection
    /// is opened now, so a refused request (unknown run, bad token) is an error here.
    pub async fn run_events(&self, run: RunId, from: EventsFrom) -> Result<EventStream> {
        EventStream::open(self.clone(), Target::Run(run), from).await
    }

    /// `GET /api/v1/events`: every run's events by global offset (from now on without `from`);
    /// never ends by itself.
    pub async fn all_events(&self, from: EventsFrom) -> Result<EventStream> {
        EventStream::open(self.clone(), Target::All, from).await
    }

    // ------------------------------------------------------------------------------- ops

    /// `GET /healthz`: 200 and 503 both answer the health (`storage` says which).
    pub async fn health(&self) -> Result<Health> {
        let res = self
            .request(Method::GET, "/healthz")
            .timeout(self.request_timeout)
            .send()
            .await
            .map_err(|e| self.connection(&e))?;
        if res.status().is_success() || res.status() == StatusCode::SERVICE_UNAVAILABLE {
            return decode(res, "GET /healthz").await;
        }
        Err(self.http_error(res).await)
    }

    /// `GET /metrics`: Prometheus text.
    pub async fn metrics(&self) -> Result<String> {
        let res = self
            .send(
                self.request(Method::GET, "/metrics")
                    .timeout(self.request_timeout),
            )
            .await?;
        res.text().await.map_err(|e| self.connection(&e))
    }

    /// `GET /openapi.json`.
    pub async fn openapi(&self) -> Result<Value> {
        self.get("/openapi.json", &()).await
    }
}

/// Reads a JSON answer as `T`.
async fn decode<T: DeserializeOwned>(res: Response, what: &str) -> Result<T> {
    let url = res.url().to_string();
    let body = res.bytes().await.map_err(|e| Error::Connection {
        url,
        cause: root_cause(&e),
    })?;
    serde_json::from_slice(&body).map_err(|source| Error::Decode {
        what: what.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_urls_are_checked() {
        let c = Client::new("http://127.0.0.1:8080/").unwrap();
        assert_eq!(c.base(), "http://127.0.0.1:8080");
        for bad in ["127.0.0.1:8080", "ftp://x", "http//x", ""] {
            assert!(matches!(Client::new(bad), Err(Error::Url(_))), "{bad:?}");
        }
        let c = c.with_token(Some(String::new()));
        assert!(c.token.is_none());
    }
}
