//! The READMEs' live tables are what `wbsim live-tables` generates from the
//! committed docs/probe/*.json, and the generator reflects the JSON.

use std::path::PathBuf;

use wbsim::cli::live_tables::{
    block, block_named, replace_block, results_files, tables, BEGIN, END,
};
use wbsim::experiment::results::Results;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn readmes_agree_with_the_probe_json() {
    let root = root();
    // Files named as the command at the repository root names them.
    let generated =
        block_named(&root.join("docs/probe"), "docs/probe").expect("docs/probe results load");
    for f in ["README.md", "docs/probe/README.md"] {
        let text = std::fs::read_to_string(root.join(f)).expect("readme");
        let want = replace_block(&text, &generated).expect("the README has the block");
        assert!(
            want == text,
            "{f} is not what `wbsim live-tables` generates from docs/probe/*.json; \
             run `wbsim live-tables` at the repository root"
        );
    }
}

#[test]
fn every_probe_file_has_a_table_with_its_figures() {
    let dir = root().join("docs/probe");
    let files = results_files(&dir).unwrap();
    assert!(files.len() >= 4, "{files:?}");
    for p in files {
        let r = Results::load(&p).unwrap();
        let t = tables("x.json", &r);
        assert!(t.contains("| "), "{}: no table", p.display());
        // One figure from the JSON, formatted as the table does: the first
        // fio job's MiB/s.
        if let Some(job) = r
            .metrics
            .keys()
            .find_map(|n| n.strip_prefix("fio.").and_then(|x| x.strip_suffix(".clat")))
        {
            if let Some(bw) = r.stat(&format!("fio.{job}.write_bw"), "value") {
                let cell = format!("| {job} | {} |", wbsim::cli::live_tables::sig(bw));
                assert!(t.contains(&cell), "{}: no '{cell}'", p.display());
            }
        }
    }
    let b = block(&dir).unwrap();
    assert!(b.starts_with(BEGIN) && b.ends_with(END));
}

/// `--check` exits 1 on a stale block and writes nothing; a file without
/// the block or a missing directory is a clear error, not a panic.
#[test]
fn check_flags_a_stale_block_and_bad_input_fails_cleanly() {
    let root = root();
    let dir = std::env::temp_dir().join(format!("wbsim-live-tables-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let stale = dir.join("stale.md");
    let text = format!("# x\n\n{BEGIN}\n| old | table |\n{END}\n");
    std::fs::write(&stale, &text).unwrap();
    let run = |args: &[&std::ffi::OsStr]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_wbsim"))
            .arg("live-tables")
            .args(args)
            .output()
            .expect("run wbsim")
    };
    let probe_dir = root.join("docs/probe");
    let out = run(&[
        "--dir".as_ref(),
        probe_dir.as_os_str(),
        "--check".as_ref(),
        stale.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        std::fs::read_to_string(&stale).unwrap(),
        text,
        "--check wrote"
    );
    // Without --check it is written, and then up to date.
    let out = run(&["--dir".as_ref(), probe_dir.as_os_str(), stale.as_os_str()]);
    assert_eq!(out.status.code(), Some(0));
    let out = run(&[
        "--dir".as_ref(),
        probe_dir.as_os_str(),
        "--check".as_ref(),
        stale.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(0));
    // No block.
    let plain = dir.join("plain.md");
    std::fs::write(&plain, "no markers\n").unwrap();
    let out = run(&["--dir".as_ref(), probe_dir.as_os_str(), plain.as_os_str()]);
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no generated block"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // Missing directory.
    let out = run(&[
        "--dir".as_ref(),
        dir.join("nope").as_os_str(),
        plain.as_os_str(),
    ]);
    assert_ne!(out.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    std::fs::remove_dir_all(&dir).unwrap();
}
