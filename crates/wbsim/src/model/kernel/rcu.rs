//! RCU: read-side critical sections, grace periods, callbacks.
//!
//! Models:
//! - `kernel/rcu/tree.c`: the grace-period state machine driven by
//!   `rcu_gp_kthread()` (`rcu_gp_init()`, the quiescent-state wait of
//!   `rcu_gp_fqs_loop()`, `rcu_gp_cleanup()` starting the next grace period when
//!   one is still needed), `synchronize_rcu()`, `call_rcu()`, `rcu_barrier()`,
//!   and the polled API (`get_state_synchronize_rcu()`,
//!   `start_poll_synchronize_rcu()`, `poll_state_synchronize_rcu()`).
//! - `kernel/rcu/rcu.h`: the `gp_seq` encoding (`rcu_seq_start()`,
//!   `rcu_seq_end()`, `rcu_seq_snap()`, `rcu_seq_done()`): a counter whose two
//!   low bits say whether a grace period is running. A caller snapshots the value
//!   `gp_seq` will have once a full grace period that starts after the call has
//!   ended, so a caller arriving during a grace period needs the next one, and
//!   every caller with the same snapshot is served by the same grace period.
//! - `kernel/rcu/tree_exp.h`: `synchronize_rcu_expedited()` with its own
//!   sequence (`expedited_sequence`), and `kernel/rcu/update.c`:
//!   `rcu_gp_is_normal()`, with `rcu_normal_after_boot` (default on for
//!   PREEMPT_RT) turning every expedited grace period after boot into a normal
//!   one.
//! - `include/linux/rcupdate.h`: `rcu_read_lock()` / `rcu_read_unlock()`, here a
//!   guard whose drop is the unlock.
//! - Tracepoints `rcu_grace_period` and `rcu_exp_grace_period`
//!   (include/trace/events/rcu.h), fields "NAME GP_SEQ start|end".
//!
//! Simplified:
//! - A grace period's length is sampled (`RcuParams`), standing for the
//!   per-CPU quiescent-state reporting and force-quiescent-state scans the
//!   kernel does; the only readers modelled one by one are the explicit
//!   `rcu_read_lock()` guards. A grace period ends when its sampled length has
//!   passed AND every guard that existed when it started is dropped; guards
//!   taken after it started do not hold it (as in preemptible RCU, where a
//!   reader preempted or blocked inside its section holds the grace period
//!   through the `rcu_node` blocked-tasks list).
//! - No CPUs, no rcu_node tree, no per-CPU callback lists, no lazy or no-CBs
//!   callbacks: `call_rcu()` requests a grace period at once (the kernel
//!   notices new callbacks at the next tick or softirq) and its callback
//!   is invoked at the end of the first grace period that started after the
//!   call, in global queue order, from a timer callback (standing for the
//!   RCU_SOFTIRQ / rcuc kthread), each taking `callback_cost_ns`.
//! - `rcu_barrier()` waits for the callbacks queued before it; with none
//!   queued it returns at once (the kernel skips CPUs with no callbacks).
//! - A requested grace period starts at the same instant, after the tasks
//!   already runnable then (the GP kthread's wakeup latency is taken as 0), so
//!   requests made at one instant share one grace period.
//! - Normal and expedited grace periods are independent machines, as in the
//!   kernel (neither one's callers are served by the other's completion).
//! - `gp_seq` starts at 0 (the kernel starts it just below a wrap).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeSet, VecDeque};
use std::future::Future;
use std::rc::Rc;

use rand::Rng;
use rand_distr::{Distribution, LogNormal};
use sim::{Sim, SimRng, Time, MSEC, USEC};

use super::wait::WaitQueue;

// ------------------------------------------------------------- gp_seq helpers

/// Bits of `gp_seq` holding the grace-period state (`RCU_SEQ_CTR_SHIFT`).
pub const RCU_SEQ_CTR_SHIFT: u32 = 2;
/// Mask of the state bits (`RCU_SEQ_STATE_MASK`).
pub const RCU_SEQ_STATE_MASK: u64 = (1 << RCU_SEQ_CTR_SHIFT) - 1;

/// `rcu_seq_state()`: non-zero while a grace period is in progress.
pub fn rcu_seq_state(s: u64) -> u64 {
    s & RCU_SEQ_STATE_MASK
}

