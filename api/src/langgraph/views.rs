//! LangGraph's views of Chronicle state, as pure functions over folded [`RunState`]s: a thread
//! is a session, a LangGraph run is one turn (one Chronicle run), a checkpoint is a Chronicle
//! checkpoint, an interrupt is a pending approval. The routes read the states from the store and
//! call these; nothing here touches the store, so every rule is unit-tested on fixture folds.
//!
//! Every id shown to a LangGraph client is derived (uuid5) from Chronicle ids, so the same
//! object has the same id in every process and on every history reload (agent-chat-ui keys its
//! message list by id and would duplicate messages whose ids changed).

use chronicle_projections::RunState;
use std::collections::HashSet;

use chronicle_schemas::{
    Approval, ApprovalId, Checkpoint, CheckpointId, Decision, Follows, HitlMode, RunId, RunStatus,
    TodoStatus,
};
use chronicle_wire::answer_text;
use chronicle_wire::langgraph::{
    Checkpoint as LgCheckpoint, CheckpointMetadata, Interrupt, Message, Task, ThreadState,
    ThreadStatus, ToolCall,
};
use serde_json::{Map, Value, json};
use uuid::Uuid;

/// The namespace of every id derived here (checkpoints, messages, interrupts, tasks). Fixed
/// forever: changing it changes every id clients have stored.
pub const ID_NAMESPACE: Uuid = Uuid::from_u128(0x3c1e_7d2a_9b4f_5e60_8a17_c0de_1d5e_a5e1);

/// The graph id of the supervisor workflow's assistant.
pub const SUPERVISOR_GRAPH: &str = "supervisor";

/// LangGraph's namespace for assistant ids (one past the standard URL namespace `6ba7b811-…`,
/// so not the same: the graph `agent` gets LangGraph's well-known `fe096781-…`).
pub const GRAPH_NAMESPACE: Uuid = Uuid::from_u128(0x6ba7_b821_9dad_11d1_80b4_00c0_4fd4_30c8);

/// An assistant's id: uuid5 of [`GRAPH_NAMESPACE`] and its graph id, as LangGraph derives it, so
/// a client that computed the id itself finds the assistant.
pub fn assistant_id(graph_id: &str) -> Uuid {
    Uuid::new_v5(&GRAPH_NAMESPACE, graph_id.as_bytes())
}

/// A checkpoint's LangGraph id: uuid5 of [`ID_NAMESPACE`] and `"<run_id>/<checkpoint_id>"`
/// (Chronicle's checkpoint ids are only unique within a run).
pub fn checkpoint_uuid(run_id: RunId, checkpoint_id: &chronicle_schemas::CheckpointId) -> Uuid {
    derived(run_id, checkpoint_id.as_str())
}

/// An interrupt's id: 32 lowercase hex digits derived from the approval id (which is unique
/// within its run; the run is part of it too).
pub fn interrupt_id(run_id: RunId, approval_id: &ApprovalId) -> String {
    derived(run_id, &format!("interrupt/{approval_id}"))
        .simple()
        .to_string()
}

fn derived(run_id: RunId, what: &str) -> Uuid {
    Uuid::new_v5(&ID_NAMESPACE, format!("{}/{what}", run_id.0).as_bytes())
}

/// The id of a turn's answer message (its live chunks carry it too), made on the run's
/// `branch` (the restores before it): an answer made again after a restore is another message,
/// which a client shows beside the one it replaced.
pub fn answer_message_id(run_id: RunId, branch: u32) -> String {
    match branch {
        0 => derived_str(run_id, "answer"),
        n => derived_str(run_id, &format!("answer/{n}")),
    }
}

fn derived_str(run_id: RunId, what: &str) -> String {
    derived(run_id, what).to_string()
}

/// The run id of a folded state (a state folded from at least one event has one).
fn run_of(state: &RunState) -> RunId {
    state.run_id.unwrap_or(RunId(Uuid::nil()))
}

/// The ids clients gave their turns' human messages, by run (agent-chat-ui finds the message it
/// showed before the server answered by its id); a turn without one gets a derived id.
pub type GivenIds = std::collections::BTreeMap<RunId, String>;

/// The LangChain messages of a thread, oldest first, from its turns' states (oldest first):
/// per turn the query as a `human` message; each TODO that started as an `ai` message calling
/// its agent as a tool (args: the input it ran with), followed by a `tool` message with the
/// result once it finished; and the final answer as an `ai` message.
pub fn messages(turns: &[&RunState], given: &GivenIds) -> Vec<Message> {
    turns.iter().flat_map(|s| turn_messages(s, given)).collect()
}

