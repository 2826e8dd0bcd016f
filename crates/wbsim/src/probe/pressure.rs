//! `wbsim probe pressure`: buffered writers that outrun what they may keep
//! in memory, the workloads where writers stall in `balance_dirty_pages`.
//!
//! Not kernel code. One xfs on a fresh sparse image behind a loop device
//! with direct I/O; every writer writes its own new file in 1 MiB
//! `pwritev2` calls, then fsyncs it (fio `rw=write bs=1m end_fsync=1`):
//! - `over-dirty-w1`: one writer, one file 1.25x the machine's global dirty
//!   threshold (`nr_dirty_threshold` of `/proc/vmstat` at the start, in
//!   pages of 4 KiB, rounded up to 256 MiB; about 5.75 GiB on this 24 GiB
//!   machine), with no per-device cap: the writer is throttled against the
//!   global limit (`vm.dirty_ratio` of the machine's dirtyable memory).
//!   The image is sparse and only what is written takes disk space; the
//!   probe refuses to start the job if the filesystem holding its
//!   directory has less than the file plus 2 GiB free.
//! - `over-mem-w1`, `over-mem-w4`, `over-mem-w16`: 1, 4 and 16 writers
//!   together writing 1 GiB (each 1 GiB / N) while the loop device's bdi
//!   may hold at most 64 MiB dirty (`max_bytes = 64 MiB`,
//!   `strict_limit = 1`): each job writes 16 times the memory its writers
//!   may dirty. The limit is the bdi's `max_bytes` and not a memory cgroup:
//!   on this machine the memory controller is cgroup v1, which has no
//!   dirty throttling of its own (a v1 memcg full of dirty pages stalls in
//!   reclaim, waiting on writeback, a path neither this probe nor the model
//!   follows), a cgroup would need the probe's process moved in and out of
//!   it, and the guard touches nothing but its own loop devices, images,
//!   mounts and its own device's bdi settings (saved and written back on
//!   every exit path). The model has the same knobs (`[device.bdi]
//!   strict_limit`, `max_bytes`), so its scenario states the same limit.
//!   What it does not limit: the clean page cache, which stays outside it.
//!
//! Each job also counts the writeback tracepoints of
//! [`super::tracefs::EVENTS`] through a private tracefs instance filtered
//! to the loop device's bdi, and records the throttling state their
//! `balance_dirty_pages` and `bdi_dirty_ratelimit` events carry, as the
//! buffered-write probe does (`fio.<job>.trace.*`); without tracefs the
//! jobs run uncounted and a note says so.
//!
//! `--quick`: the global-limit job is left out (it needs GiBs); the bdi
//! jobs write 64 MiB under a 16 MiB cap. `/proc/meminfo` is sampled every
//! 50 ms (`fio.<job>.dirty_pages`, `fio.<job>.writeback_pages`). Metrics as
//! every fio-shaped probe job ([`super::record_job`]), with clat
//! percentiles to p99.9 and max.

use std::time::Duration;

use anyhow::{bail, Context};

use std::collections::BTreeMap;

use super::iogen::{self, WriteJob};
use super::loopdev::{Fs, LoopDev};
use super::meminfo::Sampler;
use super::tracefs::{self, Instance};
use super::{progress, Ctx};

/// Write size.
const BS: usize = 1 << 20;
/// The global-limit file: this many times the dirty threshold.
const OVER_DIRTY_FACTOR: f64 = 1.25;
/// Rounding of that file's size.
const ROUND: u64 = 256 << 20;
/// Free space kept beyond the file.
const SPARE: u64 = 2 << 30;
/// bdi cap of the `over-mem` jobs, and `--quick`.
const BDI_MAX: (u64, u64) = (64 << 20, 16 << 20);
/// Bytes the `over-mem` jobs write in all, and `--quick`.
const OVER_MEM_TOTAL: (u64, u64) = (1 << 30, 64 << 20);
/// Writer counts of the `over-mem` jobs.
pub const WRITERS: [usize; 3] = [1, 4, 16];
/// Per-CPU trace buffer of the tracepoint counts, KiB.
const TRACE_BUFFER_KIB: u64 = 8192;

