//! btrfs tree blocks in the btree inode's page cache when they are charged
//! to user memcgs (before 6.18's `AS_KERNEL_FILE`; `[machine]
//! btrfs_btree_kernel_file = false`): a block read by a task is charged to
//! its memcg, reclaimed with that memcg's page cache, and read again by the
//! next search that needs it; and a search that misses a block keeps the
//! parent locked while the block's folios are charged, so a memory.high
//! debt settled inside that charge stalls every writer of the parent (and
//! the readers queued behind the writer).

mod common;

use std::rc::Rc;

use sim::{Sim, Time, MSEC, SEC};
use wbsim::model::block::{BlockDevice, DeviceProfile};
use wbsim::model::fs::btrfs::ctree::BTRFS_NODESIZE;
use wbsim::model::fs::btrfs::disk_io::{BtrfsFileSpec, BtrfsFsInfo, BTRFS_FIRST_FREE_OBJECTID};
use wbsim::model::fs::btrfs::extent_io::BtreeInode;
use wbsim::model::fs::btrfs::file_item::btrfs_lookup_bio_sums;
use wbsim::model::fs::btrfs::locking::btrfs_tree_lock;
use wbsim::model::fs::ext4::Ext4;
use wbsim::model::fs::read_write::{create_file, vfs_read, IoFlags};
use wbsim::model::init::MachineConfig;
use wbsim::model::kernel::locking::RwsemParams;
use wbsim::model::kernel::sched::CgroupId;
use wbsim::model::machine::Machine;
use wbsim::model::mm::memcontrol::{mem_cgroup_css_online, mem_cgroup_try_charge};
use wbsim::model::mm::vmscan::try_to_free_mem_cgroup_pages;
use wbsim::model::mm::vmstat::PAGE_SIZE;
use wbsim::model::policy::CsumLookup;

const MIB: u64 = 1 << 20;

/// A 2-CPU machine (an ext4 mount registers the page cache with reclaim)
/// and the trees of a btrfs holding eight 32 MiB files, its blocks below the
/// roots on disk, charged to their readers through a btree inode.
fn setup(sim: &Sim) -> (Rc<Machine>, Rc<BtrfsFsInfo>, Rc<BtreeInode>) {
    let (m, sb) = common::mounted(
        sim,
        MachineConfig::new(2, 4 << 30),
        DeviceProfile::nvme_dc(),
        Rc::new(Ext4::default()),
    );
    let files: Vec<BtrfsFileSpec> = (0..8)
        .map(|i| BtrfsFileSpec {
            subvol: BTRFS_FIRST_FREE_OBJECTID + i,
            ino: BTRFS_FIRST_FREE_OBJECTID + 1,
            size: 32 * MIB,
        })
        .collect();
    let fs = Rc::new(BtrfsFsInfo::open(
        m.sched(),
        m.locks(),
        RwsemParams::default(),
        1 << 40,
        &files,
        1,
    ));
    let dev = BlockDevice::new(sim, "nvme1n1", DeviceProfile::nvme_dc());
    let bi = Rc::new(BtreeInode::new(
        m.mm(),
        m.sched(),
        Some(dev),
        1,
        u64::from(BTRFS_NODESIZE),
    ));
    fs.ctx().set_btree_inode(bi.clone());
    for r in fs.roots() {
        r.drop_cached_below_root();
    }
    // Register the page cache with reclaim (a read does).
    let f = create_file(&m, &sb);
    let m2 = m.clone();
    m.sched().spawn("warm", CgroupId::ROOT, 0, async move {
        vfs_read(&m2, &f, 0, 4096, IoFlags::default()).await.ok();
    });
    sim.run_until(10 * MSEC).unwrap();
    (m, fs, bi)
}

/// The csums of file `file`'s first 1 MiB, looked up under `policy`.
async fn lookup(fs: &BtrfsFsInfo, policy: CsumLookup, file: usize) -> u64 {
    let e = fs.extents()[file];
    btrfs_lookup_bio_sums(
        fs.csum_root(),
        fs.commit_root_sem(),
        policy,
        e.bytenr,
        MIB,
        e.generation,
        fs.transactions().generation(),
    )
    .await
}

