//! `wbsim probe umount`: umount and umount -l latency on the live kernel
//! (docs/experiments.md E3 "lazy-umount" on this machine's non-RT kernel, and the
//! umount path of E1 without cgroup writeback).
//!
//! Not kernel code. For each of tmpfs, xfs and btrfs (the block filesystems
//! on a fresh sparse 1 GiB image, loop device with direct I/O, warmed by
//! one mount/write/sync/umount cycle before anything is timed), `repeat`
//! times, interleaved: state clean | dirty (64 MiB written to a new file,
//! not synced, right before the umount), mode umount | lazy (`MNT_DETACH`),
//! timed as `call` (the `umount2(2)` call, in-process) and `cmd` (spawning
//! `umount [-l] MNT` until it exits: process start included, as `perf stat
//! -- umount` in E3). Every timed umount is of a fresh mount on a fresh
//! mount point with fresh file names (files of earlier rounds are removed
//! and synced right after the mount, before anything is timed, so the
//! image does not fill up). After each block-filesystem umount
//! the probe waits for the loop device to be free (`O_EXCL` open) and
//! records how long that took after the umount returned.
//!
//! Busy case (xfs): a child process holds a file of the mount open; the
//! lazy umount returns at once; the device stays claimed until the child is
//! killed and reaped; the time from then until the device can be opened
//! exclusively (the superblock really torn down) is recorded.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::loopdev::{self, Fs, LoopDev};
use super::{progress, sys, Ctx};

/// Bytes left unsynced for the dirty state.
const DIRTY_BYTES: u64 = 64 << 20;
/// Image size of the block filesystems.
const IMAGE_BYTES: u64 = 1 << 30;
/// tmpfs size.
const TMPFS_BYTES: u64 = 256 << 20;
/// How long a device may stay busy after umount before it is an error.
const FREE_TIMEOUT: Duration = Duration::from_secs(20);

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Runs the experiment.
pub fn run(ctx: &mut Ctx) -> anyhow::Result<()> {
    let repeat = if ctx.opts.quick { 1 } else { ctx.opts.repeat };
    ctx.settings
        .insert("umount.repeat".into(), repeat.to_string());
    ctx.settings
        .insert("umount.dirty_bytes".into(), DIRTY_BYTES.to_string());
    ctx.settings
        .insert("umount.image_bytes".into(), IMAGE_BYTES.to_string());
    ctx.scenario_tables.push_str(
        "[[device]]\nname = \"loop-xfs\"\nprofile = \"loop-virtio\"\n\n\
         [[device]]\nname = \"loop-btrfs\"\nprofile = \"loop-virtio\"\n\n\
         [[filesystem]]\nname = \"tmpfs\"\ntype = \"tmpfs\"\nmounted = false\n\n\
         [[filesystem]]\nname = \"xfs\"\ntype = \"xfs\"\ndevice = \"loop-xfs\"\nmounted = false\n\n\
         [[filesystem]]\nname = \"btrfs\"\ntype = \"btrfs\"\ndevice = \"loop-btrfs\"\nmounted = false\n",
    );
    ctx.notes.push(
        "model.devices use the model's loop-virtio profile as the closest description; \
         the live device parameters were not measured"
            .into(),
    );
    for fs in [Fs::Tmpfs, Fs::Xfs, Fs::Btrfs] {
        ctx.guard.check()?;
        let dev = if fs == Fs::Tmpfs {
            None
        } else {
            progress(&format!(
                "umount: {}: image, loop device, mkfs, warm-up",
                fs.name()
            ));
            let d = LoopDev::attach(ctx, &format!("img-{}", fs.name()), IMAGE_BYTES)?;
            if !d.direct_io {
                ctx.notes.push(format!(
                    "{}: the loop driver did not enable direct I/O",
                    d.name
                ));
            }
            d.mkfs(ctx.guard, fs)?;
            // Warm: first mount, write, sync, umount.
            let mnt = d.mount(ctx.guard, fs)?;
            loopdev::write_file(&mnt, "warm", DIRTY_BYTES)?;
            sys::run("sync", &["-f".as_ref(), mnt.as_os_str()])?;
            loopdev::umount(ctx.guard, &mnt)?;
            d.wait_free(FREE_TIMEOUT)?;
            Some(d)
        };
        progress(&format!("umount: {}: timing {repeat} round(s)", fs.name()));
        for round in 0..repeat {
            for state in ["clean", "dirty"] {
                for mode in ["umount", "lazy"] {
                    for kind in ["call", "cmd"] {
                        ctx.guard.check()?;
                        time_one(ctx, fs, dev.as_ref(), state, mode, kind, round)?;
                    }
                }
            }
        }
        if fs == Fs::Xfs {
            if let Some(d) = &dev {
                progress(&format!("umount: busy lazy umount, {repeat} round(s)"));
                let mut busy = 0u32;
                for round in 0..repeat {
                    ctx.guard.check()?;
                    busy += u32::from(busy_one(ctx, d, round)?);
                }
                ctx.metrics.set(
                    "umount.busy.device_busy_after_lazy",
                    "fraction",
                    f64::from(busy) / f64::from(repeat),
                );
            }
        }
        if let Some(d) = dev {
            d.detach(ctx.guard)?;
        }
    }
    Ok(())
}

