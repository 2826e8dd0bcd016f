//! A resolved fio job: globals applied, typed values with units in their names.
//!
//! Field defaults are fio's (`options.c` `.def` values, fio 3.x on Linux):
//! `rw=read`, `bs=4k`, `ioengine=psync`, `iodepth=1`, `numjobs=1`,
//! `nrfiles=1`, `loops=1`, `rwmixread=50`, `direct=0`, no rate limit, no
//! runtime limit. Instance naming follows fio's default `filename_format`
//! `$jobname.$jobnum.$filenum` (`init.c` `make_filename()`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::dist::{BlockSizes, RandomDistribution};
use super::{FioError, FioErrorKind};

/// fio's `rw=` / `readwrite=` I/O pattern (the subset wbsim models).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RwMode {
    /// `read`: sequential reads.
    Read,
    /// `write`: sequential writes.
    Write,
    /// `randread`: random reads.
    RandRead,
    /// `randwrite`: random writes.
    RandWrite,
    /// `rw` or `readwrite`: sequential mixed reads and writes.
    ReadWrite,
    /// `randrw`: random mixed reads and writes.
    RandRw,
    /// `trim`: sequential discards (BLKDISCARD; block devices only).
    Trim,
    /// `randtrim`: random discards.
    RandTrim,
}

impl RwMode {
    /// fio's spelling (the canonical one for `ReadWrite` is `rw`).
    pub fn fio_name(self) -> &'static str {
        match self {
            RwMode::Read => "read",
            RwMode::Write => "write",
            RwMode::RandRead => "randread",
            RwMode::RandWrite => "randwrite",
            RwMode::ReadWrite => "rw",
            RwMode::RandRw => "randrw",
            RwMode::Trim => "trim",
            RwMode::RandTrim => "randtrim",
        }
    }

    /// Parses fio's spelling.
    pub fn from_fio(s: &str) -> Option<RwMode> {
        // fio `parse.c` matches a `FIO_OPT_STR` value as a prefix of the
        // choices in `options.c` order, so `rw=r` is read and `rw=w` write.
        const ORDER: &[(&str, RwMode)] = &[
            ("read", RwMode::Read),
            ("write", RwMode::Write),
            ("trim", RwMode::Trim),
            ("randread", RwMode::RandRead),
            ("randwrite", RwMode::RandWrite),
            ("randtrim", RwMode::RandTrim),
            ("rw", RwMode::ReadWrite),
            ("readwrite", RwMode::ReadWrite),
            ("randrw", RwMode::RandRw),
        ];
        if s.is_empty() {
            return None;
        }
        ORDER
            .iter()
            .find(|(n, _)| *n == s)
            .or_else(|| ORDER.iter().find(|(n, _)| n.starts_with(s)))
            .map(|(_, m)| *m)
    }

    pub fn is_random(self) -> bool {
        matches!(
            self,
            RwMode::RandRead | RwMode::RandWrite | RwMode::RandRw | RwMode::RandTrim
        )
    }

    /// The job issues reads.
    pub fn reads(self) -> bool {
        matches!(
            self,
            RwMode::Read | RwMode::RandRead | RwMode::ReadWrite | RwMode::RandRw
        )
    }

    /// The job issues writes.
    pub fn writes(self) -> bool {
        matches!(
            self,
            RwMode::Write | RwMode::RandWrite | RwMode::ReadWrite | RwMode::RandRw
        )
    }

    /// A discard pattern (`trim`, `randtrim`).
    pub fn trims(self) -> bool {
        matches!(self, RwMode::Trim | RwMode::RandTrim)
    }

    /// Mixed reads and writes (split by `rwmixread`).
    pub fn is_mixed(self) -> bool {
        matches!(self, RwMode::ReadWrite | RwMode::RandRw)
    }
}

