//! Memory cgroups as writeback sees them (mm/memcontrol.c, and the memcg
//! side of mm/backing-dev.c).
//!
//! A memcg is tied to one of the scheduler's cgroups ([`CgroupId`]): a task's
//! memcg is the memcg of its cgroup (`mem_cgroup_from_task`), the root memcg
//! when its cgroup has none. Each has an id (`mem_cgroup_id`), a parent, an
//! online flag (cleared at rmdir: `mem_cgroup_css_offline`), a count of css
//! references that keep it alive once offline (its cgwbs hold them, as the
//! kernel's `wb->memcg_css` does), `memory.high` / `memory.max`, and the list
//! of its cgroup wbs (`memcg->cgwb_list`). Its dirty domain (the memcg
//! `wb_domain` of balance_dirty_pages) is read through
//! [`mem_cgroup_wb_stats_full`] and [`with_mem_cgroup_wb_domain`].
//!
//! Charging and limits (`try_charge_memcg`, [`mem_cgroup_try_charge`]): a
//! page-cache folio added by a task is charged to the task's memcg (the
//! file remembers that memcg: one memcg per file, the first to charge it);
//! reclaim uncharges what it frees. Charges go through a per-CPU stock:
//! `MEMCG_CHARGE_BATCH` pages are charged at once and handed out from the
//! stock, and only a charge that refills it checks the limits. Over memory.max, the charging task
//! reclaims from the memcg (`try_to_free_mem_cgroup_pages`, mm/vmscan.rs)
//! up to MAX_RECLAIM_RETRIES times, then the charge fails with an OOM the
//! caller reports (the OOM killer is not modelled). Over memory.high, the
//! charge succeeds and the task owes `memcg_nr_pages_over_high`; on its
//! return to user space ([`resume_user_mode_over_high`]), or inside a
//! charge that leaves it owing more than `MEMCG_CHARGE_BATCH` pages (with
//! the caller's locks held), it runs [`mem_cgroup_handle_over_high`]: memcg
//! reclaim, then a penalty sleep growing with the square of the overage
//! (`calculate_high_delay`), at most 2 s per return. Both reclaim and the
//! sleep are memory stalls of the memcg's PSI (memory.pressure some/full).
//!
//! Foreign dirtying ([`mem_cgroup_track_foreign_dirty`],
//! [`mem_cgroup_flush_foreign`]): a folio dirtied on an inode of another
//! memcg's wb is recorded in its owner's `MEMCG_CGWB_FRN_CNT` (4) slots;
//! balance_dirty_pages past the freerun ceilings flushes the recorded wbs
//! (`cgroup_writeback_by_id`, FOREIGN_FLUSH).
//!
//! Left out: anonymous memory (no model task maps memory), per-folio memcg
//! charging (charges are per file; the folio owner that foreign detection
//! and foreign dirtying read is kept per page-cache range, mm/filemap.rs),
//! memory.low/min, memory.pressure, and swap. balance_dirty_pages throttles a cgroup wb on
//! its memcg's dirty domain too ([`mem_cgroup_wb_stats_full`],
//! mm/page_writeback/).

use std::rc::Rc;

use sim::Time;

use crate::model::errno::IoError;
use crate::model::kernel::sched::CgroupId;
use crate::model::kernel::timer::schedule_timeout_end;
use crate::model::kernel::workqueue::{queue_work, Work};
use crate::model::mm::backing_dev::{
    wb_memcg_offline, wb_queue_work, SyncMode, Wb, WbReason, WbWork,
};
use crate::model::mm::memcontrol_defs::MemcgCgwbFrn;
pub use crate::model::mm::memcontrol_defs::{
    MemCgroup, MemcgEvents, MemcgTable, PsiMem, ROOT_MEM_CGROUP_ID,
};
use crate::model::mm::page_writeback::WbDomain;
use crate::model::mm::state::Mm;
use crate::model::mm::vmscan::{try_to_free_mem_cgroup_pages, MAX_RECLAIM_RETRIES};
use crate::model::mm::vmstat::PAGE_SIZE;

