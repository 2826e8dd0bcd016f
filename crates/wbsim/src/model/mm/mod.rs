//! `mm/`: the page cache (filemap), dirty accounting and throttling
//! (page_writeback: the limits, bandwidth and pause calculators and
//! `balance_dirty_pages` itself), backing devices and their writeback
//! contexts (backing_dev), the machine's page counters (vmstat), the page
//! allocator's watermarks and slow path (page_alloc), reclaim: kswapd,
//! direct reclaim and the reclaim throttles (vmscan), LRU-add batching
//! (swap), memory cgroups (memcontrol) and the readahead window
//! (readahead).

pub mod backing_dev;
pub mod backing_dev_defs;
pub mod filemap;
pub mod memcontrol;
pub mod memcontrol_defs;
pub mod mmzone;
pub mod page_alloc;
pub mod page_writeback;
pub mod readahead;
pub mod state;
pub mod swap;
pub mod vmscan;
pub mod vmstat;

pub use state::{Mm, MmParams};
