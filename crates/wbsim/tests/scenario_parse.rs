//! Scenario files, metrics and results documents: parsing, error locations,
//! variants, determinism.

use std::path::Path;

use wbsim::experiment::metrics::{MetricSummary, Metrics};
use wbsim::experiment::results::{Host, Invariants, Results};
use wbsim::experiment::scenario::{
    self, CsumLookup, DetachRelease, DontcacheFlush, ErrorKind, FsType, Policies, Repeat,
    ScenarioError, StepOp, UmountDrain, WbCtxAssign,
};

const BASE: &str =
    "[scenario]\nname = \"t\"\nduration = \"10s\"\n\n[machine]\ncpus = 4\nmemory = \"1g\"\n";

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Parses BASE + `extra`; expects an error.
fn err(extra: &str) -> ScenarioError {
    let text = format!("{BASE}{extra}");
    match scenario::parse_str(&text, "scenarios/x.toml") {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => e,
    }
}

/// 1-based line of the first occurrence of `needle` in BASE + `extra`.
fn line_of(extra: &str, needle: &str) -> u32 {
    let text = format!("{BASE}{extra}");
    let at = text
        .find(needle)
        .unwrap_or_else(|| panic!("{needle} not in text"));
    u32::try_from(text[..at].matches('\n').count() + 1).unwrap_or(0)
}

fn check(e: &ScenarioError, kind: ErrorKind, line: u32, key: &str, contains: &[&str]) {
    let shown = e.to_string();
    assert_eq!(e.kind, kind, "{shown}");
    assert_eq!(e.line, line, "{shown}");
    assert_eq!(e.key.as_deref(), Some(key), "{shown}");
    assert!(
        shown.starts_with(&format!("scenarios/x.toml:{line}:")),
        "{shown}"
    );
    for c in contains {
        assert!(shown.contains(c), "'{c}' not in: {shown}");
    }
}