/// `MEMCG_CHARGE_BATCH`: pages a charge takes at once (per-CPU stock), and
/// the unit of `memcg_nr_pages_over_high` (include/linux/memcontrol.h): 64.
pub const MEMCG_CHARGE_BATCH: u64 = 64;
/// `MEMCG_DELAY_PRECISION_SHIFT` (mm/memcontrol.c): 20, the fixed-point
/// shift of the overage ratio.
pub const MEMCG_DELAY_PRECISION_SHIFT: u32 = 20;
/// `MEMCG_DELAY_SCALING_SHIFT` (mm/memcontrol.c): 14, scales the squared
/// overage down so that a small overage gives a short delay.
pub const MEMCG_DELAY_SCALING_SHIFT: u32 = 14;
/// `MEMCG_MAX_HIGH_DELAY_JIFFIES` (mm/memcontrol.c): 2 * HZ, the cap of one
/// penalty sleep, in units of HZ (2 s).
pub const MEMCG_MAX_HIGH_DELAY_SECS: u64 = 2;

/// `calculate_overage()`: how far `usage` is over `high`, as a fraction of
/// `high` in 1 << MEMCG_DELAY_PRECISION_SHIFT units; 0 when not over.
pub fn calculate_overage(usage: u64, high: u64) -> u64 {
    if usage <= high {
        return 0;
    }
    let high = high.max(1);
    ((usage - high) << MEMCG_DELAY_PRECISION_SHIFT) / high
}

/// `calculate_high_delay()`: the penalty, in jiffies, for `nr_pages` over
/// high at the given overage: overage^2 * HZ scaled down by both shifts,
/// in proportion to `nr_pages / MEMCG_CHARGE_BATCH`. Uncapped (the caller
/// caps it, as `mem_cgroup_handle_over_high` does).
pub fn calculate_high_delay(nr_pages: u64, max_overage: u64, hz: u64) -> u64 {
    if max_overage == 0 {
        return 0;
    }
    let p = (max_overage as u128 * max_overage as u128 * hz as u128)
        >> MEMCG_DELAY_PRECISION_SHIFT
        >> MEMCG_DELAY_SCALING_SHIFT;
    (p * nr_pages as u128 / MEMCG_CHARGE_BATCH as u128) as u64
}

/// The ids of `memcg` and its ancestors, nearest first.
fn memcg_and_ancestors(mm: &Mm, memcg: &Rc<MemCgroup>) -> Vec<Rc<MemCgroup>> {
    let mut v = vec![memcg.clone()];
    let mut cur = memcg.parent;
    while let Some(p) = cur.and_then(|id| mm.memcgs().get(id)) {
        cur = p.parent;
        v.push(p);
    }
    v
}

/// `mem_find_max_overage()`: the largest overage over memory.high of the
/// memcg and its ancestors.
fn mem_find_max_overage(mm: &Mm, memcg: &Rc<MemCgroup>) -> u64 {
    memcg_and_ancestors(mm, memcg)
        .iter()
        .filter_map(|m| {
            let high = m.memory_high? / PAGE_SIZE;
            Some(calculate_overage(m.usage_pages(), high))
        })
        .max()
        .unwrap_or(0)
}

/// The CPU whose charge stock a charge to `memcg` uses: the current task's
/// (None outside a task, before it first ran, and for the root memcg,
/// which the kernel does not charge).
fn stock_cpu(mm: &Mm, memcg: &MemCgroup) -> Option<usize> {
    mm.kernel().sim().current()?;
    (memcg.id != ROOT_MEM_CGROUP_ID)
        .then(|| mm.kernel().sched().current_cpu())
        .flatten()
}

