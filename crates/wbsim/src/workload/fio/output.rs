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
//! Simplified: percentiles come from an HDR histogram instead of fio's
//! log-linear buckets; `percentile` is emitted for both `clat_ns` and `lat_ns`
//! (as fio does with `lat_percentiles=1`), and only when there are samples (as
//! fio). `slat_ns` is left empty (fio records no submission latency for sync
//! engines). Left out: `bw_min`/`bw_max`/`iops_*` sample statistics, CPU
//! usage, `iodepth_level`, `latency_{ns,us,ms}` distributions, json+ `bins`.

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
}

impl FioDdirStats {
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
        let runtime_ms = runtime_ns / NS_PER_MS;
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
