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

use super::state::Mm;
use super::vmscan::{self, wakeup_kswapd, MAX_RECLAIM_RETRIES};
use crate::model::errno::IoError;

/// Smallest `min_free_kbytes` the boot-time default may take, KiB
/// (`init_per_zone_wmark_min`, mm/page_alloc.c).
pub const MIN_FREE_KBYTES_FLOOR: u64 = 128;
/// Largest `min_free_kbytes` the boot-time default may take, KiB
/// (`init_per_zone_wmark_min` since 5.x: 256 MiB).
pub const MIN_FREE_KBYTES_CEIL: u64 = 262_144;
/// Default `vm.watermark_scale_factor`, in 1/10000 of the zone
/// (mm/page_alloc.c: `watermark_scale_factor = 10`).
pub const WATERMARK_SCALE_FACTOR_DEFAULT: u64 = 10;
/// Largest `vm.watermark_scale_factor` the sysctl accepts (kernel/sysctl
/// table: extra2 = 3000).
pub const WATERMARK_SCALE_FACTOR_MAX: u64 = 3000;

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
            mm.kernel()
                .violation("out of memory: no reclaimable page cache".into());
            return Ok(());
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
