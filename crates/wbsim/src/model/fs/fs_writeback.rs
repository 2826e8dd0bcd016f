//! The flusher: fs/fs-writeback.c.
//!
//! `__mark_inode_dirty` puts an inode on its wb's b_dirty and arms the flusher;
//! `wb_workfn` (the wb's delayed work on the "writeback" workqueue) runs queued
//! work items FIFO, then start_all, then periodic (kupdate), then background
//! writeback (`wb_do_writeback`), with the 7.2 RWF_DONTCACHE pass
//! (`wb_check_start_dontcache`) after start_all; `wb_writeback` loops `queue_io` +
//! `writeback_sb_inodes` / `__writeback_inodes_wb`, writing each inode a chunk
//! at a time (`writeback_chunk_size`) and requeueing it by the kernel's rules
//! (`requeue_inode`: b_more_io when the slice was used up, b_dirty via
//! `redirty_tail` when blocked, off the lists when clean). Background and
//! periodic work yield to queued work. s_umount is taken with a trylock per
//! superblock, so umount stalls that superblock's flushing.
//!
//! Cgroup writeback: `inode_attach_wb` binds an inode to its first
//! dirtier's memcg wb; `inode_switch_wbs` (foreign detection) and
//! `cleanup_offline_cgwb` (memcg offline) move inodes to another wb the way
//! 6.18 does it (see the switching section below); `cgroup_writeback_umount`
//! drains switches at umount under the `umount_drain` policy.
//!
//! Foreign-inode detection: `wbc_attach_and_unlock_inode` and
//! `wbc_detach_inode` bracket each inode's writeback round (here and in the
//! `filemap_fdatawrite_wbc` paths of fs/sync.rs and fs/read_write.rs);
//! writepages calls `wbc_account_cgroup_owner` (fs/vfs.rs, beside
//! `WritebackControl`) per run of folios of one owner; the round's winner
//! and I/O time go into the inode's 16-slot history (`WB_FRN_*`), and a
//! foreign majority of it calls `inode_switch_wbs`. Left out: the
//! `inode_foreign_history` tracepoint's full fields; `no_cgroup_owner`
//! is never set (the model has no pageout writeback path).
//!
//! Simplified: `I_DIRTY_TIME` inodes are never created (lazytime is not
//! modelled); `write_inode` costs a fixed CPU time; list_lock is not contended
//! (one flusher per wb touches its lists).

use std::rc::Rc;

use sim::{Time, MSEC, USEC};

use crate::model::fs::inode::{state::*, wb_inode, InodeRef, WbFrn};
use crate::model::fs::vfs::IswDrainRecord;
use crate::model::fs::vfs::Machine;
use crate::model::fs::vfs::SuperBlock;
use crate::model::fs::vfs::{WbcOwner, WritebackControl};
use crate::model::fs::writepages::fs_writepages;
use crate::model::kernel::stats::ViolationObjects;
use crate::model::kernel::workqueue::{flush_workqueue, queue_work, Work};
use crate::model::mm::backing_dev::{wb_get, wb_get_create, wb_put, wb_wakeup, wb_wakeup_delayed};
use crate::model::mm::backing_dev::{IoList, SyncMode, Wb, WbReason, WbWork};
pub use crate::model::mm::memcontrol::wb_memcg_css_id;
use crate::model::mm::page_writeback as throttle;
use crate::model::policy::{UmountDrain, WbCtxAssign};

/// `MIN_WRITEBACK_PAGES`: 4 MiB in pages (fs/fs-writeback.c).
pub const MIN_WRITEBACK_PAGES: i64 = (4 << 20) / 4096;
/// A `writeback_sb_inodes` pass returns to its caller after this much time once
/// it wrote something (`HZ / 10`), ns.
pub const WRITEBACK_SLICE_NS: Time = 100 * MSEC;
/// CPU to write back dirty inode metadata (`write_inode`), ns: ~5 us, a
/// journalled inode update (order of magnitude from ext4/xfs profiles).
pub const WRITE_INODE_NS: Time = 5 * USEC;
/// `dirtytime_expire_interval`: 12 hours, ns.
pub const DIRTYTIME_EXPIRE_NS: Time = 43_200 * 1_000_000_000;

// ------------------------------------------------------------- registration

/// The superblock an inode belongs to.
pub fn inode_sb(m: &Machine, inode: &InodeRef) -> Rc<SuperBlock> {
    m.vfs()
        .super_get(inode.sb_id)
        .expect("inode of an unknown superblock")
}

// ------------------------------------------------------------ waking the flusher

/// `wb_queue_work` lives beside `wb_wakeup` in mm/backing_dev.rs, where
/// memcg's foreign flush (mm/memcontrol.rs) can call it too.
pub use crate::model::mm::backing_dev::wb_queue_work;

/// `wb_start_writeback` (for `wakeup_flusher_threads`): one start_all per wb.
pub fn wb_start_writeback(m: &Rc<Machine>, wb: &Rc<Wb>, reason: WbReason) {
    if !wb.has_dirty_io() {
        return;
    }
    if wb.start_all.get().is_some() {
        return;
    }
    wb.start_all.set(Some(reason));
    wb_wakeup(m.mm(), wb);
}

/// `wakeup_flusher_threads`: start_all on every wb of every bdi.
pub fn wakeup_flusher_threads(m: &Rc<Machine>, reason: WbReason) {
    let bdis = m.mm().bdis().clone();
    for bdi in bdis {
        for wb in &bdi.wb_list() {
            wb_start_writeback(m, wb, reason);
        }
    }
}

// ------------------------------------------------------------ the inode lists

/// `inode_io_list_move_locked`: moves the inode to the head of `list` of `wb`;
/// returns whether the wb's lists just became populated (the flusher needs arming).
pub fn inode_io_list_move_locked(inode: &InodeRef, wb: &Rc<Wb>, list: IoList) -> bool {
    let was = wb.has_dirty_io();
    let mut st = inode.st.borrow_mut();
    let mut lists = wb.lists.borrow_mut();
    if let Some((old, key)) = st.io_list.take() {
        lists.get_mut(old).remove(key);
    }
    let key = lists.get_mut(list).push_head(inode.clone());
    st.io_list = Some((list, key));
    drop(lists);
    drop(st);
    !was && wb.has_dirty_io()
}

/// `inode_io_list_del`: off the wb's lists.
pub fn inode_io_list_del(inode: &InodeRef, wb: &Rc<Wb>) {
    let mut st = inode.st.borrow_mut();
    if let Some((old, key)) = st.io_list.take() {
        wb.lists.borrow_mut().get_mut(old).remove(key);
    }
    st.i_state &= !I_SYNC_QUEUED;
}

