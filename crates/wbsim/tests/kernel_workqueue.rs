//! Known-answer tests of the workqueue model (model/kernel/workqueue.rs).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use sim::{Sim, Time, TraceSink, MSEC, USEC};
use wbsim::model::kernel::rcu::{GpDuration, Rcu, RcuParams};
use wbsim::model::kernel::sched::{CgroupId, Sched, SchedParams};
use wbsim::model::kernel::workqueue::*;

fn machine(cpus: usize) -> (Sim, Sched) {
    let sim = Sim::new(1);
    let sched = Sched::new(&sim, SchedParams::for_cpus(cpus));
    (sim, sched)
}

/// (name, start, end) of each run.
type Log = Rc<RefCell<Vec<(String, Time, Time)>>>;

fn new_log() -> Log {
    Rc::new(RefCell::new(Vec::new()))
}

/// A work item that burns `ns` of CPU on its worker and logs its run.
fn cpu_work(sched: &Sched, name: &str, ns: Time, log: &Log) -> Work {
    let (s, l, n) = (sched.clone(), log.clone(), name.to_string());
    Work::new(name, move || {
        let (s, l, n) = (s.clone(), l.clone(), n.clone());
        async move {
            let t0 = s.sim().now();
            s.cpu(ns).await;
            l.borrow_mut().push((n, t0, s.sim().now()));
        }
    })
}

fn unbound() -> WqFlags {
    WqFlags {
        unbound: true,
        ..WqFlags::default()
    }
}

#[test]
fn max_active_1_serialises() {
    let (sim, sched) = machine(4);
    let wq = alloc_workqueue(&sched, "serial", unbound(), 1);
    let log = new_log();
    for i in 0..3 {
        assert!(queue_work(
            &wq,
            &cpu_work(&sched, &format!("w{i}"), 10 * MSEC, &log)
        ));
    }
    sim.run().unwrap();
    let got: Vec<(Time, Time)> = log.borrow().iter().map(|r| (r.1, r.2)).collect();
    // Four idle CPUs, but one at a time: 0-10, 10-20, 20-30 ms.
    assert_eq!(
        got,
        vec![
            (0, 10 * MSEC),
            (10 * MSEC, 20 * MSEC),
            (20 * MSEC, 30 * MSEC)
        ]
    );
    let st = wq.stats();
    assert_eq!(st.max_concurrency, 1);
    assert_eq!(st.nr_workers, 1);
    assert_eq!(st.executed, 3);
}

#[test]
fn max_active_2_four_10ms_items_on_2_cpus_take_20ms() {
    let (sim, sched) = machine(2);
    let wq = alloc_workqueue(&sched, "two", unbound(), 2);
    let log = new_log();
    for i in 0..4 {
        queue_work(&wq, &cpu_work(&sched, &format!("w{i}"), 10 * MSEC, &log));
    }
    sim.run().unwrap();
    let ends: Vec<Time> = log.borrow().iter().map(|r| r.2).collect();
    assert_eq!(ends, vec![10 * MSEC, 10 * MSEC, 20 * MSEC, 20 * MSEC]);
    assert_eq!(sim.now(), 20 * MSEC);
    let st = wq.stats();
    assert_eq!(st.max_concurrency, 2);
    assert_eq!(st.nr_workers, 2);
    // Worker names follow the kernel's unbound pool numbering (2 per-CPU pools
    // per CPU come first): kworker/u4:M on 2 CPUs.
    let names: Vec<String> = wq
        .worker_tasks()
        .iter()
        .map(|&t| sched.task_name(t).unwrap().to_string())
        .collect();
    assert_eq!(names, vec!["kworker/u4:0-two", "kworker/u4:1-two"]);
}

#[test]
fn ordered_workqueue_runs_strictly_fifo_one_at_a_time() {
    let (sim, sched) = machine(4);
    let wq = alloc_ordered_workqueue(&sched, "ordered");
    assert_eq!(wq.max_active(), 1);
    let log = new_log();
    // Decreasing lengths: any reordering or overlap would show.
    let lens = [5, 4, 3, 2, 1];
    for (i, l) in lens.iter().enumerate() {
        queue_work(&wq, &cpu_work(&sched, &format!("w{i}"), l * MSEC, &log));
    }
    sim.run().unwrap();
    let log = log.borrow();
    let names: Vec<&str> = log.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(names, vec!["w0", "w1", "w2", "w3", "w4"]);
    let mut t = 0;
    for (i, r) in log.iter().enumerate() {
        assert_eq!(r.1, t, "w{i} starts when the previous one ended");
        t += lens[i] * MSEC;
        assert_eq!(r.2, t);
    }
    assert_eq!(wq.stats().max_concurrency, 1);
}

