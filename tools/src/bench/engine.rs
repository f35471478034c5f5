//! The engine end to end, in `sync` durability with the built-in agents and no LLM: full runs of a
//! 3-TODO sequential plan one at a time and many at a time, the events and bytes one run stores,
//! how fast a run resumes after a human's decision, and a long run's storage, checkpoint list and
//! restore.
//!
//! Every latency is what a client sees: the time from the call to the moment a subscriber of the
//! run receives the event that answers it, and the bus only publishes events that passed their
//! durability barrier. `Engine::wait_until` is not used: it replays the run's state after every
//! event, which would measure the waiting instead of the engine.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use chronicle_engine::store::{self, Options, Store};
use chronicle_engine::{Engine, Principal, RestoreTarget, Settings, StartRun};
use chronicle_schemas::{
    Decision, Envelope, Event, HitlMode, Limits, PlanStep, RunConfig, RunId, Strategy,
};
use serde_json::json;
use tokio::runtime::Runtime;
use tokio::sync::mpsc;

use super::append;
use super::report::{Row, num, target_max, target_min};
use super::{Plan, median, ms, percentile, progress};

/// The hot path's targets. Full runs many at a time, in-process (both workflows).
const RUNS_PER_S_TARGET: f64 = 2_000.0;
/// CPU time of the whole process per run, many at a time.
const CPU_PER_RUN_TARGET_MS: f64 = 1.0;
/// Barriers the store runs per run, many at a time.
const BARRIERS_PER_RUN_TARGET: f64 = 3.0;
/// On disk per run (sled's files, indexes and its own space included): the real-estate demo,
/// and equal work.
const RUN_DISK_TARGET: f64 = 10_000.0;
const EQUAL_RUN_DISK_TARGET: f64 = 3_000.0;
/// A resume may cost one fsync plus this much.
const RESUME_SLACK_MS: f64 = 0.3;
/// The long run the storage, list and restore targets are stated for.
const LONG_TODOS_TARGETED: usize = 200;
/// The long run's limits, raised from the defaults (50 TODOs, 200 steps) to fit its plan.
const LONG_MAX_TODOS: u32 = 250;
const LONG_MAX_STEPS: u32 = 2000;
const LONG_BYTES_TARGET: f64 = 1_000_000.0;
const LIST_TARGET_MS: f64 = 2.0;
const RESTORE_TARGET_MS: f64 = 5.0;

/// LangGraph 1.2 with its SQLite checkpointer on this machine, the same flows (from the issue).
const LANGGRAPH_RUNS_PER_S: &str = "≈ 67 runs/s";
const LANGGRAPH_RUN_BYTES: &str = "≈ 57 KB per run";
const LANGGRAPH_RESUME: &str = "≈ 5 ms";
const LANGGRAPH_LONG: &str =
    "lists the history of a 200-TODO thread in 0.84 s; its storage grows to 53 MB";

/// The longest the bench waits for any one event before it calls the engine stuck.
const EVENT_WAIT: Duration = Duration::from_secs(60);
/// Runs done one at a time before anything is measured (sled trees, allocator, page cache).
pub(super) const WARMUP_RUNS: usize = 5;
/// Runs whose stored events are counted and sized.
const SIZED_RUNS_MAX: usize = 32;
/// A pause before each timed decision, so the previous one's tail (the agent, its result, the
/// bus) has settled and the decision is timed on an idle engine.
const DECISION_PAUSE: Duration = Duration::from_millis(2);
/// Event kinds shown in the byte breakdowns.
const KINDS_SHOWN: usize = 4;

/// The deposit-increase question: the plan below answers it (law search, the increase against
/// the legal cap, a document).
const QUERY: &str = "집주인이 전세금 3억을 10억으로 올려달래. 법적으로 해결방법 알려줘";

/// The 3-TODO plan: agent, team, purpose. Each built-in agent answers from in-process data, so a
/// run measures the engine, not an agent.
const PLAN: [(&str, &str, &str); 3] = [
    ("search_team", "search", "법률 조문 검색"),
    ("analysis_team", "analysis", "인상률과 법정 한도 분석"),
    ("document_team", "document", "대응 방안 문서 작성"),
];

type Events = mpsc::Receiver<Result<Arc<Envelope>, store::Error>>;

fn plan_steps(todos: usize) -> Vec<PlanStep> {
    (0..todos)
        .map(|i| {
            let (agent, team, purpose) = PLAN[i % PLAN.len()];
            PlanStep {
                agent_name: agent.into(),
                team: team.into(),
                task: format!("{agent} 실행"),
                description: purpose.into(),
                priority: 1,
                input_mapping: json!({ "purpose": purpose }),
                timeout: 30,
                ..PlanStep::default()
            }
        })
        .collect()
}

