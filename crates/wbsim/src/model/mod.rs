//! The modelled kernel, laid out like `linux/`: `kernel/` (scheduler, wait,
//! locks, RCU, workqueues), `mm/` (page cache, dirty throttling, backing devices),
//! `fs/` (writeback, superblocks, filesystems) and `block/` (devices). A
//! [`machine::Machine`] ties one booted instance together; [`policy`] holds the
//! switches of the studied changes.

pub mod block;
pub mod errno;
pub mod fs;
pub mod init;
pub mod kernel;
pub mod machine;
pub mod mm;
pub mod policy;
