//! What machine the probe ran on: kernel, preemption model, CPUs, memory,
//! the device behind the temporary directory, the `vm.dirty_*` sysctls, and
//! the cost of starting a command. Recorded in the results' `live` section
//! and, as a scenario would describe it, in `model` (so `wbsim compare`
//! shows the parameters side by side). Not kernel code.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;

use super::guard::Guard;
use super::sys;
use crate::experiment::results::{Live, ModelParams};
use crate::experiment::scenario;

/// `uname(2)` fields: release, version, machine.
fn uname() -> (String, String, String) {
    // SAFETY: utsname is plain old data; uname fills it with NUL-terminated
    // strings (zeroed first, so they are terminated even on failure).
    let u = unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        libc::uname(&mut u);
        u
    };
    let s = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    (s(&u.release), s(&u.version), s(&u.machine))
}

/// `/proc/config.gz` lines starting with `CONFIG_`, if readable (via zcat).
fn kernel_config() -> BTreeMap<String, String> {
    let Ok(text) = sys::run("zcat", &["/proc/config.gz"]) else {
        return BTreeMap::new();
    };
    text.lines()
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| k.starts_with("CONFIG_"))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `sched/preempt` of debugfs: from `/sys/kernel/debug` if mounted, else
/// from a private debugfs mount under the guard's directory (unmounted
/// again at once).
fn debugfs_preempt(guard: &Guard) -> Option<String> {
    if let Ok(s) = std::fs::read_to_string("/sys/kernel/debug/sched/preempt") {
        return Some(s);
    }
    let mnt = guard.unique("debugfs");
    guard.record("mountpoint", &mnt, &[]).ok()?;
    std::fs::create_dir(&mnt).ok()?;
    let s = {
        let _op = guard.op().ok()?;
        guard.record("mount", &mnt, &["debugfs"]).ok()?;
        sys::run(
            "mount",
            &[
                "-t".as_ref(),
                "debugfs".as_ref(),
                "nodev".as_ref(),
                mnt.as_os_str(),
            ],
        )
        .ok()?;
        let s = std::fs::read_to_string(mnt.join("sched/preempt")).ok();
        let _ = sys::umount2(&mnt, 0);
        s
    };
    let _ = std::fs::remove_dir(&mnt);
    s
}

/// The preemption model and where it was read: debugfs `sched/preempt`
/// (the word in parentheses), else the kernel config, else `uname -v`.
fn preemption(guard: &Guard, version: &str, config: &BTreeMap<String, String>) -> (String, bool) {
    let rt = version.contains("PREEMPT_RT") || config.contains_key("CONFIG_PREEMPT_RT");
    if let Some(s) = debugfs_preempt(guard) {
        if let Some(a) = s.find('(') {
            if let Some(b) = s[a..].find(')') {
                let cur = &s[a + 1..a + b];
                return (format!("{cur} (debugfs sched/preempt: {})", s.trim()), rt);
            }
        }
    }
    if rt {
        return ("rt (PREEMPT_RT kernel)".into(), true);
    }
    // The boot-time choice of a PREEMPT_DYNAMIC kernel, from the kernel log.
    if let Ok(log) = sys::run::<&str>("dmesg", &[]) {
        if let Some(mode) = log
            .lines()
            .find_map(|l| l.split_once("Dynamic Preempt: ").map(|(_, m)| m.trim()))
        {
            return (
                format!("{mode} (PREEMPT_DYNAMIC; boot log 'Dynamic Preempt: {mode}')"),
                false,
            );
        }
    }
    let dynamic = version.contains("PREEMPT_DYNAMIC");
    let built = ["NONE", "VOLUNTARY", "PREEMPT", "LAZY"]
        .iter()
        .find(|m| {
            let key = if **m == "PREEMPT" {
                "CONFIG_PREEMPT".to_string()
            } else {
                format!("CONFIG_PREEMPT_{m}")
            };
            config.get(&key).is_some_and(|v| v == "y")
        })
        .map(|m| m.to_lowercase());
    let s = match (dynamic, built) {
        (true, Some(b)) => format!(
            "PREEMPT_DYNAMIC, boot default {b} (config; debugfs not mounted, the active mode may differ with preempt=)"
        ),
        (true, None) => "PREEMPT_DYNAMIC (uname -v)".into(),
        (false, Some(b)) => format!("{b} (kernel config)"),
        (false, None) => "unknown".into(),
    };
    (s, false)
}

/// The mount holding `dir`: (source, fstype).
fn backing(dir: &Path) -> (String, String) {
    sys::mounts()
        .into_iter()
        .filter(|m| dir.starts_with(&m.target))
        .max_by_key(|m| m.target.as_os_str().len())
        .map(|m| (m.source, m.fstype))
        .unwrap_or_default()
}

/// Median wall time of `/bin/true` over 21 runs (fork + exec + exit): the
/// model's `machine.process_start`.
fn process_start() -> Option<Duration> {
    let mut v = Vec::new();
    for _ in 0..21 {
        let t = Instant::now();
        std::process::Command::new("true").status().ok()?;
        v.push(t.elapsed());
    }
    v.sort();
    v.get(v.len() / 2).copied()
}

