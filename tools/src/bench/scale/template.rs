//! The runs the generator copies: a few runs of the bench domain's workflow made by the real
//! engine, one per owner, query and ending, read back from the store as the appends the engine
//! made. Copies differ from them only in their ids (run, session, approvals, memories), their
//! user, the session's earlier turns they were given, and the memory they load and save.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use chronicle_engine::agents::{Agent, AgentContext, AgentError, AgentInfo, AgentOutput};
use chronicle_engine::store::{Durability, Options, Store};
use chronicle_engine::{Engine, Principal, StartRun};
use chronicle_schemas::{
    CheckpointId, Decision, Envelope, Event, HitlMode, PlanStep, RunId, RunStatus, SessionId,
};
use serde_json::Value;
use tokio::runtime::Runtime;

/// The principals the generated runs belong to.
pub const OWNERS: [&str; 4] = ["alice", "bob", "carol", "dave"];

/// The queries of the generated turns: the benchmark's (three agents) and one that plans two.
pub const QUERIES: [&str; 2] = [
    chronicle_bench::BENCH_QUERY,
    "Find the latest listings in Seocho and compare the price trends",
];

/// The agent of the failing runs' plan: it fails at once, as an agent whose service is down.
const FAILING_AGENT: &str = "review_team";
const FAILING_ERROR: &str = "upstream review service unavailable (503)";
/// The run timeout of every template, and so of every copy: a year.
const RUN_TIMEOUT_MS: u64 = 365 * 24 * 60 * 60 * 1_000;
/// The longest the template waits for one event before it calls the engine stuck.
const EVENT_WAIT: Duration = Duration::from_secs(30);

/// How a generated run ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// HITL none, completed.
    Done,
    /// HITL `every_todo`, every approval granted, completed.
    Approved,
    /// HITL `every_todo`, the second TODO rejected, completed.
    Rejected,
    /// A required agent fails: `RunFailed`.
    Failed,
    /// Cancelled while it waits for its first approval.
    Cancelled,
    /// Waits for its first approval (unfinished; the inbox lists it).
    Pending,
    /// `Done` cut at an append in the middle, as a crash leaves it: the engine resumes it when
    /// it opens the store.
    Cut,
}

impl Kind {
    pub const ALL: [Kind; 7] = [
        Kind::Done,
        Kind::Approved,
        Kind::Rejected,
        Kind::Failed,
        Kind::Cancelled,
        Kind::Pending,
        Kind::Cut,
    ];
}

/// One event of a template, as a copy makes it.
#[derive(Clone, Debug)]
pub enum Slot {
    /// Copied as it is.
    Same(Event),
    /// `RunStarted`: the copy's session and user.
    Started(Event),
    /// `SessionContextLoaded`: the copy's session's earlier turns (none on a first turn), and
    /// then the user's memory (`MemoryLoaded`) when it holds some.
    Context,
    /// `ResponseGenerated`, after which the copy may save a memory item.
    Answer(Event),
    /// An event naming approval ids: its JSON, in which each copy puts fresh ids.
    Approvals(String),
}

/// A run to copy.
#[derive(Clone, Debug)]
pub struct Template {
    /// The run's appends, in order.
    pub groups: Vec<Vec<Slot>>,
    pub status: RunStatus,
    /// The answer as a later turn is given it.
    pub answer: String,
    pub query: String,
    pub last_seq: u64,
    /// A checkpoint in the middle of the run, to restore to.
    pub checkpoint: Option<CheckpointId>,
    /// The approval ids its events name, which each copy replaces.
    pub approvals: Vec<String>,
}

/// Every template, by owner, query and ending.
pub struct Templates {
    by: HashMap<(usize, usize, Kind), Template>,
}

impl Templates {
    pub fn get(&self, owner: usize, query: usize, kind: Kind) -> &Template {
        &self.by[&(owner, query, kind)]
    }

