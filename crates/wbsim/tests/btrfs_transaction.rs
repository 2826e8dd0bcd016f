//! btrfs transactions and checksum lookups (model/fs/btrfs): COW overwrite
//! freeing the old extent through delayed refs, commits that delete its
//! csums with COW searches, switch_commit_roots, commit_stats, the
//! transaction kthread, and the `csum_lookup` switch: a reader of old data
//! blocks behind a commit's csum-tree COW under `current_root` and does not
//! under `commit_root_for_old`.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use sim::{Sim, Time, MSEC, SEC, USEC};
use wbsim::model::block::{BlockDevice, DeviceProfile};
use wbsim::model::fs::btrfs::ctree::{BTRFS_NODESIZE, BTRFS_SEARCH_LEVEL_NS};
use wbsim::model::fs::btrfs::disk_io::{
    BtrfsFileSpec, BtrfsFsInfo, BTRFS_EXTENT_ITEM_KEY, BTRFS_FIRST_FREE_OBJECTID,
};
use wbsim::model::fs::btrfs::file_item::btrfs_lookup_bio_sums;
use wbsim::model::fs::btrfs::fs::TransState;
use wbsim::model::fs::btrfs::inode::btrfs_finish_ordered_overwrite;
use wbsim::model::fs::btrfs::locking::{btrfs_tree_lock, btrfs_tree_read_lock};
use wbsim::model::fs::btrfs::transaction::{btrfs_commit_transaction, btrfs_transaction_kthread};
use wbsim::model::kernel::locking::{LockStats, RwsemParams};
use wbsim::model::kernel::sched::{CgroupId, Sched, SchedParams};
use wbsim::model::policy::CsumLookup;

const MIB: u64 = 1 << 20;
const SIZE: u64 = 32 * MIB;
const INO: u64 = BTRFS_FIRST_FREE_OBJECTID + 1;

fn subvol(i: u64) -> u64 {
    BTRFS_FIRST_FREE_OBJECTID + i
}

/// 2 CPUs, 8 files of 32 MiB each in its own subvolume, an NVMe device.
fn fs() -> (Sim, Sched, LockStats, Rc<BtrfsFsInfo>, BlockDevice) {
    let sim = Sim::new(1);
    let sched = Sched::new(&sim, SchedParams::for_cpus(2));
    let stats = LockStats::new();
    let files: Vec<BtrfsFileSpec> = (0..8)
        .map(|i| BtrfsFileSpec {
            subvol: subvol(i),
            ino: INO,
            size: SIZE,
        })
        .collect();
    let info = BtrfsFsInfo::open(&sched, &stats, RwsemParams::default(), 1 << 40, &files, 1);
    let dev = BlockDevice::new(&sim, "nvme0n1", DeviceProfile::builtin("nvme-dc").unwrap());
    (sim, sched, stats, Rc::new(info), dev)
}

/// Every csum sector of `fs`'s current extents found, and none of `gone`.
async fn csums_match(fs: &BtrfsFsInfo, gone: &[(u64, u64)], policy: CsumLookup) -> bool {
    let g = fs.transactions().generation();
    for e in fs.extents() {
        let n = btrfs_lookup_bio_sums(
            fs.csum_root(),
            fs.commit_root_sem(),
            policy,
            e.bytenr,
            e.len,
            e.generation,
            g,
        )
        .await;
        if n != e.len / 4096 {
            return false;
        }
    }
    for &(b, l) in gone {
        let n =
            btrfs_lookup_bio_sums(fs.csum_root(), fs.commit_root_sem(), policy, b, l, 0, g).await;
        if n != 0 {
            return false;
        }
    }
    true
}

