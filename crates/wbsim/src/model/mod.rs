//! The modelled kernel, laid out like `linux/`: `kernel/` (scheduler, wait,
//! locks, RCU, workqueues), `mm/` (page cache, dirty throttling, backing
//! devices, reclaim), `fs/` (the VFS, writeback, superblocks, mounts,
//! filesystems) and `block/` (devices). Dependencies run one way,
//! `fs/ -> mm/ -> kernel/`, and `block/` uses `kernel/` only.
//!
//! [`init`] holds what a machine boots with; the booted machine
//! ([`machine::Machine`], declared in `fs/vfs.rs`) ties the subsystem handles
//! together, and [`machine`] is what the experiment layer may observe of it;
//! [`policy`] holds the switches of the studied changes.

pub mod block;
pub mod errno;
pub mod fs;
pub mod init;
pub mod io_uring;
pub mod kernel;
pub mod machine;
pub mod mm;
pub mod policy;
