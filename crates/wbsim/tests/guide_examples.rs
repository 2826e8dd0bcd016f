//! docs/guide.md cannot rot: every fenced block tagged `guide:NAME` (a fio
//! job file or a scenario) is written out, checked with `wbsim check` and
//! run briefly with `wbsim run`.

mod common;

use common::{text, wbsim_in as wbsim};

/// The `guide:NAME` blocks of the guide: (NAME, text).
fn blocks(guide: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut cur: Option<(String, String)> = None;
    for line in guide.lines() {
        match &mut cur {
            None => {
                if let Some(tag) = line.strip_prefix("```") {
                    if let Some((_, name)) = tag.split_once(" guide:") {
                        cur = Some((name.trim().to_string(), String::new()));
                    }
                }
            }
            Some((_, body)) => {
                if line.starts_with("```") {
                    out.extend(cur.take());
                } else {
                    body.push_str(line);
                    body.push('\n');
                }
            }
        }
    }
    assert!(cur.is_none(), "unterminated guide block");
    out
}

#[test]
fn guide_examples_check_and_run() {
    let guide =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/guide.md"))
            .expect("docs/guide.md");
    let found = blocks(&guide);
    let names: Vec<&str> = found.iter().map(|(n, _)| n.as_str()).collect();
    assert!(
        names.iter().any(|n| n.ends_with(".fio")) && names.iter().any(|n| n.ends_with(".toml")),
        "the guide has a job file and a scenario example: {names:?}"
    );
    let dir = std::env::temp_dir().join(format!("wbsim-guide-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    for (name, body) in &found {
        std::fs::write(dir.join(name), body).expect("write example");
        let c = wbsim(&dir, &["check", name]);
        assert!(c.status.success(), "check {name}:\n{}", text(&c));
        let mut args = vec!["run", name.as_str(), "--out"];
        let out = format!("{name}.out");
        args.push(&out);
        if name.ends_with(".fio") {
            args.extend(["--duration", "200ms"]);
        } else {
            args.extend(["--repeat", "1"]);
        }
        let r = wbsim(&dir, &args);
        assert!(r.status.success(), "run {name}:\n{}", text(&r));
        assert!(
            text(&r).contains("no violation"),
            "run {name}:\n{}",
            text(&r)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
