//! Workqueues: deferred work run by pools of kernel worker threads.
//!
//! Models kernel/workqueue.c and include/linux/workqueue.h:
//! - `alloc_workqueue` / `alloc_ordered_workqueue` / `destroy_workqueue`;
//! - work items (`struct work_struct`) with the PENDING bit: `queue_work` returns
//!   false when the item is already pending; a running item may be queued again,
//!   and the same item never runs concurrently with itself (`process_one_work`'s
//!   collision check, `find_worker_executing_work` + `move_linked_works`: the
//!   colliding instance is handed to the worker already running the item, which
//!   runs it next);
//! - per-workqueue `max_active` (`pwq->nr_active`, `pwq->inactive_works`,
//!   `pwq_activate_first_inactive` on completion in `pwq_dec_nr_in_flight`), FIFO by
//!   queueing time;
//! - delayed work (`queue_delayed_work`, `mod_delayed_work`, `cancel_delayed_work`,
//!   `flush_delayed_work`: a timer that calls `__queue_work` when it fires; PENDING
//!   is set from the arming on), and RCU work (`queue_rcu_work`: `call_rcu` then
//!   `__queue_work`);
//! - `flush_work`, `flush_workqueue`, `drain_workqueue`, `cancel_work_sync`
//!   (`try_to_grab_pending`, with WORK_OFFQ_CANCELING blocking requeueing while it
//!   waits);
//! - worker threads (`worker_thread`, `create_worker`): daemon tasks on the
//!   scheduler, so a work function's `Sched::cpu` calls consume CPU on the worker,
//!   competing with every other task. Workers are created on demand when work is
//!   activated and no idle worker exists (`need_to_create_worker`), up to
//!   `max_active`; idle workers stay (LIFO idle list, as `worker_enter_idle`).
//! - tracepoints `workqueue_queue_work`, `workqueue_activate_work`,
//!   `workqueue_execute_start`, `workqueue_execute_end`.
//!
//! `flush_workqueue` waits for every item queued before the call (the kernel's
//! flush colors); here each queued item gets a per-workqueue sequence number and
//! the flush waits until no item with a smaller number is still in flight, which is
//! the same guarantee without the color wrap-around.
//!
//! Bound (per-CPU) workqueues, the default without WQ_UNBOUND: an item runs
//! on the CPU that queued it (`__queue_work` with `WORK_CPU_UNBOUND` picks
//! the local CPU's pool), by a worker bound to that CPU (`kthread_bind`), so
//! it competes with whatever runs there; the queueing CPU is the current
//! task's, or the interrupt's for a device completion
//! ([`Sched::this_cpu`]). An item queued where no CPU is known (a timer
//! callback) is served by a worker free to run anywhere.
//!
//! Simplified or left out: each workqueue has its own worker pools (the kernel
//! shares unbound pools between workqueues with equal attributes and shares a
//! CPU's pools between all bound workqueues); no concurrency management (a
//! bound pool may run several workers at once, sharing its CPU, where the
//! kernel wakes another only when the running one sleeps); `max_active`
//! counts the whole workqueue, not each CPU's pool. Worker creation costs no time
//! ([`WORKER_CREATE_NS`]); idle workers are never reaped (`IDLE_WORKER_TIMEOUT`,
//! 300 s, not modelled); no rescuer (WQ_MEM_RECLAIM is accepted and ignored), no
//! freezing (WQ_FREEZABLE ignored), no cpumask or NUMA attributes of unbound workqueues, no
//! watchdog. A workqueue being destroyed silently drops new work.

use std::cell::RefCell;
use std::collections::{BTreeSet, VecDeque};
use std::fmt;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::task::{Poll, Waker};

use hdrhistogram::Histogram;
use sim::{Sim, TaskId, Time, TimerId};

use super::rcu::Rcu;
use super::sched::{CgroupId, Sched};

/// `WQ_MAX_ACTIVE` (include/linux/workqueue.h): upper bound of `max_active`, 512.
pub const WQ_MAX_ACTIVE: usize = 512;
/// `WQ_DFL_ACTIVE` (include/linux/workqueue.h): `max_active` used when 0 is
/// passed, `WQ_MAX_ACTIVE / 2` = 256.
pub const WQ_DFL_ACTIVE: usize = WQ_MAX_ACTIVE / 2;
/// `HIGHPRI_NICE_LEVEL` (kernel/workqueue.c): nice of WQ_HIGHPRI workers, -20
/// (`MIN_NICE`). Normal workers run at nice 0.
pub const HIGHPRI_NICE_LEVEL: i32 = -20;
/// CPU time to create a worker, ns: 0 (assumption; `create_worker` forks a
/// kthread, tens of microseconds, which this model neglects).
pub const WORKER_CREATE_NS: Time = 0;

