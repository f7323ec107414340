//! The attachment table of a dynamic window (`Window::create_dynamic`).
//!
//! A dynamic window starts with no memory; its owner attaches and detaches
//! regions at run time. Peers address attached memory by absolute address,
//! so they must learn where each region is registered. MPI implementations
//! either broadcast every attach (O(P) messages per attach) or, like this
//! one, let peers look the address up when they need it: the owner keeps a
//! table of its attached regions in registered memory, published through the
//! window descriptor (base, length, key of the *table*), and a peer that
//! misses in its bounded cache reads the whole table with one RMA read and
//! keeps a copy (see `Window::create_dynamic`). Attach and detach send nothing.
//!
//! Table layout: `ONESIDED_MAX_ATTACH` entries of four little-endian `u64`:
//! `address` (the region's virtual address, what peers pass as displacement),
//! `length` in bytes (0 = free entry), `key` (the registration's remote key)
//! and `check` (XOR of the three with a constant and the entry index, so a
//! torn entry, read while the owner rewrote it, fails and is retried). The
//! owner writes an entry's check word last and clears it first.

use crate::error::{Error, Result};
use crate::transport::Memory;

/// Bytes per table entry.
pub const ENTRY: usize = 32;
const SALT: u64 = 0x6174_7461_6368_6564; // "attached"

/// One attached region as peers see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    /// Virtual address of the first byte (the displacement peers use).
    pub addr: u64,
    /// Length in bytes (never 0 for a live region).
    pub len: u64,
    /// Remote key of its registration.
    pub key: u64,
}

impl Region {
    fn check(&self, index: usize) -> u64 {
        self.addr ^ self.len ^ self.key ^ SALT ^ index as u64
    }

    /// Whether `[addr, addr + n)` lies inside this region.
    pub fn contains(&self, addr: u64, n: u64) -> bool {
        addr >= self.addr
            && addr
                .checked_add(n)
                .is_some_and(|end| end <= self.addr.saturating_add(self.len))
    }
}

/// Writes `r` into entry `index` of our own table (check word last).
pub fn publish(table: &Memory<'_>, index: usize, r: &Region) -> Result<()> {
    let off = index * ENTRY;
    table.store_u64(off + 24, 0)?;
    table.store_u64(off, r.addr)?;
    table.store_u64(off + 8, r.len)?;
    table.store_u64(off + 16, r.key)?;
    table.store_u64(off + 24, r.check(index))
}

/// Clears entry `index` of our own table (check word first).
pub fn retract(table: &Memory<'_>, index: usize) -> Result<()> {
    let off = index * ENTRY;
    table.store_u64(off + 24, 0)?;
    table.store_u64(off + 8, 0)?;
    table.store_u64(off, 0)?;
    table.store_u64(off + 16, 0)
}

/// Whether entry `index` of our own table is free.
pub fn entry_free(table: &Memory<'_>, index: usize) -> Result<bool> {
    Ok(table.load_u64(index * ENTRY + 8)? == 0)
}

/// Why a table read from a peer could not be used as it is.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded {
    /// Every entry is consistent: the live regions.
    Regions(Vec<Region>),
    /// An entry was being rewritten while we read (read again).
    Torn,
}

