//! The results document: one JSON file per run (schema 1), read back by
//! `wbsim compare` and `wbsim report`.
//!
//! Not kernel code. Layout:
//! ```text
//! { "schema": 1, "scenario", "variant", "seed",
//!   "model": { "version", "machine", "sysctl", "devices", "filesystems", "policies" },
//!   "metrics": { NAME: {"unit","count","mean","stddev","min","p50","p90","p95","p99","p99.9","max"}
//!                    | {"unit","value"} },
//!   "series": { NAME: [[t_ns, v], ...] },          (omitted when empty)
//!   "jobs": [ fio-shaped job objects ],
//!   "invariants": { "checked": n, "violations": [ {"invariant", "time_ns",
//!                   "objects": {"superblock", "superblock_name", "fs_type", "inodes",
//!                   "wb", "memcg", "mount", "counter"}, "message"} ] },
//!   "host": { "wall_time_s", "date", "version" },
//!   "not_modelled": [ {origin, line, option, why} ], (fio options accepted, not modelled)
//!   "unfinished_jobs": [ JOBNAME ],                (jobs cut off before their size)
//!   "job_reporting": { "mode", "separate_clones", "limit", "aggregated_jobs", "note" },
//!                                                  (only beyond the per-job detail limit)
//!   "live": { ... } }                              (probe results only)
//! ```
//! Results of `wbsim probe` (the live kernel) have the same shape: `model`
//! describes the live machine as a scenario would, `variant` is `"live"`,
//! `seed` 0, and `"live"` ([`Live`]) records what the kernel and host were.
//! Determinism: every map is a BTreeMap or a struct (fixed key order),
//! floats are written by serde_json (shortest round-trip form), non-finite
//! floats as `null`. Everything outside `"host"` is byte-identical for the
//! same scenario, variant and seed; [`Results::comparable_json`] is that part.
//! `variant` is the resolved variant's label (`"ino_mod[nr_wb_ctx=4]"` at a
//! sweep point), `model.version` the wbsim version that produced it.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::metrics::{finite, MetricSummary, Metrics};
use super::scenario::{
    DeviceConfig, FilesystemConfig, MachineConfig, Policies, ResolvedVariant, Scenario,
    VmDirtyParams,
};
pub use crate::model::machine::{Violation, ViolationObjects};

/// The schema version written and accepted.
pub const SCHEMA: u32 = 1;

/// The parameters in force for a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelParams {
    /// wbsim version (`CARGO_PKG_VERSION`) that ran the model.
    pub version: String,
    /// The machine after variant overrides (its `[machine]` keys: the
    /// sysctls and policies are the two fields below).
    pub machine: MachineConfig,
    /// The sysctls after variant overrides.
    pub sysctl: VmDirtyParams,
    /// Devices with their profile values.
    pub devices: Vec<DeviceConfig>,
    /// Filesystems.
    pub filesystems: Vec<FilesystemConfig>,
    /// The policies.
    pub policies: Policies,
}

impl ModelParams {
    /// The parameters of `scenario` run as `variant`.
    pub fn new(scenario: &Scenario, variant: &ResolvedVariant) -> ModelParams {
        ModelParams {
            version: env!("CARGO_PKG_VERSION").to_string(),
            machine: variant.machine.clone(),
            sysctl: variant.machine.dirty.clone(),
            devices: scenario.devices.clone(),
            filesystems: scenario.filesystems.clone(),
            policies: variant.machine.policies,
        }
    }
}

/// Invariant checks of a run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Invariants {
    /// Checks made.
    pub checked: u64,
    /// What failed, in order: the invariant's name, the simulated time,
    /// the objects involved and a message.
    pub violations: Vec<Violation>,
}

/// How a run with many fio clones reported them (present only when the
/// clones without `group_reporting` were more than the per-job detail
/// limit, `PER_JOB_DETAIL_MAX` in `workload/fio_exec.rs`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobReporting {
    /// `aggregated` (each job's clones folded into one entry, the default)
    /// or `per_clone` (asked for with `--per-job` or `[measure] per_job`).
    pub mode: String,
    /// Statistics entries the jobs would keep per clone.
    pub separate_clones: u64,
    /// The limit beyond which clones are aggregated by default.
    pub limit: u64,
    /// Jobs whose clones were folded into one entry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aggregated_jobs: Vec<String>,
    /// What was done, in words.
    pub note: String,
}

/// Facts about the run that differ between hosts and runs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Host {
    /// Wall-clock seconds the run took.
    #[serde(with = "finite")]
    pub wall_time_s: f64,
    /// When it ran (RFC 3339, UTC), as the caller formats it.
    pub date: String,
    /// wbsim version (and git describe, if the caller has it).
    pub version: String,
}

impl Host {
    /// The current time as `date` holds it (RFC 3339, UTC, seconds).
    pub fn now() -> String {
        humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
    }
}

