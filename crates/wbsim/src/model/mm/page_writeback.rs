//! Dirty throttling: thresholds, bandwidth estimation, rate control and the
//! `balance_dirty_pages()` pause computation of `mm/page-writeback.c`, as a
//! synchronous, deterministic calculator. The caller (the async write path and
//! the flusher) owns the page counters and the clock and passes them in; this
//! module keeps the per-wb and per-domain control state and returns what the
//! kernel would do. Time is given in ns and converted to jiffies (`Hz`), because
//! the kernel's arithmetic (pause lengths, bandwidth windows, rounding) is in
//! jiffies.
//!
//! Models (kernel names kept):
//! - Thresholds: `global_dirtyable_memory()`, `domain_dirty_limits()` (bytes
//!   settings over ratios, ratios in per-PAGE_SIZE precision, the real-time task
//!   boost, the 32-bit clamp, `bg_thresh >= thresh` -> `thresh / 2`), the sysctl
//!   handlers' "setting bytes clears the ratio" rule, `writeback_set_ratelimit()`.
//! - Global limit smoothing: `update_dirty_limit()`, `domain_update_dirty_limit()`
//!   (`wb_domain::dirty_limit` follows thresh up at once, down by 1/32 per
//!   `BANDWIDTH_INTERVAL`).
//! - Writeout fractions: `lib/flex_proportions.c` (`fprop_global`,
//!   `fprop_local_percpu`, `fprop_new_period()`, `__fprop_add_percpu_max()`,
//!   `fprop_fraction_percpu()`), `wb_domain_writeout_add()`, `writeout_period()`
//!   with `VM_COMPLETIONS_PERIOD_LEN`.
//! - Per-wb thresholds: `wb_min_max_ratio()`, `__wb_calc_thresh()` (with the
//!   6.14 minimum-share bump: (thresh - dirty)/8, or /100 for strictlimit),
//!   `wb_dirty_limits()`, `wb_over_bg_thresh()`.
//! - Position control: `pos_ratio_polynom()`, `wb_position_ratio()` (global
//!   cubic line, wb linear line with span and x_intercept, wb reserve area,
//!   strictlimit variant).
//! - Bandwidth and rate control: `wb_update_write_bandwidth()`,
//!   `wb_update_dirty_ratelimit()`, `__wb_update_bandwidth()`,
//!   `wb_update_bandwidth()`, `wb_bandwidth_estimate_start()`, initial values of
//!   `wb_init()` (`INIT_BW`).
//! - Throttling: `dirty_poll_interval()`, `wb_max_pause()`, `wb_min_pause()`, one
//!   iteration of the `balance_dirty_pages()` loop (6.12+ structure:
//!   `domain_dirty_freerun()`, `balance_wb_limits()`, `wb_dirty_exceeded()`),
//!   `balance_dirty_pages_ratelimited_flags()` (the gate, `BDP_ASYNC`, the
//!   per-CPU `bdp_ratelimits` and `dirty_throttle_leaks`).
//! - Tracepoints `balance_dirty_pages`, `bdi_dirty_ratelimit` and
//!   `global_dirty_state` (include/trace/events/writeback.h), with the kernel's
//!   units (KB/s for rates, ms for times).
//!
//! Simplified or left out:
//! - No memcg domain (`mdtc`): only the global `wb_domain`. The memcg domain is
//!   the same arithmetic on memcg counts; the lead adds it with the memcg model.
//! - Counters are exact, so `wb_stat()` and `wb_stat_sum()` agree; the per-CPU
//!   counter error (`wb_stat_error()`) only matters for the loop exit after a
//!   zero-rate pause, where it is kept.
//! - No laptop mode, no highmem, no `PF_LOCAL_THROTTLE` callers other than a
//!   flag, no fatal-signal exit (the caller's loop decides).
//! - The flex-proportion aging timer is the caller's: run
//!   [`WbDomain::writeout_period`] at [`WbDomain::period_time_ns`] (or call
//!   [`WbDomain::age_if_due`] before reading fractions, which is the kernel's
//!   deferrable timer firing late).
//! - Overflowing intermediate products (undefined in the kernel's C) are
//!   computed in 128 bits.
//!
//! Call protocol (what the caller must do):
//! 1. At boot and when thresholds or CPU count change: `writeback_set_ratelimit()`
//!    (sets `WbDomain::dirty_limit` and returns `ratelimit_pages`).
//! 2. For every page dirtied by a task: `account_task_dirtied()` (the task's
//!    `nr_dirtied` and the CPU's `bdp_ratelimits`), bump NR_FILE_DIRTY and the
//!    wb's RECLAIMABLE and DIRTIED counters; then
//!    `balance_dirty_pages_ratelimited_gate()`; if it returns `Some(pages)`, run
//!    the loop below with `pages_dirtied = pages` (unchanged on every iteration).
//! 3. The loop: `step = balance_dirty_pages(&input_now, ..)`; if
//!    `step.start_background`, kick background writeback of the wb (the kernel's
//!    `wb_start_background_writeback()`); apply `step.bandwidth`'s
//!    `tot_write_bandwidth_delta` to the bdi; emit `step.trace`. Then:
//!    store `step.set_dirty_exceeded` (if Some) in the wb's `dirty_exceeded`.
//!    `Freerun` / `NoPause` -> done (task state already updated);
//!    `WouldBlock` -> return -EAGAIN (task state untouched);
//!    `Pause(p)` -> set `bdi.last_bdp_sleep = now`, sleep `p.pause_ns`, then call
//!    `task.after_pause(&p)` (sets `dirty_paused_when = p.dirty_paused_when_ns`,
//!    `nr_dirtied = 0`, `nr_dirtied_pause = p.nr_dirtied_pause`); if
//!    `p.stop_after` the call is done, else iterate again at the new time.
//! 4. Writeout completion (`__folio_end_writeback`): bump WB_WRITTEN and call
//!    `WbDomain::writeout_add(wb_id, bdi.max_prop_frac, nr, now)`; run the
//!    domain's period timer as said above; `WbDomain::remove_wb()` at wb exit.
//! 5. Bandwidth: `balance_dirty_pages()` itself runs `__wb_update_bandwidth()`
//!    with rate-limit update when `WbBandwidth::update_due()` (more than
//!    `BANDWIDTH_INTERVAL` = 200 ms since the last update). The writeback side
//!    calls `wb_update_bandwidth()` (no rate-limit update) from `do_writepages()`
//!    when `update_due()`, and `BANDWIDTH_INTERVAL` after an inode's writeback
//!    ends (`wb_inode_writeback_end()` -> `bw_dwork`), and
//!    `wb_bandwidth_estimate_start()` when `wb_writeback()` starts. Apply the
//!    returned delta to the bdi's `tot_write_bandwidth`.

use std::collections::BTreeMap;
use std::fmt;

/// Page size, bytes. Source: x86-64 and arm64 (4K) PAGE_SIZE.
pub const PAGE_SIZE: u64 = 4096;
/// log2(PAGE_SIZE).
pub const PAGE_SHIFT: u32 = 12;
/// Fixed-point shift of `pos_ratio` (1.0 = 1024). Source: RATELIMIT_CALC_SHIFT.
pub const RATELIMIT_CALC_SHIFT: u32 = 10;
/// Pages: keep `balance_dirty_pages()` call intervals above this many pages
/// (128 KiB = 32 pages). Source: DIRTY_POLL_THRESH.
pub const DIRTY_POLL_THRESH: u64 = 128 >> (PAGE_SHIFT - 10);
/// Initial `nr_dirtied_pause` of a task, pages (128 KiB). Source: copy_process()
/// in kernel/fork.c.
pub const INIT_NR_DIRTIED_PAUSE: u64 = 128 >> (PAGE_SHIFT - 10);
/// Ratelimit while the wb's `dirty_exceeded` is set, pages (32 KiB). Source:
/// balance_dirty_pages_ratelimited_flags().
pub const DIRTY_EXCEEDED_RATELIMIT: u64 = 32 >> (PAGE_SHIFT - 10);
/// Initial write bandwidth and rate limits of a wb: 100 MB/s in pages/s
/// (25600). Source: INIT_BW in mm/backing-dev.c.
pub const INIT_BW: u64 = 100 << (20 - PAGE_SHIFT);
/// Scale of the bdi min/max ratios (1% = 10000). Source: BDI_RATIO_SCALE,
/// include/linux/backing-dev-defs.h (6.3+).
pub const BDI_RATIO_SCALE: u64 = 10_000;
/// Fixed-point shift of flex-proportion fractions. Source: FPROP_FRAC_SHIFT.
pub const FPROP_FRAC_SHIFT: u32 = 10;
/// 1.0 in flex-proportion fractions. Source: FPROP_FRAC_BASE.
pub const FPROP_FRAC_BASE: u64 = 1 << FPROP_FRAC_SHIFT;
/// Minimum `ratelimit_pages`, pages. Source: writeback_set_ratelimit().
pub const RATELIMIT_PAGES_MIN: u64 = 16;
/// Default `ratelimit_pages` before `writeback_set_ratelimit()` ran, pages.
/// Source: `static long ratelimit_pages = 32`.
pub const RATELIMIT_PAGES_DEFAULT: u64 = 32;

const NSEC_PER_SEC: u64 = 1_000_000_000;

