//! `wbsim run JOB.fio`: a fio job file run directly on a named built-in
//! machine, device and filesystem, without writing a scenario. Not kernel
//! code: this builds the scenario a user would otherwise write by hand (one
//! device, one filesystem, the job file as its only `[[job]]`) and hands it to
//! the same runner as `wbsim run SCENARIO.toml`.
//!
//! Where the job's files go: relative names (fio's default
//! `$jobname.$jobnum.$filenum`, or `filename=` without a directory) land on the
//! filesystem, mounted at [`DEFAULT_MOUNTPOINT`]. Absolute `directory=` /
//! `filename=` paths (fio's examples use e.g. `directory=/mount-point-of-ssd`)
//! make that directory the mount point, so the job writes where it says; when
//! the absolute paths share no directory other than `/` it is an error naming
//! the file, line and option. A job file naming block devices (`/dev/...`)
//! runs on the device itself: no filesystem, the `bdev` type mounted on
//! `/dev` (every path under it is the one device, of
//! [`crate::model::fs::block_dev::DEFAULT_BDEV_CAPACITY`]); `--fs` is then
//! ignored. Character devices (`/dev/null`) are an error.

use std::path::{Path, PathBuf};

use crate::experiment::scenario::{self, FsType, Scenario, PROFILE_NAMES};
use crate::workload::fio::{self, FioError, JobFile};

/// Mount point of the filesystem when the job file names no absolute path.
pub const DEFAULT_MOUNTPOINT: &str = "/mnt/fio";

/// The default `--machine`.
pub const DEFAULT_MACHINE: &str = "vm2";
/// The default `--device`.
pub const DEFAULT_DEVICE: &str = "nvme-dc";
/// The default `--fs`.
pub const DEFAULT_FS: &str = "xfs";

/// Simulated time limit when some job has no `runtime=`: 300 s. A job still
/// running then is cut off and flagged "did not finish" (the run ends earlier
/// when every job is done).
pub const DEFAULT_DURATION_NS: u64 = 300_000_000_000;

/// Slack added to the jobs' own time budget (`startdelay` + `ramp_time` +
/// `runtime`, summed over jobs) so `end_fsync` and file layout can complete:
/// 60 s.
pub const DURATION_SLACK_NS: u64 = 60_000_000_000;

/// A built-in machine for `--machine`: the `[machine]` section it stands for.
#[derive(Clone, Copy, Debug)]
pub struct MachineProfile {
    /// `--machine` name.
    pub name: &'static str,
    /// Online CPUs.
    pub cpus: u32,
    /// RAM, as a scenario size string.
    pub memory: &'static str,
    /// CONFIG_HZ.
    pub hz: u32,
    /// Idle-CPU wakeup latency, as a scenario duration string.
    pub wakeup_latency: &'static str,
    /// CPU a scheduler tick takes from the task it interrupts, as a
    /// scenario duration string (`[machine] tick_cost`).
    pub tick_cost: &'static str,
    /// What it is and where the values come from.
    pub about: &'static str,
}

/// The built-in machines, default first.
pub const MACHINES: &[MachineProfile] = &[
    MachineProfile {
        name: "vm2",
        cpus: 2,
        memory: "24g",
        hz: 250,
        wakeup_latency: "25us",
        tick_cost: "22us",
        about: "the 2-vCPU, 24 GiB VM the project measures on (nproc, /proc/meminfo; \
                CONFIG_HZ=250 from /boot/config; 25 us idle wakeup and a 22 us \
                tick as in scenarios/dontcache-local.toml)",
    },
    MachineProfile {
        name: "server16",
        cpus: 16,
        memory: "64g",
        hz: 250,
        wakeup_latency: "0s",
        tick_cost: "0s",
        about: "a 16-CPU, 64 GiB server with Debian's CONFIG_HZ=250 \
                (debian/config/config) and no idle wakeup cost",
    },
    MachineProfile {
        name: "laptop4",
        cpus: 4,
        memory: "16g",
        hz: 1000,
        wakeup_latency: "0s",
        tick_cost: "0s",
        about: "a 4-CPU, 16 GiB desktop with CONFIG_HZ=1000 (a common desktop \
                kernel choice, e.g. Ubuntu's lowlatency flavour)",
    },
];

