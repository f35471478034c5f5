//! A complete small domain: one agent, a planner and English texts, installed into the engine's
//! settings and run once on an in-memory store. Run it with
//! `cargo run -p chronicle-generic --example domain`.

use std::sync::Arc;
use std::time::Duration;

use chronicle_engine::agents::{Agent, AgentContext, AgentError, AgentInfo, AgentOutput};
use chronicle_engine::store::Store;
use chronicle_engine::texts::English;
use chronicle_engine::{
    AgentResult, Engine, EvaluationOutcome, Intent, Plan, PlanContext, Planner, Settings, StartRun,
};
use chronicle_schemas::{HitlMode, PlanStep, Source, Strategy};
use serde_json::{Value, json};

/// The domain's one agent. Its reply follows the agent contract: `answer`, `data`.
#[derive(Debug)]
struct Greeter(AgentInfo);

#[async_trait::async_trait]
impl Agent for Greeter {
    fn info(&self) -> &AgentInfo {
        &self.0
    }

    async fn run(&self, ctx: &AgentContext, _input: Value) -> Result<AgentOutput, AgentError> {
        Ok(AgentOutput {
            result: json!({
                "answer": format!("Hello! You said: {}", ctx.query),
                "data": {"characters": ctx.query.chars().count()},
            }),
        })
    }
}

/// The domain's planning: every request goes to the greeter; the generic rules judge the
/// results and the generic composer answers.
#[derive(Debug)]
struct GreetingPlanner;

#[async_trait::async_trait]
impl Planner for GreetingPlanner {
    async fn intent(&self, _cx: &PlanContext<'_>) -> Intent {
        Intent {
            intent_type: "greeting".into(),
            confidence: 1.0,
            keywords: vec![],
            entities: json!({}),
            source: Source::Rules,
        }
    }

    async fn plan(&self, cx: &PlanContext<'_>, _intent: &Intent) -> Plan {
        cx.note("every request is a greeting");
        let step = PlanStep {
            agent_name: "greeter".into(),
            team: "greeting".into(),
            task: "greet the user".into(),
            description: "the only agent".into(),
            priority: 0,
            dependencies: vec![],
            input_mapping: json!({}),
            timeout: 10,
            retry_count: 1,
            optional: false,
        };
        Plan {
            strategy: Strategy::Sequential,
            steps: vec![step],
            parallel_groups: vec![vec!["greeter".into()]],
            estimated_total_time: 1.0,
            source: Source::Rules,
        }
    }

    async fn evaluate(&self, _cx: &PlanContext<'_>, results: &[AgentResult]) -> EvaluationOutcome {
        chronicle_generic::evaluate(results)
    }

    async fn respond(
        &self,
        cx: &PlanContext<'_>,
        intent: &Intent,
        results: &[AgentResult],
    ) -> Value {
        chronicle_generic::compose(cx.agents, intent, results)
    }
}

/// `settings` with the domain plugged in: its agent, its planner, its texts.
fn install(mut settings: Settings) -> Settings {
    let info = AgentInfo::new("greeter", "greeting", "Greets the user");
    settings.registry.register(Arc::new(Greeter(info)));
    settings.planner = Arc::new(GreetingPlanner);
    settings.texts = Arc::new(English);
    settings
}

#[tokio::main]
pub async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let engine = Engine::open(Store::memory(), install(Settings::default())).await?;
    let request = StartRun {
        query: "Good morning".into(),
        hitl: Some(HitlMode::None),
        ..StartRun::default()
    };
    let run = engine.start_run(request).await?.run_id;
    let state = engine.wait_settled(run, Duration::from_secs(10)).await?;
    let response = state.supervisor.final_response.unwrap_or_default();
    println!("{}", response["answer"].as_str().unwrap_or_default());
    engine.shutdown().await;
    Ok(())
}
