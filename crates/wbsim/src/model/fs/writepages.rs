//! Generic `->writepages`: walk the mapping's dirty pages (`write_cache_pages`
//! / `writeback_iter`), move them to writeback, map their blocks, and submit
//! them as bios of at most the device's request size (`iomap_writepages`,
//! `mpage_writepages`).
//!
//! Block mapping (`xfs_map_blocks`) per contiguous dirty range: a lookup
//! under the inode's ilock held shared and, over delalloc holes, the
//! allocation of the delalloc extent under the ilock held exclusive (costs
//! from the filesystem; XFS allocates them unwritten, see
//! [`crate::model::fs::extent`]).
//!
//! Completion: for a filesystem with a completion workqueue (XFS), the pages
//! of one call form ioends (`struct iomap_ioend`: a contiguous range of one
//! kind, several chained bios), each completed when its last bio is; an
//! ioend over unwritten blocks or with PG_dropbehind (RWF_DONTCACHE) folios
//! goes to the inode's list and its work item (`xfs_end_bio`, `xfs_end_io`),
//! which sorts and merges contiguous ioends, converts unwritten blocks in a
//! transaction under the ilock held exclusive, ends the folios' writeback
//! and drops the clean PG_dropbehind ones, paying CPU per folio. Otherwise
//! each bio's completion (`bi_end_io` -> `folio_end_writeback`) cleans its
//! pages and a kworker drops PG_dropbehind ones.
//!
//! Pages are taken in batches of one maximum-size bio, so pages under
//! writeback are bounded by the device's queue depth (submit_bio blocks for a
//! tag), as in the kernel. The folios of a bio stay locked until it is
//! submitted, so a writer copying into them waits (also while submission
//! sleeps for a tag). Left out: the per-folio skip of locked folios
//! (pages_skipped stays 0); the cached mapping of
//! `xfs_writepage_ctx` (every range is looked up); on-disk size updates at
//! completion.

use std::cell::RefCell;
use std::rc::Rc;

use sim::Time;

use crate::model::block::{Bio, BioFlags};
use crate::model::fs::inode::InodeRef;
use crate::model::fs::vfs::Machine;
use crate::model::fs::vfs::SuperBlock;
use crate::model::fs::vfs::{wbc_account_cgroup_owner, WritebackControl};
use crate::model::kernel::sched::CgroupId;
use crate::model::kernel::workqueue::{queue_work, Work, Workqueue};
use crate::model::mm::backing_dev::SyncMode;
use crate::model::mm::memcontrol::mem_cgroup_uncharge_freed;
use crate::model::mm::page_writeback::account_delta;
use crate::model::mm::vmstat::PAGE_SIZE;

/// CPU per PG_dropbehind folio dropped at writeback completion
/// (`folio_end_dropbehind`: folio lock, `folio_unmap_invalidate` removing it
/// from the page cache and LRU, memcg uncharge, free), ns: 0.3 us. Estimate:
/// the same work as reclaiming a clean page (`CpuCosts::reclaim_page_ns`,
/// 0.2 us) plus the folio lock and the ioend's trip through a workqueue.
pub const DROPBEHIND_PAGE_NS: Time = 300;

/// `IOEND_BATCH_SIZE`: most folios in one ioend, to bound completion
/// latency and the loop ending the folios' writeback (fs/iomap/internal.h,
/// checked in `iomap_can_add_to_ioend`, fs/iomap/ioend.c).
pub const IOEND_BATCH_SIZE: u64 = 4096;
/// `BIO_MAX_VECS` (include/linux/bio.h): the bio vectors of the bio an
/// ioend is built in (`iomap_alloc_ioend` allocates it with BIO_MAX_VECS);
/// since an ioend is one bio, `bio_add_folio` failing on a full bio starts
/// a new ioend. One vector per folio (the model's folios are never
/// physically contiguous with each other), so an ioend holds at most this
/// many folios: 1 MiB of order-0 folios.
pub const BIO_MAX_VECS: u64 = 256;
/// Most folios in one ioend: the smaller of the two bounds.
pub const IOEND_MAX_FOLIOS: u64 = if BIO_MAX_VECS < IOEND_BATCH_SIZE {
    BIO_MAX_VECS
} else {
    IOEND_BATCH_SIZE
};

