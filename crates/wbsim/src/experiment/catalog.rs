//! The five published experiments wbsim reproduces (docs/experiments.md):
//! which of them have a built-in scenario in this build, and the published
//! figures the report puts beside the simulated ones.
//!
//! Not kernel code, and not a model input: published figures are only
//! compared against (docs/design.md principle 1). The metric names in
//! [`PUBLISHED`] are the contract with the built-in scenarios: a scenario
//! that records its headline measurement under that name gets the
//! comparison; until then the report shows "n/a". Each entry also says
//! what the report leads with ([`Headline`]: the A/B table and its plots)
//! and, optionally, per-job and "where time goes" table columns
//! ([`Column`]), so a new entry gets its report section without report
//! code. Left out: the published tables of E1 (b)-(d) and E5's other tests
//! (docs/experiments.md gives only E1 (a) and E5's single-stream figures),
//! and E2, published qualitatively.

use super::scenario::{self, Scenario, ScenarioError};

/// One published experiment.
#[derive(Clone, Copy, Debug)]
pub struct Experiment {
    /// E1..E5 as in docs/experiments.md.
    pub code: &'static str,
    /// Short id, also the scenario file's stem (`scenarios/ID.toml`) and
    /// the results' `scenario` name.
    pub id: &'static str,
    /// What the studied change does.
    pub title: &'static str,
    /// The policy switch and its sides, baseline first (`key = a | b`).
    pub switch: &'static str,
    /// The machine and workload as published, in a line or two.
    pub setup: &'static str,
    /// What was published, when it is not a table of numbers (E2).
    pub published_note: &'static str,
    /// The built-in scenario's text, compiled in (None: still to come).
    pub scenario: Option<&'static str>,
    /// Which piece of work brings it, when it is still to come.
    pub comes_with: &'static str,
    /// The figures the experiment is about: the report's headline A/B
    /// table (baseline vs each other side) and its first plots.
    pub headline: &'static [Headline],
    /// Per-job table columns (fio jobs, found in the results as
    /// `fio.JOB.SUFFIX`); empty: no per-job table.
    pub per_job: &'static [Column],
    /// "Where time goes" table columns, one row per variant label (sweep
    /// point); empty: no such table.
    pub breakdown: &'static [Column],
}

/// A headline figure: a metric (or a pattern of them) and the statistics
/// the report compares between the baseline and the other sides.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Headline {
    /// Metric name, or a pattern where `*` stands for any text
    /// (`fio.*dontcache*.write_bw`); a pattern gives one row per metric
    /// it matches in the results, in name order.
    pub metric: &'static str,
    /// Statistics compared: `mean` (a scalar's value), `p50`, `p99`...
    pub stats: &'static [&'static str],
    /// The unit shown (the simulated values are converted to it).
    pub unit: &'static str,
}

/// How a [`Column`] combines the metrics its pattern matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Combine {
    /// Sum of the matched metrics (per-context CPU, per-AG lock wait).
    Sum,
    /// Mean of the matched metrics (device utilisation over devices).
    Mean,
}

/// One column of a per-job or "where time goes" table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Column {
    /// Column heading.
    pub heading: &'static str,
    /// Metric pattern (`*` = any text). For a per-job table, the suffix
    /// after `fio.JOB.` (`write_bw`, `clat`).
    pub metric: &'static str,
    /// Statistic (`mean` for a scalar's value, `p99`...).
    pub stat: &'static str,
    /// Unit shown.
    pub unit: &'static str,
    /// How several matches combine.
    pub combine: Combine,
}

