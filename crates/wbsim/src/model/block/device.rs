//! A block device: request allocation with tags, split and back-merge of
//! bios, dispatch to a device that serves requests, cache flushes, and
//! completion through `bi_end_io`.
//!
//! Models (see the `block` module docs for the service model):
//! - `submit_bio()` / `blk_mq_submit_bio()` (`block/blk-core.c`,
//!   `block/blk-mq.c`): split to `max_sectors` and `max_segments`
//!   (`bio_split_to_limits()` -> `bio_split_rw_at()`,
//!   `block/blk-merge.c`), try a back merge (`blk_attempt_plug_merge()` /
//!   `blk_mq_sched_try_merge()` -> `bio_attempt_back_merge()`), else allocate
//!   a request, sleeping in `blk_mq_get_tag()` while every tag of its
//!   hardware queue is in use. A request belongs to the hardware queue of
//!   the CPU that submits it (`blk_mq_map_queues`; an NVMe device has one
//!   per CPU, a loop device one for all, [`DeviceProfile::nr_hw_queues`]).
//! - `blk_mq_dispatch_rq_list()` -> `queue_rq`: requests go to the device
//!   while it has a free internal slot, in FIFO order within a hardware
//!   queue, the queues taken in turn (NVMe round-robin arbitration).
//! - `blk_mq_end_request()` -> `bio_endio()`: a request's completion ends
//!   each of its bios; a split bio's `bi_end_io` runs when its last piece
//!   completes (`bio_chain()`). Freeing the tag wakes the oldest waiter.
//! - `blk_insert_flush()` (`block/blk-flush.c`): a `REQ_PREFLUSH` runs a
//!   cache flush before the data; `REQ_FUA` is native (adds `fua_latency_ns`).
//!   Without a write cache both flags are stripped (`submit_bio_noacct()`).
//! - `submit_bio_wait()` (`block/bio.c`).
//! - the exclusive holder (`bd_holder`, `bd_prepare_to_claim()`,
//!   `block/bdev.c`): a mounted filesystem claims its device, so another
//!   exclusive open (a second mount, mkfs, reconfiguring a loop device)
//!   gets EBUSY until the holder releases it.
//!
//! - `virtio_queue_rq()` (`drivers/block/virtio_blk.c`): a request takes
//!   one ring descriptor per segment plus two; when they do not fit the
//!   queue stops until a completion frees some ([`DeviceProfile::ring_slots`]).
//!
//! Simplified or left out: segments are counted from the bio's average run
//! size (physically adjacent runs of different folios are never merged into
//! one segment); no software queues (a bio may back-merge into a request
//! of another CPU's hardware queue, where blk-mq merges only within the
//! submitting CPU's software queue or plug); round-robin arbitration with
//! a burst of one command, and one ring ([`DeviceProfile::ring_slots`]) for
//! the whole device; no I/O scheduler (merges are back merges only, onto
//! requests not yet sent to the device); no plugging as such; no requeue,
//! errors, timeouts or polling. A
//! flush waits for every write submitted before it (not only completed ones)
//! and then costs `flush_latency_ns`; flushes are not merged with each other
//! (no flush sequence sharing). If the task in `submit_bio` is cancelled while
//! it waits for a tag, its bio is still served and `end_io` still runs.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::task::{Context, Poll, Waker};

use rand_distr::{Distribution, Gamma};
use sim::{Sim, SimRng, Time};

use super::bio::{rwbs, Bio, BioFlags, BioOp, SECTOR_BYTES};
use super::profile::DeviceProfile;
use super::stats::DeviceStats;
use super::wbt::{Wbt, WbtStats};
use crate::model::errno::Errno;
use crate::model::kernel::interval::IntervalSet;
use crate::model::kernel::sched::{CgroupId, Sched};

/// Granularity of a sparse backing store's allocation, bytes (the backing
/// filesystem's block: 4 KiB for the ext4 under the probe's images).
const BACKING_BLOCK: u64 = 4096;

/// A bio's completion callback, as `bio->bi_end_io`.
pub type EndIo = Box<dyn FnOnce()>;

/// The bio as the block layer tracks it until its last piece completes
/// (`__bi_remaining`, `bi_end_io`).
struct BioEnd {
    remaining: Cell<u64>,
    end_io: RefCell<Option<EndIo>>,
    /// The CPU its completion runs on
    /// ([`DeviceProfile::percpu_completion`]: the submitter's).
    cpu: Option<usize>,
}

/// Where a request is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RqState {
    /// Waiting for a tag (its submitter sleeps in `blk_mq_get_tag()`).
    WaitTag,
    /// Has a tag; its preflush waits for earlier writes and the flush.
    WaitFlush,
    /// Has a tag; waits for a free device slot (dispatch list).
    Queued,
    /// Sent to the device: latency phase.
    Latency,
    /// Sent to the device: moving data through the media pipe.
    Transfer,
}

/// `struct request`: a contiguous range of one operation, made of one or
/// more bios.
struct Request {
    op: BioOp,
    flags: BioFlags,
    offset: u64,
    len: u64,
    /// Scatter-gather segments ([`DeviceProfile::segments`] of each bio).
    segs: u64,
    /// Ring descriptors it holds while on the device (segments + 2), or 0.
    ring: u32,
    /// Creation time (first bio's submission), ns.
    start_ns: Time,
    state: RqState,
    bios: Vec<Rc<BioEnd>>,
    /// Write ordering number, for flushes (writes only).
    write_seq: Option<u64>,
    /// For a flush or preflush: it waits for every write whose sequence
    /// number is below this (the writes submitted before it).
    flush_barrier: u64,
    /// Counted in `in_flight`/busy time (data requests, not empty flushes).
    accounted: bool,
    /// The submitter sleeping for this request's tag.
    tag_waiter: Option<Waker>,
    /// Counted in writeback throttling's in-flight writes (`WBT_TRACKED`).
    wbt_tracked: bool,
    /// When it was sent to the device (`io_start_time_ns`), ns.
    issue_ns: Time,
    /// Its hardware queue (tags and dispatch list).
    hctx: usize,
}

