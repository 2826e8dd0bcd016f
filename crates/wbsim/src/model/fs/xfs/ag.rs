//! XFS allocation groups (AGs): inode numbers that carry their AG, directory
//! placement, per-AG free space and the AGF lock.
//!
//! Models, from fs/xfs/libxfs/xfs_format.h, xfs_ialloc.c, xfs_alloc.c,
//! xfs_bmap.c and fs/xfs/xfs_buf.c:
//! - geometry: `agcount` AGs of `agblocks` blocks each; an inode number is
//!   `agno << agino_log | agino` with `agino_log = sb_inopblog + sb_agblklog`
//!   (`XFS_AGINO_TO_INO`, `XFS_INO_TO_AGNO`);
//! - inode placement with the default `inode64` allocator (`xfs_dialloc`): a
//!   new directory goes to the AG after the previous directory's
//!   (`m_agirotor`, round robin), a file goes to its parent directory's AG;
//! - per-AG free space as the two free space btrees see it: the number of
//!   free extents (records of the by-block `bnobt` and by-size `cntbt`), from
//!   which each btree's height, and so the cost of an allocation, follows;
//!   data is placed next to the neighbouring extents of the file
//!   (`xfs_bmap_adjacent`), so a file written in random order leaves a free
//!   fragment for every extent that has no allocated neighbour yet;
//! - the AGF lock: the AGF header is a buffer and a buffer's lock is a
//!   sleeping semaphore (`xfs_buf_lock()` on `b_sema`); an allocation takes
//!   it in `xfs_alloc_read_agf()` and keeps it until its transaction commits;
//! - AG choice for data (`xfs_alloc_vextent_start_ag()` ->
//!   `xfs_alloc_vextent_iterate_ags()`): from the inode's AG, a first pass
//!   over every AG with `XFS_ALLOC_FLAG_TRYLOCK` (an AG whose AGF is locked,
//!   or that lacks the space, is skipped), then a second, blocking pass.
//!
//! - frees (`xfs_free_extent()` -> `__xfs_free_extent()` ->
//!   `xfs_free_ag_extent()`): the extent's own AG is locked (no choice, no
//!   trylock pass), the freed range merges with free neighbours in the
//!   bnobt (one record fewer when it joins two, a new record when it joins
//!   none), and both btrees are updated at their heights. Unlink and
//!   truncate do not free in their own transaction: `xfs_bunmapi()` logs an
//!   extent-free intent (EFI) and `xfs_defer_finish()` rolls the
//!   transaction and frees each extent in AG order
//!   (`xfs_extent_free_diff_items()`), one AGF at a time, logging an EFD
//!   ([`XfsMount::defer_free_extents`]).
//!
//! Left out: inode chunk allocation and the inode btrees (AGI lock), the
//! AGFL refill, busy extents (a freed extent is reusable at once), per-AG
//! reservations, `inode32`, realtime. No modelled workload unlinks or
//! truncates files yet, so frees are reached only through
//! [`XfsMount::defer_free_extents`] (and its tests).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;

use crate::model::fs::vfs::Machine;
use crate::model::kernel::locking::{LockStats, Semaphore, SemaphoreGuard};
use crate::model::kernel::sched::Sched;

use super::{XFS_BTREE_LEVEL_NS, XFS_TRANS_COMMIT_NS, XFS_TRANS_RESERVE_NS};

