//! `wbsim run SCENARIO.toml`: run a scenario's variants (or the ones named),
//! print a readable summary per run, and write one results JSON per run.
//! `wbsim run JOB.fio [--machine M] [--fs F] [--device D]`: run a fio job file
//! on a built-in machine ([`super::fio_run`]), the same way.
//! `--output-format=normal|json|json+` prints fio's own output of each run
//! instead of the summary ([`super::fio_output`]); jobs with
//! `write_bw_log`/`write_lat_log`/`write_iops_log` get fio's log files.
//! Runs longer than a few seconds of wall time show a progress bar of the
//! simulated time on stderr (terminals only).

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args as ClapArgs;

use crate::experiment::report::input::run_stem;
use crate::experiment::results::{Host, Results};
use crate::experiment::runner::{plan, run_one_with_progress, RunOptions};
use crate::experiment::scenario;

use super::fio_output;
use super::fio_run;

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// The scenario file (`.toml`), or a fio job file (any other name).
    pub scenario: PathBuf,
    /// fio job files: the built-in machine (vm2, server16, laptop4).
    #[arg(long, value_name = "PROFILE")]
    pub machine: Option<String>,
    /// fio job files: the filesystem (xfs, ext4, btrfs, tmpfs).
    #[arg(long, value_name = "TYPE")]
    pub fs: Option<String>,
    /// fio job files: the device profile (nvme-dc, qemu-nvme, loop-virtio, loop-virtio-sparse, pmem).
    #[arg(long, value_name = "PROFILE")]
    pub device: Option<String>,
    /// fio job files: simulated time limit (e.g. "30s"); default: the jobs'
    /// runtimes plus 60 s, or 300 s when a job has no runtime.
    #[arg(long, value_name = "TIME")]
    pub duration: Option<String>,
    /// Run only this variant (repeatable); default: every variant.
    #[arg(long = "variant", value_name = "NAME")]
    pub variants: Vec<String>,
    /// Seed of the first repetition (default: the scenario's `seed`).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Where to write results: a .json file for a single run, else a directory
    /// (default: results/), one `SCENARIO__VARIANT__seedN.json` per run.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The scenario's shortened form (`quick_duration`, `quick_repeat`).
    #[arg(long)]
    pub quick: bool,
    /// Repetitions per variant (default: the scenario's `repeat`).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: Option<u32>,
    /// Keep every fio clone's own statistics entry (results `jobs` and
    /// `fio.JOB.N.*` metrics) even beyond 128 clones without
    /// group_reporting, where they are otherwise aggregated per job (as
    /// `[measure] per_job = true`).
    #[arg(long)]
    pub per_job: bool,
    /// Refuse to start a run estimated to need more memory than this
    /// (bytes, or 4g, 512m...); `wbsim check` applies the same limit.
    #[arg(long, value_name = "SIZE", default_value = "4g",
          value_parser = crate::experiment::validate::parse_max_memory)]
    pub max_memory: u64,
    /// Write the model's trace events (kernel tracepoint names) to this file;
    /// one run only (`--variant NAME --repeat 1`).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// With --trace: keep only these tracepoints (comma-separated names,
    /// e.g. `inode_switch_wbs,writeback_start`).
    #[arg(long, value_name = "NAMES", value_delimiter = ',', requires = "trace")]
    pub trace_events: Vec<String>,
    /// Print fio's own output of each run instead of wbsim's summary:
    /// normal, json, json+, or a comma list (fio's `--output-format`).
    #[arg(long, value_name = "FORMAT", value_parser = fio_output::parse_output_formats)]
    pub output_format: Option<fio_output::OutputFormats>,
    /// Write the `--output-format` output to this file instead of stdout
    /// (fio's `--output`).
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Where fio log files (`write_bw_log`...) go (default: the current
    /// directory, as fio).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub log_dir: PathBuf,
}