#[test]
fn full_scenario_parses_every_section() {
    let s = scenario::load(fixture("full.toml")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (s.name.as_str(), s.duration_ns, s.repeat, s.seed),
        ("full", 10_000_000_000, 3, 42)
    );
    assert_eq!(s.machine.cpus, 8);
    assert_eq!(s.machine.memory_bytes, 4 << 30);
    assert!(s.machine.preempt_rt && s.machine.rcu_normal_after_boot);
    assert_eq!((s.machine.hz, s.machine.process_start_ns), (250, 3_000_000));
    assert_eq!(
        (
            s.machine.dirty.dirty_ratio,
            s.machine.dirty.dirty_background_ratio,
            s.machine.dirty.dirty_background_bytes
        ),
        (30, 0, 64 << 20)
    );
    assert_eq!(
        (
            s.machine.dirty.dirty_expire_centisecs,
            s.machine.dirty.dirty_writeback_centisecs
        ),
        (1500, 500)
    );
    let d = s.device("nvme0").unwrap_or_else(|| panic!("nvme0"));
    assert_eq!(
        (
            d.params.write_bw_bytes_per_sec,
            d.params.write_latency_ns,
            d.params.queue_depth
        ),
        (1 << 30, 50_000, 64)
    );
    assert_eq!(d.params.read_bw_bytes_per_sec, 2_000_000_000); // from the qemu-nvme profile
    assert!(d.bdi.strict_limit);
    assert_eq!((d.bdi.min_ratio, d.bdi.max_ratio), (0, 50));
    let data = s.filesystem("data").unwrap_or_else(|| panic!("data"));
    assert_eq!(
        (
            data.fs_type,
            data.mountpoint.as_str(),
            data.option_int("agcount")
        ),
        (FsType::Xfs, "/mnt/data", Some(4))
    );
    let scratch = s.filesystem("scratch").unwrap_or_else(|| panic!("scratch"));
    assert_eq!(
        (scratch.mountpoint.as_str(), scratch.mounted),
        ("/srv/scratch", false)
    );
    assert_eq!(s.filesystem("shm").map(|f| f.device.clone()), Some(None));
    assert_eq!(
        s.cgroup("bad")
            .map(|c| (c.memory_high, c.memory_max, c.cpus.clone())),
        Some((Some(1 << 30), None, Some(vec![0, 1, 2, 3])))
    );
    // Jobs: file read relative to the scenario, inline text with its line offset.
    assert_eq!(s.jobs.len(), 2);
    assert!(s.jobs[0].fio.text.contains("[seqwrite]"));
    assert!(s.jobs[0].fio.origin.ends_with("fixtures/seqwrite.fio"));
    assert_eq!(s.jobs[0].fio.line_offset, 0);
    let full = std::fs::read_to_string(fixture("full.toml")).unwrap_or_default();
    let randwrite_line = full
        .lines()
        .position(|l| l == "[randwrite]")
        .map_or(0, |i| i + 1);
    assert_eq!(s.jobs[1].fio.line_offset as usize + 1, randwrite_line);
    assert!(s.jobs[1].fio.text.starts_with("[randwrite]\n"));
    assert_eq!(s.jobs[1].start_ns, 1_000_000_000);
    assert_eq!(s.jobs_for("before").count(), 1);
    assert_eq!(s.jobs_for("after").count(), 2);
    // Actors.
    let churn = &s.actors[0];
    assert_eq!(
        (churn.repeat, churn.instances, churn.cgroup.as_deref()),
        (Repeat::Forever, 4, Some("good"))
    );
    assert_eq!(
        churn.steps[2].op,
        StepOp::Write {
            file: "/mnt/data/churn{instance}".into(),
            size: 1 << 20,
            bs: 4096,
            fsync: true,
            trunc: false
        }
    );
    assert_eq!(churn.steps[4].op, StepOp::Sleep { ns: 10_000_000 });
    let um = &s.actors[1];
    assert_eq!(um.repeat, Repeat::Count(10));
    let umount = &um.steps[5];
    assert_eq!(
        umount.op,
        StepOp::Umount {
            filesystem: "scratch".into(),
            lazy: true
        }
    );
    assert!(umount.exec);
    assert_eq!(umount.record.as_deref(), Some("umount.elapsed"));
    assert_eq!(
        um.steps[7].op,
        StepOp::Exec {
            cost_ns: Some(2_000_000)
        }
    );
    assert_eq!(um.steps[8].end_run_after_ns, Some(9_000_000_000));
    assert_eq!(s.variant_names(), vec!["before", "after"]);
    assert_eq!(
        (s.measure.sample_interval_ns, s.measure.warmup_ns),
        (50_000_000, 1_000_000_000)
    );
    assert!(
        s.measure.keeps("umount.elapsed")
            && s.measure.keeps("dirty_pages")
            && !s.measure.keeps("sync.elapsed")
    );
    assert_eq!(s.sweep_points(), vec![Some(0), Some(1), Some(2), Some(3)]);
}

#[test]
fn variants_resolve_with_overrides_and_sweep() {
    let s = scenario::load(fixture("full.toml")).unwrap_or_else(|e| panic!("{e}"));
    let before = s.variant("before").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(before.machine.policies, Policies::default());
    assert_eq!(before.machine, s.machine);
    let after = s.variant("after").unwrap_or_else(|e| panic!("{e}"));
    let p = after.machine.policies;
    assert_eq!(p.umount_drain, UmountDrain::PerSb);
    assert_eq!(p.csum_lookup, CsumLookup::CommitRootForOld);
    assert_eq!(p.detach_release, DetachRelease::Deferred);
    assert_eq!(p.wb_ctx_assign, WbCtxAssign::FsHook);
    assert_eq!(p.nr_wb_ctx, Some(4));
    assert_eq!(p.dontcache_flush, DontcacheFlush::Kick);
    assert_eq!(after.machine.cpus, 16);
    assert_eq!(after.machine.memory_bytes, 4 << 30);
    // Writing dirty_bytes zeroes dirty_ratio, as the kernel's handler does.
    assert_eq!(
        (
            after.machine.dirty.dirty_bytes,
            after.machine.dirty.dirty_ratio
        ),
        (256 << 20, 0)
    );
    // The sweep sets nr_wb_ctx in every variant and labels the point.
    let pt = s
        .resolve("after", Some(3))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(pt.machine.policies.nr_wb_ctx, Some(8));
    assert_eq!(pt.label, "after[nr_wb_ctx=8]");
    let pt = s
        .resolve("before", Some(0))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (pt.machine.policies.nr_wb_ctx, pt.label.as_str()),
        (Some(1), "before[nr_wb_ctx=1]")
    );
    let e = s.variant("nope").map(|_| ()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::UnknownReference);
    assert!(
        e.to_string()
            .contains("no variant 'nope' (variants: before, after)"),
        "{e}"
    );
}

