//! `wbsim probe uring`: fio-like io_uring writers (fio `ioengine=io_uring`
//! with `iodepth` 1 and 16), buffered and `RWF_DONTCACHE`, sequential and
//! random, on xfs and ext4. The probe drives io_uring itself
//! ([`run_writer`], through the `io-uring` crate): fio is not needed and
//! the flag is passed as the SQE's `rw_flags`, as fio's `uncached=1` does.
//!
//! Not kernel code. For xfs and ext4, each on a fresh sparse image behind
//! a loop device with direct I/O, one writer per job into a new file, then
//! fsync (timed apart) and the file dropped. Jobs
//! `uring-<fs>-<seq|rand>-<buffered|dontcache>-qd<1|16>`:
//! - `seq`: 1 MiB writes in order, 512 MiB (`--quick`: 32 MiB);
//! - `rand`: 4 KiB writes over a 128 MiB file (`--quick`: 8 MiB) in a
//!   seeded random order, every block once.
//!
//! Up to `iodepth` writes are in flight: the writer fills the submission
//! queue, submits and waits for at least one completion
//! (`io_uring_enter(GETEVENTS, min_complete=1)`), reaps every completion
//! there is, and refills. The latency of a write (`fio.<job>.clat`, us) is
//! from just before its submission to its completion being reaped, fio's
//! `lat` (submission plus completion); what io_uring does with it in
//! between (the nonblocking first attempt, `-EAGAIN` and the punt to an
//! io-wq worker) is the kernel's. Metrics as every fio-shaped probe job
//! ([`super::record_job`]): `write_bw`, `clat` (with p99.9 and max),
//! `end_fsync`, the meminfo peaks.

use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use io_uring::{opcode, types, IoUring};

use super::guard::StopToken;
use super::iogen::{blocks_and_buffer, Outcome, Pattern};
use super::loopdev::{Fs, LoopDev};
use super::meminfo::Sampler;
use super::{progress, sys, Ctx};

/// Sequential: file size, write size.
const SEQ: (u64, usize) = (512 << 20, 1 << 20);
/// Random: file size, write size.
const RAND: (u64, usize) = (128 << 20, 4096);
/// `--quick` file sizes (seq, rand).
const QUICK: (u64, u64) = (32 << 20, 8 << 20);
/// Seed of the random order.
const RAND_SEED: u64 = 1;
/// The iodepths.
pub const DEPTHS: [u32; 2] = [1, 16];

/// One io_uring writer.
#[derive(Clone, Debug)]
pub struct UringJob {
    /// New file to write.
    pub path: PathBuf,
    /// Bytes.
    pub size: u64,
    /// Bytes per write.
    pub bs: usize,
    /// Order of blocks.
    pub pattern: Pattern,
    /// SQE `rw_flags` (0 or `RWF_DONTCACHE`).
    pub flags: i32,
    /// Writes in flight at most.
    pub iodepth: u32,
}

/// Runs one io_uring writer to completion (or the first failed write,
/// recorded in `errno`), then fsyncs the file.
pub fn run_writer(job: &UringJob, stop: &StopToken) -> anyhow::Result<Outcome> {
    let f = std::fs::File::create_new(&job.path)
        .with_context(|| format!("create {}", job.path.display()))?;
    let fd = types::Fd(f.as_raw_fd());
    let depth = job.iodepth.max(1);
    let mut ring = IoUring::new(depth.next_power_of_two())
        .context("io_uring_setup (is io_uring disabled by kernel.io_uring_disabled?)")?;
    let bs = job.bs.max(1);
    let len = u32::try_from(bs).context("write size above 4 GiB")?;
    // One buffer serves every write in flight: writes only read it.
    let (order, buf) = blocks_and_buffer(job.size, bs, job.pattern);
    let mut o = Outcome {
        clat_ns: Vec::with_capacity(order.len()),
        ..Outcome::default()
    };
    let mut started: Vec<Option<Instant>> = vec![None; depth as usize];
    let mut free: Vec<usize> = (0..depth as usize).rev().collect();
    let (mut next, mut inflight) = (0usize, 0usize);
    while next < order.len() || inflight > 0 {
        stop.check()?;
        if o.errno.is_none() {
            while next < order.len() {
                let Some(slot) = free.pop() else { break };
                let e = opcode::Write::new(fd, buf.as_ptr(), len)
                    .offset(order[next] * bs as u64)
                    .rw_flags(job.flags)
                    .build()
                    .user_data(slot as u64);
                let t = Instant::now();
                // SAFETY: `buf` outlives every write in flight (the loop
                // reaps them all before returning) and is not mutated.
                if unsafe { ring.submission().push(&e) }.is_err() {
                    free.push(slot);
                    break;
                }
                o.start.get_or_insert(t);
                started[slot] = Some(t);
                next += 1;
                inflight += 1;
            }
        }
        if inflight == 0 {
            break;
        }
        match ring.submit_and_wait(1) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).context("io_uring_enter"),
        }
        let now = Instant::now();
        for cqe in ring.completion() {
            let slot = cqe.user_data() as usize;
            let Some(t) = started.get_mut(slot).and_then(Option::take) else {
                continue;
            };
            free.push(slot);
            inflight -= 1;
            let res = cqe.result();
            if res < 0 {
                o.errno.get_or_insert(-res);
                continue;
            }
            o.clat_ns
                .push(u64::try_from((now - t).as_nanos()).unwrap_or(u64::MAX));
            o.bytes += res as u64;
            o.ios += 1;
            o.end = Some(now);
        }
        if o.errno.is_some() && inflight == 0 {
            return Ok(o);
        }
    }
    let t = Instant::now();
    f.sync_all()
        .with_context(|| format!("fsync {}", job.path.display()))?;
    o.fsync_ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
    Ok(o)
}

