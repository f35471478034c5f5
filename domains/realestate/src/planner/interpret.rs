//! A person's Korean words to a run that waits for them, read as the command they mean:
//! "승인" approves, "거절" rejects, "분석도 추가해줘" adds the analysis team. English words are the
//! engine's own reading ([`chronicle_engine::said::by_words`]).

use chronicle_engine::PlanContext;
use chronicle_engine::said::{by_words, normalized};

/// Words that approve.
const APPROVE: [&str; 16] = [
    "승인",
    "승인합니다",
    "승인해",
    "승인해줘",
    "승인할게",
    "네",
    "예",
    "응",
    "좋아",
    "좋아요",
    "진행",
    "진행해",
    "진행해줘",
    "계속",
    "확인",
    "오케이",
];
/// Words that reject.
const REJECT: [&str; 12] = [
    "거절",
    "거절합니다",
    "거절해",
    "거부",
    "아니",
    "아니요",
    "아니오",
    "안돼",
    "안 돼",
    "하지마",
    "중단",
    "취소",
];
/// Words that ask for more.
const ADD: [&str; 5] = ["추가", "넣어", "더 해", "도 해", "도 봐"];
/// A team by the words that name its work.
const TEAMS: [(&str, &[&str]); 3] = [
    ("analysis_team", &["분석", "analysis"]),
    (
        "document_team",
        &["문서", "보고서", "계약서", "리포트", "document", "report"],
    ),
    ("search_team", &["검색", "조회", "찾아", "search"]),
];

pub(super) fn interpret(cx: &PlanContext<'_>, said: &str) -> Option<String> {
    let words = normalized(said);
    if APPROVE.contains(&words.as_str()) {
        return Some("/todo approve".into());
    }
    if REJECT.contains(&words.as_str()) {
        return Some("/todo reject".into());
    }
    if ADD.iter().any(|w| words.contains(w)) {
        let team = TEAMS
            .iter()
            .find(|(name, terms)| {
                terms.iter().any(|t| words.contains(t)) && cx.agents.get(name).is_some()
            })
            .map(|(name, _)| *name);
        if let Some(team) = team {
            return Some(format!("/todo add {team}"));
        }
    }
    by_words(said, cx.agents)
}

#[cfg(test)]
mod tests {
    use chronicle_engine::llm::Llm;
    use chronicle_schemas::RunId;

    use super::*;

    #[test]
    fn korean_words_read_as_commands() {
        let agents = crate::agents::registry();
        let cx = PlanContext::new(RunId::from_u128(1), "q", &agents, Llm::new(None));
        let table = [
            ("승인", Some("/todo approve")),
            ("네!", Some("/todo approve")),
            ("거절합니다.", Some("/todo reject")),
            ("분석도 추가해줘", Some("/todo add analysis_team")),
            ("보고서도 넣어줘", Some("/todo add document_team")),
            ("approve", Some("/todo approve")),
            (
                "also add market_analysis",
                Some("/todo add market_analysis"),
            ),
            ("오늘 날씨 어때", None),
            ("분석", None),
        ];
        for (said, want) in table {
            assert_eq!(interpret(&cx, said).as_deref(), want, "{said}");
        }
    }
}
