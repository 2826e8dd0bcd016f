//! `struct super_block`: one mounted filesystem instance (fs/super.c).
//!
//! Holds the filesystem type, its bdi, the `s_umount` rw_semaphore, SB_ACTIVE,
//! the active reference count (`s_active`), the inode table and the device.
//!
//! Shutdown (`deactivate_super` -> `deactivate_locked_super` -> `->kill_sb`
//! -> `generic_shutdown_super`) in the kernel's order: shrink the dcache,
//! `sync_filesystem` (real writeback of every dirty page at the device's
//! speed), clear SB_ACTIVE, `cgroup_writeback_umount`, `evict_inodes`,
//! `->put_super` (the filesystem's own unmount I/O), the "busy inodes after
//! unmount" check; then, with s_umount released, `bdi_unregister` for a
//! per-superblock bdi (SB_I_PERSB_BDI); then `kill_block_super` releases the
//! block device (its exclusive claim ends, so it can be reused).
//!
//! Simplified or left out: no dentries (each inode stands for one dentry, whose
//! reference `shrink_dcache_for_umount` drops), no fsnotify, security or
//! fscrypt teardown, no `s_dio_done_wq`, no superblock sharing between mounts
//! (every mount gets its own superblock: `sget` never finds an existing one),
//! no `SB_BORN` / `s_root` distinction (a superblock is born at `sget`), and
//! `sync_blockdev` of the device's own page cache is not modelled (it has
//! none). The model's `sget` gives every superblock its own bdi; for
//! filesystems without SB_I_PERSB_BDI the kernel's bdi belongs to the disk and
//! outlives the superblock, so here it is only dropped from the bdi list,
//! without `bdi_unregister`'s cost.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use sim::Time;

use crate::model::block::BlockDevice;
use crate::model::fs::fs_writeback::wb_workfn;
use crate::model::fs::fs_writeback::{cgroup_writeback_umount, inode_io_list_del};
use crate::model::fs::inode::{state, InodeRef};
use crate::model::fs::sync::{filemap_fdatawait, sync_filesystem};
use crate::model::fs::vfs::Filesystem;
use crate::model::fs::vfs::Machine;
pub use crate::model::fs::vfs::{flags, SuperBlock, TRUNCATE_PAGE_NS};
use crate::model::kernel::locking::rwsem::WriteGuard;
use crate::model::kernel::stats::{ViolationObjects, MAX_INODES};
use crate::model::mm::backing_dev::{bdi_drop, bdi_register, bdi_unregister, wb_put, Wb};
use crate::model::mm::filemap::Delta;
use crate::model::mm::memcontrol::mem_cgroup_uncharge_freed;
use crate::model::mm::page_writeback::account_delta;
use crate::model::mm::vmscan::LruFile;

/// CPU to drop one dentry in `shrink_dcache_for_umount` (d_walk, dentry_kill,
/// freeing), ns: 200 ns. Estimate (order of a `dput` of an unused dentry on
/// current x86 cores); no measurement behind it.
pub const SHRINK_DCACHE_DENTRY_NS: Time = 200;
/// CPU to evict one unused inode in `evict_inodes` (`evict`: list removals,
/// `->evict_inode`, `destroy_inode`), ns: 1 us. Estimate, order of magnitude.
pub const EVICT_INODE_NS: Time = 1_000;
/// Fixed CPU of `deactivate_locked_super` + `generic_shutdown_super` outside
/// the steps modelled one by one (shrinker unregistration, list_lru_destroy,
/// `put_filesystem`, sb freeing via RCU), ns: 1 us. Estimate; together with
/// the umount syscall's own costs it keeps a clean tmpfs umount(2) at a few
/// microseconds on the non-RT machine, as measured there (~5 us, docs/kernel-mechanics.md
/// §3.3) when the expedited grace period is short.
pub const SHUTDOWN_SUPER_BASE_NS: Time = 1_000;

