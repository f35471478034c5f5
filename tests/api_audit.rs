//! Approvals and audit through the real HTTP API: principals named by their tokens (never by the
//! body), the approvals inbox across runs, the audit export (JSON Lines and CSV) whose rows
//! recompute from the log's chain, its filters and errors, and 50 racing decisions on one
//! approval.

use std::time::Duration;

use chronicle_api::Tokens;
use chronicle_api::audit::{CSV_COLUMNS, encode_csv, encode_jsonl, rows_from_csv};
use chronicle_projections::fixtures::{envelopes, scenario_1_events};
use chronicle_projections::{AuditDecision, AuditRow, audit_rows};
use chronicle_schemas::{
    Decision, Envelope, Event, RunId, Subject, Timestamp, ToolCallId, chain_hash, decode_record,
};
use serde_json::{Value, json};

use crate::api_support::{Server, server};

const WAIT: Duration = Duration::from_secs(20);
const QUERY: &str = "집주인이 전세금 3억을 10억으로 올려달래. 법적으로 해결방법 알려줘";
const ALICE: &str = "tok-alice-1234";
const BOB: &str = "tok-bob-12345";

fn two_principals() -> Tokens {
    Tokens::parse(&format!("alice {ALICE}\nbob {BOB}")).unwrap()
}

fn step(agent: &str, purpose: &str) -> Value {
    json!({
        "agent_name": agent, "team": agent.trim_end_matches("_team"), "task": format!("{agent} 실행"),
        "description": purpose, "priority": 0, "dependencies": [], "input_mapping": {"purpose": purpose},
        "timeout": 30, "retry_count": 0, "optional": false,
    })
}

/// A GET or POST with an optional bearer token.
fn req(
    s: &Server,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
) -> reqwest::RequestBuilder {
    let r = s.client.request(method, s.url(path));
    match token {
        Some(t) => r.bearer_auth(t),
        None => r,
    }
}

async fn get_json(s: &Server, path: &str, token: Option<&str>) -> Value {
    let res = req(s, reqwest::Method::GET, path, token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "GET {path}");
    res.json().await.unwrap()
}

/// Starts a `dag` run of two independent steps under `every_todo`: both approvals are asked at
/// once. Returns the run id and the two pending approvals (search_team's first).
async fn start_two_approvals(s: &Server, token: Option<&str>) -> (String, Vec<Value>) {
    let body = json!({
        "query": QUERY, "hitl": "every_todo", "strategy": "dag",
        "plan": [step("search_team", "법률 정보 검색"), step("analysis_team", "전세금 인상률 분석")],
    });
    let res = req(s, reqwest::Method::POST, "/api/v1/agent/run", token)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 202);
    let run = res.json::<Value>().await.unwrap()["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut pending = wait_for(s, &run, token, |status, approvals| {
        status["state"] == "waiting_for_approval"
            && approvals
                .iter()
                .filter(|a| a["status"] == "pending")
                .count()
                == 2
    })
    .await;
    pending.sort_by_key(|a| a["tool_name"] != "search_team");
    (run, pending)
}

/// Polls the run's status and approvals until `done` holds; returns the approvals then.
async fn wait_for(
    s: &Server,
    run: &str,
    token: Option<&str>,
    done: impl Fn(&Value, &[Value]) -> bool,
) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let status = get_json(s, &format!("/api/v1/agent/{run}/status"), token).await;
        let approvals = get_json(s, &format!("/api/v1/agent/{run}/approvals"), token).await;
        let approvals = approvals.as_array().unwrap().clone();
        if done(&status, &approvals) {
            return approvals;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "run {run} never got there: {status}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn wait_finished(s: &Server, run: &str, token: Option<&str>) {
    wait_for(s, run, token, |status, _| {
        ["completed", "failed", "cancelled"].contains(&status["state"].as_str().unwrap_or(""))
    })
    .await;
}

async fn decide(
    s: &Server,
    run: &str,
    approval: &Value,
    body: Value,
    token: Option<&str>,
) -> reqwest::Response {
    let id = approval["approval_id"].as_str().unwrap();
    req(
        s,
        reqwest::Method::POST,
        &format!("/api/v1/agent/{run}/approvals/{id}/decision"),
        token,
    )
    .json(&body)
    .send()
    .await
    .unwrap()
}

