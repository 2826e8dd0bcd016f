//! Tests of the fio job-file parser and fio's JSON output shape
//! (`wbsim::workload::fio`). Known answers come from fio's HOWTO and source
//! (`parse.c`, `options.c`, `stat.c`).

use hdrhistogram::Histogram;
use wbsim::workload::fio::{
    parse_file, parse_str, parse_str_at, FioDdirStats, FioErrorKind, FioJobOutput, FioLatStats,
    FioOutput, FioPercentiles, FioSyncStats, IoEngine, RwMode, FIO_DEFAULT_PERCENTILES,
};

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;
const SEC: u64 = 1_000_000_000;

/// A job file a kernel developer would write for the dontcache experiment.
const DONTCACHE_FIO: &str = "\
; buffered vs uncached vs direct, single stream
[global]
directory=/mnt/xfs
ioengine=io_uring
iodepth=32
size=16g
bs=1m
runtime=60
time_based
group_reporting

[seq-buffered]
rw=write
end_fsync=1

# RWF_DONTCACHE
[seq-dontcache]
stonewall
rw=write
uncached=1     ; needs fio >= 3.39

[rand-direct]
stonewall
readwrite=randwrite
bs=4k
direct=1
numjobs=4
";

fn err_of(text: &str) -> wbsim::workload::fio::FioError {
    parse_str(text, "jobs/t.fio").expect_err("expected a parse error")
}

#[test]
fn realistic_file_with_global_and_three_jobs() {
    let jf = parse_str(DONTCACHE_FIO, "jobs/dontcache.fio").unwrap();
    assert_eq!(jf.path.to_str(), Some("jobs/dontcache.fio"));
    let names: Vec<&str> = jf.jobs.iter().map(|j| j.name.as_str()).collect();
    assert_eq!(names, ["seq-buffered", "seq-dontcache", "rand-direct"]);

    let buffered = &jf.jobs[0];
    assert_eq!(buffered.rw, RwMode::Write);
    assert_eq!(buffered.ioengine, IoEngine::IoUring);
    assert_eq!(buffered.iodepth, 32);
    assert_eq!(buffered.size_bytes, Some(16 * GIB));
    assert_eq!(
        (buffered.bs_read_bytes, buffered.bs_write_bytes),
        (MIB, MIB)
    );
    assert_eq!(buffered.runtime_ns, Some(60 * SEC));
    assert!(buffered.time_based && buffered.group_reporting && buffered.end_fsync);
    assert!(!buffered.direct && !buffered.uncached);
    assert_eq!(buffered.directory.as_deref(), Some("/mnt/xfs"));
    assert_eq!(buffered.section_line, 12);

    let dontcache = &jf.jobs[1];
    assert!(dontcache.uncached && !dontcache.direct && dontcache.stonewall);
    assert_eq!(dontcache.line_of("uncached"), Some(20));
    assert!(
        !dontcache.end_fsync,
        "end_fsync was set in another job only"
    );

    let direct = &jf.jobs[2];
    assert_eq!(direct.rw, RwMode::RandWrite);
    assert_eq!(
        (direct.bs_read_bytes, direct.bs_write_bytes),
        (4 * KIB, 4 * KIB)
    );
    assert!(direct.direct);
    assert_eq!(direct.numjobs, 4);
    // Source lines: the job's own bs (line 25) overrides the global one (line 7).
    assert_eq!(direct.line_of("bs"), Some(25));
    assert_eq!(direct.sources["rw"].key, "readwrite");
    assert_eq!(buffered.line_of("bs"), Some(7));
    assert_eq!(buffered.sources["bs"].section, "global");
    // stonewall starts a new reporting group each time.
    let groups: Vec<u32> = jf.jobs.iter().map(|j| j.groupid).collect();
    assert_eq!(groups, [0, 1, 2]);
}

#[test]
fn later_global_applies_only_to_later_jobs() {
    let jf = parse_str(
        "[global]\nsize=1g\nbs=8k\n[a]\n[global]\nbs=64k\nioengine=libaio\n[b]\n[c]\nbs=16k\n",
        "t",
    )
    .unwrap();
    let bs: Vec<u64> = jf.jobs.iter().map(|j| j.bs_write_bytes).collect();
    assert_eq!(bs, [8 * KIB, 64 * KIB, 16 * KIB]);
    assert_eq!(jf.jobs[0].ioengine, IoEngine::Psync, "fio's Linux default");
    assert_eq!(jf.jobs[1].ioengine, IoEngine::Libaio);
    assert_eq!(jf.jobs[2].size_bytes, Some(GIB), "globals accumulate");
}

