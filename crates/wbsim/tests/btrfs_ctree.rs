//! Known-answer tests of the btrfs metadata trees (model/fs/btrfs): geometry
//! from a data set, read searches with lock coupling, COW searches that
//! write-lock from the root, COW once per transaction unless written, and
//! the rwsem inversion through a CPU-starved reader holding a tree lock.

use std::cell::RefCell;
use std::rc::Rc;

use sim::{Sim, Time, MSEC, USEC};
use wbsim::model::fs::btrfs::ctree::{
    btrfs_search_slot, BtrfsPath, BTRFS_NODEPTRS_PER_BLOCK, BTRFS_SEARCH_LEVEL_NS,
};
use wbsim::model::fs::btrfs::disk_io::{
    BtrfsFileSpec, BtrfsFsInfo, BTRFS_DATA_START, BTRFS_FIRST_FREE_OBJECTID,
};
use wbsim::model::fs::btrfs::file_item::{btrfs_lookup_csum, csum_key, MAX_CSUM_ITEMS};
use wbsim::model::kernel::locking::{LockStats, RwsemParams};
use wbsim::model::kernel::sched::{CgroupId, Sched, SchedParams};

const MIB: u64 = 1 << 20;

/// A machine with `cpus` CPUs and a btrfs holding `nfiles` files of
/// `size` bytes, each in its own subvolume (as E2 lays them out).
fn fs(cpus: usize, nfiles: u64, size: u64) -> (Sim, Sched, LockStats, Rc<BtrfsFsInfo>) {
    let sim = Sim::new(1);
    let sched = Sched::new(&sim, SchedParams::for_cpus(cpus));
    let stats = LockStats::new();
    let files: Vec<BtrfsFileSpec> = (0..nfiles)
        .map(|i| BtrfsFileSpec {
            subvol: BTRFS_FIRST_FREE_OBJECTID + i,
            ino: BTRFS_FIRST_FREE_OBJECTID + 1,
            size,
        })
        .collect();
    let info = BtrfsFsInfo::open(&sched, &stats, RwsemParams::default(), 1 << 40, &files, 1);
    (sim, sched, stats, Rc::new(info))
}

/// Disk address of the first sector of file `i` (files of `size` bytes).
fn file_bytenr(i: u64, size: u64) -> u64 {
    BTRFS_DATA_START + i * size
}

