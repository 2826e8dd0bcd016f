//! Shared helpers of the live-probe tests: skip reasons, a scratch
//! directory per test, and checks that the probe left nothing behind.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Probe tests run one at a time (they share 2 CPUs and the loop devices).
pub static SERIAL: Mutex<()> = Mutex::new(());

/// Why the live probe cannot run here (the test then skips), if it cannot.
pub fn skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    if !Path::new("/dev/loop-control").exists() {
        return Some("no loop devices (/dev/loop-control missing)".into());
    }
    for tool in ["losetup", "mkfs.xfs", "mkfs.btrfs", "mkfs.ext4"] {
        let found = std::env::var_os("PATH")
            .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).exists()))
            || Path::new("/usr/sbin").join(tool).exists()
            || Path::new("/sbin").join(tool).exists();
        if !found {
            return Some(format!(
                "{tool} is not installed (scripts/install.sh installs it)"
            ));
        }
    }
    None
}

/// Prints the skip and returns true if the test must skip.
pub fn skip(test: &str) -> bool {
    match skip_reason() {
        Some(why) => {
            println!("SKIPPED {test}: {why}");
            eprintln!("SKIPPED {test}: {why}");
            true
        }
        None => false,
    }
}

/// A scratch directory on disk (`/var/tmp/wbsim-test-PID-NAME`), removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let d = PathBuf::from(format!("/var/tmp/wbsim-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("create scratch dir");
        Scratch(d)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if mounts_under(&self.0).is_empty() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Mount points under `dir`.
pub fn mounts_under(dir: &Path) -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4).map(str::to_string))
        .filter(|m| Path::new(m).starts_with(dir))
        .collect()
}

/// Loop devices whose backing file is under `dir`.
pub fn loops_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/sys/block")
        .into_iter()
        .flatten()
        .flatten()
    {
        let n = e.file_name().to_string_lossy().into_owned();
        if let Ok(b) = std::fs::read_to_string(e.path().join("loop/backing_file")) {
            if Path::new(b.trim().trim_end_matches(" (deleted)")).starts_with(dir) {
                out.push(n);
            }
        }
    }
    out
}

/// tracefs instances named `wbsim-PID-*` (checked through a tracefs mount
/// of the test's own under `scratch`).
pub fn instances_of(pid: u32, scratch: &Path) -> Vec<String> {
    let mnt = scratch.join("tracefs-check");
    std::fs::create_dir_all(&mnt).expect("mkdir tracefs-check");
    let ok = std::process::Command::new("mount")
        .args(["-t", "tracefs", "nodev"])
        .arg(&mnt)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "could not mount tracefs to check for instances");
    let prefix = format!("wbsim-{pid}-");
    let list: Vec<String> = std::fs::read_dir(mnt.join("instances"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix))
        .collect();
    let _ = std::process::Command::new("umount").arg(&mnt).status();
    let _ = std::fs::remove_dir(&mnt);
    list
}

/// The `strict_limit` and `max_ratio` of every loop device's bdi.
pub fn loop_bdi_settings() -> Vec<(String, String, String)> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/sys/block")
        .into_iter()
        .flatten()
        .flatten()
    {
        let n = e.file_name().to_string_lossy().into_owned();
        if !n.starts_with("loop") {
            continue;
        }
        let r = |f: &str| std::fs::read_to_string(e.path().join("bdi").join(f)).unwrap_or_default();
        v.push((n.clone(), r("strict_limit"), r("max_ratio")));
    }
    v.sort();
    v
}

/// Asserts the probe left nothing under `scratch` (its `--tmpdir`).
pub fn assert_nothing_left(scratch: &Path, pid: u32) {
    // Loop detach may be deferred briefly (autoclear): allow a few seconds.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while !loops_under(scratch).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(mounts_under(scratch), Vec::<String>::new(), "mounts left");
    assert_eq!(
        loops_under(scratch),
        Vec::<String>::new(),
        "loop devices left"
    );
    let entries: Vec<_> = std::fs::read_dir(scratch)
        .expect("scratch dir")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(
        entries.is_empty(),
        "files left in {}: {entries:?}",
        scratch.display()
    );
    assert_eq!(
        instances_of(pid, scratch),
        Vec::<String>::new(),
        "tracefs instances left"
    );
}
