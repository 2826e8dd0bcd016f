//! After a run: turn what the workload recorded, what the sampler saw and
//! the model's own counters into the results document, and check the end-of-run
//! invariants (page conservation per mapping and machine-wide, no negative or
//! leaked counters, violations the model noticed). Not kernel code.
//!
//! Metric names (JOB is the fio job's name; clone N of a job with
//! `numjobs` > 1 and no `group_reporting` is `JOB.N`, while its `jobs[]`
//! entry keeps fio's `jobname`, as fio prints it):
//! - `fio.JOB.write_bw` / `fio.JOB.read_bw` (MiB/s), `fio.JOB.write_iops`,
//!   `fio.JOB.clat` (completion latency of the job's writes, or reads for a
//!   read-only job, us), `fio.JOB.read_clat` / `fio.JOB.write_clat` for mixed
//!   jobs, `fio.JOB.sync_lat` (us), `fio.JOB.end_fsync` (the closing
//!   fsync alone, ms), `fio.JOB.file_peak_dirty` /
//!   `fio.JOB.file_peak_cached` (MiB), `fio.JOB.file_dirty_growth` /
//!   `fio.JOB.file_cache_growth` (peak minus the value when the job started,
//!   MiB), all of the job's own files (the inodes it opened);
//!   `fio.JOB.peak_dirty` / `peak_cached`, `start_dirty` / `start_cached`,
//!   `dirty_growth` / `cache_growth` (MiB): the same for the whole machine
//!   (/proc/meminfo `Dirty` and `Cached` while the job ran), as `wbsim
//!   probe` measures them on the live kernel;
//! - `write.bw` / `read.bw`: all jobs together over the span they ran (MiB/s);
//! - `dirty_pages`, `writeback_pages`, `cached_pages`, `dirty_limit_pages`,
//!   `bg_limit_pages` (sampled), `memcg.NAME.usage` (MiB, sampled, each
//!   memcg with memory.high or memory.max), `device.DEV.write_bytes_per_s` (sampled) and
//!   `device.DEV.write_bw` over the run (MiB/s), `device.DEV.util` (percent);
//! - actor steps with `record = NAME`: NAME (ms); errno outcomes as counters
//!   `NAME.EBUSY`, `umount.EBUSY`...;
//! - `bdp.pause` (ms): every balance_dirty_pages pause; `rcu.gp` counts;
//! - `fio.JOB.trace.EVENT` (events): the tracepoints that name an inode
//!   (`xfs_unwritten_convert`, `xfs_bmapi_convert_delalloc`,
//!   `folio_lock_wait`) counted on the job's own files over the run;
//!   `fio.JOB.trace.balance_dirty_pages[.FIELD]` and
//!   `fio.JOB.trace.bdi_dirty_ratelimit[.FIELD]`: the throttling
//!   tracepoints its (sync-engine) writers fired, as `wbsim probe
//!   buffered-write` folds the live ones ([`throttle_metrics`]);
//!   `trace.EVENT` (events): every model tracepoint, machine-wide, once;
//! - `memcg.NAME.{usage (MiB), high_events, max_events, oom, pgsteal,
//!   penalty_sleeps (count), penalty, psi_some, psi_full (ms)}` per memory
//!   cgroup online at the end (memory.current, memory.events,
//!   memory.pressure totals), and `memcg.offline.*` summed over the memcgs
//!   removed during the run, with their `count`;
//! - `fs.FS.{commits, last_commit, max_commit, total_commit, cow_blocks,
//!   tree_searches}` (btrfs commit_stats and tree work), `fs.FS.commit`
//!   (ms, every commit) and the series `fs.FS.commit_ms` (each commit's
//!   duration at its start time);
//! - `lock.CLASS.KIND.{acquisitions,contentions,wait_total,hold_total}`
//!   (count, ms): lock_stat of the whole run per lock class, KIND read/write.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::experiment::metrics::Metrics;
use crate::experiment::results::{Host, Invariants, Results};
use crate::experiment::scenario::{ResolvedVariant, Scenario};
use crate::model::block::BlockDevice;
use crate::model::mm::page_writeback::ThrottleTrace;
use crate::model::mm::vmstat::PAGE_SIZE;
use crate::workload::fio::iolog::{BATCH_LABELS, DEPTH_LABELS};
use crate::workload::fio::output::{
    latency_dists, FioBins, FioDdirStats, FioDiskUtil, FioJobDetail, FioJobOutput, FioLatStats,
    FioSyncStats, LabelledDist,
};
use crate::workload::world::{PageFigures, World};

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
    for (name, start, v) in world.timeline.borrow().iter() {
        metrics.sample(&format!("{name}_ms"), "ms", *start, *v as f64 / 1e6);
    }
    for (name, n) in world.counters.borrow().iter() {
        metrics.add(name, "count", *n);
    }
    let (jobs, fio_detail) = job_outputs(world, &mut metrics, now);
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
        if st.first_write_blocks > 0 {
            metrics.add(
                &format!("device.{name}.first_write_blocks"),
                "count",
                st.first_write_blocks,
            );
        }
    }
    lock_stat(m, &mut metrics);
    memcgs(m, &mut metrics);
    cgroup_cpu(world, &mut metrics);
    fs_stats(world, &mut metrics);
    wb_contexts(world, &mut metrics);
    metrics.set("run.simulated_time", "s", now as f64 / 1e9);
    let invariants = check_invariants(world);
    let host = Host {
        wall_time_s: wall.elapsed().as_secs_f64(),
        date: String::new(),
        version: env!("CARGO_PKG_VERSION").to_string(),
    };
    let mut r = Results::new(scenario, variant, seed, &metrics, jobs, invariants, host);
    r.fio_detail = fio_detail;
    r.fio_disks = devices
        .iter()
        .map(|(name, d)| {
            let st = d.stats();
            FioDiskUtil {
                name: name.clone(),
                read_ios: st.reads,
                write_ios: st.writes,
                read_merges: st.read_merges,
                write_merges: st.write_merges,
                read_ticks: st.read_time_ns / 1_000_000,
                write_ticks: st.write_time_ns / 1_000_000,
                in_queue: st.in_flight_time_ns / 1_000_000,
                util: if now > 0 {
                    100.0 * st.busy_ns as f64 / now as f64
                } else {
                    0.0
                },
            }
        })
        .collect();
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

