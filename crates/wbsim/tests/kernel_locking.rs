//! Known-answer tests of the lock primitives (model/kernel/locking): rwsem
//! queueing, batch reader wakeup, handoff, optimistic spinning as CPU time,
//! mutex FIFO and handoff, spinlock CPU cost, lock_stat counts, deadlocks.

use std::cell::RefCell;
use std::rc::Rc;

use sim::{Sim, Time, MSEC, USEC};
use wbsim::model::kernel::locking::rwsem::{rwsem_rspin_threshold_ns, MAX_READERS_WAKEUP};
use wbsim::model::kernel::locking::{
    LockKind, LockStats, Mutex, RwSemaphore, RwsemOwner, RwsemParams, SpinLock,
};
use wbsim::model::kernel::sched::{CgroupId, Sched, SchedParams};

type Log = Rc<RefCell<Vec<(String, Time)>>>;

fn machine(cpus: usize) -> (Sim, Sched, LockStats) {
    let sim = Sim::new(1);
    let sched = Sched::new(&sim, SchedParams::for_cpus(cpus));
    (sim, sched, LockStats::new())
}

fn log() -> Log {
    Rc::new(RefCell::new(Vec::new()))
}

fn push(log: &Log, sim: &Sim, what: &str) {
    log.borrow_mut().push((what.to_string(), sim.now()));
}

fn entries(log: &Log) -> Vec<(String, Time)> {
    log.borrow().clone()
}

/// A reader that arrives at `at`, takes the lock for read and sleeps `hold`
/// (not running while holding), logging its grant time.
fn sleeping_reader(sched: &Sched, sem: &RwSemaphore, log: &Log, name: &str, at: Time, hold: Time) {
    let (sim, sem, log, n) = (
        sched.sim().clone(),
        sem.clone(),
        log.clone(),
        name.to_string(),
    );
    sched.spawn(name, CgroupId::ROOT, 0, async move {
        sim.sleep_until(at).await;
        let g = sem.down_read().await;
        push(&log, &sim, &n);
        sim.sleep(hold).await;
        drop(g);
    });
}

fn sleeping_writer(sched: &Sched, sem: &RwSemaphore, log: &Log, name: &str, at: Time, hold: Time) {
    let (sim, sem, log, n) = (
        sched.sim().clone(),
        sem.clone(),
        log.clone(),
        name.to_string(),
    );
    sched.spawn(name, CgroupId::ROOT, 0, async move {
        sim.sleep_until(at).await;
        let g = sem.down_write().await;
        push(&log, &sim, &n);
        sim.sleep(hold).await;
        drop(g);
    });
}

#[test]
fn params_follow_the_kernel_formulas() {
    assert_eq!(RwsemParams::for_hz(1000).unwrap().wait_timeout_ns, 4 * MSEC);
    assert_eq!(RwsemParams::for_hz(250).unwrap().wait_timeout_ns, 4 * MSEC);
    // DIV_ROUND_UP(100, 250) = 1 jiffy = 10 ms.
    assert_eq!(RwsemParams::for_hz(100).unwrap().wait_timeout_ns, 10 * MSEC);
    // DIV_ROUND_UP(300, 250) = 2 jiffies of 3.333 ms.
    assert_eq!(RwsemParams::for_hz(300).unwrap().wait_timeout_ns, 6_666_666);
    assert!(RwsemParams::for_hz(0).is_err());
    assert_eq!(RwsemParams::default(), RwsemParams::for_hz(1000).unwrap());
    assert_eq!(rwsem_rspin_threshold_ns(0), 10 * USEC);
    assert_eq!(rwsem_rspin_threshold_ns(4), 12 * USEC);
    assert_eq!(rwsem_rspin_threshold_ns(30), 25 * USEC);
    assert_eq!(rwsem_rspin_threshold_ns(1000), 25 * USEC);
    assert_eq!(MAX_READERS_WAKEUP, 256);
}