/// `rcu_seq_start()`: the value once a grace period starts.
fn rcu_seq_start(s: u64) -> u64 {
    s + 1
}

/// `rcu_seq_endval()`: the value once the running grace period ends.
fn rcu_seq_endval(s: u64) -> u64 {
    (s | RCU_SEQ_STATE_MASK) + 1
}

/// `rcu_seq_snap()`: the value `gp_seq` will have once a full grace period
/// starting after now has ended.
pub fn rcu_seq_snap(s: u64) -> u64 {
    (s + 2 * RCU_SEQ_STATE_MASK + 1) & !RCU_SEQ_STATE_MASK
}

/// `rcu_seq_done()`: whether `cur` has reached snapshot `snap`.
pub fn rcu_seq_done(cur: u64, snap: u64) -> bool {
    cur >= snap
}

// ----------------------------------------------------------------- parameters

/// Distribution of a grace period's length, ns.
#[derive(Clone, Debug, PartialEq)]
pub enum GpDuration {
    /// Always this many ns.
    Fixed(Time),
    /// Uniform in `min..=max` ns.
    Uniform { min: Time, max: Time },
    /// Log-normal with the given median (ns) and sigma (of the underlying
    /// normal, dimensionless).
    LogNormal { median: Time, sigma: f64 },
}

/// A parameter that cannot describe a distribution.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RcuParamError {
    #[error("rcu {which}: uniform min {min} ns is above max {max} ns")]
    UniformMinAboveMax {
        which: &'static str,
        min: Time,
        max: Time,
    },
    #[error("rcu {which}: log-normal median must be > 0 ns")]
    ZeroMedian { which: &'static str },
    #[error("rcu {which}: log-normal sigma {sigma} must be finite and >= 0")]
    BadSigma { which: &'static str, sigma: f64 },
}

impl GpDuration {
    /// Checks the distribution is well formed; `which` names it in the error.
    pub fn validate(&self, which: &'static str) -> Result<(), RcuParamError> {
        match *self {
            GpDuration::Fixed(_) => Ok(()),
            GpDuration::Uniform { min, max } if min > max => {
                Err(RcuParamError::UniformMinAboveMax { which, min, max })
            }
            GpDuration::Uniform { .. } => Ok(()),
            GpDuration::LogNormal { median: 0, .. } => Err(RcuParamError::ZeroMedian { which }),
            GpDuration::LogNormal { sigma, .. } if !(sigma.is_finite() && sigma >= 0.0) => {
                Err(RcuParamError::BadSigma { which, sigma })
            }
            GpDuration::LogNormal { .. } => Ok(()),
        }
    }

    /// Draws one length, ns (the distribution was validated).
    pub fn sample(&self, rng: &mut SimRng) -> Time {
        match *self {
            GpDuration::Fixed(t) => t,
            GpDuration::Uniform { min, max } => rng.random_range(min..=max.max(min)),
            GpDuration::LogNormal { median, sigma } => {
                match LogNormal::new((median.max(1) as f64).ln(), sigma) {
                    // `as` saturates: a huge draw becomes u64::MAX ns, not a wrap.
                    Ok(d) => d.sample(rng).round() as Time,
                    Err(_) => median,
                }
            }
        }
    }
}

/// RCU parameters of one modelled kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct RcuParams {
    /// Length of a normal grace period, ns, when no modelled reader holds it.
    pub gp_normal: GpDuration,
    /// Length of an expedited grace period, ns, when no reader holds it.
    pub gp_expedited: GpDuration,
    /// PREEMPT_RT kernel (CONFIG_PREEMPT_RT). Sets the default of
    /// `rcu_normal_after_boot`.
    pub preempt_rt: bool,
    /// `rcupdate.rcu_normal_after_boot`: after boot, expedited grace periods
    /// are normal ones (`rcu_gp_is_normal()`). Kernel default
    /// `IS_ENABLED(CONFIG_PREEMPT_RT)` (kernel/rcu/update.c).
    pub rcu_normal_after_boot: bool,
    /// Time to invoke one RCU callback, ns (callbacks run one after another
    /// after the grace period ends). Default 0: a callback that frees an
    /// object or queues work costs well under a microsecond.
    pub callback_cost_ns: Time,
    /// CONFIG_RCU_LAZY: `call_rcu()` callbacks are lazy; they ride on any
    /// grace period that others start and only request one themselves after
    /// this long (`jiffies_lazy_flush`, default 10 s, kernel/rcu/tree_nocb.h).
    /// None: every call_rcu requests a grace period at once.
    /// Source: CHOSEN FROM A PUBLISHED FIGURE: in E3 a sync `umount` (24.55 ms)
    /// costs the same as a sync `umount -l` (25.55 ms) though each run's
    /// cleanup queued a call_rcu (delayed_free_vfsmnt) a few ms before the
    /// next run's synchronize_rcu; with eager callbacks that synchronize would
    /// wait out the callbacks' grace period too (about 2x). Lazy callbacks are
    /// the kernel mechanism that gives the published behaviour.
    pub lazy_flush_ns: Option<Time>,
}

