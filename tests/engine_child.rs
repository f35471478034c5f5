//! Child process for the engine crash tests. Modes:
//! - `many DIR N`: starts N runs (HITL none, three slow TODOs each), prints `STARTED <run>` for
//!   each, then keeps running them until killed.
//! - `scenario3 DIR`: the first half of the restore-after-a-crash scenario with the built-in
//!   agents: the deposit-increase question under `every_todo`, `/todo approve`, and once
//!   search_team has completed prints `RUN <run>` and `SEARCH_DONE`, then waits to be killed.
//! - `tools DIR`: one `tool_runner` TODO making three counted `write_file` calls; prints
//!   `RUN <run>`, and the agent prints `HANGING` after the second call's answer.
//! - `index DIR SEED`: writes the index tests' random workload to the store while a thread keeps
//!   the index caught up; prints `READY` after its first steps and goes on until killed.
//! - `task DIR`: one `tool_runner` TODO delegating to `sub_worker` through `task`; prints
//!   `RUN <run>`, and the sub-agent prints `CHILD_STARTED <child>` and hangs.
//! - `llm DIR BASE_URL`: the `analyst` llm agent drives a run (agent mode, HITL none) over the
//!   scripted model at BASE_URL; prints `RUN <run>` and works until killed.
//! - `mcp DIR BASE_URL ENTRY_FILE`: the MCP tests' `operator` agent drives a run (HITL none) over
//!   the scripted model, with the `[[mcp_server]]` table in ENTRY_FILE; prints `RUN <run>` and
//!   works until killed.

#[path = "index_workload.rs"]
mod index_workload;
// The child uses only the agents and the settings; the scripts are the test process's.
#[allow(dead_code)]
#[path = "llm_support.rs"]
mod llm_support;
#[allow(dead_code)]
#[path = "mcp_support.rs"]
mod mcp_support;
#[path = "slow_agent.rs"]
mod slow_agent;
#[path = "tool_agents.rs"]
mod tool_agents;

