//! Page reclaim (mm/vmscan.c): kswapd, direct reclaim and the reclaim
//! throttles.
//!
//! - kswapd (`kswapd()`, `balance_pgdat()`): a kernel thread per node, woken
//!   by the allocator when free memory falls below the low watermark
//!   ([`wakeup_kswapd`]); it reclaims until free memory reaches the high
//!   watermark, paying CPU per page scanned and per page freed.
//! - Direct reclaim (`try_to_free_pages()` -> `do_try_to_free_pages()`): an
//!   allocation that would take free memory below the min watermark reclaims
//!   SWAP_CLUSTER_MAX pages itself, scanning `lru >> priority` pages per
//!   priority from DEF_PRIORITY down.
//! - `shrink_folio_list()` cannot free dirty or writeback pages: it counts
//!   them (`nr_unqueued_dirty`, `nr_writeback`, `nr_congested`,
//!   `nr_immediate`) and leaves them. When every page taken was dirty and not
//!   queued for I/O, reclaim wakes the flushers
//!   (`wakeup_flusher_threads(WB_REASON_VMSCAN)`, `shrink_inactive_list`).
//!   kswapd marks the node PGDAT_WRITEBACK when all it took was under
//!   writeback and then throttles on pages it meets again
//!   (`reclaim_throttle(VMSCAN_THROTTLE_WRITEBACK)`: sleep until
//!   SWAP_CLUSTER_MAX pages per throttled task finish writeback, or HZ/10);
//!   it marks the node congested when all dirty pages it met were already
//!   marked for immediate reclaim, and direct reclaimers then throttle
//!   (`VMSCAN_THROTTLE_CONGESTED`, one jiffy), as they do after a whole
//!   priority sweep without progress (`VMSCAN_THROTTLE_NOPROGRESS`).
//!
//! mm/ does not know files: the filesystem layer registers a
//! [`ReclaimSource`] that lists the files whose page cache reclaim may
//! shrink ([`LruFile`]) and wakes the flushers.
//!
//! Simplified: one LRU ordered by file (least recently used file first), and
//! within a file clean pages before dirty and writeback ones (pages are
//! written in order, so the dirty ones are the youngest); no active/inactive
//! aging, refaults or shadow entries; no anonymous memory or swap; memcg
//! reclaim ([`try_to_free_mem_cgroup_pages`]) walks the files charged to the
//! memcg, oldest first, with the same per-page CPU (its folios uncharged
//! only once the pass's CPU is spent), its isolation share
//! taken under the memcg lruvec's `lru_lock` (a spinlock: concurrent
//! reclaimers of one memcg spin; global reclaim takes no lock here); PG_reclaim is one node-wide mark ("writeback pages met by a
//! previous pass"), not a per-folio flag; kswapd's short "nap" before full
//! sleep and kcompactd are left out.

use std::rc::Rc;

use sim::Time;

use super::mmzone::NodeFlags;
pub use super::mmzone::{LruFile, ReclaimSource, ReclaimStats, SWAP_CLUSTER_MAX};
use super::page_writeback::account_delta;
use super::state::Mm;
use crate::model::kernel::sched::CgroupId;
use crate::model::kernel::timer::schedule_timeout_end;

/// `DEF_PRIORITY`: reclaim starts scanning `lru >> 12` pages
/// (mm/internal.h).
pub const DEF_PRIORITY: u32 = 12;
/// `MAX_RECLAIM_RETRIES`: kswapd gives up a node after this many fruitless
/// balance runs; the allocator retries reclaim this often (mm/internal.h).
pub const MAX_RECLAIM_RETRIES: u32 = 16;

/// Share of the CPU of freeing a page that scanning a page reclaim cannot
/// free costs (isolate it, trylock, test the dirty and writeback flags, put
/// it back; no unmapping, no freeing): 1/2, an estimate. The cost of freeing
/// a clean page is the machine's `reclaim_page_ns` ([`ReclaimSource::reclaim_page_ns`],
/// 200 ns by default, an order-of-magnitude estimate of `shrink_folio_list`
/// per clean folio; for scale, dropping the clean page cache of a 1 GiB ext4
/// file with `posix_fadvise(DONTNEED)`, which removes and frees folios
/// without LRU scanning, took 9-99 ns per page on this project's host:
/// 6.18 kernel, large folios, five runs on a loaded machine).
pub const SCAN_COST_DIV: Time = 2;

