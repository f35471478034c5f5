//! `chronicle run "<query>"`: starts a run (on an embedded engine or a server), prints its events
//! live, asks for approvals on the terminal when it can, and exits with the run's outcome. The
//! REPL `chronicle chat` lives in `chat.rs`; both share the backend here and the views of
//! `view.rs`.

pub mod backend;
pub mod chat;

use std::io::{IsTerminal, Write};

use anyhow::Context;
use chronicle_client::{StreamEvent, StreamItem};
use chronicle_projections::RunState;
use chronicle_schemas::{Approval, HitlMode, OnReject, RunId, Strategy};
use chronicle_wire::DecisionRequest;
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::common::{DataArgs, Outcome, RemoteArgs, json_line, runtime};
use crate::view::{self, styled, styled_err};
use backend::{Backend, Events, StartReq};

pub use chat::ChatArgs;

const RUN_HELP: &str = "\
Examples:
  chronicle run \"강남역 근처 30평대 아파트 매매 시세 알려줘\"
  chronicle run --hitl every_todo \"강남구 아파트 시세 조회\"
  chronicle run --json --strategy dag \"강남구 아파트 시세 조회\" | jq .data.kind
  chronicle run --server http://127.0.0.1:8080 --token $TOKEN \"강남구 아파트 시세 조회\"
  CHRONICLE_AGENTS=agents.toml chronicle run --agent analyst \"Summarise the sales notes\"

When the run asks for an approval and stdin is a terminal, you answer on the terminal:
  a | approve             approve
  r | reject [reason]     reject (the TODO is skipped)
  e | edit {json}         approve with these args instead
  /todos, /todo skip ...  any slash command (see /help)
When stdin is not a terminal, `run` exits 1 and says how to decide the approval later.

Embedded mode (--data, the default) runs the engine in this process; the data directory must
not be in use by a server (use --server URL then).

Exit codes: 0 the run completed, 1 it failed, was cancelled, or waits for an approval,
2 bad arguments or an operational error.";

#[derive(Debug, clap::Args)]
#[command(after_help = RUN_HELP,
    // Unlike the inspecting commands, `run` and `chat` start from nothing.
    mut_arg("data", |a| a.help("Data directory of a Chronicle store (created when missing)"))
)]
pub struct RunArgs {
    /// The query, e.g. "강남역 근처 30평대 아파트 매매 시세 알려줘".
    query: String,
    /// HITL policy: none | every_todo | categories | tools (default: none embedded, the server's
    /// default remotely).
    #[arg(long, value_name = "POLICY")]
    hitl: Option<String>,
    /// What a rejection does: skip (what it gated; the run goes on) | end_turn (the run ends with
    /// an answer saying what was rejected). Default: the server's (skip embedded).
    #[arg(long, value_name = "WHAT", value_parser = crate::serve::parse_on_reject)]
    on_reject: Option<OnReject>,
    /// Execution strategy instead of the plan's: sequential | parallel | dag.
    #[arg(long, value_name = "STRATEGY")]
    strategy: Option<String>,
    /// Agent mode: this agent (e.g. an `llm` agent of CHRONICLE_AGENTS) drives the whole run
    /// instead of the supervisor planning; its TODO list is the run's, its answer the run's.
    #[arg(long, value_name = "NAME")]
    agent: Option<String>,
    /// JSON Lines on stdout: {"type":"event","data":<SSE data + "event": its name>} per event,
    /// {"type":"chunk","data":<the chunk's data + "event": message.chunk | reasoning.chunk>} per
    /// live chunk of a model answer, then one {"type":"result"} (or {"type":"waiting"}).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    data: DataArgs,
    #[command(flatten)]
    remote: RemoteArgs,
}

/// `--hitl` as the engine names the policies (one line on error).
pub fn parse_hitl(s: &str) -> anyhow::Result<HitlMode> {
    crate::serve::parse_hitl(s).map_err(|e| anyhow::anyhow!("--hitl: {e}"))
}

/// `--strategy` (one line on error).
pub fn parse_strategy(s: &str) -> anyhow::Result<Strategy> {
    serde_json::from_value(Value::String(s.to_owned()))
        .map_err(|_| anyhow::anyhow!("--strategy must be sequential, parallel or dag, got {s:?}"))
}

