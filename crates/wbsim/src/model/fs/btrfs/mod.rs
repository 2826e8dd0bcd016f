//! btrfs (fs/btrfs): buffered writes and writeback through the generic
//! paths, a bdi of its own per superblock (SB_I_PERSB_BDI, torn down with
//! `bdi_unregister` at umount), no RWF_DONTCACHE, and metadata as trees of
//! extent buffers with rw_semaphore locks, changed by transactions.
//!
//! The submodules are laid out as the kernel's fs/btrfs/: [`extent_io`]
//! (extent buffers), [`locking`] (tree block locks = rw_semaphores),
//! [`ctree`] (geometry, `btrfs_search_slot` with lock coupling, COW and
//! commit-root searches), [`file_item`] (csum items,
//! `btrfs_lookup_bio_sums` with the `csum_lookup` switch,
//! `btrfs_del_csums`), [`inode`] (the ordered-extent end of a write: a new
//! extent, or a COW overwrite), [`delayed_ref`] and [`extent_tree`]
//! (reference drops run at commit), [`fs`] and [`transaction`] (handles,
//! states, `btrfs_commit_transaction`, `switch_commit_roots`,
//! commit_stats), [`disk_io`] (the trees of a preloaded data set,
//! `write_all_supers`).
//!
//! Wired into the data paths here:
//! - mount (`open_ctree`, on first use of the superblock): the trees of the
//!   preloaded files ([`BtrfsOptions`]: `subvolumes` x `preload_files` of
//!   `preload_size`, laid out without simulating their writes, generation
//!   [`BTRFS_PRELOAD_GENERATION`]) and the transaction kthread committing
//!   every `commit=` seconds;
//! - buffered reads: before the read bio, `btrfs_lookup_bio_sums` per extent
//!   of the range, in the current root with node read locks or (switch
//!   `csum_lookup = commit_root_for_old`, extents older than the newest
//!   transaction) in the commit root under `commit_root_sem`;
//! - writeback: each written range is an ordered extent, finished after
//!   its I/O on the endio_write workers (`btrfs_finish_ordered_io`, a
//!   `TRANS_JOIN` handle) before its pages' writeback ends: a range without
//!   extents gets a new one; one with extents has each rewritten (COW: new
//!   extent, csums inserted, the old extent's ref dropped through a delayed
//!   ref whose run at commit deletes its csums);
//! - open(O_TRUNC) (`btrfs_setsize` to zero): a file with data is written
//!   back and its ordered extents waited for, its page cache dropped, its
//!   extents freed through delayed refs (`btrfs_truncate`), and
//!   `BTRFS_INODE_FLUSH_ON_CLOSE` set, so the last close starts writeback
//!   of the new data (`btrfs_release_file` -> `filemap_flush`);
//! - sync_fs(wait), fsync and umount (`close_ctree`, which always commits)
//!   run `btrfs_commit_transaction`, one committer at a time.
//!
//! Simplified: an ordered extent is one ioend (a contiguous range of one
//! writepages call) and the pages' writeback ends after it is finished,
//! where btrfs ends the folios' writeback in the bio's completion and
//! finishes the ordered extent after; an extent rewritten in part is
//! rewritten whole; the data I/O goes to the file's fixed place on the device, not to the
//! new extent's address; preloaded files are bound to VFS inodes in the
//! order they are opened under `subvol<N>/`; no log tree (fsync commits),
//! no writeback of the btree inode under memory pressure (its page cache is
//! modelled: [`extent_io::BtreeInode`]), no space reservation or multiple
//! devices.

pub mod ctree;
pub mod delayed_ref;
pub mod disk_io;
pub mod extent_io;
pub mod extent_tree;
pub mod file_item;
pub mod fs;
pub mod inode;
pub mod locking;
pub mod transaction;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use sim::{Time, USEC};