/// Errors for bad parameters (user input).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DirtyParamError {
    /// A percentage above 100.
    #[error("{name} = {value}: must be 0..=100")]
    RatioOutOfRange { name: &'static str, value: u64 },
    /// A byte setting whose page count does not fit in 32 bits (the kernel's
    /// -ERANGE).
    #[error("{name} = {value}: more than 2^32 pages")]
    BytesOutOfRange { name: &'static str, value: u64 },
    /// CONFIG_HZ of 0 or above 1e9.
    #[error("hz = {0}: must be 1..=1000000000")]
    BadHz(u64),
    /// bdi min_ratio above max_ratio or the other way round.
    #[error("bdi min_ratio {min} > max_ratio {max}")]
    MinAboveMax { min: u64, max: u64 },
}

/// The kernel tick rate (CONFIG_HZ). Every interval of this module is in
/// jiffies, like the kernel's: pause lengths are whole ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hz(u64);

impl Hz {
    /// HZ=1000 (Fedora, Arch, Ubuntu lowlatency); Debian uses 250.
    pub const DEFAULT: Hz = Hz(1000);

    /// A tick rate; errors on 0 or more than one tick per ns.
    pub fn new(hz: u64) -> Result<Hz, DirtyParamError> {
        if hz == 0 || hz > NSEC_PER_SEC {
            return Err(DirtyParamError::BadHz(hz));
        }
        Ok(Hz(hz))
    }

    /// Ticks per second.
    pub fn get(self) -> u64 {
        self.0
    }

    /// Length of a jiffy, ns, rounded like the kernel's TICK_NSEC.
    pub fn tick_ns(self) -> u64 {
        (NSEC_PER_SEC + self.0 / 2) / self.0
    }

    /// `jiffies` at time `ns` (the model's jiffies start at 0 at time 0).
    pub fn to_jiffies(self, ns: u64) -> u64 {
        ns / self.tick_ns()
    }

    /// The start of jiffy `j`, ns.
    pub fn jiffies_to_ns(self, j: u64) -> u64 {
        j.saturating_mul(self.tick_ns())
    }

    /// MAX_PAUSE: longest single sleep in balance_dirty_pages, jiffies (200 ms).
    pub fn max_pause(self) -> u64 {
        (self.0 / 5).max(1)
    }

    /// BANDWIDTH_INTERVAL: bandwidth and limit update period, jiffies (200 ms).
    pub fn bandwidth_interval(self) -> u64 {
        (self.0 / 5).max(1)
    }

    /// VM_COMPLETIONS_PERIOD_LEN: aging period of writeout fractions, jiffies
    /// (3 s).
    pub fn completions_period_len(self) -> u64 {
        3 * self.0
    }

    /// WB_BANDWIDTH_IDLE_JIF: a wb idle this long restarts its bandwidth
    /// estimate, jiffies (1 s).
    pub fn bandwidth_idle(self) -> u64 {
        self.0
    }

    /// `x * 1000 / HZ` as in the tracepoints (jiffies to ms).
    fn to_ms(self, j: i64) -> i64 {
        j * 1000 / self.0 as i64
    }
}

impl Default for Hz {
    fn default() -> Self {
        Hz::DEFAULT
    }
}

fn ilog2(x: u64) -> u64 {
    (63 - x.max(1).leading_zeros()) as u64
}

fn roundup_pow_of_two(x: u64) -> u64 {
    x.max(1).next_power_of_two()
}

fn mul_div(a: u64, b: u64, c: u64) -> u64 {
    let q = (a as u128 * b as u128) / (c.max(1) as u128);
    q.min(u64::MAX as u128) as u64
}

fn div_round_up(a: u64, b: u64) -> u64 {
    a.div_ceil(b)
}

/// KBps(): pages/s to KB/s, as the tracepoints print rates.
fn kbps(pages_per_sec: u64) -> u64 {
    pages_per_sec << (PAGE_SHIFT - 10)
}

// ---------------------------------------------------------------------------
// vm sysctls and thresholds
// ---------------------------------------------------------------------------

/// The `/proc/sys/vm/dirty_*` sysctls (mm/page-writeback.c).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmDirtyParams {
    /// vm.dirty_ratio, percent of dirtyable memory at which writers are
    /// throttled hard. Default 20. Source: `vm_dirty_ratio`.
    pub dirty_ratio: u64,
    /// vm.dirty_background_ratio, percent of dirtyable memory at which
    /// background writeback starts. Default 10. Source: `dirty_background_ratio`.
    pub dirty_background_ratio: u64,
    /// vm.dirty_bytes, bytes; 0 = use `dirty_ratio`. Takes precedence when
    /// non-zero. Default 0. Source: `vm_dirty_bytes`.
    pub dirty_bytes: u64,
    /// vm.dirty_background_bytes, bytes; 0 = use `dirty_background_ratio`.
    /// Takes precedence when non-zero. Default 0. Source: `dirty_background_bytes`.
    pub dirty_background_bytes: u64,
    /// vm.dirty_expire_centisecs, 1/100 s: an inode dirtied longer ago than this
    /// is written by periodic (kupdate) writeback. Default 3000 (30 s).
    /// Source: `dirty_expire_interval`.
    pub dirty_expire_centisecs: u64,
    /// vm.dirty_writeback_centisecs, 1/100 s: period of the flusher's periodic
    /// wakeup; 0 disables it. Default 500 (5 s). Source: `dirty_writeback_interval`.
    pub dirty_writeback_centisecs: u64,
}

impl Default for VmDirtyParams {
    fn default() -> Self {
        VmDirtyParams {
            dirty_ratio: 20,
            dirty_background_ratio: 10,
            dirty_bytes: 0,
            dirty_background_bytes: 0,
            dirty_expire_centisecs: 3000,
            dirty_writeback_centisecs: 500,
        }
    }
}

impl VmDirtyParams {
    /// Checks the ranges the sysctl handlers enforce.
    pub fn validate(&self) -> Result<(), DirtyParamError> {
        for (name, value) in [
            ("vm.dirty_ratio", self.dirty_ratio),
            ("vm.dirty_background_ratio", self.dirty_background_ratio),
        ] {
            if value > 100 {
                return Err(DirtyParamError::RatioOutOfRange { name, value });
            }
        }
        for (name, value) in [
            ("vm.dirty_bytes", self.dirty_bytes),
            ("vm.dirty_background_bytes", self.dirty_background_bytes),
        ] {
            if div_round_up(value, PAGE_SIZE) > u32::MAX as u64 {
                return Err(DirtyParamError::BytesOutOfRange { name, value });
            }
        }
        Ok(())
    }

    /// Writes vm.dirty_ratio; like `dirty_ratio_handler()` this clears
    /// `dirty_bytes`.
    pub fn set_dirty_ratio(&mut self, ratio: u64) -> Result<(), DirtyParamError> {
        if ratio > 100 {
            return Err(DirtyParamError::RatioOutOfRange {
                name: "vm.dirty_ratio",
                value: ratio,
            });
        }
        if ratio != self.dirty_ratio {
            self.dirty_ratio = ratio;
            self.dirty_bytes = 0;
        }
        Ok(())
    }

    /// Writes vm.dirty_bytes; like `dirty_bytes_handler()` this clears
    /// `dirty_ratio`.
    pub fn set_dirty_bytes(&mut self, bytes: u64) -> Result<(), DirtyParamError> {
        if div_round_up(bytes, PAGE_SIZE) > u32::MAX as u64 {
            return Err(DirtyParamError::BytesOutOfRange {
                name: "vm.dirty_bytes",
                value: bytes,
            });
        }
        if bytes != self.dirty_bytes {
            self.dirty_bytes = bytes;
            self.dirty_ratio = 0;
        }
        Ok(())
    }

    /// Writes vm.dirty_background_ratio; clears `dirty_background_bytes`.
    pub fn set_dirty_background_ratio(&mut self, ratio: u64) -> Result<(), DirtyParamError> {
        if ratio > 100 {
            return Err(DirtyParamError::RatioOutOfRange {
                name: "vm.dirty_background_ratio",
                value: ratio,
            });
        }
        self.dirty_background_ratio = ratio;
        self.dirty_background_bytes = 0;
        Ok(())
    }

    /// Writes vm.dirty_background_bytes; clears `dirty_background_ratio`.
    pub fn set_dirty_background_bytes(&mut self, bytes: u64) -> Result<(), DirtyParamError> {
        if div_round_up(bytes, PAGE_SIZE) > u32::MAX as u64 {
            return Err(DirtyParamError::BytesOutOfRange {
                name: "vm.dirty_background_bytes",
                value: bytes,
            });
        }
        self.dirty_background_bytes = bytes;
        self.dirty_background_ratio = 0;
        Ok(())
    }

    /// `dirty_expire_interval` in ns.
    pub fn dirty_expire_interval_ns(&self) -> u64 {
        self.dirty_expire_centisecs.saturating_mul(10_000_000)
    }

    /// `dirty_writeback_interval` in ns (0 = periodic writeback off).
    pub fn dirty_writeback_interval_ns(&self) -> u64 {
        self.dirty_writeback_centisecs.saturating_mul(10_000_000)
    }
}

/// A domain's thresholds, pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DirtyThresholds {
    /// Dirty throttling threshold (dirty + writeback), pages.
    pub thresh: u64,
    /// Background writeback threshold, pages.
    pub bg_thresh: u64,
}

impl DirtyThresholds {
    /// `dirty_freerun_ceiling()`: no throttling at or below this many pages.
    pub fn freerun_ceiling(&self) -> u64 {
        dirty_freerun_ceiling(self.thresh, self.bg_thresh)
    }
}

/// `global_dirtyable_memory()`: free pages minus the kernel's reserves
/// (`totalreserve_pages`: watermarks and lowmem reserves), plus the file LRU
/// pages (active + inactive file), plus one so it is never zero. Anonymous
/// memory is not dirtyable. Highmem is not modelled (64-bit).
pub fn global_dirtyable_memory(
    free_pages: u64,
    totalreserve_pages: u64,
    inactive_file: u64,
    active_file: u64,
) -> u64 {
    free_pages - free_pages.min(totalreserve_pages) + inactive_file + active_file + 1
}

/// `domain_dirty_limits()` for a normal task: thresh and bg_thresh for
/// `available_memory` dirtyable pages.
pub fn domain_dirty_limits(available_memory: u64, params: &VmDirtyParams) -> DirtyThresholds {
    domain_dirty_limits_task(available_memory, params, None)
}

/// `domain_dirty_limits()` for the calling task: `rt_boost` is
/// `Some(global_wb_domain.dirty_limit)` for a real-time or deadline task
/// (`rt_or_dl_task()`), which gets both thresholds raised by 1/4 plus
/// dirty_limit/32.
pub fn domain_dirty_limits_task(
    available_memory: u64,
    params: &VmDirtyParams,
    rt_boost: Option<u64>,
) -> DirtyThresholds {
    // Ratios in 1/PAGE_SIZE units, as the kernel converts them for precision.
    let ratio = params.dirty_ratio * PAGE_SIZE / 100;
    let bg_ratio = params.dirty_background_ratio * PAGE_SIZE / 100;
    let mut thresh = if params.dirty_bytes != 0 {
        div_round_up(params.dirty_bytes, PAGE_SIZE)
    } else {
        mul_div(ratio, available_memory, PAGE_SIZE)
    };
    let mut bg_thresh = if params.dirty_background_bytes != 0 {
        div_round_up(params.dirty_background_bytes, PAGE_SIZE)
    } else {
        mul_div(bg_ratio, available_memory, PAGE_SIZE)
    };
    if let Some(dirty_limit) = rt_boost {
        bg_thresh += bg_thresh / 4 + dirty_limit / 32;
        thresh += thresh / 4 + dirty_limit / 32;
    }
    // Page-unit limits are assumed to fit in 32 bits.
    thresh = thresh.min(u32::MAX as u64);
    if bg_thresh >= thresh {
        bg_thresh = thresh / 2;
    }
    DirtyThresholds { thresh, bg_thresh }
}

/// `dirty_freerun_ceiling()`: (thresh + bg_thresh) / 2.
pub fn dirty_freerun_ceiling(thresh: u64, bg_thresh: u64) -> u64 {
    (thresh + bg_thresh) / 2
}

/// `hard_dirty_limit()`: max(thresh, domain dirty_limit).
pub fn hard_dirty_limit(dom_dirty_limit: u64, thresh: u64) -> u64 {
    thresh.max(dom_dirty_limit)
}

