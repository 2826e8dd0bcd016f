//! Which plots an experiment gets. For a catalog experiment with headline
//! figures: one plot per headline metric (a latency CDF when its statistics
//! are percentiles of a time histogram, lines over a numeric sweep, else
//! horizontal bars grouped by the metrics a pattern matches), each with the
//! published figures as points, then the time series that move. For other
//! scenarios, chosen from the metrics' kinds and units alone:
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
//! A plot without data or whose values are all equal (a CDF of zeros, a
//! dirty-page series that stays at 0) is not drawn. Leaves out drawing
//! (svg.rs) and metrics of other units (counters, pages), which stay in the
//! tables. At most [`MAX_PLOTS`] per experiment.

use super::group::{ExperimentGroup, VariantGroup};
use super::headline::{matching, published_for, published_in, sides};
use crate::experiment::catalog::Headline;
use crate::experiment::metrics::{unit_factor, MetricSummary};

/// Most plots per experiment (the tables hold everything).
pub const MAX_PLOTS: usize = 16;

/// Most lines in a time-series plot (the palette's size).
const MAX_SERIES_LINES: usize = 8;

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
    /// Lines (CDF, sweep, series); for bars one line per variant whose
    /// points are (category index, value).
    pub lines: Vec<Line>,
    /// Published figures drawn as points, one named set per variant, in
    /// the plot's coordinates (bars: category index, value).
    pub markers: Vec<Line>,
    /// Bar categories (bars only).
    pub categories: Vec<String>,
}

impl Plot {
    /// Whether the plot shows something: a simulated point, and not every
    /// value (published points included) the same (a CDF compares x
    /// values, other plots y values).
    pub fn has_data(&self) -> bool {
        if self.lines.iter().all(|l| l.1.is_empty()) {
            return false;
        }
        let vals: Vec<f64> = self
            .lines
            .iter()
            .chain(self.markers.iter())
            .flat_map(|l| l.1.iter())
            .map(|&(x, y)| if self.kind == PlotKind::Cdf { x } else { y })
            .filter(|v| v.is_finite())
            .collect();
        let Some(first) = vals.first() else {
            return false;
        };
        vals.iter().any(|v| v != first)
    }
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
        markers: Vec::new(),
        categories: Vec::new(),
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
        x_label: unit.to_string(),
        y_label: String::new(),
        lines,
        markers: Vec::new(),
        categories: vec![metric.to_string()],
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
        markers: Vec::new(),
        categories: Vec::new(),
    }
}

fn series(g: &ExperimentGroup<'_>, name: &str) -> Plot {
    let mut unit = String::new();
    let lines = series_variants(g)
        .into_iter()
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
        markers: Vec::new(),
        categories: Vec::new(),
    }
}

/// The variants a time series shows: all of them, or with more than
/// [`MAX_SERIES_LINES`] labels (a sweep), each name at the first and last
/// sweep point.
fn series_variants<'g, 'a>(g: &'g ExperimentGroup<'a>) -> Vec<&'g VariantGroup<'a>> {
    let with_runs: Vec<&VariantGroup<'a>> =
        g.variants.iter().filter(|v| !v.runs.is_empty()).collect();
    if with_runs.len() <= MAX_SERIES_LINES {
        return with_runs;
    }
    let mut out: Vec<&VariantGroup<'a>> = Vec::new();
    for v in &with_runs {
        let same: Vec<&&VariantGroup<'a>> = with_runs.iter().filter(|w| w.name == v.name).collect();
        let first = same.first().is_some_and(|w| w.label == v.label);
        let last = same.last().is_some_and(|w| w.label == v.label);
        if first || last {
            out.push(v);
        }
    }
    out.truncate(MAX_SERIES_LINES);
    out
}

/// Cumulative fraction of a percentile statistic (`p99` -> 0.99).
fn fraction(stat: &str) -> Option<f64> {
    CDF_POINTS.iter().find(|(s, _)| *s == stat).map(|p| p.1)
}

