//! The `balance_dirty_pages()` calculator: pause lengths, the task and per-CPU
//! ratelimit state, the ratelimit gate, one iteration of the throttling loop
//! and its tracepoints. Pure: the caller ([`super::balance`]) owns the clock
//! and the counters and sleeps.
//!
//! What the arithmetic does with one and with a hundred writers (measured in
//! wbsim, 2026-11-25):
//! - One writer on a 500 MB/s device (4 GiB machine, default ratios, ext4):
//!   `balance_dirty_pages` takes 185 of the 192 `BANDWIDTH_INTERVAL` slots
//!   of 40 s, the flusher's `do_writepages` update the other 7, with or
//!   without the device's service-time spread, so the rate-limit update is
//!   not starved. Dirty pages settle at 0.93x the setpoint because
//!   `wb_update_dirty_ratelimit` is damped as in the kernel: the step is
//!   `(step >> shift) / 8` with `shift = dirty_ratelimit / (2 step + 1)`,
//!   so within ~10% of the balanced rate `dirty_ratelimit` creeps (tens of
//!   pages/s per update) and within ~4% it stops; and `period` is truncated
//!   to whole jiffies, so a writer dirties a few percent faster than its
//!   `task_ratelimit` and the balanced rate sits below `write_bw`.
//!   pos_ratio makes up the difference, below the setpoint.
//! - A hundred writers whose `task_ratelimit` is far below their share sleep
//!   `max_pause` at every call, and a computed pause above `2 max_pause` is
//!   partly forgiven (`now += min(pause - max_pause, max_pause)`). A writer
//!   whose calls carry many pages (a large `nr_dirtied_pause` left by a
//!   freerun pass, calls not forced early by the per-CPU `bdp_ratelimits`)
//!   is forgiven more than one forced to balance every few pages, which pays
//!   its debt in full. With single-page folios and a device with
//!   service-time spread this spreads shares 0.6x-2.1x; with large folios
//!   (a 256 KiB write is one call of 64 pages for every writer) -6%..+6%.

use std::fmt;

use super::bandwidth::*;
use super::limits::*;

// ---------------------------------------------------------------------------
// pause computation
// ---------------------------------------------------------------------------

/// `wb_max_pause()`: longest pause, jiffies: about wb_dirty / (bw / 8), so a
/// small dirty pool is not drained while tasks sleep; at most MAX_PAUSE
/// (200 ms).
pub fn wb_max_pause(avg_write_bandwidth: u64, wb_dirty: u64, hz: Hz) -> u64 {
    let t = wb_dirty / (1 + avg_write_bandwidth / roundup_pow_of_two(1 + hz.get() / 8)) + 1;
    t.min(hz.max_pause())
}

/// `wb_min_pause()`: (min_pause in jiffies, nr_dirtied_pause in pages). The
/// target pause is 10 ms, plus 10 ms per doubling of concurrent dirtiers
/// (write_bw / dirty_ratelimit), at most max_pause/2; nr_dirtied_pause is
/// what dirty_ratelimit allows in that time, raised toward
/// DIRTY_POLL_THRESH, lowered if task_ratelimit would make the next pause
/// exceed max_pause. Pauses below min_pause are not slept.
pub fn wb_min_pause(
    avg_write_bandwidth: u64,
    dirty_ratelimit: u64,
    max_pause: u64,
    task_ratelimit: u64,
    hz: Hz,
) -> (i64, u64) {
    let hzv = hz.get();
    let hi = ilog2(avg_write_bandwidth) as i64;
    let lo = ilog2(dirty_ratelimit) as i64;
    let hz_pow2 = roundup_pow_of_two(hzv);
    let max_pause = max_pause as i64;
    let dirty_ratelimit = dirty_ratelimit.max(1);

    let mut t: i64 = (hzv as i64 / 100).max(1);
    if hi > lo {
        t += (hi - lo) * (10 * hzv as i64) / 1024;
    }
    t = t.min(1 + max_pause / 2);
    let mut pages = mul_div(dirty_ratelimit, t as u64, hz_pow2);
    if pages < DIRTY_POLL_THRESH {
        t = max_pause;
        pages = mul_div(dirty_ratelimit, t as u64, hz_pow2);
        if pages > DIRTY_POLL_THRESH {
            pages = DIRTY_POLL_THRESH;
            t = (hzv * DIRTY_POLL_THRESH / dirty_ratelimit) as i64;
        }
    }
    let pause = mul_div(hzv, pages, task_ratelimit.saturating_add(1)) as i64;
    if pause > max_pause {
        t = max_pause;
        pages = mul_div(task_ratelimit, t as u64, hz_pow2);
    }
    let min_pause = if pages >= DIRTY_POLL_THRESH {
        1 + t / 2
    } else {
        t
    };
    (min_pause, pages)
}

