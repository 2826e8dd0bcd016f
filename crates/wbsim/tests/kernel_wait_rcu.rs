//! Known-answer tests for the wait primitives (model/kernel/wait.rs) and RCU
//! (model/kernel/rcu.rs). All durations are fixed, so every time asserted is
//! exact.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use sim::{Sim, Time, TraceSink, MSEC, USEC};
use wbsim::model::kernel::rcu::{GpDuration, Rcu, RcuParams};
use wbsim::model::kernel::wait::{Completion, VarKey, WaitQueue, WaitVarTable, COMPLETION_ALL};

type Log = Rc<RefCell<Vec<(String, Time)>>>;

fn log() -> Log {
    Rc::new(RefCell::new(Vec::new()))
}

fn push(l: &Log, what: impl Into<String>, t: Time) {
    l.borrow_mut().push((what.into(), t));
}

fn entries(l: &Log) -> Vec<(String, Time)> {
    l.borrow().clone()
}

// ------------------------------------------------------------------------ RCU

const GP: Time = 5 * MSEC;
const EXP: Time = 50 * USEC;

fn params(preempt_rt: bool) -> RcuParams {
    RcuParams {
        gp_normal: GpDuration::Fixed(GP),
        gp_expedited: GpDuration::Fixed(EXP),
        ..RcuParams::for_kernel(preempt_rt)
    }
}

fn rcu(sim: &Sim) -> Rcu {
    Rcu::new(sim, params(false)).unwrap()
}

/// Spawns a task that calls synchronize_rcu at `at` and logs its return time.
fn sync_at(sim: &Sim, rcu: &Rcu, l: &Log, name: &str, at: Time) {
    let (s, r, l, n) = (sim.clone(), rcu.clone(), l.clone(), name.to_string());
    sim.spawn(name.to_string(), async move {
        s.sleep_until(at).await;
        r.synchronize_rcu().await;
        push(&l, n, s.now());
    });
}

/// Spawns a reader holding rcu_read_lock over [from, to].
fn reader(sim: &Sim, rcu: &Rcu, from: Time, to: Time) {
    let (s, r) = (sim.clone(), rcu.clone());
    sim.spawn("reader", async move {
        s.sleep_until(from).await;
        let g = r.rcu_read_lock();
        s.sleep_until(to).await;
        drop(g);
    });
}

#[test]
fn synchronize_rcu_with_no_readers_takes_one_grace_period() {
    let sim = Sim::new(1);
    let rcu = rcu(&sim);
    let l = log();
    sync_at(&sim, &rcu, &l, "a", 0);
    sim.run().unwrap();
    assert_eq!(entries(&l), vec![("a".into(), GP)]);
    assert_eq!(rcu.gp_seq(), 4); // one GP: 0 -> 1 (start) -> 4 (end)
    assert!(!rcu.gp_in_progress());
    let st = rcu.stats();
    assert_eq!((st.gps, st.gp_total_ns, st.gp_reader_wait_ns), (1, GP, 0));
    assert_eq!(st.gp_mean_ns(), Some(GP as f64));
}

#[test]
fn synchronize_rcu_waits_for_earlier_reader_not_later_one() {
    let sim = Sim::new(1);
    let rcu = rcu(&sim);
    let l = log();
    reader(&sim, &rcu, 0, 12 * MSEC); // inside its section when the GP starts
    reader(&sim, &rcu, 2 * MSEC, 40 * MSEC); // starts after the GP started
    sync_at(&sim, &rcu, &l, "a", MSEC);
    sim.run_until(3 * MSEC).unwrap();
    assert_eq!(rcu.nr_readers(), 2);
    assert!(rcu.gp_in_progress());
    sim.run().unwrap();
    // GP [1 ms, 6 ms] is held until the first reader leaves at 12 ms.
    assert_eq!(entries(&l), vec![("a".into(), 12 * MSEC)]);
    let st = rcu.stats();
    assert_eq!(st.gps, 1);
    assert_eq!(st.gp_total_ns, 11 * MSEC);
    assert_eq!(st.gp_reader_wait_ns, 6 * MSEC);
}

