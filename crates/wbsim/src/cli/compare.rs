//! `wbsim compare A.json B.json`: two results files side by side, metric by
//! metric (e.g. the model against `wbsim probe` on the live kernel).
//!
//! For each metric in both: A's and B's value (mean for histograms, value
//! for scalars; p50 and p99 too for histograms) and the ratio B/A. When
//! one side is a repeated probe run (its `live.spread`), the live
//! run-to-run spread (min..max of the rounds' means, and of their p99s) is
//! shown beside the ratio, and a row is flagged `!!` only when the other
//! side's figure is outside that spread *and* the two are more than
//! `--threshold` (default 2) apart in either direction; without a spread,
//! the threshold alone flags. B is converted to A's unit when both are
//! known units of one dimension (ms vs us); otherwise the row is flagged
//! "units differ". The last lines count the rows whose means are within
//! 1.5x ([`MEAN_WITHIN`]) and whose p99s are within 2x ([`P99_WITHIN`]),
//! then the same for the job rows alone ([`is_job_row`]: each job's
//! throughput and mean latency, the rows the project's live-truth targets
//! name). `--and A B` (repeatable) compares further pairs after the first
//! and ends with the counts summed over every pair.
//! Metrics in only one file are listed after the table; two files that
//! share no metric get a warning.
//!
//! Either file may be fio's own JSON (`fio --output-format=json` or `json+`,
//! from a live run): its jobs become the metrics wbsim's results name the
//! same way ([`Side::from_fio_json`]), so a live fio run and a model run of
//! the same job file compare directly. Not kernel code.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Args as ClapArgs;

use crate::experiment::metrics::{unit_factor, HistSummary, MetricSummary, Num, ScalarSummary};
use crate::experiment::results::{Live, Results, Spread};

/// Means within this factor count as agreeing (the project's target).
pub const MEAN_WITHIN: f64 = 1.5;
/// p99s within this factor count as agreeing (the project's target).
pub const P99_WITHIN: f64 = 2.0;

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// First results file (A; e.g. the model's).
    pub a: PathBuf,
    /// Second results file (B; e.g. `wbsim probe`'s, or fio's JSON).
    pub b: PathBuf,
    /// Flag rows whose ratio B/A is above this or below its inverse.
    #[arg(long, default_value_t = 2.0, value_parser = parse_threshold)]
    pub threshold: f64,
    /// Another pair to compare (A then B; repeatable); the output ends with
    /// the counts summed over every pair.
    #[arg(long = "and", num_args = 2, value_names = ["A", "B"], action = clap::ArgAction::Append)]
    pub and: Vec<PathBuf>,
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
    /// A's and B's sample counts (histograms in both).
    pub n: Option<[u64; 2]>,
    /// B / A (NaN if undefined).
    pub ratio: f64,
    /// The live side's run-to-run spread of the mean (min, max), in A's
    /// unit, when that side has one.
    pub spread: Option<[f64; 2]>,
    /// The same for the p99.
    pub p99_spread: Option<[f64; 2]>,
    /// Whether the other side's mean lies inside the live spread.
    pub inside_spread: bool,
    /// Why the row is flagged, if it is.
    pub flag: Option<String>,
}

impl Row {
    /// B's p99 / A's p99 (histograms in both), NaN otherwise.
    pub fn p99_ratio(&self) -> f64 {
        match self.pcts {
            Some([_, _, a, b]) if a == 0.0 && b == 0.0 => 1.0,
            Some([_, _, a, b]) => b / a,
            None => f64::NAN,
        }
    }
}

/// How many rows of one kind agree within the targets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Rows whose means (values) are within [`MEAN_WITHIN`].
    pub means_within: usize,
    /// Rows with a finite mean ratio.
    pub means: usize,
    /// Histogram rows whose p99s are within [`P99_WITHIN`].
    pub p99_within: usize,
    /// Histogram rows with a finite p99 ratio.
    pub p99s: usize,
}

impl Tally {
    /// Counts a row's mean ratio, if finite.
    fn add_mean(&mut self, ratio: f64) {
        if ratio.is_finite() {
            self.means += 1;
            self.means_within += usize::from(within(ratio, MEAN_WITHIN));
        }
    }

    /// Counts a row's p99 ratio, if finite.
    fn add_p99(&mut self, ratio: f64) {
        if ratio.is_finite() {
            self.p99s += 1;
            self.p99_within += usize::from(within(ratio, P99_WITHIN));
        }
    }
}

