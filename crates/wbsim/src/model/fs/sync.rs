//! Data integrity: fs/sync.c and the sync parts of fs/fs-writeback.c.
//!
//! `sync_inodes_sb` (WB_SYNC_ALL work to every wb of the bdi, then
//! `wait_sb_inodes`), `writeback_inodes_sb` (tagged WB_SYNC_NONE) and
//! `try_to_writeback_inodes_sb` (the same if `s_umount` is free, skipping
//! busy wbs; ext4's delalloc free-space check calls it),
//! `sync_filesystem` (syncfs(2) and the first step of unmount), `ksys_sync`
//! (sync(2)), and `vfs_fsync_range` (fsync(2)).
//!
//! `sync_inodes_sb` holds `wb_switch_rwsem` for write across the split work
//! (as the kernel does since 5.2). Simplified: `sync_bdevs` (the block devices' own page caches) is not modelled.

use std::rc::Rc;

use crate::model::fs::fs_writeback::{
    do_writepages, wakeup_flusher_threads, wb_queue_work, wbc_attach_fdatawrite_inode,
    wbc_detach_inode,
};
use crate::model::fs::inode::InodeRef;
use crate::model::fs::vfs::Machine;
use crate::model::fs::vfs::SuperBlock;
use crate::model::fs::vfs::WritebackControl;
use crate::model::fs::writepages::fs_writepages;
use crate::model::mm::backing_dev::{SyncMode, WbCompletion, WbReason, WbWork};

/// Queues a copy of `base` on every wb of `sb`'s bdi that has something to do
/// (`bdi_split_work_to_wbs`) and waits for all of them. With `skip_if_busy`
/// a wb whose flusher is running (`writeback_in_progress`) is passed over.
async fn split_work_and_wait(
    m: &Rc<Machine>,
    sb: &Rc<SuperBlock>,
    skip_if_busy: bool,
    base: impl Fn() -> WbWork,
) {
    let done = WbCompletion::new();
    for wb in &sb.bdi.wb_list() {
        if !wb.has_dirty_io() || (skip_if_busy && wb.running.get()) {
            continue;
        }
        let mut w = base();
        w.done = Some(done.clone());
        wb_queue_work(m.mm(), wb, Rc::new(w));
    }
    // Drop the issuer's reference and wait (wb_wait_for_completion).
    done.put();
    let d2 = done.clone();
    done.waitq
        .wait_event(m.sim(), move || d2.cnt.get() == 0)
        .await;
}

/// `wait_sb_inodes`: waits until no page of `sb` is under writeback.
pub async fn wait_sb_inodes(m: &Rc<Machine>, sb: &Rc<SuperBlock>) {
    let inodes: Vec<InodeRef> = sb.inodes.borrow().values().cloned().collect();
    for inode in inodes {
        filemap_fdatawait(m, &inode).await;
    }
}

/// Waits for the pages of `inode` under writeback now (`filemap_fdatawait`
/// walks the pages tagged WRITEBACK once; pages that start writeback later are
/// not waited for). Completions are counted, so this waits until as many pages
/// have ended writeback as were under it at the call, or none is left.
pub async fn filemap_fdatawait(m: &Rc<Machine>, inode: &InodeRef) {
    let target = {
        let map = inode.mapping.borrow();
        map.nr_writeback_done + map.nr_writeback()
    };
    let i2 = inode.clone();
    inode
        .i_wb_wait
        .wait_event(m.sim(), move || {
            let map = i2.mapping.borrow();
            map.nr_writeback() == 0 || map.nr_writeback_done >= target
        })
        .await;
}

/// `sync_inodes_sb`: write and wait for every dirty page of `sb`.
pub async fn sync_inodes_sb(m: &Rc<Machine>, sb: &Rc<SuperBlock>) {
    if !sb.bdi.can_writeback {
        return;
    }
    let id = sb.id;
    // bdi_down_write_wb_switch_rwsem: no inode changes wb while the work is
    // split over the wbs (a switched inode could be missed).
    let switch_guard = sb.bdi.wb_switch_rwsem.down_write().await;
    split_work_and_wait(m, sb, false, || {
        let mut w = WbWork::new(i64::MAX, SyncMode::All, WbReason::Sync);
        w.sb = Some(id);
        w.range_cyclic = false;
        w.for_sync = true;
        w
    })
    .await;
    drop(switch_guard);
    wait_sb_inodes(m, sb).await;
}

/// `writeback_inodes_sb`: start writeback of `sb`'s dirty pages (tagged, no
/// waiting on pages) and wait for the work items.
pub async fn writeback_inodes_sb(m: &Rc<Machine>, sb: &Rc<SuperBlock>, reason: WbReason) {
    writeback_inodes_sb_nr(m, sb, reason, false).await;
}