fn turn_messages(state: &RunState, given: &GivenIds) -> Vec<Message> {
    let run = run_of(state);
    let s = &state.supervisor;
    let human = given
        .get(&run)
        .cloned()
        .unwrap_or_else(|| derived_str(run, "human"));
    let mut out = vec![Message::new("human", human, Value::String(s.query.clone()))];
    if let Some(plan) = &s.planning_state {
        let mut started: Vec<_> = plan
            .execution_steps
            .iter()
            .filter_map(|st| Some((st.started_at?, st)))
            .collect();
        started.sort_by_key(|(at, _)| *at);
        for (_, step) in started {
            let todo = plan.todo(&step.todo_id);
            // What the agent ran with: what people chose for the steps before it included.
            let started = s.agent_starts.iter().find(|a| a.todo_id == step.todo_id);
            let args = match (started, todo) {
                (Some(a), _) if !a.input.is_null() => a.input.clone(),
                (_, Some(t)) => t.input(),
                _ => json!({}),
            };
            let status = todo.map(|t| t.status);
            out.extend(tool_exchange(run, step, args, status));
        }
    }
    if let Some(answer) = &s.final_response {
        out.push(Message::new(
            "ai",
            answer_message_id(run, state.checkpoints.branch),
            Value::String(answer_text(answer)),
        ));
    }
    out
}

/// The `ai` tool call of one started TODO and, once it finished, its `tool` result.
fn tool_exchange(
    run: RunId,
    step: &chronicle_schemas::ExecutionStepState,
    args: Value,
    status: Option<TodoStatus>,
) -> Vec<Message> {
    let todo = step.todo_id.as_str();
    let call_id = format!("call_{}", derived(run, &format!("call/{todo}")).simple());
    let mut call = Message::new("ai", derived_str(run, &format!("ai/{todo}")), json!(""));
    call.tool_calls = Some(vec![ToolCall {
        name: step.agent_name.clone(),
        args,
        id: call_id.clone(),
        kind: "tool_call".into(),
    }]);
    let outcome = match (status, &step.result, &step.error) {
        (Some(TodoStatus::Completed), Some(r), _) => Some(("success", result_text(r))),
        (Some(TodoStatus::Failed), _, err) => Some(("error", err.clone().unwrap_or_default())),
        _ => None,
    };
    let mut out = vec![call];
    if let Some((status, content)) = outcome {
        let mut result = Message::new(
            "tool",
            derived_str(run, &format!("tool/{todo}")),
            Value::String(content),
        );
        result.name = Some(step.agent_name.clone());
        result.tool_call_id = Some(call_id);
        result.status = Some(status.into());
        out.push(result);
    }
    out
}

/// An agent result as text: its `summary`, else its `answer`, else its compact JSON.
fn result_text(result: &Value) -> String {
    ["summary", "answer"]
        .iter()
        .find_map(|k| result.get(k).and_then(Value::as_str))
        .map_or_else(|| result.to_string(), str::to_owned)
}

/// A thread's `values`: the supervisor state as the API serializes it, plus `messages`, plus
/// `__interrupt__` while approvals are pending (as LangGraph's final `values` event carries it).
pub fn values(state: &RunState, messages: &[Message]) -> Value {
    let mut v = match serde_json::to_value(&state.supervisor) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    };
    // Values a person set are shown beside the workflow's own (their keys never collide).
    if let Some(Value::Object(set)) = v.remove("values") {
        v.extend(set);
    }
    v.insert("messages".into(), json!(messages));
    let pending = interrupts(state);
    if !pending.is_empty() {
        v.insert("__interrupt__".into(), json!(pending));
    }
    Value::Object(v)
}

/// One interrupt per pending approval, its value in agent-chat-ui's actionable schema (one
/// action request: the tool or agent, the args it would run with, the approval's message).
pub fn interrupts(state: &RunState) -> Vec<Interrupt> {
    let run = run_of(state);
    state
        .approvals
        .pending()
        .map(|a| Interrupt {
            id: interrupt_id(run, &a.approval_id),
            value: json!({
                "action_requests": [{
                    "name": a.tool_name,
                    "args": a.request_args,
                    "description": a.message,
                }],
                "review_configs": [{
                    "action_name": a.tool_name,
                    "allowed_decisions": ["approve", "edit", "reject"],
                }],
            }),
        })
        .collect()
}