#[test]
fn no_variants_means_one_default() {
    let s = scenario::parse_str(BASE, "x.toml").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.variant_names(), vec!["default"]);
    let v = s.variant("default").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v.machine.policies, Policies::default());
    assert_eq!(
        (
            v.machine.dirty.dirty_ratio,
            v.machine.dirty.dirty_background_ratio,
            v.machine.dirty.dirty_expire_centisecs
        ),
        (20, 10, 3000)
    );
    assert_eq!(s.sweep_points(), vec![None]);
}

#[test]
fn unknown_key_names_line_key_and_allowed_keys() {
    let extra = "\n[[device]]\nname = \"d\"\nprofile = \"nvme-dc\"\n\n[[filesystem]]\nname = \"f\"\ntype = \"xfs\"\n    devcie = \"d\"\n";
    let e = err(extra);
    check(
        &e,
        ErrorKind::UnknownKey,
        line_of(extra, "devcie"),
        "devcie",
        &[
            "key 'devcie' unknown in [[filesystem]]",
            "expected one of: name, type, device, mountpoint, options, mounted",
        ],
    );
    assert_eq!(e.col, Some(5));
    // In a checked-by-hand table too.
    let extra = "\n[sysctl]\ndirty_ratoi = 5\n";
    check(
        &err(extra),
        ErrorKind::UnknownKey,
        line_of(extra, "dirty_ratoi"),
        "dirty_ratoi",
        &["in [sysctl]", "dirty_background_ratio"],
    );
    // And in a step.
    let extra = "\n[[filesystem]]\nname = \"m\"\ntype = \"tmpfs\"\n[[actor]]\nname = \"a\"\nsteps = [\n  { op = \"umount\", filesystem = \"m\", lazzy = true },\n]\n";
    check(
        &err(extra),
        ErrorKind::UnknownKey,
        line_of(extra, "lazzy"),
        "lazzy",
        &["step 1 (op = \"umount\")", "lazy"],
    );
}

#[test]
fn bad_duration_names_line_and_key() {
    let text = "[scenario]\nname = \"t\"\nduration = \"10 sec\"\n";
    let e = scenario::parse_str(text, "scenarios/x.toml")
        .map(|_| ())
        .unwrap_err();
    check(
        &e,
        ErrorKind::InvalidValue,
        3,
        "duration",
        &[
            "invalid 'duration' in [scenario]",
            "\"10 sec\"",
            "e.g. \"10s\"",
        ],
    );
    assert_eq!(e.col, Some(12));
}

#[test]
fn bad_size_names_line_and_key() {
    let extra = "\n[[cgroup]]\nname = \"c\"\nmemory_high = \"1 gig\"\n";
    check(
        &err(extra),
        ErrorKind::InvalidValue,
        line_of(extra, "memory_high"),
        "memory_high",
        &["invalid 'memory_high' in [[cgroup]] 'c'", "\"1 gig\""],
    );
    let text = BASE.replace("\"1g\"", "\"1q\"");
    let e = scenario::parse_str(&text, "scenarios/x.toml")
        .map(|_| ())
        .unwrap_err();
    check(
        &e,
        ErrorKind::InvalidValue,
        7,
        "memory",
        &["unknown unit 'q'"],
    );
}

