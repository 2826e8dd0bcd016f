//! The node and zone structures reclaim and the allocator share
//! (include/linux/mmzone.h: `pg_data_t`, `enum zone_watermarks`), with the
//! pure watermark arithmetic of mm/page_alloc.c (`calculate_min_free_kbytes`,
//! `__setup_per_zone_wmarks`) so the node can be built at boot, and what
//! reclaim sees of the layers above mm/ ([`LruFile`], [`ReclaimSource`]).
//! The allocator's slow path is in [`super::page_alloc`], reclaim in
//! [`super::vmscan`].
//!
//! Left out: more than one node and zone (the model's machines are 64-bit
//! with ZONE_NORMAL holding nearly all memory), lowmem_reserve, watermark
//! boosting.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use sim::Time;

use super::backing_dev_defs::Wb;
use super::filemap::AddressSpace;
use crate::model::kernel::wait::WaitQueue;

/// `SWAP_CLUSTER_MAX`: pages direct reclaim asks for per attempt and the
/// batch of writeback completions that wakes a throttled reclaimer
/// (include/linux/swap.h).
pub const SWAP_CLUSTER_MAX: u64 = 32;

/// Smallest `min_free_kbytes` the boot-time default may take, KiB
/// (`init_per_zone_wmark_min`, mm/page_alloc.c).
pub const MIN_FREE_KBYTES_FLOOR: u64 = 128;
/// Largest `min_free_kbytes` the boot-time default may take, KiB
/// (`init_per_zone_wmark_min` since 5.x: 256 MiB).
pub const MIN_FREE_KBYTES_CEIL: u64 = 262_144;

/// The zone watermarks, pages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Watermarks {
    /// WMARK_MIN: below it allocations do direct reclaim.
    pub min: u64,
    /// WMARK_LOW: below it the allocator wakes kswapd.
    pub low: u64,
    /// WMARK_HIGH: kswapd reclaims until free memory reaches it.
    pub high: u64,
}

/// `calculate_min_free_kbytes()`: `int_sqrt(lowmem_kbytes * 16)` clamped to
/// [128, 262144] KiB, for `managed_pages` pages of lowmem.
pub fn calculate_min_free_kbytes(managed_pages: u64) -> u64 {
    let lowmem_kbytes = managed_pages * 4;
    int_sqrt(lowmem_kbytes * 16).clamp(MIN_FREE_KBYTES_FLOOR, MIN_FREE_KBYTES_CEIL)
}

/// `__setup_per_zone_wmarks()` for the one zone: min from
/// `min_free_kbytes`; the gap to low and from low to high is the larger of
/// min/4 and `managed * watermark_scale_factor / 10000`.
pub fn setup_per_zone_wmarks(
    managed_pages: u64,
    min_free_kbytes: u64,
    watermark_scale_factor: u64,
) -> Watermarks {
    let min = min_free_kbytes / 4;
    let gap = (min / 4).max(managed_pages * watermark_scale_factor / 10_000);
    Watermarks {
        min,
        low: min + gap,
        high: min + 2 * gap,
    }
}

/// `int_sqrt()`: floor of the square root.
fn int_sqrt(x: u64) -> u64 {
    let mut r = (x as f64).sqrt() as u64;
    while r * r > x {
        r -= 1;
    }
    while (r + 1) * (r + 1) <= x {
        r += 1;
    }
    r
}

