//! Every built-in scenario (`scenarios/*.toml`) runs in every variant, in its
//! `--quick` form, to the end with no invariant violated: a scenario that
//! stops half-way in one variant (an actor step that fails, a mount that
//! cannot happen) fails here.

mod common;
use common::run_variant;

use std::fs;
use std::path::Path;

use wbsim::experiment::scenario::load;

#[test]
fn every_builtin_scenario_runs_in_every_variant() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut paths: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 5, "built-in scenarios found: {paths:?}");
    let mut runs = 0;
    for p in &paths {
        let s = load(p).unwrap_or_else(|e| panic!("{e}"));
        for name in s.variant_names() {
            run_variant(&s, name, true);
            runs += 1;
        }
    }
    assert!(runs > paths.len(), "variants run: {runs}");
}
