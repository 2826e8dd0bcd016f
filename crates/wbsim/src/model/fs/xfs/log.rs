//! The XFS log as a mechanism: transaction reservations on the grant head,
//! the committed item list (CIL) and its checkpoints, and the active item
//! list (AIL) with xfsaild writing metadata back so that the log tail moves.
//!
//! Mirrors, in the kernel:
//! - fs/xfs/xfs_log.c: `xfs_log_reserve` / `xlog_grant_head_check` /
//!   `xlog_grant_head_wait` (a reservation of `logres * logcount` bytes for a
//!   permanent transaction is taken on the reserve grant head; when the
//!   space between the head and the log tail is short, or somebody already
//!   waits, the task sleeps in FIFO order until `xfs_log_space_wake` finds
//!   room), `xlog_grant_push_threshold` (push the AIL so that a quarter of
//!   the log is free), `xfs_log_ticket_ungrant` (the unused part of a
//!   reservation goes back at commit), iclog writes of `logbsize` bytes.
//! - fs/xfs/xfs_log_cil.c: `xlog_cil_commit` / `xlog_cil_insert_items` (an
//!   item relogged within one checkpoint is held once, only its growth is
//!   charged), `xlog_cil_push_background` (a push is queued once the CIL
//!   holds `XLOG_CIL_SPACE_LIMIT` = min(log / 8, 32 MiB) bytes; a committer
//!   sleeps on `xc_push_wait` once it holds twice that,
//!   `XLOG_CIL_BLOCKING_SPACE_LIMIT`, or while others sleep there, until
//!   the push work has switched to a new context), `xlog_cil_push_work`
//!   (the checkpoint formatted into iclogs; the commit record's iclog
//!   written with REQ_PREFLUSH | REQ_FUA after the earlier iclogs), and
//!   `xlog_cil_committed` (the items enter the AIL at the checkpoint's LSN).
//! - fs/xfs/xfs_trans_ail.c: `xfsaild` pushing items up to the target LSN
//!   (pinned items, those in a checkpoint not yet on disk, are skipped and
//!   make it force the log), buffers written with `xfs_buf_delwri_submit`,
//!   an item leaving the AIL at its write completion, which moves the tail
//!   (`xfs_ail_update_finish` -> `xfs_log_space_wake`); the 30 s
//!   `xfs_log_worker` (xfs_log.c) forcing the log and pushing the whole AIL.
//! - fs/xfs/libxfs/xfs_trans_resv.c: the `tr_write` reservation; its value
//!   for E4's geometry is measured (see [`XFS_TR_WRITE_LOGRES`]).
//!
//! LSNs are byte offsets into an endless log (cycle and block folded
//! together), so the space in use is `head - tail`.
//!
//! Left out: the write grant head (only the reserve head is checked; they
//! differ by the unit reservations of permanent transactions, not by what
//! blocks a waiter); rolling transactions re-reserving (`xfs_trans_roll`,
//! one reservation per transaction here); the iclog state machine (at most
//! eight iclogs, `l_iclog_bufs`, in flight: a checkpoint's iclogs are
//! submitted together); log covering when idle (`xfs_log_need_covered`:
//! the 30 s worker here always forces and pushes, [`XFS_LOG_WORKER_NS`]);
//! the push worker is a kthread rather than a work item on the
//! `xfs-cil` workqueue; the buffer lock held across an AIL
//! write (a transaction wanting a buffer under writeback would wait for
//! the I/O); buffer and inode item details beyond their logged size (dirty
//! bitmaps are an average, see [`XlogItemKind::formatted_bytes`]); CPU of
//! buffer I/O completion.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::rc::Rc;

use sim::{Sim, Time, USEC};

use crate::model::block::{Bio, BioFlags, BlockDevice as Device};
use crate::model::kernel::sched::{CgroupId, Sched};
use crate::model::kernel::wait::WaitQueue;

/// The flags of an iclog write (`xlog_write_iclog`): `REQ_SYNC | REQ_META |
/// REQ_IDLE`, so writeback throttling never holds it.
pub const XLOG_ICLOG_FLAGS: BioFlags = BioFlags {
    sync: true,
    meta: true,
    idle: true,
    ..BioFlags::NONE
};
/// An iclog that carries a commit record (or a forced one): also
/// `REQ_PREFLUSH | REQ_FUA`.
pub const XLOG_COMMIT_ICLOG_FLAGS: BioFlags = BioFlags {
    preflush: true,
    fua: true,
    ..XLOG_ICLOG_FLAGS
};