#[test]
fn queue_work_on_pending_item_returns_false_and_it_runs_once() {
    let (sim, sched) = machine(1);
    let wq = alloc_workqueue(&sched, "wq", WqFlags::default(), 4);
    let log = new_log();
    let w = cpu_work(&sched, "w", MSEC, &log);
    assert!(queue_work(&wq, &w));
    assert!(work_pending(&w));
    assert!(!queue_work(&wq, &w));
    assert!(!queue_work(&wq, &w));
    sim.run().unwrap();
    assert_eq!(w.runs(), 1);
    assert_eq!(log.borrow().len(), 1);
    assert!(!work_pending(&w));
    // Idle again: can be queued again.
    assert!(queue_work(&wq, &w));
    sim.run().unwrap();
    assert_eq!(w.runs(), 2);
    assert_eq!(wq.stats().queued, 2);
}

#[test]
fn requeue_while_running_runs_again_after_never_concurrently() {
    let (sim, sched) = machine(4);
    // Plenty of slots and CPUs: only non-reentrancy can serialise the runs.
    let wq = alloc_workqueue(&sched, "wq", unbound(), 8);
    let inside = Rc::new(Cell::new(0u32));
    let max_inside = Rc::new(Cell::new(0u32));
    let log = new_log();
    let (s, l, i, m) = (
        sched.clone(),
        log.clone(),
        inside.clone(),
        max_inside.clone(),
    );
    let w = Work::new("w", move || {
        let (s, l, i, m) = (s.clone(), l.clone(), i.clone(), m.clone());
        async move {
            i.set(i.get() + 1);
            m.set(m.get().max(i.get()));
            let t0 = s.sim().now();
            s.cpu(10 * MSEC).await;
            l.borrow_mut().push(("w".into(), t0, s.sim().now()));
            i.set(i.get() - 1);
        }
    });
    assert!(queue_work(&wq, &w));
    let (wq2, w2, sm) = (wq.clone(), w.clone(), sim.clone());
    let h = sim.spawn("requeuer", async move {
        sm.sleep(5 * MSEC).await;
        assert!(w2.is_running());
        // Running, not pending: queueing succeeds; a second time it is pending.
        let a = queue_work(&wq2, &w2);
        let b = queue_work(&wq2, &w2);
        (a, b)
    });
    sim.run().unwrap();
    assert_eq!(h.result(), Some((true, false)));
    let got: Vec<(Time, Time)> = log.borrow().iter().map(|r| (r.1, r.2)).collect();
    assert_eq!(got, vec![(0, 10 * MSEC), (10 * MSEC, 20 * MSEC)]);
    assert_eq!(max_inside.get(), 1);
    assert_eq!(w.runs(), 2);
}

#[test]
fn flush_workqueue_waits_only_for_items_queued_before_it() {
    let (sim, sched) = machine(4);
    let wq = alloc_workqueue(&sched, "wq", unbound(), 4);
    let log = new_log();
    let a = cpu_work(&sched, "a", 10 * MSEC, &log);
    let b = cpu_work(&sched, "b", 100 * MSEC, &log);
    let (wq1, sm) = (wq.clone(), sim.clone());
    let flusher = sim.spawn("flusher", async move {
        queue_work(&wq1, &a);
        flush_workqueue(&wq1).await;
        sm.now()
    });
    let (wq2, sm) = (wq.clone(), sim.clone());
    sim.spawn("late", async move {
        sm.sleep(MSEC).await;
        queue_work(&wq2, &b);
    });
    sim.run().unwrap();
    // b (queued at 1 ms, running until 101 ms) does not delay the flush.
    assert_eq!(flusher.result(), Some(10 * MSEC));
    assert_eq!(sim.now(), 101 * MSEC);
}

#[test]
fn flush_workqueue_waits_for_inactive_items_too() {
    let (sim, sched) = machine(4);
    let wq = alloc_workqueue(&sched, "wq", unbound(), 1);
    let log = new_log();
    for i in 0..3 {
        queue_work(&wq, &cpu_work(&sched, &format!("w{i}"), 10 * MSEC, &log));
    }
    let (wq1, sm) = (wq.clone(), sim.clone());
    let h = sim.spawn("flusher", async move {
        flush_workqueue(&wq1).await;
        let t1 = sm.now();
        // Nothing queued now: returns at once.
        flush_workqueue(&wq1).await;
        drain_workqueue(&wq1).await;
        (t1, sm.now())
    });
    sim.run().unwrap();
    assert_eq!(h.result(), Some((30 * MSEC, 30 * MSEC)));
}

