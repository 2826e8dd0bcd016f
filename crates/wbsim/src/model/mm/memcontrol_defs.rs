//! The memory cgroup types (include/linux/memcontrol.h): the memcg and the
//! machine's memcg table, which the [`super::Mm`] handle holds. The
//! functions that act on them are in memcontrol.rs (mm/memcontrol.c).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::{Rc, Weak};

use sim::{TaskId, Time};

use super::mmzone::LruFile;

use crate::model::kernel::locking::{LockStats, SpinLock};
use crate::model::kernel::sched::{CgroupId, Sched};
use crate::model::mm::backing_dev_defs::{Wb, WbCompletion};
use crate::model::mm::page_writeback::WbDomain;

/// `mem_cgroup_id` of the root memcg. The kernel's root has id 1 (ids come
/// from an IDR starting at 1); 0 means "no memcg" (`wb->memcg_css` of a root wb).
pub const ROOT_MEM_CGROUP_ID: u64 = 1;

/// A file's place on an LRU: (last access, superblock id, inode number).
pub type LruKey = (Time, u64, u64);

/// One memory cgroup.
pub struct MemCgroup {
    /// `mem_cgroup_id()`: never reused while the memcg lives.
    pub id: u64,
    /// The scheduler's cgroup this memcg belongs to.
    pub cgroup: CgroupId,
    /// Parent memcg's id (None for the root).
    pub parent: Option<u64>,
    /// cgroupfs name (for traces).
    pub name: String,
    /// `memory.high`, bytes (None: max).
    pub memory_high: Option<u64>,
    /// `memory.max`, bytes (None: max).
    pub memory_max: Option<u64>,
    /// CSS_ONLINE: cleared by rmdir's offline.
    online: Cell<bool>,
    /// css references beyond the cgroup's own (its cgwbs; pages would too).
    css_refs: Cell<u64>,
    /// `memcg->cgwb_list`: the wbs of this memcg on every bdi and context.
    pub(crate) cgwb_list: RefCell<Vec<Rc<Wb>>>,
    /// The list was shut at offline (`memcg_cgwb_list->next = NULL`): no new
    /// cgwb may be created for this memcg.
    cgwb_list_closed: Cell<bool>,
    /// `memcg->memory` page counter: pages charged (page cache), pages.
    usage: Cell<u64>,
    /// memory.events and reclaim counters of this memcg.
    events: Cell<MemcgEvents>,
    /// memory.pressure (PSI of the memory resource) of this memcg.
    psi: Cell<PsiMem>,
    /// Tasks that charged pages here (the tasks PSI "full" counts).
    tasks: RefCell<BTreeSet<TaskId>>,
    /// The memcg's file LRU (`lruvec` of the memcg): its charged files by
    /// LRU key (last access, superblock, inode), oldest first.
    lru: RefCell<BTreeMap<LruKey, Weak<dyn LruFile>>>,
    /// `memcg->cgwb_domain`: the memcg's dirty `wb_domain` (writeout
    /// completions of its cgwbs, its smoothed dirty_limit); created at the
    /// first use (`wb_domain_init` runs at css alloc in the kernel).
    pub(crate) cgwb_domain: RefCell<Option<WbDomain>>,
    /// `memcg->cgwb_frn`: recent foreign dirtying of this memcg's folios
    /// (folios it owns dirtied on inodes of other memcgs' wbs), one slot
    /// per foreign wb, [`MEMCG_CGWB_FRN_CNT`] slots.
    pub cgwb_frn: RefCell<[MemcgCgwbFrn; MEMCG_CGWB_FRN_CNT]>,
    /// `lruvec->lru_lock` of the memcg's lruvec (one node): taken by memcg
    /// reclaim to isolate folios from the LRU; created at first use.
    lru_lock: RefCell<Option<SpinLock>>,
}

/// `MEMCG_CGWB_FRN_CNT`: foreign-dirty records kept per memcg
/// (include/linux/memcontrol.h).
pub const MEMCG_CGWB_FRN_CNT: usize = 4;