/// A progress bar of one run's simulated time on stderr, shown only on a
/// terminal and only once the run has taken [`BAR_AFTER`] of wall time.
struct SimBar {
    /// Wall time the run started.
    started: std::time::Instant,
    /// The bar, once shown.
    bar: Option<indicatif::ProgressBar>,
    /// Whether stderr is a terminal.
    tty: bool,
    /// What runs.
    label: String,
}

/// Wall time after which a run shows its progress bar.
const BAR_AFTER: std::time::Duration = std::time::Duration::from_secs(3);

impl SimBar {
    fn new(label: String) -> SimBar {
        use std::io::IsTerminal;
        SimBar {
            started: std::time::Instant::now(),
            bar: None,
            tty: std::io::stderr().is_terminal(),
            label,
        }
    }

    /// Simulated time `now_ns` of at most `limit_ns`.
    fn update(&mut self, now_ns: u64, limit_ns: u64) {
        if !self.tty {
            return;
        }
        if self.bar.is_none() {
            if self.started.elapsed() < BAR_AFTER {
                return;
            }
            let b = indicatif::ProgressBar::new(limit_ns / 1_000_000);
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "{elapsed_precise} [{bar:30}] {msg} simulated {pos}/{len} ms",
            ) {
                b.set_style(style.progress_chars("=> "));
            }
            b.set_message(self.label.clone());
            self.bar = Some(b);
        }
        if let Some(b) = &self.bar {
            b.set_position(now_ns / 1_000_000);
        }
    }

    /// Removes the bar.
    fn finish(self) {
        if let Some(b) = self.bar {
            b.finish_and_clear();
        }
    }
}

/// The file name of one run's results (the same as `wbsim reproduce` writes).
fn results_file_name(r: &Results) -> String {
    format!("{}.json", run_stem(&r.scenario, &r.variant, r.seed))
}

