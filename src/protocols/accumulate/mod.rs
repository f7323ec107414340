//! The software accumulate path: accumulates the back-end cannot apply
//! are cut into segments by the origin (`origin.rs`), sent as
//! active-message requests (`wire.rs`) that the target applies with CPU
//! atomics (`target.rs`); see `docs/semantics.md`.

pub mod origin;
pub mod target;
pub mod wire;

pub use origin::Origin;
pub use target::AccumulateHandler;
pub use wire::{check_software_op, op_bit, Request, REQUEST_BYTES, SEGMENT_BYTES};

#[cfg(test)]
mod tests;
