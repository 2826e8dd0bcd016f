//! Mounts and the mount namespace: fs/namespace.c.
//!
//! Models:
//! - `struct mount` ([`Mount`]): its superblock, its reference count
//!   (`mnt_count`), whether it is attached to the namespace (`mnt_ns`), and the
//!   flags MNT_UMOUNT, MNT_SYNC_UMOUNT and MNT_DOOMED.
//! - `namespace_sem`: one rw_semaphore for the whole machine, taken for write
//!   by every mount and umount (`namespace_lock`), so they all serialize.
//! - `do_mount` / `vfs_kern_mount` / `do_new_mount`: claim the block device
//!   exclusively (`get_tree_bdev`; EBUSY if another holder has it), create the
//!   superblock (`sget`), attach the new mount under `namespace_sem`.
//! - `path_umount` / `do_umount`: the busy check of a non-lazy umount (EBUSY
//!   unless `mnt_count` is exactly 2: the attachment plus the caller's path,
//!   `propagate_mount_busy(mnt, 2)`), MNT_DETACH without it, `umount_tree`
//!   (off the mount table, onto the `unmounted` list), `namespace_unlock`.
//! - `namespace_unlock`: releases `namespace_sem`; if mounts were
//!   disconnected, `synchronize_rcu_expedited()` and then `mntput` of each.
//!   Experiment E3's switch ([`DetachRelease`]) sits here: `Deferred` hands the
//!   list of an MNT_DETACH umount to `queue_rcu_work` on `system_wq` and
//!   returns at once (the patch's `defer_free_mounts`).
//! - `mntput_no_expire`: while attached, a plain decrement; the final put of a
//!   detached mount marks it MNT_DOOMED and runs `cleanup_mnt` as task_work
//!   (before the current user task returns to user space: [`task_work_run`]),
//!   or, in a kernel thread (PF_KTHREAD: workqueue workers) or outside any
//!   task, via `delayed_mntput_work` on `system_wq` one jiffy later.
//! - `cleanup_mnt`: `deactivate_super` (the superblock shutdown of
//!   `super_`), then the mount is freed after a grace period (`call_rcu`).
//!
//! So a plain umount returns only after the superblock shut down; a lazy one
//! of a mount someone else holds returns early and the last holder's
//! [`release_mount`] pays the shutdown; a deferred lazy umount returns before
//! the grace period, while the filesystem and its device stay busy.
//!
//! Simplified or left out: one mount namespace; mount points are names, one
//! mount per name (no stacking, no submounts, so `umount_tree` handles one
//! mount, no propagation or shared subtrees, no bind mounts, no MNT_EXPIRE or
//! MNT_FORCE behaviour, no `mount_lock` seqlock, which is uncontended here);
//! one superblock per mount (no superblock sharing); the filesystem's own
//! mount work (`fill_super`: reading the superblock, log recovery) costs
//! nothing, as mount latency is not studied.

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};

use sim::Time;

use crate::model::block::BlockDevice;
use crate::model::fs::super_::{deactivate_super, flags as super_flags, sget};
use crate::model::fs::vfs::Filesystem;
use crate::model::fs::vfs::Machine;
use crate::model::fs::vfs::SuperBlock;
pub use crate::model::fs::vfs::{MntNamespace, Mount, NsStats};
use crate::model::kernel::locking::rwsem::WriteGuard;
use crate::model::kernel::stats::ViolationObjects;
use crate::model::kernel::workqueue::{queue_delayed_work, queue_rcu_work, DelayedWork, RcuWork};
use crate::model::mm::backing_dev::BdiSettings;
use crate::model::policy::DetachRelease;

pub use crate::model::errno::Errno;

/// umount(2) flags (include/linux/fs.h).
pub mod flags {
    /// MNT_FORCE: accepted, no effect in the model (no `->umount_begin`).
    pub const MNT_FORCE: u32 = 0x1;
    /// MNT_DETACH: lazy umount.
    pub const MNT_DETACH: u32 = 0x2;
    /// MNT_EXPIRE: not modelled (EINVAL).
    pub const MNT_EXPIRE: u32 = 0x4;
    /// UMOUNT_NOFOLLOW: accepted (no symlinks in the model).
    pub const UMOUNT_NOFOLLOW: u32 = 0x8;
}

