//! The trees of a mounted btrfs (fs/btrfs/disk-io.c `open_ctree` and the
//! `fs_info` of fs/btrfs/fs.h), first stage: the extent tree, the csum tree
//! and one fs tree per subvolume, built for a data set of files "written
//! beforehand" (laid out without simulating their writes), with the sizes of
//! the kernel's on-disk items so fan-out and depth follow from the data.
//!
//! Layout of the data set: files in the order given, each file's data
//! allocated contiguously on disk after the previous one, in extents of at
//! most `BTRFS_MAX_EXTENT_SIZE` (128 MiB). Items per file:
//! - fs tree of its subvolume: `INODE_ITEM` (160 bytes), `INODE_REF` (10 +
//!   name length, the name taken as 8 bytes), one `EXTENT_DATA` per extent
//!   (`struct btrfs_file_extent_item`, 53 bytes);
//! - extent tree: one `EXTENT_ITEM` per data extent (24 bytes of
//!   `btrfs_extent_item` + an inline `EXTENT_DATA_REF`, 1 + 28 bytes), and
//!   one skinny `METADATA_ITEM` (24 + 9 bytes, inline `TREE_BLOCK_REF`) per
//!   block of the fs and csum trees;
//! - csum tree: see `file_item.rs`.
//!
//! Left out: the root tree, chunk, device, free-space and uuid trees, the
//! extent tree's items for its own blocks, directories (one `INODE_REF` per
//! file stands for them), block groups and the btree inode's page cache.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use crate::model::block::{Bio, BioFlags, BlockDevice};
use crate::model::fs::btrfs::ctree::{btrfs_build_tree, BtrfsRoot, BtrfsTreeCtx, BTRFS_NODESIZE};
use crate::model::fs::btrfs::delayed_ref::BtrfsDelayedRefRoot;
use crate::model::fs::btrfs::extent_io::{BtrfsKey, LeafItem};
use crate::model::fs::btrfs::file_item::{
    btrfs_csum_items, BTRFS_CSUM_TREE_OBJECTID, BTRFS_SECTORSIZE,
};
use crate::model::fs::btrfs::fs::BtrfsTransactions;
use crate::model::kernel::locking::{LockStats, RwSemaphore, RwsemParams};
use crate::model::kernel::sched::Sched;
use crate::model::kernel::wait::WaitQueue;

/// `BTRFS_MAX_EXTENT_SIZE`: 128 MiB, the largest data extent.
pub const BTRFS_MAX_EXTENT_SIZE: u64 = 128 << 20;
/// `BTRFS_EXTENT_TREE_OBJECTID`: 2.
pub const BTRFS_EXTENT_TREE_OBJECTID: u64 = 2;
/// `BTRFS_FS_TREE_OBJECTID`: 5, the top-level subvolume.
pub const BTRFS_FS_TREE_OBJECTID: u64 = 5;
/// `BTRFS_FIRST_FREE_OBJECTID`: 256, the first inode number and subvolume id.
pub const BTRFS_FIRST_FREE_OBJECTID: u64 = 256;
/// `BTRFS_INODE_ITEM_KEY`: 1.
pub const BTRFS_INODE_ITEM_KEY: u8 = 1;
/// `BTRFS_INODE_REF_KEY`: 12.
pub const BTRFS_INODE_REF_KEY: u8 = 12;
/// `BTRFS_EXTENT_DATA_KEY`: 108.
pub const BTRFS_EXTENT_DATA_KEY: u8 = 108;
/// `BTRFS_EXTENT_ITEM_KEY`: 168.
pub const BTRFS_EXTENT_ITEM_KEY: u8 = 168;
/// `BTRFS_METADATA_ITEM_KEY`: 169 (skinny metadata, mkfs default).
pub const BTRFS_METADATA_ITEM_KEY: u8 = 169;
/// `sizeof(struct btrfs_inode_item)`, bytes: 160.
pub const BTRFS_INODE_ITEM_SIZE: u32 = 160;
/// `sizeof(struct btrfs_inode_ref)` (10) + an 8-byte name, bytes.
pub const BTRFS_INODE_REF_SIZE: u32 = 10 + 8;
/// `sizeof(struct btrfs_file_extent_item)` of a regular extent, bytes: 53.
pub const BTRFS_FILE_EXTENT_ITEM_SIZE: u32 = 53;
/// `sizeof(struct btrfs_extent_item)` (24) + inline `EXTENT_DATA_REF`
/// (`btrfs_extent_inline_ref_size`: 1 + 28), bytes: 53.
pub const BTRFS_DATA_EXTENT_ITEM_SIZE: u32 = 24 + 1 + 28;
/// Skinny `METADATA_ITEM`: `btrfs_extent_item` (24) + inline
/// `TREE_BLOCK_REF` (1 + 8), bytes: 33.
pub const BTRFS_METADATA_ITEM_SIZE: u32 = 24 + 1 + 8;
/// Logical address where data extents start, bytes: 1 GiB (the first data
/// block group of a fresh filesystem sits after the system and metadata
/// ones; the exact place does not matter to the model).
pub const BTRFS_DATA_START: u64 = 1 << 30;