/// What reclaim sees of a file: its page cache, the wb its pages are
/// accounted to, and its place on the LRU.
pub trait LruFile {
    /// LRU order, oldest first: (last access, then a stable tie-break).
    fn lru_key(&self) -> (Time, u64, u64);
    /// The file's page cache.
    fn mapping(&self) -> &RefCell<AddressSpace>;
    /// The wb the file's pages are accounted to.
    fn lru_wb(&self) -> Option<Rc<Wb>>;
    /// Id of the memcg its pages are charged to (`folio_memcg`, one memcg
    /// per file here); 0 when nothing was charged.
    fn memcg_id(&self) -> u64 {
        0
    }
    /// `->release_folio()` of the file's clean folios: false while their
    /// owner still uses them (a filesystem's private data pins them), so
    /// reclaim passes over the file this time. True for plain file data.
    fn release_folio(&self) -> bool {
        true
    }
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
pub(super) struct NodeFlags {
    /// PGDAT_WRITEBACK: kswapd took only pages under writeback.
    pub(super) writeback: bool,
    /// PGDAT_DIRTY: kswapd took only unqueued dirty pages.
    pub(super) dirty: bool,
    /// LRUVEC_NODE_CONGESTED: every dirty page met was already marked for
    /// immediate reclaim.
    pub(super) congested: bool,
    /// PG_reclaim stand-in: a previous pass met pages under writeback and
    /// marked them.
    pub(super) wb_marked: bool,
}

/// The reclaim part of `pg_data_t` for the machine's one node.
pub struct Pgdat {
    /// Zone watermarks, pages.
    pub(super) wmark: Cell<Watermarks>,
    /// `vm.min_free_kbytes` in force, KiB.
    pub(super) min_free_kbytes: Cell<u64>,
    /// `vm.watermark_scale_factor` in force.
    pub(super) watermark_scale_factor: Cell<u64>,
    /// Managed pages of the zone.
    pub(super) managed_pages: u64,
    /// Reclaim flags of the node.
    pub(super) flags: Cell<NodeFlags>,
    /// `kswapd_wait`.
    pub(super) kswapd_wait: WaitQueue,
    /// A wakeup is pending for kswapd (`kswapd_order` set).
    pub(super) kswapd_pending: Cell<bool>,
    /// kswapd has been started.
    pub(super) kswapd_started: Cell<bool>,
    /// `kswapd_failures`: balance runs that freed nothing.
    pub(super) kswapd_failures: Cell<u32>,
    /// `reclaim_wait[VMSCAN_THROTTLE_WRITEBACK]`.
    pub(super) reclaim_wait: WaitQueue,
    /// Bumped by every wake_up of `reclaim_wait` (a sleeper returns on any
    /// wakeup, as `schedule_timeout` does).
    pub(super) reclaim_wake_gen: Cell<u64>,
    /// `nr_writeback_throttled`.
    pub(super) nr_writeback_throttled: Cell<u64>,
    /// `nr_reclaim_start`: NR_THROTTLED_WRITTEN when throttling began.
    pub(super) nr_reclaim_start: Cell<u64>,
    /// NR_THROTTLED_WRITTEN: pages whose writeback ended while reclaimers
    /// were throttled.
    pub(super) nr_throttled_written: Cell<u64>,
    /// The files and flusher wakeup, registered by the filesystem layer.
    pub(super) source: RefCell<Option<Rc<dyn ReclaimSource>>>,
    /// Counters.
    pub(super) stats: RefCell<ReclaimStats>,
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

    pub(super) fn source(&self) -> Option<Rc<dyn ReclaimSource>> {
        self.source.borrow().clone()
    }

    /// `acct_reclaim_writeback()`, from `folio_end_writeback`: while reclaimers
    /// are throttled on writeback, counts the `nr` pages that finished and wakes
    /// them once more than SWAP_CLUSTER_MAX per throttled task have.
    pub fn acct_reclaim_writeback(&self, nr: u64) {
        let pg = self;
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_free_kbytes_follows_sqrt_and_clamps() {
        // 16 GiB: sqrt(16 Mi KiB * 16) = 16384 KiB (the kernel's table).
        assert_eq!(calculate_min_free_kbytes((16u64 << 30) / 4096), 16_384);
        // 1 GiB: 4096 KiB.
        assert_eq!(calculate_min_free_kbytes((1u64 << 30) / 4096), 4_096);
        // Tiny and huge machines clamp.
        assert_eq!(calculate_min_free_kbytes(100), 128);
        assert_eq!(calculate_min_free_kbytes((8u64 << 40) / 4096), 262_144);
    }

    #[test]
    fn watermarks_use_the_larger_gap() {
        // 16 GiB, default scale factor: min 4096 pages, gap
        // max(1024, 4194304 * 10 / 10000 = 4194).
        let w = setup_per_zone_wmarks(4_194_304, 16_384, 10);
        assert_eq!(
            w,
            Watermarks {
                min: 4096,
                low: 8290,
                high: 12_484
            }
        );
        // A tiny scale factor falls back to min/4.
        let w = setup_per_zone_wmarks(4_194_304, 16_384, 1);
        assert_eq!((w.low, w.high), (4096 + 1024, 4096 + 2048));
    }
}