/// `try_charge_memcg()` of `nr_pages` new page-cache pages to `memcg` by the
/// current task. A charge of at most `MEMCG_CHARGE_BATCH` pages is served
/// from the CPU's stock of that memcg when it holds enough
/// (`consume_stock`): no counter is touched and no limit is checked.
/// Otherwise a batch of `max(MEMCG_CHARGE_BATCH, nr_pages)` is charged (just
/// `nr_pages` if the batch would pass memory.max), the surplus going to the
/// CPU's stock (`refill_stock`). Over memory.max: memcg reclaim
/// (MEMCG_MAX event), retried up to MAX_RECLAIM_RETRIES times while short,
/// then `Err(IoError::Oom)` (MEMCG_OOM; the OOM killer is not modelled).
/// When the memcg or an ancestor is over memory.high after the charge, the
/// task's `memcg_nr_pages_over_high` grows by the batch (and
/// `set_notify_resume`: the caller settles it on its return to user space
/// with [`resume_user_mode_over_high`]). Then, as the kernel does since
/// "memcg: synchronously enforce memory.high for large overcharges" (2022),
/// if the task owes more than `MEMCG_CHARGE_BATCH` pages and the allocation
/// may block (`may_block`: `gfpflags_allow_blocking`), it runs
/// [`mem_cgroup_handle_over_high`] right here, inside the charge: memcg
/// reclaim and possibly the penalty sleep, with whatever locks the caller
/// holds still held. So a small charge settles the task's debt only when it
/// refills the stock while the task already owes a batch. Returns the pages
/// the task still owes. The root memcg is charged without a stock (the
/// kernel does not charge it at all; its counters here are bookkeeping).
/// Left out: draining other CPUs' stocks before reclaim at memory.max
/// (`drain_all_stock`) and at offline.
pub async fn mem_cgroup_try_charge(
    mm: &Rc<Mm>,
    memcg: &Rc<MemCgroup>,
    nr_pages: u64,
    may_block: bool,
) -> Result<u64, IoError> {
    let task = mm.kernel().sim().current();
    let cpu = stock_cpu(mm, memcg);
    if let (Some(t), Some(c)) = (task, cpu) {
        if nr_pages <= MEMCG_CHARGE_BATCH && mm.memcgs().consume_stock(c, memcg.id, nr_pages) {
            return Ok(mm.memcgs().nr_pages_over_high(t));
        }
    }
    let mut batch = if cpu.is_some() {
        nr_pages.max(MEMCG_CHARGE_BATCH)
    } else {
        nr_pages
    };
    let chain = memcg_and_ancestors(mm, memcg);
    let mut retries = MAX_RECLAIM_RETRIES;
    loop {
        // page_counter_try_charge: the first level whose max would be passed.
        let over_max = chain.iter().find(|m| {
            m.memory_max
                .is_some_and(|max| m.usage_pages() + batch > max / PAGE_SIZE)
        });
        let Some(over) = over_max else {
            break;
        };
        if batch > nr_pages {
            // The batch does not fit: try the pages asked for alone.
            batch = nr_pages;
            continue;
        }
        over.update_events(|e| e.max += 1);
        if retries == 0 {
            over.update_events(|e| e.oom += 1);
            mm.kernel().count_event("memcg_oom");
            return Err(IoError::Oom);
        }
        retries -= 1;
        let now = mm.now();
        memcg.psi_memstall_enter(now);
        try_to_free_mem_cgroup_pages(mm, over.id, nr_pages).await;
        memcg.psi_memstall_leave(mm.now());
    }
    for m in &chain {
        m.charge(batch, task);
    }
    if let Some(c) = cpu {
        if batch > nr_pages {
            mm.memcgs().refill_stock(c, memcg.id, batch - nr_pages);
        }
    }
    let over_high = chain.iter().any(|m| {
        m.memory_high
            .is_some_and(|high| m.usage_pages() > high / PAGE_SIZE)
    });
    let Some(task) = task else {
        // No task context (model setup): nothing to owe.
        return Ok(0);
    };
    if over_high {
        memcg.update_events(|e| e.high += 1);
        mm.memcgs().add_nr_pages_over_high(task, batch);
    }
    if may_block && mm.memcgs().nr_pages_over_high(task) > MEMCG_CHARGE_BATCH {
        mm.kernel().count_event("memcg_high_in_charge");
        let owed = mm.memcgs().take_nr_pages_over_high(task);
        mem_cgroup_handle_over_high(mm, memcg, owed).await;
    }
    Ok(mm.memcgs().nr_pages_over_high(task))
}