/// A thread's status from its latest turn: `error` when it failed, `idle` when it ended
/// otherwise (or there is no turn yet), `interrupted` while it needs nothing but a human, else
/// `busy`.
pub fn thread_status(latest: Option<&RunState>) -> ThreadStatus {
    let Some(s) = latest else {
        return ThreadStatus::Idle;
    };
    match s.supervisor.run_status {
        RunStatus::Failed => ThreadStatus::Error,
        RunStatus::Completed | RunStatus::Cancelled => ThreadStatus::Idle,
        _ if chronicle_engine::is_settled(s) => ThreadStatus::Interrupted,
        _ => ThreadStatus::Busy,
    }
}

/// Which thread, and which assistant its runs belong to (for checkpoint metadata).
#[derive(Clone, Copy, Debug)]
pub struct ThreadRef<'a> {
    pub thread_id: &'a str,
    pub assistant_id: &'a str,
    pub given: &'a GivenIds,
}

/// A thread's turns as LangGraph shows them: a tree. Each turn follows an earlier one (the one
/// before it, or the one it was branched from: its run's `follows`), and of each turn's
/// checkpoints a client is shown those that matter to it:
///
/// - its first, as LangGraph's `input` checkpoint: the thread as the turn found it, its
///   question not yet in `messages` (so a client that edits the question runs from there);
/// - the end of each of its branches (its head, and where a restore left an older branch);
/// - each checkpoint it was restored to (where its branches part);
/// - each checkpoint a person's value update made.
///
/// So a finished turn is two checkpoints, and the few a client's history window holds reach
/// back over several turns. The steps between are Chronicle's own checkpoints: still found by
/// id, and listed in full by Chronicle's checkpoint routes.
#[derive(Clone, Debug)]
pub struct Turns<'a> {
    states: Vec<&'a RunState>,
    parents: Vec<Option<usize>>,
    shown: Vec<HashSet<&'a CheckpointId>>,
}

impl<'a> Turns<'a> {
    /// The turns of a thread, oldest first; the first `copied` were copied from another thread
    /// (each follows the one before it).
    pub fn new(states: Vec<&'a RunState>, copied: usize) -> Self {
        let mut parents = Vec::with_capacity(states.len());
        for (i, s) in states.iter().enumerate() {
            let previous = i.checked_sub(1);
            let parent = match s.supervisor.config.follows {
                _ if i < copied => previous,
                Follows::Previous => previous,
                Follows::Turn(run) => states[..i].iter().rposition(|t| t.run_id == Some(run)),
                Follows::Start => None,
            };
            parents.push(parent);
        }
        let shown = states.iter().map(|s| shown(&s.checkpoints)).collect();
        Turns {
            states,
            parents,
            shown,
        }
    }

    pub fn states(&self) -> &[&'a RunState] {
        &self.states
    }

    /// The turn `turn` follows, if any.
    pub fn parent_turn(&self, turn: usize) -> Option<usize> {
        self.parents[turn]
    }

    /// The turns `turn` follows, oldest first, and `turn` itself: its branch of the
    /// conversation.
    pub fn chain(&self, turn: usize) -> Vec<usize> {
        let mut chain = vec![turn];
        let mut cur = turn;
        while let Some(up) = self.parents[cur] {
            chain.push(up);
            cur = up;
        }
        chain.reverse();
        chain
    }

    /// Is `p` one of the checkpoints a client is shown?
    pub fn is_shown(&self, p: Point<'_>) -> bool {
        self.shown[p.turn].contains(&p.checkpoint.checkpoint_id)
    }
}

/// The checkpoints of one turn a client is shown (see [`Turns`]).
fn shown(list: &chronicle_projections::CheckpointList) -> HashSet<&CheckpointId> {
    let mut shown = HashSet::new();
    let mut parents = HashSet::new();
    for c in &list.checkpoints {
        match c.parent.as_ref().and_then(|id| list.get(id)) {
            None => {
                shown.insert(&c.checkpoint_id);
            }
            Some(parent) => {
                parents.insert(&parent.checkpoint_id);
                if parent.branch != c.branch {
                    shown.insert(&parent.checkpoint_id);
                }
            }
        }
        if c.update {
            shown.insert(&c.checkpoint_id);
        }
    }
    for c in &list.checkpoints {
        if !parents.contains(&c.checkpoint_id) {
            shown.insert(&c.checkpoint_id);
        }
    }
    if let Some(head) = &list.head {
        shown.insert(head);
    }
    shown
}