#[test]
fn flush_work_on_idle_item_returns_at_once_and_waits_for_a_queued_one() {
    let (sim, sched) = machine(1);
    let wq = alloc_workqueue(&sched, "wq", WqFlags::default(), 1);
    let log = new_log();
    let w = cpu_work(&sched, "w", 10 * MSEC, &log);
    let (wq1, w1, sm) = (wq.clone(), w.clone(), sim.clone());
    let h = sim.spawn("flusher", async move {
        sm.sleep(MSEC).await;
        let idle = flush_work(&w1).await;
        let t_idle = sm.now();
        queue_work(&wq1, &w1);
        let busy = flush_work(&w1).await;
        (idle, t_idle, busy, sm.now())
    });
    sim.run().unwrap();
    assert_eq!(h.result(), Some((false, MSEC, true, 11 * MSEC)));
}

#[test]
fn delayed_work_runs_after_its_delay() {
    let (sim, sched) = machine(1);
    let wq = alloc_workqueue(&sched, "wq", WqFlags::default(), 1);
    let log = new_log();
    let (s, l) = (sched.clone(), log.clone());
    let dw = DelayedWork::new("dw", move || {
        let (s, l) = (s.clone(), l.clone());
        async move {
            let t0 = s.sim().now();
            s.cpu(MSEC).await;
            l.borrow_mut().push(("dw".into(), t0, s.sim().now()));
        }
    });
    assert!(queue_delayed_work(&wq, &dw, 50 * MSEC));
    assert!(dw.timer_pending());
    // Pending while the timer is armed.
    assert!(!queue_delayed_work(&wq, &dw, 10 * MSEC));
    assert!(!queue_work(&wq, dw.work()));
    sim.run().unwrap();
    let got: Vec<(Time, Time)> = log.borrow().iter().map(|r| (r.1, r.2)).collect();
    assert_eq!(got, vec![(50 * MSEC, 51 * MSEC)]);
    // Latency is measured from the timer firing (queueing), not from arming.
    assert_eq!(wq.stats().queue_latency_ns.max(), 0);
}

#[test]
fn cancel_delayed_work_prevents_the_run() {
    let (sim, sched) = machine(1);
    let wq = alloc_workqueue(&sched, "wq", WqFlags::default(), 1);
    let log = new_log();
    let dw = DelayedWork::new("dw", {
        let (s, l) = (sched.clone(), log.clone());
        move || {
            let (s, l) = (s.clone(), l.clone());
            async move {
                s.cpu(MSEC).await;
                l.borrow_mut().push(("dw".into(), 0, s.sim().now()));
            }
        }
    });
    assert!(queue_delayed_work(&wq, &dw, 50 * MSEC));
    let (d, sm) = (dw.clone(), sim.clone());
    let h = sim.spawn("canceller", async move {
        sm.sleep(10 * MSEC).await;
        let first = cancel_delayed_work(&d);
        let second = cancel_delayed_work(&d);
        (first, second)
    });
    sim.run().unwrap();
    assert_eq!(h.result(), Some((true, false)));
    assert!(log.borrow().is_empty());
    assert_eq!(dw.work().runs(), 0);
    assert_eq!(sim.now(), 10 * MSEC, "the cancelled timer did not fire");
}

#[test]
fn mod_delayed_work_rearms_and_zero_delay_queues_now() {
    let (sim, sched) = machine(1);
    let wq = alloc_workqueue(&sched, "wq", WqFlags::default(), 1);
    let starts = Rc::new(RefCell::new(Vec::new()));
    let dw = DelayedWork::new("dw", {
        let (s, st) = (sim.clone(), starts.clone());
        move || {
            let (s, st) = (s.clone(), st.clone());
            async move { st.borrow_mut().push(s.now()) }
        }
    });
    assert!(queue_delayed_work(&wq, &dw, 50 * MSEC));
    let (d, q, sm) = (dw.clone(), wq.clone(), sim.clone());
    let h = sim.spawn("modder", async move {
        sm.sleep(10 * MSEC).await;
        // Pending: re-armed to 10 + 100 ms.
        let a = mod_delayed_work(&q, &d, 100 * MSEC);
        sm.sleep(200 * MSEC).await; // ran at 110 ms
                                    // Idle: mod_delayed_work queues it (returns false); delay 0 runs now.
        let b = mod_delayed_work(&q, &d, 0);
        (a, b)
    });
    sim.run().unwrap();
    assert_eq!(h.result(), Some((true, false)));
    assert_eq!(*starts.borrow(), vec![110 * MSEC, 210 * MSEC]);
}

