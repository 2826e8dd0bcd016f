//! Scenario files: the machine, devices, filesystems, cgroups, workloads,
//! policy variants and measurements of one experiment, in TOML.
//!
//! Not kernel code; the scenario language of docs/design.md "Scenario files". The
//! sections (all keys documented on the types below):
//!
//! ```toml
//! [scenario]      name, description, duration, repeat = 1, seed = 1,
//!                 quick_duration, quick_repeat (the `--quick` form)
//! [machine]       cpus, memory, preempt_rt, rcu_normal_after_boot, hz, rcu_lazy,
//!                 rcu_normal_wake_from_gp, rcu_nocbs, process_start, wakeup_latency,
//!                 btrfs_btree_kernel_file, tick_cost, preempt_rcu
//! [sysctl]        dirty_ratio, dirty_background_ratio, dirty_bytes, ... (kernel defaults,
//!                 written through the model's sysctl handlers)
//! [[device]]      name, profile, write_bw, read_bw, write_lat, read_lat, queue_depth,
//!                 parallelism, driver_cpu, percpu_completion; [device.bdi] strict_limit, max_bytes, min_ratio,
//!                 max_ratio
//! [[filesystem]]  name, type, device, mountpoint, options = { ... }, mounted
//! [[cgroup]]      name, memory_high, memory_max, cpus = [0, 1]
//! [[job]]         file = "x.fio" | fio = """...""", filesystem, cgroup, start, only_variants
//! [[actor]]       name, cgroup, start, repeat (n | "forever"), instances, steps = [{ op = ... }]
//! [variants.N]    umount_drain, csum_lookup, detach_release, wb_ctx_assign, nr_wb_ctx,
//!                 dontcache_flush, machine.KEY = ..., sysctl.KEY = ...
//! [measure]       sample_interval = "100ms", metrics = [...], warmup = "0s", per_job = false
//!                 (per_job: one fio statistics entry per clone even beyond 128 separate
//!                 clones, where they are otherwise aggregated per job)
//! [sweep]         key = "nr_wb_ctx" | "variants.*.nr_wb_ctx" | "sysctl.dirty_ratio" ..., values
//! ```
//!
//! Durations are strings (`"10s"`, `"250ms"`), sizes strings or byte counts
//! (`"4k"`, `"24g"`; k = 1024): see [`parse_duration`] and [`parse_size`].
//! Every error names `file:line:col`, the key, and for enumerations and keys
//! the allowed values. The sections that set a model type (`[machine]`,
//! `[sysctl]`, `[[device]]`, `[device.bdi]`, variant keys) are read straight
//! into it by one key table each ([`key_docs`] lists them); there is no
//! scenario-side copy of the model's configuration types. fio job text is stored, not parsed, with its origin
//! and line offset ([`FioSource`]) for the fio parser.
//!
//! Additions beyond the original brief, each needed by an experiment:
//! actor `instances` (E2's 32 writers; `{instance}` in a path is replaced by
//! the instance number by the runner), the `cgroup_enter` step (E1: write in
//! a memcg just created), and the step keys `exec = true` (pay
//! `machine.process_start` first and include it in `record`: umount(8) as a
//! command, E1/E3) and `end_run_after` (E2: the run ends after the first step
//! that finishes past this time).

mod actor;
mod build;
mod device;
mod error;
mod key_docs;
mod keys;
mod machine;
mod policy;
mod profiles;
mod raw;
mod units;
mod value;
mod variant;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use crate::model::mm::backing_dev::BdiSettings;
pub use actor::{ActorConfig, Repeat, Step, StepOp, STEP_OPS};
pub use device::bdi_defaults;
pub use error::{ErrorKind, ScenarioError, SourceMap};
pub use key_docs::key_docs;
pub use keys::KeyDoc;
pub use machine::{MachineConfig, VmDirtyParams, PAGE_SIZE, PROCESS_START_DEFAULT_NS};
pub use policy::{CsumLookup, DetachRelease, DontcacheFlush, Policies, UmountDrain, WbCtxAssign};
pub use profiles::{builtin_profile, DeviceProfile, PROFILE_NAMES};
pub use units::{format_duration, format_size, parse_bandwidth, parse_duration, parse_size};
pub use variant::{ResolvedVariant, SweepConfig, VariantConfig, DEFAULT_VARIANT};

