//! Write bandwidth estimation and dirty rate control (`wb_update_write_bandwidth`,
//! `wb_update_dirty_ratelimit`, `__wb_update_bandwidth`), pure arithmetic on
//! a wb's counters.

use std::fmt;

use super::limits::*;

// ---------------------------------------------------------------------------
// bandwidth estimation and rate control
// ---------------------------------------------------------------------------

/// The bandwidth and rate-limit state of a `bdi_writeback`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WbBandwidth {
    /// `bw_time_stamp`: last update, ns (compared in jiffies).
    pub bw_time_stamp_ns: u64,
    /// `dirtied_stamp`: WB_DIRTIED at the last update, pages.
    pub dirtied_stamp: u64,
    /// `written_stamp`: WB_WRITTEN at the last update, pages.
    pub written_stamp: u64,
    /// `write_bandwidth`: write rate smoothed over ~3 s, pages/s.
    pub write_bandwidth: u64,
    /// `avg_write_bandwidth`: write_bandwidth further filtered, pages/s.
    pub avg_write_bandwidth: u64,
    /// `dirty_ratelimit`: base per-task dirty rate, pages/s.
    pub dirty_ratelimit: u64,
    /// `balanced_dirty_ratelimit`: last estimate of write_bw / N, pages/s.
    pub balanced_dirty_ratelimit: u64,
}

impl WbBandwidth {
    /// `wb_init()`'s values at `now_ns`: all rates INIT_BW (100 MB/s).
    pub fn new(now_ns: u64) -> Self {
        WbBandwidth {
            bw_time_stamp_ns: now_ns,
            dirtied_stamp: 0,
            written_stamp: 0,
            write_bandwidth: INIT_BW,
            avg_write_bandwidth: INIT_BW,
            dirty_ratelimit: INIT_BW,
            balanced_dirty_ratelimit: INIT_BW,
        }
    }

    /// Whether more than BANDWIDTH_INTERVAL passed since the last update
    /// (`time_is_before_jiffies(bw_time_stamp + BANDWIDTH_INTERVAL)`).
    pub fn update_due(&self, now_ns: u64, hz: Hz) -> bool {
        hz.to_jiffies(now_ns) > hz.to_jiffies(self.bw_time_stamp_ns) + hz.bandwidth_interval()
    }
}

/// `wb_update_write_bandwidth()`: folds the pages written since the last
/// update into `write_bandwidth` over a power-of-two window of ~3 s
/// (4096 jiffies at HZ=1000), then moves `avg_write_bandwidth` 1/8 toward it
/// when the two agree in direction. Returns the change of
/// `avg_write_bandwidth` to add to the bdi's `tot_write_bandwidth` (0 unless
/// `has_dirty_io`).
pub fn wb_update_write_bandwidth(
    bw: &mut WbBandwidth,
    elapsed_jiffies: u64,
    written: u64,
    has_dirty_io: bool,
    hz: Hz,
) -> i64 {
    let period = roundup_pow_of_two(3 * hz.get());
    let mut avg = bw.avg_write_bandwidth;
    let old = bw.write_bandwidth;
    let delta_written = written - written.min(bw.written_stamp);
    let mut b = delta_written as u128 * hz.get() as u128;
    if elapsed_jiffies > period {
        b /= elapsed_jiffies as u128;
        avg = b.min(u64::MAX as u128) as u64;
    } else {
        b += old as u128 * (period - elapsed_jiffies) as u128;
        b >>= ilog2(period);
        let bwv = b.min(u64::MAX as u128) as u64;
        if avg > old && old >= bwv {
            avg -= (avg - old) >> 3;
        }
        if avg < old && old <= bwv {
            avg += (old - avg) >> 3;
        }
    }
    avg = avg.max(1);
    let delta = if has_dirty_io {
        avg as i64 - bw.avg_write_bandwidth as i64
    } else {
        0
    };
    bw.write_bandwidth = b.min(u64::MAX as u128) as u64;
    bw.avg_write_bandwidth = avg;
    delta
}

/// Fields of the `bdi_dirty_ratelimit` tracepoint, in its units (KB/s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BdiDirtyRatelimitTrace {
    /// write_bandwidth, KB/s.
    pub write_bw: u64,
    /// avg_write_bandwidth, KB/s.
    pub avg_write_bw: u64,
    /// Measured dirty rate of the wb over the last interval, KB/s.
    pub dirty_rate: u64,
    /// New dirty_ratelimit, KB/s.
    pub dirty_ratelimit: u64,
    /// task_ratelimit used (+1), KB/s.
    pub task_ratelimit: u64,
    /// New balanced_dirty_ratelimit, KB/s.
    pub balanced_dirty_ratelimit: u64,
}

