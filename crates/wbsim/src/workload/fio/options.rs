//! The supported fio options: one explicit table, value parsing, and how each
//! option sets a [`FioJob`] field.
//!
//! Mirrors the entries of fio's `options.c` `fio_options[]` (and the engine
//! option `uncached` of `engines/io_uring.c` / `engines/sync.c`) for the
//! options wbsim models; types follow fio's: `FIO_OPT_BOOL` takes 0/1 and needs
//! a value, `FIO_OPT_STR_SET` may stand alone (bare key = 1), `FIO_OPT_INT`
//! goes through the size parser. Values with a read,write pair (`bs`, `rate`)
//! follow fio's `handle_option()`: `a` sets both, `a,b` read and write, `a,`
//! read only, `,b` write only, a third (trim) value is checked and ignored.
//! Anything not in [`OPTIONS`] is an error; fio's range forms (`bs=4k-8k`,
//! `startdelay=5-10`) and the `:N` modifier of random patterns are not
//! supported (`rw=read:-8k`, a sequential skip, is).

use super::dist::{BlockSizes, RandomDistribution};
use super::job::{BdiKnob, BdiWrite, Fallocate, FioJob, IoEngine, OptionSource, RwMode};
use super::units::{
    parse_bool, parse_int, parse_size, parse_time_secs_default_ns, SIZE_HINT, TIME_HINT,
};
use crate::model::mm::backing_dev::BdiSettings;

/// How an option's value is parsed and stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptKind {
    /// `rw=` pattern name.
    Rw,
    /// `ioengine=` name.
    Engine,
    /// `fallocate=` mode.
    Fallocate,
    /// Free string, must be non-empty.
    Str,
    /// A size in bytes (>= 1).
    Size,
    /// A read,write pair of sizes (`bs`); each >= 1.
    SizePair,
    /// A read,write pair of rates in bytes/s (`rate`); 0 = unlimited.
    RatePair,
    /// A time, default unit seconds.
    TimeSecs,
    /// An integer in `min..=max`.
    Int { min: u64, max: u64 },
    /// A boolean 0/1 that needs a value (`FIO_OPT_BOOL`).
    Bool,
    /// A flag that may stand alone (`FIO_OPT_STR_SET`); `key=N` sets N != 0.
    Flag,
    /// `bsrange=min-max[,min-max]`.
    BsRange,
    /// `bssplit=bs/pct:bs/pct[,...]`.
    BsSplit,
    /// `random_distribution=`.
    RandDist,
    /// A log file prefix (`write_bw_log=`...): a string, or bare (fio's
    /// default prefix, the job name).
    LogName,
    /// A time whose default unit is microseconds (`thinktime`, `flow_sleep`).
    TimeUs,
    /// A size in bytes that may be 0 (`offset`, `zoneskip`).
    SizeOrZero,
    /// A signed integer (`flow`; its magnitude is the weight).
    SignedInt,
    /// One of fixed words.
    Choice(&'static [&'static str]),
    /// A shell command line of `exec_prerun=`: only writes of numbers to
    /// `/sys/class/bdi/NAME/KNOB` are modelled.
    Exec,
}

/// One supported option.
#[derive(Debug)]
pub struct OptionSpec {
    /// Canonical fio name.
    pub name: &'static str,
    /// Other names fio accepts for it.
    pub aliases: &'static [&'static str],
    /// Value type.
    pub kind: OptKind,
    /// What it means here.
    pub help: &'static str,
}

const U32_MAX: u64 = u32::MAX as u64;
/// `FIO_OPT_INT` kinds used below.
const PERCENT: OptKind = OptKind::Int { min: 0, max: 100 };
const COUNT: OptKind = OptKind::Int {
    min: 1,
    max: U32_MAX,
};
const UINT: OptKind = OptKind::Int {
    min: 0,
    max: U32_MAX,
};

const fn opt(
    name: &'static str,
    aliases: &'static [&'static str],
    kind: OptKind,
    help: &'static str,
) -> OptionSpec {
    OptionSpec {
        name,
        aliases,
        kind,
        help,
    }
}

