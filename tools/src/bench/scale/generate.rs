//! The generator: a store of N runs written straight through the store, many appends in flight
//! so the writer group-commits, no engine per run. Each run is a copy of a template
//! ([`super::template`]) with fresh ids, appended as the engine appended it.
//!
//! Who and what: users belong to one owner each ([`OWNERS`] in turn), about one user per
//! [`RUNS_PER_USER`] runs; each user's sessions have 1 to 6 turns. A turn's ending follows its
//! index (see [`kind_of`]): mostly completed, some with decided approvals, a few failed or
//! cancelled, and a session's last turn now and then waiting for an approval or cut mid-run. One
//! completed turn in four saves a memory item, and every later turn of the same user loads them.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{Context, Result};
use chronicle_engine::store::Store;
use chronicle_schemas::{Event, Memory, MemoryKind, PriorTurn, RunId, SessionId, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::runtime::Runtime;
use tokio::sync::Mutex;

use super::template::{Kind, OWNERS, QUERIES, Slot, Template, Templates};
use crate::bench::progress;
use crate::bench::report::num;

/// About this many runs per user.
pub const RUNS_PER_USER: u64 = 25;
/// Users at least, however few the runs.
const USERS_MIN: u64 = 8;
/// Users written at once (each by one task, its sessions in order).
const WRITERS: usize = 128;
/// Old completed runs kept for the time-travel and restore probes.
const PROBES: usize = 20;
/// The most memory items a turn loads (the engine's default `memories_loaded_max`).
const MEMORIES_LOADED_MAX: usize = 50;

/// One session to write: its index, its first run's index and its turns.
#[derive(Clone, Copy, Debug)]
struct SessionPlan {
    index: u64,
    first_run: u64,
    turns: u64,
}

/// How turn `run` (of session `session`; `last` when it is the session's last) ends: 4% fail,
/// 2% are cancelled, 10% ask approvals (a third of them with a rejection), and about one
/// session in 150 ends waiting for an approval and one in 1,500 cut mid-run.
pub fn kind_of(run: u64, session: u64, last: bool) -> Kind {
    if last && session % 1500 == 5 {
        Kind::Cut
    } else if last && session % 150 == 2 {
        Kind::Pending
    } else if run % 25 == 3 {
        Kind::Failed
    } else if run % 50 == 11 {
        Kind::Cancelled
    } else if run % 30 == 5 {
        Kind::Rejected
    } else if run % 10 == 5 {
        Kind::Approved
    } else {
        Kind::Done
    }
}

/// The sessions of `runs` runs, by user.
fn layout(runs: u64) -> Vec<Vec<SessionPlan>> {
    let users = (runs / RUNS_PER_USER).max(USERS_MIN);
    let mut by_user = vec![Vec::new(); users as usize];
    let (mut first_run, mut index) = (0, 0);
    while first_run < runs {
        let turns = (1 + index % 6).min(runs - first_run);
        by_user[(index % users) as usize].push(SessionPlan {
            index,
            first_run,
            turns,
        });
        first_run += turns;
        index += 1;
    }
    by_user
}

/// The user's name.
pub fn user_name(user: usize) -> String {
    format!("user_{user:06}")
}

/// An old completed run: the time-travel and restore probes use it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Probe {
    pub run_id: RunId,
    /// A seq in the middle of the run.
    pub seq: u64,
    pub checkpoint: String,
}

/// What the generator wrote.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Generated {
    pub runs: u64,
    pub sessions: u64,
    pub users: u64,
    pub events: u64,
    pub memories: u64,
    /// Runs per ending, by name.
    pub kinds: Vec<(String, u64)>,
    pub secs: f64,
    /// Building its index afterwards.
    #[serde(default)]
    pub index_secs: f64,
    pub probes: Vec<Probe>,
    /// A user with memory items, and its owner.
    pub memory_user: String,
}

#[derive(Default)]
struct Counters {
    runs: AtomicU64,
    events: AtomicU64,
    memories: AtomicU64,
    kinds: [AtomicU64; Kind::ALL.len()],
}