/// fio's `fallocate=` (filesetup.c `fallocate_file`): what fio does to a new
/// file of a write job before the job, besides `ftruncate` to its size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fallocate {
    /// `none` (or `0`): nothing; blocks are allocated at writeback.
    None,
    /// `native` (fio's default on Linux): `fallocate(fd, 0, 0, size)`.
    Native,
    /// `posix` (or `1`): `posix_fallocate`, which glibc turns into the same
    /// `fallocate(2)` call on Linux.
    Posix,
    /// `keep`: `fallocate` with FALLOC_FL_KEEP_SIZE (fio then sets the size
    /// with `ftruncate`, so the result is the same here).
    Keep,
    /// `truncate`: only `ftruncate` to the size.
    Truncate,
}

impl Fallocate {
    /// Parses fio's spelling.
    pub fn from_fio(s: &str) -> Option<Self> {
        Some(match s {
            "none" | "0" => Fallocate::None,
            "native" => Fallocate::Native,
            "posix" | "1" => Fallocate::Posix,
            "keep" => Fallocate::Keep,
            "truncate" => Fallocate::Truncate,
            _ => return None,
        })
    }

    /// Whether it allocates (unwritten) blocks.
    pub fn allocates(self) -> bool {
        matches!(self, Fallocate::Native | Fallocate::Posix | Fallocate::Keep)
    }
}

/// fio's `ioengine=` (the subset wbsim models).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum IoEngine {
    /// `psync`: pread(2)/pwrite(2). fio's default on Linux.
    Psync,
    /// `sync`: read(2)/write(2) with lseek(2).
    Sync,
    /// `pvsync2`: preadv2(2)/pwritev2(2), takes RWF_* flags (`uncached`).
    Pvsync2,
    /// `io_uring`: asynchronous, takes RWF_* flags (`uncached`).
    IoUring,
    /// `libaio`: Linux native AIO (asynchronous only for O_DIRECT in the kernel).
    Libaio,
    /// `mmap`: memcpy to and from a shared file mapping (`engines/mmap.c`).
    Mmap,
}

impl IoEngine {
    /// fio's spelling.
    pub fn fio_name(self) -> &'static str {
        match self {
            IoEngine::Psync => "psync",
            IoEngine::Sync => "sync",
            IoEngine::Pvsync2 => "pvsync2",
            IoEngine::IoUring => "io_uring",
            IoEngine::Libaio => "libaio",
            IoEngine::Mmap => "mmap",
        }
    }

    /// Parses fio's spelling.
    pub fn from_fio(s: &str) -> Option<IoEngine> {
        Some(match s {
            "psync" => IoEngine::Psync,
            "sync" => IoEngine::Sync,
            "pvsync2" => IoEngine::Pvsync2,
            "io_uring" => IoEngine::IoUring,
            "libaio" => IoEngine::Libaio,
            "mmap" => IoEngine::Mmap,
            _ => return None,
        })
    }

    /// A synchronous engine (fio's `FIO_SYNCIO`): one I/O in flight per job, so
    /// `iodepth` is effectively 1.
    pub fn is_sync(self) -> bool {
        matches!(
            self,
            IoEngine::Psync | IoEngine::Sync | IoEngine::Pvsync2 | IoEngine::Mmap
        )
    }

    /// The engine has fio's `uncached=` option (RWF_DONTCACHE): `io_uring`
    /// (`engines/io_uring.c`) and `pvsync2` (`engines/sync.c`).
    pub fn has_uncached_option(self) -> bool {
        matches!(self, IoEngine::IoUring | IoEngine::Pvsync2)
    }
}

/// Where an option of a resolved job was set (the last assignment wins).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OptionSource {
    /// Line number in the origin (line offset already applied).
    pub line: u32,
    /// `"global"` or the job section's name.
    pub section: String,
    /// The option name as written (may be an alias such as `readwrite`).
    pub key: String,
    /// The value as written; `None` for a bare flag.
    pub value: Option<String>,
}