#[test]
fn reader_starting_after_the_grace_period_does_not_hold_it() {
    let sim = Sim::new(1);
    let rcu = rcu(&sim);
    let l = log();
    reader(&sim, &rcu, 2 * MSEC, 100 * MSEC);
    sync_at(&sim, &rcu, &l, "a", MSEC);
    sim.run().unwrap();
    assert_eq!(entries(&l), vec![("a".into(), MSEC + GP)]);
}

#[test]
fn caller_arriving_mid_grace_period_needs_the_next_one() {
    let sim = Sim::new(1);
    let rcu = rcu(&sim);
    let l = log();
    sync_at(&sim, &rcu, &l, "a", 0); // GP1 [0, 5 ms]
    sync_at(&sim, &rcu, &l, "b", 2 * MSEC); // needs GP2 [5, 10 ms]
    sim.run().unwrap();
    assert_eq!(
        entries(&l),
        vec![("a".into(), GP), ("b".into(), 2 * GP)] // b: 3 ms remainder + 5 ms
    );
    assert_eq!(rcu.stats().gps, 2);
    assert_eq!(rcu.gp_seq(), 8);
}

#[test]
fn callers_during_one_grace_period_are_batched_onto_the_next() {
    let sim = Sim::new(1);
    sim.set_trace(TraceSink::Memory(Vec::new()));
    let rcu = rcu(&sim);
    let l = log();
    sync_at(&sim, &rcu, &l, "first", 0); // GP1 [0, 5 ms]
    for i in 0..10 {
        sync_at(&sim, &rcu, &l, &format!("c{i}"), MSEC + i * 300 * USEC);
    }
    sim.run().unwrap();
    let got = entries(&l);
    assert_eq!(got[0], ("first".into(), GP));
    assert_eq!(got.len(), 11);
    assert!(got[1..].iter().all(|(_, t)| *t == 2 * GP), "{got:?}");
    // Exactly one more GP served all ten.
    assert_eq!(rcu.stats().gps, 2);
    let trace: Vec<(Time, String)> = sim
        .take_trace()
        .into_iter()
        .filter(|e| e.name == "rcu_grace_period")
        .map(|e| (e.time, e.fields))
        .collect();
    assert_eq!(
        trace,
        vec![
            (0, "rcu_preempt 1 start".to_string()),
            (GP, "rcu_preempt 4 end".to_string()),
            (GP, "rcu_preempt 5 start".to_string()),
            (2 * GP, "rcu_preempt 8 end".to_string()),
        ]
    );
}

#[test]
fn callers_at_one_instant_share_one_grace_period() {
    let sim = Sim::new(1);
    let rcu = rcu(&sim);
    let l = log();
    for i in 0..10 {
        sync_at(&sim, &rcu, &l, &format!("c{i}"), MSEC);
    }
    sim.run().unwrap();
    let got = entries(&l);
    assert_eq!(got.len(), 10);
    assert!(got.iter().all(|(_, t)| *t == MSEC + GP), "{got:?}");
    assert_eq!(rcu.stats().gps, 1);
    assert_eq!(rcu.stats().synchronize_calls, 10);
}

#[test]
fn expedited_is_short_on_non_rt() {
    let sim = Sim::new(1);
    let rcu = rcu(&sim);
    assert!(!rcu.rcu_gp_is_normal());
    let (s, r) = (sim.clone(), rcu.clone());
    let h = sim.spawn("exp", async move {
        r.synchronize_rcu_expedited().await;
        s.now()
    });
    sim.run().unwrap();
    assert_eq!(h.result(), Some(EXP));
    let st = rcu.stats();
    assert_eq!((st.expedited_gps, st.gps, st.expedited_calls), (1, 0, 1));
    assert_eq!(rcu.exp_seq(), 4);
    assert_eq!(rcu.gp_seq(), 0);
}

