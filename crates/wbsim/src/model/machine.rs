//! What the experiment layer may read of a run: the observation methods of
//! [`Machine`] (page counters, dirty thresholds, pauses, tracepoint counts,
//! invariant checks). The machine itself is declared with the VFS objects in
//! [`crate::model::fs::vfs`], the top of the model's one-way dependencies.

use std::collections::BTreeMap;

use sim::Time;

use crate::model::fs::inode::Inode;
pub use crate::model::fs::vfs::Machine;
use crate::model::mm::page_alloc::Watermarks;
use crate::model::mm::page_writeback::limits::DirtyThresholds;
use crate::model::mm::vmscan::ReclaimStats;
use crate::model::mm::vmstat::VmStat;

pub use crate::model::kernel::stats::{Violation, ViolationObjects};

/// The rate control of one writeback context now (the `bdi_dirty_ratelimit`
/// tracepoint's fields), KB/s.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WbRatelimit {
    /// The superblock's name (its mount point).
    pub sb: String,
    /// Context index.
    pub ctx: usize,
    /// `dirty_ratelimit`, KB/s.
    pub dirty_ratelimit_kbps: u64,
    /// `balanced_dirty_ratelimit`, KB/s.
    pub balanced_dirty_ratelimit_kbps: u64,
    /// `avg_write_bandwidth`, KB/s.
    pub avg_write_bandwidth_kbps: u64,
}

/// One inode's page cache (its mapping's counters), pages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InodePages {
    /// Pages in the page cache.
    pub cached: u64,
    /// Of those, dirty.
    pub dirty: u64,
    /// Of those, under writeback.
    pub writeback: u64,
}

/// What one writeback context of a mounted filesystem's bdi did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WbCtxStat {
    /// The superblock's name (its mount point).
    pub sb: String,
    /// Context index.
    pub ctx: usize,
    /// Pages its flusher wrote.
    pub pages_written: u64,
    /// CPU its flusher ran, ns.
    pub flusher_cpu_ns: Time,
}

/// One memory cgroup's charge, events and pressure now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemcgStat {
    /// cgroupfs name.
    pub name: String,
    /// Still online (not rmdir'd) at the end of the run.
    pub online: bool,
    /// memory.current, pages.
    pub usage_pages: u64,
    /// memory.events, reclaim and penalty counters.
    pub events: crate::model::mm::memcontrol::MemcgEvents,
    /// memory.pressure.
    pub psi: crate::model::mm::memcontrol::PsiMem,
    /// memory.high or memory.max is set.
    pub limited: bool,
}

impl Machine {
    // ------------------------------------------------------------ observation

    /// Filesystem counters of every superblock on the list (btrfs
    /// commit_stats): (superblock name, counter, unit, value).
    pub fn fs_stats(&self) -> Vec<(String, &'static str, &'static str, f64)> {
        let mut v = Vec::new();
        for sb in self.vfs().supers() {
            for (k, u, x) in sb.fs.stats(&sb) {
                v.push((sb.name.clone(), k, u, x));
            }
        }
        v
    }

    /// Sampled gauges of every superblock on the list (btrfs: tasks blocked
    /// per tree lock class): (superblock name, gauge, unit, value).
    pub fn fs_samples(&self) -> Vec<(String, String, &'static str, f64)> {
        let mut v = Vec::new();
        for sb in self.vfs().supers() {
            for (k, u, x) in sb.fs.samples(&sb) {
                v.push((sb.name.clone(), k, u, x));
            }
        }
        v
    }

    /// Every transaction commit of every superblock on the list: (superblock
    /// name, start, duration), ns.
    pub fn fs_commits(&self) -> Vec<(String, Time, Time)> {
        let mut v = Vec::new();
        for sb in self.vfs().supers() {
            for (t, d) in sb.fs.commit_log(&sb) {
                v.push((sb.name.clone(), t, d));
            }
        }
        v
    }

    /// Every memcg but the root, in id order.
    pub fn memcg_stats(&self) -> Vec<MemcgStat> {
        let now = self.now();
        self.mm()
            .memcgs()
            .all()
            .into_iter()
            .filter(|m| m.parent.is_some())
            .map(|m| MemcgStat {
                name: m.name.clone(),
                online: m.online(),
                usage_pages: m.usage_pages(),
                events: m.events(),
                psi: m.psi(now),
                limited: m.memory_high.is_some() || m.memory_max.is_some(),
            })
            .collect()
    }

