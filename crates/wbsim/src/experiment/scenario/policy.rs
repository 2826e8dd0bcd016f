//! The policy switches a variant sets: one key per field of the model's
//! [`Policies`], its values the `policy_enum!` spellings of
//! [`crate::model::policy`]. [`Policies::default`] is the kernel before each
//! change. Not kernel code.

pub use crate::model::policy::{
    CsumLookup, DetachRelease, DontcacheFlush, Policies, UmountDrain, WbCtxAssign, NR_WB_CTX_MAX,
};

use super::keys::{key_table, Choice, Int};

key_table! {
    /// The policy keys of `[variants.NAME]`.
    pub(crate) POLICIES: Policies = "[variants]", required [] {
        umount_drain: Choice(UmountDrain::ALL) => |p, x| p.umount_drain = x,
            "E1: how umount waits for in-flight inode wb switches.";
        csum_lookup: Choice(CsumLookup::ALL) => |p, x| p.csum_lookup = x,
            "E2: where btrfs looks up data checksums.";
        detach_release: Choice(DetachRelease::ALL) => |p, x| p.detach_release = x,
            "E3: how namespace_unlock() releases detached mounts.";
        wb_ctx_assign: Choice(WbCtxAssign::ALL) => |p, x| p.wb_ctx_assign = x,
            "E4: how an inode picks its writeback context.";
        nr_wb_ctx: Int(1, NR_WB_CTX_MAX as u64) => |p, n| p.nr_wb_ctx = Some(n as u32),
            "E4: writeback contexts per bdi.";
        dontcache_flush: Choice(DontcacheFlush::ALL) => |p, x| p.dontcache_flush = x,
            "E5: how RWF_DONTCACHE writes start writeback.";
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
