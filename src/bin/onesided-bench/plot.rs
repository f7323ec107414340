//! `--plot FILE.svg`: latency and bandwidth versus size, one line per
//! pattern and mode (onesided solid, raw thin), SVG only (no system fonts).

use std::path::Path;

use plotters::prelude::*;

use crate::patterns::{Mode, Op};
use crate::report::Record;

type Series = (String, Op, Mode, Vec<(f64, f64)>);

fn series(results: &[Record], bw: bool) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for r in results
        .iter()
        .filter(|r| r.op.sized() && r.op.is_bw() == bw)
    {
        let y = if bw {
            r.bw_mbps.unwrap_or(0.0)
        } else {
            r.lat_us
        };
        let name = format!("{} {}", r.op.name(), r.mode.name());
        match out.iter_mut().find(|s| s.0 == name) {
            Some(s) => s.3.push((r.size as f64, y)),
            None => out.push((name, r.op, r.mode, vec![(r.size as f64, y)])),
        }
    }
    for s in &mut out {
        s.3.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

fn bounds(all: &[Series]) -> Option<((f64, f64), (f64, f64))> {
    let pts: Vec<(f64, f64)> = all
        .iter()
        .flat_map(|s| s.3.iter().copied())
        .filter(|p| p.0 > 0.0 && p.1 > 0.0 && p.1.is_finite())
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
    Some(((x0 / 1.5, x1 * 1.5), (y0 / 2.0, y1 * 2.0)))
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    y_desc: &str,
    all: &[Series],
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let Some(((x0, x1), (y0, y1))) = bounds(all) else {
        return Ok(());
    };
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("message size (bytes)")
        .y_desc(y_desc)
        .x_label_formatter(&|v| {
            let v = *v;
            if v >= 1048576.0 {
                format!("{:.0}M", v / 1048576.0)
            } else if v >= 1024.0 {
                format!("{:.0}K", v / 1024.0)
            } else {
                format!("{v:.0}")
            }
        })
        .draw()
        .map_err(|e| e.to_string())?;
    for (name, op, mode, pts) in all {
        let base = Palette99::pick(op.code() as usize);
        let (color, width) = match mode {
            Mode::Onesided => (base.to_rgba(), 2),
            Mode::Raw => (base.mix(0.45), 1),
        };
        let style = color.stroke_width(width);
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), style))
            .map_err(|e| e.to_string())?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// Writes the SVG.
pub fn write(path: &Path, caption: &str, results: &[Record]) -> Result<(), String> {
    let root = SVGBackend::new(path, (960, 960)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let root = root
        .titled(caption, ("sans-serif", 16))
        .map_err(|e| e.to_string())?;
    let (top, bottom) = root.split_vertically(460);
    panel(&top, "latency per operation", "µs", &series(results, false))?;
    panel(
        &bottom,
        "bandwidth (64 ops, one flush)",
        "MB/s",
        &series(results, true),
    )?;
    root.present().map_err(|e| e.to_string())?;
    Ok(())
}