/// Why a reclaimer sleeps in `reclaim_throttle()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VmscanThrottle {
    /// VMSCAN_THROTTLE_WRITEBACK: until enough writeback completes, or HZ/10.
    Writeback,
    /// VMSCAN_THROTTLE_CONGESTED: one jiffy.
    Congested,
    /// VMSCAN_THROTTLE_NOPROGRESS: one jiffy.
    NoProgress,
}

/// What one `shrink_node()` pass found (`struct reclaim_stat` summed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScanStat {
    /// `nr_taken`: pages isolated and looked at.
    pub taken: u64,
    /// Pages freed.
    pub reclaimed: u64,
    /// `nr_unqueued_dirty`: dirty pages not under writeback.
    pub unqueued_dirty: u64,
    /// `nr_writeback`: pages under writeback.
    pub writeback: u64,
    /// `nr_congested`: writeback pages already marked for immediate reclaim.
    pub congested: u64,
    /// `nr_immediate`: the same, met by kswapd on a PGDAT_WRITEBACK node.
    pub immediate: u64,
}

/// `shrink_node()`'s LRU walk: takes up to `nr_to_scan` pages from the LRU
/// tail, freeing clean ones until `nr_to_reclaim` are freed, and counting the
/// dirty and writeback pages met. No CPU is charged here. The freed folios'
/// memcg charges go when `uncharge_later` is None; otherwise they are
/// pushed there as (memcg, pages), for the caller to uncharge once the
/// pass's CPU is spent (`shrink_folio_list` uncharges and frees its folios
/// in batches at the end of their processing, `mem_cgroup_uncharge_folios`,
/// so until then they still count against the memcg's limits).
fn shrink_lru(
    mm: &Mm,
    files: &[Rc<dyn LruFile>],
    nr_to_scan: u64,
    nr_to_reclaim: u64,
    kswapd: bool,
    mut uncharge_later: Option<&mut Vec<(u64, u64)>>,
) -> ScanStat {
    let mut st = ScanStat::default();
    let want = nr_to_reclaim.min(nr_to_scan);
    for f in files {
        if st.reclaimed >= want {
            break;
        }
        if !f.release_folio() {
            continue;
        }
        let d = f.mapping().borrow_mut().reclaim_clean(want - st.reclaimed);
        if d.cached < 0 {
            st.reclaimed += (-d.cached) as u64;
            account_delta(mm, f.lru_wb().as_ref(), &d);
            // mem_cgroup_uncharge of the freed folios.
            let pages = (-d.cached) as u64;
            match uncharge_later.as_deref_mut() {
                Some(v) => v.push((f.memcg_id(), pages)),
                None => mm.memcgs().uncharge(f.memcg_id(), pages),
            }
        }
    }
    st.taken = st.reclaimed;
    if st.reclaimed < nr_to_reclaim {
        // The clean pages are used up: the rest of the scan meets dirty and
        // writeback pages, least recently used files first. (Whole folios
        // are freed, so the clean ones taken may exceed the scan.)
        let mut left = nr_to_scan.saturating_sub(st.taken);
        for f in files {
            if left == 0 {
                break;
            }
            let m = f.mapping().borrow();
            let wb = m.nr_writeback().min(left);
            left -= wb;
            let dirty = (m.nrpages() - m.nr_clean() - m.nr_writeback()).min(left);
            left -= dirty;
            st.writeback += wb;
            st.unqueued_dirty += dirty;
        }
        st.taken += st.writeback + st.unqueued_dirty;
        let pg = mm.pgdat();
        let mut fl = pg.flags.get();
        if fl.wb_marked {
            st.congested = st.writeback;
            if kswapd && fl.writeback {
                st.immediate = st.writeback;
            }
        }
        fl.wb_marked = st.writeback > 0;
        pg.flags.set(fl);
    }
    st
}

/// `wakeup_kswapd()`: wakes kswapd (starting it on first use) unless the
/// node is balanced (free memory at or above the high watermark) or kswapd
/// has given up on it.
pub fn wakeup_kswapd(mm: &Rc<Mm>) {
    let pg = mm.pgdat();
    if pg.kswapd_failures.get() >= MAX_RECLAIM_RETRIES
        || mm.vm().free_pages() >= pg.watermarks().high
    {
        return;
    }
    if !pg.kswapd_started.replace(true) {
        let mm2 = mm.clone();
        mm.kernel()
            .sched()
            .spawn_daemon("kswapd0", CgroupId::ROOT, 0, async move {
                kswapd(mm2).await;
            });
    }
    pg.kswapd_pending.set(true);
    pg.kswapd_wait.wake_up();
}