#[test]
fn overwrite_is_cow_and_the_commit_deletes_the_old_csums_and_writes_blocks() {
    let (sim, sched, _stats, info, dev) = fs();
    let ok = Rc::new(Cell::new(false));
    let (i, d, o, s) = (info.clone(), dev.clone(), ok.clone(), sim.clone());
    sched.spawn("t", CgroupId::ROOT, 0, async move {
        let old: Vec<_> = i.extents().into_iter().filter(|e| e.offset == 0).collect();
        let mut gone = Vec::new();
        for f in [1, 3] {
            let new = btrfs_finish_ordered_overwrite(&i, subvol(f), INO, 0)
                .await
                .unwrap();
            let was = old.iter().find(|e| e.subvol == subvol(f)).unwrap();
            assert_ne!(new.bytenr, was.bytenr);
            assert_eq!(new.generation, 2);
            gone.push((was.bytenr, was.len));
        }
        // Before the commit: the old extents' csums are still there (their
        // drops are queued as delayed refs), and the commit root does not
        // know the new extents.
        assert_eq!(i.delayed_refs().len(), 2);
        assert!(!csums_match(&i, &gone, CsumLookup::CurrentRoot).await);
        let before = d.stats();
        let ns = btrfs_commit_transaction(&i, Some(&d)).await.unwrap();
        let after = d.stats();
        assert!(i.delayed_refs().is_empty());
        assert_eq!(i.transactions().state(), Some(TransState::Completed));
        assert_eq!(i.transactions().last_committed(), 2);
        // No lost writes: every current extent's csums, in both the current
        // and (after the switch) the commit root; none of the freed ones.
        assert!(csums_match(&i, &gone, CsumLookup::CurrentRoot).await);
        i.transactions().join();
        assert!(csums_match(&i, &gone, CsumLookup::CommitRootForOld).await);
        // Extent items: the old ones deleted, the new ones present.
        let keys: Vec<_> = i.extent_root().items().iter().map(|it| it.key).collect();
        for e in i.extents() {
            assert!(keys
                .iter()
                .any(|k| k.objectid == e.bytenr && k.ty == BTRFS_EXTENT_ITEM_KEY));
        }
        for (b, _) in &gone {
            assert!(!keys.iter().any(|k| k.objectid == *b));
        }
        // Tree blocks and two superblocks reached the device.
        let written = after.write_bytes - before.write_bytes;
        assert!(written >= 4 * BTRFS_NODESIZE as u64 + 8192, "{written}");
        let st = i.transactions().commit_stats();
        assert_eq!(st.commits, 1);
        assert_eq!(
            (st.last_commit_ns, st.max_commit_ns, st.total_commit_ns),
            (ns, ns, ns)
        );
        // Its time by phase: the delayed refs, the blocks' and the
        // superblocks' writes took time, nobody held commit_root_sem, and
        // the phases fit in the commit.
        let p = st.phase_ns;
        assert!(
            p.run_delayed_refs > 0 && p.write_blocks > 0 && p.write_supers > 0,
            "{p:?}"
        );
        assert_eq!(p.switch_roots_wait, 0);
        assert!(
            p.run_delayed_refs + p.switch_roots_wait + p.write_blocks + p.write_supers <= ns,
            "{p:?} in {ns}"
        );
        // The commit's blocks are written: the next change COWs them again.
        let cows = i.ctx().cow_blocks();
        btrfs_finish_ordered_overwrite(&i, subvol(5), INO, 0).await;
        assert!(i.ctx().cow_blocks() > cows);
        o.set(s.now() > 0);
    });
    sim.run().unwrap();
    assert!(ok.get());
}

/// A commit whose csum deletions run in a CPU-starved task (cpuset CPU 0,
/// shared with a nice -20 hog), while a reader of old data on CPU 1 loops
/// over csum lookups. Returns the reader's longest lookup, ns, and whether
/// the commit completed.
fn longest_lookup_during_commit(policy: CsumLookup) -> (Time, bool) {
    let (sim, sched, _stats, info, dev) = fs();
    let done = Rc::new(Cell::new(false));
    let worst = Rc::new(Cell::new(0));
    let starved = sched.add_cgroup("starved", Some(&[0])).unwrap();
    let sc = sched.clone();
    sched.spawn("hog", starved, -20, async move { sc.cpu(50 * MSEC).await });
    let (i, d, dn) = (info.clone(), dev.clone(), done.clone());
    sched.spawn("btrfs-transaction", starved, 0, async move {
        // Several old extents rewritten: their csums are deleted at commit.
        for f in 0..4 {
            btrfs_finish_ordered_overwrite(&i, subvol(f), INO, 0).await;
        }
        btrfs_commit_transaction(&i, Some(&d)).await;
        dn.set(true);
    });
    let (i, s, dn, w) = (info.clone(), sim.clone(), done.clone(), worst.clone());
    sched.spawn("reader", CgroupId::ROOT, 0, async move {
        let e = i
            .extents()
            .into_iter()
            .find(|e| e.subvol == subvol(6))
            .unwrap();
        while !dn.get() && s.now() < SEC {
            let t0 = s.now();
            let g = i.transactions().generation();
            for k in 0..8 {
                btrfs_lookup_bio_sums(
                    i.csum_root(),
                    i.commit_root_sem(),
                    policy,
                    e.bytenr + k * 4 * MIB,
                    128 << 10,
                    e.generation,
                    g,
                )
                .await;
            }
            w.set(w.get().max(s.now() - t0));
            s.sleep(10 * USEC).await;
        }
    });
    sim.run().unwrap();
    (worst.get(), done.get())
}

