//! Wait queues, completions and `wait_var_event`: the kernel's ways for a task
//! to sleep until a condition holds.
//!
//! Models:
//! - `include/linux/wait.h`, `kernel/sched/wait.c`: `wait_queue_head`,
//!   `wait_event()` / `wait_event_timeout()` / `wait_event_exclusive_cmd()`
//!   (the `prepare_to_wait_event()` / `schedule()` / `finish_wait()` loop),
//!   `__wake_up()` with `nr_exclusive` (`wake_up()` = 1, `wake_up_all()` = all),
//!   `autoremove_wake_function()` (a woken entry leaves the queue).
//! - `kernel/sched/completion.c`: `complete()`, `complete_all()`,
//!   `wait_for_completion()`, `wait_for_completion_timeout()`,
//!   `try_wait_for_completion()`, `completion_done()`, `reinit_completion()`,
//!   with the `done` counter and `UINT_MAX` meaning "completed for everyone".
//! - `kernel/sched/wait_bit.c`: `wait_var_event()` / `wake_up_var()` on the
//!   hashed `bit_wait_table`; `wake_bit_function()` only wakes entries whose key
//!   matches, and every woken waiter re-checks its own condition.
//!
//! How it maps: a waiting task is an async future. Each poll is one turn of the
//! kernel loop: (re)register on the queue if a wake took the entry off, then
//! check the condition; a wakeup is the queue calling the entry's `Waker`. The
//! condition is always checked after registering, so a wakeup can never fall
//! between the check and the sleep (no lost wakeups).
//!
//! Simplified or left out:
//! - The kernel puts non-exclusive entries at the head of the list (LIFO) and
//!   exclusive ones at the tail. Here each kind keeps FIFO order; a wakeup
//!   wakes the non-exclusive waiters first (oldest first), then the oldest
//!   exclusive one(s), which is the same set the kernel wakes.
//! - No task states (`TASK_INTERRUPTIBLE`, `TASK_KILLABLE`) and no signals. A
//!   cancelled task (its future dropped) leaves the queue; an exclusive waiter
//!   that was chosen by a wakeup but is dropped before it consumed the event
//!   passes the wakeup on to the next exclusive waiter (what the old
//!   `abort_exclusive_wait()` did), so cancellation never strands the others.
//! - `wait_var_event()`'s table is one keyed list rather than 256 hashed queues:
//!   hash collisions in the kernel only cause spurious wakeups, which a waiter
//!   absorbs by re-checking, so they are not modelled.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use sim::{Sim, Time, TimerId};

/// Key used by entries of plain wait queues (they never filter on keys).
const NO_KEY: u64 = 0;

/// One `wait_queue_entry`: a sleeping task's registration on a queue.
struct Entry {
    id: u64,
    key: u64,
    exclusive: bool,
    waker: Waker,
}

/// The `wait_queue_head`: registered entries in registration order, plus the
/// text a deadlock report shows for a task blocked here.
struct Head {
    label: String,
    entries: RefCell<VecDeque<Entry>>,
    next_id: Cell<u64>,
}

impl Head {
    fn new(label: String) -> Rc<Self> {
        Rc::new(Head {
            label,
            entries: RefCell::new(VecDeque::new()),
            next_id: Cell::new(0),
        })
    }

    /// `prepare_to_wait{,_exclusive}`: appends an entry, returns its id.
    fn add(&self, key: u64, exclusive: bool, waker: Waker) -> u64 {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        self.entries.borrow_mut().push_back(Entry {
            id,
            key,
            exclusive,
            waker,
        });
        id
    }

    /// Refreshes the waker of a still-queued entry; false if a wakeup already
    /// took the entry off the queue.
    fn refresh(&self, id: u64, waker: &Waker) -> bool {
        let mut entries = self.entries.borrow_mut();
        match entries.iter_mut().find(|e| e.id == id) {
            Some(e) => {
                if !e.waker.will_wake(waker) {
                    e.waker = waker.clone();
                }
                true
            }
            None => false,
        }
    }

    /// `finish_wait`: removes the entry if still queued; true if it was.
    fn remove(&self, id: u64) -> bool {
        let mut entries = self.entries.borrow_mut();
        match entries.iter().position(|e| e.id == id) {
            Some(i) => {
                entries.remove(i);
                true
            }
            None => false,
        }
    }

