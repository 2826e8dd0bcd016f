//! `wbsim probe parallel-write`: the E4 workload (`scenarios/parallel-writeback.toml`)
//! scaled down to a loop device: random 4 KiB buffered writes through
//! io_uring, one writer per file, eight files in eight directories of an
//! xfs with 4 allocation groups, with the bdi's dirty pages capped so that
//! writeback, not the writers, sets the rate.
//!
//! Not kernel code. The live kernel has one writeback context per bdi, so
//! its figures are the counterpart of the model's `nr_wb_ctx = 1` point:
//! `wbsim compare` of this file against the model's
//! `parallel-writeback__ino_mod_nr_wb_ctx_1___seed1.json` lines up the jobs
//! `w0`..`w7` (`fio.wN.write_bw`, `fio.wN.clat`, ...). One fresh sparse
//! image behind a loop device with direct I/O, `mkfs.xfs` defaults (4 AGs
//! on an image this size: mkfs.xfs gives single-disk filesystems under
//! 4 TiB four AGs when each is at least 16 MiB); the AG count is read back
//! from the superblock (`sb_agcount`, byte 88) and recorded as
//! `parallel_write.agcount`, with a note if it is not 4. New directories
//! rotate over the AGs and files follow their directory, as in the model.
//!
//! Scaled down (the model's 8 x 1 GiB for 30 s on a 4 GiB machine): each
//! writer writes every 4 KiB block of its own new 64 MiB file (`--quick`:
//! 8 MiB) once, in a seeded random order, at iodepth 32, then fsyncs it;
//! the writers start together. The bdi's `max_bytes` is 64 MiB (`--quick`:
//! 8 MiB) with `strict_limit`, so the 512 MiB written are eight times what
//! may be dirty (restored afterwards, also on interruption). Writing each
//! block once (the probe's io_uring writer) instead of fio's time-based
//! random writes with repeats makes every write land in a hole: each
//! writeback allocates, as in the model's first pass over its 1 GiB files.
//! The whole-run rate is `write.bw` (all bytes over the longest writer's
//! time, fsync included in the writers' outcomes as `end_fsync`).

use std::io::{Read, Seek, SeekFrom};
use std::time::Duration;

use anyhow::Context;

use super::iogen::{Outcome, Pattern};
use super::loopdev::{Fs, LoopDev};
use super::meminfo::Sampler;
use super::uring::{run_writer, UringJob};
use super::{progress, Ctx};

/// Writers (files, directories), as in the model's scenario.
const WRITERS: usize = 8;
/// Bytes per file.
const PER_FILE: u64 = 64 << 20;
/// `--quick`.
const PER_FILE_QUICK: u64 = 8 << 20;
/// The bdi's dirty cap during the run, bytes.
const BDI_MAX_BYTES: u64 = 64 << 20;
/// `--quick`.
const BDI_MAX_BYTES_QUICK: u64 = 8 << 20;
/// Write size.
const BS: usize = 4096;
/// io_uring depth per writer, as the scenario's `iodepth`.
const IODEPTH: u32 = 32;
/// Seed of the first writer's random order (writer N uses SEED + N).
const SEED: u64 = 1;
/// AGs the experiment wants (E4's filesystem).
const WANT_AGCOUNT: u32 = 4;
/// Byte offset of `sb_agcount` in the XFS superblock (big-endian u32;
/// `struct xfs_dsb` in fs/xfs/libxfs/xfs_format.h).
const SB_AGCOUNT_OFFSET: u64 = 88;

/// Reads `sb_agcount` from the first sector of an XFS image.
fn read_agcount(image: &std::path::Path) -> anyhow::Result<u32> {
    let mut f = std::fs::File::open(image).with_context(|| format!("open {}", image.display()))?;
    f.seek(SeekFrom::Start(SB_AGCOUNT_OFFSET))?;
    let mut b = [0u8; 4];
    f.read_exact(&mut b)
        .with_context(|| format!("read sb_agcount of {}", image.display()))?;
    Ok(u32::from_be_bytes(b))
}