#[test]
fn queued_writer_disables_reader_fast_path() {
    let (sim, sched, stats) = machine(4);
    let sem = RwSemaphore::new(stats.class("sem"), &sched);
    let l = log();
    sleeping_reader(&sched, &sem, &l, "r1", 0, MSEC);
    sleeping_reader(&sched, &sem, &l, "r2", 0, MSEC);
    // The writer spins on the reader-owned lock for a bounded time, then queues.
    let (s2, sem2, l2) = (sim.clone(), sem.clone(), l.clone());
    let w = sched.spawn("w", CgroupId::ROOT, 0, async move {
        s2.sleep_until(100 * USEC).await;
        let g = sem2.down_write().await;
        push(&l2, &s2, "w");
        s2.sleep(500 * USEC).await;
        drop(g);
    });
    sleeping_reader(&sched, &sem, &l, "r3", 200 * USEC, 100 * USEC);
    // A trylock while the writer is queued fails even though readers own it.
    let (s3, sem3) = (sim.clone(), sem.clone());
    let probe = sched.spawn("probe", CgroupId::ROOT, 0, async move {
        s3.sleep_until(300 * USEC).await;
        (
            sem3.down_read_trylock().is_some(),
            sem3.owner(),
            sem3.waiters(),
        )
    });
    sim.run().unwrap();
    assert_eq!(
        entries(&l),
        vec![
            ("r1".into(), 0),
            ("r2".into(), 0),
            ("w".into(), MSEC),
            ("r3".into(), 1500 * USEC),
        ]
    );
    let (ok, owner, waiters) = probe.result().unwrap();
    assert!(!ok);
    assert_eq!(owner, RwsemOwner::Readers(2));
    let kinds: Vec<LockKind> = waiters.iter().map(|w| w.1).collect();
    assert_eq!(kinds, vec![LockKind::Write, LockKind::Read]);
    // Spin on 2 readers: threshold (20 + 2)/2 = 11 us from the first check at
    // 100 us; the check at 112 us is the first past it: 12 us of CPU.
    assert_eq!(sched.task_stats(w.id()).run_ns, 12 * USEC);
    let st = stats.get("sem").unwrap();
    assert_eq!(st.write.acquisitions, 1);
    assert_eq!(st.write.sleeps, 1);
    assert_eq!(st.read.acquisitions, 3);
    assert_eq!(st.read.contentions, 1);
}

#[test]
fn grants_are_fifo_and_a_reader_wake_takes_every_queued_reader() {
    let (sim, sched, stats) = machine(4);
    let sem = RwSemaphore::new(stats.class("sem"), &sched);
    let l = log();
    sleeping_writer(&sched, &sem, &l, "w1", 0, MSEC);
    // The owner sleeps (not on a CPU): nobody spins, everyone queues in order.
    sleeping_writer(&sched, &sem, &l, "w2", 10 * USEC, MSEC);
    sleeping_reader(&sched, &sem, &l, "r1", 20 * USEC, MSEC);
    sleeping_reader(&sched, &sem, &l, "r2", 30 * USEC, MSEC);
    sleeping_writer(&sched, &sem, &l, "w3", 40 * USEC, MSEC);
    sleeping_reader(&sched, &sem, &l, "r3", 50 * USEC, MSEC);
    sim.run().unwrap();
    // w2 alone; then every queued reader (r3 too, past the queued w3: the
    // kernel's phase-fair rwsem_mark_wake()); then w3.
    assert_eq!(
        entries(&l),
        vec![
            ("w1".into(), 0),
            ("w2".into(), MSEC),
            ("r1".into(), 2 * MSEC),
            ("r2".into(), 2 * MSEC),
            ("r3".into(), 2 * MSEC),
            ("w3".into(), 3 * MSEC),
        ]
    );
    let st = stats.get("sem").unwrap();
    assert_eq!((st.write.acquisitions, st.write.contentions), (3, 2));
    assert_eq!((st.read.acquisitions, st.read.contentions), (3, 3));
    // Waits: w2 0.99 ms, w3 2.96 ms; readers 1.98, 1.97, 1.95 ms.
    assert_eq!(st.write.wait_total_ns, 990 * USEC + 2960 * USEC);
    assert_eq!(st.write.wait_max_ns, 2960 * USEC);
    assert_eq!(st.read.wait_total_ns, (1980 + 1970 + 1950) * USEC);
    assert_eq!(st.read.hold_total_ns, 3 * MSEC);
    assert_eq!(st.write.hold_total_ns, 3 * MSEC);
}

