//! The user-space view of one modelled machine: mounted filesystems by name
//! and mount point, open files by path, cgroups by name, and what the workload
//! records (step latencies, per-job I/O statistics). fio jobs and actors run
//! against it; the experiment layer reads it back into metrics.
//!
//! Not kernel code: this is the part of a test harness that knows paths and
//! names. Path lookup is by longest mount-point prefix (no dentry cache, no
//! directories: a path names a file directly).

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use hdrhistogram::Histogram;
use sim::Time;

use crate::model::fs::read_write::{create_file_in, File};
use crate::model::fs::super_::SuperBlock;
use crate::model::kernel::sched::CgroupId;
use crate::model::machine::Machine;

/// One `[[filesystem]]` as the workload sees it.
pub struct FsEntry {
    /// Scenario name.
    pub name: String,
    /// Absolute mount point.
    pub mountpoint: String,
    /// The live superblock, None while unmounted.
    pub sb: RefCell<Option<Rc<SuperBlock>>>,
}

/// Values kept exactly before a [`LatHist`] switches to an HDR histogram.
pub const LAT_FEW_MAX: usize = 64;

/// A latency histogram that costs nothing until used: empty, then up to
/// [`LAT_FEW_MAX`] values kept exactly, then an HDR histogram (3
/// significant digits, auto-resizing; 16 KiB at first, about 170 KiB once
/// it holds values up to a second). The HDR histogram of a set of values
/// does not depend on the order they were recorded in, so the statistics
/// are the same as if it had been dense from the first value. This is what
/// lets 100,000 fio clones keep separate statistics when each does a few
/// I/Os; a clone doing many I/Os still costs a full histogram per latency
/// kind it records.
#[derive(Clone, Debug, Default)]
pub struct LatHist(LatRepr);

/// The representation of a [`LatHist`].
#[derive(Clone, Debug, Default)]
enum LatRepr {
    /// No value yet.
    #[default]
    Empty,
    /// Fewer than [`LAT_FEW_MAX`] values, exactly.
    Few(Vec<u64>),
    /// An HDR histogram.
    Dense(Box<Histogram<u64>>),
}

/// A new empty auto-resizing HDR histogram with 3 significant digits.
fn new_histogram() -> Histogram<u64> {
    Histogram::<u64>::new(3).expect("hdrhistogram: 3 significant digits is valid")
}

impl LatHist {
    /// Records one value, ns.
    pub fn record(&mut self, v: u64) {
        match &mut self.0 {
            LatRepr::Empty => self.0 = LatRepr::Few(vec![v]),
            LatRepr::Few(vals) if vals.len() + 1 < LAT_FEW_MAX => vals.push(v),
            LatRepr::Few(vals) => {
                let mut h = new_histogram();
                for &x in vals.iter() {
                    hist_record(&mut h, x);
                }
                hist_record(&mut h, v);
                self.0 = LatRepr::Dense(Box::new(h));
            }
            LatRepr::Dense(h) => hist_record(h, v),
        }
    }

    /// Values recorded.
    pub fn len(&self) -> u64 {
        match &self.0 {
            LatRepr::Empty => 0,
            LatRepr::Few(v) => v.len() as u64,
            LatRepr::Dense(h) => h.len(),
        }
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values as an HDR histogram (built on demand while few).
    pub fn histogram(&self) -> Cow<'_, Histogram<u64>> {
        match &self.0 {
            LatRepr::Dense(h) => Cow::Borrowed(h),
            LatRepr::Empty => Cow::Owned(new_histogram()),
            LatRepr::Few(vals) => {
                let mut h = new_histogram();
                for &x in vals {
                    hist_record(&mut h, x);
                }
                Cow::Owned(h)
            }
        }
    }
}

/// Dirty and cached pages of a set (a job's own files, or the machine)
/// while a job ran, pages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageFigures {
    /// At the first observation.
    pub start_dirty: Option<u64>,
    pub start_cached: Option<u64>,
    /// The largest observed.
    pub peak_dirty: u64,
    pub peak_cached: u64,
}