impl RcuParams {
    /// Normal grace period of a non-RT, HZ=1000, 2-CPU machine: uniform 3..8 ms.
    /// Source: docs/kernel-mechanics.md §3.4 ("milliseconds to tens of ms, growing
    /// with CPU count and load"); the lower bound is the first force-quiescent-
    /// state scan, `jiffies_till_first_fqs` = RCU_JIFFIES_TILL_FORCE_QS (3 jiffies
    /// at HZ > 500, kernel/rcu/tree.h) + nr_cpu_ids / RCU_JIFFIES_FQS_DIV (256) =
    /// 3 ms, which is when idle CPUs' quiescent states are noticed; the upper
    /// bound allows a few more jiffies for busy CPUs' ticks and kthread wakeups.
    pub const GP_NORMAL_DEFAULT: GpDuration = GpDuration::Uniform {
        min: 3 * MSEC,
        max: 8 * MSEC,
    };

    /// Expedited grace period on a small non-RT machine: uniform 10..80 us.
    /// Source: docs/kernel-mechanics.md §3.4 ("IPI-driven, microseconds to well
    /// under a millisecond on small machines").
    pub const GP_EXPEDITED_DEFAULT: GpDuration = GpDuration::Uniform {
        min: 10 * USEC,
        max: 80 * USEC,
    };

    /// Normal grace period of a PREEMPT_RT kernel (the E3 machine: 6.15-rc1
    /// PREEMPT_RT with `rcu_normal_after_boot=1`): log-normal, median 21 ms,
    /// sigma 0.05.
    ///
    /// Source: CHOSEN FROM A PUBLISHED FIGURE, no independent measurement.
    /// docs/experiments.md E3 gives 24.55 ms +- 4.4% for a whole `umount`
    /// command on that machine and 3.19 ms +- 5.0% for a deferred `umount -l`
    /// (which waits for no grace period). The sync umount waits for exactly
    /// one expedited-made-normal grace period; the rest (process start,
    /// syscall, tmpfs shutdown) is about the 3.2 ms of the deferred case, so
    /// one normal grace period is ~21 ms. The spread: 4.4% of 24.55 ms is
    /// ~1.1 ms, nearly all of it from the grace period, i.e. ~5% of 21 ms.
    /// Plausible mechanism: on PREEMPT_RT, readers are preemptible and
    /// callbacks are offloaded, so a grace period typically spans a few
    /// force-quiescent-state scans and rcuc/rcuog wakeups. The non-RT machine
    /// keeps [`Self::GP_NORMAL_DEFAULT`].
    pub const GP_NORMAL_RT: GpDuration = GpDuration::LogNormal {
        median: 21 * MSEC,
        sigma: 0.05,
    };

    /// Defaults for a non-RT or PREEMPT_RT kernel (`rcu_normal_after_boot`
    /// follows `preempt_rt`, as in kernel/rcu/update.c; the normal grace
    /// period is [`Self::GP_NORMAL_RT`] on PREEMPT_RT).
    pub fn for_kernel(preempt_rt: bool) -> Self {
        RcuParams {
            gp_normal: if preempt_rt {
                Self::GP_NORMAL_RT
            } else {
                Self::GP_NORMAL_DEFAULT
            },
            gp_expedited: Self::GP_EXPEDITED_DEFAULT,
            preempt_rt,
            rcu_normal_after_boot: preempt_rt,
            callback_cost_ns: 0,
            lazy_flush_ns: Some(Self::LAZY_FLUSH_NS),
        }
    }

    /// `jiffies_lazy_flush`: 10 s (kernel/rcu/tree_nocb.h, LAZY_FLUSH_JIFFIES).
    pub const LAZY_FLUSH_NS: Time = 10_000 * MSEC;

