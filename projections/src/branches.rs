//! Which seqs of a run lie on its effective history and which on a branch a restore abandoned,
//! from the run's restores alone: the one rule that `chronicle log`, `replay` and the API's event
//! streams mark abandoned events by.

use std::collections::HashMap;

use chronicle_schemas::{Envelope, Event};

/// A `RunRestored { to_seq }` at seq `s` makes the history "the effective history at `to_seq`,
/// then `s`", so every seq has one predecessor (`s - 1`, or `to_seq` for a restore) and the
/// effective history is the chain of predecessors from the newest seq. Everything off that chain
/// lies on an abandoned branch. (A restore may go back to a checkpoint of an abandoned branch,
/// so "between a restore and its `to_seq`" is not the rule: the chain is.)
#[derive(Clone, Debug, Default)]
pub struct Branches {
    /// Per seq up to the newest one known: on the effective history.
    effective: Vec<bool>,
}

impl Branches {
    /// From a run's restores, `(seq of the RunRestored → its to_seq)`, and its last seq.
    pub fn new(last_seq: u64, restores: &HashMap<u64, u64>) -> Self {
        let len = usize::try_from(last_seq).unwrap_or(usize::MAX - 1) + 1;
        let mut effective = vec![false; len];
        let mut s = last_seq;
        loop {
            effective[s as usize] = true;
            // Clamped like the projection does, so a malformed restore cannot loop.
            let prev = match restores.get(&s) {
                Some(&to) if s > 0 => to.min(s - 1),
                _ if s == 0 => break,
                _ => s - 1,
            };
            s = prev;
        }
        Self { effective }
    }

    /// Of a run's events, in seq order from 0.
    pub fn of_events(events: &[Envelope]) -> Self {
        let restores = restores_of(events.iter());
        Self::new(events.last().map_or(0, |e| e.seq), &restores)
    }

    /// Whether `seq` lies on an abandoned branch. A seq newer than the newest one known is on
    /// the effective history (nothing has left it yet).
    pub fn is_abandoned(&self, seq: u64) -> bool {
        !self.effective.get(seq as usize).copied().unwrap_or(true)
    }

    pub fn abandoned_count(&self) -> usize {
        self.effective.iter().filter(|e| !**e).count()
    }
}

/// The restores among `events`: seq → to_seq.
pub fn restores_of<'a>(events: impl Iterator<Item = &'a Envelope>) -> HashMap<u64, u64> {
    events
        .filter_map(|e| restore_of(e).map(|to| (e.seq, to)))
        .collect()
}

/// The `to_seq` of a `RunRestored`.
pub fn restore_of(env: &Envelope) -> Option<u64> {
    match &env.event {
        Event::RunRestored { to_seq, .. } => Some(*to_seq),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marks(last: u64, restores: &[(u64, u64)]) -> Vec<u64> {
        let b = Branches::new(last, &restores.iter().copied().collect());
        (0..=last).filter(|s| b.is_abandoned(*s)).collect()
    }

    #[test]
    fn the_chain_from_the_newest_seq_decides() {
        assert!(marks(5, &[]).is_empty());
        // A restore at 10 to 4 leaves 5..=9.
        assert_eq!(marks(12, &[(10, 4)]), vec![5, 6, 7, 8, 9]);
        // Back to a seq of the abandoned branch: 5..=7 are live again (7's history is 4, 5, 6),
        // and 8, 9, the first restore and what followed it are left.
        assert_eq!(marks(14, &[(10, 4), (13, 7)]), vec![8, 9, 10, 11, 12]);
        // Newer than known: effective.
        assert!(!Branches::new(3, &HashMap::new()).is_abandoned(9));
        // A malformed restore pointing forwards cannot loop.
        assert_eq!(marks(3, &[(2, 9)]), Vec::<u64>::new());
    }
}
