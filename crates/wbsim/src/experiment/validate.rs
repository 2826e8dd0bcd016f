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
use crate::workload::fio_exec::{separate_entries, PER_JOB_DETAIL_MAX};
use crate::workload::world::LAT_FEW_MAX;

/// What a valid scenario holds (for `check`'s summary).
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// fio job sections over all `[[job]]` tables.
    pub fio_jobs: usize,
    /// Clones (`numjobs` summed over the sections).
    pub clones: u64,
    /// Estimated peak memory of one run, bytes ([`estimate_bytes`]).
    pub est_bytes: u64,
    /// The run (its largest variant) folds clones into one entry per job
    /// (more than [`PER_JOB_DETAIL_MAX`] separate clones, no per-job detail).
    pub aggregated: bool,
}

/// Default `--max-memory`: 4 GiB (a run of the built-in scenarios needs
/// well under 100 MiB; 100,000 clones, aggregated, under 1 GiB).
pub const DEFAULT_MAX_MEMORY: u64 = 4 << 30;

/// Fixed part of a run's peak RSS, bytes: `wbsim run` of one 1 MiB fio job
/// peaks at 8.2 MB (GNU time, scripts/bench-scale.sh, this 2-CPU machine,
/// debug profile at opt-level 1).
const BASE_BYTES: u64 = 8 << 20;

/// Peak RSS per fio clone (its task, file, inode, page-cache ranges and
/// run state), bytes: 100,000 clones of a 1 MiB sequential write,
/// aggregated, peaked at 582 MB and 1,000 at 15 MB, i.e. 5.7 KiB each
/// (scripts/bench-scale.sh, this 2-CPU machine, debug profile); 7 KiB
/// leaves room for engines with more state per clone (io_uring's ring).
const PER_CLONE_BYTES: u64 = 7 << 10;

/// Peak RSS per statistics entry of a clone doing a few I/Os (the entry,
/// its fio-shaped results object and its ten or so metrics, of which
/// `fio.JOB.clat` and `fio.JOB.lat` are full HDR histograms in the
/// metrics registry), bytes: with `--per-job`, 1,000 clones of a 1 MiB
/// write peaked at 308 MB and 3,000 at 983 MB, i.e. 293-318 KiB per entry
/// beyond the clones themselves (scripts/bench-scale.sh); rounded up.
const PER_ENTRY_BYTES: u64 = 320 << 10;

/// One full latency histogram of a statistics entry, bytes: an HDR
/// histogram of 3 significant digits holds 1,024 counters of 8 bytes per
/// power of two above 2,048 ns, so latencies up to about 4 s (2^32 ns)
/// take (32 - 11 + 2) x 1,024 x 8 bytes = 184 KiB; rounded up.
const DENSE_HIST_BYTES: u64 = 200 << 10;

/// Latency histograms an entry of `job` fills once it has done more than
/// [`LAT_FEW_MAX`] I/Os: clat per direction, slat and lat too for
/// io_uring, fsync latencies with `fsync=`, `end_fsync` or
/// `fsync_on_close`.
fn histograms_per_entry(job: &FioJob) -> u64 {
    let dirs = u64::from(job.rw.reads()) + u64::from(job.rw.writes());
    let per_dir = if job.ioengine == fio::IoEngine::IoUring {
        3
    } else {
        1
    };
    let sync = u64::from(job.fsync_every_writes > 0 || job.end_fsync || job.fsync_on_close);
    dirs * per_dir + sync
}

/// The most I/Os one clone of `job` can do (None: bounded by time only).
fn ios_per_clone(job: &FioJob) -> Option<u64> {
    if job.time_based || job.io_size_bytes() == 0 {
        return None;
    }
    Some(
        job.io_size_bytes()
            .div_ceil(job.random_unit())
            .saturating_mul(u64::from(job.loops.max(1))),
    )
}