/// `tr_write` log reservation per unit, bytes: 109,048. MEASURED on this
/// host with xfsprogs 6.1.0: `mkfs.xfs -f -d agcount=4` of a 20 GiB image
/// (4 KiB blocks, 512-byte inodes, crc, finobt, reflink, rmapbt off), then
/// `xfs_db -r -c logres` ("type 0 logres 109048 logcount 4"); the kernel
/// computes the same (`xfs_calc_write_reservation`,
/// fs/xfs/libxfs/xfs_trans_resv.c).
pub const XFS_TR_WRITE_LOGRES: u64 = 109_048;
/// `tr_write` log count (`XFS_WRITE_LOG_COUNT_REFLINK` with reflink on): 4.
/// MEASURED with [`XFS_TR_WRITE_LOGRES`].
pub const XFS_TR_WRITE_LOGCOUNT: u64 = 4;
/// `tr_fsyncts` log reservation (timestamp updates), bytes: 760, log count
/// 0 (one unit). MEASURED on this host: `xfs_db -r -c logres` of a 4 GiB
/// image made by `mkfs.xfs -f -q` (xfsprogs 6.1.0 defaults: 4 AGs, 512-byte
/// inodes, crc, finobt, reflink): "type 25 logres 760 logcount 0", type 25
/// being `tr_fsyncts` in `struct xfs_trans_resv` order
/// (fs/xfs/libxfs/xfs_trans_resv.h, `xfs_calc_swrite_reservation`).
pub const XFS_TR_FSYNCTS_LOGRES: u64 = 760;
/// Log size of a 20 GiB filesystem, bytes: 64 MiB (16,384 blocks). MEASURED
/// with the same mkfs.xfs run (`xfs_db -c 'sb 0' -c 'p logblocks'`);
/// xfsprogs' `calculate_log_size` gives max(size / 2048, 64 MiB) for
/// filesystems this size.
pub const XFS_DEFAULT_LOG_BYTES: u64 = 64 << 20;
/// Largest checkpoint the CIL lets build before a background push, as
/// `XLOG_CIL_SPACE_LIMIT` (fs/xfs/xfs_log_priv.h): log / 8, capped at 16
/// times the largest iclog set (8 iclogs of 256 KiB: 32 MiB).
pub fn xlog_cil_space_limit(log_bytes: u64) -> u64 {
    (log_bytes >> 3).min(32 << 20)
}
/// Bytes of log record header per iclog: 512 (`xlog_rec_header`, one basic
/// block; fs/xfs/libxfs/xfs_log_format.h), plus one extended header per
/// further 32 KiB of iclog (`xlog_rec_ext_header`, log v2).
pub fn xlog_iclog_header_bytes(logbsize: u64) -> u64 {
    512 * logbsize.div_ceil(32 << 10).max(1)
}
/// Bytes of log operation header per logged region: 12 (`xlog_op_header`).
pub const XLOG_OP_HEADER_BYTES: u64 = 12;
/// CPU of formatting one item into iclogs in the CIL push work
/// (`xlog_write` of one log vector: op headers, iclog space), ns: 0.5 us.
/// Estimate.
pub const XLOG_PUSH_ITEM_NS: Time = 500;
/// CPU per KiB copied into iclogs by the push work (`xlog_write` memcpy),
/// ns: 0.25 us per KiB (about 4 GB/s). Estimate.
pub const XLOG_PUSH_KIB_NS: Time = 250;
/// CPU of inserting one item into the AIL at checkpoint completion
/// (`xfs_trans_committed_bulk`, `xfs_trans_ail_update_bulk`), ns: 0.3 us.
/// Estimate.
pub const XLOG_AIL_INSERT_NS: Time = 300;
/// CPU of xfsaild pushing one item (`xfsaild_push_item`: buffer trylock,
/// `xfs_buf_delwri_queue`; an inode is flushed into its cluster buffer), ns:
/// 1 us. Estimate.
pub const XFSAILD_ITEM_NS: Time = USEC;
/// Items xfsaild pushes in one pass before it submits its delwri list and
/// rechecks: 1,000. Estimate: `xfsaild_push` walks until its target or until
/// too many items are stuck; the bound only keeps one pass finite.
pub const XFSAILD_BATCH: usize = 1_000;
/// How long xfsaild sleeps between passes while its target is not reached:
/// 10 ms (`xfsaild_push` returns `tout = 10` ms; fs/xfs/xfs_trans_ail.c).
pub const XFSAILD_RETRY_NS: Time = 10_000 * USEC;
/// Period of `xfs_log_worker`, ns: 30 s (`xfs_syncd_centisecs` = 3000,
/// fs/xfs/xfs_globals.c). Each run forces the log without waiting and
/// pushes the whole AIL (`xfs_ail_push_all`), fs/xfs/xfs_log.c.
pub const XFS_LOG_WORKER_NS: Time = 30_000_000 * USEC;
/// Fraction of a btree block that holds records, as an average over the
/// block's life between splits (half full after a split, full before the
/// next): 3/4. Estimate.
const BTREE_FILL_NUM: u64 = 3;
const BTREE_FILL_DEN: u64 = 4;
/// XFS buffer log chunk (`XFS_BLF_CHUNK`): dirty regions of a buffer are
/// logged in 128-byte chunks.
pub const XFS_BLF_CHUNK: u64 = 128;
/// Bytes of a buffer item's format header with its dirty bitmap
/// (`xfs_buf_log_format`: 24 bytes and a 4 KiB block's 32-bit map words),
/// rounded with its op headers: 64. Estimate from the structure.
const BUF_FORMAT_BYTES: u64 = 64;
/// Bytes an inode item logs: its format header (56, `xfs_inode_log_format`),
/// the dinode core (176 bytes for v3 inodes) and the data fork root or
/// extents (up to 336 bytes of literal area; a btree root is small), with
/// op headers: 448. Estimate from the structures.
pub const XFS_INODE_ITEM_BYTES: u64 = 448;
/// Bytes an AGF buffer item logs: the header chunk (free counts, btree
/// roots and levels, `longest`) and the format header: 192.
pub const XFS_AGF_ITEM_BYTES: u64 = XFS_BLF_CHUNK + BUF_FORMAT_BYTES;
/// An inode cluster buffer, written back when an inode item is pushed:
/// 16 KiB (`XFS_INODE_BIG_CLUSTER_SIZE` 8 KiB scaled by 512-byte inodes,
/// `xfs_ialloc_setup_geometry`).
pub const XFS_INODE_CLUSTER_BYTES: u64 = 16 << 10;
/// Filesystem block (btree blocks), bytes.
pub const XFS_BLOCK_BYTES: u64 = 4096;
/// The AGF's sector, bytes (512-byte sectors, mkfs.xfs here).
pub const XFS_AGF_BYTES: u64 = 512;
/// Where metadata lives on the device for the model's bios (apart from data
/// and the log).
const META_OFFSET: u64 = 1 << 39;
/// Where the internal log lives on the device for the model's bios.
pub const LOG_DEVICE_OFFSET: u64 = 1 << 40;

