//! The probe's state journal, and recovery from a probe that died without
//! cleaning up (SIGKILL, power loss of the process, the OOM killer).
//!
//! Not kernel code. Every probe writes `DIR/state` (DIR: its own
//! `BASE/wbsim-probe-PID-N`, see [`super::guard`]) and appends one line for
//! each resource *before* it creates it, so a probe killed at any instant
//! leaves a journal naming everything it may have made:
//!
//! ```text
//! wbsim-probe-state 1
//! pid PID STARTTIME            the owner (STARTTIME: /proc/PID/stat field 22)
//! image PATH                   a sparse image file about to be created
//! loop PATH                    a loop device about to be attached to image PATH
//! mountpoint PATH              a directory about to be made (and mounted on)
//! mount PATH FSTYPE            a mount about to be made on PATH
//! instance PATH                a tracefs instance about to be made
//! restore FILE VALUE           a sysctl/bdi file about to be changed from VALUE
//! child PID STARTTIME          a helper process (recorded right after spawn)
//! ```
//!
//! Fields are separated by one tab; paths are the probe's own (no tabs or
//! newlines). [`cleanup_stale`] scans BASE for such directories whose owner
//! is dead (no `/proc/PID`, or a different start time: the pid was reused)
//! and removes what they hold, each resource only after verifying it is the
//! dead probe's own:
//! - a mount must be under the directory, journalled as a mount point, and
//!   its source must be a loop device whose backing file is under the
//!   directory (xfs/btrfs/ext4), or `wbsim-probe` (tmpfs), or tracefs or
//!   debugfs (the probe's private, read-only-use mounts);
//! - a loop device's `/sys/block/loopN/loop/backing_file` must be an image
//!   the journal names, under the directory;
//! - an image must be a regular file the journal names, under the directory;
//! - a `restore` is written back only to `/proc/sys/...` or to the bdi of a
//!   loop device backed by the directory's image;
//! - a child is killed only if its start time matches the journal.
//!
//! Anything that fails a check is refused (reported, left alone) and the
//! directory is then kept. Not done: the journal is not fsynced (a process
//! killed by a signal loses nothing; a machine crash loses loop devices and
//! mounts anyway), and a tracefs instance whose private tracefs mount is
//! already gone is reported, not removed.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;

use super::loopsys::{clear_loop_dev, loop_backing_file, loops_under};
use super::sys;

/// The journal's file name inside the probe's directory.
pub const STATE_FILE: &str = "state";

/// The journal's first line.
const HEADER: &str = "wbsim-probe-state 1";

/// The journal of a running probe (append-only).
pub struct Journal {
    /// The open `DIR/state`.
    file: std::fs::File,
}

impl Journal {
    /// Creates `dir/state` with the header and this process's pid line.
    pub fn create(dir: &Path) -> anyhow::Result<Journal> {
        let path = dir.join(STATE_FILE);
        let mut file = std::fs::OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("create {}", path.display()))?;
        let pid = std::process::id();
        let start = proc_starttime(pid).unwrap_or(0);
        writeln!(file, "{HEADER}\npid\t{pid}\t{start}")
            .with_context(|| format!("write {}", path.display()))?;
        Ok(Journal { file })
    }

    /// Appends one record (`kind` and its fields, tab separated).
    pub fn record(&mut self, kind: &str, fields: &[&str]) -> anyhow::Result<()> {
        let mut line = kind.to_string();
        for f in fields {
            if f.contains(['\t', '\n']) {
                anyhow::bail!("cannot journal {kind} {f:?}: it contains a tab or newline");
            }
            line.push('\t');
            line.push_str(f);
        }
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .context("appending to the probe's state journal")
    }
}

