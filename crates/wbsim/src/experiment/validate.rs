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
    if job.file_size_bytes() == 0 {
        return Err(job.error_at("size", "size: no file size: set size= or filesize="));
    }
    Ok(())
}

/// Runs the checks above on every `[[job]]`; the first error, located.
pub fn validate(sc: &Scenario) -> anyhow::Result<Summary> {
    let mountpoints: Vec<&str> = sc
        .filesystems
        .iter()
        .map(|f| f.mountpoint.as_str())
        .collect();
    let mut s = Summary::default();
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