/// Shorthand for a headline entry.
const fn hl(metric: &'static str, stats: &'static [&'static str], unit: &'static str) -> Headline {
    Headline {
        metric,
        stats,
        unit,
    }
}

/// Shorthand for a table column.
const fn col(
    heading: &'static str,
    metric: &'static str,
    stat: &'static str,
    unit: &'static str,
    combine: Combine,
) -> Column {
    Column {
        heading,
        metric,
        stat,
        unit,
        combine,
    }
}

/// The per-job columns of fio-driven experiments: bandwidth, completion
/// latency percentiles and the peak of dirty memory during the job.
/// fio's three latencies per job: `lat` (submission to completion, the
/// headline: a write the io_uring engine completes inside
/// `io_uring_enter` is all slat, since fio stamps the issue time after that
/// call returns, so clat is about 0 for inline completions by fio's own
/// definition), `slat` and `clat`.
const FIO_JOB_COLUMNS: &[Column] = &[
    col("MB/s", "write_bw", "mean", "MB/s", Combine::Sum),
    col("lat p50 (us)", "lat", "p50", "us", Combine::Mean),
    col("lat p99 (us)", "lat", "p99", "us", Combine::Mean),
    col("lat p99.9 (us)", "lat", "p99.9", "us", Combine::Mean),
    col("slat p50 (us)", "slat", "p50", "us", Combine::Mean),
    col("slat p99 (us)", "slat", "p99", "us", Combine::Mean),
    col("slat p99.9 (us)", "slat", "p99.9", "us", Combine::Mean),
    col("clat p50 (us)", "clat", "p50", "us", Combine::Mean),
    col("clat p99 (us)", "clat", "p99", "us", Combine::Mean),
    col("clat p99.9 (us)", "clat", "p99.9", "us", Combine::Mean),
    col(
        "peak dirty (MiB)",
        "file_peak_dirty",
        "mean",
        "MiB",
        Combine::Mean,
    ),
];

impl Experiment {
    /// The switch's sides in the order the catalog lists them (baseline
    /// first): `"umount_drain = global | per_sb"` -> `["global", "per_sb"]`.
    pub fn sides(&self) -> Vec<&'static str> {
        let rhs = self.switch.split_once('=').map_or("", |(_, r)| r);
        rhs.split('|')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect()
    }

    /// The built-in scenario, parsed (None: still to come). Errors name
    /// `scenarios/ID.toml`.
    pub fn load_scenario(&self) -> Option<Result<Scenario, ScenarioError>> {
        let text = self.scenario?;
        Some(scenario::parse_str(
            text,
            &format!("scenarios/{}.toml", self.id),
        ))
    }

    /// The published figures of this experiment, in catalog order.
    pub fn published(&self) -> impl Iterator<Item = &'static Published> + '_ {
        PUBLISHED.iter().filter(move |p| p.experiment == self.id)
    }
}