/// One file of the data set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BtrfsFileSpec {
    /// Subvolume id (`BTRFS_FS_TREE_OBJECTID` or >= 256).
    pub subvol: u64,
    /// Inode number in its subvolume.
    pub ino: u64,
    /// Size, bytes.
    pub size: u64,
}

/// A data extent of the data set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataExtent {
    /// Disk bytenr, bytes.
    pub bytenr: u64,
    /// Length, bytes (a multiple of the sector size).
    pub len: u64,
    /// Owning subvolume and inode.
    pub subvol: u64,
    /// Owning inode.
    pub ino: u64,
    /// File offset, bytes.
    pub offset: u64,
    /// The transaction that wrote it (`em->generation` of its extent map).
    pub generation: u64,
}

/// Bytes of one superblock copy: 4 KiB (`BTRFS_SUPER_INFO_SIZE`).
pub const BTRFS_SUPER_INFO_SIZE: u64 = 4 << 10;
/// Byte offsets of the superblock copies written: the primary at 64 KiB and
/// the first mirror at 64 MiB (`btrfs_sb_offset`; the 256 GiB mirror exists
/// only on larger devices, and device capacity is not modelled).
pub const BTRFS_SUPER_OFFSETS: [u64; 2] = [64 << 10, 64 << 20];

/// `write_all_supers()` + `wait_dev_supers()`: a cache flush
/// (`write_dev_flush`), then the primary superblock with REQ_FUA and the
/// mirror without, both waited for.
pub async fn write_all_supers(sim: &sim::Sim, dev: &BlockDevice) {
    dev.flush().await;
    // write_dev_supers: REQ_SYNC | REQ_META | REQ_PRIO, REQ_FUA on the
    // primary.
    let meta = BioFlags::SYNC_META;
    let fua = BioFlags { fua: true, ..meta };
    let left = Rc::new(Cell::new(BTRFS_SUPER_OFFSETS.len()));
    let wq = WaitQueue::new("btrfs:wait_dev_supers");
    for (i, off) in BTRFS_SUPER_OFFSETS.iter().enumerate() {
        let mut bio = Bio::write(*off, BTRFS_SUPER_INFO_SIZE).with_flags(meta);
        if i == 0 {
            bio = bio.with_flags(fua);
        }
        let (l, w) = (left.clone(), wq.clone());
        dev.submit_bio(
            bio,
            Box::new(move || {
                l.set(l.get() - 1);
                w.wake_up_all();
            }),
        )
        .await;
    }
    let l = left.clone();
    wq.wait_event(sim, move || l.get() == 0).await;
}

/// The positions of each file's extents in `extents`, by (subvol, ino).
fn index_by_file(extents: &[DataExtent]) -> BTreeMap<(u64, u64), Vec<usize>> {
    let mut m: BTreeMap<(u64, u64), Vec<usize>> = BTreeMap::new();
    for (i, e) in extents.iter().enumerate() {
        m.entry((e.subvol, e.ino)).or_default().push(i);
    }
    m
}

/// `struct btrfs_fs_info`, the trees part.
pub struct BtrfsFsInfo {
    /// Shared tree context (locks, block allocator).
    ctx: Rc<BtrfsTreeCtx>,
    /// `fs_info->extent_root`.
    extent_root: BtrfsRoot,
    /// `fs_info->csum_root`.
    csum_root: BtrfsRoot,
    /// Subvolume fs trees, by subvolume id.
    fs_roots: Vec<(u64, BtrfsRoot)>,
    /// The files' current data extents, in the order laid out.
    extents: RefCell<Vec<DataExtent>>,
    /// Positions in `extents` of each file's extents, by (subvol, ino), in
    /// `extents` order (the extent map lookup of a read, without a scan).
    by_file: RefCell<BTreeMap<(u64, u64), Vec<usize>>>,
    /// Next free data address, bytes (a bump allocator).
    next_data: Cell<u64>,
    /// Transaction counters.
    trans: BtrfsTransactions,
    /// `fs_info->commit_root_sem`: taken for write by `switch_commit_roots`,
    /// for read by commit-root searches.
    commit_root_sem: RwSemaphore,
    /// The delayed refs of the transactions (`delayed_refs`).
    delayed_refs: BtrfsDelayedRefRoot,
}

