//! The btree (fs/btrfs/ctree.c, ctree.h): tree geometry from the on-disk
//! format, building a tree's blocks for a data set, `btrfs_search_slot()`
//! with lock coupling and COW, `btrfs_cow_block()` / `should_cow_block()`.
//!
//! Search, as in ctree.c:
//! - The root block is locked first: for write if its level is at or below
//!   `write_lock_level`, else for read (`btrfs_search_slot_get_root`, and
//!   `btrfs_read_lock_root_node` / `btrfs_lock_root_node`, which retry when
//!   the root was COWed while they waited).
//! - `write_lock_level` starts at -1 for a read search, 0 for a COW search,
//!   1 when inserting (`ins_len > 0`), 2 when deleting (`ins_len < 0`, which
//!   also sets `lowest_unlock` = 2).
//! - Walking down, each level binary-searches its block (CPU, with the lock
//!   held), then `unlock_up()` releases the locks above it (a level whose
//!   slot is 0 keeps its parent locked, and levels below `lowest_unlock` are
//!   kept), then the child is locked, for write at or below
//!   `write_lock_level`, else for read. So a read search holds at most the
//!   current block and waits for a child with its parent locked: lock
//!   coupling. It returns with the leaf locked, until the caller releases
//!   the path.
//! - A COW search COWs each block on the path that `should_cow_block()`
//!   says needs it; that needs write locks on the block and its parent, so
//!   if it holds less, it raises `write_lock_level` to the parent's level,
//!   releases the path and starts again from the root. The first change of
//!   a path in a transaction therefore write-locks it from the root down.
//! - `should_cow_block()`: a block created by the running transaction and
//!   not written since (`BTRFS_HEADER_FLAG_WRITTEN`) is changed in place;
//!   otherwise it is COWed: a new block (a new logical address, generation =
//!   transid, dirty, write-locked by its creator), the parent's pointer (or
//!   the root pointer) updated, the old block unlocked.
//!
//! - Blocks not in memory (`read_block_for_search`, when the filesystem has a
//!   [`BtreeInode`]: tree blocks charged to user memcgs, which can reclaim
//!   them): the locks above the current level are dropped, the missing
//!   child's buffer is allocated and charged with the current block still
//!   locked (the charge may run memory.high reclaim there), the child is
//!   read-locked, the path released, the child read from disk, and the
//!   search restarts. A commit-root search with `skip_locking` reads the
//!   child and goes on.
//!
//! Simplified: blocks are never split, merged or balanced
//! (`setup_nodes_for_search`, `split_leaf`, `balance_level` are left out):
//! the tree keeps the shape it was built with, and items are only deleted or
//! resized in place. No `keep_locks`, `lowest_level`, `search_for_split` or
//! tree block readahead. The old block of a COW is left to the commit root
//! (its freeing is not modelled).
//!
//! Commit roots: each root keeps `commit_root`, switched at commit; a
//! search with `search_commit_root` walks it, with `skip_locking` taking no
//! block locks (the caller holds `commit_root_sem` for read). COW never
//! changes a block reachable from the commit root: such a block is older
//! than the running transaction, so it is always copied first.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use sim::{TaskId, Time};

use crate::model::fs::btrfs::extent_io::{
    BtreeInode, BtrfsKey, EbBody, EbCache, ExtentBuffer, LeafItem,
};
use crate::model::fs::btrfs::fs::BtrfsTransHandle;
use crate::model::fs::btrfs::locking::{
    btrfs_lockdep_name, btrfs_tree_lock, btrfs_tree_read_lock, btrfs_try_tree_write_lock, EbLock,
    LockedEb,
};
use crate::model::kernel::locking::{LockStats, RwSemaphore, RwsemOwner, RwsemParams};
use crate::model::kernel::sched::Sched;

