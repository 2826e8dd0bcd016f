//! `balance_dirty_pages()` as a task lives it, and the page-state counters
//! it reads (mm/page-writeback.c): the async side of
//! `balance_dirty_pages_ratelimited_flags()` (the gate, then the loop that
//! sleeps the pauses [`super::pause`] computes), `wb_over_bg_thresh()` on
//! the machine's counters, the lazy bandwidth update of `do_writepages()`,
//! the RWF_DONTCACHE flusher kick, and the counter updates of
//! `folio_account_dirtied`, `folio_clear_dirty_for_io`,
//! `folio_start_writeback` and `folio_end_writeback` (`__folio_end_writeback`,
//! `wb_writeout_inc`) on NR_FILE_DIRTY, NR_WRITEBACK, NR_DIRTIED, NR_WRITTEN,
//! NR_FILE_PAGES and the wb's WB_RECLAIMABLE / WB_WRITEBACK / WB_DIRTIED /
//! WB_WRITTEN.
//!
//! Simplified: a task's CPU (for the per-CPU `bdp_ratelimits`) is fixed by
//! its slot, with no migration. The memcg domain of a cgroup wb is evaluated
//! with the global one ([`super::pause::balance_dirty_pages_domains`]).

use sim::Time;
use std::rc::Rc;

use super::bandwidth::wb_update_bandwidth;
use super::limits::{
    __wb_calc_thresh, wb_over_bg_thresh_counts, GlobalDirtyCounts, WbCounts, WbDomain, WbShare,
};
use super::limits::{domain_dirty_limits_memcg, mdtc_calc_avail};
use super::pause::{
    account_task_dirtied, balance_dirty_pages, balance_dirty_pages_domains,
    balance_dirty_pages_ratelimited_gate, BdpAction, BdpFlags, BdpInput, MdtcInput, TaskDirtyState,
};
use crate::model::errno::IoError;
use crate::model::kernel::stats::ViolationObjects;
use crate::model::mm::backing_dev::{wb_start_background_writeback, wb_wakeup, Bdi, Wb};
use crate::model::mm::filemap::Delta;
use crate::model::mm::memcontrol::{
    mem_cgroup_flush_foreign, mem_cgroup_wb_stats_full, with_mem_cgroup_wb_domain,
};
use crate::model::mm::state::Mm;

/// A task's dirty-throttling state (the fields of `task_struct`).
#[derive(Clone, Copy, Debug, Default)]
pub struct TaskDirty {
    pub st: TaskDirtyState,
    /// Pages dirtied in total (statistics).
    pub dirtied_total: u64,
    /// Time spent paused in balance_dirty_pages, ns (statistics).
    pub paused_ns: u64,
    /// Number of pauses taken.
    pub pauses: u64,
    /// What this task's `balance_dirty_pages` and `bdi_dirty_ratelimit`
    /// tracepoints carried (statistics).
    pub trace: ThrottleTrace,
}

/// A rate seen in a tracepoint, KB/s, with when: (time, rate).
pub type SeenRate = (Time, u64);
/// A rate-limit update seen in a tracepoint: (time, `dirty_ratelimit`,
/// `awrite_bw`), the rates in KB/s.
pub type SeenUpdate = (Time, u64, u64);

/// A summary of the `balance_dirty_pages` and `bdi_dirty_ratelimit`
/// tracepoints one or more tasks fired, as `wbsim probe buffered-write`
/// folds them from the live kernel's: event counts, the pauses slept, and
/// the first and last rates (with when they were seen, so that summaries
/// of several tasks merge in time order).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ThrottleTrace {
    /// `balance_dirty_pages` events (every throttled call: those that slept
    /// and those whose pause was too short to).
    pub bdp_events: u64,
    /// Of those, the ones that slept.
    pub paused: u64,
    /// Their pauses, ns.
    pub pause_ns: u64,
    /// `dirty_ratelimit` of the first and last `balance_dirty_pages` event,
    /// KB/s, with the time of the event.
    pub bdp_ratelimit: Option<(SeenRate, SeenRate)>,
    /// `bdi_dirty_ratelimit` events (rate-limit updates this task ran).
    pub updates: u64,
    /// `dirty_ratelimit` and `awrite_bw` (KB/s) of the first and last
    /// update, with its time.
    pub update_rates: Option<(SeenUpdate, SeenUpdate)>,
}

