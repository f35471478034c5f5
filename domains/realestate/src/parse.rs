//! Query parsing for the built-in agents: amounts of money in won (Korean and English notation),
//! places (district, dong, station), property and deal types, size and price ranges, the
//! language of the query, and a request to raise or lower a deposit or rent.
//!
//! Everything here is a pure function of the text, so an agent's answer depends only on its
//! input.

use std::sync::LazyLock;

use crate::agents::data::{DATASET, DealType, PropertyType};

/// The language an agent answers in: the user's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lang {
    Ko,
    En,
}

impl Lang {
    /// Picks the Korean or the English text.
    pub(crate) fn pick<'a>(self, ko: &'a str, en: &'a str) -> &'a str {
        match self {
            Self::Ko => ko,
            Self::En => en,
        }
    }
}

pub(crate) fn is_hangul(c: char) -> bool {
    ('\u{AC00}'..='\u{D7A3}').contains(&c)
}

/// Korean as soon as the text holds one Hangul syllable; an English query never does.
pub(crate) fn detect_lang(text: &str) -> Lang {
    if text.chars().any(is_hangul) {
        Lang::Ko
    } else {
        Lang::En
    }
}

/// Byte positions of `term` in `text`. Both are expected lower-cased. A term made of ASCII
/// letters and digits only matches as a whole word, so `apt` does not match inside `adapt`;
/// Korean terms match anywhere, because Korean attaches particles to words (`전세금을`).
pub(crate) fn find_all_terms(text: &str, term: &str) -> Vec<usize> {
    if term.is_empty() {
        return Vec::new();
    }
    let whole_word = term.is_ascii();
    let is_word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    text.match_indices(term)
        .map(|(i, _)| i)
        .filter(|&i| {
            !whole_word
                || (!is_word(text[..i].chars().next_back())
                    && !is_word(text[i + term.len()..].chars().next()))
        })
        .collect()
}

pub(crate) fn find_term(text: &str, term: &str) -> Option<usize> {
    find_all_terms(text, term).into_iter().next()
}

pub(crate) fn contains_term(text: &str, term: &str) -> bool {
    find_term(text, term).is_some()
}

pub(crate) fn contains_any(text: &str, terms: &[&str]) -> bool {
    terms.iter().any(|t| contains_term(text, t))
}

// ------------------------------------------------------------------------------------ amounts

/// An amount of money found in a text; `start..end` are byte offsets into that text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Amount {
    pub won: u64,
    pub start: usize,
    pub end: usize,
}

/// Fixed-point arithmetic at 10^-6 won, so `2.5억` and `1.2 billion` stay exact integers.
const MICRO: u128 = 1_000_000;

/// Decimal digits after the point that an amount may carry; more is not a sum of money.
const AMOUNT_FRACTION_DIGITS_MAX: u32 = 6;

/// Hangul syllables that, right after a number with a unit, say it counts something other than
/// money (`5만명`, `3억년`, `30평`), so the number is not an amount.
const NOT_MONEY_AFTER: &[char] = &[
    '명', '개', '건', '세', '평', '년', '층', '호', '채', '번', '살', '회', '위', '배', '㎡', '%',
];

/// Every amount of money in `text`, in order: `3억`, `3억 5천만원`, `3억5천`, `5000만원`,
/// `2.5억`, `1,000만원`, `3,000,000원`, `300 million won`, `1 billion`, `1.2 billion won`,
/// `KRW 500,000,000`, `₩1,500,000`, `500k won`. A bare number (`30평대`, `2025`, `5%`) is not an
/// amount: it needs a Korean unit (만/억/조), `원`/`won`/`KRW`/`₩`, or million/billion/thousand.
pub(crate) fn parse_amounts(text: &str) -> Vec<Amount> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let byte_at = |k: usize| chars.get(k).map_or(text.len(), |&(b, _)| b);
    let mut out = Vec::new();
    let mut k = 0;
    while k < chars.len() {
        let starts_number = chars[k].1.is_ascii_digit()
            && !k.checked_sub(1).is_some_and(|p| {
                let c = chars[p].1;
                c.is_ascii_alphanumeric() || c == ',' || c == '.'
            });
        let found = if starts_number {
            scan_korean(&chars, k).or_else(|| scan_english(&chars, k, false))
        } else {
            scan_currency_prefix(&chars, k)
        };
        match found {
            Some((won, end)) => {
                out.push(Amount {
                    won,
                    start: byte_at(k),
                    end: byte_at(end),
                });
                k = end;
            }
            None => k += 1,
        }
    }
    out
}

/// The single amount a whole string spells (`"3억"`, `"300 million won"`), for parameters.
pub(crate) fn parse_amount(text: &str) -> Option<u64> {
    let found = parse_amounts(text);
    match found.as_slice() {
        [one] if text[..one.start].trim().is_empty() && text[one.end..].trim().is_empty() => {
            Some(one.won)
        }
        _ => None,
    }
}

/// A decimal number at `k`: digits, `,` between groups of three, one `.`. Returns its value in
/// micro-units and the index after it.
fn scan_number(cs: &[(usize, char)], k: usize) -> Option<(u128, usize)> {
    let digit = |j: usize| cs.get(j).and_then(|&(_, c)| c.to_digit(10));
    digit(k)?;
    let (mut mant, mut scale, mut j, mut dot) = (0u128, 0u32, k, false);
    loop {
        if let Some(d) = digit(j) {
            mant = mant.checked_mul(10)?.checked_add(u128::from(d))?;
            scale += u32::from(dot);
            j += 1;
        } else if cs.get(j).is_some_and(|&(_, c)| c == ',')
            && !dot
            && (1..=3).all(|o| digit(j + o).is_some())
            && digit(j + 4).is_none()
        {
            j += 1;
        } else if cs.get(j).is_some_and(|&(_, c)| c == '.') && !dot && digit(j + 1).is_some() {
            dot = true;
            j += 1;
        } else {
            break;
        }
    }
    if scale > AMOUNT_FRACTION_DIGITS_MAX {
        return None;
    }
    let micro = mant.checked_mul(MICRO)? / 10u128.pow(scale);
    Some((micro, j))
}

