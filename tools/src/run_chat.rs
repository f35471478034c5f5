//! `chronicle chat`: seed 000's conversations as a REPL. A line that is not a `/command` is a
//! query: it starts a run in the chat's session and shows the plan, then the answer (as it
//! streams, when a model writes it) or the approval prompt. `/commands` go to the current run and print their JSON; after one that lets
//! the run go on (`/todo approve`, `/todo reject`, `/todo skip`, `/todo update`,
//! `/checkpoint restore`) the chat waits until the run settles and shows what comes next.

use std::io::{BufRead, IsTerminal, Write};

use chronicle_client::StreamItem;
use chronicle_engine::commands::{self, Command};
use chronicle_projections::RunState;
use chronicle_schemas::{RunId, SessionId};
use chronicle_wire::names::ChunkType;
use futures_util::StreamExt;

use crate::common::{DataArgs, Outcome, RemoteArgs, parse_run_id, runtime};
use crate::run::backend::{self, Backend, StartReq};
use crate::run::{Prompt, parse_hitl, parse_strategy};
use crate::view::{self, styled};

const CHAT_HELP: &str = "\
Examples:
  chronicle chat --hitl every_todo
    chronicle> 강남구 아파트 시세 조회
    chronicle> /todos
    chronicle> /todo add analysis_team
    chronicle> /todo approve
  printf '강남구 아파트 시세 조회\\n/todo approve\\n' | chronicle chat --hitl every_todo
  chronicle chat --run 0199c0de-... --data ./.chronicle      (decide a run that waits)
  chronicle chat --server http://127.0.0.1:8080

Lines: a query starts a run; /todos, /todo approve|reject|skip|add|update, /checkpoint
list|restore, /help act on the current run; /quit or Ctrl-D leaves. With a terminal, lines have
editing and history; piped stdin is read line by line.

Exit codes: 0 the chat ended (EOF or /quit), 2 bad arguments or an operational error.";

#[derive(Debug, clap::Args)]
#[command(after_help = CHAT_HELP,
    // Unlike the inspecting commands, `run` and `chat` start from nothing.
    mut_arg("data", |a| a.help("Data directory of a Chronicle store (created when missing)"))
)]
pub struct ChatArgs {
    /// HITL policy of the runs the chat starts: none | every_todo | categories | tools.
    #[arg(long, value_name = "POLICY")]
    hitl: Option<String>,
    /// Execution strategy instead of the plan's: sequential | parallel | dag.
    #[arg(long, value_name = "STRATEGY")]
    strategy: Option<String>,
    /// Start with this existing run as the current one (to decide an approval it waits for).
    #[arg(long, value_name = "RUN")]
    run: Option<String>,
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
        hitl,
        strategy,
        session: SessionId(uuid::Uuid::new_v4().to_string()),
        current: None,
        out: &mut styled(out),
    };
    let result = chat.repl(attach);
    rt.block_on(backend.close());
    result.map(|()| Outcome::Ok)
}

/// What a chat has shown of a run while waiting for it: its streamed answer, whether the plan
/// is out, and the next event seq to expect.
struct Shown {
    chunks: view::ChunkPrinter,
    plan: bool,
    next_seq: u64,
}

