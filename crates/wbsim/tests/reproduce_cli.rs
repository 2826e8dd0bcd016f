//! `wbsim reproduce --quick` and `wbsim report` as a user runs them. The
//! runner may still be a stub that fails every run: then the command must
//! exit 1 and the report must mark each failed run; either way the files
//! exist and `wbsim report` regenerates the same documents from them.

mod report_fixtures;

use std::path::Path;
use std::process::{Command, Output};

use report_fixtures as fx;
use wbsim::experiment::catalog::EXPERIMENTS;

fn wbsim(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wbsim"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("wbsim: {e}"))
}

fn text(o: &Output) -> String {
    format!(
        "status {}\n--- stdout\n{}\n--- stderr\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Checks the output directory after a run and returns (ok, failed)
/// counts of result files.
fn check_outputs(out: &Path, o: &Output) -> (usize, usize) {
    let shown = text(o);
    let html = read(&out.join("index.html"));
    let md = read(&out.join("report.md"));
    for e in EXPERIMENTS {
        assert!(
            html.contains(&format!("<section id=\"{}\"", e.id)),
            "{shown}"
        );
        assert!(md.contains(&format!("<a id=\"{}\"></a>", e.id)), "{shown}");
    }
    let files: Vec<String> = std::fs::read_dir(out.join("results"))
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    let failed = files.iter().filter(|f| f.ends_with(".failed.json")).count();
    let ok = files.len() - failed;
    if failed > 0 {
        assert_eq!(o.status.code(), Some(1), "{shown}");
        assert_eq!(md.matches("- **FAILED** `").count(), failed, "{md}");
        assert_eq!(html.matches("<li class=\"failed-run\">").count(), failed);
    } else {
        assert_eq!(o.status.code(), Some(0), "{shown}");
        assert!(!md.contains("**FAILED**"), "{md}");
    }
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("within 1.5x"), "{shown}");
    (ok, failed)
}

#[test]
fn reproduce_quick_writes_report_and_marks_failures() {
    let dir = fx::tmp_dir("reproduce-quick");
    let o = wbsim(&["reproduce", "--quick", "--out", "out"], &dir);
    let out = dir.join("out");
    let (ok, failed) = check_outputs(&out, &o);
    let with_scenario = EXPERIMENTS.iter().filter(|e| e.scenario.is_some()).count();
    if with_scenario == 0 {
        assert_eq!((ok, failed), (0, 0));
        assert!(text(&o).contains("still to come"), "{}", text(&o));
    } else {
        assert!(ok + failed > 0, "{}", text(&o));
    }
}

#[test]
fn reproduce_a_scenario_file_then_regenerate_the_report() {
    let dir = fx::tmp_dir("reproduce-scenario");
    std::fs::write(
        dir.join("t.toml"),
        "[scenario]\nname = \"t\"\nduration = \"100ms\"\nrepeat = 3\nquick_repeat = 2\n\n\
         [machine]\ncpus = 2\nmemory = \"256m\"\n\n\
         [variants.sync]\ndetach_release = \"sync\"\n\
         [variants.deferred]\ndetach_release = \"deferred\"\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let args = [
        "reproduce",
        "--quick",
        "--only",
        "t",
        "--scenario",
        "t.toml",
        "--jobs",
        "2",
        "--out",
        "out",
    ];
    let o = wbsim(&args, &dir);
    let out = dir.join("out");
    let (ok, failed) = check_outputs(&out, &o);
    // 2 variants x quick_repeat (2) repetitions.
    assert_eq!(ok + failed, 4, "{}", text(&o));
    for v in ["sync", "deferred"] {
        for seed in [1, 2] {
            let stem = format!("t__{v}__seed{seed}");
            assert!(
                out.join(format!("results/{stem}.json")).exists()
                    || out.join(format!("results/{stem}.failed.json")).exists(),
                "{stem}"
            );
        }
    }
    let html = read(&out.join("index.html"));
    assert!(html.contains("<section id=\"t\""), "{html}");

    // A second run replaces the files; results are deterministic.
    let md1 = read(&out.join("report.md"));
    let html1 = html;
    let o2 = wbsim(&args, &dir);
    assert_eq!(o2.status.code(), o.status.code(), "{}", text(&o2));
    assert_eq!(read(&out.join("report.md")), md1);
    assert_eq!(read(&out.join("index.html")), html1);

    // `wbsim report` regenerates the same documents from the files alone.
    let o3 = wbsim(&["report", "out/results", "--out", "again"], &dir);
    assert_eq!(o3.status.code(), Some(0), "{}", text(&o3));
    assert_eq!(read(&dir.join("again/report.md")), md1);
    assert_eq!(read(&dir.join("again/index.html")), html1);
}

#[test]
fn bad_arguments_are_errors() {
    let dir = fx::tmp_dir("reproduce-bad-args");
    let o = wbsim(&["reproduce", "--only", "E9", "--out", "out"], &dir);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("--only E9: no such experiment"),
        "{}",
        text(&o)
    );

    std::fs::write(dir.join("bad.json"), "not json").unwrap_or_default();
    let o = wbsim(&["report", "bad.json"], &dir);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("bad.json:1:"), "{}", text(&o));
}
