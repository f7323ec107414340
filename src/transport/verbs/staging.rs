//! Registered staging slots: the local side of every operation that is not
//! posted inline.
//!
//! A work request's local buffer must lie in a memory region. Registering
//! the caller's buffer per operation costs a system call (and fails for
//! read-only memory), so puts copy their data into a slot, gets and
//! fetching atomics land in a slot and are copied out when they complete
//! (into an [`InFlight`](crate::transport::InFlight) buffer through its
//! sink). The pool is constant per process: [`SLOTS`] × [`SLOT_BYTES`];
//! larger transfers are split into slot-sized chunks that are in flight
//! together. A slot is returned when its operation's completion is read,
//! never earlier, so the device never writes a slot that was handed out
//! again.

use std::sync::{Arc, Mutex};

use super::conn::{Access, Device, Mr};
use super::rma::Local;
use crate::error::{Error, Result};
use crate::transport::Memory;

/// Number of slots.
pub const SLOTS: usize = 128;
/// Bytes per slot (and per chunk of a large transfer).
pub const SLOT_BYTES: usize = 64 * 1024;

/// The pool.
pub struct Staging {
    // The region before the memory it covers.
    mr: Mr,
    mem: Memory<'static>,
    free: Mutex<Vec<usize>>,
}

impl Staging {
    /// Allocates and registers the pool (local access only).
    ///
    /// # Errors
    /// Allocation or `ibv_reg_mr` failing.
    pub fn new(dev: &Arc<Device>) -> Result<Staging> {
        let mem = Memory::allocate(SLOTS * SLOT_BYTES)?;
        // SAFETY: `mem` is owned by the pool and outlives the region (field
        // order); it is accessed only through `Memory`'s copies.
        let mr = unsafe { Mr::register(dev, mem.as_ptr(), mem.len(), Access::LOCAL)? };
        Ok(Staging {
            mr,
            mem,
            free: Mutex::new((0..SLOTS).rev().collect()),
        })
    }

    /// Takes a free slot, if any.
    pub fn try_take(&self) -> Option<usize> {
        self.free.lock().ok()?.pop()
    }

    /// Gives slot `i` back (once its operation completed).
    pub fn give(&self, i: usize) {
        if i < SLOTS {
            if let Ok(mut f) = self.free.lock() {
                f.push(i);
            }
        }
    }

    /// The local descriptor of `len` bytes of slot `i`.
    pub fn local(&self, i: usize, len: usize) -> Result<Local> {
        if i >= SLOTS || len > SLOT_BYTES {
            return Err(Error::InvalidArgument(format!(
                "staging slot {i} with {len} bytes is out of range"
            )));
        }
        Local::of(&self.mr, i * SLOT_BYTES, len).ok_or_else(|| {
            Error::InvalidArgument(format!("staging slot {i} with {len} bytes is out of range"))
        })
    }

    /// Copies `data` into slot `i`.
    pub fn fill(&self, i: usize, data: &[u8]) -> Result<()> {
        self.local(i, data.len())?;
        self.mem.write(i * SLOT_BYTES, data)
    }

    /// Copies `out.len()` bytes out of slot `i`.
    pub fn drain(&self, i: usize, out: &mut [u8]) -> Result<()> {
        self.local(i, out.len())?;
        self.mem.read(i * SLOT_BYTES, out)
    }
}