/// What the probe learns about the machine.
pub struct MachineInfo {
    /// The `live` section (experiment and command filled by the caller).
    pub live: Live,
    /// `[machine]` keys as a scenario would write them.
    pub cpus: u32,
    /// Bytes.
    pub memory_bytes: u64,
    /// PREEMPT_RT.
    pub preempt_rt: bool,
    /// CONFIG_HZ (1000 if unknown).
    pub hz: u32,
    /// `rcupdate.rcu_normal_after_boot`.
    pub rcu_normal_after_boot: bool,
    /// Measured command start cost.
    pub process_start: Option<Duration>,
}

impl MachineInfo {
    /// Collects the description of the machine the guard's directory is on.
    pub fn collect(guard: &Guard) -> MachineInfo {
        let tmp_dir = guard.dir();
        let (release, version, arch) = uname();
        let config = kernel_config();
        let (preempt, preempt_rt) = preemption(guard, &version, &config);
        let hz = config.get("CONFIG_HZ").and_then(|v| v.parse().ok());
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1);
        let mem = super::meminfo::read();
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_default();
        let (src, fstype) = backing(tmp_dir);
        let rcu_normal_after_boot = sys::read_trim(Path::new(
            "/sys/module/rcupdate/parameters/rcu_normal_after_boot",
        ))
        .is_ok_and(|v| v == "1" || v == "Y");
        let mut settings = BTreeMap::new();
        for k in [
            "dirty_ratio",
            "dirty_background_ratio",
            "dirty_bytes",
            "dirty_background_bytes",
            "dirty_expire_centisecs",
            "dirty_writeback_centisecs",
        ] {
            if let Ok(v) = sys::read_trim(&Path::new("/proc/sys/vm").join(k)) {
                settings.insert(format!("vm.{k}"), v);
            }
        }
        settings.insert(
            "rcupdate.rcu_normal_after_boot".into(),
            rcu_normal_after_boot.to_string(),
        );
        if let Ok(l) = sys::read_trim(Path::new("/proc/loadavg")) {
            settings.insert("loadavg at start (/proc/loadavg)".into(), l);
        }
        let process_start = process_start();
        if let Some(p) = process_start {
            settings.insert(
                "process_start (median /bin/true)".into(),
                format!("{:.3} ms", p.as_secs_f64() * 1e3),
            );
        }
        MachineInfo {
            live: Live {
                kernel_release: release,
                kernel_version: version,
                arch,
                preemption: preempt,
                hz,
                cpus,
                cpu_model,
                memory_bytes: mem.total_kib * 1024,
                tmp_dir: tmp_dir.display().to_string(),
                tmp_device: format!("{src} ({fstype})"),
                settings,
                ..Live::default()
            },
            cpus,
            memory_bytes: mem.total_kib * 1024,
            preempt_rt,
            hz: hz
                .filter(|h| [100, 250, 300, 1000].contains(h))
                .unwrap_or(1000),
            rcu_normal_after_boot,
            process_start,
        }
    }

    /// The scenario text describing this machine with `devices_and_fs`
    /// (`[[device]]`/`[[filesystem]]` tables) appended.
    pub fn scenario_text(&self, name: &str, devices_and_fs: &str) -> String {
        let vm = |k: &str| {
            self.live
                .settings
                .get(&format!("vm.{k}"))
                .cloned()
                .unwrap_or_else(|| "0".into())
        };
        let (ratio, bytes) = (vm("dirty_ratio"), vm("dirty_bytes"));
        let (bratio, bbytes) = (vm("dirty_background_ratio"), vm("dirty_background_bytes"));
        let dirty = if bytes != "0" {
            format!("dirty_bytes = {bytes}")
        } else {
            format!("dirty_ratio = {ratio}")
        };
        let bg = if bbytes != "0" {
            format!("dirty_background_bytes = {bbytes}")
        } else {
            format!("dirty_background_ratio = {bratio}")
        };
        let ps = self
            .process_start
            .map(|d| format!("process_start = \"{}us\"\n", d.as_micros().max(1)))
            .unwrap_or_default();
        format!(
            "[scenario]\nname = \"{name}\"\ndescription = \"live kernel {} ({})\"\nduration = \"1s\"\n\n\
             [machine]\ncpus = {}\nmemory = {}\npreempt_rt = {}\nrcu_normal_after_boot = {}\nhz = {}\n{ps}\n\
             [sysctl]\n{dirty}\n{bg}\ndirty_expire_centisecs = {}\ndirty_writeback_centisecs = {}\n\n{devices_and_fs}",
            self.live.kernel_release,
            self.live.preemption.replace('"', "'"),
            self.cpus,
            self.memory_bytes.max(16 << 20),
            self.preempt_rt,
            self.rcu_normal_after_boot,
            self.hz,
            vm("dirty_expire_centisecs"),
            vm("dirty_writeback_centisecs"),
        )
    }

    /// `model` for the results: the scenario text parsed as any scenario.
    pub fn model_params(&self, name: &str, devices_and_fs: &str) -> anyhow::Result<ModelParams> {
        let text = self.scenario_text(name, devices_and_fs);
        let sc = scenario::parse_str(&text, "<probe machine description>")
            .with_context(|| format!("describing the live machine as a scenario:\n{text}"))?;
        let v = sc.variant(scenario::DEFAULT_VARIANT)?;
        Ok(ModelParams::new(&sc, &v))
    }
}
