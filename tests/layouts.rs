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
    layouts_on(&world);
}

fn layouts_on(world: &World) {
    let (me, p) = (world.rank(), world.size());
    let right = (me + 1) % p;
    let left = (me + p - 1) % p;
    // Each rank's window: a ROWS x COLS row-major grid.
    let n = ROWS * COLS;
    let mut win = Window::<i64>::allocate(world, n).unwrap();
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

in_process_test!(
    in_process_noncontiguous_put_get_accumulate,
    &[2, 3],
    layouts_on
);

/// `World::alloc_mem` buffers (MPI_Alloc_mem) as the origin of a strided
/// put and the destination of a strided get: a 1024 x 520 i64 grid (over
/// 4 MiB, so on huge pages where the kernel allows) puts two columns into
/// the right neighbour's window; a get of the left neighbour's whole
/// window lands in a second buffer with a stride. Then puts whose origin
/// is the window itself (`put_layout_from_window`), to a peer and to
/// oneself, and one whose origin runs past the window (refused). Every
/// element of every window and of the got buffer is checked.
fn alloc_mem_buffers() {
    let world = World::init().unwrap();
    alloc_mem_buffers_on(&world);
}

fn alloc_mem_buffers_on(world: &World) {
    const R: usize = 1024;
    const C: usize = 520;
    let (me, p) = (world.rank(), world.size());
    let (left, right) = ((me + p - 1) % p, (me + 1) % p);
    let mut grid = world.alloc_mem::<i64>(R * C).unwrap();
    assert_eq!(grid.len(), R * C);
    assert!(grid.iter().all(|&x| x == 0), "alloc_mem must zero");
    for (i, x) in grid.iter_mut().enumerate() {
        *x = value(me, i);
    }
    assert!(world.alloc_mem::<u8>(0).unwrap().is_empty());
    let e = world.alloc_mem::<u64>(usize::MAX / 2).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");

    let mut win = Window::<i64>::allocate(world, R * 2).unwrap();
    let column = Layout::vector(R, 1, C).unwrap();
    let packed = Layout::vector(R, 1, 2).unwrap();
    win.fence(Assert::NONE).unwrap();
    // Columns 1 and C - 2 of my grid into the right neighbour's window,
    // interleaved: element 2r is column 1, 2r + 1 column C - 2.
    win.put_layout(right, 0, &packed, &grid[1..], &column)
        .unwrap();
    win.put_layout(right, 1, &packed, &grid[C - 2..], &column)
        .unwrap();
    win.fence(Assert::NONE).unwrap();
    let want: Vec<i64> = (0..R)
        .flat_map(|r| [value(left, r * C + 1), value(left, r * C + C - 2)])
        .collect();
    same(
        &win.local_to_vec().unwrap(),
        &want,
        "after puts from alloc_mem",
    );

    // The left neighbour's window into every third element of a buffer.
    let mut got = world.alloc_mem::<i64>(R * 2 * 3).unwrap();
    got.fill(-1);
    let ll = (left + p - 1) % p;
    win.get_layout(
        left,
        0,
        &Layout::contiguous(R * 2),
        &mut got,
        &Layout::vector(R * 2, 1, 3).unwrap(),
    )
    .unwrap();
    win.fence(Assert::NOSUCCEED).unwrap();
    let mut want_got = vec![-1i64; R * 2 * 3];
    for r in 0..R {
        want_got[6 * r] = value(ll, r * C + 1);
        want_got[6 * r + 3] = value(ll, r * C + C - 2);
    }
    same(&got, &want_got, "after a get into alloc_mem");
    // The grid is untouched by being an origin.
    assert!(grid.iter().enumerate().all(|(i, &x)| x == value(me, i)));
    world.barrier().unwrap();
    win.free().unwrap();

    // Puts whose origin is the window itself (MPI_Put with its origin
    // buffer in the window): an R x 3 grid; column 1 goes to the right
    // neighbour's column 0 and to my own column 2.
    let mut w3 = Window::<i64>::allocate(world, R * 3).unwrap();
    let mine: Vec<i64> = (0..R * 3).map(|i| value(me, i)).collect();
    w3.local_write(0, &mine).unwrap();
    let col = Layout::vector(R, 1, 3).unwrap();
    w3.fence(Assert::NONE).unwrap();
    w3.put_layout_from_window(right, 0, &col, 1, &col).unwrap();
    w3.put_layout_from_window(me, 2, &col, 1, &col).unwrap();
    let e = w3
        .put_layout_from_window(
            right,
            0,
            &Layout::contiguous(4),
            R * 3 - 2,
            &Layout::contiguous(4),
        )
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfWindow, "{e}");
    w3.fence(Assert::NOSUCCEED).unwrap();
    let want3: Vec<i64> = (0..R * 3)
        .map(|i| match i % 3 {
            0 => value(left, i + 1),
            1 => value(me, i),
            _ => value(me, i - 1),
        })
        .collect();
    same(
        &w3.local_to_vec().unwrap(),
        &want3,
        "after puts from the window",
    );
    world.barrier().unwrap();
    w3.free().unwrap();
}

