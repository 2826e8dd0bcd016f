//! `struct extent_buffer` (fs/btrfs/extent_io.h): one tree block (node or
//! leaf) in memory, with its header fields the model needs and its lock.
//!
//! Mirrors the parts of fs/btrfs/extent_io.c and the on-disk header
//! (`struct btrfs_header`, include/uapi/linux/btrfs_tree.h) that searches and
//! COW use: the logical address (`start`), the level, the generation (the
//! transid that last COWed it), `BTRFS_HEADER_FLAG_WRITTEN`, the dirty bit
//! (`EXTENT_BUFFER_DIRTY`) and the per-buffer rw_semaphore (`eb->lock`, 5.11+).
//! Items are kept as (key, data size) pairs, not bytes; a node keeps its key
//! pointers with the child buffers themselves (the kernel keeps block numbers
//! and finds the buffer in the btree inode's radix tree).
//!
//! The btree inode ([`BtreeInode`]): a block's bytes live in folios of the
//! filesystem's btree inode (`fs_info->btree_inode`), found by logical
//! address. Since 6.18 that mapping has `AS_KERNEL_FILE` and its folios are
//! charged to no user memcg; before, `filemap_add_folio` charged them to the
//! memcg of the task that read the block, they sat on that memcg's LRU and
//! its reclaim could free them. Both are modelled (`[machine]
//! btrfs_btree_kernel_file`). With the charge, a block is in one of three
//! states ([`EbCache`]): resident for good (the root blocks read at mount,
//! blocks created by COW: their creators' memcgs have no limit in the model's
//! scenarios, so no memcg reclaim reaches them), on disk only, or in folios
//! charged to a memcg and reclaimable while nobody holds the block
//! (`btree_release_folio` -> `try_release_extent_buffer`: not while a path
//! holds it locked or waits for it, not while it is read).
//! `btrfs_find_create_tree_block()` allocates and charges a missing block's
//! folios ([`BtreeInode::find_create_tree_block`]: the charge may settle the
//! task's memory.high debt inside, with the caller's tree locks held), and
//! `read_extent_buffer_pages()` reads it ([`BtreeInode::read_extent_buffer`]:
//! one bio of the node size, REQ_META, then the header checksum).
//!
//! Left out: reference counts (a block in use is one whose lock is held or
//! waited for), `EXTENT_BUFFER_WRITEBACK`, the lockdep nesting of the
//! kernel's class keys, readahead of tree blocks (`reada_for_search`), and
//! the btree inode's writeback under memory pressure (dirty blocks are
//! written at commit only).

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};

use sim::Time;

use crate::model::block::{Bio, BioFlags, BlockDevice};
use crate::model::kernel::locking::{RwSemaphore, RwsemOwner};
use crate::model::kernel::sched::Sched;
use crate::model::kernel::wait::WaitQueue;
use crate::model::mm::backing_dev::Wb;
use crate::model::mm::filemap::AddressSpace;
use crate::model::mm::memcontrol::{mem_cgroup_try_charge, mem_cgroup_uncharge_freed};
use crate::model::mm::mmzone::LruFile;
use crate::model::mm::page_alloc::alloc_pages;
use crate::model::mm::page_writeback::account_delta;
use crate::model::mm::state::Mm;
use crate::model::mm::vmstat::PAGE_SIZE;

/// `struct btrfs_key` (`struct btrfs_disk_key` on disk): items sort by
/// (objectid, type, offset).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BtrfsKey {
    /// `objectid`: inode number, extent bytenr, or a reserved id.
    pub objectid: u64,
    /// `type`: the item type (`BTRFS_*_KEY`).
    pub ty: u8,
    /// `offset`: meaning depends on the type (file offset, extent length...).
    pub offset: u64,
}

impl BtrfsKey {
    /// A key from its three fields.
    pub const fn new(objectid: u64, ty: u8, offset: u64) -> Self {
        BtrfsKey {
            objectid,
            ty,
            offset,
        }
    }
}

/// One leaf item: its key and the size of its data in the leaf, bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeafItem {
    /// The item's key.
    pub key: BtrfsKey,
    /// `btrfs_item_size()`: bytes of item data.
    pub size: u32,
}

/// What a tree block holds.
#[derive(Clone)]
pub enum EbBody {
    /// An internal node: `struct btrfs_key_ptr`s, each the lowest key of a
    /// child and the child.
    Node(Vec<(BtrfsKey, Rc<ExtentBuffer>)>),
    /// A leaf: its items in key order.
    Leaf(Vec<LeafItem>),
}

