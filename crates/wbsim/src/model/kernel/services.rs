//! The kernel services every subsystem above uses, behind one handle: the
//! simulation clock, the scheduler (CPUs, run queues, cpusets), RCU, lock
//! classes (lock_stat), the wait_var_event table, the `system_wq` ("events")
//! workqueue, object ids and run statistics. Built once at boot
//! ([`Kernel::boot`]); fields are private, subsystems reach the services
//! through methods.

use std::cell::Cell;

use sim::{Sim, Time};

use super::locking::lock_stat::LockStats;
use super::rcu::{Rcu, RcuParams};
use super::sched::{Sched, SchedParams};
use super::stats::{RunStats, Violation, ViolationObjects};
use super::wait::WaitVarTable;
use super::workqueue::{alloc_workqueue, Workqueue, WqFlags};

/// What the kernel services are built from.
#[derive(Clone, Debug)]
pub struct KernelParams {
    /// Online CPUs.
    pub cpus: usize,
    /// `CONFIG_HZ`, ticks per second.
    pub hz: u64,
    /// RCU flavour and grace-period lengths.
    pub rcu: RcuParams,
    /// Wakeup latency of an idle CPU ([`SchedParams::wakeup_latency_ns`]), ns.
    pub wakeup_latency_ns: Time,
    /// CPU time a tick takes from the task it interrupts
    /// ([`SchedParams::tick_cost_ns`]), ns.
    pub tick_cost_ns: Time,
    /// CPU time of every request in percent of its stated cost
    /// ([`SchedParams::cpu_cost_percent`]).
    pub cpu_cost_percent: u64,
}

/// The kernel services of one machine.
pub struct Kernel {
    sim: Sim,
    sched: Sched,
    rcu: Rcu,
    locks: LockStats,
    vars: WaitVarTable,
    system_wq: Workqueue,
    system_unbound_wq: Workqueue,
    cpus: usize,
    hz: u64,
    stats: RunStats,
    next_id: Cell<u64>,
}

impl Kernel {
    /// Boots the kernel services in `sim`.
    pub fn boot(sim: &Sim, p: &KernelParams) -> Result<Kernel, String> {
        if p.cpus == 0 {
            return Err("machine.cpus must be at least 1".into());
        }
        if p.hz == 0 {
            return Err("machine.hz must be at least 1".into());
        }
        // TICK_NSEC: a jiffy, rounded to the nearest ns.
        let tick_ns = (1_000_000_000 + p.hz / 2) / p.hz;
        if p.tick_cost_ns >= tick_ns {
            return Err(format!(
                "machine.tick_cost ({} ns) must be shorter than a jiffy ({tick_ns} ns at HZ={})",
                p.tick_cost_ns, p.hz
            ));
        }
        let sched = Sched::new(
            sim,
            SchedParams {
                wakeup_latency_ns: p.wakeup_latency_ns,
                tick_ns,
                tick_cost_ns: p.tick_cost_ns,
                cpu_cost_percent: p.cpu_cost_percent,
                ..SchedParams::for_cpus(p.cpus)
            },
        );
        let locks = LockStats::new();
        let rcu_params = RcuParams {
            hz: p.hz,
            nr_cpus: p.cpus,
            ..p.rcu.clone()
        };
        let rcu =
            Rcu::with_sched(sim, rcu_params, Some(sched.clone())).map_err(|e| e.to_string())?;
        let system_wq = alloc_workqueue(&sched, "events", WqFlags::default(), 0);
        let system_unbound_wq = alloc_workqueue(
            &sched,
            "events_unbound",
            WqFlags {
                unbound: true,
                ..WqFlags::default()
            },
            0,
        );
        Ok(Kernel {
            sim: sim.clone(),
            sched,
            rcu,
            locks,
            vars: WaitVarTable::new("vars"),
            system_wq,
            system_unbound_wq,
            cpus: p.cpus,
            hz: p.hz,
            stats: RunStats::default(),
            next_id: Cell::new(1),
        })
    }

    /// The simulation (clock, timers, trace sink).
    pub fn sim(&self) -> &Sim {
        &self.sim
    }

    /// Current time, ns.
    pub fn now(&self) -> Time {
        self.sim.now()
    }

    /// The scheduler.
    pub fn sched(&self) -> &Sched {
        &self.sched
    }

    /// RCU.
    pub fn rcu(&self) -> &Rcu {
        &self.rcu
    }

    /// The lock classes (lock_stat).
    pub fn locks(&self) -> &LockStats {
        &self.locks
    }

    /// The `wait_var_event` hash table.
    pub fn vars(&self) -> &WaitVarTable {
        &self.vars
    }

    /// `system_wq` ("events"): where `schedule_work` / `schedule_delayed_work`
    /// put work (delayed_mntput, deferred mount release).
    pub fn system_wq(&self) -> &Workqueue {
        &self.system_wq
    }

    /// `system_unbound_wq` ("events_unbound", `system_dfl_wq` since 6.19):
    /// work that may run on any CPU, served by unbound workers
    /// (`cleanup_offline_cgwbs_work`).
    pub fn system_unbound_wq(&self) -> &Workqueue {
        &self.system_unbound_wq
    }

    /// Online CPUs (`num_online_cpus()`).
    pub fn cpus(&self) -> usize {
        self.cpus
    }

    /// `CONFIG_HZ`.
    pub fn hz(&self) -> u64 {
        self.hz
    }

    /// One jiffy, ns.
    pub fn jiffy_ns(&self) -> Time {
        1_000_000_000 / self.hz.max(1)
    }

    /// A fresh id (bdis, wbs, superblocks).
    pub fn new_id(&self) -> u64 {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        id
    }

    /// Run statistics (tracepoint counts, violations).
    pub fn stats(&self) -> &RunStats {
        &self.stats
    }

    /// Counts one model tracepoint hit (see [`RunStats`]).
    pub fn count_event(&self, name: &'static str) {
        self.stats.count_event(name);
    }

    /// Counts one hit of a tracepoint about inode `key` (superblock id,
    /// inode number).
    pub fn count_inode_event(&self, name: &'static str, key: super::stats::InodeKey) {
        self.stats.count_inode_event(name, key);
    }

    /// Records a violation of `invariant` involving `objects`, stamped with
    /// the simulated time.
    pub fn violation(&self, invariant: &str, objects: ViolationObjects, message: String) {
        self.stats.violation(Violation {
            invariant: invariant.to_string(),
            time_ns: self.now(),
            objects,
            message,
        });
    }
}
