//! Folio locks held by writeback: a write into folios that writeback has
//! locked while it submits their bio waits until the bio is submitted.

mod common;

use std::rc::Rc;

use sim::{Sim, MSEC, SEC};
use wbsim::model::block::DeviceProfile;
use wbsim::model::fs::ext4::Ext4;
use wbsim::model::fs::read_write::{create_file, vfs_write, IoFlags};
use wbsim::model::fs::sync::file_write_and_wait;
use wbsim::model::init::MachineConfig;
use wbsim::model::mm::page_writeback::TaskDirty;

/// Dirties 64 MiB, starts writing it back through a device with one tag
/// (each bio's submission sleeps until the previous one completes, with its
/// folios locked), and rewrites the file from the start meanwhile: the
/// rewriter catches up with the writeback front and waits for folio locks.
/// With `nowait` the rewrite gets EAGAIN there instead.
fn rewrite_behind_writeback(nowait: bool) -> (u64, bool) {
    let sim = Sim::new(1);
    let mut prof = DeviceProfile::nvme_dc();
    prof.write_bw_bytes_per_sec = 100 << 20;
    prof.queue_depth = 1;
    let (m, sb) = common::mounted(
        &sim,
        MachineConfig::new(2, 4 << 30),
        prof,
        Rc::new(Ext4::default()),
    );
    let f = create_file(&m, &sb);
    let size = 64u64 << 20;
    let (m2, f2, sb2) = (m.clone(), f.clone(), sb.clone());
    let again = Rc::new(std::cell::Cell::new(false));
    let again2 = again.clone();
    sim.spawn("test", async move {
        let mut task = TaskDirty::default();
        vfs_write(&m2, &mut task, &f2, 0, size, IoFlags::default())
            .await
            .unwrap();
        let (m3, sb3, ino) = (m2.clone(), sb2.clone(), f2.inode.clone());
        m2.sim().spawn("fsync", async move {
            file_write_and_wait(&m3, &sb3, &ino).await;
        });
        m2.sim().sleep(50 * MSEC).await;
        let fl = IoFlags {
            nowait,
            ..Default::default()
        };
        let mut pos = 0;
        while pos < size {
            if vfs_write(&m2, &mut task, &f2, pos, 1 << 20, fl)
                .await
                .is_err()
            {
                again2.set(true);
                return;
            }
            pos += 1 << 20;
        }
    });
    sim.run_until(10 * SEC).unwrap();
    let waits = m.events().get("folio_lock_wait").copied().unwrap_or(0);
    assert!(m.violations().is_empty(), "{:?}", m.violations());
    (waits, again.get())
}

#[test]
fn a_write_waits_for_a_folio_lock_held_by_writeback() {
    let (waits, again) = rewrite_behind_writeback(false);
    assert!(waits > 0, "the rewrite never met a locked folio");
    assert!(!again);
}

#[test]
fn a_nowait_write_gets_eagain_on_a_folio_locked_by_writeback() {
    let (waits, again) = rewrite_behind_writeback(true);
    assert_eq!(waits, 0);
    assert!(again, "IOCB_NOWAIT must not wait for the folio lock");
}

/// Dirties 64 MiB on ext4, writes it back through a one-tag device, and
/// rewrites the file from the start 50 ms later, behind the writeback
/// front. Returns the `folio_wait_stable` and `folio_lock_wait` counts.
fn rewrite_under_writeback(stable_writes: bool) -> (u64, u64) {
    let sim = Sim::new(1);
    let mut prof = DeviceProfile::nvme_dc();
    prof.write_bw_bytes_per_sec = 100 << 20;
    prof.queue_depth = 1;
    prof.stable_writes = stable_writes;
    let (m, sb) = common::mounted(
        &sim,
        MachineConfig::new(2, 4 << 30),
        prof,
        Rc::new(Ext4::default()),
    );
    let f = create_file(&m, &sb);
    assert_eq!(f.inode.mapping.borrow().stable_writes(), stable_writes);
    let size = 64u64 << 20;
    let (m2, f2, sb2) = (m.clone(), f.clone(), sb.clone());
    sim.spawn("test", async move {
        let mut task = TaskDirty::default();
        vfs_write(&m2, &mut task, &f2, 0, size, IoFlags::default())
            .await
            .unwrap();
        let (m3, sb3, ino) = (m2.clone(), sb2.clone(), f2.inode.clone());
        m2.sim().spawn("fsync", async move {
            file_write_and_wait(&m3, &sb3, &ino).await;
        });
        m2.sim().sleep(50 * MSEC).await;
        let mut pos = 0;
        while pos < size {
            vfs_write(&m2, &mut task, &f2, pos, 1 << 20, IoFlags::default())
                .await
                .unwrap();
            pos += 1 << 20;
        }
    });
    sim.run_until(10 * SEC).unwrap();
    assert!(m.violations().is_empty(), "{:?}", m.violations());
    let ev = m.events();
    let get = |n: &str| ev.get(n).copied().unwrap_or(0);
    (get("folio_wait_stable"), get("folio_lock_wait"))
}

#[test]
fn a_write_into_a_folio_under_writeback_waits_only_with_stable_writes() {
    let (stable_waits, _) = rewrite_under_writeback(true);
    assert!(stable_waits > 0, "a device needing stable pages: no wait");
    let (stable_waits, _) = rewrite_under_writeback(false);
    assert_eq!(
        stable_waits, 0,
        "without stable pages the folio is redirtied"
    );
}

/// Large folios: a 64 KiB write at a 64 KiB offset creates one order-4
/// folio on XFS (`mapping_set_large_folios`), sixteen single pages on a
/// filesystem without them; btrfs asks for stable pages, XFS does not.
#[test]
fn a_64k_write_on_xfs_creates_one_folio() {
    use wbsim::model::fs::btrfs::Btrfs;
    use wbsim::model::fs::vfs::Filesystem;
    use wbsim::model::fs::xfs::Xfs;
    let sim = Sim::new(1);
    let (m, sb) = common::mounted(
        &sim,
        MachineConfig::new(2, 4 << 30),
        DeviceProfile::nvme_dc(),
        Rc::new(Xfs::new()),
    );
    let f = create_file(&m, &sb);
    let f2 = f.clone();
    let m2 = m.clone();
    sim.spawn("test", async move {
        let mut task = TaskDirty::default();
        vfs_write(&m2, &mut task, &f2, 64 << 10, 64 << 10, IoFlags::default())
            .await
            .unwrap();
    });
    sim.run_until(SEC).unwrap();
    let map = f.inode.mapping.borrow();
    assert_eq!((map.nrpages(), map.nr_folios()), (16, 1));
    assert!(!map.stable_writes());
    assert!(Btrfs::new().stable_writes());
    assert_eq!(Btrfs::new().max_folio_order(), 0);
}
