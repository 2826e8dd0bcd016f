//! The live-kernel probe: runs what this machine's kernel can run of the
//! experiments, for real, and writes results in the simulator's own format
//! (docs/design.md "Layers"; docs/experiments.md "Live kernel").
//!
//! Not kernel code: a harness around the kernel. Linux and root only.
//! Experiments ([`Experiment`]):
//! - `umount` ([`umount`]): umount and umount -l of tmpfs, xfs and btrfs on
//!   loop devices, clean and with 64 MiB unsynced; the `umount2(2)` call
//!   timed in-process and the whole `umount(8)` command; a busy mount.
//! - `dontcache` ([`dontcache`]): buffered vs `RWF_DONTCACHE` writes on xfs,
//!   ext4 and btrfs, into new empty files and into files preallocated with
//!   `fallocate(2)` (fio's default).
//! - `buffered-write` ([`buffered_write`]): 1, 2, 4, 8 sequential buffered
//!   writers on xfs, dirty pages over time and writeback tracepoint counts.
//! - `wakeup` ([`wakeup`]): cross-CPU wakeup latency, from waking a task
//!   blocked on an idle CPU (a pipe write from the other CPU) until it runs,
//!   each wakeup classified idle/busy target from `sched:` events in a
//!   private tracefs; no devices.
//! - `uring` ([`uring`]): fio-like io_uring writers at iodepth 1 and 16,
//!   buffered and `RWF_DONTCACHE`, sequential and random, on xfs and ext4.
//! - `pressure` ([`pressure`]): one writer past the global dirty limit; 1, 4
//!   and 16 writers past a 64 MiB bdi dirty cap (`max_bytes`).
//!
//! Rounds ([`Options::rounds`]): the whole experiment runs N times in a row,
//! every job once per round, so drift hits every job alike. Per round the
//! machine's conditions ([`quiet`]: load average, other runnable tasks, CPU
//! steal, kernel) go to `live.rounds`; a machine that is not quiet gives a
//! warning and a note, or with [`Options::strict`] a refusal before the
//! first round. The metrics pool the rounds
//! ([`Metrics::merge_rounds`]) and `live.spread` ([`spread`]) gives each
//! metric's min/median/max across rounds of its mean and p99.
//!
//! Safety ([`guard`]): only sparse images, loop devices and mounts of its
//! own under its own temporary directory; verified before every mkfs, mount
//! and detach; every setting it changes restored; cleanup on every exit path
//! including SIGINT and SIGTERM. It never touches cgroups.
//!
//! Metric names (shared with the simulated scenarios so `wbsim compare`
//! pairs them):
//! - `umount.<fs>.<state>.<mode>.call` / `.cmd` (ms histograms) with
//!   `<fs>` tmpfs|xfs|btrfs, `<state>` clean|dirty, `<mode>` umount|lazy;
//!   `umount.<fs>.<state>.<mode>.device_free_after` (ms, block filesystems:
//!   from the umount's return to the device being free);
//!   `umount.busy.lazy.call`, `umount.busy.teardown_after_close` (ms from
//!   the holder's exit being reaped to the device being free),
//!   `umount.busy.teardown_after_kill` (ms from SIGKILL to free) and
//!   `umount.busy.device_busy_after_lazy` (fraction of rounds in which the
//!   device was still claimed right after the lazy umount returned).
//! - per job `<job>`: `fio.<job>.write_bw` (MiB/s, write calls only, like
//!   fio without `end_fsync`), `fio.<job>.clat` (us per write call),
//!   `fio.<job>.end_fsync` (ms), `fio.<job>.peak_dirty`,
//!   `fio.<job>.peak_cached` (MiB, machine-wide peaks of `/proc/meminfo`
//!   during the job) and `fio.<job>.start_dirty`, `fio.<job>.start_cached`
//!   (MiB, at its start), and the growth `fio.<job>.dirty_growth`,
//!   `fio.<job>.cache_growth` (MiB, peak - start). dontcache jobs
//!   `<fs>-<seq|rand|seq4k>-<buffered|dontcache>` (new empty file) and
//!   `<fs>-<seq|rand|seq4k>-<buffered|dontcache>-falloc` (file
//!   preallocated with `fallocate(fd, 0, 0, size)` before the timed
//!   writes); a refused job has `fio.<job>.errno` (e.g. 95, EOPNOTSUPP)
//!   and `error` in its fio entry. Every xfs job of `dontcache` also has the
//!   tracepoint counts `fio.<job>.trace.xfs_unwritten_convert`,
//!   `fio.<job>.trace.xfs_setfilesize`, `fio.<job>.trace.xfs_update_time`
//!   and `fio.<job>.trace.overrun`
//!   (events per run). buffered-write jobs `seq-w1`..`seq-w8` also have the
//!   series `fio.<job>.dirty_pages` and `fio.<job>.writeback_pages` (pages,
//!   t in ns from the job's start) and tracepoint counts
//!   `fio.<job>.trace.<event>` (events; `trace.overrun` = lost).
//! - uring jobs `uring-<xfs|ext4>-<seq|rand>-<buffered|dontcache>-qd<1|16>`
//!   and pressure jobs `over-dirty-w1`, `over-mem-w<1|4|16>`: the `fio.<job>.*`
//!   metrics above (pressure jobs with the `dirty_pages`/`writeback_pages`
//!   series).
//! - `wakeup.cross_cpu` (us histogram: both directions, CPU 0 waking CPU 1
//!   and CPU 1 waking CPU 0), `wakeup.cross_cpu.0to1`,
//!   `wakeup.cross_cpu.1to0` (us, one direction each, waker to sleeper),
//!   `wakeup.cross_cpu.idle` / `wakeup.cross_cpu.busy` (us, the rounds whose
//!   target CPU was idle / running another task, from the woken task's
//!   `sched_wakeup`/`sched_switch` events),
//!   `wakeup.cross_cpu.<0to1|1to0>.idle_fraction` (fraction),
//!   `wakeup.trace.unclassified` (rounds), `wakeup.trace.overrun` (events)
//!   and `wakeup.run_delay` (us histogram: the woken task's runqueue wait
//!   per wakeup, from schedstat).

