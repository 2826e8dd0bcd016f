//! Simulated figures beside published ones (the catalog's [`PUBLISHED`]
//! table) and beside live probe figures (`--live` results files), with the
//! ratio simulated / reference.
//!
//! Matching: a published figure matches the variant of the same name at
//! the same sweep point (key compared by suffix, so `nr_wb_ctx` matches
//! `variants.*.nr_wb_ctx`); live results match by scenario name, then
//! variant label (or name), then metric name. Values are converted to the
//! reference's unit (MB/s vs MiB/s, ms vs s). Anything missing is None and
//! shows as "n/a". Leaves out significance tests: with a handful of
//! repetitions a ratio is what a reader can check.
//!
//! [`PUBLISHED`]: crate::experiment::catalog::PUBLISHED

use super::group::{ExperimentGroup, VariantGroup};
use crate::experiment::catalog::Published;
use crate::experiment::metrics::unit_factor;

/// One published figure and what the model (and probe) gave.
#[derive(Clone, Debug, PartialEq)]
pub struct PublishedRow {
    /// The figure.
    pub published: Published,
    /// Label shown for the variant (`ino_mod[nr_wb_ctx=2]`).
    pub label: String,
    /// The simulated value in the published unit.
    pub simulated: Option<f64>,
    /// simulated / published.
    pub ratio: Option<f64>,
    /// The live probe's value in the published unit.
    pub live: Option<f64>,
}

/// One live figure and the simulated one of the same variant and metric.
#[derive(Clone, Debug, PartialEq)]
pub struct LiveRow {
    /// The live variant label.
    pub variant: String,
    /// Metric name.
    pub metric: String,
    /// Statistic compared (`mean`, or `value` of a scalar).
    pub stat: &'static str,
    /// The live unit.
    pub unit: String,
    /// The live value.
    pub live: Option<f64>,
    /// The simulated value in the live unit.
    pub simulated: Option<f64>,
    /// simulated / live.
    pub ratio: Option<f64>,
}

/// The label a published figure's variant has in results.
pub fn published_label(p: &Published) -> String {
    match p.sweep {
        Some((k, v)) => format!("{}[{k}={v}]", p.variant),
        None => p.variant.to_string(),
    }
}

/// The variant of `g` a published figure refers to.
fn matching_variant<'g, 'a>(
    g: &'g ExperimentGroup<'a>,
    p: &Published,
) -> Option<&'g VariantGroup<'a>> {
    g.variants.iter().find(|v| {
        v.name == p.variant
            && match (&v.sweep, p.sweep) {
                (None, None) => true,
                (Some((k, val)), Some((pk, pv))) => k.ends_with(pk) && val == pv,
                _ => false,
            }
    })
}

/// A variant's statistic converted to `unit`.
fn value_in(v: Option<&VariantGroup<'_>>, metric: &str, stat: &str, unit: &str) -> Option<f64> {
    v?.aggregate(metric)?.stat_in(stat, unit)
}

/// Rows for every published figure of `g`'s experiment; `live` is the
/// live group of the same experiment, if any.
pub fn published_rows(
    g: &ExperimentGroup<'_>,
    live: Option<&ExperimentGroup<'_>>,
) -> Vec<PublishedRow> {
    let Some(e) = g.experiment else {
        return Vec::new();
    };
    e.published()
        .map(|p| {
            let simulated = value_in(matching_variant(g, p), p.metric, p.stat, p.unit);
            let live =
                live.and_then(|l| value_in(matching_variant(l, p), p.metric, p.stat, p.unit));
            let ratio = super::format::divide(simulated, Some(p.value));
            PublishedRow {
                published: *p,
                label: published_label(p),
                simulated,
                ratio,
                live,
            }
        })
        .collect()
}

/// Rows for every metric of every live variant of `live`, beside the
/// simulated variant with the same label (or name).
pub fn live_rows(g: &ExperimentGroup<'_>, live: &ExperimentGroup<'_>) -> Vec<LiveRow> {
    let mut rows = Vec::new();
    for lv in &live.variants {
        let sim = g.variant(&lv.label);
        for metric in lv.metric_names() {
            let Some(la) = lv.aggregate(metric) else {
                continue;
            };
            let stat = if la.hist { "mean" } else { "value" };
            let live_v = la.stat(stat);
            let simulated = sim
                .and_then(|s| s.aggregate(metric))
                .and_then(|a| Some(a.stat(stat)? * unit_factor(&a.unit, &la.unit)?));
            rows.push(LiveRow {
                variant: lv.label.clone(),
                metric: metric.to_string(),
                stat,
                unit: la.unit.clone(),
                live: live_v,
                simulated,
                ratio: super::format::divide(simulated, live_v),
            });
        }
    }
    rows
}
