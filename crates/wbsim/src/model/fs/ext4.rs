//! An ext4-like filesystem (fs/ext4): delayed allocation, writeback through
//! `ext4_writepages`, a jbd2 journal whose commit (journal blocks with a cache
//! flush and FUA commit record) is what fsync and sync_fs(wait) pay for.
//!
//! Simplified: no block allocator (files are laid out contiguously), no extent
//! tree or journal space accounting, ordered-mode data flushing is the data
//! writeback fsync already waits for, and the journal commit is one fixed-size
//! synchronous write with PREFLUSH|FUA.

use std::rc::Rc;

use sim::{Time, USEC};

use crate::model::block::{Bio, BioFlags};
use crate::model::fs::vfs::Machine;
use crate::model::fs::vfs::SuperBlock;
use crate::model::fs::vfs::{Filesystem, FsCosts, LocalBoxFuture};
use crate::model::mm::filemap::MAX_PAGECACHE_ORDER;

/// CPU per page of a buffered write (`ext4_da_write_begin`, copy,
/// `ext4_da_write_end`), ns: 0.62 us. Measured with `wbsim probe dontcache` on
/// the project machine (Linux 6.18, 2 vCPU; docs/probe/dontcache.json, 3 rounds, 2026-11-25, load at the first round 0.4-0.6):
/// from the p50 latency of a 1 MiB buffered write (S) and a 4 KiB one (R),
/// with 1 us of syscall entry: per page = (S - R) / 255 =
/// (161.0 - 2.5) / 255 us (the 1 MiB job is tailed: mean 473 us).
pub const EXT4_WRITE_PAGE_NS: Time = 622;
/// CPU per buffered write call, besides the per-page work and the syscall
/// entry (`->write_iter` setup, the filesystem's begin/end of the range,
/// inode locking, timestamps), ns. Measured like the per-page cost:
/// R - 1 us - per page = 2.47 - 1 - 0.62 us.
pub const EXT4_WRITE_CALL_NS: Time = 840;
/// CPU per page submitted by `ext4_writepages` beyond the per-call cost
/// below (page walk, bio building), ns: 0.10 us. Measured like xfs's
/// (docs/probe/dontcache.json, 3 rounds, 2026-11-25, load at the first round 0.4-0.6): one inline writepages call cost 31.5 us for a
/// 1 MiB dontcache write and 5.7 us for a 4 KiB one; per page =
/// (31.5 - 5.7) / 255 us.
pub const EXT4_WRITEPAGE_NS: Time = 101;
/// CPU of one `ext4_writepages` call that writes something, besides its
/// pages (journal handle, block mapping and allocation, bio setup,
/// submission), ns: 5.6 us. Measured as above: 5.7 us - 1 page.
pub const EXT4_WRITEPAGES_CALL_NS: Time = 5_590;
/// Bytes written per jbd2 commit (descriptor, metadata blocks, commit block):
/// 16 KiB, a small transaction.
pub const EXT4_COMMIT_BYTES: u64 = 16 << 10;
/// CPU of a jbd2 commit (`jbd2_journal_commit_transaction`), ns: ~20 us.
pub const EXT4_COMMIT_CPU_NS: Time = 20 * USEC;
/// CPU of `ext4_put_super` outside its I/O (`jbd2_journal_destroy` stopping
/// the kjournald2 thread, `ext4_mb_release`, freeing percpu counters and
/// group descriptors), ns: 50 us. Estimate (order of magnitude).
pub const EXT4_PUT_SUPER_CPU_NS: Time = 50 * USEC;
/// Journal offset on the device (the journal sits apart from data).
const JOURNAL_OFFSET: u64 = 1 << 40;

/// The data-path costs of ext4, from the constants above.
pub const EXT4_COSTS: FsCosts = FsCosts {
    write_page_ns: EXT4_WRITE_PAGE_NS,
    write_call_ns: EXT4_WRITE_CALL_NS,
    writepage_ns: EXT4_WRITEPAGE_NS,
    writepages_call_ns: EXT4_WRITEPAGES_CALL_NS,
    ..FsCosts::GENERIC
};

/// The ext4-like filesystem type.
pub struct Ext4;

impl Ext4 {
    async fn commit(m: &Rc<Machine>, sb: &Rc<SuperBlock>) {
        m.sched().cpu(EXT4_COMMIT_CPU_NS).await;
        if let Some(dev) = &sb.device {
            let flags = BioFlags {
                preflush: true,
                fua: true,
                sync: true,
            };
            dev.submit_bio_wait(Bio::write(JOURNAL_OFFSET, EXT4_COMMIT_BYTES).with_flags(flags))
                .await;
        }
    }
}

impl Filesystem for Ext4 {
    fn name(&self) -> &'static str {
        "ext4"
    }
    fn costs(&self) -> &'static FsCosts {
        &EXT4_COSTS
    }
    fn max_folio_order(&self) -> u8 {
        // ext4_set_inode_mapping_order (6.16+): large folios for regular
        // files unless journalled data, verity or encryption (not modelled).
        MAX_PAGECACHE_ORDER
    }
    fn fop_dontcache(&self) -> bool {
        true
    }
    fn fsync_commit<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
        _datasync: bool,
    ) -> LocalBoxFuture<'a, ()> {
        Box::pin(Self::commit(m, sb))
    }
    fn sync_fs<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
        wait: bool,
    ) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            if wait {
                Self::commit(m, sb).await;
            }
        })
    }
    fn put_super<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
    ) -> LocalBoxFuture<'a, ()> {
        // jbd2_journal_destroy (final commit and checkpoint), then the
        // superblock write (ext4_commit_super) with a flush.
        Box::pin(async move {
            m.sched().cpu(EXT4_PUT_SUPER_CPU_NS).await;
            Self::commit(m, sb).await;
            if let Some(dev) = &sb.device {
                let flags = BioFlags {
                    preflush: true,
                    fua: true,
                    sync: true,
                };
                dev.submit_bio_wait(Bio::write(0, 4096).with_flags(flags))
                    .await;
            }
        })
    }
}