use crate::model::fs::btrfs::ctree::BTRFS_NODESIZE;
use crate::model::fs::btrfs::disk_io::{
    BtrfsFileSpec, BtrfsFsInfo, BTRFS_FIRST_FREE_OBJECTID, BTRFS_FS_TREE_OBJECTID,
};
use crate::model::fs::btrfs::extent_io::BtreeInode;
use crate::model::fs::btrfs::file_item::{btrfs_lookup_bio_sums, BTRFS_SECTORSIZE};
use crate::model::fs::btrfs::inode::{
    btrfs_finish_ordered_new, btrfs_finish_ordered_overwrite, btrfs_truncate_to_zero,
};
use crate::model::fs::btrfs::transaction::{
    btrfs_commit_transaction, BTRFS_DEFAULT_COMMIT_INTERVAL,
};
use crate::model::fs::inode::{Inode, InodeRef};
use crate::model::fs::open::truncate_setsize_zero;
use crate::model::fs::sync::{file_write_and_wait, filemap_fdatawrite_range_kick};
use crate::model::fs::vfs::Machine;
use crate::model::fs::vfs::SuperBlock;
use crate::model::fs::vfs::{Filesystem, FsCosts, LocalBoxFuture};
use crate::model::kernel::locking::{Mutex, RwsemParams};
use crate::model::kernel::sched::CgroupId;
use crate::model::kernel::workqueue::{alloc_workqueue, queue_work, Work, Workqueue, WqFlags};
use crate::model::mm::vmstat::PAGE_SIZE;

/// CPU per page of a buffered write (`btrfs_buffered_write`: space
/// reservation, extent locking, copy), ns: 3.02 us. Measured with `wbsim probe
/// dontcache` on the project machine (Linux 6.18, 2 vCPU; docs/probe/dontcache.json, 3 rounds, 2026-11-25, load at the first round 0.4-0.6):
/// from the p50 latency of a 1 MiB buffered write (S) and a 4 KiB one (R),
/// with 1 us of syscall entry: per page = (S - R) / 255 =
/// (774.1 - 3.7) / 255 us.
pub const BTRFS_WRITE_PAGE_NS: Time = 3_020;
/// CPU per buffered write call, besides the per-page work and the syscall
/// entry (`->write_iter` setup, the filesystem's begin/end of the range,
/// inode locking, timestamps), ns: 2.25 us, from the earlier (busy) run of
/// commit da9ba12: R - 1 us - per page = 7.08 - 1 - 3.83 us. Not re-derived
/// from the 2026-11-25 quiet run, where the same method gives a negative
/// value (3.74 - 1 - 3.02 us): the 1 MiB write's slope holds costs that are
/// not per page.
pub const BTRFS_WRITE_CALL_NS: Time = 2_250;
/// CPU per page submitted by `btrfs_writepages` (`extent_write_cache_pages`,
/// `writepage_delalloc` with the extent allocation of `cow_file_range`,
/// ordered extents, `folio_clear_dirty_for_io`, `submit_extent_folio`; the
/// data checksum is [`BTRFS_CSUM_SUBMIT_SECTOR_NS`], added in
/// [`BTRFS_COSTS`]), ns: 1.67 us. Measured on the project host, 2026-11-28
/// (third session, machine idle, load 0.4): umount(2) of a btrfs on a loop
/// device (`--direct-io=on`) right after writing 64 MiB (16,384 order-0
/// folios: btrfs data has no large folios in 6.18) without sync, all of it
/// still dirty at the umount (/proc/meminfo `Dirty` 64 MiB), `perf record
/// -F 10000 -a -g` around each of 4 umounts: the writeback kworker ran
/// 32.4-32.9 ms in three (38.1 in the fourth, a slower run), 2.0 us per
/// page, less the 0.33 us checksum. (It was a 0.8 us estimate; a first
/// measurement the same day gave 1.18 us, on a loop device whose bdi an
/// earlier probe run had left capped at 64 MiB with `strict_limit`, so
/// part of the data was written before the umount's window.)
pub const BTRFS_WRITEPAGE_NS: Time = 1_670;
/// CPU to drop one page of an evicted btrfs inode's page cache
/// (`btrfs_evict_inode` -> `truncate_inode_pages_final`: per order-0 folio
/// `btrfs_invalidate_folio` clearing its extent state and qgroup
/// reservation, then the generic deletion, uncharge and freeing), ns:
/// 0.7 us. Measured in the same umounts as [`BTRFS_WRITEPAGE_NS`]:
/// samples of the umount task under `truncate_inode_pages_range`, 10.9-11.9
/// ms for the 16,384 pages in the three steady runs (0.67-0.73 us; 10.5-12.3
/// ms in the first measurement). The generic `TRUNCATE_PAGE_NS` (50 ns) fits large
/// folios (XFS: the same 64 MiB truncated in 0.8-0.9 ms), not btrfs's
/// order-0 ones; tmpfs's order-0 pages cost 0.54 us (`SHMEM_FREE_PAGE_NS`).
pub const BTRFS_EVICT_PAGE_NS: Time = 700;
/// CPU per 4 KiB sector of checksumming data at submission
/// (`btrfs_submit_chunk` -> `btrfs_csum_one_bio`: crc32c of each sector into
/// the ordered extent's csum list), in the submitter's context: with a fast
/// checksum implementation (crc32c with SSE4.2/AVX-512,
/// `BTRFS_FS_CSUM_IMPL_FAST`) `should_async_write` keeps it synchronous, so
/// the flusher or the fsync caller pays it. ns: 0.33 us, the same crc32c
/// over the same 4 KiB as [`BTRFS_CSUM_VERIFY_SECTOR_NS`] measures on reads
/// (measured there, taken as is here).
pub const BTRFS_CSUM_SUBMIT_SECTOR_NS: Time = BTRFS_CSUM_VERIFY_SECTOR_NS;
/// CPU of `close_ctree` outside the final commit (stopping the cleaner and
/// transaction kthreads, destroying the btrfs workqueues with their rescuer
/// kthreads, freeing block groups, roots and caches), ns: 430 us. Measured
/// on the project host, 2026-11-28 (third session): `perf record -F 20000
/// -a -g` around 4 umounts of a clean btrfs on a loop device: 5-11
/// samples of the umount task under `close_ctree` (0.25-0.55 ms, mean
/// 0.43), besides 3-4 samples of the exiting `kworker/R-btrfs-*` rescuers.
/// (It was a 100 us estimate.)
pub const BTRFS_CLOSE_CTREE_CPU_NS: Time = 430 * USEC;
/// Offset of metadata on the device (apart from data).
const META_OFFSET: u64 = 1 << 40;

