//! The few lines that describe an experiment's setup in the report: the
//! published setup and switch (catalog), the modelled machine, devices and
//! filesystems and the policies each variant sets (from the results'
//! `model` parameters), and what ran.
//!
//! Plain text; the writers escape it. Leaves out the workload's detail
//! (fio jobs, actors): results files do not carry the scenario text.

use std::collections::BTreeMap;

use super::group::ExperimentGroup;
use crate::experiment::results::ModelParams;
use crate::experiment::scenario::format_size;

/// `(heading, text)` lines for `g`.
pub fn lines(g: &ExperimentGroup<'_>) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    match g.experiment {
        Some(e) => {
            out.push(("Published setup", e.setup.to_string()));
            if !e.published_note.is_empty() {
                out.push(("Published", e.published_note.to_string()));
            }
        }
        None => out.push((
            "Scenario",
            format!("{} (not one of the built-in experiments)", g.id),
        )),
    }
    if let Some(r) = g.first_run() {
        out.push(("Model", model(&r.model)));
        if let Some(p) = policies(g) {
            out.push(("Variants", p));
        }
    }
    if let Some(s) = sweep(g) {
        out.push(("Sweep", s));
    }
    out.push(("Runs", runs(g)));
    out
}

fn model(m: &ModelParams) -> String {
    let mc = &m.machine;
    let mut s = format!(
        "{} CPUs, {} RAM, {}{}, HZ={}",
        mc.cpus,
        format_size(mc.memory_bytes),
        if mc.preempt_rt {
            "PREEMPT_RT"
        } else {
            "non-RT"
        },
        if mc.rcu_normal_after_boot {
            ", rcu_normal_after_boot"
        } else {
            ""
        },
        mc.hz
    );
    if mc.rcu_nocbs {
        s.push_str(", rcu_nocbs=all");
    }
    if let Some(w) = mc.rcu_normal_wake_from_gp {
        s.push_str(&format!(", rcu_normal_wake_from_gp={}", u8::from(w)));
    }
    for d in &m.devices {
        s.push_str(&format!(
            "; device {} ({}: write {} MB/s, read {} MB/s, QD {})",
            d.name,
            d.profile,
            d.params.write_bw_bytes_per_sec / 1_000_000,
            d.params.read_bw_bytes_per_sec / 1_000_000,
            d.params.queue_depth
        ));
    }
    for f in &m.filesystems {
        s.push_str(&format!("; {} {}", f.fs_type.name(), f.name));
        if let Some(d) = &f.device {
            s.push_str(&format!(" on {d}"));
        }
        let opts: Vec<String> = f
            .options
            .iter()
            .map(|(k, v)| match v {
                crate::experiment::scenario::FsOption::Str(x) => format!("{k}={x}"),
                other => format!("{k}={}", serde_json::to_string(other).unwrap_or_default()),
            })
            .collect();
        if !opts.is_empty() {
            s.push_str(&format!(" ({})", opts.join(", ")));
        }
    }
    s.push_str(&format!("; wbsim {}", m.version));
    s
}

/// The policy keys whose values differ between variant names, per name.
fn policies(g: &ExperimentGroup<'_>) -> Option<String> {
    let mut per_name: Vec<(&str, BTreeMap<String, serde_json::Value>)> = Vec::new();
    for v in &g.variants {
        if per_name.iter().any(|(n, _)| *n == v.name) {
            continue;
        }
        let Some(r) = v.runs.first() else { continue };
        let map = serde_json::to_value(r.model.policies)
            .ok()
            .and_then(|x| x.as_object().cloned())
            .map(|o| o.into_iter().collect())
            .unwrap_or_default();
        per_name.push((&v.name, map));
    }
    let first = &per_name.first()?.1;
    let differing: Vec<&String> = first
        .keys()
        .filter(|k| per_name.iter().any(|(_, m)| m.get(*k) != first.get(*k)))
        .filter(|k| {
            !g.variants
                .iter()
                .any(|v| v.sweep.as_ref().is_some_and(|s| s.0.ends_with(k.as_str())))
        })
        .collect();
    let parts: Vec<String> = per_name
        .iter()
        .map(|(n, m)| {
            let set: Vec<String> = differing
                .iter()
                .map(|k| {
                    let v = m.get(*k).cloned().unwrap_or_default();
                    format!(
                        "{k}={}",
                        v.as_str().map_or_else(|| v.to_string(), str::to_string)
                    )
                })
                .collect();
            if set.is_empty() {
                n.to_string()
            } else {
                format!("{n}: {}", set.join(", "))
            }
        })
        .collect();
    Some(parts.join("; "))
}