use chronicle_engine::Principal;
use chronicle_engine::store::{Options, Store};
use chronicle_engine::{Engine, Settings, StartRun};
use chronicle_schemas::{HitlMode, RunConfig, Strategy};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        match args
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice()
        {
            ["many", dir, n] => {
                let store = Store::open(dir, Options::default())?;
                let settings = Settings {
                    registry: slow_agent::slow_registry(),
                    ..chronicle_realestate::settings()
                };
                let engine = Engine::open(store, settings).await?;
                for _ in 0..n.parse::<usize>()? {
                    let config = RunConfig {
                        hitl: HitlMode::None,
                        strategy: Some(Strategy::Sequential),
                        plan: Some(slow_plan()),
                        ..RunConfig::default()
                    };
                    let started = engine
                        .start_run(StartRun {
                            query: "crash test".into(),
                            config: Some(config),
                            ..Default::default()
                        })
                        .await?;
                    println!("STARTED {}", started.run_id);
                }
                std::future::pending::<()>().await;
                Ok(())
            }
            ["index", dir, seed] => {
                let store = Store::open(dir, Options::default())?;
                let indexer = store.clone();
                std::thread::spawn(move || {
                    loop {
                        if let Err(e) = chronicle_engine::index::catch_up(&indexer) {
                            eprintln!("indexing failed: {e}");
                        }
                    }
                });
                let mut w = index_workload::Workload::new(seed.parse::<u64>()? + 1);
                for _ in 0..20 {
                    w.step(&store).await;
                }
                println!("READY");
                loop {
                    w.step(&store).await;
                }
            }
            ["scenario3", dir] => {
                let engine = Engine::open(
                    Store::open(dir, Options::default())?,
                    chronicle_realestate::settings(),
                )
                .await?;
                let query = "집주인이 전세금 3억을 10억으로 올려달래. 법적으로 해결방법 알려줘";
                let req = StartRun {
                    query: query.into(),
                    hitl: Some(HitlMode::EveryTodo),
                    ..Default::default()
                };
                let run = engine.start_run(req).await?.run_id;
                let wait = std::time::Duration::from_secs(20);
                engine.wait_settled(run, wait).await?;
                engine
                    .command(run, "/todo approve", &Principal::local())
                    .await?;
                engine
                    .wait_until(run, wait, |s| {
                        s.supervisor
                            .planning_state
                            .as_ref()
                            .is_some_and(|p| p.completed_todo_ids.len() == 1)
                    })
                    .await?;
                println!("RUN {run}");
                println!("SEARCH_DONE");
                std::future::pending::<()>().await;
                Ok(())
            }
            ["tools", dir] => {
                let settings = Settings {
                    registry: tool_agents::registry(Some(2), false),
                    tools: tool_agents::counting_tools(
                        std::path::Path::new(dir).join("executions.log"),
                    ),
                    ..chronicle_realestate::settings()
                };
                let calls = serde_json::json!([
                    tool_agents::write("/workspace/one.txt", "1"),
                    tool_agents::write("/workspace/two.txt", "2"),
                    tool_agents::write("/workspace/three.txt", "3"),
                ]);
                run_until_killed(dir, settings, tool_run(calls)).await
            }
            ["task", dir] => {
                let settings = Settings {
                    registry: tool_agents::registry(None, true),
                    ..chronicle_realestate::settings()
                };
                let calls = serde_json::json!([{"tool": "task", "args": {
                    "description": "look it up", "subagent_type": "sub_worker", "input": {"k": 1}
                }}]);
                run_until_killed(dir, settings, tool_run(calls)).await
            }
            ["llm", dir, base_url] => {
                let query = "How did sales go in March? Write a report.";
                let req = agent_run(query, "llm-session", "analyst");
                run_until_killed(dir, llm_support::settings(base_url), req).await
            }
            ["mcp", dir, base_url, entry_file] => {
                let entry = std::fs::read_to_string(entry_file)?;
                let (settings, _servers) = mcp_support::settings(base_url, &entry).await;
                let req = agent_run("Use the tools.", "mcp-session", "operator");
                run_until_killed(dir, settings, req).await
            }
            other => anyhow::bail!("unknown mode {other:?}"),
        }
    })
}

/// Starts `req` on an engine with `settings` over `dir`, prints `RUN <run>` and works on it
/// until killed.
async fn run_until_killed(dir: &str, settings: Settings, req: StartRun) -> anyhow::Result<()> {
    let engine = Engine::open(Store::open(dir, Options::default())?, settings).await?;
    let run = engine.start_run(req).await?.run_id;
    println!("RUN {run}");
    std::future::pending::<()>().await;
    Ok(())
}

/// A run that `agent` drives alone in `session` (agent mode, HITL none).
fn agent_run(query: &str, session: &str, agent: &str) -> StartRun {
    StartRun {
        query: query.into(),
        session_id: Some(session.into()),
        hitl: Some(HitlMode::None),
        agent: Some(agent.into()),
        ..Default::default()
    }
}

/// A run of one `tool_runner` TODO making `calls`, HITL none.
fn tool_run(calls: serde_json::Value) -> StartRun {
    StartRun {
        query: "tool test".into(),
        session_id: Some("tool-session".into()),
        config: Some(RunConfig {
            hitl: HitlMode::None,
            plan: Some(tool_agents::runner_plan(calls)),
            ..RunConfig::default()
        }),
        ..Default::default()
    }
}

/// Three slow TODOs, each depending on the one before.
fn slow_plan() -> Vec<chronicle_schemas::PlanStep> {
    ["slow_a", "slow_b", "slow_c"]
        .iter()
        .enumerate()
        .map(|(i, a)| chronicle_schemas::PlanStep {
            agent_name: (*a).into(),
            dependencies: if i == 0 {
                vec![]
            } else {
                vec![["slow_a", "slow_b"][i - 1].into()]
            },
            input_mapping: serde_json::json!({"purpose": "slow"}),
            timeout: 30,
            retry_count: 1,
            ..Default::default()
        })
        .collect()
}