/// `dirty_poll_interval()`: pages a task may dirty before looking again,
/// about sqrt of the distance to the threshold (a power of two), at least 1.
pub fn dirty_poll_interval(dirty: u64, thresh: u64) -> u64 {
    if thresh > dirty {
        1u64 << (ilog2(thresh - dirty) >> 1)
    } else {
        1
    }
}

/// `wb_stat_error()`: worst-case per-CPU counter drift of a wb stat, pages
/// (WB_STAT_BATCH * nr_cpu_ids, WB_STAT_BATCH = 8 * (1 + ilog2(nr_cpu_ids))).
pub fn wb_stat_error(nr_cpu_ids: u64) -> u64 {
    let n = nr_cpu_ids.max(1);
    8 * (1 + ilog2(n)) * n
}

/// `writeback_set_ratelimit()`: sets the domain's `dirty_limit` to `thresh`
/// (global thresh from `domain_dirty_limits()`) and returns `ratelimit_pages`
/// = thresh / (online CPUs * 32), at least 16.
pub fn writeback_set_ratelimit(dom: &mut WbDomain, thresh: u64, num_online_cpus: u64) -> u64 {
    dom.dirty_limit = thresh;
    (thresh / (num_online_cpus.max(1) * 32)).max(RATELIMIT_PAGES_MIN)
}

// ---------------------------------------------------------------------------
// flex proportions (lib/flex_proportions.c)
// ---------------------------------------------------------------------------

/// `struct fprop_global`: all writeout completions of a domain, aged by
/// halving every period.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FpropGlobal {
    /// Aged event count (starts at 1 so no period has zero events).
    pub events: u64,
    /// Number of the current period.
    pub period: u32,
}

impl Default for FpropGlobal {
    fn default() -> Self {
        FpropGlobal {
            events: 1,
            period: 0,
        }
    }
}

impl FpropGlobal {
    /// `fprop_new_period()`: ages the events by `periods` halvings. Returns
    /// false (and does nothing) when there are no events left to age.
    pub fn new_period(&mut self, periods: u32) -> bool {
        let events = self.events;
        if events <= 1 {
            return false;
        }
        self.events = if periods < 64 { events >> periods } else { 0 };
        self.period = self.period.wrapping_add(periods);
        true
    }
}

/// `struct fprop_local_percpu`: one wb's writeout completions (`wb->completions`),
/// aged lazily to the global period.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FpropLocal {
    /// Aged event count.
    pub events: u64,
    /// Global period this count was last aged to.
    pub period: u32,
}

impl FpropLocal {
    /// `fprop_reflect_period_percpu()`: age to the global period.
    pub fn reflect_period(&mut self, global: &FpropGlobal) {
        if self.period >= global.period {
            return;
        }
        let diff = global.period - self.period;
        self.events = if diff < 64 { self.events >> diff } else { 0 };
        self.period = global.period;
    }

    /// `fprop_fraction_percpu()`: (numerator, denominator) of this wb's share,
    /// numerator <= denominator, denominator > 0.
    pub fn fraction(&mut self, global: &FpropGlobal) -> (u64, u64) {
        self.reflect_period(global);
        let num = self.events;
        let mut den = global.events;
        if den <= num {
            den = if num != 0 { num } else { 1 };
        }
        (num, den)
    }

    /// `__fprop_add_percpu()`: count `nr` events.
    pub fn add(&mut self, global: &mut FpropGlobal, nr: u64) {
        self.reflect_period(global);
        self.events += nr;
        global.events += nr;
    }

    /// `__fprop_add_percpu_max()`: count `nr` events, but only up to the point
    /// where this wb's fraction reaches `max_frac / FPROP_FRAC_BASE`.
    pub fn add_max(&mut self, global: &mut FpropGlobal, max_frac: u64, nr: u64) {
        let mut nr = nr;
        if max_frac < FPROP_FRAC_BASE {
            let (num, den) = self.fraction(global);
            let tmp = den as i128 * max_frac as i128 - ((num as i128) << FPROP_FRAC_SHIFT);
            let room = FPROP_FRAC_BASE - max_frac;
            if tmp < 0 {
                return;
            } else if tmp < nr as i128 * room as i128 {
                nr = ((tmp + room as i128 - 1) / room as i128) as u64;
            }
        }
        self.add(global, nr);
    }
}

/// Alias naming the brief's "writeback fraction": a wb's completions counter.
pub type WritebackFraction = FpropLocal;

// ---------------------------------------------------------------------------
// wb_domain
// ---------------------------------------------------------------------------

/// `struct wb_domain` (the global one, `global_wb_domain`): writeout
/// completions for per-wb shares and the smoothed `dirty_limit`. Each wb's
/// own counter (`wb->completions`, a `fprop_local_percpu`) is kept here too,
/// keyed by wb id, so the caller's wb needs no extra field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WbDomain {
    /// `completions`: all wbs' writeout completions.
    pub completions: FpropGlobal,
    /// `wb->completions` of every wb that completed writeout, by wb id.
    pub wb_completions: BTreeMap<u64, FpropLocal>,
    /// `period_time`: when the aging timer fires next, ns (jiffy-aligned);
    /// None when aging stopped because all fractions reached zero.
    pub period_time_ns: Option<u64>,
    /// `dirty_limit`, pages: follows thresh up at once and down slowly; stays
    /// above the dirty count.
    pub dirty_limit: u64,
    /// `dirty_limit_tstamp`, ns (jiffy-aligned).
    pub dirty_limit_tstamp_ns: u64,
    /// Tick rate.
    pub hz: Hz,
}

impl WbDomain {
    /// `wb_domain_init()` at `now_ns` with HZ=1000. `dirty_limit` starts at 0;
    /// call `writeback_set_ratelimit()` to set it as `page_writeback_init()`
    /// does.
    pub fn new(now_ns: u64) -> Self {
        WbDomain::with_hz(now_ns, Hz::DEFAULT)
    }

    /// `wb_domain_init()` at `now_ns` for a kernel with tick rate `hz`.
    pub fn with_hz(now_ns: u64, hz: Hz) -> Self {
        WbDomain {
            completions: FpropGlobal::default(),
            wb_completions: BTreeMap::new(),
            period_time_ns: None,
            dirty_limit: 0,
            dirty_limit_tstamp_ns: hz.jiffies_to_ns(hz.to_jiffies(now_ns)),
            hz,
        }
    }

    /// `wb_domain_writeout_add()` (from `__wb_writeout_add()` at
    /// `__folio_end_writeback()`): `nr` pages of wb `wb_id` finished writeout,
    /// counted only up to the bdi's `max_prop_frac` share (FPROP_FRAC_BASE =
    /// no cap; FUSE's 1% max_ratio gives 10); arms the aging timer if it was
    /// off.
    pub fn writeout_add(&mut self, wb_id: u64, max_prop_frac: u64, nr: u64, now_ns: u64) {
        let local = self.wb_completions.entry(wb_id).or_default();
        local.add_max(&mut self.completions, max_prop_frac, nr);
        if self.period_time_ns.is_none() {
            let hz = self.hz;
            let next = hz.to_jiffies(now_ns) + hz.completions_period_len();
            self.period_time_ns = Some(hz.jiffies_to_ns(next));
        }
    }

    /// `wb_writeout_inc()` for `nr` pages of a bdi without a max_ratio cap
    /// (max_ratio 100%). Bdis with a lower max_ratio must use
    /// [`WbDomain::writeout_add`] with their `max_prop_frac`.
    pub fn writeout_inc(&mut self, wb_id: u64, nr: u64, now_ns: u64) {
        self.writeout_add(wb_id, FPROP_FRAC_BASE, nr, now_ns);
    }

    /// `fprop_fraction_percpu()` of wb `wb_id`: (numerator, denominator) of its
    /// share of recent completions (ages its counter to the current period).
    pub fn wb_fraction(&mut self, wb_id: u64) -> (u64, u64) {
        match self.wb_completions.get_mut(&wb_id) {
            Some(local) => local.fraction(&self.completions),
            None => FpropLocal::default().fraction(&self.completions),
        }
    }

    /// `fprop_local_destroy_percpu()` at wb exit: forget the wb's counter.
    pub fn remove_wb(&mut self, wb_id: u64) {
        self.wb_completions.remove(&wb_id);
    }

    /// When the aging timer must fire next (None: off).
    pub fn period_time_ns(&self) -> Option<u64> {
        self.period_time_ns
    }

    /// `writeout_period()`: the aging timer fired at `now_ns`; counts missed
    /// periods (the timer is deferrable) and re-arms or stops.
    pub fn writeout_period(&mut self, now_ns: u64) {
        let Some(pt_ns) = self.period_time_ns else {
            return;
        };
        let hz = self.hz;
        let len = hz.completions_period_len();
        let pt = hz.to_jiffies(pt_ns);
        let miss = hz.to_jiffies(now_ns).saturating_sub(pt) / len;
        let periods = (miss + 1).min(u32::MAX as u64) as u32;
        if self.completions.new_period(periods) {
            self.period_time_ns = Some(hz.jiffies_to_ns(pt + miss * len + len));
        } else {
            self.period_time_ns = None;
        }
    }

    /// Runs the aging timer if it is due at `now_ns` (a deferrable timer that
    /// fires when someone looks). Returns whether it ran.
    pub fn age_if_due(&mut self, now_ns: u64) -> bool {
        match self.period_time_ns {
            Some(t) if now_ns >= t => {
                self.writeout_period(now_ns);
                true
            }
            _ => false,
        }
    }

    /// `update_dirty_limit()`: follow `thresh` up in one step; follow
    /// max(thresh, dirty) down by 1/32 of the gap.
    pub fn update_dirty_limit(&mut self, thresh: u64, dirty: u64) {
        let mut limit = self.dirty_limit;
        if limit < thresh {
            self.dirty_limit = thresh;
            return;
        }
        let target = thresh.max(dirty);
        if limit > target {
            limit -= (limit - target) >> 5;
            self.dirty_limit = limit;
        }
    }

    /// `domain_update_dirty_limit()`: `update_dirty_limit()` at most once per
    /// BANDWIDTH_INTERVAL. Returns whether it ran.
    pub fn domain_update_dirty_limit(&mut self, thresh: u64, dirty: u64, now_ns: u64) -> bool {
        let hz = self.hz;
        let now = hz.to_jiffies(now_ns);
        if now < hz.to_jiffies(self.dirty_limit_tstamp_ns) + hz.bandwidth_interval() {
            return false;
        }
        self.update_dirty_limit(thresh, dirty);
        self.dirty_limit_tstamp_ns = hz.jiffies_to_ns(now);
        true
    }
}

// ---------------------------------------------------------------------------
// bdi and per-wb shares
// ---------------------------------------------------------------------------