/// `struct memcg_cgwb_frn`: one foreign wb this memcg's folios were
/// dirtied on.
#[derive(Clone)]
pub struct MemcgCgwbFrn {
    /// `bdi_id` of the foreign inode's bdi (0: unused slot).
    pub bdi_id: u64,
    /// The writeback context of that wb (the model's bdis may have
    /// several; the kernel's one-context bdi needs none).
    pub ctx: usize,
    /// `memcg_id` of the foreign wb (0: unused slot).
    pub memcg_id: u64,
    /// `at`: when the record was last refreshed, ns (0: never, or its
    /// flush was issued).
    pub at: Time,
    /// `done`: tracks the foreign flush in flight (count 1 when none).
    pub done: Rc<WbCompletion>,
}

impl Default for MemcgCgwbFrn {
    fn default() -> Self {
        MemcgCgwbFrn {
            bdi_id: 0,
            ctx: 0,
            memcg_id: 0,
            at: 0,
            done: WbCompletion::new(),
        }
    }
}

/// memory.events and memcg reclaim counters (`memcg_memory_event`,
/// memory.stat's pgscan/pgsteal).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemcgEvents {
    /// MEMCG_HIGH: charges that left the memcg over memory.high.
    pub high: u64,
    /// MEMCG_MAX: charges that hit memory.max.
    pub max: u64,
    /// MEMCG_OOM: charges that failed after reclaim at memory.max.
    pub oom: u64,
    /// Pages freed by reclaim of this memcg (memory.stat pgsteal).
    pub pgsteal: u64,
    /// Pages scanned by reclaim of this memcg (memory.stat pgscan).
    pub pgscan: u64,
    /// Penalty sleeps taken in `mem_cgroup_handle_over_high`.
    pub penalty_sleeps: u64,
    /// Their total length, ns.
    pub penalty_ns: Time,
}

/// The memory part of a cgroup's PSI group (kernel/sched/psi.c, the
/// `PSI_MEM_SOME` / `PSI_MEM_FULL` states): tasks inside
/// `psi_memstall_enter`/`leave`, and the total time with at least one of
/// them (some) and with all of the memcg's tasks in it (full).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PsiMem {
    /// Tasks of the memcg in a memory stall now.
    pub nr_memstall: u64,
    /// When the counters were last brought up to date, ns.
    pub last: Time,
    /// memory.pressure `some total`, ns.
    pub some_ns: Time,
    /// memory.pressure `full total`, ns.
    pub full_ns: Time,
}

impl MemCgroup {
    /// `mem_cgroup_alloc`: a new, online memcg with nothing charged, no
    /// cgroup wbs and no tasks.
    fn alloc(
        id: u64,
        cgroup: CgroupId,
        parent: Option<u64>,
        name: &str,
        memory_high: Option<u64>,
        memory_max: Option<u64>,
    ) -> Rc<MemCgroup> {
        Rc::new(MemCgroup {
            id,
            cgroup,
            parent,
            name: name.to_string(),
            memory_high,
            memory_max,
            online: Cell::new(true),
            css_refs: Cell::new(0),
            cgwb_list: RefCell::new(Vec::new()),
            cgwb_list_closed: Cell::new(false),
            usage: Cell::new(0),
            events: Cell::new(MemcgEvents::default()),
            psi: Cell::new(PsiMem::default()),
            tasks: RefCell::new(BTreeSet::new()),
            lru: RefCell::new(BTreeMap::new()),
            cgwb_domain: RefCell::new(None),
            cgwb_frn: RefCell::new(Default::default()),
            lru_lock: RefCell::new(None),
        })
    }

    /// Whether the memcg is online (CSS_ONLINE).
    pub fn online(&self) -> bool {
        self.online.get()
    }

    /// css references held beyond the cgroup's own.
    pub fn css_refs(&self) -> u64 {
        self.css_refs.get()
    }

    /// `css_get`.
    pub fn css_get(&self) {
        self.css_refs.set(self.css_refs.get() + 1);
    }

    /// `css_put`.
    pub fn css_put(&self) {
        self.css_refs.set(self.css_refs.get().saturating_sub(1));
    }

    /// A copy of `memcg->cgwb_list`.
    pub fn cgwbs(&self) -> Vec<Rc<Wb>> {
        self.cgwb_list.borrow().clone()
    }

    /// Links a new cgwb (`cgwb_create`); false once the list is shut.
    pub(crate) fn cgwb_list_add(&self, wb: Rc<Wb>) -> bool {
        if self.cgwb_list_closed.get() {
            return false;
        }
        self.cgwb_list.borrow_mut().push(wb);
        true
    }