/// `nodesize`, bytes: 16 KiB, the mkfs.btrfs default since 3.x
/// (`BTRFS_MKFS_DEFAULT_NODE_SIZE`).
pub const BTRFS_NODESIZE: u32 = 16 << 10;
/// `sizeof(struct btrfs_header)`, bytes: 101 (csum 32, fsid 16, bytenr 8,
/// flags 8, chunk_tree_uuid 16, generation 8, owner 8, nritems 4, level 1).
pub const BTRFS_HEADER_SIZE: u32 = 101;
/// `BTRFS_LEAF_DATA_SIZE()`: bytes of a block after its header, 16283.
pub const BTRFS_LEAF_DATA_SIZE: u32 = BTRFS_NODESIZE - BTRFS_HEADER_SIZE;
/// `sizeof(struct btrfs_item)`, bytes: 25 (disk key 17, offset 4, size 4).
pub const BTRFS_ITEM_SIZE: u32 = 25;
/// `sizeof(struct btrfs_key_ptr)`, bytes: 33 (disk key 17, blockptr 8,
/// generation 8).
pub const BTRFS_KEY_PTR_SIZE: u32 = 33;
/// `BTRFS_NODEPTRS_PER_BLOCK()`: key pointers per node, 16283 / 33 = 493 at
/// 16 KiB nodes (121 at 4 KiB nodes).
pub const BTRFS_NODEPTRS_PER_BLOCK: usize = (BTRFS_LEAF_DATA_SIZE / BTRFS_KEY_PTR_SIZE) as usize;
/// Key pointers a node keeps when trees grow by appending: `split_node()`
/// moves the upper half out at `mid = (nritems + 1) / 2`, so a full node of
/// 493 keeps 247 and the last node of a level fills up again.
pub const BTRFS_NODE_SPLIT_KEEP: usize = BTRFS_NODEPTRS_PER_BLOCK.div_ceil(2);
/// `BTRFS_MAX_LEVEL`: 8.
pub const BTRFS_MAX_LEVEL: usize = 8;

/// CPU per level of a search with the block's lock held, ns: 0.4 us
/// (`read_block_for_search`: find the child buffer in the btree inode's
/// xarray, check it is uptodate; `btrfs_bin_search`: ~9 key comparisons
/// through the folio accessors for 493 pointers). Estimate.
pub const BTRFS_SEARCH_LEVEL_NS: Time = 400;
/// CPU of COWing one block, ns: 5 us (`btrfs_alloc_tree_block`: metadata
/// reservation, free-space search, a delayed ref; `copy_extent_buffer_full`
/// of 16 KiB; `btrfs_free_tree_block` of the old one). Estimate.
pub const BTRFS_COW_BLOCK_NS: Time = 5_000;

/// What the trees of one filesystem share: the scheduler and lock classes
/// for the block locks, the metadata block allocator, counters.
pub struct BtrfsTreeCtx {
    /// The machine's scheduler (rwsems need it).
    sched: Sched,
    /// Lock classes (`btrfs-<tree>-<level>`).
    lock_stats: LockStats,
    /// rwsem parameters (from the kernel's HZ).
    rwsem_params: RwsemParams,
    /// Next free logical address for a tree block, bytes.
    next_meta: Cell<u64>,
    /// Blocks COWed so far.
    cow_blocks: Cell<u64>,
    /// Searches started (each restart counts once more).
    searches: Cell<u64>,
    /// The task running `btrfs_commit_transaction`, whose tree-lock waits
    /// are traced (the commit's wait chain in the results).
    committer: Cell<Option<TaskId>>,
    /// The block whose lock the committer is waiting for now.
    commit_waits_on: RefCell<Option<Rc<ExtentBuffer>>>,
    /// Time the committer spent waiting for tree locks, ns (all commits).
    commit_lock_wait_ns: Cell<Time>,
    /// The btree inode when tree blocks are charged to user memcgs and may
    /// be reclaimed (None: every block stays in memory).
    btree_inode: RefCell<Option<Rc<BtreeInode>>>,
}

impl BtrfsTreeCtx {
    /// A context allocating tree blocks upward from `meta_start` (bytes).
    pub fn new(
        sched: &Sched,
        lock_stats: &LockStats,
        params: RwsemParams,
        meta_start: u64,
    ) -> Rc<Self> {
        Rc::new(BtrfsTreeCtx {
            sched: sched.clone(),
            lock_stats: lock_stats.clone(),
            rwsem_params: params,
            next_meta: Cell::new(meta_start),
            cow_blocks: Cell::new(0),
            searches: Cell::new(0),
            committer: Cell::new(None),
            commit_waits_on: RefCell::new(None),
            commit_lock_wait_ns: Cell::new(0),
            btree_inode: RefCell::new(None),
        })
    }