/// CPU per page of `btrfs_readahead` (`btrfs_do_readpage` per folio: the
/// extent map lookup, `submit_extent_folio` adding it to the read bio), paid
/// by the reader, ns: 0.12 us. Measured on the project host, 2026-11-28,
/// btrfs on loop, 3 runs (see `CpuCosts`): of the 0.61 us per page an
/// uncached read costs the reader more than a cached one, perf puts 19 %
/// under `btrfs_readahead`.
pub const BTRFS_READPAGE_NS: Time = 120;
/// CPU per 4 KiB sector of verifying a data read at completion
/// (`btrfs_end_bio_work` -> `btrfs_check_read_bio` -> `btrfs_data_csum_ok`:
/// crc32c of the sector, compared with the csum looked up at submission;
/// then `end_bbio_data_read` marks the folios up to date and unlocks them),
/// on a btrfs-endio kworker, ns: 0.33 us. Measured on the project host,
/// 2026-11-28, btrfs on loop, 3 runs (see `CpuCosts`): perf gives the
/// endio work 12-13 % of the samples of an uncached 2 GiB read whose
/// reader (41 % of the samples) used 0.53 s of system time, i.e.
/// 0.15-0.17 s for 524,288 sectors (crc32c with the AVX-512 routine; the
/// data is cold in the cache, just written by DMA).
pub const BTRFS_CSUM_VERIFY_SECTOR_NS: Time = 330;

/// The data-path costs of btrfs, from the constants above.
pub const BTRFS_COSTS: FsCosts = FsCosts {
    write_page_ns: BTRFS_WRITE_PAGE_NS,
    write_call_ns: BTRFS_WRITE_CALL_NS,
    writepage_ns: BTRFS_WRITEPAGE_NS + BTRFS_CSUM_SUBMIT_SECTOR_NS,
    readpage_ns: BTRFS_READPAGE_NS,
    evict_page_ns: BTRFS_EVICT_PAGE_NS,
    ..FsCosts::GENERIC
};

