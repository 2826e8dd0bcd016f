//! Foreign-inode detection (fs/fs-writeback.c: `wbc_attach_and_unlock_inode`,
//! `wbc_account_cgroup_owner`, `wbc_detach_inode`, `inode_switch_wbs`): an
//! inode whose written folios belong mostly to another memcg than its wb's
//! moves to that memcg's wb once more than half of its 16-slot I/O-time
//! history is foreign; a minority foreign writer does not move it; a switch
//! towards a memcg that is gone or offline is dropped.
//!
//! Folio ownership is the memcg that created the folio (`folio_memcg`), so
//! the foreign writer here writes new pages (appends), as a writer must for
//! its pages to be charged to it.

mod common;

use std::rc::Rc;

use sim::{Sim, MSEC, SEC};
use wbsim::model::block::DeviceProfile;
use wbsim::model::fs::ext4::Ext4;
use wbsim::model::fs::fs_writeback::{inode_switch_wbs, wb_memcg_css_id};
use wbsim::model::fs::inode::state::I_WB_SWITCH;
use wbsim::model::fs::read_write::{create_file, vfs_write, File, IoFlags};
use wbsim::model::fs::sync::vfs_fsync;
use wbsim::model::fs::vfs::{wbc_account_cgroup_owner, WbcOwner, WritebackControl};
use wbsim::model::init::MachineConfig;
use wbsim::model::kernel::sched::CgroupId;
use wbsim::model::machine::Machine;
use wbsim::model::mm::backing_dev::{SyncMode, WbReason};
use wbsim::model::mm::memcontrol::{mem_cgroup_css_online, mem_cgroup_rmdir};
use wbsim::model::mm::page_writeback::balance::TaskDirty;

const MIB: u64 = 1 << 20;

struct Setup {
    sim: Sim,
    m: Rc<Machine>,
    f: File,
    a: (CgroupId, u64),
    b: (CgroupId, u64),
}

fn setup() -> Setup {
    let sim = Sim::new(1);
    let (m, sb) = common::mounted(
        &sim,
        MachineConfig::new(2, 4 << 30),
        DeviceProfile::nvme_dc(),
        Rc::new(Ext4::default()),
    );
    let ca = m.sched().add_cgroup("a", None).unwrap();
    let ma = mem_cgroup_css_online(m.mm(), ca, "a", None, None);
    let cb = m.sched().add_cgroup("b", None).unwrap();
    let mb = mem_cgroup_css_online(m.mm(), cb, "b", None, None);
    let f = create_file(&m, &sb);
    Setup {
        sim,
        m,
        f,
        a: (ca, ma.id),
        b: (cb, mb.id),
    }
}

fn same(f: &File) -> File {
    File::new(f.sb.clone(), f.inode.clone())
}

/// In cgroup `cg`, writes `len` bytes at `pos` of `f` and fsyncs it (one
/// writeback round, `filemap_fdatawrite_wbc`); runs the simulation until
/// it is done.
fn write_round(s: &Setup, cg: CgroupId, pos: u64, len: u64) {
    let (m2, f2) = (s.m.clone(), same(&s.f));
    let h = s.m.sched().spawn("writer", cg, 0, async move {
        let mut task = TaskDirty::default();
        vfs_write(&m2, &mut task, &f2, pos, len, IoFlags::default())
            .await
            .unwrap();
        vfs_fsync(&m2, &f2.sb, &f2.inode, true).await;
    });
    let until = s.m.now() + 10 * SEC;
    while !h.is_finished() && s.m.now() < until {
        s.sim.run_until(s.m.now() + 10 * MSEC).unwrap();
    }
    assert!(h.is_finished(), "write round did not finish");
}

fn wb_memcg(s: &Setup) -> u64 {
    wb_memcg_css_id(&s.f.inode.wb().expect("inode has a wb"))
}

