//! index.html: one self-contained page (inline CSS and SVG, no network, no
//! JavaScript) with the same content as report.md plus plots.
//!
//! Order per experiment: the headline A/B table first, the per-job and
//! "where time goes" tables, failed runs, plots, the setup, and only then
//! (collapsed in `<details>`) published/live comparisons and the full
//! metric table.
//!
//! Structure a test can find: a `<nav>` summary, then per experiment
//! `<section id="ID" class="experiment has-results|no-results">`, tables
//! `class="headline|per-job|breakdown|simulated|published|live"`, ratio
//! cells `class="num ratio-off"` (outside 1.5x) or `"num ratio-within"`,
//! `<ul class="failed-runs">` with `<li class="failed-run">`, and
//! `<figure class="plot plot-KIND" data-points="N">` holding an inline
//! `<svg>` (N: the points drawn). Leaves out interactivity and any date or
//! host fact.

use super::format::html as esc;
use super::group::ExperimentGroup;
use super::headline;
use super::plots;
use super::setup;
use super::summary;
use super::svg;
use super::tables::{self, Table};

const STYLE: &str =
    "body{font-family:sans-serif;max-width:1200px;margin:1em auto;padding:0 1em;color:#222}\
table{border-collapse:collapse;margin:.5em 0 1em;font-size:90%}\
th,td{border:1px solid #ccc;padding:2px 6px;text-align:left}th{background:#f0f0f0}\
td.num{text-align:right;font-variant-numeric:tabular-nums}\
section.experiment{border-top:2px solid #888;margin-top:2em}\
.failed-run{color:#a00}.pending{font-style:italic;color:#555}\
.plots{display:flex;flex-wrap:wrap;gap:8px}figure.plot{margin:0}\
figcaption{font-size:80%;color:#555}dl.setup dt{font-weight:bold}dl.setup dd{margin:0 0 .3em 1em}\
td.ratio-off{background:#fdd;color:#900;font-weight:bold}td.ratio-within{background:#dfd}\
td.sig{font-weight:bold}table.headline th{background:#dde6f0}details{margin:.5em 0}";

fn is_num(c: &str) -> bool {
    let first = c.split(' ').next().unwrap_or_default();
    c == "n/a" || first.trim_end_matches(['x', '%']).parse::<f64>().is_ok() || c.contains(" ± ")
}

/// The CSS class of a cell: numbers right-aligned, ratios coloured by
/// their verdict, significant changes bold.
fn cell_class(c: &str) -> Option<&'static str> {
    if c.contains("outside 1.5x") {
        Some("num ratio-off")
    } else if c.contains("within 1.5x") {
        Some("num ratio-within")
    } else if c.contains(", significant") {
        Some("sig")
    } else if is_num(c) {
        Some("num")
    } else {
        None
    }
}

