//! The metrics registry: HDR histograms, scalars, counters and time series,
//! by name, deterministic (BTreeMap) so results are byte-identical.
//!
//! Not kernel code; the counterpart of what a kernel developer would collect
//! with tracepoints and `/proc` sampling (the dirty page count of
//! `global_dirty_state`, a latency around `umount(8)`...).
//!
//! Kinds:
//! - histogram: `record(name, unit, value)`; integer values, HDR histogram
//!   with 3 significant digits, auto-resizing. Exact count, sum, min and max
//!   are kept beside it, so mean and extremes are exact; percentiles are the
//!   histogram's (within 0.1%).
//! - scalar: `set(name, unit, f64)`, last write wins.
//! - counter: `add(name, unit, n)`, summed.
//! - series: `sample(name, unit, t_ns, value)`; the (t, value) points are
//!   kept for plots, decimated deterministically to at most
//!   [`MAX_SERIES_POINTS`], and every sample also feeds a histogram (rounded
//!   to an integer, negatives to 0), so a series has percentiles too. Record
//!   fractional series in a fine unit (bytes/s, not MiB/s).
//!
//! Units: values are recorded in the unit the model counts in (usually ns).
//! A metric can be *reported* in another unit of the same dimension with
//! [`Metrics::report_in`] (e.g. `umount.elapsed` recorded in ns, reported in
//! ms): the summary scales every statistic by the exact factor. Conversions
//! known: ns/us/ms/s, bytes/KiB/MiB/GiB, bytes/s / KiB/s / MiB/s / MB/s / GB/s.
//! Recording into an existing name with another kind or unit is not applied
//! and is listed by [`Metrics::conflicts`] (a model bug, reported, not a panic).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

// The clamped quantiles live with fio's output (workload/fio/output.rs),
// which both the fio-shaped results and these summaries use.
pub use crate::workload::fio::output::{fio_percentiles, quantile_within};

/// Most points a series keeps for plots.
pub const MAX_SERIES_POINTS: usize = 2000;

/// Significant digits of every histogram (0.1% resolution).
const SIGFIG: u8 = 3;

/// Unit conversion factors to a base unit per dimension.
const UNITS: &[(&str, &str, f64)] = &[
    ("ns", "time", 1.0),
    ("us", "time", 1e3),
    ("ms", "time", 1e6),
    ("s", "time", 1e9),
    ("bytes", "bytes", 1.0),
    ("KiB", "bytes", 1024.0),
    ("MiB", "bytes", 1_048_576.0),
    ("GiB", "bytes", 1_073_741_824.0),
    ("bytes/s", "rate", 1.0),
    ("KiB/s", "rate", 1024.0),
    ("MiB/s", "rate", 1_048_576.0),
    ("MB/s", "rate", 1e6),
    ("GB/s", "rate", 1e9),
];

/// The factor that turns a value in `from` into `to`, if both are known
/// units of the same dimension (or the same unit).
pub fn unit_factor(from: &str, to: &str) -> Option<f64> {
    if from == to {
        return Some(1.0);
    }
    let f = UNITS.iter().find(|u| u.0 == from)?;
    let t = UNITS.iter().find(|u| u.0 == to)?;
    (f.1 == t.1).then(|| f.2 / t.2)
}

/// Converts `v` from unit `from` to `to` as `v * base(from) / base(to)`
/// (so 7_900_000 ns is exactly 7.9 ms); unknown units leave `v` as is.
fn convert(v: f64, from: &str, to: &str) -> f64 {
    let base = |u: &str| UNITS.iter().find(|x| x.0 == u).map(|x| (x.1, x.2));
    match (base(from), base(to)) {
        (Some((df, f)), Some((dt, t))) if df == dt && from != to => v * f / t,
        _ => v,
    }
}

