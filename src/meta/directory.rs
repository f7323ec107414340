//! The control region each process registers once, and the window
//! descriptors in it.
//!
//! Layout (all fields little-endian `u64`, the region is 8-byte aligned):
//!
//! | byte offset | content |
//! |---|---|
//! | 0 | magic `ONESIDE1` (also the target of ordered flush reads) |
//! | 8 + 8·k, k < 64 | barrier flag of dissemination round k |
//! | 520 + 64·(2k + e mod 2), k < 32 | reduction slot of allreduce round k, epoch e (`meta::uniform`) |
//! | 4616 + 128·s | descriptor of directory slot s: the world's windows for s < W = `ONESIDED_MAX_WINDOWS`, then group g's windows at W + g·GW … W + (g + 1)·GW − 1 (GW = `ONESIDED_GROUP_WINDOWS`, g < G = `ONESIDED_MAX_GROUPS`) |
//! | 4616 + 128·(W + G·GW) + 4608·g | group g's barrier flags (512 bytes) and reduction slots (4096 bytes), laid out as the world's at 8 and 520 |
//!
//! A descriptor is sixteen words. Words 0–7 describe the window and never
//! change while it lives: `window id` (0 = empty), `base`, `length in
//! bytes`, `displacement unit`, `key`, `element type tag`, `flags` (per-window
//! decisions every rank must agree on, see [`Descriptor::flags`]) and `aux`
//! (a value owned by the feature that sets a flag). Word 8, `check`, is the
//! XOR of words 0–7 with a constant, so a torn or stale read is detected.
//! Words 9–15 are *sync words*, changed by peers' atomics at any time and
//! therefore outside the check: 9 is the window's lock word
//! (`Window::lock`), 10 and 11 are the post and complete counters of
//! post/start/complete/wait, 12–15 are reserved (zero). The owner writes `id`
//! last when creating and clears it first when freeing.

use crate::error::{Error, Result};
use crate::transport::Memory;

/// Magic value of word 0.
pub const MAGIC: u64 = u64::from_le_bytes(*b"ONESIDE1");
/// Offset of the barrier flags.
pub const BARRIER_OFFSET: usize = 8;
/// Number of dissemination rounds supported (2^64 processes).
pub const BARRIER_ROUNDS: usize = 64;
/// Offset of the reduction slots of window creation's allreduce
/// (`meta::uniform`): for each round k < `REDUCE_ROUNDS` and each parity
/// of the creation's epoch, `REDUCE_SLOT_BYTES` bytes = `REDUCE_WORDS`
/// payload words followed by the slot's flag word.
pub const REDUCE_OFFSET: usize = BARRIER_OFFSET + 8 * BARRIER_ROUNDS;
/// Dissemination rounds of the allreduce (2^32 processes).
pub const REDUCE_ROUNDS: usize = 32;
/// Payload words per reduction slot.
pub const REDUCE_WORDS: usize = 7;
/// Bytes per reduction slot (payload, then the flag word).
pub const REDUCE_SLOT_BYTES: usize = 8 * (REDUCE_WORDS + 1);
/// Offset of the first descriptor.
pub const DIR_OFFSET: usize = REDUCE_OFFSET + 2 * REDUCE_ROUNDS * REDUCE_SLOT_BYTES;
/// Bytes per descriptor.
pub const ENTRY_BYTES: usize = 128;
/// Offset of the check word (word 8) inside a descriptor.
const CHECK_WORD: usize = 64;
/// Offset of the first sync word (word 9): sync words are outside the check
/// word, zeroed by [`publish`] and [`retract`], then changed only by atomics.
pub const SYNC_WORDS: usize = 72;
/// Offset of the lock word (word 9) inside a descriptor (`Window::lock`).
pub const LOCK_WORD: usize = 72;
/// Offset of the post word (word 10): with every rank node-local, the head
/// and tail of the window's post ring (words 12–15 its slots,
/// `protocols::pscw::ring`); otherwise posts are active messages
/// (`protocols::pscw::target`) and the words stay zero.
pub const POST_WORD: usize = 80;
/// Offset of the complete counter (word 11): origins' `complete` adds 1 by
/// provider fetch-add; the owner's `wait` compares it with the number of
/// origins it exposed the window to.
pub const COMPLETE_WORD: usize = 88;
/// `flags` bit: a dynamic window (`Window::create_dynamic`); base, length
/// and key describe its attachment table (`meta::attach`), not memory.
/// Bits 16–23 of `flags` describe the window kind.
pub const FLAG_DYNAMIC: u64 = 1 << 16;
const CHECK_SALT: u64 = 0x9e37_79b9_7f4a_7c15;

