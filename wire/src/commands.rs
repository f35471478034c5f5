//! What a slash command answers (`POST .../commands`, `/chat`, the WebSocket, the CLI): one
//! variant per reply shape. A refused command is an answer too: `{error, help}`.

use chronicle_schemas::{ApprovalId, CheckpointId, SupervisorTodo, TodoId, TodoStatus};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::tag;
use crate::{CheckpointEntry, SubRun, TodoSummary};

/// The reply of one slash command.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum CommandOutcome {
    /// `/todos`.
    Todos(TodosReply),
    /// `/todo approve [id]`: one approval.
    Approved(Approved),
    /// `/todo approve all` with several pending.
    ApprovedAll(ApprovedAll),
    /// `/todo reject`.
    Rejected(Rejected),
    /// `/todo skip`.
    Skipped(Skipped),
    /// `/todo add` (boxed: a whole TODO is large beside the other replies).
    Added(Box<Added>),
    /// `/todo update`.
    Updated(Updated),
    /// `/checkpoint list`.
    CheckpointList { checkpoints: Vec<CheckpointEntry> },
    /// `/checkpoint restore` (and `POST .../checkpoints/{id}/restore`).
    Restored(Restored),
    /// `/help`.
    Help { help: String },
    /// A command that was refused (bad grammar, unknown id, illegal transition), with the help.
    Refused { error: String, help: String },
}

/// `/todos`: the TODO list as the run stands.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TodosReply {
    pub todos: Vec<SupervisorTodo>,
    pub summary: TodoSummary,
    pub current_todo_id: Option<TodoId>,
    /// The head of the checkpoint tree.
    pub checkpoint_id: Option<CheckpointId>,
    pub pending_approval_ids: Vec<ApprovalId>,
    pub sub_runs: Vec<SubRun>,
}

/// One approval given: `{status: "resumed", todo_id, approval_id, message}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Approved {
    pub status: tag::Resumed,
    pub todo_id: Option<TodoId>,
    pub approval_id: ApprovalId,
    pub message: String,
}