#[test]
fn unit_suffixes_follow_fio() {
    let jf = parse_str(
        "[j]\nsize=10G\nfilesize=512MB\nbs=4KiB\nruntime=500ms\nramp_time=2m\n\
         startdelay=250us\nrate=1m\nfsync=32\n",
        "t",
    )
    .unwrap();
    let j = &jf.jobs[0];
    assert_eq!(j.size_bytes, Some(10 * GIB));
    assert_eq!(j.filesize_bytes, Some(512 * MIB));
    // kb_base=1024 compatibility mode: IEC prefixes are powers of 10.
    assert_eq!(j.bs_read_bytes, 4000);
    assert_eq!(j.runtime_ns, Some(500_000_000));
    assert_eq!(j.ramp_time_ns, 120 * SEC);
    assert_eq!(j.startdelay_ns, 250_000);
    assert_eq!(j.rate_read_bytes_per_s, Some(MIB));
    assert_eq!(j.rate_write_bytes_per_s, Some(MIB));
    assert_eq!(j.fsync_every_writes, 32);
    // runtime without a unit is seconds; runtime=0 and rate=0 mean no limit.
    let jf = parse_str("[j]\nsize=1m\nruntime=0\nrate=0\nramp_time=3\n", "t").unwrap();
    assert_eq!(jf.jobs[0].runtime_ns, None);
    assert_eq!(jf.jobs[0].rate_write_bytes_per_s, None);
    assert_eq!(jf.jobs[0].ramp_time_ns, 3 * SEC);
}

#[test]
fn bs_and_rate_read_write_pairs() {
    let jf = parse_str(
        "[global]\nsize=1g\nbs=16k\n[pair]\nbs=4k,64k\nrate=10m,20m\n\
         [write-only]\nbs=,64k\nrate=,5m\n[read-only]\nbs=8k,\n[trim-ignored]\nbs=4k,8k,16k\n",
        "t",
    )
    .unwrap();
    let j = |n: &str| jf.job(n).unwrap();
    assert_eq!(
        (j("pair").bs_read_bytes, j("pair").bs_write_bytes),
        (4 * KIB, 64 * KIB)
    );
    assert_eq!(j("pair").rate_read_bytes_per_s, Some(10 * MIB));
    assert_eq!(j("pair").rate_write_bytes_per_s, Some(20 * MIB));
    // ",64k" only sets writes: reads keep the global 16k.
    assert_eq!(
        (
            j("write-only").bs_read_bytes,
            j("write-only").bs_write_bytes
        ),
        (16 * KIB, 64 * KIB)
    );
    assert_eq!(j("write-only").rate_read_bytes_per_s, None);
    assert_eq!(j("write-only").rate_write_bytes_per_s, Some(5 * MIB));
    assert_eq!(
        (j("read-only").bs_read_bytes, j("read-only").bs_write_bytes),
        (8 * KIB, 16 * KIB)
    );
    assert_eq!(j("trim-ignored").bs_write_bytes, 8 * KIB);
}

#[test]
fn comments_blank_lines_and_bare_flags() {
    let text = "\n# header\n; another\n[j]  ; trailing\n  size = 1g   # inline\n\n\
                rw=randrw ; mixed\nrwmixwrite=30\nthread\nnew_group\ngroup_reporting=0\n";
    let j = &parse_str(text, "t").unwrap().jobs[0];
    assert_eq!(j.size_bytes, Some(GIB));
    assert_eq!(j.rw, RwMode::RandRw);
    assert_eq!(j.rwmixread_pct, 70, "rwmixwrite=30 sets rwmixread to 70");
    assert!(j.thread && j.new_group && !j.group_reporting);
    assert_eq!(j.line_of("rw"), Some(7));
}

#[test]
fn unknown_option_names_file_line_option_and_job() {
    let e = err_of("[global]\nsize=1g\n\n[seq]\nrw=write\nbs=1m\nread_iolog=trace\n");
    assert_eq!(e.line, 7);
    assert_eq!(e.option.as_deref(), Some("read_iolog"));
    assert_eq!(e.kind, FioErrorKind::UnknownOption);
    let msg = e.to_string();
    assert!(
        msg.starts_with("jobs/t.fio:7: unknown option 'read_iolog' in job 'seq' (supported: "),
        "{msg}"
    );
    assert!(
        msg.contains("ioengine") && msg.contains("uncached"),
        "{msg}"
    );
    // A near miss gets a suggestion; one in [global] says so.
    let e = err_of("[global]\niodeph=4\n[j]\nsize=1m\n");
    assert_eq!(e.line, 2);
    assert!(e.message.contains("in [global]") && e.message.contains("did you mean 'iodepth'?"));
}

