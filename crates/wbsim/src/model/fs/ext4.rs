//! An ext4-like filesystem (fs/ext4): delayed allocation, writeback through
//! `ext4_writepages`, a jbd2 journal whose commit (journal blocks with a cache
//! flush and FUA commit record) is what fsync and sync_fs(wait) pay for.
//!
//! Delayed-allocation space accounting (fs/ext4/inode.c, mballoc.c), when
//! the filesystem's `size` is given: the superblock's free and dirty cluster
//! counters (`s_freeclusters_counter`, `s_dirtyclusters_counter`). A
//! buffered write into holes reserves clusters (`ext4_da_reserve_space`:
//! dirty up); writeback allocates them (`ext4_mb_new_blocks` with
//! EXT4_MB_DELALLOC_RESERVED: free and dirty down); fallocate and fio's
//! layout allocate (free down); an unlinked file's eviction frees its blocks
//! and drops its reservations. `ext4_da_write_begin` first runs
//! `ext4_nonda_switch`: when dirty clusters exceed half the free ones it
//! calls `try_to_writeback_inodes_sb` (WB_REASON_FS_FREE_SPACE) and waits
//! for that writeback, and when free clusters are under 1.5x the dirty ones
//! (or under dirty + EXT4_FREECLUSTERS_WATERMARK) the write goes without
//! delalloc (`ext4_write_begin`: blocks allocated at once, under a journal
//! handle). Both tests use the counter values read before the writeback, as
//! the kernel does.
//!
//! Simplified: no block allocator (files are laid out contiguously), no extent
//! tree or journal space accounting, ordered-mode data flushing is the data
//! writeback fsync already waits for, and the journal commit is one fixed-size
//! synchronous write with PREFLUSH|FUA. The cluster is the 4 KiB block
//! (no bigalloc); percpu counter drift is not modelled (exact counts);
//! ENOSPC (`ext4_claim_free_clusters` failing) and the root-reserved blocks
//! are not modelled; freed blocks count as free at once, but a freed file's
//! data region is handed out again only after the next jbd2 commit (there is
//! no periodic 5 s commit: fsync and sync_fs commit). Without a `size` option there
//! is no accounting and the switch never fires.

use std::cell::Cell;
use std::rc::Rc;

use sim::{Time, USEC};

use crate::model::block::{Bio, BioFlags};
use crate::model::fs::inode::{Inode, InodeRef};
use crate::model::fs::sync::try_to_writeback_inodes_sb;
use crate::model::fs::vfs::Machine;
use crate::model::fs::vfs::SuperBlock;
use crate::model::fs::vfs::{Filesystem, FsCosts, LocalBoxFuture};
use crate::model::mm::backing_dev::WbReason;
use crate::model::mm::filemap::MAX_PAGECACHE_ORDER;
use crate::model::mm::vmstat::PAGE_SIZE;

