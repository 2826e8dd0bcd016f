//! wbsim's discrete-event engine.
//!
//! Virtual time in nanoseconds (`u64`), a single-threaded executor for `async`
//! tasks, timers with cancellation, deterministic tie-breaking (events at the same
//! instant run in the order they were scheduled), a seeded RNG with named
//! substreams, and a trace sink for events named like kernel tracepoints.
//!
//! The engine knows nothing of kernels: CPUs, locks, RCU and the page cache are
//! built on top of it in the `wbsim` crate. What it leaves out on purpose:
//! threads (one simulation runs on one thread; parallelism is across independent
//! runs) and real time (nothing here ever reads a clock).
//!
//! ```
//! use sim::{Sim, MSEC};
//! let sim = Sim::new(1);
//! let s = sim.clone();
//! let h = sim.spawn("sleeper", async move {
//!     s.sleep(5 * MSEC).await;
//!     s.now()
//! });
//! sim.run().unwrap();
//! assert_eq!(h.result(), Some(5 * MSEC));
//! ```

mod executor;
mod queue;
mod rng;
mod slab;
mod smallfn;
mod task;
mod time;
mod timers;
mod trace;

pub use executor::{
    yield_now, BlockedTask, Deadlock, JoinHandle, RunOutcome, Sim, Sleep, TaskId, TimerId,
};
pub use rng::{substream_seed, SimRng};
pub use time::{fmt_ns, Time, MSEC, NSEC, SEC, USEC};
pub use trace::{TraceEvent, TraceSink};
