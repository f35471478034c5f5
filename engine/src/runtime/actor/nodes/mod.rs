//! The supervisor's nodes, one file each: what a [`Step`] does, as one append.
//!
//! ```text
//! initialize → analyze_intent → build_plan → [approval] → execute (per TODO) → … → evaluate
//!   → (retry round: new TODOs for the named agents) → aggregate → generate_response
//! (a rejection under `on_reject: end_turn` → end_turn: the run answers with the rejection)
//! ```
//!
//! Each node appends its events together with a `Reasoning` note and a `CheckpointSaved`
//! (`cp_001`, `cp_002`, … numbered over the whole log), and a `PhaseChanged` when it enters a new
//! phase. With a model configured, the phase change (and note) that announce a model call are
//! appended first, on their own ([`RunActor::announce`]).

use chronicle_projections::RunState;
use chronicle_schemas::{CheckpointId, Event, Payload, Phase, Source, Timestamp};
use serde_json::Value;

use super::RunActor;
use super::step::Step;
use crate::Result;
use crate::plugin::llm::{Llm, LlmCall, Streamed};
use crate::plugin::planner::{Intent, PlanContext};

mod aggregate;
mod approval;
mod context;
mod end_turn;
mod evaluate;
mod execute;
mod initialize;
mod intent;
mod memory;
mod plan;
mod respond;

pub(super) use approval::{approval_id_of, expiry};

impl RunActor {
    pub(super) async fn perform(&mut self, step: Step) -> Result<()> {
        match step {
            Step::Wait => Ok(()),
            Step::Fail(reason) => self.fail(reason).await,
            Step::Initialize => self.initialize().await,
            Step::AnalyzeIntent => self.analyze_intent().await,
            Step::BuildPlan => self.build_plan().await,
            Step::Block(list) => self.block(list).await,
            Step::SkipRejected(list) => self.skip_rejected(list).await,
            Step::EndTurn(todo) => self.end_turn(todo).await,
            Step::RequestApprovals(ids) => self.request_approvals(ids).await,
            Step::ReAsk(list) => self.reask(list).await,
            Step::Start(ids) => self.start_todos(ids).await,
            Step::Rerun(ids) => self.rerun_todos(ids).await,
            Step::Evaluate => self.evaluate().await,
            Step::AddRetries(agents, added, round) => self.add_retries(agents, added, round).await,
            Step::Aggregate => self.aggregate().await,
            Step::Respond => self.respond().await,
        }
    }

    async fn fail(&mut self, reason: String) -> Result<()> {
        self.cancel_sub_runs("engine", None);
        self.abort_agents();
        self.append(vec![Event::RunFailed { error: reason }])
            .await
            .map(drop)
    }

    /// What a planner sees of the run, with the model when one is configured. The model's
    /// reasoning streams to the run's subscribers while it writes.
    pub(super) fn plan_context<'a>(&'a self, query: &'a str) -> PlanContext<'a> {
        self.context_streaming(query, Streamed::Reasoning)
    }

    /// [`Self::plan_context`] for the node whose answer is the run's: the answer's text streams
    /// too, as the run's message.
    fn answer_context<'a>(&'a self, query: &'a str) -> PlanContext<'a> {
        self.context_streaming(query, Streamed::Answer)
    }

    fn context_streaming<'a>(&'a self, query: &'a str, streamed: Streamed) -> PlanContext<'a> {
        let run = self.live.run_id();
        let after_seq = self.state().next_seq().saturating_sub(1);
        let chunks = self.shared.bus.chunk_sink(run, after_seq, None, None);
        let mut cx = PlanContext::new(
            run,
            query,
            &self.shared.settings.registry,
            Llm::new(self.shared.settings.llm.clone()).streaming(chunks, streamed),
        );
        cx.turn = crate::plugin::agents::TurnContext::of(&self.state().supervisor);
        cx
    }

    /// Events that announce a planner call (a phase change, a note). With a model configured
    /// the call may be slow, so they are appended on their own before it, and subscribers see
    /// what the run is doing while the model works (a crash in between re-runs the node, which
    /// announces nothing again: the phase has been entered). Without a model the planner
    /// answers at once, and they are the first of the node's events, in its one append.
    /// The model is called only once what the run wrote before is durable.
    async fn announce(&mut self, events: Vec<Event>) -> Result<Vec<Event>> {
        if self.shared.settings.llm.is_none() {
            return Ok(events);
        }
        if !events.is_empty() {
            self.append(events).await?;
        }
        self.durable().await?;
        Ok(Vec::new())
    }
}

/// The checkpoint closing a node; `just_completed` counts a TODO completed by the same append.
pub(in crate::runtime::actor) fn checkpoint(
    state: &RunState,
    node: &str,
    just_completed: usize,
) -> Event {
    let done = just_completed
        + state
            .supervisor
            .planning_state
            .as_ref()
            .map_or(0, |p| p.completed_todo_ids.len());
    Event::CheckpointSaved {
        checkpoint_id: next_checkpoint_id(state),
        node: node.to_owned(),
        todos_completed: done as u32,
    }
}

/// The id the run's next checkpoint gets: `cp_NNN`, numbered over the whole log.
pub(in crate::runtime::actor) fn next_checkpoint_id(state: &RunState) -> CheckpointId {
    CheckpointId(format!("cp_{:03}", state.checkpoints.checkpoints.len() + 1))
}

/// `PhaseChanged` when the node enters a new phase (not repeated within one).
fn phase_change(state: &RunState, phase: Phase) -> Option<Event> {
    (state.supervisor.current_phase != phase).then_some(Event::PhaseChanged { phase })
}

fn llm_event(call: LlmCall) -> Event {
    Event::LlmCalled {
        purpose: call.purpose,
        model: call.model,
        prompt_hash: call.prompt_hash,
        response: Payload::Inline(Value::String(call.response)),
        duration_ms: call.duration_ms,
        error: call.error,
        turn: None,
        usage: None,
        notice: None,
        loaded: Vec::new(),
    }
}

/// What a planner's node appends besides its result: the model calls it made, then its notes.
pub(super) fn planner_events(cx: PlanContext<'_>) -> Vec<Event> {
    let (calls, notes) = cx.finish();
    calls
        .into_iter()
        .map(llm_event)
        .chain(
            notes
                .into_iter()
                .map(|message| Event::Reasoning { message }),
        )
        .collect()
}

/// The analysed intent back from the state (it was recorded by `IntentAnalyzed`).
fn intent_of(state: &RunState) -> Intent {
    let p = state.supervisor.planning_state.as_ref();
    let i = p.map(|p| p.analyzed_intent.clone()).unwrap_or(Value::Null);
    Intent {
        intent_type: i["intent_type"].as_str().unwrap_or("search").to_owned(),
        confidence: i["confidence"].as_f64().unwrap_or(0.0),
        keywords: serde_json::from_value(i["keywords"].clone()).unwrap_or_default(),
        entities: i["entities"].clone(),
        source: p.and_then(|p| p.intent_source).unwrap_or(Source::Rules),
    }
}

/// Milliseconds since the run started.
fn elapsed_ms(start: Option<Timestamp>, now: Timestamp) -> u64 {
    start.map_or(0, |t| {
        (now.as_micros() - t.as_micros()).max(0) as u64 / 1000
    })
}