/// The charges of `nr_pages` new page-cache pages added as folios of
/// `folio_pages` pages each (`filemap_add_folio` -> `mem_cgroup_charge`
/// per folio): folios of at most `MEMCG_CHARGE_BATCH` pages are served from
/// the CPU's stock while it holds them, and each one the stock cannot serve
/// is a [`mem_cgroup_try_charge`] of its own, which charges a batch, refills
/// the stock and checks the limits (so a task charging many small folios
/// checks memory.high once per batch, and settles its debt inside a charge
/// every other batch over it, as the kernel's loop does). Larger folios, or
/// a charge outside a task on a CPU, are one charge of `nr_pages`. Returns
/// the pages the task still owes to memory.high.
pub async fn mem_cgroup_charge_folios(
    mm: &Rc<Mm>,
    memcg: &Rc<MemCgroup>,
    nr_pages: u64,
    folio_pages: u64,
    may_block: bool,
) -> Result<u64, IoError> {
    let folio = folio_pages.max(1);
    let (Some(t), Some(c)) = (mm.kernel().sim().current(), stock_cpu(mm, memcg)) else {
        return mem_cgroup_try_charge(mm, memcg, nr_pages, may_block).await;
    };
    if folio > MEMCG_CHARGE_BATCH {
        return mem_cgroup_try_charge(mm, memcg, nr_pages, may_block).await;
    }
    let mut left = nr_pages;
    while left > 0 {
        // The folios the stock can serve.
        let served =
            (mm.memcgs().stocked_on(c, memcg.id) / folio * folio).min(left / folio * folio);
        if served > 0 && mm.memcgs().consume_stock(c, memcg.id, served) {
            left -= served;
            continue;
        }
        // One folio the stock cannot serve (or a last partial one).
        let n = folio.min(left);
        mem_cgroup_try_charge(mm, memcg, n, may_block).await?;
        left -= n;
    }
    Ok(mm.memcgs().nr_pages_over_high(t))
}

/// `mem_cgroup_uncharge` of the folios a path other than reclaim freed
/// (truncation, eviction, drop-behind, O_DIRECT invalidation): a page-cache
/// change of `cached_delta` pages of a file charged to memcg `memcg_id`.
pub fn mem_cgroup_uncharge_freed(mm: &Mm, memcg_id: u64, cached_delta: i64) {
    if cached_delta < 0 {
        mm.memcgs().uncharge(memcg_id, (-cached_delta) as u64);
    }
}

/// `reclaim_high()`: reclaims `nr_pages` from each of the memcg and its
/// ancestors that is over memory.high, as a memory stall. Returns the pages
/// freed.
async fn reclaim_high(mm: &Rc<Mm>, memcg: &Rc<MemCgroup>, nr_pages: u64) -> u64 {
    let mut reclaimed = 0;
    for m in memcg_and_ancestors(mm, memcg) {
        let Some(high) = m.memory_high else {
            continue;
        };
        if m.usage_pages() <= high / PAGE_SIZE {
            continue;
        }
        memcg.psi_memstall_enter(mm.now());
        reclaimed += try_to_free_mem_cgroup_pages(mm, m.id, nr_pages).await;
        memcg.psi_memstall_leave(mm.now());
    }
    reclaimed
}