/// `redirty_tail_locked`: back to b_dirty's head, with dirtied_when bumped to
/// now if it is older than the newest inode there (keeps b_dirty time-ordered).
pub fn redirty_tail_locked(m: &Machine, inode: &InodeRef, wb: &Rc<Wb>) {
    let newest = wb
        .lists
        .borrow()
        .b_dirty
        .head()
        .map(|e| wb_inode(e).st.borrow().dirtied_when);
    {
        let mut st = inode.st.borrow_mut();
        if let Some(t) = newest {
            if st.dirtied_when < t {
                st.dirtied_when = m.now();
            }
        }
    }
    inode_io_list_move_locked(inode, wb, IoList::Dirty);
    inode.st.borrow_mut().i_state &= !I_SYNC_QUEUED;
}

/// `requeue_io`: to b_more_io, for another turn.
pub fn requeue_io(inode: &InodeRef, wb: &Rc<Wb>) {
    inode_io_list_move_locked(inode, wb, IoList::MoreIo);
}

/// `__mark_inode_dirty`: sets `flags` and, on the first dirtying, stamps
/// dirtied_when, queues the inode on its wb's b_dirty and arms the flusher.
pub fn mark_inode_dirty(m: &Rc<Machine>, inode: &InodeRef, flags: u32) {
    if inode.st.borrow().i_state & flags == flags {
        return;
    }
    let sb = inode_sb(m, inode);
    let wb = inode_attach_wb(m, &sb, inode, m.policies().wb_ctx_assign);
    let (was_dirty, queued, freeing) = {
        let mut st = inode.st.borrow_mut();
        let was_dirty = st.i_state & I_DIRTY != 0;
        st.i_state |= flags;
        (
            was_dirty,
            st.i_state & I_SYNC_QUEUED != 0,
            st.i_state & I_FREEING != 0,
        )
    };
    m.sim().trace("writeback_mark_inode_dirty", || {
        format!("bdi {}: ino={} flags={flags:#x}", wb.name, inode.ino)
    });
    // Queued for writeback by the flusher: it places the inode afterwards.
    if queued || freeing || was_dirty {
        return;
    }
    inode.st.borrow_mut().dirtied_when = m.now();
    let wakeup = inode_io_list_move_locked(inode, &wb, IoList::Dirty);
    if wakeup && sb.bdi.can_writeback {
        wb_wakeup_delayed(m.mm(), &wb);
    }
}

/// `inode_attach_wb`: binds the inode, at its first dirtying, to the wb of
/// the dirtying task's memcg on its writeback context (`wb_get_create`: the
/// context's root wb for the root memcg, a cgroup wb otherwise, created on
/// first use). The context is chosen here, by the filesystem under the
/// `wb_ctx_assign` policy (`fetch_bdi_writeback_ctx()` ->
/// `->get_inode_wb_ctx_idx()` of the parallel-writeback series); it is fixed
/// for the inode's life, the wb may change by switching.
pub fn inode_attach_wb(
    m: &Machine,
    sb: &SuperBlock,
    inode: &InodeRef,
    policy: WbCtxAssign,
) -> Rc<Wb> {
    if let Some(wb) = inode.wb() {
        return wb;
    }
    let nr = sb.bdi.wbs.len();
    let ctx = sb.fs.wb_ctx_for_inode(sb, inode, nr, policy).min(nr - 1);
    inode.wb_ctx.set(ctx);
    let memcg = m.mm().memcgs().from_cgroup(m.sched().current_cgroup());
    let wb = wb_get_create(m.mm(), &sb.bdi, ctx, &memcg);
    wb_get(&wb);
    inode.st.borrow_mut().wb = Some(wb.clone());
    wb
}

/// `inode_cgwb_move_to_attached`: a clean inode leaves the dirty lists; on a
/// cgroup wb it goes to `b_attached` (so an offline memcg's cleanup finds
/// it), on a root wb off every list.
pub fn inode_cgwb_move_to_attached(inode: &InodeRef, wb: &Rc<Wb>) {
    if wb.is_cgwb() {
        inode_io_list_move_locked(inode, wb, IoList::Attached);
        inode.st.borrow_mut().i_state &= !I_SYNC_QUEUED;
    } else {
        inode_io_list_del(inode, wb);
    }
}

// ------------------------------------------------------------ queueing

/// `move_expired_inodes`: from the tail of `from`, every inode dirtied at or
/// before `dirtied_before` goes to the head of `to`, grouped by superblock
/// (oldest superblock group nearest the tail). Returns how many moved.
fn move_expired_inodes(wb: &Rc<Wb>, from: IoList, to: IoList, dirtied_before: Time) -> usize {
    let mut tmp: Vec<InodeRef> = Vec::new();
    loop {
        let tail = wb.lists.borrow().get(from).tail().map(wb_inode);
        let Some(inode) = tail else { break };
        let when = if from == IoList::DirtyTime {
            inode.st.borrow().dirtied_time_when
        } else {
            inode.st.borrow().dirtied_when
        };
        if when > dirtied_before {
            break;
        }
        {
            let mut st = inode.st.borrow_mut();
            let (_, key) = st.io_list.take().expect("on a list");
            wb.lists.borrow_mut().get_mut(from).remove(key);
            st.i_state |= I_SYNC_QUEUED;
        }
        tmp.push(inode);
    }
    let moved = tmp.len();
    // Group by superblock in order of first appearance (oldest first).
    let mut order: Vec<u64> = Vec::new();
    for i in &tmp {
        if !order.contains(&i.sb_id) {
            order.push(i.sb_id);
        }
    }
    for sb in order {
        for inode in tmp.iter().filter(|i| i.sb_id == sb) {
            let key = wb.lists.borrow_mut().get_mut(to).push_head(inode.clone());
            inode.st.borrow_mut().io_list = Some((to, key));
        }
    }
    moved
}

/// `queue_io`: b_more_io, then expired b_dirty inodes, onto b_io.
fn queue_io(m: &Machine, wb: &Rc<Wb>, work: &WbWork, dirtied_before: Time) {
    // list_splice_init(b_more_io, b_io): b_io is empty here; keep the order.
    loop {
        let tail = wb.lists.borrow().b_more_io.tail().map(wb_inode);
        let Some(inode) = tail else { break };
        let mut st = inode.st.borrow_mut();
        let (_, key) = st.io_list.take().expect("on b_more_io");
        let mut lists = wb.lists.borrow_mut();
        lists.b_more_io.remove(key);
        let k = lists.b_io.push_head(inode.clone());
        st.io_list = Some((IoList::Io, k));
    }
    let mut moved = move_expired_inodes(wb, IoList::Dirty, IoList::Io, dirtied_before);
    if !work.for_sync {
        moved += move_expired_inodes(
            wb,
            IoList::DirtyTime,
            IoList::Io,
            m.now().saturating_sub(DIRTYTIME_EXPIRE_NS),
        );
    }
    m.sim().trace("writeback_queue_io", || {
        format!(
            "bdi {}: older={} moved={moved} reason={}",
            wb.name,
            dirtied_before,
            work.reason.name()
        )
    });
}

