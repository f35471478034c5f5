//! The benchmark's one table: rows of `metric | value | unit | note/target`, printed as a
//! markdown table or as JSON Lines (`{"type": "bench", "data": {...}}`).

use std::io::{self, Write};

use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// A stable snake_case key for machines.
    pub id: String,
    pub metric: String,
    pub value: f64,
    pub unit: &'static str,
    pub note: String,
}

impl Row {
    pub fn new(
        id: impl Into<String>,
        metric: impl Into<String>,
        value: f64,
        unit: &'static str,
    ) -> Self {
        Row {
            id: id.into(),
            metric: metric.into(),
            value,
            unit,
            note: String::new(),
        }
    }

    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.note = note.into();
        self
    }
}

/// `1234567.8` → `1,234,568`, `998.0` → `998`; small fractions keep a few decimals.
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return v.to_string();
    }
    let a = v.abs();
    if a >= 1000.0 || (v.fract() == 0.0 && a < 1e15) {
        let digits = format!("{:.0}", a);
        let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        if v < 0.0 { format!("-{out}") } else { out }
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// `target ≥ X (met)` / `(MISSED)`.
pub fn target_min(value: f64, min: f64, shown: &str) -> String {
    format!(
        "target ≥ {shown} ({})",
        if value >= min { "met" } else { "MISSED" }
    )
}

/// `target ≤ X (met)` / `(MISSED)`.
pub fn target_max(value: f64, max: f64, shown: &str) -> String {
    format!(
        "target ≤ {shown} ({})",
        if value <= max { "met" } else { "MISSED" }
    )
}

pub fn print_table(out: &mut impl Write, rows: &[Row]) -> io::Result<()> {
    let cells: Vec<[String; 4]> = rows
        .iter()
        .map(|r| {
            [
                r.metric.clone(),
                num(r.value),
                r.unit.to_owned(),
                r.note.clone(),
            ]
        })
        .collect();
    let header = ["metric", "value", "unit", "note / target"];
    let mut width = header.map(|h| h.chars().count());
    for c in &cells {
        for (w, s) in width.iter_mut().zip(c) {
            *w = (*w).max(s.chars().count());
        }
    }
    let line = |out: &mut dyn Write, c: [&str; 4]| -> io::Result<()> {
        let pad = |s: &str, w: usize| " ".repeat(w.saturating_sub(s.chars().count()));
        writeln!(
            out,
            "| {}{} | {}{} | {}{} | {}{} |",
            c[0],
            pad(c[0], width[0]),
            pad(c[1], width[1]),
            c[1],
            c[2],
            pad(c[2], width[2]),
            c[3],
            pad(c[3], width[3]),
        )
    };
    line(out, header)?;
    writeln!(
        out,
        "|{}|{}:|{}|{}|",
        "-".repeat(width[0] + 2),
        "-".repeat(width[1] + 1),
        "-".repeat(width[2] + 2),
        "-".repeat(width[3] + 2)
    )?;
    for c in &cells {
        line(out, [&c[0], &c[1], &c[2], &c[3]])?;
    }
    out.flush()
}

pub fn print_json(out: &mut impl Write, rows: &[Row]) -> io::Result<()> {
    for r in rows {
        let line = serde_json::json!({"type": "bench", "data": r});
        writeln!(out, "{line}")?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(num(1_234_567.8), "1,234,568");
        assert_eq!(num(999.94), "999.9");
        assert_eq!(num(12.345), "12.35");
        assert_eq!(num(0.01234), "0.012");
        assert_eq!(num(-4321.0), "-4,321");
        assert_eq!(num(998.0), "998");
    }
}
