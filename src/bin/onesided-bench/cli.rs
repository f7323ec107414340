//! The command line of `onesided-bench`.

use std::path::PathBuf;

use clap::Parser;

use crate::patterns::Op;

#[derive(Parser, Debug)]
#[command(
    name = "onesided-bench",
    about = "RMA latency/bandwidth benchmark of onesided (rank 0 origin, rank 1 target); \
             run under `onesided-run -n 2` or `mpiexec.hydra -n 2`"
)]
pub struct Cli {
    /// Patterns, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "put_lat,get_lat,put_bw,get_bw,acc_lat,acc_rate,fop_lat,cas_lat,fence_lat,pscw_lat,msg_rate,lock_unlock_lat,halo_lat"
    )]
    pub ops: Vec<Op>,
    /// Message sizes in bytes (suffixes K, M = KiB, MiB), comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = parse_size,
        default_value = "8,64,256,1K,4K,16K,64K,256K,1M,4M"
    )]
    pub sizes: Vec<usize>,
    /// Repetitions per measurement (median, min and max are reported).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub reps: u32,
    /// Target seconds per repetition (iterations = min(max-iters, time / op time), at least 3).
    #[arg(long, default_value_t = 0.5, value_parser = parse_time, allow_negative_numbers = true)]
    pub time: f64,
    /// Most iterations per repetition.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_iters: u64,
    /// Print JSON lines (header, one per result, notes, check) instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also write the whole run as one JSON document to this file.
    #[arg(long, value_name = "FILE")]
    pub json_file: Option<PathBuf>,
    /// Write latency and bandwidth versus size as SVG to this file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// No benchmark: plot the JSON lines of a `scripts/bench-vs-mpi.sh` run
    /// (DIR/NAME[.rK].jsonl), one line per system, into the `--plot` file.
    #[arg(long, value_name = "DIR", requires = "plot")]
    pub plot_from: Option<PathBuf>,
    /// Also time every iteration of the latency and rate patterns (not
    /// PSCW or halo) and report the median and 99th percentile per
    /// operation (`lat_p50_us`, `lat_p99_us`), as perftest's `t_typical`
    /// and percentiles do; costs a clock read per iteration.
    #[arg(long)]
    pub per_iter: bool,
    /// Also run every pattern directly on the transport (no window layer).
    #[arg(long)]
    pub raw: bool,
    /// Negative control for the tests: ask the targets to expect a wrong
    /// last value, so the check must fail.
    #[arg(long, hide = true)]
    pub expect_wrong: bool,
}

pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let (num, mul) = match t.to_ascii_uppercase() {
        u if u.ends_with("KIB") => (&t[..t.len() - 3], 1usize << 10),
        u if u.ends_with("MIB") => (&t[..t.len() - 3], 1 << 20),
        u if u.ends_with('K') => (&t[..t.len() - 1], 1 << 10),
        u if u.ends_with('M') => (&t[..t.len() - 1], 1 << 20),
        _ => (t, 1),
    };
    let n: usize = num
        .parse()
        .map_err(|_| format!("'{s}' is not a size (examples: 8, 64K, 4M)"))?;
    match n.checked_mul(mul) {
        Some(v) if (1..=1 << 30).contains(&v) => Ok(v),
        _ => Err(format!("size '{s}' must be between 1 byte and 1 GiB")),
    }
}

pub fn parse_time(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 3600.0 => Ok(v),
        _ => Err(format!("'{s}' is not a duration in seconds in (0, 3600]")),
    }
}