#[test]
fn expedited_waits_for_earlier_reader() {
    let sim = Sim::new(1);
    let rcu = rcu(&sim);
    reader(&sim, &rcu, 0, MSEC);
    let (s, r) = (sim.clone(), rcu.clone());
    let h = sim.spawn("exp", async move {
        s.sleep(10 * USEC).await;
        r.synchronize_rcu_expedited().await;
        s.now()
    });
    sim.run().unwrap();
    assert_eq!(h.result(), Some(MSEC));
}

#[test]
fn expedited_is_a_normal_grace_period_on_rt_with_rcu_normal_after_boot() {
    let sim = Sim::new(1);
    let rcu = Rcu::new(&sim, params(true)).unwrap();
    assert!(rcu.params().rcu_normal_after_boot);
    assert!(rcu.rcu_gp_is_normal());
    let (s, r) = (sim.clone(), rcu.clone());
    let h = sim.spawn("exp", async move {
        r.synchronize_rcu_expedited().await;
        s.now()
    });
    sim.run().unwrap();
    assert_eq!(h.result(), Some(GP));
    let st = rcu.stats();
    assert_eq!((st.expedited_gps, st.gps), (0, 1));
}

#[test]
fn call_rcu_callbacks_run_after_a_grace_period_in_order() {
    let sim = Sim::new(1);
    let rcu = rcu(&sim);
    let l = log();
    let (s, r, lg) = (sim.clone(), rcu.clone(), l.clone());
    let h = sim.spawn("caller", async move {
        for i in 0..3 {
            let (s2, l2) = (s.clone(), lg.clone());
            r.call_rcu_hurry(move || push(&l2, format!("cb{i}"), s2.now()));
        }
        let returned = s.now(); // call_rcu does not block
        s.sleep(2 * MSEC).await;
        let (s2, l2) = (s.clone(), lg.clone());
        r.call_rcu_hurry(move || push(&l2, "late", s2.now())); // queued mid-GP
        returned
    });
    sim.run().unwrap();
    assert_eq!(h.result(), Some(0));
    assert_eq!(
        entries(&l),
        vec![
            ("cb0".into(), GP),
            ("cb1".into(), GP),
            ("cb2".into(), GP),
            ("late".into(), 2 * GP),
        ]
    );
    let st = rcu.stats();
    assert_eq!((st.callbacks_queued, st.callbacks_invoked), (4, 4));
    assert_eq!(rcu.pending_callbacks(), 0);
}

#[test]
fn rcu_barrier_waits_for_queued_callbacks_only() {
    let sim = Sim::new(1);
    let rcu = rcu(&sim);
    let done = Rc::new(Cell::new(0));
    let (s, r, d) = (sim.clone(), rcu.clone(), done.clone());
    let h = sim.spawn("barrier", async move {
        r.rcu_barrier().await; // nothing queued: returns at once
        let t0 = s.now();
        let d1 = d.clone();
        r.call_rcu_hurry(move || d1.set(d1.get() + 1));
        s.sleep(2 * MSEC).await;
        let d2 = d.clone();
        r.call_rcu_hurry(move || d2.set(d2.get() + 1)); // needs GP2 [5, 10 ms]
        s.sleep(MSEC).await;
        r.rcu_barrier().await;
        (t0, s.now(), d.get())
    });
    sim.run().unwrap();
    assert_eq!(h.result(), Some((0, 2 * GP, 2)));
}

