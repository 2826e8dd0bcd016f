//! `struct semaphore`: a sleeping counting semaphore.
//!
//! Models kernel/locking/semaphore.c:
//! - `down()`: with `count > 0` it is decremented and the caller goes on;
//!   otherwise `__down()` puts the caller at the tail of `wait_list` and
//!   sleeps. There is no optimistic spinning and no owner tracking.
//! - `down_trylock()`: decrements a positive count, never sleeps; it fails
//!   when the count is zero even if nobody waits.
//! - `up()`: with nobody waiting the count is incremented; otherwise
//!   `__up()` takes the first waiter off the list, marks it `up = true` and
//!   wakes it: the semaphore is handed to it directly (the count is not
//!   raised), so grants are strictly FIFO and a later `down()` cannot take it
//!   first.
//!
//! Users in the model: the XFS buffer lock (`xfs_buf_lock()`, `bp->b_sema`
//! initialised to 1 in `xfs_buf_alloc()`, fs/xfs/xfs_buf.c), which is what an
//! AGF lock is. An `up()` may come from another task than the `down()` (an
//! XFS buffer lock is released at transaction commit); a guard is used here
//! for the common case and dropping it is the `up()`.
//!
//! Statistics: one lock_stat class per semaphore (`LockKind::Write`); a
//! contention is a `down()` that had to sleep; hold time runs from the grant
//! to the `up()`. Left out: `down_interruptible()`/`down_killable()` and
//! timeouts (`down_timeout()`).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use sim::Time;

use super::lock_stat::{LockClass, LockKind};
use super::Slot;
use crate::model::kernel::sched::Sched;

struct State {
    count: u32,
    /// `wait_list`, FIFO.
    waiters: VecDeque<Rc<Slot>>,
}

struct Inner {
    class: LockClass,
    sched: Sched,
    st: RefCell<State>,
}

/// A counting semaphore. Cheap to clone (clones are the same semaphore).
#[derive(Clone)]
pub struct Semaphore(Rc<Inner>);

/// One unit of the semaphore; dropping it is `up()`.
pub struct SemaphoreGuard {
    sem: Semaphore,
    since: Time,
}

impl Semaphore {
    /// `sema_init(sem, count)`.
    pub fn new(class: LockClass, sched: &Sched, count: u32) -> Self {
        Semaphore(Rc::new(Inner {
            class,
            sched: sched.clone(),
            st: RefCell::new(State {
                count,
                waiters: VecDeque::new(),
            }),
        }))
    }

    /// The lock class.
    pub fn class(&self) -> &LockClass {
        &self.0.class
    }

    /// The current count (units free now).
    pub fn count(&self) -> u32 {
        self.0.st.borrow().count
    }

    /// Tasks sleeping in `down()`.
    pub fn nr_waiters(&self) -> usize {
        self.0.st.borrow().waiters.len()
    }

    fn guard(&self, since: Time) -> SemaphoreGuard {
        SemaphoreGuard {
            sem: self.clone(),
            since,
        }
    }

    /// `down_trylock()`: a unit if one is free now (the kernel returns 0 on
    /// success; here `Some`).
    pub fn down_trylock(&self) -> Option<SemaphoreGuard> {
        let mut st = self.0.st.borrow_mut();
        if st.count == 0 {
            return None;
        }
        st.count -= 1;
        drop(st);
        self.0.class.acquired(LockKind::Write, 0, false, false);
        Some(self.guard(self.0.sched.sim().now()))
    }

    /// `down()`: takes a unit, sleeping FIFO until `up()` hands one over.
    pub async fn down(&self) -> SemaphoreGuard {
        let sim = self.0.sched.sim().clone();
        let t0 = sim.now();
        if let Some(g) = self.down_trylock() {
            return g;
        }
        let slot = Slot::new(sim.current_task(), false, t0);
        self.0.st.borrow_mut().waiters.push_back(slot.clone());
        let mut pending = Pending {
            sem: self,
            slot: slot.clone(),
            armed: true,
        };
        let label = format!("semaphore:{}", self.0.class.name());
        slot.wait_granted(&self.0.sched, &label).await;
        pending.armed = false;
        let now = sim.now();
        self.0.class.acquired(LockKind::Write, now - t0, true, true);
        self.guard(now)
    }

    /// `up()`: hands the unit to the first waiter, or returns it to the count.
    fn up(&self) {
        let woken = {
            let mut st = self.0.st.borrow_mut();
            match st.waiters.pop_front() {
                Some(s) => {
                    s.grant();
                    Some(s)
                }
                None => {
                    st.count += 1;
                    None
                }
            }
        };
        if let Some(s) = woken {
            s.wake();
        }
    }

    /// A `down()` dropped before it returned (its task was cancelled): leave
    /// the queue, or give back a unit already handed over.
    fn abandon(&self, slot: &Rc<Slot>) {
        if slot.is_granted() {
            self.up();
        } else {
            self.0
                .st
                .borrow_mut()
                .waiters
                .retain(|s| !Rc::ptr_eq(s, slot));
        }
    }
}

/// Undoes a `down()` that is dropped midway.
struct Pending<'a> {
    sem: &'a Semaphore,
    slot: Rc<Slot>,
    armed: bool,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.sem.abandon(&self.slot);
        }
    }
}

impl SemaphoreGuard {
    /// The semaphore held.
    pub fn semaphore(&self) -> &Semaphore {
        &self.sem
    }
}

impl Drop for SemaphoreGuard {
    fn drop(&mut self) {
        let now = self.sem.0.sched.sim().now();
        self.sem.0.class.released(LockKind::Write, now - self.since);
        self.sem.up();
    }
}
