//! The benchmark's table: rows of `metric | value | unit | note/target`, printed as a markdown
//! table or as JSON Lines (`{"type": "bench", "data": {...}}`); and a [`Grid`] for measurements
//! taken at several sizes, one column per size (`{"type": "bench_grid", "data": {...}}`).

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

/// Measurements at several sizes side by side: one row per metric, one column per size.
#[derive(Clone, Debug, Serialize)]
pub struct Grid {
    /// A stable snake_case key for machines.
    pub id: &'static str,
    pub columns: Vec<String>,
    pub rows: Vec<GridRow>,
    /// Lines printed under the table.
    pub notes: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct GridRow {
    pub id: String,
    pub metric: String,
    pub unit: &'static str,
    /// One per column.
    pub cells: Vec<Cell>,
}

/// A grid cell: numbers (shown `a / b`), a word, or nothing measured.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum Cell {
    Num(Vec<f64>),
    Text(String),
}

impl Cell {
    pub fn one(v: f64) -> Cell {
        Cell::Num(vec![v])
    }

    pub fn none() -> Cell {
        Cell::Num(Vec::new())
    }

    fn show(&self) -> String {
        match self {
            Cell::Num(v) if v.is_empty() => "–".to_owned(),
            Cell::Num(v) => v.iter().map(|x| num(*x)).collect::<Vec<_>>().join(" / "),
            Cell::Text(t) => t.clone(),
        }
    }
}

pub fn print_grid(out: &mut impl Write, grid: &Grid) -> io::Result<()> {
    let mut lines: Vec<Vec<String>> = vec![
        ["metric", "unit"]
            .iter()
            .map(|s| (*s).to_owned())
            .chain(grid.columns.iter().cloned())
            .collect(),
    ];
    for r in &grid.rows {
        lines.push(
            [r.metric.clone(), r.unit.to_owned()]
                .into_iter()
                .chain(r.cells.iter().map(Cell::show))
                .collect(),
        );
    }
    let mut width = vec![0; lines[0].len()];
    for l in &lines {
        for (w, s) in width.iter_mut().zip(l) {
            *w = (*w).max(s.chars().count());
        }
    }
    let pad = |s: &str, w: usize| " ".repeat(w.saturating_sub(s.chars().count()));
    for (i, l) in lines.iter().enumerate() {
        let cells: Vec<String> = l
            .iter()
            .zip(&width)
            .enumerate()
            // Text columns to the left, numbers to the right.
            .map(|(c, (s, w))| match c {
                0 | 1 => format!("{s}{}", pad(s, *w)),
                _ => format!("{}{s}", pad(s, *w)),
            })
            .collect();
        writeln!(out, "| {} |", cells.join(" | "))?;
        if i == 0 {
            let rule: Vec<String> = width
                .iter()
                .enumerate()
                .map(|(c, w)| match c {
                    0 | 1 => "-".repeat(w + 2),
                    _ => format!("{}:", "-".repeat(w + 1)),
                })
                .collect();
            writeln!(out, "|{}|", rule.join("|"))?;
        }
    }
    for n in &grid.notes {
        writeln!(out, "- {n}")?;
    }
    out.flush()
}

pub fn print_grid_json(out: &mut impl Write, grid: &Grid) -> io::Result<()> {
    let line = serde_json::json!({"type": "bench_grid", "data": grid});
    writeln!(out, "{line}")?;
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

    #[test]
    fn a_grid_has_one_column_per_size_and_numbers_to_the_right() {
        let grid = Grid {
            id: "scale",
            columns: vec!["empty".into(), "10,000".into()],
            rows: vec![GridRow {
                id: "list_p50_p99".into(),
                metric: "GET /runs".into(),
                unit: "ms",
                cells: vec![Cell::none(), Cell::Num(vec![1.5, 12.0])],
            }],
            notes: vec!["a note".into()],
        };
        let mut out = Vec::new();
        print_grid(&mut out, &grid).unwrap();
        let text = String::from_utf8(out).unwrap();
        let want = [
            "| metric    | unit | empty |    10,000 |",
            "|-----------|------|------:|----------:|",
            "| GET /runs | ms   |     – | 1.50 / 12 |",
            "- a note",
        ];
        assert_eq!(text.lines().collect::<Vec<_>>(), want);
    }
}