/// `mnt->mnt.mnt_flags` bits used here (include/linux/mount.h).
pub mod mnt_flags {
    /// MNT_UMOUNT: taken out of the tree by `umount_tree`.
    pub const MNT_UMOUNT: u32 = 0x0800_0000;
    /// MNT_SYNC_UMOUNT: unmounted by a non-lazy umount.
    pub const MNT_SYNC_UMOUNT: u32 = 0x0200_0000;
    /// MNT_DOOMED: the final reference is gone; cleanup is queued.
    pub const MNT_DOOMED: u32 = 0x0100_0000;
}

/// CPU of a mount(2) call outside the filesystem (`do_new_mount`: fs_context
/// setup, `vfs_create_mount`, `do_add_mount`), ns: 10 us. Estimate (order of
/// magnitude); mount latency is not studied.
pub const MOUNT_SYSCALL_NS: Time = 10_000;
/// CPU of a umount(2) call before `do_umount` (syscall entry,
/// `user_path_mountpoint_at` walking the path, permission and mount checks)
/// and after it (path release), ns: 1 us. Estimate; with the rest of a clean
/// tmpfs umount it must stay within the ~5 us measured on the non-RT 6.18 VM
/// (docs/kernel-mechanics.md §3.3).
pub const UMOUNT_SYSCALL_NS: Time = 1_000;
/// CPU of `umount_tree` for one mount under `namespace_sem` (flags, list
/// moves, `__touch_mnt_namespace`, `umount_mnt`), ns: 0.5 us. Estimate.
pub const UMOUNT_TREE_NS: Time = 500;
/// CPU of `cleanup_mnt` outside `deactivate_super` (fsnotify, `dput` of the
/// root, freeing the mount id), ns: 0.5 us. Estimate.
pub const CLEANUP_MNT_NS: Time = 500;

/// The mount at `mountpoint`, if one is attached there.
pub fn lookup_mount(m: &Machine, mountpoint: &str) -> Option<Rc<Mount>> {
    m.vfs().ns().mounts.borrow().get(mountpoint).cloned()
}

// -------------------------------------------------------------------- mount

/// mount(2) of a filesystem (`do_new_mount` -> `vfs_get_tree` ->
/// `vfs_create_mount` -> `do_add_mount`): if a superblock of this type on
/// `device` is still alive (e.g. after a lazy umount whose mounts are not yet
/// released), it is reused (`sget_dev` / `grab_super`); if it is shutting
/// down but still listed, the mount waits for SB_DEAD. Otherwise claims
/// `device` exclusively (EBUSY if another holder has it, e.g. a superblock
/// past the point where sget finds it), creates the superblock and attaches
/// a mount at `mountpoint` (EBUSY if a mount is already there: stacking is
/// not modelled).
pub async fn do_mount(
    m: &Rc<Machine>,
    mountpoint: &str,
    fs: Rc<dyn Filesystem>,
    device: Option<BlockDevice>,
    bdi_settings: BdiSettings,
) -> Result<Rc<Mount>, Errno> {
    m.sched().cpu(MOUNT_SYSCALL_NS).await;
    // sget_dev: a live superblock of this type on this device is reused
    // (grab_super takes an active reference), so the device is not opened
    // again; one whose last active reference is gone is waited for until
    // SB_DEAD, and then a new one is set up.
    if let Some(dev) = &device {
        while let Some(old) = m.vfs().supers().into_iter().find(|s| {
            s.fs.name() == fs.name() && s.device.as_ref().is_some_and(|d| d.name() == dev.name())
        }) {
            if grab_super(&old) {
                return attach_mount(m, mountpoint, old, None).await;
            }
            let o = old.clone();
            m.vars()
                .wait_var_event(m.sim(), old.s_flags_key(), move || o.dead())
                .await;
        }
    }
    // get_tree_bdev: open the device with the superblock as exclusive holder.
    let claim = m.new_id();
    if let Some(dev) = &device {
        if let Err(e) = dev.bd_claim(claim, &format!("mount {mountpoint}")) {
            m.vfs().ns().count(|s| s.device_ebusy += 1);
            return Err(e);
        }
    }
    let guard = m.vfs().ns().namespace_sem.down_write().await; // namespace_lock
    if m.vfs().ns().mounts.borrow().contains_key(mountpoint) {
        if let Some(dev) = &device {
            dev.bd_release(claim);
        }
        namespace_unlock(m, guard, false).await;
        return Err(Errno::EBUSY);
    }
    let sb = sget(m, mountpoint, fs, device.clone(), bdi_settings);
    if let Some(dev) = &device {
        // The holder is the superblock (fs_holder_ops): move the claim to it.
        dev.bd_release(claim);
        let _ = dev.bd_claim(sb.id, &format!("sb {} ({})", mountpoint, sb.fs.name()));
    }
    attach_mount(m, mountpoint, sb, Some(guard)).await
}