    /// `__wake_up_common`: wakes every non-exclusive entry and up to
    /// `nr_exclusive` exclusive ones (oldest first), only entries whose key
    /// matches `key` if given. Woken entries leave the queue
    /// (`autoremove_wake_function`). Returns how many were woken.
    fn wake(&self, key: Option<u64>, nr_exclusive: usize, non_exclusive: bool) -> usize {
        let woken: Vec<Waker> = {
            let mut entries = self.entries.borrow_mut();
            let matches = |e: &Entry| key.is_none_or(|k| e.key == k);
            let mut woken = Vec::new();
            if non_exclusive {
                let mut i = 0;
                while i < entries.len() {
                    if !entries[i].exclusive && matches(&entries[i]) {
                        let e = entries.remove(i).expect("index in range");
                        woken.push(e.waker);
                    } else {
                        i += 1;
                    }
                }
            }
            let mut left = nr_exclusive;
            let mut i = 0;
            while left > 0 && i < entries.len() {
                if entries[i].exclusive && matches(&entries[i]) {
                    let e = entries.remove(i).expect("index in range");
                    woken.push(e.waker);
                    left -= 1;
                } else {
                    i += 1;
                }
            }
            woken
        };
        // Wake outside the borrow.
        let n = woken.len();
        for w in woken {
            w.wake();
        }
        n
    }

    fn len(&self) -> usize {
        self.entries.borrow().len()
    }
}

/// Future of one wait: the `___wait_event()` loop. Resolves to `true` once the
/// condition held, `false` if the timeout passed first (the condition is checked
/// before the timeout, as `___wait_cond_timeout()` does). Dropping it leaves the
/// queue and cancels its timer.
#[must_use = "a wait does nothing unless awaited"]
pub struct WaitEvent<F> {
    head: Rc<Head>,
    sim: Sim,
    cond: F,
    key: u64,
    keyed: bool,
    exclusive: bool,
    deadline: Option<Time>,
    timer: Option<TimerId>,
    entry: Option<u64>,
    first: bool,
}

// No field is ever pinned (the condition is called through `&mut`), so the
// future can move freely whatever the closure's type.
impl<F> Unpin for WaitEvent<F> {}

impl<F> WaitEvent<F> {
    fn new(head: Rc<Head>, sim: &Sim, cond: F) -> Self {
        WaitEvent {
            head,
            sim: sim.clone(),
            cond,
            key: NO_KEY,
            keyed: false,
            exclusive: false,
            deadline: None,
            timer: None,
            entry: None,
            first: true,
        }
    }

    /// `finish_wait`, and for an exclusive waiter that a wakeup chose but that
    /// did not consume the event (timed out, or dropped), pass the wakeup on.
    fn finish(&mut self, consumed: bool) {
        if let Some(t) = self.timer.take() {
            self.sim.cancel_timer(t);
        }
        if let Some(id) = self.entry.take() {
            let still_queued = self.head.remove(id);
            if !still_queued && self.exclusive && !consumed {
                let key = self.keyed.then_some(self.key);
                self.head.wake(key, 1, false);
            }
        }
    }

    fn label(&self) -> String {
        let mut s = self.head.label.clone();
        if self.keyed {
            s.push_str(&format!(" key={:#x}", self.key));
        }
        if self.exclusive {
            s.push_str(" (exclusive)");
        }
        s
    }
}

impl<F: FnMut() -> bool> Future for WaitEvent<F> {
    type Output = bool;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
        let this = self.get_mut();
        // Fast path of `wait_event()`: no registration if it already holds.
        if this.first {
            this.first = false;
            if (this.cond)() {
                return Poll::Ready(true);
            }
        }
        // prepare_to_wait_event: (re)queue unless still queued.
        let queued = match this.entry {
            Some(id) => this.head.refresh(id, cx.waker()),
            None => false,
        };
        if !queued {
            let id = this.head.add(this.key, this.exclusive, cx.waker().clone());
            this.entry = Some(id);
        }
        // The condition is checked after registering: no lost wakeup.
        if (this.cond)() {
            this.finish(true);
            return Poll::Ready(true);
        }
        if let Some(deadline) = this.deadline {
            if this.sim.now() >= deadline {
                this.finish(false);
                return Poll::Ready(false);
            }
            if this.timer.is_none() {
                this.timer = Some(this.sim.wake_at(deadline, cx.waker().clone()));
            }
        }
        this.sim.set_waiting_on(this.label());
        Poll::Pending
    }
}

impl<F> Drop for WaitEvent<F> {
    fn drop(&mut self) {
        self.finish(false);
    }
}

// ------------------------------------------------------------------ WaitQueue

