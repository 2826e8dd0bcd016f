//! The memory-management state of one machine behind one handle: the page
//! counters (`vm_node_stat`), the `vm.dirty_*` sysctls in force, the global
//! `wb_domain`, `ratelimit_pages`, the per-CPU throttling counters, the bdi
//! list and the "writeback" workqueue (`bdi_wq`). Fields are private; mm code
//! changes them through methods, everything above reads them.
//!
//! The memcg hierarchy and the killed cgroup wbs (`offline_cgwbs`) live here
//! too. Left out: per-node state.

use std::cell::{Cell, OnceCell, Ref, RefCell, RefMut};
use std::rc::Rc;

use sim::Time;

use super::backing_dev_defs::{Bdi, Wb};
use super::filemap::Delta;
use super::memcontrol_defs::MemcgTable;
use super::mmzone::Pgdat;
use super::page_writeback::limits::{
    domain_dirty_limits, global_dirtyable_memory, writeback_set_ratelimit, DirtyThresholds, Hz,
    VmDirtyParams, WbDomain,
};
use super::page_writeback::pause::CpuDirtyRatelimit;
use super::vmstat::VmStat;
use crate::model::kernel::workqueue::{alloc_workqueue, Work, Workqueue, WqFlags};
use crate::model::kernel::Kernel;

/// What memory management is built from.
#[derive(Clone, Debug)]
pub struct MmParams {
    /// RAM, bytes.
    pub memory_bytes: u64,
    /// RAM never available to the page cache, bytes.
    pub reserved_bytes: u64,
    /// The `vm.dirty_*` sysctls at boot.
    pub dirty: VmDirtyParams,
}

/// Memory management of one machine.
pub struct Mm {
    k: Rc<Kernel>,
    vm: RefCell<VmStat>,
    /// vm.dirty_* sysctls in force.
    dirty: RefCell<VmDirtyParams>,
    /// `global_wb_domain`: dirty_limit smoothing and writeout completions.
    gdom: RefCell<WbDomain>,
    /// Tick rate (jiffies arithmetic of the dirty throttling).
    hz: Hz,
    /// `ratelimit_pages` (writeback_set_ratelimit).
    ratelimit_pages: Cell<u64>,
    /// `bdp_ratelimits` and `dirty_throttle_leaks`, per CPU.
    bdp_cpu: RefCell<Vec<CpuDirtyRatelimit>>,
    /// Folios waiting in each CPU's `lru_add` folio_batch (mm/swap.rs).
    lru_add_pending: RefCell<Vec<u64>>,
    /// Every balance_dirty_pages pause taken: (start, length), ns (for
    /// metrics and the pause series).
    bdp_pauses: RefCell<Vec<(Time, Time)>>,
    /// The task_ratelimit of the last balance_dirty_pages call that computed
    /// one, pages/s (the tracepoint's field, for the series).
    last_task_ratelimit: Cell<Option<u64>>,
    /// The "writeback" workqueue (`bdi_wq`): unbound, one flusher work per wb.
    bdi_wq: Workqueue,
    /// `bdi_list`.
    bdis: RefCell<Vec<Rc<Bdi>>>,
    // --- reclaim (helper mmtails) ---
    /// The node's reclaim state: watermarks, kswapd, reclaim throttling.
    pgdat: Pgdat,
    // --- cgroup writeback (memcontrol.rs, backing_dev.rs' cgwb part) ---
    /// The memcg hierarchy.
    memcgs: MemcgTable,
    /// `offline_cgwbs`: killed cgwbs waiting for their inodes to be switched.
    offline_cgwbs: RefCell<Vec<Rc<Wb>>>,
    /// `cleanup_offline_cgwbs_work`, set by the filesystem layer at boot (its
    /// body calls fs/'s `cleanup_offline_cgwb`).
    cgwb_cleanup_work: OnceCell<Work>,
    /// `cgroup_offline_wq` (kernel/cgroup/cgroup.c, `cgroup_wq_init`:
    /// `alloc_workqueue("cgroup_offline", 0, 1)`): where a killed css's
    /// `css_killed_work_fn` runs, one at a time. Kept here because memcg is
    /// the only controller the model offlines.
    cgroup_offline_wq: Workqueue,
}

