//! The target side of the software lock path: the handler that serves
//! lock messages (`wire.rs`) from the windows' lock queues (`queue.rs`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::queue::{Acquire, Entry, LockTable};
use super::wire::{Carried, LockMsg, Status, SubOp, REPLY_BYTES};
use crate::protocols::accumulate::op_bit;
use crate::transport::am::Handler;
use crate::transport::exposed::ExposedTable;
use crate::transport::{cpu_atomic, Atomic, AtomicOp, Memory};

/// Counters of the target side (`World::stats().locks`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
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
    /// Where operations carried by lock messages land (the window memory
    /// exposed to handlers; none for dynamic windows).
    exposed: Arc<ExposedTable>,
    granted: AtomicU64,
    queued: AtomicU64,
    busy: AtomicU64,
    applied: AtomicU64,
}

impl LockHandler {
    /// A handler over `table`, applying carried operations to the memory
    /// `exposed` holds.
    pub fn new(table: Arc<LockTable>, exposed: Arc<ExposedTable>) -> LockHandler {
        LockHandler {
            table,
            exposed,
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
        // Lock table, then exposed memory (nothing takes them the other way
        // round; removal takes each write lock alone).
        let done = self.table.with(id, |e| self.exposed.with_memory(id, |mem| {
            check_op(e, mem, &m.op)?;
            let mut q = e.queue.lock().unwrap_or_else(|p| p.into_inner());
            let status = match m.sub {
                SubOp::Acquire => match q.acquire(from, m.kind) {
                    Acquire::Granted => {
                        // Held: nobody else writes under an exclusive lock.
                        drop(q);
                        let applied = apply(mem, &m.op);
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
        }));
        done.unwrap_or_else(|| Err(format!(
                "window {id} has no software lock here (freed or dropped, never created, \
                 or not on the software lock path)"
            )))
    }
}

/// Checks a carried operation against the window before anything changes.
fn check_op(e: &Entry, mem: Option<&Memory<'_>>, op: &Carried<'_>) -> Result<(), String> {
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
    let mem = mem.ok_or("this window takes no operation in lock messages")?;
    match offset.checked_add(len as u64) {
        Some(end) if end <= mem.len() as u64 => Ok(()),
        _ => Err(format!(
            "operation at byte {offset}, length {len}, outside the {}-byte window",
            mem.len()
        )),
    }
}

/// Applies a checked operation.
fn apply(mem: Option<&Memory<'_>>, op: &Carried<'_>) -> Result<(), String> {
    let Some(mem) = mem else {
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
