//! The probe's safety guard: its own temporary directory, and cleanup of
//! everything the probe made on every exit path.
//!
//! Not kernel code. The probe runs as root and formats block devices, so it
//! only touches what lives under one directory it created itself
//! (`$TMPDIR/wbsim-probe-PID-N`, default `/var/tmp`, mode 0700): sparse
//! image files, loop devices whose backing file is one of those images,
//! mount points, and a private tracefs mount. Cleanup is driven by the state
//! of the machine, not only by a list of what was made, so a resource made
//! just before an interruption is still found:
//! 1. kill the child processes it started (the busy-umount holder);
//! 2. remove its tracefs instances (`instances/wbsim-PID-N`);
//! 3. write back every sysctl/bdi value it saved, newest first;
//! 4. unmount every mount under its directory (`/proc/self/mountinfo`),
//!    deepest first, `umount2(0)`, falling back to `MNT_DETACH` when busy;
//! 5. detach every loop device whose `/sys/block/loopN/loop/backing_file` is
//!    under its directory (`LOOP_CLR_FD`; the kernel defers it with
//!    autoclear while a lazily detached filesystem still holds the device),
//!    and wait up to 10 s for them to go;
//! 6. remove the directory, only once nothing is mounted under it.
//!
//! Cleanup runs from [`Guard`]'s `Drop` (normal return, error, panic
//! unwinding) and from a thread that waits for SIGINT/SIGTERM: that thread
//! marks the run as dying (every probe loop checks [`StopToken::check`], and
//! every mount/losetup/mkfs step runs under [`Guard::op`], which refuses to
//! start once dying), gives the main thread up to 30 s to unwind and clean
//! up, cleans up itself otherwise, and exits with 128 + the signal number.
//! Cleanup is idempotent and runs once.
//!
//! Every resource is journalled in `DIR/state` before it is made
//! ([`super::recover`]), so a probe killed with SIGKILL, which runs none of
//! the above, is cleaned up by the next `wbsim probe` (or `wbsim probe
//! --cleanup`). On SIGINT/SIGTERM the main thread, once it has written the
//! partial results, calls [`main_exiting`] and exits 128 + the signal
//! itself; the signal thread only exits on its own if the main thread has
//! not done so within 30 s.
//!
//! Test hook: with `WBSIM_PROBE_PAUSE_AT=image|losetup|mount` in the
//! environment the probe stops right after making its first image, loop
//! device or loop-device mount ([`Guard::pause_point`]), prints `[probe]
//! paused at POINT` and waits (up to 10 min, or until a signal), so a test
//! can kill it at a known point.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

pub use super::loopsys::{clear_loop_dev, loop_backing_file, loops_under};
use super::recover::{proc_starttime, Journal};
use super::sys;

/// Set by the main thread once it has written what it could after a
/// signal; the signal thread then leaves the exit to it.
static MAIN_EXITING: AtomicBool = AtomicBool::new(false);

/// The signal (SIGINT/SIGTERM) this process received, or 0.
static SIGNALLED: AtomicI32 = AtomicI32::new(0);

/// The SIGINT/SIGTERM a probe of this process received, if any.
pub fn signalled() -> Option<i32> {
    match SIGNALLED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// Tells the signal thread that the main thread will exit by itself
/// (after a SIGINT/SIGTERM, once partial results are written).
pub fn main_exiting() {
    MAIN_EXITING.store(true, Ordering::SeqCst);
}

/// The directory probe directories are made in: `base`, else `$TMPDIR`
/// if absolute, else `/var/tmp`.
pub fn base_dir(base: Option<&Path>) -> PathBuf {
    match base {
        Some(b) => b.to_path_buf(),
        None => std::env::var_os("TMPDIR")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .unwrap_or_else(|| PathBuf::from("/var/tmp")),
    }
}

/// How long the signal thread waits for the main thread to clean up.
const SIGNAL_GRACE: Duration = Duration::from_secs(30);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Default)]
struct State {
    /// Child processes to kill (pids).
    children: Vec<u32>,
    /// tracefs instance directories to remove.
    instances: Vec<PathBuf>,
    /// Files (sysctl, bdi) and the values to write back, in save order.
    restores: Vec<(PathBuf, String)>,
}

