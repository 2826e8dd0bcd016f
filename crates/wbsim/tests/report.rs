//! The report made from hand-written results: sections, tables, ratios to
//! published and live figures, unit conversion, n/a, failed runs, plots,
//! loading files, and byte-identical output for the same inputs.

mod report_fixtures;

use report_fixtures as fx;
use wbsim::experiment::catalog::EXPERIMENTS;
use wbsim::experiment::report::compare::published_rows;
use wbsim::experiment::report::group::group;
use wbsim::experiment::report::{self, load_runs, ReportError, Run};

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() <= 1e-9 * b.abs().max(1.0))
}

/// The text of one experiment's section in report.md.
fn md_section<'a>(md: &'a str, id: &str) -> &'a str {
    let start = md
        .find(&format!("<a id=\"{id}\"></a>"))
        .unwrap_or_else(|| panic!("no section {id}"));
    let rest = &md[start + 1..];
    let end = rest.find("<a id=").map_or(md.len(), |e| start + 1 + e);
    &md[start..end]
}

/// The text of one experiment's section in index.html.
fn html_section<'a>(html: &'a str, id: &str) -> &'a str {
    let start = html
        .find(&format!("<section id=\"{id}\""))
        .unwrap_or_else(|| panic!("no section {id}"));
    let end = start + html[start..].find("</section>").unwrap_or(0);
    &html[start..end]
}

#[test]
fn every_experiment_has_a_section_with_setup_and_tables() {
    let r = report::build(&fx::all(), &[]);
    for e in EXPERIMENTS {
        let md = md_section(&r.markdown, e.id);
        assert!(
            md.contains(&format!("## {} {}: {}", e.code, e.id, e.title)),
            "{md}"
        );
        assert!(md.contains("**Switch**"), "{md}");
        assert!(r
            .html
            .contains(&format!("<section id=\"{}\" class=\"experiment", e.id)));
    }
    let e3 = md_section(&r.markdown, "lazy-umount");
    assert!(e3.contains("4 CPUs, 1g RAM, non-RT"), "{e3}");
    assert!(
        e3.contains("sync: detach_release=sync; deferred: detach_release=deferred"),
        "{e3}"
    );
    assert!(
        e3.contains("4 ok, 0 failed, 2 variant label(s), seeds 1..=2"),
        "{e3}"
    );
    assert!(e3.contains("<summary>Every metric ("), "{e3}");
    // Mean over the two seeds (20 and 21 ms), ± their standard deviation.
    assert!(
        e3.contains("| umount.elapsed | sync | ms | 2 | 20.50 ± 0.5000 |"),
        "{e3}"
    );
    // Baseline first, as the catalog's switch lists the sides.
    let sync = e3.find("| umount.elapsed | sync").unwrap_or(usize::MAX);
    let deferred = e3.find("| umount.elapsed | deferred").unwrap_or(0);
    assert!(sync < deferred, "{e3}");
    // E2 has a scenario but no results among the fixtures.
    let e2 = html_section(&r.html, "btrfs-csum-commit-root");
    assert!(e2.contains("class=\"experiment no-results\""), "{e2}");
    assert!(!e2.contains("Still to come"), "{e2}");
    assert!(!r.summary.contains("still to come"), "{}", r.summary);
    assert!(r.summary.contains("no results"), "{}", r.summary);
}

#[test]
fn ratios_to_published_figures_convert_units() {
    let runs = fx::all();
    let groups = group(&runs);
    let g = |id: &str| {
        groups
            .iter()
            .find(|g| g.id == id)
            .unwrap_or_else(|| panic!("{id}"))
    };

    // E3: ms in the model, s published; mean over repetitions.
    let e3 = published_rows(g("lazy-umount"), None);
    let want = [
        ("sync", "umount.elapsed", 0.0205, 0.02455),
        ("sync", "umount_lazy.elapsed", 0.0305, 0.02555),
        ("deferred", "umount.elapsed", 0.0255, 0.026311),
        ("deferred", "umount_lazy.elapsed", 0.0035, 0.003194),
    ];
    for (v, m, sim, published) in want {
        let row = e3
            .iter()
            .find(|r| r.published.variant == v && r.published.metric == m)
            .unwrap_or_else(|| panic!("{v} {m}"));
        assert!(close(row.simulated, sim), "{row:?}");
        assert!(close(row.ratio, sim / published), "{row:?}");
    }

    // E4: sweep points match by variant name and nr_wb_ctx.
    let e4 = published_rows(g("parallel-writeback"), None);
    for (i, row) in e4.iter().enumerate() {
        let ctx = (i + 1) as f64;
        assert_eq!(row.label, format!("ino_mod[nr_wb_ctx={}]", i + 1));
        assert!(close(row.simulated, 10.0 * ctx), "{row:?}");
    }

    // E5: MiB/s in the model, MB/s published.
    let e5 = published_rows(g("dontcache"), None);
    let seq_kick = e5
        .iter()
        .find(|r| r.published.variant == "kick" && r.published.metric.contains("seq"))
        .unwrap_or_else(|| panic!("kick"));
    assert!(close(seq_kick.simulated, 900.0 * 1.048576), "{seq_kick:?}");
    assert!(close(seq_kick.ratio, 943.718_4 / 897.0), "{seq_kick:?}");

    // And in the documents.
    let r = report::build(&runs, &[]);
    let md = md_section(&r.markdown, "lazy-umount");
    assert!(
        md.contains(
            "| sync | umount.elapsed | mean | s | 0.02455 | 0.02050 | 0.8350x (within 1.5x) | n/a |"
        ),
        "{md}"
    );
    assert!(r
        .html
        .contains("<td class=\"num ratio-within\">0.8350x (within 1.5x)</td>"));
}