#[test]
fn dangling_device_reference() {
    let extra = "\n[[device]]\nname = \"nvme0\"\nprofile = \"nvme-dc\"\n[[filesystem]]\nname = \"f\"\ntype = \"ext4\"\ndevice = \"nvme1\"\n";
    check(
        &err(extra),
        ErrorKind::UnknownReference,
        line_of(extra, "device = \"nvme1\""),
        "device",
        &["names device 'nvme1', but no [[device]] has that name (known: nvme0)"],
    );
}

#[test]
fn other_dangling_references() {
    let fs = "\n[[filesystem]]\nname = \"m\"\ntype = \"tmpfs\"\n";
    let extra = format!(
        "{fs}[[job]]\nfio = \"[j]\\nrw=write\\n\"\nfilesystem = \"m\"\ncgroup = \"nope\"\n"
    );
    check(
        &err(&extra),
        ErrorKind::UnknownReference,
        line_of(&extra, "cgroup = \"nope\""),
        "cgroup",
        &["no [[cgroup]] has that name"],
    );
    let extra = format!(
        "{fs}[[actor]]\nname = \"a\"\nsteps = [{{ op = \"mount\", filesystem = \"n\" }}]\n"
    );
    check(
        &err(&extra),
        ErrorKind::UnknownReference,
        line_of(&extra, "steps"),
        "filesystem",
        &["names filesystem 'n'", "known: m"],
    );
    let extra = format!(
        "{fs}[[actor]]\nname = \"a\"\nsteps = [{{ op = \"cgroup_rmdir\", name = \"x\" }}]\n"
    );
    check(
        &err(&extra),
        ErrorKind::UnknownReference,
        line_of(&extra, "steps"),
        "name",
        &["cgroup 'x'"],
    );
    let extra = format!("{fs}[[actor]]\nname = \"a\"\nsteps = [{{ op = \"write\", file = \"/tmp/f\", size = \"1m\", bs = \"4k\" }}]\n");
    check(
        &err(&extra),
        ErrorKind::UnknownReference,
        line_of(&extra, "steps"),
        "file",
        &["not an absolute path under a filesystem's mountpoint (known: /mnt/m)"],
    );
    let extra = "\n[[job]]\nfio = \"\"\nonly_variants = [\"x\"]\n";
    check(
        &err(extra),
        ErrorKind::UnknownReference,
        line_of(extra, "only_variants"),
        "only_variants",
        &["variant 'x'", "variants: default"],
    );
}

#[test]
fn cgroup_cpus_out_of_range() {
    let extra = "\n[[cgroup]]\nname = \"bad\"\ncpus = [0, 1, 4]\n";
    check(
        &err(extra),
        ErrorKind::OutOfRange,
        line_of(extra, "cpus = ["),
        "cpus",
        &["CPU 4 is out of range: machine.cpus = 4 (CPUs 0..=3)"],
    );
    // A variant that shrinks the machine breaks a cgroup that fitted.
    let extra = "\n[[cgroup]]\nname = \"bad\"\ncpus = [0, 3]\n[variants.small]\nmachine.cpus = 2\n";
    let e = err(extra);
    assert_eq!(
        (e.kind, e.line),
        (ErrorKind::OutOfRange, line_of(extra, "[[cgroup]]")),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("CPU 3 is out of range in variant 'small'"),
        "{e}"
    );
}

#[test]
fn unknown_policy_value_lists_allowed() {
    let extra = "\n[variants.after]\numount_drain = \"per-sb\"\n";
    check(&err(extra), ErrorKind::UnknownValue, line_of(extra, "umount_drain"), "umount_drain", &["invalid 'umount_drain' in [variants.after]: 'per-sb' is not allowed (expected one of: global, per_sb, none)"]);
    let extra = "\n[variants.v]\nwb_ctx_assign = 3\n";
    check(
        &err(extra),
        ErrorKind::InvalidValue,
        line_of(extra, "wb_ctx_assign"),
        "wb_ctx_assign",
        &["ino_mod, fs_hook, effort"],
    );
    let extra = "\n[variants.v]\nmachine.cpux = 3\n";
    check(
        &err(extra),
        ErrorKind::UnknownKey,
        line_of(extra, "machine.cpux"),
        "machine.cpux",
        &[
            "key 'cpux' unknown in [variants.v] machine overrides",
            "process_start",
        ],
    );
    let extra = "\n[variants.v]\npolicy = 3\n";
    check(
        &err(extra),
        ErrorKind::UnknownKey,
        line_of(extra, "policy"),
        "policy",
        &[
            "key 'policy' unknown in [variants.v]",
            "dontcache_flush, machine, sysctl",
        ],
    );
}

