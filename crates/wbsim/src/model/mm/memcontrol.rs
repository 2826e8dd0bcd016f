//! Memory cgroups as writeback sees them (mm/memcontrol.c, and the memcg
//! side of mm/backing-dev.c).
//!
//! A memcg is tied to one of the scheduler's cgroups ([`CgroupId`]): a task's
//! memcg is the memcg of its cgroup (`mem_cgroup_from_task`), the root memcg
//! when its cgroup has none. Each has an id (`mem_cgroup_id`), a parent, an
//! online flag (cleared at rmdir: `mem_cgroup_css_offline`), a count of css
//! references that keep it alive once offline (its cgwbs hold them, as the
//! kernel's `wb->memcg_css` does), `memory.high` / `memory.max`, and the list
//! of its cgroup wbs (`memcg->cgwb_list`). Its dirty domain (the memcg
//! `wb_domain` of balance_dirty_pages, `mem_cgroup_wb_stats` +
//! `mdtc_calc_avail`) is computed by [`mem_cgroup_wb_domain_avail`].
//!
//! Left out: page charging and memcg reclaim (memory.high/max are stored and
//! bound the memcg's dirty domain, no charge is made against them), the
//! foreign-dirty slots of `mem_cgroup_track_foreign_dirty_slowpath` (the
//! per-inode foreign detection of fs/fs_writeback.rs is modelled instead),
//! memory.pressure, and swap. balance_dirty_pages does not yet consult the
//! memcg domain (it throttles on the global and per-wb ones).

use std::rc::Rc;

use crate::model::kernel::sched::CgroupId;
use crate::model::mm::backing_dev::wb_memcg_offline;
pub use crate::model::mm::memcontrol_defs::{MemCgroup, MemcgTable, ROOT_MEM_CGROUP_ID};
use crate::model::mm::state::Mm;
use crate::model::mm::vmstat::PAGE_SIZE;

/// The memcg `wb_domain`'s available memory, pages (`mdtc_calc_avail` over
/// `mem_cgroup_wb_stats`): the memcg's headroom under the lower of
/// memory.high and memory.max plus its file pages, bounded by the global
/// domain's `global_avail` pages. `file_pages` are the memcg's page-cache
/// pages (here: the dirty and writeback pages of its cgwbs), `used_pages`
/// its whole charge. None for a memcg without a limit: its domain is the
/// global one.
pub fn mem_cgroup_wb_domain_avail(
    memcg: &MemCgroup,
    file_pages: u64,
    used_pages: u64,
    global_avail: u64,
) -> Option<u64> {
    let limit = match (memcg.memory_high, memcg.memory_max) {
        (None, None) => return None,
        (Some(a), Some(b)) => a.min(b),
        (Some(a), None) | (None, Some(a)) => a,
    } / PAGE_SIZE;
    let headroom = limit.saturating_sub(used_pages);
    let clean = file_pages.min(used_pages);
    Some((headroom + clean).min(global_avail))
}

/// Dirty and writeback pages of a memcg's cgwbs (`mem_cgroup_wb_stats`'s
/// NR_FILE_DIRTY and NR_WRITEBACK, from the wbs' counters).
pub fn mem_cgroup_wb_stats(memcg: &MemCgroup) -> (u64, u64) {
    memcg.cgwb_list.borrow().iter().fold((0, 0), |(d, w), wb| {
        let s = *wb.stat.borrow();
        (d + s.reclaimable, w + s.writeback)
    })
}

/// `cgroup_mkdir` with the memory controller enabled
/// (`mem_cgroup_css_alloc` + `mem_cgroup_css_online`): the memcg of new
/// scheduler cgroup `cgroup`, a child of the root memcg.
pub fn mem_cgroup_css_online(
    mm: &Mm,
    cgroup: CgroupId,
    name: &str,
    memory_high: Option<u64>,
    memory_max: Option<u64>,
) -> Rc<MemCgroup> {
    let m = mm
        .memcgs()
        .css_online(cgroup, name, None, memory_high, memory_max);
    mm.kernel()
        .sim()
        .trace("mem_cgroup_css_online", || format!("memcg {} {name}", m.id));
    m
}

/// `cgroup_rmdir` of a cgroup with a memcg: `kill_css` kills the css's
/// percpu refcount (`percpu_ref_kill_and_confirm`, which switches it to
/// atomic mode after a grace period, `call_rcu_hurry`); the confirmation
/// runs `offline_css` -> `mem_cgroup_css_offline`, which takes the memcg
/// offline and calls `wb_memcg_offline`. Does nothing for a cgroup without
/// a memcg.
pub fn mem_cgroup_rmdir(mm: &Rc<Mm>, cgroup: CgroupId) {
    let Some(memcg) = mm.memcgs().of_cgroup(cgroup) else {
        return;
    };
    let mm2 = mm.clone();
    mm.kernel().rcu().call_rcu_hurry(move || {
        mm2.memcgs().css_offline(&memcg);
        mm2.kernel()
            .sim()
            .trace("mem_cgroup_css_offline", || format!("memcg {}", memcg.id));
        wb_memcg_offline(&mm2, &memcg);
        mm2.memcgs().release_if_unused(memcg.id);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_map_to_online_memcgs_and_offline_falls_back_to_an_ancestor() {
        let t = MemcgTable::new();
        let a = t.css_online(CgroupId(1), "a", None, None, None);
        let b = t.css_online(CgroupId(2), "a/b", Some(a.id), None, None);
        assert_eq!(t.from_cgroup(CgroupId(2)).id, b.id);
        assert_eq!(t.from_cgroup(CgroupId(9)).id, ROOT_MEM_CGROUP_ID);
        b.css_get(); // a cgwb holds it
        t.css_offline(&b);
        assert_eq!(t.from_cgroup(CgroupId(2)).id, ROOT_MEM_CGROUP_ID);
        assert_eq!(t.nearest_online(b.id).id, a.id);
        t.release_if_unused(b.id);
        assert!(t.get(b.id).is_some(), "a css reference keeps it");
        b.css_put();
        t.release_if_unused(b.id);
        assert!(t.get(b.id).is_none());
        t.css_offline(&a);
        assert_eq!(t.nearest_online(a.id).id, ROOT_MEM_CGROUP_ID);
    }

    #[test]
    fn memcg_domain_is_bounded_by_its_limit() {
        let t = MemcgTable::new();
        let m = t.css_online(CgroupId(1), "m", None, Some(1 << 30), Some(2 << 30));
        // 1 GiB high = 262144 pages; 100000 used of which 50000 file.
        assert_eq!(
            mem_cgroup_wb_domain_avail(&m, 50_000, 100_000, 10_000_000),
            Some(262_144 - 100_000 + 50_000)
        );
        assert_eq!(mem_cgroup_wb_domain_avail(&m, 0, 0, 1000), Some(1000));
        let free = t.css_online(CgroupId(2), "f", None, None, None);
        assert_eq!(mem_cgroup_wb_domain_avail(&free, 0, 0, 1000), None);
    }
}