    /// Makes the templates: in `dir`, one session per owner, query and ending, through the
    /// engine with the bench domain (and one failing agent).
    pub fn make(rt: &Runtime, dir: &Path) -> Result<Templates> {
        let store = Store::open(
            dir,
            Options {
                durability: Durability::Async,
                ..Options::default()
            },
        )
        .with_context(|| format!("opening the template store in {}", dir.display()))?;
        let mut settings = chronicle_bench::settings();
        settings.registry.register(Arc::new(Failing::new()));
        // Copies are measured days after they were written: a run that waits for a person, and
        // an old run the bench restores, must still be able to go on then.
        settings.defaults.limits.run_timeout_ms = RUN_TIMEOUT_MS;
        let engine = rt.block_on(Engine::open(store.clone(), settings))?;
        let made = rt.block_on(make_all(&engine));
        rt.block_on(engine.shutdown());
        drop(engine);
        let made = made?;
        let mut by = HashMap::new();
        for ((owner, query, kind), run) in made {
            by.insert((owner, query, kind), read(&store, run, kind)?);
        }
        // The cut runs: a completed run's first half of appends.
        for owner in 0..OWNERS.len() {
            for query in 0..QUERIES.len() {
                let done = &by[&(owner, query, Kind::Done)];
                let mut cut: Template = done.clone();
                cut.groups.truncate(done.groups.len() / 2);
                cut.status = RunStatus::Running;
                cut.last_seq = cut.groups.iter().map(|g| g.len() as u64).sum::<u64>() - 1;
                by.insert((owner, query, Kind::Cut), cut);
            }
        }
        Ok(Templates { by })
    }
}

/// An agent that always fails, not retryably.
#[derive(Debug)]
struct Failing {
    info: AgentInfo,
}

impl Failing {
    fn new() -> Self {
        Failing {
            info: AgentInfo::new(FAILING_AGENT, "review", "Reviews the report"),
        }
    }
}

#[async_trait::async_trait]
impl Agent for Failing {
    fn info(&self) -> &AgentInfo {
        &self.info
    }

    fn acts_outside(&self) -> bool {
        false
    }

    async fn run(&self, _ctx: &AgentContext, _input: Value) -> Result<AgentOutput, AgentError> {
        Err(AgentError::fatal(FAILING_ERROR))
    }
}

type Made = Vec<((usize, usize, Kind), RunId)>;

async fn make_all(engine: &Engine) -> Result<Made> {
    let mut made = Vec::new();
    for (o, owner) in OWNERS.iter().enumerate() {
        // Services that start runs for their users: only an admin may name another user.
        let by = Principal::admin(*owner);
        for (q, query) in QUERIES.iter().enumerate() {
            for kind in Kind::ALL {
                if kind == Kind::Cut {
                    continue;
                }
                // Each ending is the second turn of a session, so it has the session's context.
                let first = start(engine, &by, query, None, Kind::Done).await?;
                let session = first.1;
                drive(engine, &by, first.0, Kind::Done).await?;
                let (run, _) = start(engine, &by, query, Some(session), kind).await?;
                drive(engine, &by, run, kind).await?;
                made.push(((o, q, kind), run));
            }
        }
    }
    Ok(made)
}

async fn start(
    engine: &Engine,
    by: &Principal,
    query: &str,
    session: Option<SessionId>,
    kind: Kind,
) -> Result<(RunId, SessionId)> {
    let hitl = match kind {
        Kind::Done | Kind::Failed | Kind::Cut => HitlMode::None,
        _ => HitlMode::EveryTodo,
    };
    let plan = (kind == Kind::Failed).then(|| {
        ["search_team", "analysis_team", FAILING_AGENT]
            .iter()
            .map(|a| PlanStep {
                agent_name: (*a).into(),
                team: a.trim_end_matches("_team").into(),
                task: format!("{a} step"),
                description: format!("{a} on the request"),
                priority: 1,
                timeout: 10,
                ..PlanStep::default()
            })
            .collect()
    });
    let started = engine
        .start_run(StartRun {
            by: by.clone(),
            query: query.into(),
            session_id: session,
            user_id: Some("template-user".into()),
            hitl: Some(hitl),
            plan,
            ..StartRun::default()
        })
        .await?;
    Ok((started.run_id, started.session_id))
}