/// AGs of a filesystem made without `agcount`: 4, what `mkfs.xfs` chooses
/// for a single device under 4 TiB without stripe geometry
/// (`calc_default_ag_geometry()` in xfsprogs mkfs/xfs_mkfs.c).
pub const XFS_DEFAULT_AGCOUNT: u32 = 4;
/// Blocks per AG when the device size is not given: 1,310,720 4 KiB blocks
/// (5 GiB), a 20 GiB device in [`XFS_DEFAULT_AGCOUNT`] AGs (the device of
/// docs/experiments.md E4). The model does not track device capacity, so
/// this is an assumption of the default, overridable per filesystem.
pub const XFS_DEFAULT_AGBLOCKS: u64 = 1_310_720;
/// log2 of inodes per 4 KiB block: 3 (512-byte inodes, the v5 default).
pub const XFS_INOPBLOG: u32 = 3;
/// First inode number inside an AG: 128 (the first inode chunk sits at
/// agbno 16, after the AG headers, the btree roots and the AGFL reserve; the
/// root directory of a fresh filesystem is inode 128 in AG 0). Assumed the
/// same in every AG.
pub const XFS_FIRST_AGINO: u64 = 128;
/// Inodes `mkfs.xfs` uses in AG 0 before any user inode: the root directory
/// and the realtime bitmap and summary inodes (128, 129, 130).
pub const XFS_AG0_MKFS_INODES: u64 = 3;
/// Records per bnobt/cntbt leaf block: (4096 - 56) / 8 = 505 (short-form v5
/// btree block header of 56 bytes, 8-byte `xfs_alloc_rec`).
pub const XFS_ALLOC_RECS_PER_LEAF: u64 = 505;
/// Key/pointer pairs per bnobt/cntbt node block: (4096 - 56) / (8 + 4) = 336.
pub const XFS_ALLOC_PTRS_PER_NODE: u64 = 336;

/// Height of a free space btree holding `recs` records (at least 1: the
/// root leaf).
pub fn xfs_alloc_btree_levels(recs: u64) -> u32 {
    let mut levels = 1;
    let mut blocks = recs.max(1).div_ceil(XFS_ALLOC_RECS_PER_LEAF);
    while blocks > 1 {
        blocks = blocks.div_ceil(XFS_ALLOC_PTRS_PER_NODE);
        levels += 1;
    }
    levels
}

/// The geometry `mkfs.xfs` chose (the `agcount=` / `agsize=` options).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XfsGeometry {
    pub agcount: u32,
    /// Blocks per AG (4 KiB).
    pub agblocks: u64,
}

impl Default for XfsGeometry {
    fn default() -> Self {
        XfsGeometry {
            agcount: XFS_DEFAULT_AGCOUNT,
            agblocks: XFS_DEFAULT_AGBLOCKS,
        }
    }
}

impl XfsGeometry {
    /// `sb_agblklog`: log2 of agblocks, rounded up.
    pub fn agblklog(&self) -> u32 {
        64 - (self.agblocks.max(2) - 1).leading_zeros()
    }

    /// Bits of an inode number that hold the in-AG inode number.
    pub fn agino_log(&self) -> u32 {
        XFS_INOPBLOG + self.agblklog()
    }

    /// `XFS_INO_TO_AGNO`.
    pub fn ino_to_agno(&self, ino: u64) -> u32 {
        (ino >> self.agino_log()) as u32
    }

    /// `XFS_AGINO_TO_INO`.
    pub fn agino_to_ino(&self, agno: u32, agino: u64) -> u64 {
        (u64::from(agno) << self.agino_log()) | agino
    }
}

/// One AG (`struct xfs_perag` with its AGF).
pub struct Perag {
    pub agno: u32,
    /// The AGF buffer's lock (`bp->b_sema`, a semaphore of count 1).
    pub agf: Semaphore,
    /// `agf_freeblks`.
    free_blocks: Cell<u64>,
    /// Free extents: records in each of the bnobt and the cntbt.
    free_extents: Cell<u64>,
    /// Next in-AG inode number to hand out.
    next_agino: Cell<u64>,
}

impl Perag {
    /// Free blocks.
    pub fn free_blocks(&self) -> u64 {
        self.free_blocks.get()
    }

    /// Free extents (bnobt = cntbt records).
    pub fn free_extents(&self) -> u64 {
        self.free_extents.get()
    }

    /// Heights of the bnobt and the cntbt.
    pub fn alloc_btree_levels(&self) -> (u32, u32) {
        let l = xfs_alloc_btree_levels(self.free_extents.get());
        (l, l)
    }

    /// Accounts an allocation of `blocks` that left `new_fragments` more
    /// free extents (-1 when it filled a gap between two extents).
    fn take(&self, blocks: u64, new_fragments: i64) {
        self.free_blocks
            .set(self.free_blocks.get().saturating_sub(blocks));
        let f = self.free_extents.get() as i64 + new_fragments;
        self.free_extents.set(f.max(1) as u64);
    }