/// A `wait_queue_head_t`. Cheap to clone (an `Rc`); clones are the same queue.
#[derive(Clone)]
pub struct WaitQueue(Rc<Head>);

impl WaitQueue {
    /// A queue named `name`; a task blocked on it shows in a deadlock report as
    /// `wait_queue:NAME`.
    pub fn new(name: &str) -> Self {
        Self::with_label(format!("wait_queue:{name}"))
    }

    /// A queue whose blocked tasks show in a deadlock report as `label`
    /// verbatim (for primitives built on a wait queue, e.g. `rcu:...`).
    pub fn with_label(label: impl Into<String>) -> Self {
        WaitQueue(Head::new(label.into()))
    }

    /// The text a deadlock report shows for a task waiting here.
    pub fn label(&self) -> &str {
        &self.0.label
    }

    /// `wait_event()`: returns once `cond()` is true. Checks first; otherwise
    /// registers, re-checks, sleeps, and repeats after every wakeup.
    pub fn wait_event<F: FnMut() -> bool>(&self, sim: &Sim, cond: F) -> impl Future<Output = ()> {
        let w = WaitEvent::new(self.0.clone(), sim, cond);
        async move {
            w.await;
        }
    }

    /// `wait_event_timeout()`: `true` if `cond()` became true, `false` if
    /// `timeout_ns` passed first.
    pub fn wait_event_timeout<F: FnMut() -> bool>(
        &self,
        sim: &Sim,
        cond: F,
        timeout_ns: Time,
    ) -> WaitEvent<F> {
        let mut w = WaitEvent::new(self.0.clone(), sim, cond);
        w.deadline = Some(sim.now().saturating_add(timeout_ns));
        w
    }

    /// An exclusive wait (`wait_event_exclusive_cmd()` /
    /// `prepare_to_wait_exclusive()`): a `wake_up()` wakes only one exclusive
    /// waiter, the one that has waited longest.
    pub fn wait_event_exclusive<F: FnMut() -> bool>(
        &self,
        sim: &Sim,
        cond: F,
    ) -> impl Future<Output = ()> {
        let mut w = WaitEvent::new(self.0.clone(), sim, cond);
        w.exclusive = true;
        async move {
            w.await;
        }
    }

    /// An exclusive wait with a timeout; `false` on timeout.
    pub fn wait_event_exclusive_timeout<F: FnMut() -> bool>(
        &self,
        sim: &Sim,
        cond: F,
        timeout_ns: Time,
    ) -> WaitEvent<F> {
        let mut w = WaitEvent::new(self.0.clone(), sim, cond);
        w.exclusive = true;
        w.deadline = Some(sim.now().saturating_add(timeout_ns));
        w
    }

    /// `wake_up()`: wakes every non-exclusive waiter and one exclusive waiter.
    /// Returns how many waiters were woken.
    pub fn wake_up(&self) -> usize {
        self.0.wake(None, 1, true)
    }

    /// `wake_up_nr()`: every non-exclusive waiter and up to `nr` exclusive ones.
    pub fn wake_up_nr(&self, nr: usize) -> usize {
        self.0.wake(None, nr, true)
    }

    /// `wake_up_all()`: wakes every waiter.
    pub fn wake_up_all(&self) -> usize {
        self.0.wake(None, usize::MAX, true)
    }

    /// `waitqueue_active()`: whether anyone is queued.
    pub fn waitqueue_active(&self) -> bool {
        self.0.len() > 0
    }

    /// Entries currently queued (woken waiters that have not run yet are not
    /// counted: a wakeup takes the entry off).
    pub fn nr_waiters(&self) -> usize {
        self.0.len()
    }
}

// ----------------------------------------------------------------- Completion

/// `done` value meaning "completed for every present and future waiter"
/// (`UINT_MAX` in kernel/sched/completion.c, set by `complete_all()`).
pub const COMPLETION_ALL: u32 = u32::MAX;

struct CompletionInner {
    done: Cell<u32>,
    wq: WaitQueue,
}

/// A `struct completion`. Cheap to clone (an `Rc`); clones are the same one.
#[derive(Clone)]
pub struct Completion(Rc<CompletionInner>);

impl Completion {
    /// `init_completion()`; blocked waiters show as `completion:NAME`.
    pub fn new(name: &str) -> Self {
        Completion(Rc::new(CompletionInner {
            done: Cell::new(0),
            wq: WaitQueue::with_label(format!("completion:{name}")),
        }))
    }