impl PageFigures {
    /// One observation of `dirty` and `cached` pages.
    pub fn observe(&mut self, dirty: u64, cached: u64) {
        self.start_dirty.get_or_insert(dirty);
        self.start_cached.get_or_insert(cached);
        self.peak_dirty = self.peak_dirty.max(dirty);
        self.peak_cached = self.peak_cached.max(cached);
    }
}

/// Per fio job (or clone, without group_reporting and below the
/// per-job detail limit) I/O statistics. Readers use the accessors
/// ([`JobStats::clat`], [`JobStats::slat`], [`JobStats::lat`],
/// [`JobStats::bytes`], [`JobStats::ios`], [`JobStats::runtime_ns`]).
pub struct JobStats {
    /// Name of the entry: the job's name, `NAME.N` for clone N of a job
    /// with `numjobs` > 1 without `group_reporting` (metric names use it).
    pub name: String,
    /// fio's `jobname`: the job's name (clones share it, as in fio's output).
    pub jobname: String,
    /// fio's 1-based thread numbers of the clones in this entry.
    pub threads: Vec<u32>,
    /// The job's `iodepth` (1 for the sync engines).
    pub iodepth: u32,
    /// Bandwidth windows, depth maps, CPU time and log samples.
    pub samples: crate::workload::fio::iolog::JobSamples,
    /// fio reporting group.
    pub groupid: u32,
    /// Clones folded into this entry (1 for a clone's own entry).
    pub clones: u32,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub read_ios: u64,
    pub write_ios: u64,
    /// Completion latency of reads / writes, ns.
    pub read_clat: LatHist,
    pub write_clat: LatHist,
    /// Submission latency of reads / writes (fio's slat: io_u prepared to
    /// the submit call returning), ns; empty for the sync engines.
    pub read_slat: LatHist,
    pub write_slat: LatHist,
    /// Total latency of reads / writes (fio's lat: slat + clat), ns,
    /// recorded only with a slat: for the sync engines lat is clat
    /// ([`JobStats::lat`]).
    pub read_lat: LatHist,
    pub write_lat: LatHist,
    /// fsync latencies, ns.
    pub sync_lat: LatHist,
    /// The closing fsyncs alone (`end_fsync`, `fsync_on_close`), ns.
    pub end_fsync: LatHist,
    /// When the job began measuring (after startdelay and ramp_time), ns.
    pub start_ns: Option<Time>,
    /// When its last clone finished, ns.
    pub end_ns: Option<Time>,
    /// Clones still running.
    pub running: u32,
    /// Dirty and cached pages of its own files while it ran.
    pub file_pages: PageFigures,
    /// Machine-wide dirty (`NR_FILE_DIRTY`, /proc/meminfo `Dirty`) and file
    /// (`NR_FILE_PAGES`, `Cached`) pages while it ran: what `wbsim probe`
    /// reads from /proc/meminfo.
    pub machine_pages: PageFigures,
    /// First error (errno name), if the job failed (fio's `error`).
    pub error: Option<String>,
    /// The files its clones opened (once each): what its per-job page and
    /// tracepoint counts are attributed by.
    pub files: Vec<File>,
    /// The dirty-throttling tracepoints its clones fired (the sync engines'
    /// writers; not io_uring's).
    pub throttle: crate::model::mm::page_writeback::ThrottleTrace,
}

impl JobStats {
    /// Empty statistics for job `name`, folding `clones` clones.
    pub fn new(name: &str, groupid: u32, clones: u32) -> JobStats {
        JobStats {
            name: name.to_string(),
            jobname: name.to_string(),
            threads: Vec::new(),
            iodepth: 1,
            samples: crate::workload::fio::iolog::JobSamples::default(),
            groupid,
            clones,
            read_bytes: 0,
            write_bytes: 0,
            read_ios: 0,
            write_ios: 0,
            read_clat: LatHist::default(),
            write_clat: LatHist::default(),
            read_slat: LatHist::default(),
            write_slat: LatHist::default(),
            read_lat: LatHist::default(),
            write_lat: LatHist::default(),
            sync_lat: LatHist::default(),
            end_fsync: LatHist::default(),
            start_ns: None,
            end_ns: None,
            running: 0,
            file_pages: PageFigures::default(),
            machine_pages: PageFigures::default(),
            error: None,
            files: Vec::new(),
            throttle: Default::default(),
        }
    }

