//! End-to-end answers without a model: the rules' intent and plan, each step's agent in plan
//! order seeing the results so far, then the rules' answer — what a run produces — and the
//! same queries once through a real engine.

use std::collections::BTreeMap;
use std::time::Duration;

use chronicle_engine::agents::AgentContext;
use chronicle_engine::store::Store;
use chronicle_engine::{Engine, StartRun};
use chronicle_schemas::RunStatus;
use serde_json::{Value, json};

use crate::agents::registry;
use crate::planner::rules;

/// How long a run of the built-in agents may take in a test; they answer in milliseconds.
const RUN_WAIT: Duration = Duration::from_secs(20);

/// What a run of a query produced.
struct Answered {
    agents: Vec<String>,
    inputs: Vec<Value>,
    response: Value,
}

impl Answered {
    fn answer(&self) -> &str {
        self.response["answer"].as_str().unwrap_or_default()
    }
}

async fn run(query: &str) -> Answered {
    let intent = rules::analyze_intent(query);
    let plan = rules::build_plan(&intent, &[]);
    let agents = registry();
    let mut ctx = AgentContext {
        turn: Default::default(),
        query: query.into(),
        intent: json!({
            "intent_type": intent.intent_type,
            "confidence": intent.confidence,
            "keywords": intent.keywords,
            "entities": intent.entities,
        }),
        team_results: BTreeMap::new(),
        ..AgentContext::default()
    };
    for step in &plan.steps {
        let agent = agents.get(&step.agent_name).expect("a built-in agent");
        let out = agent.run(&ctx, step.input_mapping.clone()).await;
        let result = out
            .unwrap_or_else(|e| panic!("{} failed: {e}", step.agent_name))
            .result;
        ctx.team_results.insert(step.agent_name.clone(), result);
    }
    // The answer reads the results in agent-name order, as a run's `team_results` holds them.
    let results: Vec<(String, Value)> = ctx.team_results.clone().into_iter().collect();
    Answered {
        agents: plan.steps.iter().map(|s| s.agent_name.clone()).collect(),
        inputs: plan.steps.iter().map(|s| s.input_mapping.clone()).collect(),
        response: rules::format_response(query, &intent, &results),
    }
}

const GANGNAM_STATION: &str = "강남역 근처 30평대 아파트 매매 시세 알려줘";
const COMPARISON: &str = "강남구랑 서초구 아파트 매매 시세 비교해줘";
const RESEARCH: &str =
    "Research the latest listings in Gangnam, analyze the trends and write a short report";

/// The answer's count is the listings returned, not the market summary beside them.
#[tokio::test]
async fn the_answer_counts_the_listings_it_returns() {
    let out = run(GANGNAM_STATION).await;
    assert_eq!(out.agents, ["property_search", "market_analysis"]);
    assert_eq!(
        out.answer(),
        "서울특별시 강남구 아파트 매물 5건을 찾았습니다. 가격은 12억 원에서 16억 5,000만 원 사이입니다. \
         강남구 아파트 매매 평균 시세는 14억 5,000만 원이며, 최근 3개월 변동률은 +4.8%입니다."
    );
    let r = &out.response;
    assert_eq!(r["listings"].as_array().map(Vec::len), Some(5));
    assert_eq!(r["metadata"]["total_results"], 5);
    let insights = r["insights"].to_string();
    assert!(
        insights.contains("매물 5건") && !insights.contains("매물 6건"),
        "{insights}"
    );

    // The search team returns market summaries too; they are not listings.
    let out = run("강남구 아파트 시세 조회").await;
    assert_eq!(out.agents, ["search_team"]);
    assert_eq!(
        out.answer(),
        "서울특별시 강남구 아파트 매물 9건을 찾았습니다. 거래 유형별로 매매 7건(9억 8,000만 원~21억 5,000만 원), \
         전세 2건(보증금 7억 2,000만 원~8억 5,000만 원)입니다."
    );
    assert_eq!(out.response["listings"].as_array().map(Vec::len), Some(9));
}

/// A district the dataset does not cover is named as such, not answered with nothing.
#[tokio::test]
async fn an_uncovered_district_is_said_to_be_uncovered() {
    let out = run("관악구 아파트 전세 시세 조회").await;
    assert_eq!(out.agents, ["search_team"]);
    assert_eq!(
        out.answer(),
        "서울특별시 관악구: 데이터셋에 없는 지역이라 찾은 결과가 없습니다."
    );
}

