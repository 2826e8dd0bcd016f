//! `wbsim probe dontcache`: buffered vs `RWF_DONTCACHE` writes on the live
//! kernel (docs/experiments.md E5, single stream, on this machine), into new
//! empty files and into preallocated ones.
//!
//! Not kernel code. For xfs, ext4 and btrfs, each on a fresh sparse image
//! behind a loop device with direct I/O, one writer per job, each job in
//! both modes `<mode>` = `buffered` | `dontcache`:
//! - `<fs>-seq-<mode>`: 1 MiB writes, sequential, 1 GiB file;
//! - `<fs>-rand-<mode>`: 4 KiB writes in a seeded random order over a
//!   256 MiB file, every block once;
//! - `<fs>-seq4k-<mode>`: 4 KiB writes, sequential, 256 MiB file;
//! - `<fs>-<seq|seq4k|rand>-<mode>-falloc`: the same three patterns into a
//!   file preallocated with `fallocate(fd, 0, 0, size)` right after it is
//!   created, before the timed writes (fio's default `fallocate=native`).
//!   On xfs and ext4 the file is then unwritten extents and each written
//!   range is converted to written when its I/O completes; on btrfs it is
//!   preallocated extents.
//!
//! `--quick` uses 64 MiB (seq) and 16 MiB (rand, seq4k). Each job writes a
//! new file with `pwritev2(2)` (flags 0 or `RWF_DONTCACHE`), then fsyncs it
//! (timed apart, `fio.<job>.end_fsync`), drops its cache and removes it. The
//! jobs without `-falloc` run first per filesystem, in the order of the
//! probe before the seq4k and `-falloc` jobs were added. `/proc/meminfo`
//! is sampled every 20 ms. A filesystem that refuses the flag (btrfs:
//! `EOPNOTSUPP`) is recorded as `fio.<job>.errno` and a note; every job
//! still runs on btrfs (a refused dontcache job stops at its first write).
//! Bandwidth is of the write calls only.
//!
//! On xfs, every job (with and without `-falloc`) also counts the
//! tracepoints [`XFS_EVENTS`] through a private tracefs instance, filtered
//! to the loop device's `dev`, from just before the first write to the
//! return of the end fsync (which waits for the I/O completions, where the
//! conversions run): `fio.<job>.trace.xfs_unwritten_convert` (one per
//! completed ioend whose range had unwritten extents, converted in
//! `xfs_end_ioend` in a kworker under the inode lock),
//! `fio.<job>.trace.xfs_setfilesize` (ioends that moved the on-disk size),
//! `fio.<job>.trace.xfs_update_time` (timestamp updates: the first write of
//! the file in each jiffy, `xfs_vn_update_time`) and
//! `fio.<job>.trace.overrun` (events lost). Counts only: the time spent
//! converting is not measured. If tracefs or the events are missing, the
//! jobs run without counts and a note says so.

use std::collections::BTreeMap;

use super::iogen::{self, Pattern, WriteJob};
use super::loopdev::{Fs, LoopDev};
use super::meminfo::Sampler;
use super::tracefs::{self, Instance};
use super::{progress, sys, Ctx};

/// Sequential job: file size and write size.
const SEQ: (u64, usize) = (1 << 30, 1 << 20);
/// Random job: file size and write size.
const RAND: (u64, usize) = (256 << 20, 4096);
/// Sequential 4 KiB job: file size and write size.
const SEQ4K: (u64, usize) = (256 << 20, 4096);
/// `--quick` sizes.
const SEQ_QUICK: u64 = 64 << 20;
/// `--quick` sizes.
const RAND_QUICK: u64 = 16 << 20;
/// `--quick` sizes.
const SEQ4K_QUICK: u64 = 16 << 20;
/// Seed of the random order.
const RAND_SEED: u64 = 1;
/// The xfs tracepoints counted per xfs job (those present are enabled).
pub const XFS_EVENTS: &[&str] = &[
    "xfs_unwritten_convert",
    "xfs_setfilesize",
    "xfs_update_time",
];
/// Per-CPU ring buffer of the tracefs instance, KiB.
const TRACE_BUFFER_KIB: u64 = 8192;

