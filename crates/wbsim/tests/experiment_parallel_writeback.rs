//! Experiment E4 `parallel-writeback` on short runs of the built-in
//! scenario (docs/experiments.md E4): throughput rises with the number of
//! writeback contexts up to about the AG count; with the XFS hook only
//! agcount contexts do work once nr_wb_ctx >= agcount; every AG's AGF lock
//! is reported, and AGF waits fall when each AG has its own flusher.

mod common;
use common::{builtin, run_resolved, stat};

use wbsim::experiment::results::Results;
use wbsim::experiment::scenario::Scenario;

/// AGs of the scenario's filesystem (mkfs.xfs default, model/fs/xfs/ag.rs).
const AGCOUNT: usize = 4;

/// Runs `variant` at `nr_wb_ctx` (the sweep's values are 1..8) in the
/// `--quick` form and checks the invariants held.
fn run(s: &Scenario, variant: &str, nr_wb_ctx: usize) -> Results {
    let v = s
        .resolve(variant, Some(nr_wb_ctx - 1))
        .unwrap_or_else(|e| panic!("{e}"));
    run_resolved(s, &v, true)
}

/// The writeback rate: what the device wrote, MiB/s.
fn bw(r: &Results) -> f64 {
    stat(r, "device.nvme0n1.write_bw", "value")
}

/// Statistic `what` (`wait_total`, ms; `contentions`) of the AGF locks,
/// summed over every AG.
fn agf_sum(r: &Results, what: &str) -> f64 {
    (0..AGCOUNT)
        .map(|a| stat(r, &format!("lock.xfs_agf:ag{a}.write.{what}"), "value"))
        .sum()
}

/// AGF acquisitions over every AG.
fn agf_acquisitions(r: &Results) -> f64 {
    (0..AGCOUNT)
        .map(|a| {
            r.stat(&format!("lock.xfs_agf:ag{a}.write.acquisitions"), "value")
                .unwrap_or(0.0)
        })
        .sum()
}

#[test]
fn e4_throughput_scales_with_contexts_and_the_ag_hook_uses_agcount_contexts() {
    let s = builtin("parallel-writeback");
    let ino1 = run(&s, "ino_mod", 1);
    let hook1 = run(&s, "fs_hook", 1);
    let hook4 = run(&s, "fs_hook", 4);
    let hook8 = run(&s, "fs_hook", 8);

    // Writeback allocates: every run takes AGF locks.
    for r in [&ino1, &hook4, &hook8] {
        assert!(
            agf_acquisitions(r) > 100.0,
            "[{}] AGF acquisitions",
            r.variant
        );
    }
    // One context: the policies cannot differ.
    assert_eq!(bw(&ino1), bw(&hook1), "nr_wb_ctx=1 is policy-independent");

    // Throughput rises from one context to one per AG.
    let (b1, b4) = (bw(&hook1), bw(&hook4));
    assert!(b4 > 1.5 * b1, "fs_hook: 1 ctx {b1} MiB/s, 4 ctx {b4} MiB/s");
    // ... and not much beyond the AG count with the hook: only agcount
    // contexts have inodes.
    let b8 = bw(&hook8);
    assert!(
        b8 < 1.2 * b4,
        "fs_hook: 4 ctx {b4} MiB/s, 8 ctx {b8} MiB/s (only 4 contexts work)"
    );

    // Contexts that did work: all with ino_mod at 1, agcount with the hook.
    let active = |r: &Results| stat(r, "wb.data.ctx_active", "value");
    assert_eq!(active(&ino1), 1.0);
    assert_eq!(active(&hook4), AGCOUNT as f64, "fs_hook at 4 contexts");
    assert_eq!(active(&hook8), AGCOUNT as f64, "fs_hook at 8 contexts");
    for c in 0..8 {
        let pages = stat(&hook8, &format!("wb.data.ctx{c}.pages_written"), "value");
        let cpu = stat(&hook8, &format!("wb.data.ctx{c}.flusher_cpu"), "value");
        assert_eq!(pages > 0.0, c < AGCOUNT, "fs_hook ctx{c}: {pages} pages");
        if c < AGCOUNT {
            assert!(cpu > 0.0, "fs_hook ctx{c}: {cpu} ms of flusher CPU");
        }
    }

    // Every AG's AGF lock is taken and reported per AG (lock_stat classes
    // xfs_agf:agN). AGF waits are checked at six contexts below.
    for a in 0..AGCOUNT {
        let n = stat(
            &hook4,
            &format!("lock.xfs_agf:ag{a}.write.acquisitions"),
            "value",
        );
        assert!(n > 0.0, "fs_hook at 4 contexts: AG {a} AGF never taken");
    }
}

/// AGF lock wait falls when each AG has its own flusher. At six contexts
/// `i_ino % 6` gives six contexts files (the directories d0..d7 are made
/// before fio creates its files, so each AG holds two directories, then two
/// files: inodes 131..134 in AG 0, 128..131 in the others), and splits the
/// two files of every AG over two of them. Six flushers allocate in four
/// AGs: the trylock pass finds every AGF taken often enough that some
/// flushers queue on one. The hook maps each AG to one context (four of the
/// six work), so no two flushers share an AGF. A 1.5 s run (past the first
/// fill of the dirty limit, writeback allocating) shows it.
#[test]
fn e4_agf_wait_falls_when_each_ag_has_its_own_flusher() {
    let mut s = builtin("parallel-writeback");
    s.quick_duration_ns = 1_500_000_000;
    let ino6 = run(&s, "ino_mod", 6);
    let hook6 = run(&s, "fs_hook", 6);
    let (wi, wh) = (agf_sum(&ino6, "wait_total"), agf_sum(&hook6, "wait_total"));
    assert_eq!(stat(&ino6, "wb.data.ctx_active", "value"), 6.0);
    assert!(
        agf_sum(&ino6, "contentions") > 100.0,
        "ino_mod at 6 contexts: AGF contentions {}",
        agf_sum(&ino6, "contentions")
    );
    assert!(wi > 1.0, "ino_mod at 6 contexts: AGF wait {wi} ms");
    assert!(
        wh < 0.1 * wi,
        "AGF wait: fs_hook {wh} ms, ino_mod {wi} ms at 6 contexts"
    );
    assert_eq!(stat(&hook6, "wb.data.ctx_active", "value"), AGCOUNT as f64);
}
