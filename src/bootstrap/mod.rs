//! Starting a job: who am I, how many are we, and a key-value store to meet.
//!
//! A process learns its rank and the job size, publishes a few small values
//! (its endpoint address, the address and key of its window directory) and
//! looks up other processes' values *lazily*, when it first contacts them.
//! Nothing here is sized by the number of processes.
//!
//! Three ways in, detected from the environment by [`init`]:
//! 1. our launcher `onesided-run` ([`launcher`]),
//! 2. an existing launcher through PMI-1 ([`pmi1`]; MPICH Hydra, Slurm's pmi1),
//! 3. no launcher at all: a singleton, rank 0 of 1 ([`singleton`]).

use crate::error::Result;

/// The key-value exchange and barrier a job needs to start.
///
/// Semantics follow PMI-1: values put before a [`barrier`](Bootstrap::barrier)
/// are visible to every process after it. Keys are at most 64 characters,
/// values at most 1024, neither contains spaces, `=` or newlines (callers
/// hex-encode binary data).
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

// TEMPORARY until the bootstrap branch lands: singleton only.
struct Single;
impl Bootstrap for Single {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn put(&self, _k: &str, _v: &str) -> Result<()> {
        Ok(())
    }
    fn barrier(&self) -> Result<()> {
        Ok(())
    }
    fn get(&self, k: &str) -> Result<String> {
        Err(crate::error::Error::bootstrap(
            "singleton",
            format!("no key {k}"),
        ))
    }
    fn name(&self) -> &'static str {
        "singleton"
    }
}
/// Detects how the job was started.
pub fn init() -> Result<Box<dyn Bootstrap>> {
    Ok(Box::new(Single))
}
