//! A random mix of what the index takes in, written straight to a store: runs of three owners in
//! sessions of several runs (sub-agent runs among them), approvals requested and settled in
//! every way (approved, rejected, edited, expired, superseded) or left pending, memory saved and
//! deleted, restores, runs completed, failed and cancelled, and whole sessions deleted. The
//! index tests and the crash child share it.

use std::collections::HashMap;

use chronicle_engine::store::Store;
use chronicle_schemas::{
    Actor, ApprovalId, CheckpointId, Decision, Event, Memory, MemoryKind, ParentLink, RunId,
    SessionId, Subject, TodoId, ToolCallId,
};
use serde_json::json;

/// A small deterministic generator (the crash child has no `rand`).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

pub const OWNERS: [&str; 3] = ["alice", "bob", "carol"];
pub const USERS: [&str; 3] = ["u1", "u2", "u3"];

struct Live {
    next_seq: u64,
    pending: Vec<ApprovalId>,
    memories: Vec<String>,
}

/// What the workload has written and may still act on.
pub struct Workload {
    rng: Rng,
    live: HashMap<RunId, Live>,
    sessions: Vec<(String, Vec<RunId>)>,
    n: u64,
    pub runs: usize,
}

impl Workload {
    pub fn new(seed: u64) -> Self {
        Workload {
            rng: Rng::new(seed),
            live: HashMap::new(),
            sessions: Vec::new(),
            n: 0,
            runs: 0,
        }
    }

    fn next_id(&mut self) -> u64 {
        self.n += 1;
        self.n
    }

    fn any_live(&mut self) -> Option<RunId> {
        if self.live.is_empty() {
            return None;
        }
        let mut runs: Vec<RunId> = self.live.keys().copied().collect();
        runs.sort();
        Some(runs[self.rng.below(runs.len())])
    }

    /// Writes one random step; returns the events written (0 when it chose nothing to do).
    pub async fn step(&mut self, store: &Store) -> usize {
        let roll = self.rng.below(100);
        match (roll, self.any_live()) {
            (0..=24, _) | (_, None) => self.start(store).await,
            (25..=39, Some(run)) => self.request(store, run).await,
            (40..=51, Some(run)) => self.decide(store, run).await,
            (52..=61, Some(run)) => self.remember(store, run).await,
            (62..=65, Some(run)) => self.forget(store, run).await,
            (66..=67, Some(run)) => self.restore(store, run).await,
            (68..=93, Some(run)) => self.end(store, run).await,
            (_, Some(_)) => self.delete_session(store).await,
        }
    }

    async fn append(&mut self, store: &Store, run: RunId, events: Vec<Event>) -> usize {
        let n = events.len();
        let seq = self.live.get(&run).map_or(0, |l| l.next_seq);
        store
            .append(run, seq, events)
            .await
            .expect("the workload appends");
        if let Some(l) = self.live.get_mut(&run) {
            l.next_seq += n as u64;
        }
        n
    }

    async fn start(&mut self, store: &Store) -> usize {
        let run = RunId(uuid::Uuid::now_v7());
        let reuse = !self.sessions.is_empty() && self.rng.below(3) > 0;
        let session = match reuse {
            true => self.sessions[self.rng.below(self.sessions.len())].0.clone(),
            false => format!("s-{}", self.next_id()),
        };
        let parent = (self.rng.below(8) == 0)
            .then(|| self.any_live())
            .flatten()
            .map(|p| ParentLink {
                run_id: p,
                tool_call_id: ToolCallId::from("call"),
            });
        let owner = OWNERS[self.rng.below(OWNERS.len())];
        let user = (self.rng.below(4) > 0).then(|| USERS[self.rng.below(USERS.len())].to_owned());
        let started = Event::RunStarted {
            session_id: SessionId::from(session.as_str()),
            user_id: user,
            request_id: "req".into(),
            query: format!("question {}", self.n),
            config: Default::default(),
            parent,
            owner: Some(owner.into()),
            traceparent: None,
        };
        self.live.insert(
            run,
            Live {
                next_seq: 0,
                pending: Vec::new(),
                memories: Vec::new(),
            },
        );
        match self.sessions.iter_mut().find(|(s, _)| *s == session) {
            Some((_, runs)) => runs.push(run),
            None => self.sessions.push((session, vec![run])),
        }
        self.runs += 1;
        self.append(store, run, vec![started]).await
    }