/// `mem_cgroup_handle_over_high()`: run on return to user space by a task
/// that charged `nr_pages` while its memcg was over memory.high. Reclaims
/// from the memcg (`reclaim_high`: `nr_pages` first, SWAP_CLUSTER_MAX on
/// retries), computes the penalty from the overage left, capped at
/// [`MEMCG_MAX_HIGH_DELAY_SECS`]; no sleep if it is at most HZ/100; while
/// reclaim makes progress, or for MAX_RECLAIM_RETRIES more tries, it
/// reclaims again; then sleeps the penalty (`schedule_timeout_killable`,
/// a memory stall). Returns the time slept, ns.
pub async fn mem_cgroup_handle_over_high(
    mm: &Rc<Mm>,
    memcg: &Rc<MemCgroup>,
    nr_pages: u64,
) -> Time {
    if nr_pages == 0 {
        return 0;
    }
    let k = mm.kernel().clone();
    let hz = k.hz();
    let mut nr_retries = MAX_RECLAIM_RETRIES;
    let mut in_retry = false;
    let penalty = loop {
        let want = if in_retry {
            super::vmscan::SWAP_CLUSTER_MAX
        } else {
            nr_pages
        };
        let nr_reclaimed = reclaim_high(mm, memcg, want).await;
        let penalty = calculate_high_delay(nr_pages, mem_find_max_overage(mm, memcg), hz)
            .min(MEMCG_MAX_HIGH_DELAY_SECS * hz);
        if penalty <= hz / 100 {
            return 0;
        }
        if nr_reclaimed > 0 || nr_retries > 0 {
            if nr_reclaimed == 0 {
                nr_retries -= 1;
            }
            in_retry = true;
            continue;
        }
        break penalty;
    };
    let start = mm.now();
    memcg.psi_memstall_enter(start);
    k.sim()
        .sleep_until(schedule_timeout_end(start, penalty, k.jiffy_ns()))
        .await;
    let slept = mm.now() - start;
    memcg.psi_memstall_leave(mm.now());
    memcg.update_events(|e| {
        e.penalty_sleeps += 1;
        e.penalty_ns += slept;
    });
    k.count_event("memcg_high_penalty");
    slept
}

/// `resume_user_mode_work()` -> `mem_cgroup_handle_over_high()`: on its
/// return to user space the current task settles what it still owes to
/// memory.high (`current->memcg_nr_pages_over_high`, cleared here), by
/// reclaim from `memcg` and the penalty sleep. Returns the time slept, ns.
pub async fn resume_user_mode_over_high(mm: &Rc<Mm>, memcg: &Rc<MemCgroup>) -> Time {
    let Some(task) = mm.kernel().sim().current() else {
        return 0;
    };
    let owed = mm.memcgs().take_nr_pages_over_high(task);
    mem_cgroup_handle_over_high(mm, memcg, owed).await
}

/// `wb->memcg_css->id`: the memcg id of a wb (the root memcg's for a
/// writeback context's root wb, whose `memcg_id` is 0 in the model).
pub fn wb_memcg_css_id(wb: &Wb) -> u64 {
    if wb.is_cgwb() {
        wb.memcg_id.get()
    } else {
        ROOT_MEM_CGROUP_ID
    }
}

/// `mem_cgroup_track_foreign_dirty`: a folio owned by memcg `folio_memcg`
/// was dirtied on an inode of `wb`; if `wb` belongs to another memcg, the
/// owner records it (`mem_cgroup_track_foreign_dirty_slowpath`): the slot
/// already naming this wb has its time refreshed (lazily, at most every
/// min(1 s, dirty_expire_interval / 8)), or the oldest slot with no
/// foreign flush in flight is taken over.
pub fn mem_cgroup_track_foreign_dirty(mm: &Mm, folio_memcg: u64, wb: &Wb) {
    let wb_memcg = wb_memcg_css_id(wb);
    if folio_memcg == wb_memcg {
        return;
    }
    let Some(memcg) = mm.memcgs().get(folio_memcg) else {
        return;
    };
    let now = mm.now();
    let bdi_id = wb.bdi_id.get();
    mm.kernel().sim().trace("track_foreign_dirty", || {
        format!(
            "folio memcg {folio_memcg}: wb {} (memcg {wb_memcg})",
            wb.name
        )
    });
    let mut frn = memcg.cgwb_frn.borrow_mut();
    let mut oldest: Option<usize> = None;
    let mut oldest_at = now;
    let mut found = None;
    for (i, f) in frn.iter().enumerate() {
        if f.bdi_id == bdi_id && f.ctx == wb.ctx && f.memcg_id == wb_memcg {
            found = Some(i);
            break;
        }
        if f.at < oldest_at && f.done.cnt.get() == 1 {
            oldest = Some(i);
            oldest_at = f.at;
        }
    }
    if let Some(i) = found {
        let expire = mm.dirty_params().dirty_expire_interval_ns();
        let update_intv = sim::SEC.min(expire / 8);
        if frn[i].at < now.saturating_sub(update_intv) {
            frn[i].at = now;
        }
    } else if let Some(i) = oldest {
        frn[i].bdi_id = bdi_id;
        frn[i].ctx = wb.ctx;
        frn[i].memcg_id = wb_memcg;
        frn[i].at = now;
    }
}

