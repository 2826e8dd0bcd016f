//! Runs fio jobs on the modelled kernel: what fio's `backend.c` `thread_main()`
//! and `do_io()` do for each clone of a job, with the sync engines
//! (psync/sync/pvsync2: one I/O at a time) and the async ones (io_uring, libaio:
//! `iodepth` I/Os in flight, each a lane issuing the next I/O when its last
//! one completes).
//!
//! Before any clone: the jobs' `directory=` directories exist, made in job
//! order (`mkdir -p`) when the job file starts. fio itself refuses a
//! `directory=` that does not exist ("is not a directory", fio 3.33), so
//! the script that runs it has made them first, before fio creates any
//! file; on XFS that order decides the inode numbers (directories and
//! files take the next inodes of their AG), and so the writeback context
//! `i_ino % nr_wb_ctx` picks.
//!
//! Per clone: wait `startdelay` (and, with `stonewall`, for every earlier job of
//! the file; a job after a stonewall job starts with it), open its files (created on first use), then issue `bs`-sized
//! reads/writes: sequential ones round-robin over the files (fio's default
//! `file_service_type=roundrobin`), each file from offset 0, wrapping at
//! `filesize`; random ones over `filesize` in `bs` steps from the clone's own
//! random substream, each block once per pass through fio's random map
//! (`norandommap` turns it off: uniform draws that may repeat). It stops after `size` bytes x `loops`, at
//! `runtime` (`time_based` keeps looping until then), or when the run ends.
//! `fsync=N` calls fsync(2) after every N writes, `end_fsync`/`fsync_on_close`
//! once per file at the end. `rate` paces issue (linearly, or with
//! exponential gaps for `rate_process=poisson`); `ramp_time` delays
//! statistics. Each clone works in its region (`offset` + `jobnum` x
//! `offset_increment`, `size` long, or the rest of the file when the job
//! has no size); sequential offsets follow `rw=...:N` skips and
//! `zonemode=strided`; `thinktime` idles after each I/O, `number_ios` ends
//! the clone, `sync=1` ends each write with a data-integrity fsync,
//! `wait_for` delays the start, `flow` shares issue between jobs as fio's
//! `flow.c` does. Trim patterns end the clone with ENOTTY on a regular file
//! (fio's BLKDISCARD) and are an error on a block device (not modelled).
//! The `mmap` engine runs as buffered reads and writes.
//!
//! The io_uring engine (fio's `engines/io_uring.c` driven by `do_io`) runs
//! one submitting task per clone with a ring of `iodepth` entries
//! ([`crate::model::io_uring::rw::IoRing`]): it prepares io_us and submits
//! them (`iodepth_batch_submit`, default 1: one `io_uring_enter` per io_u;
//! N: N io_us per `io_uring_enter`, 0: `iodepth`), and
//! only when `iodepth` are in flight (or nothing is left to issue) reaps:
//! waits for at least `iodepth_batch_complete_min` (default 1) completions
//! and takes up to `iodepth_batch_complete_max` (default `iodepth`). The
//! kernel issues each buffered write inline with `IOCB_NOWAIT` inside the
//! submit call; an `-EAGAIN` punts it to io-wq (hashed by inode, so punted
//! writes to one file run one at a time). fio's latencies: slat = prepared
//! to the submit call returning (includes an inline write), clat = submit
//! returned to the completion reaped (includes the io-wq queue and the wait
//! in the CQ ring until fio reaps), lat = slat + clat. The sync engines
//! record clat only (fio reports slat for async engines only) and lat = clat.
//! libaio keeps the old model (one lane per `iodepth` slot, each a task
//! doing blocking I/O).
//!
//! Write jobs lay their files out first as fio does: `fallocate=native` (the
//! default) preallocates unwritten blocks, `overwrite=1` writes them out.
//!
//! Statistics: one entry per clone (`JOB.N`), or one per job (`JOB`) with
//! `group_reporting` or when the run has more than [`PER_JOB_DETAIL_MAX`]
//! separate clones and no per-job detail was asked for
//! ([`JobSet::aggregate`]). Clones share one `Rc<FioJob>`, and the steps a
//! clone takes once (file layout, the io_uring loop, the closing fsync) are
//! boxed so that each clone's task future stays small.
//!
//! Simplified: files to be read are treated as already laid out on disk (fio
//! would write them first); no `fadvise`/`invalidate` before a job; io_uring
//! reads are issued inline in blocking mode; fio's own per-io_u CPU is not
//! charged; `fsync=N` with io_uring is a blocking fsync(2) after the reap
//! that crosses N writes.

use std::cell::RefCell;
use std::rc::Rc;

use rand::Rng;
use sim::{SimRng, Time};

use super::fio::iolog::{IoSample, JobSamples};
use super::fio::job::{split_fio_list, BdiWrite};
use super::fio::{Fallocate, FioJob, IoEngine, RwMode};
use super::world::{JobStats, World};
use crate::model::errno::IoError;
use crate::model::fs::block_dev::{BDEV_FS_NAME, DEFAULT_BDEV_CAPACITY};
use crate::model::fs::read_write::{vfs_fallocate, vfs_read, vfs_unlink, vfs_write, File, IoFlags};
use crate::model::fs::sync::vfs_fsync;
use crate::model::io_uring::rw::{IoRing, Issue};
use crate::model::kernel::sched::CgroupId;
use crate::model::kernel::wait::WaitQueue;
use crate::model::machine::Machine;
use crate::model::mm::backing_dev::bdi_update_settings;
use crate::model::mm::page_writeback::TaskDirty;
use crate::model::mm::vmstat::PAGE_SIZE;

