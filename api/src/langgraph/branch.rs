//! Where a run that names a `checkpoint` starts, as LangGraph clients branch a conversation.
//! With input: after a turn's head (the thread's head: the next turn, as always), or in place
//! of a turn's question from its input checkpoint (an edited message). Without input: the
//! latest turn goes back to one of its checkpoints (time travel), or an earlier turn's question
//! is asked again from its input checkpoint (a regenerated answer). A new turn records the turn
//! it follows (its run's `follows`), so it is given that branch of the conversation and no
//! other; see [`views::Turns`].

use chronicle_schemas::{Follows, RunId};
use uuid::Uuid;

use super::loaded::{self, Loaded};
use super::views::{self, Point, Turns};
use crate::error::{ApiError, ApiResult};

/// What a run without input does from the checkpoint it names.
#[derive(Debug)]
pub(crate) enum Again<'a> {
    /// The latest turn is restored to this checkpoint and goes on from there.
    Restore(Point<'a>),
    /// Turn `turn`'s question is asked again, in a new turn that follows what `turn` followed.
    Ask { turn: usize, follows: Follows },
}

/// The turn a new turn with input follows, given the checkpoint the run names (`None`: the
/// thread's head).
pub(crate) fn for_input(l: &Loaded, turns: &Turns<'_>, named: Option<&str>) -> ApiResult<Follows> {
    let Some(id) = named else {
        return Ok(Follows::Previous);
    };
    let p = loaded::point(l, turns, id)?;
    if Some(p) == views::head(turns) {
        return Ok(Follows::Previous);
    }
    if p.is_input() {
        return follows(l, turns, turns.parent_turn(p.turn));
    }
    if Some(p) == views::turn_head(turns, p.turn) {
        return follows(l, turns, Some(p.turn));
    }
    Err(ApiError::conflict(format!(
        "checkpoint {id} is inside a turn: a new message goes after a turn's last checkpoint, or in place of a turn's question from the turn's first checkpoint"
    )))
}

/// What a run without input does from checkpoint `id`.
pub(crate) fn without_input<'a>(l: &Loaded, turns: &Turns<'a>, id: &str) -> ApiResult<Again<'a>> {
    let p = loaded::point(l, turns, id)?;
    if Some(p) == views::head(turns) {
        return Err(ApiError::unprocessable(
            "the checkpoint is the thread's head: a run from it needs `input` or a `command`",
        ));
    }
    if p.turn + 1 == turns.states().len() && p.turn >= l.own_from {
        return Ok(Again::Restore(p));
    }
    if p.is_input() {
        let follows = follows(l, turns, turns.parent_turn(p.turn))?;
        return Ok(Again::Ask {
            turn: p.turn,
            follows,
        });
    }
    Err(ApiError::conflict(format!(
        "checkpoint {id} is of an earlier turn: time travel goes back within the latest turn, and an earlier turn's question is asked again from the turn's first checkpoint"
    )))
}

/// How a new turn records that it follows turn `target` (`None`: no turn, it starts over).
fn follows(l: &Loaded, turns: &Turns<'_>, target: Option<usize>) -> ApiResult<Follows> {
    let Some(t) = target else {
        return Ok(Follows::Start);
    };
    if t + 1 == turns.states().len() {
        return Ok(Follows::Previous);
    }
    if t < l.own_from {
        return Err(ApiError::conflict(format!(
            "thread {} copied that turn from another thread: a turn of its own can follow only its latest turn",
            l.id
        )));
    }
    let run = turns.states()[t].run_id.unwrap_or(RunId(Uuid::nil()));
    Ok(Follows::Turn(run))
}