impl BtrfsFsInfo {
    /// `open_ctree` of a filesystem holding `files` (in that disk order),
    /// last committed at `generation`; tree blocks are allocated from
    /// `meta_start` on.
    pub fn open(
        sched: &Sched,
        lock_stats: &LockStats,
        rwsem: RwsemParams,
        meta_start: u64,
        files: &[BtrfsFileSpec],
        generation: u64,
    ) -> Self {
        let commit_root_sem = RwSemaphore::with_params(
            lock_stats.class("btrfs-commit_root_sem"),
            sched,
            rwsem.clone(),
        );
        let ctx = BtrfsTreeCtx::new(sched, lock_stats, rwsem, meta_start);
        let mut extents = Vec::new();
        let mut at = BTRFS_DATA_START;
        for f in files {
            let mut off = 0;
            let size = f.size.div_ceil(BTRFS_SECTORSIZE) * BTRFS_SECTORSIZE;
            while off < size {
                let len = (size - off).min(BTRFS_MAX_EXTENT_SIZE);
                extents.push(DataExtent {
                    bytenr: at,
                    len,
                    subvol: f.subvol,
                    ino: f.ino,
                    offset: off,
                    generation,
                });
                at += len;
                off += len;
            }
        }
        // fs trees, one per subvolume.
        let mut subvols: Vec<u64> = files.iter().map(|f| f.subvol).collect();
        subvols.sort_unstable();
        subvols.dedup();
        let mut fs_roots = Vec::new();
        for sv in subvols {
            let mut items = Vec::new();
            for f in files.iter().filter(|f| f.subvol == sv) {
                items.push(LeafItem {
                    key: BtrfsKey::new(f.ino, BTRFS_INODE_ITEM_KEY, 0),
                    size: BTRFS_INODE_ITEM_SIZE,
                });
                items.push(LeafItem {
                    key: BtrfsKey::new(f.ino, BTRFS_INODE_REF_KEY, BTRFS_FIRST_FREE_OBJECTID),
                    size: BTRFS_INODE_REF_SIZE,
                });
                for e in extents.iter().filter(|e| e.subvol == sv && e.ino == f.ino) {
                    items.push(LeafItem {
                        key: BtrfsKey::new(f.ino, BTRFS_EXTENT_DATA_KEY, e.offset),
                        size: BTRFS_FILE_EXTENT_ITEM_SIZE,
                    });
                }
            }
            items.sort_by_key(|i| i.key);
            items.dedup_by_key(|i| i.key);
            fs_roots.push((sv, btrfs_build_tree(&ctx, "fs", sv, items, generation)));
        }
        let ranges: Vec<(u64, u64)> = extents.iter().map(|e| (e.bytenr, e.len)).collect();
        let csum_root = btrfs_build_tree(
            &ctx,
            "csum",
            BTRFS_CSUM_TREE_OBJECTID,
            btrfs_csum_items(&ranges),
            generation,
        );
        // Extent tree: data extents, then the tree blocks of the other trees.
        let mut items: Vec<LeafItem> = extents
            .iter()
            .map(|e| LeafItem {
                key: BtrfsKey::new(e.bytenr, BTRFS_EXTENT_ITEM_KEY, e.len),
                size: BTRFS_DATA_EXTENT_ITEM_SIZE,
            })
            .collect();
        let tree_blocks: usize = fs_roots
            .iter()
            .map(|(_, r)| r.blocks_per_level().iter().sum::<usize>())
            .sum::<usize>()
            + csum_root.blocks_per_level().iter().sum::<usize>();
        for i in 0..tree_blocks as u64 {
            items.push(LeafItem {
                key: BtrfsKey::new(
                    meta_start + i * BTRFS_NODESIZE as u64,
                    BTRFS_METADATA_ITEM_KEY,
                    0,
                ),
                size: BTRFS_METADATA_ITEM_SIZE,
            });
        }
        items.sort_by_key(|i| i.key);
        let extent_root = btrfs_build_tree(
            &ctx,
            "extent",
            BTRFS_EXTENT_TREE_OBJECTID,
            items,
            generation,
        );
        BtrfsFsInfo {
            ctx,
            extent_root,
            csum_root,
            fs_roots,
            by_file: RefCell::new(index_by_file(&extents)),
            extents: RefCell::new(extents),
            next_data: Cell::new(at),
            trans: BtrfsTransactions::new(generation),
            commit_root_sem,
            delayed_refs: BtrfsDelayedRefRoot::new(),
        }
    }

