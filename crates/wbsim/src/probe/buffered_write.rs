//! `wbsim probe buffered-write`: 1, 2, 4 and 8 sequential buffered writers
//! on xfs, with dirty pages over time and writeback tracepoint counts (the
//! live counterpart of the writeback core's buffered-write scenario).
//!
//! Not kernel code. One xfs on a fresh sparse image behind a loop device
//! with direct I/O. Jobs `seq-w1`, `seq-w2`, `seq-w4`, `seq-w8`: N threads
//! start together, each writes its own new file of 512 MiB (`--quick`:
//! 32 MiB) in 1 MiB `pwritev2` calls, then fsyncs it (fio `numjobs=N
//! rw=write bs=1m end_fsync=1`). So that writeback and throttling happen at
//! these sizes on a machine with many GiB of RAM, the loop device's bdi is
//! given `strict_limit = 1` and `max_bytes = 256 MiB` (`--quick`: 32 MiB)
//! for the run (the values before are saved and written back, also on
//! interruption); `model.devices[].bdi` records the same. `/proc/meminfo`
//! is sampled every 50 ms (`fio.<job>.dirty_pages`); the writeback
//! tracepoints of [`super::tracefs::EVENTS`] are counted through a private
//! tracefs instance, filtered to the loop device's bdi where the event
//! carries one (`global_dirty_state` does not: it counts machine-wide).
//! Beside the counts, each job records the throttling state the
//! `balance_dirty_pages` and `bdi_dirty_ratelimit` events carry
//! (`fio.<job>.trace.balance_dirty_pages.{paused,pause_ms,
//! dirty_ratelimit_first,dirty_ratelimit_last}` and
//! `fio.<job>.trace.bdi_dirty_ratelimit.{dirty_ratelimit,awrite_bw}_{first,last}`,
//! means over the rounds): the bdi lives as long as the loop device, so
//! its rate at a job's start is what earlier use left.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;

use super::iogen;
use super::loopdev::{Fs, LoopDev};
use super::meminfo::Sampler;
use super::tracefs::{self, Instance};
use super::{progress, Ctx};

/// Bytes per writer.
const PER_WRITER: u64 = 512 << 20;
/// `--quick`.
const PER_WRITER_QUICK: u64 = 32 << 20;
/// Write size.
const BS: usize = 1 << 20;
/// The bdi's dirty cap during the run.
const BDI_MAX_BYTES: u64 = 256 << 20;
/// `--quick`.
const BDI_MAX_BYTES_QUICK: u64 = 32 << 20;
/// Writer counts.
const WRITERS: [usize; 4] = [1, 2, 4, 8];
/// Per-CPU ring buffer of the tracefs instance, KiB.
const TRACE_BUFFER_KIB: u64 = 8192;

/// Runs the experiment.
pub fn run(ctx: &mut Ctx) -> anyhow::Result<()> {
    let quick = ctx.opts.quick;
    let repeat = if quick { 1 } else { ctx.opts.repeat };
    let per_writer = if quick { PER_WRITER_QUICK } else { PER_WRITER };
    let bdi_max = if quick {
        BDI_MAX_BYTES_QUICK
    } else {
        BDI_MAX_BYTES
    };
    let image = per_writer * 8 + (1 << 30);
    for (k, v) in [
        ("buffered_write.per_writer_bytes", per_writer.to_string()),
        ("buffered_write.bs", BS.to_string()),
        ("buffered_write.repeat", repeat.to_string()),
        ("buffered_write.image_bytes", image.to_string()),
    ] {
        ctx.settings.insert(k.into(), v);
    }
    progress("buffered-write: image, loop device, mkfs.xfs");
    let dev = LoopDev::attach(ctx, "img-xfs", image)?;
    dev.mkfs(ctx.guard, Fs::Xfs)?;
    let mnt = dev.mount(ctx.guard, Fs::Xfs)?;

    // Per-bdi dirty cap (saved first, restored by the guard in any case).
    match dev.cap_dirty(ctx.guard, bdi_max)? {
        Some(before) => {
            ctx.settings.insert(
                format!("bdi {} during run", dev.bdi_name()),
                format!("strict_limit=1 max_bytes={bdi_max}"),
            );
            ctx.settings
                .insert(format!("bdi {} before (restored)", dev.bdi_name()), before);
            ctx.scenario_tables.push_str(&format!(
                "[[device]]\nname = \"loop-xfs\"\nprofile = \"loop-virtio\"\n\n\
                 [device.bdi]\nstrict_limit = true\nmax_bytes = {bdi_max}\n\n"
            ));
        }
        None => {
            ctx.notes.push(
                "the bdi has no strict_limit/max_bytes knobs: ran without a per-bdi dirty cap"
                    .into(),
            );
            ctx.scenario_tables
                .push_str("[[device]]\nname = \"loop-xfs\"\nprofile = \"loop-virtio\"\n\n");
        }
    }
    ctx.scenario_tables
        .push_str("[[filesystem]]\nname = \"xfs\"\ntype = \"xfs\"\ndevice = \"loop-xfs\"\n\n");
    ctx.notes.push(
        "model.devices use the model's loop-virtio profile as the closest description; \
         the live device parameters were not measured"
            .into(),
    );

    let root = tracefs::mount(ctx.guard)?;
    let inst = Instance::create(ctx.guard, &root, &dev.bdi_name(), TRACE_BUFFER_KIB)?;
    ctx.settings.insert(
        "trace.events".into(),
        inst.events
            .iter()
            .map(|(e, f)| format!("{e}{}", if *f { " (this bdi)" } else { " (all)" }))
            .collect::<Vec<_>>()
            .join(", "),
    );

    for n in WRITERS {
        let job = format!("seq-w{n}");
        progress(&format!("buffered-write: job {job}"));
        let mut runs = Vec::new();
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        for r in 0..repeat {
            ctx.guard.check()?;
            let jobs = iogen::seq_writers(&mnt, &format!("{job}-{r}"), n, per_writer, BS);
            let cap = inst.start()?;
            let sampler = Sampler::start(Duration::from_millis(50));
            let results = iogen::run_together(&jobs, &ctx.guard.token());
            let samples = sampler.stop();
            inst.finish_into(cap, &mut counts)?;
            let outcomes = results.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
            for j in &jobs {
                iogen::discard(&j.path)?;
            }
            runs.push((outcomes, samples));
        }
        super::record_job(ctx, &job, &runs, true);
        tracefs::record_means(&mut ctx.metrics, &job, counts, f64::from(repeat));
    }

    inst.close(ctx.guard)?;
    super::loopdev::umount(ctx.guard, &root)?;
    let errs = ctx.guard.restore_all();
    if !errs.is_empty() {
        anyhow::bail!("restoring bdi settings: {}", errs.join("; "));
    }
    super::loopdev::umount(ctx.guard, &mnt).context("umount xfs")?;
    dev.wait_free(Duration::from_secs(30))?;
    dev.detach(ctx.guard)?;
    Ok(())
}