/// `thread_pool_size` (fs/btrfs/super.c `btrfs_init_fs_context`, mount option
/// `thread_pool=`): min(online CPUs + 2, 8), the `max_active` of the
/// btrfs workqueues (`btrfs_init_workqueues`, fs/btrfs/disk-io.c).
pub fn btrfs_thread_pool_size(cpus: usize) -> usize {
    (cpus + 2).min(8)
}

/// `btrfs_alloc_workqueue` as `btrfs_init_workqueues` makes the endio
/// ones: WQ_UNBOUND | WQ_MEM_RECLAIM | WQ_FREEZABLE, `max_active` =
/// `thread_pool_size`.
fn btrfs_alloc_workqueue(m: &Machine, name: &str) -> Workqueue {
    let flags = WqFlags {
        unbound: true,
        mem_reclaim: true,
        freezable: true,
        ..WqFlags::default()
    };
    alloc_workqueue(
        m.sched(),
        name,
        flags,
        btrfs_thread_pool_size(m.sched().nr_cpus()),
    )
}

/// The mount and mkfs choices of one btrfs (`[[filesystem]] options`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BtrfsOptions {
    /// `commit=`: the transaction kthread's interval, ns (default 30 s,
    /// `BTRFS_DEFAULT_COMMIT_INTERVAL`).
    pub commit_interval: Time,
    /// Subvolumes holding preloaded files (`btrfs subvolume create`
    /// beforehand): `subvol0` .. `subvol<N-1>` under the mount point.
    pub subvolumes: u64,
    /// Preloaded files per subvolume ("written beforehand": laid out on
    /// disk with their trees, not simulated, not cached).
    pub preload_files: u64,
    /// Size of each preloaded file, bytes.
    pub preload_size: u64,
}

impl Default for BtrfsOptions {
    fn default() -> Self {
        BtrfsOptions {
            commit_interval: BTRFS_DEFAULT_COMMIT_INTERVAL,
            subvolumes: 0,
            preload_files: 0,
            preload_size: 0,
        }
    }
}

/// The generation of the preloaded data set: the transaction that wrote it,
/// committed before the run (any value below the first running one).
pub const BTRFS_PRELOAD_GENERATION: u64 = 1;

/// One mounted btrfs: its trees and transactions, and the lock serializing
/// committers (a second committer waits for a commit in progress, as
/// `btrfs_commit_transaction` waits on `cur_trans->commit_wait`, then
/// commits whatever is new).
struct BtrfsSb {
    /// The trees (`fs_info`).
    fs: Rc<BtrfsFsInfo>,
    /// Serializes commits.
    commit_mutex: Mutex,
    /// Next preloaded inode index per subvolume (files opened there map to
    /// the preloaded ones in order).
    next_in_subvol: RefCell<BTreeMap<u64, u64>>,
    /// `fs_info->endio_workers` ("btrfs-endio": WQ_UNBOUND | WQ_MEM_RECLAIM
    /// | WQ_FREEZABLE, `max_active` = `thread_pool_size`): where data read
    /// bios are verified (`btrfs_simple_end_io` queues `btrfs_end_bio_work`).
    endio_workers: Workqueue,
    /// VFS inodes with `BTRFS_INODE_FLUSH_ON_CLOSE` set: truncated to zero
    /// (`btrfs_setsize`), to be flushed at their last close.
    flush_on_close: RefCell<BTreeSet<u64>>,
    /// `fs_info->endio_write_workers` ("btrfs-endio-write": WQ_UNBOUND |
    /// WQ_MEM_RECLAIM | WQ_FREEZABLE, `max_active` = `thread_pool_size`):
    /// where a written range's ordered extent is finished after its I/O
    /// (`btrfs_finish_ordered_io`).
    endio_write_workers: Workqueue,
}

/// The btrfs filesystem type.
#[derive(Default)]
pub struct Btrfs {
    /// Mount options.
    opts: BtrfsOptions,
    /// The mounted filesystems, by superblock id.
    sbs: RefCell<BTreeMap<u64, Rc<BtrfsSb>>>,
}

