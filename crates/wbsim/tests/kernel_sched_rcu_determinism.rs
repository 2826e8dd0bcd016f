//! Known-answer tests that close gaps left by the per-primitive test files:
//! time-slice granularity of the scheduler, an RCU reader preempted (runnable
//! but off CPU) inside its read-side section holding the grace period, the
//! distribution of sampled grace-period lengths, and determinism of a run that
//! mixes every primitive (same seed, byte-identical trace; other seed, a
//! different one).

use sim::{Sim, Time, TraceEvent, TraceSink, MSEC, USEC};
use wbsim::model::kernel::locking::{LockStats, Mutex, RwSemaphore};
use wbsim::model::kernel::rcu::{GpDuration, Rcu, RcuParams};
use wbsim::model::kernel::sched::{CgroupId, Sched, SchedParams};
use wbsim::model::kernel::workqueue::{
    alloc_workqueue, flush_workqueue, queue_delayed_work, queue_work, DelayedWork, Work, WqFlags,
};

// ------------------------------------------------------------------ slices

/// Two CPU hogs on one CPU alternate in whole base slices (0.75 ms on one
/// CPU): hog0 runs for exactly one slice while hog1 waits, then hog1 runs for
/// exactly one slice, and so on; over 30 ms each is preempted once per slice.
#[test]
fn two_hogs_on_one_cpu_alternate_in_whole_slices() {
    let sim = Sim::new(1);
    let sched = Sched::new(&sim, SchedParams::for_cpus(1));
    let slice = sched.params().base_slice_ns;
    assert_eq!(slice, 750 * USEC);
    let mut ids = Vec::new();
    for i in 0..2 {
        let s = sched.clone();
        ids.push(
            sched
                .spawn(&format!("hog{i}"), CgroupId::ROOT, 0, async move {
                    s.cpu(1_000 * MSEC).await;
                })
                .id(),
        );
    }
    let (a, b) = (ids[0], ids[1]);
    for k in 0..6u64 {
        // Just before and just after the k-th slice boundary.
        sim.run_until(k * slice + 1).unwrap();
        let (on, off) = if k % 2 == 0 { (a, b) } else { (b, a) };
        assert!(sched.is_running(on), "slice {k}: wrong task on the CPU");
        assert!(sched.is_runnable(off) && !sched.is_running(off));
        sim.run_until((k + 1) * slice - 1).unwrap();
        assert!(sched.is_running(on), "slice {k} ended early");
    }
    sim.run_until(30 * MSEC).unwrap();
    let (sa, sb) = (sched.task_stats(a), sched.task_stats(b));
    assert_eq!(sa.run_ns + sb.run_ns, 30 * MSEC);
    // 30 ms / 0.75 ms = 40 slices: 20 each, and each slice end preempts.
    for st in [sa, sb] {
        assert_eq!(st.run_ns, 15 * MSEC, "{st:?}");
        assert!((19..=20).contains(&st.preemptions), "{st:?}");
        assert!(st.wait_ns.abs_diff(15 * MSEC) <= slice, "{st:?}");
    }
}

// ------------------------------------------------------------------- RCU

