//! Deadlines: approvals that expire (the policy's `on_expiry` applies) and the run timeout.

use chronicle_schemas::{Actor, Approval, Decision, Event, ExpiryAction, Timestamp};

use super::{RunActor, now};
use crate::Result;

impl RunActor {
    /// When the run times out (a little after, so the step that fails it sees it past).
    pub(super) fn run_deadline(&self) -> Option<Timestamp> {
        let s = &self.state().supervisor;
        let us =
            i64::try_from(s.config.limits.run_timeout_ms.saturating_mul(1000)).unwrap_or(i64::MAX);
        s.start_time
            .map(|t| Timestamp(t.as_micros().saturating_add(us).saturating_add(1000)))
    }

    pub(super) fn next_expiry(&self) -> Option<Timestamp> {
        self.state()
            .approvals
            .pending()
            .filter_map(|a| a.expires_at)
            .min()
    }

    pub(super) async fn expire_due(&mut self) -> Result<()> {
        let now = now();
        let on_expiry = self.state().supervisor.config.on_expiry;
        let due: Vec<Approval> = self
            .state()
            .approvals
            .pending()
            .filter(|a| a.expires_at.is_some_and(|t| t <= now))
            .cloned()
            .collect();
        if due.is_empty() {
            return Ok(());
        }
        let decision = match on_expiry {
            ExpiryAction::Reject => Decision::Reject,
            ExpiryAction::Approve => Decision::Approve,
        };
        let mut ev = Vec::new();
        for a in due {
            ev.push(Event::ApprovalExpired {
                approval_id: a.approval_id.clone(),
                on_expiry: decision,
            });
            if on_expiry == ExpiryAction::Reject {
                let reason = format!("approval {} expired", a.approval_id);
                ev.extend(self.skip_waiting(&a, reason, Actor::Engine));
            }
        }
        self.append(ev).await.map(drop)
    }
}
