//! Experiment E1 `cgwb-umount` on the built-in scenario (docs/experiments.md
//! E1), plus a `none` test variant. Checks the direction and rough size of
//! the effect and the teardown invariant.

mod common;
use common::{run_variant, stat};

use wbsim::experiment::results::Results;
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
    // As a user runs it: `wbsim run` of the scenario's `none` variant
    // exits non-zero and writes each violation as a record.
    let s = short_scenario();
    let dir = std::env::temp_dir().join(format!("wbsim-cgwb-none-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let scenario = dir.join("cgwb-umount-none.toml");
    let text = std::fs::read_to_string(format!(
        "{}/../../scenarios/cgwb-umount.toml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    // The built-in target unmounts right after its last rmdir, before that
    // memcg's offline has queued the switches of its inodes (so with the
    // merged large-folio writeback none is in flight then, and the drain has
    // nothing to wait for). 20 ms later they are in flight: that is when
    // skipping the drain lets a switch touch the torn-down superblock.
    let umount =
        r#"  { op = "umount", filesystem = "tgt", exec = true, record = "umount.elapsed" },"#;
    assert!(text.contains(umount), "the target's umount step moved");
    let text = text.replace(
        umount,
        &format!("  {{ op = \"sleep\", for = \"20ms\" }},\n{umount}"),
    );
    std::fs::write(
        &scenario,
        format!("{text}\n[variants.none]\numount_drain = \"none\"\n"),
    )
    .unwrap();
    let out = dir.join("none.json");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_wbsim"))
        .arg("run")
        .arg(&scenario)
        .args(["--variant", "none", "--out"])
        .arg(&out)
        .output()
        .expect("wbsim run");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(run.status.code(), Some(1), "exit status: {stdout}");
    assert!(stdout.contains("VIOLATION"), "{stdout}");
    let r = Results::load(&out).unwrap_or_else(|e| panic!("{e}"));
    let v = &r.invariants.violations;
    // A structured record: the invariant, when, and the superblock, inode
    // and wb (with its memcg) involved.
    let e = v
        .iter()
        .find(|e| e.invariant == "isw_after_teardown")
        .unwrap_or_else(|| panic!("no teardown violation without a drain: {v:?}"));
    assert!(e.message.contains("after its teardown"), "{e:?}");
    assert!(
        e.time_ns > 0 && e.time_ns <= s.duration_ns,
        "violation time {} outside the run",
        e.time_ns
    );
    assert!(e.objects.superblock.is_some(), "{e:?}");
    assert_eq!(e.objects.inodes.len(), 1, "{e:?}");
    assert!(e.objects.wb.is_some() && e.objects.memcg.is_some(), "{e:?}");
    // The inodes left behind: VFS's "Busy inodes after unmount".
    assert!(
        v.iter().any(|b| b.invariant == "busy_inodes_after_umount"
            && b.objects.superblock_name.as_deref() == Some("/mnt/tgt")
            && !b.objects.inodes.is_empty()),
        "{v:?}"
    );
    // The same fields in the JSON document.
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let rec = json["invariants"]["violations"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["invariant"] == "isw_after_teardown"))
        .expect("record in the JSON");
    assert!(
        rec["time_ns"].is_u64() && rec["objects"]["superblock"].is_u64(),
        "{rec}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The scenario with the (a) target's churn sustained: `rounds` churn rounds
/// per mount instead of 3 (a background loop the script stops, with a stop
/// flag and `wait`, right before umount(8)), `repeat` umounts.
fn sustained_target(rounds: usize, repeat: u32) -> String {
    let path = format!(
        "{}/../../scenarios/cgwb-umount.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap();
    let umount =
        r#"  { op = "umount", filesystem = "tgt", exec = true, record = "umount.elapsed" },"#;
    let head = "name = \"target\"\nstart = \"4s\"\nrepeat = 50\n";
    assert!(
        text.contains(umount) && text.contains(head),
        "the target actor moved"
    );
    let extra: String = (3..rounds)
        .map(|k| {
            format!(
                "  {{ op = \"cgroup_mkdir\", name = \"tgtcg\", exec = true }},\n  \
                 {{ op = \"cgroup_enter\", name = \"tgtcg\" }},\n  \
                 {{ op = \"write\", file = \"/mnt/tgt/f{{round}}-{k}\", size = \"1m\", bs = \"1m\", exec = true }},\n  \
                 {{ op = \"cgroup_rmdir\", name = \"tgtcg\", exec = true }},\n"
            )
        })
        .collect();
    text.replace(umount, &format!("{extra}{umount}")).replace(
        head,
        &format!("name = \"target\"\nstart = \"4s\"\nrepeat = {repeat}\n"),
    )
}

#[test]
fn per_sb_waits_for_its_own_switches_when_the_target_churn_is_sustained() {
    // 12 rounds of churn (8 were enough before the loop-virtio profile was
    // re-measured on 2026-11-28 and got faster) put the target's own
    // switches in flight at umount: memcgs removed more than a grace period earlier are
    // offline and their inodes' switches pinned on the target. per_sb then
    // waits for the switch work in progress on the target's root wb and
    // the run queued behind it (each run's synchronize_rcu starts just
    // after a grace period began, so it takes two); global waits for that
    // and the other superblocks' switch work too.
    let text = sustained_target(12, 10);
    let s = parse_str(&text, "cgwb-umount-sustained.toml").unwrap_or_else(|e| panic!("{e}"));
    let global = run_variant(&s, "global", false);
    let per_sb = run_variant(&s, "per_sb", false);
    let gp = stat(&per_sb, "rcu.gp_mean", "value");
    let drain_p = stat(&per_sb, "cgwb.umount_drain./mnt/tgt", "p50");
    // Grace periods that ended while it waited: at least the one of the
    // run queued behind the one in progress.
    let pinned = stat(&per_sb, "cgwb.umount_drain_sb_in_flight./mnt/tgt", "p50");
    assert!(pinned > 0.0, "no switch of the target pinned at its umount");
    let gps = stat(&per_sb, "cgwb.umount_drain_gps./mnt/tgt", "p50");
    assert!(gps >= 1.0, "per_sb drain saw {gps} grace periods");
    assert!(
        drain_p > gp && drain_p < 6.0 * gp,
        "per_sb drain {drain_p} ms, grace period {gp} ms"
    );
    let a_g = stat(&global, "umount.elapsed", "p50");
    let a_p = stat(&per_sb, "umount.elapsed", "p50");
    assert!(a_g > a_p, "(a) global {a_g} per_sb {a_p} ms");
}
