//! `fs/`: the VFS pieces writeback and unmount use, and one module per
//! filesystem.
//!
//! [`vfs`] declares the shared objects (the machine, superblocks, mounts, the
//! [`Filesystem`] trait and `writeback_control`); the other files hold the
//! functions, named after the kernel's: [`super_`] (fs/super.c),
//! [`namespace`] (fs/namespace.c), [`fs_writeback`], [`sync`],
//! [`read_write`] (the read/write paths of mm/filemap.c and fs/read_write.c),
//! [`writepages`] (iomap's writeback and ioends), [`inode`] and [`extent`].
//! Filesystems sit behind the [`Filesystem`] trait (behaviour) and an
//! [`vfs::FsCosts`] table each (CPU costs as data): [`tmpfs`], [`ext4`],
//! [`xfs`], [`btrfs`]; [`block_dev`] is a block device opened as a file.

pub mod block_dev;
pub mod boot;
pub mod btrfs;
pub mod ext4;
pub mod extent;
pub mod fs_writeback;
pub mod inode;
pub mod namespace;
pub mod open;
pub mod read_write;
pub mod super_;
pub mod sync;
pub mod tmpfs;
pub mod vfs;
pub mod writepages;
pub mod xfs;

pub use crate::model::policy::WbCtxAssign;
pub use vfs::{Filesystem, LocalBoxFuture, WritebackControl};
