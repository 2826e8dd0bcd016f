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
//! Grace periods as a mechanism ([`GpDuration::FromMachine`], the default):
//! - Normal: `rcu_gp_init()` snapshots every CPU (through the scheduler's
//!   [`CpuRcuView`]); the GP kthread sleeps `jiffies_till_first_fqs` (then
//!   `jiffies_till_next_fqs` between scans; `rcu_init_geometry()` defaults
//!   from HZ and nr_cpu_ids) in `schedule_timeout()`, whose timer the wheel
//!   fires on the tick after its expiry jiffy ([`super::timer`]), and each
//!   force-quiescent-state scan reports the
//!   dyntick-idle CPUs; a busy CPU notices the grace period at its first
//!   tick (`note_gp_changes()`) and reports at a later one once it passed a
//!   quiescent state (with CONFIG_PREEMPT_RCU any tick outside a
//!   preempt-disabled section; without it a context switch or the
//!   `rcu_urgent_qs` forcing after `jiffies_to_sched_qs`). Ticks fall on
//!   jiffy boundaries on every CPU. Explicit `rcu_read_lock()` guards hold
//!   the grace period as preemptible readers do (PREEMPT_RT: a preempted
//!   reader extends it).
//! - Waiting: with `rcu_normal_wake_from_gp` (default on up to 16 CPUs, as
//!   since 6.17) `synchronize_rcu()` requests the grace period at once and
//!   the cleanup wakes it; without it, `wait_rcu_gp(call_rcu_hurry)`: the
//!   caller waits for its own callback.
//! - Callbacks (`call_rcu()`, kernel/rcu/tree_nocb.h for offloading): on a
//!   non-offloaded CPU the grace period is requested at the CPU's next tick
//!   (`rcu_pending()` -> `rcu_core()` -> `rcu_accelerate_cbs_unlocked()`)
//!   and the callbacks run at the first tick after it ended; on offloaded
//!   CPUs (`rcu_nocbs`) the rcuog kthread requests it at once and rcuoc
//!   invokes them at its end. Only offloaded callbacks can be lazy
//!   (CONFIG_RCU_LAZY: up to 10 s); `synchronize_rcu()` is never lazy.
//! - Expedited: setup plus one IPI per non-idle CPU (tens of microseconds);
//!   `rcu_normal_after_boot` makes it a normal one.
//!
//! Simplified:
//! - A context switch is a change of the task on a CPU in the model's
//!   scheduler, so a task that gives up the CPU between two `cpu()` requests
//!   passes a quiescent state; tasks outside `cpu()` are not on a CPU (user
//!   mode is not told apart from kernel mode). No rcu_node tree (a flat
//!   ->qsmask); no wakeup latency of the GP, rcuc, rcuog or rcuoc kthreads
//!   (the expedited path's `rcu_exp_gp_kworker` and its caller do pay the
//!   machine's idle-CPU wakeup latency, which is most of that path's cost);
//!   no RCU priority boosting (CONFIG_RCU_BOOST: the scheduler has no
//!   real-time priorities). Unit tests can
//!   stub a length with a distribution ([`GpDuration::Fixed`] ...): such a grace
//!   period ends when its sampled length has passed AND every guard that
//!   existed when it started is dropped.
//! - One callback list for all CPUs (every CPU ticks on the same
//!   boundaries, so "the CPU's next tick" is the next jiffy boundary), all
//!   CPUs offloaded or none; callbacks queued before a tick get their
//!   grace period at that tick even when one is already running (the
//!   kernel waits for the tick after it ends when the CPU already reported;
//!   the snapshot is the same). Callbacks run in global queue order from a
//!   timer callback (standing for RCU_SOFTIRQ, rcuc or rcuoc), each taking
//!   `callback_cost_ns`. With a stub length, `call_rcu()` requests the
//!   grace period at once and callbacks run at its end.
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

use super::sched::{CpuRcuView, Sched};
use super::timer::schedule_timeout_end;
use super::wait::{Completion, WaitQueue};

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
    /// From the mechanism: the grace-period kthread's force-quiescent-state
    /// scans and every CPU's quiescent states as the scheduler reports them
    /// (normal), or IPIs to the non-idle CPUs (expedited). The default.
    FromMachine,
    /// Always this many ns (a stub for unit tests of RCU users).
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
            GpDuration::FromMachine | GpDuration::Fixed(_) => Ok(()),
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
            GpDuration::FromMachine => 0,
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

/// `RCU_JIFFIES_TILL_FORCE_QS` (kernel/rcu/tree.h): jiffies the grace-period
/// kthread waits before its first force-quiescent-state scan,
/// `1 + (HZ > 250) + (HZ > 500)`.
pub fn rcu_jiffies_till_force_qs(hz: u64) -> u64 {
    1 + u64::from(hz > 250) + u64::from(hz > 500)
}

