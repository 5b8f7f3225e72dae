//! Results: the table on stdout and the `--json` file.

use std::path::Path;

use serde_json::json;

/// How a figure is judged.
#[derive(Clone, Debug)]
pub(crate) enum Target {
    /// Reported only.
    Info,
    /// value / reference ≥ x.
    RatioAtLeast(f64),
    /// value / reference ≤ x.
    RatioAtMost(f64),
    /// value ≤ x (absolute, in the figure's unit).
    AtMost(f64),
    /// value ≥ x (absolute).
    AtLeast(f64),
    /// value == x.
    Equals(f64),
}

/// One measured figure.
#[derive(Clone, Debug)]
pub(crate) struct Figure {
    /// Scenario name.
    pub(crate) scenario: String,
    /// What was measured, with its unit.
    pub(crate) figure: String,
    /// The measured value (NaN when it could not be measured).
    pub(crate) value: f64,
    /// The reference value, if any.
    pub(crate) reference: Option<f64>,
    /// The target.
    pub(crate) target: Target,
}

impl Figure {
    /// A figure without a reference.
    pub(crate) fn new(scenario: &str, figure: &str, value: f64, target: Target) -> Figure {
        Figure {
            scenario: scenario.to_string(),
            figure: figure.to_string(),
            value,
            reference: None,
            target,
        }
    }

    /// A figure compared with a reference.
    pub(crate) fn vs(
        scenario: &str,
        figure: &str,
        value: f64,
        reference: f64,
        target: Target,
    ) -> Figure {
        Figure {
            reference: Some(reference),
            ..Figure::new(scenario, figure, value, target)
        }
    }

    /// A scenario that failed to run.
    pub(crate) fn error(scenario: &str, message: &str) -> Figure {
        Figure::new(
            scenario,
            &format!("ERROR: {message}"),
            f64::NAN,
            Target::Equals(0.0),
        )
    }

    /// value / reference.
    pub(crate) fn ratio(&self) -> Option<f64> {
        self.reference
            .filter(|r| *r != 0.0 && !r.is_nan())
            .map(|r| self.value / r)
    }

    /// The target as text.
    pub(crate) fn target_text(&self) -> String {
        match self.target {
            Target::Info => "-".to_string(),
            Target::RatioAtLeast(x) => format!("ratio >= {x}"),
            Target::RatioAtMost(x) => format!("ratio <= {x}"),
            Target::AtMost(x) => format!("<= {}", fmt(x)),
            Target::AtLeast(x) => format!(">= {}", fmt(x)),
            Target::Equals(x) => format!("= {}", fmt(x)),
        }
    }

    /// Whether the target is met (`None` for info figures or a missing
    /// reference).
    pub(crate) fn pass(&self) -> Option<bool> {
        if self.value.is_nan() {
            return match self.target {
                Target::Info => None,
                _ => Some(false),
            };
        }
        match self.target {
            Target::Info => None,
            Target::RatioAtLeast(x) => self.ratio().map(|r| r >= x),
            Target::RatioAtMost(x) => self.ratio().map(|r| r <= x),
            Target::AtMost(x) => Some(self.value <= x),
            Target::AtLeast(x) => Some(self.value >= x),
            Target::Equals(x) => Some(self.value == x),
        }
    }
}

/// Formats a number compactly.
pub(crate) fn fmt(x: f64) -> String {
    if x.is_nan() {
        "n/a".to_string()
    } else if x.abs() >= 100.0 || x.fract() == 0.0 {
        format!("{x:.0}")
    } else if x.abs() >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// The results table as text.
pub(crate) fn table(figures: &[Figure]) -> String {
    let header = [
        "scenario",
        "figure",
        "value",
        "reference",
        "ratio",
        "target",
        "pass",
    ];
    let rows: Vec<[String; 7]> = figures
        .iter()
        .map(|f| {
            [
                f.scenario.clone(),
                f.figure.clone(),
                fmt(f.value),
                f.reference.map_or_else(|| "n/a".to_string(), fmt),
                f.ratio().map_or_else(|| "-".to_string(), fmt),
                f.target_text(),
                match f.pass() {
                    None => "-".to_string(),
                    Some(true) => "pass".to_string(),
                    Some(false) => "FAIL".to_string(),
                },
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let parts: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        format!("| {} |\n", parts.join(" | "))
    };
    let mut out = line(&header.map(str::to_string));
    out.push_str(&line(&widths.map(|w| "-".repeat(w))));
    for row in &rows {
        out.push_str(&line(row));
    }
    out
}

/// Writes the `--json` file.
pub(crate) fn write_json(path: &Path, figures: &[Figure]) -> anyhow::Result<()> {
    let num = |x: f64| if x.is_nan() { json!(null) } else { json!(x) };
    let results: Vec<_> = figures
        .iter()
        .map(|f| {
            json!({
                "scenario": f.scenario,
                "figure": f.figure,
                "value": num(f.value),
                "reference": f.reference.map_or(json!(null), num),
                "ratio": f.ratio().map_or(json!(null), num),
                "target": f.target_text(),
                "pass": f.pass(),
            })
        })
        .collect();
    let text = serde_json::to_string_pretty(&json!({ "results": results }))?;
    std::fs::write(path, text + "\n")?;
    Ok(())
}