// ---------------------------------------------------------------------------
// tasks and the ratelimit gate
// ---------------------------------------------------------------------------

/// The dirty-throttling fields of `task_struct`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskDirtyState {
    /// `nr_dirtied`: pages dirtied since the last balance, pages.
    pub nr_dirtied: u64,
    /// `nr_dirtied_pause`: balance after this many, pages (initially 32).
    pub nr_dirtied_pause: u64,
    /// `dirty_paused_when`: end of the last pause (virtual time the task's
    /// rate is accounted from), ns, jiffy-aligned; 0 = never (as the kernel).
    pub dirty_paused_when_ns: u64,
}

impl Default for TaskDirtyState {
    fn default() -> Self {
        TaskDirtyState {
            nr_dirtied: 0,
            nr_dirtied_pause: INIT_NR_DIRTIED_PAUSE,
            dirty_paused_when_ns: 0,
        }
    }
}

impl TaskDirtyState {
    /// After sleeping a [`BdpPause`]: the kernel's
    /// `dirty_paused_when = now + pause; nr_dirtied = 0;
    /// nr_dirtied_pause = nr_dirtied_pause`.
    pub fn after_pause(&mut self, p: &BdpPause) {
        self.dirty_paused_when_ns = p.dirty_paused_when_ns;
        self.nr_dirtied = 0;
        self.nr_dirtied_pause = p.nr_dirtied_pause;
    }
}

/// The per-CPU counters of the ratelimit gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuDirtyRatelimit {
    /// `bdp_ratelimits`: pages dirtied on this CPU since the last forced
    /// balance.
    pub bdp_ratelimits: u64,
    /// `dirty_throttle_leaks`: pages dirtied by exited tasks not yet charged.
    pub dirty_throttle_leaks: u64,
}

/// The accounting part of `folio_account_dirtied()` for throttling: the task's
/// `nr_dirtied` and the CPU's `bdp_ratelimits` grow by `nr` pages.
pub fn account_task_dirtied(task: &mut TaskDirtyState, cpu: &mut CpuDirtyRatelimit, nr: u64) {
    task.nr_dirtied += nr;
    cpu.bdp_ratelimits += nr;
}

/// Task exit (`exit_dirty_throttle`... in `do_exit()` via
/// `__this_cpu_add(dirty_throttle_leaks, nr_dirtied)`): unbalanced pages are
/// left for the next dirtier on this CPU.
pub fn task_exit_dirty_leak(task: &TaskDirtyState, cpu: &mut CpuDirtyRatelimit) {
    cpu.dirty_throttle_leaks += task.nr_dirtied;
}