    /// Notes files a clone of the job opened (each inode once).
    pub fn note_files(&mut self, files: &[File]) {
        for f in files {
            if !self.files.iter().any(|g| Rc::ptr_eq(&g.inode, &f.inode)) {
                self.files.push(f.clone());
            }
        }
    }

    /// Completion latencies (fio's clat) of writes or reads, ns.
    pub fn clat(&self, write: bool) -> Cow<'_, Histogram<u64>> {
        if write {
            self.write_clat.histogram()
        } else {
            self.read_clat.histogram()
        }
    }

    /// Submission latencies (fio's slat) of writes or reads, ns; empty for
    /// the sync engines.
    pub fn slat(&self, write: bool) -> Cow<'_, Histogram<u64>> {
        if write {
            self.write_slat.histogram()
        } else {
            self.read_slat.histogram()
        }
    }

    /// Total latencies (fio's lat = slat + clat) of writes or reads, ns:
    /// the clat for the sync engines, which have no slat.
    pub fn lat(&self, write: bool) -> Cow<'_, Histogram<u64>> {
        let lat = if write {
            &self.write_lat
        } else {
            &self.read_lat
        };
        if lat.is_empty() {
            self.clat(write)
        } else {
            lat.histogram()
        }
    }

    /// fsync latencies, ns.
    pub fn sync(&self) -> Cow<'_, Histogram<u64>> {
        self.sync_lat.histogram()
    }

    /// Bytes written or read.
    pub fn bytes(&self, write: bool) -> u64 {
        if write {
            self.write_bytes
        } else {
            self.read_bytes
        }
    }

    /// I/Os written or read.
    pub fn ios(&self, write: bool) -> u64 {
        if write {
            self.write_ios
        } else {
            self.read_ios
        }
    }

    /// How long the job measured, ns: from its first clone's start (after
    /// ramp_time) to its last clone's end, or to `now` while running.
    pub fn runtime_ns(&self, now: Time) -> Time {
        let start = self.start_ns.unwrap_or(now).min(now);
        let end = self.end_ns.unwrap_or(now).max(start);
        end - start
    }
}

/// Everything the workload shares within one run.
pub struct World {
    pub m: Rc<Machine>,
    /// Filesystems in scenario order.
    pub filesystems: Vec<FsEntry>,
    /// Open files by absolute path.
    files: RefCell<BTreeMap<String, File>>,
    /// Cgroups by name (those of the scenario and those actors made).
    pub cgroups: RefCell<BTreeMap<String, CgroupId>>,
    /// Step latencies and outcomes to record: (metric, unit, value).
    pub records: RefCell<Vec<(String, &'static str, u64)>>,
    /// Recorded sync steps on a timeline: (metric, start, elapsed ns).
    pub timeline: RefCell<Vec<(String, Time, u64)>>,
    /// Counters: (metric, n), e.g. `reuse.ebusy`.
    pub counters: RefCell<BTreeMap<String, u64>>,
    /// fio jobs' statistics, in start order.
    pub jobs: RefCell<Vec<JobStats>>,
    /// Workload tasks (fio clones, finite actors) still running.
    pub active: Cell<u64>,
    /// An actor asked to end the run (`end_run_after`).
    pub end_requested: Cell<bool>,
    /// Errors that should fail the run (bad path, unsupported operation).
    pub errors: RefCell<Vec<String>>,
}

impl World {
    /// A world over `m` with `filesystems` (name, mount point, superblock).
    pub fn new(m: Rc<Machine>, filesystems: Vec<FsEntry>) -> Rc<World> {
        Rc::new(World {
            m,
            filesystems,
            files: RefCell::new(BTreeMap::new()),
            cgroups: RefCell::new(BTreeMap::new()),
            records: RefCell::new(Vec::new()),
            timeline: RefCell::new(Vec::new()),
            counters: RefCell::new(BTreeMap::new()),
            jobs: RefCell::new(Vec::new()),
            active: Cell::new(0),
            end_requested: Cell::new(false),
            errors: RefCell::new(Vec::new()),
        })
    }