/// A reader that enters rcu_read_lock() and is then preempted (runnable, but
/// the only CPU is given to a competing task) holds the grace period: a
/// synchronize_rcu() called while it is inside returns exactly when it leaves
/// the section, long after the 1 ms grace period itself.
#[test]
fn reader_preempted_inside_its_section_holds_the_grace_period() {
    let sim = Sim::new(1);
    let sched = Sched::new(&sim, SchedParams::for_cpus(1));
    let rcu = Rcu::new(
        &sim,
        RcuParams {
            gp_normal: GpDuration::Fixed(MSEC),
            ..RcuParams::for_kernel(false)
        },
    )
    .unwrap();
    let (s, r, sm) = (sched.clone(), rcu.clone(), sim.clone());
    let reader = sched.spawn("reader", CgroupId::ROOT, 0, async move {
        let g = r.rcu_read_lock();
        // 3 ms of CPU inside the section, shared with the hog: preempted at
        // every slice end, so it leaves the section at about 6 ms.
        s.cpu(3 * MSEC).await;
        drop(g);
        sm.now()
    });
    let s = sched.clone();
    let hog = sched.spawn("hog", CgroupId::ROOT, 0, async move {
        s.cpu(20 * MSEC).await;
    });
    let (r, sm) = (rcu.clone(), sim.clone());
    let syncer = sim.spawn("syncer", async move {
        sm.sleep(10 * USEC).await;
        r.synchronize_rcu().await;
        sm.now()
    });
    sim.run().unwrap();
    let unlock = reader.result().unwrap();
    let st = sched.task_stats(reader.id());
    assert!(st.preemptions >= 2, "reader was never preempted: {st:?}");
    assert!(st.wait_ns >= 2 * MSEC, "{st:?}");
    assert!(unlock > 5 * MSEC, "unlock at {unlock}");
    assert_eq!(syncer.result(), Some(unlock));
    assert!(sched.task_stats(hog.id()).run_ns == 20 * MSEC);
}

/// Stub grace-period lengths follow the configured distribution: a
/// uniform 3..8 ms has its mean near 5.5 ms and covers the range; a
/// log-normal's sample median is near its median. (Fixed seed: the answer
/// is the same on every run.)
#[test]
fn grace_period_lengths_follow_their_distribution() {
    let sim = Sim::new(42);
    let mut rng = sim.rng("gp");
    let n = 20_001;
    let u: Vec<Time> = (0..n)
        .map(|_| {
            GpDuration::Uniform {
                min: 3 * MSEC,
                max: 8 * MSEC,
            }
            .sample(&mut rng)
        })
        .collect();
    let mean = u.iter().sum::<Time>() as f64 / n as f64;
    assert!((mean - 5.5e6).abs() < 0.05e6, "mean {mean}");
    assert!(u.iter().any(|&t| t < 3_100 * USEC));
    assert!(u.iter().any(|&t| t > 7_900 * USEC));
    let ln = GpDuration::LogNormal {
        median: 2 * MSEC,
        sigma: 0.5,
    };
    let mut v: Vec<Time> = (0..n).map(|_| ln.sample(&mut rng)).collect();
    v.sort_unstable();
    let median = v[n / 2] as f64;
    assert!((median - 2e6).abs() < 0.04e6, "median {median}");
    // sigma 0.5: the 84th percentile is median * e^0.5 = 3.30 ms.
    let p84 = v[(n as f64 * 0.8413) as usize] as f64;
    assert!((p84 - 3.297e6).abs() < 0.1e6, "p84 {p84}");
    // A run's grace periods draw from the RCU instance's own substream: two
    // instances with the same seed see the same lengths.
    let lens = |seed: u64| {
        let sim = Sim::new(seed);
        let p = RcuParams {
            gp_normal: GpDuration::Uniform {
                min: 3 * MSEC,
                max: 8 * MSEC,
            },
            ..RcuParams::for_kernel(false)
        };
        let rcu = Rcu::new(&sim, p).unwrap();
        let (r, s) = (rcu.clone(), sim.clone());
        let h = sim.spawn("s", async move {
            let mut out = Vec::new();
            for _ in 0..5 {
                let t0 = s.now();
                r.synchronize_rcu().await;
                out.push(s.now() - t0);
            }
            out
        });
        sim.run().unwrap();
        h.result().unwrap()
    };
    assert_eq!(lens(7), lens(7));
    assert_ne!(lens(7), lens(8));
}

// ----------------------------------------------------------- determinism