#[test]
fn unknown_step_op_lists_ops() {
    let extra =
        "\n[[actor]]\nname = \"a\"\nsteps = [\n  { op = \"sync\" },\n  { op = \"mout\" },\n]\n";
    check(&err(extra), ErrorKind::UnknownValue, line_of(extra, "mout"), "op", &["unknown step op 'mout' in [[actor]] 'a' step 2 (expected one of: mount, umount, sync, syncfs"]);
}

#[test]
fn other_value_errors() {
    let extra = "\n[[device]]\nname = \"d\"\nprofile = \"sata\"\n";
    check(
        &err(extra),
        ErrorKind::UnknownValue,
        line_of(extra, "\"sata\""),
        "profile",
        &["nvme-dc, qemu-nvme, loop-virtio, loop-virtio-sparse, pmem"],
    );
    let extra = "\n[[device]]\nname = \"d\"\nprofile = \"pmem\"\n[[filesystem]]\nname = \"f\"\ntype = \"zfs\"\ndevice = \"d\"\n";
    check(
        &err(extra),
        ErrorKind::UnknownValue,
        line_of(extra, "zfs"),
        "type",
        &["tmpfs, ext4, xfs, btrfs"],
    );
    let extra = "\n[[device]]\nname = \"d\"\nprofile = \"pmem\"\n[[filesystem]]\nname = \"f\"\ntype = \"xfs\"\n";
    check(
        &err(extra),
        ErrorKind::MissingKey,
        line_of(extra, "[[filesystem]]"),
        "device",
        &["needs a [[device]]"],
    );
    let extra = "\n[[device]]\nname = \"d\"\nprofile = \"pmem\"\n[[filesystem]]\nname = \"f\"\ntype = \"xfs\"\ndevice = \"d\"\noptions = { agcnt = 4 }\n";
    check(
        &err(extra),
        ErrorKind::UnknownKey,
        line_of(extra, "agcnt"),
        "agcnt",
        &["option 'agcnt' unknown for xfs", "agcount"],
    );
    let extra = "\n[sysctl]\ndirty_ratio = 10\ndirty_bytes = \"100m\"\n";
    check(
        &err(extra),
        ErrorKind::Conflict,
        line_of(extra, "dirty_bytes"),
        "dirty_bytes",
        &["set only one"],
    );
    let extra = "\n[sysctl]\ndirty_ratio = 101\n";
    check(
        &err(extra),
        ErrorKind::OutOfRange,
        line_of(extra, "101"),
        "dirty_ratio",
        &["0..=100"],
    );
    let extra = "\n[sysctl]\nwatermark_scale_factor = 0\n";
    check(
        &err(extra),
        ErrorKind::OutOfRange,
        line_of(extra, "watermark_scale_factor"),
        "watermark_scale_factor",
        &["3000"],
    );
    let extra = "\n[[actor]]\nname = \"a\"\nrepeat = \"always\"\nsteps = [{ op = \"sync\" }]\n";
    check(
        &err(extra),
        ErrorKind::InvalidValue,
        line_of(extra, "always"),
        "repeat",
        &["\"forever\""],
    );
    let extra = "\n[sweep]\nkey = \"nr_wb_cts\"\nvalues = [1]\n";
    check(
        &err(extra),
        ErrorKind::UnknownKey,
        line_of(extra, "nr_wb_cts"),
        "key",
        &["nr_wb_ctx"],
    );
    let extra = "\n[sweep]\nkey = \"nr_wb_ctx\"\nvalues = [1, 0]\n";
    check(
        &err(extra),
        ErrorKind::OutOfRange,
        line_of(extra, "values"),
        "values",
        &["[sweep]", "1..=1024"],
    );
    let e = scenario::parse_str(
        "[scenario]\nname = \"t\"\nduration = \"1s\"\n",
        "scenarios/x.toml",
    )
    .map(|_| ())
    .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("scenarios/x.toml:1:1: missing section [machine]"),
        "{e}"
    );
    let e = scenario::parse_str("[scenario\n", "scenarios/x.toml")
        .map(|_| ())
        .unwrap_err();
    assert_eq!((e.kind, e.line), (ErrorKind::Syntax, 1), "{e}");
    let text = format!("{BASE}\n[[device]]\nname = \"d\"\nprofile = \"pmem\"\n[[device]]\nname = \"d\"\nprofile = \"pmem\"\n");
    let e = scenario::parse_str(&text, "scenarios/x.toml")
        .map(|_| ())
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("[[device]] name 'd' is already used at line 10"),
        "{e}"
    );
    let e = scenario::load("/nonexistent/x.toml")
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Io);
}

