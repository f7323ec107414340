//! The BATCH active message (kind 4): small puts and accumulates to one
//! window of one target, applied in order by the target's handler.
//!
//! Payload (after the active-message header), little-endian:
//!
//! | bytes | field |
//! |---|---|
//! | 0–7 | window id |
//! | 8–11 | number of entries (≥ 1) |
//! | 12–15 | reserved, zero |
//! | 16– | entries |
//!
//! Entry (24 bytes, then the data padded with zeros to a multiple of 8):
//!
//! | bytes | field |
//! |---|---|
//! | 0 | class: 1 put, 2 accumulate |
//! | 1–3 | reserved, zero |
//! | 4–7 | operation code (accumulate; `0xffffffff` for a put) |
//! | 8–11 | datatype code (accumulate; `0xffffffff` for a put) |
//! | 12–15 | data bytes |
//! | 16–23 | byte offset in the target window |
//!
//! A *strided put* (class 3: equal blocks at a constant stride, what a
//! vector layout makes) has 8 more bytes before its data:
//!
//! | bytes | field |
//! |---|---|
//! | 4–7 | block bytes (> 0; the data is a whole number of blocks) |
//! | 8–11 | `0xffffffff` |
//! | 24–31 | stride in bytes between the blocks' starts (≥ block bytes) |
//!
//! Block `i` of the data goes to `offset + i × stride`.
//!
//! [`decode`] checks the whole message (sizes, classes, reserved and
//! padding bytes, known op and type, data a whole number of elements)
//! before the handler touches memory; the handler then checks each entry
//! against the window (`handler.rs`).

use crate::transport::{AtomicOp, Datatype};

/// Bytes of the batch header.
pub const HEADER_BYTES: usize = 16;
/// Bytes of an entry before its data.
pub const ENTRY_BYTES: usize = 24;

/// Entry class of a put.
pub const PUT: u8 = 1;
/// Entry class of an accumulate.
pub const ACCUMULATE: u8 = 2;
/// Entry class of a strided put.
pub const STRIDED: u8 = 3;
/// Bytes of a strided put's entry before its data.
pub const STRIDED_ENTRY_BYTES: usize = ENTRY_BYTES + 8;

/// The op and datatype fields of a put.
const NONE: u32 = u32::MAX;

/// Encoded size of an entry carrying `len` data bytes.
pub fn entry_size(len: usize) -> usize {
    ENTRY_BYTES + len.div_ceil(8) * 8
}

/// Equal blocks at a constant stride (a [`STRIDED`] entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stride {
    /// Bytes of each block.
    pub block: u32,
    /// Bytes from one block's start to the next one's.
    pub stride: u64,
}

/// One operation of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    /// [`PUT`] or [`ACCUMULATE`].
    pub class: u8,
    /// The operation of an accumulate (`None` for a put).
    pub op: Option<AtomicOp>,
    /// The element type of an accumulate (`None` for a put).
    pub datatype: Option<Datatype>,
    /// Byte offset in the target window.
    pub offset: u64,
    /// The put's bytes or the accumulate's operands.
    pub data: &'a [u8],
    /// The blocks of a [`STRIDED`] put (`None` otherwise).
    pub strided: Option<Stride>,
}

impl Entry<'_> {
    /// Encoded size of the entry.
    pub fn encoded_size(&self) -> usize {
        entry_size(self.data.len()) + if self.strided.is_some() { 8 } else { 0 }
    }
}

/// Starts a batch for window `id` in `buf` (cleared first).
pub fn begin(buf: &mut Vec<u8>, id: u64) {
    buf.clear();
    buf.extend_from_slice(&id.to_le_bytes());
    buf.extend_from_slice(&[0u8; 8]);
}