/// One fully resolved fio job section: `[global]` options in force at the
/// section applied, then the section's own options.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FioJob {
    /// Job name: the section name, or `name=` if given.
    pub name: String,
    /// The section header's name.
    pub section: String,
    /// Origin used in errors (file path or scenario name).
    pub origin: String,
    /// Line of the `[section]` header.
    pub section_line: u32,
    /// `description=`.
    pub description: Option<String>,
    /// `rw=` / `readwrite=`.
    pub rw: RwMode,
    /// `rwmixread=` (or 100 - `rwmixwrite=`), percent of mixed I/O that reads.
    pub rwmixread_pct: u8,
    /// `bs=` for reads, bytes.
    pub bs_read_bytes: u64,
    /// `bs=` for writes, bytes.
    pub bs_write_bytes: u64,
    /// `size=`: total I/O per job instance, bytes.
    pub size_bytes: Option<u64>,
    /// `filesize=`: size of each file, bytes.
    pub filesize_bytes: Option<u64>,
    /// `nrfiles=`: files per job instance.
    pub nrfiles: u32,
    /// `numjobs=`: clones of this job.
    pub numjobs: u32,
    /// `directory=` (raw; fio allows a ':'-separated list).
    pub directory: Option<String>,
    /// `filename=` (raw; fio allows a ':'-separated list).
    pub filename: Option<String>,
    /// `ioengine=`.
    pub ioengine: IoEngine,
    /// `iodepth=`, clamped to 1 for synchronous engines (fio accepts a larger
    /// value but a sync engine never has more than one I/O in flight).
    pub iodepth: u32,
    /// `iodepth_batch_submit=` (alias `iodepth_batch`): io_us submitted per
    /// `io_uring_enter` (io_uring engine; 0 means `iodepth`). Default 1.
    pub iodepth_batch_submit: u32,
    /// `direct=` (or `buffered=0`): O_DIRECT.
    pub direct: bool,
    /// `uncached=` (io_uring/pvsync2 engine option): RWF_DONTCACHE.
    pub uncached: bool,
    /// `fallocate=`: how a new file of a write job is preallocated.
    pub fallocate: Fallocate,
    /// `overwrite=`: write the files out before the job, so its writes
    /// land on written blocks.
    pub overwrite: bool,
    /// `norandommap`: random offsets drawn independently (may repeat)
    /// instead of each block once per pass.
    pub norandommap: bool,
    /// `fsync=`: fsync(2) after every N writes; 0 = never.
    pub fsync_every_writes: u32,
    /// `end_fsync=`: fsync when the job's writes complete.
    pub end_fsync: bool,
    /// `fsync_on_close=`: fsync on every file close.
    pub fsync_on_close: bool,
    /// `unlink=`: unlink the job's files when it is done (fio's
    /// `td_io_unlink_file` at the job's end).
    pub unlink: bool,
    /// `runtime=`; `None` means no limit (also for `runtime=0`).
    pub runtime_ns: Option<u64>,
    /// `time_based`: keep looping over the workload until `runtime`.
    pub time_based: bool,
    /// `ramp_time=`: run this long before recording statistics.
    pub ramp_time_ns: u64,
    /// `startdelay=`: delay before the job starts.
    pub startdelay_ns: u64,
    /// `rate=` for reads, bytes/s per instance; `None` = unlimited.
    pub rate_read_bytes_per_s: Option<u64>,
    /// `rate=` for writes, bytes/s per instance; `None` = unlimited.
    pub rate_write_bytes_per_s: Option<u64>,
    /// `rate_iops=` for reads, I/Os per second per instance; turned into
    /// `rate_read_bytes_per_s` (x the mean block size) when the job is read.
    pub rate_iops_read: Option<u64>,
    /// `rate_iops=` for writes.
    pub rate_iops_write: Option<u64>,
    /// `bsrange=` / `bssplit=` for reads: a block size drawn per I/O
    /// (overrides `bs`).
    pub bs_read_choices: Option<BlockSizes>,
    /// `bsrange=` / `bssplit=` for writes.
    pub bs_write_choices: Option<BlockSizes>,
    /// `random_distribution=`: how random offsets are drawn.
    pub random_distribution: RandomDistribution,
    /// `group_reporting`.
    pub group_reporting: bool,
    /// `create_on_open=`.
    pub create_on_open: bool,
    /// `thread`: clones are threads rather than processes.
    pub thread: bool,
    /// `stonewall` / `wait_for_previous`: wait for earlier jobs, start a new group.
    pub stonewall: bool,
    /// `new_group`: start a new reporting group.
    pub new_group: bool,
    /// `loops=`: repeat the workload this many times.
    pub loops: u32,
    /// `write_bw_log=`: log prefix ("" = bare option: the job name).
    pub write_bw_log: Option<String>,
    /// `write_lat_log=`: log prefix ("" = the job name).
    pub write_lat_log: Option<String>,
    /// `write_iops_log=`: log prefix ("" = the job name).
    pub write_iops_log: Option<String>,
    /// `log_avg_msec=`: log entries averaged over this many ms; 0 = one
    /// entry per I/O (fio's default).
    pub log_avg_msec: u64,
    /// `rw=...:N`: bytes added to the offset after each sequential I/O
    /// (negative: backwards); 0 = contiguous.
    pub seq_skip_bytes: i64,
    /// `thinktime=`: idle time after each I/O, ns.
    pub thinktime_ns: u64,
    /// `number_ios=`: stop after this many I/Os per clone.
    pub number_ios: Option<u64>,
    /// `flow=`: weight of the job in its flow group (0 = no flow control).
    pub flow_weight: u64,
    /// `flow_id=`: the flow group.
    pub flow_id: u64,
    /// `flow_sleep=`: sleep when ahead of its flow share, ns.
    pub flow_sleep_ns: u64,
    /// `offset=`: start of the job's region in each file, bytes.
    pub offset_bytes: u64,
    /// `offset_increment=`: added to `offset` per clone (`jobnum`), bytes.
    pub offset_increment_bytes: u64,
    /// `io_size=` / `io_limit=`: bytes of I/O per clone (default: `size`).
    pub io_limit_bytes: Option<u64>,
    /// `blockalign=` / `ba=`: alignment of random offsets, bytes.
    pub blockalign_bytes: Option<u64>,
    /// `zonemode=strided`: the I/O goes in zones of `zonesize` bytes with
    /// `zoneskip` bytes skipped after each.
    pub zonemode_strided: bool,
    /// `zonesize=`, bytes (0: unset).
    pub zonesize_bytes: u64,
    /// `zoneskip=`, bytes.
    pub zoneskip_bytes: u64,
    /// `sync=`: O_SYNC / O_DSYNC writes.
    pub osync: bool,
    /// `wait_for=`: the job waits for this job to finish.
    pub wait_for: Option<String>,
    /// `exec_prerun=`: sysfs writes each clone makes before it starts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exec_prerun: Vec<BdiWrite>,
    /// `rate_process=poisson`: exponential gaps between rated I/Os.
    pub rate_poisson: bool,
    /// `fill_device=`: write until the device is full (no size limit).
    pub fill_device: bool,
    /// Reporting group (fio `init.c` `add_job()`: bumped by `stonewall` or
    /// `new_group` when the previous group has jobs).
    pub groupid: u32,
    /// Where each option in force was set, keyed by canonical option name.
    pub sources: BTreeMap<String, OptionSource>,
}

