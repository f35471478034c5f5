//! How the pages write times, waits and JSON.

use chronicle_schemas::Timestamp;
use serde_json::Value;

pub use chronicle_wire::{clock, date_time};

/// How long from `since` to `now`, in the largest unit that says it: `42 s`, `3 m`, `5 h 2 m`,
/// `2 d 4 h`.
pub fn wait(since: Timestamp, now: Timestamp) -> String {
    let s = (now.seconds_since(since).max(0.0)) as u64;
    match s {
        0..60 => format!("{s} s"),
        60..3_600 => format!("{} m", s / 60),
        3_600..86_400 => format!("{} h {} m", s / 3_600, s % 3_600 / 60),
        _ => format!("{} d {} h", s / 86_400, s % 86_400 / 3_600),
    }
}

/// JSON for a person: indented, cut after `max` characters.
pub fn pretty(v: &Value, max: usize) -> String {
    let text = serde_json::to_string_pretty(v).unwrap_or_default();
    cut(&text, max)
}

/// `text` cut after `max` characters, with `…` when it was longer.
pub fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((i, _)) => format!("{}…", &text[..i]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_in_the_largest_unit() {
        let t = |s: i64| Timestamp::from_micros(s * 1_000_000);
        assert_eq!(wait(t(0), t(42)), "42 s");
        assert_eq!(wait(t(0), t(180)), "3 m");
        assert_eq!(wait(t(0), t(5 * 3_600 + 120)), "5 h 2 m");
        assert_eq!(wait(t(0), t(2 * 86_400 + 4 * 3_600)), "2 d 4 h");
        // A clock that went back shows no wait, not a negative one.
        assert_eq!(wait(t(10), t(0)), "0 s");
    }

    #[test]
    fn cuts_by_characters() {
        assert_eq!(cut("한국어 텍스트", 3), "한국어…");
        assert_eq!(cut("abc", 3), "abc");
    }
}