/// What a log item is; sets how much it logs and what writing it back
/// costs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum XlogItemKind {
    /// An inode (`xfs_inode_log_item`): core and data fork.
    Inode,
    /// An AG's AGF header buffer.
    Agf,
    /// A by-block free space btree block.
    Bnobt,
    /// A by-size free space btree block.
    Cntbt,
    /// A bmap (extent map) btree block of an inode.
    Bmbt,
}

impl XlogItemKind {
    /// Bytes the item occupies in a checkpoint after it was logged `k`
    /// (>= 1) times in it. A btree block change shifts the records from the
    /// changed one to the end of the block, so one change dirties on average
    /// half the used part plus the header chunk; the union of `k` such
    /// random ranges covers `k / (k + 1)` of it (estimate). Inode and AGF
    /// items log the same regions each time.
    pub fn formatted_bytes(self, k: u32) -> u64 {
        match self {
            XlogItemKind::Inode => XFS_INODE_ITEM_BYTES,
            XlogItemKind::Agf => XFS_AGF_ITEM_BYTES,
            XlogItemKind::Bnobt | XlogItemKind::Cntbt | XlogItemKind::Bmbt => {
                let k = u64::from(k.max(1));
                let used = (XFS_BLOCK_BYTES - XFS_BLF_CHUNK) * BTREE_FILL_NUM / BTREE_FILL_DEN;
                BUF_FORMAT_BYTES + XFS_BLF_CHUNK + used * k / (k + 1)
            }
        }
    }

    /// Bytes written back in place when the AIL pushes the item.
    pub fn writeback_bytes(self) -> u64 {
        match self {
            XlogItemKind::Inode => XFS_INODE_CLUSTER_BYTES,
            XlogItemKind::Agf => XFS_AGF_BYTES,
            _ => XFS_BLOCK_BYTES,
        }
    }
}

/// One log item's identity: its kind, its owner (an inode number or an AG)
/// and its index among the owner's blocks of that kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct XlogItem {
    pub kind: XlogItemKind,
    pub owner: u64,
    pub index: u64,
}

impl XlogItem {
    pub fn new(kind: XlogItemKind, owner: u64, index: u64) -> Self {
        XlogItem { kind, owner, index }
    }

    /// A device offset for the item's in-place write (stable per item).
    fn daddr(&self) -> u64 {
        let h = mix(((self.kind as u64) << 56) ^ self.owner.rotate_left(20) ^ self.index);
        META_OFFSET + (h % (1 << 26)) * XFS_BLOCK_BYTES
    }
}

/// A 64-bit mixer (splitmix64's finaliser) for stable pseudo-random item
/// positions; no RNG draws, so runs stay deterministic.
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The log's sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XlogParams {
    /// Log size, bytes.
    pub log_bytes: u64,
    /// iclog size (`logbsize`), bytes.
    pub logbsize: u64,
}

impl Default for XlogParams {
    fn default() -> Self {
        XlogParams {
            log_bytes: XFS_DEFAULT_LOG_BYTES,
            logbsize: 32 << 10,
        }
    }
}

/// What the log did over a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XlogStats {
    /// Reservations taken.
    pub reservations: u64,
    /// Reservations that had to sleep for log space.
    pub grant_waits: u64,
    /// Time spent sleeping for log space, ns.
    pub grant_wait_ns: Time,
    /// Checkpoints written (CIL pushes).
    pub checkpoints: u64,
    /// Commits that slept on the CIL's blocking limit.
    pub cil_throttles: u64,
    /// Time commits slept on the CIL's blocking limit, ns.
    pub cil_throttle_ns: Time,
    /// Bytes written to the log (iclogs, headers included).
    pub log_bytes_written: u64,
    /// iclog writes.
    pub iclog_writes: u64,
    /// Items written back in place by xfsaild.
    pub ail_items_written: u64,
    /// Bytes written back in place by xfsaild.
    pub ail_bytes_written: u64,
    /// Items xfsaild found pinned (relogged, not yet on disk).
    pub ail_pinned: u64,
    /// Largest CIL size seen, bytes.
    pub cil_max_bytes: u64,
}

/// One item in the current checkpoint: times logged, bytes charged.
#[derive(Clone, Copy)]
struct CilEntry {
    logs: u32,
    bytes: u64,
}

struct State {
    /// Outstanding reservations on the reserve grant head, bytes.
    reserved: u64,
    /// Waiters for log space, FIFO (ids).
    grant_queue: VecDeque<u64>,
    next_waiter: u64,
    /// The current checkpoint's items.
    cil: BTreeMap<XlogItem, CilEntry>,
    cil_bytes: u64,
    /// Sequence of the current checkpoint (`xc_current_sequence`).
    cil_seq: u64,
    /// Highest sequence a push was asked for (`xc_push_seq`).
    push_seq: u64,
    /// Last checkpoint whose commit record is on disk.
    done_seq: u64,
    /// Items of checkpoints being written (pinned).
    pushing: BTreeMap<XlogItem, u32>,
    /// Log head: bytes ever placed in the log.
    head: u64,
    /// The head as of the last completed checkpoint (`l_last_sync_lsn`).
    last_sync: u64,
    /// The AIL: item -> LSN, and the same ordered by LSN.
    ail: BTreeMap<XlogItem, u64>,
    ail_by_lsn: BTreeSet<(u64, XlogItem)>,
    /// Items being written back by xfsaild.
    ail_inflight: BTreeSet<XlogItem>,
    /// xfsaild's push target LSN.
    ail_target: u64,
    stats: XlogStats,
}

