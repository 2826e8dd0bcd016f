//! `struct inode` as writeback sees it: `i_state` flags, `dirtied_when`, the wb
//! it belongs to and its place on that wb's lists, and its page cache
//! (include/linux/fs.h, fs/inode.c).
//!
//! Left out: the dentry cache, permissions, timestamps other than dirtied_when
//! and dirtied_time_when, and the inode hash (an inode is "hashed" while it is
//! in its superblock's table).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use sim::Time;

use crate::model::fs::extent::ExtentMap;
use crate::model::kernel::locking::RwSemaphore;
use crate::model::kernel::wait::WaitQueue;
use crate::model::kernel::workqueue::Work;
use crate::model::mm::backing_dev_defs::{IoList, ListEntry, Wb};
use crate::model::mm::filemap::AddressSpace;
use crate::model::mm::vmscan::LruFile;

/// `i_state` bits (include/linux/fs.h).
pub mod state {
    pub const I_DIRTY_SYNC: u32 = 1 << 0;
    pub const I_DIRTY_DATASYNC: u32 = 1 << 1;
    pub const I_DIRTY_PAGES: u32 = 1 << 2;
    pub const I_NEW: u32 = 1 << 3;
    pub const I_WILL_FREE: u32 = 1 << 4;
    pub const I_FREEING: u32 = 1 << 5;
    pub const I_CLEAR: u32 = 1 << 6;
    pub const I_SYNC: u32 = 1 << 7;
    pub const I_DIRTY_TIME: u32 = 1 << 11;
    pub const I_WB_SWITCH: u32 = 1 << 13;
    pub const I_SYNC_QUEUED: u32 = 1 << 17;
    /// I_DIRTY_INODE: metadata dirty.
    pub const I_DIRTY_INODE: u32 = I_DIRTY_SYNC | I_DIRTY_DATASYNC;
    /// I_DIRTY: any dirtiness that puts the inode on b_dirty.
    pub const I_DIRTY: u32 = I_DIRTY_INODE | I_DIRTY_PAGES;
}

/// Mutable inode state, under `i_lock` in the kernel.
pub struct InodeState {
    pub i_state: u32,
    /// When the inode was first dirtied (jiffies in the kernel; ns here).
    pub dirtied_when: Time,
    pub dirtied_time_when: Time,
    /// The wb the inode is attached to (`inode->i_wb`).
    pub wb: Option<Rc<Wb>>,
    /// Which list of `wb` it is on and its key there (`inode->i_io_list`).
    pub io_list: Option<(IoList, i64)>,
    /// File size, bytes.
    pub i_size: u64,
    /// References (`i_count`).
    pub i_count: u32,
    /// Last access for the clean-page LRU (reclaim picks the oldest inode).
    pub last_access: Time,
    /// When mtime and ctime were last set (creation, then the writes that
    /// changed them), ns; they hold the coarse clock of that jiffy.
    pub cmtime: Time,
}