/// Every fio option wbsim accepts, with fio's aliases. Anything else is an error.
#[rustfmt::skip]
pub static OPTIONS: &[OptionSpec] = &[
    opt("name",            &[],                    OptKind::Str,      "job name override"),
    opt("description",     &[],                    OptKind::Str,      "free text"),
    opt("rw",              &["readwrite"],         OptKind::Rw,       "I/O pattern"),
    opt("rwmixread",       &[],                    PERCENT,           "percent reads in mixed I/O"),
    opt("rwmixwrite",      &[],                    PERCENT,           "percent writes in mixed I/O"),
    opt("bs",              &["blocksize"],         OptKind::SizePair, "block size, or read,write pair"),
    opt("size",            &[],                    OptKind::Size,     "total I/O per job"),
    opt("filesize",        &[],                    OptKind::Size,     "size of each file"),
    opt("nrfiles",         &["nr_files"],          COUNT,             "files per job"),
    opt("numjobs",         &[],                    COUNT,             "clones of the job"),
    opt("directory",       &[],                    OptKind::Str,      "directory of the job's files"),
    opt("filename",        &[],                    OptKind::Str,      "file name(s), ':'-separated"),
    opt("ioengine",        &[],                    OptKind::Engine,   "psync, sync, pvsync2, io_uring, libaio"),
    opt("iodepth",         &[],                    COUNT,             "I/Os in flight (1 for sync engines)"),
    opt("iodepth_batch_submit", &["iodepth_batch"], UINT,             "io_us per io_uring submit (0: iodepth)"),
    opt("direct",          &[],                    OptKind::Bool,     "O_DIRECT"),
    opt("buffered",        &[],                    OptKind::Bool,     "inverse of direct"),
    opt("uncached",        &[],                    UINT,              "RWF_DONTCACHE (io_uring, pvsync2)"),
    opt("fsync",           &[],                    UINT,              "fsync every N writes"),
    opt("end_fsync",       &[],                    OptKind::Bool,     "fsync at the end of the job"),
    opt("fsync_on_close",  &[],                    OptKind::Bool,     "fsync on file close"),
    opt("unlink",          &[],                    OptKind::Bool,     "unlink the job's files when it is done"),
    opt("runtime",         &["timeout"],           OptKind::TimeSecs, "run time limit"),
    opt("time_based",      &[],                    OptKind::Flag,     "run for runtime regardless of size"),
    opt("ramp_time",       &[],                    OptKind::TimeSecs, "warm-up before statistics"),
    opt("startdelay",      &[],                    OptKind::TimeSecs, "delay before start"),
    opt("rate",            &[],                    OptKind::RatePair, "bytes/s cap, or read,write pair"),
    opt("rate_iops",       &[],                    OptKind::RatePair, "I/Os per second cap (as rate = iops x block size), or read,write pair"),
    opt("bsrange",         &["blocksize_range"],   OptKind::BsRange,  "block size drawn per I/O in min-max (multiple of min)"),
    opt("bssplit",         &[],                    OptKind::BsSplit,  "block sizes drawn per I/O by weight: 4k/50:64k/50"),
    opt("random_distribution", &[],                OptKind::RandDist, "random offsets: random, zipf:T, pareto:H, normal:DEV, zoned:A/S:..."),
    opt("group_reporting", &[],                    OptKind::Flag,     "report a group as a whole"),
    opt("create_on_open",  &[],                    OptKind::Bool,     "create files at open time"),
    opt("thread",          &["threads"],           OptKind::Flag,     "clones are threads"),
    opt("stonewall",       &["wait_for_previous"], OptKind::Flag,     "wait for earlier jobs"),
    opt("new_group",       &[],                    OptKind::Flag,     "start a new reporting group"),
    opt("loops",           &[],                    COUNT,             "repeat the workload"),
    opt("fallocate",       &[],                    OptKind::Fallocate, "preallocation of new files: native, posix, keep, truncate, none"),
    opt("overwrite",       &[],                    OptKind::Bool,     "lay files out (write them) before the job"),
    opt("norandommap",     &[],                    OptKind::Flag,     "random offsets may repeat (no random map)"),
    opt("write_bw_log",    &[],                    OptKind::LogName,  "bandwidth log PREFIX_bw.N.log"),
    opt("write_lat_log",   &[],                    OptKind::LogName,  "latency logs PREFIX_{slat,clat,lat}.N.log"),
    opt("write_iops_log",  &[],                    OptKind::LogName,  "IOPS log PREFIX_iops.N.log"),
    opt("log_avg_msec",    &[],                    UINT,              "average log entries over this many ms (0: one per I/O)"),
    opt("thinktime",       &[],                    OptKind::TimeUs,   "idle time after each I/O (default unit us)"),
    opt("number_ios",      &[],                    UINT,              "stop after this many I/Os"),
    opt("flow",            &[],                    OptKind::SignedInt, "weight in token-based flow control between jobs"),
    opt("flow_id",         &[],                    UINT,              "flow control group"),
    opt("flow_sleep",      &[],                    OptKind::TimeUs,   "sleep when ahead of the flow share (default unit us)"),
    opt("offset",          &["fileoffset"],        OptKind::SizeOrZero, "start of the I/O region in each file"),
    opt("offset_increment", &[],                   OptKind::SizeOrZero, "added to offset for each clone"),
    opt("io_size",         &["io_limit"],          OptKind::Size,     "bytes of I/O per clone (default: size)"),
    opt("blockalign",      &["ba"],                OptKind::SizePair, "alignment of random offsets"),
    opt("zonemode",        &[],                    OptKind::Choice(&["none", "strided"]), "strided: I/O in zones of zonesize, skipping zoneskip"),
    opt("zonesize",        &[],                    OptKind::Size,     "zone length for zonemode=strided"),
    opt("zoneskip",        &[],                    OptKind::SizeOrZero, "bytes skipped after each zone"),
    opt("sync",            &[],                    OptKind::Choice(&["0", "1", "none", "sync", "dsync"]), "O_SYNC/O_DSYNC writes"),
    opt("wait_for",        &[],                    OptKind::Str,      "start after the named job has finished"),
    opt("exec_prerun",     &[],                    OptKind::Exec,     "before the job: echo N > /sys/class/bdi/DEV/KNOB (&&-separated)"),
    opt("rate_process",    &[],                    OptKind::Choice(&["linear", "poisson"]), "linear or Poisson (exponential) gaps between rated I/Os"),
    opt("fill_device",     &["fill_fs"],           OptKind::Bool,     "write until the device is full (no size limit)"),
];

