//! The approvals projection: every approval of a run, over the whole log (all branches), with
//! status `pending | approved | rejected | edited | expired | cancelled`.

use std::collections::HashMap;

use chronicle_schemas::{Approval, ApprovalId, ApprovalStatus, Envelope, Event};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Approvals {
    /// In request order.
    pub list: Vec<Approval>,
    /// id → position in `list`, so a long run's replay does not scan the list per event. Not
    /// stored: rebuilt on the first change after a snapshot is decoded (until then lookups scan).
    #[serde(skip)]
    index: HashMap<ApprovalId, usize>,
}

/// Equality is the list's; the index is a cache of it.
impl PartialEq for Approvals {
    fn eq(&self, other: &Self) -> bool {
        self.list == other.list
    }
}

impl Approvals {
    pub fn get(&self, id: &ApprovalId) -> Option<&Approval> {
        if self.index.len() == self.list.len() {
            self.index.get(id).map(|&i| &self.list[i])
        } else {
            self.list.iter().find(|a| &a.approval_id == id)
        }
    }

    fn get_mut(&mut self, id: &ApprovalId) -> Option<&mut Approval> {
        self.reindex();
        self.index.get(id).map(|&i| &mut self.list[i])
    }

    fn reindex(&mut self) {
        if self.index.len() != self.list.len() {
            self.index = self
                .list
                .iter()
                .enumerate()
                .map(|(i, a)| (a.approval_id.clone(), i))
                .collect();
        }
    }

    /// The approval an `ApprovalRequested` makes, as this projection holds it for as long as it
    /// stays pending (only its decision, expiry or cancellation changes it, and each ends its
    /// wait): what a list of pending approvals needs without folding the whole run.
    pub fn requested(env: &Envelope) -> Option<Approval> {
        let mut one = Approvals::default();
        match env.event {
            Event::ApprovalRequested { .. } => one.apply(env),
            _ => return None,
        }
        one.list.pop()
    }

    pub fn pending(&self) -> impl Iterator<Item = &Approval> {
        self.list
            .iter()
            .filter(|a| a.status == ApprovalStatus::Pending)
    }

    pub(crate) fn apply(&mut self, env: &Envelope) {
        match &env.event {
            Event::ApprovalRequested {
                approval_id,
                subject,
                tool_name,
                args,
                preview,
                policy,
                message,
                expires_at,
                supersedes,
            } => {
                if let Some(old) = supersedes {
                    self.cancel(old, format!("superseded by {approval_id}"));
                }
                // Ids are unique by construction; a repeated id is ignored rather than
                // overwriting the first request (the first fact wins).
                self.reindex();
                if self.get(approval_id).is_none() {
                    self.index.insert(approval_id.clone(), self.list.len());
                    self.list.push(Approval {
                        approval_id: approval_id.clone(),
                        subject: Some(subject.clone()),
                        tool_name: tool_name.clone(),
                        request_args: args.clone(),
                        request_preview: preview.clone(),
                        policy: policy.clone(),
                        message: message.clone(),
                        created_at: env.at,
                        requested_seq: env.seq,
                        expires_at: *expires_at,
                        ..Approval::default()
                    });
                }
            }
            Event::ApprovalDecided {
                approval_id,
                decision,
                edited_args,
                decided_by,
                comment,
            } => {
                if let Some(a) = self.get_mut(approval_id)
                    && a.status == ApprovalStatus::Pending
                {
                    a.status = (*decision).into();
                    a.decision = Some(*decision);
                    a.edited_args = edited_args.clone();
                    a.effective_args =
                        decision.effective_args(edited_args.as_ref(), Some(&a.request_args));
                    a.decided_by = Some(decided_by.clone());
                    a.comment = comment.clone();
                    a.decided_at = Some(env.at);
                    a.decided_seq = Some(env.seq);
                }
            }
            Event::ApprovalExpired {
                approval_id,
                on_expiry,
            } => {
                if let Some(a) = self.get_mut(approval_id)
                    && a.status == ApprovalStatus::Pending
                {
                    a.status = ApprovalStatus::Expired;
                    a.cancel_reason = Some(format!("expired; on_expiry {}", on_expiry.as_str()));
                    a.decided_at = Some(env.at);
                    a.decided_seq = Some(env.seq);
                }
            }
            Event::RunRestored { checkpoint_id, .. } => {
                self.cancel_all_pending(&format!("superseded by the restore to {checkpoint_id}"));
            }
            e if e.is_terminal() => {
                self.cancel_all_pending(&format!("run ended ({})", e.kind()));
            }
            _ => {}
        }
    }

    fn cancel(&mut self, id: &ApprovalId, reason: String) {
        if let Some(a) = self.get_mut(id)
            && a.status == ApprovalStatus::Pending
        {
            a.status = ApprovalStatus::Cancelled;
            a.cancel_reason = Some(reason);
        }
    }

    fn cancel_all_pending(&mut self, reason: &str) {
        for a in self
            .list
            .iter_mut()
            .filter(|a| a.status == ApprovalStatus::Pending)
        {
            a.status = ApprovalStatus::Cancelled;
            a.cancel_reason = Some(reason.to_owned());
        }
    }
}
