//! Periodic sampling, like a `vmstat 1` / `iostat -x 1` / `global_dirty_state`
//! tracepoint reader beside a real run: dirty and writeback pages, the dirty
//! thresholds, the page cache size, and each device's write throughput per
//! interval; the dirty throttling state the `balance_dirty_pages` and
//! `bdi_dirty_ratelimit` tracepoints report (each writeback context's
//! dirty_ratelimit and balanced_dirty_ratelimit, the last task_ratelimit,
//! the pauses taken in the interval: count and mean); reclaim's progress
//! (pages scanned and freed by kswapd and direct reclaim, free pages); and
//! the peaks of each running fio job's own files (dirty and cached pages of
//! the inodes it opened, read through the model's observation API) and of
//! the machine while it ran (dirty and file pages, as /proc/meminfo's
//! `Dirty` and `Cached`). Sampling is a timer
//! callback (it takes no simulated CPU). Not kernel code.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use sim::Time;

use crate::experiment::metrics::Metrics;
use crate::model::block::BlockDevice;
use crate::model::mm::vmstat::PAGE_SIZE;
use crate::workload::world::World;

/// What the sampler collected.
pub type Samples = Rc<RefCell<Metrics>>;

/// Starts sampling every `interval` ns until `until`.
pub fn start(
    world: &Rc<World>,
    devices: &BTreeMap<String, BlockDevice>,
    interval: Time,
    until: Time,
) -> Samples {
    let samples: Samples = Rc::new(RefCell::new(Metrics::new()));
    let st = Rc::new(State {
        world: world.clone(),
        devices: devices
            .iter()
            .map(|(n, d)| (n.clone(), d.clone()))
            .collect(),
        last_write_bytes: RefCell::new(devices.values().map(|d| d.stats().write_bytes).collect()),
        pauses_seen: Cell::new(0),
        samples: samples.clone(),
        interval: interval.max(1),
        until,
    });
    State::sample(&st);
    samples
}

struct State {
    world: Rc<World>,
    devices: Vec<(String, BlockDevice)>,
    last_write_bytes: RefCell<Vec<u64>>,
    /// balance_dirty_pages pauses already sampled.
    pauses_seen: Cell<usize>,
    samples: Samples,
    interval: Time,
    until: Time,
}

impl State {
    fn sample(self: &Rc<Self>) {
        let m = &self.world.m;
        let now = m.now();
        let vm = m.vm_counters();
        let (dirty, writeback, cached) = (vm.nr_file_dirty, vm.nr_writeback, vm.nr_file_pages);
        let th = m.dirty_thresholds();
        {
            let mut s = self.samples.borrow_mut();
            s.sample("dirty_pages", "pages", now, dirty as f64);
            s.sample("writeback_pages", "pages", now, writeback as f64);
            s.sample("cached_pages", "pages", now, cached as f64);
            s.sample("dirty_limit_pages", "pages", now, th.thresh as f64);
            s.sample("bg_limit_pages", "pages", now, th.bg_thresh as f64);
            s.sample("free_pages", "pages", now, vm.free_pages() as f64);
            let rs = m.reclaim_stats();
            s.sample(
                "reclaim.pgsteal_kswapd",
                "pages",
                now,
                rs.pgsteal_kswapd as f64,
            );
            s.sample(
                "reclaim.pgsteal_direct",
                "pages",
                now,
                rs.pgsteal_direct as f64,
            );
            for w in m.wb_ratelimits() {
                let p = format!("wb.{}.{}", w.sb, w.ctx);
                s.sample(
                    &format!("{p}.dirty_ratelimit"),
                    "KB/s",
                    now,
                    w.dirty_ratelimit_kbps as f64,
                );
                s.sample(
                    &format!("{p}.balanced_dirty_ratelimit"),
                    "KB/s",
                    now,
                    w.balanced_dirty_ratelimit_kbps as f64,
                );
            }
            if let Some(r) = m.bdp_task_ratelimit_kbps() {
                s.sample("bdp.task_ratelimit", "KB/s", now, r as f64);
            }
            let pauses = m.bdp_pauses_from(self.pauses_seen.get());
            self.pauses_seen.set(self.pauses_seen.get() + pauses.len());
            if now > 0 {
                s.sample("bdp.pauses", "count", now, pauses.len() as f64);
                if !pauses.is_empty() {
                    let mean = pauses.iter().map(|p| p.1 as f64).sum::<f64>() / pauses.len() as f64;
                    s.sample("bdp.pause_mean", "ms", now, mean / 1e6);
                }
            }
            // memory.current of each memcg with a limit (the ones whose
            // reclaim the workload is about).
            for mc in m.memcg_stats() {
                if mc.online && mc.limited {
                    s.sample(
                        &format!("memcg.{}.usage", mc.name),
                        "MiB",
                        now,
                        (mc.usage_pages * PAGE_SIZE) as f64 / (1u64 << 20) as f64,
                    );
                }
            }
            // Filesystem gauges (btrfs: tasks blocked per tree lock class,
            // the commit's wait chain), per filesystem by scenario name.
            for (sb, k, unit, v) in m.fs_samples() {
                let name = self
                    .world
                    .filesystems
                    .iter()
                    .find(|f| f.mountpoint == sb)
                    .map_or(sb, |f| f.name.clone());
                s.sample(&format!("fs.{name}.{k}"), unit, now, v);
            }
            if now > 0 {
                let mut last = self.last_write_bytes.borrow_mut();
                for (i, (name, d)) in self.devices.iter().enumerate() {
                    let wb = d.stats().write_bytes;
                    let rate = (wb - last[i]) as f64 * 1e9 / self.interval as f64;
                    last[i] = wb;
                    s.sample(
                        &format!("device.{name}.write_bytes_per_s"),
                        "bytes/s",
                        now,
                        rate,
                    );
                }
            }
        }
        for j in self.world.jobs.borrow_mut().iter_mut() {
            if j.running > 0 && j.start_ns.is_some_and(|t| t <= now) {
                // The job's own files' pages (a file two jobs share counts
                // for both), not the machine's.
                let (mut jd, mut jc) = (0u64, 0u64);
                for f in &j.files {
                    let p = m.inode_pages(&f.inode);
                    jd += p.dirty;
                    jc += p.cached;
                }
                j.file_pages.observe(jd, jc);
                // The machine's, as /proc/meminfo `Dirty` and `Cached`.
                j.machine_pages.observe(dirty, cached);
            }
        }
        let next = now + self.interval;
        if next <= self.until {
            let me = self.clone();
            m.sim().schedule_at(next, move || me.sample());
        }
    }
}