/// `WQ_*` flags of `alloc_workqueue`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WqFlags {
    /// WQ_UNBOUND: served by an unbound pool (worker names `kworker/uN:M`).
    pub unbound: bool,
    /// __WQ_ORDERED: one item at a time, strictly in queueing order
    /// (forces `max_active` 1).
    pub ordered: bool,
    /// WQ_HIGHPRI: workers run at nice [`HIGHPRI_NICE_LEVEL`].
    pub highpri: bool,
    /// WQ_MEM_RECLAIM: accepted; the rescuer thread is not modelled.
    pub mem_reclaim: bool,
    /// WQ_FREEZABLE: accepted; freezing is not modelled.
    pub freezable: bool,
}

type BoxFut = Pin<Box<dyn Future<Output = ()>>>;

/// Where a pending instance of a work item is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PendingAt {
    /// A delayed work's timer is armed.
    Timer(Option<TimerId>),
    /// Waiting for an RCU grace period (`queue_rcu_work`).
    Rcu,
    /// On a workqueue (inactive list, worklist, or linked to its running worker).
    Queued,
}

struct WorkState {
    /// The pending instance (PENDING bit set): its number and where it is.
    pending: Option<(u64, PendingAt)>,
    /// Workqueue of the pending instance.
    wq: Option<Weak<WqInner>>,
    /// Instance that collided with the running one, run next by the same worker.
    linked: Option<Item>,
    /// Instance running now.
    running: Option<u64>,
    /// Number the next queued instance gets.
    next_inst: u64,
    /// Completed runs.
    runs: u64,
    /// `cancel_work_sync` in progress (WORK_OFFQ_CANCELING): queueing fails.
    canceling: u32,
    /// Tasks in `flush_work` / `cancel_work_sync`.
    waiters: Vec<Waker>,
}

struct WorkInner {
    name: Rc<str>,
    func: Box<dyn Fn() -> BoxFut>,
    state: RefCell<WorkState>,
}

/// A work item (`struct work_struct`): an async function run by a worker each
/// time the item is queued. Cheap to clone (clones are the same item).
#[derive(Clone)]
pub struct Work(Rc<WorkInner>);

impl Work {
    /// A work item whose function is `f`: called for each run, its future is
    /// awaited on the worker task (`INIT_WORK`).
    pub fn new<F, Fut>(name: &str, f: F) -> Work
    where
        F: Fn() -> Fut + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        Work(Rc::new(WorkInner {
            name: name.into(),
            func: Box::new(move || Box::pin(f()) as BoxFut),
            state: RefCell::new(WorkState {
                pending: None,
                wq: None,
                linked: None,
                running: None,
                next_inst: 0,
                runs: 0,
                canceling: 0,
                waiters: Vec::new(),
            }),
        }))
    }

    /// The item's name (its function, in traces).
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// Completed runs so far.
    pub fn runs(&self) -> u64 {
        self.0.state.borrow().runs
    }

    /// Whether the function is executing now.
    pub fn is_running(&self) -> bool {
        self.0.state.borrow().running.is_some()
    }

    fn wake_waiters(&self) {
        let ws: Vec<Waker> = std::mem::take(&mut self.0.state.borrow_mut().waiters);
        for w in ws {
            w.wake();
        }
    }
}

impl fmt::Debug for Work {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ws = self.0.state.borrow();
        f.debug_struct("Work")
            .field("name", &self.0.name)
            .field("pending", &ws.pending.is_some())
            .field("running", &ws.running.is_some())
            .field("runs", &ws.runs)
            .finish()
    }
}

/// `work_pending()`: the PENDING bit (queued, or a timer or RCU callback armed).
pub fn work_pending(work: &Work) -> bool {
    work.0.state.borrow().pending.is_some()
}