#[test]
fn csum_lookup_current_root_blocks_behind_commit_cow_and_commit_root_does_not() {
    let (cur, done_cur) = longest_lookup_during_commit(CsumLookup::CurrentRoot);
    let (old, done_old) = longest_lookup_during_commit(CsumLookup::CommitRootForOld);
    assert!(done_cur && done_old);
    // current_root: a lookup waited for the starved committer's csum-tree
    // write lock (the hog's slices are milliseconds).
    assert!(cur > MSEC, "current_root worst lookup {cur} ns");
    // commit_root_for_old: no tree locks; 8 lookups of 2 levels each.
    assert!(
        old < 100 * USEC,
        "commit_root_for_old worst lookup {old} ns"
    );
}

/// The commit's wait chain: a reader holding the csum root's read lock is
/// stalled (10 ms asleep with the lock held, standing in for a holder that
/// is preempted, reclaiming or waiting for I/O); the commit's
/// `btrfs_del_csums` queues for the root's write lock behind it, and the
/// readers that come after queue behind the commit (a queued writer blocks
/// new readers). commit_stats count the commit's lock wait.
#[test]
fn a_stalled_csum_reader_stalls_the_commit_and_new_readers_queue_behind_it() {
    let (sim, sched, _stats, info, _dev) = fs();
    // (holders, queued) of the lock the commit waits for, seen at 5 ms.
    let chain = Rc::new(Cell::new(None));
    let readers_done = Rc::new(Cell::new(0));
    let (i, s) = (info.clone(), sim.clone());
    sched.spawn("committer", CgroupId::ROOT, 0, async move {
        btrfs_finish_ordered_overwrite(&i, subvol(1), INO, 0).await;
        s.sleep(MSEC).await;
        btrfs_commit_transaction(&i, None).await;
    });
    let (i, s) = (info.clone(), sim.clone());
    sched.spawn("stalled-reader", CgroupId::ROOT, 0, async move {
        s.sleep(500 * USEC).await;
        let root = i.csum_root().node();
        let _l = btrfs_tree_read_lock(&root).await;
        s.sleep(10 * MSEC).await;
    });
    for r in 0..5u64 {
        let (i, s, d) = (info.clone(), sim.clone(), readers_done.clone());
        sched.spawn("reader", CgroupId::ROOT, 0, async move {
            s.sleep(2 * MSEC).await;
            let e = i
                .extents()
                .into_iter()
                .find(|e| e.subvol == subvol(2 + r))
                .unwrap();
            let g = i.transactions().generation();
            btrfs_lookup_bio_sums(
                i.csum_root(),
                i.commit_root_sem(),
                CsumLookup::CurrentRoot,
                e.bytenr,
                128 << 10,
                e.generation,
                g,
            )
            .await;
            d.set(d.get() + 1);
        });
    }
    let (i, s, c) = (info.clone(), sim.clone(), chain.clone());
    sched.spawn("observer", CgroupId::ROOT, 0, async move {
        s.sleep(5 * MSEC).await;
        c.set(i.ctx().commit_wait_chain());
        // The raw queue: the commit's writer first, the readers after it.
        let q = i.ctx().commit_waits_on().map(|eb| eb.lock().waiters());
        assert_eq!(q.map(|q| q.len()), Some(6));
    });
    sim.run().unwrap();
    // At 5 ms the commit waits for the root held by the stalled reader,
    // with the five later readers queued behind it.
    assert_eq!(chain.get(), Some((1, 5)));
    assert_eq!(readers_done.get(), 5);
    let st = info.transactions().commit_stats();
    assert_eq!(st.commits, 1);
    assert_eq!(st.delayed_ref_drops, 1);
    // The commit waited from its del_csums search (about 1 ms) until the
    // reader's release at 10.5 ms.
    assert!(
        (9 * MSEC..10 * MSEC).contains(&st.max_commit_lock_wait_ns),
        "commit lock wait {} ns",
        st.max_commit_lock_wait_ns
    );
    assert!(st.max_commit_ns >= st.max_commit_lock_wait_ns);
    assert!(info.ctx().commit_waits_on().is_none());
}