/// Every experiment, in docs/experiments.md order.
pub const EXPERIMENTS: &[Experiment] = &[
    Experiment {
        code: "E1",
        id: "cgwb-umount",
        title: "per-superblock drain of inode wb switches at umount",
        switch: "umount_drain = global | per_sb",
        setup: "16 vCPU QEMU guest; 4 background superblocks each looping \
                create memcg -> write 1 MiB -> rmdir memcg; wall-clock latency of \
                umount(8) of the target superblock, which runs its own cgwb churn (a).",
        published_note: "",
        scenario: Some(include_str!("../../../../scenarios/cgwb-umount.toml")),
        comes_with: "the cgroup writeback issue",
        // (a) the published table; (b), (c) and the target's drain (d)
        // have no published figures here but get their rows and CDFs.
        headline: &[
            hl("umount.elapsed", &["p50", "p95", "p99", "max"], "ms"),
            hl("umount.b_baseline", &["p50", "p99", "max"], "ms"),
            hl("umount.b_idle", &["p50", "p99", "max"], "ms"),
            hl("umount.c_concurrent", &["p50", "p99", "max"], "ms"),
            hl("cgwb.umount_drain", &["p50", "p99", "max"], "ms"),
        ],
        per_job: &[],
        // Where an (a) umount's time goes: generic_shutdown_super's phases
        // on the target, and what its drain waited for.
        breakdown: &[
            col("(a) p50 ms", "umount.elapsed", "p50", "ms", Combine::Sum),
            col(
                "sync_filesystem p50 ms",
                "umount.phase.sync_filesystem./mnt/tgt",
                "p50",
                "ms",
                Combine::Sum,
            ),
            col(
                "drain p50 ms",
                "umount.phase.cgroup_writeback_umount./mnt/tgt",
                "p50",
                "ms",
                Combine::Sum,
            ),
            col(
                "put_super p50 ms",
                "umount.phase.put_super./mnt/tgt",
                "p50",
                "ms",
                Combine::Sum,
            ),
            col(
                "drain grace periods (mean)",
                "cgwb.umount_drain_gps./mnt/tgt",
                "mean",
                "count",
                Combine::Sum,
            ),
            col(
                "switches in flight at drain (mean)",
                "cgwb.umount_drain_in_flight./mnt/tgt",
                "mean",
                "count",
                Combine::Sum,
            ),
            col(
                "inodes switched during drain (mean)",
                "cgwb.umount_drain_switched./mnt/tgt",
                "mean",
                "count",
                Combine::Sum,
            ),
        ],
    },
    Experiment {
        code: "E2",
        id: "btrfs-csum-commit-root",
        title: "csum lookups of old extents in the commit root",
        switch: "csum_lookup = current_root | commit_root_for_old",
        setup: "btrfs, 60 s: cgroup \"bad\" (memory.high 1 GiB, CPUs 0-3) with 512 \
                readers of their own 20 MiB file; cgroup \"good\" (CPU 0) with 32 small \
                dd writers and a sync loop.",
        published_note: "Qualitatively: before, transactions and syncs stall \
                         for minutes with hundreds of readers in D state on the csum root \
                         lock; after, the run ends on time with commits of well under a \
                         second to a few seconds.",
        scenario: Some(include_str!(
            "../../../../scenarios/btrfs-csum-commit-root.toml"
        )),
        comes_with: "the btrfs issue",
        // commit_stats, each sync's duration, the run's length, and the
        // tasks blocked on csum tree locks (sampled each second).
        headline: &[
            hl("fs.data.commits", &["mean"], "count"),
            hl("fs.data.max_commit", &["mean"], "ms"),
            hl("fs.data.total_commit", &["mean"], "ms"),
            hl("sync", &["p50", "max"], "ms"),
            hl("run.simulated_time", &["mean"], "s"),
            hl("fs.data.blocked.btrfs-csum-*", &["mean", "max"], "tasks"),
            hl(
                "fs.data.blocked.btrfs-commit_root_sem",
                &["mean", "max"],
                "tasks",
            ),
            hl("fs.data.total_commit_lock_wait", &["mean"], "ms"),
            hl("fs.data.tree_block_rereads", &["mean"], "count"),
        ],
        per_job: &[],
        // Where a commit's time goes: its task's waits for tree locks in
        // the delayed-ref searches (btrfs_del_csums), and the wait chain.
        breakdown: &[
            col(
                "max commit ms",
                "fs.data.max_commit",
                "mean",
                "ms",
                Combine::Sum,
            ),
            col(
                "max commit lock wait ms",
                "fs.data.max_commit_lock_wait",
                "mean",
                "ms",
                Combine::Sum,
            ),
            col(
                "delayed ref drops",
                "fs.data.delayed_ref_drops",
                "mean",
                "count",
                Combine::Sum,
            ),
            // The commits' time by phase, summed over commits.
            col(
                "in delayed refs, all commits (ms)",
                "fs.data.commit.run_delayed_refs",
                "mean",
                "ms",
                Combine::Sum,
            ),
            col(
                "waiting for open handles (ms)",
                "fs.data.commit.writers_wait",
                "mean",
                "ms",
                Combine::Sum,
            ),
            col(
                "waiting for commit_root_sem (ms)",
                "fs.data.commit.switch_roots_wait",
                "mean",
                "ms",
                Combine::Sum,
            ),
            col(
                "writing tree blocks (ms)",
                "fs.data.commit.write_blocks",
                "mean",
                "ms",
                Combine::Sum,
            ),
            col(
                "writing superblocks (ms)",
                "fs.data.commit.write_supers",
                "mean",
                "ms",
                Combine::Sum,
            ),
            col(
                "holders of the lock the commit waits for (max)",
                "fs.data.commit.wait_lock_holders",
                "max",
                "tasks",
                Combine::Sum,
            ),
            col(
                "queued behind the commit (max)",
                "fs.data.commit.wait_lock_queued",
                "max",
                "tasks",
                Combine::Sum,
            ),
            col(
                "bad cgroup CPU use (s)",
                "cgroup.bad.cpu_usage",
                "mean",
                "s",
                Combine::Sum,
            ),
            col(
                "bad cgroup CPU wait, over tasks (s)",
                "cgroup.bad.cpu_wait",
                "mean",
                "s",
                Combine::Sum,
            ),
        ],
    },
    Experiment {
        code: "E3",
        id: "lazy-umount",
        title: "defer the RCU grace period of MNT_DETACH",
        switch: "detach_release = sync | deferred",
        setup: "PREEMPT_RT 6.15-rc1 with rcupdate.rcu_normal_after_boot=1; \
                perf stat -r 10 --null --pre 'mount -t tmpfs tmpfs mnt' -- umount [-l] mnt \
                (whole command, process start included).",
        published_note: "",
        scenario: Some(include_str!("../../../../scenarios/lazy-umount.toml")),
        comes_with: "the mount lifecycle issue",
        headline: &[
            hl("umount.elapsed", &["mean"], "s"),
            hl("umount_lazy.elapsed", &["mean"], "s"),
        ],
        per_job: &[],
        breakdown: &[],
    },
    Experiment {
        code: "E4",
        id: "parallel-writeback",
        title: "filesystem-chosen writeback contexts",
        switch: "wb_ctx_assign = ino_mod | fs_hook | effort",
        setup: "QEMU guest, 8 CPUs, 4 GiB RAM, emulated NVMe 20 GB, XFS with 4 AGs; \
                buffered random 4 KiB writes (io_uring) to 1 GiB files in separate \
                directories; sweep of nr_wb_ctx.",
        published_note: "",
        scenario: Some(include_str!(
            "../../../../scenarios/parallel-writeback.toml"
        )),
        comes_with: "the parallel writeback / XFS issue",
        headline: &[hl("write.bw", &["mean"], "MiB/s")],
        per_job: &[],
        breakdown: &[
            col("MiB/s", "write.bw", "mean", "MiB/s", Combine::Sum),
            col(
                "contexts active",
                "wb.*.ctx_active",
                "mean",
                "count",
                Combine::Sum,
            ),
            col(
                "flusher CPU (ms, all contexts)",
                "wb.*.flusher_cpu",
                "mean",
                "ms",
                Combine::Sum,
            ),
            col(
                "flusher CPU per page written (us)",
                "wb.*.flusher_cpu_per_page",
                "mean",
                "us",
                Combine::Mean,
            ),
            col(
                "AGF lock wait (ms, all AGs)",
                "lock.xfs_agf:*.wait_total",
                "mean",
                "ms",
                Combine::Sum,
            ),
            col(
                "AGF lock hold (ms, all AGs)",
                "lock.xfs_agf:*.hold_total",
                "mean",
                "ms",
                Combine::Sum,
            ),
            col(
                "i_lock wait (ms)",
                "lock.xfs:i_lock.*.wait_total",
                "mean",
                "ms",
                Combine::Sum,
            ),
            col(
                "i_rwsem wait (ms)",
                "lock.xfs:i_rwsem.*.wait_total",
                "mean",
                "ms",
                Combine::Sum,
            ),
            col(
                "writer throttle pause mean (ms)",
                "bdp.pause",
                "mean",
                "ms",
                Combine::Mean,
            ),
            col(
                "device busy (%)",
                "device.*.util",
                "mean",
                "percent",
                Combine::Mean,
            ),
            col(
                "simulated (s)",
                "run.simulated_time",
                "mean",
                "s",
                Combine::Mean,
            ),
        ],
    },
    Experiment {
        code: "E5",
        id: "dontcache",
        title: "kick the flusher instead of flushing inline",
        switch: "dontcache_flush = inline | kick",
        setup: "251 GiB RAM, XFS on NVMe, fio io_uring; single-stream seq-write and \
                rand-write with RWF_DONTCACHE.",
        published_note: "",
        scenario: Some(include_str!("../../../../scenarios/dontcache.toml")),
        comes_with: "the RWF_DONTCACHE issue",
        headline: &[
            hl("fio.*dontcache*.write_bw", &["mean"], "MB/s"),
            hl("fio.*-dontcache.clat", &["p50", "p99", "p99.9"], "us"),
        ],
        per_job: FIO_JOB_COLUMNS,
        breakdown: &[],
    },
];