    /// Tree blocks live in `bi`'s folios from now on (charged, reclaimable,
    /// read on a miss).
    pub fn set_btree_inode(&self, bi: Rc<BtreeInode>) {
        *self.btree_inode.borrow_mut() = Some(bi);
    }

    /// The btree inode, when blocks may be out of memory.
    pub fn btree_inode(&self) -> Option<Rc<BtreeInode>> {
        self.btree_inode.borrow().clone()
    }

    /// Marks `task` as the committing task (None: no commit runs).
    pub fn set_committer(&self, task: Option<TaskId>) {
        self.committer.set(task);
    }

    /// The block whose lock the committing task is waiting for, if any.
    pub fn commit_waits_on(&self) -> Option<Rc<ExtentBuffer>> {
        self.commit_waits_on.borrow().clone()
    }

    /// The commit's wait chain now: if the committing task waits for a
    /// tree lock, (tasks holding that lock, tasks queued on it behind the
    /// committer).
    pub fn commit_wait_chain(&self) -> Option<(usize, usize)> {
        let eb = self.commit_waits_on()?;
        let l = eb.lock();
        let holders = match l.owner() {
            RwsemOwner::Readers(n) => n,
            RwsemOwner::Writer(_) => 1,
            RwsemOwner::Free => 0,
        };
        let waiters = l.waiters();
        let me = self.committer.get();
        let behind = match waiters.iter().position(|w| Some(w.0) == me) {
            Some(p) => waiters.len() - p - 1,
            // Still spinning, not queued: every waiter is behind it.
            None => waiters.len(),
        };
        Some((holders, behind))
    }

    /// Time the committing task spent waiting for tree locks so far, ns.
    pub fn commit_lock_wait_ns(&self) -> Time {
        self.commit_lock_wait_ns.get()
    }

    /// A tree lock taken by a COW search: the committer's wait is traced
    /// (which block it waits on, for how long); others lock plainly.
    async fn cow_search_lock(&self, eb: &Rc<ExtentBuffer>, write: bool) -> EbLock {
        let me = self.sched.sim().current_task();
        if self.committer.get() != Some(me) {
            return if write {
                btrfs_tree_lock(eb).await
            } else {
                btrfs_tree_read_lock(eb).await
            };
        }
        let t0 = self.sched.sim().now();
        *self.commit_waits_on.borrow_mut() = Some(eb.clone());
        let l = if write {
            btrfs_tree_lock(eb).await
        } else {
            btrfs_tree_read_lock(eb).await
        };
        *self.commit_waits_on.borrow_mut() = None;
        let waited = self.sched.sim().now() - t0;
        self.commit_lock_wait_ns
            .set(self.commit_lock_wait_ns.get() + waited);
        l
    }

    /// The scheduler.
    pub fn sched(&self) -> &Sched {
        &self.sched
    }

    /// The lock of a new block of `tree` at `level`.
    fn new_lock(&self, tree: &str, level: u8) -> RwSemaphore {
        RwSemaphore::with_params(
            self.lock_stats.class(&btrfs_lockdep_name(tree, level)),
            &self.sched,
            self.rwsem_params.clone(),
        )
    }

    /// A tree block's logical address (`btrfs_alloc_tree_block`'s extent,
    /// simplified to a bump allocator).
    fn alloc_block(&self) -> u64 {
        let s = self.next_meta.get();
        self.next_meta.set(s + BTRFS_NODESIZE as u64);
        s
    }

    /// Blocks COWed so far.
    pub fn cow_blocks(&self) -> u64 {
        self.cow_blocks.get()
    }

    /// Searches run so far (restarts included).
    pub fn searches(&self) -> u64 {
        self.searches.get()
    }
}