#[test]
fn callback_cost_spaces_invocations_and_barrier_waits_for_all() {
    let sim = Sim::new(1);
    let p = RcuParams {
        callback_cost_ns: 100 * USEC,
        ..params(false)
    };
    let rcu = Rcu::new(&sim, p).unwrap();
    let l = log();
    let (s, r, lg) = (sim.clone(), rcu.clone(), l.clone());
    let h = sim.spawn("caller", async move {
        for i in 0..3 {
            let (s2, l2) = (s.clone(), lg.clone());
            r.call_rcu_hurry(move || push(&l2, format!("cb{i}"), s2.now()));
        }
        r.rcu_barrier().await;
        s.now()
    });
    sim.run().unwrap();
    assert_eq!(
        entries(&l),
        vec![
            ("cb0".into(), GP + 100 * USEC),
            ("cb1".into(), GP + 200 * USEC),
            ("cb2".into(), GP + 300 * USEC),
        ]
    );
    assert_eq!(h.result(), Some(GP + 300 * USEC));
}

#[test]
fn polled_grace_period_api() {
    let sim = Sim::new(1);
    let rcu = rcu(&sim);
    let cookie = rcu.start_poll_synchronize_rcu();
    assert!(!rcu.poll_state_synchronize_rcu(cookie));
    sim.run_until(GP - 1).unwrap();
    assert!(!rcu.poll_state_synchronize_rcu(cookie));
    sim.run().unwrap();
    assert!(rcu.poll_state_synchronize_rcu(cookie));
    assert_eq!(sim.now(), GP);
}

#[test]
fn reader_blocked_forever_shows_synchronize_rcu_in_deadlock_report() {
    let sim = Sim::new(1);
    let rcu = rcu(&sim);
    let wq = WaitQueue::new("never");
    let (s, r, q) = (sim.clone(), rcu.clone(), wq.clone());
    sim.spawn("reader", async move {
        let _g = r.rcu_read_lock();
        q.wait_event(&s, || false).await;
    });
    sync_at(&sim, &rcu, &log(), "syncer", MSEC);
    let err = sim.run().unwrap_err();
    let what: Vec<(&str, &str)> = err
        .blocked
        .iter()
        .map(|b| (b.name.as_str(), b.waiting_on.as_str()))
        .collect();
    assert_eq!(
        what,
        vec![
            ("reader", "wait_queue:never"),
            ("syncer", "rcu:synchronize_rcu")
        ]
    );
    assert!(rcu.gp_in_progress());
}

// ----------------------------------------------------------------- wait queues

#[test]
fn wait_event_rechecks_and_loses_no_wakeup() {
    let sim = Sim::new(1);
    let wq = WaitQueue::new("wq");
    let flag = Rc::new(Cell::new(false));
    let checks = Rc::new(Cell::new(0));
    let (s, q, f, c) = (sim.clone(), wq.clone(), flag.clone(), checks.clone());
    let h = sim.spawn("waiter", async move {
        q.wait_event(&s, || {
            c.set(c.get() + 1);
            f.get()
        })
        .await;
        s.now()
    });
    let (s, q, f) = (sim.clone(), wq.clone(), flag.clone());
    sim.spawn("waker", async move {
        s.sleep(MSEC).await;
        assert_eq!(q.wake_up(), 1); // spurious: condition still false
        s.sleep(MSEC).await;
        f.set(true);
        assert_eq!(q.wake_up(), 1);
    });
    sim.run_until(MSEC + 1).unwrap();
    // Fast path + check after registering + re-check after the spurious wake.
    assert_eq!(checks.get(), 3);
    assert_eq!(wq.nr_waiters(), 1, "re-registered after the spurious wake");
    sim.run().unwrap();
    assert_eq!(h.result(), Some(2 * MSEC));
    assert!(!wq.waitqueue_active());
}

#[test]
fn wake_at_same_instant_as_sleep_is_not_lost() {
    let sim = Sim::new(1);
    let wq = WaitQueue::new("wq");
    let flag = Rc::new(Cell::new(false));
    let (s, q, f) = (sim.clone(), wq.clone(), flag.clone());
    let h = sim.spawn("waiter", async move {
        q.wait_event(&s, || f.get()).await;
        s.now()
    });
    let (q, f) = (wq.clone(), flag.clone());
    sim.spawn("waker", async move {
        f.set(true);
        q.wake_up();
    });
    sim.run().unwrap();
    assert_eq!(h.result(), Some(0));
}