/// The live machine a `wbsim probe` run measured (absent in model results).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Live {
    /// The probe experiment (`umount`, `dontcache`, `buffered-write`).
    pub experiment: String,
    /// The command line that produced the results.
    pub command: String,
    /// `uname -r`.
    pub kernel_release: String,
    /// `uname -v` (build string, shows `PREEMPT_DYNAMIC`/`PREEMPT_RT`).
    pub kernel_version: String,
    /// `uname -m`.
    pub arch: String,
    /// Preemption model (`full`, `voluntary`, `none`, `rt`...) and where it was read.
    pub preemption: String,
    /// `CONFIG_HZ` if `/proc/config.gz` tells.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hz: Option<u32>,
    /// Online CPUs.
    pub cpus: u32,
    /// `/proc/cpuinfo` model name.
    pub cpu_model: String,
    /// `MemTotal`, bytes.
    pub memory_bytes: u64,
    /// The probe's temporary directory (where images live).
    pub tmp_dir: String,
    /// The device and filesystem type backing it (`/dev/vda (ext4)`).
    pub tmp_device: String,
    /// Settings in force or changed during the run (and restored), by name.
    pub settings: BTreeMap<String, String>,
    /// What the results mean and what was refused or left out.
    pub notes: Vec<String>,
    /// The machine's conditions in each round of the run (load, steal,
    /// other runnable tasks), in round order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rounds: Vec<RoundConditions>,
    /// Run-to-run spread of each metric across the rounds.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub spread: BTreeMap<String, Spread>,
}

/// The machine during one probe round: is it quiet?
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoundConditions {
    /// Round number, from 1.
    pub round: u32,
    /// 1-minute load average at the round's start.
    pub load_1m: f64,
    /// 5-minute load average at the round's start.
    pub load_5m: f64,
    /// Runnable tasks other than the probe at the round's start (median of
    /// a few `/proc/stat` `procs_running` samples, less the probe itself).
    pub others_running: f64,
    /// CPU steal over the round, percent of all CPU time (`/proc/stat`).
    pub steal_pct: f64,
    /// `uname -r`.
    pub kernel_release: String,
    /// Why the machine was not quiet at the round's start (empty: quiet).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_quiet: Vec<String>,
}

/// Minimum, median and maximum of one statistic across rounds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MinMedMax {
    /// Smallest.
    pub min: f64,
    /// Median (the mean of the middle two for an even count).
    pub median: f64,
    /// Largest.
    pub max: f64,
}

/// How a metric moved between the rounds of a probe run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spread {
    /// Rounds that had the metric.
    pub rounds: u32,
    /// Each round's mean (histograms) or value (scalars).
    pub mean: MinMedMax,
    /// Each round's p99 (histograms only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99: Option<MinMedMax>,
}

/// One run's results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Results {
    /// [`SCHEMA`].
    pub schema: u32,
    /// Scenario name.
    pub scenario: String,
    /// Variant label.
    pub variant: String,
    /// Seed of this run.
    pub seed: u64,
    /// Parameters in force.
    pub model: ModelParams,
    /// Metric summaries by name.
    pub metrics: BTreeMap<String, MetricSummary>,
    /// Time series for plots, by name: `[t_ns, value]` pairs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub series: BTreeMap<String, Vec<SeriesPoint>>,
    /// fio-shaped per-job output.
    pub jobs: Vec<serde_json::Value>,
    /// Invariant checks.
    pub invariants: Invariants,
    /// Host facts (excluded from comparisons).
    pub host: Host,
    /// The live machine, for `wbsim probe` results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<Live>,
    /// fio options the run's job files set that wbsim accepts but does not
    /// model, once each (omitted when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_modelled: Vec<crate::workload::fio::NotModelled>,
    /// fio jobs that had not done their `size` (x `loops`) when the run
    /// ended: cut off by the run's duration (omitted when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unfinished_jobs: Vec<String>,
    /// How fio clones were reported when there were more than the per-job
    /// detail limit (omitted otherwise: every job as its file asks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_reporting: Option<JobReporting>,
    /// Per job (in `jobs` order), what fio's output formats and log files
    /// need beyond the results: latency bins and logged I/Os. Not saved.
    #[serde(skip)]
    pub fio_detail: Vec<crate::workload::fio::output::FioJobDetail>,
    /// fio's `disk_util` of the run's devices. Not saved.
    #[serde(skip)]
    pub fio_disks: Vec<crate::workload::fio::output::FioDiskUtil>,
}

/// One `[t_ns, value]` point (value `null` if not finite).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SeriesPoint(pub u64, pub f64);

impl Serialize for SeriesPoint {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeTuple;
        struct F(f64);
        impl Serialize for F {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                finite::serialize(&self.0, s)
            }
        }
        let mut t = s.serialize_tuple(2)?;
        t.serialize_element(&self.0)?;
        t.serialize_element(&F(self.1))?;
        t.end()
    }
}