impl Request {
    fn mergeable(&self) -> bool {
        matches!(self.state, RqState::WaitTag | RqState::Queued)
            && matches!(self.op, BioOp::Read | BioOp::Write)
            && !self.flags.fua
            && !self.flags.preflush
    }
}

/// One piece of a split bio: what becomes (or merges into) one request.
#[derive(Clone, Copy, Debug)]
struct Piece {
    /// Start on the device, bytes.
    off: u64,
    /// Length, bytes.
    len: u64,
    /// Scatter-gather segments.
    segs: u64,
}

/// A flush waiting for the writes before it.
struct PendingFlush {
    /// Waits for every write with a smaller sequence number.
    barrier: u64,
    rq: u64,
}

struct State {
    requests: BTreeMap<u64, Request>,
    next_rq: u64,
    /// Back-merge candidates by (op, end offset): the elevator's `rqhash`.
    rq_hash: BTreeMap<(BioOp, u64), u64>,
    /// Tags in use, per hardware queue.
    tags_in_use: Vec<u32>,
    /// Requests sleeping for a tag, per hardware queue, oldest first.
    tag_wait: Vec<VecDeque<u64>>,
    /// Requests with a tag waiting for a device slot, per hardware queue.
    dispatch: Vec<VecDeque<u64>>,
    /// The hardware queue the device takes its next command from: the
    /// queues are served in turn (NVMe round-robin arbitration).
    next_hctx: usize,
    /// Requests in their latency phase.
    in_latency: u32,
    /// Ring descriptors held by requests on the device
    /// ([`DeviceProfile::ring_slots`]).
    ring_used: u32,
    /// When the media pipe is next free, ns.
    pipe_free: Time,
    /// When the controller's command processor is next free, ns
    /// ([`DeviceProfile::cmd_ns`]).
    cmd_free: Time,
    next_write_seq: u64,
    outstanding_writes: BTreeSet<u64>,
    pending_flushes: VecDeque<PendingFlush>,
    stats: DeviceStats,
    /// Last time the busy/in-flight integrals were brought up to date.
    stats_at: Time,
}

struct Inner {
    sim: Sim,
    name: String,
    profile: DeviceProfile,
    st: RefCell<State>,
    /// `bdev->bd_holder`: who holds the device open exclusively
    /// (BLK_OPEN_EXCL), as an id, with a name for messages.
    holder: RefCell<Option<(u64, String)>>,
    /// The driver's worker ([`DeviceProfile::driver_cpu_ns`]), once started.
    driver: RefCell<Option<Driver>>,
    /// The machine's scheduler, once attached ([`BlockDevice::attach`]):
    /// where completions run.
    sched: RefCell<Option<Sched>>,
    /// Service times ([`DeviceProfile::latency_cv_pct`]): the run's seeded
    /// substream `blk:NAME`, so runs stay deterministic.
    service: RefCell<ServiceTime>,
    /// Writeback throttling (`rq_qos` WBT), if the profile has it on.
    wbt: RefCell<Option<Wbt>>,
    /// 4 KiB blocks written at least once, kept only when the profile has a
    /// first-write cost ([`DeviceProfile::first_write_rq_ns`]).
    backing_written: RefCell<IntervalSet>,
    /// The bdi's last `balance_dirty_pages` sleep (`bdi->last_bdp_sleep`),
    /// shared by the bdi of the filesystem on this device.
    last_bdp_sleep: RefCell<Option<Rc<Cell<Option<Time>>>>>,
}

/// Draws each request's latency phase: the profile's mean, spread as a gamma
/// distribution with the profile's coefficient of variation.
struct ServiceTime {
    /// The device's own random stream.
    rng: SimRng,
    /// Gamma(k = 1/cv^2, theta = cv^2) of mean 1, or None without spread.
    spread: Option<Gamma<f64>>,
}

impl ServiceTime {
    /// A service-time source with coefficient of variation `cv_pct` percent.
    fn new(rng: SimRng, cv_pct: u32) -> Self {
        let cv = f64::from(cv_pct) / 100.0;
        let spread = (cv > 0.0)
            .then(|| Gamma::new(1.0 / (cv * cv), cv * cv).ok())
            .flatten();
        ServiceTime { rng, spread }
    }

    /// One request's latency phase for a mean of `mean_ns`, ns.
    fn draw(&mut self, mean_ns: Time) -> Time {
        match &self.spread {
            None => mean_ns,
            Some(g) => {
                let f: f64 = g.sample(&mut self.rng);
                // Rounded to the nanosecond; the f64 holds any realistic mean.
                (mean_ns as f64 * f).round() as Time
            }
        }
    }
}

/// A driver worker thread's queue: requests it still has to process, each
/// with the device latency that follows.
#[derive(Default)]
struct Driver {
    queue: VecDeque<(u64, Time)>,
    waker: Option<Waker>,
}

/// A block device with its request queue. Cheap to clone (an `Rc`).
#[derive(Clone)]
pub struct BlockDevice(Rc<Inner>);