    /// Checks every distribution.
    pub fn validate(&self) -> Result<(), RcuParamError> {
        self.gp_normal.validate("gp_normal")?;
        self.gp_expedited.validate("gp_expedited")
    }
}

impl Default for RcuParams {
    /// A non-RT kernel.
    fn default() -> Self {
        Self::for_kernel(false)
    }
}

// ---------------------------------------------------------------------- stats

/// Counters of one RCU instance.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RcuStats {
    /// Normal grace periods completed.
    pub gps: u64,
    /// Sum of their lengths, ns.
    pub gp_total_ns: u64,
    /// Longest one, ns.
    pub gp_max_ns: u64,
    /// Time normal grace periods ran past their sampled length because a
    /// pre-existing reader was still inside its section, ns.
    pub gp_reader_wait_ns: u64,
    /// Expedited grace periods completed (0 when they are all normal).
    pub expedited_gps: u64,
    /// Sum of their lengths, ns.
    pub exp_total_ns: u64,
    /// Longest one, ns.
    pub exp_max_ns: u64,
    /// Time expedited grace periods waited on readers past their length, ns.
    pub exp_reader_wait_ns: u64,
    /// `synchronize_rcu()` calls.
    pub synchronize_calls: u64,
    /// `synchronize_rcu_expedited()` calls (including those made normal).
    pub expedited_calls: u64,
    /// `call_rcu()` calls.
    pub callbacks_queued: u64,
    /// Callbacks invoked.
    pub callbacks_invoked: u64,
}

impl RcuStats {
    /// Mean normal grace-period length, ns (`None` before the first one).
    pub fn gp_mean_ns(&self) -> Option<f64> {
        (self.gps > 0).then(|| self.gp_total_ns as f64 / self.gps as f64)
    }

    /// Mean expedited grace-period length, ns.
    pub fn exp_mean_ns(&self) -> Option<f64> {
        (self.expedited_gps > 0).then(|| self.exp_total_ns as f64 / self.expedited_gps as f64)
    }
}

// ------------------------------------------------------------- state machine

/// Name the tracepoints print (`rcu_state.name`; "rcu_preempt" on kernels with
/// CONFIG_PREEMPT_RCU, which distro PREEMPT_DYNAMIC and PREEMPT_RT kernels have).
const RCU_NAME: &str = "rcu_preempt";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum GpKind {
    Normal,
    Expedited,
}

/// The running grace period.
#[derive(Clone, Copy)]
struct CurGp {
    start: Time,
    /// Sampled length, ns.
    len: Time,
    /// Readers with an id below this existed when it started and hold it.
    reader_snap: u64,
    /// Its sampled length has passed.
    elapsed: bool,
}

/// One grace-period sequence: normal (`rcu_state.gp_seq`) or expedited
/// (`rcu_state.expedited_sequence`).
struct GpMachine {
    seq: Cell<u64>,
    /// Furthest snapshot anyone asked for (`gp_seq_needed`).
    needed: Cell<u64>,
    cur: Cell<Option<CurGp>>,
    /// A start is scheduled for the current instant (the GP kthread was woken).
    start_pending: Cell<bool>,
    rng: RefCell<SimRng>,
    /// `synchronize_rcu*()` callers sleep here.
    wq: WaitQueue,
}

impl GpMachine {
    fn new(sim: &Sim, rng_stream: &str, label: &str) -> Self {
        GpMachine {
            seq: Cell::new(0),
            needed: Cell::new(0),
            cur: Cell::new(None),
            start_pending: Cell::new(false),
            rng: RefCell::new(sim.rng(rng_stream)),
            wq: WaitQueue::with_label(label),
        }
    }
}

struct Callback {
    snap: u64,
    f: Box<dyn FnOnce()>,
}

struct RcuInner {
    sim: Sim,
    params: RcuParams,
    normal: GpMachine,
    exp: GpMachine,
    /// Ids of readers inside a read-side critical section.
    readers: RefCell<BTreeSet<u64>>,
    next_reader: Cell<u64>,
    /// Callbacks waiting for their grace period, in queue order.
    cbs_waiting: RefCell<VecDeque<Callback>>,
    /// Callbacks whose grace period ended, not yet invoked.
    cbs_ready: RefCell<VecDeque<Box<dyn FnOnce()>>>,
    cbs_queued: Cell<u64>,
    cbs_invoked: Cell<u64>,
    invoking: Cell<bool>,
    /// `rcu_barrier()` callers sleep here.
    barrier_wq: WaitQueue,
    stats: RefCell<RcuStats>,
}

