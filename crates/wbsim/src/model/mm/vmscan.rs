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
//! aging, refaults or shadow entries; no anonymous memory or swap; no memcg
//! reclaim; PG_reclaim is one node-wide mark ("writeback pages met by a
//! previous pass"), not a per-folio flag; kswapd's short "nap" before full
//! sleep and kcompactd are left out.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use sim::Time;

use super::backing_dev_defs::Wb;
use super::filemap::AddressSpace;
use super::page_alloc::{calculate_min_free_kbytes, setup_per_zone_wmarks, Watermarks};
use super::page_writeback::account_delta;
use super::state::Mm;
use crate::model::kernel::sched::CgroupId;
use crate::model::kernel::timer::schedule_timeout_end;
use crate::model::kernel::wait::WaitQueue;

/// `SWAP_CLUSTER_MAX`: pages direct reclaim asks for per attempt and the
/// batch of writeback completions that wakes a throttled reclaimer
/// (include/linux/swap.h).
pub const SWAP_CLUSTER_MAX: u64 = 32;
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

/// What reclaim sees of a file: its page cache, the wb its pages are
/// accounted to, and its place on the LRU.
pub trait LruFile {
    /// LRU order, oldest first: (last access, then a stable tie-break).
    fn lru_key(&self) -> (Time, u64, u64);
    /// The file's page cache.
    fn mapping(&self) -> &RefCell<AddressSpace>;
    /// The wb the file's pages are accounted to.
    fn lru_wb(&self) -> Option<Rc<Wb>>;
}

/// What reclaim needs from the layers above mm/: the files on the LRU and a
/// way to wake the flushers.
pub trait ReclaimSource {
    /// Every file whose page cache reclaim may shrink.
    fn lru_files(&self) -> Vec<Rc<dyn LruFile>>;
    /// `wakeup_flusher_threads(WB_REASON_VMSCAN)`.
    fn wakeup_flusher_threads(&self);
    /// CPU to reclaim one clean page, ns.
    fn reclaim_page_ns(&self) -> Time;
}

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

/// Reclaim counters of the node, as /proc/vmstat names them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReclaimStats {
    /// `pgscan_kswapd`: pages scanned by kswapd.
    pub pgscan_kswapd: u64,
    /// `pgscan_direct`: pages scanned by direct reclaim.
    pub pgscan_direct: u64,
    /// `pgsteal_kswapd`: pages freed by kswapd.
    pub pgsteal_kswapd: u64,
    /// `pgsteal_direct`: pages freed by direct reclaim.
    pub pgsteal_direct: u64,
    /// `allocstall`: entries into direct reclaim.
    pub allocstall: u64,
    /// `pageoutrun`: kswapd balance runs.
    pub pageoutrun: u64,
    /// `nr_vmscan_immediate_reclaim`: writeback pages met again.
    pub nr_immediate: u64,
    /// Dirty pages met by reclaim (`nr_dirty` of mm_vmscan_lru_shrink_inactive).
    pub nr_dirty_seen: u64,
    /// Pages under writeback met by reclaim.
    pub nr_writeback_seen: u64,
    /// Flusher wakeups with WB_REASON_VMSCAN.
    pub flusher_wakeups: u64,
    /// `reclaim_throttle()` sleeps, by reason: writeback, congested, noprogress.
    pub throttled: [u64; 3],
    /// Time slept in `reclaim_throttle()`, ns, by the same reasons.
    pub throttled_ns: [u64; 3],
    /// Time tasks spent in direct reclaim (CPU and throttling), ns.
    pub direct_reclaim_ns: u64,
}

/// Node flags of reclaim (`pgdat->flags`, `lruvec->flags`).
#[derive(Clone, Copy, Debug, Default)]
struct NodeFlags {
    /// PGDAT_WRITEBACK: kswapd took only pages under writeback.
    writeback: bool,
    /// PGDAT_DIRTY: kswapd took only unqueued dirty pages.
    dirty: bool,
    /// LRUVEC_NODE_CONGESTED: every dirty page met was already marked for
    /// immediate reclaim.
    congested: bool,
    /// PG_reclaim stand-in: a previous pass met pages under writeback and
    /// marked them.
    wb_marked: bool,
}

/// The reclaim part of `pg_data_t` for the machine's one node.
pub struct Pgdat {
    /// Zone watermarks, pages.
    wmark: Cell<Watermarks>,
    /// `vm.min_free_kbytes` in force, KiB.
    min_free_kbytes: Cell<u64>,
    /// `vm.watermark_scale_factor` in force.
    watermark_scale_factor: Cell<u64>,
    /// Managed pages of the zone.
    managed_pages: u64,
    /// Reclaim flags of the node.
    flags: Cell<NodeFlags>,
    /// `kswapd_wait`.
    kswapd_wait: WaitQueue,
    /// A wakeup is pending for kswapd (`kswapd_order` set).
    kswapd_pending: Cell<bool>,
    /// kswapd has been started.
    kswapd_started: Cell<bool>,
    /// `kswapd_failures`: balance runs that freed nothing.
    kswapd_failures: Cell<u32>,
    /// `reclaim_wait[VMSCAN_THROTTLE_WRITEBACK]`.
    reclaim_wait: WaitQueue,
    /// Bumped by every wake_up of `reclaim_wait` (a sleeper returns on any
    /// wakeup, as `schedule_timeout` does).
    reclaim_wake_gen: Cell<u64>,
    /// `nr_writeback_throttled`.
    nr_writeback_throttled: Cell<u64>,
    /// `nr_reclaim_start`: NR_THROTTLED_WRITTEN when throttling began.
    nr_reclaim_start: Cell<u64>,
    /// NR_THROTTLED_WRITTEN: pages whose writeback ended while reclaimers
    /// were throttled.
    nr_throttled_written: Cell<u64>,
    /// The files and flusher wakeup, registered by the filesystem layer.
    source: RefCell<Option<Rc<dyn ReclaimSource>>>,
    /// Counters.
    stats: RefCell<ReclaimStats>,
}

