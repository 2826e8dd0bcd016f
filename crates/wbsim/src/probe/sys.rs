//! Thin wrappers over the system calls and commands the probe uses:
//! `umount2(2)`, `pwritev2(2)`, `fallocate(2)`, an `O_EXCL` open that
//! tells whether a block device is still claimed, `/proc/self/mountinfo`,
//! CPU affinity (`sched_getaffinity(2)`, `sched_setaffinity(2)`,
//! `sched_getcpu(3)`), `CLOCK_MONOTONIC`, a pipe with one-byte reads and writes, and running a
//! command with its error output kept for the message. Not kernel code.

use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// `RWF_DONTCACHE` (`include/uapi/linux/fs.h`, Linux 6.14+).
pub const RWF_DONTCACHE: i32 = 0x0000_0080;

/// Runs `prog args...`, returns its stdout; an error with its stderr if it
/// fails or cannot start.
pub fn run<S: AsRef<OsStr>>(prog: &str, args: &[S]) -> anyhow::Result<String> {
    let out = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {prog} (is it installed? see scripts/install.sh)"))?;
    if !out.status.success() {
        let shown: Vec<String> = args
            .iter()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .collect();
        bail!(
            "{prog} {} failed ({}): {}",
            shown.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn cpath(p: &Path) -> std::io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "NUL in path"))
}

/// `umount2(path, flags)`.
pub fn umount2(path: &Path, flags: i32) -> std::io::Result<()> {
    let c = cpath(path)?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    let r = unsafe { libc::umount2(c.as_ptr(), flags) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// `pwritev2(fd, [buf], offset, flags)`: bytes written.
pub fn pwritev2(fd: i32, buf: &[u8], offset: u64, flags: i32) -> std::io::Result<usize> {
    let iov = libc::iovec {
        iov_base: buf.as_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let off = i64::try_from(offset)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "offset"))?;
    // SAFETY: one iovec pointing at `buf`, which is valid for reads of
    // `buf.len()` bytes during the call; the kernel only reads from it.
    let r = unsafe { libc::pwritev2(fd, &iov, 1, off, flags) };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// `fallocate(fd, mode, offset, len)`, retried on `EINTR`. Mode 0
/// allocates the range (unwritten extents on xfs and ext4, preallocated
/// extents on btrfs) and extends the file size to cover it.
pub fn fallocate(fd: i32, mode: i32, offset: u64, len: u64) -> std::io::Result<()> {
    let bad = |_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "offset or length");
    let off = libc::off_t::try_from(offset).map_err(bad)?;
    let len = libc::off_t::try_from(len).map_err(bad)?;
    loop {
        // SAFETY: no memory is passed; the kernel validates fd and range.
        let r = unsafe { libc::fallocate(fd, mode, off, len) };
        if r == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Whether block device `dev` can be opened exclusively (no mounted
/// filesystem or other holder claims it).
pub fn device_is_free(dev: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_EXCL)
        .open(dev)
        .is_ok()
}

/// Polls [`device_is_free`] every 50 us until it is or `timeout` passes;
/// returns when it became free (None on timeout).
pub fn wait_device_free(dev: &Path, timeout: Duration) -> Option<Instant> {
    let deadline = Instant::now() + timeout;
    loop {
        if device_is_free(dev) {
            return Some(Instant::now());
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_micros(50));
    }
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(u8::is_ascii_digit) {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One line of `/proc/self/mountinfo`: mount point, fs type, source.
#[derive(Clone, Debug)]
pub struct MountEntry {
    /// Mount point.
    pub target: PathBuf,
    /// Filesystem type.
    pub fstype: String,
    /// Source (device).
    pub source: String,
}

/// Every mount of this mount namespace.
pub fn mounts() -> Vec<MountEntry> {
    let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let sep = f.iter().position(|x| *x == "-")?;
            Some(MountEntry {
                target: PathBuf::from(unescape(f.get(4)?)),
                fstype: f.get(sep + 1)?.to_string(),
                source: unescape(f.get(sep + 2)?),
            })
        })
        .collect()
}

/// Mount points strictly under `dir`.
pub fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    mounts()
        .into_iter()
        .map(|m| m.target)
        .filter(|t| t.starts_with(dir) && t != dir)
        .collect()
}

/// A file's contents without the trailing newline.
pub fn read_trim(p: &Path) -> anyhow::Result<String> {
    Ok(std::fs::read_to_string(p)
        .with_context(|| format!("read {}", p.display()))?
        .trim_end()
        .to_string())
}

/// Writes `value` to a sysfs/proc/tracefs file.
pub fn write(p: &Path, value: &str) -> anyhow::Result<()> {
    std::fs::write(p, value).with_context(|| format!("write '{value}' to {}", p.display()))
}

/// Effective user id.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// `posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)`: drop a file's clean
/// cached pages (after fsync), so the next job starts from a clean cache.
pub fn fadvise_dontneed(fd: i32) {
    // SAFETY: advisory call on an open fd; no memory is passed.
    unsafe {
        libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED);
    }
}

/// The CPUs this thread may run on (`sched_getaffinity(0)`), ascending.
pub fn allowed_cpus() -> std::io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain old data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid cpu_set_t of the size passed.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let n = 8 * std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: every index is below the set's capacity in bits.
    Ok((0..n)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// Pins the calling thread to `cpu` (`sched_setaffinity(0, {cpu})`: pid 0
/// is the calling thread, not the whole process).
pub fn pin_to_cpu(cpu: usize) -> std::io::Result<()> {
    if cpu >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "CPU number beyond cpu_set_t",
        ));
    }
    // SAFETY: cpu_set_t is plain old data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` is below the set's capacity in bits (checked above).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// `clock_gettime(CLOCK_MONOTONIC)` in ns (the clock of `Instant`, and of
