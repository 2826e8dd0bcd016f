//! A probe killed with SIGKILL (no cleanup runs) at each point where it
//! has made something (its first image, its first loop device, its first
//! loop-device mount; the `WBSIM_PROBE_PAUSE_AT` test hook stops it there)
//! leaves state that the next `wbsim probe` (or `wbsim probe --cleanup`)
//! finds, verifies and removes: no loop device backed by its images, no
//! mount, no image, no directory. Skips (with the reason printed) when not
//! root or without loop devices.

mod probe_common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use probe_common::*;

/// Starts `wbsim probe umount --quick` pausing at `point`, waits for it to
/// pause, SIGKILLs it; returns its pid.
fn kill_at(point: &str, scratch: &Path, out: &Path) -> u32 {
    let mut child = Command::new(env!("CARGO_BIN_EXE_wbsim"))
        .args(["probe", "umount", "--quick", "--tmpdir"])
        .arg(scratch)
        .arg("--out")
        .arg(out)
        .env("WBSIM_PROBE_PAUSE_AT", point)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start wbsim probe");
    let pid = child.id();
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut log = Vec::new();
    let mut seen = false;
    while Instant::now() < deadline && !seen {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(l) => {
                seen = l.contains(&format!("paused at {point}"));
                log.push(l);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    if !seen {
        let _ = child.kill();
        let _ = child.wait();
        panic!("{point}: the probe never paused:\n{}", log.join("\n"));
    }
    child.kill().expect("SIGKILL the probe");
    let status = child.wait().expect("wait");
    assert!(!status.success(), "{point}: killed probe exited 0");
    pid
}

/// The probe's own directory (`wbsim-probe-PID-N`) under `scratch`.
fn probe_dirs(scratch: &Path, pid: u32) -> Vec<String> {
    std::fs::read_dir(scratch)
        .expect("scratch")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("wbsim-probe-{pid}-")))
        .collect()
}

fn images_under(dir: &Path) -> usize {
    walk(dir)
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "img"))
        .count()
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            // Do not walk into mounts (a mounted filesystem's own files).
            if mounts_under(dir).iter().all(|m| Path::new(m) != p) {
                out.extend(walk(&p));
            }
        } else {
            out.push(p);
        }
    }
    out
}

/// Kills the probe at `point`, checks what it left (`expect_loop`,
/// `expect_mount`), then runs `next` (the `wbsim probe` arguments of the
/// next run) and checks that nothing is left.
fn killed_then_cleaned(
    name: &str,
    point: &str,
    expect_loop: bool,
    expect_mount: bool,
    next: &[&str],
) {
    if skip(name) {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = Scratch::new(name);
    let out_dir = Scratch::new(&format!("{name}-out"));
    let pid = kill_at(point, &scratch.0, &out_dir.0.join("killed.json"));
    // What the killed probe left (so the cleanup below has work to do).
    let dirs = probe_dirs(&scratch.0, pid);
    assert_eq!(dirs.len(), 1, "{name}: probe directories {dirs:?}");
    let dir = scratch.0.join(&dirs[0]);
    assert!(dir.join("state").exists(), "{name}: no state journal");
    assert_eq!(images_under(&dir), 1, "{name}: the image is not there");
    assert_eq!(
        !loops_under(&scratch.0).is_empty(),
        expect_loop,
        "{name}: loop devices {:?}",
        loops_under(&scratch.0)
    );
    assert_eq!(
        !mounts_under(&scratch.0).is_empty(),
        expect_mount,
        "{name}: mounts {:?}",
        mounts_under(&scratch.0)
    );
    // The next run.
    let out = Command::new(env!("CARGO_BIN_EXE_wbsim"))
        .arg("probe")
        .args(next)
        .arg("--tmpdir")
        .arg(&scratch.0)
        .arg("--out")
        .arg(out_dir.0.join("next.json"))
        .output()
        .expect("run the next probe");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{name}: next run failed:\n{text}");
    assert!(
        text.contains("image ") && text.contains(&format!("dead probe {pid}")),
        "{name}: the next run did not say what it removed:\n{text}"
    );
    if expect_loop {
        assert!(text.contains("loop device /dev/loop"), "{name}:\n{text}");
    }
    if expect_mount {
        assert!(text.contains("removed mount "), "{name}:\n{text}");
    }
    assert_nothing_left(&scratch.0, pid);
    println!("{name}: the next run removed:\n{text}");
}

#[test]
fn sigkill_after_image_creation() {
    killed_then_cleaned("recover_image", "image", false, false, &["--cleanup"]);
}

#[test]
fn sigkill_after_losetup() {
    killed_then_cleaned(
        "recover_losetup",
        "losetup",
        true,
        false,
        &["wakeup", "--quick"],
    );
}

#[test]
fn sigkill_after_mount() {
    killed_then_cleaned("recover_mount", "mount", true, true, &["--cleanup"]);
}

/// `--cleanup` leaves a directory that looks like a probe's but whose
/// journal does not match it alone, and says so.
#[test]
fn cleanup_refuses_what_is_not_a_probes() {
    if skip("recover_refuse") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = Scratch::new("recover_refuse");
    // Pid 1 is alive; the journal claims a different pid from the name.
    let d = scratch.0.join("wbsim-probe-999999-0");
    std::fs::create_dir(&d).expect("mkdir");
    std::fs::write(d.join("state"), "wbsim-probe-state 1\npid\t1\t0\n").expect("state");
    let out = Command::new(env!("CARGO_BIN_EXE_wbsim"))
        .args(["probe", "--cleanup", "--tmpdir"])
        .arg(&scratch.0)
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("REFUSED") && text.contains("does not match"),
        "{text}"
    );
    assert!(d.exists());
}
