//! `wbsim compare A.json B.json`: two results files side by side, metric by
//! metric (e.g. the model against `wbsim probe` on the live kernel).
//!
//! For each metric in both: A's and B's value (mean for histograms, value
//! for scalars; p50 and p99 too for histograms) and the ratio B/A, with
//! `!!` on rows more than `--threshold` (default 2) apart in either
//! direction. B is converted to A's unit when both are known units of one
//! dimension (ms vs us); otherwise the row is flagged "units differ".
//! Metrics in only one file are listed after the table. Not kernel code.

use std::path::PathBuf;

use clap::Args as ClapArgs;

use crate::experiment::metrics::{unit_factor, MetricSummary};
use crate::experiment::results::Results;

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// First results file (A; e.g. the model's).
    pub a: PathBuf,
    /// Second results file (B; e.g. `wbsim probe`'s).
    pub b: PathBuf,
    /// Flag rows whose ratio B/A is above this or below its inverse.
    #[arg(long, default_value_t = 2.0, value_parser = parse_threshold)]
    pub threshold: f64,
}

fn parse_threshold(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("'{s}' is not a number"))?;
    if v.is_finite() && v > 1.0 {
        Ok(v)
    } else {
        Err(format!("{s}: the threshold must be a number above 1"))
    }
}

/// One compared row.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Metric name.
    pub name: String,
    /// A's unit.
    pub unit: String,
    /// A's main value (mean or value).
    pub a: f64,
    /// B's main value, in A's unit.
    pub b: f64,
    /// A's and B's p50 and p99 (histograms in both), B in A's unit.
    pub pcts: Option<[f64; 4]>,
    /// B / A (NaN if undefined).
    pub ratio: f64,
    /// Why the row is flagged, if it is.
    pub flag: Option<String>,
}

/// The comparison of two results documents.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// Metrics in both.
    pub rows: Vec<Row>,
    /// Metrics only in A.
    pub only_a: Vec<String>,
    /// Metrics only in B.
    pub only_b: Vec<String>,
}

fn main_value(m: &MetricSummary) -> f64 {
    match m {
        MetricSummary::Hist(h) => h.mean,
        MetricSummary::Scalar(s) => s.value.as_f64(),
    }
}

/// Compares `a` and `b`, flagging ratios beyond `threshold`.
pub fn compare(a: &Results, b: &Results, threshold: f64) -> Comparison {
    let mut rows = Vec::new();
    let mut only_a = Vec::new();
    for (name, ma) in &a.metrics {
        let Some(mb) = b.metrics.get(name) else {
            only_a.push(name.clone());
            continue;
        };
        let factor = unit_factor(mb.unit(), ma.unit());
        let f = factor.unwrap_or(1.0);
        let va = main_value(ma);
        let vb = main_value(mb) * f;
        let pcts = match (ma, mb) {
            (MetricSummary::Hist(x), MetricSummary::Hist(y)) => {
                Some([x.p50, y.p50 * f, x.p99, y.p99 * f])
            }
            _ => None,
        };
        let ratio = if va == 0.0 && vb == 0.0 { 1.0 } else { vb / va };
        let flag = if factor.is_none() {
            Some(format!("units differ ({} vs {})", ma.unit(), mb.unit()))
        } else if va.is_nan() && vb.is_nan() {
            None
        } else if !ratio.is_finite() {
            Some("one side is zero or not a number".to_string())
        } else if ratio > threshold || ratio < 1.0 / threshold {
            Some(format!("more than {threshold}x apart"))
        } else {
            None
        };
        rows.push(Row {
            name: name.clone(),
            unit: ma.unit().to_string(),
            a: va,
            b: vb,
            pcts,
            ratio,
            flag,
        });
    }
    let only_b = b
        .metrics
        .keys()
        .filter(|n| !a.metrics.contains_key(*n))
        .cloned()
        .collect();
    Comparison {
        rows,
        only_a,
        only_b,
    }
}

fn num(v: f64) -> String {
    if v.is_nan() {
        "-".into()
    } else if v == 0.0 || (v.abs() >= 0.01 && v.abs() < 1e7) {
        format!("{v:.3}")
    } else {
        format!("{v:.3e}")
    }
}

/// The comparison as text.
pub fn render(c: &Comparison, a_label: &str, b_label: &str) -> String {
    let mut s = String::new();
    s.push_str(&format!("A: {a_label}\nB: {b_label}\n\n"));
    let w = c
        .rows
        .iter()
        .map(|r| r.name.len())
        .max()
        .unwrap_or(6)
        .max(6);
    s.push_str(&format!(
        "   {:<w$}  {:>8}  {:>12}  {:>12}  {:>8}  {:>12}  {:>12}  {:>12}  {:>12}\n",
        "metric", "unit", "A", "B", "B/A", "A p50", "B p50", "A p99", "B p99"
    ));
    for r in &c.rows {
        let mark = if r.flag.is_some() { "!!" } else { "  " };
        let [p50a, p50b, p99a, p99b] = r.pcts.map_or(
            [String::new(), String::new(), String::new(), String::new()],
            |p| p.map(num),
        );
        s.push_str(&format!(
            "{mark} {:<w$}  {:>8}  {:>12}  {:>12}  {:>8}  {:>12}  {:>12}  {:>12}  {:>12}",
            r.name,
            r.unit,
            num(r.a),
            num(r.b),
            if r.ratio.is_finite() {
                format!("{:.2}", r.ratio)
            } else {
                "-".into()
            },
            p50a,
            p50b,
            p99a,
            p99b
        ));
        if let Some(f) = &r.flag {
            s.push_str(&format!("  {f}"));
        }
        s.push('\n');
    }
    let flagged = c.rows.iter().filter(|r| r.flag.is_some()).count();
    s.push_str(&format!(
        "\n{} metric(s) in both, {flagged} flagged (!!)\n",
        c.rows.len()
    ));
    if !c.only_a.is_empty() {
        s.push_str(&format!("only in A ({}):\n", c.only_a.len()));
        for n in &c.only_a {
            s.push_str(&format!("   {n}\n"));
        }
    }
    if !c.only_b.is_empty() {
        s.push_str(&format!("only in B ({}):\n", c.only_b.len()));
        for n in &c.only_b {
            s.push_str(&format!("   {n}\n"));
        }
    }
    s
}

fn label(path: &std::path::Path, r: &Results) -> String {
    let live = r
        .live
        .as_ref()
        .map(|l| format!(", live kernel {}", l.kernel_release))
        .unwrap_or_default();
    format!(
        "{} (scenario {}, variant {}, seed {}{live})",
        path.display(),
        r.scenario,
        r.variant,
        r.seed
    )
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    // The error names the file; formatted here so its cause is not repeated.
    let a = Results::load(&args.a).map_err(|e| anyhow::anyhow!("reading A: {e}"))?;
    let b = Results::load(&args.b).map_err(|e| anyhow::anyhow!("reading B: {e}"))?;
    let c = compare(&a, &b, args.threshold);
    print!("{}", render(&c, &label(&args.a, &a), &label(&args.b, &b)));
    Ok(0)
}
