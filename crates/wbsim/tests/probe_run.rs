//! `wbsim probe --quick` runs each experiment on the live kernel, writes a
//! results file with the agreed metric names, and leaves nothing behind;
//! it refuses clearly when not root. Skips (with the reason printed) when
//! not root or without loop devices.

mod probe_common;

use std::process::Command;

use probe_common::*;
use wbsim::experiment::results::Results;

fn run_quick(name: &str, experiment: &str) -> Option<Results> {
    if skip(name) {
        return None;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = Scratch::new(name);
    let work = scratch.0.join("probe");
    std::fs::create_dir(&work).expect("mkdir");
    let out_file = scratch.0.join("out.json");
    let child = Command::new(env!("CARGO_BIN_EXE_wbsim"))
        .args(["probe", experiment, "--quick", "--tmpdir"])
        .arg(&work)
        .arg("--out")
        .arg(&out_file)
        .spawn()
        .expect("start wbsim probe");
    let pid = child.id();
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "{name}: wbsim probe {experiment} failed"
    );
    assert_nothing_left(&work, pid);
    let r = Results::load(&out_file).expect("results file loads");
    Some(r)
}

#[test]
fn umount_quick() {
    let Some(r) = run_quick("probe_umount", "umount") else {
        return;
    };
    assert_eq!(r.variant, "live");
    let live = r.live.as_ref().expect("live section");
    assert!(!live.kernel_release.is_empty());
    assert!(live.cpus >= 1 && live.memory_bytes > 0);
    for fs in ["tmpfs", "xfs", "btrfs"] {
        for state in ["clean", "dirty"] {
            for mode in ["umount", "lazy"] {
                for kind in ["call", "cmd"] {
                    let n = format!("umount.{fs}.{state}.{mode}.{kind}");
                    let m = r.metrics.get(&n).unwrap_or_else(|| panic!("no {n}"));
                    assert_eq!(m.unit(), "ms", "{n}");
                    assert!(r.stat(&n, "p50").is_some_and(|v| v > 0.0), "{n}");
                }
            }
        }
    }
    for n in ["umount.busy.lazy.call", "umount.busy.teardown_after_close"] {
        assert!(r.stat(n, "count").is_some_and(|c| c >= 1.0), "{n}");
    }
}

#[test]
fn dontcache_quick() {
    let Some(r) = run_quick("probe_dontcache", "dontcache") else {
        return;
    };
    for fs in ["xfs", "ext4"] {
        for pat in ["seq", "rand", "seq4k"] {
            for (mode, layout) in [
                ("buffered", ""),
                ("dontcache", ""),
                ("buffered", "-falloc"),
                ("dontcache", "-falloc"),
            ] {
                let j = format!("{fs}-{pat}-{mode}{layout}");
                let bw = r.stat(&format!("fio.{j}.write_bw"), "value");
                assert!(bw.is_some_and(|v| v > 0.0), "{j}: write_bw {bw:?}");
                assert!(r.stat(&format!("fio.{j}.clat"), "p99").is_some(), "{j}");
                assert!(
                    r.stat(&format!("fio.{j}.peak_dirty"), "value").is_some(),
                    "{j}"
                );
                assert!(
                    r.stat(&format!("fio.{j}.peak_cached"), "value").is_some(),
                    "{j}"
                );
            }
        }
    }
    // btrfs refuses RWF_DONTCACHE (EOPNOTSUPP = 95) on this project's kernels;
    // if a kernel accepts it, the job has a bandwidth instead.
    for j in ["btrfs-seq-dontcache", "btrfs-seq-dontcache-falloc"] {
        let e = r.stat(&format!("fio.{j}.errno"), "value");
        let bw = r.stat(&format!("fio.{j}.write_bw"), "value");
        assert!(e == Some(95.0) || bw.is_some(), "{j}: {e:?} {bw:?}");
    }
    for j in ["btrfs-seq4k-buffered", "btrfs-rand-buffered-falloc"] {
        let bw = r.stat(&format!("fio.{j}.write_bw"), "value");
        assert!(bw.is_some_and(|v| v > 0.0), "{j}: write_bw {bw:?}");
    }
    // 3 filesystems x 3 patterns x 2 modes x 2 layouts.
    assert_eq!(r.jobs.len(), 36);
    // xfs jobs count the unwritten-extent conversions (when the kernel has
    // the tracepoint: it has had it for many releases); a preallocated
    // file written with RWF_DONTCACHE converts at least once.
    let n = r.stat(
        "fio.xfs-seq4k-dontcache-falloc.trace.xfs_unwritten_convert",
        "value",
    );
    let trace_note = r.live.as_ref().is_some_and(|l| {
        l.notes
            .iter()
            .any(|n| n.contains("no xfs tracepoint counts"))
    });
    assert!(n.is_some_and(|v| v >= 1.0) || trace_note, "{n:?}");
}