impl Pgdat {
    /// The node of a machine with `managed_pages` pages, with
    /// `min_free_kbytes` (None: the boot-time default) and
    /// `watermark_scale_factor`.
    pub fn new(managed_pages: u64, min_free_kbytes: Option<u64>, wsf: u64) -> Pgdat {
        let mfk = min_free_kbytes.unwrap_or_else(|| calculate_min_free_kbytes(managed_pages));
        Pgdat {
            wmark: Cell::new(setup_per_zone_wmarks(managed_pages, mfk, wsf)),
            min_free_kbytes: Cell::new(mfk),
            watermark_scale_factor: Cell::new(wsf),
            managed_pages,
            flags: Cell::new(NodeFlags::default()),
            kswapd_wait: WaitQueue::new("kswapd_wait"),
            kswapd_pending: Cell::new(false),
            kswapd_started: Cell::new(false),
            kswapd_failures: Cell::new(0),
            reclaim_wait: WaitQueue::new("reclaim_wait"),
            reclaim_wake_gen: Cell::new(0),
            nr_writeback_throttled: Cell::new(0),
            nr_reclaim_start: Cell::new(0),
            nr_throttled_written: Cell::new(0),
            source: RefCell::new(None),
            stats: RefCell::new(ReclaimStats::default()),
        }
    }

    /// The zone watermarks, pages.
    pub fn watermarks(&self) -> Watermarks {
        self.wmark.get()
    }

    /// `vm.min_free_kbytes` in force, KiB.
    pub fn min_free_kbytes(&self) -> u64 {
        self.min_free_kbytes.get()
    }

    /// Writes `vm.watermark_scale_factor` / `vm.min_free_kbytes` at run time
    /// (`setup_per_zone_wmarks` again).
    pub fn set_watermark_params(&self, min_free_kbytes: u64, wsf: u64) {
        self.min_free_kbytes.set(min_free_kbytes);
        self.watermark_scale_factor.set(wsf);
        self.wmark.set(setup_per_zone_wmarks(
            self.managed_pages,
            min_free_kbytes,
            wsf,
        ));
    }

    /// The reclaim counters.
    pub fn stats(&self) -> ReclaimStats {
        *self.stats.borrow()
    }

    /// Whether a [`ReclaimSource`] is registered.
    pub fn has_source(&self) -> bool {
        self.source.borrow().is_some()
    }

    /// Registers the files and flusher wakeup reclaim works with.
    pub fn set_source(&self, s: Rc<dyn ReclaimSource>) {
        *self.source.borrow_mut() = Some(s);
    }

    fn source(&self) -> Option<Rc<dyn ReclaimSource>> {
        self.source.borrow().clone()
    }
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
/// dirty and writeback pages met. No CPU is charged here.
fn shrink_lru(
    mm: &Mm,
    files: &[Rc<dyn LruFile>],
    nr_to_scan: u64,
    nr_to_reclaim: u64,
    kswapd: bool,
) -> ScanStat {
    let mut st = ScanStat::default();
    let want = nr_to_reclaim.min(nr_to_scan);
    for f in files {
        if st.reclaimed >= want {
            break;
        }
        let d = f.mapping().borrow_mut().reclaim_clean(want - st.reclaimed);
        if d.cached < 0 {
            st.reclaimed += (-d.cached) as u64;
            account_delta(mm, f.lru_wb().as_ref(), &d);
        }
    }
    st.taken = st.reclaimed;
    if st.reclaimed < nr_to_reclaim {
        // The clean pages are used up: the rest of the scan meets dirty and
        // writeback pages, least recently used files first.
        let mut left = nr_to_scan - st.taken;
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
        let st = shrink_lru(mm, &files, nr_to_scan, nr_to_reclaim, true);
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
        let st = shrink_lru(mm, &files, nr_to_scan, nr_to_reclaim - reclaimed, false);
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

/// `acct_reclaim_writeback()`, from `folio_end_writeback`: while reclaimers
/// are throttled on writeback, counts the `nr` pages that finished and wakes
/// them once more than SWAP_CLUSTER_MAX per throttled task have.
pub fn acct_reclaim_writeback(mm: &Mm, nr: u64) {
    let pg = mm.pgdat();
    let throttled = pg.nr_writeback_throttled.get();
    if throttled == 0 {
        return;
    }
    let w = pg.nr_throttled_written.get() + nr;
    pg.nr_throttled_written.set(w);
    if w - pg.nr_reclaim_start.get() > SWAP_CLUSTER_MAX * throttled {
        pg.reclaim_wake_gen.set(pg.reclaim_wake_gen.get() + 1);
        pg.reclaim_wait.wake_up();
    }
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

/// The CPU of a pass: every page freed and every page scanned and kept.
async fn charge_cpu(mm: &Mm, src: &dyn ReclaimSource, st: &ScanStat) {
    let free_ns = src.reclaim_page_ns();
    let ns = st.reclaimed * free_ns + (st.taken - st.reclaimed) * free_ns / SCAN_COST_DIV;
    if ns > 0 {
        mm.kernel().sched().cpu(ns).await;
    }
}
