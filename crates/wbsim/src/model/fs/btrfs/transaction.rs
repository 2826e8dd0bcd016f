//! Transaction handles (fs/btrfs/transaction.c), first stage: only what COW
//! needs, i.e. the running transaction's id (`trans->transid`), the last
//! committed generation (`fs_info->generation` after a commit), and ending a
//! transaction so the next change starts a new one.
//!
//! Not modelled yet (a later stage of the btrfs work): the transaction states
//! (RUNNING -> COMMIT_PREP -> COMMIT_START -> COMMIT_DOING -> UNBLOCKED ->
//! SUPER_COMMITTED -> COMPLETED), the transaction kthread and `commit=`,
//! delayed refs, `switch_commit_roots` under `commit_root_sem`, writing tree
//! blocks and superblocks, `commit_stats`. The filesystem's commits in
//! `btrfs/mod.rs` still use the earlier fixed-cost model.

use std::cell::Cell;

/// `struct btrfs_trans_handle`: a task's handle on the running transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BtrfsTransHandle {
    /// `trans->transid`: the running transaction's id.
    pub transid: u64,
}

/// The transaction counters of one filesystem (`fs_info->generation`,
/// `fs_info->running_transaction`).
#[derive(Debug, Default)]
pub struct BtrfsTransactions {
    /// `fs_info->generation`: id of the last transaction started; the
    /// running one when `running` is set.
    generation: Cell<u64>,
    /// Whether a transaction is running (`fs_info->running_transaction`).
    running: Cell<bool>,
    /// `fs_info->last_trans_committed`.
    last_committed: Cell<u64>,
}

impl BtrfsTransactions {
    /// A filesystem whose last committed generation is `generation` (the
    /// superblock's, at mount), with no running transaction.
    pub fn new(generation: u64) -> Self {
        BtrfsTransactions {
            generation: Cell::new(generation),
            running: Cell::new(false),
            last_committed: Cell::new(generation),
        }
    }

    /// `btrfs_start_transaction()` / `btrfs_join_transaction()`: join the
    /// running transaction, or start one (`join_transaction` ->
    /// `generation + 1`). Space reservation and blocking on a committing
    /// transaction are left out.
    pub fn join(&self) -> BtrfsTransHandle {
        if !self.running.get() {
            self.generation.set(self.generation.get() + 1);
            self.running.set(true);
        }
        BtrfsTransHandle {
            transid: self.generation.get(),
        }
    }

    /// The running transaction's id, if one runs.
    pub fn running_transid(&self) -> Option<u64> {
        self.running.get().then(|| self.generation.get())
    }

    /// `fs_info->last_trans_committed`.
    pub fn last_committed(&self) -> u64 {
        self.last_committed.get()
    }

    /// The bookkeeping end of a commit: the running transaction becomes the
    /// last committed one and the next `join()` starts a new one. (The
    /// commit's work and I/O are a later stage.)
    pub fn end_commit(&self) {
        if self.running.get() {
            self.running.set(false);
            self.last_committed.set(self.generation.get());
        }
    }
}