/// fio options wbsim accepts but that change nothing the model represents:
/// (name, why). Each is reported once per job file ([`super::NotModelled`]),
/// on stderr and in the results. Anything neither here nor in [`OPTIONS`] is
/// an error.
#[rustfmt::skip]
pub static NOT_MODELLED: &[(&str, &str)] = &[
    ("gtod_reduce",            "fio's own clock calls; the model's clock is exact"),
    ("clocksource",            "fio's own clock source"),
    ("randrepeat",             "offsets come from the run's seeded RNG (--seed)"),
    ("randseed",               "offsets come from the run's seeded RNG (--seed)"),
    ("random_generator",       "offsets come from the run's seeded RNG (--seed)"),
    ("allrandrepeat",          "offsets come from the run's seeded RNG (--seed)"),
    ("buffer_pattern",         "data contents are not modelled"),
    ("refill_buffers",         "data contents are not modelled"),
    ("scramble_buffers",       "data contents are not modelled"),
    ("zero_buffers",           "data contents are not modelled"),
    ("buffer_compress_percentage", "data contents are not modelled"),
    ("buffer_compress_chunk",  "data contents are not modelled"),
    ("dedupe_percentage",      "data contents are not modelled"),
    ("verify",                 "data contents are not modelled (no verify reads)"),
    ("do_verify",              "data contents are not modelled (no verify reads)"),
    ("verify_pattern",         "data contents are not modelled (no verify reads)"),
    ("verify_interval",        "data contents are not modelled (no verify reads)"),
    ("verify_offset",          "data contents are not modelled (no verify reads)"),
    ("verify_fatal",           "data contents are not modelled (no verify reads)"),
    ("verify_dump",            "data contents are not modelled (no verify reads)"),
    ("verify_async",           "data contents are not modelled (no verify reads)"),
    ("verify_backlog",         "data contents are not modelled (no verify reads)"),
    ("verify_state_save",      "data contents are not modelled (no verify reads)"),
    ("disable_lat",            "statistics are always kept"),
    ("disable_clat",           "statistics are always kept"),
    ("disable_slat",           "statistics are always kept"),
    ("disable_bw_measurement", "statistics are always kept"),
    ("lat_percentiles",        "output selection; clat percentiles are always written"),
    ("clat_percentiles",       "output selection; clat percentiles are always written"),
    ("slat_percentiles",       "output selection; clat percentiles are always written"),
    ("percentile_list",        "output selection; fio's default percentiles are written"),
    ("unified_rw_reporting",   "output selection; reads and writes are reported apart"),
    ("stats",                  "output selection"),
    ("per_job_logs",           "logs are always per clone (PREFIX_bw.N.log), fio's default per_job_logs=1"),
    ("write_hist_log",         "not modelled yet: only bw, lat and iops logs are written"),
    ("log_hist_msec",          "not modelled yet: only bw, lat and iops logs are written"),
    ("log_offset",             "not modelled yet: logs have no offset column"),
    ("cpus_allowed",           "CPU placement of fio's threads is the scheduler model's"),
    ("cpus_allowed_policy",    "CPU placement of fio's threads is the scheduler model's"),
    ("cpumask",                "CPU placement of fio's threads is the scheduler model's"),
    ("nice",                   "task priorities are not modelled"),
    ("prio",                   "I/O priorities are not modelled"),
    ("prioclass",              "I/O priorities are not modelled"),
    ("ioscheduler",            "the block layer model has no I/O scheduler choice"),
    ("invalidate",             "files a job reads start uncached as after invalidate=1"),
    ("iomem",                  "I/O buffer memory is not modelled"),
    ("mem",                    "I/O buffer memory is not modelled"),
    ("iomem_align",            "I/O buffer memory is not modelled"),
    ("hugepage-size",          "I/O buffer memory is not modelled"),
    ("iodepth_batch_complete", "completion batching is not modelled"),
    ("iodepth_batch_complete_min", "completion batching is not modelled"),
    ("iodepth_batch_complete_max", "completion batching is not modelled"),
    ("iodepth_low",            "submission batching is not modelled (one I/O per submit)"),
    ("io_submit_mode",         "fio's submission thread (offload) is not modelled; inline is"),
    ("exitall",                "not modelled yet: other jobs run to their own end"),
    ("exitall_on_error",       "not modelled yet: other jobs run to their own end"),
    ("continue_on_error",      "not modelled yet: the first error ends the clone"),
    ("ratemin",                "not modelled yet: a job below its minimum rate is not stopped"),
    ("rate_iops_min",          "not modelled yet: a job below its minimum rate is not stopped"),
    ("steadystate",            "not modelled yet: jobs run their size/runtime"),
    ("ss",                     "not modelled yet: jobs run their size/runtime"),
    ("steadystate_duration",   "not modelled yet: jobs run their size/runtime"),
    ("ss_dur",                 "not modelled yet: jobs run their size/runtime"),
    ("steadystate_ramp_time",  "not modelled yet: jobs run their size/runtime"),
    ("ss_ramp",                "not modelled yet: jobs run their size/runtime"),
    ("fadvise_hint",           "posix_fadvise hints are not modelled"),
    ("kb_base",                "only kb_base=1024 (fio's default) units are parsed"),
    ("unit_base",              "output unit selection"),
    ("lockmem",                "memory locking is not modelled"),
    ("atomic",                 "untorn (RWF_ATOMIC) writes: the model never tears a write"),
    ("verify_write_sequence",  "data contents are not modelled (no verify reads)"),
    ("log_prio",               "I/O priorities are not modelled"),
    ("cmdprio",                "I/O priorities are not modelled"),
    ("cmdprio_class",          "I/O priorities are not modelled"),
    ("cmdprio_percentage",     "I/O priorities are not modelled"),
    ("cmdprio_bssplit",        "I/O priorities are not modelled"),
    ("dedupe_mode",            "data contents are not modelled"),
    ("dedupe_global",          "data contents are not modelled"),
    ("dedupe_working_set_percentage", "data contents are not modelled"),
    ("ignore_error",           "not modelled yet: the first error ends the clone"),
    ("error_dump",             "error output selection"),
    ("rwmixcycle",             "deprecated in fio, which ignores it"),
    ("iodepth_mode",           "not modelled yet: the job runs at its fixed iodepth"),
    ("latency_target",         "not modelled yet: the job runs at its fixed iodepth"),
    ("latency_window",         "not modelled yet: the job runs at its fixed iodepth"),
    ("latency_percentile",     "not modelled yet: the job runs at its fixed iodepth"),
    ("numa_cpu_nodes",         "the modelled machine has one NUMA node"),
    ("numa_mem_policy",        "the modelled machine has one NUMA node"),
    ("create_serialize",       "file layout order is not modelled"),
    ("exit_what",              "not modelled yet: other jobs run to their own end"),
];