/// A Korean "small number" below 만: `5`, `5000`, `5천`, `1천5백`, `2.5`. Returns its value in
/// micro-units, the index after it, and whether it used 천/백/십.
fn scan_small(cs: &[(usize, char)], k: usize) -> Option<(u128, usize, bool)> {
    let (mut acc, mut j, mut had_unit, mut any) = (0u128, k, false, false);
    while let Some((n, after)) = scan_number(cs, j) {
        let unit = match cs.get(after).map(|&(_, c)| c) {
            Some('천') => 1000,
            Some('백') => 100,
            Some('십') => 10,
            _ => {
                acc = acc.checked_add(n)?;
                j = after;
                any = true;
                break;
            }
        };
        acc = acc.checked_add(n.checked_mul(unit)?)?;
        j = after + 1;
        had_unit = true;
        any = true;
    }
    any.then_some((acc, j, had_unit))
}

fn big_unit(c: Option<char>) -> Option<u128> {
    match c? {
        '조' => Some(1_000_000_000_000),
        '억' => Some(100_000_000),
        '만' => Some(10_000),
        _ => None,
    }
}

/// `3억`, `3억 5천만원`, `3억5천` (colloquial for 3억 5천만), `5000만원`, `3,000,000원`.
fn scan_korean(cs: &[(usize, char)], k: usize) -> Option<(u64, usize)> {
    let ch = |j: usize| cs.get(j).map(|&(_, c)| c);
    let mut total: u128 = 0;
    let mut last_big: Option<u128> = None;
    let mut j = k;
    while let Some((small, after, _)) = scan_small(cs, j) {
        if let Some(unit) = big_unit(ch(after)) {
            if last_big.is_some_and(|prev| unit >= prev) {
                break;
            }
            total = total.checked_add(small.checked_mul(unit)?)?;
            last_big = Some(unit);
            j = after + 1;
            // A following group may be written after one space: `3억 5천만원`.
            let next = if ch(j) == Some(' ') { j + 1 } else { j };
            if ch(next).is_some_and(|c| c.is_ascii_digit()) {
                match scan_korean_tail(cs, next, unit, &mut total)? {
                    Some(end) => j = end,
                    None => break,
                }
                if ch(j).is_some_and(|c| c.is_ascii_digit()) {
                    continue;
                }
            }
            break;
        }
        // No big unit: a plain number of won needs `원` (`3,000,000원`, `5천원`).
        if last_big.is_none() && ch(after) == Some('원') {
            total = small;
            j = after;
        }
        break;
    }
    let mut end = j;
    let has_won = ch(end) == Some('원');
    if has_won {
        end += 1;
    } else if ch(end).is_some_and(|c| NOT_MONEY_AFTER.contains(&c)) {
        return None;
    }
    if last_big.is_none() && !has_won {
        return None;
    }
    let won = u64::try_from(total / MICRO).ok()?;
    Some((won, end))
}

/// After a big unit (and maybe a space): either a smaller big-unit group (`3억 5천만`), whose
/// start it returns for the caller's loop to add, or a trailing group without unit that
/// colloquially means the next unit down (`3억 5천` = 3억 5천만, `1조 2000` = 1조 2000억), which
/// it adds, returning its end. Returns `Some(None)` when what follows is not part of the amount
/// (`3억 2년`), and `None` on overflow.
fn scan_korean_tail(
    cs: &[(usize, char)],
    k: usize,
    prev_unit: u128,
    total: &mut u128,
) -> Option<Option<usize>> {
    let ch = |j: usize| cs.get(j).map(|&(_, c)| c);
    let Some((small, after, had_small_unit)) = scan_small(cs, k) else {
        return Some(None);
    };
    if let Some(unit) = big_unit(ch(after)) {
        if unit >= prev_unit {
            return Some(None);
        }
        // Leave the group to the caller's loop, which adds it with its unit.
        return Some(Some(k));
    }
    let next_unit_down = match prev_unit {
        1_000_000_000_000 => 100_000_000,
        100_000_000 => 10_000,
        // After 만 a trailing number is won, but only when `원` says so (`100만 5000원`).
        _ if ch(after) == Some('원') => 1,
        _ => return Some(None),
    };
    let follows_ok = had_small_unit
        || match ch(after) {
            None => true,
            Some(c) => !c.is_alphanumeric() || c == '원' || is_particle(c),
        };
    // A trailing group is at most four digits (it counts 만 or 억 units).
    if !follows_ok || small >= 10_000 * MICRO {
        return Some(None);
    }
    *total = total.checked_add(small.checked_mul(next_unit_down)?)?;
    Some(Some(after))
}

/// Particles that attach to an amount (`5천을`, `5000으로`, `5천에`).
fn is_particle(c: char) -> bool {
    matches!(
        c,
        '을' | '를'
            | '이'
            | '가'
            | '은'
            | '는'
            | '에'
            | '으'
            | '로'
            | '도'
            | '까'
            | '의'
            | '과'
            | '와'
            | '인'
            | '짜'
            | '대'
            | '정'
            | '쯤'
            | '부'
            | '선'
    )
}

/// Multipliers written after a number in English. The one-letter ones need `won`/`KRW` too,
/// because `300m` is as likely metres as millions.
const ENGLISH_MULTIPLIERS: &[(&str, u128, bool)] = &[
    ("trillion", 1_000_000_000_000, true),
    ("billion", 1_000_000_000, true),
    ("million", 1_000_000, true),
    ("thousand", 1_000, true),
    ("tn", 1_000_000_000_000, false),
    ("bn", 1_000_000_000, false),
    ("mn", 1_000_000, false),
    ("b", 1_000_000_000, false),
    ("m", 1_000_000, false),
    ("k", 1_000, false),
];

