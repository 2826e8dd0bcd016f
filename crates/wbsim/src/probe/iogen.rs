//! The probe's own write generator (fio's `rw=write`/`randwrite` with
//! `ioengine=pvsync2`, for the write flags fio on this machine lacks):
//! `pwritev2(2)` of `bs` bytes at a time, sequential or in a seeded random
//! permutation of the file's blocks (each block written once), with flags
//! 0 (buffered) or `RWF_DONTCACHE`, into a new file that is either empty
//! (the file grows with the writes) or preallocated first with
//! `fallocate(fd, 0, 0, size)` (fio's default `fallocate=native`; on xfs
//! and ext4 the file is then unwritten extents, converted to written as
//! each write's I/O completes). Completion latency is the wall time of each
//! call; the fallocate is not timed. Not kernel code.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Barrier;
use std::time::Instant;

use anyhow::Context;
use rand::seq::SliceRandom;
use rand::SeedableRng;

use super::guard::StopToken;
use super::sys;

/// Offsets in order or shuffled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// `rw=write`.
    Seq,
    /// `rw=randwrite` (seeded; every block once).
    Rand(u64),
}

/// One writer.
#[derive(Clone, Debug)]
pub struct WriteJob {
    /// New file to write.
    pub path: PathBuf,
    /// Bytes to write.
    pub size: u64,
    /// Bytes per call.
    pub bs: usize,
    /// Order of blocks.
    pub pattern: Pattern,
    /// `pwritev2` flags.
    pub flags: i32,
    /// `fallocate(fd, 0, 0, size)` the new file before the first write
    /// (outside the timed part).
    pub preallocate: bool,
    /// fsync at the end (timed separately, like fio `end_fsync=1`).
    pub end_fsync: bool,
}

/// What a writer did.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Bytes written.
    pub bytes: u64,
    /// Calls made.
    pub ios: u64,
    /// When the first call started.
    pub start: Option<Instant>,
    /// When the last call returned.
    pub end: Option<Instant>,
    /// Latency of each call, ns.
    pub clat_ns: Vec<u64>,
    /// The end fsync's duration, ns.
    pub fsync_ns: u64,
    /// errno of the first failing call (e.g. `EOPNOTSUPP`), if any.
    pub errno: Option<i32>,
}

/// `n` sequential buffered writers of `size` bytes each, on new files
/// `DIR/PREFIX-I` in 1 MiB-style `bs` calls, each fsynced at its end (fio
/// `numjobs=N rw=write end_fsync=1`).
pub fn seq_writers(dir: &Path, prefix: &str, n: usize, size: u64, bs: usize) -> Vec<WriteJob> {
    (0..n)
        .map(|i| WriteJob {
            path: dir.join(format!("{prefix}-{i}")),
            size,
            bs,
            pattern: Pattern::Seq,
            flags: 0,
            preallocate: false,
            end_fsync: true,
        })
        .collect()
}

/// The block numbers a writer of `size` bytes in `bs` calls visits, in
/// `pattern`'s order, and the buffer it writes from.
pub fn blocks_and_buffer(size: u64, bs: usize, pattern: Pattern) -> (Vec<u64>, Vec<u8>) {
    let blocks = size / bs as u64;
    let mut order: Vec<u64> = (0..blocks).collect();
    if let Pattern::Rand(seed) = pattern {
        order.shuffle(&mut rand::rngs::StdRng::seed_from_u64(seed));
    }
    (order, super::loopdev::fill_buffer(bs, blocks ^ size))
}

/// Runs `jobs` on one thread each, released together by a barrier so they
/// start at the same moment; their outcomes in `jobs` order (a panicked
/// writer is an error, not a crash of the probe).
pub fn run_together(jobs: &[WriteJob], stop: &StopToken) -> Vec<anyhow::Result<Outcome>> {
    let barrier = Barrier::new(jobs.len());
    std::thread::scope(|s| {
        let hs: Vec<_> = jobs
            .iter()
            .map(|j| {
                let b = &barrier;
                s.spawn(move || {
                    b.wait();
                    run(j, stop)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a writer thread panicked")))
            })
            .collect()
    })
}

/// Runs one writer to completion (or until stopped / the first error,
/// which is recorded in `errno`).
pub fn run(job: &WriteJob, stop: &StopToken) -> anyhow::Result<Outcome> {
    let f = std::fs::File::create_new(&job.path)
        .with_context(|| format!("create {}", job.path.display()))?;
    let fd = f.as_raw_fd();
    if job.preallocate {
        sys::fallocate(fd, 0, 0, job.size).with_context(|| {
            format!(
                "fallocate(mode 0, offset 0, len {}) of {}",
                job.size,
                job.path.display()
            )
        })?;
    }
    let bs = job.bs.max(1);
    let (order, buf) = blocks_and_buffer(job.size, bs, job.pattern);
    let mut o = Outcome {
        clat_ns: Vec::with_capacity(order.len()),
        ..Outcome::default()
    };
    for (i, blk) in order.iter().enumerate() {
        if i % 64 == 0 {
            stop.check()?;
        }
        let off = blk * bs as u64;
        let t = Instant::now();
        o.start.get_or_insert(t);
        let mut done = 0usize;
        while done < bs {
            match sys::pwritev2(fd, &buf[done..], off + done as u64, job.flags) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    o.errno = e.raw_os_error();
                    o.end = Some(Instant::now());
                    return Ok(o);
                }
            }
        }
        let now = Instant::now();
        o.clat_ns
            .push(u64::try_from((now - t).as_nanos()).unwrap_or(u64::MAX));
        o.end = Some(now);
        o.bytes += done as u64;
        o.ios += 1;
    }
    if job.end_fsync {
        let t = Instant::now();
        f.sync_all()
            .with_context(|| format!("fsync {}", job.path.display()))?;
        o.fsync_ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
    }
    Ok(o)
}

/// Drops a written file: fsync, drop its cached pages, unlink.
pub fn discard(path: &std::path::Path) -> anyhow::Result<()> {
    if let Ok(f) = std::fs::OpenOptions::new().write(true).open(path) {
        let _ = f.sync_all();
        sys::fadvise_dontneed(f.as_raw_fd());
    }
    std::fs::remove_file(path).with_context(|| format!("rm {}", path.display()))
}