pub mod buffered_write;
pub mod dontcache;
pub mod guard;
pub mod iogen;
pub mod loopdev;
pub mod loopsys;
pub mod machine;
pub mod meminfo;
pub mod parallel_write;
pub mod pressure;
pub mod quiet;
pub mod recover;
pub mod spread;
pub mod sys;
pub mod tracefs;
pub mod umount;
pub mod uring;
pub mod wakeup;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::bail;
use hdrhistogram::Histogram;

use crate::experiment::metrics::Metrics;
use crate::experiment::results::{Host, Results, RoundConditions};
use crate::workload::fio::output::{FioDdirStats, FioJobOutput, FioSyncStats};

pub use guard::Guard;

/// The probe experiments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Experiment {
    /// umount / umount -l latency.
    Umount,
    /// buffered vs RWF_DONTCACHE.
    Dontcache,
    /// parallel buffered writers.
    BufferedWrite,
    /// cross-CPU wakeup latency.
    Wakeup,
    /// io_uring writers at iodepth 1 and 16.
    Uring,
    /// writers past the dirty limit and past the memory they may dirty.
    Pressure,
    /// E4's random io_uring writers on xfs with 4 AGs.
    ParallelWrite,
}

impl Experiment {
    /// Every experiment with its name.
    pub const ALL: &'static [(&'static str, Experiment)] = &[
        ("umount", Experiment::Umount),
        ("dontcache", Experiment::Dontcache),
        ("buffered-write", Experiment::BufferedWrite),
        ("wakeup", Experiment::Wakeup),
        ("uring", Experiment::Uring),
        ("pressure", Experiment::Pressure),
        ("parallel-write", Experiment::ParallelWrite),
    ];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Experiment::Umount => "umount",
            Experiment::Dontcache => "dontcache",
            Experiment::BufferedWrite => "buffered-write",
            Experiment::Wakeup => "wakeup",
            Experiment::Uring => "uring",
            Experiment::Pressure => "pressure",
            Experiment::ParallelWrite => "parallel-write",
        }
    }

    /// Repetitions when `--repeat` is not given.
    pub fn default_repeat(self) -> u32 {
        match self {
            Experiment::Umount => 10,
            _ => 1,
        }
    }
}

