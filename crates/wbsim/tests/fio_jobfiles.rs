//! `wbsim run JOB.fio`: job files with the option sets of fio's examples run
//! with one command on the built-in machine; other engines and bad options
//! are clear errors naming file, line and option.

use std::path::PathBuf;
use std::process::Command;

fn wbsim(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_wbsim"));
    c.args(args).current_dir(env!("CARGO_MANIFEST_DIR"));
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap_or_else(|e| panic!("wbsim: {e}"))
}

fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn out_dir(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("wbsim-fio-{tag}-{}", std::process::id()))
}

/// The job files that must run, with the job names their results hold.
const RUNNABLE: &[(&str, &[&str])] = &[
    ("seq-read.fio", &["seq-read"]),
    ("seq-write-aio.fio", &["aio-write"]),
    ("rand-rw-uring.fio", &["rand-rw", "rand-rw"]),
    (
        "ssd-groups.fio",
        &["seq-read", "rand-read", "seq-write", "rand-write"],
    ),
    ("bssplit.fio", &["mixed-sizes"]),
    ("zipf.fio", &["zipf-read"]),
    ("zoned.fio", &["zoned-write"]),
    ("rate.fio", &["paced-write", "reader"]),
    ("verify.fio", &["write-and-verify"]),
    ("include-env.fio", &["sized-by-env"]),
];

#[test]
fn example_style_job_files_run_with_one_command() {
    let dir = out_dir("examples");
    for (file, names) in RUNNABLE {
        let path = format!("tests/fixtures/fio/{file}");
        let out = dir.join(file.replace(".fio", ".json"));
        let o = wbsim(
            &[
                "run",
                &path,
                "--duration",
                "3s",
                "--out",
                out.to_str().unwrap_or_default(),
                // verify.fio writes a bandwidth log.
                "--log-dir",
                dir.to_str().unwrap_or_default(),
            ],
            &[("WBSIM_FIO_SIZE", "8m")],
        );
        assert!(o.status.success(), "{file}: {}", text(&o));
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        let got: Vec<&str> = r["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|j| j["jobname"].as_str())
            .collect();
        assert_eq!(got, *names, "{file}");
        // Every job did I/O.
        for j in r["jobs"].as_array().unwrap() {
            let ios = j["read"]["total_ios"].as_u64().unwrap_or(0)
                + j["write"]["total_ios"].as_u64().unwrap_or(0);
            assert!(ios > 0, "{file}: {j}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn not_modelled_options_are_reported_once_on_stderr_and_in_results() {
    let dir = out_dir("nm");
    let out = dir.join("v.json");
    let o = wbsim(
        &[
            "run",
            "tests/fixtures/fio/verify.fio",
            "--fs",
            "ext4",
            "--device",
            "qemu-nvme",
            "--machine",
            "server16",
            "--out",
            out.to_str().unwrap_or_default(),
            "--log-dir",
            dir.to_str().unwrap_or_default(),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        err.matches("'verify' is accepted but not modelled").count(),
        1,
        "{err}"
    );
    assert!(err.contains("verify.fio:5: option 'verify'"), "{err}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let opts: Vec<&str> = r["not_modelled"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["option"].as_str())
        .collect();
    assert!(
        opts.contains(&"gtod_reduce") && opts.contains(&"buffer_pattern"),
        "{opts:?}"
    );
    assert_eq!(r["model"]["machine"]["cpus"], 16);
    // write_bw_log=verify: fio's log file, in --log-dir (its lines are
    // checked in tests/fio_output.rs).
    assert!(dir.join("verify_bw.1.log").exists());
    assert_eq!(r["model"]["filesystems"][0]["type"], "ext4");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_job_cut_off_by_the_run_is_flagged() {
    let dir = out_dir("cut");
    std::fs::create_dir_all(&dir).unwrap();
    let job = dir.join("big.fio");
    std::fs::write(&job, "[big]\nrw=write\nbs=1m\nsize=1t\n").unwrap();
    let out = dir.join("big.json");
    let o = wbsim(
        &[
            "run",
            job.to_str().unwrap_or_default(),
            "--duration",
            "1s",
            "--out",
            out.to_str().unwrap_or_default(),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("NOT FINISHED: job 'big'"), "{}", text(&o));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(r["unfinished_jobs"], serde_json::json!(["big"]));
    // Counts are integers on the terminal.
    assert!(
        !text(&o).contains("(n=") || !text(&o).contains(".000)"),
        "{}",
        text(&o)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn other_engines_and_bad_input_are_clear_errors() {
    let o = wbsim(&["run", "tests/fixtures/fio/netio.fio"], &[]);
    assert!(!o.status.success());
    let t = text(&o);
    assert!(t.contains("netio.fio:2:") && t.contains("ioengine"), "{t}");

    let o = wbsim(
        &[
            "run",
            "tests/fixtures/fio/seq-read.fio",
            "--machine",
            "cray",
        ],
        &[],
    );
    assert!(!o.status.success());
    assert!(
        text(&o).contains("--machine cray") && text(&o).contains("vm2"),
        "{}",
        text(&o)
    );

    let o = wbsim(
        &["run", "tests/fixtures/fio/include-env.fio"],
        &[("WBSIM_FIO_SIZE", "")],
    );
    assert!(!o.status.success(), "{}", text(&o));

    let o = wbsim(
        &["run", "../../scenarios/uring.toml", "--machine", "vm2"],
        &[],
    );
    assert!(!o.status.success());
    assert!(
        text(&o).contains("--machine is for fio job files"),
        "{}",
        text(&o)
    );
}

#[test]
fn every_accepted_option_is_documented() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/fio-options.md"
    ))
    .unwrap();
    for o in wbsim::workload::fio::options::OPTIONS {
        assert!(
            doc.contains(&format!("| `{}` |", o.name)),
            "{} is not in docs/fio-options.md",
            o.name
        );
    }
    for (n, _) in wbsim::workload::fio::options::NOT_MODELLED {
        assert!(
            doc.contains(&format!("| `{n}` |")),
            "{n} is not in docs/fio-options.md"
        );
    }
}
