//! Starting a job: who am I, how many are we, and a key-value store to meet.
//!
//! A process learns its rank and the job size, publishes a few small values
//! (its endpoint address, the address and key of its window directory) and
//! looks up other processes' values *lazily*, when it first contacts them.
//! Nothing here is sized by the number of processes.
//!
//! Three ways in, detected from the environment by [`init`], in this order:
//! 1. our launcher `onesided-run` ([`launcher`]): `ONESIDED_LAUNCHER_ADDR` is
//!    set (then `ONESIDED_JOB_TOKEN`, `ONESIDED_RANK` and `ONESIDED_SIZE` must
//!    be set too);
//! 2. an existing launcher through PMI-1 ([`pmi1`]; MPICH Hydra, Slurm's
//!    pmi1): `PMI_FD` is set (with `PMI_RANK`, `PMI_SIZE`), or else `PMI_PORT`
//!    and `PMI_ID` are set;
//! 3. no launcher at all: a singleton, rank 0 of 1 ([`singleton`]).
//!
//! Our launcher speaks the same PMI-1 "simple" wire protocol ([`wire`]) after
//! an authentication line, so one client ([`pmi1::Pmi1`]) serves cases 1 and
//! 2. PMI-2 or PMIx would be further implementations of [`Bootstrap`],
//! selected by [`init`] from their own environment variables (see
//! `docs/bootstrap.md`).

pub mod launcher;
pub mod node;
pub mod pmi1;
pub mod singleton;
pub mod wire;

mod conn;

use crate::error::Result;

pub use pmi1::Pmi1;
pub use singleton::Singleton;

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
    /// Short name of the mechanism, for logs (`"onesided-run"`, `"pmi1"`, `"singleton"`).
    fn name(&self) -> &'static str;
}

/// Detects how this process was started and joins the job.
///
/// Detection order: our launcher (`ONESIDED_LAUNCHER_ADDR`), then PMI-1
/// (`PMI_FD`, else `PMI_PORT` + `PMI_ID`), else a singleton. A variable that
/// is present but malformed is an error, never a silent fall-through to the
/// next mechanism.
///
/// Under `onesided-run` this also starts the lifeline thread (once per
/// process): if the launcher dies, the process prints one line to stderr and
/// exits with [`launcher::LIFELINE_EXIT_CODE`].
pub fn init() -> Result<Box<dyn Bootstrap>> {
    if env_present(launcher::ENV_ADDR) {
        tracing::debug!("bootstrap: joining onesided-run job");
        return Ok(Box::new(launcher::client::join_from_env()?));
    }
    if env_present("PMI_FD") {
        tracing::debug!("bootstrap: PMI-1 over inherited PMI_FD");
        return Ok(Box::new(Pmi1::from_fd_env()?));
    }
    if env_present("PMI_PORT") {
        tracing::debug!("bootstrap: PMI-1 over PMI_PORT");
        return Ok(Box::new(Pmi1::from_port_env()?));
    }
    tracing::debug!("bootstrap: no launcher found, singleton");
    Ok(Box::new(Singleton::new()))
}

/// True when `var` is set to a non-empty value (set-but-not-UTF-8 counts as
/// present, so that the mechanism's own parsing reports it).
fn env_present(var: &str) -> bool {
    std::env::var_os(var).is_some_and(|v| !v.is_empty())
}