/// A checkpoint of a thread: the turn it belongs to (index into the turns, oldest first) and
/// the checkpoint.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point<'a> {
    pub turn: usize,
    pub checkpoint: &'a Checkpoint,
}

impl Point<'_> {
    fn run(&self, turns: &Turns<'_>) -> RunId {
        run_of(turns.states[self.turn])
    }

    /// The checkpoint's LangGraph id.
    pub fn uuid(&self, turns: &Turns<'_>) -> Uuid {
        checkpoint_uuid(self.run(turns), &self.checkpoint.checkpoint_id)
    }

    /// Is it its turn's first checkpoint, shown as the turn's `input`?
    pub fn is_input(&self) -> bool {
        self.checkpoint.parent.is_none()
    }

    fn wire(&self, turns: &Turns<'_>, thread_id: &str) -> LgCheckpoint {
        LgCheckpoint {
            checkpoint_id: self.uuid(turns).to_string(),
            thread_id: thread_id.to_owned(),
            checkpoint_ns: String::new(),
        }
    }
}

/// The shown checkpoint before `p` on its branch; a turn's input follows the head of the turn
/// it follows.
pub fn parent<'a>(turns: &Turns<'a>, p: Point<'a>) -> Option<Point<'a>> {
    let list = &turns.states[p.turn].checkpoints;
    let mut cur = p.checkpoint;
    while let Some(id) = &cur.parent {
        cur = list.get(id)?;
        let up = Point {
            turn: p.turn,
            checkpoint: cur,
        };
        if turns.is_shown(up) {
            return Some(up);
        }
    }
    turn_head(turns, turns.parents[p.turn]?)
}

/// `update` for one made by a state update, `input` for a turn's first checkpoint, `fork` for
/// the first shown after a restore (its parent lies on an earlier branch), else `loop`.
pub fn source(turns: &Turns<'_>, p: Point<'_>) -> &'static str {
    if p.checkpoint.update {
        return "update";
    }
    if p.is_input() {
        return "input";
    }
    match parent(turns, p) {
        Some(up) if up.turn == p.turn && up.checkpoint.branch != p.checkpoint.branch => "fork",
        _ => "loop",
    }
}

/// LangGraph's step: the number of shown checkpoints before this one on its branch, minus one
/// (the thread's first checkpoint, its input, is step -1).
fn step(turns: &Turns<'_>, p: Point<'_>) -> i64 {
    let mut n = -1;
    let mut cur = p;
    while let Some(up) = parent(turns, cur) {
        n += 1;
        cur = up;
    }
    n
}

/// The node that runs after the node that saved a checkpoint, given the state at it: nothing
/// once the run ended, `approval` while approvals are pending, then by the node's place in the
/// supervisor graph (TODOs left to run → `approval` when approvals are on, else
/// `execute_todo`).
pub fn next_nodes(node: &str, at: &RunState) -> Vec<String> {
    let s = &at.supervisor;
    if s.run_status.is_terminal() {
        return Vec::new();
    }
    if s.run_status == RunStatus::WaitingForApproval || at.approvals.pending().next().is_some() {
        return vec!["approval".into()];
    }
    let todos_left = s
        .planning_state
        .as_ref()
        .is_some_and(|p| p.todos.iter().any(|t| !t.status.is_final()));
    let run_todo = if s.config.hitl == HitlMode::None {
        "execute_todo"
    } else {
        "approval"
    };
    let next = match node {
        "initialize" => "analyze_intent",
        "analyze_intent" => "build_plan",
        "approval" => "execute_todo",
        "build_plan" | "execute_todo" | "evaluate" if todos_left => run_todo,
        "build_plan" | "execute_todo" => "evaluate",
        "evaluate" => "aggregate",
        "aggregate" => "generate_response",
        _ => return Vec::new(),
    };
    vec![next.to_owned()]
}

fn task(run: RunId, p: Point<'_>, name: &str, interrupts: &[Interrupt]) -> Task {
    Task {
        id: derived_str(run, &format!("task/{}/{name}", p.checkpoint.checkpoint_id)),
        name: name.to_owned(),
        path: vec![json!("__pregel_pull"), json!(name)],
        error: None,
        interrupts: interrupts.to_vec(),
        checkpoint: None,
        state: None,
        result: None,
    }
}

