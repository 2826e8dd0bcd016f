//! The VFS objects every file of `fs/` shares, declared the way
//! include/linux/fs.h and fs/mount.h declare them: the [`Machine`] (the top
//! of the model: kernel services, memory management and the VFS state
//! [`Vfs`]), `struct super_block` ([`SuperBlock`]), `struct file_system_type`
//! and its operations ([`Filesystem`]), `struct writeback_control`,
//! `struct mount` and the mount namespace. Types and their plain accessors
//! only: the functions that act on them are in the files named after the
//! kernel's (super_.rs for fs/super.c, namespace.rs for fs/namespace.c,
//! fs_writeback.rs, sync.rs, read_write.rs, writepages.rs), which all import
//! this one, so dependencies inside `fs/` run one way.
//!
//! mm/ and kernel/ never see a [`Machine`]: they take their own handles
//! ([`Mm`], [`Kernel`]).

use std::cell::{Cell, OnceCell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use sim::{Sim, TaskId, Time};

use crate::model::block::{BioFlags, BlockDevice};
use crate::model::fs::inode::{Inode, InodeRef};
use crate::model::init::{CpuCosts, MachineConfig};
use crate::model::kernel::locking::lock_stat::LockStats;
use crate::model::kernel::locking::RwSemaphore;
use crate::model::kernel::rcu::Rcu;
use crate::model::kernel::sched::Sched;
use crate::model::kernel::stats::ViolationObjects;
use crate::model::kernel::wait::{VarKey, WaitVarTable};
use crate::model::kernel::workqueue::{alloc_workqueue, DelayedWork, Workqueue, WqFlags};
use crate::model::kernel::{Kernel, KernelParams};
use crate::model::mm::backing_dev::{Bdi, SyncMode, Wb, WbReason};
use crate::model::mm::{Mm, MmParams};
use crate::model::policy::{Policies, WbCtxAssign};

// ------------------------------------------------------------ filesystem types

/// CPU to free one page of an evicted inode's page cache
/// (`truncate_inode_pages_final`, batched folio freeing), ns: 50 ns; the
/// default of `Filesystem::evict_page_ns` (tmpfs has its own). Estimate
/// (freeing order-0 folios in batches runs at tens of millions per second).
pub const TRUNCATE_PAGE_NS: Time = 50;
/// A boxed future borrowing its arguments (async trait methods on `dyn`).
pub type LocalBoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// `struct writeback_control` (include/linux/writeback.h).
#[derive(Clone)]
pub struct WritebackControl {
    /// Pages still allowed to be written; decremented by writepages.
    pub nr_to_write: i64,
    /// Pages skipped (not written, e.g. locked) by writepages.
    pub pages_skipped: i64,
    pub sync_mode: SyncMode,
    pub tagged_writepages: bool,
    pub for_kupdate: bool,
    pub for_background: bool,
    pub for_sync: bool,
    pub range_cyclic: bool,
    /// First page of the range (when not range_cyclic).
    pub range_start: u64,
    /// One past the last page of the range (u64::MAX = to the end).
    pub range_end: u64,
    pub reason: WbReason,
    /// `wbc->wb`: the wb the inode being written belongs to, set by
    /// `wbc_attach_and_unlock_inode` (None: no ownership accounting).
    pub wb: Option<Rc<Wb>>,
    /// Foreign-inode detection bookkeeping of this writeback round
    /// (`wb_id`, `wb_lcand_id`, `wb_tcand_id` and their byte counts).
    pub owner: WbcOwner,
    /// `wbc->no_cgroup_owner`: do not account folio owners.
    pub no_cgroup_owner: bool,
}

impl WritebackControl {
    /// `wbc_to_write_flags` (include/linux/writeback.h): WB_SYNC_ALL
    /// writeback is `REQ_SYNC`; periodic and background writeback are
    /// `REQ_BACKGROUND` (blk-wbt's background limit).
    pub fn write_flags(&self) -> BioFlags {
        BioFlags {
            sync: self.sync_mode == SyncMode::All,
            background: self.sync_mode != SyncMode::All
                && (self.for_kupdate || self.for_background),
            ..Default::default()
        }
    }
}

/// The per-round owner bookkeeping of `struct writeback_control`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WbcOwner {
    /// `wb_id`: memcg id of the current wb.
    pub wb_id: u64,
    /// `wb_lcand_id`: last round's winner.
    pub wb_lcand_id: u64,
    /// `wb_tcand_id`: this round's majority-vote candidate.
    pub wb_tcand_id: u64,
    /// Bytes written of folios owned by the current wb's memcg.
    pub wb_bytes: u64,
    /// Bytes owned by the last winner.
    pub wb_lcand_bytes: u64,
    /// The candidate's Boyer-Moore count, bytes.
    pub wb_tcand_bytes: u64,
}

impl WritebackControl {
    /// A control for writing up to `nr_to_write` pages of a whole file.
    pub fn new(nr_to_write: i64, sync_mode: SyncMode, reason: WbReason) -> Self {
        WritebackControl {
            nr_to_write,
            pages_skipped: 0,
            sync_mode,
            tagged_writepages: false,
            for_kupdate: false,
            for_background: false,
            for_sync: false,
            range_cyclic: false,
            range_start: 0,
            range_end: u64::MAX,
            reason,
            wb: None,
            owner: WbcOwner::default(),
            no_cgroup_owner: false,
        }
    }
}