struct Inner {
    sim: Sim,
    sched: Sched,
    dev: Option<Device>,
    p: XlogParams,
    /// Set at unmount: the push worker and xfsaild exit.
    dead: std::cell::Cell<bool>,
    st: RefCell<State>,
    /// Grant head waiters (`l_reserve_head.waiters`).
    grant_wq: WaitQueue,
    /// `xc_push_wait`: commits throttled at the blocking limit.
    push_wait: WaitQueue,
    /// The push worker's wakeup.
    push_work: WaitQueue,
    /// `xc_commit_wait`: log forces waiting for a checkpoint.
    commit_wait: WaitQueue,
    /// xfsaild's wakeup.
    ail_wake: WaitQueue,
    /// The log worker's wakeup when the log gets content.
    worker_wake: WaitQueue,
}

/// One mounted filesystem's log. Cheap to clone.
#[derive(Clone)]
pub struct Xlog(Rc<Inner>);

/// A transaction's log reservation (`xlog_ticket`); handed back at commit.
#[must_use]
pub struct XlogTicket {
    bytes: u64,
}

impl Xlog {
    /// The log of a filesystem on `dev` (None: nothing is written), with its
    /// CIL push worker and xfsaild started.
    pub fn new(sim: &Sim, sched: &Sched, dev: Option<Device>, p: XlogParams) -> Xlog {
        let log = Xlog(Rc::new(Inner {
            sim: sim.clone(),
            sched: sched.clone(),
            dev,
            p,
            dead: std::cell::Cell::new(false),
            st: RefCell::new(State {
                reserved: 0,
                grant_queue: VecDeque::new(),
                next_waiter: 0,
                cil: BTreeMap::new(),
                cil_bytes: 0,
                cil_seq: 1,
                push_seq: 0,
                done_seq: 0,
                pushing: BTreeMap::new(),
                head: 0,
                last_sync: 0,
                ail: BTreeMap::new(),
                ail_by_lsn: BTreeSet::new(),
                ail_inflight: BTreeSet::new(),
                ail_target: 0,
                stats: XlogStats::default(),
            }),
            grant_wq: WaitQueue::new("xlog_grant_head_wait"),
            push_wait: WaitQueue::new("xlog_cil_push_background"),
            push_work: WaitQueue::new("xlog_cil_push_work"),
            commit_wait: WaitQueue::new("xlog_cil_force_seq"),
            ail_wake: WaitQueue::new("xfsaild"),
            worker_wake: WaitQueue::new("xfs_log_worker"),
        }));
        let w = Rc::downgrade(&log.0);
        sched.spawn_daemon("xfs-cil", CgroupId::ROOT, 0, async move {
            loop {
                let Some(l) = w.upgrade().map(Xlog) else {
                    return;
                };
                let st = l.0.clone();
                l.0.push_work
                    .wait_event(&l.0.sim, move || {
                        let s = st.st.borrow();
                        st.dead.get() || (s.push_seq >= s.cil_seq && !s.cil.is_empty())
                    })
                    .await;
                if l.0.dead.get() {
                    return;
                }
                l.push_work_once().await;
            }
        });
        let w = Rc::downgrade(&log.0);
        sched.spawn_daemon("xfsaild", CgroupId::ROOT, 0, async move {
            loop {
                let Some(l) = w.upgrade().map(Xlog) else {
                    return;
                };
                let st = l.0.clone();
                l.0.ail_wake
                    .wait_event(&l.0.sim, move || st.dead.get() || st.ail_work_pending())
                    .await;
                if l.0.dead.get() {
                    return;
                }
                if l.xfsaild_push().await {
                    l.0.sim.sleep(XFSAILD_RETRY_NS).await;
                }
            }
        });
        // The kernel requeues the worker every 30 s whatever the log holds;
        // here it is armed only while the CIL or the AIL holds something
        // (an idle run does nothing), so that an idle machine's simulation
        // can end.
        let w = Rc::downgrade(&log.0);
        sched.spawn_daemon("xfs-log-worker", CgroupId::ROOT, 0, async move {
            loop {
                let Some(l) = w.upgrade().map(Xlog) else {
                    return;
                };
                let st = l.0.clone();
                l.0.worker_wake
                    .wait_event(&l.0.sim, move || {
                        let s = st.st.borrow();
                        st.dead.get() || !s.cil.is_empty() || !s.ail.is_empty()
                    })
                    .await;
                if l.0.dead.get() {
                    return;
                }
                l.0.sim.sleep(XFS_LOG_WORKER_NS).await;
                if l.0.dead.get() {
                    return;
                }
                l.log_worker();
            }
        });
        log
    }

    /// `xfs_log_worker`: an asynchronous log force (the CIL is pushed, no
    /// one waits) and `xfs_ail_push_all` (xfsaild's target becomes the
    /// newest item now in the AIL).
    fn log_worker(&self) {
        let mut s = self.0.st.borrow_mut();
        if !s.cil.is_empty() && s.push_seq < s.cil_seq {
            s.push_seq = s.cil_seq;
            self.0.push_work.wake_up_all();
        }
        if let Some((max, _)) = s.ail_by_lsn.iter().next_back() {
            let target = max + 1;
            if target > s.ail_target {
                s.ail_target = target;
                drop(s);
                self.0.ail_wake.wake_up_all();
            }
        }
    }

    /// The log's sizes.
    pub fn params(&self) -> XlogParams {
        self.0.p
    }

    /// What the log did so far.
    pub fn stats(&self) -> XlogStats {
        self.0.st.borrow().stats
    }

    /// Bytes of the log in use: from the tail to the reserve grant head
    /// (written checkpoints not yet behind the tail, the CIL, reservations).
    pub fn used_bytes(&self) -> u64 {
        self.0.used_bytes()
    }

    /// Bytes in the current checkpoint.
    pub fn cil_bytes(&self) -> u64 {
        self.0.st.borrow().cil_bytes
    }

    /// The log tail LSN.
    pub fn tail_lsn(&self) -> u64 {
        self.0.st.borrow().tail()
    }

    /// Items in the AIL.
    pub fn ail_len(&self) -> usize {
        self.0.st.borrow().ail.len()
    }