#[test]
fn batch_reader_wakeup_is_capped_at_256() {
    let (sim, sched, stats) = machine(2);
    let sem = RwSemaphore::new(stats.class("sem"), &sched);
    let l = log();
    sleeping_writer(&sched, &sem, &l, "w", 0, MSEC);
    for i in 0..300 {
        sleeping_reader(&sched, &sem, &l, &format!("r{i}"), USEC, MSEC);
    }
    sim.run_until(MSEC).unwrap();
    assert_eq!(sem.owner(), RwsemOwner::Readers(256));
    assert_eq!(sem.nr_waiters(), 44);
    sim.run().unwrap();
    let e = entries(&l);
    assert_eq!(e.iter().filter(|x| x.1 == MSEC).count(), 256);
    // The other 44 get it when the first batch has released.
    assert_eq!(e.iter().filter(|x| x.1 == 2 * MSEC).count(), 44);
    // In queue order.
    assert_eq!(e[1].0, "r0");
    assert_eq!(e[256].0, "r255");
    assert_eq!(e[257].0, "r256");
}

#[test]
fn writer_spinning_on_running_writer_gets_lock_without_sleeping() {
    let (sim, sched, stats) = machine(2);
    let sem = RwSemaphore::new(stats.class("sem"), &sched);
    let (s1, sem1, sc1) = (sim.clone(), sem.clone(), sched.clone());
    let a = sched.spawn("a", CgroupId::ROOT, 0, async move {
        let g = sem1.down_write().await;
        sc1.cpu(100 * USEC).await;
        drop(g);
        s1.now()
    });
    let (s2, sem2, sc2) = (sim.clone(), sem.clone(), sched.clone());
    let b = sched.spawn("b", CgroupId::ROOT, 0, async move {
        s2.sleep(10 * USEC).await;
        let g = sem2.down_write().await;
        let t = s2.now();
        sc2.cpu(5 * USEC).await;
        drop(g);
        t
    });
    sim.run().unwrap();
    assert_eq!(a.result(), Some(100 * USEC));
    assert_eq!(b.result(), Some(100 * USEC));
    // 90 us of spinning plus 5 us of work, all as CPU time.
    assert_eq!(sched.task_stats(b.id()).run_ns, 95 * USEC);
    let st = stats.get("sem").unwrap();
    assert_eq!(st.write.contentions, 1);
    assert_eq!(st.write.sleeps, 0);
    assert_eq!(st.write.wait_total_ns, 90 * USEC);
}

