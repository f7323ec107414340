//! The protocols that need the target's CPU: where the network stops,
//! software takes over. One folder per protocol, with its wire format
//! (`wire.rs`), its target side (`target.rs`, the active-message handler)
//! and, as they move out of the window, its origin side:
//!
//! * [`accumulate`] — accumulates the back-end cannot apply, run by the
//!   target's CPU atomics;
//! * [`soft_lock`] — the FIFO lock queue at the target, lock-op-unlock in
//!   one message;
//! * [`aggregation`] — the operation table, its two-level pools and BATCH
//!   messages of small puts and accumulates;
//! * [`pscw`] — post notifications of post/start/complete/wait.

pub mod accumulate;
pub mod aggregation;
pub mod pscw;
pub mod soft_lock;
