//! The tables of one experiment as plain cells, so the Markdown and HTML
//! writers show the same figures: simulated results per variant, published
//! vs simulated, live vs simulated.
//!
//! Cells are unescaped text; missing figures are "n/a". Leaves out
//! formatting (the writers do it).

use super::compare::{live_rows, published_rows};
use super::format::{num, ratio};
use super::group::ExperimentGroup;

/// A table: headings and rows of cells.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Table {
    /// Column headings.
    pub headings: Vec<String>,
    /// Rows.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    fn new(headings: &[&str]) -> Table {
        Table {
            headings: headings.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }
}

/// Statistics shown per metric (mean first; the rest for histograms).
const SHOWN: &[&str] = &["p50", "p95", "p99", "max"];

/// Simulated results: one row per metric and variant (metrics sorted,
/// variants in report order), mean over repetitions, ± the standard
/// deviation over repetitions of the mean.
pub fn simulated(g: &ExperimentGroup<'_>) -> Table {
    let mut t = Table::new(&[
        "metric", "variant", "unit", "runs", "mean", "p50", "p95", "p99", "max",
    ]);
    let names: std::collections::BTreeSet<&str> =
        g.variants.iter().flat_map(|v| v.metric_names()).collect();
    for m in names {
        for v in &g.variants {
            let Some(a) = v.aggregate(m) else { continue };
            let mut mean = num(a.stat("mean"));
            if let Some(sd) = a.spread {
                mean.push_str(&format!(" ± {}", num(Some(sd))));
            }
            let mut row = vec![
                m.to_string(),
                v.label.clone(),
                a.unit.clone(),
                a.n.to_string(),
                mean,
            ];
            for s in SHOWN {
                row.push(if a.hist {
                    num(a.stat(s))
                } else {
                    String::new()
                });
            }
            t.rows.push(row);
        }
    }
    t
}

/// Published vs simulated (and live, when given).
pub fn published(g: &ExperimentGroup<'_>, live: Option<&ExperimentGroup<'_>>) -> Table {
    let mut t = Table::new(&[
        "source",
        "variant",
        "metric",
        "stat",
        "unit",
        "published",
        "simulated",
        "sim/published",
        "live",
    ]);
    for r in published_rows(g, live) {
        let p = r.published;
        t.rows.push(vec![
            p.source.to_string(),
            r.label,
            p.metric.to_string(),
            p.stat.to_string(),
            p.unit.to_string(),
            num(Some(p.value)),
            num(r.simulated),
            super::format::verdict(r.ratio),
            num(r.live),
        ]);
    }
    t
}

/// Live probe figures beside the simulated ones.
pub fn live(g: &ExperimentGroup<'_>, live: &ExperimentGroup<'_>) -> Table {
    let mut t = Table::new(&[
        "variant",
        "metric",
        "stat",
        "unit",
        "live",
        "simulated",
        "sim/live",
    ]);
    for r in live_rows(g, live) {
        t.rows.push(vec![
            r.variant,
            r.metric,
            r.stat.to_string(),
            r.unit,
            num(r.live),
            num(r.simulated),
            ratio(r.ratio),
        ]);
    }
    t
}

/// Failed runs: (variant label, seed, error), in report order.
pub fn failed(g: &ExperimentGroup<'_>) -> Vec<(String, u64, String)> {
    g.variants
        .iter()
        .flat_map(|v| {
            v.failed
                .iter()
                .map(|f| (v.label.clone(), f.seed, f.error.clone()))
        })
        .collect()
}