impl ThrottleTrace {
    /// Folds `other` into this summary (sums, the earlier first, the later
    /// last).
    pub fn merge(&mut self, other: &ThrottleTrace) {
        self.bdp_events += other.bdp_events;
        self.paused += other.paused;
        self.pause_ns += other.pause_ns;
        self.updates += other.updates;
        self.bdp_ratelimit = merge_span(self.bdp_ratelimit, other.bdp_ratelimit, |r| r.0);
        self.update_rates = merge_span(self.update_rates, other.update_rates, |u| u.0);
    }

    fn note_bdp(&mut self, now: Time, dirty_ratelimit_kbps: u64) {
        self.bdp_events += 1;
        let v = (now, dirty_ratelimit_kbps);
        self.bdp_ratelimit = Some(self.bdp_ratelimit.map_or((v, v), |(f, _)| (f, v)));
    }

    fn note_update(&mut self, now: Time, dirty_ratelimit_kbps: u64, awrite_bw_kbps: u64) {
        self.updates += 1;
        let v = (now, dirty_ratelimit_kbps, awrite_bw_kbps);
        self.update_rates = Some(self.update_rates.map_or((v, v), |(f, _)| (f, v)));
    }
}

/// Two (first, last) spans merged: the earlier first and the later last,
/// by the time `at` gives.
fn merge_span<T: Copy>(
    a: Option<(T, T)>,
    b: Option<(T, T)>,
    at: impl Fn(&T) -> Time,
) -> Option<(T, T)> {
    match (a, b) {
        (Some((a0, a1)), Some((b0, b1))) => Some((
            if at(&b0) < at(&a0) { b0 } else { a0 },
            if at(&b1) > at(&a1) { b1 } else { a1 },
        )),
        (a, b) => a.or(b),
    }
}

/// The bdi a wb belongs to.
pub fn wb_bdi(mm: &Mm, wb: &Wb) -> Option<Rc<Bdi>> {
    mm.bdis().iter().find(|b| b.owns(wb)).cloned()
}

fn bdi_min_ratio_sum(mm: &Mm) -> u64 {
    mm.bdis().iter().map(|b| b.dirty_cfg.get().min_ratio).sum()
}

/// `wb`'s share of domain `dom` (global or its memcg's): its writeout
/// fraction there and `bdi`'s ratios scaled by its bandwidth share.
fn wb_share(mm: &Mm, dom: &mut WbDomain, wb: &Wb, bdi: &Bdi) -> WbShare {
    WbShare::new(
        dom,
        wb.id,
        &bdi.dirty_cfg.get(),
        bdi_min_ratio_sum(mm),
        wb.bw.borrow().avg_write_bandwidth,
        bdi.tot_write_bandwidth.get(),
    )
}

fn wb_counts(wb: &Wb) -> WbCounts {
    let s = *wb.stat.borrow();
    WbCounts {
        reclaimable: s.reclaimable,
        writeback: s.writeback,
        dirtied: s.dirtied,
        written: s.written,
    }
}

/// The memcg domain of `wb` (`domain_dirty_avail` + `mdtc_calc_avail` over
/// `mem_cgroup_wb_stats`, then `domain_dirty_limits` on it), given the
/// global domain's dirty count `global_dirty` (with or without writeback
/// pages, as `include_writeback`). None for a wb of the root memcg.
fn memcg_domain_input(
    mm: &Mm,
    wb: &Wb,
    global_dirty: u64,
    include_writeback: bool,
) -> Option<MdtcInput> {
    let memcg = mm.memcgs().get(wb.memcg_id.get())?;
    memcg.parent?;
    let st = mem_cgroup_wb_stats_full(mm, &memcg);
    let dirty = st.dirty + if include_writeback { st.writeback } else { 0 };
    let gavail = mm.global_dirtyable();
    let avail = mdtc_calc_avail(st.filepages, st.headroom, dirty, gavail, global_dirty);
    let thresholds = domain_dirty_limits_memcg(avail, gavail, &mm.dirty_params(), None);
    Some(MdtcInput { dirty, thresholds })
}

