//! `struct rw_semaphore`: the reader-writer sleeping lock.
//!
//! Models kernel/locking/rwsem.c (non-RT, CONFIG_RWSEM_SPIN_ON_OWNER, 5.13+
//! without reader optimistic spinning):
//! - `down_read()`: the fast path `rwsem_read_trylock()` succeeds only when no
//!   writer holds the lock, no waiter is queued and no handoff is pending
//!   (`RWSEM_READ_FAILED_MASK`). So a queued writer blocks every new reader, and
//!   readers queue FIFO behind it. `rwsem_down_read_slowpath()`: no stealing
//!   while readers own the lock; reader lock stealing when the lock is free and
//!   no handoff is set (then `rwsem_mark_wake(RWSEM_WAKE_READ_OWNED)`); an empty
//!   queue and no writer takes the lock (`rwsem_rlock_fast`); otherwise queue,
//!   then `rwsem_cond_wake_waiter()`.
//! - `down_write()`: the fast path `rwsem_write_trylock()` needs the count to be
//!   0 (free, no waiters, no handoff). `rwsem_down_write_slowpath()`:
//!   `rwsem_can_spin_on_owner()` (not `RWSEM_NONSPINNABLE`, and a writer owner
//!   must be on a CPU) then `rwsem_optimistic_spin()`: spin while the owner is a
//!   running writer (`rwsem_spin_on_owner()`), or while readers own the lock up
//!   to `rwsem_rspin_threshold()` = (10 + nr_readers/2) us capped at 25 us,
//!   re-armed each time the owner turns from non-reader to reader; on timeout
//!   `rwsem_set_nonspinnable()` stops later writers from spinning on this
//!   reader phase. A spinner takes a free lock unless a handoff is set
//!   (`rwsem_try_write_lock_unqueued()`). Then queue FIFO and sleep until
//!   `rwsem_try_write_lock()` succeeds.
//! - Release (`up_read()` of the last reader, `up_write()`): `rwsem_wake()` ->
//!   `rwsem_mark_wake(RWSEM_WAKE_ANY)`: a writer at the head is woken alone; a
//!   reader at the head wakes up to `MAX_READERS_WAKEUP` (256) readers from the
//!   whole queue, skipping queued writers (phase-fair since 5.3: "wake up almost
//!   all readers in wait queue"), all granted at the same instant. The last
//!   `up_read()` with waiters clears the nonspinnable flag (`clear_nonspinnable()`).
//! - Handoff (`RWSEM_FLAG_HANDOFF`): a head waiter that finds the lock taken
//!   after a wakeup, having waited longer than `RWSEM_WAIT_TIMEOUT`, sets it
//!   (`rwsem_try_write_lock()` for writers, `rwsem_mark_wake()` for readers);
//!   then nobody but the head waiter may take the lock: no spinner stealing, no
//!   reader fast path; granting the head clears it.
//! - `downgrade_write()`: the writer becomes a reader and wakes the readers
//!   (`rwsem_downgrade_wake()`, `RWSEM_WAKE_READ_OWNED`).
//! - No priority inheritance: readers granted the lock while not running still
//!   hold it, and every later task waits until each has run and released.
//!
//! Model choices: at a release, a spinning writer that is on a CPU takes the
//! free lock first unless a handoff is set (it polls the count while the woken
//! waiter still has to be scheduled; the kernel's comment in `rwsem_mark_wake()`
//! says writers may steal before readers are granted); the head waiter is then
//! the one passed over, and sets the handoff if it has waited longer than the
//! timeout. Otherwise the head waiter is granted directly (a woken writer gets a
//! free lock, as nobody can steal it in the zero-latency wakeup of the model).
//! Hence the lock is never free while waiters are queued. Time is in ns, so
//! `time_after(jiffies, timeout)` becomes `now > since + wait_timeout_ns`.
//!
//! Left out: the handoff waiter's own spinning on the owner, RT tasks (which
//! set the handoff at once), signals (`down_read_killable()`), the reader-count
//! overflow guard, `need_resched()` except as described in `locking/mod.rs`.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use sim::{TaskId, Time, MSEC, SEC, USEC};