/// An ioend being built or in flight (`struct iomap_ioend`): a contiguous
/// page range written as one or more chained bios, completed as a whole when
/// its last bio completes, in task context on the filesystem's completion
/// workqueue when it needs it (unwritten blocks, PG_dropbehind folios).
struct Ioend {
    start: u64,
    end: u64,
    /// The completion workqueue when the ioend needs task context (unwritten
    /// blocks or PG_dropbehind folios); None: it ends in bio completion.
    wq: Option<Workqueue>,
    /// Folios in it (bounded by [`IOEND_MAX_FOLIOS`]).
    nr_folios: u64,
    /// Bios submitted and not yet completed (the device's requests of its
    /// one bio, which the block layer splits).
    in_flight: u32,
    /// No more bios will be added (`iomap_submit_ioend` done).
    closed: bool,
}

/// The ioend a writepages call is adding to (`wpc->ioend`).
type IoendRef = Rc<RefCell<Ioend>>;

/// Submits the pages `[start, end)` of `inode` (already in writeback state)
/// as bios of at most the device's request size. With a filesystem
/// completion workqueue `wq` the pages join the writepages call's ioend
/// `cur` (a new one unless they continue it), which completes as a whole;
/// otherwise each bio's completion ends its own pages' writeback.
#[allow(clippy::too_many_arguments)]
async fn submit_page_range(
    m: &Rc<Machine>,
    sb: &Rc<SuperBlock>,
    inode: &InodeRef,
    (start, end): (u64, u64),
    wq: Option<&Workqueue>,
    cur: &mut Option<IoendRef>,
    bios: &mut u64,
    flags: BioFlags,
) {
    let Some(dev) = sb.device.clone() else {
        // No device (should not happen for a writeback-capable fs): complete now.
        end_page_writeback(m, inode, start, end);
        return;
    };
    // iomap_can_add_to_ioend: contiguous, of the same kind, and room for
    // another folio (IOEND_MAX_FOLIOS).
    let needs_wq = wq.is_some()
        && (sb.fs.every_ioend_in_task()
            || inode.extents.borrow().has_unwritten(start, end)
            || inode.mapping.borrow().any_dropbehind(start, end));
    let max_pages = (dev.profile().max_request_bytes / PAGE_SIZE).max(1);
    let mut s = start;
    while s < end {
        if let Some(wq) = wq {
            let continues = cur.as_ref().is_some_and(|io| {
                let io = io.borrow();
                io.end == s && io.wq.is_some() == needs_wq && io.nr_folios < IOEND_MAX_FOLIOS
            });
            if !continues {
                close_ioend(m, sb, inode, cur.take());
                m.count_inode_event("iomap_alloc_ioend", inode);
                *cur = Some(Rc::new(RefCell::new(Ioend {
                    start: s,
                    end: s,
                    wq: needs_wq.then(|| wq.clone()),
                    nr_folios: 0,
                    in_flight: 0,
                    closed: false,
                })));
            }
        }
        let room = cur
            .as_ref()
            .map_or(u64::MAX, |io| IOEND_MAX_FOLIOS - io.borrow().nr_folios);
        // Whole folios per bio, at most a request's worth of pages and the
        // folios the ioend has room for: a large folio's writeback ends only
        // when all of its blocks are written (iomap counts them in the
        // folio's `write_bytes_pending`); the device splits the bio into
        // requests of at most max_request_bytes and completes it with the
        // last one.
        let (mut e, mut folios) = (s, 0);
        {
            let map = inode.mapping.borrow();
            while e < end && folios < room && e - s < max_pages {
                e = map.folio_end(e, end);
                folios += 1;
            }
        }
        let e = e.min(end);
        // Each folio is physically contiguous; folios are not with each
        // other: the bio's segments are its folios.
        let bio = Bio::write(inode.disk_base + s * PAGE_SIZE, (e - s) * PAGE_SIZE)
            .with_flags(flags)
            .with_seg_bytes((e - s) * PAGE_SIZE / folios.max(1));
        let wm = Rc::downgrade(m);
        let wsb = Rc::downgrade(sb);
        let ino = inode.clone();
        let ioend = cur.clone();
        if let Some(io) = &ioend {
            let mut io = io.borrow_mut();
            io.end = e;
            io.nr_folios += folios;
            io.in_flight += 1;
        }
        // The folios stay locked while they are added to the bio and the bio
        // is submitted (submission may sleep for a tag): iomap_writepage_map
        // unlocks a folio once it is in an ioend's bio.
        inode.mapping.borrow_mut().lock_range(s, e);
        // Every bio after the call's first pays its own setup and
        // submission (FsCosts::bio_ns).
        let bio_ns = sb.fs.costs().bio_ns;
        if *bios > 0 && bio_ns > 0 {
            m.sched().cpu(bio_ns).await;
        }
        *bios += 1;
        dev.submit_bio(
            bio,
            Box::new(move || {
                let (Some(m), Some(sb)) = (wm.upgrade(), wsb.upgrade()) else {
                    return;
                };
                match ioend {
                    Some(io) => {
                        io.borrow_mut().in_flight -= 1;
                        ioend_maybe_done(&m, &sb, &ino, &io);
                    }
                    None => end_page_writeback(&m, &ino, s, e),
                }
            }),
        )
        .await;
        inode.mapping.borrow_mut().unlock_range(s, e);
        inode.i_wb_wait.wake_up_all();
        s = e;
    }
}

