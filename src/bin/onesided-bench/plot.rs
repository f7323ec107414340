//! `--plot FILE.svg`: three panels, SVG only (no system fonts or C
//! libraries): latency versus size and bandwidth versus size (one line per
//! pattern and mode, or per pattern and system for `--plot-from`), and the
//! 8-byte patterns side by side (one marker per mode or system), where the
//! unsized patterns — accumulates, fetch-and-op, compare-and-swap,
//! msg_rate, lock, fence, PSCW — have their place.

use std::path::Path;

use plotters::prelude::*;

use crate::patterns::Mode;
use crate::report::Record;

/// One line (or, in the 8-byte panel, one set of markers).
pub struct Line {
    pub label: String,
    /// Palette index: same colour for the same pattern or system.
    pub color: usize,
    /// Bold (onesided) or thin and pale (raw floor, MPI).
    pub strong: bool,
    /// Markers: circles, or triangles (to tell get from put per system).
    pub triangles: bool,
    /// (x, y); in the 8-byte panel x is the index of the pattern.
    pub pts: Vec<(f64, f64)>,
}

/// What the SVG shows.
pub struct Plot {
    pub caption: String,
    pub lat: Vec<Line>,
    pub bw: Vec<Line>,
    /// Pattern names of the 8-byte panel (x = index).
    pub cats: Vec<String>,
    pub small: Vec<Line>,
}

/// The panels of one `onesided-bench` run.
pub fn from_records(caption: &str, results: &[Record]) -> Plot {
    let mut p = Plot {
        caption: caption.to_string(),
        lat: Vec::new(),
        bw: Vec::new(),
        cats: Vec::new(),
        small: Vec::new(),
    };
    for r in results.iter().filter(|r| r.op.sized()) {
        let (lines, y) = if r.op.is_bw() {
            (&mut p.bw, r.bw_mbps.unwrap_or(0.0))
        } else {
            (&mut p.lat, r.lat_us)
        };
        push(
            lines,
            format!("{} {}", r.op.name(), r.mode.name()),
            r.op.code() as usize,
            r.mode == Mode::Onesided,
            (r.size as f64, y),
        );
    }
    for r in results.iter().filter(|r| r.size == 8) {
        let x = cat(&mut p.cats, r.op.name());
        push(
            &mut p.small,
            r.mode.name().to_string(),
            usize::from(r.mode == Mode::Raw),
            r.mode == Mode::Onesided,
            (x, r.lat_us),
        );
    }
    p
}

/// Index of `name` in the categories (appended if new).
pub fn cat(cats: &mut Vec<String>, name: &str) -> f64 {
    let i = cats.iter().position(|c| c == name).unwrap_or_else(|| {
        cats.push(name.to_string());
        cats.len() - 1
    });
    i as f64
}

/// Adds a point to the line `label` (created if new).
pub fn push(lines: &mut Vec<Line>, label: String, color: usize, strong: bool, pt: (f64, f64)) {
    match lines.iter_mut().find(|l| l.label == label) {
        Some(l) => l.pts.push(pt),
        None => lines.push(Line {
            triangles: label.starts_with("get"),
            label,
            color,
            strong,
            pts: vec![pt],
        }),
    }
}

fn bounds(all: &[Line]) -> Option<((f64, f64), (f64, f64))> {
    let pts: Vec<(f64, f64)> = all
        .iter()
        .flat_map(|s| s.pts.iter().copied())
        .filter(|p| p.0 >= 0.0 && p.1 > 0.0 && p.1.is_finite())
        .collect();
    if pts.is_empty() {
        return None;
    }
    let fold = |f: fn(&(f64, f64)) -> f64| {
        pts.iter()
            .map(f)
            .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)))
    };
    let (x0, x1) = fold(|p| p.0);
    let (y0, y1) = fold(|p| p.1);
    Some(((x0, x1.max(x0 * 2.0)), (y0 / 2.0, y1 * 2.0)))
}

fn style(l: &Line) -> ShapeStyle {
    let base = Palette99::pick(l.color);
    if l.strong {
        base.to_rgba().stroke_width(2)
    } else {
        base.mix(0.5).stroke_width(1)
    }
}

fn size_label(v: f64) -> String {
    if v >= 1048576.0 {
        format!("{:.0}M", v / 1048576.0)
    } else if v >= 1024.0 {
        format!("{:.0}K", v / 1024.0)
    } else {
        format!("{v:.0}")
    }
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

fn legend<'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, CT>,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| e.to_string())
}

fn size_panel(area: &Area<'_>, title: &str, y_desc: &str, all: &[Line]) -> Result<(), String> {
    let Some(((x0, x1), (y0, y1))) = bounds(all) else {
        return Ok(());
    };
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d((x0 / 1.5..x1 * 1.5).log_scale(), (y0..y1).log_scale())
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("message size (bytes)")
        .y_desc(y_desc)
        .x_label_formatter(&|v| size_label(*v))
        .draw()
        .map_err(|e| e.to_string())?;
    for l in all {
        let s = style(l);
        let mut pts = l.pts.clone();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), s))
            .map_err(|e| e.to_string())?
            .label(l.label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], s));
        // Markers, so that a size measured alone is visible too.
        if l.triangles {
            chart
                .draw_series(pts.iter().map(|&p| TriangleMarker::new(p, 4, s.filled())))
                .map_err(|e| e.to_string())?;
        } else {
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 3, s.filled())))
                .map_err(|e| e.to_string())?;
        }
    }
    legend(&mut chart)
}

/// The 8-byte patterns: x = pattern, one marker per line, spread a little
/// sideways so that equal values stay visible.
fn small_panel(area: &Area<'_>, cats: &[String], all: &[Line]) -> Result<(), String> {
    let Some((_, (y0, y1))) = bounds(all) else {
        return Ok(());
    };
    let n = cats.len().max(1) as f64;
    let mut chart = ChartBuilder::on(area)
        .caption("8-byte patterns (µs per operation)", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(-0.5..n - 0.5, (y0..y1).log_scale())
        .map_err(|e| e.to_string())?;
    let names = cats.to_vec();
    chart
        .configure_mesh()
        .x_labels(cats.len().max(1))
        .x_label_formatter(&move |v| {
            let i = v.round();
            if (v - i).abs() < 0.01 && i >= 0.0 {
                names.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc("µs")
        .disable_x_mesh()
        .draw()
        .map_err(|e| e.to_string())?;
    let m = all.len().max(1) as f64;
    for (k, l) in all.iter().enumerate() {
        let s = style(l).filled();
        let dx = (k as f64 - (m - 1.0) / 2.0) * (0.6 / m);
        chart
            .draw_series(
                l.pts
                    .iter()
                    .map(move |&(x, y)| Circle::new((x + dx, y), 4, s)),
            )
            .map_err(|e| e.to_string())?
            .label(l.label.as_str())
            .legend(move |(x, y)| Circle::new((x + 10, y), 4, s));
    }
    legend(&mut chart)
}

/// Writes the SVG.
pub fn write(path: &Path, p: &Plot) -> Result<(), String> {
    let root = SVGBackend::new(path, (1100, 1380)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let root = root
        .titled(&p.caption, ("sans-serif", 16))
        .map_err(|e| e.to_string())?;
    let (top, rest) = root.split_vertically(450);
    let (middle, bottom) = rest.split_vertically(450);
    size_panel(&top, "latency per operation", "µs", &p.lat)?;
    size_panel(&middle, "bandwidth (64 ops, one flush)", "MB/s", &p.bw)?;
    small_panel(&bottom, &p.cats, &p.small)?;
    root.present().map_err(|e| e.to_string())?;
    Ok(())
}