/// The gate of `balance_dirty_pages_ratelimited_flags()`, after the caller
/// checked the bdi can write back (BDI_CAP_WRITEBACK). The ratelimit is the
/// task's `nr_dirtied_pause` (at most 8 pages while the wb's
/// `dirty_exceeded`); a CPU that dirtied `ratelimit_pages` without a balance
/// forces one; leaked pages of exited tasks are charged here. Returns
/// `Some(pages_dirtied)` when `balance_dirty_pages()` must run.
pub fn balance_dirty_pages_ratelimited_gate(
    task: &mut TaskDirtyState,
    cpu: &mut CpuDirtyRatelimit,
    wb_dirty_exceeded: bool,
    ratelimit_pages: u64,
) -> Option<u64> {
    let mut ratelimit = task.nr_dirtied_pause;
    if wb_dirty_exceeded {
        ratelimit = ratelimit.min(DIRTY_EXCEEDED_RATELIMIT);
    }
    if task.nr_dirtied >= ratelimit {
        cpu.bdp_ratelimits = 0;
    } else if cpu.bdp_ratelimits >= ratelimit_pages {
        cpu.bdp_ratelimits = 0;
        ratelimit = 0;
    }
    if cpu.dirty_throttle_leaks > 0 && task.nr_dirtied < ratelimit {
        let n = cpu.dirty_throttle_leaks.min(ratelimit - task.nr_dirtied);
        cpu.dirty_throttle_leaks -= n;
        task.nr_dirtied += n;
    }
    if task.nr_dirtied >= ratelimit {
        Some(task.nr_dirtied)
    } else {
        None
    }
}

// ---------------------------------------------------------------------------
// tracepoints
// ---------------------------------------------------------------------------

/// Fields of the `balance_dirty_pages` tracepoint, in its units.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BalanceDirtyPagesTrace {
    /// bdi name (`dev_name(bdi->dev)`, e.g. "8:0").
    pub bdi: String,
    /// Hard dirty limit, pages.
    pub limit: u64,
    /// Global setpoint, pages.
    pub setpoint: u64,
    /// Domain dirty (dirty + writeback), pages.
    pub dirty: u64,
    /// setpoint * wb_thresh / (thresh + 1), pages.
    pub wb_setpoint: u64,
    /// wb dirty + writeback, pages.
    pub wb_dirty: u64,
    /// wb dirty_ratelimit, KB/s.
    pub dirty_ratelimit: u64,
    /// Task ratelimit, KB/s.
    pub task_ratelimit: u64,
    /// Pages dirtied this round.
    pub dirtied: u64,
    /// Task's nr_dirtied_pause at trace time, pages.
    pub dirtied_pause: u64,
    /// Time since this balance_dirty_pages() call started, ms.
    pub paused: i64,
    /// Pause, ms (<= 0 when not slept).
    pub pause: i64,
    /// Period for pages_dirtied at task_ratelimit, ms.
    pub period: i64,
    /// Think time since the last pause ended, ms (0 if never paused).
    pub think: i64,
}

impl fmt::Display for BalanceDirtyPagesTrace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bdi {}: limit={} setpoint={} dirty={} wb_setpoint={} wb_dirty={} dirty_ratelimit={} task_ratelimit={} dirtied={} dirtied_pause={} paused={} pause={} period={} think={}",
            self.bdi,
            self.limit,
            self.setpoint,
            self.dirty,
            self.wb_setpoint,
            self.wb_dirty,
            self.dirty_ratelimit,
            self.task_ratelimit,
            self.dirtied,
            self.dirtied_pause,
            self.paused,
            self.pause,
            self.period,
            self.think
        )
    }
}

/// Fields of the `global_dirty_state` tracepoint (emitted by the kernel each
/// time the global thresholds are computed), pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GlobalDirtyStateTrace {
    /// NR_FILE_DIRTY.
    pub nr_dirty: u64,
    /// NR_WRITEBACK.
    pub nr_writeback: u64,
    /// Background threshold.
    pub background_thresh: u64,
    /// Throttle threshold.
    pub dirty_thresh: u64,
    /// global_wb_domain.dirty_limit.
    pub dirty_limit: u64,
    /// NR_DIRTIED (monotonic).
    pub nr_dirtied: u64,
    /// NR_WRITTEN (monotonic).
    pub nr_written: u64,
}