/// A caller-provided sequential plan of exactly `todos` TODOs (no evaluation retries: the
/// default `max_retries` of a caller's config is 0).
fn run_config(hitl: HitlMode, todos: usize) -> RunConfig {
    RunConfig {
        hitl,
        strategy: Some(Strategy::Sequential),
        plan: Some(plan_steps(todos)),
        ..RunConfig::default()
    }
}

pub(super) fn start_req(config: &RunConfig) -> StartRun {
    StartRun {
        query: QUERY.into(),
        user_id: Some("bench".into()),
        config: Some(config.clone()),
        ..StartRun::default()
    }
}

async fn next_event(events: &mut Events, run: RunId) -> Result<Arc<Envelope>> {
    match tokio::time::timeout(EVENT_WAIT, events.recv()).await {
        Err(_) => bail!("run {run}: no event for {EVENT_WAIT:?}"),
        Ok(None) => bail!("run {run}: the subscription ended"),
        Ok(Some(item)) => item.with_context(|| format!("run {run}: subscription")),
    }
}

/// Reads the run's events up to its terminal one, which must be `RunCompleted`.
async fn until_completed(events: &mut Events, run: RunId) -> Result<Arc<Envelope>> {
    loop {
        let env = next_event(events, run).await?;
        match &env.event {
            Event::RunCompleted { .. } => return Ok(env),
            Event::RunFailed { error } => bail!("run {run} failed: {error}"),
            Event::RunCancelled { .. } => bail!("run {run} was cancelled"),
            _ => {}
        }
    }
}

/// One run from `start_run` to its durable `RunCompleted`, as a subscriber sees it.
pub(super) async fn full_run(engine: &Engine, req: &StartRun) -> Result<(RunId, Duration)> {
    let t = Instant::now();
    let run = engine.start_run(req.clone()).await?.run_id;
    let mut events = engine.subscribe(run, 0)?.into_inner();
    until_completed(&mut events, run).await?;
    Ok((run, t.elapsed()))
}

/// This process's user + system CPU time so far, from `/proc/self/stat` (clock ticks of 10 ms).
fn cpu_secs() -> Option<f64> {
    process_cpu_secs("self")
}

/// The user + system CPU time so far of the process `pid` (a number, or `self`), every thread
/// of it, from `/proc/<pid>/stat` (clock ticks of 10 ms).
pub(super) fn process_cpu_secs(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    let utime: f64 = fields.nth(11)?.parse().ok()?;
    let stime: f64 = fields.next()?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// What one timed phase of full runs did.
pub(super) struct RunPhase {
    pub runs: usize,
    pub secs: f64,
    pub lat_ms: Vec<f64>,
    ids: Vec<RunId>,
    /// Process CPU seconds spent during the phase.
    cpu_secs: f64,
    /// Events the store took during the phase, and the group commits that carried them (sled's
    /// writer stamps one `at` per commit; PostgreSQL's, one per append).
    pub events: u64,
    commits: u64,
    /// Durability barriers the store passed during the phase.
    pub barriers: u64,
}

impl RunPhase {
    pub(super) fn rate(&self) -> f64 {
        self.runs as f64 / self.secs
    }
}

/// `concurrency` clients, each running full runs back to back for `window`.
pub(super) async fn run_phase(
    engine: &Engine,
    req: &StartRun,
    concurrency: usize,
    window: Duration,
) -> Result<RunPhase> {
    let from = engine.store().durable_next_offset();
    let barriers0 = engine.store().barriers();
    let cpu0 = cpu_secs();
    let gate = Arc::new(tokio::sync::Barrier::new(concurrency));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let (engine, req, gate) = (engine.clone(), req.clone(), gate.clone());
        tasks.spawn(async move {
            gate.wait().await;
            let start = Instant::now();
            let mut out = Vec::new();
            while start.elapsed() < window {
                out.push(full_run(&engine, &req).await?);
            }
            anyhow::Ok((start, Instant::now(), out))
        });
    }
    let (mut first, mut last) = (None::<Instant>, None::<Instant>);
    let (mut lat_ms, mut ids) = (Vec::new(), Vec::new());
    while let Some(joined) = tasks.join_next().await {
        let (s, e, runs) = joined.context("a run client panicked")??;
        first = Some(first.map_or(s, |f| f.min(s)));
        last = Some(last.map_or(e, |x| x.max(e)));
        for (run, d) in runs {
            ids.push(run);
            lat_ms.push(ms(d));
        }
    }
    let cpu = match (cpu0, cpu_secs()) {
        (Some(a), Some(b)) => b - a,
        _ => f64::NAN,
    };
    let barriers = engine.store().barriers() - barriers0;
    let to = engine.store().durable_next_offset();
    // The writer stamps one `at` per group commit: distinct stamps count the commits.
    let mut stamps = HashSet::new();
    for env in engine.store().read_range(from, to) {
        stamps.insert(env?.at);
    }
    let secs = match (first, last) {
        (Some(f), Some(l)) => (l - f).as_secs_f64(),
        _ => f64::NAN,
    };
    Ok(RunPhase {
        runs: ids.len(),
        secs,
        lat_ms,
        ids,
        cpu_secs: cpu,
        events: to - from,
        commits: stamps.len() as u64,
        barriers,
    })
}