/// `300 million won`, `1 billion`, `1.2 billion won`, `3,000,000 won`, `500k KRW`.
fn scan_english(cs: &[(usize, char)], k: usize, prefixed: bool) -> Option<(u64, usize)> {
    let (micro, after) = scan_number(cs, k)?;
    let skip_spaces = |mut j: usize| {
        while cs.get(j).is_some_and(|&(_, c)| c == ' ') {
            j += 1;
        }
        j
    };
    let mut j = skip_spaces(after);
    let mut value = micro;
    let mut word_multiplier = false;
    let mut needs_currency = false;
    for &(word, mult, is_word) in ENGLISH_MULTIPLIERS {
        if let Some(end) = ascii_word_at(cs, j, word) {
            value = value.checked_mul(mult)?;
            word_multiplier = is_word;
            needs_currency = !is_word;
            j = end;
            break;
        }
    }
    if j == skip_spaces(after) {
        // No multiplier: the number itself ends the amount.
        j = after;
    }
    let c = skip_spaces(j);
    let currency_end = ascii_word_at(cs, c, "won")
        .or_else(|| ascii_word_at(cs, c, "krw"))
        .or_else(|| (cs.get(c).map(|&(_, ch)| ch) == Some('원')).then_some(c + 1));
    let end = match currency_end {
        Some(end) => end,
        None if prefixed || (word_multiplier && !needs_currency) => j,
        None => return None,
    };
    let won = u64::try_from(value / MICRO).ok()?;
    Some((won, end))
}

/// `KRW 500,000,000`, `₩1,500,000`, `krw 3 billion`.
fn scan_currency_prefix(cs: &[(usize, char)], k: usize) -> Option<(u64, usize)> {
    let mut j = if cs.get(k).is_some_and(|&(_, c)| c == '₩') {
        k + 1
    } else {
        ascii_word_at(cs, k, "krw")?
    };
    if k > 0 && cs[k - 1].1.is_ascii_alphanumeric() {
        return None;
    }
    while cs.get(j).is_some_and(|&(_, c)| c == ' ') {
        j += 1;
    }
    let (won, end) = scan_english(cs, j, true)?;
    Some((won, end))
}

/// If the ASCII word `word` (lower-case) starts at `k`, case-insensitively and not followed by
/// another letter or digit, the index after it.
fn ascii_word_at(cs: &[(usize, char)], k: usize, word: &str) -> Option<usize> {
    let mut j = k;
    for w in word.chars() {
        let &(_, c) = cs.get(j)?;
        if !c.eq_ignore_ascii_case(&w) {
            return None;
        }
        j += 1;
    }
    if cs.get(j).is_some_and(|&(_, c)| c.is_ascii_alphanumeric()) {
        return None;
    }
    Some(j)
}

/// `3억 1,500만원`, `5,000만원`, `3억원`, `123만 4,567원` (Korean); `KRW 315,000,000` (English).
pub(crate) fn format_won(won: u64, lang: Lang) -> String {
    if lang == Lang::En {
        return format!("KRW {}", group_thousands(won));
    }
    if won == 0 {
        return "0원".to_owned();
    }
    let (jo, eok, man, rest) = (
        won / 1_000_000_000_000,
        won / 100_000_000 % 10_000,
        won / 10_000 % 10_000,
        won % 10_000,
    );
    let mut parts = Vec::new();
    if jo > 0 {
        parts.push(format!("{}조", group_thousands(jo)));
    }
    if eok > 0 {
        parts.push(format!("{}억", group_thousands(eok)));
    }
    if man > 0 {
        parts.push(format!("{}만", group_thousands(man)));
    }
    if rest > 0 {
        parts.push(group_thousands(rest));
    }
    format!("{}원", parts.join(" "))
}

pub(crate) fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

// ----------------------------------------------------------------------------- change request

/// What a change request is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Subject {
    /// 보증금 / 전세금.
    Deposit,
    /// 월세 / 차임.
    MonthlyRent,
}

/// "The landlord wants `old` to become `new`."
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ChangeRequest {
    pub old: Amount,
    pub new: Amount,
    pub subject: Subject,
}

const CHANGE_TERMS: &[&str] = &[
    "올려",
    "올리",
    "올린",
    "올렸",
    "올라",
    "인상",
    "증액",
    "높여",
    "내려",
    "내리",
    "낮춰",
    "감액",
    "인하",
    "깎",
    "raise",
    "raised",
    "raising",
    "increase",
    "increased",
    "hike",
    "hiked",
    "lower",
    "reduce",
    "decrease",
    "cut",
    "→",
    "->",
];
const DEPOSIT_TERMS: &[&str] = &["전세", "보증금", "전세금", "deposit", "jeonse", "key money"];
const RENT_TERMS: &[&str] = &["월세", "차임", "임대료", "monthly rent", "rent", "wolse"];

