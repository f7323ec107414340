//! One-sided communication with no network and no launcher: the ranks of
//! the job are threads of this process (`World::run_threads`, the
//! in-process back-end). Try it on a laptop:
//!
//! ```text
//! cargo run --example threads          # 4 ranks
//! cargo run --example threads -- 8     # 8 ranks
//! ```
//!
//! Every rank writes a greeting into its right neighbour's window, then
//! all ranks count into rank 0 with an atomic fetch-and-add under a
//! passive-target epoch; rank 0 checks the total.

use onesided::{Assert, Op, Window, World};

fn main() -> onesided::Result<()> {
    let ranks: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("the number of ranks"))
        .unwrap_or(4);
    let lines = World::run_threads(ranks, |world| {
        let (me, n) = (world.rank(), world.size());
        let right = (me + 1) % n;
        let mut greetings = Window::<u64>::allocate(world, 1)?;
        let mut counter = Window::<u64>::allocate(world, 1)?;

        greetings.fence(Assert::NONE)?;
        greetings.put(right, 0, &[1000 + me as u64])?;
        greetings.fence(Assert::NONE)?;
        let mut from_left = [0u64];
        greetings.local_read(0, &mut from_left)?;

        counter.lock_all()?;
        let ticket = counter.fetch_and_op(0, 0, 1, Op::Sum)?;
        counter.unlock_all()?;
        world.barrier()?;
        if me == 0 {
            let mut total = [0u64];
            counter.local_read(0, &mut total)?;
            assert_eq!(total[0], n as u64);
        }

        counter.free()?;
        greetings.free()?;
        Ok(format!(
            "rank {me}/{n}: greeting {} from the left, ticket {ticket} at rank 0 ({} back-end)",
            from_left[0],
            world.provider()
        ))
    })?;
    for l in lines {
        println!("{l}");
    }
    Ok(())
}
