//! Amounts of money in won, in Korean and English notation, and how the agents write them.
//!
//! Everything here is a pure function of the text.

use super::terms::Lang;

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
    while let Some((small, number_end, _)) = scan_small(cs, j) {
        // The unit may follow after one space: `3 억`.
        let after = match (ch(number_end), big_unit(ch(number_end + 1))) {
            (Some(' '), Some(_)) => number_end + 1,
            _ => number_end,
        };
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
    // `10억 원` is the spacing of formal Korean; `원룸` after a space is a one-room flat.
    let spaced_won = last_big.is_some()
        && ch(end) == Some(' ')
        && ch(end + 1) == Some('원')
        && ch(end + 2) != Some('룸');
    if spaced_won {
        end += 1;
    }
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
            ("3 억 아파트", &[3 * E]),
            ("10억 원에서 21억 원 사이", &[10 * E, 21 * E]),
            ("3억 원룸", &[3 * E]),
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
}