/// A queued instance of a work item.
struct Item {
    work: Work,
    wq: Workqueue,
    /// Queueing order on the workqueue (for FIFO and flushes).
    seq: u64,
    /// Instance number on the work item.
    inst: u64,
    queued_at: Time,
    /// The pool that serves it: the queueing CPU for a bound workqueue,
    /// None for an unbound one (or where no CPU was known).
    cpu: Option<usize>,
}

/// Statistics of one workqueue.
#[derive(Clone, Debug)]
pub struct WqStats {
    /// Instances queued on the workqueue (`__queue_work` calls).
    pub queued: u64,
    /// Instances executed to completion.
    pub executed: u64,
    /// Most work functions seen executing at once.
    pub max_concurrency: usize,
    /// Workers created.
    pub nr_workers: usize,
    /// Queue latency (queued, or timer/RCU fired, to execution start), ns.
    pub queue_latency_ns: Histogram<u64>,
    /// Execution time of the work function (wall time on the worker), ns.
    pub exec_time_ns: Histogram<u64>,
}

struct WorkerSlot {
    task: Option<TaskId>,
    waker: Option<Waker>,
    /// The CPU its pool serves (and it is bound to); None: unbound.
    cpu: Option<usize>,
}

struct WqState {
    /// Over `max_active`, waiting for a slot (`pwq->inactive_works`).
    inactive: VecDeque<Item>,
    /// Active, waiting for a worker (`pool->worklist`).
    worklist: VecDeque<Item>,
    /// Active instances (worklist, linked, running).
    nr_active: usize,
    next_seq: u64,
    /// Sequence numbers queued and not yet finished or cancelled.
    in_flight: BTreeSet<u64>,
    flush_waiters: Vec<Waker>,
    workers: Vec<WorkerSlot>,
    /// Idle worker ids, most recently idle last (woken first).
    idle: Vec<usize>,
    /// Work functions executing now.
    nr_running: usize,
    destroyed: bool,
    stats: WqStats,
}

struct WqInner {
    sim: Sim,
    sched: Sched,
    name: Rc<str>,
    flags: WqFlags,
    max_active: usize,
    /// Worker pool id in worker names: unbound pools are numbered after the
    /// 2 per-CPU pools (normal, highpri) of every CPU, hence `kworker/u{2N}:M`.
    pool_id: usize,
    nice: i32,
    st: RefCell<WqState>,
}

/// A workqueue (`struct workqueue_struct`) with its worker pool. Cheap to clone.
#[derive(Clone)]
pub struct Workqueue(Rc<WqInner>);

impl fmt::Debug for Workqueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.0.st.borrow();
        f.debug_struct("Workqueue")
            .field("name", &self.0.name)
            .field("max_active", &self.0.max_active)
            .field("nr_active", &st.nr_active)
            .field("in_flight", &st.in_flight.len())
            .field("workers", &st.workers.len())
            .finish()
    }
}

fn new_hist() -> Histogram<u64> {
    // 3 significant digits, auto-resizing: cannot fail.
    Histogram::new(3).expect("hdrhistogram: 3 significant digits is valid")
}

/// Records `v` (the histogram grows as needed).
fn record(h: &mut Histogram<u64>, v: u64) {
    if h.record(v).is_err() {
        h.saturating_record(v);
    }
}

/// `alloc_workqueue(name, flags, max_active)`. `max_active` 0 means
/// [`WQ_DFL_ACTIVE`]; values above [`WQ_MAX_ACTIVE`] are clamped, as the kernel
/// does (`wq_clamp_max_active`); `flags.ordered` forces 1.
pub fn alloc_workqueue(sched: &Sched, name: &str, flags: WqFlags, max_active: usize) -> Workqueue {
    let max_active = if flags.ordered {
        1
    } else if max_active == 0 {
        WQ_DFL_ACTIVE
    } else {
        max_active.min(WQ_MAX_ACTIVE)
    };
    let pool_id = 2 * sched.nr_cpus() + usize::from(flags.highpri);
    Workqueue(Rc::new(WqInner {
        sim: sched.sim().clone(),
        sched: sched.clone(),
        name: name.into(),
        flags,
        max_active,
        pool_id,
        nice: if flags.highpri { HIGHPRI_NICE_LEVEL } else { 0 },
        st: RefCell::new(WqState {
            inactive: VecDeque::new(),
            worklist: VecDeque::new(),
            nr_active: 0,
            next_seq: 0,
            in_flight: BTreeSet::new(),
            flush_waiters: Vec::new(),
            workers: Vec::new(),
            idle: Vec::new(),
            nr_running: 0,
            destroyed: false,
            stats: WqStats {
                queued: 0,
                executed: 0,
                max_concurrency: 0,
                nr_workers: 0,
                queue_latency_ns: new_hist(),
                exec_time_ns: new_hist(),
            },
        }),
    }))
}