/// `/proc/PID/stat` field 22 (start time in clock ticks since boot); None
/// if there is no such process.
pub fn proc_starttime(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; fields after its closing
    // parenthesis start at field 3.
    let rest = &s[s.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// One parsed journal.
#[derive(Debug, Default)]
struct State {
    /// Owner pid and start time.
    owner: Option<(u32, u64)>,
    /// Images.
    images: Vec<PathBuf>,
    /// Mount points.
    mountpoints: Vec<PathBuf>,
    /// tracefs instances.
    instances: Vec<PathBuf>,
    /// (file, value before) in journal order.
    restores: Vec<(PathBuf, String)>,
    /// (pid, start time) of helpers.
    children: Vec<(u32, u64)>,
}

fn parse_state(text: &str) -> Option<State> {
    let mut lines = text.lines();
    if lines.next()? != HEADER {
        return None;
    }
    let mut st = State::default();
    for l in lines {
        let f: Vec<&str> = l.split('\t').collect();
        match (f.first().copied(), f.len()) {
            (Some("pid"), 3) => st.owner = Some((f[1].parse().ok()?, f[2].parse().ok()?)),
            (Some("image"), 2) | (Some("loop"), 2) => st.images.push(PathBuf::from(f[1])),
            (Some("mountpoint"), 2) => st.mountpoints.push(PathBuf::from(f[1])),
            (Some("mount"), 3) => st.mountpoints.push(PathBuf::from(f[1])),
            (Some("instance"), 2) => st.instances.push(PathBuf::from(f[1])),
            (Some("restore"), 3) => st.restores.push((PathBuf::from(f[1]), f[2].to_string())),
            (Some("child"), 3) => {
                if let (Ok(p), Ok(s)) = (f[1].parse(), f[2].parse()) {
                    st.children.push((p, s));
                }
            }
            // A torn last line (killed mid-write) or an unknown record.
            _ => {}
        }
    }
    Some(st)
}

/// What [`cleanup_stale`] did.
#[derive(Debug, Default)]
pub struct Report {
    /// What was removed or restored, one line each.
    pub removed: Vec<String>,
    /// What was refused or failed, one line each.
    pub refused: Vec<String>,
    /// Probe directories in use by a live probe (left alone).
    pub live: Vec<PathBuf>,
}

/// Whether `name` is `wbsim-probe-PID-N`; returns PID.
fn probe_dir_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("wbsim-probe-")?;
    let (pid, n) = rest.split_once('-')?;
    n.parse::<u32>().ok()?;
    pid.parse().ok()
}

/// Finds the directories of dead probes under `base` and removes what
/// they left (see the module doc). Directories of live probes are listed
/// in [`Report::live`] and left alone.
pub fn cleanup_stale(base: &Path) -> anyhow::Result<Report> {
    let base = base
        .canonicalize()
        .with_context(|| format!("probe directory base {}", base.display()))?;
    let mut report = Report::default();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&base)
        .with_context(|| format!("read {}", base.display()))?
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| {
            e.file_name()
                .to_str()
                .and_then(probe_dir_pid)
                .is_some_and(|p| p != std::process::id())
        })
        .map(|e| e.path())
        .collect();
    dirs.sort();
    for dir in dirs {
        cleanup_dir(&dir, &mut report);
    }
    Ok(report)
}

/// Whether process `pid` started at `start` still runs.
fn alive(pid: u32, start: u64) -> bool {
    proc_starttime(pid).is_some_and(|s| s == start)
}