/// Writes `runs` runs into a new store in `dir`.
pub fn generate(
    rt: &Runtime,
    dir: &Path,
    templates: Arc<Templates>,
    runs: u64,
) -> Result<Generated> {
    let store = super::super::bulk_store(dir)?;
    let by_user = Arc::new(layout(runs));
    let sessions = by_user.iter().map(Vec::len).sum::<usize>() as u64;
    let users = by_user.len() as u64;
    let counters = Arc::new(Counters::default());
    let probes = Arc::new(Mutex::new(Vec::new()));
    let next_user = Arc::new(AtomicUsize::new(0));
    let t = Instant::now();
    let result: Result<()> = rt.block_on(async {
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..WRITERS {
            let w = Writer {
                store: store.clone(),
                templates: templates.clone(),
                counters: counters.clone(),
                probes: probes.clone(),
            };
            let (by_user, next_user) = (by_user.clone(), next_user.clone());
            tasks.spawn(async move {
                loop {
                    let user = next_user.fetch_add(1, Ordering::Relaxed);
                    let Some(sessions) = by_user.get(user) else {
                        return anyhow::Ok(());
                    };
                    w.user(user, sessions).await?;
                }
            });
        }
        let reporter = report_progress(counters.clone(), runs, t);
        let mut first_error = None;
        while let Some(joined) = tasks.join_next().await {
            if let Err(e) = joined.context("a generator task panicked").and_then(|r| r) {
                first_error.get_or_insert(e);
                tasks.abort_all();
            }
        }
        reporter.abort();
        first_error.map_or(Ok(()), Err)
    });
    result?;
    store.flush().context("flushing the generated store")?;
    let secs = t.elapsed().as_secs_f64();
    // A server that wrote these runs would have indexed them as it went: build the index now,
    // timed on its own (what opening a store written before the index costs, once).
    let t = Instant::now();
    chronicle_engine::index::catch_up(&store).context("indexing the generated store")?;
    store.flush().context("flushing the index")?;
    let index_secs = t.elapsed().as_secs_f64();
    drop(store);
    let mut probes = Arc::try_unwrap(probes)
        .map_err(|_| anyhow::anyhow!("the probes are still shared"))?
        .into_inner();
    probes.sort_by_key(|(user, _)| *user);
    let c = &counters;
    Ok(Generated {
        runs: c.runs.load(Ordering::Relaxed),
        sessions,
        users,
        events: c.events.load(Ordering::Relaxed),
        memories: c.memories.load(Ordering::Relaxed),
        kinds: Kind::ALL
            .iter()
            .zip(&c.kinds)
            .map(|(k, n)| (format!("{k:?}"), n.load(Ordering::Relaxed)))
            .collect(),
        secs,
        index_secs,
        probes: probes.into_iter().map(|(_, p)| p).collect(),
        memory_user: user_name(1),
    })
}

/// A progress line every 10% of a large store.
fn report_progress(c: Arc<Counters>, runs: u64, t: Instant) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if runs < 200_000 {
            return;
        }
        let step = runs / 10;
        let mut next = step;
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            let done = c.runs.load(Ordering::Relaxed);
            if done >= next {
                progress(&format!(
                    "  {} / {} runs ({} runs/s)",
                    num(done as f64),
                    num(runs as f64),
                    num(done as f64 / t.elapsed().as_secs_f64())
                ));
                next = done - done % step + step;
            }
        }
    })
}

/// One generator task's handles.
struct Writer {
    store: Store,
    templates: Arc<Templates>,
    counters: Arc<Counters>,
    probes: Arc<Mutex<Vec<(usize, Probe)>>>,
}

/// What the turns of one user carry from one to the next.
struct UserState {
    owner: usize,
    name: String,
    memories: Vec<chronicle_schemas::Memory>,
}

