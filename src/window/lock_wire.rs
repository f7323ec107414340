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

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::am_accumulate::op_bit;
use super::lock_queue::{Acquire, Entry, LockTable};
use crate::epoch::LockType;
use crate::transport::am::{Handler, MAX_PAYLOAD};
use crate::transport::{cpu_atomic, Atomic, AtomicOp, Datatype};

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

/// Counters of the target side (`World::stats().locks`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LockStats {
    /// Acquire requests granted on arrival.
    pub granted_at_once: u64,
    /// Acquire requests queued behind others.
    pub queued: u64,
    /// Acquire requests answered "busy" (ring full).
    pub busy: u64,
    /// Operations applied from lock messages (lock-op-unlock).
    pub ops_applied: u64,
}

/// Serves lock messages of every window open for software locks.
pub struct LockHandler {
    /// Windows on the software lock path.
    pub table: Arc<LockTable>,
    granted: AtomicU64,
    queued: AtomicU64,
    busy: AtomicU64,
    applied: AtomicU64,
}

impl LockHandler {
    /// A handler over `table`.
    pub fn new(table: Arc<LockTable>) -> LockHandler {
        LockHandler {
            table,
            granted: AtomicU64::new(0),
            queued: AtomicU64::new(0),
            busy: AtomicU64::new(0),
            applied: AtomicU64::new(0),
        }
    }

    /// Counters.
    pub fn stats(&self) -> LockStats {
        LockStats {
            granted_at_once: self.granted.load(Ordering::Relaxed),
            queued: self.queued.load(Ordering::Relaxed),
            busy: self.busy.load(Ordering::Relaxed),
            ops_applied: self.applied.load(Ordering::Relaxed),
        }
    }

    /// Serves `m` from `from` on its window: the local origin (a lock on
    /// oneself) calls this directly.
    pub fn serve(&self, from: usize, m: &LockMsg<'_>) -> Result<Status, String> {
        let id = m.window;
        let done = self.table.with(id, |e| {
            check_op(e, &m.op)?;
            let mut q = e.queue.lock().unwrap_or_else(|p| p.into_inner());
            let status = match m.sub {
                SubOp::Acquire => match q.acquire(from, m.kind) {
                    Acquire::Granted => {
                        // Held: nobody else writes under an exclusive lock.
                        drop(q);
                        let applied = apply(e, &m.op);
                        self.granted.fetch_add(1, Ordering::Relaxed);
                        if m.release || applied.is_err() {
                            // A failed operation gives the lock back: the
                            // origin's lock call fails and holds nothing.
                            let mut q = e.queue.lock().unwrap_or_else(|p| p.into_inner());
                            q.release(from, m.kind)?;
                        }
                        applied?;
                        if m.op != Carried::None {
                            self.applied.fetch_add(1, Ordering::Relaxed);
                        }
                        Status::Granted
                    }
                    Acquire::Queued(t) => {
                        self.queued.fetch_add(1, Ordering::Relaxed);
                        Status::Queued(t)
                    }
                    Acquire::Busy => {
                        self.busy.fetch_add(1, Ordering::Relaxed);
                        Status::Busy
                    }
                },
                SubOp::Poll => match q.poll(from, m.ticket)? {
                    true => Status::Granted,
                    false => Status::Queued(m.ticket),
                },
                SubOp::Release => {
                    q.release(from, m.kind)?;
                    Status::Done
                }
                SubOp::Cancel => {
                    q.cancel(from, m.ticket)?;
                    Status::Done
                }
            };
            Ok(status)
        });
        done.unwrap_or_else(|| Err(format!("window {id} is not on the software lock path here")))
    }
}

/// Checks a carried operation against the window before anything changes.
fn check_op(e: &Entry, op: &Carried<'_>) -> Result<(), String> {
    let (offset, len) = match *op {
        Carried::None => return Ok(()),
        Carried::Put { offset, data } => (offset, data.len()),
        Carried::Accumulate {
            offset,
            op,
            datatype,
            data,
        } => {
            if datatype != e.datatype {
                return Err(format!(
                    "accumulate on {datatype}, the window holds {}",
                    e.datatype
                ));
            }
            let size = datatype.size();
            let allowed = e.cpu_ops & (1 << op_bit(op)) != 0;
            if !allowed
                || !cpu_atomic::supports(op, datatype)
                || matches!(op, AtomicOp::Cswap | AtomicOp::Read)
            {
                return Err(format!(
                    "op {op} may not be applied by this CPU on this window (hardware path or fetching op)"
                ));
            }
            if data.len() % size != 0 || offset % size as u64 != 0 {
                return Err(format!(
                    "accumulate of {} bytes at byte {offset}",
                    data.len()
                ));
            }
            (offset, data.len())
        }
    };
    let mem = e
        .mem
        .as_ref()
        .ok_or("this window takes no operation in lock messages")?;
    match offset.checked_add(len as u64) {
        Some(end) if end <= mem.len() as u64 => Ok(()),
        _ => Err(format!(
            "operation at byte {offset}, length {len}, outside the {}-byte window",
            mem.len()
        )),
    }
}

/// Applies a checked operation.
fn apply(e: &Entry, op: &Carried<'_>) -> Result<(), String> {
    let Some(mem) = e.mem.as_ref() else {
        return Ok(());
    };
    let done = match *op {
        Carried::None => return Ok(()),
        Carried::Put { offset, data } => mem.write(offset as usize, data),
        Carried::Accumulate {
            offset,
            op,
            datatype,
            data,
        } => {
            let size = datatype.size();
            let what = Atomic {
                op,
                datatype,
                count: data.len() / size,
            };
            cpu_atomic::accumulate(mem, offset as usize, what, data, None)
        }
    };
    done.map_err(|e| e.to_string())
}

impl Handler for LockHandler {
    fn handle(
        &self,
        from: usize,
        payload: &[u8],
        reply: Option<&mut [u8]>,
    ) -> Result<usize, String> {
        let reply = reply.ok_or("lock messages are requests")?;
        let m = LockMsg::decode(payload)?;
        let status = self.serve(from, &m)?;
        let out = reply
            .get_mut(..REPLY_BYTES)
            .ok_or("no room for a lock reply")?;
        out.copy_from_slice(&status.encode());
        Ok(REPLY_BYTES)
    }
}

#[cfg(test)]
mod tests;
