//! Experiment E2 `btrfs-csum-commit-root` on short runs of a scaled-down
//! form of the built-in scenario (16 readers in a memory.high-limited
//! cgroup, 4 dd writers over small files, a sync loop, commit=1): what the
//! `csum_lookup` switch changes on the read path, that overwrites free
//! extents whose csums the commit deletes, and that no write is lost.
//! docs/experiments.md E2 says what the full run shows.

mod common;
use common::{run_variant, stat};

use wbsim::experiment::results::Results;
use wbsim::experiment::scenario::{parse_str, Scenario};

/// The built-in scenario's shape, scaled down for a debug-build test.
fn scaled() -> Scenario {
    let mut text = String::from(
        r#"
[scenario]
name = "e2-scaled"
duration = "3s"
seed = 1

[machine]
cpus = 4
memory = "2g"
hz = 1000
btrfs_btree_kernel_file = false

[[device]]
name = "nvme0n1"
profile = "nvme-dc"

[[filesystem]]
name = "data"
type = "btrfs"
device = "nvme0n1"
mountpoint = "/mnt/data"
mounted = true
options = { commit = 1, subvolumes = 16, preload_files = 1, preload_size = "4m" }

[[cgroup]]
name = "bad"
memory_high = "16m"
cpus = [0, 1, 2]

[[cgroup]]
name = "good"
cpus = [3]

[[actor]]
name = "reader"
cgroup = "bad"
instances = 16
repeat = "forever"
steps = [
  { op = "read", file = "/mnt/data/subvol{instance}/file0", size = "4m", bs = "128k" },
]

[[actor]]
name = "writer"
cgroup = "good"
instances = 4
repeat = "forever"
steps = [
"#,
    );
    for i in 0..4 {
        text.push_str(&format!(
            "  {{ op = \"write\", file = \"/mnt/data/small/f{i}\", size = \"8k\", bs = \"4k\", exec = true }},\n"
        ));
    }
    text.push_str(
        r#"]

[[actor]]
name = "syncer"
cgroup = "good"
repeat = "forever"
steps = [
  { op = "sync", record = "sync", exec = true },
  { op = "sleep", for = "500ms" },
]

[variants.current_root]
csum_lookup = "current_root"

[variants.commit_root_for_old]
csum_lookup = "commit_root_for_old"
"#,
    );
    parse_str(&text, "e2-scaled.toml").unwrap_or_else(|e| panic!("{e}"))
}

fn value(r: &Results, m: &str) -> f64 {
    r.stat(m, "value").unwrap_or(0.0)
}

#[test]
fn overwrites_free_extents_whose_csums_commits_delete_and_no_write_is_lost() {
    let s = scaled();
    for v in ["current_root", "commit_root_for_old"] {
        // run_variant insists on clean invariants: among them, every sync
        // that ran while nothing was dirtied left no dirty or writeback
        // page behind (no lost writes).
        let r = run_variant(&s, v, false);
        assert!(value(&r, "fs.data.commits") >= 2.0, "{v}: commits");
        assert!(
            value(&r, "fs.data.delayed_ref_drops") >= 1.0,
            "{v}: no freed extent had its csums deleted at commit"
        );
        assert!(stat(&r, "sync", "p50") > 0.0, "{v}: no sync recorded");
        // The commit's wait chain and blocked tasks are sampled.
        assert!(
            r.series.contains_key("fs.data.blocked.btrfs-csum-00"),
            "{v}"
        );
        assert!(
            r.series.contains_key("fs.data.commit.wait_lock_holders"),
            "{v}"
        );
        assert!(r.series.contains_key("sync_ms"), "{v}");
    }
}

#[test]
fn commit_root_for_old_takes_no_csum_tree_lock_on_the_read_path() {
    let s = scaled();
    let cur = run_variant(&s, "current_root", false);
    let old = run_variant(&s, "commit_root_for_old", false);
    // Every read bio's lookup read-locks the csum tree in current_root;
    // with commit_root_for_old the preloaded (old) extents are looked up in
    // the commit root without node locks, so only the writers' COW
    // inserts (which read-lock levels above write_lock_level) and the reads
    // before the first transaction (no extent is older than generation 1)
    // remain.
    let csum_read_locks = |r: &Results| {
        (0..3)
            .map(|l| value(r, &format!("lock.btrfs-csum-{l:02}.read.acquisitions")))
            .sum::<f64>()
    };
    let (rc, ro) = (csum_read_locks(&cur), csum_read_locks(&old));
    let searches = value(&old, "fs.data.tree_searches");
    assert!(rc > 1000.0, "current_root: {rc} csum tree read locks");
    assert!(
        ro * 3.0 < rc,
        "commit_root_for_old: {ro} csum tree read locks vs {rc}"
    );
    assert!(
        searches > 1000.0,
        "commit_root_for_old: {searches} searches"
    );
    // Commits stay short there (well under a second).
    assert!(value(&old, "fs.data.max_commit") < 1000.0);
}

#[test]
#[ignore = "the model does not reproduce the published minutes-long stall: in the full run, with dd's O_TRUNC, each commit runs about 350 csum deletes but their waits for the csum root stay under 21 ms, commits under 1.7 s and syncs under 3 s in both variants; in this scaled-down form no wait appears at all (docs/experiments.md E2)"]
fn current_root_commit_waits_behind_starved_readers_and_syncs_stretch() {
    let s = scaled();
    let cur = run_variant(&s, "current_root", false);
    let old = run_variant(&s, "commit_root_for_old", false);
    let (wc, wo) = (
        value(&cur, "fs.data.max_commit_lock_wait"),
        value(&old, "fs.data.max_commit_lock_wait"),
    );
    assert!(wc > 10.0 * wo.max(1.0), "commit lock wait {wc} vs {wo} ms");
    assert!(stat(&cur, "sync", "max") > 10.0 * stat(&old, "sync", "max"));
}
