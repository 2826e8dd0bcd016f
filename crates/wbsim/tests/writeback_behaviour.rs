//! Experiment tests: short scenarios that check known Linux writeback
//! behaviour through the results document (sampled series, fio output,
//! balance_dirty_pages pauses). Each would fail on a wrong throttling or
//! flusher model.

mod common;
use common::run_text as run;

use wbsim::experiment::results::{Results, SeriesPoint};

const MIB: f64 = 1_048_576.0;
const PAGE: f64 = 4096.0;
const SEC: u64 = 1_000_000_000;

fn series<'a>(r: &'a Results, name: &str) -> &'a [SeriesPoint] {
    r.series
        .get(name)
        .unwrap_or_else(|| panic!("missing series {name}"))
}

/// Value of a sampled series at the sample taken at time `t` (exact match).
fn at(s: &[SeriesPoint], t: u64) -> Option<f64> {
    s.iter().find(|p| p.0 == t).map(|p| p.1)
}

/// Background writeback starts when dirty memory crosses the background
/// threshold, not before: a writer dirtying at 16 MiB/s (well below the
/// device) leaves the device idle until dirty reaches `dirty_background_bytes`
/// (64 MiB, ~4 s), and the flusher starts writing promptly after that. The
/// data is younger than `dirty_expire` (30 s), so periodic writeback must not
/// write it earlier.
#[test]
fn background_writeback_starts_at_the_background_threshold() {
    let r = run(r#"
[scenario]
name = "bg"
duration = "7s"

[machine]
cpus = 2
memory = "2g"

[sysctl]
dirty_bytes = "256m"
dirty_background_bytes = "64m"
dirty_expire_centisecs = 3000
dirty_writeback_centisecs = 500

[[device]]
name = "d0"
profile = "loop-virtio"
write_bw = "400m/s"

[[filesystem]]
name = "data"
type = "ext4"
device = "d0"

[[job]]
filesystem = "data"
fio = """
[w]
rw=write
bs=256k
size=1g
rate=16m
runtime=7s
time_based
"""

[measure]
sample_interval = "50ms"
"#);
    let dirty = series(&r, "dirty_pages");
    let wb = series(&r, "writeback_pages");
    let bg = series(&r, "bg_limit_pages");
    let dev = series(&r, "device.d0.write_bytes_per_s");
    let bg_pages = bg.last().expect("bg samples").1;
    assert!(
        (bg_pages * PAGE / MIB - 64.0).abs() < 1.0,
        "bg limit {bg_pages} pages, expected 64 MiB"
    );
    // dirty + writeback, as balance_dirty_pages compares against the limits.
    let first_cross = dirty
        .iter()
        .find(|p| p.1 + at(wb, p.0).unwrap_or(0.0) >= 0.98 * bg_pages)
        .map(|p| p.0)
        .expect("dirty never reached the background threshold");
    let first_write = dev
        .iter()
        .find(|p| p.1 > 0.0)
        .map(|p| p.0)
        .expect("the device never wrote");
    eprintln!(
        "bg {:.1} MiB, dirty crossed at {:.3} s, first device write in sample at {:.3} s",
        bg_pages * PAGE / MIB,
        first_cross as f64 / 1e9,
        first_write as f64 / 1e9
    );
    // Writing at 16 MiB/s, 64 MiB take ~4 s: the crossing itself is sane.
    assert!(
        first_cross > 3 * SEC && first_cross < 5 * SEC,
        "crossing at {first_cross} ns"
    );
    // No writeback while dirty is below the threshold (one sample of slack:
    // a device-rate sample covers the interval that ends at its time).
    let interval = 50_000_000;
    assert!(
        first_write + interval >= first_cross,
        "device wrote at {first_write} ns, before dirty crossed the background threshold at {first_cross} ns"
    );
    for p in dirty.iter().filter(|p| p.0 + interval < first_cross) {
        assert_eq!(
            at(wb, p.0).unwrap_or(0.0),
            0.0,
            "pages under writeback at {} ns, below the background threshold",
            p.0
        );
    }
    // ...and it starts promptly once crossed.
    assert!(
        first_write <= first_cross + SEC / 2,
        "background writeback started {} ms after the crossing",
        (first_write - first_cross) / 1_000_000
    );
    // Once started, background writeback keeps dirty near the threshold,
    // well under the dirty limit (the device is 25x faster than the writer).
    let end_dirty = dirty.last().expect("samples").1;
    assert!(
        end_dirty < 1.5 * bg_pages,
        "dirty at the end {end_dirty} pages vs bg {bg_pages}"
    );
}

/// Periodic (kupdate) writeback writes data older than `dirty_expire`: 16 MiB
/// written at t=0 (below the background threshold) stay dirty until they are
/// 3 s old, and the flusher, waking every 1 s, writes them at the first wakeup
/// after that (between 3 s and ~4 s).
#[test]
fn periodic_writeback_writes_data_older_than_dirty_expire() {
    let r = run(r#"
[scenario]
name = "kupdate"
duration = "6s"

[machine]
cpus = 2
memory = "2g"

[sysctl]
dirty_expire_centisecs = 300
dirty_writeback_centisecs = 100

[[device]]
name = "d0"
profile = "loop-virtio"
write_bw = "400m/s"

[[filesystem]]
name = "data"
type = "ext4"
device = "d0"

[[job]]
filesystem = "data"
fio = """
[w]
rw=write
bs=1m
size=16m
"""

# Keeps the run going after the job has finished.
[[actor]]
name = "idle"
repeat = 1
steps = [ { op = "sleep", for = "6s" } ]

[measure]
sample_interval = "50ms"
"#);
    let dirty = series(&r, "dirty_pages");
    let bg = series(&r, "bg_limit_pages").last().expect("bg").1;
    let peak = dirty.iter().map(|p| p.1).fold(0.0, f64::max);
    assert!(
        (peak * PAGE / MIB - 16.0).abs() < 1.0,
        "peak dirty {peak} pages"
    );
    assert!(
        peak < 0.5 * bg,
        "the write must stay below the bg threshold"
    );
    let t_dirty = dirty
        .iter()
        .find(|p| p.1 >= peak)
        .map(|p| p.0)
        .expect("dirtied");
    let t_clean = dirty
        .iter()
        .find(|p| p.0 > t_dirty && p.1 < 0.01 * peak)
        .map(|p| p.0)
        .expect("the dirty data was never written back");
    eprintln!(
        "peak dirty {:.1} MiB at {:.3} s, clean at {:.3} s",
        peak * PAGE / MIB,
        t_dirty as f64 / 1e9,
        t_clean as f64 / 1e9
    );
    // Everything stays dirty until it has expired...
    for p in dirty.iter().filter(|p| p.0 >= t_dirty && p.0 < 3 * SEC) {
        assert!(
            p.1 >= 0.99 * peak,
            "dirty fell to {} pages at {} ns, before dirty_expire",
            p.1,
            p.0
        );
    }
    // ...and is written at the first flusher wakeup after it expired.
    assert!(
        (3 * SEC..=4 * SEC + 500_000_000).contains(&t_clean),
        "written back at {t_clean} ns, expected between 3 s and 4.5 s"
    );
}

/// 100 dd-like writers on a device far slower than they are: IO-less
/// balance_dirty_pages throttles each with pauses of at most 200 ms
/// (MAX_PAUSE) and, once the rate control has settled, shares the device
/// fairly, every writer within 20% of the mean bandwidth. The 12 s
/// `ramp_time` leaves out the start-up: `dirty_ratelimit` starts at the
/// initial write bandwidth and moves towards write_bw / 100 one bounded step
/// per 200 ms update (`wb_update_dirty_ratelimit`); until it gets there dirty
/// pages overshoot the limit and writers wait in max-pause rounds, which is a
/// lottery (measured with a 2 s ramp: -59%..+53%; with this one and 20 s of
/// measurement, about 40 writes of 256 KiB per writer per 10 s, within 20%
/// until blk-wbt made writeback burstier: seed 1 then gave -37%..+36% after
/// 20 s, and within 20% for seeds 1-3 after 40 s, which the test measures).
/// The device has loop-virtio's service-time spread (20%): ext4's large
/// folios make each 256 KiB write one 64-page folio and one
/// `balance_dirty_pages_ratelimited` call, and the shares stay within 20%
/// (measured -6%..+6%). With single-page folios (4 KiB writes) the same
/// spread leaves shares from 0.6x to 2.1x of the mean (see the module doc of
/// `model/mm/page_writeback/pause.rs`).
#[test]
fn hundred_writers_are_throttled_fairly_with_bounded_pauses() {
    let r = run(r#"
[scenario]
name = "dd100"
duration = "55s"

[machine]
cpus = 8
memory = "2g"

[sysctl]
dirty_bytes = "128m"
dirty_background_bytes = "64m"

[[device]]
name = "d0"
profile = "loop-virtio"
write_bw = "100m/s"

[[filesystem]]
name = "data"
type = "ext4"
device = "d0"

[[job]]
filesystem = "data"
fio = """
[dd]
rw=write
ioengine=psync
bs=256k
size=1g
numjobs=100
ramp_time=12s
runtime=40s
time_based
"""
"#);
    let max_pause = r.stat("bdp.pause", "max").expect("bdp.pause");
    let min_pause = r.stat("bdp.pause", "min").expect("bdp.pause");
    let pauses = r.stat("bdp.pause", "count").expect("bdp.pause");
    let bws: Vec<f64> = (0..100)
        .map(|n| {
            r.stat(&format!("fio.dd.{n}.write_bw"), "value")
                .unwrap_or_else(|| panic!("missing fio.dd.{n}.write_bw"))
        })
        .collect();
    let mean = bws.iter().sum::<f64>() / bws.len() as f64;
    let lo = bws.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = bws.iter().copied().fold(0.0, f64::max);
    eprintln!(
        "pauses {pauses}, min {min_pause} ms, max {max_pause} ms; per-writer bw mean {mean:.3} MiB/s, min {lo:.3}, max {hi:.3} ({:+.1}% .. {:+.1}%)",
        100.0 * (lo / mean - 1.0),
        100.0 * (hi / mean - 1.0)
    );
    assert!(pauses > 100.0, "writers must be throttled: {pauses} pauses");
    assert!(min_pause >= 0.0, "negative pause {min_pause} ms");
    assert!(max_pause <= 200.0, "pause {max_pause} ms above MAX_PAUSE");
    // Together they get about the device's bandwidth.
    let total = bws.iter().sum::<f64>();
    let dev = 100e6 / MIB;
    assert!(
        total > 0.7 * dev && total < 1.5 * dev,
        "aggregate {total} MiB/s vs device {dev}"
    );
    for (n, bw) in bws.iter().enumerate() {
        assert!(
            (bw / mean - 1.0).abs() <= 0.20,
            "writer {n}: {bw:.3} MiB/s vs mean {mean:.3} (min {lo:.3}, max {hi:.3})"
        );
    }
    // The throttling state is exported as series, as the balance_dirty_pages
    // and bdi_dirty_ratelimit tracepoints give it: 20 s into the measurement
    // the wb's dirty_ratelimit is near the device's rate shared by the 100
    // writers (~977 KB/s), and the task ratelimit and pause counts are
    // sampled. (It does not settle there: it keeps falling, to ~130-270 KB/s
    // at 40 s, with or without blk-wbt; the model's rate control still
    // lacks what makes the kernel's settle, docs/probe/README.md.)
    let rl = series(&r, "wb./mnt/data.0.dirty_ratelimit");
    let last = rl
        .iter()
        .take_while(|p| p.0 <= 32_000_000_000)
        .last()
        .expect("dirty_ratelimit points")
        .1;
    let share = 100e6 / 1024.0 / 100.0;
    assert!(
        last > share / 3.0 && last < share * 3.0,
        "dirty_ratelimit {last} KB/s vs share {share:.0}"
    );
    assert!(series(&r, "bdp.task_ratelimit").iter().any(|p| p.1 > 0.0));
    let sampled: f64 = series(&r, "bdp.pauses").iter().map(|p| p.1).sum();
    assert!(sampled > 0.0, "no pause sampled");
}

/// blk-wbt holds RWF_DONTCACHE's inline writeback to its normal limit: a
/// writer of 1 MiB uncached writes on a loop device with a write cache
/// sleeps until its in-flight writeback drains instead of filling the 128
/// tags, so little is left under writeback when it stops and the closing
/// fsync is short (the live kernel's 1-4 ms, docs/probe/README.md). Without
/// blk-wbt (`wbt_lat = "0s"`) the tags stay full and the fsync waits for
/// about 128 MiB.
#[test]
fn wbt_keeps_the_closing_fsync_of_an_uncached_writer_short() {
    let scenario = |wbt: &str| {
        format!(
            r#"
[scenario]
name = "dc-wbt"
duration = "10s"

[machine]
cpus = 2
memory = "24g"

[[device]]
name = "loop0"
profile = "loop-virtio"
{wbt}

[[filesystem]]
name = "xfs"
type = "xfs"
device = "loop0"

[[job]]
filesystem = "xfs"
fio = """
[seq]
ioengine=pvsync2
rw=write
bs=1m
size=512m
fallocate=none
uncached=1
end_fsync=1
"""
"#
        )
    };
    let with = run(&scenario(""));
    let without = run(&scenario("wbt_lat = \"0s\""));
    let fsync = |r: &Results| r.stat("fio.seq.end_fsync", "mean").expect("end_fsync");
    let (a, b) = (fsync(&with), fsync(&without));
    eprintln!("closing fsync: {a:.2} ms with blk-wbt, {b:.2} ms without");
    // 128 tags of 1 MiB requests drain at the profile's write rate.
    let p = wbsim::model::block::DeviceProfile::loop_virtio();
    let drain_ms = (128u64 << 20) as f64 / p.write_bw_bytes_per_sec as f64 * 1e3;
    assert!(
        b > 0.8 * drain_ms,
        "without blk-wbt the tags hold ~128 MiB ({drain_ms:.1} ms to drain): {b} ms"
    );
    assert!(a < 0.4 * b, "with blk-wbt {a} ms, without {b} ms");
}

/// A throttled job reports its writers' `balance_dirty_pages` and
/// `bdi_dirty_ratelimit` tracepoints under the names `wbsim probe
/// buffered-write` uses for the live kernel's, so `wbsim compare` holds
/// them side by side: events, sleeps and their total, and the rates the
/// job started and ended with (a new bdi starts at INIT_BW, 102400 KB/s).
#[test]
fn a_throttled_job_reports_its_throttling_tracepoints() {
    let r = run(r#"
[scenario]
name = "bdp-trace"
duration = "20s"

[machine]
cpus = 2
memory = "24g"

[[device]]
name = "loop0"
profile = "loop-virtio"
write_bw = "200m/s"

[device.bdi]
strict_limit = true
max_bytes = "64m"

[[filesystem]]
name = "data"
type = "xfs"
device = "loop0"

[[job]]
filesystem = "data"
fio = """
[w]
ioengine=psync
rw=write
bs=1m
size=512m
numjobs=2
group_reporting
"""
"#);
    let v = |k: &str| {
        r.stat(&format!("fio.w.trace.{k}"), "value")
            .unwrap_or_else(|| panic!("missing fio.w.trace.{k}"))
    };
    let events = v("balance_dirty_pages");
    let paused = v("balance_dirty_pages.paused");
    let pause_ms = v("balance_dirty_pages.pause_ms");
    eprintln!("{events} events, {paused} sleeps, {pause_ms} ms");
    assert!(paused > 10.0 && paused <= events, "{paused} of {events}");
    // Each sleep is at least a jiffy and at most MAX_PAUSE (200 ms).
    assert!(
        pause_ms >= paused && pause_ms <= 200.0 * paused,
        "{pause_ms} ms"
    );
    assert_eq!(v("balance_dirty_pages.dirty_ratelimit_first"), 102_400.0);
    // 512 MiB through a 200 MB/s device takes seconds: the writers run
    // rate-limit updates, which move the rate toward the device's share.
    assert!(v("bdi_dirty_ratelimit") >= 1.0);
    assert!(v("bdi_dirty_ratelimit.dirty_ratelimit_last") < 102_400.0);
}
