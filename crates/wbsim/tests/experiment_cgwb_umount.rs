//! Experiment E1 `cgwb-umount` on the built-in scenario (docs/experiments.md
//! E1), plus a `none` test variant. Checks the direction and rough size of
//! the effect and the teardown invariant.

mod common;
use common::{run_variant, stat};

use wbsim::experiment::runner::{run_one, RunOptions};
use wbsim::experiment::scenario::parse_str;

/// The built-in scenario with the `none` test variant.
fn short_scenario() -> wbsim::experiment::scenario::Scenario {
    let path = format!(
        "{}/../../scenarios/cgwb-umount.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut s = std::fs::read_to_string(&path).unwrap();
    // The whole scenario (under a second in a release build): in a shortened
    // form the churn has not reached its steady switch rate when the idle
    // umounts run.
    s.push_str("\n[variants.none]\numount_drain = \"none\"\n");
    parse_str(&s, "scenarios/cgwb-umount.toml").unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn per_sb_removes_the_cross_superblock_penalty_and_both_keep_the_invariant() {
    let s = short_scenario();
    // run_variant asserts that no invariant was violated.
    let global = run_variant(&s, "global", false);
    let per_sb = run_variant(&s, "per_sb", false);
    let base_g = stat(&global, "umount.b_baseline", "p50");
    let base_p = stat(&per_sb, "umount.b_baseline", "p50");
    let idle_g = stat(&global, "umount.b_idle", "p50");
    let idle_p = stat(&per_sb, "umount.b_idle", "p50");
    // Per-sb: an idle target under pressure is as fast as with no pressure.
    assert!(
        idle_p < 1.1 * base_p,
        "per_sb idle {idle_p} vs baseline {base_p} ms"
    );
    // Global: it waits a grace period and the switch work of other
    // superblocks.
    assert!(
        idle_g > base_g + 5.0,
        "global idle {idle_g} vs baseline {base_g} ms"
    );
    // Killed cgroup wbs do not keep the churn's dirty data: each 1 MiB write
    // is one large folio, the flusher kicked after it writes the whole file
    // before the rmdir, so dirty memory stays below the limit and no
    // churner is throttled.
    for r in [&global, &per_sb] {
        let dirty = stat(r, "dirty_pages", "max");
        let limit = stat(r, "dirty_limit_pages", "max");
        assert!(dirty < limit, "[{}] dirty {dirty} limit {limit}", r.variant);
        let pauses = stat(r, "bdp.pauses", "max");
        assert_eq!(pauses, 0.0, "[{}] balance_dirty_pages pauses", r.variant);
    }
    // Of 8 concurrent umounts only those that meet in-flight switches wait:
    // compare the tails.
    let conc_g = stat(&global, "umount.c_concurrent", "p99");
    let conc_p = stat(&per_sb, "umount.c_concurrent", "p99");
    assert!(
        conc_g > conc_p + 5.0,
        "concurrent: global {conc_g} per_sb {conc_p} ms"
    );
}

#[test]
fn skipping_the_drain_trips_the_teardown_invariant() {
    let s = short_scenario();
    let v = s.variant("none").unwrap();
    let r = run_one(&s, &v, s.seed, &RunOptions::default()).unwrap();
    let v = &r.invariants.violations;
    assert!(
        v.iter().any(|e| e.contains("after its teardown")),
        "no teardown violation without a drain: {v:?}"
    );
}