#[test]
fn missing_metrics_show_n_a() {
    let r = report::build(&fx::all(), &[]);
    // E1 ran, but under a metric name the catalog does not know.
    let e1 = md_section(&r.markdown, "cgwb-umount");
    assert!(
        e1.contains("| global | umount.elapsed | p50 | ms | 67.60 | n/a | n/a | n/a |"),
        "{e1}"
    );
    assert!(
        e1.contains("| isw.switches | global | count | 1 | 5.000 |"),
        "{e1}"
    );
    // E5 rand-write not measured.
    let e5 = md_section(&r.markdown, "dontcache");
    assert!(
        e5.contains("| inline | fio.rand-write-dontcache.write_bw | mean | MB/s | 131.0 | n/a | n/a | n/a |"),
        "{e5}"
    );
    let row = r
        .summary
        .lines()
        .find(|l| l.contains("cgwb-umount"))
        .unwrap_or_default();
    assert!(row.contains("0/8") && row.contains("n/a"), "{row}");
}

#[test]
fn failed_runs_are_marked() {
    let r = report::build(&fx::all(), &[]);
    let md = md_section(&r.markdown, "dontcache");
    assert!(md.contains("### Failed runs"), "{md}");
    assert!(
        md.contains("- **FAILED** `kick` seed 2: model deadlock: writer <blocked> & flusher idle"),
        "{md}"
    );
    let html = html_section(&r.html, "dontcache");
    assert!(
        html.contains("<li class=\"failed-run\"><strong>FAILED</strong> <code>kick</code> seed 2: model deadlock: writer &lt;blocked&gt; &amp; flusher idle</li>"),
        "{html}"
    );
    let row = r
        .summary
        .lines()
        .find(|l| l.contains("dontcache"))
        .unwrap_or_default();
    assert!(row.contains("FAILED"), "{row}");
    // A failed run alone still gives a section that says so.
    let only_failed: Vec<Run> = fx::dontcache()
        .into_iter()
        .filter(|r| matches!(r, Run::Failed(_)))
        .collect();
    let r = report::build(&only_failed, &[]);
    assert!(html_section(&r.html, "dontcache").contains("class=\"experiment no-results\""));
    assert!(r.markdown.contains("**FAILED** `kick` seed 2"));
}

#[test]
fn live_figures_sit_beside_simulated_ones() {
    let r = report::build(&fx::all(), &fx::live_lazy_umount());
    let md = md_section(&r.markdown, "lazy-umount");
    assert!(
        md.contains(
            "| sync | umount.elapsed | mean | s | 0.02455 | 0.02050 | 0.8350x (within 1.5x) | 0.02400 |"
        ),
        "{md}"
    );
    assert!(md.contains("### Live probe vs simulated"), "{md}");
    assert!(
        md.contains("| sync | umount.elapsed | mean | ms | 24.00 | 20.50 | 0.8542x |"),
        "{md}"
    );
    assert!(html_section(&r.html, "lazy-umount").contains("<table class=\"live\">"));
}