/// The RCU state of one modelled kernel. Cheap to clone (an `Rc`).
#[derive(Clone)]
pub struct Rcu(Rc<RcuInner>);

impl Rcu {
    /// RCU for `sim`. Normal grace-period lengths come from the RNG substream
    /// `"rcu.gp"`, expedited ones from `"rcu.gp_exp"`.
    pub fn new(sim: &Sim, params: RcuParams) -> Result<Self, RcuParamError> {
        params.validate()?;
        Ok(Rcu(Rc::new(RcuInner {
            sim: sim.clone(),
            params,
            normal: GpMachine::new(sim, "rcu.gp", "rcu:synchronize_rcu"),
            exp: GpMachine::new(sim, "rcu.gp_exp", "rcu:synchronize_rcu_expedited"),
            readers: RefCell::new(BTreeSet::new()),
            next_reader: Cell::new(0),
            cbs_waiting: RefCell::new(VecDeque::new()),
            cbs_ready: RefCell::new(VecDeque::new()),
            cbs_queued: Cell::new(0),
            cbs_invoked: Cell::new(0),
            invoking: Cell::new(false),
            barrier_wq: WaitQueue::with_label("rcu:rcu_barrier"),
            stats: RefCell::new(RcuStats::default()),
        })))
    }

    /// The parameters in force.
    pub fn params(&self) -> &RcuParams {
        &self.0.params
    }

    /// `rcu_read_lock()`: enters a read-side critical section, left when the
    /// guard drops (`rcu_read_unlock()`). Grace periods that start while it is
    /// held wait for it.
    pub fn rcu_read_lock(&self) -> RcuReadGuard {
        let id = self.0.next_reader.get();
        self.0.next_reader.set(id + 1);
        self.0.readers.borrow_mut().insert(id);
        RcuReadGuard {
            rcu: self.0.clone(),
            id,
        }
    }

    /// `synchronize_rcu()`: returns once a full normal grace period that
    /// started after the call has ended.
    pub fn synchronize_rcu(&self) -> impl Future<Output = ()> {
        let inner = self.0.clone();
        async move {
            inner.stats.borrow_mut().synchronize_calls += 1;
            inner.wait_gp(GpKind::Normal).await;
        }
    }

    /// `synchronize_rcu_expedited()`: the same guarantee from a short
    /// expedited grace period, or from a normal one when `rcu_gp_is_normal()`.
    pub fn synchronize_rcu_expedited(&self) -> impl Future<Output = ()> {
        let inner = self.0.clone();
        async move {
            inner.stats.borrow_mut().expedited_calls += 1;
            let kind = if inner.rcu_gp_is_normal() {
                GpKind::Normal
            } else {
                GpKind::Expedited
            };
            inner.wait_gp(kind).await;
        }
    }

    /// `rcu_gp_is_normal()`: whether expedited requests get a normal grace
    /// period (here: `rcu_normal_after_boot`; the model always runs after boot).
    pub fn rcu_gp_is_normal(&self) -> bool {
        self.0.rcu_gp_is_normal()
    }

    /// `call_rcu()`: `f` runs after a normal grace period that starts after
    /// this call has ended; the caller does not block. Callbacks run in the
    /// order they were queued. With CONFIG_RCU_LAZY ([`RcuParams::lazy_flush_ns`])
    /// the callback is lazy: it rides on grace periods others start and asks
    /// for one itself only after the lazy flush delay.
    pub fn call_rcu(&self, f: impl FnOnce() + 'static) {
        self.queue_callback(f, self.0.params.lazy_flush_ns);
    }

    /// `call_rcu_hurry()`: never lazy; requests a grace period at once (what
    /// `queue_rcu_work()` uses).
    pub fn call_rcu_hurry(&self, f: impl FnOnce() + 'static) {
        self.queue_callback(f, None);
    }