/// A comparison names both districts with their figures and says which is higher by how much.
#[tokio::test]
async fn a_comparison_answers_with_both_districts_and_the_gap() {
    let out = run(COMPARISON).await;
    assert_eq!(out.agents, ["property_search", "region_comparison"]);
    assert_eq!(
        out.inputs[0]["regions"],
        json!(["서울특별시 강남구", "서울특별시 서초구"])
    );
    assert_eq!(
        out.answer(),
        "아파트 매매 평균 시세는 강남구 14억 5,000만 원, 서초구 19억 원으로 서초구가 강남구보다 \
         4억 5,000만 원(31.0%) 높습니다. 강남구·서초구 아파트 매물 10건을 찾았습니다. \
         가격은 9억 8,000만 원에서 28억 원 사이입니다."
    );
    let out = run("compare Gangnam and Seocho apartments for sale").await;
    assert!(
        out.answer().starts_with(
            "Average apartment prices (sale): Gangnam-gu 1.45 billion won, Seocho-gu 1.9 billion \
             won; Seocho-gu is higher by 450 million won (31.0%)."
        ),
        "{}",
        out.answer()
    );
}

/// A request to research, analyse and write up plans all three, and never averages a sale
/// price with a deposit.
#[tokio::test]
async fn a_research_request_plans_search_analysis_and_a_report() {
    let out = run(RESEARCH).await;
    assert_eq!(
        out.agents,
        ["search_team", "analysis_team", "document_team"]
    );
    assert_eq!(out.inputs[2]["document_type"], "market_report");
    assert_eq!(
        out.answer(),
        "Found 10 listings in Gangnam-gu, Seoul: 7 for sale (980 million won to 2.15 billion won), \
         2 on jeonse (deposit 720 million won to 850 million won), 1 on monthly rent (deposit 10 \
         million won, 1.2 million won a month). Apartments in Gangnam-gu, Seoul (sale) average \
         1.45 billion won, +4.8% over 3 months. Wrote the report \"Market report: Gangnam-gu\". \
         Recommended: Prices are rising: compare discounted listings and check your financing \
         (DSR) before rushing to buy; for a lease, check the registry for mortgages and whether \
         deposit insurance is available before signing."
    );
    let metadata = &out.response["metadata"];
    assert_eq!(
        metadata.get("avg_price"),
        None,
        "no average across deal types"
    );
    assert_eq!(metadata.get("price_range"), None);
    let by_deal = &metadata["prices_by_deal_type"];
    assert_eq!(by_deal["매매"]["count"], 7);
    assert_eq!(by_deal["전세"]["max"], 850_000_000u64);
    assert_eq!(by_deal["월세"]["min"], 10_000_000u64);
    let report = out.response["document"]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(
        report.starts_with("# Market report: Gangnam-gu\n"),
        "{report}"
    );
    assert!(
        report.contains("- 7 for sale: prices KRW 980,000,000 to KRW 2,150,000,000"),
        "{report}"
    );
}

/// The same three questions through a real engine, to completion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_gives_the_same_answers() {
    // The report is saved to the session's workspace: a temporary one.
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut settings = crate::settings();
    settings.workspace_root = Some(dir.path().to_owned());
    let engine = Engine::open(Store::memory(), settings)
        .await
        .expect("an engine");
    for query in [GANGNAM_STATION, COMPARISON, RESEARCH] {
        let req = StartRun {
            query: query.into(),
            ..StartRun::default()
        };
        let id = engine.start_run(req).await.expect("a run").run_id;
        let s = engine
            .wait_until(id, RUN_WAIT, |s| s.supervisor.run_status.is_terminal())
            .await
            .expect("a finished run");
        assert_eq!(s.supervisor.run_status, RunStatus::Completed, "{query}");
        let engine_answer = s
            .supervisor
            .final_response
            .as_ref()
            .map(|r| r["answer"].clone());
        let expected = run(query).await.response["answer"].clone();
        // The engine saves the report to the workspace, so its answer also says where.
        let expected = expected
            .as_str()
            .unwrap_or_default()
            .replace(
                "\"Market report: Gangnam-gu\".",
                "\"Market report: Gangnam-gu\" (saved to /workspace/documents/todo_003_market_report.md).",
            );
        assert_eq!(engine_answer, Some(json!(expected)), "{query}");
    }
}

