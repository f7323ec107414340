//! The software lock path: a FIFO lock queue per window at the target
//! (`queue.rs`), lock messages (`wire.rs`) sent by the origin (`origin.rs`)
//! and served by the target's handler (`target.rs`), lock + one small
//! operation + unlock in one message; see `docs/semantics.md`.

pub mod origin;
pub mod queue;
pub mod target;
pub mod wire;

pub use origin::Origin;

#[cfg(test)]
mod tests;
