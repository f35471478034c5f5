//! The engine's words in Korean, as the original system said them: its approval message, its
//! command replies and help, its progress notes.

use chronicle_engine::texts::{Text, Texts};
use chronicle_schemas::{SupervisorTodo, TodoId};

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
            Text::TodoApproval { todo } => todo_approval(todo),
            Text::ToolApproval { tool, todo, target } => format!(
                "🔧 다음 도구 호출을 실행하시겠습니까?\n\n\
                 - 도구: {tool}\n\
                 - TODO ID: {todo}\n\
                 - 대상: {target}\n\n\
                 명령어:\n  \
                 /todo approve    - 승인\n  \
                 /todo reject     - 거부"
            ),
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
}

/// The original system's approval message, verbatim.
fn todo_approval(t: &SupervisorTodo) -> String {
    let deps = if t.dependencies.is_empty() {
        "없음".to_owned()
    } else {
        t.dependencies
            .iter()
            .map(TodoId::as_str)
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "📋 다음 작업을 실행하시겠습니까?\n\n\
         - TODO ID: {id}\n\
         - 작업명: {name}\n\
         - Agent: {agent}\n\
         - 우선순위: {prio}\n\
         - 의존성: {deps}\n\n\
         명령어:\n  \
         /todo approve    - 승인\n  \
         /todo skip {id}  - 건너뛰기\n  \
         /todos           - TODO 목록 조회",
        id = t.id,
        name = t.name,
        agent = t.agent_name,
        prio = t.priority.as_str(),
    )
}

#[cfg(test)]
mod tests {
    use chronicle_engine::agents::Registry;
    use chronicle_engine::todo::convert_plan;
    use chronicle_schemas::{PlanStep, Timestamp};

    use super::*;

    #[test]
    fn the_approval_message_is_the_original_one() {
        let t = SupervisorTodo {
            id: "todo_002".into(),
            name: "analysis_team 실행".into(),
            agent_name: "analysis_team".into(),
            priority: chronicle_schemas::TodoPriority::Low,
            dependencies: vec!["todo_001".into()],
            ..Default::default()
        };
        let m = Korean.say(Text::TodoApproval { todo: &t });
        assert!(m.starts_with("📋 다음 작업을 실행하시겠습니까?\n\n- TODO ID: todo_002\n- 작업명: analysis_team 실행\n- Agent: analysis_team\n- 우선순위: low\n- 의존성: todo_001\n\n명령어:\n"), "{m}");
        assert!(m.contains("  /todo skip todo_002  - 건너뛰기\n"), "{m}");
    }

    #[test]
    fn todos_are_named_as_the_original_converter_named_them() {
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