#[test]
fn bad_values_name_line_and_option() {
    let e = err_of("[seq]\nsize=1g\nbs=fast\n");
    assert_eq!(
        e.to_string().split(';').next().unwrap(),
        "jobs/t.fio:3: bad value 'fast' for 'bs': not a number"
    );
    assert!(e.message.contains("expected a size like 4k"));
    assert_eq!(
        (e.line, e.option.as_deref(), e.kind),
        (3, Some("bs"), FioErrorKind::BadValue)
    );

    let cases: &[(&str, u32, &str)] = &[
        ("[j]\nsize=1.5g\n", 2, "size"),
        ("[j]\nsize=1g\nruntime=10min\n", 3, "runtime"),
        ("[j]\nsize=1g\ndirect=true\n", 3, "direct"),
        ("[j]\nsize=1g\nrwmixread=101\n", 3, "rwmixread"),
        ("[j]\nsize=1g\nnumjobs=0\n", 3, "numjobs"),
        ("[j]\nsize=1g\nioengine=posixaio\n", 3, "ioengine"),
        ("[j]\nsize=1g\nrw=randwrite:8\n", 3, "rw"),
        ("[j]\nsize=1g\nrw=trimwrite\n", 3, "rw"),
        ("[j]\nsize=1g\nbs=4k-8k\n", 3, "bs"),
        ("[j]\nsize=1g\nbs=0\n", 3, "bs"),
        ("[j]\nsize=1g\nstartdelay=5-10\n", 3, "startdelay"),
        ("[j]\nsize=1g\ndirect\n", 3, "direct"),
        ("[global]\nrate=1x\n[j]\nsize=1g\n", 2, "rate"),
    ];
    for (text, line, opt) in cases {
        let e = err_of(text);
        assert_eq!(
            (e.line, e.option.as_deref()),
            (*line, Some(*opt)),
            "{text:?}: {e}"
        );
        assert_eq!(e.kind, FioErrorKind::BadValue, "{text:?}");
        assert!(e.message.contains(&format!("'{opt}'")), "{e}");
    }
    assert!(err_of("[j]\nsize=1g\ndirect\n")
        .message
        .contains("needs a value"));
    assert!(err_of("[j]\nsize=1g\nrw=randwrite:8\n")
        .message
        .contains("':8'"));
}

#[test]
fn missing_size_is_an_error_as_in_fio() {
    let e = err_of("[global]\nrw=write\n\n[nosize]\nruntime=30\ntime_based\n");
    assert_eq!((e.line, e.option.as_deref()), (4, Some("size")));
    assert_eq!(e.kind, FioErrorKind::Semantic);
    assert!(
        e.to_string()
            .contains("job 'nosize': you need to specify size="),
        "{e}"
    );
    // filesize alone is enough (fio: nr_files with file_size_low).
    let jf = parse_str("[j]\nfilesize=1m\nnrfiles=4\n", "t").unwrap();
    assert_eq!(jf.jobs[0].io_size_bytes(), 4 * MIB);
    assert_eq!(jf.jobs[0].file_size_bytes(), MIB);
}

#[test]
fn time_based_needs_runtime() {
    let e = err_of("[j]\nsize=1g\ntime_based\n");
    assert_eq!((e.line, e.option.as_deref()), (3, Some("time_based")));
}

#[test]
fn direct_and_uncached_conflict() {
    let e = err_of("[global]\ndirect=1\n[j]\nsize=1g\nioengine=pvsync2\nuncached=1\n");
    assert_eq!((e.line, e.option.as_deref()), (6, Some("uncached")));
    assert!(e.message.contains("'direct' set at line 2"), "{e}");
    // buffered=0 is O_DIRECT too; the later line is blamed.
    let e = err_of("[j]\nsize=1g\nioengine=io_uring\nuncached=1\nbuffered=0\n");
    assert_eq!((e.line, e.option.as_deref()), (5, Some("buffered")));
    // uncached=0 with direct=1 is fine.
    assert!(parse_str(
        "[j]\nsize=1g\nioengine=io_uring\nuncached=0\ndirect=1\n",
        "t"
    )
    .is_ok());
}