/// One inode.
pub struct Inode {
    pub ino: u64,
    /// Id of the superblock it belongs to.
    pub sb_id: u64,
    pub st: RefCell<InodeState>,
    pub mapping: RefCell<AddressSpace>,
    /// Waiters for writeback of this inode's pages to end and for I_SYNC to
    /// clear (`folio_wait_writeback`, `inode_wait_for_writeback`).
    pub i_wb_wait: WaitQueue,
    /// Byte offset of this file's data on the device (files are laid out
    /// contiguously, so sequential files produce sequential I/O).
    pub disk_base: u64,
    /// Writeback context chosen for this inode (fixed for its lifetime).
    pub wb_ctx: Cell<usize>,
    /// `i_rwsem` (XFS's IOLOCK): a buffered write holds it exclusive for
    /// the whole write, balance_dirty_pages included (`inode_lock` in
    /// `xfs_file_buffered_write`, `ext4_buffered_write_iter`,
    /// `generic_file_write_iter`), so writers of one file take turns.
    pub i_rwsem: RwSemaphore,
    /// The filesystem's lock on the inode's extent map (XFS `i_lock`, the
    /// ILOCK; ext4 `i_data_sem`): buffered writes map their range under it,
    /// writeback looks blocks up under it shared, allocation and unwritten
    /// conversion hold it exclusive.
    pub ilock: RwSemaphore,
    /// Which pages have blocks, and which of those are unwritten.
    pub extents: RefCell<ExtentMap>,
    /// Completed ioends waiting for task-context completion (XFS
    /// `i_ioend_list`): page ranges `[start, end)`.
    pub ioend_list: RefCell<Vec<(u64, u64)>>,
    /// The per-inode completion work (XFS `i_ioend_work`), created on first use.
    pub ioend_work: RefCell<Option<Work>>,
    /// Id of the memcg its page cache is charged to (`folio_memcg`, one per
    /// file: the first task to add a page charges it); 0 until then.
    pub memcg: Cell<u64>,
    /// Foreign-inode detection state (`i_wb_frn_winner`,
    /// `i_wb_frn_avg_time`, `i_wb_frn_history`), kept by
    /// `wbc_detach_inode` and reset by a switch.
    pub frn: Cell<WbFrn>,
}

/// An inode's foreign-inode detection state (include/linux/fs.h).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WbFrn {
    /// `i_wb_frn_winner`: memcg id of the last round's winner.
    pub winner: u64,
    /// `i_wb_frn_avg_time`: running average of a round's winner I/O time,
    /// in units of 1/8192 s (`WB_FRN_TIME_SHIFT`), at most `U16_MAX`.
    pub avg_time: u16,
    /// `i_wb_frn_history`: 16 slots of 1/8 s of I/O time, newest in the
    /// low bits; a set bit is foreign time.
    pub history: u16,
}

/// Shared handle on an inode.
pub type InodeRef = Rc<Inode>;

impl LruFile for Inode {
    fn lru_key(&self) -> (Time, u64, u64) {
        (self.st.borrow().last_access, self.sb_id, self.ino)
    }
    fn mapping(&self) -> &RefCell<AddressSpace> {
        &self.mapping
    }
    fn lru_wb(&self) -> Option<Rc<Wb>> {
        self.wb()
    }
    fn memcg_id(&self) -> u64 {
        self.memcg.get()
    }
}

/// The inode behind an entry of a wb list (the kernel's `wb_inode()`:
/// `list_entry(head, struct inode, i_io_list)`). Only inodes are put on wb
/// lists, so the entry is always one.
pub fn wb_inode(e: &ListEntry) -> InodeRef {
    e.clone()
        .downcast::<Inode>()
        .unwrap_or_else(|_| unreachable!("a wb list holds only inodes"))
}

impl Inode {
    pub fn new(
        ino: u64,
        sb_id: u64,
        disk_base: u64,
        now: Time,
        (i_rwsem, ilock): (RwSemaphore, RwSemaphore),
    ) -> InodeRef {
        Rc::new(Inode {
            ino,
            sb_id,
            st: RefCell::new(InodeState {
                i_state: 0,
                dirtied_when: 0,
                dirtied_time_when: 0,
                wb: None,
                io_list: None,
                i_size: 0,
                i_count: 1,
                last_access: now,
                cmtime: now,
            }),
            mapping: RefCell::new(AddressSpace::new()),
            i_wb_wait: WaitQueue::new(&format!("inode:{ino}:writeback")),
            disk_base,
            wb_ctx: Cell::new(0),
            i_rwsem,
            ilock,
            extents: RefCell::new(ExtentMap::new()),
            ioend_list: RefCell::new(Vec::new()),
            ioend_work: RefCell::new(None),
            memcg: Cell::new(0),
            frn: Cell::new(WbFrn::default()),
        })
    }

    /// Tests an `i_state` bit.
    pub fn has(&self, bit: u32) -> bool {
        self.st.borrow().i_state & bit != 0
    }

    /// The inode's wb (`inode_to_wb`).
    pub fn wb(&self) -> Option<Rc<Wb>> {
        self.st.borrow().wb.clone()
    }
}
