//! `wbsim run SCENARIO`: run a scenario's variants (or the ones named), print
//! a readable summary per run, and write one results JSON per run.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args as ClapArgs;

use crate::experiment::report::input::run_stem;
use crate::experiment::results::Results;
use crate::experiment::runner::{plan, run_one, RunOptions};
use crate::experiment::scenario;

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// The scenario file (TOML).
    pub scenario: PathBuf,
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
    /// Refuse to start a run estimated to need more memory than this
    /// (bytes, or 4g, 512m...); `wbsim check` applies the same limit.
    #[arg(long, value_name = "SIZE", default_value = "4g",
          value_parser = crate::experiment::validate::parse_max_memory)]
    pub max_memory: u64,
}

/// The file name of one run's results (the same as `wbsim reproduce` writes).
fn results_file_name(r: &Results) -> String {
    format!("{}.json", run_stem(&r.scenario, &r.variant, r.seed))
}

pub fn run(a: Args) -> anyhow::Result<i32> {
    let sc = scenario::load(&a.scenario)?;
    // The checks `wbsim check` makes, so input errors stop the run before
    // it starts, located in the file.
    crate::experiment::validate::validate_with_limit(&sc, a.max_memory)?;
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
    for (v, seed) in &runs {
        match run_one(&sc, v, *seed, &opts) {
            Ok(mut r) => {
                r.host.date = crate::cli::today();
                let path = match (&dir, &a.out) {
                    (Some(d), _) => d.join(results_file_name(&r)),
                    (None, Some(f)) => f.clone(),
                    (None, None) => PathBuf::from(results_file_name(&r)),
                };
                r.save(&path)?;
                if let Err(e) = print_summary(&mut std::io::stdout().lock(), &r, &path) {
                    // `wbsim run ... | head`: stop printing, keep running.
                    if e.kind() != std::io::ErrorKind::BrokenPipe {
                        return Err(e.into());
                    }
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
    Ok(if failed > 0 { 1 } else { 0 })
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
        let f = |s: &str| m.stat(s).map_or("-".to_string(), fmt_num);
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
                f("count")
            )?;
        }
    }
    let inv = &r.invariants;
    if inv.violations.is_empty() {
        writeln!(out, "  invariants: {} checks, no violation", inv.checked)?;
    } else {
        writeln!(out, "  invariants: {} VIOLATION(S):", inv.violations.len())?;
        for v in &inv.violations {
            writeln!(out, "    {v}")?;
        }
    }
    Ok(())
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
