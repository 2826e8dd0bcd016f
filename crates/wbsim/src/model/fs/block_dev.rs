//! A block device opened as a file (`/dev/sdX`): the inodes of the bdev
//! pseudo-filesystem (block/bdev.c `blockdev_superblock`) with the file
//! operations of block/fops.c (`def_blk_fops`): buffered I/O goes through
//! the device inode's page cache and is written back by the device's own
//! bdi, O_DIRECT goes straight to the device, `fsync` is
//! `blkdev_fsync()`: write and wait the dirty pages, then
//! `blkdev_issue_flush()`.
//!
//! Modelled as a filesystem type ("bdev") mounted on the device, whose every
//! inode is the whole device: data at device offset 0, `i_size` the
//! device's capacity, every block already allocated and written (a block
//! device has no holes, no delayed allocation and no unwritten extents).
//!
//! Simplified: the block size is the page size (no sub-page buffer heads);
//! the capacity is a parameter of the mount ([`BlockDev::new`]) because the
//! device model has none; discards (BLKDISCARD) are not modelled.

use std::rc::Rc;

use crate::model::fs::inode::Inode;
use crate::model::fs::vfs::Machine;
use crate::model::fs::vfs::SuperBlock;
use crate::model::fs::vfs::{Filesystem, FsCosts, LocalBoxFuture};
use crate::model::mm::vmstat::PAGE_SIZE;

/// The type name of the bdev pseudo-filesystem.
pub const BDEV_FS_NAME: &str = "bdev";

/// Capacity of a raw block device when none is given: 64 GiB. A choice, not
/// a measurement: the device profiles carry no capacity; it bounds random
/// offsets and the region of a job without `size=`.
pub const DEFAULT_BDEV_CAPACITY: u64 = 64 << 30;

/// CPU costs of the block device file paths: the generic ones
/// (`blkdev_write_iter` -> `generic_perform_write` with buffer-head
/// `block_write_begin`; no filesystem work besides the page copy, which
/// the VFS charges).
pub const BDEV_COSTS: FsCosts = FsCosts::GENERIC;

/// The bdev pseudo-filesystem of one block device.
pub struct BlockDev {
    /// The device's capacity, bytes.
    capacity_bytes: u64,
}

impl BlockDev {
    /// A block device of `capacity_bytes`.
    pub fn new(capacity_bytes: u64) -> BlockDev {
        BlockDev { capacity_bytes }
    }

    /// `blkdev_issue_flush()` of the device
    /// ([`crate::model::block::BlockDevice::flush`]).
    async fn issue_flush(sb: &SuperBlock) {
        if let Some(dev) = &sb.device {
            dev.flush().await;
        }
    }
}

impl Filesystem for BlockDev {
    fn fop_buffer_wasync(&self) -> bool {
        // def_blk_fops.fop_flags has FOP_BUFFER_WASYNC.
        true
    }
    fn name(&self) -> &'static str {
        BDEV_FS_NAME
    }
    fn costs(&self) -> &'static FsCosts {
        &BDEV_COSTS
    }
    fn fsync_commit<'a>(
        &'a self,
        _m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
        _datasync: bool,
    ) -> LocalBoxFuture<'a, ()> {
        Box::pin(Self::issue_flush(sb))
    }
    fn sync_fs<'a>(
        &'a self,
        _m: &'a Rc<Machine>,
        _sb: &'a Rc<SuperBlock>,
        _wait: bool,
    ) -> LocalBoxFuture<'a, ()> {
        // sync(2) writes the bdev inodes' pages through the bdi like any
        // inode's; there is no filesystem state besides.
        Box::pin(async {})
    }
    fn put_super<'a>(
        &'a self,
        _m: &'a Rc<Machine>,
        _sb: &'a Rc<SuperBlock>,
    ) -> LocalBoxFuture<'a, ()> {
        Box::pin(async {})
    }
    fn place_file(&self, _sb: &SuperBlock, _ino: u64) -> u64 {
        // Every inode is the device itself.
        0
    }
    fn init_inode(&self, inode: &Inode) {
        inode.st.borrow_mut().i_size = self.capacity_bytes;
        inode
            .extents
            .borrow_mut()
            .mark_written(0, self.capacity_bytes.div_ceil(PAGE_SIZE));
    }
}
