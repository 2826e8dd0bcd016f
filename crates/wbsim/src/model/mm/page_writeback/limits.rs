//! The pure dirty-limit calculator of `mm/page-writeback.c`: page and jiffy
//! units, the `vm.dirty_*` sysctls with their handlers, the global and per-wb
//! thresholds, the global `wb_domain` with its writeout fractions, and the
//! position control that turns dirty counts into a throttling ratio.

use std::collections::BTreeMap;

pub use crate::model::mm::vmstat::{PAGE_SHIFT, PAGE_SIZE};

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

pub(super) const NSEC_PER_SEC: u64 = 1_000_000_000;

/// Errors for bad parameters (user input).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DirtyParamError {
    /// A percentage above 100.
    #[error("{name} = {value}: must be 0..=100")]
    RatioOutOfRange { name: &'static str, value: u64 },
    /// A sysctl outside its `proc_dointvec_minmax` range.
    #[error("{name} = {value}: must be {min}..={max}")]
    OutOfRange {
        name: &'static str,
        value: u64,
        min: u64,
        max: u64,
    },
    /// A byte setting whose page count does not fit in 32 bits (the kernel's
    /// -ERANGE).
    #[error("{name} = {value}: more than 2^32 pages")]
    BytesOutOfRange { name: &'static str, value: u64 },
    /// `vm.dirty_bytes` below `dirty_bytes_min` (2 pages; the kernel's -EINVAL).
    #[error("{value} is below the kernel's minimum of 2 pages ({min} bytes)")]
    BytesBelowMin { value: u64, min: u64 },
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
    pub(super) fn to_ms(self, j: i64) -> i64 {
        j * 1000 / self.0 as i64
    }
}

impl Default for Hz {
    fn default() -> Self {
        Hz::DEFAULT
    }
}

pub(super) fn ilog2(x: u64) -> u64 {
    (63 - x.max(1).leading_zeros()) as u64
}

pub(super) fn roundup_pow_of_two(x: u64) -> u64 {
    x.max(1).next_power_of_two()
}

pub(super) fn mul_div(a: u64, b: u64, c: u64) -> u64 {
    let q = (a as u128 * b as u128) / (c.max(1) as u128);
    q.min(u64::MAX as u128) as u64
}

pub(super) fn div_round_up(a: u64, b: u64) -> u64 {
    a.div_ceil(b)
}

/// KBps(): pages/s to KB/s, as the tracepoints print rates.
pub(super) fn kbps(pages_per_sec: u64) -> u64 {
    pages_per_sec << (PAGE_SHIFT - 10)
}

// ---------------------------------------------------------------------------
// vm sysctls and thresholds
// ---------------------------------------------------------------------------

/// The `/proc/sys/vm/dirty_*` sysctls (mm/page-writeback.c). Write them
/// through the `set_*` handlers below, which keep the kernel's rules (writing
/// a `*_bytes` sysctl zeroes its ratio and the reverse); the scenario layer's
/// `[sysctl]` table calls them. Serialized as the results' `model.sysctl`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
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
    /// vm.min_free_kbytes, KiB, when written; None = the boot-time default
    /// `sqrt(lowmem_kbytes * 16)` (mm/page_alloc.c, `calculate_min_free_kbytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_free_kbytes: Option<u64>,
    /// vm.watermark_scale_factor, 1/10000 of memory between watermarks.
    /// Default 10 (mm/page_alloc.c), range 1..=3000.
    #[serde(default = "default_watermark_scale_factor")]
    pub watermark_scale_factor: u64,
}

/// Default `vm.watermark_scale_factor`, 1/10000 of the zone
/// (mm/page_alloc.c: `watermark_scale_factor = 10`).
pub const WATERMARK_SCALE_FACTOR_DEFAULT: u64 = 10;
/// Largest `vm.watermark_scale_factor` the sysctl accepts (mm/page_alloc.c
/// sysctl table: extra2 = 3000).
pub const WATERMARK_SCALE_FACTOR_MAX: u64 = 3000;

fn default_watermark_scale_factor() -> u64 {
    WATERMARK_SCALE_FACTOR_DEFAULT
}

/// Smallest non-zero `vm.dirty_bytes`, bytes. Source: `dirty_bytes_min`.
pub const DIRTY_BYTES_MIN: u64 = 2 * PAGE_SIZE;