/// `mem_cgroup_flush_foreign`, from `balance_dirty_pages` once the dirtier
/// of `wb` is past the freerun ceilings: for each foreign wb the memcg of
/// `wb` recorded within the last dirty_expire_interval (older records
/// are being written by periodic writeback already) and with no flush of
/// it in flight, issue one (`cgroup_writeback_by_id`, reason
/// FOREIGN_FLUSH) and clear the record's time.
pub fn mem_cgroup_flush_foreign(mm: &Mm, wb: &Wb) {
    let Some(memcg) = mm.memcgs().get(wb_memcg_css_id(wb)) else {
        return;
    };
    let intv = mm.dirty_params().dirty_expire_interval_ns();
    let now = mm.now();
    let due: Vec<MemcgCgwbFrn> = {
        let mut frn = memcg.cgwb_frn.borrow_mut();
        frn.iter_mut()
            .filter(|f| f.at > now.saturating_sub(intv) && f.done.cnt.get() == 1)
            .map(|f| {
                f.at = 0;
                f.clone()
            })
            .collect()
    };
    for f in due {
        mm.kernel().count_event("flush_foreign");
        mm.kernel().sim().trace("flush_foreign", || {
            format!("memcg {}: bdi {} memcg {}", memcg.id, f.bdi_id, f.memcg_id)
        });
        cgroup_writeback_by_id(mm, &f, WbReason::ForeignFlush);
    }
}

/// `cgroup_writeback_by_id` (fs/fs-writeback.c) for a foreign-dirty record:
/// the wb of memcg `f.memcg_id` on bdi `f.bdi_id` (looked up, never
/// created; the memcg must still exist, `css_tryget`) gets a WB_SYNC_NONE,
/// range-cyclic work item of 1.25x the memcg's dirty pages (most of
/// them, without being livelocked by concurrent dirtiers), tracked by
/// the record's completion. Queued as `wb_queue_work` does.
fn cgroup_writeback_by_id(mm: &Mm, f: &MemcgCgwbFrn, reason: WbReason) {
    let bdi = mm.bdis().iter().find(|b| b.id == f.bdi_id).cloned();
    let Some(bdi) = bdi else { return };
    let Some(memcg) = mm.memcgs().get(f.memcg_id) else {
        return;
    };
    let wb = if memcg.id == ROOT_MEM_CGROUP_ID {
        bdi.wbs.get(f.ctx).cloned()
    } else {
        bdi.cgwb_tree.borrow().get(&(f.ctx, memcg.id)).cloned()
    };
    let Some(wb) = wb else { return };
    // memcg_page_state(memcg, NR_FILE_DIRTY): the root's is the machine's.
    let dirty = if memcg.id == ROOT_MEM_CGROUP_ID {
        mm.vm().nr_file_dirty
    } else {
        mem_cgroup_wb_stats(&memcg).0
    };
    let dirty = dirty * 10 / 8;
    let mut work = WbWork::new(dirty as i64, SyncMode::None, reason);
    work.range_cyclic = true;
    work.done = Some(f.done.clone());
    wb_queue_work(mm, &wb, Rc::new(work));
}

/// Dirty and writeback pages of a memcg's cgwbs (`mem_cgroup_wb_stats`'s
/// NR_FILE_DIRTY and NR_WRITEBACK, from the wbs' counters).
pub fn mem_cgroup_wb_stats(memcg: &MemCgroup) -> (u64, u64) {
    memcg.cgwb_list.borrow().iter().fold((0, 0), |(d, w), wb| {
        let s = *wb.stat.borrow();
        (d + s.reclaimable, w + s.writeback)
    })
}

