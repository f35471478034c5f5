//! What an event looks like on the streams that send it (SSE and the WebSocket): its `data`
//! object, with what clients need of approval events ([`Enricher`]), and whether it lies on a
//! branch a restore abandoned ([`BranchMarks`]).

use std::collections::HashMap;

use chronicle_engine::Engine;
use chronicle_projections::{Branches, restore_of};
use chronicle_schemas::{ApprovalId, Envelope, Event, RunId};
use chronicle_wire::{EventData, names};
use serde_json::{Value, json};

use crate::error::ApiResult;

/// Builds the `data` object of each event a stream sends: [`names::event_data`] plus what a
/// client needs of approval events without reading the run — `tool` and `approval_required` on
/// `approval.requested`; `tool` and `effective_args` on `approval.decided`. One per stream: it
/// remembers the requests it has sent, so a decision's effective args come from
/// `Decision::effective_args` without touching the store; only a decision whose request came
/// before the stream started costs a state read.
pub(crate) struct Enricher {
    engine: Engine,
    /// Requests seen on this stream and not yet decided: `(run, approval) → (tool, args)`.
    requests: HashMap<(RunId, ApprovalId), (String, Value)>,
}

/// Undecided requests one stream remembers; beyond this it forgets them all (they are then read
/// from the state when decided).
const ENRICHER_REQUESTS_MAX: usize = 4096;

impl Enricher {
    pub(crate) fn new(engine: Engine) -> Self {
        Self {
            engine,
            requests: HashMap::new(),
        }
    }

    /// May `who` see the events of `run`? (An admin sees every run; nobody a deleted
    /// session's.)
    pub(crate) fn visible_to(&self, who: &chronicle_engine::Principal, run: RunId) -> bool {
        self.engine.authorize(who, run).is_ok()
    }

    pub(crate) fn data(&mut self, env: &Envelope) -> EventData {
        let mut data = names::event_data(env);
        match &env.event {
            Event::ApprovalRequested {
                approval_id,
                tool_name,
                args,
                ..
            } => {
                data.content["tool"] = json!(tool_name);
                data.content["approval_required"] = json!(true);
                if self.requests.len() >= ENRICHER_REQUESTS_MAX {
                    self.requests.clear();
                }
                self.requests.insert(
                    (env.run_id, approval_id.clone()),
                    (tool_name.clone(), args.clone()),
                );
            }
            Event::ApprovalDecided {
                approval_id,
                decision,
                edited_args,
                ..
            } => {
                let (tool, requested) = match self
                    .requests
                    .remove(&(env.run_id, approval_id.clone()))
                {
                    Some((tool, args)) => (Some(tool), Some(args)),
                    None => {
                        let a = self
                            .engine
                            .state(env.run_id, Some(env.seq))
                            .inspect_err(|e| tracing::warn!(error = %e, run = %env.run_id, "no state for effective_args"))
                            .ok()
                            .and_then(|s| s.approvals.get(approval_id).map(|a| (a.tool_name.clone(), a.request_args.clone())));
                        a.map_or((None, None), |(t, r)| (Some(t), Some(r)))
                    }
                };
                data.content["tool"] = json!(tool);
                data.content["effective_args"] =
                    json!(decision.effective_args(edited_args.as_ref(), requested.as_ref()));
            }
            _ => {}
        }
        data
    }
}

/// Which events of one run's stream lie on a branch a restore abandoned. It knows the run's
/// restores from where the stream starts up to the run's head when the stream opened (it reads
/// none when the run was never restored), and then those the stream itself sends; events newer
/// than the head at the opening are on the live branch as far as anyone knows when they are sent.
/// A terminal event is checked against the log once more before it may end a stream (only the
/// events after it can leave it), so a restore appended while the stream was catching up does not
/// leave the client at an old `run.end`.
pub(crate) struct BranchMarks {
    engine: Engine,
    run: RunId,
    /// Restores at seqs from the stream's start on: seq → to_seq.
    restores: HashMap<u64, u64>,
    branches: Branches,
}

impl BranchMarks {
    /// For a stream of `run` from seq `from` (restores before it leave only seqs before it).
    pub(crate) fn open(engine: &Engine, run: RunId, from: u64) -> ApiResult<Self> {
        let mut marks = Self {
            engine: engine.clone(),
            run,
            restores: HashMap::new(),
            branches: Branches::default(),
        };
        // The number of restores so far is in the state (kept current by the engine): a run
        // that was never restored costs no read of its log.
        if engine.state(run, None)?.checkpoints.branch > 0 {
            marks.read_restores(from)?;
        }
        Ok(marks)
    }

    /// Reads the run's restores from seq `from` up to its head now, and what they leave.
    fn read_restores(&mut self, from: u64) -> ApiResult<()> {
        let Some(head) = self.engine.store().run_head(self.run)? else {
            return Ok(());
        };
        let mut found = false;
        if from <= head.last_seq {
            for env in self.engine.store().read_run(self.run, from, head.last_seq) {
                let env = env?;
                if let Some(to_seq) = restore_of(&env) {
                    self.restores.insert(env.seq, to_seq);
                    found = true;
                }
            }
        }
        if found {
            self.branches = Branches::new(head.last_seq, &self.restores);
        }
        Ok(())
    }

    /// Whether `env` (the stream's next event of this run) lies on an abandoned branch.
    pub(crate) fn abandoned(&mut self, env: &Envelope) -> bool {
        if let Some(to_seq) = restore_of(env) {
            // It leaves only seqs the stream has sent; kept for a later re-check.
            self.restores.insert(env.seq, to_seq);
        }
        if env.event.is_terminal()
            && !self.branches.is_abandoned(env.seq)
            && let Err(e) = self.read_restores(env.seq + 1)
        {
            // Ending the stream here is final: make sure no restore has left this end.
            tracing::warn!(error = %e.message, run = %self.run, "could not re-read the run's restores");
        }
        self.branches.is_abandoned(env.seq)
    }
}
