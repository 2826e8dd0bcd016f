//! `wbsim probe EXPERIMENT [--out FILE] [--repeat N] [--rounds N] [--strict] [--wait-quiet SECS] [--quick] [--tmpdir DIR]`:
//! run an experiment on the live kernel (Linux, root) and write its results
//! file (same format as the simulator's). First removes what a dead probe
//! left behind (`crate::probe::recover`); `wbsim probe --cleanup
//! [--tmpdir DIR]` does only that. SIGINT/SIGTERM: cleans up, writes the
//! partial results and exits 130/143.

use std::path::PathBuf;

use clap::Args as ClapArgs;

/// Experiments `wbsim probe` runs.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeExperiment {
    /// umount / umount -l latency of tmpfs, xfs, btrfs (clean, dirty, busy).
    Umount,
    /// Buffered vs RWF_DONTCACHE writes on xfs, ext4, btrfs, into empty and fallocated files.
    Dontcache,
    /// 1, 2, 4, 8 sequential buffered writers on xfs, with writeback tracepoints.
    BufferedWrite,
    /// Cross-CPU wakeup latency: a task blocked on idle CPU 1 woken from CPU 0, and back.
    Wakeup,
    /// io_uring writers (iodepth 1 and 16), buffered and RWF_DONTCACHE, seq and rand, xfs and ext4.
    Uring,
    /// Writers past the global dirty limit, and 1/4/16 writers past a 64 MiB bdi dirty cap.
    Pressure,
    /// E4's workload scaled down: 8 random 4 KiB io_uring writers, 8 directories, xfs with 4 AGs.
    ParallelWrite,
}

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// The experiment.
    #[arg(value_enum, required_unless_present = "cleanup")]
    pub experiment: Option<ProbeExperiment>,
    /// Only remove what dead probes (killed, e.g. by SIGKILL) left under
    /// the probe directory base (--tmpdir, else $TMPDIR, else /var/tmp):
    /// their mounts, loop devices, images and directories, each verified
    /// to be theirs; prints what it removed. Exit 0 if clean afterwards.
    #[arg(long, conflicts_with = "experiment")]
    pub cleanup: bool,
    /// Results file to write (default: probe-EXPERIMENT.json).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Repetitions of each measurement within a round (default: 10 for
    /// umount, 1 otherwise).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: Option<u32>,
    /// Rounds: the whole experiment run N times in a row (every job once
    /// per round, so drift hits every job alike); the results pool them and
    /// record each metric's min/median/max across rounds in `live.spread`.
    /// Default 3, or 1 with --quick.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: Option<u32>,
    /// Refuse to start unless the machine is quiet (1-minute load below
    /// 0.6, no other runnable task, CPU steal at most 5%); without it a
    /// busy machine only gives a warning and a note in the results.
    #[arg(long)]
    pub strict: bool,
    /// Before each round, wait up to SECS for the machine to be quiet
    /// (checked every 5 s; the round before stays in the load average for
    /// about a minute); then run (or, before the first round with
    /// --strict, refuse).
    #[arg(long, value_name = "SECS", default_value_t = 0,
          value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub wait_quiet: u64,
    /// Small sizes (200 rounds per direction for wakeup), one repetition
    /// and one round (tests, a first look).
    #[arg(long)]
    pub quick: bool,
    /// Directory to create the probe's temporary directory in (default:
    /// $TMPDIR, else /var/tmp). Must be on a disk, not tmpfs, for direct I/O.
    #[arg(long, value_name = "DIR")]
    pub tmpdir: Option<PathBuf>,
}

#[cfg(target_os = "linux")]
pub fn run(args: Args) -> anyhow::Result<i32> {
    use crate::probe::{self, Experiment, Options};

    if let Some(why) = probe::refusal() {
        eprintln!("wbsim probe: refused: {why}");
        return Ok(3);
    }
    let Some(experiment) = args.experiment.filter(|_| !args.cleanup) else {
        let r = probe::cleanup_stale(args.tmpdir.as_deref())?;
        if r.removed.is_empty() && r.refused.is_empty() {
            println!("nothing to clean up");
        }
        for l in &r.removed {
            println!("removed {l}");
        }
        for l in &r.refused {
            println!("REFUSED {l}");
        }
        return Ok(if r.refused.is_empty() { 0 } else { 1 });
    };
    let experiment = match experiment {
        ProbeExperiment::Umount => Experiment::Umount,
        ProbeExperiment::Dontcache => Experiment::Dontcache,
        ProbeExperiment::BufferedWrite => Experiment::BufferedWrite,
        ProbeExperiment::Wakeup => Experiment::Wakeup,
        ProbeExperiment::Uring => Experiment::Uring,
        ProbeExperiment::Pressure => Experiment::Pressure,
        ProbeExperiment::ParallelWrite => Experiment::ParallelWrite,
    };
    let out = args
        .out
        .unwrap_or_else(|| PathBuf::from(format!("probe-{}.json", experiment.name())));
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let opts = Options {
        experiment,
        repeat: args.repeat.unwrap_or(experiment.default_repeat()),
        rounds: args.rounds.unwrap_or(if args.quick { 1 } else { 3 }),
        strict: args.strict,
        wait_quiet: std::time::Duration::from_secs(args.wait_quiet),
        quick: args.quick,
        tmpdir: args.tmpdir,
        command,
    };
    let outcome = match probe::run(&opts) {
        Ok(o) => o,
        Err(e) => match probe::guard::signalled() {
            // Interrupted before anything was measured.
            Some(sig) => {
                eprintln!("wbsim probe: {e:#}");
                probe::guard::main_exiting();
                return Ok(128 + sig);
            }
            None => return Err(e),
        },
    };
    let results = outcome.results;
    let saved = results.save(&out);
    if let Some(sig) = outcome.interrupted {
        match &saved {
            Ok(()) => eprintln!(
                "wbsim probe: interrupted by {}; partial results in {}",
                probe::guard::signal_name(sig),
                out.display()
            ),
            Err(e) => eprintln!("wbsim probe: interrupted; writing partial results: {e:#}"),
        }
        probe::guard::main_exiting();
        return Ok(128 + sig);
    }
    saved?;
    print_summary(&results);
    println!("wrote {}", out.display());
    Ok(0)
}

#[cfg(not(target_os = "linux"))]
pub fn run(args: Args) -> anyhow::Result<i32> {
    let _ = args;
    eprintln!("wbsim probe: refused: wbsim probe runs on Linux only");
    Ok(3)
}

/// One line per metric: p50 (histograms) or value (scalars).
#[cfg(target_os = "linux")]
fn print_summary(r: &crate::experiment::results::Results) {
    use crate::experiment::metrics::MetricSummary;
    if let Some(l) = &r.live {
        println!(
            "{} on Linux {} ({}), {} CPUs, {:.1} GiB",
            r.scenario,
            l.kernel_release,
            l.preemption,
            l.cpus,
            l.memory_bytes as f64 / (1u64 << 30) as f64
        );
        for n in &l.notes {
            println!("note: {n}");
        }
    }
    for (name, m) in &r.metrics {
        match m {
            MetricSummary::Hist(h) => println!(
                "{name:<48} p50 {:>10.3} p99 {:>10.3} {} (n={})",
                h.p50, h.p99, h.unit, h.count
            ),
            MetricSummary::Scalar(s) => {
                println!("{name:<48} {:>14.3} {}", s.value.as_f64(), s.unit)
            }
        }
    }
}