pub fn run(a: Args) -> anyhow::Result<i32> {
    let fio_file = fio_run::is_fio_file(&a.scenario);
    let sc = if fio_file {
        let duration_ns = a
            .duration
            .as_deref()
            .map(|d| scenario::parse_duration(d).map_err(|e| anyhow::anyhow!("--duration: {e}")))
            .transpose()?;
        let target = fio_run::Target {
            machine: a
                .machine
                .clone()
                .unwrap_or_else(|| fio_run::DEFAULT_MACHINE.to_string()),
            fs: a
                .fs
                .clone()
                .unwrap_or_else(|| fio_run::DEFAULT_FS.to_string()),
            device: a
                .device
                .clone()
                .unwrap_or_else(|| fio_run::DEFAULT_DEVICE.to_string()),
            duration_ns,
        };
        fio_run::build(&a.scenario, &target)?.0
    } else {
        for (flag, given) in [
            ("--machine", a.machine.is_some()),
            ("--fs", a.fs.is_some()),
            ("--device", a.device.is_some()),
            ("--duration", a.duration.is_some()),
        ] {
            if given {
                anyhow::bail!(
                    "{flag} is for fio job files; {} is a scenario, whose [machine], \
                     [[device]], [[filesystem]] and duration are in the file",
                    a.scenario.display()
                );
            }
        }
        scenario::load(&a.scenario)?
    };
    // The checks `wbsim check` makes, so input errors stop the run before
    // it starts, located in the file.
    crate::experiment::validate::validate_with_limit(&sc, a.max_memory, a.per_job)?;
    for v in &a.variants {
        if !sc.variant_names().contains(&v.as_str()) {
            anyhow::bail!(
                "--variant {v}: {} has no such variant (variants: {})",
                a.scenario.display(),
                sc.variant_names().join(", ")
            );
        }
    }
    let opts = RunOptions {
        quick: a.quick,
        repeat: a.repeat,
        trace: a
            .trace
            .clone()
            .map(|path| crate::experiment::runner::TraceOptions {
                path,
                events: a.trace_events.clone(),
            }),
        per_job: a.per_job,
    };
    let mut runs = plan(&sc, &opts)?;
    if !a.variants.is_empty() {
        runs.retain(|(v, _)| a.variants.contains(&v.name));
    }
    if let Some(s) = a.seed {
        let base = sc.seed;
        for (_, seed) in runs.iter_mut() {
            *seed = s + (*seed - base);
        }
    }
    let json_out = a
        .out
        .as_ref()
        .is_some_and(|p| p.extension().is_some_and(|e| e == "json"));
    if json_out && runs.len() != 1 {
        anyhow::bail!(
            "--out {}: a .json file holds one run, and this is {} runs (variants x repeat); \
             give a directory, or --variant NAME --repeat 1",
            a.out
                .as_deref()
                .map_or(String::new(), |p| p.display().to_string()),
            runs.len()
        );
    }
    if let (Some(t), true) = (&a.trace, runs.len() != 1) {
        anyhow::bail!(
            "--trace {}: a trace holds one run, and this is {} runs (variants x repeat); \
             give --variant NAME --repeat 1",
            t.display(),
            runs.len()
        );
    }
    let single_file = json_out;
    let dir = if single_file {
        if let Some(parent) = a.out.as_deref().and_then(Path::parent) {
            if !parent.as_os_str().is_empty() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| anyhow::anyhow!("--out {}: {e}", parent.display()))?;
            }
        }
        None
    } else {
        let d = a.out.clone().unwrap_or_else(|| PathBuf::from("results"));
        std::fs::create_dir_all(&d).map_err(|e| anyhow::anyhow!("--out {}: {e}", d.display()))?;
        Some(d)
    };
    let mut failed = 0;
    let mut fio_text = String::new();
    for (v, seed) in &runs {
        let mut bar = SimBar::new(format!("{} [{}] seed {seed}", sc.name, v.name));
        let res = run_one_with_progress(&sc, v, *seed, &opts, &mut |now, limit| {
            bar.update(now, limit)
        });
        bar.finish();
        match res {
            Ok(mut r) => {
                r.host.date = Host::now();
                let jobs = annotate(&mut r, &sc, &v.name);
                for p in fio_output::write_logs(&r, &jobs, &a.log_dir)? {
                    eprintln!("wbsim run: fio log {}", p.display());
                }
                let path = match (&dir, &a.out) {
                    (Some(d), _) => d.join(results_file_name(&r)),
                    (None, Some(f)) => f.clone(),
                    (None, None) => PathBuf::from(results_file_name(&r)),
                };
                r.save(&path)?;
                if let Some(formats) = &a.output_format {
                    fio_text.push_str(&fio_output::render(&r, &jobs, &formats.0));
                    eprintln!("wbsim run: results -> {}", path.display());
                } else if let Err(e) = print_summary(&mut std::io::stdout().lock(), &r, &path)
                    .and_then(|_| {
                        std::io::stdout()
                            .lock()
                            .write_all(fio_output::job_summary(&r, &jobs).as_bytes())
                    })
                {
                    // `wbsim run ... | head`: stop printing, keep running.
                    if e.kind() != std::io::ErrorKind::BrokenPipe {
                        return Err(e.into());
                    }
                }
                for j in &r.unfinished_jobs {
                    eprintln!(
                        "wbsim run: job '{j}' did not finish its size before the run ended \
                         (at {} of simulated time); its numbers cover only what it did",
                        scenario::format_duration(sc.run_duration_ns(a.quick))
                    );
                }
                if !r.invariants.violations.is_empty() {
                    failed += 1;
                }
            }
            Err(e) => {
                eprintln!("wbsim run: {e}");
                failed += 1;
            }
        }
    }
    if a.output_format.is_some() {
        match &a.output {
            Some(p) => std::fs::write(p, &fio_text)
                .map_err(|e| anyhow::anyhow!("--output {}: {e}", p.display()))?,
            None => {
                let mut out = std::io::stdout().lock();
                if let Err(e) = out.write_all(fio_text.as_bytes()) {
                    if e.kind() != std::io::ErrorKind::BrokenPipe {
                        return Err(e.into());
                    }
                }
            }
        }
    } else if a.output.is_some() {
        anyhow::bail!("--output is where --output-format's output goes; give --output-format too");
    }
    Ok(if failed > 0 { 1 } else { 0 })
}

