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
pub mod vfs;
pub mod writepages;
pub mod xfs;

pub use crate::model::policy::WbCtxAssign;
pub use vfs::{Filesystem, LocalBoxFuture, WritebackControl};