/// Finds a request to change a deposit or rent: `전세금 3억을 10억으로 올려달래`,
/// `월세를 100만원에서 150만원으로`, `raise the deposit from 300 million won to 1 billion won`.
/// The new amount is the one marked as a target (`…으로`, `…로`, `…까지`, `to …`); the old one the
/// nearest amount before it, preferring one marked as a source (`…을`, `…에서`, `from …`).
/// Without markers, two amounts and a word of change read as "first → second".
pub(crate) fn detect_change_request(text: &str) -> Option<ChangeRequest> {
    let amounts = parse_amounts(text);
    if amounts.len() < 2 {
        return None;
    }
    let is_target = |a: &Amount| {
        let after = text[a.end..].trim_start();
        let before = text[..a.start].trim_end();
        ["으로", "로", "까지"].iter().any(|p| after.starts_with(p))
            || ["to", "into", "→", "->"]
                .iter()
                .any(|w| ends_with_word(before, w))
    };
    let is_source = |a: &Amount| {
        let after = text[a.end..].trim_start();
        let before = text[..a.start].trim_end();
        ["을", "를", "에서", "이던", "였", "인데", "이었", "이고"]
            .iter()
            .any(|p| after.starts_with(p))
            || ends_with_word(before, "from")
    };
    let has_change_word = contains_any(&text.to_lowercase(), CHANGE_TERMS);
    let target = amounts
        .iter()
        .enumerate()
        .skip(1)
        .find(|(_, a)| is_target(a))
        .map(|(i, _)| i);
    let (old_i, new_i) = match target {
        Some(t) => {
            let old = (0..t)
                .rev()
                .find(|&i| is_source(&amounts[i]))
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

/// Whether `text` ends with `word` (ASCII case-insensitively), as a whole word when ASCII.
fn ends_with_word(text: &str, word: &str) -> bool {
    let Some(split) = text.len().checked_sub(word.len()) else {
        return false;
    };
    if !text.is_char_boundary(split) {
        return false;
    }
    let (head, tail) = text.split_at(split);
    tail.eq_ignore_ascii_case(word)
        && (!word.is_ascii()
            || !head
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_alphanumeric()))
}

/// `text` without the prefix `prefix`, compared ASCII case-insensitively.
fn strip_prefix_ci<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

// -------------------------------------------------------------------------------- parties

/// Words after a role that are not names (`임대인 정보`, `임차인 서명`).
const NOT_NAMES: &[&str] = &[
    "정보",
    "성명",
    "이름",
    "서명",
    "본인",
    "미정",
    "없음",
    "주소",
    "연락처",
];

/// The name written after one of `roles`: `임대인 홍길동`, `임차인은 김철수`, `집주인: 박영희`,
/// `landlord Kim Minsu`, `tenant: John Smith`, `the buyer is Jane Doe`. Korean names are 2 to
/// 4 syllables; English names are up to four capitalised words.
pub(crate) fn party_name(text: &str, roles: &[&str]) -> Option<String> {
    // ASCII lower-casing keeps byte offsets, so positions found in it index `text` too.
    let lower = text.to_ascii_lowercase();
    for role in roles {
        for pos in find_all_terms(&lower, role) {
            let rest = &text[pos + role.len()..];
            let name = if role.is_ascii() {
                english_name(rest)
            } else {
                korean_name(rest)
            };
            if name.is_some() {
                return name;
            }
        }
    }
    None
}

fn korean_name(rest: &str) -> Option<String> {
    let mut rest = rest;
    for particle in ["은", "는", "이", "가", "측"] {
        if let Some(r) = rest.strip_prefix(particle) {
            rest = r;
            break;
        }
    }
    let rest = rest.trim_start_matches([' ', ':', '：', '=']);
    let mut token: String = rest.chars().take_while(|c| is_hangul(*c)).collect();
    for suffix in ["이고", "이며", "씨", "님", "와", "과"] {
        if token.chars().count() > 2
            && let Some(t) = token.strip_suffix(suffix)
        {
            token = t.to_owned();
            break;
        }
    }
    let len = token.chars().count();
    ((2..=4).contains(&len) && !NOT_NAMES.iter().any(|w| token.starts_with(w))).then_some(token)
}

fn english_name(rest: &str) -> Option<String> {
    let mut rest = rest.trim_start_matches([' ', ':', '=']);
    for lead in ["is ", "named ", "name is ", "will be "] {
        if let Some(r) = strip_prefix_ci(rest, lead) {
            rest = r.trim_start();
        }
    }
    let words: Vec<&str> = rest
        .split(' ')
        .map(|w| w.trim_end_matches([',', '.', ';', ')']))
        .take_while(|w| {
            w.chars().next().is_some_and(|c| c.is_ascii_uppercase())
                && w.chars()
                    .all(|c| c.is_ascii_alphabetic() || matches!(c, '.' | '\'' | '-'))
        })
        .take(4)
        .collect();
    // A comma or period ends the name even when the next word is capitalised.
    let mut out = Vec::new();
    for (w, raw) in words.iter().zip(rest.split(' ')) {
        out.push(*w);
        if raw.ends_with([',', '.', ';']) {
            break;
        }
    }
    (!out.is_empty()).then(|| out.join(" "))
}

// ------------------------------------------------------------------------------------- places

/// A place named in a query, resolved to the dataset's canonical district.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PlaceRef {
    /// `서울특별시 강남구`.
    pub region: &'static str,
    pub dong: Option<&'static str>,
    pub station: Option<&'static str>,
}

/// Every spelling of every place, longest first, lower-cased.
static PLACE_ALIASES: LazyLock<Vec<(String, PlaceRef)>> = LazyLock::new(|| {
    let mut out = Vec::new();
    for r in &DATASET.regions {
        let region = r.region.as_str();
        let at = |dong, station| PlaceRef {
            region,
            dong,
            station,
        };
        out.push((r.region.to_lowercase(), at(None, None)));
        for a in &r.aliases {
            out.push((a.to_lowercase(), at(None, None)));
        }
        for d in &r.dongs {
            for a in std::iter::once(&d.name).chain(&d.aliases) {
                out.push((a.to_lowercase(), at(Some(d.name.as_str()), None)));
            }
        }
        for s in &r.stations {
            for a in std::iter::once(&s.name).chain(&s.aliases) {
                out.push((a.to_lowercase(), at(None, Some(s.name.as_str()))));
            }
        }
    }
    // Longest first, so `강남역` wins over `강남` and `seocho-dong` over `seocho`.
    out.sort_by(|a, b| {
        b.0.chars()
            .count()
            .cmp(&a.0.chars().count())
            .then(a.0.cmp(&b.0))
    });
    out
});

/// The places named in `text`, one per district, in order of first mention. `강남`, `강남역`,
/// `강남구`, `Gangnam`, `역삼동` all resolve to `서울특별시 강남구` (with the dong or station
/// kept when named).
pub(crate) fn parse_places(text: &str) -> Vec<PlaceRef> {
    let lower = text.to_lowercase();
    let mut hits: Vec<(usize, usize, &PlaceRef)> = Vec::new();
    for (alias, place) in PLACE_ALIASES.iter() {
        for pos in find_all_terms(&lower, alias) {
            hits.push((pos, alias.len(), place));
        }
    }
    hits.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    let mut out: Vec<PlaceRef> = Vec::new();
    let mut covered_to = 0;
    for (pos, len, place) in hits {
        if pos < covered_to {
            continue;
        }
        covered_to = pos + len;
        match out.iter_mut().find(|p| p.region == place.region) {
            Some(seen) => {
                seen.dong = seen.dong.or(place.dong);
                seen.station = seen.station.or(place.station);
            }
            None => out.push(place.clone()),
        }
    }
    out
}

// ---------------------------------------------------------------------------- types and deals

const PROPERTY_TYPE_TERMS: &[(&str, PropertyType)] = &[
    ("아파트", PropertyType::Apartment),
    ("apartment", PropertyType::Apartment),
    ("apartments", PropertyType::Apartment),
    ("apt", PropertyType::Apartment),
    ("오피스텔", PropertyType::Officetel),
    ("officetel", PropertyType::Officetel),
    ("officetels", PropertyType::Officetel),
    ("빌라", PropertyType::Villa),
    ("다세대", PropertyType::Villa),
    ("연립", PropertyType::Villa),
    ("villa", PropertyType::Villa),
    ("villas", PropertyType::Villa),
];

const DEAL_TYPE_TERMS: &[(&str, DealType)] = &[
    ("매매", DealType::Sale),
    ("매수", DealType::Sale),
    ("매도", DealType::Sale),
    ("구매", DealType::Sale),
    ("구입", DealType::Sale),
    ("sale", DealType::Sale),
    ("sales", DealType::Sale),
    ("buy", DealType::Sale),
    ("buying", DealType::Sale),
    ("purchase", DealType::Sale),
    ("반전세", DealType::Monthly),
    ("월세", DealType::Monthly),
    ("monthly rent", DealType::Monthly),
    ("wolse", DealType::Monthly),
    ("전세", DealType::Jeonse),
    ("jeonse", DealType::Jeonse),
    ("chonsei", DealType::Jeonse),
];

/// The term of `terms` mentioned first in `text`.
fn first_mentioned<T: Copy>(text: &str, terms: &[(&str, T)]) -> Option<T> {
    let lower = text.to_lowercase();
    terms
        .iter()
        .filter_map(|&(term, v)| {
            find_term(&lower, term).map(|pos| (pos, std::cmp::Reverse(term.len()), v))
        })
        .min_by_key(|&(pos, len, _)| (pos, len))
        .map(|(_, _, v)| v)
}

/// `아파트`, `apartment`, `apt` → 아파트; `오피스텔`/`officetel`; `빌라`/`다세대`/`villa`.
pub(crate) fn parse_property_type(text: &str) -> Option<PropertyType> {
    first_mentioned(text, PROPERTY_TYPE_TERMS)
}

/// `매매`/`sale`/`buy` → 매매; `전세`/`jeonse` → 전세; `월세`/`monthly rent` → 월세.
pub(crate) fn parse_deal_type(text: &str) -> Option<DealType> {
    first_mentioned(text, DEAL_TYPE_TERMS).or_else(|| match text.trim().to_lowercase().as_str() {
        // Parameter spellings that would be too loose inside a sentence.
        "rent" | "monthly" | "monthly_rent" => Some(DealType::Monthly),
        "lease" => Some(DealType::Jeonse),
        _ => None,
    })
}

// --------------------------------------------------------------------------------- ranges

/// Sizes in 평, half-open like seed 002's `30평대` = `{min: 30, max: 40}`: `min <= size < max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SizeRange {
    pub min: Option<u32>,
    pub max: Option<u32>,
}