/// `alloc_ordered_workqueue(name, 0)`: unbound, `max_active` 1, strictly FIFO.
pub fn alloc_ordered_workqueue(sched: &Sched, name: &str) -> Workqueue {
    alloc_workqueue(
        sched,
        name,
        WqFlags {
            unbound: true,
            ordered: true,
            ..WqFlags::default()
        },
        1,
    )
}

impl Workqueue {
    /// The workqueue's name.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// Flags given at allocation.
    pub fn flags(&self) -> WqFlags {
        self.0.flags
    }

    /// Effective `max_active`.
    pub fn max_active(&self) -> usize {
        self.0.max_active
    }

    /// A snapshot of the statistics.
    pub fn stats(&self) -> WqStats {
        self.0.st.borrow().stats.clone()
    }

    /// The worker tasks created so far, in creation order.
    pub fn worker_tasks(&self) -> Vec<TaskId> {
        self.0
            .st
            .borrow()
            .workers
            .iter()
            .filter_map(|w| w.task)
            .collect()
    }

    /// Instances queued and not finished (inactive, waiting or running).
    pub fn nr_in_flight(&self) -> usize {
        self.0.st.borrow().in_flight.len()
    }

    /// Work functions executing now.
    pub fn nr_running(&self) -> usize {
        self.0.st.borrow().nr_running
    }

    /// `__queue_work`: puts instance `inst` of `work` (already marked pending,
    /// `PendingAt::Queued`) on this workqueue.
    fn enqueue(&self, work: &Work, inst: u64) {
        let sim = &self.0.sim;
        if self.0.st.borrow().destroyed {
            // The kernel warns and drops the work on a dying workqueue.
            sim.trace("workqueue_queue_work", || {
                format!(
                    "work={} workqueue={} dropped=destroyed",
                    work.0.name, self.0.name
                )
            });
            work.0.state.borrow_mut().pending = None;
            work.wake_waiters();
            return;
        }
        let item = {
            let mut st = self.0.st.borrow_mut();
            let seq = st.next_seq;
            st.next_seq += 1;
            st.in_flight.insert(seq);
            st.stats.queued += 1;
            Item {
                work: work.clone(),
                wq: self.clone(),
                seq,
                inst,
                queued_at: sim.now(),
                cpu: if self.0.flags.unbound {
                    None
                } else {
                    self.0.sched.this_cpu()
                },
            }
        };
        sim.trace("workqueue_queue_work", || {
            format!(
                "work={} function={} workqueue={}",
                work.0.name, work.0.name, self.0.name
            )
        });
        let active = self.0.st.borrow().nr_active < self.0.max_active;
        if active {
            self.activate(item);
        } else {
            self.0.st.borrow_mut().inactive.push_back(item);
        }
    }

    /// Counts `item` active and puts it on the worklist (`__pwq_activate_work`),
    /// then makes sure a worker will pick it up.
    fn activate(&self, item: Item) {
        self.0.sim.trace("workqueue_activate_work", || {
            format!("work={} workqueue={}", item.work.0.name, self.0.name)
        });
        let cpu = item.cpu;
        {
            let mut st = self.0.st.borrow_mut();
            st.nr_active += 1;
            st.worklist.push_back(item);
        }
        self.kick_worker(cpu);
    }