impl std::ops::AddAssign for Tally {
    fn add_assign(&mut self, o: Tally) {
        self.means_within += o.means_within;
        self.means += o.means;
        self.p99_within += o.p99_within;
        self.p99s += o.p99s;
    }
}

/// How many rows agree within the targets: every row, and the job rows
/// alone (means of [`is_job_row`] rows, p99s of [`is_job_latency_row`]
/// rows).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Every row.
    pub all: Tally,
    /// The job rows.
    pub jobs: Tally,
}

impl std::ops::AddAssign for Counts {
    fn add_assign(&mut self, o: Counts) {
        self.all += o.all;
        self.jobs += o.jobs;
    }
}

/// Suffixes of a job's latency rows: fio's completion and total latency
/// (`fio.JOB.clat`, `fio.JOB.lat`) and an umount's system call and command
/// (`umount.FS.STATE.HOW.call`, `.cmd`).
const JOB_LATENCY_SUFFIXES: [&str; 4] = [".clat", ".lat", ".call", ".cmd"];
/// Suffixes of a job's throughput rows.
const JOB_THROUGHPUT_SUFFIXES: [&str; 2] = [".write_bw", ".read_bw"];

/// Whether `name` is a job's mean latency row ([`JOB_LATENCY_SUFFIXES`]).
pub fn is_job_latency_row(name: &str) -> bool {
    !name.starts_with("device.") && JOB_LATENCY_SUFFIXES.iter().any(|s| name.ends_with(s))
}

/// Whether `name` is a job row: a job's throughput or mean latency, not a
/// device's (`device.NAME.*`), a tracepoint count or a memory figure.
pub fn is_job_row(name: &str) -> bool {
    is_job_latency_row(name)
        || (!name.starts_with("device.")
            && JOB_THROUGHPUT_SUFFIXES.iter().any(|s| name.ends_with(s)))
}

fn within(ratio: f64, f: f64) -> bool {
    ratio.is_finite() && ratio <= f && ratio >= 1.0 / f
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

impl Comparison {
    /// The agreement counts over the rows.
    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for r in &self.rows {
            let p = r.p99_ratio();
            c.all.add_mean(r.ratio);
            c.all.add_p99(p);
            if is_job_row(&r.name) {
                c.jobs.add_mean(r.ratio);
            }
            if is_job_latency_row(&r.name) {
                c.jobs.add_p99(p);
            }
        }
        c
    }
}

/// One side of a comparison: metrics by name, and the live run's spread.
#[derive(Clone, Debug, PartialEq)]
pub struct Side {
    /// Metric summaries by name.
    pub metrics: BTreeMap<String, MetricSummary>,
    /// The live machine, for `wbsim probe` results.
    pub live: Option<Live>,
    /// What the file is, for the table's heading.
    pub what: String,
}

/// `wbsim probe` experiments whose `fio.JOB.clat` runs from just before a
/// write's submission to its completion being reaped, which is fio's `lat`
/// (slat + clat), not fio's `clat` (`probe/uring.rs`; the document's notes
/// say so). Their rows are compared under `fio.JOB.lat`, with the model's
/// `lat`.
const LIVE_CLAT_IS_LAT: [&str; 1] = ["uring"];

/// `fio.JOB.clat` keys renamed `fio.JOB.lat`.
fn rename_clat_to_lat<V>(m: BTreeMap<String, V>) -> BTreeMap<String, V> {
    m.into_iter()
        .map(|(k, v)| match k.strip_suffix(".clat") {
            Some(job) if k.starts_with("fio.") => (format!("{job}.lat"), v),
            _ => (k, v),
        })
        .collect()
}

/// MiB, for fio's bytes/s.
const MIB: f64 = 1_048_576.0;

impl Side {
    /// A wbsim results document.
    pub fn of(r: &Results) -> Side {
        let live = r
            .live
            .as_ref()
            .map(|l| format!(", live kernel {}", l.kernel_release))
            .unwrap_or_default();
        let mut metrics = r.metrics.clone();
        let mut live_doc = r.live.clone();
        if let Some(l) = live_doc.as_mut() {
            if LIVE_CLAT_IS_LAT.contains(&l.experiment.as_str()) {
                metrics = rename_clat_to_lat(metrics);
                l.spread = rename_clat_to_lat(std::mem::take(&mut l.spread));
            }
        }
        Side {
            metrics,
            live: live_doc,
            what: format!(
                "scenario {}, variant {}, seed {}{live}",
                r.scenario, r.variant, r.seed
            ),
        }
    }