    /// The shared tree context.
    pub fn ctx(&self) -> &Rc<BtrfsTreeCtx> {
        &self.ctx
    }

    /// `fs_info->extent_root`.
    pub fn extent_root(&self) -> &BtrfsRoot {
        &self.extent_root
    }

    /// `fs_info->csum_root`.
    pub fn csum_root(&self) -> &BtrfsRoot {
        &self.csum_root
    }

    /// The fs tree of subvolume `subvol`.
    pub fn fs_root(&self, subvol: u64) -> Option<&BtrfsRoot> {
        self.fs_roots
            .iter()
            .find(|(s, _)| *s == subvol)
            .map(|(_, r)| r)
    }

    /// The files' current data extents.
    pub fn extents(&self) -> Vec<DataExtent> {
        self.extents.borrow().clone()
    }

    /// The current data extents of (`subvol`, `ino`) overlapping the file
    /// bytes `[start, end)` (`btrfs_get_extent` through the extent map).
    pub fn extents_in(&self, subvol: u64, ino: u64, start: u64, end: u64) -> Vec<DataExtent> {
        let ex = self.extents.borrow();
        self.by_file
            .borrow()
            .get(&(subvol, ino))
            .map(|ix| {
                ix.iter()
                    .map(|&i| ex[i])
                    .filter(|e| e.offset < end && start < e.offset + e.len)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Records a new data extent of a file (a first write of its range).
    pub fn add_extent(&self, e: DataExtent) {
        let mut ex = self.extents.borrow_mut();
        self.by_file
            .borrow_mut()
            .entry((e.subvol, e.ino))
            .or_default()
            .push(ex.len());
        ex.push(e);
    }

    /// Removes every data extent of (`subvol`, `ino`) from the file
    /// (`btrfs_truncate_inode_items` to size zero) and returns them.
    pub fn remove_extents_of(&self, subvol: u64, ino: u64) -> Vec<DataExtent> {
        let mut ex = self.extents.borrow_mut();
        if !self.by_file.borrow().contains_key(&(subvol, ino)) {
            return Vec::new();
        }
        let (gone, kept): (Vec<DataExtent>, Vec<DataExtent>) =
            ex.iter().partition(|e| e.subvol == subvol && e.ino == ino);
        *self.by_file.borrow_mut() = index_by_file(&kept);
        *ex = kept;
        gone
    }

    /// Replaces the extent of (subvol, ino) at file `offset` by `new`
    /// (`btrfs_drop_extents` + inserting the new file extent item);
    /// returns the old one.
    pub fn replace_extent(&self, new: DataExtent) -> Option<DataExtent> {
        let mut ex = self.extents.borrow_mut();
        let e = ex
            .iter_mut()
            .find(|e| e.subvol == new.subvol && e.ino == new.ino && e.offset == new.offset)?;
        Some(std::mem::replace(e, new))
    }

    /// A new data extent's disk address (`btrfs_reserve_extent`, as a bump
    /// allocator: freed space is not reused).
    pub fn alloc_data(&self, len: u64) -> u64 {
        let at = self.next_data.get();
        self.next_data.set(at + len);
        at
    }

    /// Every tree: fs trees, extent tree, csum tree.
    pub fn roots(&self) -> Vec<&BtrfsRoot> {
        let mut v: Vec<&BtrfsRoot> = self.fs_roots.iter().map(|(_, r)| r).collect();
        v.push(&self.extent_root);
        v.push(&self.csum_root);
        v
    }

    /// `fs_info->commit_root_sem`.
    pub fn commit_root_sem(&self) -> &RwSemaphore {
        &self.commit_root_sem
    }

    /// The delayed refs.
    pub fn delayed_refs(&self) -> &BtrfsDelayedRefRoot {
        &self.delayed_refs
    }

    /// The transaction counters.
    pub fn transactions(&self) -> &BtrfsTransactions {
        &self.trans
    }
}
