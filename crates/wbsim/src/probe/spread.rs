//! Run-to-run spread of a probe's repeated rounds: for every metric, the
//! minimum, median and maximum across rounds of its mean (histograms) or
//! value (scalars), and of its p99 (histograms). Written to the results'
//! `live.spread`; `wbsim compare` flags a model figure only when it lies
//! outside it. Not kernel code.

use std::collections::BTreeMap;

use crate::experiment::metrics::MetricSummary;
use crate::experiment::results::{MinMedMax, Spread};

/// Minimum, median and maximum of the finite values of `v` (None if none).
pub fn min_med_max(v: &[f64]) -> Option<MinMedMax> {
    let f: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if f.is_empty() {
        return None;
    }
    Some(MinMedMax {
        min: f.iter().copied().fold(f64::INFINITY, f64::min),
        median: super::quiet::median(&f),
        max: f.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    })
}

/// The spread of every metric over `rounds` (each round's summaries, in
/// the same unit per metric). A metric enters with the rounds that have a
/// finite value for it.
pub fn spread(rounds: &[BTreeMap<String, MetricSummary>]) -> BTreeMap<String, Spread> {
    let mut means: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut p99s: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for r in rounds {
        for (name, m) in r {
            match m {
                MetricSummary::Hist(h) => {
                    means.entry(name).or_default().push(h.mean);
                    p99s.entry(name).or_default().push(h.p99);
                }
                MetricSummary::Scalar(s) => means.entry(name).or_default().push(s.value.as_f64()),
            }
        }
    }
    means
        .into_iter()
        .filter_map(|(name, v)| {
            let mean = min_med_max(&v)?;
            let rounds = v.iter().filter(|x| x.is_finite()).count() as u32;
            let p99 = p99s.get(name).and_then(|p| min_med_max(p));
            Some((name.to_string(), Spread { rounds, mean, p99 }))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::metrics::Metrics;

    #[test]
    fn spread_of_three_rounds() {
        let mut rounds = Vec::new();
        for (k, bw) in [(1u64, 300.0), (3, 100.0), (2, 200.0)] {
            let mut m = Metrics::new();
            for v in 1..=100u64 {
                m.record("lat", "us", v * k);
            }
            m.set("bw", "MiB/s", bw);
            if k != 3 {
                m.set("only_some", "events", k as f64);
            }
            rounds.push(m.summaries(|_| true));
        }
        let s = spread(&rounds);
        let bw = &s["bw"];
        assert_eq!(bw.rounds, 3);
        assert_eq!(
            bw.mean,
            MinMedMax {
                min: 100.0,
                median: 200.0,
                max: 300.0
            }
        );
        assert!(bw.p99.is_none());
        let lat = &s["lat"];
        assert!((lat.mean.min - 50.5).abs() < 1e-9, "{lat:?}");
        assert!((lat.mean.median - 101.0).abs() < 1e-9, "{lat:?}");
        assert!((lat.mean.max - 151.5).abs() < 1e-9, "{lat:?}");
        let p99 = lat.p99.expect("a histogram has a p99 spread");
        assert!(p99.min <= p99.median && p99.median <= p99.max);
        assert!((p99.max / p99.min - 3.0).abs() < 0.01, "{p99:?}");
        assert_eq!(s["only_some"].rounds, 2);
        assert_eq!(s["only_some"].mean.median, 1.5);
    }

    #[test]
    fn non_finite_values_are_left_out() {
        assert_eq!(min_med_max(&[f64::NAN]), None);
        let m = min_med_max(&[f64::NAN, 2.0, 4.0]).unwrap();
        assert_eq!((m.min, m.median, m.max), (2.0, 3.0, 4.0));
    }

    #[test]
    fn merged_rounds_pool_histograms_and_average_scalars() {
        let mut a = Metrics::new();
        let mut b = Metrics::new();
        for v in [10u64, 20] {
            a.record("lat", "us", v);
        }
        for v in [30u64, 40, 50, 60] {
            b.record("lat", "us", v);
        }
        a.set("bw", "MiB/s", 100.0);
        b.set("bw", "MiB/s", 300.0);
        let m = Metrics::merge_rounds(&[a, b]);
        match m.summary("lat").unwrap() {
            MetricSummary::Hist(h) => {
                assert_eq!(h.count, 6);
                assert!((h.mean - 35.0).abs() < 1e-9);
                assert_eq!((h.min, h.max), (10.0, 60.0));
                // population stddev of 10..60 step 10
                assert!((h.stddev - 17.078_251).abs() < 1e-5, "{}", h.stddev);
            }
            s => panic!("not a histogram: {s:?}"),
        }
        match m.summary("bw").unwrap() {
            MetricSummary::Scalar(s) => assert_eq!(s.value.as_f64(), 200.0),
            h => panic!("not a scalar: {h:?}"),
        }
    }
}
