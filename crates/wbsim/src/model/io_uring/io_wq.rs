//! io-wq: the worker pool io_uring punts blocking requests to
//! (`io_uring/io-wq.c`).
//!
//! Mirrors: work queued with `io_wq_enqueue`; hashed work
//! (`io_wq_hash_work`: buffered writes to a regular file are hashed by inode,
//! `hash_ptr(inode, IO_WQ_HASH_ORDER)`) runs one hash at a time: a worker
//! that takes a hashed item owns the hash (`wq->hash->map` bit) and runs that
//! hash's items in queue order; a worker looking for work skips items whose
//! hash is busy (`io_get_next_work` stalls them). Unhashed items run on any
//! free worker. A worker is created when work is queued and no worker is
//! free, up to the account's `max_workers` (`io_wq_create_worker`). Bound
//! work (regular files) is limited to `min(sq_entries, 4 * nr_cpus)` workers
//! (`io_uring/tctx.c` `io_init_wq_offload`), unbound to RLIMIT_NPROC; the ring
//! can lower both with `IORING_REGISTER_IOWQ_MAX_WORKERS`.
//!
//! Left out: the unbound account (this model only punts regular-file
//! writes, which are bound), worker idle exit after `WORKER_IDLE_TIMEOUT`
//! (5 s; workers here idle until the run ends), the cost of creating a
//! worker (`create_io_thread`), cancellation, linked requests, and CPU
//! affinity. The hash key is the inode number (the kernel hashes the inode's
//! address), through the kernel's `hash_64`.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use crate::model::kernel::sched::{CgroupId, Sched};
use crate::model::kernel::wait::WaitQueue;
use crate::model::mm::page_writeback::TaskDirty;

/// `IO_WQ_HASH_ORDER` on 64-bit (`io_uring/io-wq.h`): 64 hash buckets.
pub const IO_WQ_HASH_ORDER: u32 = 6;

/// `GOLDEN_RATIO_64` (`include/linux/hash.h`).
const GOLDEN_RATIO_64: u64 = 0x61C8_8646_80B5_83EB;

/// `hash_64(val, bits)` (`include/linux/hash.h`).
pub fn hash_64(val: u64, bits: u32) -> u64 {
    val.wrapping_mul(GOLDEN_RATIO_64) >> (64 - bits)
}

/// The io-wq hash of an inode (`io_wq_hash_work`).
pub fn io_wq_hash_inode(ino: u64) -> u64 {
    hash_64(ino, IO_WQ_HASH_ORDER)
}

/// The future a work item runs: it gets the worker's dirty-throttling state
/// (the io-wq thread's own `task_struct` fields).
pub type WorkFn = Box<dyn FnOnce(Rc<RefCell<TaskDirty>>) -> Pin<Box<dyn Future<Output = ()>>>>;

/// One queued item (`struct io_wq_work`).
struct Work {
    /// Hash bucket, `None` for unhashed work.
    hash: Option<u64>,
    /// What the worker runs (`io_wq_submit_work`).
    run: WorkFn,
}

/// The queue and the workers' bookkeeping (`struct io_wq_acct`).
#[derive(Default)]
struct WqState {
    /// Pending work in queue order (`acct->work_list`).
    work_list: VecDeque<Work>,
    /// Hashes a worker is running now (`wq->hash->map`).
    hash_busy: BTreeSet<u64>,
    /// Workers created so far (`acct->nr_workers`).
    nr_workers: u32,
    /// Workers waiting for work (`wq->free_list`).
    nr_free: u32,
    /// Items each worker ran, by worker index (statistics).
    ran: BTreeMap<u32, u64>,
}

struct Inner {
    /// Scheduler the workers run on.
    sched: Sched,
    /// Cgroup of the ring's task (io-wq threads are its threads).
    cgroup: CgroupId,
    /// Name prefix of the workers (`iou-wrk-<pid>`).
    name: String,
    /// `acct[IO_WQ_ACCT_BOUND].max_workers`.
    max_workers: Cell<u32>,
    /// Queue state.
    st: RefCell<WqState>,
    /// Free workers sleep here (`io_wq_worker` waiting for work).
    wait: WaitQueue,
}

/// An io-wq instance (one per ring's task, `struct io_wq`).
#[derive(Clone)]
pub struct IoWq(Rc<Inner>);

