//! `kernel/`: the scheduler (CPUs, run queues, cpusets), wait primitives (wait
//! queues, completions, wait_var_event), locks (mutex, spinlock, rw_semaphore,
//! lock_stat), RCU, workqueues, interval sets and the timer wheel's timeout rounding. Every later mechanism is built from these.

pub mod interval;
pub mod locking;
pub mod rcu;
pub mod sched;
pub mod services;
pub mod stats;
pub mod timer;
pub mod wait;
pub mod workqueue;

pub use services::{Kernel, KernelParams};