/// `writeback_chunk_size`: how many pages one inode gets per turn.
pub fn writeback_chunk_size(m: &Machine, wb: &Wb, work: &WbWork) -> i64 {
    if work.sync_mode == SyncMode::All || work.tagged_writepages {
        return i64::MAX;
    }
    let avg_bw = wb.bw.borrow().avg_write_bandwidth as i64;
    let dirty_limit = m.mm().global_domain().dirty_limit as i64;
    // DIRTY_SCOPE = 8.
    let pages = (avg_bw / 2).min(dirty_limit / 8).min(work.nr_pages.get());
    ((pages + MIN_WRITEBACK_PAGES) / MIN_WRITEBACK_PAGES) * MIN_WRITEBACK_PAGES
}

// ------------------------------------------------------------ writing inodes

/// `__writeback_single_inode`: writepages, then the dirty flags are recomputed
/// from the mapping and dirty metadata is written.
async fn writeback_single_inode(
    m: &Rc<Machine>,
    sb: &Rc<SuperBlock>,
    inode: &InodeRef,
    wbc: &mut WritebackControl,
) {
    do_writepages(m, sb, inode, wbc).await;
    let dirty = {
        let mut st = inode.st.borrow_mut();
        let dirty = st.i_state & I_DIRTY;
        st.i_state &= !dirty;
        if inode.mapping.borrow().has_dirty() {
            st.i_state |= I_DIRTY_PAGES;
        }
        dirty
    };
    if dirty & !I_DIRTY_PAGES != 0 {
        m.sched().cpu(WRITE_INODE_NS).await;
    }
}

/// `do_writepages`: the filesystem's writepages, then a lazy bandwidth update.
pub async fn do_writepages(
    m: &Rc<Machine>,
    sb: &Rc<SuperBlock>,
    inode: &InodeRef,
    wbc: &mut WritebackControl,
) {
    fs_writepages(m, sb, inode, wbc).await;
    if let Some(wb) = inode.wb() {
        throttle::wb_update_bandwidth_if_due(m.mm(), &wb);
    }
}

/// `requeue_inode`: where the inode goes after its turn.
fn requeue_inode(
    m: &Machine,
    inode: &InodeRef,
    wb: &Rc<Wb>,
    wbc: &WritebackControl,
    dirtied_before: Time,
) {
    let (freeing, dirty) = {
        let st = inode.st.borrow();
        (st.i_state & I_FREEING != 0, st.i_state & I_DIRTY != 0)
    };
    if freeing {
        return;
    }
    // Sync livelock prevention.
    if dirty && (wbc.sync_mode == SyncMode::All || wbc.tagged_writepages) {
        inode.st.borrow_mut().dirtied_when = m.now();
    }
    if wbc.pages_skipped > 0 {
        if dirty {
            redirty_tail_locked(m, inode, wb);
        } else {
            inode_io_list_del(inode, wb);
        }
        return;
    }
    if inode.mapping.borrow().has_dirty() {
        let dirtied_after = inode.st.borrow().dirtied_when > dirtied_before;
        if wbc.nr_to_write <= 0 && !dirtied_after {
            requeue_io(inode, wb);
        } else {
            redirty_tail_locked(m, inode, wb);
        }
    } else if dirty {
        redirty_tail_locked(m, inode, wb);
    } else if inode.st.borrow().i_state & I_DIRTY_TIME != 0 {
        inode.st.borrow_mut().dirtied_when = m.now();
        inode_io_list_move_locked(inode, wb, IoList::DirtyTime);
        inode.st.borrow_mut().i_state &= !I_SYNC_QUEUED;
    } else {
        // Clean: off the writeback lists, or onto b_attached of a cgwb.
        inode_cgwb_move_to_attached(inode, wb);
    }
}

/// `writeback_sb_inodes`: writes inodes of `sb` from b_io's tail; returns pages
/// written. Stops at an inode of another superblock (unless the work is for
/// one sb), after 100 ms once something was written, or when the work's
/// budget is spent.
async fn writeback_sb_inodes(
    m: &Rc<Machine>,
    sb: &Rc<SuperBlock>,
    wb: &Rc<Wb>,
    work: &WbWork,
) -> i64 {
    let start = m.now();
    let mut total: i64 = 0;
    let dirtied_before = if work.for_kupdate {
        m.now()
            .saturating_sub(m.mm().dirty_params().dirty_expire_interval_ns())
    } else {
        m.now()
    };
    loop {
        let tail = wb.lists.borrow().b_io.tail().map(wb_inode);
        let Some(inode) = tail else { break };
        if inode.sb_id != sb.id {
            if work.sb.is_some() {
                redirty_tail_locked(m, &inode, wb);
                continue;
            }
            break;
        }
        let st = inode.st.borrow().i_state;
        if st & (I_NEW | I_FREEING | I_WILL_FREE) != 0 {
            redirty_tail_locked(m, &inode, wb);
            continue;
        }
        if st & I_SYNC != 0 && work.sync_mode != SyncMode::All {
            requeue_io(&inode, wb);
            continue;
        }
        if st & I_SYNC != 0 {
            let i2 = inode.clone();
            inode
                .i_wb_wait
                .wait_event(m.sim(), move || !i2.has(I_SYNC))
                .await;
            continue;
        }
        inode.st.borrow_mut().i_state |= I_SYNC;
        let write_chunk = writeback_chunk_size(m, wb, work);
        let mut wbc = WritebackControl {
            nr_to_write: write_chunk,
            pages_skipped: 0,
            sync_mode: work.sync_mode,
            tagged_writepages: work.tagged_writepages,
            for_kupdate: work.for_kupdate,
            for_background: work.for_background,
            for_sync: work.for_sync,
            range_cyclic: work.range_cyclic,
            range_start: 0,
            range_end: u64::MAX,
            reason: work.reason,
            wb: None,
            owner: WbcOwner::default(),
            no_cgroup_owner: false,
        };
        wbc_attach_and_unlock_inode(m, &mut wbc, &inode);
        writeback_single_inode(m, sb, &inode, &mut wbc).await;
        wbc_detach_inode(m, &mut wbc, &inode);
        let wrote = write_chunk.saturating_sub(wbc.nr_to_write).max(0);
        work.nr_pages.set(work.nr_pages.get().saturating_sub(wrote));
        total += wrote;
        wb.pages_written_total
            .set(wb.pages_written_total.get() + wrote as u64);
        // The inode may have switched wbs meanwhile: requeue on its current one.
        let cur_wb = inode.wb().unwrap_or_else(|| wb.clone());
        requeue_inode(m, &inode, &cur_wb, &wbc, dirtied_before);
        // inode_sync_complete.
        inode.st.borrow_mut().i_state &= !I_SYNC;
        inode.i_wb_wait.wake_up_all();
        if total > 0 {
            if m.now() - start >= WRITEBACK_SLICE_NS {
                break;
            }
            if work.nr_pages.get() <= 0 {
                break;
            }
        }
    }
    total
}