/// `wb_over_bg_thresh`: should background writeback keep going on `wb`?
/// The global domain first, then (for a cgroup wb) the memcg's: its dirty
/// pages over its bg_thresh, or the wb's over its share of it.
pub fn wb_over_bg_thresh(mm: &Mm, wb: &Rc<Wb>) -> bool {
    let Some(bdi) = wb_bdi(mm, wb) else {
        return false;
    };
    let th = mm.global_thresholds();
    let nr_dirty = mm.vm().nr_file_dirty;
    let reclaimable = wb.stat.borrow().reclaimable;
    let over = {
        let mut dom = mm.global_domain_mut();
        dom.age_if_due(mm.now());
        let share = wb_share(mm, &mut dom, wb, &bdi);
        wb_over_bg_thresh_counts(nr_dirty, th, reclaimable, &share)
    };
    if over {
        return true;
    }
    let Some(m) = memcg_domain_input(mm, wb, nr_dirty, false) else {
        return false;
    };
    let now = mm.now();
    with_mem_cgroup_wb_domain(mm, wb.memcg_id.get(), |_, mdom| {
        mdom.age_if_due(now);
        let share = wb_share(mm, mdom, wb, &bdi);
        wb_over_bg_thresh_counts(m.dirty, m.thresholds, reclaimable, &share)
    })
    .unwrap_or(false)
}

/// `cgwb_calc_thresh`: a cgroup wb's share of its memcg domain's
/// throttle threshold, pages (the kernel's debugfs `wb_thresh` of a cgwb is
/// the smaller of this and its global share). None for a root-memcg wb.
pub fn cgwb_calc_thresh(mm: &Mm, wb: &Rc<Wb>) -> Option<u64> {
    let bdi = wb_bdi(mm, wb)?;
    let global_dirty = {
        let vm = mm.vm();
        vm.nr_file_dirty + vm.nr_writeback
    };
    let m = memcg_domain_input(mm, wb, global_dirty, true)?;
    with_mem_cgroup_wb_domain(mm, wb.memcg_id.get(), |_, mdom| {
        let share = wb_share(mm, mdom, wb, &bdi);
        __wb_calc_thresh(m.thresholds.thresh, m.dirty, &share)
    })
}

fn apply_bw_delta(bdi: &Bdi, delta: i64) {
    let t = bdi.tot_write_bandwidth.get() as i64 + delta;
    bdi.tot_write_bandwidth.set(t.max(0) as u64);
}

/// The lazy bandwidth update at the end of `do_writepages`.
pub fn wb_update_bandwidth_if_due(mm: &Mm, wb: &Rc<Wb>) {
    let now = mm.now();
    if !wb.bw.borrow().update_due(now, mm.hz()) {
        return;
    }
    let s = *wb.stat.borrow();
    let delta = wb_update_bandwidth(
        &mut wb.bw.borrow_mut(),
        now,
        s.dirtied,
        s.written,
        wb.has_dirty_io(),
        mm.hz(),
    );
    if let Some(bdi) = wb_bdi(mm, wb) {
        apply_bw_delta(&bdi, delta);
    }
}

/// `folio_account_dirtied`'s task part: the task and the CPU count the pages.
pub fn account_dirtied(mm: &Mm, task: &mut TaskDirty, nr: u64) {
    account_task_dirtied(&mut task.st, &mut mm.bdp_cpu_mut(), nr);
    task.dirtied_total += nr;
}

