//! The executor: tasks (`async` blocks), timers and the run loop.
//!
//! A run alternates two steps until it ends: poll every ready task (FIFO, in the
//! order they were woken), then advance virtual time to the earliest pending timer
//! and fire it (waking a task or calling a callback). Nothing depends on wall-clock
//! time or on hash order, so the same inputs always give the same sequence.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use crate::queue::{EventQueue, Next};
use crate::rng::{make_rng, SimRng};
use crate::slab::{Key, Slab};
use crate::smallfn::SmallFn;
pub use crate::task::TaskId;
use crate::task::{ReadyQueue, TaskRef};
use crate::timers::TimerTable;
use crate::trace::{TraceEvent, TraceSink};
use crate::Time;

/// Handle of a pending timer, for [`Sim::cancel_timer`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimerId(Key);

/// A live task as the executor's slab keeps it: its cell (header and future,
/// see `task.rs`) and what only the rare paths read.
struct Task {
    cell: TaskRef,
    name: Rc<str>,
    daemon: bool,
    waiting_on: Option<Cow<'static, str>>,
}

struct Core {
    queue: EventQueue,
    timers: TimerTable,
}

struct Inner {
    seed: u64,
    now: Cell<Time>,
    /// Pending timers: the event queue and the callbacks by slot (a waker's
    /// timer calls `wake`), under one borrow.
    core: RefCell<Core>,
    tasks: RefCell<Slab<Task>>,
    ready: Rc<ReadyQueue>,
    current: Cell<Option<TaskId>>,
    trace: RefCell<TraceSink>,
    trace_on: Cell<bool>,
    events: Cell<u64>,
    polls: Cell<u64>,
    stop: Cell<bool>,
}

/// Handle on one simulation. Cheap to clone (an `Rc`); model components keep one.
#[derive(Clone)]
pub struct Sim(Rc<Inner>);

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunOutcome {
    /// Nothing left to do: every non-daemon task finished and no timer is pending.
    Finished,
    /// Reached the time limit; `now()` is the limit.
    TimeLimit,
    /// The condition given to [`Sim::run_while`] stopped holding.
    Condition,
    /// A component called [`Sim::stop`].
    Stopped,
}

/// A task that could never run again when the run ran out of events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockedTask {
    pub id: TaskId,
    pub name: String,
    /// What it waits on, as the primitive it blocks in described it.
    pub waiting_on: String,
}

/// Every non-daemon task is blocked and no timer is pending: the run can never
/// progress. Either a model bug or a modelled deadlock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deadlock {
    pub time: Time,
    pub blocked: Vec<BlockedTask>,
}