#[test]
fn flush_delayed_work_fires_the_timer_now() {
    let (sim, sched) = machine(1);
    let wq = alloc_workqueue(&sched, "wq", WqFlags::default(), 1);
    let s = sched.clone();
    let dw = DelayedWork::new("dw", move || {
        let s = s.clone();
        async move { s.cpu(2 * MSEC).await }
    });
    queue_delayed_work(&wq, &dw, 5 * crate_sec());
    let (d, sm) = (dw.clone(), sim.clone());
    let h = sim.spawn("flusher", async move {
        sm.sleep(MSEC).await;
        let waited = flush_delayed_work(&d).await;
        (waited, sm.now())
    });
    sim.run().unwrap();
    assert_eq!(h.result(), Some((true, 3 * MSEC)));
    assert_eq!(dw.work().runs(), 1);
}

fn crate_sec() -> Time {
    sim::SEC
}

#[test]
fn cancel_work_sync_removes_pending_and_waits_for_running() {
    let (sim, sched) = machine(2);
    let wq = alloc_workqueue(&sched, "wq", unbound(), 4);
    let log = new_log();
    let w = cpu_work(&sched, "w", 10 * MSEC, &log);
    queue_work(&wq, &w);
    let (w1, q, sm) = (w.clone(), wq.clone(), sim.clone());
    let h = sim.spawn("canceller", async move {
        sm.sleep(5 * MSEC).await;
        assert!(queue_work(&q, &w1)); // pending behind the running instance
        let was = cancel_work_sync(&w1).await;
        (was, sm.now())
    });
    sim.run().unwrap();
    // Returned once the running instance finished; the pending one never ran.
    assert_eq!(h.result(), Some((true, 10 * MSEC)));
    assert_eq!(w.runs(), 1);
    assert_eq!(wq.nr_in_flight(), 0);
}

#[test]
fn workers_consume_cpu_and_share_it_with_a_hog() {
    // Alone on one CPU: a 10 ms work item ends at 10 ms.
    let (sim, sched) = machine(1);
    let wq = alloc_workqueue(&sched, "wq", WqFlags::default(), 1);
    let log = new_log();
    queue_work(&wq, &cpu_work(&sched, "w", 10 * MSEC, &log));
    sim.run().unwrap();
    assert_eq!(log.borrow()[0].2, 10 * MSEC);

    // With a CPU hog of equal weight: the worker gets half the CPU.
    let (sim, sched) = machine(1);
    let s = sched.clone();
    sched.spawn(
        "hog",
        CgroupId::ROOT,
        0,
        async move { s.cpu(crate_sec()).await },
    );
    let wq = alloc_workqueue(&sched, "wq", WqFlags::default(), 1);
    let log = new_log();
    queue_work(&wq, &cpu_work(&sched, "w", 10 * MSEC, &log));
    sim.run_until(100 * MSEC).unwrap();
    let end = log.borrow()[0].2;
    assert!(end > 19 * MSEC && end <= 21 * MSEC, "end {end}");
    let worker = wq.worker_tasks()[0];
    let st = sched.task_stats(worker);
    assert_eq!(st.run_ns, 10 * MSEC);
    assert!(st.wait_ns > 9 * MSEC, "{st:?}");
}

#[test]
fn highpri_workers_run_at_nice_minus_20() {
    let (sim, sched) = machine(1);
    let s = sched.clone();
    sched.spawn(
        "hog",
        CgroupId::ROOT,
        0,
        async move { s.cpu(crate_sec()).await },
    );
    let flags = WqFlags {
        highpri: true,
        ..WqFlags::default()
    };
    let wq = alloc_workqueue(&sched, "hi", flags, 1);
    let log = new_log();
    queue_work(&wq, &cpu_work(&sched, "w", 10 * MSEC, &log));
    sim.run_until(100 * MSEC).unwrap();
    // Weight 88761 vs 1024: the worker gets ~99% of the CPU.
    let end = log.borrow()[0].2;
    assert!(end < 11 * MSEC, "end {end}");
    let name = sched.task_name(wq.worker_tasks()[0]).unwrap();
    assert_eq!(&*name, "kworker/u3:0-hi");
}