#[test]
fn writer_on_reader_owned_lock_spins_bounded_then_sleeps() {
    let (sim, sched, stats) = machine(4);
    let sem = RwSemaphore::new(stats.class("sem"), &sched);
    let l = log();
    for i in 0..4 {
        sleeping_reader(&sched, &sem, &l, &format!("r{i}"), 0, MSEC);
    }
    let mut ws = Vec::new();
    for (i, at) in [(0, 100 * USEC), (1, 200 * USEC)] {
        let (s, sem2, l2) = (sim.clone(), sem.clone(), l.clone());
        ws.push(
            sched.spawn(&format!("w{i}"), CgroupId::ROOT, 0, async move {
                s.sleep_until(at).await;
                let g = sem2.down_write().await;
                push(&l2, &s, "w");
                s.sleep(100 * USEC).await;
                drop(g);
            }),
        );
    }
    let sem3 = sem.clone();
    let s3 = sim.clone();
    let probe = sched.spawn("probe", CgroupId::ROOT, 0, async move {
        s3.sleep_until(150 * USEC).await;
        (
            sem3.is_nonspinnable(),
            sem3.nr_waiters(),
            sem3.nr_spinners(),
        )
    });
    sim.run().unwrap();
    // 4 readers: (20 + 4)/2 = 12 us limit, checked per 1 us quantum: 13 us.
    assert_eq!(sched.task_stats(ws[0].id()).run_ns, 13 * USEC);
    // The timeout set RWSEM_NONSPINNABLE: the second writer does not spin.
    assert_eq!(probe.result(), Some((true, 1, 0)));
    assert_eq!(sched.task_stats(ws[1].id()).run_ns, 0);
    let e = entries(&l);
    assert_eq!(e[4], ("w".into(), MSEC));
    assert_eq!(e[5], ("w".into(), 1100 * USEC));
    assert!(!sem.is_nonspinnable());
    assert_eq!(stats.get("sem").unwrap().write.sleeps, 2);
}

#[test]
fn handoff_after_timeout_stops_spinning_writers_from_stealing() {
    let (sim, sched, stats) = machine(4);
    let sem = RwSemaphore::new(stats.class("sem"), &sched);
    let l = log();
    // Two writers that keep stealing from each other by spinning.
    for (name, rounds) in [("a", 4), ("b", 3)] {
        let (s, sem2, sc, l2) = (sim.clone(), sem.clone(), sched.clone(), l.clone());
        sched.spawn(name, CgroupId::ROOT, 0, async move {
            for _ in 0..rounds {
                let g = sem2.down_write().await;
                push(&l2, &s, name);
                sc.cpu(MSEC).await;
                drop(g);
            }
        });
    }
    // The victim's CPU is busy (non-preemptibly) when it arrives: its first spin
    // quantum waits, which reads as need_resched(): it stops spinning and sleeps.
    let pinned = sched.add_cgroup("pinned", Some(&[3])).unwrap();
    let (s, sc) = (sim.clone(), sched.clone());
    sched.spawn("hog", pinned, 0, async move {
        s.sleep_until(490 * USEC).await;
        sc.cpu_nopreempt(30 * USEC).await;
    });
    let (s, sem2, sc, l2) = (sim.clone(), sem.clone(), sched.clone(), l.clone());
    sched.spawn("victim", pinned, 0, async move {
        s.sleep_until(500 * USEC).await;
        let g = sem2.down_write().await;
        push(&l2, &s, "victim");
        sc.cpu(100 * USEC).await;
        drop(g);
    });
    sim.run_until(4 * MSEC + 500 * USEC).unwrap();
    // Queued at 521 us: the steals at 1-4 ms are within the 4 ms timeout.
    assert!(!sem.handoff_pending());
    sim.run_until(5 * MSEC + 500 * USEC).unwrap();
    // The steal at 5 ms came after 4.521 ms: the victim requested a handoff.
    assert!(sem.handoff_pending());
    sim.run().unwrap();
    assert_eq!(
        entries(&l),
        vec![
            ("a".into(), 0),
            ("b".into(), MSEC),
            ("a".into(), 2 * MSEC),
            ("b".into(), 3 * MSEC),
            ("a".into(), 4 * MSEC),
            ("b".into(), 5 * MSEC),
            // a was spinning on b at 6 ms, but the handoff reserved the lock.
            ("victim".into(), 6 * MSEC),
            ("a".into(), 6 * MSEC + 100 * USEC),
        ]
    );
    assert!(!sem.handoff_pending());
}

