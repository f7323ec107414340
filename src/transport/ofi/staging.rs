//! Registered staging buffers for providers that demand `FI_MR_LOCAL`.
//!
//! Under `FI_MR_LOCAL` every local buffer of an operation needs a
//! registration. Registering the caller's memory per operation costs a system
//! call and fails outright for read-only memory (a constant `&[5u64]` lives in
//! `.rodata`, which verbs cannot pin for local write). Small blocking
//! transfers therefore go through a fixed pool of registered slots: the data
//! is copied in (put) or out (get). The pool is constant per process:
//! [`SLOTS`] × [`SLOT_BYTES`].

use std::sync::Mutex;

use libfabric_sys as fi;

use super::mr::LocalMr;
use super::OfiTransport;
use crate::error::Result;
use crate::transport::Memory;

/// Number of staging slots.
pub const SLOTS: usize = 64;
/// Bytes per slot; larger blocking transfers register the caller's buffer.
pub const SLOT_BYTES: usize = 8192;

/// The pool.
pub struct Staging {
    // The registration goes before the memory it covers.
    mr: LocalMr,
    mem: Memory<'static>,
    free: Mutex<Vec<usize>>,
}

/// One slot, returned to the pool on drop.
pub struct Slot<'a> {
    pool: &'a Staging,
    index: usize,
}

impl Staging {
    /// Allocates and registers the pool.
    pub fn new(t: &OfiTransport) -> Result<Staging> {
        let mem = Memory::allocate(SLOTS * SLOT_BYTES)?;
        let mr = LocalMr::register(t, mem.as_ptr(), mem.len(), fi::FI_READ | fi::FI_WRITE)?;
        Ok(Staging {
            mr,
            mem,
            free: Mutex::new((0..SLOTS).rev().collect()),
        })
    }

    /// Takes a free slot, if any.
    pub fn try_acquire(&self) -> Option<Slot<'_>> {
        let index = self.free.lock().ok()?.pop()?;
        Some(Slot { pool: self, index })
    }
}

impl Slot<'_> {
    fn offset(&self) -> usize {
        self.index * SLOT_BYTES
    }
    /// Address `at` bytes into the slot, for the provider.
    pub fn ptr_at(&self, at: usize) -> *mut u8 {
        self.pool
            .mem
            .as_ptr()
            .wrapping_add(self.offset() + at.min(SLOT_BYTES))
    }
    /// Start of the slot, for the provider.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr_at(0)
    }
    /// Descriptor of the pool's registration.
    pub fn desc(&self) -> *mut std::os::raw::c_void {
        self.pool.mr.desc()
    }
    /// Copies `data` into the slot at byte `at` (what does not fit is an error).
    pub fn fill_at(&self, at: usize, data: &[u8]) -> Result<()> {
        self.check(at, data.len())?;
        self.pool.mem.write(self.offset() + at, data)
    }
    /// Copies `out.len()` bytes out of the slot from byte `at`.
    pub fn drain_at(&self, at: usize, out: &mut [u8]) -> Result<()> {
        self.check(at, out.len())?;
        self.pool.mem.read(self.offset() + at, out)
    }
    /// Copies `data` (at most [`SLOT_BYTES`]) into the slot.
    pub fn fill(&self, data: &[u8]) -> Result<()> {
        self.fill_at(0, data)
    }
    /// Copies the first `out.len()` bytes of the slot out.
    pub fn drain(&self, out: &mut [u8]) -> Result<()> {
        self.drain_at(0, out)
    }
    fn check(&self, at: usize, n: usize) -> Result<()> {
        match at.checked_add(n) {
            Some(end) if end <= SLOT_BYTES => Ok(()),
            _ => Err(crate::error::Error::InvalidArgument(format!(
                "staging slot access at byte {at}, length {n}, beyond {SLOT_BYTES} bytes"
            ))),
        }
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        if let Ok(mut f) = self.pool.free.lock() {
            f.push(self.index);
        }
    }
}