    /// Pages charged to the memcg (`page_counter_read(&memcg->memory)`).
    pub fn usage_pages(&self) -> u64 {
        self.usage.get()
    }

    /// The memcg lruvec's `lru_lock` (lock class `lruvec->lru_lock`, one
    /// class for every lruvec as lockdep has it), created at first use.
    pub fn lru_lock(&self, sched: &Sched, locks: &LockStats) -> SpinLock {
        self.lru_lock
            .borrow_mut()
            .get_or_insert_with(|| SpinLock::new(locks.class("lruvec->lru_lock"), sched))
            .clone()
    }

    /// `page_counter_charge`: `pages` more are charged by `task`.
    pub fn charge(&self, pages: u64, task: Option<TaskId>) {
        self.usage.set(self.usage.get() + pages);
        if let Some(t) = task {
            self.tasks.borrow_mut().insert(t);
        }
    }

    /// `page_counter_uncharge` of `pages` freed pages (reclaim, truncation).
    pub fn uncharge(&self, pages: u64) {
        self.usage.set(self.usage.get().saturating_sub(pages));
    }

    /// Puts a newly charged file on the memcg's LRU.
    pub fn lru_add(&self, f: &Rc<dyn LruFile>) {
        self.lru.borrow_mut().insert(f.lru_key(), Rc::downgrade(f));
    }

    /// Moves a file on the LRU after an access changed its key from `old`
    /// (`folio_mark_accessed`, per file).
    pub fn lru_rotate(&self, old: LruKey, new: LruKey) {
        let mut l = self.lru.borrow_mut();
        if let Some(w) = l.remove(&old) {
            l.insert(new, w);
        }
    }

    /// Takes a file off the LRU (eviction).
    pub fn lru_del(&self, key: LruKey) {
        self.lru.borrow_mut().remove(&key);
    }

    /// The oldest files on the LRU holding pages, until they hold at least
    /// `pages` pages (all of them if they hold fewer).
    /// Entries whose file is gone (an inode or tree block freed without
    /// leaving the LRU) are dropped on the way.
    pub fn lru_oldest(&self, pages: u64) -> Vec<Rc<dyn LruFile>> {
        let mut v = Vec::new();
        let mut n = 0;
        let mut dead = Vec::new();
        for (k, w) in self.lru.borrow().iter() {
            if n >= pages {
                break;
            }
            match w.upgrade() {
                Some(f) => {
                    let p = f.mapping().borrow().nrpages();
                    if p > 0 {
                        n += p;
                        v.push(f);
                    }
                }
                None => dead.push(*k),
            }
        }
        if !dead.is_empty() {
            let mut l = self.lru.borrow_mut();
            for k in dead {
                l.remove(&k);
            }
        }
        v
    }

    /// memory.events and reclaim counters.
    pub fn events(&self) -> MemcgEvents {
        self.events.get()
    }

    /// Updates the event counters.
    pub fn update_events(&self, f: impl FnOnce(&mut MemcgEvents)) {
        let mut e = self.events.get();
        f(&mut e);
        self.events.set(e);
    }

    /// The PSI memory counters brought up to `now`.
    pub fn psi(&self, now: Time) -> PsiMem {
        self.psi_advance(now);
        self.psi.get()
    }

    /// Accumulates the stall time since the last change (`psi_group_change`'s
    /// `record_times`).
    fn psi_advance(&self, now: Time) {
        let mut p = self.psi.get();
        let dt = now.saturating_sub(p.last);
        if p.nr_memstall > 0 {
            p.some_ns += dt;
            if p.nr_memstall >= self.tasks.borrow().len() as u64 {
                p.full_ns += dt;
            }
        }
        p.last = now;
        self.psi.set(p);
    }

    /// `psi_memstall_enter` by a task of this memcg at `now`.
    pub fn psi_memstall_enter(&self, now: Time) {
        self.psi_advance(now);
        let mut p = self.psi.get();
        p.nr_memstall += 1;
        self.psi.set(p);
    }

    /// `psi_memstall_leave` at `now`.
    pub fn psi_memstall_leave(&self, now: Time) {
        self.psi_advance(now);
        let mut p = self.psi.get();
        p.nr_memstall = p.nr_memstall.saturating_sub(1);
        self.psi.set(p);
    }

