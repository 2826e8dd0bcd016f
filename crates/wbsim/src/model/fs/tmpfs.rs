//! tmpfs (mm/shmem.c): file data lives in shmem pages that are never written
//! back (its bdi has no BDI_CAP_WRITEBACK) and are not counted as dirty
//! (`noop_dirty_folio`). fsync and sync_fs do nothing; shutdown frees the pages
//! (`evict_inodes`) and the superblock info (`shmem_put_super`).
//!
//! Simplified: no swap; shmem pages are accounted as memory in use (`nr_shmem`),
//! outside the page cache's reclaimable pages.

use std::rc::Rc;

use sim::Time;

use crate::model::fs::vfs::Machine;
use crate::model::fs::vfs::SuperBlock;
use crate::model::fs::vfs::{Filesystem, FsCosts, LocalBoxFuture};

/// CPU per page of a tmpfs write (`shmem_write_begin` with page allocation and
/// zeroing, copy, `shmem_write_end`), ns: ~1 us (order of magnitude).
pub const SHMEM_WRITE_PAGE_NS: Time = 1_000;

/// CPU of tmpfs's own unmount work (`shmem_put_super`: free the sbinfo,
/// percpu counters, mempolicy), ns: 0.5 us. Estimate; a clean tmpfs
/// umount(2) measured ~5 us in total on this project's non-RT 6.18 VM
/// (docs/kernel-mechanics.md §3.3), which bounds it. Its pages are freed by
/// `evict_inodes` at [`SHMEM_FREE_PAGE_NS`] each.
pub const SHMEM_PUT_SUPER_NS: Time = 500;

/// CPU to free one shmem page when a tmpfs inode is evicted
/// (`shmem_evict_inode` -> `shmem_undo_range`: unaccounting, memcg uncharge,
/// LRU removal, freeing), ns: 0.54 us. Measured with `wbsim probe umount`
/// (docs/probe/umount.json, 5 rounds, 2026-11-25): umount(2) of a tmpfs
/// holding 64 MiB took 8.89 ms p50 against 0.058 ms clean, i.e. 8.83 ms for
/// 16384 pages.
pub const SHMEM_FREE_PAGE_NS: Time = 540;

/// The data-path costs of tmpfs, from the constants above.
pub const SHMEM_COSTS: FsCosts = FsCosts {
    write_page_ns: SHMEM_WRITE_PAGE_NS,
    evict_page_ns: SHMEM_FREE_PAGE_NS,
    ..FsCosts::GENERIC
};

/// The tmpfs filesystem type.
pub struct Tmpfs;

impl Filesystem for Tmpfs {
    fn name(&self) -> &'static str {
        "tmpfs"
    }
    fn costs(&self) -> &'static FsCosts {
        &SHMEM_COSTS
    }
    fn has_writeback(&self) -> bool {
        false
    }
    fn fsync_commit<'a>(
        &'a self,
        _m: &'a Rc<Machine>,
        _sb: &'a Rc<SuperBlock>,
        _datasync: bool,
    ) -> LocalBoxFuture<'a, ()> {
        Box::pin(async {})
    }
    fn sync_fs<'a>(
        &'a self,
        _m: &'a Rc<Machine>,
        _sb: &'a Rc<SuperBlock>,
        _wait: bool,
    ) -> LocalBoxFuture<'a, ()> {
        Box::pin(async {})
    }
    fn put_super<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        _sb: &'a Rc<SuperBlock>,
    ) -> LocalBoxFuture<'a, ()> {
        Box::pin(m.sched().cpu(SHMEM_PUT_SUPER_NS))
    }
}
