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
//! Left out: the btree inode's folios holding the bytes (memory accounting and
//! reading a block from disk arrive with a later stage: every block is in
//! memory here), reference counts, `EXTENT_BUFFER_UPTODATE`/`WRITEBACK`, the
//! lockdep nesting of the kernel's class keys.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use crate::model::kernel::locking::RwSemaphore;

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
