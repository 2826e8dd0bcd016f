//! Simulator speed: 60 simulated seconds of 8 buffered sequential writers on
//! a 251 GiB host with a 4 GB/s NVMe. Prints wall time and peak RSS.
//! Targets: under 5 s wall, under 500 MiB RSS.
//!
//! `cargo bench -p wbsim --bench scenario_speed`

use std::time::Instant;

use wbsim::experiment::runner::{run_one, RunOptions};
use wbsim::experiment::scenario::parse_str;

mod common;
use common::{met, vm_hwm_kib};

const SCENARIO: &str = r#"
[scenario]
name = "scenario_speed"
duration = "60s"

[machine]
cpus = 8
memory = "251g"

[[device]]
name = "nvme0n1"
profile = "nvme-dc"
write_bw = "4g/s"

[[filesystem]]
name = "data"
type = "ext4"
device = "nvme0n1"

[[job]]
filesystem = "data"
fio = """
[w]
rw=write
bs=1m
size=1t
numjobs=8
runtime=60s
time_based
"""
"#;

const WALL_TARGET_S: f64 = 5.0;
const RSS_TARGET_MIB: f64 = 500.0;

fn main() {
    let sc = parse_str(SCENARIO, "scenario_speed.toml").expect("scenario parses");
    let v = sc.variant("default").expect("variant");
    let start = Instant::now();
    let r = run_one(&sc, &v, 1, &RunOptions::default()).expect("run");
    let wall = start.elapsed().as_secs_f64();
    let rss_mib = vm_hwm_kib().map_or(f64::NAN, |k| k as f64 / 1024.0);
    let sim_s = r.stat("run.simulated_time", "value").unwrap_or(f64::NAN);
    let bw = r.stat("write.bw", "value").unwrap_or(f64::NAN);
    println!("scenario_speed: {sim_s:.1} simulated s, 8 writers, aggregate {bw:.0} MiB/s");
    println!(
        "wall time: {wall:.2} s (target < {WALL_TARGET_S} s: {})",
        met(wall < WALL_TARGET_S)
    );
    println!(
        "peak RSS (VmHWM): {rss_mib:.1} MiB (target < {RSS_TARGET_MIB} MiB: {})",
        met(rss_mib < RSS_TARGET_MIB)
    );
}