impl IoWq {
    /// `io_wq_create(bounded, ...)`: `bounded` workers at most for bound work.
    pub fn new(sched: &Sched, cgroup: CgroupId, name: &str, bounded: u32) -> IoWq {
        IoWq(Rc::new(Inner {
            sched: sched.clone(),
            cgroup,
            name: name.to_string(),
            max_workers: Cell::new(bounded.max(1)),
            st: RefCell::new(WqState::default()),
            wait: WaitQueue::new("io_wq"),
        }))
    }

    /// `io_wq_max_workers` (IORING_REGISTER_IOWQ_MAX_WORKERS): sets the bound
    /// limit (0 leaves it) and returns the old one.
    pub fn set_max_workers(&self, n: u32) -> u32 {
        let old = self.0.max_workers.get();
        if n > 0 {
            self.0.max_workers.set(n);
        }
        old
    }

    /// Workers created so far.
    pub fn nr_workers(&self) -> u32 {
        self.0.st.borrow().nr_workers
    }

    /// Items run per worker (worker index -> count), for tests and reports.
    pub fn items_per_worker(&self) -> Vec<u64> {
        self.0.st.borrow().ran.values().copied().collect()
    }

    /// `io_wq_enqueue`: queues `run`, hashed under `hash` if given, and wakes
    /// a free worker or creates one (`io_wq_activate_free_worker`,
    /// `io_wq_create_worker`).
    pub fn enqueue(&self, hash: Option<u64>, run: WorkFn) {
        let create = {
            let mut st = self.0.st.borrow_mut();
            st.work_list.push_back(Work { hash, run });
            // A new worker only if none is free and the work can run now:
            // unhashed, or its hash owned by no worker (work of a busy hash
            // waits for the worker that owns it). The kernel creates one when
            // no free worker exists and the work is concurrent or no worker
            // is running, and again when a running worker blocks
            // (io_wq_worker_sleeping -> io_wq_dec_running) while work is
            // runnable; workers here block in nearly every write, so this is
            // that rule with "blocks" taken as always.
            let runnable = hash.is_none_or(|h| !st.hash_busy.contains(&h));
            st.nr_free == 0 && runnable && st.nr_workers < self.0.max_workers.get()
        };
        if create {
            self.create_worker();
        } else {
            self.0.wait.wake_up();
        }
    }

    fn create_worker(&self) {
        let idx = {
            let mut st = self.0.st.borrow_mut();
            let idx = st.nr_workers;
            st.nr_workers += 1;
            // Counted free until it starts looking for work.
            st.nr_free += 1;
            st.ran.insert(idx, 0);
            idx
        };
        let wq = self.clone();
        let name = format!("{}/{idx}", self.0.name);
        self.0
            .sched
            .spawn_daemon(&name, self.0.cgroup, 0, async move { wq.worker(idx).await });
    }

    /// `io_get_next_work`: the first item that is unhashed or whose hash no
    /// worker runs; hashed items of a busy hash are skipped (stalled).
    fn next_work(&self) -> Option<Work> {
        let mut st = self.0.st.borrow_mut();
        let i = st
            .work_list
            .iter()
            .position(|w| w.hash.is_none_or(|h| !st.hash_busy.contains(&h)))?;
        let w = st.work_list.remove(i)?;
        if let Some(h) = w.hash {
            st.hash_busy.insert(h);
        }
        Some(w)
    }

    /// The next queued item of hash `h` (the rest of the chain the worker
    /// owns, `wq_next_work`).
    fn next_hashed(&self, h: u64) -> Option<Work> {
        let mut st = self.0.st.borrow_mut();
        let i = st.work_list.iter().position(|w| w.hash == Some(h))?;
        st.work_list.remove(i)
    }

    /// `io_wq_worker` -> `io_worker_handle_work`.
    async fn worker(self, idx: u32) {
        let task = Rc::new(RefCell::new(TaskDirty::default()));
        let sim = self.0.sched.sim().clone();
        self.0.st.borrow_mut().nr_free -= 1;
        loop {
            let Some(mut work) = self.next_work() else {
                self.0.st.borrow_mut().nr_free += 1;
                let sleeps = !self.has_runnable();
                let me = self.clone();
                self.0
                    .wait
                    .wait_event_exclusive(&sim, move || me.has_runnable())
                    .await;
                // Woken from idle: its CPU takes the machine's wakeup
                // latency to run it (as a workqueue worker does).
                if sleeps {
                    self.0.sched.idle_wakeup().await;
                }
                self.0.st.borrow_mut().nr_free -= 1;
                continue;
            };
            // Runnable work left and no free worker: start one (the kernel
            // does when this worker blocks, io_wq_dec_running).
            let spawn = {
                let st = self.0.st.borrow();
                st.nr_free == 0 && st.nr_workers < self.0.max_workers.get()
            };
            if spawn && self.has_runnable() {
                self.create_worker();
            }
            loop {
                let hash = work.hash;
                (work.run)(task.clone()).await;
                *self.0.st.borrow_mut().ran.entry(idx).or_default() += 1;
                let Some(h) = hash else { break };
                match self.next_hashed(h) {
                    Some(w) => work = w,
                    None => {
                        // Hash done: release it and wake a worker for the
                        // items that stalled on it (`io_wait_on_hash`).
                        self.0.st.borrow_mut().hash_busy.remove(&h);
                        if self.has_runnable() {
                            self.0.wait.wake_up();
                        }
                        break;
                    }
                }
            }
        }
    }

