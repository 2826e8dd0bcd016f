//! Opens a generated index.html in headless Chromium (Debian's `chromium`,
//! installed by scripts/install.sh) and checks that every experiment with
//! results rendered its section, its headline A/B table first, and SVG
//! plots that each carry data (a drawn line or bar, `data-points` > 0),
//! and every other one its section. Skips, saying why, when chromium is
//! not installed.

mod report_fixtures;

use std::process::Command;

use report_fixtures as fx;
use wbsim::experiment::catalog::EXPERIMENTS;
use wbsim::experiment::report;

/// The first chromium binary found on PATH.
fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

#[test]
fn index_html_renders_every_section_with_its_plots() {
    let Some(browser) = chromium() else {
        println!(
            "SKIPPED index_html_renders_every_section_with_its_plots: no chromium on PATH \
             (scripts/install.sh installs Debian's chromium)"
        );
        return;
    };
    let dir = fx::tmp_dir("report-browser");
    let r = report::build(&fx::all(), &fx::live_lazy_umount());
    let (_, html) = r.write(&dir).unwrap_or_else(|e| panic!("{e}"));
    let profile = dir.join("chromium-profile");
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", html.display()))
        .output()
        .unwrap_or_else(|e| panic!("{browser}: {e}"));
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && dom.contains("</html>"),
        "{browser} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let with_results = [
        "cgwb-umount",
        "lazy-umount",
        "parallel-writeback",
        "dontcache",
    ];
    for e in EXPERIMENTS {
        let start = dom
            .find(&format!("<section id=\"{}\"", e.id))
            .unwrap_or_else(|| panic!("section {} not rendered", e.id));
        let end = start + dom[start..].find("</section>").unwrap_or(0);
        let section = &dom[start..end];
        assert!(section.contains("<h2>"), "{}: no heading", e.id);
        if with_results.contains(&e.id) {
            assert!(section.contains("has-results"), "{}", e.id);
            assert!(section.contains("<table class=\"simulated\">"), "{}", e.id);
        }
        if e.id == "cgwb-umount" {
            continue; // its only metric is a counter: tables, no plots
        }
        if with_results.contains(&e.id) {
            let head = section
                .find("<table class=\"headline\">")
                .unwrap_or_else(|| panic!("{}: no headline table", e.id));
            let body = &section[head..];
            let rows = body[..body.find("</table>").unwrap_or(0)]
                .matches("<tr>")
                .count();
            assert!(rows >= 2, "{}: headline table without rows", e.id);
            if let Some(fig) = section.find("<figure") {
                assert!(head < fig, "{}: a plot before the headline table", e.id);
            }
            for fig in section.split("<figure class=\"plot").skip(1) {
                let n: usize = fig
                    .split("data-points=\"")
                    .nth(1)
                    .and_then(|r| r.split('"').next())
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                assert!(n > 0, "{}: a plot without data", e.id);
                let svg = &fig[..fig.find("</svg>").unwrap_or(fig.len())];
                // Lines are polylines; bars are rects beyond the background.
                let drawn = if fig.starts_with(" plot-bars") {
                    svg.matches("<rect").count() > 1
                } else {
                    svg.contains("<polyline")
                };
                assert!(drawn, "{}: a plot that draws nothing", e.id);
            }
        }
        if with_results.contains(&e.id) {
            let figures = section.matches("<figure class=\"plot").count();
            let svgs = section.matches("<svg").count();
            assert!(figures > 0, "{}: no plots", e.id);
            assert_eq!(figures, svgs, "{}: every plot is an svg", e.id);
            // plotters draws axes as polylines/lines and text as <text>.
            assert!(section.contains("<text"), "{}: svg without text", e.id);
        }
    }
}