    /// The filesystem named `name`.
    pub fn fs(&self, name: &str) -> Option<&FsEntry> {
        self.filesystems.iter().find(|f| f.name == name)
    }

    /// The filesystem whose mount point is the longest prefix of `path`.
    pub fn fs_of_path(&self, path: &str) -> Option<&FsEntry> {
        self.filesystems
            .iter()
            .filter(|f| {
                path.strip_prefix(f.mountpoint.trim_end_matches('/'))
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
            })
            .max_by_key(|f| f.mountpoint.len())
    }

    /// Opens `path` (creating it with `O_CREAT`), on the filesystem mounted
    /// there now. Files of an unmounted or remounted filesystem are forgotten.
    pub fn open(&self, path: &str) -> Result<File, String> {
        let (sb, rel) = self.mounted_at(path)?;
        if let Some(f) = self.files.borrow().get(path) {
            if Rc::ptr_eq(&f.sb, &sb) {
                return Ok(f.clone());
            }
        }
        // The directory inside the filesystem (XFS places files by it).
        let dir = rel.rsplit_once('/').map_or("", |(d, _)| d);
        let f = create_file_in(&self.m, &sb, dir);
        self.files.borrow_mut().insert(path.to_string(), f.clone());
        Ok(f)
    }

    /// `mkdir -p PATH` on the filesystem mounted there now. A path on no
    /// mounted filesystem is left alone: opening a file there reports it.
    pub fn mkdir_p(&self, path: &str) {
        if let Ok((sb, rel)) = self.mounted_at(path) {
            let rel = rel.trim_end_matches('/');
            if !rel.is_empty() {
                sb.fs.mkdir(&self.m, &sb, rel);
            }
        }
    }

    /// The superblock mounted where `path` lies, and the path inside that
    /// filesystem (without a leading '/').
    fn mounted_at<'p>(&self, path: &'p str) -> Result<(Rc<SuperBlock>, &'p str), String> {
        let fs = self
            .fs_of_path(path)
            .ok_or_else(|| format!("{path}: on no filesystem of the scenario"))?;
        let sb = fs
            .sb
            .borrow()
            .clone()
            .ok_or_else(|| format!("{path}: filesystem '{}' is not mounted", fs.name))?;
        let rel = path
            .strip_prefix(fs.mountpoint.trim_end_matches('/'))
            .unwrap_or(path)
            .trim_start_matches('/');
        Ok((sb, rel))
    }

    /// Forgets the path of `f` (after it was unlinked): the next open of
    /// that path creates a new file.
    pub fn forget_file(&self, f: &File) {
        self.files
            .borrow_mut()
            .retain(|_, g| !Rc::ptr_eq(&g.inode, &f.inode));
    }

    /// Forgets every open file of superblock `sb` (after umount).
    pub fn forget_files_of(&self, sb: &Rc<SuperBlock>) {
        self.files
            .borrow_mut()
            .retain(|_, f| !Rc::ptr_eq(&f.sb, sb));
    }

    /// Records a value under `metric`.
    pub fn record(&self, metric: &str, unit: &'static str, value: u64) {
        self.records
            .borrow_mut()
            .push((metric.to_string(), unit, value));
    }

    /// Adds to a counter.
    pub fn count(&self, metric: &str, n: u64) {
        let mut counters = self.counters.borrow_mut();
        // Per I/O on some paths: allocate the name only the first time.
        match counters.get_mut(metric) {
            Some(c) => *c += n,
            None => {
                counters.insert(metric.to_string(), n);
            }
        }
    }

    /// Notes an error that fails the run.
    pub fn error(&self, e: String) {
        self.errors.borrow_mut().push(e);
    }

    /// Marks a workload task started / finished.
    pub fn task_started(&self) {
        self.active.set(self.active.get() + 1);
    }

    /// See [`World::task_started`].
    pub fn task_finished(&self) {
        self.active.set(self.active.get().saturating_sub(1));
    }
}

/// Records `v` into an auto-resizing histogram (growing it as needed;
/// `saturating_record` alone would clamp to the current top).
pub fn hist_record(h: &mut Histogram<u64>, v: u64) {
    if h.record(v).is_err() {
        h.saturating_record(v);
    }
}
