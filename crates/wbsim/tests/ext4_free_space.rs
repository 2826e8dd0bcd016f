//! ext4's delayed-allocation space accounting and `ext4_nonda_switch`
//! (model/fs/ext4.rs): a writer whose dirty (reserved) clusters pass half
//! the free ones starts writeback of the filesystem and waits for it; one
//! that keeps writing while that writeback runs goes on without delalloc
//! once free clusters are under 1.5x the dirty ones; a write that stays
//! under half the free space never does either. Counters go back at unlink.

mod common;

use std::rc::Rc;

use common::{mounted, write_then_fsync};
use sim::{Sim, Time, MSEC, SEC};
use wbsim::model::block::{BlockDevice, DeviceProfile};
use wbsim::model::fs::ext4::{ext4_freeclusters_watermark, mkfs_free_clusters, Ext4};
use wbsim::model::fs::read_write::{
    create_file, vfs_fallocate, vfs_unlink, vfs_write, File, IoFlags,
};
use wbsim::model::fs::super_::sget;
use wbsim::model::fs::vfs::SuperBlock;
use wbsim::model::init::MachineConfig;
use wbsim::model::machine::Machine;
use wbsim::model::mm::backing_dev::BdiSettings;
use wbsim::model::mm::page_writeback::TaskDirty;

const MIB: u64 = 1 << 20;

/// A 2-CPU, 24 GiB machine (the project's: no background writeback during
/// a 1 GiB write), `bg_bytes` the background threshold if not 0.
fn machine(
    sim: &Sim,
    fs_bytes: u64,
    bw: u64,
    bg_bytes: u64,
) -> (Rc<Machine>, Rc<SuperBlock>, Rc<Ext4>) {
    let mut cfg = MachineConfig::new(2, 24 << 30);
    cfg.dirty.dirty_background_bytes = bg_bytes;
    let m = Machine::new(sim, cfg).unwrap();
    let mut prof = DeviceProfile::nvme_dc();
    prof.write_bw_bytes_per_sec = bw;
    let dev = BlockDevice::new(sim, "loop0", prof);
    let fs = Rc::new(Ext4::with_size(fs_bytes));
    let sb = sget(&m, "ext4", fs.clone(), Some(dev), BdiSettings::default());
    (m, sb, fs)
}

/// Writes `len` bytes in 1 MiB writes, then fsyncs. Returns the simulated
/// time the writes took (the fsync left out).
async fn write_fsync(m: Rc<Machine>, f: File, len: u64) -> Time {
    write_then_fsync(m, f, len).await.0
}

#[test]
fn mkfs_free_clusters_match_e2fsprogs() {
    // mkfs.ext4 -F -q on sparse images, dumpe2fs -h "Free blocks"
    // (e2fsprogs 1.47.0, the project machine).
    for (bytes, measured) in [(1u64 << 30, 249_189u64), (2 << 30, 498_132)] {
        let got = mkfs_free_clusters(bytes);
        assert!(
            got >= measured && got - measured < measured / 200,
            "{bytes}: {got}"
        );
    }
    // 2 CPUs: percpu_counter_batch 32, so 4 * 32 * 2 clusters.
    assert_eq!(ext4_freeclusters_watermark(2), 256);
    assert_eq!(ext4_freeclusters_watermark(64), 4 * 128 * 64);
}

#[test]
fn writer_past_half_the_free_space_waits_for_writeback() {
    let sim = Sim::new(1);
    let (m, sb, fs) = machine(&sim, 2 << 30, 1 << 30, 0);
    let free0 = fs.space().unwrap().free.get();
    let f = create_file(&m, &sb);
    let h = sim.spawn("writer", write_fsync(m.clone(), f.clone(), 1 << 30));
    sim.run_until(60 * SEC).unwrap();
    let took = h.result().expect("writer finished");
    let sp = fs.space().unwrap();
    // 1 GiB of new blocks is more than half of the ~1.9 GiB free: the
    // writer started writeback once (the flusher was idle), and waited.
    assert!(sp.writeback_calls.get() >= 1, "{sp:?}");
    // That wait (about 0.95 GiB at 1 GiB/s) is inside the writes, whose
    // own CPU is under 0.4 s.
    assert!(took > 800 * MSEC, "writes took {took} ns");
    // Never under 1.5x: delalloc all the way.
    assert_eq!(sp.nonda_writes.get(), 0);
    // Everything allocated and nothing reserved after the fsync.
    assert_eq!(sp.dirty.get(), 0);
    assert_eq!(sp.free.get(), free0 - (1 << 30) / 4096);
    // The unlink gives the blocks back.
    let (m2, f2) = (m.clone(), f.clone());
    sim.spawn("rm", async move { vfs_unlink(&m2, &f2).await });
    sim.run_until(61 * SEC).unwrap();
    assert_eq!(sp.free.get(), free0);
    assert!(m.violations().is_empty(), "{:?}", m.violations());
}

#[test]
fn writer_under_half_the_free_space_never_switches() {
    let sim = Sim::new(1);
    let (m, sb, fs) = machine(&sim, 2 << 30, 1 << 30, 0);
    let f = create_file(&m, &sb);
    let h = sim.spawn("writer", write_fsync(m.clone(), f, 768 * MIB));
    sim.run_until(60 * SEC).unwrap();
    let took = h.result().expect("writer finished");
    // No writeback wait inside the writes.
    assert!(took < 400 * MSEC, "writes took {took} ns");
    let sp = fs.space().unwrap();
    // 768 MiB reserved at most, under half of ~1.9 GiB free.
    assert_eq!(sp.writeback_calls.get(), 0, "{sp:?}");
    assert_eq!(sp.nonda_writes.get(), 0);
    assert_eq!(sp.dirty.get(), 0);
}