#[test]
fn condition_true_before_waiting_does_not_block_or_register() {
    let sim = Sim::new(1);
    let wq = WaitQueue::new("wq");
    let (s, q) = (sim.clone(), wq.clone());
    let h = sim.spawn("w", async move {
        q.wait_event(&s, || true).await;
        q.nr_waiters()
    });
    sim.run().unwrap();
    assert_eq!(h.result(), Some(0));
}

/// A condition that is false for its first two checks (the fast path and the
/// check after registering) and true afterwards: any wakeup ends the wait.
fn true_after_first_sleep() -> impl FnMut() -> bool {
    let mut n = 0;
    move || {
        n += 1;
        n > 2
    }
}

#[test]
fn wake_up_wakes_all_non_exclusive_and_one_exclusive_fifo() {
    let sim = Sim::new(1);
    let wq = WaitQueue::new("wq");
    let l = log();
    for (name, excl) in [
        ("e0", true),
        ("n0", false),
        ("e1", true),
        ("n1", false),
        ("e2", true),
    ] {
        let (s, q, lg) = (sim.clone(), wq.clone(), l.clone());
        sim.spawn(name, async move {
            if excl {
                q.wait_event_exclusive(&s, true_after_first_sleep()).await;
            } else {
                q.wait_event(&s, true_after_first_sleep()).await;
            }
            push(&lg, name, s.now());
        });
    }
    let (s, q) = (sim.clone(), wq.clone());
    let h = sim.spawn("waker", async move {
        s.sleep(MSEC).await;
        let a = q.wake_up();
        s.sleep(MSEC).await;
        let b = q.wake_up();
        s.sleep(MSEC).await;
        let c = q.wake_up_all();
        let d = q.wake_up();
        (a, b, c, d)
    });
    sim.run().unwrap();
    assert_eq!(h.result(), Some((3, 1, 1, 0)));
    assert_eq!(
        entries(&l),
        vec![
            ("n0".into(), MSEC),
            ("n1".into(), MSEC),
            ("e0".into(), MSEC),
            ("e1".into(), 2 * MSEC),
            ("e2".into(), 3 * MSEC),
        ]
    );
}

#[test]
fn wait_event_timeout_times_out_and_unregisters() {
    let sim = Sim::new(1);
    let wq = WaitQueue::new("wq");
    let flag = Rc::new(Cell::new(false));
    let (s, q, f) = (sim.clone(), wq.clone(), flag.clone());
    let h = sim.spawn("w", async move {
        let f1 = f.clone();
        let first = q.wait_event_timeout(&s, move || f1.get(), 3 * MSEC).await;
        let t1 = s.now();
        let active = q.waitqueue_active();
        let f2 = f.clone();
        let second = q.wait_event_timeout(&s, move || f2.get(), 3 * MSEC).await;
        (first, t1, active, second, s.now())
    });
    let (s, q, f) = (sim.clone(), wq.clone(), flag.clone());
    sim.spawn("waker", async move {
        s.sleep(4 * MSEC).await;
        f.set(true);
        q.wake_up();
    });
    sim.run().unwrap();
    assert_eq!(h.result(), Some((false, 3 * MSEC, false, true, 4 * MSEC)));
    assert_eq!(
        sim.pending_timers(),
        0,
        "the second wait's timer was cancelled"
    );
}