use super::lock_stat::{LockClass, LockKind};
use super::{optimistic_spin, Slot, SpinCheck, OPTIMISTIC_SPIN_QUANTUM_NS};
use crate::model::kernel::sched::Sched;

/// `MAX_READERS_WAKEUP` (kernel/locking/rwsem.c): at most 0x100 readers are
/// granted by one wakeup.
pub const MAX_READERS_WAKEUP: usize = 0x100;

/// Parameters of a rw_semaphore.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RwsemParams {
    /// `RWSEM_WAIT_TIMEOUT` in ns: `DIV_ROUND_UP(HZ, 250)` jiffies, 4 ms at
    /// HZ=1000 and HZ=250 (kernel/locking/rwsem.c). A head waiter that waited
    /// longer sets the handoff flag.
    pub wait_timeout_ns: Time,
    /// `MAX_READERS_WAKEUP`: readers granted per wakeup, 256.
    pub max_readers_wakeup: usize,
    /// Granularity of a writer's optimistic spinning, ns (see `locking/mod.rs`).
    pub spin_quantum_ns: Time,
}

impl RwsemParams {
    /// The parameters of a kernel built with `CONFIG_HZ=hz`. Errors if `hz` is 0.
    pub fn for_hz(hz: u64) -> Result<Self, String> {
        if hz == 0 {
            return Err("rwsem: HZ must be at least 1".to_string());
        }
        let jiffies = hz.div_ceil(250);
        Ok(RwsemParams {
            wait_timeout_ns: jiffies * SEC / hz,
            max_readers_wakeup: MAX_READERS_WAKEUP,
            spin_quantum_ns: OPTIMISTIC_SPIN_QUANTUM_NS,
        })
    }
}

impl Default for RwsemParams {
    /// HZ=1000: 4 ms timeout.
    fn default() -> Self {
        RwsemParams {
            wait_timeout_ns: 4 * MSEC,
            max_readers_wakeup: MAX_READERS_WAKEUP,
            spin_quantum_ns: OPTIMISTIC_SPIN_QUANTUM_NS,
        }
    }
}

/// `rwsem_rspin_threshold()`: how long a writer may spin on a lock owned by
/// `readers` readers, ns: (20 + min(readers, 30)) / 2 us, i.e. 10 us plus
/// 0.5 us per reader, at most 25 us.
pub fn rwsem_rspin_threshold_ns(readers: usize) -> Time {
    (20 + readers.min(30) as Time) * USEC / 2
}

/// Who holds a rw_semaphore.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RwsemOwner {
    Free,
    Writer(TaskId),
    /// Held for read by this many tasks.
    Readers(usize),
}

/// `enum rwsem_wake_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WakeType {
    Any,
    Readers,
    ReadOwned,
}

#[derive(Default)]
struct State {
    /// `RWSEM_WRITER_LOCKED` and `sem->owner`.
    writer: Option<TaskId>,
    /// The reader count.
    readers: usize,
    /// `RWSEM_FLAG_HANDOFF`.
    handoff: bool,
    /// `RWSEM_NONSPINNABLE` in `sem->owner`: a writer timed out spinning on
    /// this reader phase.
    nonspinnable: bool,
    /// `wait_list`.
    waiters: VecDeque<Rc<Slot>>,
    /// Writers spinning optimistically, in OSQ order.
    spinners: VecDeque<Rc<Slot>>,
}

impl State {
    fn is_free(&self) -> bool {
        self.writer.is_none() && self.readers == 0
    }

    fn grant_writer(&mut self, s: &Rc<Slot>) {
        self.writer = Some(s.task);
        // rwsem_set_owner() overwrites the owner flags.
        self.nonspinnable = false;
        s.grant();
    }