/// A histogram with exact moments beside it.
#[derive(Clone, Debug)]
struct Hist {
    h: Histogram<u64>,
    count: u64,
    sum: u128,
    /// Sum of squared deviations (Welford), for the standard deviation.
    m2: f64,
    mean: f64,
    min: u64,
    max: u64,
}

impl Hist {
    fn new() -> Hist {
        // new(3) auto-resizes: any u64 can be recorded.
        let h =
            Histogram::new(SIGFIG).expect("3 significant digits is within hdrhistogram's 0..=5");
        Hist {
            h,
            count: 0,
            sum: 0,
            m2: 0.0,
            mean: 0.0,
            min: u64::MAX,
            max: 0,
        }
    }

    fn record(&mut self, v: u64) {
        // record() grows the histogram (auto-resize); if even that fails
        // (values near u64::MAX), saturate at the top.
        if self.h.record(v).is_err() {
            self.h.saturating_record(v);
        }
        self.count += 1;
        self.sum += u128::from(v);
        let x = v as f64;
        let d = x - self.mean;
        self.mean += d / self.count as f64;
        self.m2 += d * (x - self.mean);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// Adds every value of `o` (exact count, sum, mean, variance, extremes).
    fn merge(&mut self, o: &Hist) {
        if o.count == 0 {
            return;
        }
        if self.h.add(&o.h).is_err() {
            for v in o.h.iter_recorded() {
                self.h
                    .saturating_record_n(v.value_iterated_to(), v.count_at_value());
            }
        }
        let (c, n) = (self.count as f64, o.count as f64);
        let d = o.mean - self.mean;
        self.mean += d * n / (c + n);
        self.m2 += o.m2 + d * d * c * n / (c + n);
        self.count += o.count;
        self.sum += o.sum;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
    }

    /// Records `n` copies of `v` (merging another histogram's buckets).
    fn record_n(&mut self, v: u64, n: u64) {
        if n == 0 {
            return;
        }
        if self.h.record_n(v, n).is_err() {
            self.h.saturating_record_n(v, n);
        }
        let c = self.count as f64;
        let nf = n as f64;
        self.count += n;
        self.sum += u128::from(v) * u128::from(n);
        let d = v as f64 - self.mean;
        self.mean += d * nf / (c + nf);
        self.m2 += d * d * c * nf / (c + nf);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// The summary in `unit`, converting from `from`.
    fn summary(&self, from: &str, unit: &str) -> HistSummary {
        let factor = |v: f64| convert(v, from, unit);
        let q = |p: f64| {
            if self.count == 0 {
                f64::NAN
            } else {
                factor(quantile_within(&self.h, p, self.min, self.max) as f64)
            }
        };
        let n = self.count;
        HistSummary {
            unit: unit.to_string(),
            count: n,
            mean: if n == 0 {
                f64::NAN
            } else {
                factor(self.sum as f64 / n as f64)
            },
            stddev: if n == 0 {
                f64::NAN
            } else {
                factor((self.m2 / n as f64).sqrt())
            },
            min: if n == 0 {
                f64::NAN
            } else {
                factor(self.min as f64)
            },
            p50: q(0.50),
            p90: q(0.90),
            p95: q(0.95),
            p99: q(0.99),
            p999: q(0.999),
            max: if n == 0 {
                f64::NAN
            } else {
                factor(self.max as f64)
            },
        }
    }
}

/// A time series.
#[derive(Clone, Debug)]
struct Series {
    /// Every `stride`-th sample since the start.
    points: Vec<(u64, f64)>,
    stride: u64,
    seen: u64,
    hist: Hist,
}

impl Series {
    fn push(&mut self, t: u64, v: f64) {
        if self.seen.is_multiple_of(self.stride) {
            self.points.push((t, v));
            if self.points.len() >= 2 * MAX_SERIES_POINTS {
                // Keep every other point and halve the rate: deterministic, bounded.
                let mut i = 0;
                self.points.retain(|_| {
                    i += 1;
                    i % 2 == 1
                });
                self.stride *= 2;
            }
        }
        self.seen += 1;
        let r = if v.is_finite() && v > 0.0 {
            v.round() as u64
        } else {
            0
        };
        self.hist.record(r);
    }

    /// At most MAX_SERIES_POINTS points, evenly strided.
    fn plot_points(&self) -> Vec<(u64, f64)> {
        let n = self.points.len();
        let step = n.div_ceil(MAX_SERIES_POINTS).max(1);
        self.points.iter().step_by(step).copied().collect()
    }
}

#[derive(Clone, Debug)]
enum Kind {
    Hist(Hist),
    Scalar(f64),
    Counter(u64),
    Series(Series),
}

impl Kind {
    fn name(&self) -> &'static str {
        match self {
            Kind::Hist(_) => "histogram",
            Kind::Scalar(_) => "scalar",
            Kind::Counter(_) => "counter",
            Kind::Series(_) => "series",
        }
    }
}

#[derive(Clone, Debug)]
struct Metric {
    unit: String,
    report_unit: Option<String>,
    kind: Kind,
}

/// The registry of one run.
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    metrics: BTreeMap<String, Metric>,
    conflicts: Vec<String>,
}

