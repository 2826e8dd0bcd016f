//! Checks of a loaded scenario that need its fio jobs parsed: everything a
//! run would otherwise only find out while running. `wbsim check` and `wbsim
//! run` both call [`validate`] before anything runs, so an input error is
//! reported the same way by both, with the fio option's file and line. Not
//! kernel code.
//!
//! Checked here (beyond what [`super::scenario::load`] checks):
//! - every `[[job]]`'s fio text parses (file:line:option errors);
//! - every file a job would open lies on one of the scenario's
//!   filesystems (the run opens files by mount point; a path such as
//!   `filename=/dev/nvme0n1` is on none and would fail mid-run);
//! - every job has a file size (`size=` or `filesize=`);
//! - the run's memory, estimated from its fio clones before it starts
//!   ([`estimate_bytes`]), fits the limit (`--max-memory`, default
//!   [`DEFAULT_MAX_MEMORY`]); otherwise the error names the estimate and
//!   the `numjobs` line of the job responsible;
//! - an `[[actor]]` with `instances > 1` names the cgroups it makes with
//!   `{instance}` (otherwise the instances share one cgroup and the first
//!   `cgroup_rmdir` makes the others' fail mid-run).

use super::scenario::Scenario;
use crate::workload::actor::StepOp;
use crate::workload::fio::{self, FioJob};

/// What a valid scenario holds (for `check`'s summary).
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// fio job sections over all `[[job]]` tables.
    pub fio_jobs: usize,
    /// Clones (`numjobs` summed over the sections).
    pub clones: u64,
    /// Estimated peak memory of one run, bytes ([`estimate_bytes`]).
    pub est_bytes: u64,
}

/// Default `--max-memory`: 4 GiB (a run of the built-in scenarios needs
/// well under 100 MiB; 100,000 clones with `group_reporting` about 1 GiB).
pub const DEFAULT_MAX_MEMORY: u64 = 4 << 30;

/// Fixed part of a run's peak RSS, bytes: `wbsim run` of one 1 MiB fio job
/// peaks at 8.2 MB (GNU time, scripts/bench-scale.sh, this 2-CPU machine,
/// debug profile at opt-level 1).
const BASE_BYTES: u64 = 8 << 20;

/// Peak RSS per fio clone when clones share one stats entry
/// (`group_reporting`), bytes: 30,000 clones peaked at 317 MB, 100,000 at
/// 1,034 MB, i.e. 10.3 KiB each (scripts/bench-scale.sh); rounded up.
const PER_CLONE_BYTES: u64 = 11 << 10;

/// Peak RSS per separate per-clone stats entry (no `group_reporting`: each
/// clone keeps its own latency histograms and results entry), bytes: 1,000
/// clones peaked at 339 MB and 3,000 at 1,060 MB, about 350 KiB each
/// (scripts/bench-scale.sh).
const PER_STATS_ENTRY_BYTES: u64 = 350 << 10;

/// Estimated peak memory of a run of `job` (its clones and stats entries).
pub fn estimate_bytes(job: &FioJob) -> u64 {
    let clones = u64::from(job.numjobs);
    let entries = if job.group_reporting { 1 } else { clones };
    clones
        .saturating_mul(PER_CLONE_BYTES)
        .saturating_add(entries.saturating_mul(PER_STATS_ENTRY_BYTES))
}

/// The absolute path of fio file name `f` under mount point `root` (as the
/// run resolves it).
fn resolve(root: &str, f: &str) -> String {
    if f.starts_with('/') {
        f.to_string()
    } else {
        format!("{}/{}", root.trim_end_matches('/'), f)
    }
}

/// Whether `path` lies on a filesystem mounted at one of `mountpoints`.
fn on_a_filesystem(mountpoints: &[&str], path: &str) -> bool {
    mountpoints.iter().any(|m| {
        path.strip_prefix(m.trim_end_matches('/'))
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    })
}

/// Checks one fio job of a `[[job]]` rooted at `root`.
fn check_job(job: &FioJob, root: &str, mountpoints: &[&str]) -> Result<(), fio::FioError> {
    let option = if job.filename.is_some() {
        "filename"
    } else {
        "directory"
    };
    // Clones differ only in generated file names, never in directory.
    if let Some(inst) = job.instances().first() {
        for f in &inst.files {
            let p = resolve(root, f);
            if !on_a_filesystem(mountpoints, &p) {
                return Err(job.error_at(
                    option,
                    format!(
                        "{option}: file {p} is on no filesystem of the scenario (mount points: {}); \
                         the simulator has no raw devices or host paths",
                        if mountpoints.is_empty() {
                            "none".to_string()
                        } else {
                            mountpoints.join(", ")
                        }
                    ),
                ));
            }
        }
    }
    // A job without size= or filesize= takes its files' size when it opens
    // them (the parser accepted it: a device, fill_device, or a file an
    // earlier job lays out).
    let sized = job.size_bytes.is_some() || job.filesize_bytes.is_some();
    if sized && job.file_size_bytes() == 0 {
        return Err(job.error_at("size", "size: no file size: set size= or filesize="));
    }
    Ok(())
}