/// Runs the experiment.
pub fn run(ctx: &mut Ctx) -> anyhow::Result<()> {
    let quick = ctx.opts.quick;
    let repeat = if quick { 1 } else { ctx.opts.repeat };
    let per_file = if quick { PER_FILE_QUICK } else { PER_FILE };
    let bdi_max = if quick {
        BDI_MAX_BYTES_QUICK
    } else {
        BDI_MAX_BYTES
    };
    // Room for the files, the log and free space in every AG.
    let image = (per_file * WRITERS as u64 * 2).max(1 << 30);
    for (k, v) in [
        (
            "parallel_write.files",
            format!("{WRITERS} x {per_file} bytes, one per directory d0..d7"),
        ),
        (
            "parallel_write.io",
            format!("randwrite bs={BS} iodepth={IODEPTH} seed={SEED}+N, every block once"),
        ),
        ("parallel_write.repeat", repeat.to_string()),
        ("parallel_write.image_bytes", image.to_string()),
    ] {
        ctx.settings.insert(k.into(), v);
    }
    progress("parallel-write: image, loop device, mkfs.xfs");
    let dev = LoopDev::attach(ctx, "img-pw-xfs", image)?;
    dev.mkfs(ctx.guard, Fs::Xfs)?;
    let agcount = read_agcount(&dev.image)?;
    ctx.settings
        .insert("parallel_write.agcount".into(), agcount.to_string());
    if agcount != WANT_AGCOUNT {
        ctx.notes.push(format!(
            "mkfs.xfs made {agcount} AGs, not {WANT_AGCOUNT}: the directories rotate over those"
        ));
    }
    let mnt = dev.mount(ctx.guard, Fs::Xfs)?;
    match dev.cap_dirty(ctx.guard, bdi_max)? {
        Some(before) => {
            ctx.settings.insert(
                format!("bdi {} during run", dev.bdi_name()),
                format!("strict_limit=1 max_bytes={bdi_max}"),
            );
            ctx.settings
                .insert(format!("bdi {} before (restored)", dev.bdi_name()), before);
        }
        None => ctx.notes.push(
            "the bdi has no strict_limit/max_bytes knobs: ran without a per-bdi dirty cap".into(),
        ),
    }
    ctx.scenario_tables.push_str(&format!(
        "[[device]]\nname = \"loop-xfs\"\nprofile = \"loop-virtio\"\n\n\
         [device.bdi]\nstrict_limit = true\nmax_bytes = {bdi_max}\n\n\
         [[filesystem]]\nname = \"xfs\"\ntype = \"xfs\"\ndevice = \"loop-xfs\"\n\n"
    ));
    ctx.notes.push(
        "the live kernel has one writeback context per bdi: compare with the model's \
         nr_wb_ctx = 1 point"
            .into(),
    );

    let mut per_writer: Vec<Vec<(Vec<Outcome>, Vec<super::meminfo::Sample>)>> =
        (0..WRITERS).map(|_| Vec::new()).collect();
    let (mut all_bytes, mut all_ns) = (0u64, 0u64);
    for r in 0..repeat {
        ctx.guard.check()?;
        progress(&format!("parallel-write: round {r}"));
        let jobs: Vec<UringJob> = (0..WRITERS)
            .map(|i| {
                let dir = mnt.join(format!("d{i}"));
                std::fs::create_dir_all(&dir)
                    .with_context(|| format!("mkdir {}", dir.display()))?;
                Ok(UringJob {
                    path: dir.join(format!("w{i}-{r}")),
                    size: per_file,
                    bs: BS,
                    pattern: Pattern::Rand(SEED + i as u64),
                    flags: 0,
                    iodepth: IODEPTH,
                })
            })
            .collect::<anyhow::Result<_>>()?;
        let sampler = Sampler::start(Duration::from_millis(50));
        let stop = ctx.guard.token();
        let barrier = std::sync::Barrier::new(jobs.len());
        let outcomes: Vec<anyhow::Result<Outcome>> = std::thread::scope(|s| {
            let handles: Vec<_> = jobs
                .iter()
                .map(|j| {
                    let (b, st) = (&barrier, &stop);
                    s.spawn(move || {
                        b.wait();
                        run_writer(j, st)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow::anyhow!("writer thread panicked")))
                })
                .collect()
        });
        let samples = sampler.stop();
        let outcomes = outcomes.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
        let start = outcomes.iter().filter_map(|o| o.start).min();
        let end = outcomes.iter().filter_map(|o| o.end).max();
        if let (Some(s), Some(e)) = (start, end) {
            all_ns += e.duration_since(s).as_nanos() as u64;
        }
        all_bytes += outcomes.iter().map(|o| o.bytes).sum::<u64>();
        for j in &jobs {
            super::iogen::discard(&j.path)?;
        }
        for (i, o) in outcomes.into_iter().enumerate() {
            if let Some(e) = o.errno {
                let err = std::io::Error::from_raw_os_error(e);
                ctx.notes.push(format!("w{i}: a write failed: {err}"));
            }
            per_writer[i].push((vec![o], samples.clone()));
        }
    }
    for (i, runs) in per_writer.iter().enumerate() {
        super::record_job(ctx, &format!("w{i}"), runs, false);
    }
    if all_ns > 0 {
        ctx.metrics.set(
            "write.bw",
            "MiB/s",
            all_bytes as f64 / (1 << 20) as f64 / (all_ns as f64 / 1e9),
        );
    }

    let errs = ctx.guard.restore_all();
    if !errs.is_empty() {
        anyhow::bail!("restoring bdi settings: {}", errs.join("; "));
    }
    super::loopdev::umount(ctx.guard, &mnt).context("umount xfs")?;
    dev.wait_free(Duration::from_secs(30))?;
    dev.detach(ctx.guard)?;
    Ok(())
}