impl Shown {
    /// Takes one item of the run's stream: a message chunk is printed (after the plan, the
    /// first time), events only move the seq on (the chat shows states, not event lines).
    async fn item(
        &mut self,
        backend: &Backend,
        run: RunId,
        out: &mut dyn Write,
        item: StreamItem,
    ) -> anyhow::Result<()> {
        match item {
            StreamItem::Event(ev) => self.next_seq = self.next_seq.max(ev.data.seq + 1),
            StreamItem::Chunk(c) if c.kind_type == ChunkType::Message => {
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

    /// The next line, or `None` at the end (EOF / Ctrl-D).
    fn next(&mut self, out: &mut dyn Write) -> anyhow::Result<Option<String>> {
        match self {
            Input::Tty(p) => {
                out.flush()?;
                p.read("chronicle> ")
            }
            Input::Piped(lines) => match lines.next() {
                None => Ok(None),
                Some(line) => {
                    let line = line?;
                    // Echo, so the output reads as the conversation it was.
                    writeln!(out, "chronicle> {line}")?;
                    Ok(Some(line))
                }
            },
        }
    }
}

struct Chat<'a> {
    rt: &'a tokio::runtime::Runtime,
    backend: &'a Backend,
    hitl: Option<chronicle_schemas::HitlMode>,
    strategy: Option<chronicle_schemas::Strategy>,
    session: SessionId,
    current: Option<RunId>,
    out: &'a mut dyn Write,
}

impl Chat<'_> {
    fn repl(&mut self, attach: Option<RunId>) -> anyhow::Result<()> {
        let mut input = Input::open()?;
        if let Some(run) = attach {
            self.current = Some(run);
            let s = self.rt.block_on(self.backend.settled(run))?;
            writeln!(self.out, "run {run}: {}", s.supervisor.query)?;
            view::write_plan(self.out, &s)?;
            self.show_next(&s, &view::ChunkPrinter::default())?;
        }
        while let Some(line) = input.next(self.out)? {
            let line = line.trim();
            match line {
                "" => continue,
                "/quit" | "/exit" => break,
                _ if line.starts_with('/') => self.command(line)?,
                query => self.query(query)?,
            }
            self.out.flush()?;
        }
        if let Some(run) = self.current {
            let s = self.rt.block_on(self.backend.state(run))?;
            if !backend::is_terminal(&s) && !backend::pending(&s).is_empty() {
                eprintln!(
                    "run {run} still waits for approval; continue with `chronicle chat --run {run} {}`",
                    self.backend.where_flag()
                );
            }
        }
        Ok(())
    }

    fn query(&mut self, query: &str) -> anyhow::Result<()> {
        if let Some(run) = self.current {
            let s = self.rt.block_on(self.backend.state(run))?;
            if !backend::is_terminal(&s) && !backend::pending(&s).is_empty() {
                eprintln!("(run {run} still waits for approval; a new run starts for this query)");
            }
        }
        let req = StartReq {
            query: query.to_owned(),
            hitl: self.hitl,
            strategy: self.strategy,
            session: Some(self.session.clone()),
            agent: None,
        };
        let (run, _) = match self.rt.block_on(self.backend.start(req)) {
            Ok(started) => started,
            Err(e) if super::is_refusal(&e) => {
                eprintln!("{e:#}");
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        self.current = Some(run);
        writeln!(self.out, "run {run}")?;
        let items = self.rt.block_on(self.backend.events(run, 0))?;
        let (s, chunks, plan_shown) = self.settle(run, items, 0, true)?;
        if !plan_shown {
            view::write_plan(self.out, &s)?;
        }
        self.show_next(&s, &chunks)
    }

    /// Waits until `run` settles, printing its answer as it streams (`items`: the run's stream
    /// from `from_seq`, opened before what set the run going). With `plan_first`, the plan is
    /// printed before the answer's first chunk. Answers the settled state, what streamed, and
    /// whether the plan was printed.
    fn settle(
        &mut self,
        run: RunId,
        mut items: backend::Events,
        from_seq: u64,
        plan_first: bool,
    ) -> anyhow::Result<(RunState, view::ChunkPrinter, bool)> {
        let backend = self.backend;
        let out = &mut *self.out;
        self.rt.block_on(async {
            let mut shown = Shown {
                chunks: view::ChunkPrinter::default(),
                plan: !plan_first,
                next_seq: from_seq,
            };
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
            shown.chunks.end_line(out)?;
            Ok((state, shown.chunks, plan_first && shown.plan))
        })
    }

    fn command(&mut self, line: &str) -> anyhow::Result<()> {
        let Some(run) = self.current else {
            if commands::parse(line) == Ok(Command::Help) {
                writeln!(
                    self.out,
                    "{}\n  /quit                                   끝내기",
                    chronicle_realestate::HELP_KO
                )?;
            } else {
                eprintln!("no run yet: type a query first (or start with --run RUN)");
            }
            return Ok(());
        };
        // The grammar lives in the engine; the chat only asks whether the run may go on.
        let continues = matches!(
            commands::parse(line),
            Ok(Command::Approve { .. }
                | Command::Reject { .. }
                | Command::Skip { .. }
                | Command::Update { .. }
                | Command::CheckpointRestore { .. })
        );
        let before = if continues {
            let s = self.rt.block_on(self.backend.state(run))?;
            // Listening before the command sets the run going, so no chunk of its answer is
            // missed (an ended run has nothing to stream until the command brings it back).
            let items = match backend::is_terminal(&s) {
                true => None,
                false => Some(self.rt.block_on(self.backend.events(run, s.next_seq()))?),
            };
            Some((s, items))
        } else {
            None
        };
        let result = self.rt.block_on(self.backend.command(run, line))?;
        writeln!(self.out, "{}", serde_json::to_string_pretty(&result)?)?;
        let refused = result.refusal().is_some();
        if let Some((before, items)) = before.filter(|_| !refused) {
            let from = before.next_seq();
            let items = match items {
                Some(items) => items,
                None => self.rt.block_on(self.backend.events(run, from))?,
            };
            let (s, chunks, _) = self.settle(run, items, from, false)?;
            view::write_changes(self.out, &before, &s)?;
            self.show_next(&s, &chunks)?;
        }
        Ok(())
    }

    /// The approval prompt(s) of a settled run, or its outcome (`chunks`: what streamed of it).
    fn show_next(&mut self, s: &RunState, chunks: &view::ChunkPrinter) -> anyhow::Result<()> {
        if backend::is_terminal(s) {
            view::write_outcome(self.out, s, chunks)?;
            return Ok(());
        }
        for a in backend::pending(s) {
            view::write_approval(self.out, &a)?;
        }
        Ok(())
    }
}
