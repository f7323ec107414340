//! Noncontiguous transfers (`Layout` on origin and target): vector,
//! indexed and subarray layouts with put, get and accumulate, every element
//! of every window checked against a model; mismatched or oversized layouts
//! refused before anything is sent. Real processes, real providers.

#[macro_use]
mod common;

use onesided::{Assert, ErrorKind, Layout, Op, Window, World};

const ROWS: usize = 12;
const COLS: usize = 10;

fn value(rank: usize, i: usize) -> i64 {
    (rank as i64) * 100_000 + i as i64
}

fn layouts() {
    let world = World::init().unwrap();
    let (me, p) = (world.rank(), world.size());
    let right = (me + 1) % p;
    let left = (me + p - 1) % p;
    // Each rank's window: a ROWS x COLS row-major grid.
    let n = ROWS * COLS;
    let mut win = Window::<i64>::allocate(&world, n).unwrap();
    let mut model = vec![0i64; n];

    // 1. Put my column 2 (strided origin) into the right neighbour's
    //    column 7 (strided target).
    let grid: Vec<i64> = (0..n).map(|i| value(me, i)).collect();
    let col = |c: usize| Layout::subarray(&[ROWS, COLS], &[ROWS, 1], &[0, c]).unwrap();
    let vcol = Layout::vector(ROWS, 1, COLS).unwrap();
    win.fence(Assert::NONE).unwrap();
    win.put_layout(right, 7, &vcol, &grid, &col(2)).unwrap();
    win.fence(Assert::NONE).unwrap();
    for r in 0..ROWS {
        model[r * COLS + 7] = value(left, r * COLS + 2);
    }

    // 2. Accumulate a packed buffer into an indexed set of the right
    //    neighbour's elements (one repeated block boundary, odd offsets).
    let idx = Layout::indexed(&[(1, 2), (20, 3), (55, 1), (99, 4)]).unwrap();
    let add: Vec<i64> = (0..10).map(|k| (me as i64 + 1) * 1000 + k).collect();
    win.accumulate_layout(right, 0, &idx, &add, &Layout::contiguous(10), Op::Sum)
        .unwrap();
    win.fence(Assert::NONE).unwrap();
    let mut k = 0;
    for &(at, len) in idx.blocks() {
        for slot in &mut model[at..at + len] {
            *slot += (left as i64 + 1) * 1000 + k;
            k += 1;
        }
    }
    assert_eq!(
        win.local_to_vec().unwrap(),
        model,
        "after put_layout and accumulate_layout"
    );

    // 3. Get a 3 x 4 tile of the left neighbour's grid into a strided
    //    place of a local buffer.
    let tile = Layout::subarray(&[ROWS, COLS], &[3, 4], &[5, 6]).unwrap();
    let into = Layout::vector(3, 4, 9).unwrap();
    let mut got = vec![-1i64; 30];
    win.get_layout(left, 0, &tile, &mut got, &into).unwrap();
    win.fence(Assert::NONE).unwrap();
    let theirs = {
        // The left neighbour's window, as its own model says: recompute.
        let ll = (left + p - 1) % p;
        let mut m = vec![0i64; n];
        for r in 0..ROWS {
            m[r * COLS + 7] = value(ll, r * COLS + 2);
        }
        let mut k = 0;
        for &(at, len) in idx.blocks() {
            for slot in &mut m[at..at + len] {
                *slot += (ll as i64 + 1) * 1000 + k;
                k += 1;
            }
        }
        m
    };
    let mut want = vec![-1i64; 30];
    for r in 0..3 {
        for c in 0..4 {
            want[r * 9 + c] = theirs[(5 + r) * COLS + 6 + c];
        }
    }
    assert_eq!(got, want, "get_layout of the tile");

    // 4. Refused before anything is sent; the window still works.
    let before = win.local_to_vec().unwrap();
    let e = win
        .put_layout(right, 0, &vcol, &grid, &Layout::contiguous(ROWS - 1))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    let e = win
        .put_layout(
            right,
            10,
            &Layout::vector(ROWS, 1, COLS).unwrap(),
            &grid,
            &col(0),
        )
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfWindow, "{e}");
    let e = win
        .put_layout(right, 0, &vcol, &grid[..5], &col(0))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    win.fence(Assert::NONE).unwrap();
    assert_eq!(
        win.local_to_vec().unwrap(),
        before,
        "a refused layout changed memory"
    );
    // Every rank has checked before anyone writes again.
    win.fence(Assert::NONE).unwrap();
    win.put_layout(
        right,
        0,
        &Layout::contiguous(2),
        &[5, 6],
        &Layout::contiguous(2),
    )
    .unwrap();
    win.fence(Assert::NOSUCCEED).unwrap();
    assert_eq!(&win.local_to_vec().unwrap()[..2], &[5, 6]);
    world.barrier().unwrap();
    win.free().unwrap();
}