/// One `[[job]]` table's jobs, ready to start.
pub struct JobSet {
    /// The jobs of the file, in file order.
    pub jobs: Vec<FioJob>,
    /// Mount point relative file names are resolved under.
    pub root: String,
    /// Cgroup the clones run in.
    pub cgroup: CgroupId,
    /// Simulated time at which the file's jobs start, ns.
    pub start_ns: Time,
    /// Fold each job's clones into one statistics entry even without
    /// `group_reporting` (the run has more separate clones than
    /// [`PER_JOB_DETAIL_MAX`] and per-job detail was not asked for).
    pub aggregate: bool,
}

/// Separate per-clone statistics entries a run keeps by default: beyond
/// this many (counted over the run's jobs, a `group_reporting` job counting
/// one), every job's clones are folded into one entry per job, as fio's
/// `group_reporting` does, unless per-job detail is asked for (`wbsim run
/// --per-job`, `[measure] per_job = true`). Chosen so that results stay
/// readable (each entry adds a fio-shaped job object and about ten
/// metrics) and above the largest per-clone comparison a test makes (100
/// writers).
pub const PER_JOB_DETAIL_MAX: u64 = 128;

/// Statistics entries `jobs` keep with a clone of their own each: `numjobs`
/// per job without `group_reporting`, one per job with it.
pub fn separate_entries<'a>(jobs: impl IntoIterator<Item = &'a FioJob>) -> u64 {
    jobs.into_iter()
        .map(|j| {
            if j.group_reporting {
                1
            } else {
                u64::from(j.numjobs)
            }
        })
        .sum()
}

/// Starts every clone of every job of `set`; each registers its statistics
/// in `world.jobs` and counts as an active workload task until it ends.
pub fn spawn_job_set(world: &Rc<World>, set: JobSet) {
    let done_wq = WaitQueue::new("fio_stonewall");
    // Clones still running per job of this file (for stonewall).
    let running: Rc<RefCell<Vec<u32>>> =
        Rc::new(RefCell::new(set.jobs.iter().map(|j| j.numjobs).collect()));
    // fio starts jobs in file order and a `stonewall` job waits for every
    // job before it; the jobs after it (up to the next stonewall) start with
    // it. So each job waits for the jobs before the last stonewall at or
    // before it.
    let mut barrier = 0;
    // fio numbers its threads 1.. over every clone of the file, in order.
    let mut thread_base = 1u32;
    // fio `flow.c`: one shared counter per flow_id, and the total weight of
    // the clones in it.
    let mut flows: std::collections::BTreeMap<u64, Rc<FlowGroup>> = Default::default();
    for job in set.jobs.iter().filter(|j| j.flow_weight > 0) {
        let g = flows.entry(job.flow_id).or_insert_with(|| {
            Rc::new(FlowGroup {
                total_weight: Default::default(),
                counter: Default::default(),
                wq: WaitQueue::new("fio_flow"),
            })
        });
        g.total_weight
            .set(g.total_weight.get() + job.flow_weight * u64::from(job.numjobs));
    }
    // The jobs' directories, made by the first clone to start, before it
    // opens its files (all clones of the set start at the same instant).
    let dirs: Vec<String> = set
        .jobs
        .iter()
        .filter_map(|j| j.directory.as_deref())
        .flat_map(split_fio_list)
        .map(|d| resolve(&set.root, &d))
        .collect();
    let mkdirs: Rc<RefCell<Option<Vec<String>>>> = Rc::new(RefCell::new(Some(dirs)));
    for (ji, job) in set.jobs.iter().enumerate() {
        if job.stonewall {
            barrier = ji;
        }
        let wait_for = barrier;
        // wait_for=NAME: also wait for that (earlier) job's clones.
        let wait_job = job
            .wait_for
            .as_ref()
            .and_then(|n| set.jobs[..ji].iter().position(|j| &j.name == n));
        let flow = (job.flow_weight > 0).then(|| flows[&job.flow_id].clone());
        // group_reporting (or the run's aggregation) folds every clone into
        // one entry. fio names every clone's entry by the job's name; clones
        // of a job without group_reporting are told apart as NAME.N in
        // metric names.
        let threads: Vec<u32> = (0..job.numjobs).map(|n| thread_base + n).collect();
        thread_base += job.numjobs;
        let stats_ids: Vec<usize> = if job.group_reporting || set.aggregate {
            let id = push_stats(world, job, &job.name, job.numjobs, &threads);
            vec![id; job.numjobs as usize]
        } else if job.numjobs == 1 {
            vec![push_stats(world, job, &job.name, 1, &threads)]
        } else {
            (0..job.numjobs)
                .map(|n| {
                    let th = &threads[n as usize..=n as usize];
                    push_stats(world, job, &format!("{}.{n}", job.name), 1, th)
                })
                .collect()
        };
        // One copy of the job shared by its clones.
        let shared = Rc::new(job.clone());
        for inst in job.instances() {
            let paths: Vec<String> = inst.files.iter().map(|f| resolve(&set.root, f)).collect();
            let w = world.clone();
            let job = shared.clone();
            let running = running.clone();
            let done_wq = done_wq.clone();
            let stats_id = stats_ids[inst.jobnum as usize];
            let thread = threads[inst.jobnum as usize];
            let start = set.start_ns;
            let flow = flow.clone();
            let mkdirs = mkdirs.clone();
            world.task_started();
            let name = format!("fio:{}", inst.label);
            world.m.sched().spawn(&name, set.cgroup, 0, async move {
                let sim = w.m.sim().clone();
                sim.sleep_until(start.max(sim.now())).await;
                let dirs = mkdirs.borrow_mut().take();
                for d in dirs.iter().flatten() {
                    w.mkdir_p(d);
                }
                if wait_for > 0 || wait_job.is_some() {
                    let r = running.clone();
                    done_wq
                        .wait_event(&sim, move || {
                            let r = r.borrow();
                            r[..wait_for].iter().all(|&n| n == 0)
                                && wait_job.is_none_or(|k| r[k] == 0)
                        })
                        .await;
                }
                run_clone(&w, &job, inst.jobnum, thread, &paths, stats_id, flow).await;
                running.borrow_mut()[ji] -= 1;
                done_wq.wake_up_all();
                w.task_finished();
            });
        }
    }
}

