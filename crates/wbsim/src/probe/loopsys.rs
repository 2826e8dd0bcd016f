//! Loop devices as sysfs and the loop driver's ioctls show them: a device's
//! backing file, the devices backed by files under a directory, and
//! `LOOP_CLR_FD`. The probe's guard (cleanup on exit) and its recovery of a
//! dead run's leftovers both use these; neither decides here what is its own.

use std::path::{Path, PathBuf};

/// `LOOP_CLR_FD` (`include/uapi/linux/loop.h`).
const LOOP_CLR_FD: libc::c_ulong = 0x4C01;

/// The backing file of `/dev/NAME` (a loop device), without the
/// ` (deleted)` suffix; None if it is not an attached loop device.
pub fn loop_backing_file(name: &str) -> Option<PathBuf> {
    if !name.starts_with("loop") || name.contains('/') {
        return None;
    }
    let s = std::fs::read_to_string(format!("/sys/block/{name}/loop/backing_file")).ok()?;
    let s = s.trim_end_matches('\n');
    let s = s.strip_suffix(" (deleted)").unwrap_or(s);
    (!s.is_empty()).then(|| PathBuf::from(s))
}

/// Loop devices (`loopN`) whose backing file is under `dir`.
pub fn loops_under(dir: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    let mut out: Vec<String> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| loop_backing_file(n).is_some_and(|b| b.starts_with(dir)))
        .collect();
    out.sort();
    out
}

/// `LOOP_CLR_FD` on `dev` (ENXIO, already detached, is success); the
/// caller has verified the device's backing file.
pub fn clear_loop_dev(dev: &Path) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let f = std::fs::OpenOptions::new().read(true).open(dev)?;
    // SAFETY: LOOP_CLR_FD takes no argument pointer (0); the fd is a valid
    // open block device for the duration of the call.
    let r = unsafe { libc::ioctl(f.as_raw_fd(), LOOP_CLR_FD, 0) };
    if r == 0 {
        Ok(())
    } else {
        let e = std::io::Error::last_os_error();
        // ENXIO: already detached.
        if e.raw_os_error() == Some(libc::ENXIO) {
            Ok(())
        } else {
            Err(e)
        }
    }
}
