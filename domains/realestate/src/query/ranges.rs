//! Size ranges in 평 (`30평대`, `25~35평`, `40평 이하`) and price ranges in won (`10억 이하`,
//! `5억부터 7억까지`, `between 1 billion and 1.5 billion won`).

use serde_json::{Map, Value, json};

use super::amounts::{Amount, parse_amounts};
use super::terms::{ends_with_word, strip_prefix_ci};

/// Sizes in 평, half-open as `30평대` = `{min: 30, max: 40}` says: `min <= size < max`. So
/// `32평` is `{min: 32, max: 33}` and `25~35평` is `{min: 25, max: 36}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SizeRange {
    pub min: Option<u32>,
    pub max: Option<u32>,
}

impl SizeRange {
    pub(crate) fn contains(self, size: u32) -> bool {
        self.min.is_none_or(|m| size >= m) && self.max.is_none_or(|m| size < m)
    }

    /// `{min, max}` with only the bounds there are.
    pub(crate) fn to_json(self) -> Value {
        bounds_json(self.min.map(u64::from), self.max.map(u64::from))
    }
}

/// Prices in won, inclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PriceRange {
    pub min: Option<u64>,
    pub max: Option<u64>,
}

impl PriceRange {
    pub(crate) fn contains(self, price: u64) -> bool {
        self.min.is_none_or(|m| price >= m) && self.max.is_none_or(|m| price <= m)
    }

    /// `{min, max}` with only the bounds there are.
    pub(crate) fn to_json(self) -> Value {
        bounds_json(self.min, self.max)
    }
}

fn bounds_json(min: Option<u64>, max: Option<u64>) -> Value {
    let mut m = Map::new();
    if let Some(v) = min {
        m.insert("min".into(), json!(v));
    }
    if let Some(v) = max {
        m.insert("max".into(), json!(v));
    }
    Value::Object(m)
}

/// Words that start with 평 but are not the unit (`30 평균`).
const NOT_PYEONG: &[&str] = &["평균", "평가", "평일", "평화", "평소", "평생", "평면"];

/// A size unit at the start of `rest`: whether it names a band (`평대`, `30s pyeong`) and what
/// follows it.
fn pyeong_unit(rest: &str) -> Option<(bool, &str)> {
    if let Some(r) = rest.strip_prefix("평대") {
        return Some((true, r));
    }
    if let Some(r) = rest.strip_prefix("평형") {
        return Some((false, r));
    }
    if rest.starts_with('평') {
        return (!NOT_PYEONG.iter().any(|w| rest.starts_with(w)))
            .then(|| (false, &rest['평'.len_utf8()..]));
    }
    if let Some(r) = strip_prefix_ci(rest, "pyeong") {
        return Some((false, r));
    }
    strip_prefix_ci(rest, "s pyeong")
        .or_else(|| strip_prefix_ci(rest, "s-pyeong"))
        .map(|r| (true, r))
}

/// `30평대` → 30..40, `32평` → 32..33, `30~40평` → 30..41, `30평 이상` → 30.., `40평 이하`
/// → ..41, `40평 미만` → ..40, `30s pyeong` → 30..40, `30-40 pyeong` → 30..41.
pub(crate) fn parse_size_range(text: &str) -> Option<SizeRange> {
    let cs: Vec<(usize, char)> = text.char_indices().collect();
    let number_at = |k: usize| -> Option<(u32, usize)> {
        let mut j = k;
        let mut n: u32 = 0;
        while let Some(d) = cs.get(j).and_then(|&(_, c)| c.to_digit(10)) {
            n = n.checked_mul(10)?.checked_add(d)?;
            j += 1;
        }
        (j > k).then_some((n, j))
    };
    let skip = |mut j: usize, set: &[char]| {
        while cs.get(j).is_some_and(|&(_, c)| set.contains(&c)) {
            j += 1;
        }
        j
    };
    for k in 0..cs.len() {
        if k > 0 && matches!(cs[k - 1].1, '0'..='9' | '.') {
            continue;
        }
        let Some((a, after_a)) = number_at(k) else {
            continue;
        };
        // A second number after `~` or `-` makes a range.
        let dash = skip(after_a, &[' ']);
        let (b, after_num) = match cs.get(dash).map(|&(_, c)| c) {
            Some('~' | '-' | '～' | '–') => match number_at(skip(dash + 1, &[' '])) {
                Some((b, end)) => (Some(b), end),
                None => (None, after_a),
            },
            _ => (None, after_a),
        };
        let unit_at = skip(after_num, &[' ', '-']);
        let rest = cs.get(unit_at).map_or("", |&(i, _)| &text[i..]);
        let Some((band, after_unit)) = pyeong_unit(rest) else {
            continue;
        };
        return Some(match (b, band) {
            (Some(b), _) => SizeRange {
                min: Some(a.min(b)),
                max: Some(a.max(b) + 1),
            },
            (None, true) => SizeRange {
                min: Some(a),
                max: Some(a + 10),
            },
            (None, false) => size_bound(a, after_unit),
        });
    }
    None
}