/// CPU per page of a buffered write (`ext4_da_write_begin`, copy,
/// `ext4_da_write_end`) into blocks that need no reservation (preallocated,
/// already written, or already delayed), ns: 0.35 us. Measured with `wbsim
/// probe dontcache` on the project machine (Linux 6.18, 2 vCPU;
/// docs/probe/dontcache.json, 3 rounds, 2026-11-25, load at the first round
/// 0.4-0.6): from the p50 latency of a 1 MiB buffered write (S) and a 4 KiB
/// one (R) into preallocated files, with 1 us of syscall entry: per page =
/// (S - R) / 255 = (91.711 - 2.153) / 255 us.
pub const EXT4_WRITE_PAGE_NS: Time = 351;
/// CPU per block of a buffered write into a hole, besides
/// [`EXT4_WRITE_PAGE_NS`]: `ext4_da_map_blocks` finds no extent, so
/// `ext4_insert_delayed_blocks` reserves the cluster (`ext4_da_reserve_space`:
/// quota and the dirty-clusters counter) and inserts the delayed extent in
/// the extent status tree, block by block as `ext4_block_write_begin` walks
/// the folio's buffer heads, ns: 0.27 us. Measured as above from the same
/// probe file: the 1 MiB writes into a sparse file cost (161.023 - 2.465) /
/// 255 = 0.622 us per page, 0.271 more than into a preallocated one; the
/// 4 KiB writes give 0.312 (2.465 - 2.153). A block already delayed (dirty
/// again before writeback) or unwritten is mapped without this.
pub const EXT4_DA_RESERVE_NS: Time = 271;
/// CPU per buffered write call, besides the per-page work and the syscall
/// entry (`->write_iter` setup, the filesystem's begin/end of the range,
/// inode locking, timestamps), ns. Measured like the per-page cost on the
/// sparse file: R - 1 us - per page - reservation = 2.465 - 1 - 0.351 -
/// 0.271 us (the preallocated file gives 2.153 - 1 - 0.351 = 0.80).
pub const EXT4_WRITE_CALL_NS: Time = 840;
/// Extra CPU of `ext4_da_map_blocks` for a write into a hole away from the
/// previous write (`FsCosts::extent_walk_ns`: the extent status tree walked
/// cold to look the hole up and insert the delayed extent, under
/// `i_data_sem`), ns: 1.11 us. Measured with `wbsim probe dontcache`
/// (docs/probe/dontcache.json, 3 rounds, 2026-11-25): mean clat of 4 KiB
/// random buffered writes into a sparse 256 MiB file (3.956 us) minus 4 KiB
/// sequential ones (2.847 us, which also reserve but extend the extent the
/// last write left cached); into a preallocated file random and sequential
/// writes cost the same (2.395 against 2.363 us).
pub const EXT4_EXTENT_WALK_NS: Time = 1_110;
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
/// CPU of allocating one delalloc extent at writeback (`ext4_map_blocks` ->
/// `ext4_mb_new_blocks` on the reserved clusters, the extent insert, the
/// `i_disksize` update in the writepages call's handle), besides
/// [`EXT4_WRITEPAGES_CALL_NS`], which was measured on preallocated files,
/// ns: 2.7 us. Measured with `wbsim probe dontcache`
/// (docs/probe/dontcache.json, 3 rounds, 2026-11-25), p50s as the call cost:
/// a 4 KiB dontcache write into a sparse file (10.831 us) minus one into a
/// preallocated file (7.843), less what the buffered write itself costs
/// more there (2.465 - 2.153): 2.68 us; the random writes give 2.87
/// ((15.727 - 11.479) - (3.545 - 2.165)).
pub const EXT4_DELALLOC_ALLOC_NS: Time = 2_700;
/// Bytes written per jbd2 commit (descriptor, metadata blocks, commit block):
/// 16 KiB, a small transaction.
pub const EXT4_COMMIT_BYTES: u64 = 16 << 10;
/// CPU of a jbd2 commit (`jbd2_journal_commit_transaction`), ns: ~20 us.
pub const EXT4_COMMIT_CPU_NS: Time = 20 * USEC;
/// CPU of `ext4_put_super` outside its I/O (`jbd2_journal_destroy` stopping
/// the kjournald2 thread, `ext4_mb_release`, freeing percpu counters and
/// group descriptors), ns: 50 us. Estimate (order of magnitude).
pub const EXT4_PUT_SUPER_CPU_NS: Time = 50 * USEC;
/// CPU per block of a buffered write that goes without delalloc
/// (`ext4_write_begin`: a journal handle per folio, `ext4_block_write_begin`
/// mapping each block with `ext4_get_block_unwritten` -> `ext4_map_blocks`
/// with create, an mballoc allocation from the inode's preallocation), ns,
/// besides [`EXT4_WRITE_PAGE_NS`]: 1.5 us. Estimate (not measured: the live
/// probe's jobs spend almost no time in this mode).
pub const EXT4_NONDA_BLOCK_NS: Time = 1_500;
/// `percpu_counter_batch` (lib/percpu_counter.c, `compute_batch_value`):
/// max(32, 2 x online CPUs).
fn percpu_counter_batch(cpus: u64) -> u64 {
    32.max(2 * cpus)
}
/// `EXT4_FREECLUSTERS_WATERMARK` (fs/ext4/ext4.h, CONFIG_SMP):
/// 4 x percpu_counter_batch x nr_cpu_ids, clusters.
pub fn ext4_freeclusters_watermark(cpus: u64) -> u64 {
    4 * percpu_counter_batch(cpus) * cpus
}
/// The journal `mkfs.ext4` (e2fsprogs 1.47, `ext2fs_default_journal_size`)
/// gives a filesystem of `blocks` 4 KiB blocks, in blocks.
fn default_journal_blocks(blocks: u64) -> u64 {
    match blocks {
        b if b < 2048 => 0,
        b if b < 32 * 1024 => 1024,
        b if b < 256 * 1024 => 4096,
        b if b < 512 * 1024 => 8192,
        b if b < 4096 * 1024 => 16384,
        b if b < 8192 * 1024 => 32768,
        b if b < 16384 * 1024 => 65536,
        b if b < 32768 * 1024 => 131072,
        _ => 262144,
    }
}
/// Free clusters of a fresh `mkfs.ext4` (defaults: 4 KiB blocks, one
/// 256-byte inode per 16 KiB, the default journal) of `bytes`: the blocks
/// less the inode tables (1/64 of the blocks) and the journal. Checked
/// against `mkfs.ext4 -F -q` + `dumpe2fs -h` (e2fsprogs 1.47.0) on sparse
/// images on the project machine: 1 GiB 249,189 free blocks (this gives
/// 249,856), 2 GiB 498,132 (499,712); the rest is the bitmaps, group
/// descriptors and their backups (0.3%), left out.
pub fn mkfs_free_clusters(bytes: u64) -> u64 {
    let blocks = bytes / PAGE_SIZE;
    blocks.saturating_sub(blocks / 64 + default_journal_blocks(blocks))
}
/// Journal offset on the device (the journal sits apart from data).
const JOURNAL_OFFSET: u64 = 1 << 40;

