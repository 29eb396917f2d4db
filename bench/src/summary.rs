//! A figure, its floor and its ratio; the summary JSON and the table of docs/performance.md.
//!
//! Every figure is measured against a floor measured in the same run on the same machine: what
//! the same work costs with nothing of ours in the way (a direct request, the data written out
//! without rules, the binary at rest with nothing to do). The ratio says how close to the floor we
//! are; a goal, where the design sets one, is printed beside it and never asserted.

use serde::Serialize;

/// One measured figure.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Figure {
    /// Short name, e.g. `render.supercluster_30`.
    pub name: String,
    /// What was measured, in words.
    pub what: String,
    pub value: f64,
    pub unit: String,
    /// The floor's value, in the same unit.
    pub floor: f64,
    /// What the floor is, in words.
    pub floor_what: String,
    /// The goal on the ratio or the value, in words, where the design sets one.
    pub goal: Option<String>,
    /// Further figures of the same run (passes per stream, counts).
    pub notes: Vec<String>,
}

impl Figure {
    /// `value ÷ floor`; for a rate (higher is better) the caller passes the floor's rate and
    /// reads the ratio as how much of the floor's speed we keep.
    pub fn ratio(&self) -> f64 {
        if self.floor == 0.0 {
            f64::NAN
        } else {
            self.value / self.floor
        }
    }
}

/// The summary written to `target/bench/summary.json`.
#[derive(Debug, Serialize)]
pub struct Summary<'a> {
    pub figures: Vec<SummaryFigure<'a>>,
}

#[derive(Debug, Serialize)]
pub struct SummaryFigure<'a> {
    #[serde(flatten)]
    pub figure: &'a Figure,
    pub ratio: f64,
}

pub fn summary(figures: &[Figure]) -> Summary<'_> {
    Summary {
        figures: figures
            .iter()
            .map(|f| SummaryFigure {
                figure: f,
                ratio: f.ratio(),
            })
            .collect(),
    }
}

fn num(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The markdown table of the figures.
pub fn table(figures: &[Figure]) -> String {
    let mut out =
        String::from("| figure | value | floor | ratio | goal |\n|---|---|---|---|---|\n");
    for f in figures {
        let notes = if f.notes.is_empty() {
            String::new()
        } else {
            format!(" ({})", f.notes.join("; "))
        };
        out.push_str(&format!(
            "| {}: {}{} | {} {} | {} {}: {} | {} | {} |\n",
            f.name,
            f.what,
            notes,
            num(f.value),
            f.unit,
            num(f.floor),
            f.unit,
            f.floor_what,
            num(f.ratio()),
            f.goal.as_deref().unwrap_or("—"),
        ));
    }
    out
}

/// The markers between which docs/performance.md holds the generated table.
pub const BEGIN: &str = "<!-- bench:begin -->";
pub const END: &str = "<!-- bench:end -->";

/// `doc` with the text between [`BEGIN`] and [`END`] replaced by `table` (markers kept), or
/// `None` when the markers are missing or out of order.
pub fn replace_table(doc: &str, table: &str) -> Option<String> {
    let start = doc.find(BEGIN)? + BEGIN.len();
    let end = doc[start..].find(END)? + start;
    Some(format!("{}\n{}{}", &doc[..start], table, &doc[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn fig(value: f64, floor: f64) -> Figure {
        Figure {
            name: "n".into(),
            what: "w".into(),
            value,
            unit: "s".into(),
            floor,
            floor_what: "direct".into(),
            goal: Some("≤ 1.2".into()),
            notes: vec![],
        }
    }

    #[rstest]
    #[case(12.0, 10.0, 1.2)]
    #[case(5.0, 10.0, 0.5)]
    fn ratio_is_value_over_floor(#[case] v: f64, #[case] f: f64, #[case] want: f64) {
        assert!((fig(v, f).ratio() - want).abs() < 1e-9);
    }

    #[test]
    fn a_zero_floor_has_no_ratio() {
        assert!(fig(1.0, 0.0).ratio().is_nan());
    }

    #[test]
    fn the_table_has_a_row_per_figure() {
        let t = table(&[fig(12.0, 10.0), fig(150.0, 100.0)]);
        assert_eq!(t.lines().count(), 4, "{t}");
        assert!(
            t.contains("| n: w | 12.0 s | 10.0 s: direct | 1.20 | ≤ 1.2 |"),
            "{t}"
        );
        assert!(t.contains("| 150 s |"), "{t}");
    }

    #[rstest]
    #[case(
        "a\n<!-- bench:begin -->\nold\n<!-- bench:end -->\nb\n",
        Some("a\n<!-- bench:begin -->\nNEW\n<!-- bench:end -->\nb\n")
    )]
    #[case("no markers", None)]
    #[case("<!-- bench:end --> <!-- bench:begin -->", None)]
    fn the_docs_table_is_replaced_between_its_markers(
        #[case] doc: &str,
        #[case] want: Option<&str>,
    ) {
        assert_eq!(replace_table(doc, "NEW\n").as_deref(), want);
    }
}
