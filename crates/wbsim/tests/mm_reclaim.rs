//! Memory reclaim (mm/vmscan.rs, mm/page_alloc.rs): a page cache larger than
//! memory wakes kswapd and, for allocations that outrun it, direct reclaim;
//! a writer that outruns the flusher fills memory with dirty pages and
//! reclaim throttles on writeback.

mod common;

use std::rc::Rc;

use sim::{Sim, SEC};
use wbsim::model::block::DeviceProfile;
use wbsim::model::fs::ext4::Ext4;
use wbsim::model::fs::read_write::{create_file, vfs_read, vfs_write, IoFlags};
use wbsim::model::init::MachineConfig;
use wbsim::model::machine::Machine;
use wbsim::model::mm::page_writeback::TaskDirty;

fn machine(
    sim: &Sim,
    cfg: MachineConfig,
    bw: u64,
) -> (Rc<Machine>, Rc<wbsim::model::fs::vfs::SuperBlock>) {
    let mut prof = DeviceProfile::nvme_dc();
    prof.write_bw_bytes_per_sec = bw;
    let (m, sb) = common::mounted(sim, cfg, prof, Rc::new(Ext4::default()));
    (m, sb)
}

#[test]
fn page_cache_larger_than_memory_wakes_kswapd_then_direct_reclaim() {
    let sim = Sim::new(1);
    let (m, sb) = machine(&sim, MachineConfig::new(2, 1 << 30), 1 << 30);
    let f = create_file(&m, &sb);
    let total = 3u64 << 30;
    // Write 3 GiB (three times memory) in 1 MiB writes, then read it back
    // in 64 MiB reads: each read allocates 16384 pages at once, more than
    // the gap between the low and min watermarks.
    let m2 = m.clone();
    let done = sim.spawn("writer-reader", async move {
        let mut task = TaskDirty::default();
        let mut pos = 0;
        while pos < total {
            vfs_write(&m2, &mut task, &f, pos, 1 << 20, IoFlags::default())
                .await
                .unwrap();
            pos += 1 << 20;
        }
        let after_write = m2.reclaim_stats();
        let mut pos = 0;
        while pos < total {
            vfs_read(&m2, &f, pos, 64 << 20, IoFlags::default())
                .await
                .unwrap();
            pos += 64 << 20;
        }
        after_write
    });
    sim.run_until(120 * SEC).unwrap();
    let after_write = done.result().expect("writer-reader finished");
    let st = m.reclaim_stats();
    let vm = m.vm_counters();
    let wm = m.watermarks();
    eprintln!("{wm:?}\nafter write {after_write:?}\nend {st:?}");
    // 1 GiB: min_free_kbytes 4096 -> min 1024 pages; gap max(256, 262).
    assert_eq!((wm.min, wm.low, wm.high), (1024, 1286, 1548));
    // Writing three times memory: kswapd kept free memory up by itself.
    assert!(after_write.pageoutrun > 0 && after_write.pgsteal_kswapd > 0);
    assert!(after_write.pgsteal_kswapd > (1 << 30) / 4096);
    // The big reads' allocations fell below min: direct reclaim.
    assert!(st.allocstall > 0 && st.pgsteal_direct > 0, "{st:?}");
    assert!(vm.free_pages() > 0);
    assert!(m.violations().is_empty(), "{:?}", m.violations());
}

#[test]
fn writer_outrunning_the_flusher_is_throttled_by_reclaim() {
    let sim = Sim::new(1);
    let mut cfg = MachineConfig::new(2, 1 << 30);
    // Dirty limits above memory: balance_dirty_pages never throttles, so
    // only reclaim holds the writer back. Background writeback runs from
    // 64 MiB on.
    cfg.dirty.set_dirty_bytes(4 << 30).unwrap();
    cfg.dirty.set_dirty_background_bytes(64 << 20).unwrap();
    let (m, sb) = machine(&sim, cfg, 200 << 20);
    let f = create_file(&m, &sb);
    let m2 = m.clone();
    let done = sim.spawn("writer", async move {
        let mut task = TaskDirty::default();
        let mut pos = 0;
        while pos < (2u64 << 30) {
            vfs_write(&m2, &mut task, &f, pos, 1 << 20, IoFlags::default())
                .await
                .unwrap();
            pos += 1 << 20;
        }
        task.pauses
    });
    sim.run_until(60 * SEC).unwrap();
    let pauses = done.result().expect("writer finished");
    let st = m.reclaim_stats();
    eprintln!("{st:?} pauses {pauses}");
    assert_eq!(pauses, 0, "balance_dirty_pages must not be what throttles");
    // The flusher keeps every dirty page queued, so reclaim meets pages
    // under writeback, marks them, meets them again (nr_immediate) and
    // sleeps in reclaim_throttle(VMSCAN_THROTTLE_WRITEBACK).
    assert!(st.nr_writeback_seen > 0 && st.nr_immediate > 0, "{st:?}");
    assert!(st.throttled[0] > 0, "no VMSCAN_THROTTLE_WRITEBACK: {st:?}");
    // Each such sleep ends on writeback progress or at HZ/10.
    assert!(st.throttled_ns[0] <= st.throttled[0] * 100_000_000);
    assert!(st.allocstall > 0, "{st:?}");
    assert!(m.violations().is_empty(), "{:?}", m.violations());
}

#[test]
fn reclaim_wakes_the_flusher_when_it_meets_only_dirty_pages() {
    let sim = Sim::new(1);
    let mut cfg = MachineConfig::new(2, 1 << 30);
    // Neither the dirty limits nor periodic writeback start the flusher:
    // only reclaim's wakeup_flusher_threads(WB_REASON_VMSCAN) can.
    cfg.dirty.set_dirty_bytes(4 << 30).unwrap();
    cfg.dirty.set_dirty_background_bytes(4 << 30).unwrap();
    cfg.dirty.dirty_writeback_centisecs = 0;
    let (m, sb) = machine(&sim, cfg, 1 << 30);
    let f = create_file(&m, &sb);
    let m2 = m.clone();
    let done = sim.spawn("writer", async move {
        let mut task = TaskDirty::default();
        let mut pos = 0;
        while pos < (2u64 << 30) {
            vfs_write(&m2, &mut task, &f, pos, 1 << 20, IoFlags::default())
                .await
                .unwrap();
            pos += 1 << 20;
        }
    });
    sim.run_until(60 * SEC).unwrap();
    assert!(done.is_finished(), "writer stuck");
    let st = m.reclaim_stats();
    eprintln!("{st:?}");
    assert!(st.nr_dirty_seen > 0 && st.flusher_wakeups > 0, "{st:?}");
    assert!(m.violations().is_empty(), "{:?}", m.violations());
}
