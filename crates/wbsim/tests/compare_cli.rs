//! `wbsim compare`: fixtures in tests/fixtures/compare_*.json.

use std::path::PathBuf;
use std::process::Command;

use wbsim::cli::compare::{compare, render};
use wbsim::experiment::results::Results;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn wbsim(args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_wbsim"))
        .args(args)
        .output()
        .expect("run wbsim");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn compares_metric_by_metric_and_flags_2x() {
    let a = Results::load(fixture("compare_a.json")).expect("fixture A");
    let b = Results::load(fixture("compare_b.json")).expect("fixture B");
    let c = compare(&a, &b, 2.0);
    let names: Vec<&str> = c.rows.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "fio.seq-w1.clat",
            "fio.seq-w1.write_bw",
            "umount.tmpfs.clean.lazy.cmd",
            "umount.xfs.dirty.umount.call"
        ]
    );
    let row = |n: &str| c.rows.iter().find(|r| r.name == n).expect("row");
    // 350 / 100 ms: flagged.
    let x = row("umount.xfs.dirty.umount.call");
    assert!((x.ratio - 3.5).abs() < 1e-9);
    assert!(x.flag.is_some());
    assert_eq!(x.pcts, Some([95.0, 340.0, 150.0, 400.0]));
    // B's clat is in ms, A's in us: converted to A's unit.
    let clat = row("fio.seq-w1.clat");
    assert_eq!(clat.unit, "us");
    assert!((clat.b - 1100.0).abs() < 1e-9, "{}", clat.b);
    assert!(clat.flag.is_none());
    // Scalars: value, no percentiles.
    let bw = row("fio.seq-w1.write_bw");
    assert!((bw.ratio - 0.95).abs() < 1e-9);
    assert_eq!(bw.pcts, None);
    assert_eq!(c.only_a, ["only.in.a"]);
    assert_eq!(c.only_b, ["only.in.b"]);
    // A stricter threshold flags more.
    assert_eq!(
        compare(&a, &b, 1.05)
            .rows
            .iter()
            .filter(|r| r.flag.is_some())
            .count(),
        4
    );
    let text = render(&c, "A", "B");
    assert!(text.contains("!! umount.xfs.dirty.umount.call"), "{text}");
    assert!(text.contains("1 flagged"), "{text}");
}