/// `struct extent_buffer`: a tree block in memory.
pub struct ExtentBuffer {
    /// `eb->start`: logical byte address of the block.
    start: Cell<u64>,
    /// `btrfs_header_level()`: 0 for a leaf.
    level: u8,
    /// `btrfs_header_generation()`: transid of the transaction that wrote
    /// (COWed or created) the block.
    generation: Cell<u64>,
    /// `BTRFS_HEADER_FLAG_WRITTEN`: the block went to disk (at commit or by
    /// btree writeback under memory pressure); it must be COWed again before
    /// its next change even inside the transaction that created it.
    written: Cell<bool>,
    /// `EXTENT_BUFFER_DIRTY`: changed and not yet written.
    dirty: Cell<bool>,
    /// `eb->lock`: the rw_semaphore of the block.
    lock: RwSemaphore,
    /// Key pointers or items.
    body: RefCell<EbBody>,
    /// Where its bytes are (`EXTENT_BUFFER_UPTODATE` and its folios).
    cache: RefCell<EbCache>,
}

/// Where a tree block's bytes are.
#[derive(Clone)]
pub enum EbCache {
    /// In memory for good (charged to no memcg, or to one no memcg reclaim
    /// reaches).
    Resident,
    /// On disk only: a search that needs it reads it (`read_tree_block`).
    OnDisk,
    /// In folios of the btree inode charged to a memcg, on its LRU.
    Folios(Rc<EbFolios>),
}

/// The btree inode's folios of one tree block, charged to one memcg: an
/// entry of that memcg's LRU (its own small page cache of `pages` pages).
pub struct EbFolios {
    /// The block (to tell whether it is in use).
    eb: Weak<ExtentBuffer>,
    /// Its pages.
    mapping: RefCell<AddressSpace>,
    /// Pages of a whole block (nodesize / PAGE_SIZE).
    pages: u64,
    /// The memcg charged (`folio_memcg`).
    memcg: u64,
    /// LRU key parts: last access, the filesystem's tag, the block address.
    last_access: Cell<Time>,
    tag: u64,
    start: u64,
    /// A read of the block is in flight (`EXTENT_BUFFER_READING`).
    reading: Cell<bool>,
    /// Woken when the read ends.
    read_done: WaitQueue,
}

impl EbFolios {
    /// Whether every page of the block is cached and read.
    fn uptodate(&self) -> bool {
        !self.reading.get() && self.mapping.borrow().nrpages() == self.pages
    }
}

impl LruFile for EbFolios {
    fn lru_key(&self) -> (Time, u64, u64) {
        (self.last_access.get(), self.tag, self.start)
    }
    fn mapping(&self) -> &RefCell<AddressSpace> {
        &self.mapping
    }
    fn lru_wb(&self) -> Option<Rc<Wb>> {
        None
    }
    fn memcg_id(&self) -> u64 {
        self.memcg
    }
    fn release_folio(&self) -> bool {
        // try_release_extent_buffer: not while the block is read, nor while
        // a path holds it (locked) or waits for it.
        if self.reading.get() {
            return false;
        }
        self.eb.upgrade().is_none_or(|eb| {
            let l = eb.lock();
            matches!(l.owner(), RwsemOwner::Free) && l.nr_waiters() == 0
        })
    }
}

impl ExtentBuffer {
    /// A clean in-memory block (`alloc_extent_buffer` + the fields a
    /// `btrfs_init_new_buffer` or a read from disk sets).
    pub fn new(start: u64, level: u8, generation: u64, body: EbBody, lock: RwSemaphore) -> Self {
        ExtentBuffer {
            start: Cell::new(start),
            level,
            generation: Cell::new(generation),
            written: Cell::new(false),
            dirty: Cell::new(false),
            lock,
            body: RefCell::new(body),
            cache: RefCell::new(EbCache::Resident),
        }
    }

    /// Where the block's bytes are.
    pub fn cache(&self) -> EbCache {
        self.cache.borrow().clone()
    }

    /// Sets where the block's bytes are.
    pub fn set_cache(&self, c: EbCache) {
        *self.cache.borrow_mut() = c;
    }

    /// `extent_buffer_uptodate()`: the block's bytes are in memory and read.
    pub fn is_uptodate(&self) -> bool {
        match &*self.cache.borrow() {
            EbCache::Resident => true,
            EbCache::OnDisk => false,
            EbCache::Folios(f) => f.uptodate(),
        }
    }

