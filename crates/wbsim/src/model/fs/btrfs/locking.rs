//! Tree block locking (fs/btrfs/locking.c, 5.11+): every extent buffer's
//! lock is a plain rw_semaphore, so tree locks have the kernel rwsem's
//! semantics (model/kernel/locking/rwsem.rs): a queued writer disables the
//! reader fast path, readers queue FIFO behind it, and there is no priority
//! inheritance, so a holder that is runnable but not running stalls everyone
//! queued behind it.
//!
//! Lock classes follow `btrfs_set_buffer_lockdep_class()`: one class per tree
//! and level, named `btrfs-<tree>-<level>` (e.g. `btrfs-csum-01`), so
//! lock_stat reports the csum tree's root apart from its leaves.
//!
//! Left out: the `_nested` variants (lockdep only), `btrfs_tree_lock`'s
//! tracepoints, and `nowait` searches (trylock variants exist on the rwsem).

use std::rc::Rc;

use crate::model::fs::btrfs::extent_io::ExtentBuffer;
use crate::model::kernel::locking::{ReadGuard, WriteGuard};

/// `path->locks[level]`: how a path holds a block (`BTRFS_READ_LOCK`,
/// `BTRFS_WRITE_LOCK`); dropping it is `btrfs_tree_unlock_rw()`.
pub enum EbLock {
    /// `BTRFS_READ_LOCK`.
    Read(ReadGuard),
    /// `BTRFS_WRITE_LOCK`.
    Write(WriteGuard),
}

impl EbLock {
    /// Whether this is a write lock.
    pub fn is_write(&self) -> bool {
        matches!(self, EbLock::Write(_))
    }
}

/// The lockdep class name of a tree block: `btrfs-<tree>-<level, 2 digits>`
/// (fs/btrfs/locking.c `btrfs_lockdep_keysets`).
pub fn btrfs_lockdep_name(tree: &str, level: u8) -> String {
    format!("btrfs-{tree}-{level:02}")
}

/// `btrfs_tree_read_lock()`: `down_read(&eb->lock)`.
pub async fn btrfs_tree_read_lock(eb: &ExtentBuffer) -> EbLock {
    EbLock::Read(eb.lock().down_read().await)
}

/// `btrfs_tree_lock()`: `down_write(&eb->lock)`.
pub async fn btrfs_tree_lock(eb: &ExtentBuffer) -> EbLock {
    EbLock::Write(eb.lock().down_write().await)
}

/// `btrfs_try_tree_write_lock()`: a freshly allocated block (a COW copy) is
/// locked by its creator before anyone can see it, so this never fails there.
pub fn btrfs_try_tree_write_lock(eb: &ExtentBuffer) -> Option<EbLock> {
    eb.lock().down_write_trylock().map(EbLock::Write)
}

/// The block a path slot holds, with its lock.
pub struct LockedEb {
    /// The block.
    pub eb: Rc<ExtentBuffer>,
    /// Its lock, or None when the path does not hold one (`skip_locking`,
    /// or released by `unlock_up`).
    pub lock: Option<EbLock>,
}