    async fn request(&mut self, store: &Store, run: RunId) -> usize {
        let id = ApprovalId::from(format!("ap-{}", self.next_id()).as_str());
        // Now and then a request supersedes the newest one pending (which is cancelled).
        let supersedes = match self.rng.below(6) {
            0 => self.live.get_mut(&run).unwrap().pending.pop(),
            _ => None,
        };
        self.live.get_mut(&run).unwrap().pending.push(id.clone());
        let event = Event::ApprovalRequested {
            approval_id: id,
            subject: Subject::Todo {
                todo_id: TodoId::from("t1"),
            },
            tool_name: "search_team".into(),
            args: json!({"q": 1}),
            preview: json!(null),
            policy: "every_todo".into(),
            message: "may I?".into(),
            expires_at: None,
            supersedes,
        };
        self.append(store, run, vec![event]).await
    }

    async fn decide(&mut self, store: &Store, run: RunId) -> usize {
        let Some(id) = self.live.get_mut(&run).unwrap().pending.pop() else {
            return 0;
        };
        // Every way an approval settles: approved, rejected, edited, expired (and cancelled, by a
        // supersession, a restore or the run's end).
        let decided = |decision, edited_args| Event::ApprovalDecided {
            approval_id: id.clone(),
            decision,
            edited_args,
            decided_by: "alice".into(),
            comment: None,
        };
        let event = match self.rng.below(4) {
            0 => decided(Decision::Approve, None),
            1 => decided(Decision::Reject, None),
            2 => decided(Decision::Edit, Some(json!({"q": 2}))),
            _ => Event::ApprovalExpired {
                approval_id: id.clone(),
                on_expiry: Decision::Reject,
            },
        };
        self.append(store, run, vec![event]).await
    }

    async fn remember(&mut self, store: &Store, run: RunId) -> usize {
        let id = format!("mem_{}", self.next_id());
        self.live.get_mut(&run).unwrap().memories.push(id.clone());
        let kind = [MemoryKind::Preference, MemoryKind::Fact][self.rng.below(2)];
        let event = Event::MemorySaved {
            memory: Memory {
                memory_id: id,
                kind,
                key: ["deal_type", "district"][self.rng.below(2)].into(),
                value: json!(self.n),
                text: "remembered".into(),
                user_id: USERS[self.rng.below(USERS.len())].into(),
                run_id: run,
                saved_at: None,
            },
        };
        self.append(store, run, vec![event]).await
    }

    async fn forget(&mut self, store: &Store, run: RunId) -> usize {
        let Some(id) = self.live.get_mut(&run).unwrap().memories.pop() else {
            return 0;
        };
        let event = Event::MemoryDeleted {
            memory_id: id,
            by: Actor::user("alice"),
        };
        self.append(store, run, vec![event]).await
    }

    async fn restore(&mut self, store: &Store, run: RunId) -> usize {
        let last = self.live[&run].next_seq - 1;
        if last == 0 {
            return 0;
        }
        let to_seq = self.rng.below(last as usize) as u64;
        let event = Event::RunRestored {
            checkpoint_id: CheckpointId::from("cp"),
            to_seq,
            by: Actor::user("alice"),
        };
        // The approvals of the abandoned branch are no longer pending.
        self.live.get_mut(&run).unwrap().pending.clear();
        self.append(store, run, vec![event]).await
    }

    async fn end(&mut self, store: &Store, run: RunId) -> usize {
        let event = match self.rng.below(4) {
            0 => Event::RunFailed {
                error: "it broke".into(),
            },
            1 => Event::RunCancelled {
                by: Actor::user("bob"),
                reason: None,
            },
            _ => Event::RunCompleted {
                total_execution_time_ms: 12,
            },
        };
        let n = self.append(store, run, vec![event]).await;
        self.live.remove(&run);
        n
    }

    /// Ends every run still going.
    #[allow(dead_code)] // The crash child ends none.
    pub async fn end_all(&mut self, store: &Store) {
        let mut runs: Vec<RunId> = self.live.keys().copied().collect();
        runs.sort();
        for run in runs {
            let done = Event::RunCompleted {
                total_execution_time_ms: 1,
            };
            self.append(store, run, vec![done]).await;
            self.live.remove(&run);
        }
    }

    /// Gives every run of a session its tombstone (cancelling the live ones), the first last.
    async fn delete_session(&mut self, store: &Store) -> usize {
        let (session, runs) = self.sessions.remove(self.rng.below(self.sessions.len()));
        let mut n = 0;
        for run in runs.iter().rev() {
            let by = Actor::user("alice");
            let mut events = Vec::new();
            let seq = match self.live.remove(run) {
                Some(l) => {
                    events.push(Event::RunCancelled {
                        by: by.clone(),
                        reason: Some("the session was deleted".into()),
                    });
                    l.next_seq
                }
                None => match store.run_head(*run).unwrap() {
                    Some(h) => h.next_seq(),
                    None => continue,
                },
            };
            events.push(Event::SessionDeleted { by });
            n += events.len();
            store.append(*run, seq, events).await.unwrap();
        }
        let _ = session;
        n
    }
}