fn table(t: &Table, class: &str) -> String {
    let mut out = format!("<table class=\"{class}\">\n<thead><tr>");
    for h in &t.headings {
        out.push_str(&format!("<th>{}</th>", esc(h)));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for r in &t.rows {
        out.push_str("<tr>");
        for c in r {
            if let Some(class) = cell_class(c) {
                out.push_str(&format!("<td class=\"{class}\">{}</td>", esc(c)));
            } else {
                out.push_str(&format!("<td>{}</td>", esc(c)));
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table>\n");
    out
}

fn plots_html(g: &ExperimentGroup<'_>) -> String {
    let plots = plots::plan(g);
    if plots.is_empty() {
        return String::new();
    }
    let mut out = String::from("<h3>Plots</h3>\n<div class=\"plots\">\n");
    for p in &plots {
        let kind = p.kind.name();
        let n: usize = p.lines.iter().map(|l| l.1.len()).sum();
        out.push_str(&format!(
            "<figure class=\"plot plot-{kind}\" data-points=\"{n}\">\n"
        ));
        match svg::render(p) {
            Ok(s) => out.push_str(&s),
            Err(e) => out.push_str(&format!(
                "<p class=\"plot-error\">cannot draw {}: {}</p>",
                esc(&p.title),
                esc(&e)
            )),
        }
        let published = if p.markers.is_empty() {
            ""
        } else {
            "; triangles: published figures"
        };
        out.push_str(&format!(
            "\n<figcaption>{} ({kind}{published})</figcaption>\n</figure>\n",
            esc(&p.title)
        ));
    }
    out.push_str("</div>\n");
    out
}

fn section(g: &ExperimentGroup<'_>, live: &[ExperimentGroup<'_>]) -> String {
    let has = if g.ok_runs() > 0 {
        "has-results"
    } else {
        "no-results"
    };
    let title = match g.experiment {
        Some(e) => format!("{} {}: {}", e.code, e.id, e.title),
        None => g.id.clone(),
    };
    let mut out = format!(
        "<section id=\"{}\" class=\"experiment {has}\">\n<h2>{}</h2>\n<p class=\"switch\"><strong>Switch</strong>: <code>{}</code></p>\n",
        esc(&g.id),
        esc(&title),
        esc(g.experiment.map_or("", |e| e.switch))
    );
    if let Some(p) = setup::pending(g) {
        out.push_str(&format!("<p class=\"pending\">{}</p>\n", esc(&p)));
    }
    let head = headline::headline(g);
    if !head.rows.is_empty() {
        out.push_str(&format!(
            "<h3>Headline: baseline vs patched</h3>\n<p class=\"note\">{}</p>\n",
            esc(setup::HEADLINE_NOTE)
        ));
        out.push_str(&table(&head, "headline"));
    }
    let jobs = headline::per_job(g);
    if !jobs.rows.is_empty() {
        out.push_str("<h3>Per job</h3>\n");
        out.push_str(&table(&jobs, "per-job"));
    }
    let bd = headline::breakdown(g);
    if !bd.rows.is_empty() {
        out.push_str("<h3>Where time goes, per point</h3>\n");
        out.push_str(&table(&bd, "breakdown"));
    }
    let failed = tables::failed(g);
    if !failed.is_empty() {
        out.push_str("<h3>Failed runs</h3>\n<ul class=\"failed-runs\">\n");
        for (label, seed, err) in failed {
            out.push_str(&format!(
                "<li class=\"failed-run\"><strong>FAILED</strong> <code>{}</code> seed {seed}: {}</li>\n",
                esc(&label),
                esc(&err)
            ));
        }
        out.push_str("</ul>\n");
    }
    out.push_str(&plots_html(g));
    out.push_str("<h3>Setup</h3>\n<dl class=\"setup\">\n");
    for (k, v) in setup::lines(g) {
        out.push_str(&format!("<dt>{}</dt><dd>{}</dd>\n", esc(k), esc(&v)));
    }
    out.push_str("</dl>\n");
    let live_g = setup::live_for(g, live);
    let published = tables::published(g, live_g);
    if !published.rows.is_empty() {
        out.push_str("<details>\n<summary>Every published figure vs simulated</summary>\n");
        out.push_str(&table(&published, "published"));
        out.push_str("</details>\n");
    }
    if let Some(l) = live_g {
        out.push_str("<h3>Live probe vs simulated</h3>\n");
        out.push_str(&table(&tables::live(g, l), "live"));
    }
    let sim = tables::simulated(g);
    if !sim.rows.is_empty() {
        out.push_str(&format!(
            "<details>\n<summary>Every metric ({} rows)</summary>\n",
            sim.rows.len()
        ));
        out.push_str(&table(&sim, "simulated"));
        out.push_str("</details>\n");
    }
    out.push_str("</section>\n");
    out
}

fn nav(groups: &[ExperimentGroup<'_>]) -> String {
    let mut t = Table {
        headings: summary::HEADINGS.iter().map(|h| h.to_string()).collect(),
        rows: Vec::new(),
    };
    for r in summary::rows(groups) {
        t.rows.push(vec![
            r.code,
            r.id,
            r.status,
            r.ok.to_string(),
            r.failed.to_string(),
            r.matched,
            r.within,
            r.ratios,
        ]);
    }
    let mut s = table(&t, "summary");
    // Link each id to its section.
    for g in groups {
        let id = esc(&g.id);
        s = s.replacen(
            &format!("<td>{id}</td>"),
            &format!("<td><a href=\"#{id}\">{id}</a></td>"),
            1,
        );
    }
    format!("<nav>\n{s}</nav>\n")
}

/// The whole index.html.
pub fn render(
    groups: &[ExperimentGroup<'_>],
    live: &[ExperimentGroup<'_>],
    files: usize,
) -> String {
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>wbsim report</title>\n<style>{STYLE}</style>\n</head>\n<body>\n\
         <h1>wbsim report</h1>\n<p class=\"preamble\">{}</p>\n",
        esc(&setup::preamble(groups, files))
    );
    out.push_str(&nav(groups));
    for g in groups {
        out.push_str(&section(g, live));
    }
    for l in setup::unmatched_live(groups, live) {
        out.push_str(&format!(
            "<p class=\"pending\">Live results of scenario <code>{}</code> match no experiment.</p>\n",
            esc(&l.id)
        ));
    }
    out.push_str("</body>\n</html>\n");
    out
}
