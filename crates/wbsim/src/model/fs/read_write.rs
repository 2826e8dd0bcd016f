//! The read and write paths: `vfs_write` -> `generic_perform_write` (buffered),
//! `iomap_dio_rw` (O_DIRECT), `filemap_read` (buffered reads), with
//! RWF_DONTCACHE's drop-behind folios, and allocation with direct reclaim.
//!
//! A buffered write maps its range once under the inode's ilock
//! (`->iomap_begin`, a filesystem cost) and reserves speculative
//! preallocation beyond EOF for a write that extends the file (XFS); then,
//! as `iomap_write_iter` does, it goes folio by folio: allocate missing
//! folios (`__alloc_pages`: kswapd below the low watermark, direct reclaim
//! below min, mm/page_alloc.rs and mm/vmscan.rs), pay write_begin, copy and
//! write_end, mark the pages and the inode dirty, and call
//! `balance_dirty_pages_ratelimited` after each folio. Folios the ratelimit
//! gate lets through are taken as one step. `fallocate(2)` gives a range
//! unwritten blocks. Simplified: partial-page writes do not read the page
//! first (writes are page aligned in practice).
//!
//! A buffered read (`filemap_read`) brings missing pages in through the
//! readahead window of the open file (mm/readahead.rs): the folios are
//! allocated, charged and added to the page cache locked by the reader,
//! which then submits the bio and, for an asynchronous window, goes on
//! without waiting; the bio's end (after the filesystem's completion
//! work: btrfs verifies checksums on a kworker) unlocks them. Folios under
//! read are charged to the reader's memcg and cannot be reclaimed.

use std::cell::RefCell;
use std::rc::{Rc, Weak};

use sim::Time;

use crate::model::block::{Bio, BioFlags};
use crate::model::errno::IoError;
use crate::model::fs::fs_writeback::{inode_attach_wb, mark_inode_dirty, wakeup_flusher_threads};
use crate::model::fs::inode::{state::I_DIRTY_PAGES, InodeRef};
use crate::model::fs::sync::{file_write_and_wait, filemap_fdatawrite_range_kick};
use crate::model::fs::vfs::Machine;
use crate::model::fs::vfs::SuperBlock;
use crate::model::fs::writepages::DROPBEHIND_PAGE_NS;
use crate::model::mm::backing_dev::WbReason;
use crate::model::mm::memcontrol::mem_cgroup_track_foreign_dirty;
use crate::model::mm::memcontrol::{
    mem_cgroup_charge_folios, mem_cgroup_uncharge_freed, resume_user_mode_over_high,
};
use crate::model::mm::page_alloc;
use crate::model::mm::page_writeback::account_delta;
use crate::model::mm::page_writeback::{self as throttle, TaskDirty};
use crate::model::mm::readahead::{page_cache_async_ra, page_cache_sync_ra, FileRaState, RaWindow};
use crate::model::mm::swap;
use crate::model::mm::vmscan::{LruFile, ReclaimSource};
use crate::model::mm::vmstat::PAGE_SIZE;
use crate::model::policy::DontcacheFlush;

/// CPU per page of an O_DIRECT request (page pinning, bio building), ns:
/// ~0.1 us (order of magnitude from iomap_dio profiles).
pub const DIO_PAGE_NS: Time = 100;
/// An open file.
#[derive(Clone)]
pub struct File {
    pub sb: Rc<SuperBlock>,
    pub inode: InodeRef,
    /// `file->f_ra`: the readahead window of this open file (clones share
    /// it, as duplicated descriptors share their `struct file`).
    pub ra: Rc<RefCell<FileRaState>>,
}

impl File {
    /// An open file of `inode` (`do_dentry_open` -> `file_ra_state_init`:
    /// the window's maximum from the bdi).
    pub fn new(sb: Rc<SuperBlock>, inode: InodeRef) -> Self {
        let ra = FileRaState::new(sb.bdi.ra_pages.get());
        File {
            sb,
            inode,
            ra: Rc::new(RefCell::new(ra)),
        }
    }
}

