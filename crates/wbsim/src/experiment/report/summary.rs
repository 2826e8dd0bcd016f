//! The short per-experiment summary: runs, failures, and how the simulated
//! figures compare with the published ones (how many have a simulated
//! value, how many of those are within 1.5x, the range of ratios). Printed on stdout by `reproduce` and `report`, and at the top
//! of report.md.
//!
//! Leaves out per-metric detail (the report has it).

use super::compare::published_rows;
use super::format::{num, NA};
use super::group::ExperimentGroup;

/// One experiment's line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// `E1`.. or `-` for other scenarios.
    pub code: String,
    /// Experiment id.
    pub id: String,
    /// `ok`, `FAILED`, `still to come` or `no results`.
    pub status: String,
    /// Runs with results.
    pub ok: usize,
    /// Failed runs.
    pub failed: usize,
    /// Published figures with a simulated value, of all published.
    pub matched: String,
    /// Of those, how many are within 1.5x (`2/4`), or n/a.
    pub within: String,
    /// Range of simulated/published ratios (`0.91x..1.30x`) or n/a.
    pub ratios: String,
}

/// The rows, in report order.
pub fn rows(groups: &[ExperimentGroup<'_>]) -> Vec<Row> {
    groups
        .iter()
        .map(|g| {
            let pubs = published_rows(g, None);
            let ratios: Vec<f64> = pubs.iter().filter_map(|p| p.ratio).collect();
            let (ok, failed) = (g.ok_runs(), g.failed_runs());
            let status = if failed > 0 {
                "FAILED"
            } else if ok > 0 {
                "ok"
            } else if g.experiment.is_some_and(|e| e.scenario.is_none()) {
                "still to come"
            } else {
                "no results"
            };
            let ratio_text = match (
                ratios.iter().copied().reduce(f64::min),
                ratios.iter().copied().reduce(f64::max),
            ) {
                (Some(lo), Some(hi)) if lo == hi => format!("{}x", num(Some(lo))),
                (Some(lo), Some(hi)) => format!("{}x..{}x", num(Some(lo)), num(Some(hi))),
                _ => NA.to_string(),
            };
            Row {
                code: g.experiment.map_or("-", |e| e.code).to_string(),
                id: g.id.clone(),
                status: status.to_string(),
                ok,
                failed,
                matched: format!("{}/{}", ratios.len(), pubs.len()),
                within: if ratios.is_empty() {
                    NA.to_string()
                } else {
                    format!(
                        "{}/{}",
                        ratios.iter().filter(|r| super::format::within(**r)).count(),
                        ratios.len()
                    )
                },
                ratios: ratio_text,
            }
        })
        .collect()
}

/// Column headings.
pub const HEADINGS: [&str; 8] = [
    "exp",
    "id",
    "status",
    "runs ok",
    "failed",
    "published: simulated",
    "within 1.5x",
    "sim/published range",
];

fn cells(r: &Row) -> [String; 8] {
    [
        r.code.clone(),
        r.id.clone(),
        r.status.clone(),
        r.ok.to_string(),
        r.failed.to_string(),
        r.matched.clone(),
        r.within.clone(),
        r.ratios.clone(),
    ]
}

/// The table as aligned plain text.
pub fn render(groups: &[ExperimentGroup<'_>]) -> String {
    let rows: Vec<[String; 8]> = rows(groups).iter().map(cells).collect();
    let mut width = HEADINGS.map(str::len);
    for r in &rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.len());
        }
    }
    let line = |cells: &[String; 8]| {
        let parts: Vec<String> = cells
            .iter()
            .zip(width)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        format!("{}\n", parts.join("  ").trim_end())
    };
    let mut out = line(&HEADINGS.map(str::to_string));
    for r in &rows {
        out.push_str(&line(r));
    }
    out
}

/// The table in Markdown.
pub fn markdown(groups: &[ExperimentGroup<'_>]) -> String {
    let mut out = format!("| {} |\n", HEADINGS.join(" | "));
    out.push_str(&format!("|{}\n", "---|".repeat(HEADINGS.len())));
    for r in rows(groups) {
        let c = cells(&r);
        let link = format!("[{}](#{})", c[1], c[1]);
        out.push_str(&format!(
            "| {} | {} | {} |\n",
            c[0],
            link,
            c[2..].join(" | ")
        ));
    }
    out
}
