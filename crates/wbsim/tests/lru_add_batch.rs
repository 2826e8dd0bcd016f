//! LRU-add batching (model/mm/swap.rs, mm/swap.c): order-0 buffered writes
//! into new pages are not all alike; the one that fills the CPU's
//! folio_batch (every FOLIO_BATCH_SIZE-th new folio) moves the batch to the
//! LRU and takes longer, so a 4 KiB writer's p99 stands above its p50.

mod common;

use std::rc::Rc;

use sim::{Sim, Time, SEC};
use wbsim::model::block::DeviceProfile;
use wbsim::model::fs::ext4::Ext4;
use wbsim::model::fs::read_write::{create_file, vfs_write, IoFlags};
use wbsim::model::init::MachineConfig;
use wbsim::model::machine::Machine;
use wbsim::model::mm::page_writeback::TaskDirty;
use wbsim::model::mm::swap::{folio_add_lru, FOLIO_BATCH_SIZE, LRU_ADD_FOLIO_NS, LRU_DRAIN_NS};

#[test]
fn every_31st_new_4k_folio_drains_the_batch() {
    let sim = Sim::new(1);
    let (m, sb) = common::mounted(
        &sim,
        MachineConfig::new(2, 24 << 30),
        DeviceProfile::nvme_dc(),
        Rc::new(Ext4::default()),
    );
    let f = create_file(&m, &sb);
    let n = 31 * 100;
    let m2 = m.clone();
    let h = sim.spawn("writer", async move {
        let mut task = TaskDirty::default();
        let mut lat: Vec<Time> = Vec::new();
        for i in 0..n {
            let t0 = m2.now();
            vfs_write(&m2, &mut task, &f, i * 4096, 4096, IoFlags::default())
                .await
                .unwrap();
            lat.push(m2.now() - t0);
        }
        lat
    });
    sim.run_until(10 * SEC).unwrap();
    let lat = h.result().expect("writer finished");
    let mut sorted = lat.clone();
    sorted.sort_unstable();
    let p50 = sorted[sorted.len() / 2];
    let p99 = sorted[sorted.len() * 99 / 100];
    let drain = LRU_DRAIN_NS + FOLIO_BATCH_SIZE * LRU_ADD_FOLIO_NS;
    // One write in 31 (3.2%) pays the drain: p99 is the median plus it.
    assert_eq!(p99 - p50, drain, "p50 {p50} p99 {p99}");
    let slow = lat.iter().filter(|&&l| l >= p50 + drain).count() as u64;
    assert_eq!(slow, n / FOLIO_BATCH_SIZE, "slow writes");
}

/// `folio_add_lru` alone: the 31st order-0 folio pays the drain of the
/// batch; a large folio drains what is pending with itself.
#[test]
fn every_31st_small_folio_pays_the_drain() {
    let sim = Sim::new(1);
    let m = Machine::new(&sim, MachineConfig::new(1, 1 << 30)).unwrap();
    let mm = m.mm();
    let costs: Vec<Time> = (0..62).map(|_| folio_add_lru(mm, 1, 0)).collect();
    let drain = LRU_DRAIN_NS + 31 * LRU_ADD_FOLIO_NS;
    for (i, c) in costs.iter().enumerate() {
        let want = if i % 31 == 30 { drain } else { 0 };
        assert_eq!(*c, want, "folio {i}");
    }
    // Five pending, then a large folio: it drains them with itself.
    for _ in 0..5 {
        assert_eq!(folio_add_lru(mm, 1, 0), 0);
    }
    assert_eq!(folio_add_lru(mm, 0, 1), LRU_DRAIN_NS + 6 * LRU_ADD_FOLIO_NS);
    assert_eq!(
        folio_add_lru(mm, 0, 2),
        2 * (LRU_DRAIN_NS + LRU_ADD_FOLIO_NS)
    );
    // 40 at once: one drain of 31, nine left.
    assert_eq!(folio_add_lru(mm, 40, 0), drain);
    assert_eq!(folio_add_lru(mm, 22, 0), drain);
}
