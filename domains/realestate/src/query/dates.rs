//! Dates (`2025-10-01`, `2025년 10월 1일`) and lease terms (`2년`, `18개월`).

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
}