impl fmt::Display for GlobalDirtyStateTrace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "dirty={} writeback={} bg_thresh={} thresh={} limit={} dirtied={} written={}",
            self.nr_dirty,
            self.nr_writeback,
            self.background_thresh,
            self.dirty_thresh,
            self.dirty_limit,
            self.nr_dirtied,
            self.nr_written
        )
    }
}

/// Builds the `global_dirty_state` record.
pub fn global_dirty_state(
    counts: GlobalDirtyCounts,
    thresholds: DirtyThresholds,
    dom: &WbDomain,
    nr_dirtied: u64,
    nr_written: u64,
) -> GlobalDirtyStateTrace {
    GlobalDirtyStateTrace {
        nr_dirty: counts.nr_file_dirty,
        nr_writeback: counts.nr_writeback,
        background_thresh: thresholds.bg_thresh,
        dirty_thresh: thresholds.thresh,
        dirty_limit: dom.dirty_limit,
        nr_dirtied,
        nr_written,
    }
}

// ---------------------------------------------------------------------------
// balance_dirty_pages
// ---------------------------------------------------------------------------

/// BDP flags of `balance_dirty_pages_ratelimited_flags()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BdpFlags {
    /// BDP_ASYNC (io_uring non-blocking writes): return -EAGAIN instead of
    /// sleeping.
    pub bdp_async: bool,
}

/// Everything one iteration of `balance_dirty_pages()` reads.
#[derive(Debug, Clone, Copy)]
pub struct BdpInput<'a> {
    /// Now (`jiffies`), ns.
    pub now_ns: u64,
    /// When this balance_dirty_pages() call began (`start_time`), ns.
    pub start_ns: u64,
    /// `pages_dirtied` argument: the task's nr_dirtied when the call began;
    /// the same on every iteration.
    pub pages_dirtied: u64,
    /// BDP flags.
    pub flags: BdpFlags,
    /// Global thresholds for this task (`domain_dirty_limits_task()`).
    pub thresholds: DirtyThresholds,
    /// Global page counts.
    pub global: GlobalDirtyCounts,
    /// The wb's id (its completions in the domain).
    pub wb_id: u64,
    /// The wb's counts.
    pub wb: WbCounts,
    /// `wb_has_dirty_io()`: whether the wb counts in the bdi's
    /// tot_write_bandwidth.
    pub wb_has_dirty_io: bool,
    /// `writeback_in_progress(wb)`: WB_writeback_running is set.
    pub writeback_in_progress: bool,
    /// The wb's bdi.
    pub bdi: BdiDirtyConfig,
    /// bdi name for the trace.
    pub bdi_name: &'a str,
    /// `bdi_min_ratio`: sum of all bdis' min_ratio, 1/BDI_RATIO_SCALE percent.
    pub bdi_min_ratio_sum: u64,
    /// `bdi->tot_write_bandwidth`, pages/s (0 or <= the wb's own: unscaled).
    pub tot_write_bandwidth: u64,
    /// PF_LOCAL_THROTTLE (loop device, NFS server threads): not throttled
    /// while the wb is under its own freerun ceiling.
    pub local_throttle: bool,
    /// nr_cpu_ids, for wb_stat_error().
    pub nr_cpu_ids: u64,
    /// Tick rate.
    pub hz: Hz,
    /// The memcg domain of a cgroup wb (`mdtc`), None on a wb of the root
    /// memcg.
    pub mdtc: Option<MdtcInput>,
}

/// What one iteration reads of the memcg domain (`mdtc` after
/// `domain_dirty_avail()` and `domain_dirty_limits()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MdtcInput {
    /// The memcg's NR_FILE_DIRTY + NR_WRITEBACK, pages.
    pub dirty: u64,
    /// The memcg domain's thresholds (`domain_dirty_limits_memcg`).
    pub thresholds: DirtyThresholds,
}

