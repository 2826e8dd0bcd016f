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
//! - The memcg domain (`mdtc`) of a cgroup wb (a wb of a non-root memcg):
//!   `mem_cgroup_wb_stats` (mm/memcontrol.rs), `mdtc_calc_avail()`,
//!   `domain_dirty_limits()` on it (bytes settings as ratios of the global
//!   available memory), a `wb_domain` per memcg (its completions and
//!   dirty_limit), `balance_domain_limits()` / `balance_wb_limits()` of both
//!   domains with the smaller pos_ratio (`sdtc`) pacing the task,
//!   `__wb_update_bandwidth(gdtc, mdtc)`, `wb_over_bg_thresh()` with the
//!   memcg domain, `cgwb_calc_thresh()`. Simplified: the memcg's dirty and
//!   writeback counts are its cgwbs' counters (not per-memcg vmstat), its
//!   file pages its whole charge (no anonymous memory is modelled), its
//!   `wb_domain` is created at first use rather than at css alloc, and the
//!   `bdi_dirty_ratelimit` trace shows the global update only; the kernel
//!   emits a second one for the memcg update.
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

pub mod balance;
pub mod bandwidth;
pub mod limits;
pub mod pause;

pub use balance::*;
pub use bandwidth::*;
pub use limits::*;
pub use pause::*;

#[cfg(test)]
mod tests;