impl Writer {
    /// Writes every session of `user`, in order (its memory goes from one turn to the next).
    async fn user(&self, user: usize, sessions: &[SessionPlan]) -> Result<()> {
        let mut u = UserState {
            owner: user % OWNERS.len(),
            name: user_name(user),
            memories: Vec::new(),
        };
        for plan in sessions {
            let session = SessionId(uuid::Uuid::new_v4().to_string());
            let mut prior: Vec<PriorTurn> = Vec::new();
            for turn in 0..plan.turns {
                let i = plan.first_run + turn;
                let kind = kind_of(i, plan.index, turn + 1 == plan.turns);
                let tpl = self
                    .templates
                    .get(u.owner, (i % QUERIES.len() as u64) as usize, kind);
                let save =
                    matches!(kind, Kind::Done | Kind::Approved | Kind::Rejected) && i % 4 == 1;
                let (run, last_seq) = self.run(tpl, &session, &mut u, &prior, save).await?;
                prior.push(PriorTurn {
                    run_id: run,
                    seq: last_seq,
                    query: tpl.query.clone(),
                    answer: tpl.answer.clone(),
                    status: tpl.status,
                });
                let c = &self.counters;
                c.runs.fetch_add(1, Ordering::Relaxed);
                c.events.fetch_add(last_seq + 1, Ordering::Relaxed);
                c.kinds[Kind::ALL.iter().position(|k| *k == kind).expect("listed")]
                    .fetch_add(1, Ordering::Relaxed);
                if kind == Kind::Done && turn == 0 && user < PROBES {
                    let mut probes = self.probes.lock().await;
                    if !probes.iter().any(|(x, _)| *x == user) {
                        probes.push((
                            user,
                            Probe {
                                run_id: run,
                                seq: last_seq / 2,
                                checkpoint: tpl
                                    .checkpoint
                                    .as_ref()
                                    .map(|c| c.0.clone())
                                    .unwrap_or_default(),
                            },
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Appends one copy of `tpl`, append by append. Returns its id and last seq.
    async fn run(
        &self,
        tpl: &Template,
        session: &SessionId,
        u: &mut UserState,
        prior: &[PriorTurn],
        save: bool,
    ) -> Result<(RunId, u64)> {
        let run = RunId(uuid::Uuid::now_v7());
        let approvals: Vec<(&str, String)> = tpl
            .approvals
            .iter()
            .map(|a| (a.as_str(), uuid::Uuid::new_v4().to_string()))
            .collect();
        let mut turns_max = 0usize;
        let mut seq = 0u64;
        for group in &tpl.groups {
            let mut events = Vec::with_capacity(group.len() + 2);
            for slot in group {
                match slot {
                    Slot::Same(e) => events.push(e.clone()),
                    Slot::Started(e) => {
                        let mut e = e.clone();
                        if let Event::RunStarted {
                            session_id,
                            user_id,
                            config,
                            ..
                        } = &mut e
                        {
                            session_id.clone_from(session);
                            *user_id = Some(u.name.clone());
                            turns_max = config.context.turns_max as usize;
                        }
                        events.push(e);
                    }
                    Slot::Context => {
                        if !prior.is_empty() && turns_max > 0 {
                            let kept = prior.len().min(turns_max);
                            events.push(Event::SessionContextLoaded {
                                turns: prior[prior.len() - kept..].to_vec(),
                                omitted: (prior.len() - kept) as u32,
                            });
                        }
                        if !u.memories.is_empty() {
                            let from = u.memories.len().saturating_sub(MEMORIES_LOADED_MAX);
                            events.push(Event::MemoryLoaded {
                                user_id: u.name.clone(),
                                memories: u.memories[from..].to_vec(),
                            });
                        }
                    }
                    Slot::Answer(e) => {
                        events.push(e.clone());
                        if save {
                            let m = memory_item(run, &u.name, u.memories.len());
                            u.memories.push(m.clone());
                            self.counters.memories.fetch_add(1, Ordering::Relaxed);
                            events.push(Event::MemorySaved { memory: m });
                        }
                    }
                    Slot::Approvals(text) => {
                        let mut text = text.clone();
                        for (old, new) in &approvals {
                            text = text.replace(old, new);
                        }
                        events.push(serde_json::from_str(&text)?);
                    }
                }
            }
            let n = events.len() as u64;
            self.store
                .append(run, seq, events)
                .await
                .with_context(|| format!("appending to generated run {run} at seq {seq}"))?;
            seq += n;
        }
        Ok((run, seq - 1))
    }
}

/// The `n`th memory item of a user, saved by `run`: preferences and facts in turn.
fn memory_item(run: RunId, user: &str, n: usize) -> Memory {
    let districts = ["gangnam", "seocho", "songpa", "mapo"];
    let (kind, key, value, text) = if n.is_multiple_of(2) {
        let d = districts[n / 2 % districts.len()];
        (
            MemoryKind::Preference,
            "district".to_owned(),
            json!(d),
            format!("prefers listings in {d}"),
        )
    } else {
        (
            MemoryKind::Fact,
            format!("budget_{n}"),
            json!({"max_krw": 900_000_000u64 + n as u64 * 10_000_000}),
            format!("budget up to {} million won", 900 + n * 10),
        )
    };
    Memory {
        memory_id: format!("mem_{}", uuid::Uuid::new_v4().simple()),
        kind,
        key,
        value,
        text,
        user_id: user.to_owned(),
        run_id: run,
        saved_at: Some(Timestamp(chrono::Utc::now().timestamp_micros())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_covers_every_run_once_in_sessions_of_one_to_six_turns() {
        for runs in [1, 7, 200, 10_001] {
            let by_user = layout(runs);
            let mut seen = vec![false; runs as usize];
            for s in by_user.iter().flatten() {
                assert!((1..=6).contains(&s.turns), "{s:?}");
                for i in s.first_run..s.first_run + s.turns {
                    assert!(!seen[i as usize], "run {i} twice");
                    seen[i as usize] = true;
                }
            }
            assert!(seen.iter().all(|s| *s), "{runs} runs");
        }
    }

    #[test]
    fn two_hundred_runs_hold_every_ending() {
        let mut kinds = std::collections::HashSet::new();
        for s in layout(200).iter().flatten() {
            for t in 0..s.turns {
                kinds.insert(kind_of(s.first_run + t, s.index, t + 1 == s.turns));
            }
        }
        assert_eq!(kinds.len(), Kind::ALL.len(), "{kinds:?}");
    }
}
