//! The `Planner`: the domain's four decisions in a run — what the query asks for (intent), which
//! agents do what (plan), whether the results are good enough (evaluation) and what to answer
//! (response). The engine calls it at the matching nodes and records what it decided, the model
//! calls it made and the notes it left (`Reasoning` events), so a replay never asks it again.

use std::sync::{Mutex, PoisonError};

use chronicle_projections::RunState;
use chronicle_schemas::{MemoryKind, PlanStep, RunId, Source, Strategy, TodoId};
use serde_json::Value;

use crate::plugin::agents::Registry;
use crate::plugin::llm::{Llm, LlmCall};

/// The analysed intent (`IntentAnalyzed`; `analyzed_intent` in the planning state).
#[derive(Clone, Debug, PartialEq)]
pub struct Intent {
    /// The domain's name for what is asked (`search`, `weather`, `general` ...).
    pub intent_type: String,
    pub confidence: f64,
    pub keywords: Vec<String>,
    /// Whatever the domain extracts (places, amounts, dates ...).
    pub entities: Value,
    pub source: Source,
}

/// An execution plan, before it becomes TODOs.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub strategy: Strategy,
    pub steps: Vec<PlanStep>,
    pub parallel_groups: Vec<Vec<String>>,
    /// Seconds.
    pub estimated_total_time: f64,
    pub source: Source,
}

/// A judgement of the results: good enough, or retry some agents.
#[derive(Clone, Debug, PartialEq)]
pub struct EvaluationOutcome {
    pub quality_score: f64,
    pub completeness: f64,
    pub needs_retry: bool,
    pub retry_agents: Vec<String>,
    pub feedback: String,
    pub source: Source,
    /// Agents not in the plan yet that should run (a model's plan adjustment, such as another
    /// search): each becomes a TODO added by `llm`, in a new round, within the run's `max_retries`
    /// rounds. Agents the registry does not hold are dropped.
    pub add_agents: Vec<String>,
}

/// One agent's latest outcome in the run, as evaluation and response see it: a result, or why
/// there is none.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentResult {
    pub agent: String,
    /// The team the agent declared.
    pub team: String,
    pub todo_id: TodoId,
    pub result: Option<Value>,
    pub error: Option<String>,
}

/// An item a planner remembers of a turn for its user's later turns; the engine records it as
/// `MemorySaved` with a new `memory_id`, the run's memory user and the run.
#[derive(Clone, Debug, PartialEq)]
pub struct Remembered {
    pub kind: MemoryKind,
    /// What it is about (`deal_type`): a later preference with the same key replaces it.
    pub key: String,
    /// The domain's value, for the rules that apply it.
    pub value: Value,
    /// The item in words, for people and prompts.
    pub text: String,
}

/// What a planner sees of the run, and its way to the model and to the run's narration.
#[derive(Debug)]
pub struct PlanContext<'a> {
    pub run_id: RunId,
    pub query: &'a str,
    /// The agents the run may use (names, purposes, teams, routing hints).
    pub agents: &'a Registry,
    /// The model, when one is configured; every call is recorded with the node.
    pub llm: Llm,
    /// The session's earlier turns and the user's memory, as the run recorded them.
    pub turn: crate::plugin::agents::TurnContext,
    notes: Mutex<Vec<String>>,
}

impl<'a> PlanContext<'a> {
    pub fn new(run_id: RunId, query: &'a str, agents: &'a Registry, llm: Llm) -> Self {
        Self {
            run_id,
            query,
            agents,
            llm,
            turn: Default::default(),
            notes: Mutex::new(Vec::new()),
        }
    }

    /// `prompt` for the model, after the session's earlier turns when it has some, so that a
    /// follow-up ("and in Seocho?") reads as one.
    pub fn with_history(&self, prompt: String) -> String {
        if self.turn.history.is_empty() {
            return prompt;
        }
        let mut out = String::from("Earlier in this conversation (oldest first):\n");
        for t in &self.turn.history {
            out.push_str(&format!("- user: {}\n  answer: {}\n", t.query, t.answer));
        }
        out.push_str("\nThe current request, which may refer to them:\n");
        out.push_str(&prompt);
        out
    }

    /// Says why the planner decided something; recorded as a `Reasoning` event with the node.
    pub fn note(&self, message: impl Into<String>) {
        self.notes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(message.into());
    }