/// One clone of a job (`numjobs` expands into `jobnum` 0..numjobs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FioInstance {
    /// Clone number (fio's `$jobnum`), 0-based.
    pub jobnum: u32,
    /// `jobname.jobnum`, as fio names clones' files by default.
    pub label: String,
    /// Files this clone uses: `filename=` entries if given (shared by all
    /// clones), else fio's default `$jobname.$jobnum.$filenum`; prefixed with
    /// `directory/` when a directory is set.
    pub files: Vec<String>,
}

impl FioJob {
    /// A job with fio's defaults, before any option is applied.
    pub(crate) fn with_defaults(section: &str, origin: &str, section_line: u32) -> FioJob {
        FioJob {
            name: section.to_string(),
            section: section.to_string(),
            origin: origin.to_string(),
            section_line,
            description: None,
            rw: RwMode::Read,
            rwmixread_pct: 50,
            bs_read_bytes: 4096,
            bs_write_bytes: 4096,
            size_bytes: None,
            filesize_bytes: None,
            nrfiles: 1,
            numjobs: 1,
            directory: None,
            filename: None,
            ioengine: IoEngine::Psync,
            iodepth: 1,
            iodepth_batch_submit: 1,
            direct: false,
            uncached: false,
            fallocate: Fallocate::Native,
            overwrite: false,
            norandommap: false,
            fsync_every_writes: 0,
            end_fsync: false,
            fsync_on_close: false,
            unlink: false,
            runtime_ns: None,
            time_based: false,
            ramp_time_ns: 0,
            startdelay_ns: 0,
            rate_read_bytes_per_s: None,
            rate_write_bytes_per_s: None,
            rate_iops_read: None,
            rate_iops_write: None,
            bs_read_choices: None,
            bs_write_choices: None,
            random_distribution: RandomDistribution::Random,
            group_reporting: false,
            create_on_open: false,
            thread: false,
            stonewall: false,
            new_group: false,
            loops: 1,
            write_bw_log: None,
            write_lat_log: None,
            write_iops_log: None,
            log_avg_msec: 0,
            seq_skip_bytes: 0,
            thinktime_ns: 0,
            number_ios: None,
            flow_weight: 0,
            flow_id: 0,
            flow_sleep_ns: 0,
            offset_bytes: 0,
            offset_increment_bytes: 0,
            io_limit_bytes: None,
            blockalign_bytes: None,
            zonemode_strided: false,
            zonesize_bytes: 0,
            zoneskip_bytes: 0,
            osync: false,
            wait_for: None,
            exec_prerun: Vec::new(),
            rate_poisson: false,
            fill_device: false,
            groupid: 0,
            sources: BTreeMap::new(),
        }
    }

