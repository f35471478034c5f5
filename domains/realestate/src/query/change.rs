//! A request to change a deposit or rent (`전세금 3억을 10억으로 올려달래`), and which amount of a
//! query is a deposit and which a rent.

use serde_json::{Value, json};

use super::amounts::{Amount, parse_amounts};
use super::terms::{contains_any, ends_with_word, find_all_terms};

/// What a change request is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Subject {
    /// 보증금 / 전세금.
    Deposit,
    /// 월세 / 차임.
    MonthlyRent,
}

impl Subject {
    /// `deposit` or `monthly_rent`, as results and entities spell it.
    pub(crate) fn code(self) -> &'static str {
        match self {
            Self::Deposit => "deposit",
            Self::MonthlyRent => "monthly_rent",
        }
    }
}

/// "The landlord wants `old` to become `new`."
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ChangeRequest {
    pub old: Amount,
    pub new: Amount,
    pub subject: Subject,
}

impl ChangeRequest {
    /// `{subject, old, new}`, amounts in won.
    pub(crate) fn to_json(&self) -> Value {
        json!({"subject": self.subject.code(), "old": self.old.won, "new": self.new.won})
    }
}

/// Words that ask for a change. English endings need no entry of their own (`raised`, see
/// `terms`).
const CHANGE_TERMS: &[&str] = &[
    "올려", "올리", "올린", "올렸", "올라", "인상", "증액", "높여", "내려", "내리", "낮춰", "감액",
    "인하", "깎", "raise", "increase", "hike", "lower", "reduce", "decrease", "cut", "→", "->",
];
const DEPOSIT_TERMS: &[&str] = &["전세", "보증금", "전세금", "deposit", "jeonse", "key money"];
const RENT_TERMS: &[&str] = &["월세", "차임", "임대료", "monthly rent", "rent", "wolse"];

/// Marks after an amount that make it the new amount by themselves: `10억으로`.
const TARGET_AFTER: &[&str] = &["으로", "로"];
/// Marks that make an amount the end of a range as often as a new amount (`5억에서 7억까지`,
/// `from 500 million to 1 billion won`): a change only with a word of change.
const RANGE_END_AFTER: &[&str] = &["까지"];
const TARGET_BEFORE: &[&str] = &["→", "->"];
const RANGE_END_BEFORE: &[&str] = &["to", "into"];
/// Marks of the old amount: `3억을`, `100만원에서`, `from 300 million won`.
const SOURCE_AFTER: &[&str] = &["을", "를", "에서", "이던", "였", "인데", "이었", "이고"];

/// How an amount is marked as the one things should change to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TargetMark {
    /// `으로`, `→`: a change whatever else the text says.
    Change,
    /// `까지`, `to`: a change only when a word asks for one, else the end of a range.
    ChangeOrRangeEnd,
}

fn target_mark(text: &str, a: &Amount) -> Option<TargetMark> {
    let after = text[a.end..].trim_start();
    let before = text[..a.start].trim_end();
    let marked = |after_marks: &[&str], before_marks: &[&str]| {
        after_marks.iter().any(|p| after.starts_with(p))
            || before_marks.iter().any(|w| ends_with_word(before, w))
    };
    if marked(TARGET_AFTER, TARGET_BEFORE) {
        Some(TargetMark::Change)
    } else if marked(RANGE_END_AFTER, RANGE_END_BEFORE) {
        Some(TargetMark::ChangeOrRangeEnd)
    } else {
        None
    }
}

fn is_source(text: &str, a: &Amount) -> bool {
    let after = text[a.end..].trim_start();
    SOURCE_AFTER.iter().any(|p| after.starts_with(p))
        || ends_with_word(text[..a.start].trim_end(), "from")
}

/// Finds a request to change a deposit or rent: `전세금 3억을 10억으로 올려달래`,
/// `월세를 100만원에서 150만원으로`, `raise the deposit from 300 million won to 1 billion won`.
/// The new amount is the one marked as a target (`…으로`, `→ …`, and with a word of change also
/// `…까지`, `to …`); the old one the nearest amount before it, preferring one marked as a source
/// (`…을`, `…에서`, `from …`). Without marks, two amounts and a word of change read as
/// "first → second". `5억에서 7억까지` and `from 500 million to 1 billion won` without a word
/// of change are price ranges, not changes.
pub(crate) fn detect_change_request(text: &str) -> Option<ChangeRequest> {
    let amounts = parse_amounts(text);
    if amounts.len() < 2 {
        return None;
    }
    let has_change_word = contains_any(&text.to_lowercase(), CHANGE_TERMS);
    let target = amounts
        .iter()
        .enumerate()
        .skip(1)
        .find(|(_, a)| match target_mark(text, a) {
            Some(TargetMark::Change) => true,
            Some(TargetMark::ChangeOrRangeEnd) => has_change_word,
            None => false,
        })
        .map(|(i, _)| i);
    let (old_i, new_i) = match target {
        Some(t) => {
            let old = (0..t)
                .rev()
                .find(|&i| is_source(text, &amounts[i]))
                .unwrap_or(t - 1);
            (old, t)
        }
        None if has_change_word => (0, 1),
        None => return None,
    };
    let (old, new) = (amounts[old_i].clone(), amounts[new_i].clone());
    let subject = subject_before(text, new.start).unwrap_or(Subject::Deposit);
    Some(ChangeRequest { old, new, subject })
}

