//! `mm/`: the page cache (filemap), dirty accounting and throttling
//! (page_writeback: the limits, bandwidth and pause calculators and
//! `balance_dirty_pages` itself), backing devices and their writeback
//! contexts (backing_dev), the machine's page counters (vmstat) and direct
//! reclaim (vmscan), memory cgroups (memcontrol).

pub mod backing_dev;
pub mod backing_dev_defs;
pub mod filemap;
pub mod memcontrol;
pub mod page_writeback;
pub mod state;
pub mod vmscan;
pub mod vmstat;

pub use state::{Mm, MmParams};
