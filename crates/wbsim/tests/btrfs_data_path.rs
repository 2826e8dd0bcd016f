//! btrfs wired into the data paths (model/fs/btrfs/mod.rs): preloaded files
//! in subvolumes read with a csum lookup per bio, writes that COW their
//! extents at writeback, sync committing the transaction (delayed refs
//! deleting the old extents' csums), commit_stats, and no lost writes.

mod common;

use std::rc::Rc;

use sim::{Sim, SEC};
use wbsim::model::fs::btrfs::BTRFS_CSUM_VERIFY_SECTOR_NS;
use wbsim::model::fs::read_write::{create_file_in, vfs_read, vfs_write, IoFlags};
use wbsim::model::fs::sync::ksys_sync;
use wbsim::model::kernel::sched::CgroupId;
use wbsim::model::machine::Machine;
use wbsim::model::mm::page_writeback::TaskDirty;

const MIB: u64 = 1 << 20;

fn machine(sim: &Sim) -> (Rc<Machine>, Rc<wbsim::model::fs::vfs::SuperBlock>) {
    common::btrfs_with_preloaded_files(sim, 2, 4 << 30, 4)
}

fn stat(m: &Machine, k: &str) -> f64 {
    m.fs_stats()
        .into_iter()
        .find(|s| s.1 == k)
        .map_or(0.0, |s| s.3)
}

#[test]
fn reads_of_preloaded_files_look_up_csums_per_bio() {
    let sim = Sim::new(1);
    let (m, sb) = machine(&sim);
    let m2 = m.clone();
    sim.spawn("reader", async move {
        let f = create_file_in(&m2, &sb, "subvol2");
        common::read_sequentially(&m2, &f, 20 * MIB, 128 << 10).await;
    });
    sim.run_until(10 * SEC).unwrap();
    // 160 reads of 128 KiB, read ahead in 8 bios (windows of 512 KiB,
    // 1, 2, then 4 MiB, the last one cut at EOF): one search per csum item
    // a bio covers. An item holds 15.8 MiB of sectors (MAX_CSUM_ITEMS) and
    // the items run on across files, so exactly one bio straddles two.
    let reads = m.locks().get("btrfs-csum-00").map(|s| s.read.acquisitions);
    assert_eq!(stat(&m, "tree_searches"), 9.0);
    assert_eq!(reads, Some(9), "a read lock on the csum leaf per search");
    // Nothing was written: no commit.
    assert_eq!(stat(&m, "commits"), 0.0);
}

#[test]
fn a_read_returns_only_after_an_endio_worker_verified_its_checksums() {
    let sim = Sim::new(1);
    let (m, sb) = machine(&sim);
    let m2 = m.clone();
    let h = sim.spawn("reader", async move {
        let f = create_file_in(&m2, &sb, "subvol1");
        let t0 = m2.now();
        let before = m2.events().get("btrfs_end_bio_work").copied();
        vfs_read(&m2, &f, 0, 128 << 10, IoFlags::default())
            .await
            .unwrap();
        let after = m2.events().get("btrfs_end_bio_work").copied();
        (before, after, m2.now() - t0)
    });
    sim.run_until(SEC).unwrap();
    let (before, after, _) = h.result().expect("the read finished");
    assert_eq!(before, None, "no verification before the bio completes");
    assert_eq!(after, Some(1), "one btrfs_end_bio_work per read bio, done");
    // 32 sectors verified on a kworker of the root cgroup, not by the reader.
    let root = m.sched().cgroup_stats(CgroupId::ROOT).run_ns;
    assert!(
        root >= 32 * BTRFS_CSUM_VERIFY_SECTOR_NS,
        "root cgroup CPU {root} ns"
    );
}