struct Inner {
    dir: PathBuf,
    /// 0, or the signal that asked the run to stop.
    dying: AtomicI32,
    cleaned: AtomicBool,
    cleanup_lock: Mutex<()>,
    op_lock: Mutex<()>,
    state: Mutex<State>,
    counter: AtomicU64,
    /// The state journal (`DIR/state`).
    journal: Mutex<Journal>,
}

/// Owns the probe's temporary directory and cleans up on drop.
pub struct Guard {
    inner: Arc<Inner>,
}

/// A handle worker threads use to notice an interruption.
#[derive(Clone)]
pub struct StopToken {
    inner: Arc<Inner>,
}

impl StopToken {
    /// Whether a signal asked the run to stop.
    pub fn stopping(&self) -> bool {
        self.inner.dying.load(Ordering::SeqCst) != 0
    }

    /// An error if the run is stopping.
    pub fn check(&self) -> anyhow::Result<()> {
        match self.inner.dying.load(Ordering::SeqCst) {
            0 => Ok(()),
            s => bail!("interrupted by {}", signal_name(s)),
        }
    }
}

/// `SIGINT`/`SIGTERM`/number.
pub fn signal_name(s: i32) -> String {
    match s {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        n => format!("signal {n}"),
    }
}

impl Guard {
    /// Creates `BASE/wbsim-probe-PID-N` (BASE: `base`, else `$TMPDIR` if
    /// absolute, else `/var/tmp`) and installs the SIGINT/SIGTERM handler.
    pub fn new(base: Option<&Path>) -> anyhow::Result<Guard> {
        let base = base_dir(base);
        let base = base
            .canonicalize()
            .with_context(|| format!("temporary directory base {}", base.display()))?;
        let mut dir = None;
        for n in 0..100u32 {
            let d = base.join(format!("wbsim-probe-{}-{n}", std::process::id()));
            match std::fs::create_dir(&d) {
                Ok(()) => {
                    dir = Some(d);
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e).with_context(|| format!("mkdir {}", d.display())),
            }
        }
        let Some(dir) = dir else {
            bail!(
                "could not create a fresh directory under {}",
                base.display()
            );
        };
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
            .with_context(|| format!("chmod {}", dir.display()))?;
        let journal = match Journal::create(&dir) {
            Ok(j) => j,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        let inner = Arc::new(Inner {
            dir,
            dying: AtomicI32::new(0),
            cleaned: AtomicBool::new(false),
            cleanup_lock: Mutex::new(()),
            op_lock: Mutex::new(()),
            state: Mutex::new(State::default()),
            counter: AtomicU64::new(0),
            journal: Mutex::new(journal),
        });
        let guard = Guard { inner };
        guard.install_signal_thread()?;
        Ok(guard)
    }

    fn install_signal_thread(&self) -> anyhow::Result<()> {
        let mut signals = signal_hook::iterator::Signals::new([libc::SIGINT, libc::SIGTERM])
            .context("installing the SIGINT/SIGTERM handler")?;
        let inner = Arc::clone(&self.inner);
        std::thread::Builder::new()
            .name("probe-signals".into())
            .spawn(move || {
                if let Some(sig) = signals.forever().next() {
                    inner.dying.store(sig, Ordering::SeqCst);
                    SIGNALLED.store(sig, Ordering::SeqCst);
                    eprintln!(
                        "wbsim probe: {}: stopping and cleaning up",
                        signal_name(sig)
                    );
                    let deadline = Instant::now() + SIGNAL_GRACE;
                    while Instant::now() < deadline {
                        if MAIN_EXITING.load(Ordering::SeqCst) {
                            // The main thread cleaned up, wrote what it
                            // had and exits with 128 + the signal.
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    for e in cleanup(&inner) {
                        eprintln!("wbsim probe: cleanup: {e}");
                    }
                    std::process::exit(128 + sig);
                }
            })
            .context("starting the signal thread")?;
        Ok(())
    }

    /// The probe's directory (canonical).
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// A fresh path `DIR/what-N` (never reused within a run).
    pub fn unique(&self, what: &str) -> PathBuf {
        let n = self.inner.counter.fetch_add(1, Ordering::SeqCst);
        self.inner.dir.join(format!("{what}-{n}"))
    }

    /// Whether `path` lies inside the probe's directory.
    pub fn owns(&self, path: &Path) -> bool {
        path.starts_with(&self.inner.dir) && path != self.inner.dir
    }

    /// A token for worker threads.
    pub fn token(&self) -> StopToken {
        StopToken {
            inner: Arc::clone(&self.inner),
        }
    }

    /// An error if a signal asked the run to stop.
    pub fn check(&self) -> anyhow::Result<()> {
        self.token().check()
    }

    /// The signal that interrupted the run, if any.
    pub fn interrupted(&self) -> Option<i32> {
        match self.inner.dying.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        }
    }

    /// Serialises a step that changes the machine (losetup, mkfs, mount,
    /// tracefs): refused once the run is stopping, and cleanup waits for it.
    pub fn op(&self) -> anyhow::Result<MutexGuard<'_, ()>> {
        let g = lock(&self.inner.op_lock);
        self.check()?;
        Ok(g)
    }

    /// Appends a record to the state journal (see [`super::recover`]);
    /// called before the resource it names is made, which must not be made
    /// if this fails.
    pub fn record(&self, kind: &str, path: &Path, extra: &[&str]) -> anyhow::Result<()> {
        let p = path.to_string_lossy();
        let mut fields = vec![p.as_ref()];
        fields.extend_from_slice(extra);
        lock(&self.inner.journal).record(kind, &fields)
    }

    /// The test hook (module doc): pauses here if `WBSIM_PROBE_PAUSE_AT`
    /// names `point`, until a signal or 10 min.
    pub fn pause_point(&self, point: &str) {
        if std::env::var("WBSIM_PROBE_PAUSE_AT").ok().as_deref() != Some(point) {
            return;
        }
        eprintln!("[probe] paused at {point} (WBSIM_PROBE_PAUSE_AT)");
        let deadline = Instant::now() + Duration::from_secs(600);
        while Instant::now() < deadline && self.interrupted().is_none() {
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Remembers child process `pid` (killed at cleanup; journalled with
    /// its start time so a later recovery kills it only if it is the same
    /// process).
    pub fn add_child(&self, pid: u32) {
        lock(&self.inner.state).children.push(pid);
        let start = proc_starttime(pid).unwrap_or(0).to_string();
        let _ = lock(&self.inner.journal).record("child", &[&pid.to_string(), &start]);
    }

    /// Forgets child `pid` (after it was reaped).
    pub fn remove_child(&self, pid: u32) {
        lock(&self.inner.state).children.retain(|&p| p != pid);
    }

    /// Remembers tracefs instance `dir` (removed at cleanup).
    pub fn add_instance(&self, dir: &Path) {
        lock(&self.inner.state).instances.push(dir.to_path_buf());
    }

    /// Forgets instance `dir` (after it was removed).
    pub fn remove_instance(&self, dir: &Path) {
        lock(&self.inner.state).instances.retain(|p| p != dir);
    }

    /// Saves the current value of a sysctl/bdi file, written back at cleanup
    /// (or by [`Guard::restore_all`]). Returns the value.
    pub fn save(&self, file: &Path) -> anyhow::Result<String> {
        let old = sys::read_trim(file)?;
        self.record("restore", file, &[&old])?;
        lock(&self.inner.state)
            .restores
            .push((file.to_path_buf(), old.clone()));
        Ok(old)
    }

    /// Writes back every saved value, newest first; returns the errors.
    pub fn restore_all(&self) -> Vec<String> {
        restore_all(&self.inner)
    }

    /// Runs the cleanup now (also done on drop); returns what failed.
    pub fn cleanup(&self) -> Vec<String> {
        cleanup(&self.inner)
    }

    /// Detaches loop device `dev` if it is backed by a file of this probe;
    /// refuses any other device.
    pub fn detach_loop(&self, dev: &Path) -> anyhow::Result<()> {
        let name = dev
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        match loop_backing_file(&name) {
            Some(b) if self.owns(&b) => {}
            other => bail!(
                "refusing to detach {}: its backing file {:?} is not under {}",
                dev.display(),
                other,
                self.dir().display()
            ),
        }
        clear_loop_dev(dev).with_context(|| format!("LOOP_CLR_FD {}", dev.display()))
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        for e in cleanup(&self.inner) {
            eprintln!("wbsim probe: cleanup: {e}");
        }
    }
}

fn restore_all(inner: &Inner) -> Vec<String> {
    let restores = std::mem::take(&mut lock(&inner.state).restores);
    let mut errs = Vec::new();
    for (file, value) in restores.iter().rev() {
        if let Err(e) = std::fs::write(file, format!("{value}\n")) {
            errs.push(format!("restoring {} to {value}: {e}", file.display()));
        }
    }
    errs
}

fn cleanup(inner: &Inner) -> Vec<String> {
    let _c = lock(&inner.cleanup_lock);
    if inner.cleaned.load(Ordering::SeqCst) {
        return Vec::new();
    }
    // Wait (bounded) for a machine-changing step in flight to finish.
    let deadline = Instant::now() + SIGNAL_GRACE;
    let _op = loop {
        match inner.op_lock.try_lock() {
            Ok(g) => break Some(g),
            Err(std::sync::TryLockError::Poisoned(p)) => break Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Err(std::sync::TryLockError::WouldBlock) => break None,
        }
    };
    let mut errs = Vec::new();
    let dir = inner.dir.clone();

    // 1. Children.
    let children = std::mem::take(&mut lock(&inner.state).children);
    for pid in children {
        if let Ok(p) = i32::try_from(pid) {
            // SAFETY: kill/waitpid on a pid this process spawned and has
            // not reaped (it is removed from the list once reaped), so it
            // cannot have been recycled for another process.
            unsafe {
                libc::kill(p, libc::SIGKILL);
                libc::waitpid(p, std::ptr::null_mut(), 0);
            }
        }
    }
    // 2. tracefs instances.
    let instances = std::mem::take(&mut lock(&inner.state).instances);
    for inst in instances {
        let _ = std::fs::write(inst.join("tracing_on"), "0");
        let mut ok = false;
        for _ in 0..50 {
            match std::fs::remove_dir(&inst) {
                Ok(()) => {
                    ok = true;
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    ok = true;
                    break;
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        if !ok {
            errs.push(format!(
                "could not remove tracefs instance {}",
                inst.display()
            ));
        }
    }
    // 3. Saved settings.
    errs.extend(restore_all(inner));
    // 4. Mounts under the directory, deepest first.
    for pass in 0..3 {
        let mut mounts = sys::mounts_under(&dir);
        if mounts.is_empty() {
            break;
        }
        mounts.sort_by_key(|m| std::cmp::Reverse(m.as_os_str().len()));
        for m in mounts {
            if sys::umount2(&m, 0).is_err() {
                if let Err(e) = sys::umount2(&m, libc::MNT_DETACH) {
                    if pass == 2 {
                        errs.push(format!("umount {}: {e}", m.display()));
                    }
                }
            }
        }
    }
    // 5. Loop devices backed by our images.
    for name in loops_under(&dir) {
        let dev = PathBuf::from(format!("/dev/{name}"));
        if let Err(e) = clear_loop_dev(&dev) {
            errs.push(format!("LOOP_CLR_FD {}: {e}", dev.display()));
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while !loops_under(&dir).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left = loops_under(&dir);
    if !left.is_empty() {
        errs.push(format!(
            "loop devices still attached after 10 s: {} (autoclear pending)",
            left.join(", ")
        ));
    }
    // 6. The directory.
    if sys::mounts_under(&dir).is_empty() {
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            if e.kind() != std::io::ErrorKind::NotFound {
                errs.push(format!("rm -r {}: {e}", dir.display()));
            }
        }
    } else {
        errs.push(format!(
            "left {} in place: something is still mounted under it",
            dir.display()
        ));
    }
    inner.cleaned.store(true, Ordering::SeqCst);
    errs
}