    fn queue_callback(&self, f: impl FnOnce() + 'static, lazy: Option<Time>) {
        let inner = &self.0;
        let snap = rcu_seq_snap(inner.normal.seq.get());
        inner.cbs_waiting.borrow_mut().push_back(Callback {
            snap,
            f: Box::new(f),
        });
        inner.cbs_queued.set(inner.cbs_queued.get() + 1);
        inner.stats.borrow_mut().callbacks_queued += 1;
        match lazy {
            None => inner.request(GpKind::Normal, snap),
            Some(d) => {
                let me = inner.clone();
                inner
                    .sim
                    .schedule_in(d, move || me.request(GpKind::Normal, snap));
            }
        }
    }

    /// `rcu_barrier()`: returns once every callback queued before the call has
    /// been invoked.
    pub fn rcu_barrier(&self) -> impl Future<Output = ()> {
        let inner = self.0.clone();
        async move {
            let target = inner.cbs_queued.get();
            // rcu_barrier() flushes lazy callbacks: they need a grace period now.
            let snap = inner.cbs_waiting.borrow().iter().map(|c| c.snap).max();
            if let Some(snap) = snap {
                inner.request(GpKind::Normal, snap);
            }
            let i = inner.clone();
            inner
                .barrier_wq
                .wait_event(&inner.sim, move || i.cbs_invoked.get() >= target)
                .await;
        }
    }

    /// `get_state_synchronize_rcu()`: a cookie for `poll_state_synchronize_rcu()`
    /// (does not request a grace period).
    pub fn get_state_synchronize_rcu(&self) -> u64 {
        rcu_seq_snap(self.0.normal.seq.get())
    }

    /// `start_poll_synchronize_rcu()`: as `get_state_synchronize_rcu()`, and
    /// makes sure the needed grace period will run.
    pub fn start_poll_synchronize_rcu(&self) -> u64 {
        let snap = self.get_state_synchronize_rcu();
        self.0.request(GpKind::Normal, snap);
        snap
    }

    /// `poll_state_synchronize_rcu()`: whether the grace period the cookie
    /// needs has ended.
    pub fn poll_state_synchronize_rcu(&self, cookie: u64) -> bool {
        rcu_seq_done(self.0.normal.seq.get(), cookie)
    }

    /// `rcu_state.gp_seq` (kernel encoding: two low bits are the state).
    pub fn gp_seq(&self) -> u64 {
        self.0.normal.seq.get()
    }

    /// `rcu_state.expedited_sequence`.
    pub fn exp_seq(&self) -> u64 {
        self.0.exp.seq.get()
    }

    /// Whether a normal grace period is running.
    pub fn gp_in_progress(&self) -> bool {
        rcu_seq_state(self.gp_seq()) != 0
    }

    /// Whether an expedited grace period is running.
    pub fn exp_gp_in_progress(&self) -> bool {
        rcu_seq_state(self.exp_seq()) != 0
    }

    /// Readers inside a read-side critical section now.
    pub fn nr_readers(&self) -> usize {
        self.0.readers.borrow().len()
    }

    /// Callbacks queued and not yet invoked.
    pub fn pending_callbacks(&self) -> u64 {
        self.0.cbs_queued.get() - self.0.cbs_invoked.get()
    }

    /// A copy of the counters.
    pub fn stats(&self) -> RcuStats {
        self.0.stats.borrow().clone()
    }
}

/// An RCU read-side critical section; dropping it is `rcu_read_unlock()`.
/// Holding it across an `.await` (the reader preempted or sleeping inside its
/// section) holds every grace period that started while it was held.
#[must_use = "dropping the guard at once ends the read-side critical section"]
pub struct RcuReadGuard {
    rcu: Rc<RcuInner>,
    id: u64,
}

impl Drop for RcuReadGuard {
    fn drop(&mut self) {
        self.rcu.readers.borrow_mut().remove(&self.id);
        // rcu_read_unlock_special(): report the quiescent state if a grace
        // period was waiting for this reader.
        self.rcu.try_end(GpKind::Normal);
        self.rcu.try_end(GpKind::Expedited);
    }
}

impl RcuInner {
    fn machine(&self, kind: GpKind) -> &GpMachine {
        match kind {
            GpKind::Normal => &self.normal,
            GpKind::Expedited => &self.exp,
        }
    }

    fn rcu_gp_is_normal(&self) -> bool {
        self.params.rcu_normal_after_boot
    }