#[test]
fn uncached_needs_an_engine_that_has_it() {
    let e = err_of("[j]\nsize=1g\nuncached=1\n");
    assert_eq!((e.line, e.option.as_deref()), (3, Some("uncached")));
    assert!(e.message.contains("ioengine=psync"), "{e}");
    let jf = parse_str("[j]\nsize=1g\nioengine=pvsync2\nuncached=1\n", "t").unwrap();
    assert!(jf.jobs[0].uncached);
}

#[test]
fn iodepth_clamped_for_sync_engines() {
    let jf = parse_str(
        "[global]\nsize=1g\niodepth=64\n[p]\nioengine=psync\n[u]\nioengine=io_uring\n[l]\nioengine=libaio\n",
        "t",
    )
    .unwrap();
    let depths: Vec<u32> = jf.jobs.iter().map(|j| j.iodepth).collect();
    assert_eq!(depths, [1, 64, 64]);
    assert_eq!(jf.jobs[0].sources["iodepth"].value.as_deref(), Some("64"));
}

#[test]
fn unsupported_syntax_errors() {
    let e = err_of("[j]\nsize=${WBSIM_TEST_SURELY_UNSET_VAR}\n");
    assert_eq!((e.line, e.kind), (2, FioErrorKind::Unsupported));
    let e = err_of("include other.fio\n[j]\nsize=1g\n");
    assert_eq!((e.line, e.option.as_deref()), (1, Some("include")));
    let e = err_of("size=1g\n[j]\n");
    assert_eq!((e.line, e.kind), (1, FioErrorKind::Syntax));
    assert!(e.message.contains("outside of a [section]"));
    let e = err_of("[j\nsize=1g\n");
    assert_eq!((e.line, e.kind), (1, FioErrorKind::Syntax));
    let e = err_of("[global]\nsize=1g\n");
    assert!(e.message.contains("no jobs"));
}

#[test]
fn line_offset_maps_to_enclosing_file() {
    // As if the job text starts on line 11 of scenarios/e5.toml.
    let e = parse_str_at("[j]\nsize=1g\nbs=huge\n", "scenarios/e5.toml", 10).unwrap_err();
    assert_eq!(e.line, 13);
    assert!(e
        .to_string()
        .starts_with("scenarios/e5.toml:13: bad value 'huge' for 'bs'"));
    let jf = parse_str_at("[j]\nsize=1g\n", "scenarios/e5.toml", 10).unwrap();
    assert_eq!(jf.jobs[0].section_line, 11);
    assert_eq!(jf.jobs[0].line_of("size"), Some(12));
    // Later semantic errors from other layers point at the same place.
    let e = jf.jobs[0].error_at("size", "too big for the device");
    assert_eq!(
        e.to_string(),
        "scenarios/e5.toml:12: job 'j': too big for the device"
    );
}

#[test]
fn instances_are_named_like_fio_clones() {
    let jf = parse_str(
        "[seq]\nsize=1g\nnumjobs=3\nnrfiles=2\ndirectory=/mnt/a/\n\
         [shared]\nsize=1g\nnumjobs=2\nfilename=f1:f\\:2\nname=renamed\n",
        "t",
    )
    .unwrap();
    let seq = jf.jobs[0].instances();
    let labels: Vec<&str> = seq.iter().map(|i| i.label.as_str()).collect();
    assert_eq!(labels, ["seq.0", "seq.1", "seq.2"]);
    assert_eq!(seq[1].files, ["/mnt/a/seq.1.0", "/mnt/a/seq.1.1"]);
    assert_eq!(jf.jobs[0].file_size_bytes(), GIB / 2);
    let shared = jf.jobs[1].instances();
    assert_eq!(jf.jobs[1].name, "renamed");
    assert_eq!(shared[0].label, "renamed.0");
    assert_eq!(shared[0].files, ["f1", "f:2"]);
    assert_eq!(
        shared[1].files, shared[0].files,
        "filename= is shared by clones"
    );
}

#[test]
fn groupid_follows_stonewall_and_new_group() {
    let jf = parse_str(
        "[global]\nsize=1m\n[a]\nstonewall\n[b]\n[c]\nnew_group\n[d]\nwait_for_previous\n",
        "t",
    )
    .unwrap();
    let groups: Vec<u32> = jf.jobs.iter().map(|j| j.groupid).collect();
    // The first job's stonewall does not bump: the group has no jobs yet.
    assert_eq!(groups, [0, 0, 1, 2]);
}