/// The throttling-relevant part of `struct backing_dev_info`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BdiDirtyConfig {
    /// `min_ratio`, in 1/BDI_RATIO_SCALE percent (sysfs min_ratio * 10000).
    /// Default 0.
    pub min_ratio: u64,
    /// `max_ratio`, in 1/BDI_RATIO_SCALE percent. Default 100% (1_000_000);
    /// FUSE sets 1%.
    pub max_ratio: u64,
    /// `max_prop_frac`: max_ratio as a FPROP_FRAC_BASE fraction (caps the
    /// counted completions). Default FPROP_FRAC_BASE.
    pub max_prop_frac: u64,
    /// BDI_CAP_STRICTLIMIT: throttle against the wb's own share even under the
    /// global freerun ceiling (FUSE).
    pub strictlimit: bool,
}

impl Default for BdiDirtyConfig {
    fn default() -> Self {
        BdiDirtyConfig {
            min_ratio: 0,
            max_ratio: 100 * BDI_RATIO_SCALE,
            max_prop_frac: FPROP_FRAC_BASE,
            strictlimit: false,
        }
    }
}

impl BdiDirtyConfig {
    /// `bdi_set_max_ratio()` in percent: sets max_ratio and max_prop_frac.
    pub fn set_max_ratio(&mut self, percent: u64) -> Result<(), DirtyParamError> {
        if percent > 100 {
            return Err(DirtyParamError::RatioOutOfRange {
                name: "bdi max_ratio",
                value: percent,
            });
        }
        let max = percent * BDI_RATIO_SCALE;
        if self.min_ratio > max {
            return Err(DirtyParamError::MinAboveMax {
                min: self.min_ratio,
                max,
            });
        }
        self.max_ratio = max;
        self.max_prop_frac = FPROP_FRAC_BASE * max / (100 * BDI_RATIO_SCALE);
        Ok(())
    }

    /// `bdi_set_min_ratio()` in percent for this bdi alone (the caller keeps
    /// the system-wide sum `bdi_min_ratio`, which must stay below 100%).
    pub fn set_min_ratio(&mut self, percent: u64) -> Result<(), DirtyParamError> {
        if percent > 100 {
            return Err(DirtyParamError::RatioOutOfRange {
                name: "bdi min_ratio",
                value: percent,
            });
        }
        let min = percent * BDI_RATIO_SCALE;
        if min > self.max_ratio {
            return Err(DirtyParamError::MinAboveMax {
                min,
                max: self.max_ratio,
            });
        }
        self.min_ratio = min;
        Ok(())
    }
}

/// `wb_min_max_ratio()` (CONFIG_CGROUP_WRITEBACK): the bdi's min/max ratios
/// scaled by this wb's share of the bdi's write bandwidth (`this_bw` =
/// `avg_write_bandwidth`, `tot_bw` = `bdi->tot_write_bandwidth`); unscaled when
/// `this_bw >= tot_bw` (the only wb, or clean). Units of BDI_RATIO_SCALE.
pub fn wb_min_max_ratio(bdi: &BdiDirtyConfig, this_bw: u64, tot_bw: u64) -> (u64, u64) {
    let mut min = bdi.min_ratio;
    let mut max = bdi.max_ratio;
    if this_bw < tot_bw {
        if min != 0 {
            min = mul_div(min, this_bw, tot_bw);
        }
        if max < 100 * BDI_RATIO_SCALE {
            max = mul_div(max, this_bw, tot_bw);
        }
    }
    (min, max)
}

/// Everything `__wb_calc_thresh()` needs about a wb's share of a domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WbShare {
    /// Writeout fraction numerator (`fprop_fraction_percpu()`).
    pub numerator: u64,
    /// Writeout fraction denominator (> 0).
    pub denominator: u64,
    /// Scaled bdi min_ratio (`wb_min_max_ratio()`), 1/BDI_RATIO_SCALE percent.
    pub wb_min_ratio: u64,
    /// Scaled bdi max_ratio, 1/BDI_RATIO_SCALE percent.
    pub wb_max_ratio: u64,
    /// `bdi_min_ratio`: sum of all bdis' min_ratio, 1/BDI_RATIO_SCALE percent.
    pub bdi_min_ratio_sum: u64,
    /// BDI_CAP_STRICTLIMIT.
    pub strictlimit: bool,
}

impl WbShare {
    /// Reads wb `wb_id`'s fraction from the domain (aging its counter to the
    /// current period) and scales the bdi ratios by the wb's bandwidth share.
    pub fn new(
        dom: &mut WbDomain,
        wb_id: u64,
        bdi: &BdiDirtyConfig,
        bdi_min_ratio_sum: u64,
        avg_write_bandwidth: u64,
        tot_write_bandwidth: u64,
    ) -> Self {
        let (numerator, denominator) = dom.wb_fraction(wb_id);
        let (wb_min_ratio, wb_max_ratio) =
            wb_min_max_ratio(bdi, avg_write_bandwidth, tot_write_bandwidth);
        WbShare {
            numerator,
            denominator,
            wb_min_ratio,
            wb_max_ratio,
            bdi_min_ratio_sum,
            strictlimit: bdi.strictlimit,
        }
    }
}

/// `__wb_calc_thresh()`: the wb's share of `thresh` (the domain's thresh or
/// bg_thresh): thresh less all bdis' reserved minimums, times the wb's
/// writeout fraction, plus its own minimum; at least (thresh - dirty)/8
/// ((thresh - dirty)/100 with strictlimit) so an idle device is not starved;
/// at most its max_ratio share. `dirty` is the domain's dirty count.
pub fn __wb_calc_thresh(thresh: u64, dirty: u64, share: &WbShare) -> u64 {
    let scale = 100 * BDI_RATIO_SCALE;
    let reserved_free = scale.saturating_sub(share.bdi_min_ratio_sum);
    let mut wb_thresh = mul_div(thresh, reserved_free, scale);
    wb_thresh = mul_div(wb_thresh, share.numerator, share.denominator.max(1));
    wb_thresh += mul_div(thresh, share.wb_min_ratio, scale);
    if thresh > dirty {
        let div = if share.strictlimit { 100 } else { 8 };
        wb_thresh = wb_thresh.max((thresh - dirty) / div);
    }
    let wb_max_thresh = mul_div(thresh, share.wb_max_ratio, scale);
    wb_thresh.min(wb_max_thresh)
}

/// The wb's page counts (`wb_stat()`), pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WbCounts {
    /// WB_RECLAIMABLE: dirty pages of this wb.
    pub reclaimable: u64,
    /// WB_WRITEBACK: pages of this wb under writeback.
    pub writeback: u64,
    /// WB_DIRTIED: pages ever dirtied on this wb (monotonic).
    pub dirtied: u64,
    /// WB_WRITTEN: pages ever written by this wb (monotonic).
    pub written: u64,
}

/// Global page counts (`global_node_page_state()`), pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GlobalDirtyCounts {
    /// NR_FILE_DIRTY ("nr_reclaimable" in balance_dirty_pages).
    pub nr_file_dirty: u64,
    /// NR_WRITEBACK.
    pub nr_writeback: u64,
}

/// `struct dirty_throttle_control` for the global domain: inputs and results
/// of one evaluation. All pages except `pos_ratio`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DirtyThrottleControl {
    /// Domain dirty count: NR_FILE_DIRTY + NR_WRITEBACK.
    pub dirty: u64,
    /// Domain throttle threshold.
    pub thresh: u64,
    /// Domain background threshold.
    pub bg_thresh: u64,
    /// `hard_dirty_limit()` as used by the last `wb_position_ratio()`.
    pub limit: u64,
    /// wb dirty count: WB_RECLAIMABLE + WB_WRITEBACK.
    pub wb_dirty: u64,
    /// wb share of thresh.
    pub wb_thresh: u64,
    /// wb share of bg_thresh (wb_thresh * bg_thresh / thresh).
    pub wb_bg_thresh: u64,
    /// Position ratio, 1.0 = 1 << RATELIMIT_CALC_SHIFT.
    pub pos_ratio: u64,
    /// Free-running (no throttling) by the last freerun check.
    pub freerun: bool,
    /// `wb_dirty_exceeded()`.
    pub dirty_exceeded: bool,
}

impl DirtyThrottleControl {
    /// A control for a domain with `dirty` pages and `thresholds`.
    pub fn new(dirty: u64, thresholds: DirtyThresholds) -> Self {
        DirtyThrottleControl {
            dirty,
            thresh: thresholds.thresh,
            bg_thresh: thresholds.bg_thresh,
            ..Default::default()
        }
    }

    /// The domain's setpoint: (freerun + limit) / 2 with the given domain
    /// dirty_limit.
    pub fn setpoint(&self, dom_dirty_limit: u64) -> u64 {
        let freerun = dirty_freerun_ceiling(self.thresh, self.bg_thresh);
        (freerun + hard_dirty_limit(dom_dirty_limit, self.thresh)) / 2
    }
}

/// `wb_dirty_limits()`: fills wb_thresh, wb_bg_thresh and wb_dirty. (The
/// kernel sums the per-CPU counters precisely when wb_thresh is small; the
/// model's counters are exact.)
pub fn wb_dirty_limits(dtc: &mut DirtyThrottleControl, share: &WbShare, wb: &WbCounts) {
    dtc.wb_thresh = __wb_calc_thresh(dtc.thresh, dtc.dirty, share);
    dtc.wb_bg_thresh = if dtc.thresh != 0 {
        mul_div(dtc.wb_thresh, dtc.bg_thresh, dtc.thresh)
    } else {
        0
    };
    dtc.wb_dirty = wb.reclaimable + wb.writeback;
}

/// `wb_over_bg_thresh()` (global domain): should background writeback keep
/// writing this wb? True when NR_FILE_DIRTY is over bg_thresh, or the wb's
/// dirty pages are over its share of bg_thresh. Writeback pages are ignored.
pub fn wb_over_bg_thresh(
    nr_file_dirty: u64,
    thresholds: DirtyThresholds,
    wb_reclaimable: u64,
    share: &WbShare,
) -> bool {
    if nr_file_dirty > thresholds.bg_thresh {
        return true;
    }
    wb_reclaimable > __wb_calc_thresh(thresholds.bg_thresh, nr_file_dirty, share)
}

// ---------------------------------------------------------------------------
// position ratio
// ---------------------------------------------------------------------------

/// `pos_ratio_polynom()`: 1 + ((setpoint - dirty) / (limit - setpoint))^3 in
/// RATELIMIT_CALC_SHIFT fixed point, clamped to [0, 2.0].
pub fn pos_ratio_polynom(setpoint: u64, dirty: u64, limit: u64) -> u64 {
    let one: i128 = 1 << RATELIMIT_CALC_SHIFT;
    let den = (limit.saturating_sub(setpoint) | 1) as i128;
    let x = ((setpoint as i128 - dirty as i128) << RATELIMIT_CALC_SHIFT) / den;
    let mut pos = x;
    pos = (pos * x) >> RATELIMIT_CALC_SHIFT;
    pos = (pos * x) >> RATELIMIT_CALC_SHIFT;
    pos += one;
    pos.clamp(0, 2 * one) as u64
}