/// `struct btrfs_root`: one tree.
pub struct BtrfsRoot {
    /// Short tree name for lock classes (`fs`, `extent`, `csum`...).
    name: &'static str,
    /// `root->root_key.objectid` (`BTRFS_CSUM_TREE_OBJECTID`...).
    root_id: u64,
    /// `root->node`: the current root block.
    node: RefCell<Rc<ExtentBuffer>>,
    /// `root->commit_root`: the root block as of the last committed
    /// transaction, switched by `switch_commit_roots` under
    /// `commit_root_sem`. COW never changes a block of it.
    commit_root: RefCell<Rc<ExtentBuffer>>,
    /// Shared context.
    ctx: Rc<BtrfsTreeCtx>,
}

impl BtrfsRoot {
    /// The tree's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// `root->root_key.objectid`.
    pub fn root_id(&self) -> u64 {
        self.root_id
    }

    /// `btrfs_root_node()`: the current root block.
    pub fn node(&self) -> Rc<ExtentBuffer> {
        self.node.borrow().clone()
    }

    /// `root->commit_root`.
    pub fn commit_root(&self) -> Rc<ExtentBuffer> {
        self.commit_root.borrow().clone()
    }

    /// The commit root becomes the current root (`switch_commit_roots`, for
    /// one root; the caller holds `commit_root_sem` for write).
    pub fn switch_commit_root(&self) {
        let n = self.node();
        *self.commit_root.borrow_mut() = n;
    }

    /// The blocks changed by transaction `transid` and not yet written, in
    /// the current tree (`btree_write_cache_pages` of the dirty ones).
    /// Only blocks of that generation can be dirty, and their parents are
    /// of it too, so the walk stops at older blocks.
    pub fn dirty_blocks(&self, transid: u64) -> Vec<Rc<ExtentBuffer>> {
        let mut out = Vec::new();
        let mut stack = vec![self.node()];
        while let Some(b) = stack.pop() {
            if b.generation() != transid {
                continue;
            }
            if b.is_dirty() {
                out.push(b.clone());
            }
            if let EbBody::Node(p) = b.body() {
                stack.extend(p.into_iter().map(|(_, c)| c));
            }
        }
        out
    }

    /// Leaves the tree's blocks below its root on disk only, as after a
    /// mount with a cold cache (`open_ctree` reads each tree's root block;
    /// the rest is read when a search needs it).
    pub fn drop_cached_below_root(&self) {
        let root = self.node();
        self.for_each_block(|b| {
            if !Rc::ptr_eq(b, &root) {
                b.set_cache(EbCache::OnDisk);
            }
        });
    }

    /// Calls `f` on every block of the current tree, walking without locks
    /// (observation and setup, not kernel code).
    fn for_each_block(&self, mut f: impl FnMut(&Rc<ExtentBuffer>)) {
        let mut stack = vec![self.node()];
        while let Some(b) = stack.pop() {
            f(&b);
            if let EbBody::Node(p) = b.body() {
                stack.extend(p.into_iter().map(|(_, c)| c));
            }
        }
    }

    /// The root block's level (tree height - 1).
    pub fn level(&self) -> u8 {
        self.node.borrow().level()
    }

    /// The shared context.
    pub fn ctx(&self) -> &Rc<BtrfsTreeCtx> {
        &self.ctx
    }

    /// Blocks per level, leaves first, walking the tree without locks.
    pub fn blocks_per_level(&self) -> Vec<usize> {
        let mut out = vec![0; self.level() as usize + 1];
        self.for_each_block(|b| out[b.level() as usize] += 1);
        out
    }

    /// Tasks waiting for (queued on or spinning for) the locks of this
    /// tree's current blocks, added per lock class (`btrfs-<tree>-<level>`)
    /// into `out`; every class of the tree gets an entry. Walks the tree
    /// without locks (an observation, not kernel code).
    pub fn blocked_per_class(&self, out: &mut std::collections::BTreeMap<String, u64>) {
        self.for_each_block(|b| {
            let l = b.lock();
            *out.entry(l.class().name().to_string()).or_insert(0) +=
                (l.nr_waiters() + l.nr_spinners()) as u64;
        });
    }