/// A job's dirty-throttling tracepoints, under the names `wbsim probe
/// buffered-write` gives the live kernel's (`fio.JOB.trace.EVENT` and
/// `fio.JOB.trace.EVENT.FIELD`): `balance_dirty_pages` events, those that
/// slept (`paused`) and their pauses (`pause_ms`), the first and last
/// `dirty_ratelimit`; `bdi_dirty_ratelimit` events (the rate-limit
/// updates its writers ran) with the first and last `dirty_ratelimit` and
/// `awrite_bw` (KB/s). Nothing for a job that was never throttled.
fn throttle_metrics(metrics: &mut Metrics, p: &str, t: &ThrottleTrace) {
    if t.bdp_events > 0 {
        let b = format!("{p}.trace.balance_dirty_pages");
        metrics.add(&b, "events", t.bdp_events);
        metrics.add(&format!("{b}.paused"), "events", t.paused);
        metrics.set(&format!("{b}.pause_ms"), "ms", t.pause_ns as f64 / 1e6);
        if let Some(((_, first), (_, last))) = t.bdp_ratelimit {
            metrics.set(&format!("{b}.dirty_ratelimit_first"), "KB/s", first as f64);
            metrics.set(&format!("{b}.dirty_ratelimit_last"), "KB/s", last as f64);
        }
    }
    if t.updates > 0 {
        let b = format!("{p}.trace.bdi_dirty_ratelimit");
        metrics.add(&b, "events", t.updates);
        if let Some(((_, r0, a0), (_, r1, a1))) = t.update_rates {
            metrics.set(&format!("{b}.dirty_ratelimit_first"), "KB/s", r0 as f64);
            metrics.set(&format!("{b}.dirty_ratelimit_last"), "KB/s", r1 as f64);
            metrics.set(&format!("{b}.awrite_bw_first"), "KB/s", a0 as f64);
            metrics.set(&format!("{b}.awrite_bw_last"), "KB/s", a1 as f64);
        }
    }
}

