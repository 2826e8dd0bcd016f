//! Which plots an experiment gets, chosen from its metrics' kinds and units
//! alone, so a new experiment gets plots without code changes:
//!
//! - a histogram in a time unit -> a latency CDF, one line per variant,
//!   through the min/p50/p90/p95/p99/p99.9/max points (mean over
//!   repetitions);
//! - a metric in a bandwidth unit -> bars per variant (a scalar's value, a
//!   histogram's mean), or, when the variants carry numeric sweep points,
//!   lines with x = the sweep value, one per variant name;
//! - a time series (`dirty_pages`...) -> value over simulated time, one
//!   line per variant (its first repetition).
//!
//! Leaves out drawing (svg.rs) and metrics of other units (counters,
//! pages), which stay in the tables. At most [`MAX_PLOTS`] per experiment.

use super::group::{ExperimentGroup, VariantGroup};
use crate::experiment::metrics::unit_factor;

/// Most plots per experiment (the tables hold everything).
pub const MAX_PLOTS: usize = 24;

/// Percentile points of a CDF: (statistic, cumulative fraction).
const CDF_POINTS: &[(&str, f64)] = &[
    ("min", 0.0),
    ("p50", 0.5),
    ("p90", 0.9),
    ("p95", 0.95),
    ("p99", 0.99),
    ("p99.9", 0.999),
    ("max", 1.0),
];

/// What kind of plot (also its CSS class suffix).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlotKind {
    /// Latency CDF.
    Cdf,
    /// Bars per variant.
    Bars,
    /// Lines over a sweep.
    Sweep,
    /// Value over time.
    Series,
}

impl PlotKind {
    /// `cdf`, `bars`, `sweep`, `series`.
    pub fn name(self) -> &'static str {
        match self {
            PlotKind::Cdf => "cdf",
            PlotKind::Bars => "bars",
            PlotKind::Sweep => "sweep",
            PlotKind::Series => "series",
        }
    }
}

/// One named line of (x, y) points.
pub type Line = (String, Vec<(f64, f64)>);

/// A plot to draw.
#[derive(Clone, Debug, PartialEq)]
pub struct Plot {
    /// Kind.
    pub kind: PlotKind,
    /// Title (the metric or series name).
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// Lines (CDF, sweep, series) or one bar per entry (x unused).
    pub lines: Vec<Line>,
}

/// Whether `unit` is a time unit.
pub fn is_time(unit: &str) -> bool {
    unit_factor(unit, "ns").is_some()
}

/// Whether `unit` is a bandwidth unit.
pub fn is_rate(unit: &str) -> bool {
    unit_factor(unit, "bytes/s").is_some()
}

fn numeric_sweep(v: &VariantGroup<'_>) -> Option<(String, f64)> {
    let (k, x) = v.sweep.as_ref()?;
    Some((k.clone(), x.parse::<f64>().ok()?))
}

fn cdf(g: &ExperimentGroup<'_>, metric: &str, unit: &str) -> Plot {
    let lines = g
        .variants
        .iter()
        .filter_map(|v| {
            let a = v.aggregate(metric)?;
            let f = unit_factor(&a.unit, unit)?;
            let pts = CDF_POINTS
                .iter()
                .filter_map(|(s, p)| Some((a.stat(s)? * f, *p)))
                .collect::<Vec<_>>();
            (!pts.is_empty()).then(|| (v.label.clone(), pts))
        })
        .collect();
    Plot {
        kind: PlotKind::Cdf,
        title: metric.to_string(),
        x_label: unit.to_string(),
        y_label: "fraction".to_string(),
        lines,
    }
}

fn bars(g: &ExperimentGroup<'_>, metric: &str, unit: &str) -> Plot {
    let lines = g
        .variants
        .iter()
        .filter_map(|v| {
            let y = v.aggregate(metric)?.stat_in("mean", unit)?;
            Some((v.label.clone(), vec![(0.0, y)]))
        })
        .collect();
    Plot {
        kind: PlotKind::Bars,
        title: metric.to_string(),
        x_label: "variant".to_string(),
        y_label: unit.to_string(),
        lines,
    }
}

fn sweep(g: &ExperimentGroup<'_>, metric: &str, unit: &str) -> Plot {
    let mut lines: Vec<Line> = Vec::new();
    let mut key = String::new();
    for v in &g.variants {
        let Some((k, x)) = numeric_sweep(v) else {
            continue;
        };
        let Some(y) = v.aggregate(metric).and_then(|a| a.stat_in("mean", unit)) else {
            continue;
        };
        key = k;
        match lines.iter_mut().find(|l| l.0 == v.name) {
            Some(l) => l.1.push((x, y)),
            None => lines.push((v.name.clone(), vec![(x, y)])),
        }
    }
    for l in &mut lines {
        l.1.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    Plot {
        kind: PlotKind::Sweep,
        title: metric.to_string(),
        x_label: key,
        y_label: unit.to_string(),
        lines,
    }
}

fn series(g: &ExperimentGroup<'_>, name: &str) -> Plot {
    let mut unit = String::new();
    let lines = g
        .variants
        .iter()
        .filter_map(|v| {
            let r = v.runs.iter().find(|r| r.series.contains_key(name))?;
            if unit.is_empty() {
                unit = r
                    .metrics
                    .get(name)
                    .map(|m| m.unit().to_string())
                    .unwrap_or_default();
            }
            let pts = r.series[name]
                .iter()
                .filter(|p| p.1.is_finite())
                .map(|p| (p.0 as f64 / 1e9, p.1))
                .collect();
            Some((format!("{} (seed {})", v.label, r.seed), pts))
        })
        .collect();
    Plot {
        kind: PlotKind::Series,
        title: name.to_string(),
        x_label: "simulated time (s)".to_string(),
        y_label: unit,
        lines,
    }
}

/// The plots of `g`, in a fixed order: per metric (sorted by name) its CDF
/// or bars/sweep, then the series (sorted by name).
pub fn plan(g: &ExperimentGroup<'_>) -> Vec<Plot> {
    let mut metrics = std::collections::BTreeMap::new();
    for v in &g.variants {
        for r in &v.runs {
            for (name, m) in &r.metrics {
                metrics.entry(name.as_str()).or_insert_with(|| {
                    (
                        m.unit().to_string(),
                        matches!(m, crate::experiment::metrics::MetricSummary::Hist(_)),
                    )
                });
            }
        }
    }
    let sweeping = g.variants.iter().any(|v| numeric_sweep(v).is_some());
    let mut out = Vec::new();
    for (name, (unit, hist)) in &metrics {
        if *hist && is_time(unit) {
            out.push(cdf(g, name, unit));
        } else if is_rate(unit) {
            out.push(if sweeping {
                sweep(g, name, unit)
            } else {
                bars(g, name, unit)
            });
        }
    }
    let names: std::collections::BTreeSet<&str> = g
        .variants
        .iter()
        .flat_map(|v| {
            v.runs
                .iter()
                .flat_map(|r| r.series.keys().map(String::as_str))
        })
        .collect();
    out.extend(names.into_iter().map(|n| series(g, n)));
    out.retain(|p| p.lines.iter().any(|l| !l.1.is_empty()));
    out.truncate(MAX_PLOTS);
    out
}