/// The subject named closest before byte `pos`: `월세를 …` is about rent even when `전세` came
/// earlier in the sentence.
fn subject_before(text: &str, pos: usize) -> Option<Subject> {
    subject_in(&text[..pos])
}

/// Each amount with the subject named between the previous amount and it:
/// `보증금 5000만원에 월세 100만원` → (5000만원, deposit), (100만원, rent).
pub(crate) fn amount_subjects(text: &str) -> Vec<(Amount, Option<Subject>)> {
    let mut prev_end = 0;
    parse_amounts(text)
        .into_iter()
        .map(|a| {
            let subject = subject_in(&text[prev_end..a.start]);
            prev_end = a.end;
            (a, subject)
        })
        .collect()
}

/// The subject mentioned last in `segment`.
fn subject_in(segment: &str) -> Option<Subject> {
    let head = segment.to_lowercase();
    let last = |terms: &[&str]| {
        terms
            .iter()
            .filter_map(|t| find_all_terms(&head, t).into_iter().next_back())
            .max()
    };
    match (last(DEPOSIT_TERMS), last(RENT_TERMS)) {
        (Some(d), Some(r)) => Some(if r > d {
            Subject::MonthlyRent
        } else {
            Subject::Deposit
        }),
        (Some(_), None) => Some(Subject::Deposit),
        (None, Some(_)) => Some(Subject::MonthlyRent),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const E: u64 = 100_000_000;
    const MAN: u64 = 10_000;

    #[test]
    fn change_requests() {
        let c = detect_change_request(
            "집주인이 전세금 3억을 10억으로 올려달래. 법적으로 해결방법 알려줘",
        )
        .unwrap();
        assert_eq!(
            (c.old.won, c.new.won, c.subject),
            (3 * E, 10 * E, Subject::Deposit)
        );

        let c =
            detect_change_request("보증금 3억에 월세 100만원인데 월세를 150만원으로 올려달래요")
                .unwrap();
        assert_eq!(
            (c.old.won, c.new.won, c.subject),
            (100 * MAN, 150 * MAN, Subject::MonthlyRent)
        );

        let c = detect_change_request(
            "My landlord wants to raise my jeonse deposit from 300 million won to 1 billion won",
        )
        .unwrap();
        assert_eq!(
            (c.old.won, c.new.won, c.subject),
            (3 * E, 10 * E, Subject::Deposit)
        );

        let c = detect_change_request(
            "The landlord wants 1.2 million won monthly rent instead of 1 million won, a raise",
        )
        .unwrap();
        assert_eq!(c.subject, Subject::MonthlyRent);
        assert_eq!(
            (c.old.won, c.new.won),
            (1_200_000, 1_000_000),
            "no markers: first → second"
        );

        let c = detect_change_request("전세 5억 → 5억 2천만원 인상 요구").unwrap();
        assert_eq!((c.old.won, c.new.won), (5 * E, 5 * E + 2000 * MAN));

        assert_eq!(detect_change_request("10억~15억 아파트 찾아줘"), None);
        assert_eq!(detect_change_request("전세 3억 아파트"), None);
        assert_eq!(detect_change_request("10억에서 15억 사이 매물"), None);
        // `까지` and `to` end a range unless a word asks for a change.
        assert_eq!(detect_change_request("5억에서 7억까지 아파트"), None);
        assert_eq!(
            detect_change_request("apartments from 500 million to 1 billion won"),
            None
        );
        let c = detect_change_request("월세를 100만원에서 150만원으로").unwrap();
        assert_eq!((c.old.won, c.new.won), (100 * MAN, 150 * MAN));
    }

    #[test]
    fn amount_subjects_follow_the_nearest_word() {
        let got: Vec<(u64, Option<Subject>)> =
            amount_subjects("보증금 5000만원에 월세 100만원, 관리비 10만원")
                .into_iter()
                .map(|(a, s)| (a.won, s))
                .collect();
        assert_eq!(
            got,
            vec![
                (5000 * MAN, Some(Subject::Deposit)),
                (100 * MAN, Some(Subject::MonthlyRent)),
                (10 * MAN, None)
            ]
        );
        let got = amount_subjects("deposit 500 million won, monthly rent 1 million won");
        assert_eq!(got[1].1, Some(Subject::MonthlyRent));
    }
}