/// What `mem_cgroup_wb_stats` reports of a memcg for its dirty domain,
/// pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemcgWbStats {
    /// File pages of the memcg (NR_ACTIVE_FILE + NR_INACTIVE_FILE): its
    /// whole charge, as the model charges only page cache.
    pub filepages: u64,
    /// Room left under the lowest of min(memory.max, memory.high) minus
    /// usage over the memcg and its ancestors below the root; u64::MAX
    /// (PAGE_COUNTER_MAX) without limits.
    pub headroom: u64,
    /// NR_FILE_DIRTY of the memcg (the dirty pages of its cgwbs).
    pub dirty: u64,
    /// NR_WRITEBACK of the memcg (the writeback pages of its cgwbs).
    pub writeback: u64,
}

/// `mem_cgroup_wb_stats` for the memcg of a cgroup wb (mm/memcontrol.c).
/// Simplified: dirty and writeback are the counters of the memcg's cgwbs
/// rather than per-memcg vmstat (the same pages: a page of the memcg is
/// dirtied through one of its cgwbs).
pub fn mem_cgroup_wb_stats_full(mm: &Mm, memcg: &Rc<MemCgroup>) -> MemcgWbStats {
    let (dirty, writeback) = mem_cgroup_wb_stats(memcg);
    let mut headroom = u64::MAX;
    for m in memcg_and_ancestors(mm, memcg) {
        // The root memcg (no parent) has no limit of its own here.
        if m.parent.is_none() {
            break;
        }
        let ceiling = match (m.memory_high, m.memory_max) {
            (None, None) => u64::MAX,
            (Some(a), Some(b)) => a.min(b) / PAGE_SIZE,
            (Some(a), None) | (None, Some(a)) => a / PAGE_SIZE,
        };
        headroom = headroom.min(ceiling - ceiling.min(m.usage_pages()));
    }
    MemcgWbStats {
        filepages: memcg.usage_pages(),
        headroom,
        dirty,
        writeback,
    }
}

/// `mem_cgroup_wb_domain(wb)`: the dirty domain of a cgroup wb's memcg, None
/// for a wb of the root memcg (whose domain is the global one). `f` runs on
/// the domain, created at `now`/`mm.hz()` on first use.
pub fn with_mem_cgroup_wb_domain<R>(
    mm: &Mm,
    memcg_id: u64,
    f: impl FnOnce(&Rc<MemCgroup>, &mut WbDomain) -> R,
) -> Option<R> {
    let memcg = mm.memcgs().get(memcg_id)?;
    memcg.parent?;
    let mut slot = memcg.cgwb_domain.borrow_mut();
    let dom = slot.get_or_insert_with(|| WbDomain::with_hz(mm.now(), mm.hz()));
    Some(f(&memcg, dom))
}

/// `cgroup_mkdir` with the memory controller enabled
/// (`mem_cgroup_css_alloc` + `mem_cgroup_css_online`): the memcg of new
/// scheduler cgroup `cgroup`, a child of the root memcg.
pub fn mem_cgroup_css_online(
    mm: &Mm,
    cgroup: CgroupId,
    name: &str,
    memory_high: Option<u64>,
    memory_max: Option<u64>,
) -> Rc<MemCgroup> {
    let m = mm
        .memcgs()
        .css_online(cgroup, name, None, memory_high, memory_max);
    mm.kernel()
        .sim()
        .trace("mem_cgroup_css_online", || format!("memcg {} {name}", m.id));
    m
}

/// CPU of `offline_css` -> `mem_cgroup_css_offline` for a memcg with no
/// charged anonymous memory, ns: 10 us. Estimate (not measured): the
/// reparenting of the memcg's objcg and of its entry in every memcg-aware
/// `list_lru` (two per superblock: dentries and inodes), `drain_all_stock`
/// queueing per-CPU drain works, `wb_memcg_offline`, all under
/// `cgroup_mutex`; each a few hundred ns to a microsecond.
pub const MEM_CGROUP_CSS_OFFLINE_NS: Time = 10_000;