#[test]
fn downgrade_lets_queued_readers_in_but_not_writers() {
    let (sim, sched, stats) = machine(2);
    let sem = RwSemaphore::new(stats.class("sem"), &sched);
    let l = log();
    let (s, sem2, l2) = (sim.clone(), sem.clone(), l.clone());
    sched.spawn("w", CgroupId::ROOT, 0, async move {
        let g = sem2.down_write().await;
        s.sleep(MSEC).await;
        let r = g.downgrade();
        push(&l2, &s, "w-downgraded");
        s.sleep(MSEC).await;
        drop(r);
    });
    sleeping_reader(&sched, &sem, &l, "r1", 10 * USEC, MSEC);
    sleeping_writer(&sched, &sem, &l, "w2", 20 * USEC, MSEC);
    sleeping_reader(&sched, &sem, &l, "r2", 30 * USEC, 500 * USEC);
    sim.run().unwrap();
    assert_eq!(
        entries(&l),
        vec![
            ("w-downgraded".into(), MSEC),
            ("r1".into(), MSEC),
            ("r2".into(), MSEC),
            ("w2".into(), 2 * MSEC),
        ]
    );
}

#[test]
fn no_priority_inheritance_starved_reader_holds_up_writer_and_readers() {
    let (sim, sched, stats) = machine(2);
    let sem = RwSemaphore::new(stats.class("sem"), &sched);
    let starved = sched.add_cgroup("starved", Some(&[0])).unwrap();
    let sc = sched.clone();
    sched.spawn("hog", starved, -20, async move { sc.cpu(100 * MSEC).await });
    let (s, sem2, sc) = (sim.clone(), sem.clone(), sched.clone());
    let reader = sched.spawn("reader", starved, 0, async move {
        let g = sem2.down_read().await;
        sc.cpu(MSEC).await;
        drop(g);
        s.now()
    });
    let (s, sem2, sc) = (sim.clone(), sem.clone(), sched.clone());
    let writer = sched.spawn("writer", CgroupId::ROOT, 0, async move {
        s.sleep(100 * USEC).await;
        let g = sem2.down_write().await;
        let t = s.now();
        sc.cpu(10 * USEC).await;
        drop(g);
        t
    });
    let (s, sem2) = (sim.clone(), sem.clone());
    let late = sched.spawn("late-reader", CgroupId::ROOT, 0, async move {
        s.sleep(200 * USEC).await;
        let _g = sem2.down_read().await;
        s.now()
    });
    sim.run().unwrap();
    let released = reader.result().unwrap();
    // The reader got the lock at once but shares CPU 0 with the hog: it waits
    // for the hog's 1.5 ms slice (2 CPUs), then runs its 1 ms.
    assert_eq!(sched.task_stats(reader.id()).wait_ns, 1500 * USEC);
    assert_eq!(released, 2500 * USEC);
    // CPU 1 sat idle, yet the writer and the late reader queued behind it
    // waited for the runnable-but-not-running holder all along.
    assert_eq!(writer.result(), Some(released));
    assert_eq!(late.result(), Some(released + 10 * USEC));
    // The writer spun (20 + 1)/2 = 10.5 us on the reader-owned lock (11 us at
    // 1 us quanta), slept, then worked 10 us.
    assert_eq!(sched.task_stats(writer.id()).run_ns, 21 * USEC);
}

