//! Memory cgroup charging and limits (mm/memcontrol.rs, the memcg side of
//! mm/vmscan.rs): page cache charged to the reader's memcg, memory.high
//! enforced by reclaim on the return to user space, memory.max by reclaim
//! at charge time, the penalty sleep with its cap, and memory.pressure.

mod common;

use std::rc::Rc;

use sim::{Sim, Time, MSEC, SEC};
use wbsim::model::block::DeviceProfile;
use wbsim::model::fs::ext4::Ext4;
use wbsim::model::fs::read_write::{create_file, vfs_read, IoFlags};
use wbsim::model::init::MachineConfig;
use wbsim::model::kernel::locking::{LockStats, Mutex};
use wbsim::model::kernel::sched::CgroupId;
use wbsim::model::machine::Machine;
use wbsim::model::mm::memcontrol::{
    calculate_high_delay, calculate_overage, mem_cgroup_css_online, mem_cgroup_handle_over_high,
    mem_cgroup_try_charge, resume_user_mode_over_high, MEMCG_CHARGE_BATCH,
};
use wbsim::model::mm::vmstat::PAGE_SIZE;

const MIB: u64 = 1 << 20;

#[test]
fn high_delay_is_the_kernels_quadratic_penalty() {
    // Twice the limit: overage 1.0 (1 << 20), penalty 64 * HZ jiffies per
    // batch (before the 2 s cap the caller applies).
    assert_eq!(calculate_overage(2000, 1000), 1 << 20);
    assert_eq!(
        calculate_high_delay(MEMCG_CHARGE_BATCH, 1 << 20, 1000),
        64_000
    );
    // 1% over: 10485 -> 10485^2 * 1000 >> 34 = 6 jiffies (under HZ/100: no sleep).
    assert_eq!(calculate_overage(1010, 1000), 10_485);
    assert_eq!(calculate_high_delay(MEMCG_CHARGE_BATCH, 10_485, 1000), 6);
    assert_eq!(calculate_overage(900, 1000), 0);
    assert_eq!(calculate_high_delay(64, 0, 1000), 0);
}

fn machine(sim: &Sim) -> (Rc<Machine>, Rc<wbsim::model::fs::vfs::SuperBlock>) {
    let (m, sb) = common::mounted(
        sim,
        MachineConfig::new(2, 4 << 30),
        DeviceProfile::nvme_dc(),
        Rc::new(Ext4::default()),
    );
    (m, sb)
}

/// Reads `total` bytes in 128 KiB reads in a task of a cgroup with the
/// given limits; returns the machine and the memcg's id.
fn read_in_memcg(high: Option<u64>, max: Option<u64>, total: u64) -> (Rc<Machine>, u64) {
    let sim = Sim::new(1);
    let (m, sb) = machine(&sim);
    let cg = m.sched().add_cgroup("bad", None).unwrap();
    let memcg = mem_cgroup_css_online(m.mm(), cg, "bad", high, max);
    let f = create_file(&m, &sb);
    let m2 = m.clone();
    let h = m.sched().spawn("reader", cg, 0, async move {
        let mut pos = 0;
        let mut peak = 0;
        while pos < total {
            vfs_read(&m2, &f, pos, 128 << 10, IoFlags::default())
                .await
                .unwrap();
            peak = peak.max(m2.mm().memcgs().get(2).unwrap().usage_pages());
            pos += 128 << 10;
        }
        peak
    });
    sim.run_until(60 * SEC).unwrap();
    let peak = h.result().expect("reader finished");
    if let Some(max) = max {
        assert!(peak <= max / PAGE_SIZE, "peak {peak} over memory.max");
    }
    (m, memcg.id)
}