    /// Unlinks a released cgwb.
    pub(crate) fn cgwb_list_del(&self, wb: &Wb) {
        self.cgwb_list.borrow_mut().retain(|w| w.id != wb.id);
    }

    /// Empties and shuts the cgwb list (offline); returns what was on it.
    pub(crate) fn cgwb_list_close(&self) -> Vec<Rc<Wb>> {
        self.cgwb_list_closed.set(true);
        std::mem::take(&mut *self.cgwb_list.borrow_mut())
    }
}

/// The memcg hierarchy of one machine (lives in the [`super::Mm`] handle).
pub struct MemcgTable {
    /// Every memcg still referenced, by id (online or offline).
    by_id: RefCell<BTreeMap<u64, Rc<MemCgroup>>>,
    /// The memcg of each scheduler cgroup that has one.
    by_cgroup: RefCell<BTreeMap<CgroupId, u64>>,
    /// Next id to hand out.
    next_id: Cell<u64>,
    /// `current->memcg_nr_pages_over_high` of each task that owes pages to
    /// memory.high (include/linux/sched.h): pages charged while over the
    /// limit since the task last ran `mem_cgroup_handle_over_high`.
    nr_pages_over_high: RefCell<BTreeMap<TaskId, u64>>,
    /// `memcg_stock` of each CPU: pages charged ahead to a memcg and not yet
    /// handed out, by (CPU, memcg id). One entry per memcg and CPU, as the
    /// multi-memcg per-CPU cache of 6.16+ keeps several memcgs per CPU
    /// (NR_MEMCG_STOCK slots there; unbounded here).
    stock: RefCell<BTreeMap<(usize, u64), u64>>,
}

impl MemcgTable {
    /// A hierarchy with the root memcg only (tied to the root cgroup).
    pub fn new() -> Self {
        let root = MemCgroup::alloc(ROOT_MEM_CGROUP_ID, CgroupId::ROOT, None, "/", None, None);
        MemcgTable {
            by_id: RefCell::new(BTreeMap::from([(ROOT_MEM_CGROUP_ID, root)])),
            by_cgroup: RefCell::new(BTreeMap::from([(CgroupId::ROOT, ROOT_MEM_CGROUP_ID)])),
            next_id: Cell::new(ROOT_MEM_CGROUP_ID + 1),
            nr_pages_over_high: RefCell::new(BTreeMap::new()),
            stock: RefCell::new(BTreeMap::new()),
        }
    }

    /// `consume_stock()`: takes `pages` from `cpu`'s stock of memcg `id` if
    /// it holds that many (the charge is then already counted).
    pub fn consume_stock(&self, cpu: usize, id: u64, pages: u64) -> bool {
        let mut st = self.stock.borrow_mut();
        match st.get_mut(&(cpu, id)) {
            Some(n) if *n >= pages => {
                *n -= pages;
                true
            }
            _ => false,
        }
    }

    /// `refill_stock()`: `pages` charged ahead to memcg `id` go to `cpu`'s
    /// stock.
    pub fn refill_stock(&self, cpu: usize, id: u64, pages: u64) {
        *self.stock.borrow_mut().entry((cpu, id)).or_insert(0) += pages;
    }

    /// Pages in `cpu`'s stock of memcg `id`.
    pub fn stocked_on(&self, cpu: usize, id: u64) -> u64 {
        self.stock.borrow().get(&(cpu, id)).copied().unwrap_or(0)
    }

    /// `current->memcg_nr_pages_over_high += pages` for `task`; returns the
    /// new count.
    pub fn add_nr_pages_over_high(&self, task: TaskId, pages: u64) -> u64 {
        let mut m = self.nr_pages_over_high.borrow_mut();
        let n = m.entry(task).or_insert(0);
        *n += pages;
        *n
    }

    /// `task`'s `memcg_nr_pages_over_high`, without clearing it.
    pub fn nr_pages_over_high(&self, task: TaskId) -> u64 {
        self.nr_pages_over_high
            .borrow()
            .get(&task)
            .copied()
            .unwrap_or(0)
    }