#[test]
fn cancelled_waiter_leaves_the_queue() {
    let sim = Sim::new(1);
    let wq = WaitQueue::new("wq");
    let l = log();
    let mut handles = Vec::new();
    for name in ["a", "b"] {
        let (s, q, lg) = (sim.clone(), wq.clone(), l.clone());
        handles.push(sim.spawn(name, async move {
            q.wait_event_exclusive(&s, true_after_first_sleep()).await;
            push(&lg, name, s.now());
        }));
    }
    let (s, q) = (sim.clone(), wq.clone());
    let w = sim.spawn("waker", async move {
        s.sleep(2 * MSEC).await;
        q.wake_up()
    });
    sim.run_until(MSEC).unwrap();
    assert_eq!(wq.nr_waiters(), 2);
    handles[0].cancel(&sim);
    assert_eq!(wq.nr_waiters(), 1);
    sim.run().unwrap();
    assert_eq!(w.result(), Some(1));
    assert_eq!(entries(&l), vec![("b".into(), 2 * MSEC)]);
}

#[test]
fn exclusive_waiter_woken_then_cancelled_passes_the_wakeup_on() {
    let sim = Sim::new(1);
    let wq = WaitQueue::new("wq");
    let l = log();
    let mut ids = Vec::new();
    for name in ["a", "b", "c"] {
        let (s, q, lg) = (sim.clone(), wq.clone(), l.clone());
        ids.push(
            sim.spawn(name, async move {
                q.wait_event_exclusive(&s, true_after_first_sleep()).await;
                push(&lg, name, s.now());
            })
            .id(),
        );
    }
    let (s, q, a) = (sim.clone(), wq.clone(), ids[0]);
    sim.spawn("waker", async move {
        s.sleep(MSEC).await;
        assert_eq!(q.wake_up(), 1); // chooses a ...
        s.cancel(a); // ... which dies before it runs
    });
    let err = sim.run().unwrap_err(); // c is never woken
    assert_eq!(entries(&l), vec![("b".into(), MSEC)]);
    assert_eq!(err.blocked.len(), 1);
    assert_eq!(err.blocked[0].name, "c");
    assert_eq!(err.blocked[0].waiting_on, "wait_queue:wq (exclusive)");
}

#[test]
fn deadlock_report_names_the_wait_queue() {
    let sim = Sim::new(1);
    let wq = WaitQueue::new("isw_wq_flush");
    let (s, q) = (sim.clone(), wq.clone());
    sim.spawn("umount", async move {
        q.wait_event(&s, || false).await;
    });
    let err = sim.run().unwrap_err();
    assert_eq!(err.blocked.len(), 1);
    assert_eq!(err.blocked[0].name, "umount");
    assert_eq!(err.blocked[0].waiting_on, "wait_queue:isw_wq_flush");
    assert!(err
        .to_string()
        .contains("waiting on wait_queue:isw_wq_flush"));
}

// ----------------------------------------------------------------- completion

#[test]
fn complete_before_wait_does_not_block() {
    let sim = Sim::new(1);
    let c = Completion::new("done");
    c.complete();
    assert!(c.completion_done());
    let (s, c2) = (sim.clone(), c.clone());
    let h = sim.spawn("w", async move {
        c2.wait_for_completion(&s).await;
        (s.now(), c2.try_wait_for_completion())
    });
    sim.run().unwrap();
    assert_eq!(h.result(), Some((0, false))); // the one done was consumed
    assert_eq!(c.done(), 0);
}

#[test]
fn complete_releases_one_waiter_in_order_and_complete_all_releases_all() {
    let sim = Sim::new(1);
    let c = Completion::new("ev");
    let l = log();
    for name in ["w0", "w1", "w2", "w3"] {
        let (s, c2, lg) = (sim.clone(), c.clone(), l.clone());
        sim.spawn(name, async move {
            c2.wait_for_completion(&s).await;
            push(&lg, name, s.now());
        });
    }
    let (s, c2) = (sim.clone(), c.clone());
    let h = sim.spawn("completer", async move {
        s.sleep(MSEC).await;
        c2.complete();
        s.sleep(MSEC).await;
        c2.complete_all();
        s.sleep(MSEC).await;
        // After complete_all, waits never block and never consume.
        c2.wait_for_completion(&s).await;
        let t = s.now();
        let all = c2.done();
        c2.reinit_completion();
        let timed_out = !c2.wait_for_completion_timeout(&s, MSEC).await;
        (t, all, timed_out, s.now())
    });
    sim.run().unwrap();
    assert_eq!(
        entries(&l),
        vec![
            ("w0".into(), MSEC),
            ("w1".into(), 2 * MSEC),
            ("w2".into(), 2 * MSEC),
            ("w3".into(), 2 * MSEC),
        ]
    );
    assert_eq!(h.result(), Some((3 * MSEC, COMPLETION_ALL, true, 4 * MSEC)));
}

