//! The header (conditions of the measurement), result records, the human
//! table and the JSON document.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use std::error::Error;

use onesided::World;

use crate::cli::Cli;
use crate::patterns::{Mode, Op};
use crate::plot;
use crate::stats::Summary;
use crate::Outcome;

/// Conditions the figures were measured under.
#[derive(Debug, Clone, Serialize)]
pub struct Header {
    pub provider: String,
    pub bootstrap: String,
    pub ranks: usize,
    /// UTC, ISO 8601.
    pub date: String,
    /// `/proc/loadavg` at the start (1, 5, 15 min).
    pub loadavg: String,
    pub cpus: usize,
    /// How the window layer completes writes: "ordered read" or "delivery-complete writes".
    pub flush_by: String,
    pub inject_size: usize,
    pub reps: usize,
    pub time_s: f64,
    pub max_iters: u64,
}

impl Header {
    pub fn print(&self) {
        println!(
            "# onesided-bench  provider={}  bootstrap={}  ranks={}  flush_by={}  inject_size={}",
            self.provider, self.bootstrap, self.ranks, self.flush_by, self.inject_size
        );
        println!(
            "# date={}  loadavg={}  cpus={}  reps={}  time/rep={}s  max_iters={}",
            self.date, self.loadavg, self.cpus, self.reps, self.time_s, self.max_iters
        );
    }
}

/// One (op, size, mode) measurement.
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    pub op: Op,
    pub mode: Mode,
    pub size: usize,
    pub iters: u64,
    pub ops_per_iter: usize,
    pub reps: usize,
    /// Per-operation time in µs: median and fastest/slowest repetition.
    pub lat_us: f64,
    pub lat_min_us: f64,
    pub lat_max_us: f64,
    /// Median and 99th percentile of the per-iteration times over every
    /// repetition, µs per operation (`--per-iter`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lat_p50_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lat_p99_us: Option<f64>,
    /// MB/s (1e6 B/s) from the median, for the bandwidth patterns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bw_mbps: Option<f64>,
    /// Million operations per second from the median, for msg_rate and acc_rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_mops: Option<f64>,
}

impl Record {
    pub fn new(
        op: Op,
        mode: Mode,
        size: usize,
        iters: u64,
        ops: usize,
        reps: usize,
        s: Summary,
    ) -> Self {
        let per_op_s = s.median * 1e-6;
        Record {
            op,
            mode,
            size,
            iters,
            ops_per_iter: ops,
            reps,
            lat_us: s.median,
            lat_min_us: s.min,
            lat_max_us: s.max,
            lat_p50_us: None,
            lat_p99_us: None,
            bw_mbps: op.is_bw().then(|| size as f64 / per_op_s / 1e6),
            rate_mops: op.is_rate().then(|| 1.0 / per_op_s / 1e6),
        }
    }
}

/// The whole run.
#[derive(Debug, Serialize)]
pub struct Document {
    pub header: Header,
    pub results: Vec<Record>,
    /// Caveats about the comparisons (e.g. what "raw" means for an op).
    pub notes: Vec<String>,
    /// "ok" or "FAIL".
    pub check: String,
    pub checked: Vec<String>,
}