/// What `wbsim run` and `wbsim reproduce` add to a run's results besides
/// the runner's: the fio options accepted but not modelled, and the jobs
/// whose I/O fell short of their size (the runner flags those still
/// running at the end). Returns the variant's fio jobs.
pub fn annotate(
    r: &mut Results,
    sc: &scenario::Scenario,
    variant: &str,
) -> Vec<crate::workload::fio::FioJob> {
    let (jobs, not_modelled) = scenario_fio_jobs(sc, variant);
    r.not_modelled = not_modelled;
    for j in unfinished_jobs(r, &jobs) {
        if !r.unfinished_jobs.contains(&j) {
            r.unfinished_jobs.push(j);
        }
    }
    jobs
}

/// The fio jobs of the scenario's `[[job]]`s that run in `variant`, and
/// their options accepted but not modelled (once each).
fn scenario_fio_jobs(
    sc: &scenario::Scenario,
    variant: &str,
) -> (
    Vec<crate::workload::fio::FioJob>,
    Vec<crate::workload::fio::NotModelled>,
) {
    let mut jobs = Vec::new();
    let mut nm: Vec<crate::workload::fio::NotModelled> = Vec::new();
    for j in sc.jobs_for(variant) {
        // The runner parsed the same text successfully; a failure here
        // cannot happen, and would only lose the annotations.
        if let Ok(jf) =
            crate::workload::fio::parse_str_at(&j.fio.text, &j.fio.origin, j.fio.line_offset)
        {
            for n in jf.not_modelled {
                if !nm.iter().any(|m| m.option == n.option) {
                    nm.push(n);
                }
            }
            jobs.extend(jf.jobs);
        }
    }
    (jobs, nm)
}

/// Jobs that did not do their `size` x `loops` and were not stopped by their
/// own `runtime=`: the run's end cut them off. Names as in `r.jobs` (fio's
/// job names), once each.
pub fn unfinished_jobs(r: &Results, jobs: &[crate::workload::fio::FioJob]) -> Vec<String> {
    let mut out = Vec::new();
    for j in &r.jobs {
        let Some(name) = j.get("jobname").and_then(|n| n.as_str()) else {
            continue;
        };
        let base = jobs.iter().find(|f| {
            f.name == name
                || name
                    .strip_prefix(f.name.as_str())
                    .and_then(|rest| rest.strip_prefix('.'))
                    .is_some_and(|n| n.parse::<u32>().is_ok())
        });
        let Some(job) = base else { continue };
        if job.time_based {
            continue;
        }
        // A job's own name is its shared entry (group_reporting, or
        // clones aggregated beyond the per-job detail limit); `NAME.N` a
        // clone's.
        let clones = if name == job.name {
            u64::from(job.numjobs)
        } else {
            1
        };
        let want = job
            .io_size_bytes()
            .saturating_mul(u64::from(job.loops))
            .saturating_mul(clones);
        let done: u64 = ["read", "write"]
            .iter()
            .filter_map(|d| j.get(*d)?.get("io_bytes")?.as_u64())
            .sum();
        let runtime_ms = j.get("job_runtime").and_then(|v| v.as_u64()).unwrap_or(0);
        let hit_runtime = job
            .runtime_ns
            .is_some_and(|rt| runtime_ms.saturating_mul(1_000_000) + 1_000_000 >= rt);
        let failed = j.get("error").and_then(|e| e.as_u64()).unwrap_or(0) != 0;
        // Clones fio reports under one name are listed once.
        if done < want && !hit_runtime && !failed && !out.iter().any(|o| o == name) {
            out.push(name.to_string());
        }
    }
    out
}

