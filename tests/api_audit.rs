//! Approvals and audit through the real HTTP API: principals named by their tokens (never by the
//! body), the approvals inbox across runs, the audit export (JSON Lines and CSV) whose rows
//! recompute from the log's chain, its filters and errors, and 50 racing decisions on one
//! approval. Requests go through the one client; the ones it cannot send go raw.

use std::time::Duration;

use chronicle_api::Tokens;
use chronicle_client::{Client, Error};
use chronicle_projections::audit_rows;
use chronicle_projections::fixtures::{envelopes, scenario_1_events};
use chronicle_schemas::{
    AuditDecision, AuditRow, Decision, Envelope, Event, HitlMode, RunId, RunStatus, Strategy,
    Subject, Timestamp, ToolCallId, chain_hash, decode_record,
};
use chronicle_wire::audit::{CSV_COLUMNS, Format, encode, rows_from_csv, rows_from_jsonl};
use chronicle_wire::{
    ApprovalView, CancelRequest, DecisionRequest, ErrorBody, ExportQuery, InboxQuery, LogQuery,
    RunRequest, Status,
};
use serde_json::{Value, json};

use crate::api_support::{Server, server};

const WAIT: Duration = Duration::from_secs(20);
const QUERY: &str = "집주인이 전세금 3억을 10억으로 올려달래. 법적으로 해결방법 알려줘";
const ALICE: &str = "tok-alice-123456";
const BOB: &str = "tok-bob-123456789";

fn two_principals() -> Tokens {
    Tokens::parse(&format!("alice {ALICE}\nbob {BOB} admin")).unwrap()
}

fn step(agent: &str, purpose: &str) -> Value {
    json!({
        "agent_name": agent, "team": agent.trim_end_matches("_team"), "task": format!("{agent} 실행"),
        "description": purpose, "priority": 0, "dependencies": [], "input_mapping": {"purpose": purpose},
        "timeout": 30, "retry_count": 0, "optional": false,
    })
}

/// The client with `token`, or without one.
fn as_(s: &Server, token: Option<&str>) -> Client {
    s.client.clone().with_token(token.map(str::to_owned))
}

/// Starts a `dag` run of two independent steps under `every_todo`: both approvals are asked at
/// once. Returns the run id and the two pending approvals (search_team's first).
async fn start_two_approvals(s: &Server, token: Option<&str>) -> (RunId, Vec<ApprovalView>) {
    let req = RunRequest {
        hitl: Some(HitlMode::EveryTodo),
        strategy: Some(Strategy::Dag),
        plan: Some(
            serde_json::from_value(json!([
                step("search_team", "법률 정보 검색"),
                step("analysis_team", "전세금 인상률 분석")
            ]))
            .unwrap(),
        ),
        ..RunRequest::new(QUERY)
    };
    let run = as_(s, token).start_run(&req).await.unwrap().run_id;
    let mut pending = wait_for(s, run, token, |status, approvals| {
        status.state == RunStatus::WaitingForApproval
            && approvals
                .iter()
                .filter(|a| a.approval.status == chronicle_schemas::ApprovalStatus::Pending)
                .count()
                == 2
    })
    .await;
    pending.sort_by_key(|a| a.approval.tool_name != "search_team");
    (run, pending)
}

