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