#[test]
fn tree_blocks_are_charged_to_their_reader_reclaimed_with_its_memcg_and_read_again() {
    let sim = Sim::new(1);
    let (m, fs, bi) = setup(&sim);
    let cg = m.sched().add_cgroup("bad", None).unwrap();
    let mc = mem_cgroup_css_online(m.mm(), cg, "bad", None, None);
    let (m2, fs2, mc2) = (m.clone(), fs.clone(), mc.clone());
    let t = m.sched().spawn("reader", cg, 0, async move {
        let found = lookup(&fs2, CsumLookup::CurrentRoot, 0).await;
        let charged = mc2.usage_pages();
        // The memcg's reclaim takes the clean, unused block.
        let freed = try_to_free_mem_cgroup_pages(m2.mm(), mc2.id, 1 << 20).await;
        let found2 = lookup(&fs2, CsumLookup::CurrentRoot, 0).await;
        (found, charged, freed, found2)
    });
    sim.run_until(SEC).unwrap();
    let (found, charged, freed, found2) = t.result().unwrap();
    assert_eq!(found, MIB / 4096);
    assert_eq!(found2, found);
    // One leaf (the root is resident): its 4 pages, charged to the reader's
    // memcg (through a batch: the stock holds the rest).
    let pages = u64::from(BTRFS_NODESIZE) / PAGE_SIZE;
    assert!(charged >= pages, "memcg charged {charged} pages");
    assert!(freed >= pages, "reclaim freed {freed} pages");
    let s = bi.stats();
    assert_eq!(s.reads, 2, "{s:?}");
    assert_eq!(s.rereads, 1, "{s:?}");
}

/// A reader in a memcg twice over memory.high with nothing to reclaim, owing
/// one batch, misses a csum leaf: the leaf's charge refills the CPU's stock
/// and settles the debt inside, a 2 s penalty, with the csum root (the
/// leaf's parent) read-locked under `current_root`, or `commit_root_sem`
/// read-held under `commit_root_for_old`. A writer of the csum root and a
/// writer of `commit_root_sem` start 1 ms later; a second reader 2 ms later.
/// Returns (root writer's wait, commit_root_sem writer's wait, second
/// reader's wait).
fn stalled_by_a_charge(policy: CsumLookup) -> (Time, Time, Time) {
    let sim = Sim::new(1);
    let (m, fs, _bi) = setup(&sim);
    // A running transaction newer than the files' extents.
    let _h = fs.transactions().join();
    let limit = 16 * MIB;
    let cg = m.sched().add_cgroup("bad", None).unwrap();
    let mc = mem_cgroup_css_online(m.mm(), cg, "bad", Some(limit), None);
    let (m2, fs2, mc2) = (m.clone(), fs.clone(), mc.clone());
    m.sched().spawn("reader", cg, 0, async move {
        m2.sched().cpu(1000).await;
        // Twice the limit, none of it on the LRU; one batch owed.
        mc2.charge(2 * limit / PAGE_SIZE, None);
        mem_cgroup_try_charge(m2.mm(), &mc2, 64, false)
            .await
            .unwrap();
        lookup(&fs2, policy, 0).await;
    });
    let (m3, fs3) = (m.clone(), fs.clone());
    let root_writer = m.sched().spawn("cow", CgroupId::ROOT, 0, async move {
        m3.sim().sleep(MSEC).await;
        let t0 = m3.now();
        let _l = btrfs_tree_lock(&fs3.csum_root().node()).await;
        m3.now() - t0
    });
    let (m4, fs4) = (m.clone(), fs.clone());
    let sem_writer = m.sched().spawn("switch", CgroupId::ROOT, 0, async move {
        m4.sim().sleep(MSEC).await;
        let t0 = m4.now();
        let _w = fs4.commit_root_sem().down_write().await;
        m4.now() - t0
    });
    let (m5, fs5) = (m.clone(), fs.clone());
    let reader2 = m.sched().spawn("reader2", CgroupId::ROOT, 0, async move {
        m5.sim().sleep(2 * MSEC).await;
        let t0 = m5.now();
        lookup(&fs5, CsumLookup::CurrentRoot, 1).await;
        m5.now() - t0
    });
    sim.run_until(10 * SEC).unwrap();
    (
        root_writer.result().unwrap(),
        sem_writer.result().unwrap(),
        reader2.result().unwrap(),
    )
}

#[test]
fn a_leaf_charged_under_the_parents_read_lock_stalls_the_csum_root_writer_and_readers_behind_it() {
    let (root_w, sem_w, r2) = stalled_by_a_charge(CsumLookup::CurrentRoot);
    assert!(root_w > 1900 * MSEC, "csum root writer waited {root_w}");
    assert!(sem_w < MSEC, "commit_root_sem writer waited {sem_w}");
    assert!(r2 > 1900 * MSEC, "second reader waited {r2}");
}

#[test]
fn with_the_commit_root_the_same_charge_holds_commit_root_sem_not_the_csum_root() {
    let (root_w, sem_w, r2) = stalled_by_a_charge(CsumLookup::CommitRootForOld);
    assert!(root_w < MSEC, "csum root writer waited {root_w}");
    assert!(sem_w > 1900 * MSEC, "commit_root_sem writer waited {sem_w}");
    // The second reader searches the current root (no commit_root_sem):
    // nothing in its way but its own leaf read.
    assert!(r2 < 50 * MSEC, "second reader waited {r2}");
}
