//! The user-space view of one modelled machine: mounted filesystems by name
//! and mount point, open files by path, cgroups by name, and what the workload
//! records (step latencies, per-job I/O statistics). fio jobs and actors run
//! against it; the experiment layer reads it back into metrics.
//!
//! Not kernel code: this is the part of a test harness that knows paths and
//! names. Path lookup is by longest mount-point prefix (no dentry cache, no
//! directories: a path names a file directly).

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

/// Per fio job (or clone, without group_reporting) I/O statistics.
pub struct JobStats {
    /// Job name (fio's `jobname`).
    pub name: String,
    /// fio reporting group.
    pub groupid: u32,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub read_ios: u64,
    pub write_ios: u64,
    /// Completion latency of reads / writes, ns.
    pub read_clat: Histogram<u64>,
    pub write_clat: Histogram<u64>,
    /// Submission latency of reads / writes (fio's slat: io_u prepared to
    /// the submit call returning), ns; empty for the sync engines.
    pub read_slat: Histogram<u64>,
    pub write_slat: Histogram<u64>,
    /// Total latency of reads / writes (fio's lat: slat + clat), ns.
    pub read_lat: Histogram<u64>,
    pub write_lat: Histogram<u64>,
    /// fsync latencies, ns.
    pub sync_lat: Histogram<u64>,
    /// When the job began measuring (after startdelay and ramp_time), ns.
    pub start_ns: Option<Time>,
    /// When its last clone finished, ns.
    pub end_ns: Option<Time>,
    /// Clones still running.
    pub running: u32,
    /// Peak dirty and cached pages of its own files while it ran, pages.
    pub peak_dirty_pages: u64,
    pub peak_cached_pages: u64,
    /// Dirty and cached pages of its own files at its first sample, pages.
    pub start_dirty_pages: Option<u64>,
    pub start_cached_pages: Option<u64>,
    /// First error (errno name), if the job failed (fio's `error`).
    pub error: Option<String>,
    /// The files its clones opened (once each): what its per-job page and
    /// tracepoint counts are attributed by.
    pub files: Vec<File>,
}

impl JobStats {
    /// Empty statistics for job `name`.
    pub fn new(name: &str, groupid: u32) -> JobStats {
        let h = || Histogram::<u64>::new(3).expect("hdrhistogram: 3 significant digits is valid");
        JobStats {
            name: name.to_string(),
            groupid,
            read_bytes: 0,
            write_bytes: 0,
            read_ios: 0,
            write_ios: 0,
            read_clat: h(),
            write_clat: h(),
            read_slat: h(),
            write_slat: h(),
            read_lat: h(),
            write_lat: h(),
            sync_lat: h(),
            start_ns: None,
            end_ns: None,
            running: 0,
            peak_dirty_pages: 0,
            peak_cached_pages: 0,
            start_dirty_pages: None,
            start_cached_pages: None,
            error: None,
            files: Vec::new(),
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
        let fs = self
            .fs_of_path(path)
            .ok_or_else(|| format!("{path}: on no filesystem of the scenario"))?;
        let sb = fs
            .sb
            .borrow()
            .clone()
            .ok_or_else(|| format!("{path}: filesystem '{}' is not mounted", fs.name))?;
        if let Some(f) = self.files.borrow().get(path) {
            if Rc::ptr_eq(&f.sb, &sb) {
                return Ok(f.clone());
            }
        }
        // The directory inside the filesystem (XFS places files by it).
        let rel = path
            .strip_prefix(fs.mountpoint.trim_end_matches('/'))
            .unwrap_or(path)
            .trim_start_matches('/');
        let dir = rel.rsplit_once('/').map_or("", |(d, _)| d);
        let f = create_file_in(&self.m, &sb, dir);
        self.files.borrow_mut().insert(path.to_string(), f.clone());
        Ok(f)
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
        *self
            .counters
            .borrow_mut()
            .entry(metric.to_string())
            .or_insert(0) += n;
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
