//! Uniform windows: every rank passed the same size, element type and
//! per-window flags. Detected at creation by an allreduce of O(log P)
//! messages per process; an origin then reaches any peer's window with no
//! descriptor read and no per-peer state: key, address, length and
//! displacement unit are computed locally (`docs/directory.md`, "Uniform
//! windows").
//!
//! Where the provider lets us choose keys and addresses by offset (no
//! `FI_MR_PROV_KEY`, no `FI_MR_VIRT_ADDR`: tcp, sockets) a window's memory is
//! registered with key [`window_key`]`(id)` = 2 × id and peers address it from
//! 0. Other registrations take odd keys (`transport::ofi::mr`), so requested
//! keys never collide within a process.
//!
//! The allreduce is a dissemination over the control regions, like
//! `World::barrier`: in round k each rank writes its running maxima into the
//! reduction slot of rank + 2^k (`directory::reduce_offset`), proves them
//! delivered, then raises the slot's flag to the epoch (the window id), and
//! waits for its own slot of round k. Maxima are idempotent, so the
//! dissemination's overlapping contributions do no harm; the minimum of x is
//! the maximum of !x. Slots alternate by the epoch's parity: a rank cannot
//! start epoch e + 2 before every rank finished epoch e, so a slot is never
//! overwritten before it was read.

use crate::api::world::World;
use crate::error::{Error, Result};
use crate::transport::{RemoteAddr, RemoteCompletion};

use super::directory::{self, Descriptor, REDUCE_ROUNDS, REDUCE_WORDS};

/// Requested remote key of window `id`'s memory (even; see the module doc).
pub fn window_key(id: u64) -> u64 {
    id << 1
}

/// What every rank learns at creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Agreement {
    /// Same length, displacement unit, type and flags everywhere, and every
    /// rank's memory registered under [`window_key`] with offset addressing.
    pub uniform: bool,
    /// Some rank could not create its part of the window.
    pub failed: bool,
    /// Every rank passed the same length (whatever its key or flags).
    pub same_len: bool,
}

/// The reduced words of one rank: `None` = this rank failed locally.
fn words(d: Option<&Descriptor>, keyed: bool) -> [u64; REDUCE_WORDS] {
    match d {
        None => [0, 0, 0, 0, 0, 0, 1],
        Some(d) => {
            // Type tags are small; a tag that does not fit is "not uniform".
            let shape = (d.tag << 16) | (d.disp_unit << 1) | u64::from(keyed);
            let shape = if d.tag >> 47 == 0 && d.disp_unit < 1 << 15 {
                shape
            } else {
                0
            };
            [d.len, !d.len, d.flags, !d.flags, shape, !shape, 0]
        }
    }
}

fn conclude(w: &[u64; REDUCE_WORDS]) -> Agreement {
    let equal = |i: usize| w[i] == !w[i + 1];
    Agreement {
        uniform: equal(0) && equal(2) && equal(4) && w[4] & 1 == 1 && w[6] == 0,
        failed: w[6] != 0,
        same_len: equal(0) && w[6] == 0,
    }
}

/// Runs the creation allreduce of window `id` (collective; also a barrier).
/// `d` is this rank's descriptor, `None` if its part of the creation failed;
/// `keyed` says whether its memory is registered under [`window_key`] with
/// offset addressing.
pub fn agree(world: &World, id: u64, d: Option<&Descriptor>, keyed: bool) -> Result<Agreement> {
    let mut w = words(d, keyed);
    allreduce_max(world, id, &mut w)?;
    Ok(conclude(&w))
}