fn sample_results(wall: f64) -> Results {
    let s = scenario::load(fixture("full.toml")).unwrap_or_else(|e| panic!("{e}"));
    let v = s
        .resolve("after", Some(2))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut m = Metrics::new();
    for i in 0..500u64 {
        m.record_as(
            "umount.elapsed",
            "ns",
            "ms",
            3_000_000 + i * 7_919 % 1_000_000,
        );
        m.sample(
            "dirty_pages",
            "pages",
            i * 50_000_000,
            (i * 37 % 1000) as f64,
        );
        m.record("sync.elapsed", "ns", i); // not kept: [measure] metrics
    }
    m.set("umount.ratio", "", 1.0 / 3.0);
    m.set("umount.nan", "", f64::NAN);
    let jobs = vec![serde_json::json!({"jobname": "seqwrite", "write": {"bw": 1234}})];
    let host = Host {
        wall_time_s: wall,
        date: format!("2025-01-0{}", 1 + wall as u32 % 9),
        version: "0.1.0".into(),
    };
    Results::new(
        &s,
        &v,
        42,
        &m,
        jobs,
        Invariants {
            checked: 10,
            violations: vec![],
        },
        host,
    )
}

#[test]
fn results_are_byte_identical_outside_host() {
    let a = sample_results(1.5);
    let b = sample_results(7.25);
    assert_ne!(a.to_json_pretty(), b.to_json_pretty()); // host differs
    assert_eq!(a.comparable_json(), b.comparable_json());
    assert!(a.same_outcome(&b));
    let json = a.to_json_pretty();
    for key in [
        "\"schema\": 1",
        "\"scenario\": \"full\"",
        "\"variant\": \"after[nr_wb_ctx=4]\"",
        "\"seed\": 42",
        "\"p99.9\"",
        "\"umount_drain\": \"per_sb\"",
        "\"wall_time_s\": 1.5",
    ] {
        assert!(json.contains(key), "{key} not in {json}");
    }
    assert!(!json.contains("sync.elapsed"));
    assert!(json.contains("\"umount.nan\": {\n      \"unit\": \"\",\n      \"value\": null"));
    // Round trip through a file.
    let dir = std::env::temp_dir().join(format!("wbsim-results-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("r.json");
    a.save(&path).unwrap_or_else(|e| panic!("{e}"));
    let back = Results::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back.to_json_pretty(), json);
    assert_eq!(back.stat("umount.elapsed", "count"), Some(500.0));
    assert!(
        back.stat("umount.elapsed", "p50")
            .is_some_and(|p| (3.0..4.0).contains(&p)),
        "{:?}",
        back.metrics.get("umount.elapsed")
    );
    assert!(
        matches!(back.metrics.get("dirty_pages"), Some(MetricSummary::Hist(h)) if h.unit == "pages")
    );
    assert_eq!(back.series["dirty_pages"].len(), 500);
    std::fs::write(&path, json.replace("\"schema\": 1", "\"schema\": 2")).unwrap_or_default();
    let e = Results::load(&path).map(|_| ()).unwrap_err();
    assert!(e.to_string().contains("schema 2 is not supported"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn preempt_rcu_reaches_the_rcu_flavour() {
    let on = scenario::parse_str(BASE, "x.toml").unwrap_or_else(|e| panic!("{e}"));
    assert!(
        on.machine.rcu_params().preempt_rcu,
        "default: preemptible RCU"
    );
    let text = BASE.replace("[machine]\n", "[machine]\npreempt_rcu = false\n");
    let off = scenario::parse_str(&text, "x.toml").unwrap_or_else(|e| panic!("{e}"));
    assert!(!off.machine.rcu_params().preempt_rcu);
    // Not a boolean: the error names the key.
    let e = err("preempt_rcu = 1\n");
    assert_eq!(e.key.as_deref(), Some("preempt_rcu"), "{e}");
}

#[test]
fn completion_cpu_must_name_a_cpu_of_the_machine() {
    let dev = "\n[[device]]\nname = \"d\"\nprofile = \"loop-virtio\"\ncompletion_cpu = 3\n";
    let ok =
        scenario::parse_str(&format!("{BASE}{dev}"), "x.toml").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ok.devices[0].params.completion_cpu, Some(3));
    let bad = dev.replace("completion_cpu = 3", "completion_cpu = 4");
    let e = err(&bad);
    check(
        &e,
        ErrorKind::OutOfRange,
        line_of(&bad, "completion_cpu = 4"),
        "completion_cpu",
        &["CPUs 0-3"],
    );
}

#[test]
fn o_trunc_on_a_filesystem_without_a_modelled_truncate_names_line_and_key() {
    let fs = "\n[[device]]\nname = \"d0\"\nprofile = \"nvme-dc\"\n\n[[device]]\nname = \"d1\"\nprofile = \"nvme-dc\"\n\n[[filesystem]]\nname = \"x\"\ntype = \"xfs\"\ndevice = \"d0\"\nmountpoint = \"/mnt/x\"\nmounted = true\n\n[[filesystem]]\nname = \"b\"\ntype = \"btrfs\"\ndevice = \"d1\"\nmountpoint = \"/mnt/x/b\"\nmounted = true\n";
    let step = |path: &str| {
        format!("{fs}\n[[actor]]\nname = \"dd\"\nsteps = [\n  {{ op = \"write\", file = \"{path}\", size = \"8k\", bs = \"4k\", trunc = true }},\n]\n")
    };
    let extra = step("/mnt/x/f");
    check(
        &err(&extra),
        ErrorKind::InvalidValue,
        line_of(&extra, "trunc = true"),
        "trunc",
        &["'/mnt/x/f' is on filesystem 'x' (xfs)", "btrfs only"],
    );
    // A btrfs mounted under the xfs: its files may be truncated.
    let ok = format!("{BASE}{}", step("/mnt/x/b/f"));
    scenario::parse_str(&ok, "scenarios/x.toml").unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn cpu_cost_percent_scales_every_cpu_request_and_is_range_checked() {
    let text = BASE.replace("[machine]\n", "[machine]\ncpu_cost_percent = 1000\n");
    let s = scenario::parse_str(&text, "x.toml").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.machine.cpu_cost_percent, 1000);
    // The default is the stated cost, and is not written to results.
    let d = scenario::parse_str(BASE, "x.toml").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(d.machine.cpu_cost_percent, 100);
    let json = serde_json::to_string(&d.machine).unwrap_or_default();
    assert!(!json.contains("cpu_cost_percent"), "{json}");
    // Out of range: the error names the line (the key's, right under
    // [machine]) and the key.
    for bad in ["cpu_cost_percent = 0\n", "cpu_cost_percent = 10001\n"] {
        let text = BASE.replace("[machine]\n", &format!("[machine]\n{bad}"));
        let e = match scenario::parse_str(&text, "scenarios/x.toml") {
            Ok(_) => panic!("expected an error for {bad}"),
            Err(e) => e,
        };
        assert_eq!(e.kind, ErrorKind::OutOfRange, "{e}");
        assert_eq!(e.key.as_deref(), Some("cpu_cost_percent"), "{e}");
        assert_eq!(e.line, 6, "{e}");
    }
}