impl SizeRange {
    pub(crate) fn contains(self, size: u32) -> bool {
        self.min.is_none_or(|m| size >= m) && self.max.is_none_or(|m| size < m)
    }
}

/// `30평대` → 30..40, `32평` → 32..33, `30~40평` → 30..41, `30평 이상` → 30.., `40평 이하`
/// → ..41, `40평 미만` → ..40, `30s pyeong` → 30..40, `30-40 pyeong` → 30..41.
pub(crate) fn parse_size_range(text: &str) -> Option<SizeRange> {
    let cs: Vec<(usize, char)> = text.char_indices().collect();
    let rest_at = |k: usize| cs.get(k).map_or("", |&(b, _)| &text[b..]);
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
        if k > 0 && cs[k - 1].1.is_ascii_digit() {
            continue;
        }
        let Some((a, after_a)) = number_at(k) else {
            continue;
        };
        // A second number after `~` or `-` makes a range.
        let dash = skip(after_a, &[' ']);
        let (b, after_num) = match cs.get(dash).map(|&(_, c)| c) {
            Some('~' | '-' | '～') => match number_at(skip(dash + 1, &[' '])) {
                Some((b, end)) => (Some(b), end),
                None => (None, after_a),
            },
            _ => (None, after_a),
        };
        let unit_at = skip(after_num, &[' ', '-']);
        let rest = rest_at(unit_at);
        let (is_band, after_unit) = if let Some(r) = rest.strip_prefix("평대") {
            (true, r)
        } else if let Some(r) = rest
            .strip_prefix("평형")
            .or_else(|| rest.strip_prefix('평'))
        {
            (false, r)
        } else if let Some(r) = strip_prefix_ci(rest, "pyeong") {
            (false, r)
        } else if let Some(r) =
            strip_prefix_ci(rest, "s pyeong").or_else(|| strip_prefix_ci(rest, "s-pyeong"))
        {
            (true, r)
        } else {
            continue;
        };
        if let Some(b) = b {
            return Some(SizeRange {
                min: Some(a.min(b)),
                max: Some(a.max(b) + 1),
            });
        }
        if is_band {
            return Some(SizeRange {
                min: Some(a),
                max: Some(a + 10),
            });
        }
        let tail = after_unit.trim_start().to_lowercase();
        let range = if tail.starts_with("이상") || tail.starts_with("or more") {
            SizeRange {
                min: Some(a),
                max: None,
            }
        } else if tail.starts_with("초과") {
            SizeRange {
                min: Some(a + 1),
                max: None,
            }
        } else if tail.starts_with("이하") || tail.starts_with("or less") {
            SizeRange {
                min: None,
                max: Some(a + 1),
            }
        } else if tail.starts_with("미만") {
            SizeRange {
                min: None,
                max: Some(a),
            }
        } else {
            SizeRange {
                min: Some(a),
                max: Some(a + 1),
            }
        };
        return Some(range);
    }
    None
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
}