/// One size and what follows it: `30평 이상` → 30.., `40평 이하` → ..41, `32평` → 32..33.
fn size_bound(a: u32, after_unit: &str) -> SizeRange {
    let tail = after_unit.trim_start().to_lowercase();
    let (min, max) = if tail.starts_with("이상") || tail.starts_with("or more") {
        (Some(a), None)
    } else if tail.starts_with("초과") {
        (Some(a + 1), None)
    } else if tail.starts_with("이하") || tail.starts_with("or less") {
        (None, Some(a + 1))
    } else if tail.starts_with("미만") {
        (None, Some(a))
    } else {
        (Some(a), Some(a + 1))
    };
    SizeRange { min, max }
}

/// Words between two amounts that make them a range by themselves (`10억~15억`).
const RANGE_JOINERS: &[&str] = &["~", "-", "～", "–", "〜"];
const BELOW_AFTER: &[&str] = &["이하", "이내", "까지", "아래"];
const BELOW_BEFORE: &[&str] = &[
    "under",
    "below",
    "less than",
    "up to",
    "at most",
    "max",
    "within",
];
const ABOVE_AFTER: &[&str] = &["이상", "부터", "넘"];
const ABOVE_BEFORE: &[&str] = &["over", "above", "more than", "at least", "min"];

/// `10억 이하`, `15억 미만`, `5억 이상`, `5억부터`, `10억~15억`, `5억에서 7억 사이`, `5억부터 7억까지`,
/// `under 1 billion won`, `over 500 million won`, `between 1 billion and 1.5 billion won`,
/// `from 500 million to 1 billion won`. A change request (`3억을 10억으로`) is not a range:
/// `Query::parse` asks for a range only when the text holds none.
pub(crate) fn parse_price_range(text: &str) -> Option<PriceRange> {
    let amounts = parse_amounts(text);
    amounts
        .windows(2)
        .find_map(|pair| pair_range(text, &pair[0], &pair[1]))
        .or_else(|| amounts.iter().find_map(|a| price_bound(text, a)))
}

/// Two amounts that make a range: `A~B`, `A에서 B 사이`, `A부터 B까지`, `between A and B`,
/// `from A to B`.
fn pair_range(text: &str, a: &Amount, b: &Amount) -> Option<PriceRange> {
    let between = text[a.end..b.start].trim();
    let before = text[..a.start].trim_end();
    let after = text[b.end..].trim_start();
    let joined = RANGE_JOINERS.contains(&between)
        || (matches!(between, "에서" | "부터")
            && (after.starts_with("사이") || after.starts_with("까지")))
        || (between.eq_ignore_ascii_case("and") && ends_with_word(before, "between"))
        || (between.eq_ignore_ascii_case("to") && ends_with_word(before, "from"));
    joined.then(|| PriceRange {
        min: Some(a.won.min(b.won)),
        max: Some(a.won.max(b.won)),
    })
}