    /// `eb->start`.
    pub fn start(&self) -> u64 {
        self.start.get()
    }

    /// `btrfs_header_level()`.
    pub fn level(&self) -> u8 {
        self.level
    }

    /// `btrfs_header_generation()`.
    pub fn generation(&self) -> u64 {
        self.generation.get()
    }

    /// `btrfs_header_flag(eb, BTRFS_HEADER_FLAG_WRITTEN)`.
    pub fn is_written(&self) -> bool {
        self.written.get()
    }

    /// The block was written out (`write_one_eb` -> `prepare_eb_write` sets
    /// `BTRFS_HEADER_FLAG_WRITTEN` and clears the dirty bit).
    pub fn set_written(&self) {
        self.written.set(true);
        self.dirty.set(false);
    }

    /// `btrfs_mark_buffer_dirty()`: the block was changed.
    pub fn mark_dirty(&self) {
        self.dirty.set(true);
    }

    /// `extent_buffer_under_io`-free dirty test (`EXTENT_BUFFER_DIRTY`).
    pub fn is_dirty(&self) -> bool {
        self.dirty.get()
    }

    /// `eb->lock`.
    pub fn lock(&self) -> &RwSemaphore {
        &self.lock
    }

    /// `btrfs_header_nritems()`.
    pub fn nritems(&self) -> usize {
        match &*self.body.borrow() {
            EbBody::Node(p) => p.len(),
            EbBody::Leaf(i) => i.len(),
        }
    }

    /// A copy of the block's contents.
    pub fn body(&self) -> EbBody {
        self.body.borrow().clone()
    }

    /// The child at `slot` of a node (`btrfs_node_blockptr` resolved to its
    /// buffer); None for a leaf or a slot out of range.
    pub fn child(&self, slot: usize) -> Option<Rc<ExtentBuffer>> {
        match &*self.body.borrow() {
            EbBody::Node(p) => p.get(slot).map(|(_, c)| c.clone()),
            EbBody::Leaf(_) => None,
        }
    }

    /// `btrfs_set_node_blockptr()` + `btrfs_set_node_ptr_generation()`: the
    /// pointer at `slot` now names `child` (after the child was COWed).
    pub fn set_child(&self, slot: usize, child: Rc<ExtentBuffer>) {
        if let EbBody::Node(p) = &mut *self.body.borrow_mut() {
            if let Some(e) = p.get_mut(slot) {
                e.1 = child;
            }
        }
    }

    /// `btrfs_bin_search()`: the slot of the first key >= `key` and whether
    /// it is equal (the kernel's return 0 = found, 1 = not found).
    pub fn bin_search(&self, key: &BtrfsKey) -> (usize, bool) {
        let r = match &*self.body.borrow() {
            EbBody::Node(p) => p.binary_search_by(|(k, _)| k.cmp(key)),
            EbBody::Leaf(i) => i.binary_search_by(|it| it.key.cmp(key)),
        };
        match r {
            Ok(s) => (s, true),
            Err(s) => (s, false),
        }
    }

    /// The item at `slot` of a leaf.
    pub fn item(&self, slot: usize) -> Option<LeafItem> {
        match &*self.body.borrow() {
            EbBody::Leaf(i) => i.get(slot).copied(),
            EbBody::Node(_) => None,
        }
    }

    /// Removes the items `slot..slot + nr` of a leaf (`btrfs_del_items`
    /// without rebalancing).
    pub fn del_items(&self, slot: usize, nr: usize) {
        if let EbBody::Leaf(i) = &mut *self.body.borrow_mut() {
            let end = (slot + nr).min(i.len());
            if slot < end {
                i.drain(slot..end);
            }
        }
    }

    /// Replaces the item at `slot` (`btrfs_set_item_key_safe` + a size change).
    pub fn set_item(&self, slot: usize, item: LeafItem) {
        if let EbBody::Leaf(i) = &mut *self.body.borrow_mut() {
            if let Some(it) = i.get_mut(slot) {
                *it = item;
            }
        }
    }

    /// Inserts `item` at `slot` of a leaf.
    pub fn insert_item(&self, slot: usize, item: LeafItem) {
        if let EbBody::Leaf(i) = &mut *self.body.borrow_mut() {
            let s = slot.min(i.len());
            i.insert(s, item);
        }
    }