/// Several approvals given at once: `{status: "resumed", approved: [...]}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ApprovedAll {
    pub status: tag::Resumed,
    pub approved: Vec<Approved>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Rejected {
    pub status: tag::Rejected,
    pub todo_id: TodoId,
    pub approval_id: ApprovalId,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Skipped {
    pub status: tag::Skipped,
    pub todo_id: TodoId,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Added {
    pub status: tag::Added,
    pub todo: SupervisorTodo,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Updated {
    pub status: tag::Updated,
    pub todo_id: TodoId,
    pub new_status: TodoStatus,
    pub message: String,
}

/// A restore: where the run went back to and its TODOs there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Restored {
    pub status: tag::Restored,
    pub checkpoint_id: CheckpointId,
    pub to_seq: u64,
    pub current_todo_id: Option<TodoId>,
    pub summary: TodoSummary,
    pub message: String,
}

impl CommandOutcome {
    /// The refusal's message, when the command was refused.
    pub fn refusal(&self) -> Option<&str> {
        match self {
            CommandOutcome::Refused { error, .. } => Some(error),
            _ => None,
        }
    }

    /// Reads a reply, telling the shapes apart by `status` or, without one, by their fields (so a
    /// reply that fits none is named, instead of "no variant matched").
    pub fn from_json(v: Value) -> Result<Self, serde_json::Error> {
        use serde::de::Error;
        use serde_json::from_value;
        let status = v.get("status").and_then(Value::as_str).map(str::to_owned);
        let has = |k: &str| v.get(k).is_some();
        Ok(match status.as_deref() {
            Some("resumed") if has("approved") => CommandOutcome::ApprovedAll(from_value(v)?),
            Some("resumed") => CommandOutcome::Approved(from_value(v)?),
            Some("rejected") => CommandOutcome::Rejected(from_value(v)?),
            Some("skipped") => CommandOutcome::Skipped(from_value(v)?),
            Some("added") => CommandOutcome::Added(Box::new(from_value(v)?)),
            Some("updated") => CommandOutcome::Updated(from_value(v)?),
            Some("restored") => CommandOutcome::Restored(from_value(v)?),
            Some(other) => {
                return Err(serde_json::Error::custom(format!(
                    "a command reply with an unknown status {other:?}"
                )));
            }
            None if has("error") => {
                let r: RefusedBody = from_value(v)?;
                CommandOutcome::Refused {
                    error: r.error,
                    help: r.help,
                }
            }
            None if has("todos") => CommandOutcome::Todos(from_value(v)?),
            None if has("checkpoints") => {
                let c: CheckpointsBody = from_value(v)?;
                CommandOutcome::CheckpointList {
                    checkpoints: c.checkpoints,
                }
            }
            None if has("help") => {
                let h: HelpBody = from_value(v)?;
                CommandOutcome::Help { help: h.help }
            }
            None => {
                return Err(serde_json::Error::custom(format!(
                    "not a command reply: {v}"
                )));
            }
        })
    }
}

impl<'de> Deserialize<'de> for CommandOutcome {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        CommandOutcome::from_json(Value::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

#[derive(Deserialize)]
struct RefusedBody {
    error: String,
    #[serde(default)]
    help: String,
}

#[derive(Deserialize)]
struct CheckpointsBody {
    checkpoints: Vec<CheckpointEntry>,
}

#[derive(Deserialize)]
struct HelpBody {
    help: String,
}

#[cfg(test)]
mod tests {
    use chronicle_schemas::{RunId, Timestamp};
    use serde_json::json;

    use super::*;

    fn round_trip(outcome: CommandOutcome, want: Value) {
        let got = serde_json::to_value(&outcome).unwrap();
        assert_eq!(got, want);
        let back: CommandOutcome = serde_json::from_value(got).unwrap();
        assert_eq!(back, outcome);
    }

    fn summary() -> (TodoSummary, Value) {
        (
            TodoSummary {
                total: 1,
                completed: 1,
                ..TodoSummary::default()
            },
            json!({"total": 1, "pending": 0, "in_progress": 0, "completed": 1, "failed": 0,
                   "skipped": 0, "blocked": 0, "waiting_approval": 0}),
        )
    }

    fn approved(todo: &str, apr: &str) -> (Approved, Value) {
        (
            Approved {
                status: tag::Resumed::Resumed,
                todo_id: Some(todo.into()),
                approval_id: apr.into(),
                message: format!("TODO {todo} 실행이 승인되었습니다."),
            },
            json!({"status": "resumed", "todo_id": todo, "approval_id": apr,
                   "message": format!("TODO {todo} 실행이 승인되었습니다.")}),
        )
    }

    #[test]
    fn every_reply_shape_round_trips() {
        let (sum, sum_json) = summary();
        round_trip(
            CommandOutcome::Todos(TodosReply {
                todos: vec![],
                summary: sum,
                current_todo_id: Some("todo_001".into()),
                checkpoint_id: Some("cp_004".into()),
                pending_approval_ids: vec!["apr_001".into()],
                sub_runs: vec![],
            }),
            json!({"todos": [], "summary": sum_json, "current_todo_id": "todo_001",
                   "checkpoint_id": "cp_004", "pending_approval_ids": ["apr_001"], "sub_runs": []}),
        );
        let (one, one_json) = approved("todo_001", "apr_001");
        round_trip(CommandOutcome::Approved(one.clone()), one_json.clone());
        let (two, two_json) = approved("todo_002", "apr_002");
        round_trip(
            CommandOutcome::ApprovedAll(ApprovedAll {
                status: tag::Resumed::Resumed,
                approved: vec![one, two],
            }),
            json!({"status": "resumed", "approved": [one_json, two_json]}),
        );
        round_trip(
            CommandOutcome::Rejected(Rejected {
                status: tag::Rejected::Rejected,
                todo_id: "todo_002".into(),
                approval_id: "apr_002".into(),
                message: "TODO todo_002가 거부되었습니다. (too expensive)".into(),
            }),
            json!({"status": "rejected", "todo_id": "todo_002", "approval_id": "apr_002",
                   "message": "TODO todo_002가 거부되었습니다. (too expensive)"}),
        );
        round_trip(
            CommandOutcome::Skipped(Skipped {
                status: tag::Skipped::Skipped,
                todo_id: "todo_002".into(),
                message: "m".into(),
            }),
            json!({"status": "skipped", "todo_id": "todo_002", "message": "m"}),
        );
        let todo = SupervisorTodo {
            id: "todo_003".into(),
            agent_name: "document_team".into(),
            created_at: Timestamp(0),
            ..SupervisorTodo::default()
        };
        round_trip(
            CommandOutcome::Added(Box::new(Added {
                status: tag::Added::Added,
                todo: todo.clone(),
                message: "새 TODO todo_003가 추가되었습니다.".into(),
            })),
            json!({"status": "added", "todo": serde_json::to_value(&todo).unwrap(),
                   "message": "새 TODO todo_003가 추가되었습니다."}),
        );
        round_trip(
            CommandOutcome::Updated(Updated {
                status: tag::Updated::Updated,
                todo_id: "todo_003".into(),
                new_status: TodoStatus::Skipped,
                message: "m".into(),
            }),
            json!({"status": "updated", "todo_id": "todo_003", "new_status": "skipped", "message": "m"}),
        );
        let list = crate::CheckpointList::new(RunId::from_u128(1), None, []);
        round_trip(
            CommandOutcome::CheckpointList {
                checkpoints: list.checkpoints,
            },
            json!({"checkpoints": []}),
        );
        let (sum, sum_json) = summary();
        round_trip(
            CommandOutcome::Restored(Restored {
                status: tag::Restored::Restored,
                checkpoint_id: "cp_004".into(),
                to_seq: 17,
                current_todo_id: None,
                summary: sum,
                message: "checkpoint cp_004 시점으로 복원되었습니다.".into(),
            }),
            json!({"status": "restored", "checkpoint_id": "cp_004", "to_seq": 17,
                   "current_todo_id": null, "summary": sum_json,
                   "message": "checkpoint cp_004 시점으로 복원되었습니다."}),
        );
        round_trip(
            CommandOutcome::Help { help: "h".into() },
            json!({"help": "h"}),
        );
        let refused = CommandOutcome::Refused {
            error: "Unknown command".into(),
            help: "h".into(),
        };
        assert_eq!(refused.refusal(), Some("Unknown command"));
        round_trip(refused, json!({"error": "Unknown command", "help": "h"}));
    }

    #[test]
    fn replies_that_fit_no_shape_are_named() {
        let e =
            serde_json::from_value::<CommandOutcome>(json!({"status": "exploded"})).unwrap_err();
        assert!(e.to_string().contains("unknown status \"exploded\""), "{e}");
        let e = serde_json::from_value::<CommandOutcome>(json!({"x": 1})).unwrap_err();
        assert!(e.to_string().contains("not a command reply"), "{e}");
        let e =
            serde_json::from_value::<CommandOutcome>(json!({"status": "rejected"})).unwrap_err();
        assert!(e.to_string().contains("missing field"), "{e}");
    }
}
