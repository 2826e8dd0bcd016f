//! The policy switches: one enum per studied kernel change, held in
//! [`Policies`], chosen per variant (docs/design.md principle 3).
//!
//! Each enum names the code path that differs (docs/experiments.md):
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
//!   the effort-based idea of docs/kernel-mechanics.md §8.
//! - [`DontcacheFlush`]: `mm/filemap.c` / `generic_write_sync()` for
//!   `RWF_DONTCACHE`: start writeback inline, or count pages and kick the
//!   flusher.
//!
//! [`Policies::default`] is the kernel before each change.

pub use crate::model::policy::{
    CsumLookup, DetachRelease, DontcacheFlush, Policies, UmountDrain, WbCtxAssign, NR_WB_CTX_MAX,
};

use super::value::{as_choice, as_u32, KeyError};

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
