//! Experiment E2 `btrfs-csum-commit-root` on short runs of scaled-down
//! forms of the built-in scenario: 16 readers in a memory.high-limited
//! cgroup, 4 dd writers over small files, a sync loop, commit=1 (what the
//! `csum_lookup` switch changes on the read path, that overwrites free
//! extents whose csums the commit deletes, and that no write is lost); and
//! 64 readers on one CPU (the posting's starved readers: the commit's
//! chain under `current_root`, none under `commit_root_for_old`).
//! docs/experiments.md E2 says what the full run shows.

mod common;
use common::{run_variant, stat};

use wbsim::experiment::results::Results;
use wbsim::experiment::scenario::{parse_str, Scenario};

/// The built-in scenario's shape, scaled down for a debug-build test:
/// `readers` readers (one preloaded 4 MiB file each) in the bad cgroup on
/// `bad_cpus` with memory.high `memory_high`, 4 dd writers with O_TRUNC, a
/// sync loop, commit=1.
fn small(name: &str, duration: &str, readers: u32, memory_high: &str, bad_cpus: &str) -> Scenario {
    let mut text = format!(
        r#"
[scenario]
name = "{name}"
duration = "{duration}"
seed = 1

[machine]
cpus = 4
memory = "2g"
hz = 1000
btrfs_btree_kernel_file = false

[[device]]
name = "nvme0n1"
profile = "nvme-dc"
read_bw = "13000000000/s"
write_bw = "6600000000/s"

[[filesystem]]
name = "data"
type = "btrfs"
device = "nvme0n1"
mountpoint = "/mnt/data"
mounted = true
options = {{ commit = 1, subvolumes = {readers}, preload_files = 1, preload_size = "4m" }}

[[cgroup]]
name = "bad"
memory_high = "{memory_high}"
cpus = {bad_cpus}

[[cgroup]]
name = "good"
cpus = [3]

[[actor]]
name = "reader"
cgroup = "bad"
instances = {readers}
repeat = "forever"
steps = [
  {{ op = "read", file = "/mnt/data/subvol{{instance}}/file0", size = "4m", bs = "128k" }},
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
            "  {{ op = \"write\", file = \"/mnt/data/small/f{i}\", size = \"8k\", bs = \"4k\", trunc = true, exec = true }},\n"
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
    parse_str(&text, &format!("{name}.toml")).unwrap_or_else(|e| panic!("{e}"))
}

/// 16 readers on three CPUs (what the switch changes on the read path).
fn scaled() -> Scenario {
    small("e2-scaled", "3s", 16, "16m", "[0, 1, 2]")
}

/// The posting's regime in small: 64 readers sharing one CPU (the bad
/// cgroup starved of CPU, as the posting describes its readers: runnable
/// but not running) against a device faster than that CPU can read.
fn starved() -> Scenario {
    small("e2-starved", "4s", 64, "64m", "[0]")
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
fn current_root_commit_waits_behind_starved_readers_and_syncs_stretch() {
    let s = starved();
    let cur = run_variant(&s, "current_root", false);
    let old = run_variant(&s, "commit_root_for_old", false);
    // The csum tree of 64 x 4 MiB has two levels: csum-01 is its root.
    let max = |r: &Results, m: &str| stat(r, m, "max");
    // current_root: the commit's csum delete waits for the root behind
    // readers that hold it while waiting for the CPU, and readers queue
    // behind the commit (the posting's D-state readers).
    let holders = max(&cur, "fs.data.commit.wait_lock_holders");
    let queued = max(&cur, "fs.data.commit.wait_lock_queued");
    let blocked = max(&cur, "fs.data.blocked.btrfs-csum-01");
    assert!(
        holders >= 10.0,
        "holders of the root the commit waits for: {holders}"
    );
    assert!(queued >= 10.0, "readers queued behind the commit: {queued}");
    assert!(
        blocked >= 10.0,
        "readers blocked on the csum root: {blocked}"
    );
    // commit_root_for_old: no reader takes a csum tree lock, no chain.
    assert_eq!(max(&old, "fs.data.commit.wait_lock_holders"), 0.0);
    assert_eq!(max(&old, "fs.data.blocked.btrfs-csum-01"), 0.0);
    // The stalled commit holds up the syncs: far fewer complete.
    let (sc, so) = (stat(&cur, "sync", "count"), stat(&old, "sync", "count"));
    let (cc, co) = (
        value(&cur, "fs.data.commits"),
        value(&old, "fs.data.commits"),
    );
    assert!(sc * 3.0 <= so, "syncs completed: {sc} vs {so}");
    assert!(cc * 3.0 <= co, "commits completed: {cc} vs {co}");
    // ... while under commit_root_for_old commits stay short.
    assert!(value(&old, "fs.data.max_commit") < 1000.0);
}