    /// Whether the job writes any fio log (bw, lat or iops).
    pub fn wants_logs(&self) -> bool {
        self.write_bw_log.is_some() || self.write_lat_log.is_some() || self.write_iops_log.is_some()
    }

    /// A log's file prefix: the option's value, or the job name when the
    /// option was given bare (fio `init.c` `setup_log()` default).
    pub fn log_prefix(&self, opt: &Option<String>) -> Option<String> {
        opt.as_ref().map(|p| {
            if p.is_empty() {
                self.name.clone()
            } else {
                p.clone()
            }
        })
    }

    /// The block size of the next I/O in direction `write`: drawn from
    /// `bssplit`/`bsrange` when set, else `bs`.
    pub fn pick_bs(&self, write: bool, rng: &mut impl rand::Rng) -> u64 {
        let (choices, bs) = if write {
            (&self.bs_write_choices, self.bs_write_bytes)
        } else {
            (&self.bs_read_choices, self.bs_read_bytes)
        };
        choices.as_ref().map_or(bs, |c| c.pick(rng)).max(1)
    }

    /// The granularity of random offsets and of fio's random map: the
    /// smallest block size the job can issue in either direction (fio
    /// `init.c` uses `td_min_bs()` for the map), or `blockalign=` when set.
    pub fn random_unit(&self) -> u64 {
        let min_of = |c: &Option<BlockSizes>, bs: u64| match c {
            Some(BlockSizes::Range(lo, _)) => *lo,
            Some(BlockSizes::Split(l)) => l.iter().map(|(b, _)| *b).min().unwrap_or(bs),
            None => bs,
        };
        let r = if self.rw.reads() {
            min_of(&self.bs_read_choices, self.bs_read_bytes)
        } else {
            u64::MAX
        };
        let w = if self.rw.writes() {
            min_of(&self.bs_write_choices, self.bs_write_bytes)
        } else {
            u64::MAX
        };
        let unit = r.min(w).max(1);
        self.blockalign_bytes.map_or(unit, |a| a.max(1))
    }