/// `10억 이하`, `15억 미만`, `5억 이상`, `10억~15억`, `under 1 billion won`, `over 500 million
/// won`, `between 1 billion and 1.5 billion won`. A change request (`3억을 10억으로`) is not a
/// range; callers check that first.
pub(crate) fn parse_price_range(text: &str) -> Option<PriceRange> {
    let amounts = parse_amounts(text);
    for (i, a) in amounts.iter().enumerate() {
        let after = text[a.end..].trim_start();
        let before = text[..a.start].trim_end();
        if let Some(b) = amounts.get(i + 1) {
            let between = text[a.end..b.start].trim();
            let joined_by = |w: &str| between == w || between.eq_ignore_ascii_case(w);
            // `A to B` is a range only after `from` (`from A to B`); alone it may be a change.
            let joined = ["~", "-", "～", "to", "and"].iter().any(|w| joined_by(w));
            if joined && (!joined_by("to") || ends_with_word(before, "from")) {
                return Some(PriceRange {
                    min: Some(a.won.min(b.won)),
                    max: Some(a.won.max(b.won)),
                });
            }
        }
        if ["이하", "이내", "까지"]
            .iter()
            .any(|p| after.starts_with(p))
            || [
                "under",
                "below",
                "less than",
                "up to",
                "at most",
                "max",
                "within",
            ]
            .iter()
            .any(|w| ends_with_word(before, w))
        {
            return Some(PriceRange {
                min: None,
                max: Some(a.won),
            });
        }
        if after.starts_with("미만") {
            return Some(PriceRange {
                min: None,
                max: Some(a.won.saturating_sub(1)),
            });
        }
        if ["이상", "부터"].iter().any(|p| after.starts_with(p))
            || ["over", "above", "more than", "at least", "min"]
                .iter()
                .any(|w| ends_with_word(before, w))
        {
            return Some(PriceRange {
                min: Some(a.won),
                max: None,
            });
        }
        if after.starts_with("초과") {
            return Some(PriceRange {
                min: Some(a.won + 1),
                max: None,
            });
        }
    }
    None
}

// --------------------------------------------------------------------------------- dates

/// A calendar date (proleptic Gregorian).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Date {
    pub year: i32,
    pub month: u32,
    pub day: u32,
}