/// `__writeback_inodes_wb`: every superblock with inodes on b_io, s_umount
/// taken with a trylock (on failure the inode goes back to b_dirty).
async fn writeback_inodes_wb(m: &Rc<Machine>, wb: &Rc<Wb>, work: &WbWork) -> i64 {
    let start = m.now();
    let mut wrote = 0;
    loop {
        let tail = wb.lists.borrow().b_io.tail().map(wb_inode);
        let Some(inode) = tail else { break };
        let sb = inode_sb(m, &inode);
        // super_trylock_shared: s_umount read trylock, and the sb must be live.
        let guard = sb.s_umount.down_read_trylock();
        let Some(guard) = guard.filter(|_| sb.active()) else {
            redirty_tail_locked(m, &inode, wb);
            continue;
        };
        wrote += writeback_sb_inodes(m, &sb, wb, work).await;
        drop(guard);
        if wrote > 0 {
            if m.now() - start >= WRITEBACK_SLICE_NS {
                break;
            }
            if work.nr_pages.get() <= 0 {
                break;
            }
        }
    }
    wrote
}

/// `wb_writeback`: the main loop of one work item; returns pages written.
pub async fn wb_writeback(m: &Rc<Machine>, wb: &Rc<Wb>, work: &WbWork) -> i64 {
    let nr_pages = work.nr_pages.get();
    let mut dirtied_before = m.now();
    loop {
        if work.nr_pages.get() <= 0 {
            break;
        }
        // Background and periodic writeback yield to explicit work.
        if (work.for_background || work.for_kupdate) && !wb.work_list.borrow().is_empty() {
            break;
        }
        if work.for_background && !throttle::wb_over_bg_thresh(m.mm(), wb) {
            break;
        }
        m.sim().trace("writeback_start", || {
            format!(
                "bdi {}: nr_pages={} sync_mode={} kupdate={} background={} reason={}",
                wb.name,
                work.nr_pages.get(),
                (work.sync_mode == SyncMode::All) as u8,
                work.for_kupdate as u8,
                work.for_background as u8,
                work.reason.name()
            )
        });
        if wb.lists.borrow().b_io.is_empty() {
            // Kupdate and background work take every inode due now (they
            // yield to other work, which is their livelock avoidance); other
            // work keeps the time it started, so inodes redirtied since are
            // not written again and sync cannot be livelocked by a writer.
            if work.for_kupdate {
                dirtied_before = m
                    .now()
                    .saturating_sub(m.mm().dirty_params().dirty_expire_interval_ns());
            } else if work.for_background {
                dirtied_before = m.now();
            }
            queue_io(m, wb, work, dirtied_before);
        }
        let progress = match work.sb {
            Some(sb_id) => {
                let sb = m.vfs().super_get(sb_id);
                match sb {
                    Some(sb) => writeback_sb_inodes(m, &sb, wb, work).await,
                    None => 0,
                }
            }
            None => writeback_inodes_wb(m, wb, work).await,
        };
        m.sim().trace("writeback_written", || {
            format!(
                "bdi {}: nr_pages={} progress={progress} reason={}",
                wb.name,
                work.nr_pages.get(),
                work.reason.name()
            )
        });
        if progress > 0 {
            continue;
        }
        let more = wb.lists.borrow().b_more_io.tail().map(wb_inode);
        let Some(inode) = more else { break };
        // Nothing written: wait for an inode under writeback to be available.
        m.sim()
            .trace("writeback_wait", || format!("bdi {}", wb.name));
        if inode.has(I_SYNC) {
            let i2 = inode.clone();
            inode
                .i_wb_wait
                .wait_event(m.sim(), move || !i2.has(I_SYNC))
                .await;
        } else {
            // Nothing to wait for: avoid spinning (the kernel's wait returns
            // at once too, then the loop retries).
            m.sim().sleep(MSEC).await;
        }
    }
    nr_pages - work.nr_pages.get()
}

/// `get_nr_dirty_pages`: dirty pages plus dirty inodes.
fn get_nr_dirty_pages(m: &Machine) -> i64 {
    m.mm().vm().nr_file_dirty as i64
}

/// `wb_do_writeback`: queued work, then start_all, kupdate and background.
async fn wb_do_writeback(m: &Rc<Machine>, wb: &Rc<Wb>) -> i64 {
    wb.running.set(true);
    let mut wrote = 0;
    loop {
        let work = wb.work_list.borrow_mut().pop_front();
        let Some(work) = work else { break };
        m.sim().trace("writeback_exec", || {
            format!(
                "bdi {}: nr_pages={} reason={}",
                wb.name,
                work.nr_pages.get(),
                work.reason.name()
            )
        });
        wrote += wb_writeback(m, wb, &work).await;
        if let Some(done) = &work.done {
            done.put();
        }
    }
    // wb_check_start_all.
    if let Some(reason) = wb.start_all.get() {
        let nr = get_nr_dirty_pages(m);
        if nr > 0 {
            let mut w = WbWork::new(wb_split_bdi_pages(m, wb, nr), SyncMode::None, reason);
            w.range_cyclic = true;
            wrote += wb_writeback(m, wb, &w).await;
        }
        wb.start_all.set(None);
    }
    // wb_check_start_dontcache (7.2).
    wrote += wb_check_start_dontcache(m, wb).await;
    // wb_check_old_data_flush (kupdate).
    let interval = m.mm().dirty_params().dirty_writeback_interval_ns();
    if interval > 0 && m.now() >= wb.last_old_flush.get() + interval {
        wb.last_old_flush.set(m.now());
        let nr = get_nr_dirty_pages(m);
        if nr > 0 {
            let mut w = WbWork::new(nr, SyncMode::None, WbReason::Periodic);
            w.for_kupdate = true;
            w.range_cyclic = true;
            wrote += wb_writeback(m, wb, &w).await;
        }
    }
    // wb_check_background_flush.
    if throttle::wb_over_bg_thresh(m.mm(), wb) {
        let mut w = WbWork::new(i64::MAX, SyncMode::None, WbReason::Background);
        w.for_background = true;
        w.range_cyclic = true;
        wrote += wb_writeback(m, wb, &w).await;
    }
    wb.running.set(false);
    wrote
}