/// `try_to_writeback_inodes_sb`: as [`writeback_inodes_sb`], but only if
/// `s_umount` can be taken for read at once (an umount or remount in
/// progress makes it a no-op), and passing over wbs whose flusher is
/// already running (`skip_if_busy`). The caller waits for the work it
/// queued. Returns whether it could take `s_umount`.
pub async fn try_to_writeback_inodes_sb(
    m: &Rc<Machine>,
    sb: &Rc<SuperBlock>,
    reason: WbReason,
) -> bool {
    let Some(guard) = sb.s_umount.down_read_trylock() else {
        return false;
    };
    writeback_inodes_sb_nr(m, sb, reason, true).await;
    drop(guard);
    true
}

/// `__writeback_inodes_sb_nr` with `nr = get_nr_dirty_pages()`: tagged
/// WB_SYNC_NONE work on every wb of the bdi, waited for.
async fn writeback_inodes_sb_nr(
    m: &Rc<Machine>,
    sb: &Rc<SuperBlock>,
    reason: WbReason,
    skip_if_busy: bool,
) {
    if !sb.bdi.can_writeback {
        return;
    }
    let id = sb.id;
    let nr = m.mm().vm().nr_file_dirty as i64;
    split_work_and_wait(m, sb, skip_if_busy, || {
        let mut w = WbWork::new(nr, SyncMode::None, reason);
        w.sb = Some(id);
        w.tagged_writepages = true;
        w
    })
    .await;
}

/// `sync_filesystem`: what syncfs(2) and unmount do.
pub async fn sync_filesystem(m: &Rc<Machine>, sb: &Rc<SuperBlock>) {
    writeback_inodes_sb(m, sb, WbReason::Sync).await;
    sb.fs.sync_fs(m, sb, false).await;
    sync_inodes_sb(m, sb).await;
    sb.fs.sync_fs(m, sb, true).await;
}

/// `ksys_sync`: sync(2).
pub async fn ksys_sync(m: &Rc<Machine>) {
    wakeup_flusher_threads(m, WbReason::Sync);
    let sbs: Vec<Rc<SuperBlock>> = m
        .vfs()
        .supers()
        .into_iter()
        .filter(|s| s.active())
        .collect();
    for sb in &sbs {
        sync_inodes_sb(m, sb).await;
    }
    for sb in &sbs {
        sb.fs.sync_fs(m, sb, false).await;
    }
    for sb in &sbs {
        sb.fs.sync_fs(m, sb, true).await;
    }
}

/// `filemap_fdatawrite_range_kick` (and `filemap_flush`, the whole file):
/// WB_SYNC_NONE writeback of pages `[start, end]` of `inode` through
/// `do_writepages`, in the caller's context, without waiting for the I/O.
/// The caller pays the page walk and bio building and sleeps where
/// submission sleeps (a device's tags used up). The wbc carries no reason
/// (0, WB_REASON_BACKGROUND); the round is accounted for foreign-inode
/// detection (`filemap_fdatawrite_wbc`).
pub async fn filemap_fdatawrite_range_kick(
    m: &Rc<Machine>,
    sb: &Rc<SuperBlock>,
    inode: &InodeRef,
    start: u64,
    end: u64,
) {
    let mut wbc = WritebackControl::new(i64::MAX, SyncMode::None, WbReason::Background);
    wbc.range_start = start;
    wbc.range_end = end;
    wbc_attach_fdatawrite_inode(m, &mut wbc, inode);
    do_writepages(m, sb, inode, &mut wbc).await;
    wbc_detach_inode(m, &mut wbc, inode);
}

/// `file_write_and_wait_range` over a whole file: WB_SYNC_ALL writepages, wait
/// for writeback; a second pass writes pages that were redirtied while under
/// writeback at the first pass.
pub async fn file_write_and_wait(m: &Rc<Machine>, sb: &Rc<SuperBlock>, inode: &InodeRef) {
    if !sb.bdi.can_writeback {
        return;
    }
    for _ in 0..2 {
        let mut wbc = WritebackControl::new(i64::MAX, SyncMode::All, WbReason::Sync);
        wbc.range_start = 0;
        wbc.range_end = u64::MAX;
        if inode.mapping.borrow().has_dirty() {
            // filemap_fdatawrite_wbc: the round is accounted for
            // foreign-inode detection like a flusher round.
            wbc_attach_fdatawrite_inode(m, &mut wbc, inode);
            fs_writepages(m, sb, inode, &mut wbc).await;
            wbc_detach_inode(m, &mut wbc, inode);
        }
        filemap_fdatawait(m, inode).await;
        if !inode.mapping.borrow().has_dirty() {
            break;
        }
    }
}

/// `vfs_fsync_range` over the whole file: data, then the filesystem's commit.
pub async fn vfs_fsync(m: &Rc<Machine>, sb: &Rc<SuperBlock>, inode: &InodeRef, datasync: bool) {
    file_write_and_wait(m, sb, inode).await;
    sb.fs.fsync_commit(m, sb, datasync).await;
}