fn sweep(g: &ExperimentGroup<'_>) -> Option<String> {
    let mut key = None;
    let mut values: Vec<&str> = Vec::new();
    for v in &g.variants {
        if let Some((k, x)) = &v.sweep {
            key.get_or_insert(k.as_str());
            if !values.contains(&x.as_str()) {
                values.push(x);
            }
        }
    }
    Some(format!("{} = {}", key?, values.join(", ")))
}

fn runs(g: &ExperimentGroup<'_>) -> String {
    let seeds: Vec<u64> = g.variants.iter().flat_map(|v| v.seeds()).collect();
    let (lo, hi) = (seeds.iter().min(), seeds.iter().max());
    let mut s = format!(
        "{} ok, {} failed, {} variant label(s)",
        g.ok_runs(),
        g.failed_runs(),
        g.variants.len()
    );
    if let (Some(lo), Some(hi)) = (lo, hi) {
        if lo == hi {
            s.push_str(&format!(", seed {lo}"));
        } else {
            s.push_str(&format!(", seeds {lo}..={hi}"));
        }
    }
    // Jobs the run's end cut off before their size: their rates cover only
    // what they did.
    let cut: Vec<String> = g
        .variants
        .iter()
        .flat_map(|v| {
            v.runs
                .iter()
                .filter(|r| !r.unfinished_jobs.is_empty())
                .map(|r| {
                    format!(
                        "{} seed {}: {}",
                        v.label,
                        r.seed,
                        r.unfinished_jobs.join(", ")
                    )
                })
        })
        .collect();
    if !cut.is_empty() {
        s.push_str(&format!(
            "; jobs cut off by the run's end (rates cover what they did): {}",
            cut.join("; ")
        ));
    }
    s
}

/// Why an experiment has no results, if it has none.
pub fn pending(g: &ExperimentGroup<'_>) -> Option<String> {
    if g.ok_runs() + g.failed_runs() > 0 {
        return None;
    }
    Some(match g.experiment {
        Some(e) if e.scenario.is_none() => format!(
            "Still to come: no built-in scenario yet (comes with {}).",
            e.comes_with
        ),
        _ => "No results for this experiment in the inputs.".to_string(),
    })
}

/// What the headline table's columns mean (shown above it).
pub const HEADLINE_NOTE: &str = "Baseline = the switch's first side; each other side is \
    compared with it at the same sweep point. Values are means over repetitions (seeds); \
    change = (patched - baseline) / baseline; significance: Welch's two-sided t-test over \
    the repetitions (p < 0.05 = significant; one run per side: n too small). \
    sim/published: the ratio to the published figure, marked \"outside 1.5x\" when it is \
    more than 1.5x off either way (not an agreement), n/a when nothing was published.";

/// The document's opening line (no date or host: reports are reproducible).
pub fn preamble(groups: &[ExperimentGroup<'_>], files: usize) -> String {
    let ok: usize = groups.iter().map(ExperimentGroup::ok_runs).sum();
    let failed: usize = groups.iter().map(ExperimentGroup::failed_runs).sum();
    format!(
        "Made by wbsim {} from {files} results file(s): {ok} run(s) ok, {failed} failed. \
         Simulated figures are means over repetitions (± the standard deviation of the \
         mean across repetitions); ratios are simulated / published or simulated / live \
         (1.000x = equal); n/a = not measured (yet).",
        env!("CARGO_PKG_VERSION")
    )
}

/// Live groups that match no experiment with runs or catalog entry.
pub fn unmatched_live<'g, 'a>(
    groups: &[ExperimentGroup<'_>],
    live: &'g [ExperimentGroup<'a>],
) -> Vec<&'g ExperimentGroup<'a>> {
    live.iter()
        .filter(|l| l.ok_runs() > 0 && !groups.iter().any(|g| g.id == l.id))
        .collect()
}

/// The live group of `g`'s experiment, if it has runs.
pub fn live_for<'g, 'a>(
    g: &ExperimentGroup<'_>,
    live: &'g [ExperimentGroup<'a>],
) -> Option<&'g ExperimentGroup<'a>> {
    live.iter().find(|l| l.id == g.id && l.ok_runs() > 0)
}