    /// fio's JSON output (`fio --output-format=json`), as the metrics wbsim
    /// gives a fio job: per job `fio.JOB.write_bw` / `read_bw` (MiB/s),
    /// `write_iops` / `read_iops`, `fio.JOB.clat` (the writes' completion
    /// latency, or the reads' for a read-only job, us), `fio.JOB.lat`,
    /// `fio.JOB.slat` (when fio has submission latencies),
    /// `fio.JOB.read_clat` / `write_clat` for jobs that did both, and
    /// `fio.JOB.sync_lat`. Clones fio reports under one name are
    /// `JOB.0`, `JOB.1`... as wbsim names them. A histogram's percentiles
    /// are fio's (p50, p90, p95, p99, p99.9); missing ones are not a number.
    pub fn from_fio_json(v: &serde_json::Value, origin: &str) -> Result<Side, String> {
        let jobs = v
            .get("jobs")
            .and_then(|j| j.as_array())
            .ok_or_else(|| format!("{origin}: fio JSON without a \"jobs\" array"))?;
        let names: Vec<String> = jobs
            .iter()
            .map(|j| {
                j.get("jobname")
                    .and_then(|n| n.as_str())
                    .unwrap_or("job")
                    .to_string()
            })
            .collect();
        let mut metrics = BTreeMap::new();
        let mut seen: BTreeMap<&str, u32> = BTreeMap::new();
        for (j, name) in jobs.iter().zip(&names) {
            let dup = names.iter().filter(|n| *n == name).count() > 1;
            let k = seen.entry(name.as_str()).or_insert(0);
            let p = if dup {
                format!("fio.{name}.{k}")
            } else {
                format!("fio.{name}")
            };
            *k += 1;
            let ios = |d: &str| {
                j.get(d)
                    .and_then(|x| x.get("total_ios"))
                    .and_then(|x| x.as_u64())
                    .unwrap_or(0)
            };
            let (r_ios, w_ios) = (ios("read"), ios("write"));
            for (d, n) in [("read", r_ios), ("write", w_ios)] {
                if n == 0 {
                    continue;
                }
                let dd = &j[d];
                let f = |key: &str| dd.get(key).and_then(|x| x.as_f64()).unwrap_or(f64::NAN);
                metrics.insert(format!("{p}.{d}_bw"), scalar("MiB/s", f("bw_bytes") / MIB));
                metrics.insert(format!("{p}.{d}_iops"), scalar("IO/s", f("iops")));
            }
            let main = if w_ios > 0 { "write" } else { "read" };
            if r_ios + w_ios > 0 {
                for (lat, m) in [("clat_ns", "clat"), ("lat_ns", "lat"), ("slat_ns", "slat")] {
                    if let Some(h) = fio_hist(&j[main][lat]) {
                        metrics.insert(format!("{p}.{m}"), MetricSummary::Hist(h));
                    }
                }
            }
            if r_ios > 0 && w_ios > 0 {
                for d in ["read", "write"] {
                    if let Some(h) = fio_hist(&j[d]["clat_ns"]) {
                        metrics.insert(format!("{p}.{d}_clat"), MetricSummary::Hist(h));
                    }
                }
            }
            if let Some(h) = fio_hist(&j["sync"]["lat_ns"]) {
                metrics.insert(format!("{p}.sync_lat"), MetricSummary::Hist(h));
            }
        }
        let version = v
            .get("fio version")
            .and_then(|x| x.as_str())
            .unwrap_or("fio");
        Ok(Side {
            metrics,
            live: None,
            what: format!("fio JSON from {version}, {} job(s)", jobs.len()),
        })
    }

    /// Reads a wbsim results file or fio's JSON output (told apart by fio's
    /// `"fio version"` key).
    pub fn load(path: &std::path::Path) -> anyhow::Result<Side> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("{origin}: {e}"))?;
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
            if v.get("fio version").is_some() {
                return Side::from_fio_json(&v, &origin).map_err(|e| anyhow::anyhow!(e));
            }
        }
        let r = Results::from_json(&text, &origin)?;
        Ok(Side::of(&r))
    }
}

/// A scalar summary.
fn scalar(unit: &str, v: f64) -> MetricSummary {
    MetricSummary::Scalar(ScalarSummary {
        unit: unit.to_string(),
        value: Num::Float(v),
    })
}