/// `grab_super`: an active reference on a superblock that still has one
/// (not shutting down). False if its last active reference is gone.
fn grab_super(sb: &Rc<SuperBlock>) -> bool {
    let live = sb.s_active.get() > 0 && sb.s_flags.get() & super_flags::SB_DYING == 0;
    if live {
        sb.s_active.set(sb.s_active.get() + 1);
    }
    live
}

/// `vfs_create_mount` + `do_add_mount`: a mount of `sb` attached at
/// `mountpoint` under `namespace_sem` (taken here unless the caller holds
/// it). EBUSY if a mount is already there (the active reference on `sb` is
/// dropped again).
async fn attach_mount(
    m: &Rc<Machine>,
    mountpoint: &str,
    sb: Rc<SuperBlock>,
    guard: Option<WriteGuard>,
) -> Result<Rc<Mount>, Errno> {
    let guard = match guard {
        Some(g) => g,
        None => {
            let g = m.vfs().ns().namespace_sem.down_write().await;
            if m.vfs().ns().mounts.borrow().contains_key(mountpoint) {
                namespace_unlock(m, g, false).await;
                deactivate_super(m, &sb).await;
                return Err(Errno::EBUSY);
            }
            g
        }
    };
    let mnt = Rc::new(Mount {
        id: m.new_id(),
        mountpoint: mountpoint.to_string(),
        sb,
        mnt_count: Cell::new(1),
        mnt_flags: Cell::new(0),
        attached: Cell::new(true),
    });
    m.vfs()
        .ns()
        .mounts
        .borrow_mut()
        .insert(mountpoint.to_string(), mnt.clone());
    m.vfs().ns().count(|s| s.mounts += 1);
    m.sim().trace("mount", || {
        format!("{} {} sb {}", mnt.mountpoint, mnt.sb.fs.name(), mnt.sb.id)
    });
    namespace_unlock(m, guard, false).await;
    Ok(mnt)
}

// --------------------------------------------------------------- references

/// `mntget`: takes a reference (an open file, a cwd: anything keeping the
/// mount busy). Release it with [`release_mount`] from a user task.
pub fn mntget(mnt: &Rc<Mount>) -> Rc<Mount> {
    mnt.mnt_count.set(mnt.mnt_count.get() + 1);
    mnt.clone()
}

/// `mntput` / `mntput_no_expire`: drops a reference. The final put of a
/// detached mount queues `cleanup_mnt`: as task_work of the current user task
/// (run by [`task_work_run`] before it returns to user space), or via
/// `delayed_mntput_work` one jiffy later from a kernel thread or outside a
/// task.
pub fn mntput(m: &Rc<Machine>, mnt: &Rc<Mount>) {
    let c = mnt.mnt_count.get();
    if c == 0 {
        m.violation(
            "mnt_count_underflow",
            ViolationObjects {
                mount: Some(mnt.mountpoint.clone()),
                ..ViolationObjects::default()
            },
            format!("mntput of {} with mnt_count already 0", mnt.mountpoint),
        );
        return;
    }
    mnt.mnt_count.set(c - 1);
    if mnt.attached.get() {
        return; // shouldn't be the last one
    }
    if c - 1 > 0 || mnt.mnt_flags.get() & mnt_flags::MNT_DOOMED != 0 {
        return;
    }
    mnt.set_flag(mnt_flags::MNT_DOOMED);
    match m.sim().current() {
        Some(task) if !m.sched().is_kthread(task) => {
            // task_work_add(current, __cleanup_mnt)
            m.vfs()
                .ns()
                .task_works
                .borrow_mut()
                .entry(task)
                .or_default()
                .push(mnt.clone());
        }
        _ => {
            let was_empty = {
                let mut l = m.vfs().ns().delayed_mntput_list.borrow_mut();
                l.push(mnt.clone());
                l.len() == 1
            };
            m.vfs().ns().count(|s| s.delayed_mntputs += 1);
            if was_empty {
                let work = delayed_mntput_work(m);
                queue_delayed_work(m.system_wq(), work, m.jiffy_ns());
            }
        }
    }
}

