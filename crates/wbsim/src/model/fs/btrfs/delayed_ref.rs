//! Delayed references (fs/btrfs/delayed-ref.c): reference count changes of
//! extents queued by a transaction and run later, at the latest by its
//! commit (`btrfs_run_delayed_refs`, in extent_tree.rs).
//!
//! Modelled: drops of data extent references (`btrfs_free_extent` ->
//! `btrfs_add_delayed_data_ref` with `BTRFS_DROP_DELAYED_REF`), queued in
//! order. Left out: adds (new extents are inserted directly), tree block
//! refs, merging of refs to the same extent in the rbtree, head locks, the
//! async flushing of refs when too many are queued (all run at commit).

use std::cell::RefCell;

/// One queued reference drop (`struct btrfs_delayed_data_ref` with
/// `ref_mod` -1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DelayedDataRefDrop {
    /// The data extent's disk bytenr.
    pub bytenr: u64,
    /// Its length, bytes.
    pub num_bytes: u64,
    /// The transaction that queued it.
    pub transid: u64,
}

/// `struct btrfs_delayed_ref_root` (`trans->transaction->delayed_refs`).
#[derive(Debug, Default)]
pub struct BtrfsDelayedRefRoot {
    /// Queued drops, oldest first.
    drops: RefCell<Vec<DelayedDataRefDrop>>,
}

impl BtrfsDelayedRefRoot {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// `btrfs_add_delayed_data_ref()` of a drop.
    pub fn add_drop(&self, d: DelayedDataRefDrop) {
        self.drops.borrow_mut().push(d);
    }

    /// Queued drops.
    pub fn len(&self) -> usize {
        self.drops.borrow().len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.drops.borrow().is_empty()
    }

    /// Takes every queued drop of transactions up to `transid`
    /// (`btrfs_run_delayed_refs(trans, U64_MAX)` at commit).
    pub fn take_upto(&self, transid: u64) -> Vec<DelayedDataRefDrop> {
        let mut d = self.drops.borrow_mut();
        let (take, keep): (Vec<_>, Vec<_>) = d.drain(..).partition(|r| r.transid <= transid);
        *d = keep;
        take
    }
}