/// How to run a probe.
#[derive(Clone, Debug)]
pub struct Options {
    /// The experiment.
    pub experiment: Experiment,
    /// Repetitions of each measurement within a round.
    pub repeat: u32,
    /// Rounds: the whole experiment (every job) run this many times in a
    /// row, so drift between rounds hits every job alike; the results pool
    /// the rounds and give each metric's spread across them.
    pub rounds: u32,
    /// Refuse to start when the machine is not quiet.
    pub strict: bool,
    /// Before each round, wait up to this long for the machine to be quiet
    /// (zero: do not wait): a round's own writers, flushers and loop workers
    /// stay in the load average for about a minute after it.
    pub wait_quiet: std::time::Duration,
    /// Small sizes and one repetition (tests, a first look).
    pub quick: bool,
    /// Where to make the temporary directory (default `$TMPDIR` or /var/tmp).
    pub tmpdir: Option<PathBuf>,
    /// The command line, recorded in the results.
    pub command: String,
}

/// What an experiment fills.
pub struct Ctx<'a> {
    /// The guard (directory, cleanup, interruption).
    pub guard: &'a Guard,
    /// The options.
    pub opts: &'a Options,
    /// Metrics.
    pub metrics: Metrics,
    /// fio-shaped job entries.
    pub jobs: Vec<serde_json::Value>,
    /// Notes for `live.notes`.
    pub notes: Vec<String>,
    /// Settings for `live.settings`.
    pub settings: BTreeMap<String, String>,
    /// `[[device]]`/`[[filesystem]]` scenario tables describing what ran.
    pub scenario_tables: String,
}

/// Prints a progress line on stderr (`[probe] ...`).
pub fn progress(msg: &str) {
    eprintln!("[probe] {msg}");
}

/// Why this machine cannot run the probe, if it cannot.
pub fn refusal() -> Option<String> {
    if !cfg!(target_os = "linux") {
        return Some("wbsim probe runs on Linux only".into());
    }
    if sys::euid() != 0 {
        return Some(
            "wbsim probe must run as root (it attaches loop devices, formats and mounts them)"
                .into(),
        );
    }
    if !std::path::Path::new("/dev/loop-control").exists() {
        return Some("no loop devices on this machine (/dev/loop-control is missing)".into());
    }
    None
}

/// Removes what dead probes left under the probe base directory (`tmpdir`,
/// else `$TMPDIR`, else /var/tmp; see [`recover`]), printing each removal
/// and refusal; an error if something could not be removed or was refused.
pub fn cleanup_stale(tmpdir: Option<&std::path::Path>) -> anyhow::Result<recover::Report> {
    if let Some(why) = refusal() {
        bail!("{why}");
    }
    let base = guard::base_dir(tmpdir);
    let report = recover::cleanup_stale(&base)?;
    for l in &report.removed {
        progress(&format!("cleanup of a dead probe: removed {l}"));
    }
    for l in &report.refused {
        progress(&format!("cleanup of a dead probe: REFUSED {l}"));
    }
    for d in &report.live {
        progress(&format!(
            "cleanup: {} belongs to a running probe, left alone",
            d.display()
        ));
    }
    Ok(report)
}

/// What [`run`] produced.
pub struct Outcome {
    /// The results (partial if interrupted: the rounds and jobs done).
    pub results: Results,
    /// The signal that interrupted the run, if any.
    pub interrupted: Option<i32>,
}