/// Work found under the state borrow, done after it is released (callbacks
/// may call back into the device).
#[derive(Default)]
struct Deferred {
    wake: Vec<Waker>,
    /// Completions, each with the CPU whose interrupt runs it.
    end_io: Vec<(EndIo, Option<usize>)>,
    sched: Option<Sched>,
}

impl Deferred {
    fn run(self) {
        for w in self.wake {
            w.wake();
        }
        for (f, cpu) in self.end_io {
            match &self.sched {
                Some(s) => s.in_irq_on(cpu, f),
                None => f(),
            }
        }
    }
}

impl BlockDevice {
    /// A device named `name` (e.g. `nvme0n1`) behaving as `profile`. Values
    /// the model cannot use (zero bandwidth, depth or parallelism) are raised
    /// to their minimum; check user input with [`DeviceProfile::validate`].
    pub fn new(sim: &Sim, name: &str, profile: DeviceProfile) -> Self {
        let mut profile = profile;
        profile.read_bw_bytes_per_sec = profile.read_bw_bytes_per_sec.max(1);
        profile.write_bw_bytes_per_sec = profile.write_bw_bytes_per_sec.max(1);
        profile.queue_depth = profile.queue_depth.max(1);
        profile.parallelism = profile.parallelism.max(1);
        profile.max_request_bytes = profile.max_request_bytes.max(SECTOR_BYTES);
        profile.nr_hw_queues = profile.nr_hw_queues.max(1);
        let nr_hw = profile.nr_hw_queues as usize;
        let now = sim.now();
        BlockDevice(Rc::new(Inner {
            sim: sim.clone(),
            name: name.to_string(),
            st: RefCell::new(State {
                requests: BTreeMap::new(),
                next_rq: 0,
                rq_hash: BTreeMap::new(),
                tags_in_use: vec![0; nr_hw],
                tag_wait: vec![VecDeque::new(); nr_hw],
                dispatch: vec![VecDeque::new(); nr_hw],
                next_hctx: 0,
                in_latency: 0,
                ring_used: 0,
                pipe_free: 0,
                cmd_free: 0,
                next_write_seq: 0,
                outstanding_writes: BTreeSet::new(),
                pending_flushes: VecDeque::new(),
                stats: DeviceStats {
                    time_ns: now,
                    ..DeviceStats::default()
                },
                stats_at: now,
            }),
            holder: RefCell::new(None),
            driver: RefCell::new(None),
            sched: RefCell::new(None),
            service: RefCell::new(ServiceTime::new(
                sim.rng(&format!("blk:{name}")),
                profile.latency_cv_pct,
            )),
            wbt: RefCell::new(
                (profile.wbt_lat_ns > 0).then(|| {
                    Wbt::new(profile.wbt_lat_ns, profile.queue_depth, profile.write_cache)
                }),
            ),
            last_bdp_sleep: RefCell::new(None),
            backing_written: RefCell::new(IntervalSet::default()),
            profile,
        }))
    }

    /// `bd_prepare_to_claim` + `bd_finish_claiming`: an exclusive open by
    /// `holder` (a mounted superblock, a loop device's configuration). EBUSY
    /// if another holder has the device; the same holder may claim again.
    pub fn bd_claim(&self, holder: u64, what: &str) -> Result<(), Errno> {
        let mut h = self.0.holder.borrow_mut();
        match &*h {
            Some((id, _)) if *id != holder => Err(Errno::EBUSY),
            _ => {
                *h = Some((holder, what.to_string()));
                Ok(())
            }
        }
    }

    /// `bd_abort_claiming` / the holder part of `bdev_release`: `holder` lets
    /// the device go. Returns false if it was not the holder.
    pub fn bd_release(&self, holder: u64) -> bool {
        let mut h = self.0.holder.borrow_mut();
        if h.as_ref().is_some_and(|(id, _)| *id == holder) {
            *h = None;
            true
        } else {
            false
        }
    }

    /// The current exclusive holder's name, if any.
    pub fn holder(&self) -> Option<String> {
        self.0.holder.borrow().as_ref().map(|(_, n)| n.clone())
    }

    /// The device name.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// The profile in force.
    pub fn profile(&self) -> &DeviceProfile {
        &self.0.profile
    }

    /// Tags allocated now, over all hardware queues.
    pub fn tags_in_use(&self) -> u32 {
        self.0.st.borrow().tags_in_use.iter().sum()
    }

    /// Submitters sleeping for a tag now, over all hardware queues.
    pub fn tag_waiters(&self) -> usize {
        self.0.st.borrow().tag_wait.iter().map(VecDeque::len).sum()
    }

    /// Which of the device's `nr_hw` hardware queues a request submitted now
    /// goes to: the submitting CPU's (`blk_mq_map_queues` ->
    /// `group_cpus_evenly`: consecutive CPUs share a queue when there are
    /// fewer queues than CPUs; [`BlockDevice::attach`] keeps at most one per
    /// CPU). A submission outside any task (a timer callback) counts as CPU
    /// 0's.
    fn current_hctx(&self, nr_hw: usize) -> usize {
        if nr_hw == 1 {
            return 0;
        }
        let sched = self.0.sched.borrow();
        let Some(s) = sched.as_ref() else {
            return 0;
        };
        let cpus = s.nr_cpus().max(1);
        s.this_cpu().unwrap_or(0) % cpus * nr_hw / cpus
    }

    /// A statistics snapshot at the current time.
    pub fn stats(&self) -> DeviceStats {
        let now = self.0.sim.now();
        let mut st = self.0.st.borrow_mut();
        account(&mut st, now);
        st.stats.time_ns = now;
        st.stats
    }