#[test]
fn buffered_write_quick() {
    let Some(r) = run_quick("probe_buffered_write", "buffered-write") else {
        return;
    };
    for n in [1, 2, 4, 8] {
        let j = format!("seq-w{n}");
        assert!(
            r.stat(&format!("fio.{j}.write_bw"), "value")
                .is_some_and(|v| v > 0.0),
            "{j}"
        );
        assert!(
            r.series.contains_key(&format!("fio.{j}.dirty_pages")),
            "{j}"
        );
        for ev in [
            "writeback_start",
            "writeback_written",
            "balance_dirty_pages",
            "global_dirty_state",
        ] {
            assert!(
                r.stat(&format!("fio.{j}.trace.{ev}"), "value").is_some(),
                "{j} {ev}"
            );
        }
    }
    let total: f64 = [1, 2, 4, 8]
        .iter()
        .filter_map(|n| r.stat(&format!("fio.seq-w{n}.trace.writeback_written"), "value"))
        .sum();
    assert!(total > 0.0, "no writeback_written events were counted");
}

#[test]
fn wakeup_quick() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        println!("SKIPPED probe_wakeup: needs 2 CPUs, this machine has {cpus}");
        return;
    }
    let Some(r) = run_quick("probe_wakeup", "wakeup") else {
        return;
    };
    let n = |name: &str| r.stat(name, "count").unwrap_or(0.0);
    assert_eq!(n("wakeup.cross_cpu"), 400.0);
    for dir in ["0to1", "1to0"] {
        let name = format!("wakeup.cross_cpu.{dir}");
        assert_eq!(n(&name), 200.0, "{name}");
        assert_eq!(r.metrics[&name].unit(), "us");
    }
    // A cross-CPU wakeup takes at least a microsecond and (p50) far less
    // than the 1 ms gap between rounds, on any machine.
    let p50 = r.stat("wakeup.cross_cpu", "p50").expect("p50");
    assert!(p50 > 1.0 && p50 < 1000.0, "p50 {p50} us");
    // Every round is idle, busy or unclassified (from the sleeper's
    // sched_wakeup/sched_switch events) unless tracefs was unavailable
    // (noted); how many are classified depends on the kernel and the load.
    let untraced = r
        .live
        .as_ref()
        .is_some_and(|l| l.notes.iter().any(|n| n.contains("wakeups not classified")));
    if !untraced {
        let classified = n("wakeup.cross_cpu.idle") + n("wakeup.cross_cpu.busy");
        let unclassified = r
            .stat("wakeup.trace.unclassified", "value")
            .expect("wakeup.trace.unclassified");
        assert_eq!(classified + unclassified, 400.0);
        for dir in ["0to1", "1to0"] {
            let name = format!("wakeup.cross_cpu.{dir}.idle_fraction");
            if let Some(f) = r.stat(&name, "value") {
                assert!((0.0..=1.0).contains(&f), "{name}: {f}");
            }
        }
    }
}

#[test]
fn uring_quick() {
    let Some(r) = run_quick("probe_uring", "uring") else {
        return;
    };
    for fs in ["xfs", "ext4"] {
        for (pat, writes) in [("seq", 32.0), ("rand", 2048.0)] {
            for mode in ["buffered", "dontcache"] {
                for qd in [1, 16] {
                    let j = format!("uring-{fs}-{pat}-{mode}-qd{qd}");
                    let bw = r.stat(&format!("fio.{j}.write_bw"), "value");
                    assert!(bw.is_some_and(|v| v > 0.0), "{j}: {bw:?}");
                    let clat = format!("fio.{j}.clat");
                    assert_eq!(r.stat(&clat, "count"), Some(writes), "{j}");
                    let p = |k: &str| r.stat(&clat, k).unwrap_or(f64::NAN);
                    assert!(
                        p("p50") <= p("p99")
                            && p("p99") <= p("p99.9")
                            && p("p99.9") <= p("max") * 1.001,
                        "{j}: p50 {} p99 {} p99.9 {} max {}",
                        p("p50"),
                        p("p99"),
                        p("p99.9"),
                        p("max")
                    );
                    assert_eq!(r.stat(&format!("fio.{j}.end_fsync"), "count"), Some(1.0));
                }
            }
        }
    }
    let live = r.live.as_ref().unwrap();
    assert_eq!(live.rounds.len(), 1, "--quick runs one round");
}