#[test]
fn memory_high_is_enforced_by_reclaim_on_return_to_user_space() {
    let (m, id) = read_in_memcg(Some(64 * MIB), None, 512 * MIB);
    let memcg = m.mm().memcgs().get(id).unwrap();
    let usage = memcg.usage_pages();
    let ev = memcg.events();
    eprintln!("usage {usage} {ev:?} psi {:?}", memcg.psi(m.now()));
    // Within 1.25% + one read of the limit (the no-penalty band).
    let high = 64 * MIB / PAGE_SIZE;
    assert!(usage <= high + high / 80 + 32, "usage {usage}");
    // Everything read beyond the limit was reclaimed from this memcg.
    assert!(ev.pgsteal >= (512 - 64 - 2) * MIB / PAGE_SIZE, "{ev:?}");
    assert!(ev.high > 0);
    // One reader: reclaim always catches up, no penalty sleep.
    assert_eq!(ev.penalty_sleeps, 0);
    // Reclaim is a memory stall: memory.pressure "some" grew; with the only
    // task stalled, "full" equals it.
    let psi = memcg.psi(m.now());
    assert!(psi.some_ns > 0 && psi.full_ns == psi.some_ns, "{psi:?}");
    // Counters are hierarchical: the root holds its child's charge.
    assert_eq!(m.mm().memcgs().root().usage_pages(), usage);
}

#[test]
fn memory_max_reclaims_at_charge_time() {
    let (m, id) = read_in_memcg(None, Some(32 * MIB), 256 * MIB);
    let memcg = m.mm().memcgs().get(id).unwrap();
    let ev = memcg.events();
    assert!(ev.max > 0 && ev.oom == 0, "{ev:?}");
    assert!(ev.pgsteal >= (256 - 32 - 1) * MIB / PAGE_SIZE, "{ev:?}");
}

#[test]
fn over_high_with_nothing_to_reclaim_sleeps_the_capped_penalty() {
    let sim = Sim::new(1);
    let (m, sb) = machine(&sim);
    let cg = m.sched().add_cgroup("bad", None).unwrap();
    let memcg = mem_cgroup_css_online(m.mm(), cg, "bad", Some(16 * MIB), None);
    // Register the filesystems with reclaim (a read does), then charge
    // twice the limit with nothing on the memcg's LRU.
    let f = create_file(&m, &sb);
    let (m2, mc) = (m.clone(), memcg.clone());
    let h = m.sched().spawn("t", cg, 0, async move {
        vfs_read(&m2, &f, 0, 4096, IoFlags::default())
            .await
            .unwrap();
        // The page read is the file's, charged to "bad"; drop it from the
        // count so that only the artificial charge remains.
        mc.charge(2 * 16 * MIB / PAGE_SIZE, None);
        let t0 = m2.now();
        let slept = mem_cgroup_handle_over_high(m2.mm(), &mc, MEMCG_CHARGE_BATCH).await;
        (slept, m2.now() - t0)
    });
    sim.run_until(10 * SEC).unwrap();
    let (slept, _) = h.result().unwrap();
    // Reclaim freed the one page, then nothing: MEMCG_MAX_HIGH_DELAY_JIFFIES
    // (2 s), ended by the timer wheel at its level's granularity (< 1/8).
    assert!((2 * SEC..2 * SEC + SEC / 4).contains(&slept), "{slept}");
    assert_eq!(memcg.events().penalty_sleeps, 1);
    assert!(memcg.psi(m.now()).some_ns >= 2 * SEC);
}

/// Writes `total` bytes in 1 MiB writes from a task of a memcg with
/// memory.max `max`: (pauses taken, peak dirty+writeback pages of the
/// memcg, peak of the machine's, the machine's freerun ceiling at the end).
fn write_in_memcg(max: Option<u64>, total: u64) -> (usize, u64, u64, u64) {
    use wbsim::model::fs::read_write::vfs_write;
    use wbsim::model::mm::memcontrol::mem_cgroup_wb_stats;
    use wbsim::model::mm::page_writeback::balance::TaskDirty;
    let sim = Sim::new(1);
    let (m, sb) = machine(&sim);
    let cg = m.sched().add_cgroup("w", None).unwrap();
    let memcg = mem_cgroup_css_online(m.mm(), cg, "w", None, max);
    let f = create_file(&m, &sb);
    let m2 = m.clone();
    let h = m.sched().spawn("writer", cg, 0, async move {
        let mut task = TaskDirty::default();
        let (mut pos, mut peak_m, mut peak_g) = (0, 0, 0);
        while pos < total {
            vfs_write(&m2, &mut task, &f, pos, MIB, IoFlags::default())
                .await
                .unwrap();
            let (d, w) = mem_cgroup_wb_stats(&memcg);
            peak_m = peak_m.max(d + w);
            let vm = m2.mm().vm();
            peak_g = peak_g.max(vm.nr_file_dirty + vm.nr_writeback);
            pos += MIB;
        }
        (peak_m, peak_g)
    });
    sim.run_until(60 * SEC).unwrap();
    let (peak_m, peak_g) = h.result().expect("writer finished");
    let ceiling = m.mm().global_thresholds().freerun_ceiling();
    (m.mm().pauses().len(), peak_m, peak_g, ceiling)
}