/// `wb_check_start_dontcache` (the 7.2 RWF_DONTCACHE kick): if a writer set
/// the wb's start bit, clear it, take the wb's DONTCACHE_DIRTY count and write
/// that many pages, WB_SYNC_NONE, from the oldest dirty inodes of the wb
/// (`queue_io` moves b_dirty from its tail, oldest first; any dirty inode, not
/// only RWF_DONTCACHE ones), reason DONTCACHE. The bit is cleared before the
/// counter is read, so a writer that adds pages after the read sets it again
/// and wakes the flusher: no kick is lost, and kicks that arrive while the bit
/// is set are coalesced into one pass. Returns pages written.
pub async fn wb_check_start_dontcache(m: &Rc<Machine>, wb: &Rc<Wb>) -> i64 {
    if !wb.start_dontcache.replace(false) {
        return 0;
    }
    let nr = wb.dontcache_dirty.replace(0);
    if nr == 0 {
        return 0;
    }
    let mut w = WbWork::new(nr as i64, SyncMode::None, WbReason::Dontcache);
    w.range_cyclic = true;
    wb_writeback(m, wb, &w).await
}

/// `wb_split_bdi_pages`: a wb's share of `nr_pages` by write bandwidth among
/// the wbs of its bdi (all of it with one wb).
fn wb_split_bdi_pages(m: &Machine, wb: &Wb, nr_pages: i64) -> i64 {
    let bdis = m.mm().bdis();
    let Some(bdi) = bdis.iter().find(|b| b.owns(wb)) else {
        return nr_pages;
    };
    let wbs = bdi.wb_list();
    if wbs.len() == 1 || nr_pages == i64::MAX {
        return nr_pages;
    }
    let tot: u64 = wbs.iter().map(|w| w.bw.borrow().avg_write_bandwidth).sum();
    if tot == 0 {
        return nr_pages;
    }
    let this = wb.bw.borrow().avg_write_bandwidth;
    ((nr_pages as i128 * this as i128 + tot as i128 - 1) / tot as i128) as i64
}

/// `wb_workfn`: the flusher's work function.
pub async fn wb_workfn(m: &Rc<Machine>, wb: &Rc<Wb>) {
    let me = m.sim().current_task();
    let cpu0 = m.sched().task_stats(me).run_ns;
    wb.flusher_running.set(Some((me, cpu0)));
    loop {
        let pages = wb_do_writeback(m, wb).await;
        m.sim()
            .trace("writeback_pages_written", || format!("{pages}"));
        // A kick that set the start bit during the pass re-runs the loop
        // (its wb_wakeup found the work running).
        if wb.work_list.borrow().is_empty() && !wb.start_dontcache.get() {
            break;
        }
    }
    let cpu = m.sched().task_stats(me).run_ns - cpu0;
    wb.flusher_cpu_ns.set(wb.flusher_cpu_ns.get() + cpu);
    wb.flusher_running.set(None);
    if !wb.work_list.borrow().is_empty() {
        wb_wakeup(m.mm(), wb);
    } else if wb.has_dirty_io() && m.mm().dirty_params().dirty_writeback_interval_ns() > 0 {
        wb_wakeup_delayed(m.mm(), wb);
    }
}

// ------------------------------------------------------------ foreign inodes

/// `WB_FRN_TIME_SHIFT`: foreign-detection time unit, 1 s = 2^13
/// (fs/fs-writeback.c).
pub const WB_FRN_TIME_SHIFT: u32 = 13;
/// `WB_FRN_TIME_AVG_SHIFT`: the average keeps 7/8 of itself per round.
pub const WB_FRN_TIME_AVG_SHIFT: u32 = 3;
/// `WB_FRN_TIME_CUT_DIV`: rounds under avg / 8 do not vote.
pub const WB_FRN_TIME_CUT_DIV: u64 = 8;
/// `WB_FRN_TIME_PERIOD`: the history covers 2 s of I/O time.
pub const WB_FRN_TIME_PERIOD: u64 = 2 * (1 << WB_FRN_TIME_SHIFT);
/// `WB_FRN_HIST_SLOTS`: the history is 16 bits.
pub const WB_FRN_HIST_SLOTS: u64 = 16;
/// `WB_FRN_HIST_UNIT`: one slot is 1/16 of the period (125 ms).
pub const WB_FRN_HIST_UNIT: u64 = WB_FRN_TIME_PERIOD / WB_FRN_HIST_SLOTS;
/// `WB_FRN_HIST_THR_SLOTS`: switch when more than 8 slots are foreign.
pub const WB_FRN_HIST_THR_SLOTS: u32 = (WB_FRN_HIST_SLOTS / 2) as u32;
/// `WB_FRN_HIST_MAX_SLOTS`: one round shifts in at most 5 slots.
pub const WB_FRN_HIST_MAX_SLOTS: u64 = WB_FRN_HIST_THR_SLOTS as u64 / 2 + 1;

/// `inode_cgwb_enabled`: the bdi writes back (tmpfs does not) and the
/// filesystem supports cgroup writeback (every modelled one with a bdi
/// that writes back: xfs, ext4 and btrfs set SB_I_CGROUPWB; the memory
/// and io controllers are taken to be on cgroup v2).
fn inode_cgwb_enabled(sb: &SuperBlock) -> bool {
    sb.bdi.can_writeback
}

/// `wbc_attach_and_unlock_inode`: the writeback round of `inode` starts;
/// `wbc` records its wb and the last round's winner for owner accounting.
/// A wb that is dying while its memcg is not (the kernel's blkcg
/// association change) is switched away from at once.
pub fn wbc_attach_and_unlock_inode(m: &Rc<Machine>, wbc: &mut WritebackControl, inode: &InodeRef) {
    let Some(sb) = m.vfs().super_get(inode.sb_id) else {
        return;
    };
    if !inode_cgwb_enabled(&sb) {
        return;
    }
    let Some(wb) = inode.wb() else { return };
    let id = wb_memcg_css_id(&wb);
    wbc.owner = WbcOwner {
        wb_id: id,
        wb_lcand_id: inode.frn.get().winner,
        ..WbcOwner::default()
    };
    wb_get(&wb);
    let dying = wb.killed.get();
    let memcg_dying = m.mm().memcgs().get(id).is_none_or(|mc| !mc.online());
    wbc.wb = Some(wb);
    if dying && !memcg_dying {
        inode_switch_wbs(m, inode, id);
    }
}

