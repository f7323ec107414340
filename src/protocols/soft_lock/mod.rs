//! The software lock path: a FIFO lock queue per window at the target
//! (`queue.rs`), lock messages (`wire.rs`) served by the target's handler
//! (`target.rs`), lock + one small operation + unlock in one message; see
//! `docs/semantics.md`.

pub mod queue;
pub mod target;
pub mod wire;

#[cfg(test)]
mod tests;