/// tracefs's `mono` trace clock).
pub fn monotonic_ns() -> u64 {
    // SAFETY: timespec is plain old data; clock_gettime fills it.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: `ts` is valid for writes; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

/// The CPU the calling thread runs on (`sched_getcpu(3)`, vDSO), or None.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: no arguments; returns -1 on error.
    let c = unsafe { libc::sched_getcpu() };
    usize::try_from(c).ok()
}

/// A pipe (`pipe2(O_CLOEXEC)`): (read end, write end).
pub fn pipe() -> std::io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    use std::os::fd::FromRawFd;
    let mut fds = [0i32; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both are new descriptors owned by nobody else.
    Ok(unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    })
}

/// Reads one byte from `fd`, blocking, retried on `EINTR`: true for a
/// byte, false at end of file (every write end closed).
pub fn read_byte(fd: std::os::fd::BorrowedFd) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    let mut b = [0u8; 1];
    loop {
        // SAFETY: `b` is valid for writes of 1 byte during the call.
        let r = unsafe { libc::read(fd.as_raw_fd(), b.as_mut_ptr().cast(), 1) };
        match r {
            1 => return Ok(true),
            0 => return Ok(false),
            _ => {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
}

/// Writes one byte to `fd`, retried on `EINTR`.
pub fn write_byte(fd: std::os::fd::BorrowedFd) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let b = [1u8; 1];
    loop {
        // SAFETY: `b` is valid for reads of 1 byte during the call.
        let r = unsafe { libc::write(fd.as_raw_fd(), b.as_ptr().cast(), 1) };
        if r == 1 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if r == 0 || e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes() {
        assert_eq!(unescape(r"/a\040b"), "/a b");
        assert_eq!(unescape(r"/x\\"), r"/x\\");
        assert_eq!(unescape("/plain"), "/plain");
    }

    #[test]
    fn pipe_bytes_and_eof() {
        use std::os::fd::AsFd;
        let (r, w) = pipe().unwrap();
        write_byte(w.as_fd()).unwrap();
        assert!(read_byte(r.as_fd()).unwrap());
        drop(w);
        assert!(!read_byte(r.as_fd()).unwrap());
    }

    #[test]
    fn affinity_lists_this_cpu() {
        let cpus = allowed_cpus().unwrap();
        assert!(!cpus.is_empty());
        if let Some(c) = current_cpu() {
            assert!(cpus.contains(&c), "{c} not in {cpus:?}");
        }
    }
}
