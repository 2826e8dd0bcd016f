//! Registering, waking and taking down backing devices (mm/backing-dev.c,
//! and the flusher wakeups of fs/fs-writeback.c that mm/ calls):
//! `bdi_register` + `wb_init`, `wb_wakeup`, `wb_wakeup_delayed`,
//! `wb_start_background_writeback`, `wb_shutdown`, `bdi_unregister`. The types
//! are in [`super::backing_dev_defs`] and re-exported here.
//!
//! A bdi holds `nr_wb_ctx` writeback contexts (the parallel-writeback
//! series' `bdi_writeback_ctx`; 1 context is the mainline layout), each with a
//! root wb whose flusher is a delayed work item on `bdi_wq`; the work function
//! is the filesystem layer's `wb_workfn`, passed in at registration.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::rc::{Rc, Weak};

use crate::model::kernel::locking::RwSemaphore;
use crate::model::kernel::workqueue::{
    cancel_delayed_work, flush_delayed_work, mod_delayed_work, queue_delayed_work, queue_work,
    DelayedWork,
};
use crate::model::mm::memcontrol_defs::{MemCgroup, ROOT_MEM_CGROUP_ID};
use crate::model::mm::page_writeback::limits::{BdiDirtyConfig, BDI_RATIO_SCALE};
use crate::model::mm::state::Mm;
use crate::model::mm::vmstat::PAGE_SIZE;

pub use super::backing_dev_defs::*;

// ------------------------------------------------------------- registration

/// `bdi_register` + `wb_init`: a bdi with `nr_wb_ctx` writeback contexts, each
/// with a root wb whose flusher is a delayed work on `bdi_wq` running
/// `workfn` (the filesystem layer's `wb_workfn`).
pub fn bdi_register<F, Fut>(
    mm: &Mm,
    name: &str,
    can_writeback: bool,
    settings: BdiSettings,
    nr_wb_ctx: usize,
    workfn: F,
) -> Rc<Bdi>
where
    F: Fn(Rc<Wb>) -> Fut + Clone + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let k = mm.kernel();
    let id = k.new_id();
    let n = nr_wb_ctx.max(1);
    let workfn: WbWorkFn = Rc::new(move |wb| Box::pin(workfn(wb)));
    let mut wbs = Vec::with_capacity(n);
    for ctx in 0..n {
        let wname = if n == 1 {
            format!("flush-{name}")
        } else {
            format!("flush-{name}-{ctx}")
        };
        let wb = new_wb(mm, &workfn, wname, ctx);
        wb.bdi_id.set(id);
        if settings.start_dirty_ratelimit > 0 {
            let mut bw = wb.bw.borrow_mut();
            bw.dirty_ratelimit = settings.start_dirty_ratelimit;
            bw.balanced_dirty_ratelimit = settings.start_dirty_ratelimit;
        }
        wbs.push(wb);
    }
    let dirty_cfg = bdi_dirty_config(mm, &settings);
    let bdi = Rc::new(Bdi {
        id,
        name: name.to_string(),
        can_writeback,
        settings: Cell::new(settings),
        wbs,
        dirty_cfg: Cell::new(dirty_cfg),
        tot_write_bandwidth: std::cell::Cell::new(0),
        cgwb_tree: RefCell::new(BTreeMap::new()),
        cgwb_list: RefCell::new(BTreeMap::new()),
        wb_switch_rwsem: RwSemaphore::new(k.locks().class("wb_switch_rwsem"), k.sched()),
        workfn,
        last_bdp_sleep: Rc::new(std::cell::Cell::new(None)),
        ra_pages: std::cell::Cell::new(crate::model::mm::readahead::VM_READAHEAD_PAGES),
    });
    mm.bdi_list_add(bdi.clone());
    bdi
}

