//! The demo the README runs: every rank exposes a window, writes a block of
//! numbers into its right neighbour's window with one-sided puts (passive
//! target, no receive calls anywhere), reads its left neighbour's block back
//! with gets, and checks every element. Then a fence epoch does the same ring
//! the other way round. Rank 0 prints the verified result.
//!
//!     onesided-run -n 4 target/release/examples/demo

use onesided::{Assert, Window, World};

const N: usize = 1 << 16; // elements per block (512 KiB of u64)

fn value(origin: usize, i: usize, round: u64) -> u64 {
    ((origin as u64) << 48) ^ (i as u64).wrapping_mul(0x9e37_79b9) ^ round
}

fn main() -> onesided::Result<()> {
    // Logging belongs to the application: show onesided's warnings (or what
    // ONESIDED_LOG asks for, e.g. `onesided=debug`) on stderr.
    let filter = tracing_subscriber::EnvFilter::try_from_env("ONESIDED_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("onesided=warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let world = World::init()?;
    let (rank, size) = (world.rank(), world.size());
    let right = (rank + 1) % size;
    let left = (rank + size - 1) % size;
    let mut win = Window::<u64>::allocate(&world, N)?;

    // Passive target: lock_all, put to the right, flush, read it back.
    let block: Vec<u64> = (0..N).map(|i| value(rank, i, 1)).collect();
    win.lock_all()?;
    win.put(right, 0, &block)?;
    win.flush(right)?;
    let mut back = vec![0u64; N];
    win.get(right, 0, &mut back)?;
    win.unlock_all()?;
    assert_eq!(
        back, block,
        "rank {rank}: read-back from rank {right} differs"
    );

    // Active target: fence, put to the left, fence; check what arrived.
    win.fence(Assert::NOPRECEDE)?;
    let block2: Vec<u64> = (0..N).map(|i| value(rank, i, 2)).collect();
    win.put(left, 0, &block2)?;
    win.fence(Assert::NOSUCCEED)?;
    let got = win.local_to_vec()?;
    let bad = (0..N).filter(|&i| got[i] != value(right, i, 2)).count();
    assert_eq!(
        bad, 0,
        "rank {rank}: {bad} elements from rank {right} are wrong"
    );

    let bytes = 2 * N * 8;
    win.free()?;
    world.barrier()?;
    if rank == 0 {
        println!(
            "demo OK: {size} ranks over {} ({}), each moved and verified {} KiB with put/get, \
             passive (lock_all/flush) and active (fence) target",
            world.provider(),
            world.bootstrap_name(),
            bytes / 1024
        );
    }
    Ok(())
}