    /// Sets the size of the item at `slot` (`btrfs_truncate_item` /
    /// `btrfs_extend_item`).
    pub fn set_item_size(&self, slot: usize, size: u32) {
        if let EbBody::Leaf(i) = &mut *self.body.borrow_mut() {
            if let Some(it) = i.get_mut(slot) {
                it.size = size;
            }
        }
    }

    /// The COW copy's fields (`btrfs_cow_block` -> `copy_extent_buffer_full`,
    /// then a new start and generation, the written flag cleared).
    pub fn cow_copy(&self, start: u64, generation: u64, lock: RwSemaphore) -> ExtentBuffer {
        let eb = ExtentBuffer::new(start, self.level, generation, self.body(), lock);
        eb.mark_dirty();
        eb
    }
}

/// CPU of checking a tree block read from disk (`btrfs_validate_extent_buffer`:
/// the crc32c of the 16 KiB block and the header checks), ns per 4 KiB page:
/// 0.33 us, the measured per-sector cost of verifying data checksums
/// (`BTRFS_CSUM_VERIFY_SECTOR_NS` in fs/btrfs/mod.rs: the same crc32c over
/// the same 4 KiB).
pub const BTRFS_EB_VERIFY_PAGE_NS: Time = 330;

/// Counters of the btree inode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BtreeInodeStats {
    /// Tree blocks read from disk (`read_extent_buffer_pages` bios).
    pub reads: u64,
    /// Of those, blocks that had been in memory and were reclaimed.
    pub rereads: u64,
    /// Searches that waited for another task's read of a block.
    pub read_waits: u64,
    /// Time spent in the charges of tree block folios, ns (memory.high
    /// reclaim and penalty sleeps settled there, with tree locks held).
    pub charge_ns: Time,
}

/// The btree inode of one filesystem, as the tree code sees it: where tree
/// blocks are allocated, charged and read (`btrfs_find_create_tree_block`,
/// `read_extent_buffer_pages`, `mark_extent_buffer_accessed`). Only made when
/// tree blocks are charged to user memcgs (no `AS_KERNEL_FILE`); without it
/// every block is resident.
pub struct BtreeInode {
    mm: Rc<Mm>,
    sched: Sched,
    /// The device tree blocks are read from (None: reads take no time).
    dev: Option<BlockDevice>,
    /// Tells this filesystem's blocks apart on the LRUs.
    tag: u64,
    /// Pages per tree block (nodesize / PAGE_SIZE).
    pages: u64,
    stats: Cell<BtreeInodeStats>,
    /// The blocks with folios, by address: the btree inode's page cache,
    /// which keeps a freed block's folios until reclaim takes them.
    cached: RefCell<std::collections::BTreeMap<u64, Rc<EbFolios>>>,
}

impl BtreeInode {
    /// The btree inode of a filesystem whose blocks are `nodesize` bytes,
    /// read from `dev`; `tag` tells its LRU entries apart (the superblock
    /// id).
    pub fn new(
        mm: &Rc<Mm>,
        sched: &Sched,
        dev: Option<BlockDevice>,
        tag: u64,
        nodesize: u64,
    ) -> Self {
        BtreeInode {
            mm: mm.clone(),
            sched: sched.clone(),
            dev,
            tag: (1 << 63) | tag,
            pages: nodesize.div_ceil(PAGE_SIZE),
            stats: Cell::new(BtreeInodeStats::default()),
            cached: RefCell::new(std::collections::BTreeMap::new()),
        }
    }

    /// Pages of tree blocks in the page cache now: (cached, dirty,
    /// writeback); the folios are always clean.
    pub fn nr_pages(&self) -> (u64, u64, u64) {
        let c = self
            .cached
            .borrow()
            .values()
            .map(|f| f.mapping.borrow().nrpages())
            .sum();
        (c, 0, 0)
    }

    /// The counters so far.
    pub fn stats(&self) -> BtreeInodeStats {
        self.stats.get()
    }

    fn update(&self, f: impl FnOnce(&mut BtreeInodeStats)) {
        let mut s = self.stats.get();
        f(&mut s);
        self.stats.set(s);
    }

