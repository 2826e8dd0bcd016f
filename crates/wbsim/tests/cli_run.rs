//! `wbsim run` and `wbsim check` as a user runs them: results files, clear
//! errors with a non-zero exit for bad input.

mod common;

use common::{text, wbsim};

const E3: &str = "../../scenarios/lazy-umount.toml";

#[test]
fn run_one_variant_writes_results_and_prints_the_e3_metrics() {
    let dir = std::env::temp_dir().join(format!("wbsim-cli-run-{}", std::process::id()));
    let out = dir.join("r.json");
    let o = wbsim(&[
        "run",
        E3,
        "--variant",
        "deferred",
        "--repeat",
        "1",
        "--out",
        out.to_str().unwrap_or_default(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("umount.elapsed") && t.contains("umount_lazy.elapsed"),
        "{t}"
    );
    let r = wbsim::experiment::results::Results::load(&out).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (r.scenario.as_str(), r.variant.as_str()),
        ("lazy-umount", "deferred")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn check_accepts_every_built_in_scenario() {
    for f in std::fs::read_dir("../../scenarios").unwrap_or_else(|e| panic!("{e}")) {
        let p = f.unwrap_or_else(|e| panic!("{e}")).path();
        if p.extension().is_some_and(|e| e == "toml") {
            let o = wbsim(&["check", p.to_str().unwrap_or_default()]);
            assert!(o.status.success(), "{}: {}", p.display(), text(&o));
        }
    }
}

#[test]
fn bad_input_is_a_clear_error_with_a_nonzero_exit() {
    let o = wbsim(&["run", E3, "--variant", "nope"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("no such variant"), "{}", text(&o));
    let o = wbsim(&["run", "no/such.toml"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("no/such.toml"), "{}", text(&o));
    let o = wbsim(&["run", E3, "--out", "x.json"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("holds one run"), "{}", text(&o));
    let bad = std::env::temp_dir().join(format!("wbsim-bad-{}.toml", std::process::id()));
    std::fs::write(&bad, "[scenario]\nname = \"x\"\nduration = \"1s\"\n[machine]\ncpus = 2\nmemory = \"1g\"\nbogus = 1\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let o = wbsim(&["check", bad.to_str().unwrap_or_default()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains(":7:") && t.contains("bogus"),
        "error must name line 7 and the key: {t}"
    );
    let _ = std::fs::remove_file(&bad);
}