#[test]
fn mutex_waiters_get_the_lock_in_fifo_order_and_lock_stat_counts_them() {
    let (sim, sched, stats) = machine(4);
    let m = Mutex::new(stats.class("m"), &sched);
    let l = log();
    for (i, at, hold) in [
        (0, 0, MSEC),
        (1, 10 * USEC, 100 * USEC),
        (2, 20 * USEC, 100 * USEC),
        (3, 30 * USEC, 100 * USEC),
        (4, 40 * USEC, 100 * USEC),
    ] {
        let (s, m2, l2) = (sim.clone(), m.clone(), l.clone());
        sched.spawn(&format!("t{i}"), CgroupId::ROOT, 0, async move {
            s.sleep_until(at).await;
            let g = m2.lock().await;
            push(&l2, &s, &format!("t{i}"));
            s.sleep(hold).await;
            drop(g);
        });
    }
    sim.run().unwrap();
    assert_eq!(
        entries(&l),
        vec![
            ("t0".into(), 0),
            ("t1".into(), MSEC),
            ("t2".into(), 1100 * USEC),
            ("t3".into(), 1200 * USEC),
            ("t4".into(), 1300 * USEC),
        ]
    );
    let st = stats.get("m").unwrap();
    assert_eq!(st.write.acquisitions, 5);
    assert_eq!(st.write.contentions, 4);
    assert_eq!(st.write.sleeps, 4);
    assert_eq!(st.read.acquisitions, 0);
    // Waits 990, 1080, 1170, 1260 us.
    assert_eq!(st.write.wait_total_ns, 4500 * USEC);
    assert_eq!(st.write.wait_max_ns, 1260 * USEC);
    assert_eq!(st.write.wait.len(), 4);
    assert_eq!(st.write.hold_total_ns, 1400 * USEC);
    assert_eq!(st.write.hold_max_ns, MSEC);
    let rows = stats.report();
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    assert_eq!((r.class.as_str(), r.kind), ("m", LockKind::Write));
    assert_eq!((r.acquisitions, r.contentions, r.sleeps), (5, 4, 4));
    // Histogram quantiles are exact to 3 significant digits.
    assert!(
        r.wait_p50_ns.abs_diff(1080 * USEC) <= 1080 * USEC / 500,
        "{r:?}"
    );
    assert!(
        r.wait_p99_ns.abs_diff(1260 * USEC) <= 1260 * USEC / 500,
        "{r:?}"
    );
    assert_eq!(r.wait_max_ns, 1260 * USEC);
    assert!(stats.format_report().contains("m "));
    stats.clear();
    assert_eq!(stats.get("m").unwrap().write.acquisitions, 0);
}

#[test]
fn mutex_guard_drop_releases_and_trylock_works() {
    let (sim, sched, stats) = machine(1);
    let m = Mutex::new(stats.class("m"), &sched);
    let (s, m2) = (sim.clone(), m.clone());
    let h = sched.spawn("t", CgroupId::ROOT, 0, async move {
        let me = s.current_task();
        let g = m2.lock().await;
        let owned = m2.owner() == Some(me);
        let second = m2.try_lock().is_some();
        drop(g);
        let after = m2.is_locked();
        let again = m2.try_lock().is_some();
        let g = m2.lock().await;
        drop(g);
        (owned, second, after, again)
    });
    sim.run().unwrap();
    assert_eq!(h.result(), Some((true, false, false, true)));
    let st = stats.get("m").unwrap();
    assert_eq!((st.write.acquisitions, st.write.contentions), (3, 0));
    assert!(!m.is_locked());
}

#[test]
fn mutex_spinner_passes_a_sleeping_waiter_once_then_handoff() {
    let (sim, sched, stats) = machine(4);
    let m = Mutex::new(stats.class("m"), &sched);
    let l = log();
    // name, arrival, hold = sleep then cpu
    for (name, at, nap, work) in [
        ("h", 0, 100 * USEC, 100 * USEC),
        ("w", 10 * USEC, 0, 100 * USEC),
        ("s", 150 * USEC, 0, 100 * USEC),
        ("t", 250 * USEC, 0, 100 * USEC),
    ] {
        let (s, m2, sc, l2) = (sim.clone(), m.clone(), sched.clone(), l.clone());
        sched.spawn(name, CgroupId::ROOT, 0, async move {
            s.sleep_until(at).await;
            let g = m2.lock().await;
            push(&l2, &s, name);
            s.sleep(nap).await;
            sc.cpu(work).await;
            drop(g);
        });
    }
    sim.run().unwrap();
    // w queued while h slept; s spun on the running h and stole it at 200 us,
    // which made w set MUTEX_FLAG_HANDOFF; t, spinning on s, is passed over.
    assert_eq!(
        entries(&l),
        vec![
            ("h".into(), 0),
            ("s".into(), 200 * USEC),
            ("w".into(), 300 * USEC),
            ("t".into(), 400 * USEC),
        ]
    );
    let st = stats.get("m").unwrap();
    assert_eq!((st.write.contentions, st.write.sleeps), (3, 1));
}

