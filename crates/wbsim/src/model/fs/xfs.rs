//! A minimal XFS (fs/xfs): buffered writes and writeback through the generic
//! paths, a write-ahead log whose forces are what fsync, sync_fs and unmount
//! pay for, and the unmount sequence of `xfs_unmountfs`.
//!
//! Unmount (`xfs_fs_put_super` -> `xfs_unmountfs`), as modelled:
//! 1. `xfs_ail_push_all_sync`: if metadata was dirtied since the last log
//!    force (a delalloc conversion at writeback), its buffers are written
//!    back in place ([`XFS_AIL_PUSH_BYTES`]).
//! 2. `xfs_log_cover`: the superblock is logged and the log forced, twice
//!    (the cover state machine NEED -> DONE -> NEED2 -> DONE2), each a
//!    synchronous iclog write with REQ_PREFLUSH|REQ_FUA
//!    ([`XFS_LOG_COVER_FORCES`]).
//! 3. `xfs_log_unmount_write`: the unmount record, one more iclog write with
//!    REQ_PREFLUSH|REQ_FUA.
//! 4. the superblock buffer written in place, then `xfs_buftarg_drain` and a
//!    cache flush of the data device (`blkdev_issue_flush`).
//! 5. CPU of the rest ([`XFS_UNMOUNT_CPU_NS`]).
//!
//! Calibration note: on this project's non-RT 6.18 VM a clean xfs umount(2)
//! on a loop device takes ~3 ms and a clean btrfs one ~0.8 ms (kernel-notes
//! section 3). btrfs's unmount does one flush + one FUA write, XFS's three
//! PREFLUSH|FUA log writes and one flush: both figures fit a device whose
//! flush and FUA cost a few hundred microseconds each. The device's costs come
//! from its profile (`loop-virtio` assumes 2 ms each, uncalibrated), not from
//! here; with that profile this model's clean xfs umount is ~15 ms (btrfs
//! ~4.4 ms, ext4-like ~13 ms).
//!
//! Left out (later issues): allocation groups (AGF locks, inode-to-AG
//! placement, the AG-aware writeback context hook), delayed allocation as a
//! separate step, the CIL and log space, inodegc, quotas. The per-superblock
//! state lives in [`Xfs`] keyed by superblock id, so per-AG state can be
//! added beside it.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;

use sim::{Time, USEC};

use crate::model::block::{Bio, BioFlags};
use crate::model::fs::inode::InodeRef;
use crate::model::fs::super_::SuperBlock;
use crate::model::fs::writepages::generic_writepages;
use crate::model::fs::{Filesystem, LocalBoxFuture, WritebackControl};
use crate::model::machine::Machine;

/// CPU per 4 KiB of a buffered write (`iomap_write_begin`, copy into large
/// folios, `iomap_write_end`), ns: 0.37 us. Measured with `wbsim probe
/// dontcache` on the project machine (Linux 6.18,
/// 2 vCPU, docs/probe/dontcache.json): from the p50 completion latency of a
/// 1 MiB buffered write (S) and a 4 KiB one (R), with 1 us of syscall entry:
/// per page = (S - R) / 255 = (98.4 - 3.6) / 255 us.
pub const XFS_WRITE_PAGE_NS: Time = 370;
/// CPU per buffered write call, besides the per-page work and the syscall
/// entry (`->write_iter` setup, the filesystem's begin/end of the range,
/// inode locking, timestamps), ns. Measured like the per-page cost:
/// R - 1 us - per page = 3.62 - 1 - 0.37 us.
pub const XFS_WRITE_CALL_NS: Time = 2_250;
/// CPU per page submitted by `xfs_vm_writepages` beyond the per-call cost
/// below (page walk, bio building), ns: 0.03 us. Measured with `wbsim probe
/// dontcache` (docs/probe/dontcache.json): an RWF_DONTCACHE write starts
/// writeback of its range inline, so its p50 latency minus the buffered one is
/// one writepages call: 41.9 us for a 1 MiB write (256 pages), 34.3 us for a
/// 4 KiB one; per page = (41.9 - 34.3) / 255 us.
pub const XFS_WRITEPAGE_NS: Time = 30;
/// CPU of one `xfs_vm_writepages` call that writes something, besides its
/// pages (`xfs_map_blocks` under the ilock, delalloc conversion in a
/// transaction for new blocks, ioend and bio setup, submission), ns: 34.2 us.
/// Measured as above: 34.3 us - 1 page. On a shared 2-vCPU VM; an upper bound
/// for a quiet machine.
pub const XFS_WRITEPAGES_CALL_NS: Time = 34_200;
/// Bytes of one iclog write (a log force): 32 KiB, the default log buffer
/// size (`logbsize` = 32k, xfs(5)).
pub const XFS_ICLOG_BYTES: u64 = 32 << 10;
/// CPU of one synchronous log force (`xfs_log_force`, iclog sync, waking the
/// waiters), ns: 20 us. Estimate.
pub const XFS_LOG_FORCE_CPU_NS: Time = 20 * USEC;
/// Metadata written back in place by the AIL push at unmount when metadata
/// was dirtied since the last force, bytes: 64 KiB (a few inode cluster and
/// btree buffers). Estimate.
pub const XFS_AIL_PUSH_BYTES: u64 = 64 << 10;
/// Synchronous log forces of `xfs_log_cover` at unmount: 2 (the superblock
/// is logged twice to move the log to the covered state; fs/xfs/xfs_log.c).
pub const XFS_LOG_COVER_FORCES: u32 = 2;
/// Bytes of the superblock buffer write: 4 KiB (one sector on a 4Kn device;
/// 512 B on 512e, where the difference in transfer time is negligible).
pub const XFS_SB_BYTES: u64 = 4 << 10;
/// CPU of `xfs_unmountfs` outside the I/O (inode reclaim, perag and buftarg
/// teardown, stopping the log worker and workqueues), ns: 100 us. Estimate.
pub const XFS_UNMOUNT_CPU_NS: Time = 100 * USEC;
/// Offset of the internal log on the device (apart from data).
const LOG_OFFSET: u64 = 1 << 40;