async fn log(s: &Server, run: &str, token: Option<&str>) -> Vec<Envelope> {
    serde_json::from_value(get_json(s, &format!("/api/v1/agent/{run}/log"), token).await).unwrap()
}

fn decisions(log: &[Envelope]) -> Vec<(String, Decision, String)> {
    log.iter()
        .filter_map(|e| match &e.event {
            Event::ApprovalDecided {
                approval_id,
                decision,
                decided_by,
                ..
            } => Some((approval_id.to_string(), *decision, decided_by.clone())),
            _ => None,
        })
        .collect()
}

/// `GET /api/v1/audit/approvals` with `query`: status, headers and body.
async fn export(
    s: &Server,
    query: &[(&str, &str)],
    token: Option<&str>,
) -> (u16, reqwest::header::HeaderMap, String) {
    let res = req(s, reqwest::Method::GET, "/api/v1/audit/approvals", token)
        .query(query)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let headers = res.headers().clone();
    (status, headers, res.text().await.unwrap())
}

fn jsonl_rows(body: &str) -> Vec<AuditRow> {
    body.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

async fn export_rows(s: &Server, query: &[(&str, &str)], token: Option<&str>) -> Vec<AuditRow> {
    let (status, headers, body) = export(s, query, token).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(headers["content-type"], "application/x-ndjson");
    jsonl_rows(&body)
}

fn error_code(body: &str) -> String {
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    v["error"]["code"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_principals_decide_and_the_log_and_audit_name_them() {
    let s = server(two_principals(), None).await;

    // Tokens configured: no token (or an unknown one) is 401 everywhere but /healthz.
    for path in ["/api/v1/approvals", "/api/v1/audit/approvals"] {
        for token in [None, Some("tok-unknown-999")] {
            let res = req(&s, reqwest::Method::GET, path, token)
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 401, "{path} with {token:?}");
            assert_eq!(error_code(&res.text().await.unwrap()), "unauthorized");
        }
    }
    let res = s.client.get(s.url("/healthz")).send().await.unwrap();
    assert_eq!(res.status(), 200);

    let (run, pending) = start_two_approvals(&s, Some(ALICE)).await;
    let (a, b) = (&pending[0], &pending[1]);
    assert_eq!(a["tool_name"], "search_team");
    assert_eq!(b["tool_name"], "analysis_team");

    // A body naming someone else is refused (the request structs deny unknown fields) and
    // writes nothing: bob cannot pass as mallory.
    let before = s.offsets();
    let res = decide(
        &s,
        &run,
        b,
        json!({"decision": "edit", "edited_args": {"purpose": "mallory's"}, "decided_by": "mallory"}),
        Some(BOB),
    )
    .await;
    assert_eq!(res.status(), 422);
    let body = res.text().await.unwrap();
    assert_eq!(error_code(&body), "unprocessable_entity");
    assert!(body.contains("decided_by"), "{body}");
    assert_eq!(s.offsets(), before, "a refused decision wrote something");
    let id_b = b["approval_id"].as_str().unwrap();
    let still = get_json(
        &s,
        &format!("/api/v1/agent/{run}/approvals/{id_b}"),
        Some(BOB),
    )
    .await;
    assert_eq!(still["status"], "pending");

    // Without a token, deciding is refused too.
    let res = decide(&s, &run, a, json!({"decision": "approve"}), None).await;
    assert_eq!(res.status(), 401);
    assert_eq!(s.offsets(), before);

    let res = decide(
        &s,
        &run,
        a,
        json!({"decision": "approve", "comment": "ok"}),
        Some(ALICE),
    )
    .await;
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    let edited = json!({"purpose": "전세금 인상률 분석 (bob)", "subject": "deposit"});
    let res = decide(
        &s,
        &run,
        b,
        json!({"decision": "edit", "edited_args": edited, "comment": "narrowed"}),
        Some(BOB),
    )
    .await;
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    assert_eq!(
        res.json::<Value>().await.unwrap()["approval"]["decided_by"],
        "bob"
    );
    wait_finished(&s, &run, Some(ALICE)).await;

    let id_a = a["approval_id"].as_str().unwrap().to_owned();
    let id_b = id_b.to_owned();
    let log = log(&s, &run, Some(BOB)).await;
    assert_eq!(
        decisions(&log),
        [
            (id_a.clone(), Decision::Approve, "alice".to_owned()),
            (id_b.clone(), Decision::Edit, "bob".to_owned()),
        ]
    );
    assert!(
        !serde_json::to_string(&log).unwrap().contains("mallory"),
        "the refused body left a trace"
    );

    let rows = export_rows(&s, &[("run_id", &run)], Some(BOB)).await;
    let got: Vec<_> = rows
        .iter()
        .map(|r| (r.approval_id.to_string(), r.decision, r.decided_by.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (id_a.clone(), AuditDecision::Approve, "alice"),
            (id_b.clone(), AuditDecision::Edit, "bob"),
        ]
    );
    assert_eq!(rows[0].comment.as_deref(), Some("ok"));
    assert_eq!(rows[0].effective_args, Some(a["request_args"].clone()));
    assert_eq!(rows[1].requested_args, b["request_args"]);
    assert_eq!(rows[1].effective_args, Some(edited));
    assert_eq!(rows[1].comment.as_deref(), Some("narrowed"));
    assert_eq!(rows[1].tool_or_agent, "analysis_team");
    assert!(rows.iter().all(AuditRow::hash_recomputes));

    // The same rows in CSV.
    let (status, headers, csv) =
        export(&s, &[("run_id", &run), ("format", "csv")], Some(ALICE)).await;
    assert_eq!(status, 200, "{csv}");
    assert_eq!(headers["content-type"], "text/csv; charset=utf-8");
    assert_eq!(csv.lines().next().unwrap(), CSV_COLUMNS.join(","));
    assert_eq!(rows_from_csv(csv.as_bytes()).unwrap(), rows);
    assert!(csv.contains(",alice,") && csv.contains(",bob,"), "{csv}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_inbox_lists_pending_approvals_of_every_run_until_decided() {
    let s = server(Tokens::none(), None).await;
    let (run1, p1) = start_two_approvals(&s, None).await;
    let (run2, p2) = start_two_approvals(&s, None).await;
    let (run3, p3) = start_two_approvals(&s, None).await;
    let ids = |ps: &[Value]| -> Vec<String> {
        ps.iter()
            .map(|a| a["approval_id"].as_str().unwrap().to_owned())
            .collect()
    };
    let inbox = |q: &'static str| {
        let s = &s;
        async move { get_json(s, &format!("/api/v1/approvals{q}"), None).await }
    };
    let listed = |v: &Value| -> Vec<String> {
        v["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["approval_id"].as_str().unwrap().to_owned())
            .collect()
    };

    let all = inbox("").await;
    assert_eq!(all["status"], "pending");
    assert_eq!(all["count"], 6);
    assert_eq!(all["truncated"], false);
    let mut expected: Vec<String> = [ids(&p1), ids(&p2), ids(&p3)].concat();
    let mut got = listed(&all);
    got.sort();
    expected.sort();
    assert_eq!(got, expected);
    let items = all["approvals"].as_array().unwrap();
    let times: Vec<Timestamp> = items
        .iter()
        .map(|a| serde_json::from_value(a["created_at"].clone()).unwrap())
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "oldest first: {times:?}"
    );
    for a in items {
        assert_eq!(a["status"], "pending");
        assert!(
            a["run_id"].is_string() && a["session_id"].is_string(),
            "{a}"
        );
        assert!(a["waiting_ms"].as_u64().is_some(), "{a}");
        assert!(
            a["tool_name"].is_string() && a["message"].is_string(),
            "{a}"
        );
    }
    // The same as `status=pending`; older than a day: none; older than a future instant: all.
    assert_eq!(listed(&inbox("?status=pending").await).len(), 6);
    assert_eq!(inbox("?older_than=1d").await["count"], 0);
    assert_eq!(inbox("?older_than=2999-01-01T00:00:00Z").await["count"], 6);
    assert_eq!(inbox("?older_than=2000-01-01T00:00:00Z").await["count"], 0);
    let two = inbox("?limit=2").await;
    assert_eq!(
        (two["count"].clone(), two["truncated"].clone()),
        (json!(2), json!(true))
    );
    assert_eq!(listed(&two), listed(&all)[..2]);

    // Each decided approval leaves the pending inbox and shows under its status.
    let res = decide(&s, &run1, &p1[0], json!({"decision": "approve"}), None).await;
    assert_eq!(res.status(), 200);
    let res = decide(&s, &run2, &p2[1], json!({"decision": "reject"}), None).await;
    assert_eq!(res.status(), 200);
    let now = listed(&inbox("").await);
    assert_eq!(now.len(), 4);
    assert!(!now.contains(&ids(&p1)[0]) && !now.contains(&ids(&p2)[1]));
    assert_eq!(
        listed(&inbox("?status=approved").await),
        [ids(&p1)[0].clone()]
    );
    assert_eq!(
        listed(&inbox("?status=rejected").await),
        [ids(&p2)[1].clone()]
    );

    // Cancelling run 3 cancels its approvals: they leave the pending inbox.
    let res = req(
        &s,
        reqwest::Method::POST,
        &format!("/api/v1/agent/{run3}/cancel"),
        None,
    )
    .send()
    .await
    .unwrap();
    assert_eq!(res.status(), 200);
    let mut cancelled = listed(&inbox("?status=cancelled").await);
    cancelled.sort();
    let mut want = ids(&p3);
    want.sort();
    assert_eq!(cancelled, want);
    assert_eq!(listed(&inbox("").await).len(), 2);

    let res = decide(&s, &run1, &p1[1], json!({"decision": "approve"}), None).await;
    assert_eq!(res.status(), 200);
    let res = decide(
        &s,
        &run2,
        &p2[0],
        json!({"decision": "edit", "edited_args": {"purpose": "x"}}),
        None,
    )
    .await;
    assert_eq!(res.status(), 200);
    assert_eq!(inbox("").await["count"], 0);
    assert_eq!(
        listed(&inbox("?status=edited").await),
        [ids(&p2)[0].clone()]
    );

    // Bad parameters are 400 with the API's error.
    for q in [
        "?status=done",
        "?older_than=soon",
        "?older_than=5w",
        "?limit=0",
        "?limit=1001",
        "?limit=x",
    ] {
        let res = s
            .client
            .get(s.url(&format!("/api/v1/approvals{q}")))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 400, "{q}");
        assert_eq!(error_code(&res.text().await.unwrap()), "bad_request", "{q}");
    }
    wait_finished(&s, &run1, None).await;
    wait_finished(&s, &run2, None).await;
    s.stop().await;
}

/// Checks one export row against the log: the event at the row's seq is the decision the row
/// states, at the row's place in the chain, and its hash recomputes from its bytes.
async fn assert_row_in_chain(s: &Server, row: &AuditRow) {
    let page = get_json(
        s,
        &format!("/api/v1/agent/{}/log?from={}&limit=1", row.run_id, row.seq),
        None,
    )
    .await;
    let env: Envelope = serde_json::from_value(page[0].clone()).unwrap();
    assert_eq!(
        (
            env.run_id,
            env.seq,
            env.offset,
            env.hash,
            env.prev_hash,
            env.at
        ),
        (
            row.run_id,
            row.seq,
            row.offset,
            row.hash,
            row.prev_hash,
            row.decided_at
        )
    );
    let bytes = env.encode().unwrap();
    assert_eq!(decode_record(&bytes).unwrap(), env);
    assert_eq!(chain_hash(&row.prev_hash, &bytes[65..]), row.hash);
    assert_eq!(env.event, row.decision_event(), "the row states the event");
    // prev_hash links to the run's previous event.
    if row.seq > 0 {
        let prev = get_json(
            s,
            &format!(
                "/api/v1/agent/{}/log?from={}&limit=1",
                row.run_id,
                row.seq - 1
            ),
            None,
        )
        .await;
        assert_eq!(prev[0]["hash"], row.prev_hash.to_hex());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn export_rows_match_the_decisions_and_recompute_from_the_chain() {
    let s = server(Tokens::none(), None).await;
    let (run1, p1) = start_two_approvals(&s, None).await;
    let (run2, p2) = start_two_approvals(&s, None).await;
    let edited = json!({"purpose": "edited", "subject": "deposit"});
    let plan = [
        (&run1, &p1[0], json!({"decision": "approve"})),
        (
            &run2,
            &p2[0],
            json!({"decision": "reject", "comment": "not now"}),
        ),
        (
            &run1,
            &p1[1],
            json!({"decision": "edit", "edited_args": edited}),
        ),
        (
            &run2,
            &p2[1],
            json!({"decision": "approve", "comment": "fine"}),
        ),
    ];
    for (run, a, body) in &plan {
        let res = decide(&s, run, a, body.clone(), None).await;
        assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    }
    wait_finished(&s, &run1, None).await;
    wait_finished(&s, &run2, None).await;

    let (status, headers, body) = export(&s, &[], None).await;
    assert_eq!(status, 200);
    assert_eq!(
        headers["x-chronicle-head-offset"].to_str().unwrap(),
        s.offsets().to_string()
    );
    assert!(!headers.contains_key("x-chronicle-run-head-seq"));
    let rows = jsonl_rows(&body);
    assert_eq!(rows.len(), 4, "{body}");
    assert!(
        rows.windows(2).all(|w| w[0].offset < w[1].offset),
        "log order"
    );
    let got: Vec<_> = rows
        .iter()
        .map(|r| (r.approval_id.to_string(), r.decision, r.decided_by.as_str()))
        .collect();
    let id = |a: &Value| a["approval_id"].as_str().unwrap().to_owned();
    assert_eq!(
        got,
        [
            (id(&p1[0]), AuditDecision::Approve, "local"),
            (id(&p2[0]), AuditDecision::Reject, "local"),
            (id(&p1[1]), AuditDecision::Edit, "local"),
            (id(&p2[1]), AuditDecision::Approve, "local"),
        ]
    );
    assert_eq!(rows[0].effective_args, Some(p1[0]["request_args"].clone()));
    assert_eq!(rows[1].effective_args, None);
    assert_eq!(rows[1].comment.as_deref(), Some("not now"));
    assert_eq!(rows[2].effective_args, Some(edited));
    assert_eq!(rows[3].effective_args, Some(p2[1]["request_args"].clone()));
    for (row, (run, a, _)) in rows.iter().zip(&plan) {
        assert_eq!(row.run_id.to_string(), **run);
        assert_eq!(
            row.subject,
            a["subject"]["todo"]["todo_id"].as_str().unwrap(),
            "{a}"
        );
        assert_eq!(row.subject_kind.unwrap().as_str(), "todo");
        assert_eq!(row.tool_or_agent, a["tool_name"].as_str().unwrap());
        assert_eq!(row.requested_args, a["request_args"]);
        assert_eq!(
            serde_json::to_value(row.requested_at.unwrap()).unwrap(),
            a["created_at"]
        );
        assert!(row.requested_at.unwrap() < row.decided_at);
        assert!(!row.session_id.as_str().is_empty());
        assert!(row.hash_recomputes(), "{row:?}");
        assert_row_in_chain(&s, row).await;
    }

    // A tampered row no longer matches its event, nor its hash.
    let tampered = AuditRow {
        decided_by: "mallory".into(),
        ..rows[0].clone()
    };
    assert!(!tampered.hash_recomputes());
    let page = get_json(
        &s,
        &format!(
            "/api/v1/agent/{}/log?from={}&limit=1",
            tampered.run_id, tampered.seq
        ),
        None,
    )
    .await;
    let env: Envelope = serde_json::from_value(page[0].clone()).unwrap();
    assert_ne!(env.event, tampered.decision_event());
    let forged = Envelope {
        event: tampered.decision_event(),
        ..env.clone()
    };
    let bytes = forged.encode().unwrap();
    assert_ne!(chain_hash(&tampered.prev_hash, &bytes[65..]), tampered.hash);

    // One run: its rows, and its head in the headers.
    let (status, headers, body) = export(&s, &[("run_id", run2.as_str())], None).await;
    assert_eq!(status, 200);
    let run_rows = jsonl_rows(&body);
    assert_eq!(run_rows, [rows[1].clone(), rows[3].clone()]);
    let run_log = log(&s, &run2, None).await;
    let last = run_log.last().unwrap();
    assert_eq!(
        headers["x-chronicle-run-head-seq"].to_str().unwrap(),
        last.seq.to_string()
    );
    assert_eq!(
        headers["x-chronicle-run-head-hash"].to_str().unwrap(),
        last.hash.to_hex()
    );
    assert!(
        headers["x-chronicle-head-offset"]
            .to_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            > last.offset
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn export_filters_and_bad_requests() {
    let s = server(Tokens::none(), None).await;
    let (run1, p1) = start_two_approvals(&s, None).await;
    let (run2, p2) = start_two_approvals(&s, None).await;
    for (run, a) in [
        (&run1, &p1[0]),
        (&run2, &p2[0]),
        (&run1, &p1[1]),
        (&run2, &p2[1]),
    ] {
        let res = decide(&s, run, a, json!({"decision": "approve"}), None).await;
        assert_eq!(res.status(), 200);
        // Distinct decision times, so the windows below cut between rows.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let all = export_rows(&s, &[], None).await;
    assert_eq!(all.len(), 4);
    let at = |i: usize| all[i].decided_at.to_string();
    let pick = |keep: &dyn Fn(&AuditRow) -> bool| -> Vec<AuditRow> {
        all.iter().filter(|r| keep(r)).cloned().collect()
    };

    // since is inclusive, until exclusive.
    let since = export_rows(&s, &[("since", &at(1))], None).await;
    assert_eq!(since, pick(&|r| r.decided_at >= all[1].decided_at));
    assert_eq!(since.len(), 3);
    let until = export_rows(&s, &[("until", &at(1))], None).await;
    assert_eq!(until, pick(&|r| r.decided_at < all[1].decided_at));
    assert_eq!(until.len(), 1);
    let both = export_rows(&s, &[("since", &at(1)), ("until", &at(3))], None).await;
    assert_eq!(both, all[1..3]);
    // The same instant spelled in UTC+9.
    let plus_nine = Timestamp(all[1].decided_at.as_micros() + 9 * 3_600 * 1_000_000)
        .to_string()
        .replace('Z', "+09:00");
    let since9 = export_rows(&s, &[("since", &plus_nine)], None).await;
    assert_eq!(since9, since);
    let run1_rows = export_rows(&s, &[("run_id", run1.as_str())], None).await;
    assert_eq!(run1_rows, pick(&|r| r.run_id.to_string() == run1));
    assert_eq!(run1_rows.len(), 2);
    let mixed = export_rows(&s, &[("run_id", run2.as_str()), ("since", &at(2))], None).await;
    assert_eq!(mixed, [all[3].clone()]);
    let (status, _, csv) = export(
        &s,
        &[
            ("run_id", run2.as_str()),
            ("format", "csv"),
            ("until", &at(0)),
        ],
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(csv, format!("{}\n", CSV_COLUMNS.join(",")), "header only");
    let (status, _, jsonl) = export(&s, &[("since", "2999-01-01T00:00:00Z")], None).await;
    assert_eq!((status, jsonl.as_str()), (200, ""));

    // Bad input: 400 (format, times, run id), 404 (unknown run); nothing is written.
    wait_finished(&s, &run1, None).await;
    wait_finished(&s, &run2, None).await;
    let before = s.offsets();
    for q in [
        vec![("format", "xml")],
        vec![("format", "")],
        vec![("since", "yesterday")],
        vec![("until", "2025-13-01T00:00:00Z")],
        vec![("run_id", "not-a-uuid")],
    ] {
        let (status, _, body) = export(&s, &q, None).await;
        assert_eq!(status, 400, "{q:?}: {body}");
        assert_eq!(error_code(&body), "bad_request", "{q:?}");
    }
    let unknown = RunId::from_u128(0x5EED).to_string();
    let (status, _, body) = export(&s, &[("run_id", unknown.as_str())], None).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(error_code(&body), "not_found");
    assert_eq!(s.offsets(), before);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_decisions_one_wins() {
    let s = server(two_principals(), None).await;
    let (run, pending) = start_two_approvals(&s, Some(ALICE)).await;
    let target = pending[0]["approval_id"].as_str().unwrap().to_owned();
    let url = s.url(&format!("/api/v1/agent/{run}/approvals/{target}/decision"));
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let (client, url) = (s.client.clone(), url.clone());
            let (token, body) = if i % 2 == 0 {
                (
                    ALICE,
                    json!({"decision": "approve", "comment": format!("#{i}")}),
                )
            } else {
                (
                    BOB,
                    json!({"decision": "reject", "comment": format!("#{i}")}),
                )
            };
            tokio::spawn(async move {
                let res = client
                    .post(url)
                    .bearer_auth(token)
                    .json(&body)
                    .send()
                    .await
                    .unwrap();
                let status = res.status().as_u16();
                let body: Value = res.json().await.unwrap();
                (status, body)
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    for t in tasks {
        outcomes.push(t.await.unwrap());
    }
    let ok: Vec<_> = outcomes.iter().filter(|(st, _)| *st == 200).collect();
    let conflicts = outcomes.iter().filter(|(st, _)| *st == 409).count();
    assert_eq!((ok.len(), conflicts), (1, 49), "{outcomes:?}");
    for (_, body) in outcomes.iter().filter(|(st, _)| *st == 409) {
        assert_eq!(body["error"]["code"], "conflict");
    }
    let winner = &ok[0].1["approval"];

    wait_for(&s, &run, Some(ALICE), |_, approvals| {
        approvals
            .iter()
            .any(|a| a["approval_id"] == target && a["status"] != "pending")
    })
    .await;
    let log = log(&s, &run, Some(ALICE)).await;
    let for_target: Vec<_> = decisions(&log)
        .into_iter()
        .filter(|d| d.0 == target)
        .collect();
    assert_eq!(for_target.len(), 1, "{for_target:?}");
    assert_eq!(for_target[0].2, winner["decided_by"].as_str().unwrap());
    let rows: Vec<_> = export_rows(&s, &[("run_id", run.as_str())], Some(BOB))
        .await
        .into_iter()
        .filter(|r| r.approval_id.as_str() == target)
        .collect();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].decided_by, winner["decided_by"].as_str().unwrap());
    assert_eq!(rows[0].comment.as_deref(), winner["comment"].as_str());

    let res = req(
        &s,
        reqwest::Method::POST,
        &format!("/api/v1/agent/{run}/cancel"),
        Some(ALICE),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(res.status(), 200);
    s.stop().await;
}

/// The export's formats pinned on the fixed-id, fixed-time fixture run (seed 000 scenario 1),
/// extended with every other kind of row: an edited tool call (with a comment that needs CSV
/// quoting), a rejection and an expiry.
#[test]
fn fixture_export_snapshots() {
    let mut events = scenario_1_events();
    let end = events.pop().unwrap();
    assert!(end.is_terminal());
    let request = |id: &str, subject: Subject, tool: &str, args: Value| Event::ApprovalRequested {
        approval_id: id.into(),
        subject,
        tool_name: tool.into(),
        args,
        preview: Value::Null,
        policy: "tools".into(),
        message: String::new(),
        expires_at: None,
        supersedes: None,
    };
    let todo2 = || Subject::Todo {
        todo_id: "todo_002".into(),
    };
    events.extend([
        request(
            "apr_003",
            Subject::ToolCall {
                tool_call_id: ToolCallId::from("call_001"),
                todo_id: "todo_002".into(),
            },
            "write_file",
            json!({"path": "/workspace/report.md", "content": "3억 → 10억"}),
        ),
        Event::ApprovalDecided {
            approval_id: "apr_003".into(),
            decision: Decision::Edit,
            edited_args: Some(json!({"path": "/workspace/report-v2.md", "content": "3억 → 10억"})),
            decided_by: "bob".into(),
            comment: Some("rename it, \"v2\", please".into()),
        },
        request(
            "apr_004",
            todo2(),
            "analysis_team",
            json!({"purpose": "again"}),
        ),
        Event::ApprovalDecided {
            approval_id: "apr_004".into(),
            decision: Decision::Reject,
            edited_args: None,
            decided_by: "alice".into(),
            comment: None,
        },
        request("apr_005", todo2(), "analysis_team", json!({})),
        Event::ApprovalExpired {
            approval_id: "apr_005".into(),
            on_expiry: Decision::Reject,
        },
        end,
    ]);
    let rows = audit_rows(&envelopes(RunId::from_u128(0xA0D17), events));
    let kinds: Vec<_> = rows.iter().map(|r| r.decision.as_str()).collect();
    assert_eq!(kinds, ["approve", "approve", "edit", "reject", "expired"]);
    assert!(rows.iter().all(AuditRow::hash_recomputes));
    let csv = encode_csv(&rows);
    insta::assert_snapshot!("audit_export_fixture_csv", csv);
    assert_eq!(rows_from_csv(csv.as_bytes()).unwrap(), rows);
    let jsonl = encode_jsonl(&rows);
    insta::assert_snapshot!("audit_export_fixture_jsonl", jsonl);
    assert_eq!(jsonl_rows(&jsonl), rows);
}

/// The size of the event a refused request would have recorded, read from its 413 message.
fn refused_event_bytes(body: &Value) -> usize {
    let msg = body["error"]["message"].as_str().unwrap();
    let after = msg.split("an event of ").nth(1).expect(msg);
    after.split(' ').next().unwrap().parse().expect(msg)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_at_the_event_limit_is_recorded_and_one_byte_over_is_413() {
    const LIMIT: usize = chronicle_schemas::EVENT_BYTES_MAX;
    let s = server(Tokens::none(), None).await;
    let (run, pending) = start_two_approvals(&s, None).await;
    let (a, id) = (&pending[0], pending[0]["approval_id"].as_str().unwrap());
    let with_comment = |n: usize| json!({"decision": "approve", "comment": "c".repeat(n)});
    let before = s.offsets();

    // Far over: 413 naming the limit and the size; nothing recorded, the approval still pending.
    let res = decide(&s, &run, a, with_comment(70_000), None).await;
    let status = res.status();
    let body: Value = res.json().await.unwrap();
    assert_eq!(status, 413, "{body}");
    assert_eq!(body["error"]["code"], "payload_too_large");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&format!("at most {LIMIT} bytes")),
        "{body}"
    );
    // Home in on the comment that makes the event one byte over the limit (the 413 names the
    // size; string headers change size at 64 KiB, so it takes a step or two): 413 every time,
    // and the log is unchanged.
    let mut over = 70_000 - (refused_event_bytes(&body) - LIMIT) + 8;
    for probe in 0.. {
        assert!(probe < 5, "the 413 sizes do not converge on the limit");
        let res = decide(&s, &run, a, with_comment(over), None).await;
        assert_eq!(res.status(), 413, "a comment of {over} bytes");
        let bytes = refused_event_bytes(&res.json().await.unwrap());
        if bytes == LIMIT + 1 {
            break;
        }
        over = over + LIMIT + 1 - bytes;
    }
    let at_limit = over - 1;
    assert_eq!(s.offsets(), before, "a refused decision writes nothing");
    let still = get_json(&s, &format!("/api/v1/agent/{run}/approvals/{id}"), None).await;
    assert_eq!(still["status"], "pending");

    // Exactly at the limit: recorded, and the comment reads back whole.
    let res = decide(&s, &run, a, with_comment(at_limit), None).await;
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    let decided = get_json(&s, &format!("/api/v1/agent/{run}/approvals/{id}"), None).await;
    assert_eq!(decided["status"], "approved");
    assert_eq!(
        decided["comment"].as_str().map(str::len),
        Some(at_limit),
        "{decided}"
    );
    assert!(s.offsets() > before);
    assert!(s.engine.store().verify().unwrap().ok());
    s.stop().await;
}
