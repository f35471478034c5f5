//! The engine's words in Korean, as the LangGraph supervisor said them: its command replies and
//! help, its progress notes. What is said to the person who asked (an approval's message, a
//! rejection in the answer) follows the query's language: Korean for a Korean query, English
//! otherwise, and an approval says what will run and with what in the domain's own terms
//! (`in Gangnam-gu, Seoul`, `for sale`).

use chronicle_engine::texts::{English, Text, Texts, args_text, sentence, value_text};
use chronicle_schemas::SupervisorTodo;
use serde_json::Value;

use crate::query::{DealType, Lang, english_region, format_won, parse_property_type};

/// Korean texts.
#[derive(Clone, Copy, Debug, Default)]
pub struct Korean;

/// The command help, in Korean.
pub const HELP_KO: &str = "\
사용 가능한 명령어:
  /todos                                  TODO 목록과 요약, 현재 TODO
  /todo approve [<approval_id>|<todo_id>|all]  대기 중인 승인 (여러 개면 id 필요)
  /todo reject [<id>] [reason]            거부 (TODO는 건너뜀, 재시도 없음)
  /todo skip <todo_id> [reason]           TODO 건너뛰기
  /todo add <agent> [after <id>[,<id>]]   TODO 추가
  /todo update <todo_id> <status>         상태 수동 변경 (pending, in_progress, completed, failed, skipped, blocked, waiting_approval)
  /checkpoint list                        checkpoint 목록
  /checkpoint restore <checkpoint_id>     checkpoint로 복원 후 계속 실행
  /help                                   이 도움말";

impl Texts for Korean {
    fn say(&self, text: Text<'_>) -> String {
        match text {
            Text::RequestReceived { query } => format!("요청 접수: {query}"),
            Text::IntentAnalyzed {
                intent_type,
                confidence,
                by_model,
            } => format!(
                "의도 분석 완료: {intent_type} (신뢰도 {confidence:.2}, {})",
                if by_model { "LLM" } else { "규칙 기반" }
            ),
            Text::PlanBuilt { agents, strategy } => format!(
                "실행 계획 수립: {} ({strategy} 전략, TODO {}개)",
                agents.join(" → "),
                agents.len()
            ),
            Text::TodoName { agent } => format!("{agent} 실행"),
            Text::TodoDescription { agent } => {
                format!("{agent}을(를) 실행하여 데이터 수집/분석 수행")
            }
            Text::AddedTodoName { agent } => format!("{agent} 추가 실행"),
            Text::AddedTodoDescription { agent } => format!("사용자가 추가한 {agent} 실행 작업"),
            Text::RetryTodoName { agent } => format!("{agent} 재시도"),
            Text::RetryTodoDescription { agent } => {
                format!("평가 결과에 따라 {agent}을(를) 다시 실행")
            }
            Text::TodoStarted {
                todo,
                agent,
                attempt,
            } => format!("{todo} 실행 시작: {agent} (시도 {attempt})"),
            Text::TodoRerun {
                todo,
                agent,
                attempt,
            } => {
                format!("{todo}의 에이전트가 완료되지 않았습니다: {agent} 재실행 (시도 {attempt})")
            }
            Text::TodoCompleted {
                todo,
                agent,
                duration_ms,
            } => format!("{todo} 완료: {agent} ({duration_ms} ms)"),
            Text::Evaluated { feedback } => format!("결과 평가: {feedback}"),
            Text::RetryRound { round, agents } => {
                format!("평가에 따라 재시도 (라운드 {round}): {}", agents.join(", "))
            }
            Text::EvaluationAdded { round, agents } => {
                format!(
                    "평가에 따라 계획에 추가 (라운드 {round}): {}",
                    agents.join(", ")
                )
            }
            Text::Aggregated { agents } => format!("결과 집계: {agents}개 에이전트 결과"),
            Text::Responding => "최종 응답 생성".into(),
            Text::TodoApproval { todo, args } => todo_approval(todo, args, Lang::Ko),
            Text::ToolApproval {
                tool,
                todo,
                target: "",
            } => {
                format!("{todo}의 에이전트가 {tool}을(를) 호출하도록 허용할까요?")
            }
            Text::ToolApproval { tool, todo, target } => {
                format!("{todo}의 에이전트가 {target}에 {tool}을(를) 호출하도록 허용할까요?")
            }
            Text::TodoApproved { todo } => format!("TODO {todo} 실행이 승인되었습니다."),
            Text::ToolCallApproved { todo, tool } => {
                format!("TODO {todo}의 {tool} 도구 호출이 승인되었습니다.")
            }
            Text::TodoRejected { todo, reason } => {
                format!("TODO {todo}가 거부되었습니다. ({reason})")
            }
            Text::ToolCallRejected { todo, tool, reason } => {
                format!("TODO {todo}의 {tool} 도구 호출이 거부되었습니다. ({reason})")
            }
            Text::TodoSkipped { todo, reason } => {
                format!("TODO {todo}가 건너뛰어졌습니다. ({reason})")
            }
            Text::TodoAdded { todo } => format!("새 TODO {todo}가 추가되었습니다."),
            Text::TodoUpdated { todo, status } => {
                format!("TODO {todo} 상태가 {status}로 변경되었습니다.")
            }
            Text::Restored { checkpoint } => {
                format!("checkpoint {checkpoint} 시점으로 복원되었습니다.")
            }
            Text::RejectedInAnswer {
                todo,
                agent,
                by,
                comment,
            } => {
                let why = comment.map_or(String::new(), |c| format!(" (사유: {c})"));
                format!(
                    "{by}님이 {todo}({agent}) 실행을 거절했습니다{why}. 이 작업은 실행되지 않았습니다."
                )
            }
            Text::TurnEndedOnReject {
                todo,
                agent,
                tool,
                by,
                comment,
            } => {
                let what = tool.map_or(" 실행".to_owned(), |t| format!("의 {t} 호출"));
                let why = comment.map_or(String::new(), |c| format!(" (사유: {c})"));
                format!(
                    "{by}님이 {todo}({agent}){what}을 거절하여 요청을 여기서 마칩니다{why}. \
                     남은 작업은 건너뛰었습니다. 다르게 진행하려면 다시 요청해 주세요."
                )
            }
            Text::Help => HELP_KO.to_owned(),
        }
    }