/// `WAKE_FROM_GP_CPU_THRESHOLD` (kernel/rcu/tree.c): on machines with at
/// most this many CPUs `rcu_normal_wake_from_gp` defaults on, and
/// `synchronize_rcu()` callers are woken by the grace-period cleanup itself
/// instead of by a callback.
pub const WAKE_FROM_GP_CPU_THRESHOLD: usize = 16;

/// `RCU_JIFFIES_FQS_DIV` (kernel/rcu/tree.h): one more jiffy per 256 CPUs.
pub const RCU_JIFFIES_FQS_DIV: u64 = 256;

/// RCU parameters of one modelled kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct RcuParams {
    /// Length of a normal grace period: [`GpDuration::FromMachine`] (the
    /// mechanism) unless a test stubs it.
    pub gp_normal: GpDuration,
    /// Length of an expedited grace period: [`GpDuration::FromMachine`] unless
    /// stubbed.
    pub gp_expedited: GpDuration,
    /// `CONFIG_HZ`, ticks per second: ticks are when busy CPUs report
    /// quiescent states and the unit of the kthread's sleeps.
    pub hz: u64,
    /// `nr_cpu_ids`.
    pub nr_cpus: usize,
    /// PREEMPT_RT kernel (CONFIG_PREEMPT_RT). Sets the default of
    /// `rcu_normal_after_boot`.
    pub preempt_rt: bool,
    /// CONFIG_PREEMPT_RCU: a busy CPU's tick reports a quiescent state when it
    /// is outside any read-side section with preemption enabled
    /// (`rcu_flavor_sched_clock_irq()` in kernel/rcu/tree_plugin.h). Without
    /// it (PREEMPT_NONE/VOLUNTARY builds), a CPU busy in the kernel passes one
    /// only by a context switch or, once the grace period is
    /// `jiffies_to_sched_qs` old, at `cond_resched()` (`rcu_urgent_qs`).
    /// Default true: PREEMPT_RT and PREEMPT_DYNAMIC kernels have it (the live
    /// 6.18 kernel here: CONFIG_PREEMPT_DYNAMIC=y, CONFIG_PREEMPT_RCU=y, read
    /// from /proc/config.gz).
    pub preempt_rcu: bool,
    /// `rcupdate.rcu_normal_after_boot`: after boot, expedited grace periods
    /// are normal ones (`rcu_gp_is_normal()`). Kernel default
    /// `IS_ENABLED(CONFIG_PREEMPT_RT)` (kernel/rcu/update.c).
    pub rcu_normal_after_boot: bool,
    /// Time to invoke one RCU callback, ns (callbacks run one after another
    /// after the grace period ends). Default 0: a callback that frees an
    /// object or queues work costs well under a microsecond.
    pub callback_cost_ns: Time,
    /// Expedited grace period: the requester's setup (the exp kworker's
    /// wakeup, the rcu_node walk of `sync_rcu_exp_select_cpus()`) and the
    /// wakeup of the waiter, ns: 5 us. Estimate: the order of a kworker
    /// wakeup plus a tree walk on a small machine; not measured here.
    pub exp_setup_ns: Time,
    /// Expedited grace period: one IPI to a non-idle CPU and its
    /// `rcu_exp_handler()` report, ns: 2 us each, sent one after another.
    /// Estimate: an x86 IPI round trip is ~1-2 us on bare metal (several us
    /// when each IPI is a VM exit); not measured here.
    pub exp_ipi_ns: Time,
    /// CONFIG_RCU_LAZY (on CPUs whose callbacks are offloaded):
    /// `call_rcu()` callbacks are lazy; they ride on any grace period that
    /// others start and only request one themselves after this long
    /// (`jiffies_lazy_flush`, default 10 s, kernel/rcu/tree_nocb.h).
    /// None: every call_rcu requests a grace period at once.
    /// `synchronize_rcu()` is never lazy. Only offloaded CPUs ([`Self::nocb`])
    /// have lazy callbacks (`rcu_nocb_try_bypass()` is where laziness lives;
    /// CONFIG_RCU_LAZY depends on CONFIG_RCU_NOCB_CPU; with a stub
    /// grace-period length it applies to every CPU). Default on: the live
    /// 6.18 kernel here has CONFIG_RCU_LAZY=y (/proc/config.gz). Set with
    /// `[machine] rcu_lazy`.
    pub lazy_flush_ns: Option<Time>,
    /// `rcutree.rcu_normal_wake_from_gp`: `synchronize_rcu()` callers are
    /// woken by `rcu_gp_cleanup()` itself (`rcu_sr_normal_gp_cleanup()`),
    /// and the grace period is requested at once
    /// (`start_poll_synchronize_rcu()`). Off: `wait_rcu_gp(call_rcu_hurry)`,
    /// the caller queues a callback on its CPU and sleeps until the callback
    /// runs, so it pays the callback path ([`Self::nocb`]). Kernel default:
    /// on for at most `WAKE_FROM_GP_CPU_THRESHOLD` (16) CPUs since 6.17
    /// (commit a7f6af1322ad, "rcu: Enable rcu_normal_wake_from_gp on small
    /// systems"), off before (6.9-6.16; the path did not exist before 6.9).
    /// Set with `[machine] rcu_normal_wake_from_gp`.
    pub rcu_normal_wake_from_gp: bool,
    /// Every CPU's callbacks are offloaded to rcuog/rcuoc kthreads
    /// (`rcu_nocbs=` covering all CPUs, or CONFIG_RCU_NOCB_CPU_DEFAULT_ALL;
    /// kernel/rcu/tree_nocb.h). Offloaded: a callback queued on an empty
    /// list wakes the rcuog kthread at once (`__call_rcu_nocb_wake()` ->
    /// `wake_nocb_gp()`), which requests the grace period; `rcu_gp_cleanup()`
    /// wakes rcuog (`rcu_nocb_gp_cleanup()`), which wakes rcuoc to invoke
    /// the ready callbacks: no tick in between. Not offloaded: `call_rcu()`
    /// only enqueues (`__call_rcu_core()` starts nothing for a short list);
    /// the CPU's next tick finds "RCU idle with callbacks needing a grace
    /// period" (`rcu_pending()` -> `rcu_core()` ->
    /// `rcu_accelerate_cbs_unlocked()`), which requests it, and the
    /// callbacks run from `rcu_core()` at the first tick after it ended
    /// (`note_gp_changes()` -> `rcu_advance_cbs()` -> `rcu_do_batch()`; on
    /// PREEMPT_RT in the rcuc kthread, `use_softirq` being off). Default
    /// off: no `rcu_nocbs=` and CONFIG_RCU_NOCB_CPU_DEFAULT_ALL=n, as on the
    /// live 6.18 kernel here (/proc/cmdline, /proc/config.gz). Set with
    /// `[machine] rcu_nocbs`.
    pub nocb: bool,
}

