//! A mutation fuzzer (stable Rust, no extra crate) for the three readers of
//! user input: the scenario reader (`scenario::parse_str` and the shared
//! validation `wbsim check` runs), the fio job parser (`fio::parse_str`) and
//! the results reader (`Results::from_json`). Seeds: `fuzz/corpus/<target>/`
//! (the built-in scenarios, their fio jobs, results files). Each case is a
//! seed with 1-4 random mutations (line deletion, duplication, swap, splice
//! from another seed, a value replaced by a hostile token, byte flips,
//! inserts, truncation), from a fixed-seed xorshift generator, so a failure
//! reproduces from the printed case number.
//!
//! Properties: no panic; no hang (each case runs in a thread with a 10 s
//! limit); every error names its location: the input's origin and, for the
//! scenario and fio readers, a line (`origin:LINE`; errors about a whole
//! document, the fio parser's "no jobs defined" and the results reader's
//! schema mismatch, name the file only).
//!
//! Bounded by time: `WBSIM_FUZZ_SECS` seconds per target (default 3; the
//! CI step in scripts/test.sh gives 20); the generator's seed is
//! `WBSIM_FUZZ_SEED` (default one). A failing input is written to
//! `target/fuzz-failures/<target>-<case>` and the test fails. Not
//! coverage-guided: cargo-fuzz needs a nightly toolchain and a C++ libFuzzer
//! build that scripts/install.sh does not provide on a clean CI machine.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use wbsim::experiment::results::Results;
use wbsim::experiment::scenario::parse_str;
use wbsim::experiment::validate::validate;
use wbsim::workload::fio;

/// Values that tend to break readers.
const HOSTILE: &[&str] = &[
    "0",
    "-1",
    "18446744073709551616",
    "99999999999999999999g",
    "1e308",
    "\"\"",
    "nan",
    "inf",
    "[",
    "]]",
    "\"",
    "{",
    "=",
    "0x10",
    "4294967296",
    "-0",
    "é",
    "\u{0}",
    "1:2",
    "/dev/nvme0n1",
    "true",
    "[[job]]",
    "0s",
    "100000",
    "1k",
    "4k:1m",
    "/",
    "{instance}",
    "[global]",
    "null",
];

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn corpus(target: &str) -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    let seeds: Vec<String> = files
        .iter()
        .map(|f| std::fs::read_to_string(f).expect("seed"))
        .collect();
    assert!(!seeds.is_empty(), "no seeds in {}", dir.display());
    seeds
}

/// One random mutation of `s` (`others`: the corpus, for splices).
fn mutate(rng: &mut Rng, s: &str, others: &[String]) -> String {
    let mut lines: Vec<String> = s.lines().map(str::to_string).collect();
    if lines.is_empty() {
        lines.push(String::new());
    }
    let n = lines.len();
    match rng.below(9) {
        0 => {
            lines.remove(rng.below(n));
        }
        1 => {
            let i = rng.below(n);
            let l = lines[i].clone();
            lines.insert(i, l);
        }
        2 => lines.swap(rng.below(n), rng.below(n)),
        3 => {
            let o = &others[rng.below(others.len())];
            let ol: Vec<&str> = o.lines().collect();
            if !ol.is_empty() {
                lines.insert(rng.below(n + 1), ol[rng.below(ol.len())].to_string());
            }
        }
        4 | 5 => {
            // Replace what follows the first '=' (a value) by a hostile token.
            let i = rng.below(n);
            let tok = HOSTILE[rng.below(HOSTILE.len())];
            lines[i] = match lines[i].split_once('=') {
                Some((k, _)) => format!("{k}={tok}"),
                None => format!("{}{tok}", lines[i]),
            };
        }
        6 => {
            let mut b = lines.join("\n").into_bytes();
            if !b.is_empty() {
                let i = rng.below(b.len());
                b[i] ^= 1 << rng.below(8);
            }
            return String::from_utf8_lossy(&b).into_owned();
        }
        7 => {
            let t = lines.join("\n");
            let cut = rng.below(t.len() + 1);
            let cut = (0..=cut)
                .rev()
                .find(|&c| t.is_char_boundary(c))
                .unwrap_or(0);
            return t[..cut].to_string();
        }
        _ => {
            let i = rng.below(n);
            let tok = HOSTILE[rng.below(HOSTILE.len())];
            let l = &lines[i];
            let at = rng.below(l.len() + 1);
            let at = (0..=at).rev().find(|&c| l.is_char_boundary(c)).unwrap_or(0);
            lines[i] = format!("{}{tok}{}", &l[..at], &l[at..]);
        }
    }
    lines.join("\n") + "\n"
}

