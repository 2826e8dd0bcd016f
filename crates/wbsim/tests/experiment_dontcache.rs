//! Experiment E5 `dontcache` on short runs of the built-in scenario:
//! direction and rough size of each effect (docs/experiments.md E5).

mod common;
use common::{builtin as scenario, run_variant, stat};

use wbsim::experiment::results::Results;

fn bw(r: &Results, job: &str) -> f64 {
    stat(r, &format!("fio.{job}.write_bw"), "value")
}

/// One test so the two E5 runs are shared by every assertion.
#[test]
fn e5_kick_beats_inline_and_leaves_buffered_and_direct_alone() {
    let s = scenario("dontcache");
    let inline = run_variant(&s, "inline", true);
    let kick = run_variant(&s, "kick", true);

    // Sequential RWF_DONTCACHE: kick gives more throughput and a lower tail.
    let (bi, bk) = (
        bw(&inline, "seq-write-dontcache"),
        bw(&kick, "seq-write-dontcache"),
    );
    assert!(bk > 1.2 * bi, "seq dontcache: inline {bi} MiB/s, kick {bk}");
    // fio's lat (slat + clat): an io_uring write that completes inline in
    // io_uring_enter shows its time in slat, as fio measures it.
    let (li, lk) = (
        stat(&inline, "fio.seq-write-dontcache.lat", "p99.9"),
        stat(&kick, "fio.seq-write-dontcache.lat", "p99.9"),
    );
    assert!(lk < li, "seq dontcache p99.9: inline {li} us, kick {lk}");
    let (ri, rk) = (
        bw(&inline, "rand-write-dontcache"),
        bw(&kick, "rand-write-dontcache"),
    );
    assert!(rk > ri, "rand dontcache: inline {ri} MiB/s, kick {rk}");
    // E5's shape: the flusher kick helps sequential writes more than random
    // ones (random ones convert an unwritten extent per page either way).
    assert!(
        bk / bi > rk / ri,
        "gain seq {:.2}x should exceed gain rand {:.2}x",
        bk / bi,
        rk / ri
    );

    // Buffered and direct do not depend on the switch.
    for job in [
        "seq-write-buffered",
        "rand-write-buffered",
        "seq-write-direct",
        "rand-write-direct",
    ] {
        let (a, b) = (bw(&inline, job), bw(&kick, job));
        assert!(
            (a - b).abs() / a < 0.03,
            "{job}: inline {a} MiB/s, kick {b}"
        );
    }

    // Page cache under RWF_DONTCACHE stays well below buffered's. Since
    // file_peak_cached is the job's own file (not the machine's), the kick
    // variant's random dontcache writer holds ~81 MiB of its file at its
    // peak against ~250 MiB buffered (~44 MiB before XFS writeback paid
    // 1 us per further bio, XFS_BIO_NS, which slows the flusher on random
    // pages): the bound is 2x, not the 20x the machine-wide figure met
    // (open question in the fioguide report).
    for r in [&inline, &kick] {
        for pat in ["seq", "rand"] {
            let dc = stat(
                r,
                &format!("fio.{pat}-write-dontcache.file_peak_cached"),
                "value",
            );
            let buf = stat(
                r,
                &format!("fio.{pat}-write-buffered.file_peak_cached"),
                "value",
            );
            assert!(
                dc * 2.0 < buf,
                "[{}] {pat}: dontcache peak cached {dc} MiB vs buffered {buf}",
                r.variant
            );
        }
    }
}