/// The targets of a phase of full runs many at a time: runs/s, CPU and barriers per run.
fn many_targets(p: &RunPhase) -> String {
    let per_run = |v: f64| v / p.runs as f64;
    format!(
        "{}; CPU {}; barriers {}",
        target_min(p.rate(), RUNS_PER_S_TARGET, "2,000 runs/s"),
        target_max(
            per_run(p.cpu_secs * 1000.0),
            CPU_PER_RUN_TARGET_MS,
            "1 ms per run"
        ),
        target_max(
            per_run(p.barriers as f64),
            BARRIERS_PER_RUN_TARGET,
            "3 per run"
        ),
    )
}

/// What a phase of full runs did, for a row's note.
fn phase_note(p: &mut RunPhase) -> String {
    let (p50, p99) = p50_p99(&mut p.lat_ms);
    format!(
        "start_run → RunCompleted seen by a subscriber: p50 {} ms, p99 {} ms; {} runs in {} s; \
         CPU {} ms per run; {} events in {} group commits ({} per commit); {} barriers per run",
        num(p50),
        num(p99),
        num(p.runs as f64),
        num(p.secs),
        num(p.cpu_secs * 1000.0 / p.runs as f64),
        num(p.events as f64),
        num(p.commits as f64),
        num(p.events as f64 / p.commits as f64),
        num(p.barriers as f64 / p.runs as f64),
    )
}

/// The stored size of runs, from their records as the store holds them.
#[derive(Default)]
struct Sizes {
    runs: u64,
    events: u64,
    bytes: u64,
    /// Appends: a run's appends are sequential and each is stamped once, so distinct `at`s.
    appends: u64,
    /// Event kind → (events, bytes).
    kinds: BTreeMap<&'static str, (u64, u64)>,
}

impl Sizes {
    fn add(&mut self, store: &Store, run: RunId) -> Result<()> {
        let mut stamps = HashSet::new();
        for env in store.read_run(run, 0, u64::MAX) {
            let env = env?;
            let len = env.encode()?.len() as u64;
            self.events += 1;
            self.bytes += len;
            stamps.insert(env.at);
            let k = self.kinds.entry(env.event.kind()).or_default();
            k.0 += 1;
            k.1 += len;
        }
        self.appends += stamps.len() as u64;
        self.runs += 1;
        Ok(())
    }

    fn per_run(&self, v: u64) -> f64 {
        v as f64 / self.runs.max(1) as f64
    }