/// Runs the experiment.
pub fn run(ctx: &mut Ctx) -> anyhow::Result<()> {
    let quick = ctx.opts.quick;
    let repeat = if quick { 1 } else { ctx.opts.repeat };
    let (seq, rand) = if quick { QUICK } else { (SEQ.0, RAND.0) };
    let image = (seq * 2).max(512 << 20);
    for (k, v) in [
        ("uring.seq", format!("size={seq} bs={}", SEQ.1)),
        (
            "uring.rand",
            format!("size={rand} bs={} seed={RAND_SEED}", RAND.1),
        ),
        ("uring.iodepth", "1, 16".to_string()),
        ("uring.repeat", repeat.to_string()),
        ("uring.image_bytes", image.to_string()),
    ] {
        ctx.settings.insert(k.into(), v);
    }
    for fs in [Fs::Xfs, Fs::Ext4] {
        ctx.scenario_tables.push_str(&format!(
            "[[device]]\nname = \"loop-{0}\"\nprofile = \"loop-virtio\"\n\n\
             [[filesystem]]\nname = \"{0}\"\ntype = \"{0}\"\ndevice = \"loop-{0}\"\n\n",
            fs.name()
        ));
    }
    ctx.notes.push(
        "clat of the uring jobs is from just before a write's submission to its completion \
         being reaped (fio's lat)"
            .into(),
    );
    for fs in [Fs::Xfs, Fs::Ext4] {
        ctx.guard.check()?;
        progress(&format!("uring: {}: image, loop device, mkfs", fs.name()));
        let dev = LoopDev::attach(ctx, &format!("img-uring-{}", fs.name()), image)?;
        dev.mkfs(ctx.guard, fs)?;
        let mnt = dev.mount(ctx.guard, fs)?;
        for (pat, size, bs, pattern) in [
            ("seq", seq, SEQ.1, Pattern::Seq),
            ("rand", rand, RAND.1, Pattern::Rand(RAND_SEED)),
        ] {
            for (mode, flags) in [("buffered", 0), ("dontcache", sys::RWF_DONTCACHE)] {
                for qd in DEPTHS {
                    let job = format!("uring-{}-{pat}-{mode}-qd{qd}", fs.name());
                    progress(&format!("uring: job {job}"));
                    let mut runs = Vec::new();
                    for r in 0..repeat {
                        ctx.guard.check()?;
                        let w = UringJob {
                            path: mnt.join(format!("{job}-{r}")),
                            size,
                            bs,
                            pattern,
                            flags,
                            iodepth: qd,
                        };
                        let sampler = Sampler::start(Duration::from_millis(20));
                        let out = run_writer(&w, &ctx.guard.token());
                        let samples = sampler.stop();
                        let out = out?;
                        super::iogen::discard(&w.path)?;
                        let refused = out.errno;
                        runs.push((vec![out], samples));
                        if let Some(e) = refused {
                            let err = std::io::Error::from_raw_os_error(e);
                            ctx.notes.push(format!("{job}: a write failed: {err}"));
                            break;
                        }
                    }
                    super::record_job(ctx, &job, &runs, false);
                }
            }
        }
        super::loopdev::umount(ctx.guard, &mnt)?;
        dev.wait_free(Duration::from_secs(20))?;
        dev.detach(ctx.guard)?;
    }
    Ok(())
}