    /// The leaf holding `key`, walking without locks (tests, layout checks).
    pub fn leaf_for(&self, key: &BtrfsKey) -> Rc<ExtentBuffer> {
        let mut b = self.node();
        while b.level() > 0 {
            let (mut slot, found) = b.bin_search(key);
            if !found && slot > 0 {
                slot -= 1;
            }
            b = b.child(slot).expect("a node has children");
        }
        b
    }

    /// Every leaf item in key order (tests, layout checks).
    pub fn items(&self) -> Vec<LeafItem> {
        fn walk(b: &Rc<ExtentBuffer>, out: &mut Vec<LeafItem>) {
            match b.body() {
                EbBody::Leaf(i) => out.extend(i),
                EbBody::Node(p) => p.iter().for_each(|(_, c)| walk(c, out)),
            }
        }
        let mut out = Vec::new();
        walk(&self.node(), &mut out);
        out
    }
}

/// Builds a tree holding `items` (sorted by key), as a tree grown by
/// appending would be laid out: leaves filled (`split_leaf` puts an item
/// appended past the end into a new empty leaf), nodes holding
/// [`BTRFS_NODE_SPLIT_KEEP`] pointers (the last one of a level up to
/// [`BTRFS_NODEPTRS_PER_BLOCK`]), levels added until one block remains.
/// Every block gets `generation` and is clean and written (it is on disk).
pub fn btrfs_build_tree(
    ctx: &Rc<BtrfsTreeCtx>,
    name: &'static str,
    root_id: u64,
    items: Vec<LeafItem>,
    generation: u64,
) -> BtrfsRoot {
    debug_assert!(
        items.windows(2).all(|w| w[0].key < w[1].key),
        "items sorted"
    );
    let mk = |level: u8, body: EbBody| {
        let eb = Rc::new(ExtentBuffer::new(
            ctx.alloc_block(),
            level,
            generation,
            body,
            ctx.new_lock(name, level),
        ));
        eb.set_written();
        eb
    };
    // Leaves.
    let mut level_blocks: Vec<(BtrfsKey, Rc<ExtentBuffer>)> = Vec::new();
    let mut cur: Vec<LeafItem> = Vec::new();
    let mut used = 0u32;
    for it in items {
        let need = BTRFS_ITEM_SIZE + it.size;
        if !cur.is_empty() && used + need > BTRFS_LEAF_DATA_SIZE {
            let first = cur[0].key;
            level_blocks.push((first, mk(0, EbBody::Leaf(std::mem::take(&mut cur)))));
            used = 0;
        }
        used += need;
        cur.push(it);
    }
    if !cur.is_empty() || level_blocks.is_empty() {
        let first = cur.first().map(|i| i.key).unwrap_or(BtrfsKey::new(0, 0, 0));
        level_blocks.push((first, mk(0, EbBody::Leaf(cur))));
    }
    // Nodes.
    let mut level = 0u8;
    while level_blocks.len() > 1 {
        level += 1;
        let mut chunks: Vec<Vec<(BtrfsKey, Rc<ExtentBuffer>)>> = Vec::new();
        for c in level_blocks.chunks(BTRFS_NODE_SPLIT_KEEP) {
            chunks.push(c.to_vec());
        }
        // The last node of a level keeps filling up to the maximum.
        if chunks.len() >= 2 {
            let n = chunks.len();
            if chunks[n - 2].len() + chunks[n - 1].len() <= BTRFS_NODEPTRS_PER_BLOCK {
                let last = chunks.pop().expect("two chunks");
                chunks.last_mut().expect("one chunk").extend(last);
            }
        }
        level_blocks = chunks
            .into_iter()
            .map(|c| (c[0].0, mk(level, EbBody::Node(c))))
            .collect();
    }
    let root = level_blocks.pop().expect("one block").1;
    BtrfsRoot {
        name,
        root_id,
        node: RefCell::new(root.clone()),
        commit_root: RefCell::new(root),
        ctx: ctx.clone(),
    }
}

