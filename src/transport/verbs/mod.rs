//! The native ibverbs back-end (on `sys/rdma-sys`).
//!
//! [`VerbsTransport`] (`transport.rs`) implements the seam over these
//! parts, with the same file names as the other back-ends where they apply:
//!
//! | file | what |
//! |---|---|
//! | `device.rs` | device, port and GID discovery and choice (`ONESIDED_IB_DEVICE`) |
//! | `conn.rs` | protection domain, RC queue pairs (INIT/RTR/RTS, GRH on RoCE) |
//! | `mr.rs` | memory regions with only the rights asked for |
//! | `peers.rs` | connections on first contact, generations, re-connection after errors |
//! | `handshake.rs` | the UD queue pair and the REQ/REP datagrams the target's progress serves |
//! | `rma.rs` | RDMA WRITE (inline when small) and READ work requests |
//! | `atomic.rs` | 64-bit FETCH_AND_ADD / CMP_AND_SWP, byte order of fetched results |
//! | `msg.rs` | active messages: SEND into the shared receive queue |
//! | `cq.rs` | the completion queue and its channel; work request ids with generations |
//! | `ops.rs` | operations in flight (bounded table) |
//! | `lean.rs` | blocking operations of one request, polled by their caller |
//! | `staging.rs` | registered staging slots for the local side of operations |
//! | `caps.rs` | what the seam is told ([`Caps`](super::Caps)) |

pub mod atomic;
pub mod caps;
pub mod conn;
pub mod cq;
pub mod device;
pub mod handshake;
mod lean;
pub mod mr;
pub mod msg;
mod ops;
mod peers;
pub mod rma;
mod staging;
#[cfg(test)]
mod tests;
mod transport;

pub use transport::VerbsTransport;

pub use device::{choose, devices, DeviceInfo, DeviceSpec, GidEntry, GidKind, PortInfo};

use crate::error::Result;

/// The device, port and GID `ONESIDED_IB_DEVICE` (or the automatic
/// choice) names.
///
/// # Errors
/// A malformed variable; no usable port, naming the device.
pub fn choose_from_env() -> Result<device::Choice> {
    let spec = DeviceSpec::from_env()?;
    let devs = devices()?;
    choose(&devs, &spec)
}