/// Registers the statistics entry `name` of `job` for `clones` clones with
/// fio thread numbers `threads`.
fn push_stats(world: &World, job: &FioJob, name: &str, clones: u32, threads: &[u32]) -> usize {
    let mut jobs = world.jobs.borrow_mut();
    let mut s = JobStats::new(name, job.groupid, clones);
    s.jobname = job.name.clone();
    s.threads = threads.to_vec();
    s.iodepth = if job.ioengine.is_sync() {
        1
    } else {
        job.iodepth.max(1)
    };
    s.samples = JobSamples::new(job.wants_logs().then_some(job.log_avg_msec));
    s.running = clones;
    jobs.push(s);
    jobs.len() - 1
}

/// An absolute path for fio file name `f` under mount point `root`.
fn resolve(root: &str, f: &str) -> String {
    if f.starts_with('/') {
        f.to_string()
    } else {
        format!("{}/{}", root.trim_end_matches('/'), f)
    }
}

/// fio's `struct fio_flow` (`flow.c`): the clones of one `flow_id` share a
/// counter of I/Os; a clone whose share of it exceeds its share of the
/// total weight waits (`flow_sleep`, or until the others catch up).
pub struct FlowGroup {
    /// Sum of the `flow=` weights of the group's clones.
    total_weight: std::cell::Cell<u64>,
    /// I/Os issued by the whole group.
    counter: std::cell::Cell<u64>,
    /// Woken when the group's counter moves.
    wq: WaitQueue,
}

impl FlowGroup {
    /// Whether a clone of weight `weight` that has issued `mine` I/Os is
    /// ahead of its share (fio `flow_threshold_exceeded()`).
    fn exceeded(&self, mine: u64, weight: u64) -> bool {
        let total = self.counter.get();
        total > 0 && (mine as f64 / total as f64) > (weight as f64 / self.total_weight.get() as f64)
    }
}

/// What the lanes of one clone share: the issue position and counters.
struct CloneState {
    files: Vec<File>,
    /// Length of the clone's region in each file, bytes.
    file_size: u64,
    /// Start of the region (`offset` + `jobnum` x `offset_increment`), bytes.
    region_start: u64,
    /// I/Os issued (for `number_ios` and flow control).
    ios: u64,
    /// Next issue time of a `rate_process=poisson` job, ns.
    poisson_due: Time,
    /// Next sequential offset per file.
    seq_pos: Vec<u64>,
    /// fio's random map per file (blocks already done in this pass).
    randmaps: Vec<Option<RandomMap>>,
    /// Next file for round-robin service.
    next_file: usize,
    /// Bytes issued so far, and the limit (None = time based).
    issued: u64,
    limit: Option<u64>,
    deadline: Option<Time>,
    writes_since_fsync: u32,
    rng: SimRng,
    /// When statistics start (after ramp_time), ns.
    measure_from: Time,
    started: Time,
    /// fio's thread number of the clone.
    thread: u32,
    /// I/Os in flight over the clone's lanes (fio's `cur_depth`).
    in_flight: u64,
    /// The errno that stopped the clone (fio's `error`), if any.
    error: Option<&'static str>,
}

impl CloneState {
    /// Counts one completed write; true when `fsync=every` asks for an
    /// fsync now (fio's `should_fsync()` after every `every` writes).
    fn fsync_due_after_write(&mut self, every: u32) -> bool {
        self.writes_since_fsync += 1;
        if self.writes_since_fsync < every {
            return false;
        }
        self.writes_since_fsync = 0;
        true
    }
}

/// `fsync()` of `f` (not a data-integrity `fdatasync`), its time recorded
/// as fio's sync latency of entry `stats_id` when `measured`.
async fn fsync_recorded(w: &World, f: &File, stats_id: usize, measured: bool) -> Time {
    let t0 = w.m.now();
    vfs_fsync(&w.m, &f.sb, &f.inode, false).await;
    let took = w.m.now() - t0;
    if measured {
        w.jobs.borrow_mut()[stats_id].sync_lat.record(took);
    }
    took
}

/// fio's random map (`lib/axmap.c`, used unless `norandommap`): a bit per
/// block of the file; a random block already done is replaced by the next
/// free one after it (`axmap_next_free`), so one pass over the file does
/// every block once; when every block is done the map is cleared.
struct RandomMap {
    bits: Vec<u64>,
    blocks: u64,
    done: u64,
}

impl RandomMap {
    fn new(blocks: u64) -> Self {
        RandomMap {
            bits: vec![0; blocks.div_ceil(64) as usize],
            blocks,
            done: 0,
        }
    }