    /// `kick_pool` / `create_worker`: wake the most recently idle worker of
    /// the pool serving `cpu`, or create one there if none is idle and the
    /// pool has fewer than `max_active`.
    fn kick_worker(&self, cpu: Option<usize>) {
        let mut st = self.0.st.borrow_mut();
        if let Some(pos) = st.idle.iter().rposition(|&w| st.workers[w].cpu == cpu) {
            let id = st.idle.remove(pos);
            let w = st.workers[id].waker.take();
            drop(st);
            if let Some(w) = w {
                w.wake();
            }
            return;
        }
        if st.workers.iter().filter(|w| w.cpu == cpu).count() >= self.0.max_active {
            return; // a busy worker will take it when done
        }
        let id = st.workers.len();
        st.workers.push(WorkerSlot {
            task: None,
            waker: None,
            cpu,
        });
        st.stats.nr_workers = st.workers.len();
        drop(st);
        let name = match cpu {
            Some(c) => format!("kworker/{c}:{id}-{}", self.0.name),
            None => format!("kworker/u{}:{}-{}", self.0.pool_id, id, self.0.name),
        };
        let wq = self.clone();
        let h = self
            .0
            .sched
            .spawn_daemon(&name, CgroupId::ROOT, self.0.nice, async move {
                worker_thread(wq, id).await
            });
        if let Some(c) = cpu {
            self.0.sched.bind_to_cpu(h.id(), c);
        }
        self.0.st.borrow_mut().workers[id].task = Some(h.id());
    }

    /// An active instance finished or was removed (`pwq_dec_nr_in_flight`):
    /// frees its slot, activates the first inactive item, wakes flushers.
    fn dec_nr_in_flight(&self, seq: u64, was_active: bool) {
        let next = {
            let mut st = self.0.st.borrow_mut();
            st.in_flight.remove(&seq);
            if was_active {
                st.nr_active -= 1;
                if st.nr_active < self.0.max_active {
                    st.inactive.pop_front()
                } else {
                    None
                }
            } else {
                None
            }
        };
        if let Some(item) = next {
            self.activate(item);
        }
        let ws: Vec<Waker> = std::mem::take(&mut self.0.st.borrow_mut().flush_waiters);
        for w in ws {
            w.wake();
        }
    }

    /// Removes instance `inst` of `work` from the inactive list or worklist.
    /// Returns whether it was found.
    fn remove_queued(&self, work: &Work, inst: u64) -> bool {
        let found = {
            let mut st = self.0.st.borrow_mut();
            let hit = |it: &Item| Rc::ptr_eq(&it.work.0, &work.0) && it.inst == inst;
            if let Some(pos) = st.worklist.iter().position(hit) {
                st.worklist.remove(pos).map(|it| (it.seq, true))
            } else if let Some(pos) = st.inactive.iter().position(hit) {
                st.inactive.remove(pos).map(|it| (it.seq, false))
            } else {
                None
            }
        };
        match found {
            Some((seq, active)) => {
                self.dec_nr_in_flight(seq, active);
                true
            }
            None => false,
        }
    }
}

/// `worker_thread`: take the first item of the worklist and process it; sleep
/// on the idle list when there is none.
async fn worker_thread(wq: Workqueue, id: usize) {
    loop {
        // Sleep on the idle list until there is work.
        let mut slept = false;
        poll_fn(|cx| {
            let mut st = wq.0.st.borrow_mut();
            let mine = st.workers[id].cpu;
            if st.worklist.iter().any(|it| it.cpu == mine) {
                st.idle.retain(|&w| w != id);
                st.workers[id].waker = None;
                return Poll::Ready(());
            }
            st.workers[id].waker = Some(cx.waker().clone());
            if !st.idle.contains(&id) {
                st.idle.push(id);
            }
            drop(st);
            wq.0.sim
                .set_waiting_on(format!("worker_thread idle (workqueue {})", wq.0.name));
            slept = true;
            Poll::Pending
        })
        .await;
        // Woken from idle: its CPU takes the wakeup latency to run it; the
        // first item is taken only then.
        if slept {
            wq.0.sched.idle_wakeup().await;
        }
        let item = {
            let mut st = wq.0.st.borrow_mut();
            let mine = st.workers[id].cpu;
            let pos = st.worklist.iter().position(|it| it.cpu == mine);
            pos.and_then(|p| st.worklist.remove(p))
        };
        if let Some(item) = item {
            process_one_work(item).await;
        }
    }
}