/// A validated scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// `[scenario] name`.
    pub name: String,
    /// `[scenario] description` ("" if absent).
    pub description: String,
    /// `[scenario] duration`: simulated time limit of one run, ns.
    pub duration_ns: u64,
    /// `[scenario] repeat`: runs per variant (default 1).
    pub repeat: u32,
    /// `[scenario] seed`: seed of the first run (default 1).
    pub seed: u64,
    /// `[scenario] quick_duration`: the duration under `--quick` (default:
    /// `duration`; never longer).
    pub quick_duration_ns: u64,
    /// `[scenario] quick_repeat`: runs per variant under `--quick` (default:
    /// `repeat`; never more).
    pub quick_repeat: u32,
    /// `[machine]` with `[sysctl]` in its `dirty` and the pre-change
    /// policies, before variant overrides.
    pub machine: MachineConfig,
    /// `[[device]]`, in file order.
    pub devices: Vec<DeviceConfig>,
    /// `[[filesystem]]`, in file order.
    pub filesystems: Vec<FilesystemConfig>,
    /// `[[cgroup]]`, in file order.
    pub cgroups: Vec<CgroupConfig>,
    /// `[[job]]`, in file order.
    pub jobs: Vec<JobConfig>,
    /// `[[actor]]`, in file order.
    pub actors: Vec<ActorConfig>,
    /// `[variants.*]` in file order; one `"default"` if the file has none.
    pub variants: Vec<VariantConfig>,
    /// `[measure]`.
    pub measure: MeasureConfig,
    /// `[sweep]`.
    pub sweep: Option<SweepConfig>,
    /// The text and its origin, for errors found later (fio jobs, variants).
    pub source: SourceMap,
}

/// A `[[device]]`: a block device with its profile values after overrides.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceConfig {
    /// Unique name.
    pub name: String,
    /// The built-in profile the values start from.
    pub profile: String,
    /// The values in force (profile, then overrides).
    pub params: DeviceProfile,
    /// `[device.bdi]` ([`bdi_defaults`] for unset keys).
    #[serde(with = "bdi_json")]
    pub bdi: BdiSettings,
    /// Line of the `[[device]]` header.
    #[serde(skip)]
    pub line: u32,
}

/// The results document's form of [`BdiSettings`] (schema 1): `max_bytes`
/// is `null` when there is no cap (0 in the model).
mod bdi_json {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::BdiSettings;

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Json {
        strict_limit: bool,
        max_bytes: Option<u64>,
        min_ratio: u32,
        max_ratio: u32,
        /// KB/s as the kernel prints it; absent for a new device.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        start_dirty_ratelimit_kbps: Option<u64>,
    }

    pub fn serialize<S: Serializer>(b: &BdiSettings, s: S) -> Result<S::Ok, S::Error> {
        Json {
            strict_limit: b.strict_limit,
            max_bytes: (b.max_bytes != 0).then_some(b.max_bytes),
            min_ratio: b.min_ratio,
            max_ratio: b.max_ratio,
            start_dirty_ratelimit_kbps: (b.start_dirty_ratelimit != 0)
                .then_some(b.start_dirty_ratelimit * 4),
        }
        .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BdiSettings, D::Error> {
        let j = Json::deserialize(d)?;
        Ok(BdiSettings {
            strict_limit: j.strict_limit,
            max_bytes: j.max_bytes.unwrap_or(0),
            min_ratio: j.min_ratio,
            max_ratio: j.max_ratio,
            start_dirty_ratelimit: j.start_dirty_ratelimit_kbps.unwrap_or(0) / 4,
        })
    }
}

/// Filesystem types wbsim models.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FsType {
    /// `mm/shmem.c` (no device, no writeback).
    Tmpfs,
    /// `fs/ext4`.
    Ext4,
    /// `fs/xfs`.
    Xfs,
    /// `fs/btrfs`.
    Btrfs,
    /// No filesystem: the block device itself, opened as a file
    /// (`block/fops.c`); every path under the mount point is the device.
    Bdev,
}

