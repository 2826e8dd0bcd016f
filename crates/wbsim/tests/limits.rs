//! A scenario whose run would not fit the memory limit is refused before it
//! starts, by `wbsim check` and `wbsim run` alike, with the estimate and
//! the `numjobs` line responsible; `--max-memory` moves the limit.

use std::process::Command;

fn scenario(numjobs: u32, group_reporting: bool) -> String {
    format!(
        "[scenario]\nname = \"big\"\nduration = \"1s\"\n\n[machine]\ncpus = 2\nmemory = \"16g\"\n\n\
         [[device]]\nname = \"d\"\nprofile = \"qemu-nvme\"\n\n\
         [[filesystem]]\nname = \"x\"\ntype = \"ext4\"\ndevice = \"d\"\n\n\
         [[job]]\nfilesystem = \"x\"\nfio = \"\"\"\n[w]\nrw=write\nbs=1m\nsize=1m\n\
         numjobs={numjobs}\n{}\"\"\"\n",
        if group_reporting { "group_reporting\n" } else { "" }
    )
}

fn wbsim(args: &[&str], file: &std::path::Path) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_wbsim"))
        .args(args)
        .arg(file)
        .output()
        .expect("wbsim");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn too_big_runs_are_refused_up_front_with_the_estimate_and_the_key() {
    let dir = std::env::temp_dir().join(format!("wbsim-limits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let big = dir.join("big.toml");
    std::fs::write(&big, scenario(100_000, false)).expect("write");
    // numjobs= is on line 25.
    let out_dir = dir.join("out");
    let out = out_dir.to_string_lossy().into_owned();
    for args in [vec!["check"], vec!["run", "--out", &out]] {
        let (ok, text) = wbsim(&args, &big);
        assert!(
            !ok,
            "wbsim {args:?} accepts 100,000 separate clones: {text}"
        );
        assert!(
            text.contains(&format!("{}:25", big.display()))
                && text.contains("numjobs")
                && text.contains("MiB")
                && text.contains("--max-memory"),
            "wbsim {args:?}: {text}"
        );
    }
    assert!(!out_dir.exists(), "the refused run wrote results");
    // Shared statistics fit the default limit (check only: the run is the
    // benchmark's), but not a 512 MiB one.
    let shared = dir.join("shared.toml");
    std::fs::write(&shared, scenario(100_000, true)).expect("write");
    let (ok, text) = wbsim(&["check"], &shared);
    assert!(ok, "{text}");
    let (ok, text) = wbsim(&["check", "--max-memory", "512m"], &shared);
    assert!(!ok && text.contains("numjobs"), "{text}");
    let (ok, text) = wbsim(&["check", "--max-memory", "lots"], &shared);
    assert!(!ok && text.contains("--max-memory"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}