/// The XFS filesystem type.
#[derive(Default)]
pub struct Xfs {
    /// Superblocks with log items not yet forced to disk (metadata dirtied by
    /// writeback since the last log force).
    log_dirty: RefCell<BTreeSet<u64>>,
}

impl Xfs {
    pub fn new() -> Self {
        Self::default()
    }

    /// `xfs_log_force(XFS_LOG_SYNC)` writing one iclog with PREFLUSH|FUA.
    async fn iclog_write(m: &Rc<Machine>, sb: &Rc<SuperBlock>) {
        m.sched.cpu(XFS_LOG_FORCE_CPU_NS).await;
        if let Some(dev) = &sb.device {
            let flags = BioFlags {
                preflush: true,
                fua: true,
                sync: true,
            };
            dev.submit_bio_wait(Bio::write(LOG_OFFSET, XFS_ICLOG_BYTES).with_flags(flags))
                .await;
        }
    }

    /// A log force: writes the log only if something is in it.
    async fn log_force(&self, m: &Rc<Machine>, sb: &Rc<SuperBlock>) {
        if self.log_dirty.borrow_mut().remove(&sb.id) {
            Self::iclog_write(m, sb).await;
        }
    }
}

impl Filesystem for Xfs {
    fn name(&self) -> &'static str {
        "xfs"
    }
    fn fop_dontcache(&self) -> bool {
        true
    }
    fn write_page_ns(&self) -> Time {
        XFS_WRITE_PAGE_NS
    }
    fn write_call_ns(&self) -> Time {
        XFS_WRITE_CALL_NS
    }
    fn writepage_ns(&self) -> Time {
        XFS_WRITEPAGE_NS
    }
    fn writepages_call_ns(&self) -> Time {
        XFS_WRITEPAGES_CALL_NS
    }
    fn writepages<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
        inode: &'a InodeRef,
        wbc: &'a mut WritebackControl,
    ) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            let before = wbc.nr_to_write;
            generic_writepages(m, sb, inode, wbc).await;
            if wbc.nr_to_write < before {
                // Delalloc conversion and size updates are logged.
                self.log_dirty.borrow_mut().insert(sb.id);
            }
        })
    }
    fn fsync_commit<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
        _datasync: bool,
    ) -> LocalBoxFuture<'a, ()> {
        Box::pin(self.log_force(m, sb))
    }
    fn sync_fs<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
        wait: bool,
    ) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            if wait {
                self.log_force(m, sb).await;
            }
        })
    }
    fn put_super<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
    ) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            m.sched.cpu(XFS_UNMOUNT_CPU_NS).await;
            let Some(dev) = sb.device.clone() else {
                return;
            };
            // xfs_ail_push_all_sync
            if self.log_dirty.borrow_mut().remove(&sb.id) {
                Self::iclog_write(m, sb).await;
                dev.submit_bio_wait(Bio::write(LOG_OFFSET / 2, XFS_AIL_PUSH_BYTES))
                    .await;
            }
            // xfs_log_cover
            for _ in 0..XFS_LOG_COVER_FORCES {
                Self::iclog_write(m, sb).await;
            }
            // xfs_log_unmount_write
            Self::iclog_write(m, sb).await;
            // superblock in place, buftarg drain, cache flush
            dev.submit_bio_wait(Bio::write(0, XFS_SB_BYTES)).await;
            dev.flush().await;
        })
    }
}
