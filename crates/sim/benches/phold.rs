//! PHOLD on the wbsim engine: the standard synthetic benchmark of a
//! discrete-event engine's raw event rate (Fujimoto, "Performance of Time Warp
//! under synthetic workloads", 1990).
//!
//! The model, identical in `benches/peers/` (NeXosim, SimPy):
//! - N logical processes (LPs); at start each LP has one event pending at
//!   `Exp(mean) + lookahead`.
//! - When an event fires at an LP, that LP schedules one new event on an LP `j`
//!   drawn uniformly from `0..N`, at `now + Exp(mean) + lookahead`.
//! - mean = 1000 ns and lookahead = 100 ns (1 us and 0.1 us in the float-time
//!   peers); the exponential draw is rounded to whole ns.
//! - The run stops after a fixed number of fired events; we report events per
//!   second of wall time on one thread.
//!
//! Two formulations of an event, both reported:
//! - `callback`: each event is `sim.schedule_at(t, closure)` and the closure
//!   schedules the next one. This is the engine's raw speed.
//! - `async`: one task per LP; an event is a timer (`sim.wake_at(t, waker)`) that
//!   wakes the destination LP's task. The sender also puts the event's due time
//!   in the destination's mailbox (a min-heap), and the woken task handles every
//!   mailbox entry already due, so several pending (even simultaneous) events
//!   are each handled exactly once whatever the wakeups coalesce into.
//!
//! Run: `cargo bench -p wbsim-sim --bench phold`. Environment:
//! `PHOLD_QUICK=1` (fewer events), `PHOLD_EVENTS=n` (events per run),
//! `PHOLD_N=1000,10000` (which LP counts).
//!
//! The example `examples/phold.rs` reuses [`run_callback`] and [`run_async`].

use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::Instant;

use rand::Rng;
use rand_distr::{Distribution, Exp1};
use sim::{Sim, SimRng, Time};

/// Mean of the exponential part of an event's delay, ns (PHOLD's usual 1 time unit).
pub const MEAN_NS: f64 = 1000.0;
/// Lookahead added to every delay, ns (0.1 time unit, the usual PHOLD choice).
pub const LOOKAHEAD_NS: Time = 100;

/// Result of one PHOLD run.
#[derive(Clone, Copy, Debug)]
pub struct PholdResult {
    /// Logical processes.
    pub n: usize,
    /// Events fired.
    pub events: u64,
    /// Wall time of `sim.run()`, s (building the LPs and scheduling their first
    /// events is not counted; the async tasks' first polls are).
    pub secs: f64,
    /// Virtual time reached, ns (a sanity check: about events * 1.1 us / N).
    pub sim_ns: Time,
}

impl PholdResult {
    /// Events per wall-clock second.
    pub fn events_per_s(&self) -> f64 {
        self.events as f64 / self.secs
    }
}

/// One event's delay: `round(Exp(MEAN_NS)) + LOOKAHEAD_NS`, ns (rounded by
/// adding 0.5 and truncating, which is `round` for these non-negative values and
/// avoids a libm call).
#[inline]
fn delay(rng: &mut SimRng) -> Time {
    let e: f64 = Exp1.sample(rng);
    (e * MEAN_NS + 0.5) as Time + LOOKAHEAD_NS
}

/// One random stream per LP, so the event pattern does not depend on the order in
/// which simultaneous events are handled.
fn lp_rngs(sim: &Sim, n: usize) -> Vec<SimRng> {
    (0..n).map(|i| sim.rng(&format!("phold.lp{i}"))).collect()
}

// ------------------------------------------------------------------ callback

struct CbState {
    sim: Sim,
    rngs: RefCell<Vec<SimRng>>,
    n: u32,
    fired: Cell<u64>,
    limit: u64,
}

fn cb_fire(st: &Rc<CbState>, lp: u32) {
    let fired = st.fired.get() + 1;
    st.fired.set(fired);
    if fired >= st.limit {
        st.sim.stop();
        return;
    }
    let (dst, d) = {
        let mut rngs = st.rngs.borrow_mut();
        let rng = &mut rngs[lp as usize];
        (rng.random_range(0..st.n), delay(rng))
    };
    let st2 = st.clone();
    st.sim
        .schedule_at(st.sim.now() + d, move || cb_fire(&st2, dst));
}

/// PHOLD with one callback timer per event, stopping after `events` events.
pub fn run_callback(n: usize, events: u64, seed: u64) -> PholdResult {
    assert!(n > 0 && n <= u32::MAX as usize, "PHOLD needs 1..2^32 LPs");
    let sim = Sim::new(seed);
    let rngs = lp_rngs(&sim, n);
    let st = Rc::new(CbState {
        sim: sim.clone(),
        rngs: RefCell::new(rngs),
        n: n as u32,
        fired: Cell::new(0),
        limit: events,
    });
    for lp in 0..n as u32 {
        let d = delay(&mut st.rngs.borrow_mut()[lp as usize]);
        let st2 = st.clone();
        sim.schedule_at(d, move || cb_fire(&st2, lp));
    }
    let start = Instant::now();
    sim.run().expect("PHOLD has no tasks to deadlock");
    let secs = start.elapsed().as_secs_f64();
    PholdResult {
        n,
        events: st.fired.get(),
        secs,
        sim_ns: sim.now(),
    }
}