/// `nr_dirty_threshold` (pages) from `/proc/vmstat` text.
pub fn dirty_threshold_pages(vmstat: &str) -> Option<u64> {
    vmstat
        .lines()
        .find_map(|l| l.strip_prefix("nr_dirty_threshold "))
        .and_then(|v| v.trim().parse().ok())
}

/// The global-limit file's size for a threshold of `pages` 4 KiB pages.
pub fn over_dirty_bytes(pages: u64) -> u64 {
    let b = (pages as f64 * 4096.0 * OVER_DIRTY_FACTOR) as u64;
    b.div_ceil(ROUND).max(1) * ROUND
}

/// Free bytes of the filesystem holding `dir`.
fn free_bytes(dir: &std::path::Path) -> anyhow::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())?;
    // SAFETY: statvfs fills the zeroed struct; `c` is NUL-terminated.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error()).context("statvfs");
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

/// N writers started together, each on its own new file; their outcomes.
fn run_writers(ctx: &Ctx, jobs: &[WriteJob]) -> anyhow::Result<Vec<iogen::Outcome>> {
    let results = iogen::run_together(jobs, &ctx.guard.token());
    let out = results.into_iter().collect::<anyhow::Result<Vec<_>>>();
    for j in jobs {
        if j.path.exists() {
            iogen::discard(&j.path)?;
        }
    }
    out
}

/// One job: `n` writers of `each` bytes, repeated; recorded with series.
fn job(
    ctx: &mut Ctx,
    mnt: &std::path::Path,
    inst: Option<&Instance>,
    name: &str,
    (n, each): (usize, u64),
    repeat: u32,
) -> anyhow::Result<()> {
    progress(&format!("pressure: job {name}"));
    let mut runs = Vec::new();
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for r in 0..repeat {
        ctx.guard.check()?;
        let jobs = iogen::seq_writers(mnt, &format!("{name}-{r}"), n, each, BS);
        let cap = inst.map(Instance::start).transpose()?;
        let sampler = Sampler::start(Duration::from_millis(50));
        let out = run_writers(ctx, &jobs);
        let samples = sampler.stop();
        if let (Some(i), Some(c)) = (inst, cap) {
            i.finish_into(c, &mut counts)?;
        }
        runs.push((out?, samples));
    }
    super::record_job(ctx, name, &runs, true);
    tracefs::record_means(&mut ctx.metrics, name, counts, f64::from(repeat));
    Ok(())
}

