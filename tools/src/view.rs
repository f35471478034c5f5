//! How the `chronicle` commands show things to a person, in one place: readable one-line events
//! (`run`, `chat`, `log`, `replay` print the same line for the same event), which seqs lie on an
//! abandoned branch, the state, TODO and plan views, the approval prompt and a run's outcome,
//! styles and table helpers; plus opening a data directory for reading.
//!
//! Views always write styled text; [`styled`] strips the escapes when the stream is not a
//! terminal or `NO_COLOR` is set (anstream decides).

use std::collections::{HashMap, HashSet};
use std::io::{self, Write};

use anstream::AutoStream;
use anstyle::{AnsiColor, Style};
use anyhow::{Context, bail};
use chronicle_engine::store::{Options, RunHead, Store};
use chronicle_projections::RunState;
use chronicle_schemas::{Approval, Envelope, Event, RunId, RunStatus, Timestamp, TodoStatus};
use chronicle_wire::names::ChunkType;
use chronicle_wire::names::wire_names;
use chronicle_wire::{CheckpointEntry, ChunkData, CommandOutcome, EventData, TodosReply};
use serde_json::Value;

pub use chronicle_wire::summary::{TEXT_CHARS_MAX, summary};
/// Width of the dotted-name column (the longest name, `evaluation.recorded`, is 19).
const NAME_COLUMN_CHARS: usize = 19;

pub const DIM: Style = Style::new().dimmed();
pub const BOLD: Style = Style::new().bold();
pub const RED: Style = AnsiColor::Red.on_default();
pub const GREEN: Style = AnsiColor::Green.on_default();
pub const YELLOW: Style = AnsiColor::Yellow.on_default();
pub const CYAN: Style = AnsiColor::Cyan.on_default();

/// Stdout's writer with colours kept or stripped the way `anstream` decides for stdout (a
/// terminal, `NO_COLOR`, `CLICOLOR_FORCE`), so views can always write styled text.
pub fn styled(out: &mut dyn Write) -> Styled<'_> {
    Styled::new(out, AutoStream::choice(&io::stdout()))
}

/// [`styled`] for what goes to stderr (prompts beside a stdout of data).
pub fn styled_err(out: &mut dyn Write) -> Styled<'_> {
    Styled::new(out, AutoStream::choice(&io::stderr()))
}

/// See [`styled`]. (`AutoStream` takes only `'static` writers.)
pub struct Styled<'a> {
    out: &'a mut dyn Write,
    /// `Some` when escapes are removed.
    strip: Option<anstream::adapter::StripBytes>,
}

impl<'a> Styled<'a> {
    fn new(out: &'a mut dyn Write, choice: anstream::ColorChoice) -> Self {
        let strip = match choice {
            anstream::ColorChoice::Never => Some(anstream::adapter::StripBytes::new()),
            _ => None,
        };
        Styled { out, strip }
    }
}

impl std::fmt::Debug for Styled<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Styled")
            .field("strip", &self.strip.is_some())
            .finish_non_exhaustive()
    }
}

