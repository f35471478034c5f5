//! `chronicle chat`: conversations as a REPL. Every line goes through the engine's chat-turn
//! policy (embedded, or `POST /chat` on a server), the same one the API's chat routes and the
//! WebSocket share: a `/command` acts on the session's run, a line said while that run waits for
//! a human answers it (or starts nothing), any other line is a query that starts a run. The chat
//! shows what the turn did — a command's reply, the new run's plan then its answer as it
//! streams, the approval the run waits for — and follows the run while it goes on.
//!
//! A few words belong to the chat itself and are never sent: `/quit`, `exit`, `clear`, `/help`
//! and `/new <query>` (a new run even while one waits).

use std::io::{BufRead, IsTerminal, Write};

use chronicle_client::StreamItem;
use chronicle_projections::RunState;
use chronicle_schemas::{Event, OnReject, RunId, SessionId};
use chronicle_wire::CommandOutcome;
use chronicle_wire::names::ChunkType;
use futures_util::StreamExt;
use serde_json::json;

use crate::common::{DataArgs, Outcome, RemoteArgs, json_line, parse_run_id, runtime};
use crate::run::backend::{self, Backend, Events, StartReq, Turned};
use crate::run::{Prompt, approval_json, parse_hitl, parse_strategy, result_json};
use crate::view::{self, styled};

const CHAT_HELP: &str = "\
Examples:
  chronicle chat --hitl every_todo
    chronicle> 강남구 아파트 시세 조회
    chronicle> /todos
    chronicle> /todo add analysis_team
    chronicle> /todo approve
  printf '강남구 아파트 시세 조회\\n/todo approve\\n' | chronicle chat --hitl every_todo
  printf '강남구 아파트 시세 조회\\n/todos\\n' | chronicle chat --json --hitl every_todo | jq .type
  chronicle chat --run 0199c0de-... --data ./.chronicle      (decide a run that waits)
  chronicle chat --server http://127.0.0.1:8080

Lines go through the engine's chat-turn policy, as POST /chat does:
  <query>              starts a run in the chat's session; shows its plan, then the answer as it
                       streams, or the approval the run waits for
  /todos, /todo approve|reject|skip|add|update, /checkpoint list|restore
                       act on the session's latest run (see /help)
  <words> while the run waits for a human
                       answer that run; words that decide or change nothing start nothing and
                       the chat shows what the run waits for
The chat's own words, never sent:
  /new <query>         start another run in the session, even while one waits (that one is left
                       waiting)
  clear, /clear        clear the screen (nothing when stdout is not a terminal)
  /help                the commands and these words
  /quit, /exit, quit, exit, Ctrl-D
                       leave

Output: for a person, tables and one-line replies; an error is one `error: ...` line. When stdin
is piped, each line is echoed after `chronicle> ` so the output reads as the conversation.
--json prints one JSON object per line instead, {\"type\": ..., \"data\": ...}: command
(a reply, with interpreted_from), started, left_waiting (after /new), waiting (the line started
nothing), chunk, approval, result, help, error.

Exit codes: 0 the chat ended (EOF or /quit), 2 bad arguments or an operational error.";

/// The chat's own words, printed after the deployment's command help.
const CHAT_WORDS: &str = "\
Chat:
  <query>          start a run (while a run waits for a human, the words answer it)
  /new <query>     start another run, even while one waits (that one is left waiting)
  clear            clear the screen
  /quit, exit      leave (also Ctrl-D)";

#[derive(Debug, clap::Args)]
#[command(after_help = CHAT_HELP,
    // Unlike the inspecting commands, `run` and `chat` start from nothing.
    mut_arg("data", |a| a.help("Data directory of a Chronicle store (created when missing)"))
)]
pub struct ChatArgs {
    /// HITL policy of the runs the chat starts: none | every_todo | categories | tools.
    #[arg(long, value_name = "POLICY")]
    hitl: Option<String>,
    /// What a rejection does in the runs the chat starts: skip | end_turn (the run ends with an
    /// answer saying what was rejected). Default: the server's (skip embedded).
    #[arg(long, value_name = "WHAT", value_parser = crate::serve::parse_on_reject)]
    on_reject: Option<OnReject>,
    /// Execution strategy of the runs started with `/new`: sequential | parallel | dag (a
    /// query typed as a plain line takes the plan's, as `POST /chat` does).
    #[arg(long, value_name = "STRATEGY")]
    strategy: Option<String>,
    /// Continue the session of this existing run (to decide an approval it waits for).
    #[arg(long, value_name = "RUN")]
    run: Option<String>,
    /// JSON Lines on stdout instead of text: one {"type", "data"} object per reply, chunk,
    /// approval, result and error (for scripts).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    data: DataArgs,
    #[command(flatten)]
    remote: RemoteArgs,
}