/// The not-modelled entry for `key`, if it is one.
pub fn find_not_modelled(key: &str) -> Option<(&'static str, &'static str)> {
    NOT_MODELLED.iter().find(|(n, _)| *n == key).copied()
}

/// Finds an option by canonical name or alias (exact, case-sensitive as fio).
pub fn find_option(key: &str) -> Option<&'static OptionSpec> {
    OPTIONS
        .iter()
        .find(|o| o.name == key || o.aliases.contains(&key))
}

/// Canonical names, comma-separated (for error messages).
pub fn supported_list() -> String {
    OPTIONS
        .iter()
        .map(|o| o.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The closest supported name (Levenshtein distance <= 2), like fio's
/// `show_cmd_help()` "showing closest match".
pub fn closest_option(key: &str) -> Option<&'static str> {
    OPTIONS
        .iter()
        .flat_map(|o| std::iter::once(o.name).chain(o.aliases.iter().copied()))
        .map(|n| (levenshtein(key, n), n))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, n)| n)
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// A parsed option value.
#[derive(Clone, Debug, PartialEq)]
pub enum OptValue {
    /// The pattern and fio's `:N` offset modifier (bytes, may be negative).
    Rw(RwMode, i64),
    Engine(IoEngine),
    Fallocate(Fallocate),
    Str(String),
    U64(u64),
    /// Read and write halves; `None` leaves that direction unchanged.
    Pair(Option<u64>, Option<u64>),
    Bool(bool),
    Ns(u64),
    /// A signed integer.
    I64(i64),
    /// Read and write block size choices (`None`: unchanged).
    Sizes(Option<BlockSizes>, Option<BlockSizes>),
    Dist(RandomDistribution),
    /// `exec_prerun=`'s writes.
    BdiWrites(Vec<BdiWrite>),
}