fn fmt_us(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn fmt_size(n: usize) -> String {
    if n >= 1 << 20 && n % (1 << 20) == 0 {
        format!("{}M", n >> 20)
    } else if n >= 1 << 10 && n % (1 << 10) == 0 {
        format!("{}K", n >> 10)
    } else {
        n.to_string()
    }
}

fn cell(r: &Record) -> String {
    format!(
        "{} [{}–{}]",
        fmt_us(r.lat_us),
        fmt_us(r.lat_min_us),
        fmt_us(r.lat_max_us)
    )
}

fn merit(r: &Record) -> String {
    match (r.bw_mbps, r.rate_mops) {
        (Some(b), _) if b >= 100.0 => format!("{b:.0} MB/s"),
        (Some(b), _) => format!("{b:.3} MB/s"),
        (_, Some(m)) => format!("{m:.3} Mops/s"),
        _ => String::new(),
    }
}

/// The human table: one row per (op, size), onesided beside raw.
pub fn table(results: &[Record]) -> String {
    let mut out = format!(
        "{:<10} {:>5} {:>7} {:>26} {:>26} {:>6} {:>14} {:>14}\n",
        "op",
        "size",
        "iters",
        "onesided us [min–max]",
        "raw us [min–max]",
        "ratio",
        "onesided",
        "raw"
    );
    for r in results.iter().filter(|r| r.mode == Mode::Onesided) {
        let raw = results
            .iter()
            .find(|x| x.mode == Mode::Raw && x.op == r.op && x.size == r.size);
        let (rawcell, ratio, rawmerit) = match raw {
            Some(x) => (cell(x), format!("{:.2}", r.lat_us / x.lat_us), merit(x)),
            None => ("—".into(), "—".into(), String::new()),
        };
        out += &format!(
            "{:<10} {:>5} {:>7} {:>26} {:>26} {:>6} {:>14} {:>14}\n",
            r.op.name(),
            fmt_size(r.size),
            r.iters,
            cell(r),
            rawcell,
            ratio,
            merit(r),
            rawmerit
        );
    }
    out
}

pub fn header(world: &World, cli: &Cli) -> Header {
    let p = world.transport_caps();
    Header {
        provider: p.name.clone(),
        bootstrap: world.bootstrap_name().to_string(),
        ranks: world.size(),
        date: utc_now(),
        loadavg: loadavg(),
        cpus: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0),
        flush_by: p.completion.describe().into(),
        inject_size: p.inject_size,
        reps: cli.reps as usize,
        time_s: cli.time,
        max_iters: cli.max_iters,
    }
}

pub fn emit(cli: &Cli, head: Header, out: Outcome) -> Result<bool, Box<dyn Error>> {
    let ok = out.failed.is_empty();
    let doc = Document {
        header: head,
        results: out.results,
        notes: out.notes,
        check: if ok { "ok" } else { "FAIL" }.into(),
        checked: out.checked,
    };
    if cli.json {
        use serde_json::json;
        println!("{}", json!({"type": "header", "header": &doc.header}));
        for r in &doc.results {
            let mut v = serde_json::to_value(r)?;
            v["type"] = json!("result");
            println!("{v}");
        }
        for n in &doc.notes {
            println!("{}", json!({"type": "note", "note": n}));
        }
        println!(
            "{}",
            json!({"type": "check", "check": &doc.check, "checked": doc.checked.len(), "failed": &out.failed})
        );
    } else {
        doc.header.print();
        print!("{}", table(&doc.results));
        for n in &doc.notes {
            println!("# note: {n}");
        }
        for f in &out.failed {
            println!("# FAILED: {f}");
        }
        println!("check={} checked={}", doc.check, doc.checked.len());
    }
    if let Some(path) = &cli.json_file {
        std::fs::write(path, serde_json::to_string_pretty(&doc)?)
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    if let Some(path) = &cli.plot {
        let caption = format!(
            "onesided-bench — {} — {} — loadavg {} — {} cpus",
            doc.header.provider, doc.header.date, doc.header.loadavg, doc.header.cpus
        );
        plot::write(path, &plot::from_records(&caption, &doc.results))
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    Ok(ok)
}

/// The 1-, 5- and 15-minute load averages.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// The current UTC time as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_print_compactly() {
        assert_eq!(fmt_size(8), "8");
        assert_eq!(fmt_size(65536), "64K");
        assert_eq!(fmt_size(4 << 20), "4M");
        assert_eq!(fmt_size(1000), "1000");
    }

    #[test]
    fn date_looks_like_iso() {
        let d = utc_now();
        assert_eq!(d.len(), 20, "{d}");
        assert!(d.ends_with('Z'));
    }
}
