//! After a run: turn what the workload recorded, what the sampler saw and
//! the model's own counters into the results document, and check the end-of-run
//! invariants (page conservation per mapping and machine-wide, no negative or
//! leaked counters, violations the model noticed). Not kernel code.
//!
//! Metric names:
//! - `fio.JOB.write_bw` / `fio.JOB.read_bw` (MiB/s), `fio.JOB.write_iops`,
//!   `fio.JOB.clat` (completion latency of the job's writes, or reads for a
//!   read-only job, us), `fio.JOB.read_clat` / `fio.JOB.write_clat` for mixed
//!   jobs, `fio.JOB.sync_lat` (us), `fio.JOB.peak_dirty` /
//!   `fio.JOB.peak_cached` (MiB), `fio.JOB.dirty_growth` /
//!   `fio.JOB.cache_growth` (peak minus the value when the job started, MiB),
//!   all of the job's own files (the inodes it opened), not the machine's;
//! - `write.bw` / `read.bw`: all jobs together over the span they ran (MiB/s);
//! - `dirty_pages`, `writeback_pages`, `cached_pages`, `dirty_limit_pages`,
//!   `bg_limit_pages` (sampled), `device.DEV.write_bytes_per_s` (sampled) and
//!   `device.DEV.write_bw` over the run (MiB/s), `device.DEV.util` (percent);
//! - actor steps with `record = NAME`: NAME (ms); errno outcomes as counters
//!   `NAME.EBUSY`, `umount.EBUSY`...;
//! - `bdp.pause` (ms): every balance_dirty_pages pause; `rcu.gp` counts;
//! - `fio.JOB.trace.EVENT` (events): the tracepoints that name an inode
//!   (`xfs_unwritten_convert`, `xfs_bmapi_convert_delalloc`,
//!   `folio_lock_wait`) counted on the job's own files over the run;
//!   `trace.EVENT` (events): every model tracepoint, machine-wide, once;
//! - `lock.CLASS.KIND.{acquisitions,contentions,wait_total,hold_total}`
//!   (count, ms): lock_stat of the whole run per lock class, KIND read/write.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::experiment::metrics::Metrics;
use crate::experiment::results::{Host, Invariants, Results};
use crate::experiment::scenario::{ResolvedVariant, Scenario};
use crate::model::block::BlockDevice;
use crate::model::mm::vmstat::PAGE_SIZE;
use crate::workload::fio::output::{FioDdirStats, FioJobOutput, FioLatStats, FioSyncStats};
use crate::workload::world::World;

use super::sampler::Samples;

const MIB: f64 = 1_048_576.0;

/// Builds the results of a finished run.
pub fn results(
    scenario: &Scenario,
    variant: &ResolvedVariant,
    seed: u64,
    world: &World,
    devices: &BTreeMap<String, BlockDevice>,
    samples: &Samples,
    wall: Instant,
) -> Results {
    let m = &world.m;
    let now = m.now();
    let mut metrics = std::mem::take(&mut *samples.borrow_mut());
    for (name, unit, v) in world.records.borrow().iter() {
        metrics.record_as(name, unit, "ms", *v);
    }
    for (name, n) in world.counters.borrow().iter() {
        metrics.add(name, "count", *n);
    }
    let jobs = job_outputs(world, &mut metrics, now);
    // Every model tracepoint once, machine-wide (those no inode names, e.g.
    // mm_vmscan_throttled, cannot be given to a job).
    for (name, n) in m.events() {
        metrics.add(&format!("trace.{name}"), "events", n);
    }
    for p in m.bdp_pauses() {
        metrics.record_as("bdp.pause", "ns", "ms", p);
    }
    cgwb_and_rcu(m, &mut metrics);
    for (name, d) in devices {
        let st = d.stats();
        if now > 0 {
            metrics.set(
                &format!("device.{name}.write_bw"),
                "MiB/s",
                st.write_bytes as f64 / MIB / (now as f64 / 1e9),
            );
            metrics.set(
                &format!("device.{name}.util"),
                "percent",
                100.0 * st.busy_ns as f64 / now as f64,
            );
        }
    }
    lock_stat(m, &mut metrics);
    wb_contexts(world, &mut metrics);
    metrics.set("run.simulated_time", "s", now as f64 / 1e9);
    let invariants = check_invariants(world);
    let host = Host {
        wall_time_s: wall.elapsed().as_secs_f64(),
        date: String::new(),
        version: env!("CARGO_PKG_VERSION").to_string(),
    };
    let mut r = Results::new(scenario, variant, seed, &metrics, jobs, invariants, host);
    // Jobs whose clones were still running when the run ended: cut off by
    // the scenario's duration before their size (or runtime) was done.
    r.unfinished_jobs = world
        .jobs
        .borrow()
        .iter()
        .filter(|j| j.running > 0)
        .map(|j| j.name.clone())
        .collect();
    r
}

