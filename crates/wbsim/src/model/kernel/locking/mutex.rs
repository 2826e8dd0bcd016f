//! `struct mutex`: a sleeping lock with optimistic spinning.
//!
//! Models kernel/locking/mutex.c (non-RT, no ww_mutex):
//! - `mutex_lock()`: the fast path `__mutex_trylock_fast()` succeeds when the
//!   mutex has no owner and no waiters (the owner word is 0).
//! - `__mutex_lock_common()`: `mutex_can_spin_on_owner()` then
//!   `mutex_optimistic_spin()`: spin while the owner is on a CPU
//!   (`mutex_spin_on_owner()`, `owner_on_cpu()`), following a new owner when the
//!   lock changes hands, and stop when the owner is not running or
//!   `need_resched()`; then queue FIFO on `wait_list` and sleep.
//! - `__mutex_unlock_slowpath()`: with `MUTEX_FLAG_HANDOFF` set, the mutex is
//!   handed to the first waiter (`__mutex_handoff()`); otherwise it becomes free,
//!   the first waiter is woken, and a spinner on a CPU takes it first. A first
//!   waiter that wakes to find the mutex taken sets `MUTEX_FLAG_HANDOFF`
//!   (`__mutex_trylock_or_handoff()`), so it is passed over at most once.
//!
//! Model choices: a release with no spinner on a CPU and no handoff grants the
//! mutex to the first waiter directly (the woken waiter would take the free
//! mutex; the model has no wakeup latency in which anyone else could). A
//! release with a spinner on a CPU gives it to the spinner (it polls the owner
//! word and wins against a waiter that first has to be scheduled), and the
//! passed-over first waiter sets the handoff flag at that moment.
//!
//! Left out: the first waiter's own optimistic spinning after a wakeup, signals
//! (`mutex_lock_killable()`), lockdep dependency checks (a deadlock shows up as
//! a blocked run), the cost of the fast path.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use sim::{TaskId, Time};

use super::lock_stat::{LockClass, LockKind};
use super::{optimistic_spin, Slot, SpinCheck, OPTIMISTIC_SPIN_QUANTUM_NS};
use crate::model::kernel::sched::Sched;

#[derive(Default)]
struct State {
    owner: Option<TaskId>,
    /// `MUTEX_FLAG_HANDOFF`.
    handoff: bool,
    /// `wait_list`, FIFO.
    waiters: VecDeque<Rc<Slot>>,
    /// Optimistic spinners in OSQ order.
    spinners: VecDeque<Rc<Slot>>,
}

struct Inner {
    class: LockClass,
    sched: Sched,
    st: RefCell<State>,
}

/// A mutex. Cheap to clone (clones are the same mutex).
#[derive(Clone)]
pub struct Mutex(Rc<Inner>);

/// Holds the mutex; dropping it is `mutex_unlock()`.
pub struct MutexGuard {
    lock: Mutex,
    since: Time,
}

impl Mutex {
    /// `mutex_init()`: an unlocked mutex of `class`.
    pub fn new(class: LockClass, sched: &Sched) -> Self {
        Mutex(Rc::new(Inner {
            class,
            sched: sched.clone(),
            st: RefCell::new(State::default()),
        }))
    }

    /// The lock class.
    pub fn class(&self) -> &LockClass {
        &self.0.class
    }

    /// The owning task (`__mutex_owner()`).
    pub fn owner(&self) -> Option<TaskId> {
        self.0.st.borrow().owner
    }

    /// `mutex_is_locked()`.
    pub fn is_locked(&self) -> bool {
        self.owner().is_some()
    }

    /// Tasks queued on `wait_list`.
    pub fn nr_waiters(&self) -> usize {
        self.0.st.borrow().waiters.len()
    }

    /// Whether `MUTEX_FLAG_HANDOFF` is set.
    pub fn handoff_pending(&self) -> bool {
        self.0.st.borrow().handoff
    }

    fn label(&self) -> String {
        format!("mutex:{}", self.0.class.name())
    }

    fn guard(&self, since: Time) -> MutexGuard {
        MutexGuard {
            lock: self.clone(),
            since,
        }
    }

    /// `mutex_trylock()`: takes the mutex if it is free.
    pub fn try_lock(&self) -> Option<MutexGuard> {
        let sim = self.0.sched.sim();
        let me = sim.current_task();
        let mut st = self.0.st.borrow_mut();
        if st.owner.is_some() || !st.waiters.is_empty() {
            return None;
        }
        st.owner = Some(me);
        drop(st);
        self.0.class.acquired(LockKind::Write, 0, false, false);
        Some(self.guard(sim.now()))
    }