/// Summary of a histogram or series.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistSummary {
    /// Unit of every statistic below.
    pub unit: String,
    /// Values recorded.
    pub count: u64,
    /// Exact mean.
    #[serde(with = "finite")]
    pub mean: f64,
    /// Population standard deviation.
    #[serde(with = "finite")]
    pub stddev: f64,
    /// Exact minimum.
    #[serde(with = "finite")]
    pub min: f64,
    /// Percentiles (HDR, 3 significant digits).
    #[serde(with = "finite")]
    pub p50: f64,
    #[serde(with = "finite")]
    #[allow(missing_docs)]
    pub p90: f64,
    #[serde(with = "finite")]
    #[allow(missing_docs)]
    pub p95: f64,
    #[serde(with = "finite")]
    #[allow(missing_docs)]
    pub p99: f64,
    #[serde(rename = "p99.9", with = "finite")]
    #[allow(missing_docs)]
    pub p999: f64,
    /// Exact maximum.
    #[serde(with = "finite")]
    pub max: f64,
}

/// Summary of a scalar or counter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScalarSummary {
    /// Unit.
    pub unit: String,
    /// The value (counters are integers in JSON).
    pub value: Num,
}

/// A number that is an integer (counters) or a float; non-finite floats are
/// written as JSON `null` and read back as NaN.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Num {
    /// An integer.
    Int(u64),
    /// A float.
    Float(f64),
}

impl Num {
    /// As f64.
    pub fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

impl Serialize for Num {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Num::Int(i) => s.serialize_u64(i),
            Num::Float(f) => finite::serialize(&f, s),
        }
    }
}

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Num, D::Error> {
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::Null => Ok(Num::Float(f64::NAN)),
            serde_json::Value::Number(n) => match n.as_u64() {
                Some(i) => Ok(Num::Int(i)),
                None => Ok(Num::Float(n.as_f64().unwrap_or(f64::NAN))),
            },
            other => Err(serde::de::Error::custom(format!(
                "expected a number, found {other}"
            ))),
        }
    }
}

/// Serde helpers: f64 as a number, or `null` when NaN/infinite.
pub mod finite {
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes `null` for NaN and infinities.
    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() {
            s.serialize_f64(*v)
        } else {
            s.serialize_none()
        }
    }

    /// Reads `null` as NaN.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
    }
}

/// One metric's summary, as it appears in results JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MetricSummary {
    /// Histogram or series.
    Hist(HistSummary),
    /// Scalar or counter.
    Scalar(ScalarSummary),
}

impl MetricSummary {
    /// The unit.
    pub fn unit(&self) -> &str {
        match self {
            MetricSummary::Hist(h) => &h.unit,
            MetricSummary::Scalar(s) => &s.unit,
        }
    }