/// Bytes of one group's barrier flags and reduction slots.
pub const GROUP_SYNC_BYTES: usize = 8 * BARRIER_ROUNDS + 2 * REDUCE_ROUNDS * REDUCE_SLOT_BYTES;

/// How many descriptors and group areas a control region holds (the same
/// on every process: from the configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Directory slots of the world's windows.
    pub windows: usize,
    /// Group slots (groups alive at once in one process).
    pub groups: usize,
    /// Directory slots of each group's windows.
    pub group_windows: usize,
}

impl Layout {
    /// Every directory slot (the world's, then each group's).
    fn slots(&self) -> usize {
        self.windows + self.groups * self.group_windows
    }

    /// Bytes of a control region.
    pub fn region_bytes(&self) -> usize {
        self.group_sync(self.groups)
    }

    /// The directory slots of the world's windows (`None`) or group `g`'s.
    pub fn dir_slots(&self, group: Option<usize>) -> std::ops::Range<usize> {
        match group {
            None => 0..self.windows,
            Some(g) => {
                let first = self.windows + g * self.group_windows;
                first..first + self.group_windows
            }
        }
    }

    /// Offset of group `g`'s area: its barrier flags, then (at
    /// `+ 8 * BARRIER_ROUNDS`) its reduction slots.
    pub fn group_sync(&self, g: usize) -> usize {
        DIR_OFFSET + self.slots() * ENTRY_BYTES + g * GROUP_SYNC_BYTES
    }

    /// Offsets of the barrier flags and of the reduction slots of the world
    /// (`None`) or of group `g`.
    pub fn sync_areas(&self, group: Option<usize>) -> (usize, usize) {
        match group {
            None => (BARRIER_OFFSET, REDUCE_OFFSET),
            Some(g) => {
                let at = self.group_sync(g);
                (at, at + 8 * BARRIER_ROUNDS)
            }
        }
    }
}

/// Byte offset of the reduction slot of `round` for epochs of `parity`
/// in the reduction area at `area` (its flag word is at `+ 8 * REDUCE_WORDS`).
pub fn reduce_offset(area: usize, round: usize, parity: u64) -> usize {
    area + (2 * round + (parity & 1) as usize) * REDUCE_SLOT_BYTES
}

/// Byte offset of descriptor `slot`.
pub fn entry_offset(slot: usize) -> usize {
    DIR_OFFSET + slot * ENTRY_BYTES
}

/// What a peer needs to reach one window of one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Descriptor {
    /// Collective window id (never 0).
    pub id: u64,
    /// Remote base address (virtual address or 0, as the provider wants).
    pub base: u64,
    /// Length in bytes.
    pub len: u64,
    /// Displacement unit in bytes (the element size).
    pub disp_unit: u64,
    /// Remote key.
    pub key: u64,
    /// Element type tag (see `Element::TAG`).
    pub tag: u64,
    /// Per-window decisions that every rank must make identically (bit
    /// assignments are owned by the features that set them; 0 = none).
    /// Checked on first access to a peer, so a disagreement is an error, not
    /// silent corruption.
    pub flags: u64,
    /// A value belonging to a feature selected in `flags` (0 = none).
    pub aux: u64,
}

impl Descriptor {
    fn check_word(&self) -> u64 {
        self.id
            ^ self.base
            ^ self.len
            ^ self.disp_unit
            ^ self.key
            ^ self.tag
            ^ self.flags
            ^ self.aux
            ^ CHECK_SALT
    }