/// `process_one_work`: runs the item unless the same work item is already
/// running, in which case it is linked to run right after (collision).
async fn process_one_work(mut item: Item) {
    loop {
        let work = item.work.clone();
        let wq = item.wq.clone();
        {
            let mut ws = work.0.state.borrow_mut();
            if ws.running.is_some() {
                debug_assert!(ws.linked.is_none());
                ws.linked = Some(item);
                return;
            }
            debug_assert_eq!(ws.pending.map(|p| p.0), Some(item.inst));
            ws.pending = None;
            ws.wq = None;
            ws.running = Some(item.inst);
        }
        let sim = wq.0.sim.clone();
        let start = sim.now();
        {
            let mut st = wq.0.st.borrow_mut();
            st.nr_running += 1;
            st.stats.max_concurrency = st.stats.max_concurrency.max(st.nr_running);
            record(&mut st.stats.queue_latency_ns, start - item.queued_at);
        }
        sim.trace("workqueue_execute_start", || {
            format!(
                "work={} function={} workqueue={}",
                work.0.name, work.0.name, wq.0.name
            )
        });
        (work.0.func)().await;
        sim.trace("workqueue_execute_end", || {
            format!(
                "work={} function={} workqueue={}",
                work.0.name, work.0.name, wq.0.name
            )
        });
        {
            let mut st = wq.0.st.borrow_mut();
            st.nr_running -= 1;
            st.stats.executed += 1;
            record(&mut st.stats.exec_time_ns, sim.now() - start);
        }
        let linked = {
            let mut ws = work.0.state.borrow_mut();
            ws.running = None;
            ws.runs += 1;
            ws.linked.take()
        };
        work.wake_waiters();
        wq.dec_nr_in_flight(item.seq, true);
        match linked {
            Some(next) => item = next,
            None => return,
        }
    }
}

/// Marks `work` pending (instance number returned) unless it already is or a
/// cancel is in progress.
fn mark_pending(work: &Work, wq: &Workqueue, at: PendingAt) -> Option<u64> {
    let mut ws = work.0.state.borrow_mut();
    if ws.pending.is_some() || ws.canceling > 0 {
        return None;
    }
    let inst = ws.next_inst;
    ws.next_inst += 1;
    ws.pending = Some((inst, at));
    ws.wq = Some(Rc::downgrade(&wq.0));
    Some(inst)
}

/// `queue_work`: queues `work` on `wq`. False if it was already pending (it is
/// then not queued again).
pub fn queue_work(wq: &Workqueue, work: &Work) -> bool {
    match mark_pending(work, wq, PendingAt::Queued) {
        Some(inst) => {
            wq.enqueue(work, inst);
            true
        }
        None => false,
    }
}

/// `try_to_grab_pending`: takes the pending instance away (timer cancelled, RCU
/// callback disarmed, or removed from its workqueue). Returns whether one was
/// pending.
fn grab_pending(work: &Work) -> bool {
    let (inst, at, wq) = {
        let mut ws = work.0.state.borrow_mut();
        let Some((inst, at)) = ws.pending.take() else {
            return false;
        };
        let wq = ws.wq.take().and_then(|w| w.upgrade()).map(Workqueue);
        (inst, at, wq)
    };
    match at {
        PendingAt::Timer(t) => {
            if let (Some(t), Some(wq)) = (t, &wq) {
                wq.0.sim.cancel_timer(t);
            }
        }
        PendingAt::Rcu => {} // the callback sees the instance gone and does nothing
        PendingAt::Queued => {
            let linked = {
                let mut ws = work.0.state.borrow_mut();
                if ws.linked.as_ref().is_some_and(|it| it.inst == inst) {
                    ws.linked.take()
                } else {
                    None
                }
            };
            if let Some(it) = linked {
                it.wq.dec_nr_in_flight(it.seq, true);
            } else if let Some(wq) = &wq {
                wq.remove_queued(work, inst);
            }
        }
    }
    work.wake_waiters();
    true
}

/// Waits until `done()` holds, re-checking each time `work`'s state changes.
async fn wait_work(work: &Work, what: &str, done: impl Fn(&WorkState) -> bool) {
    poll_fn(|cx| {
        let mut ws = work.0.state.borrow_mut();
        if done(&ws) {
            return Poll::Ready(());
        }
        ws.waiters.push(cx.waker().clone());
        drop(ws);
        if let Some(sim) = work_sim(work) {
            sim.set_waiting_on(format!("{what} ({})", work.0.name));
        }
        Poll::Pending
    })
    .await
}

/// The simulation, via the workqueue the item is on, if known.
fn work_sim(work: &Work) -> Option<Sim> {
    let ws = work.0.state.borrow();
    if let Some(wq) = ws.wq.as_ref().and_then(|w| w.upgrade()) {
        return Some(wq.sim.clone());
    }
    ws.linked.as_ref().map(|it| it.wq.0.sim.clone())
}