#[test]
fn parse_file_reads_and_reports_path() {
    let dir = std::env::temp_dir().join(format!("wbsim-fio-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("seq.fio");
    std::fs::write(&path, "[seq]\nsize=1g\nrw=write\nbs=1m\nfoo=1\n").unwrap();
    let e = parse_file(&path).unwrap_err();
    assert_eq!(e.origin, path.display().to_string());
    assert_eq!(e.line, 5);
    std::fs::write(&path, "[seq]\nsize=1g\nrw=write\n").unwrap();
    let jf = parse_file(&path).unwrap();
    assert_eq!(jf.path, path);
    let e = parse_file(dir.join("missing.fio")).unwrap_err();
    assert_eq!((e.kind, e.line), (FioErrorKind::Io, 0));
    std::fs::remove_dir_all(&dir).unwrap();
}

fn latency_histogram(values_ns: impl IntoIterator<Item = u64>) -> Histogram<u64> {
    let mut h = Histogram::<u64>::new_with_bounds(1, 3_600 * SEC, 3).unwrap();
    for v in values_ns {
        h.record(v).unwrap();
    }
    h
}

#[test]
fn percentile_keys_match_fio() {
    // 1..=10000 us: the p-th percentile is p% of 10 ms.
    let h = latency_histogram((1..=10_000).map(|us| us * 1000));
    let lat = FioLatStats::from_histogram(&h);
    let p = lat.percentile.as_ref().unwrap();
    let keys: Vec<&str> = p.0.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "1.000000",
            "5.000000",
            "10.000000",
            "20.000000",
            "30.000000",
            "40.000000",
            "50.000000",
            "60.000000",
            "70.000000",
            "80.000000",
            "90.000000",
            "95.000000",
            "99.000000",
            "99.500000",
            "99.900000",
            "99.950000",
            "99.990000"
        ]
    );
    assert_eq!(FIO_DEFAULT_PERCENTILES.len(), keys.len());
    let within = |got: u64, want: u64| got.abs_diff(want) * 1000 <= want; // 0.1%
    assert!(within(p.get(50.0).unwrap(), 5_000_000), "{:?}", p.get(50.0));
    assert!(within(p.get(99.9).unwrap(), 9_990_000), "{:?}", p.get(99.9));
    assert_eq!(lat.n, 10_000);
    assert!(within(lat.min, 1_000) && within(lat.max, 10_000_000));
    assert!((lat.mean - 5_000_500.0).abs() < 5_000.0, "{}", lat.mean);
    // Sample stddev of a uniform 1..=n ramp (step 1 us): sqrt(n(n+1)/12) us.
    let want_sd = (10_000.0f64 * 10_001.0 / 12.0).sqrt() * 1000.0;
    assert!(
        (lat.stddev - want_sd).abs() / want_sd < 0.002,
        "{}",
        lat.stddev
    );
}

#[test]
fn ddir_stats_use_fio_arithmetic() {
    let h = latency_histogram([100_000, 200_000, 300_000]);
    // 1 GiB in 2.0005 s (runtime truncates to 2000 ms), 262144 ios of 4 KiB.
    let d = FioDdirStats::from_latencies(GIB, 262_144, 2_000_500_000, &h, None);
    assert_eq!(d.runtime, 2000);
    assert_eq!(d.io_kbytes, 1_048_576);
    assert_eq!(d.bw_bytes, 536_870_912);
    assert_eq!(d.bw, 524_288);
    assert!((d.iops - 131_072.0).abs() < 1e-9);
    assert_eq!(d.clat_ns, d.lat_ns, "sync engine: lat == clat");
    assert_eq!(d.slat_ns.n, 0);
    assert!(
        (d.clat_ns.stddev - 100_000.0).abs() < 200.0,
        "sample stddev of 100,200,300 us"
    );
    // Zero runtime: no division.
    let z = FioDdirStats::from_latencies(0, 0, 0, &latency_histogram([]), None);
    assert_eq!((z.bw_bytes, z.iops), (0, 0.0));
    assert_eq!(
        z.clat_ns.percentile, None,
        "fio omits percentiles without samples"
    );
}

