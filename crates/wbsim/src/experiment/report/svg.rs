//! Draws a [`Plot`] as an SVG string with plotters' SVG backend, for
//! inlining in index.html: line charts (CDF, sweep, series) and bar charts.
//!
//! Deterministic: fixed size, fixed palette, no timestamps or ids, so the
//! same plot gives the same bytes. Leaves out interactivity (no
//! JavaScript) and log axes.

use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;

use super::plots::{Plot, PlotKind};

/// Size of every plot, pixels.
const SIZE: (u32, u32) = (560, 340);

/// Line and bar colours (colour-blind safe, Okabe-Ito, then greys).
const PALETTE: &[RGBColor] = &[
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(120, 120, 120),
    RGBColor(0, 0, 0),
];

fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// `lo..hi` widened so it is never empty, with a margin.
fn range(lo: f64, hi: f64, from_zero: bool) -> std::ops::Range<f64> {
    let lo = if from_zero { lo.min(0.0) } else { lo };
    if !(lo.is_finite() && hi.is_finite()) {
        return 0.0..1.0;
    }
    if hi - lo <= f64::EPSILON * hi.abs().max(1.0) {
        let d = if hi == 0.0 { 1.0 } else { hi.abs() * 0.1 };
        return (lo - d)..(hi + d);
    }
    let m = (hi - lo) * 0.05;
    let lo = if from_zero && lo >= 0.0 { lo } else { lo - m };
    lo..(hi + m)
}

/// Short axis label text (`0.0123`, `1.5e6`).
fn tick(v: f64) -> String {
    let a = v.abs();
    if a != 0.0 && !(1e-3..1e6).contains(&a) {
        format!("{v:.2e}")
    } else {
        let s = super::format::num(Some(v));
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    }
}

/// The plot as an `<svg>` element, or an error message.
pub fn render(p: &Plot) -> Result<String, String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        match p.kind {
            PlotKind::Bars => bars(&root, p)?,
            PlotKind::Cdf | PlotKind::Sweep | PlotKind::Series => lines(&root, p)?,
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(out)
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

fn lines(root: &Area<'_>, p: &Plot) -> Result<(), String> {
    let pts = p.lines.iter().flat_map(|l| l.1.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    let from_zero = p.kind != PlotKind::Cdf;
    let (xr, yr) = if p.kind == PlotKind::Cdf {
        (range(x0, x1, true), 0.0..1.02)
    } else {
        (range(x0, x1, false), range(y0, y1, from_zero))
    };
    let mut chart = ChartBuilder::on(root)
        .caption(&p.title, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d(xr, yr)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc(p.x_label.as_str())
        .y_desc(p.y_label.as_str())
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&|v| tick(*v))
        .x_labels(6)
        .y_labels(6)
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, (name, pts)) in p.lines.iter().enumerate() {
        let c = colour(i);
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
        if p.kind != PlotKind::Series {
            chart
                .draw_series(pts.iter().map(|&q| Circle::new(q, 3, c.filled())))
                .map_err(|e| e.to_string())?;
        }
    }
    let pos = if p.kind == PlotKind::Cdf {
        SeriesLabelPosition::LowerRight
    } else {
        SeriesLabelPosition::UpperLeft
    };
    chart
        .configure_series_labels()
        .position(pos)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())?;
    Ok(())
}

fn bars(root: &Area<'_>, p: &Plot) -> Result<(), String> {
    let values: Vec<(&str, f64)> = p
        .lines
        .iter()
        .filter_map(|(n, pts)| Some((n.as_str(), pts.first()?.1)))
        .collect();
    let n = values.len().max(1);
    // An integer range includes its end: 0..n-1 gives n segments (one slot
    // for a single bar: 0..0 would be empty).
    let last = (n - 1).max(1);
    let hi = values.iter().map(|v| v.1).fold(f64::MIN, f64::max);
    let lo = values.iter().map(|v| v.1).fold(f64::MAX, f64::min);
    let mut chart = ChartBuilder::on(root)
        .caption(&p.title, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d((0..last).into_segmented(), range(lo, hi, true))
        .map_err(|e| e.to_string())?;
    let label = |v: &SegmentValue<usize>| match v {
        SegmentValue::CenterOf(i) => values.get(*i).map(|x| x.0.to_string()).unwrap_or_default(),
        _ => String::new(),
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_desc(p.x_label.as_str())
        .y_desc(p.y_label.as_str())
        .x_labels(n)
        .x_label_formatter(&label)
        .y_label_formatter(&|v| tick(*v))
        .draw()
        .map_err(|e| e.to_string())?;
    chart
        .draw_series(values.iter().enumerate().map(|(i, (_, v))| {
            let mut r = Rectangle::new(
                [
                    (SegmentValue::Exact(i), 0.0),
                    (SegmentValue::Exact(i + 1), *v),
                ],
                colour(i).filled(),
            );
            r.set_margin(0, 0, 8, 8);
            r
        }))
        .map_err(|e| e.to_string())?;
    Ok(())
}