/// Runs the checks above with the default memory limit.
pub fn validate(sc: &Scenario) -> anyhow::Result<Summary> {
    validate_with_limit(sc, DEFAULT_MAX_MEMORY)
}

/// Runs the checks above on every `[[job]]`, refusing a run estimated to
/// need more than `max_memory` bytes; the first error, located.
pub fn validate_with_limit(sc: &Scenario, max_memory: u64) -> anyhow::Result<Summary> {
    let mountpoints: Vec<&str> = sc
        .filesystems
        .iter()
        .map(|f| f.mountpoint.as_str())
        .collect();
    let mut s = Summary {
        est_bytes: BASE_BYTES,
        ..Summary::default()
    };
    // The job costing most, for the refusal.
    let mut worst: Option<(u64, FioJob)> = None;
    for j in &sc.jobs {
        let jf = fio::parse_str_at(&j.fio.text, &j.fio.origin, j.fio.line_offset)?;
        let root = match &j.filesystem {
            Some(n) => match sc.filesystem(n) {
                Some(f) => f.mountpoint.as_str(),
                None => anyhow::bail!("[[job]] at line {}: no filesystem '{n}'", j.line),
            },
            None => "/",
        };
        for job in &jf.jobs {
            check_job(job, root, &mountpoints)?;
            s.clones += u64::from(job.numjobs);
            let est = estimate_bytes(job);
            s.est_bytes = s.est_bytes.saturating_add(est);
            if worst.as_ref().is_none_or(|(w, _)| est > *w) {
                worst = Some((est, job.clone()));
            }
        }
        s.fio_jobs += jf.jobs.len();
    }
    if s.est_bytes > max_memory {
        let mib = |b: u64| b >> 20;
        let why = format!(
            "numjobs: the run would need about {} MiB (estimated before starting: {} fio \
             clone(s)), over --max-memory {} MiB; this job alone about {} MiB{}",
            mib(s.est_bytes),
            s.clones,
            mib(max_memory),
            mib(worst.as_ref().map_or(0, |w| w.0)),
            if worst.as_ref().is_some_and(|w| !w.1.group_reporting) {
                " (without group_reporting every clone keeps its own statistics, about \
                 350 KiB each; group_reporting shares them)"
            } else {
                ""
            }
        );
        match worst {
            Some((_, job)) => return Err(job.error_at("numjobs", why).into()),
            None => anyhow::bail!("{}: {why}", sc.origin()),
        }
    }
    for a in &sc.actors {
        if a.instances <= 1 {
            continue;
        }
        for st in &a.steps {
            if let StepOp::CgroupMkdir { name, .. } = &st.op {
                if !name.contains("{instance}") {
                    anyhow::bail!(
                        "{}:{}: actor.steps.name: actor '{}' has {} instances and each makes \
                         cgroup '{name}': name it per instance (e.g. '{name}{{instance}}'), \
                         or the first instance's cgroup_rmdir removes the others' cgroup",
                        sc.origin(),
                        st.line,
                        a.name,
                        a.instances
                    );
                }
            }
        }
    }
    Ok(s)
}

/// Parses a `--max-memory` value: bytes, or a number with `k`, `m`, `g` or
/// `t` (binary units, optional `iB`/`b`), e.g. `4g`, `512MiB`.
pub fn parse_max_memory(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let t = t.trim_end_matches("ib").trim_end_matches('b');
    let (num, shift) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 10),
        Some('m') => (&t[..t.len() - 1], 20),
        Some('g') => (&t[..t.len() - 1], 30),
        Some('t') => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    let n: u64 = num
        .trim()
        .parse()
        .map_err(|_| format!("'{s}': expected bytes or a size such as 4g or 512m"))?;
    n.checked_mul(1u64 << shift)
        .filter(|&b| b > 0)
        .ok_or_else(|| format!("'{s}': out of range (1 byte to 16 EiB)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_memory_sizes() {
        assert_eq!(parse_max_memory("4g"), Ok(4 << 30));
        assert_eq!(parse_max_memory("512MiB"), Ok(512 << 20));
        assert_eq!(parse_max_memory("1000"), Ok(1000));
        assert!(parse_max_memory("0").is_err());
        assert!(parse_max_memory("lots").is_err());
        assert!(parse_max_memory("99999999999t").is_err());
    }
}