    /// Accounts a free of `blocks` that joined `free_neighbours` (0, 1 or
    /// 2) free extents (`xfs_free_ag_extent()`): a new record when it joins
    /// none, one record fewer when it bridges two.
    fn give(&self, blocks: u64, free_neighbours: u32) {
        self.free_blocks.set(self.free_blocks.get() + blocks);
        let f = self.free_extents.get() as i64 + 1 - i64::from(free_neighbours.min(2));
        self.free_extents.set(f.max(1) as u64);
    }
}

/// The per-mount AG state (`struct xfs_mount`'s perag array and rotor).
/// One extent to free: its AG, length in blocks, and how many of its two
/// neighbours on disk are free (so it merges with them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FreeExtent {
    /// AG of the extent.
    pub agno: u32,
    /// Length, blocks.
    pub blocks: u64,
    /// Free neighbours on disk (0, 1 or 2).
    pub free_neighbours: u32,
}

pub struct XfsMount {
    pub geo: XfsGeometry,
    /// The scheduler, for the CPU of frees.
    sched: Sched,
    pub perags: Vec<Perag>,
    /// `m_agirotor`: directories created so far.
    agirotor: Cell<u32>,
    /// Directories by path inside the filesystem ("" is the root), with their AG.
    dirs: RefCell<BTreeMap<String, u32>>,
}

impl XfsMount {
    /// A freshly made filesystem: every AG one free extent, the root
    /// directory in AG 0. AGF lock classes are per AG (`xfs_agf:agN`), so
    /// lock_stat shows each AG's contention.
    pub fn new(m: &Machine, geo: XfsGeometry) -> XfsMount {
        Self::with_locks(m.sched(), m.locks(), geo)
    }

    /// [`XfsMount::new`] from the scheduler and the lock statistics alone.
    pub fn with_locks(sched: &Sched, locks: &LockStats, geo: XfsGeometry) -> XfsMount {
        let perags = (0..geo.agcount.max(1))
            .map(|agno| Perag {
                agno,
                agf: Semaphore::new(locks.class(&format!("xfs_agf:ag{agno}")), sched, 1),
                free_blocks: Cell::new(geo.agblocks),
                free_extents: Cell::new(1),
                next_agino: Cell::new(if agno == 0 {
                    XFS_FIRST_AGINO + XFS_AG0_MKFS_INODES
                } else {
                    XFS_FIRST_AGINO
                }),
            })
            .collect();
        let mut dirs = BTreeMap::new();
        dirs.insert(String::new(), 0);
        XfsMount {
            geo,
            sched: sched.clone(),
            perags,
            agirotor: Cell::new(0),
            dirs: RefCell::new(dirs),
        }
    }

    /// Number of AGs.
    pub fn agcount(&self) -> u32 {
        self.perags.len() as u32
    }

    /// The AG of inode `ino`.
    pub fn ino_agno(&self, ino: u64) -> u32 {
        self.geo.ino_to_agno(ino).min(self.agcount() - 1)
    }

    /// Hands out the next inode number of AG `agno`.
    fn next_ino(&self, agno: u32) -> u64 {
        let pag = &self.perags[agno as usize];
        let agino = pag.next_agino.get();
        pag.next_agino.set(agino + 1);
        self.geo.agino_to_ino(agno, agino)
    }

    /// The AG of directory `dir` (a path inside the filesystem, without
    /// leading or trailing '/'), creating it and any missing parent in order
    /// (`mkdir -p`): each new directory takes the next AG of the rotor and an
    /// inode there.
    pub fn dir_agno(&self, dir: &str) -> u32 {
        let dir = dir.trim_matches('/');
        if let Some(&a) = self.dirs.borrow().get(dir) {
            return a;
        }
        if let Some((parent, _)) = dir.rsplit_once('/') {
            self.dir_agno(parent);
        }
        let r = self.agirotor.get();
        self.agirotor.set(r.wrapping_add(1));
        let agno = r % self.agcount();
        self.next_ino(agno);
        self.dirs.borrow_mut().insert(dir.to_string(), agno);
        agno
    }

    /// `xfs_dialloc` for a regular file in `dir`: an inode in the parent
    /// directory's AG.
    pub fn alloc_file_ino(&self, dir: &str) -> u64 {
        let agno = self.dir_agno(dir);
        self.next_ino(agno)
    }