    /// `submit_bio()`: queues `bio` and returns once each of its requests has
    /// a tag (or it merged into a queued request); `end_io` is called from a
    /// timer callback when the whole bio has completed. A write that
    /// writeback throttling tracks ([`Wbt::tracks`]) first waits, piece by
    /// piece, for an in-flight slot (`rq_qos_throttle` in
    /// `blk_mq_submit_bio`, after the merge attempt).
    pub async fn submit_bio(&self, bio: Bio, end_io: EndIo) {
        let throttled =
            bio.op == BioOp::Write && Wbt::tracks(bio.flags) && self.0.wbt.borrow().is_some();
        if !throttled {
            let waits = self.queue_bio(bio, end_io);
            for rq in waits {
                TagWait {
                    dev: self.clone(),
                    rq,
                }
                .await;
            }
            return;
        }
        let Some((bio, pieces, end)) = self.prepare_bio(bio, end_io) else {
            return;
        };
        for (i, piece) in pieces.into_iter().enumerate() {
            let flags = BioFlags {
                preflush: bio.flags.preflush && i == 0,
                ..bio.flags
            };
            {
                let mut st = self.0.st.borrow_mut();
                account(&mut st, self.0.sim.now());
                if self.try_back_merge(&mut st, bio.op, flags, piece, &end) {
                    continue;
                }
            }
            self.wbt_wait(flags).await;
            let wait = {
                let mut st = self.0.st.borrow_mut();
                account(&mut st, self.0.sim.now());
                let w = self.new_request(&mut st, bio.op, flags, piece, &end, true);
                self.run_dispatch(&mut st);
                w
            };
            if let Some(rq) = wait {
                TagWait {
                    dev: self.clone(),
                    rq,
                }
                .await;
            }
        }
    }

    /// Lets writeback throttling see the bdi's `balance_dirty_pages` sleeps
    /// (`wb_recent_wait`): the filesystem's bdi shares its `last_bdp_sleep`.
    pub fn set_bdp_sleep_source(&self, last_bdp_sleep: Rc<Cell<Option<Time>>>) {
        *self.0.last_bdp_sleep.borrow_mut() = Some(last_bdp_sleep);
    }

    /// Writeback throttling's counters and current limits (max, normal,
    /// background), if it is on.
    pub fn wbt_stats(&self) -> Option<(WbtStats, (u32, u32, u32))> {
        self.0.wbt.borrow().as_ref().map(|w| (w.stats, w.limits()))
    }

    /// `wb_recent_wait()`: a task slept in `balance_dirty_pages` on this
    /// device's bdi within the last second.
    fn recent_wait(&self) -> bool {
        let last = self
            .0
            .last_bdp_sleep
            .borrow()
            .as_ref()
            .and_then(|c| c.get());
        Wbt::recent_wait(last, self.0.sim.now())
    }

    /// `wbt_wait` -> `rq_qos_wait`: takes an in-flight slot for a tracked
    /// write, sleeping FIFO behind earlier waiters while over the limit;
    /// then arms the monitoring window if none is active.
    async fn wbt_wait(&self, flags: BioFlags) {
        let now = self.0.sim.now();
        let recent = self.recent_wait();
        let ticket = {
            let mut w = self.0.wbt.borrow_mut();
            let w = w.as_mut().expect("wbt on");
            if w.try_acquire(flags, now, recent) {
                None
            } else {
                Some(w.enqueue(flags))
            }
        };
        if let Some(id) = ticket {
            WbtWait {
                dev: self.clone(),
                id,
            }
            .await;
        }
        let arm = self
            .0
            .wbt
            .borrow_mut()
            .as_mut()
            .and_then(|w| w.arm_if_idle());
        if let Some(win) = arm {
            self.schedule_wbt_window(win);
        }
    }

    /// The end of a monitoring window in `win` ns (`wb_timer_fn`).
    fn schedule_wbt_window(&self, win: Time) {
        let weak = Rc::downgrade(&self.0);
        self.0.sim.schedule_in(win, move || {
            let Some(dev) = upgrade(&weak) else { return };
            let now = dev.0.sim.now();
            let recent = dev.recent_wait();
            let (rearm, wake) = {
                let mut w = dev.0.wbt.borrow_mut();
                match w.as_mut() {
                    Some(w) => w.window_end(now, recent),
                    None => return,
                }
            };
            if let Some(next) = rearm {
                dev.schedule_wbt_window(next);
            }
            for k in wake {
                k.wake();
            }
        });
    }

    /// `submit_bio_wait()`: submits `bio` and sleeps until it completes.
    pub async fn submit_bio_wait(&self, bio: Bio) {
        let done = Rc::new(Done::default());
        let d = done.clone();
        self.submit_bio(
            bio,
            Box::new(move || {
                d.done.set(true);
                if let Some(w) = d.waker.take() {
                    w.wake();
                }
            }),
        )
        .await;
        WaitDone {
            dev: self.clone(),
            done,
        }
        .await;
    }

    /// `blkdev_issue_flush()`: an empty `REQ_PREFLUSH` bio, waited for. It
    /// completes once every write submitted before it has completed, plus
    /// `flush_latency_ns` (at once on a device without a write cache).
    pub async fn flush(&self) {
        self.submit_bio_wait(Bio::flush()).await;
    }

    // ------------------------------------------------------------ submission