#[test]
fn writer_goes_without_delalloc_while_the_flusher_is_busy() {
    let sim = Sim::new(1);
    // 256 MiB filesystem (~236 MiB free) on a 50 MB/s device; background
    // writeback from 16 MiB dirty keeps the flusher busy while one writer
    // writes 228 MiB.
    let (m, sb, fs) = machine(&sim, 256 * MIB, 50_000_000, 16 * MIB);
    let free0 = fs.space().unwrap().free.get();
    let f = create_file(&m, &sb);
    let h = sim.spawn("w", write_fsync(m.clone(), f, 228 * MIB));
    sim.run_until(120 * SEC).unwrap();
    assert!(h.result().is_some());
    let sp = fs.space().unwrap();
    // Past half the free space the writer asks for writeback, finds the
    // flusher busy (skip_if_busy) and does not wait; past 2/3 it writes
    // without delalloc.
    assert!(sp.writeback_calls.get() >= 1, "{sp:?}");
    assert!(sp.nonda_writes.get() > 0, "{sp:?}");
    assert_eq!(sp.dirty.get(), 0);
    assert_eq!(sp.free.get(), free0 - 228 * MIB / 4096);
    assert!(m.violations().is_empty(), "{:?}", m.violations());
}

/// 4 KiB RWF_DONTCACHE writes, each starting its own writeback: into a
/// sparse file every writepages call allocates the delalloc block
/// (`EXT4_DELALLOC_ALLOC_NS`); into a preallocated one it does not.
#[test]
fn dontcache_writes_into_a_sparse_file_pay_the_allocation_at_writeback() {
    let per_write = |falloc: bool| -> Time {
        let sim = Sim::new(1);
        let (m, sb, _) = machine(&sim, 2 << 30, 3_700_000_000, 0);
        let f = create_file(&m, &sb);
        let h = sim.spawn("w", async move {
            if falloc {
                vfs_fallocate(&m, &f, 0, 4 * MIB, false).await;
            }
            let t0 = m.now();
            let mut task = TaskDirty::default();
            let fl = IoFlags {
                dontcache: true,
                ..IoFlags::default()
            };
            for i in 0..1024 {
                vfs_write(&m, &mut task, &f, i * 4096, 4096, fl)
                    .await
                    .unwrap();
            }
            (m.now() - t0) / 1024
        });
        sim.run_until(10 * SEC).unwrap();
        h.result().expect("done")
    };
    let (sparse, pre) = (per_write(false), per_write(true));
    // 2.7 us of allocation per write, give or take the rest of the path.
    assert!(
        sparse > pre + 2_000,
        "sparse {sparse} ns, preallocated {pre} ns"
    );
    assert!(
        sparse < pre + 4_000,
        "sparse {sparse} ns, preallocated {pre} ns"
    );
}

/// Simulated time of one 1 MiB buffered write at `pos` of `f`.
async fn one_write(m: Rc<Machine>, f: File, pos: u64) -> Time {
    let mut task = TaskDirty::default();
    let t0 = m.now();
    vfs_write(&m, &mut task, &f, pos, MIB, IoFlags::default())
        .await
        .unwrap();
    m.now() - t0
}

#[test]
fn only_blocks_in_holes_pay_the_delalloc_reservation() {
    use wbsim::model::fs::ext4::EXT4_DA_RESERVE_NS;
    // Without a size: no space accounting, the reservation's CPU still
    // follows the holes (ext4_da_map_blocks -> ext4_insert_delayed_blocks).
    let sim = Sim::new(1);
    let cfg = MachineConfig::new(2, 24 << 30);
    let (m, sb) = mounted(
        &sim,
        cfg,
        DeviceProfile::nvme_dc(),
        Rc::new(Ext4::default()),
    );
    let sparse = create_file(&m, &sb);
    let falloc = create_file(&m, &sb);
    let (m2, f2) = (m.clone(), falloc.clone());
    sim.spawn(
        "fa",
        async move { vfs_fallocate(&m2, &f2, 0, MIB, false).await },
    );
    sim.run_until(SEC).unwrap();
    let mut took = Vec::new();
    // A hole, the same (now delayed) range again, a preallocated range.
    for (f, t) in [(&sparse, 2), (&sparse, 3), (&falloc, 4)] {
        let h = sim.spawn("w", one_write(m.clone(), f.clone(), 0));
        sim.run_until(t * SEC).unwrap();
        took.push(h.result().expect("write done"));
    }
    let per_block = 256 * EXT4_DA_RESERVE_NS;
    // The first write into the hole reserves its 256 blocks; rewriting
    // the dirty (delayed) blocks and writing preallocated ones does not
    // (the rewrite may pay the cold extent walk, ~1 us, as any write into a
    // hole away from the previous write does).
    let (first, again) = (took[0] - took[2], took[1] - took[2]);
    assert!(first >= per_block && first < per_block + 2_000, "{took:?}");
    assert!(again < 2_000, "{took:?}");
}