/// `wbc_account_cgroup_owner` for `nr` written folios of `folio_bytes`
/// bytes each, all owned by memcg `id`, in the order writeback met them:
/// bytes of the current wb's memcg, of the last winner, and the
/// Boyer-Moore majority vote among foreign owners, folio by folio (a run
/// of folios of one owner is folded exactly: the candidate's count falls
/// one folio at a time and the owner takes over with the folios left once
/// it reaches zero). Folios of an offline memcg do not vote. (Kept here,
/// beside `struct writeback_control`, because writepages calls it and
/// fs_writeback calls writepages.)
pub fn wbc_account_cgroup_owner(
    m: &Machine,
    wbc: &mut WritebackControl,
    id: u64,
    nr: u64,
    folio_bytes: u64,
) {
    if wbc.wb.is_none() || wbc.no_cgroup_owner || nr == 0 {
        return;
    }
    if !m.mm().memcgs().get(id).is_some_and(|mc| mc.online()) {
        return;
    }
    let o = &mut wbc.owner;
    let bytes = nr * folio_bytes;
    if id == o.wb_id {
        o.wb_bytes += bytes;
        return;
    }
    if id == o.wb_lcand_id {
        o.wb_lcand_bytes += bytes;
    }
    if o.wb_tcand_bytes == 0 {
        o.wb_tcand_id = id;
    }
    if id == o.wb_tcand_id {
        o.wb_tcand_bytes += bytes;
        return;
    }
    // Each foreign folio takes min(folio, count) off the candidate.
    let to_zero = o.wb_tcand_bytes.div_ceil(folio_bytes.max(1));
    if nr < to_zero {
        o.wb_tcand_bytes -= bytes;
    } else {
        // The candidate is voted out after `to_zero` folios; the next
        // folio makes `id` the candidate and the rest count for it.
        o.wb_tcand_bytes = 0;
        let left = nr - to_zero;
        if left > 0 {
            o.wb_tcand_id = id;
            o.wb_tcand_bytes = left * folio_bytes;
        }
    }
}

/// Bytes of device space set aside for each file's data: one 1 GiB region
/// per file, so a file's pages are contiguous on the device and different
/// files are far apart (device capacity is not modelled; a file larger than
/// this runs into the next region).
pub const FILE_REGION_BYTES: u64 = 1 << 30;

/// The CPU costs of a filesystem's data paths, ns: data, not behaviour. Each
/// filesystem has one table of these (`XFS_COSTS`, `EXT4_COSTS`...) whose
/// values are its named constants, each documented with its source there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FsCosts {
    /// CPU per page of `write_begin` + copy + `write_end` in a buffered write.
    pub write_page_ns: Time,
    /// CPU per buffered write call besides its pages and the syscall entry.
    pub write_call_ns: Time,
    /// Part of `write_call_ns` spent mapping the range (`->iomap_begin`:
    /// extent lookup, delalloc reservation) under the inode's ilock held
    /// exclusive.
    pub write_ilock_ns: Time,
    /// Extra CPU of that mapping, also under the ilock, when the write's
    /// range has a hole (a delalloc lookup and reservation) and does not
    /// continue the file's previous write: the in-core extent tree is
    /// walked with its nodes cold, where a sequential writer finds them in
    /// the CPU cache (`ExtentMap::write_lookup`).
    pub extent_walk_ns: Time,
    /// CPU per page submitted by writepages (page walk, bio building).
    pub writepage_ns: Time,
    /// CPU of one `->writepages` call that writes at least one page, besides
    /// the per-page cost (block mapping, allocation, ioend/bio setup).
    pub writepages_call_ns: Time,
    /// CPU of each further bio a `->writepages` call submits (the first is
    /// in `writepages_call_ns`): a discontiguous dirty range starts a new
    /// ioend and bio (`iomap_can_add_to_ioend`), each allocated, built and
    /// submitted into the plug, then dispatched to the driver.
    pub bio_ns: Time,
    /// Part of `writepages_call_ns` spent looking up the blocks of each
    /// contiguous dirty range (`xfs_map_blocks`) under the ilock held shared.
    /// Paid per range.
    pub map_blocks_ns: Time,
    /// CPU of allocating the blocks of a delalloc extent at writeback
    /// (`xfs_bmapi_convert_delalloc`: a transaction, the allocator) under the
    /// ilock held exclusive, besides `writepages_call_ns`. Paid per dirty
    /// range that has holes; ranges with unwritten or written blocks skip it.
    pub delalloc_alloc_ns: Time,
    /// CPU of `fallocate(2)` mode 0, per call.
    pub fallocate_ns: Time,
    /// CPU to free one page of an evicted inode's cache or data.
    pub evict_page_ns: Time,
    /// CPU per page of the filesystem's `->readahead` / `->read_folio`
    /// (extent lookup per folio, bio building and submission), paid by the
    /// reader that brings the pages in, besides the generic
    /// `CpuCosts::filemap_add_page_ns`. 0 where not measured.
    pub readpage_ns: Time,
}

impl FsCosts {
    /// A filesystem with no extent paths: zero costs but the page freeing
    /// of eviction ([`TRUNCATE_PAGE_NS`]). Tables start from this.
    pub const GENERIC: FsCosts = FsCosts {
        write_page_ns: 0,
        write_call_ns: 0,
        write_ilock_ns: 0,
        extent_walk_ns: 0,
        writepage_ns: 0,
        writepages_call_ns: 0,
        bio_ns: 0,
        map_blocks_ns: 0,
        delalloc_alloc_ns: 0,
        fallocate_ns: 0,
        evict_page_ns: TRUNCATE_PAGE_NS,
        readpage_ns: 0,
    };
}