/// Estimated peak memory of a run of `job` (its clones and statistics
/// entries), its clones folded into one entry when `shared`
/// (`group_reporting`, or the run aggregates).
pub fn estimate_bytes(job: &FioJob, shared: bool) -> u64 {
    let clones = u64::from(job.numjobs);
    let (entries, clones_per_entry) = if shared { (1, clones) } else { (clones, 1) };
    let hist = match ios_per_clone(job).map(|n| n.saturating_mul(clones_per_entry)) {
        Some(n) if n < LAT_FEW_MAX as u64 => 0,
        _ => histograms_per_entry(job) * DENSE_HIST_BYTES,
    };
    clones
        .saturating_mul(PER_CLONE_BYTES)
        .saturating_add(entries.saturating_mul(PER_ENTRY_BYTES + hist))
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

/// One variant's estimate: total bytes, whether it aggregates, and its
/// costliest job with that job's bytes.
type RunEstimate = (u64, bool, Option<(u64, FioJob)>);

/// Runs the checks above with the default memory limit.
pub fn validate(sc: &Scenario) -> anyhow::Result<Summary> {
    validate_with_limit(sc, DEFAULT_MAX_MEMORY, false)
}

/// Runs the checks above on every `[[job]]`, refusing a run estimated to
/// need more than `max_memory` bytes (with per-clone statistics beyond
/// [`PER_JOB_DETAIL_MAX`] clones when `per_job`, or `[measure] per_job`);
/// the first error, located. The estimate is the largest over the
/// scenario's variants (a `[[job]]` may run in some variants only).
pub fn validate_with_limit(
    sc: &Scenario,
    max_memory: u64,
    per_job: bool,
) -> anyhow::Result<Summary> {
    let per_job = per_job || sc.measure.per_job;
    let mountpoints: Vec<&str> = sc
        .filesystems
        .iter()
        .map(|f| f.mountpoint.as_str())
        .collect();
    let mut s = Summary {
        est_bytes: BASE_BYTES,
        ..Summary::default()
    };
    // Every job's fio jobs, with the variants it runs in.
    let mut parsed: Vec<(&super::scenario::JobConfig, Vec<FioJob>)> = Vec::new();
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
        }
        s.fio_jobs += jf.jobs.len();
        parsed.push((j, jf.jobs));
    }
    // Per variant: the run aggregates beyond PER_JOB_DETAIL_MAX separate
    // clones (as the runner decides), unless per-job detail is asked for.
    let mut worst_run: Option<RunEstimate> = None;
    for v in sc.variant_names() {
        let jobs: Vec<&FioJob> = parsed
            .iter()
            .filter(|(j, _)| j.runs_in(v))
            .flat_map(|(_, js)| js.iter())
            .collect();
        let aggregate = !per_job && separate_entries(jobs.iter().copied()) > PER_JOB_DETAIL_MAX;
        let mut total = BASE_BYTES;
        let mut worst: Option<(u64, FioJob)> = None;
        for job in jobs {
            let est = estimate_bytes(job, job.group_reporting || aggregate);
            total = total.saturating_add(est);
            if worst.as_ref().is_none_or(|(w, _)| est > *w) {
                worst = Some((est, job.clone()));
            }
        }
        if worst_run.as_ref().is_none_or(|(t, _, _)| total > *t) {
            worst_run = Some((total, aggregate, worst));
        }
    }
    let (total, aggregate, worst) = worst_run.unwrap_or((BASE_BYTES, false, None));
    s.est_bytes = total;
    s.aggregated = aggregate;
    if s.est_bytes > max_memory {
        let mib = |b: u64| b >> 20;
        let separate = worst
            .as_ref()
            .is_some_and(|w| !w.1.group_reporting && !aggregate);
        let why = format!(
            "numjobs: the run would need about {} MiB (estimated before starting: {} fio \
             clone(s)), over --max-memory {} MiB; this job alone about {} MiB{}",
            mib(s.est_bytes),
            s.clones,
            mib(max_memory),
            mib(worst.as_ref().map_or(0, |w| w.0)),
            if separate {
                " (per-job detail keeps every clone's own statistics; without --per-job \
                 or [measure] per_job, or with group_reporting, a job's clones share one entry)"
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