    /// Snapshot, request, sleep until done.
    async fn wait_gp(self: Rc<Self>, kind: GpKind) {
        let snap = rcu_seq_snap(self.machine(kind).seq.get());
        self.request(kind, snap);
        let me = self.clone();
        let wq = self.machine(kind).wq.clone();
        wq.wait_event(&self.sim, move || {
            rcu_seq_done(me.machine(kind).seq.get(), snap)
        })
        .await;
    }

    /// `rcu_start_this_gp()`: records that `snap` is needed. If no grace period
    /// is running, wakes the GP kthread, which starts one at this same instant
    /// once the tasks already runnable now have run, so every request made at
    /// one instant shares that grace period. A running grace period starts the
    /// next one itself when it ends.
    fn request(self: &Rc<Self>, kind: GpKind, snap: u64) {
        let m = self.machine(kind);
        if snap > m.needed.get() {
            m.needed.set(snap);
        }
        if m.cur.get().is_none() && !m.start_pending.get() {
            m.start_pending.set(true);
            let me = self.clone();
            self.sim.schedule_in(0, move || {
                let m = me.machine(kind);
                m.start_pending.set(false);
                if m.cur.get().is_none() && !rcu_seq_done(m.seq.get(), m.needed.get()) {
                    me.start_gp(kind);
                }
            });
        }
    }

    /// `rcu_gp_init()`.
    fn start_gp(self: &Rc<Self>, kind: GpKind) {
        let m = self.machine(kind);
        let now = self.sim.now();
        let len = match kind {
            GpKind::Normal => &self.params.gp_normal,
            GpKind::Expedited => &self.params.gp_expedited,
        }
        .sample(&mut m.rng.borrow_mut());
        m.seq.set(rcu_seq_start(m.seq.get()));
        m.cur.set(Some(CurGp {
            start: now,
            len,
            reader_snap: self.next_reader.get(),
            elapsed: false,
        }));
        self.trace_gp(kind, "start");
        let me = self.clone();
        self.sim.schedule_at(now.saturating_add(len), move || {
            let m = me.machine(kind);
            if let Some(mut c) = m.cur.get() {
                c.elapsed = true;
                m.cur.set(Some(c));
            }
            me.try_end(kind);
        });
    }

    /// Ends the running grace period if its length has passed and no reader
    /// that predates it is still inside its section.
    fn try_end(self: &Rc<Self>, kind: GpKind) {
        let m = self.machine(kind);
        let Some(c) = m.cur.get() else { return };
        if !c.elapsed {
            return;
        }
        let oldest = self.readers.borrow().first().copied();
        if oldest.is_some_and(|r| r < c.reader_snap) {
            return;
        }
        self.end_gp(kind, c);
    }

    /// `rcu_gp_cleanup()`: advance `gp_seq`, wake the waiters, start the next
    /// grace period if one is needed, then invoke the callbacks now ready.
    fn end_gp(self: &Rc<Self>, kind: GpKind, c: CurGp) {
        let m = self.machine(kind);
        let now = self.sim.now();
        m.seq.set(rcu_seq_endval(m.seq.get()));
        m.cur.set(None);
        let dur = now - c.start;
        let held = now.saturating_sub(c.start.saturating_add(c.len));
        {
            let mut st = self.stats.borrow_mut();
            match kind {
                GpKind::Normal => {
                    st.gps += 1;
                    st.gp_total_ns += dur;
                    st.gp_max_ns = st.gp_max_ns.max(dur);
                    st.gp_reader_wait_ns += held;
                }
                GpKind::Expedited => {
                    st.expedited_gps += 1;
                    st.exp_total_ns += dur;
                    st.exp_max_ns = st.exp_max_ns.max(dur);
                    st.exp_reader_wait_ns += held;
                }
            }
        }
        self.trace_gp(kind, "end");
        m.wq.wake_up_all();
        if !rcu_seq_done(m.seq.get(), m.needed.get()) {
            self.start_gp(kind);
        }
        if kind == GpKind::Normal {
            self.advance_cbs();
        }
    }

    fn trace_gp(&self, kind: GpKind, event: &'static str) {
        match kind {
            GpKind::Normal => {
                let seq = self.normal.seq.get();
                self.sim
                    .trace("rcu_grace_period", || format!("{RCU_NAME} {seq} {event}"));
            }
            GpKind::Expedited => {
                let seq = self.exp.seq.get();
                self.sim.trace("rcu_exp_grace_period", || {
                    format!("{RCU_NAME} {seq:#x} {event}")
                });
            }
        }
    }