    /// `mutex_lock()`.
    pub async fn lock(&self) -> MutexGuard {
        let sim = self.0.sched.sim().clone();
        let me = sim.current_task();
        let t0 = sim.now();
        if let Some(g) = self.try_lock() {
            return g;
        }
        let label = self.label();
        let slot = Slot::new(me, false, t0);
        let mut pending = Pending {
            lock: self,
            slot: slot.clone(),
            armed: true,
        };
        // mutex_can_spin_on_owner(): spin only on an owner that is on a CPU.
        let can_spin = match self.0.st.borrow().owner {
            Some(o) => self.0.sched.is_running(o),
            None => true,
        };
        let mut slept = false;
        let mut got = false;
        if can_spin {
            self.0.st.borrow_mut().spinners.push_back(slot.clone());
            let spin_label = format!("{label} (spinning)");
            got = optimistic_spin(
                &self.0.sched,
                &slot,
                OPTIMISTIC_SPIN_QUANTUM_NS,
                &spin_label,
                || self.spin_check(&slot),
            )
            .await;
            if !got {
                self.0
                    .st
                    .borrow_mut()
                    .spinners
                    .retain(|s| !Rc::ptr_eq(s, &slot));
            }
        }
        if !got {
            let queued = {
                let mut st = self.0.st.borrow_mut();
                if slot.is_granted() {
                    false
                } else if st.owner.is_none() {
                    // The trylock after queueing: it became free meanwhile.
                    st.owner = Some(me);
                    false
                } else {
                    st.waiters.push_back(slot.clone());
                    true
                }
            };
            if queued {
                slept = true;
                slot.wait_granted(&self.0.sched, &label).await;
            }
        }
        pending.armed = false;
        let now = sim.now();
        self.0
            .class
            .acquired(LockKind::Write, now - t0, true, slept);
        self.guard(now)
    }

    /// Between spin quanta: take a free mutex, or go on while the owner runs.
    fn spin_check(&self, slot: &Rc<Slot>) -> SpinCheck {
        let mut st = self.0.st.borrow_mut();
        match st.owner {
            None if !st.handoff => {
                st.owner = Some(slot.task);
                st.spinners.retain(|s| !Rc::ptr_eq(s, slot));
                SpinCheck::Acquired
            }
            None => SpinCheck::Continue,
            Some(o) if self.0.sched.is_running(o) => SpinCheck::Continue,
            Some(_) => SpinCheck::Stop,
        }
    }

    /// `mutex_unlock()`.
    fn unlock(&self) {
        let woken = {
            let mut st = self.0.st.borrow_mut();
            st.owner = None;
            Self::hand_over(&mut st, &self.0.sched)
        };
        if let Some(s) = woken {
            s.wake();
        }
    }

    /// Gives a free mutex to whoever gets it next (see the module doc).
    fn hand_over(st: &mut State, sched: &Sched) -> Option<Rc<Slot>> {
        if !st.handoff {
            if let Some(i) = st.spinners.iter().position(|s| sched.is_running(s.task)) {
                let s = st.spinners.remove(i).expect("index from position");
                st.owner = Some(s.task);
                s.grant();
                // The first waiter, woken by this unlock, finds the mutex taken.
                if !st.waiters.is_empty() {
                    st.handoff = true;
                }
                return Some(s);
            }
        }
        let s = st.waiters.pop_front()?;
        st.handoff = false;
        st.owner = Some(s.task);
        s.grant();
        Some(s)
    }

    /// A lock call was dropped before it returned (its task was cancelled).
    fn abandon(&self, slot: &Rc<Slot>) {
        let woken = {
            let mut st = self.0.st.borrow_mut();
            st.spinners.retain(|s| !Rc::ptr_eq(s, slot));
            let was_first = st.waiters.front().is_some_and(|s| Rc::ptr_eq(s, slot));
            st.waiters.retain(|s| !Rc::ptr_eq(s, slot));
            if was_first || st.waiters.is_empty() {
                st.handoff = false;
            }
            if slot.is_granted() {
                st.owner = None;
                Self::hand_over(&mut st, &self.0.sched)
            } else {
                None
            }
        };
        if let Some(s) = woken {
            s.wake();
        }
    }
}

/// Undoes a lock call that is dropped midway.
struct Pending<'a> {
    lock: &'a Mutex,
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

impl MutexGuard {
    /// The mutex held.
    pub fn mutex(&self) -> &Mutex {
        &self.lock
    }
}

impl Drop for MutexGuard {
    fn drop(&mut self) {
        let now = self.lock.0.sched.sim().now();
        self.lock
            .0
            .class
            .released(LockKind::Write, now - self.since);
        self.lock.unlock();
    }
}