/// `wb_init`: a wb whose flusher is a delayed work on `bdi_wq` running `workfn`.
fn new_wb(mm: &Mm, workfn: &WbWorkFn, wname: String, ctx: usize) -> Rc<Wb> {
    let k = mm.kernel();
    let wb = Rc::new(Wb::new(k.new_id(), wname.clone(), ctx, k.now()));
    let wwb: Weak<Wb> = Rc::downgrade(&wb);
    let workfn = workfn.clone();
    let dwork = DelayedWork::new(&wname, move || {
        let (wwb, workfn) = (wwb.clone(), workfn.clone());
        async move {
            if let Some(wb) = wwb.upgrade() {
                workfn(wb).await;
            }
        }
    });
    let _ = wb.dwork.set(dwork);
    wb
}

/// A write to the bdi's sysfs knobs (`strict_limit_store`, `max_bytes_store`,
/// `min_ratio_store`, `max_ratio_store` in mm/backing-dev.c): `update`
/// changes the settings, and the throttling configuration is recomputed
/// from them (`max_bytes` against the global threshold of this moment, as
/// `bdi_set_max_bytes` converts it).
/// Returns what `update` returns.
pub fn bdi_update_settings<R>(mm: &Mm, bdi: &Bdi, update: impl FnOnce(&mut BdiSettings) -> R) -> R {
    let mut s = bdi.settings.get();
    let r = update(&mut s);
    bdi.settings.set(s);
    bdi.dirty_cfg.set(bdi_dirty_config(mm, &s));
    r
}

/// The bdi's throttling configuration from its sysfs-like settings; `max_bytes`
/// becomes a max_ratio of the current global threshold, as `bdi_set_max_bytes`
/// does: `bdi_ratio_from_pages`, in 1/BDI_RATIO_SCALE percent, rounded down
/// (64 MiB against a 4.56 GiB threshold is 1.3709%, not a whole percent).
fn bdi_dirty_config(mm: &Mm, s: &BdiSettings) -> BdiDirtyConfig {
    let mut c = BdiDirtyConfig {
        strictlimit: s.strict_limit,
        ..Default::default()
    };
    let mut max = if s.max_ratio == 0 {
        100
    } else {
        s.max_ratio as u64
    } * BDI_RATIO_SCALE;
    if s.max_bytes > 0 {
        let pages = s.max_bytes / PAGE_SIZE;
        let thresh = mm.global_thresholds().thresh.max(1);
        let ratio = (u128::from(pages) * 100 * u128::from(BDI_RATIO_SCALE) / u128::from(thresh))
            .min(u128::from(100 * BDI_RATIO_SCALE)) as u64;
        max = max.min(ratio);
    }
    // Settings were validated by the scenario; out-of-range values keep the
    // defaults rather than panic.
    let _ = c.set_max_ratio_no_scale(max);
    let _ = c.set_min_ratio(s.min_ratio as u64);
    c
}

// ------------------------------------------------------------- waking the flusher

/// `wb_wakeup`: run the flusher now.
pub fn wb_wakeup(mm: &Mm, wb: &Rc<Wb>) {
    if wb.registered.get() {
        if let Some(dw) = wb.dwork.get() {
            mod_delayed_work(mm.bdi_wq(), dw, 0);
        }
    }
}

/// `wb_queue_work` (fs/fs-writeback.c): queues `work` on `wb`'s list and
/// wakes its flusher; a wb no longer registered drops it (its completion,
/// if any, is not counted).
pub fn wb_queue_work(mm: &Mm, wb: &Rc<Wb>, work: Rc<WbWork>) {
    mm.kernel().sim().trace("writeback_queue", || {
        format!(
            "bdi {}: sb_dev {} nr_pages={} sync_mode={} reason={}",
            wb.name,
            work.sb.unwrap_or(0),
            work.nr_pages.get(),
            (work.sync_mode == SyncMode::All) as u8,
            work.reason.name()
        )
    });
    if !wb.registered.get() {
        return;
    }
    if let Some(d) = &work.done {
        d.cnt.set(d.cnt.get() + 1);
    }
    wb.work_list.borrow_mut().push_back(work);
    wb_wakeup(mm, wb);
}

