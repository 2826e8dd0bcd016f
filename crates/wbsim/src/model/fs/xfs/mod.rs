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
//! on a loop device takes ~3 ms and a clean btrfs one ~0.8 ms (docs/kernel-mechanics.md
//! §3.3). btrfs's unmount does one flush + one FUA write, XFS's three
//! PREFLUSH|FUA log writes and one flush: both figures fit a device whose
//! flush and FUA cost a few hundred microseconds each. The device's costs come
//! from its profile (`loop-virtio` was calibrated on these two figures:
//! 150 us per flush and per FUA), not from here; with that profile this
//! model's clean xfs umount(2) is ~2.2 ms and btrfs's ~0.65 ms.
//!
//! Data path: buffered writes map their range under the ILOCK (exclusive);
//! writeback looks blocks up under it (shared) and allocates delalloc ranges
//! in a transaction under it (exclusive); ioends over unwritten blocks
//! (fallocate) or with PG_dropbehind folios complete in task context on the
//! per-mount "xfs-conv" workqueue, one work item per inode (`xfs_end_io`),
//! which merges contiguous ioends and converts unwritten blocks in a
//! transaction under the ILOCK (exclusive). Both paths are in
//! [`crate::model::fs::writepages`]; the costs are here.
//!
//! Allocation groups ([`ag`]): inode numbers carry their AG, directories
//! rotate over the AGs and files follow their directory. Delayed
//! allocation is converted at writeback in the flusher's context
//! (`xfs_bmapi_convert_delalloc`, [`Xfs::convert_delalloc`]): the log
//! reservation (`xfs_trans_alloc`), then under the ILOCK held exclusive the
//! AG's AGF lock (trylock pass over the AGs from the inode's, then a
//! blocking pass), the free space btrees and the bmap btree walked and
//! logged at their current heights, and the commit, after which the AGF
//! and the ILOCK are released. An unwritten conversion at I/O completion
//! takes the AGF only when its bmap btree insert splits a block (it then
//! allocates a btree block). The writeback context hook
//! (`->get_inode_wb_ctx_idx()`, [`Xfs::wb_ctx_for_inode`]) implements the
//! `fs_hook` and `effort` sides of [`WbCtxAssign`].
//!
//! The log ([`log`]): each allocation and unwritten conversion takes a
//! `tr_write` reservation on the log's grant head before the ILOCK (and
//! may sleep there for log space), and its commit puts the inode, the AGF
//! and the btree blocks it changed into the CIL (and may be throttled
//! there, with the ILOCK still held). Checkpoints are written to the
//! device, xfsaild writes the logged metadata back in place. A log force
//! (fsync, sync_fs) pushes the CIL and waits for it; unmount writes the
//! whole AIL back.
//!
//! Timestamps (`xfs_vn_update_time`, fs/xfs/xfs_iops.c; [`Xfs::update_time`]):
//! the first write of a file in each jiffy logs the new mtime/ctime in a
//! `tr_fsyncts` transaction under the ILOCK; lazytime is not modelled.
//!
//! Left out (later issues): frees, on-disk size updates
//! at completion (`xfs_setfilesize`), inodegc, quotas. The per-superblock
//! state lives in [`Xfs`] keyed by superblock id.

pub mod ag;
pub mod log;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use sim::{Time, USEC};

use crate::model::block::{Bio, BioFlags};
use crate::model::fs::inode::{Inode, InodeRef};
use crate::model::fs::vfs::Machine;
use crate::model::fs::vfs::SuperBlock;
use crate::model::fs::vfs::{Filesystem, FsCosts, LocalBoxFuture};
use crate::model::kernel::workqueue::{alloc_workqueue, Workqueue, WqFlags};
use crate::model::mm::filemap::MAX_PAGECACHE_ORDER;
use crate::model::mm::vmstat::PAGE_SIZE;
use crate::model::policy::WbCtxAssign;

use ag::{XfsGeometry, XfsMount, XFS_ALLOC_RECS_PER_LEAF};
use log::{
    mix, Xlog, XlogItem, XlogItemKind, XlogParams, XlogTicket, XFS_DEFAULT_LOG_BYTES,
    XFS_TR_FSYNCTS_LOGRES, XFS_TR_WRITE_LOGCOUNT, XFS_TR_WRITE_LOGRES, XLOG_COMMIT_ICLOG_FLAGS,
};