    fn say_to(&self, query: &str, text: Text<'_>) -> String {
        match (Lang::of(query), text) {
            (lang, Text::TodoApproval { todo, args }) => todo_approval(todo, args, lang),
            (Lang::Ko, text) => self.say(text),
            (Lang::En, text) => English.say(text),
        }
    }
}

/// What a TODO's approval says: which agent runs for which TODO and what it does, then the
/// conditions it gets, in the query's language.
fn todo_approval(t: &SupervisorTodo, args: &Value, lang: Lang) -> String {
    let with = conditions(args, lang);
    match lang {
        Lang::Ko => {
            let what = match t.agent_purpose.trim() {
                "" => String::new(),
                p => format!(" {}", sentence(p)),
            };
            let with = if with.is_empty() {
                "없음".to_owned()
            } else {
                with
            };
            format!(
                "{id}: {agent}을(를) 실행할까요?{what}\n조건: {with}",
                id = t.id,
                agent = t.agent_name
            )
        }
        Lang::En => {
            // The plan's purposes are Korean; the domain's agents say in English what they do.
            let what = match english_purpose(&t.agent_name) {
                Some(p) => format!(" {p}"),
                None if t.agent_purpose.is_ascii() && !t.agent_purpose.is_empty() => {
                    format!(" {}", sentence(&t.agent_purpose))
                }
                None => String::new(),
            };
            let with = if with.is_empty() {
                "no conditions".to_owned()
            } else {
                with
            };
            format!(
                "Run {agent} for {id}?{what}\nWith: {with}",
                id = t.id,
                agent = t.agent_name
            )
        }
    }
}

