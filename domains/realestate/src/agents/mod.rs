//! The real-estate agents: the search, analysis and document teams and four specialist agents,
//! all answering deterministically from a small bundled dataset (`data/*.json`: listings, 13
//! months of price history, law article summaries, loan products — invented data, and the
//! answers say so). Each declares what it is, including routing hints in Korean and English.

use std::sync::{Arc, LazyLock};

pub(crate) use chronicle_engine::agents::{
    Agent, AgentContext, AgentError, AgentInfo, AgentOutput, Registry, RoutingHints,
};
use serde_json::{Map, Value, json};

use crate::query::Lang;
use data::dataset_source;
use filters::{Filters, input_object};

mod analysis;
pub(crate) mod data;
mod document;
mod draft;
pub(crate) mod filters;
mod increase;
mod market;
mod report;
mod search;

pub use analysis::AnalysisTeam;
pub use document::DocumentTeam;
pub use market::{InvestmentAdvisor, MarketAnalysis, RegionComparison};
pub use search::{PropertySearch, SearchTeam};

fn hints(keywords: &[&str], examples: &[&str]) -> RoutingHints {
    let own = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect();
    RoutingHints {
        keywords: own(keywords),
        examples: own(examples),
    }
}

/// What each agent declares, in one table.
static DECLARED: LazyLock<[AgentInfo; 7]> = LazyLock::new(|| {
    [
        AgentInfo::new(
            "search_team",
            "search",
            "법률 조문·시세·매물·대출 상품 검색 (laws, market prices, listings, loans)",
        )
        .with_hints(hints(
            &["시세", "매물", "법", "대출", "listings", "prices", "law", "loan"],
            &["강남역 근처 30평대 아파트 매매 시세 알려줘"],
        )),
        AgentInfo::new(
            "analysis_team",
            "analysis",
            "분석: 보증금·월세 인상률과 법정 상한(5%) 판단, 시장 분석 (increase vs legal cap, market analysis)",
        )
        .with_hints(hints(
            &["분석", "인상", "상한", "analyze", "analysis", "trend"],
            &["전세금 3억을 10억으로 올려달래"],
        )),
        AgentInfo::new(
            "document_team",
            "document",
            "문서 작성: 주택임대차계약서·매매계약서 초안과 검토 (draft and review lease or sales contracts)",
        )
        .with_category("contract")
        .with_hints(hints(
            &["계약서", "작성", "초안", "contract", "draft", "report"],
            &["임대차 계약서 작성해줘"],
        )),
        AgentInfo::new(
            "property_search",
            "search",
            "매물 검색: 지역·유형·거래·평형 조건 (listing search by region, type, deal, size)",
        )
        .with_hints(hints(&["매물", "listing", "listings"], &[])),
        AgentInfo::new(
            "market_analysis",
            "analysis",
            "시장 분석: 평균·최저·최고가, 3개월·12개월 변동률, 추세 (market statistics and trend)",
        )
        .with_hints(hints(&["시세", "동향", "market", "price trend"], &[])),
        AgentInfo::new(
            "region_comparison",
            "analysis",
            "지역 비교: 두 개 이상 지역의 가격·상승률·전세가율 비교 (compare districts)",
        )
        .with_hints(hints(&["비교", "compare", "versus", "vs"], &[])),
        AgentInfo::new(
            "investment_advisor",
            "analysis",
            "투자 자문: 추세·전세가율·가격으로 지역별 투자 의견 (investment ratings)",
        )
        .with_hints(hints(&["투자", "invest", "investment"], &[])),
    ]
});

/// The declaration of one of this domain's agents.
pub(crate) fn declared(name: &str) -> &'static AgentInfo {
    DECLARED
        .iter()
        .find(|a| a.name == name)
        .unwrap_or(&DECLARED[0])
}

/// The names of this domain's agents.
pub fn names() -> impl Iterator<Item = &'static str> {
    DECLARED.iter().map(|a| a.name.as_str())
}