/// CPU per 4 KiB of a buffered write (`iomap_write_begin`, copy into large
/// folios, `iomap_write_end`), ns: 0.155 us. Measured with `wbsim probe
/// dontcache` on the project machine (Linux 6.18, 2 vCPU; docs/probe/dontcache.json, 3 rounds, 2026-11-25, load at the first round 0.4-0.6):
/// from the p50 latency of a 1 MiB buffered write (S) and a sequential 4 KiB
/// one (R), with 1 us of syscall entry: per page = (S - R) / 255 =
/// (41.66 - 2.26) / 255 us.
pub const XFS_WRITE_PAGE_NS: Time = 155;
/// CPU per buffered write call, besides the per-page work and the syscall
/// entry (`->write_iter` setup, the filesystem's begin/end of the range,
/// inode locking, timestamps), ns. Measured like the per-page cost:
/// R - 1 us - per page = 2.26 - 1 - 0.155 us.
pub const XFS_WRITE_CALL_NS: Time = 1_110;
/// CPU per page submitted by `xfs_vm_writepages` beyond the per-call cost
/// below (page walk, bio building), ns: 0.037 us. Measured with `wbsim probe
/// dontcache` (docs/probe/dontcache.json, 3 rounds, 2026-11-25, load at the first round 0.4-0.6), on preallocated files so that no
/// allocation is in it: an RWF_DONTCACHE write starts writeback of its range
/// inline, so its p50 latency minus the buffered one is one writepages call:
/// 12.1 us for a 1 MiB write (seq-dontcache-falloc 53.7 - seq-buffered-falloc
/// 41.7), 2.7 us for a 4 KiB one; per page = (12.1 - 2.7) / 255 us.
pub const XFS_WRITEPAGE_NS: Time = 37;
/// CPU of one `xfs_vm_writepages` call that writes something, besides its
/// pages and any delalloc allocation (the block lookup [`XFS_MAP_BLOCKS_NS`],
/// ioend and bio setup, submission), ns: 2.7 us. Measured as above:
/// seq4k-dontcache-falloc p50 4.97 us - seq4k-buffered-falloc p50 2.28 us.
pub const XFS_WRITEPAGES_CALL_NS: Time = 2_700;
/// Part of [`XFS_WRITE_CALL_NS`] under the ILOCK held exclusive
/// (`xfs_buffered_write_iomap_begin`: data fork lookup and, over a hole, the
/// delalloc reservation), ns: 0.5 us. Estimate (an extent-tree lookup and a
/// few counter updates); not separable in the probe's latencies.
pub const XFS_WRITE_ILOCK_NS: Time = 500;
/// Extra CPU of that mapping when the write is into a hole away from the
/// previous write (`FsCosts::extent_walk_ns`: the iext tree walked cold,
/// then `xfs_bmapi_reserve_delalloc`), ns: 1.09 us. Measured with `wbsim
/// probe dontcache` (docs/probe/dontcache.json, 3 rounds, 2026-11-25):
/// mean clat of 4 KiB random buffered writes into a sparse 256 MiB file
/// (3.626 us) minus 4 KiB sequential ones (2.540 us, which land in the
/// speculative preallocation); random writes into a preallocated file cost
/// what sequential ones do (2.666 against 2.679 us), so the cost is the
/// hole's, not the random offset's.
pub const XFS_EXTENT_WALK_NS: Time = 1_090;
/// CPU of each bio of an `xfs_vm_writepages` call after its first, ns: 1.0
/// us. A discontiguous dirty range starts a new ioend and bio
/// (`iomap_can_add_to_ioend`, fs/iomap/buffered-io.c), so random 4 KiB
/// pages are one bio each: `bio_alloc_bioset`, building it, `submit_bio`
/// into the writeback plug, the request and the driver's `->queue_rq` at
/// the plug's flush. MEASURED on this project's machine (Linux 6.18 KVM
/// guest, 2 vCPU, load 9 from other builds, 2026-11-28): xfs (4 AGs) on a
/// loop device with direct I/O, a written 64 MiB file; N 4 KiB pages
/// dirtied either contiguously or at every other page of a 2N-page
/// window, then timed `sync_file_range(SYNC_FILE_RANGE_WRITE)`, which
/// submits without waiting; medians of 300-400 rounds: (sparse - contiguous)
/// / (N - 1) = 1.07 us (N = 16), 1.11, 0.85, 0.97 us (N = 32). N = 64
/// exceeds the plug's 32 requests and took milliseconds (the submitter
/// lost its CPU at the plug flush on the loaded host), so it is not used.
/// The driver here is loop's `queue_rq` (it queues work); an NVMe
/// driver's writes the submission queue entry instead, of a similar size.
pub const XFS_BIO_NS: Time = 1_000;
/// Part of [`XFS_WRITEPAGES_CALL_NS`] per contiguous dirty range for the
/// block lookup under the ILOCK held shared (`xfs_map_blocks`), ns: 0.5 us.
/// Estimate, as [`XFS_WRITE_ILOCK_NS`].
pub const XFS_MAP_BLOCKS_NS: Time = 500;
/// CPU of allocating a delalloc extent's blocks at writeback
/// (`xfs_bmapi_convert_delalloc`: transaction reservation, the free space
/// btrees under the AGF lock, bmap insert, commit) under the ILOCK held
/// exclusive, ns: 26.5 us. Measured with `wbsim probe dontcache`
/// (docs/probe/dontcache.json, 3 rounds, 2026-11-25, load at the first round 0.4-0.6): 4 KiB RWF_DONTCACHE writes in random order
/// into a new (sparse) file, p50 33.9 us, against the same into a
/// preallocated file, p50 7.4 us; the difference is the allocation the inline
/// writepages makes for every page. The preallocated job is bimodal (its mean
/// is 24 us: many of its writes wait), so this is the firmest figure the run
/// gives, not a tight one.
pub const XFS_DELALLOC_ALLOC_NS: Time = 26_500;
/// Speculative preallocation beyond EOF: none below this file size, pages
/// (64 KiB, the default `allocsize` of `xfs_iomap_prealloc_size`).
pub const XFS_PREALLOC_MIN_PAGES: u64 = 16;
/// Largest speculative preallocation, pages: 2^21 blocks (8 GiB,
/// XFS_MAX_BMBT_EXTLEN).
pub const XFS_PREALLOC_MAX_PAGES: u64 = 1 << 21;
/// CPU of one transaction's fixed part (`xfs_trans_alloc` log reservation,
/// joining the inode, `xfs_trans_commit` formatting items into the CIL),
/// ns: 5 us. Estimate; split below into the reservation and the commit.
pub const XFS_TRANS_NS: Time = XFS_TRANS_RESERVE_NS + XFS_TRANS_COMMIT_NS;
/// Part of [`XFS_TRANS_NS`] before the ILOCK: `xfs_trans_alloc` (the log
/// grant head reservation in `xfs_log_reserve`, the block reservation from
/// the superblock counters), ns: 2 us. Estimate (no wait for log space is
/// modelled).
pub const XFS_TRANS_RESERVE_NS: Time = 2 * USEC;
/// Part of [`XFS_TRANS_NS`] at the end, with every buffer still locked:
/// `xfs_trans_commit` formatting the dirty buffer and inode items into the
/// CIL (`xlog_cil_commit`), then unlocking them, ns: 3 us. Estimate.
pub const XFS_TRANS_COMMIT_NS: Time = 3 * USEC;
/// CPU per btree level a transaction walks and logs (buffer lookup and lock,
/// record insert or update, `xfs_trans_log_buf`), ns: 3.6 us. Derived from
/// the measured [`XFS_DELALLOC_ALLOC_NS`] (26.5 us): an allocation is one
/// transaction that updates the bmap btree (2 levels for the ~65k extents
/// of the probe's random file) and the two free space btrees (bnobt and
/// cntbt, [`XFS_ALLOC_BTREE_LEVELS`] levels together on a fresh
/// filesystem): (26.5 - 5) / (2 + 4) us.
pub const XFS_BTREE_LEVEL_NS: Time = 3_600;
/// Levels of the bnobt and cntbt together that an allocation updates: 4
/// (two levels each on a fresh filesystem). Estimate.
pub const XFS_ALLOC_BTREE_LEVELS: u64 = 4;
/// Extent records that fit in the inode's data fork before it becomes a
/// bmap btree: 21 (512-byte inodes, the mkfs.xfs default for v5: 336 bytes
/// of literal area after the 176-byte dinode core, 16 bytes per record;
/// fs/xfs/libxfs/xfs_format.h).
pub const XFS_IFORK_EXTENTS: usize = 21;
/// Records per bmap btree block: 251 (4 KiB blocks, 72-byte long-format v5
/// block header, 16-byte records).
pub const XFS_BMBT_RECS_PER_BLOCK: usize = 251;