#[test]
fn json_shape_and_key_names() {
    let clat = latency_histogram([1_000, 2_000]);
    let mut job = FioJobOutput::new("seq-dontcache", 1, 60_000_000_000);
    job.write = FioDdirStats::from_latencies(8 * MIB, 2, SEC, &clat, None);
    job.sync = FioSyncStats::from_histogram(&latency_histogram([5_000_000]));
    let out = FioOutput {
        fio_version: "wbsim-0.1.0".into(),
        jobs: vec![job],
    };
    let text = serde_json::to_string(&out).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["fio version"], "wbsim-0.1.0");
    let j = &v["jobs"][0];
    assert_eq!(j["jobname"], "seq-dontcache");
    assert_eq!(j["groupid"], 1);
    assert_eq!(j["error"], 0);
    assert_eq!(j["job_runtime"], 60_000);
    for key in [
        "io_bytes",
        "io_kbytes",
        "bw_bytes",
        "bw",
        "iops",
        "runtime",
        "total_ios",
    ] {
        assert!(j["write"].get(key).is_some(), "missing write.{key}");
        assert!(j["read"].get(key).is_some(), "missing read.{key}");
    }
    assert_eq!(j["write"]["bw"], 8192);
    for lat in ["clat_ns", "lat_ns"] {
        for key in ["min", "max", "mean", "stddev", "N", "percentile"] {
            assert!(
                j["write"][lat].get(key).is_some(),
                "missing write.{lat}.{key}"
            );
        }
    }
    assert_eq!(j["write"]["clat_ns"]["N"], 2);
    assert!(j["read"]["clat_ns"].get("percentile").is_none());
    assert_eq!(j["sync"]["total_ios"], 1);
    // Percentiles serialise in fio's order, not sorted as strings.
    let first = text.find("\"1.000000\"").unwrap();
    let five = text.find("\"5.000000\"").unwrap();
    let ten = text.find("\"10.000000\"").unwrap();
    assert!(first < five && five < ten);
    // Round trip.
    let back: FioOutput = serde_json::from_str(&text).unwrap();
    assert_eq!(back, out);
    assert_eq!(FioPercentiles::key(99.95), "99.950000");
}

#[test]
fn file_layout_options() {
    use wbsim::workload::fio::Fallocate;
    let e = err_of("[j]\nsize=1m\nfallocate=fast\n");
    assert_eq!(
        (e.line, e.option.as_deref(), e.kind),
        (3, Some("fallocate"), FioErrorKind::BadValue)
    );
    assert!(e
        .message
        .contains("expected native, posix, keep, truncate, none"));
    let jobs = parse_str(
        "[a]\nsize=1m\n[b]\nsize=1m\nfallocate=none\noverwrite=1\nnorandommap\n",
        "jobs/t.fio",
    )
    .unwrap();
    // fio's defaults: preallocate with fallocate(2), keep the random map.
    assert_eq!(jobs.jobs[0].fallocate, Fallocate::Native);
    assert!(!jobs.jobs[0].overwrite && !jobs.jobs[0].norandommap);
    assert_eq!(jobs.jobs[1].fallocate, Fallocate::None);
    assert!(jobs.jobs[1].overwrite && jobs.jobs[1].norandommap);
}

#[test]
fn exec_prerun_takes_bdi_sysfs_writes_only() {
    use wbsim::workload::fio::{BdiKnob, BdiWrite};
    let jf = parse_str(
        "[j]\nsize=1m\nexec_prerun=echo 1 > /sys/class/bdi/loop0/strict_limit && \
         echo 67108864 > /sys/class/bdi/loop0/max_bytes\n",
        "jobs/t.fio",
    )
    .unwrap();
    assert_eq!(
        jf.jobs[0].exec_prerun,
        [
            BdiWrite {
                bdi: "loop0".into(),
                knob: BdiKnob::StrictLimit,
                value: 1
            },
            BdiWrite {
                bdi: "loop0".into(),
                knob: BdiKnob::MaxBytes,
                value: 64 * MIB
            },
        ]
    );
    // Anything but a write of a number to a modelled bdi knob is refused,
    // naming the line and the option.
    for bad in [
        "rm -rf /tmp/x",
        "echo 1 > /proc/sys/vm/drop_caches",
        "echo 1 > /sys/class/bdi/loop0/read_ahead_kb",
        "echo 2 > /sys/class/bdi/loop0/strict_limit",
        "echo 101 > /sys/class/bdi/loop0/max_ratio",
        "echo lots > /sys/class/bdi/loop0/max_bytes",
    ] {
        let e = err_of(&format!("[j]\nsize=1m\nexec_prerun={bad}\n"));
        assert_eq!(
            (e.line, e.option.as_deref()),
            (3, Some("exec_prerun")),
            "{bad}"
        );
        assert!(e.to_string().starts_with("jobs/t.fio:3:"), "{e}");
    }
}
