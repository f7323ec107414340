//! The software lock path on the wire: active messages of kind
//! `am::kind::LOCK`, and the handler that serves them from the window's
//! [`LockQueue`](super::lock_queue::LockQueue).
//!
//! Request payload (after the active-message header), little-endian:
//!
//! | bytes | field |
//! |---|---|
//! | 0 | sub-op: 1 acquire, 2 poll, 3 release, 4 cancel |
//! | 1 | lock kind: 0 shared, 1 exclusive |
//! | 2 | operation carried (acquire only): 0 none, 1 put, 2 accumulate |
//! | 3 | flags: bit 0 = release once the operation is applied (lock-op-unlock) |
//! | 4–7 | reserved, zero |
//! | 8–15 | window id |
//! | 16–23 | ticket (poll, cancel), else 0 |
//! | 24–31 | byte offset of the operation in the target window, else 0 |
//! | 32–35 | operation code (accumulate), else 0 |
//! | 36–39 | datatype code (accumulate), else 0 |
//! | 40– | operation bytes (put data or accumulate operands) |
//!
//! Reply payload, 16 bytes: byte 0 status (1 granted — the carried
//! operation was applied and, with the release flag, the lock given back —,
//! 2 queued, 3 busy, 4 done), bytes 8–15 the ticket of a queued request.
//! Every field is checked before any state or memory is touched; a refused
//! request gets an error reply and is counted as a protocol error.

use crate::epoch::LockType;
use crate::transport::am::MAX_PAYLOAD;
use crate::transport::{AtomicOp, Datatype};

/// Bytes of the request fields before the operation bytes.
pub const FIELDS: usize = 40;
/// Largest operation carried in one message.
pub const MAX_OP_BYTES: usize = MAX_PAYLOAD - FIELDS;
/// Bytes of a reply.
pub const REPLY_BYTES: usize = 16;

/// Sub-operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubOp {
    /// Take the lock (maybe with an operation, maybe releasing after it).
    Acquire = 1,
    /// Ask whether a queued request was granted.
    Poll = 2,
    /// Give the lock back.
    Release = 3,
    /// Withdraw a queued request.
    Cancel = 4,
}

/// An operation carried by an acquire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carried<'a> {
    /// Nothing.
    None,
    /// Copy `data` to byte `offset`.
    Put { offset: u64, data: &'a [u8] },
    /// Apply `op` with `data` (elements of `datatype`) at byte `offset`.
    Accumulate {
        offset: u64,
        op: AtomicOp,
        datatype: Datatype,
        data: &'a [u8],
    },
}

/// One request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockMsg<'a> {
    /// What to do.
    pub sub: SubOp,
    /// Lock kind.
    pub kind: LockType,
    /// Release after the carried operation (acquire only).
    pub release: bool,
    /// Window id.
    pub window: u64,
    /// Ticket of a queued request (poll, cancel).
    pub ticket: u64,
    /// Operation (acquire only).
    pub op: Carried<'a>,
}

/// Reply status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Held now (operation applied; released again with the release flag).
    Granted,
    /// Queued with this ticket.
    Queued(u64),
    /// The target's ring is full: nothing recorded.
    Busy,
    /// Release or cancel done.
    Done,
}

impl Status {
    /// The reply bytes.
    pub fn encode(self) -> [u8; REPLY_BYTES] {
        let mut r = [0u8; REPLY_BYTES];
        let (code, ticket) = match self {
            Status::Granted => (1, 0),
            Status::Queued(t) => (2, t),
            Status::Busy => (3, 0),
            Status::Done => (4, 0),
        };
        r[0] = code;
        r[8..].copy_from_slice(&u64::to_le_bytes(ticket));
        r
    }

