//! `wbsim check` rejects what `wbsim run` would reject: every built-in
//! scenario and test fixture is accepted by both (check, then a short run of
//! its first planned run), and scenarios whose fio jobs a run fails on
//! mid-way (a raw device path, a path on no filesystem, no size) are
//! rejected by the run's own machinery (run_one, which does not call the
//! shared validation) and by `wbsim check` and `wbsim run` (the binary) with
//! the scenario file and the fio option's line.

use std::path::{Path, PathBuf};
use std::process::Command;

use wbsim::experiment::runner::{plan, run_one, RunOptions};
use wbsim::experiment::scenario::{load, parse_str};
use wbsim::experiment::validate::validate;

fn scenario_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut v: Vec<PathBuf> = std::fs::read_dir(root.join("../../scenarios"))
        .expect("scenarios/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    v.sort();
    v.push(root.join("tests/fixtures/full.toml"));
    v
}

#[test]
fn builtin_and_fixture_scenarios_pass_check_and_a_short_run() {
    let files = scenario_files();
    assert!(files.len() >= 6, "{files:?}");
    for f in files {
        let mut sc = load(&f).unwrap_or_else(|e| panic!("{e}"));
        validate(&sc).unwrap_or_else(|e| panic!("check rejects {}: {e:#}", f.display()));
        // Short: 0.3 s of simulated time is enough for every input error a
        // run raises (they come at boot or at a job's first open).
        sc.quick_duration_ns = sc.quick_duration_ns.min(300_000_000);
        let runs = plan(&sc, &RunOptions::default()).expect("plan");
        let (v, seed) = &runs[0];
        let opts = RunOptions {
            quick: true,
            ..RunOptions::default()
        };
        if let Err(e) = run_one(&sc, v, *seed, &opts) {
            panic!("check accepts {} but a run rejects it: {e}", f.display());
        }
    }
}

const HEAD: &str = "[scenario]\nname = \"bad\"\nduration = \"1s\"\n\n\
[machine]\ncpus = 2\nmemory = \"2g\"\n\n\
[[device]]\nname = \"d\"\nprofile = \"qemu-nvme\"\n\n\
[[filesystem]]\nname = \"x\"\ntype = \"xfs\"\ndevice = \"d\"\n\n\
[[job]]\nfilesystem = \"x\"\nfio = \"\"\"\n[w]\nrw=write\nbs=1m\n";

/// (case, fio lines after `bs=1m`, the option expected in the error, the
/// start of the line the error must name).
const BAD: &[(&str, &str, &str, &str)] = &[
    (
        "raw-device",
        "size=64m\nfilename=/dev/nvme0n1\n",
        "filename",
        "filename=",
    ),
    (
        "host-directory",
        "size=64m\ndirectory=/tmp\n",
        "directory",
        "directory=",
    ),
    // No size= anywhere: the error names the job's section header.
    ("no-size", "filename=f\n", "size", "[w]"),
];

#[test]
fn run_time_input_errors_are_check_errors_with_file_and_line() {
    let dir = std::env::temp_dir().join(format!("wbsim-check-run-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    for (case, lines, option, line) in BAD {
        let text = format!("{HEAD}{lines}\"\"\"\n");
        let line = 1 + text
            .lines()
            .position(|l| l.starts_with(line))
            .expect("the line is in the text");
        let path = dir.join(format!("{case}.toml"));
        std::fs::write(&path, &text).expect("write");
        // The run's own machinery rejects it.
        let sc = parse_str(&text, &path.to_string_lossy()).unwrap_or_else(|e| panic!("{e}"));
        let runs = plan(&sc, &RunOptions::default()).expect("plan");
        assert!(
            run_one(&sc, &runs[0].0, runs[0].1, &RunOptions::default()).is_err(),
            "{case}: the run accepts it"
        );
        // check and run (the binary) reject it, located.
        for cmd in [vec!["check"], vec!["run", "--quick", "--out"]] {
            let mut c = Command::new(env!("CARGO_BIN_EXE_wbsim"));
            c.args(&cmd);
            if cmd[0] == "run" {
                c.arg(dir.join("out"));
            }
            let out = c.arg(&path).output().expect("wbsim");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{case}: wbsim {} accepts it", cmd[0]);
            let at = format!("{}:{line}", path.display());
            assert!(
                err.contains(&at) && err.contains(option),
                "{case}: wbsim {} error does not name {at} and '{option}': {err}",
                cmd[0]
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
