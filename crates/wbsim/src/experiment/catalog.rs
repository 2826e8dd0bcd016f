//! The five published experiments wbsim reproduces (shared/experiments.md), and
//! which of them have a built-in scenario in this build.

/// One published experiment.
#[derive(Clone, Copy, Debug)]
pub struct Experiment {
    /// E1..E5 as in experiments.md.
    pub code: &'static str,
    /// Short id, also the scenario file's stem (`scenarios/ID.toml`).
    pub id: &'static str,
    /// What the studied change does.
    pub title: &'static str,
    /// The policy switch and its two sides.
    pub switch: &'static str,
    /// The built-in scenario's text, compiled in (None: still to come).
    pub scenario: Option<&'static str>,
    /// Which piece of work brings it, when it is still to come.
    pub comes_with: &'static str,
}

/// Every experiment, in experiments.md order.
pub const EXPERIMENTS: &[Experiment] = &[
    Experiment {
        code: "E1",
        id: "cgwb-umount",
        title: "per-superblock drain of inode wb switches at umount",
        switch: "umount_drain = global | per_sb",
        scenario: None,
        comes_with: "the cgroup writeback issue",
    },
    Experiment {
        code: "E2",
        id: "btrfs-csum-commit-root",
        title: "csum lookups of old extents in the commit root",
        switch: "csum_lookup = current_root | commit_root_for_old",
        scenario: None,
        comes_with: "the btrfs issue",
    },
    Experiment {
        code: "E3",
        id: "lazy-umount",
        title: "defer the RCU grace period of MNT_DETACH",
        switch: "detach_release = sync | deferred",
        scenario: None,
        comes_with: "the mount lifecycle issue",
    },
    Experiment {
        code: "E4",
        id: "parallel-writeback",
        title: "filesystem-chosen writeback contexts",
        switch: "wb_ctx_assign = ino_mod | fs_hook | effort",
        scenario: None,
        comes_with: "the parallel writeback / XFS issue",
    },
    Experiment {
        code: "E5",
        id: "dontcache",
        title: "kick the flusher instead of flushing inline",
        switch: "dontcache_flush = inline | kick",
        scenario: None,
        comes_with: "the RWF_DONTCACHE issue",
    },
];

/// Looks an experiment up by id or code (case-insensitive).
pub fn find(name: &str) -> Option<&'static Experiment> {
    EXPERIMENTS
        .iter()
        .find(|e| e.id.eq_ignore_ascii_case(name) || e.code.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_by_id_and_code() {
        assert_eq!(find("e3").unwrap().id, "lazy-umount");
        assert_eq!(find("dontcache").unwrap().code, "E5");
        assert!(find("nope").is_none());
        let mut ids: Vec<_> = EXPERIMENTS.iter().map(|e| e.id).collect();
        ids.dedup();
        assert_eq!(ids.len(), 5);
    }
}