/// A pause the kernel would sleep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BdpPause {
    /// Sleep length, ns (whole jiffies, 1..=MAX_PAUSE).
    pub pause_ns: u64,
    /// Period pages_dirtied takes at task_ratelimit, ns (max_pause when
    /// task_ratelimit is 0).
    pub period_ns: u64,
    /// dirty_ratelimit * pos_ratio >> 10, pages/s.
    pub task_ratelimit: u64,
    /// Position ratio (1024 = 1.0).
    pub pos_ratio: u64,
    /// The wb's dirty_exceeded as just set.
    pub dirty_exceeded: bool,
    /// Set `dirty_paused_when` to this after sleeping, ns: now + pause, where
    /// now was advanced by min(pause - max_pause, max_pause) when the
    /// computed pause was trimmed to max_pause.
    pub dirty_paused_when_ns: u64,
    /// Set `nr_dirtied_pause` to this after sleeping, pages.
    pub nr_dirtied_pause: u64,
    /// The call ends after this sleep (task_ratelimit != 0, or the wb is
    /// nearly clean); otherwise iterate again.
    pub stop_after: bool,
}

/// What one iteration of `balance_dirty_pages()` decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BdpAction {
    /// Under the freerun ceiling: no throttling. The task state was updated
    /// (dirty_paused_when = now, nr_dirtied = 0, nr_dirtied_pause =
    /// dirty_poll_interval).
    Freerun {
        /// The new nr_dirtied_pause, pages.
        nr_dirtied_pause: u64,
    },
    /// Throttled, but the pause is below min_pause: not slept; the debt is
    /// carried (dirty_paused_when advanced by the period, or nr_dirtied_pause
    /// raised). Task state already updated. The call ends.
    NoPause {
        /// The (short or negative) pause, ns.
        pause_ns: i64,
        /// Period pages_dirtied takes at task_ratelimit, ns.
        period_ns: u64,
        /// Task rate limit, pages/s.
        task_ratelimit: u64,
        /// Position ratio (1024 = 1.0).
        pos_ratio: u64,
        /// The wb's dirty_exceeded as just set.
        dirty_exceeded: bool,
    },
    /// Sleep, then `TaskDirtyState::after_pause()`.
    Pause(BdpPause),
    /// BDP_ASYNC where a sync writer would sleep `pause.pause_ns`: return
    /// -EAGAIN. Task state untouched.
    WouldBlock(BdpPause),
}

/// Result of one iteration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BdpStep {
    /// The decision.
    pub action: BdpAction,
    /// Kick background writeback of this wb (`wb_start_background_writeback()`):
    /// NR_FILE_DIRTY over bg_thresh, or throttling, while no writeback runs.
    pub start_background: bool,
    /// The `balance_dirty_pages` tracepoint (throttled iterations only).
    pub trace: Option<BalanceDirtyPagesTrace>,
    /// The bandwidth update done by this iteration, if any.
    pub bandwidth: Option<BandwidthUpdate>,
    /// Store this in the wb's `dirty_exceeded` (set on throttled iterations
    /// only; freerun leaves the old value, as the kernel does). It makes the
    /// gate check every 8 pages.
    pub set_dirty_exceeded: Option<bool>,
    /// The evaluated control that set the pace (`sdtc`: the global one, or
    /// the memcg one when its pos_ratio is smaller).
    pub dtc: DirtyThrottleControl,
    /// The evaluated memcg control, if the wb has a memcg domain.
    pub mdtc: Option<DirtyThrottleControl>,
}

/// One iteration of the `balance_dirty_pages()` loop for the task `task`
/// dirtying on the wb `inp.wb_id` (bandwidth state `bw`) in the global domain
/// `dom`. See the module doc for the loop the caller runs around it.
pub fn balance_dirty_pages(
    inp: &BdpInput<'_>,
    task: &mut TaskDirtyState,
    dom: &mut WbDomain,
    bw: &mut WbBandwidth,
) -> BdpStep {
    balance_dirty_pages_domains(inp, task, dom, None, bw)
}

