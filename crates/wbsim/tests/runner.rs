//! The scenario runner end to end: a buffered-write scenario runs, its
//! results are deterministic, fio-shaped, and the invariants hold.

use wbsim::experiment::runner::{plan, run_one, RunOptions};
use wbsim::experiment::scenario::parse_str;

const SCENARIO: &str = r#"
[scenario]
name = "t"
duration = "20s"

[machine]
cpus = 2
memory = "2g"

[[device]]
name = "d0"
profile = "loop-virtio"
write_bw = "200m/s"

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
size=4g
runtime=5s
time_based
"""

[[actor]]
name = "syncer"
start = "3s"
repeat = 1
steps = [ { op = "sync", record = "sync.elapsed" } ]
"#;

#[test]
fn buffered_writer_is_throttled_to_the_device_and_results_are_deterministic() {
    let sc = parse_str(SCENARIO, "t.toml").expect("scenario parses");
    let runs = plan(&sc, &RunOptions::default()).expect("plan");
    assert_eq!(runs.len(), 1);
    let (v, seed) = &runs[0];
    let a = run_one(&sc, v, *seed, &RunOptions::default()).expect("run");
    let b = run_one(&sc, v, *seed, &RunOptions::default()).expect("run");
    assert!(
        a.same_outcome(&b),
        "same scenario, variant and seed must give identical results"
    );
    assert!(
        a.invariants.violations.is_empty(),
        "{:?}",
        a.invariants.violations
    );
    // A writer far faster than a 200 MB/s device ends up at the device's speed
    // once it reaches the dirty limit (2 GiB machine: ~200 MiB dirty limit).
    let bw = a.stat("fio.w.write_bw", "value").expect("write_bw");
    let dev = 200e6 / 1048576.0;
    assert!(
        bw > 0.8 * dev && bw < 2.0 * dev,
        "writer bw {bw} MiB/s vs device {dev}"
    );
    let pauses = a.stat("bdp.pause", "count").expect("pauses");
    assert!(
        pauses > 10.0,
        "balance_dirty_pages must pause the writer: {pauses}"
    );
    // sync(2) under a dirty load takes time: it writes what is dirty.
    let sync = a.stat("sync.elapsed", "mean").expect("sync recorded");
    assert!(sync > 10.0, "sync took {sync} ms");
    // fio JSON shape.
    let j = &a.jobs[0];
    assert_eq!(j["jobname"], "w");
    assert!(j["write"]["bw_bytes"].as_u64().unwrap_or(0) > 0);
    assert!(
        j["write"]["clat_ns"]["percentile"]["99.000000"]
            .as_u64()
            .unwrap_or(0)
            > 0
    );
    // Always-present metrics.
    for m in [
        "dirty_pages",
        "writeback_pages",
        "dirty_limit_pages",
        "bg_limit_pages",
        "device.d0.write_bytes_per_s",
    ] {
        assert!(a.metrics.contains_key(m), "missing metric {m}");
    }
}

#[test]
fn a_different_seed_is_a_different_random_workload() {
    let text = SCENARIO
        .replace("rw=write", "rw=randwrite\nbs=4k")
        .replace("bs=256k\n", "")
        .replace("runtime=5s", "runtime=300ms");
    let sc = parse_str(&text, "t.toml").expect("scenario parses");
    let v = sc.variant("default").expect("variant");
    let a = run_one(&sc, &v, 1, &RunOptions::default()).expect("run");
    let b = run_one(&sc, &v, 2, &RunOptions::default()).expect("run");
    assert!(!a.same_outcome(&b));
}
