//! The tables a reader sees first, all driven by the catalog entry
//! (`headline`, `per_job`, `breakdown`) and the metric names in the
//! results, so a new experiment gets them without code here:
//!
//! - the headline A/B table: baseline (the switch's first side) vs each
//!   other side, per headline metric, statistic and sweep point, with the
//!   change in percent, Welch's t-test over the repetitions, and the
//!   published figures with the ratio simulated / published, marked when
//!   outside [`TOLERANCE`];
//! - the per-job table (fio jobs found as `fio.JOB.SUFFIX`): one row per
//!   job and variant, the change against the baseline beside each figure;
//! - the "where time goes" table: one row per variant label (sweep point),
//!   per column the matched metrics combined.
//!
//! Leaves out corrections for multiple comparisons: each row's test stands
//! alone, as in mmtests' compare-kernels.

use std::collections::BTreeSet;

use super::format::{num, NA};
pub use super::format::{verdict, within, TOLERANCE};
use super::group::{stat_of, ExperimentGroup, VariantGroup};
use super::stats::{describe, glob, welch};
use super::tables::Table;
use crate::experiment::catalog::{Column, Combine, Experiment, Published};
use crate::experiment::metrics::unit_factor;

/// Every metric name in `g`'s runs matching `pattern`, sorted.
pub fn matching<'a>(g: &ExperimentGroup<'a>, pattern: &str) -> Vec<&'a str> {
    let names: BTreeSet<&'a str> = g
        .variants
        .iter()
        .flat_map(|v| v.metric_names())
        .filter(|n| glob(pattern, n))
        .collect();
    names.into_iter().collect()
}

/// One value per run of `v` (by seed): `metric`'s `stat` in `unit`.
pub fn per_run(v: &VariantGroup<'_>, metric: &str, stat: &str, unit: &str) -> Vec<f64> {
    v.runs
        .iter()
        .filter_map(|r| {
            let m = r.metrics.get(metric)?;
            Some(stat_of(m, stat)? * unit_factor(m.unit(), unit)?)
        })
        .filter(|x| x.is_finite())
        .collect()
}

/// Mean of `xs`, None if empty.
fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// The baseline side name and the other side names present in `g`, in
/// report order. Baseline: the switch's first side if it has runs, else
/// the first variant name.
pub fn sides(g: &ExperimentGroup<'_>) -> Option<(String, Vec<String>)> {
    let mut names: Vec<String> = Vec::new();
    for v in &g.variants {
        if !v.runs.is_empty() && !names.contains(&v.name) {
            names.push(v.name.clone());
        }
    }
    let base = g
        .experiment
        .and_then(|e| e.sides().first().map(|s| s.to_string()))
        .filter(|b| names.contains(b))
        .or_else(|| names.first().cloned())?;
    let others = names.into_iter().filter(|n| *n != base).collect();
    Some((base, others))
}

/// The distinct sweep points of `g` in report order (`[None]` without a
/// sweep).
pub fn points(g: &ExperimentGroup<'_>) -> Vec<Option<(String, String)>> {
    let mut out: Vec<Option<(String, String)>> = Vec::new();
    for v in &g.variants {
        if !out.contains(&v.sweep) {
            out.push(v.sweep.clone());
        }
    }
    if out.is_empty() {
        out.push(None);
    }
    out
}

/// The variant named `name` at sweep point `point`.
pub fn at<'g, 'a>(
    g: &'g ExperimentGroup<'a>,
    name: &str,
    point: &Option<(String, String)>,
) -> Option<&'g VariantGroup<'a>> {
    g.variants
        .iter()
        .find(|v| v.name == name && v.sweep == *point)
}

/// The published figure of `e` for variant `name` at `point`, `metric`
/// and `stat`.
pub fn published_for(
    e: Option<&Experiment>,
    name: &str,
    point: &Option<(String, String)>,
    metric: &str,
    stat: &str,
) -> Option<&'static Published> {
    e?.published().find(|p| {
        p.variant == name
            && p.metric == metric
            && p.stat == stat
            && match (point, p.sweep) {
                (None, None) => true,
                (Some((k, v)), Some((pk, pv))) => k.ends_with(pk) && v == pv,
                _ => false,
            }
    })
}