#[test]
fn completion_counts_dones() {
    let sim = Sim::new(1);
    let c = Completion::new("ev");
    c.complete();
    c.complete();
    assert_eq!(c.done(), 2);
    assert!(c.try_wait_for_completion());
    assert!(c.try_wait_for_completion());
    assert!(!c.try_wait_for_completion());
    // Deadlock label.
    let (s, c2) = (sim.clone(), c.clone());
    sim.spawn("w", async move { c2.wait_for_completion(&s).await });
    let err = sim.run().unwrap_err();
    assert_eq!(err.blocked[0].waiting_on, "completion:ev (exclusive)");
}

// -------------------------------------------------------------- wait_var_event

#[test]
fn wake_up_var_wakes_all_on_key_and_each_rechecks() {
    let sim = Sim::new(1);
    let table = WaitVarTable::new("bit_wait_table");
    let (k, other) = (VarKey(7), VarKey(8));
    let x = Rc::new(Cell::new(0));
    let l = log();
    for (name, key, need) in [("ge1", k, 1), ("ge2", k, 2), ("other", other, 0)] {
        let (s, t, xv, lg) = (sim.clone(), table.clone(), x.clone(), l.clone());
        let flag = Rc::new(Cell::new(false));
        let f = flag.clone();
        sim.spawn(name, async move {
            if need == 0 {
                // Waits on the other key for a flag set below.
                t.wait_var_event(&s, key, move || f.get()).await;
            } else {
                t.wait_var_event(&s, key, move || xv.get() >= need).await;
            }
            push(&lg, name, s.now());
        });
        if need == 0 {
            let (s, t) = (sim.clone(), table.clone());
            sim.spawn("other-waker", async move {
                s.sleep(3 * MSEC).await;
                flag.set(true);
                t.wake_up_var(other);
            });
        }
    }
    let (s, t, xv) = (sim.clone(), table.clone(), x.clone());
    let h = sim.spawn("waker", async move {
        s.sleep(MSEC).await;
        xv.set(1);
        let a = t.wake_up_var(k);
        s.sleep(USEC).await;
        let left_k = t.nr_waiters(k);
        let left_other = t.nr_waiters(other);
        s.sleep(MSEC).await;
        xv.set(2);
        let b = t.wake_up_var(k);
        (a, left_k, left_other, b)
    });
    sim.run().unwrap();
    // Both waiters on k woken at 1 ms; ge2 re-checked and slept again.
    assert_eq!(h.result(), Some((2, 1, 1, 1)));
    assert_eq!(
        entries(&l),
        vec![
            ("ge1".into(), MSEC),
            ("ge2".into(), 2 * MSEC + USEC),
            ("other".into(), 3 * MSEC),
        ]
    );
}

#[test]
fn wait_var_event_deadlock_label_names_table_and_key() {
    let sim = Sim::new(1);
    let table = WaitVarTable::new("vars");
    let (s, t) = (sim.clone(), table.clone());
    sim.spawn("w", async move {
        t.wait_var_event(&s, VarKey(0x2a), || false).await;
    });
    let err = sim.run().unwrap_err();
    assert_eq!(err.blocked[0].waiting_on, "wait_var:vars key=0x2a");
}
