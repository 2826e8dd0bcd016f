//! Page reclaim (mm/vmscan.c), as far as the model has it: direct reclaim when
//! a page-cache allocation would take free memory below the low watermark.
//! Clean pages are dropped, least recently used files first; when only dirty
//! or writeback pages remain, the flushers are woken and the allocating task
//! throttles (`reclaim_throttle` with VMSCAN_THROTTLE_WRITEBACK) until some
//! writeback completes or the throttle times out.
//!
//! mm/ does not know files: the caller hands reclaim the files whose page
//! cache it may shrink ([`LruFile`]) and the way to wake the flushers.
//!
//! Left out: kswapd, per-folio LRU lists with active/inactive aging, anonymous
//! memory and swap, memcg reclaim, the CPU of scanning pages it cannot free.

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;

use sim::{Time, MSEC};

use super::backing_dev_defs::Wb;
use super::filemap::AddressSpace;
use super::page_writeback::account_delta;
use super::state::Mm;

/// Reclaim gives up waiting for writeback after this long and retries
/// (`reclaim_throttle` with VMSCAN_THROTTLE_WRITEBACK: HZ/10), ns.
pub const RECLAIM_THROTTLE_NS: Time = 100 * MSEC;

/// Pages reclaimed beyond the shortfall in one pass (SWAP_CLUSTER_MAX).
pub const SWAP_CLUSTER_MAX: u64 = 32;

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

/// `min_free_kbytes`-style low watermark: `sqrt(lowmem_kbytes * 16)` KiB
/// (mm/page_alloc.c, init_per_zone_wmark_min), in pages.
pub fn low_watermark_pages(mm: &Mm) -> u64 {
    let kb = mm.vm().total_pages * 4;
    let min_kb = ((kb * 16) as f64).sqrt() as u64;
    (min_kb / 4) * 5 / 4
}

/// Makes room for `pages` new page-cache pages: direct reclaim of clean pages
/// of `files()` (least recently used first), at `reclaim_page_ns` of CPU per
/// page, and, if only dirty or writeback pages remain, `wakeup_flushers()`
/// and a throttled wait for writeback to complete.
pub async fn ensure_free(
    mm: &Rc<Mm>,
    pages: u64,
    reclaim_page_ns: Time,
    files: impl Fn() -> Vec<Rc<dyn LruFile>>,
    wakeup_flushers: impl Fn(),
) {
    let k = mm.kernel().clone();
    loop {
        let free = mm.vm().free_pages();
        let want = pages + low_watermark_pages(mm);
        if free >= want {
            return;
        }
        let need = want - free + SWAP_CLUSTER_MAX;
        let reclaimed = shrink_clean(mm, need, files());
        if reclaimed > 0 {
            k.sched().cpu(reclaimed * reclaim_page_ns).await;
            continue;
        }
        // Nothing clean: kick writeback and wait for some to complete.
        wakeup_flushers();
        let before = mm.vm().nr_written;
        let vm_wait = k.sim().sleep(RECLAIM_THROTTLE_NS);
        let mm2 = mm.clone();
        let progress = async move {
            loop {
                if mm2.vm().nr_written > before {
                    return;
                }
                mm2.kernel().sim().sleep(MSEC).await;
            }
        };
        select2(vm_wait, progress).await;
        if mm.vm().nr_writeback == 0 && mm.vm().nr_file_dirty == 0 {
            // Nothing can be freed: memory is full of unreclaimable pages.
            k.violation("out of memory: no reclaimable page cache".into());
            return;
        }
    }
}

/// Completes when either future completes.
async fn select2(a: impl Future<Output = ()>, b: impl Future<Output = ()>) {
    let mut a = Box::pin(a);
    let mut b = Box::pin(b);
    std::future::poll_fn(move |cx| {
        if a.as_mut().poll(cx).is_ready() || b.as_mut().poll(cx).is_ready() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await
}

/// Drops up to `need` clean pages of `files`, least recently used first.
fn shrink_clean(mm: &Mm, need: u64, mut files: Vec<Rc<dyn LruFile>>) -> u64 {
    files.sort_by_key(|f| f.lru_key());
    let mut got = 0;
    for f in files {
        if got >= need {
            break;
        }
        let d = f.mapping().borrow_mut().reclaim_clean(need - got);
        if d.cached < 0 {
            got += (-d.cached) as u64;
            account_delta(mm, f.lru_wb().as_ref(), &d);
        }
    }
    got
}