/// Whether `msg` names `origin` and a line (`origin:N`).
fn names_line(msg: &str, origin: &str) -> bool {
    msg.match_indices(&format!("{origin}:"))
        .any(|(i, m)| msg[i + m.len()..].starts_with(|c: char| c.is_ascii_digit() && c != '0'))
}

/// Checks one input; Err describes a property violation.
fn check(target: &str, text: &str) -> Result<(), String> {
    match target {
        "scenario" => match parse_str(text, "fuzz.toml") {
            Ok(sc) => match validate(&sc) {
                Ok(_) => Ok(()),
                Err(e) => {
                    let m = format!("{e:#}");
                    // Inline fio jobs are located in the scenario file.
                    if names_line(&m, "fuzz.toml") {
                        Ok(())
                    } else {
                        Err(format!("validation error without file:line: {m}"))
                    }
                }
            },
            Err(e) => {
                let m = e.to_string();
                if names_line(&m, "fuzz.toml") {
                    Ok(())
                } else {
                    Err(format!("scenario error without file:line: {m}"))
                }
            }
        },
        "fio" => match fio::parse_str(text, "fuzz.fio") {
            Ok(_) => Ok(()),
            Err(e) => {
                let m = e.to_string();
                // Line 0 with no option: about the whole file ("no jobs").
                let whole_file = e.line == 0 && e.option.is_none() && m.starts_with("fuzz.fio: ");
                if names_line(&m, "fuzz.fio") || whole_file {
                    Ok(())
                } else {
                    Err(format!("fio error without file:line: {m}"))
                }
            }
        },
        "results" => match Results::from_json(text, "fuzz.json") {
            Ok(_) => Ok(()),
            Err(e) => {
                let m = e.to_string();
                if m.starts_with("fuzz.json") {
                    Ok(())
                } else {
                    Err(format!("results error without the file: {m}"))
                }
            }
        },
        _ => unreachable!(),
    }
}

fn fuzz(target: &'static str) {
    let secs: u64 = std::env::var("WBSIM_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let seed: u64 = std::env::var("WBSIM_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let seeds = corpus(target);
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let start = Instant::now();
    let mut cases = 0u64;
    let mut failures = Vec::new();
    // The seeds themselves first, then mutants, until the time is up.
    while start.elapsed() < Duration::from_secs(secs) || cases < seeds.len() as u64 {
        let text = if (cases as usize) < seeds.len() {
            seeds[cases as usize].clone()
        } else {
            let mut t = seeds[rng.below(seeds.len())].clone();
            for _ in 0..=rng.below(4) {
                t = mutate(&mut rng, &t, &seeds);
            }
            t
        };
        let (tx, rx) = mpsc::channel();
        let input = text.clone();
        std::thread::spawn(move || {
            let r = std::panic::catch_unwind(|| check(target, &input));
            let _ = tx.send(r);
        });
        let problem = match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(Ok(()))) => None,
            Ok(Ok(Err(why))) => Some(why),
            Ok(Err(_)) => Some("panicked".to_string()),
            Err(_) => Some("hung (no answer within 10 s)".to_string()),
        };
        if let Some(why) = problem {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/fuzz-failures");
            let _ = std::fs::create_dir_all(&dir);
            let f = dir.join(format!("{target}-{cases}"));
            let _ = std::fs::write(&f, &text);
            failures.push(format!("case {cases}: {why} (input in {})", f.display()));
            if failures.len() >= 10 {
                break;
            }
        }
        cases += 1;
    }
    println!(
        "fuzz {target}: {cases} cases in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "fuzz {target}: {} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn fuzz_scenario_reader() {
    fuzz("scenario");
}

#[test]
fn fuzz_fio_parser() {
    fuzz("fio");
}

#[test]
fn fuzz_results_reader() {
    fuzz("results");
}