/// A filesystem type's behaviour.
pub trait Filesystem {
    /// The type name (`ext4`, `xfs`, `btrfs`, `tmpfs`).
    fn name(&self) -> &'static str;
    /// The CPU costs of its data paths.
    fn costs(&self) -> &'static FsCosts;
    /// Whether its bdi has BDI_CAP_WRITEBACK (tmpfs: no).
    fn has_writeback(&self) -> bool {
        true
    }
    /// SB_I_PERSB_BDI: a bdi per superblock (btrfs), torn down at umount.
    fn per_sb_bdi(&self) -> bool {
        false
    }
    /// FOP_DONTCACHE: supports RWF_DONTCACHE (xfs, ext4; not btrfs, tmpfs).
    fn fop_dontcache(&self) -> bool {
        false
    }
    /// FOP_BUFFER_WASYNC: its buffered write path honours IOCB_NOWAIT
    /// (xfs, btrfs, block devices: `fop_flags` in fs/xfs/xfs_file.c,
    /// fs/btrfs/file.c, block/fops.c). Without it (ext4, tmpfs), io_uring's
    /// `io_write` does not try a buffered write inline: it returns -EAGAIN
    /// before `->write_iter` and the write is punted to io-wq.
    fn fop_buffer_wasync(&self) -> bool {
        false
    }
    /// Largest folio order of a regular file's page cache, set when the
    /// inode is set up (`mapping_set_large_folios`: XFS, ext4; 0 = single
    /// pages: btrfs without its experimental large folios, tmpfs with
    /// `huge=never`, the default).
    fn max_folio_order(&self) -> u8 {
        0
    }
    /// Whether a regular file's mapping needs stable pages whatever the
    /// device (`mapping_set_stable_writes`: btrfs data checksums, set by
    /// `btrfs_update_address_space_flags` unless NODATASUM).
    fn stable_writes(&self) -> bool {
        false
    }
    /// Speculative preallocation beyond EOF reserved by a buffered write
    /// that extends a file of `isize_pages` pages (`xfs_iomap_prealloc_size`),
    /// pages. `prev_run` is the length of the mapped range (blocks or
    /// delalloc) ending right where the write starts, as a power of two
    /// rounded down; None when a hole precedes the write. 0: none.
    fn eof_prealloc_pages(&self, isize_pages: u64, prev_run: Option<u64>) -> u64 {
        let _ = (isize_pages, prev_run);
        0
    }
    /// `->update_time` of a write that changes the file's mtime and ctime
    /// (`inode_update_time` from `file_update_time`). None: the generic
    /// form, `generic_update_time`, which only marks the inode dirty
    /// (I_DIRTY_SYNC) and costs nothing modelled (tmpfs; ext4's journalled
    /// `ext4_dirty_inode` and btrfs's transaction are not modelled).
    fn update_time<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
        inode: &'a InodeRef,
    ) -> Option<LocalBoxFuture<'a, ()>> {
        let _ = (m, sb, inode);
        None
    }
    /// CPU of converting one completed ioend's unwritten blocks to written
    /// (`xfs_iomap_write_unwritten`: a transaction under the ilock held
    /// exclusive) in a file of `records` extent records, ns. 0: conversion
    /// not modelled for this filesystem.
    fn unwritten_convert_ns(&self, records: usize) -> Time {
        let _ = records;
        0
    }
    /// The workqueue on which ioends that need task context (unwritten
    /// conversion, PG_dropbehind folios) complete, one work item per inode
    /// (XFS `m_unwritten_workqueue` and `xfs_end_io`). None: such ioends end
    /// in the bio's completion and PG_dropbehind folios are dropped by a
    /// kworker per bio.
    fn end_io_wq(&self, m: &Rc<Machine>, sb: &SuperBlock) -> Option<Workqueue> {
        let _ = (m, sb);
        None
    }
    /// Whether every ioend of this filesystem completes on its
    /// [`Filesystem::end_io_wq`] (btrfs: each written range is an ordered
    /// extent, finished on its endio_write workers), not only those over
    /// unwritten blocks or with PG_dropbehind folios. Default: no.
    fn every_ioend_in_task(&self) -> bool {
        false
    }
    /// The name of the per-inode completion work on
    /// [`Filesystem::end_io_wq`] (XFS `xfs_end_io`, btrfs
    /// `btrfs_finish_ordered_io`). Default: iomap's.
    fn end_io_work_name(&self) -> &'static str {
        "iomap_end_io"
    }
    /// Writeback wrote data of `sb`: metadata it changed (allocation,
    /// extent and checksum trees, size updates) now waits for the next log
    /// force or transaction commit.
    fn data_written(&self, sb: &SuperBlock) {
        let _ = sb;
    }
    /// What the filesystem does before a buffered read's bio of pages
    /// `[start, end)` of `inode` goes to the device (btrfs:
    /// `btrfs_lookup_bio_sums`). The generic form: nothing.
    fn before_read_bio<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
        inode: &'a InodeRef,
        start: u64,
        end: u64,
    ) -> LocalBoxFuture<'a, ()> {
        let _ = (m, sb, inode, start, end);
        Box::pin(async {})
    }
    /// The end of a buffered read's bio of pages `[start, end)`, called at
    /// the device's completion (interrupt context, so nothing here may
    /// sleep): `done` marks the folios up to date and unlocks them, waking
    /// the readers waiting on them. The generic form calls it at once
    /// (`iomap_read_end_io` / `mpage_read_end_io` in the completion); btrfs
    /// queues the verification of the data checksums on its btrfs-endio
    /// workqueue and calls it from there.
    fn end_read_bio(
        &self,
        m: &Rc<Machine>,
        sb: &Rc<SuperBlock>,
        start: u64,
        end: u64,
        done: Box<dyn FnOnce()>,
    ) {
        let _ = (m, sb, start, end);
        done();
    }
    /// The end of the I/O of pages `[start, end)` of `inode`, in task
    /// context on [`Filesystem::end_io_wq`], before their writeback ends
    /// (btrfs: `btrfs_finish_ordered_io` of the ordered extent written).
    /// The generic form: nothing.
    fn end_ordered_range<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
        inode: &'a InodeRef,
        start: u64,
        end: u64,
    ) -> LocalBoxFuture<'a, ()> {
        let _ = (m, sb, inode, start, end);
        Box::pin(async {})
    }
    /// Page-cache pages `sb` holds in mappings of its own, not of a VFS
    /// inode (btrfs: tree blocks in the btree inode): (cached, dirty,
    /// writeback). The page counters include them.
    fn internal_pages(&self, _sb: &SuperBlock) -> (u64, u64, u64) {
        (0, 0, 0)
    }
    /// Filesystem counters of `sb` for the results (btrfs: commit_stats),
    /// (name, unit, value).
    fn stats(&self, sb: &SuperBlock) -> Vec<(&'static str, &'static str, f64)> {
        let _ = sb;
        Vec::new()
    }
    /// Gauges of `sb` sampled over the run (btrfs: tasks blocked per tree
    /// lock class, the commit's wait chain), (name, unit, value).
    fn samples(&self, sb: &SuperBlock) -> Vec<(String, &'static str, f64)> {
        let _ = sb;
        Vec::new()
    }
    /// Every transaction commit of `sb`: (start, duration), ns.
    fn commit_log(&self, sb: &SuperBlock) -> Vec<(Time, Time)> {
        let _ = sb;
        Vec::new()
    }
    /// What `->fsync` does after the data is written and waited on: a journal
    /// or log commit and a cache flush (`datasync` skips metadata-only work).
    fn fsync_commit<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
        datasync: bool,
    ) -> LocalBoxFuture<'a, ()>;
    /// `->sync_fs(sb, wait)`.
    fn sync_fs<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
        wait: bool,
    ) -> LocalBoxFuture<'a, ()>;
    /// `->put_super` and the rest of the filesystem's own shutdown (log
    /// unmount record, superblock write, device flush).
    fn put_super<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
    ) -> LocalBoxFuture<'a, ()>;
    /// Chooses an inode's writeback context among `nr_wb_ctx` when it is
    /// first dirtied (`->get_inode_wb_ctx_idx()` of the parallel-writeback
    /// series). The generic choice, for every policy: `i_ino % nr_wb_ctx`.
    fn wb_ctx_for_inode(
        &self,
        sb: &SuperBlock,
        inode: &Inode,
        nr_wb_ctx: usize,
        policy: WbCtxAssign,
    ) -> usize {
        let _ = (sb, policy);
        (inode.ino % nr_wb_ctx.max(1) as u64) as usize
    }
    /// `mkdir -p` of `dir` (a path inside the filesystem, without leading
    /// or trailing '/'): for a filesystem whose directories decide where
    /// later files go (XFS: a new directory takes the next AG of the rotor
    /// and an inode there). The default keeps no directories.
    fn mkdir(&self, m: &Machine, sb: &SuperBlock, dir: &str) {
        let _ = (m, sb, dir);
    }
    /// The inode number of a new regular file in directory `dir` (a path
    /// inside the filesystem, "" for the root), for a filesystem whose inode
    /// numbers mean something (XFS: the AG). None: the superblock's counter.
    fn alloc_ino(&self, m: &Machine, sb: &SuperBlock, dir: &str) -> Option<u64> {
        let _ = (m, sb, dir);
        None
    }
    /// Allocates the blocks of the delalloc extent holding `[s, e)` at
    /// writeback (`xfs_bmapi_convert_delalloc`). The generic form: the
    /// allocation cost `delalloc_alloc_ns` under the ilock held exclusive.
    fn convert_delalloc<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
        inode: &'a InodeRef,
        (s, e): (u64, u64),
    ) -> LocalBoxFuture<'a, ()> {
        let _ = sb;
        Box::pin(async move {
            let alloc_ns = self.costs().delalloc_alloc_ns;
            if alloc_ns > 0 {
                let ilock = inode.ilock.down_write().await;
                m.sched().cpu(alloc_ns).await;
                inode.extents.borrow_mut().allocate(s, e);
                drop(ilock);
            } else {
                inode.extents.borrow_mut().allocate(s, e);
            }
        })
    }
    /// Converts the unwritten blocks of a completed ioend `[s, e)` to
    /// written (`xfs_iomap_write_unwritten`). The generic form:
    /// [`Filesystem::unwritten_convert_ns`] under the ilock held exclusive.
    fn convert_unwritten<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
        inode: &'a InodeRef,
        (s, e): (u64, u64),
    ) -> LocalBoxFuture<'a, ()> {
        let _ = sb;
        Box::pin(async move {
            let conv = self.unwritten_convert_ns(inode.extents.borrow().nr_records());
            let ilock = inode.ilock.down_write().await;
            m.sched().cpu(conv).await;
            inode.extents.borrow_mut().convert_unwritten(s, e);
            drop(ilock);
        })
    }
    /// The filesystem's part of `->write_begin` for the folios `[s, e)` of a
    /// buffered write, before they are found or allocated (ext4's
    /// `ext4_da_write_begin`: the delalloc free-space check and the
    /// reservation, or block allocation without delalloc). None: nothing
    /// to do (the default; no boxed future per step).
    fn write_begin<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
        inode: &'a InodeRef,
        (s, e): (u64, u64),
    ) -> Option<LocalBoxFuture<'a, ()>> {
        let _ = (m, sb, inode, s, e);
        None
    }
    /// `pages` blocks were allocated outside writeback (fallocate, a
    /// file laid out beforehand). Default: nothing.
    fn blocks_allocated(&self, sb: &SuperBlock, pages: u64) {
        let _ = (sb, pages);
    }
    /// Whether an unlinked file's freed space can be allocated again only
    /// once the transaction that freed it is on disk (ext4's jbd2 commit,
    /// XFS's busy extents until the log force): the filesystem then hands
    /// the superblock's deferred regions back after each commit
    /// ([`SuperBlock::take_uncommitted_regions`]). Default: no, at once.
    fn frees_space_at_commit(&self) -> bool {
        false
    }
    /// `->setattr` with a size of zero (`open(O_TRUNC)`, fs/open.c
    /// `do_truncate`), `inode_lock` held: the filesystem frees the file's
    /// blocks and drops its page cache (with `truncate_setsize_zero` of
    /// model/fs/open.rs). Default: nothing; only filesystems that override
    /// this (btrfs) accept `trunc` in a scenario.
    fn setsize_zero<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
        inode: &'a InodeRef,
    ) -> LocalBoxFuture<'a, ()> {
        let _ = (m, sb, inode);
        Box::pin(async {})
    }
    /// `->release` at the last close of a file (fs/file_table.c `__fput`).
    /// Default: nothing.
    fn release_file<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
        inode: &'a InodeRef,
    ) -> LocalBoxFuture<'a, ()> {
        let _ = (m, sb, inode);
        Box::pin(async {})
    }
    /// An unlinked inode is evicted: its blocks and delalloc reservations
    /// go back to the filesystem (called before its pages are dropped).
    /// Default: nothing (no free-space accounting).
    fn evict_blocks(&self, sb: &SuperBlock, inode: &Inode) {
        let _ = (sb, inode);
    }
    /// The readahead window (`bdi->ra_pages`, pages) the filesystem sets on
    /// its bdi at mount, from the default `ra_pages`. Default: unchanged.
    fn bdi_ra_pages(&self, ra_pages: u64) -> u64 {
        ra_pages
    }
    /// Sets up a new inode the filesystem gives a size or blocks at birth
    /// (a block device's inode: its capacity, all blocks written). Default:
    /// nothing, an empty file.
    fn init_inode(&self, inode: &Inode) {
        let _ = inode;
    }
    /// Byte offset on the device where a new file's data goes, given the
    /// data region the superblock gave it ([`SuperBlock::alloc_data_region`]).
    fn place_file(&self, sb: &SuperBlock, region: u64) -> u64 {
        let _ = sb;
        region * FILE_REGION_BYTES
    }
}