    /// `xfs_log_reserve` of `logres * logcount` bytes: taken at once when
    /// the log has room and nobody waits, else after sleeping in FIFO order
    /// behind earlier waiters; pushes the AIL first
    /// (`xlog_grant_push_ail`).
    pub async fn reserve(&self, logres: u64, logcount: u64) -> XlogTicket {
        let need = (logres * logcount.max(1)).min(self.0.p.log_bytes / 2);
        self.0.grant_push_ail(need);
        let fast = {
            let mut s = self.0.st.borrow_mut();
            s.stats.reservations += 1;
            if s.grant_queue.is_empty() && self.0.free_bytes_of(&s) >= need {
                s.reserved += need;
                true
            } else {
                false
            }
        };
        if fast {
            return XlogTicket { bytes: need };
        }
        let id = {
            let mut s = self.0.st.borrow_mut();
            let id = s.next_waiter;
            s.next_waiter += 1;
            s.grant_queue.push_back(id);
            s.stats.grant_waits += 1;
            id
        };
        let t0 = self.0.sim.now();
        let inner = self.0.clone();
        self.0
            .grant_wq
            .wait_event(&self.0.sim, move || {
                // xlog_grant_head_wait pushes the AIL before each sleep.
                inner.grant_push_ail(need);
                let mut s = inner.st.borrow_mut();
                if s.grant_queue.front() == Some(&id) && inner.free_bytes_of(&s) >= need {
                    s.grant_queue.pop_front();
                    s.reserved += need;
                    true
                } else {
                    false
                }
            })
            .await;
        self.0.st.borrow_mut().stats.grant_wait_ns += self.0.sim.now() - t0;
        // The next waiter may fit too (xlog_grant_head_wake walks on).
        self.0.grant_wq.wake_up_all();
        XlogTicket { bytes: need }
    }

    /// `xlog_cil_commit`: the transaction's `items` enter the current
    /// checkpoint (an item already in it is charged only for its growth),
    /// the rest of the reservation goes back, a background push is queued
    /// past the space limit, and past the blocking limit the caller sleeps
    /// until the push work has taken the checkpoint.
    pub async fn commit(&self, ticket: XlogTicket, items: &[XlogItem]) {
        let (limit, seq) = {
            let mut s = self.0.st.borrow_mut();
            let mut used = 0;
            for it in items {
                let e = s.cil.entry(*it).or_insert(CilEntry { logs: 0, bytes: 0 });
                e.logs += 1;
                let nb = it.kind.formatted_bytes(e.logs);
                let grow = nb.saturating_sub(e.bytes);
                e.bytes = e.bytes.max(nb);
                used += grow;
            }
            // The checkpoint keeps what the items took from the ticket
            // (xlog_cil_insert_items), the rest is ungranted.
            s.cil_bytes += used;
            s.reserved = s.reserved.saturating_sub(ticket.bytes);
            s.stats.cil_max_bytes = s.stats.cil_max_bytes.max(s.cil_bytes);
            if !items.is_empty() {
                self.0.worker_wake.wake_up_all();
            }
            let limit = xlog_cil_space_limit(self.0.p.log_bytes);
            if s.cil_bytes >= limit && s.push_seq < s.cil_seq {
                s.push_seq = s.cil_seq;
                self.0.push_work.wake_up_all();
            }
            (limit, s.cil_seq)
        };
        self.0.grant_wq.wake_up_all();
        let over = self.0.st.borrow().cil_bytes >= 2 * limit;
        if over || self.0.push_wait.waitqueue_active() {
            let t0 = self.0.sim.now();
            self.0.st.borrow_mut().stats.cil_throttles += 1;
            let inner = self.0.clone();
            self.0
                .push_wait
                .wait_event(&self.0.sim, move || inner.st.borrow().cil_seq > seq)
                .await;
            self.0.st.borrow_mut().stats.cil_throttle_ns += self.0.sim.now() - t0;
        }
    }

    /// `xfs_ail_push_all_sync` (unmount): forces the log, then has xfsaild
    /// write every item back and waits until the AIL is empty.
    pub async fn push_all_sync(&self) {
        self.force().await;
        {
            let mut s = self.0.st.borrow_mut();
            if s.ail.is_empty() {
                return;
            }
            s.ail_target = s.head + 1;
        }
        self.0.ail_wake.wake_up_all();
        let inner = self.0.clone();
        // Woken by each write completion (ail_write_done).
        self.0
            .commit_wait
            .wait_event(&self.0.sim, move || inner.st.borrow().ail.is_empty())
            .await;
    }

    /// Stops the push worker and xfsaild (`xfs_log_unmount`).
    pub fn shutdown(&self) {
        self.0.dead.set(true);
        self.0.worker_wake.wake_up_all();
        self.0.push_work.wake_up_all();
        self.0.ail_wake.wake_up_all();
    }

    /// `xfs_trans_cancel` of a transaction that logged nothing: the whole
    /// reservation goes back.
    pub fn cancel(&self, ticket: XlogTicket) {
        {
            let mut s = self.0.st.borrow_mut();
            s.reserved = s.reserved.saturating_sub(ticket.bytes);
        }
        self.0.grant_wq.wake_up_all();
    }

    /// `xfs_log_force(XFS_LOG_SYNC)`: pushes the current checkpoint and
    /// waits until its commit record is on disk. Returns whether anything
    /// was in the CIL.
    pub async fn force(&self) -> bool {
        let seq = {
            let mut s = self.0.st.borrow_mut();
            if s.cil.is_empty() {
                if s.done_seq + 1 >= s.cil_seq {
                    return false;
                }
                // A checkpoint is being written: wait for it.
                s.cil_seq - 1
            } else {
                s.push_seq = s.push_seq.max(s.cil_seq);
                self.0.push_work.wake_up_all();
                s.cil_seq
            }
        };
        let inner = self.0.clone();
        self.0
            .commit_wait
            .wait_event(&self.0.sim, move || inner.st.borrow().done_seq >= seq)
            .await;
        true
    }