/// `wbc_attach_fdatawrite_inode` (the `filemap_fdatawrite_wbc` path:
/// fsync, `file_write_and_wait_range`, the RWF_DONTCACHE inline flush):
/// binds the inode to a wb if it has none, then
/// [`wbc_attach_and_unlock_inode`].
pub fn wbc_attach_fdatawrite_inode(m: &Rc<Machine>, wbc: &mut WritebackControl, inode: &InodeRef) {
    let sb = inode_sb(m, inode);
    inode_attach_wb(m, &sb, inode, m.policies().wb_ctx_assign);
    wbc_attach_and_unlock_inode(m, wbc, inode);
}

/// `wbc_detach_inode`: the writeback round of `inode` is over. The round's
/// winner is the current wb, the last winner or the majority candidate,
/// whichever wrote the most bytes; its I/O time (bytes over the wb's
/// average write bandwidth, in 1/8192 s) is folded into the inode's
/// running average; a round of at least average / 8 shifts up to 5 slots
/// of 125 ms into the 16-slot history, set when the winner is foreign.
/// More than 8 foreign slots give the switch verdict: the inode switches
/// to the winner's wb (`inode_switch_wbs`).
pub fn wbc_detach_inode(m: &Rc<Machine>, wbc: &mut WritebackControl, inode: &InodeRef) {
    let Some(wb) = wbc.wb.take() else { return };
    let o = wbc.owner;
    let WbFrn {
        avg_time: avg0,
        mut history,
        ..
    } = inode.frn.get();
    let (max_id, max_bytes) = if o.wb_bytes >= o.wb_lcand_bytes && o.wb_bytes >= o.wb_tcand_bytes {
        (o.wb_id, o.wb_bytes)
    } else if o.wb_lcand_bytes >= o.wb_tcand_bytes {
        (o.wb_lcand_id, o.wb_lcand_bytes)
    } else {
        (o.wb_tcand_id, o.wb_tcand_bytes)
    };
    let bw = wb.bw.borrow().avg_write_bandwidth.max(1);
    let max_time =
        ((max_bytes / crate::model::mm::vmstat::PAGE_SIZE) << WB_FRN_TIME_SHIFT).div_ceil(bw);
    let mut avg_time = u64::from(avg0);
    if avg_time > 0 {
        avg_time = (avg_time + (max_time >> WB_FRN_TIME_AVG_SHIFT))
            .saturating_sub(avg_time >> WB_FRN_TIME_AVG_SHIFT);
    } else {
        avg_time = max_time; // immediate catch up on first run
    }
    if max_time >= avg_time / WB_FRN_TIME_CUT_DIV {
        let slots = max_time
            .div_ceil(WB_FRN_HIST_UNIT)
            .min(WB_FRN_HIST_MAX_SLOTS) as u32;
        history = ((u32::from(history)) << slots) as u16;
        if o.wb_id != max_id {
            history |= ((1u32 << slots) - 1) as u16;
        }
        if history != 0 {
            m.sim().trace("inode_foreign_history", || {
                format!(
                    "ino={} cgroup_ino={} history={history:#06x}",
                    inode.ino, o.wb_id
                )
            });
        }
        if history.count_ones() > WB_FRN_HIST_THR_SLOTS {
            inode_switch_wbs(m, inode, max_id);
        }
    }
    inode.frn.set(WbFrn {
        winner: max_id,
        avg_time: avg_time.min(u64::from(u16::MAX)) as u16,
        history,
    });
    wb_put(m.mm(), &wb);
}

// ------------------------------------------------------------ inode wb switching

/// `WB_FRN_MAX_IN_FLIGHT`: foreign-inode switches are not started while more
/// than this many switches are in flight machine-wide (fs/fs-writeback.c).
pub const WB_FRN_MAX_IN_FLIGHT: u64 = 1024;

/// `WB_MAX_INODES_PER_ISW`: inodes one switch context carries,
/// `(1024 - sizeof(struct inode_switch_wbs_context)) / sizeof(struct inode *)`
/// with 6.18's context (an llist_node and the new wb pointer, 16 bytes on
/// 64-bit) = 126.
pub const WB_MAX_INODES_PER_ISW: usize = (1024 - 16) / 8;

/// CPU to prepare one inode for a switch (`inode_prepare_wbs_switch`: i_lock,
/// flag checks, `__iget`), ns: 0.1 us. Estimate: a few uncontended atomic
/// operations and cache misses.
pub const ISW_PREPARE_INODE_NS: Time = 100;

/// CPU to switch one inode (`inode_do_switch_wbs`: i_lock, both list_locks,
/// the xarray walks over dirty and writeback-tagged folios moving their wb
/// counts, the list move), ns: 1 us plus [`ISW_SWITCH_PAGE_NS`] per tagged
/// page. Estimate: spinlocks and tagged-xarray walks on a small mapping.
pub const ISW_SWITCH_INODE_NS: Time = USEC;

/// CPU per dirty or writeback page moved by a switch (one tagged xarray
/// entry and two percpu counter updates), ns: 0.05 us. Estimate.
pub const ISW_SWITCH_PAGE_NS: Time = 50;

/// CPU of `iput` of a switched inode (not the last reference), ns: 0.1 us.
/// Estimate: an atomic decrement and the i_lock.
pub const ISW_IPUT_NS: Time = 100;

/// `struct inode_switch_wbs_context` (6.18): the inodes moving to `new_wb`.
pub struct InodeSwitchWbsContext {
    /// The wb the inodes move to (a reference is held).
    pub new_wb: Rc<Wb>,
    /// The inodes, each with I_WB_SWITCH set and a reference held.
    pub inodes: Vec<InodeRef>,
}

/// `inode_prepare_wbs_switch`: whether `inode` may switch to `new_wb`; if so
/// marks it I_WB_SWITCH and takes a reference. Under `umount_drain = per_sb`
/// the superblock's in-flight counter is pinned before the SB_ACTIVE check
/// (after a lockless SB_ACTIVE check that skips dying superblocks) and
/// unpinned on refusal; the caller's switch unpins after its `iput`.
pub fn inode_prepare_wbs_switch(m: &Machine, inode: &InodeRef, new_wb: &Rc<Wb>) -> bool {
    let Some(sb) = m.vfs().super_get(inode.sb_id) else {
        return false;
    };
    let per_sb = m.policies().umount_drain == UmountDrain::PerSb;
    if per_sb {
        // Lockless check: a dying superblock takes no new pins.
        if !sb.active() {
            return false;
        }
        sb.isw_pin();
    }
    // smp_mb(): pairs with the barrier in cgroup_writeback_umount.
    let ok = {
        let st = inode.st.borrow();
        sb.active()
            && st.i_state & (I_WB_SWITCH | I_FREEING | I_WILL_FREE) == 0
            && st.wb.as_ref().is_none_or(|w| w.id != new_wb.id)
    };
    if !ok {
        if per_sb {
            sb.isw_unpin(m);
        }
        return false;
    }
    let mut st = inode.st.borrow_mut();
    st.i_state |= I_WB_SWITCH;
    st.i_count += 1; // __iget
    true
}

