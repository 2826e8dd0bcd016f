//! Known-answer tests of `struct semaphore` (model/kernel/locking/semaphore.rs):
//! FIFO handoff, sleeping (no CPU) while waiting, trylock, counting, lock_stat.

use std::cell::RefCell;
use std::rc::Rc;

use sim::{Sim, TaskId, Time, MSEC, USEC};
use wbsim::model::kernel::locking::{LockStats, Semaphore};
use wbsim::model::kernel::sched::{CgroupId, Sched, SchedParams};

type Log = Rc<RefCell<Vec<(String, Time)>>>;

fn machine(cpus: usize) -> (Sim, Sched, LockStats) {
    let sim = Sim::new(1);
    let sched = Sched::new(&sim, SchedParams::for_cpus(cpus));
    (sim, sched, LockStats::new())
}

/// A task that arrives at `at`, downs the semaphore, holds it for `hold`
/// (sleeping), and logs when it got it.
fn holder(sched: &Sched, sem: &Semaphore, log: &Log, name: &str, at: Time, hold: Time) -> TaskId {
    let (sim, sem, log, n) = (
        sched.sim().clone(),
        sem.clone(),
        log.clone(),
        name.to_string(),
    );
    sched
        .spawn(name, CgroupId::ROOT, 0, async move {
            sim.sleep_until(at).await;
            let g = sem.down().await;
            log.borrow_mut().push((n, sim.now()));
            sim.sleep(hold).await;
            drop(g);
        })
        .id()
}

#[test]
fn binary_semaphore_hands_over_in_fifo_order() {
    let (sim, sched, stats) = machine(4);
    let sem = Semaphore::new(stats.class("agf"), &sched, 1);
    let log: Log = Rc::new(RefCell::new(Vec::new()));
    // t3 arrives before t2 in time but after t1: the order is arrival order.
    holder(&sched, &sem, &log, "t0", 0, MSEC);
    holder(&sched, &sem, &log, "t1", 10 * USEC, 100 * USEC);
    holder(&sched, &sem, &log, "t3", 20 * USEC, 100 * USEC);
    holder(&sched, &sem, &log, "t2", 30 * USEC, 100 * USEC);
    sim.run().unwrap();
    assert_eq!(
        log.borrow().clone(),
        vec![
            ("t0".to_string(), 0),
            ("t1".to_string(), MSEC),
            ("t3".to_string(), 1100 * USEC),
            ("t2".to_string(), 1200 * USEC),
        ]
    );
    let st = stats.get("agf").unwrap();
    assert_eq!(st.write.acquisitions, 4);
    assert_eq!(st.write.contentions, 3);
    assert_eq!(st.write.sleeps, 3);
    // Waits 990, 1080, 1170 us.
    assert_eq!(st.write.wait_total_ns, 3240 * USEC);
    assert_eq!(st.write.hold_total_ns, 1300 * USEC);
    assert_eq!(sem.count(), 1);
}

#[test]
fn a_waiter_sleeps_without_cpu_until_up_and_a_late_trylock_cannot_steal() {
    let (sim, sched, stats) = machine(1);
    let sem = Semaphore::new(stats.class("s"), &sched, 1);
    let log: Log = Rc::new(RefCell::new(Vec::new()));
    holder(&sched, &sem, &log, "owner", 0, 500 * USEC);
    let waiter = holder(&sched, &sem, &log, "waiter", 1, 100 * USEC);
    // At the moment of the up(), a trylock must fail: the unit went to the
    // waiter directly (__up sets waiter->up, the count stays 0).
    let (s2, sem2, log2) = (sim.clone(), sem.clone(), log.clone());
    sched.spawn("late", CgroupId::ROOT, 0, async move {
        s2.sleep_until(500 * USEC).await;
        let got = sem2.down_trylock().is_some();
        log2.borrow_mut()
            .push((format!("late trylock {got}"), s2.now()));
    });
    sim.run().unwrap();
    let l = log.borrow().clone();
    assert_eq!(l[0], ("owner".to_string(), 0));
    assert_eq!(l[1], ("waiter".to_string(), 500 * USEC));
    assert_eq!(l[2], ("late trylock false".to_string(), 500 * USEC));
    // The waiter used no CPU while it waited (no spinning).
    assert_eq!(sched.task_stats(waiter).run_ns, 0);
    assert_eq!(sched.task_stats(waiter).wait_ns, 0);
    assert_eq!(sem.count(), 1);
    assert_eq!(sem.nr_waiters(), 0);
}

#[test]
fn counting_semaphore_admits_count_holders_and_trylock_fails_at_zero() {
    let (sim, sched, stats) = machine(4);
    let sem = Semaphore::new(stats.class("c"), &sched, 2);
    let log: Log = Rc::new(RefCell::new(Vec::new()));
    holder(&sched, &sem, &log, "a", 0, MSEC);
    holder(&sched, &sem, &log, "b", 0, 2 * MSEC);
    holder(&sched, &sem, &log, "c", USEC, MSEC);
    let (s2, sem2, log2) = (sim.clone(), sem.clone(), log.clone());
    sched.spawn("try", CgroupId::ROOT, 0, async move {
        s2.sleep_until(2 * USEC).await;
        let got = sem2.down_trylock().is_some();
        log2.borrow_mut().push((format!("try {got}"), s2.now()));
    });
    sim.run().unwrap();
    assert_eq!(
        log.borrow().clone(),
        vec![
            ("a".to_string(), 0),
            ("b".to_string(), 0),
            ("try false".to_string(), 2 * USEC),
            ("c".to_string(), MSEC),
        ]
    );
    assert_eq!(sem.count(), 2);
    assert_eq!(stats.get("c").unwrap().write.contentions, 1);
}