/// CPU of converting one completed ioend's unwritten blocks to written
/// (`xfs_iomap_write_unwritten`: one transaction updating the bmap records)
/// under the ILOCK held exclusive, for a file of `records` extent records:
/// [`XFS_TRANS_NS`] plus [`XFS_BTREE_LEVEL_NS`] per bmap btree level (none
/// while the records fit in the inode).
pub fn xfs_unwritten_convert_ns(records: usize) -> Time {
    XFS_TRANS_NS + u64::from(xfs_bmbt_levels(records)) * XFS_BTREE_LEVEL_NS
}

/// Whether growing a data fork from `before` to `after` extent records
/// needs a new bmap btree block: the fork turns into a btree (records no
/// longer fit in the inode), or a leaf splits. A full leaf splits into two
/// halves (`xfs_btree_split`), so in a growing fork a leaf split comes every
/// half-leaf of records, [`XFS_BMBT_RECS_PER_BLOCK`] / 2 = 125.
pub fn bmbt_split(before: usize, after: usize) -> bool {
    if after <= before || after <= XFS_IFORK_EXTENTS {
        return false;
    }
    if before <= XFS_IFORK_EXTENTS {
        return true;
    }
    let half = XFS_BMBT_RECS_PER_BLOCK / 2;
    (after - XFS_IFORK_EXTENTS).div_ceil(half) > (before - XFS_IFORK_EXTENTS).div_ceil(half)
}

/// Leaves of a bmap btree holding `records` extent records (0: the records
/// fit in the inode): one per [`XFS_BMBT_RECS_PER_BLOCK`] / 2 records past
/// the fork, as [`bmbt_split`] counts splits.
pub fn xfs_bmbt_leaves(records: usize) -> u64 {
    if records <= XFS_IFORK_EXTENTS {
        return 0;
    }
    ((records - XFS_IFORK_EXTENTS).div_ceil(XFS_BMBT_RECS_PER_BLOCK / 2)).max(1) as u64
}

/// The log items of a transaction that changes the extent map of `inode`
/// (a file of `size_pages` pages with `records` extent records) at page
/// `off`: the inode (core and fork) and, when the fork is a btree, the
/// leaf that covers `off` (leaves split the file's offsets evenly: records
/// of a randomly written file are spread evenly over its offsets).
pub fn xfs_bmap_log_items(ino: u64, records: usize, off: u64, size_pages: u64) -> Vec<XlogItem> {
    let mut v = vec![XlogItem::new(XlogItemKind::Inode, ino, 0)];
    let leaves = xfs_bmbt_leaves(records);
    if leaves > 0 {
        let leaf = (u128::from(off) * u128::from(leaves) / u128::from(size_pages.max(1))) as u64;
        v.push(XlogItem::new(XlogItemKind::Bmbt, ino, leaf.min(leaves - 1)));
    }
    v
}