/// `flush_work`: waits until the instance pending on a workqueue or running at
/// the call has finished. Returns false at once if the item was idle (an armed
/// delayed-work timer or RCU callback does not count, as in the kernel).
pub async fn flush_work(work: &Work) -> bool {
    let target = {
        let ws = work.0.state.borrow();
        let queued = match ws.pending {
            Some((inst, PendingAt::Queued)) => Some(inst),
            _ => None,
        };
        queued.or(ws.running)
    };
    let Some(target) = target else {
        return false;
    };
    wait_work(work, "flush_work", |ws| {
        let run = ws.running.is_some_and(|r| r <= target);
        let pend = matches!(ws.pending, Some((p, PendingAt::Queued)) if p <= target);
        !run && !pend
    })
    .await;
    true
}

/// `cancel_work_sync`: removes the pending instance, if any, and waits for a
/// running one to finish; the item cannot be queued meanwhile. Returns whether
/// an instance was pending.
pub async fn cancel_work_sync(work: &Work) -> bool {
    work.0.state.borrow_mut().canceling += 1;
    let was_pending = grab_pending(work);
    let running = work.0.state.borrow().running;
    if let Some(target) = running {
        wait_work(work, "cancel_work_sync", |ws| {
            ws.running.is_none_or(|r| r > target)
        })
        .await;
    }
    work.0.state.borrow_mut().canceling -= 1;
    was_pending
}

/// `flush_workqueue`: waits for every item queued on `wq` before the call (not
/// for items queued after it).
pub async fn flush_workqueue(wq: &Workqueue) {
    let target = wq.0.st.borrow().next_seq;
    poll_fn(|cx| {
        let mut st = wq.0.st.borrow_mut();
        if st.in_flight.first().is_none_or(|&s| s >= target) {
            return Poll::Ready(());
        }
        st.flush_waiters.push(cx.waker().clone());
        drop(st);
        wq.0.sim
            .set_waiting_on(format!("flush_workqueue ({})", wq.0.name));
        Poll::Pending
    })
    .await
}

/// `drain_workqueue`: flushes until nothing is queued any more (including work
/// queued by the work itself while draining). Armed delayed-work timers are not
/// waited for.
pub async fn drain_workqueue(wq: &Workqueue) {
    while wq.nr_in_flight() > 0 {
        flush_workqueue(wq).await;
    }
}

/// `destroy_workqueue`: drains, then ends the workers. Work queued afterwards
/// is dropped.
pub async fn destroy_workqueue(wq: &Workqueue) {
    drain_workqueue(wq).await;
    let tasks = {
        let mut st = wq.0.st.borrow_mut();
        st.destroyed = true;
        st.idle.clear();
        st.workers
            .iter_mut()
            .filter_map(|w| {
                w.waker = None;
                w.task.take()
            })
            .collect::<Vec<_>>()
    };
    for t in tasks {
        wq.0.sim.cancel(t);
    }
}

// ------------------------------------------------------------ delayed work

/// A delayed work item (`struct delayed_work`): a work item plus a timer.
#[derive(Clone, Debug)]
pub struct DelayedWork {
    work: Work,
}

impl DelayedWork {
    /// `INIT_DELAYED_WORK`.
    pub fn new<F, Fut>(name: &str, f: F) -> DelayedWork
    where
        F: Fn() -> Fut + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        DelayedWork {
            work: Work::new(name, f),
        }
    }

    /// The embedded work item (`dwork->work`).
    pub fn work(&self) -> &Work {
        &self.work
    }

    /// Whether the timer is armed now.
    pub fn timer_pending(&self) -> bool {
        matches!(
            self.work.0.state.borrow().pending,
            Some((_, PendingAt::Timer(_)))
        )
    }
}

/// `__queue_delayed_work`: arms the timer for an instance already marked pending,
/// or queues at once if `delay_ns` is 0.
fn arm_delayed(wq: &Workqueue, work: &Work, inst: u64, delay_ns: Time) {
    if delay_ns == 0 {
        work.0.state.borrow_mut().pending = Some((inst, PendingAt::Queued));
        wq.enqueue(work, inst);
        return;
    }
    let (w, q) = (work.clone(), wq.clone());
    let timer = wq.0.sim.schedule_in(delay_ns, move || {
        // delayed_work_timer_fn
        let mine = {
            let mut ws = w.0.state.borrow_mut();
            match ws.pending {
                Some((i, PendingAt::Timer(_))) if i == inst => {
                    ws.pending = Some((inst, PendingAt::Queued));
                    true
                }
                _ => false,
            }
        };
        if mine {
            q.enqueue(&w, inst);
        }
    });
    work.0.state.borrow_mut().pending = Some((inst, PendingAt::Timer(Some(timer))));
}

