//! The transaction fields of `struct btrfs_fs_info` (fs/btrfs/fs.h) and the
//! handle and states of fs/btrfs/transaction.h: the running transaction's id
//! (`trans->transid`), its state, the last committed generation, and
//! `commit_stats`. The commit itself is in `transaction.rs`.
//!
//! Handles are counted (`num_writers`, and `num_extwriters` for
//! `btrfs_start_transaction`'s kind) per transaction through
//! [`BtrfsTransactions::start_handle`]; a handle of a kind the running
//! transaction's state blocks (`btrfs_blocked_trans_types`: `TRANS_START`
//! from COMMIT_START, `TRANS_JOIN` from COMMIT_DOING, until UNBLOCKED)
//! waits for the commit to unblock (`wait_current_trans`) and joins the
//! next transaction. Left out: space reservation, TRANS_ATTACH and the
//! other kinds, `TRANS_STATE_COMMIT_PREP`'s ordered-extent wait.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::ops::Deref;

use sim::{Sim, Time};

use crate::model::kernel::wait::WaitQueue;

/// `struct btrfs_trans_handle`: a task's handle on the running transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BtrfsTransHandle {
    /// `trans->transid`: the running transaction's id.
    pub transid: u64,
}

/// The kind of a handle (`enum btrfs_trans_type`, the two the model uses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransKind {
    /// `TRANS_START` (`btrfs_start_transaction`: truncate, file writes'
    /// metadata): an external writer, blocked from COMMIT_START.
    Start,
    /// `TRANS_JOIN` (`btrfs_join_transaction`: the ordered-extent end),
    /// blocked from COMMIT_DOING.
    Join,
}

/// A counted handle on a transaction (`btrfs_start_transaction` ...
/// `btrfs_end_transaction`): dereferences to the [`BtrfsTransHandle`];
/// dropping it ends the handle (`num_writers`, and `num_extwriters` for
/// [`TransKind::Start`], go down and the committer waiting for them is
/// woken).
pub struct TransGuard<'a> {
    tr: &'a BtrfsTransactions,
    handle: BtrfsTransHandle,
    kind: TransKind,
}

impl Deref for TransGuard<'_> {
    type Target = BtrfsTransHandle;
    fn deref(&self) -> &BtrfsTransHandle {
        &self.handle
    }
}

impl Drop for TransGuard<'_> {
    fn drop(&mut self) {
        self.tr.end_handle(self.handle.transid, self.kind);
    }
}

/// `enum btrfs_trans_state` (transaction.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TransState {
    /// `TRANS_STATE_RUNNING`: handles join freely.
    Running,
    /// `TRANS_STATE_COMMIT_PREP`: a commit started, waiting for ordered
    /// extents and delalloc.
    CommitPrep,
    /// `TRANS_STATE_COMMIT_START`: no new handles of the old kind.
    CommitStart,
    /// `TRANS_STATE_COMMIT_DOING`: running delayed refs, committing roots.
    CommitDoing,
    /// `TRANS_STATE_UNBLOCKED`: roots switched; a new transaction may start
    /// while this one writes its blocks.
    Unblocked,
    /// `TRANS_STATE_SUPER_COMMITTED`: superblocks written.
    SuperCommitted,
    /// `TRANS_STATE_COMPLETED`.
    Completed,
}

/// `/sys/fs/btrfs/<uuid>/commit_stats` (`fs_info->commit_stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BtrfsCommitStats {
    /// `commits`: transactions committed.
    pub commits: u64,
    /// `last_commit_ms` in ns: duration of the last commit.
    pub last_commit_ns: Time,
    /// `max_commit_ms` in ns.
    pub max_commit_ns: Time,
    /// `total_commit_ms` in ns.
    pub total_commit_ns: Time,
    /// Not in the kernel's file: the longest time one commit's task spent
    /// waiting for tree locks (its COW searches), ns.
    pub max_commit_lock_wait_ns: Time,
    /// The same summed over commits, ns.
    pub total_commit_lock_wait_ns: Time,
    /// Delayed ref drops run by commits (each a `btrfs_del_csums`).
    pub delayed_ref_drops: u64,
    /// Not in the kernel's file: where the commits' time went, summed over
    /// commits, ns: running the delayed refs (COW searches, their lock
    /// waits and tree block reads included), waiting for `commit_root_sem`
    /// in `switch_commit_roots`, writing and waiting for the tree blocks,
    /// and the superblocks (flush, FUA write).
    pub phase_ns: BtrfsCommitPhases,
}

