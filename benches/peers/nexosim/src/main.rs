//! PHOLD on NeXosim 1.0, the same model as `crates/sim/benches/phold.rs`:
//! N logical processes (LPs), one initial event each at `Exp(1 us) + 0.1 us`;
//! an event at an LP schedules one new event on a uniformly random LP at
//! `now + Exp(1 us) + 0.1 us` (the exponential draw rounded to whole ns).
//!
//! NeXosim formulation: each LP is a model with one input, `event`. A model can
//! only schedule on itself through its `Context`, so cross-LP events go through
//! the global `Scheduler` (the same queue the `Context` uses), with one
//! registered `EventSource` (`EventId`) per LP. One event of PHOLD is thus one
//! scheduled NeXosim event delivered to one model input: no extra hop.
//!
//! NeXosim runs models concurrently, so the run is bounded by virtual time
//! rather than by an event count: the horizon is `EVENTS * 1.1 us / N` (PHOLD
//! fires N events per 1.1 us on average) and the events actually fired are
//! counted per LP. Each LP has its own random stream.
//!
//! Usage: `phold-nexosim N EVENTS [THREADS]` (THREADS 0 = NeXosim's default, all
//! logical CPUs); prints one JSON line.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use nexosim::model::{BuildContext, Context, Model, ProtoModel};
use nexosim::ports::EventSource;
use nexosim::simulation::{EventId, Mailbox, Scheduler, SimInit};
use nexosim::time::MonotonicTime;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp1};
use rand_pcg::Pcg64Mcg;
use serde::{Deserialize, Serialize};

/// Mean of the exponential part of a delay, ns.
const MEAN_NS: f64 = 1000.0;
/// Lookahead, ns.
const LOOKAHEAD_NS: u64 = 100;

fn delay(rng: &mut Pcg64Mcg) -> Duration {
    let e: f64 = Exp1.sample(rng);
    // Rounded as in wbsim's version: + 0.5 and truncate (no libm call).
    Duration::from_nanos((e * MEAN_NS + 0.5) as u64 + LOOKAHEAD_NS)
}

/// What every LP shares: the global scheduler and every LP's event id.
#[derive(Default)]
struct Shared {
    scheduler: OnceLock<Scheduler>,
    ids: OnceLock<Vec<EventId<()>>>,
}

/// A per-LP event counter on its own cache line (LPs may run on different threads).
#[repr(align(64))]
#[derive(Default)]
struct Counter(AtomicU64);

/// Non-serialisable part of an LP.
struct LpEnv {
    rng: Pcg64Mcg,
    shared: Arc<Shared>,
    fired: Arc<Counter>,
}

/// One PHOLD logical process.
#[derive(Serialize, Deserialize)]
struct Lp {}

#[Model(type Env = LpEnv)]
impl Lp {
    /// A PHOLD event arrives: schedule the next one on a random LP.
    pub fn event(&mut self, _: (), _cx: &Context<Self>, env: &mut LpEnv) {
        env.fired.0.fetch_add(1, Ordering::Relaxed);
        let ids = env.shared.ids.get().expect("ids set before the run");
        let dst = env.rng.random_range(0..ids.len());
        let d = delay(&mut env.rng);
        env.shared
            .scheduler
            .get()
            .expect("scheduler set before the run")
            .schedule_event(d, &ids[dst], ())
            .expect("delay >= lookahead > 0");
    }
}

struct ProtoLp {
    env: LpEnv,
}

impl ProtoModel for ProtoLp {
    type Model = Lp;
    fn build(self, _cx: &mut BuildContext<Self>) -> (Lp, LpEnv) {
        (Lp {}, self.env)
    }
}

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().unwrap_or_else(|_| usage()))
        .collect();
    let (n, events, threads) = match args[..] {
        [n, e] => (n, e, 0),
        [n, e, t] => (n, e, t),
        _ => usage(),
    };
    if n == 0 || events == 0 {
        usage();
    }
    let n = n as usize;
    let threads_used = if threads == 0 {
        std::thread::available_parallelism().map_or(1, |p| p.get())
    } else {
        threads as usize
    };

    let start = Instant::now();
    let shared = Arc::new(Shared::default());
    let mut bench = if threads == 0 {
        SimInit::new()
    } else {
        SimInit::with_num_threads(threads as usize)
    };
    let mut ids = Vec::with_capacity(n);
    let mut counters = Vec::with_capacity(n);
    let mut init_rngs = Vec::with_capacity(n);
    for i in 0..n {
        let mbox = Mailbox::new();
        ids.push(
            EventSource::new()
                .connect(Lp::event, &mbox)
                .register(&mut bench),
        );
        let fired = Arc::new(Counter::default());
        counters.push(fired.clone());
        let mut rng = Pcg64Mcg::seed_from_u64(splitmix64(i as u64 + 1));
        init_rngs.push(delay(&mut rng));
        let env = LpEnv {
            rng,
            shared: shared.clone(),
            fired,
        };
        bench = bench.add_model(ProtoLp { env }, mbox, &format!("lp{i}"));
    }
    let t0 = MonotonicTime::EPOCH;
    let mut simu = bench.init(t0).expect("init");
    let scheduler = simu.scheduler();
    for (i, d) in init_rngs.into_iter().enumerate() {
        scheduler
            .schedule_event(t0 + d, &ids[i], ())
            .expect("future");
    }
    let _ = shared.scheduler.set(scheduler);
    let _ = shared.ids.set(ids);
    let setup = start.elapsed().as_secs_f64();

    let horizon_ns = (events as f64 * (MEAN_NS + LOOKAHEAD_NS as f64) / n as f64).round() as u64;
    let start = Instant::now();
    simu.step_until(t0 + Duration::from_nanos(horizon_ns))
        .expect("run");
    let secs = start.elapsed().as_secs_f64();
    let fired: u64 = counters.iter().map(|c| c.0.load(Ordering::Relaxed)).sum();
    println!(
        "{{\"engine\":\"nexosim\",\"threads\":{threads_used},\"N\":{n},\"events\":{fired},\"secs\":{secs:.6},\"events_per_s\":{:.1},\"setup_secs\":{setup:.3},\"sim_ns\":{horizon_ns}}}",
        fired as f64 / secs
    );
}

fn usage() -> ! {
    eprintln!("usage: phold-nexosim N EVENTS [THREADS]   (THREADS 0 = default)");
    std::process::exit(2);
}