/// `domain_dirty_freerun()`: sets `dtc.freerun` from the domain's counts (or
/// the wb's, with strictlimit, after `wb_dirty_limits()`).
fn domain_dirty_freerun(
    dtc: &mut DirtyThrottleControl,
    share: &WbShare,
    wb: &WbCounts,
    strict: bool,
) {
    let (dirty, thresh, bg_thresh) = if strict {
        wb_dirty_limits(dtc, share, wb);
        (dtc.wb_dirty, dtc.wb_thresh, dtc.wb_bg_thresh)
    } else {
        (dtc.dirty, dtc.thresh, dtc.bg_thresh)
    };
    dtc.freerun = dirty <= dirty_freerun_ceiling(thresh, bg_thresh);
}

/// `domain_poll_intv()`.
fn domain_poll_intv(dtc: &DirtyThrottleControl, strict: bool) -> u64 {
    if strict {
        dirty_poll_interval(dtc.wb_dirty, dtc.wb_thresh)
    } else {
        dirty_poll_interval(dtc.dirty, dtc.thresh)
    }
}

/// `balance_wb_limits()`: `wb_dirty_freerun()` (the wb share, and the
/// PF_LOCAL_THROTTLE freerun), then `wb_dirty_exceeded()` and
/// `wb_position_ratio()` against the domain's `dirty_limit`.
fn balance_wb_limits(
    dtc: &mut DirtyThrottleControl,
    share: &WbShare,
    inp: &BdpInput<'_>,
    dom_dirty_limit: u64,
    write_bw: u64,
) {
    let strict = inp.bdi.strictlimit;
    dtc.freerun = false;
    if !strict {
        wb_dirty_limits(dtc, share, &inp.wb);
        if inp.local_throttle
            && dtc.wb_dirty < dirty_freerun_ceiling(dtc.wb_thresh, dtc.wb_bg_thresh)
        {
            dtc.freerun = true;
            return;
        }
    }
    dtc.dirty_exceeded = dtc.wb_dirty > dtc.wb_thresh && (dtc.dirty > dtc.thresh || strict);
    wb_position_ratio(dtc, dom_dirty_limit, write_bw, strict);
}