    /// `rwsem_mark_wake()`: grants what the head of the queue allows; the woken
    /// slots go to `out` (the wake_q).
    fn mark_wake(&mut self, wake: WakeType, p: &RwsemParams, now: Time, out: &mut Vec<Rc<Slot>>) {
        let Some(first) = self.waiters.front() else {
            return;
        };
        if !first.read {
            if wake == WakeType::Any && self.is_free() {
                let s = self.waiters.pop_front().expect("front exists");
                self.handoff = false;
                self.grant_writer(&s);
                out.push(s);
            }
            return;
        }
        if wake != WakeType::ReadOwned && self.writer.is_some() {
            // A writer took the lock first: request a handoff if waited too long.
            if now > first.since() + p.wait_timeout_ns {
                self.handoff = true;
            }
            return;
        }
        let mut woken = 0;
        let mut i = 0;
        while i < self.waiters.len() && woken < p.max_readers_wakeup {
            if self.waiters[i].read {
                let s = self.waiters.remove(i).expect("index in range");
                self.readers += 1;
                s.grant();
                out.push(s);
                woken += 1;
            } else {
                i += 1;
            }
        }
        if woken > 0 || self.waiters.is_empty() {
            self.handoff = false;
        }
    }

    /// The lock may have become free: give it to a running spinner (unless a
    /// handoff is set) or to the head of the queue (`rwsem_wake()`).
    fn hand_over(&mut self, sched: &Sched, p: &RwsemParams, now: Time, out: &mut Vec<Rc<Slot>>) {
        if !self.is_free() {
            return;
        }
        if !self.handoff {
            if let Some(i) = self.spinners.iter().position(|s| sched.is_running(s.task)) {
                let s = self.spinners.remove(i).expect("index from position");
                self.grant_writer(&s);
                out.push(s);
                // The woken head waiter finds the lock taken.
                if let Some(f) = self.waiters.front() {
                    if now > f.since() + p.wait_timeout_ns {
                        self.handoff = true;
                    }
                }
                return;
            }
        }
        self.mark_wake(WakeType::Any, p, now, out);
    }

    /// `rwsem_cond_wake_waiter()`.
    fn cond_wake_waiter(&mut self, p: &RwsemParams, now: Time, out: &mut Vec<Rc<Slot>>) {
        if self.writer.is_some() {
            return;
        }
        if self.readers > 0 {
            self.mark_wake(WakeType::Readers, p, now, out);
        } else {
            self.nonspinnable = false;
            self.mark_wake(WakeType::Any, p, now, out);
        }
    }

    /// `__up_read()`.
    fn up_read(&mut self, sched: &Sched, p: &RwsemParams, now: Time, out: &mut Vec<Rc<Slot>>) {
        debug_assert!(self.readers > 0, "rwsem: up_read without readers");
        self.readers = self.readers.saturating_sub(1);
        if self.readers == 0 {
            if !self.waiters.is_empty() {
                self.nonspinnable = false;
            }
            self.hand_over(sched, p, now, out);
        }
    }

    /// `__up_write()`.
    fn up_write(&mut self, sched: &Sched, p: &RwsemParams, now: Time, out: &mut Vec<Rc<Slot>>) {
        debug_assert!(self.writer.is_some(), "rwsem: up_write without a writer");
        self.writer = None;
        self.hand_over(sched, p, now, out);
    }
}

struct Inner {
    class: LockClass,
    sched: Sched,
    params: RwsemParams,
    st: RefCell<State>,
}

/// A rw_semaphore. Cheap to clone (clones are the same lock).
#[derive(Clone)]
pub struct RwSemaphore(Rc<Inner>);

/// Holds the rwsem for read; dropping it is `up_read()`.
pub struct ReadGuard {
    sem: RwSemaphore,
    since: Time,
}

/// Holds the rwsem for write; dropping it is `up_write()`.
pub struct WriteGuard {
    sem: RwSemaphore,
    since: Time,
    /// Cleared by `downgrade()`, which releases differently.
    armed: bool,
}

fn wake_all(out: Vec<Rc<Slot>>) {
    for s in out {
        s.wake();
    }
}

impl RwSemaphore {
    /// `init_rwsem()` with the HZ=1000 parameters.
    pub fn new(class: LockClass, sched: &Sched) -> Self {
        Self::with_params(class, sched, RwsemParams::default())
    }