/// Flags of one read or write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoFlags {
    /// O_DIRECT.
    pub direct: bool,
    /// RWF_DONTCACHE.
    pub dontcache: bool,
    /// IOCB_NOWAIT (io_uring's first attempt): balance_dirty_pages must not sleep.
    pub nowait: bool,
}

/// Creates a new file in the root directory of `sb` (`open(O_CREAT)`).
pub fn create_file(m: &Rc<Machine>, sb: &Rc<SuperBlock>) -> File {
    create_file_in(m, sb, "")
}

/// Creates a new file in directory `dir` of `sb` (a path inside the
/// filesystem; missing directories are created first, like `mkdir -p`).
/// Its writeback context is chosen when it is first dirtied
/// (`inode_attach_wb`).
pub fn create_file_in(m: &Rc<Machine>, sb: &Rc<SuperBlock>, dir: &str) -> File {
    let inode = sb.new_inode_in(m, dir);
    File::new(sb.clone(), inode)
}

fn page_range(pos: u64, len: u64) -> (u64, u64) {
    (pos / PAGE_SIZE, (pos + len).div_ceil(PAGE_SIZE))
}

/// What reclaim sees of the filesystems: every file of a superblock with
/// writeback, and the flusher wakeup (mm/ does not know files).
struct FsReclaim(Weak<Machine>);