/// A commit's time by phase, ns (see [`BtrfsCommitStats::phase_ns`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BtrfsCommitPhases {
    /// `btrfs_run_delayed_refs`: the pass before COMMIT_PREP and the rest
    /// in COMMIT_DOING.
    pub run_delayed_refs: Time,
    /// Waiting for the transaction's other handles to end (external writers
    /// in COMMIT_START, then every handle in COMMIT_DOING).
    pub writers_wait: Time,
    /// `switch_commit_roots`: the wait for `commit_root_sem` (write).
    pub switch_roots_wait: Time,
    /// `btrfs_write_and_wait_transaction`: the dirty tree blocks.
    pub write_blocks: Time,
    /// `write_all_supers`.
    pub write_supers: Time,
}

/// The transaction counters of one filesystem (`fs_info->generation`,
/// `fs_info->running_transaction`, `last_trans_committed`, commit_stats).
pub struct BtrfsTransactions {
    /// `fs_info->generation`: id of the last transaction started.
    generation: Cell<u64>,
    /// State of the newest transaction (`Completed` = none running).
    state: Cell<Option<TransState>>,
    /// `fs_info->last_trans_committed`.
    last_committed: Cell<u64>,
    /// `fs_info->commit_stats`.
    stats: Cell<BtrfsCommitStats>,
    /// Every commit: (start, duration), ns (the report's timeline).
    log: RefCell<Vec<(Time, Time)>>,
    /// Open handles per transaction id: (`num_writers`, `num_extwriters`).
    writers: RefCell<BTreeMap<u64, (u64, u64)>>,
    /// `cur_trans->writer_wait` and `fs_info->transaction_wait` in one: the
    /// committer waiting for handles to end, and handles waiting for a
    /// blocked transaction to unblock.
    wait: WaitQueue,
}

impl BtrfsTransactions {
    /// A filesystem whose last committed generation is `generation` (the
    /// superblock's, at mount), with no running transaction.
    pub fn new(generation: u64) -> Self {
        BtrfsTransactions {
            generation: Cell::new(generation),
            state: Cell::new(None),
            last_committed: Cell::new(generation),
            stats: Cell::new(BtrfsCommitStats::default()),
            log: RefCell::new(Vec::new()),
            writers: RefCell::new(BTreeMap::new()),
            wait: WaitQueue::new("btrfs:transaction"),
        }
    }

