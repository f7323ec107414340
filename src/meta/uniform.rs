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
//! This module is the agreement's content (what each rank contributes,
//! what the maxima mean); the allreduce that carries it runs at the window
//! layer (`api/window/agreement.rs`), over the world's control regions. It
//! is a dissemination, like `World::barrier`: in round k each rank writes its running maxima into the
//! reduction slot of rank + 2^k (`directory::reduce_offset`), proves them
//! delivered, then raises the slot's flag to the epoch (the window id), and
//! waits for its own slot of round k. Maxima are idempotent, so the
//! dissemination's overlapping contributions do no harm; the minimum of x is
//! the maximum of !x. Slots alternate by the epoch's parity: a rank cannot
//! start epoch e + 2 before every rank finished epoch e, so a slot is never
//! overwritten before it was read.

use super::directory::{Descriptor, REDUCE_WORDS};

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
pub fn words(d: Option<&Descriptor>, keyed: bool) -> [u64; REDUCE_WORDS] {
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

/// What the element-wise maxima `w` of every rank's [`words`] say.
pub fn conclude(w: &[u64; REDUCE_WORDS]) -> Agreement {
    let equal = |i: usize| w[i] == !w[i + 1];
    Agreement {
        uniform: equal(0) && equal(2) && equal(4) && w[4] & 1 == 1 && w[6] == 0,
        failed: w[6] != 0,
        same_len: equal(0) && w[6] == 0,
    }
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
