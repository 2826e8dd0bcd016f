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
//! Simplified: one `bdp_ratelimits` counter for the machine instead of one per
//! CPU; no memcg domain yet.

use std::rc::Rc;

use super::bandwidth::wb_update_bandwidth;
use super::limits::{
    domain_dirty_limits, global_dirtyable_memory, wb_over_bg_thresh_counts, DirtyThresholds,
    GlobalDirtyCounts, WbCounts, WbShare,
};
use super::pause::{
    account_task_dirtied, balance_dirty_pages, balance_dirty_pages_ratelimited_gate, BdpAction,
    BdpFlags, BdpInput, TaskDirtyState,
};
use crate::model::errno::IoError;
use crate::model::machine::Machine;
use crate::model::mm::backing_dev::{wb_start_background_writeback, wb_wakeup, Bdi, Wb};
use crate::model::mm::filemap::Delta;

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
}

/// The global thresholds now (`domain_dirty_limits` on
/// `global_dirtyable_memory`).
pub fn global_thresholds(m: &Machine) -> DirtyThresholds {
    let vm = m.vm.borrow();
    let avail = global_dirtyable_memory(vm.free_pages(), 0, vm.nr_file_pages, 0);
    domain_dirty_limits(avail, &m.dirty.borrow())
}

/// The bdi a wb belongs to.
pub fn wb_bdi(m: &Machine, wb: &Wb) -> Option<Rc<Bdi>> {
    m.bdis
        .borrow()
        .iter()
        .find(|b| b.wbs.iter().any(|w| w.id == wb.id))
        .cloned()
}