impl Mm {
    /// `mm_init` + `page_writeback_init`: counters, sysctls, the global
    /// domain and `ratelimit_pages`, and `default_bdi_init`'s workqueue.
    pub fn boot(k: Rc<Kernel>, p: &MmParams) -> Result<Mm, String> {
        let bdi_wq = alloc_workqueue(
            k.sched(),
            "writeback",
            WqFlags {
                unbound: true,
                ..Default::default()
            },
            0,
        );
        let cgroup_offline_wq = alloc_workqueue(k.sched(), "cgroup_offline", WqFlags::default(), 1);
        let hz = Hz::new(k.hz()).map_err(|e| e.to_string())?;
        p.dirty.validate().map_err(|e| e.to_string())?;
        let vm = VmStat::new(p.memory_bytes, p.reserved_bytes);
        let mut gdom = WbDomain::with_hz(k.now(), hz);
        let avail = global_dirtyable_memory(vm.free_pages(), 0, vm.nr_file_pages, 0);
        let th = domain_dirty_limits(avail, &p.dirty);
        let ratelimit = writeback_set_ratelimit(&mut gdom, th.thresh, k.cpus() as u64);
        let nr_cpus = k.cpus().max(1);
        Ok(Mm {
            k,
            vm: RefCell::new(vm),
            dirty: RefCell::new(p.dirty.clone()),
            gdom: RefCell::new(gdom),
            hz,
            ratelimit_pages: Cell::new(ratelimit),
            bdp_cpu: RefCell::new(vec![CpuDirtyRatelimit::default(); nr_cpus]),
            lru_add_pending: RefCell::new(vec![0; nr_cpus]),
            bdp_pauses: RefCell::new(Vec::new()),
            last_task_ratelimit: Cell::new(None),
            bdi_wq,
            bdis: RefCell::new(Vec::new()),
            pgdat: Pgdat::new(
                p.memory_bytes / super::vmstat::PAGE_SIZE,
                p.dirty.min_free_kbytes,
                p.dirty.watermark_scale_factor,
            ),
            memcgs: MemcgTable::new(),
            offline_cgwbs: RefCell::new(Vec::new()),
            cgwb_cleanup_work: OnceCell::new(),
            cgroup_offline_wq,
        })
    }

    /// The kernel services.
    pub fn kernel(&self) -> &Rc<Kernel> {
        &self.k
    }

    /// Current time, ns.
    pub fn now(&self) -> Time {
        self.k.now()
    }

