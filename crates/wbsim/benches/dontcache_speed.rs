//! Speed of the whole E5 `dontcache` scenario (scenarios/dontcache.toml), both
//! variants, one after another on one thread: prints each run's wall time,
//! the total, and the simulated single-stream table (MB/s, as published).
//! `cargo bench -p wbsim --bench dontcache_speed`.

use std::time::Instant;

use wbsim::experiment::runner::{run_one, RunOptions};
use wbsim::experiment::scenario::load;

fn main() {
    let path = format!(
        "{}/../../scenarios/dontcache.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let s = load(&path).unwrap_or_else(|e| panic!("{e}"));
    let total = Instant::now();
    let mut rows = Vec::new();
    for variant in ["inline", "kick"] {
        let v = s.variant(variant).unwrap_or_else(|e| panic!("{e}"));
        let t = Instant::now();
        let r = run_one(&s, &v, s.seed, &RunOptions::default()).unwrap_or_else(|e| panic!("{e}"));
        println!(
            "dontcache [{variant}]: {:.2} s wall, {:.1} s simulated",
            t.elapsed().as_secs_f64(),
            r.stat("run.simulated_time", "value").unwrap_or(0.0)
        );
        rows.push((variant, r));
    }
    println!(
        "dontcache, both variants: {:.2} s wall",
        total.elapsed().as_secs_f64()
    );
    println!("| test | inline MB/s | kick MB/s |");
    println!("|---|---|---|");
    for job in [
        "seq-write-buffered",
        "seq-write-dontcache",
        "seq-write-direct",
        "rand-write-buffered",
        "rand-write-dontcache",
        "rand-write-direct",
        "write-32f-dontcache",
        "compete-dontcache",
        "compete-buffered",
    ] {
        let mbs = |r: &wbsim::experiment::results::Results| {
            r.stat(&format!("fio.{job}.write_bw"), "value")
                .map_or(f64::NAN, |v| v * 1_048_576.0 / 1e6)
        };
        println!(
            "| {job} | {:.0} | {:.0} |",
            mbs(&rows[0].1),
            mbs(&rows[1].1)
        );
    }
}
