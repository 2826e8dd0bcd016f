//! fio's JSON output shape for a job, so fio tooling reads wbsim results.
//!
//! Mirrors fio's `stat.c`: `show_thread_status_json()` (per job: `jobname`,
//! `groupid`, `error`, `read`/`write`/`trim`/`sync`, `job_runtime`),
//! `add_ddir_status_json()` (per direction: `io_bytes`, `io_kbytes`,
//! `bw_bytes`, `bw` in KiB/s, `iops`, `runtime` in ms, `total_ios`,
//! `short_ios`, `drop_ios`, `slat_ns`, `clat_ns`, `lat_ns`) and
//! `add_ddir_lat_json()` (`min`, `max`, `mean`, `stddev`, `N`, `percentile`
//! keyed by `"%f"` of fio's default `percentile_list`). Arithmetic is fio's:
//! `bw_bytes = 1000 * io_bytes / runtime_ms` (integer), `bw = bw_bytes / 1024`,
//! `iops = 1000.0 * total_ios / runtime_ms`, `io_kbytes = io_bytes >> 10`,
//! `stddev` is the sample standard deviation (fio `calc_lat()`: S / (n - 1)).
//!
//! Also per direction `bw_min`, `bw_max`, `bw_agg`, `bw_mean`, `bw_dev`,
//! `bw_samples`, `iops_min`, `iops_max`, `iops_mean`, `iops_stddev`,
//! `iops_samples` ([`super::iolog::RateStats`]), and per job `usr_cpu`,
//! `sys_cpu`, `iodepth_level`, `iodepth_submit`, `iodepth_complete`,
//! `latency_ns`/`latency_us`/`latency_ms` (fio's `io_u_mark_latency()`
//! buckets of the total latency) and the `latency_*` target fields. fio's
//! latency bins (json+ `bins`): [`plat_val_to_idx`] / [`plat_idx_to_val`].
//!
//! Simplified: in results files percentiles come from an HDR histogram
//! instead of fio's log-linear buckets (the `--output-format` documents use
//! fio's buckets); `percentile` is emitted for both `clat_ns` and `lat_ns`
//! (as fio does with `lat_percentiles=1`), and only when there are samples
//! (as fio). `slat_ns` is empty for the sync engines (fio records no
//! submission latency for them). Left out: `ctx`, `majf`, `minf` (no context
//! switch or page fault counts per task).

use hdrhistogram::Histogram;
use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// fio's default `percentile_list` (`options.c`, `percentile_list` `.def`).
pub const FIO_DEFAULT_PERCENTILES: [f64; 17] = [
    1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95,
    99.99,
];

/// Nanoseconds per millisecond (fio reports `runtime` and `job_runtime` in ms).
const NS_PER_MS: u64 = 1_000_000;

/// A percentile map keyed like fio (`"99.900000"`), in fio's order.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct FioPercentiles(pub Vec<(String, u64)>);

impl FioPercentiles {
    /// fio's key for a percentile: C `"%f"`, six decimals.
    pub fn key(pct: f64) -> String {
        format!("{pct:.6}")
    }

    /// The value at `pct` (e.g. 99.9), if present.
    pub fn get(&self, pct: f64) -> Option<u64> {
        let k = Self::key(pct);
        self.0.iter().find(|(key, _)| *key == k).map(|(_, v)| *v)
    }
}