/// The data-path costs of ext4, from the constants above.
pub const EXT4_COSTS: FsCosts = FsCosts {
    write_page_ns: EXT4_WRITE_PAGE_NS,
    write_call_ns: EXT4_WRITE_CALL_NS,
    extent_walk_ns: EXT4_EXTENT_WALK_NS,
    writepage_ns: EXT4_WRITEPAGE_NS,
    writepages_call_ns: EXT4_WRITEPAGES_CALL_NS,
    ..FsCosts::GENERIC
};

/// The superblock's cluster counters (`s_freeclusters_counter`,
/// `s_dirtyclusters_counter`), in 4 KiB clusters, and what the free-space
/// check did.
#[derive(Debug, Default)]
pub struct Ext4Space {
    /// Free clusters (allocated ones are out; delalloc reservations are not).
    pub free: Cell<u64>,
    /// Clusters reserved by delalloc writes and not yet allocated.
    pub dirty: Cell<u64>,
    /// `try_to_writeback_inodes_sb` calls from `ext4_nonda_switch`.
    pub writeback_calls: Cell<u64>,
    /// Write steps that went without delalloc.
    pub nonda_writes: Cell<u64>,
}

/// The ext4-like filesystem type. With a size (`size` option, the device
/// `mkfs.ext4` ran on), it keeps delalloc space accounting ([`Ext4Space`]).
#[derive(Default)]
pub struct Ext4 {
    space: Option<Ext4Space>,
}

impl Ext4 {
    /// An ext4 made by `mkfs.ext4` on `bytes` (free clusters from
    /// [`mkfs_free_clusters`]).
    pub fn with_size(bytes: u64) -> Self {
        Ext4 {
            space: Some(Ext4Space {
                free: Cell::new(mkfs_free_clusters(bytes)),
                ..Ext4Space::default()
            }),
        }
    }

    /// The cluster counters, if space is accounted.
    pub fn space(&self) -> Option<&Ext4Space> {
        self.space.as_ref()
    }

    /// `ext4_nonda_switch`: reads both counters; if dirty clusters exceed
    /// half the free ones, starts writeback of the superblock and waits for
    /// it; then says, from the values read before, whether to write without
    /// delalloc.
    async fn nonda_switch(&self, sp: &Ext4Space, m: &Rc<Machine>, sb: &Rc<SuperBlock>) -> bool {
        let (free, dirty) = (sp.free.get(), sp.dirty.get());
        if dirty > 0 && free < 2 * dirty {
            sp.writeback_calls.set(sp.writeback_calls.get() + 1);
            m.count_event("ext4_nonda_writeback");
            try_to_writeback_inodes_sb(m, sb, WbReason::FsFreeSpace).await;
        }
        let wm = ext4_freeclusters_watermark(m.sched().nr_cpus() as u64);
        2 * free < 3 * dirty || free < dirty + wm
    }

    /// `ext4_da_write_begin` for the folios `[s, e)`: with space accounting,
    /// the switch; then either the delalloc reservation of the holes not yet
    /// reserved (`ext4_da_map_blocks` -> `ext4_insert_delayed_blocks`, its
    /// CPU per block), or, without delalloc, the allocation of every hole at
    /// once (reservations of dirty holes are used up, as
    /// `ext4_da_update_reserve_space` does).
    async fn da_write_begin(
        &self,
        m: &Rc<Machine>,
        sb: &Rc<SuperBlock>,
        inode: &InodeRef,
        (s, e): (u64, u64),
    ) {
        let nonda = match &self.space {
            Some(sp) => self.nonda_switch(sp, m, sb).await,
            None => false,
        };
        let (holes, reserved) = {
            let ext = inode.extents.borrow();
            let map = inode.mapping.borrow();
            ext.holes(s, e)
                .into_iter()
                .fold((0, 0), |(h, r), (hs, he)| {
                    (h + he - hs, r + map.dirty_in(hs, he))
                })
        };
        if nonda {
            let sp = self.space.as_ref().expect("nonda needs space accounting");
            sp.nonda_writes.set(sp.nonda_writes.get() + 1);
            m.count_event("ext4_nonda_write");
            m.sched().cpu(holes * EXT4_NONDA_BLOCK_NS).await;
            let got = inode.extents.borrow_mut().allocate(s, e);
            sp.free.set(sp.free.get().saturating_sub(got));
            sp.dirty.set(sp.dirty.get().saturating_sub(reserved));
        } else {
            let new = holes - reserved;
            if new > 0 {
                m.sched().cpu(new * EXT4_DA_RESERVE_NS).await;
            }
            if let Some(sp) = &self.space {
                sp.dirty.set(sp.dirty.get() + new);
            }
        }
    }
}