    /// Splits, merges and allocates requests for `bio`; returns the requests
    /// still waiting for a tag, in order.
    fn queue_bio(&self, bio: Bio, end_io: EndIo) -> Vec<u64> {
        let Some((bio, pieces, end)) = self.prepare_bio(bio, end_io) else {
            return Vec::new();
        };
        let inner = &*self.0;
        let mut st = inner.st.borrow_mut();
        account(&mut st, inner.sim.now());
        let mut waits = Vec::new();
        for (i, piece) in pieces.into_iter().enumerate() {
            let flags = BioFlags {
                preflush: bio.flags.preflush && i == 0,
                ..bio.flags
            };
            if self.try_back_merge(&mut st, bio.op, flags, piece, &end) {
                continue;
            }
            if let Some(id) = self.new_request(&mut st, bio.op, flags, piece, &end, false) {
                waits.push(id);
            }
        }
        self.run_dispatch(&mut st);
        waits
    }

    /// `submit_bio_noacct()` and `bio_split_to_limits()`: normalises the
    /// flags for the device, splits into pieces of at most
    /// `max_request_bytes` and `max_segments` segments, and makes the
    /// completion the pieces share. Each piece is (offset, length,
    /// segments). None when the bio completes at once (a flush to a device
    /// without a write cache).
    #[allow(clippy::type_complexity)]
    fn prepare_bio(&self, bio: Bio, end_io: EndIo) -> Option<(Bio, Vec<Piece>, Rc<BioEnd>)> {
        let inner = &*self.0;
        let p = &inner.profile;
        let mut bio = bio;
        if !p.write_cache {
            // submit_bio_noacct(): flags meaningless without a write cache.
            bio.flags.preflush = false;
            bio.flags.fua = false;
            if bio.op == BioOp::Flush {
                inner.sim.schedule_in(0, end_io);
                return None;
            }
        }
        if bio.op == BioOp::Flush {
            bio.offset_bytes = 0;
            bio.len_bytes = 0;
            bio.flags.preflush = true;
        }
        if bio.op == BioOp::Read {
            bio.flags.preflush = false;
            bio.flags.fua = false;
        }
        // bio_split_to_limits(): pieces of at most max_request_bytes and
        // max_segments segments.
        let max = p.max_request_for(bio.seg_bytes);
        let mut pieces = Vec::new();
        let (mut off, mut left) = (bio.offset_bytes, bio.len_bytes);
        loop {
            let len = left.min(max);
            let segs = if len == 0 {
                0
            } else {
                p.segments(len, bio.seg_bytes)
            };
            pieces.push(Piece { off, len, segs });
            off = off.saturating_add(len);
            left -= len;
            if left == 0 {
                break;
            }
        }
        let cpu = if p.percpu_completion {
            inner.sched.borrow().as_ref().and_then(Sched::this_cpu)
        } else {
            p.completion_cpu
        };
        let end = Rc::new(BioEnd {
            remaining: Cell::new(pieces.len() as u64),
            end_io: RefCell::new(Some(end_io)),
            cpu,
        });
        inner.st.borrow_mut().stats.splits += pieces.len() as u64 - 1;
        Some((bio, pieces, end))
    }

    /// Allocates a request for one piece (`blk_mq_get_new_requests`): with
    /// a free tag and nobody waiting it goes on, else it waits; returns its
    /// id if it waits for a tag.
    #[allow(clippy::too_many_arguments)]
    fn new_request(
        &self,
        st: &mut State,
        op: BioOp,
        flags: BioFlags,
        piece: Piece,
        end: &Rc<BioEnd>,
        wbt_tracked: bool,
    ) -> Option<u64> {
        let Piece { off, len, segs } = piece;
        let inner = &*self.0;
        let now = inner.sim.now();
        let id = st.next_rq;
        st.next_rq += 1;
        let write_seq = (op == BioOp::Write).then(|| {
            let s = st.next_write_seq;
            st.next_write_seq += 1;
            st.outstanding_writes.insert(s);
            s
        });
        let accounted = op != BioOp::Flush;
        let flush_barrier = write_seq.unwrap_or(st.next_write_seq);
        let hctx = self.current_hctx(st.dispatch.len());
        let rq = Request {
            op,
            flags,
            offset: off,
            len,
            segs,
            ring: 0,
            start_ns: now,
            state: RqState::WaitTag,
            bios: vec![end.clone()],
            write_seq,
            flush_barrier,
            accounted,
            tag_waiter: None,
            wbt_tracked,
            issue_ns: now,
            hctx,
        };
        if rq.mergeable() {
            st.rq_hash.insert((rq.op, rq.offset + rq.len), id);
        }
        st.requests.insert(id, rq);
        if accounted {
            st.stats.in_flight += 1;
            st.stats.max_in_flight = st.stats.max_in_flight.max(st.stats.in_flight);
        }
        if st.tags_in_use[hctx] < inner.profile.queue_depth && st.tag_wait[hctx].is_empty() {
            st.tags_in_use[hctx] += 1;
            self.got_tag(st, id);
            None
        } else {
            st.tag_wait[hctx].push_back(id);
            Some(id)
        }
    }