    /// `xlog_cil_push_work` for one checkpoint: switch contexts (waking the
    /// throttled committers), format the items into iclogs, write them, the
    /// commit record's iclog last with PREFLUSH|FUA, then
    /// `xlog_cil_committed` inserts the items into the AIL.
    async fn push_work_once(&self) {
        let (items, bytes, seq) = {
            let mut s = self.0.st.borrow_mut();
            let items = std::mem::take(&mut s.cil);
            let bytes = std::mem::take(&mut s.cil_bytes);
            let seq = s.cil_seq;
            s.cil_seq += 1;
            for it in items.keys() {
                *s.pushing.entry(*it).or_insert(0) += 1;
            }
            s.stats.checkpoints += 1;
            (items, bytes, seq)
        };
        self.0.push_wait.wake_up_all();
        let n = items.len() as u64;
        // The checkpoint's start and commit records, op headers per item.
        let payload = bytes + (n + 2) * XLOG_OP_HEADER_BYTES;
        let logbsize = self.0.p.logbsize;
        let hdr = xlog_iclog_header_bytes(logbsize);
        let per_iclog = logbsize - hdr;
        let iclogs = payload.div_ceil(per_iclog).max(1);
        let written = payload + iclogs * hdr;
        let start_lsn = {
            let mut s = self.0.st.borrow_mut();
            let lsn = s.head;
            s.head += written;
            s.stats.log_bytes_written += written;
            s.stats.iclog_writes += iclogs;
            lsn
        };
        self.0
            .sched
            .cpu(n * XLOG_PUSH_ITEM_NS + (bytes >> 10) * XLOG_PUSH_KIB_NS)
            .await;
        if let Some(dev) = &self.0.dev {
            let lb = self.0.p.log_bytes;
            let at = |off: u64| LOG_DEVICE_OFFSET + (start_lsn + off) % lb;
            // Every iclog but the commit record's, in flight together.
            let left = Rc::new(std::cell::Cell::new(iclogs - 1));
            let done = WaitQueue::new("xlog_wait_on_iclog");
            for i in 0..iclogs - 1 {
                let (l2, d2) = (left.clone(), done.clone());
                dev.submit_bio(
                    Bio::write(at(i * logbsize), logbsize).with_flags(XLOG_ICLOG_FLAGS),
                    Box::new(move || {
                        l2.set(l2.get() - 1);
                        d2.wake_up_all();
                    }),
                )
                .await;
            }
            let l3 = left.clone();
            done.wait_event(&self.0.sim, move || l3.get() == 0).await;
            let last = written - (iclogs - 1) * logbsize;
            dev.submit_bio_wait(
                Bio::write(at((iclogs - 1) * logbsize), last.max(512))
                    .with_flags(XLOG_COMMIT_ICLOG_FLAGS),
            )
            .await;
        }
        self.0.sched.cpu(n * XLOG_AIL_INSERT_NS).await;
        {
            let mut s = self.0.st.borrow_mut();
            for it in items.keys() {
                if let Some(c) = s.pushing.get_mut(it) {
                    *c -= 1;
                    if *c == 0 {
                        s.pushing.remove(it);
                    }
                }
                // Insert or move forward (xfs_trans_ail_update_bulk).
                if let Some(old) = s.ail.insert(*it, start_lsn) {
                    s.ail_by_lsn.remove(&(old, *it));
                }
                s.ail_by_lsn.insert((start_lsn, *it));
            }
            s.last_sync = s.head.min(start_lsn + written);
            s.done_seq = s.done_seq.max(seq);
        }
        self.0.commit_wait.wake_up_all();
        self.0.grant_wq.wake_up_all();
        self.0.ail_wake.wake_up_all();
    }

    /// One xfsaild pass: writes back the unpinned items at or below the
    /// target, oldest first (at most [`XFSAILD_BATCH`]); pinned ones force
    /// the log. Returns whether the target is still ahead of the tail (the
    /// caller sleeps [`XFSAILD_RETRY_NS`] and goes again).
    async fn xfsaild_push(&self) -> bool {
        let (batch, pinned) = {
            let s = self.0.st.borrow();
            let mut batch = Vec::new();
            let mut pinned = 0u64;
            for (lsn, it) in s.ail_by_lsn.iter() {
                if *lsn >= s.ail_target || batch.len() >= XFSAILD_BATCH {
                    break;
                }
                if s.ail_inflight.contains(it) {
                    continue;
                }
                if s.cil.contains_key(it) || s.pushing.contains_key(it) {
                    pinned += 1;
                    continue;
                }
                batch.push((*it, *lsn));
            }
            (batch, pinned)
        };
        if pinned > 0 {
            let mut s = self.0.st.borrow_mut();
            s.stats.ail_pinned += pinned;
            // xfs_log_force(mp, 0): get the pinned items to disk.
            if !s.cil.is_empty() && s.push_seq < s.cil_seq {
                s.push_seq = s.cil_seq;
                self.0.push_work.wake_up_all();
            }
        }
        if batch.is_empty() {
            return pinned > 0 && self.0.st.borrow().ail_work_target_ahead();
        }
        {
            let mut s = self.0.st.borrow_mut();
            for (it, _) in &batch {
                s.ail_inflight.insert(*it);
            }
        }
        self.0.sched.cpu(batch.len() as u64 * XFSAILD_ITEM_NS).await;
        for (it, lsn) in batch {
            let bytes = it.kind.writeback_bytes();
            {
                let mut s = self.0.st.borrow_mut();
                s.stats.ail_items_written += 1;
                s.stats.ail_bytes_written += bytes;
            }
            let inner = self.0.clone();
            let done = move || inner.ail_write_done(it, lsn);
            match &self.0.dev {
                Some(dev) => {
                    dev.submit_bio(
                        // xfs_buf_submit: a delwri metadata buffer, REQ_META.
                        Bio::write(it.daddr(), bytes).with_flags(BioFlags::META),
                        Box::new(done),
                    )
                    .await
                }
                None => done(),
            }
        }
        self.0.st.borrow().ail_work_target_ahead()
    }
}

