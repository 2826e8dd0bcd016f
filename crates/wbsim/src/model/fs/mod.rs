//! `fs/`: the VFS pieces writeback and unmount use, and one module per
//! filesystem.
//!
//! Filesystems sit behind the [`Filesystem`] trait, which carries what the
//! studied mechanisms need of them: write_begin/write_end CPU cost, writepages,
//! fsync, sync_fs, put_super and its shutdown cost, whether the filesystem has
//! writeback at all (tmpfs does not), a per-superblock bdi (btrfs), FOP_DONTCACHE
//! support, the hook that chooses an inode's writeback context, and the costs
//! of the extent paths (ilock holds, delalloc allocation, unwritten
//! conversion, speculative preallocation) with the workqueue on which ioends
//! complete in task context (XFS).

pub mod btrfs;
pub mod ext4;
pub mod extent;
pub mod fs_writeback;
pub mod inode;
pub mod namespace;
pub mod read_write;
pub mod super_;
pub mod sync;
pub mod tmpfs;
pub mod writepages;
pub mod xfs;

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use sim::Time;

use crate::model::kernel::workqueue::Workqueue;
use crate::model::machine::Machine;
use crate::model::mm::backing_dev::{SyncMode, WbReason};
pub use crate::model::policy::WbCtxAssign;
use inode::InodeRef;
use super_::SuperBlock;

/// A boxed future borrowing its arguments (async trait methods on `dyn`).
pub type LocalBoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// `struct writeback_control` (include/linux/writeback.h).
#[derive(Clone, Debug)]
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
        }
    }
}

/// A filesystem type's behaviour.
pub trait Filesystem {
    /// The type name (`ext4`, `xfs`, `btrfs`, `tmpfs`).
    fn name(&self) -> &'static str;
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
    /// CPU per page of `write_begin` + copy + `write_end` in a buffered write, ns.
    fn write_page_ns(&self) -> Time;
    /// CPU per buffered write call besides its pages and the syscall entry, ns.
    fn write_call_ns(&self) -> Time {
        0
    }
    /// CPU per page submitted by writepages (page walk, bio building), ns.
    fn writepage_ns(&self) -> Time;
    /// CPU to free one page of an evicted inode's cache or data, ns.
    fn evict_page_ns(&self) -> Time {
        super_::TRUNCATE_PAGE_NS
    }
    /// CPU of one `->writepages` call that writes at least one page, besides
    /// the per-page cost (block mapping, allocation, ioend/bio setup), ns.
    fn writepages_call_ns(&self) -> Time {
        0
    }
    /// Part of [`Filesystem::write_call_ns`] spent mapping the range
    /// (`->iomap_begin`: extent lookup, delalloc reservation) under the
    /// inode's ilock held exclusive, ns.
    fn write_ilock_ns(&self) -> Time {
        0
    }
    /// Part of [`Filesystem::writepages_call_ns`] spent looking up the
    /// blocks of each contiguous dirty range (`xfs_map_blocks`) under the
    /// ilock held shared, ns. Paid per range.
    fn map_blocks_ns(&self) -> Time {
        0
    }
    /// CPU of allocating the blocks of a delalloc extent at writeback
    /// (`xfs_bmapi_convert_delalloc`: a transaction, the allocator) under
    /// the ilock held exclusive, besides [`Filesystem::writepages_call_ns`],
    /// ns. Paid per dirty range that has holes; ranges with unwritten or
    /// written blocks skip it.
    fn delalloc_alloc_ns(&self) -> Time {
        0
    }
    /// Speculative preallocation beyond EOF reserved by a buffered write
    /// that extends a file to `size_pages` pages (`xfs_iomap_prealloc_size`),
    /// pages. 0: none.
    fn eof_prealloc_pages(&self, size_pages: u64) -> u64 {
        let _ = size_pages;
        0
    }
    /// CPU of converting one completed ioend's unwritten blocks to written
    /// (`xfs_iomap_write_unwritten`: a transaction under the ilock held
    /// exclusive) in a file of `records` extent records, ns. 0: conversion
    /// not modelled for this filesystem.
    fn unwritten_convert_ns(&self, records: usize) -> Time {
        let _ = records;
        0
    }
    /// CPU of `fallocate(2)` mode 0, per call, ns.
    fn fallocate_ns(&self) -> Time {
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
    /// Writes dirty pages of `inode` as `wbc` asks (`->writepages`): the
    /// generic writepages, then [`Filesystem::data_written`] if it wrote
    /// anything.
    fn writepages<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
        inode: &'a InodeRef,
        wbc: &'a mut WritebackControl,
    ) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            let before = wbc.nr_to_write;
            writepages::generic_writepages(m, sb, inode, wbc).await;
            if wbc.nr_to_write < before {
                self.data_written(sb);
            }
        })
    }
    /// Writeback wrote data of `sb`: metadata it changed (allocation,
    /// extent and checksum trees, size updates) now waits for the next log
    /// force or transaction commit.
    fn data_written(&self, sb: &SuperBlock) {
        let _ = sb;
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
    /// Chooses an inode's writeback context among `nr_wb_ctx`.
    fn wb_ctx_for_inode(&self, ino: u64, nr_wb_ctx: usize, policy: WbCtxAssign) -> usize {
        let _ = policy;
        (ino % nr_wb_ctx.max(1) as u64) as usize
    }
    /// Byte offset on the device where a new file's data goes.
    fn place_file(&self, sb: &SuperBlock, ino: u64) -> u64 {
        // One 1 GiB region per file: sequential files give sequential I/O and
        // different files are far apart (device capacity is not modelled).
        let _ = sb;
        ino.wrapping_mul(1 << 30)
    }
}