impl Date {
    pub(crate) fn iso(self) -> String {
        format!("{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }

    pub(crate) fn ko(self) -> String {
        format!("{}년 {}월 {}일", self.year, self.month, self.day)
    }

    fn days_in_month(year: i32, month: u32) -> u32 {
        match month {
            2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        }
    }

    fn valid(self) -> bool {
        (1..=12).contains(&self.month)
            && (1..=Self::days_in_month(self.year, self.month)).contains(&self.day)
    }

    /// The last day of a term of `months` starting on `self` (2025-10-01 + 24 → 2027-09-30).
    pub(crate) fn term_end(self, months: u32) -> Date {
        let total = self.year * 12 + (self.month as i32 - 1) + months as i32;
        let (year, month) = (total.div_euclid(12), total.rem_euclid(12) as u32 + 1);
        let day = self.day.min(Self::days_in_month(year, month));
        let start = Date { year, month, day };
        start.previous_day()
    }

    fn previous_day(self) -> Date {
        if self.day > 1 {
            return Date {
                day: self.day - 1,
                ..self
            };
        }
        let (year, month) = if self.month == 1 {
            (self.year - 1, 12)
        } else {
            (self.year, self.month - 1)
        };
        Date {
            year,
            month,
            day: Self::days_in_month(year, month),
        }
    }

    /// The civil date of a day count since 1970-01-01 (Howard Hinnant's `civil_from_days`).
    pub(crate) fn from_unix_days(days: i64) -> Date {
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        let year = (yoe + era * 400 + i64::from(month <= 2)) as i32;
        Date { year, month, day }
    }

    /// `2025-10-01`.
    pub(crate) fn parse_iso(s: &str) -> Option<Date> {
        let mut it = s.trim().splitn(3, '-');
        let year = it.next()?.parse().ok()?;
        let month = it.next()?.parse().ok()?;
        let day = it.next()?.get(..2).unwrap_or_default().parse().ok()?;
        Some(Date { year, month, day }).filter(|d| d.valid())
    }
}

/// Every date in `text`: `2025-10-01`, `2025.10.1`, `2025/10/01`, `2025년 10월 1일`.
pub(crate) fn parse_dates(text: &str) -> Vec<Date> {
    let cs: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut k = 0;
    while k < cs.len() {
        let starts_number = !k.checked_sub(1).is_some_and(|p| cs[p].is_ascii_digit());
        match starts_number.then(|| date_at(&cs, k)).flatten() {
            Some((date, end)) => {
                out.push(date);
                k = end;
            }
            None => k += 1,
        }
    }
    out
}

/// The date starting at `k`, and the index after it.
fn date_at(cs: &[char], k: usize) -> Option<(Date, usize)> {
    let number = |j: usize, max_len: usize| -> Option<(u32, usize)> {
        let mut e = j;
        while e < cs.len() && cs[e].is_ascii_digit() && e - j < max_len {
            e += 1;
        }
        if e == j || cs.get(e).is_some_and(|c| c.is_ascii_digit()) {
            return None;
        }
        let n: String = cs[j..e].iter().collect();
        Some((n.parse().ok()?, e))
    };
    // `-`, `.`, `/` or the Korean unit, then optional spaces.
    let separator = |e: usize, korean: char| -> Option<usize> {
        let mut j = e;
        match cs.get(j)? {
            '-' | '.' | '/' => j += 1,
            c if *c == korean => j += 1,
            _ => return None,
        }
        while cs.get(j) == Some(&' ') {
            j += 1;
        }
        Some(j)
    };
    let (year, e) = number(k, 4)?;
    if !(1900..=2999).contains(&year) {
        return None;
    }
    let (month, e) = number(separator(e, '년')?, 2)?;
    let (day, mut e) = number(separator(e, '월')?, 2)?;
    if cs.get(e) == Some(&'일') {
        e += 1;
    }
    let date = Date {
        year: i32::try_from(year).ok()?,
        month,
        day,
    };
    date.valid().then_some((date, e))
}

/// A lease term in months: `2년` → 24, `18개월` → 18, `1 year` → 12, `24 months` → 24.
pub(crate) fn parse_term_months(text: &str) -> Option<u32> {
    let lower = text.to_lowercase();
    let cs: Vec<(usize, char)> = lower.char_indices().collect();
    for (i, &(b, c)) in cs.iter().enumerate() {
        if !c.is_ascii_digit() || (i > 0 && cs[i - 1].1.is_ascii_digit()) {
            continue;
        }
        let digits: String = lower[b..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        let Ok(n) = digits.parse::<u32>() else {
            continue;
        };
        let rest = lower[b + digits.len()..].trim_start();
        // A year number (`2025년`) is a date, not a term.
        if n >= 100 {
            continue;
        }
        if rest.starts_with("개월") || rest.starts_with("month") {
            return Some(n);
        }
        if rest.starts_with("년") || rest.starts_with("year") {
            return Some(n * 12);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const E: u64 = 100_000_000;
    const MAN: u64 = 10_000;

    #[test]
    fn amounts_table() {
        let table: &[(&str, &[u64])] = &[
            ("3억", &[3 * E]),
            ("10억", &[10 * E]),
            ("3억 5천만원", &[3 * E + 5000 * MAN]),
            ("3억5천만원", &[3 * E + 5000 * MAN]),
            ("3억5천", &[3 * E + 5000 * MAN]),
            ("3억 5000만원", &[3 * E + 5000 * MAN]),
            ("3억 5000", &[3 * E + 5000 * MAN]),
            ("5000만원", &[5000 * MAN]),
            ("5천만원", &[5000 * MAN]),
            ("1천5백만원", &[1500 * MAN]),
            ("2.5억", &[25 * E / 10]),
            ("1,000만원", &[1000 * MAN]),
            ("100만원", &[100 * MAN]),
            ("50만", &[50 * MAN]),
            ("3,000,000원", &[3_000_000]),
            ("5천원", &[5000]),
            ("1조 2천억", &[1_200_000_000_000]),
            ("1조 2000", &[1_200_000_000_000]),
            ("100만 5000원", &[1_005_000]),
            ("300 million won", &[3 * E]),
            ("300 million", &[3 * E]),
            ("1 billion won", &[10 * E]),
            ("1.2 billion", &[12 * E]),
            ("1.5 Billion KRW", &[15 * E]),
            ("KRW 500,000,000", &[5 * E]),
            ("krw 3 billion", &[30 * E]),
            ("₩1,500,000", &[1_500_000]),
            ("500k won", &[500_000]),
            ("300,000,000 won", &[3 * E]),
            ("2 bn krw", &[20 * E]),
            ("전세금 3억을 10억으로 올려달래", &[3 * E, 10 * E]),
            ("보증금 5000만원에 월세 100만원", &[5000 * MAN, 100 * MAN]),
            ("from 300 million won to 1 billion won", &[3 * E, 10 * E]),
            ("10억~15억", &[10 * E, 15 * E]),
            ("3억짜리 전세", &[3 * E]),
            ("10억대 아파트", &[10 * E]),
        ];
        for (text, want) in table {
            let got: Vec<u64> = parse_amounts(text).iter().map(|a| a.won).collect();
            assert_eq!(&got, want, "{text}");
        }
    }

    #[test]
    fn not_amounts() {
        for text in [
            "30평대",
            "2025년",
            "5%",
            "3개월",
            "300m",
            "2 bedrooms",
            "강남역 근처",
            "5만명",
            "3억년",
            "5천",
            "30평 아파트",
            "1.2345678 billion",
            "A3억",
            "v2.5",
        ] {
            assert_eq!(parse_amounts(text), vec![], "{text}");
        }
        // A trailing count after an amount is not folded into it.
        let got: Vec<u64> = parse_amounts("3억 2년 계약")
            .iter()
            .map(|a| a.won)
            .collect();
        assert_eq!(got, vec![3 * E]);
    }

    #[test]
    fn amount_positions_and_single_amounts() {
        let text = "전세금 3억을 10억으로";
        let a = parse_amounts(text);
        assert_eq!(&text[a[0].start..a[0].end], "3억");
        assert_eq!(&text[a[1].start..a[1].end], "10억");
        assert_eq!(parse_amount(" 3억 5천만원 "), Some(3 * E + 5000 * MAN));
        assert_eq!(parse_amount("1 billion won"), Some(10 * E));
        assert_eq!(parse_amount("3억과 5억"), None);
        assert_eq!(parse_amount("about 3억"), None);
        assert_eq!(
            parse_amount("99999999999조"),
            None,
            "overflow is not an amount"
        );
    }

    #[test]
    fn format_won_table() {
        assert_eq!(format_won(3 * E, Lang::Ko), "3억원");
        assert_eq!(format_won(315_000_000, Lang::Ko), "3억 1,500만원");
        assert_eq!(format_won(5000 * MAN, Lang::Ko), "5,000만원");
        assert_eq!(format_won(1_234_567, Lang::Ko), "123만 4,567원");
        assert_eq!(format_won(1_200_000_000_000, Lang::Ko), "1조 2,000억원");
        assert_eq!(format_won(0, Lang::Ko), "0원");
        assert_eq!(format_won(315_000_000, Lang::En), "KRW 315,000,000");
        assert_eq!(group_thousands(999), "999");
        assert_eq!(group_thousands(1000), "1,000");
    }

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
    }

    #[test]
    fn places() {
        let g = "서울특별시 강남구";
        for text in [
            "강남",
            "강남역 근처",
            "강남구 아파트",
            "Gangnam apartments",
            "서울특별시 강남구",
        ] {
            let p = parse_places(text);
            assert_eq!(p.len(), 1, "{text}");
            assert_eq!(p[0].region, g, "{text}");
        }
        let p = parse_places("강남역 근처 30평대 아파트 매매 시세 알려줘");
        assert_eq!(
            p,
            vec![PlaceRef {
                region: g,
                dong: None,
                station: Some("강남역")
            }]
        );
        let p = parse_places("역삼동 오피스텔");
        assert_eq!(
            p,
            vec![PlaceRef {
                region: g,
                dong: Some("역삼동"),
                station: None
            }]
        );
        let p = parse_places("강남구와 마포구 비교, 그리고 Seocho-dong");
        let regions: Vec<&str> = p.iter().map(|p| p.region).collect();
        assert_eq!(regions, vec![g, "서울특별시 마포구", "서울특별시 서초구"]);
        assert_eq!(p[2].dong, Some("서초동"));
        let p = parse_places("compare Mapo and Songpa");
        assert_eq!(p.len(), 2);
        assert_eq!(p[1].region, "서울특별시 송파구");
        assert_eq!(parse_places("부산 해운대구"), vec![]);
        assert_eq!(
            parse_places("mapology"),
            vec![],
            "English aliases match whole words only"
        );
    }

    #[test]
    fn property_and_deal_types() {
        assert_eq!(
            parse_property_type("30평대 아파트 매매"),
            Some(PropertyType::Apartment)
        );
        assert_eq!(
            parse_property_type("an officetel near Gangnam"),
            Some(PropertyType::Officetel)
        );
        assert_eq!(
            parse_property_type("다세대 빌라"),
            Some(PropertyType::Villa)
        );
        assert_eq!(parse_property_type("I want to adapt"), None);
        assert_eq!(parse_deal_type("아파트 매매 시세"), Some(DealType::Sale));
        assert_eq!(parse_deal_type("전세금 3억"), Some(DealType::Jeonse));
        assert_eq!(parse_deal_type("반전세 매물"), Some(DealType::Monthly));
        assert_eq!(
            parse_deal_type("apartments for sale in Mapo"),
            Some(DealType::Sale)
        );
        assert_eq!(parse_deal_type("jeonse deposit"), Some(DealType::Jeonse));
        assert_eq!(parse_deal_type("monthly_rent"), Some(DealType::Monthly));
        assert_eq!(parse_deal_type("어디가 좋아?"), None);
    }

    #[test]
    fn size_ranges() {
        let r = |min, max| Some(SizeRange { min, max });
        assert_eq!(
            parse_size_range("강남역 근처 30평대 아파트"),
            r(Some(30), Some(40))
        );
        assert_eq!(parse_size_range("32평 아파트"), r(Some(32), Some(33)));
        assert_eq!(parse_size_range("25평형"), r(Some(25), Some(26)));
        assert_eq!(parse_size_range("30~40평"), r(Some(30), Some(41)));
        assert_eq!(parse_size_range("30 - 40평"), r(Some(30), Some(41)));
        assert_eq!(parse_size_range("30평 이상"), r(Some(30), None));
        assert_eq!(parse_size_range("40평 이하"), r(None, Some(41)));
        assert_eq!(parse_size_range("40평 미만"), r(None, Some(40)));
        assert_eq!(
            parse_size_range("30s pyeong apartment"),
            r(Some(30), Some(40))
        );
        assert_eq!(parse_size_range("a 32-pyeong flat"), r(Some(32), Some(33)));
        assert_eq!(parse_size_range("30-40 pyeong"), r(Some(30), Some(41)));
        assert_eq!(parse_size_range("3억 아파트"), None);
        let band = SizeRange {
            min: Some(30),
            max: Some(40),
        };
        assert!(band.contains(30) && band.contains(39) && !band.contains(40) && !band.contains(29));
    }

    #[test]
    fn price_ranges() {
        let r = |min, max| Some(PriceRange { min, max });
        assert_eq!(parse_price_range("10억 이하 아파트"), r(None, Some(10 * E)));
        assert_eq!(parse_price_range("5억 이상"), r(Some(5 * E), None));
        assert_eq!(
            parse_price_range("10억~15억"),
            r(Some(10 * E), Some(15 * E))
        );
        assert_eq!(
            parse_price_range("under 1 billion won"),
            r(None, Some(10 * E))
        );
        assert_eq!(
            parse_price_range("over 500 million won"),
            r(Some(5 * E), None)
        );
        assert_eq!(
            parse_price_range("between 1 billion and 1.5 billion won"),
            r(Some(10 * E), Some(15 * E))
        );
        assert_eq!(parse_price_range("전세 3억 아파트"), None);
        assert!(
            PriceRange {
                min: Some(1),
                max: Some(3)
            }
            .contains(3)
        );
    }

    #[test]
    fn dates_and_terms() {
        let d = |year, month, day| Date { year, month, day };
        assert_eq!(parse_dates("2025-10-01부터 2년"), vec![d(2025, 10, 1)]);
        assert_eq!(parse_dates("2025년 10월 1일 입주"), vec![d(2025, 10, 1)]);
        assert_eq!(
            parse_dates("from 2025.11.15 to 2027/11/14"),
            vec![d(2025, 11, 15), d(2027, 11, 14)]
        );
        assert_eq!(parse_dates("2025-02-30"), vec![]);
        assert_eq!(parse_dates("3억"), vec![]);
        assert_eq!(d(2025, 10, 1).term_end(24), d(2027, 9, 30));
        assert_eq!(d(2024, 3, 1).term_end(12), d(2025, 2, 28));
        assert_eq!(d(2025, 1, 1).term_end(12), d(2025, 12, 31));
        assert_eq!(Date::from_unix_days(0), d(1970, 1, 1));
        assert_eq!(Date::from_unix_days(20_361), d(2025, 9, 30));
        assert_eq!(Date::parse_iso("2025-09-30"), Some(d(2025, 9, 30)));
        assert_eq!(d(2025, 9, 3).ko(), "2025년 9월 3일");
        assert_eq!(parse_term_months("계약기간 2년"), Some(24));
        assert_eq!(parse_term_months("18개월"), Some(18));
        assert_eq!(parse_term_months("a 1 year lease"), Some(12));
        assert_eq!(parse_term_months("2025년 10월"), None);
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

    #[test]
    fn party_names() {
        let landlord = ["임대인", "집주인", "landlord", "lessor"];
        let tenant = ["임차인", "세입자", "tenant", "lessee"];
        let q = "임대인 홍길동, 임차인은 김철수이고 보증금 3억";
        assert_eq!(party_name(q, &landlord).as_deref(), Some("홍길동"));
        assert_eq!(party_name(q, &tenant).as_deref(), Some("김철수"));
        assert_eq!(
            party_name("집주인: 박영희", &landlord).as_deref(),
            Some("박영희")
        );
        let q = "Draft a lease: landlord Kim Minsu, tenant John Smith. Deposit 500 million won";
        assert_eq!(party_name(q, &landlord).as_deref(), Some("Kim Minsu"));
        assert_eq!(party_name(q, &tenant).as_deref(), Some("John Smith"));
        assert_eq!(
            party_name("the tenant is Jane Doe", &tenant).as_deref(),
            Some("Jane Doe")
        );
        assert_eq!(party_name("임대인 정보는 모름", &landlord), None);
        assert_eq!(party_name("the landlord wants more", &landlord), None);
        assert_eq!(party_name("전세 계약서 작성해줘", &landlord), None);
    }

    #[test]
    fn language_and_terms() {
        assert_eq!(detect_lang("강남 아파트"), Lang::Ko);
        assert_eq!(detect_lang("Gangnam apartment"), Lang::En);
        assert!(contains_term("raise the rent", "raise"));
        assert!(!contains_term("praised", "raise"));
        assert!(contains_term("전세금을", "전세"));
        assert_eq!(find_all_terms("a apt b apt", "apt"), vec![2, 8]);
    }
}