    /// The mean block size in direction `write`.
    pub fn mean_bs(&self, write: bool) -> u64 {
        let (choices, bs) = if write {
            (&self.bs_write_choices, self.bs_write_bytes)
        } else {
            (&self.bs_read_choices, self.bs_read_bytes)
        };
        choices.as_ref().map_or(bs, BlockSizes::mean).max(1)
    }

    /// Line where `option` (canonical name) was set, if it was.
    pub fn line_of(&self, option: &str) -> Option<u32> {
        self.sources.get(option).map(|s| s.line)
    }

    /// A semantic error about `option` of this job, located at the line that
    /// set it (or the section header if it was left at its default). For use by
    /// later layers, e.g. "directory is on no simulated filesystem".
    pub fn error_at(&self, option: &str, message: impl Into<String>) -> FioError {
        FioError {
            origin: self.origin.clone(),
            line: self.line_of(option).unwrap_or(self.section_line),
            option: Some(option.to_string()),
            kind: FioErrorKind::Semantic,
            message: format!("job '{}': {}", self.name, message.into()),
        }
    }

    /// Bytes of I/O each instance does per loop: `io_size=` if set (unlimited
    /// with `fill_device`), else `size=`, else `filesize * nrfiles` (fio
    /// `filesetup.c` `setup_files()`).
    pub fn io_size_bytes(&self) -> u64 {
        if let Some(n) = self.io_limit_bytes {
            return n;
        }
        if self.fill_device {
            return u64::MAX;
        }
        match (self.size_bytes, self.filesize_bytes) {
            (Some(s), _) => s,
            (None, Some(f)) => f.saturating_mul(u64::from(self.nrfiles)),
            (None, None) => 0,
        }
    }

    /// Size of each file: `filesize=`, else `size / nrfiles`.
    pub fn file_size_bytes(&self) -> u64 {
        match (self.filesize_bytes, self.size_bytes) {
            (Some(f), _) => f,
            (None, Some(s)) => s / u64::from(self.nrfiles.max(1)),
            (None, None) => 0,
        }
    }

    /// The clones of this job, one per `numjobs`.
    pub fn instances(&self) -> Vec<FioInstance> {
        let dir_prefix = |f: &str| match &self.directory {
            Some(d) => format!("{}/{}", d.trim_end_matches('/'), f),
            None => f.to_string(),
        };
        (0..self.numjobs)
            .map(|jobnum| {
                let files = match &self.filename {
                    Some(list) => split_fio_list(list).iter().map(|f| dir_prefix(f)).collect(),
                    None => (0..self.nrfiles)
                        .map(|filenum| dir_prefix(&format!("{}.{}.{}", self.name, jobnum, filenum)))
                        .collect(),
                };
                FioInstance {
                    jobnum,
                    label: format!("{}.{}", self.name, jobnum),
                    files,
                }
            })
            .collect()
    }
}

/// Splits fio's ':'-separated list, honouring `\:` as an escaped colon.
pub fn split_fio_list(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&':') => {
                cur.push(':');
                chars.next();
            }
            ':' => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out.retain(|f| !f.is_empty());
    out
}

pub use crate::model::mm::backing_dev::BdiKnob;

/// One `echo VALUE > /sys/class/bdi/BDI/KNOB` of `exec_prerun=`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BdiWrite {
    /// The bdi's directory name: a scenario device's name.
    pub bdi: String,
    /// The file written.
    pub knob: BdiKnob,
    /// The number written.
    pub value: u64,
}
