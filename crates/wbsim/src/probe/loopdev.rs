//! Sparse images, loop devices, mkfs and mounts: the probe's filesystems.
//!
//! Not kernel code. Every image is a new sparse file under the guard's
//! directory; it is attached with `losetup --find --show --direct-io=on`
//! (the loop driver then submits direct I/O to the image, so the page cache
//! of the image file does not double-cache the data). Before `mkfs`,
//! `mount` or detaching, the loop device is checked to be one this probe
//! attached to its own image (`/sys/block/loopN/loop/backing_file`);
//! anything else is refused. Mount points are fresh directories, never
//! reused.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};

use super::guard::{loop_backing_file, Guard};
use super::{progress, sys, Ctx};

/// Filesystems the probe makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fs {
    /// No device.
    Tmpfs,
    /// `mkfs.xfs`.
    Xfs,
    /// `mkfs.btrfs`.
    Btrfs,
    /// `mkfs.ext4`.
    Ext4,
}

impl Fs {
    /// The name used in metric names and `mount -t`.
    pub fn name(self) -> &'static str {
        match self {
            Fs::Tmpfs => "tmpfs",
            Fs::Xfs => "xfs",
            Fs::Btrfs => "btrfs",
            Fs::Ext4 => "ext4",
        }
    }

    fn mkfs(self) -> Option<(&'static str, &'static [&'static str])> {
        match self {
            Fs::Tmpfs => None,
            Fs::Xfs => Some(("mkfs.xfs", &["-f", "-q"])),
            Fs::Btrfs => Some(("mkfs.btrfs", &["-f", "-q"])),
            Fs::Ext4 => Some(("mkfs.ext4", &["-F", "-q"])),
        }
    }
}

/// A loop device attached by this probe to one of its images.
#[derive(Debug)]
pub struct LoopDev {
    /// `/dev/loopN`.
    pub dev: PathBuf,
    /// `loopN`.
    pub name: String,
    /// The image.
    pub image: PathBuf,
    /// Whether the loop driver reports direct I/O on (`loop/dio`).
    pub direct_io: bool,
}

/// A bdi's max-ratio knob and the value that means 100%: `max_ratio_fine`
/// (parts per million) where the kernel has it, else `max_ratio` (percent).
/// Writing `max_bytes` rewrites it, so it is what a cap saves and restores.
fn max_ratio_knob(bdi: &Path) -> (PathBuf, &'static str) {
    let fine = bdi.join("max_ratio_fine");
    if fine.exists() {
        (fine, "1000000")
    } else {
        (bdi.join("max_ratio"), "100")
    }
}

impl LoopDev {
    /// Creates a sparse image of `size` bytes and attaches a loop device to
    /// it with direct I/O on.
    pub fn create(guard: &Guard, what: &str, size: u64) -> anyhow::Result<LoopDev> {
        let image = guard.unique(what).with_extension("img");
        guard.record("image", &image, &[])?;
        {
            let f = std::fs::File::create_new(&image)
                .with_context(|| format!("create {}", image.display()))?;
            f.set_len(size)
                .with_context(|| format!("truncate {}", image.display()))?;
        }
        guard.pause_point("image");
        let out = {
            let _op = guard.op()?;
            guard.record("loop", &image, &[])?;
            sys::run(
                "losetup",
                &[
                    "--find".as_ref(),
                    "--show".as_ref(),
                    "--direct-io=on".as_ref(),
                    image.as_os_str(),
                ],
            )?
        };
        let dev = PathBuf::from(out.trim());
        let name = dev
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        let l = LoopDev {
            dev,
            name,
            image,
            direct_io: false,
        };
        l.verify(guard)?;
        guard.pause_point("losetup");
        let direct_io = sys::read_trim(&PathBuf::from(format!("/sys/block/{}/loop/dio", l.name)))
            .is_ok_and(|v| v == "1");
        Ok(LoopDev { direct_io, ..l })
    }

    /// [`LoopDev::create`], then [`LoopDev::reset_bdi_limits`]: what an
    /// experiment attaches its devices with. A reset is reported on stderr
    /// and in `live.notes`, since it means an earlier run's settings were
    /// still in force on this device.
    pub fn attach(ctx: &mut Ctx, what: &str, size: u64) -> anyhow::Result<LoopDev> {
        let d = Self::create(ctx.guard, what, size)?;
        if let Some(found) = d.reset_bdi_limits(ctx.guard)? {
            let msg = format!(
                "{}: its bdi still had an earlier run's dirty limits ({found}); \
                 reset to the kernel's defaults before measuring",
                d.name
            );
            progress(&msg);
            ctx.notes.push(msg);
        }
        Ok(d)
    }