#[test]
fn cli_prints_the_table() {
    let (code, out, err) = wbsim(&[
        "compare".as_ref(),
        fixture("compare_a.json").as_os_str(),
        fixture("compare_b.json").as_os_str(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("B/A"), "{out}");
    assert!(out.contains("3.50"), "{out}");
    assert!(out.contains("only in A (1):"), "{out}");
    assert!(out.contains("live kernel"), "{out}");
}

#[test]
fn bad_input_names_the_file_and_fails() {
    let bad = fixture("compare_bad.json");
    let (code, _, err) = wbsim(&[
        "compare".as_ref(),
        fixture("compare_a.json").as_os_str(),
        bad.as_os_str(),
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("compare_bad.json:2:"), "{err}");
    let (code, _, err) = wbsim(&[
        "compare".as_ref(),
        "no-such-file.json".as_ref(),
        bad.as_os_str(),
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("no-such-file.json"), "{err}");
    let (code, _, err) = wbsim(&[
        "compare".as_ref(),
        "--threshold".as_ref(),
        "0.5".as_ref(),
        "a".as_ref(),
        "b".as_ref(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("threshold"), "{err}");
    let (code, _, err) = wbsim(&["compare".as_ref(), "only-one.json".as_ref()]);
    assert_eq!(code, 2, "{err}");
}

/// B with a live spread on two metrics: a model figure outside the spread
/// and beyond the threshold is flagged; one beyond the threshold but inside
/// the live run-to-run spread is not.
#[test]
fn live_spread_decides_with_the_threshold() {
    use wbsim::experiment::results::{MinMedMax, Spread};
    let a = Results::load(fixture("compare_a.json")).expect("fixture A");
    let mut b = Results::load(fixture("compare_b.json")).expect("fixture B");
    let live = b.live.as_mut().expect("fixture B is a probe result");
    let mm = |min: f64, median: f64, max: f64| MinMedMax { min, median, max };
    // A's mean of umount.xfs.dirty.umount.call lies inside this spread (ms).
    let a_mean = a.stat("umount.xfs.dirty.umount.call", "mean").unwrap();
    live.spread.insert(
        "umount.xfs.dirty.umount.call".into(),
        Spread {
            rounds: 5,
            mean: mm(a_mean * 0.5, 300.0, 400.0),
            p99: Some(mm(200.0, 400.0, 900.0)),
        },
    );
    // fio.seq-w1.clat: B in ms; a narrow spread that A (us) lies outside.
    live.spread.insert(
        "fio.seq-w1.clat".into(),
        Spread {
            rounds: 5,
            mean: mm(1.05, 1.1, 1.2),
            p99: None,
        },
    );
    let c = compare(&a, &b, 2.0);
    let row = |n: &str| c.rows.iter().find(|r| r.name == n).expect("row");
    let x = row("umount.xfs.dirty.umount.call");
    assert!((x.ratio - 3.5).abs() < 1e-9, "still 3.5x apart");
    assert!(x.inside_spread);
    assert!(x.flag.is_none(), "inside the live spread: {:?}", x.flag);
    assert_eq!(x.spread, Some([a_mean * 0.5, 400.0]));
    assert_eq!(x.p99_spread, Some([200.0, 900.0]));
    // The spread is converted to A's unit (ms -> us) and A lies outside
    // it, but within the threshold: not flagged either.
    let clat = row("fio.seq-w1.clat");
    let [lo, hi] = clat.spread.expect("converted spread");
    assert!(
        (lo - 1050.0).abs() < 1e-9 && (hi - 1200.0).abs() < 1e-9,
        "{lo} {hi}"
    );
    assert!(!clat.inside_spread);
    assert!(clat.flag.is_none());
    // A tighter threshold flags it: outside the spread and beyond 1.05x.
    let c2 = compare(&a, &b, 1.05);
    let clat2 = c2
        .rows
        .iter()
        .find(|r| r.name == "fio.seq-w1.clat")
        .unwrap();
    assert!(
        clat2
            .flag
            .as_deref()
            .is_some_and(|f| f.contains("outside the live spread")),
        "{:?}",
        clat2.flag
    );
    let text = render(&c, "A", "B");
    assert!(text.contains("live spread"), "{text}");
    assert!(text.contains("0 flagged"), "{text}");
}

#[test]
fn counts_means_within_1_5x_and_p99_within_2x() {
    let a = Results::load(fixture("compare_a.json")).expect("fixture A");
    let b = Results::load(fixture("compare_b.json")).expect("fixture B");
    let c = compare(&a, &b, 2.0);
    let k = c.counts();
    assert_eq!(k.all.means, c.rows.len());
    let means_within = c
        .rows
        .iter()
        .filter(|r| r.ratio <= 1.5 && r.ratio >= 1.0 / 1.5)
        .count();
    assert_eq!(k.all.means_within, means_within);
    // umount.xfs.dirty.umount.call: 3.5x apart.
    assert!(k.all.means_within < k.all.means);
    let hist_rows = c.rows.iter().filter(|r| r.pcts.is_some()).count();
    assert_eq!(k.all.p99s, hist_rows);
    // p99 150 vs 400: 2.67x, outside 2x.
    assert!(k.all.p99_within < k.all.p99s);
    let text = render(&c, "A", "B");
    assert!(
        text.contains(&format!(
            "means within 1.5x: {} of {}",
            k.all.means_within, k.all.means
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "p99 within 2x: {} of {}",
            k.all.p99_within, k.all.p99s
        )),
        "{text}"
    );
}

#[test]
fn the_uring_probes_clat_is_compared_as_fios_lat() {
    use wbsim::cli::compare::Side;
    let doc = |name: &str| {
        let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../docs/probe")
            .join(name);
        Side::of(&Results::load(p).expect("probe document"))
    };
    // probe/uring.rs times a write from before its submission to its reaped
    // completion: fio's lat, so its rows meet the model's `lat`.
    let u = doc("uring.json");
    let job = "fio.uring-xfs-seq-buffered-qd1";
    assert!(u.metrics.contains_key(&format!("{job}.lat")));
    assert!(!u.metrics.contains_key(&format!("{job}.clat")));
    let spread = &u.live.as_ref().expect("live").spread;
    assert!(spread.contains_key(&format!("{job}.lat")));
    // The sync-engine probes' clat is fio's clat (no submission part).
    let d = doc("dontcache.json");
    assert!(d.metrics.contains_key("fio.xfs-seq-buffered.clat"));
}

#[test]
fn job_rows_are_each_jobs_throughput_and_mean_latency() {
    use wbsim::cli::compare::{is_job_latency_row, is_job_row};
    for n in [
        "fio.seq-w1.write_bw",
        "fio.r.read_bw",
        "fio.seq-w1.clat",
        "fio.uring-xfs-seq-buffered-qd1.lat",
        "umount.xfs.clean.umount.call",
        "umount.tmpfs.dirty.lazy.cmd",
    ] {
        assert!(is_job_row(n), "{n}");
    }
    for n in [
        "device.loop0.write_bw",
        "device.loop0.lat",
        "fio.seq-w1.peak_dirty",
        "fio.seq-w1.trace.balance_dirty_pages",
        "fio.seq-w1.slat",
    ] {
        assert!(!is_job_row(n), "{n}");
    }
    assert!(is_job_latency_row("fio.j.clat"));
    assert!(!is_job_latency_row("fio.j.write_bw"));
}

#[test]
fn counts_job_rows_apart_and_sums_pairs_given_with_and() {
    let a = Results::load(fixture("compare_a.json")).expect("fixture A");
    let b = Results::load(fixture("compare_b.json")).expect("fixture B");
    let c = compare(&a, &b, 2.0);
    let k = c.counts();
    let jobs: Vec<_> = c
        .rows
        .iter()
        .filter(|r| wbsim::cli::compare::is_job_row(&r.name) && r.ratio.is_finite())
        .collect();
    assert!(!jobs.is_empty(), "the fixtures have job rows");
    assert_eq!(k.jobs.means, jobs.len());
    assert!(k.jobs.means <= k.all.means && k.jobs.p99s <= k.all.p99s);
    let line = format!(
        "job rows (each job's throughput and mean latency) within 1.5x: {} of {}",
        k.jobs.means_within, k.jobs.means
    );
    assert!(render(&c, "A", "B").contains(&line));

    // The same pair twice through the CLI: each table, then the sums.
    let (fa, fb) = (fixture("compare_a.json"), fixture("compare_b.json"));
    let (code, out, err) = wbsim(&[
        "compare".as_ref(),
        fa.as_os_str(),
        fb.as_os_str(),
        "--and".as_ref(),
        fa.as_os_str(),
        fb.as_os_str(),
    ]);
    assert_eq!(code, 0, "{err}");
    let tail = out.split("all 2 pairs:").nth(1).expect("a total");
    assert!(
        tail.contains(&format!(
            "means within 1.5x: {} of {}",
            2 * k.all.means_within,
            2 * k.all.means
        )),
        "{tail}"
    );
    assert!(
        tail.contains(&format!(
            "job latency p99 within 2x: {} of {}",
            2 * k.jobs.p99_within,
            2 * k.jobs.p99s
        )),
        "{tail}"
    );

    // --and needs both files of its pair.
    let (code, _, err) = wbsim(&[
        "compare".as_ref(),
        fa.as_os_str(),
        fb.as_os_str(),
        "--and".as_ref(),
        fa.as_os_str(),
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("--and"), "{err}");
}
