//! report.md: the summary table, then per experiment the headline A/B
//! table, the per-job and "where time goes" tables, failed runs, the
//! setup, live figures, and (collapsed) every published figure and every
//! metric.
//!
//! GitHub-flavoured Markdown; each experiment has an `<a id="ID">` anchor.
//! Leaves out plots (index.html has them).

use super::format::md;
use super::group::ExperimentGroup;
use super::headline;
use super::setup;
use super::tables::{self, Table};

fn table(t: &Table) -> String {
    if t.rows.is_empty() {
        return String::new();
    }
    let mut out = format!("| {} |\n", t.headings.join(" | "));
    out.push_str(&format!("|{}\n", "---|".repeat(t.headings.len())));
    for r in &t.rows {
        let cells: Vec<String> = r.iter().map(|c| md(c)).collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out.push('\n');
    out
}

fn section(g: &ExperimentGroup<'_>, live: &[ExperimentGroup<'_>]) -> String {
    let title = match g.experiment {
        Some(e) => format!("{} {}: {}", e.code, e.id, e.title),
        None => g.id.clone(),
    };
    let mut out = format!("<a id=\"{}\"></a>\n\n## {}\n\n", g.id, md(&title));
    if let Some(e) = g.experiment {
        out.push_str(&format!("**Switch**: `{}`\n\n", e.switch));
    }
    if let Some(p) = setup::pending(g) {
        out.push_str(&format!("_{p}_\n\n"));
    }
    let head = headline::headline(g);
    if !head.rows.is_empty() {
        out.push_str("### Headline: baseline vs patched\n\n");
        out.push_str(&format!("_{}_\n\n", md(setup::HEADLINE_NOTE)));
        out.push_str(&table(&head));
    }
    let jobs = headline::per_job(g);
    if !jobs.rows.is_empty() {
        out.push_str("### Per job\n\n");
        out.push_str(&table(&jobs));
    }
    let bd = headline::breakdown(g);
    if !bd.rows.is_empty() {
        out.push_str("### Where time goes, per point\n\n");
        out.push_str(&table(&bd));
    }
    let failed = tables::failed(g);
    if !failed.is_empty() {
        out.push_str("### Failed runs\n\n");
        for (label, seed, err) in failed {
            out.push_str(&format!(
                "- **FAILED** `{}` seed {seed}: {}\n",
                md(&label),
                md(&err)
            ));
        }
        out.push('\n');
    }
    out.push_str("### Setup\n\n");
    for (k, v) in setup::lines(g) {
        out.push_str(&format!("- **{k}**: {}\n", md(&v)));
    }
    out.push('\n');
    let live_g = setup::live_for(g, live);
    if let Some(l) = live_g {
        out.push_str("### Live probe vs simulated\n\n");
        out.push_str(&table(&tables::live(g, l)));
    }
    let published = tables::published(g, live_g);
    if !published.rows.is_empty() {
        out.push_str("<details>\n<summary>Every published figure vs simulated</summary>\n\n");
        out.push_str(&table(&published));
        out.push_str("</details>\n\n");
    }
    let sim = tables::simulated(g);
    if !sim.rows.is_empty() {
        out.push_str(&format!(
            "<details>\n<summary>Every metric ({} rows)</summary>\n\n",
            sim.rows.len()
        ));
        out.push_str(&table(&sim));
        out.push_str("</details>\n\n");
    }
    out
}

/// The whole report.md.
pub fn render(
    groups: &[ExperimentGroup<'_>],
    live: &[ExperimentGroup<'_>],
    files: usize,
) -> String {
    let mut out = String::from("# wbsim report\n\n");
    out.push_str(&setup::preamble(groups, files));
    out.push_str("\n\n");
    out.push_str(&super::summary::markdown(groups));
    out.push('\n');
    for g in groups {
        out.push_str(&section(g, live));
    }
    for l in setup::unmatched_live(groups, live) {
        out.push_str(&format!(
            "_Live results of scenario `{}` match no experiment._\n\n",
            md(&l.id)
        ));
    }
    out
}
