//! Draws a [`Plot`] as an SVG string with plotters' SVG backend, for
//! inlining in index.html: line charts (CDF, sweep, series) and horizontal
//! grouped bar charts, with published figures as black-edged triangles.
//!
//! Deterministic: fixed size, fixed palette, no timestamps or ids, so the
//! same plot gives the same bytes. Leaves out interactivity (no
//! JavaScript) and log axes.

use plotters::coord::ranged1d::SegmentValue;
use plotters::coord::types::RangedCoordf64;
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
    let size = match p.kind {
        PlotKind::Bars => (SIZE.0, bars_height(p)),
        _ => SIZE,
    };
    {
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
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
    let pts = p
        .lines
        .iter()
        .chain(p.markers.iter())
        .flat_map(|l| l.1.iter());
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
    draw_markers(&mut chart, p)?;
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

/// A marker's colour: the colour of the line or bar it belongs to
/// (`published NAME` belongs to the first line whose name starts with
/// NAME), black if none.
fn marker_colour(p: &Plot, name: &str) -> RGBColor {
    let owner = name.strip_prefix("published ").unwrap_or(name);
    p.lines
        .iter()
        .position(|l| l.0 == owner || l.0.starts_with(&format!("{owner}[")))
        .map_or(BLACK, colour)
}

/// Draws the published points of a line chart as triangles.
fn draw_markers<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    p: &Plot,
) -> Result<(), String> {
    for (name, pts) in &p.markers {
        let c = marker_colour(p, name);
        chart
            .draw_series(pts.iter().map(|&q| {
                EmptyElement::at(q)
                    + TriangleMarker::new((0, 0), 7, c.filled())
                    + TriangleMarker::new((0, 0), 7, BLACK.stroke_width(1))
            }))
            .map_err(|e| e.to_string())?
            .label(name.as_str())
            .legend(move |(x, y)| TriangleMarker::new((x + 8, y), 6, c.filled()));
    }
    Ok(())
}

/// Rows of a grouped bar chart: per category one slot per line and a gap.
fn bar_slots(p: &Plot) -> usize {
    p.categories.len().max(1) * (p.lines.len().max(1) + 1)
}

/// Height of a bar chart: enough for every slot.
fn bars_height(p: &Plot) -> u32 {
    (80 + 12 * bar_slots(p) as u32).max(SIZE.1)
}

fn bars(root: &Area<'_>, p: &Plot) -> Result<(), String> {
    let per = p.lines.len().max(1) + 1;
    let slots = bar_slots(p);
    let slot = |cat: f64, line: usize| (cat as usize) * per + line;
    let vals = p
        .lines
        .iter()
        .chain(p.markers.iter())
        .flat_map(|l| l.1.iter().map(|q| q.1));
    let hi = vals.clone().fold(f64::MIN, f64::max);
    let lo = vals.fold(f64::MAX, f64::min);
    let label_width = p
        .categories
        .iter()
        .map(|c| c.len())
        .max()
        .unwrap_or(4)
        .clamp(4, 40) as u32
        * 7
        + 10;
    let mut chart = ChartBuilder::on(root)
        .caption(&p.title, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(label_width)
        .build_cartesian_2d(range(lo, hi, true), (0..slots - 1).into_segmented())
        .map_err(|e| e.to_string())?;
    let cats = &p.categories;
    let label = |v: &SegmentValue<usize>| match v {
        SegmentValue::CenterOf(i) if i % per == 0 => cats.get(i / per).cloned().unwrap_or_default(),
        _ => String::new(),
    };
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_desc(p.x_label.as_str())
        .y_labels(slots)
        .y_label_formatter(&label)
        .x_label_formatter(&|v| tick(*v))
        .draw()
        .map_err(|e| e.to_string())?;
    for (j, (name, pts)) in p.lines.iter().enumerate() {
        let c = colour(j);
        chart
            .draw_series(pts.iter().map(|&(cat, v)| {
                let i = slot(cat, j);
                let mut r = Rectangle::new(
                    [
                        (0.0, SegmentValue::Exact(i)),
                        (v, SegmentValue::Exact(i + 1)),
                    ],
                    c.filled(),
                );
                r.set_margin(1, 1, 0, 0);
                r
            }))
            .map_err(|e| e.to_string())?
            .label(name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
    }
    for (name, pts) in &p.markers {
        let owner = name.strip_prefix("published ").unwrap_or(name);
        let j = p.lines.iter().position(|l| l.0 == owner).unwrap_or(0);
        let c = colour(j);
        chart
            .draw_series(pts.iter().map(|&(cat, v)| {
                EmptyElement::at((v, SegmentValue::CenterOf(slot(cat, j))))
                    + TriangleMarker::new((0, 0), 7, c.mix(0.6).filled())
                    + TriangleMarker::new((0, 0), 7, BLACK.stroke_width(1))
            }))
            .map_err(|e| e.to_string())?
            .label(name.as_str())
            .legend(move |(x, y)| TriangleMarker::new((x + 6, y), 6, BLACK.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())?;
    Ok(())
}