    fn has_runnable(&self) -> bool {
        let st = self.0.st.borrow();
        st.work_list
            .iter()
            .any(|w| w.hash.is_none_or(|h| !st.hash_busy.contains(&h)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kernel::sched::SchedParams;
    use sim::{Sim, Time, MSEC};

    type Log = Rc<RefCell<Vec<(u64, Time)>>>;

    /// An item that sleeps `ns` (a write blocked in the kernel) and logs its
    /// tag and completion time.
    fn item(sched: &Sched, tag: u64, ns: Time, log: &Log) -> WorkFn {
        let (s, l) = (sched.clone(), log.clone());
        Box::new(move |_t| {
            Box::pin(async move {
                s.sim().sleep(ns).await;
                l.borrow_mut().push((tag, s.sim().now()));
            })
        })
    }

    #[test]
    fn hashed_work_of_one_inode_runs_serially_in_order() {
        let sim = Sim::new(1);
        let sched = Sched::new(&sim, SchedParams::for_cpus(4));
        let wq = IoWq::new(&sched, CgroupId(0), "t", 16);
        let log: Log = Rc::default();
        let h = io_wq_hash_inode(7);
        for tag in 0..16 {
            wq.enqueue(Some(h), item(&sched, tag, MSEC, &log));
        }
        sim.run().unwrap();
        // One at a time, in queue order: the k-th completes at (k+1) ms, so
        // its wait grows with its queue position.
        let got = log.borrow().clone();
        let want: Vec<(u64, Time)> = (0..16).map(|k| (k, (k + 1) * MSEC)).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn two_inodes_run_on_two_workers_in_parallel() {
        let sim = Sim::new(1);
        let sched = Sched::new(&sim, SchedParams::for_cpus(4));
        let wq = IoWq::new(&sched, CgroupId(0), "t", 16);
        let log: Log = Rc::default();
        let (ha, hb) = (io_wq_hash_inode(7), io_wq_hash_inode(8));
        assert_ne!(ha, hb, "test inodes must not share a bucket");
        for tag in 0..4 {
            let h = if tag % 2 == 0 { ha } else { hb };
            wq.enqueue(Some(h), item(&sched, tag, MSEC, &log));
        }
        sim.run().unwrap();
        let mut ends: Vec<Time> = log.borrow().iter().map(|&(_, t)| t).collect();
        ends.sort_unstable();
        // Two hashes, two at a time: done at 1, 1, 2, 2 ms.
        assert_eq!(ends, vec![MSEC, MSEC, 2 * MSEC, 2 * MSEC]);
        let busy: Vec<u64> = wq
            .items_per_worker()
            .into_iter()
            .filter(|&n| n > 0)
            .collect();
        assert_eq!(busy, vec![2, 2], "each file's writes on one worker");
    }

    #[test]
    fn max_workers_bounds_parallelism() {
        let sim = Sim::new(1);
        let sched = Sched::new(&sim, SchedParams::for_cpus(4));
        let wq = IoWq::new(&sched, CgroupId(0), "t", 2);
        let log: Log = Rc::default();
        for tag in 0..4u64 {
            // Four different files, two workers at most.
            wq.enqueue(
                Some(io_wq_hash_inode(100 + tag * 13)),
                item(&sched, tag, MSEC, &log),
            );
        }
        sim.run().unwrap();
        assert_eq!(wq.nr_workers(), 2);
        let last = log.borrow().iter().map(|&(_, t)| t).max().unwrap();
        assert_eq!(last, 2 * MSEC);
    }

    #[test]
    fn hash_64_matches_the_kernel_formula() {
        // hash_64(1, 6): GOLDEN_RATIO_64 >> 58.
        assert_eq!(hash_64(1, 6), 0x61C8_8646_80B5_83EB >> 58);
        assert!(io_wq_hash_inode(12345) < 64);
    }
}
