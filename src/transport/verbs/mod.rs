//! The native ibverbs back-end (on `sys/rdma-sys`).
//!
//! Status: device discovery and selection ([`device`]), the reliable
//! connected queue-pair building blocks ([`conn`]: protection domain,
//! completion queue, RC queue pairs moved to RTS with a GRH on RoCE), RDMA
//! WRITE/READ and 64-bit FETCH_AND_ADD/CMP_AND_SWP work requests
//! ([`rma`], [`atomic`]) with the byte-order self-test of fetched atomic
//! results. The [`Transport`](super::Transport) implementation over them
//! (connection handshake on first contact, SRQ messages) is not written
//! yet: `ONESIDED_BACKEND=verbs` checks the device and says so.

pub mod atomic;
pub mod caps;
pub mod conn;
pub mod cq;
pub mod device;
pub mod handshake;
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

use crate::error::{Error, Result};

/// What `ONESIDED_BACKEND=verbs` does today: chooses the device, port and
/// GID (`ONESIDED_IB_DEVICE`) and reports that the transport over it is
/// not available in this build.
///
/// The error: no usable port (naming the device), or the transport missing.
pub fn open_check() -> Error {
    match choose_from_env() {
        Err(e) => e,
        Ok(c) => Error::backend(
        device::BACKEND,
        "open",
        format!(
            "opening {}:{} (GID index {} {})",
            c.device.name,
            c.port.port,
            c.gid.index,
            c.gid.text()
        ),
        nix::libc::ENOSYS,
        "the native verbs transport is not complete in this build; use ONESIDED_BACKEND=ofi \
         (ONESIDED_PROVIDER='verbs;ofi_rxm' for libfabric over this device)",
        ),
    }
}

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
