//! `replay`: the time-travel debugger. The projected state of a run at any seq (`--to`), what
//! changed between two seqs (`--diff`), and an interactive stepper (`--step`) that shows each
//! event with the state change it caused. Every state is the projections' own replay (the same
//! fold the engine runs live), read from a data directory — a copy taken from a crashed server
//! works, since the store is opened without its tail check — or from a running server with
//! `--server` (its log and its `state?at=`), which prints the same.

mod diff;

use std::io::{self, BufRead, IsTerminal, Write};

use anyhow::{Context, bail};
use chronicle_client::Client;
use chronicle_engine::store::{RunHead, Store};
use chronicle_projections::{RunState, VecSource};
use chronicle_schemas::{CheckpointId, Envelope, RunId};
use serde_json::json;

use crate::common::{DataArgs, LOCKED_USE_SERVER, RemoteArgs, json_line, parse_run_id, runtime};
use crate::view::{self, Branches, DIM, paint, styled};

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Modes (without one, the state at the run's last seq is printed):
  --to SEQ     the projected state right after SEQ: phase, run status, current TODO, checkpoint
               head, pending approvals, the TODO table, results and the last reasoning
  --diff A B   what changed from seq A to seq B: TODO statuses, approvals, phase, run status,
               results, the final response, restores, checkpoints
  --step       interactive: reads commands from stdin (a terminal or a pipe) and shows, for each
               position, the event and the state change it caused (starts at --to SEQ or 0)

Step commands:
  n, next [K]        forward one event (or K); an empty line is `next`
  p, prev [K]        back one event (or K)
  g, goto SEQ        go to a seq
  c, checkpoint ID   go to a checkpoint's seq (abandoned ones too)
  t, todos           the TODO table here
  s, state           the whole state here
  e, event           the event here as JSON
  h, help            this list
  q, quit            leave (so does end of input)

Events and states on abandoned branches (left by a later restore) are marked as such.

Examples:
  chronicle replay 0190d5a2-8c1e-7f3a-9b2d-4c5e6f708192 --to 17
  chronicle replay 0190d5a2-8c1e-7f3a-9b2d-4c5e6f708192 --diff 10 25
  chronicle replay 0190d5a2-8c1e-7f3a-9b2d-4c5e6f708192 --step --data ./copy-of-crashed-server
  printf 'n\\nn\\nc cp_003\\nt\\nq\\n' | chronicle replay 0190d5a2-8c1e-7f3a-9b2d-4c5e6f708192 --step

--json: `--to` prints {\"type\":\"state\",\"data\":<RunState>}; `--diff` {\"type\":\"diff\",...};
`--step` one {\"type\":\"step\",\"data\":{seq, abandoned, event, diff}} line per position.

--server URL (or CHRONICLE_SERVER) replays a run of a running server, which holds its data
directory locked: its log and its states come over the API, and the output is the same.

Exit codes: 0 done, 2 error (unknown run, a seq beyond the run's last, bad argument, unreadable
store, unreachable server). A bad step command prints an error and the session goes on.")]
pub struct ReplayArgs {
    /// The run id (a UUID).
    run: String,
    /// Print the state right after this seq (with --step: start there).
    #[arg(long, value_name = "SEQ")]
    to: Option<u64>,
    /// Print what changed from seq A to seq B.
    #[arg(long, num_args = 2, value_names = ["A", "B"], conflicts_with_all = ["to", "step"])]
    diff: Option<Vec<u64>>,
    /// Step through the run interactively (commands on stdin).
    #[arg(long)]
    step: bool,
    /// JSON Lines instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    data: DataArgs,
    #[command(flatten)]
    remote: RemoteArgs,
}

pub fn run(args: &ReplayArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let run = parse_run_id(&args.run)?;
    let out = &mut styled(out);
    let rt;
    let store;
    let reader = match args.remote.client()? {
        Some(client) => {
            rt = runtime()?;
            let events = rt.block_on(client.log(run, 0))?;
            if events.is_empty() {
                bail!("run {run} has no events");
            }
            Reader::Server {
                rt: &rt,
                client,
                run,
                log: VecSource {
                    events,
                    snapshots: vec![],
                },
            }
        }
        None => {
            store = view::open_for_reading(&args.data, LOCKED_USE_SERVER)?;
            let head = view::require_run(&store, run)?;
            Reader::Store {
                store: &store,
                head,
            }
        }
    };
    if let Some(seq) = args.to {
        reader.check_seq(seq)?;
    }
    if let Some(d) = &args.diff {
        for &seq in d {
            reader.check_seq(seq)?;
        }
        return print_diff(&reader, d[0], d[1], args.json, out);
    }
    if args.step {
        let input = Input::open()?;
        return Stepper::new(reader, args.json)?.session(args.to.unwrap_or(0), input, out);
    }
    print_state(
        &reader,
        args.to.unwrap_or(reader.last_seq()),
        args.json,
        out,
    )
}

/// Where a replay reads its run: a data directory, or a server (whose log is read once; states
/// come from its `state?at=`).
enum Reader<'a> {
    Store {
        store: &'a Store,
        head: RunHead,
    },
    Server {
        rt: &'a tokio::runtime::Runtime,
        client: Client,
        run: RunId,
        /// The whole log of the run, in seq order (not empty).
        log: VecSource,
    },
}

impl Reader<'_> {
    fn run_id(&self) -> RunId {
        match self {
            Reader::Store { head, .. } => head.run_id,
            Reader::Server { run, .. } => *run,
        }
    }

    fn last_seq(&self) -> u64 {
        match self {
            Reader::Store { head, .. } => head.last_seq,
            Reader::Server { log, .. } => log.events.last().map_or(0, |e| e.seq),
        }
    }

    fn check_seq(&self, seq: u64) -> anyhow::Result<()> {
        view::check_seq(self.run_id(), self.last_seq(), seq)
    }

    fn event_at(&self, seq: u64) -> anyhow::Result<Envelope> {
        let run = self.run_id();
        let found = match self {
            Reader::Store { store, .. } => store.read_run(run, seq, seq).next().transpose()?,
            Reader::Server { log, .. } => log.events.get(seq as usize).cloned(),
        };
        found.with_context(|| format!("run {run} has no event at seq {seq}"))
    }

    fn state_at(&self, seq: u64) -> anyhow::Result<RunState> {
        let run = self.run_id();
        let state = match self {
            Reader::Store { store, .. } => store.state_at(run, seq).map_err(anyhow::Error::from),
            Reader::Server { rt, client, .. } => rt
                .block_on(client.state(run, Some(seq)))
                .map_err(anyhow::Error::from),
        };
        state.with_context(|| format!("replaying run {run} to seq {seq}"))
    }

    fn branches(&self) -> anyhow::Result<Branches> {
        match self {
            Reader::Store { store, head } => view::branches_of_run(store, head),
            Reader::Server { log, .. } => Ok(Branches::of_events(&log.events)),
        }
    }

    /// Folds one more event into `state` (a restore reads back through the run's log).
    fn apply(&self, state: &mut RunState, env: &Envelope) -> anyhow::Result<()> {
        match self {
            Reader::Store { store, .. } => state.apply(env, &store.source(self.run_id()))?,
            Reader::Server { log, .. } => state.apply(env, log)?,
        }
        Ok(())
    }
}

fn print_state(reader: &Reader, seq: u64, json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    let state = reader.state_at(seq)?;
    if json {
        return json_line(out, "state", serde_json::to_value(&state)?);
    }
    let at = reader.event_at(seq)?;
    let abandoned = reader.branches()?.is_abandoned(seq);
    view::state_view(out, &state, reader.last_seq(), &at, abandoned)?;
    Ok(())
}

fn print_diff(
    reader: &Reader,
    a: u64,
    b: u64,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let (sa, sb) = (reader.state_at(a)?, reader.state_at(b)?);
    let d = chronicle_projections::diff::diff(&sa, &sb);
    if json {
        return json_line(out, "diff", serde_json::to_value(&d)?);
    }
    let branches = reader.branches()?;
    let mark = |seq: u64| {
        if branches.is_abandoned(seq) {
            paint(DIM, " (abandoned branch)")
        } else {
            String::new()
        }
    };
    writeln!(
        out,
        "{}",
        paint(
            view::BOLD,
            format!(
                "run {}: seq {a}{} → seq {b}{}",
                reader.run_id(),
                mark(a),
                mark(b)
            )
        )
    )?;
    diff::render(out, &d, "")?;
    Ok(())
}

// ----------------------------------------------------------------------------------------- step

/// Where step commands come from: a line editor on a terminal, plain lines from a pipe.
enum Input {
    Terminal(Box<rustyline::DefaultEditor>),
    Lines(io::StdinLock<'static>),
}

impl Input {
    fn open() -> anyhow::Result<Input> {
        let stdin = io::stdin();
        if stdin.is_terminal() {
            let editor = rustyline::DefaultEditor::new().context("opening the terminal")?;
            Ok(Input::Terminal(Box::new(editor)))
        } else {
            Ok(Input::Lines(stdin.lock()))
        }
    }

    /// The next command line; `None` at end of input (or Ctrl-C / Ctrl-D on a terminal).
    fn read(&mut self, prompt: &str) -> anyhow::Result<Option<String>> {
        match self {
            Input::Terminal(ed) => match ed.readline(prompt) {
                Ok(line) => {
                    if !line.trim().is_empty() {
                        let _ = ed.add_history_entry(line.as_str());
                    }
                    Ok(Some(line))
                }
                Err(
                    rustyline::error::ReadlineError::Eof
                    | rustyline::error::ReadlineError::Interrupted,
                ) => Ok(None),
                Err(e) => Err(e).context("reading a command"),
            },
            Input::Lines(lines) => {
                let mut line = String::new();
                if lines.read_line(&mut line).context("reading a command")? == 0 {
                    return Ok(None);
                }
                Ok(Some(line))
            }
        }
    }
}

/// One parsed step command.
#[derive(Debug, PartialEq, Eq)]
enum StepCommand {
    Next(u64),
    Prev(u64),
    Goto(u64),
    Checkpoint(String),
    Todos,
    State,
    Event,
    Help,
    Quit,
}

const STEP_HELP: &str = "\
n, next [K]        forward one event (or K); an empty line is `next`
p, prev [K]        back one event (or K)
g, goto SEQ        go to a seq
c, checkpoint ID   go to a checkpoint's seq
t, todos           the TODO table here
s, state           the whole state here
e, event           the event here as JSON
h, help            this list
q, quit            leave";

fn parse_command(line: &str) -> Result<StepCommand, String> {
    let mut words = line.split_whitespace();
    let Some(cmd) = words.next() else {
        return Ok(StepCommand::Next(1));
    };
    let arg = words.next();
    if let Some(extra) = words.next() {
        return Err(format!(
            "unexpected {extra:?} after {cmd} {}",
            arg.unwrap_or("")
        ));
    }
    let count = |arg: Option<&str>| -> Result<u64, String> {
        match arg {
            None => Ok(1),
            Some(a) => a
                .parse::<u64>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("{cmd} takes a positive count, got {a:?}")),
        }
    };
    let no_arg = |c: StepCommand| match arg {
        None => Ok(c),
        Some(a) => Err(format!("{cmd} takes no argument, got {a:?}")),
    };
    match cmd {
        "n" | "next" => count(arg).map(StepCommand::Next),
        "p" | "prev" | "previous" => count(arg).map(StepCommand::Prev),
        "g" | "goto" => match arg {
            None => Err(format!("{cmd} needs a seq")),
            Some(a) => a
                .parse()
                .map(StepCommand::Goto)
                .map_err(|_| format!("{cmd} needs a seq, got {a:?}")),
        },
        "c" | "checkpoint" => match arg {
            None => Err(format!("{cmd} needs a checkpoint id")),
            Some(a) => Ok(StepCommand::Checkpoint(a.to_owned())),
        },
        "t" | "todos" => no_arg(StepCommand::Todos),
        "s" | "state" => no_arg(StepCommand::State),
        "e" | "event" => no_arg(StepCommand::Event),
        "h" | "help" | "?" => no_arg(StepCommand::Help),
        "q" | "quit" | "exit" => no_arg(StepCommand::Quit),
        other => Err(format!("unknown command {other:?} (h for help)")),
    }
}

/// The stepper's position: the state right after `pos`, and the run's shape.
struct Stepper<'a> {
    reader: Reader<'a>,
    branches: Branches,
    /// The whole checkpoint tree (as of the newest seq), so `c` reaches abandoned ones too.
    checkpoints: chronicle_projections::CheckpointList,
    json: bool,
    pos: u64,
    state: RunState,
}

