//! The probe's guard: cleanup after a panic, and refusal to touch loop
//! devices or mounts that are not its own. Skips (with the reason printed)
//! when not root or without loop devices.

mod probe_common;

use std::path::PathBuf;

use probe_common::*;
use wbsim::probe::guard::Guard;
use wbsim::probe::loopdev::{self, LoopDev};

#[test]
fn panic_unwinding_cleans_up_mounts_loops_and_files() {
    if skip("panic_unwinding_cleans_up") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = Scratch::new("guard_panic");
    let base = scratch.0.clone();
    let r = std::panic::catch_unwind(move || {
        let guard = Guard::new(Some(&base)).expect("guard");
        let mnt = loopdev::mount_tmpfs(&guard, 16 << 20).expect("tmpfs");
        loopdev::write_file(&mnt, "f", 1 << 20).expect("write");
        let dev = LoopDev::create(&guard, "img", 64 << 20).expect("loop");
        assert!(!loops_under(guard.dir()).is_empty());
        assert!(!mounts_under(guard.dir()).is_empty());
        let _keep = dev;
        panic!("deliberate panic with a mount and a loop device in place");
    });
    assert!(r.is_err());
    assert_nothing_left(&scratch.0, std::process::id());
}

#[test]
fn refuses_devices_and_mounts_that_are_not_its_own() {
    if skip("refuses_foreign") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = Scratch::new("guard_refuse");
    let guard = Guard::new(Some(&scratch.0)).expect("guard");
    // A loop device this probe attached, but described with another image:
    // verify (run before every mkfs/mount/detach) refuses it.
    let dev = LoopDev::create(&guard, "img", 64 << 20).expect("loop");
    let forged = LoopDev {
        dev: dev.dev.clone(),
        name: dev.name.clone(),
        image: PathBuf::from("/var/tmp/not-the-probes.img"),
        direct_io: dev.direct_io,
    };
    let e = forged.verify(&guard).expect_err("must refuse");
    assert!(e.to_string().contains("refusing"), "{e}");
    assert!(forged.mkfs(&guard, loopdev::Fs::Xfs).is_err());
    // A guard refuses to detach a loop device backed by another directory's file.
    let other = Guard::new(Some(&scratch.0)).expect("second guard");
    let e = other.detach_loop(&dev.dev).expect_err("must refuse");
    assert!(e.to_string().contains("refusing"), "{e}");
    // ... and to unmount anything outside its directory.
    assert!(loopdev::umount(&guard, std::path::Path::new("/")).is_err());
    drop(other);
    drop(dev);
    drop(guard);
    assert_nothing_left(&scratch.0, std::process::id());
}

#[test]
fn leftover_bdi_limits_on_its_loop_device_are_reset_to_the_defaults() {
    if skip("leftover_bdi_limits") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = Scratch::new("guard_bdi_reset");
    let guard = Guard::new(Some(&scratch.0)).expect("guard");
    let dev = LoopDev::create(&guard, "img", 64 << 20).expect("loop");
    let bdi = dev.bdi_dir();
    let read = |f: &str| std::fs::read_to_string(bdi.join(f)).map(|s| s.trim().to_string());
    // Defaults: nothing to reset.
    assert_eq!(dev.reset_bdi_limits(&guard).expect("reset"), None);
    // What a killed probe could leave behind: a strict 1% cap.
    std::fs::write(bdi.join("max_ratio"), "1\n").expect("max_ratio");
    std::fs::write(bdi.join("strict_limit"), "1\n").expect("strict_limit");
    let found = dev.reset_bdi_limits(&guard).expect("reset");
    let found = found.expect("a reset");
    assert!(found.contains("strict_limit=1"), "{found}");
    assert!(found.contains("max_ratio=1"), "{found}");
    assert_eq!(read("strict_limit").expect("read"), "0");
    assert_eq!(read("max_ratio").expect("read"), "100");
    assert_eq!(read("min_ratio").expect("read"), "0");
    drop(dev);
    drop(guard);
    assert_nothing_left(&scratch.0, std::process::id());
}