/// `queue_delayed_work`: queues `dwork` on `wq` after `delay_ns`. False if it
/// was already pending (timer armed or queued).
pub fn queue_delayed_work(wq: &Workqueue, dwork: &DelayedWork, delay_ns: Time) -> bool {
    match mark_pending(&dwork.work, wq, PendingAt::Timer(None)) {
        Some(inst) => {
            arm_delayed(wq, &dwork.work, inst, delay_ns);
            true
        }
        None => false,
    }
}

/// `mod_delayed_work`: takes the pending instance away if any and queues anew
/// after `delay_ns` (at once if 0). Returns whether it was pending. Does nothing
/// (false) while a `cancel_work_sync` on it is in progress.
pub fn mod_delayed_work(wq: &Workqueue, dwork: &DelayedWork, delay_ns: Time) -> bool {
    if dwork.work.0.state.borrow().canceling > 0 {
        return false;
    }
    let was = grab_pending(&dwork.work);
    if let Some(inst) = mark_pending(&dwork.work, wq, PendingAt::Timer(None)) {
        arm_delayed(wq, &dwork.work, inst, delay_ns);
    }
    was
}

/// `cancel_delayed_work`: takes the pending instance away (timer or queued)
/// without waiting for a running one. Returns whether it was pending.
pub fn cancel_delayed_work(dwork: &DelayedWork) -> bool {
    grab_pending(&dwork.work)
}

/// `cancel_delayed_work_sync`.
pub async fn cancel_delayed_work_sync(dwork: &DelayedWork) -> bool {
    cancel_work_sync(&dwork.work).await
}

/// `flush_delayed_work`: if the timer is armed, queues the work now; then
/// waits for it like [`flush_work`].
pub async fn flush_delayed_work(dwork: &DelayedWork) -> bool {
    let fire = {
        let mut ws = dwork.work.0.state.borrow_mut();
        match ws.pending {
            Some((inst, PendingAt::Timer(t))) => {
                let wq = ws.wq.as_ref().and_then(|w| w.upgrade()).map(Workqueue);
                match wq {
                    Some(wq) => {
                        ws.pending = Some((inst, PendingAt::Queued));
                        Some((inst, t, wq))
                    }
                    None => None,
                }
            }
            _ => None,
        }
    };
    if let Some((inst, t, wq)) = fire {
        if let Some(t) = t {
            wq.0.sim.cancel_timer(t);
        }
        wq.enqueue(&dwork.work, inst);
    }
    flush_work(&dwork.work).await
}

// ---------------------------------------------------------------- RCU work

/// A work item queued after an RCU grace period (`struct rcu_work`).
#[derive(Clone, Debug)]
pub struct RcuWork {
    work: Work,
}

impl RcuWork {
    /// `INIT_RCU_WORK`.
    pub fn new<F, Fut>(name: &str, f: F) -> RcuWork
    where
        F: Fn() -> Fut + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        RcuWork {
            work: Work::new(name, f),
        }
    }

    /// The embedded work item (`rwork->work`).
    pub fn work(&self) -> &Work {
        &self.work
    }
}

/// `queue_rcu_work`: queues `rwork` on `wq` once an RCU grace period has
/// elapsed (`call_rcu` with `rcu_work_rcufn`). False if it was already pending.
pub fn queue_rcu_work(rcu: &Rcu, wq: &Workqueue, rwork: &RcuWork) -> bool {
    let Some(inst) = mark_pending(&rwork.work, wq, PendingAt::Rcu) else {
        return false;
    };
    let (w, q) = (rwork.work.clone(), wq.clone());
    rcu.call_rcu_hurry(move || {
        // rcu_work_rcufn
        let mine = {
            let mut ws = w.0.state.borrow_mut();
            match ws.pending {
                Some((i, PendingAt::Rcu)) if i == inst => {
                    ws.pending = Some((inst, PendingAt::Queued));
                    true
                }
                _ => false,
            }
        };
        if mine {
            q.enqueue(&w, inst);
        }
    });
    true
}