/// `kswapd()`: sleeps until woken, then balances the node.
async fn kswapd(mm: Rc<Mm>) {
    loop {
        {
            let pg = mm.pgdat();
            let mm2 = mm.clone();
            pg.kswapd_wait
                .wait_event(mm.kernel().sim(), move || mm2.pgdat().kswapd_pending.get())
                .await;
            pg.kswapd_pending.set(false);
        }
        balance_pgdat(&mm).await;
    }
}

/// `balance_pgdat()`: reclaims until free memory reaches the high watermark,
/// `max(high, SWAP_CLUSTER_MAX)` pages per `shrink_node` pass
/// (`kswapd_shrink_node`), throttling where the pages met are under
/// writeback.
async fn balance_pgdat(mm: &Rc<Mm>) {
    let pg = mm.pgdat();
    pg.stats.borrow_mut().pageoutrun += 1;
    let Some(src) = pg.source() else {
        return;
    };
    let mut priority = DEF_PRIORITY;
    loop {
        let wm = pg.watermarks();
        if mm.vm().free_pages() >= wm.high {
            // pgdat_balanced: clear_pgdat_congested.
            pg.flags.set(NodeFlags::default());
            pg.kswapd_failures.set(0);
            return;
        }
        let files = sorted_files(&*src);
        let lru = lru_pages(mm);
        let nr_to_scan = (lru >> priority).max(SWAP_CLUSTER_MAX);
        let nr_to_reclaim = wm.high.max(SWAP_CLUSTER_MAX);
        let st = shrink_lru(mm, &files, nr_to_scan, nr_to_reclaim, true, None);
        account_scan(mm, &st, true);
        charge_cpu(mm, &*src, &st).await;
        if st.unqueued_dirty > 0 && st.unqueued_dirty == st.taken {
            wake_flushers(mm, &*src);
        }
        let mut fl = pg.flags.get();
        if st.writeback > 0 && st.writeback == st.taken {
            fl.writeback = true;
        }
        if st.unqueued_dirty == st.taken && st.taken > 0 {
            fl.dirty = true;
        }
        let dirty = st.unqueued_dirty + st.writeback;
        if dirty > 0 && dirty == st.congested {
            fl.congested = true;
        }
        pg.flags.set(fl);
        if st.immediate > 0 {
            reclaim_throttle(mm, VmscanThrottle::Writeback).await;
        }
        if st.reclaimed == 0 {
            if priority > 0 {
                priority -= 1;
                continue;
            }
            // A whole sweep freed nothing.
            let f = pg.kswapd_failures.get() + 1;
            pg.kswapd_failures.set(f);
            if f >= MAX_RECLAIM_RETRIES || dirty == 0 {
                return;
            }
            reclaim_throttle(mm, VmscanThrottle::Writeback).await;
            priority = DEF_PRIORITY;
        } else {
            pg.kswapd_failures.set(0);
        }
    }
}

/// `try_to_free_pages()` for an allocation of `nr` pages: direct reclaim of
/// `max(nr, SWAP_CLUSTER_MAX)` pages, scanning `lru >> priority` pages per
/// priority from DEF_PRIORITY down, with the direct-reclaim throttles.
/// Returns the pages freed.
pub async fn try_to_free_pages(mm: &Rc<Mm>, nr: u64) -> u64 {
    let pg = mm.pgdat();
    let start = mm.now();
    pg.stats.borrow_mut().allocstall += 1;
    let Some(src) = pg.source() else {
        return 0;
    };
    let nr_to_reclaim = nr.max(SWAP_CLUSTER_MAX);
    let mut reclaimed = 0;
    let mut priority = DEF_PRIORITY as i32;
    while priority >= 0 {
        let files = sorted_files(&*src);
        let lru = lru_pages(mm);
        let nr_to_scan = (lru >> priority).max(SWAP_CLUSTER_MAX.min(lru));
        let st = shrink_lru(
            mm,
            &files,
            nr_to_scan,
            nr_to_reclaim - reclaimed,
            false,
            None,
        );
        account_scan(mm, &st, false);
        charge_cpu(mm, &*src, &st).await;
        reclaimed += st.reclaimed;
        if st.unqueued_dirty > 0 && st.unqueued_dirty == st.taken {
            wake_flushers(mm, &*src);
        }
        // shrink_node: stall direct reclaim on a node kswapd found congested.
        if pg.flags.get().congested {
            reclaim_throttle(mm, VmscanThrottle::Congested).await;
        }
        if reclaimed >= nr_to_reclaim {
            break;
        }
        // consider_reclaim_throttle: no progress at a high priority.
        if priority == 1 && reclaimed == 0 {
            reclaim_throttle(mm, VmscanThrottle::NoProgress).await;
        }
        if lru == 0 {
            break;
        }
        priority -= 1;
    }
    if reclaimed > 0 {
        // A successful direct reclaim revives a dormant kswapd.
        pg.kswapd_failures.set(0);
    }
    pg.stats.borrow_mut().direct_reclaim_ns += mm.now() - start;
    reclaimed
}