impl fmt::Display for Deadlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "deadlock at t={}: {} task(s) blocked with no pending timer:",
            crate::fmt_ns(self.time),
            self.blocked.len()
        )?;
        for b in &self.blocked {
            writeln!(
                f,
                "  task {} '{}' waiting on {}",
                b.id, b.name, b.waiting_on
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for Deadlock {}

impl Sim {
    /// A new simulation at time 0 whose random substreams derive from `seed`.
    pub fn new(seed: u64) -> Self {
        Sim(Rc::new(Inner {
            seed,
            now: Cell::new(0),
            core: RefCell::new(Core {
                queue: EventQueue::new(),
                timers: TimerTable::new(),
            }),
            tasks: RefCell::new(Slab::new()),
            ready: Rc::new(RefCell::new(VecDeque::new())),
            current: Cell::new(None),
            trace: RefCell::new(TraceSink::Off),
            trace_on: Cell::new(false),
            events: Cell::new(0),
            polls: Cell::new(0),
            stop: Cell::new(false),
        }))
    }

    /// Current virtual time, ns.
    #[inline]
    pub fn now(&self) -> Time {
        self.0.now.get()
    }

    /// The run seed.
    pub fn seed(&self) -> u64 {
        self.0.seed
    }

    /// A generator for the named substream (same name, same numbers).
    pub fn rng(&self, name: &str) -> SimRng {
        make_rng(self.0.seed, name)
    }

    /// Timer events fired so far.
    pub fn events(&self) -> u64 {
        self.0.events.get()
    }

    /// Task polls so far.
    pub fn polls(&self) -> u64 {
        self.0.polls.get()
    }

    /// Timers still pending (not fired, not cancelled).
    pub fn pending_timers(&self) -> usize {
        self.0.core.borrow().timers.live()
    }

    /// Live tasks.
    pub fn live_tasks(&self) -> usize {
        self.0.tasks.borrow().len()
    }

    // ---------------------------------------------------------------- tasks

    /// Spawns a task. It first runs at the current instant, after tasks already
    /// ready. Its result is read through the returned handle.
    pub fn spawn<T: 'static>(
        &self,
        name: impl Into<Rc<str>>,
        fut: impl Future<Output = T> + 'static,
    ) -> JoinHandle<T> {
        self.spawn_inner(name.into(), fut, false)
    }

    /// Spawns a daemon: a service task (a worker pool, a flusher) that may stay
    /// blocked forever without that being reported as a deadlock.
    pub fn spawn_daemon<T: 'static>(
        &self,
        name: impl Into<Rc<str>>,
        fut: impl Future<Output = T> + 'static,
    ) -> JoinHandle<T> {
        self.spawn_inner(name.into(), fut, true)
    }

    fn spawn_inner<T: 'static>(
        &self,
        name: Rc<str>,
        fut: impl Future<Output = T> + 'static,
        daemon: bool,
    ) -> JoinHandle<T> {
        let state = Rc::new(JoinState {
            result: RefCell::new(None),
            done: Cell::new(false),
            cancelled: Cell::new(false),
            waiters: RefCell::new(Vec::new()),
        });
        let st = state.clone();
        let wrapped = async move {
            let r = fut.await;
            *st.result.borrow_mut() = Some(r);
            st.done.set(true);
            for w in st.waiters.borrow_mut().drain(..) {
                w.wake();
            }
        };
        let id = {
            let mut tasks = self.0.tasks.borrow_mut();
            let id = TaskId(tasks.next_key());
            let cell = TaskRef::new(id, wrapped, self.0.ready.clone());
            let key = tasks.insert(Task {
                cell: cell.clone(),
                name: name.clone(),
                daemon,
                waiting_on: None,
            });
            debug_assert_eq!(key, id.0);
            cell.wake();
            id
        };
        JoinHandle { id, name, state }
    }

    /// The task being polled, if any.
    #[inline]
    pub fn current(&self) -> Option<TaskId> {
        self.0.current.get()
    }

    /// The task being polled; panics outside a task (a model bug).
    pub fn current_task(&self) -> TaskId {
        self.0
            .current
            .get()
            .expect("sim: called outside a task; this needs a running task")
    }

    /// A task's name (`None` once it finished).
    pub fn task_name(&self, id: TaskId) -> Option<Rc<str>> {
        self.0.tasks.borrow().get(id.0).map(|t| t.name.clone())
    }

    /// Whether the task is still alive.
    pub fn is_alive(&self, id: TaskId) -> bool {
        self.0.tasks.borrow().get(id.0).is_some()
    }

    /// Records what the current task is about to block on, for the deadlock
    /// report. Cleared each time the task is polled again.
    pub fn set_waiting_on(&self, what: impl Into<Cow<'static, str>>) {
        if let Some(id) = self.0.current.get() {
            if let Some(t) = self.0.tasks.borrow_mut().get_mut(id.0) {
                t.waiting_on = Some(what.into());
                t.cell.set_waiting();
            }
        }
    }

    /// Wakes a task by id (no effect on a finished task).
    pub fn wake(&self, id: TaskId) {
        if let Some(t) = self.0.tasks.borrow().get(id.0) {
            // Only queues it (no model code runs), so under the borrow.
            t.cell.wake_by_ref();
        }
    }

    /// Cancels a task: its future is dropped (which cancels its pending timers and
    /// leaves whatever it waited on), now or, if it is the task being polled, as
    /// soon as its current poll returns. Tasks joining it stay blocked.
    pub fn cancel(&self, id: TaskId) {
        if self.0.current.get() == Some(id) {
            if let Some(t) = self.0.tasks.borrow().get(id.0) {
                t.cell.request_cancel();
            }
            return;
        }
        let task = self.0.tasks.borrow_mut().remove(id.0);
        // Dropped outside the borrow: dropping a future may cancel timers or wake.
        if let Some(t) = task {
            t.cell.set_done();
            t.cell.drop_future();
        }
    }

    // --------------------------------------------------------------- timers

    /// Calls `f` at time `at` (or now, if `at` is in the past).
    pub fn schedule_at(&self, at: Time, f: impl FnOnce() + 'static) -> TimerId {
        self.add_timer(at, SmallFn::new(f))
    }

    /// Calls `f` after `delay` ns.
    pub fn schedule_in(&self, delay: Time, f: impl FnOnce() + 'static) -> TimerId {
        self.schedule_at(self.now().saturating_add(delay), f)
    }

    /// Wakes `waker` at time `at`.
    #[inline]
    pub fn wake_at(&self, at: Time, waker: Waker) -> TimerId {
        self.add_timer(at, SmallFn::waker(waker))
    }

    #[inline(always)]
    fn add_timer(&self, at: Time, f: SmallFn) -> TimerId {
        let at = at.max(self.now());
        let mut core = self.0.core.borrow_mut();
        let key = core.timers.insert(f);
        core.queue.push(at, key.idx);
        TimerId(key)
    }

    /// Cancels a pending timer. Returns whether it was still pending.
    #[inline]
    pub fn cancel_timer(&self, id: TimerId) -> bool {
        let t = self.0.core.borrow_mut().timers.cancel(id.0);
        let pending = t.is_some();
        // The payload (a waker or a closure) is dropped outside the borrow.
        drop(t);
        pending
    }

    /// A future that completes `delay` ns from now.
    #[inline]
    pub fn sleep(&self, delay: Time) -> Sleep {
        self.sleep_until(self.now().saturating_add(delay))
    }

    /// A future that completes at time `at`.
    #[inline]
    pub fn sleep_until(&self, at: Time) -> Sleep {
        Sleep {
            sim: self.clone(),
            deadline: at,
            timer: None,
        }
    }

    // ---------------------------------------------------------------- trace

    /// Sets where trace events go.
    pub fn set_trace(&self, sink: TraceSink) {
        self.0.trace_on.set(sink.enabled());
        *self.0.trace.borrow_mut() = sink;
    }

    /// Whether tracing is on (so callers can skip preparing fields).
    #[inline]
    pub fn tracing(&self) -> bool {
        self.0.trace_on.get()
    }

    /// Emits a trace event named like a kernel tracepoint; `fields` is only
    /// called when tracing is on.
    #[inline]
    pub fn trace(&self, name: &'static str, fields: impl FnOnce() -> String) {
        if self.0.trace_on.get() {
            self.trace_slow(name, fields());
        }
    }

    fn trace_slow(&self, name: &'static str, fields: String) {
        let task = self
            .current()
            .and_then(|id| self.task_name(id))
            .map(|n| n.to_string())
            .unwrap_or_else(|| "-".to_string());
        self.0.trace.borrow_mut().emit(TraceEvent {
            time: self.now(),
            task,
            name,
            fields,
        });
    }

    /// Takes the events kept by a `TraceSink::Memory` sink (empty otherwise).
    pub fn take_trace(&self) -> Vec<TraceEvent> {
        match &mut *self.0.trace.borrow_mut() {
            TraceSink::Memory(v) => std::mem::take(v),
            _ => Vec::new(),
        }
    }

    /// Flushes a writer sink.
    pub fn flush_trace(&self) -> std::io::Result<()> {
        match &mut *self.0.trace.borrow_mut() {
            TraceSink::Writer(w) => w.flush(),
            _ => Ok(()),
        }
    }

    // ------------------------------------------------------------------ run

    /// Asks the run loop to return [`RunOutcome::Stopped`] after the current step.
    pub fn stop(&self) {
        self.0.stop.set(true);
    }

    /// Runs until nothing is left to do.
    pub fn run(&self) -> Result<RunOutcome, Deadlock> {
        self.run_loop(Time::MAX, || true)
    }

    /// Runs until virtual time `limit` (events at exactly `limit` still run).
    pub fn run_until(&self, limit: Time) -> Result<RunOutcome, Deadlock> {
        self.run_loop(limit, || true)
    }

    /// Runs while `cond()` holds (checked after every step) and time <= `limit`.
    pub fn run_while(
        &self,
        limit: Time,
        cond: impl FnMut() -> bool,
    ) -> Result<RunOutcome, Deadlock> {
        self.run_loop(limit, cond)
    }

    /// The run loop, generic over `cond` so that `run`'s and `run_until`'s
    /// constant condition costs nothing per event.
    #[inline]
    fn run_loop(
        &self,
        limit: Time,
        mut cond: impl FnMut() -> bool,
    ) -> Result<RunOutcome, Deadlock> {
        self.0.stop.set(false);
        loop {
            if !self.0.ready.borrow().is_empty() {
                self.poll_ready();
            }
            if self.0.stop.replace(false) {
                return Ok(RunOutcome::Stopped);
            }
            if !cond() {
                return Ok(RunOutcome::Condition);
            }
            let (time, f, next) = {
                let mut core = self.0.core.borrow_mut();
                match core.queue.pop_until(limit) {
                    Next::Due(e, next) => {
                        // Started now, the load of the next timer's slot
                        // overlaps this event's work.
                        core.timers.prefetch(next);
                        (e.time(), core.timers.fire(e.slot()), next)
                    }
                    Next::Empty => {
                        drop(core);
                        return self.finish();
                    }
                    Next::Later => {
                        drop(core);
                        // Never backwards (a limit already passed leaves `now`).
                        self.0.now.set(limit.max(self.now()));
                        return Ok(RunOutcome::TimeLimit);
                    }
                }
            };
            let Some(f) = f else {
                continue; // cancelled
            };
            self.0.now.set(time);
            self.0.events.set(self.0.events.get() + 1);
            match f.into_waker() {
                Ok(w) => {
                    crate::task::wake(w);
                    // By now the next timer's slot has arrived: if it too
                    // wakes a task, start loading that task's cell, which
                    // the poll of the task just woken then overlaps. (Only
                    // after a task timer: a run of callbacks skips the read.)
                    self.0.core.borrow().timers.prefetch_woken(next);
                }
                Err(f) => f.call(),
            }
        }
    }

    fn finish(&self) -> Result<RunOutcome, Deadlock> {
        let tasks = self.0.tasks.borrow();
        let blocked: Vec<BlockedTask> = tasks
            .iter()
            .filter(|(_, t)| !t.daemon)
            .map(|(k, t)| BlockedTask {
                id: TaskId(k),
                name: t.name.to_string(),
                waiting_on: t
                    .waiting_on
                    .as_deref()
                    .unwrap_or("(nothing recorded: a bare future with no waker)")
                    .to_string(),
            })
            .collect();
        if blocked.is_empty() {
            Ok(RunOutcome::Finished)
        } else {
            Err(Deadlock {
                time: self.now(),
                blocked,
            })
        }
    }

    #[inline]
    fn poll_ready(&self) {
        loop {
            let next = self.0.ready.borrow_mut().pop_front();
            let Some(task) = next else { break };
            let (done, waiting) = task.dequeued();
            if done {
                continue; // finished or cancelled since it was woken
            }
            let id = task.id();
            if waiting {
                if let Some(t) = self.0.tasks.borrow_mut().get_mut(id.0) {
                    t.waiting_on = None;
                }
            }
            self.0.polls.set(self.0.polls.get() + 1);
            let waker = task.borrowed_waker();
            let mut cx = Context::from_waker(&waker);
            self.0.current.set(Some(id));
            let res = task.poll(&mut cx);
            self.0.current.set(None);
            if res.is_ready() || task.cancel_requested() {
                task.set_done();
                let t = self.0.tasks.borrow_mut().remove(id.0);
                drop(t);
                // `task` keeps the cell while its future is dropped.
                task.drop_future();
            }
        }
    }
}