    /// Decodes a reply.
    pub fn decode(b: &[u8]) -> Result<Status, String> {
        if b.len() != REPLY_BYTES || b[1..8] != [0; 7] {
            return Err(format!("lock reply of {} bytes is malformed", b.len()));
        }
        let mut t = [0u8; 8];
        t.copy_from_slice(&b[8..]);
        let ticket = u64::from_le_bytes(t);
        match (b[0], ticket) {
            (1, 0) => Ok(Status::Granted),
            (2, t) if t != 0 => Ok(Status::Queued(t)),
            (3, 0) => Ok(Status::Busy),
            (4, 0) => Ok(Status::Done),
            _ => Err(format!("lock reply status {} is unknown", b[0])),
        }
    }
}

impl<'a> LockMsg<'a> {
    /// The payload bytes.
    pub fn encode(&self) -> Vec<u8> {
        let (code, offset, op, datatype, data): (u8, u64, u32, u32, &[u8]) = match self.op {
            Carried::None => (0, 0, 0, 0, &[]),
            Carried::Put { offset, data } => (1, offset, 0, 0, data),
            Carried::Accumulate {
                offset,
                op,
                datatype,
                data,
            } => (2, offset, op.code().into(), datatype.code().into(), data),
        };
        let mut m = Vec::with_capacity(FIELDS + data.len());
        m.push(self.sub as u8);
        m.push((self.kind == LockType::Exclusive) as u8);
        m.push(code);
        m.push(self.release as u8);
        m.extend_from_slice(&[0; 4]);
        m.extend_from_slice(&self.window.to_le_bytes());
        m.extend_from_slice(&self.ticket.to_le_bytes());
        m.extend_from_slice(&offset.to_le_bytes());
        m.extend_from_slice(&op.to_le_bytes());
        m.extend_from_slice(&datatype.to_le_bytes());
        m.extend_from_slice(data);
        m
    }

    /// Decodes and checks the fields that need no window: sub-op, kind,
    /// flags and reserved bytes, which fields may be set for the sub-op.
    pub fn decode(p: &'a [u8]) -> Result<LockMsg<'a>, String> {
        if p.len() < FIELDS {
            return Err(format!("lock message of {} bytes is too short", p.len()));
        }
        let w64 = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&p[i..i + 8]);
            u64::from_le_bytes(b)
        };
        let w32 = |i: usize| u32::from_le_bytes([p[i], p[i + 1], p[i + 2], p[i + 3]]);
        let sub = match p[0] {
            1 => SubOp::Acquire,
            2 => SubOp::Poll,
            3 => SubOp::Release,
            4 => SubOp::Cancel,
            s => return Err(format!("unknown lock sub-op {s}")),
        };
        let kind = match p[1] {
            0 => LockType::Shared,
            1 => LockType::Exclusive,
            k => return Err(format!("unknown lock kind {k}")),
        };
        if p[3] > 1 || p[4..8] != [0; 4] {
            return Err("lock message with unknown flags or reserved bytes set".into());
        }
        let (window, ticket, offset) = (w64(8), w64(16), w64(24));
        let (fop, datatype, data) = (w32(32), w32(36), &p[FIELDS..]);
        let op = match p[2] {
            0 if offset == 0 && fop == 0 && datatype == 0 && data.is_empty() => Carried::None,
            1 if fop == 0 && datatype == 0 && !data.is_empty() => Carried::Put { offset, data },
            2 if !data.is_empty() => Carried::Accumulate {
                offset,
                op: AtomicOp::from_code(fop.into())
                    .ok_or_else(|| format!("lock message: unknown operation code {fop}"))?,
                datatype: Datatype::from_code(datatype.into())
                    .ok_or_else(|| format!("lock message: unknown datatype code {datatype}"))?,
                data,
            },
            c => return Err(format!("lock message: malformed operation (code {c})")),
        };
        let acquire = sub == SubOp::Acquire;
        let has_ticket = matches!(sub, SubOp::Poll | SubOp::Cancel);
        if (!acquire && (op != Carried::None || p[3] != 0)) || (has_ticket != (ticket != 0)) {
            return Err(format!(
                "lock message: fields set that {sub:?} does not take"
            ));
        }
        Ok(LockMsg {
            sub,
            kind,
            release: p[3] == 1,
            window,
            ticket,
            op,
        })
    }
}