/// `struct btrfs_path`: the blocks and slots of a search, from the leaf
/// (level 0) up, with the locks still held. Dropping it, or `release()`,
/// is `btrfs_release_path()`.
pub struct BtrfsPath {
    /// `p->nodes[]` and `p->locks[]`.
    nodes: [Option<LockedEb>; BTRFS_MAX_LEVEL],
    /// `p->slots[]`.
    slots: [usize; BTRFS_MAX_LEVEL],
    /// `p->search_commit_root`: search `root->commit_root`.
    pub search_commit_root: bool,
    /// `p->skip_locking`: take no tree locks (only valid on the commit
    /// root, which nobody changes, with `commit_root_sem` held).
    pub skip_locking: bool,
}

impl Default for BtrfsPath {
    fn default() -> Self {
        Self::new()
    }
}

impl BtrfsPath {
    /// `btrfs_alloc_path()`.
    pub fn new() -> Self {
        BtrfsPath {
            nodes: std::array::from_fn(|_| None),
            slots: [0; BTRFS_MAX_LEVEL],
            search_commit_root: false,
            skip_locking: false,
        }
    }

    /// `btrfs_release_path()`: unlock and drop every block.
    pub fn release(&mut self) {
        // Unlock from the leaf up, as the kernel's loop does.
        for n in self.nodes.iter_mut() {
            *n = None;
        }
        self.slots = [0; BTRFS_MAX_LEVEL];
    }

    /// `p->nodes[level]`.
    pub fn node(&self, level: usize) -> Option<Rc<ExtentBuffer>> {
        self.nodes[level].as_ref().map(|n| n.eb.clone())
    }

    /// `p->slots[level]`.
    pub fn slot(&self, level: usize) -> usize {
        self.slots[level]
    }

    /// `btrfs_insert_empty_item()`'s last step after a search with
    /// `ins_len` > 0: put `item` at the leaf slot (the leaf is write-locked
    /// and COWed). Leaves are not split: a leaf may exceed its size.
    pub fn insert_item(&self, item: LeafItem) {
        if let Some(n) = &self.nodes[0] {
            n.eb.insert_item(self.slots[0], item);
            n.eb.mark_dirty();
        }
    }

    /// `p->locks[level]`: None (not held), Some(false) read, Some(true) write.
    pub fn lock_held(&self, level: usize) -> Option<bool> {
        self.nodes[level]
            .as_ref()
            .and_then(|n| n.lock.as_ref().map(EbLock::is_write))
    }
}

/// `should_cow_block()`: a block needs COW unless the running transaction
/// created it and it has not been written since.
pub fn should_cow_block(trans: &BtrfsTransHandle, eb: &ExtentBuffer) -> bool {
    eb.generation() != trans.transid || eb.is_written()
}

/// `btrfs_read_lock_root_node()`: read-lock the root block, retrying if the
/// root was COWed while waiting.
pub async fn btrfs_read_lock_root_node(root: &BtrfsRoot) -> LockedEb {
    loop {
        let eb = root.node();
        let l = btrfs_tree_read_lock(&eb).await;
        if Rc::ptr_eq(&eb, &root.node()) {
            return LockedEb { eb, lock: Some(l) };
        }
    }
}

/// `btrfs_lock_root_node()`: write-lock the root block, retrying if the
/// root was COWed while waiting.
pub async fn btrfs_lock_root_node(root: &BtrfsRoot) -> LockedEb {
    loop {
        let eb = root.node();
        let l = btrfs_tree_lock(&eb).await;
        if Rc::ptr_eq(&eb, &root.node()) {
            return LockedEb { eb, lock: Some(l) };
        }
    }
}

/// The root lock of a COW search (`btrfs_lock_root_node` when `write`,
/// else `btrfs_read_lock_root_node`), with the committer's wait traced.
async fn cow_lock_root_node(root: &BtrfsRoot, write: bool) -> LockedEb {
    loop {
        let eb = root.node();
        let l = root.ctx.cow_search_lock(&eb, write).await;
        if Rc::ptr_eq(&eb, &root.node()) {
            return LockedEb { eb, lock: Some(l) };
        }
    }
}