#[test]
fn plots_follow_metric_kinds() {
    let r = report::build(&fx::all(), &[]);
    // E3's headline is two means: one bar plot each (with the published
    // figures as points), then the dirty_pages series.
    let e3 = html_section(&r.html, "lazy-umount");
    assert_eq!(
        e3.matches("<figure class=\"plot plot-bars\"").count(),
        2,
        "{e3}"
    );
    assert_eq!(e3.matches("<figure class=\"plot plot-series\"").count(), 1);
    assert!(e3.contains("triangles: published figures"), "{e3}");
    let e4 = html_section(&r.html, "parallel-writeback");
    assert_eq!(e4.matches("<figure class=\"plot plot-sweep\"").count(), 1);
    let e5 = html_section(&r.html, "dontcache");
    assert_eq!(e5.matches("<figure class=\"plot plot-bars\"").count(), 1);
    for s in [e3, e4, e5] {
        assert_eq!(
            s.matches("<figure").count(),
            s.matches("<svg").count(),
            "every plot is an inline svg"
        );
        assert!(!s.contains("plot-error"), "{s}");
    }
    // Self-contained: no scripts, no external resources.
    assert!(!r.html.contains("<script"));
    assert!(
        !r.html.contains("http://")
            || r.html.matches("http://").count() == r.html.matches("http://www.w3.org").count()
    );
    assert!(!r.html.contains("https://"));
}

#[test]
fn same_inputs_give_byte_identical_documents() {
    let runs = fx::all();
    let a = report::build(&runs, &fx::live_lazy_umount());
    let mut shuffled = runs.clone();
    shuffled.reverse();
    shuffled.rotate_left(3);
    let b = report::build(&shuffled, &fx::live_lazy_umount());
    // build() groups by key, but load_runs() sorts: compare through files.
    let dir = fx::tmp_dir("report-determinism");
    fx::write_runs(&dir, &shuffled);
    let loaded = load_runs(std::slice::from_ref(&dir)).unwrap_or_else(|e| panic!("{e}"));
    let c = report::build(&loaded, &fx::live_lazy_umount());
    assert_eq!(a.markdown, c.markdown);
    assert_eq!(a.html, c.html);
    assert_eq!(a, b);
    // No host facts (wall time, dates) in the documents.
    assert!(!c.markdown.contains("2025-01-0") && !c.html.contains("2025-01-0"));
    // Written files are the same bytes.
    let out = dir.join("out");
    c.write(&out).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        std::fs::read_to_string(out.join("report.md")).unwrap_or_default(),
        a.markdown
    );
}

#[test]
fn bad_inputs_are_errors_naming_the_file() {
    let dir = fx::tmp_dir("report-bad-input");
    let bad = dir.join("broken.json");
    std::fs::write(&bad, "{\"schema\": 1, \"scenario\": ").unwrap_or_default();
    let e = load_runs(std::slice::from_ref(&bad))
        .err()
        .map(|e| e.to_string());
    assert!(
        e.as_deref()
            .is_some_and(|e| e.starts_with(&bad.display().to_string())),
        "{e:?}"
    );

    let empty = fx::tmp_dir("report-empty-input");
    assert!(matches!(
        load_runs(std::slice::from_ref(&empty)),
        Err(ReportError::Empty(_))
    ));

    let dup = fx::tmp_dir("report-dup-input");
    fx::write_runs(&dup, &fx::dontcache());
    let first = std::fs::read_dir(&dup)
        .ok()
        .and_then(|mut d| d.next())
        .and_then(Result::ok)
        .map(|e| e.path())
        .unwrap_or_default();
    let copy = dup.join("copy.json");
    std::fs::copy(&first, &copy).unwrap_or_default();
    let e = load_runs(std::slice::from_ref(&dup)).err();
    assert!(matches!(e, Some(ReportError::Duplicate { .. })), "{e:?}");
}

#[test]
fn headline_tables_come_first_with_change_significance_and_verdicts() {
    let r = report::build(&fx::all(), &[]);
    for id in ["lazy-umount", "parallel-writeback", "dontcache"] {
        let html = html_section(&r.html, id);
        let head = html
            .find("<table class=\"headline\">")
            .unwrap_or_else(|| panic!("{id}: no headline table"));
        for later in ["<figure", "<table class=\"simulated\">"] {
            if let Some(i) = html.find(later) {
                assert!(head < i, "{id}: headline after {later}");
            }
        }
        assert!(
            md_section(&r.markdown, id).contains("### Headline: baseline vs patched"),
            "{id}"
        );
    }
    // E3: two seeds per side, 20/21 ms vs 25/26 ms: Welch's t = 7.07 on 2
    // degrees of freedom, p = 0.019.
    let e3 = md_section(&r.markdown, "lazy-umount");
    assert!(
        e3.contains(
            "| umount.elapsed | mean | s | 0.02050 | deferred | 0.02550 | +24.39% | p=0.019, significant (Welch, n=2/2) |"
        ),
        "{e3}"
    );
    // E4: one seed: no test; fs_hook is 1.2x ino_mod at every point; the
    // published ino_mod figures at 1 and 2 contexts are more than 1.5x off.
    let e4 = md_section(&r.markdown, "parallel-writeback");
    assert!(
        e4.contains("| write.bw | mean | 1 | MiB/s | 10.00 | fs_hook | 12.00 | +20.00% | n too small (n=1/1) | 16.40 | 0.6098x (outside 1.5x) |"),
        "{e4}"
    );
    assert!(html_section(&r.html, "parallel-writeback").contains("class=\"num ratio-off\""));
    // E5: kick vs inline with both published figures.
    let e5 = md_section(&r.markdown, "dontcache");
    assert!(
        e5.contains(
            "| fio.seq-write-dontcache.write_bw | mean | MB/s | 314.6 | kick | 943.7 | +200.0% |"
        ),
        "{e5}"
    );
    // Summary: how many published figures are within 1.5x, not "matched".
    let row = r
        .summary
        .lines()
        .find(|l| l.contains("parallel-writeback"))
        .unwrap_or_default();
    assert!(row.contains("4/4") && row.contains("2/4"), "{row}");
    assert!(!r.summary.contains("matched"), "{}", r.summary);
}