    /// Marks and returns block `r`, or the first free block after it
    /// (wrapping).
    fn take_near(&mut self, r: u64) -> u64 {
        if self.done == self.blocks {
            self.bits.iter_mut().for_each(|w| *w = 0);
            self.done = 0;
        }
        let words = self.bits.len();
        let mut w = (r / 64) as usize;
        // Bits below r in its word count as taken for the first look.
        let mut mask = !0u64 << (r % 64);
        for _ in 0..=words {
            let free = !self.bits[w] & mask;
            if free != 0 {
                let b = w as u64 * 64 + u64::from(free.trailing_zeros());
                if b < self.blocks {
                    self.bits[w] |= 1 << (b % 64);
                    self.done += 1;
                    return b;
                }
            }
            w = (w + 1) % words;
            mask = !0;
        }
        unreachable!("random map: a free block exists when done < blocks")
    }
}

/// One I/O to issue.
struct Io {
    file: usize,
    pos: u64,
    len: u64,
    write: bool,
}

impl CloneState {
    fn next(&mut self, job: &FioJob, now: Time) -> Option<Io> {
        if self.error.is_some() || self.deadline.is_some_and(|d| now >= d) {
            return None;
        }
        if self.limit.is_some_and(|l| self.issued >= l) {
            return None;
        }
        if job.number_ios.is_some_and(|n| self.ios >= n) {
            return None;
        }
        self.ios += 1;
        let write = match job.rw {
            RwMode::Read | RwMode::RandRead | RwMode::Trim | RwMode::RandTrim => false,
            RwMode::Write | RwMode::RandWrite => true,
            RwMode::ReadWrite | RwMode::RandRw => {
                self.rng.random_range(0..100u8) >= job.rwmixread_pct
            }
        };
        let bs = job.pick_bs(write, &mut self.rng);
        let file = self.next_file;
        self.next_file = (self.next_file + 1) % self.files.len();
        let pos = if job.rw.is_random() {
            let unit = job.random_unit();
            let slots = (self.file_size / unit).max(1);
            let r = job.random_distribution.pick(slots, &mut self.rng);
            if job.norandommap {
                r * unit
            } else {
                let map = self.randmaps[file].get_or_insert_with(|| RandomMap::new(slots));
                map.take_near(r) * unit
            }
        } else {
            let p = self.seq_pos[file];
            let p = if p + bs > self.file_size { 0 } else { p };
            self.seq_pos[file] = seq_next(job, p, bs, self.file_size);
            p
        };
        let len = bs.min(self.file_size.max(bs) - pos);
        self.issued += len;
        Some(Io {
            file,
            pos: self.region_start + pos,
            len,
            write,
        })
    }
}

/// The sequential offset after an I/O of `bs` at `p` (within a region of
/// `size` bytes): fio `io_u.c` `get_next_seq_offset()` adds the `rw=...:N`
/// skip (a negative one reads backwards, wrapping to the end of the region);
/// `zonemode=strided` jumps over `zoneskip` at the end of each zone.
fn seq_next(job: &FioJob, p: u64, bs: u64, size: u64) -> u64 {
    let next = i128::from(p) + i128::from(bs) + i128::from(job.seq_skip_bytes);
    let mut next = if next < 0 {
        size.saturating_sub(bs)
    } else {
        u64::try_from(next).unwrap_or(u64::MAX)
    };
    if job.zonemode_strided && job.zonesize_bytes > 0 {
        let period = job.zonesize_bytes + job.zoneskip_bytes;
        if next % period >= job.zonesize_bytes {
            next = (next / period + 1) * period;
        }
    }
    next
}

/// fio's `setup_files()` -> `extend_file()` for a write job's file smaller
/// than `size`, before the job's clock starts: fio recreates it, then
/// `fallocate_file()` per `fallocate=`: `native`/`posix` call
/// `fallocate(fd, 0, 0, size)` (unwritten blocks, size set), `keep` the same
/// with FALLOC_FL_KEEP_SIZE (size stays 0), `truncate` `ftruncate` to the
/// size, `none` nothing (the file grows with the writes). With
/// `overwrite=1` fio lays the file out (writes it), so the job's writes land
/// on written blocks; the layout writes are not simulated (blocks marked
/// written, nothing left cached, as after fio's default `invalidate=1`).
async fn layout_file(m: &Rc<Machine>, job: &FioJob, f: &File, size: u64) {
    if f.inode.st.borrow().i_size >= size {
        return;
    }
    let set_size = if job.overwrite {
        let before = f.inode.extents.borrow().block_pages();
        f.inode
            .extents
            .borrow_mut()
            .mark_written(0, size.div_ceil(PAGE_SIZE));
        let got = f.inode.extents.borrow().block_pages() - before;
        f.sb.fs.blocks_allocated(&f.sb, got);
        true
    } else {
        match job.fallocate {
            Fallocate::Native | Fallocate::Posix => {
                vfs_fallocate(m, f, 0, size, false).await;
                true
            }
            Fallocate::Keep => {
                vfs_fallocate(m, f, 0, size, true).await;
                false
            }
            Fallocate::Truncate => true,
            Fallocate::None => false,
        }
    };
    if set_size {
        let mut st = f.inode.st.borrow_mut();
        st.i_size = st.i_size.max(size);
    }
}