impl Serialize for FioPercentiles {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for FioPercentiles {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = FioPercentiles;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map of percentile to value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<FioPercentiles, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = a.next_entry::<String, u64>()? {
                    out.push((k, v));
                }
                Ok(FioPercentiles(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// A latency summary (`slat_ns`, `clat_ns`, `lat_ns`), all in ns.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct FioLatStats {
    pub min: u64,
    pub max: u64,
    pub mean: f64,
    pub stddev: f64,
    #[serde(rename = "N")]
    pub n: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentile: Option<FioPercentiles>,
}

impl FioLatStats {
    /// Summarises a histogram of latencies in ns, with fio's default percentiles.
    pub fn from_histogram(h: &Histogram<u64>) -> FioLatStats {
        let n = h.len();
        if n == 0 {
            return FioLatStats::default();
        }
        let stddev = if n > 1 {
            // hdrhistogram's stdev() is the population one; fio's is the sample one.
            let nf = n as f64;
            h.stdev() * (nf / (nf - 1.0)).sqrt()
        } else {
            0.0
        };
        // Clamped to the recorded extremes ([`fio_percentiles`]).
        let percentile = fio_percentiles(h)
            .into_iter()
            .map(|(p, v)| (FioPercentiles::key(p), v))
            .collect();
        FioLatStats {
            min: h.min(),
            max: h.max(),
            mean: h.mean(),
            stddev,
            n,
            percentile: Some(FioPercentiles(percentile)),
        }
    }
}

/// One direction (`read`, `write`, `trim`) of a job.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct FioDdirStats {
    pub io_bytes: u64,
    /// `io_bytes >> 10`.
    pub io_kbytes: u64,
    /// Bytes/s.
    pub bw_bytes: u64,
    /// KiB/s.
    pub bw: u64,
    pub iops: f64,
    /// Milliseconds.
    pub runtime: u64,
    pub total_ios: u64,
    pub short_ios: u64,
    pub drop_ios: u64,
    pub slat_ns: FioLatStats,
    pub clat_ns: FioLatStats,
    pub lat_ns: FioLatStats,
    /// Bandwidth samples (KiB/s): min, max.
    #[serde(default)]
    pub bw_min: u64,
    #[serde(default)]
    pub bw_max: u64,
    /// The job's mean sample bandwidth as a percentage of its group's
    /// aggregate (0 without samples).
    #[serde(default)]
    pub bw_agg: f64,
    /// Mean and sample standard deviation of the bandwidth samples (KiB/s).
    #[serde(default)]
    pub bw_mean: f64,
    #[serde(default)]
    pub bw_dev: f64,
    /// Bandwidth samples taken (one per full 500 ms).
    #[serde(default)]
    pub bw_samples: u64,
    /// IOPS samples: min, max, mean, sample standard deviation, count.
    #[serde(default)]
    pub iops_min: u64,
    #[serde(default)]
    pub iops_max: u64,
    #[serde(default)]
    pub iops_mean: f64,
    #[serde(default)]
    pub iops_stddev: f64,
    #[serde(default)]
    pub iops_samples: u64,
}

impl FioDdirStats {
    /// Fills the bandwidth and IOPS sample statistics.
    pub fn set_rates(&mut self, r: &super::iolog::RateStats) {
        self.bw_min = r.bw_min;
        self.bw_max = r.bw_max;
        self.bw_mean = r.bw_mean;
        self.bw_dev = r.bw_dev;
        self.bw_samples = r.samples;
        self.iops_min = r.iops_min;
        self.iops_max = r.iops_max;
        self.iops_mean = r.iops_mean;
        self.iops_stddev = r.iops_stddev;
        self.iops_samples = r.samples;
    }

