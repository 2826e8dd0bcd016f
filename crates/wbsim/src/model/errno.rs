//! Error numbers returned by modelled system calls
//! (include/uapi/asm-generic/errno-base.h). Only the ones the model returns.

use std::fmt;

/// A system call's error, as `-errno` in the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Errno {
    /// EPERM (1): operation not permitted.
    EPERM,
    /// ENOENT (2): no such file or directory (no mount at that path).
    ENOENT,
    /// ENXIO (6): no such device (loop device not bound).
    ENXIO,
    /// EBUSY (16): device or resource busy (mount in use, block device
    /// claimed by another holder).
    EBUSY,
    /// EINVAL (22): invalid argument (not a mount point, bad flags).
    EINVAL,
}

impl Errno {
    /// The errno value.
    pub fn code(self) -> i32 {
        match self {
            Errno::EPERM => 1,
            Errno::ENOENT => 2,
            Errno::ENXIO => 6,
            Errno::EBUSY => 16,
            Errno::EINVAL => 22,
        }
    }

    /// The symbolic name (`EBUSY`).
    pub fn name(self) -> &'static str {
        match self {
            Errno::EPERM => "EPERM",
            Errno::ENOENT => "ENOENT",
            Errno::ENXIO => "ENXIO",
            Errno::EBUSY => "EBUSY",
            Errno::EINVAL => "EINVAL",
        }
    }
}

/// Errors of the read/write paths that are not syscall failures of the
/// mount API: `-EOPNOTSUPP` and `-EAGAIN`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoError {
    /// EOPNOTSUPP: RWF_DONTCACHE on a filesystem without FOP_DONTCACHE.
    NotSupported,
    /// EAGAIN: would block with IOCB_NOWAIT.
    Again,
    /// The charge failed at memory.max after reclaim (the memcg OOM; the
    /// OOM killer is not modelled, the caller reports it).
    Oom,
}

impl IoError {
    /// The name a program reports: the errno, or `OOM` for a memcg OOM
    /// (the kernel's OOM killer would end the process instead).
    pub fn name(&self) -> &'static str {
        match self {
            IoError::NotSupported => "EOPNOTSUPP",
            IoError::Again => "EAGAIN",
            IoError::Oom => "OOM",
        }
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::error::Error for Errno {}