/// Cgroup writeback and RCU: `cgwb.umount_drain` (ms), the time of every
/// `cgroup_writeback_umount` call, and `cgwb.umount_drain.FS` per
/// filesystem (its superblock name); `cgwb.switched_inodes` (count);
/// `rcu.gps`, `rcu.synchronize_calls` (count) and `rcu.gp_mean` (ms), the
/// mean normal grace period.
///
/// Per call and superblock SB also `cgwb.umount_drain_gps.SB` (grace
/// periods completed while it waited), `cgwb.umount_drain_switched.SB`
/// (inodes switched machine-wide meanwhile) and `cgwb.umount_drain_in_flight.SB`
/// (machine-wide switches in flight at entry), under `umount_drain = per_sb`
/// also `cgwb.umount_drain_sb_in_flight.SB` (the superblock's own pinned
/// switches at entry: what per_sb waits for); and per superblock shutdown
/// `umount.phase.PHASE.SB` (ms) for the phases of `generic_shutdown_super`.
fn cgwb_and_rcu(m: &crate::model::machine::Machine, metrics: &mut Metrics) {
    let drains = m.cgwb_umount_drain_records();
    for d in &drains {
        let sb = &d.sb;
        metrics.record_as("cgwb.umount_drain", "ns", "ms", d.ns);
        metrics.record_as(&format!("cgwb.umount_drain.{sb}"), "ns", "ms", d.ns);
        metrics.record(&format!("cgwb.umount_drain_gps.{sb}"), "count", d.gps);
        metrics.record(
            &format!("cgwb.umount_drain_switched.{sb}"),
            "count",
            d.switched,
        );
        metrics.record(
            &format!("cgwb.umount_drain_in_flight.{sb}"),
            "count",
            d.in_flight,
        );
        if let Some(n) = d.sb_in_flight {
            metrics.record(&format!("cgwb.umount_drain_sb_in_flight.{sb}"), "count", n);
        }
    }
    if !drains.is_empty() {
        for (sb, phase, ns) in m.shutdown_phases() {
            metrics.record_as(&format!("umount.phase.{phase}.{sb}"), "ns", "ms", ns);
        }
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
/// `wb.FS.ctxN.flusher_cpu` (ms), `wb.FS.ctx_active`, the contexts
/// whose flusher wrote anything, and `wb.FS.flusher_cpu_per_page` (us), the
/// flushers' CPU over the pages they wrote, all contexts together (the
/// per-page writeback cost E4's rates are about).
fn wb_contexts(world: &World, metrics: &mut Metrics) {
    let m = &world.m;
    if m.policies().nr_wb_ctx.is_none() {
        return;
    }
    let mut active: BTreeMap<String, u64> = BTreeMap::new();
    let mut per_fs: BTreeMap<String, (u64, u64)> = BTreeMap::new();
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
        let t = per_fs.entry(fs.name.clone()).or_insert((0, 0));
        t.0 += s.flusher_cpu_ns;
        t.1 += s.pages_written;
    }
    for (fs, n) in active {
        metrics.set(&format!("wb.{fs}.ctx_active"), "count", n as f64);
    }
    for (fs, (cpu_ns, pages)) in per_fs {
        if pages > 0 {
            metrics.set(
                &format!("wb.{fs}.flusher_cpu_per_page"),
                "us",
                cpu_ns as f64 / pages as f64 / 1e3,
            );
        }
    }
}

/// Filesystem counters and each transaction commit, per filesystem (its
/// scenario name).
fn fs_stats(world: &World, metrics: &mut Metrics) {
    let m = &world.m;
    let fs_name = |sb: &str| {
        world
            .filesystems
            .iter()
            .find(|f| f.mountpoint == sb)
            .map_or_else(|| sb.to_string(), |f| f.name.clone())
    };
    for (sb, k, unit, v) in m.fs_stats() {
        metrics.set(&format!("fs.{}.{k}", fs_name(&sb)), unit, v);
    }
    for (sb, start, ns) in m.fs_commits() {
        let n = fs_name(&sb);
        metrics.record_as(&format!("fs.{n}.commit"), "ns", "ms", ns);
        metrics.sample(&format!("fs.{n}.commit_ms"), "ms", start, ns as f64 / 1e6);
    }
}

/// CPU accounting of the cgroups still present at the end of the run
/// (`cpu.stat` usage_usec; the time its tasks were runnable but waiting
/// for a CPU, schedstats' wait_sum added over them; `cpu.pressure` some),
/// ms: how long lock holders and everyone else waited for a CPU.
fn cgroup_cpu(world: &World, metrics: &mut Metrics) {
    for (name, id) in world.cgroups.borrow().iter() {
        let s = world.m.sched().cgroup_stats(*id);
        for (k, v) in [
            ("cpu_usage", s.run_ns),
            ("cpu_wait", s.wait_ns),
            ("cpu_some", s.some_ns),
        ] {
            metrics.set(&format!("cgroup.{name}.{k}"), "ms", v as f64 / 1e6);
        }
    }
}

/// Memory cgroups at the end of the run (memory.current, memory.events,
/// reclaim and penalty counters, memory.pressure totals): one set per memcg
/// still online, as cgroupfs lists them, and the memcgs removed during the
/// run (an actor's mkdir/rmdir churn makes thousands) summed into
/// `memcg.offline.*` with their `count`.
fn memcgs(m: &crate::model::machine::Machine, metrics: &mut Metrics) {
    let mut offline: Option<(u64, crate::model::machine::MemcgStat)> = None;
    for s in m.memcg_stats() {
        if s.online {
            memcg_metrics(&format!("memcg.{}", s.name), &s, metrics);
            continue;
        }
        match &mut offline {
            None => offline = Some((1, s)),
            Some((n, t)) => {
                *n += 1;
                t.usage_pages += s.usage_pages;
                let (e, f) = (&mut t.events, &s.events);
                e.high += f.high;
                e.max += f.max;
                e.oom += f.oom;
                e.pgsteal += f.pgsteal;
                e.penalty_sleeps += f.penalty_sleeps;
                e.penalty_ns += f.penalty_ns;
                t.psi.some_ns += s.psi.some_ns;
                t.psi.full_ns += s.psi.full_ns;
            }
        }
    }
    if let Some((n, t)) = offline {
        metrics.set("memcg.offline.count", "count", n as f64);
        memcg_metrics("memcg.offline", &t, metrics);
    }
}

/// One memcg's (or a sum's) metrics under prefix `p`.
fn memcg_metrics(p: &str, s: &crate::model::machine::MemcgStat, metrics: &mut Metrics) {
    let e = &s.events;
    metrics.set(
        &format!("{p}.usage"),
        "MiB",
        (s.usage_pages * PAGE_SIZE) as f64 / MIB,
    );
    for (k, v) in [
        ("high_events", e.high),
        ("max_events", e.max),
        ("oom", e.oom),
        ("pgsteal", e.pgsteal),
        ("penalty_sleeps", e.penalty_sleeps),
    ] {
        metrics.set(&format!("{p}.{k}"), "count", v as f64);
    }
    for (k, v) in [
        ("penalty", e.penalty_ns),
        ("psi_some", s.psi.some_ns),
        ("psi_full", s.psi.full_ns),
    ] {
        metrics.set(&format!("{p}.{k}"), "ms", v as f64 / 1e6);
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

/// fio-shaped job entries and their detail, and the per-job and aggregate
/// metrics.
fn job_outputs(
    world: &World,
    metrics: &mut Metrics,
    now: u64,
) -> (Vec<serde_json::Value>, Vec<FioJobDetail>) {
    let mut outs: Vec<FioJobOutput> = Vec::new();
    let mut details = Vec::new();
    let (mut first, mut last) = (u64::MAX, 0u64);
    let (mut rbytes, mut wbytes) = (0u64, 0u64);
    for j in world.jobs.borrow().iter() {
        let runtime = j.runtime_ns(now);
        let start = j.start_ns.unwrap_or(now).min(now);
        first = first.min(start);
        last = last.max(start + runtime);
        rbytes += j.read_bytes;
        wbytes += j.write_bytes;
        let mut o = FioJobOutput::new(&j.jobname, j.groupid, runtime);
        o.error = i32::from(j.error.is_some());
        let end = start + runtime;
        for write in [false, true] {
            let mut d = FioDdirStats::from_latencies(
                j.bytes(write),
                j.ios(write),
                runtime,
                &j.clat(write),
                Some(&j.lat(write)),
            );
            d.slat_ns = FioLatStats::from_histogram(&j.slat(write));
            d.set_rates(&j.samples.rate_stats(write, end));
            if write {
                o.write = d;
            } else {
                o.read = d;
            }
        }
        o.sync = FioSyncStats::from_histogram(&j.sync());
        o.sys_cpu = j.samples.sys_cpu_pct();
        let [level, submit, complete] = j.samples.depth_dists();
        o.iodepth_level = LabelledDist::new(&DEPTH_LABELS, &level);
        o.iodepth_submit = LabelledDist::new(&BATCH_LABELS, &submit);
        o.iodepth_complete = LabelledDist::new(&BATCH_LABELS, &complete);
        let (rlat, wlat) = (j.lat(false), j.lat(true));
        let [ln, lu, lm] = latency_dists(&[&rlat, &wlat]);
        o.latency_ns = ln;
        o.latency_us = lu;
        o.latency_ms = lm;
        o.latency_depth = j.iodepth;
        o.latency_percentile = 100.0;
        outs.push(o);
        details.push(FioJobDetail {
            threads: j.threads.clone(),
            clat_bins: [
                FioBins::from_histogram(&j.clat(false)),
                FioBins::from_histogram(&j.clat(true)),
            ],
            slat_bins: [
                FioBins::from_histogram(&j.slat(false)),
                FioBins::from_histogram(&j.slat(true)),
            ],
            lat_bins: [
                FioBins::from_histogram(&rlat),
                FioBins::from_histogram(&wlat),
            ],
            sync_bins: FioBins::from_histogram(&j.sync()),
            logs: j.samples.logs().cloned(),
        });

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
        let main = j.write_ios > 0;
        metrics.record_histogram(&format!("{p}.clat"), "ns", "us", &j.clat(main));
        let slat = j.slat(main);
        if !slat.is_empty() {
            metrics.record_histogram(&format!("{p}.slat"), "ns", "us", &slat);
        }
        metrics.record_histogram(&format!("{p}.lat"), "ns", "us", &j.lat(main));
        if j.write_ios > 0 && j.read_ios > 0 {
            metrics.record_histogram(&format!("{p}.write_clat"), "ns", "us", &j.clat(true));
            metrics.record_histogram(&format!("{p}.read_clat"), "ns", "us", &j.clat(false));
        }
        if !j.sync_lat.is_empty() {
            metrics.record_histogram(&format!("{p}.sync_lat"), "ns", "us", &j.sync());
        }
        if !j.end_fsync.is_empty() {
            // The closing fsync alone, as `wbsim probe` times it.
            let h = j.end_fsync.histogram();
            metrics.record_histogram(&format!("{p}.end_fsync"), "ns", "ms", &h);
        }
        let mib = |pages: u64| (pages * PAGE_SIZE) as f64 / MIB;
        let growth =
            |peak: u64, start: Option<u64>| mib(peak.saturating_sub(start.unwrap_or(peak)));
        // Peaks and growth of dirty and cached pages under `{p}.{tag}NAME`.
        let mut page_figures = |tag: &str, f: &PageFigures| {
            metrics.set(&format!("{p}.{tag}peak_dirty"), "MiB", mib(f.peak_dirty));
            metrics.set(&format!("{p}.{tag}peak_cached"), "MiB", mib(f.peak_cached));
            metrics.set(
                &format!("{p}.{tag}dirty_growth"),
                "MiB",
                growth(f.peak_dirty, f.start_dirty),
            );
            metrics.set(
                &format!("{p}.{tag}cache_growth"),
                "MiB",
                growth(f.peak_cached, f.start_cached),
            );
        };
        // The job's own files.
        page_figures("file_", &j.file_pages);
        // The machine's, under the names and meaning of `wbsim probe`
        // (/proc/meminfo `Dirty` and `Cached` while the job ran).
        page_figures("", &j.machine_pages);
        if let (Some(d), Some(c)) = (j.machine_pages.start_dirty, j.machine_pages.start_cached) {
            metrics.set(&format!("{p}.start_dirty"), "MiB", mib(d));
            metrics.set(&format!("{p}.start_cached"), "MiB", mib(c));
        }
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
        throttle_metrics(metrics, &p, &j.throttle);
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
    set_bw_agg(&mut outs);
    let out = outs
        .iter()
        .map(|o| serde_json::to_value(o).unwrap_or(serde_json::Value::Null))
        .collect();
    (out, details)
}

/// fio's `bw_agg`: a job's mean sample bandwidth as a percentage of its
/// reporting group's aggregate bandwidth (`convert_agg_kbytes_percent()`:
/// the group's bytes over its longest runtime; capped at 100; 100 when the
/// aggregate is at most 1 KiB/s), for directions with samples.
fn set_bw_agg(outs: &mut [FioJobOutput]) {
    let mut agg: BTreeMap<(u32, bool), (u64, u64)> = BTreeMap::new();
    for o in outs.iter() {
        for (w, d) in [(false, &o.read), (true, &o.write)] {
            let e = agg.entry((o.groupid, w)).or_insert((0, 0));
            e.0 += d.io_bytes;
            e.1 = e.1.max(d.runtime);
        }
    }
    for o in outs.iter_mut() {
        let g = o.groupid;
        for (w, d) in [(false, &mut o.read), (true, &mut o.write)] {
            if d.bw_samples == 0 {
                continue;
            }
            let (bytes, run_ms) = agg[&(g, w)];
            let agg_bps = (bytes * 1000).checked_div(run_ms).unwrap_or(0);
            d.bw_agg = if agg_bps > 1024 {
                (d.bw_mean * 100.0 / (agg_bps as f64 / 1024.0)).min(100.0)
            } else {
                100.0
            };
        }
    }
}

/// End-of-run invariants: every mapping's ranges agree with its counters, the
/// machine's page counters equal the sum over mappings, and nothing the model
/// noticed during the run.
fn check_invariants(world: &World) -> Invariants {
    let m = &world.m;
    let mut inv = Invariants::default();
    let (checked, bad) = m.check_page_conservation();
    inv.checked += checked;
    inv.violations.extend(bad);
    inv.violations.extend(m.violations());
    inv
}