    /// A statistic by its JSON name (`"p99"`, `"p99.9"`, `"value"`...).
    pub fn stat(&self, name: &str) -> Option<f64> {
        match self {
            MetricSummary::Scalar(s) => (name == "value").then(|| s.value.as_f64()),
            MetricSummary::Hist(h) => Some(match name {
                "count" => h.count as f64,
                "mean" => h.mean,
                "stddev" => h.stddev,
                "min" => h.min,
                "p50" => h.p50,
                "p90" => h.p90,
                "p95" => h.p95,
                "p99" => h.p99,
                "p99.9" => h.p999,
                "max" => h.max,
                _ => return None,
            }),
        }
    }
}

impl Metrics {
    /// An empty registry.
    pub fn new() -> Metrics {
        Metrics::default()
    }

    /// The metric `name` of kind `kind`, created with `unit`; None (and a
    /// conflict noted) if it exists with another kind or unit.
    fn entry(&mut self, name: &str, unit: &str, make: impl FnOnce() -> Kind) -> Option<&mut Kind> {
        let kind = make();
        let m = self
            .metrics
            .entry(name.to_string())
            .or_insert_with(|| Metric {
                unit: unit.to_string(),
                report_unit: None,
                kind: kind.clone(),
            });
        if m.unit != unit || std::mem::discriminant(&m.kind) != std::mem::discriminant(&kind) {
            let msg = format!(
                "metric '{name}': recorded as {} in '{unit}' but it is a {} in '{}'",
                kind.name(),
                m.kind.name(),
                m.unit
            );
            if !self.conflicts.contains(&msg) {
                self.conflicts.push(msg);
            }
            return None;
        }
        Some(&mut m.kind)
    }

    /// Records one value into histogram `name` (unit e.g. "ns").
    pub fn record(&mut self, name: &str, unit: &str, value: u64) {
        if let Some(Kind::Hist(h)) = self.entry(name, unit, || Kind::Hist(Hist::new())) {
            h.record(value);
        }
    }

    /// Merges a whole HDR histogram (values in `unit`) into histogram `name`,
    /// reported in `report_unit`. Each bucket counts at its representative
    /// value, so mean and extremes are the histogram's (within 0.1%).
    pub fn record_histogram(
        &mut self,
        name: &str,
        unit: &str,
        report_unit: &str,
        h: &Histogram<u64>,
    ) {
        if let Some(Kind::Hist(dst)) = self.entry(name, unit, || Kind::Hist(Hist::new())) {
            for v in h.iter_recorded() {
                dst.record_n(
                    h.highest_equivalent(v.value_iterated_to()),
                    v.count_at_value(),
                );
            }
        }
        if let Err(e) = self.report_in(name, report_unit) {
            if !self.conflicts.contains(&e) {
                self.conflicts.push(e);
            }
        }
    }

    /// Sets scalar `name`.
    pub fn set(&mut self, name: &str, unit: &str, value: f64) {
        if let Some(Kind::Scalar(v)) = self.entry(name, unit, || Kind::Scalar(0.0)) {
            *v = value;
        }
    }

    /// Adds `n` to counter `name`.
    pub fn add(&mut self, name: &str, unit: &str, n: u64) {
        if let Some(Kind::Counter(v)) = self.entry(name, unit, || Kind::Counter(0)) {
            *v = v.saturating_add(n);
        }
    }

    /// Adds a sample at `t_ns` to series `name`.
    pub fn sample(&mut self, name: &str, unit: &str, t_ns: u64, value: f64) {
        let make = || {
            Kind::Series(Series {
                points: Vec::new(),
                stride: 1,
                seen: 0,
                hist: Hist::new(),
            })
        };
        if let Some(Kind::Series(s)) = self.entry(name, unit, make) {
            s.push(t_ns, value);
        }
    }