fn bdi_min_ratio_sum(m: &Machine) -> u64 {
    m.bdis.borrow().iter().map(|b| b.dirty_cfg.min_ratio).sum()
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

/// `wb_over_bg_thresh`: should background writeback keep going on `wb`?
pub fn wb_over_bg_thresh(m: &Rc<Machine>, wb: &Rc<Wb>) -> bool {
    let Some(bdi) = wb_bdi(m, wb) else {
        return false;
    };
    let th = global_thresholds(m);
    let nr_dirty = m.vm.borrow().nr_file_dirty;
    let mut dom = m.gdom.borrow_mut();
    dom.age_if_due(m.now());
    let share = WbShare::new(
        &mut dom,
        wb.id,
        &bdi.dirty_cfg,
        bdi_min_ratio_sum(m),
        wb.bw.borrow().avg_write_bandwidth,
        bdi.tot_write_bandwidth.get(),
    );
    wb_over_bg_thresh_counts(nr_dirty, th, wb.stat.borrow().reclaimable, &share)
}

fn apply_bw_delta(bdi: &Bdi, delta: i64) {
    let t = bdi.tot_write_bandwidth.get() as i64 + delta;
    bdi.tot_write_bandwidth.set(t.max(0) as u64);
}

/// The lazy bandwidth update at the end of `do_writepages`.
pub fn wb_update_bandwidth_if_due(m: &Rc<Machine>, wb: &Rc<Wb>) {
    let now = m.now();
    if !wb.bw.borrow().update_due(now, m.hz) {
        return;
    }
    let s = *wb.stat.borrow();
    let delta = wb_update_bandwidth(
        &mut wb.bw.borrow_mut(),
        now,
        s.dirtied,
        s.written,
        wb.has_dirty_io(),
        m.hz,
    );
    if let Some(bdi) = wb_bdi(m, wb) {
        apply_bw_delta(&bdi, delta);
    }
}

/// `folio_account_dirtied`'s task part: the task and the CPU count the pages.
pub fn account_dirtied(m: &Machine, task: &mut TaskDirty, nr: u64) {
    account_task_dirtied(&mut task.st, &mut m.bdp_cpu.borrow_mut(), nr);
    task.dirtied_total += nr;
}

/// `balance_dirty_pages_ratelimited_flags`: the gate, then the
/// `balance_dirty_pages` loop, sleeping the pauses it decides. With `nowait`
/// (BDP_ASYNC) returns `Err(IoError::Again)` where it would sleep.
pub async fn balance_dirty_pages_ratelimited(
    m: &Rc<Machine>,
    task: &mut TaskDirty,
    wb: &Rc<Wb>,
    nowait: bool,
) -> Result<(), IoError> {
    let Some(bdi) = wb_bdi(m, wb) else {
        return Ok(());
    };
    if !bdi.can_writeback {
        return Ok(());
    }
    let gate = balance_dirty_pages_ratelimited_gate(
        &mut task.st,
        &mut m.bdp_cpu.borrow_mut(),
        wb.dirty_exceeded.get(),
        m.ratelimit_pages.get(),
    );
    let Some(pages_dirtied) = gate else {
        return Ok(());
    };
    let start = m.now();
    loop {
        let now = m.now();
        let th = global_thresholds(m);
        let global = {
            let vm = m.vm.borrow();
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
            bdi: bdi.dirty_cfg,
            bdi_name: &wb.name,
            bdi_min_ratio_sum: bdi_min_ratio_sum(m),
            tot_write_bandwidth: bdi.tot_write_bandwidth.get(),
            local_throttle: false,
            nr_cpu_ids: m.cfg.cpus as u64,
            hz: m.hz,
        };
        let step = {
            let mut dom = m.gdom.borrow_mut();
            dom.age_if_due(now);
            balance_dirty_pages(&inp, &mut task.st, &mut dom, &mut wb.bw.borrow_mut())
        };
        if let Some(bw) = &step.bandwidth {
            apply_bw_delta(&bdi, bw.tot_write_bandwidth_delta);
        }
        if step.start_background {
            wb_start_background_writeback(m, wb);
        }
        if let Some(x) = step.set_dirty_exceeded {
            wb.dirty_exceeded.set(x);
        }
        if let Some(t) = &step.trace {
            m.sim.trace("balance_dirty_pages", || t.to_string());
        }
        match step.action {
            BdpAction::Freerun { .. } | BdpAction::NoPause { .. } => return Ok(()),
            BdpAction::WouldBlock(_) => return Err(IoError::Again),
            BdpAction::Pause(p) => {
                m.sim.sleep(p.pause_ns).await;
                task.st.after_pause(&p);
                task.paused_ns += p.pause_ns;
                task.pauses += 1;
                m.bdp_pauses.borrow_mut().push(p.pause_ns);
                if p.stop_after {
                    return Ok(());
                }
            }
        }
    }
}

/// The 7.2 RWF_DONTCACHE kick: count the pages for the wb, set its start bit
/// and wake the flusher (coalesced: only the writer that sets the bit wakes).
pub fn dontcache_kick(m: &Rc<Machine>, wb: &Rc<Wb>, pages: u64) {
    wb.dontcache_dirty.set(wb.dontcache_dirty.get() + pages);
    if !wb.start_dontcache.replace(true) {
        wb_wakeup(m, wb);
    }
}

// ---------------------------------------------------------------------------
// page-state counters
// ---------------------------------------------------------------------------

fn add(v: u64, d: i64, name: &str, m: &Machine) -> u64 {
    let r = v as i64 + d;
    if r < 0 {
        m.violation(format!("no negative counter: {name} would become {r}"));
        0
    } else {
        r as u64
    }
}

/// Applies a page-cache change to the global counters and to `wb`'s.
pub fn account_delta(m: &Rc<Machine>, wb: Option<&Rc<Wb>>, d: &Delta) {
    m.vm.borrow_mut().apply(d);
    if let Some(wb) = wb {
        let mut st = wb.stat.borrow_mut();
        st.reclaimable = add(st.reclaimable, d.dirty, "WB_RECLAIMABLE", m);
        st.writeback = add(st.writeback, d.writeback, "WB_WRITEBACK", m);
        st.dirtied += d.dirtied;
        st.written += d.written;
    }
    if d.written > 0 {
        if let Some(wb) = wb {
            m.gdom.borrow_mut().writeout_inc(wb.id, d.written, m.now());
        }
    }
}