impl FsType {
    /// Every type with its spelling.
    pub const ALL: &'static [(&'static str, FsType)] = &[
        ("tmpfs", FsType::Tmpfs),
        ("ext4", FsType::Ext4),
        ("xfs", FsType::Xfs),
        ("btrfs", FsType::Btrfs),
        ("bdev", FsType::Bdev),
    ];

    /// The spelling (as in `mount -t`).
    pub fn name(self) -> &'static str {
        match self {
            FsType::Tmpfs => "tmpfs",
            FsType::Ext4 => "ext4",
            FsType::Xfs => "xfs",
            FsType::Btrfs => "btrfs",
            FsType::Bdev => "bdev",
        }
    }

    /// Mount options accepted in `options = { ... }` for this type. The
    /// filesystem models read them; add one here when a model reads it.
    pub fn known_options(self) -> &'static [&'static str] {
        match self {
            // shmem_parse_one(): size=, nr_inodes=.
            FsType::Tmpfs => &["size", "nr_inodes"],
            // ext4 commit= (seconds); nr_wb_ctx as for every block fs;
            // size: the device mkfs.ext4 ran on (delalloc space accounting).
            FsType::Ext4 => &["commit", "nr_wb_ctx", "size"],
            // mkfs.xfs -d agcount=, agsize=, -l size= (logsize); the
            // allocsize=, inode64 and logbsize= mount options (xfs(5)).
            FsType::Xfs => &[
                "agcount",
                "agsize",
                "allocsize",
                "inode64",
                "logbsize",
                "logsize",
                "nr_wb_ctx",
            ],
            // btrfs commit= (seconds); subvolumes, preload_files (per
            // subvolume) and preload_size: files written beforehand (E2).
            FsType::Btrfs => &[
                "commit",
                "subvolumes",
                "preload_files",
                "preload_size",
                "nr_wb_ctx",
            ],
            // The device's capacity (the device model has none).
            FsType::Bdev => &["capacity"],
        }
    }
}

/// A mount option value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FsOption {
    /// `true`/`false`.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string (sizes stay strings here; the model parses them).
    Str(String),
}

impl FsOption {
    /// The integer, if it is one.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            FsOption::Int(i) => Some(*i),
            _ => None,
        }
    }
}

/// A `[[filesystem]]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilesystemConfig {
    /// Unique name.
    pub name: String,
    /// `type`.
    #[serde(rename = "type")]
    pub fs_type: FsType,
    /// The `[[device]]` it lives on (None for tmpfs).
    pub device: Option<String>,
    /// Absolute mount point (default `/mnt/NAME`).
    pub mountpoint: String,
    /// Mount/mkfs options.
    pub options: BTreeMap<String, FsOption>,
    /// Mounted when the run starts (default true).
    pub mounted: bool,
    /// Line of the `[[filesystem]]` header.
    #[serde(skip)]
    pub line: u32,
}

impl FilesystemConfig {
    /// An integer option.
    pub fn option_int(&self, key: &str) -> Option<i64> {
        self.options.get(key).and_then(FsOption::as_int)
    }
}

/// A `[[cgroup]]` (cgroup v2 directory under the root).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupConfig {
    /// Unique name.
    pub name: String,
    /// `memory.high`, bytes (None = "max").
    pub memory_high: Option<u64>,
    /// `memory.max`, bytes (None = "max").
    pub memory_max: Option<u64>,
    /// `cpuset.cpus` (None = all CPUs).
    pub cpus: Option<Vec<u32>>,
    /// Line of the `[[cgroup]]` header.
    #[serde(skip)]
    pub line: u32,
}

/// fio job text and where it came from, for `workload::fio::parse_text(text,
/// origin, line_offset)`: fio errors then name the right file and line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FioSource {
    /// The job file text.
    pub text: String,
    /// The file fio errors should name: the .fio path, or the scenario file
    /// for inline text.
    pub origin: String,
    /// Added to line numbers within `text`: 0 for a file, the scenario line
    /// just before the first line of inline text.
    pub line_offset: u32,
    /// The .fio file read, if `file = ...` was used.
    pub path: Option<PathBuf>,
}