impl State {
    /// The log tail: the oldest item in the AIL, or the last synced head.
    fn tail(&self) -> u64 {
        self.ail_by_lsn
            .iter()
            .next()
            .map_or(self.last_sync, |(l, _)| *l)
    }

    /// Whether xfsaild's target is beyond the tail (it pushes the items
    /// below the target).
    fn ail_work_target_ahead(&self) -> bool {
        !self.ail.is_empty() && self.ail_target > self.tail()
    }
}

impl Inner {
    fn used_bytes(&self) -> u64 {
        let s = self.st.borrow();
        self.used_of(&s)
    }

    fn used_of(&self, s: &State) -> u64 {
        (s.head - s.tail()) + s.cil_bytes + s.reserved
    }

    fn free_bytes_of(&self, s: &State) -> u64 {
        self.p.log_bytes.saturating_sub(self.used_of(s))
    }

    /// Whether xfsaild has work: a target at or beyond the tail with items
    /// at or below it that are not already being written.
    fn ail_work_pending(&self) -> bool {
        let s = self.st.borrow();
        s.ail_work_target_ahead()
            && s.ail_by_lsn
                .iter()
                .take_while(|(l, _)| *l < s.ail_target)
                .any(|(_, it)| !s.ail_inflight.contains(it))
    }

    /// `xlog_grant_push_ail` with `xlog_grant_push_threshold`: when less
    /// than max(need, log / 4) is free, move xfsaild's target to that much
    /// past the tail (no further than the last synced LSN) and wake it.
    fn grant_push_ail(&self, need: u64) {
        let mut s = self.st.borrow_mut();
        let free = self.free_bytes_of(&s);
        let threshold = need.max(self.p.log_bytes / 4);
        if free >= threshold {
            return;
        }
        let target = (s.tail() + threshold).min(s.last_sync);
        if target > s.ail_target {
            s.ail_target = target;
            drop(s);
            self.ail_wake.wake_up_all();
        }
    }