/// `wb_wakeup_delayed`: run the flusher after dirty_writeback_interval unless
/// it is already armed (queue_delayed_work never shortens a pending timer).
pub fn wb_wakeup_delayed(mm: &Mm, wb: &Rc<Wb>) {
    let interval = mm.dirty_params().dirty_writeback_interval_ns();
    if wb.registered.get() {
        if let Some(dw) = wb.dwork.get() {
            queue_delayed_work(mm.bdi_wq(), dw, interval);
        }
    }
}

/// `wb_start_background_writeback`.
pub fn wb_start_background_writeback(mm: &Mm, wb: &Rc<Wb>) {
    mm.kernel()
        .sim()
        .trace("writeback_wake_background", || format!("bdi {}", wb.name));
    wb_wakeup(mm, wb);
}

// ------------------------------------------------------------- unregistering

/// `wb_shutdown`: clears WB_registered (no new work is queued), then runs the
/// flusher once more at once and waits for it, so its work list drains.
pub async fn wb_shutdown(mm: &Mm, wb: &Rc<Wb>) {
    if !wb.registered.replace(false) {
        return;
    }
    if let Some(dwork) = wb.dwork.get() {
        mod_delayed_work(mm.bdi_wq(), dwork, 0);
        flush_delayed_work(dwork).await;
    }
}

/// `bdi_unregister` of a per-superblock bdi (SB_I_PERSB_BDI, btrfs):
/// `bdi_remove_from_list` (off `bdi_list`, then `synchronize_rcu_expedited`
/// so RCU walkers of the list are done with it), then `wb_shutdown` of every
/// writeback context's wb.
pub async fn bdi_unregister(mm: &Mm, bdi: &Rc<Bdi>) {
    mm.bdi_list_del(bdi);
    mm.kernel().rcu().synchronize_rcu_expedited().await;
    for wb in &bdi.wbs {
        wb_shutdown(mm, wb).await;
    }
}

/// Drops a superblock's bdi that the kernel would keep (the disk's bdi, or
/// `noop_backing_dev_info` for tmpfs): the model gives each superblock its own
/// bdi, so at umount it leaves the bdi list and its flushers are disarmed, at
/// no cost (the kernel does none of this work at umount).
pub fn bdi_drop(mm: &Mm, bdi: &Rc<Bdi>) {
    mm.bdi_list_del(bdi);
    for wb in &bdi.wbs {
        wb.registered.set(false);
        if let Some(dwork) = wb.dwork.get() {
            cancel_delayed_work(dwork);
        }
    }
}

// ------------------------------------------------------------- cgroup wbs

/// `wb_get_create`: the wb of `memcg` on writeback context `ctx` of `bdi`,
/// created on first use (`cgwb_create`: a new wb with its own flusher,
/// holding a css reference on the memcg, on the bdi's cgwb tree and the
/// memcg's cgwb list). The root memcg's wb is the context's root wb. A
/// memcg whose list is shut (offline) gets its nearest online ancestor's.
pub fn wb_get_create(mm: &Mm, bdi: &Rc<Bdi>, ctx: usize, memcg: &Rc<MemCgroup>) -> Rc<Wb> {
    let ctx = ctx.min(bdi.wbs.len() - 1);
    let memcg = if memcg.online() {
        memcg.clone()
    } else {
        mm.memcgs().nearest_online(memcg.id)
    };
    if memcg.id == ROOT_MEM_CGROUP_ID || !bdi.can_writeback {
        return bdi.wbs[ctx].clone();
    }
    if let Some(wb) = bdi.cgwb_tree.borrow().get(&(ctx, memcg.id)) {
        return wb.clone();
    }
    let root = &bdi.wbs[ctx];
    let wb = new_wb(
        mm,
        &bdi.workfn,
        format!("{}:memcg{}", root.name, memcg.id),
        ctx,
    );
    wb.bdi_id.set(bdi.id);
    wb.memcg_id.set(memcg.id);
    if !memcg.cgwb_list_add(wb.clone()) {
        return root.clone();
    }
    memcg.css_get();
    bdi.cgwb_tree
        .borrow_mut()
        .insert((ctx, memcg.id), wb.clone());
    bdi.cgwb_list.borrow_mut().insert(wb.id, wb.clone());
    mm.kernel().sim().trace("cgwb_create", || {
        format!("bdi {}: wb {} memcg {}", bdi.name, wb.name, memcg.id)
    });
    wb
}