/// One amount with a bound word: `10억 이하`, `15억 미만`, `5억 이상`, `5억 초과`, `under …`.
fn price_bound(text: &str, a: &Amount) -> Option<PriceRange> {
    let after = text[a.end..].trim_start();
    let before = text[..a.start].trim_end();
    let marked = |after_words: &[&str], before_words: &[&str]| {
        after_words.iter().any(|w| after.starts_with(w))
            || before_words.iter().any(|w| ends_with_word(before, w))
    };
    let (min, max) = if after.starts_with("미만") {
        (None, Some(a.won.saturating_sub(1)))
    } else if after.starts_with("초과") {
        (Some(a.won.saturating_add(1)), None)
    } else if marked(BELOW_AFTER, BELOW_BEFORE) {
        (None, Some(a.won))
    } else if marked(ABOVE_AFTER, ABOVE_BEFORE) {
        (Some(a.won), None)
    } else {
        return None;
    };
    Some(PriceRange { min, max })
}

#[cfg(test)]
mod tests {
    use super::*;

    const E: u64 = 100_000_000;

    #[test]
    fn size_ranges() {
        let r = |min, max| Some(SizeRange { min, max });
        let table = [
            ("강남역 근처 30평대 아파트", r(Some(30), Some(40))),
            ("32평 아파트", r(Some(32), Some(33))),
            ("30 평 아파트", r(Some(30), Some(31))),
            ("25평형", r(Some(25), Some(26))),
            ("30~40평", r(Some(30), Some(41))),
            ("25~35평", r(Some(25), Some(36))),
            ("30 - 40평", r(Some(30), Some(41))),
            ("30평 이상", r(Some(30), None)),
            ("30평 초과", r(Some(31), None)),
            ("40평 이하", r(None, Some(41))),
            ("40평 미만", r(None, Some(40))),
            ("30s pyeong apartment", r(Some(30), Some(40))),
            ("a 32-pyeong flat", r(Some(32), Some(33))),
            ("30 pyeong apartment", r(Some(30), Some(31))),
            ("30-40 pyeong", r(Some(30), Some(41))),
            ("3억 아파트", None),
            ("30 평균 시세", None),
            ("2.5평", None),
        ];
        for (text, want) in table {
            assert_eq!(parse_size_range(text), want, "{text}");
        }
        let band = SizeRange {
            min: Some(30),
            max: Some(40),
        };
        assert!(band.contains(30) && band.contains(39) && !band.contains(40) && !band.contains(29));
        assert_eq!(band.to_json(), json!({"min": 30, "max": 40}));
    }

    #[test]
    fn price_ranges() {
        let r = |min, max| Some(PriceRange { min, max });
        let table = [
            ("10억 이하 아파트", r(None, Some(10 * E))),
            ("5억 아래 아파트", r(None, Some(5 * E))),
            ("15억 미만 아파트", r(None, Some(15 * E - 1))),
            ("5억 이상", r(Some(5 * E), None)),
            ("5억부터 찾아줘", r(Some(5 * E), None)),
            ("5억 초과 아파트", r(Some(5 * E + 1), None)),
            ("10억~15억", r(Some(10 * E), Some(15 * E))),
            ("5억에서 7억 사이 아파트", r(Some(5 * E), Some(7 * E))),
            ("5억에서 7억까지 아파트", r(Some(5 * E), Some(7 * E))),
            ("5억부터 7억까지 아파트", r(Some(5 * E), Some(7 * E))),
            ("under 1 billion won", r(None, Some(10 * E))),
            ("over 500 million won", r(Some(5 * E), None)),
            (
                "between 1 billion and 1.5 billion won",
                r(Some(10 * E), Some(15 * E)),
            ),
            (
                "apartments from 500 million to 1 billion won",
                r(Some(5 * E), Some(10 * E)),
            ),
            ("deposit 500 million and rent 1 million won", None),
            ("전세 3억 아파트", None),
        ];
        for (text, want) in table {
            assert_eq!(parse_price_range(text), want, "{text}");
        }
        let range = PriceRange {
            min: Some(1),
            max: Some(3),
        };
        assert!(range.contains(3));
        assert_eq!(
            r(None, Some(5)).map(PriceRange::to_json),
            Some(json!({"max": 5}))
        );
    }
}
