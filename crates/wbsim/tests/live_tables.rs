//! The READMEs' live tables are what `wbsim live-tables` generates from the
//! committed docs/probe/*.json, and the generator reflects the JSON.

use std::path::PathBuf;

use wbsim::cli::live_tables::{block, replace_block, results_files, tables, BEGIN, END};
use wbsim::experiment::results::Results;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn readmes_agree_with_the_probe_json() {
    let root = root();
    // Paths as the command writes them: relative to the repository root.
    let cwd = std::env::current_dir().unwrap();
    std::env::set_current_dir(&root).unwrap();
    let generated = block(std::path::Path::new("docs/probe"));
    std::env::set_current_dir(cwd).unwrap();
    let generated = generated.expect("docs/probe results load");
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
        // fio job's MiB/s or the first metric's value or mean.
        let (name, m) = r.metrics.iter().next().unwrap();
        let _ = (name, m);
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