/// Element-wise maximum of `w` over all ranks, in place. `epoch` must grow
/// from one call to the next (window ids do).
fn allreduce_max(world: &World, epoch: u64, w: &mut [u64; REDUCE_WORDS]) -> Result<()> {
    let (rank, size) = (world.rank(), world.size());
    let ctrl = world.control_memory();
    let mut dist = 1usize;
    let mut round = 0usize;
    while dist < size {
        if round >= REDUCE_ROUNDS {
            return Err(Error::InvalidArgument(format!(
                "window {epoch}: {size} processes exceed the allreduce's {REDUCE_ROUNDS} rounds"
            )));
        }
        let to = (rank + dist) % size;
        let off = directory::reduce_offset(round, epoch);
        let flag = off + 8 * REDUCE_WORDS;
        let mut payload = [0u8; 8 * REDUCE_WORDS];
        for (i, v) in w.iter().enumerate() {
            payload[8 * i..8 * i + 8].copy_from_slice(&v.to_le_bytes());
        }
        // A node-local peer's slot is written by stores into its mapped
        // control region (release store of the flag last); others by the
        // provider: the payload, a read that proves it delivered (ordered
        // after the write, FI_ORDER_RMA_RAW; without that promise writes
        // complete only when delivered), then the flag.
        let local = world.with_local_ctrl(to, |m| {
            m.write(off, &payload)?;
            m.store_u64(flag, epoch)
        })?;
        if local.is_none() {
            let c = world.control(to)?;
            let at = |o: usize| RemoteAddr {
                addr: c.addr + o as u64,
                key: c.key,
            };
            let t = world.transport();
            t.put(to, &payload, at(off))?;
            if t.caps().completion == RemoteCompletion::OrderedRead {
                let mut probe = [0u8; 8];
                t.get(to, &mut probe, at(off))?;
            }
            t.put_signal(to, epoch, at(flag))?;
        }
        let from = (rank + size - dist) % size;
        let what = || {
            format!("window creation (agreement {epoch}, round {round}): waiting for rank {from}")
        };
        crate::progress::wait::until(world.transport(), world.config.timeout, &what, || {
            Ok(ctrl.load_u64(flag)? >= epoch)
        })
        .map_err(|e| e.awaiting(from))?;
        let mut got = [0u8; 8 * REDUCE_WORDS];
        ctrl.read(off, &mut got)?;
        for (i, v) in w.iter_mut().enumerate() {
            let mut b = [0u8; 8];
            b.copy_from_slice(&got[8 * i..8 * i + 8]);
            *v = (*v).max(u64::from_le_bytes(b));
        }
        dist *= 2;
        round += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(len: u64, flags: u64) -> Descriptor {
        Descriptor {
            id: 3,
            base: 0,
            len,
            disp_unit: 8,
            key: 6,
            tag: 5,
            flags,
            aux: 0,
        }
    }

    fn reduce(ranks: &[[u64; REDUCE_WORDS]]) -> Agreement {
        let mut w = ranks[0];
        for r in ranks {
            for (a, b) in w.iter_mut().zip(r) {
                *a = (*a).max(*b);
            }
        }
        conclude(&w)
    }

    #[test]
    fn uniform_only_when_everything_agrees() {
        let a = words(Some(&d(64, 1)), true);
        assert_eq!(
            reduce(&[a, a, a]),
            Agreement {
                uniform: true,
                failed: false,
                same_len: true,
            }
        );
        assert!(reduce(&[a, words(Some(&d(64, 3)), false)]).same_len);
        assert!(!reduce(&[a, words(Some(&d(72, 1)), true)]).uniform, "len");
        assert!(!reduce(&[a, words(Some(&d(72, 1)), true)]).same_len, "len");
        assert!(!reduce(&[a, words(Some(&d(64, 3)), true)]).uniform, "flags");
        assert!(!reduce(&[a, words(Some(&d(64, 1)), false)]).uniform, "key");
        let unkeyed = words(Some(&d(64, 1)), false);
        assert!(!reduce(&[unkeyed, unkeyed]).uniform, "no requested keys");
        let mut t = d(64, 1);
        t.tag = 6;
        assert!(!reduce(&[a, words(Some(&t), true)]).uniform, "type");
        let f = reduce(&[a, words(None, false)]);
        assert!(f.failed && !f.uniform);
    }

    #[test]
    fn window_keys_are_even_and_distinct() {
        assert_eq!(window_key(1), 2);
        assert_ne!(window_key(2), window_key(3));
        assert_eq!(window_key(77) % 2, 0);
    }
}