#[test]
fn cancelled_waiter_leaves_the_queue() {
    let (sim, sched, stats) = machine(2);
    let m = Mutex::new(stats.class("m"), &sched);
    let l = log();
    let (s, m2) = (sim.clone(), m.clone());
    sched.spawn("holder", CgroupId::ROOT, 0, async move {
        let g = m2.lock().await;
        s.sleep(MSEC).await;
        drop(g);
    });
    let (s, m2, l2) = (sim.clone(), m.clone(), l.clone());
    let victim = sched.spawn("victim", CgroupId::ROOT, 0, async move {
        s.sleep(10 * USEC).await;
        let _g = m2.lock().await;
        push(&l2, &s, "victim");
    });
    let (s, m2, l2) = (sim.clone(), m.clone(), l.clone());
    sched.spawn("next", CgroupId::ROOT, 0, async move {
        s.sleep(20 * USEC).await;
        let _g = m2.lock().await;
        push(&l2, &s, "next");
    });
    sim.run_until(500 * USEC).unwrap();
    assert_eq!(m.nr_waiters(), 2);
    victim.cancel(&sim);
    assert_eq!(m.nr_waiters(), 1);
    sim.run().unwrap();
    assert_eq!(entries(&l), vec![("next".into(), MSEC)]);
}

#[test]
fn spinlock_waiters_burn_cpu_in_fifo_order() {
    let (sim, sched, stats) = machine(4);
    let lock = SpinLock::new(stats.class("spin"), &sched);
    let pair = 20; // default acquire + release cost, ns
    let mut hs = Vec::new();
    for (name, at, work) in [
        ("a", 0, 50 * USEC),
        ("b", 10 * USEC, 10 * USEC),
        ("c", 20 * USEC, 10 * USEC),
    ] {
        let (s, lk) = (sim.clone(), lock.clone());
        hs.push(sched.spawn(name, CgroupId::ROOT, 0, async move {
            s.sleep_until(at).await;
            let g = lk.lock().await;
            let t = s.now();
            g.cpu(work).await;
            drop(g);
            t
        }));
    }
    sim.run().unwrap();
    // a holds [0, 50.02 us); b spins from 10 us, holds 10 us + cost; c spins
    // from 20 us until b releases.
    let a_rel = pair + 50 * USEC;
    let b_rel = a_rel + pair + 10 * USEC;
    assert_eq!(hs[0].result(), Some(pair));
    assert_eq!(hs[1].result(), Some(a_rel + pair));
    assert_eq!(hs[2].result(), Some(b_rel + pair));
    assert_eq!(sched.task_stats(hs[0].id()).run_ns, a_rel);
    assert_eq!(
        sched.task_stats(hs[1].id()).run_ns,
        (a_rel - 10 * USEC) + pair + 10 * USEC
    );
    assert_eq!(
        sched.task_stats(hs[2].id()).run_ns,
        (b_rel - 20 * USEC) + pair + 10 * USEC
    );
    let st = stats.get("spin").unwrap();
    assert_eq!((st.write.acquisitions, st.write.contentions), (3, 2));
    assert_eq!(
        st.write.wait_total_ns,
        (a_rel - 10 * USEC) + (b_rel - 20 * USEC)
    );
}

