//! Child process for the engine crash tests. Modes:
//! - `many DIR N`: starts N runs (HITL none, three slow TODOs each), prints `STARTED <run>` for
//!   each, then keeps running them until killed.

#[path = "slow_agent.rs"]
mod slow_agent;

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
                    ..Settings::default()
                };
                let engine = Engine::open(store, settings).await?;
                for _ in 0..n.parse::<usize>()? {
                    let config = RunConfig {
                        hitl: HitlMode::None,
                        strategy: Some(Strategy::Sequential),
                        plan: Some(slow_agent::slow_plan()),
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
            other => anyhow::bail!("unknown mode {other:?}"),
        }
    })
}