/// The log items of an allocation in AG `agno` (with `free_extents` free
/// space records) for page `off` of inode `ino` (`size_pages` pages): the
/// AGF, one bnobt leaf and one cntbt leaf. Leaves hold 3/4 of
/// `XFS_ALLOC_RECS_PER_LEAF` on average (estimate). The bnobt is ordered by
/// block and a file's blocks lie together in its part of the AG, so
/// neighbouring offsets of one file share a bnobt leaf (a leaf per
/// 1/leaves of the file, placed by a hash of the inode); the cntbt is
/// ordered by size, so its leaf is a hash of the allocation (estimate:
/// one leaf each, where an allocation that splits a free extent may
/// change two cntbt leaves).
pub fn xfs_alloc_log_items(
    agno: u32,
    free_extents: u64,
    ino: u64,
    off: u64,
    size_pages: u64,
) -> [XlogItem; 3] {
    let per_leaf = XFS_ALLOC_RECS_PER_LEAF * 3 / 4;
    let leaves = free_extents.div_ceil(per_leaf).max(1);
    let bucket = (u128::from(off) * u128::from(leaves) / u128::from(size_pages.max(1))) as u64;
    let bno = mix(ino.rotate_left(32) ^ bucket) % leaves;
    let cnt = mix(ino.wrapping_mul(0x9e37_79b9) ^ off) % leaves;
    let ag = u64::from(agno);
    [
        XlogItem::new(XlogItemKind::Agf, ag, 0),
        XlogItem::new(XlogItemKind::Bnobt, ag, bno),
        XlogItem::new(XlogItemKind::Cntbt, ag, cnt),
    ]
}

/// Levels of a bmap btree holding `records` extent records (0: the records
/// fit in the inode).
pub fn xfs_bmbt_levels(records: usize) -> u32 {
    if records <= XFS_IFORK_EXTENTS {
        return 0;
    }
    let mut levels = 1;
    let mut blocks = records.div_ceil(XFS_BMBT_RECS_PER_BLOCK);
    while blocks > 1 {
        blocks = blocks.div_ceil(XFS_BMBT_RECS_PER_BLOCK);
        levels += 1;
    }
    levels
}
/// CPU of one `fallocate(2)` call (`xfs_alloc_file_space`: a transaction
/// per allocated extent, a few extents for a fresh file), ns: 50 us.
/// Estimate.
pub const XFS_FALLOCATE_NS: Time = 50 * USEC;
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

/// The data-path costs of xfs, from the constants above.
pub const XFS_COSTS: FsCosts = FsCosts {
    write_page_ns: XFS_WRITE_PAGE_NS,
    write_call_ns: XFS_WRITE_CALL_NS,
    write_ilock_ns: XFS_WRITE_ILOCK_NS,
    extent_walk_ns: XFS_EXTENT_WALK_NS,
    writepage_ns: XFS_WRITEPAGE_NS,
    writepages_call_ns: XFS_WRITEPAGES_CALL_NS,
    bio_ns: XFS_BIO_NS,
    map_blocks_ns: XFS_MAP_BLOCKS_NS,
    // Not used by XFS's own xfs_bmapi_convert_delalloc, which costs an
    // allocation from its AG state (XFS_TRANS_NS + XFS_BTREE_LEVEL_NS per
    // btree level); kept as the measured figure the level cost comes from.
    delalloc_alloc_ns: XFS_DELALLOC_ALLOC_NS,
    fallocate_ns: XFS_FALLOCATE_NS,
    ..FsCosts::GENERIC
};

/// The work writeback of an inode needs, cheapest first (the `effort`
/// policy's classes, docs/effort-writeback-contexts.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WritebackEffort {
    /// Blocks exist and are written: I/O only.
    Overwrite,
    /// Unwritten blocks: a conversion transaction at I/O completion.
    Unwritten,
    /// Delayed allocation: an allocation transaction under the AGF lock.
    Delalloc,
}

/// The mkfs and mount options the model reads (xfs(5), mkfs.xfs(8)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XfsOptions {
    /// `mkfs.xfs -d agcount=, agsize=`.
    pub geo: XfsGeometry,
    /// `allocsize=`: fixed speculative preallocation beyond EOF, pages.
    /// None: the dynamic default ([`XFS_PREALLOC_MIN_PAGES`] and doubling).
    pub allocsize_pages: Option<u64>,
    /// `logbsize=`: bytes of one iclog write ([`XFS_ICLOG_BYTES`] by default).
    pub logbsize: u64,
    /// `mkfs.xfs -l size=`: log size, bytes. None: mkfs's default for the
    /// geometry ([`xfs_default_log_bytes`]).
    pub log_bytes: Option<u64>,
}

/// mkfs.xfs's default internal log size for a filesystem of `geo`, bytes:
/// max(size / 2048, 64 MiB), capped at 2 GiB and at half the filesystem
/// (xfsprogs `calculate_log_size`, with `XFS_MIN_REALISTIC_LOG_BLOCKS`;
/// measured 64 MiB for E4's 20 GiB, [`XFS_DEFAULT_LOG_BYTES`]).
pub fn xfs_default_log_bytes(geo: XfsGeometry) -> u64 {
    let fs = u64::from(geo.agcount) * geo.agblocks * PAGE_SIZE;
    (fs / 2048)
        .clamp(XFS_DEFAULT_LOG_BYTES, 2 << 30)
        .min((fs / 2).max(2 << 20))
}

impl Default for XfsOptions {
    fn default() -> Self {
        XfsOptions {
            geo: XfsGeometry::default(),
            allocsize_pages: None,
            logbsize: XFS_ICLOG_BYTES,
            log_bytes: None,
        }
    }
}