/// Runs the experiment.
pub fn run(ctx: &mut Ctx) -> anyhow::Result<()> {
    let quick = ctx.opts.quick;
    let repeat = if quick { 1 } else { ctx.opts.repeat };
    let pick = |(full, q): (u64, u64)| if quick { q } else { full };
    let (bdi_max, total) = (pick(BDI_MAX), pick(OVER_MEM_TOTAL));
    let over_dirty = if quick {
        None
    } else {
        let vm = std::fs::read_to_string("/proc/vmstat").context("reading /proc/vmstat")?;
        let pages = dirty_threshold_pages(&vm).context("/proc/vmstat has no nr_dirty_threshold")?;
        let bytes = over_dirty_bytes(pages);
        let free = free_bytes(ctx.guard.dir())?;
        if free < bytes + SPARE {
            bail!(
                "pressure: the over-dirty job writes {} MiB but {} has {} MiB free \
                 (needs the file plus {} MiB)",
                bytes >> 20,
                ctx.guard.dir().display(),
                free >> 20,
                SPARE >> 20
            );
        }
        ctx.settings.insert(
            "pressure.nr_dirty_threshold (pages, at start)".into(),
            pages.to_string(),
        );
        Some(bytes)
    };
    let image = over_dirty.unwrap_or(0).max(total) + (1 << 30);
    for (k, v) in [
        (
            "pressure.over_dirty_bytes",
            over_dirty.map_or("left out (--quick)".into(), |b| b.to_string()),
        ),
        ("pressure.over_mem_total_bytes", total.to_string()),
        ("pressure.over_mem_bdi_max_bytes", bdi_max.to_string()),
        ("pressure.bs", BS.to_string()),
        ("pressure.repeat", repeat.to_string()),
        ("pressure.image_bytes", image.to_string()),
    ] {
        ctx.settings.insert(k.into(), v);
    }
    ctx.scenario_tables.push_str(
        "[[device]]\nname = \"loop-xfs\"\nprofile = \"loop-virtio\"\n\n\
         [[filesystem]]\nname = \"xfs\"\ntype = \"xfs\"\ndevice = \"loop-xfs\"\n\n",
    );
    ctx.notes.push(
        "over-mem jobs: the loop device's bdi capped with max_bytes and strict_limit=1 \
         (not in model.devices: the over-dirty job runs on the same device without it)"
            .into(),
    );
    progress("pressure: image, loop device, mkfs.xfs");
    let dev = LoopDev::attach(ctx, "img-pressure-xfs", image)?;
    dev.mkfs(ctx.guard, Fs::Xfs)?;
    let mnt = dev.mount(ctx.guard, Fs::Xfs)?;
    let trace = match tracefs::mount(ctx.guard) {
        Ok(root) => match Instance::create(ctx.guard, &root, &dev.bdi_name(), TRACE_BUFFER_KIB) {
            Ok(i) => Some((root, i)),
            Err(e) => {
                ctx.notes.push(format!(
                    "no tracepoint counts: creating a trace instance failed: {e:#}"
                ));
                super::loopdev::umount(ctx.guard, &root)?;
                None
            }
        },
        Err(e) => {
            ctx.notes.push(format!(
                "no tracepoint counts: mounting a private tracefs failed: {e:#}"
            ));
            None
        }
    };
    let inst = trace.as_ref().map(|(_, i)| i);
    if let Some(bytes) = over_dirty {
        job(ctx, &mnt, inst, "over-dirty-w1", (1, bytes), repeat)?;
    }
    match dev.cap_dirty(ctx.guard, bdi_max)? {
        Some(before) => {
            ctx.settings.insert(
                format!("bdi {} during over-mem jobs", dev.bdi_name()),
                format!("strict_limit=1 max_bytes={bdi_max}"),
            );
            ctx.settings
                .insert(format!("bdi {} before (restored)", dev.bdi_name()), before);
        }
        None => ctx.notes.push(
            "the bdi has no strict_limit/max_bytes knobs: over-mem jobs ran without a cap".into(),
        ),
    }
    for n in WRITERS {
        job(
            ctx,
            &mnt,
            inst,
            &format!("over-mem-w{n}"),
            (n, total / n as u64),
            repeat,
        )?;
    }
    if let Some((root, i)) = trace {
        i.close(ctx.guard)?;
        super::loopdev::umount(ctx.guard, &root)?;
    }
    let errs = ctx.guard.restore_all();
    if !errs.is_empty() {
        bail!("restoring bdi settings: {}", errs.join("; "));
    }
    super::loopdev::umount(ctx.guard, &mnt).context("umount xfs")?;
    dev.wait_free(Duration::from_secs(60))?;
    dev.detach(ctx.guard)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn over_dirty_size_is_past_the_threshold() {
        let vm = "nr_dirty 1\nnr_dirty_threshold 1218242\nnr_dirty_background_threshold 608377\n";
        let pages = dirty_threshold_pages(vm).unwrap();
        assert_eq!(pages, 1_218_242);
        let b = over_dirty_bytes(pages);
        assert!(b as f64 >= pages as f64 * 4096.0 * 1.25);
        assert_eq!(b % ROUND, 0);
        assert_eq!(b, 24 * ROUND);
        // The run in docs/probe/pressure.json: 1192582 pages -> 23 x 256 MiB.
        assert_eq!(over_dirty_bytes(1_192_582), 23 * ROUND);
        assert_eq!(dirty_threshold_pages("nr_dirty 5\n"), None);
    }
}