#[test]
fn memcg_dirty_domain_throttles_a_writer_at_memory_max() {
    // 64 MiB memory.max (16384 pages): the memcg domain's threshold is 20%
    // of ~16k pages, while the 4 GiB machine's freerun ceiling is ~150k.
    let (pauses, peak_m, peak_g, ceiling) = write_in_memcg(Some(64 * MIB), 512 * MIB);
    assert!(pauses > 0, "the memcg writer was never paused");
    assert!(peak_g < ceiling / 4, "global {peak_g} vs ceiling {ceiling}");
    // Held near the memcg's own limit (20% of 16384 = 3276 pages), far
    // below memory.max.
    assert!(peak_m < 16_384 / 2, "memcg dirty peaked at {peak_m} pages");

    // No limit, plenty of clean cache: 512 MiB stays under the global
    // freerun ceiling, no pause, as with the global domain only.
    let (pauses, peak_m, peak_g, ceiling) = write_in_memcg(None, 512 * MIB);
    assert_eq!(pauses, 0, "unlimited memcg writer paused");
    assert!(peak_m > 16_384, "dirty {peak_m}: not left to grow");
    assert!(peak_g < ceiling);
}

/// A task that owes more than `MEMCG_CHARGE_BATCH` pages to memory.high
/// settles it inside the charge (`try_charge_memcg` ->
/// `mem_cgroup_handle_over_high`), with the caller's locks held: with
/// nothing to reclaim, it sleeps the capped penalty (2 s) holding a mutex,
/// and a second task waits that long for the mutex. A charge that leaves it
/// owing one batch only (64 pages) is settled on the return to user space,
/// after the lock is dropped.
fn lock_wait_behind_over_high_charges(charges: u64) -> (Time, Time) {
    let sim = Sim::new(1);
    let (m, sb) = machine(&sim);
    let cg = m.sched().add_cgroup("bad", None).unwrap();
    let memcg = mem_cgroup_css_online(m.mm(), cg, "bad", Some(16 * MIB), None);
    let lock = Mutex::new(LockStats::new().class("test_lock"), m.sched());
    let f = create_file(&m, &sb);
    let (m2, mc, l2) = (m.clone(), memcg.clone(), lock.clone());
    let holder = m.sched().spawn("holder", cg, 0, async move {
        // Register the filesystems with reclaim (a read does), then charge
        // the memcg twice its limit with nothing on its LRU (overage 1.0).
        vfs_read(&m2, &f, 0, 4096, IoFlags::default())
            .await
            .unwrap();
        resume_user_mode_over_high(m2.mm(), &mc).await;
        mc.charge(2 * 16 * MIB / PAGE_SIZE, None);
        let g = l2.lock().await;
        let t0 = m2.now();
        for _ in 0..charges {
            mem_cgroup_try_charge(m2.mm(), &mc, 32, true).await.unwrap();
        }
        let in_charge = m2.now() - t0;
        drop(g);
        // The return to user space settles the rest.
        resume_user_mode_over_high(m2.mm(), &mc).await;
        in_charge
    });
    let (m3, l3) = (m.clone(), lock.clone());
    let waiter = m.sched().spawn("waiter", CgroupId::ROOT, 0, async move {
        m3.sched().sim().sleep(MSEC).await;
        let t0 = m3.now();
        let _g = l3.lock().await;
        m3.now() - t0
    });
    sim.run_until(20 * SEC).unwrap();
    (holder.result().unwrap(), waiter.result().unwrap())
}

#[test]
fn over_high_by_more_than_a_batch_is_settled_inside_the_charge_under_the_callers_lock() {
    // 32-page charges over high go through the CPU's stock: the first
    // charges a batch of 64 (64 owed) and stocks 32, the second is served
    // from the stock (no check), the third refills it: 2 x 64 owed >
    // MEMCG_CHARGE_BATCH, settled inside that charge.
    let (in_charge, waited) = lock_wait_behind_over_high_charges(3);
    assert!(in_charge >= 2 * SEC, "in charge {in_charge}");
    assert!(waited >= 2 * SEC - 2 * MSEC, "waiter {waited}");
    // Two charges: one batch owed, not more: nothing inside the charge.
    let (in_charge, waited) = lock_wait_behind_over_high_charges(2);
    assert!(in_charge < MSEC, "in charge {in_charge}");
    assert!(waited < MSEC, "waiter {waited}");
}