    /// `complete()`: one more `done` (unless completed for all) and wake one
    /// waiter.
    pub fn complete(&self) {
        let d = self.0.done.get();
        if d != COMPLETION_ALL {
            self.0.done.set(d + 1);
        }
        self.0.wq.wake_up();
    }

    /// `complete_all()`: every present and future wait returns at once (until
    /// `reinit_completion()`).
    pub fn complete_all(&self) {
        self.0.done.set(COMPLETION_ALL);
        self.0.wq.wake_up_all();
    }

    /// `try_wait_for_completion()`: consumes one `done` if there is one,
    /// without blocking.
    pub fn try_wait_for_completion(&self) -> bool {
        take_done(&self.0.done)
    }

    /// `completion_done()`: whether a wait would return without blocking.
    pub fn completion_done(&self) -> bool {
        self.0.done.get() != 0
    }

    /// `reinit_completion()`: back to not completed.
    pub fn reinit_completion(&self) {
        self.0.done.set(0);
    }

    /// The `done` counter (`COMPLETION_ALL` after `complete_all()`).
    pub fn done(&self) -> u32 {
        self.0.done.get()
    }

    /// `wait_for_completion()`: waits (exclusively, FIFO) for a `done` and
    /// consumes it.
    pub fn wait_for_completion(&self, sim: &Sim) -> impl Future<Output = ()> {
        let inner = self.0.clone();
        let w = self
            .0
            .wq
            .wait_event_exclusive(sim, move || take_done(&inner.done));
        async move {
            w.await;
        }
    }

    /// `wait_for_completion_timeout()`: `false` if `timeout_ns` passed first
    /// (nothing consumed then).
    pub fn wait_for_completion_timeout(
        &self,
        sim: &Sim,
        timeout_ns: Time,
    ) -> impl Future<Output = bool> {
        let inner = self.0.clone();
        self.0
            .wq
            .wait_event_exclusive_timeout(sim, move || take_done(&inner.done), timeout_ns)
    }
}

/// Consumes one `done` if available (not decrementing `COMPLETION_ALL`).
fn take_done(done: &Cell<u32>) -> bool {
    match done.get() {
        0 => false,
        COMPLETION_ALL => true,
        d => {
            done.set(d - 1);
            true
        }
    }
}

// ---------------------------------------------------------- wait_var_event

/// Key of a variable waited on with `wait_var_event()` (the kernel hashes the
/// variable's address; callers here derive a key from an object id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VarKey(pub u64);

/// The `bit_wait_table` of one modelled kernel, for `wait_var_event()` and
/// `wake_up_var()`. Cheap to clone (an `Rc`).
#[derive(Clone)]
pub struct WaitVarTable(Rc<Head>);

impl WaitVarTable {
    /// A table; blocked waiters show as `wait_var:NAME key=0x..`.
    pub fn new(name: &str) -> Self {
        WaitVarTable(Head::new(format!("wait_var:{name}")))
    }

    /// `wait_var_event()`: waits until `cond()` holds, woken by
    /// `wake_up_var(key)`.
    pub fn wait_var_event<F: FnMut() -> bool>(
        &self,
        sim: &Sim,
        key: VarKey,
        cond: F,
    ) -> impl Future<Output = ()> {
        let w = self.wait(sim, key, cond, None);
        async move {
            w.await;
        }
    }

    /// `wait_var_event_timeout()`: `false` if `timeout_ns` passed first.
    pub fn wait_var_event_timeout<F: FnMut() -> bool>(
        &self,
        sim: &Sim,
        key: VarKey,
        cond: F,
        timeout_ns: Time,
    ) -> WaitEvent<F> {
        self.wait(sim, key, cond, Some(sim.now().saturating_add(timeout_ns)))
    }

    fn wait<F>(&self, sim: &Sim, key: VarKey, cond: F, deadline: Option<Time>) -> WaitEvent<F> {
        let mut w = WaitEvent::new(self.0.clone(), sim, cond);
        w.key = key.0;
        w.keyed = true;
        w.deadline = deadline;
        w
    }

    /// `wake_up_var()`: wakes every waiter on `key`; each re-checks its own
    /// condition. Returns how many were woken.
    pub fn wake_up_var(&self, key: VarKey) -> usize {
        self.0.wake(Some(key.0), 1, true)
    }

    /// Waiters currently queued on `key`.
    pub fn nr_waiters(&self, key: VarKey) -> usize {
        self.0
            .entries
            .borrow()
            .iter()
            .filter(|e| e.key == key.0)
            .count()
    }
}