/// One `echo VALUE > /sys/class/bdi/NAME/KNOB` of `exec_prerun=`: the bdi
/// of the scenario device NAME (the newest, if it was mounted more than
/// once) gets the knob set.
fn bdi_sysfs_write(m: &Rc<Machine>, wr: &BdiWrite) -> Result<(), String> {
    let bdi = m
        .mm()
        .bdis()
        .iter()
        .rev()
        .find(|b| b.name == wr.bdi)
        .cloned()
        .ok_or_else(|| {
            let names: Vec<String> = m.mm().bdis().iter().map(|b| b.name.clone()).collect();
            format!(
                "no /sys/class/bdi/{} (bdis: {})",
                wr.bdi,
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            )
        })?;
    bdi_update_settings(m.mm(), &bdi, |s| s.sysfs_store(wr.knob, wr.value))
}

async fn run_clone(
    w: &Rc<World>,
    job: &Rc<FioJob>,
    jobnum: u32,
    thread: u32,
    paths: &[String],
    stats_id: usize,
    flow: Option<Rc<FlowGroup>>,
) {
    let m = &w.m;
    let sim = m.sim().clone();
    if job.startdelay_ns > 0 {
        sim.sleep(job.startdelay_ns).await;
    }
    for wr in &job.exec_prerun {
        if let Err(e) = bdi_sysfs_write(m, wr) {
            w.error(format!("fio job '{}': exec_prerun: {e}", job.name));
            finish_stats(w, stats_id, Some("EINVAL"), w.m.now());
            return;
        }
    }
    let mut files = Vec::with_capacity(paths.len());
    for p in paths {
        match w.open(p) {
            Ok(f) => files.push(f),
            Err(e) => {
                w.error(format!("fio job '{}': {e}", job.name));
                finish_stats(w, stats_id, Some("ENOENT"), w.m.now());
                return;
            }
        }
    }
    w.jobs.borrow_mut()[stats_id].note_files(&files);
    // Without size=, fio sizes the region by the file as it exists (a block
    // device: its capacity), less the offset.
    let region_start = job
        .offset_bytes
        .saturating_add(u64::from(jobnum).saturating_mul(job.offset_increment_bytes));
    let file_size = match job.file_size_bytes() {
        // fill_device: fio writes until ENOSPC; free space is not modelled,
        // so the region is the default device capacity.
        0 if job.fill_device => DEFAULT_BDEV_CAPACITY,
        0 => files
            .first()
            .map_or(0, |f| f.inode.st.borrow().i_size)
            .saturating_sub(region_start),
        n => n,
    };
    if file_size == 0 && region_start > 0 {
        let e = job.error_at(
            if job.offset_increment_bytes > 0 && jobnum > 0 {
                "offset_increment"
            } else {
                "offset"
            },
            format!(
                "clone {jobnum}: region start {region_start} bytes is at or beyond the end of \
                 its file ({} bytes)",
                files.first().map_or(0, |f| f.inode.st.borrow().i_size)
            ),
        );
        w.error(e.to_string());
        finish_stats(w, stats_id, Some("EINVAL"), w.m.now());
        return;
    }
    if job.rw.trims() {
        // fio `os_trim()` is the BLKDISCARD ioctl: a regular file answers
        // ENOTTY and the clone ends with that error, as under fio.
        if files.iter().any(|f| f.sb.fs.name() == BDEV_FS_NAME) {
            w.error(format!(
                "fio job '{}' ({}:{}): rw={}: discards to a block device are not modelled",
                job.name,
                job.origin,
                job.line_of("rw").unwrap_or(job.section_line),
                job.rw.fio_name()
            ));
        }
        finish_stats(w, stats_id, Some("ENOTTY"), w.m.now());
        return;
    }
    if files.is_empty() || file_size == 0 {
        w.error(format!(
            "fio job '{}' ({}:{}): no file or no size",
            job.name, job.origin, job.section_line
        ));
        finish_stats(w, stats_id, Some("EINVAL"), w.m.now());
        return;
    }
    if job.rw.writes() && !job.fill_device {
        for f in &files {
            // Boxed, like the other once-per-clone steps below: a clone's
            // task future is as large as its largest await, and 100,000
            // clones each pay for it.
            Box::pin(layout_file(
                m,
                job,
                f,
                region_start.saturating_add(file_size),
            ))
            .await;
        }
    }
    let now = sim.now();
    let limit = if job.time_based && job.runtime_ns.is_some() {
        None
    } else {
        // Without size=, the I/O per loop is the region the file gives.
        let per_loop = match job.io_size_bytes() {
            0 => file_size,
            n => n,
        };
        Some(per_loop.saturating_mul(u64::from(job.loops.max(1))))
    };
    let st = Rc::new(RefCell::new(CloneState {
        region_start,
        ios: 0,
        poisson_due: now,
        seq_pos: vec![0; files.len()],
        randmaps: (0..files.len()).map(|_| None).collect(),
        files,
        file_size,
        next_file: 0,
        issued: 0,
        limit,
        // fio: ramp_time is lead-in time that extends `runtime`.
        deadline: job.runtime_ns.map(|r| now + job.ramp_time_ns + r),
        writes_since_fsync: 0,
        rng: sim.rng(&format!("fio.{}.{jobnum}", job.name)),
        measure_from: now + job.ramp_time_ns,
        started: now,
        thread,
        in_flight: 0,
        error: None,
    }));
    {
        let mut jobs = w.jobs.borrow_mut();
        let s = &mut jobs[stats_id];
        let from = now + job.ramp_time_ns;
        s.start_ns = Some(s.start_ns.map_or(from, |t| t.min(from)));
        s.samples.start(from);
        // The machine's dirty and file pages as the job starts (what the
        // probe reads from /proc/meminfo before its writers begin); the
        // sampler adds the peaks while it runs.
        let vm = w.m.vm_counters();
        s.machine_pages.observe(vm.nr_file_dirty, vm.nr_file_pages);
    }
    if job.ioengine == IoEngine::IoUring {
        Box::pin(run_io_uring(w, job, jobnum, &st, stats_id, flow.as_deref())).await;
        Box::pin(finish_clone(w, job, &st, stats_id)).await;
        return;
    }
    let lanes = if job.ioengine.is_sync() {
        1
    } else {
        job.iodepth.max(1)
    };
    let mut handles = Vec::new();
    for lane in 0..lanes {
        let w2 = w.clone();
        let job2 = job.clone();
        let st2 = st.clone();
        let spawned = lane + 1 != lanes;
        let flow2 = flow.clone();
        let fut = async move {
            let t0 = w2.m.now();
            run_lane(&w2, &job2, &st2, stats_id, flow2.as_deref()).await;
            // The lane's own CPU time (the clone's task counts its own at
            // the end).
            if spawned {
                add_task_cpu(&w2, stats_id, t0);
            }
        };
        if lane + 1 == lanes {
            fut.await;
        } else {
            let name = format!("fio:{}.{jobnum}/lane{lane}", job.name);
            let cg = m.sched().current_cgroup();
            handles.push(m.sched().spawn(&name, cg, 0, fut));
        }
    }
    for h in handles {
        h.await;
    }
    Box::pin(finish_clone(w, job, &st, stats_id)).await;
}