/// Concurrent reclaimers of one memcg isolate folios under its lruvec's
/// `lru_lock` (a spinlock, one hold per SWAP_CLUSTER_MAX folios): eight
/// readers over memory.high on four CPUs contend for it and spin, and the
/// holds are as many as the batches of pages reclaimed.
#[test]
fn memcg_reclaimers_isolate_under_the_lruvec_lru_lock_and_spin_on_it() {
    let sim = Sim::new(1);
    let (m, sb) = common::mounted(
        &sim,
        MachineConfig::new(4, 4 << 30),
        DeviceProfile::nvme_dc(),
        Rc::new(Ext4::default()),
    );
    let cg = m.sched().add_cgroup("bad", None).unwrap();
    let memcg = mem_cgroup_css_online(m.mm(), cg, "bad", Some(16 * MIB), None);
    for _ in 0..8 {
        let f = create_file(&m, &sb);
        let m2 = m.clone();
        m.sched().spawn("reader", cg, 0, async move {
            common::read_sequentially(&m2, &f, 32 * MIB, 128 << 10).await;
        });
    }
    sim.run_until(60 * SEC).unwrap();
    let ev = memcg.events();
    // 8 x 32 MiB read through a 16 MiB memcg: most of it reclaimed.
    assert!(ev.pgsteal >= (256 - 16 - 8) * MIB / PAGE_SIZE, "{ev:?}");
    let lock = m.kernel().locks().class("lruvec->lru_lock").stats().write;
    assert!(lock.acquisitions >= ev.pgscan / 32, "{lock:?} {ev:?}");
    assert!(lock.contentions > 0, "{lock:?}");
    assert_eq!(lock.sleeps, 0, "a spinlock never sleeps");
}

/// A memcg reclaimer's freed folios count against the memcg until its pass
/// has spent its CPU (`shrink_folio_list` uncharges them in batches at the
/// end of their processing): a second task charging while the first is in
/// its pass still finds the memcg at memory.max and reclaims for itself,
/// instead of taking the room the first pass is making.
#[test]
fn folios_being_reclaimed_stay_charged_until_the_pass_ends() {
    let sim = Sim::new(1);
    let (m, sb) = machine(&sim);
    let cg = m.sched().add_cgroup("bad", None).unwrap();
    let limit = 16 * MIB;
    let memcg = mem_cgroup_css_online(m.mm(), cg, "bad", None, Some(limit));
    // Fill the memcg to its limit with clean, reclaimable page cache.
    let f = create_file(&m, &sb);
    let m2 = m.clone();
    m.sched().spawn("fill", cg, 0, async move {
        common::read_sequentially(&m2, &f, limit, 128 << 10).await;
    });
    sim.run_until(SEC).unwrap();
    assert_eq!(memcg.usage_pages(), limit / PAGE_SIZE);
    let full = memcg.events();
    // Two tasks charge 32 pages each at the same instant.
    let chargers: Vec<_> = (0..2)
        .map(|i| {
            let (m3, mc) = (m.clone(), memcg.clone());
            m.sched().spawn(&format!("charger{i}"), cg, 0, async move {
                let t0 = m3.now();
                mem_cgroup_try_charge(m3.mm(), &mc, 32, true).await.unwrap();
                m3.now() - t0
            })
        })
        .collect();
    sim.run_until(2 * SEC).unwrap();
    let ev = memcg.events();
    // Each reclaimed its own room, once: both charges took a pass's time.
    // (Before, the second fit at once into the room the first pass had
    // uncharged before spending its CPU, and the first had to reclaim
    // again.)
    for c in &chargers {
        let t = c.result().unwrap();
        assert!(t > 0, "a charge fit at once");
    }
    assert_eq!(ev.max - full.max, 2, "{full:?} -> {ev:?}");
    assert_eq!(ev.pgsteal - full.pgsteal, 64, "{full:?} -> {ev:?}");
}
