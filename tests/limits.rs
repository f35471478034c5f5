//! The run limits (`max_todos`, `max_steps`, `agent_timeout_ms`, `run_timeout_ms`): each one
//! fails the run with a clear `RunFailed` reason.

use std::sync::Arc;

use chronicle_engine::agents::Registry;
use chronicle_schemas::{HitlMode, Limits, RunConfig, RunStatus, Strategy};

use crate::agents::step;
use crate::slow_agent::Slow;
use crate::support::{WAIT, engine_in, start};

async fn failure(limits: Limits, steps: usize, delay_ms: u64) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut reg = Registry::empty();
    reg.register(Arc::new(Slow {
        info: chronicle_engine::agents::AgentInfo::new("slow", "test", "waits, then answers"),
        delay_ms,
    }));
    let engine = engine_in(dir.path(), reg).await;
    let plan = (0..steps).map(|_| step("slow", &[], false, 0)).collect();
    let config = RunConfig {
        hitl: HitlMode::None,
        strategy: Some(Strategy::Sequential),
        plan: Some(plan),
        limits,
        ..RunConfig::default()
    };
    let run = start(&engine, config).await;
    let s = engine
        .wait_until(run, WAIT, |s| s.supervisor.run_status.is_terminal())
        .await
        .unwrap();
    assert_eq!(s.supervisor.run_status, RunStatus::Failed);
    engine.shutdown().await;
    s.supervisor.error_log.last().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_limit_fails_the_run_with_its_reason() {
    let l = Limits::default();
    assert_eq!(
        failure(
            Limits {
                max_todos: 2,
                ..l.clone()
            },
            3,
            0
        )
        .await,
        "the plan has 3 TODOs, over the max_todos limit of 2"
    );
    assert_eq!(
        failure(
            Limits {
                max_steps: 4,
                ..l.clone()
            },
            3,
            0
        )
        .await,
        "max_steps limit of 4 node executions reached"
    );
    assert_eq!(
        failure(
            Limits {
                agent_timeout_ms: 50,
                ..l.clone()
            },
            1,
            5_000
        )
        .await,
        "todo_001 (slow) failed after 1 attempt(s): timeout after 50 ms"
    );
    assert_eq!(
        failure(
            Limits {
                run_timeout_ms: 300,
                ..l.clone()
            },
            1,
            5_000
        )
        .await,
        "run timeout of 300 ms exceeded"
    );
}