/// [`balance_dirty_pages`] with the memcg domain `mdom` of a cgroup wb
/// (`inp.mdtc` must then be Some): both domains are evaluated; the task is
/// free-running only when both are; otherwise the domain with the smaller
/// pos_ratio (`sdtc`) sets the task's rate, the pause bounds and the trace;
/// the wb's dirty_exceeded is either domain's; the rate-limit update runs on
/// both (the global one first), as `__wb_update_bandwidth(gdtc, mdtc)`.
pub fn balance_dirty_pages_domains(
    inp: &BdpInput<'_>,
    task: &mut TaskDirtyState,
    dom: &mut WbDomain,
    mut mdom: Option<&mut WbDomain>,
    bw: &mut WbBandwidth,
) -> BdpStep {
    let hz = inp.hz;
    let tick = hz.tick_ns();
    let now = hz.to_jiffies(inp.now_ns);
    let strictlimit = inp.bdi.strictlimit;
    let nr_dirty = inp.global.nr_file_dirty;
    let mut gdtc = DirtyThrottleControl::new(nr_dirty + inp.global.nr_writeback, inp.thresholds);
    // The wb's share of a domain: its writeout fraction there and the bdi's
    // ratios scaled by its bandwidth share.
    let share_in = |d: &mut WbDomain| {
        WbShare::new(
            d,
            inp.wb_id,
            &inp.bdi,
            inp.bdi_min_ratio_sum,
            bw.avg_write_bandwidth,
            inp.tot_write_bandwidth,
        )
    };
    let share = share_in(dom);
    let mut m = match (inp.mdtc, mdom.as_deref_mut()) {
        (Some(mi), Some(md)) => Some((
            DirtyThrottleControl::new(mi.dirty, mi.thresholds),
            share_in(md),
        )),
        _ => None,
    };

    // balance_domain_limits() of both domains: domain_dirty_freerun().
    domain_dirty_freerun(&mut gdtc, &share, &inp.wb, strictlimit);
    if let Some((mdtc, mshare)) = m.as_mut() {
        domain_dirty_freerun(mdtc, mshare, &inp.wb, strictlimit);
    }

    // Background writeback at bg_thresh (not laptop mode).
    let mut start_background = nr_dirty > gdtc.bg_thresh && !inp.writeback_in_progress;

    let freerun = |task: &mut TaskDirtyState,
                   gdtc: DirtyThrottleControl,
                   mdtc: Option<DirtyThrottleControl>,
                   start_background| {
        let mut intv = domain_poll_intv(&gdtc, strictlimit);
        if let Some(mdtc) = &mdtc {
            intv = intv.min(domain_poll_intv(mdtc, strictlimit));
        }
        task.dirty_paused_when_ns = hz.jiffies_to_ns(now);
        task.nr_dirtied = 0;
        task.nr_dirtied_pause = intv;
        BdpStep {
            action: BdpAction::Freerun {
                nr_dirtied_pause: intv,
            },
            start_background,
            trace: None,
            bandwidth: None,
            set_dirty_exceeded: None,
            dtc: gdtc,
            mdtc,
        }
    };

    if gdtc.freerun && m.as_ref().is_none_or(|(mdtc, _)| mdtc.freerun) {
        return freerun(task, gdtc, m.map(|(d, _)| d), start_background);
    }

    // Throttling: start writeback even in laptop mode.
    if !inp.writeback_in_progress {
        start_background = true;
    }

    balance_wb_limits(
        &mut gdtc,
        &share,
        inp,
        dom.dirty_limit,
        bw.avg_write_bandwidth,
    );
    if gdtc.freerun {
        return freerun(task, gdtc, m.map(|(d, _)| d), start_background);
    }
    let mut use_mdtc = false;
    if let (Some((mdtc, mshare)), Some(md)) = (m.as_mut(), mdom.as_deref()) {
        balance_wb_limits(mdtc, mshare, inp, md.dirty_limit, bw.avg_write_bandwidth);
        if mdtc.freerun {
            return freerun(task, gdtc, m.map(|(d, _)| d), start_background);
        }
        use_mdtc = mdtc.pos_ratio < gdtc.pos_ratio;
    }
    let mdtc = m.map(|(d, _)| d);
    let dirty_exceeded = gdtc.dirty_exceeded || mdtc.is_some_and(|d| d.dirty_exceeded);
    let (sdtc, sdom_limit) = match (use_mdtc, mdtc, mdom.as_deref()) {
        (true, Some(d), Some(md)) => (d, md.dirty_limit),
        _ => (gdtc, dom.dirty_limit),
    };

    let mut bandwidth = None;
    if bw.update_due(inp.now_ns, hz) {
        bandwidth = Some(__wb_update_bandwidth(
            bw,
            inp.now_ns,
            inp.wb.dirtied,
            inp.wb.written,
            inp.wb_has_dirty_io,
            hz,
            Some(RatelimitUpdate {
                dtc: &gdtc,
                dom,
                strictlimit,
                mdtc: mdtc.as_ref().zip(mdom),
            }),
        ));
    }

    let dirty_ratelimit = bw.dirty_ratelimit;
    let task_ratelimit =
        ((dirty_ratelimit as u128 * sdtc.pos_ratio as u128) >> RATELIMIT_CALC_SHIFT) as u64;
    let max_pause = wb_max_pause(bw.avg_write_bandwidth, sdtc.wb_dirty, hz);
    let (min_pause, nr_dirtied_pause) = wb_min_pause(
        bw.avg_write_bandwidth,
        dirty_ratelimit,
        max_pause,
        task_ratelimit,
        hz,
    );

    let paused_when = hz.to_jiffies(task.dirty_paused_when_ns) as i64;
    let think = if task.dirty_paused_when_ns == 0 {
        0
    } else {
        hz.to_ms(now as i64 - paused_when)
    };
    let setpoint = sdtc.setpoint(sdom_limit);
    let make_trace = |task: &TaskDirtyState, period: i64, pause: i64| BalanceDirtyPagesTrace {
        bdi: inp.bdi_name.to_string(),
        limit: sdtc.limit,
        setpoint,
        dirty: sdtc.dirty,
        wb_setpoint: mul_div(setpoint, sdtc.wb_thresh, sdtc.thresh + 1),
        wb_dirty: sdtc.wb_dirty,
        dirty_ratelimit: kbps(dirty_ratelimit),
        task_ratelimit: kbps(task_ratelimit),
        dirtied: inp.pages_dirtied,
        dirtied_pause: task.nr_dirtied_pause,
        paused: hz.to_ms(now as i64 - hz.to_jiffies(inp.start_ns) as i64),
        pause: hz.to_ms(pause),
        period: hz.to_ms(period),
        think,
    };

    let mut now_adj = now as i64;
    let (period, pause) = if task_ratelimit == 0 {
        (max_pause as i64, max_pause as i64)
    } else {
        let period = mul_div(hz.get(), inp.pages_dirtied, task_ratelimit) as i64;
        let mut pause = period;
        if task.dirty_paused_when_ns != 0 {
            pause -= now as i64 - paused_when;
        }
        if pause < min_pause {
            // Too short to sleep: carry the debt into the next round.
            let trace = make_trace(task, period, pause.min(0));
            if pause < -(hz.get() as i64) {
                task.dirty_paused_when_ns = hz.jiffies_to_ns(now);
                task.nr_dirtied = 0;
            } else if period != 0 {
                task.dirty_paused_when_ns += period as u64 * tick;
                task.nr_dirtied = 0;
            } else if task.nr_dirtied_pause <= inp.pages_dirtied {
                task.nr_dirtied_pause += inp.pages_dirtied;
            }
            return BdpStep {
                action: BdpAction::NoPause {
                    pause_ns: pause * tick as i64,
                    period_ns: period as u64 * tick,
                    task_ratelimit,
                    pos_ratio: sdtc.pos_ratio,
                    dirty_exceeded,
                },
                start_background,
                trace: Some(trace),
                bandwidth,
                set_dirty_exceeded: Some(dirty_exceeded),
                dtc: sdtc,
                mdtc,
            };
        }
        if pause > max_pause as i64 {
            // An occasional drop of task_ratelimit: sleep max_pause and
            // account the rest as time already passed.
            now_adj += (pause - max_pause as i64).min(max_pause as i64);
            pause = max_pause as i64;
        }
        (period, pause)
    };

    let trace = make_trace(task, period, pause);
    let p = BdpPause {
        pause_ns: pause as u64 * tick,
        period_ns: period as u64 * tick,
        task_ratelimit,
        pos_ratio: sdtc.pos_ratio,
        dirty_exceeded,
        dirty_paused_when_ns: (now_adj + pause) as u64 * tick,
        nr_dirtied_pause,
        stop_after: task_ratelimit != 0 || sdtc.wb_dirty <= wb_stat_error(inp.nr_cpu_ids),
    };
    let action = if inp.flags.bdp_async {
        BdpAction::WouldBlock(p)
    } else {
        BdpAction::Pause(p)
    };
    BdpStep {
        action,
        start_background,
        trace: Some(trace),
        bandwidth,
        set_dirty_exceeded: Some(dirty_exceeded),
        dtc: sdtc,
        mdtc,
    }
}
