//! The XFS data path behind E5, through short scenarios: unwritten extents
//! from fio's default preallocation, their conversion at I/O completion on
//! the per-inode completion work, ioend merging, and the ILOCK contention
//! between a writer and the conversions. Each would fail on a wrong model.

mod common;
use common::{run_text as run, stat};

use wbsim::experiment::results::Results;

/// A one-job scenario on a 4-CPU machine with an NVMe-class device (the
/// default policies: inline RWF_DONTCACHE flushing, as Linux 6.18).
fn one_job(wakeup: &str, job: &str) -> Results {
    job_on(4, "nvme-dc", "", wakeup, job)
}

/// As [`one_job`], with completions free to run on any CPU
/// (`percpu_completion = false`): the conversion work runs at once on an
/// idle CPU instead of behind the writer on its own.
fn one_job_anywhere(wakeup: &str, job: &str) -> Results {
    job_on(4, "nvme-dc", "percpu_completion = false", wakeup, job)
}

/// A one-job scenario on `cpus` CPUs and a device of `profile` with the
/// `[[device]]` overrides in `device_keys` (TOML lines).
fn job_on(cpus: u32, profile: &str, device_keys: &str, wakeup: &str, job: &str) -> Results {
    run(&format!(
        r#"
[scenario]
name = "xfs-path"
duration = "20s"

[machine]
cpus = {cpus}
memory = "16g"
wakeup_latency = "{wakeup}"

[[device]]
name = "nvme0n1"
profile = "{profile}"
{device_keys}

[[filesystem]]
name = "data"
type = "xfs"
device = "nvme0n1"
mountpoint = "/mnt/data"

[[job]]
filesystem = "data"
fio = """
[j]
ioengine=pvsync2
group_reporting
{job}
"""
"#
    ))
}

/// How many times the job's run hit tracepoint `event`.
fn trace_count(r: &Results, event: &str) -> f64 {
    r.stat(&format!("fio.j.trace.{event}"), "value")
        .unwrap_or(0.0)
}

fn conversions(r: &Results) -> f64 {
    trace_count(r, "xfs_unwritten_convert")
}

/// Random 4 KiB RWF_DONTCACHE writes into a preallocated file (fio's
/// default `fallocate=native`) convert one unwritten extent per write: no
/// two completed ioends are contiguous. fio's random map writes each block
/// once, so the count is the number of writes.
#[test]
fn random_dontcache_writes_convert_once_per_write() {
    let job = "rw=randwrite\nfilesize=64m\nsize=16m\nuncached=1";
    let writes = 16.0 * 256.0;
    let c = conversions(&one_job_anywhere("5us", job));
    assert!(
        c >= 0.95 * writes && c <= writes,
        "{c} conversions for {writes} writes"
    );
    // With NVMe's completions on the writer's own CPU the conversion work
    // waits for the writer to give the CPU up; the ioends that completed
    // meanwhile are sorted and the contiguous ones merged: fewer
    // conversions than writes.
    let local = conversions(&one_job("5us", job));
    assert!(local < 0.95 * c, "{local} conversions against {c}");
}

/// Sequential 4 KiB RWF_DONTCACHE writes: each inline flush is one ioend.
/// With completions served at once (fast CPUs, no wakeup latency) each is
/// converted alone; where the completion work falls behind (2 CPUs shared
/// with a device driver's worker that spends 21 us of CPU per request, a
/// 30 us wakeup latency, and no blk-wbt, so the writer keeps its CPU) the
/// ioends that completed meanwhile are merged (`iomap_ioend_try_merge`) and
/// converted together. (The `loop-virtio` profile had those 21 us and no
/// blk-wbt until 2026-11-28; measured, the driver takes 7 us, and with
/// blk-wbt the writer sleeps until its writeback drains, so the completion
/// work keeps up: the live kernel's merging, about 3 writes per conversion,
/// is no longer reproduced, docs/probe/README.md.)
#[test]
fn completion_backlog_merges_sequential_ioends() {
    let job = "rw=write\nsize=16m\nuncached=1";
    let writes = 16.0 * 256.0;
    let at_once = conversions(&one_job_anywhere("0us", job));
    assert!(
        at_once > 0.9 * writes,
        "fast completions: {at_once} conversions"
    );
    // Completions on the writer's own CPU (NVMe): the work waits behind the
    // writer and merges what completed meanwhile.
    let local = conversions(&one_job("0us", job));
    assert!(
        local < 0.9 * writes,
        "completions on the writer's CPU: {local} conversions for {writes} writes"
    );
    let behind = conversions(&job_on(
        2,
        "loop-virtio",
        "driver_cpu = \"21us\"\nwbt_lat = \"0s\"",
        "30us",
        job,
    ));
    assert!(
        behind < 0.5 * writes,
        "completion work behind: {behind} conversions for {writes} writes"
    );
}