/// `exec_prerun=`: commands separated by `&&` (the job-file reader cuts a
/// line at `;`, as fio does), each
/// `echo N > /sys/class/bdi/NAME/KNOB` with KNOB one of [`BdiKnob`]'s and N
/// a decimal integer, as the shell and sysfs take them. Anything else is an
/// error: wbsim runs no other command.
fn parse_bdi_writes(v: &str) -> Result<Vec<BdiWrite>, String> {
    const FORM: &str = "wbsim runs only `echo N > /sys/class/bdi/DEVICE/KNOB` \
                        (KNOB: strict_limit, max_bytes, min_ratio, max_ratio), \
                        separated by '&&'";
    let mut out = Vec::new();
    for cmd in v.split("&&") {
        let cmd = cmd.trim();
        if cmd.is_empty() {
            continue;
        }
        let bad = || format!("'{cmd}': {FORM}");
        let rest = cmd.strip_prefix("echo ").ok_or_else(bad)?;
        let (value, path) = rest.split_once('>').ok_or_else(bad)?;
        let value: u64 = value.trim().parse().map_err(|_| bad())?;
        let path = path.trim();
        let tail = path.strip_prefix("/sys/class/bdi/").ok_or_else(bad)?;
        let (bdi, knob) = tail.split_once('/').ok_or_else(bad)?;
        let knob = BdiKnob::from_sysfs(knob).ok_or_else(bad)?;
        if bdi.is_empty() || bdi.contains('/') {
            return Err(bad());
        }
        // The kernel's checks, on a scratch copy of the settings.
        BdiSettings::default()
            .sysfs_store(knob, value)
            .map_err(|e| format!("'{cmd}': {e}"))?;
        out.push(BdiWrite {
            bdi: bdi.to_string(),
            knob,
            value,
        });
    }
    if out.is_empty() {
        return Err(FORM.to_string());
    }
    Ok(out)
}

/// Parses `raw` (None for a bare key) for `spec`. The error is the reason,
/// ready to follow "bad value 'X' for 'opt': ".
pub fn parse_value(spec: &OptionSpec, raw: Option<&str>) -> Result<OptValue, String> {
    let Some(raw) = raw else {
        return match spec.kind {
            OptKind::Flag => Ok(OptValue::Bool(true)),
            OptKind::LogName => Ok(OptValue::Str(String::new())),
            _ => Err(String::new()),
        };
    };
    let v = raw.trim();
    match spec.kind {
        OptKind::Rw => {
            const RW_HINT: &str = "expected read, write, trim, randread, randwrite, randtrim, \
                                   rw, readwrite or randrw";
            let (mode, skip) = match v.split_once(':') {
                Some((m, n)) => (m.trim(), Some(n.trim())),
                None => (v, None),
            };
            let mode = RwMode::from_fio(mode).ok_or_else(|| RW_HINT.to_string())?;
            let skip = match skip {
                None => 0,
                Some(n) if mode.is_random() => {
                    return Err(format!(
                        "the ':{n}' modifier of a random pattern (a new offset every {n} \
                         I/Os) is not supported; {RW_HINT}"
                    ))
                }
                Some(n) => {
                    let (neg, mag) = match n.strip_prefix('-') {
                        Some(m) => (true, m),
                        None => (false, n),
                    };
                    let b = parse_size(mag).map_err(|e| format!("':{n}': {e}; {SIZE_HINT}"))?;
                    let b = i64::try_from(b).map_err(|_| format!("':{n}': too large"))?;
                    if neg {
                        -b
                    } else {
                        b
                    }
                }
            };
            Ok(OptValue::Rw(mode, skip))
        }
        OptKind::Engine => IoEngine::from_fio(v).map(OptValue::Engine).ok_or_else(|| {
            "wbsim models the ioengines psync, sync, pvsync2, io_uring and libaio".to_string()
        }),
        OptKind::Fallocate => Fallocate::from_fio(v)
            .map(OptValue::Fallocate)
            .ok_or_else(|| "expected native, posix, keep, truncate, none, 0 or 1".to_string()),
        OptKind::LogName => Ok(OptValue::Str(v.to_string())),
        OptKind::Exec => parse_bdi_writes(v).map(OptValue::BdiWrites),
        OptKind::Str => {
            if v.is_empty() {
                Err("expected a non-empty string".to_string())
            } else {
                Ok(OptValue::Str(v.to_string()))
            }
        }
        OptKind::Size => match parse_size(v) {
            Ok(0) => Err(format!("must be at least 1 byte; {SIZE_HINT}")),
            Ok(n) => Ok(OptValue::U64(n)),
            Err(e) => Err(format!("{e}; {SIZE_HINT}")),
        },
        OptKind::SizePair | OptKind::RatePair => parse_pair(v, spec.kind == OptKind::SizePair),
        OptKind::TimeSecs => parse_time_secs_default_ns(v)
            .map(OptValue::Ns)
            .map_err(|e| format!("{e}; {TIME_HINT}")),
        OptKind::Int { min, max } => parse_int(v, min, max)
            .map(OptValue::U64)
            .map_err(|e| format!("{e}; expected a whole number in {min}..={max}")),
        OptKind::Bool => parse_bool(v).map(OptValue::Bool),
        OptKind::Flag => parse_int(v, 0, U32_MAX)
            .map(|n| OptValue::Bool(n != 0))
            .map_err(|_| "expected 0 or 1, or the bare option name".to_string()),
        OptKind::BsRange | OptKind::BsSplit => parse_sizes(v, spec.kind == OptKind::BsSplit),
        OptKind::RandDist => RandomDistribution::from_fio(v).map(OptValue::Dist),
        OptKind::TimeUs => {
            if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
                v.parse::<u64>()
                    .ok()
                    .and_then(|n| n.checked_mul(1_000))
                    .map(OptValue::Ns)
                    .ok_or_else(|| "number too large".to_string())
            } else {
                parse_time_secs_default_ns(v)
                    .map(OptValue::Ns)
                    .map_err(|e| {
                        format!("{e}; expected a time like 2000 (microseconds), 10ms or 1s")
                    })
            }
        }
        OptKind::SizeOrZero => parse_size(v)
            .map(OptValue::U64)
            .map_err(|e| format!("{e}; {SIZE_HINT}")),
        OptKind::SignedInt => {
            let (neg, mag) = match v.strip_prefix('-') {
                Some(m) => (true, m),
                None => (false, v),
            };
            parse_int(mag, 0, U32_MAX)
                .map(|n| OptValue::I64(if neg { -(n as i64) } else { n as i64 }))
                .map_err(|e| format!("{e}; expected a whole number"))
        }
        OptKind::Choice(words) => {
            if v == "zbd" && spec.name == "zonemode" {
                return Err("zoned block devices (zonemode=zbd) are not modelled".to_string());
            }
            words
                .iter()
                .find(|w| **w == v)
                .map(|w| OptValue::Str((*w).to_string()))
                .ok_or_else(|| format!("expected one of {}", words.join(", ")))
        }
    }
}

