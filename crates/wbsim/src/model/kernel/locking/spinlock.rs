//! `spinlock_t`: a busy-waiting lock, as CPU cost.
//!
//! Models `spin_lock()` / `spin_unlock()` (include/linux/spinlock.h) on the
//! queued spinlock of kernel/locking/qspinlock.c: waiters queue in an MCS queue
//! and get the lock in arrival order (`queued_spin_lock_slowpath()`), spinning
//! with preemption disabled the whole time. Here a waiter burns CPU with
//! [`Sched::cpu_nopreempt`] until the releasing task grants it the lock (FIFO);
//! an uncontended lock/unlock pair costs `acquire_ns + release_ns` of
//! non-preemptible CPU, charged at acquisition (a guard's drop cannot consume
//! CPU).
//!
//! `spin_lock()` disables preemption ([`Sched::preempt_disable`]) before it
//! tries the lock, so a waiter spins on the CPU it had and the new holder
//! keeps that CPU from the handoff through its critical section; a waiter
//! that was not on a CPU (woken from sleep) first waits for one.
//!
//! The holder is expected to do only short CPU work while holding, preferably
//! with [`SpinGuard::cpu`] (non-preemptible, as under a real spinlock); sleeping
//! while holding a spinlock is a kernel bug the model does not detect.
//!
//! Left out: the pending-bit and lock-stealing details of qspinlock's first two
//! contenders, cache-line transfer cost of a contended handoff, `_irq`/`_bh`
//! variants (interrupts are not modelled), the soft/hard lockup watchdog (a
//! deadlocked spinner spins forever, in chunks of 1 s of virtual time).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use sim::{TaskId, Time, SEC};

use super::lock_stat::{LockClass, LockKind};
use super::Slot;
use crate::model::kernel::sched::{CpuWork, PreemptGuard, Sched};

/// CPU costs of a spinlock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpinLockParams {
    /// CPU cost of an uncontended `spin_lock()`, ns: 15 ns, one locked
    /// `cmpxchg` on a cache line already owned by the CPU (Agner Fog's
    /// instruction tables list `LOCK CMPXCHG` at about 18-20 cycles on recent
    /// Intel cores, ~6 ns at 3 GHz) plus `preempt_disable()` and call overhead.
    pub acquire_ns: Time,
    /// CPU cost of `spin_unlock()`, ns: 5 ns (a release store plus
    /// `preempt_enable()`). Together ~20 ns per pair, in line with the
    /// often-quoted "lock/unlock mutex: 25 ns" (Peter Norvig, "Teach Yourself
    /// Programming in Ten Years", table of approximate timings).
    pub release_ns: Time,
}

impl Default for SpinLockParams {
    fn default() -> Self {
        SpinLockParams {
            acquire_ns: 15,
            release_ns: 5,
        }
    }
}

/// Length of one spin request of a waiting task, ns (the waiter spins until
/// granted; this only bounds one CPU request).
const SPIN_CHUNK_NS: Time = SEC;

#[derive(Default)]
struct State {
    owner: Option<TaskId>,
    /// The MCS queue, FIFO.
    waiters: VecDeque<Rc<Slot>>,
}

struct Inner {
    class: LockClass,
    sched: Sched,
    params: SpinLockParams,
    st: RefCell<State>,
}

/// A spinlock. Cheap to clone (clones are the same lock).
#[derive(Clone)]
pub struct SpinLock(Rc<Inner>);

/// Holds the spinlock; dropping it is `spin_unlock()`.
pub struct SpinGuard {
    lock: SpinLock,
    since: Time,
    /// Preemption stays disabled while the lock is held (dropped after the
    /// unlock, as `spin_unlock()` ends with `preempt_enable()`).
    _preempt: PreemptGuard,
}

impl SpinLock {
    /// `spin_lock_init()` with the default costs.
    pub fn new(class: LockClass, sched: &Sched) -> Self {
        Self::with_params(class, sched, SpinLockParams::default())
    }

    /// A spinlock with explicit costs.
    pub fn with_params(class: LockClass, sched: &Sched, params: SpinLockParams) -> Self {
        SpinLock(Rc::new(Inner {
            class,
            sched: sched.clone(),
            params,
            st: RefCell::new(State::default()),
        }))
    }

    /// The lock class.
    pub fn class(&self) -> &LockClass {
        &self.0.class
    }

    /// The holder.
    pub fn owner(&self) -> Option<TaskId> {
        self.0.st.borrow().owner
    }

    /// `spin_is_locked()`.
    pub fn is_locked(&self) -> bool {
        self.owner().is_some()
    }