/// Runs `run` to the ending `kind` asks for: decides its approvals, cancels it, or leaves it
/// waiting.
async fn drive(engine: &Engine, by: &Principal, run: RunId, kind: Kind) -> Result<()> {
    let mut events = engine.subscribe(run, 0)?.into_inner();
    let mut asked = None;
    let mut decided = 0;
    loop {
        let env: Arc<Envelope> = tokio::time::timeout(EVENT_WAIT, events.recv())
            .await
            .with_context(|| format!("template run {run} stalled"))?
            .with_context(|| format!("template run {run}: the stream ended"))??;
        match &env.event {
            Event::ApprovalRequested { approval_id, .. } => asked = Some(approval_id.clone()),
            // An approval's request is one append that ends with its checkpoint: the run waits.
            Event::CheckpointSaved { .. } if asked.is_some() => {
                let approval = asked.take().expect("checked");
                match kind {
                    Kind::Pending => return Ok(()),
                    Kind::Cancelled => {
                        engine
                            .cancel(run, by, Some("no longer needed".into()))
                            .await?;
                    }
                    _ => {
                        let reject = kind == Kind::Rejected && decided == 1;
                        let (decision, comment) = if reject {
                            (Decision::Reject, Some("not this one".to_owned()))
                        } else {
                            (Decision::Approve, None)
                        };
                        engine
                            .decide(run, approval, decision, None, by, comment)
                            .await?;
                        decided += 1;
                    }
                }
            }
            Event::RunCompleted { .. } | Event::RunFailed { .. } | Event::RunCancelled { .. } => {
                return Ok(());
            }
            _ => {}
        }
    }
}

/// Reads a template run back as its appends (each append's events share their `at`).
fn read(store: &Store, run: RunId, kind: Kind) -> Result<Template> {
    let envs: Vec<Envelope> = store.read_run(run, 0, u64::MAX).collect::<Result<_, _>>()?;
    let Some(last) = envs.last() else {
        bail!("template run {run} has no events")
    };
    let state = store.state_at(run, last.seq)?;
    let sup = &state.supervisor;
    let approvals: Vec<String> = state
        .approvals
        .list
        .iter()
        .map(|a| a.approval_id.0.clone())
        .collect();
    let mut groups: Vec<Vec<Slot>> = Vec::new();
    let mut at = None;
    let mut checkpoints = Vec::new();
    for env in &envs {
        if at != Some(env.at) {
            groups.push(Vec::new());
            at = Some(env.at);
        }
        if let Event::CheckpointSaved { checkpoint_id, .. } = &env.event {
            checkpoints.push(checkpoint_id.clone());
        }
        let slot = match &env.event {
            Event::RunStarted { .. } => Slot::Started(env.event.clone()),
            Event::SessionContextLoaded { .. } => Slot::Context,
            Event::ResponseGenerated { .. } => Slot::Answer(env.event.clone()),
            e => {
                let json = serde_json::to_string(e)?;
                if approvals.iter().any(|a| json.contains(a.as_str())) {
                    Slot::Approvals(json)
                } else {
                    Slot::Same(e.clone())
                }
            }
        };
        groups.last_mut().expect("pushed").push(slot);
    }
    let context = groups.iter().flatten().any(|s| matches!(s, Slot::Context));
    if !context {
        bail!("template run {run} ({kind:?}) was given no session context");
    }
    let want = match kind {
        Kind::Failed => RunStatus::Failed,
        Kind::Cancelled => RunStatus::Cancelled,
        Kind::Pending => RunStatus::WaitingForApproval,
        _ => RunStatus::Completed,
    };
    if sup.run_status != want {
        bail!(
            "template run {run} ({kind:?}) ended {:?}, not {want:?}",
            sup.run_status
        );
    }
    Ok(Template {
        groups,
        status: sup.run_status,
        answer: sup
            .final_response
            .as_ref()
            .map(chronicle_wire::answer_text)
            .unwrap_or_default(),
        query: sup.query.clone(),
        last_seq: last.seq,
        checkpoint: checkpoints.get(checkpoints.len() / 2).cloned(),
        approvals,
    })
}