fn metadata(thread: ThreadRef<'_>, turns: &Turns<'_>, p: Point<'_>) -> CheckpointMetadata {
    CheckpointMetadata {
        source: source(turns, p).to_owned(),
        step: step(turns, p),
        parents: Map::new(),
        run_id: p.run(turns).0.to_string(),
        graph_id: SUPERVISOR_GRAPH.to_owned(),
        assistant_id: thread.assistant_id.to_owned(),
        thread_id: thread.thread_id.to_owned(),
    }
}

/// The thread's state at checkpoint `p`, which is not a turn's input ([`input_state`] is
/// that). `at` is the state of `p`'s run folded up to `p` (the latest state for a turn's head).
/// Its messages are those of the turns `p`'s turn follows, then `at`'s own.
pub fn thread_state_at(
    thread: ThreadRef<'_>,
    turns: &Turns<'_>,
    p: Point<'_>,
    at: &RunState,
) -> ThreadState {
    let run = p.run(turns);
    let mut history: Vec<&RunState> = turns
        .chain(p.turn)
        .into_iter()
        .filter(|&t| t != p.turn)
        .map(|t| turns.states[t])
        .collect();
    history.push(at);
    let pending = interrupts(at);
    let next = next_nodes(&p.checkpoint.node, at);
    let tasks = next
        .iter()
        .map(|name| task(run, p, name, &pending))
        .collect();
    ThreadState {
        values: values(at, &messages(&history, thread.given)),
        next,
        tasks,
        metadata: metadata(thread, turns, p),
        created_at: p.checkpoint.at.to_string(),
        checkpoint: p.wire(turns, thread.thread_id),
        parent_checkpoint: parent(turns, p).map(|q| q.wire(turns, thread.thread_id)),
        interrupts: pending,
    }
}

/// The thread's state at a turn's input `p`: the values of the turn it follows as that turn
/// ended (no pending interrupt: the new turn's input comes first), `{"messages": []}` for a
/// first turn; next, the graph's start.
pub fn input_state(thread: ThreadRef<'_>, turns: &Turns<'_>, p: Point<'_>) -> ThreadState {
    let values = match turns.parents[p.turn] {
        None => json!({"messages": []}),
        Some(up) => {
            let chain: Vec<&RunState> = turns
                .chain(up)
                .into_iter()
                .map(|t| turns.states[t])
                .collect();
            let mut v = values(turns.states[up], &messages(&chain, thread.given));
            if let Value::Object(m) = &mut v {
                m.remove("__interrupt__");
            }
            v
        }
    };
    let run = p.run(turns);
    ThreadState {
        values,
        next: vec![START.to_owned()],
        tasks: vec![task(run, p, START, &[])],
        metadata: metadata(thread, turns, p),
        created_at: p.checkpoint.at.to_string(),
        checkpoint: p.wire(turns, thread.thread_id),
        parent_checkpoint: parent(turns, p).map(|q| q.wire(turns, thread.thread_id)),
        interrupts: Vec::new(),
    }
}

/// The graph's start node: what runs next from a turn's input.
const START: &str = "__start__";

/// The head of turn `turn`: its newest checkpoint on its effective history.
pub fn turn_head<'a>(turns: &Turns<'a>, turn: usize) -> Option<Point<'a>> {
    let list = &turns.states.get(turn)?.checkpoints;
    let checkpoint = list.get(list.head.as_ref()?)?;
    Some(Point { turn, checkpoint })
}

/// The thread's head: the latest turn's head.
pub fn head<'a>(turns: &Turns<'a>) -> Option<Point<'a>> {
    turn_head(turns, turns.states.len().checked_sub(1)?)
}

/// Finds a checkpoint of the thread by its LangGraph id, shown or not.
pub fn find<'a>(turns: &Turns<'a>, id: Uuid) -> Option<Point<'a>> {
    all_newest_first(turns).find(|p| p.uuid(turns) == id)
}

fn all_newest_first<'a, 'b>(turns: &'b Turns<'a>) -> impl Iterator<Item = Point<'a>> + 'b {
    turns.states.iter().enumerate().rev().flat_map(|(turn, s)| {
        s.checkpoints
            .checkpoints
            .iter()
            .rev()
            .map(move |checkpoint| Point { turn, checkpoint })
    })
}