/// `p`'s value in `unit` (None if not convertible).
pub fn published_in(p: &Published, unit: &str) -> Option<f64> {
    Some(p.value * unit_factor(p.unit, unit)?)
}

/// `+12.3%` for the change from `a` to `b`; n/a if `a` is 0 or missing.
pub fn change(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if a != 0.0 && a.is_finite() && b.is_finite() => {
            let c = (b - a) / a.abs() * 100.0;
            format!("{}{}%", if c >= 0.0 { "+" } else { "" }, num(Some(c)))
        }
        _ => NA.to_string(),
    }
}

/// The headline A/B table of `g` (empty without a catalog headline or
/// runs).
pub fn headline(g: &ExperimentGroup<'_>) -> Table {
    let Some(e) = g.experiment else {
        return Table::default();
    };
    let Some((base, others)) = sides(g) else {
        return Table::default();
    };
    let points = points(g);
    let key = points.iter().flatten().next().map(|(k, _)| k.clone());
    let mut headings = vec!["metric".to_string(), "stat".to_string()];
    if let Some(k) = &key {
        headings.push(k.clone());
    }
    headings.extend(
        [
            "unit",
            &format!("baseline: {base}"),
            "patched",
            "value",
            "change",
            "significance over seeds",
            &format!("published {base}"),
            "sim/published",
            "published patched",
            "sim/published",
        ]
        .map(str::to_string),
    );
    let mut t = Table {
        headings,
        rows: Vec::new(),
    };
    let compared: Vec<&String> = if others.is_empty() {
        vec![&base]
    } else {
        others.iter().collect()
    };
    for h in e.headline {
        for metric in matching(g, h.metric) {
            for stat in h.stats {
                for point in &points {
                    let bv = at(g, &base, point);
                    let bx = bv.map_or_else(Vec::new, |v| per_run(v, metric, stat, h.unit));
                    if bv.is_none() {
                        continue;
                    }
                    let bpub = published_for(Some(e), &base, point, metric, stat);
                    let bpub_v = bpub.and_then(|p| published_in(p, h.unit));
                    for other in &compared {
                        let ov = at(g, other, point);
                        if ov.is_none() && *other != &base {
                            continue;
                        }
                        let ox = ov.map_or_else(Vec::new, |v| per_run(v, metric, stat, h.unit));
                        if bx.is_empty() && ox.is_empty() {
                            continue;
                        }
                        let (bm, om) = (mean(&bx), mean(&ox));
                        let opub = published_for(Some(e), other, point, metric, stat);
                        let opub_v = opub.and_then(|p| published_in(p, h.unit));
                        let mut row = vec![metric.to_string(), stat.to_string()];
                        if key.is_some() {
                            row.push(point.as_ref().map_or(String::new(), |p| p.1.clone()));
                        }
                        let same = *other == &base;
                        row.extend([
                            h.unit.to_string(),
                            num(bm),
                            if same { NA.into() } else { other.to_string() },
                            if same { NA.into() } else { num(om) },
                            if same { NA.into() } else { change(bm, om) },
                            if same {
                                NA.into()
                            } else {
                                describe(welch(&bx, &ox), bx.len(), ox.len())
                            },
                            num(bpub_v),
                            verdict(super::format::divide(bm, bpub_v)),
                            if same { NA.into() } else { num(opub_v) },
                            if same {
                                NA.into()
                            } else {
                                verdict(super::format::divide(om, opub_v))
                            },
                        ]);
                        t.rows.push(row);
                    }
                }
            }
        }
    }
    t
}

