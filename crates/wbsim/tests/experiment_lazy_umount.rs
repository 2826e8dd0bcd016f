//! Experiment E3 `lazy-umount` on short runs of the built-in scenarios:
//! direction and rough size of each effect (docs/experiments.md E3).

mod common;
use common::{builtin as scenario, run_variant};

use wbsim::experiment::results::Results;

fn mean(r: &Results, m: &str) -> f64 {
    r.stat(m, "mean")
        .unwrap_or_else(|| panic!("{} [{}]: no metric {m}", r.scenario, r.variant))
}

#[test]
fn rt_sync_umount_costs_one_normal_grace_period_and_deferred_lazy_is_faster() {
    let s = scenario("lazy-umount");
    let sync = run_variant(&s, "sync", true);
    let deferred = run_variant(&s, "deferred", true);
    // umount(8) start (3.1 ms) plus one normal grace period waited for
    // through a callback (6.15: no rcu_normal_wake_from_gp): the tick that
    // requests it (at most a jiffy), the first force-quiescent-state scan
    // (a 1-jiffy timeout at HZ=250, which the timer wheel fires on the tick
    // after its expiry: 2 jiffies), and the tick that runs the callback:
    // 12-16 ms (kernel/rcu.rs).
    let u = mean(&sync, "umount.elapsed");
    assert!((15.0..19.2).contains(&u), "sync umount {u} ms");
    let (sl, dl) = (
        mean(&sync, "umount_lazy.elapsed"),
        mean(&deferred, "umount_lazy.elapsed"),
    );
    assert!(
        sl > 1.5 * dl,
        "deferred lazy umount {dl} ms not faster than sync {sl} ms"
    );
    // Non-lazy umount is unchanged by the switch.
    let du = mean(&deferred, "umount.elapsed");
    assert!(
        (du - u).abs() / u < 0.05,
        "non-lazy umount changed: {u} -> {du} ms"
    );
}

#[test]
fn device_reuse_right_after_lazy_umount_gets_ebusy_only_when_deferred() {
    let s = scenario("lazy-umount");
    let sync = run_variant(&s, "sync", true);
    let deferred = run_variant(&s, "deferred", true);
    assert_eq!(
        sync.stat("reuse_device.EBUSY", "value"),
        None,
        "sync variant got EBUSY"
    );
    let n = deferred.stat("reuse_device.EBUSY", "value").unwrap_or(0.0);
    assert!(n >= 1.0, "deferred variant: no EBUSY on reuse ({n})");
}

#[test]
fn non_rt_umounts_tmpfs_fast_and_dirty_data_costs_its_write_time() {
    let s = scenario("lazy-umount-nonrt");
    let r = run_variant(&s, "sync", true);
    for mode in ["umount", "lazy"] {
        let t = mean(&r, &format!("umount.tmpfs.clean.{mode}.call"));
        assert!(t < 1.0, "tmpfs {mode} took {t} ms");
    }
    // 64 MiB at the loop-virtio profile's write bandwidth.
    let bw = wbsim::model::block::DeviceProfile::loop_virtio().write_bw_bytes_per_sec;
    let floor = 64.0 * 1048576.0 / bw as f64 * 1e3;
    for fs in ["xfs", "btrfs"] {
        let t = mean(&r, &format!("umount.{fs}.dirty.umount.call"));
        assert!(
            t >= floor,
            "{fs} umount with 64 MiB dirty took {t} ms < {floor} ms"
        );
        let c = mean(&r, &format!("umount.{fs}.clean.umount.call"));
        assert!(c < t, "{fs}: clean {c} ms not faster than dirty {t} ms");
    }
}