impl Write for Styled<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.strip {
            None => self.out.write(buf),
            Some(state) => {
                for printable in state.strip_next(buf) {
                    self.out.write_all(printable)?;
                }
                Ok(buf.len())
            }
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// `text` in `style` (the escapes are stripped later when colour is off).
pub fn paint(style: Style, text: impl std::fmt::Display) -> String {
    format!("{style}{text}{style:#}")
}

/// Opens a data directory for inspection. Like `common::open_store`, but without the open-time
/// tail check: a damaged log (a copy taken from a crashed server) must still be readable up to
/// the damage, and `verify` must be able to name it instead of failing to open. `when_locked`
/// says what to do instead while a server holds the directory.
pub fn open_for_reading(
    data: &crate::common::DataArgs,
    when_locked: &str,
) -> anyhow::Result<Store> {
    let store = crate::common::open_existing(
        data,
        Options {
            open_verify_tail_events: 0,
            ..Options::default()
        },
        when_locked,
    )?;
    // A store that cannot be indexed is still read (`verify` names what is wrong with it).
    if let Err(e) = crate::common::index_store(&store) {
        tracing::warn!(
            error = format!("{e:#}"),
            "the index could not take the log in"
        );
    }
    Ok(store)
}

/// The head of `run`, or the one-line error every command gives for an unknown run.
pub fn require_run(store: &Store, run: RunId) -> anyhow::Result<RunHead> {
    store
        .run_head(run)
        .with_context(|| format!("reading run {run}"))?
        .with_context(|| format!("run {run} not found"))
}

/// Checks that `seq` exists in a run whose last seq is `last_seq`.
pub fn check_seq(run: RunId, last_seq: u64, seq: u64) -> anyhow::Result<()> {
    if seq > last_seq {
        bail!("seq {seq} is beyond the last seq {last_seq} of run {run}");
    }
    Ok(())
}

/// Which seqs of a run lie on an abandoned branch: the projections' rule.
pub use chronicle_projections::Branches;

/// The branches of a stored run: one pass over its events collects the restores (a long run is
/// never held in memory whole).
pub fn branches_of_run(store: &Store, head: &RunHead) -> anyhow::Result<Branches> {
    let mut restores = HashMap::new();
    for env in store.read_run(head.run_id, 0, head.last_seq) {
        let env = env?;
        if let Some(to_seq) = chronicle_projections::restore_of(&env) {
            restores.insert(env.seq, to_seq);
        }
    }
    Ok(Branches::new(head.last_seq, &restores))
}

pub use chronicle_wire::{clock, date_time};

/// One line of free text: newlines folded, cut at `max` characters with `…`.
pub use chronicle_wire::one_line;

/// The readable line of a stored event (see [`line`]).
pub fn event_line(env: &Envelope, abandoned: Option<bool>) -> String {
    line(env.seq, env.at, &env.event, abandoned)
}

/// The readable line of an event as a stream sends it (see [`line`]); an event this build does
/// not know (a newer server) shows its kind.
pub fn data_line(data: &EventData) -> String {
    match data.event() {
        Ok(event) => line(data.seq, data.at, &event, None),
        Err(_) => format!("{:>4}  {}  {}", data.seq, clock(data.at), data.kind),
    }
}

/// The line of a stream's final message whose text was printed as it streamed: the answer is
/// not repeated.
pub fn streamed_final_line(data: &EventData) -> String {
    let line = format!(
        "{:>4}  {}  {:<NAME_COLUMN_CHARS$}  (the answer above)",
        data.seq,
        clock(data.at),
        "message.final"
    );
    paint(GREEN, line)
}

/// The one readable line of an event: `seq  time  dotted.name  summary`. With `abandoned`, a
/// column marks events on an abandoned branch with `~`, dimmed.
pub fn line(seq: u64, at: Timestamp, event: &Event, abandoned: Option<bool>) -> String {
    let (name, _, _) = wire_names(event);
    let summary = one_line(&summary(event), usize::MAX);
    let marker = match abandoned {
        None => "",
        Some(false) => "  ",
        Some(true) => "~ ",
    };
    let line = format!(
        "{marker}{seq:>4}  {}  {name:<NAME_COLUMN_CHARS$}  {summary}",
        clock(at)
    );
    let line = line.trim_end().to_owned();
    match abandoned {
        Some(true) => paint(DIM, line),
        _ => match event {
            Event::RunFailed { .. } | Event::AgentFailed { .. } => paint(RED, line),
            Event::ApprovalRequested { .. } | Event::RunInterrupted { .. } => paint(YELLOW, line),
            Event::RunCompleted { .. } | Event::ResponseGenerated { .. } => paint(GREEN, line),
            Event::RunRestored { .. } => paint(CYAN, line),
            _ => line,
        },
    }
}

/// The answer of a final response (its `answer` field when it has one).
pub use chronicle_wire::answer_text as response_text;
pub fn status_style(s: TodoStatus) -> Style {
    match s {
        TodoStatus::Completed => GREEN,
        TodoStatus::Failed => RED,
        TodoStatus::WaitingApproval => YELLOW,
        TodoStatus::InProgress => CYAN,
        TodoStatus::Skipped | TodoStatus::Blocked => DIM,
        TodoStatus::Pending => Style::new(),
    }
}

pub fn run_status_style(s: RunStatus) -> Style {
    match s {
        RunStatus::Completed => GREEN,
        RunStatus::Failed => RED,
        RunStatus::WaitingForApproval => YELLOW,
        RunStatus::Cancelled => DIM,
        RunStatus::Running => CYAN,
    }
}

/// Renders rows as left-aligned columns separated by two spaces. Cells may carry ANSI styles:
/// widths count only what is printed.
pub fn table(out: &mut dyn Write, header: &[&str], rows: &[Vec<String>]) -> io::Result<()> {
    let visible = |s: &str| anstream::adapter::strip_str(s).to_string().chars().count();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(visible(cell));
            }
        }
    }
    let line = |cells: Vec<String>| {
        let last = cells.len().saturating_sub(1);
        let mut s = String::new();
        for (i, cell) in cells.into_iter().enumerate() {
            s.push_str(&cell);
            if i < last {
                let pad = widths[i].saturating_sub(visible(&cell)) + 2;
                s.push_str(&" ".repeat(pad));
            }
        }
        s.trim_end().to_owned()
    };
    let head = line(header.iter().map(|h| (*h).to_owned()).collect());
    writeln!(out, "{}", paint(BOLD, head))?;
    for row in rows {
        writeln!(out, "{}", line(row.clone()))?;
    }
    Ok(())
}