    /// `start_transaction()` of `kind`: waits while the running
    /// transaction's state blocks that kind (`wait_current_trans`: until it
    /// is UNBLOCKED), then joins it or starts the next one (as
    /// [`BtrfsTransactions::join`]), counting the handle until the guard
    /// drops.
    pub async fn start_handle(&self, sim: &Sim, kind: TransKind) -> TransGuard<'_> {
        let blocks = |s: Option<TransState>| match (s, kind) {
            (Some(s), TransKind::Start) => {
                s >= TransState::CommitStart && s < TransState::Unblocked
            }
            (Some(s), TransKind::Join) => s >= TransState::CommitDoing && s < TransState::Unblocked,
            (None, _) => false,
        };
        if blocks(self.state.get()) {
            let st = &self.state;
            self.wait.wait_event(sim, || !blocks(st.get())).await;
        }
        let handle = self.join();
        let mut w = self.writers.borrow_mut();
        let e = w.entry(handle.transid).or_insert((0, 0));
        e.0 += 1;
        if kind == TransKind::Start {
            e.1 += 1;
        }
        TransGuard {
            tr: self,
            handle,
            kind,
        }
    }

    /// A handle of `transid` of `kind` ends (`btrfs_end_transaction`).
    fn end_handle(&self, transid: u64, kind: TransKind) {
        let mut w = self.writers.borrow_mut();
        if let Some(e) = w.get_mut(&transid) {
            e.0 -= 1;
            if kind == TransKind::Start {
                e.1 -= 1;
            }
            if e.0 == 0 {
                w.remove(&transid);
            }
        }
        drop(w);
        self.wait.wake_up_all();
    }

    /// Open handles of `transid`: (`num_writers`, `num_extwriters`).
    pub fn writers(&self, transid: u64) -> (u64, u64) {
        self.writers
            .borrow()
            .get(&transid)
            .copied()
            .unwrap_or((0, 0))
    }

    /// The committer's waits for handles of `transid` (`writer_wait`):
    /// `extwriters` true waits for the external writers only (COMMIT_START),
    /// false for every handle (COMMIT_DOING; the committer holds none here).
    pub async fn wait_for_writers(&self, sim: &Sim, transid: u64, extwriters: bool) {
        self.wait
            .wait_event(sim, || {
                let (n, ext) = self.writers(transid);
                if extwriters {
                    ext == 0
                } else {
                    n == 0
                }
            })
            .await;
    }

    /// `btrfs_join_transaction()`: join the running transaction, or start one
    /// (`join_transaction` -> `generation + 1`) when none runs or the newest
    /// one is past `TRANS_STATE_UNBLOCKED`'s switch (it no longer accepts
    /// handles). Waiting for a blocked commit is left out.
    pub fn join(&self) -> BtrfsTransHandle {
        match self.state.get() {
            Some(TransState::Running) => {}
            Some(s) if s < TransState::Unblocked => {}
            _ => {
                self.generation.set(self.generation.get() + 1);
                self.state.set(Some(TransState::Running));
            }
        }
        BtrfsTransHandle {
            transid: self.generation.get(),
        }
    }

    /// The running transaction's id: one started and not yet unblocked.
    pub fn running_transid(&self) -> Option<u64> {
        match self.state.get() {
            Some(s) if s < TransState::Unblocked => Some(self.generation.get()),
            _ => None,
        }
    }

    /// `fs_info->generation`.
    pub fn generation(&self) -> u64 {
        self.generation.get()
    }

    /// The newest transaction's state, if one was started since mount.
    pub fn state(&self) -> Option<TransState> {
        self.state.get()
    }

    /// Moves the running transaction (id `transid`) to `state`, if it is
    /// still the newest.
    pub fn set_state(&self, transid: u64, state: TransState) {
        if self.generation.get() == transid {
            self.state.set(Some(state));
            // Handles waiting for a blocked transaction recheck.
            if state >= TransState::Unblocked {
                self.wait.wake_up_all();
            }
        }
    }

    /// `fs_info->last_trans_committed`.
    pub fn last_committed(&self) -> u64 {
        self.last_committed.get()
    }

    /// The bookkeeping end of a commit of `transid` taking `ns`: it becomes
    /// the last committed transaction and commit_stats count it
    /// (`btrfs_commit_transaction`'s `update_commit_stats`).
    pub fn end_commit_of(&self, transid: u64, ns: Time) {
        self.set_state(transid, TransState::Completed);
        self.last_committed
            .set(self.last_committed.get().max(transid));
        let mut s = self.stats.get();
        s.commits += 1;
        s.last_commit_ns = ns;
        s.max_commit_ns = s.max_commit_ns.max(ns);
        s.total_commit_ns += ns;
        self.stats.set(s);
    }

    /// Adds one commit's tree-lock wait (`lock_wait_ns`) and the delayed
    /// ref drops it ran to commit_stats.
    pub fn note_commit_waits(&self, lock_wait_ns: Time, drops: u64) {
        let mut s = self.stats.get();
        s.max_commit_lock_wait_ns = s.max_commit_lock_wait_ns.max(lock_wait_ns);
        s.total_commit_lock_wait_ns += lock_wait_ns;
        s.delayed_ref_drops += drops;
        self.stats.set(s);
    }

    /// Adds one commit's phase times to commit_stats.
    pub fn note_commit_phases(&self, p: BtrfsCommitPhases) {
        let mut s = self.stats.get();
        s.phase_ns.run_delayed_refs += p.run_delayed_refs;
        s.phase_ns.writers_wait += p.writers_wait;
        s.phase_ns.switch_roots_wait += p.switch_roots_wait;
        s.phase_ns.write_blocks += p.write_blocks;
        s.phase_ns.write_supers += p.write_supers;
        self.stats.set(s);
    }

    /// Logs a commit that started at `start` and took `ns`.
    pub fn log_commit(&self, start: Time, ns: Time) {
        self.log.borrow_mut().push((start, ns));
    }

    /// Every commit so far: (start, duration), ns.
    pub fn commit_log(&self) -> Vec<(Time, Time)> {
        self.log.borrow().clone()
    }

    /// Ends the running transaction without any commit work (tests of COW
    /// across transactions).
    pub fn end_commit(&self) {
        if let Some(t) = self.running_transid() {
            self.set_state(t, TransState::Completed);
            self.last_committed.set(t);
        }
    }

    /// `commit_stats`.
    pub fn commit_stats(&self) -> BtrfsCommitStats {
        self.stats.get()
    }
}