#[test]
fn queue_latency_and_exec_time_are_recorded() {
    let (sim, sched) = machine(4);
    let wq = alloc_workqueue(&sched, "wq", unbound(), 1);
    let log = new_log();
    for i in 0..3 {
        queue_work(&wq, &cpu_work(&sched, &format!("w{i}"), 10 * MSEC, &log));
    }
    sim.run().unwrap();
    let st = wq.stats();
    assert_eq!(st.executed, 3);
    let lat = &st.queue_latency_ns;
    // Latencies 0, 10 and 20 ms.
    assert_eq!(lat.len(), 3);
    assert_eq!(lat.min(), 0);
    assert!(
        lat.equivalent(lat.max(), 20 * MSEC),
        "max {} min {} mean {}",
        lat.max(),
        lat.min(),
        lat.mean()
    );
    assert!(lat.equivalent(lat.value_at_quantile(0.5), 10 * MSEC));
    let ex = &st.exec_time_ns;
    assert_eq!(ex.len(), 3);
    assert!(ex.equivalent(ex.min(), 10 * MSEC) && ex.equivalent(ex.max(), 10 * MSEC));
}

#[test]
fn trace_events_use_kernel_tracepoint_names() {
    let (sim, sched) = machine(1);
    sim.set_trace(TraceSink::Memory(Vec::new()));
    let wq = alloc_workqueue(&sched, "writeback", unbound(), 1);
    let log = new_log();
    queue_work(&wq, &cpu_work(&sched, "wb_workfn", 100 * USEC, &log));
    queue_work(&wq, &cpu_work(&sched, "other", 100 * USEC, &log));
    sim.run().unwrap();
    let t = sim.take_trace();
    let names: Vec<&str> = t.iter().map(|e| e.name).collect();
    assert_eq!(
        names,
        vec![
            "workqueue_queue_work",
            "workqueue_activate_work",
            "workqueue_queue_work", // over max_active: not activated yet
            "workqueue_execute_start",
            "workqueue_execute_end",
            "workqueue_activate_work",
            "workqueue_execute_start",
            "workqueue_execute_end",
        ]
    );
    assert!(t[3].fields.contains("function=wb_workfn"));
    assert!(t[3].fields.contains("workqueue=writeback"));
    assert_eq!(t[3].task, "kworker/u2:0-writeback");
    assert_eq!(t[4].time, 100 * USEC);
}

#[test]
fn destroy_workqueue_drains_then_ends_workers() {
    let (sim, sched) = machine(2);
    let wq = alloc_workqueue(&sched, "wq", unbound(), 2);
    let log = new_log();
    for i in 0..3 {
        queue_work(&wq, &cpu_work(&sched, &format!("w{i}"), 10 * MSEC, &log));
    }
    let (q, sm) = (wq.clone(), sim.clone());
    let h = sim.spawn("destroyer", async move {
        destroy_workqueue(&q).await;
        sm.now()
    });
    sim.run().unwrap();
    assert_eq!(h.result(), Some(20 * MSEC));
    assert_eq!(log.borrow().len(), 3);
    for t in wq.worker_tasks() {
        assert!(!sim.is_alive(t));
    }
}

#[test]
fn queue_rcu_work_runs_only_after_a_grace_period() {
    let (sim, sched) = machine(1);
    let params = RcuParams {
        gp_normal: GpDuration::Fixed(5 * MSEC),
        ..RcuParams::default()
    };
    let rcu = Rcu::new(&sim, params).unwrap();
    let wq = alloc_workqueue(&sched, "wq", WqFlags::default(), 1);
    let starts = Rc::new(RefCell::new(Vec::new()));
    let rw = RcuWork::new("rw", {
        let (s, st) = (sim.clone(), starts.clone());
        move || {
            let (s, st) = (s.clone(), st.clone());
            async move { st.borrow_mut().push(s.now()) }
        }
    });
    let (r, q, w, sm) = (rcu.clone(), wq.clone(), rw.clone(), sim.clone());
    let h = sim.spawn("queuer", async move {
        sm.sleep(MSEC).await;
        let a = queue_rcu_work(&r, &q, &w);
        // Pending through the grace period.
        let b = queue_rcu_work(&r, &q, &w);
        // Not on a workqueue yet: flush_work does not wait (as in the kernel).
        let waited = flush_work(w.work()).await;
        (a, b, waited, sm.now())
    });
    sim.run().unwrap();
    assert_eq!(h.result(), Some((true, false, false, MSEC)));
    // Queued at 1 ms; a 5 ms grace period that starts then ends at 6 ms.
    assert_eq!(*starts.borrow(), vec![6 * MSEC]);
    assert_eq!(rw.work().runs(), 1);
}

