//! fio's output from `wbsim run JOB.fio`: `--output-format=json|json+|normal`,
//! fio's log files, fio's own `fio_jsonplus_clat2csv` on the json+ output
//! (Debian's fio package, installed by scripts/install.sh), and `wbsim
//! compare` between a live fio run (tests/fixtures/fio_small_live.json) and
//! the model's run of the same job file.

use std::path::{Path, PathBuf};
use std::process::Command;

use wbsim::workload::fio::output::{plat_idx_to_val, plat_val_to_idx, FioBins};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// A fresh directory under the system temp dir for one test.
fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("wbsim-fio-output-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

fn wbsim(args: &[&std::ffi::OsStr], cwd: &Path) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_wbsim"))
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("run wbsim");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs the small job file with `--output-format=FORMAT --output OUT` and
/// returns (output text, results path).
fn run_small(dir: &Path, format: &str) -> (String, PathBuf) {
    let out = dir.join(format!("out-{format}.txt"));
    let res = dir.join(format!("res-{format}.json"));
    let (code, _, err) = wbsim(
        &[
            "run".as_ref(),
            fixture("fio_small.fio").as_os_str(),
            "--output-format".as_ref(),
            format.as_ref(),
            "--output".as_ref(),
            out.as_os_str(),
            "--out".as_ref(),
            res.as_os_str(),
        ],
        dir,
    );
    assert_eq!(code, 0, "{err}");
    (std::fs::read_to_string(&out).expect("output"), res)
}

#[test]
fn plat_buckets_are_fios() {
    // Below 128 ns a bucket per value.
    for v in [0, 1, 63, 64, 127] {
        assert_eq!(plat_idx_to_val(plat_val_to_idx(v)), v);
    }
    // Bucket keys of a fio 3.33 json+ run on this machine (1024..2047 ns:
    // 16 ns wide buckets, each keyed by its middle): 1079 ns fell in "1080".
    for (v, key) in [
        (1079, 1080),
        (1080, 1080),
        (1088, 1096),
        (1111, 1112),
        (2047, 2040),
    ] {
        assert_eq!(plat_idx_to_val(plat_val_to_idx(v)), key, "{v}");
    }
    // Every key is its own bucket's value; keys grow with the index.
    let mut last = 0;
    for idx in 1..(29 * 64) {
        let v = plat_idx_to_val(idx);
        assert_eq!(plat_val_to_idx(v), idx, "idx {idx}");
        assert!(v > last);
        last = v;
    }
    // Beyond the last group everything lands in the last bucket.
    assert_eq!(plat_val_to_idx(u64::MAX), 29 * 64 - 1);
}

#[test]
fn bins_percentiles_follow_fio() {
    // 100 samples: 90 at 1000 ns, 10 at 50 us.
    let mut h = hdrhistogram::Histogram::<u64>::new(3).unwrap();
    h.record_n(1000, 90).unwrap();
    h.record_n(50_000, 10).unwrap();
    let b = FioBins::from_histogram(&h);
    assert_eq!(b.total(), 100);
    let p = b.percentiles(&[50.0, 90.0, 95.0]);
    assert_eq!(p[0].1, plat_idx_to_val(plat_val_to_idx(1000)));
    assert_eq!(p[1].1, plat_idx_to_val(plat_val_to_idx(1000)));
    assert_eq!(p[2].1, plat_idx_to_val(plat_val_to_idx(50_000)));
}

#[test]
fn json_plus_is_fios_shape_and_clat2csv_reads_it() {
    let dir = tmpdir("jsonplus");
    let (text, res) = run_small(&dir, "json+");
    let v: serde_json::Value = serde_json::from_str(&text).expect("one JSON document");
    for k in [
        "fio version",
        "timestamp",
        "timestamp_ms",
        "time",
        "global options",
        "jobs",
        "disk_util",
    ] {
        assert!(v.get(k).is_some(), "missing {k}");
    }
    assert_eq!(v["global options"]["bs"], "4k");
    let jobs = v["jobs"].as_array().unwrap();
    let names: Vec<&str> = jobs
        .iter()
        .map(|j| j["jobname"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["seqwrite", "randread"], "fio's names, no .0");
    assert_eq!(jobs[0]["job options"]["rw"], "write");
    let w = &jobs[0]["write"];
    assert_eq!(w["io_bytes"], 8 << 20);
    assert_eq!(w["total_ios"], 2048);
    let bins = w["clat_ns"]["bins"].as_object().expect("json+ bins");
    let n: u64 = bins.values().map(|c| c.as_u64().unwrap()).sum();
    assert_eq!(n, 2048, "every I/O in a bin");
    assert!(w["clat_ns"]["percentile"]["99.000000"].as_u64().unwrap() > 0);
    assert!(
        w["lat_ns"].get("percentile").is_none(),
        "fio: lat percentiles off by default"
    );
    assert!(jobs[1]["read"]["clat_ns"]["bins"].is_object());
    assert!(
        jobs[0]["read"]["clat_ns"].get("bins").is_none(),
        "no bins for an unused direction"
    );
    for k in ["bw_min", "bw_samples", "iops_mean", "iops_samples"] {
        assert!(w.get(k).is_some(), "missing write.{k}");
    }
    for k in [
        "usr_cpu",
        "sys_cpu",
        "iodepth_level",
        "latency_us",
        "latency_ms",
    ] {
        assert!(jobs[0].get(k).is_some(), "missing {k}");
    }
    assert_eq!(jobs[0]["iodepth_level"]["1"], 100.0, "psync: one in flight");
    assert!(
        jobs[0]["sync"]["total_ios"].as_u64().unwrap() >= 1,
        "end_fsync"
    );
    assert!(v["disk_util"][0]["write_ios"].as_u64().unwrap() > 0);
    // Deterministic: the timestamp is the simulated end of the run.
    let r = wbsim::experiment::results::Results::load(&res).unwrap();
    let end = r.stat("run.simulated_time", "value").unwrap();
    assert_eq!(v["timestamp"].as_u64().unwrap(), end as u64);
    assert!(v["fio version"].as_str().unwrap().starts_with("wbsim-"));

    // fio's own script (Debian's fio package).
    let tool = [
        "/usr/bin/fio_jsonplus_clat2csv",
        "/usr/local/bin/fio_jsonplus_clat2csv",
    ]
    .into_iter()
    .map(PathBuf::from)
    .find(|p| p.exists());
    let Some(tool) = tool else {
        println!(
            "SKIPPED fio_jsonplus_clat2csv check: the tool is not installed \
             (Debian package fio; scripts/install.sh installs it)"
        );
        return;
    };
    let src = dir.join("out-json+.txt");
    let csv = dir.join("clat.csv");
    let out = Command::new(&tool)
        .arg(&src)
        .arg(&csv)
        .output()
        .expect("run fio_jsonplus_clat2csv");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for job in 0..2 {
        let f = dir.join(format!("clat_job{job}.csv"));
        let text = std::fs::read_to_string(&f).expect("CSV per job");
        let rows = text
            .lines()
            .skip(1)
            .filter(|l| !l.trim().is_empty())
            .count();
        assert!(rows > 0, "{} has no rows:\n{text}", f.display());
    }
    let val = Command::new(&tool)
        .arg(&src)
        .arg(&csv)
        .arg("--validate")
        .output()
        .expect("validate");
    assert!(
        val.status.success(),
        "{}{}",
        String::from_utf8_lossy(&val.stdout),
        String::from_utf8_lossy(&val.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn normal_and_json_in_one_run_and_compare_with_live_fio() {
    let dir = tmpdir("normal");
    let (text, res) = run_small(&dir, "normal,json");
    assert!(
        text.contains("seqwrite: (groupid=0, jobs=1): err= 0"),
        "{text}"
    );
    assert!(text.contains("  write: IOPS="), "{text}");
    assert!(text.contains("clat percentiles"), "{text}");
    assert!(text.contains("Run status group 1 (all jobs):"), "{text}");
    assert!(text.contains("   READ: bw="), "{text}");
    assert!(text.contains("Disk stats (read/write):"), "{text}");
    let json_at = text.find("{\n").expect("the JSON document follows");
    let v: serde_json::Value = serde_json::from_str(&text[json_at..]).expect("json");
    assert!(
        v["jobs"][0]["write"]["clat_ns"].get("bins").is_none(),
        "json has no bins"
    );

    // The live fio run of the same file against the model's.
    let (code, out, err) = wbsim(
        &[
            "compare".as_ref(),
            fixture("fio_small_live.json").as_os_str(),
            res.as_os_str(),
        ],
        &dir,
    );
    assert_eq!(code, 0, "{err}");
    for m in [
        "fio.seqwrite.write_bw",
        "fio.seqwrite.clat",
        "fio.randread.read_iops",
        "fio.randread.clat",
    ] {
        assert!(out.contains(m), "{m} not compared:\n{out}");
    }
    assert!(out.contains("A mean|val"), "{out}");
    assert!(out.contains("fio JSON from fio-3.33"), "{out}");
    assert!(!out.contains("share no metric"), "{out}");
    // The clat rows carry n: 2048 I/Os on each side.
    let row = out
        .lines()
        .find(|l| l.contains("fio.seqwrite.clat "))
        .expect("clat row");
    assert_eq!(row.matches(" 2048 ").count(), 2, "{row}");

    // Files that share nothing are called out.
    let (code, out, err) = wbsim(
        &[
            "compare".as_ref(),
            fixture("fio_small_live.json").as_os_str(),
            fixture("compare_a.json").as_os_str(),
        ],
        &dir,
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("share no metric"), "{err}");
    assert!(out.contains("warning: A and B share no metric"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn log_options_write_fios_logs() {
    let dir = tmpdir("logs");
    let job = dir.join("logs.fio");
    std::fs::write(
        &job,
        "[global]\nsize=4m\nbs=64k\n\n[w]\nrw=write\nnumjobs=2\ngroup_reporting\n\
         write_bw_log=wb\nwrite_lat_log=wb\nwrite_iops_log\n\n\
         [avg]\nrw=write\nsize=32m\nbs=4k\nrate=8m\nwrite_bw_log=avg\nlog_avg_msec=500\n",
    )
    .unwrap();
    let (code, _, err) = wbsim(
        &[
            "run".as_ref(),
            job.as_os_str(),
            "--out".as_ref(),
            dir.join("r.json").as_os_str(),
        ],
        &dir,
    );
    assert_eq!(code, 0, "{err}");
    // Thread numbers 1 and 2 are w's clones, 3 is avg.
    for f in [
        "wb_bw.1.log",
        "wb_bw.2.log",
        "wb_clat.1.log",
        "wb_lat.2.log",
        "wb_slat.1.log",
        "w_iops.1.log",
        "w_iops.2.log",
        "avg_bw.3.log",
    ] {
        assert!(dir.join(f).exists(), "{f} missing; stderr:\n{err}");
    }
    let clat = std::fs::read_to_string(dir.join("wb_clat.1.log")).unwrap();
    assert_eq!(
        clat.lines().count(),
        64,
        "one line per 64 KiB write of 4 MiB"
    );
    for l in clat.lines() {
        let cols: Vec<&str> = l.split(", ").collect();
        assert_eq!(cols.len(), 5, "{l}");
        assert_eq!(cols[2], "1", "a write: {l}");
        assert_eq!(cols[3], "65536", "{l}");
        assert!(cols[1].parse::<u64>().unwrap() > 0, "{l}");
    }
    assert_eq!(
        std::fs::read_to_string(dir.join("wb_slat.1.log")).unwrap(),
        ""
    );
    // 8 MiB/s for 4 s, 500 ms windows: about 8192 KiB/s each.
    let avg = std::fs::read_to_string(dir.join("avg_bw.3.log")).unwrap();
    let lines: Vec<&str> = avg.lines().collect();
    assert!(lines.len() >= 6, "{avg}");
    assert!(lines[0].starts_with("500, "), "{avg}");
    let kib: u64 = lines[1].split(", ").nth(1).unwrap().parse().unwrap();
    assert!((7700..=8700).contains(&kib), "{avg}");
    let _ = std::fs::remove_dir_all(&dir);
}