impl<'de> Deserialize<'de> for SeriesPoint {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<SeriesPoint, D::Error> {
        let (t, v): (u64, Option<f64>) = Deserialize::deserialize(d)?;
        Ok(SeriesPoint(t, v.unwrap_or(f64::NAN)))
    }
}

/// Errors reading a results file.
#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// Not a results document.
    #[error("{path}:{line}:{column}: not a wbsim results document: {message}")]
    Json {
        /// The file.
        path: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// serde_json's message.
        message: String,
    },
    /// A schema this build does not read.
    #[error("{path}: results schema {found} is not supported (this wbsim reads schema {SCHEMA})")]
    Schema {
        /// The file.
        path: String,
        /// The schema found.
        found: u64,
    },
}

impl Results {
    /// Assembles a run's results from its parts. `metrics` summaries and
    /// series are filtered by `[measure] metrics`.
    pub fn new(
        scenario: &Scenario,
        variant: &ResolvedVariant,
        seed: u64,
        metrics: &Metrics,
        jobs: Vec<serde_json::Value>,
        invariants: Invariants,
        host: Host,
    ) -> Results {
        let keep = |n: &str| scenario.measure.keeps(n);
        Results {
            schema: SCHEMA,
            scenario: scenario.name.clone(),
            variant: variant.label.clone(),
            seed,
            model: ModelParams::new(scenario, variant),
            metrics: metrics.summaries(keep),
            series: metrics
                .series(keep)
                .into_iter()
                .map(|(k, v)| (k, v.into_iter().map(|(t, x)| SeriesPoint(t, x)).collect()))
                .collect(),
            jobs,
            invariants,
            host,
            live: None,
            not_modelled: Vec::new(),
            unfinished_jobs: Vec::new(),
            job_reporting: None,
            fio_detail: Vec::new(),
            fio_disks: Vec::new(),
        }
    }

    /// Results of a live-kernel probe: `model` describes the live machine,
    /// variant `"live"`, seed 0, no invariant checks.
    pub fn from_probe(
        scenario: &str,
        model: ModelParams,
        metrics: &Metrics,
        jobs: Vec<serde_json::Value>,
        host: Host,
        live: Live,
    ) -> Results {
        Results {
            schema: SCHEMA,
            scenario: scenario.to_string(),
            variant: "live".to_string(),
            seed: 0,
            model,
            metrics: metrics.summaries(|_| true),
            series: metrics
                .series(|_| true)
                .into_iter()
                .map(|(k, v)| (k, v.into_iter().map(|(t, x)| SeriesPoint(t, x)).collect()))
                .collect(),
            jobs,
            invariants: Invariants::default(),
            host,
            live: Some(live),
            not_modelled: Vec::new(),
            unfinished_jobs: Vec::new(),
            job_reporting: None,
            fio_detail: Vec::new(),
            fio_disks: Vec::new(),
        }
    }

    /// The document, pretty-printed (two-space indent, trailing newline).
    pub fn to_json_pretty(&self) -> String {
        let mut s = serde_json::to_string_pretty(self)
            .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
        s.push('\n');
        s
    }

    /// The document without `"host"`, as compact JSON: equal for runs of
    /// the same scenario, variant and seed.
    pub fn comparable_json(&self) -> String {
        let mut v = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        if let Some(o) = v.as_object_mut() {
            o.remove("host");
        }
        serde_json::to_string(&v).unwrap_or_default()
    }

    /// Whether two runs produced the same results (ignoring `"host"`).
    pub fn same_outcome(&self, other: &Results) -> bool {
        self.comparable_json() == other.comparable_json()
    }

    /// Writes the pretty document to `path`.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<(), ResultsError> {
        let path = path.as_ref();
        std::fs::write(path, self.to_json_pretty()).map_err(|source| ResultsError::Io {
            path: path.display().to_string(),
            source,
        })
    }

    /// Parses a results document; `origin` names it in errors.
    pub fn from_json(text: &str, origin: &str) -> Result<Results, ResultsError> {
        let json_err = |e: serde_json::Error| ResultsError::Json {
            path: origin.to_string(),
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        };
        let v: serde_json::Value = serde_json::from_str(text).map_err(json_err)?;
        let found = v
            .get("schema")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0);
        if found != u64::from(SCHEMA) {
            return Err(ResultsError::Schema {
                path: origin.to_string(),
                found,
            });
        }
        serde_json::from_str(text).map_err(json_err)
    }

    /// Reads a results file.
    pub fn load(path: impl AsRef<Path>) -> Result<Results, ResultsError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ResultsError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Results::from_json(&text, &path.display().to_string())
    }

    /// A statistic of a metric (`("umount.elapsed", "p99")`).
    pub fn stat(&self, metric: &str, stat: &str) -> Option<f64> {
        self.metrics.get(metric)?.stat(stat)
    }
}