impl Ext4 {
    /// A jbd2 commit of the running transaction; the data regions it freed
    /// become allocatable when it is on disk.
    async fn commit(&self, m: &Rc<Machine>, sb: &Rc<SuperBlock>) {
        let freed = sb.take_uncommitted_regions();
        m.sched().cpu(EXT4_COMMIT_CPU_NS).await;
        if let Some(dev) = &sb.device {
            let flags = BioFlags {
                preflush: true,
                fua: true,
                sync: true,
                ..BioFlags::default()
            };
            dev.submit_bio_wait(Bio::write(JOURNAL_OFFSET, EXT4_COMMIT_BYTES).with_flags(flags))
                .await;
        }
        sb.free_committed_regions(freed);
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
    fn write_begin<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
        inode: &'a InodeRef,
        range: (u64, u64),
    ) -> Option<LocalBoxFuture<'a, ()>> {
        Some(Box::pin(self.da_write_begin(m, sb, inode, range)))
    }
    fn convert_delalloc<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
        inode: &'a InodeRef,
        (s, e): (u64, u64),
    ) -> LocalBoxFuture<'a, ()> {
        let _ = sb;
        // ext4_map_blocks at writeback (mpage_map_one_extent): mballoc
        // allocates the reserved clusters (EXT4_MB_DELALLOC_RESERVED) in the
        // writepages call's journal handle, which also moves i_disksize.
        Box::pin(async move {
            m.sched().cpu(EXT4_DELALLOC_ALLOC_NS).await;
            let got = inode.extents.borrow_mut().allocate(s, e);
            if let Some(sp) = &self.space {
                sp.free.set(sp.free.get().saturating_sub(got));
                sp.dirty.set(sp.dirty.get().saturating_sub(got));
            }
        })
    }
    fn blocks_allocated(&self, _sb: &SuperBlock, pages: u64) {
        if let Some(sp) = &self.space {
            sp.free.set(sp.free.get().saturating_sub(pages));
        }
    }
    fn frees_space_at_commit(&self) -> bool {
        // ext4_free_blocks puts the freed extents on the running
        // transaction's list; ext4_process_freed_data gives them to the
        // buddy allocator once that transaction has committed.
        true
    }
    fn evict_blocks(&self, _sb: &SuperBlock, inode: &Inode) {
        let Some(sp) = &self.space else { return };
        // ext4_evict_inode -> ext4_truncate frees the blocks
        // (ext4_free_blocks); truncate_inode_pages_final drops the dirty
        // delalloc folios, releasing their reservations
        // (ext4_da_release_space).
        let ext = inode.extents.borrow();
        let map = inode.mapping.borrow();
        let reserved: u64 = ext
            .holes(0, u64::MAX)
            .into_iter()
            .map(|(hs, he)| map.dirty_in(hs, he))
            .sum();
        sp.free.set(sp.free.get() + ext.block_pages());
        sp.dirty.set(sp.dirty.get().saturating_sub(reserved));
    }
    fn stats(&self, _sb: &SuperBlock) -> Vec<(&'static str, &'static str, f64)> {
        let Some(sp) = &self.space else {
            return Vec::new();
        };
        vec![
            (
                "ext4.nonda_writeback_calls",
                "calls",
                sp.writeback_calls.get() as f64,
            ),
            ("ext4.nonda_writes", "writes", sp.nonda_writes.get() as f64),
            ("ext4.free_clusters_end", "clusters", sp.free.get() as f64),
        ]
    }
    fn fsync_commit<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
        _datasync: bool,
    ) -> LocalBoxFuture<'a, ()> {
        Box::pin(self.commit(m, sb))
    }
    fn sync_fs<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
        wait: bool,
    ) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            if wait {
                self.commit(m, sb).await;
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
            self.commit(m, sb).await;
            if let Some(dev) = &sb.device {
                let flags = BioFlags {
                    preflush: true,
                    fua: true,
                    sync: true,
                    ..BioFlags::default()
                };
                dev.submit_bio_wait(Bio::write(0, 4096).with_flags(flags))
                    .await;
            }
        })
    }
}
