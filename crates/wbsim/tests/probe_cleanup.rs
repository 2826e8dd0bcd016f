//! The live probe cleans up when killed mid-run: SIGINT and SIGTERM sent to
//! `wbsim probe` (the built binary) at chosen points leave no mount, loop
//! device, tracefs instance, image or bdi setting of its behind, exit
//! 128 + the signal and write the partial results. Skips
//! (with the reason printed) when not root or without loop devices.

mod probe_common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use probe_common::*;

/// Starts `wbsim probe ARGS --tmpdir SCRATCH`, waits for a stderr line
/// containing `marker`, waits `delay`, sends `sig`, and checks the exit and
/// that nothing is left.
fn kill_mid_run(name: &str, args: &[&str], marker: &str, delay: Duration, sig: i32) {
    if skip(name) {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = Scratch::new(name);
    let out_dir = Scratch::new(&format!("{name}-out"));
    let out_file = out_dir.0.join("partial.json");
    let bdi_before = loop_bdi_settings();
    let mut child = Command::new(env!("CARGO_BIN_EXE_wbsim"))
        .arg("probe")
        .args(args)
        .arg("--tmpdir")
        .arg(&scratch.0)
        .arg("--out")
        .arg(&out_file)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start wbsim probe");
    let pid = child.id();
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = Vec::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line.clone());
            all.push(line);
        }
        all
    });
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut seen = false;
    while Instant::now() < deadline {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(l) if l.contains(marker) => {
                seen = true;
                break;
            }
            Ok(_) => {}
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    assert!(seen, "{name}: never saw '{marker}' on the probe's stderr");
    std::thread::sleep(delay);
    // SAFETY: signalling our own child, not yet reaped.
    unsafe {
        libc::kill(pid as i32, sig);
    }
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "{name}: probe did not exit within 90 s of the signal"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let log = reader.join().unwrap_or_default().join("\n");
    assert_eq!(
        status.code(),
        Some(128 + sig),
        "{name}: exit status after a signal:\n{log}"
    );
    let partial = wbsim::experiment::results::Results::load(&out_file)
        .unwrap_or_else(|e| panic!("{name}: no partial results: {e:#}\n{log}"));
    assert!(
        partial
            .live
            .as_ref()
            .is_some_and(|l| l.notes.iter().any(|n| n.contains("INTERRUPTED"))),
        "{name}: the partial results do not say they were interrupted"
    );
    assert!(
        !log.contains("cleanup:"),
        "{name}: cleanup reported problems:\n{log}"
    );
    assert_nothing_left(&scratch.0, pid);
    assert_eq!(
        loop_bdi_settings(),
        bdi_before,
        "{name}: a loop bdi setting was not restored"
    );
    println!("{name}: exit {status}, nothing left behind");
}

#[test]
fn umount_sigint_while_timing_xfs() {
    kill_mid_run(
        "umount_sigint",
        &["umount", "--repeat", "3"],
        "xfs: timing",
        Duration::from_millis(300),
        libc::SIGINT,
    );
}

#[test]
fn umount_sigterm_while_setting_up_btrfs() {
    kill_mid_run(
        "umount_sigterm",
        &["umount", "--quick"],
        "btrfs: image",
        Duration::from_millis(50),
        libc::SIGTERM,
    );
}

#[test]
fn umount_sigterm_in_busy_case() {
    kill_mid_run(
        "umount_sigterm_busy",
        &["umount", "--repeat", "3"],
        "busy lazy umount",
        Duration::from_millis(100),
        libc::SIGTERM,
    );
}

#[test]
fn buffered_write_sigint_mid_job() {
    kill_mid_run(
        "buffered_write_sigint",
        &["buffered-write", "--quick"],
        "job seq-w4",
        Duration::from_millis(100),
        libc::SIGINT,
    );
}
