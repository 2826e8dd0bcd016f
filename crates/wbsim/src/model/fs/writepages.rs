//! Generic `->writepages`: walk the mapping's dirty pages (`write_cache_pages`
//! / `writeback_iter`), move them to writeback, and submit them as bios of at
//! most the device's request size (`iomap_writepages`, `mpage_writepages`).
//! Bio completion (`bi_end_io` -> `folio_end_writeback`) cleans the pages and
//! wakes waiters; PG_dropbehind (RWF_DONTCACHE) pages are then dropped, if
//! still clean, by a task-context completion that pays CPU per folio.
//!
//! Pages are taken in batches of one maximum-size bio, so pages under
//! writeback are bounded by the device's queue depth (submit_bio blocks for a
//! tag), as in the kernel. Left out: folio locking and the per-folio skip of
//! locked folios (pages_skipped stays 0).

use std::rc::Rc;

use sim::Time;

use crate::model::block::Bio;
use crate::model::fs::inode::InodeRef;
use crate::model::fs::super_::SuperBlock;
use crate::model::fs::WritebackControl;
use crate::model::kernel::sched::CgroupId;
use crate::model::machine::Machine;
use crate::model::mm::accounting::account_delta;
use crate::model::mm::backing_dev::SyncMode;
use crate::model::mm::vmstat::PAGE_SIZE;

/// CPU per PG_dropbehind folio dropped at writeback completion
/// (`folio_end_dropbehind`: folio lock, `folio_unmap_invalidate` removing it
/// from the page cache and LRU, memcg uncharge, free), ns: 0.3 us. Estimate:
/// the same work as reclaiming a clean page (`CpuCosts::reclaim_page_ns`,
/// 0.2 us) plus the folio lock and the ioend's trip through a workqueue.
pub const DROPBEHIND_PAGE_NS: Time = 300;

/// Submits the pages `[start, end)` of `inode` (already in writeback state) as
/// bios; completion ends their writeback.
pub async fn submit_page_range(
    m: &Rc<Machine>,
    sb: &Rc<SuperBlock>,
    inode: &InodeRef,
    start: u64,
    end: u64,
) {
    let Some(dev) = sb.device.clone() else {
        // No device (should not happen for a writeback-capable fs): complete now.
        end_page_writeback(m, inode, start, end);
        return;
    };
    let max_pages = (dev.profile().max_request_bytes / PAGE_SIZE).max(1);
    let mut s = start;
    while s < end {
        let e = end.min(s + max_pages);
        let bio = Bio::write(inode.disk_base + s * PAGE_SIZE, (e - s) * PAGE_SIZE);
        let wm = Rc::downgrade(m);
        let ino = inode.clone();
        dev.submit_bio(
            bio,
            Box::new(move || {
                if let Some(m) = wm.upgrade() {
                    end_page_writeback(&m, &ino, s, e);
                }
            }),
        )
        .await;
        s = e;
    }
}

/// `folio_end_writeback` for a page range: counters, waiters, and for
/// PG_dropbehind folios the drop in task context.
pub fn end_page_writeback(m: &Rc<Machine>, inode: &InodeRef, start: u64, end: u64) {
    let (d, dropbehind) = inode.mapping.borrow_mut().end_writeback(start, end);
    account_delta(m, inode.wb().as_ref(), &d);
    inode.i_wb_wait.wake_up_all();
    m.sim.trace("writeback_end_folio", || {
        format!("ino={} index={start} nr={}", inode.ino, end - start)
    });
    if dropbehind > 0 {
        end_dropbehind_work(m, inode, start, end, dropbehind);
    }
}

/// The task-context completion of an I/O with PG_dropbehind folios: bio
/// completion runs in interrupt context, where `folio_end_dropbehind` cannot
/// take the folio lock, so iomap marks such ioends (IOMAP_IOEND_DONTCACHE)
/// and the filesystem finishes them from a workqueue (xfs's `xfs_end_io`),
/// which pays [`DROPBEHIND_PAGE_NS`] per folio and drops those still clean.
/// Modelled as a kworker task per completed bio.
fn end_dropbehind_work(m: &Rc<Machine>, inode: &InodeRef, start: u64, end: u64, pages: u64) {
    let wm = Rc::downgrade(m);
    let ino = inode.clone();
    m.sched
        .spawn("kworker/u:dropbehind", CgroupId::ROOT, 0, async move {
            let Some(m) = wm.upgrade() else { return };
            m.sched.cpu(pages * DROPBEHIND_PAGE_NS).await;
            let d = ino.mapping.borrow_mut().drop_clean_dropbehind(start, end);
            account_delta(&m, ino.wb().as_ref(), &d);
            m.sim.trace("folio_end_dropbehind", || {
                format!("ino={} index={start} nr={}", ino.ino, -d.cached)
            });
        });
}

/// The generic writepages.
pub async fn generic_writepages(
    m: &Rc<Machine>,
    sb: &Rc<SuperBlock>,
    inode: &InodeRef,
    wbc: &mut WritebackControl,
) {
    let batch = sb
        .device
        .as_ref()
        .map_or(256, |d| (d.profile().max_request_bytes / PAGE_SIZE).max(1));
    let (mut index, mut end) = if wbc.range_cyclic {
        (inode.mapping.borrow().writeback_index, u64::MAX)
    } else {
        (wbc.range_start, wbc.range_end)
    };
    // WB_SYNC_ALL and tagged writeback (tag_pages_for_writeback) write only
    // the pages dirty when they start, so a task that keeps dirtying the file
    // cannot livelock sync: cap the range at the last dirty page now and the
    // count at the pages dirty now.
    let mut tagged = u64::MAX;
    if wbc.sync_mode == SyncMode::All || wbc.tagged_writepages {
        let map = inode.mapping.borrow();
        end = end.min(map.dirty_end());
        tagged = map.dirty_in(index, end);
    }
    let cyclic_start = index;
    let mut wrapped = false;
    let per_page = sb.fs.writepage_ns();
    let mut first_batch = true;
    while wbc.nr_to_write > 0 && tagged > 0 {
        let take = batch.min(wbc.nr_to_write as u64).min(tagged);
        let (ranges, delta) = inode.mapping.borrow_mut().start_writeback(index, end, take);
        if ranges.is_empty() {
            if wbc.range_cyclic && !wrapped && cyclic_start > 0 {
                wrapped = true;
                index = 0;
                end = cyclic_start;
                continue;
            }
            break;
        }
        account_delta(m, inode.wb().as_ref(), &delta);
        let pages: u64 = ranges.iter().map(|(s, e)| e - s).sum();
        let call = if first_batch {
            first_batch = false;
            sb.fs.writepages_call_ns()
        } else {
            0
        };
        m.sched.cpu(call + pages * per_page).await;
        for &(s, e) in &ranges {
            submit_page_range(m, sb, inode, s, e).await;
        }
        wbc.nr_to_write -= pages as i64;
        tagged = tagged.saturating_sub(pages);
        index = ranges.last().map_or(index, |r| r.1);
        if wbc.range_cyclic {
            inode.mapping.borrow_mut().writeback_index = index;
        }
    }
    if wbc.range_cyclic && !inode.mapping.borrow().has_dirty() {
        inode.mapping.borrow_mut().writeback_index = 0;
    }
}