// ------------------------------------------------------------ super_block

/// `sb->s_flags` bits used here.
pub mod flags {
    /// SB_ACTIVE: the superblock is live (cleared at the start of shutdown).
    pub const SB_ACTIVE: u32 = 1 << 30;
    pub const SB_RDONLY: u32 = 1 << 0;
    /// SB_DYING: shutdown has begun (`super_wake(sb, SB_DYING)`).
    pub const SB_DYING: u32 = 1 << 24;
    /// SB_DEAD: shutdown finished (`kill_super_notify`).
    pub const SB_DEAD: u32 = 1 << 21;
}

/// One superblock.
pub struct SuperBlock {
    pub id: u64,
    /// Name given in the scenario (its mount point).
    pub name: String,
    pub fs: Rc<dyn Filesystem>,
    pub bdi: Rc<Bdi>,
    pub device: Option<BlockDevice>,
    pub s_umount: RwSemaphore,
    pub s_flags: Cell<u32>,
    /// `sb->s_inodes`, by inode number.
    pub inodes: RefCell<BTreeMap<u64, InodeRef>>,
    pub next_ino: Cell<u64>,
    /// Data regions ([`FILE_REGION_BYTES`] each) held by live files, by
    /// index: a new file takes the lowest free one, an unlinked file's goes
    /// back when it is evicted.
    pub data_regions: RefCell<BTreeSet<u64>>,
    /// Regions of files evicted in the running transaction, on a filesystem
    /// that frees space at commit ([`Filesystem::frees_space_at_commit`]).
    pub uncommitted_regions: RefCell<Vec<u64>>,
    /// `s_active`: active references (one per mount of this superblock).
    pub s_active: Cell<u32>,
    /// When shutdown finished and the device was released (SB_DEAD), ns.
    pub s_dead_at: Cell<Option<Time>>,
    /// `s_isw_nr_in_flight` (umount_drain = per_sb): inode wb switches of
    /// this superblock's inodes prepared and not yet finished.
    pub s_isw_nr_in_flight: Cell<u64>,
    /// Teardown has begun (cgroup_writeback_umount returned; evict_inodes
    /// next): no switch may touch this superblock's inodes any more.
    pub s_isw_torn_down: Cell<bool>,
}