/// A follow-up in the same session is read against the previous turn: "서초구는?" after a
/// 강남구 apartment jeonse question keeps the property type and the deal type and changes the
/// district; the turn records which earlier run it was given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_keeps_what_it_does_not_change() {
    let engine = Engine::open(Store::memory(), crate::settings())
        .await
        .expect("an engine");
    let session = chronicle_schemas::SessionId::new("follow-up");
    let mut runs = Vec::new();
    for query in ["강남구 아파트 전세 시세 알려줘", "서초구는?"] {
        let req = StartRun {
            query: query.into(),
            session_id: Some(session.clone()),
            ..StartRun::default()
        };
        let id = engine.start_run(req).await.expect("a run").run_id;
        let s = engine
            .wait_until(id, RUN_WAIT, |s| s.supervisor.run_status.is_terminal())
            .await
            .expect("a finished run");
        assert_eq!(s.supervisor.run_status, RunStatus::Completed, "{query}");
        runs.push((id, s));
    }
    let (first, _) = &runs[0];
    let (_, second) = &runs[1];
    let context = &second.supervisor.session_context;
    assert_eq!(context.len(), 1);
    assert_eq!(context[0].run_id, *first);
    assert_eq!(context[0].query, "강남구 아파트 전세 시세 알려줘");
    assert!(!context[0].answer.is_empty());
    let intent = &second
        .supervisor
        .planning_state
        .as_ref()
        .expect("a plan")
        .analyzed_intent;
    let entities = &intent["entities"];
    assert_eq!(entities["region"], "서울특별시 서초구", "{intent}");
    assert_eq!(entities["property_type"], "아파트", "{intent}");
    assert_eq!(entities["deal_type"], "전세", "{intent}");
    let answer = second
        .supervisor
        .final_response
        .as_ref()
        .expect("an answer")["answer"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        answer.contains("서초구") && answer.contains("전세"),
        "{answer}"
    );
    assert!(
        !answer.contains("강남구") && !answer.contains("매매"),
        "{answer}"
    );
}

/// Plain words to a run that waits for approval act on it: "분석도 추가해줘" adds the analysis
/// team as `todo_002` (recorded with the words), "승인" approves, and no second run starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_words_to_a_waiting_run_act_on_it() {
    use chronicle_engine::{Principal, Turn, TurnInput, TurnOutcome};
    use chronicle_schemas::{Event, HitlMode, SessionId};

    let engine = Engine::open(Store::memory(), crate::settings())
        .await
        .expect("an engine");
    let session = SessionId::new("scenario-2");
    let turn = |text: &str| Turn {
        session: session.clone(),
        run: None,
        input: TurnInput::Message(text.into()),
        by: Principal::local(),
        user_id: None,
        hitl: Some(HitlMode::EveryTodo),
        on_reject: None,
        idempotency_key: None,
    };
    let run = match engine
        .turn(turn("강남구 아파트 시세 조회"))
        .await
        .expect("a turn")
    {
        TurnOutcome::Started { run } => run,
        other => panic!("{other:?}"),
    };
    engine.wait_settled(run, RUN_WAIT).await.expect("waiting");

    let outcome = engine.turn(turn("분석도 추가해줘")).await.expect("a turn");
    let TurnOutcome::Command { run: on, said, .. } = &outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!((*on, said.as_deref()), (run, Some("분석도 추가해줘")));
    let s = engine.state(run, None).expect("state");
    let todos = &s.supervisor.planning_state.as_ref().expect("a plan").todos;
    let added = todos
        .iter()
        .find(|t| t.id.as_str() == "todo_002")
        .expect("todo_002");
    assert_eq!(added.agent_name, "analysis_team");
    let recorded = engine
        .store()
        .read_run(run, 0, u64::MAX)
        .filter_map(Result::ok)
        .find_map(|e| match e.event {
            Event::CommandReceived { command, said, .. } if said.is_some() => Some((command, said)),
            _ => None,
        });
    assert_eq!(
        recorded,
        Some((
            "/todo add analysis_team".into(),
            Some("분석도 추가해줘".into())
        ))
    );

    // Words that mean no command leave the run waiting and start nothing.
    let outcome = engine.turn(turn("오늘 날씨 어때")).await.expect("a turn");
    assert_eq!(outcome, TurnOutcome::Waiting { run });

    assert!(matches!(
        engine.turn(turn("승인")).await.expect("a turn"),
        TurnOutcome::Command { .. }
    ));
    assert_eq!(
        engine.store().session_runs(&session).expect("runs"),
        vec![run]
    );
}