/// Appends `e` to the batch in `buf` and counts it in the header.
pub fn push(buf: &mut Vec<u8>, e: &Entry<'_>) {
    let op = match e.strided {
        Some(s) => s.block,
        None => e.op.map_or(NONE, |o| o.code().into()),
    };
    let datatype = e.datatype.map_or(NONE, |d| d.code().into());
    // The fixed part in one array, the whole entry reserved once.
    let mut head = [0u8; STRIDED_ENTRY_BYTES];
    head[0] = e.class;
    head[4..8].copy_from_slice(&op.to_le_bytes());
    head[8..12].copy_from_slice(&datatype.to_le_bytes());
    head[12..16].copy_from_slice(&(e.data.len() as u32).to_le_bytes());
    head[16..24].copy_from_slice(&e.offset.to_le_bytes());
    let fixed = match e.strided {
        Some(s) => {
            head[24..32].copy_from_slice(&s.stride.to_le_bytes());
            STRIDED_ENTRY_BYTES
        }
        None => ENTRY_BYTES,
    };
    if let (ENTRY_BYTES, Ok(word)) = (fixed, <[u8; 8]>::try_from(e.data)) {
        // The common small entry (one 8-byte element): one fixed-size copy.
        head[ENTRY_BYTES..].copy_from_slice(&word);
        buf.extend_from_slice(&head);
    } else {
        let pad = (8 - e.data.len() % 8) % 8;
        buf.reserve(fixed + e.data.len() + pad);
        buf.extend_from_slice(&head[..fixed]);
        buf.extend_from_slice(e.data);
        buf.extend_from_slice(&[0u8; 8][..pad]);
    }
    if let Some(count) = buf.get_mut(8..12) {
        let n = u32::from_le_bytes([count[0], count[1], count[2], count[3]]) + 1;
        count.copy_from_slice(&n.to_le_bytes());
    }
}

fn u32_at(p: &[u8], i: usize) -> Option<u32> {
    Some(u32::from_le_bytes(p.get(i..i + 4)?.try_into().ok()?))
}

fn u64_at(p: &[u8], i: usize) -> Option<u64> {
    Some(u64::from_le_bytes(p.get(i..i + 8)?.try_into().ok()?))
}

/// Decodes and checks a whole batch: the window id and its entries.
pub fn decode(p: &[u8]) -> Result<(u64, Vec<Entry<'_>>), String> {
    let short = || format!("batch of {} bytes is truncated", p.len());
    let id = u64_at(p, 0).ok_or_else(short)?;
    let n = u32_at(p, 8).ok_or_else(short)? as usize;
    if u32_at(p, 12) != Some(0) {
        return Err("batch header: reserved bytes are not zero".into());
    }
    // Every entry takes at least ENTRY_BYTES: bounds `n` before allocating.
    if n == 0 || n > (p.len() - HEADER_BYTES) / ENTRY_BYTES {
        return Err(format!("batch of {} bytes claims {n} entries", p.len()));
    }
    let mut entries = Vec::with_capacity(n);
    let mut at = HEADER_BYTES;
    for k in 0..n {
        let head = p
            .get(at..at + ENTRY_BYTES)
            .ok_or_else(|| format!("entry {k} is truncated"))?;
        let (class, op, datatype) = (head[0], u32_at(head, 4), u32_at(head, 8));
        let (len, offset) = (u32_at(head, 12), u64_at(head, 16));
        let (op, datatype, len, offset) = match (op, datatype, len, offset) {
            (Some(a), Some(b), Some(c), Some(d)) => (a, b, c as usize, d),
            _ => return Err(format!("entry {k} is truncated")),
        };
        if head[1..4] != [0, 0, 0] {
            return Err(format!("entry {k}: reserved bytes are not zero"));
        }
        let mut strided = None;
        let (op, datatype) = match class {
            PUT if op == NONE && datatype == NONE && len > 0 => (None, None),
            STRIDED if datatype == NONE && op > 0 && len > 0 && len % op as usize == 0 => {
                let stride = u64_at(p, at + ENTRY_BYTES)
                    .ok_or_else(|| format!("entry {k}: strided put is truncated"))?;
                if stride < u64::from(op) {
                    return Err(format!(
                        "entry {k}: stride {stride} is shorter than the {op}-byte blocks"
                    ));
                }
                strided = Some(Stride { block: op, stride });
                (None, None)
            }
            STRIDED => {
                return Err(format!(
                    "entry {k}: strided put with block {op}, type {datatype}, {len} bytes"
                ))
            }
            PUT => {
                return Err(format!(
                    "entry {k}: put with op {op}, type {datatype}, {len} bytes"
                ))
            }
            ACCUMULATE => {
                let dt = Datatype::from_code(datatype.into())
                    .ok_or_else(|| format!("entry {k}: unknown datatype code {datatype}"))?;
                let op = AtomicOp::from_code(op.into())
                    .ok_or_else(|| format!("entry {k}: unknown operation code {op}"))?;
                if matches!(op, AtomicOp::Cswap | AtomicOp::Read) {
                    return Err(format!("entry {k}: {op} is no update"));
                }
                if !op.defined_on(dt) {
                    return Err(format!("entry {k}: {op} is not defined on {dt}"));
                }
                let size = dt.size();
                if len == 0 || len % size != 0 {
                    return Err(format!(
                        "entry {k}: {len} bytes are no whole number of {size}-byte elements"
                    ));
                }
                (Some(op), Some(dt))
            }
            c => return Err(format!("entry {k}: unknown class {c}")),
        };
        let head_bytes = if strided.is_some() {
            STRIDED_ENTRY_BYTES
        } else {
            ENTRY_BYTES
        };
        let end = at + head_bytes + len.div_ceil(8) * 8;
        let body = p
            .get(at + head_bytes..end)
            .ok_or_else(|| format!("entry {k}: {len} data bytes run past the batch"))?;
        let (data, pad) = body.split_at(len);
        if pad.iter().any(|b| *b != 0) {
            return Err(format!("entry {k}: padding bytes are not zero"));
        }
        entries.push(Entry {
            class,
            op,
            datatype,
            offset,
            data,
            strided,
        });
        at = end;
    }
    if at != p.len() {
        return Err(format!(
            "batch of {} bytes has {} bytes after its {n} entries",
            p.len(),
            p.len() - at
        ));
    }
    Ok((id, entries))
}