/// What each of the domain's agents does, in English.
fn english_purpose(agent: &str) -> Option<&'static str> {
    Some(match agent {
        "search_team" => "It searches laws, market prices, listings and loans.",
        "analysis_team" => {
            "It analyses a deposit or rent increase against the legal cap, and the market."
        }
        "document_team" => "It drafts or reviews a lease or sales contract, or writes a report.",
        "property_search" => "It searches listings by district, type, deal and size.",
        "market_analysis" => "It computes market statistics and the price trend.",
        "region_comparison" => "It compares districts by price, growth and jeonse ratio.",
        "investment_advisor" => "It rates districts for investment.",
        _ => return None,
    })
}

/// An agent's conditions in the domain's terms (`지역 서울특별시 강남구 · 거래 매매`,
/// `in Gangnam-gu, Seoul; for sale`); keys it does not know as `key: value`. The plan's Korean
/// `purpose` is said by the first line in Korean and left out in English.
fn conditions(args: &Value, lang: Lang) -> String {
    let Value::Object(map) = args else {
        return value_text(args);
    };
    // Where, what, which deal, how big, how much; then the rest as the input has it.
    const FIRST: [&str; 7] = crate::query::SEARCH_KEYS;
    let ordered = FIRST
        .iter()
        .filter_map(|k| map.get_key_value(*k))
        .chain(map.iter().filter(|(k, _)| !FIRST.contains(&k.as_str())));
    let mut parts = Vec::new();
    for (key, v) in ordered.filter(|(_, v)| !v.is_null()) {
        let part = match (key.as_str(), lang) {
            ("purpose", _) => continue,
            ("region" | "regions", Lang::Ko) => format!("지역 {}", value_text(v)),
            ("region" | "regions", Lang::En) => format!("in {}", each(v, english_region)),
            ("deal_type", _) => {
                let deal = v.as_str().and_then(DealType::from_param);
                match (deal, lang) {
                    (Some(d), Lang::Ko) => format!("거래 {}", d.ko()),
                    (Some(d), Lang::En) => format!("for {}", d.en()),
                    (None, Lang::Ko) => format!("거래 {}", value_text(v)),
                    (None, Lang::En) => format!("deal: {}", value_text(v)),
                }
            }
            ("property_type", _) => {
                let kind = v.as_str().and_then(parse_property_type);
                match (kind, lang) {
                    (Some(k), Lang::Ko) => format!("유형 {}", k.ko()),
                    (Some(k), Lang::En) => format!("{}s", k.en()),
                    (None, Lang::Ko) => format!("유형 {}", value_text(v)),
                    (None, Lang::En) => format!("type: {}", value_text(v)),
                }
            }
            ("size_range", _) => match (bounds(v), lang) {
                (Some(b), Lang::Ko) => format!("평형 {b}평"),
                (Some(b), Lang::En) => format!("{b} pyeong"),
                (None, _) => format!("{key}: {}", value_text(v)),
            },
            ("price_range", _) => {
                let won = |b: &str| {
                    v.get(b)
                        .and_then(Value::as_u64)
                        .map(|w| format_won(w, lang))
                };
                match (won("min"), won("max"), lang) {
                    (None, None, _) => format!("{key}: {}", value_text(v)),
                    (min, max, Lang::Ko) => {
                        format!(
                            "가격 {}~{}",
                            min.unwrap_or_default(),
                            max.unwrap_or_default()
                        )
                    }
                    (min, max, Lang::En) => format!(
                        "priced {}–{}",
                        min.unwrap_or_default(),
                        max.unwrap_or_default()
                    ),
                }
            }
            ("amounts", _) => {
                let won: Vec<String> = v
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_u64)
                    .map(|w| format_won(w, lang))
                    .collect();
                match lang {
                    Lang::Ko => format!("금액 {}", won.join(", ")),
                    Lang::En => format!("amounts: {}", won.join(", ")),
                }
            }
            ("keywords", Lang::Ko) => format!("키워드 {}", value_text(v)),
            ("analysis_type", Lang::Ko) => format!("분석 유형 {}", value_text(v)),
            ("document_type", Lang::Ko) => format!("문서 유형 {}", value_text(v)),
            ("feedback", Lang::Ko) => format!("요청 \"{}\"", value_text(v)),
            ("feedback", Lang::En) => format!("you said \"{}\"", value_text(v)),
            _ => args_text(&serde_json::json!({ key: v }), &[]),
        };
        parts.push(part);
    }
    parts.join(match lang {
        Lang::Ko => " · ",
        Lang::En => "; ",
    })
}