impl SuperBlock {
    /// Whether SB_ACTIVE is set.
    pub fn active(&self) -> bool {
        self.s_flags.get() & flags::SB_ACTIVE != 0
    }

    /// The `wait_var_event` key of `sb->s_flags` (woken at SB_DEAD).
    pub fn s_flags_key(&self) -> VarKey {
        // Superblock ids are unique machine-wide; the low bits keep room for
        // other per-superblock variables.
        VarKey(self.id << 4)
    }

    /// The `wait_var_event` key of `s_isw_nr_in_flight`.
    pub fn isw_key(&self) -> VarKey {
        VarKey((self.id << 4) | 1)
    }

    /// `s_isw_nr_in_flight`.
    pub fn isw_in_flight(&self) -> u64 {
        self.s_isw_nr_in_flight.get()
    }

    /// Pins the superblock for a switch (per_sb drain).
    pub fn isw_pin(&self) {
        self.s_isw_nr_in_flight
            .set(self.s_isw_nr_in_flight.get() + 1);
    }

    /// Unpins, waking an umount waiting for zero.
    pub fn isw_unpin(&self, m: &Machine) {
        let n = self.s_isw_nr_in_flight.get().saturating_sub(1);
        self.s_isw_nr_in_flight.set(n);
        if n == 0 {
            m.vars().wake_up_var(self.isw_key());
        }
    }

    /// Whether teardown has begun (see `s_isw_torn_down`).
    pub fn isw_torn_down(&self) -> bool {
        self.s_isw_torn_down.get()
    }

    /// Whether shutdown has finished (SB_DEAD).
    pub fn dead(&self) -> bool {
        self.s_flags.get() & flags::SB_DEAD != 0
    }

    /// Looks up or creates the inode of file `name` (files are numbered in the
    /// order they are first opened).
    pub fn iget(&self, ino: u64) -> Option<InodeRef> {
        self.inodes.borrow().get(&ino).cloned()
    }