#[test]
fn self_requeueing_work_flush_waits_for_one_instance_drain_for_all() {
    let (sim, sched) = machine(1);
    let wq = alloc_workqueue(&sched, "wq", WqFlags::default(), 1);
    let left = Rc::new(Cell::new(4u32));
    let slot: Rc<RefCell<Option<Work>>> = Rc::new(RefCell::new(None));
    let w = Work::new("chain", {
        let (s, q, left, slot) = (sched.clone(), wq.clone(), left.clone(), slot.clone());
        move || {
            let (s, q, left, slot) = (s.clone(), q.clone(), left.clone(), slot.clone());
            async move {
                s.cpu(MSEC).await;
                if left.get() > 0 {
                    left.set(left.get() - 1);
                    let me = slot.borrow().clone().unwrap();
                    assert!(queue_work(&q, &me));
                }
            }
        }
    });
    *slot.borrow_mut() = Some(w.clone());
    queue_work(&wq, &w);
    let (q, sm) = (wq.clone(), sim.clone());
    let h = sim.spawn("flusher", async move {
        flush_workqueue(&q).await;
        let t_flush = sm.now();
        drain_workqueue(&q).await;
        (t_flush, sm.now())
    });
    sim.run().unwrap();
    // The first run ends at 1 ms (its requeue came after the flush started);
    // the drain waits for all 5 runs.
    assert_eq!(h.result(), Some((MSEC, 5 * MSEC)));
    assert_eq!(w.runs(), 5);
    slot.borrow_mut().take(); // break the cycle work -> closure -> work
}

/// A work item that records the CPU it ran on.
fn where_work(sched: &Sched, name: &str, ran_on: &Rc<RefCell<Vec<Option<usize>>>>) -> Work {
    let (s, r) = (sched.clone(), ran_on.clone());
    Work::new(name, move || {
        let (s, r) = (s.clone(), r.clone());
        async move {
            s.cpu(10 * USEC).await;
            r.borrow_mut().push(s.current_cpu());
        }
    })
}

#[test]
fn bound_work_runs_on_the_cpu_that_queued_it() {
    let (sim, sched) = machine(4);
    let bound = alloc_workqueue(&sched, "bound", WqFlags::default(), 0);
    let ran_on = Rc::new(RefCell::new(Vec::new()));
    // A task that runs on some CPU, then queues from it (its CPU as the
    // kernel's smp_processor_id()).
    let (s, wq, r) = (sched.clone(), bound.clone(), ran_on.clone());
    let t = sched.spawn("queuer", CgroupId::ROOT, 0, async move {
        s.cpu(USEC).await;
        let me = s.current_cpu();
        queue_work(&wq, &where_work(&s, "from-task", &r));
        me
    });
    // A device completion on CPU 3 (an interrupt there) queues another.
    let (s, wq, r) = (sched.clone(), bound.clone(), ran_on.clone());
    sim.schedule_in(MSEC, move || {
        s.in_irq_on(Some(3), || queue_work(&wq, &where_work(&s, "from-irq", &r)));
    });
    // And a timer callback, which stands for no CPU: any worker may serve it.
    let (s, wq, r) = (sched.clone(), bound.clone(), ran_on.clone());
    sim.schedule_in(2 * MSEC, move || {
        queue_work(&wq, &where_work(&s, "from-timer", &r));
    });
    sim.run().unwrap();
    let queuer_cpu = t.result().unwrap();
    assert!(queuer_cpu.is_some());
    let got = ran_on.borrow().clone();
    assert_eq!(got[0], queuer_cpu, "{got:?}");
    assert_eq!(got[1], Some(3), "{got:?}");
    assert!(got[2].is_some());
    // Bound workers carry their CPU in their names; the timer's is unbound.
    let mut names: Vec<String> = bound
        .worker_tasks()
        .iter()
        .map(|&t| sched.task_name(t).unwrap().to_string())
        .collect();
    names.sort();
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(
        names.contains(&"kworker/3:1-bound".to_string()),
        "{names:?}"
    );
    assert!(
        names.iter().any(|n| n.starts_with("kworker/u")),
        "{names:?}"
    );
}