/// A listing (`chronicle runs`, `sessions`, `checkpoints`): with `json`, one `{"type": kind,
/// "data": row}` line per row; else `no {kind}s` when there is none, or a table of `header`
/// with the `cells` of each row.
pub fn listing<T: serde::Serialize>(
    out: &mut dyn Write,
    json: bool,
    kind: &str,
    rows: &[T],
    header: &[&str],
    cells: impl FnMut(&T) -> Vec<String>,
) -> anyhow::Result<()> {
    if json {
        for row in rows {
            crate::common::json_line(out, kind, serde_json::to_value(row)?)?;
        }
    } else if rows.is_empty() {
        writeln!(out, "no {kind}s")?;
    } else {
        let cells: Vec<Vec<String>> = rows.iter().map(cells).collect();
        table(out, header, &cells)?;
    }
    Ok(())
}

/// The TODO table of a state.
pub fn todo_table(out: &mut dyn Write, state: &RunState) -> io::Result<()> {
    let Some(p) = state.supervisor.planning_state.as_ref() else {
        return writeln!(out, "(no plan yet)");
    };
    if p.todos.is_empty() {
        return writeln!(out, "(no TODOs)");
    }
    let current = p.current_todo_id.as_ref();
    let rows: Vec<Vec<String>> = p
        .todos
        .iter()
        .map(|t| {
            let marker = if Some(&t.id) == current { "*" } else { "" };
            let deps: Vec<&str> = t.dependencies.iter().map(|d| d.as_str()).collect();
            vec![
                format!("{}{marker}", t.id),
                paint(status_style(t.status), t.status),
                t.agent_name.clone(),
                t.priority.as_str().to_owned(),
                format!("{}", t.attempts),
                format!("{}/{}", t.retry_count, t.max_retries),
                if deps.is_empty() {
                    "-".into()
                } else {
                    deps.join(",")
                },
                t.approval_status
                    .map_or("-".into(), |a| a.as_str().to_owned()),
            ]
        })
        .collect();
    table(
        out,
        &[
            "TODO", "STATUS", "AGENT", "PRIORITY", "ATTEMPTS", "RETRIES", "DEPENDS", "APPROVAL",
        ],
        &rows,
    )
}

