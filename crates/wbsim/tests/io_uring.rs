//! fio's io_uring engine on the model: the nonblocking inline attempt, the
//! punt to io-wq, and fio's slat/clat/lat (see model/io_uring and
//! workload/fio_exec.rs).

mod common;
use common::{run_text as run, stat};

use wbsim::experiment::results::Results;

fn uring_job(memory: &str, profile: &str, job: &str) -> Results {
    uring_job_on("xfs", memory, profile, job)
}

fn uring_job_on(fs: &str, memory: &str, profile: &str, job: &str) -> Results {
    uring_job_hz(fs, 1000, memory, profile, job)
}

/// A job on a machine with `CONFIG_HZ=hz`. An xfs write that must change
/// the file's timestamps (the first in each jiffy) cannot be done inline
/// (IOCB_NOWAIT gets EAGAIN from `kiocb_modified`); at HZ=100 a job of a
/// few MiB writes within the jiffy its file was created in and never needs
/// to, which isolates the inline path.
fn uring_job_hz(fs: &str, hz: u32, memory: &str, profile: &str, job: &str) -> Results {
    run(&format!(
        r#"
[scenario]
name = "uring"
duration = "30s"

[machine]
cpus = 4
memory = "{memory}"
hz = {hz}

[[device]]
name = "nvme0n1"
profile = "{profile}"

[[filesystem]]
name = "data"
type = "{fs}"
device = "nvme0n1"
mountpoint = "/mnt/data"

[[job]]
filesystem = "data"
fio = """
[j]
ioengine=io_uring
iodepth=16
group_reporting
bs=4k
{job}
"""
"#
    ))
}

fn counter(r: &Results, m: &str) -> f64 {
    r.stat(m, "value").unwrap_or(0.0)
}

#[test]
fn nowait_succeeds_inline_when_nothing_blocks() {
    // 2 MiB into 16 GiB of memory: far below the dirty thresholds, one
    // writer, so neither i_rwsem nor balance_dirty_pages would block, and
    // all in one jiffy, so no timestamp update either.
    let r = uring_job_hz("xfs", 100, "16g", "nvme-dc", "rw=write\nsize=2m");
    assert_eq!(counter(&r, "fio.j.trace.xfs_update_time"), 0.0);
    let ios = stat(&r, "fio.j.clat", "count");
    assert_eq!(counter(&r, "fio.j.uring_punted"), 0.0);
    assert_eq!(counter(&r, "fio.j.uring_inline"), ios);
    assert_eq!(counter(&r, "fio.j.iowq_workers"), 0.0);
    // The write is done inside the submit call: slat holds it; clat is the
    // wait in the CQ ring until fio reaps a full ring, so p50 clat covers
    // several later submissions.
    let slat = stat(&r, "fio.j.slat", "p50");
    let clat = stat(&r, "fio.j.clat", "p50");
    assert!(slat > 0.0 && clat > slat, "slat {slat} clat {clat}");
    // lat = slat + clat.
    let lat = stat(&r, "fio.j.lat", "mean");
    let sum = stat(&r, "fio.j.slat", "mean") + stat(&r, "fio.j.clat", "mean");
    assert!((lat - sum).abs() <= 0.01 * sum, "lat {lat} slat+clat {sum}");
}

#[test]
fn punted_writes_to_one_file_queue_serially_on_io_wq() {
    // Two clones write one file: when one holds i_rwsem the other's
    // nonblocking attempt gets -EAGAIN and is punted; from then on the
    // clone's own io-wq worker holds the lock while it works through the
    // queue, so its later attempts are punted too and up to iodepth writes
    // of one file (one hash) wait behind each other.
    let r = uring_job(
        "16g",
        "nvme-dc",
        "rw=write\nsize=64m\nfilename=shared\nnumjobs=2",
    );
    let punted = counter(&r, "fio.j.uring_punted");
    let ios = stat(&r, "fio.j.clat", "count");
    assert!(punted > 0.5 * ios, "punted {punted} of {ios}");
    // Hashed work does not start new workers while one is running: one
    // worker per ring.
    assert_eq!(counter(&r, "fio.j.iowq_workers"), 2.0);
    // A write's clat covers the queue ahead of it: many times the time of
    // one write (per clone, 1 / (iops / 2)).
    let iops = r.stat("fio.j.write_iops", "value").unwrap();
    let one_write_us = 2e6 / iops;
    let clat50 = stat(&r, "fio.j.clat", "p50");
    assert!(
        clat50 > 8.0 * one_write_us,
        "clat p50 {clat50} us, one write {one_write_us} us"
    );
    let p999 = stat(&r, "fio.j.clat", "p99.9");
    let max = stat(&r, "fio.j.clat", "max");
    assert!(clat50 <= p999 && p999 <= max);
}

#[test]
fn ext4_buffered_writes_are_always_punted() {
    // ext4 lacks FOP_BUFFER_WASYNC: io_write punts every buffered write to
    // io-wq without trying it inline, even when nothing would block (the
    // same job on xfs completes every write inline, test above).
    let r = uring_job_on("ext4", "16g", "nvme-dc", "rw=write\nsize=32m");
    let ios = stat(&r, "fio.j.clat", "count");
    assert_eq!(counter(&r, "fio.j.uring_inline"), 0.0);
    assert_eq!(counter(&r, "fio.j.uring_punted"), ios);
    assert!(counter(&r, "fio.j.iowq_workers") >= 1.0);
    // O_DIRECT does not depend on it: no punt.
    let d = uring_job_on("ext4", "16g", "nvme-dc", "rw=write\nsize=32m\ndirect=1");
    assert_eq!(counter(&d, "fio.j.uring_punted"), 0.0);
}