fn cleanup_dir(dir: &Path, report: &mut Report) {
    let name_pid = dir
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(probe_dir_pid);
    let state = match std::fs::read_to_string(dir.join(STATE_FILE)) {
        Ok(t) => match parse_state(&t) {
            Some(s) => s,
            None => {
                report.refused.push(format!(
                    "{}: unreadable state journal, left alone",
                    dir.display()
                ));
                return;
            }
        },
        Err(_) => {
            // Killed between mkdir and the journal: an empty directory.
            if name_pid.is_some_and(|p| proc_starttime(p).is_none())
                && std::fs::remove_dir(dir).is_ok()
            {
                report
                    .removed
                    .push(format!("empty probe directory {}", dir.display()));
            } else {
                report.refused.push(format!(
                    "{}: no state journal (not a probe's, or still starting), left alone",
                    dir.display()
                ));
            }
            return;
        }
    };
    let Some((pid, start)) = state.owner else {
        report.refused.push(format!(
            "{}: journal names no owner, left alone",
            dir.display()
        ));
        return;
    };
    if Some(pid) != name_pid {
        report.refused.push(format!(
            "{}: journal owner {pid} does not match the directory name, left alone",
            dir.display()
        ));
        return;
    }
    if alive(pid, start) {
        report.live.push(dir.to_path_buf());
        return;
    }
    let before = report.refused.len();
    let owns = |p: &Path| p.starts_with(dir) && p != dir;

    // 1. Helper processes of the dead probe.
    for &(cpid, cstart) in &state.children {
        if alive(cpid, cstart) {
            if let Ok(p) = i32::try_from(cpid) {
                // SAFETY: kill(2) has no memory preconditions; the pid's
                // start time matches the journal, so it is the probe's child.
                unsafe {
                    libc::kill(p, libc::SIGKILL);
                }
                report
                    .removed
                    .push(format!("killed helper process {cpid} of dead probe {pid}"));
            }
        }
    }
    // 2. tracefs instances (through the private tracefs mount).
    for inst in &state.instances {
        if !owns(inst) || !inst.exists() {
            continue;
        }
        let _ = std::fs::write(inst.join("tracing_on"), "0");
        match std::fs::remove_dir(inst) {
            Ok(()) => report
                .removed
                .push(format!("tracefs instance {}", inst.display())),
            Err(e) => report
                .refused
                .push(format!("tracefs instance {}: {e}", inst.display())),
        }
    }
    // 3. Settings, oldest value per file, written back newest first.
    let mut seen: Vec<&Path> = Vec::new();
    let mut firsts = Vec::new();
    for (f, v) in &state.restores {
        if !seen.contains(&f.as_path()) {
            seen.push(f);
            firsts.push((f, v));
        }
    }
    for (f, v) in firsts.into_iter().rev() {
        let ours = f.starts_with("/proc/sys/")
            || f.strip_prefix("/sys/block/")
                .ok()
                .and_then(|r| r.components().next())
                .and_then(|c| c.as_os_str().to_str())
                .and_then(loop_backing_file)
                .is_some_and(|b| owns(&b));
        if !ours {
            if f.exists() {
                report.refused.push(format!(
                    "not restoring {}: not a sysctl nor the bdi of this probe's loop device",
                    f.display()
                ));
            }
            continue;
        }
        match std::fs::write(f, format!("{v}\n")) {
            Ok(()) => report
                .removed
                .push(format!("restored {} to {v}", f.display())),
            Err(e) => report
                .refused
                .push(format!("restoring {} to {v}: {e}", f.display())),
        }
    }
    // 4. Mounts under the directory, deepest first, each verified.
    let mut mounts: Vec<sys::MountEntry> = sys::mounts()
        .into_iter()
        .filter(|m| owns(&m.target))
        .collect();
    mounts.sort_by_key(|m| std::cmp::Reverse(m.target.as_os_str().len()));
    for m in mounts {
        let recorded = state.mountpoints.iter().any(|p| p == &m.target);
        let source_ok = match m.fstype.as_str() {
            "tmpfs" => m.source == "wbsim-probe",
            "tracefs" | "debugfs" => true,
            _ => m
                .source
                .strip_prefix("/dev/")
                .and_then(loop_backing_file)
                .is_some_and(|b| owns(&b) && state.images.contains(&b)),
        };
        if !(recorded && source_ok) {
            report.refused.push(format!(
                "not unmounting {} ({} from {}): not a mount this probe journalled \
                 with its own device",
                m.target.display(),
                m.fstype,
                m.source
            ));
            continue;
        }
        let r = sys::umount2(&m.target, 0).or_else(|_| sys::umount2(&m.target, libc::MNT_DETACH));
        match r {
            Ok(()) => report.removed.push(format!(
                "mount {} ({} from {})",
                m.target.display(),
                m.fstype,
                m.source
            )),
            Err(e) => report
                .refused
                .push(format!("umount {}: {e}", m.target.display())),
        }
    }
    // 5. Loop devices backed by the journal's images.
    for name in loops_under(dir) {
        let Some(b) = loop_backing_file(&name) else {
            continue;
        };
        if !state.images.contains(&b) {
            report.refused.push(format!(
                "not detaching /dev/{name}: its backing file {} is not in the journal",
                b.display()
            ));
            continue;
        }
        let dev = PathBuf::from(format!("/dev/{name}"));
        match clear_loop_dev(&dev) {
            Ok(()) => report.removed.push(format!(
                "loop device {} (backing file {})",
                dev.display(),
                b.display()
            )),
            Err(e) => report
                .refused
                .push(format!("LOOP_CLR_FD {}: {e}", dev.display())),
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while !loops_under(dir).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left = loops_under(dir);
    if !left.is_empty() {
        report.refused.push(format!(
            "loop devices still attached after 10 s: {}",
            left.join(", ")
        ));
    }
    // 6. Images.
    for img in &state.images {
        if !owns(img) {
            report.refused.push(format!(
                "not removing {}: not under {}",
                img.display(),
                dir.display()
            ));
            continue;
        }
        match std::fs::symlink_metadata(img) {
            Ok(md) if md.file_type().is_file() => match std::fs::remove_file(img) {
                Ok(()) => report.removed.push(format!("image {}", img.display())),
                Err(e) => report.refused.push(format!("rm {}: {e}", img.display())),
            },
            Ok(_) => report.refused.push(format!(
                "not removing {}: not a regular file",
                img.display()
            )),
            Err(_) => {}
        }
    }
    // 7. The directory, once nothing was refused and nothing is mounted.
    if report.refused.len() == before && sys::mounts_under(dir).is_empty() {
        match std::fs::remove_dir_all(dir) {
            Ok(()) => report
                .removed
                .push(format!("directory {} of dead probe {pid}", dir.display())),
            Err(e) => report.refused.push(format!("rm -r {}: {e}", dir.display())),
        }
    } else {
        report
            .refused
            .push(format!("kept {}: see the refusals above", dir.display()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_journal_with_a_torn_last_line() {
        let t = "wbsim-probe-state 1\npid\t12\t34\nimage\t/d/a.img\nloop\t/d/a.img\n\
                 mountpoint\t/d/m\nmount\t/d/m\txfs\nrestore\t/proc/sys/vm/x\t5\nchild\t9\t1\nimag";
        let s = parse_state(t).expect("parses");
        assert_eq!(s.owner, Some((12, 34)));
        assert_eq!(s.images.len(), 2);
        assert_eq!(s.mountpoints.len(), 2);
        assert_eq!(s.restores.len(), 1);
        assert_eq!(s.children, vec![(9, 1)]);
        assert!(parse_state("something else\npid\t1\t2\n").is_none());
    }

    #[test]
    fn probe_dir_names() {
        assert_eq!(probe_dir_pid("wbsim-probe-123-0"), Some(123));
        assert_eq!(probe_dir_pid("wbsim-probe-123"), None);
        assert_eq!(probe_dir_pid("wbsim-test-1-2"), None);
    }

    #[test]
    fn own_start_time_is_known_and_alive() {
        let me = std::process::id();
        let s = proc_starttime(me).expect("own /proc/PID/stat");
        assert!(alive(me, s));
        assert!(!alive(me, s + 1));
    }

    #[test]
    fn dead_probe_dir_with_only_files_is_removed_and_live_one_kept() {
        let base = std::env::temp_dir().join(format!("wbsim-recover-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).expect("mkdir");
        let base = base.canonicalize().expect("canon");
        // A dead owner: pid 1's start time is never u64::MAX, so pid 1 with
        // that start time is "dead" (a reused pid).
        let dead = base.join("wbsim-probe-1-0");
        std::fs::create_dir(&dead).expect("mkdir");
        let img = dead.join("img-0.img");
        std::fs::write(&img, b"x").expect("img");
        std::fs::write(
            dead.join(STATE_FILE),
            format!("{HEADER}\npid\t1\t{}\nimage\t{}\n", u64::MAX, img.display()),
        )
        .expect("state");
        // A live owner: this test process, under another name pid.
        let me = std::process::id();
        let live = base.join(format!("wbsim-probe-{}-0", me + 1));
        std::fs::create_dir(&live).expect("mkdir");
        std::fs::write(
            live.join(STATE_FILE),
            format!("{HEADER}\npid\t{me}\t{}\n", proc_starttime(me).unwrap()),
        )
        .expect("state");
        let r = cleanup_stale(&base).expect("cleanup");
        assert!(!dead.exists(), "{r:?}");
        assert!(r.removed.iter().any(|l| l.contains("img-0.img")), "{r:?}");
        // The live one's name pid differs from its journal: refused, kept.
        assert!(live.exists());
        assert!(
            r.refused.iter().any(|l| l.contains("does not match")),
            "{r:?}"
        );
        let _ = std::fs::remove_dir_all(&base);
    }
}
