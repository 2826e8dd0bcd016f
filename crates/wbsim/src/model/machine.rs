//! One booted machine: the simulation, its CPUs and kernel services, memory
//! counters, the writeback workqueue, backing devices and mounted superblocks.
//! Every model function takes `&Rc<Machine>` the way kernel code reaches its
//! globals.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use sim::{Sim, Time};

use crate::model::init::MachineConfig;

use crate::model::fs::namespace::MntNamespace;
use crate::model::fs::super_::SuperBlock;
use crate::model::kernel::locking::lock_stat::LockStats;
use crate::model::kernel::rcu::Rcu;
use crate::model::kernel::sched::{Sched, SchedParams};
use crate::model::kernel::wait::WaitVarTable;
use crate::model::kernel::workqueue::{alloc_workqueue, Workqueue, WqFlags};
use crate::model::mm::backing_dev::Bdi;
use crate::model::mm::page_writeback::{
    self as pw, CpuDirtyRatelimit, Hz, VmDirtyParams, WbDomain,
};
use crate::model::mm::vmstat::VmStat;
use crate::model::policy::Policies;

/// One modelled machine and its kernel.
pub struct Machine {
    pub sim: Sim,
    pub sched: Sched,
    pub rcu: Rcu,
    pub locks: LockStats,
    pub vars: WaitVarTable,
    pub cfg: MachineConfig,
    pub vm: RefCell<VmStat>,
    /// vm.dirty_* sysctls in force.
    pub dirty: RefCell<VmDirtyParams>,
    /// `global_wb_domain`: dirty_limit smoothing and writeout completions.
    pub gdom: RefCell<WbDomain>,
    /// The "writeback" workqueue (`bdi_wq`): unbound, one flusher work per wb.
    pub bdi_wq: Workqueue,
    pub bdis: RefCell<Vec<Rc<Bdi>>>,
    pub supers: RefCell<BTreeMap<u64, Rc<SuperBlock>>>,
    /// `system_wq` ("events"): where `schedule_work` / `schedule_delayed_work`
    /// put work (delayed_mntput, deferred mount release).
    pub system_wq: Workqueue,
    /// `isw_wq` ("inode_switch_wbs"): inode wb switch work
    /// (fs/fs-writeback.c).
    pub isw_wq: Workqueue,
    /// `isw_nr_in_flight`: inode wb switches prepared and not yet finished,
    /// machine-wide. Always 0 until cgroup writeback switching is modelled.
    pub isw_nr_in_flight: Cell<u64>,
    /// The mount namespace: mount table, `namespace_sem`, delayed mntput.
    pub ns: MntNamespace,
    /// Tick rate (jiffies arithmetic of the dirty throttling).
    pub hz: Hz,
    /// `ratelimit_pages` (writeback_set_ratelimit).
    pub ratelimit_pages: Cell<u64>,
    /// Counts of model tracepoints that results report per job (named as
    /// the kernel's, e.g. `xfs_unwritten_convert`), whether or not a trace
    /// is being written.
    pub events: RefCell<BTreeMap<&'static str, u64>>,
    /// `bdp_ratelimits` and `dirty_throttle_leaks` (one for the machine).
    pub bdp_cpu: RefCell<CpuDirtyRatelimit>,
    /// Every balance_dirty_pages pause taken, ns (for metrics).
    pub bdp_pauses: RefCell<Vec<Time>>,
    next_id: Cell<u64>,
    /// Invariant violations noticed by model code (reported in results).
    pub violations: RefCell<Vec<String>>,
}

impl Machine {
    /// Counts one `name` event (see [`Machine::events`]).
    pub fn count_event(&self, name: &'static str) {
        *self.events.borrow_mut().entry(name).or_insert(0) += 1;
    }

    /// Boots a machine in `sim`.
    pub fn new(sim: &Sim, cfg: MachineConfig) -> Result<Rc<Self>, String> {
        if cfg.cpus == 0 {
            return Err("machine.cpus must be at least 1".into());
        }
        let sched = Sched::new(
            sim,
            SchedParams {
                wakeup_latency_ns: cfg.wakeup_latency_ns,
                ..SchedParams::for_cpus(cfg.cpus)
            },
        );
        let locks = LockStats::new();
        let rcu = Rcu::new(sim, cfg.rcu_params()).map_err(|e| e.to_string())?;
        let bdi_wq = alloc_workqueue(
            &sched,
            "writeback",
            WqFlags {
                unbound: true,
                ..Default::default()
            },
            0,
        );
        let system_wq = alloc_workqueue(&sched, "events", WqFlags::default(), 0);
        let isw_wq = alloc_workqueue(&sched, "inode_switch_wbs", WqFlags::default(), 0);
        let ns = MntNamespace::new(&locks, &sched);
        let now = sim.now();
        let hz = Hz::new(cfg.hz).map_err(|e| e.to_string())?;
        cfg.dirty.validate().map_err(|e| e.to_string())?;
        let vm = VmStat::new(cfg.memory_bytes, cfg.reserved_bytes);
        let mut gdom = WbDomain::with_hz(now, hz);
        let avail = pw::global_dirtyable_memory(vm.free_pages(), 0, vm.nr_file_pages, 0);
        let th = pw::domain_dirty_limits(avail, &cfg.dirty);
        let ratelimit = pw::writeback_set_ratelimit(&mut gdom, th.thresh, cfg.cpus as u64);
        Ok(Rc::new(Machine {
            sim: sim.clone(),
            rcu,
            locks,
            vars: WaitVarTable::new("vars"),
            vm: RefCell::new(vm),
            dirty: RefCell::new(cfg.dirty.clone()),
            gdom: RefCell::new(gdom),
            hz,
            ratelimit_pages: Cell::new(ratelimit),
            events: RefCell::new(BTreeMap::new()),
            bdp_cpu: RefCell::new(CpuDirtyRatelimit::default()),
            bdp_pauses: RefCell::new(Vec::new()),
            bdi_wq,
            bdis: RefCell::new(Vec::new()),
            supers: RefCell::new(BTreeMap::new()),
            system_wq,
            isw_wq,
            isw_nr_in_flight: Cell::new(0),
            ns,
            next_id: Cell::new(1),
            violations: RefCell::new(Vec::new()),
            sched,
            cfg,
        }))
    }

    /// A fresh id (bdis, wbs, superblocks).
    pub fn new_id(&self) -> u64 {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        id
    }

    /// Current time, ns.
    pub fn now(&self) -> Time {
        self.sim.now()
    }

    /// Records an invariant violation.
    pub fn violation(&self, what: String) {
        self.violations.borrow_mut().push(what);
    }

    /// One jiffy at the machine's HZ, ns.
    pub fn jiffy_ns(&self) -> Time {
        1_000_000_000 / self.cfg.hz.max(1)
    }

    /// The policies in force.
    pub fn policies(&self) -> &Policies {
        &self.cfg.policies
    }
}
