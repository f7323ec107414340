//! `--plot-from DIR --plot F.svg`: the plot of a `scripts/bench-vs-mpi.sh`
//! run, one line (or marker) per system: latency and bandwidth versus size
//! of put and get, and every pattern at 8 bytes. Reads DIR/NAME[.rK].jsonl
//! (the files `benches/mpi/table.py` reads; onesided systems contribute
//! their `onesided` results, raw libfabric (`fi-raw-*`) their `fi_raw`
//! ones, MPI systems their `mpi` ones) and plots the
//! median of the per-run medians, as the table does. No `World`: runs
//! without a launcher.

use std::collections::BTreeMap;
use std::error::Error;
use std::path::Path;

use serde_json::Value;

use crate::plot::{cat, push, Plot};

/// Per system: (op, size) → the runs' medians (µs per operation).
type Cells = BTreeMap<String, BTreeMap<(String, u64), Vec<f64>>>;

/// The system a file belongs to: `NAME.rK.jsonl` or `NAME.jsonl`.
fn system_of(file: &str) -> Option<String> {
    let stem = file.strip_suffix(".jsonl")?;
    Some(match stem.rsplit_once(".r") {
        Some((name, k)) if !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()) => {
            name.to_string()
        }
        _ => stem.to_string(),
    })
}

fn read(dir: &Path) -> Result<Cells, Box<dyn Error>> {
    let mut cells = Cells::new();
    for entry in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let entry = entry?;
        let file = entry.file_name().to_string_lossy().into_owned();
        let Some(system) = system_of(&file) else {
            continue;
        };
        let want = if system.starts_with("onesided") {
            "onesided"
        } else if system.starts_with("fi-raw") {
            // benches/raw/fi_rma_raw.c, converted by table.py --from-fi-raw.
            "fi_raw"
        } else {
            "mpi"
        };
        let text = std::fs::read_to_string(entry.path())?;
        for line in text.lines() {
            let line = line.trim();
            let line = line.strip_prefix("[0] ").unwrap_or(line);
            if !line.starts_with('{') {
                continue;
            }
            let v: Value = serde_json::from_str(line)
                .map_err(|e| format!("{file}: not JSON ({e}): {line}"))?;
            if v["type"] != "result" || v["mode"] != want {
                continue;
            }
            let (Some(op), Some(size), Some(lat)) =
                (v["op"].as_str(), v["size"].as_u64(), v["lat_us"].as_f64())
            else {
                return Err(format!("{file}: result without op/size/lat_us: {line}").into());
            };
            cells
                .entry(system.clone())
                .or_default()
                .entry((op.to_string(), size))
                .or_default()
                .push(lat);
        }
    }
    if cells.is_empty() {
        return Err(format!("no results in {}/*.jsonl", dir.display()).into());
    }
    Ok(cells)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Builds the plot of DIR.
pub fn plot(dir: &Path) -> Result<Plot, Box<dyn Error>> {
    let mut cells = read(dir)?;
    let mut p = Plot {
        caption: format!(
            "bench-vs-mpi: {} (median of the run medians)",
            dir.display()
        ),
        lat: Vec::new(),
        bw: Vec::new(),
        cats: Vec::new(),
        small: Vec::new(),
    };
    // Patterns of the 8-byte panel in the benchmark's order.
    for op in crate::op::Op::ALL {
        if cells
            .values()
            .any(|c| c.contains_key(&(op.name().to_string(), 8)))
        {
            cat(&mut p.cats, op.name());
        }
    }
    for (k, (system, c)) in cells.iter_mut().enumerate() {
        let strong = system.starts_with("onesided");
        for ((op, size), runs) in c.iter_mut() {
            let lat = median(runs);
            let x = *size as f64;
            let color = k;
            match op.as_str() {
                "put_lat" | "get_lat" => push(
                    &mut p.lat,
                    format!("{op} {system}"),
                    color,
                    strong,
                    (x, lat),
                ),
                "put_bw" | "get_bw" if lat > 0.0 => push(
                    &mut p.bw,
                    format!("{op} {system}"),
                    color,
                    strong,
                    (x, x / lat),
                ),
                _ => {}
            }
            if *size == 8 {
                let i = cat(&mut p.cats, op);
                push(&mut p.small, system.clone(), k, strong, (i, lat));
            }
        }
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::system_of;

    #[test]
    fn file_names() {
        assert_eq!(system_of("mpich.r2.jsonl").as_deref(), Some("mpich"));
        assert_eq!(
            system_of("ompi-ucx-tcp.jsonl").as_deref(),
            Some("ompi-ucx-tcp")
        );
        assert_eq!(system_of("a.rx.jsonl").as_deref(), Some("a.rx"));
        assert_eq!(system_of("table.md"), None);
    }
}