/// `task_work_run`: what the current task does on its way back to user space:
/// runs the `cleanup_mnt` of every mount whose final reference it dropped.
pub async fn task_work_run(m: &Rc<Machine>) {
    let Some(task) = m.sim().current() else {
        return;
    };
    loop {
        let works = m.vfs().ns().task_works.borrow_mut().remove(&task);
        let Some(works) = works else { break };
        for mnt in works {
            cleanup_mnt(m, &mnt).await;
        }
    }
}

/// Drops a reference taken with [`mntget`] from a user task and returns to
/// user space (what `close(2)` of the last file on the mount does): if it was
/// the last reference of a detached mount, the caller pays the shutdown.
pub async fn release_mount(m: &Rc<Machine>, mnt: &Rc<Mount>) {
    mntput(m, mnt);
    task_work_run(m).await;
}

/// `delayed_mntput_work`: runs `cleanup_mnt` of every mount on the list.
fn delayed_mntput_work(m: &Rc<Machine>) -> &DelayedWork {
    m.vfs().ns().delayed_mntput_work.get_or_init(|| {
        let wm: Weak<Machine> = Rc::downgrade(m);
        DelayedWork::new("delayed_mntput", move || {
            let wm = wm.clone();
            async move {
                let Some(m) = wm.upgrade() else { return };
                let list = std::mem::take(&mut *m.vfs().ns().delayed_mntput_list.borrow_mut());
                for mnt in list {
                    cleanup_mnt(&m, &mnt).await;
                }
            }
        })
    })
}

/// `cleanup_mnt`: deactivates the superblock (the last mount of it shuts it
/// down), then frees the mount after a grace period (`delayed_free_vfsmnt`).
pub async fn cleanup_mnt(m: &Rc<Machine>, mnt: &Rc<Mount>) {
    m.sched().cpu(CLEANUP_MNT_NS).await;
    deactivate_super(m, &mnt.sb).await;
    m.rcu().call_rcu(|| {});
}

// ------------------------------------------------------------------- umount

/// umount(2) (`ksys_umount` -> `path_umount`), called from a user task: looks
/// the mount up (taking a reference), `do_umount`, drops the reference, and
/// runs task_work before returning, so a final mntput's shutdown is paid here.
/// `flags` are [`flags`] bits.
pub async fn path_umount(m: &Rc<Machine>, mnt: &Rc<Mount>, flags: u32) -> Result<(), Errno> {
    use self::flags::*;
    if flags & !(MNT_FORCE | MNT_DETACH | MNT_EXPIRE | UMOUNT_NOFOLLOW) != 0 {
        return Err(Errno::EINVAL);
    }
    m.sched().cpu(UMOUNT_SYSCALL_NS).await;
    // user_path_mountpoint_at: a mount no longer attached is not found there.
    if !mnt.attached.get() {
        return Err(Errno::EINVAL);
    }
    if flags & MNT_EXPIRE != 0 {
        return Err(Errno::EINVAL); // expiry marks are not modelled
    }
    let path = mntget(mnt);
    let ret = do_umount(m, &path, flags).await;
    // dput_and_out: mntput_no_expire(mnt)
    mntput(m, &path);
    match ret {
        Ok(()) => m.vfs().ns().count(|s| {
            s.umounts += 1;
            if flags & MNT_DETACH != 0 {
                s.lazy_umounts += 1;
            }
        }),
        Err(Errno::EBUSY) => m.vfs().ns().count(|s| s.umount_ebusy += 1),
        Err(_) => {}
    }
    task_work_run(m).await; // exit_to_user_mode
    ret
}

/// umount(2) by mount point name: EINVAL if nothing is mounted there.
pub async fn umount(m: &Rc<Machine>, mountpoint: &str, flags: u32) -> Result<(), Errno> {
    match lookup_mount(m, mountpoint) {
        Some(mnt) => path_umount(m, &mnt, flags).await,
        None => {
            m.sched().cpu(UMOUNT_SYSCALL_NS).await;
            Err(Errno::EINVAL)
        }
    }
}