pub fn run(args: &RunArgs, out: &mut dyn Write) -> anyhow::Result<Outcome> {
    let hitl = args.hitl.as_deref().map(parse_hitl).transpose()?;
    let strategy = args.strategy.as_deref().map(parse_strategy).transpose()?;
    let rt = runtime()?;
    let backend = rt.block_on(Backend::open(&args.data, &args.remote))?;
    let req = StartReq {
        query: args.query.clone(),
        hitl,
        on_reject: args.on_reject,
        strategy,
        session: None,
        agent: args.agent.clone(),
    };
    let result = Runner {
        rt: &rt,
        backend: &backend,
        json: args.json,
        out: &mut styled(out),
        chunks: view::ChunkPrinter::default(),
    }
    .run(req);
    rt.block_on(backend.close());
    result
}

/// One `chronicle run`.
struct Runner<'a> {
    rt: &'a tokio::runtime::Runtime,
    backend: &'a Backend,
    json: bool,
    out: &'a mut dyn Write,
    /// The model answers' text as it streams, between the event lines.
    chunks: view::ChunkPrinter,
}

impl Runner<'_> {
    fn run(&mut self, req: StartReq) -> anyhow::Result<Outcome> {
        let backend = self.backend;
        let (run, _session) = self.rt.block_on(backend.start(req))?;
        eprintln!("run {run} started ({})", backend.where_flag());
        let mut events = self.rt.block_on(backend.events(run, 0))?;
        let mut next_seq = 0;
        let interactive = std::io::stdin().is_terminal();
        let mut prompt = None;
        loop {
            let state = self.settle(run, &mut events, &mut next_seq)?;
            if backend::is_terminal(&state) {
                return self.finish(run, &state);
            }
            let pending = backend::pending(&state);
            if !interactive {
                return self.waiting(run, &pending);
            }
            let editor = match &mut prompt {
                Some(e) => e,
                None => prompt.insert(Prompt::on_terminal()?),
            };
            for a in &pending {
                if !self.ask(run, a, editor)? {
                    return self.waiting(run, &pending);
                }
            }
        }
    }

    /// Prints events until the run has settled and every event up to its state is printed.
    fn settle(
        &mut self,
        run: RunId,
        events: &mut Events,
        next_seq: &mut u64,
    ) -> anyhow::Result<RunState> {
        let backend = self.backend;
        let rt = self.rt;
        rt.block_on(async {
            let settled = backend.settled(run);
            // Listening once for the whole wait, so a Ctrl-C while an event prints is not lost.
            let interrupted = tokio::signal::ctrl_c();
            tokio::pin!(settled, interrupted);
            let mut open = true;
            let state = loop {
                tokio::select! {
                    biased;
                    ev = events.next(), if open => match ev {
                        Some(ev) => self.print_item(&ev?, next_seq)?,
                        None => open = false,
                    },
                    s = &mut settled => break s?,
                    _ = &mut interrupted => anyhow::bail!(
                        "interrupted; run {run} goes on {}",
                        backend.goes_on_where()
                    ),
                }
            };
            // Catch up with the state: its events may still be on their way.
            let last = state.last_seq.unwrap_or(0);
            while open && *next_seq <= last {
                match events.next().await {
                    Some(ev) => self.print_item(&ev?, next_seq)?,
                    None => open = false,
                }
            }
            Ok(state)
        })
    }

    fn print_item(&mut self, item: &StreamItem, next_seq: &mut u64) -> anyhow::Result<()> {
        match item {
            StreamItem::Event(ev) => self.print_event(ev, next_seq),
            StreamItem::Chunk(c) if self.json => {
                let mut data = serde_json::to_value(c)?;
                data["event"] = json!(c.name());
                json_line(self.out, "chunk", data)?;
                Ok(self.out.flush()?)
            }
            StreamItem::Chunk(c) => Ok(self.chunks.chunk(self.out, c, true)?),
        }
    }

    fn print_event(&mut self, ev: &StreamEvent, next_seq: &mut u64) -> anyhow::Result<()> {
        if ev.data.seq < *next_seq {
            return Ok(());
        }
        *next_seq = ev.data.seq + 1;
        self.chunks.end_line(self.out)?;
        if self.json {
            let mut data = serde_json::to_value(&ev.data)?;
            data["event"] = json!(ev.name);
            json_line(self.out, "event", data)?;
        } else {
            let streamed = match ev.data.event() {
                Ok(chronicle_schemas::Event::ResponseGenerated { final_response }) => {
                    self.chunks.streamed(&view::response_text(&final_response))
                }
                _ => false,
            };
            let line = match streamed {
                true => view::streamed_final_line(&ev.data),
                false => view::data_line(&ev.data),
            };
            writeln!(self.out, "{line}")?;
        }
        self.out.flush()?;
        Ok(())
    }

    fn finish(&mut self, run: RunId, s: &RunState) -> anyhow::Result<Outcome> {
        self.chunks.end_line(self.out)?;
        let completed = s.supervisor.run_status == chronicle_schemas::RunStatus::Completed;
        if self.json {
            json_line(self.out, "result", result_json(run, s))?;
        } else if completed {
            // Printed already if it streamed.
            let answer = view::answer(s);
            if !answer.as_deref().is_some_and(|a| self.chunks.streamed(a)) {
                writeln!(self.out)?;
                writeln!(
                    self.out,
                    "{}",
                    answer.unwrap_or_else(|| "(no answer)".into())
                )?;
            }
        }
        self.out.flush()?;
        if completed {
            Ok(Outcome::Ok)
        } else {
            eprintln!(
                "run {run} {}: {}",
                s.supervisor.run_status.as_str(),
                view::failure(s)
            );
            Ok(Outcome::Negative)
        }
    }

    /// The run waits for a human who is not here: say which approval and how to decide it.
    fn waiting(&mut self, run: RunId, pending: &[Approval]) -> anyhow::Result<Outcome> {
        self.chunks.end_line(self.out)?;
        let where_ = self.backend.where_flag();
        if self.json {
            let list: Vec<Value> = pending.iter().map(|a| approval_json(run, a)).collect();
            json_line(
                self.out,
                "waiting",
                json!({"run_id": run, "approvals": list}),
            )?;
            self.out.flush()?;
        }
        for a in pending {
            view::write_approval(&mut styled_err(&mut std::io::stderr()), a)?;
            let todo = a
                .subject
                .as_ref()
                .map_or_else(String::new, |s| format!(" ({})", s.todo_id()));
            eprintln!(
                "run {run} waits for approval {}{todo}: decide it with `chronicle chat --run {run} {where_}` \
                 (then /todo approve or /todo reject), or POST /api/v1/agent/{run}/approvals/{}/decision \
                 {{\"decision\":\"approve\"}} on a server",
                a.approval_id, a.approval_id
            );
        }
        Ok(Outcome::Negative)
    }

    /// Asks the terminal about one approval until it is decided (or no longer pending). Returns
    /// `false` when the person left (Ctrl-D / Ctrl-C).
    fn ask(&mut self, run: RunId, a: &Approval, prompt: &mut Prompt) -> anyhow::Result<bool> {
        let backend = self.backend;
        view::write_approval(&mut styled_err(&mut std::io::stderr()), a)?;
        loop {
            let Some(line) = prompt
                .read("approve? [a]pprove / [r]eject [reason] / [e]dit {json} / /command > ")?
            else {
                return Ok(false);
            };
            let line = line.trim();
            let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            let rest = rest.trim();
            let decision = match word {
                "" => continue,
                "a" | "approve" => DecisionRequest::approve(),
                "r" | "reject" if rest.is_empty() => DecisionRequest::reject(),
                "r" | "reject" => DecisionRequest::reject().with_comment(rest),
                "e" | "edit" => match serde_json::from_str::<Value>(rest) {
                    Ok(v) => DecisionRequest::edit(v),
                    Err(e) => {
                        eprintln!(
                            "edit takes the new args as JSON, e.g. e {{\"query\": \"...\"}}: {e}"
                        );
                        continue;
                    }
                },
                w if w.starts_with('/') => {
                    let result = self.rt.block_on(backend.command(run, line))?;
                    // Machines get it with the events; a person where the question was asked.
                    if self.json {
                        json_line(self.out, "command", serde_json::to_value(&result)?)?;
                        self.out.flush()?;
                    } else {
                        eprintln!("{}", serde_json::to_string_pretty(&result)?);
                    }
                    let s = self.rt.block_on(backend.state(run))?;
                    if s.approvals
                        .get(&a.approval_id)
                        .is_none_or(|x| x.status != chronicle_schemas::ApprovalStatus::Pending)
                    {
                        return Ok(true);
                    }
                    continue;
                }
                _ => {
                    eprintln!("answer a, r [reason], e {{json}} or a /command");
                    continue;
                }
            };
            match self
                .rt
                .block_on(backend.decide(run, &a.approval_id, decision))
            {
                Ok(()) => return Ok(true),
                // Refused (decided meanwhile, bad edit): say why and look at the run again.
                Err(e) if is_refusal(&e) => {
                    eprintln!("{e:#}");
                    return Ok(true);
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// The `--json` line of an ended run: `{run_id, status, answer, final_response, error}`.
pub(crate) fn result_json(run: RunId, s: &RunState) -> Value {
    let completed = s.supervisor.run_status == chronicle_schemas::RunStatus::Completed;
    json!({
        "run_id": run,
        "status": s.supervisor.run_status.as_str(),
        "answer": view::answer(s),
        "final_response": s.supervisor.final_response,
        "error": (!completed).then(|| view::failure(s)),
    })
}

/// The `--json` form of an approval a run waits for: `{run_id, approval_id, todo_id, message}`.
pub(crate) fn approval_json(run: RunId, a: &Approval) -> Value {
    json!({
        "run_id": run,
        "approval_id": a.approval_id,
        "todo_id": a.subject.as_ref().map(|s| s.todo_id()),
        "message": a.message,
    })
}

/// An engine or server refusal (a 4xx, or an engine error that is not the store's or a
/// shutdown), as opposed to an operational failure.
fn is_refusal(e: &anyhow::Error) -> bool {
    if let Some(c) = e.downcast_ref::<chronicle_client::Error>() {
        return c.is_refusal();
    }
    e.downcast_ref::<chronicle_engine::Error>()
        .is_some_and(|e| {
            !matches!(
                e,
                chronicle_engine::Error::Store(_) | chronicle_engine::Error::ShuttingDown
            )
        })
}

/// Lines from the terminal, with editing and history (rustyline).
pub struct Prompt {
    editor: rustyline::DefaultEditor,
}

impl std::fmt::Debug for Prompt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prompt").finish_non_exhaustive()
    }
}

impl Prompt {
    /// A prompt on stdin/stdout (the chat, whose conversation is its stdout).
    pub fn new() -> anyhow::Result<Self> {
        Self::with(rustyline::config::Behavior::Stdio)
    }

    /// A prompt on the terminal itself (`/dev/tty`), so questions never mix into a stdout that
    /// is redirected to a file (`run`, whose stdout is its event lines).
    pub fn on_terminal() -> anyhow::Result<Self> {
        Self::with(rustyline::config::Behavior::PreferTerm)
    }

    fn with(behavior: rustyline::config::Behavior) -> anyhow::Result<Self> {
        let config = rustyline::Config::builder().behavior(behavior).build();
        Ok(Self {
            editor: rustyline::DefaultEditor::with_config(config)
                .context("opening the terminal")?,
        })
    }

    /// The next line (added to the history), or `None` on Ctrl-D / Ctrl-C.
    pub fn read(&mut self, prompt: &str) -> anyhow::Result<Option<String>> {
        use rustyline::error::ReadlineError;
        match self.editor.readline(prompt) {
            Ok(line) => {
                if !line.trim().is_empty() {
                    let _ = self.editor.add_history_entry(line.as_str());
                }
                Ok(Some(line))
            }
            Err(ReadlineError::Eof | ReadlineError::Interrupted) => Ok(None),
            Err(e) => Err(e).context("reading the terminal"),
        }
    }
}