/// `mount_bdev` / `mount_nodev` + `fill_super` in their simplest form: a new
/// superblock on `device` (None for tmpfs) with its bdi (the device's, one per
/// superblock here), SB_ACTIVE set. The mount lifecycle (namespace, umount)
/// builds on this.
pub fn sget(
    m: &Rc<Machine>,
    name: &str,
    fs: Rc<dyn Filesystem>,
    device: Option<BlockDevice>,
    bdi_settings: crate::model::mm::backing_dev::BdiSettings,
) -> Rc<SuperBlock> {
    use crate::model::kernel::locking::rwsem::RwSemaphore;
    let nr_ctx = m.policies().nr_wb_ctx.unwrap_or(1).max(1) as usize;
    let bdi_name = device
        .as_ref()
        .map_or_else(|| format!("tmpfs-{name}"), |d| d.name().to_string());
    let wm = Rc::downgrade(m);
    let bdi = bdi_register(
        m.mm(),
        &bdi_name,
        fs.has_writeback(),
        bdi_settings,
        if fs.has_writeback() { nr_ctx } else { 1 },
        move |wb: Rc<Wb>| {
            let wm = wm.clone();
            async move {
                if let Some(m) = wm.upgrade() {
                    wb_workfn(&m, &wb).await;
                }
            }
        },
    );
    if let Some(dev) = &device {
        dev.set_bdp_sleep_source(bdi.last_bdp_sleep.clone());
    }
    // The filesystem's setup of its bdi at mount (btrfs `open_ctree`: the
    // readahead window).
    bdi.ra_pages.set(fs.bdi_ra_pages(bdi.ra_pages.get()));
    let sb = Rc::new(SuperBlock {
        id: m.new_id(),
        name: name.to_string(),
        fs,
        bdi,
        device,
        s_umount: RwSemaphore::new(m.locks().class("s_umount"), m.sched()),
        s_flags: Cell::new(flags::SB_ACTIVE),
        inodes: RefCell::new(BTreeMap::new()),
        next_ino: Cell::new(1),
        data_regions: RefCell::new(BTreeSet::new()),
        uncommitted_regions: RefCell::new(Vec::new()),
        s_active: Cell::new(1),
        s_dead_at: Cell::new(None),
        s_isw_nr_in_flight: Cell::new(0),
        s_isw_torn_down: Cell::new(false),
    });
    m.vfs().super_add(sb.clone());
    sb
}

// ------------------------------------------------------------------ shutdown

/// `deactivate_super`: drops an active reference; the last one takes
/// `s_umount` for write and shuts the superblock down
/// (`deactivate_locked_super`).
pub async fn deactivate_super(m: &Rc<Machine>, sb: &Rc<SuperBlock>) {
    let left = sb.s_active.get().saturating_sub(1);
    sb.s_active.set(left);
    if left > 0 {
        return;
    }
    let guard = sb.s_umount.down_write().await;
    deactivate_locked_super(m, sb, guard).await;
}

/// `deactivate_locked_super`: `->kill_sb` (here always `kill_block_super` or
/// `kill_anon_super`/`kill_litter_super`: generic shutdown, then release the
/// device), then SB_DEAD.
pub async fn deactivate_locked_super(m: &Rc<Machine>, sb: &Rc<SuperBlock>, guard: WriteGuard) {
    m.sim().trace("sb_shutdown_start", || {
        format!("sb {} ({}) {}", sb.id, sb.fs.name(), sb.name)
    });
    generic_shutdown_super(m, sb, guard).await;
    // kill_block_super: sync_blockdev (no block-device page cache modelled),
    // then bdev_fput ends the exclusive claim.
    if let Some(dev) = &sb.device {
        dev.bd_release(sb.id);
    }
    m.sched().cpu(SHUTDOWN_SUPER_BASE_NS).await;
    sb.s_flags.set(sb.s_flags.get() | flags::SB_DEAD);
    sb.s_dead_at.set(Some(m.now()));
    // super_wake(sb, SB_DEAD): mounts waiting in sget_dev retry.
    m.vars().wake_up_var(sb.s_flags_key());
    m.sim().trace("sb_shutdown_end", || {
        format!("sb {} ({}) {}", sb.id, sb.fs.name(), sb.name)
    });
}