/// The inode number a VFS inode of subvolume index `sv` (None: the top
/// level) gets for btrfs inode `ino`: the subvolume in the high 32 bits.
fn vfs_ino(sv: Option<u64>, ino: u64) -> u64 {
    sv.map_or(0, |s| (s + 1) << 32) | ino
}

/// The btrfs (subvolume id, inode number) of a VFS inode number.
fn btrfs_ino(vfs: u64) -> (u64, u64) {
    match vfs >> 32 {
        0 => (BTRFS_FS_TREE_OBJECTID, BTRFS_FIRST_FREE_OBJECTID + 1 + vfs),
        s => (BTRFS_FIRST_FREE_OBJECTID + s - 1, vfs & 0xffff_ffff),
    }
}

impl Btrfs {
    /// A btrfs with default options.
    pub fn new() -> Self {
        Self::default()
    }

    /// A btrfs with the given options.
    pub fn with_options(opts: BtrfsOptions) -> Self {
        Btrfs {
            opts,
            sbs: RefCell::new(BTreeMap::new()),
        }
    }

    /// The trees of `sb`, made on first use (`open_ctree` of the mount):
    /// the preloaded files laid out, and the transaction kthread started.
    fn sb_info(&self, m: &Machine, sb: &SuperBlock) -> Rc<BtrfsSb> {
        if let Some(i) = self.sbs.borrow().get(&sb.id) {
            return i.clone();
        }
        let o = self.opts;
        // The top-level subvolume's root directory, then the data set.
        let mut files = vec![BtrfsFileSpec {
            subvol: BTRFS_FS_TREE_OBJECTID,
            ino: BTRFS_FIRST_FREE_OBJECTID,
            size: 0,
        }];
        for sv in 0..o.subvolumes {
            for j in 0..o.preload_files {
                files.push(BtrfsFileSpec {
                    subvol: BTRFS_FIRST_FREE_OBJECTID + sv,
                    ino: BTRFS_FIRST_FREE_OBJECTID + 1 + j,
                    size: o.preload_size,
                });
            }
        }
        let fs = Rc::new(BtrfsFsInfo::open(
            m.sched(),
            m.locks(),
            RwsemParams::default(),
            META_OFFSET,
            &files,
            BTRFS_PRELOAD_GENERATION,
        ));
        if !m.btrfs_btree_kernel_file() {
            // No AS_KERNEL_FILE: tree blocks are charged to whoever reads
            // them and may be reclaimed; the data set's trees start on disk.
            fs.ctx().set_btree_inode(Rc::new(BtreeInode::new(
                m.mm(),
                m.sched(),
                sb.device.clone(),
                sb.id,
                u64::from(BTRFS_NODESIZE),
            )));
            for r in fs.roots() {
                r.drop_cached_below_root();
            }
        }
        let info = Rc::new(BtrfsSb {
            fs: fs.clone(),
            commit_mutex: Mutex::new(m.locks().class("btrfs-commit"), m.sched()),
            next_in_subvol: RefCell::new(BTreeMap::new()),
            flush_on_close: RefCell::new(BTreeSet::new()),
            endio_workers: btrfs_alloc_workqueue(m, &format!("btrfs-endio/{}", sb.id)),
            endio_write_workers: btrfs_alloc_workqueue(m, &format!("btrfs-endio-write/{}", sb.id)),
        });
        self.sbs.borrow_mut().insert(sb.id, info.clone());
        // transaction_kthread: commits every commit= seconds.
        let (i2, dev, every) = (info.clone(), sb.device.clone(), o.commit_interval);
        let sim = m.sim().clone();
        m.sched()
            .spawn_daemon("btrfs-transaction", CgroupId::ROOT, 0, async move {
                loop {
                    sim.sleep(every).await;
                    let _g = i2.commit_mutex.lock().await;
                    btrfs_commit_transaction(&i2.fs, dev.as_ref()).await;
                }
            });
        info
    }