    /// Reports `name` in `unit` instead of its recording unit. Errors if the
    /// metric does not exist yet or the units are not convertible.
    pub fn report_in(&mut self, name: &str, unit: &str) -> Result<(), String> {
        let m = self
            .metrics
            .get_mut(name)
            .ok_or_else(|| format!("no metric '{name}'"))?;
        unit_factor(&m.unit, unit)
            .ok_or_else(|| format!("metric '{name}': cannot convert '{}' to '{unit}'", m.unit))?;
        m.report_unit = Some(unit.to_string());
        Ok(())
    }

    /// Records a histogram value in `unit` that is reported in `report_unit`
    /// (e.g. `record_as("umount.elapsed", "ns", "ms", t)`).
    pub fn record_as(&mut self, name: &str, unit: &str, report_unit: &str, value: u64) {
        self.record(name, unit, value);
        if let Err(e) = self.report_in(name, report_unit) {
            if !self.conflicts.contains(&e) {
                self.conflicts.push(e);
            }
        }
    }

    /// Metric names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.metrics.keys().map(String::as_str)
    }

    /// Number of values recorded into histogram or series `name`.
    pub fn count(&self, name: &str) -> u64 {
        match self.metrics.get(name).map(|m| &m.kind) {
            Some(Kind::Hist(h)) => h.count,
            Some(Kind::Series(s)) => s.hist.count,
            Some(Kind::Counter(c)) => *c,
            _ => 0,
        }
    }

    /// The raw histogram of `name` (histogram or series), for fio output.
    pub fn histogram(&self, name: &str) -> Option<&Histogram<u64>> {
        match &self.metrics.get(name)?.kind {
            Kind::Hist(h) => Some(&h.h),
            Kind::Series(s) => Some(&s.hist.h),
            _ => None,
        }
    }

    /// One registry from the registries of several rounds of the same
    /// measurement (the live probe's repeated rounds): histograms pooled
    /// (every value of every round), scalars and counters the mean over the
    /// rounds that have them, series the first round's points with every
    /// round's values in their histogram. A metric whose kind or unit
    /// differs between rounds keeps the first and notes a conflict.
    pub fn merge_rounds(rounds: &[Metrics]) -> Metrics {
        let mut out = Metrics::new();
        let mut seen: BTreeMap<String, u32> = BTreeMap::new();
        for r in rounds {
            out.conflicts.extend(r.conflicts.iter().cloned());
            for (name, m) in &r.metrics {
                let Some(dst) = out.metrics.get_mut(name) else {
                    out.metrics.insert(name.clone(), m.clone());
                    seen.insert(name.clone(), 1);
                    continue;
                };
                if dst.unit != m.unit
                    || std::mem::discriminant(&dst.kind) != std::mem::discriminant(&m.kind)
                {
                    out.conflicts.push(format!(
                        "metric '{name}': a {} in '{}' in one round, a {} in '{}' in another",
                        dst.kind.name(),
                        dst.unit,
                        m.kind.name(),
                        m.unit
                    ));
                    continue;
                }
                let n = seen.entry(name.clone()).or_insert(1);
                *n += 1;
                let k = f64::from(*n);
                match (&mut dst.kind, &m.kind) {
                    (Kind::Hist(a), Kind::Hist(b)) => a.merge(b),
                    (Kind::Series(a), Kind::Series(b)) => a.hist.merge(&b.hist),
                    (Kind::Scalar(a), Kind::Scalar(b)) => *a += (b - *a) / k,
                    (Kind::Counter(a), Kind::Counter(b)) => {
                        let mean = *a as f64 + (*b as f64 - *a as f64) / k;
                        *a = mean.round() as u64;
                    }
                    _ => {}
                }
            }
        }
        out
    }

    /// Recording mistakes (kind or unit mismatches), in order seen.
    pub fn conflicts(&self) -> &[String] {
        &self.conflicts
    }

    /// The summary of one metric, in its report unit.
    pub fn summary(&self, name: &str) -> Option<MetricSummary> {
        let m = self.metrics.get(name)?;
        let unit = m.report_unit.as_deref().unwrap_or(&m.unit);
        Some(match &m.kind {
            Kind::Hist(h) => MetricSummary::Hist(h.summary(&m.unit, unit)),
            Kind::Series(s) => MetricSummary::Hist(s.hist.summary(&m.unit, unit)),
            Kind::Scalar(v) => MetricSummary::Scalar(ScalarSummary {
                unit: unit.to_string(),
                value: Num::Float(convert(*v, &m.unit, unit)),
            }),
            Kind::Counter(c) => MetricSummary::Scalar(ScalarSummary {
                unit: unit.to_string(),
                value: if unit == m.unit {
                    Num::Int(*c)
                } else {
                    Num::Float(convert(*c as f64, &m.unit, unit))
                },
            }),
        })
    }

    /// Every metric's summary, keyed by name; `keep` filters names.
    pub fn summaries(&self, keep: impl Fn(&str) -> bool) -> BTreeMap<String, MetricSummary> {
        self.metrics
            .keys()
            .filter(|n| keep(n))
            .filter_map(|n| Some((n.clone(), self.summary(n)?)))
            .collect()
    }

    /// Every series' plot points (at most [`MAX_SERIES_POINTS`] each, values
    /// in the report unit), keyed by name; `keep` filters names.
    pub fn series(&self, keep: impl Fn(&str) -> bool) -> BTreeMap<String, Vec<(u64, f64)>> {
        self.metrics
            .iter()
            .filter(|(n, _)| keep(n))
            .filter_map(|(n, m)| match &m.kind {
                Kind::Series(s) => {
                    let to = m.report_unit.as_deref().unwrap_or(&m.unit);
                    Some((
                        n.clone(),
                        s.plot_points()
                            .into_iter()
                            .map(|(t, v)| (t, convert(v, &m.unit, to)))
                            .collect(),
                    ))
                }
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(s: Option<MetricSummary>) -> HistSummary {
        match s {
            Some(MetricSummary::Hist(h)) => h,
            other => panic!("not a histogram: {other:?}"),
        }
    }

    #[test]
    fn percentiles_never_exceed_the_recorded_max() {
        // 12345 ns is in an 8 ns bucket whose highest equivalent is 12351:
        // unclamped, p50 and p99.9 read above the max.
        let mut m = Metrics::new();
        for _ in 0..1000 {
            m.record("lat", "ns", 12_345);
        }
        m.record("lat", "ns", 10_000);
        let s = hist(m.summary("lat"));
        assert_eq!(s.max, 12_345.0);
        assert!(
            s.p50 <= s.p99 && s.p99 <= s.p999 && s.p999 <= s.max,
            "{s:?}"
        );
        assert_eq!(s.p50, 12_345.0);
        assert!(s.min <= s.p50);
        // The fio-shaped list too, against the histogram's own extremes.
        let mut h = Histogram::<u64>::new(3).unwrap();
        for v in [12_345u64, 12_345, 99_999] {
            h.record(v).unwrap();
        }
        let ps = fio_percentiles(&h);
        assert_eq!(ps.len(), 17);
        assert!(ps.windows(2).all(|w| w[0].1 <= w[1].1));
        assert!(ps.iter().all(|&(_, v)| v <= h.max() && v >= h.min()));
    }

    #[test]
    fn percentiles_of_1_to_1000() {
        let mut m = Metrics::new();
        for v in 1..=1000 {
            m.record("lat", "ns", v);
        }
        let h = hist(m.summary("lat"));
        assert_eq!(h.count, 1000);
        assert_eq!(h.min, 1.0);
        assert_eq!(h.max, 1000.0);
        assert_eq!(h.mean, 500.5);
        assert_eq!(h.p50, 500.0);
        assert_eq!(h.p90, 900.0);
        assert_eq!(h.p99, 990.0);
        assert_eq!(h.p999, 999.0);
        // Population stddev of 1..=n is sqrt((n^2 - 1) / 12).
        assert!((h.stddev - ((1000.0f64 * 1000.0 - 1.0) / 12.0).sqrt()).abs() < 1e-6);
        // Large values grow the histogram instead of saturating.
        m.record("big", "ns", 60_000_000_000);
        let b = hist(m.summary("big"));
        assert!((b.p50 / 60e9 - 1.0).abs() < 1e-3, "{}", b.p50);
    }

    #[test]
    fn report_unit_scales_every_statistic() {
        let mut m = Metrics::new();
        m.record_as("umount.elapsed", "ns", "ms", 67_600_000);
        m.record_as("umount.elapsed", "ns", "ms", 7_900_000);
        let h = hist(m.summary("umount.elapsed"));
        assert_eq!(h.unit, "ms");
        assert_eq!(h.min, 7.9);
        assert!((h.max - 67.6).abs() < 0.1, "{}", h.max); // exact max, scaled
        assert!(m.conflicts().is_empty());
        assert!(m.report_in("umount.elapsed", "bytes").is_err());
        assert!(m.report_in("nope", "ms").is_err());
        assert_eq!(unit_factor("bytes/s", "MiB/s"), Some(1.0 / 1_048_576.0));
    }

    #[test]
    fn scalars_counters_and_conflicts() {
        let mut m = Metrics::new();
        m.set("run.length", "s", 61.5);
        m.add("umount.ebusy", "count", 2);
        m.add("umount.ebusy", "count", 3);
        m.record("run.length", "s", 1); // wrong kind: not applied
        m.add("umount.ebusy", "ops", 1); // wrong unit: not applied
        let json = serde_json::to_string(&m.summaries(|_| true)).unwrap_or_default();
        assert_eq!(
            json,
            r#"{"run.length":{"unit":"s","value":61.5},"umount.ebusy":{"unit":"count","value":5}}"#
        );
        assert_eq!(m.conflicts().len(), 2);
    }

    #[test]
    fn empty_and_nonfinite_values_write_null() {
        let mut m = Metrics::new();
        m.set("ratio", "", f64::NAN);
        m.set("inf", "", f64::INFINITY);
        let json = serde_json::to_string(&m.summaries(|_| true)).unwrap_or_default();
        assert_eq!(
            json,
            r#"{"inf":{"unit":"","value":null},"ratio":{"unit":"","value":null}}"#
        );
        let back: BTreeMap<String, MetricSummary> = serde_json::from_str(&json).unwrap_or_default();
        assert!(back["ratio"].stat("value").is_some_and(f64::is_nan));
    }

    #[test]
    fn series_keep_percentiles_and_downsample_deterministically() {
        let run = || {
            let mut m = Metrics::new();
            for i in 0..100_000u64 {
                m.sample("dirty_pages", "pages", i * 1_000_000, (i % 1000) as f64);
            }
            m
        };
        let (a, b) = (run(), run());
        let sa = a.series(|_| true);
        let pts = &sa["dirty_pages"];
        assert!(
            pts.len() <= MAX_SERIES_POINTS && pts.len() >= MAX_SERIES_POINTS / 2,
            "{}",
            pts.len()
        );
        assert_eq!(pts[0], (0, 0.0));
        assert!(pts.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(sa, b.series(|_| true));
        let h = hist(a.summary("dirty_pages"));
        assert_eq!(h.count, 100_000);
        assert_eq!(h.max, 999.0);
        assert_eq!(h.p50, 499.0);
        // A short series keeps every point.
        let mut m = Metrics::new();
        for i in 0..10u64 {
            m.sample("bw", "bytes/s", i, i as f64 * 1.5);
        }
        assert_eq!(m.series(|_| true)["bw"].len(), 10);
    }
}