/// A strided get (active-message kind `GET`, a request): `count` blocks of
/// `block` bytes, `stride` bytes apart from byte `offset` of window
/// `window`, answered with the blocks packed in order.
///
/// Payload (after the active-message header), little-endian, 32 bytes:
///
/// | bytes | field |
/// |---|---|
/// | 0–7 | window id |
/// | 8–15 | byte offset of the first block |
/// | 16–23 | stride in bytes (≥ block bytes) |
/// | 24–27 | block bytes (> 0) |
/// | 28–31 | number of blocks (> 0; all of them fit one reply) |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GetRequest {
    /// The window read.
    pub window: u64,
    /// Byte offset of the first block in the target window.
    pub offset: u64,
    /// The blocks' size and distance.
    pub stride: Stride,
    /// Number of blocks.
    pub count: u32,
}

/// Bytes of a [`GetRequest`].
pub const GET_REQUEST_BYTES: usize = 32;

impl GetRequest {
    /// Bytes of the reply (the blocks packed).
    pub fn reply_bytes(&self) -> usize {
        self.stride.block as usize * self.count as usize
    }

    /// The request's payload.
    pub fn encode(&self) -> [u8; GET_REQUEST_BYTES] {
        let mut b = [0u8; GET_REQUEST_BYTES];
        b[0..8].copy_from_slice(&self.window.to_le_bytes());
        b[8..16].copy_from_slice(&self.offset.to_le_bytes());
        b[16..24].copy_from_slice(&self.stride.stride.to_le_bytes());
        b[24..28].copy_from_slice(&self.stride.block.to_le_bytes());
        b[28..32].copy_from_slice(&self.count.to_le_bytes());
        b
    }

    /// Decodes and checks a request whose reply may take `room` bytes.
    pub fn decode(p: &[u8], room: usize) -> Result<GetRequest, String> {
        if p.len() != GET_REQUEST_BYTES {
            return Err(format!(
                "strided get of {} bytes (expected {GET_REQUEST_BYTES})",
                p.len()
            ));
        }
        let field = |i| u64_at(p, i).unwrap_or_default();
        let word = |i| u32_at(p, i).unwrap_or_default();
        let r = GetRequest {
            window: field(0),
            offset: field(8),
            stride: Stride {
                stride: field(16),
                block: word(24),
            },
            count: word(28),
        };
        if r.stride.block == 0 || r.count == 0 {
            return Err("strided get of no bytes".into());
        }
        if r.stride.stride < u64::from(r.stride.block) {
            return Err(format!(
                "strided get: stride {} is shorter than the {}-byte blocks",
                r.stride.stride, r.stride.block
            ));
        }
        if r.reply_bytes() > room {
            return Err(format!(
                "strided get of {} blocks of {} bytes does not fit a {room}-byte reply",
                r.count, r.stride.block
            ));
        }
        Ok(r)
    }

    /// The byte after the last one read (`None` on overflow).
    pub fn end(&self) -> Option<u64> {
        self.stride
            .stride
            .checked_mul(u64::from(self.count) - 1)
            .and_then(|a| a.checked_add(self.offset))
            .and_then(|a| a.checked_add(u64::from(self.stride.block)))
    }
}

#[cfg(test)]
mod fuzz {
    use super::*;

    #[test]
    fn fuzz_batch() {
        let mut m = Vec::new();
        begin(&mut m, 6);
        push(
            &mut m,
            &Entry {
                class: PUT,
                op: None,
                datatype: None,
                offset: 16,
                data: &[1, 2, 3],
                strided: None,
            },
        );
        push(
            &mut m,
            &Entry {
                class: ACCUMULATE,
                op: Some(AtomicOp::Sum),
                datatype: Some(Datatype::I64),
                offset: 64,
                data: &[5; 16],
                strided: None,
            },
        );
        push(
            &mut m,
            &Entry {
                class: STRIDED,
                op: None,
                datatype: None,
                offset: 8,
                data: &[7; 24],
                strided: Some(Stride {
                    block: 8,
                    stride: 40,
                }),
            },
        );
        crate::fuzz::run("batch", &[m], 400, &|b| decode(b).is_ok());
    }