/// `btrfs_cow_block()`: copy the write-locked `buf` into a new block of the
/// running transaction, point the write-locked parent (or the root) at it,
/// and return the new block write-locked; `buf` is unlocked (dropped).
pub async fn btrfs_cow_block(
    trans: &BtrfsTransHandle,
    root: &BtrfsRoot,
    buf: LockedEb,
    parent: Option<&ExtentBuffer>,
    parent_slot: usize,
) -> LockedEb {
    let ctx = &root.ctx;
    ctx.sched.cpu(BTRFS_COW_BLOCK_NS).await;
    let level = buf.eb.level();
    let cow = Rc::new(buf.eb.cow_copy(
        ctx.alloc_block(),
        trans.transid,
        ctx.new_lock(root.name, level),
    ));
    let lock = btrfs_try_tree_write_lock(&cow);
    debug_assert!(lock.is_some(), "a new block's lock is free");
    match parent {
        None => *root.node.borrow_mut() = cow.clone(),
        Some(p) => {
            p.set_child(parent_slot, cow.clone());
            p.mark_dirty();
        }
    }
    ctx.cow_blocks.set(ctx.cow_blocks.get() + 1);
    drop(buf);
    LockedEb { eb: cow, lock }
}

/// `unlock_up()`: release the path's locks above `level`, keeping those
/// below `lowest_unlock` and the parent of a level whose slot is 0 (its
/// lowest key may change). Lowers `write_lock_level` when a write-locked
/// level above the minimum is released.
fn unlock_up(
    path: &mut BtrfsPath,
    level: usize,
    lowest_unlock: usize,
    min_write_lock_level: i32,
    write_lock_level: Option<&mut i32>,
) {
    let mut skip_level = level;
    let mut check_skip = true;
    let mut wll = write_lock_level;
    for i in level..BTRFS_MAX_LEVEL {
        let Some(n) = path.nodes[i].as_mut() else {
            break;
        };
        if n.lock.is_none() {
            break;
        }
        if check_skip && path.slots[i] == 0 {
            skip_level = i + 1;
            continue;
        }
        if i >= lowest_unlock && i > skip_level {
            n.lock = None;
            check_skip = false;
            if let Some(w) = wll.as_deref_mut() {
                if i as i32 > min_write_lock_level && i as i32 <= *w {
                    *w = i as i32 - 1;
                }
            }
        }
    }
}

