//! An io_uring instance and its write path (`io_uring/io_uring.c`,
//! `io_uring/rw.c`, `io_uring/tctx.c`).
//!
//! Mirrors: `io_uring_enter` issues each submitted write inline from the
//! submitting task with `IOCB_NOWAIT` (`io_write` with `force_nonblock`).
//! If nothing would block, the write completes inside the submit call and
//! its CQE is posted at once. If it would block (`-EAGAIN`: the inode lock
//! is taken, `balance_dirty_pages` would sleep (BDP_ASYNC)), the request is
//! punted (`io_queue_iowq`) to the task's io-wq, hashed by inode
//! (`io_prep_async_work`: regular-file writes are hashed, `hash_reg_file`),
//! and an io-wq worker reissues it in blocking mode and posts the CQE.
//! Completions wait in the CQ ring until the application reaps them
//! (`io_uring_enter` with `IORING_ENTER_GETEVENTS` and `min_complete`).
//! A submitter that slept for its completions, and an io-wq worker woken
//! for work, run again only after the machine's idle-CPU wakeup latency
//! (`[machine] wakeup_latency`; as for workqueue workers, the CPU is taken
//! to have gone idle while they slept).
//! A buffered write to a filesystem without FOP_BUFFER_WASYNC (ext4) is
//! punted without an inline attempt (`io_write` checks `fops_buf_wasync`
//! before calling `->write_iter`).
//! O_DIRECT writes are submitted as bios and complete asynchronously (their
//! wait is for the device, not for a worker).
//!
//! Left out: reads (issued inline in blocking mode by the caller), the
//! short-write retry of a partially done nonblocking write (a write the
//! model fails with -EAGAIN after dirtying its pages is redone whole by the
//! worker; its pages are already dirty, so the redo only pays the call), SQ
//! polling, registered files and buffers, CQ overflow.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use super::io_wq::{io_wq_hash_inode, IoWq};
use crate::model::errno::IoError;
use crate::model::fs::read_write::{vfs_write, File, IoFlags};
use crate::model::fs::vfs::Machine;
use crate::model::kernel::sched::CgroupId;
use crate::model::kernel::wait::WaitQueue;
use crate::model::mm::page_writeback::TaskDirty;

/// CPU of an io-wq worker per punted request besides the write itself
/// (`io_worker_handle_work` taking it off the work list and the hash map,
/// `io_wq_submit_work` -> `io_issue_sqe` reissuing it blocking, posting the
/// CQE and waking the ring's waiter), ns: 2.1 us. Measured from the probe
/// (docs/probe/uring.json and dontcache.json, 2026-11-25): ext4's 4 KiB
/// random buffered writes at iodepth 16 are all punted and run one at a
/// time on one worker (hashed by inode), 643 MiB/s, so 6.1 us per write,
/// where the same writes by `pwrite(2)` take 3.96 us (`ext4-rand-buffered`
/// clat mean, syscall entry included, which the model's `vfs_write` keeps).
pub const IO_WQ_WORK_NS: sim::Time = 2_100;

/// One completion queue entry (`struct io_uring_cqe`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cqe {
    /// The submitter's tag for the request.
    pub user_data: u64,
    /// The result (`res`): Ok or the error.
    pub res: Result<(), IoError>,
}

/// How a submitted request went (for statistics and tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Issue {
    /// Completed inline by the nonblocking attempt.
    Inline,
    /// Punted to io-wq after -EAGAIN.
    Punted,
    /// In flight on the device (O_DIRECT).
    Async,
}

struct RingInner {
    /// The machine.
    m: Rc<Machine>,
    /// The task's io-wq.
    wq: IoWq,
    /// Posted, not yet reaped completions.
    cq: RefCell<VecDeque<Cqe>>,
    /// The reaper sleeps here (`ctx->cq_wait`).
    cq_wait: WaitQueue,
}

/// An io_uring instance of one task.
#[derive(Clone)]
pub struct IoRing(Rc<RingInner>);

