//! Speed and memory of the built-in experiments' full runs: every variant
//! and sweep point of each experiment's scenario, as `wbsim reproduce` runs
//! them (one run per thread, as many threads as CPUs), against the targets
//! their issues set:
//!
//! - E1 `cgwb-umount`: the whole scenario, both variants, under 60 s wall;
//! - E2 `btrfs-csum-commit-root`: each variant under 60 s wall and 1 GiB;
//! - E3 `lazy-umount`: no target (printed for reference);
//! - E4 `parallel-writeback`: the whole sweep (8 points x 3 policies) under
//!   60 s wall; about seven minutes on a 2-CPU machine, so only when named;
//! - E5 `dontcache`: `benches/dontcache_speed.rs`.
//!
//! `cargo bench -p wbsim --bench experiment_speed` runs E1, E2 and E3;
//! name the experiments to choose (`-- E4`, `-- E1 E4`). Each run is its
//! own child process (this binary with `--one`), so each run's wall time
//! and peak RSS are its own, not the pool's.

use std::process::Command;
use std::time::Instant;

use rayon::prelude::*;
use wbsim::experiment::catalog;
use wbsim::experiment::runner::{plan, run_one, RunOptions};

mod common;
use common::{met, vm_hwm_kib};

/// Wall-time targets of the whole scenario (all runs), s.
fn total_target_s(code: &str) -> Option<f64> {
    match code {
        "E1" | "E4" => Some(60.0),
        _ => None,
    }
}

/// Per-run targets: wall s, peak RSS MiB.
fn run_targets(code: &str) -> Option<(f64, f64)> {
    match code {
        "E2" => Some((60.0, 1024.0)),
        _ => None,
    }
}

/// The child: runs one planned run and prints "WALL_S SIM_S HWM_KIB".
fn one(code: &str, index: usize) {
    let e = catalog::find(code).unwrap_or_else(|| panic!("{code}: no such experiment"));
    let s = e
        .load_scenario()
        .unwrap_or_else(|| panic!("{code}: no scenario"))
        .unwrap_or_else(|err| panic!("{err}"));
    let opts = RunOptions::default();
    let runs = plan(&s, &opts).unwrap_or_else(|err| panic!("{err}"));
    let (v, seed) = &runs[index];
    let t = Instant::now();
    let r = run_one(&s, v, *seed, &opts).unwrap_or_else(|err| panic!("{err}"));
    println!(
        "{} {} {}",
        t.elapsed().as_secs_f64(),
        r.stat("run.simulated_time", "value").unwrap_or(f64::NAN),
        vm_hwm_kib().unwrap_or(0)
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == "--one") {
        let index = args[i + 2].parse().expect("run index");
        one(&args[i + 1], index);
        return;
    }
    let mut codes: Vec<String> = args
        .iter()
        .filter(|a| !a.starts_with("--"))
        .map(|a| a.to_uppercase())
        .collect();
    if codes.is_empty() {
        codes = vec!["E1".into(), "E2".into(), "E3".into()];
    }
    let me = std::env::current_exe().expect("this binary");
    for code in &codes {
        let e = catalog::find(code).unwrap_or_else(|| panic!("{code}: no such experiment"));
        let Some(scenario) = e.load_scenario() else {
            println!("{code} {}: no scenario", e.id);
            continue;
        };
        let s = scenario.unwrap_or_else(|err| panic!("{err}"));
        let runs = plan(&s, &RunOptions::default()).unwrap_or_else(|err| panic!("{err}"));
        let t = Instant::now();
        let rows: Vec<(String, f64, f64, f64)> = (0..runs.len())
            .into_par_iter()
            .map(|i| {
                let out = Command::new(&me)
                    .args(["--one", code, &i.to_string()])
                    .output()
                    .expect("run the child");
                assert!(
                    out.status.success(),
                    "{code} run {i}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let text = String::from_utf8_lossy(&out.stdout);
                let v: Vec<f64> = text
                    .split_whitespace()
                    .map(|x| x.parse().expect("a number"))
                    .collect();
                (runs[i].0.label.clone(), v[0], v[1], v[2] / 1024.0)
            })
            .collect();
        let total = t.elapsed().as_secs_f64();
        println!(
            "{code} {}: {} run(s) on {} thread(s)",
            e.id,
            runs.len(),
            rayon::current_num_threads()
        );
        for (label, wall, sim, rss) in &rows {
            let verdict = run_targets(code).map_or(String::new(), |(w, m)| {
                format!(
                    " (targets < {w} s: {}, < {m} MiB: {})",
                    met(*wall < w),
                    met(*rss < m)
                )
            });
            println!("  [{label}] {wall:.2} s wall, {sim:.1} s simulated, peak RSS {rss:.1} MiB{verdict}");
        }
        let verdict = total_target_s(code).map_or(String::new(), |w| {
            format!(" (target < {w} s: {})", met(total < w))
        });
        println!("  whole scenario: {total:.2} s wall{verdict}");
    }
}