/// The bdi `wb` belongs to, while it is registered.
fn wb_bdi(m: &Machine, wb: &Wb) -> Option<Rc<crate::model::mm::backing_dev::Bdi>> {
    m.mm()
        .bdis()
        .iter()
        .find(|b| b.id == wb.bdi_id.get())
        .cloned()
}

/// `wb_queue_isw`: puts the context on the target wb's lock-free list and
/// queues that wb's switch work on `isw_wq` (one work item per target wb).
fn wb_queue_isw(m: &Rc<Machine>, isw: InodeSwitchWbsContext) {
    let wb = isw.new_wb.clone();
    let first = {
        let mut l = wb.switch_ctxs.borrow_mut();
        l.push(Rc::new(isw));
        l.len() == 1
    };
    // llist_add() returns true when the list was empty: only then is the
    // work queued (it takes the whole list when it runs).
    if !first {
        return;
    }
    let work = wb.switch_work.get_or_init(|| {
        let (wm, ww) = (Rc::downgrade(m), Rc::downgrade(&wb));
        Work::new(&format!("isw:{}", wb.name), move || {
            let (wm, ww) = (wm.clone(), ww.clone());
            async move {
                if let (Some(m), Some(wb)) = (wm.upgrade(), ww.upgrade()) {
                    inode_switch_wbs_work_fn(&m, &wb).await;
                }
            }
        })
    });
    queue_work(m.vfs().isw_wq(), work);
}

/// `inode_switch_wbs` (foreign-inode detection): switches one inode to the
/// wb of memcg `new_memcg`, unless a switch of it is already running or
/// more than [`WB_FRN_MAX_IN_FLIGHT`] are in flight.
pub fn inode_switch_wbs(m: &Rc<Machine>, inode: &InodeRef, new_memcg: u64) {
    if inode.has(I_WB_SWITCH) || m.vfs().isw_nr_in_flight() > WB_FRN_MAX_IN_FLIGHT {
        return;
    }
    let Some(old) = inode.wb() else { return };
    let Some(bdi) = wb_bdi(m, &old) else { return };
    m.vfs().isw_nr_in_flight_add(1);
    // css_from_id + css_tryget: a memcg that is gone drops the switch; so
    // does an offline one (wb_get_create fails: its cgwb was killed and
    // left the cgwb tree, and cgwb_create refuses a memcg whose cgwb list
    // is shut).
    let memcg = match m.mm().memcgs().get(new_memcg) {
        Some(mc) if mc.online() => mc,
        _ => {
            m.vfs().isw_nr_in_flight_add(-1);
            m.sim().trace("inode_switch_wbs_dropped", || {
                format!("ino={} memcg {new_memcg} offline or gone", inode.ino)
            });
            return;
        }
    };
    let new_wb = wb_get_create(m.mm(), &bdi, inode.wb_ctx.get(), &memcg);
    let _rcu = m.rcu().rcu_read_lock();
    if !inode_prepare_wbs_switch(m, inode, &new_wb) {
        m.vfs().isw_nr_in_flight_add(-1);
        return;
    }
    wb_get(&new_wb);
    wb_queue_isw(
        m,
        InodeSwitchWbsContext {
            new_wb,
            inodes: vec![inode.clone()],
        },
    );
}

/// `cleanup_offline_cgwb`: switches up to [`WB_MAX_INODES_PER_ISW`] inodes
/// attached to the killed cgwb `wb` (`b_attached`, then `b_dirty_time`) to
/// the wb of the nearest online ancestor memcg, as one switch context.
/// Returns whether more remain (the caller calls again).
pub async fn cleanup_offline_cgwb(m: &Rc<Machine>, wb: Rc<Wb>) -> bool {
    let Some(bdi) = wb_bdi(m, &wb) else {
        return false;
    };
    m.vfs().isw_nr_in_flight_add(1);
    let memcg = m.mm().memcgs().nearest_online(wb.memcg_id.get());
    let new_wb = wb_get_create(m.mm(), &bdi, wb.ctx, &memcg);
    let mut inodes = Vec::new();
    let mut restart = false;
    let mut scanned = 0u64;
    {
        let _rcu = m.rcu().rcu_read_lock();
        for list in [IoList::Attached, IoList::DirtyTime] {
            let cands: Vec<InodeRef> = wb
                .lists
                .borrow()
                .get(list)
                .iter_from_tail()
                .map(wb_inode)
                .collect();
            for inode in cands {
                scanned += 1;
                if !inode_prepare_wbs_switch(m, &inode, &new_wb) {
                    continue;
                }
                inodes.push(inode);
                if inodes.len() >= WB_MAX_INODES_PER_ISW - 1 {
                    restart = true;
                    break;
                }
            }
            if restart {
                break;
            }
        }
        if inodes.is_empty() {
            m.vfs().isw_nr_in_flight_add(-1);
        } else {
            wb_get(&new_wb);
            m.sim().trace("cleanup_offline_cgwb", || {
                format!(
                    "wb {} -> {}: {} inode(s)",
                    wb.name,
                    new_wb.name,
                    inodes.len()
                )
            });
            wb_queue_isw(m, InodeSwitchWbsContext { new_wb, inodes });
        }
    }
    m.sched().cpu(scanned * ISW_PREPARE_INODE_NS).await;
    restart
}

/// `inode_switch_wbs_work_fn` (6.18 with the 2026 use-after-free fix,
/// commit 6689f01d, which removed the loop): the switch work of target wb
/// `new_wb` takes the whole list of contexts, waits one grace period for the
/// batch (every stat update that saw the old wb under RCU is done and
/// I_WB_SWITCH is visible), and switches them. Contexts added meanwhile
/// queue the work again.
pub async fn inode_switch_wbs_work_fn(m: &Rc<Machine>, new_wb: &Rc<Wb>) {
    let list: Vec<Rc<dyn std::any::Any>> = std::mem::take(&mut *new_wb.switch_ctxs.borrow_mut());
    if list.is_empty() {
        return;
    }
    wb_get(new_wb);
    m.rcu().synchronize_rcu().await;
    for e in list {
        let isw = e
            .downcast::<InodeSwitchWbsContext>()
            .unwrap_or_else(|_| unreachable!("switch lists hold switch contexts"));
        process_inode_switch_wbs(m, new_wb, &isw).await;
    }
    wb_put(m.mm(), new_wb);
}