/// `try_to_free_mem_cgroup_pages()`: memcg-local reclaim of
/// `max(nr, SWAP_CLUSTER_MAX)` pages from the files charged to memcg
/// `memcg_id` (its LRU lists: `shrink_node_memcgs` visits only this memcg's
/// lruvec), scanning `lru >> priority` of them per priority from
/// DEF_PRIORITY down, in the calling task, which pays the CPU of every page
/// scanned and freed on its own CPUs. Wakes the flushers when all it met
/// was dirty. No node throttling (`reclaim_throttle` applies to global
/// reclaim only, as `cgroup_reclaim` skips it). Returns the pages freed.
pub async fn try_to_free_mem_cgroup_pages(mm: &Rc<Mm>, memcg_id: u64, nr: u64) -> u64 {
    let Some(src) = mm.pgdat().source() else {
        return 0;
    };
    // The memcg's own LRU (files are put on it at their first charge).
    let memcg = mm.memcgs().get(memcg_id);
    let nr_to_reclaim = nr.max(SWAP_CLUSTER_MAX);
    let mut reclaimed = 0;
    let mut priority = DEF_PRIORITY as i32;
    while priority >= 0 && reclaimed < nr_to_reclaim {
        // The memcg's LRU: pages charged to it; the oldest files reached.
        let Some(mc) = &memcg else {
            break;
        };
        let lru = mc.usage_pages();
        if lru == 0 {
            break;
        }
        let nr_to_scan = (lru >> priority).max(SWAP_CLUSTER_MAX.min(lru));
        let files = mc.lru_oldest(nr_to_scan);
        if files.is_empty() {
            break;
        }
        let mut freed = Vec::new();
        let st = shrink_lru(
            mm,
            &files,
            nr_to_scan,
            nr_to_reclaim - reclaimed,
            false,
            Some(&mut freed),
        );
        if let Some(m) = &memcg {
            m.update_events(|e| {
                e.pgscan += st.taken;
                e.pgsteal += st.reclaimed;
            });
        }
        charge_cpu_lruvec(mm, mc, &*src, &st).await;
        // The pass's folios are uncharged once processed: meanwhile other
        // chargers still see them against the limits (and reclaim too).
        for (id, pages) in freed {
            mm.memcgs().uncharge(id, pages);
        }
        reclaimed += st.reclaimed;
        if st.unqueued_dirty > 0 && st.unqueued_dirty == st.taken {
            wake_flushers(mm, &*src);
        }
        priority -= 1;
    }
    reclaimed
}

/// `reclaim_throttle()`: sleeps TASK_UNINTERRUPTIBLE on the reason's wait
/// queue. WRITEBACK: until the writeback completions since throttling began
/// exceed SWAP_CLUSTER_MAX per throttled task (see
/// [`acct_reclaim_writeback`]) or HZ/10; CONGESTED and NOPROGRESS: one
/// jiffy, skipped when few pages are waiting for writeback
/// (`skip_throttle_noprogress`).
pub async fn reclaim_throttle(mm: &Rc<Mm>, reason: VmscanThrottle) {
    let pg = mm.pgdat();
    let k = mm.kernel();
    let hz = k.hz();
    let idx = reason as usize;
    let start = mm.now();
    match reason {
        VmscanThrottle::Writeback => {
            let n = pg.nr_writeback_throttled.get() + 1;
            pg.nr_writeback_throttled.set(n);
            if n == 1 {
                pg.nr_reclaim_start.set(pg.nr_throttled_written.get());
            }
            let gen = pg.reclaim_wake_gen.get();
            let mm2 = mm.clone();
            let end = schedule_timeout_end(start, (hz / 10).max(1), k.jiffy_ns());
            let timeout = end - start;
            pg.reclaim_wait
                .wait_event_timeout(
                    k.sim(),
                    move || mm2.pgdat().reclaim_wake_gen.get() != gen,
                    timeout,
                )
                .await;
            pg.nr_writeback_throttled
                .set(pg.nr_writeback_throttled.get() - 1);
        }
        VmscanThrottle::Congested | VmscanThrottle::NoProgress => {
            if skip_throttle_noprogress(mm) {
                return;
            }
            k.sim()
                .sleep_until(schedule_timeout_end(start, 1, k.jiffy_ns()))
                .await;
        }
    }
    k.count_event("mm_vmscan_throttled");
    let mut s = pg.stats.borrow_mut();
    s.throttled[idx] += 1;
    s.throttled_ns[idx] += mm.now() - start;
}

