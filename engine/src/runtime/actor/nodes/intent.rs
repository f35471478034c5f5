//! `analyze_intent`: the planner's reading of the query.

use chronicle_schemas::{Event, Phase, Source};
use serde_json::json;

use super::{RunActor, checkpoint, phase_change, planner_events};
use crate::Result;
use crate::plugin::planner::Intent;
use crate::plugin::texts::Text;

impl RunActor {
    pub(super) async fn analyze_intent(&mut self) -> Result<()> {
        let query = self.state().supervisor.query.clone();
        let announce = phase_change(self.state(), Phase::Planning);
        let mut ev = self.announce(announce.into_iter().collect()).await?;
        let cx = self.plan_context(&query);
        let intent = match self.state().supervisor.config.agent.clone() {
            // Agent mode: the agent reads the request itself; the planner is not asked.
            Some(agent) => Intent {
                intent_type: "agent".into(),
                confidence: 1.0,
                keywords: vec![],
                entities: json!({ "agent": agent }),
                source: Source::Request,
            },
            None => self.shared.settings.planner.intent(&cx).await,
        };
        ev.extend(planner_events(cx));
        ev.push(Event::Reasoning {
            message: self.shared.settings.texts.say(Text::IntentAnalyzed {
                intent_type: &intent.intent_type,
                confidence: intent.confidence,
                by_model: intent.source == Source::Llm,
            }),
        });
        ev.push(Event::IntentAnalyzed {
            intent_type: intent.intent_type,
            confidence: intent.confidence,
            keywords: intent.keywords,
            entities: intent.entities,
            source: intent.source,
        });
        ev.push(checkpoint(self.state(), "analyze_intent", 0));
        self.append(ev).await.map(drop)
    }
}