/// A column's value for one variant: its matched metrics' statistic in
/// the column's unit, combined; `metric_of` maps a pattern to names.
fn column_value(v: &VariantGroup<'_>, names: &[&str], c: &Column) -> Option<f64> {
    let vals: Vec<f64> = names
        .iter()
        .filter_map(|m| v.aggregate(m)?.stat_in(c.stat, c.unit))
        .filter(|x| x.is_finite())
        .collect();
    if vals.is_empty() {
        return None;
    }
    let sum: f64 = vals.iter().sum();
    Some(match c.combine {
        Combine::Sum => sum,
        Combine::Mean => sum / vals.len() as f64,
    })
}

/// The fio jobs of `g` that have any per-job column, sorted.
pub fn jobs(g: &ExperimentGroup<'_>, cols: &[Column]) -> Vec<String> {
    let mut out = BTreeSet::new();
    for v in &g.variants {
        for n in v.metric_names() {
            for c in cols {
                if let Some(job) = n
                    .strip_prefix("fio.")
                    .and_then(|r| r.strip_suffix(c.metric))
                    .and_then(|r| r.strip_suffix('.'))
                {
                    if !job.is_empty() {
                        out.insert(job.to_string());
                    }
                }
            }
        }
    }
    out.into_iter().collect()
}

/// The per-job table of `g` (empty when the catalog has no per-job
/// columns or no job has them). Each non-baseline figure carries its
/// change against the baseline at the same sweep point.
pub fn per_job(g: &ExperimentGroup<'_>) -> Table {
    let cols = g.experiment.map_or(&[][..], |e| e.per_job);
    let jobs = jobs(g, cols);
    if jobs.is_empty() {
        return Table::default();
    }
    let base = sides(g).map(|s| s.0);
    let mut t = Table {
        headings: ["job", "variant"]
            .into_iter()
            .map(str::to_string)
            .chain(cols.iter().map(|c| c.heading.to_string()))
            .collect(),
        rows: Vec::new(),
    };
    for job in &jobs {
        for v in g.variants.iter().filter(|v| !v.runs.is_empty()) {
            let bv = base
                .as_deref()
                .filter(|b| *b != v.name)
                .and_then(|b| at(g, b, &v.sweep));
            let mut row = vec![job.clone(), v.label.clone()];
            for c in cols {
                let name = format!("fio.{job}.{}", c.metric);
                let x = column_value(v, &[name.as_str()], c);
                let mut cell = num(x);
                if let (Some(b), Some(_)) = (bv, x) {
                    let bx = column_value(b, &[name.as_str()], c);
                    cell.push_str(&format!(" ({})", change(bx, x)));
                }
                row.push(cell);
            }
            t.rows.push(row);
        }
    }
    t
}

/// The "where time goes" table of `g`: one row per variant label, one
/// column per catalog breakdown column that any variant has.
pub fn breakdown(g: &ExperimentGroup<'_>) -> Table {
    let cols = g.experiment.map_or(&[][..], |e| e.breakdown);
    let names: Vec<Vec<&str>> = cols.iter().map(|c| matching(g, c.metric)).collect();
    let kept: Vec<usize> = (0..cols.len()).filter(|&i| !names[i].is_empty()).collect();
    if kept.is_empty() {
        return Table::default();
    }
    let mut t = Table {
        headings: std::iter::once("variant".to_string())
            .chain(kept.iter().map(|&i| cols[i].heading.to_string()))
            .collect(),
        rows: Vec::new(),
    };
    for v in g.variants.iter().filter(|v| !v.runs.is_empty()) {
        let mut row = vec![v.label.clone()];
        for &i in &kept {
            row.push(num(column_value(v, &names[i], &cols[i])));
        }
        t.rows.push(row);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_never_call_a_far_ratio_a_match() {
        assert_eq!(verdict(Some(1.881)), "1.881x (outside 1.5x)");
        assert_eq!(verdict(Some(1.2)), "1.200x (within 1.5x)");
        assert_eq!(verdict(Some(0.5)), "0.5000x (outside 1.5x)");
        assert_eq!(verdict(None), NA);
        assert_eq!(change(Some(100.0), Some(150.0)), "+50.00%");
        assert_eq!(change(Some(100.0), Some(50.0)), "-50.00%");
        assert_eq!(change(Some(0.0), Some(50.0)), NA);
    }
}