    /// `bio_attempt_back_merge()` onto a request not yet sent to the device.
    fn try_back_merge(
        &self,
        st: &mut State,
        op: BioOp,
        flags: BioFlags,
        piece: Piece,
        end: &Rc<BioEnd>,
    ) -> bool {
        let Piece { off, len, segs } = piece;
        if !matches!(op, BioOp::Read | BioOp::Write) || flags.fua || flags.preflush {
            return false;
        }
        let Some(&id) = st.rq_hash.get(&(op, off)) else {
            return false;
        };
        let max = self.0.profile.max_request_bytes;
        let max_segs = u64::from(self.0.profile.max_segments);
        let rq = st.requests.get_mut(&id).expect("hashed request exists");
        // ll_back_merge_fn(): the merged request must fit max_sectors and
        // max_segments (runs of different bios are not contiguous).
        if rq.len + len > max || (max_segs > 0 && rq.segs + segs > max_segs) {
            return false;
        }
        rq.len += len;
        rq.segs += segs;
        rq.bios.push(end.clone());
        let (sector, new_end) = (rq.offset / SECTOR_BYTES, rq.offset + rq.len);
        st.rq_hash.remove(&(op, off));
        if new_end - st.requests[&id].offset < max {
            st.rq_hash.insert((op, new_end), id);
        }
        if op == BioOp::Read {
            st.stats.read_merges += 1;
        } else {
            st.stats.write_merges += 1;
        }
        st.stats.merges += 1;
        let name = &self.0.name;
        self.0.sim.trace("block_bio_backmerge", || {
            format!(
                "{name} {} {} + {} (rq sector {sector})",
                rwbs(op, flags),
                off / SECTOR_BYTES,
                len / SECTOR_BYTES
            )
        });
        true
    }

    /// A request got its tag: to the flush machinery or the dispatch list.
    fn got_tag(&self, st: &mut State, id: u64) {
        let rq = st.requests.get_mut(&id).expect("request exists");
        if rq.flags.preflush {
            rq.state = RqState::WaitFlush;
            let barrier = rq.flush_barrier;
            st.pending_flushes
                .push_back(PendingFlush { barrier, rq: id });
            self.check_flushes(st);
        } else {
            rq.state = RqState::Queued;
            let h = rq.hctx;
            st.dispatch[h].push_back(id);
        }
    }

    /// Starts the flushes whose earlier writes have all completed.
    fn check_flushes(&self, st: &mut State) {
        let oldest = st.outstanding_writes.first().copied().unwrap_or(u64::MAX);
        let mut i = 0;
        while i < st.pending_flushes.len() {
            if st.pending_flushes[i].barrier <= oldest {
                let f = st.pending_flushes.remove(i).expect("index checked");
                self.start_flush(st, f.rq);
            } else {
                i += 1;
            }
        }
    }

    fn start_flush(&self, st: &mut State, id: u64) {
        let inner = &*self.0;
        let name = &inner.name;
        let rq = &st.requests[&id];
        inner.sim.trace("block_rq_issue", || {
            format!("{name} {} 0 + 0 nr_bytes=0", rwbs(BioOp::Flush, rq.flags))
        });
        let weak = Rc::downgrade(&self.0);
        inner
            .sim
            .schedule_in(inner.profile.flush_latency_ns, move || {
                if let Some(dev) = upgrade(&weak) {
                    dev.flush_done(id);
                }
            });
    }

    fn flush_done(&self, id: u64) {
        let inner = &*self.0;
        let now = inner.sim.now();
        let mut st = inner.st.borrow_mut();
        account(&mut st, now);
        st.stats.flushes += 1;
        let name = &inner.name;
        inner
            .sim
            .trace("block_rq_complete", || format!("{name} F 0 + 0 nr_bytes=0"));
        let op = st.requests[&id].op;
        if op == BioOp::Flush {
            let d = self.complete(&mut st, id);
            self.run_dispatch(&mut st);
            drop(st);
            d.run();
        } else {
            // blk-flush: preflush done, now the data (REQ_FSEQ_DATA).
            let rq = st.requests.get_mut(&id).expect("request exists");
            rq.state = RqState::Queued;
            let h = rq.hctx;
            st.dispatch[h].push_back(id);
            self.run_dispatch(&mut st);
        }
    }

    // ------------------------------------------------------------- service

    /// Sends queued requests to the device while it has free slots, taking
    /// the hardware queues in turn.
    fn run_dispatch(&self, st: &mut State) {
        let inner = &*self.0;
        let nr_hw = st.dispatch.len();
        while st.in_latency < inner.profile.parallelism {
            let Some(h) = (0..nr_hw)
                .map(|i| (st.next_hctx + i) % nr_hw)
                .find(|&h| !st.dispatch[h].is_empty())
            else {
                break;
            };
            let id = st.dispatch[h][0];
            // A ring without room for the next request's descriptors stops
            // the queue until a completion frees some (in order: the head
            // is not passed).
            let ring = if inner.profile.ring_slots > 0 {
                let need = u32::try_from(st.requests[&id].segs + 2).unwrap_or(u32::MAX);
                if st.ring_used.saturating_add(need) > inner.profile.ring_slots {
                    break;
                }
                need
            } else {
                0
            };
            st.dispatch[h].pop_front();
            st.next_hctx = (h + 1) % nr_hw;
            st.ring_used += ring;
            st.in_latency += 1;
            let now = inner.sim.now();
            let rq = st.requests.get_mut(&id).expect("request exists");
            rq.state = RqState::Latency;
            rq.issue_ns = now;
            rq.ring = ring;
            let (op, flags, offset, len, segs) = (rq.op, rq.flags, rq.offset, rq.len, rq.segs);
            if op == BioOp::Read {
                if let Some(w) = inner.wbt.borrow_mut().as_mut() {
                    w.read_issued(id, now);
                }
            }
            if st.rq_hash.get(&(op, offset + len)) == Some(&id) {
                st.rq_hash.remove(&(op, offset + len));
            }
            let name = &inner.name;
            inner.sim.trace("block_rq_issue", || {
                format!(
                    "{name} {} {} + {} nr_bytes={len}",
                    rwbs(op, flags),
                    offset / SECTOR_BYTES,
                    len.div_ceil(SECTOR_BYTES)
                )
            });
            let mean = if op == BioOp::Read {
                inner.profile.read_latency_ns
            } else {
                inner.profile.write_latency_ns
            };
            // The command processor takes commands one at a time; the
            // latency phase (parallel) starts when it is done with this one.
            let cmd_done =
                st.cmd_free.max(now) + inner.profile.cmd_time_ns(op == BioOp::Write, segs);
            st.cmd_free = cmd_done;
            let lat = (cmd_done - now) + inner.service.borrow_mut().draw(mean);
            if let Some(drv) = inner.driver.borrow_mut().as_mut() {
                // The driver's worker processes it first.
                drv.queue.push_back((id, lat));
                if let Some(w) = drv.waker.take() {
                    w.wake();
                }
                continue;
            }
            self.start_latency(id, lat);
        }
    }