    /// The lowest data region no live file holds, taken. Regions start at
    /// 1 (the first file's data at 1 GiB, as before regions were reused).
    /// This stands for the allocators' preference for low, freed space
    /// (ext4's mballoc goal in the inode's group, XFS's by-block btree near
    /// the AG start): a file created after another was unlinked and evicted
    /// lands where that one was, so its writes reach blocks the device has
    /// written before, once the region is free again
    /// ([`SuperBlock::release_data_region`]: at once, or after the commit
    /// that freed it).
    pub fn alloc_data_region(&self) -> u64 {
        let mut held = self.data_regions.borrow_mut();
        let mut r = 1;
        for &h in held.range(1..) {
            if h != r {
                break;
            }
            r += 1;
        }
        held.insert(r);
        r
    }

    /// An evicted file's data region (its data started at `disk_base`): free
    /// at once, or, where the filesystem frees space at commit, held until
    /// the next commit ([`SuperBlock::take_uncommitted_regions`]).
    pub fn release_data_region(&self, disk_base: u64) {
        let region = disk_base / FILE_REGION_BYTES;
        if self.fs.frees_space_at_commit() {
            self.uncommitted_regions.borrow_mut().push(region);
        } else {
            self.data_regions.borrow_mut().remove(&region);
        }
    }

    /// A commit of the filesystem's journal or log starts: the regions
    /// freed so far are in it. Give them to
    /// [`SuperBlock::free_committed_regions`] once it is on disk.
    pub fn take_uncommitted_regions(&self) -> Vec<u64> {
        std::mem::take(&mut *self.uncommitted_regions.borrow_mut())
    }

    /// The commit that freed `regions` is on disk: they can be allocated
    /// again.
    pub fn free_committed_regions(&self, regions: Vec<u64>) {
        let mut held = self.data_regions.borrow_mut();
        for r in regions {
            held.remove(&r);
        }
    }

    /// Allocates a new inode in the root directory (`new_inode` +
    /// `insert_inode_hash`).
    pub fn new_inode(&self, m: &Machine) -> InodeRef {
        self.new_inode_in(m, "")
    }

    /// Allocates a new inode in directory `dir`; the filesystem may choose
    /// its number ([`Filesystem::alloc_ino`]).
    pub fn new_inode_in(&self, m: &Machine, dir: &str) -> InodeRef {
        let ino = match self.fs.alloc_ino(m, self, dir) {
            Some(ino) => ino,
            None => {
                let ino = self.next_ino.get();
                self.next_ino.set(ino + 1);
                ino
            }
        };
        let base = self.fs.place_file(self, self.alloc_data_region());
        let ilock = RwSemaphore::new(
            m.locks().class(&format!("{}:i_lock", self.fs.name())),
            m.sched(),
        );
        let i_rwsem = RwSemaphore::new(
            m.locks().class(&format!("{}:i_rwsem", self.fs.name())),
            m.sched(),
        );
        let inode = Inode::new(ino, self.id, base, m.now(), (i_rwsem, ilock));
        {
            // inode_init_always: AS_STABLE_WRITES from SB_I_STABLE_WRITES
            // (set at mount when bdev_stable_writes()), or the filesystem's
            // own; then the filesystem's folio order range.
            let mut mapping = inode.mapping.borrow_mut();
            let dev_stable = self
                .device
                .as_ref()
                .is_some_and(|d| d.profile().stable_writes);
            mapping.set_stable_writes(dev_stable || self.fs.stable_writes());
            mapping.set_max_folio_order(self.fs.max_folio_order());
        }
        self.fs.init_inode(&inode);
        self.inodes.borrow_mut().insert(ino, inode.clone());
        inode
    }
}

// ------------------------------------------------------------ mounts

/// `struct mount`.
pub struct Mount {
    pub id: u64,
    /// The mount point (the scenario's name for the filesystem).
    pub mountpoint: String,
    pub sb: Rc<SuperBlock>,
    /// `mnt_count`: references (the attachment to the namespace holds one).
    pub(in crate::model::fs) mnt_count: Cell<u64>,
    /// `mnt.mnt_flags` (`namespace::mnt_flags`).
    pub(in crate::model::fs) mnt_flags: Cell<u32>,
    /// `mnt_ns != NULL`: attached to the namespace.
    pub(in crate::model::fs) attached: Cell<bool>,
}

impl Mount {
    /// `mnt_get_count`.
    pub fn mnt_count(&self) -> u64 {
        self.mnt_count.get()
    }

    /// Whether it is still in the namespace (not yet unmounted).
    pub fn is_attached(&self) -> bool {
        self.attached.get()
    }

    /// `mnt.mnt_flags`.
    pub fn mnt_flags(&self) -> u32 {
        self.mnt_flags.get()
    }

    pub(in crate::model::fs) fn set_flag(&self, f: u32) {
        self.mnt_flags.set(self.mnt_flags.get() | f);
    }
}

/// Counters of the namespace, for results.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NsStats {
    /// Successful mounts.
    pub mounts: u64,
    /// Successful umounts (lazy included).
    pub umounts: u64,
    /// Lazy (MNT_DETACH) umounts among them.
    pub lazy_umounts: u64,
    /// umount(2) calls that got EBUSY.
    pub umount_ebusy: u64,
    /// Mounts and device reuses that got EBUSY because the device was claimed.
    pub device_ebusy: u64,
    /// Lists of mounts handed to `queue_rcu_work` (DetachRelease::Deferred).
    pub deferred_releases: u64,
    /// Final mntputs that went through `delayed_mntput_work`.
    pub delayed_mntputs: u64,
}