/// Looks an experiment up by id or code (case-insensitive).
pub fn find(name: &str) -> Option<&'static Experiment> {
    EXPERIMENTS
        .iter()
        .find(|e| e.id.eq_ignore_ascii_case(name) || e.code.eq_ignore_ascii_case(name))
}

/// One published figure (a cell of a table in docs/experiments.md).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Published {
    /// The experiment's id.
    pub experiment: &'static str,
    /// The variant's name (the side of the switch).
    pub variant: &'static str,
    /// The sweep point, `(key, value)` as in a variant label
    /// `name[key=value]`; None for runs without a sweep.
    pub sweep: Option<(&'static str, &'static str)>,
    /// The wbsim metric it compares with.
    pub metric: &'static str,
    /// The statistic: `p50`, `p95`, `p99`, `max` or `mean` (for a scalar
    /// metric, `mean` is its value).
    pub stat: &'static str,
    /// The published unit (the simulated value is converted to it).
    pub unit: &'static str,
    /// The published value.
    pub value: f64,
    /// Where it comes from (table, row), for the reader.
    pub source: &'static str,
}

/// Shorthand for the table below.
#[allow(clippy::too_many_arguments)]
const fn fig(
    experiment: &'static str,
    variant: &'static str,
    sweep: Option<(&'static str, &'static str)>,
    metric: &'static str,
    stat: &'static str,
    unit: &'static str,
    value: f64,
    source: &'static str,
) -> Published {
    Published {
        experiment,
        variant,
        sweep,
        metric,
        stat,
        unit,
        value,
        source,
    }
}