    /// The kinds that take the most bytes, per run: `AgentCompleted 3 × 7,213 B = 35%`.
    fn top_kinds(&self) -> String {
        let mut kinds: Vec<_> = self.kinds.iter().collect();
        kinds.sort_by_key(|(_, (_, b))| std::cmp::Reverse(*b));
        kinds
            .into_iter()
            .take(KINDS_SHOWN)
            .map(|(kind, (n, b))| {
                format!(
                    "{kind} {} × {} B = {}%",
                    num(self.per_run(*n)),
                    num(*b as f64 / *n as f64),
                    num(*b as f64 * 100.0 / self.bytes as f64)
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Bytes a directory takes on disk (allocated blocks, as `du` counts them).
pub(super) fn disk_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => disk_bytes(&e.path()),
            Ok(m) => m.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

/// An engine on a new store in `dir` with the demo's domain: built-in agents, no LLM (rules
/// only), `sync` durability.
pub(super) fn open_engine(rt: &Runtime, dir: &Path) -> Result<Engine> {
    open_engine_with(rt, dir, chronicle_realestate::settings())
}

fn open_engine_with(rt: &Runtime, dir: &Path, settings: Settings) -> Result<Engine> {
    let store = Store::open(dir, Options::default())
        .with_context(|| format!("opening a store in {}", dir.display()))?;
    engine_on(rt, store, settings)
}

/// An engine with `settings` on `store`.
pub(super) fn engine_on(rt: &Runtime, store: Store, settings: Settings) -> Result<Engine> {
    Ok(rt.block_on(Engine::open(store, settings))?)
}

/// The equal-work run: the benchmark domain's query, planned by its rules.
pub(super) fn equal_work_req() -> StartRun {
    StartRun {
        query: chronicle_bench::BENCH_QUERY.into(),
        user_id: Some("bench".into()),
        ..StartRun::default()
    }
}

/// Stops the engine; the store closes (joining its writer) when `engine` drops, outside the
/// runtime.
pub(super) fn close_engine(rt: &Runtime, engine: Engine) {
    rt.block_on(engine.shutdown());
    drop(engine);
}

/// One timed decision: from the `decide` call to its reply (the decision is durable) and to the
/// moment a subscriber sees the TODO's `AgentStarted` (the run is working again).
struct Resume {
    reply_ms: f64,
    decided_ms: f64,
    started_ms: f64,
    /// Appends from `ApprovalDecided` to `AgentStarted`, both included (distinct `at` stamps),
    /// which share the barrier the decision's answer waits for.
    appends: usize,
}

/// Runs `every_todo` runs of the 3-TODO plan one at a time and times `decisions` approvals, one
/// in flight at a time.
async fn hitl_phase(engine: &Engine, decisions: usize) -> Result<Vec<Resume>> {
    let config = run_config(HitlMode::EveryTodo, PLAN.len());
    let mut out = Vec::with_capacity(decisions);
    while out.len() < decisions {
        let run = engine.start_run(start_req(&config)).await?.run_id;
        let mut events = engine.subscribe(run, 0)?.into_inner();
        loop {
            // An approval request is appended as one batch that ends with its checkpoint; once
            // that is seen the actor has nothing left to do but wait.
            let mut asked = None;
            let done = loop {
                let env = next_event(&mut events, run).await?;
                match &env.event {
                    Event::ApprovalRequested {
                        approval_id,
                        subject,
                        ..
                    } => {
                        asked = Some((approval_id.clone(), subject.todo_id().clone()));
                    }
                    Event::CheckpointSaved { .. } if asked.is_some() => break false,
                    Event::RunCompleted { .. } => break true,
                    Event::RunFailed { error } => bail!("run {run} failed: {error}"),
                    Event::RunCancelled { .. } => bail!("run {run} was cancelled"),
                    _ => {}
                }
            };
            if done || out.len() >= decisions {
                break;
            }
            let Some((approval_id, todo)) = asked else {
                bail!("run {run}: no approval was asked")
            };
            tokio::time::sleep(DECISION_PAUSE).await;
            let t = Instant::now();
            let decide = async {
                let r = engine
                    .decide(
                        run,
                        approval_id,
                        Decision::Approve,
                        None,
                        &Principal::local(),
                        None,
                    )
                    .await;
                (r, t.elapsed())
            };
            let watch = async {
                let mut decided = None;
                let mut stamps = HashSet::new();
                loop {
                    let env = next_event(&mut events, run).await?;
                    if decided.is_some() || matches!(env.event, Event::ApprovalDecided { .. }) {
                        stamps.insert(env.at);
                    }
                    match &env.event {
                        Event::ApprovalDecided { .. } => decided = Some(t.elapsed()),
                        Event::AgentStarted { todo_id, .. } if *todo_id == todo => {
                            let decided = decided.context("AgentStarted before ApprovalDecided")?;
                            return anyhow::Ok((decided, t.elapsed(), stamps.len()));
                        }
                        _ => {}
                    }
                }
            };
            let ((reply, reply_d), watched) = tokio::join!(decide, watch);
            reply.with_context(|| format!("deciding for {todo} of run {run}"))?;
            let (decided_d, started_d, appends) = watched?;
            out.push(Resume {
                reply_ms: ms(reply_d),
                decided_ms: ms(decided_d),
                started_ms: ms(started_d),
                appends,
            });
        }
    }
    Ok(out)
}

/// The median and the 99th percentile (sorts the sample).
fn p50_p99(xs: &mut [f64]) -> (f64, f64) {
    (median(xs), percentile(xs, 0.99))
}

/// Warm-up runs, then full runs one at a time and `engine_runs_many` at a time, and the stored
/// size of some of the former.
fn one_and_many(
    rt: &Runtime,
    engine: &Engine,
    req: &StartRun,
    plan: &Plan,
    what: &str,
) -> Result<(RunPhase, RunPhase, Sizes)> {
    let many = plan.engine_runs_many;
    progress(&format!("{what}: {WARMUP_RUNS} warm-up runs"));
    rt.block_on(async {
        for _ in 0..WARMUP_RUNS {
            full_run(engine, req).await?;
        }
        anyhow::Ok(())
    })?;
    progress(&format!(
        "{what}: full runs, 1 at a time, {:.1} s",
        plan.engine_window_1.as_secs_f64()
    ));
    let one = rt.block_on(run_phase(engine, req, 1, plan.engine_window_1))?;
    progress(&format!(
        "{what}: full runs, {many} at a time, {:.1} s",
        plan.engine_window_n.as_secs_f64()
    ));
    let n = rt.block_on(run_phase(engine, req, many, plan.engine_window_n))?;
    progress(&format!("{what}: sizing stored runs"));
    let mut sizes = Sizes::default();
    for run in one.ids.iter().take(SIZED_RUNS_MAX) {
        sizes.add(engine.store(), *run)?;
    }
    Ok((one, n, sizes))
}

fn full_runs(rt: &Runtime, root: &Path, plan: &Plan) -> Result<Vec<Row>> {
    progress("engine: fsync (before)");
    let fsync_before = append::fsync_rate(root, plan.engine_fsync_window)?;
    let dir = root.join("engine-runs");
    let engine = open_engine(rt, &dir)?;
    let req = start_req(&run_config(HitlMode::None, PLAN.len()));
    let many = plan.engine_runs_many;
    let (mut one, mut n, sizes) = one_and_many(rt, &engine, &req, plan, "engine")?;
    let mut hitl = Vec::new();
    if plan.hitl_decisions > 0 {
        progress(&format!(
            "engine: HITL resume, {} decisions",
            plan.hitl_decisions
        ));
        hitl = rt.block_on(hitl_phase(&engine, plan.hitl_decisions))?;
    }
    close_engine(rt, engine);
    let runs_total = WARMUP_RUNS + one.runs + n.runs + hitl.len().div_ceil(PLAN.len());
    let disk = disk_bytes(&dir);
    let stored = chronicle_engine::store::stored_record_bytes(&dir)?;
    plan.discard(&dir);

    progress("engine: fsync (after) and store barrier");
    let fsync_after = append::fsync_rate(root, plan.engine_fsync_window)?;
    let mut barrier =
        append::barrier_samples(root, plan, plan.engine_fsync_window, "engine-barrier")?;
    let (barrier_p50, barrier_p99) = p50_p99(&mut barrier);

    let appends = sizes.per_run(sizes.appends);
    let one_rate = one.rate();
    let n_rate = n.rate();
    let one_note = format!(
        "{}; {} appends per run; a barrier takes p50 {} ms; LangGraph 1.2 + SQLite: {LANGGRAPH_RUNS_PER_S}",
        phase_note(&mut one),
        num(appends),
        num(barrier_p50),
    );
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let n_note = format!(
        "{}; {}; at that CPU per run, {cores} cores allow ≈ {} runs/s; LangGraph 1.2 + SQLite: {LANGGRAPH_RUNS_PER_S}",
        many_targets(&n),
        phase_note(&mut n),
        num(cores as f64 / (n.cpu_secs / n.runs as f64)),
    );
    let bytes_per_run = sizes.per_run(sizes.bytes);
    let disk_per_run = disk as f64 / runs_total as f64;
    let mut rows = vec![
        Row::new(
            "engine_runs_1",
            format!("full runs, {}-TODO sequential plan, 1 at a time", PLAN.len()),
            one_rate,
            "runs/s",
        )
        .note(one_note),
        Row::new(
            "engine_runs_n",
            format!(
                "full runs, {}-TODO sequential plan, {many} at a time",
                PLAN.len()
            ),
            n_rate,
            "runs/s",
        )
        .note(n_note),
        Row::new(
            "engine_events_per_run",
            "events stored per run",
            sizes.per_run(sizes.events),
            "events",
        )
        .note(format!(
            "mean of {} runs; {} appends (group-commit batches) per run; HITL none, built-in agents, rules planner",
            sizes.runs,
            num(appends)
        )),
        Row::new(
            "engine_bytes_per_run",
            "bytes stored per run (encoded records)",
            bytes_per_run / 1000.0,
            "KB",
        )
        .note(format!(
            "largest: {}; stored compressed {} KB per run; sled on disk {} KB per run, {} ({} MB for {} runs, with indexes and sled's own space); LangGraph 1.2 + SQLite: {LANGGRAPH_RUN_BYTES}",
            sizes.top_kinds(),
            num(stored as f64 / runs_total as f64 / 1000.0),
            num(disk_per_run / 1000.0),
            target_max(disk_per_run, RUN_DISK_TARGET, "10 KB"),
            num(disk as f64 / 1e6),
            num(runs_total as f64),
        )),
    ];

    // The disk can drift during a run (VM disks and other work do): the mean of both probes.
    let fsync_ms = (fsync_before.append_mean_ms + fsync_after.append_mean_ms) / 2.0;
    if !hitl.is_empty() {
        let target = fsync_ms + RESUME_SLACK_MS;
        let shown = format!("fsync {} ms + 0.3 ms", num(fsync_ms));
        let mut started: Vec<f64> = hitl.iter().map(|r| r.started_ms).collect();
        let mut decided: Vec<f64> = hitl.iter().map(|r| r.decided_ms).collect();
        let mut reply: Vec<f64> = hitl.iter().map(|r| r.reply_ms).collect();
        let (s50, s99) = p50_p99(&mut started);
        let (d50, d99) = p50_p99(&mut decided);
        let (r50, r99) = p50_p99(&mut reply);
        rows.push(
            Row::new(
                "engine_resume_p50",
                "HITL resume: decide → AgentStarted durable, p50",
                s50,
                "ms",
            )
            .note(format!(
                "{}; {} decisions, one at a time, every_todo; the TODO's AgentStarted as a subscriber sees it; {} appends from ApprovalDecided to AgentStarted, made durable by one barrier; LangGraph 1.2 + SQLite: {LANGGRAPH_RESUME}",
                target_max(s50, target, &shown),
                num(hitl.len() as f64),
                num(hitl.iter().map(|r| r.appends as f64).sum::<f64>() / hitl.len() as f64),
            )),
        );
        rows.push(
            Row::new(
                "engine_resume_p99",
                "HITL resume: decide → AgentStarted durable, p99",
                s99,
                "ms",
            )
            .note(target_max(s99, target, &shown)),
        );
        rows.push(
            Row::new(
                "engine_decided_p50",
                "HITL decide → ApprovalDecided durable, p50",
                d50,
                "ms",
            )
            .note(format!(
                "p99 {} ms; as a subscriber sees it; decide() returns after p50 {} ms, p99 {} ms",
                num(d99),
                num(r50),
                num(r99)
            )),
        );
    }
    rows.push(
        Row::new(
            "engine_fsync_ms",
            "fsync (4 KiB append + fdatasync), mean",
            fsync_ms,
            "ms",
        )
        .note(format!(
            "reference for the rows above: mean of {} ms before and {} ms after them; store barrier (sled flush + fdatasync) p50 {} ms, p99 {} ms",
            num(fsync_before.append_mean_ms),
            num(fsync_after.append_mean_ms),
            num(barrier_p50),
            num(barrier_p99)
        )),
    );
    Ok(rows)
}

/// The checkpoint list as `/checkpoint list` builds it from the projection (one walk marks the
/// abandoned branches); the time in ms and the count.
fn list_from_state(state: &chronicle_projections::RunState) -> (f64, usize) {
    let t = Instant::now();
    let list: Vec<_> = state
        .checkpoints
        .with_abandoned()
        .into_iter()
        .map(|(c, abandoned)| (c.checkpoint_id.clone(), c.seq, c.node.clone(), abandoned))
        .collect();
    (ms(t.elapsed()), std::hint::black_box(list).len())
}

/// The run's cached snapshots (they live beside the log, in their own tree): count and bytes.
fn snapshot_bytes(store: &Store, run: RunId, last_seq: u64) -> Result<(usize, usize)> {
    let (mut n, mut bytes) = (0, 0);
    let mut upto = Some(last_seq);
    while let Some(seq) = upto {
        let Some(s) = store.latest_snapshot(run, seq)? else {
            break;
        };
        n += 1;
        bytes += chronicle_projections::snapshot::encode(&s).len();
        upto = s.last_seq.and_then(|l| l.checked_sub(1));
    }
    Ok((n, bytes))
}

/// The config of a long run of `todos` TODOs, one after another, with limits that let it.
pub(super) fn long_config(todos: usize) -> RunConfig {
    RunConfig {
        limits: Limits {
            max_todos: LONG_MAX_TODOS,
            max_steps: LONG_MAX_STEPS,
            ..Limits::default()
        },
        ..run_config(HitlMode::None, todos)
    }
}

fn long_run(rt: &Runtime, root: &Path, plan: &Plan) -> Result<Vec<Row>> {
    let todos = plan.long_todos;
    let dir = root.join("engine-long");
    let engine = open_engine(rt, &dir)?;
    let config = long_config(todos);
    progress(&format!("engine: one {todos}-TODO run"));
    let (run, run_d) = rt.block_on(full_run(&engine, &start_req(&config)))?;
    let store = engine.store().clone();
    let mut sizes = Sizes::default();
    sizes.add(&store, run)?;
    let head = store.run_head(run)?.context("the long run has no head")?;

    // `/checkpoint list`: a new actor loads the run (it finished, so its actor stopped), appends
    // the CommandReceived and answers.
    progress(&format!(
        "engine: /checkpoint list × {}",
        plan.engine_list_reps
    ));
    let mut list_ms = Vec::new();
    let mut listed = 0;
    for _ in 0..plan.engine_list_reps {
        let t = Instant::now();
        let reply = rt.block_on(engine.command(run, "/checkpoint list", &Principal::local()))?;
        list_ms.push(ms(t.elapsed()));
        if let chronicle_wire::CommandOutcome::CheckpointList { checkpoints } = reply {
            listed = checkpoints.len();
        }
    }
    anyhow::ensure!(listed > 0, "/checkpoint list listed nothing");
    let (list_p50, list_max) = (
        median(&mut list_ms),
        list_ms.iter().copied().fold(0.0, f64::max),
    );

    // The same list from the projection alone, split into its parts.
    let mut state_ms = Vec::new();
    let mut walk_ms = Vec::new();
    let mut state = None;
    for _ in 0..plan.engine_list_reps {
        let t = Instant::now();
        let s = engine.state(run, None)?;
        state_ms.push(ms(t.elapsed()));
        walk_ms.push(list_from_state(&s).0);
        state = Some(s);
    }
    let state = state.context("no projection was timed")?;
    let cps = state.checkpoints.checkpoints.len();
    let (state_p50, walk_p50) = (median(&mut state_ms), median(&mut walk_ms));
    let (snapshots, snapshot_b) = snapshot_bytes(&store, run, head.last_seq)?;
    // Of the state: reading and decoding the newest snapshot, before the log is folded onto it.
    let mut snap_ms = Vec::new();
    let mut snap_seq = None;
    for _ in 0..plan.engine_list_reps {
        let t = Instant::now();
        let snap = store.latest_snapshot(run, head.last_seq)?;
        snap_ms.push(ms(t.elapsed()));
        snap_seq = snap.and_then(|s| s.last_seq);
    }
    let snap_p50 = median(&mut snap_ms);
    let folded = head.last_seq - snap_seq.unwrap_or(0) + u64::from(snap_seq.is_none());

    // Restore the middle checkpoint of the original history, then let the run finish again
    // before the next repetition.
    let mid = state
        .checkpoints
        .checkpoints
        .iter()
        .filter(|c| c.branch == 0)
        .nth(cps / 2)
        .cloned()
        .context("the long run has no middle checkpoint")?;
    progress(&format!(
        "engine: restore {} (seq {}) × {}",
        mid.checkpoint_id, mid.seq, plan.engine_restore_reps
    ));
    let mut restore_ms = Vec::new();
    let mut rerun_ms = Vec::new();
    for _ in 0..plan.engine_restore_reps {
        let from = store.run_head(run)?.context("no head")?.next_seq();
        rt.block_on(async {
            let mut events = engine.subscribe(run, from)?.into_inner();
            let t = Instant::now();
            let reply = engine
                .restore(
                    run,
                    RestoreTarget::Checkpoint(mid.checkpoint_id.clone()),
                    &Principal::local(),
                )
                .await?;
            restore_ms.push(ms(t.elapsed()));
            anyhow::ensure!(reply.to_seq > 0, "restore answered {reply:?}");
            until_completed(&mut events, run).await?;
            rerun_ms.push(ms(t.elapsed()));
            anyhow::Ok(())
        })?;
    }
    let (restore_p50, restore_max) = (
        median(&mut restore_ms),
        restore_ms.iter().copied().fold(0.0, f64::max),
    );
    let mut at_mid_ms = Vec::new();
    for _ in 0..plan.engine_list_reps {
        let t = Instant::now();
        std::hint::black_box(store.state_at(run, mid.seq)?);
        at_mid_ms.push(ms(t.elapsed()));
    }
    let at_mid_p50 = median(&mut at_mid_ms);
    let head_after = store.run_head(run)?.context("no head")?;
    drop(store);
    close_engine(rt, engine);

    // The rows above find the run's state in memory, where its last actor left it. After a
    // restart the first command loads it from the newest snapshot.
    progress(&format!(
        "engine: /checkpoint list after a restart × {}",
        plan.engine_restore_reps
    ));
    let mut cold_ms = Vec::new();
    for _ in 0..plan.engine_restore_reps {
        let engine = open_engine(rt, &dir)?;
        let t = Instant::now();
        rt.block_on(engine.command(run, "/checkpoint list", &Principal::local()))?;
        cold_ms.push(ms(t.elapsed()));
        close_engine(rt, engine);
    }
    let disk = disk_bytes(&dir);
    plan.discard(&dir);

    let targeted = todos == LONG_TODOS_TARGETED;
    let when = |t: String| {
        if targeted {
            t
        } else {
            format!("(--quick: the target is for {LONG_TODOS_TARGETED} TODOs)")
        }
    };
    Ok(vec![
        Row::new(
            "engine_long_bytes",
            format!("{todos}-TODO run: bytes stored (encoded records)"),
            sizes.bytes as f64 / 1e6,
            "MB",
        )
        .note(format!(
            "{}; {} B per TODO; largest: {}; beside the log {snapshots} snapshot(s) of {} MB in all; sled on disk {} MB; LangGraph 1.2 + SQLite: {LANGGRAPH_LONG}",
            when(target_max(sizes.bytes as f64, LONG_BYTES_TARGET, "1 MB")),
            num(sizes.bytes as f64 / todos as f64),
            sizes.top_kinds(),
            num(snapshot_b as f64 / 1e6),
            num(disk as f64 / 1e6),
        )),
        Row::new(
            "engine_long_events",
            format!("{todos}-TODO run: events stored"),
            sizes.events as f64,
            "events",
        )
        .note(format!(
            "{} appends; the run took {} ms from start_run to RunCompleted ({} ms per TODO)",
            num(sizes.appends as f64),
            num(ms(run_d)),
            num(ms(run_d) / todos as f64)
        )),
        Row::new(
            "engine_long_list_ms",
            format!("{todos}-TODO run: /checkpoint list"),
            list_p50,
            "ms",
        )
        .note(format!(
            "{}; median of {}, max {} ms; {listed} checkpoints; engine.command incl. the actor's start (from the state the run's last actor left) and a CommandReceived append; after a restart (the state loaded from its newest snapshot): median {} ms of {}; LangGraph: 0.84 s",
            when(target_max(list_p50, LIST_TARGET_MS, "2 ms")),
            plan.engine_list_reps,
            num(list_max),
            num(median(&mut cold_ms)),
            cold_ms.len(),
        )),
        Row::new(
            "engine_long_projection_ms",
            format!("{todos}-TODO run: checkpoints from the projection"),
            state_p50 + walk_p50,
            "ms",
        )
        .note(format!(
            "engine.state(run, None) {} ms (of which the newest snapshot{}, read and decoded: {} ms; then {} events folded) + the list of {cps} checkpoints (with_abandoned, one walk) {} ms",
            num(state_p50),
            snap_seq.map_or(" (none)".to_owned(), |s| format!(" at seq {}", num(s as f64))),
            num(snap_p50),
            num(folded as f64),
            num(walk_p50),
        )),
        Row::new(
            "engine_long_restore_ms",
            format!("{todos}-TODO run: restore the middle checkpoint"),
            restore_p50,
            "ms",
        )
        .note(format!(
            "{}; median of {}, max {} ms; engine.restore({}, seq {}) until its reply; state_at(seq {}) alone {} ms; the rerun of the rest took {} ms; run ends at {} events",
            when(target_max(restore_p50, RESTORE_TARGET_MS, "5 ms")),
            plan.engine_restore_reps,
            num(restore_max),
            mid.checkpoint_id,
            mid.seq,
            mid.seq,
            num(at_mid_p50),
            num(median(&mut rerun_ms) - restore_p50),
            num((head_after.last_seq + 1) as f64),
        )),
    ])
}

/// The benchmark domain's workflow (the work the Restate and LangGraph comparisons run: three
/// mock agents with results of about 200 B and an answer of about 400 B), planned by its rules
/// from its query: runs one and many at a time, with what they store.
fn equal_work(rt: &Runtime, root: &Path, plan: &Plan) -> Result<Vec<Row>> {
    let dir = root.join("engine-equal");
    let engine = open_engine_with(rt, &dir, chronicle_bench::settings())?;
    let req = equal_work_req();
    let many = plan.engine_runs_many;
    let (mut one, mut n, sizes) = one_and_many(rt, &engine, &req, plan, "engine, equal work")?;
    close_engine(rt, engine);
    let runs_total = WARMUP_RUNS + one.runs + n.runs;
    let disk = disk_bytes(&dir);
    let stored = chronicle_engine::store::stored_record_bytes(&dir)?;
    plan.discard(&dir);
    let bytes_per_run = sizes.per_run(sizes.bytes);
    let disk_per_run = disk as f64 / runs_total as f64;
    Ok(vec![
        Row::new(
            "equal_runs_1",
            "equal work: full runs, 1 at a time",
            one.rate(),
            "runs/s",
        )
        .note(phase_note(&mut one)),
        Row::new(
            "equal_runs_n",
            format!("equal work: full runs, {many} at a time"),
            n.rate(),
            "runs/s",
        )
        .note(format!(
            "{}; {}",
            many_targets(&n),
            phase_note(&mut n)
        )),
        Row::new(
            "equal_bytes_per_run",
            "equal work: bytes stored per run (encoded records)",
            bytes_per_run / 1000.0,
            "KB",
        )
        .note(format!(
            "{} events and {} appends per run; largest: {}; stored compressed {} KB per run; sled on disk {} KB per run, {} ({} runs)",
            num(sizes.per_run(sizes.events)),
            num(sizes.per_run(sizes.appends)),
            sizes.top_kinds(),
            num(stored as f64 / runs_total as f64 / 1000.0),
            num(disk_per_run / 1000.0),
            target_max(disk_per_run, EQUAL_RUN_DISK_TARGET, "3 KB"),
            num(runs_total as f64),
        )),
    ])
}

pub(super) fn section(rt: &Runtime, root: &Path, plan: &Plan) -> Result<Vec<Row>> {
    append::settle();
    let mut rows = full_runs(rt, root, plan)?;
    rows.extend(equal_work(rt, root, plan)?);
    rows.extend(long_run(rt, root, plan)?);
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_has_exactly_the_asked_todos() {
        let c = run_config(HitlMode::None, 3);
        let steps = c.plan.unwrap();
        assert_eq!(steps.len(), 3);
        assert_eq!(
            steps
                .iter()
                .map(|s| s.agent_name.as_str())
                .collect::<Vec<_>>(),
            ["search_team", "analysis_team", "document_team"]
        );
        assert_eq!(c.max_retries, 0, "no evaluation retries add TODOs");
        assert_eq!(run_config(HitlMode::None, 200).plan.unwrap().len(), 200);
        assert!(LONG_TODOS_TARGETED <= LONG_MAX_TODOS as usize);
    }

    #[test]
    fn cpu_time_reads() {
        assert!(cpu_secs().is_some_and(|s| s >= 0.0));
    }
}