impl Default for VmDirtyParams {
    fn default() -> Self {
        VmDirtyParams {
            dirty_ratio: 20,
            dirty_background_ratio: 10,
            dirty_bytes: 0,
            dirty_background_bytes: 0,
            dirty_expire_centisecs: 3000,
            dirty_writeback_centisecs: 500,
            min_free_kbytes: None,
            watermark_scale_factor: default_watermark_scale_factor(),
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
        self.check_watermark_scale_factor(self.watermark_scale_factor)?;
        Ok(())
    }

    fn check_watermark_scale_factor(&self, v: u64) -> Result<(), DirtyParamError> {
        let max = WATERMARK_SCALE_FACTOR_MAX;
        if v == 0 || v > max {
            return Err(DirtyParamError::OutOfRange {
                name: "vm.watermark_scale_factor",
                value: v,
                min: 1,
                max,
            });
        }
        Ok(())
    }

    /// Writes vm.watermark_scale_factor (1..=3000, `proc_dointvec_minmax`).
    pub fn set_watermark_scale_factor(&mut self, v: u64) -> Result<(), DirtyParamError> {
        self.check_watermark_scale_factor(v)?;
        self.watermark_scale_factor = v;
        Ok(())
    }

    /// Writes vm.min_free_kbytes (`min_free_kbytes_sysctl_handler`: the
    /// value is kept as `user_min_free_kbytes`, at most INT_MAX).
    pub fn set_min_free_kbytes(&mut self, kb: u64) -> Result<(), DirtyParamError> {
        if kb > i32::MAX as u64 {
            return Err(DirtyParamError::OutOfRange {
                name: "vm.min_free_kbytes",
                value: kb,
                min: 0,
                max: i32::MAX as u64,
            });
        }
        self.min_free_kbytes = Some(kb);
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
    /// `dirty_ratio`. Values below `dirty_bytes_min` (2 pages) are refused as
    /// the kernel does, except 0, accepted here as "use the ratio" (the form a
    /// configuration file writes to leave `dirty_bytes` unset).
    pub fn set_dirty_bytes(&mut self, bytes: u64) -> Result<(), DirtyParamError> {
        if bytes != 0 && bytes < DIRTY_BYTES_MIN {
            return Err(DirtyParamError::BytesBelowMin {
                value: bytes,
                min: DIRTY_BYTES_MIN,
            });
        }
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
    dirty_limits_from(
        available_memory,
        (ratio, params.dirty_bytes),
        (bg_ratio, params.dirty_background_bytes),
        rt_boost,
    )
}

/// `domain_dirty_limits()` for a memcg domain (`mdtc`): the byte settings
/// become ratios of the global domain's available memory `global_avail`
/// (pages), in 1/PAGE_SIZE units, at most PAGE_SIZE (100%), and are then
/// applied to the memcg's `available_memory` like the ratios.
pub fn domain_dirty_limits_memcg(
    available_memory: u64,
    global_avail: u64,
    params: &VmDirtyParams,
    rt_boost: Option<u64>,
) -> DirtyThresholds {
    let as_ratio = |bytes: u64, pct: u64| {
        if bytes != 0 {
            div_round_up(bytes, global_avail.max(1)).min(PAGE_SIZE)
        } else {
            pct * PAGE_SIZE / 100
        }
    };
    dirty_limits_from(
        available_memory,
        (as_ratio(params.dirty_bytes, params.dirty_ratio), 0),
        (
            as_ratio(params.dirty_background_bytes, params.dirty_background_ratio),
            0,
        ),
        rt_boost,
    )
}

/// `mdtc_calc_avail()`: a memcg domain's available memory, pages: its file
/// pages plus what it could still grow into, the smaller of its `headroom`
/// under its limits and the clean page cache of the rest of the machine
/// (global available minus global dirty minus the memcg's own clean pages).
pub fn mdtc_calc_avail(
    filepages: u64,
    headroom: u64,
    memcg_dirty: u64,
    global_avail: u64,
    global_dirty: u64,
) -> u64 {
    let clean = filepages - filepages.min(memcg_dirty);
    let global_clean = global_avail - global_avail.min(global_dirty);
    let other_clean = global_clean - global_clean.min(clean);
    filepages.saturating_add(headroom.min(other_clean))
}

/// The thresholds of `domain_dirty_limits()` from (ratio in 1/PAGE_SIZE
/// units, bytes) pairs for thresh and bg_thresh (bytes win when not 0).
fn dirty_limits_from(
    available_memory: u64,
    (ratio, bytes): (u64, u64),
    (bg_ratio, bg_bytes): (u64, u64),
    rt_boost: Option<u64>,
) -> DirtyThresholds {
    let mut thresh = if bytes != 0 {
        div_round_up(bytes, PAGE_SIZE)
    } else {
        mul_div(ratio, available_memory, PAGE_SIZE)
    };
    let mut bg_thresh = if bg_bytes != 0 {
        div_round_up(bg_bytes, PAGE_SIZE)
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
        self.set_max_ratio_no_scale(percent * BDI_RATIO_SCALE)
    }

    /// `bdi_set_max_ratio_no_scale()` (`__bdi_set_max_ratio`): max_ratio in
    /// 1/BDI_RATIO_SCALE percent, as `max_ratio_fine` and `max_bytes` set it.
    pub fn set_max_ratio_no_scale(&mut self, max: u64) -> Result<(), DirtyParamError> {
        if max > 100 * BDI_RATIO_SCALE {
            return Err(DirtyParamError::RatioOutOfRange {
                name: "bdi max_ratio",
                value: max / BDI_RATIO_SCALE,
            });
        }
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
pub fn wb_over_bg_thresh_counts(
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