spmd_test!(noncontiguous_put_get_accumulate, &[2, 3], layouts);

/// The 2-D halo example (examples/halo.rs) checks every halo element it
/// receives and exits non-zero on a mismatch: run it at 3 ranks over the
/// provider and over the direct path.
#[test]
fn halo_example_checks_every_halo() {
    let exe = std::env::current_exe().unwrap();
    let halo = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|d| d.join("examples").join("halo"))
        .unwrap();
    assert!(
        halo.exists(),
        "{} was not built (cargo test builds examples)",
        halo.display()
    );
    for shm in ["0", "1"] {
        let mut cmd = std::process::Command::new(common::onesided_run());
        cmd.args(["-n", "3"])
            .arg(&halo)
            .args(["128", "8", "3"])
            .env("ONESIDED_SHM", shm);
        let out = common::run_with_limit(cmd, common::job_timeout());
        assert!(
            out.status.is_some_and(|s| s.success())
                && out.stdout.contains("every halo element checked"),
            "halo example with ONESIDED_SHM={shm}:\n{}",
            out.tail(30)
        );
    }
}

/// get_accumulate with layouts on origin, result and target: each rank
/// adds to a column of its right neighbour's grid and receives the old
/// column into every other element of a result buffer; then an atomic
/// read (NO_OP, empty origin) of a tile; a result layout of the wrong
/// size is refused with nothing changed.
fn get_accumulate_layouts() {
    let world = World::init().unwrap();
    let (me, p) = (world.rank(), world.size());
    let (right, left) = ((me + 1) % p, (me + p - 1) % p);
    let n = ROWS * COLS;
    let mut win = Window::<i64>::allocate(&world, n).unwrap();
    win.local_write(0, &(0..n).map(|i| value(me, i)).collect::<Vec<_>>())
        .unwrap();
    win.fence(Assert::NONE).unwrap();
    let col3 = Layout::vector(ROWS, 1, COLS).unwrap();
    let add = vec![me as i64 + 1; ROWS];
    let mut result = vec![-1i64; 2 * ROWS];
    let every_other = Layout::vector(ROWS, 1, 2).unwrap();
    win.get_accumulate_layout(
        right,
        3,
        &col3,
        (&add, &Layout::contiguous(ROWS)),
        (&mut result, &every_other),
        Op::Sum,
    )
    .unwrap();
    win.fence(Assert::NONE).unwrap();
    for r in 0..ROWS {
        assert_eq!(
            result[2 * r],
            value(right, r * COLS + 3),
            "old value, row {r}"
        );
        assert_eq!(result[2 * r + 1], -1, "result gap, row {r}");
    }
    let mine = win.local_to_vec().unwrap();
    for (i, v) in mine.iter().enumerate() {
        let bump = if i % COLS == 3 { left as i64 + 1 } else { 0 };
        assert_eq!(
            *v,
            value(me, i) + bump,
            "element {i} after the neighbour's add"
        );
    }
    // An atomic read of a 2 x 5 tile of the right neighbour (NO_OP).
    let tile = Layout::subarray(&[ROWS, COLS], &[2, 5], &[4, 1]).unwrap();
    let mut got = vec![0i64; 10];
    win.get_accumulate_layout(
        right,
        0,
        &tile,
        (&[], &Layout::contiguous(0)),
        (&mut got, &Layout::contiguous(10)),
        onesided::NoOp,
    )
    .unwrap();
    for r in 0..2 {
        for c in 0..5 {
            let i = (4 + r) * COLS + 1 + c;
            let bump = if i % COLS == 3 { me as i64 + 1 } else { 0 };
            assert_eq!(got[r * 5 + c], value(right, i) + bump, "tile ({r}, {c})");
        }
    }
    // A result layout of another size: refused, nothing sent.
    let e = win
        .get_accumulate_layout(
            right,
            3,
            &col3,
            (&add, &Layout::contiguous(ROWS)),
            (&mut result, &Layout::contiguous(ROWS - 1)),
            Op::Sum,
        )
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    win.fence(Assert::NONE).unwrap();
    assert_eq!(
        win.local_to_vec().unwrap(),
        mine,
        "a refused call changed memory"
    );
    win.fence(Assert::NOSUCCEED).unwrap();
    win.free().unwrap();
}

spmd_test!(
    noncontiguous_get_accumulate,
    &[2, 3],
    get_accumulate_layouts
);