#[test]
fn transaction_kthread_commits_every_interval_when_something_changed() {
    let (sim, sched, _stats, info, dev) = fs();
    let (i, d) = (info.clone(), dev.clone());
    sched.spawn_daemon("btrfs-transaction", CgroupId::ROOT, 0, async move {
        btrfs_transaction_kthread(i, Some(d), SEC).await;
    });
    let stats = Rc::new(RefCell::new(Vec::new()));
    let (i, s, st) = (info.clone(), sim.clone(), stats.clone());
    sched.spawn("writer", CgroupId::ROOT, 0, async move {
        s.sleep(SEC / 2).await;
        btrfs_finish_ordered_overwrite(&i, subvol(2), INO, 0).await;
        s.sleep(2 * SEC).await;
        st.borrow_mut()
            .push(i.transactions().commit_stats().commits);
        btrfs_finish_ordered_overwrite(&i, subvol(3), INO, 0).await;
        s.sleep(SEC).await;
        st.borrow_mut()
            .push(i.transactions().commit_stats().commits);
        // The kthread never idles: end the run here.
        s.stop();
    });
    sim.run().unwrap();
    // One commit at 1 s (the 2 s tick had nothing to commit), one at 3 s.
    assert_eq!(*stats.borrow(), vec![1, 2]);
    assert_eq!(info.transactions().last_committed(), 3);
}

/// A csum-tree reader that holds a block's read lock while runnable but not
/// running (CPU-bound peers on its CPUs) delays a writer of that lock by its
/// run-queue wait, and a reader arriving meanwhile queues behind the writer
/// (no priority inheritance): returns (the holder's wait for its 0.4 us
/// binary search, the writer's wait for the lock, the late reader's wait),
/// ns.
fn preempted_holder_waits(hogs: u64) -> (Time, Time, Time) {
    let (sim, sched, _stats, info, _dev) = fs();
    let stop = Rc::new(Cell::new(false));
    for _ in 0..hogs {
        let (s, st) = (sched.clone(), stop.clone());
        sched.spawn("hog", CgroupId::ROOT, 0, async move {
            while !st.get() {
                s.cpu(MSEC).await;
            }
        });
    }
    let held = Rc::new(Cell::new(false));
    let (i, s, h) = (info.clone(), sched.clone(), held.clone());
    let holder = sched.spawn("reader", CgroupId::ROOT, 0, async move {
        // A reader like its peers: it has run a while (its copy), its
        // whole slice, so the scheduler switches it out at its next
        // request, with the lock held (a task that still has slice left
        // keeps its CPU between requests).
        s.cpu(s.params().base_slice_ns).await;
        let root = i.csum_root().node();
        let l = btrfs_tree_read_lock(&root).await;
        h.set(true);
        let t0 = s.sim().now();
        s.cpu(BTRFS_SEARCH_LEVEL_NS).await;
        drop(l);
        s.sim().now() - t0 - BTRFS_SEARCH_LEVEL_NS
    });
    let (i, s, h) = (info.clone(), sim.clone(), held.clone());
    let writer = sched.spawn("commit", CgroupId::ROOT, 0, async move {
        while !h.get() {
            s.sleep(10 * USEC).await;
        }
        s.sleep(10 * USEC).await;
        let t0 = s.now();
        let _l = btrfs_tree_lock(&i.csum_root().node()).await;
        s.now() - t0
    });
    let (i, s, h) = (info.clone(), sim.clone(), held.clone());
    let late = sched.spawn("late-reader", CgroupId::ROOT, 0, async move {
        // Once the writer has given up spinning on the reader-owned lock
        // and queued.
        // (Without contention nobody queues: give up at 100 ms.)
        while (!h.get() || i.csum_root().node().lock().waiters().is_empty()) && s.now() < 100 * MSEC
        {
            s.sleep(10 * USEC).await;
        }
        let t0 = s.now();
        let _l = btrfs_tree_read_lock(&i.csum_root().node()).await;
        s.now() - t0
    });
    let (s, st) = (sim.clone(), stop.clone());
    sched.spawn("end", CgroupId::ROOT, 0, async move {
        s.sleep(SEC).await;
        st.set(true);
    });
    sim.run().unwrap();
    (
        holder.result().unwrap(),
        writer.result().unwrap(),
        late.result().unwrap(),
    )
}