impl fmt::Display for BdiDirtyRatelimitTrace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "write_bw={} awrite_bw={} dirty_rate={} dirty_ratelimit={} task_ratelimit={} balanced_dirty_ratelimit={}",
            self.write_bw,
            self.avg_write_bw,
            self.dirty_rate,
            self.dirty_ratelimit,
            self.task_ratelimit,
            self.balanced_dirty_ratelimit
        )
    }
}

/// `wb_update_dirty_ratelimit()`: estimates balanced_dirty_ratelimit =
/// task_ratelimit * write_bw / dirty_rate (clamped to write_bw), then moves
/// dirty_ratelimit toward it only when task_ratelimit and the previous
/// estimate agree on the direction (dirty below setpoint: only up, above:
/// only down), by at most 1/8 of the gap, less when close. `dtc` holds the
/// last `wb_position_ratio()` evaluation; `dirtied` is WB_DIRTIED now;
/// `elapsed_jiffies` >= 1 since the last update.
pub fn wb_update_dirty_ratelimit(
    dtc: &DirtyThrottleControl,
    bw: &mut WbBandwidth,
    dom_dirty_limit: u64,
    strictlimit: bool,
    dirtied: u64,
    elapsed_jiffies: u64,
    hz: Hz,
) -> BdiDirtyRatelimitTrace {
    let mut dirty = dtc.dirty;
    let freerun = dirty_freerun_ceiling(dtc.thresh, dtc.bg_thresh);
    let limit = hard_dirty_limit(dom_dirty_limit, dtc.thresh);
    let mut setpoint = (freerun + limit) / 2;
    let write_bw = bw.avg_write_bandwidth;
    let mut dirty_ratelimit = bw.dirty_ratelimit;

    let dirty_rate = mul_div(
        dirtied.saturating_sub(bw.dirtied_stamp),
        hz.get(),
        elapsed_jiffies.max(1),
    );
    // Plus one to ramp up from tiny values.
    let task_ratelimit = ((dirty_ratelimit as u128 * dtc.pos_ratio as u128) >> RATELIMIT_CALC_SHIFT)
        .min(u64::MAX as u128 - 1) as u64
        + 1;
    let balanced_dirty_ratelimit = mul_div(task_ratelimit, write_bw, dirty_rate | 1).min(write_bw);

    if strictlimit {
        dirty = dtc.wb_dirty;
        setpoint = (dtc.wb_thresh + dtc.wb_bg_thresh) / 2;
    }
    let mut step = 0;
    if dirty < setpoint {
        let x = bw
            .balanced_dirty_ratelimit
            .min(balanced_dirty_ratelimit)
            .min(task_ratelimit);
        if dirty_ratelimit < x {
            step = x - dirty_ratelimit;
        }
    } else {
        let x = bw
            .balanced_dirty_ratelimit
            .max(balanced_dirty_ratelimit)
            .max(task_ratelimit);
        if dirty_ratelimit > x {
            step = dirty_ratelimit - x;
        }
    }
    // Slow down when close to the target, to avoid pointless tremors.
    let shift = dirty_ratelimit / (2 * step + 1);
    step = if shift < 64 {
        div_round_up(step >> shift, 8)
    } else {
        0
    };
    if dirty_ratelimit < balanced_dirty_ratelimit {
        dirty_ratelimit += step;
    } else {
        dirty_ratelimit = dirty_ratelimit.saturating_sub(step);
    }
    bw.dirty_ratelimit = dirty_ratelimit.max(1);
    bw.balanced_dirty_ratelimit = balanced_dirty_ratelimit;

    BdiDirtyRatelimitTrace {
        write_bw: kbps(bw.write_bandwidth),
        avg_write_bw: kbps(bw.avg_write_bandwidth),
        dirty_rate: kbps(dirty_rate),
        dirty_ratelimit: kbps(bw.dirty_ratelimit),
        task_ratelimit: kbps(task_ratelimit),
        balanced_dirty_ratelimit: kbps(balanced_dirty_ratelimit),
    }
}

