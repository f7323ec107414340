//! Starting a job: who am I, how many are we, and a key-value store to meet.
//!
//! A process learns its rank and the job size, publishes a few small values
//! (its endpoint address, the address and key of its window directory) and
//! looks up other processes' values *lazily*, when it first contacts them.
//! Nothing here is sized by the number of processes.
//!
//! Ways in, detected from the environment by [`init`], in this order:
//! 1. our launcher `onesided-run` ([`launcher`]): `ONESIDED_LAUNCHER_ADDR` is
//!    set (then `ONESIDED_JOB_TOKEN`, `ONESIDED_RANK` and `ONESIDED_SIZE` must
//!    be set too);
//! 2. PMIx ([`pmix`]; Slurm's `srun --mpi=pmix`, Open MPI's `mpirun`):
//!    `PMIX_RANK`, `PMIX_NAMESPACE` or a `PMIX_SERVER_URI*` is set;
//! 3. PMI-2 over `PMI_FD` ([`pmi2`]; Slurm's `srun --mpi=pmi2`): `PMI_FD` is
//!    set and the launcher says it serves PMI-2 (`SLURM_MPI_TYPE=pmi2` or
//!    `PMI_VERSION=2`);
//! 4. PMI-1 ([`pmi1`]; MPICH Hydra): `PMI_FD` is set (with `PMI_RANK`,
//!    `PMI_SIZE`), or else `PMI_PORT` and `PMI_ID` are set;
//! 5. no launcher at all: a singleton, rank 0 of 1 ([`singleton`]) — but
//!    only if no launcher we cannot speak started us: a process of a
//!    multi-task `srun` step without PMI, or of an Open MPI job without
//!    PMIx, fails with an error saying what to do instead of running as one
//!    of several unrelated singletons.
//!
//! The ranks of `World::run_threads` (the loopback back-end) are threads of
//! one process; they meet through [`threads`], never through [`init`].
//!
//! Our launcher speaks the same PMI-1 "simple" wire protocol ([`wire`]) after
//! an authentication line, so one client ([`pmi1::Pmi1`]) serves cases 1 and
//! 4. Every implementation counts its exchanges ([`BootstrapStats`]).

pub mod launcher;
pub mod node;
pub mod pmi1;
pub mod pmi2;
pub mod pmix;
pub mod singleton;
pub mod threads;
pub mod wire;

mod conn;
mod detect;
mod stats;

use crate::error::Result;

pub use detect::Mechanism;
pub use pmi1::Pmi1;
pub use pmi2::Pmi2;
pub use pmix::Pmix;
pub use singleton::Singleton;
pub use stats::BootstrapStats;

/// Longest key, in characters, that every mechanism stores intact.
///
/// Hydra announces `keylen_max=64` but counts the C string terminator: a
/// 64-character key is silently truncated. So the usable limit is 63.
pub const MAX_KEY_LEN: usize = 63;

/// Longest value, in characters, that every mechanism stores intact.
///
/// Hydra announces `vallen_max=1024` but counts the C string terminator: a
/// 1024-character value comes back with 1023. So the usable limit is 1023
/// (511 bytes of hex-encoded binary data).
pub const MAX_VALUE_LEN: usize = 1023;

/// The key-value exchange and barrier a job needs to start.
///
/// Semantics follow PMI-1: values put before a [`barrier`](Bootstrap::barrier)
/// are visible to every process after it. Keys are 1 to [`MAX_KEY_LEN`] (63)
/// characters, values 0 to [`MAX_VALUE_LEN`] (1023); both consist of printable
/// ASCII without spaces and without `=` (callers hex-encode binary data).
///
/// Keys a process publishes end in `-<its rank>` (`os-3`, `osh-3`): PMI-1
/// and PMI-2 have one store for the job and need unique names, and PMIx,
/// whose store is per process, finds the publisher of a key from that
/// suffix (see [`Pmix`]).
///
/// Dropping a launched implementation tells the launcher this process has
/// finalized (PMI-1 `cmd=finalize`); [`Pmi1::finalize`] does it explicitly.
pub trait Bootstrap: Send + Sync {
    /// This process's rank, `0..size`.
    fn rank(&self) -> usize;
    /// Number of processes in the job.
    fn size(&self) -> usize;
    /// Publishes `key = value` for this process.
    fn put(&self, key: &str, value: &str) -> Result<()>;
    /// Commits this process's puts and waits until every process has arrived.
    fn barrier(&self) -> Result<()>;
    /// Looks up a key published (and committed by a barrier) by any process.
    fn get(&self, key: &str) -> Result<String>;
    /// Short name of the mechanism, for logs (`"onesided-run"`, `"pmi1"`,
    /// `"pmi2"`, `"pmix"`, `"singleton"`).
    fn name(&self) -> &'static str;
    /// The exchanges this process made so far.
    fn stats(&self) -> BootstrapStats;
    /// The ranks on this node, sorted, when the mechanism knows them as a
    /// list (PMIx's local peers); `None` when the placement comes from the
    /// `PMI_process_mapping` key or is implied (see [`node::discover`]).
    fn local_ranks(&self) -> Result<Option<Vec<usize>>> {
        Ok(None)
    }
    /// Asks the launcher to end the whole job with exit code `code`
    /// (PMI-1 `cmd=abort`, PMI-2 `cmd=abort;isworld=TRUE`, `PMIx_Abort`):
    /// the launcher then ends every rank, whatever its own policy for a
    /// rank that exits with an error (`srun` without `--kill-on-bad-exit`,
    /// `onesided-run --keep-going`). Best effort: the caller exits right
    /// after, so a launcher that ignores the request still sees a failed
    /// rank. Nothing to ask without a launcher (the default).
    fn abort(&self, code: i32, msg: &str) {
        let _ = (code, msg);
    }
}

/// Detects how this process was started and joins the job.
///
/// Detection order: our launcher (`ONESIDED_LAUNCHER_ADDR`), PMIx
/// (`PMIX_*`), PMI-2 (`PMI_FD` with `SLURM_MPI_TYPE=pmi2` or
/// `PMI_VERSION=2`), PMI-1 (`PMI_FD`, else `PMI_PORT` + `PMI_ID`), else a
/// singleton. A variable that is present but malformed is an error, never a
/// silent fall-through to the next mechanism; so is the environment of a
/// launcher this build cannot speak (PMIx without PMIx support built, an
/// `srun` step of several tasks without PMI, an Open MPI job without PMIx):
/// see [`Mechanism::from_env`].
///
/// Under `onesided-run` this also starts the lifeline thread (once per
/// process): if the launcher dies, the process prints one line to stderr and
/// exits with [`launcher::LIFELINE_EXIT_CODE`].
pub fn init() -> Result<Box<dyn Bootstrap>> {
    let mechanism = Mechanism::from_env()?;
    tracing::debug!(?mechanism, "bootstrap: detected");
    Ok(match mechanism {
        Mechanism::OnesidedRun => Box::new(launcher::client::join_from_env()?),
        Mechanism::Pmix => Box::new(Pmix::from_env()?),
        Mechanism::Pmi2 => Box::new(Pmi2::from_fd_env()?),
        Mechanism::Pmi1Fd => Box::new(Pmi1::from_fd_env()?),
        Mechanism::Pmi1Port => Box::new(Pmi1::from_port_env()?),
        Mechanism::Singleton => Box::new(Singleton::new()),
    })
}

/// What PMIx support this build has: `PMIx <version> (<dir>)`, or
/// `not built: <why>` (then a PMIx launch is refused).
pub fn pmix_build() -> &'static str {
    pmix_sys::BUILD
}