    /// `btrfs_find_create_tree_block()` for a block that is not up to date:
    /// unless another task is reading it, its folios are allocated
    /// (`alloc_extent_buffer`: `__GFP_NOFAIL`, so an allocation short of
    /// memory reclaims), added to the btree inode and charged to the current
    /// task's memcg (`filemap_add_folio` -> `mem_cgroup_charge`), which may
    /// run memory.high reclaim and the penalty sleep right here, with
    /// whatever tree locks the caller holds. Returns whether the caller
    /// must read the block (false: a read is in flight, or it is resident).
    pub async fn find_create_tree_block(&self, eb: &Rc<ExtentBuffer>) -> bool {
        let reread = match eb.cache() {
            EbCache::Resident => return false,
            EbCache::Folios(f) if f.reading.get() => return false,
            EbCache::Folios(f) => {
                // Reclaimed (some or all pages): what is left is dropped.
                self.drop_folios(&f);
                true
            }
            EbCache::OnDisk => false,
        };
        let memcg = self.mm.memcgs().from_cgroup(self.sched.current_cgroup());
        let f = Rc::new(EbFolios {
            eb: Rc::downgrade(eb),
            mapping: RefCell::new(AddressSpace::new()),
            pages: self.pages,
            memcg: memcg.id,
            last_access: Cell::new(self.mm.now()),
            tag: self.tag,
            start: eb.start(),
            reading: Cell::new(true),
            read_done: WaitQueue::with_label("btrfs:eb_read"),
        });
        eb.set_cache(EbCache::Folios(f.clone()));
        self.cached.borrow_mut().insert(eb.start(), f.clone());
        let _ = alloc_pages(&self.mm, self.pages, false).await;
        let d = f
            .mapping
            .borrow_mut()
            .add_clean(0, self.pages, false, memcg.id);
        account_delta(&self.mm, None, &d);
        memcg.lru_add(&(f.clone() as Rc<dyn LruFile>));
        let t0 = self.mm.now();
        // __GFP_NOFAIL: a charge past memory.max is forced (not modelled:
        // the scenario's memcgs have memory.high only).
        let _ = mem_cgroup_try_charge(&self.mm, &memcg, self.pages, true).await;
        let waited = self.mm.now() - t0;
        self.update(|s| {
            s.charge_ns += waited;
            if reread {
                s.rereads += 1;
            }
        });
        true
    }

    /// Takes a block's folios out of the cache: the pages left are
    /// uncharged and freed, the LRU entry goes.
    fn drop_folios(&self, f: &Rc<EbFolios>) {
        if let Some(mc) = self.mm.memcgs().get(f.memcg) {
            mc.lru_del(f.lru_key());
        }
        self.cached.borrow_mut().remove(&f.start);
        let d = f.mapping.borrow_mut().truncate_all();
        account_delta(&self.mm, None, &d);
        mem_cgroup_uncharge_freed(&self.mm, f.memcg, d.cached);
    }

    /// `read_extent_buffer_pages()` and the wait for it: if `reader` (this
    /// task allocated the folios), one REQ_META read bio of the block, then
    /// its header checksum on this CPU; otherwise a wait for the read in
    /// flight.
    pub async fn read_extent_buffer(&self, eb: &Rc<ExtentBuffer>, reader: bool) {
        let EbCache::Folios(f) = eb.cache() else {
            return;
        };
        if !f.reading.get() {
            return;
        }
        if !reader {
            self.update(|s| s.read_waits += 1);
            let f2 = f.clone();
            f.read_done
                .wait_event(self.sched.sim(), move || !f2.reading.get())
                .await;
            return;
        }
        self.update(|s| s.reads += 1);
        if let Some(dev) = &self.dev {
            let bio = Bio::read(eb.start(), self.pages * PAGE_SIZE).with_flags(BioFlags::SYNC_META);
            let done = Rc::new(Cell::new(false));
            let (d2, wq) = (done.clone(), f.read_done.clone());
            dev.submit_bio(
                bio,
                Box::new(move || {
                    d2.set(true);
                    wq.wake_up_all();
                }),
            )
            .await;
            f.read_done
                .wait_event(self.sched.sim(), move || done.get())
                .await;
        }
        self.sched.cpu(self.pages * BTRFS_EB_VERIFY_PAGE_NS).await;
        f.reading.set(false);
        self.mark_accessed(eb);
        f.read_done.wake_up_all();
    }

    /// `mark_extent_buffer_accessed()`: a search used the block; its folios
    /// go to the young end of their memcg's LRU.
    pub fn mark_accessed(&self, eb: &ExtentBuffer) {
        if let EbCache::Folios(f) = &*eb.cache.borrow() {
            let old = f.lru_key();
            f.last_access.set(self.mm.now());
            if let Some(mc) = self.mm.memcgs().get(f.memcg) {
                mc.lru_rotate(old, f.lru_key());
            }
        }
    }
}
