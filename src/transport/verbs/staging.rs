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

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::conn::{Access, Device, Mr};
use super::rma::Local;
use crate::error::{Error, Result};
use crate::transport::Memory;

/// Number of slots.
pub const SLOTS: usize = 128;
/// Bytes per slot (and per chunk of a large transfer).
pub const SLOT_BYTES: usize = 64 * 1024;

/// Words of the free-slot bitmap.
const WORDS: usize = SLOTS.div_ceil(64);

/// The pool.
pub struct Staging {
    // The region before the memory it covers.
    mr: Mr,
    mem: Memory<'static>,
    free: FreeSlots,
}

/// Which slots are free, without a lock: bit `i % 64` of word `i / 64` set
/// means slot `i` is free. A slot is taken by clearing its bit (one
/// compare-exchange) and given back by setting it, so a slot given back
/// twice still cannot be handed out twice.
struct FreeSlots {
    words: [AtomicU64; WORDS],
}

impl FreeSlots {
    /// Slots `0..SLOTS` free.
    fn new() -> FreeSlots {
        FreeSlots {
            words: std::array::from_fn(|w| {
                let n = SLOTS.saturating_sub(w * 64).min(64);
                AtomicU64::new(if n == 64 { u64::MAX } else { (1u64 << n) - 1 })
            }),
        }
    }

    fn take(&self) -> Option<usize> {
        for (w, word) in self.words.iter().enumerate() {
            let mut v = word.load(Ordering::Relaxed);
            while v != 0 {
                let bit = v.trailing_zeros() as usize;
                match word.compare_exchange_weak(v, v & !(1 << bit), Ordering::Acquire, Ordering::Relaxed) {
                    Ok(_) => return Some(w * 64 + bit),
                    Err(now) => v = now,
                }
            }
        }
        None
    }

    fn give(&self, i: usize) {
        if i < SLOTS {
            let before = self.words[i / 64].fetch_or(1 << (i % 64), Ordering::Release);
            debug_assert!(before & (1 << (i % 64)) == 0, "staging slot {i} given back twice");
        }
    }
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
            free: FreeSlots::new(),
        })
    }

    /// Takes a free slot, if any.
    pub fn try_take(&self) -> Option<usize> {
        self.free.take()
    }

    /// Gives slot `i` back (once its operation completed).
    pub fn give(&self, i: usize) {
        self.free.give(i);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_slots_hand_out_each_slot_to_one_holder() {
        let f = FreeSlots::new();
        let mut got: Vec<usize> = std::iter::from_fn(|| f.take()).collect();
        got.sort_unstable();
        assert!(got.iter().copied().eq(0..SLOTS), "every slot once");
        assert_eq!(f.take(), None, "empty");
        f.give(77);
        assert_eq!(f.take(), Some(77));
        f.give(SLOTS); // out of range: ignored
        assert_eq!(f.take(), None);
        for i in 0..SLOTS {
            f.give(i);
        }
        // Four threads take and give back; a slot never has two holders.
        let held: Vec<AtomicU64> = (0..SLOTS).map(|_| AtomicU64::new(0)).collect();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..20_000 {
                        let mut mine = Vec::new();
                        for _ in 0..40 {
                            if let Some(i) = f.take() {
                                assert_eq!(held[i].fetch_add(1, Ordering::AcqRel), 0, "slot {i} held twice");
                                mine.push(i);
                            }
                        }
                        for i in mine {
                            held[i].fetch_sub(1, Ordering::AcqRel);
                            f.give(i);
                        }
                    }
                });
            }
        });
        assert_eq!(std::iter::from_fn(|| f.take()).count(), SLOTS, "all back");
    }
}