/// Closes the ioend being built (`iomap_submit_ioend`): it completes once
/// its bios have.
fn close_ioend(m: &Rc<Machine>, sb: &Rc<SuperBlock>, inode: &InodeRef, io: Option<IoendRef>) {
    if let Some(io) = io {
        io.borrow_mut().closed = true;
        ioend_maybe_done(m, sb, inode, &io);
    }
}

/// `iomap_writepage_end_bio` of the ioend's last bio: ends its pages'
/// writeback here or hands it to the completion workqueue. An ioend is done
/// exactly once: when it is closed with no bio in flight, or when its last
/// bio completes after it was closed.
fn ioend_maybe_done(m: &Rc<Machine>, sb: &Rc<SuperBlock>, inode: &InodeRef, io: &IoendRef) {
    let io = io.borrow();
    if !io.closed || io.in_flight > 0 {
        return;
    }
    match &io.wq {
        Some(wq) => queue_ioend(m, sb, wq, inode, io.start, io.end),
        None => end_page_writeback(m, inode, io.start, io.end),
    }
}

/// `xfs_end_bio`: puts the completed ioend on the inode's list and queues
/// the inode's completion work.
fn queue_ioend(
    m: &Rc<Machine>,
    sb: &Rc<SuperBlock>,
    wq: &Workqueue,
    inode: &InodeRef,
    start: u64,
    end: u64,
) {
    inode.ioend_list.borrow_mut().push((start, end));
    let work = inode
        .ioend_work
        .borrow_mut()
        .get_or_insert_with(|| {
            let (wm, wsb, wi) = (Rc::downgrade(m), Rc::downgrade(sb), Rc::downgrade(inode));
            Work::new(sb.fs.end_io_work_name(), move || {
                let (wm, wsb, wi) = (wm.clone(), wsb.clone(), wi.clone());
                async move {
                    if let (Some(m), Some(sb), Some(inode)) =
                        (wm.upgrade(), wsb.upgrade(), wi.upgrade())
                    {
                        iomap_end_ioends(&m, &sb, &inode).await;
                    }
                }
            })
        })
        .clone();
    queue_work(wq, &work);
}