    #[test]
    fn fuzz_strided_get() {
        let r = GetRequest {
            window: 3,
            offset: 16,
            stride: Stride {
                block: 8,
                stride: 64,
            },
            count: 9,
        };
        crate::fuzz::run("strided get", &[r.encode().to_vec()], 64, &|b| {
            GetRequest::decode(b, 4072).is_ok_and(|r| r.reply_bytes() <= 4072)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Vec<u8> {
        let mut b = Vec::new();
        begin(&mut b, 7);
        push(
            &mut b,
            &Entry {
                class: PUT,
                op: None,
                datatype: None,
                offset: 3,
                data: &[1, 2, 3],
                strided: None,
            },
        );
        let data = 5i64.to_le_bytes();
        let sum = AtomicOp::Sum;
        let ty = Datatype::I64;
        push(
            &mut b,
            &Entry {
                class: ACCUMULATE,
                op: Some(sum),
                datatype: Some(ty),
                offset: 8,
                data: &data,
                strided: None,
            },
        );
        b
    }

    #[test]
    fn round_trip() {
        let b = sample();
        assert_eq!(b.len(), HEADER_BYTES + entry_size(3) + entry_size(8));
        let (id, e) = decode(&b).unwrap();
        assert_eq!(
            (id, e.len(), e[0].data, e[1].offset),
            (7, 2, &[1u8, 2, 3][..], 8)
        );
    }

    #[test]
    fn strided_round_trip_and_refusals() {
        let strided = |block: u32, stride: u64, data: &'static [u8]| {
            let mut b = Vec::new();
            begin(&mut b, 3);
            let e = Entry {
                class: STRIDED,
                op: None,
                datatype: None,
                offset: 16,
                data,
                strided: Some(Stride { block, stride }),
            };
            push(&mut b, &e);
            assert_eq!(b.len(), HEADER_BYTES + e.encoded_size());
            b
        };
        let b = strided(4, 12, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        let (_, e) = decode(&b).unwrap();
        assert_eq!(e[0].strided, Some(Stride { block: 4, stride: 12 }));
        assert_eq!(e[0].data.len(), 12);
        // Overlapping blocks, a partial block, an empty block: refused.
        assert!(decode(&strided(4, 3, &[0; 8])).is_err());
        assert!(decode(&strided(4, 8, &[0; 6])).is_err());
        assert!(decode(&strided(0, 8, &[0; 8])).is_err());
    }

    #[test]
    fn every_flipped_byte_is_caught_or_harmless() {
        let b = sample();
        for i in 0..b.len() {
            let mut m = b.clone();
            m[i] ^= 0x80;
            // Offsets, window id and data may legitimately change; the rest
            // must be refused.
            let free = (0..8).contains(&i)
                || (HEADER_BYTES + 16..HEADER_BYTES + 24).contains(&i)
                || (HEADER_BYTES + 24..HEADER_BYTES + 27).contains(&i)
                || (HEADER_BYTES + 32 + 16..HEADER_BYTES + 32 + 32).contains(&i)
                || i >= HEADER_BYTES + 64;
            assert_eq!(decode(&m).is_ok(), free, "byte {i}");
        }
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = decode(&bytes);
        }
    }

    #[test]
    fn strided_get_requests_round_trip_and_hostile_ones_are_refused() {
        let r = GetRequest {
            window: 7,
            offset: 24,
            stride: Stride {
                block: 8,
                stride: 8192,
            },
            count: 500,
        };
        assert_eq!(GetRequest::decode(&r.encode(), 4072), Ok(r));
        assert_eq!(r.end(), Some(24 + 8192 * 499 + 8));
        // Too long for the reply, truncated, zero-sized, short stride.
        assert!(GetRequest::decode(&r.encode(), 3999).is_err());
        assert!(GetRequest::decode(&r.encode()[..31], 4072).is_err());
        let mut z = r;
        z.count = 0;
        assert!(GetRequest::decode(&z.encode(), 4072).is_err());
        let mut s = r;
        s.stride.stride = 4;
        assert!(GetRequest::decode(&s.encode(), 4072).is_err());
        // An overflowing extent has no end (the handler refuses it).
        let mut o = r;
        o.stride.stride = u64::MAX / 2;
        assert_eq!(o.end(), None);
    }
}
