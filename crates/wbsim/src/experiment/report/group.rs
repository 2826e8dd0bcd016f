//! Groups runs into experiments (by `scenario` name) and variants (by
//! label), in an order that depends only on the runs, never on file or
//! thread order, and averages each metric over the repetitions.
//!
//! Variant order: the side's position in the catalog's switch (baseline
//! first), then unknown names alphabetically, then the sweep value
//! (numerically when both are numbers). Averages skip non-finite values;
//! a run whose unit cannot be converted to the first run's is left out of
//! that metric. Leaves out weighting by run length: each repetition counts
//! once.

use std::cmp::Ordering;
use std::collections::BTreeSet;

use super::input::{FailedRun, Run};
use crate::experiment::catalog::{Experiment, EXPERIMENTS};
use crate::experiment::metrics::{unit_factor, MetricSummary};
use crate::experiment::results::Results;

/// Statistics of a histogram metric, in table and CDF order.
pub const HIST_STATS: &[&str] = &["mean", "min", "p50", "p90", "p95", "p99", "p99.9", "max"];

/// One experiment's runs.
#[derive(Clone, Debug)]
pub struct ExperimentGroup<'a> {
    /// The scenario name (an experiment id for built-ins).
    pub id: String,
    /// The catalog entry, if it is a built-in experiment.
    pub experiment: Option<&'static Experiment>,
    /// Variants, in report order.
    pub variants: Vec<VariantGroup<'a>>,
}

/// One variant label's runs.
#[derive(Clone, Debug)]
pub struct VariantGroup<'a> {
    /// The label (`ino_mod[nr_wb_ctx=4]`).
    pub label: String,
    /// The variant name (`ino_mod`).
    pub name: String,
    /// The sweep point (`("nr_wb_ctx", "4")`).
    pub sweep: Option<(String, String)>,
    /// Runs with results, by seed.
    pub runs: Vec<&'a Results>,
    /// Failed runs, by seed.
    pub failed: Vec<&'a FailedRun>,
}

/// A metric averaged over repetitions.
#[derive(Clone, Debug, PartialEq)]
pub struct Aggregate {
    /// The unit (the first run's).
    pub unit: String,
    /// A histogram (percentiles) rather than a scalar.
    pub hist: bool,
    /// Repetitions that have the metric.
    pub n: usize,
    /// Mean over repetitions of each statistic ([`HIST_STATS`] for a
    /// histogram, `"value"` and `"mean"` for a scalar); None if no finite
    /// value.
    pub stats: Vec<(&'static str, Option<f64>)>,
    /// Standard deviation over repetitions of the mean (scalar: value).
    pub spread: Option<f64>,
}

impl Aggregate {
    /// A statistic (`"mean"` of a scalar is its value).
    pub fn stat(&self, name: &str) -> Option<f64> {
        let name = if !self.hist && name == "value" {
            "mean"
        } else {
            name
        };
        self.stats
            .iter()
            .find(|(s, _)| *s == name)
            .and_then(|s| s.1)
    }

    /// A statistic converted to `unit` (None if not convertible).
    pub fn stat_in(&self, name: &str, unit: &str) -> Option<f64> {
        Some(self.stat(name)? * unit_factor(&self.unit, unit)?)
    }
}

/// A statistic of one run's summary; for a scalar `mean` and `value` are
/// both its value, for a histogram `value` is its mean.
pub fn stat_of(m: &MetricSummary, stat: &str) -> Option<f64> {
    match m {
        MetricSummary::Scalar(_) if stat == "mean" => m.stat("value"),
        MetricSummary::Hist(_) if stat == "value" => m.stat("mean"),
        _ => m.stat(stat),
    }
}

/// Splits a label `name[key=value]` into its name and sweep point.
pub fn parse_label(label: &str) -> (String, Option<(String, String)>) {
    if let Some(open) = label.find('[') {
        if let Some(inner) = label[open + 1..].strip_suffix(']') {
            if let Some((k, v)) = inner.split_once('=') {
                return (
                    label[..open].to_string(),
                    Some((k.to_string(), v.to_string())),
                );
            }
        }
    }
    (label.to_string(), None)
}

/// Orders sweep values numerically when both are numbers.
fn cmp_value(a: &str, b: &str) -> Ordering {
    match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(x), Ok(y)) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
        _ => a.cmp(b),
    }
    .then_with(|| a.cmp(b))
}