impl RcuParams {
    /// Defaults for a non-RT or PREEMPT_RT kernel with 1 CPU at HZ=1000
    /// (`rcu_normal_after_boot` follows `preempt_rt`, as in
    /// kernel/rcu/update.c). Use [`Self::for_machine`] for a real machine.
    pub fn for_kernel(preempt_rt: bool) -> Self {
        Self::for_machine(1, 1000, preempt_rt)
    }

    /// Defaults for `nr_cpus` CPUs at `hz`.
    pub fn for_machine(nr_cpus: usize, hz: u64, preempt_rt: bool) -> Self {
        RcuParams {
            gp_normal: GpDuration::FromMachine,
            gp_expedited: GpDuration::FromMachine,
            hz: hz.max(1),
            nr_cpus: nr_cpus.max(1),
            preempt_rt,
            preempt_rcu: true,
            rcu_normal_after_boot: preempt_rt,
            callback_cost_ns: 0,
            exp_setup_ns: 5 * USEC,
            exp_ipi_ns: 2 * USEC,
            lazy_flush_ns: Some(Self::LAZY_FLUSH_NS),
            rcu_normal_wake_from_gp: nr_cpus.max(1) <= WAKE_FROM_GP_CPU_THRESHOLD,
            nocb: false,
        }
    }

    /// `jiffies_lazy_flush`: 10 s (kernel/rcu/tree_nocb.h, LAZY_FLUSH_JIFFIES).
    pub const LAZY_FLUSH_NS: Time = 10_000 * MSEC;

    /// One jiffy, ns.
    pub fn jiffy_ns(&self) -> Time {
        1_000_000_000 / self.hz.max(1)
    }

    /// `jiffies_till_first_fqs` as `rcu_init_geometry()` sets it:
    /// `RCU_JIFFIES_TILL_FORCE_QS + nr_cpu_ids / RCU_JIFFIES_FQS_DIV`, jiffies.
    pub fn jiffies_till_first_fqs(&self) -> u64 {
        rcu_jiffies_till_force_qs(self.hz) + self.nr_cpus as u64 / RCU_JIFFIES_FQS_DIV
    }

    /// `jiffies_till_next_fqs`: the same default as the first, jiffies.
    pub fn jiffies_till_next_fqs(&self) -> u64 {
        self.jiffies_till_first_fqs()
    }

    /// `jiffies_to_sched_qs` as `adjust_jiffies_till_sched_qs()` sets it:
    /// `first + 2 * next`, at least `HZ / 10 + nr_cpu_ids / 256`, jiffies.
    pub fn jiffies_to_sched_qs(&self) -> u64 {
        let j = self.jiffies_till_first_fqs() + 2 * self.jiffies_till_next_fqs();
        j.max(self.hz / 10 + self.nr_cpus as u64 / RCU_JIFFIES_FQS_DIV)
    }

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
/// One CPU's part in the running normal grace period (`rcu_data`).
#[derive(Clone, Copy, Default)]
struct CpuQs {
    /// The CPU has noticed the grace period (`rcu_data.gp_seq` caught up,
    /// `core_needs_qs` and `cpu_no_qs` set by `__note_gp_changes()`).
    noticed: bool,
    /// Its context-switch count when it noticed.
    switches: u64,
    /// It has reported its quiescent state (`->qsmask` bit cleared).
    reported: bool,
}

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
    /// Per CPU, for the running mechanism-driven grace period.
    qs: RefCell<Vec<CpuQs>>,
    /// Next force-quiescent-state scan of the running grace period.
    next_fqs: Cell<Time>,
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
            qs: RefCell::new(Vec::new()),
            next_fqs: Cell::new(0),
        }
    }
}