/// Prints one run's results: its metrics (histograms with mean and
/// percentiles, scalars with their value) and the invariant check.
pub fn print_summary(out: &mut impl Write, r: &Results, path: &Path) -> std::io::Result<()> {
    writeln!(
        out,
        "== {} [{}] seed {}  ({:.1}s wall)  -> {}",
        r.scenario,
        r.variant,
        r.seed,
        r.host.wall_time_s,
        path.display()
    )?;
    let w = r
        .metrics
        .keys()
        .map(String::len)
        .max()
        .unwrap_or(10)
        .min(48);
    writeln!(
        out,
        "  {:<w$} {:>12} {:>7} {:>12} {:>12} {:>12} {:>12}  unit",
        "metric", "mean|value", "+-sd%", "p50", "p99", "p99.9", "max"
    )?;
    for (name, m) in &r.metrics {
        let f = |s: &str| {
            m.stat(s)
                .map_or("-".to_string(), |v| fmt_value(v, m.unit(), s == "mean"))
        };
        if m.stat("value").is_some() {
            writeln!(
                out,
                "  {name:<w$} {:>12} {:>12} {:>12} {:>12} {:>12}  {}",
                f("value"),
                "",
                "",
                "",
                "",
                m.unit()
            )?;
        } else {
            let sd = match (m.stat("stddev"), m.stat("mean")) {
                (Some(sd), Some(mean)) if mean != 0.0 && sd.is_finite() => {
                    format!("{:.1}%", 100.0 * sd / mean.abs())
                }
                _ => "-".to_string(),
            };
            writeln!(
                out,
                "  {name:<w$} {:>12} {:>7} {:>12} {:>12} {:>12} {:>12}  {} (n={})",
                f("mean"),
                sd,
                f("p50"),
                f("p99"),
                f("p99.9"),
                f("max"),
                m.unit(),
                m.stat("count")
                    .map_or("-".to_string(), |c| format!("{c:.0}"))
            )?;
        }
    }
    for j in &r.unfinished_jobs {
        writeln!(
            out,
            "  NOT FINISHED: job '{j}' did not do its size before the run ended"
        )?;
    }
    if let Some(jr) = &r.job_reporting {
        writeln!(out, "  fio jobs reported {}: {}", jr.mode, jr.note)?;
    }
    for n in &r.not_modelled {
        writeln!(
            out,
            "  not modelled: {} ({}:{}): {}",
            n.option, n.origin, n.line, n.why
        )?;
    }
    let inv = &r.invariants;
    if inv.violations.is_empty() {
        writeln!(out, "  invariants: {} checks, no violation", inv.checked)?;
    } else {
        writeln!(out, "  invariants: {} VIOLATION(S):", inv.violations.len())?;
        for v in inv.violations.iter().take(PRINTED_VIOLATIONS) {
            writeln!(out, "    {v}")?;
        }
        if inv.violations.len() > PRINTED_VIOLATIONS {
            writeln!(
                out,
                "    ... and {} more",
                inv.violations.len() - PRINTED_VIOLATIONS
            )?;
        }
        writeln!(
            out,
            "  (the run exits non-zero; each violation's invariant, time and objects are in the results' invariants.violations)"
        )?;
    }
    Ok(())
}

/// Invariant violations printed by [`print_summary`] (all are in the
/// results file).
const PRINTED_VIOLATIONS: usize = 20;
/// Units whose values are whole numbers (counts of things).
const COUNT_UNITS: &[&str] = &["count", "events", "pages", "rounds"];

/// A value of a metric in `unit`: counts as integers (a mean of counts may
/// have a fraction), anything else by [`fmt_num`].
pub fn fmt_value(v: f64, unit: &str, is_mean: bool) -> String {
    if !is_mean
        && COUNT_UNITS.contains(&unit)
        && v.is_finite()
        && v.fract() == 0.0
        && v.abs() < 1e15
    {
        format!("{v:.0}")
    } else {
        fmt_num(v)
    }
}

/// A number with a sensible number of digits.
pub fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e6 {
        format!("{v:.3e}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.3}")
    } else {
        format!("{v:.4}")
    }
}