/// `bsrange`/`bssplit` values, with fio's read,write[,trim] comma form.
fn parse_sizes(v: &str, split: bool) -> Result<OptValue, String> {
    let one = |s: &str| -> Result<Option<BlockSizes>, String> {
        let s = s.trim();
        if s.is_empty() {
            return Ok(None);
        }
        let size = |x: &str| -> Result<u64, String> {
            match parse_size(x.trim()) {
                Ok(0) => Err(format!("block size must be at least 1 byte; {SIZE_HINT}")),
                Ok(n) => Ok(n),
                Err(e) => Err(format!("{e}; {SIZE_HINT}")),
            }
        };
        if split {
            let mut list = Vec::new();
            for e in s.split(':').filter(|e| !e.is_empty()) {
                let (b, p) = e.split_once('/').unwrap_or((e, "0"));
                let p = parse_int(p.trim(), 0, 100)
                    .map_err(|_| format!("'{e}': expected SIZE/PERCENT like 4k/50"))?;
                list.push((size(b)?, u32::try_from(p).unwrap_or(100)));
            }
            let given: u32 = list.iter().map(|(_, p)| *p).sum();
            if given > 100 {
                return Err("percentages add up to more than 100".into());
            }
            // fio: entries without a percentage share what is left.
            let zero = list.iter().filter(|(_, p)| *p == 0).count() as u32;
            if let Some(share) = (100 - given).checked_div(zero) {
                let mut left = 100 - given - share * zero;
                for e in list.iter_mut().filter(|(_, p)| *p == 0) {
                    e.1 = share + u32::from(left > 0);
                    left = left.saturating_sub(1);
                }
            } else if given != 100 {
                return Err("percentages must add up to 100".into());
            }
            if list.is_empty() {
                return Err("expected SIZE/PERCENT entries like 4k/50:64k/50".into());
            }
            Ok(Some(BlockSizes::Split(list)))
        } else {
            let (lo, hi) = s
                .split_once('-')
                .ok_or_else(|| format!("'{s}': expected MIN-MAX like 4k-64k"))?;
            let (lo, hi) = (size(lo)?, size(hi)?);
            if hi < lo {
                return Err(format!("'{s}': max is below min"));
            }
            Ok(Some(BlockSizes::Range(lo, hi)))
        }
    };
    let parts: Vec<&str> = v.split(',').collect();
    if parts.len() > 3 {
        return Err("at most three comma-separated values (read,write,trim)".to_string());
    }
    let read = one(parts[0])?;
    if parts.len() == 1 {
        let r = read.ok_or_else(|| "empty value".to_string())?;
        return Ok(OptValue::Sizes(Some(r.clone()), Some(r)));
    }
    let write = one(parts[1])?;
    if let Some(t) = parts.get(2) {
        one(t)?;
    }
    Ok(OptValue::Sizes(read, write))
}

