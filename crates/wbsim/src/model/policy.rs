//! The studied kernel changes as switches (docs/design.md principle 3): one enum per
//! change, held in [`Policies`], chosen per variant by the scenario. Each enum's
//! default is the kernel before the change. The two code paths sit side by side
//! where the kernel differs (see each enum's users):
//! - [`UmountDrain`]: `fs/fs-writeback.c` `cgroup_writeback_umount()`.
//! - [`CsumLookup`]: `fs/btrfs/file-item.c` `btrfs_lookup_bio_sums()`.
//! - [`DetachRelease`]: `fs/namespace.c` `namespace_unlock()`.
//! - [`WbCtxAssign`] and `nr_wb_ctx`: the parallel-writeback series'
//!   `get_inode_wb_ctx_idx()`.
//! - [`DontcacheFlush`]: `mm/filemap.c` `generic_write_sync()` for
//!   `RWF_DONTCACHE` vs the flusher kick.
//!
//! The scenario spelling of each value (`ALL`, `name`, `from_name`) lives here
//! too, so results and reports print the same names the scenario uses.

use serde::{Deserialize, Serialize};

macro_rules! policy_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $var:ident = $s:literal),+ $(,)? } default $def:ident) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
        #[serde(rename_all = "snake_case")]
        pub enum $name {
            $($(#[$vm])* $var,)+
        }

        impl $name {
            /// Every value with its scenario-file spelling.
            pub const ALL: &'static [(&'static str, $name)] = &[$(($s, $name::$var)),+];

            /// The scenario-file spelling.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$var => $s,)+
                }
            }

            /// Parses the scenario-file spelling.
            pub fn from_name(s: &str) -> Option<$name> {
                Self::ALL.iter().find(|(n, _)| *n == s).map(|(_, v)| *v)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl $name {
            /// The pre-change kernel's behaviour.
            pub const BASELINE: $name = $name::$def;
        }
    };
}

policy_enum! {
    /// How umount waits for in-flight inode wb switches (E1).
    UmountDrain {
        /// Baseline: if the global in-flight count is non-zero,
        /// `synchronize_rcu()` then `flush_workqueue(isw_wq)`.
        #[default]
        Global = "global",
        /// Wait for this superblock's own in-flight counter to reach zero.
        PerSb = "per_sb",
        /// Test variant only: no drain at all, which lets a switch touch an
        /// inode after its superblock's teardown (the invariant must trip).
        None = "none",
    } default Global
}

policy_enum! {
    /// Where btrfs looks up data checksums of a read (E2).
    CsumLookup {
        /// Baseline: the current csum root, read-locking nodes.
        #[default]
        CurrentRoot = "current_root",
        /// The commit root for extents older than the running transaction.
        CommitRootForOld = "commit_root_for_old",
    } default CurrentRoot
}

policy_enum! {
    /// How `namespace_unlock()` releases detached mounts (E3).
    DetachRelease {
        /// Baseline: `synchronize_rcu_expedited()` before releasing.
        #[default]
        Sync = "sync",
        /// `MNT_DETACH` only: release after a grace period via `queue_rcu_work()`.
        Deferred = "deferred",
    } default Sync
}

policy_enum! {
    /// How an inode is assigned to one of `nr_wb_ctx` writeback contexts (E4).
    WbCtxAssign {
        /// Baseline: `i_ino % nr_wb_ctx`.
        #[default]
        InoMod = "ino_mod",
        /// The filesystem's hook (XFS: the inode's AG when agcount <= nr_wb_ctx).
        FsHook = "fs_hook",
        /// The open idea of docs/kernel-mechanics.md §8: balance by writeback effort.
        Effort = "effort",
    } default InoMod
}

policy_enum! {
    /// How `RWF_DONTCACHE` writes start writeback (E5).
    DontcacheFlush {
        /// Baseline: start writeback of the written range in the writer.
        #[default]
        Inline = "inline",
        /// Count the pages per wb and kick the flusher.
        Kick = "kick",
    } default Inline
}

/// Largest `nr_wb_ctx` accepted (a sanity bound: the published sweep is 1..8).
pub const NR_WB_CTX_MAX: u32 = 1024;

/// Every policy switch, chosen per variant. `Default` is the pre-change kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policies {
    /// E1.
    pub umount_drain: UmountDrain,
    /// E2.
    pub csum_lookup: CsumLookup,
    /// E3.
    pub detach_release: DetachRelease,
    /// E4.
    pub wb_ctx_assign: WbCtxAssign,
    /// E4: writeback contexts per bdi; None = the filesystem's or bdi's own
    /// (one, as before the parallel-writeback series).
    pub nr_wb_ctx: Option<u32>,
    /// E5.
    pub dontcache_flush: DontcacheFlush,
}