    /// Fills a direction from byte/op counts, the time it ran and completion
    /// latencies in ns. `lat_ns` is the total latency; `None` means equal to
    /// `clat_ns` (sync engines: no separate submission latency).
    pub fn from_latencies(
        io_bytes: u64,
        total_ios: u64,
        runtime_ns: u64,
        clat_ns: &Histogram<u64>,
        lat_ns: Option<&Histogram<u64>>,
    ) -> FioDdirStats {
        // fio reports no runtime for a direction without I/O.
        let runtime_ms = if total_ios == 0 && io_bytes == 0 {
            0
        } else {
            runtime_ns / NS_PER_MS
        };
        let (bw_bytes, iops) = if runtime_ms > 0 {
            let bw = (1000u128 * u128::from(io_bytes)) / u128::from(runtime_ms);
            (
                u64::try_from(bw).unwrap_or(u64::MAX),
                1000.0 * total_ios as f64 / runtime_ms as f64,
            )
        } else {
            (0, 0.0)
        };
        let clat = FioLatStats::from_histogram(clat_ns);
        let lat = lat_ns.map_or_else(|| clat.clone(), FioLatStats::from_histogram);
        FioDdirStats {
            io_bytes,
            io_kbytes: io_bytes >> 10,
            bw_bytes,
            bw: bw_bytes / 1024,
            iops,
            runtime: runtime_ms,
            total_ios,
            short_ios: 0,
            drop_ios: 0,
            slat_ns: FioLatStats::default(),
            clat_ns: clat,
            lat_ns: lat,
            ..FioDdirStats::default()
        }
    }
}

/// The `sync` direction: fsync/fdatasync calls and their latency.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct FioSyncStats {
    pub total_ios: u64,
    pub lat_ns: FioLatStats,
}

impl FioSyncStats {
    /// From a histogram of fsync latencies in ns.
    pub fn from_histogram(h: &Histogram<u64>) -> FioSyncStats {
        FioSyncStats {
            total_ios: h.len(),
            lat_ns: FioLatStats::from_histogram(h),
        }
    }
}

/// One entry of fio's `jobs` array.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct FioJobOutput {
    pub jobname: String,
    pub groupid: u32,
    pub error: i32,
    pub read: FioDdirStats,
    pub write: FioDdirStats,
    pub trim: FioDdirStats,
    pub sync: FioSyncStats,
    /// Milliseconds.
    pub job_runtime: u64,
    /// User CPU, percent of the runtime (0: fio's own CPU is not modelled).
    #[serde(default)]
    pub usr_cpu: f64,
    /// System CPU of the job's tasks, percent of the runtime.
    #[serde(default)]
    pub sys_cpu: f64,
    /// I/Os submitted by depth in flight, percent (fio `io_u_map`).
    #[serde(default, skip_serializing_if = "LabelledDist::is_empty")]
    pub iodepth_level: LabelledDist,
    /// Submit calls by I/Os submitted, percent.
    #[serde(default, skip_serializing_if = "LabelledDist::is_empty")]
    pub iodepth_submit: LabelledDist,
    /// Reaps by I/Os completed, percent.
    #[serde(default, skip_serializing_if = "LabelledDist::is_empty")]
    pub iodepth_complete: LabelledDist,
    /// I/Os by total latency, percent: under 2..1000 ns.
    #[serde(default, skip_serializing_if = "LabelledDist::is_empty")]
    pub latency_ns: LabelledDist,
    /// Under 2..1000 us.
    #[serde(default, skip_serializing_if = "LabelledDist::is_empty")]
    pub latency_us: LabelledDist,
    /// Under 2..2000 ms, and >= 2000 ms.
    #[serde(default, skip_serializing_if = "LabelledDist::is_empty")]
    pub latency_ms: LabelledDist,
    /// fio's latency target fields (`latency_target` is not an option
    /// wbsim takes: depth = iodepth, target 0, percentile 100, window 0).
    #[serde(default)]
    pub latency_depth: u32,
    #[serde(default)]
    pub latency_target: u64,
    #[serde(default)]
    pub latency_percentile: f64,
    #[serde(default)]
    pub latency_window: u64,
}

/// A fio percentage map with fixed labels (`"1"`, `"2"`... `">=64"`), in
/// fio's order.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct LabelledDist(pub Vec<(String, f64)>);

impl LabelledDist {
    /// From labels and values.
    pub fn new(labels: &[&str], values: &[f64]) -> LabelledDist {
        LabelledDist(
            labels
                .iter()
                .zip(values)
                .map(|(l, v)| (l.to_string(), *v))
                .collect(),
        )
    }

    /// No entries (an old results file).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value under `label` (0 if absent). Results files keep the map
    /// with sorted keys, so readers look values up by label.
    pub fn get(&self, label: &str) -> f64 {
        self.0
            .iter()
            .find(|(k, _)| k == label)
            .map_or(0.0, |(_, v)| *v)
    }

    /// The values in the order of `labels`.
    pub fn ordered(&self, labels: &[&str]) -> LabelledDist {
        LabelledDist(
            labels
                .iter()
                .map(|l| (l.to_string(), self.get(l)))
                .collect(),
        )
    }
}

