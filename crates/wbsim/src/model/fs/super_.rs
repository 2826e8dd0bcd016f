//! `struct super_block`: one mounted filesystem instance (fs/super.c).
//!
//! Holds the filesystem type, its bdi, the `s_umount` rw_semaphore, SB_ACTIVE,
//! the inode table and the device. The shutdown path (generic_shutdown_super)
//! and mount/umount live in the mount lifecycle modules.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use crate::model::block::BlockDevice;
use crate::model::fs::inode::{Inode, InodeRef};
use crate::model::fs::Filesystem;
use crate::model::kernel::locking::rwsem::RwSemaphore;
use crate::model::mm::backing_dev::Bdi;

/// `sb->s_flags` bits used here.
pub mod flags {
    /// SB_ACTIVE: the superblock is live (cleared at the start of shutdown).
    pub const SB_ACTIVE: u32 = 1 << 30;
    pub const SB_RDONLY: u32 = 1 << 0;
}

/// One superblock.
pub struct SuperBlock {
    pub id: u64,
    /// Name given in the scenario (its mount point).
    pub name: String,
    pub fs: Rc<dyn Filesystem>,
    pub bdi: Rc<Bdi>,
    pub device: Option<BlockDevice>,
    pub s_umount: RwSemaphore,
    pub s_flags: Cell<u32>,
    /// `sb->s_inodes`, by inode number.
    pub inodes: RefCell<BTreeMap<u64, InodeRef>>,
    pub next_ino: Cell<u64>,
}

impl SuperBlock {
    /// Whether SB_ACTIVE is set.
    pub fn active(&self) -> bool {
        self.s_flags.get() & flags::SB_ACTIVE != 0
    }

    /// Looks up or creates the inode of file `name` (files are numbered in the
    /// order they are first opened).
    pub fn iget(&self, ino: u64) -> Option<InodeRef> {
        self.inodes.borrow().get(&ino).cloned()
    }

    /// Allocates a new inode (`new_inode` + `insert_inode_hash`).
    pub fn new_inode(&self, now: sim::Time) -> InodeRef {
        let ino = self.next_ino.get();
        self.next_ino.set(ino + 1);
        let base = self.fs.place_file(self, ino);
        let inode = Inode::new(ino, self.id, base, now);
        self.inodes.borrow_mut().insert(ino, inode.clone());
        inode
    }
}

/// `mount_bdev` / `mount_nodev` + `fill_super` in their simplest form: a new
/// superblock on `device` (None for tmpfs) with its bdi (the device's, one per
/// superblock here), SB_ACTIVE set. The mount lifecycle (namespace, umount)
/// builds on this.
pub fn sget(
    m: &Rc<crate::model::machine::Machine>,
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
    let bdi = crate::model::fs::fs_writeback::bdi_register(
        m,
        &bdi_name,
        fs.has_writeback(),
        bdi_settings,
        if fs.has_writeback() { nr_ctx } else { 1 },
    );
    let sb = Rc::new(SuperBlock {
        id: m.new_id(),
        name: name.to_string(),
        fs,
        bdi,
        device,
        s_umount: RwSemaphore::new(m.locks.class("s_umount"), &m.sched),
        s_flags: Cell::new(flags::SB_ACTIVE),
        inodes: RefCell::new(BTreeMap::new()),
        next_ino: Cell::new(1),
    });
    m.supers.borrow_mut().insert(sb.id, sb.clone());
    sb
}