/// A fio latency object (ns) as a histogram summary in us; None without
/// samples.
fn fio_hist(l: &serde_json::Value) -> Option<HistSummary> {
    let n = l.get("N").and_then(|x| x.as_u64()).unwrap_or(0);
    if n == 0 {
        return None;
    }
    let us = |key: &str| l.get(key).and_then(|x| x.as_f64()).unwrap_or(f64::NAN) / 1000.0;
    let pct = |p: f64| {
        l.get("percentile")
            .and_then(|m| m.get(format!("{p:.6}")))
            .and_then(|x| x.as_f64())
            .map_or(f64::NAN, |v| v / 1000.0)
    };
    // fio's stddev is the sample one; the summaries hold the population one.
    let nf = n as f64;
    let sd = if n > 1 {
        us("stddev") * ((nf - 1.0) / nf).sqrt()
    } else {
        0.0
    };
    Some(HistSummary {
        unit: "us".to_string(),
        count: n,
        mean: us("mean"),
        stddev: sd,
        min: us("min"),
        p50: pct(50.0),
        p90: pct(90.0),
        p95: pct(95.0),
        p99: pct(99.0),
        p999: pct(99.9),
        max: us("max"),
    })
}

/// The live spread of `name`: from B (converted by `f` into A's unit) if
/// B has one, else from A; and whether it is B's.
fn live_spread<'a>(a: &'a Side, b: &'a Side, name: &str) -> Option<(&'a Spread, bool)> {
    let of = |r: &'a Side| r.live.as_ref().and_then(|l| l.spread.get(name));
    of(b)
        .map(|s| (s, true))
        .or_else(|| of(a).map(|s| (s, false)))
}
fn main_value(m: &MetricSummary) -> f64 {
    match m {
        MetricSummary::Hist(h) => h.mean,
        MetricSummary::Scalar(s) => s.value.as_f64(),
    }
}

/// Compares `a` and `b`, flagging ratios beyond `threshold`.
pub fn compare(a: &Results, b: &Results, threshold: f64) -> Comparison {
    compare_sides(&Side::of(a), &Side::of(b), threshold)
}