/// Samples the machine before round `round`; with `--wait-quiet`, waits (up
/// to that long, checking every 5 s, adding the time to `waited`) until it
/// is quiet. Returns the last sample and why it is not quiet (empty if it
/// is).
fn wait_for_quiet(
    guard: &Guard,
    opts: &Options,
    limits: &quiet::Limits,
    release: &str,
    round: u32,
    waited: &mut std::time::Duration,
) -> anyhow::Result<(RoundConditions, Vec<String>)> {
    let mut cond = quiet::sample(round, release);
    let mut why = quiet::assess(&cond, limits);
    if why.is_empty() || opts.wait_quiet.is_zero() {
        return Ok((cond, why));
    }
    let start = Instant::now();
    progress(&format!(
        "round {round}: waiting up to {} s for a quiet machine: {}",
        opts.wait_quiet.as_secs(),
        why.join("; ")
    ));
    while !why.is_empty() && start.elapsed() < opts.wait_quiet {
        guard.check()?;
        std::thread::sleep(std::time::Duration::from_secs(5));
        cond = quiet::sample(round, release);
        why = quiet::assess(&cond, limits);
    }
    *waited += start.elapsed();
    Ok((cond, why))
}
/// Runs one probe experiment after removing what dead probes left behind;
/// cleanup has run when it returns. Interrupted by SIGINT/SIGTERM, it
/// returns the metrics measured so far with `interrupted` set (and a note
/// in `live.notes`).
pub fn run(opts: &Options) -> anyhow::Result<Outcome> {
    if let Some(why) = refusal() {
        bail!("{why}");
    }
    if opts.repeat == 0 {
        bail!("--repeat must be at least 1");
    }
    let stale = cleanup_stale(opts.tmpdir.as_deref())?;
    if !stale.refused.is_empty() {
        bail!(
            "a dead probe left resources that could not be removed (see above); \
             resolve them by hand, then run `wbsim probe --cleanup`"
        );
    }
    let t0 = Instant::now();
    let guard = Guard::new(opts.tmpdir.as_deref())?;
    progress(&format!(
        "{}: working in {}",
        opts.experiment.name(),
        guard.dir().display()
    ));
    let info = machine::MachineInfo::collect(&guard);
    let rounds = opts.rounds.max(1);
    let limits = quiet::Limits::default();
    let mut settings = BTreeMap::new();
    let release = info.live.kernel_release.clone();
    let mut waited = std::time::Duration::ZERO;
    let (first, why) = wait_for_quiet(&guard, opts, &limits, &release, 1, &mut waited)?;
    if !why.is_empty() {
        if opts.strict {
            bail!(
                "the machine is not quiet ({}); refusing with --strict",
                why.join("; ")
            );
        }
        progress(&format!(
            "warning: the machine is not quiet: {}",
            why.join("; ")
        ));
    }
    let mut conditions = Vec::new();
    let mut round_metrics = Vec::new();
    let mut jobs = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let mut scenario_tables = String::new();
    let mut stopped: Option<String> = None;
    for r in 1..=rounds {
        if guard.interrupted().is_some() {
            break;
        }
        // Each round waits for the load the round before left (its writers,
        // flushers and loop workers are in the load average for a minute).
        let mut cond = if r == 1 {
            first.clone()
        } else {
            wait_for_quiet(&guard, opts, &limits, &release, r, &mut waited)?.0
        };
        cond.not_quiet = quiet::assess(&cond, &limits);
        if rounds > 1 {
            progress(&format!(
                "round {r} of {rounds} (load {:.2}, {:.0} other runnable)",
                cond.load_1m, cond.others_running
            ));
        }
        let cpu0 = quiet::cpu_times();
        let mut ctx = Ctx {
            guard: &guard,
            opts,
            metrics: Metrics::new(),
            jobs: Vec::new(),
            notes: Vec::new(),
            settings: BTreeMap::new(),
            scenario_tables: String::new(),
        };
        let res = match opts.experiment {
            Experiment::Umount => umount::run(&mut ctx),
            Experiment::Dontcache => dontcache::run(&mut ctx),
            Experiment::BufferedWrite => buffered_write::run(&mut ctx),
            Experiment::Wakeup => wakeup::run(&mut ctx),
            Experiment::Uring => uring::run(&mut ctx),
            Experiment::Pressure => pressure::run(&mut ctx),
            Experiment::ParallelWrite => parallel_write::run(&mut ctx),
        };
        if let Err(e) = res {
            // An error caused by a signal keeps what was measured;
            // any other error fails the run.
            match guard.interrupted() {
                Some(sig) => {
                    stopped = Some(format!(
                        "INTERRUPTED by {} in round {r} of {rounds} ({e:#}): partial results, \
                         metrics of the jobs finished before the signal",
                        guard::signal_name(sig)
                    ))
                }
                None => return Err(e),
            }
        }
        cond.steal_pct = quiet::steal_pct(cpu0, quiet::cpu_times());
        conditions.push(cond);
        if r == 1 {
            jobs = ctx.jobs;
            scenario_tables = ctx.scenario_tables;
        }
        for n in ctx.notes {
            if !notes.contains(&n) {
                notes.push(n);
            }
        }
        settings.extend(ctx.settings);
        round_metrics.push(ctx.metrics);
        if stopped.is_some() {
            break;
        }
    }
    if !opts.wait_quiet.is_zero() {
        settings.insert(
            "waited for a quiet machine (s)".to_string(),
            format!("{:.0}", waited.as_secs_f64()),
        );
    }
    let errs = guard.cleanup();
    if !errs.is_empty() {
        bail!("cleanup failed: {}", errs.join("; "));
    }
    let interrupted = guard.interrupted();
    if let (Some(sig), None) = (interrupted, &stopped) {
        stopped = Some(format!(
            "INTERRUPTED by {} between rounds: partial results ({} round(s) done)",
            guard::signal_name(sig),
            round_metrics.len()
        ));
    }
    if let Some(n) = stopped {
        notes.push(n);
    }
    let name = format!("probe-{}", opts.experiment.name());
    let model = match info.model_params(&name, &scenario_tables) {
        Ok(m) => m,
        // A round cut short may have described only part of its machine.
        Err(_) if interrupted.is_some() => info.model_params(&name, "")?,
        Err(e) => return Err(e),
    };
    let mut live = info.live;
    live.experiment = opts.experiment.name().to_string();
    live.command = opts.command.clone();
    live.settings.extend(settings);
    live.settings.insert("rounds".into(), rounds.to_string());
    if let Ok(l) = sys::read_trim(std::path::Path::new("/proc/loadavg")) {
        live.settings
            .insert("loadavg at end (/proc/loadavg)".into(), l);
    }
    let per_round: Vec<_> = round_metrics
        .iter()
        .map(|m| m.summaries(|_| true))
        .collect();
    live.spread = spread::spread(&per_round);
    let busy: Vec<String> = conditions
        .iter()
        .filter(|c| !c.not_quiet.is_empty())
        .map(|c| format!("round {}: {}", c.round, c.not_quiet.join(", ")))
        .collect();
    if busy.is_empty() {
        notes.push(format!(
            "quiet: every round started with a 1-minute load below {:.2}, at most {:.1} other \
             runnable task(s) and CPU steal at most {:.1}% (live.rounds)",
            limits.max_load_1m, limits.max_others_running, limits.max_steal_pct
        ));
    } else {
        notes.push(format!(
            "NOT QUIET (live.rounds; load from the probe's own previous round counts too): {}",
            busy.join("; ")
        ));
    }
    if rounds > 1 {
        notes.push(format!(
            "{rounds} rounds, each running every job once in turn; metrics pool the rounds \
             (histograms: every value; scalars: the mean of the rounds), live.spread gives \
             each metric's min/median/max across rounds; jobs[] and series are round 1's"
        ));
    }
    live.rounds = conditions;
    let metrics = Metrics::merge_rounds(&round_metrics);
    let conflicts = metrics.conflicts();
    if !conflicts.is_empty() {
        notes.push(format!(
            "metric recording conflicts (a probe bug): {}",
            conflicts.join("; ")
        ));
    }
    live.notes = notes;
    let host = Host {
        wall_time_s: t0.elapsed().as_secs_f64(),
        date: Host::now(),
        version: env!("CARGO_PKG_VERSION").to_string(),
    };
    Ok(Outcome {
        results: Results::from_probe(&name, model, &metrics, jobs, host, live),
        interrupted,
    })
}