    /// Starts a dispatched request's latency phase.
    fn start_latency(&self, id: u64, lat: Time) {
        let weak = Rc::downgrade(&self.0);
        self.0.sim.schedule_in(lat, move || {
            if let Some(dev) = upgrade(&weak) {
                dev.latency_done(id);
            }
        });
    }

    /// Ties the device to the machine's scheduler: completions run on its
    /// CPUs ([`DeviceProfile::percpu_completion`]), and the driver's worker
    /// starts if the profile has one. The driver asks for at most one
    /// hardware queue per CPU (`nvme_setup_io_queues`:
    /// `num_possible_cpus()`), so a profile's extra queues are dropped here
    /// (none has been used yet: before a scheduler is attached every request
    /// goes to queue 0).
    pub fn attach(&self, sched: &Sched) {
        let nr_hw = (self.0.profile.nr_hw_queues as usize)
            .min(sched.nr_cpus())
            .max(1);
        {
            let mut st = self.0.st.borrow_mut();
            st.tags_in_use.truncate(nr_hw);
            st.tag_wait.truncate(nr_hw);
            st.dispatch.truncate(nr_hw);
        }
        *self.0.sched.borrow_mut() = Some(sched.clone());
        self.start_driver_worker(sched);
    }

    /// Starts the driver's worker thread if the profile has a per-request
    /// driver CPU cost: a kernel thread (`kworker/loopN`-like) that takes
    /// dispatched requests in order, spends [`DeviceProfile::driver_cpu_ns`]
    /// of CPU on each, then hands it to the device.
    fn start_driver_worker(&self, sched: &Sched) {
        let cpu = self.0.profile.driver_cpu_ns;
        if cpu == 0 || self.0.driver.borrow().is_some() {
            return;
        }
        *self.0.driver.borrow_mut() = Some(Driver::default());
        let weak = Rc::downgrade(&self.0);
        let sched2 = sched.clone();
        let name = format!("kworker/{}", self.0.name);
        sched.spawn_daemon(&name, CgroupId::ROOT, 0, async move {
            loop {
                let next = std::future::poll_fn(|cx| {
                    let Some(dev) = upgrade(&weak) else {
                        return Poll::Ready(None);
                    };
                    let mut d = dev.0.driver.borrow_mut();
                    let drv = d.as_mut().expect("driver started");
                    match drv.queue.pop_front() {
                        Some(x) => Poll::Ready(Some(x)),
                        None => {
                            drv.waker = Some(cx.waker().clone());
                            Poll::Pending
                        }
                    }
                })
                .await;
                let Some((id, lat)) = next else { return };
                sched2.cpu(cpu).await;
                if let Some(dev) = upgrade(&weak) {
                    dev.start_latency(id, lat);
                }
            }
        });
    }

    /// The extra serial time of a write to `[off, off + len)` for its blocks
    /// never written before ([`DeviceProfile::first_write_rq_ns`],
    /// [`DeviceProfile::first_write_block_ns`]), which it marks written;
    /// with the number of those blocks.
    fn first_write(&self, off: u64, len: u64) -> (u64, u64) {
        let p = &self.0.profile;
        if (p.first_write_rq_ns == 0 && p.first_write_block_ns == 0) || len == 0 {
            return (0, 0);
        }
        let (s, e) = (off / BACKING_BLOCK, (off + len).div_ceil(BACKING_BLOCK));
        let mut written = self.0.backing_written.borrow_mut();
        let new = (e - s) - written.pages_in(s, e);
        if new == 0 {
            return (0, 0);
        }
        written.insert(s, e);
        (p.first_write_rq_ns + new * p.first_write_block_ns, new)
    }

    /// End of a request's latency phase: it queues for the media pipe.
    fn latency_done(&self, id: u64) {
        let inner = &*self.0;
        let now = inner.sim.now();
        let mut st = inner.st.borrow_mut();
        st.in_latency -= 1;
        let rq = st.requests.get_mut(&id).expect("request exists");
        rq.state = RqState::Transfer;
        let write = rq.op == BioOp::Write;
        let extra = if rq.flags.fua {
            inner.profile.fua_latency_ns
        } else {
            0
        };
        let mut xfer = inner.profile.transfer_ns(write, rq.len);
        if write {
            let (ns, blocks) = self.first_write(rq.offset, rq.len);
            xfer += ns;
            st.stats.first_write_blocks += blocks;
        }
        let start = st.pipe_free.max(now);
        st.pipe_free = start.saturating_add(xfer);
        let done_at = st.pipe_free.saturating_add(extra);
        let weak = Rc::downgrade(&self.0);
        inner.sim.schedule_at(done_at, move || {
            if let Some(dev) = upgrade(&weak) {
                dev.rq_done(id);
            }
        });
        self.run_dispatch(&mut st);
    }