/// [`compare`] for any two sides (wbsim results or fio JSON).
pub fn compare_sides(a: &Side, b: &Side, threshold: f64) -> Comparison {
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
        let n = match (ma, mb) {
            (MetricSummary::Hist(x), MetricSummary::Hist(y)) => Some([x.count, y.count]),
            _ => None,
        };
        let ratio = if va == 0.0 && vb == 0.0 { 1.0 } else { vb / va };
        let sp = live_spread(a, b, name);
        // The spread in A's unit, and the figure of the other side.
        let scale = |is_b: bool| if is_b { f } else { 1.0 };
        let spread = sp.map(|(s, is_b)| [s.mean.min * scale(is_b), s.mean.max * scale(is_b)]);
        let p99_spread =
            sp.and_then(|(s, is_b)| s.p99.map(|p| [p.min * scale(is_b), p.max * scale(is_b)]));
        let other = sp.map(|(_, is_b)| if is_b { va } else { vb });
        let inside_spread = match (spread, other) {
            (Some([lo, hi]), Some(v)) => v >= lo && v <= hi,
            _ => false,
        };
        let flag = if factor.is_none() {
            Some(format!("units differ ({} vs {})", ma.unit(), mb.unit()))
        } else if va.is_nan() && vb.is_nan() {
            None
        } else if !ratio.is_finite() {
            Some("one side is zero or not a number".to_string())
        } else if (ratio > threshold || ratio < 1.0 / threshold) && !inside_spread {
            Some(if spread.is_some() {
                format!("more than {threshold}x apart and outside the live spread")
            } else {
                format!("more than {threshold}x apart")
            })
        } else {
            None
        };
        rows.push(Row {
            name: name.clone(),
            unit: ma.unit().to_string(),
            a: va,
            b: vb,
            pcts,
            n,
            ratio,
            spread,
            p99_spread,
            inside_spread,
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

/// Units whose values are counts (printed as integers).
const COUNT_UNITS: [&str; 3] = ["count", "events", "pages"];

/// A value in `unit`: integers for counts, else [`num`].
fn num_in(v: f64, unit: &str) -> String {
    if COUNT_UNITS.contains(&unit) && v.is_finite() && v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        num(v)
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
    s.push_str(&format!("A: {a_label}\nB: {b_label}\n"));
    s.push_str(
        "columns: A, B = the mean of a histogram metric, the value of a scalar (B in A's \
         unit); n = samples in a histogram; p50, p99 = its percentiles; B/A = ratio of the \
         means (values)\n\n",
    );
    if c.rows.is_empty() {
        s.push_str(&format!(
            "warning: A and B share no metric ({} only in A, {} only in B): nothing to compare; \
             are they runs of the same job file (same job names)?\n",
            c.only_a.len(),
            c.only_b.len()
        ));
    }
    let w = c
        .rows
        .iter()
        .map(|r| r.name.len())
        .max()
        .unwrap_or(6)
        .max(6);
    s.push_str(&format!(
        "   {:<w$}  {:>8}  {:>12}  {:>12}  {:>8}  {:>8}  {:>8}  {:>21}  {:>12}  {:>12}  {:>12}  {:>12}  {:>8}  {:>21}\n",
        "metric",
        "unit",
        "A mean|val",
        "B mean|val",
        "A n",
        "B n",
        "B/A",
        "live spread",
        "A p50",
        "B p50",
        "A p99",
        "B p99",
        "p99 B/A",
        "live p99 spread"
    ));
    let range = |r: Option<[f64; 2]>| {
        r.map_or(String::new(), |[lo, hi]| {
            format!("{}..{}", num(lo), num(hi))
        })
    };
    let ratio = |x: f64| {
        if x.is_finite() {
            format!("{x:.2}")
        } else {
            "-".into()
        }
    };
    for r in &c.rows {
        let mark = if r.flag.is_some() { "!!" } else { "  " };
        let [p50a, p50b, p99a, p99b] = r.pcts.map_or(
            [String::new(), String::new(), String::new(), String::new()],
            |p| p.map(num),
        );
        s.push_str(&format!(
            "{mark} {:<w$}  {:>8}  {:>12}  {:>12}  {:>8}  {:>8}  {:>8}  {:>21}  {:>12}  {:>12}  {:>12}  {:>12}  {:>8}  {:>21}",
            r.name,
            r.unit,
            num_in(r.a, &r.unit),
            num_in(r.b, &r.unit),
            r.n.map_or(String::new(), |n| n[0].to_string()),
            r.n.map_or(String::new(), |n| n[1].to_string()),
            ratio(r.ratio),
            range(r.spread),
            p50a,
            p50b,
            p99a,
            p99b,
            if r.pcts.is_some() { ratio(r.p99_ratio()) } else { String::new() },
            range(r.p99_spread),
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
    s.push_str(&render_counts(&c.counts()));
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

/// The count lines: every row, then the job rows alone.
pub fn render_counts(k: &Counts) -> String {
    let (a, j) = (k.all, k.jobs);
    format!(
        "means within {MEAN_WITHIN}x: {} of {}\n\
         p99 within {P99_WITHIN}x: {} of {}\n\
         job rows (each job's throughput and mean latency) within {MEAN_WITHIN}x: {} of {}\n\
         job latency p99 within {P99_WITHIN}x: {} of {}\n",
        a.means_within,
        a.means,
        a.p99_within,
        a.p99s,
        j.means_within,
        j.means,
        j.p99_within,
        j.p99s
    )
}

fn label(path: &std::path::Path, s: &Side) -> String {
    format!("{} ({})", path.display(), s.what)
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let mut pairs = vec![(args.a.clone(), args.b.clone())];
    pairs.extend(args.and.chunks(2).map(|p| (p[0].clone(), p[1].clone())));
    let mut total = Counts::default();
    for (i, (pa, pb)) in pairs.iter().enumerate() {
        // The error names the file; formatted here so its cause is not repeated.
        let a = Side::load(pa).map_err(|e| anyhow::anyhow!("reading A: {e}"))?;
        let b = Side::load(pb).map_err(|e| anyhow::anyhow!("reading B: {e}"))?;
        let c = compare_sides(&a, &b, args.threshold);
        if c.rows.is_empty() {
            eprintln!(
                "wbsim compare: warning: {} and {} share no metric",
                pa.display(),
                pb.display()
            );
        }
        if i > 0 {
            println!();
        }
        print!("{}", render(&c, &label(pa, &a), &label(pb, &b)));
        total += c.counts();
    }
    if pairs.len() > 1 {
        print!("\nall {} pairs:\n{}", pairs.len(), render_counts(&total));
    }
    Ok(0)
}
