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
//! | 16–19 | `fi_op` (`FI_CSWAP` for compare-and-swap) |
//! | 20–23 | `fi_datatype` |
//! | 24–27 | element count |
//! | 28–31 | flags: bit 0 = fetch (the reply carries the previous values) |
//! | 32– | operands: `count` elements; none for `FI_ATOMIC_READ`; compare then swap for `FI_CSWAP` |
//!
//! The reply payload is empty (an acknowledgement) or, when fetching, the
//! `count` previous values. Every field is validated before memory is
//! touched; a refused request gets an error reply naming the reason.

use std::sync::Arc;

use libfabric_sys as fi;

use crate::api::op::AnyOp;
use crate::transport::am::{Handler, MAX_PAYLOAD};
use crate::transport::cpu_atomic::{self, element_size};
use crate::transport::exposed::ExposedTable;
use crate::transport::AtomicOp;

/// Bytes of the request fields before the operands.
pub const REQUEST_BYTES: usize = 32;
/// Largest operand (and fetched-result) bytes of one segment: a multiple of
/// every element size, so segments never split an element.
pub const SEGMENT_BYTES: usize = (MAX_PAYLOAD - REQUEST_BYTES) / 8 * 8;

/// Bit of `op` in a window's software-path mask (`AnyOp::ALL` order, then
/// compare-and-swap); `None` for values that are no accumulate operation.
pub fn op_bit(op: u32) -> Option<u32> {
    if op == fi::FI_CSWAP {
        return Some(AnyOp::ALL.len() as u32);
    }
    AnyOp::ALL
        .iter()
        .position(|o| o.fi_op() == op)
        .map(|i| i as u32)
}

/// The check every handler applying a peer's operation makes: the window
/// (elements of fi_datatype `held`, software-path mask `mask`) may apply
/// `op` on `datatype` by CPU atomics. Bit 63 of a mask is no operation's
/// (the operation table uses it for batched puts).
pub fn check_software_op(held: u32, datatype: u32, op: u32, mask: u64) -> Result<(), String> {
    if datatype != held {
        return Err(format!(
            "the window holds fi_datatype {held}, the message fi_datatype {datatype}"
        ));
    }
    let bit = op_bit(op).unwrap_or(u32::MAX);
    if bit >= 63 || mask & (1u64 << bit) == 0 {
        return Err(format!(
            "the window runs fi_op {op} on the hardware path here; a software \
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
    /// `fi_op`, or `FI_CSWAP`.
    pub op: u32,
    /// `fi_datatype`.
    pub datatype: u32,
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
        m.extend_from_slice(&self.op.to_le_bytes());
        m.extend_from_slice(&self.datatype.to_le_bytes());
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
        let r = Request {
            window: w64(0),
            offset: w64(8),
            op: w32(16),
            datatype: w32(20),
            count: w32(24),
            fetch: w32(28) == 1,
            data: &p[REQUEST_BYTES..],
        };
        if w32(28) > 1 {
            return Err(format!("unknown accumulate flags {:#x}", w32(28)));
        }
        let size = element_size(r.datatype)
            .ok_or_else(|| format!("unknown fi_datatype {}", r.datatype))?;
        if op_bit(r.op).is_none() {
            return Err(format!("unknown fi_op {}", r.op));
        }
        let count = r.count as usize;
        if count == 0 || count.saturating_mul(size) > SEGMENT_BYTES {
            return Err(format!(
                "{count} elements of {size} bytes: a segment holds 1 to {} elements",
                SEGMENT_BYTES / size
            ));
        }
        let operands = match r.op {
            fi::FI_ATOMIC_READ => 0,
            fi::FI_CSWAP if count == 1 => 2 * size,
            fi::FI_CSWAP => return Err(format!("compare-and-swap of {count} elements")),
            _ => count * size,
        };
        if r.data.len() != operands {
            return Err(format!(
                "{} operand bytes for fi_op {} on {count} elements of {size} bytes",
                r.data.len(),
                r.op
            ));
        }
        if !r.fetch && matches!(r.op, fi::FI_ATOMIC_READ | fi::FI_CSWAP) {
            return Err(format!("fi_op {} must fetch", r.op));
        }
        Ok(r)
    }
}

/// Applies accumulate requests to exposed windows.
pub struct AccumulateHandler {
    /// Windows open for software accumulates.
    pub table: Arc<ExposedTable>,
}

impl Handler for AccumulateHandler {
    fn handle(
        &self,
        from: usize,
        payload: &[u8],
        reply: Option<&mut [u8]>,
    ) -> Result<usize, String> {
        let reply = reply.ok_or("software accumulates are requests")?;
        let r = Request::decode(payload)?;
        let id = r.window;
        let applied = self.table.with(id, |mem, datatype, software| {
            check_software_op(datatype, r.datatype, r.op, software)
                .map_err(|m| format!("window {id}, accumulate from rank {from}: {m}"))?;
            let offset = usize::try_from(r.offset).map_err(|_| "offset overflows".to_string())?;
            let size = element_size(datatype).unwrap_or(1);
            let bytes = r.count as usize * size;
            let out = reply
                .get_mut(..bytes)
                .ok_or_else(|| format!("a reply of {bytes} bytes does not fit"))?;
            let done = if r.op == fi::FI_CSWAP {
                let (cmp, swap) = r.data.split_at(size);
                cpu_atomic::compare_swap(mem, offset, datatype, cmp, swap, out)
            } else {
                let what = AtomicOp {
                    op: r.op,
                    datatype,
                    count: r.count as usize,
                };
                cpu_atomic::accumulate(mem, offset, what, r.data, r.fetch.then_some(out))
            };
            done.map_err(|e| format!("window {id}, request from rank {from}: {e}"))?;
            Ok(if r.fetch { bytes } else { 0 })
        });
        applied.unwrap_or_else(|| {
            Err(format!(
                "window {id} is not open for software accumulates here \
                 (not created, freed, or on the hardware path)"
            ))
        })
    }
}

#[cfg(test)]
mod tests;