    /// `xfs_alloc_vextent_start_ag()` for `blocks` blocks of data from the
    /// inode's AG `start`: a trylock pass over the AGs from `start` that have
    /// the space, then a blocking pass. Returns the AG chosen with its AGF
    /// locked (the caller keeps the guard until its transaction commits).
    pub async fn alloc_vextent_start_ag(&self, start: u32, blocks: u64) -> (u32, SemaphoreGuard) {
        let n = self.agcount();
        let order = (0..n).map(|i| (start + i) % n);
        let fits = |a: u32| self.perags[a as usize].free_blocks() >= blocks;
        for a in order.clone().filter(|&a| fits(a)) {
            if let Some(g) = self.perags[a as usize].agf.down_trylock() {
                return (a, g);
            }
        }
        let a = order.clone().find(|&a| fits(a)).unwrap_or(start % n);
        let g = self.perags[a as usize].agf.down().await;
        (a, g)
    }

    /// Accounts an allocation in AG `agno` of `blocks` blocks for an extent
    /// with `neighbours` (0, 1 or 2) allocated neighbours in the file.
    pub fn account_alloc(&self, agno: u32, blocks: u64, neighbours: u32) {
        self.perags[agno as usize].take(blocks, 1 - i64::from(neighbours));
    }

    /// `xfs_free_extent()` inside a transaction: locks the extent's AGF (its
    /// own AG: a free cannot go elsewhere, so there is no trylock pass),
    /// walks and logs the bnobt and the cntbt at their heights
    /// ([`XFS_BTREE_LEVEL_NS`] per level), and accounts the free. Returns
    /// the AGF guard: the caller keeps it until its transaction commits.
    pub async fn free_extent(&self, ext: FreeExtent) -> SemaphoreGuard {
        let agno = ext.agno.min(self.agcount() - 1);
        let pag = &self.perags[agno as usize];
        let agf = pag.agf.down().await;
        let (bno, cnt) = pag.alloc_btree_levels();
        self.sched
            .cpu(u64::from(bno + cnt) * XFS_BTREE_LEVEL_NS)
            .await;
        pag.give(ext.blocks, ext.free_neighbours);
        agf
    }