impl Sim {
    /// An owned waker for a live task.
    pub fn waker(&self, id: TaskId) -> Option<Waker> {
        self.0
            .tasks
            .borrow()
            .get(id.0)
            .map(|t| t.cell.clone().into_waker())
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The simulation is gone: its live tasks' futures are dropped now
        // (a waker kept elsewhere keeps only the cell, and wakes nothing).
        // Taken out of the cells first, since a future's drop code may run.
        let tasks = std::mem::replace(self.tasks.get_mut(), Slab::new());
        for (_, t) in tasks.iter() {
            t.cell.set_done();
            t.cell.drop_future();
        }
        drop(tasks);
        // Tasks still queued hold the queue (through their cells): empty it
        // so that both are freed.
        let queued = std::mem::take(&mut *self.ready.borrow_mut());
        drop(queued);
    }
}

// ------------------------------------------------------------------- Sleep

/// Future returned by [`Sim::sleep`]: completes at its deadline. Dropping it
/// before then cancels its timer.
pub struct Sleep {
    sim: Sim,
    deadline: Time,
    timer: Option<TimerId>,
}

impl Future for Sleep {
    type Output = ();
    #[inline]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.sim.now() >= self.deadline {
            self.timer = None;
            return Poll::Ready(());
        }
        if self.timer.is_none() {
            let t = self.sim.wake_at(self.deadline, cx.waker().clone());
            self.timer = Some(t);
        }
        Poll::Pending
    }
}