#[test]
fn flat_and_empty_plots_are_not_drawn() {
    let s = fx::scenario(
        "flat",
        "[variants.a]\ndetach_release = \"sync\"\n[variants.b]\ndetach_release = \"deferred\"\n",
    );
    let runs: Vec<Run> = ["a", "b"]
        .into_iter()
        .map(|v| {
            fx::results(&s, v, None, 1, |m| {
                for t in 0..10u64 {
                    m.sample("cached_pages", "pages", t * 100_000_000, 0.0);
                    m.record_as("zero.elapsed", "ns", "ms", 0);
                }
                m.set("same.bw", "MiB/s", 5.0);
            })
        })
        .collect();
    let r = report::build(&runs, &[]);
    let html = html_section(&r.html, "flat");
    assert_eq!(html.matches("<figure").count(), 0, "{html}");
}

#[test]
fn a_headline_pattern_gives_one_row_per_matched_metric_and_a_per_job_table() {
    let s = fx::scenario(
        "dontcache",
        "[variants.inline]\ndontcache_flush = \"inline\"\n[variants.kick]\ndontcache_flush = \"kick\"\n",
    );
    let runs: Vec<Run> = [("inline", 100.0), ("kick", 300.0)]
        .into_iter()
        .map(|(v, mb)| {
            fx::results(&s, v, None, 1, |m| {
                for job in ["a-dontcache", "b-dontcache", "c-buffered"] {
                    m.set(&format!("fio.{job}.write_bw"), "MB/s", mb);
                    m.set(&format!("fio.{job}.file_peak_dirty"), "MiB", 1.0);
                    m.record_as(&format!("fio.{job}.lat"), "ns", "us", 3_000);
                    m.record_as(&format!("fio.{job}.slat"), "ns", "us", 1_000);
                    m.record_as(&format!("fio.{job}.clat"), "ns", "us", 2_000);
                }
            })
        })
        .collect();
    let r = report::build(&runs, &[]);
    let md = md_section(&r.markdown, "dontcache");
    for job in ["a-dontcache", "b-dontcache"] {
        assert!(
            md.contains(&format!(
                "| fio.{job}.write_bw | mean | MB/s | 100.0 | kick | 300.0 | +200.0% |"
            )),
            "{md}"
        );
    }
    // The buffered job is not a headline figure, but it has a per-job row.
    assert!(!md.contains("| fio.c-buffered.write_bw | mean"), "{md}");
    assert!(md.contains("### Per job"), "{md}");
    // lat p50/p99/p99.9 first (the headline latency), then slat, then clat.
    let x3 = |v: &str| [v; 3].map(|x| format!("{x} (+0%)")).join(" | ");
    assert!(
        md.contains(&format!(
            "| c-buffered | kick | 300.0 (+200.0%) | {} | {} | {} |",
            x3("3.000"),
            x3("1.000"),
            x3("2.000")
        )),
        "{md}"
    );
}

#[test]
fn jobs_cut_off_by_the_run_are_named_in_the_setup() {
    let mut runs = fx::dontcache();
    for r in runs.iter_mut() {
        if let Run::Done(res) = r {
            if res.variant == "kick" {
                res.unfinished_jobs = vec!["seq-write-4w-dontcache".to_string()];
            }
        }
    }
    let r = report::build(&runs, &[]);
    let md = md_section(&r.markdown, "dontcache");
    assert!(
        md.contains("jobs cut off by the run's end (rates cover what they did): kick seed 1: seq-write-4w-dontcache"),
        "{md}"
    );
    // Without cut-off jobs the line says nothing about them.
    let r = report::build(&fx::dontcache(), &[]);
    assert!(!md_section(&r.markdown, "dontcache").contains("cut off"));
}