/// One job's layout and write pattern.
#[derive(Clone, Copy, Debug)]
struct Spec {
    /// `seq`, `rand` or `seq4k`.
    pat: &'static str,
    /// File size.
    size: u64,
    /// Write size.
    bs: usize,
    /// Block order.
    pattern: Pattern,
    /// `fallocate` the file first (`-falloc` jobs).
    falloc: bool,
}

/// The jobs of one filesystem, in run order (each in both modes).
fn specs(quick: bool) -> Vec<Spec> {
    let pick = |full: u64, q: u64| if quick { q } else { full };
    let seq = Spec {
        pat: "seq",
        size: pick(SEQ.0, SEQ_QUICK),
        bs: SEQ.1,
        pattern: Pattern::Seq,
        falloc: false,
    };
    let rand = Spec {
        pat: "rand",
        size: pick(RAND.0, RAND_QUICK),
        bs: RAND.1,
        pattern: Pattern::Rand(RAND_SEED),
        falloc: false,
    };
    let seq4k = Spec {
        pat: "seq4k",
        size: pick(SEQ4K.0, SEQ4K_QUICK),
        bs: SEQ4K.1,
        pattern: Pattern::Seq,
        falloc: false,
    };
    let mut v = vec![seq, rand, seq4k];
    v.extend([seq, seq4k, rand].map(|s| Spec { falloc: true, ..s }));
    v
}