/// Cgroup writeback and RCU: `cgwb.umount_drain` (ms), the time of every
/// `cgroup_writeback_umount` call, and `cgwb.umount_drain.FS` per
/// filesystem (its superblock name); `cgwb.switched_inodes` (count);
/// `rcu.gps`, `rcu.synchronize_calls` (count) and `rcu.gp_mean` (ms), the
/// mean normal grace period.
fn cgwb_and_rcu(m: &crate::model::machine::Machine, metrics: &mut Metrics) {
    let drains = m.cgwb_umount_drains();
    for (sb, ns) in &drains {
        metrics.record_as("cgwb.umount_drain", "ns", "ms", *ns);
        metrics.record_as(&format!("cgwb.umount_drain.{sb}"), "ns", "ms", *ns);
    }
    if !drains.is_empty() {
        metrics.add("cgwb.switched_inodes", "count", m.cgwb_switched_inodes());
    }
    let r = m.rcu_stats();
    metrics.add("rcu.gps", "count", r.gps);
    metrics.add("rcu.synchronize_calls", "count", r.synchronize_calls);
    if r.gps > 0 {
        metrics.set(
            "rcu.gp_mean",
            "ms",
            r.gp_total_ns as f64 / r.gps as f64 / 1e6,
        );
    }
}

/// What each writeback context did (E4), for runs that choose `nr_wb_ctx`:
/// per filesystem FS (its scenario name) `wb.FS.ctxN.pages_written` and
/// `wb.FS.ctxN.flusher_cpu` (ms), and `wb.FS.ctx_active`, the contexts
/// whose flusher wrote anything.
fn wb_contexts(world: &World, metrics: &mut Metrics) {
    let m = &world.m;
    if m.policies().nr_wb_ctx.is_none() {
        return;
    }
    let mut active: BTreeMap<String, u64> = BTreeMap::new();
    for s in m.wb_ctx_stats() {
        let Some(fs) = world.filesystems.iter().find(|f| f.mountpoint == s.sb) else {
            continue;
        };
        let p = format!("wb.{}.ctx{}", fs.name, s.ctx);
        metrics.set(
            &format!("{p}.pages_written"),
            "count",
            s.pages_written as f64,
        );
        metrics.set(
            &format!("{p}.flusher_cpu"),
            "ms",
            s.flusher_cpu_ns as f64 / 1e6,
        );
        *active.entry(fs.name.clone()).or_insert(0) += u64::from(s.pages_written > 0);
    }
    for (fs, n) in active {
        metrics.set(&format!("wb.{fs}.ctx_active"), "count", n as f64);
    }
}

/// `/proc/lock_stat` of the run: per lock class and kind acquired at least
/// once, the contentions and the total wait and hold times.
fn lock_stat(m: &crate::model::machine::Machine, metrics: &mut Metrics) {
    for class in m.locks().classes() {
        let Some(st) = m.locks().get(&class) else {
            continue;
        };
        for (kind, t) in [("read", &st.read), ("write", &st.write)] {
            if t.acquisitions == 0 {
                continue;
            }
            let p = format!("lock.{class}.{kind}");
            metrics.set(&format!("{p}.acquisitions"), "count", t.acquisitions as f64);
            metrics.set(&format!("{p}.contentions"), "count", t.contentions as f64);
            metrics.set(
                &format!("{p}.wait_total"),
                "ms",
                t.wait_total_ns as f64 / 1e6,
            );
            metrics.set(
                &format!("{p}.hold_total"),
                "ms",
                t.hold_total_ns as f64 / 1e6,
            );
        }
    }
}