/// The XFS filesystem type.
#[derive(Default)]
pub struct Xfs {
    /// Options of filesystems made and mounted with this type.
    opts: XfsOptions,
    /// Per superblock, the AG state, created at first use.
    mounts: RefCell<BTreeMap<u64, Rc<XfsMount>>>,
    /// Superblocks with log items not yet forced to disk (metadata dirtied by
    /// writeback since the last log force).
    log_dirty: RefCell<BTreeSet<u64>>,
    /// Per superblock, the log, created at first use.
    logs: RefCell<BTreeMap<u64, Xlog>>,
    /// Per superblock, the ioend completion workqueue
    /// (`m_unwritten_workqueue`, "xfs-conv/<dev>"), created at first use.
    conv_wq: RefCell<BTreeMap<u64, Workqueue>>,
}

impl Xfs {
    /// XFS with the `mkfs.xfs` defaults ([`XfsGeometry::default`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// XFS whose filesystems have geometry `geo` (`agcount`, `agsize`).
    pub fn with_geometry(geo: XfsGeometry) -> Self {
        Self::with_options(XfsOptions {
            geo,
            ..XfsOptions::default()
        })
    }

    /// XFS made and mounted with `opts`.
    pub fn with_options(opts: XfsOptions) -> Self {
        Xfs {
            opts,
            ..Self::default()
        }
    }

    /// The AG state of `sb`, created at first use.
    pub fn mount(&self, m: &Machine, sb: &SuperBlock) -> Rc<XfsMount> {
        self.mounts
            .borrow_mut()
            .entry(sb.id)
            .or_insert_with(|| Rc::new(XfsMount::new(m, self.opts.geo)))
            .clone()
    }

    /// The log of `sb`, created (with its CIL worker and xfsaild) at first
    /// use.
    pub fn log(&self, m: &Machine, sb: &SuperBlock) -> Xlog {
        self.logs
            .borrow_mut()
            .entry(sb.id)
            .or_insert_with(|| {
                let p = XlogParams {
                    log_bytes: self
                        .opts
                        .log_bytes
                        .unwrap_or_else(|| xfs_default_log_bytes(self.opts.geo)),
                    logbsize: self.opts.logbsize,
                };
                Xlog::new(m.sim(), m.sched(), sb.device.clone(), p)
            })
            .clone()
    }

    /// `xfs_trans_alloc(tr_write)`: the CPU of the reservation and the log
    /// space, before the ILOCK.
    async fn trans_alloc_write(&self, m: &Machine, sb: &SuperBlock) -> (Xlog, XlogTicket) {
        m.sched().cpu(XFS_TRANS_RESERVE_NS).await;
        let log = self.log(m, sb);
        let t = log
            .reserve(XFS_TR_WRITE_LOGRES, XFS_TR_WRITE_LOGCOUNT)
            .await;
        (log, t)
    }

    /// The AG state of `sb` if it exists already.
    pub fn mount_if(&self, sb: &SuperBlock) -> Option<Rc<XfsMount>> {
        self.mounts.borrow().get(&sb.id).cloned()
    }

    /// What writeback of `inode` will have to do, as the `effort` policy
    /// classifies it at first dirtying: allocate (a hole inside the file or
    /// an empty file), convert unwritten blocks, or plain overwrite.
    pub fn writeback_effort(inode: &Inode) -> WritebackEffort {
        let size_pages = inode.st.borrow().i_size.div_ceil(PAGE_SIZE).max(1);
        let x = inode.extents.borrow();
        if x.needs_alloc(0, size_pages) {
            WritebackEffort::Delalloc
        } else if x.has_unwritten(0, size_pages) {
            WritebackEffort::Unwritten
        } else {
            WritebackEffort::Overwrite
        }
    }

    /// `xfs_log_force(XFS_LOG_SYNC)` writing one iclog (`logbsize` bytes)
    /// with PREFLUSH|FUA.
    async fn iclog_write(&self, m: &Rc<Machine>, sb: &Rc<SuperBlock>) {
        m.sched().cpu(XFS_LOG_FORCE_CPU_NS).await;
        if let Some(dev) = &sb.device {
            dev.submit_bio_wait(
                Bio::write(LOG_OFFSET, self.opts.logbsize).with_flags(XLOG_COMMIT_ICLOG_FLAGS),
            )
            .await;
        }
    }

    /// A log force: pushes the CIL and waits for it when it holds items,
    /// else writes one iclog if something was logged that the CIL does not
    /// model (size updates after overwrites).
    /// The busy regions freed before it are released when it is done
    /// (`xlog_cil_committed` -> `xfs_extent_busy_clear`).
    async fn log_force(&self, m: &Rc<Machine>, sb: &Rc<SuperBlock>) {
        let busy = sb.take_uncommitted_regions();
        self.force_log(m, sb).await;
        sb.free_committed_regions(busy);
    }

    async fn force_log(&self, m: &Rc<Machine>, sb: &Rc<SuperBlock>) {
        let log = self.logs.borrow().get(&sb.id).cloned();
        if let Some(log) = log {
            if log.force().await {
                self.log_dirty.borrow_mut().remove(&sb.id);
                return;
            }
        }
        if self.log_dirty.borrow_mut().remove(&sb.id) {
            self.iclog_write(m, sb).await;
        }
    }
}