/// Runs the experiment.
pub fn run(ctx: &mut Ctx) -> anyhow::Result<()> {
    let quick = ctx.opts.quick;
    let repeat = if quick { 1 } else { ctx.opts.repeat };
    let specs = specs(quick);
    let seq_size = specs[0].size;
    let image = (seq_size * 2).max(512 << 20);
    for (k, v) in [
        (
            "dontcache.seq",
            format!("size={} bs={}", specs[0].size, SEQ.1),
        ),
        (
            "dontcache.rand",
            format!("size={} bs={} seed={RAND_SEED}", specs[1].size, RAND.1),
        ),
        (
            "dontcache.seq4k",
            format!("size={} bs={}", specs[2].size, SEQ4K.1),
        ),
        (
            "dontcache.falloc",
            "jobs <fs>-<seq|seq4k|rand>-<mode>-falloc: fallocate(fd, 0, 0, size) \
             on the new file before the writes (not timed)"
                .to_string(),
        ),
        ("dontcache.repeat", repeat.to_string()),
        ("dontcache.image_bytes", image.to_string()),
    ] {
        ctx.settings.insert(k.into(), v);
    }
    for fs in [Fs::Xfs, Fs::Ext4, Fs::Btrfs] {
        ctx.scenario_tables.push_str(&format!(
            "[[device]]\nname = \"loop-{0}\"\nprofile = \"loop-virtio\"\n\n\
             [[filesystem]]\nname = \"{0}\"\ntype = \"{0}\"\ndevice = \"loop-{0}\"\n\n",
            fs.name()
        ));
    }
    ctx.notes.push(
        "model.devices use the model's loop-virtio profile as the closest description; \
         the live device parameters were not measured"
            .into(),
    );
    ctx.notes.push(
        "peak_dirty/peak_cached are machine-wide /proc/meminfo peaks during the job; \
         start_* are the values at its start"
            .into(),
    );
    // A private tracefs for the xfs counts; without one the jobs still run.
    let trace_root = match tracefs::mount(ctx.guard) {
        Ok(r) => Some(r),
        Err(e) => {
            ctx.notes.push(format!(
                "no xfs tracepoint counts: mounting a private tracefs failed: {e:#}"
            ));
            None
        }
    };
    for fs in [Fs::Xfs, Fs::Ext4, Fs::Btrfs] {
        ctx.guard.check()?;
        progress(&format!(
            "dontcache: {}: image, loop device, mkfs",
            fs.name()
        ));
        let dev = LoopDev::attach(ctx, &format!("img-{}", fs.name()), image)?;
        dev.mkfs(ctx.guard, fs)?;
        let mnt = dev.mount(ctx.guard, fs)?;
        let inst = match (&trace_root, fs) {
            (Some(root), Fs::Xfs) => xfs_instance(ctx, root, &dev),
            _ => None,
        };
        for spec in &specs {
            for (mode, flags) in [("buffered", 0), ("dontcache", sys::RWF_DONTCACHE)] {
                let job = format!(
                    "{}-{}-{mode}{}",
                    fs.name(),
                    spec.pat,
                    if spec.falloc { "-falloc" } else { "" }
                );
                progress(&format!("dontcache: job {job}"));
                let mut runs = Vec::new();
                let mut counts: BTreeMap<String, u64> = BTreeMap::new();
                for r in 0..repeat {
                    ctx.guard.check()?;
                    let w = WriteJob {
                        path: mnt.join(format!("{job}-{r}")),
                        size: spec.size,
                        bs: spec.bs,
                        pattern: spec.pattern,
                        flags,
                        preallocate: spec.falloc,
                        end_fsync: true,
                    };
                    let cap = inst.as_ref().map(Instance::start).transpose()?;
                    let sampler = Sampler::start(std::time::Duration::from_millis(20));
                    let out = iogen::run(&w, &ctx.guard.token());
                    let samples = sampler.stop();
                    if let (Some(i), Some(c)) = (&inst, cap) {
                        i.finish_into(c, &mut counts)?;
                    }
                    let out = out?;
                    iogen::discard(&w.path)?;
                    if let Some(e) = out.errno {
                        let err = std::io::Error::from_raw_os_error(e);
                        ctx.notes.push(format!(
                            "{job}: {} refuses pwritev2 with {}: {err}",
                            fs.name(),
                            if flags != 0 {
                                "RWF_DONTCACHE"
                            } else {
                                "no flags"
                            }
                        ));
                        progress(&format!("dontcache: {job}: refused: {err}"));
                        runs.push((vec![out], samples));
                        break;
                    }
                    runs.push((vec![out], samples));
                }
                super::record_job(ctx, &job, &runs, false);
                let n = runs.len().max(1) as f64;
                tracefs::record_means(&mut ctx.metrics, &job, counts, n);
            }
        }
        if let Some(i) = inst {
            i.close(ctx.guard)?;
        }
        super::loopdev::umount(ctx.guard, &mnt)?;
        dev.wait_free(std::time::Duration::from_secs(20))?;
        dev.detach(ctx.guard)?;
    }
    if let Some(root) = trace_root {
        super::loopdev::umount(ctx.guard, &root)?;
    }
    Ok(())
}

/// A tracefs instance counting [`XFS_EVENTS`] of the filesystem on `dev`
/// (filter `dev == MKDEV(major, minor)`); None, with a note, if it cannot
/// be made.
fn xfs_instance(ctx: &mut Ctx, root: &std::path::Path, dev: &LoopDev) -> Option<Instance> {
    let dev_t = dev.kernel_dev_t();
    let filter = |format: &str| {
        let d = dev_t?;
        format.contains("dev_t dev;").then(|| format!("dev == {d}"))
    };
    match Instance::create_events(
        ctx.guard,
        root,
        "xfs",
        XFS_EVENTS,
        &filter,
        TRACE_BUFFER_KIB,
    ) {
        Ok(i) => {
            ctx.settings.insert(
                "trace.events (xfs jobs)".into(),
                i.events
                    .iter()
                    .map(|(e, f)| {
                        format!("xfs:{e}{}", if *f { " (this device)" } else { " (all)" })
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
            );
            Some(i)
        }
        Err(e) => {
            ctx.notes.push(format!("no xfs tracepoint counts: {e:#}"));
            None
        }
    }
}