    /// The page counters (read).
    pub fn vm(&self) -> Ref<'_, VmStat> {
        self.vm.borrow()
    }

    /// Applies a page-cache change to the machine's counters.
    pub(crate) fn vm_apply(&self, d: &Delta) {
        self.vm.borrow_mut().apply(d);
    }

    /// Counts `pages` shmem pages (tmpfs data) in or out.
    pub(crate) fn vm_add_shmem(&self, pages: i64) {
        self.vm.borrow_mut().add_shmem(pages);
    }

    /// The `vm.dirty_*` sysctls in force.
    pub fn dirty_params(&self) -> Ref<'_, VmDirtyParams> {
        self.dirty.borrow()
    }

    /// The global thresholds now (`domain_dirty_limits` on
    /// `global_dirtyable_memory`).
    pub fn global_thresholds(&self) -> DirtyThresholds {
        domain_dirty_limits(self.global_dirtyable(), &self.dirty.borrow())
    }

    /// The global domain's available memory (`gdtc->avail`,
    /// `global_dirtyable_memory`), pages.
    pub fn global_dirtyable(&self) -> u64 {
        let vm = self.vm.borrow();
        global_dirtyable_memory(vm.free_pages(), 0, vm.nr_file_pages, 0)
    }

    /// The global `wb_domain` (read).
    pub fn global_domain(&self) -> Ref<'_, WbDomain> {
        self.gdom.borrow()
    }

    /// The global `wb_domain`, for the throttling code that updates it.
    pub(crate) fn global_domain_mut(&self) -> RefMut<'_, WbDomain> {
        self.gdom.borrow_mut()
    }

    /// The tick rate of the throttling arithmetic.
    pub fn hz(&self) -> Hz {
        self.hz
    }

    /// `ratelimit_pages`.
    pub fn ratelimit_pages(&self) -> u64 {
        self.ratelimit_pages.get()
    }

    /// The throttling counters of the CPU the current task runs on. The
    /// model's scheduler does not place tasks on CPUs, so a task's CPU is
    /// fixed by its slot (`index % nr_cpus`): tasks spread evenly over the
    /// CPUs and do not migrate. Outside a task: CPU 0.
    pub(crate) fn bdp_cpu_mut(&self) -> RefMut<'_, CpuDirtyRatelimit> {
        let n = self.bdp_cpu.borrow().len();
        let cpu = self.k.sim().current().map_or(0, |t| t.index() as usize % n);
        RefMut::map(self.bdp_cpu.borrow_mut(), |v| &mut v[cpu])
    }

    /// The folios pending in the current task's CPU's `lru_add` batch (the
    /// CPU chosen as [`Mm::bdp_cpu_mut`] does).
    pub(crate) fn lru_add_pending_mut(&self) -> RefMut<'_, u64> {
        let n = self.lru_add_pending.borrow().len();
        let cpu = self.k.sim().current().map_or(0, |t| t.index() as usize % n);
        RefMut::map(self.lru_add_pending.borrow_mut(), |v| &mut v[cpu])
    }

    /// Records one balance_dirty_pages pause, ns.
    pub(crate) fn record_pause(&self, ns: Time) {
        self.bdp_pauses.borrow_mut().push((self.now(), ns));
    }

    /// Every balance_dirty_pages pause so far, ns.
    pub fn pauses(&self) -> Vec<Time> {
        self.bdp_pauses.borrow().iter().map(|p| p.1).collect()
    }

    /// The balance_dirty_pages pauses from the `from`-th on: (start, length),
    /// ns.
    pub fn pauses_from(&self, from: usize) -> Vec<(Time, Time)> {
        self.bdp_pauses
            .borrow()
            .get(from..)
            .map(|s| s.to_vec())
            .unwrap_or_default()
    }

    /// Records the task_ratelimit a balance_dirty_pages call computed,
    /// pages/s.
    pub(crate) fn record_task_ratelimit(&self, pages_per_s: u64) {
        self.last_task_ratelimit.set(Some(pages_per_s));
    }

    /// The task_ratelimit of the last balance_dirty_pages call that
    /// computed one, pages/s.
    pub fn last_task_ratelimit(&self) -> Option<u64> {
        self.last_task_ratelimit.get()
    }

    /// `bdi_wq`.
    pub fn bdi_wq(&self) -> &Workqueue {
        &self.bdi_wq
    }

    /// `bdi_list` (read).
    pub fn bdis(&self) -> Ref<'_, Vec<Rc<Bdi>>> {
        self.bdis.borrow()
    }

    /// Adds a bdi to `bdi_list`.
    pub(crate) fn bdi_list_add(&self, bdi: Rc<Bdi>) {
        self.bdis.borrow_mut().push(bdi);
    }

    /// The node's reclaim state (watermarks, kswapd, throttling).
    pub fn pgdat(&self) -> &Pgdat {
        &self.pgdat
    }

    /// Takes a bdi off `bdi_list`.
    pub(crate) fn bdi_list_del(&self, bdi: &Rc<Bdi>) {
        self.bdis.borrow_mut().retain(|b| !Rc::ptr_eq(b, bdi));
    }

    // --- cgroup writeback ---

    /// The memcg hierarchy.
    pub fn memcgs(&self) -> &MemcgTable {
        &self.memcgs
    }

    /// `offline_cgwbs` (a copy).
    pub fn offline_cgwbs(&self) -> Vec<Rc<Wb>> {
        self.offline_cgwbs.borrow().clone()
    }

    /// Adds a killed cgwb to `offline_cgwbs`.
    pub(crate) fn offline_cgwbs_add(&self, wb: Rc<Wb>) {
        self.offline_cgwbs.borrow_mut().push(wb);
    }

    /// Takes a released cgwb off `offline_cgwbs`.
    pub(crate) fn offline_cgwbs_del(&self, wb: &Wb) {
        self.offline_cgwbs.borrow_mut().retain(|w| w.id != wb.id);
    }

    /// Installs `cleanup_offline_cgwbs_work` (once, at boot).
    pub fn set_cgwb_cleanup_work(&self, work: Work) {
        let _ = self.cgwb_cleanup_work.set(work);
    }

    /// `cleanup_offline_cgwbs_work`, if installed.
    pub fn cgwb_cleanup_work(&self) -> Option<&Work> {
        self.cgwb_cleanup_work.get()
    }

    /// `cgroup_offline_wq`.
    pub fn cgroup_offline_wq(&self) -> &Workqueue {
        &self.cgroup_offline_wq
    }
}