#[test]
fn an_inode_rewritten_mostly_by_another_memcg_switches_to_its_wb() {
    let s = setup();
    write_round(&s, s.a.0, 0, MIB);
    assert_eq!(wb_memcg(&s), s.a.1, "bound to its first dirtier");
    let mut pos = MIB;
    let mut rounds = 0;
    while wb_memcg(&s) == s.a.1 && rounds < 40 {
        write_round(&s, s.b.0, pos, 4 * MIB);
        // Let a queued switch pass its grace period.
        s.sim.run_until(s.m.now() + 50 * MSEC).unwrap();
        pos += 4 * MIB;
        rounds += 1;
    }
    assert_eq!(wb_memcg(&s), s.b.1, "not switched after {rounds} rounds");
    // More than 8 foreign slots are needed: at least 2 rounds of up to 5
    // slots each; the history started over on the new wb.
    assert!(rounds >= 2, "switched after {rounds} round(s)");
    assert_eq!(s.f.inode.frn.get().history, 0);
    assert_eq!(s.m.vfs().isw_nr_in_flight(), 0);
    assert!(s.m.vfs().isw_switched() >= 1);
}

#[test]
fn a_minority_foreign_writer_does_not_move_the_inode() {
    let s = setup();
    write_round(&s, s.a.0, 0, MIB);
    let mut pos = MIB;
    // Each round: B appends 1 MiB (no fsync), then A appends 3 MiB and
    // fsyncs; the round writes both, a quarter of it B's.
    for _ in 0..30 {
        let (m2, f2) = (s.m.clone(), same(&s.f));
        let h = s.m.sched().spawn("b", s.b.0, 0, async move {
            let mut task = TaskDirty::default();
            vfs_write(&m2, &mut task, &f2, pos, MIB, IoFlags::default())
                .await
                .unwrap();
        });
        while !h.is_finished() {
            s.sim.run_until(s.m.now() + MSEC).unwrap();
        }
        write_round(&s, s.a.0, pos + MIB, 3 * MIB);
        pos += 4 * MIB;
    }
    s.sim.run_until(s.m.now() + 100 * MSEC).unwrap();
    assert_eq!(wb_memcg(&s), s.a.1, "a minority writer took the inode");
    assert_eq!(s.m.vfs().isw_switched(), 0);
    // Every round was won by the inode's own memcg: no foreign slot.
    assert_eq!(s.f.inode.frn.get().history, 0);
    assert_eq!(s.f.inode.frn.get().winner, s.a.1);
}

#[test]
fn a_switch_towards_an_offline_or_missing_memcg_is_dropped() {
    let s = setup();
    write_round(&s, s.a.0, 0, MIB);
    // B goes offline: rmdir, a grace period, then the offline work.
    // A css reference (as a page or a wb would hold) keeps the offline
    // memcg findable by id, so the switch meets it offline, not gone.
    s.m.mm().memcgs().get(s.b.1).unwrap().css_get();
    mem_cgroup_rmdir(s.m.mm(), s.b.0);
    s.sim.run_until(s.m.now() + 200 * MSEC).unwrap();
    let mb = s.m.mm().memcgs().get(s.b.1).expect("referenced memcg");
    assert!(!mb.online());
    for target in [s.b.1, 9_999] {
        inode_switch_wbs(&s.m, &s.f.inode, target);
        assert!(!s.f.inode.has(I_WB_SWITCH), "switch to {target} prepared");
        assert_eq!(s.m.vfs().isw_nr_in_flight(), 0);
        s.sim.run_until(s.m.now() + 100 * MSEC).unwrap();
        assert_eq!(wb_memcg(&s), s.a.1, "switched to {target}");
    }
    // The control: an online target is switched to.
    let root = s.m.mm().memcgs().root().id;
    inode_switch_wbs(&s.m, &s.f.inode, root);
    assert!(s.f.inode.has(I_WB_SWITCH));
    s.sim.run_until(s.m.now() + 100 * MSEC).unwrap();
    assert_eq!(wb_memcg(&s), root);
    assert_eq!(s.m.vfs().isw_nr_in_flight(), 0);
}