/// `generic_shutdown_super`, called with `s_umount` held for write (released
/// here, before the per-sb bdi is unregistered, as the kernel does). The
/// time of each phase (dcache + `sync_filesystem`, the drain, `evict_inodes`,
/// `->put_super`) is recorded for the results (`umount.phase.*`).
pub async fn generic_shutdown_super(m: &Rc<Machine>, sb: &Rc<SuperBlock>, guard: WriteGuard) {
    let phase = |name: &'static str, t0: Time| {
        m.vfs().record_shutdown_phase(&sb.name, name, m.now() - t0);
        m.now()
    };
    let t = m.now();
    sb.s_flags.set(sb.s_flags.get() | flags::SB_DYING);
    shrink_dcache_for_umount(m, sb).await;
    sync_filesystem(m, sb).await;
    let t = phase("sync_filesystem", t);
    sb.s_flags.set(sb.s_flags.get() & !flags::SB_ACTIVE);
    cgroup_writeback_umount(m, sb).await;
    let t = phase("cgroup_writeback_umount", t);
    // From here on no inode wb switch may touch this superblock's inodes.
    sb.s_isw_torn_down.set(true);
    evict_inodes(m, sb).await;
    let t = phase("evict_inodes", t);
    sb.fs.put_super(m, sb).await;
    phase("put_super", t);
    let busy = sb.inodes.borrow().len();
    if busy > 0 {
        let inodes = sb
            .inodes
            .borrow()
            .values()
            .take(MAX_INODES)
            .map(|i| i.ino)
            .collect();
        m.violation(
            "busy_inodes_after_umount",
            ViolationObjects {
                superblock: Some(sb.id),
                superblock_name: Some(sb.name.clone()),
                fs_type: Some(sb.fs.name().to_string()),
                inodes,
                ..ViolationObjects::default()
            },
            format!(
                "VFS: Busy inodes after unmount of {} ({}): {busy} inode(s)",
                sb.name,
                sb.fs.name()
            ),
        );
    }
    // hlist_del_init(&sb->s_instances): no longer found by sync(2) and the
    // flusher's superblock lookups.
    m.vfs().super_del(sb.id);
    drop(guard); // super_unlock_excl
    if sb.fs.per_sb_bdi() {
        bdi_unregister(m.mm(), &sb.bdi).await;
    } else {
        bdi_drop(m.mm(), &sb.bdi);
    }
}

/// `shrink_dcache_for_umount`: drops every dentry, and with it the dentry's
/// reference on its inode (here: one dentry per inode).
pub async fn shrink_dcache_for_umount(m: &Rc<Machine>, sb: &Rc<SuperBlock>) {
    let inodes: Vec<InodeRef> = sb.inodes.borrow().values().cloned().collect();
    m.sched()
        .cpu(inodes.len() as Time * SHRINK_DCACHE_DENTRY_NS)
        .await;
    for inode in &inodes {
        let mut st = inode.st.borrow_mut();
        st.i_count = st.i_count.saturating_sub(1);
    }
}

/// `evict_inodes`: evicts every inode nobody references (i_count 0): waits for
/// writeback of its pages, takes it off its wb's lists, frees its pages, and
/// drops it from the superblock. Referenced inodes stay (and are reported
/// as busy after `put_super`).
pub async fn evict_inodes(m: &Rc<Machine>, sb: &Rc<SuperBlock>) {
    use state::{I_FREEING, I_NEW, I_SYNC, I_WILL_FREE};
    let inodes: Vec<InodeRef> = sb.inodes.borrow().values().cloned().collect();
    for inode in inodes {
        {
            let mut st = inode.st.borrow_mut();
            if st.i_count > 0 || st.i_state & (I_NEW | I_FREEING | I_WILL_FREE) != 0 {
                continue;
            }
            st.i_state |= I_FREEING;
        }
        m.sched().cpu(EVICT_INODE_NS).await;
        evict(m, sb, &inode).await;
        // inode_wait_for_writeback in evict(): I_SYNC must be clear.
        let i2 = inode.clone();
        inode
            .i_wb_wait
            .wait_event(m.sim(), move || !i2.has(I_SYNC))
            .await;
    }
}