/// A `[[job]]`: fio jobs to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobConfig {
    /// The job text.
    pub fio: FioSource,
    /// The filesystem the jobs' files live on.
    pub filesystem: Option<String>,
    /// The cgroup the jobs run in (None = root).
    pub cgroup: Option<String>,
    /// When the jobs start, ns of simulated time.
    pub start_ns: u64,
    /// Run only in these variants (None = all).
    pub only_variants: Option<Vec<String>>,
    /// Line of the `[[job]]` header.
    pub line: u32,
}

impl JobConfig {
    /// Whether this job runs in `variant`.
    pub fn runs_in(&self, variant: &str) -> bool {
        self.only_variants
            .as_ref()
            .is_none_or(|v| v.iter().any(|n| n == variant))
    }
}

/// `[measure]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MeasureConfig {
    /// Interval between time-series samples, ns (default 100 ms).
    pub sample_interval_ns: u64,
    /// Metrics to keep in results (None = all).
    pub metrics: Option<Vec<String>>,
    /// Time from the start during which nothing is recorded, ns (default 0).
    pub warmup_ns: u64,
    /// Keep one fio statistics entry per clone even beyond
    /// `PER_JOB_DETAIL_MAX` separate clones (default false: aggregate per
    /// job there, as fio's `group_reporting`); `--per-job` does the same.
    pub per_job: bool,
}

/// Default `[measure] sample_interval`: 100 ms.
pub const SAMPLE_INTERVAL_DEFAULT_NS: u64 = 100_000_000;

impl Default for MeasureConfig {
    fn default() -> MeasureConfig {
        MeasureConfig {
            sample_interval_ns: SAMPLE_INTERVAL_DEFAULT_NS,
            metrics: None,
            warmup_ns: 0,
            per_job: false,
        }
    }
}

impl MeasureConfig {
    /// Whether results keep `metric` (`[measure] metrics` lists names or
    /// prefixes ending in `.`/`*`, e.g. `"umount.*"`).
    pub fn keeps(&self, metric: &str) -> bool {
        self.metrics.as_ref().is_none_or(|list| {
            list.iter().any(|m| match m.strip_suffix('*') {
                Some(prefix) => metric.starts_with(prefix),
                None => m == metric,
            })
        })
    }
}

/// Reads and validates the scenario at `path`.
pub fn load(path: impl AsRef<Path>) -> Result<Scenario, ScenarioError> {
    let path = path.as_ref();
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
        origin: origin.clone(),
        line: 0,
        col: None,
        key: None,
        kind: ErrorKind::Io,
        message: format!("cannot read scenario: {e}"),
    })?;
    parse_str(&text, &origin)
}

/// Parses and validates scenario text; `origin` is the name errors give it
/// and, if it is a path, the directory `file = ...` job paths are relative to.
pub fn parse_str(text: &str, origin: &str) -> Result<Scenario, ScenarioError> {
    build::build(SourceMap::new(origin, text))
}

impl Scenario {
    /// The simulated length of one run: `quick_duration` under `--quick`,
    /// else `duration`, ns.
    pub fn run_duration_ns(&self, quick: bool) -> u64 {
        if quick {
            self.quick_duration_ns
        } else {
            self.duration_ns
        }
    }

    /// The origin (file) the scenario was read from.
    pub fn origin(&self) -> &str {
        self.source.origin()
    }

    /// Variant names in file order.
    pub fn variant_names(&self) -> Vec<&str> {
        self.variants.iter().map(|v| v.name.as_str()).collect()
    }

    /// A device by name.
    pub fn device(&self, name: &str) -> Option<&DeviceConfig> {
        self.devices.iter().find(|d| d.name == name)
    }

    /// A filesystem by name.
    pub fn filesystem(&self, name: &str) -> Option<&FilesystemConfig> {
        self.filesystems.iter().find(|f| f.name == name)
    }

    /// A cgroup by name.
    pub fn cgroup(&self, name: &str) -> Option<&CgroupConfig> {
        self.cgroups.iter().find(|c| c.name == name)
    }

    /// The jobs that run in `variant`.
    pub fn jobs_for<'a>(&'a self, variant: &'a str) -> impl Iterator<Item = &'a JobConfig> + 'a {
        self.jobs.iter().filter(move |j| j.runs_in(variant))
    }
}