    /// Encodes into a descriptor's `ENTRY_BYTES` bytes.
    pub fn encode(&self) -> [u8; ENTRY_BYTES] {
        let words = [
            self.id,
            self.base,
            self.len,
            self.disp_unit,
            self.key,
            self.tag,
            self.flags,
            self.aux,
            self.check_word(),
        ];
        let mut out = [0u8; ENTRY_BYTES];
        for (i, w) in words.iter().enumerate() {
            out[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
        }
        out
    }

    /// Decodes and validates the `ENTRY_BYTES` bytes read from rank `peer`, expecting window
    /// `id`. Every field is checked before anything uses it.
    pub fn decode(bytes: &[u8; ENTRY_BYTES], peer: usize, id: u64) -> Result<Descriptor> {
        let w = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[i * 8..i * 8 + 8]);
            u64::from_le_bytes(b)
        };
        let bad = |message: String| Error::Protocol {
            peer: format!("rank {peer}"),
            message,
        };
        let d = Descriptor {
            id: w(0),
            base: w(1),
            len: w(2),
            disp_unit: w(3),
            key: w(4),
            tag: w(5),
            flags: w(6),
            aux: w(7),
        };
        if d.id == 0 {
            return Err(bad(format!(
                "window {id} is not (or no longer) created there"
            )));
        }
        if d.id != id {
            return Err(bad(format!(
                "directory slot holds window {} where window {id} was expected (windows created in a different order?)",
                d.id
            )));
        }
        if w(CHECK_WORD / 8) != d.check_word() {
            return Err(bad(format!(
                "descriptor of window {id} fails its check word (torn or corrupt)"
            )));
        }
        if d.disp_unit == 0 || d.disp_unit > 16 || d.len % d.disp_unit != 0 {
            return Err(bad(format!(
                "descriptor of window {id}: displacement unit {} does not divide length {}",
                d.disp_unit, d.len
            )));
        }
        if d.base.checked_add(d.len).is_none() {
            return Err(bad(format!(
                "descriptor of window {id}: base + length overflows"
            )));
        }
        Ok(d)
    }
}

/// Publishes `d` in slot `slot` of our own control region (id word last).
pub fn publish(ctrl: &Memory<'_>, slot: usize, d: &Descriptor) -> Result<()> {
    let bytes = d.encode();
    let off = entry_offset(slot);
    ctrl.write(off + 8, &bytes[8..])?;
    ctrl.store_u64(off, d.id)
}

/// Clears slot `slot` (id word first).
pub fn retract(ctrl: &Memory<'_>, slot: usize) -> Result<()> {
    let off = entry_offset(slot);
    ctrl.store_u64(off, 0)?;
    ctrl.write(off + 8, &[0u8; ENTRY_BYTES - 8])
}

/// Whether slot `slot` of our own region is free.
pub fn slot_free(ctrl: &Memory<'_>, slot: usize) -> Result<bool> {
    Ok(ctrl.load_u64(entry_offset(slot))? == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Descriptor {
        Descriptor {
            id: 7,
            base: 0x7f00_0000_1000,
            len: 4096,
            disp_unit: 8,
            key: 42,
            tag: 3,
            flags: 5,
            aux: 11,
        }
    }

    #[test]
    fn round_trip() {
        let d = sample();
        assert_eq!(Descriptor::decode(&d.encode(), 1, 7).unwrap(), d);
    }

    #[test]
    fn rejects_wrong_id_empty_and_corruption() {
        let d = sample();
        assert!(Descriptor::decode(&d.encode(), 1, 8).is_err());
        assert!(Descriptor::decode(&[0u8; ENTRY_BYTES], 1, 7).is_err());
        for byte in 8..SYNC_WORDS {
            let mut b = d.encode();
            b[byte] ^= 0x10;
            assert!(
                Descriptor::decode(&b, 1, 7).is_err(),
                "flip at byte {byte} accepted"
            );
        }
    }

    #[test]
    fn sync_words_are_outside_the_check() {
        let d = sample();
        let mut b = d.encode();
        assert_eq!(
            &b[SYNC_WORDS..],
            &[0u8; ENTRY_BYTES - SYNC_WORDS],
            "encode zeroes the sync words"
        );
        for off in [LOCK_WORD, POST_WORD, COMPLETE_WORD] {
            b[off..off + 8].copy_from_slice(&(u64::MAX - 3).to_le_bytes());
        }
        assert_eq!(Descriptor::decode(&b, 1, 7).unwrap(), d);
    }

    #[test]
    fn rejects_bad_geometry() {
        let mut d = sample();
        d.len = 4097;
        assert!(Descriptor::decode(&d.encode(), 1, 7).is_err());
        d.len = 16;
        d.disp_unit = 0;
        assert!(Descriptor::decode(&d.encode(), 1, 7).is_err());
        d.disp_unit = 8;
        d.base = u64::MAX - 4;
        assert!(Descriptor::decode(&d.encode(), 1, 7).is_err());
    }
}