/// `a`, `a,b`, `a,`, `,b`, `a,b,c` (third = trim, checked and ignored).
fn parse_pair(v: &str, nonzero: bool) -> Result<OptValue, String> {
    let one = |s: &str| -> Result<Option<u64>, String> {
        let s = s.trim();
        if s.is_empty() {
            return Ok(None);
        }
        match parse_size(s) {
            Ok(0) if nonzero => Err(format!("must be at least 1 byte; {SIZE_HINT}")),
            Ok(n) => Ok(Some(n)),
            Err(e) => Err(format!(
                "{e}; {SIZE_HINT}, or a read,write pair like 4k,64k"
            )),
        }
    };
    let parts: Vec<&str> = v.split(',').collect();
    if parts.len() > 3 {
        return Err("at most three comma-separated values (read,write,trim)".to_string());
    }
    let read = one(parts[0])?;
    if parts.len() == 1 {
        let r = read.ok_or_else(|| format!("empty value; {SIZE_HINT}"))?;
        return Ok(OptValue::Pair(Some(r), Some(r)));
    }
    let write = one(parts[1])?;
    if let Some(trim) = parts.get(2) {
        one(trim)?;
    }
    if read.is_none() && write.is_none() {
        return Err(format!("empty value; {SIZE_HINT}"));
    }
    Ok(OptValue::Pair(read, write))
}

