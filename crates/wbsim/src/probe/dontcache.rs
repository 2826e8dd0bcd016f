//! `wbsim probe dontcache`: buffered vs `RWF_DONTCACHE` writes on the live
//! kernel (experiments.md E5, single stream, on this machine).
//!
//! Not kernel code. For xfs, ext4 and btrfs, each on a fresh sparse image
//! behind a loop device with direct I/O: four jobs, one writer each,
//! `<fs>-seq-buffered`, `<fs>-seq-dontcache` (1 MiB writes, 1 GiB file),
//! `<fs>-rand-buffered`, `<fs>-rand-dontcache` (4 KiB writes in a seeded
//! random order over a 256 MiB file, every block once); `--quick` uses
//! 64 MiB and 16 MiB. Each job writes a new file with `pwritev2(2)` (flags 0
//! or `RWF_DONTCACHE`), then fsyncs it (timed apart, `fio.<job>.end_fsync`),
//! drops its cache and removes it. `/proc/meminfo` is sampled every 20 ms.
//! A filesystem that refuses the flag (btrfs: `EOPNOTSUPP`) is recorded as
//! `fio.<job>.errno` and a note. Bandwidth is of the write calls only.

use super::iogen::{self, Pattern, WriteJob};
use super::loopdev::{Fs, LoopDev};
use super::meminfo::Sampler;
use super::{progress, sys, Ctx};

/// Sequential job: file size and write size.
const SEQ: (u64, usize) = (1 << 30, 1 << 20);
/// Random job: file size and write size.
const RAND: (u64, usize) = (256 << 20, 4096);
/// `--quick` sizes.
const SEQ_QUICK: u64 = 64 << 20;
/// `--quick` sizes.
const RAND_QUICK: u64 = 16 << 20;
/// Seed of the random order.
const RAND_SEED: u64 = 1;

/// Runs the experiment.
pub fn run(ctx: &mut Ctx) -> anyhow::Result<()> {
    let quick = ctx.opts.quick;
    let repeat = if quick { 1 } else { ctx.opts.repeat };
    let seq_size = if quick { SEQ_QUICK } else { SEQ.0 };
    let rand_size = if quick { RAND_QUICK } else { RAND.0 };
    let image = (seq_size * 2).max(512 << 20);
    for (k, v) in [
        ("dontcache.seq", format!("size={seq_size} bs={}", SEQ.1)),
        (
            "dontcache.rand",
            format!("size={rand_size} bs={} seed={RAND_SEED}", RAND.1),
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
    for fs in [Fs::Xfs, Fs::Ext4, Fs::Btrfs] {
        ctx.guard.check()?;
        progress(&format!(
            "dontcache: {}: image, loop device, mkfs",
            fs.name()
        ));
        let dev = LoopDev::create(ctx.guard, &format!("img-{}", fs.name()), image)?;
        dev.mkfs(ctx.guard, fs)?;
        let mnt = dev.mount(ctx.guard, fs)?;
        for (pat, size, bs) in [("seq", seq_size, SEQ.1), ("rand", rand_size, RAND.1)] {
            for (mode, flags) in [("buffered", 0), ("dontcache", sys::RWF_DONTCACHE)] {
                let job = format!("{}-{pat}-{mode}", fs.name());
                progress(&format!("dontcache: job {job}"));
                let mut runs = Vec::new();
                for r in 0..repeat {
                    ctx.guard.check()?;
                    let w = WriteJob {
                        path: mnt.join(format!("{job}-{r}")),
                        size,
                        bs,
                        pattern: if pat == "seq" {
                            Pattern::Seq
                        } else {
                            Pattern::Rand(RAND_SEED)
                        },
                        flags,
                        end_fsync: true,
                    };
                    let sampler = Sampler::start(std::time::Duration::from_millis(20));
                    let out = iogen::run(&w, &ctx.guard.token());
                    let samples = sampler.stop();
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
            }
        }
        super::loopdev::umount(ctx.guard, &mnt)?;
        dev.wait_free(std::time::Duration::from_secs(20))?;
        dev.detach(ctx.guard)?;
    }
    Ok(())
}