impl<'a> VariantGroup<'a> {
    fn new(label: &str) -> VariantGroup<'a> {
        let (name, sweep) = parse_label(label);
        VariantGroup {
            label: label.to_string(),
            name,
            sweep,
            runs: Vec::new(),
            failed: Vec::new(),
        }
    }

    /// Every metric name any run has, sorted.
    pub fn metric_names(&self) -> BTreeSet<&'a str> {
        self.runs
            .iter()
            .flat_map(|r| r.metrics.keys().map(String::as_str))
            .collect()
    }

    /// Seeds of all runs, ok or failed, sorted.
    pub fn seeds(&self) -> Vec<u64> {
        let mut s: Vec<u64> = self.runs.iter().map(|r| r.seed).collect();
        s.extend(self.failed.iter().map(|f| f.seed));
        s.sort_unstable();
        s
    }

    /// `metric` averaged over this variant's runs (None if no run has it).
    pub fn aggregate(&self, metric: &str) -> Option<Aggregate> {
        let first = self.runs.iter().find_map(|r| r.metrics.get(metric))?;
        let unit = first.unit().to_string();
        let hist = matches!(first, MetricSummary::Hist(_));
        let usable: Vec<(&MetricSummary, f64)> = self
            .runs
            .iter()
            .filter_map(|r| r.metrics.get(metric))
            .filter(|m| matches!(m, MetricSummary::Hist(_)) == hist)
            .filter_map(|m| Some((m, unit_factor(m.unit(), &unit)?)))
            .collect();
        let names: &[&'static str] = if hist { HIST_STATS } else { &["mean"] };
        let mean_of = |stat: &str| {
            let v: Vec<f64> = usable
                .iter()
                .filter_map(|(m, f)| stat_of(m, stat).map(|x| x * f))
                .filter(|x| x.is_finite())
                .collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        };
        let stats = names.iter().map(|s| (*s, mean_of(s))).collect();
        let means: Vec<f64> = usable
            .iter()
            .filter_map(|(m, f)| stat_of(m, "mean").map(|x| x * f))
            .filter(|x| x.is_finite())
            .collect();
        let spread = (means.len() > 1).then(|| {
            let mu = means.iter().sum::<f64>() / means.len() as f64;
            (means.iter().map(|x| (x - mu).powi(2)).sum::<f64>() / means.len() as f64).sqrt()
        });
        Some(Aggregate {
            unit,
            hist,
            n: usable.len(),
            stats,
            spread,
        })
    }
}

impl ExperimentGroup<'_> {
    /// Runs with results.
    pub fn ok_runs(&self) -> usize {
        self.variants.iter().map(|v| v.runs.len()).sum()
    }

    /// Failed runs.
    pub fn failed_runs(&self) -> usize {
        self.variants.iter().map(|v| v.failed.len()).sum()
    }

    /// Whether any variant has a sweep point.
    pub fn has_sweep(&self) -> bool {
        self.variants.iter().any(|v| v.sweep.is_some())
    }

    /// A variant by label, else the first variant of that name.
    pub fn variant(&self, label: &str) -> Option<&VariantGroup<'_>> {
        self.variants.iter().find(|v| v.label == label).or_else(|| {
            let (name, _) = parse_label(label);
            self.variants.iter().find(|v| v.name == name)
        })
    }

    /// The first run (in report order), for the setup.
    pub fn first_run(&self) -> Option<&Results> {
        self.variants.iter().find_map(|v| v.runs.first().copied())
    }
}

fn side_rank(e: Option<&Experiment>, name: &str) -> usize {
    e.and_then(|e| e.sides().iter().position(|s| *s == name))
        .unwrap_or(usize::MAX)
}

/// Groups `runs`: one group per catalog experiment (in catalog order, even
/// without runs), then one per other scenario name (alphabetically).
pub fn group(runs: &[Run]) -> Vec<ExperimentGroup<'_>> {
    let mut groups: Vec<ExperimentGroup<'_>> = EXPERIMENTS
        .iter()
        .map(|e| ExperimentGroup {
            id: e.id.to_string(),
            experiment: Some(e),
            variants: Vec::new(),
        })
        .collect();
    let mut others: BTreeSet<&str> = BTreeSet::new();
    for r in runs {
        let (s, _, _) = r.key();
        if !groups.iter().any(|g| g.id == s) {
            others.insert(s);
        }
    }
    groups.extend(others.into_iter().map(|s| ExperimentGroup {
        id: s.to_string(),
        experiment: None,
        variants: Vec::new(),
    }));
    for r in runs {
        let (s, label, _) = r.key();
        let Some(g) = groups.iter_mut().find(|g| g.id == s) else {
            continue;
        };
        let i = match g.variants.iter().position(|v| v.label == label) {
            Some(i) => i,
            None => {
                g.variants.push(VariantGroup::new(label));
                g.variants.len() - 1
            }
        };
        match r {
            Run::Done(res) => g.variants[i].runs.push(res),
            Run::Failed(f) => g.variants[i].failed.push(f),
        }
    }
    for g in &mut groups {
        let e = g.experiment;
        g.variants.sort_by(|a, b| {
            side_rank(e, &a.name)
                .cmp(&side_rank(e, &b.name))
                .then_with(|| a.name.cmp(&b.name))
                .then_with(|| match (&a.sweep, &b.sweep) {
                    (Some((ka, va)), Some((kb, vb))) => ka.cmp(kb).then_with(|| cmp_value(va, vb)),
                    (x, y) => x.is_some().cmp(&y.is_some()),
                })
                .then_with(|| a.label.cmp(&b.label))
        });
        for v in &mut g.variants {
            v.runs.sort_by_key(|r| r.seed);
            v.failed.sort_by_key(|f| f.seed);
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_split_into_name_and_sweep_point() {
        assert_eq!(
            parse_label("ino_mod[nr_wb_ctx=4]"),
            (
                "ino_mod".to_string(),
                Some(("nr_wb_ctx".to_string(), "4".to_string()))
            )
        );
        assert_eq!(parse_label("sync"), ("sync".to_string(), None));
        assert_eq!(cmp_value("10", "2"), Ordering::Greater);
    }
}