    /// Puts the device's bdi dirty limits back to the kernel's defaults
    /// (`strict_limit` 0, `min_ratio` 0, `max_ratio` 100) if they are not:
    /// a loop device's bdi outlives its attachment, so limits an earlier
    /// run set and never restored (a killed probe whose journal could no
    /// longer prove the device was its own) would otherwise cap this run's
    /// writeback. The device is verified to be this probe's first; the old
    /// values are not saved for cleanup (they are what is being undone).
    /// Returns the values found when it reset them.
    pub fn reset_bdi_limits(&self, guard: &Guard) -> anyhow::Result<Option<String>> {
        self.verify(guard)?;
        let bdi = self.bdi_dir();
        let read = |f: &str| sys::read_trim(&bdi.join(f)).ok();
        let (strict, min, max) = (read("strict_limit"), read("min_ratio"), read("max_ratio"));
        let off = |v: &Option<String>, default: &str| v.as_deref().is_some_and(|v| v != default);
        if !(off(&strict, "0") || off(&min, "0") || off(&max, "100")) {
            return Ok(None);
        }
        let found = format!(
            "strict_limit={} min_ratio={} max_ratio={}",
            strict.as_deref().unwrap_or("-"),
            min.as_deref().unwrap_or("-"),
            max.as_deref().unwrap_or("-")
        );
        let _op = guard.op()?;
        if off(&strict, "0") {
            sys::write(&bdi.join("strict_limit"), "0")?;
        }
        if off(&min, "0") {
            sys::write(&bdi.join("min_ratio"), "0")?;
        }
        if off(&max, "100") {
            let (knob, all) = max_ratio_knob(&bdi);
            sys::write(&knob, all)?;
        }
        Ok(Some(found))
    }

    /// Checks that the device is still attached to this probe's image.
    pub fn verify(&self, guard: &Guard) -> anyhow::Result<()> {
        match loop_backing_file(&self.name) {
            Some(b) if b == self.image && guard.owns(&b) => Ok(()),
            other => bail!(
                "refusing to use {}: backing file is {:?}, expected {} (this probe's own image)",
                self.dev.display(),
                other,
                self.image.display()
            ),
        }
    }

    /// The bdi directory (`/sys/block/loopN/bdi`).
    pub fn bdi_dir(&self) -> PathBuf {
        PathBuf::from(format!("/sys/block/{}/bdi", self.name))
    }

    /// The bdi name (`7:N`), as writeback tracepoints print it.
    pub fn bdi_name(&self) -> String {
        std::fs::read_link(self.bdi_dir())
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_default()
    }

    /// The device number as the kernel's tracepoints store it in a `dev`
    /// field (`MKDEV(major, minor)` = `major << 20 | minor`), from
    /// `/sys/block/loopN/dev`; None if unreadable.
    pub fn kernel_dev_t(&self) -> Option<u64> {
        let s = sys::read_trim(&PathBuf::from(format!("/sys/block/{}/dev", self.name))).ok()?;
        let (ma, mi) = s.split_once(':')?;
        Some((ma.parse::<u64>().ok()? << 20) | mi.parse::<u64>().ok()?)
    }

    /// Caps the dirty pages of this device's bdi at `max_bytes` with
    /// `strict_limit = 1` (the device is verified to be this probe's first;
    /// `strict_limit` and `max_ratio[_fine]`, which `max_bytes` rewrites,
    /// are saved and written back by the guard at cleanup or
    /// [`Guard::restore_all`]). Returns the settings before, as text; None
    /// if this kernel's bdi has no `max_bytes`/`strict_limit`.
    pub fn cap_dirty(&self, guard: &Guard, max_bytes: u64) -> anyhow::Result<Option<String>> {
        self.verify(guard)?;
        let bdi = self.bdi_dir();
        if !(bdi.join("strict_limit").exists() && bdi.join("max_bytes").exists()) {
            return Ok(None);
        }
        let (ratio_file, _) = max_ratio_knob(&bdi);
        let old_strict = guard.save(&bdi.join("strict_limit"))?;
        let old_ratio = guard.save(&ratio_file)?;
        sys::write(&bdi.join("max_bytes"), &max_bytes.to_string())?;
        sys::write(&bdi.join("strict_limit"), "1")?;
        Ok(Some(format!(
            "strict_limit={old_strict} {}={old_ratio}",
            ratio_file
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        )))
    }

