//! Collectives (`World::broadcast`, `allgather`, `allreduce`): every root,
//! every rank count the harness runs (powers of two and not), several
//! element types and operations, every element checked; mismatched counts
//! and refused operations are errors on every rank, after which the world
//! still works. Real processes, real providers (see tests/common).

#[macro_use]
mod common;

use onesided::{AnyOp, ErrorKind, IntOp, Op, World};

fn value(rank: usize, i: usize) -> i64 {
    (rank as i64 + 1) * 1_000_003 - (i as i64) * 7919
}

fn collectives() {
    let world = World::init().unwrap();
    let (me, p) = (world.rank(), world.size());

    // Broadcast from every root, a length that is not a multiple of 8.
    for root in 0..p {
        let mut data: Vec<i64> = if me == root {
            (0..37).map(|i| value(root, i)).collect()
        } else {
            vec![-1; 37]
        };
        world.broadcast(root, &mut data).unwrap();
        let want: Vec<i64> = (0..37).map(|i| value(root, i)).collect();
        assert_eq!(data, want, "broadcast from root {root}");
    }

    // Allgather: every block at its rank's place.
    for n in [1usize, 5, 300] {
        let mine: Vec<i64> = (0..n).map(|i| value(me, i)).collect();
        let all = world.allgather(&mine).unwrap();
        let want: Vec<i64> = (0..p)
            .flat_map(|r| (0..n).map(move |i| value(r, i)))
            .collect();
        assert_eq!(all, want, "allgather of {n} elements");
    }
    let addrs = world.allgather(&[me as u64 * 4096]).unwrap();
    assert_eq!(addrs, (0..p).map(|r| r as u64 * 4096).collect::<Vec<_>>());

    // Allreduce: integer sum, min, max, bitwise or; float sum and max with
    // the same bits on every rank.
    let mut sum: Vec<i64> = (0..64).map(|i| value(me, i)).collect();
    world.allreduce(&mut sum, Op::Sum).unwrap();
    let want: Vec<i64> = (0..64).map(|i| (0..p).map(|r| value(r, i)).sum()).collect();
    assert_eq!(sum, want, "allreduce sum");
    let mut min = vec![me as i32 - 5, 100 - me as i32];
    world.allreduce(&mut min, Op::Min).unwrap();
    assert_eq!(min, vec![-5, 100 - (p as i32 - 1)], "allreduce min");
    let mut max = vec![me as u8, 3];
    world.allreduce(&mut max, Op::Max).unwrap();
    assert_eq!(max, vec![p as u8 - 1, 3], "allreduce max");
    let mut bits = vec![1u32 << me];
    world.allreduce(&mut bits, IntOp::Bor).unwrap();
    assert_eq!(bits, vec![(1u32 << p) - 1], "allreduce bor");
    let mut f = vec![0.1f64 * (me as f64 + 1.0), -(me as f64)];
    world.allreduce(&mut f, Op::Sum).unwrap();
    let want = (1..=p).map(|r| 0.1 * r as f64).sum::<f64>();
    assert!(
        (f[0] - want).abs() < 1e-12,
        "allreduce f64 sum {} vs {want}",
        f[0]
    );
    let same = world.allgather(&[f[0].to_bits(), f[1].to_bits()]).unwrap();
    assert!(
        same.chunks(2)
            .all(|c| c == [f[0].to_bits(), f[1].to_bits()]),
        "allreduce f64 sum differs between ranks: {same:?}"
    );

    // Errors on every rank, and the world still works after each.
    let e = world.allreduce(&mut [1.0f32], AnyOp::Band).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    let e = world.allreduce(&mut [1i32], AnyOp::Replace).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    let e = world.broadcast(p, &mut [0u8]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    let mut uneven = vec![0u16; 2 + me];
    let e = world.allreduce(&mut uneven, Op::Sum);
    if p > 1 {
        let e = e.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(e.to_string().contains("different element counts"), "{e}");
    }
    let mut one = vec![1u64];
    world.allreduce(&mut one, Op::Sum).unwrap();
    assert_eq!(one, vec![p as u64]);
    world.barrier().unwrap();
}

spmd_test!(collectives_on_every_rank_count, &[1, 2, 3, 4], collectives);