/// The real-estate agents, registered: the teams (`search_team`, `analysis_team`,
/// `document_team`) and the specialists (`property_search`, `market_analysis`,
/// `region_comparison`, `investment_advisor`).
pub fn registry() -> Registry {
    let mut r = Registry::empty();
    let agents: [Arc<dyn Agent>; 7] = [
        Arc::new(SearchTeam),
        Arc::new(AnalysisTeam),
        Arc::new(DocumentTeam),
        Arc::new(PropertySearch),
        Arc::new(MarketAnalysis),
        Arc::new(RegionComparison),
        Arc::new(InvestmentAdvisor),
    ];
    for a in agents {
        r.register(a);
    }
    r
}

/// What one of this domain's agents is asked.
#[derive(Debug)]
pub(crate) struct Asked<'a> {
    pub ctx: &'a AgentContext,
    /// The input, an object.
    pub input: Map<String, Value>,
    /// The conditions the input, the intent and the query resolve to.
    pub f: Filters,
    /// The query's language.
    pub lang: Lang,
}

/// One of this domain's agents: it answers from the bundled dataset, and asks for anything
/// else (a file write) through the run. `dataset_agents!` writes its [`Agent`] implementation.
pub(crate) trait DatasetAgent {
    /// Its name in the declarations.
    const NAME: &'static str;

    async fn answer(&self, asked: Asked<'_>) -> Result<Value, AgentError>;
}

/// The [`Agent`] of each [`DatasetAgent`]: its declaration, no acting outside, and its input
/// read as an object and resolved into [`Filters`] before it is [`Asked`].
macro_rules! dataset_agents {
    ($($agent:ty),+ $(,)?) => {$(
        #[async_trait::async_trait]
        impl Agent for $agent {
            /// It computes over the bundled dataset; what it asks goes through the run.
            fn acts_outside(&self) -> bool {
                false
            }
            fn info(&self) -> &AgentInfo {
                declared(<$agent as DatasetAgent>::NAME)
            }

            async fn run(
                &self,
                ctx: &AgentContext,
                input: Value,
            ) -> Result<AgentOutput, AgentError> {
                let input = input_object(&input)?;
                let f = Filters::resolve(ctx, &input)?;
                let lang = Lang::of(&ctx.query);
                let asked = Asked { ctx, input, f, lang };
                Ok(AgentOutput {
                    result: self.answer(asked).await?,
                })
            }
        }
    )+};
}

dataset_agents!(
    SearchTeam,
    AnalysisTeam,
    DocumentTeam,
    PropertySearch,
    MarketAnalysis,
    RegionComparison,
    InvestmentAdvisor,
);

/// A specialist agent's reply: the shape the LangGraph supervisor's agents returned (`{status:
/// "success", agent, data, insights, params}`) with the agent reply contract's `summary` and
/// `sources`.
#[derive(Debug)]
pub(crate) struct Reply {
    /// One sentence on what the agent found, in the user's language.
    pub summary: String,
    pub data: Value,
    pub insights: Vec<String>,
}

impl Reply {
    /// `agent`'s result, found in the bundled dataset (its source) under the conditions `f`
    /// (its `params`).
    pub(crate) fn into_result(self, agent: &str, f: &Filters, lang: Lang) -> Value {
        json!({
            "status": "success",
            "agent": agent,
            "summary": self.summary,
            "data": self.data,
            "insights": self.insights,
            "sources": [dataset_source(lang)],
            "params": f.to_json(),
        })
    }
}

/// What the agents' tests share.
#[cfg(test)]
pub(crate) mod testing {
    use super::AgentContext;

