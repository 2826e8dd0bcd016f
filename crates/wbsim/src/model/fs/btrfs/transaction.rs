//! Transaction commit (fs/btrfs/transaction.c): `btrfs_commit_transaction`
//! through the states, `switch_commit_roots` under `commit_root_sem`, tree
//! blocks and superblocks written, `commit_stats`; the transaction kthread
//! (`transaction_kthread` in disk-io.c) committing every `commit=` seconds.
//!
//! A commit, as modelled:
//! - while the transaction still runs (other handles join and queue more),
//!   a pass over the delayed refs queued so far (`btrfs_run_delayed_refs`:
//!   extent-item deletions and `btrfs_del_csums`, COW searches that
//!   write-lock tree paths from the root);
//! - COMMIT_PREP -> COMMIT_START (new `TRANS_START` handles wait): wait for
//!   the external writers to end; COMMIT_DOING (new `TRANS_JOIN` handles
//!   wait too): wait for every handle to end (`num_writers`), run the
//!   delayed refs queued meanwhile (`commit_cowonly_roots`), commit the
//!   roots ([`BTRFS_COMMIT_ROOTS_NS`]).
//! - `switch_commit_roots`: `down_write(&fs_info->commit_root_sem)`, every
//!   root's commit root becomes its current root, `up_write`.
//! - UNBLOCKED (a new transaction may start), then
//!   `btrfs_write_and_wait_transaction`: every dirty block of the
//!   transaction written (one bio per block at its logical address, all
//!   submitted, then waited for) and flagged written;
//!   `write_all_supers`; SUPER_COMMITTED; COMPLETED, commit_stats updated.
//!
//! Left out: ordered extents and delalloc flushing in COMMIT_PREP, the
//! delayed items, the log tree, qgroups, the root tree
//! and its root items (their CPU is in [`BTRFS_COMMIT_ROOTS_NS`]), the
//! cleaner kthread. Not wired into the filesystem (`btrfs/mod.rs`) yet.

use std::cell::Cell;
use std::rc::Rc;

use sim::{Time, SEC, USEC};

use crate::model::block::{Bio, BioFlags, BlockDevice};
use crate::model::fs::btrfs::ctree::BTRFS_NODESIZE;
use crate::model::fs::btrfs::disk_io::{write_all_supers, BtrfsFsInfo};
use crate::model::fs::btrfs::extent_tree::btrfs_run_delayed_refs;
use crate::model::fs::btrfs::fs::{BtrfsCommitPhases, BtrfsTransHandle, TransState};
use crate::model::kernel::wait::WaitQueue;

/// CPU of committing the roots of a transaction outside the searches,
/// ns: 30 us (`commit_cowonly_roots`, `commit_fs_roots`, root item updates,
/// `btrfs_prepare_extent_commit`). Estimate (as the filesystem's
/// `BTRFS_COMMIT_CPU_NS`).
pub const BTRFS_COMMIT_ROOTS_NS: Time = 30 * USEC;
/// `BTRFS_DEFAULT_COMMIT_INTERVAL`: 30 s, the `commit=` mount option's
/// default (fs/btrfs/fs.h).
pub const BTRFS_DEFAULT_COMMIT_INTERVAL: Time = 30 * SEC;

/// `btrfs_commit_transaction()` of the running transaction, writing tree
/// blocks and superblocks to `dev` if given. Returns the commit's duration
/// (ns), or None if no transaction was running.
pub async fn btrfs_commit_transaction(fs: &BtrfsFsInfo, dev: Option<&BlockDevice>) -> Option<Time> {
    let sched = fs.ctx().sched().clone();
    let sim = sched.sim().clone();
    let transid = fs.transactions().running_transid()?;
    let trans = BtrfsTransHandle { transid };
    let t0 = sim.now();
    let tr = fs.transactions();
    // The commit's tree-lock waits are traced (its wait chain).
    let ctx = fs.ctx();
    ctx.set_committer(Some(sim.current_task()));
    let wait0 = ctx.commit_lock_wait_ns();
    let mut phases = BtrfsCommitPhases::default();
    // "Make a pass through all the delayed refs we have so far."
    let mut drops = btrfs_run_delayed_refs(&trans, fs).await;
    phases.run_delayed_refs = sim.now() - t0;
    tr.set_state(transid, TransState::CommitPrep);
    tr.set_state(transid, TransState::CommitStart);
    let t = sim.now();
    tr.wait_for_writers(&sim, transid, true).await;
    tr.set_state(transid, TransState::CommitDoing);
    tr.wait_for_writers(&sim, transid, false).await;
    phases.writers_wait = sim.now() - t;
    let t = sim.now();
    drops += btrfs_run_delayed_refs(&trans, fs).await;
    phases.run_delayed_refs += sim.now() - t;
    ctx.set_committer(None);
    tr.note_commit_waits(ctx.commit_lock_wait_ns() - wait0, drops as u64);
    sched.cpu(BTRFS_COMMIT_ROOTS_NS).await;
    // switch_commit_roots
    {
        let t = sim.now();
        let _w = fs.commit_root_sem().down_write().await;
        phases.switch_roots_wait = sim.now() - t;
        for r in fs.roots() {
            r.switch_commit_root();
        }
    }
    tr.set_state(transid, TransState::Unblocked);
    // btrfs_write_and_wait_transaction
    let mut blocks = Vec::new();
    for r in fs.roots() {
        blocks.extend(r.dirty_blocks(transid));
    }
    for b in &blocks {
        b.set_written();
    }
    if let Some(dev) = dev {
        let t = sim.now();
        let left = Rc::new(Cell::new(blocks.len()));
        let wq = WaitQueue::new("btrfs:write_and_wait_transaction");
        for b in &blocks {
            let (l, w) = (left.clone(), wq.clone());
            dev.submit_bio(
                // btree writeback: REQ_META (and the wbc's flags; the
                // commit writes with WB_SYNC_ALL, REQ_SYNC).
                Bio::write(b.start(), BTRFS_NODESIZE as u64).with_flags(BioFlags::SYNC_META),
                Box::new(move || {
                    l.set(l.get() - 1);
                    w.wake_up_all();
                }),
            )
            .await;
        }
        let l = left.clone();
        wq.wait_event(&sim, move || l.get() == 0).await;
        phases.write_blocks = sim.now() - t;
        let t = sim.now();
        write_all_supers(&sim, dev).await;
        phases.write_supers = sim.now() - t;
    }
    tr.note_commit_phases(phases);
    tr.set_state(transid, TransState::SuperCommitted);
    let ns = sim.now() - t0;
    tr.end_commit_of(transid, ns);
    tr.log_commit(t0, ns);
    Some(ns)
}

/// `transaction_kthread()`: every `commit_interval` ns, commit the running
/// transaction if it is at least that old (simplified: if one runs). Runs
/// until the simulation ends (spawn it as a daemon).
pub async fn btrfs_transaction_kthread(
    fs: Rc<BtrfsFsInfo>,
    dev: Option<BlockDevice>,
    commit_interval: Time,
) {
    let sim = fs.ctx().sched().sim().clone();
    loop {
        sim.sleep(commit_interval).await;
        btrfs_commit_transaction(&fs, dev.as_ref()).await;
    }
}
