//! Smoke test of the buffered write path end to end.

use std::rc::Rc;

use sim::{Sim, MSEC, SEC};
use wbsim::model::block::{BlockDevice, DeviceProfile};
use wbsim::model::fs::ext4::Ext4;
use wbsim::model::fs::read_write::{create_file, vfs_write, IoFlags};
use wbsim::model::fs::super_::sget;
use wbsim::model::init::MachineConfig;
use wbsim::model::machine::Machine;
use wbsim::model::mm::backing_dev::BdiSettings;
use wbsim::model::mm::page_writeback::TaskDirty;

#[test]
fn writer_faster_than_device_settles_at_device_bandwidth() {
    let sim = Sim::new(1);
    let m = Machine::new(&sim, MachineConfig::new(4, 8 << 30)).unwrap();
    let mut prof = DeviceProfile::nvme_dc();
    prof.write_bw_bytes_per_sec = 500 << 20;
    let dev = BlockDevice::new(&sim, "nvme0n1", prof);
    let sb = sget(
        &m,
        "data",
        Rc::new(Ext4::default()),
        Some(dev.clone()),
        BdiSettings::default(),
    );
    let f = create_file(&m, &sb);
    let m2 = m.clone();
    sim.spawn("dd", async move {
        let mut task = TaskDirty::default();
        let mut pos = 0;
        loop {
            vfs_write(&m2, &mut task, &f, pos, 1 << 20, IoFlags::default())
                .await
                .unwrap();
            pos += 1 << 20;
        }
    });
    let mut samples = Vec::new();
    for i in 1..=30 {
        sim.run_until(i * SEC).unwrap();
        let vm = m.mm().vm();
        samples.push((vm.nr_file_dirty, vm.nr_writeback, dev.stats().write_bytes));
    }
    let th = m.dirty_thresholds();
    eprintln!("thresh {} bg {}", th.thresh, th.bg_thresh);
    for (i, s) in samples.iter().enumerate() {
        eprintln!(
            "{:>3}s dirty {:>8} wb {:>6} written {:>6} MiB",
            i + 1,
            s.0,
            s.1,
            s.2 >> 20
        );
    }
    let bw = (samples[29].2 - samples[19].2) as f64 / 10.0;
    eprintln!("bw {:.0} MiB/s", bw / (1 << 20) as f64);
    assert!(bw > 0.9 * (500 << 20) as f64, "device not saturated: {bw}");
    let dirty = samples[29].0;
    assert!(dirty > th.bg_thresh && dirty <= th.thresh, "dirty {dirty}");
    let _ = MSEC;
    assert!(m.violations().is_empty(), "{:?}", m.violations());
}
