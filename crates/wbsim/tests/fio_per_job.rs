//! Per-job numbers are the job's own: page-cache growth and tracepoint
//! counts of the files it opened, not the machine's; machine-wide
//! tracepoints are reported once; a job cut off by the run's end is flagged.

use std::process::Command;

fn run_job(name: &str, text: &str, duration: &str) -> serde_json::Value {
    let dir = std::env::temp_dir().join(format!("wbsim-per-job-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let job = dir.join(format!("{name}.fio"));
    std::fs::write(&job, text).expect("write job");
    let out = dir.join("r.json");
    let o = Command::new(env!("CARGO_BIN_EXE_wbsim"))
        .args([
            "run",
            job.to_str().unwrap_or_default(),
            "--duration",
            duration,
        ])
        .args(["--out", out.to_str().unwrap_or_default()])
        .output()
        .expect("wbsim");
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let r = serde_json::from_str(&std::fs::read_to_string(&out).expect("results")).expect("json");
    let _ = std::fs::remove_dir_all(&dir);
    r
}

fn value(r: &serde_json::Value, metric: &str) -> f64 {
    r["metrics"][metric]["value"].as_f64().unwrap_or(0.0)
}

#[test]
fn a_direct_reader_beside_a_buffered_writer_grows_no_cache() {
    let r = run_job(
        "pair",
        "[buffered]\nrw=write\nbs=64k\nsize=128m\nrate=64m\nend_fsync=1\n\
         [direct]\nrw=read\ndirect=1\nbs=64k\nsize=64m\nrate=32m\n",
        "4s",
    );
    // The writer's own files grew by about its size; the reader's by none,
    // although the machine's page cache grew while it ran.
    let grew = value(&r, "fio.buffered.file_cache_growth");
    assert!(grew > 100.0, "writer's cache growth {grew} MiB");
    assert_eq!(value(&r, "fio.direct.file_cache_growth"), 0.0);
    assert_eq!(value(&r, "fio.direct.file_peak_dirty"), 0.0);
    // The machine's (the probe's meminfo figures) did grow while the
    // reader ran, with the writer's pages.
    assert!(value(&r, "fio.direct.peak_dirty") > 0.0);
    assert!(value(&r, "fio.direct.cache_growth") > 0.0);
    assert!(value(&r, "fio.buffered.peak_cached") >= value(&r, "fio.buffered.file_peak_cached"));
    // Unwritten-extent conversions happen on the writer's file only.
    let conv = value(&r, "fio.buffered.trace.xfs_unwritten_convert");
    assert!(conv > 0.0);
    assert!(r["metrics"]
        .get("fio.direct.trace.xfs_unwritten_convert")
        .is_none());
    // Machine-wide, once, and the per-job counts add up to it.
    assert_eq!(value(&r, "trace.xfs_unwritten_convert"), conv);
    // Counts are integers in the results.
    let text = serde_json::to_string(&r["metrics"]["trace.xfs_unwritten_convert"]).unwrap();
    assert!(!text.contains(".0"), "{text}");
    assert!(r["unfinished_jobs"].as_array().is_none_or(|a| a.is_empty()));
}

#[test]
fn a_sizeless_device_job_cut_off_by_the_run_is_flagged() {
    // No size=: the whole (64 GiB) device, far more than 50 ms can do.
    let r = run_job(
        "dev",
        "[dev]\nfilename=/dev/sdb\nrw=randread\ndirect=1\nioengine=libaio\niodepth=4\n",
        "50ms",
    );
    let unfinished: Vec<&str> = r["unfinished_jobs"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    assert_eq!(unfinished, ["dev"]);
}

#[test]
fn unlink_drops_the_jobs_page_cache_before_the_next_job() {
    // The second job's start is the machine's page cache after the first:
    // with unlink=1 the first file's pages left with it (evicted at its
    // last iput), without it they stay cached.
    let jobs = |unlink: u32| {
        format!(
            "[global]\nrw=write\nbs=1m\nend_fsync=1\nunlink={unlink}\n\
             [first]\nsize=64m\n[second]\nstonewall\nsize=16m\n"
        )
    };
    let kept = run_job("kept", &jobs(0), "10s");
    let gone = run_job("gone", &jobs(1), "10s");
    let start = |r: &serde_json::Value| value(r, "fio.second.start_cached");
    assert!(start(&kept) >= 63.0, "kept: {} MiB", start(&kept));
    assert!(start(&gone) < 1.0, "unlinked: {} MiB", start(&gone));
    // Nothing was lost: the data had been fsynced before the unlink.
    assert!(gone["violations"].as_array().is_none_or(|v| v.is_empty()));
}

#[test]
fn the_closing_fsync_is_reported_alone_as_end_fsync() {
    // fsync=4 adds timed fsyncs to sync_lat; end_fsync is the closing one
    // only (what `wbsim probe` times), in ms.
    let r = run_job(
        "endfsync",
        "[w]\nrw=write\nbs=1m\nsize=16m\nfsync=4\nend_fsync=1\n",
        "10s",
    );
    let m = &r["metrics"];
    assert_eq!(m["fio.w.end_fsync"]["unit"], "ms");
    assert_eq!(m["fio.w.end_fsync"]["count"].as_u64(), Some(1));
    assert!(m["fio.w.sync_lat"]["count"].as_u64().unwrap_or(0) > 1);
    let plain = run_job("noendfsync", "[w]\nrw=write\nbs=1m\nsize=16m\n", "10s");
    assert!(plain["metrics"]["fio.w.end_fsync"].is_null());
}