    /// `xfs_defer_finish()` of an extent-free intent (EFI) logged by unlink
    /// or truncate (`xfs_bunmapi()` -> `xfs_free_extent_later()`): the
    /// extents are sorted by AG (`xfs_extent_free_diff_items()`, so AGF
    /// locks are taken in AG order), then for each one the transaction is
    /// rolled ([`XFS_TRANS_COMMIT_NS`] + [`XFS_TRANS_RESERVE_NS`]: a commit
    /// releases the previous AGF) and the extent is freed under its AGF,
    /// logging the done item (EFD); the last AGF is released by the final
    /// commit.
    pub async fn defer_free_extents(&self, extents: &[FreeExtent]) {
        let mut sorted = extents.to_vec();
        sorted.sort_by_key(|e| e.agno);
        let mut held: Option<SemaphoreGuard> = None;
        for e in sorted {
            // xfs_defer_trans_roll: commit (releasing the held AGF), new
            // reservation.
            self.sched.cpu(XFS_TRANS_COMMIT_NS).await;
            drop(held.take());
            self.sched.cpu(XFS_TRANS_RESERVE_NS).await;
            held = Some(self.free_extent(e).await);
        }
        self.sched.cpu(XFS_TRANS_COMMIT_NS).await;
        drop(held);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_encodes_the_ag_in_the_inode_number() {
        let g = XfsGeometry::default();
        // 1,310,720 blocks: 2^20 < n <= 2^21.
        assert_eq!(g.agblklog(), 21);
        assert_eq!(g.agino_log(), 24);
        let ino = g.agino_to_ino(3, 130);
        assert_eq!(ino, (3 << 24) | 130);
        assert_eq!(g.ino_to_agno(ino), 3);
        assert_eq!(
            XfsGeometry {
                agcount: 4,
                agblocks: 1 << 20
            }
            .agblklog(),
            20
        );
    }

    use sim::{Sim, Time, USEC};

    use crate::model::kernel::sched::SchedParams;

    fn mount(cpus: usize) -> (Sim, LockStats, std::rc::Rc<XfsMount>) {
        let sim = Sim::new(1);
        let sched = Sched::new(&sim, SchedParams::for_cpus(cpus));
        let locks = LockStats::new();
        let mp = XfsMount::with_locks(&sched, &locks, XfsGeometry::default());
        (sim, locks, std::rc::Rc::new(mp))
    }

    #[test]
    fn free_accounting_merges_with_free_neighbours() {
        let (sim, _, mp) = mount(2);
        // Fragment AG 1: three allocations without neighbours.
        for _ in 0..3 {
            mp.account_alloc(1, 10, 0);
        }
        let pag = &mp.perags[1];
        assert_eq!(pag.free_extents(), 4);
        assert_eq!(pag.free_blocks(), XFS_DEFAULT_AGBLOCKS - 30);
        let m2 = mp.clone();
        sim.spawn("rm", async move {
            let fe = |n| FreeExtent {
                agno: 1,
                blocks: 10,
                free_neighbours: n,
            };
            // Bridging two free extents removes a record; joining one keeps
            // the count; joining none adds one.
            m2.defer_free_extents(&[fe(2)]).await;
            assert_eq!(m2.perags[1].free_extents(), 3);
            m2.defer_free_extents(&[fe(1)]).await;
            assert_eq!(m2.perags[1].free_extents(), 3);
            m2.defer_free_extents(&[fe(0)]).await;
            assert_eq!(m2.perags[1].free_extents(), 4);
        });
        sim.run().unwrap();
        assert_eq!(mp.perags[1].free_blocks(), XFS_DEFAULT_AGBLOCKS);
        assert_eq!(mp.perags[0].free_blocks(), XFS_DEFAULT_AGBLOCKS);
    }

    #[test]
    fn deferred_free_waits_for_the_agf_of_its_own_ag_only() {
        let (sim, locks, mp) = mount(4);
        const HOLD: Time = 500 * USEC;
        // An allocation in AG 2 holds its AGF for HOLD (a sleeping holder,
        // as a transaction waiting on I/O would).
        let m1 = mp.clone();
        let s1 = sim.clone();
        sim.spawn("alloc", async move {
            let (agno, g) = m1.alloc_vextent_start_ag(2, 1).await;
            assert_eq!(agno, 2);
            s1.sleep(HOLD).await;
            drop(g);
        });
        let done = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        for (name, agno) in [("rm-ag2", 2), ("rm-ag3", 3)] {
            let (m, s, d) = (mp.clone(), sim.clone(), done.clone());
            sim.spawn(name, async move {
                s.sleep(USEC).await;
                m.defer_free_extents(&[FreeExtent {
                    agno,
                    blocks: 1,
                    free_neighbours: 0,
                }])
                .await;
                d.borrow_mut().push((name, s.now()));
            });
        }
        sim.run().unwrap();
        let done = done.borrow();
        let at = |n: &str| done.iter().find(|(x, _)| *x == n).unwrap().1;
        // The free in AG 3 does not wait; the one in AG 2 waits for the
        // allocation's commit, then does its own btree work.
        assert!(at("rm-ag3") < HOLD, "AG 3 free at {}", at("rm-ag3"));
        assert!(at("rm-ag2") > HOLD, "AG 2 free at {}", at("rm-ag2"));
        let st = locks.get("xfs_agf:ag2").unwrap();
        assert_eq!(st.write.acquisitions, 2);
        assert_eq!(st.write.contentions, 1);
        let st3 = locks.get("xfs_agf:ag3").unwrap();
        assert_eq!(st3.write.contentions, 0);
    }

    #[test]
    fn alloc_btree_height_grows_with_free_extents() {
        assert_eq!(xfs_alloc_btree_levels(0), 1);
        assert_eq!(xfs_alloc_btree_levels(505), 1);
        assert_eq!(xfs_alloc_btree_levels(506), 2);
        assert_eq!(xfs_alloc_btree_levels(505 * 336), 2);
        assert_eq!(xfs_alloc_btree_levels(505 * 336 + 1), 3);
    }
}