#[test]
fn overwrites_cow_at_writeback_and_sync_commits_the_csum_deletes() {
    let sim = Sim::new(1);
    let (m, sb) = machine(&sim);
    let m2 = m.clone();
    let h = sim.spawn("dd", async move {
        let mut task = TaskDirty::default();
        let f = create_file_in(&m2, &sb, "small");
        let mut syncs = Vec::new();
        for _ in 0..3 {
            vfs_write(&m2, &mut task, &f, 0, 8 << 10, IoFlags::default())
                .await
                .unwrap();
            let t0 = m2.now();
            ksys_sync(&m2).await;
            syncs.push(m2.now() - t0);
        }
        let lost = f.inode.mapping.borrow().nrpages() - f.inode.mapping.borrow().nr_clean();
        (syncs, lost)
    });
    sim.run_until(20 * SEC).unwrap();
    let (syncs, lost) = h.result().expect("dd and syncs finished");
    assert_eq!(lost, 0, "every dd's data is on disk after sync");
    // Three syncs, three commits: the first writes a new extent, the next
    // two COW it, each dropping the previous extent (its csums deleted at
    // the commit).
    assert_eq!(stat(&m, "commits"), 3.0);
    assert!(stat(&m, "cow_blocks") > 0.0);
    let csum_writes = m
        .locks()
        .get("btrfs-csum-00")
        .map_or(0, |s| s.write.acquisitions);
    // 3 inserts + 2 deletes of csum items, each a COW search write-locking
    // the csum leaf (a delete may search twice: the item, then below it).
    assert!((5..=7 + 1).contains(&csum_writes), "{csum_writes}");
    assert!(syncs.iter().all(|&d| d > 0 && d < SEC), "{syncs:?}");
    assert!(stat(&m, "max_commit") > 0.0);
    assert_eq!(m.fs_commits().len(), 3);
}

/// dd with O_TRUNC three times over one file, no sync in between: each open
/// writes back and waits for the data the last dd left, then frees its
/// extent (a delayed ref drop); each close starts writeback of the new data
/// (`BTRFS_INODE_FLUSH_ON_CLOSE`). Without O_TRUNC the same three dd's leave
/// their data dirty until the sync and only one extent is ever written.
fn three_dds(trunc: bool) -> (f64, u64, Vec<u64>) {
    use wbsim::model::fs::open::{do_truncate, fput};
    let sim = Sim::new(1);
    let (m, sb) = machine(&sim);
    let m2 = m.clone();
    let h = sim.spawn("dd", async move {
        let mut task = TaskDirty::default();
        let f = create_file_in(&m2, &sb, "small");
        let mut dirty_after_close = Vec::new();
        for _ in 0..3 {
            if trunc {
                do_truncate(&m2, &f).await;
            }
            vfs_write(&m2, &mut task, &f, 0, 8 << 10, IoFlags::default())
                .await
                .unwrap();
            fput(&m2, &f).await;
            dirty_after_close.push(f.inode.mapping.borrow().nr_dirty());
        }
        ksys_sync(&m2).await;
        let lost = f.inode.mapping.borrow().nr_dirty() + f.inode.mapping.borrow().nr_writeback();
        (dirty_after_close, lost)
    });
    sim.run_until(20 * SEC).unwrap();
    let (dirty_after_close, lost) = h.result().expect("the dd's and the sync finished");
    assert_eq!(lost, 0, "every dd's data is on disk after sync");
    let csum_leaf_writes = m
        .locks()
        .get("btrfs-csum-00")
        .map_or(0, |s| s.write.acquisitions);
    (
        stat(&m, "delayed_ref_drops"),
        csum_leaf_writes,
        dirty_after_close,
    )
}

#[test]
fn dd_with_o_trunc_frees_the_extent_at_open_and_writes_back_at_close() {
    let (drops, csum_writes, dirty) = three_dds(true);
    // The second and third open free the extent the dd before wrote; the
    // commit of the sync runs both drops.
    assert_eq!(drops, 2.0);
    // Each close started writeback: nothing dirty is left after it.
    assert_eq!(dirty, vec![0, 0, 0]);
    // 3 csum inserts (one extent per dd) and 2 csum deletes, each a COW
    // search write-locking the csum leaf (a delete may search twice).
    assert!((5..=8).contains(&csum_writes), "{csum_writes}");

    let (drops, csum_writes, dirty) = three_dds(false);
    // Without O_TRUNC the data stays dirty until the sync writes it once:
    // one extent, no drop.
    assert_eq!(drops, 0.0);
    assert_eq!(dirty, vec![2, 2, 2]);
    assert!((1..=2).contains(&csum_writes), "{csum_writes}");
}