/// `process_inode_switch_wbs`: under `wb_switch_rwsem` (read), moves each
/// inode of the context to `new_wb` (`inode_do_switch_wbs`), then drops the
/// inode references (`iput`), the per-superblock pins and the global
/// in-flight count.
async fn process_inode_switch_wbs(m: &Rc<Machine>, new_wb: &Rc<Wb>, isw: &InodeSwitchWbsContext) {
    let bdi = wb_bdi(m, new_wb);
    let guard = match &bdi {
        Some(b) => Some(b.wb_switch_rwsem.down_read().await),
        None => None,
    };
    let mut pages = 0u64;
    let mut switched = 0u64;
    for inode in &isw.inodes {
        // The invariant: nothing touches an inode of a superblock whose
        // teardown (evict_inodes onwards) has begun.
        match m.vfs().super_get(inode.sb_id) {
            Some(sb) if !sb.isw_torn_down() => {}
            _ => m.violation(
                "isw_after_teardown",
                ViolationObjects {
                    superblock: Some(inode.sb_id),
                    inodes: vec![inode.ino],
                    wb: Some(new_wb.id),
                    memcg: Some(new_wb.memcg_id.get()),
                    ..ViolationObjects::default()
                },
                format!(
                    "inode wb switch touched inode {} of superblock {} after its teardown \
                     (switching to wb {}, memcg {})",
                    inode.ino,
                    inode.sb_id,
                    new_wb.id,
                    new_wb.memcg_id.get()
                ),
            ),
        }
        pages += inode_do_switch_wbs(m, inode, new_wb);
        switched += 1;
    }
    m.sched()
        .cpu(switched * ISW_SWITCH_INODE_NS + pages * ISW_SWITCH_PAGE_NS)
        .await;
    drop(guard);
    m.sim().trace("inode_switch_wbs", || {
        format!(
            "new_wb {}: {} inode(s), {} page(s)",
            new_wb.name, switched, pages
        )
    });
    for inode in &isw.inodes {
        m.sched().cpu(ISW_IPUT_NS).await;
        {
            let mut st = inode.st.borrow_mut();
            st.i_count = st.i_count.saturating_sub(1); // iput
        }
        if m.policies().umount_drain == UmountDrain::PerSb {
            if let Some(sb) = m.vfs().super_get(inode.sb_id) {
                sb.isw_unpin(m);
            }
        }
    }
    wb_put(m.mm(), new_wb);
    m.vfs().isw_nr_in_flight_add(-1);
    m.vfs().isw_record_switched(switched);
}

/// `inode_do_switch_wbs`: moves the inode's dirty and writeback page counts
/// and its list membership from its wb to `new_wb`, rebinds it and clears
/// I_WB_SWITCH. An inode being freed is left alone. Returns the pages moved.
fn inode_do_switch_wbs(m: &Machine, inode: &InodeRef, new_wb: &Rc<Wb>) -> u64 {
    let Some(old_wb) = inode.wb() else {
        inode.st.borrow_mut().i_state &= !I_WB_SWITCH;
        return 0;
    };
    if inode.has(I_FREEING) || old_wb.id == new_wb.id {
        inode.st.borrow_mut().i_state &= !I_WB_SWITCH;
        return 0;
    }
    let (dirty, wback) = {
        let mp = inode.mapping.borrow();
        (mp.nr_dirty(), mp.nr_writeback())
    };
    {
        let mut o = old_wb.stat.borrow_mut();
        o.reclaimable = o.reclaimable.saturating_sub(dirty);
        o.writeback = o.writeback.saturating_sub(wback);
        let mut n = new_wb.stat.borrow_mut();
        n.reclaimable += dirty;
        n.writeback += wback;
    }
    let on = inode.st.borrow().io_list.map(|(l, _)| l);
    inode_io_list_del(inode, &old_wb);
    inode.st.borrow_mut().wb = Some(new_wb.clone());
    match on {
        // Kept in dirtied_when order on the new b_dirty (here: at its head,
        // the newest end).
        Some(IoList::Dirty | IoList::Io | IoList::MoreIo)
            if inode_io_list_move_locked(inode, new_wb, IoList::Dirty) =>
        {
            wb_wakeup_delayed(m.mm(), new_wb);
        }
        Some(IoList::Dirty | IoList::Io | IoList::MoreIo) => {}
        Some(IoList::DirtyTime) => {
            inode_io_list_move_locked(inode, new_wb, IoList::DirtyTime);
        }
        Some(IoList::Attached) => inode_cgwb_move_to_attached(inode, new_wb),
        None => {}
    }
    wb_get(new_wb);
    wb_put(m.mm(), &old_wb);
    // The foreign-detection state starts over on the new wb.
    inode.frn.set(WbFrn::default());
    inode.st.borrow_mut().i_state &= !I_WB_SWITCH;
    dirty + wback
}

/// `cgroup_writeback_umount`, called right after SB_ACTIVE is cleared, under
/// the `umount_drain` policy:
/// - `global` (baseline): if the bdi can write back and any switch is in
///   flight anywhere (the global `isw_nr_in_flight`), wait for a grace
///   period (every switcher that saw SB_ACTIVE set has queued its work by
///   then) and flush all of `isw_wq`;
/// - `per_sb`: wait (`wait_var_event`) until this superblock's own in-flight
///   counter is zero;
/// - `none`: a test variant that skips the drain (the invariant trips).
///
/// The time spent inside is recorded (`cgwb.umount_drain`), with the
/// in-flight counts at entry and the grace periods and switches that
/// completed while it waited.
pub async fn cgroup_writeback_umount(m: &Rc<Machine>, sb: &Rc<SuperBlock>) {
    if !sb.bdi.can_writeback {
        return;
    }
    let t0 = m.now();
    let gps0 = m.rcu().stats().gps;
    let switched0 = m.vfs().isw_switched();
    let in_flight = m.vfs().isw_nr_in_flight();
    let sb_in_flight =
        (m.policies().umount_drain == UmountDrain::PerSb).then(|| sb.isw_in_flight());
    // smp_mb(): pairs with the barrier in inode_prepare_wbs_switch.
    match m.policies().umount_drain {
        UmountDrain::Global => {
            if m.vfs().isw_nr_in_flight() > 0 {
                m.rcu().synchronize_rcu().await;
                flush_workqueue(m.vfs().isw_wq()).await;
            }
        }
        UmountDrain::PerSb => {
            let sb2 = sb.clone();
            m.vars()
                .wait_var_event(m.sim(), sb.isw_key(), move || sb2.isw_in_flight() == 0)
                .await;
        }
        UmountDrain::None => {}
    }
    m.vfs().isw_record_drain(IswDrainRecord {
        sb: sb.name.clone(),
        ns: m.now() - t0,
        in_flight,
        sb_in_flight,
        gps: m.rcu().stats().gps - gps0,
        switched: m.vfs().isw_switched() - switched0,
    });
}