/// The mount namespace of the machine and the global state of
/// fs/namespace.c.
pub struct MntNamespace {
    /// `namespace_sem`.
    pub namespace_sem: RwSemaphore,
    /// The mount table: mount point -> mount (the namespace's `mounts` tree).
    pub(in crate::model::fs) mounts: RefCell<BTreeMap<String, Rc<Mount>>>,
    /// `unmounted`: mounts taken out by `umount_tree`, released by
    /// `namespace_unlock` (protected by `namespace_sem`).
    pub(in crate::model::fs) unmounted: RefCell<Vec<Rc<Mount>>>,
    /// `delayed_mntput_list`.
    pub(in crate::model::fs) delayed_mntput_list: RefCell<Vec<Rc<Mount>>>,
    /// `delayed_mntput_work` (created at first use: it needs the machine).
    pub(in crate::model::fs) delayed_mntput_work: OnceCell<DelayedWork>,
    /// Each user task's pending task_work (`__cleanup_mnt` callbacks).
    pub(in crate::model::fs) task_works: RefCell<BTreeMap<TaskId, Vec<Rc<Mount>>>>,
    pub(in crate::model::fs) stats: Cell<NsStats>,
}

impl MntNamespace {
    /// An empty namespace.
    pub fn new(locks: &LockStats, sched: &Sched) -> Self {
        MntNamespace {
            namespace_sem: RwSemaphore::new(locks.class("namespace_sem"), sched),
            mounts: RefCell::new(BTreeMap::new()),
            unmounted: RefCell::new(Vec::new()),
            delayed_mntput_list: RefCell::new(Vec::new()),
            delayed_mntput_work: OnceCell::new(),
            task_works: RefCell::new(BTreeMap::new()),
            stats: Cell::new(NsStats::default()),
        }
    }

    /// A copy of the counters.
    pub fn stats(&self) -> NsStats {
        self.stats.get()
    }

    /// Mounts in the namespace now.
    pub fn nr_mounts(&self) -> usize {
        self.mounts.borrow().len()
    }

    pub(in crate::model::fs) fn count(&self, f: impl FnOnce(&mut NsStats)) {
        let mut s = self.stats.get();
        f(&mut s);
        self.stats.set(s);
    }
}

// ------------------------------------------------------------ the VFS state

/// One `cgroup_writeback_umount` call, as observed (statistics).
#[derive(Clone, Debug)]
pub struct IswDrainRecord {
    /// The superblock's name.
    pub sb: String,
    /// Time spent inside, ns.
    pub ns: Time,
    /// `isw_nr_in_flight` (machine-wide) at entry.
    pub in_flight: u64,
    /// This superblock's own switches in flight at entry (per_sb's
    /// counter); None under the other policies, which do not pin.
    pub sb_in_flight: Option<u64>,
    /// Normal RCU grace periods that completed while it waited.
    pub gps: u64,
    /// Inodes switched machine-wide while it waited.
    pub switched: u64,
}

/// The VFS of one machine.
pub struct Vfs {
    /// `super_blocks`, by superblock id.
    supers: RefCell<BTreeMap<u64, Rc<SuperBlock>>>,
    /// The mount namespace: mount table, `namespace_sem`, delayed mntput.
    ns: MntNamespace,
    /// `isw_wq` ("inode_switch_wbs"): inode wb switch work.
    isw_wq: Workqueue,
    /// `isw_nr_in_flight`: inode wb switch contexts prepared and not yet
    /// finished, machine-wide.
    isw_nr_in_flight: Cell<u64>,
    /// Each `cgroup_writeback_umount` call: its superblock, time and what
    /// it waited for (statistics).
    isw_drain_ns: RefCell<Vec<IswDrainRecord>>,
    /// Each superblock shutdown's phases: (superblock name, phase, ns)
    /// (statistics).
    shutdown_phases: RefCell<Vec<(String, &'static str, Time)>>,
    /// Inodes switched so far (statistics).
    isw_switched: Cell<u64>,
}

impl Vfs {
    /// `vfs_caches_init` + `mnt_init`: an empty superblock list and mount
    /// namespace, and the wb-switch workqueue.
    pub fn boot(k: &Kernel) -> Vfs {
        let isw_wq = alloc_workqueue(k.sched(), "inode_switch_wbs", WqFlags::default(), 0);
        Vfs {
            supers: RefCell::new(BTreeMap::new()),
            ns: MntNamespace::new(k.locks(), k.sched()),
            isw_wq,
            isw_nr_in_flight: Cell::new(0),
            isw_drain_ns: RefCell::new(Vec::new()),
            shutdown_phases: RefCell::new(Vec::new()),
            isw_switched: Cell::new(0),
        }
    }

    /// The mount namespace.
    pub fn ns(&self) -> &MntNamespace {
        &self.ns
    }

    /// The superblock with id `id`, if it is on the list.
    pub fn super_get(&self, id: u64) -> Option<Rc<SuperBlock>> {
        self.supers.borrow().get(&id).cloned()
    }

    /// Every superblock on the list, by id (`iterate_supers` takes a copy).
    pub fn supers(&self) -> Vec<Rc<SuperBlock>> {
        self.supers.borrow().values().cloned().collect()
    }

    /// Number of superblocks on the list.
    pub fn nr_supers(&self) -> usize {
        self.supers.borrow().len()
    }

    /// Puts a new superblock on the list (`sget`).
    pub(crate) fn super_add(&self, sb: Rc<SuperBlock>) {
        self.supers.borrow_mut().insert(sb.id, sb);
    }

    /// Takes a superblock off the list (`__put_super`).
    pub(crate) fn super_del(&self, id: u64) {
        self.supers.borrow_mut().remove(&id);
    }

    /// `isw_wq`.
    pub fn isw_wq(&self) -> &Workqueue {
        &self.isw_wq
    }

    /// `isw_nr_in_flight`.
    pub fn isw_nr_in_flight(&self) -> u64 {
        self.isw_nr_in_flight.get()
    }

    /// Adds `d` to `isw_nr_in_flight`.
    pub(crate) fn isw_nr_in_flight_add(&self, d: i64) {
        let n = self.isw_nr_in_flight.get() as i64 + d;
        self.isw_nr_in_flight.set(n.max(0) as u64);
    }

