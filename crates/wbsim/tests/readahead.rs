//! Readahead on the buffered read path (mm/readahead.rs, fs/read_write.rs):
//! a sequential reader's window ramps up to the bdi's `ra_pages` (btrfs
//! raises it to 4 MiB), the next window is read while the reader copies
//! the current one, and folios under read are charged but cannot be
//! reclaimed, so readers whose windows in flight exceed their memcg's
//! memory.high are penalised (`mem_cgroup_handle_over_high`).

mod common;

use std::rc::Rc;

use sim::{Sim, SEC};
use wbsim::model::fs::read_write::{create_file_in, vfs_read, IoFlags};
use wbsim::model::machine::Machine;
use wbsim::model::mm::memcontrol::mem_cgroup_css_online;

const MIB: u64 = 1 << 20;

fn machine(sim: &Sim, files: u64) -> (Rc<Machine>, Rc<wbsim::model::fs::vfs::SuperBlock>) {
    common::btrfs_with_preloaded_files(sim, 4, 8 << 30, files)
}

#[test]
fn a_sequential_readers_window_grows_to_ra_pages_and_runs_ahead() {
    let sim = Sim::new(1);
    let (m, sb) = machine(&sim, 1);
    assert_eq!(sb.bdi.ra_pages.get(), 1024, "btrfs: at least 4 MiB");
    let m2 = m.clone();
    let h = sim.spawn("reader", async move {
        let f = create_file_in(&m2, &sb, "subvol0");
        let mut sizes = Vec::new();
        let mut waits = 0;
        let mut pos = 0;
        while pos < 20 * MIB {
            let w0 = m2.inode_events(&f.inode).get("folio_read_wait").copied();
            vfs_read(&m2, &f, pos, 128 << 10, IoFlags::default())
                .await
                .unwrap();
            if m2.inode_events(&f.inode).get("folio_read_wait").copied() != w0 {
                waits += 1;
            }
            let ra = *f.ra.borrow();
            if sizes.last() != Some(&ra.size) {
                sizes.push(ra.size);
            }
            pos += 128 << 10;
        }
        (sizes, waits)
    });
    sim.run_until(10 * SEC).unwrap();
    let (sizes, waits) = h.result().expect("the reader finished");
    // 128 KiB reads: 128 pages first (4x the request), then 2x per window
    // up to ra_pages.
    assert_eq!(sizes, vec![128, 256, 512, 1024]);
    // 160 reads, but the reader waited for I/O only where it caught up
    // with the window being read: far fewer times.
    assert!((1..40).contains(&waits), "waited in {waits} of 160 reads");
    assert!(m.events().get("page_cache_async_ra").copied().unwrap_or(0) >= 5);
}

/// Runs `readers` readers of their own 20 MiB files in a memcg with
/// memory.high `high`; returns (penalty sleeps, pages reclaimed).
fn readers_under_high(readers: u64, high: u64) -> (u64, u64) {
    let sim = Sim::new(1);
    let (m, sb) = machine(&sim, readers);
    let cg = m.sched().add_cgroup("bad", None).unwrap();
    let memcg = mem_cgroup_css_online(m.mm(), cg, "bad", Some(high), None);
    for i in 0..readers {
        let (m2, sb2) = (m.clone(), sb.clone());
        m.sched().spawn(&format!("reader{i}"), cg, 0, async move {
            let f = create_file_in(&m2, &sb2, &format!("subvol{i}"));
            common::read_sequentially(&m2, &f, 20 * MIB, 128 << 10).await;
        });
    }
    sim.run_until(60 * SEC).unwrap();
    let ev = memcg.events();
    (ev.penalty_sleeps, ev.pgsteal)
}

#[test]
fn readahead_in_flight_beyond_memory_high_is_penalised() {
    // 16 readers with windows of up to 4 MiB in flight each (locked,
    // unreclaimable) against a 16 MiB memory.high: reclaim cannot bring
    // the memcg back under it, so readers sleep the penalty.
    let (sleeps, stolen) = readers_under_high(16, 16 * MIB);
    assert!(sleeps > 0, "penalty sleeps {sleeps}");
    assert!(stolen > 0);
    // The same readers under a memory.high above all they read: none.
    let (sleeps, stolen) = readers_under_high(16, 512 * MIB);
    assert_eq!((sleeps, stolen), (0, 0));
}