/// Pages a task may dirty through `wb` before the ratelimit gate of
/// `balance_dirty_pages_ratelimited_flags` fires for it: what is left of the
/// task's `nr_dirtied_pause` (8 pages while the wb's `dirty_exceeded`), at
/// least 1. A writer that calls the gate per folio may take this many pages
/// in one step: the gate would have returned at once for every folio
/// before. Simplified: the per-CPU `ratelimit_pages` check (the safety net
/// for many tasks each under their own ratelimit) is made at the end of a
/// step rather than per folio, so a task whose CPU crossed it mid-step is
/// balanced at most `nr_dirtied_pause` pages late.
pub fn pages_until_ratelimit(task: &TaskDirty, wb: &Wb) -> u64 {
    let mut ratelimit = task.st.nr_dirtied_pause;
    if wb.dirty_exceeded.get() {
        ratelimit = ratelimit.min(super::limits::DIRTY_EXCEEDED_RATELIMIT);
    }
    ratelimit.saturating_sub(task.st.nr_dirtied).max(1)
}

/// `balance_dirty_pages_ratelimited_flags`: the gate, then the
/// `balance_dirty_pages` loop, sleeping the pauses it decides. With `nowait`
/// (BDP_ASYNC) returns `Err(IoError::Again)` where it would sleep.
pub async fn balance_dirty_pages_ratelimited(
    mm: &Mm,
    task: &mut TaskDirty,
    wb: &Rc<Wb>,
    nowait: bool,
) -> Result<(), IoError> {
    let Some(bdi) = wb_bdi(mm, wb) else {
        return Ok(());
    };
    if !bdi.can_writeback {
        return Ok(());
    }
    let gate = balance_dirty_pages_ratelimited_gate(
        &mut task.st,
        &mut mm.bdp_cpu_mut(),
        wb.dirty_exceeded.get(),
        mm.ratelimit_pages(),
    );
    let Some(pages_dirtied) = gate else {
        return Ok(());
    };
    let start = mm.now();
    loop {
        let now = mm.now();
        let th = mm.global_thresholds();
        let global = {
            let vm = mm.vm();
            GlobalDirtyCounts {
                nr_file_dirty: vm.nr_file_dirty,
                nr_writeback: vm.nr_writeback,
            }
        };
        let inp = BdpInput {
            now_ns: now,
            start_ns: start,
            pages_dirtied,
            flags: BdpFlags { bdp_async: nowait },
            thresholds: th,
            global,
            wb_id: wb.id,
            wb: wb_counts(wb),
            wb_has_dirty_io: wb.has_dirty_io(),
            writeback_in_progress: wb.running.get(),
            bdi: bdi.dirty_cfg.get(),
            bdi_name: &wb.name,
            bdi_min_ratio_sum: bdi_min_ratio_sum(mm),
            tot_write_bandwidth: bdi.tot_write_bandwidth.get(),
            local_throttle: false,
            nr_cpu_ids: mm.kernel().cpus() as u64,
            hz: mm.hz(),
            mdtc: memcg_domain_input(mm, wb, global.nr_file_dirty + global.nr_writeback, true),
        };
        let step = {
            let mut dom = mm.global_domain_mut();
            dom.age_if_due(now);
            let mut bw = wb.bw.borrow_mut();
            let memcg_step = inp.mdtc.and_then(|_| {
                with_mem_cgroup_wb_domain(mm, wb.memcg_id.get(), |_, mdom| {
                    mdom.age_if_due(now);
                    balance_dirty_pages_domains(&inp, &mut task.st, &mut dom, Some(mdom), &mut bw)
                })
            });
            match memcg_step {
                Some(step) => step,
                None => balance_dirty_pages(&inp, &mut task.st, &mut dom, &mut bw),
            }
        };
        if let Some(bw) = &step.bandwidth {
            apply_bw_delta(&bdi, bw.tot_write_bandwidth_delta);
            if let Some(t) = &bw.ratelimit_trace {
                mm.kernel().count_event("bdi_dirty_ratelimit");
                task.trace
                    .note_update(now, t.dirty_ratelimit, t.avg_write_bw);
                mm.kernel()
                    .sim()
                    .trace("bdi_dirty_ratelimit", || format!("bdi {}: {t}", wb.name));
            }
        }
        if step.start_background {
            wb_start_background_writeback(mm, wb);
        }
        // Past the freerun ceilings: flush the foreign wbs this wb's memcg
        // dirtied folios on (they are in its dirty count, but its own
        // flusher cannot write them).
        if !matches!(step.action, BdpAction::Freerun { .. }) {
            mem_cgroup_flush_foreign(mm, wb);
        }
        if let Some(x) = step.set_dirty_exceeded {
            wb.dirty_exceeded.set(x);
        }
        if let Some(t) = &step.trace {
            task.trace.note_bdp(now, t.dirty_ratelimit);
            mm.kernel()
                .sim()
                .trace("balance_dirty_pages", || t.to_string());
        }
        match &step.action {
            BdpAction::NoPause { task_ratelimit, .. } => mm.record_task_ratelimit(*task_ratelimit),
            BdpAction::Pause(p) => mm.record_task_ratelimit(p.task_ratelimit),
            _ => {}
        }
        match step.action {
            BdpAction::Freerun { .. } | BdpAction::NoPause { .. } => return Ok(()),
            BdpAction::WouldBlock(_) => return Err(IoError::Again),
            BdpAction::Pause(p) => {
                // io_schedule_timeout(pause). Simplified: the sleep lasts
                // exactly the pause. The timer wheel would end it on a tick
                // after it (kernel/timer.rs), but every writer woken on the
                // same tick then runs in the simulator's fixed order, which
                // favours the same writers every time (100 writers: shares
                // -47%..+67% in writeback_behaviour's fairness test).
                bdi.last_bdp_sleep.set(Some(now));
                mm.kernel().sim().sleep(p.pause_ns).await;
                let slept = p.pause_ns;
                task.st.after_pause(&p);
                task.paused_ns += slept;
                task.pauses += 1;
                if slept > 0 {
                    task.trace.paused += 1;
                    task.trace.pause_ns += slept;
                }
                mm.record_pause(slept);
                if p.stop_after {
                    return Ok(());
                }
            }
        }
    }
}