spmd_test!(
    alloc_mem_buffers_as_origin_and_destination,
    &[2, 3],
    alloc_mem_buffers
);

in_process_test!(in_process_alloc_mem_buffers, &[2, 3], alloc_mem_buffers_on);

/// Blocks too large for batches (800 and 2,400 bytes) in runs of 7 and 9:
/// a back-end with scatter-gather RMA (`Caps::rma_ranges` > 1: libfabric's
/// `fi_writemsg`/`fi_readmsg` with several remote ranges) moves each run
/// in ⌈blocks / ranges⌉ provider operations, counted in the transport's
/// statistics; elsewhere block by block. Every element of the target
/// window is checked (also that nothing outside the layout was written),
/// and every element read.
fn scatter_gather() {
    let world = World::init().unwrap();
    scatter_gather_on(&world);
}

fn scatter_gather_on(world: &World) {
    const R: usize = 12;
    const C: usize = 1024;
    let (me, p) = (world.rank(), world.size());
    let (right, left) = ((me + 1) % p, (me + p - 1) % p);
    let mut win = Window::<i64>::allocate(world, R * C).unwrap();
    let sentinel = |rank: usize, i: usize| -(value(rank, i) + 1);
    let mine: Vec<i64> = (0..R * C).map(|i| sentinel(me, i)).collect();
    win.local_write(0, &mine).unwrap();
    world.barrier().unwrap();
    let provider_path = std::env::var("ONESIDED_SHM").as_deref() == Ok("0");
    let ranges = world.transport_caps().rma_ranges;
    let ops = |blocks: usize| {
        if ranges > 1 {
            blocks.div_ceil(ranges) as u64
        } else {
            blocks as u64
        }
    };

    // 7 rows x 100 elements from (2, 3) of the right neighbour's grid,
    // from a packed origin.
    let put_shape = Layout::subarray(&[R, C], &[7, 100], &[2, 3]).unwrap();
    let data: Vec<i64> = (0..700).map(|k| value(me, k)).collect();
    win.lock_all().unwrap();
    let before = world.stats().transport.writes;
    win.put_layout(right, 0, &put_shape, &data, &Layout::contiguous(700))
        .unwrap();
    let writes = world.stats().transport.writes - before;
    win.unlock_all().unwrap();
    if provider_path {
        assert_eq!(
            writes,
            ops(7),
            "provider writes for 7 blocks ({ranges} ranges per op)"
        );
    }
    world.barrier().unwrap();
    let got = win.local_to_vec().unwrap();
    for (i, v) in got.iter().enumerate() {
        let (r, c) = (i / C, i % C);
        let want = if (2..9).contains(&r) && (3..103).contains(&c) {
            value(left, (r - 2) * 100 + c - 3)
        } else {
            sentinel(me, i)
        };
        assert_eq!(*v, want, "element ({r}, {c}) after the scatter put");
    }
    world.barrier().unwrap();

    // 9 rows x 300 elements from (1, 600) of the left neighbour's grid
    // (its own sentinels, except what its left neighbour put), into a
    // strided origin.
    let get_shape = Layout::subarray(&[R, C], &[9, 300], &[1, 600]).unwrap();
    let into = Layout::vector(9, 300, 301).unwrap();
    let mut out = vec![7i64; 9 * 301];
    win.lock_all().unwrap();
    // The left neighbour's window metadata, fetched (one read) where the
    // back-end needs it, before counting.
    win.get(left, 0, &mut [0]).unwrap();
    let before = world.stats().transport.reads;
    win.get_layout(left, 0, &get_shape, &mut out, &into)
        .unwrap();
    let reads = world.stats().transport.reads - before;
    win.unlock_all().unwrap();
    if provider_path {
        assert_eq!(
            reads,
            ops(9),
            "provider reads for 9 blocks ({ranges} ranges per op)"
        );
    }
    for r in 0..9 {
        for c in 0..301 {
            let want = if c < 300 {
                sentinel(left, (1 + r) * C + 600 + c)
            } else {
                7
            };
            assert_eq!(
                out[r * 301 + c],
                want,
                "element ({r}, {c}) of the gather get"
            );
        }
    }
    // The same shapes from oneself (read by the CPU, not the provider).
    win.lock_all().unwrap();
    let mine_now = win.local_to_vec().unwrap();
    win.get_layout(me, 0, &get_shape, &mut out, &into).unwrap();
    for r in 0..9 {
        for c in 0..300 {
            let want = mine_now[(1 + r) * C + 600 + c];
            assert_eq!(
                out[r * 301 + c],
                want,
                "element ({r}, {c}) read from oneself"
            );
        }
    }
    win.unlock_all().unwrap();
    world.barrier().unwrap();
    win.free().unwrap();
}