/// `wb_get`: one more reference (an inode bound to it, a switch in flight).
pub fn wb_get(wb: &Wb) {
    wb.refcnt.set(wb.refcnt.get() + 1);
}

/// `wb_put`: drops a reference; a killed cgwb with none left and no inode
/// on its lists is released (`cgwb_release`).
pub fn wb_put(mm: &Mm, wb: &Rc<Wb>) {
    wb.refcnt.set(wb.refcnt.get().saturating_sub(1));
    if wb.killed.get() && wb.refcnt.get() == 0 {
        cgwb_release(mm, wb);
    }
}

/// `cgwb_release_workfn`: the last reference to a killed cgwb is gone: its
/// flusher stops, it leaves the bdi's wb list and `offline_cgwbs`, and its
/// css reference on the memcg is dropped (freeing an offline memcg).
fn cgwb_release(mm: &Mm, wb: &Rc<Wb>) {
    {
        let l = wb.lists.borrow();
        if l.has_dirty_io() || !l.b_attached.is_empty() || !l.b_dirty_time.is_empty() {
            return;
        }
    }
    wb.registered.set(false);
    if let Some(dw) = wb.dwork.get() {
        cancel_delayed_work(dw);
    }
    if let Some(bdi) = mm.bdis().iter().find(|b| b.id == wb.bdi_id.get()) {
        bdi.cgwb_list.borrow_mut().remove(&wb.id);
    }
    mm.offline_cgwbs_del(wb);
    let id = wb.memcg_id.get();
    if let Some(memcg) = mm.memcgs().get(id) {
        memcg.cgwb_list_del(wb);
        memcg.css_put();
        mm.memcgs().release_if_unused(id);
    }
}

/// `cgwb_kill`: off the bdi's cgwb tree (no new inode binds to it), onto
/// `offline_cgwbs` for the cleanup work.
fn cgwb_kill(mm: &Mm, wb: &Rc<Wb>) {
    if wb.killed.replace(true) {
        return;
    }
    if let Some(bdi) = mm.bdis().iter().find(|b| b.id == wb.bdi_id.get()) {
        bdi.cgwb_tree
            .borrow_mut()
            .remove(&(wb.ctx, wb.memcg_id.get()));
    }
    mm.offline_cgwbs_add(wb.clone());
}

/// `wb_memcg_offline` (from `mem_cgroup_css_offline`): kills every cgwb of
/// the memcg, shuts its cgwb list, and queues `cleanup_offline_cgwbs_work`
/// on `system_unbound_wq`.
pub fn wb_memcg_offline(mm: &Mm, memcg: &Rc<MemCgroup>) {
    for wb in memcg.cgwb_list_close() {
        // Back on the list until released, so the release can find it.
        cgwb_kill(mm, &wb);
        if wb.refcnt.get() == 0 {
            cgwb_release(mm, &wb);
        }
    }
    if let Some(w) = mm.cgwb_cleanup_work() {
        queue_work(mm.kernel().system_unbound_wq(), w);
    }
}

/// `cleanup_offline_cgwbs_workfn`: for every killed cgwb with no dirty I/O,
/// `cleanup` (fs/'s `cleanup_offline_cgwb`) switches its attached inodes to
/// the nearest live ancestor's wb a batch at a time until it says none are
/// left; cgwbs still dirty stay on the list for the next offline.
pub async fn cleanup_offline_cgwbs_workfn<F, Fut>(mm: &Mm, cleanup: F)
where
    F: Fn(Rc<Wb>) -> Fut,
    Fut: Future<Output = bool>,
{
    for wb in mm.offline_cgwbs() {
        if wb.has_dirty_io() || !wb.killed.get() {
            continue;
        }
        wb_get(&wb); // wb_tryget
        while cleanup(wb.clone()).await {
            // cond_resched()
        }
        wb_put(mm, &wb);
    }
}