    /// Records one `cgroup_writeback_umount` call.
    pub(crate) fn isw_record_drain(&self, r: IswDrainRecord) {
        self.isw_drain_ns.borrow_mut().push(r);
    }

    /// Records how long phase `phase` of superblock `sb`'s shutdown took.
    pub(crate) fn record_shutdown_phase(&self, sb: &str, phase: &'static str, ns: Time) {
        self.shutdown_phases
            .borrow_mut()
            .push((sb.to_string(), phase, ns));
    }

    /// Every superblock shutdown phase so far: (superblock name, phase, ns).
    pub fn shutdown_phases(&self) -> Vec<(String, &'static str, Time)> {
        self.shutdown_phases.borrow().clone()
    }

    /// Every `cgroup_writeback_umount` call so far.
    pub fn isw_drains(&self) -> Vec<IswDrainRecord> {
        self.isw_drain_ns.borrow().clone()
    }

    /// Counts switched inodes.
    pub(crate) fn isw_record_switched(&self, n: u64) {
        self.isw_switched.set(self.isw_switched.get() + n);
    }

    /// Time of every `cgroup_writeback_umount` call so far, ns, by
    /// superblock name.
    pub fn isw_drain_times(&self) -> Vec<(String, Time)> {
        self.isw_drain_ns
            .borrow()
            .iter()
            .map(|r| (r.sb.clone(), r.ns))
            .collect()
    }

    /// Inodes switched so far.
    pub fn isw_switched(&self) -> u64 {
        self.isw_switched.get()
    }
}

// ------------------------------------------------------------ the machine

/// One modelled machine and its kernel.
pub struct Machine {
    k: Rc<Kernel>,
    mm: Rc<Mm>,
    vfs: Vfs,
    costs: CpuCosts,
    policies: Policies,
    process_start_ns: Time,
    btrfs_btree_kernel_file: bool,
}

impl Machine {
    /// Assembles a machine in `sim`: the kernel services, mm and the VFS.
    /// [`Machine::new`] (fs/boot.rs) boots it, adding the fs-side work items
    /// mm/ needs.
    pub(in crate::model::fs) fn assemble(
        sim: &Sim,
        cfg: MachineConfig,
    ) -> Result<Rc<Self>, String> {
        let k = Rc::new(Kernel::boot(
            sim,
            &KernelParams {
                cpus: cfg.cpus,
                hz: cfg.hz,
                rcu: cfg.rcu_params(),
                wakeup_latency_ns: cfg.wakeup_latency_ns,
                tick_cost_ns: cfg.tick_cost_ns,
                cpu_cost_percent: cfg.cpu_cost_percent,
            },
        )?);
        let mm = Rc::new(Mm::boot(
            k.clone(),
            &MmParams {
                memory_bytes: cfg.memory_bytes,
                reserved_bytes: cfg.reserved_bytes,
                dirty: cfg.dirty.clone(),
            },
        )?);
        let vfs = Vfs::boot(&k);
        let m = Rc::new(Machine {
            k,
            mm,
            vfs,
            costs: cfg.costs,
            policies: cfg.policies,
            process_start_ns: cfg.process_start_ns,
            btrfs_btree_kernel_file: cfg.btrfs_btree_kernel_file,
        });
        Ok(m)
    }

    /// The kernel services.
    pub fn kernel(&self) -> &Rc<Kernel> {
        &self.k
    }

    /// Memory management.
    pub fn mm(&self) -> &Rc<Mm> {
        &self.mm
    }

    /// The VFS.
    pub fn vfs(&self) -> &Vfs {
        &self.vfs
    }

    /// The simulation.
    pub fn sim(&self) -> &Sim {
        self.k.sim()
    }

    /// Current time, ns.
    pub fn now(&self) -> Time {
        self.k.now()
    }

    /// The scheduler.
    pub fn sched(&self) -> &Sched {
        self.k.sched()
    }

    /// RCU.
    pub fn rcu(&self) -> &Rcu {
        self.k.rcu()
    }

    /// The lock classes (lock_stat).
    pub fn locks(&self) -> &LockStats {
        self.k.locks()
    }

    /// The `wait_var_event` table.
    pub fn vars(&self) -> &WaitVarTable {
        self.k.vars()
    }

    /// `system_wq`.
    pub fn system_wq(&self) -> &Workqueue {
        self.k.system_wq()
    }

    /// A fresh id (bdis, wbs, superblocks).
    pub fn new_id(&self) -> u64 {
        self.k.new_id()
    }

    /// One jiffy at the machine's HZ, ns.
    pub fn jiffy_ns(&self) -> Time {
        self.k.jiffy_ns()
    }

    /// Counts one model tracepoint hit.
    pub fn count_event(&self, name: &'static str) {
        self.k.count_event(name);
    }

    /// Counts one hit of a tracepoint about `inode` (attributable to the
    /// files a workload uses).
    pub fn count_inode_event(&self, name: &'static str, inode: &Inode) {
        self.k.count_inode_event(name, (inode.sb_id, inode.ino));
    }

    /// Records a violation of `invariant` involving `objects`, stamped
    /// with the simulated time.
    pub fn violation(&self, invariant: &str, objects: ViolationObjects, message: String) {
        self.k.violation(invariant, objects, message);
    }

    /// The policies in force.
    pub fn policies(&self) -> &Policies {
        &self.policies
    }

    /// CPU costs of the data paths.
    pub fn costs(&self) -> &CpuCosts {
        &self.costs
    }

    /// CPU time to start a command such as umount(8), ns.
    pub fn process_start_ns(&self) -> Time {
        self.process_start_ns
    }

    /// Whether btrfs's btree inode has `AS_KERNEL_FILE` (tree blocks charged
    /// to no user memcg), as since 6.18.
    pub fn btrfs_btree_kernel_file(&self) -> bool {
        self.btrfs_btree_kernel_file
    }
}
