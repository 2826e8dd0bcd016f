//! `mm/`: the page cache (filemap), dirty accounting and throttling
//! (page_writeback), backing devices and their writeback domains (backing_dev),
//! memory accounting (vmstat, memcontrol) and reclaim (vmscan).

pub mod accounting;
pub mod backing_dev;
pub mod filemap;
pub mod page_writeback;
pub mod throttle;
pub mod vmstat;