/// The checkpoints a history shows: the shown checkpoints of every turn, all branches, newest
/// first (later turns first, then log order backwards), only those older than `before` when
/// given (which may name any checkpoint of the thread). `None` when `before` names none.
pub fn history<'a>(turns: &Turns<'a>, before: Option<Uuid>) -> Option<Vec<Point<'a>>> {
    let mut all = all_newest_first(turns).peekable();
    if let Some(before) = before {
        all.by_ref().find(|p| p.uuid(turns) == before)?;
    }
    Some(all.filter(|p| turns.is_shown(*p)).collect())
}

/// One decision read from a `command.resume` value.
#[derive(Clone, Debug, PartialEq)]
pub struct ResumeDecision {
    pub approval_id: ApprovalId,
    pub decision: Decision,
    pub edited_args: Option<Value>,
    pub comment: Option<String>,
}

/// Reads a `command.resume` value against the pending approvals of a run: `"approve"` or
/// `"reject"`, agent-chat-ui's `{decisions: [{type: approve} | {type: reject, message} |
/// {type: edit, edited_action: {name, args}}]}`, or, needed when several are pending,
/// `{<interrupt id>: <one of those>}` for each. The error says what was wrong.
pub fn decisions_from_resume(
    run_id: RunId,
    value: &Value,
    pending: &[&Approval],
) -> Result<Vec<ResumeDecision>, String> {
    if pending.is_empty() {
        return Err("nothing is waiting for a decision: this thread has no interrupt".into());
    }
    if let Some(map) = value.as_object().filter(|m| !m.contains_key("decisions")) {
        return map
            .iter()
            .map(|(id, v)| {
                let a = pending
                    .iter()
                    .find(|a| &interrupt_id(run_id, &a.approval_id) == id)
                    .ok_or_else(|| format!("no pending interrupt has the id {id}"))?;
                one_decision(v, a)
            })
            .collect();
    }
    match pending {
        [a] => Ok(vec![one_decision(value, a)?]),
        _ => Err(format!(
            "{} interrupts are pending: resume with {{\"<interrupt id>\": <decision>}} for each",
            pending.len()
        )),
    }
}

/// One decision for approval `a`: a plain word or a one-element `decisions` list.
fn one_decision(v: &Value, a: &Approval) -> Result<ResumeDecision, String> {
    let plain = |decision| ResumeDecision {
        approval_id: a.approval_id.clone(),
        decision,
        edited_args: None,
        comment: None,
    };
    if let Some(word) = v.as_str() {
        return match word {
            "approve" => Ok(plain(Decision::Approve)),
            "reject" => Ok(plain(Decision::Reject)),
            other => Err(format!(
                "resume with \"approve\" or \"reject\", not {other:?}"
            )),
        };
    }
    let list = v
        .get("decisions")
        .and_then(Value::as_array)
        .ok_or("resume with \"approve\", \"reject\" or {\"decisions\": [...]}")?;
    let [d] = list.as_slice() else {
        return Err(format!(
            "one decision per interrupt: got {} in \"decisions\"",
            list.len()
        ));
    };
    match d.get("type").and_then(Value::as_str) {
        Some("approve") => Ok(plain(Decision::Approve)),
        Some("reject") => Ok(ResumeDecision {
            comment: d.get("message").and_then(Value::as_str).map(str::to_owned),
            ..plain(Decision::Reject)
        }),
        Some("edit") => edit_decision(d, a).map(|args| ResumeDecision {
            edited_args: Some(args),
            ..plain(Decision::Edit)
        }),
        _ => Err("a decision's \"type\" is \"approve\", \"edit\" or \"reject\"".into()),
    }
}

/// The args of an `edit` decision; its action must name the tool the approval is for.
fn edit_decision(d: &Value, a: &Approval) -> Result<Value, String> {
    let action = d
        .get("edited_action")
        .ok_or("an \"edit\" decision needs \"edited_action\": {\"name\", \"args\"}")?;
    if let Some(name) = action.get("name").and_then(Value::as_str)
        && name != a.tool_name
    {
        return Err(format!(
            "the edited action is {name:?}, but the interrupt is for {:?}",
            a.tool_name
        ));
    }
    action
        .get("args")
        .filter(|args| args.is_object())
        .cloned()
        .ok_or_else(|| "an edited action's \"args\" must be an object".into())
}

#[cfg(test)]
mod tests;