    /// A rwsem with explicit parameters.
    pub fn with_params(class: LockClass, sched: &Sched, params: RwsemParams) -> Self {
        RwSemaphore(Rc::new(Inner {
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

    /// The parameters in force.
    pub fn params(&self) -> &RwsemParams {
        &self.0.params
    }

    /// Who holds it.
    pub fn owner(&self) -> RwsemOwner {
        let st = self.0.st.borrow();
        match (st.writer, st.readers) {
            (Some(w), _) => RwsemOwner::Writer(w),
            (None, 0) => RwsemOwner::Free,
            (None, n) => RwsemOwner::Readers(n),
        }
    }

    /// `rwsem_is_locked()`.
    pub fn is_locked(&self) -> bool {
        self.owner() != RwsemOwner::Free
    }

    /// The queued tasks in order, with what they wait for.
    pub fn waiters(&self) -> Vec<(TaskId, LockKind)> {
        self.0
            .st
            .borrow()
            .waiters
            .iter()
            .map(|s| {
                let k = if s.read {
                    LockKind::Read
                } else {
                    LockKind::Write
                };
                (s.task, k)
            })
            .collect()
    }

    /// Number of queued tasks.
    pub fn nr_waiters(&self) -> usize {
        self.0.st.borrow().waiters.len()
    }

    /// Number of writers spinning optimistically.
    pub fn nr_spinners(&self) -> usize {
        self.0.st.borrow().spinners.len()
    }

    /// Whether `RWSEM_FLAG_HANDOFF` is set.
    pub fn handoff_pending(&self) -> bool {
        self.0.st.borrow().handoff
    }

    /// Whether writers may not spin on the current reader phase
    /// (`RWSEM_NONSPINNABLE`).
    pub fn is_nonspinnable(&self) -> bool {
        self.0.st.borrow().nonspinnable
    }

    fn label(&self, read: bool) -> String {
        let kind = if read { "read" } else { "write" };
        format!("rwsem:{} ({kind})", self.0.class.name())
    }

    fn read_guard(&self, since: Time) -> ReadGuard {
        ReadGuard {
            sem: self.clone(),
            since,
        }
    }

    fn write_guard(&self, since: Time) -> WriteGuard {
        WriteGuard {
            sem: self.clone(),
            since,
            armed: true,
        }
    }

    /// `down_read_trylock()` (`__down_read_trylock()`): succeeds only on the
    /// fast-path condition.
    pub fn down_read_trylock(&self) -> Option<ReadGuard> {
        let now = self.0.sched.sim().now();
        {
            let mut st = self.0.st.borrow_mut();
            if st.writer.is_some() || !st.waiters.is_empty() || st.handoff {
                return None;
            }
            st.readers += 1;
        }
        self.0.class.acquired(LockKind::Read, 0, false, false);
        Some(self.read_guard(now))
    }

    /// `down_write_trylock()` (`rwsem_write_trylock()`): succeeds only if the
    /// count is 0 (free, nobody queued, no handoff).
    pub fn down_write_trylock(&self) -> Option<WriteGuard> {
        let sim = self.0.sched.sim();
        let me = sim.current_task();
        {
            let mut st = self.0.st.borrow_mut();
            if !st.is_free() || !st.waiters.is_empty() || st.handoff {
                return None;
            }
            st.writer = Some(me);
            st.nonspinnable = false;
        }
        self.0.class.acquired(LockKind::Write, 0, false, false);
        Some(self.write_guard(sim.now()))
    }

    /// `down_read()`.
    pub async fn down_read(&self) -> ReadGuard {
        if let Some(g) = self.down_read_trylock() {
            return g;
        }
        let sim = self.0.sched.sim().clone();
        let me = sim.current_task();
        let t0 = sim.now();
        let p = &self.0.params;
        let slot = Slot::new(me, true, t0);
        let mut out = Vec::new();
        let got_now = {
            let mut st = self.0.st.borrow_mut();
            if st.readers > 0 && st.writer.is_none() {
                // Owned by readers: no stealing, queue (below).
                false
            } else if st.writer.is_none() && !st.handoff {
                // Reader optimistic lock stealing.
                st.readers += 1;
                st.mark_wake(WakeType::ReadOwned, p, t0, &mut out);
                true
            } else {
                false
            }
        };
        let got_now = got_now || {
            let mut st = self.0.st.borrow_mut();
            if st.waiters.is_empty() && st.writer.is_none() {
                st.readers += 1;
                true
            } else {
                st.waiters.push_back(slot.clone());
                st.cond_wake_waiter(p, t0, &mut out);
                false
            }
        };
        wake_all(out);
        if got_now {
            self.0.class.acquired(LockKind::Read, 0, true, false);
            return self.read_guard(t0);
        }
        let mut pending = Pending {
            sem: self,
            slot: slot.clone(),
            armed: true,
        };
        let slept = !slot.is_granted();
        slot.wait_granted(&self.0.sched, &self.label(true)).await;
        pending.armed = false;
        let now = sim.now();
        self.0.class.acquired(LockKind::Read, now - t0, true, slept);
        self.read_guard(now)
    }

    /// `down_write()`.
    pub async fn down_write(&self) -> WriteGuard {
        if let Some(g) = self.down_write_trylock() {
            return g;
        }
        let sim = self.0.sched.sim().clone();
        let me = sim.current_task();
        let t0 = sim.now();
        let p = &self.0.params;
        let slot = Slot::new(me, false, t0);
        let mut pending = Pending {
            sem: self,
            slot: slot.clone(),
            armed: true,
        };
        // rwsem_can_spin_on_owner()
        let can_spin = {
            let st = self.0.st.borrow();
            !st.nonspinnable
                && match st.writer {
                    Some(w) => self.0.sched.is_running(w),
                    None => true,
                }
        };
        let mut got = false;
        if can_spin {
            self.0.st.borrow_mut().spinners.push_back(slot.clone());
            let label = format!("{} (spinning)", self.label(false));
            let mut in_reader_phase = false;
            let mut rspin_deadline = 0;
            got = optimistic_spin(&self.0.sched, &slot, p.spin_quantum_ns, &label, || {
                self.write_spin_check(&slot, &mut in_reader_phase, &mut rspin_deadline)
            })
            .await;
            if !got {
                self.0
                    .st
                    .borrow_mut()
                    .spinners
                    .retain(|s| !Rc::ptr_eq(s, &slot));
            }
        }
        let mut slept = false;
        if !got {
            let now = sim.now();
            let mut out = Vec::new();
            {
                let mut st = self.0.st.borrow_mut();
                // waiter.timeout = jiffies + RWSEM_WAIT_TIMEOUT, at queueing.
                slot.set_since(now);
                st.waiters.push_back(slot.clone());
                if st.waiters.len() > 1 {
                    st.cond_wake_waiter(p, now, &mut out);
                }
                // rwsem_try_write_lock(), first attempt.
                let first = st.waiters.front().is_some_and(|s| Rc::ptr_eq(s, &slot));
                if !slot.is_granted() && st.is_free() && (first || !st.handoff) {
                    st.waiters.retain(|s| !Rc::ptr_eq(s, &slot));
                    st.handoff = false;
                    st.grant_writer(&slot);
                }
            }
            wake_all(out);
            slept = !slot.is_granted();
            slot.wait_granted(&self.0.sched, &self.label(false)).await;
        }
        pending.armed = false;
        let now = sim.now();
        self.0
            .class
            .acquired(LockKind::Write, now - t0, true, slept);
        self.write_guard(now)
    }

    /// One turn of `rwsem_optimistic_spin()` between quanta.
    fn write_spin_check(
        &self,
        slot: &Rc<Slot>,
        in_reader_phase: &mut bool,
        rspin_deadline: &mut Time,
    ) -> SpinCheck {
        let now = self.0.sched.sim().now();
        let mut st = self.0.st.borrow_mut();
        if let Some(w) = st.writer {
            // OWNER_WRITER: spin while it runs.
            *in_reader_phase = false;
            return if self.0.sched.is_running(w) {
                SpinCheck::Continue
            } else {
                SpinCheck::Stop
            };
        }
        if st.readers > 0 {
            // OWNER_READER: time-bounded.
            if st.nonspinnable {
                return SpinCheck::Stop;
            }
            if !*in_reader_phase {
                *in_reader_phase = true;
                *rspin_deadline = now + rwsem_rspin_threshold_ns(st.readers);
                return SpinCheck::Continue;
            }
            if now > *rspin_deadline {
                st.nonspinnable = true;
                return SpinCheck::Stop;
            }
            return SpinCheck::Continue;
        }
        // Free: rwsem_try_write_lock_unqueued() unless a handoff is set.
        *in_reader_phase = false;
        if st.handoff {
            return SpinCheck::Continue;
        }
        st.spinners.retain(|s| !Rc::ptr_eq(s, slot));
        st.grant_writer(slot);
        SpinCheck::Acquired
    }

    fn up_read(&self) {
        let now = self.0.sched.sim().now();
        let mut out = Vec::new();
        self.0
            .st
            .borrow_mut()
            .up_read(&self.0.sched, &self.0.params, now, &mut out);
        wake_all(out);
    }

    fn up_write(&self) {
        let now = self.0.sched.sim().now();
        let mut out = Vec::new();
        self.0
            .st
            .borrow_mut()
            .up_write(&self.0.sched, &self.0.params, now, &mut out);
        wake_all(out);
    }

    /// A lock call dropped midway (its task was cancelled): leave the queues
    /// (`rwsem_del_wake_waiter()`), and release a lock granted meanwhile.
    fn abandon(&self, slot: &Rc<Slot>) {
        let now = self.0.sched.sim().now();
        let p = &self.0.params;
        let sched = &self.0.sched;
        let mut out = Vec::new();
        {
            let mut st = self.0.st.borrow_mut();
            st.spinners.retain(|s| !Rc::ptr_eq(s, slot));
            let was_first = st.waiters.front().is_some_and(|s| Rc::ptr_eq(s, slot));
            let before = st.waiters.len();
            st.waiters.retain(|s| !Rc::ptr_eq(s, slot));
            if st.waiters.len() != before {
                if st.waiters.is_empty() {
                    st.handoff = false;
                } else if was_first {
                    st.handoff = false;
                    st.mark_wake(WakeType::Any, p, now, &mut out);
                }
            }
            if slot.is_granted() {
                if slot.read {
                    st.up_read(sched, p, now, &mut out);
                } else {
                    st.up_write(sched, p, now, &mut out);
                }
            }
        }
        wake_all(out);
    }
}

struct Pending<'a> {
    sem: &'a RwSemaphore,
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

impl ReadGuard {
    /// The rwsem held.
    pub fn sem(&self) -> &RwSemaphore {
        &self.sem
    }
}

impl Drop for ReadGuard {
    fn drop(&mut self) {
        let now = self.sem.0.sched.sim().now();
        self.sem.0.class.released(LockKind::Read, now - self.since);
        self.sem.up_read();
    }
}

impl WriteGuard {
    /// The rwsem held.
    pub fn sem(&self) -> &RwSemaphore {
        &self.sem
    }

    /// `downgrade_write()`: keep the lock for read and let the queued readers
    /// in (`rwsem_downgrade_wake()`, `RWSEM_WAKE_READ_OWNED`).
    pub fn downgrade(mut self) -> ReadGuard {
        self.armed = false;
        let sem = self.sem.clone();
        let now = sem.0.sched.sim().now();
        sem.0.class.released(LockKind::Write, now - self.since);
        let mut out = Vec::new();
        {
            let mut st = sem.0.st.borrow_mut();
            st.writer = None;
            st.readers += 1;
            st.mark_wake(WakeType::ReadOwned, &sem.0.params, now, &mut out);
        }
        wake_all(out);
        sem.0.class.acquired(LockKind::Read, 0, false, false);
        sem.read_guard(now)
    }
}

impl Drop for WriteGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let now = self.sem.0.sched.sim().now();
        self.sem.0.class.released(LockKind::Write, now - self.since);
        self.sem.up_write();
    }
}
