//! index.html: one self-contained page (inline CSS and SVG, no network, no
//! JavaScript) with the same content as report.md plus plots.
//!
//! Structure a test can find: a `<nav>` summary, then per experiment
//! `<section id="ID" class="experiment has-results|no-results">`, tables
//! `class="simulated|published|live"`, `<ul class="failed-runs">` with
//! `<li class="failed-run">`, and `<figure class="plot plot-KIND">` holding
//! an inline `<svg>`. Leaves out interactivity and any date or host fact.

use super::format::html as esc;
use super::group::ExperimentGroup;
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
figcaption{font-size:80%;color:#555}dl.setup dt{font-weight:bold}dl.setup dd{margin:0 0 .3em 1em}";

fn is_num(c: &str) -> bool {
    c == "n/a" || c.trim_end_matches('x').parse::<f64>().is_ok() || c.contains(" ± ")
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
            if is_num(c) {
                out.push_str(&format!("<td class=\"num\">{}</td>", esc(c)));
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
        out.push_str(&format!("<figure class=\"plot plot-{kind}\">\n"));
        match svg::render(p) {
            Ok(s) => out.push_str(&s),
            Err(e) => out.push_str(&format!(
                "<p class=\"plot-error\">cannot draw {}: {}</p>",
                esc(&p.title),
                esc(&e)
            )),
        }
        out.push_str(&format!(
            "\n<figcaption>{} ({kind})</figcaption>\n</figure>\n",
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
        "<section id=\"{}\" class=\"experiment {has}\">\n<h2>{}</h2>\n<dl class=\"setup\">\n",
        esc(&g.id),
        esc(&title)
    );
    for (k, v) in setup::lines(g) {
        out.push_str(&format!("<dt>{}</dt><dd>{}</dd>\n", esc(k), esc(&v)));
    }
    out.push_str("</dl>\n");
    if let Some(p) = setup::pending(g) {
        out.push_str(&format!("<p class=\"pending\">{}</p>\n", esc(&p)));
    }
    let sim = tables::simulated(g);
    if !sim.rows.is_empty() {
        out.push_str("<h3>Simulated results</h3>\n");
        out.push_str(&table(&sim, "simulated"));
    }
    let live_g = setup::live_for(g, live);
    let published = tables::published(g, live_g);
    if !published.rows.is_empty() {
        out.push_str("<h3>Published vs simulated</h3>\n");
        out.push_str(&table(&published, "published"));
    }
    if let Some(l) = live_g {
        out.push_str("<h3>Live probe vs simulated</h3>\n");
        out.push_str(&table(&tables::live(g, l), "live"));
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