impl Filesystem for Xfs {
    fn name(&self) -> &'static str {
        "xfs"
    }
    fn costs(&self) -> &'static FsCosts {
        &XFS_COSTS
    }
    fn max_folio_order(&self) -> u8 {
        // xfs_setup_inode -> mapping_set_folio_min_order(.., 0) with the
        // default maximum, MAX_PAGECACHE_ORDER.
        MAX_PAGECACHE_ORDER
    }
    fn fop_dontcache(&self) -> bool {
        true
    }
    fn fop_buffer_wasync(&self) -> bool {
        // xfs_file_operations.fop_flags has FOP_BUFFER_WASYNC.
        true
    }
    fn unwritten_convert_ns(&self, records: usize) -> Time {
        xfs_unwritten_convert_ns(records)
    }
    fn frees_space_at_commit(&self) -> bool {
        // Freed extents are busy (xfs_extent_busy_insert) until the freeing
        // transaction is on disk (xfs_extent_busy_clear at CIL commit); the
        // allocator goes around busy extents where it has other free space.
        true
    }
    /// `xfs_dialloc` of each new directory of the path, with `inode64`:
    /// the next AG of the rotor.
    fn mkdir(&self, m: &Machine, sb: &SuperBlock, dir: &str) {
        self.mount(m, sb).dir_agno(dir);
    }
    /// `xfs_dialloc` with `inode64`: the file's inode in its directory's AG.
    fn alloc_ino(&self, m: &Machine, sb: &SuperBlock, dir: &str) -> Option<u64> {
        Some(self.mount(m, sb).alloc_file_ino(dir))
    }
    /// `get_inode_wb_ctx_idx()`: `ino_mod` is `i_ino % nr_wb_ctx`;
    /// `fs_hook` is XFS's hook from the series (the inode's AG when
    /// agcount <= nr_wb_ctx, else `i_ino % nr_wb_ctx`); `effort` sends work
    /// that takes AGF locks (delalloc, unwritten) to the context of its AG
    /// (`agno % nr_wb_ctx`, so one AG never has two flushers) and spreads
    /// overwrites by `i_ino % nr_wb_ctx`.
    fn wb_ctx_for_inode(
        &self,
        sb: &SuperBlock,
        inode: &Inode,
        nr_wb_ctx: usize,
        policy: WbCtxAssign,
    ) -> usize {
        let nr = nr_wb_ctx.max(1);
        let ino_mod = (inode.ino % nr as u64) as usize;
        let Some(mp) = self.mount_if(sb) else {
            return ino_mod;
        };
        let agno = mp.ino_agno(inode.ino) as usize;
        match policy {
            WbCtxAssign::InoMod => ino_mod,
            WbCtxAssign::FsHook if mp.agcount() as usize <= nr => agno,
            WbCtxAssign::FsHook => ino_mod,
            WbCtxAssign::Effort => match Self::writeback_effort(inode) {
                WritebackEffort::Overwrite => ino_mod,
                WritebackEffort::Unwritten | WritebackEffort::Delalloc => agno % nr,
            },
        }
    }
    /// `xfs_bmapi_convert_delalloc` in the flusher's context: the log
    /// reservation, then under the ILOCK held exclusive the allocation of
    /// the whole delalloc extent (`xfs_bmap_btalloc` ->
    /// `xfs_alloc_vextent_start_ag` from the inode's AG), the free space
    /// btrees and the bmap btree at their heights, the commit; the AGF is
    /// held from the allocation to the end of the commit.
    fn convert_delalloc<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
        inode: &'a InodeRef,
        (s, e): (u64, u64),
    ) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            let mp = self.mount(m, sb);
            let (log, tic) = self.trans_alloc_write(m, sb).await;
            let ilock = inode.ilock.down_write().await;
            let (ds, de) = inode.extents.borrow().delalloc_extent(s, e);
            let (blocks, neighbours, records) = {
                let x = inode.extents.borrow();
                let left = ds > 0 && x.has_blocks(ds - 1);
                let right = x.has_blocks(de);
                (
                    x.hole_pages(ds, de),
                    u32::from(left) + u32::from(right),
                    x.nr_records(),
                )
            };
            if blocks == 0 {
                // Allocated meanwhile (by another writeback of the range):
                // xfs_trans_cancel gives the reservation back.
                log.cancel(tic);
                drop(ilock);
                return;
            }
            let start = mp.ino_agno(inode.ino);
            let (agno, agf) = mp.alloc_vextent_start_ag(start, blocks).await;
            let (bno, cnt) = mp.perags[agno as usize].alloc_btree_levels();
            // A new record unless the extent merges with a neighbour.
            let new_records = if neighbours == 0 {
                records + 1
            } else {
                records
            };
            let mut levels = bno + cnt + xfs_bmbt_levels(new_records);
            let split = bmbt_split(records, new_records);
            if split {
                // xfs_bmbt_alloc_block: a block for the split, same AG.
                levels += bno + cnt;
            }
            m.sched()
                .cpu(u64::from(levels) * XFS_BTREE_LEVEL_NS + XFS_TRANS_COMMIT_NS)
                .await;
            let size_pages = inode.st.borrow().i_size.div_ceil(PAGE_SIZE).max(e);
            let mut items = xfs_bmap_log_items(inode.ino, new_records, s, size_pages);
            if split {
                let leaves = xfs_bmbt_leaves(new_records);
                items.push(XlogItem::new(XlogItemKind::Bmbt, inode.ino, leaves));
            }
            let free = mp.perags[agno as usize].free_extents();
            items.extend(xfs_alloc_log_items(agno, free, inode.ino, s, size_pages));
            inode.extents.borrow_mut().allocate(s, e);
            mp.account_alloc(agno, blocks, neighbours);
            // xlog_cil_commit: the items are in the CIL and the AGF buffer
            // unlocked before a throttled commit sleeps; the ILOCK is
            // released by the caller after xfs_trans_commit returns.
            drop(agf);
            log.commit(tic, &items).await;
            drop(ilock);
            m.count_inode_event("xfs_bmapi_convert_delalloc", inode);
            m.sim().trace("xfs_alloc_vextent", || {
                format!("ino={} agno={agno} len={blocks}", inode.ino)
            });
        })
    }
    /// `xfs_vn_update_time` (fs/xfs/xfs_iops.c) without lazytime: a
    /// `tr_fsyncts` transaction (its reservation CPU and log space before
    /// the ILOCK), the ILOCK held exclusive while the new times are set and
    /// the inode core is logged (XFS_ILOG_TIMESTAMP), the commit into the
    /// CIL. Its CPU is the model's transaction cost ([`XFS_TRANS_NS`]);
    /// measured on this VM, a 4 KiB write that made this update took 4-5 us
    /// more than the median write (tracefs `xfs_update_time`, 4 runs of
    /// 40-62 such writes, medians).
    fn update_time<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
        inode: &'a InodeRef,
    ) -> Option<LocalBoxFuture<'a, ()>> {
        Some(Box::pin(async move {
            m.sched().cpu(XFS_TRANS_RESERVE_NS).await;
            let log = self.log(m, sb);
            let tic = log.reserve(XFS_TR_FSYNCTS_LOGRES, 1).await;
            let ilock = inode.ilock.down_write().await;
            m.sched().cpu(XFS_TRANS_COMMIT_NS).await;
            log.commit(tic, &[XlogItem::new(XlogItemKind::Inode, inode.ino, 0)])
                .await;
            drop(ilock);
            m.count_inode_event("xfs_update_time", inode);
        }))
    }
    /// `xfs_iomap_write_unwritten` at I/O completion: a transaction under
    /// the ILOCK held exclusive; when the bmap btree insert splits a block,
    /// the new block is allocated in the inode's AG under its AGF lock,
    /// held to the commit.
    fn convert_unwritten<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
        inode: &'a InodeRef,
        (s, e): (u64, u64),
    ) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            let mp = self.mount(m, sb);
            let before = inode.extents.borrow().nr_records();
            let conv = xfs_unwritten_convert_ns(before);
            // xfs_trans_alloc_inode(tr_write): the log space before the
            // ILOCK (its CPU is part of `conv`).
            let log = self.log(m, sb);
            let tic = log
                .reserve(XFS_TR_WRITE_LOGRES, XFS_TR_WRITE_LOGCOUNT)
                .await;
            let ilock = inode.ilock.down_write().await;
            m.sched().cpu(conv - XFS_TRANS_COMMIT_NS).await;
            inode.extents.borrow_mut().convert_unwritten(s, e);
            let after = inode.extents.borrow().nr_records();
            let size_pages = inode.st.borrow().i_size.div_ceil(PAGE_SIZE).max(e);
            let mut items = xfs_bmap_log_items(inode.ino, after, s, size_pages);
            if bmbt_split(before, after) {
                let start = mp.ino_agno(inode.ino);
                let (agno, agf) = mp.alloc_vextent_start_ag(start, 1).await;
                let (bno, cnt) = mp.perags[agno as usize].alloc_btree_levels();
                m.sched()
                    .cpu(u64::from(bno + cnt) * XFS_BTREE_LEVEL_NS + XFS_TRANS_COMMIT_NS)
                    .await;
                let leaves = xfs_bmbt_leaves(after);
                items.push(XlogItem::new(XlogItemKind::Bmbt, inode.ino, leaves));
                let free = mp.perags[agno as usize].free_extents();
                items.extend(xfs_alloc_log_items(agno, free, inode.ino, s, size_pages));
                mp.account_alloc(agno, 1, 1);
                drop(agf);
            } else {
                m.sched().cpu(XFS_TRANS_COMMIT_NS).await;
            }
            log.commit(tic, &items).await;
            drop(ilock);
        })
    }
    /// Speculative preallocation of a write past EOF, as
    /// `xfs_buffered_write_iomap_begin` sizes it: `allocsize=` when mounted
    /// with it; else `xfs_iomap_prealloc_size` with free space plentiful:
    /// none while the file is under 64 KiB (`m_allocsize_blocks`), the
    /// 64 KiB minimum when a hole precedes the write (a random write past
    /// EOF: `prev.br_startoff + prev.br_blockcount < offset_fsb`), otherwise
    /// twice the mapped range before it, rounded down to a power of two,
    /// at most `XFS_MAX_BMBT_EXTLEN`. Simplified: the preceding range counts
    /// pages with blocks, delalloc and preallocation alike (the kernel stops
    /// at a delalloc record or a physical discontinuity further back), and
    /// no low-space or quota throttling.
    fn eof_prealloc_pages(&self, isize_pages: u64, prev_run: Option<u64>) -> u64 {
        if let Some(a) = self.opts.allocsize_pages {
            return a;
        }
        if isize_pages < XFS_PREALLOC_MIN_PAGES {
            return 0;
        }
        match prev_run {
            None => XFS_PREALLOC_MIN_PAGES,
            Some(run) => (run * 2).clamp(XFS_PREALLOC_MIN_PAGES, XFS_PREALLOC_MAX_PAGES),
        }
    }
    fn end_io_work_name(&self) -> &'static str {
        "xfs_end_io"
    }
    fn end_io_wq(&self, m: &Rc<Machine>, sb: &SuperBlock) -> Option<Workqueue> {
        let wq = self
            .conv_wq
            .borrow_mut()
            .entry(sb.id)
            .or_insert_with(|| {
                // xfs_init_mount_workqueues() up to 6.18: WQ_FREEZABLE |
                // WQ_MEM_RECLAIM, no WQ_UNBOUND (WQ_PERCPU since the 2025
                // workqueue refactor): a bound workqueue, so `xfs_end_bio`
                // queues the ioend's work on the CPU where the bio
                // completed. (A 2026 patch proposes WQ_UNBOUND;
                // docs/kernel-mechanics.md §14.)
                let flags = WqFlags {
                    unbound: false,
                    mem_reclaim: true,
                    freezable: true,
                    ..WqFlags::default()
                };
                alloc_workqueue(m.sched(), &format!("xfs-conv/{}", sb.id), flags, 0)
            })
            .clone();
        Some(wq)
    }
    /// The log's counters (`fs.NAME.log_*`).
    fn stats(&self, sb: &SuperBlock) -> Vec<(&'static str, &'static str, f64)> {
        let Some(log) = self.logs.borrow().get(&sb.id).cloned() else {
            return Vec::new();
        };
        let s = log.stats();
        let ms = |ns: Time| ns as f64 / 1e6;
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        vec![
            ("log_reservations", "count", s.reservations as f64),
            ("log_grant_waits", "count", s.grant_waits as f64),
            ("log_grant_wait", "ms", ms(s.grant_wait_ns)),
            ("log_checkpoints", "count", s.checkpoints as f64),
            ("log_cil_throttles", "count", s.cil_throttles as f64),
            ("log_cil_throttle", "ms", ms(s.cil_throttle_ns)),
            ("log_written", "MiB", mib(s.log_bytes_written)),
            ("log_iclog_writes", "count", s.iclog_writes as f64),
            ("log_ail_items_written", "count", s.ail_items_written as f64),
            ("log_ail_written", "MiB", mib(s.ail_bytes_written)),
            ("log_ail_pinned", "count", s.ail_pinned as f64),
        ]
    }
    fn data_written(&self, sb: &SuperBlock) {
        // Delalloc conversion and size updates are logged.
        self.log_dirty.borrow_mut().insert(sb.id);
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
            // xfs_destroy_mount_workqueues (generic_shutdown_super has waited
            // for all writeback, so the completion work is idle).
            self.conv_wq.borrow_mut().remove(&sb.id);
            self.mounts.borrow_mut().remove(&sb.id);
            m.sched().cpu(XFS_UNMOUNT_CPU_NS).await;
            let log = self.logs.borrow_mut().remove(&sb.id);
            let Some(dev) = sb.device.clone() else {
                if let Some(log) = log {
                    log.shutdown();
                }
                return;
            };
            // xfs_ail_push_all_sync: with logged items, the log's own AIL;
            // otherwise (only size updates logged) a few buffers.
            let logged = match &log {
                Some(l) => l.stats().checkpoints > 0 || l.cil_bytes() > 0,
                None => false,
            };
            if let (Some(l), true) = (&log, logged) {
                self.log_dirty.borrow_mut().remove(&sb.id);
                l.push_all_sync().await;
            } else if self.log_dirty.borrow_mut().remove(&sb.id) {
                self.iclog_write(m, sb).await;
                dev.submit_bio_wait(
                    Bio::write(LOG_OFFSET / 2, XFS_AIL_PUSH_BYTES).with_flags(BioFlags::META),
                )
                .await;
            }
            // xfs_log_cover
            for _ in 0..XFS_LOG_COVER_FORCES {
                self.iclog_write(m, sb).await;
            }
            // xfs_log_unmount_write
            self.iclog_write(m, sb).await;
            // superblock in place, buftarg drain, cache flush
            dev.submit_bio_wait(Bio::write(0, XFS_SB_BYTES).with_flags(BioFlags::SYNC_META))
                .await;
            dev.flush().await;
            if let Some(log) = log {
                log.shutdown();
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speculative_preallocation_follows_xfs_iomap_prealloc_size() {
        let x = Xfs::new();
        // A file under 64 KiB gets none.
        assert_eq!(x.eof_prealloc_pages(15, Some(8)), 0);
        // A write past EOF after a hole (a random write) gets the 64 KiB
        // minimum, whatever the file's size.
        assert_eq!(x.eof_prealloc_pages(1 << 18, None), XFS_PREALLOC_MIN_PAGES);
        // A write extending a mapped range gets twice that range, at least
        // the minimum, at most XFS_MAX_BMBT_EXTLEN.
        assert_eq!(x.eof_prealloc_pages(1 << 10, Some(1 << 10)), 1 << 11);
        assert_eq!(x.eof_prealloc_pages(64, Some(4)), XFS_PREALLOC_MIN_PAGES);
        assert_eq!(
            x.eof_prealloc_pages(1 << 22, Some(1 << 21)),
            XFS_PREALLOC_MAX_PAGES
        );
        // allocsize= is used as it is.
        let a = Xfs::with_options(XfsOptions {
            allocsize_pages: Some(256),
            ..XfsOptions::default()
        });
        assert_eq!(a.eof_prealloc_pages(0, None), 256);
    }

    #[test]
    fn bmbt_levels_grow_with_records() {
        assert_eq!(xfs_bmbt_levels(1), 0);
        assert_eq!(xfs_bmbt_levels(XFS_IFORK_EXTENTS), 0);
        assert_eq!(xfs_bmbt_levels(XFS_IFORK_EXTENTS + 1), 1);
        assert_eq!(xfs_bmbt_levels(251), 1);
        assert_eq!(xfs_bmbt_levels(252), 2);
        assert_eq!(xfs_bmbt_levels(251 * 251 + 1), 3);
    }
}