/// `xfs_end_io` for one inode: takes the completed ioends, sorts them by
/// offset and merges contiguous ones (`iomap_sort_ioends`,
/// `iomap_ioend_try_merge`), then completes each ([`iomap_end_ioend`]).
async fn iomap_end_ioends(m: &Rc<Machine>, sb: &Rc<SuperBlock>, inode: &InodeRef) {
    let mut list = std::mem::take(&mut *inode.ioend_list.borrow_mut());
    list.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(list.len());
    for (s, e) in list {
        match merged.last_mut() {
            Some(last) if last.1 == s => last.1 = e,
            _ => merged.push((s, e)),
        }
    }
    for (s, e) in merged {
        iomap_end_ioend(m, sb, inode, s, e).await;
    }
}

/// `xfs_end_ioend` for one (merged) ioend: unwritten blocks converted to
/// written in a transaction under the ilock held exclusive, then
/// `iomap_finish_ioends` ends the folios' writeback here, in task context,
/// where PG_dropbehind folios are dropped at once, paying
/// [`DROPBEHIND_PAGE_NS`] per folio.
async fn iomap_end_ioend(m: &Rc<Machine>, sb: &Rc<SuperBlock>, inode: &InodeRef, s: u64, e: u64) {
    let conv = sb
        .fs
        .unwritten_convert_ns(inode.extents.borrow().nr_records());
    if conv > 0 && inode.extents.borrow().has_unwritten(s, e) {
        sb.fs.convert_unwritten(m, sb, inode, (s, e)).await;
        m.count_inode_event("xfs_unwritten_convert", inode);
        m.sim().trace("xfs_unwritten_convert", || {
            format!("ino={} index={s} nr={}", inode.ino, e - s)
        });
    }
    sb.fs.end_ordered_range(m, sb, inode, s, e).await;
    let dropbehind = folio_end_writeback(m, inode, s, e);
    if dropbehind > 0 {
        folio_end_dropbehind(m, inode, s, e, dropbehind).await;
    }
}

/// `folio_end_writeback` for a page range in interrupt context: counters,
/// waiters, and for PG_dropbehind folios the drop by a kworker.
pub fn end_page_writeback(m: &Rc<Machine>, inode: &InodeRef, start: u64, end: u64) {
    let dropbehind = folio_end_writeback(m, inode, start, end);
    if dropbehind > 0 {
        end_dropbehind_work(m, inode, start, end, dropbehind);
    }
}

/// `folio_end_writeback` proper: pages clean (or dirty again), counters,
/// waiters woken. Returns the clean PG_dropbehind pages left to drop.
fn folio_end_writeback(m: &Rc<Machine>, inode: &InodeRef, start: u64, end: u64) -> u64 {
    let (d, dropbehind) = inode.mapping.borrow_mut().end_writeback(start, end);
    account_delta(m.mm(), inode.wb().as_ref(), &d);
    inode.i_wb_wait.wake_up_all();
    m.sim().trace("writeback_end_folio", || {
        format!("ino={} index={start} nr={}", inode.ino, end - start)
    });
    dropbehind
}

/// `folio_end_dropbehind` in task context for `pages` PG_dropbehind folios
/// of `[start, end)`: [`DROPBEHIND_PAGE_NS`] each, then those still clean
/// leave the page cache.
async fn folio_end_dropbehind(m: &Rc<Machine>, inode: &InodeRef, start: u64, end: u64, pages: u64) {
    m.sched().cpu(pages * DROPBEHIND_PAGE_NS).await;
    let d = inode.mapping.borrow_mut().drop_clean_dropbehind(start, end);
    account_delta(m.mm(), inode.wb().as_ref(), &d);
    mem_cgroup_uncharge_freed(m.mm(), inode.memcg.get(), d.cached);
    m.sim().trace("folio_end_dropbehind", || {
        format!("ino={} index={start} nr={}", inode.ino, -d.cached)
    });
}