/// Writes landing on written blocks (`overwrite=1` lays the file out
/// first) need no conversion; a new file without preallocation
/// (`fallocate=none`) is allocated unwritten at writeback and converted too.
#[test]
fn only_unwritten_blocks_are_converted() {
    let over = one_job(
        "5us",
        "rw=randwrite\nfilesize=16m\nsize=4m\nuncached=1\noverwrite=1",
    );
    assert_eq!(conversions(&over), 0.0);
    let sparse = one_job(
        "5us",
        "rw=randwrite\nfilesize=16m\nsize=4m\nuncached=1\nfallocate=none",
    );
    assert!(conversions(&sparse) > 500.0, "{}", conversions(&sparse));
}

/// Inline random writes wait for the inode's ILOCK held by conversions of
/// their earlier writes: the block lookup of the inline writepages
/// (`xfs_map_blocks`, ILOCK shared) finds the lock held exclusive by the
/// conversion of the previous write, and the write latency exceeds that of
/// the same writes onto written blocks.
#[test]
fn conversions_contend_with_the_writer_on_the_ilock() {
    // Conversions on other CPUs (completions free to run anywhere): they
    // hold the ILOCK while the writer looks up its next block.
    let r = one_job_anywhere("5us", "rw=randwrite\nfilesize=64m\nsize=16m\nuncached=1");
    let contended = stat(&r, "lock.xfs:i_lock.read.contentions", "value");
    let acquired = stat(&r, "lock.xfs:i_lock.read.acquisitions", "value");
    // A large share contends: about half with the 2026-11-25 CPU costs
    // (every write's lookup did with the earlier, slower ones).
    assert!(
        contended > 0.25 * acquired,
        "{contended} of {acquired} shared ILOCK acquisitions contended"
    );
    let over = one_job_anywhere(
        "5us",
        "rw=randwrite\nfilesize=64m\nsize=16m\nuncached=1\noverwrite=1",
    );
    let (p50, p50_over) = (
        stat(&r, "fio.j.clat", "p50"),
        stat(&over, "fio.j.clat", "p50"),
    );
    assert!(
        p50 > 1.3 * p50_over,
        "p50 {p50} us vs {p50_over} us without conversions"
    );
}

/// An ioend is one bio of at most BIO_MAX_VECS (256) folios
/// (`iomap_add_to_ioend`, fs/iomap/ioend.c): 16 MiB of 4 KiB folios written
/// back at the closing fsync make 16 ioends; the same 16 MiB in 1 MiB
/// folios (1 MiB writes) fit in one.
#[test]
fn ioends_hold_at_most_256_folios() {
    let ioends = |r: &Results| {
        r.stat("fio.j.trace.iomap_alloc_ioend", "value")
            .unwrap_or(0.0)
    };
    let small = one_job("5us", "rw=write\nbs=4k\nsize=16m\nend_fsync=1");
    assert_eq!(ioends(&small), 16.0);
    let large = one_job("5us", "rw=write\nbs=1m\nsize=16m\nend_fsync=1");
    assert_eq!(ioends(&large), 1.0);
}

fn delalloc_conversions(r: &Results) -> f64 {
    trace_count(r, "xfs_bmapi_convert_delalloc")
}

/// Speculative preallocation as `xfs_iomap_prealloc_size` sizes it (the
/// rule itself is unit-tested in `model/fs/xfs`): a sequential writer
/// extending a new file gets reservations twice the mapped range before
/// each write, so writeback allocates the file in one large extent; a
/// random writer leaves many small delalloc extents, each its own
/// conversion at writeback.
#[test]
fn sequential_writers_allocate_few_extents_random_writers_many() {
    let seq = delalloc_conversions(&one_job(
        "5us",
        "rw=write\nbs=4k\nsize=16m\nfallocate=none\nend_fsync=1",
    ));
    let rand = delalloc_conversions(&one_job(
        "5us",
        "rw=randwrite\nbs=4k\nsize=16m\nfallocate=none\nend_fsync=1",
    ));
    assert!(seq > 0.0 && seq < 20.0, "sequential: {seq} conversions");
    // 4096 pages, written back at the closing fsync: the random file's
    // delalloc extents are still many small ones.
    assert!(
        rand > 50.0 * seq,
        "random: {rand} conversions, sequential {seq}"
    );
}

/// Timestamps follow the coarse clock, which moves once a jiffy: only the
/// first write of the file in each jiffy changes mtime/ctime and pays
/// `xfs_vn_update_time`'s transaction (HZ=1000 here: one per ms of the
/// writer's run), and that write is the slower one. 4096 writes of 4 KiB
/// take a few ms, so a few updates, not one per write.
#[test]
fn the_first_write_in_each_jiffy_updates_the_timestamps() {
    let r = one_job("5us", "rw=write\nbs=4k\nsize=16m\nfallocate=none");
    let updates = trace_count(&r, "xfs_update_time");
    let bw = stat(&r, "fio.j.write_bw", "value");
    let run_ms = 16.0 / bw * 1000.0;
    assert!(
        updates >= run_ms - 1.0 && updates <= run_ms + 2.0,
        "{updates} timestamp updates in {run_ms:.1} ms"
    );
    // The updating writes sit in the tail: the maximum is at least the
    // transaction (5 us) above the median.
    let (p50, max) = (stat(&r, "fio.j.clat", "p50"), stat(&r, "fio.j.clat", "max"));
    assert!(max >= p50 + 5.0, "max {max} us, p50 {p50} us");
}
