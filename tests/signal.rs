//! `put_signal` and `wait_until` (OpenSHMEM's put-with-signal and
//! wait-until on a window element): a ring where each rank waits for its
//! left neighbour's signal and then checks every element of the data that
//! signal covers; `SignalOp::Set` inside a fence epoch; a bad signal
//! displacement moves no data; a wait that cannot end times out with an
//! error naming the element. Real processes, real providers.

#[macro_use]
mod common;

use onesided::{Assert, Cmp, ErrorKind, SignalOp, Window, World};

const LEN: usize = 1000;
const ROUNDS: usize = 6;

fn value(origin: usize, round: usize, i: usize) -> u64 {
    (origin as u64) << 40 | (round as u64) << 20 | i as u64
}

fn ring() {
    let world = World::init().unwrap();
    ring_on(&world);
}

fn ring_on(world: &World) {
    let (me, n) = (world.rank(), world.size());
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    // ROUNDS blocks of data, then the counting signal and the set signal.
    let sig = ROUNDS * LEN;
    let mut win = Window::<u64>::allocate(world, sig + 2).unwrap();

    win.lock_all().unwrap();
    for r in 0..ROUNDS {
        let data: Vec<u64> = (0..LEN).map(|i| value(me, r, i)).collect();
        win.put_signal(right, r * LEN, &data, sig, 1, SignalOp::Add)
            .unwrap();
        let seen = win.wait_until(sig, Cmp::Ge, r as u64 + 1).unwrap();
        assert!(seen > r as u64, "signal {seen} in round {r}");
        // Everything the signal covers has landed: every element.
        let mut got = vec![0u64; LEN];
        win.local_read(r * LEN, &mut got).unwrap();
        for (i, g) in got.iter().enumerate() {
            assert_eq!(
                *g,
                value(left, r, i),
                "round {r} element {i} from rank {left}"
            );
        }
    }
    // A signal outside the window: refused before the data moves.
    let e = win
        .put_signal(right, 0, &[u64::MAX; 4], sig + 2, 1, SignalOp::Add)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfWindow, "{e}");
    win.unlock_all().unwrap();
    world.barrier().unwrap();
    let mut first = [0u64; 4];
    win.local_read(0, &mut first).unwrap();
    for (i, f) in first.iter().enumerate() {
        assert_eq!(
            *f,
            value(left, 0, i),
            "element {i} after the refused put_signal"
        );
    }
    assert_eq!(
        win.wait_until(sig, Cmp::Eq, ROUNDS as u64).unwrap(),
        ROUNDS as u64
    );

    // SignalOp::Set in a fence epoch: rank 0 signals every other rank,
    // which waits inside the same epoch.
    win.fence(Assert::NONE).unwrap();
    if me == 0 {
        for t in 1..n {
            win.put_signal(t, 0, &[7u64; LEN], sig + 1, 42 + t as u64, SignalOp::Set)
                .unwrap();
        }
    } else {
        let v = win.wait_until(sig + 1, Cmp::Eq, 42 + me as u64).unwrap();
        assert_eq!(v, 42 + me as u64);
        let mut got = vec![0u64; LEN];
        win.local_read(0, &mut got).unwrap();
        assert!(got.iter().all(|g| *g == 7), "data before the set signal");
    }
    win.fence(Assert::NONE).unwrap();
    win.free().unwrap();
}
spmd_test!(put_signal_ring, &[2, 4], ring);

in_process_test!(in_process_put_signal_ring, &[2, 4], ring_on);

/// A condition that never holds: `Err(Timeout)` after `ONESIDED_TIMEOUT`
/// naming the element; a displacement outside the window: an error at once.
fn never() {
    // One second on every rank (times ONESIDED_TEST_TIME_SCALE: in the
    // emulated soft-RoCE guest, creating the window's queue pairs alone
    // takes longer than a second).
    common::timeout_for(0, 1, 1);
    let world = World::init().unwrap();
    let mut win = Window::<i32>::allocate(&world, 4).unwrap();
    let e = win.wait_until(3, Cmp::Gt, 5).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    assert!(e.to_string().contains("element 3 > 5"), "{e}");
    let e = win.wait_until(4, Cmp::Eq, 0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfWindow, "{e}");
    // Still usable.
    assert_eq!(win.wait_until(0, Cmp::Le, 0).unwrap(), 0);
    world.barrier().unwrap();
    win.free().unwrap();
}
spmd_test!(wait_until_times_out, &[1, 2], never);
