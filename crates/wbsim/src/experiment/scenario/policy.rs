//! The policy switches: one enum per studied kernel change, held in
//! [`Policies`], chosen per variant (DESIGN.md principle 3).
//!
//! Each enum names the code path that differs (experiments.md):
//! - [`UmountDrain`]: `fs/fs-writeback.c` `cgroup_writeback_umount()`: wait for
//!   every in-flight inode wb switch (global `isw_nr_in_flight`,
//!   `synchronize_rcu()` + `flush_workqueue(isw_wq)`) or only this
//!   superblock's (per-sb counter, `wait_var_event`).
//! - [`CsumLookup`]: `fs/btrfs/file-item.c` `btrfs_lookup_bio_sums()`: search
//!   the csum tree's current root with node locks, or its commit root under
//!   `commit_root_sem` for extents older than the running transaction.
//! - [`DetachRelease`]: `fs/namespace.c` `namespace_unlock()`:
//!   `synchronize_rcu_expedited()` inline, or for `MNT_DETACH` a deferred
//!   release via `queue_rcu_work()`.
//! - [`WbCtxAssign`]: which writeback context (of `nr_wb_ctx`) an inode uses:
//!   `i_ino % nr_wb_ctx`, the filesystem's hook (XFS: allocation group), or
//!   the effort-based idea of kernel-notes 8.
//! - [`DontcacheFlush`]: `mm/filemap.c` / `generic_write_sync()` for
//!   `RWF_DONTCACHE`: start writeback inline, or count pages and kick the
//!   flusher.
//!
//! [`Policies::default`] is the kernel before each change.

use serde::{Deserialize, Serialize};

use super::value::{as_choice, as_u32, KeyError};

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
        /// The open idea of kernel-notes 8: balance by writeback effort.
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

impl Policies {
    /// The policy keys a variant may set.
    pub const KEYS: &'static [&'static str] = &[
        "umount_drain",
        "csum_lookup",
        "detach_release",
        "wb_ctx_assign",
        "nr_wb_ctx",
        "dontcache_flush",
    ];

    /// Sets one policy from its scenario-file key and value.
    pub(crate) fn set(&mut self, key: &str, v: &toml::Value) -> Result<(), KeyError> {
        match key {
            "umount_drain" => self.umount_drain = as_choice(v, UmountDrain::ALL)?,
            "csum_lookup" => self.csum_lookup = as_choice(v, CsumLookup::ALL)?,
            "detach_release" => self.detach_release = as_choice(v, DetachRelease::ALL)?,
            "wb_ctx_assign" => self.wb_ctx_assign = as_choice(v, WbCtxAssign::ALL)?,
            "nr_wb_ctx" => self.nr_wb_ctx = Some(as_u32(v, 1, NR_WB_CTX_MAX)?),
            "dontcache_flush" => self.dontcache_flush = as_choice(v, DontcacheFlush::ALL)?,
            _ => return Err(KeyError::Unknown(Self::KEYS)),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_the_pre_change_kernel() {
        let p = Policies::default();
        assert_eq!(p.umount_drain, UmountDrain::Global);
        assert_eq!(p.csum_lookup, CsumLookup::CurrentRoot);
        assert_eq!(p.detach_release, DetachRelease::Sync);
        assert_eq!(p.wb_ctx_assign, WbCtxAssign::InoMod);
        assert_eq!(p.nr_wb_ctx, None);
        assert_eq!(p.dontcache_flush, DontcacheFlush::Inline);
        assert_eq!(UmountDrain::BASELINE, UmountDrain::default());
        assert_eq!(WbCtxAssign::BASELINE, WbCtxAssign::default());
        let json = serde_json::to_string(&p).unwrap_or_default();
        assert_eq!(
            json,
            r#"{"umount_drain":"global","csum_lookup":"current_root","detach_release":"sync","wb_ctx_assign":"ino_mod","nr_wb_ctx":null,"dontcache_flush":"inline"}"#
        );
    }

    #[test]
    fn names_round_trip() {
        for (n, v) in WbCtxAssign::ALL {
            assert_eq!(WbCtxAssign::from_name(n), Some(*v));
            assert_eq!(v.name(), *n);
        }
        assert_eq!(
            CsumLookup::from_name("commit_root_for_old"),
            Some(CsumLookup::CommitRootForOld)
        );
        assert_eq!(DetachRelease::from_name("lazy"), None);
    }
}