    /// Tasks spinning in the queue.
    pub fn nr_waiters(&self) -> usize {
        self.0.st.borrow().waiters.len()
    }

    /// `spin_trylock()`: takes the lock if it is free (charges no CPU: a
    /// synchronous call cannot).
    pub fn try_lock(&self) -> Option<SpinGuard> {
        let sim = self.0.sched.sim();
        let me = sim.current_task();
        let mut st = self.0.st.borrow_mut();
        if st.owner.is_some() || !st.waiters.is_empty() {
            return None;
        }
        st.owner = Some(me);
        drop(st);
        self.0.class.acquired(LockKind::Write, 0, false, false);
        Some(SpinGuard {
            lock: self.clone(),
            since: sim.now(),
            _preempt: self.0.sched.preempt_disable(),
        })
    }

    /// `spin_lock()`: spins (burning CPU) until the lock is free, then pays the
    /// lock/unlock cost.
    pub async fn lock(&self) -> SpinGuard {
        let sim = self.0.sched.sim().clone();
        let me = sim.current_task();
        let t0 = sim.now();
        let preempt = self.0.sched.preempt_disable();
        let take = |st: &mut State| {
            if st.owner.is_none() && st.waiters.is_empty() {
                st.owner = Some(me);
                true
            } else {
                false
            }
        };
        // Only a task on a CPU takes a spinlock: a task that has none (woken
        // from sleep, not yet run again) makes its attempt once it runs, so
        // it never holds the lock while waiting for a CPU.
        let on_cpu = self.0.sched.on_cpu(me);
        let mut free = on_cpu && take(&mut self.0.st.borrow_mut());
        // Whether the attempt that took the lock was already paid for.
        let mut attempt_paid = false;
        if !free {
            // Only a task on a CPU spins: the failed attempt is made there
            // (a task woken from sleep waits for a CPU first), and from then
            // on preemption is disabled, so the task keeps that CPU while it
            // spins and after the lock is handed to it.
            self.0.sched.cpu_nopreempt(self.0.params.acquire_ns).await;
            free = take(&mut self.0.st.borrow_mut());
            attempt_paid = free && !on_cpu;
        }
        let guard = if free {
            self.0
                .class
                .acquired(LockKind::Write, sim.now() - t0, false, false);
            SpinGuard {
                lock: self.clone(),
                since: sim.now(),
                _preempt: preempt,
            }
        } else {
            let slot = Slot::new(me, false, t0);
            self.0.st.borrow_mut().waiters.push_back(slot.clone());
            let mut pending = Pending {
                lock: self,
                slot: slot.clone(),
                armed: true,
            };
            let label = format!("spinlock:{} (spinning)", self.0.class.name());
            loop {
                if slot
                    .spin_granted(&self.0.sched, SPIN_CHUNK_NS, &label)
                    .await
                {
                    break;
                }
            }
            pending.armed = false;
            let now = sim.now();
            self.0
                .class
                .acquired(LockKind::Write, now - t0, true, false);
            SpinGuard {
                lock: self.clone(),
                since: now,
                _preempt: preempt,
            }
        };
        let p = &self.0.params;
        let cost = if attempt_paid {
            p.release_ns
        } else {
            p.acquire_ns + p.release_ns
        };
        self.0.sched.cpu_nopreempt(cost).await;
        guard
    }

    fn unlock(&self) {
        let next = {
            let mut st = self.0.st.borrow_mut();
            st.owner = None;
            let next = st.waiters.pop_front();
            if let Some(s) = &next {
                st.owner = Some(s.task);
                s.grant();
            }
            next
        };
        if let Some(s) = next {
            s.wake();
        }
    }

    fn abandon(&self, slot: &Rc<Slot>) {
        self.0
            .st
            .borrow_mut()
            .waiters
            .retain(|s| !Rc::ptr_eq(s, slot));
        if slot.is_granted() {
            self.unlock();
        }
    }
}

struct Pending<'a> {
    lock: &'a SpinLock,
    slot: Rc<Slot>,
    armed: bool,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.lock.abandon(&self.slot);
        }
    }
}

impl SpinGuard {
    /// The lock held.
    pub fn lock(&self) -> &SpinLock {
        &self.lock
    }

    /// CPU work inside the critical section: non-preemptible, as with
    /// preemption disabled by `spin_lock()`.
    pub fn cpu(&self, ns: Time) -> CpuWork {
        self.lock.0.sched.cpu_nopreempt(ns)
    }
}

impl Drop for SpinGuard {
    fn drop(&mut self) {
        let now = self.lock.0.sched.sim().now();
        self.lock
            .0
            .class
            .released(LockKind::Write, now - self.since);
        self.lock.unlock();
    }
}