    /// `mkfs` for `fs` on the device (verified first).
    pub fn mkfs(&self, guard: &Guard, fs: Fs) -> anyhow::Result<()> {
        let Some((prog, args)) = fs.mkfs() else {
            bail!("{} has no device to format", fs.name());
        };
        let _op = guard.op()?;
        self.verify(guard)?;
        let mut a: Vec<&std::ffi::OsStr> = args.iter().map(|s| s.as_ref()).collect();
        a.push(self.dev.as_os_str());
        sys::run(prog, &a)?;
        Ok(())
    }

    /// Mounts the device as `fs` on a fresh mount point; returns it.
    pub fn mount(&self, guard: &Guard, fs: Fs) -> anyhow::Result<PathBuf> {
        let mnt = guard.unique(&format!("mnt-{}", fs.name()));
        guard.record("mountpoint", &mnt, &[])?;
        std::fs::create_dir(&mnt).with_context(|| format!("mkdir {}", mnt.display()))?;
        {
            let _op = guard.op()?;
            self.verify(guard)?;
            guard.record("mount", &mnt, &[fs.name()])?;
            sys::run(
                "mount",
                &[
                    "-t".as_ref(),
                    fs.name().as_ref(),
                    self.dev.as_os_str(),
                    mnt.as_os_str(),
                ],
            )?;
        }
        guard.pause_point("mount");
        Ok(mnt)
    }

    /// Waits until no filesystem holds the device (after an umount).
    pub fn wait_free(&self, timeout: Duration) -> anyhow::Result<()> {
        if sys::wait_device_free(&self.dev, timeout).is_none() {
            bail!(
                "{} still busy {} s after umount",
                self.dev.display(),
                timeout.as_secs()
            );
        }
        Ok(())
    }

    /// Detaches the device (verified first) and removes the image.
    pub fn detach(self, guard: &Guard) -> anyhow::Result<()> {
        {
            let _op = guard.op()?;
            guard.detach_loop(&self.dev)?;
        }
        std::fs::remove_file(&self.image)
            .with_context(|| format!("rm {}", self.image.display()))?;
        Ok(())
    }
}

/// Mounts a tmpfs of `size` bytes on a fresh mount point.
pub fn mount_tmpfs(guard: &Guard, size: u64) -> anyhow::Result<PathBuf> {
    let mnt = guard.unique("mnt-tmpfs");
    guard.record("mountpoint", &mnt, &[])?;
    std::fs::create_dir(&mnt).with_context(|| format!("mkdir {}", mnt.display()))?;
    let _op = guard.op()?;
    guard.record("mount", &mnt, &["tmpfs"])?;
    sys::run(
        "mount",
        &[
            "-t".as_ref(),
            "tmpfs".as_ref(),
            "-o".as_ref(),
            format!("size={size}").as_ref(),
            "wbsim-probe".as_ref(),
            mnt.as_os_str(),
        ],
    )?;
    Ok(mnt)
}

/// Unmounts `mnt` (one of the probe's) and removes the mount point.
pub fn umount(guard: &Guard, mnt: &Path) -> anyhow::Result<()> {
    if !guard.owns(mnt) {
        bail!("refusing to unmount {}: not the probe's", mnt.display());
    }
    let _op = guard.op()?;
    sys::umount2(mnt, 0).with_context(|| format!("umount {}", mnt.display()))?;
    std::fs::remove_dir(mnt).with_context(|| format!("rmdir {}", mnt.display()))?;
    Ok(())
}

/// Writes `bytes` to a new file `name` in `dir` (1 MiB writes), without
/// syncing. Returns the path.
pub fn write_file(dir: &Path, name: &str, bytes: u64) -> anyhow::Result<PathBuf> {
    use std::io::Write;
    let p = dir.join(name);
    let mut f = std::fs::File::create_new(&p).with_context(|| format!("create {}", p.display()))?;
    let buf = fill_buffer(1 << 20, name.len() as u64);
    let mut left = bytes;
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        f.write_all(&buf[..n])
            .with_context(|| format!("write {}", p.display()))?;
        left -= n as u64;
    }
    Ok(p)
}

/// A buffer of non-repeating bytes (xorshift), so no layer can shortcut
/// zero or repeated pages.
pub fn fill_buffer(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    v
}
