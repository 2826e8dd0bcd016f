//! A scenario whose run would not fit the memory limit is refused before it
//! starts, by `wbsim check` and `wbsim run` alike, with the estimate and
//! the `numjobs` line responsible; `--max-memory` moves the limit. Beyond
//! 128 separate clones a run aggregates them per job unless `--per-job`.

use std::process::Command;

fn scenario(numjobs: u32, group_reporting: bool) -> String {
    format!(
        "[scenario]\nname = \"big\"\nduration = \"1s\"\n\n[machine]\ncpus = 2\nmemory = \"16g\"\n\n\
         [[device]]\nname = \"d\"\nprofile = \"qemu-nvme\"\n\n\
         [[filesystem]]\nname = \"x\"\ntype = \"ext4\"\ndevice = \"d\"\n\n\
         [[job]]\nfilesystem = \"x\"\nfio = \"\"\"\n[w]\nrw=write\nbs=1m\nsize=1m\n\
         numjobs={numjobs}\n{}\"\"\"\n",
        if group_reporting { "group_reporting\n" } else { "" }
    )
}

fn wbsim(args: &[&str], file: &std::path::Path) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_wbsim"))
        .args(args)
        .arg(file)
        .output()
        .expect("wbsim");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn too_big_runs_are_refused_up_front_with_the_estimate_and_the_key() {
    let dir = std::env::temp_dir().join(format!("wbsim-limits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let big = dir.join("big.toml");
    std::fs::write(&big, scenario(100_000, false)).expect("write");
    // numjobs= is on line 25.
    let out_dir = dir.join("out");
    let out = out_dir.to_string_lossy().into_owned();
    for args in [
        vec!["check", "--per-job"],
        vec!["run", "--per-job", "--out", &out],
    ] {
        let (ok, text) = wbsim(&args, &big);
        assert!(
            !ok,
            "wbsim {args:?} accepts 100,000 separate clones: {text}"
        );
        assert!(
            text.contains(&format!("{}:25", big.display()))
                && text.contains("numjobs")
                && text.contains("MiB")
                && text.contains("--max-memory"),
            "wbsim {args:?}: {text}"
        );
    }
    assert!(!out_dir.exists(), "the refused run wrote results");
    // Without --per-job the same clones are aggregated per job, which fits.
    let (ok, text) = wbsim(&["check"], &big);
    assert!(ok && text.contains("aggregated"), "{text}");
    // Shared statistics fit the default limit (check only: the run is the
    // benchmark's), but not a 512 MiB one.
    let shared = dir.join("shared.toml");
    std::fs::write(&shared, scenario(100_000, true)).expect("write");
    let (ok, text) = wbsim(&["check"], &shared);
    assert!(ok, "{text}");
    let (ok, text) = wbsim(&["check", "--max-memory", "512m"], &shared);
    assert!(!ok && text.contains("numjobs"), "{text}");
    let (ok, text) = wbsim(&["check", "--max-memory", "lots"], &shared);
    assert!(!ok && text.contains("--max-memory"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn many_clones_are_aggregated_per_job_unless_per_job_detail_is_asked_for() {
    use wbsim::experiment::runner::{plan, run_one, RunOptions};
    use wbsim::experiment::scenario::parse_str;
    let run_text = |numjobs: u32, per_job: bool, extra: &str| {
        let text = scenario(numjobs, false).replace("bs=1m\nsize=1m", "bs=4k\nsize=4k") + extra;
        let sc = parse_str(&text, "many.toml").unwrap_or_else(|e| panic!("{e}"));
        let opts = RunOptions {
            per_job,
            ..RunOptions::default()
        };
        let (v, seed) = plan(&sc, &opts).expect("plan").remove(0);
        run_one(&sc, &v, seed, &opts).unwrap_or_else(|e| panic!("{e}"))
    };
    let run = |numjobs: u32, per_job: bool| run_text(numjobs, per_job, "");
    // Within the limit: one entry per clone, as the job file asks, and no
    // job_reporting note.
    let r = run(100, false);
    assert_eq!(r.jobs.len(), 100);
    assert!(r.job_reporting.is_none());
    // Beyond it: one entry for the job's 200 clones, holding all their I/O,
    // and the results say so.
    let r = run(200, false);
    assert_eq!(r.jobs.len(), 1, "{:?}", r.job_reporting);
    assert_eq!(r.jobs[0]["jobname"], "w");
    assert_eq!(r.jobs[0]["write"]["io_bytes"], 200 * 4096);
    assert_eq!(r.jobs[0]["write"]["total_ios"], 200);
    let jr = r.job_reporting.as_ref().expect("job_reporting");
    assert_eq!(jr.mode, "aggregated");
    assert_eq!(jr.separate_clones, 200);
    assert_eq!(jr.aggregated_jobs, vec!["w".to_string()]);
    assert!(r.metrics.contains_key("fio.w.write_bw"));
    // --per-job: every clone's own entry.
    let r = run(200, true);
    assert_eq!(r.jobs.len(), 200);
    // fio names every clone's entry by the job's name (metric names tell
    // them apart as w.N).
    assert_eq!(r.jobs[199]["jobname"], "w");
    assert!(r.metrics.contains_key("fio.w.199.write_bw"));
    assert_eq!(
        r.job_reporting.as_ref().map(|j| j.mode.as_str()),
        Some("per_clone")
    );
    // The scenario key does the same.
    let r = run_text(200, false, "\n[measure]\nper_job = true\n");
    assert_eq!(r.jobs.len(), 200);
    // A bad value is located.
    let bad = scenario(200, false) + "\n[measure]\nper_job = \"yes\"\n";
    let e = match wbsim::experiment::scenario::parse_str(&bad, "bad.toml") {
        Ok(_) => panic!("per_job = \"yes\" accepted"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("bad.toml:") && e.contains("per_job"), "{e}");
}