/// What a bandwidth update did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BandwidthUpdate {
    /// Add to the bdi's `tot_write_bandwidth`, pages/s.
    pub tot_write_bandwidth_delta: i64,
    /// The `bdi_dirty_ratelimit` tracepoint, when the rate limit was updated.
    pub ratelimit_trace: Option<BdiDirtyRatelimitTrace>,
}

/// The rate-limit half of `__wb_update_bandwidth()` (`update_ratelimit` true):
/// the domain and the control evaluated by `balance_dirty_pages()`.
pub struct RatelimitUpdate<'a> {
    /// The evaluated global control (after `wb_position_ratio()`).
    pub dtc: &'a DirtyThrottleControl,
    /// The global domain (its dirty_limit is updated first).
    pub dom: &'a mut WbDomain,
    /// BDI_CAP_STRICTLIMIT.
    pub strictlimit: bool,
    /// The evaluated memcg control and its domain, for a cgroup wb: its
    /// dirty_limit and then the wb's dirty_ratelimit are updated again
    /// after the global ones.
    pub mdtc: Option<(&'a DirtyThrottleControl, &'a mut WbDomain)>,
}

/// `__wb_update_bandwidth()`: at `now_ns` with the wb's WB_DIRTIED and
/// WB_WRITTEN totals: optionally updates the domain's dirty_limit and the
/// wb's dirty_ratelimit, then the write bandwidth, then the stamps. Does not
/// check the interval itself (callers check `update_due()`, except the
/// delayed update after writeback ends).
pub fn __wb_update_bandwidth(
    bw: &mut WbBandwidth,
    now_ns: u64,
    dirtied: u64,
    written: u64,
    has_dirty_io: bool,
    hz: Hz,
    ratelimit: Option<RatelimitUpdate<'_>>,
) -> BandwidthUpdate {
    let now = hz.to_jiffies(now_ns);
    let elapsed = now
        .saturating_sub(hz.to_jiffies(bw.bw_time_stamp_ns))
        .max(1);
    let mut ratelimit_trace = None;
    if let Some(r) = ratelimit {
        r.dom
            .domain_update_dirty_limit(r.dtc.thresh, r.dtc.dirty, now_ns);
        ratelimit_trace = Some(wb_update_dirty_ratelimit(
            r.dtc,
            bw,
            r.dom.dirty_limit,
            r.strictlimit,
            dirtied,
            elapsed,
            hz,
        ));
        if let Some((mdtc, mdom)) = r.mdtc {
            mdom.domain_update_dirty_limit(mdtc.thresh, mdtc.dirty, now_ns);
            wb_update_dirty_ratelimit(
                mdtc,
                bw,
                mdom.dirty_limit,
                r.strictlimit,
                dirtied,
                elapsed,
                hz,
            );
        }
    }
    let delta = wb_update_write_bandwidth(bw, elapsed, written, has_dirty_io, hz);
    bw.dirtied_stamp = dirtied;
    bw.written_stamp = written;
    bw.bw_time_stamp_ns = hz.jiffies_to_ns(now);
    BandwidthUpdate {
        tot_write_bandwidth_delta: delta,
        ratelimit_trace,
    }
}

/// `wb_update_bandwidth()`: bandwidth only (from `do_writepages()` and the
/// delayed `bw_dwork` after writeback ends). Returns the
/// `tot_write_bandwidth` delta.
pub fn wb_update_bandwidth(
    bw: &mut WbBandwidth,
    now_ns: u64,
    dirtied: u64,
    written: u64,
    has_dirty_io: bool,
    hz: Hz,
) -> i64 {
    __wb_update_bandwidth(bw, now_ns, dirtied, written, has_dirty_io, hz, None)
        .tot_write_bandwidth_delta
}

/// `wb_bandwidth_estimate_start()`: when `wb_writeback()` starts on a wb idle
/// for more than a second with no inode under writeback, restart the
/// estimate window (stamps only) so idle time is not counted as slowness.
pub fn wb_bandwidth_estimate_start(
    bw: &mut WbBandwidth,
    now_ns: u64,
    dirtied: u64,
    written: u64,
    writeback_inodes: u64,
    hz: Hz,
) {
    let now = hz.to_jiffies(now_ns);
    let elapsed = now.saturating_sub(hz.to_jiffies(bw.bw_time_stamp_ns));
    if elapsed > hz.bandwidth_idle() && writeback_inodes == 0 {
        bw.dirtied_stamp = dirtied;
        bw.written_stamp = written;
        bw.bw_time_stamp_ns = hz.jiffies_to_ns(now);
    }
}