    /// `btrfs_commit_transaction` of `sb`'s running transaction, after any
    /// commit in progress; `force` starts one to commit if none runs (as
    /// `close_ctree` does).
    async fn commit(&self, m: &Rc<Machine>, sb: &Rc<SuperBlock>, force: bool) {
        let info = self.sb_info(m, sb);
        let _g = info.commit_mutex.lock().await;
        if force {
            info.fs.transactions().join();
        }
        btrfs_commit_transaction(&info.fs, sb.device.as_ref()).await;
    }
}

impl Filesystem for Btrfs {
    fn fop_buffer_wasync(&self) -> bool {
        // btrfs_file_operations.fop_flags has FOP_BUFFER_WASYNC.
        true
    }
    fn stable_writes(&self) -> bool {
        // btrfs_update_address_space_flags: data checksums (NODATASUM is
        // not modelled) need the folio unchanged while it is written.
        true
    }
    fn name(&self) -> &'static str {
        "btrfs"
    }
    fn costs(&self) -> &'static FsCosts {
        &BTRFS_COSTS
    }
    fn per_sb_bdi(&self) -> bool {
        true
    }
    fn bdi_ra_pages(&self, ra_pages: u64) -> u64 {
        // open_ctree: ra_pages times the number of devices (one here), at
        // least 4 MiB.
        ra_pages.max((4 << 20) / PAGE_SIZE)
    }
    fn init_inode(&self, inode: &Inode) {
        // A preloaded file (subvolume inode numbers from alloc_ino) has its
        // size from the start.
        let (sv, ino) = (inode.ino >> 32, inode.ino & 0xffff_ffff);
        let first = BTRFS_FIRST_FREE_OBJECTID + 1;
        if sv > 0 && ino >= first && ino < first + self.opts.preload_files {
            inode.st.borrow_mut().i_size = self.opts.preload_size;
        }
    }
    fn alloc_ino(&self, m: &Machine, sb: &SuperBlock, dir: &str) -> Option<u64> {
        // A file under `subvol<N>/` is the next preloaded file there.
        let sv: u64 = dir.strip_prefix("subvol")?.parse().ok()?;
        if sv >= self.opts.subvolumes {
            return None;
        }
        let info = self.sb_info(m, sb);
        let mut next = info.next_in_subvol.borrow_mut();
        let j = next.entry(sv).or_insert(0);
        let ino = BTRFS_FIRST_FREE_OBJECTID + 1 + *j;
        *j += 1;
        Some(vfs_ino(Some(sv), ino))
    }
    fn before_read_bio<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
        inode: &'a InodeRef,
        start: u64,
        end: u64,
    ) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            let info = self.sb_info(m, sb);
            let fs = &info.fs;
            let (subvol, ino) = btrfs_ino(inode.ino);
            let (s, e) = (start * PAGE_SIZE, end * PAGE_SIZE);
            // btrfs_submit_chunk -> btrfs_lookup_bio_sums, one bio per
            // contiguous disk range (one extent here).
            for x in fs.extents_in(subvol, ino, s, e) {
                let from = s.max(x.offset);
                let to = e.min(x.offset + x.len);
                btrfs_lookup_bio_sums(
                    fs.csum_root(),
                    fs.commit_root_sem(),
                    m.policies().csum_lookup,
                    x.bytenr + (from - x.offset),
                    to - from,
                    x.generation,
                    fs.transactions().generation(),
                )
                .await;
            }
        })
    }
    fn end_read_bio(
        &self,
        m: &Rc<Machine>,
        sb: &Rc<SuperBlock>,
        start: u64,
        end: u64,
        done: Box<dyn FnOnce()>,
    ) {
        // btrfs_simple_end_io: a read bio's end goes to the endio workers;
        // btrfs_end_bio_work -> btrfs_check_read_bio verifies each sector
        // (btrfs_data_csum_ok), then end_bbio_data_read unlocks the folios.
        let info = self.sb_info(m, sb);
        let wm = Rc::downgrade(m);
        let sectors = (end - start) * PAGE_SIZE / BTRFS_SECTORSIZE;
        let done = Rc::new(RefCell::new(Some(done)));
        let work = Work::new("btrfs_end_bio_work", move || {
            let (wm, done) = (wm.clone(), done.clone());
            async move {
                if let Some(m) = wm.upgrade() {
                    m.count_event("btrfs_end_bio_work");
                    m.sched().cpu(sectors * BTRFS_CSUM_VERIFY_SECTOR_NS).await;
                }
                if let Some(d) = done.borrow_mut().take() {
                    d();
                }
            }
        });
        queue_work(&info.endio_workers, &work);
    }
    fn end_io_wq(&self, m: &Rc<Machine>, sb: &SuperBlock) -> Option<Workqueue> {
        Some(self.sb_info(m, sb).endio_write_workers.clone())
    }
    fn every_ioend_in_task(&self) -> bool {
        true
    }
    fn end_io_work_name(&self) -> &'static str {
        "btrfs_finish_ordered_io"
    }
    /// `btrfs_finish_ordered_io` of the range written, on the endio_write
    /// workers after its I/O: the range's extents are rewritten (COW: a new
    /// extent each, the old one dropped through a delayed ref), or, where
    /// the file had none, a new extent covers it.
    fn end_ordered_range<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
        inode: &'a InodeRef,
        start: u64,
        end: u64,
    ) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            let info = self.sb_info(m, sb);
            let fs = &info.fs;
            let (subvol, ino) = btrfs_ino(inode.ino);
            let (from, to) = (start * PAGE_SIZE, end * PAGE_SIZE);
            let old = fs.extents_in(subvol, ino, from, to);
            if old.is_empty() {
                btrfs_finish_ordered_new(fs, subvol, ino, from, to - from).await;
            }
            for x in old {
                btrfs_finish_ordered_overwrite(fs, subvol, ino, x.offset).await;
            }
        })
    }
    /// `btrfs_setattr` -> `btrfs_setsize` to zero (open(O_TRUNC)), i_rwsem
    /// held: a file that had data is first written back and its ordered
    /// extents waited for (`btrfs_wait_ordered_range(inode, 0, (u64)-1)`,
    /// since the truncate is to a smaller size); `BTRFS_INODE_FLUSH_ON_CLOSE`
    /// is set (the file is replaced in place: its new data goes to disk at
    /// the last close); the page cache is dropped (`truncate_setsize`); and
    /// `btrfs_truncate` deletes the file extent items and drops the data
    /// extents' references through delayed refs, so the next commit deletes
    /// their checksums.
    fn setsize_zero<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
        inode: &'a InodeRef,
    ) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            let info = self.sb_info(m, sb);
            if inode.st.borrow().i_size > 0 {
                // The ordered extents end before their pages' writeback
                // does (both on the endio_write workers), so waiting for the
                // writeback waits for them.
                file_write_and_wait(m, sb, inode).await;
            }
            info.flush_on_close.borrow_mut().insert(inode.ino);
            truncate_setsize_zero(m, sb, inode).await;
            let (subvol, ino) = btrfs_ino(inode.ino);
            btrfs_truncate_to_zero(&info.fs, subvol, ino).await;
        })
    }
    /// `btrfs_release_file`: a file with `BTRFS_INODE_FLUSH_ON_CLOSE` (flag
    /// tested and cleared) starts writeback of all its dirty pages
    /// (`filemap_flush`), in the closing task's context, without waiting
    /// for it.
    fn release_file<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
        inode: &'a InodeRef,
    ) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            // No trees yet (`open_ctree` is modelled at first use): nothing
            // was truncated, so no flag is set.
            let Some(info) = self.sbs.borrow().get(&sb.id).cloned() else {
                return;
            };
            let flush = info.flush_on_close.borrow_mut().remove(&inode.ino);
            if flush {
                filemap_fdatawrite_range_kick(m, sb, inode, 0, u64::MAX).await;
            }
        })
    }
    fn fsync_commit<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
        _datasync: bool,
    ) -> LocalBoxFuture<'a, ()> {
        Box::pin(self.commit(m, sb, false))
    }
    fn sync_fs<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
        wait: bool,
    ) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            if wait {
                self.commit(m, sb, false).await;
            }
        })
    }
    fn put_super<'a>(
        &'a self,
        m: &'a Rc<Machine>,
        sb: &'a Rc<SuperBlock>,
    ) -> LocalBoxFuture<'a, ()> {
        // close_ctree: btrfs_commit_super, then teardown.
        Box::pin(async move {
            self.commit(m, sb, true).await;
            m.sched().cpu(BTRFS_CLOSE_CTREE_CPU_NS).await;
            self.sbs.borrow_mut().remove(&sb.id);
        })
    }
    fn internal_pages(&self, sb: &SuperBlock) -> (u64, u64, u64) {
        self.sbs
            .borrow()
            .get(&sb.id)
            .and_then(|i| i.fs.ctx().btree_inode())
            .map_or((0, 0, 0), |bi| bi.nr_pages())
    }
    fn stats(&self, sb: &SuperBlock) -> Vec<(&'static str, &'static str, f64)> {
        let Some(info) = self.sbs.borrow().get(&sb.id).cloned() else {
            return Vec::new();
        };
        let c = info.fs.transactions().commit_stats();
        let ms = |ns: Time| ns as f64 / 1e6;
        let mut v = vec![
            ("commits", "count", c.commits as f64),
            ("last_commit", "ms", ms(c.last_commit_ns)),
            ("max_commit", "ms", ms(c.max_commit_ns)),
            ("total_commit", "ms", ms(c.total_commit_ns)),
            ("max_commit_lock_wait", "ms", ms(c.max_commit_lock_wait_ns)),
            (
                "total_commit_lock_wait",
                "ms",
                ms(c.total_commit_lock_wait_ns),
            ),
            ("delayed_ref_drops", "count", c.delayed_ref_drops as f64),
            // Where the commits' time went, summed over commits.
            (
                "commit.run_delayed_refs",
                "ms",
                ms(c.phase_ns.run_delayed_refs),
            ),
            ("commit.writers_wait", "ms", ms(c.phase_ns.writers_wait)),
            (
                "commit.switch_roots_wait",
                "ms",
                ms(c.phase_ns.switch_roots_wait),
            ),
            ("commit.write_blocks", "ms", ms(c.phase_ns.write_blocks)),
            ("commit.write_supers", "ms", ms(c.phase_ns.write_supers)),
            ("cow_blocks", "count", info.fs.ctx().cow_blocks() as f64),
            ("tree_searches", "count", info.fs.ctx().searches() as f64),
        ];
        if let Some(bi) = info.fs.ctx().btree_inode() {
            // Tree blocks read from disk, re-read after reclaim, waits for
            // another task's read, time in their folios' memcg charges.
            let b = bi.stats();
            v.extend([
                ("tree_block_reads", "count", b.reads as f64),
                ("tree_block_rereads", "count", b.rereads as f64),
                ("tree_block_read_waits", "count", b.read_waits as f64),
                ("tree_block_charge", "ms", ms(b.charge_ns)),
            ]);
        }
        v
    }
    fn samples(&self, sb: &SuperBlock) -> Vec<(String, &'static str, f64)> {
        let Some(info) = self.sbs.borrow().get(&sb.id).cloned() else {
            return Vec::new();
        };
        let fs = &info.fs;
        // Tasks blocked per lock class: the tree locks of every current
        // block, and commit_root_sem.
        let mut per_class = BTreeMap::new();
        for r in fs.roots() {
            r.blocked_per_class(&mut per_class);
        }
        let sem = fs.commit_root_sem();
        per_class.insert(
            sem.class().name().to_string(),
            (sem.nr_waiters() + sem.nr_spinners()) as u64,
        );
        let mut v: Vec<(String, &'static str, f64)> = per_class
            .into_iter()
            .map(|(c, n)| (format!("blocked.{c}"), "tasks", n as f64))
            .collect();
        // The commit's wait chain: the tree lock its task waits for now,
        // the tasks holding it and the tasks queued on it behind the commit.
        let (holders, queued) = fs.ctx().commit_wait_chain().unwrap_or((0, 0));
        v.push(("commit.wait_lock_holders".into(), "tasks", holders as f64));
        v.push(("commit.wait_lock_queued".into(), "tasks", queued as f64));
        v
    }
    fn commit_log(&self, sb: &SuperBlock) -> Vec<(Time, Time)> {
        self.sbs
            .borrow()
            .get(&sb.id)
            .map(|i| i.fs.transactions().commit_log())
            .unwrap_or_default()
    }
}
