//! What a turn is given of its session: the earlier turns' queries and answers, newest kept
//! within the run's context budget, recorded as `SessionContextLoaded` in the `initialize` node's
//! append (so a replay shows exactly what the turn saw, and a re-execution after a crash reads
//! it from the state instead of the session again).

use chronicle_projections::RunState;
use chronicle_schemas::{ContextBudget, Event, Follows, PriorTurn};

use super::RunActor;
use crate::Result;

impl RunActor {
    /// The session's earlier turns for this run; `None` when there are none (or the run is a
    /// sub-agent's, which works on its task alone, or its budget is zero turns). They are the
    /// turn the run follows and the ones that turn follows in turn (the run before each, unless
    /// it was started on a branch or over), newest first until the budget's turns are read.
    pub(super) fn session_context(&self) -> Result<Option<Event>> {
        let s = &self.state().supervisor;
        let budget = s.config.context;
        if s.parent.is_some() || budget.turns_max == 0 {
            return Ok(None);
        }
        let me = self.live.run_id();
        let runs = self.shared.store.session_runs(&s.session_id)?;
        // The position of the oldest run read; every step goes to an earlier one.
        let mut at = runs.iter().position(|r| *r == me).unwrap_or(runs.len());
        let mut follows = s.config.follows;
        let mut turns = Vec::new();
        while turns.len() < budget.turns_max as usize {
            let next = match follows {
                Follows::Previous => at.checked_sub(1),
                Follows::Turn(run) => runs[..at].iter().position(|r| *r == run),
                Follows::Start => None,
            };
            let Some(i) = next else {
                at = 0;
                break;
            };
            at = i;
            let state = crate::runtime::runs::state(&self.shared, runs[i], None)?;
            // Sub-agent runs belong to their parent's turn.
            if state.supervisor.parent.is_none() {
                turns.push(prior_turn(runs[i], &state));
                follows = state.supervisor.config.follows;
            } else {
                follows = Follows::Previous;
            }
        }
        if turns.is_empty() {
            return Ok(None);
        }
        let (turns, left_out) = within(turns, budget);
        // Where the budget stopped the walk, the runs before the last one read are counted as
        // left out (at most: some may be on another branch).
        let omitted = left_out + at as u32;
        Ok(Some(Event::SessionContextLoaded { turns, omitted }))
    }
}

fn prior_turn(run_id: chronicle_schemas::RunId, state: &RunState) -> PriorTurn {
    let s = &state.supervisor;
    PriorTurn {
        run_id,
        seq: state.last_seq.unwrap_or(0),
        query: s.query.clone(),
        answer: s
            .final_response
            .as_ref()
            .map(chronicle_wire::answer_text)
            .unwrap_or_default(),
        status: s.run_status,
    }
}

/// The newest turns (`newest_first`) that fit the budget, oldest first, and how many were left
/// out. The oldest turn that still fits partly keeps its query and as much of its answer as fits.
fn within(newest_first: Vec<PriorTurn>, budget: ContextBudget) -> (Vec<PriorTurn>, u32) {
    let total = newest_first.len();
    let mut left = budget.bytes_max.min(chronicle_schemas::CONTEXT_BYTES_MAX) as usize;
    let mut kept = Vec::new();
    for mut turn in newest_first.into_iter().take(budget.turns_max as usize) {
        let query = turn.query.len();
        if query > left {
            break;
        }
        left -= query;
        if turn.answer.len() > left {
            cut(&mut turn.answer, left);
            kept.push(turn);
            break;
        }
        left -= turn.answer.len();
        kept.push(turn);
    }
    let omitted = (total - kept.len()) as u32;
    kept.reverse();
    (kept, omitted)
}

/// Cuts `text` to at most `bytes` bytes, at a character boundary, marking the cut with `…`.
fn cut(text: &mut String, bytes: usize) {
    const MARK: &str = "…";
    if bytes < MARK.len() {
        text.clear();
        return;
    }
    let mut end = bytes - MARK.len();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(MARK);
}

#[cfg(test)]
mod tests {
    use super::*;
    use chronicle_schemas::{RunId, RunStatus};

    fn turn(i: u128, query: &str, answer: &str) -> PriorTurn {
        PriorTurn {
            run_id: RunId::from_u128(i),
            seq: 9,
            query: query.into(),
            answer: answer.into(),
            status: RunStatus::Completed,
        }
    }

    #[test]
    fn the_newest_turns_are_kept_oldest_first_within_the_turn_budget() {
        let newest_first = vec![turn(3, "c", "3"), turn(2, "b", "2"), turn(1, "a", "1")];
        let budget = ContextBudget {
            turns_max: 2,
            bytes_max: 1000,
        };
        let (kept, omitted) = within(newest_first, budget);
        let queries: Vec<_> = kept.iter().map(|t| t.query.as_str()).collect();
        assert_eq!((queries, omitted), (vec!["b", "c"], 1));
    }

    #[test]
    fn the_byte_budget_cuts_the_oldest_answer_that_fits_at_a_character_boundary() {
        let newest_first = vec![
            turn(2, "서초구는?", "서초구 19억"),
            turn(1, "강남구", "강남구 아파트 14억 5,000만 원"),
        ];
        let budget = ContextBudget {
            turns_max: 6,
            bytes_max: 40,
        };
        let (kept, omitted) = within(newest_first, budget);
        assert_eq!((kept.len(), omitted), (2, 0));
        assert_eq!(kept[1].answer, "서초구 19억");
        let used: usize = kept.iter().map(|t| t.query.len() + t.answer.len()).sum();
        assert!(used <= 40, "{used} bytes");
        assert!(kept[0].answer.ends_with('…'), "{:?}", kept[0].answer);
        let zero = ContextBudget {
            turns_max: 6,
            bytes_max: 3,
        };
        let (kept, omitted) = within(vec![turn(1, "강남구", "x")], zero);
        assert_eq!((kept.len(), omitted), (0, 1));
    }
}