    /// Buffer write completion (`xfs_buf_item_done` ->
    /// `xfs_trans_ail_delete`): the item leaves the AIL unless it was
    /// relogged meanwhile; a moved tail wakes log space waiters.
    fn ail_write_done(&self, it: XlogItem, lsn: u64) {
        let moved = {
            let mut s = self.st.borrow_mut();
            s.ail_inflight.remove(&it);
            let before = s.tail();
            if s.ail.get(&it) == Some(&lsn) {
                s.ail.remove(&it);
                s.ail_by_lsn.remove(&(lsn, it));
            }
            s.tail() != before
        };
        if moved {
            self.grant_wq.wake_up_all();
        }
        self.ail_wake.wake_up_all();
        self.commit_wait.wake_up_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::block::DeviceProfile;
    use crate::model::kernel::sched::SchedParams;

    /// Stops `log`'s kthreads after 1 s of simulated time, so that
    /// `sim.run()` ends (the 30 s log worker would run forever).
    fn stop_later(sim: &Sim, sched: &Sched, log: &Xlog) {
        let (s, l) = (sim.clone(), log.clone());
        sched.spawn("stop", CgroupId::ROOT, 0, async move {
            s.sleep(1_000_000 * USEC).await;
            l.shutdown();
        });
    }

    fn setup(log_bytes: u64, dev: bool) -> (Sim, Sched, Xlog) {
        let sim = Sim::new(1);
        let sched = Sched::new(&sim, SchedParams::for_cpus(4));
        let d = dev.then(|| Device::new(&sim, "nvme0n1", DeviceProfile::nvme_dc()));
        let log = Xlog::new(
            &sim,
            &sched,
            d,
            XlogParams {
                log_bytes,
                logbsize: 32 << 10,
            },
        );
        stop_later(&sim, &sched, &log);
        (sim, sched, log)
    }

    fn bmbt(ino: u64, i: u64) -> XlogItem {
        XlogItem::new(XlogItemKind::Bmbt, ino, i)
    }

    #[test]
    fn a_reservation_waits_when_the_grant_head_is_full() {
        // 1 MiB log; two tickets of 400 KiB fit, the third must wait until
        // one is given back.
        let (sim, sched, log) = setup(1 << 20, false);
        let got = Rc::new(RefCell::new(Vec::new()));
        for i in 0..3u64 {
            let (l, g, s) = (log.clone(), got.clone(), sim.clone());
            sched.spawn(&format!("t{i}"), CgroupId::ROOT, 0, async move {
                s.sleep(i * USEC).await;
                let t = l.reserve(100 << 10, 4).await;
                g.borrow_mut().push((i, s.now()));
                s.sleep(1_000 * USEC).await;
                l.commit(t, &[]).await;
            });
        }
        sim.run().unwrap();
        let g = got.borrow();
        assert_eq!(g.len(), 3);
        assert_eq!(g[2].0, 2);
        assert!(g[2].1 >= 1_000 * USEC, "third got space at {}", g[2].1);
        assert_eq!(log.stats().grant_waits, 1);
        assert_eq!(log.used_bytes(), 0);
    }

    #[test]
    fn waiters_are_served_in_fifo_order() {
        // A big request queued first is not overtaken by a small one that
        // would fit.
        let (sim, sched, log) = setup(1 << 20, false);
        let order = Rc::new(RefCell::new(Vec::new()));
        let (l, s) = (log.clone(), sim.clone());
        sched.spawn("holder", CgroupId::ROOT, 0, async move {
            let t = l.reserve(200 << 10, 4).await;
            s.sleep(1_000 * USEC).await;
            l.commit(t, &[]).await;
        });
        for (i, (res, at)) in [(300u64 << 10, 10u64), (10 << 10, 20)]
            .into_iter()
            .enumerate()
        {
            let (l, s, o) = (log.clone(), sim.clone(), order.clone());
            sched.spawn(&format!("w{i}"), CgroupId::ROOT, 0, async move {
                s.sleep(at * USEC).await;
                let t = l.reserve(res, 1).await;
                o.borrow_mut().push(i);
                l.commit(t, &[]).await;
            });
        }
        sim.run().unwrap();
        assert_eq!(*order.borrow(), vec![0, 1]);
    }

    #[test]
    fn a_relogged_item_counts_once_per_checkpoint() {
        let (sim, sched, log) = setup(64 << 20, false);
        let l = log.clone();
        sched.spawn("t", CgroupId::ROOT, 0, async move {
            for _ in 0..3 {
                let t = l.reserve(XFS_TR_WRITE_LOGRES, XFS_TR_WRITE_LOGCOUNT).await;
                l.commit(t, &[bmbt(1, 0)]).await;
            }
        });
        sim.run().unwrap();
        assert_eq!(log.cil_bytes(), XlogItemKind::Bmbt.formatted_bytes(3));
        assert!(log.cil_bytes() < 3 * XlogItemKind::Bmbt.formatted_bytes(1));
        assert_eq!(log.used_bytes(), log.cil_bytes());
    }

    #[test]
    fn the_cil_is_pushed_at_the_space_limit() {
        // 8 MiB log: limit 1 MiB. Distinct items until just past it.
        let (sim, sched, log) = setup(8 << 20, true);
        let limit = xlog_cil_space_limit(8 << 20);
        let per = XlogItemKind::Bmbt.formatted_bytes(1);
        let below = limit / per;
        let l = log.clone();
        let s = sim.clone();
        let seen = Rc::new(RefCell::new((0, 0)));
        let sn = seen.clone();
        sched.spawn("t", CgroupId::ROOT, 0, async move {
            for i in 0..below {
                let t = l.reserve(8 << 10, 1).await;
                l.commit(t, &[bmbt(1, i)]).await;
            }
            s.sleep(10_000 * USEC).await;
            let before = l.stats().checkpoints;
            let t = l.reserve(8 << 10, 1).await;
            l.commit(t, &[bmbt(1, below)]).await;
            s.sleep(10_000 * USEC).await;
            *sn.borrow_mut() = (before, l.stats().checkpoints);
        });
        sim.run().unwrap();
        assert_eq!(*seen.borrow(), (0, 1));
        assert_eq!(log.cil_bytes(), 0);
        assert_eq!(log.ail_len() as u64, below + 1);
        assert!(log.stats().iclog_writes >= limit / (32 << 10));
    }

    #[test]
    fn commits_are_throttled_at_twice_the_limit() {
        // One CPU, and a committer that charges no CPU between commits:
        // the push worker, queued at the space limit, runs only once the
        // committer sleeps, which it must do at twice the limit.
        let sim = Sim::new(1);
        let sched = Sched::new(&sim, SchedParams::for_cpus(1));
        let log = Xlog::new(
            &sim,
            &sched,
            None,
            XlogParams {
                log_bytes: 8 << 20,
                logbsize: 32 << 10,
            },
        );
        stop_later(&sim, &sched, &log);
        let limit = xlog_cil_space_limit(8 << 20);
        let per = XlogItemKind::Bmbt.formatted_bytes(1);
        let l = log.clone();
        let s = sim.clone();
        let peak = Rc::new(std::cell::Cell::new(0u64));
        let p2 = peak.clone();
        sched.spawn("committer", CgroupId::ROOT, 0, async move {
            for i in 0..(3 * limit / per) {
                let t = l.reserve(8 << 10, 1).await;
                l.commit(t, &[bmbt(1, i)]).await;
                p2.set(p2.get().max(l.cil_bytes()));
            }
            s.sleep(1_000 * USEC).await;
        });
        sim.run().unwrap();
        let st = log.stats();
        assert!(st.cil_throttles >= 1, "no throttle: {st:?}");
        assert!(peak.get() < 2 * limit + per, "peak {}", peak.get());
        assert!(st.cil_max_bytes >= 2 * limit);
        // One checkpoint of 2x the limit; the rest stays under the limit.
        assert_eq!(st.checkpoints, 1);
    }

    #[test]
    fn the_tail_moves_when_the_ail_writes_back_and_frees_grant_space() {
        // 2 MiB log. Fill it with checkpointed items, then ask for more
        // than is free: xfsaild must write items back, the tail moves and
        // the waiter gets its space.
        let (sim, sched, log) = setup(2 << 20, true);
        let l = log.clone();
        let s = sim.clone();
        let out = Rc::new(RefCell::new((0u64, 0u64, 0u64)));
        let o2 = out.clone();
        sched.spawn("t", CgroupId::ROOT, 0, async move {
            let per = XlogItemKind::Bmbt.formatted_bytes(1);
            for i in 0..((1500 << 10) / per) {
                let t = l.reserve(8 << 10, 1).await;
                l.commit(t, &[bmbt(7, i)]).await;
            }
            l.force().await;
            let tail0 = l.tail_lsn();
            let t0 = s.now();
            let t = l.reserve(200 << 10, 4).await;
            let waited = s.now() - t0;
            l.commit(t, &[]).await;
            *o2.borrow_mut() = (tail0, l.tail_lsn(), waited);
        });
        sim.run().unwrap();
        let (tail0, tail1, waited) = *out.borrow();
        assert!(tail1 > tail0, "tail {tail0} -> {tail1}");
        assert!(waited > 0);
        let st = log.stats();
        assert_eq!(st.grant_waits, 1);
        assert!(st.ail_items_written > 0);
    }
}