/// `btrfs_search_slot()`: find `key` in `root`, leaving the path at the
/// leaf slot where it is or would be inserted, the leaf still locked.
/// `ins_len` > 0 prepares an insert, < 0 a deletion; `cow` COWs the path
/// for a change (then `trans` must be given). Returns whether the key was
/// found (the kernel's 0).
pub async fn btrfs_search_slot(
    trans: Option<&BtrfsTransHandle>,
    root: &BtrfsRoot,
    key: &BtrfsKey,
    path: &mut BtrfsPath,
    ins_len: i32,
    cow: bool,
) -> bool {
    let ctx = root.ctx.clone();
    let trans = if cow {
        Some(trans.expect("btrfs_search_slot: a COW search needs a transaction"))
    } else {
        None
    };
    let mut lowest_unlock = 1usize;
    let mut write_lock_level: i32 = 0;
    if ins_len < 0 {
        lowest_unlock = 2;
        write_lock_level = 2;
    } else if ins_len > 0 {
        write_lock_level = 1;
    }
    if !cow {
        write_lock_level = -1;
    }
    let min_write_lock_level = write_lock_level;
    if path.search_commit_root {
        // The commit root: no COW (a read), and locks only without
        // skip_locking (the kernel requires skip_locking here).
        debug_assert!(!cow, "btrfs_search_slot: COW of the commit root");
        path.release();
        ctx.searches.set(ctx.searches.get() + 1);
        let mut b = root.commit_root();
        loop {
            let lock = if path.skip_locking {
                None
            } else {
                Some(btrfs_tree_read_lock(&b).await)
            };
            ctx.sched.cpu(BTRFS_SEARCH_LEVEL_NS).await;
            let level = b.level() as usize;
            let (mut slot, found) = b.bin_search(key);
            path.nodes[level] = Some(LockedEb {
                eb: b.clone(),
                lock,
            });
            if level == 0 {
                path.slots[0] = slot;
                unlock_up(path, 0, lowest_unlock, min_write_lock_level, None);
                return found;
            }
            if !found && slot > 0 {
                slot -= 1;
            }
            path.slots[level] = slot;
            unlock_up(path, level, lowest_unlock, min_write_lock_level, None);
            let child = b.child(slot).expect("a node has children");
            if let Some(bi) = ctx.btree_inode() {
                if child.is_uptodate() {
                    bi.mark_accessed(&child);
                } else {
                    // read_block_for_search with skip_locking: no locks to
                    // drop; the block is read and the walk goes on.
                    let reader = bi.find_create_tree_block(&child).await;
                    bi.read_extent_buffer(&child, reader).await;
                }
            }
            b = child;
        }
    }
    'again: loop {
        path.release();
        ctx.searches.set(ctx.searches.get() + 1);
        // btrfs_search_slot_get_root
        let root_level = root.level() as i32;
        let mut b = if trans.is_some() {
            // A COW search: the committer's waits are traced.
            cow_lock_root_node(root, root_level <= write_lock_level).await
        } else if root_level <= write_lock_level {
            btrfs_lock_root_node(root).await
        } else {
            btrfs_read_lock_root_node(root).await
        };
        loop {
            let level = b.eb.level() as usize;
            if let Some(t) = trans {
                if should_cow_block(t, &b.eb) {
                    let lvl = level as i32;
                    let parent_held =
                        level + 1 < BTRFS_MAX_LEVEL && path.nodes[level + 1].is_some();
                    if lvl > write_lock_level || (lvl + 1 > write_lock_level && parent_held) {
                        write_lock_level = lvl + 1;
                        drop(b);
                        continue 'again;
                    }
                    let parent = path.node(level + 1);
                    let pslot = path.slots[(level + 1).min(BTRFS_MAX_LEVEL - 1)];
                    b = btrfs_cow_block(t, root, b, parent.as_deref(), pslot).await;
                }
            }
            // The binary search of this block, lock held.
            ctx.sched.cpu(BTRFS_SEARCH_LEVEL_NS).await;
            let (mut slot, found) = b.eb.bin_search(key);
            let eb = b.eb.clone();
            path.nodes[level] = Some(b);
            if level == 0 {
                path.slots[0] = slot;
                unlock_up(path, 0, lowest_unlock, min_write_lock_level, None);
                return found;
            }
            if !found && slot > 0 {
                slot -= 1;
            }
            path.slots[level] = slot;
            if slot == 0 && ins_len != 0 && write_lock_level < level as i32 + 1 {
                write_lock_level = level as i32 + 1;
                continue 'again;
            }
            unlock_up(
                path,
                level,
                lowest_unlock,
                min_write_lock_level,
                Some(&mut write_lock_level),
            );
            let child = eb.child(slot).expect("a node has children");
            if let Some(bi) = ctx.btree_inode() {
                if child.is_uptodate() {
                    bi.mark_accessed(&child);
                } else {
                    // read_block_for_search, cache miss (6.13+): the locks
                    // above this level go; this block stays locked while the
                    // child's buffer is allocated and charged; then the
                    // child is read-locked, the path released, the child
                    // read (or its read in flight waited for), and the
                    // search starts again (-EAGAIN).
                    for n in path.nodes[level + 1..].iter_mut().flatten() {
                        n.lock = None;
                    }
                    let reader = bi.find_create_tree_block(&child).await;
                    let l = btrfs_tree_read_lock(&child).await;
                    path.release();
                    bi.read_extent_buffer(&child, reader).await;
                    drop(l);
                    continue 'again;
                }
            }
            let write = child.level() as i32 <= write_lock_level;
            let lock = if trans.is_some() {
                ctx.cow_search_lock(&child, write).await
            } else if write {
                btrfs_tree_lock(&child).await
            } else {
                btrfs_tree_read_lock(&child).await
            };
            b = LockedEb {
                eb: child,
                lock: Some(lock),
            };
        }
    }
}