impl Drop for Sleep {
    #[inline]
    fn drop(&mut self) {
        if let Some(t) = self.timer.take() {
            self.sim.cancel_timer(t);
        }
    }
}

/// Yields once: the task goes to the back of the ready queue at the same instant.
pub fn yield_now() -> impl Future<Output = ()> {
    let mut yielded = false;
    std::future::poll_fn(move |cx| {
        if yielded {
            Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
}

// -------------------------------------------------------------- JoinHandle

struct JoinState<T> {
    result: RefCell<Option<T>>,
    done: Cell<bool>,
    cancelled: Cell<bool>,
    waiters: RefCell<Vec<Waker>>,
}

/// Handle on a spawned task: await it for its result (`join`), or read the
/// result after the run with [`JoinHandle::result`].
pub struct JoinHandle<T> {
    id: TaskId,
    name: Rc<str>,
    state: Rc<JoinState<T>>,
}

impl<T> JoinHandle<T> {
    /// The task's id.
    pub fn id(&self) -> TaskId {
        self.id
    }

    /// Whether the task has finished.
    pub fn is_finished(&self) -> bool {
        self.state.done.get()
    }

    /// Takes the result, if the task finished (and it was not taken already).
    pub fn result(&self) -> Option<T> {
        self.state.result.borrow_mut().take()
    }

    /// Cancels the task (see [`Sim::cancel`]).
    pub fn cancel(&self, sim: &Sim) {
        self.state.cancelled.set(true);
        sim.cancel(self.id);
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = T;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        if let Some(r) = self.state.result.borrow_mut().take() {
            return Poll::Ready(r);
        }
        if self.state.done.get() {
            panic!("sim: result of task '{}' awaited twice", self.name);
        }
        self.state.waiters.borrow_mut().push(cx.waker().clone());
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MSEC, USEC};

    #[test]
    fn sleep_advances_time() {
        let sim = Sim::new(1);
        let s = sim.clone();
        let h = sim.spawn("t", async move {
            s.sleep(3 * MSEC).await;
            s.sleep(USEC).await;
            s.now()
        });
        assert_eq!(sim.run(), Ok(RunOutcome::Finished));
        assert_eq!(h.result(), Some(3 * MSEC + USEC));
    }

    #[test]
    fn same_instant_is_fifo_by_scheduling_order() {
        let sim = Sim::new(1);
        let log = Rc::new(RefCell::new(Vec::new()));
        for i in 0..5 {
            let (s, log) = (sim.clone(), log.clone());
            sim.spawn(format!("t{i}"), async move {
                s.sleep(10).await;
                log.borrow_mut().push(i);
            });
        }
        sim.run().unwrap();
        assert_eq!(*log.borrow(), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn join_returns_result() {
        let sim = Sim::new(1);
        let s = sim.clone();
        let h = sim.spawn("parent", async move {
            let s2 = s.clone();
            let child = s.spawn("child", async move {
                s2.sleep(5).await;
                42
            });
            child.await + 1
        });
        sim.run().unwrap();
        assert_eq!(h.result(), Some(43));
    }

    #[test]
    fn time_limit_stops_and_resumes() {
        let sim = Sim::new(1);
        let s = sim.clone();
        let h = sim.spawn("t", async move {
            s.sleep(10 * MSEC).await;
            s.now()
        });
        assert_eq!(sim.run_until(4 * MSEC), Ok(RunOutcome::TimeLimit));
        assert_eq!(sim.now(), 4 * MSEC);
        assert!(!h.is_finished());
        assert_eq!(sim.run(), Ok(RunOutcome::Finished));
        assert_eq!(h.result(), Some(10 * MSEC));
    }

    #[test]
    fn run_while_condition() {
        let sim = Sim::new(1);
        let count = Rc::new(Cell::new(0));
        let (s, c) = (sim.clone(), count.clone());
        let h = sim.spawn("ticker", async move {
            loop {
                s.sleep(MSEC).await;
                c.set(c.get() + 1);
            }
        });
        let c = count.clone();
        assert_eq!(
            sim.run_while(Time::MAX, || c.get() < 7),
            Ok(RunOutcome::Condition)
        );
        assert_eq!(count.get(), 7);
        assert_eq!(sim.now(), 7 * MSEC);
        // The task holds the Sim: end it, or the pair is never freed.
        h.cancel(&sim);
    }

    #[test]
    fn cancel_drops_pending_timers() {
        let sim = Sim::new(1);
        let s = sim.clone();
        let fired = Rc::new(Cell::new(false));
        let f = fired.clone();
        let h = sim.spawn("victim", async move {
            s.sleep(10 * MSEC).await;
            f.set(true);
        });
        sim.run_until(MSEC).unwrap();
        assert_eq!(sim.pending_timers(), 1);
        h.cancel(&sim);
        assert_eq!(sim.pending_timers(), 0);
        assert_eq!(sim.run(), Ok(RunOutcome::Finished));
        assert!(!fired.get());
        assert_eq!(sim.live_tasks(), 0);
    }

    #[test]
    fn callbacks_and_cancel_timer() {
        let sim = Sim::new(1);
        let log = Rc::new(RefCell::new(Vec::new()));
        let l = log.clone();
        let s = sim.clone();
        sim.schedule_at(5, move || l.borrow_mut().push(s.now()));
        let l = log.clone();
        let t = sim.schedule_at(7, move || l.borrow_mut().push(999));
        assert!(sim.cancel_timer(t));
        assert!(!sim.cancel_timer(t));
        sim.run().unwrap();
        assert_eq!(*log.borrow(), vec![5]);
    }

    #[test]
    fn deadlock_is_reported_not_hung() {
        let sim = Sim::new(1);
        let s = sim.clone();
        sim.spawn("stuck", async move {
            s.set_waiting_on("mutex:demo");
            std::future::pending::<()>().await;
        });
        let s = sim.clone();
        sim.spawn_daemon("worker", async move {
            s.set_waiting_on("idle");
            std::future::pending::<()>().await;
        });
        let err = sim.run().unwrap_err();
        assert_eq!(err.blocked.len(), 1);
        assert_eq!(err.blocked[0].name, "stuck");
        assert_eq!(err.blocked[0].waiting_on, "mutex:demo");
        assert!(err.to_string().contains("waiting on mutex:demo"));
        // The tasks hold the Sim: end them, or they are never freed.
        let live: Vec<TaskId> = sim
            .0
            .tasks
            .borrow()
            .iter()
            .map(|(k, _)| TaskId(k))
            .collect();
        assert_eq!(live.len(), 2);
        for id in live {
            sim.cancel(id);
        }
        assert_eq!(sim.live_tasks(), 0);
    }

    #[test]
    fn daemons_alone_finish_cleanly() {
        let sim = Sim::new(1);
        sim.spawn_daemon("idle", std::future::pending::<()>());
        assert_eq!(sim.run(), Ok(RunOutcome::Finished));
    }

    #[test]
    fn yield_lets_others_run() {
        let sim = Sim::new(1);
        let log = Rc::new(RefCell::new(Vec::new()));
        for i in 0..2 {
            let l = log.clone();
            sim.spawn("y", async move {
                l.borrow_mut().push(i);
                yield_now().await;
                l.borrow_mut().push(i + 10);
            });
        }
        sim.run().unwrap();
        assert_eq!(*log.borrow(), vec![0, 1, 10, 11]);
    }

    #[test]
    fn trace_records_task_and_time() {
        let sim = Sim::new(1);
        sim.set_trace(TraceSink::Memory(Vec::new()));
        let s = sim.clone();
        sim.spawn("flush-8:0", async move {
            s.sleep(1500).await;
            s.trace("writeback_start", || "bdi 8:0 nr_pages=1024".into());
        });
        sim.run().unwrap();
        let t = sim.take_trace();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].time, 1500);
        assert_eq!(t[0].task, "flush-8:0");
        assert!(t[0].line().contains("writeback_start: bdi 8:0"));
    }

    /// Tasks with random sleeps from named substreams, same-instant ties,
    /// callbacks, spawns and cancellations: one seed gives the same trace twice,
    /// another seed another trace.
    fn traced_run(seed: u64) -> Vec<TraceEvent> {
        use rand::Rng;
        let sim = Sim::new(seed);
        sim.set_trace(TraceSink::Memory(Vec::new()));
        let mut victims = Vec::new();
        for i in 0..8 {
            let s = sim.clone();
            let mut rng = sim.rng(&format!("task{i}"));
            let h = sim.spawn(format!("t{i}"), async move {
                for round in 0..20 {
                    // Coarse delays so that many events tie on the same instant.
                    s.sleep(rng.random_range(1..5) * 10).await;
                    s.trace("tick", || format!("i={i} round={round}"));
                    if round % 7 == 0 {
                        let s2 = s.clone();
                        s.schedule_in(5, move || s2.trace("callback", || format!("from={i}")));
                        let s3 = s.clone();
                        s.spawn(format!("child{i}.{round}"), async move {
                            s3.sleep(15).await;
                            s3.trace("child", String::new);
                        })
                        .await;
                    }
                }
            });
            if i % 3 == 2 {
                victims.push(h);
            }
        }
        let s = sim.clone();
        sim.schedule_at(200, move || {
            for v in &victims {
                v.cancel(&s);
            }
        });
        assert_eq!(sim.run(), Ok(RunOutcome::Finished));
        sim.take_trace()
    }

    #[test]
    fn same_seed_gives_identical_trace() {
        let a = traced_run(5);
        assert!(a.len() > 100, "{} events", a.len());
        assert!(a.windows(2).all(|w| w[0].time <= w[1].time));
        assert_eq!(a, traced_run(5));
        assert_ne!(a, traced_run(6));
    }

    /// A future that counts its polls and is pending until `open` is set.
    fn gate(polls: Rc<Cell<u32>>, open: Rc<Cell<bool>>) -> impl Future<Output = ()> {
        std::future::poll_fn(move |_cx| {
            polls.set(polls.get() + 1);
            if open.get() {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
    }

    /// Tasks woken at one instant run in the order they were woken, whatever
    /// their spawn order or slot.
    #[test]
    fn same_instant_wakes_run_in_wake_order() {
        let sim = Sim::new(1);
        let log = Rc::new(RefCell::new(Vec::new()));
        let mut ids = Vec::new();
        for i in 0..4 {
            let (l, polled) = (log.clone(), Rc::new(Cell::new(false)));
            let h = sim.spawn(
                format!("t{i}"),
                std::future::poll_fn(move |_cx| {
                    if polled.replace(true) {
                        l.borrow_mut().push(i);
                        Poll::Ready(())
                    } else {
                        Poll::Pending
                    }
                }),
            );
            ids.push(h.id());
        }
        let s = sim.clone();
        let wakers: Vec<Waker> = ids.iter().map(|&id| sim.waker(id).unwrap()).collect();
        sim.schedule_at(10, move || {
            s.wake(ids[2]);
            wakers[0].wake_by_ref();
            s.wake(ids[3]);
            wakers[1].wake_by_ref();
            // Already queued: no effect on the order.
            wakers[2].wake_by_ref();
            s.wake(ids[0]);
        });
        assert_eq!(sim.run(), Ok(RunOutcome::Finished));
        assert_eq!(*log.borrow(), vec![2, 0, 3, 1]);
    }

    /// Woken several times (by id, by reference, by value) before it runs, a
    /// task is polled once.
    #[test]
    // Wakes a clone by value on purpose (the count moves into the queue).
    #[allow(clippy::waker_clone_wake)]
    fn task_woken_many_times_runs_once() {
        let sim = Sim::new(1);
        let (polls, open) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(false)));
        let h = sim.spawn_daemon("gate", gate(polls.clone(), open.clone()));
        let w = sim.waker(h.id()).unwrap();
        let s = sim.clone();
        let id = h.id();
        sim.schedule_at(5, move || {
            s.wake(id);
            w.wake_by_ref();
            w.clone().wake();
            w.wake();
            s.wake(id);
        });
        sim.run_until(0).unwrap();
        assert_eq!(polls.get(), 1);
        let before = sim.polls();
        sim.run_until(5).unwrap();
        assert_eq!(polls.get(), 2);
        assert_eq!(sim.polls(), before + 1);
        // Woken again later, it runs again.
        open.set(true);
        sim.wake(id);
        assert_eq!(sim.run(), Ok(RunOutcome::Finished));
        assert_eq!(polls.get(), 3);
        assert!(h.is_finished());
    }

    /// Wakers that outlive their task (kept by a timer, a queue or a model
    /// structure) wake nothing and free the task's cell when dropped.
    #[test]
    // Wakes a clone by value on purpose (the count moves into the queue).
    #[allow(clippy::waker_clone_wake)]
    fn waker_of_finished_task_is_harmless() {
        let sim = Sim::new(1);
        let kept = Rc::new(RefCell::new(Vec::new()));
        let k = kept.clone();
        let h = sim.spawn(
            "short",
            std::future::poll_fn(move |cx| {
                k.borrow_mut().push(cx.waker().clone());
                Poll::Ready(7)
            }),
        );
        let other = sim.spawn("other", async {});
        let late = sim.waker(h.id()).unwrap();
        // A timer holding a waker fires after the task ended.
        sim.wake_at(10, late.clone());
        assert_eq!(sim.run(), Ok(RunOutcome::Finished));
        assert_eq!(h.result(), Some(7));
        assert!(other.is_finished());
        let polls = sim.polls();
        let w = kept.borrow_mut().pop().unwrap();
        w.wake_by_ref();
        w.clone().wake();
        w.wake();
        late.wake_by_ref();
        sim.wake(h.id());
        assert!(sim.waker(h.id()).is_none());
        assert_eq!(sim.run(), Ok(RunOutcome::Finished));
        assert_eq!(sim.polls(), polls);
        drop(late);
        assert_eq!(sim.live_tasks(), 0);
    }

    /// A finished task's slot is reused by the next task with a new
    /// generation: the old task's id and wakers do not reach the new task.
    #[test]
    fn reused_slot_does_not_wake_the_new_task() {
        let sim = Sim::new(1);
        let first = sim.spawn("first", async {});
        sim.run().unwrap();
        let stale_waker = {
            // A waker taken while the first task was alive would be the same;
            // take one from a task that ends in the same slot.
            let (polls, open) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(true)));
            let h = sim.spawn("second", gate(polls, open));
            let w = sim.waker(h.id()).unwrap();
            sim.run().unwrap();
            assert!(h.is_finished());
            assert_eq!(h.id().index(), first.id().index());
            w
        };
        let (polls, open) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(false)));
        let third = sim.spawn_daemon("third", gate(polls.clone(), open));
        assert_eq!(third.id().index(), first.id().index());
        assert_ne!(third.id(), first.id());
        sim.run().unwrap();
        assert_eq!(polls.get(), 1);
        stale_waker.wake_by_ref();
        sim.wake(first.id());
        stale_waker.wake();
        assert_eq!(sim.run(), Ok(RunOutcome::Finished));
        assert_eq!(polls.get(), 1, "stale waker or id reached the new task");
        sim.wake(third.id());
        sim.run().unwrap();
        assert_eq!(polls.get(), 2);
    }

    /// A task cancelled after it was woken, before it ran, is not polled, and
    /// its future is dropped at once.
    #[test]
    fn cancelled_while_queued_is_not_polled() {
        struct Guard(Rc<Cell<bool>>);
        impl Drop for Guard {
            fn drop(&mut self) {
                self.0.set(true);
            }
        }
        let sim = Sim::new(1);
        let dropped = Rc::new(Cell::new(false));
        let (polls, open) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(false)));
        let (g, p, o) = (Guard(dropped.clone()), polls.clone(), open.clone());
        let h = sim.spawn_daemon("victim", async move {
            let _g = g;
            gate(p, o).await;
        });
        sim.run_until(0).unwrap();
        assert_eq!(polls.get(), 1);
        let w = sim.waker(h.id()).unwrap();
        w.wake_by_ref();
        h.cancel(&sim);
        assert!(dropped.get());
        assert_eq!(sim.run(), Ok(RunOutcome::Finished));
        assert_eq!(polls.get(), 1);
        w.wake();
        assert_eq!(sim.run(), Ok(RunOutcome::Finished));
        assert_eq!(polls.get(), 1);
    }

    /// Dropping a simulation drops the futures of its live tasks, even when a
    /// waker of one is kept (and woken) after.
    #[test]
    fn dropping_the_sim_drops_live_futures() {
        struct Guard(Rc<Cell<u32>>);
        impl Drop for Guard {
            fn drop(&mut self) {
                self.0.set(self.0.get() + 1);
            }
        }
        let dropped = Rc::new(Cell::new(0));
        let sim = Sim::new(1);
        let mut ids = Vec::new();
        for i in 0..3 {
            let g = Guard(dropped.clone());
            let h = sim.spawn_daemon(format!("d{i}"), async move {
                let _g = g;
                std::future::pending::<()>().await;
            });
            ids.push(h.id());
        }
        sim.run().unwrap();
        let kept = sim.waker(ids[1]).unwrap();
        // One of them is queued when the simulation goes.
        sim.wake(ids[2]);
        drop(sim);
        assert_eq!(dropped.get(), 3);
        kept.wake_by_ref();
        drop(kept);
        assert_eq!(dropped.get(), 3);
    }

    #[test]
    fn self_cancel_takes_effect_after_poll() {
        let sim = Sim::new(1);
        let s = sim.clone();
        let reached = Rc::new(Cell::new(false));
        let r = reached.clone();
        sim.spawn("selfcancel", async move {
            let me = s.current_task();
            s.cancel(me);
            s.sleep(5).await;
            r.set(true);
        });
        assert_eq!(sim.run(), Ok(RunOutcome::Finished));
        assert!(!reached.get());
    }
}