/// Looks a machine profile up by name.
pub fn machine_profile(name: &str) -> Option<&'static MachineProfile> {
    MACHINES.iter().find(|m| m.name == name)
}

/// Whether `path` is to be read as a fio job file (anything but `.toml`).
pub fn is_fio_file(path: &Path) -> bool {
    path.extension().is_none_or(|e| e != "toml")
}

/// What `wbsim run JOB.fio` runs on.
#[derive(Clone, Debug)]
pub struct Target {
    /// `--machine`.
    pub machine: String,
    /// `--fs`.
    pub fs: String,
    /// `--device` (ignored for tmpfs).
    pub device: String,
    /// `--duration`, ns; None = from the jobs.
    pub duration_ns: Option<u64>,
}

/// The run's time limit: `--duration`, else the jobs' own budget plus
/// [`DURATION_SLACK_NS`] when every job has a `runtime=`, else
/// [`DEFAULT_DURATION_NS`].
pub fn duration_for(jf: &JobFile, given: Option<u64>) -> u64 {
    if let Some(d) = given {
        return d;
    }
    let mut total: u64 = 0;
    for j in &jf.jobs {
        let Some(rt) = j.runtime_ns else {
            return DEFAULT_DURATION_NS;
        };
        let per_loop = rt
            .saturating_add(j.startdelay_ns)
            .saturating_add(j.ramp_time_ns);
        total = total.saturating_add(per_loop);
    }
    total.saturating_add(DURATION_SLACK_NS)
}

/// Character devices fio examples use as a sink or source: not storage.
const CHAR_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"];

/// Whether the job file names block devices (`/dev/...`): then the run has
/// no filesystem, the device is opened as a file ([`FsType::Bdev`] mounted
/// on `/dev`). Mixing devices and files, or naming a character device, is
/// an error naming the option.
fn uses_block_device(jf: &JobFile) -> Result<bool, FioError> {
    let mut dev: Option<bool> = None;
    for job in &jf.jobs {
        let opt = if job.filename.is_some() {
            "filename"
        } else {
            "directory"
        };
        for inst in job.instances() {
            for f in &inst.files {
                let is_dev = f.starts_with("/dev/");
                if CHAR_DEVICES.iter().any(|c| f == c) {
                    return Err(job.error_at(
                        opt,
                        format!(
                            "'{f}' is a character device, not storage: wbsim models \
                             files and block devices"
                        ),
                    ));
                }
                match dev {
                    Some(d) if d != is_dev => {
                        return Err(job.error_at(
                            opt,
                            format!(
                                "'{f}': the job file mixes block devices (/dev/...) and \
                                 files; wbsim runs one or the other"
                            ),
                        ))
                    }
                    _ => dev = Some(is_dev),
                }
            }
        }
    }
    Ok(dev.unwrap_or(false))
}

