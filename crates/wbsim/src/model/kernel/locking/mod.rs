//! `kernel/locking/`: sleeping and spinning locks and their statistics.
//!
//! - [`lock_stat`]: per-class statistics like lockdep's lock_stat
//!   (`/proc/lock_stat`).
//! - [`mutex`]: `struct mutex` (kernel/locking/mutex.c).
//! - [`spinlock`]: `spinlock_t` on qspinlock (kernel/locking/qspinlock.c) as CPU
//!   cost.
//! - [`rwsem`]: `struct rw_semaphore` (kernel/locking/rwsem.c, non-RT).
//! - [`semaphore`]: `struct semaphore` (kernel/locking/semaphore.c): sleeping,
//!   counting, FIFO handoff, no spinning.
//!
//! Shared machinery (this file): a waiter's or spinner's [`Slot`], to which a
//! releasing task grants the lock directly, and the optimistic spin loop of
//! `mutex_optimistic_spin()` / `rwsem_optimistic_spin()` as CPU time.
//!
//! How optimistic spinning maps: a spinner burns CPU with
//! [`Sched::cpu_nopreempt`] in quanta of [`OPTIMISTIC_SPIN_QUANTUM_NS`] raced
//! against the lock being granted to it. The lock's release grants the lock
//! directly to the first spinner that is on a CPU (the OSQ head: `osq_lock()`
//! lets one spinner at a time spin on the owner, in arrival order), which then
//! stops its quantum at once (keeping the CPU accounting). Between quanta the
//! spinner re-checks whether spinning may go on (`owner_on_cpu()` of the owner,
//! the reader-owned time limit), so those checks have the quantum as
//! granularity. `need_resched()` is approximated: a quantum that had to wait for a
//! CPU (it took longer than its length) means another task wanted the CPU, and
//! the spinner stops spinning, as the kernel does when `need_resched()` is set.
//!
//! Simplified: a task is only "on a CPU" inside `cpu()` (see `sched`), so the
//! first spin quantum of a task may have to wait for a CPU; spinners that are
//! not on a CPU at a release are passed over.

pub mod lock_stat;
pub mod mutex;
pub mod rwsem;
pub mod semaphore;
pub mod spinlock;

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Poll, Waker};

use sim::{TaskId, Time, USEC};

use super::sched::Sched;

pub use lock_stat::{ClassStats, LockClass, LockKind, LockStatRow, LockStats, LockTimeStats};
pub use mutex::{Mutex, MutexGuard};
pub use rwsem::{ReadGuard, RwSemaphore, RwsemOwner, RwsemParams, WriteGuard};
pub use semaphore::{Semaphore, SemaphoreGuard};
pub use spinlock::{SpinGuard, SpinLock, SpinLockParams};

/// Granularity of optimistic spinning in the model, ns: a spinner re-checks
/// whether its owner still runs (`owner_on_cpu()`) and the reader-owned spin
/// limit once per quantum. 1 us: well below the 10-25 us reader-owned limit of
/// `rwsem_rspin_threshold()` and the 4 ms handoff timeout, and far above the
/// ~ns `cpu_relax()` loop of the kernel, which would cost too many events.
pub const OPTIMISTIC_SPIN_QUANTUM_NS: Time = USEC;

/// One task waiting for (or spinning on) a lock: the lock grants it by setting
/// `granted` and waking the task (`wake_q_add()` + `wake_up_q()`).
pub(crate) struct Slot {
    pub(crate) task: TaskId,
    /// Wants the lock shared (rwsem readers).
    pub(crate) read: bool,
    /// When it was queued (`waiter->timeout` is this plus the timeout).
    since: Cell<Time>,
    granted: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

impl Slot {
    pub(crate) fn new(task: TaskId, read: bool, since: Time) -> Rc<Slot> {
        Rc::new(Slot {
            task,
            read,
            since: Cell::new(since),
            granted: Cell::new(false),
            waker: RefCell::new(None),
        })
    }

    pub(crate) fn since(&self) -> Time {
        self.since.get()
    }

    pub(crate) fn set_since(&self, t: Time) {
        self.since.set(t);
    }

    pub(crate) fn is_granted(&self) -> bool {
        self.granted.get()
    }

    /// Marks the lock as given to this slot; the caller wakes it with [`Slot::wake`]
    /// once it no longer borrows the lock state.
    pub(crate) fn grant(&self) {
        self.granted.set(true);
    }

    pub(crate) fn wake(&self) {
        if let Some(w) = self.waker.borrow_mut().take() {
            w.wake();
        }
    }

    /// Sleeps until granted (the `schedule()` loop of a queued waiter).
    pub(crate) async fn wait_granted(&self, sched: &Sched, label: &str) {
        std::future::poll_fn(|cx| {
            if self.granted.get() {
                return Poll::Ready(());
            }
            *self.waker.borrow_mut() = Some(cx.waker().clone());
            sched.sim().set_waiting_on(label.to_string());
            Poll::Pending
        })
        .await
    }

    /// Burns `ns` of non-preemptible CPU or less: returns `true` as soon as the
    /// lock is granted (the CPU request is dropped then, keeping its accounting),
    /// `false` when the CPU time was used up without a grant.
    pub(crate) async fn spin_granted(&self, sched: &Sched, ns: Time, label: &str) -> bool {
        let mut work = sched.cpu_nopreempt(ns);
        std::future::poll_fn(|cx| {
            if self.granted.get() {
                return Poll::Ready(true);
            }
            *self.waker.borrow_mut() = Some(cx.waker().clone());
            match Pin::new(&mut work).poll(cx) {
                Poll::Ready(()) => Poll::Ready(self.granted.get()),
                Poll::Pending => {
                    sched.sim().set_waiting_on(label.to_string());
                    Poll::Pending
                }
            }
        })
        .await
    }
}

/// What a spinner's check between quanta decided.
pub(crate) enum SpinCheck {
    /// The spinner took the lock itself (`rwsem_try_write_lock_unqueued()`).
    Acquired,
    /// Keep spinning.
    Continue,
    /// Stop spinning and queue (owner not running, limit reached...).
    Stop,
}

/// The optimistic spin loop: between quanta, `check` looks at the lock; during a
/// quantum, a release may grant the lock to `slot`. Returns whether the lock was
/// obtained. The caller removes `slot` from its spinner list when it was not.
pub(crate) async fn optimistic_spin(
    sched: &Sched,
    slot: &Slot,
    quantum: Time,
    label: &str,
    mut check: impl FnMut() -> SpinCheck,
) -> bool {
    let quantum = quantum.max(1);
    loop {
        if slot.is_granted() {
            return true;
        }
        match check() {
            SpinCheck::Acquired => return true,
            SpinCheck::Stop => return false,
            SpinCheck::Continue => {}
        }
        let t0 = sched.sim().now();
        if slot.spin_granted(sched, quantum, label).await {
            return true;
        }
        if sched.sim().now() - t0 > quantum {
            // Had to wait for a CPU: someone else wanted it (need_resched()).
            return false;
        }
    }
}