impl IoRing {
    /// `io_uring_setup(sq_entries)` by a task in `cgroup`: its io-wq bounds
    /// bound workers at `min(sq_entries, 4 * nr_cpus)` (`io_init_wq_offload`).
    pub fn setup(m: &Rc<Machine>, cgroup: CgroupId, name: &str, sq_entries: u32) -> IoRing {
        let cpus = u32::try_from(m.sched().nr_cpus()).unwrap_or(u32::MAX);
        let bounded = sq_entries.min(cpus.saturating_mul(4));
        IoRing(Rc::new(RingInner {
            m: m.clone(),
            wq: IoWq::new(m.sched(), cgroup, &format!("iou-wrk:{name}"), bounded),
            cq: RefCell::new(VecDeque::new()),
            cq_wait: WaitQueue::new("io_uring_cq"),
        }))
    }

    /// The ring's io-wq.
    pub fn io_wq(&self) -> &IoWq {
        &self.0.wq
    }

    fn post_cqe(&self, cqe: Cqe) {
        self.0.cq.borrow_mut().push_back(cqe);
        self.0.cq_wait.wake_up_all();
    }

    /// Submits one write (`IORING_OP_WRITE`) from the submitting task whose
    /// dirty-throttling state is `task`; returns when the submit call
    /// returns (the write may have completed inline, been punted, or be in
    /// flight on the device).
    pub async fn submit_write(
        &self,
        task: &mut TaskDirty,
        f: &File,
        pos: u64,
        len: u64,
        fl: IoFlags,
        user_data: u64,
    ) -> Issue {
        let m = self.0.m.clone();
        if fl.direct {
            // The bio goes to the device; completion comes from its IRQ.
            let ring = self.clone();
            let f = f.clone();
            let cg = m.sched().current_cgroup();
            m.sched().spawn("io_uring:dio", cg, 0, async move {
                let mut t = TaskDirty::default();
                let res = vfs_write(&ring.0.m, &mut t, &f, pos, len, fl).await;
                ring.post_cqe(Cqe { user_data, res });
            });
            return Issue::Async;
        }
        let nw = IoFlags { nowait: true, ..fl };
        // io_write: a buffered write to a file whose filesystem lacks
        // FOP_BUFFER_WASYNC (ext4) is not tried inline: -EAGAIN at once.
        let inline = if f.sb.fs.fop_buffer_wasync() {
            vfs_write(&m, task, f, pos, len, nw).await
        } else {
            Err(IoError::Again)
        };
        match inline {
            Err(IoError::Again) => {
                // io_queue_iowq: hashed by inode, reissued blocking.
                let ring = self.clone();
                let f = f.clone();
                let hash = io_wq_hash_inode(f.inode.ino);
                self.0.wq.enqueue(
                    Some(hash),
                    Box::new(move |wtask: Rc<RefCell<TaskDirty>>| {
                        Box::pin(async move {
                            let mut t = *wtask.borrow();
                            ring.0.m.sched().cpu(IO_WQ_WORK_NS).await;
                            let res = vfs_write(&ring.0.m, &mut t, &f, pos, len, fl).await;
                            *wtask.borrow_mut() = t;
                            ring.post_cqe(Cqe { user_data, res });
                        })
                    }),
                );
                Issue::Punted
            }
            res => {
                self.post_cqe(Cqe { user_data, res });
                Issue::Inline
            }
        }
    }

    /// Completions posted and not yet reaped.
    pub fn cq_ready(&self) -> usize {
        self.0.cq.borrow().len()
    }

    /// `io_uring_enter(GETEVENTS, min_complete)` then reaping up to `max`:
    /// sleeps until at least `min` completions are posted, then takes up to
    /// `max` of them in posting order.
    pub async fn wait_cqes(&self, min: usize, max: usize) -> Vec<Cqe> {
        let ring = self.clone();
        let sleeps = self.cq_ready() < min;
        self.0
            .cq_wait
            .wait_event(self.0.m.sim(), move || ring.cq_ready() >= min)
            .await;
        // io_cqring_wait slept: the CQE's poster wakes it, and its CPU,
        // idle meanwhile, takes the machine's wakeup latency to run it.
        if sleeps {
            self.0.m.sched().idle_wakeup().await;
        }
        let mut cq = self.0.cq.borrow_mut();
        let n = cq.len().min(max.max(1));
        cq.drain(..n).collect()
    }
}

impl IoRing {
    /// Posts the completion of a read the caller did inline.
    pub fn post_read(&self, user_data: u64, res: Result<(), IoError>) {
        self.post_cqe(Cqe { user_data, res });
    }
}