/// `cgroup_rmdir` -> `cgroup_destroy_locked` -> `kill_css` of a cgroup with
/// a memcg (kernel/cgroup/cgroup.c): the css's percpu refcount is killed
/// with `percpu_ref_kill_and_confirm(css_killed_ref_fn)`, which switches it
/// to atomic mode after a grace period (`__percpu_ref_switch_to_atomic`:
/// `call_rcu_hurry(percpu_ref_switch_to_atomic_rcu)`, lib/percpu-refcount.c);
/// the confirmation, [`css_killed_ref_fn`], runs as that RCU callback. Does
/// nothing for a cgroup without a memcg.
pub fn mem_cgroup_rmdir(mm: &Rc<Mm>, cgroup: CgroupId) {
    let Some(memcg) = mm.memcgs().of_cgroup(cgroup) else {
        return;
    };
    let mm2 = mm.clone();
    mm.kernel()
        .rcu()
        .call_rcu_hurry(move || css_killed_ref_fn(&mm2, memcg));
}

/// `css_killed_ref_fn` (kernel/cgroup/cgroup.c): the kill is confirmed on
/// every CPU; the offline needs process context (`cgroup_mutex`), so the
/// css's `destroy_work` ([`css_killed_work_fn`]) is queued on
/// `cgroup_offline_wq` (one work at a time). A memcg without online
/// children is assumed (the model's memcgs are all children of the root).
fn css_killed_ref_fn(mm: &Rc<Mm>, memcg: Rc<MemCgroup>) {
    let wm = Rc::downgrade(mm);
    let work = Work::new("css_killed_work_fn", move || {
        let (wm, memcg) = (wm.clone(), memcg.clone());
        async move {
            if let Some(mm) = wm.upgrade() {
                css_killed_work_fn(&mm, &memcg).await;
            }
        }
    });
    queue_work(mm.cgroup_offline_wq(), &work);
}

/// `css_killed_work_fn` -> `offline_css` -> `mem_cgroup_css_offline`
/// (mm/memcontrol.c): the memcg goes offline (`css_tryget_online` fails
/// from now on) and `wb_memcg_offline` kills its cgwbs and queues
/// `cleanup_offline_cgwbs_work`. `cgroup_mutex` is not modelled (the
/// ordered `cgroup_offline_wq` serialises offlines as it does; mkdir and
/// rmdir do not wait for it here).
async fn css_killed_work_fn(mm: &Rc<Mm>, memcg: &Rc<MemCgroup>) {
    mm.kernel().sched().cpu(MEM_CGROUP_CSS_OFFLINE_NS).await;
    mm.memcgs().css_offline(memcg);
    mm.kernel()
        .sim()
        .trace("mem_cgroup_css_offline", || format!("memcg {}", memcg.id));
    wb_memcg_offline(mm, memcg);
    mm.memcgs().release_if_unused(memcg.id);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_map_to_online_memcgs_and_offline_falls_back_to_an_ancestor() {
        let t = MemcgTable::new();
        let a = t.css_online(CgroupId(1), "a", None, None, None);
        let b = t.css_online(CgroupId(2), "a/b", Some(a.id), None, None);
        assert_eq!(t.from_cgroup(CgroupId(2)).id, b.id);
        assert_eq!(t.from_cgroup(CgroupId(9)).id, ROOT_MEM_CGROUP_ID);
        b.css_get(); // a cgwb holds it
        t.css_offline(&b);
        assert_eq!(t.from_cgroup(CgroupId(2)).id, ROOT_MEM_CGROUP_ID);
        assert_eq!(t.nearest_online(b.id).id, a.id);
        t.release_if_unused(b.id);
        assert!(t.get(b.id).is_some(), "a css reference keeps it");
        b.css_put();
        t.release_if_unused(b.id);
        assert!(t.get(b.id).is_none());
        t.css_offline(&a);
        assert_eq!(t.nearest_online(a.id).id, ROOT_MEM_CGROUP_ID);
    }
}