#[test]
fn pressure_quick() {
    let before = loop_bdi_settings();
    let Some(r) = run_quick("probe_pressure", "pressure") else {
        return;
    };
    for n in [1usize, 4, 16] {
        let j = format!("over-mem-w{n}");
        // 64 MiB in all, 1 MiB writes, one fsync per writer.
        assert_eq!(r.stat(&format!("fio.{j}.clat"), "count"), Some(64.0), "{j}");
        assert_eq!(
            r.stat(&format!("fio.{j}.end_fsync"), "count"),
            Some(n as f64),
            "{j}"
        );
        assert!(
            r.series.contains_key(&format!("fio.{j}.dirty_pages")),
            "{j}"
        );
    }
    // The global-limit job needs GiBs: left out of --quick, and said so.
    assert!(r.stat("fio.over-dirty-w1.write_bw", "value").is_none());
    let live = r.live.as_ref().unwrap();
    assert!(live.settings["pressure.over_dirty_bytes"].contains("--quick"));
    // The bdi cap was set on the probe's own device only, and restored.
    let after: Vec<_> = loop_bdi_settings()
        .into_iter()
        .filter(|x| before.iter().any(|b| b.0 == x.0))
        .collect();
    let before: Vec<_> = before
        .into_iter()
        .filter(|x| after.iter().any(|a| a.0 == x.0))
        .collect();
    assert_eq!(before, after, "loop bdi settings changed");
}

/// `--rounds 2` with `--quick`: two rounds recorded with their machine
/// conditions, pooled metrics, and a spread over both rounds.
#[test]
fn rounds_give_a_spread() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 || skip("probe_rounds") {
        println!("SKIPPED probe_rounds");
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = Scratch::new("probe_rounds");
    let work = scratch.0.join("probe");
    std::fs::create_dir(&work).expect("mkdir");
    let out_file = scratch.0.join("out.json");
    let child = Command::new(env!("CARGO_BIN_EXE_wbsim"))
        .args(["probe", "wakeup", "--quick", "--rounds", "2", "--tmpdir"])
        .arg(&work)
        .arg("--out")
        .arg(&out_file)
        .spawn()
        .expect("start wbsim probe");
    let pid = child.id();
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success());
    assert_nothing_left(&work, pid);
    let r = Results::load(&out_file).expect("results");
    let live = r.live.as_ref().unwrap();
    assert_eq!(live.rounds.len(), 2);
    assert_eq!(
        live.rounds.iter().map(|c| c.round).collect::<Vec<_>>(),
        [1, 2]
    );
    assert!(live.rounds.iter().all(|c| !c.kernel_release.is_empty()));
    // Pooled: both rounds' 400 wakeups.
    assert_eq!(r.stat("wakeup.cross_cpu", "count"), Some(800.0));
    let s = &live.spread["wakeup.cross_cpu"];
    assert_eq!(s.rounds, 2);
    assert!(s.mean.min <= s.mean.median && s.mean.median <= s.mean.max);
    let p99 = s.p99.expect("a histogram's p99 spread");
    assert!(p99.min <= p99.max);
    let mean = r.stat("wakeup.cross_cpu", "mean").unwrap();
    assert!(
        mean >= s.mean.min * 0.999 && mean <= s.mean.max * 1.001,
        "pooled mean {mean} outside the rounds' means {s:?}"
    );
}

#[test]
fn refuses_without_root() {
    // Run the binary as nobody (needs root to switch, and setpriv).
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        let out = Command::new(env!("CARGO_BIN_EXE_wbsim"))
            .args(["probe", "umount"])
            .output()
            .expect("run");
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("root"));
        return;
    }
    let Ok(out) = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_wbsim"))
        .args(["probe", "umount"])
        .output()
    else {
        println!("SKIPPED refuses_without_root: setpriv not available");
        return;
    };
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("setpriv:") {
        println!("SKIPPED refuses_without_root: setpriv failed: {err}");
        return;
    }
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("must run as root"), "{err}");
}

#[test]
fn bad_arguments_fail_cleanly() {
    let out = Command::new(env!("CARGO_BIN_EXE_wbsim"))
        .args(["probe", "nosuch"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("umount"));
    let out = Command::new(env!("CARGO_BIN_EXE_wbsim"))
        .args(["probe", "umount", "--repeat", "0"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn parallel_write_quick() {
    let before = loop_bdi_settings();
    let Some(r) = run_quick("probe_parallel_write", "parallel-write") else {
        return;
    };
    // Eight writers, jobs named as the model's E4 jobs, 8 MiB of 4 KiB
    // writes each, one fsync each.
    for i in 0..8 {
        let j = format!("w{i}");
        assert_eq!(
            r.stat(&format!("fio.{j}.clat"), "count"),
            Some(2048.0),
            "{j}"
        );
        assert!(r.stat(&format!("fio.{j}.write_bw"), "value").unwrap() > 0.0);
    }
    assert!(r.stat("write.bw", "value").unwrap() > 0.0);
    let live = r.live.as_ref().unwrap();
    assert!(live.settings.contains_key("parallel_write.agcount"));
    // The bdi cap was on the probe's own device only, and restored.
    let after: Vec<_> = loop_bdi_settings()
        .into_iter()
        .filter(|x| before.iter().any(|b| b.0 == x.0))
        .collect();
    let before: Vec<_> = before
        .into_iter()
        .filter(|x| after.iter().any(|a| a.0 == x.0))
        .collect();
    assert_eq!(before, after, "loop bdi settings changed");
}
