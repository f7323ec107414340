//! The target side of the software lock path: one lock queue per window,
//! served by the active-message handler (`lock_wire`), so a lock is granted
//! while the target's application computes.
//!
//! State of one window's lock at its owner (bounded, nothing per peer):
//!
//! * `shared`: number of shared holders; `exclusive`: the rank holding it
//!   exclusively, if any (never both);
//! * `waiting`: a FIFO ring of at most `capacity` requests
//!   (`ONESIDED_LOCK_QUEUE`), each *waiting* or *granted* (granted at a
//!   release, not yet picked up by its origin's poll; it already counts as
//!   a holder).
//!
//! Transitions:
//!
//! ```text
//!   acquire(kind) ── no waiting entry ahead and compatible ─▶ Granted (holder)
//!        │ otherwise, ring not full ─▶ Queued(ticket)      (FIFO)
//!        │ ring full ─▶ Busy          (nothing recorded; the origin retries)
//!   release(kind) ─▶ holder count down ─▶ promote
//!   promote: walk the ring in order, grant waiting entries while compatible;
//!            stop at the first that is not (a waiting writer stops every
//!            reader behind it: readers cannot starve writers)
//!   poll(ticket): granted ─▶ entry removed, origin holds the lock
//!   cancel(ticket): entry removed; released if it was granted
//! ```

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::epoch::LockType;
use crate::error::{Error, Result};
use crate::transport::Datatype;

/// One request in the ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Waiter {
    rank: usize,
    kind: LockType,
    ticket: u64,
    granted: bool,
}

/// What an acquire request gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acquire {
    /// The lock is held by the requester now.
    Granted,
    /// Queued behind other requests: poll with this ticket.
    Queued(u64),
    /// The ring is full: nothing recorded, try again later.
    Busy,
}

/// The lock state of one window at its owner.
#[derive(Debug)]
pub struct LockQueue {
    shared: u32,
    exclusive: Option<usize>,
    waiting: VecDeque<Waiter>,
    capacity: usize,
    next_ticket: u64,
}

impl LockQueue {
    /// An unlocked queue with room for `capacity` waiting requests.
    pub fn new(capacity: usize) -> LockQueue {
        LockQueue {
            shared: 0,
            exclusive: None,
            waiting: VecDeque::new(),
            capacity: capacity.max(1),
            next_ticket: 1,
        }
    }

    fn compatible(&self, kind: LockType) -> bool {
        match kind {
            LockType::Shared => self.exclusive.is_none(),
            LockType::Exclusive => self.exclusive.is_none() && self.shared == 0,
        }
    }

    fn hold(&mut self, rank: usize, kind: LockType) {
        match kind {
            LockType::Shared => self.shared += 1,
            LockType::Exclusive => self.exclusive = Some(rank),
        }
    }

    /// `rank` asks for the lock.
    pub fn acquire(&mut self, rank: usize, kind: LockType) -> Acquire {
        let nobody_waits = self.waiting.iter().all(|w| w.granted);
        if nobody_waits && self.compatible(kind) {
            self.hold(rank, kind);
            return Acquire::Granted;
        }
        if self.waiting.len() >= self.capacity {
            return Acquire::Busy;
        }
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.waiting.push_back(Waiter {
            rank,
            kind,
            ticket,
            granted: false,
        });
        Acquire::Queued(ticket)
    }

    /// Grants waiting requests in FIFO order while they are compatible.
    fn promote(&mut self) {
        let mut i = 0;
        while i < self.waiting.len() {
            let w = self.waiting[i];
            if !w.granted {
                if !self.compatible(w.kind) {
                    return;
                }
                self.hold(w.rank, w.kind);
                self.waiting[i].granted = true;
                if w.kind == LockType::Exclusive {
                    return;
                }
            }
            i += 1;
        }
    }

    /// `rank` gives back a lock of `kind`.
    pub fn release(&mut self, rank: usize, kind: LockType) -> std::result::Result<(), String> {
        match kind {
            LockType::Exclusive if self.exclusive == Some(rank) => self.exclusive = None,
            LockType::Shared if self.shared > 0 => self.shared -= 1,
            _ => {
                return Err(format!(
                    "release of a {kind:?} lock rank {rank} does not hold"
                ))
            }
        }
        self.promote();
        Ok(())
    }

