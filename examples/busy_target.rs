//! How fast a target that does not call the library serves its origins, and
//! what an idle process costs: measures the progress agent alone.
//!
//!     onesided-run -n 2 --provider tcp target/release/examples/busy_target [seconds]
//!
//! Phase 1 (idle): both ranks sleep; each reports the CPU its threads used.
//! Phase 2 (served): rank 1 sleeps outside the library while rank 0 times
//! 8-byte put + flush and 8-byte get against it; only rank 1's progress
//! agent can serve them. Rank 1 reports its CPU use while serving.
//! Per-op times: median and 10th/90th percentiles (µs).

use std::time::{Duration, Instant};

use onesided::{Window, World};

/// CPU time (ns) used so far by all threads of this process, from
/// `/proc/self/task/*/schedstat` (first field: time on CPU).
fn cpu_ns() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

fn percentiles(mut v: Vec<f64>) -> String {
    if v.is_empty() {
        return "no samples".into();
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| v[((v.len() - 1) as f64 * q) as usize];
    format!(
        "median {:.1} [p10 {:.1} – p90 {:.1}] µs over {}",
        at(0.5),
        at(0.1),
        at(0.9),
        v.len()
    )
}

fn main() -> onesided::Result<()> {
    let secs: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    // Optional gap between timed operations (ms): sparse traffic.
    let gap_ms: f64 = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0.0);
    let world = World::init()?;
    assert_eq!(world.size(), 2, "run with -n 2");
    let rank = world.rank();
    let mut win = Window::<u8>::allocate(&world, 64)?;
    win.lock_all()?;
    world.barrier()?;

    // Phase 1: idle.
    let (c0, t0) = (cpu_ns(), Instant::now());
    std::thread::sleep(Duration::from_secs_f64(secs / 2.0));
    let idle = (cpu_ns() - c0) as f64 / t0.elapsed().as_nanos() as f64;
    println!("[{rank}] idle: process CPU {:.1} %", idle * 100.0);
    world.barrier()?;

    // Phase 2: rank 1 sleeps outside the library, rank 0 times operations.
    if rank == 1 {
        let (c0, t0) = (cpu_ns(), Instant::now());
        std::thread::sleep(Duration::from_secs_f64(secs));
        let busy = (cpu_ns() - c0) as f64 / t0.elapsed().as_nanos() as f64;
        println!("[1] serving: process CPU {:.1} %", busy * 100.0);
    } else {
        let (mut puts, mut gets) = (Vec::new(), Vec::new());
        let end = Instant::now() + Duration::from_secs_f64(secs * 0.8);
        let mut out = [0u8; 8];
        let mut i = 0u64;
        while Instant::now() < end {
            let t = Instant::now();
            win.put(1, 0, &i.to_ne_bytes())?;
            win.flush(1)?;
            puts.push(t.elapsed().as_secs_f64() * 1e6);
            let t = Instant::now();
            win.get(1, 0, &mut out)?;
            gets.push(t.elapsed().as_secs_f64() * 1e6);
            assert_eq!(u64::from_ne_bytes(out), i, "get returned a stale value");
            i += 1;
            if gap_ms > 0.0 {
                std::thread::sleep(Duration::from_secs_f64(gap_ms / 1e3));
            }
        }
        println!("[0] put+flush 8 B: {}", percentiles(puts));
        println!("[0] get 8 B:       {}", percentiles(gets));
    }
    world.barrier()?;
    win.unlock_all()?;
    win.free()?;
    Ok(())
}
