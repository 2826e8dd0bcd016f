//! The page allocator's watermarks and its slow path, as far as reclaim needs
//! them (mm/page_alloc.c): `calculate_min_free_kbytes()`,
//! `__setup_per_zone_wmarks()`, and `__alloc_pages()` for page-cache pages:
//! the fast path takes pages while free memory stays above the low
//! watermark; below it the slow path wakes kswapd and may dip to the min
//! watermark; below min the allocating task does direct reclaim
//! ([`super::vmscan::try_to_free_pages`]) and retries. A GFP_NOWAIT
//! allocation (IOCB_NOWAIT writes: `FGP_NOWAIT`) gets no direct reclaim and
//! fails instead, which the write turns into -EAGAIN.
//!
//! Left out: zones (one node with one zone: the model's machines are 64-bit
//! with ZONE_NORMAL holding nearly all memory), per-CPU page lists, orders
//! (every allocation is counted in base pages), lowmem_reserve, watermark
//! boosting and compaction, the OOM killer (a stall with nothing left to
//! reclaim is reported as a violation).

use std::rc::Rc;

pub use super::mmzone::Watermarks;
use super::state::Mm;
use super::vmscan::{self, wakeup_kswapd, MAX_RECLAIM_RETRIES};
use crate::model::errno::IoError;
use crate::model::kernel::stats::ViolationObjects;

/// `__alloc_pages()` of `nr` page-cache pages (GFP_HIGHUSER_MOVABLE, or
/// GFP_NOWAIT with `nowait`). Returns once the pages may be taken; the caller
/// then adds them to the page cache. With `nowait`, returns
/// `Err(IoError::Again)` where direct reclaim would be needed.
pub async fn alloc_pages(mm: &Rc<Mm>, nr: u64, nowait: bool) -> Result<(), IoError> {
    let wm = mm.pgdat().watermarks();
    // get_page_from_freelist with ALLOC_WMARK_LOW.
    if mm.vm().free_pages() >= wm.low + nr {
        return Ok(());
    }
    let mut no_progress = 0;
    loop {
        // __alloc_pages_slowpath: wake_all_kswapds, then ALLOC_WMARK_MIN.
        wakeup_kswapd(mm);
        if mm.vm().free_pages() >= wm.min + nr {
            return Ok(());
        }
        if nowait {
            return Err(IoError::Again);
        }
        let reclaimed = vmscan::try_to_free_pages(mm, nr).await;
        if reclaimed > 0 {
            no_progress = 0;
            continue;
        }
        // should_reclaim_retry: retry while pages are still on their way
        // to being freed (dirty or under writeback) or kswapd is working.
        let pending = {
            let vm = mm.vm();
            vm.nr_file_dirty + vm.nr_writeback
        };
        no_progress += 1;
        if pending == 0 && no_progress >= MAX_RECLAIM_RETRIES {
            mm.kernel().violation(
                "out_of_memory",
                ViolationObjects::default(),
                "out of memory: no reclaimable page cache".into(),
            );
            return Ok(());
        }
    }
}
