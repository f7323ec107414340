//! Post notifications between node-local processes, without a message:
//! when every rank is on this node and the control regions are shared
//! (`World::sync_words_by_cpu`), a target's `post` appends its rank to a
//! small ring in the *origin's* descriptor of the window, which the
//! origin moves into its [`PostBox`](super::target::PostBox) when it next
//! looks for a post. A full ring (a slow origin with [`SLOTS`] posts not
//! yet absorbed) sends the usual active message instead: the post box
//! counts per (window, target) either way, so the two paths mix freely.
//!
//! Layout in the descriptor (docs/directory.md): word 10 (`POST_WORD`)
//! holds `head << 32 | tail` (u32 counters, wrapping; `tail − head` slots
//! are in use), words 12–15 are the slots, holding `target + 1` (0: not
//! written yet). Invariants:
//! * producers (any node-local target) reserve slot `tail` by a CPU
//!   compare-and-swap that advances `tail` only while `tail − head <
//!   SLOTS`, then store into it with release ordering;
//! * the one consumer (the owner, under its window's epoch lock) reads the
//!   slot at `head` with acquire ordering, clears it, and only then advances
//!   `head` by compare-and-swap — so a producer can reserve that slot again
//!   only after it was cleared;
//! * both counters wrap at 2³², a multiple of [`SLOTS`], so `counter %
//!   SLOTS` stays continuous.
//!
//! [`publish`](crate::meta::directory::publish) and `retract` zero the
//! words, so a window slot reused by a later window starts empty.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::Result;
use crate::meta::directory::{COMPLETE_WORD, POST_WORD};
use crate::transport::Memory;

/// Slots of the ring (words 12–15 of the descriptor).
pub const SLOTS: usize = 4;
// The slots follow COMPLETE_WORD, which follows POST_WORD (`words`).
const _: () = assert!(COMPLETE_WORD == POST_WORD + 8);

/// The ring's words of the descriptor at byte `entry`: `[0]` the
/// `head << 32 | tail` word, `[2..]` the slots (`[1]` is COMPLETE_WORD,
/// not the ring's).
fn words<'m>(m: &'m Memory<'_>, entry: usize) -> Result<&'m [AtomicU64]> {
    m.cells::<AtomicU64>(entry + POST_WORD, 2 + SLOTS)
}

fn cas(word: &AtomicU64, current: u64, new: u64) -> bool {
    word.compare_exchange(current, new, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
}

fn split(w: u64) -> (u32, u32) {
    ((w >> 32) as u32, w as u32)
}

fn join(head: u32, tail: u32) -> u64 {
    (u64::from(head) << 32) | u64::from(tail)
}

/// Appends `target`'s post to the ring of the descriptor at byte `entry`
/// of `m` (an origin's mapped control region). `Ok(false)`: the ring is
/// full, nothing was written.
pub fn push(m: &Memory<'_>, entry: usize, target: usize) -> Result<bool> {
    let words = words(m, entry)?;
    let (word, slots) = (&words[0], &words[2..]);
    loop {
        let w = word.load(Ordering::Acquire);
        let (head, tail) = split(w);
        if tail.wrapping_sub(head) as usize >= SLOTS {
            return Ok(false);
        }
        if cas(word, w, join(head, tail.wrapping_add(1))) {
            slots[tail as usize % SLOTS].store(target as u64 + 1, Ordering::Release);
            return Ok(true);
        }
    }
}

/// Takes every post written into the ring of the descriptor at byte
/// `entry` of `m` (one's own control region), oldest first, calling
/// `arrive` with the target's rank (values that are no rank below `size`
/// are dropped and counted in the returned number). Only one thread may
/// drain a ring at a time (the caller holds the window's epoch lock).
pub fn drain(m: &Memory<'_>, entry: usize, size: usize, mut arrive: impl FnMut(usize)) -> Result<usize> {
    let words = words(m, entry)?;
    let (word, slots) = (&words[0], &words[2..]);
    let mut bad = 0;
    loop {
        let (head, tail) = split(word.load(Ordering::Acquire));
        if head == tail {
            return Ok(bad);
        }
        let slot = &slots[head as usize % SLOTS];
        let v = slot.load(Ordering::Acquire);
        if v == 0 {
            // Reserved, not written yet: taken on a later look.
            return Ok(bad);
        }
        slot.store(0, Ordering::Release);
        loop {
            let w = word.load(Ordering::Acquire);
            let (_, tail) = split(w);
            if cas(word, w, join(head.wrapping_add(1), tail)) {
                break;
            }
        }
        match usize::try_from(v - 1) {
            Ok(rank) if rank < size => arrive(rank),
            _ => bad += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn posts_go_through_in_order_and_a_full_ring_refuses() {
        let m = Memory::allocate(256).unwrap();
        let mut got = Vec::new();
        for round in 0..3u32 {
            for t in 0..SLOTS {
                assert!(push(&m, 0, t + 10 * round as usize).unwrap());
            }
            assert!(!push(&m, 0, 99).unwrap(), "a full ring takes nothing");
            assert_eq!(drain(&m, 0, 100, |r| got.push(r)).unwrap(), 0);
        }
        let want: Vec<usize> = (0..3).flat_map(|r| (0..SLOTS).map(move |t| t + 10 * r)).collect();
        assert_eq!(got, want);
        assert_eq!(drain(&m, 0, 100, |_| panic!("empty")).unwrap(), 0);
    }

    #[test]
    fn counters_wrap_and_bad_values_are_dropped() {
        let m = Memory::allocate(256).unwrap();
        // Just below the wrap of both counters.
        m.store_u64(POST_WORD, join(u32::MAX - 1, u32::MAX - 1)).unwrap();
        for t in 0..SLOTS {
            assert!(push(&m, 0, t).unwrap());
        }
        assert_eq!(split(m.load_u64(POST_WORD).unwrap()), (u32::MAX - 1, 2));
        let mut got = Vec::new();
        assert_eq!(drain(&m, 0, 3, |r| got.push(r)).unwrap(), 1, "rank 3 is not below 3");
        assert_eq!(got, vec![0, 1, 2]);
        assert_eq!(split(m.load_u64(POST_WORD).unwrap()), (2, 2));
    }

    #[test]
    fn a_reserved_unwritten_slot_stops_the_drain() {
        let m = Memory::allocate(256).unwrap();
        assert!(push(&m, 0, 5).unwrap());
        // A producer that reserved the next slot and has not written it.
        m.store_u64(POST_WORD, join(0, 2)).unwrap();
        let mut got = Vec::new();
        drain(&m, 0, 10, |r| got.push(r)).unwrap();
        assert_eq!(got, vec![5]);
        m.store_u64(COMPLETE_WORD + 16, 7 + 1).unwrap();
        drain(&m, 0, 10, |r| got.push(r)).unwrap();
        assert_eq!(got, vec![5, 7]);
    }

    #[test]
    fn concurrent_producers_lose_nothing() {
        let m = std::sync::Arc::new(Memory::allocate(256).unwrap());
        let producers: Vec<_> = (0..3)
            .map(|p| {
                let m = m.clone();
                std::thread::spawn(move || {
                    let mut sent = 0;
                    while sent < 1000 {
                        if push(&m, 0, p).unwrap() {
                            sent += 1;
                        } else {
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        let mut counts = [0usize; 3];
        while counts.iter().sum::<usize>() < 3000 {
            drain(&m, 0, 3, |r| counts[r] += 1).unwrap();
            std::thread::yield_now();
        }
        for p in producers {
            p.join().unwrap();
        }
        assert_eq!(counts, [1000; 3]);
    }
}