    /// `blk_mq_end_request()` for a data request.
    fn rq_done(&self, id: u64) {
        let inner = &*self.0;
        let now = inner.sim.now();
        let mut st = inner.st.borrow_mut();
        account(&mut st, now);
        let d = self.complete(&mut st, id);
        self.run_dispatch(&mut st);
        drop(st);
        d.run();
    }

    /// Frees the request and its tag, accounts it, ends its bios, hands the
    /// tag to the oldest waiter. Returns the wakeups and callbacks to run.
    fn complete(&self, st: &mut State, id: u64) -> Deferred {
        let inner = &*self.0;
        let now = inner.sim.now();
        let rq = st.requests.remove(&id).expect("request exists");
        let h = rq.hctx;
        st.tags_in_use[h] -= 1;
        st.ring_used -= rq.ring;
        if rq.accounted {
            st.stats.in_flight -= 1;
            let t = now - rq.start_ns;
            match rq.op {
                BioOp::Read => {
                    st.stats.reads += 1;
                    st.stats.read_bytes += rq.len;
                    st.stats.read_time_ns += t;
                }
                BioOp::Write => {
                    st.stats.writes += 1;
                    st.stats.write_bytes += rq.len;
                    st.stats.write_time_ns += t;
                }
                BioOp::Flush => {}
            }
            let name = &inner.name;
            inner.sim.trace("block_rq_complete", || {
                format!(
                    "{name} {} {} + {} nr_bytes={}",
                    rwbs(rq.op, rq.flags),
                    rq.offset / SECTOR_BYTES,
                    rq.len.div_ceil(SECTOR_BYTES),
                    rq.len
                )
            });
        }
        let mut d = Deferred {
            sched: inner.sched.borrow().clone(),
            ..Deferred::default()
        };
        if rq.op != BioOp::Flush {
            let recent = rq.wbt_tracked && self.recent_wait();
            if let Some(w) = inner.wbt.borrow_mut().as_mut() {
                let lat = now.saturating_sub(rq.issue_ns);
                w.completed(id, rq.op == BioOp::Read, lat, now);
                if rq.wbt_tracked {
                    d.wake.extend(w.done_tracked(now, recent));
                }
            }
        }
        for b in &rq.bios {
            let left = b.remaining.get() - 1;
            b.remaining.set(left);
            if left == 0 {
                if let Some(f) = b.end_io.borrow_mut().take() {
                    d.end_io.push((f, b.cpu));
                }
            }
        }
        if let Some(seq) = rq.write_seq {
            st.outstanding_writes.remove(&seq);
            self.check_flushes(st);
        }
        // The freed tag goes to the oldest sleeper of its hardware queue
        // (sbitmap wakeup).
        while st.tags_in_use[h] < inner.profile.queue_depth {
            let Some(next) = st.tag_wait[h].pop_front() else {
                break;
            };
            st.tags_in_use[h] += 1;
            if let Some(w) = st.requests.get_mut(&next).and_then(|r| r.tag_waiter.take()) {
                d.wake.push(w);
            }
            self.got_tag(st, next);
        }
        d
    }
}

fn upgrade(w: &Weak<Inner>) -> Option<BlockDevice> {
    w.upgrade().map(BlockDevice)
}

/// Brings `busy_ns` and the in-flight integral up to `now`.
fn account(st: &mut State, now: Time) {
    let dt = now.saturating_sub(st.stats_at);
    if st.stats.in_flight > 0 {
        st.stats.busy_ns += dt;
        st.stats.in_flight_time_ns = st
            .stats
            .in_flight_time_ns
            .saturating_add(dt.saturating_mul(st.stats.in_flight));
    }
    st.stats_at = now;
}

/// Sleeps until request `rq` has a tag (`blk_mq_get_tag()`).
struct TagWait {
    dev: BlockDevice,
    rq: u64,
}

impl Future for TagWait {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let inner = &*self.dev.0;
        let mut st = inner.st.borrow_mut();
        match st.requests.get_mut(&self.rq) {
            Some(rq) if rq.state == RqState::WaitTag => {
                rq.tag_waiter = Some(cx.waker().clone());
                drop(st);
                inner
                    .sim
                    .set_waiting_on(format!("blk_mq_get_tag: {}", inner.name));
                Poll::Pending
            }
            _ => Poll::Ready(()),
        }
    }
}

/// Sleeps in `rq_qos_wait` until writeback throttling hands ticket `id` an
/// in-flight slot.
struct WbtWait {
    dev: BlockDevice,
    id: u64,
}

impl Future for WbtWait {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let inner = &*self.dev.0;
        let got = inner
            .wbt
            .borrow_mut()
            .as_mut()
            .is_none_or(|w| w.poll_token(self.id, cx.waker()));
        if got {
            return Poll::Ready(());
        }
        inner
            .sim
            .set_waiting_on(format!("wbt_wait: {}", inner.name));
        Poll::Pending
    }
}

#[derive(Default)]
struct Done {
    done: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

/// Sleeps until a `submit_bio_wait()` bio completes.
struct WaitDone {
    dev: BlockDevice,
    done: Rc<Done>,
}

impl Future for WaitDone {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.done.done.get() {
            return Poll::Ready(());
        }
        *self.done.waker.borrow_mut() = Some(cx.waker().clone());
        self.dev
            .0
            .sim
            .set_waiting_on(format!("submit_bio_wait: {}", self.dev.0.name));
        Poll::Pending
    }
}