const E1A: &str = "E1 (a) target runs its own churn";
const E3T: &str = "E3 perf stat -r 10";
const E4T: &str = "E4 nr_wb_ctx sweep, ino_mod";
const E5T: &str = "E5 single stream";

/// Every published figure of docs/experiments.md, in its order.
#[rustfmt::skip]
pub const PUBLISHED: &[Published] = &[
    fig("cgwb-umount", "global", None, "umount.elapsed", "p50", "ms", 67.6, E1A),
    fig("cgwb-umount", "global", None, "umount.elapsed", "p95", "ms", 88.3, E1A),
    fig("cgwb-umount", "global", None, "umount.elapsed", "p99", "ms", 88.3, E1A),
    fig("cgwb-umount", "global", None, "umount.elapsed", "max", "ms", 96.8, E1A),
    fig("cgwb-umount", "per_sb", None, "umount.elapsed", "p50", "ms", 7.9, E1A),
    fig("cgwb-umount", "per_sb", None, "umount.elapsed", "p95", "ms", 10.0, E1A),
    fig("cgwb-umount", "per_sb", None, "umount.elapsed", "p99", "ms", 10.0, E1A),
    fig("cgwb-umount", "per_sb", None, "umount.elapsed", "max", "ms", 10.1, E1A),
    fig("lazy-umount", "sync", None, "umount.elapsed", "mean", "s", 0.02455, E3T),
    fig("lazy-umount", "sync", None, "umount_lazy.elapsed", "mean", "s", 0.02555, E3T),
    fig("lazy-umount", "deferred", None, "umount.elapsed", "mean", "s", 0.026311, E3T),
    fig("lazy-umount", "deferred", None, "umount_lazy.elapsed", "mean", "s", 0.003194, E3T),
    fig("parallel-writeback", "ino_mod", Some(("nr_wb_ctx", "1")), "write.bw", "mean", "MiB/s", 16.4, E4T),
    fig("parallel-writeback", "ino_mod", Some(("nr_wb_ctx", "2")), "write.bw", "mean", "MiB/s", 32.3, E4T),
    fig("parallel-writeback", "ino_mod", Some(("nr_wb_ctx", "3")), "write.bw", "mean", "MiB/s", 39.0, E4T),
    fig("parallel-writeback", "ino_mod", Some(("nr_wb_ctx", "4")), "write.bw", "mean", "MiB/s", 47.3, E4T),
    fig("dontcache", "inline", None, "fio.seq-write-dontcache.write_bw", "mean", "MB/s", 298.0, E5T),
    fig("dontcache", "kick", None, "fio.seq-write-dontcache.write_bw", "mean", "MB/s", 897.0, E5T),
    fig("dontcache", "inline", None, "fio.rand-write-dontcache.write_bw", "mean", "MB/s", 131.0, E5T),
    fig("dontcache", "kick", None, "fio.rand-write-dontcache.write_bw", "mean", "MB/s", 236.0, E5T),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::metrics::unit_factor;

    #[test]
    fn lookup_by_id_and_code() {
        assert_eq!(find("e3").unwrap().id, "lazy-umount");
        assert_eq!(find("dontcache").unwrap().code, "E5");
        assert!(find("nope").is_none());
        let mut ids: Vec<_> = EXPERIMENTS.iter().map(|e| e.id).collect();
        ids.dedup();
        assert_eq!(ids.len(), 5);
    }

    #[test]
    fn published_figures_name_known_experiments_sides_and_units() {
        for p in PUBLISHED {
            let e = find(p.experiment).unwrap_or_else(|| panic!("{p:?}"));
            assert!(e.sides().contains(&p.variant), "{p:?}");
            assert!(
                unit_factor(p.unit, "ns")
                    .or(unit_factor(p.unit, "bytes/s"))
                    .is_some(),
                "{p:?}"
            );
            assert!(
                ["p50", "p95", "p99", "max", "mean"].contains(&p.stat),
                "{p:?}"
            );
        }
        assert_eq!(find("E1").unwrap().sides(), ["global", "per_sb"]);
        assert_eq!(find("E4").unwrap().published().count(), 4);
    }

    #[test]
    fn built_in_scenarios_parse() {
        for e in EXPERIMENTS {
            if let Some(r) = e.load_scenario() {
                let s = r.unwrap_or_else(|err| panic!("{}: {err}", e.id));
                assert_eq!(s.name, e.id, "scenario name must be the experiment id");
            }
        }
    }
}