/// A run that uses every primitive with randomness in it (sampled grace
/// periods, random CPU demands from a named substream): mutex and rwsem
/// contention, CPU sharing, RCU callbacks, a workqueue with delayed work.
fn mixed_run(seed: u64) -> (Vec<TraceEvent>, String) {
    use rand::Rng;
    let sim = Sim::new(seed);
    sim.set_trace(TraceSink::Memory(Vec::new()));
    let sched = Sched::new(&sim, SchedParams::for_cpus(2));
    let stats = LockStats::new();
    let m = Mutex::new(stats.class("demo_mutex"), &sched);
    let sem = RwSemaphore::new(stats.class("demo_rwsem"), &sched);
    let rcu = Rcu::new(&sim, RcuParams::for_kernel(false)).unwrap();
    let wq = alloc_workqueue(
        &sched,
        "demo_wq",
        WqFlags {
            unbound: true,
            ..WqFlags::default()
        },
        2,
    );
    for i in 0..6 {
        let (s, sm, m, sem, rcu, wq) = (
            sched.clone(),
            sim.clone(),
            m.clone(),
            sem.clone(),
            rcu.clone(),
            wq.clone(),
        );
        let mut rng = sim.rng(&format!("task{i}"));
        sched.spawn(&format!("t{i}"), CgroupId::ROOT, i % 3, async move {
            for round in 0..8 {
                let think = rng.random_range(10..500) * USEC;
                sm.sleep(think).await;
                if rng.random_bool(0.5) {
                    let g = m.lock().await;
                    sm.trace("lock_acquired", || format!("demo_mutex round={round}"));
                    s.cpu(rng.random_range(50..300) * USEC).await;
                    drop(g);
                } else if rng.random_bool(0.3) {
                    let g = sem.down_write().await;
                    sm.trace("lock_acquired", || format!("demo_rwsem w round={round}"));
                    s.cpu(rng.random_range(50..300) * USEC).await;
                    drop(g);
                } else {
                    let g = sem.down_read().await;
                    let rg = rcu.rcu_read_lock();
                    sm.trace("lock_acquired", || format!("demo_rwsem r round={round}"));
                    s.cpu(rng.random_range(50..300) * USEC).await;
                    drop(rg);
                    drop(g);
                }
                let sm2 = sm.clone();
                rcu.call_rcu_hurry(move || sm2.trace("rcu_invoke_callback", || format!("t{i}")));
                let s2 = s.clone();
                let w = Work::new(&format!("w{i}.{round}"), move || {
                    let s2 = s2.clone();
                    async move { s2.cpu(100 * USEC).await }
                });
                queue_work(&wq, &w);
                if round == 3 {
                    let s3 = s.clone();
                    let dw = DelayedWork::new(&format!("dw{i}"), move || {
                        let s3 = s3.clone();
                        async move { s3.cpu(50 * USEC).await }
                    });
                    queue_delayed_work(&wq, &dw, rng.random_range(1..5) * MSEC);
                }
                if round == 7 {
                    rcu.synchronize_rcu().await;
                    flush_workqueue(&wq).await;
                }
            }
        });
    }
    sim.run_until(sim::SEC).unwrap();
    let mut summary = format!(
        "now={} events={} polls={}\n",
        sim.now(),
        sim.events(),
        sim.polls()
    );
    summary += &stats.format_report();
    summary += &format!("{:?}\n{:?}\n", rcu.stats(), sched.cpu_busy_ns());
    (sim.take_trace(), summary)
}

#[test]
fn same_seed_same_trace_other_seed_other_trace() {
    let (t1, s1) = mixed_run(11);
    let (t2, s2) = mixed_run(11);
    // Substantial: locks, RCU grace periods and callbacks, workqueue events.
    for name in [
        "lock_acquired",
        "rcu_grace_period",
        "rcu_invoke_callback",
        "workqueue_execute_start",
    ] {
        assert!(
            t1.iter().filter(|e| e.name == name).count() >= 5,
            "too few {name} events"
        );
    }
    assert_eq!(t1, t2, "same seed gave different traces");
    assert_eq!(s1, s2);
    let (t3, _) = mixed_run(12);
    assert_ne!(t1, t3, "another seed should give another run");
}