/// Records one job as the `fio.<job>.*` metrics and a fio-shaped entry.
/// `runs` holds each repetition's writers (one [`iogen::Outcome`] per
/// writer thread) with the meminfo samples taken during it. Bandwidth is
/// total bytes over the summed run times; peaks are over every run; the
/// series (if `series`) are the first run's.
pub fn record_job(
    ctx: &mut Ctx,
    job: &str,
    runs: &[(Vec<iogen::Outcome>, Vec<meminfo::Sample>)],
    series: bool,
) {
    let m = &mut ctx.metrics;
    let mut hist = Histogram::<u64>::new(3).expect("3 significant digits is valid");
    let mut fsync = Histogram::<u64>::new(3).expect("3 significant digits is valid");
    let (mut bytes, mut ios, mut runtime_ns) = (0u64, 0u64, 0u64);
    let mut errno = None;
    for (outcomes, _) in runs {
        for o in outcomes {
            for &c in &o.clat_ns {
                m.record_as(&format!("fio.{job}.clat"), "ns", "us", c);
                let _ = hist.record(c);
            }
            bytes += o.bytes;
            ios += o.ios;
            if o.fsync_ns > 0 {
                m.record_as(&format!("fio.{job}.end_fsync"), "ns", "ms", o.fsync_ns);
                let _ = fsync.record(o.fsync_ns);
            }
            errno = errno.or(o.errno);
        }
        let start = outcomes.iter().filter_map(|o| o.start).min();
        let end = outcomes.iter().filter_map(|o| o.end).max();
        if let (Some(s), Some(e)) = (start, end) {
            runtime_ns += u64::try_from((e - s).as_nanos()).unwrap_or(u64::MAX);
        }
    }
    if let Some(e) = errno {
        m.set(&format!("fio.{job}.errno"), "errno", f64::from(e));
    }
    if runtime_ns > 0 && bytes > 0 {
        let bw = bytes as f64 / (runtime_ns as f64 / 1e9) / 1_048_576.0;
        m.set(&format!("fio.{job}.write_bw"), "MiB/s", bw);
    }
    let kib_to_mib = |k: u64| k as f64 / 1024.0;
    let all = || runs.iter().flat_map(|(_, s)| s.iter());
    if let Some(first) = all().next() {
        m.set(
            &format!("fio.{job}.start_dirty"),
            "MiB",
            kib_to_mib(first.m.dirty_kib),
        );
        m.set(
            &format!("fio.{job}.start_cached"),
            "MiB",
            kib_to_mib(first.m.cached_kib),
        );
        let pd = all().map(|s| s.m.dirty_kib).max().unwrap_or(0);
        let pc = all().map(|s| s.m.cached_kib).max().unwrap_or(0);
        m.set(&format!("fio.{job}.peak_dirty"), "MiB", kib_to_mib(pd));
        m.set(&format!("fio.{job}.peak_cached"), "MiB", kib_to_mib(pc));
        // Growth during the job: comparable with the model's, which sees
        // only its own machine.
        m.set(
            &format!("fio.{job}.dirty_growth"),
            "MiB",
            kib_to_mib(pd.saturating_sub(first.m.dirty_kib)),
        );
        m.set(
            &format!("fio.{job}.cache_growth"),
            "MiB",
            kib_to_mib(pc.saturating_sub(first.m.cached_kib)),
        );
    }
    if let (true, Some((_, samples))) = (series, runs.first()) {
        for s in samples {
            m.sample(
                &format!("fio.{job}.dirty_pages"),
                "pages",
                s.t_ns,
                (s.m.dirty_kib / 4) as f64,
            );
            m.sample(
                &format!("fio.{job}.writeback_pages"),
                "pages",
                s.t_ns,
                (s.m.writeback_kib / 4) as f64,
            );
        }
    }
    let mut j = FioJobOutput::new(job, 0, runtime_ns);
    j.error = errno.unwrap_or(0);
    j.write = FioDdirStats::from_latencies(bytes, ios, runtime_ns, &hist, None);
    if !fsync.is_empty() {
        j.sync = FioSyncStats::from_histogram(&fsync);
    }
    if let Ok(v) = serde_json::to_value(j) {
        ctx.jobs.push(v);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn date_is_rfc3339() {
        let d = super::Host::now();
        assert_eq!(d.len(), 20, "{d}");
        assert!(d.starts_with("20") && d.ends_with('Z'), "{d}");
    }
}