/// fio-shaped job entries, and the per-job and aggregate metrics.
fn job_outputs(world: &World, metrics: &mut Metrics, now: u64) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    let (mut first, mut last) = (u64::MAX, 0u64);
    let (mut rbytes, mut wbytes) = (0u64, 0u64);
    for j in world.jobs.borrow().iter() {
        let start = j.start_ns.unwrap_or(now).min(now);
        let end = j.end_ns.unwrap_or(now).max(start);
        let runtime = end - start;
        first = first.min(start);
        last = last.max(end);
        rbytes += j.read_bytes;
        wbytes += j.write_bytes;
        let mut o = FioJobOutput::new(&j.name, j.groupid, runtime);
        o.error = i32::from(j.error.is_some());
        o.read = FioDdirStats::from_latencies(
            j.read_bytes,
            j.read_ios,
            runtime,
            &j.read_clat,
            Some(&j.read_lat),
        );
        o.read.slat_ns = FioLatStats::from_histogram(&j.read_slat);
        o.write = FioDdirStats::from_latencies(
            j.write_bytes,
            j.write_ios,
            runtime,
            &j.write_clat,
            Some(&j.write_lat),
        );
        o.write.slat_ns = FioLatStats::from_histogram(&j.write_slat);
        o.sync = FioSyncStats::from_histogram(&j.sync_lat);
        out.push(serde_json::to_value(&o).unwrap_or(serde_json::Value::Null));

        let secs = runtime as f64 / 1e9;
        let p = format!("fio.{}", j.name);
        if secs > 0.0 {
            if j.write_ios > 0 {
                metrics.set(
                    &format!("{p}.write_bw"),
                    "MiB/s",
                    j.write_bytes as f64 / MIB / secs,
                );
                metrics.set(
                    &format!("{p}.write_iops"),
                    "IO/s",
                    j.write_ios as f64 / secs,
                );
            }
            if j.read_ios > 0 {
                metrics.set(
                    &format!("{p}.read_bw"),
                    "MiB/s",
                    j.read_bytes as f64 / MIB / secs,
                );
                metrics.set(&format!("{p}.read_iops"), "IO/s", j.read_ios as f64 / secs);
            }
        }
        let main = if j.write_ios > 0 {
            &j.write_clat
        } else {
            &j.read_clat
        };
        metrics.record_histogram(&format!("{p}.clat"), "ns", "us", main);
        let (slat, lat) = if j.write_ios > 0 {
            (&j.write_slat, &j.write_lat)
        } else {
            (&j.read_slat, &j.read_lat)
        };
        if !slat.is_empty() {
            metrics.record_histogram(&format!("{p}.slat"), "ns", "us", slat);
        }
        metrics.record_histogram(&format!("{p}.lat"), "ns", "us", lat);
        if j.write_ios > 0 && j.read_ios > 0 {
            metrics.record_histogram(&format!("{p}.write_clat"), "ns", "us", &j.write_clat);
            metrics.record_histogram(&format!("{p}.read_clat"), "ns", "us", &j.read_clat);
        }
        if !j.sync_lat.is_empty() {
            metrics.record_histogram(&format!("{p}.sync_lat"), "ns", "us", &j.sync_lat);
        }
        metrics.set(
            &format!("{p}.peak_dirty"),
            "MiB",
            (j.peak_dirty_pages * PAGE_SIZE) as f64 / MIB,
        );
        metrics.set(
            &format!("{p}.peak_cached"),
            "MiB",
            (j.peak_cached_pages * PAGE_SIZE) as f64 / MIB,
        );
        let growth = |peak: u64, start: Option<u64>| {
            (peak.saturating_sub(start.unwrap_or(peak)) * PAGE_SIZE) as f64 / MIB
        };
        metrics.set(
            &format!("{p}.dirty_growth"),
            "MiB",
            growth(j.peak_dirty_pages, j.start_dirty_pages),
        );
        metrics.set(
            &format!("{p}.cache_growth"),
            "MiB",
            growth(j.peak_cached_pages, j.start_cached_pages),
        );
        // Tracepoints about the job's own files, over the whole run (the
        // writeback of its data may come after it ends).
        let mut per_job: BTreeMap<&'static str, u64> = BTreeMap::new();
        for f in &j.files {
            for (name, n) in world.m.inode_events(&f.inode) {
                *per_job.entry(name).or_insert(0) += n;
            }
        }
        for (name, n) in per_job {
            metrics.add(&format!("{p}.trace.{name}"), "events", n);
        }
        if let Some(e) = &j.error {
            metrics.add(&format!("{p}.{e}"), "count", 1);
        }
    }
    if last > first {
        let secs = (last - first) as f64 / 1e9;
        if wbytes > 0 {
            metrics.set("write.bw", "MiB/s", wbytes as f64 / MIB / secs);
        }
        if rbytes > 0 {
            metrics.set("read.bw", "MiB/s", rbytes as f64 / MIB / secs);
        }
    }
    out
}

/// End-of-run invariants: every mapping's ranges agree with its counters, the
/// machine's page counters equal the sum over mappings, and nothing the model
/// noticed during the run.
fn check_invariants(world: &World) -> Invariants {
    let m = &world.m;
    let mut inv = Invariants::default();
    let (checked, bad) = m.check_page_conservation();
    inv.checked += checked;
    let now = m.sim().now();
    inv.violations.extend(
        bad.into_iter()
            .map(|b| format!("t={now} ns (end of run): {b}")),
    );
    inv.violations.extend(m.violations());
    inv
}