/// The 7.2 RWF_DONTCACHE kick: count the pages for the wb, set its start bit
/// and wake the flusher (coalesced: only the writer that sets the bit wakes).
pub fn dontcache_kick(mm: &Mm, wb: &Rc<Wb>, pages: u64) {
    wb.dontcache_dirty.set(wb.dontcache_dirty.get() + pages);
    if !wb.start_dontcache.replace(true) {
        wb_wakeup(mm, wb);
    }
}

// ---------------------------------------------------------------------------
// page-state counters
// ---------------------------------------------------------------------------

fn add(v: u64, d: i64, name: &str, mm: &Mm) -> u64 {
    let r = v as i64 + d;
    if r < 0 {
        mm.kernel().violation(
            "no_negative_counter",
            ViolationObjects {
                counter: Some(name.to_string()),
                ..ViolationObjects::default()
            },
            format!("no negative counter: {name} would become {r}"),
        );
        0
    } else {
        r as u64
    }
}

/// Applies a page-cache change to the global counters and to `wb`'s.
pub fn account_delta(mm: &Mm, wb: Option<&Rc<Wb>>, d: &Delta) {
    mm.vm_apply(d);
    if let Some(wb) = wb {
        let mut st = wb.stat.borrow_mut();
        st.reclaimable = add(st.reclaimable, d.dirty, "WB_RECLAIMABLE", mm);
        st.writeback = add(st.writeback, d.writeback, "WB_WRITEBACK", mm);
        st.dirtied += d.dirtied;
        st.written += d.written;
    }
    if d.written > 0 {
        mm.pgdat().acct_reclaim_writeback(d.written);
        if let Some(wb) = wb {
            mm.global_domain_mut()
                .writeout_inc(wb.id, d.written, mm.now());
            // __wb_writeout_add: the memcg domain of a cgroup wb counts it too.
            with_mem_cgroup_wb_domain(mm, wb.memcg_id.get(), |_, mdom| {
                mdom.writeout_inc(wb.id, d.written, mm.now())
            });
        }
    }
}