/// Published points of `metric` for every variant name of `g`, as (x, y)
/// from `point(published value in unit, published figure)`.
fn published_points(
    g: &ExperimentGroup<'_>,
    metric: &str,
    stats: &[&str],
    unit: &str,
    xy: impl Fn(f64, &str, Option<&(String, String)>) -> Option<(f64, f64)>,
) -> Vec<Line> {
    let mut out: Vec<Line> = Vec::new();
    let mut seen: Vec<(String, Option<(String, String)>)> = Vec::new();
    for v in &g.variants {
        if seen.contains(&(v.name.clone(), v.sweep.clone())) {
            continue;
        }
        seen.push((v.name.clone(), v.sweep.clone()));
        for stat in stats {
            let Some(p) = published_for(g.experiment, &v.name, &v.sweep, metric, stat) else {
                continue;
            };
            let Some(val) = published_in(p, unit) else {
                continue;
            };
            let Some(pt) = xy(val, stat, v.sweep.as_ref()) else {
                continue;
            };
            let name = format!("published {}", v.name);
            match out.iter_mut().find(|l| l.0 == name) {
                Some(l) => l.1.push(pt),
                None => out.push((name, vec![pt])),
            }
        }
    }
    for l in &mut out {
        l.1.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// The shortest distinct names of `metrics`: their common prefix and
/// suffix (at `.` boundaries) removed.
fn short_names(metrics: &[&str]) -> Vec<String> {
    if metrics.len() < 2 {
        return metrics.iter().map(|m| m.to_string()).collect();
    }
    let split: Vec<Vec<&str>> = metrics.iter().map(|m| m.split('.').collect()).collect();
    let min = split.iter().map(Vec::len).min().unwrap_or(0);
    let pre = (0..min)
        .take_while(|&i| split.iter().all(|s| s[i] == split[0][i]))
        .count();
    let suf = (0..min - pre)
        .take_while(|&i| {
            split
                .iter()
                .all(|s| s[s.len() - 1 - i] == split[0][split[0].len() - 1 - i])
        })
        .count();
    split
        .iter()
        .map(|s| s[pre..s.len() - suf].join("."))
        .collect()
}

/// Whether `metric` is a histogram in `g`'s runs.
fn is_hist(g: &ExperimentGroup<'_>, metric: &str) -> bool {
    g.variants
        .iter()
        .flat_map(|v| v.runs.iter())
        .find_map(|r| r.metrics.get(metric))
        .is_some_and(|m| matches!(m, MetricSummary::Hist(_)))
}

/// The plots of one headline entry.
fn headline_plots(g: &ExperimentGroup<'_>, h: &Headline) -> Vec<Plot> {
    let metrics = matching(g, h.metric);
    let percentiles = h.stats.iter().all(|s| fraction(s).is_some());
    let sweeping = g.variants.iter().any(|v| numeric_sweep(v).is_some());
    let mut out = Vec::new();
    let mut barred: Vec<&str> = Vec::new();
    for m in &metrics {
        if percentiles && is_hist(g, m) && is_time(h.unit) {
            let mut p = cdf(g, m, h.unit);
            p.markers = published_points(g, m, h.stats, h.unit, |v, stat, _| {
                Some((v, fraction(stat)?))
            });
            out.push(p);
        } else if sweeping {
            let stat = h.stats.first().copied().unwrap_or("mean");
            let mut p = sweep_stat(g, m, stat, h.unit);
            p.markers = published_points(g, m, &[stat], h.unit, |v, _, point| {
                Some((point?.1.parse::<f64>().ok()?, v))
            });
            out.push(p);
        } else {
            barred.push(m);
        }
    }
    if !barred.is_empty() {
        out.push(grouped_bars(g, &barred, h));
    }
    out
}

/// A sweep plot of `stat` (`mean` for a scalar's value).
fn sweep_stat(g: &ExperimentGroup<'_>, metric: &str, stat: &str, unit: &str) -> Plot {
    let mut p = sweep(g, metric, unit);
    if stat != "mean" {
        p.lines.clear();
        for v in &g.variants {
            let Some((_, x)) = numeric_sweep(v) else {
                continue;
            };
            let Some(y) = v.aggregate(metric).and_then(|a| a.stat_in(stat, unit)) else {
                continue;
            };
            match p.lines.iter_mut().find(|l| l.0 == v.name) {
                Some(l) => l.1.push((x, y)),
                None => p.lines.push((v.name.clone(), vec![(x, y)])),
            }
        }
        for l in &mut p.lines {
            l.1.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        p.title = format!("{metric} {stat}");
    }
    p
}

/// Horizontal bars: one category per metric, one bar per variant name
/// (the first statistic of the headline), published figures as points.
fn grouped_bars(g: &ExperimentGroup<'_>, metrics: &[&str], h: &Headline) -> Plot {
    let stat = h.stats.first().copied().unwrap_or("mean");
    let mut lines: Vec<Line> = Vec::new();
    let mut markers: Vec<Line> = Vec::new();
    for v in g.variants.iter().filter(|v| !v.runs.is_empty()) {
        let mut pts = Vec::new();
        let mut pubs = Vec::new();
        for (i, m) in metrics.iter().enumerate() {
            if let Some(y) = v.aggregate(m).and_then(|a| a.stat_in(stat, h.unit)) {
                pts.push((i as f64, y));
            }
            if let Some(p) = published_for(g.experiment, &v.name, &v.sweep, m, stat)
                .and_then(|p| published_in(p, h.unit))
            {
                pubs.push((i as f64, p));
            }
        }
        lines.push((v.label.clone(), pts));
        if !pubs.is_empty() {
            markers.push((format!("published {}", v.label), pubs));
        }
    }
    let title = if metrics.len() == 1 {
        format!("{} {stat}", metrics[0])
    } else {
        format!("{} {stat}", h.metric)
    };
    Plot {
        kind: PlotKind::Bars,
        title,
        x_label: h.unit.to_string(),
        y_label: String::new(),
        lines,
        markers,
        categories: short_names(metrics),
    }
}

/// The series of `g` (sorted by name).
fn all_series(g: &ExperimentGroup<'_>) -> Vec<Plot> {
    let names: std::collections::BTreeSet<&str> = g
        .variants
        .iter()
        .flat_map(|v| {
            v.runs
                .iter()
                .flat_map(|r| r.series.keys().map(String::as_str))
        })
        .collect();
    names.into_iter().map(|n| series(g, n)).collect()
}

/// The plots of `g`, in a fixed order: for a catalog experiment with
/// headline figures its headline plots then the series; otherwise per
/// metric (sorted by name) its CDF or bars/sweep, then the series. Plots
/// without data or with all values equal are left out.
pub fn plan(g: &ExperimentGroup<'_>) -> Vec<Plot> {
    let headline = g.experiment.map_or(&[][..], |e| e.headline);
    let mut out = Vec::new();
    if !headline.is_empty() && sides(g).is_some() {
        for h in headline {
            out.extend(headline_plots(g, h));
        }
    } else {
        out.extend(auto_plots(g));
    }
    out.extend(all_series(g));
    out.retain(Plot::has_data);
    out.truncate(MAX_PLOTS);
    out
}

/// Plots chosen from metric kinds and units alone (scenarios without a
/// catalog headline).
fn auto_plots(g: &ExperimentGroup<'_>) -> Vec<Plot> {
    let mut metrics = std::collections::BTreeMap::new();
    for v in &g.variants {
        for r in &v.runs {
            for (name, m) in &r.metrics {
                metrics
                    .entry(name.as_str())
                    .or_insert_with(|| (m.unit().to_string(), matches!(m, MetricSummary::Hist(_))));
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
    out
}