/// The end of a clone: `end_fsync` / `fsync_on_close`, then its statistics.
async fn finish_clone(w: &Rc<World>, job: &FioJob, st: &Rc<RefCell<CloneState>>, stats_id: usize) {
    let m = &w.m;
    let sim = m.sim().clone();
    // The job's I/O time ends with its last write; the closing fsync is
    // reported in `sync` (fio's `end_fsync` latency), not in the bandwidth.
    let io_done = sim.now();
    if job.end_fsync || job.fsync_on_close {
        let files = st.borrow().files.clone();
        for f in &files {
            let took = fsync_recorded(w, f, stats_id, true).await;
            w.jobs.borrow_mut()[stats_id].end_fsync.record(took);
        }
    }
    let error = st.borrow().error;
    let started = st.borrow().started;
    add_task_cpu(w, stats_id, started);
    finish_stats(w, stats_id, error, io_done);
    // unlink=1: once the job's last clone is done (clones may share a
    // file), its files are closed and unlinked (not timed).
    let last = w.jobs.borrow()[stats_id].running == 0;
    if job.unlink && last {
        let files = w.jobs.borrow()[stats_id].files.clone();
        for f in files.iter().filter(|f| f.sb.fs.name() != BDEV_FS_NAME) {
            vfs_unlink(m, f).await;
            w.forget_file(f);
        }
    }
}

/// Adds the current task's CPU time, and its time since `since`, to the
/// job's (fio's `sys_cpu`: the model's CPU work is all kernel work).
fn add_task_cpu(w: &World, stats_id: usize, since: Time) {
    let m = &w.m;
    let ns = m.sched().task_stats(m.sim().current_task()).run_ns;
    let span = m.now().saturating_sub(since);
    w.jobs.borrow_mut()[stats_id].samples.add_task_cpu(ns, span);
}

fn finish_stats(w: &World, stats_id: usize, error: Option<&str>, now: Time) {
    let mut jobs = w.jobs.borrow_mut();
    let s = &mut jobs[stats_id];
    s.running = s.running.saturating_sub(1);
    s.end_ns = Some(s.end_ns.map_or(now, |t| t.max(now)));
    if s.error.is_none() {
        s.error = error.map(str::to_string);
    }
}

/// Waits until the clone may issue `io`: its rate (`rate=`, `rate_iops=`,
/// linear or `rate_process=poisson`) and its flow share (`flow=`).
async fn pace(
    w: &World,
    job: &FioJob,
    st: &Rc<RefCell<CloneState>>,
    io: &Io,
    flow: Option<&FlowGroup>,
) {
    let sim = w.m.sim().clone();
    let rate = if io.write {
        job.rate_write_bytes_per_s
    } else {
        job.rate_read_bytes_per_s
    };
    if let Some(r) = rate.filter(|&r| r > 0) {
        let due = {
            let mut s = st.borrow_mut();
            if job.rate_poisson {
                // fio `io_u.c` with RATE_PROCESS_POISSON: exponential gaps
                // whose mean is the linear gap of this I/O.
                let mean = io.len as f64 * 1e9 / r as f64;
                let u: f64 = s.rng.random_range(f64::MIN_POSITIVE..1.0);
                s.poisson_due += (-u.ln() * mean) as Time;
                s.poisson_due
            } else {
                s.started + (u128::from(s.issued) * 1_000_000_000 / u128::from(r)) as Time
            }
        };
        if due > sim.now() {
            sim.sleep_until(due).await;
        }
    }
    if let Some(g) = flow {
        let weight = job.flow_weight;
        loop {
            let mine = st.borrow().ios;
            if !g.exceeded(mine, weight) || w.end_requested.get() {
                break;
            }
            if job.flow_sleep_ns > 0 {
                sim.sleep(job.flow_sleep_ns).await;
            } else {
                let c = g.counter.get();
                let g2 = &g.counter;
                g.wq.wait_event(&sim, move || g2.get() != c).await;
            }
        }
        g.counter.set(g.counter.get() + 1);
        g.wq.wake_up_all();
    }
}