type Log = Rc<RefCell<Vec<(&'static str, Time)>>>;

fn at(log: &Log, name: &'static str) -> Time {
    log.borrow()
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no log entry {name}"))
        .1
}

#[test]
fn e2_data_set_gives_the_kernels_fan_out_and_depth() {
    // 512 files of 20 MiB: 2,621,440 sectors of 4-byte crc32c.
    let (_sim, _sched, _stats, info) = fs(1, 512, 20 * MIB);
    assert_eq!(BTRFS_NODEPTRS_PER_BLOCK, 493);
    assert_eq!(MAX_CSUM_ITEMS, 4057);
    let sectors = 512 * 20 * MIB / 4096;
    let items = sectors.div_ceil(MAX_CSUM_ITEMS) as usize;
    assert_eq!(items, 647);
    let csum = info.csum_root();
    assert_eq!(csum.items().len(), items);
    // One full item per leaf; 647 leaves under two level-1 nodes (247 kept
    // by the split, the last one filled to 400), one root at level 2.
    assert_eq!(csum.blocks_per_level(), vec![647, 2, 1]);
    assert_eq!(csum.level(), 2);
    // Each subvolume's fs tree: inode item, inode ref, one extent: one leaf.
    let fs0 = info.fs_root(BTRFS_FIRST_FREE_OBJECTID).unwrap();
    assert_eq!((fs0.level(), fs0.items().len()), (0, 3));
    // Extent tree: 512 data extents + one metadata item per fs/csum block.
    let ext = info.extent_root();
    assert_eq!(ext.items().len(), 512 + 512 + 650);
    assert_eq!(ext.level(), 1);
    assert!(info.extents().iter().all(|e| e.len == 20 * MIB));
}

#[test]
fn lookup_finds_the_csums_of_written_data_only() {
    let (sim, sched, _stats, info) = fs(1, 8, 32 * MIB);
    let out = Rc::new(RefCell::new(Vec::new()));
    let (o, i) = (out.clone(), info.clone());
    sched.spawn("reader", CgroupId::ROOT, 0, async move {
        let csum = i.csum_root();
        for b in [
            BTRFS_DATA_START,
            file_bytenr(5, 32 * MIB) + 1234 * 4096,
            file_bytenr(8, 32 * MIB) - 4096,
            file_bytenr(8, 32 * MIB),
            BTRFS_DATA_START - 4096,
        ] {
            let hit = btrfs_lookup_csum(csum, b).await;
            o.borrow_mut().push(hit);
        }
    });
    sim.run().unwrap();
    assert_eq!(*out.borrow(), vec![true, true, true, false, false]);
}

#[test]
fn read_searches_of_disjoint_leaves_run_in_parallel() {
    // 8 x 32 MiB: 17 csum leaves under one root node.
    let (sim, sched, stats, info) = fs(2, 8, 32 * MIB);
    assert_eq!(info.csum_root().blocks_per_level(), vec![17, 1]);
    let log: Log = Rc::new(RefCell::new(Vec::new()));
    for (name, file) in [("r2", 2u64), ("r7", 7)] {
        let (l, i, s) = (log.clone(), info.clone(), sim.clone());
        sched.spawn(name, CgroupId::ROOT, 0, async move {
            let mut p = BtrfsPath::new();
            let key = csum_key(file_bytenr(file, 32 * MIB) + 4096);
            btrfs_search_slot(None, i.csum_root(), &key, &mut p, 0, false).await;
            // Lock coupling: the leaf is held, the root was released (its
            // slot is not 0, which would keep it).
            assert_eq!(p.lock_held(0), Some(false));
            assert_eq!(p.lock_held(1), None);
            l.borrow_mut().push((name, s.now()));
        });
    }
    sim.run().unwrap();
    let leaf2 = info
        .csum_root()
        .leaf_for(&csum_key(file_bytenr(2, 32 * MIB)));
    let leaf7 = info
        .csum_root()
        .leaf_for(&csum_key(file_bytenr(7, 32 * MIB)));
    assert!(!Rc::ptr_eq(&leaf2, &leaf7));
    // Each search: two levels of CPU, no waiting: both end together.
    assert_eq!(at(&log, "r2"), 2 * BTRFS_SEARCH_LEVEL_NS);
    assert_eq!(at(&log, "r7"), 2 * BTRFS_SEARCH_LEVEL_NS);
    for class in ["btrfs-csum-00", "btrfs-csum-01"] {
        let st = stats.get(class).unwrap();
        assert_eq!(st.read.acquisitions, 2, "{class}");
        assert_eq!(st.read.contentions, 0, "{class}");
    }
}

#[test]
fn cow_search_write_locks_the_root_and_blocks_readers_of_other_leaves() {
    let (sim, sched, stats, info) = fs(2, 8, 32 * MIB);
    let log: Log = Rc::new(RefCell::new(Vec::new()));
    let old_root = info.csum_root().node().start();
    let (l, i, s, sc) = (log.clone(), info.clone(), sim.clone(), sched.clone());
    sched.spawn("deleter", CgroupId::ROOT, 0, async move {
        let trans = i.transactions().join();
        assert_eq!(trans.transid, 2);
        let mut p = BtrfsPath::new();
        // The fourth csum item (a leaf of its own), as btrfs_del_csums
        // searches it: ins_len -1, cow.
        let key = i.csum_root().items()[3].key;
        let found = btrfs_search_slot(Some(&trans), i.csum_root(), &key, &mut p, -1, true).await;
        assert!(found);
        // Both levels write-locked and COWed into this transaction.
        assert_eq!((p.lock_held(0), p.lock_held(1)), (Some(true), Some(true)));
        assert_eq!(p.node(1).unwrap().generation(), 2);
        assert_eq!(p.node(0).unwrap().generation(), 2);
        l.borrow_mut().push(("cowed", s.now()));
        // Work on the leaf with the path held.
        sc.cpu(50 * USEC).await;
        l.borrow_mut().push(("released", s.now()));
        drop(p);
    });
    let (l, i, s) = (log.clone(), info.clone(), sim.clone());
    sched.spawn("reader", CgroupId::ROOT, 0, async move {
        s.sleep(USEC).await;
        // Another file's leaf: only the root is shared.
        assert!(btrfs_lookup_csum(i.csum_root(), file_bytenr(6, 32 * MIB)).await);
        l.borrow_mut().push(("read", s.now()));
    });
    sim.run().unwrap();
    assert_eq!(info.ctx().cow_blocks(), 2);
    assert_ne!(info.csum_root().node().start(), old_root);
    let released = at(&log, "released");
    let read = at(&log, "read");
    // The reader waited for the whole COW search and the writer's work.
    assert!(
        read >= released + 2 * BTRFS_SEARCH_LEVEL_NS,
        "{read} {released}"
    );
    assert!(read < released + 20 * USEC, "{read} {released}");
    let root_class = stats.get("btrfs-csum-01").unwrap();
    assert_eq!(root_class.read.sleeps, 2, "old root, then the COWed root");
}

#[test]
fn a_block_is_cowed_once_per_transaction_unless_written_back() {
    let (sim, sched, _stats, info) = fs(1, 8, 32 * MIB);
    let cows = Rc::new(RefCell::new(Vec::new()));
    let (c, i) = (cows.clone(), info.clone());
    sched.spawn("t", CgroupId::ROOT, 0, async move {
        let key = csum_key(file_bytenr(2, 32 * MIB));
        let root = i.csum_root();
        let search = |trans| {
            let i = i.clone();
            async move {
                let mut p = BtrfsPath::new();
                btrfs_search_slot(Some(&trans), i.csum_root(), &key, &mut p, -1, true).await;
                p.node(0).unwrap()
            }
        };
        let t = i.transactions().join();
        let leaf = search(t).await;
        c.borrow_mut().push(i.ctx().cow_blocks());
        // Same transaction: already COWed, changed in place.
        let again = search(t).await;
        assert!(Rc::ptr_eq(&leaf, &again));
        c.borrow_mut().push(i.ctx().cow_blocks());
        // A read search never COWs.
        let mut p = BtrfsPath::new();
        btrfs_search_slot(None, root, &key, &mut p, 0, false).await;
        drop(p);
        c.borrow_mut().push(i.ctx().cow_blocks());
        // Written back mid-transaction (memory pressure): COWed again; the
        // root, created by this transaction and not written, is not.
        let root_before = root.node();
        leaf.set_written();
        let third = search(t).await;
        assert!(!Rc::ptr_eq(&leaf, &third));
        assert!(!third.is_written() && third.is_dirty());
        assert!(Rc::ptr_eq(&root_before, &root.node()));
        c.borrow_mut().push(i.ctx().cow_blocks());
        // Next transaction: the whole path again.
        i.transactions().end_commit();
        let t2 = i.transactions().join();
        assert_eq!(t2.transid, t.transid + 1);
        search(t2).await;
        c.borrow_mut().push(i.ctx().cow_blocks());
    });
    sim.run().unwrap();
    assert_eq!(*cows.borrow(), vec![2, 2, 2, 3, 5]);
}

#[test]
fn starved_reader_holding_the_root_stalls_the_cow_writer_and_later_readers() {
    let (sim, sched, stats, info) = fs(2, 8, 32 * MIB);
    let log: Log = Rc::new(RefCell::new(Vec::new()));
    // The reader's cgroup is confined to CPU 0, which a nice -20 hog holds.
    let bad = sched.add_cgroup("bad", Some(&[0])).unwrap();
    let sc = sched.clone();
    sched.spawn("hog", bad, -20, async move { sc.cpu(100 * MSEC).await });
    let (l, i, s) = (log.clone(), info.clone(), sim.clone());
    sched.spawn("starved-reader", bad, 0, async move {
        assert!(btrfs_lookup_csum(i.csum_root(), file_bytenr(1, 32 * MIB)).await);
        l.borrow_mut().push(("starved-done", s.now()));
    });
    let (l, i, s) = (log.clone(), info.clone(), sim.clone());
    sched.spawn("cow-writer", CgroupId::ROOT, 0, async move {
        s.sleep(100 * USEC).await;
        let trans = i.transactions().join();
        let mut p = BtrfsPath::new();
        let key = csum_key(file_bytenr(4, 32 * MIB));
        btrfs_search_slot(Some(&trans), i.csum_root(), &key, &mut p, -1, true).await;
        l.borrow_mut().push(("writer-locked", s.now()));
        drop(p);
    });
    let (l, i, s) = (log.clone(), info.clone(), sim.clone());
    sched.spawn("late-reader", CgroupId::ROOT, 0, async move {
        s.sleep(200 * USEC).await;
        assert!(btrfs_lookup_csum(i.csum_root(), file_bytenr(6, 32 * MIB)).await);
        l.borrow_mut().push(("late-done", s.now()));
    });
    sim.run().unwrap();
    let starved = at(&log, "starved-done");
    let writer = at(&log, "writer-locked");
    let late = at(&log, "late-done");
    // The starved reader took the root for read at once, then waited for
    // CPU 0 with the lock held (the hog's slice, over a millisecond).
    assert!(starved > MSEC, "{starved}");
    // Nobody else could take the root until it ran: the writer queued...
    assert!(writer > starved, "{writer} {starved}");
    // ...and the late reader, needing a different leaf, queued behind the
    // writer although CPU 1 was free all along.
    assert!(late > writer, "{late} {writer}");
    assert!(late - 200 * USEC > MSEC);
    let cpu1_busy = sched.cpu_busy_ns()[1];
    assert!(cpu1_busy < 100 * USEC, "CPU 1 busy {cpu1_busy} ns");
    let root_class = stats.get("btrfs-csum-01").unwrap();
    assert!(root_class.write.sleeps >= 1);
    assert!(root_class.read.sleeps >= 1);
}
