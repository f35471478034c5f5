//! A gated tool call over the API: a real server, a real SSE client. An `edit_file` call waits for
//! a human, who approves it with edited args over REST; the stream shows the whole sequence
//! (snapshot), and the file holds the edited content.

use std::time::Duration;

use chronicle_api::{ApiConfig, Tokens};
use chronicle_client::EventsFrom;
use chronicle_engine::Settings;
use chronicle_schemas::{ApprovalId, HitlMode};
use chronicle_wire::{DecisionRequest, RunRequest};
use serde_json::json;

use crate::api_support::server_settings;
use crate::tool_agents::{self, runner_plan};

const GUARD: Duration = Duration::from_secs(20);

#[tokio::test]
async fn gated_edit_file_approved_with_edited_args_over_sse() {
    let settings = Settings {
        registry: tool_agents::registry(None, false),
        ..chronicle_realestate::settings()
    };
    let srv = server_settings(Tokens::default(), settings, ApiConfig::default()).await;
    let ws = srv
        .engine
        .store()
        .dir()
        .unwrap()
        .join("workspaces/notes-session");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("notes.md"), "# Notes\nstatus: draft\n").unwrap();

    let edit = json!({"tool": "edit_file", "args": {
        "file_path": "/workspace/notes.md", "old_string": "draft", "new_string": "final"
    }});
    let req = RunRequest {
        session_id: Some("notes-session".into()),
        hitl: Some(HitlMode::Tools),
        plan: Some(
            runner_plan(json!([edit]))
                .into_iter()
                .map(Into::into)
                .collect(),
        ),
        ..RunRequest::new("finish the notes")
    };
    let run = srv.client.start_run(&req).await.unwrap().run_id;
    let mut events = srv
        .client
        .run_events(run, EventsFrom::default())
        .await
        .unwrap();

    let mut seen = Vec::new();
    loop {
        let e = tokio::time::timeout(GUARD, events.next())
            .await
            .expect("stream stalled")
            .expect("stream ended early")
            .unwrap();
        let name = e.name.clone();
        let c = &e.data.content;
        seen.push(match name.as_str() {
            "tool.requested" => json!({"event": name, "tool": c["tool"], "args": c["args"], "index": c["index"]}),
            "approval.requested" => {
                assert_eq!(c["approval_required"], true);
                let approval_id = c["approval_id"].as_str().unwrap().to_owned();
                assert_eq!(std::fs::read_to_string(ws.join("notes.md")).unwrap(), "# Notes\nstatus: draft\n");
                let edited = DecisionRequest::edit(json!({
                    "file_path": "/workspace/notes.md", "old_string": "draft", "new_string": "final (edited)"
                }));
                srv.client
                    .decide(run, &ApprovalId(approval_id), &edited)
                    .await
                    .unwrap();
                json!({"event": name, "tool": c["tool"], "policy": c["policy"], "preview": {
                    "file_path": c["preview"]["file_path"],
                    "line_count": c["preview"]["line_count"],
                    "diff": c["preview"]["diff"],
                }})
            }
            "approval.decided" => json!({"event": name, "decision": c["decision"], "effective_args": c["effective_args"]}),
            "tool.completed" => json!({"event": name, "output": c["output"], "error": c["error"]}),
            _ => json!({"event": name}),
        });
        if name == "run.end" || name == "run.error" {
            break;
        }
    }
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.md")).unwrap(),
        "# Notes\nstatus: final (edited)\n"
    );
    insta::assert_json_snapshot!("sse_gated_edit_file", seen);
    srv.stop().await;
}