/// Decodes a table read from rank `peer`. Every field is validated before
/// use: a live entry must pass its check, have a non-zero length, not wrap
/// around the address space, and not overlap another live entry.
pub fn decode(bytes: &[u8], peer: usize, window: u64) -> Result<Decoded> {
    if bytes.len() % ENTRY != 0 {
        return Err(Error::Protocol {
            peer: format!("rank {peer}"),
            message: format!("window {window}: attachment table of {} bytes", bytes.len()),
        });
    }
    let word = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&bytes[i..i + 8]);
        u64::from_le_bytes(b)
    };
    let mut regions: Vec<Region> = Vec::new();
    for index in 0..bytes.len() / ENTRY {
        let off = index * ENTRY;
        let r = Region {
            addr: word(off),
            len: word(off + 8),
            key: word(off + 16),
        };
        let check = word(off + 24);
        if check == 0 && r.len == 0 {
            continue; // free
        }
        if check != r.check(index) || r.len == 0 {
            return Ok(Decoded::Torn);
        }
        let bad = |message: String| Error::Protocol {
            peer: format!("rank {peer}"),
            message: format!("window {window}: attachment entry {index}: {message}"),
        };
        if r.addr.checked_add(r.len).is_none() {
            return Err(bad(format!(
                "region at {:#x} of {} bytes wraps around",
                r.addr, r.len
            )));
        }
        if let Some(o) = regions
            .iter()
            .find(|o| r.addr < o.addr + o.len && o.addr < r.addr + r.len)
        {
            return Err(bad(format!(
                "region at {:#x} overlaps the one at {:#x}",
                r.addr, o.addr
            )));
        }
        regions.push(r);
    }
    Ok(Decoded::Regions(regions))
}

/// The region of `regions` holding `[addr, addr + n)`.
pub fn find(regions: &[Region], addr: u64, n: u64) -> Option<Region> {
    regions.iter().copied().find(|r| r.contains(addr, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(entries: usize) -> Memory<'static> {
        Memory::allocate(entries * ENTRY).unwrap()
    }

    fn read_all(t: &Memory<'_>, entries: usize) -> Vec<u8> {
        let mut b = vec![0u8; entries * ENTRY];
        t.read(0, &mut b).unwrap();
        b
    }

    #[test]
    fn publish_find_retract() {
        let t = table(4);
        let a = Region {
            addr: 0x1000,
            len: 64,
            key: 7,
        };
        let b = Region {
            addr: 0x9000,
            len: 8,
            key: 9,
        };
        publish(&t, 0, &a).unwrap();
        publish(&t, 2, &b).unwrap();
        assert!(!entry_free(&t, 0).unwrap() && entry_free(&t, 1).unwrap());
        let Decoded::Regions(rs) = decode(&read_all(&t, 4), 1, 3).unwrap() else {
            panic!("torn")
        };
        assert_eq!(rs, vec![a, b]);
        assert_eq!(find(&rs, 0x1000, 64), Some(a));
        assert_eq!(find(&rs, 0x1038, 8), Some(a));
        assert_eq!(find(&rs, 0x1038, 9), None, "straddles the end");
        assert_eq!(find(&rs, 0xfff, 2), None, "starts before");
        assert_eq!(find(&rs, u64::MAX, 2), None, "wraps");
        retract(&t, 0).unwrap();
        let Decoded::Regions(rs) = decode(&read_all(&t, 4), 1, 3).unwrap() else {
            panic!("torn")
        };
        assert_eq!(rs, vec![b]);
    }

    #[test]
    fn torn_and_hostile_entries() {
        let t = table(2);
        let a = Region {
            addr: 0x1000,
            len: 64,
            key: 7,
        };
        publish(&t, 0, &a).unwrap();
        let mut bytes = read_all(&t, 2);
        bytes[8] ^= 1; // length changed under the reader
        assert_eq!(decode(&bytes, 1, 3).unwrap(), Decoded::Torn);
        // Same region in two entries: consistent checks, but overlapping.
        publish(&t, 1, &a).unwrap();
        assert!(decode(&read_all(&t, 2), 1, 3).is_err());
        // A wrapping region with a valid check word is rejected, not used.
        let w = Region {
            addr: u64::MAX - 4,
            len: 64,
            key: 1,
        };
        publish(&t, 1, &w).unwrap();
        let e = decode(&read_all(&t, 2), 1, 3).unwrap_err().to_string();
        assert!(e.contains("wraps") && e.contains("rank 1"), "{e}");
        assert!(decode(&[0u8; 33], 1, 3).is_err(), "bad table length");
    }
}