/// One timed umount of a fresh mount.
fn time_one(
    ctx: &mut Ctx,
    fs: Fs,
    dev: Option<&LoopDev>,
    state: &str,
    mode: &str,
    kind: &str,
    round: u32,
) -> anyhow::Result<()> {
    let mnt = match dev {
        None => loopdev::mount_tmpfs(ctx.guard, TMPFS_BYTES)?,
        Some(d) => d.mount(ctx.guard, fs)?,
    };
    // Free the space of earlier rounds' files (not timed), synced, so the
    // image does not fill up; the timed state is then only what follows.
    let mut removed = false;
    for e in std::fs::read_dir(&mnt)?.flatten() {
        if e.file_name().to_string_lossy().starts_with("dirty-") {
            std::fs::remove_file(e.path())?;
            removed = true;
        }
    }
    if removed {
        sys::run("sync", &["-f".as_ref(), mnt.as_os_str()])?;
    }
    if state == "dirty" {
        // A new name every time (never reuse a file name when timing umount).
        let name = format!(
            "dirty-{}",
            ctx.guard
                .unique(&format!("{state}-{mode}-{kind}-{round}"))
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        );
        loopdev::write_file(&mnt, &name, DIRTY_BYTES)?;
    }
    let elapsed = {
        let _op = ctx.guard.op()?;
        if let Some(d) = dev {
            d.verify(ctx.guard)?;
        }
        match kind {
            "call" => {
                let flags = if mode == "lazy" { libc::MNT_DETACH } else { 0 };
                let t = Instant::now();
                let r = sys::umount2(&mnt, flags);
                let e = t.elapsed();
                r.with_context(|| format!("umount2 {}", mnt.display()))?;
                e
            }
            _ => {
                let mut c = Command::new("umount");
                if mode == "lazy" {
                    c.arg("-l");
                }
                c.arg(&mnt)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped());
                let t = Instant::now();
                let out = c.output().context("cannot run umount(8)")?;
                let e = t.elapsed();
                if !out.status.success() {
                    bail!(
                        "umount {} failed: {}",
                        mnt.display(),
                        String::from_utf8_lossy(&out.stderr).trim()
                    );
                }
                e
            }
        }
    };
    let after = Instant::now();
    let base = format!("umount.{}.{state}.{mode}", fs.name());
    ctx.metrics
        .record_as(&format!("{base}.{kind}"), "ns", "ms", ns(elapsed));
    if let Some(d) = dev {
        match sys::wait_device_free(&d.dev, FREE_TIMEOUT) {
            Some(t) => ctx.metrics.record_as(
                &format!("{base}.device_free_after"),
                "ns",
                "ms",
                ns(t.saturating_duration_since(after)),
            ),
            None => bail!(
                "{} still busy {} s after {mode} of {}",
                d.dev.display(),
                FREE_TIMEOUT.as_secs(),
                mnt.display()
            ),
        }
    }
    std::fs::remove_dir(&mnt).with_context(|| format!("rmdir {}", mnt.display()))?;
    Ok(())
}

/// Lazy umount of a mount a child process holds open; returns whether the
/// device was still claimed right after the lazy umount returned.
fn busy_one(ctx: &mut Ctx, d: &LoopDev, round: u32) -> anyhow::Result<bool> {
    let mnt = d.mount(ctx.guard, Fs::Xfs)?;
    let file = loopdev::write_file(&mnt, &format!("busy-{round}"), 1 << 20)?;
    let mut child = spawn_holder(&file)?;
    ctx.guard.add_child(child.id());
    let r = busy_measure(ctx, d, &mnt, &mut child);
    let _ = child.kill();
    let _ = child.wait();
    ctx.guard.remove_child(child.id());
    let busy = r?;
    std::fs::remove_dir(&mnt).with_context(|| format!("rmdir {}", mnt.display()))?;
    Ok(busy)
}

fn spawn_holder(file: &Path) -> anyhow::Result<std::process::Child> {
    let f = std::fs::File::open(file).with_context(|| format!("open {}", file.display()))?;
    Command::new("sleep")
        .arg("600")
        .stdin(Stdio::from(f))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot start the holder process (sleep)")
}

fn busy_measure(
    ctx: &mut Ctx,
    d: &LoopDev,
    mnt: &Path,
    child: &mut std::process::Child,
) -> anyhow::Result<bool> {
    let call = {
        let _op = ctx.guard.op()?;
        d.verify(ctx.guard)?;
        let t = Instant::now();
        sys::umount2(mnt, libc::MNT_DETACH)
            .with_context(|| format!("umount -l {}", mnt.display()))?;
        t.elapsed()
    };
    ctx.metrics
        .record_as("umount.busy.lazy.call", "ns", "ms", ns(call));
    let busy = !sys::device_is_free(&d.dev);
    // Hold it a little, as a real holder would, then let it go.
    std::thread::sleep(Duration::from_millis(20));
    let killed = Instant::now();
    child.kill().context("killing the holder")?;
    child.wait().context("reaping the holder")?;
    let reaped = Instant::now();
    ctx.guard.remove_child(child.id());
    match sys::wait_device_free(&d.dev, FREE_TIMEOUT) {
        Some(free) => {
            ctx.metrics.record_as(
                "umount.busy.teardown_after_close",
                "ns",
                "ms",
                ns(free.saturating_duration_since(reaped)),
            );
            ctx.metrics.record_as(
                "umount.busy.teardown_after_kill",
                "ns",
                "ms",
                ns(free.saturating_duration_since(killed)),
            );
            Ok(busy)
        }
        None => bail!(
            "{} still busy {} s after the holder exited",
            d.dev.display(),
            FREE_TIMEOUT.as_secs()
        ),
    }
}
