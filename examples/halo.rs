//! A 2-D halo exchange with noncontiguous puts, as MPI codes write it with
//! `MPI_Type_vector`: a global grid of ROWS x (COLS * P) doubles split by
//! columns, each rank owning ROWS x COLS of it plus a halo column on each
//! side (a row-major ROWS x (COLS + 2) window). Each step every rank puts
//! its first interior column into its left neighbour's right halo and its
//! last interior column into its right neighbour's left halo (strided on
//! both sides: one column of a row-major array), then a fence; every halo
//! element is checked against the neighbour's values, then a Jacobi-like
//! update makes the next step's values.
//!
//!     onesided-run -n 4 target/release/examples/halo [ROWS] [COLS] [STEPS]

use onesided::{Assert, Layout, Window, World};

fn main() -> onesided::Result<()> {
    let arg = |i: usize, d: usize| {
        std::env::args()
            .nth(i)
            .and_then(|s| s.parse::<usize>().ok())
            .unwrap_or(d)
    };
    let (rows, cols, steps) = (arg(1, 1024), arg(2, 64), arg(3, 5));
    let world = World::init()?;
    let (me, p) = (world.rank(), world.size());
    let (left, right) = ((me + p - 1) % p, (me + 1) % p);
    let width = cols + 2;
    let at = |r: usize, c: usize| r * width + c;
    // Global column of local interior column c (1..=cols).
    let global = |rank: usize, c: usize| rank * cols + c - 1;
    let initial = |r: usize, g: usize| (r * 7919 + g * 104_729) as f64 * 1e-3;

    let mut win = Window::<f64>::allocate(&world, rows * width)?;
    // The origin of the column puts, in memory from `alloc_mem`
    // (MPI_Alloc_mem): huge pages for a large grid, so a column walks a
    // few pages instead of one per row.
    let mut grid = world.alloc_mem::<f64>(rows * width)?;
    for r in 0..rows {
        for c in 1..=cols {
            grid[at(r, c)] = initial(r, global(me, c));
        }
    }
    win.local_write(0, &grid)?;
    // One column of the row-major local array, from its first row.
    let column = Layout::vector(rows, 1, width)?;
    // The column `c` of `grid` as an origin layout.
    let col = |c: usize| Layout::subarray(&[rows, width], &[rows, 1], &[0, c]);

    win.fence(Assert::NOPRECEDE)?;
    for step in 0..steps {
        // First interior column -> left neighbour's right halo (column
        // cols + 1); last interior column -> right neighbour's left halo.
        win.put_layout(left, cols + 1, &column, &grid, &col(1)?)?;
        win.put_layout(right, 0, &column, &grid, &col(cols)?)?;
        win.fence(Assert::NONE)?;
        let mine = win.local_to_vec()?;
        for r in 0..rows {
            let (lh, rh) = (mine[at(r, 0)], mine[at(r, cols + 1)]);
            // The halo holds the neighbours' boundary values of this step.
            let (wl, wr) = (
                expected(step, r, global(left, cols), &initial),
                expected(step, r, global(right, 1), &initial),
            );
            if lh != wl || rh != wr {
                return Err(onesided::Error::InvalidArgument(format!(
                    "rank {me} step {step} row {r}: halos ({lh}, {rh}), expected ({wl}, {wr})"
                )));
            }
        }
        // Next step's values: every interior point shifted by a function
        // of the step (so a stale halo would be seen next time).
        for r in 0..rows {
            for c in 1..=cols {
                grid[at(r, c)] = expected(step + 1, r, global(me, c), &initial);
            }
        }
        win.local_write(0, &grid)?;
        // Every rank has read its halos before anyone writes the next ones.
        win.fence(Assert::NONE)?;
    }
    win.fence(Assert::NOSUCCEED)?;
    if me == 0 {
        println!(
            "halo: {p} ranks, {rows} x {} grid split by columns, {steps} steps: every halo \
             element checked ({} per rank per step)",
            cols * p,
            2 * rows
        );
    }
    win.free()?;
    drop(win);
    world.finalize()
}

/// The value of global point (r, g) at `step`.
fn expected(step: usize, r: usize, g: usize, initial: &dyn Fn(usize, usize) -> f64) -> f64 {
    initial(r, g) + step as f64 * 0.5
}
