//! Where a new file's data goes (`SuperBlock::alloc_data_region`) and when an
//! unlinked file's space can be handed out again: ext4 after the jbd2 commit
//! that freed it (`ext4_process_freed_data`), XFS after the log force that
//! put the freeing transaction on disk (busy extents); with a device over a
//! sparse backing file (`loop-virtio-sparse`), only writes to blocks the
//! device has never written pay the backing store's allocation.

mod common;

use std::rc::Rc;

use common::{mounted, run_text, write_then_fsync, xfs_on_loop0};

use sim::{Sim, SEC};
use wbsim::model::block::DeviceProfile;
use wbsim::model::fs::ext4::Ext4;
use wbsim::model::fs::read_write::{create_file, vfs_unlink};
use wbsim::model::fs::vfs::Filesystem;
use wbsim::model::fs::xfs::Xfs;
use wbsim::model::init::MachineConfig;

const MIB: u64 = 1 << 20;

fn reuse_after_commit(name: &str, fs: Rc<dyn Filesystem>) {
    let sim = Sim::new(1);
    let cfg = MachineConfig::new(2, 24 << 30);
    let (m, sb) = mounted(&sim, cfg, DeviceProfile::loop_virtio_sparse(), fs);
    let dev = sb.device.clone().expect("a device");
    let a = create_file(&m, &sb);
    let h = sim.spawn("a", write_then_fsync(m.clone(), a.clone(), 64 * MIB));
    sim.run_until(10 * SEC).unwrap();
    assert!(h.result().is_some());
    // 64 MiB of data blocks written for the first time (and the journal's
    // or log's first blocks).
    let first = dev.stats().first_write_blocks;
    assert!((16_384..16_384 + 512).contains(&first), "{name}: {first}");
    // While `a` lives, a new file gets a region of its own.
    let b = create_file(&m, &sb);
    let base_a = a.inode.disk_base;
    assert_ne!(b.inode.disk_base, base_a, "{name}");
    let (m2, a2) = (m.clone(), a.clone());
    sim.spawn("rm", async move { vfs_unlink(&m2, &a2).await });
    sim.run_until(11 * SEC).unwrap();
    drop(a);
    // `a` is gone, its space freed by a transaction not yet on disk: a file
    // made now goes elsewhere; once a commit is on disk (the fsync of that
    // file) the next file lands where `a` was, and writing it allocates
    // nothing new in the backing store.
    let c = create_file(&m, &sb);
    assert!(
        c.inode.disk_base != base_a && c.inode.disk_base != b.inode.disk_base,
        "{name}"
    );
    let h = sim.spawn("c", write_then_fsync(m.clone(), c, MIB));
    sim.run_until(12 * SEC).unwrap();
    assert!(h.result().is_some());
    let d = create_file(&m, &sb);
    assert_eq!(d.inode.disk_base, base_a, "{name}");
    let before = dev.stats().first_write_blocks;
    let h = sim.spawn("d", write_then_fsync(m.clone(), d, 64 * MIB));
    sim.run_until(20 * SEC).unwrap();
    assert!(h.result().is_some());
    let fresh = dev.stats().first_write_blocks - before;
    assert!(fresh < 512, "{name}: {fresh} new blocks");
}

#[test]
fn ext4_reuses_an_unlinked_files_space_after_the_commit() {
    reuse_after_commit("ext4", Rc::new(Ext4::with_size(2 << 30)));
}

#[test]
fn xfs_reuses_an_unlinked_files_space_after_the_log_force() {
    reuse_after_commit("xfs", Rc::new(Xfs::new()));
}

#[test]
fn first_writes_cost_device_time_only_on_a_sparse_backing_store() {
    // The same 64 MiB write and fsync on a fresh file of a fresh xfs: on the
    // sparse device every block is new and the device's serial stage pays
    // for it; the fully allocated device is the same without that.
    let took = |profile: DeviceProfile| {
        let sim = Sim::new(1);
        let cfg = MachineConfig::new(2, 24 << 30);
        let (m, sb) = mounted(&sim, cfg, profile, Rc::new(Xfs::new()));
        let f = create_file(&m, &sb);
        let h = sim.spawn("w", write_then_fsync(m.clone(), f, 64 * MIB));
        sim.run_until(10 * SEC).unwrap();
        h.result().expect("done").1
    };
    let (sparse, full) = (
        took(DeviceProfile::loop_virtio_sparse()),
        took(DeviceProfile::loop_virtio()),
    );
    // 16,384 new blocks at 0.43 us and 2.5 us per request: ~7 ms more of
    // serial device time, most of it behind the closing fsync.
    assert!(sparse > full + 5_000_000, "sparse {sparse} full {full}");
}

/// A scenario with one 256 MiB sequential buffered writer (fsync at the
/// end) on xfs over a loop device of `profile` with `keys` overrides.
fn sparse_run(profile: &str, keys: &str) -> wbsim::experiment::results::Results {
    run_text(&xfs_on_loop0(
        profile,
        keys,
        "",
        "[j]\nrw=write\nbs=1m\nsize=256m\nend_fsync=1",
    ))
}

#[test]
fn a_scenario_can_make_any_device_sparse() {
    let full = sparse_run("loop-virtio", "");
    let sparse = sparse_run("loop-virtio-sparse", "");
    // The same costs as overrides of the fully allocated profile.
    let over = sparse_run(
        "loop-virtio",
        "first_write_rq = \"2500ns\"\nfirst_write_block = \"430ns\"",
    );
    let blocks = |r: &wbsim::experiment::results::Results| {
        r.stat("device.loop0.first_write_blocks", "value")
    };
    assert_eq!(blocks(&full), None);
    // 256 MiB of data is 65,536 new blocks (plus the log's).
    let b = blocks(&sparse).expect("counted");
    assert!((65_536.0..66_000.0).contains(&b), "{b}");
    assert_eq!(blocks(&over), Some(b));
    let fsync = |r: &wbsim::experiment::results::Results| {
        r.stat("fio.j.end_fsync", "mean").expect("end_fsync")
    };
    // The closing fsync waits for the writeback the first writes slowed.
    assert!(
        fsync(&sparse) > fsync(&full),
        "{} {}",
        fsync(&sparse),
        fsync(&full)
    );
}