/// Polls the run's status and approvals until `done` holds; returns the approvals then.
async fn wait_for(
    s: &Server,
    run: RunId,
    token: Option<&str>,
    done: impl Fn(&Status, &[ApprovalView]) -> bool,
) -> Vec<ApprovalView> {
    let c = as_(s, token);
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let status = c.status(run).await.unwrap();
        let approvals = c.approvals(run).await.unwrap();
        if done(&status, &approvals) {
            return approvals;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "run {run} never got there: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn wait_finished(s: &Server, run: RunId, token: Option<&str>) {
    wait_for(s, run, token, |status, _| status.state.is_terminal()).await;
}

async fn decide(
    s: &Server,
    run: RunId,
    approval: &ApprovalView,
    req: DecisionRequest,
    token: Option<&str>,
) -> Result<chronicle_wire::DecisionAccepted, Error> {
    as_(s, token).decide(run, &approval.id, &req).await
}

async fn log(s: &Server, run: RunId, token: Option<&str>) -> Vec<Envelope> {
    as_(s, token).log(run, 0).await.unwrap()
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

/// What an export answered: its head offset, its run head, and its body.
struct Exported {
    head_offset: Option<u64>,
    run_head: Option<(u64, String)>,
    body: String,
}

/// `GET /api/v1/audit/approvals` with `query`.
async fn export(s: &Server, query: &ExportQuery, token: Option<&str>) -> Result<Exported, Error> {
    let export = as_(s, token).audit_export(query).await?;
    let (head_offset, run_head) = (export.head_offset, export.run_head.clone());
    Ok(Exported {
        head_offset,
        run_head,
        body: export.text().await?,
    })
}

async fn export_rows(s: &Server, query: &ExportQuery, token: Option<&str>) -> Vec<AuditRow> {
    let exported = export(s, query, token).await.unwrap();
    rows_from_jsonl(&exported.body).unwrap()
}

/// An export query of `run` (and `more` of it).
fn of_run(run: RunId, more: ExportQuery) -> ExportQuery {
    ExportQuery {
        run_id: Some(run.to_string()),
        ..more
    }
}

fn csv() -> ExportQuery {
    ExportQuery {
        format: Some("csv".into()),
        ..ExportQuery::default()
    }
}

/// The status and code of a refusal.
#[track_caller]
fn refused<T: std::fmt::Debug>(r: Result<T, Error>) -> (u16, String) {
    match r.unwrap_err() {
        Error::Http { status, body } => (status, body.error.code),
        e => panic!("not an error answer: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_principals_decide_and_the_log_and_audit_name_them() {
    two_principals_decide_and_the_log_and_audit_name_them_test().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_principals_decide_and_the_log_and_audit_name_them_on_postgres() {
    crate::api_support::on_postgres(two_principals_decide_and_the_log_and_audit_name_them_test())
        .await;
}

async fn two_principals_decide_and_the_log_and_audit_name_them_test() {
    let s = server(two_principals(), None).await;

    // Tokens configured: no token (or an unknown one) is 401 everywhere but /healthz.
    for token in [None, Some("tok-unknown-99999")] {
        let inbox = as_(&s, token).inbox(&InboxQuery::default()).await;
        assert_eq!(refused(inbox), (401, "unauthorized".into()), "{token:?}");
        let export = export(&s, &ExportQuery::default(), token).await;
        assert_eq!(
            refused(export.map(|e| e.body)),
            (401, "unauthorized".into()),
            "{token:?}"
        );
    }
    s.client.health().await.unwrap();

    let (run, pending) = start_two_approvals(&s, Some(ALICE)).await;
    let (a, b) = (&pending[0], &pending[1]);
    assert_eq!(a.approval.tool_name, "search_team");
    assert_eq!(b.approval.tool_name, "analysis_team");

    // A body naming someone else is refused (the request structs deny unknown fields) and
    // writes nothing: bob cannot pass as mallory. (Raw: the typed client cannot say it.)
    let before = s.offsets();
    let res = s
        .http
        .post(s.url(&format!("/api/v1/agent/{run}/approvals/{}/decision", b.id)))
        .bearer_auth(BOB)
        .json(&json!({"decision": "edit", "edited_args": {"purpose": "mallory's"}, "decided_by": "mallory"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422);
    let body: ErrorBody = res.json().await.unwrap();
    assert_eq!(body.error.code, "unprocessable_entity");
    assert!(body.error.message.contains("decided_by"), "{body:?}");
    assert_eq!(s.offsets(), before, "a refused decision wrote something");
    let still = as_(&s, Some(BOB)).approval(run, &b.id).await.unwrap();
    assert_eq!(
        still.approval.status,
        chronicle_schemas::ApprovalStatus::Pending
    );

    // Without a token, deciding is refused too.
    let res = decide(&s, run, a, DecisionRequest::approve(), None).await;
    assert_eq!(refused(res).0, 401);
    assert_eq!(s.offsets(), before);

    decide(
        &s,
        run,
        a,
        DecisionRequest::approve().with_comment("ok"),
        Some(ALICE),
    )
    .await
    .unwrap();
    let edited = json!({"purpose": "전세금 인상률 분석 (bob)", "subject": "deposit"});
    let accepted = decide(
        &s,
        run,
        b,
        DecisionRequest::edit(edited.clone()).with_comment("narrowed"),
        Some(BOB),
    )
    .await
    .unwrap();
    assert_eq!(
        accepted.approval.approval.decided_by.as_deref(),
        Some("bob")
    );
    wait_finished(&s, run, Some(ALICE)).await;

    let id_a = a.id.to_string();
    let id_b = b.id.to_string();
    let log = log(&s, run, Some(BOB)).await;
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

    let rows = export_rows(&s, &of_run(run, ExportQuery::default()), Some(BOB)).await;
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
    assert_eq!(
        rows[0].effective_args,
        Some(a.approval.request_args.clone())
    );
    assert_eq!(rows[1].requested_args, b.approval.request_args);
    assert_eq!(rows[1].effective_args, Some(edited));
    assert_eq!(rows[1].comment.as_deref(), Some("narrowed"));
    assert_eq!(rows[1].tool_or_agent, "analysis_team");
    assert!(rows.iter().all(AuditRow::hash_recomputes));

    // The same rows in CSV (the client checks the content type).
    let csv = export(&s, &of_run(run, csv()), Some(ALICE))
        .await
        .unwrap()
        .body;
    assert_eq!(csv.lines().next().unwrap(), CSV_COLUMNS.join(","));
    assert_eq!(rows_from_csv(&csv).unwrap(), rows);
    assert!(csv.contains(",alice,") && csv.contains(",bob,"), "{csv}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_inbox_lists_pending_approvals_of_every_run_until_decided() {
    the_inbox_lists_pending_approvals_of_every_run_until_decided_test().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_inbox_lists_pending_approvals_of_every_run_until_decided_on_postgres() {
    crate::api_support::on_postgres(
        the_inbox_lists_pending_approvals_of_every_run_until_decided_test(),
    )
    .await;
}

async fn the_inbox_lists_pending_approvals_of_every_run_until_decided_test() {
    let s = server(Tokens::none(), None).await;
    let (run1, p1) = start_two_approvals(&s, None).await;
    let (run2, p2) = start_two_approvals(&s, None).await;
    let (run3, p3) = start_two_approvals(&s, None).await;
    let ids =
        |ps: &[ApprovalView]| -> Vec<String> { ps.iter().map(|a| a.id.to_string()).collect() };
    let inbox = |status: Option<&str>, older_than: Option<&str>, limit: Option<usize>| {
        let q = InboxQuery {
            status: status.map(str::to_owned),
            older_than: older_than.map(str::to_owned),
            limit,
        };
        let c = s.client.clone();
        async move { c.inbox(&q).await.unwrap() }
    };
    let listed = |v: &chronicle_wire::Inbox| -> Vec<String> {
        v.approvals
            .iter()
            .map(|a| a.approval.id.to_string())
            .collect()
    };

    let all = inbox(None, None, None).await;
    assert_eq!(all.status, chronicle_schemas::ApprovalStatus::Pending);
    assert_eq!(all.count, 6);
    assert!(!all.truncated);
    let mut expected: Vec<String> = [ids(&p1), ids(&p2), ids(&p3)].concat();
    let mut got = listed(&all);
    got.sort();
    expected.sort();
    assert_eq!(got, expected);
    let times: Vec<Timestamp> = all
        .approvals
        .iter()
        .map(|a| a.approval.approval.created_at)
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "oldest first: {times:?}"
    );
    for a in &all.approvals {
        // Each item, read from its request and the index, is the approval, session and user
        // its run's whole state has.
        let state = s.engine.state(a.approval.run_id, None).unwrap();
        let whole = state.approvals.get(&a.approval.id).unwrap();
        assert_eq!(&a.approval.approval, whole);
        assert_eq!(a.session_id, state.supervisor.session_id);
        assert_eq!(a.user_id, state.supervisor.user_id);
        assert_eq!(
            a.approval.approval.status,
            chronicle_schemas::ApprovalStatus::Pending
        );
        assert!(!a.session_id.as_str().is_empty(), "{a:?}");
        assert!(a.waiting_ms.is_some_and(|w| w >= 0), "{a:?}");
        assert!(
            !a.approval.approval.tool_name.is_empty() && !a.approval.approval.message.is_empty(),
            "{a:?}"
        );
    }
    // The same as `status=pending`; older than a day: none; older than a future instant: all.
    assert_eq!(listed(&inbox(Some("pending"), None, None).await).len(), 6);
    assert_eq!(inbox(None, Some("1d"), None).await.count, 0);
    assert_eq!(
        inbox(None, Some("2999-01-01T00:00:00Z"), None).await.count,
        6
    );
    assert_eq!(
        inbox(None, Some("2000-01-01T00:00:00Z"), None).await.count,
        0
    );
    let two = inbox(None, None, Some(2)).await;
    assert_eq!((two.count, two.truncated), (2, true));
    assert_eq!(listed(&two), listed(&all)[..2]);

    // Each decided approval leaves the pending inbox and shows under its status.
    decide(&s, run1, &p1[0], DecisionRequest::approve(), None)
        .await
        .unwrap();
    decide(&s, run2, &p2[1], DecisionRequest::reject(), None)
        .await
        .unwrap();
    let now = listed(&inbox(None, None, None).await);
    assert_eq!(now.len(), 4);
    assert!(!now.contains(&ids(&p1)[0]) && !now.contains(&ids(&p2)[1]));
    assert_eq!(
        listed(&inbox(Some("approved"), None, None).await),
        [ids(&p1)[0].clone()]
    );
    assert_eq!(
        listed(&inbox(Some("rejected"), None, None).await),
        [ids(&p2)[1].clone()]
    );

    // Cancelling run 3 cancels its approvals: they leave the pending inbox.
    s.client
        .cancel(run3, &CancelRequest::default())
        .await
        .unwrap();
    let mut cancelled = listed(&inbox(Some("cancelled"), None, None).await);
    cancelled.sort();
    let mut want = ids(&p3);
    want.sort();
    assert_eq!(cancelled, want);
    assert_eq!(listed(&inbox(None, None, None).await).len(), 2);

    decide(&s, run1, &p1[1], DecisionRequest::approve(), None)
        .await
        .unwrap();
    decide(
        &s,
        run2,
        &p2[0],
        DecisionRequest::edit(json!({"purpose": "x"})),
        None,
    )
    .await
    .unwrap();
    assert_eq!(inbox(None, None, None).await.count, 0);
    assert_eq!(
        listed(&inbox(Some("edited"), None, None).await),
        [ids(&p2)[0].clone()]
    );

    // Bad parameters are 400 with the API's error.
    for (status, older_than, limit) in [
        (Some("done"), None, None),
        (None, Some("soon"), None),
        (None, Some("5w"), None),
        (None, None, Some(0)),
        (None, None, Some(1001)),
    ] {
        let q = InboxQuery {
            status: status.map(str::to_owned),
            older_than: older_than.map(str::to_owned),
            limit,
        };
        assert_eq!(
            refused(s.client.inbox(&q).await),
            (400, "bad_request".into()),
            "{q:?}"
        );
    }
    // A limit that is not a number (raw: the typed query cannot say it).
    let res = s
        .http
        .get(s.url("/api/v1/approvals?limit=x"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    wait_finished(&s, run1, None).await;
    wait_finished(&s, run2, None).await;
    s.stop().await;
}

/// Checks one export row against the log: the event at the row's seq is the decision the row
/// states, at the row's place in the chain, and its hash recomputes from its bytes.
async fn event_at(s: &Server, run: RunId, seq: u64) -> Envelope {
    let one = LogQuery {
        from: Some(seq),
        limit: Some(1),
    };
    s.client.log_page(run, &one).await.unwrap().remove(0)
}

async fn assert_row_in_chain(s: &Server, row: &AuditRow) {
    let env = event_at(s, row.run_id, row.seq).await;
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
        assert_eq!(
            event_at(s, row.run_id, row.seq - 1).await.hash,
            row.prev_hash
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn export_rows_match_the_decisions_and_recompute_from_the_chain() {
    export_rows_match_the_decisions_and_recompute_from_the_chain_test().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn export_rows_match_the_decisions_and_recompute_from_the_chain_on_postgres() {
    crate::api_support::on_postgres(
        export_rows_match_the_decisions_and_recompute_from_the_chain_test(),
    )
    .await;
}

async fn export_rows_match_the_decisions_and_recompute_from_the_chain_test() {
    let s = server(Tokens::none(), None).await;
    let (run1, p1) = start_two_approvals(&s, None).await;
    let (run2, p2) = start_two_approvals(&s, None).await;
    let edited = json!({"purpose": "edited", "subject": "deposit"});
    let plan = [
        (run1, &p1[0], DecisionRequest::approve()),
        (
            run2,
            &p2[0],
            DecisionRequest::reject().with_comment("not now"),
        ),
        (run1, &p1[1], DecisionRequest::edit(edited.clone())),
        (
            run2,
            &p2[1],
            DecisionRequest::approve().with_comment("fine"),
        ),
    ];
    for (run, a, req) in &plan {
        decide(&s, *run, a, req.clone(), None).await.unwrap();
    }
    wait_finished(&s, run1, None).await;
    wait_finished(&s, run2, None).await;

    let exported = export(&s, &ExportQuery::default(), None).await.unwrap();
    assert_eq!(exported.head_offset, Some(s.offsets()));
    assert_eq!(exported.run_head, None);
    let rows = rows_from_jsonl(&exported.body).unwrap();
    let body = &exported.body;
    assert_eq!(rows.len(), 4, "{body}");
    assert!(
        rows.windows(2).all(|w| w[0].offset < w[1].offset),
        "log order"
    );
    let got: Vec<_> = rows
        .iter()
        .map(|r| (r.approval_id.to_string(), r.decision, r.decided_by.as_str()))
        .collect();
    let id = |a: &ApprovalView| a.id.to_string();
    assert_eq!(
        got,
        [
            (id(&p1[0]), AuditDecision::Approve, "local"),
            (id(&p2[0]), AuditDecision::Reject, "local"),
            (id(&p1[1]), AuditDecision::Edit, "local"),
            (id(&p2[1]), AuditDecision::Approve, "local"),
        ]
    );
    assert_eq!(
        rows[0].effective_args,
        Some(p1[0].approval.request_args.clone())
    );
    assert_eq!(rows[1].effective_args, None);
    assert_eq!(rows[1].comment.as_deref(), Some("not now"));
    assert_eq!(rows[2].effective_args, Some(edited));
    assert_eq!(
        rows[3].effective_args,
        Some(p2[1].approval.request_args.clone())
    );
    for (row, (run, a, _)) in rows.iter().zip(&plan) {
        assert_eq!(row.run_id, *run);
        let subject = a.approval.subject.as_ref().unwrap();
        assert_eq!(row.subject, subject.todo_id().as_str(), "{a:?}");
        assert_eq!(row.subject_kind.unwrap().as_str(), "todo");
        assert_eq!(row.tool_or_agent, a.approval.tool_name);
        assert_eq!(row.requested_args, a.approval.request_args);
        assert_eq!(row.requested_at, Some(a.approval.created_at));
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
    let env = event_at(&s, tampered.run_id, tampered.seq).await;
    assert_ne!(env.event, tampered.decision_event());
    let forged = Envelope {
        event: tampered.decision_event(),
        ..env.clone()
    };
    let bytes = forged.encode().unwrap();
    assert_ne!(chain_hash(&tampered.prev_hash, &bytes[65..]), tampered.hash);

    // One run: its rows, and its head in the headers.
    let exported = export(&s, &of_run(run2, ExportQuery::default()), None)
        .await
        .unwrap();
    let run_rows = rows_from_jsonl(&exported.body).unwrap();
    assert_eq!(run_rows, [rows[1].clone(), rows[3].clone()]);
    let run_log = log(&s, run2, None).await;
    let last = run_log.last().unwrap();
    assert_eq!(exported.run_head, Some((last.seq, last.hash.to_hex())));
    assert!(exported.head_offset.unwrap() > last.offset);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn export_filters_and_bad_requests() {
    export_filters_and_bad_requests_test().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn export_filters_and_bad_requests_on_postgres() {
    crate::api_support::on_postgres(export_filters_and_bad_requests_test()).await;
}

async fn export_filters_and_bad_requests_test() {
    let s = server(Tokens::none(), None).await;
    let (run1, p1) = start_two_approvals(&s, None).await;
    let (run2, p2) = start_two_approvals(&s, None).await;
    for (run, a) in [
        (run1, &p1[0]),
        (run2, &p2[0]),
        (run1, &p1[1]),
        (run2, &p2[1]),
    ] {
        decide(&s, run, a, DecisionRequest::approve(), None)
            .await
            .unwrap();
        // Distinct decision times, so the windows below cut between rows.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let window = |since: Option<&str>, until: Option<&str>| ExportQuery {
        since: since.map(str::to_owned),
        until: until.map(str::to_owned),
        ..ExportQuery::default()
    };
    let all = export_rows(&s, &ExportQuery::default(), None).await;
    assert_eq!(all.len(), 4);
    let at = |i: usize| all[i].decided_at.to_string();
    let pick = |keep: &dyn Fn(&AuditRow) -> bool| -> Vec<AuditRow> {
        all.iter().filter(|r| keep(r)).cloned().collect()
    };

    // since is inclusive, until exclusive.
    let since = export_rows(&s, &window(Some(&at(1)), None), None).await;
    assert_eq!(since, pick(&|r| r.decided_at >= all[1].decided_at));
    assert_eq!(since.len(), 3);
    let until = export_rows(&s, &window(None, Some(&at(1))), None).await;
    assert_eq!(until, pick(&|r| r.decided_at < all[1].decided_at));
    assert_eq!(until.len(), 1);
    let both = export_rows(&s, &window(Some(&at(1)), Some(&at(3))), None).await;
    assert_eq!(both, all[1..3]);
    // The same instant spelled in UTC+9.
    let plus_nine = Timestamp(all[1].decided_at.as_micros() + 9 * 3_600 * 1_000_000)
        .to_string()
        .replace('Z', "+09:00");
    let since9 = export_rows(&s, &window(Some(&plus_nine), None), None).await;
    assert_eq!(since9, since);
    let run1_rows = export_rows(&s, &of_run(run1, ExportQuery::default()), None).await;
    assert_eq!(run1_rows, pick(&|r| r.run_id == run1));
    assert_eq!(run1_rows.len(), 2);
    let mixed = export_rows(&s, &of_run(run2, window(Some(&at(2)), None)), None).await;
    assert_eq!(mixed, [all[3].clone()]);
    let header_only = ExportQuery {
        format: Some("csv".into()),
        ..of_run(run2, window(None, Some(&at(0))))
    };
    let csv = export(&s, &header_only, None).await.unwrap().body;
    assert_eq!(csv, format!("{}\n", CSV_COLUMNS.join(",")), "header only");
    let jsonl = export(&s, &window(Some("2999-01-01T00:00:00Z"), None), None)
        .await
        .unwrap()
        .body;
    assert_eq!(jsonl, "");

    // Bad input: 400 (format, times, run id), 404 (unknown run); nothing is written.
    wait_finished(&s, run1, None).await;
    wait_finished(&s, run2, None).await;
    let before = s.offsets();
    for q in [
        ExportQuery {
            format: Some("xml".into()),
            ..ExportQuery::default()
        },
        ExportQuery {
            format: Some(String::new()),
            ..ExportQuery::default()
        },
        window(Some("yesterday"), None),
        window(None, Some("2025-13-01T00:00:00Z")),
        ExportQuery {
            run_id: Some("not-a-uuid".into()),
            ..ExportQuery::default()
        },
    ] {
        let res = export(&s, &q, None).await.map(|e| e.body);
        assert_eq!(refused(res), (400, "bad_request".into()), "{q:?}");
    }
    let unknown = of_run(RunId::from_u128(0x5EED), ExportQuery::default());
    let res = export(&s, &unknown, None).await.map(|e| e.body);
    assert_eq!(refused(res), (404, "not_found".into()));
    assert_eq!(s.offsets(), before);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_decisions_one_wins() {
    fifty_concurrent_decisions_one_wins_test().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_decisions_one_wins_on_postgres() {
    crate::api_support::on_postgres(fifty_concurrent_decisions_one_wins_test()).await;
}

async fn fifty_concurrent_decisions_one_wins_test() {
    let s = server(two_principals(), None).await;
    let (run, pending) = start_two_approvals(&s, Some(ALICE)).await;
    let target = pending[0].id.clone();
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let (token, req) = if i % 2 == 0 {
                (
                    ALICE,
                    DecisionRequest::approve().with_comment(format!("#{i}")),
                )
            } else {
                (BOB, DecisionRequest::reject().with_comment(format!("#{i}")))
            };
            let (client, target) = (s.client_as(token), target.clone());
            tokio::spawn(async move { client.decide(run, &target, &req).await })
        })
        .collect();
    let mut outcomes = Vec::new();
    for t in tasks {
        outcomes.push(t.await.unwrap());
    }
    let ok: Vec<_> = outcomes.iter().filter_map(|o| o.as_ref().ok()).collect();
    let conflicts = outcomes
        .iter()
        .filter(|o| matches!(o, Err(e) if e.status() == Some(409) && e.code() == Some("conflict")))
        .count();
    assert_eq!((ok.len(), conflicts), (1, 49), "{outcomes:?}");
    let winner = &ok[0].approval.approval;

    wait_for(&s, run, Some(ALICE), |_, approvals| {
        approvals.iter().any(|a| {
            a.id == target && a.approval.status != chronicle_schemas::ApprovalStatus::Pending
        })
    })
    .await;
    let log = log(&s, run, Some(ALICE)).await;
    let for_target: Vec<_> = decisions(&log)
        .into_iter()
        .filter(|d| d.0 == target.as_str())
        .collect();
    assert_eq!(for_target.len(), 1, "{for_target:?}");
    assert_eq!(Some(&for_target[0].2), winner.decided_by.as_ref());
    let rows: Vec<_> = export_rows(&s, &of_run(run, ExportQuery::default()), Some(BOB))
        .await
        .into_iter()
        .filter(|r| r.approval_id == target)
        .collect();
    assert_eq!(rows.len(), 1);
    assert_eq!(Some(&rows[0].decided_by), winner.decided_by.as_ref());
    assert_eq!(rows[0].comment, winner.comment);

    s.client_as(ALICE)
        .cancel(run, &CancelRequest::default())
        .await
        .unwrap();
    s.stop().await;
}

/// The export's formats pinned on the fixed-id, fixed-time deposit-increase fixture run,
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
    let csv = encode(Format::Csv, &rows);
    insta::assert_snapshot!("audit_export_fixture_csv", csv);
    assert_eq!(rows_from_csv(&csv).unwrap(), rows);
    let jsonl = encode(Format::Jsonl, &rows);
    insta::assert_snapshot!("audit_export_fixture_jsonl", jsonl);
    assert_eq!(rows_from_jsonl(&jsonl).unwrap(), rows);
}

/// The size of the event a request would have recorded, read from its 413 message.
#[track_caller]
fn refused_event_bytes<T: std::fmt::Debug>(r: Result<T, Error>) -> usize {
    let e = r.unwrap_err();
    assert_eq!(
        (e.status(), e.code()),
        (Some(413), Some("payload_too_large")),
        "{e}"
    );
    let msg = e.to_string();
    let after = msg.split("an event of ").nth(1).expect(&msg);
    after.split(' ').next().unwrap().parse().expect(&msg)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_at_the_event_limit_is_recorded_and_one_byte_over_is_413() {
    a_decision_at_the_event_limit_is_recorded_and_one_byte_over_is_413_test().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_at_the_event_limit_is_recorded_and_one_byte_over_is_413_on_postgres() {
    crate::api_support::on_postgres(
        a_decision_at_the_event_limit_is_recorded_and_one_byte_over_is_413_test(),
    )
    .await;
}

async fn a_decision_at_the_event_limit_is_recorded_and_one_byte_over_is_413_test() {
    const LIMIT: usize = chronicle_schemas::EVENT_BYTES_MAX;
    let s = server(Tokens::none(), None).await;
    let (run, pending) = start_two_approvals(&s, None).await;
    let (a, id) = (&pending[0], &pending[0].id);
    let with_comment = |n: usize| DecisionRequest::approve().with_comment("c".repeat(n));
    let before = s.offsets();

    // Far over: 413 naming the limit and the size; nothing recorded, the approval still pending.
    let res = decide(&s, run, a, with_comment(70_000), None).await;
    let msg = res.as_ref().map_err(|e| e.to_string()).unwrap_err();
    assert!(msg.contains(&format!("at most {LIMIT} bytes")), "{msg}");
    // Home in on the comment that makes the event one byte over the limit (the 413 names the
    // size; string headers change size at 64 KiB, so it takes a step or two): 413 every time,
    // and the log is unchanged.
    let mut over = 70_000 - (refused_event_bytes(res) - LIMIT) + 8;
    for probe in 0.. {
        assert!(probe < 5, "the 413 sizes do not converge on the limit");
        let res = decide(&s, run, a, with_comment(over), None).await;
        let bytes = refused_event_bytes(res);
        if bytes == LIMIT + 1 {
            break;
        }
        over = over + LIMIT + 1 - bytes;
    }
    let at_limit = over - 1;
    assert_eq!(s.offsets(), before, "a refused decision writes nothing");
    let still = s.client.approval(run, id).await.unwrap();
    assert_eq!(
        still.approval.status,
        chronicle_schemas::ApprovalStatus::Pending
    );

    // Exactly at the limit: recorded, and the comment reads back whole.
    decide(&s, run, a, with_comment(at_limit), None)
        .await
        .unwrap();
    let decided = s.client.approval(run, id).await.unwrap().approval;
    assert_eq!(decided.status, chronicle_schemas::ApprovalStatus::Approved);
    assert_eq!(decided.comment.as_deref().map(str::len), Some(at_limit));
    assert!(s.offsets() > before);
    let report = s.engine.store().verify().unwrap();
    assert!(report.ok(), "{:?}", report.problem);
    s.stop().await;
}