/// `skip_throttle_noprogress()`: no point sleeping when kswapd has given up,
/// or when pages waiting for writeback are at most half the reclaimable ones.
fn skip_throttle_noprogress(mm: &Mm) -> bool {
    if mm.pgdat().kswapd_failures.get() >= MAX_RECLAIM_RETRIES {
        return true;
    }
    let vm = mm.vm();
    let write_pending = vm.nr_file_dirty + vm.nr_writeback;
    2 * write_pending <= vm.nr_file_pages
}

fn sorted_files(src: &dyn ReclaimSource) -> Vec<Rc<dyn LruFile>> {
    let mut files = src.lru_files();
    files.sort_by_key(|f| f.lru_key());
    files
}

/// Pages on the file LRU.
fn lru_pages(mm: &Mm) -> u64 {
    mm.vm().nr_file_pages
}

fn wake_flushers(mm: &Mm, src: &dyn ReclaimSource) {
    mm.pgdat().stats.borrow_mut().flusher_wakeups += 1;
    src.wakeup_flusher_threads();
}

fn account_scan(mm: &Mm, st: &ScanStat, kswapd: bool) {
    let mut s = mm.pgdat().stats.borrow_mut();
    if kswapd {
        s.pgscan_kswapd += st.taken;
        s.pgsteal_kswapd += st.reclaimed;
    } else {
        s.pgscan_direct += st.taken;
        s.pgsteal_direct += st.reclaimed;
    }
    s.nr_immediate += st.immediate;
    s.nr_dirty_seen += st.unqueued_dirty;
    s.nr_writeback_seen += st.writeback;
}

/// The CPU of a memcg reclaim pass, with the LRU isolation under the memcg
/// lruvec's `lru_lock`: `shrink_lruvec` scans at most SWAP_CLUSTER_MAX
/// folios per `shrink_list` call, and `shrink_inactive_list` isolates them
/// with `lruvec->lru_lock` held (`isolate_lru_folios`), then frees them
/// without it (`shrink_folio_list`). The isolation share of a page's cost
/// is the scan-only cost (`reclaim_page_ns / SCAN_COST_DIV`: isolate, test,
/// put back), the rest of freeing runs unlocked; uncontended, the total is
/// that of [`charge_cpu`] plus the spinlock's own lock/unlock cost.
/// Concurrent reclaimers of one memcg spin on the lock, burning CPU.
/// Simplified: the putback of the pages not freed (`move_folios_to_lru`,
/// a second hold) is folded into the first hold.
async fn charge_cpu_lruvec(
    mm: &Mm,
    memcg: &super::memcontrol_defs::MemCgroup,
    src: &dyn ReclaimSource,
    st: &ScanStat,
) {
    let free_ns = src.reclaim_page_ns();
    let total = st.reclaimed * free_ns + (st.taken - st.reclaimed) * free_ns / SCAN_COST_DIV;
    let isolate = st.taken * free_ns / SCAN_COST_DIV;
    if total == 0 {
        return;
    }
    let k = mm.kernel();
    let lock = memcg.lru_lock(k.sched(), k.locks());
    let mut left = st.taken;
    while left > 0 {
        let n = left.min(SWAP_CLUSTER_MAX);
        left -= n;
        let g = lock.lock().await;
        g.cpu(n * free_ns / SCAN_COST_DIV).await;
        drop(g);
    }
    let rest = total.saturating_sub(isolate);
    if rest > 0 {
        k.sched().cpu(rest).await;
    }
}

/// The CPU of a pass: every page freed and every page scanned and kept.
async fn charge_cpu(mm: &Mm, src: &dyn ReclaimSource, st: &ScanStat) {
    let free_ns = src.reclaim_page_ns();
    let ns = st.reclaimed * free_ns + (st.taken - st.reclaimed) * free_ns / SCAN_COST_DIV;
    if ns > 0 {
        mm.kernel().sched().cpu(ns).await;
    }
}