    /// Reads and clears `task`'s `memcg_nr_pages_over_high`, as
    /// `mem_cgroup_handle_over_high` does on entry.
    pub fn take_nr_pages_over_high(&self, task: TaskId) -> u64 {
        self.nr_pages_over_high
            .borrow_mut()
            .remove(&task)
            .unwrap_or(0)
    }

    /// The root memcg.
    pub fn root(&self) -> Rc<MemCgroup> {
        self.by_id.borrow()[&ROOT_MEM_CGROUP_ID].clone()
    }

    /// The memcg with `id`, while it is referenced.
    pub fn get(&self, id: u64) -> Option<Rc<MemCgroup>> {
        self.by_id.borrow().get(&id).cloned()
    }

    /// Number of memcgs still referenced (online or offline), root included.
    pub fn len(&self) -> usize {
        self.by_id.borrow().len()
    }

    /// Always false: the root memcg exists.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// `mem_cgroup_css_alloc` + `mem_cgroup_css_online` for a cgroup made by
    /// mkdir under `parent` (the root memcg when None).
    pub fn css_online(
        &self,
        cgroup: CgroupId,
        name: &str,
        parent: Option<u64>,
        memory_high: Option<u64>,
        memory_max: Option<u64>,
    ) -> Rc<MemCgroup> {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let m = MemCgroup::alloc(
            id,
            cgroup,
            Some(parent.unwrap_or(ROOT_MEM_CGROUP_ID)),
            name,
            memory_high,
            memory_max,
        );
        self.by_id.borrow_mut().insert(id, m.clone());
        self.by_cgroup.borrow_mut().insert(cgroup, id);
        m
    }

    /// `mem_cgroup_from_task`: the memcg of a task in `cgroup` (the root
    /// memcg when the cgroup has none, or its memcg is offline: a task
    /// leaves a cgroup before rmdir).
    pub fn from_cgroup(&self, cgroup: CgroupId) -> Rc<MemCgroup> {
        let id = self.by_cgroup.borrow().get(&cgroup).copied();
        id.and_then(|id| self.get(id))
            .filter(|m| m.online())
            .unwrap_or_else(|| self.root())
    }

    /// The memcg tied to `cgroup`, online or not.
    pub fn of_cgroup(&self, cgroup: CgroupId) -> Option<Rc<MemCgroup>> {
        let id = self.by_cgroup.borrow().get(&cgroup).copied()?;
        self.get(id)
    }

    /// Clears CSS_ONLINE (the cgroup side of `mem_cgroup_css_offline`); the
    /// caller kills the memcg's cgwbs. The memcg stays in the table while
    /// css references remain ([`Self::release_if_unused`]).
    pub fn css_offline(&self, memcg: &MemCgroup) {
        memcg.online.set(false);
        self.by_cgroup.borrow_mut().remove(&memcg.cgroup);
    }

    /// `mem_cgroup_css_free` once the last css reference is gone.
    pub fn release_if_unused(&self, id: u64) {
        let free = self
            .get(id)
            .is_some_and(|m| !m.online() && m.css_refs() == 0 && id != ROOT_MEM_CGROUP_ID);
        if free {
            self.by_id.borrow_mut().remove(&id);
        }
    }

    /// Every memcg still referenced, by id.
    pub fn all(&self) -> Vec<Rc<MemCgroup>> {
        self.by_id.borrow().values().cloned().collect()
    }

    /// `page_counter_uncharge` of `pages` from memcg `id` and its ancestors
    /// (the counters are hierarchical, as they are charged).
    pub fn uncharge(&self, id: u64, pages: u64) {
        let mut cur = self.get(id);
        while let Some(m) = cur {
            m.uncharge(pages);
            cur = m.parent.and_then(|p| self.get(p));
        }
    }

    /// The nearest online ancestor of `id` (itself if online; the root at
    /// worst), as `cleanup_offline_cgwb` walks `css->parent` until
    /// `css_tryget_online` succeeds.
    pub fn nearest_online(&self, id: u64) -> Rc<MemCgroup> {
        let mut cur = self.get(id);
        while let Some(m) = cur {
            if m.online() {
                return m;
            }
            cur = m.parent.and_then(|p| self.get(p));
        }
        self.root()
    }
}

impl Default for MemcgTable {
    fn default() -> Self {
        Self::new()
    }
}