#[test]
fn a_runnable_not_running_read_lock_holder_delays_a_writer_by_its_run_queue_wait() {
    // 16 CPU-bound peers on 2 CPUs: the holder waits for a CPU with the lock
    // held, up to a round of the peers' 1.5 ms slices (16 x 1.5 ms / 2 CPUs).
    let (hold, write, late) = preempted_holder_waits(16);
    assert!(hold >= 4 * MSEC, "holder's run-queue wait {hold}");
    // The writer waits as long, less its 10 us later start.
    assert!(
        write + 20 * USEC >= hold && write <= hold,
        "writer {write} holder {hold}"
    );
    // The late reader, arriving once the writer is queued, waits too.
    assert!(
        late >= MSEC && late < write,
        "late reader {late} writer {write}"
    );
    // Idle CPUs: the holder runs at once and nobody waits.
    let (hold, write, _) = preempted_holder_waits(0);
    assert!(hold < 10 * USEC && write < 10 * USEC, "{hold} {write}");
}

/// Handles and a commit (`btrfs_commit_transaction`'s waits): a commit waits
/// for a `TRANS_START` handle opened before it (COMMIT_START waits for the
/// external writers); a `TRANS_START` handle asked for while the commit is
/// blocked waits until the transaction is UNBLOCKED and joins the next one;
/// a `TRANS_JOIN` handle asked for in COMMIT_START still joins the
/// committing transaction.
#[test]
fn a_commit_waits_for_open_handles_and_new_start_handles_wait_for_it() {
    use wbsim::model::fs::btrfs::fs::TransKind;
    let (sim, sched, _stats, info, dev) = fs();
    let log = Rc::new(RefCell::new(Vec::<(&str, Time, u64)>::new()));
    // A truncate-like handle held for 10 ms from t = 0.
    let (i, s, l) = (info.clone(), sim.clone(), log.clone());
    sched.spawn("holder", CgroupId::ROOT, 0, async move {
        let h = i.transactions().start_handle(&s, TransKind::Start).await;
        l.borrow_mut().push(("holder", s.now(), h.transid));
        s.sleep(10 * MSEC).await;
        drop(h);
    });
    // The commit starts at 1 ms.
    let (i, s, d, l) = (info.clone(), sim.clone(), dev.clone(), log.clone());
    sched.spawn("committer", CgroupId::ROOT, 0, async move {
        s.sleep(MSEC).await;
        btrfs_commit_transaction(&i, Some(&d)).await;
        l.borrow_mut().push(("committed", s.now(), 0));
    });
    // At 2 ms, while the commit waits: a TRANS_JOIN joins the committing
    // transaction at once, a TRANS_START waits for the next one.
    for (name, kind) in [("join", TransKind::Join), ("start", TransKind::Start)] {
        let (i, s, l) = (info.clone(), sim.clone(), log.clone());
        sched.spawn(name, CgroupId::ROOT, 0, async move {
            s.sleep(2 * MSEC).await;
            let h = i.transactions().start_handle(&s, kind).await;
            l.borrow_mut().push((name, s.now(), h.transid));
        });
    }
    sim.run().unwrap();
    let log = log.borrow();
    let at = |n: &str| {
        *log.iter()
            .find(|e| e.0 == n)
            .unwrap_or_else(|| panic!("{n} in {log:?}"))
    };
    let (_, _, t1) = at("holder");
    let (_, join_at, join_id) = at("join");
    let (_, start_at, start_id) = at("start");
    let (_, done_at, _) = at("committed");
    assert_eq!((join_at, join_id), (2 * MSEC, t1), "{log:?}");
    assert_eq!(
        start_id,
        t1 + 1,
        "the START handle joins the next transaction"
    );
    assert!(
        start_at >= 10 * MSEC && start_at <= done_at,
        "it waited for the holder and the commit to unblock: {log:?}"
    );
    assert!(
        done_at >= 10 * MSEC,
        "the commit waited for the holder: {log:?}"
    );
    let waited = info.transactions().commit_stats().phase_ns.writers_wait;
    assert!(waited >= 8 * MSEC, "writers_wait {waited}");
}
