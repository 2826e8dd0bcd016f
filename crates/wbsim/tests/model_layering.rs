//! Dependencies inside `model/` run one way, as in Linux: this test reads the
//! model's source files, resolves every `crate::model::...`, `super::...` and
//! `self::...` path to the file that defines it (module roots included), and
//! fails on any cycle between files, and on any dependency between the
//! subsystem folders that goes against `fs/ -> mm/ -> kernel/` (block/ may use
//! kernel/ only; kernel/ uses nothing above it).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Module path (e.g. ["fs", "vfs"]) -> file, for every file under model/.
fn modules(root: &Path) -> BTreeMap<Vec<String>, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let rel = p.strip_prefix(root).unwrap();
            let mut segs: Vec<String> = rel
                .iter()
                .map(|s| s.to_string_lossy().trim_end_matches(".rs").to_string())
                .collect();
            if segs.last().is_some_and(|s| s == "mod") {
                segs.pop();
            }
            out.insert(segs, p);
        }
    }
    out
}

/// The module paths a file's text names, resolved against `here` (the file's
/// own module path); `is_child` tells whether a name is a child module file
/// of `here`. Paths outside model/ are left out.
fn referenced(text: &str, here: &[String], is_child: impl Fn(&str) -> bool) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    // Strip line comments (doc links are not dependencies).
    let code: String = text
        .lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let bytes = code.as_bytes();
    let is_ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < bytes.len() {
        if (i == 0 || !is_ident(bytes[i - 1]) && bytes[i - 1] != b':') && is_ident(bytes[i]) {
            let start = i;
            // A path: ident(::ident)*
            let mut segs = Vec::new();
            let mut j = i;
            loop {
                let s = j;
                while j < bytes.len() && is_ident(bytes[j]) {
                    j += 1;
                }
                segs.push(code[s..j].to_string());
                if code[j..].starts_with("::") && j + 2 < bytes.len() && is_ident(bytes[j + 2]) {
                    j += 2;
                } else {
                    break;
                }
            }
            i = j.max(start + 1);
            let base: Vec<String> = match segs[0].as_str() {
                "crate" if segs.get(1).is_some_and(|s| s == "model") => segs[2..].to_vec(),
                "super" => {
                    // `here` of `a/b.rs` is [a, b] and of `a/mod.rs` is [a]:
                    // either way `super` is one segment up.
                    let mut b = here.to_vec();
                    let mut k = 0;
                    while segs.get(k).is_some_and(|s| s == "super") {
                        b.pop();
                        k += 1;
                    }
                    b.extend(segs[k..].iter().cloned());
                    b
                }
                "self" if segs.len() > 1 => {
                    let mut b = here.to_vec();
                    b.extend(segs[1..].iter().cloned());
                    b
                }
                // A path through a child module (`use vfs::X;` in a root).
                first if segs.len() > 1 && is_child(first) => {
                    let mut b = here.to_vec();
                    b.extend(segs.iter().cloned());
                    b
                }
                _ => continue,
            };
            out.push(base);
        } else {
            i += 1;
        }
    }
    out
}

/// The longest prefix of `path` that is a module file.
fn resolve<'a>(
    path: &[String],
    mods: &'a BTreeMap<Vec<String>, PathBuf>,
) -> Option<&'a Vec<String>> {
    (1..=path.len())
        .rev()
        .find_map(|n| mods.get_key_value(&path[..n]).map(|(k, _)| k))
}

fn graph() -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/model");
    let mods = modules(&root);
    let mut g = BTreeMap::new();
    for (here, file) in &mods {
        let text = fs::read_to_string(file).unwrap();
        let is_child = |name: &str| {
            let mut c = here.clone();
            c.push(name.to_string());
            mods.contains_key(&c)
        };
        let mut deps = BTreeSet::new();
        for p in referenced(&text, here, is_child) {
            if let Some(target) = resolve(&p, &mods) {
                // A module root declaring its children (`pub mod x;`) is not a
                // dependency; a path into a child through `self::` or the
                // root's `pub use` is.
                if target != here {
                    deps.insert(target.clone());
                }
            }
        }
        g.insert(here.clone(), deps);
    }
    g
}

/// Strongly connected components with more than one file (Tarjan).
fn cycles(g: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<Vec<String>>> {
    struct St<'a> {
        g: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        idx: BTreeMap<&'a Vec<String>, usize>,
        low: BTreeMap<&'a Vec<String>, usize>,
        stack: Vec<&'a Vec<String>>,
        on: BTreeSet<&'a Vec<String>>,
        next: usize,
        out: Vec<Vec<Vec<String>>>,
    }
    fn visit<'a>(s: &mut St<'a>, v: &'a Vec<String>) {
        s.idx.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on.insert(v);
        for w in &s.g[v] {
            if !s.idx.contains_key(w) {
                visit(s, w);
                let l = s.low[w].min(s.low[v]);
                s.low.insert(v, l);
            } else if s.on.contains(w) {
                let l = s.idx[w].min(s.low[v]);
                s.low.insert(v, l);
            }
        }
        if s.low[v] == s.idx[v] {
            let mut comp = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on.remove(w);
                comp.push(w.clone());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                s.out.push(comp);
            }
        }
    }
    let mut s = St {
        g,
        idx: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in g.keys() {
        if !s.idx.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

#[test]
fn no_import_cycle_between_model_files() {
    let g = graph();
    assert!(g.len() > 30, "model/ files found: {}", g.len());
    // The resolver sees real edges (so an empty graph cannot pass).
    let path = |p: &str| p.split('/').map(String::from).collect::<Vec<_>>();
    assert!(
        g[&path("fs/super_")].contains(&path("fs/vfs")),
        "fs/super_.rs -> fs/vfs.rs not seen"
    );
    assert!(
        g[&path("mm/page_writeback/balance")].contains(&path("mm/state")),
        "mm/page_writeback/balance.rs -> mm/state.rs not seen"
    );
    let c = cycles(&g);
    let show: Vec<String> = c
        .iter()
        .map(|comp| {
            comp.iter()
                .map(|m| m.join("/"))
                .collect::<Vec<_>>()
                .join(" <-> ")
        })
        .collect();
    assert!(c.is_empty(), "import cycles in model/: {show:#?}");
}

#[test]
fn subsystem_folders_depend_one_way() {
    let g = graph();
    // What each folder may use besides itself.
    let allowed: BTreeMap<&str, &[&str]> = BTreeMap::from([
        ("kernel", &[][..]),
        ("block", &["kernel", "errno"][..]),
        ("mm", &["kernel", "block", "errno"][..]),
    ]);
    let mut bad = Vec::new();
    for (from, deps) in &g {
        let Some(ok) = from.first().and_then(|f| allowed.get(f.as_str())) else {
            continue;
        };
        for to in deps {
            let top = to.first().map_or("", String::as_str);
            if top != from[0] && !ok.contains(&top) {
                bad.push(format!("{} -> {}", from.join("/"), to.join("/")));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "dependencies against fs -> mm -> kernel: {bad:#?}"
    );
}
