//! `halo_lat`: one step of a 2-D halo exchange, as `benches/mpi/rma_bench.c`
//! measures it with `MPI_Type_vector`. Every rank owns a `HALO_N` × `HALO_N`
//! block of f64 in a row-major `HALO_N` × (`HALO_N` + 2) window (a halo
//! column on each side); a step puts its first and last interior columns
//! (a strided layout on origin and target) into its ring neighbours' halo
//! columns and fences. Every rank runs the steps; rank 0 times them.

use std::time::{Duration, Instant};

use onesided::{Assert, Buffer, Layout, Window, World};

/// The side of each rank's block (the result's "size").
pub const HALO_N: usize = 1024;
/// Doubles per row: the block and a halo column on each side.
const W: usize = HALO_N + 2;

/// The value of interior point (r, c), 1 ≤ c ≤ `HALO_N`, of rank `owner`.
fn value(owner: usize, r: usize, c: usize) -> f64 {
    owner as f64 * 1e7 + r as f64 * 1e3 + c as f64
}

pub struct Halo<'w> {
    win: Window<'w, f64>,
    /// This rank's block with empty halos: the origin of the puts, in
    /// memory from `World::alloc_mem` (as an MPI program would take it from
    /// `MPI_Alloc_mem`; `rma_bench.c` puts from its window): huge pages,
    /// so the column reads walk five pages, not 1,024.
    grid: Buffer<f64>,
    /// One column of the row-major block, from its first row.
    column: Layout,
    left: usize,
    right: usize,
}

impl<'w> Halo<'w> {
    /// Collective: every rank allocates its block.
    pub fn allocate(world: &'w World) -> onesided::Result<Self> {
        let (rank, n) = (world.rank(), world.size());
        let mut grid = world.alloc_mem::<f64>(HALO_N * W)?;
        for r in 0..HALO_N {
            for c in 1..=HALO_N {
                grid[r * W + c] = value(rank, r, c);
            }
        }
        let win = Window::<f64>::allocate(world, HALO_N * W)?;
        win.local_write(0, &grid)?;
        Ok(Halo {
            win,
            grid,
            column: Layout::vector(HALO_N, 1, W)?,
            left: (rank + n - 1) % n,
            right: (rank + 1) % n,
        })
    }

    /// `iters` exchanges (puts, then a fence); returns the time they took.
    pub fn run(&mut self, iters: u64) -> onesided::Result<Duration> {
        // Empty the halos, so the check sees this run's data.
        for r in 0..HALO_N {
            self.win.local_write(r * W, &[0.0])?;
            self.win.local_write(r * W + HALO_N + 1, &[0.0])?;
        }
        let t0 = Instant::now();
        self.win.fence(Assert::NOPRECEDE)?;
        for i in 0..iters {
            let col = &self.column;
            // First interior column -> left neighbour's right halo; last
            // interior column -> right neighbour's left halo.
            self.win
                .put_layout(self.left, HALO_N + 1, col, &self.grid[1..], col)?;
            self.win
                .put_layout(self.right, 0, col, &self.grid[HALO_N..], col)?;
            let last = i + 1 == iters;
            self.win.fence(if last {
                Assert::NOSUCCEED
            } else {
                Assert::NONE
            })?;
        }
        Ok(t0.elapsed())
    }

    /// Halo elements of this rank that do not hold its neighbours' boundary
    /// values (after a run). `stamp` is the step protocol's check stamp: 1,
    /// or more under `--expect-wrong` (then every element is expected off
    /// by `stamp - 1`, so the check must fail).
    pub fn wrong(&self, stamp: u64) -> onesided::Result<usize> {
        let mine = self.win.local_to_vec()?;
        let shift = stamp.saturating_sub(1) as f64;
        Ok((0..HALO_N)
            .map(|r| {
                usize::from(mine[r * W] != value(self.left, r, HALO_N) + shift)
                    + usize::from(mine[r * W + HALO_N + 1] != value(self.right, r, 1) + shift)
            })
            .sum())
    }

    pub fn free(mut self) -> onesided::Result<()> {
        self.win.free()
    }
}