/// A run of folios of one owner, accounted in one call, leaves the same
/// majority-vote state as the kernel's folio-by-folio calls.
#[test]
fn a_folded_run_equals_folio_by_folio_accounting() {
    let s = setup();
    let (a, b, root) = (s.a.1, s.b.1, s.m.mm().memcgs().root().id);
    let wb = s.m.mm().bdis()[0].wbs[0].clone();
    let fresh = || {
        let mut w = WritebackControl::new(i64::MAX, SyncMode::None, WbReason::Background);
        w.wb = Some(wb.clone());
        w.owner = WbcOwner {
            wb_id: root,
            wb_lcand_id: b,
            ..WbcOwner::default()
        };
        w
    };
    // (owner, folios, pages per folio) runs, as writeback meets them.
    let runs = [
        (a, 3, 4),
        (b, 7, 1),
        (a, 2, 16),
        (root, 5, 1),
        (b, 40, 1),
        (a, 1, 64),
        (b, 2, 1),
    ];
    let (mut folded, mut single) = (fresh(), fresh());
    for (id, nr, pages) in runs {
        wbc_account_cgroup_owner(&s.m, &mut folded, id, nr, pages * 4096);
        for _ in 0..nr {
            wbc_account_cgroup_owner(&s.m, &mut single, id, 1, pages * 4096);
        }
    }
    assert_eq!(folded.owner, single.owner);
    // The candidate changed hands on the way (the run is not trivial).
    assert_eq!(single.owner.wb_bytes, 5 * 4096);
    assert!(single.owner.wb_lcand_bytes > 0 && single.owner.wb_tcand_bytes > 0);
}

/// Foreign-dirty flushing (mm/memcontrol.c): B appends to a file whose
/// inode is on A's wb, so B's folios are dirty on a foreign wb and B
/// records it; once B's own writer is past its memcg's freerun ceiling,
/// balance_dirty_pages flushes that foreign wb (FOREIGN_FLUSH), long
/// before periodic writeback would (30 s dirty expiry here).
#[test]
fn a_memcg_over_its_dirty_limit_flushes_the_foreign_wb_it_dirtied() {
    let sim = Sim::new(1);
    let (m, sb) = common::mounted(
        &sim,
        MachineConfig::new(2, 4 << 30),
        DeviceProfile::nvme_dc(),
        Rc::new(Ext4::default()),
    );
    let ca = m.sched().add_cgroup("a", None).unwrap();
    mem_cgroup_css_online(m.mm(), ca, "a", None, None);
    let cb = m.sched().add_cgroup("b", None).unwrap();
    // 64 MiB memory.max: B's dirty domain's freerun ceiling is ~10 MiB.
    mem_cgroup_css_online(m.mm(), cb, "b", None, Some(64 * MIB));
    let f = create_file(&m, &sb);
    let g = create_file(&m, &sb);
    let run = |cg: CgroupId, file: &File, pos: u64, len: u64| {
        let (m2, f2) = (m.clone(), same(file));
        let h = m.sched().spawn("w", cg, 0, async move {
            let mut task = TaskDirty::default();
            let mut p = pos;
            while p < pos + len {
                vfs_write(&m2, &mut task, &f2, p, MIB, IoFlags::default())
                    .await
                    .unwrap();
                p += MIB;
            }
        });
        while !h.is_finished() {
            sim.run_until(m.now() + MSEC).unwrap();
        }
    };
    // f is A's (its first dirtier); B appends 4 MiB of its own folios.
    run(ca, &f, 0, MIB);
    run(cb, &f, MIB, 4 * MIB);
    assert!(f.inode.mapping.borrow().nr_dirty() >= 5 * 256);
    assert_eq!(m.events().get("flush_foreign"), None);
    // B writes its own file g until its memcg domain throttles it.
    run(cb, &g, 0, 48 * MIB);
    sim.run_until(m.now() + 500 * MSEC).unwrap();
    assert!(m.now() < 10 * SEC, "took {} ns", m.now());
    assert!(
        m.events().get("flush_foreign").copied().unwrap_or(0) >= 1,
        "no foreign flush: {:?}",
        m.events()
    );
    assert_eq!(
        f.inode.mapping.borrow().nr_dirty(),
        0,
        "A's wb was not flushed for B"
    );
}