/// The readable projected state at one seq: phase, statuses, approvals, TODOs, checkpoints, the
/// results so far, the values a person set, and the last reasoning.
pub fn state_view(
    out: &mut dyn Write,
    state: &RunState,
    last_seq: u64,
    at: &Envelope,
    abandoned: bool,
) -> io::Result<()> {
    let sup = &state.supervisor;
    let dash = || "-".to_owned();
    writeln!(
        out,
        "{}",
        paint(
            BOLD,
            format!(
                "run {} at seq {} of {last_seq} ({} UTC)",
                at.run_id,
                at.seq,
                at.at.to_datetime().format("%Y-%m-%d %H:%M:%S%.3f")
            )
        )
    )?;
    if abandoned {
        writeln!(
            out,
            "{}",
            paint(
                YELLOW,
                "this seq lies on an abandoned branch: a later restore left it"
            )
        )?;
    }
    let p = sup.planning_state.as_ref();
    let field = |out: &mut dyn Write, k: &str, v: String| writeln!(out, "{k:<18}{v}");
    field(out, "phase", sup.current_phase.as_str().to_owned())?;
    field(
        out,
        "run status",
        paint(run_status_style(sup.run_status), sup.run_status.as_str()),
    )?;
    field(
        out,
        "status",
        if sup.status.is_empty() {
            dash()
        } else {
            sup.status.clone()
        },
    )?;
    field(
        out,
        "current todo",
        p.and_then(|p| p.current_todo_id.as_ref())
            .map_or_else(dash, |t| t.to_string()),
    )?;
    field(
        out,
        "checkpoint head",
        state
            .checkpoints
            .head
            .as_ref()
            .map_or_else(dash, |c| c.to_string()),
    )?;
    field(
        out,
        "restored from",
        sup.restored_from
            .as_ref()
            .map_or_else(dash, |c| c.to_string()),
    )?;
    if let Some(reason) = &sup.interrupt_reason
        && sup.run_status == RunStatus::WaitingForApproval
    {
        field(out, "interrupted", one_line(reason, TEXT_CHARS_MAX))?;
    }
    write_memory_and_values(out, sup)?;
    let teams: Vec<&str> = sup.team_results.keys().map(String::as_str).collect();
    field(
        out,
        "team results",
        if teams.is_empty() {
            dash()
        } else {
            teams.join(", ")
        },
    )?;
    field(
        out,
        "final response",
        sup.final_response
            .as_ref()
            .map_or_else(dash, |r| one_line(&response_text(r), TEXT_CHARS_MAX)),
    )?;
    field(
        out,
        "last reasoning",
        sup.last_reasoning
            .as_ref()
            .map_or_else(dash, |r| one_line(r, TEXT_CHARS_MAX)),
    )?;
    if !sup.error_log.is_empty() {
        field(
            out,
            "errors",
            one_line(&sup.error_log.join("; "), TEXT_CHARS_MAX),
        )?;
    }
    writeln!(out)?;
    let pending: HashSet<_> = sup.pending_approval_ids.iter().collect();
    let rows: Vec<Vec<String>> = state
        .approvals
        .list
        .iter()
        .filter(|a| pending.contains(&a.approval_id))
        .map(|a| {
            vec![
                a.approval_id.to_string(),
                a.subject
                    .as_ref()
                    .map_or_else(dash, |s| s.todo_id().to_string()),
                a.tool_name.clone(),
                a.policy.clone(),
                a.requested_seq.to_string(),
            ]
        })
        .collect();
    if rows.is_empty() {
        writeln!(out, "pending approvals: none")?;
    } else {
        writeln!(out, "pending approvals:")?;
        table(out, &["APPROVAL", "TODO", "TOOL", "POLICY", "SEQ"], &rows)?;
    }
    writeln!(out)?;
    todo_table(out, state)
}

/// The user's long-term memory as the run loaded it (`memory`) and what it saved
/// (`memory saved`), then the values a person set on the run (`values`), each only when there
/// is any.
fn write_memory_and_values(
    out: &mut dyn Write,
    sup: &chronicle_schemas::SupervisorState,
) -> io::Result<()> {
    let texts = |items: Vec<String>| one_line(&items.join("; "), TEXT_CHARS_MAX);
    if let Some(loaded) = sup.loaded_memories.as_ref().filter(|l| !l.is_empty()) {
        let items = loaded
            .iter()
            .map(|m| m["text"].as_str().unwrap_or_default().to_owned())
            .collect();
        writeln!(out, "{:<18}{}", "memory", texts(items))?;
    }
    if !sup.saved_memories.is_empty() {
        let items = sup.saved_memories.iter().map(|m| m.text.clone()).collect();
        writeln!(out, "{:<18}{}", "memory saved", texts(items))?;
    }
    if !sup.values.is_empty() {
        let values = Value::Object(sup.values.clone()).to_string();
        writeln!(out, "{:<18}{}", "values", one_line(&values, TEXT_CHARS_MAX))?;
    }
    Ok(())
}

/// The plan as a TODO list: `todo_001  search_team 실행  [pending]  (after todo_000)`.
pub fn write_plan(out: &mut dyn Write, s: &RunState) -> io::Result<()> {
    let Some(p) = s
        .supervisor
        .planning_state
        .as_ref()
        .filter(|p| !p.todos.is_empty())
    else {
        return writeln!(out, "(no plan)");
    };
    let strategy = if p.execution_strategy.is_empty() {
        String::new()
    } else {
        format!(", {}", p.execution_strategy)
    };
    writeln!(
        out,
        "{}",
        paint(BOLD, format!("📝 TODO {}개{strategy}", p.todos.len()))
    )?;
    for t in &p.todos {
        let deps = if t.dependencies.is_empty() {
            String::new()
        } else {
            let d: Vec<&str> = t.dependencies.iter().map(|d| d.as_str()).collect();
            format!("  (after {})", d.join(", "))
        };
        writeln!(out, "  {}  {}  [{}]{deps}", t.id, t.name, t.status.as_str())?;
    }
    Ok(())
}