pub fn run(args: &ChatArgs, out: &mut dyn Write) -> anyhow::Result<Outcome> {
    let hitl = args.hitl.as_deref().map(parse_hitl).transpose()?;
    let strategy = args.strategy.as_deref().map(parse_strategy).transpose()?;
    let attach = args.run.as_deref().map(parse_run_id).transpose()?;
    let rt = runtime()?;
    let backend = rt.block_on(Backend::open(&args.data, &args.remote))?;
    let mut chat = Chat {
        rt: &rt,
        backend: &backend,
        opts: backend::TurnOpts {
            hitl,
            on_reject: args.on_reject,
        },
        strategy,
        json: args.json,
        session: SessionId(uuid::Uuid::new_v4().to_string()),
        current: None,
        help: None,
        out: &mut styled(out),
    };
    let result = chat.repl(attach);
    rt.block_on(backend.close());
    result.map(|()| Outcome::Ok)
}

/// What the chat does with a line.
#[derive(Debug, PartialEq, Eq)]
enum Word<'a> {
    Empty,
    Quit,
    Clear,
    Help,
    /// `/new <query>` (the query may be missing: that is the person's mistake to show).
    New(&'a str),
    /// Anything else: a turn for the engine.
    Turn(&'a str),
}

/// Tells the chat's own words from the lines the engine takes.
fn word(line: &str) -> Word<'_> {
    let line = line.trim();
    let (first, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    match first {
        "" => Word::Empty,
        "/quit" | "/exit" | "quit" | "exit" if rest.is_empty() => Word::Quit,
        "clear" | "/clear" if rest.is_empty() => Word::Clear,
        "/help" if rest.is_empty() => Word::Help,
        "/new" => Word::New(rest.trim()),
        _ => Word::Turn(line),
    }
}

/// What a chat has shown of a run while waiting for it: its streamed answer, whether the plan
/// is out, and the next event seq to expect.
struct Shown {
    chunks: view::ChunkPrinter,
    plan: bool,
    next_seq: u64,
    json: bool,
    /// Shows that agents work, until the answer or a prompt appears.
    progress: Progress,
}

impl Shown {
    /// Takes one item of the run's stream: a message chunk is printed (after the plan, the
    /// first time), events only move the seq on and the progress line (the chat shows states,
    /// not event lines).
    async fn item(
        &mut self,
        backend: &Backend,
        run: RunId,
        out: &mut dyn Write,
        item: StreamItem,
    ) -> anyhow::Result<()> {
        match item {
            StreamItem::Event(ev) => {
                self.next_seq = self.next_seq.max(ev.data.seq + 1);
                if let Ok(Event::AgentStarted { todo_id, agent, .. }) = ev.data.event() {
                    self.progress.working(&agent, todo_id.as_str());
                }
            }
            StreamItem::Chunk(c) if c.kind_type == ChunkType::Message => {
                self.progress.clear();
                if self.json {
                    let mut data = serde_json::to_value(&c)?;
                    data["event"] = json!(c.name());
                    return json_line(out, "chunk", data);
                }
                if !self.plan {
                    // The answer is the run's last step: its plan is known by now.
                    view::write_plan(out, &backend.state(run).await?)?;
                    self.plan = true;
                }
                self.chunks.chunk(out, &c, false)?;
            }
            StreamItem::Chunk(_) => {}
        }
        Ok(())
    }
}

/// A spinner on the terminal while a run works ("⠋ search_team working… (todo_001)"), erased
/// before anything else is printed. Nothing at all when stdout is not a terminal or for
/// `--json`, so transcripts stay clean (indicatif also draws nothing when stderr is not one).
struct Progress(Option<indicatif::ProgressBar>);

impl Progress {
    fn new(show: bool) -> Self {
        Progress(show.then(|| {
            let bar = indicatif::ProgressBar::with_draw_target(
                None,
                indicatif::ProgressDrawTarget::stderr(),
            )
            .with_style(indicatif::ProgressStyle::default_spinner());
            bar.set_message("working…");
            bar.enable_steady_tick(std::time::Duration::from_millis(100));
            bar
        }))
    }

    fn working(&self, agent: &str, todo: &str) {
        if let Some(bar) = &self.0 {
            bar.set_message(format!("{agent} working… ({todo})"));
        }
    }

    fn clear(&mut self) {
        if let Some(bar) = self.0.take() {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.clear();
    }
}

/// Where the lines come from: the terminal (rustyline) or a pipe.
enum Input {
    // Boxed: the editor is large, and the enum lives for the whole chat.
    Tty(Box<Prompt>),
    Piped(std::io::Lines<std::io::StdinLock<'static>>),
}

impl Input {
    fn open() -> anyhow::Result<Self> {
        let stdin = std::io::stdin();
        Ok(if stdin.is_terminal() {
            Input::Tty(Box::new(Prompt::new()?))
        } else {
            Input::Piped(stdin.lock().lines())
        })
    }

    /// The next line, or `None` at the end (EOF / Ctrl-D). A piped line is echoed (not in
    /// JSON), so the output reads as the conversation it was.
    fn next(&mut self, out: &mut dyn Write, echo: bool) -> anyhow::Result<Option<String>> {
        match self {
            Input::Tty(p) => {
                out.flush()?;
                p.read("chronicle> ")
            }
            Input::Piped(lines) => match lines.next() {
                None => Ok(None),
                Some(line) => {
                    let line = line?;
                    if echo {
                        writeln!(out, "chronicle> {line}")?;
                    }
                    Ok(Some(line))
                }
            },
        }
    }
}

/// The current run before a turn: its state and, while it has not ended, its stream from the
/// next seq, opened before the turn sets the run going so that no chunk of its answer is missed.
struct Listening {
    run: RunId,
    state: RunState,
    items: Option<Events>,
}

struct Chat<'a> {
    rt: &'a tokio::runtime::Runtime,
    backend: &'a Backend,
    opts: backend::TurnOpts,
    strategy: Option<chronicle_schemas::Strategy>,
    json: bool,
    session: SessionId,
    /// The session's latest run, as far as the chat knows.
    current: Option<RunId>,
    /// The deployment's command help, as the engine last gave it.
    help: Option<String>,
    out: &'a mut dyn Write,
}

impl Chat<'_> {
    fn repl(&mut self, attach: Option<RunId>) -> anyhow::Result<()> {
        let mut input = Input::open()?;
        if !self.json {
            writeln!(
                self.out,
                "chronicle chat ({}): type /help for commands, /quit to leave",
                self.backend.where_flag()
            )?;
        }
        if let Some(run) = attach {
            self.attach(run)?;
        }
        while let Some(line) = input.next(self.out, !self.json)? {
            match word(&line) {
                Word::Empty => continue,
                Word::Quit => break,
                Word::Clear => self.clear()?,
                Word::Help => self.print_help()?,
                Word::New(query) => self.new_run(query)?,
                Word::Turn(text) => self.turn(text)?,
            }
            self.out.flush()?;
        }
        self.out.flush()?;
        if let Some((run, _)) = self.waiting_run()? {
            eprintln!(
                "run {run} still waits for approval; continue with `chronicle chat --run {run} {}`",
                self.backend.where_flag()
            );
        }
        Ok(())
    }

    /// Continues the session of an existing run, showing where it stands.
    fn attach(&mut self, run: RunId) -> anyhow::Result<()> {
        let s = self.rt.block_on(self.backend.settled(run))?;
        self.session = s.supervisor.session_id.clone();
        self.current = Some(run);
        if !self.json {
            writeln!(self.out, "run {run}: {}", s.supervisor.query)?;
            view::write_plan(self.out, &s)?;
        }
        self.show_next(run, &s, &view::ChunkPrinter::default())
    }

    /// The current run when it waits for a human, with its state.
    fn waiting_run(&self) -> anyhow::Result<Option<(RunId, RunState)>> {
        let Some(run) = self.current else {
            return Ok(None);
        };
        let s = self.rt.block_on(self.backend.state(run))?;
        let waits = !backend::is_terminal(&s) && !backend::pending(&s).is_empty();
        Ok(waits.then_some((run, s)))
    }

    /// One line through the engine's chat-turn policy, then what it did.
    fn turn(&mut self, text: &str) -> anyhow::Result<()> {
        if text.starts_with('/') && self.current.is_none() {
            return self.error("no run yet: type a query first (or start with --run RUN)");
        }
        let before = self.listen()?;
        // A server answers a turn once the run has settled (or after its wait): show that the
        // chat is not stuck meanwhile.
        let mut progress = Progress::new(self.shows_progress());
        let turned = self
            .rt
            .block_on(self.backend.turn(&self.session, text, self.opts));
        progress.clear();
        let turned = match turned {
            Ok(t) => t,
            Err(e) if super::is_refusal(&e) => return self.error(&format!("{e:#}")),
            Err(e) => return Err(e),
        };
        match turned {
            Turned::Command { run, outcome, said } => {
                self.command(run, &outcome, said.as_ref(), before)
            }
            Turned::Started { run } => self.follow_new(run),
            Turned::Waiting { run } => self.waiting(run),
            Turned::Decided { run } => self.go_on(run, before),
        }
    }

    /// See [`Listening`]; `None` before the first run.
    fn listen(&mut self) -> anyhow::Result<Option<Listening>> {
        let Some(run) = self.current else {
            return Ok(None);
        };
        let state = self.rt.block_on(self.backend.state(run))?;
        // An ended run has nothing to stream until a command brings it back.
        let items = match backend::is_terminal(&state) {
            true => None,
            false => Some(
                self.rt
                    .block_on(self.backend.events(run, state.next_seq()))?,
            ),
        };
        Ok(Some(Listening { run, state, items }))
    }

    /// A command's reply; after one that lets the run go on, the run is followed.
    fn command(
        &mut self,
        run: RunId,
        outcome: &CommandOutcome,
        said: Option<&backend::Interpreted>,
        before: Option<Listening>,
    ) -> anyhow::Result<()> {
        self.current = Some(run);
        if let CommandOutcome::Refused { help, .. } | CommandOutcome::Help { help } = outcome
            && !help.is_empty()
        {
            self.help = Some(help.clone());
        }
        if self.json {
            let data = json!({
                "run_id": run, "result": outcome,
                "interpreted_from": said.map(|s| &s.said),
                "interpreted_as": said.map(|s| &s.command),
            });
            json_line(self.out, "command", data)?;
        } else {
            view::write_command(self.out, outcome, said.map(|s| s.command.as_str()))?;
        }
        let continues = matches!(
            outcome,
            CommandOutcome::Approved(_)
                | CommandOutcome::ApprovedAll(_)
                | CommandOutcome::Rejected(_)
                | CommandOutcome::Skipped(_)
                | CommandOutcome::Updated(_)
                | CommandOutcome::Restored(_)
        );
        if continues {
            self.go_on(run, before)?;
        }
        Ok(())
    }

    /// A run the turn set going again: follows it until it settles, then says what changed and
    /// what comes next.
    fn go_on(&mut self, run: RunId, before: Option<Listening>) -> anyhow::Result<()> {
        let (before, items) = match before.filter(|b| b.run == run) {
            Some(b) => (Some(b.state), b.items),
            None => (None, None),
        };
        let from = before.as_ref().map_or(0, RunState::next_seq);
        let items = match items {
            Some(items) => items,
            None => self.rt.block_on(self.backend.events(run, from))?,
        };
        let (s, chunks, _) = self.settle(run, items, from, false)?;
        if let Some(before) = before.filter(|_| !self.json) {
            view::write_changes(self.out, &before, &s)?;
        }
        self.show_next(run, &s, &chunks)
    }

    /// A run the turn (or `/new`) started: its plan, then its answer or its approval prompt.
    fn follow_new(&mut self, run: RunId) -> anyhow::Result<()> {
        self.current = Some(run);
        if self.json {
            json_line(self.out, "started", json!({"run_id": run}))?;
        } else {
            writeln!(self.out, "run {run}")?;
        }
        self.out.flush()?;
        let items = self.rt.block_on(self.backend.events(run, 0))?;
        let (s, chunks, plan_shown) = self.settle(run, items, 0, true)?;
        if !plan_shown && !self.json {
            view::write_plan(self.out, &s)?;
        }
        self.show_next(run, &s, &chunks)
    }

    /// The message started nothing: the run waits for a human. Says so, and what it waits for.
    fn waiting(&mut self, run: RunId) -> anyhow::Result<()> {
        self.current = Some(run);
        let s = self.rt.block_on(self.backend.state(run))?;
        let pending = backend::pending(&s);
        if self.json {
            let list: Vec<_> = pending.iter().map(|a| approval_json(run, a)).collect();
            return json_line(
                self.out,
                "waiting",
                json!({"run_id": run, "approvals": list}),
            );
        }
        let line = format!(
            "run {run} waits for a human; that started nothing. Answer it (/todo approve, \
             /todo reject), or start another run with /new <query>."
        );
        writeln!(self.out, "{}", view::paint(view::YELLOW, line))?;
        for a in &pending {
            view::write_approval(self.out, a)?;
            view::write_approval_commands(self.out, a)?;
        }
        Ok(())
    }

    /// `/new <query>`: a new run in the session, even while the current one waits.
    fn new_run(&mut self, query: &str) -> anyhow::Result<()> {
        if query.is_empty() {
            return self.error("/new takes a query: /new <query>");
        }
        let left = self.waiting_run()?;
        let req = StartReq {
            query: query.to_owned(),
            hitl: self.opts.hitl,
            on_reject: self.opts.on_reject,
            strategy: self.strategy,
            session: Some(self.session.clone()),
            agent: None,
        };
        let run = match self.rt.block_on(self.backend.start(req)) {
            Ok((run, _)) => run,
            Err(e) if super::is_refusal(&e) => return self.error(&format!("{e:#}")),
            Err(e) => return Err(e),
        };
        if let Some((old, _)) = left {
            if self.json {
                json_line(self.out, "left_waiting", json!({"run_id": old}))?;
            } else {
                writeln!(
                    self.out,
                    "run {old} is left waiting for approval; this chat now follows the new run"
                )?;
            }
        }
        self.follow_new(run)
    }

    /// Waits until `run` settles, printing its answer as it streams (`items`: the run's stream
    /// from `from_seq`, opened before what set the run going). With `plan_first`, the plan is
    /// printed before the answer's first chunk. Answers the settled state, what streamed, and
    /// whether the plan was printed.
    fn settle(
        &mut self,
        run: RunId,
        mut items: Events,
        from_seq: u64,
        plan_first: bool,
    ) -> anyhow::Result<(RunState, view::ChunkPrinter, bool)> {
        let backend = self.backend;
        let show_progress = self.shows_progress();
        let mut shown = Shown {
            chunks: view::ChunkPrinter::default(),
            plan: !plan_first,
            next_seq: from_seq,
            json: self.json,
            progress: Progress::new(show_progress),
        };
        let out = &mut *self.out;
        self.rt.block_on(async {
            let settled = backend.settled(run);
            tokio::pin!(settled);
            let mut open = true;
            let state = loop {
                tokio::select! {
                    biased;
                    item = items.next(), if open => match item {
                        Some(item) => shown.item(backend, run, out, item?).await?,
                        None => open = false,
                    },
                    s = &mut settled => break s?,
                }
            };
            // The chunks that came before the run's last event may still be on their way.
            let last = state.last_seq.unwrap_or(0);
            while open && shown.next_seq <= last {
                match items.next().await {
                    Some(item) => shown.item(backend, run, out, item?).await?,
                    None => open = false,
                }
            }
            shown.progress.clear();
            shown.chunks.end_line(out)?;
            Ok((state, shown.chunks, plan_first && shown.plan))
        })
    }

    /// The approval prompt(s) of a settled run, or its outcome (`chunks`: what streamed of it).
    fn show_next(
        &mut self,
        run: RunId,
        s: &RunState,
        chunks: &view::ChunkPrinter,
    ) -> anyhow::Result<()> {
        if backend::is_terminal(s) {
            if self.json {
                return json_line(self.out, "result", result_json(run, s));
            }
            return Ok(view::write_outcome(self.out, s, chunks)?);
        }
        for a in backend::pending(s) {
            if self.json {
                json_line(self.out, "approval", approval_json(run, &a))?;
            } else {
                view::write_approval(self.out, &a)?;
                view::write_approval_commands(self.out, &a)?;
            }
        }
        Ok(())
    }

    /// Whether a spinner shows while agents work: for a person on a terminal only.
    fn shows_progress(&self) -> bool {
        !self.json && std::io::stdout().is_terminal()
    }

    /// `/help`: the deployment's command help (as the engine last gave it, else the embedded
    /// engine's, else the built-in one), then the chat's own words.
    fn print_help(&mut self) -> anyhow::Result<()> {
        let help = self
            .help
            .clone()
            .or_else(|| self.backend.help())
            .unwrap_or_else(|| chronicle_realestate::HELP_KO.to_owned());
        if self.json {
            return json_line(self.out, "help", json!({"help": help, "chat": CHAT_WORDS}));
        }
        writeln!(self.out, "{help}\n{CHAT_WORDS}")?;
        Ok(())
    }

    /// `clear`: clears a terminal; on a pipe (or in JSON) nothing.
    fn clear(&mut self) -> anyhow::Result<()> {
        self.out.flush()?;
        let mut stdout = std::io::stdout();
        if !self.json && stdout.is_terminal() {
            // Written past the styled writer, which would strip the escape without colours.
            write!(stdout, "\x1b[2J\x1b[H")?;
            stdout.flush()?;
        }
        Ok(())
    }

    /// A turn that failed on the person's side: one line, and the chat goes on.
    fn error(&mut self, message: &str) -> anyhow::Result<()> {
        if self.json {
            return json_line(self.out, "error", json!({"message": message}));
        }
        Ok(view::write_error(self.out, message)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chats_own_words_are_told_from_turns() {
        assert_eq!(word("  "), Word::Empty);
        for quit in ["/quit", "/exit", "quit", " exit "] {
            assert_eq!(word(quit), Word::Quit, "{quit}");
        }
        assert_eq!(word("clear"), Word::Clear);
        assert_eq!(word("/clear"), Word::Clear);
        assert_eq!(word("/help"), Word::Help);
        assert_eq!(word("/new  강남구 시세 "), Word::New("강남구 시세"));
        assert_eq!(word("/new"), Word::New(""));
        // Words that only start like the chat's are the engine's to interpret.
        assert_eq!(word("clear the plan"), Word::Turn("clear the plan"));
        assert_eq!(word("exit strategy?"), Word::Turn("exit strategy?"));
        assert_eq!(word("/help me"), Word::Turn("/help me"));
        assert_eq!(word("/todos"), Word::Turn("/todos"));
        assert_eq!(word("/newer"), Word::Turn("/newer"));
    }
}