#[test]
fn a_punted_write_at_iodepth_1_pays_two_idle_wakeups() {
    // ext4 punts every buffered write; at iodepth 1 the io-wq worker is
    // woken for each (its CPU idle) and then wakes the submitter sleeping
    // for the CQE: two idle-CPU wakeups per write.
    let job = |wakeup: &str| {
        run(&format!(
            r#"
[scenario]
name = "uring-wakeup"
duration = "30s"

[machine]
cpus = 2
memory = "16g"
wakeup_latency = "{wakeup}"

[[device]]
name = "nvme0n1"
profile = "nvme-dc"

[[filesystem]]
name = "data"
type = "ext4"
device = "nvme0n1"
mountpoint = "/mnt/data"

[[job]]
filesystem = "data"
fio = """
[j]
ioengine=io_uring
iodepth=1
bs=4k
rw=write
size=4m
"""
"#
        ))
    };
    let quick = stat(&job("0us"), "fio.j.lat", "mean");
    let slow = stat(&job("25us"), "fio.j.lat", "mean");
    assert!(slow - quick >= 45.0, "lat {quick} us -> {slow} us");
    assert!(slow - quick <= 55.0, "lat {quick} us -> {slow} us");
}

#[test]
fn batched_submission_makes_every_write_wait_for_the_whole_batch() {
    // Buffered writes done inline: with one io_uring_enter per write (fio's
    // default iodepth_batch_submit=1) the k-th write of a ring's worth is
    // reaped after 16 - k more, about 8.5 writes' time on average; with the
    // whole ring submitted at once (0: iodepth) all 16 start together and
    // are reaped after the 16th, so `lat` doubles and the rate stays.
    // All within one jiffy (HZ=100), so every write can be done inline.
    let job = |extra: &str| {
        let r = uring_job_hz(
            "xfs",
            100,
            "16g",
            "nvme-dc",
            &format!("rw=randwrite\nsize=2m\n{extra}"),
        );
        assert_eq!(counter(&r, "fio.j.uring_punted"), 0.0);
        r
    };
    let one = job("");
    let all = job("iodepth_batch_submit=0");
    let alias = job("iodepth_batch=16");
    let (l1, l16) = (
        stat(&one, "fio.j.lat", "mean"),
        stat(&all, "fio.j.lat", "mean"),
    );
    assert!(l16 > 1.6 * l1 && l16 < 2.2 * l1, "lat {l1} -> {l16} us");
    assert_eq!(stat(&alias, "fio.j.lat", "mean"), l16);
    let (b1, b16) = (
        stat(&one, "fio.j.write_bw", "value"),
        stat(&all, "fio.j.write_bw", "value"),
    );
    assert!((b16 / b1 - 1.0).abs() < 0.05, "rate {b1} -> {b16}");
}

#[test]
fn an_inline_write_over_the_dirty_limit_is_punted_before_it_dirties_anything() {
    // Four random 4 KiB io_uring writers of 1 GiB files on a 2 GiB machine
    // outrun XFS's allocating writeback and reach the dirty limit. An
    // inline (IOCB_NOWAIT) attempt asks balance_dirty_pages before it
    // copies (BDP_ASYNC), gets -EAGAIN and is punted; the io-wq worker
    // dirties the page and is throttled like any blocking writer, so dirty
    // pages stay at the limit. (Before: the inline attempt dirtied the page
    // first and got -EAGAIN after, and the punted retry found the page
    // dirty already and was never throttled: dirty pages reached 2.3x the
    // limit and two writers ran at memory speed.)
    let r = run(r#"
[scenario]
name = "uring-dirty"
duration = "3s"

[machine]
cpus = 4
memory = "2g"

[[device]]
name = "nvme0n1"
profile = "qemu-nvme"

[[filesystem]]
name = "data"
type = "xfs"
device = "nvme0n1"
mountpoint = "/mnt/data"

[[job]]
filesystem = "data"
fio = """
[global]
ioengine=io_uring
rw=randwrite
bs=4k
iodepth=32
size=1g
fallocate=none
time_based
runtime=3
group_reporting

[w0]
directory=/mnt/data/d0

[w1]
directory=/mnt/data/d1

[w2]
directory=/mnt/data/d2

[w3]
directory=/mnt/data/d3
"""
"#);
    let dirty = stat(&r, "dirty_pages", "max");
    let limit = stat(&r, "dirty_limit_pages", "max");
    assert!(dirty <= 1.05 * limit, "dirty {dirty} pages, limit {limit}");
    assert!(counter(&r, "fio.w0.uring_punted") > 0.0);
}

/// The first xfs write in each jiffy must change mtime/ctime, a
/// transaction that may block, so its nonblocking attempt gets EAGAIN and
/// it is punted to io-wq (where it makes the update). At iodepth 1 nothing
/// else is in flight: exactly those writes are punted.
#[test]
fn a_write_that_changes_the_timestamps_is_punted() {
    let r = uring_job("16g", "nvme-dc", "rw=write\nsize=32m\niodepth=1");
    let updates = counter(&r, "fio.j.trace.xfs_update_time");
    assert!(updates >= 5.0, "{updates} timestamp updates");
    assert_eq!(counter(&r, "fio.j.uring_punted"), updates);
}