impl<'a> Stepper<'a> {
    fn new(reader: Reader<'a>, json: bool) -> anyhow::Result<Self> {
        let branches = reader.branches()?;
        let checkpoints = reader.state_at(reader.last_seq())?.checkpoints;
        Ok(Self {
            reader,
            branches,
            checkpoints,
            json,
            pos: 0,
            state: RunState::default(),
        })
    }

    fn session(mut self, start: u64, mut input: Input, out: &mut dyn Write) -> anyhow::Result<()> {
        let abandoned = self.branches.abandoned_count();
        eprintln!(
            "run {}: seq 0..={}{}; h for help, q to quit",
            self.reader.run_id(),
            self.reader.last_seq(),
            if abandoned > 0 {
                format!(", {abandoned} event(s) on abandoned branches (marked ~)")
            } else {
                String::new()
            }
        );
        self.go(start, out)?;
        loop {
            out.flush()?;
            let prompt = format!("replay[{}]> ", self.pos);
            let Some(line) = input.read(&prompt)? else {
                return Ok(());
            };
            let cmd = match parse_command(&line) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("error: {e}");
                    continue;
                }
            };
            let done = self.execute(cmd, out);
            match done {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                // Output errors (a closed pipe) end the session; the rest are the user's.
                Err(e) if e.chain().any(|c| c.downcast_ref::<io::Error>().is_some()) => {
                    return Err(e);
                }
                Err(e) => eprintln!("error: {e:#}"),
            }
        }
    }

    /// Runs one command; `true` to leave.
    fn execute(&mut self, cmd: StepCommand, out: &mut dyn Write) -> anyhow::Result<bool> {
        let last = self.reader.last_seq();
        match cmd {
            StepCommand::Next(k) => {
                if self.pos == last {
                    bail!("already at the last seq {last}");
                }
                self.go(self.pos.saturating_add(k).min(last), out)?;
            }
            StepCommand::Prev(k) => {
                if self.pos == 0 {
                    bail!("already at seq 0");
                }
                self.go(self.pos.saturating_sub(k), out)?;
            }
            StepCommand::Goto(seq) => {
                self.reader.check_seq(seq)?;
                self.go(seq, out)?;
            }
            StepCommand::Checkpoint(id) => {
                let seq = self
                    .checkpoints
                    .get(&CheckpointId(id.clone()))
                    .map(|c| c.seq)
                    .with_context(|| {
                        format!("checkpoint {id} not found in run {}", self.reader.run_id())
                    })?;
                self.go(seq, out)?;
            }
            StepCommand::Todos => {
                if self.json {
                    let p = self
                        .state
                        .supervisor
                        .planning_state
                        .clone()
                        .unwrap_or_default();
                    json_line(
                        out,
                        "todos",
                        json!({"seq": self.pos, "todos": p.todos, "current_todo_id": p.current_todo_id}),
                    )?;
                } else {
                    view::todo_table(out, &self.state)?;
                }
            }
            StepCommand::State => {
                if self.json {
                    json_line(out, "state", serde_json::to_value(&self.state)?)?;
                } else {
                    let at = self.reader.event_at(self.pos)?;
                    let abandoned = self.branches.is_abandoned(self.pos);
                    view::state_view(out, &self.state, self.reader.last_seq(), &at, abandoned)?;
                }
            }
            StepCommand::Event => {
                let env = self.reader.event_at(self.pos)?;
                if self.json {
                    json_line(out, "event", serde_json::to_value(&env)?)?;
                } else {
                    writeln!(out, "{}", serde_json::to_string_pretty(&env)?)?;
                }
            }
            StepCommand::Help => writeln!(out, "{STEP_HELP}")?,
            StepCommand::Quit => return Ok(true),
        }
        Ok(false)
    }

    /// Moves to `seq` and shows its event with the change it caused (from the state right
    /// before it). Stepping forward by one folds a single event; any other move replays.
    fn go(&mut self, seq: u64, out: &mut dyn Write) -> anyhow::Result<()> {
        let env = self.reader.event_at(seq)?;
        let before = if seq > 0 && seq == self.pos + 1 && self.state.last_seq == Some(self.pos) {
            self.state.clone()
        } else if seq == 0 {
            RunState::default()
        } else {
            self.reader.state_at(seq - 1)?
        };
        let mut after = before.clone();
        self.reader
            .apply(&mut after, &env)
            .with_context(|| format!("replaying seq {seq}"))?;
        let change = chronicle_projections::diff::diff(&before, &after);
        let abandoned = self.branches.is_abandoned(seq);
        if self.json {
            json_line(
                out,
                "step",
                json!({"seq": seq, "abandoned": abandoned, "event": env, "diff": change}),
            )?;
        } else {
            let mut line = view::event_line(&env, Some(abandoned));
            if abandoned {
                line.push_str(&paint(DIM, "  [abandoned branch]"));
            }
            writeln!(out, "{line}")?;
            diff::render(out, &change, "        ")?;
        }
        self.pos = seq;
        self.state = after;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_commands_parse() {
        assert_eq!(parse_command("\n"), Ok(StepCommand::Next(1)));
        assert_eq!(parse_command("n 3"), Ok(StepCommand::Next(3)));
        assert_eq!(parse_command("prev"), Ok(StepCommand::Prev(1)));
        assert_eq!(parse_command("g 12"), Ok(StepCommand::Goto(12)));
        assert_eq!(
            parse_command("c cp_004"),
            Ok(StepCommand::Checkpoint("cp_004".into()))
        );
        assert_eq!(parse_command("q"), Ok(StepCommand::Quit));
        assert!(parse_command("g x").is_err());
        assert!(parse_command("n 0").is_err());
        assert!(parse_command("t now").is_err());
        assert!(parse_command("jump").is_err());
    }
}
