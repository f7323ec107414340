//! Memory regions: registration with only the access rights a window or
//! buffer needs (`ibv_reg_mr`), deregistered when dropped.

use std::sync::Arc;

use rdma_sys as ffi;

use super::conn::{os_err, rc_err, Device};
use crate::error::Result;

/// Access rights of a memory region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    /// Peers may write (puts, atomics).
    pub remote_write: bool,
    /// Peers may read (gets).
    pub remote_read: bool,
    /// Peers may run atomics.
    pub remote_atomic: bool,
}

impl Access {
    /// Local only (send buffers, read/atomic result buffers need local write).
    pub const LOCAL: Access = Access {
        remote_write: false,
        remote_read: false,
        remote_atomic: false,
    };

    fn flags(self) -> u32 {
        let mut f = ffi::IBV_ACCESS_LOCAL_WRITE;
        if self.remote_write || self.remote_atomic {
            f |= ffi::IBV_ACCESS_REMOTE_WRITE;
        }
        if self.remote_read {
            f |= ffi::IBV_ACCESS_REMOTE_READ;
        }
        if self.remote_atomic {
            f |= ffi::IBV_ACCESS_REMOTE_ATOMIC;
        }
        f
    }
}

/// A registered memory region.
pub struct Mr {
    pub(crate) mr: *mut ffi::ibv_mr,
    /// Local key.
    pub lkey: u32,
    /// Remote key.
    pub rkey: u32,
    /// Start address.
    pub addr: u64,
    /// Length in bytes.
    pub len: usize,
    _dev: Arc<Device>,
}

// SAFETY: an ibv_mr is an immutable handle once registered.
unsafe impl Send for Mr {}
// SAFETY: as above.
unsafe impl Sync for Mr {}

impl Drop for Mr {
    fn drop(&mut self) {
        let _ = self.dereg();
    }
}

impl Mr {
    /// `ibv_dereg_mr` once: 0, or its error (the region is then still
    /// registered).
    fn dereg(&mut self) -> i32 {
        if self.mr.is_null() {
            return 0;
        }
        // SAFETY: mr came from ibv_reg_mr and, once deregistered, is
        // replaced by null, so it is deregistered at most once.
        let rc = unsafe { ffi::ibv_dereg_mr(self.mr) };
        if rc == 0 {
            self.mr = std::ptr::null_mut();
        }
        rc
    }

    /// Deregisters now. Once this returns `Ok`, the device no longer
    /// reads or writes the memory (an operation still in flight on it
    /// completes in error).
    ///
    /// # Errors
    /// `ibv_dereg_mr` failing: the region stays registered (until drop
    /// tries again), and an operation in flight may still reach it.
    pub fn deregister(mut self) -> Result<()> {
        match self.dereg() {
            0 => Ok(()),
            rc => Err(rc_err("ibv_dereg_mr", format!("deregistering {} bytes", self.len), rc)),
        }
    }

    /// Registers `len` bytes at `addr` with `access`.
    ///
    /// # Safety
    /// The memory must stay allocated while the region exists and while
    /// any operation on it is in flight; the device may write it at any
    /// time when `access` allows remote writes or atomics, so nobody may
    /// hold a Rust reference to it that assumes it unchanged.
    ///
    /// # Errors
    /// `ibv_reg_mr` failing (e.g. the locked-memory limit).
    pub unsafe fn register(
        dev: &Arc<Device>,
        addr: *mut u8,
        len: usize,
        access: Access,
    ) -> Result<Mr> {
        let flags = i32::try_from(access.flags()).unwrap_or(0);
        // SAFETY: forwarded: the caller's contract is this function's.
        unsafe { Mr::register_flags(dev, addr, len, flags) }
    }

    /// Registers `len` bytes at `addr` as the source of RDMA WRITEs only:
    /// no access right at all (the device reads it; read-only memory
    /// registers too).
    ///
    /// # Safety
    /// The memory must stay allocated, and unchanged while an operation
    /// reads it, for as long as the region exists.
    ///
    /// # Errors
    /// `ibv_reg_mr` failing (e.g. the locked-memory limit).
    pub unsafe fn register_source(dev: &Arc<Device>, addr: *const u8, len: usize) -> Result<Mr> {
        // SAFETY: forwarded; with no access right the device never writes.
        unsafe { Mr::register_flags(dev, addr.cast_mut(), len, 0) }
    }

    /// # Safety
    /// As [`Mr::register`] for the rights `flags` grants.
    unsafe fn register_flags(dev: &Arc<Device>, addr: *mut u8, len: usize, flags: i32) -> Result<Mr> {
        // SAFETY: pd is valid; the caller keeps [addr, addr+len) alive.
        let mr = unsafe { ffi::ibv_reg_mr(dev.pd, addr.cast(), len, flags) };
        if mr.is_null() {
            return Err(os_err("ibv_reg_mr", format!("registering {len} bytes")));
        }
        // SAFETY: mr is valid.
        let (lkey, rkey) = unsafe { ((*mr).lkey, (*mr).rkey) };
        Ok(Mr {
            mr,
            lkey,
            rkey,
            addr: addr as u64,
            len,
            _dev: dev.clone(),
        })
    }
}