    fn find(&self, rank: usize, ticket: u64) -> std::result::Result<usize, String> {
        match self.waiting.iter().position(|w| w.ticket == ticket) {
            Some(i) if self.waiting[i].rank == rank => Ok(i),
            _ => Err(format!(
                "rank {rank} has no lock request with ticket {ticket}"
            )),
        }
    }

    /// Whether `rank`'s queued request `ticket` was granted (then it leaves
    /// the ring: the origin holds the lock).
    pub fn poll(&mut self, rank: usize, ticket: u64) -> std::result::Result<bool, String> {
        let i = self.find(rank, ticket)?;
        if !self.waiting[i].granted {
            return Ok(false);
        }
        self.waiting.remove(i);
        Ok(true)
    }

    /// Withdraws `rank`'s request `ticket` (its origin gave up), releasing
    /// the lock if it had been granted meanwhile.
    pub fn cancel(&mut self, rank: usize, ticket: u64) -> std::result::Result<(), String> {
        let i = self.find(rank, ticket)?;
        if let Some(w) = self.waiting.remove(i) {
            if w.granted {
                return self.release(w.rank, w.kind);
            }
        }
        self.promote();
        Ok(())
    }

    /// Requests in the ring (waiting or granted and not picked up).
    pub fn queued(&self) -> usize {
        self.waiting.len()
    }

    /// Holders now: (shared count, exclusive holder).
    pub fn holders(&self) -> (u32, Option<usize>) {
        (self.shared, self.exclusive)
    }
}

/// One window open for software locks: its queue and, for the single
/// lock-op-unlock message, its accumulate policy (the memory the operation
/// lands in is the window's entry in `transport::exposed`, the one registry
/// of exposed memory).
pub struct Entry {
    /// The lock state.
    pub queue: Mutex<LockQueue>,
    /// Type of the elements.
    pub datatype: Datatype,
    /// Accumulate operations (bit `op_bit`) that may be applied by this
    /// CPU: those on the software or CPU-atomic path.
    pub cpu_ops: u64,
}

/// Window id → lock entry. Same discipline as `transport::exposed`: the
/// entry is removed (under the write lock) when its [`LockEntry`] drops;
/// handlers use it only inside [`LockTable::with`]. It holds no memory.
#[derive(Default)]
pub struct LockTable {
    map: RwLock<HashMap<u64, Entry>>,
}

/// Keeps a window in the table; dropping it removes the entry.
pub struct LockEntry {
    table: Arc<LockTable>,
    id: u64,
}

impl LockTable {
    fn read(&self) -> RwLockReadGuard<'_, HashMap<u64, Entry>> {
        self.map.read().unwrap_or_else(|e| e.into_inner())
    }
    fn write(&self) -> RwLockWriteGuard<'_, HashMap<u64, Entry>> {
        self.map.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Opens window `id` for software locks.
    pub fn expose(
        self: &Arc<Self>,
        id: u64,
        capacity: usize,
        datatype: Datatype,
        cpu_ops: u64,
    ) -> Result<LockEntry> {
        let mut map = self.write();
        if map.contains_key(&id) {
            return Err(Error::InvalidArgument(format!(
                "window {id} is already open for software locks"
            )));
        }
        map.insert(
            id,
            Entry {
                queue: Mutex::new(LockQueue::new(capacity)),
                datatype,
                cpu_ops,
            },
        );
        Ok(LockEntry {
            table: self.clone(),
            id,
        })
    }

    /// Runs `f` on window `id`'s entry, if open.
    pub fn with<R>(&self, id: u64, f: impl FnOnce(&Entry) -> R) -> Option<R> {
        let map = self.read();
        map.get(&id).map(f)
    }

    /// Runs `f` on window `id`'s queue (locked), if open.
    pub fn queue<R>(&self, id: u64, f: impl FnOnce(&mut LockQueue) -> R) -> Option<R> {
        self.with(id, |e| {
            let mut q = e.queue.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut q)
        })
    }
}

impl Drop for LockEntry {
    fn drop(&mut self) {
        self.table.write().remove(&self.id);
    }
}

#[cfg(test)]
#[path = "queue_tests.rs"]
mod tests;
