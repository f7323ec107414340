//! `onesided-scale`: what one window costs each process, versus the number of
//! processes (issue 4 §4; `scripts/scale.sh` runs it for P = 2 … 64 and
//! writes `docs/scaling.md`).
//!
//!     onesided-run -n P target/release/onesided-scale [--bytes 4096] [--cycles 5]
//!
//! Every rank creates windows of `--bytes` bytes `--cycles` times (create,
//! use, free) and prints one JSON line: resident memory (`/proc/self/statm`)
//! before `World::init`, after it, after the first window's creation, after
//! its use and after its free; the library's per-peer state from
//! `World::stats()` / `Window::stats()` at the same points; the messages the
//! rank sent to create and to free the first window (transport writes,
//! reads, atomics, active messages); and the median window creation and free
//! times. Roles in the use phase: rank 0 talks to
//! every other rank (8 B put + flush to each), rank 1 to rank 0 only, the
//! others to nobody (they only take part in the collective calls).
//!
//!     onesided-run -n P target/release/onesided-scale --messages
//!
//! instead counts the messages of single epochs (issue 4 §2): every rank
//! prints one JSON line per epoch kind and phase with the change of its
//! transport counters (`World::stats().transport`: RMA writes, reads and
//! atomics posted, active messages sent and received) over the epoch alone
//! (barriers before and after it, outside the count). Epochs:
//! `lock_put_unlock` (rank 0: exclusive lock of rank 1, one 8 B put,
//! unlock), `lock_all_puts_flush` (rank 0: `lock_all`, an 8 B put to every
//! other rank, `flush_all`, `unlock_all`) and `fence` (every rank: fence,
//! an 8 B put to its right neighbour, fence). Phase `first` runs the epoch on
//! a window just created (first access to each target: descriptor reads),
//! `again` runs it a second time on the same window.

use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use onesided::{Assert, LockType, Window, World, WorldStats};
use serde_json::{json, Value};

#[derive(Parser, Debug)]
#[command(
    name = "onesided-scale",
    about = "Per-process memory and library state of one window, and window \
             creation/free time; run under `onesided-run -n P`"
)]
struct Cli {
    /// Bytes of each window.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u64).range(8..=1 << 30))]
    bytes: u64,
    /// Create/use/free cycles (the first is the one whose memory is reported;
    /// times are the median over all cycles).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    cycles: u32,
    /// Count the messages of single epochs instead (one JSON line per rank,
    /// epoch kind and phase).
    #[arg(long)]
    messages: bool,
}

/// Resident bytes of this process (`/proc/self/statm`, field 2 × page size).
fn rss_bytes() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    // statm counts 4 KiB pages on x86-64 and aarch64 Linux defaults.
    pages * 4096
}

fn world_json(s: &WorldStats) -> Value {
    json!({
        "peers_contacted": s.peers_contacted,
        "av_entries": s.address_vector_entries,
        "rkey_cache_entries": s.rkey_cache.entries,
        "rkey_cache_capacity": s.rkey_cache.capacity,
        "rkey_misses": s.rkey_cache.misses,
        "control_region_bytes": s.control_region_bytes,
    })
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn role(rank: usize) -> &'static str {
    match rank {
        0 => "all",
        1 => "one",
        _ => "none",
    }
}

/// The use phase: rank 0 writes to every other rank, rank 1 to rank 0.
fn touch(world: &World, win: &Window<'_, u8>) -> onesided::Result<()> {
    let (rank, size) = (world.rank(), world.size());
    let targets: Vec<usize> = match rank {
        0 => (1..size).collect(),
        1 => vec![0],
        _ => Vec::new(),
    };
    win.lock_all()?;
    for &t in &targets {
        win.put(t, 0, &(rank as u64).to_le_bytes())?;
    }
    win.flush_all()?;
    win.unlock_all()
}

/// The epochs whose messages `--messages` counts.
const EPOCHS: [&str; 3] = ["lock_put_unlock", "lock_all_puts_flush", "fence"];

fn epoch(world: &World, win: &Window<'_, u8>, kind: &str) -> onesided::Result<()> {
    let (rank, size) = (world.rank(), world.size());
    let word = (rank as u64).to_le_bytes();
    match kind {
        "lock_put_unlock" if rank == 0 => {
            win.lock(1, LockType::Exclusive, Assert::NONE)?;
            win.put(1, 0, &word)?;
            win.unlock(1)
        }
        "lock_all_puts_flush" if rank == 0 => {
            win.lock_all()?;
            for t in 1..size {
                win.put(t, 0, &word)?;
            }
            win.flush_all()?;
            win.unlock_all()
        }
        "fence" => {
            win.fence(Assert::NONE)?;
            win.put((rank + 1) % size, 8, &word)?;
            win.fence(Assert::NOSUCCEED)
        }
        _ => Ok(()),
    }
}