    /// Per writeback context of every superblock still on the list with
    /// writeback: pages written and flusher CPU.
    pub fn wb_ctx_stats(&self) -> Vec<WbCtxStat> {
        let mut out = Vec::new();
        for sb in self.vfs().supers() {
            if !sb.bdi.can_writeback {
                continue;
            }
            for wb in &sb.bdi.wbs {
                out.push(WbCtxStat {
                    sb: sb.name.clone(),
                    ctx: wb.ctx,
                    pages_written: wb.pages_written_total.get(),
                    flusher_cpu_ns: wb.flusher_cpu_ns.get()
                        + wb.flusher_running.get().map_or(0, |(t, c0)| {
                            self.sched().task_stats(t).run_ns.saturating_sub(c0)
                        }),
                });
            }
        }
        out
    }

    /// The machine's page counters now (`/proc/vmstat`'s file-page part).
    pub fn vm_counters(&self) -> VmStat {
        self.mm().vm().clone()
    }

    /// The global dirty thresholds now (the `global_dirty_state` tracepoint's
    /// `thresh` and `bg_thresh`).
    pub fn dirty_thresholds(&self) -> DirtyThresholds {
        self.mm().global_thresholds()
    }

    /// Every balance_dirty_pages pause so far, ns.
    pub fn bdp_pauses(&self) -> Vec<Time> {
        self.mm().pauses()
    }

    /// The balance_dirty_pages pauses from the `from`-th on: (start, length),
    /// ns.
    pub fn bdp_pauses_from(&self, from: usize) -> Vec<(Time, Time)> {
        self.mm().pauses_from(from)
    }

    /// The task_ratelimit of the last balance_dirty_pages call that computed
    /// one (the tracepoint's field), KB/s.
    pub fn bdp_task_ratelimit_kbps(&self) -> Option<u64> {
        self.mm()
            .last_task_ratelimit()
            .map(|r| r * (crate::model::mm::vmstat::PAGE_SIZE / 1024))
    }

    /// Rate control of every writeback context of every superblock with
    /// writeback, in superblock then context order.
    pub fn wb_ratelimits(&self) -> Vec<WbRatelimit> {
        let kb = crate::model::mm::vmstat::PAGE_SIZE / 1024;
        let mut out = Vec::new();
        for sb in self.vfs().supers() {
            if !sb.bdi.can_writeback {
                continue;
            }
            for wb in &sb.bdi.wbs {
                let bw = wb.bw.borrow();
                out.push(WbRatelimit {
                    sb: sb.name.clone(),
                    ctx: wb.ctx,
                    dirty_ratelimit_kbps: bw.dirty_ratelimit * kb,
                    balanced_dirty_ratelimit_kbps: bw.balanced_dirty_ratelimit * kb,
                    avg_write_bandwidth_kbps: bw.avg_write_bandwidth * kb,
                });
            }
        }
        out
    }

    /// Reclaim counters so far (`/proc/vmstat`'s pgscan, pgsteal,
    /// allocstall, pageoutrun; reclaim_throttle sleeps).
    pub fn reclaim_stats(&self) -> ReclaimStats {
        self.mm().pgdat().stats()
    }

    /// The zone watermarks in force (`/proc/zoneinfo` min, low, high), pages.
    pub fn watermarks(&self) -> Watermarks {
        self.mm().pgdat().watermarks()
    }

    /// Time of every `cgroup_writeback_umount` call so far, ns, with the
    /// name of the superblock unmounted.
    pub fn cgwb_umount_drains(&self) -> Vec<(String, Time)> {
        self.vfs().isw_drain_times()
    }

    /// Every `cgroup_writeback_umount` call so far, with what it waited for.
    pub fn cgwb_umount_drain_records(&self) -> Vec<crate::model::fs::vfs::IswDrainRecord> {
        self.vfs().isw_drains()
    }

    /// Every superblock shutdown phase so far: (superblock name, phase, ns);
    /// the phases are `sync_filesystem` (with the dcache shrink),
    /// `cgroup_writeback_umount`, `evict_inodes` and `put_super`.
    pub fn shutdown_phases(&self) -> Vec<(String, &'static str, Time)> {
        self.vfs().shutdown_phases()
    }