impl Serialize for LabelledDist {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for LabelledDist {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = LabelledDist;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map of label to percentage")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<LabelledDist, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = a.next_entry::<String, f64>()? {
                    out.push((k, v));
                }
                Ok(LabelledDist(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// Labels of `latency_ns` and `latency_us`.
pub const LAT_NU_LABELS: [&str; 10] = [
    "2", "4", "10", "20", "50", "100", "250", "500", "750", "1000",
];
/// Labels of `latency_ms`.
pub const LAT_M_LABELS: [&str; 12] = [
    "2", "4", "10", "20", "50", "100", "250", "500", "750", "1000", "2000", ">=2000",
];

/// fio's `io_u_mark_lat_{nsec,usec,msec}()` bucket of a value below 1000
/// (ns or us) or any ms value.
fn lat_bucket(v: u64) -> usize {
    match v {
        0..=1 => 0,
        2..=3 => 1,
        4..=9 => 2,
        10..=19 => 3,
        20..=49 => 4,
        50..=99 => 5,
        100..=249 => 6,
        250..=499 => 7,
        500..=749 => 8,
        750..=999 => 9,
        1000..=1999 => 10,
        _ => 11,
    }
}

/// fio's `latency_ns`, `latency_us`, `latency_ms` (percent of I/Os, at
/// least 0.01 for a non-empty bucket, fio `stat_calc_lat()`) from total
/// latencies in ns (`hists`: one per direction).
pub fn latency_dists(hists: &[&Histogram<u64>]) -> [LabelledDist; 3] {
    let mut n = [0u64; 10];
    let mut u = [0u64; 10];
    let mut m = [0u64; 12];
    let mut total = 0u64;
    for h in hists {
        if h.is_empty() {
            continue;
        }
        for it in h.iter_recorded() {
            let v = h
                .median_equivalent(it.value_iterated_to())
                .clamp(h.min(), h.max());
            let c = it.count_at_value();
            total += c;
            if v < 1000 {
                n[lat_bucket(v)] += c;
            } else if v < 1_000_000 {
                u[lat_bucket(v / 1000)] += c;
            } else {
                m[lat_bucket(v / 1_000_000)] += c;
            }
        }
    }
    let pct = |src: &[u64]| -> Vec<f64> {
        src.iter()
            .map(|&c| {
                if total == 0 {
                    return 0.0;
                }
                let p = 100.0 * c as f64 / total as f64;
                if p < 0.01 && c > 0 {
                    0.01
                } else {
                    p
                }
            })
            .collect()
    };
    [
        LabelledDist::new(&LAT_NU_LABELS, &pct(&n)),
        LabelledDist::new(&LAT_NU_LABELS, &pct(&u)),
        LabelledDist::new(&LAT_M_LABELS, &pct(&m)),
    ]
}

/// fio's `FIO_IO_U_PLAT_BITS` (`stat.h`): 64 buckets per power of two.
pub const FIO_IO_U_PLAT_BITS: u32 = 6;
/// `FIO_IO_U_PLAT_VAL`.
pub const FIO_IO_U_PLAT_VAL: u64 = 1 << FIO_IO_U_PLAT_BITS;
/// `FIO_IO_U_PLAT_NR`: 29 groups of 64 (latencies up to ~2^34 ns).
pub const FIO_IO_U_PLAT_NR: u64 = 29 * FIO_IO_U_PLAT_VAL;

/// fio's `plat_val_to_idx()`: the latency bucket of `val` (ns). Values
/// below 128 have a bucket each; above, 64 buckets per power of two; the
/// last bucket takes everything beyond.
pub fn plat_val_to_idx(val: u64) -> u64 {
    let msb = if val == 0 {
        0
    } else {
        63 - val.leading_zeros()
    };
    if msb <= FIO_IO_U_PLAT_BITS {
        return val;
    }
    let error_bits = msb - FIO_IO_U_PLAT_BITS;
    let base = u64::from(error_bits + 1) << FIO_IO_U_PLAT_BITS;
    let offset = (FIO_IO_U_PLAT_VAL - 1) & (val >> error_bits);
    (base + offset).min(FIO_IO_U_PLAT_NR - 1)
}

/// fio's `plat_idx_to_val()`: the value a bucket stands for (the middle of
/// its range; the value itself below 128).
pub fn plat_idx_to_val(idx: u64) -> u64 {
    if idx < (FIO_IO_U_PLAT_VAL << 1) {
        return idx;
    }
    let error_bits = (idx >> FIO_IO_U_PLAT_BITS) - 1;
    let base = 1u64 << (error_bits + u64::from(FIO_IO_U_PLAT_BITS));
    let k = idx % FIO_IO_U_PLAT_VAL;
    // base + (k + 0.5) * 2^error_bits, truncated as fio's double -> u64.
    base + ((2 * k + 1) << error_bits) / 2
}

/// A latency histogram in fio's buckets: (bucket index, count), ascending,
/// non-empty buckets only. json+ writes it as `bins` keyed by
/// [`plat_idx_to_val`].
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct FioBins(pub Vec<(u64, u64)>);

impl FioBins {
    /// Re-buckets an HDR histogram of ns (3 significant digits, finer than
    /// fio's 1/64 of a power of two) into fio's buckets, each HDR bucket by
    /// its middle value clamped to the recorded extremes.
    pub fn from_histogram(h: &Histogram<u64>) -> FioBins {
        let mut m: std::collections::BTreeMap<u64, u64> = Default::default();
        if !h.is_empty() {
            for it in h.iter_recorded() {
                let v = h
                    .median_equivalent(it.value_iterated_to())
                    .clamp(h.min(), h.max());
                *m.entry(plat_val_to_idx(v)).or_insert(0) += it.count_at_value();
            }
        }
        FioBins(m.into_iter().collect())
    }

    /// Samples counted.
    pub fn total(&self) -> u64 {
        self.0.iter().map(|(_, c)| c).sum()
    }

    /// fio's `calc_clat_percentiles()` for `plist` (percent, ascending):
    /// the value of the first bucket where the running count reaches p% of
    /// the total.
    pub fn percentiles(&self, plist: &[f64]) -> Vec<(f64, u64)> {
        let nr = self.total();
        let mut out = Vec::with_capacity(plist.len());
        if nr == 0 {
            return out;
        }
        let mut j = 0;
        let mut sum = 0u64;
        for &(idx, c) in &self.0 {
            sum += c;
            while j < plist.len() && sum as f64 >= plist[j] / 100.0 * nr as f64 {
                out.push((plist[j], plat_idx_to_val(idx)));
                j += 1;
            }
        }
        out
    }

    /// json+ `bins`: bucket value (as a string key) to count.
    pub fn to_json(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        for &(idx, c) in &self.0 {
            m.insert(plat_idx_to_val(idx).to_string(), c.into());
        }
        serde_json::Value::Object(m)
    }
}

impl FioJobOutput {
    /// An entry with empty directions (as fio prints for unused ones).
    pub fn new(jobname: &str, groupid: u32, job_runtime_ns: u64) -> FioJobOutput {
        FioJobOutput {
            jobname: jobname.to_string(),
            groupid,
            job_runtime: job_runtime_ns / NS_PER_MS,
            ..FioJobOutput::default()
        }
    }
}

/// What fio's output formats and logs need of a job beyond its results
/// entry (kept in memory only).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FioJobDetail {
    /// fio's 1-based thread numbers of the entry's clones.
    pub threads: Vec<u32>,
    /// Completion latencies in fio's buckets: reads, writes.
    pub clat_bins: [FioBins; 2],
    /// Submission latencies in fio's buckets: reads, writes.
    pub slat_bins: [FioBins; 2],
    /// Total latencies in fio's buckets: reads, writes.
    pub lat_bins: [FioBins; 2],
    /// fsync latencies in fio's buckets.
    pub sync_bins: FioBins,
    /// What the job's fio logs need (jobs with a log option only).
    pub logs: Option<super::iolog::LogData>,
}

/// One entry of fio's `disk_util` (`diskutil.c` `json_array_add_disk_util()`):
/// the device's `/proc/diskstats` counters over the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FioDiskUtil {
    /// Device name (the scenario's).
    pub name: String,
    /// Requests completed.
    pub read_ios: u64,
    pub write_ios: u64,
    /// Bios merged into a request.
    pub read_merges: u64,
    pub write_merges: u64,
    /// Sum of the requests' queue + service times, ms.
    pub read_ticks: u64,
    pub write_ticks: u64,
    /// Integral of requests in flight, ms.
    pub in_queue: u64,
    /// Percent of the run with a request in flight.
    pub util: f64,
}

/// fio's top-level JSON document (the parts wbsim fills).
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct FioOutput {
    #[serde(rename = "fio version")]
    pub fio_version: String,
    pub jobs: Vec<FioJobOutput>,
}

/// Quantile `q` (0..=1) of `h`, clamped to the exact recorded extremes
/// `[min, max]`. An HDR bucket reports its highest equivalent value, which
/// can lie above the largest value recorded (12345 ns sits in an 8 ns wide
/// bucket and reads back as 12351), so without the clamp a p50 or p99.9
/// could exceed the max. Quantiles are non-decreasing in `q`, so the clamped
/// ones keep p50 <= p99 <= p99.9 <= max.
pub fn quantile_within(h: &Histogram<u64>, q: f64, min: u64, max: u64) -> u64 {
    if h.is_empty() {
        return 0;
    }
    h.value_at_quantile(q).clamp(min.min(max), max)
}

/// fio's percentiles (`FIO_DEFAULT_PERCENTILES`, in percent) of a latency
/// histogram in ns, clamped to its recorded extremes (`h.min()`/`h.max()`).
pub fn fio_percentiles(h: &Histogram<u64>) -> Vec<(f64, u64)> {
    FIO_DEFAULT_PERCENTILES
        .iter()
        .map(|&p| (p, quantile_within(h, p / 100.0, h.min(), h.max())))
        .collect()
}