/// A queued callback.
struct Callback {
    /// The `gp_seq` value after which it may run ([`UNACCELERATED`] until
    /// `rcu_accelerate_cbs()` has given it one).
    snap: u64,
    /// What it does.
    f: Box<dyn FnOnce()>,
}

/// The snapshot of a callback not yet given a grace period (it sits in the
/// RCU_NEXT_TAIL segment of a non-offloaded CPU until that CPU's next tick).
const UNACCELERATED: u64 = u64::MAX;

struct RcuInner {
    sim: Sim,
    params: RcuParams,
    /// The scheduler whose CPUs must pass quiescent states (None: every CPU
    /// is taken as idle).
    sched: Option<Sched>,
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
    /// A tick is scheduled to accelerate the non-offloaded callbacks
    /// (`rcu_core()` from `rcu_pending()`).
    accel_pending: Cell<bool>,
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
        Self::with_sched(sim, params, None)
    }

    /// RCU whose grace periods wait for the CPUs of `sched` (see
    /// [`GpDuration::FromMachine`]).
    pub fn with_sched(
        sim: &Sim,
        params: RcuParams,
        sched: Option<Sched>,
    ) -> Result<Self, RcuParamError> {
        params.validate()?;
        Ok(Rcu(Rc::new(RcuInner {
            sim: sim.clone(),
            params,
            sched,
            normal: GpMachine::new(sim, "rcu.gp", "rcu:synchronize_rcu"),
            exp: GpMachine::new(sim, "rcu.gp_exp", "rcu:synchronize_rcu_expedited"),
            readers: RefCell::new(BTreeSet::new()),
            next_reader: Cell::new(0),
            cbs_waiting: RefCell::new(VecDeque::new()),
            cbs_ready: RefCell::new(VecDeque::new()),
            cbs_queued: Cell::new(0),
            cbs_invoked: Cell::new(0),
            invoking: Cell::new(false),
            accel_pending: Cell::new(false),
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
            inner.synchronize_rcu_normal().await;
        }
    }

    /// `synchronize_rcu_expedited()`: the same guarantee from a short
    /// expedited grace period, or from a normal one when `rcu_gp_is_normal()`.
    pub fn synchronize_rcu_expedited(&self) -> impl Future<Output = ()> {
        let inner = self.0.clone();
        async move {
            inner.stats.borrow_mut().expedited_calls += 1;
            if inner.rcu_gp_is_normal() {
                // kernel/rcu/tree_exp.h: "If expedited grace periods are
                // prohibited, fall back to normal" (synchronize_rcu_normal).
                inner.synchronize_rcu_normal().await;
            } else {
                let sched = inner.sched.clone();
                inner.wait_gp(GpKind::Expedited).await;
                // The caller slept in wait_event(rnp->exp_wq[...]); the
                // kworker's rcu_exp_wait_wake() wakes it on its idle CPU.
                if let Some(s) = sched {
                    s.idle_wakeup().await;
                }
            }
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
        self.0.enqueue_cb(Box::new(f), lazy);
    }

    /// `rcu_barrier()`: returns once every callback queued before the call has
    /// been invoked.
    pub fn rcu_barrier(&self) -> impl Future<Output = ()> {
        let inner = self.0.clone();
        async move {
            let target = inner.cbs_queued.get();
            // rcu_barrier() flushes lazy callbacks: they need a grace period
            // now (unaccelerated ones get theirs at the next tick).
            let snap = inner
                .cbs_waiting
                .borrow()
                .iter()
                .map(|c| c.snap)
                .filter(|&s| s != UNACCELERATED)
                .max();
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

    /// Grace periods come from the mechanism, not from a stub distribution.
    fn mech(&self) -> bool {
        self.params.gp_normal == GpDuration::FromMachine
    }

    /// `synchronize_rcu_normal()`: with `rcu_normal_wake_from_gp` the caller
    /// requests the grace period and is woken by its cleanup; without it,
    /// `wait_rcu_gp(call_rcu_hurry)`: a callback that completes the caller,
    /// which then waits for that callback's whole path.
    async fn synchronize_rcu_normal(self: Rc<Self>) {
        if !self.mech() || self.params.rcu_normal_wake_from_gp {
            return self.wait_gp(GpKind::Normal).await;
        }
        let done = Completion::new("rcu:wait_rcu_gp");
        let d = done.clone();
        self.enqueue_cb(Box::new(move || d.complete()), None);
        done.wait_for_completion(&self.sim).await;
    }

    /// `__call_rcu()`: queues `f` on the callback list. On an offloaded CPU
    /// (or with a stub grace period) the callback gets its grace period now:
    /// requested at once, or after the lazy flush delay when `lazy` (only
    /// offloaded CPUs have lazy callbacks). On a non-offloaded CPU it waits
    /// for the CPU's next tick ([`Self::accel_at_tick`]).
    fn enqueue_cb(self: &Rc<Self>, f: Box<dyn FnOnce()>, lazy: Option<Time>) {
        self.cbs_queued.set(self.cbs_queued.get() + 1);
        self.stats.borrow_mut().callbacks_queued += 1;
        if self.mech() && !self.params.nocb {
            self.cbs_waiting.borrow_mut().push_back(Callback {
                snap: UNACCELERATED,
                f,
            });
            if !self.accel_pending.get() {
                self.accel_pending.set(true);
                let me = self.clone();
                self.sim
                    .schedule_at(self.next_tick(self.sim.now()), move || me.accel_at_tick());
            }
            return;
        }
        let snap = rcu_seq_snap(self.normal.seq.get());
        self.cbs_waiting
            .borrow_mut()
            .push_back(Callback { snap, f });
        match lazy {
            None => self.request(GpKind::Normal, snap),
            Some(d) => {
                let me = self.clone();
                self.sim
                    .schedule_in(d, move || me.request(GpKind::Normal, snap));
            }
        }
    }

    /// The tick after a callback was queued on a non-offloaded CPU:
    /// `rcu_pending()` sees callbacks needing a grace period, `rcu_core()`
    /// runs `rcu_accelerate_cbs_unlocked()`, which gives them the grace
    /// period that starts after now (`rcu_seq_snap()`) and requests it
    /// (`rcu_start_this_gp()`). Simplified: done even when a grace period is
    /// running and this CPU already reported (the kernel then waits for the
    /// tick after it ends; the snapshot is the same).
    fn accel_at_tick(self: &Rc<Self>) {
        self.accel_pending.set(false);
        let snap = rcu_seq_snap(self.normal.seq.get());
        let mut any = false;
        for cb in self.cbs_waiting.borrow_mut().iter_mut() {
            if cb.snap == UNACCELERATED {
                cb.snap = snap;
                any = true;
            }
        }
        if any {
            self.request(GpKind::Normal, snap);
        }
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

    /// `rcu_gp_init()`: a new grace period; its length comes from the
    /// mechanism ([`GpDuration::FromMachine`]) or from the stub distribution.
    fn start_gp(self: &Rc<Self>, kind: GpKind) {
        let m = self.machine(kind);
        let now = self.sim.now();
        let dist = match kind {
            GpKind::Normal => &self.params.gp_normal,
            GpKind::Expedited => &self.params.gp_expedited,
        };
        let mech = *dist == GpDuration::FromMachine;
        let len = if !mech {
            dist.sample(&mut m.rng.borrow_mut())
        } else if kind == GpKind::Expedited {
            self.exp_gp_len()
        } else {
            0 // ends when every CPU has reported
        };
        m.seq.set(rcu_seq_start(m.seq.get()));
        m.cur.set(Some(CurGp {
            start: now,
            len,
            reader_snap: self.next_reader.get(),
            elapsed: false,
        }));
        self.trace_gp(kind, "start");
        if mech && kind == GpKind::Normal {
            // rcu_gp_init() sets every CPU's bit in ->qsmask; the kthread then
            // sleeps jiffies_till_first_fqs in swait_event_idle_timeout_exclusive
            // (schedule_timeout: a timer-wheel timer, which fires on the tick
            // after its expiry jiffy, so 1-2 jiffies for a 1-jiffy timeout).
            let view = self.cpu_view();
            *m.qs.borrow_mut() = vec![CpuQs::default(); view.len()];
            let j = self.params.jiffy_ns();
            m.next_fqs.set(schedule_timeout_end(
                now,
                self.params.jiffies_till_first_fqs(),
                j,
            ));
            let seq = m.seq.get();
            let me = self.clone();
            self.sim
                .schedule_at(self.next_tick(now), move || me.gp_tick(seq));
            return;
        }
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

    /// The CPUs as RCU sees them now; with no scheduler, `nr_cpus` idle CPUs.
    fn cpu_view(&self) -> Vec<CpuRcuView> {
        match &self.sched {
            Some(s) => s.cpu_rcu_view(),
            None => vec![
                CpuRcuView {
                    idle: true,
                    nr_switches: 0,
                    preempt_disabled: false,
                };
                self.params.nr_cpus
            ],
        }
    }

    /// The first scheduling-clock tick strictly after `t` (every CPU's tick
    /// is on the same jiffy boundaries: `skew_tick=0`).
    fn next_tick(&self, t: Time) -> Time {
        let j = self.params.jiffy_ns();
        (t / j + 1) * j
    }

    /// Length of an expedited grace period that starts now
    /// (`synchronize_rcu_expedited()` -> `synchronize_rcu_expedited_queue_work()`:
    /// the grace period runs in the `rcu_exp_gp_kworker` kthread, which is
    /// woken first and so starts after the machine's idle-CPU wakeup
    /// latency; then `sync_rcu_exp_select_cpus()`): the setup, then one IPI
    /// per non-idle CPU (idle CPUs are skipped: they are in an extended
    /// quiescent state). A CPU running with preemption disabled answers
    /// only when that section ends; it is counted as one more IPI here.
    fn exp_gp_len(&self) -> Time {
        let busy = self.cpu_view().iter().filter(|v| !v.idle).count() as Time;
        let kworker_wakeup = self
            .sched
            .as_ref()
            .map_or(0, |s| s.params().wakeup_latency_ns);
        kworker_wakeup + self.params.exp_setup_ns + busy * self.params.exp_ipi_ns
    }

    /// One scheduling-clock tick during a normal grace period
    /// (`rcu_sched_clock_irq()` on every busy CPU, and the GP kthread's
    /// `rcu_gp_fqs_loop()` when its timeout expires): CPUs that passed a
    /// quiescent state report it; when none is left, the grace period's
    /// CPU part is over (explicit readers may still hold it).
    fn gp_tick(self: &Rc<Self>, seq: u64) {
        let m = self.machine(GpKind::Normal);
        let Some(mut c) = m.cur.get() else { return };
        if m.seq.get() != seq || c.elapsed {
            return;
        }
        let now = self.sim.now();
        let p = &self.params;
        let j = p.jiffy_ns();
        let fqs = now >= m.next_fqs.get();
        if fqs {
            m.next_fqs
                .set(schedule_timeout_end(now, p.jiffies_till_next_fqs(), j));
        }
        let urgent = now >= c.start + p.jiffies_to_sched_qs() * j;
        let view = self.cpu_view();
        let mut left = 0;
        for (q, v) in m.qs.borrow_mut().iter_mut().zip(&view) {
            if q.reported {
                continue;
            }
            let report = if v.idle {
                // Dyntick-idle: no tick; the FQS scan sees the EQS
                // (rcu_watching_snap_save / rcu_implicit_dynticks_qs).
                fqs
            } else if !q.noticed {
                // The first tick of a busy CPU in this grace period only
                // notices it (rcu_pending: gp_seq moved -> rcu_core ->
                // note_gp_changes sets cpu_no_qs): a quiescent state must
                // follow, reported at a later tick.
                q.noticed = true;
                q.switches = v.nr_switches;
                false
            } else if v.nr_switches != q.switches {
                true // rcu_note_context_switch(), reported at this tick
            } else if v.preempt_disabled {
                false // a tick inside a preempt-disabled section reports nothing
            } else {
                // CONFIG_PREEMPT_RCU: the tick outside a reader is a QS; else
                // only rcu_urgent_qs (cond_resched -> rcu_all_qs) does it.
                p.preempt_rcu || urgent
            };
            if report {
                q.reported = true;
            } else {
                left += 1;
            }
        }
        if left == 0 {
            c.elapsed = true;
            m.cur.set(Some(c));
            self.try_end(GpKind::Normal);
            return;
        }
        let me = self.clone();
        self.sim
            .schedule_at(self.next_tick(now), move || me.gp_tick(seq));
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
        // rcu_normal_wake_from_gp: rcu_gp_cleanup() wakes synchronize_rcu()
        // callers itself (the others wait for their callback, below).
        m.wq.wake_up_all();
        if !rcu_seq_done(m.seq.get(), m.needed.get()) {
            self.start_gp(kind);
        }
        if kind == GpKind::Normal {
            if self.mech() && !self.params.nocb {
                // Callbacks advance when their CPU notices the grace period
                // ended: at its next tick (rcu_pending -> rcu_core ->
                // note_gp_changes -> rcu_advance_cbs -> rcu_do_batch).
                let me = self.clone();
                self.sim
                    .schedule_at(self.next_tick(now), move || me.advance_cbs());
            } else {
                // Offloaded: rcu_nocb_gp_cleanup() wakes rcuog, which wakes
                // rcuoc to invoke them (kthread wakeups taken as 0).
                self.advance_cbs();
            }
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
    fn fqs_geometry_matches_kernel_defaults() {
        let p = RcuParams::for_machine(16, 1000, false);
        assert_eq!(p.jiffies_till_first_fqs(), 3);
        assert_eq!(p.jiffies_to_sched_qs(), 100); // HZ/10 bound
        let p = RcuParams::for_machine(512, 100, false);
        assert_eq!(p.jiffies_till_first_fqs(), 1 + 2);
        assert_eq!(p.jiffies_to_sched_qs(), 10 + 2);
        assert_eq!(rcu_jiffies_till_force_qs(250), 1);
        assert_eq!(rcu_jiffies_till_force_qs(300), 2);
    }

    /// A machine with `cpus` CPUs at `hz`; `busy` of them run one long
    /// non-switching request each; `tweak` adjusts the parameters. Returns
    /// how long synchronize_rcu() (or the expedited variant) called at `at`
    /// took.
    fn sync_on(
        hz: u64,
        cpus: usize,
        busy: usize,
        tweak: impl FnOnce(&mut RcuParams),
        exp: bool,
        at: Time,
    ) -> Time {
        let sim = Sim::new(1);
        let sched = Sched::new(
            &sim,
            crate::model::kernel::sched::SchedParams::for_cpus(cpus),
        );
        let mut p = RcuParams::for_machine(cpus, hz, false);
        tweak(&mut p);
        let rcu = Rcu::with_sched(&sim, p, Some(sched.clone())).unwrap();
        for i in 0..busy {
            let sc = sched.clone();
            sched.spawn(
                &format!("hog{i}"),
                crate::model::kernel::sched::CgroupId::ROOT,
                0,
                async move { sc.cpu(10_000 * MSEC).await },
            );
        }
        let done = Rc::new(Cell::new(0));
        let (s, d) = (sim.clone(), done.clone());
        sim.spawn("sync", async move {
            s.sleep_until(at).await;
            if exp {
                rcu.synchronize_rcu_expedited().await;
            } else {
                rcu.synchronize_rcu().await;
            }
            d.set(s.now());
        });
        sim.run_until(20_000 * MSEC).unwrap();
        done.get() - at
    }

    /// [`sync_on`] with the kernel defaults and a choice of RCU flavour.
    fn one_sync(hz: u64, cpus: usize, busy: usize, preempt_rcu: bool, exp: bool, at: Time) -> Time {
        sync_on(hz, cpus, busy, |p| p.preempt_rcu = preempt_rcu, exp, at)
    }

    #[test]
    fn grace_period_is_longer_at_hz_100() {
        // Idle CPUs are seen at the first FQS scan, a timeout of 3 jiffies
        // at HZ=1000 and 1 at HZ=100 that the timer wheel fires on the tick
        // after its expiry jiffy: 4 and 2 jiffies from the jiffy's start.
        let fast = one_sync(1000, 4, 0, true, false, 500 * USEC);
        let slow = one_sync(100, 4, 0, true, false, 500 * USEC);
        assert_eq!(fast, 4 * MSEC - 500 * USEC);
        assert_eq!(slow, 20 * MSEC - 500 * USEC);
        assert!(slow > 3 * fast);
    }

    #[test]
    fn busy_cpus_that_never_switch_hold_a_non_preemptible_grace_period() {
        // Non-preemptible RCU: a CPU busy in the kernel passes a quiescent
        // state only when rcu_urgent_qs makes it (jiffies_to_sched_qs = 100
        // jiffies at HZ=1000).
        let idle = one_sync(1000, 4, 0, false, false, 0);
        let busy = one_sync(1000, 4, 4, false, false, 0);
        assert_eq!(idle, 4 * MSEC);
        assert_eq!(busy, 100 * MSEC);
        // Preemptible RCU: each busy CPU notices the grace period at its
        // first tick and reports at its second.
        let busy_prcu = one_sync(1000, 4, 4, true, false, 0);
        assert_eq!(busy_prcu, 2 * MSEC);
    }

    #[test]
    fn grace_period_lengthens_with_fewer_cpus_ticking() {
        // Every CPU ticking reports within two ticks; a dyntick-idle CPU
        // does not tick and waits for the FQS scan (a 3-jiffy timeout at
        // HZ=1000, which fires at the 4th tick).
        let all_ticking = one_sync(1000, 4, 4, true, false, 0);
        let two_ticking = one_sync(1000, 4, 2, true, false, 0);
        let none_ticking = one_sync(1000, 4, 0, true, false, 0);
        assert_eq!(all_ticking, 2 * MSEC);
        assert_eq!(two_ticking, 4 * MSEC);
        assert_eq!(none_ticking, 4 * MSEC);
        assert!(two_ticking > all_ticking);
    }

    #[test]
    fn expedited_takes_microseconds() {
        let idle = one_sync(1000, 16, 0, true, true, 0);
        let busy = one_sync(1000, 16, 8, true, true, 0);
        assert_eq!(idle, 5 * USEC);
        assert_eq!(busy, 5 * USEC + 8 * 2 * USEC);
    }

    #[test]
    fn expedited_pays_the_kworker_handoff_on_a_machine_with_wakeup_latency() {
        // The grace period runs in rcu_exp_gp_kworker, woken first, and the
        // caller is woken back: two idle-CPU wakeups around the 5 us of
        // setup (this project's VM: 25 us each).
        let sim = Sim::new(1);
        let mut sp = crate::model::kernel::sched::SchedParams::for_cpus(2);
        sp.wakeup_latency_ns = 25 * USEC;
        let sched = Sched::new(&sim, sp);
        let rcu =
            Rcu::with_sched(&sim, RcuParams::for_machine(2, 250, false), Some(sched)).unwrap();
        let done = Rc::new(Cell::new(0));
        let (s, d) = (sim.clone(), done.clone());
        sim.spawn("sync", async move {
            rcu.synchronize_rcu_expedited().await;
            d.set(s.now());
        });
        sim.run_until(MSEC).unwrap();
        assert_eq!(done.get(), 25 * USEC + 5 * USEC + 25 * USEC);
    }

    #[test]
    fn expedited_is_a_normal_grace_period_on_rt() {
        // PREEMPT_RT: rcu_normal_after_boot defaults on.
        let rt = |p: &mut RcuParams| *p = RcuParams::for_machine(4, 1000, true);
        let exp_rt = sync_on(1000, 4, 0, rt, true, 500 * USEC);
        let exp = one_sync(1000, 4, 0, true, true, 500 * USEC);
        let normal = one_sync(1000, 4, 0, true, false, 500 * USEC);
        assert_eq!(exp, 5 * USEC);
        assert_eq!(exp_rt, normal);
        assert_eq!(exp_rt, 4 * MSEC - 500 * USEC);
    }

    #[test]
    fn wait_rcu_gp_pays_the_callback_path() {
        // Without rcu_normal_wake_from_gp the caller waits for its callback.
        // Not offloaded: the grace period is requested at the next tick
        // (1 ms), its FQS timeout (3 jiffies) fires at 5 ms and ends it, the
        // callback runs at the tick after (6 ms).
        let cb = |p: &mut RcuParams| p.rcu_normal_wake_from_gp = false;
        let at = 500 * USEC;
        let wake = one_sync(1000, 4, 0, true, false, at);
        let tick = sync_on(1000, 4, 0, cb, false, at);
        assert_eq!(wake, 4 * MSEC - at);
        assert_eq!(tick, 6 * MSEC - at);
        // Offloaded (rcuog/rcuoc): no tick on either side.
        let nocb = |p: &mut RcuParams| {
            p.rcu_normal_wake_from_gp = false;
            p.nocb = true;
        };
        assert_eq!(sync_on(1000, 4, 0, nocb, false, at), wake);
        // At HZ=100 (a 1-jiffy FQS timeout) each step is a 10 ms tick: the
        // request at 10, the FQS at 30, the callback at 40 ms.
        let slow = sync_on(100, 4, 0, cb, false, at);
        assert_eq!(slow, 40 * MSEC - at);
    }

    #[test]
    fn preempted_reader_holds_the_grace_period_under_rt() {
        // One CPU shared by a hog and a reader that needs 5 ms of CPU inside
        // its read-side section: preemptible RCU lets the hog preempt the
        // reader, and the grace period lasts until the reader has run.
        let run = |reader: bool| -> (Time, Time) {
            let sim = Sim::new(1);
            let sched = Sched::new(&sim, crate::model::kernel::sched::SchedParams::for_cpus(1));
            let rcu = Rcu::with_sched(
                &sim,
                RcuParams::for_machine(1, 1000, true),
                Some(sched.clone()),
            )
            .unwrap();
            let root = crate::model::kernel::sched::CgroupId::ROOT;
            let sc = sched.clone();
            sched.spawn("hog", root, 0, async move { sc.cpu(10_000 * MSEC).await });
            let unlocked = Rc::new(Cell::new(0));
            if reader {
                let (sc, r, s, u) = (sched.clone(), rcu.clone(), sim.clone(), unlocked.clone());
                sched.spawn("reader", root, 0, async move {
                    let guard = r.rcu_read_lock();
                    sc.cpu(5 * MSEC).await;
                    drop(guard);
                    u.set(s.now());
                });
            }
            let done = Rc::new(Cell::new(0));
            let (s, d) = (sim.clone(), done.clone());
            sim.spawn("sync", async move {
                s.sleep_until(100 * USEC).await;
                rcu.synchronize_rcu().await;
                d.set(s.now());
            });
            sim.run_until(1_000 * MSEC).unwrap();
            (done.get(), unlocked.get())
        };
        let (alone, _) = run(false);
        let (held, unlocked) = run(true);
        assert_eq!(alone, 2 * MSEC);
        // Sharing the CPU, the reader needs well over its 5 ms.
        assert!(unlocked > 5 * MSEC, "reader left at {unlocked}");
        assert!(
            held >= unlocked,
            "gp ended {held} before the reader left {unlocked}"
        );
        assert!(held > alone);
    }

    #[test]
    fn synchronize_rcu_mid_grace_period_waits_for_the_next() {
        let sim = Sim::new(1);
        let rcu = Rcu::new(&sim, RcuParams::for_machine(4, 1000, false)).unwrap();
        let ends = Rc::new(RefCell::new(Vec::new()));
        for at in [0, MSEC] {
            let (s, r, e) = (sim.clone(), rcu.clone(), ends.clone());
            sim.spawn("sync", async move {
                s.sleep_until(at).await;
                r.synchronize_rcu().await;
                e.borrow_mut().push(s.now());
            });
        }
        sim.run_until(MSEC * 100).unwrap();
        // First GP 0..4 ms; the second caller needs the next, 4..8 ms.
        assert_eq!(*ends.borrow(), vec![4 * MSEC, 8 * MSEC]);
        assert_eq!(rcu.stats().gps, 2);
    }
}