#[test]
fn abba_deadlock_is_reported_with_lock_names() {
    let (sim, sched, stats) = machine(2);
    let m1 = Mutex::new(stats.class("m1"), &sched);
    let m2 = Mutex::new(stats.class("m2"), &sched);
    for (name, first, second) in [
        ("ab", m1.clone(), m2.clone()),
        ("ba", m2.clone(), m1.clone()),
    ] {
        let s = sim.clone();
        sched.spawn(name, CgroupId::ROOT, 0, async move {
            let _a = first.lock().await;
            s.sleep(MSEC).await;
            let _b = second.lock().await;
        });
    }
    let err = sim.run().unwrap_err();
    let mut got: Vec<(String, String)> = err
        .blocked
        .iter()
        .map(|b| (b.name.clone(), b.waiting_on.clone()))
        .collect();
    got.sort();
    assert_eq!(
        got,
        vec![
            ("ab".to_string(), "mutex:m2".to_string()),
            ("ba".to_string(), "mutex:m1".to_string()),
        ]
    );
    assert_eq!(err.time, MSEC);
}

#[test]
fn rwsem_self_deadlock_names_the_rwsem_and_mode() {
    let (sim, sched, stats) = machine(1);
    let sem = RwSemaphore::new(stats.class("btrfs-tree-00"), &sched);
    sched.spawn("recursive", CgroupId::ROOT, 0, async move {
        let _w = sem.down_write().await;
        let _r = sem.down_read().await;
    });
    let err = sim.run().unwrap_err();
    assert_eq!(err.blocked.len(), 1);
    assert_eq!(err.blocked[0].waiting_on, "rwsem:btrfs-tree-00 (read)");
}

#[test]
fn classes_are_shared_by_name() {
    let (sim, sched, stats) = machine(1);
    let a = RwSemaphore::new(stats.class("node"), &sched);
    let b = RwSemaphore::new(stats.class("node"), &sched);
    let c = Mutex::new(stats.class("other"), &sched);
    sched.spawn("t", CgroupId::ROOT, 0, async move {
        drop(a.down_read().await);
        drop(b.down_write().await);
        drop(c.lock().await);
    });
    sim.run().unwrap();
    assert_eq!(
        stats.classes(),
        vec!["node".to_string(), "other".to_string()]
    );
    let st = stats.get("node").unwrap();
    assert_eq!((st.read.acquisitions, st.write.acquisitions), (1, 1));
    let rows = stats.report();
    let kinds: Vec<(&str, LockKind)> = rows.iter().map(|r| (r.class.as_str(), r.kind)).collect();
    assert_eq!(
        kinds,
        vec![
            ("node", LockKind::Write),
            ("node", LockKind::Read),
            ("other", LockKind::Write)
        ]
    );
}

/// A spinlock handed to a spinner stays on that spinner's CPU: with more
/// contenders than CPUs, every contender spinning with preemption disabled,
/// the new holder still runs its critical section at once. (Before the
/// scheduler kept a CPU across requests, the holder went to the back of the
/// run queue between its grant and its critical section while spinners held
/// every CPU: the run spun for seconds of virtual time.)
#[test]
fn spinlock_handoff_keeps_the_new_holder_on_its_cpu() {
    let (sim, sched, stats) = machine(2);
    let lock = SpinLock::new(stats.class("contended"), &sched);
    let mut hs = Vec::new();
    for i in 0..6 {
        let (l, s2) = (lock.clone(), sched.clone());
        hs.push(
            sched.spawn(&format!("c{i}"), CgroupId::ROOT, 0, async move {
                for _ in 0..50 {
                    let g = l.lock().await;
                    g.cpu(2 * USEC).await;
                    drop(g);
                    s2.cpu(3 * USEC).await;
                }
            }),
        );
    }
    sim.run().unwrap();
    // 6 x 50 critical sections of 2 us, serialised: 0.6 ms plus the
    // unlocked work; the whole run ends well within 5 ms.
    assert!(sim.now() < 5 * MSEC, "ended at {} ns", sim.now());
    assert!(hs.iter().all(|h| h.is_finished()));
}
