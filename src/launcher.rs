//! The `onesided-run` launcher as a library: start `n` copies of a program
//! on this machine, serve their bootstrap (rank, size, key-value exchange,
//! barriers) and forward their output. `onesided-run --help` documents the
//! options; `docs/launching.md` compares it with Hydra, Slurm and mpirun.

pub use crate::bootstrap::launcher::{run, run_until, Options};