impl ReclaimSource for FsReclaim {
    fn lru_files(&self) -> Vec<Rc<dyn LruFile>> {
        let Some(m) = self.0.upgrade() else {
            return Vec::new();
        };
        m.vfs()
            .supers()
            .iter()
            .filter(|s| s.bdi.can_writeback)
            .flat_map(|s| {
                s.inodes
                    .borrow()
                    .values()
                    .map(|i| i.clone() as Rc<dyn LruFile>)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    fn wakeup_flusher_threads(&self) {
        if let Some(m) = self.0.upgrade() {
            wakeup_flusher_threads(&m, WbReason::Vmscan);
        }
    }

    fn reclaim_page_ns(&self) -> Time {
        self.0
            .upgrade()
            .map(|m| m.costs().reclaim_page_ns)
            .unwrap_or(0)
    }
}

/// Allocates `pages` new page-cache pages ([`page_alloc::alloc_pages`]:
/// kswapd below the low watermark, direct reclaim below min), registering
/// the filesystems with reclaim on first use. With `nowait` (IOCB_NOWAIT,
/// FGP_NOWAIT) an allocation that would need direct reclaim fails with
/// `IoError::Again`.
///
/// Then `filemap_add_folio` -> `mem_cgroup_charge`: the pages are charged
/// to the current task's memcg (the file's memcg, set by its first charge).
/// Returns the pages owed to memory.high, to settle on the return to user
/// space ([`mem_cgroup_handle_over_high`]); a charge failing at memory.max
/// gives `IoError::Oom`.
async fn alloc_folios(
    m: &Rc<Machine>,
    inode: &InodeRef,
    pages: u64,
    nowait: bool,
) -> Result<u64, IoError> {
    let pg = m.mm().pgdat();
    if !pg.has_source() {
        pg.set_source(Rc::new(FsReclaim(Rc::downgrade(m))));
    }
    page_alloc::alloc_pages(m.mm(), pages, nowait).await?;
    let memcg = match m.mm().memcgs().get(inode.memcg.get()) {
        Some(mc) => mc,
        None => {
            let mc = m.mm().memcgs().from_cgroup(m.sched().current_cgroup());
            inode.memcg.set(mc.id);
            mc.lru_add(&(inode.clone() as Rc<dyn LruFile>));
            mc
        }
    };
    let folio_pages = 1u64 << inode.mapping.borrow().max_folio_order();
    mem_cgroup_charge_folios(m.mm(), &memcg, pages, folio_pages, !nowait).await
}

/// The id of the current task's memcg (its nearest online one): the
/// memcg new folios are charged to (`folio_memcg`).
fn current_memcg_id(m: &Machine) -> u64 {
    m.mm().memcgs().from_cgroup(m.sched().current_cgroup()).id
}

/// Marks an access of `inode` for the LRU (its last access, and its place
/// on its memcg's LRU).
fn touch_lru(m: &Machine, inode: &InodeRef) {
    let old = inode.lru_key();
    inode.st.borrow_mut().last_access = m.now();
    if let Some(mc) = m.mm().memcgs().get(inode.memcg.get()) {
        mc.lru_rotate(old, inode.lru_key());
    }
}

/// The return to user space of a syscall that charged pages while its memcg
/// was over memory.high (`resume_user_mode_work` ->
/// `mem_cgroup_handle_over_high`, on the memcg of the file's pages): the
/// task settles what it still owes (`over_high`, what its last charge
/// returned: 0 when nothing, or when the charge settled it itself).
async fn resume_user_mode_work(m: &Rc<Machine>, f: &File, over_high: u64) {
    if over_high == 0 {
        return;
    }
    if let Some(memcg) = m.mm().memcgs().get(f.inode.memcg.get()) {
        resume_user_mode_over_high(m.mm(), &memcg).await;
    }
}

/// write(2)/pwritev2(2) of `len` bytes at `pos`.
pub async fn vfs_write(
    m: &Rc<Machine>,
    task: &mut TaskDirty,
    f: &File,
    pos: u64,
    len: u64,
    fl: IoFlags,
) -> Result<(), IoError> {
    if fl.dontcache && !fl.direct && !f.sb.fs.fop_dontcache() {
        return Err(IoError::NotSupported);
    }
    touch_lru(m, &f.inode);
    if fl.direct {
        direct_io(m, f, pos, len, true).await;
    } else {
        // inode_lock for the whole buffered write; IOCB_NOWAIT only tries
        // (xfs_ilock_iocb) and gets EAGAIN.
        let iolock = if fl.nowait {
            match f.inode.i_rwsem.down_write_trylock() {
                Some(g) => g,
                None => return Err(IoError::Again),
            }
        } else {
            f.inode.i_rwsem.down_write().await
        };
        file_update_time(m, f, fl.nowait).await?;
        let over_high = generic_perform_write(m, task, f, pos, len, fl).await?;
        drop(iolock);
        resume_user_mode_work(m, f, over_high).await;
    }
    let mut st = f.inode.st.borrow_mut();
    st.i_size = st.i_size.max(pos + len);
    Ok(())
}

/// `kiocb_modified` -> `file_modified_flags` (fs/inode.c), from the
/// filesystem's write checks under the inode lock: a write sets mtime and
/// ctime to `current_time()`, the coarse clock, which the tick advances once
/// a jiffy (multigrain timestamps: a fine-grained time only after a stat
/// queried the ctime, not modelled). So the first write of a file in each
/// jiffy changes them and pays the filesystem's `->update_time`; the others
/// find them equal and do nothing. With IOCB_NOWAIT an update that may
/// block (a filesystem `->update_time` the model has: xfs) is not tried:
/// EAGAIN. Simplified: every filesystem takes this path (ext4 calls
/// `file_modified`, btrfs sets the times in memory in
/// `btrfs_write_check`; neither costs anything modelled here).
async fn file_update_time(m: &Rc<Machine>, f: &File, nowait: bool) -> Result<(), IoError> {
    let hz = m.kernel().hz().max(1);
    let tick = (1_000_000_000 + hz / 2) / hz;
    let now = m.now();
    if f.inode.st.borrow().cmtime / tick == now / tick {
        return Ok(());
    }
    let update = f.sb.fs.update_time(m, &f.sb, &f.inode);
    if nowait && update.is_some() {
        return Err(IoError::Again);
    }
    f.inode.st.borrow_mut().cmtime = now;
    if let Some(fut) = update {
        fut.await;
    }
    Ok(())
}

/// `generic_perform_write` / `iomap_write_iter` and what follows it
/// (`generic_write_sync` for RWF_DONTCACHE). The range is mapped once
/// (`->iomap_begin`), then copied folio by folio: each folio is allocated if
/// missing (with reclaim), copied into and marked dirty, and
/// `balance_dirty_pages_ratelimited` runs after it. Folios are as large as
/// the filesystem's mapping allows (`fgf_set_order`, see
/// [`crate::model::mm::filemap`]), so the gate can
/// fire only at folio ends. Folios the ratelimit
/// gate would let through are taken together
/// ([`throttle::pages_until_ratelimit`]): the gate is a counter check, so
/// the result is the kernel's per-folio loop, with one step per gate firing.
/// Returns the pages owed to memory.high.
async fn generic_perform_write(
    m: &Rc<Machine>,
    task: &mut TaskDirty,
    f: &File,
    pos: u64,
    len: u64,
    fl: IoFlags,
) -> Result<u64, IoError> {
    let mut over_high = 0;
    let (start, end) = page_range(pos, len);
    let npages = end - start;
    // ->iomap_begin maps the range under the ilock held exclusive; the rest
    // of the call and the copy run outside it.
    let costs = f.sb.fs.costs();
    let ilock_ns = costs.write_ilock_ns;
    let walk_ns =
        if costs.extent_walk_ns > 0 && f.inode.extents.borrow_mut().write_lookup(start, end) {
            costs.extent_walk_ns
        } else {
            0
        };
    if ilock_ns + walk_ns > 0 {
        let ilock = f.inode.ilock.down_write().await;
        m.sched().cpu(ilock_ns + walk_ns).await;
        drop(ilock);
    }
    m.sched()
        .cpu(m.costs().syscall_ns + f.sb.fs.costs().write_call_ns.saturating_sub(ilock_ns))
        .await;
    let page_ns = f.sb.fs.costs().write_page_ns;
    if !f.sb.bdi.can_writeback {
        // tmpfs: shmem pages, never dirty-accounted or written back.
        m.sched().cpu(npages * page_ns).await;
        let memcg = current_memcg_id(m);
        let d = f
            .inode
            .mapping
            .borrow_mut()
            .add_clean(start, end, false, memcg);
        m.mm().vm_add_shmem(d.cached);
        return Ok(0);
    }
    // A write extending the file over holes reserves delalloc beyond EOF.
    let size_pages = f.inode.st.borrow().i_size.div_ceil(PAGE_SIZE);
    if end > size_pages {
        let pre =
            f.sb.fs
                .eof_prealloc_pages(size_pages, mapped_run_before(&f.inode, start));
        if pre > 0 {
            f.inode.extents.borrow_mut().reserve_eof(end, end + pre);
        }
    }
    let wb = inode_attach_wb(m, &f.sb, &f.inode, m.policies().wb_ctx_assign);
    let mut idx = start;
    while idx < end {
        // Whole folios, until the ratelimit gate would fire: cached ones as
        // they are, new ones sized for the rest of the write
        // (`fgf_set_order`, large folios on XFS and ext4). A cached folio may
        // reach past the write's end; it is dirtied whole.
        // IOCB_NOWAIT (io_uring's inline attempt): iomap_write_iter runs
        // balance_dirty_pages_ratelimited_flags(BDP_ASYNC) at the top of
        // each iteration, so where the gate would put the writer to sleep
        // nothing more is dirtied and the write returns -EAGAIN (io_uring
        // then punts it to io-wq, whose worker is throttled as a blocking
        // writer). A blocking writer's gate runs after each chunk below (in
        // the kernel it runs before the next chunk, or at the next write's
        // first one: the same pauses, the last one in this call instead of
        // the next).
        if fl.nowait {
            throttle::balance_dirty_pages_ratelimited(m.mm(), task, &wb, true).await?;
        }
        let target = end.min(idx + throttle::pages_until_ratelimit(task, &wb));
        let mut chunk_end = idx;
        {
            let map = f.inode.mapping.borrow();
            while chunk_end < target {
                chunk_end = map.folio_end(chunk_end, end);
            }
        }
        // write_begin: the filesystem's part (ext4: delalloc space), then
        // find or allocate the folios.
        if let Some(fut) = f.sb.fs.write_begin(m, &f.sb, &f.inode, (idx, chunk_end)) {
            fut.await;
        }
        let missing = f.inode.mapping.borrow().count_missing(idx, chunk_end);
        if missing > 0 {
            over_high = alloc_folios(m, &f.inode, missing, fl.nowait).await?;
        }
        // write_begin locks the folios: wait while writeback holds them
        // (folio waits share the inode's hashed wait queue with writeback
        // waits, as folio_wait_table does). IOCB_NOWAIT only tries.
        if f.inode.mapping.borrow().is_locked(idx, chunk_end) {
            if fl.nowait {
                return Err(IoError::Again);
            }
            m.count_inode_event("folio_lock_wait", &f.inode);
            let (ino, s, e) = (f.inode.clone(), idx, chunk_end);
            f.inode
                .i_wb_wait
                .wait_event(m.sim(), move || !ino.mapping.borrow().is_locked(s, e))
                .await;
        }
        // FGP_STABLE: folio_wait_stable. Where the mapping needs stable
        // pages (AS_STABLE_WRITES), a folio under writeback is not changed
        // until its writeback ends (folio_wait_writeback, woken by
        // folio_end_writeback through the same wait queue). Otherwise the
        // copy goes into the folio under writeback, which is redirtied.
        if f.inode.mapping.borrow().stable_writes()
            && f.inode.mapping.borrow().writeback_in(idx, chunk_end) > 0
        {
            m.count_event("folio_wait_stable");
            let (ino, s, e) = (f.inode.clone(), idx, chunk_end);
            f.inode
                .i_wb_wait
                .wait_event(m.sim(), move || {
                    ino.mapping.borrow().writeback_in(s, e) == 0
                })
                .await;
        }
        // copy_folio_from_iter_atomic and write_end.
        let copied = chunk_end.min(end) - idx;
        m.sched().cpu(copied * page_ns).await;
        let d = f.inode.mapping.borrow_mut().write_dirty(
            idx,
            chunk_end.min(end),
            end,
            fl.dontcache,
            current_memcg_id(m),
        );
        account_delta(m.mm(), Some(&wb), &d);
        // The new folios went through folio_add_lru (mm/swap.c): the one
        // that fills the CPU's batch, or a large one, pays the drain.
        let lru_ns = swap::folio_add_lru(m.mm(), d.new_small_folios, d.new_large_folios);
        if lru_ns > 0 {
            m.sched().cpu(lru_ns).await;
        }
        if d.dirtied > 0 {
            // folio_account_dirtied -> mem_cgroup_track_foreign_dirty: the
            // owners of the folios dirtied here. Simplified: every owner
            // of the range, also of folios that were dirty already.
            let owners = f
                .inode
                .mapping
                .borrow()
                .folio_owners(idx, chunk_end.min(end));
            for (memcg, _, _) in owners {
                mem_cgroup_track_foreign_dirty(m.mm(), memcg, &wb);
            }
            mark_inode_dirty(m, &f.inode, I_DIRTY_PAGES);
        }
        throttle::account_dirtied(m.mm(), task, d.dirtied);
        if !fl.nowait {
            throttle::balance_dirty_pages_ratelimited(m.mm(), task, &wb, false).await?;
        }
        idx = chunk_end;
    }
    if fl.dontcache {
        match m.policies().dontcache_flush {
            DontcacheFlush::Inline => {
                // generic_write_sync -> filemap_fdatawrite_range_kick of
                // the written range, in the writer's context.
                filemap_fdatawrite_range_kick(m, &f.sb, &f.inode, start, end).await;
            }
            DontcacheFlush::Kick => {
                throttle::dontcache_kick(m.mm(), &wb, npages);
            }
        }
    }
    Ok(over_high)
}

/// `fallocate(fd, mode, pos, len)` with mode 0 or FALLOC_FL_KEEP_SIZE
/// (`keep_size`): the holes of the range get unwritten blocks (their pages
/// stay uncached) and, without `keep_size`, `i_size` grows to cover it.
/// Filesystems without writeback (tmpfs) allocate nothing here
/// (shmem_fallocate's page allocation is not modelled).
pub async fn vfs_fallocate(m: &Rc<Machine>, f: &File, pos: u64, len: u64, keep_size: bool) {
    m.sched()
        .cpu(m.costs().syscall_ns + f.sb.fs.costs().fallocate_ns)
        .await;
    if f.sb.bdi.can_writeback {
        let (start, end) = page_range(pos, len);
        let got = f.inode.extents.borrow_mut().fallocate(start, end);
        f.sb.fs.blocks_allocated(&f.sb, got);
    }
    if !keep_size {
        let mut st = f.inode.st.borrow_mut();
        st.i_size = st.i_size.max(pos + len);
    }
}

/// unlink(2) of `f`'s only name (`do_unlinkat` -> `vfs_unlink`), the caller
/// having closed it: the last link and reference go, so `iput_final` evicts
/// the inode and its page cache
/// ([`iput_final_unlinked`](crate::model::fs::super_::iput_final_unlinked)).
pub async fn vfs_unlink(m: &Rc<Machine>, f: &File) {
    m.sched().cpu(m.costs().syscall_ns).await;
    crate::model::fs::super_::iput_final_unlinked(m, &f.sb, &f.inode).await;
}

/// O_DIRECT read or write of `len` bytes at `pos`: cached pages of the range
/// are written and invalidated first, then the bio goes straight to the device.
pub async fn direct_io(m: &Rc<Machine>, f: &File, pos: u64, len: u64, write: bool) {
    let (start, end) = page_range(pos, len);
    m.sched()
        .cpu(m.costs().syscall_ns + (end - start) * DIO_PAGE_NS)
        .await;
    let cached = f.inode.mapping.borrow().nrpages() > 0;
    if cached && write {
        file_write_and_wait(m, &f.sb, &f.inode).await;
        let d = f.inode.mapping.borrow_mut().reclaim_clean(u64::MAX);
        account_delta(m.mm(), f.inode.wb().as_ref(), &d);
        mem_cgroup_uncharge_freed(m.mm(), f.inode.memcg.get(), d.cached);
    }
    if let Some(dev) = &f.sb.device {
        let off = f.inode.disk_base + pos;
        let bio = if write {
            // iomap_dio_bio_opflags: REQ_SYNC | REQ_IDLE.
            Bio::write(off, len).with_flags(BioFlags::DIRECT_WRITE)
        } else {
            Bio::read(off, len)
        };
        dev.submit_bio_wait(bio).await;
    }
}

/// `filemap_get_pages()` for a read of pages `[start, end)`: a miss at
/// `start` runs `page_cache_sync_ra` (mm/readahead.rs: the request, or a
/// window around it with its PG_readahead mark); a folio of the range
/// carrying the mark runs `page_cache_async_ra` (the next window, read
/// without waiting for it); pages still missing are read as they are
/// (`filemap_create_folio`). Then the reader waits for the folios of its
/// range still being read (`filemap_update_page`: `folio_lock`). Returns
/// the pages owed to memory.high.
async fn filemap_get_pages(
    m: &Rc<Machine>,
    f: &File,
    start: u64,
    end: u64,
    fl: IoFlags,
) -> Result<u64, IoError> {
    let eof = f.inode.st.borrow().i_size.div_ceil(PAGE_SIZE);
    let mut over_high = 0;
    if f.inode.mapping.borrow().count_missing(start, start + 1) > 0 {
        let w = page_cache_sync_ra(&mut f.ra.borrow_mut(), start, end - start, eof);
        over_high = read_window(m, f, w, fl).await?;
    }
    loop {
        let Some(at) = f.inode.mapping.borrow_mut().take_ra_mark(start, end) else {
            break;
        };
        let hole = f.inode.mapping.borrow().next_hole(at);
        let w = page_cache_async_ra(&mut f.ra.borrow_mut(), at, end - at, hole, eof);
        if let Some(w) = w {
            m.count_event("page_cache_async_ra");
            over_high = read_window(m, f, w, fl).await?;
        }
    }
    let missing = f.inode.mapping.borrow().missing_ranges(start, end);
    for (s, e) in missing {
        over_high = read_pages(m, f, s, e, fl).await?;
    }
    if f.inode.mapping.borrow().is_reading(start, end) {
        m.count_inode_event("folio_read_wait", &f.inode);
        let (ino, s, e) = (f.inode.clone(), start, end);
        f.inode
            .i_wb_wait
            .wait_event(m.sim(), move || !ino.mapping.borrow().is_reading(s, e))
            .await;
    }
    Ok(over_high)
}

/// `page_cache_ra_unbounded()` of a readahead window: each run of pages not
/// cached is read with its own bio ([`read_pages`]); the new folio at the
/// window's mark gets PG_readahead. Returns the pages owed to memory.high.
async fn read_window(m: &Rc<Machine>, f: &File, w: RaWindow, fl: IoFlags) -> Result<u64, IoError> {
    let mut over_high = 0;
    let missing = f.inode.mapping.borrow().missing_ranges(w.start, w.end);
    for (s, e) in missing {
        over_high = read_pages(m, f, s, e, fl).await?;
        if let Some(mk) = w.mark.filter(|mk| (s..e).contains(mk)) {
            f.inode.mapping.borrow_mut().set_ra_mark(mk);
        }
    }
    Ok(over_high)
}

/// Brings the missing pages `[start, end)` of `f` in with one read bio
/// (`page_cache_ra_unbounded` -> `read_pages`): the folios are allocated
/// and charged ([`alloc_folios`], with reclaim), added to the page cache
/// locked (`filemap_add_folio`: the reader pays
/// `CpuCosts::filemap_add_page_ns`, the LRU add and the filesystem's
/// `readpage_ns` per page), then the filesystem's part of the submission
/// runs (btrfs: the csum lookup) and the bio goes to the device without
/// waiting. At its completion the filesystem ends the read
/// ([`Filesystem::end_read_bio`](crate::model::fs::vfs::Filesystem::end_read_bio):
/// btrfs verifies the checksums on a kworker first), which unlocks the
/// folios and wakes their waiters. Returns the pages owed to memory.high.
async fn read_pages(
    m: &Rc<Machine>,
    f: &File,
    start: u64,
    end: u64,
    fl: IoFlags,
) -> Result<u64, IoError> {
    let n = end - start;
    let over_high = alloc_folios(m, &f.inode, n, fl.nowait).await?;
    let d = {
        let mut map = f.inode.mapping.borrow_mut();
        let d = map.add_clean(start, end, fl.dontcache, current_memcg_id(m));
        map.start_read(start, end);
        d
    };
    account_delta(m.mm(), f.inode.wb().as_ref(), &d);
    // Pages another task brought in while this one allocated were charged
    // for nothing.
    let added = d.cached.max(0) as u64;
    if added < n {
        mem_cgroup_uncharge_freed(m.mm(), f.inode.memcg.get(), -((n - added) as i64));
    }
    let lru_ns = swap::folio_add_lru(m.mm(), d.new_small_folios, d.new_large_folios);
    let page_ns = m.costs().filemap_add_page_ns + f.sb.fs.costs().readpage_ns;
    m.sched().cpu(n * page_ns + lru_ns).await;
    // The filesystem's part of the read bio's submission (btrfs: the data
    // checksums are looked up before the I/O).
    f.sb.fs
        .before_read_bio(m, &f.sb, &f.inode, start, end)
        .await;
    let ino = f.inode.clone();
    let done: Box<dyn FnOnce()> = Box::new(move || {
        ino.mapping.borrow_mut().end_read(start, end);
        ino.i_wb_wait.wake_up_all();
    });
    match &f.sb.device {
        Some(dev) => {
            let (wm, wsb) = (Rc::downgrade(m), Rc::downgrade(&f.sb));
            let seg = f.inode.mapping.borrow().avg_folio_pages(start, end) * PAGE_SIZE;
            let bio = Bio::read(
                f.inode.disk_base + start * PAGE_SIZE,
                (end - start) * PAGE_SIZE,
            )
            .with_seg_bytes(seg);
            dev.submit_bio(
                bio,
                Box::new(move || match (wm.upgrade(), wsb.upgrade()) {
                    (Some(m), Some(sb)) => sb.fs.end_read_bio(&m, &sb, start, end, done),
                    _ => done(),
                }),
            )
            .await;
        }
        None => done(),
    }
    Ok(over_high)
}

/// The mapped range (pages with blocks, dirty pages over holes, i.e.
/// delalloc, and speculative preallocation) that ends right before page
/// `start`, as its length rounded down to a power of two (found by doubling
/// the range checked, up to 2^20 pages); None when page `start - 1` is a
/// hole, or `start` is 0. What `xfs_iomap_prealloc_size` reads from the
/// extent list (`xfs_iext_prev_extent`).
fn mapped_run_before(inode: &InodeRef, start: u64) -> Option<u64> {
    let ext = inode.extents.borrow();
    let map = inode.mapping.borrow();
    let mapped = |a: u64, b: u64| {
        ext.holes(a, b)
            .into_iter()
            .all(|(hs, he)| map.dirty_in(hs, he) + ext.eof_reserved.pages_in(hs, he) >= he - hs)
    };
    if start == 0 || !mapped(start - 1, start) {
        return None;
    }
    let mut run = 1;
    while run < (1 << 20) && run * 2 <= start && mapped(start - run * 2, start) {
        run *= 2;
    }
    Some(run)
}

/// read(2)/preadv2(2) of `len` bytes at `pos`.
pub async fn vfs_read(
    m: &Rc<Machine>,
    f: &File,
    pos: u64,
    len: u64,
    fl: IoFlags,
) -> Result<(), IoError> {
    if fl.dontcache && !fl.direct && !f.sb.fs.fop_dontcache() {
        return Err(IoError::NotSupported);
    }
    touch_lru(m, &f.inode);
    if fl.direct {
        direct_io(m, f, pos, len, false).await;
        return Ok(());
    }
    let (start, end) = page_range(pos, len);
    let mut over_high = 0;
    if f.sb.bdi.can_writeback {
        over_high = filemap_get_pages(m, f, start, end, fl).await?;
    }
    m.sched()
        .cpu(m.costs().syscall_ns + (end - start) * m.costs().read_copy_page_ns)
        .await;
    // filemap_read: ra->prev_pos = the position after the read.
    f.ra.borrow_mut().prev_index = Some((pos + len) / PAGE_SIZE);
    if fl.dontcache {
        let d = f
            .inode
            .mapping
            .borrow_mut()
            .drop_clean_dropbehind(start, end);
        account_delta(m.mm(), f.inode.wb().as_ref(), &d);
        mem_cgroup_uncharge_freed(m.mm(), f.inode.memcg.get(), d.cached);
        // folio_end_dropbehind in the reader, per folio dropped.
        if d.cached < 0 {
            m.sched().cpu((-d.cached) as u64 * DROPBEHIND_PAGE_NS).await;
        }
    }
    resume_user_mode_work(m, f, over_high).await;
    Ok(())
}