/// `wb_position_ratio()`: sets `dtc.limit` and `dtc.pos_ratio` (and returns
/// the latter). Needs dirty, thresh, bg_thresh, wb_dirty, wb_thresh,
/// wb_bg_thresh. `write_bw` is the wb's `avg_write_bandwidth`, pages/s.
///
/// Global line: 0 at or above limit; the cubic around
/// setpoint = (freerun + limit)/2. Strictlimit: min of that and the cubic of
/// the wb's own counts around (wb_thresh + wb_bg_thresh)/2 (0 at or above
/// wb_thresh). Otherwise the global ratio is scaled by the wb line
/// (x_intercept - wb_dirty)/(x_intercept - wb_setpoint), not below 1/4, and
/// raised (up to 8x) when wb_dirty is under wb_thresh/2 (the reserve area).
pub fn wb_position_ratio(
    dtc: &mut DirtyThrottleControl,
    dom_dirty_limit: u64,
    write_bw: u64,
    strictlimit: bool,
) -> u64 {
    let freerun = dirty_freerun_ceiling(dtc.thresh, dtc.bg_thresh);
    let limit = hard_dirty_limit(dom_dirty_limit, dtc.thresh);
    dtc.limit = limit;
    dtc.pos_ratio = 0;
    if dtc.dirty >= limit {
        return 0;
    }
    let setpoint = (freerun + limit) / 2;
    let mut pos_ratio = pos_ratio_polynom(setpoint, dtc.dirty, limit);

    if strictlimit {
        let wb_thresh = dtc.wb_thresh;
        if dtc.wb_dirty >= wb_thresh {
            return 0;
        }
        let wb_setpoint = dirty_freerun_ceiling(wb_thresh, dtc.wb_bg_thresh);
        if wb_setpoint == 0 || wb_setpoint == wb_thresh {
            return 0;
        }
        let wb_pos_ratio = pos_ratio_polynom(wb_setpoint, dtc.wb_dirty, wb_thresh);
        dtc.pos_ratio = pos_ratio.min(wb_pos_ratio);
        return dtc.pos_ratio;
    }

    let wb_thresh = dtc.wb_thresh.min(dtc.thresh);
    // wb_setpoint = setpoint * wb_thresh / thresh, in 16-bit fixed point.
    let x = ((wb_thresh as u128) << 16) / ((dtc.thresh | 1) as u128);
    let wb_setpoint = ((setpoint as u128 * x) >> 16) as u64;
    // span: 8 * write_bw for a single wb, moving to wb_thresh for JBOD.
    let span = ((((dtc.thresh - wb_thresh) as u128 + 8 * write_bw as u128) * x) >> 16)
        .min(u64::MAX as u128) as u64;
    let x_intercept = wb_setpoint + span;
    if dtc.wb_dirty < x_intercept - span / 4 {
        pos_ratio = mul_div(
            pos_ratio,
            x_intercept - dtc.wb_dirty,
            (x_intercept - wb_setpoint) | 1,
        );
    } else {
        pos_ratio /= 4;
    }
    // The wb reserve area: keep some dirty pages so the device does not idle.
    let reserve = wb_thresh / 2;
    if dtc.wb_dirty < reserve {
        if dtc.wb_dirty > reserve / 8 {
            pos_ratio = mul_div(pos_ratio, reserve, dtc.wb_dirty);
        } else {
            pos_ratio *= 8;
        }
    }
    dtc.pos_ratio = pos_ratio;
    pos_ratio
}

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
    /// The evaluated control (thresholds, wb share, pos_ratio).
    pub dtc: DirtyThrottleControl,
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
    let hz = inp.hz;
    let tick = hz.tick_ns();
    let now = hz.to_jiffies(inp.now_ns);
    let strictlimit = inp.bdi.strictlimit;
    let nr_dirty = inp.global.nr_file_dirty;
    let mut gdtc = DirtyThrottleControl::new(nr_dirty + inp.global.nr_writeback, inp.thresholds);
    let share = WbShare::new(
        dom,
        inp.wb_id,
        &inp.bdi,
        inp.bdi_min_ratio_sum,
        bw.avg_write_bandwidth,
        inp.tot_write_bandwidth,
    );

    // domain_dirty_freerun()
    let (dirty, thresh, bg_thresh) = if strictlimit {
        wb_dirty_limits(&mut gdtc, &share, &inp.wb);
        (gdtc.wb_dirty, gdtc.wb_thresh, gdtc.wb_bg_thresh)
    } else {
        (gdtc.dirty, gdtc.thresh, gdtc.bg_thresh)
    };
    gdtc.freerun = dirty <= dirty_freerun_ceiling(thresh, bg_thresh);

    // Background writeback at bg_thresh (not laptop mode).
    let mut start_background = nr_dirty > gdtc.bg_thresh && !inp.writeback_in_progress;

    let freerun = |task: &mut TaskDirtyState, gdtc: DirtyThrottleControl, start_background| {
        // domain_poll_intv()
        let intv = if strictlimit {
            dirty_poll_interval(gdtc.wb_dirty, gdtc.wb_thresh)
        } else {
            dirty_poll_interval(gdtc.dirty, gdtc.thresh)
        };
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
        }
    };

    if gdtc.freerun {
        return freerun(task, gdtc, start_background);
    }

    // Throttling: start writeback even in laptop mode.
    if !inp.writeback_in_progress {
        start_background = true;
    }

    // balance_wb_limits(): wb_dirty_freerun(), wb_dirty_exceeded(),
    // wb_position_ratio().
    if !strictlimit {
        wb_dirty_limits(&mut gdtc, &share, &inp.wb);
        if inp.local_throttle
            && gdtc.wb_dirty < dirty_freerun_ceiling(gdtc.wb_thresh, gdtc.wb_bg_thresh)
        {
            gdtc.freerun = true;
            return freerun(task, gdtc, start_background);
        }
    }
    gdtc.dirty_exceeded =
        gdtc.wb_dirty > gdtc.wb_thresh && (gdtc.dirty > gdtc.thresh || strictlimit);
    wb_position_ratio(
        &mut gdtc,
        dom.dirty_limit,
        bw.avg_write_bandwidth,
        strictlimit,
    );

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
            }),
        ));
    }

    let dirty_ratelimit = bw.dirty_ratelimit;
    let task_ratelimit =
        ((dirty_ratelimit as u128 * gdtc.pos_ratio as u128) >> RATELIMIT_CALC_SHIFT) as u64;
    let max_pause = wb_max_pause(bw.avg_write_bandwidth, gdtc.wb_dirty, hz);
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
    let setpoint = gdtc.setpoint(dom.dirty_limit);
    let make_trace = |task: &TaskDirtyState, period: i64, pause: i64| BalanceDirtyPagesTrace {
        bdi: inp.bdi_name.to_string(),
        limit: gdtc.limit,
        setpoint,
        dirty: gdtc.dirty,
        wb_setpoint: mul_div(setpoint, gdtc.wb_thresh, gdtc.thresh + 1),
        wb_dirty: gdtc.wb_dirty,
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
                    pos_ratio: gdtc.pos_ratio,
                    dirty_exceeded: gdtc.dirty_exceeded,
                },
                start_background,
                trace: Some(trace),
                bandwidth,
                set_dirty_exceeded: Some(gdtc.dirty_exceeded),
                dtc: gdtc,
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
        pos_ratio: gdtc.pos_ratio,
        dirty_exceeded: gdtc.dirty_exceeded,
        dirty_paused_when_ns: (now_adj + pause) as u64 * tick,
        nr_dirtied_pause,
        stop_after: task_ratelimit != 0 || gdtc.wb_dirty <= wb_stat_error(inp.nr_cpu_ids),
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
        set_dirty_exceeded: Some(gdtc.dirty_exceeded),
        dtc: gdtc,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB_PAGES: u64 = (1 << 30) / PAGE_SIZE;
    /// 24 GiB of dirtyable memory, pages.
    const AVAIL_24G: u64 = 24 * GIB_PAGES;
    const HZ1000: Hz = Hz::DEFAULT;
    const MS: u64 = 1_000_000;

    fn th24() -> DirtyThresholds {
        domain_dirty_limits(AVAIL_24G, &VmDirtyParams::default())
    }

    #[test]
    fn thresholds_24g_default_ratios() {
        // ratio 20% -> 819/4096 per page, 10% -> 409/4096 (kernel precision).
        let t = th24();
        assert_eq!(t.thresh, 1_257_984);
        assert_eq!(t.bg_thresh, 628_224);
        assert_eq!(t.freerun_ceiling(), 943_104);
    }

    #[test]
    fn dirty_bytes_take_precedence_and_bg_halves() {
        let mut p = VmDirtyParams::default();
        p.set_dirty_bytes((1 << 30) + 1).unwrap();
        assert_eq!(p.dirty_ratio, 0, "writing dirty_bytes clears dirty_ratio");
        let t = domain_dirty_limits(AVAIL_24G, &p);
        assert_eq!(t.thresh, GIB_PAGES + 1, "rounded up to whole pages");
        // bg from the 10% ratio (628224) >= thresh -> thresh / 2.
        assert_eq!(t.bg_thresh, t.thresh / 2);

        let mut p = VmDirtyParams::default();
        p.set_dirty_background_bytes(512 << 20).unwrap();
        let t = domain_dirty_limits(AVAIL_24G, &p);
        assert_eq!(t.thresh, 1_257_984);
        assert_eq!(t.bg_thresh, 131_072);
    }

    #[test]
    fn bg_ratio_above_dirty_ratio_halves() {
        let p = VmDirtyParams {
            dirty_background_ratio: 30,
            ..Default::default()
        };
        let t = domain_dirty_limits(AVAIL_24G, &p);
        assert_eq!(t.thresh, 1_257_984);
        assert_eq!(t.bg_thresh, 628_992);
    }

    #[test]
    fn rt_task_boost_and_param_errors() {
        let t = domain_dirty_limits_task(AVAIL_24G, &VmDirtyParams::default(), Some(1_257_984));
        assert_eq!(t.thresh, 1_257_984 + 314_496 + 39_312);
        assert_eq!(t.bg_thresh, 628_224 + 157_056 + 39_312);
        let mut p = VmDirtyParams::default();
        assert!(p.set_dirty_ratio(101).is_err());
        assert!(p.set_dirty_bytes(u64::MAX).is_err());
        assert!(VmDirtyParams {
            dirty_background_ratio: 200,
            ..Default::default()
        }
        .validate()
        .is_err());
        assert!(Hz::new(0).is_err());
        assert_eq!(p.dirty_expire_interval_ns(), 30_000 * MS);
        assert_eq!(p.dirty_writeback_interval_ns(), 5_000 * MS);
    }

    #[test]
    fn dirtyable_memory_helper() {
        assert_eq!(global_dirtyable_memory(1000, 100, 500, 300), 1701);
        // Reserves larger than free memory do not underflow.
        assert_eq!(global_dirtyable_memory(50, 100, 500, 300), 801);
    }

    #[test]
    fn dirty_limit_follows_up_at_once_down_slowly() {
        let mut dom = WbDomain::new(0);
        dom.dirty_limit = 1000;
        dom.update_dirty_limit(2000, 0);
        assert_eq!(dom.dirty_limit, 2000);
        dom.update_dirty_limit(1000, 500);
        assert_eq!(dom.dirty_limit, 2000 - (1000 >> 5));
        dom.dirty_limit = 2000;
        dom.update_dirty_limit(1000, 1900);
        assert_eq!(
            dom.dirty_limit,
            2000 - (100 >> 5),
            "dirty above thresh is the target"
        );
        // At most once per 200 ms.
        let mut dom = WbDomain::new(0);
        dom.dirty_limit = 2000;
        assert!(!dom.domain_update_dirty_limit(1000, 0, 199 * MS));
        assert!(dom.domain_update_dirty_limit(1000, 0, 200 * MS));
        assert!(!dom.domain_update_dirty_limit(1000, 0, 399 * MS));
        assert_eq!(dom.dirty_limit, 1969);
    }

    #[test]
    fn write_bandwidth_smoothing() {
        let mut bw = WbBandwidth::new(0);
        // 2560 pages in 200 jiffies (12800 pages/s) over a 4096-jiffy window.
        let d = wb_update_write_bandwidth(&mut bw, 200, 2560, true, HZ1000);
        assert_eq!(bw.write_bandwidth, 24_975);
        assert_eq!(
            bw.avg_write_bandwidth, INIT_BW,
            "avg moves only when both agree"
        );
        assert_eq!(d, 0);
        bw.written_stamp = 2560;
        let d = wb_update_write_bandwidth(&mut bw, 200, 5120, true, HZ1000);
        assert_eq!(bw.write_bandwidth, 24_380);
        assert_eq!(bw.avg_write_bandwidth, INIT_BW - ((INIT_BW - 24_975) >> 3));
        assert_eq!(d, -78);
        // A gap longer than the window resets both to the measured rate.
        bw.written_stamp = 0;
        wb_update_write_bandwidth(&mut bw, 5000, 50_000, false, HZ1000);
        assert_eq!(
            (bw.write_bandwidth, bw.avg_write_bandwidth),
            (10_000, 10_000)
        );
    }

    #[test]
    fn bandwidth_update_only_when_due() {
        let bw = WbBandwidth::new(0);
        assert!(!bw.update_due(200 * MS, HZ1000));
        assert!(bw.update_due(201 * MS, HZ1000));
        let mut bw = WbBandwidth::new(0);
        let d = wb_update_bandwidth(&mut bw, 201 * MS, 10, 2573, false, HZ1000);
        assert_eq!(d, 0);
        assert_eq!((bw.dirtied_stamp, bw.written_stamp), (10, 2573));
        assert_eq!(bw.bw_time_stamp_ns, 201 * MS);
        // Idle restart of the estimate window.
        wb_bandwidth_estimate_start(&mut bw, 1201 * MS, 20, 3000, 0, HZ1000);
        assert_eq!(bw.bw_time_stamp_ns, 201 * MS, "1 s is not idle yet");
        wb_bandwidth_estimate_start(&mut bw, 1202 * MS, 20, 3000, 0, HZ1000);
        assert_eq!((bw.bw_time_stamp_ns, bw.written_stamp), (1202 * MS, 3000));
    }

    #[test]
    fn pos_ratio_polynom_shape() {
        let t = th24();
        let limit = t.thresh;
        let setpoint = (t.freerun_ceiling() + limit) / 2;
        assert_eq!(setpoint, 1_100_544);
        assert_eq!(pos_ratio_polynom(setpoint, setpoint, limit), 1024);
        assert_eq!(
            pos_ratio_polynom(setpoint, 0, limit),
            2048,
            "clamped at 2.0"
        );
        assert_eq!(
            pos_ratio_polynom(setpoint, t.freerun_ceiling(), limit),
            2045
        );
        assert!(pos_ratio_polynom(setpoint, limit, limit) <= 3);
        let mut prev = u64::MAX;
        for dirty in (t.freerun_ceiling()..limit).step_by(997) {
            let p = pos_ratio_polynom(setpoint, dirty, limit);
            assert!(p <= prev, "not monotonic at {dirty}");
            prev = p;
        }
    }

    fn single_wb_dtc(dirty: u64, write_bw: u64) -> (DirtyThrottleControl, u64) {
        let t = th24();
        let mut dtc = DirtyThrottleControl::new(dirty, t);
        dtc.wb_thresh = t.thresh;
        dtc.wb_bg_thresh = t.bg_thresh;
        dtc.wb_dirty = dirty;
        let p = wb_position_ratio(&mut dtc, t.thresh, write_bw, false);
        (dtc, p)
    }

    #[test]
    fn wb_position_ratio_single_wb() {
        let t = th24();
        let (dtc, p) = single_wb_dtc(1_100_544, INIT_BW);
        assert_eq!(dtc.limit, t.thresh);
        assert!((1022..=1024).contains(&p), "about 1.0 at setpoint: {p}");
        let (_, p) = single_wb_dtc(t.thresh, INIT_BW);
        assert_eq!(p, 0, "0 at the limit");
        let (_, p) = single_wb_dtc(t.thresh + 10, INIT_BW);
        assert_eq!(p, 0, "0 above the limit");
        let mut prev = u64::MAX;
        for dirty in (t.freerun_ceiling()..t.thresh).step_by(1009) {
            let (_, p) = single_wb_dtc(dirty, INIT_BW);
            assert!(p <= prev, "not monotonic at {dirty}");
            prev = p;
        }
        // The wb line never drops below 1/4 of the global ratio.
        let mut dtc = DirtyThrottleControl::new(1_100_544, t);
        dtc.wb_thresh = t.thresh / 4;
        dtc.wb_bg_thresh = t.bg_thresh / 4;
        dtc.wb_dirty = 1_100_544;
        assert_eq!(wb_position_ratio(&mut dtc, t.thresh, INIT_BW, false), 256);
        // Reserve area: a nearly empty wb gets 8x.
        dtc.wb_dirty = 10;
        let p = wb_position_ratio(&mut dtc, t.thresh, INIT_BW, false);
        assert!(p > 8 * 1024, "{p}");
    }

    #[test]
    fn wb_position_ratio_strictlimit() {
        let t = th24();
        let mut dtc = DirtyThrottleControl::new(10_000, t);
        dtc.wb_thresh = 12_579;
        dtc.wb_bg_thresh = 6_281;
        dtc.wb_dirty = (12_579 + 6_281) / 2;
        // Global ratio is 2.0 (far below freerun); the wb's own cubic gives 1.0.
        assert_eq!(wb_position_ratio(&mut dtc, t.thresh, INIT_BW, true), 1024);
        dtc.wb_dirty = 12_579;
        assert_eq!(wb_position_ratio(&mut dtc, t.thresh, INIT_BW, true), 0);
        dtc.wb_dirty = 7_000;
        let p = wb_position_ratio(&mut dtc, t.thresh, INIT_BW, true);
        assert!(p > 1024 && p <= 2048, "{p}");
    }

    #[test]
    fn wb_thresh_share_min_max_and_bump() {
        let share = |num, den, min, max, strict| WbShare {
            numerator: num,
            denominator: den,
            wb_min_ratio: min,
            wb_max_ratio: max,
            bdi_min_ratio_sum: min,
            strictlimit: strict,
        };
        let full = 100 * BDI_RATIO_SCALE;
        // Half of the completions -> half of thresh (dirty above thresh: no bump).
        assert_eq!(
            __wb_calc_thresh(1_000_000, 2_000_000, &share(1, 2, 0, full, false)),
            500_000
        );
        // min_ratio 10%: 90% shared, plus its 10%.
        assert_eq!(
            __wb_calc_thresh(
                1_000_000,
                2_000_000,
                &share(1, 2, 10 * BDI_RATIO_SCALE, full, false)
            ),
            450_000 + 100_000
        );
        // max_ratio 1% caps.
        assert_eq!(
            __wb_calc_thresh(1_000_000, 0, &share(1, 1, 0, BDI_RATIO_SCALE, false)),
            10_000
        );
        // An idle wb (no completions) gets (thresh - dirty) / 8, or /100 strict.
        assert_eq!(
            __wb_calc_thresh(1_000_000, 200_000, &share(0, 1, 0, full, false)),
            100_000
        );
        assert_eq!(
            __wb_calc_thresh(1_000_000, 200_000, &share(0, 1, 0, full, true)),
            8_000
        );
        // cgwb scaling of min/max by bandwidth share.
        let bdi = BdiDirtyConfig {
            min_ratio: 10 * BDI_RATIO_SCALE,
            max_ratio: 50 * BDI_RATIO_SCALE,
            ..Default::default()
        };
        assert_eq!(
            wb_min_max_ratio(&bdi, 100, 400),
            (25 * BDI_RATIO_SCALE / 10, 125 * BDI_RATIO_SCALE / 10)
        );
        assert_eq!(
            wb_min_max_ratio(&bdi, 400, 400),
            (bdi.min_ratio, bdi.max_ratio)
        );
        // wb_dirty_limits: wb_bg_thresh in proportion.
        let t = th24();
        let mut dtc = DirtyThrottleControl::new(2_000_000, t);
        let wb = WbCounts {
            reclaimable: 7,
            writeback: 3,
            ..Default::default()
        };
        wb_dirty_limits(&mut dtc, &share(1, 2, 0, full, false), &wb);
        assert_eq!(dtc.wb_thresh, t.thresh / 2);
        assert_eq!(dtc.wb_bg_thresh, t.bg_thresh / 2);
        assert_eq!(dtc.wb_dirty, 10);
    }

    #[test]
    fn fprop_fractions_aging_and_cap() {
        let mut dom = WbDomain::new(0);
        dom.writeout_inc(1, 300, 0);
        dom.writeout_inc(2, 100, 0);
        assert_eq!(dom.wb_fraction(1), (300, 401));
        assert_eq!(dom.period_time_ns(), Some(3_000 * MS));
        assert!(!dom.age_if_due(2_999 * MS));
        assert!(dom.age_if_due(3_000 * MS));
        assert_eq!(dom.wb_fraction(1), (150, 200));
        assert_eq!(dom.period_time_ns(), Some(6_000 * MS));
        // A late (deferred) timer counts the missed period: two halvings.
        dom.writeout_period(10_000 * MS);
        assert_eq!(dom.wb_fraction(2), (12, 50));
        assert_eq!(dom.period_time_ns(), Some(12_000 * MS));
        assert_eq!(dom.wb_fraction(99), (0, 50));

        // max_prop_frac 10 (max_ratio 1%): the wb's counted share stays ~1%.
        let mut dom = WbDomain::new(0);
        for _ in 0..100 {
            dom.writeout_add(1, 10, 100, 0);
            dom.writeout_inc(2, 100, 0);
        }
        let (n, d) = dom.wb_fraction(1);
        assert!(n * 1000 <= d * 11 && n * 1000 >= d * 5, "{n}/{d}");
    }

    #[test]
    fn pause_bounds() {
        assert_eq!(wb_max_pause(INIT_BW, 1000, HZ1000), 5);
        assert_eq!(wb_max_pause(INIT_BW, 10_000_000, HZ1000), 200);
        // One dirtier at 100 MB/s: target 10 ms -> 250 pages, min pause 6.
        assert_eq!(
            wb_min_pause(INIT_BW, INIT_BW, 200, INIT_BW, HZ1000),
            (6, 250)
        );
        // Four dirtiers: +2 doublings -> target 29 ms.
        assert_eq!(wb_min_pause(INIT_BW, 6400, 200, 6400, HZ1000), (15, 181));
        assert_eq!(dirty_poll_interval(943_104, 1_257_984), 512);
        assert_eq!(dirty_poll_interval(5, 5), 1);
        assert_eq!(wb_stat_error(8), 8 * 4 * 8);
    }

    #[test]
    fn ratelimit_gate_and_set_ratelimit() {
        let mut dom = WbDomain::new(0);
        assert_eq!(writeback_set_ratelimit(&mut dom, 1_257_984, 1), 39_312);
        assert_eq!(dom.dirty_limit, 1_257_984);
        assert_eq!(writeback_set_ratelimit(&mut dom, 1_257_984, 8), 4_914);
        assert_eq!(writeback_set_ratelimit(&mut dom, 1000, 8), 16);

        let mut task = TaskDirtyState::default();
        let mut cpu = CpuDirtyRatelimit::default();
        account_task_dirtied(&mut task, &mut cpu, 31);
        assert_eq!(
            balance_dirty_pages_ratelimited_gate(&mut task, &mut cpu, false, 4914),
            None
        );
        account_task_dirtied(&mut task, &mut cpu, 1);
        assert_eq!(
            balance_dirty_pages_ratelimited_gate(&mut task, &mut cpu, false, 4914),
            Some(32)
        );
        assert_eq!(cpu.bdp_ratelimits, 0);
        // dirty_exceeded: every 8 pages.
        let mut task = TaskDirtyState::default();
        account_task_dirtied(&mut task, &mut cpu, 8);
        assert_eq!(
            balance_dirty_pages_ratelimited_gate(&mut task, &mut cpu, true, 4914),
            Some(8)
        );
        // A CPU that dirtied ratelimit_pages forces a balance.
        let mut task = TaskDirtyState::default();
        cpu.bdp_ratelimits = 4914;
        account_task_dirtied(&mut task, &mut cpu, 1);
        assert_eq!(
            balance_dirty_pages_ratelimited_gate(&mut task, &mut cpu, false, 4914),
            Some(1)
        );
        // Leaks of exited tasks are charged to the next dirtier.
        let exited = TaskDirtyState {
            nr_dirtied: 20,
            ..Default::default()
        };
        task_exit_dirty_leak(&exited, &mut cpu);
        let mut task = TaskDirtyState::default();
        account_task_dirtied(&mut task, &mut cpu, 12);
        assert_eq!(
            balance_dirty_pages_ratelimited_gate(&mut task, &mut cpu, false, 4914),
            Some(32)
        );
        assert_eq!(cpu.dirty_throttle_leaks, 0);
    }

    fn bdp_input<'a>(now_ns: u64, dirty: u64, writeback: u64, pages_dirtied: u64) -> BdpInput<'a> {
        BdpInput {
            now_ns,
            start_ns: now_ns,
            pages_dirtied,
            flags: BdpFlags::default(),
            thresholds: th24(),
            global: GlobalDirtyCounts {
                nr_file_dirty: dirty,
                nr_writeback: writeback,
            },
            wb_id: 1,
            wb: WbCounts {
                reclaimable: dirty,
                writeback,
                dirtied: 0,
                written: 0,
            },
            wb_has_dirty_io: true,
            writeback_in_progress: false,
            bdi: BdiDirtyConfig::default(),
            bdi_name: "8:0",
            bdi_min_ratio_sum: 0,
            tot_write_bandwidth: INIT_BW,
            local_throttle: false,
            nr_cpu_ids: 8,
            hz: HZ1000,
        }
    }

    /// A domain where wb 1 did all recent writeout, and a fresh wb.
    fn setup(now_ns: u64) -> (WbDomain, WbBandwidth) {
        let mut dom = WbDomain::new(0);
        writeback_set_ratelimit(&mut dom, th24().thresh, 8);
        dom.writeout_inc(1, 100_000, 0);
        let mut bw = WbBandwidth::new(0);
        bw.bw_time_stamp_ns = now_ns; // no bandwidth update in these calls
        (dom, bw)
    }

    #[test]
    fn bdp_freerun_below_ceiling() {
        let now = 5_000 * MS;
        let (mut dom, mut bw) = setup(now);
        let mut task = TaskDirtyState {
            nr_dirtied: 32,
            ..Default::default()
        };
        let inp = bdp_input(now, 900_000, 43_104, 32);
        let step = balance_dirty_pages(&inp, &mut task, &mut dom, &mut bw);
        assert_eq!(
            step.action,
            BdpAction::Freerun {
                nr_dirtied_pause: 512
            }
        );
        assert!(step.start_background, "dirty 900000 > bg_thresh 628224");
        assert!(step.trace.is_none() && step.set_dirty_exceeded.is_none());
        assert_eq!(task.nr_dirtied, 0);
        assert_eq!(task.nr_dirtied_pause, 512);
        assert_eq!(task.dirty_paused_when_ns, now);
        // One page over the ceiling: throttled.
        let inp = bdp_input(now, 900_001, 43_104, 32);
        let step = balance_dirty_pages(&inp, &mut task, &mut dom, &mut bw);
        assert!(!matches!(step.action, BdpAction::Freerun { .. }));
        // Below bg_thresh with writeback running: nothing to start.
        let mut inp = bdp_input(now, 600_000, 0, 32);
        inp.writeback_in_progress = true;
        let step = balance_dirty_pages(&inp, &mut task, &mut dom, &mut bw);
        assert!(!step.start_background);
    }

    #[test]
    fn bdp_short_pause_is_debt() {
        let now = 5_000 * MS;
        let (mut dom, mut bw) = setup(now);
        // At the setpoint, 32 pages at ~25600 pages/s = 1 jiffy < min_pause 6.
        let mut task = TaskDirtyState {
            nr_dirtied: 32,
            nr_dirtied_pause: 32,
            dirty_paused_when_ns: now,
        };
        let inp = bdp_input(now, 1_100_544, 0, 32);
        let step = balance_dirty_pages(&inp, &mut task, &mut dom, &mut bw);
        match step.action {
            BdpAction::NoPause {
                pause_ns,
                period_ns,
                ..
            } => {
                assert_eq!(pause_ns, MS as i64);
                assert_eq!(period_ns, MS);
            }
            a => panic!("{a:?}"),
        }
        assert_eq!(
            task.dirty_paused_when_ns,
            now + MS,
            "virtual time advanced by the period"
        );
        assert_eq!(task.nr_dirtied, 0);
        let tr = step.trace.unwrap();
        assert_eq!((tr.pause, tr.period, tr.think), (0, 1, 0));
    }

    #[test]
    fn bdp_pause_capped_at_max_pause() {
        let now = 5_000 * MS;
        let (mut dom, mut bw) = setup(now);
        let mut task = TaskDirtyState {
            nr_dirtied: 4096,
            nr_dirtied_pause: 4096,
            dirty_paused_when_ns: now,
        };
        // Close to the limit: pos_ratio tiny, 4096 pages take far over 200 ms.
        let inp = bdp_input(now, 1_250_000, 0, 4096);
        let step = balance_dirty_pages(&inp, &mut task, &mut dom, &mut bw);
        let BdpAction::Pause(p) = step.action else {
            panic!("{:?}", step.action)
        };
        assert_eq!(p.pause_ns, 200 * MS);
        assert!(p.period_ns > 400 * MS, "{}", p.period_ns);
        assert!(p.pos_ratio < 1024 / 4);
        // now advanced by min(pause - max_pause, max_pause) = 200 ms, + pause.
        assert_eq!(p.dirty_paused_when_ns, now + 400 * MS);
        assert!(p.stop_after);
        assert_eq!(task.nr_dirtied, 4096, "untouched until the caller slept");
        task.after_pause(&p);
        assert_eq!(task.nr_dirtied, 0);
        assert_eq!(task.nr_dirtied_pause, p.nr_dirtied_pause);
        let tr = step.trace.unwrap();
        assert_eq!(tr.pause, 200);
        assert!(tr
            .to_string()
            .starts_with("bdi 8:0: limit=1257984 setpoint=1100544 dirty=1250000"));
    }

    #[test]
    fn bdp_over_limit_pauses_max_and_loops() {
        let now = 5_000 * MS;
        let (mut dom, mut bw) = setup(now);
        let mut task = TaskDirtyState::default();
        let inp = bdp_input(now, 1_300_000, 0, 32);
        let step = balance_dirty_pages(&inp, &mut task, &mut dom, &mut bw);
        let BdpAction::Pause(p) = step.action else {
            panic!("{:?}", step.action)
        };
        assert_eq!((p.pos_ratio, p.task_ratelimit), (0, 0));
        assert_eq!(p.pause_ns, 200 * MS);
        assert!(p.dirty_exceeded && step.set_dirty_exceeded == Some(true));
        assert!(!p.stop_after, "zero rate: loop again after sleeping");
    }

    #[test]
    fn bdp_async_would_block_instead_of_pausing() {
        let now = 5_000 * MS;
        let (mut dom, mut bw) = setup(now);
        let mut task = TaskDirtyState {
            nr_dirtied: 4096,
            nr_dirtied_pause: 4096,
            dirty_paused_when_ns: now,
        };
        let before = task;
        let mut inp = bdp_input(now, 1_200_000, 0, 4096);
        let sync = balance_dirty_pages(&inp, &mut task.clone(), &mut dom.clone(), &mut bw.clone());
        inp.flags.bdp_async = true;
        let step = balance_dirty_pages(&inp, &mut task, &mut dom, &mut bw);
        let (BdpAction::Pause(a), BdpAction::WouldBlock(b)) = (sync.action, step.action) else {
            panic!("{:?} / {:?}", sync.action, step.action)
        };
        assert_eq!(a, b);
        assert!(b.pause_ns > 0);
        assert_eq!(task, before, "-EAGAIN leaves the task state alone");
    }

    // ---- closed loop -------------------------------------------------------

    struct Writer {
        task: TaskDirtyState,
        /// The writer's own clock, ns.
        t: u64,
        /// Iterate balance_dirty_pages again at wakeup: (pages_dirtied, start).
        again: Option<(u64, u64)>,
        dirtied: u64,
    }

    struct World {
        dom: WbDomain,
        bw: WbBandwidth,
        bdi: BdiDirtyConfig,
        th: DirtyThresholds,
        nr_dirty: u64,
        nr_writeback: u64,
        wb_dirtied: u64,
        wb_written: u64,
        dirty_exceeded: bool,
        flusher: bool,
        cpu: CpuDirtyRatelimit,
        ratelimit_pages: u64,
        writers: Vec<Writer>,
        /// Writer speed, pages/s.
        write_rate: u64,
        /// Device speed, pages/s.
        device_rate: u64,
        tot_bw: u64,
        now: u64,
    }

    const DT: u64 = 10 * MS;
    const INFLIGHT: u64 = 1024;

    impl World {
        fn new(n: usize, write_rate: u64, device_rate: u64, bdi: BdiDirtyConfig) -> Self {
            let th = th24();
            let mut dom = WbDomain::new(0);
            let ratelimit_pages = writeback_set_ratelimit(&mut dom, th.thresh, 4);
            World {
                dom,
                bw: WbBandwidth::new(0),
                bdi,
                th,
                nr_dirty: 0,
                nr_writeback: 0,
                wb_dirtied: 0,
                wb_written: 0,
                dirty_exceeded: false,
                flusher: false,
                cpu: CpuDirtyRatelimit::default(),
                ratelimit_pages,
                writers: (0..n)
                    .map(|_| Writer {
                        task: TaskDirtyState::default(),
                        t: 0,
                        again: None,
                        dirtied: 0,
                    })
                    .collect(),
                write_rate,
                device_rate,
                tot_bw: INIT_BW,
                now: 0,
            }
        }

        fn input(&self, now: u64, start: u64, pages: u64) -> BdpInput<'static> {
            BdpInput {
                now_ns: now,
                start_ns: start,
                pages_dirtied: pages,
                flags: BdpFlags::default(),
                thresholds: self.th,
                global: GlobalDirtyCounts {
                    nr_file_dirty: self.nr_dirty,
                    nr_writeback: self.nr_writeback,
                },
                wb_id: 1,
                wb: WbCounts {
                    reclaimable: self.nr_dirty,
                    writeback: self.nr_writeback,
                    dirtied: self.wb_dirtied,
                    written: self.wb_written,
                },
                wb_has_dirty_io: true,
                writeback_in_progress: self.flusher,
                bdi: self.bdi,
                bdi_name: "8:0",
                bdi_min_ratio_sum: 0,
                tot_write_bandwidth: self.tot_bw,
                local_throttle: false,
                nr_cpu_ids: 4,
                hz: HZ1000,
            }
        }

        /// One balance_dirty_pages iteration for writer `i` at its clock.
        fn balance(&mut self, i: usize, pages: u64, start: u64) {
            let now = self.writers[i].t;
            let inp = self.input(now, start, pages);
            let w = &mut self.writers[i];
            let step = balance_dirty_pages(&inp, &mut w.task, &mut self.dom, &mut self.bw);
            if step.start_background {
                self.flusher = true;
            }
            if let Some(b) = step.bandwidth {
                self.tot_bw = (self.tot_bw as i64 + b.tot_write_bandwidth_delta) as u64;
            }
            if let Some(e) = step.set_dirty_exceeded {
                self.dirty_exceeded = e;
            }
            if let BdpAction::Pause(p) = step.action {
                w.t = now + p.pause_ns;
                w.task.after_pause(&p);
                w.again = if p.stop_after {
                    None
                } else {
                    Some((pages, start))
                };
            }
        }

        fn run_writer(&mut self, i: usize, end: u64) {
            while self.writers[i].t < end {
                if let Some((pages, start)) = self.writers[i].again.take() {
                    self.balance(i, pages, start);
                    continue;
                }
                let w = &mut self.writers[i];
                let want = w
                    .task
                    .nr_dirtied_pause
                    .saturating_sub(w.task.nr_dirtied)
                    .max(1);
                let room = ((end - w.t) as u128 * self.write_rate as u128 / 1_000_000_000) as u64;
                let n = want.min(room.max(1));
                w.t += (n as u128 * 1_000_000_000 / self.write_rate as u128) as u64;
                w.dirtied += n;
                account_task_dirtied(&mut w.task, &mut self.cpu, n);
                self.nr_dirty += n;
                self.wb_dirtied += n;
                let gate = balance_dirty_pages_ratelimited_gate(
                    &mut w.task,
                    &mut self.cpu,
                    self.dirty_exceeded,
                    self.ratelimit_pages,
                );
                if let Some(pages) = gate {
                    let start = self.writers[i].t;
                    self.balance(i, pages, start);
                }
            }
        }

        fn run_device(&mut self, now: u64) {
            let done = self.nr_writeback.min(self.device_rate * DT / 1_000_000_000);
            self.nr_writeback -= done;
            self.wb_written += done;
            if done > 0 {
                self.dom.writeout_add(1, self.bdi.max_prop_frac, done, now);
            }
            self.dom.age_if_due(now);
            if self.flusher {
                let share = WbShare::new(
                    &mut self.dom,
                    1,
                    &self.bdi,
                    0,
                    self.bw.avg_write_bandwidth,
                    self.tot_bw,
                );
                if wb_over_bg_thresh(self.nr_dirty, self.th, self.nr_dirty, &share) {
                    let sub = self.nr_dirty.min(INFLIGHT - self.nr_writeback);
                    self.nr_dirty -= sub;
                    self.nr_writeback += sub;
                } else if self.nr_writeback == 0 {
                    self.flusher = false;
                }
                // do_writepages() updates the bandwidth once per chunk (about
                // half a second of writeback), not every step.
                if now.is_multiple_of(500 * MS) && self.bw.update_due(now, HZ1000) {
                    let d = wb_update_bandwidth(
                        &mut self.bw,
                        now,
                        self.wb_dirtied,
                        self.wb_written,
                        true,
                        HZ1000,
                    );
                    self.tot_bw = (self.tot_bw as i64 + d) as u64;
                }
            }
        }

        /// Runs for `len_ns`; returns the mean and the max of dirty +
        /// writeback over the steps after `measure_from` (absolute time).
        fn run(&mut self, len_ns: u64, measure_from: u64) -> (u64, u64) {
            let (mut sum, mut n, mut max) = (0u64, 0u64, 0u64);
            let mut now = self.now;
            let end_ns = now + len_ns;
            while now < end_ns {
                let step_end = now + DT;
                for i in 0..self.writers.len() {
                    self.run_writer(i, step_end);
                }
                now = step_end;
                self.run_device(now);
                if now >= measure_from {
                    let d = self.nr_dirty + self.nr_writeback;
                    sum += d;
                    n += 1;
                    max = max.max(d);
                }
            }
            self.now = now;
            (sum / n.max(1), max)
        }
    }

    const GB_S: u64 = (1 << 30) / PAGE_SIZE;
    const MB100_S: u64 = 100 << (20 - PAGE_SHIFT);

    #[test]
    fn closed_loop_one_writer_settles_at_setpoint() {
        let mut w = World::new(1, GB_S, MB100_S, BdiDirtyConfig::default());
        let (mean, max) = w.run(30_000 * MS, 20_000 * MS);
        let th = w.th;
        let setpoint = (th.freerun_ceiling() + th.thresh) / 2;
        eprintln!(
            "1 writer: ratelimit {} avg_bw {} mean dirty {mean} max {max} setpoint {setpoint}",
            w.bw.dirty_ratelimit, w.bw.avg_write_bandwidth
        );
        let r = w.bw.dirty_ratelimit;
        assert!(
            r * 10 >= MB100_S * 8 && r * 10 <= MB100_S * 12,
            "ratelimit {r}"
        );
        assert!(
            mean > th.bg_thresh && max < th.thresh,
            "mean {mean} max {max}"
        );
        assert!(
            mean.abs_diff(setpoint) < setpoint / 20,
            "mean {mean} vs setpoint {setpoint}"
        );
    }

    #[test]
    fn closed_loop_slow_device_rate_converges_from_init_bw() {
        // 40 MB/s device: dirty_ratelimit must come down from INIT_BW (100 MB/s).
        let dev = 40 << (20 - PAGE_SHIFT);
        let mut w = World::new(1, GB_S, dev, BdiDirtyConfig::default());
        let (mean, max) = w.run(30_000 * MS, 20_000 * MS);
        eprintln!(
            "40MB/s: ratelimit {} avg_bw {} mean {mean} max {max}",
            w.bw.dirty_ratelimit, w.bw.avg_write_bandwidth
        );
        let r = w.bw.dirty_ratelimit;
        assert!(
            r * 10 >= dev * 8 && r * 10 <= dev * 12,
            "ratelimit {r} vs {dev}"
        );
        let bw = w.bw.avg_write_bandwidth;
        assert!(
            bw * 10 >= dev * 9 && bw * 10 <= dev * 11,
            "avg_write_bandwidth {bw}"
        );
        assert!(mean > w.th.bg_thresh && max < w.th.thresh);
    }

    #[test]
    fn closed_loop_n_writers_share_bandwidth() {
        let n = 4u64;
        let mut w = World::new(n as usize, GB_S, MB100_S, BdiDirtyConfig::default());
        w.run(30_000 * MS, 30_000 * MS);
        let before: Vec<u64> = w.writers.iter().map(|x| x.dirtied).collect();
        let (mean, max) = w.run(10_000 * MS, 0);
        let fair = MB100_S / n;
        for (x, b) in w.writers.iter().zip(before) {
            let rate = (x.dirtied - b) / 10;
            eprintln!("writer rate {rate} fair {fair}");
            assert!(
                rate * 4 >= fair * 3 && rate * 4 <= fair * 5,
                "rate {rate} vs {fair}"
            );
        }
        let r = w.bw.dirty_ratelimit;
        eprintln!("4 writers: ratelimit {r} mean {mean} max {max}");
        assert!(
            r * 4 >= fair * 3 && r * 4 <= fair * 5,
            "ratelimit {r} vs {fair}"
        );
        assert!(mean > w.th.bg_thresh && max < w.th.thresh);
    }

    #[test]
    fn closed_loop_strictlimit_keeps_wb_near_its_setpoint() {
        let mut bdi = BdiDirtyConfig {
            strictlimit: true,
            ..Default::default()
        };
        bdi.set_max_ratio(1).unwrap();
        assert_eq!(bdi.max_prop_frac, 10);
        let mut w = World::new(1, GB_S, MB100_S, bdi);
        let (mean, max) = w.run(30_000 * MS, 20_000 * MS);
        let wb_thresh = w.th.thresh / 100;
        let wb_bg = wb_thresh * w.th.bg_thresh / w.th.thresh;
        let wb_setpoint = (wb_thresh + wb_bg) / 2;
        eprintln!(
            "strict: mean {mean} max {max} wb_setpoint {wb_setpoint} wb_thresh {wb_thresh} ratelimit {}",
            w.bw.dirty_ratelimit
        );
        assert!(max <= wb_thresh, "max {max} > wb_thresh {wb_thresh}");
        assert!(mean.abs_diff(wb_setpoint) < wb_setpoint / 10, "mean {mean}");
        // Global dirty stays far below the global freerun ceiling.
        assert!(max < w.th.bg_thresh / 10);
    }
}