/// `iput_final` of an unlinked inode (`i_nlink` 0) whose last reference
/// went: `evict` at once (no LRU caching of a deleted inode), pages under
/// writeback waited for, dirty ones discarded (`truncate_inode_pages_final`
/// cancels their dirtiness: an unlinked file's data is never written).
/// The filesystem's freeing of the file's blocks (xfs inactivation, ext4's
/// orphan handling) is left out.
pub async fn iput_final_unlinked(m: &Rc<Machine>, sb: &Rc<SuperBlock>, inode: &InodeRef) {
    use state::{I_FREEING, I_SYNC};
    {
        let mut st = inode.st.borrow_mut();
        if st.i_state & I_FREEING != 0 {
            return;
        }
        st.i_state |= I_FREEING;
    }
    m.sched().cpu(EVICT_INODE_NS).await;
    evict_as(m, sb, inode, false).await;
    let i2 = inode.clone();
    inode
        .i_wb_wait
        .wait_event(m.sim(), move || !i2.has(I_SYNC))
        .await;
}

/// `evict`: off the writeback lists, `truncate_inode_pages_final` (waits for
/// pages under writeback), out of the superblock's inode list.
async fn evict(m: &Rc<Machine>, sb: &Rc<SuperBlock>, inode: &InodeRef) {
    evict_as(m, sb, inode, true).await;
}

/// The bookkeeping of `truncate_inode_pages(mapping, 0)` once no page is
/// under writeback: every page of `inode` leaves the page cache (dirty ones
/// discarded), is uncharged from its memcg and leaves the page counters
/// (shmem's for a filesystem without writeback). Returns the change; the
/// caller pays the CPU (truncate and eviction alike).
pub fn truncate_inode_pages_all(m: &Rc<Machine>, sb: &SuperBlock, inode: &InodeRef) -> Delta {
    let d = inode.mapping.borrow_mut().truncate_all();
    mem_cgroup_uncharge_freed(m.mm(), inode.memcg.get(), d.cached);
    if sb.bdi.can_writeback {
        account_delta(m.mm(), inode.wb().as_ref(), &d);
    } else {
        m.mm().vm_add_shmem(d.cached);
    }
    d
}

/// [`evict`]; `at_umount`: dirty pages left are data lost (a violation),
/// else (an unlinked file) they are simply dropped.
async fn evict_as(m: &Rc<Machine>, sb: &Rc<SuperBlock>, inode: &InodeRef, at_umount: bool) {
    if let Some(wb) = inode.wb() {
        inode_io_list_del(inode, &wb);
    }
    let wb_ref = inode.wb();
    filemap_fdatawait(m, inode).await;
    if !at_umount {
        sb.fs.evict_blocks(sb, inode);
        sb.release_data_region(inode.disk_base);
    }
    let d = truncate_inode_pages_all(m, sb, inode);
    if let Some(mc) = m.mm().memcgs().get(inode.memcg.get()) {
        mc.lru_del(inode.lru_key());
    }
    let freed = (-d.cached).max(0) as Time;
    if d.dirty != 0 && at_umount {
        m.violation(
            "dirty_data_lost_at_umount",
            ViolationObjects {
                superblock: Some(sb.id),
                superblock_name: Some(sb.name.clone()),
                fs_type: Some(sb.fs.name().to_string()),
                inodes: vec![inode.ino],
                wb: wb_ref.as_ref().map(|w| w.id),
                memcg: wb_ref.as_ref().map(|w| w.memcg_id.get()),
                ..ViolationObjects::default()
            },
            format!(
                "dirty data lost at umount of {} ({}): inode {} had {} dirty page(s)",
                sb.name,
                sb.fs.name(),
                inode.ino,
                -d.dirty
            ),
        );
    }
    {
        let mut st = inode.st.borrow_mut();
        st.i_state &= !state::I_DIRTY;
        st.i_state |= state::I_CLEAR;
    }
    sb.inodes.borrow_mut().remove(&inode.ino);
    // inode_detach_wb: the inode's reference on its wb.
    if let Some(wb) = wb_ref {
        wb_put(m.mm(), &wb);
    }
    if freed > 0 {
        m.sched().cpu(freed * sb.fs.costs().evict_page_ns).await;
    }
}