// --------------------------------------------------------------------- async

struct AsyncState {
    sim: Sim,
    rngs: RefCell<Vec<SimRng>>,
    /// Per LP: due times of its pending events (earliest first).
    mailboxes: RefCell<Vec<BinaryHeap<Reverse<Time>>>>,
    /// Per LP: its task's waker (filled in once every task is spawned).
    wakers: RefCell<Vec<Waker>>,
    n: u32,
    fired: Cell<u64>,
    limit: u64,
}

impl AsyncState {
    /// Sends an event to LP `dst`, due at `at`.
    fn send(&self, dst: u32, at: Time) {
        self.mailboxes.borrow_mut()[dst as usize].push(Reverse(at));
        let w = self.wakers.borrow()[dst as usize].clone();
        self.sim.wake_at(at, w);
    }

    /// Takes LP `lp`'s earliest event if it is due now.
    fn take_due(&self, lp: u32) -> bool {
        let now = self.sim.now();
        let mut mb = self.mailboxes.borrow_mut();
        let q = &mut mb[lp as usize];
        match q.peek() {
            Some(&Reverse(t)) if t <= now => {
                q.pop();
                true
            }
            _ => false,
        }
    }
}

async fn lp_task(st: Rc<AsyncState>, lp: u32) {
    loop {
        std::future::poll_fn(|_cx| {
            // The waker is the one registered in `wakers`; a timer wakes it.
            if st.take_due(lp) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
        let fired = st.fired.get() + 1;
        st.fired.set(fired);
        if fired >= st.limit {
            st.sim.stop();
        }
        let (dst, d) = {
            let mut rngs = st.rngs.borrow_mut();
            let rng = &mut rngs[lp as usize];
            (rng.random_range(0..st.n), delay(rng))
        };
        st.send(dst, st.sim.now() + d);
    }
}

/// PHOLD with one task per LP woken by a timer per event, stopping after
/// `events` events.
pub fn run_async(n: usize, events: u64, seed: u64) -> PholdResult {
    assert!(n > 0 && n <= u32::MAX as usize, "PHOLD needs 1..2^32 LPs");
    let sim = Sim::new(seed);
    let rngs = lp_rngs(&sim, n);
    let st = Rc::new(AsyncState {
        sim: sim.clone(),
        rngs: RefCell::new(rngs),
        mailboxes: RefCell::new(vec![BinaryHeap::new(); n]),
        wakers: RefCell::new(Vec::with_capacity(n)),
        n: n as u32,
        fired: Cell::new(0),
        limit: events,
    });
    let mut ids = Vec::with_capacity(n);
    for lp in 0..n as u32 {
        let h = sim.spawn_daemon("lp", lp_task(st.clone(), lp));
        ids.push(h.id());
    }
    for &id in &ids {
        let w = sim.waker(id).expect("just spawned");
        st.wakers.borrow_mut().push(w);
    }
    for lp in 0..n as u32 {
        let d = delay(&mut st.rngs.borrow_mut()[lp as usize]);
        st.send(lp, d);
    }
    let start = Instant::now();
    sim.run().expect("PHOLD tasks are daemons");
    let secs = start.elapsed().as_secs_f64();
    // Break the Sim -> task -> state -> Sim cycle so the run's memory is freed.
    for id in ids {
        sim.cancel(id);
    }
    st.wakers.borrow_mut().clear();
    PholdResult {
        n,
        events: st.fired.get(),
        secs,
        sim_ns: sim.now(),
    }
}

// ---------------------------------------------------------------------- main

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

#[allow(dead_code)] // unused when the example includes this file as a module
fn main() {
    // `cargo bench` passes `--bench`; other arguments (filters) are ignored.
    let quick = std::env::var("PHOLD_QUICK").is_ok_and(|v| v != "0");
    let events = env_u64("PHOLD_EVENTS").unwrap_or(if quick { 500_000 } else { 5_000_000 });
    let ns: Vec<usize> = std::env::var("PHOLD_N")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1_000, 10_000, 100_000]);
    println!("PHOLD on wbsim (mean {MEAN_NS} ns, lookahead {LOOKAHEAD_NS} ns, one thread)");
    println!(
        "{:>8}  {:<9} {:>10} {:>8} {:>14}",
        "N", "variant", "events", "wall s", "events/s"
    );
    for &n in &ns {
        for (name, f) in [
            (
                "callback",
                run_callback as fn(usize, u64, u64) -> PholdResult,
            ),
            ("async", run_async),
        ] {
            let r = f(n, events, 1);
            println!(
                "{:>8}  {:<9} {:>10} {:>8.3} {:>14.0}",
                r.n,
                name,
                r.events,
                r.secs,
                r.events_per_s()
            );
        }
    }
}