spmd_test!(scatter_gather_large_blocks, &[2, 3], scatter_gather);

in_process_test!(
    in_process_scatter_gather_large_blocks,
    &[2, 3],
    scatter_gather_on
);

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
    get_accumulate_layouts_on(&world);
}

fn get_accumulate_layouts_on(world: &World) {
    let (me, p) = (world.rank(), world.size());
    let (right, left) = ((me + 1) % p, (me + p - 1) % p);
    let n = ROWS * COLS;
    let mut win = Window::<i64>::allocate(world, n).unwrap();
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

in_process_test!(
    in_process_noncontiguous_get_accumulate,
    &[2, 3],
    get_accumulate_layouts_on
);

/// Long strided runs, mixed runs and large blocks, under fences, an
/// exclusive lock and to oneself, every element checked: a 1,500-row column
/// (more elements than one batch entry holds on tcp, so the run is split
/// across entries and batches), an indexed layout whose blocks form runs
/// of different shapes, and 64-element blocks (larger than an aggregated
/// operation), each written to the right neighbour and to oneself.
fn strided_runs() {
    let world = World::init().unwrap();
    strided_runs_on(&world);
}

fn strided_runs_on(world: &World) {
    const R: usize = 1500;
    const C: usize = 70;
    let (me, p) = (world.rank(), world.size());
    let (right, left) = ((me + 1) % p, (me + p - 1) % p);
    // The grid, then a second area of the same size for the other layouts
    // (no two puts of one epoch overlap).
    let n = R * C;
    let mut win = Window::<i64>::allocate(world, 2 * n).unwrap();
    let mine: Vec<i64> = (0..n).map(|i| value(me, i) + 7).collect();
    let column = Layout::vector(R, 1, C).unwrap();
    // Runs: 3 blocks of 2 every 5, then 4 blocks of 3 every 9, then one.
    let mixed = Layout::indexed(&[
        (1, 2),
        (6, 2),
        (11, 2),
        (20, 3),
        (29, 3),
        (38, 3),
        (47, 3),
        (60, 1),
    ])
    .unwrap();
    let wide = Layout::vector(20, 64, 140).unwrap();
    let src = |l: &Layout| Layout::contiguous(l.len());
    let packed = |l: &Layout, seed: i64| -> Vec<i64> {
        (0..l.len() as i64).map(|k| seed * 1_000_000 + k).collect()
    };
    // model[r] = what rank r's window holds.
    let mut model = vec![vec![0i64; 2 * n]; p];
    let apply = |model: &mut Vec<Vec<i64>>, to: usize, disp: usize, l: &Layout, data: &[i64]| {
        let mut k = 0;
        for &(at, len) in l.blocks() {
            model[to][disp + at..disp + at + len].copy_from_slice(&data[k..k + len]);
            k += len;
        }
    };

    // 1. Under fences: column 3 of my grid into the right neighbour's
    //    column 5, the mixed layout at n + 100, the wide blocks at n + 3000.
    win.fence(Assert::NOPRECEDE).unwrap();
    let col3 = Layout::subarray(&[R, C], &[R, 1], &[0, 3]).unwrap();
    win.put_layout(right, 5, &column, &mine, &col3).unwrap();
    let m = packed(&mixed, me as i64 + 1);
    win.put_layout(right, n + 100, &mixed, &m, &src(&mixed))
        .unwrap();
    let w = packed(&wide, me as i64 + 11);
    win.put_layout(right, n + 3000, &wide, &w, &src(&wide))
        .unwrap();
    win.fence(Assert::NONE).unwrap();
    for from in 0..p {
        let to = (from + 1) % p;
        let theirs: Vec<i64> = (0..n).map(|i| value(from, i) + 7).collect();
        let col: Vec<i64> = (0..R).map(|r| theirs[r * C + 3]).collect();
        apply(&mut model, to, 5, &column, &col);
        apply(
            &mut model,
            to,
            n + 100,
            &mixed,
            &packed(&mixed, from as i64 + 1),
        );
        apply(
            &mut model,
            to,
            n + 3000,
            &wide,
            &packed(&wide, from as i64 + 11),
        );
    }
    same(
        &win.local_to_vec().unwrap(),
        &model[me],
        "after the fence epoch",
    );

    // 1b. Read back from the right neighbour in the next fence epoch, into
    //     origin layouts of other shapes (column 1 of an R × 2 grid, the
    //     mixed and wide layouts' elements reversed in blocks): strided
    //     gets split across requests, runs of different shapes, blocks
    //     larger than an aggregated operation.
    let mut grid = vec![-1i64; 2 * R];
    let col1 = Layout::vector(R, 1, 2).unwrap();
    win.get_layout(right, 5, &column, &mut grid[1..], &col1)
        .unwrap();
    let want_col: Vec<i64> = (0..R).map(|r| model[right][5 + r * C]).collect();
    let have_col: Vec<i64> = (0..R).map(|r| grid[1 + 2 * r]).collect();
    same(&have_col, &want_col, "column read with get_layout");
    assert!(
        (0..R).all(|r| grid[2 * r] == -1),
        "get_layout wrote outside its origin layout"
    );
    for (l, disp) in [(&mixed, n + 100), (&wide, n + 3000)] {
        let mut back = vec![0i64; l.len()];
        win.get_layout(right, disp, l, &mut back, &src(l)).unwrap();
        let mut want = Vec::new();
        for &(at, len) in l.blocks() {
            want.extend_from_slice(&model[right][disp + at..disp + at + len]);
        }
        same(&back, &want, "mixed or wide layout read with get_layout");
    }

    // 2. To oneself in the same kind of epoch.
    let s = packed(&mixed, 50 + me as i64);
    win.put_layout(me, n + 900, &mixed, &s, &src(&mixed))
        .unwrap();
    win.fence(Assert::NONE).unwrap();
    for r in 0..p {
        apply(
            &mut model,
            r,
            n + 900,
            &mixed,
            &packed(&mixed, 50 + r as i64),
        );
    }
    same(
        &win.local_to_vec().unwrap(),
        &model[me],
        "after a put to oneself",
    );
    win.fence(Assert::NOSUCCEED).unwrap();

    // 3. Under an exclusive lock, one rank after another (rank r writes
    //    the left neighbour's column 9), read back with get_layout.
    for turn in 0..p {
        if me == turn {
            let c = packed(&column, 90 + me as i64);
            win.lock(left, onesided::LockType::Exclusive, Assert::NONE)
                .unwrap();
            win.put_layout(left, 9, &column, &c, &src(&column)).unwrap();
            win.unlock(left).unwrap();
            win.lock(left, onesided::LockType::Shared, Assert::NONE)
                .unwrap();
            let mut back = vec![0i64; R];
            win.get_layout(left, 9, &column, &mut back, &src(&column))
                .unwrap();
            win.unlock(left).unwrap();
            assert_eq!(back, c, "column read back under a lock");
        }
        world.barrier().unwrap();
    }
    for r in 0..p {
        let to = (r + p - 1) % p;
        apply(&mut model, to, 9, &column, &packed(&column, 90 + r as i64));
    }
    same(
        &win.local_to_vec().unwrap(),
        &model[me],
        "after the lock epochs",
    );
    world.barrier().unwrap();
    win.free().unwrap();
}

/// Every element equal, or the first difference and the count.
fn same(have: &[i64], want: &[i64], when: &str) {
    let bad: Vec<usize> = (0..want.len()).filter(|&i| have[i] != want[i]).collect();
    if let Some(&i) = bad.first() {
        panic!(
            "{when}: {} of {} elements differ, the first at {i}: {} instead of {}",
            bad.len(),
            want.len(),
            have[i],
            want[i]
        );
    }
}

spmd_test!(strided_runs_fences_locks_and_self, &[2, 3], strided_runs);

in_process_test!(in_process_strided_runs, &[2, 3], strided_runs_on);

/// Column puts to node-local peers are packed at the call and written at
/// the end of a fence or PSCW epoch (`api/window/deferred.rs`). What a
/// user may rely on, every element checked: the origin buffer is free at
/// once; one origin's later put, get and accumulate to the same elements
/// in the same epoch see its earlier column puts (program order); more
/// columns than the queue holds in one epoch all land; PSCW's `complete`
/// writes them before the target's `wait` returns; and a lock epoch after
/// them works as before.
fn deferred_column_puts() {
    let world = World::init().unwrap();
    deferred_column_puts_on(&world);
}

fn deferred_column_puts_on(world: &World) {
    const R: usize = 4096;
    const C: usize = 48;
    let (me, p) = (world.rank(), world.size());
    let (right, left) = ((me + 1) % p, (me + p - 1) % p);
    let n = R * C;
    let mut win = Window::<i64>::allocate(world, n).unwrap();
    let column = Layout::vector(R, 1, C).unwrap();
    let dense = Layout::contiguous(R);
    let col_value = |from: usize, c: usize, r: usize| (from * 1000 + c) as i64 * 100_000 + r as i64;
    let mut model = vec![0i64; n];

    // 1. Fence epoch: column 0, its origin buffer overwritten at once;
    //    then a plain put over rows 10..20 of it (later wins), a get of
    //    the column (sees both), and an accumulate on row 30.
    win.fence(Assert::NOPRECEDE).unwrap();
    let mut buf: Vec<i64> = (0..R).map(|r| col_value(me, 0, r)).collect();
    win.put_layout(right, 0, &column, &buf, &dense).unwrap();
    buf.iter_mut().for_each(|v| *v = -7);
    let rows: Vec<i64> = (10..20).map(|r| -(r as i64)).collect();
    for (k, &v) in rows.iter().enumerate() {
        win.put(right, (10 + k) * C, &[v]).unwrap();
    }
    let mut back = vec![0i64; R];
    win.get_layout(right, 0, &column, &mut back, &dense)
        .unwrap();
    let want: Vec<i64> = (0..R)
        .map(|r| match r {
            10..=19 => -(r as i64),
            _ => col_value(me, 0, r),
        })
        .collect();
    same(
        &back,
        &want,
        "get of a column put earlier in the same fence epoch",
    );
    win.accumulate(right, 30 * C, &[5], Op::Sum).unwrap();
    win.fence(Assert::NONE).unwrap();
    for r in 0..R {
        model[r * C] = match r {
            10..=19 => -(r as i64),
            30 => col_value(left, 0, r) + 5,
            _ => col_value(left, 0, r),
        };
    }
    same(
        &win.local_to_vec().unwrap(),
        &model,
        "after the first fence epoch",
    );
    // Everyone has checked before the next epoch's puts land.
    world.barrier().unwrap();

    // 2. Columns 1..C in one epoch: 47 × 32 KiB, more than the queue
    //    holds, so it is written part-way through the epoch too.
    for c in 1..C {
        let col: Vec<i64> = (0..R).map(|r| col_value(me, c, r)).collect();
        win.put_layout(right, c, &column, &col, &dense).unwrap();
    }
    win.fence(Assert::NONE).unwrap();
    for c in 1..C {
        for r in 0..R {
            model[r * C + c] = col_value(left, c, r);
        }
    }
    same(
        &win.local_to_vec().unwrap(),
        &model,
        "after 47 columns in one epoch",
    );
    // Everyone has checked before the next epoch's puts land.
    world.barrier().unwrap();
    win.fence(Assert::NOSUCCEED).unwrap();

    // 3. PSCW: every rank exposes to its left neighbour and accesses its
    //    right one.
    win.post(&[left], Assert::NONE).unwrap();
    win.start(&[right], Assert::NONE).unwrap();
    let col: Vec<i64> = (0..R).map(|r| col_value(me, 77, r)).collect();
    win.put_layout(right, 2, &column, &col, &dense).unwrap();
    win.complete().unwrap();
    win.wait().unwrap();
    for r in 0..R {
        model[r * C + 2] = col_value(left, 77, r);
    }
    same(&win.local_to_vec().unwrap(), &model, "after a PSCW epoch");
    // Everyone has checked before the next epoch's puts land.
    world.barrier().unwrap();

    // 4. A lock epoch afterwards: put, unlock, and the target sees it.
    let col: Vec<i64> = (0..R).map(|r| col_value(me, 88, r)).collect();
    win.lock(right, onesided::LockType::Exclusive, Assert::NONE)
        .unwrap();
    win.put_layout(right, 3, &column, &col, &dense).unwrap();
    win.unlock(right).unwrap();
    world.barrier().unwrap();
    for r in 0..R {
        model[r * C + 3] = col_value(left, 88, r);
    }
    same(&win.local_to_vec().unwrap(), &model, "after a lock epoch");
    world.barrier().unwrap();
    win.free().unwrap();
}

spmd_test!(
    deferred_column_puts_keep_program_order,
    jobs = common::matrix_direct(&[2, 3]),
    deferred_column_puts
);

// Program order of a put and a later get is the direct path's promise
// (MPI leaves it undefined): on the direct path only, as the jobs above.
in_process_test!(
    in_process_deferred_column_puts,
    &[2, 3],
    deferred_column_puts_on,
    direct_path_only
);