    /// The context of an agent asked `query` in a run's first turn.
    pub(crate) fn ctx(query: &str) -> AgentContext {
        AgentContext {
            turn: Default::default(),
            query: query.into(),
            ..AgentContext::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use chronicle_schemas::contract::AgentReply;

    use super::*;

    #[test]
    fn the_registry_lists_the_agents_with_their_declarations() {
        let r = registry();
        let names: Vec<&str> = r.names().collect();
        assert_eq!(
            names,
            vec![
                "analysis_team",
                "document_team",
                "investment_advisor",
                "market_analysis",
                "property_search",
                "region_comparison",
                "search_team",
            ]
        );
        let meta = |n: &str| {
            let a = r.get(n).unwrap();
            (a.team().to_owned(), a.category().to_owned())
        };
        assert_eq!(meta("search_team"), ("search".into(), "general".into()));
        assert_eq!(meta("analysis_team"), ("analysis".into(), "general".into()));
        assert_eq!(
            meta("document_team"),
            ("document".into(), "contract".into())
        );
        assert_eq!(meta("property_search"), ("search".into(), "general".into()));
        assert_eq!(
            meta("investment_advisor"),
            ("analysis".into(), "general".into())
        );
        for info in r.infos() {
            assert!(!info.purpose.is_empty(), "{}", info.name);
            assert!(!info.hints.keywords.is_empty(), "{}", info.name);
            assert_eq!(declared(&info.name), info);
        }
    }

    /// Same input, same output: replays and recoveries re-run agents and must get what the log
    /// recorded.
    #[tokio::test]
    async fn the_agents_are_deterministic() {
        let r = registry();
        let queries = [
            "집주인이 전세금 3억을 10억으로 올려달래. 법적으로 해결방법 알려줘",
            "강남역 근처 30평대 아파트 매매 시세 알려줘",
            "Compare Gangnam and Mapo apartments for sale",
            "Draft a lease contract: landlord Kim Minsu, tenant John Smith, deposit 500 million won",
            "송파 빌라 투자해도 될까?",
        ];
        for q in queries {
            let mut ctx = testing::ctx(q);
            for name in r.names() {
                let agent = r.get(name).unwrap();
                let a = agent.run(&ctx, Value::Null).await.unwrap();
                let b = agent.run(&ctx, Value::Null).await.unwrap();
                assert_eq!(a, b, "{name} on {q}");
                // Later agents see earlier results, as in a run.
                ctx.team_results.insert(name.to_owned(), a.result);
            }
        }
    }

    /// Every agent speaks the agent reply contract: its result reads as an `AgentReply` (the
    /// contract's fields with the contract's types) with a summary and its sources.
    #[tokio::test]
    async fn every_agent_replies_by_the_contract() {
        let r = registry();
        let queries = [
            "집주인이 전세금 3억을 10억으로 올려달래. 법적으로 해결방법 알려줘",
            "강남역 근처 30평대 아파트 매매 시세 알려줘",
            "Compare Gangnam and Mapo apartments for sale",
            "Research the latest listings in Gangnam, analyze the trends and write a short report",
            "관악구 아파트 전세",
        ];
        for q in queries {
            let mut ctx = testing::ctx(q);
            for name in r.names() {
                let result = r
                    .get(name)
                    .unwrap()
                    .run(&ctx, Value::Null)
                    .await
                    .unwrap()
                    .result;
                let reply: AgentReply = serde_json::from_value(result.clone())
                    .unwrap_or_else(|e| panic!("{name} on {q}: {e}: {result}"));
                let summary = reply.summary.unwrap_or_default();
                assert!(!summary.trim().is_empty(), "{name} on {q}: no summary");
                assert!(!reply.sources.is_empty(), "{name} on {q}: no sources");
                ctx.team_results.insert(name.to_owned(), result);
            }
        }
    }

    #[tokio::test]
    async fn the_agents_refuse_non_object_input() {
        let r = registry();
        let ctx = AgentContext::default();
        for name in r.names() {
            let err = r
                .get(name)
                .unwrap()
                .run(&ctx, json!([1, 2]))
                .await
                .unwrap_err();
            assert_eq!(
                err,
                AgentError::fatal("agent input must be a JSON object, got an array"),
                "{name}"
            );
        }
    }
}