async fn run_lane(
    w: &Rc<World>,
    job: &FioJob,
    st: &Rc<RefCell<CloneState>>,
    stats_id: usize,
    flow: Option<&FlowGroup>,
) {
    let mut task = TaskDirty::default();
    lane_loop(w, job, st, stats_id, flow, &mut task).await;
    w.jobs.borrow_mut()[stats_id].throttle.merge(&task.trace);
}

/// [`run_lane`]'s I/O loop, with the clone's dirty-throttling state.
async fn lane_loop(
    w: &Rc<World>,
    job: &FioJob,
    st: &Rc<RefCell<CloneState>>,
    stats_id: usize,
    flow: Option<&FlowGroup>,
    task: &mut TaskDirty,
) {
    let m = &w.m;
    let sim = m.sim();
    let fl = IoFlags {
        direct: job.direct,
        dontcache: job.uncached,
        nowait: false,
    };
    loop {
        let Some(io) = st.borrow_mut().next(job, sim.now()) else {
            return;
        };
        pace(w, job, st, &io, flow).await;
        if w.end_requested.get() {
            return;
        }
        let f = st.borrow().files[io.file].clone();
        let depth = {
            let mut s = st.borrow_mut();
            s.in_flight += 1;
            s.in_flight
        };
        let t0 = sim.now();
        let res = if io.write {
            let r = vfs_write(m, task, &f, io.pos, io.len, fl).await;
            // sync=1: O_SYNC/O_DSYNC, `generic_write_sync()` ends the write
            // with a data-integrity fsync of the file.
            if r.is_ok() && job.osync {
                vfs_fsync(m, &f.sb, &f.inode, true).await;
            }
            r
        } else {
            vfs_read(m, &f, io.pos, io.len, fl).await
        };
        let now = sim.now();
        st.borrow_mut().in_flight -= 1;
        if let Err(e) = res {
            st.borrow_mut().error = Some(e.name());
            return;
        }
        let measured = now >= st.borrow().measure_from;
        if measured {
            let mut jobs = w.jobs.borrow_mut();
            let s = &mut jobs[stats_id];
            // One io_u per submit and per reap.
            s.samples.mark_depth(depth);
            s.samples.mark_submit(1);
            s.samples.mark_complete(1);
            let c = st.borrow();
            record_io(s, &c, now, &io, None, now - t0);
        }
        if job.thinktime_ns > 0 {
            sim.sleep(job.thinktime_ns).await;
        }
        if io.write
            && job.fsync_every_writes > 0
            && st
                .borrow_mut()
                .fsync_due_after_write(job.fsync_every_writes)
        {
            fsync_recorded(w, &f, stats_id, measured).await;
        }
    }
}

/// Counts one completed I/O `io` of clone `c` in `s` at `now`: its slat
/// (None for the sync engines, which have none) and clat, ns; lat = slat +
/// clat.
fn record_io(s: &mut JobStats, c: &CloneState, now: Time, io: &Io, slat: Option<u64>, clat: u64) {
    let (write, len) = (io.write, io.len);
    s.samples.record(
        now,
        write,
        len,
        IoSample {
            t_ns: now.saturating_sub(c.started),
            thread: c.thread,
            write,
            bs: len,
            slat_ns: slat,
            clat_ns: clat,
        },
    );
    let (bytes, ios, sh, ch, lh) = if write {
        (
            &mut s.write_bytes,
            &mut s.write_ios,
            &mut s.write_slat,
            &mut s.write_clat,
            &mut s.write_lat,
        )
    } else {
        (
            &mut s.read_bytes,
            &mut s.read_ios,
            &mut s.read_slat,
            &mut s.read_clat,
            &mut s.read_lat,
        )
    };
    *bytes += len;
    *ios += 1;
    ch.record(clat);
    // Without a slat, lat is clat (JobStats::lat): nothing more to keep.
    if let Some(sl) = slat {
        sh.record(sl);
        lh.record(sl + clat);
    }
}

/// An io_u in flight: what it is and fio's timestamps.
struct InFlight {
    /// The I/O.
    io: Io,
    /// `io_u->start_time`: prepared, ns.
    start: Time,
    /// `io_u->issue_time`: the submit call returned, ns.
    issue: Time,
}