    /// Inodes switched between wbs so far.
    pub fn cgwb_switched_inodes(&self) -> u64 {
        self.vfs().isw_switched()
    }

    /// RCU counters so far.
    pub fn rcu_stats(&self) -> crate::model::kernel::rcu::RcuStats {
        self.rcu().stats()
    }

    /// Model tracepoint counts so far, by name.
    pub fn events(&self) -> BTreeMap<&'static str, u64> {
        self.kernel().stats().events()
    }

    /// The tracepoint counts so far about `inode` (those that name an
    /// inode: `xfs_unwritten_convert`, `xfs_bmapi_convert_delalloc`,
    /// `folio_lock_wait`), by name.
    pub fn inode_events(&self, inode: &Inode) -> BTreeMap<&'static str, u64> {
        self.kernel().stats().inode_events((inode.sb_id, inode.ino))
    }

    /// `inode`'s page cache now: pages cached, dirty and under writeback.
    pub fn inode_pages(&self, inode: &Inode) -> InodePages {
        let map = inode.mapping.borrow();
        InodePages {
            cached: map.nrpages(),
            dirty: map.nr_dirty(),
            writeback: map.nr_writeback(),
        }
    }

    /// Copies the tracepoint counts into `out`.
    pub fn events_into(&self, out: &mut BTreeMap<&'static str, u64>) {
        self.kernel().stats().events_into(out);
    }

    /// Invariant violations noticed so far, by model code and by the page
    /// counters (those of `VmStat::apply`, which has no clock, carry the
    /// time of this call).
    pub fn violations(&self) -> Vec<Violation> {
        let now = self.now();
        let mut v: Vec<Violation> = self
            .mm()
            .vm()
            .violations
            .iter()
            .map(|msg| Violation {
                invariant: "no_negative_counter".to_string(),
                time_ns: now,
                objects: ViolationObjects::default(),
                message: msg.clone(),
            })
            .collect();
        v.extend(self.kernel().stats().violations());
        v
    }

    /// Page conservation: every mapping's ranges agree with its counters, and
    /// the machine's counters equal the sum over mappings. Returns the number
    /// of checks made and the violations found.
    pub fn check_page_conservation(&self) -> (u64, Vec<Violation>) {
        let now = self.now();
        let violation = |objects: ViolationObjects, message: String| Violation {
            invariant: "page_conservation".to_string(),
            time_ns: now,
            objects,
            message,
        };
        let mut checked = 0;
        let mut bad = Vec::new();
        let (mut cached, mut dirty, mut wb) = (0u64, 0u64, 0u64);
        for sb in self.vfs().supers() {
            if !sb.bdi.can_writeback {
                continue;
            }
            for inode in sb.inodes.borrow().values() {
                let map = inode.mapping.borrow();
                checked += 1;
                if let Err(e) = map.check() {
                    bad.push(violation(
                        ViolationObjects {
                            superblock: Some(sb.id),
                            superblock_name: Some(sb.name.clone()),
                            fs_type: Some(sb.fs.name().to_string()),
                            inodes: vec![inode.ino],
                            ..ViolationObjects::default()
                        },
                        format!("{} inode {}: {e} (end of run)", sb.name, inode.ino),
                    ));
                }
                cached += map.nrpages();
                dirty += map.nr_dirty();
                wb += map.nr_writeback();
            }
            let (c, d, w) = sb.fs.internal_pages(&sb);
            cached += c;
            dirty += d;
            wb += w;
        }
        let vm = self.mm().vm();
        checked += 1;
        if (vm.nr_file_pages, vm.nr_file_dirty, vm.nr_writeback) != (cached, dirty, wb) {
            bad.push(violation(
                ViolationObjects::default(),
                format!(
                    "page conservation: NR_FILE_PAGES/NR_FILE_DIRTY/NR_WRITEBACK {}/{}/{} but mappings hold {cached}/{dirty}/{wb} (end of run)",
                    vm.nr_file_pages, vm.nr_file_dirty, vm.nr_writeback
                ),
            ));
        }
        (checked, bad)
    }
}
