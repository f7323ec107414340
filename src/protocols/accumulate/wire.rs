//! The software accumulate path on the wire: the request an origin sends
//! (one per segment) and the handler that applies it at the target with CPU
//! atomics (`transport::cpu_atomic`), element by element.
//!
//! Request payload (after the active-message header), little-endian:
//!
//! | bytes | field |
//! |---|---|
//! | 0–7 | window id |
//! | 8–15 | byte offset in the target window |
//! | 16–19 | operation code (`transport::AtomicOp`, `Cswap` for compare-and-swap) |
//! | 20–23 | datatype code (`transport::Datatype`) |
//! | 24–27 | element count |
//! | 28–31 | flags: bit 0 = fetch (the reply carries the previous values) |
//! | 32– | operands: `count` elements; none for `Read`; compare then swap for `Cswap` |
//!
//! The reply payload is empty (an acknowledgement) or, when fetching, the
//! `count` previous values. Every field is validated before memory is
//! touched; a refused request gets an error reply naming the reason.

use crate::transport::am::MAX_PAYLOAD;
use crate::transport::{AtomicOp, Datatype};

/// Bytes of the request fields before the operands.
pub const REQUEST_BYTES: usize = 32;
/// Largest operand (and fetched-result) bytes of one segment: a multiple of
/// every element size, so segments never split an element.
pub const SEGMENT_BYTES: usize = (MAX_PAYLOAD - REQUEST_BYTES) / 8 * 8;

/// Bit of `op` in a window's software-path mask: its code (`Sum` = 0 ...
/// `Cswap` = 12). Bit 63 is no operation's (the operation table uses it
/// for batched puts).
pub fn op_bit(op: AtomicOp) -> u32 {
    u32::from(op.code())
}

/// The check every handler applying a peer's operation makes: the window
/// (elements of `held`, software-path mask `mask`) may apply `op` on
/// `datatype` by CPU atomics.
pub fn check_software_op(
    held: Datatype,
    datatype: Datatype,
    op: AtomicOp,
    mask: u64,
) -> Result<(), String> {
    if datatype != held {
        return Err(format!(
            "the window holds {held} elements, the message {datatype}"
        ));
    }
    if mask & (1u64 << op_bit(op)) == 0 {
        return Err(format!(
            "the window runs {op} on the hardware path here; a software \
             update would not be atomic with it"
        ));
    }
    Ok(())
}

/// One segment of a software accumulate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request<'a> {
    /// Window id.
    pub window: u64,
    /// Byte offset in the target window.
    pub offset: u64,
    /// The operation (`Cswap` for compare-and-swap).
    pub op: AtomicOp,
    /// The element type.
    pub datatype: Datatype,
    /// Elements.
    pub count: u32,
    /// Whether the reply carries the previous values.
    pub fetch: bool,
    /// Operands.
    pub data: &'a [u8],
}

impl<'a> Request<'a> {
    /// The payload bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut m = Vec::with_capacity(REQUEST_BYTES + self.data.len());
        m.extend_from_slice(&self.window.to_le_bytes());
        m.extend_from_slice(&self.offset.to_le_bytes());
        m.extend_from_slice(&u32::from(self.op.code()).to_le_bytes());
        m.extend_from_slice(&u32::from(self.datatype.code()).to_le_bytes());
        m.extend_from_slice(&self.count.to_le_bytes());
        m.extend_from_slice(&(self.fetch as u32).to_le_bytes());
        m.extend_from_slice(self.data);
        m
    }

    /// Decodes and checks a payload: known op and type, a count that fits
    /// one segment, operand bytes that match the op and count, and the
    /// fetch flag where the op needs it.
    pub fn decode(p: &'a [u8]) -> Result<Request<'a>, String> {
        if p.len() < REQUEST_BYTES {
            return Err(format!(
                "accumulate request of {} bytes is shorter than its {REQUEST_BYTES}-byte fields",
                p.len()
            ));
        }
        let w32 = |i: usize| u32::from_le_bytes([p[i], p[i + 1], p[i + 2], p[i + 3]]);
        let w64 = |i: usize| u64::from(w32(i)) | (u64::from(w32(i + 4)) << 32);
        let op = AtomicOp::from_code(w32(16).into())
            .ok_or_else(|| format!("unknown operation code {}", w32(16)))?;
        let datatype = Datatype::from_code(w32(20).into())
            .ok_or_else(|| format!("unknown datatype code {}", w32(20)))?;
        let r = Request {
            window: w64(0),
            offset: w64(8),
            op,
            datatype,
            count: w32(24),
            fetch: w32(28) == 1,
            data: &p[REQUEST_BYTES..],
        };
        if w32(28) > 1 {
            return Err(format!("unknown accumulate flags {:#x}", w32(28)));
        }
        if !op.defined_on(datatype) {
            return Err(format!("{op} is not defined on {datatype}"));
        }
        let size = datatype.size();
        let count = r.count as usize;
        if count == 0 || count.saturating_mul(size) > SEGMENT_BYTES {
            return Err(format!(
                "{count} elements of {size} bytes: a segment holds 1 to {} elements",
                SEGMENT_BYTES / size
            ));
        }
        let operands = match r.op {
            AtomicOp::Read => 0,
            AtomicOp::Cswap if count == 1 => 2 * size,
            AtomicOp::Cswap => return Err(format!("compare-and-swap of {count} elements")),
            _ => count * size,
        };
        if r.data.len() != operands {
            return Err(format!(
                "{} operand bytes for {} on {count} elements of {size} bytes",
                r.data.len(),
                r.op
            ));
        }
        if !r.fetch && matches!(r.op, AtomicOp::Read | AtomicOp::Cswap) {
            return Err(format!("{} must fetch", r.op));
        }
        Ok(r)
    }
}