/// The directory the job file's absolute paths share (None if they are all
/// relative). Errors name the option that points elsewhere.
fn mountpoint_for(jf: &JobFile) -> Result<Option<String>, FioError> {
    if uses_block_device(jf)? {
        return Ok(Some("/dev".to_string()));
    }
    let mut common: Option<(Vec<String>, String, String)> = None;
    for job in &jf.jobs {
        for inst in job.instances() {
            for f in &inst.files {
                if !f.starts_with('/') {
                    continue;
                }
                let opt = if job.filename.as_deref().is_some_and(|n| n.starts_with('/')) {
                    "filename"
                } else {
                    "directory"
                };
                let dir: Vec<String> = Path::new(f)
                    .parent()
                    .map(|p| {
                        p.components()
                            .filter_map(|c| match c {
                                std::path::Component::Normal(s) => {
                                    Some(s.to_string_lossy().into_owned())
                                }
                                _ => None,
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                if dir.is_empty() {
                    return Err(job.error_at(
                        opt,
                        format!(
                            "'{f}' is directly under /: wbsim mounts the simulated \
                             filesystem on a directory; put the file in one"
                        ),
                    ));
                }
                common = Some(match common {
                    None => (dir, f.clone(), opt.to_string()),
                    Some((c, first, first_opt)) => {
                        let n = c.iter().zip(&dir).take_while(|(a, b)| a == b).count();
                        if n == 0 {
                            return Err(job.error_at(
                                opt,
                                format!(
                                    "'{f}' and '{first}' (set by '{first_opt}') share no \
                                     directory but /: wbsim mounts one simulated filesystem \
                                     for a job file; put the files under one directory"
                                ),
                            ));
                        }
                        (c[..n].to_vec(), first, first_opt)
                    }
                });
            }
        }
    }
    Ok(common.map(|(c, _, _)| format!("/{}", c.join("/"))))
}

/// A TOML string literal.
fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// Builds the scenario that runs `path` on `target`, after checking the job
/// file (errors name file, line and option).
pub fn build(path: &Path, target: &Target) -> anyhow::Result<(Scenario, JobFile)> {
    let jf = fio::parse_file(path)?;
    for n in jf.not_modelled() {
        eprintln!(
            "wbsim run: {}:{}: option '{}' is accepted but not modelled (it changes nothing \
             the model represents)",
            n.origin, n.line, n.option
        );
    }
    let machine = machine_profile(&target.machine).ok_or_else(|| {
        anyhow::anyhow!(
            "--machine {}: no such machine (built-in: {})",
            target.machine,
            MACHINES
                .iter()
                .map(|m| m.name)
                .collect::<Vec<_>>()
                .join(", ")
        )
    })?;
    let fs_type = FsType::ALL
        .iter()
        .find(|(n, _)| *n == target.fs)
        .map(|(_, t)| *t)
        .ok_or_else(|| {
            anyhow::anyhow!(
                "--fs {}: not a modelled filesystem (xfs, ext4, btrfs, tmpfs)",
                target.fs
            )
        })?;
    if fs_type != FsType::Tmpfs && !PROFILE_NAMES.contains(&target.device.as_str()) {
        anyhow::bail!(
            "--device {}: no such device profile (built-in: {})",
            target.device,
            PROFILE_NAMES.join(", ")
        );
    }
    let mountpoint = mountpoint_for(&jf)?.unwrap_or_else(|| DEFAULT_MOUNTPOINT.to_string());
    // A job file on /dev/... runs on the device itself, whatever --fs says.
    let fs_type = if mountpoint == "/dev" {
        FsType::Bdev
    } else {
        fs_type
    };
    let abs = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let stem = path
        .file_stem()
        .map_or("fio".to_string(), |s| s.to_string_lossy().into_owned());
    let duration = duration_for(&jf, target.duration_ns);
    let mut t = String::new();
    t.push_str(&format!(
        "[scenario]\nname = {}\ndescription = {}\nduration = \"{}ns\"\nseed = 1\n\n",
        toml_str(&stem),
        toml_str(&format!(
            "fio job file {} on machine {}, {} on {}",
            path.display(),
            machine.name,
            target.fs,
            if fs_type == FsType::Tmpfs {
                "memory"
            } else {
                &target.device
            }
        )),
        duration
    ));
    t.push_str(&format!(
        "[machine]\ncpus = {}\nmemory = {}\nhz = {}\nwakeup_latency = {}\ntick_cost = {}\n\n",
        machine.cpus,
        toml_str(machine.memory),
        machine.hz,
        toml_str(machine.wakeup_latency),
        toml_str(machine.tick_cost)
    ));
    if fs_type != FsType::Tmpfs {
        t.push_str(&format!(
            "[[device]]\nname = \"dev0\"\nprofile = {}\n\n",
            toml_str(&target.device)
        ));
    }
    t.push_str(&format!(
        "[[filesystem]]\nname = \"fs\"\ntype = {}\n{}mountpoint = {}\n\n",
        toml_str(fs_type.name()),
        if fs_type == FsType::Tmpfs {
            ""
        } else {
            "device = \"dev0\"\n"
        },
        toml_str(&mountpoint)
    ));
    t.push_str(&format!(
        "[[job]]\nfile = {}\nfilesystem = \"fs\"\n",
        toml_str(&abs.display().to_string())
    ));
    let origin: PathBuf = abs.with_extension("fio-scenario");
    let sc = scenario::parse_str(&t, &origin.display().to_string())
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok((sc, jf))
}