/// Every region of a `region` string or a `regions` list, through `name`.
fn each(v: &Value, name: fn(&str) -> String) -> String {
    match v {
        Value::Array(items) => items
            .iter()
            .map(|i| i.as_str().map_or_else(|| value_text(i), name))
            .collect::<Vec<_>>()
            .join(", "),
        Value::String(s) => name(s),
        other => value_text(other),
    }
}

/// `30~40` of a `{min, max}` (either may be missing: `30~`, `~40`).
fn bounds(v: &Value) -> Option<String> {
    let min = v.get("min").and_then(Value::as_u64);
    let max = v.get("max").and_then(Value::as_u64);
    if min.is_none() && max.is_none() {
        return None;
    }
    let show = |b: Option<u64>| b.map_or(String::new(), |b| b.to_string());
    Some(format!("{}~{}", show(min), show(max)))
}

#[cfg(test)]
mod tests {
    use chronicle_engine::agents::Registry;
    use chronicle_engine::todo::convert_plan;
    use chronicle_schemas::{PlanStep, Timestamp};

    use super::*;

    #[test]
    fn an_approval_says_what_runs_with_what_in_the_querys_language() {
        let t = SupervisorTodo {
            id: "todo_001".into(),
            name: "search_team 실행".into(),
            agent_name: "search_team".into(),
            agent_purpose: "매물과 시세 정보 수집".into(),
            ..Default::default()
        };
        let args = serde_json::json!({
            "region": "서울특별시 강남구", "deal_type": "매매", "property_type": "아파트",
            "size_range": {"min": 30, "max": 40}, "purpose": "매물과 시세 정보 수집",
            "keywords": ["시세"],
        });
        let approval = Text::TodoApproval {
            todo: &t,
            args: &args,
        };
        let ko = Korean.say_to("강남구 아파트 시세", approval);
        assert_eq!(
            ko,
            "todo_001: search_team을(를) 실행할까요? 매물과 시세 정보 수집.\n\
             조건: 지역 서울특별시 강남구 · 유형 아파트 · 거래 매매 · 평형 30~40평 · 키워드 시세"
        );
        let en = Korean.say_to("apartments for sale in Gangnam", approval);
        assert_eq!(
            en,
            "Run search_team for todo_001? It searches laws, market prices, listings and loans.\n\
             With: in Gangnam-gu, Seoul; apartments; for sale; 30~40 pyeong; keywords: 시세"
        );
        // No terminal commands: a UI shows its own buttons, the terminal its own commands.
        for m in [&ko, &en] {
            assert!(!m.contains("/todo"), "{m}");
        }
        // A rejection in the answer follows the query's language too.
        let rejected = Text::RejectedInAnswer {
            todo: &t.id,
            agent: "search_team",
            by: "local",
            comment: Some("not now"),
        };
        assert_eq!(
            Korean.say_to("Find apartments", rejected),
            "local rejected todo_001 (search_team): not now. It did not run."
        );
        assert!(
            Korean
                .say_to("아파트", rejected)
                .contains("거절했습니다 (사유: not now)")
        );
    }

    #[test]
    fn todos_are_named_in_korean_by_the_converter() {
        let step = PlanStep {
            agent_name: "analysis_team".into(),
            ..PlanStep::default()
        };
        let t = &convert_plan(&[step], 0, Timestamp(0), &Registry::empty(), &Korean)[0];
        assert_eq!(t.name, "analysis_team 실행");
        assert_eq!(
            t.description,
            "analysis_team을(를) 실행하여 데이터 수집/분석 수행"
        );
    }
}