/// `do_umount`: under `namespace_sem`, the busy check (non-lazy) and
/// `umount_tree`; then `namespace_unlock`.
async fn do_umount(m: &Rc<Machine>, mnt: &Rc<Mount>, flags: u32) -> Result<(), Errno> {
    let lazy = flags & flags::MNT_DETACH != 0;
    let guard = m.vfs().ns().namespace_sem.down_write().await; // namespace_lock
    let ret = if lazy {
        if mnt.attached.get() {
            umount_tree(m, mnt, false).await;
        }
        Ok(())
    } else if mnt.mnt_count.get() > 2 {
        // propagate_mount_busy(mnt, 2): the attachment and our path only.
        Err(Errno::EBUSY)
    } else {
        if mnt.attached.get() {
            umount_tree(m, mnt, true).await;
        }
        Ok(())
    };
    namespace_unlock(m, guard, lazy).await;
    ret
}

/// `umount_tree` of one mount: MNT_UMOUNT (and MNT_SYNC_UMOUNT for a
/// non-lazy umount), out of the namespace, onto `unmounted`.
async fn umount_tree(m: &Rc<Machine>, mnt: &Rc<Mount>, sync: bool) {
    m.sched().cpu(UMOUNT_TREE_NS).await;
    mnt.set_flag(mnt_flags::MNT_UMOUNT);
    if sync {
        mnt.set_flag(mnt_flags::MNT_SYNC_UMOUNT);
    }
    mnt.attached.set(false);
    m.vfs().ns().mounts.borrow_mut().remove(&mnt.mountpoint);
    m.vfs().ns().unmounted.borrow_mut().push(mnt.clone());
    m.sim().trace("umount_tree", || {
        format!("{} sync={}", mnt.mountpoint, sync as u8)
    });
}

/// `namespace_unlock`: releases `namespace_sem`; if mounts were unmounted,
/// waits for readers of the mount tree (RCU path walks) to be done with them,
/// then drops the namespace's reference on each. `lazy` is an MNT_DETACH
/// umount. The two code paths of experiment E3 sit side by side here.
async fn namespace_unlock(m: &Rc<Machine>, guard: WriteGuard, lazy: bool) {
    let head = std::mem::take(&mut *m.vfs().ns().unmounted.borrow_mut());
    drop(guard); // up_write(&namespace_sem)
    if head.is_empty() {
        return;
    }
    match (lazy, m.policies().detach_release) {
        (true, DetachRelease::Deferred) => {
            // The patch: the list moves to a deferred_free_mounts released by
            // queue_rcu_work(system_wq) after a normal grace period; the caller
            // does not wait. The mntputs then run in a kworker (PF_KTHREAD),
            // so a final one goes through delayed_mntput_work.
            let list = Rc::new(RefCell::new(head));
            let wm: Weak<Machine> = Rc::downgrade(m);
            let rwork = RcuWork::new("defer_free_mounts", move || {
                let (wm, list) = (wm.clone(), list.clone());
                async move {
                    let Some(m) = wm.upgrade() else { return };
                    let mounts = std::mem::take(&mut *list.borrow_mut());
                    for mnt in &mounts {
                        mntput(&m, mnt);
                    }
                }
            });
            m.vfs().ns().count(|s| s.deferred_releases += 1);
            queue_rcu_work(m.rcu(), m.system_wq(), &rwork);
        }
        (true, DetachRelease::Sync) | (false, _) => {
            m.rcu().synchronize_rcu_expedited().await;
            for mnt in &head {
                mntput(m, mnt);
            }
        }
    }
}

// ------------------------------------------------------------ device reuse

/// Reusing a block device: an exclusive open as `mount` of it again or
/// reconfiguring/detaching its loop device does (`bd_prepare_to_claim`).
/// EBUSY while a superblock (mounted, or unmounted but not yet shut down)
/// holds it; otherwise the claim is taken and released at once.
///
/// Note: since 2.6, `LOOP_CLR_FD` on a loop device that others still have
/// open sets LO_FLAGS_AUTOCLEAR and returns 0 (detaching when the last opener
/// closes) rather than failing; the EBUSY here stands for the exclusive-open
/// path (a new mount, mkfs, `losetup` reconfiguring the device).
pub fn reuse_device(m: &Rc<Machine>, dev: &BlockDevice) -> Result<(), Errno> {
    let id = m.new_id();
    match dev.bd_claim(id, "reuse") {
        Ok(()) => {
            dev.bd_release(id);
            Ok(())
        }
        Err(e) => {
            m.vfs().ns().count(|s| s.device_ebusy += 1);
            Err(e)
        }
    }
}