/// fio's `do_io` with the io_uring engine for one clone: submit while fewer
/// than `iodepth` are in flight, reap when the ring is full or nothing is
/// left to submit (`wait_for_completions`).
async fn run_io_uring(
    w: &Rc<World>,
    job: &FioJob,
    jobnum: u32,
    st: &Rc<RefCell<CloneState>>,
    stats_id: usize,
    flow: Option<&FlowGroup>,
) {
    let m = &w.m;
    let sim = m.sim().clone();
    let depth = job.iodepth.max(1);
    let cg = m.sched().current_cgroup();
    let ring = IoRing::setup(m, cg, &format!("{}.{jobnum}", job.name), depth);
    let workers_gauge = format!("fio.{}.iowq_workers", job.name);
    let inline_count = format!("fio.{}.uring_inline", job.name);
    let punted_count = format!("fio.{}.uring_punted", job.name);
    let mut task = TaskDirty::default();
    let fl = IoFlags {
        direct: job.direct,
        dontcache: job.uncached,
        nowait: false,
    };
    // iodepth_batch_complete_min / _max: fio's defaults, 1 and iodepth.
    let (batch_min, batch_max) = (1usize, depth as usize);
    let mut inflight: std::collections::BTreeMap<u64, InFlight> = Default::default();
    let mut next_tag = 0u64;
    let mut more = true;
    // iodepth_batch_submit: io_us queued per io_uring_enter (0: iodepth).
    let batch = match job.iodepth_batch_submit {
        0 => depth,
        n => n.min(depth),
    } as usize;
    loop {
        while more && inflight.len() < depth as usize && !w.end_requested.get() {
            // Queue up to `batch` io_us (fio's td_io_queue: `start_time`
            // when each is prepared), then commit them with one
            // io_uring_enter, which issues the SQEs in order.
            let mut queued: Vec<(Io, Time)> = Vec::with_capacity(batch);
            while more
                && queued.len() < batch
                && inflight.len() + queued.len() < depth as usize
                && !w.end_requested.get()
            {
                let Some(io) = st.borrow_mut().next(job, sim.now()) else {
                    more = false;
                    break;
                };
                pace(w, job, st, &io, flow).await;
                queued.push((io, sim.now()));
            }
            if queued.is_empty() {
                break;
            }
            let mut sent = Vec::with_capacity(queued.len());
            for (io, start) in queued {
                let f = st.borrow().files[io.file].clone();
                let tag = next_tag;
                next_tag += 1;
                if io.write {
                    // How the kernel took it: `fio.JOB.uring_inline` (done by
                    // the nonblocking attempt) or `fio.JOB.uring_punted` (to
                    // io-wq after -EAGAIN); O_DIRECT counts neither.
                    match ring
                        .submit_write(&mut task, &f, io.pos, io.len, fl, tag)
                        .await
                    {
                        Issue::Inline => w.count(&inline_count, 1),
                        Issue::Punted => w.count(&punted_count, 1),
                        Issue::Async => {}
                    }
                } else {
                    // Reads: inline, blocking (see the module doc).
                    let res = vfs_read(m, &f, io.pos, io.len, fl).await;
                    ring_post_read(&ring, &res, tag, st);
                }
                sent.push((tag, io, start));
            }
            // `issue_time`: the commit returned (fio_ioring_queued).
            let issue = sim.now();
            for (tag, io, start) in sent {
                if sim.now() >= st.borrow().measure_from {
                    let mut jobs = w.jobs.borrow_mut();
                    let s = &mut jobs[stats_id].samples;
                    s.mark_depth(inflight.len() as u64 + 1);
                    s.mark_submit(1);
                }
                inflight.insert(tag, InFlight { io, start, issue });
                // Simplified: a batch's think times are taken after its
                // commit (fio thinks between queueing its io_us).
                if job.thinktime_ns > 0 {
                    sim.sleep(job.thinktime_ns).await;
                }
                if st.borrow().error.is_some() {
                    more = false;
                }
            }
        }
        if w.end_requested.get() {
            more = false;
        }
        if inflight.is_empty() {
            // io-wq threads the ring created (`iou-wrk-*`).
            let n = u64::from(ring.io_wq().nr_workers());
            if n > 0 {
                w.count(&workers_gauge, n);
            }
            return;
        }
        let min = batch_min.min(inflight.len());
        let cqes = ring.wait_cqes(min, batch_max).await;
        let now = sim.now();
        let measured = now >= st.borrow().measure_from;
        if measured {
            w.jobs.borrow_mut()[stats_id]
                .samples
                .mark_complete(cqes.len() as u64);
        }
        let mut fsync_due = None;
        for cqe in cqes {
            let Some(fl_io) = inflight.remove(&cqe.user_data) else {
                continue;
            };
            if let Err(e) = cqe.res {
                st.borrow_mut().error.get_or_insert(e.name());
                more = false;
                continue;
            }
            if measured {
                let mut jobs = w.jobs.borrow_mut();
                let c = st.borrow();
                record_io(
                    &mut jobs[stats_id],
                    &c,
                    now,
                    &fl_io.io,
                    Some(fl_io.issue - fl_io.start),
                    now - fl_io.issue,
                );
            }
            if fl_io.io.write
                && job.fsync_every_writes > 0
                && st
                    .borrow_mut()
                    .fsync_due_after_write(job.fsync_every_writes)
            {
                fsync_due = Some(fl_io.io.file);
            }
        }
        if let Some(fi) = fsync_due {
            let f = st.borrow().files[fi].clone();
            fsync_recorded(w, &f, stats_id, measured).await;
        }
    }
}

/// A read done inline on the io_uring path: an error stops the clone; the
/// completion is posted as a CQE so it is reaped with the writes.
fn ring_post_read(
    ring: &IoRing,
    res: &Result<(), IoError>,
    tag: u64,
    st: &Rc<RefCell<CloneState>>,
) {
    if let Err(e) = res {
        st.borrow_mut().error.get_or_insert(e.name());
    }
    ring.post_read(tag, *res);
}

#[cfg(test)]
mod tests {
    use super::RandomMap;

    #[test]
    fn random_map_does_every_block_once_per_pass() {
        let mut m = RandomMap::new(100);
        let mut seen = [false; 100];
        for i in 0..100u64 {
            let b = m.take_near((i * 37) % 100);
            assert!(!seen[b as usize], "block {b} twice");
            seen[b as usize] = true;
        }
        // Full: the next pass starts over.
        let b = m.take_near(5);
        assert_eq!(b, 5);
        // A taken block maps to the next free one, wrapping.
        let mut m = RandomMap::new(3);
        assert_eq!(m.take_near(2), 2);
        assert_eq!(m.take_near(2), 0);
        assert_eq!(m.take_near(2), 1);
    }
}
