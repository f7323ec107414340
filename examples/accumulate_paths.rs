//! Compares the two accumulate paths in one run (ratios, not absolute
//! speed): run it twice under `onesided-run -n 2`, once with
//! `ONESIDED_ACCUMULATE=hardware` and once with `=software`. Rank 0 times
//! `fetch_and_op` latency and `accumulate` + `flush` of 8 B … 1 MiB to
//! rank 1, which only serves (its progress agent applies or handles).
//!
//!     cargo build --release --example accumulate_paths --bin onesided-run
//!     for m in hardware software; do ONESIDED_ACCUMULATE=$m \
//!       target/release/onesided-run -n 2 --provider tcp \
//!       target/release/examples/accumulate_paths; done

use std::time::Instant;

use onesided::{Op, Window, World};

fn main() -> onesided::Result<()> {
    let world = World::init()?;
    let mode = std::env::var("ONESIDED_ACCUMULATE").unwrap_or_else(|_| "auto".into());
    let mut win = Window::<u64>::allocate(&world, 1 << 17)?;
    win.lock_all()?;
    if world.rank() == 0 {
        let reps = 2000;
        for _ in 0..100 {
            win.fetch_and_op(1, 0, 1, Op::Sum)?;
        }
        let t = Instant::now();
        for _ in 0..reps {
            win.fetch_and_op(1, 0, 1, Op::Sum)?;
        }
        let us = t.elapsed().as_secs_f64() * 1e6 / reps as f64;
        println!(
            "{mode:9} {:14} fetch_and_op      {us:9.2} us",
            world.provider()
        );
        for bytes in [8usize, 512, 4096, 65536, 1 << 20] {
            let data = vec![1u64; bytes / 8];
            let reps = (4 << 20) / bytes.max(4096);
            let reps = reps.clamp(20, 1000);
            let t = Instant::now();
            for _ in 0..reps {
                win.accumulate(1, 0, &data, Op::Sum)?;
                win.flush(1)?;
            }
            let us = t.elapsed().as_secs_f64() * 1e6 / reps as f64;
            let mbs = bytes as f64 / us;
            println!(
                "{mode:9} {:14} accumulate+flush {bytes:8} B {us:9.2} us {mbs:8.1} MB/s",
                world.provider()
            );
        }
    }
    win.unlock_all()?;
    world.barrier()?;
    win.free()?;
    Ok(())
}