/// What happened to the TODOs between two states of a run: `todo_001  search_team 실행
/// [waiting_approval → completed]`, one line per TODO that is new or changed status.
pub fn write_changes(out: &mut dyn Write, before: &RunState, after: &RunState) -> io::Result<()> {
    let todos = |s: &RunState| {
        s.supervisor
            .planning_state
            .as_ref()
            .map(|p| p.todos.clone())
            .unwrap_or_default()
    };
    let old = todos(before);
    for t in todos(after) {
        let was = old.iter().find(|o| o.id == t.id).map(|o| o.status);
        if was == Some(t.status) {
            continue;
        }
        let change = match was {
            Some(w) => format!("{} → {}", w.as_str(), t.status.as_str()),
            None => format!("new, {}", t.status.as_str()),
        };
        writeln!(out, "  {}  {}  [{change}]", t.id, t.name)?;
    }
    Ok(())
}

/// The approval message the engine wrote for a human, framed with the approval id.
pub fn write_approval(out: &mut dyn Write, a: &Approval) -> io::Result<()> {
    writeln!(
        out,
        "{}",
        paint(YELLOW, format!("[INTERRUPT] approval {}", a.approval_id))
    )?;
    writeln!(out, "{}", a.message)
}

/// How to answer an approval in the chat, under its message: the message says what will run and
/// with what, and leaves the commands to the surface that asks.
pub fn write_approval_commands(out: &mut dyn Write, a: &Approval) -> io::Result<()> {
    let skip = match a.subject.as_ref() {
        Some(chronicle_schemas::Subject::Todo { todo_id }) => format!(" · /todo skip {todo_id}"),
        _ => String::new(),
    };
    let line = format!("  /todo approve · /todo reject [reason]{skip} · /todos");
    writeln!(out, "{}", paint(DIM, line))
}

/// A command's reply for a person: a table for `/todos` and `/checkpoint list`, the help, one
/// line for the rest (a refusal as one `error:` line that points at `/help`). When the command
/// was read from plain words, the command it was taken for (`interpreted_as`) comes first.
pub fn write_command(
    out: &mut dyn Write,
    outcome: &CommandOutcome,
    interpreted_as: Option<&str>,
) -> io::Result<()> {
    if let Some(command) = interpreted_as {
        writeln!(out, "{}", paint(DIM, format!("interpreted as {command}")))?;
    }
    match outcome {
        CommandOutcome::Todos(r) => write_todos(out, r),
        CommandOutcome::CheckpointList { checkpoints } => write_checkpoints(out, checkpoints),
        CommandOutcome::Help { help } => writeln!(out, "{help}"),
        CommandOutcome::Refused { error, .. } => write_error(
            out,
            &format!(
                "{} (type /help for the commands)",
                one_line(error, usize::MAX)
            ),
        ),
        CommandOutcome::ApprovedAll(all) => {
            for a in &all.approved {
                write_approved(out, a)?;
            }
            Ok(())
        }
        CommandOutcome::Approved(a) => write_approved(out, a),
        CommandOutcome::Rejected(r) => {
            let line = format!("{} rejected ({})", r.todo_id, r.approval_id);
            writeln!(out, "{}", paint(YELLOW, line))
        }
        CommandOutcome::Skipped(s) => writeln!(out, "{} skipped", s.todo_id),
        CommandOutcome::Added(a) => {
            let t = &a.todo;
            let deps: Vec<&str> = t.dependencies.iter().map(|d| d.as_str()).collect();
            let after = match deps.is_empty() {
                true => String::new(),
                false => format!(" after {}", deps.join(", ")),
            };
            writeln!(out, "added {} {}{after}", t.id, t.agent_name)
        }
        CommandOutcome::Updated(u) => {
            let status = paint(status_style(u.new_status), u.new_status);
            writeln!(out, "{} is now {status}", u.todo_id)
        }
        CommandOutcome::Restored(r) => writeln!(
            out,
            "restored to {} (seq {}); {} of {} TODOs completed",
            r.checkpoint_id, r.to_seq, r.summary.completed, r.summary.total
        ),
    }
}