    /// The model calls and notes made so far, oldest first.
    pub fn finish(self) -> (Vec<LlmCall>, Vec<String>) {
        let calls = self.llm.take_calls();
        let notes = self
            .notes
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        (calls, notes)
    }
}

/// A domain's planning: intent, plan, evaluation and response. Implementations answer without a
/// model when none is configured (`cx.llm.model()` is `None`) or a model answer is unusable.
#[async_trait::async_trait]
pub trait Planner: Send + Sync + 'static {
    async fn intent(&self, cx: &PlanContext<'_>) -> Intent;

    /// A plan over `cx.agents`. Steps naming an agent the registry does not hold fail the run
    /// when it starts them, so a planner should only name registered agents.
    async fn plan(&self, cx: &PlanContext<'_>, intent: &Intent) -> Plan;

    /// Whether the run's results answer the query, or which agents to run again.
    async fn evaluate(&self, cx: &PlanContext<'_>, results: &[AgentResult]) -> EvaluationOutcome;

    /// The final response (`ResponseGenerated`) from the completed agents' results.
    async fn respond(
        &self,
        cx: &PlanContext<'_>,
        intent: &Intent,
        results: &[AgentResult],
    ) -> Value;

    /// A person's plain words to a run that waits for them, as the slash command they mean
    /// (`/todo approve`, `/todo reject [reason]`, `/todo add analysis_team`), or `None` when they
    /// mean none. Asked when no model is configured or the model's reading is unusable. The
    /// default reads English approval and rejection words and `add <agent>`.
    async fn interpret(&self, cx: &PlanContext<'_>, said: &str, run: &RunState) -> Option<String> {
        let _ = run;
        crate::plugin::said::by_words(said, cx.agents)
    }

    /// The input of a TODO about to be asked for or started, from the plan's `input` and what
    /// people chose for the TODOs it depends on (`chosen`, in TODO order): a TODO after an edited
    /// or steered one works on what the person chose. Called from the recorded decisions, so a
    /// re-run gets the same input. By default [`crate::hitl::carry_edits`]: a value an edit
    /// changed is changed the same way where a later input had it.
    fn carry(&self, input: Value, chosen: &[crate::plugin::hitl::Chosen]) -> Value {
        crate::plugin::hitl::carry_edits(input, chosen)
    }

    /// What to remember of the turn for the user's later turns (a preference the query
    /// stated, a fact about the user), called when the turn answers. By default nothing.
    async fn remember(
        &self,
        _cx: &PlanContext<'_>,
        _intent: &Intent,
        _results: &[AgentResult],
    ) -> Vec<Remembered> {
        Vec::new()
    }
}

/// The planner of an engine no domain was plugged into: it plans nothing (runs need a plan of
/// their own, `RunConfig::plan`), accepts every result and answers with the results as they are.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoPlanner;

#[async_trait::async_trait]
impl Planner for NoPlanner {
    async fn intent(&self, _: &PlanContext<'_>) -> Intent {
        Intent {
            intent_type: "unplanned".into(),
            confidence: 0.0,
            keywords: vec![],
            entities: Value::Object(Default::default()),
            source: Source::Rules,
        }
    }

    async fn plan(&self, cx: &PlanContext<'_>, _: &Intent) -> Plan {
        cx.note("no planner is configured: the run has nothing to do without a plan of its own");
        Plan {
            strategy: Strategy::Sequential,
            steps: vec![],
            parallel_groups: vec![],
            estimated_total_time: 0.0,
            source: Source::Rules,
        }
    }

    async fn evaluate(&self, _: &PlanContext<'_>, results: &[AgentResult]) -> EvaluationOutcome {
        let ok = results.iter().filter(|r| r.result.is_some()).count();
        let completeness = if results.is_empty() {
            1.0
        } else {
            ok as f64 / results.len() as f64
        };
        EvaluationOutcome {
            quality_score: completeness,
            completeness,
            needs_retry: false,
            retry_agents: vec![],
            feedback: format!("{ok} of {} agent(s) returned a result", results.len()),
            source: Source::Rules,
            add_agents: vec![],
        }
    }

    async fn respond(&self, _: &PlanContext<'_>, _: &Intent, results: &[AgentResult]) -> Value {
        let by_agent: serde_json::Map<String, Value> = results
            .iter()
            .filter_map(|r| Some((r.agent.clone(), r.result.clone()?)))
            .collect();
        serde_json::json!({ "results": by_agent })
    }
}