/// The task-context completion of an I/O with PG_dropbehind folios for a
/// filesystem without a completion workqueue: bio completion runs in
/// interrupt context, where `folio_end_dropbehind` cannot take the folio
/// lock, so the drop runs from a kworker, one task per completed bio.
fn end_dropbehind_work(m: &Rc<Machine>, inode: &InodeRef, start: u64, end: u64, pages: u64) {
    let wm = Rc::downgrade(m);
    let ino = inode.clone();
    m.sched()
        .spawn("kworker/u:dropbehind", CgroupId::ROOT, 0, async move {
            if let Some(m) = wm.upgrade() {
                folio_end_dropbehind(&m, &ino, start, end, pages).await;
            }
        });
}

/// `->writepages` of every modelled filesystem: the generic writepages, then
/// [`Filesystem::data_written`] if it wrote anything (metadata the filesystem
/// must now log or commit).
///
/// [`Filesystem::data_written`]: crate::model::fs::vfs::Filesystem::data_written
pub async fn fs_writepages(
    m: &Rc<Machine>,
    sb: &Rc<SuperBlock>,
    inode: &InodeRef,
    wbc: &mut WritebackControl,
) {
    let before = wbc.nr_to_write;
    generic_writepages(m, sb, inode, wbc).await;
    if wbc.nr_to_write < before {
        sb.fs.data_written(sb);
    }
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
    let per_page = sb.fs.costs().writepage_ns;
    let map_ns = sb.fs.costs().map_blocks_ns;
    let mut first_batch = true;
    let wq = sb.fs.end_io_wq(m, sb);
    let mut ioend: Option<IoendRef> = None;
    let mut bios = 0u64;
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
        account_delta(m.mm(), inode.wb().as_ref(), &delta);
        // iomap_add_to_ioend -> wbc_account_cgroup_owner, folio by folio.
        if wbc.wb.is_some() {
            for &(s, e) in &ranges {
                let owners = inode.mapping.borrow().folio_owners(s, e);
                for (memcg, nr, pages) in owners {
                    wbc_account_cgroup_owner(m, wbc, memcg, nr, pages * PAGE_SIZE);
                }
            }
        }
        let pages: u64 = ranges.iter().map(|(s, e)| e - s).sum();
        let call = if first_batch {
            first_batch = false;
            // The per-call cost besides the per-range block lookup
            // charged below.
            sb.fs.costs().writepages_call_ns.saturating_sub(map_ns)
        } else {
            0
        };
        m.sched().cpu(call + pages * per_page).await;
        for &(s, e) in &ranges {
            map_blocks(m, sb, inode, (s, e), map_ns).await;
            let flags = wbc.write_flags();
            submit_page_range(
                m,
                sb,
                inode,
                (s, e),
                wq.as_ref(),
                &mut ioend,
                &mut bios,
                flags,
            )
            .await;
        }
        wbc.nr_to_write -= pages as i64;
        tagged = tagged.saturating_sub(pages);
        index = ranges.last().map_or(index, |r| r.1);
        if wbc.range_cyclic {
            inode.mapping.borrow_mut().writeback_index = index;
        }
    }
    close_ioend(m, sb, inode, ioend);
    if wbc.range_cyclic && !inode.mapping.borrow().has_dirty() {
        inode.mapping.borrow_mut().writeback_index = 0;
    }
}

/// `xfs_map_blocks` for one contiguous dirty range: a lookup under the ilock
/// held shared, and if the range has delalloc holes, their allocation
/// (`xfs_bmapi_convert_delalloc`, [`Filesystem::convert_delalloc`]: a
/// transaction under the ilock held exclusive, in the flusher's context).
///
/// [`Filesystem::convert_delalloc`]: crate::model::fs::vfs::Filesystem::convert_delalloc
async fn map_blocks(
    m: &Rc<Machine>,
    sb: &Rc<SuperBlock>,
    inode: &InodeRef,
    (s, e): (u64, u64),
    map_ns: Time,
) {
    if map_ns > 0 {
        let ilock = inode.ilock.down_read().await;
        m.sched().cpu(map_ns).await;
        drop(ilock);
    }
    if inode.extents.borrow().needs_alloc(s, e) {
        sb.fs.convert_delalloc(m, sb, inode, (s, e)).await;
    }
}