fn write_approved(out: &mut dyn Write, a: &chronicle_wire::Approved) -> io::Result<()> {
    let what = a
        .todo_id
        .as_ref()
        .map_or_else(|| a.approval_id.to_string(), |t| t.to_string());
    writeln!(
        out,
        "{}",
        paint(GREEN, format!("{what} approved ({})", a.approval_id))
    )
}

/// One line of error, never JSON: `error: <message>`.
pub fn write_error(out: &mut dyn Write, message: &str) -> io::Result<()> {
    writeln!(
        out,
        "{} {}",
        paint(RED, "error:"),
        one_line(message, usize::MAX)
    )
}

/// `/todos`: id, status (coloured), agent, title; then what the run waits for.
fn write_todos(out: &mut dyn Write, r: &TodosReply) -> io::Result<()> {
    if r.todos.is_empty() {
        return writeln!(out, "(no TODOs)");
    }
    let current = r.current_todo_id.as_ref();
    let rows: Vec<Vec<String>> = r
        .todos
        .iter()
        .map(|t| {
            let marker = if Some(&t.id) == current { "*" } else { "" };
            vec![
                format!("{}{marker}", t.id),
                paint(status_style(t.status), t.status),
                t.agent_name.clone(),
                one_line(&t.name, TEXT_CHARS_MAX),
            ]
        })
        .collect();
    table(out, &["TODO", "STATUS", "AGENT", "TITLE"], &rows)?;
    let s = &r.summary;
    writeln!(
        out,
        "{} of {} completed{}",
        s.completed,
        s.total,
        match r.pending_approval_ids.len() {
            0 => String::new(),
            _ => format!(
                "; waiting for approval {}",
                r.pending_approval_ids
                    .iter()
                    .map(|a| a.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    )
}

/// `/checkpoint list`: id, node, TODOs completed, time; checkpoints a restore left are marked.
fn write_checkpoints(out: &mut dyn Write, list: &[CheckpointEntry]) -> io::Result<()> {
    if list.is_empty() {
        return writeln!(out, "(no checkpoints)");
    }
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|c| {
            let id = match c.abandoned {
                true => paint(DIM, format!("~{}", c.checkpoint_id)),
                false => c.checkpoint_id.to_string(),
            };
            vec![
                id,
                c.node.clone(),
                c.todos_completed.to_string(),
                date_time(c.timestamp),
            ]
        })
        .collect();
    table(
        out,
        &["CHECKPOINT", "NODE", "TODOS DONE", "TIME (UTC)"],
        &rows,
    )
}

/// Bytes of the supervisor's streamed answer a [`ChunkPrinter`] remembers to tell whether the
/// final answer was printed already (an answer is at most one event, 64 KiB).
const STREAMED_ANSWER_BYTES_MAX: usize = 256 * 1024;

/// Prints the live chunks of a run's model answers as they arrive, between the event lines: the
/// text as it comes (an agent's under its name, reasoning dimmed), the line ended before the next
/// event line. It remembers the supervisor's own answer as streamed, so the final answer is not
/// printed a second time.
#[derive(Debug, Default)]
pub struct ChunkPrinter {
    /// The open line: what its chunks are and whose.
    open: Option<(ChunkType, Option<String>)>,
    /// The supervisor's message as streamed.
    answer: String,
}

impl ChunkPrinter {
    /// Prints one chunk (`reasoning: false` leaves reasoning chunks out).
    pub fn chunk(&mut self, out: &mut dyn Write, c: &ChunkData, reasoning: bool) -> io::Result<()> {
        if c.kind_type == ChunkType::Reasoning && !reasoning {
            return Ok(());
        }
        let source = (c.kind_type, c.content.agent.clone());
        if self.open.as_ref() != Some(&source) {
            self.end_line(out)?;
            if let Some(agent) = &c.content.agent {
                write!(out, "{}", paint(DIM, format!("{agent}: ")))?;
            }
            self.open = Some(source);
        }
        match c.kind_type {
            ChunkType::Reasoning => write!(out, "{}", paint(DIM, &c.content.text))?,
            ChunkType::Message => write!(out, "{}", c.content.text)?,
        }
        if c.kind_type == ChunkType::Message
            && c.content.todo_id.is_none()
            && self.answer.len() + c.content.text.len() <= STREAMED_ANSWER_BYTES_MAX
        {
            self.answer.push_str(&c.content.text);
        }
        out.flush()
    }

    /// Ends the open line of chunks, if any (before anything else is printed).
    pub fn end_line(&mut self, out: &mut dyn Write) -> io::Result<()> {
        if self.open.take().is_some() {
            writeln!(out)?;
        }
        Ok(())
    }

    /// `answer` is what was streamed (so printing it again would repeat it).
    pub fn streamed(&self, answer: &str) -> bool {
        !self.answer.trim().is_empty() && self.answer.trim() == answer.trim()
    }
}

/// The final response's `answer`, if the run produced one.
pub fn answer(s: &RunState) -> Option<String> {
    s.supervisor.final_response.as_ref().map(response_text)
}

/// Why a run did not complete, for the message on stderr.
pub fn failure(s: &RunState) -> String {
    match s.supervisor.run_status {
        RunStatus::Cancelled => "the run was cancelled".to_owned(),
        _ => s
            .supervisor
            .error_log
            .last()
            .cloned()
            .unwrap_or_else(|| format!("the run is {}", s.supervisor.run_status.as_str())),
    }
}

/// The end of a run: the answer (unless `chunks` printed it as it streamed), or why there is
/// none.
pub fn write_outcome(out: &mut dyn Write, s: &RunState, chunks: &ChunkPrinter) -> io::Result<()> {
    match s.supervisor.run_status {
        RunStatus::Completed => {
            writeln!(out, "{}", paint(GREEN, "✅ completed"))?;
            match answer(s) {
                Some(a) if chunks.streamed(&a) => Ok(()),
                a => writeln!(out, "{}", a.unwrap_or_else(|| "(no answer)".into())),
            }
        }
        status => writeln!(
            out,
            "{}",
            paint(RED, format!("❌ {}: {}", status.as_str(), failure(s)))
        ),
    }
}

#[cfg(test)]
mod tests {
    use chronicle_schemas::{Hash, TodoId};
    use chronicle_wire::names::event_data;

    use super::*;

    fn envelope(seq: u64, event: Event) -> Envelope {
        Envelope {
            offset: seq,
            run_id: RunId::from_u128(1),
            seq,
            at: Timestamp(1_759_658_400_123_000),
            prev_hash: Hash::ZERO,
            hash: Hash::ZERO,
            event,
        }
    }

    #[test]
    fn a_stored_and_a_streamed_event_read_alike() {
        let env = envelope(
            7,
            Event::TodoStatusChanged {
                todo_id: TodoId::from("todo_001"),
                from: TodoStatus::Pending,
                to: TodoStatus::WaitingApproval,
                reason: Some("HITL policy every_todo".into()),
                attempt: 0,
                by: Default::default(),
            },
        );
        let plain = |s: String| anstream::adapter::strip_str(&s).to_string();
        let line = plain(event_line(&env, None));
        assert_eq!(
            line,
            "   7  10:00:00.123  todo.updated         todo_001 pending → waiting_approval (HITL policy every_todo)"
        );
        assert_eq!(plain(data_line(&event_data(&env))), line);
        assert!(plain(event_line(&env, Some(true))).starts_with("~    7  "));
        let mut unknown = event_data(&env);
        unknown.kind = "FromTheFuture".into();
        assert_eq!(data_line(&unknown), "   7  10:00:00.123  FromTheFuture");
    }

    fn plain(f: impl FnOnce(&mut Vec<u8>) -> io::Result<()>) -> String {
        let mut buf = Vec::new();
        f(&mut buf).unwrap();
        anstream::adapter::strip_str(&String::from_utf8(buf).unwrap()).to_string()
    }

    #[test]
    fn command_replies_read_as_a_line_or_a_table() {
        let todo = chronicle_schemas::SupervisorTodo {
            id: TodoId::from("todo_002"),
            name: "analysis_team 추가 실행".into(),
            agent_name: "analysis_team".into(),
            ..Default::default()
        };
        let added = CommandOutcome::Added(Box::new(chronicle_wire::Added {
            status: chronicle_wire::tag::Added::Added,
            todo: todo.clone(),
            message: "새 TODO todo_002가 추가되었습니다.".into(),
        }));
        let said = Some("/todo add analysis_team");
        assert_eq!(
            plain(|o| write_command(o, &added, said)),
            "interpreted as /todo add analysis_team\nadded todo_002 analysis_team\n"
        );
        assert_eq!(
            plain(|o| write_command(o, &added, None)),
            "added todo_002 analysis_team\n"
        );
        let refused = CommandOutcome::Refused {
            error: "Unknown command\n(try again)".into(),
            help: "h".into(),
        };
        assert_eq!(
            plain(|o| write_command(o, &refused, None)),
            "error: Unknown command (try again) (type /help for the commands)\n"
        );
        let todos = CommandOutcome::Todos(TodosReply {
            todos: vec![todo],
            summary: chronicle_wire::TodoSummary {
                total: 1,
                ..Default::default()
            },
            current_todo_id: None,
            checkpoint_id: None,
            pending_approval_ids: vec![],
            sub_runs: vec![],
        });
        let table = plain(|o| write_command(o, &todos, None));
        let lines: Vec<Vec<&str>> = table
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(lines[0], ["TODO", "STATUS", "AGENT", "TITLE"]);
        assert_eq!(
            lines[1],
            [
                "todo_002",
                "pending",
                "analysis_team",
                "analysis_team",
                "추가",
                "실행"
            ]
        );
        assert_eq!(lines[2], ["0", "of", "1", "completed"]);
    }

    #[test]
    fn a_value_update_shows_its_values_who_and_as_which_node() {
        let env = envelope(
            41,
            Event::ValuesUpdated {
                values: serde_json::json!({"note": "call\nback", "budget": 5})
                    .as_object()
                    .cloned()
                    .unwrap(),
                as_node: Some("approval".into()),
                by: chronicle_schemas::Actor::user("alice"),
            },
        );
        let line = anstream::adapter::strip_str(&event_line(&env, None)).to_string();
        assert!(
            line.ends_with(
                r#"values.updated       {"budget":5,"note":"call\nback"} by user:alice as approval"#
            ),
            "{line}"
        );
    }

    #[test]
    fn the_state_shows_values_a_person_set_only_when_there_are_any() {
        let env = envelope(
            3,
            Event::Reasoning {
                message: "m".into(),
            },
        );
        let mut state = RunState::default();
        let shown = |state: &RunState| plain(|out| state_view(out, state, 3, &env, false));
        assert!(!shown(&state).contains("values"));
        state.supervisor.values = serde_json::json!({"note": "call back"})
            .as_object()
            .cloned()
            .unwrap();
        let text = shown(&state);
        assert!(
            text.lines()
                .any(|l| l == r#"values            {"note":"call back"}"#),
            "{text}"
        );
    }

    #[test]
    fn answers_are_one_line_of_text() {
        let env = envelope(
            30,
            Event::ResponseGenerated {
                final_response: serde_json::json!({"answer": "강남구 시세는\n13억"}),
            },
        );
        let line = anstream::adapter::strip_str(&event_line(&env, None)).to_string();
        assert!(
            line.ends_with("message.final        강남구 시세는 13억"),
            "{line}"
        );
        assert_eq!(one_line("abcdef", 4), "abc…");
    }

    #[test]
    fn an_agents_model_turn_shows_its_position_and_what_it_asked_for() {
        let turn = |response: serde_json::Value, notice: Option<&str>| {
            let env = envelope(
                12,
                Event::LlmCalled {
                    purpose: "agent:analyst".into(),
                    model: "m".into(),
                    prompt_hash: Hash::ZERO,
                    response: chronicle_schemas::Payload::Inline(response),
                    duration_ms: 5,
                    error: None,
                    turn: Some(chronicle_schemas::ModelTurn {
                        todo_id: TodoId::from("todo_001"),
                        attempt: 1,
                        index: 3,
                        plan_edits_seen: 0,
                    }),
                    usage: None,
                    notice: notice.map(str::to_owned),
                    loaded: Vec::new(),
                },
            );
            anstream::adapter::strip_str(&event_line(&env, None)).to_string()
        };
        let calls = serde_json::json!({"content": null, "tool_calls": [
            {"id": "c1", "name": "write_file", "arguments": "{}"},
            {"id": "c2", "name": "read_file", "arguments": "{}"},
        ]});
        let line = turn(calls, None);
        assert!(
            line.ends_with(
                "agent:analyst todo_001#3 (attempt 1) via m in 5 ms → calls write_file, read_file"
            ),
            "{line}"
        );
        let line = turn(
            serde_json::json!({"content": "All done."}),
            Some("a person skipped todo_004"),
        );
        assert!(
            line.ends_with("via m in 5 ms (told of a person's changes) → answer: All done."),
            "{line}"
        );
    }
}