/// Transport counters spent between two snapshots.
fn spent(a: &WorldStats, b: &WorldStats) -> Value {
    let (a, b) = (&a.transport, &b.transport);
    json!({
        "writes": b.writes - a.writes,
        "reads": b.reads - a.reads,
        "atomics": b.atomics - a.atomics,
        "sends": b.sends - a.sends,
        "received": b.messages_received - a.messages_received,
        "bytes": (b.bytes_written - a.bytes_written) + (b.bytes_read - a.bytes_read)
            + (b.bytes_atomic - a.bytes_atomic) + (b.send_bytes - a.send_bytes),
    })
}

/// `--messages`: one line per epoch kind and phase.
fn count_messages(cli: &Cli) -> Result<(), Box<dyn std::error::Error>> {
    let world = World::init()?;
    let (rank, size) = (world.rank(), world.size());
    if size < 2 {
        return Err("--messages needs at least 2 ranks".into());
    }
    // A uniform window (the same size everywhere: no descriptor reads where
    // the provider lets us choose keys) and a non-uniform one (8 B more per
    // rank: descriptors read on first access, as before uniform windows).
    for (window, extra) in [("uniform", 0), ("non-uniform", 8 * rank)] {
        for kind in EPOCHS {
            epochs(cli, &world, window, extra, kind)?;
        }
    }
    Ok(())
}

fn epochs(
    cli: &Cli,
    world: &World,
    window: &str,
    extra: usize,
    kind: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    let (rank, size) = (world.rank(), world.size());
    {
        let mut win = Window::<u8>::allocate(world, cli.bytes.max(16) as usize + extra)?;
        for phase in ["first", "again"] {
            world.barrier()?;
            let before = world.stats();
            epoch(world, &win, kind)?;
            let after = world.stats();
            world.barrier()?;
            println!(
                "{}",
                json!({
                    "type": "messages",
                    "window": window,
                    "uniform": win.stats().uniform,
                    "epoch": kind,
                    "phase": phase,
                    "rank": rank,
                    "size": size,
                    "provider": world.provider(),
                    "rkey_misses": after.rkey_cache.misses - before.rkey_cache.misses,
                    "spent": spent(&before, &after),
                })
            );
        }
        win.free()?;
    }
    Ok(())
}

fn run(cli: &Cli) -> Result<Value, Box<dyn std::error::Error>> {
    let rss_start = rss_bytes();
    let world = World::init()?;
    let (rank, size) = (world.rank(), world.size());
    world.barrier()?;
    let rss_init = rss_bytes();
    let s_init = world.stats();
    let mut create_us = Vec::new();
    let mut free_us = Vec::new();
    let mut first = None;
    for cycle in 0..cli.cycles {
        world.barrier()?;
        let before_create = world.stats();
        let t0 = Instant::now();
        let mut win = Window::<u8>::allocate(&world, cli.bytes as usize)?;
        create_us.push(t0.elapsed().as_secs_f64() * 1e6);
        let create_messages = spent(&before_create, &world.stats());
        let rss_created = rss_bytes();
        let s_created = world.stats();
        let w_created = win.stats().cached_peers;
        // Every rank has its creation snapshot before any rank touches the
        // window: a faster rank's first access (a lock request on the
        // software lock path) would otherwise count as creation state.
        world.barrier()?;
        touch(&world, &win)?;
        world.barrier()?;
        let rss_used = rss_bytes();
        let s_used = world.stats();
        let w_used = win.stats().cached_peers;
        world.barrier()?;
        let before_free = world.stats();
        let t1 = Instant::now();
        win.free()?;
        free_us.push(t1.elapsed().as_secs_f64() * 1e6);
        let free_messages = spent(&before_free, &world.stats());
        if cycle == 0 {
            first = Some(json!({
                "rss_created": rss_created,
                "rss_used": rss_used,
                "rss_freed": rss_bytes(),
                "created": world_json(&s_created),
                "used": world_json(&s_used),
                "freed": world_json(&world.stats()),
                "window_cached_peers_created": w_created,
                "window_cached_peers_used": w_used,
                "window_uniform": win.stats().uniform,
                "create_messages": create_messages,
                "free_messages": free_messages,
            }));
        }
    }
    Ok(json!({
        "type": "scale",
        "rank": rank,
        "size": size,
        "role": role(rank),
        "provider": world.provider(),
        "bytes": cli.bytes,
        "cycles": cli.cycles,
        "rss_start": rss_start,
        "rss_init": rss_init,
        "init": world_json(&s_init),
        "first": first,
        "create_us_median": median(&mut create_us),
        "free_us_median": median(&mut free_us),
    }))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.messages {
        return match count_messages(&cli) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("onesided-scale: {e}");
                ExitCode::FAILURE
            }
        };
    }
    match run(&cli) {
        Ok(v) => {
            println!("{v}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("onesided-scale: {e}");
            ExitCode::FAILURE
        }
    }
}