    /// `rcu_advance_cbs()`: callbacks whose grace period has ended become ready.
    fn advance_cbs(self: &Rc<Self>) {
        let seq = self.normal.seq.get();
        {
            let mut waiting = self.cbs_waiting.borrow_mut();
            let mut ready = self.cbs_ready.borrow_mut();
            while waiting.front().is_some_and(|cb| rcu_seq_done(seq, cb.snap)) {
                let cb = waiting.pop_front().expect("front exists");
                ready.push_back(cb.f);
            }
        }
        self.invoke_cbs();
    }

    /// `rcu_do_batch()`: invokes ready callbacks in order, inline when they
    /// cost nothing, else one every `callback_cost_ns`.
    fn invoke_cbs(self: &Rc<Self>) {
        if self.invoking.get() {
            return; // the running batch picks the new ones up
        }
        let cost = self.params.callback_cost_ns;
        if cost == 0 {
            self.invoking.set(true);
            let mut any = false;
            while let Some(f) = self.pop_ready() {
                self.run_cb(f);
                any = true;
            }
            self.invoking.set(false);
            if any {
                self.barrier_wq.wake_up_all();
            }
        } else if !self.cbs_ready.borrow().is_empty() {
            self.invoking.set(true);
            self.schedule_next_cb(cost);
        }
    }

    fn schedule_next_cb(self: &Rc<Self>, cost: Time) {
        let me = self.clone();
        self.sim.schedule_in(cost, move || {
            if let Some(f) = me.pop_ready() {
                me.run_cb(f);
                me.barrier_wq.wake_up_all();
            }
            if me.cbs_ready.borrow().is_empty() {
                me.invoking.set(false);
            } else {
                me.schedule_next_cb(cost);
            }
        });
    }

    fn pop_ready(&self) -> Option<Box<dyn FnOnce()>> {
        self.cbs_ready.borrow_mut().pop_front()
    }

    fn run_cb(&self, f: Box<dyn FnOnce()>) {
        f();
        self.cbs_invoked.set(self.cbs_invoked.get() + 1);
        self.stats.borrow_mut().callbacks_invoked += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seq_encoding_matches_kernel() {
        // Idle at 8: a caller needs the GP 8 -> 9 -> 12.
        assert_eq!(rcu_seq_snap(8), 12);
        // Running at 9: the current GP ends at 12, the caller needs 12 -> 13 -> 16.
        assert_eq!(rcu_seq_snap(9), 16);
        assert_eq!(rcu_seq_start(8), 9);
        assert_eq!(rcu_seq_endval(9), 12);
        assert!(rcu_seq_done(12, 12));
        assert!(!rcu_seq_done(9, 12));
        assert_eq!(rcu_seq_state(9), 1);
        assert_eq!(rcu_seq_state(12), 0);
    }

    #[test]
    fn bad_params_are_errors() {
        let sim = Sim::new(1);
        let p = RcuParams {
            gp_normal: GpDuration::Uniform { min: 5, max: 4 },
            ..RcuParams::default()
        };
        assert!(matches!(
            Rcu::new(&sim, p),
            Err(RcuParamError::UniformMinAboveMax { .. })
        ));
        let p = RcuParams {
            gp_expedited: GpDuration::LogNormal {
                median: 10,
                sigma: f64::NAN,
            },
            ..RcuParams::default()
        };
        assert!(matches!(
            Rcu::new(&sim, p),
            Err(RcuParamError::BadSigma { .. })
        ));
        let p = RcuParams {
            gp_normal: GpDuration::LogNormal {
                median: 0,
                sigma: 0.5,
            },
            ..RcuParams::default()
        };
        assert!(matches!(
            Rcu::new(&sim, p),
            Err(RcuParamError::ZeroMedian { .. })
        ));
    }

    #[test]
    fn samples_stay_in_range() {
        let sim = Sim::new(3);
        let mut rng = sim.rng("t");
        for _ in 0..1000 {
            let t = RcuParams::GP_NORMAL_DEFAULT.sample(&mut rng);
            assert!((3 * MSEC..=8 * MSEC).contains(&t));
        }
        let ln = GpDuration::LogNormal {
            median: MSEC,
            sigma: 0.0,
        };
        assert_eq!(ln.sample(&mut rng), MSEC);
    }
}