/// Applies one parsed assignment to a job and records its source.
pub fn apply(job: &mut FioJob, spec: &OptionSpec, value: &OptValue, src: &OptionSource) {
    use OptValue as V;
    let u32v = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    match (spec.name, value) {
        ("name", V::Str(s)) => job.name = s.clone(),
        ("description", V::Str(s)) => job.description = Some(s.clone()),
        ("rw", V::Rw(rw, skip)) => {
            job.rw = *rw;
            job.seq_skip_bytes = *skip;
        }
        ("rwmixread", V::U64(n)) => job.rwmixread_pct = *n as u8,
        ("rwmixwrite", V::U64(n)) => job.rwmixread_pct = 100 - *n as u8,
        ("bs", V::Pair(r, w)) => {
            job.bs_read_bytes = r.unwrap_or(job.bs_read_bytes);
            job.bs_write_bytes = w.unwrap_or(job.bs_write_bytes);
        }
        ("size", V::U64(n)) => job.size_bytes = Some(*n),
        ("filesize", V::U64(n)) => job.filesize_bytes = Some(*n),
        ("nrfiles", V::U64(n)) => job.nrfiles = u32v(*n),
        ("numjobs", V::U64(n)) => job.numjobs = u32v(*n),
        ("directory", V::Str(s)) => job.directory = Some(s.clone()),
        ("filename", V::Str(s)) => job.filename = Some(s.clone()),
        ("ioengine", V::Engine(e)) => job.ioengine = *e,
        ("fallocate", V::Fallocate(f)) => job.fallocate = *f,
        ("overwrite", V::Bool(b)) => job.overwrite = *b,
        ("norandommap", V::Bool(b)) => job.norandommap = *b,
        ("iodepth", V::U64(n)) => job.iodepth = u32v(*n),
        ("iodepth_batch_submit", V::U64(n)) => job.iodepth_batch_submit = u32v(*n),
        ("direct", V::Bool(b)) => job.direct = *b,
        ("buffered", V::Bool(b)) => job.direct = !*b,
        ("uncached", V::U64(n)) => job.uncached = *n != 0,
        ("fsync", V::U64(n)) => job.fsync_every_writes = u32v(*n),
        ("end_fsync", V::Bool(b)) => job.end_fsync = *b,
        ("fsync_on_close", V::Bool(b)) => job.fsync_on_close = *b,
        ("unlink", V::Bool(b)) => job.unlink = *b,
        ("runtime", V::Ns(ns)) => job.runtime_ns = (*ns > 0).then_some(*ns),
        ("time_based", V::Bool(b)) => job.time_based = *b,
        ("ramp_time", V::Ns(ns)) => job.ramp_time_ns = *ns,
        ("startdelay", V::Ns(ns)) => job.startdelay_ns = *ns,
        ("rate", V::Pair(r, w)) => {
            if let Some(r) = r {
                job.rate_read_bytes_per_s = (*r > 0).then_some(*r);
            }
            if let Some(w) = w {
                job.rate_write_bytes_per_s = (*w > 0).then_some(*w);
            }
        }
        ("rate_iops", V::Pair(r, w)) => {
            if let Some(r) = r {
                job.rate_iops_read = (*r > 0).then_some(*r);
            }
            if let Some(w) = w {
                job.rate_iops_write = (*w > 0).then_some(*w);
            }
        }
        ("bsrange" | "bssplit", V::Sizes(r, w)) => {
            if r.is_some() {
                job.bs_read_choices = r.clone();
            }
            if w.is_some() {
                job.bs_write_choices = w.clone();
            }
        }
        ("random_distribution", V::Dist(d)) => job.random_distribution = d.clone(),
        ("group_reporting", V::Bool(b)) => job.group_reporting = *b,
        ("create_on_open", V::Bool(b)) => job.create_on_open = *b,
        ("thread", V::Bool(b)) => job.thread = *b,
        ("stonewall", V::Bool(b)) => job.stonewall = *b,
        ("new_group", V::Bool(b)) => job.new_group = *b,
        ("loops", V::U64(n)) => job.loops = u32v(*n),
        ("write_bw_log", V::Str(s)) => job.write_bw_log = Some(s.clone()),
        ("write_lat_log", V::Str(s)) => job.write_lat_log = Some(s.clone()),
        ("write_iops_log", V::Str(s)) => job.write_iops_log = Some(s.clone()),
        ("log_avg_msec", V::U64(n)) => job.log_avg_msec = *n,
        ("thinktime", V::Ns(ns)) => job.thinktime_ns = *ns,
        ("number_ios", V::U64(n)) => job.number_ios = (*n > 0).then_some(*n),
        ("flow", V::I64(n)) => job.flow_weight = n.unsigned_abs(),
        ("flow_id", V::U64(n)) => job.flow_id = *n,
        ("flow_sleep", V::Ns(ns)) => job.flow_sleep_ns = *ns,
        ("offset", V::U64(n)) => job.offset_bytes = *n,
        ("offset_increment", V::U64(n)) => job.offset_increment_bytes = *n,
        ("io_size", V::U64(n)) => job.io_limit_bytes = Some(*n),
        ("blockalign", V::Pair(r, w)) => job.blockalign_bytes = r.max(w).or(job.blockalign_bytes),
        ("zonemode", V::Str(s)) => job.zonemode_strided = s == "strided",
        ("zonesize", V::U64(n)) => job.zonesize_bytes = *n,
        ("zoneskip", V::U64(n)) => job.zoneskip_bytes = *n,
        ("sync", V::Str(s)) => job.osync = !matches!(s.as_str(), "0" | "none"),
        ("wait_for", V::Str(s)) => job.wait_for = Some(s.clone()),
        ("exec_prerun", V::BdiWrites(w)) => job.exec_prerun = w.clone(),
        ("rate_process", V::Str(s)) => job.rate_poisson = s == "poisson",
        ("fill_device", V::Bool(b)) => job.fill_device = *b,
        // parse_value() produces the value type matching each kind above.
        _ => unreachable!("option '{}' got a value of the wrong type", spec.name),
    }
    job.sources.insert(spec.name.to_string(), src.clone());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_option_has_a_setter() {
        let src = OptionSource {
            line: 1,
            section: "j".into(),
            key: "k".into(),
            value: None,
        };
        for spec in OPTIONS {
            let sample = match spec.kind {
                OptKind::Rw => "randrw",
                OptKind::Engine => "io_uring",
                OptKind::Fallocate => "none",
                OptKind::Str => "x",
                OptKind::Size | OptKind::SizePair | OptKind::RatePair => "8k",
                OptKind::TimeSecs => "1s",
                OptKind::Int { .. } => "1",
                OptKind::Bool | OptKind::Flag => "1",
                OptKind::BsRange => "4k-8k",
                OptKind::BsSplit => "4k/50:8k/50",
                OptKind::RandDist => "zipf:1.2",
                OptKind::LogName => "pfx",
                OptKind::TimeUs => "100",
                OptKind::SizeOrZero => "0",
                OptKind::SignedInt => "-2",
                OptKind::Choice(w) => w[w.len() - 1],
                OptKind::Exec => "echo 1 > /sys/class/bdi/loop0/strict_limit",
            };
            let v = parse_value(spec, Some(sample)).expect(spec.name);
            let mut job = FioJob::with_defaults("j", "t", 1);
            apply(&mut job, spec, &v, &src);
            assert_eq!(job.line_of(spec.name), Some(1), "{}", spec.name);
        }
    }

    #[test]
    fn closest_match() {
        assert_eq!(closest_option("iodeph"), Some("iodepth"));
        assert_eq!(closest_option("ioengin"), Some("ioengine"));
        assert_eq!(closest_option("iodepth_batch_complete"), None);
    }
}
