//! The studied kernel changes as switches (DESIGN.md principle 3): one enum per
//! change, held in [`Policies`], chosen per variant by the scenario. Each enum's
//! default is the kernel before the change. The two code paths sit side by side
//! where the kernel differs (see each enum's users).

pub use crate::model::fs::WbCtxAssign;

/// E1: how umount drains in-flight inode wb switches (`cgroup_writeback_umount`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UmountDrain {
    /// Global isw_nr_in_flight: synchronize_rcu + flush_workqueue(isw_wq).
    #[default]
    Global,
    /// Per-superblock in-flight counter, waited on with wait_var_event.
    PerSb,
}

/// E2: where btrfs looks up checksums of old extents.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CsumLookup {
    /// Read-lock csum tree nodes on every search.
    #[default]
    CurrentRoot,
    /// Old extents: commit root under commit_root_sem, no node locks.
    CommitRootForOld,
}

/// E3: how MNT_DETACH releases mounts (`namespace_unlock`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DetachRelease {
    /// synchronize_rcu_expedited before releasing, in the caller.
    #[default]
    Sync,
    /// Lazy umount: released by queue_rcu_work after a grace period.
    Deferred,
}

/// E5: how an RWF_DONTCACHE write starts writeback.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DontcacheFlush {
    /// generic_write_sync starts writeback of the range in the writer.
    #[default]
    Inline,
    /// Per-wb DONTCACHE_DIRTY counter; the flusher is kicked.
    Kick,
}

/// Every switch, as one variant sets them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Policies {
    pub umount_drain: UmountDrain,
    pub csum_lookup: CsumLookup,
    pub detach_release: DetachRelease,
    pub wb_ctx_assign: WbCtxAssign,
    /// Writeback contexts per bdi (None: 1, the mainline layout).
    pub nr_wb_ctx: Option<u32>,
    pub dontcache_flush: DontcacheFlush,
}
