//! The one registry of window memory exposed to message handlers: the
//! target side of software accumulates, batched puts (`protocols::
//! aggregation`) and operations carried by lock messages (`protocols::
//! soft_lock`) find a window's memory here by window id. No other table
//! holds window memory.
//!
//! Invariants:
//! * An entry *co-owns* the window's memory (an `Arc`), so the memory
//!   cannot be freed while it is exposed: a window that is leaked
//!   (`std::mem::forget`), or an [`ExposedEntry`] that is, leaks the memory
//!   instead of letting handlers write memory the program has reused. The
//!   entry is inserted by [`ExposedTable::expose`] and removed when the
//!   returned [`ExposedEntry`] is dropped (by the window's `free` or drop).
//! * Handlers use an entry only inside [`ExposedTable::with`] (or
//!   [`ExposedTable::with_memory`]), under the table's read lock; removal
//!   takes the write lock, so it waits until no handler is using any
//!   entry. A message for a window that is gone finds no entry and is
//!   refused.
//! * Exposed memory is written by peers (the provider, their mapping of a
//!   node-shared segment) and by handlers on the progress agent while the
//!   owner's threads read and write it: every access goes through
//!   [`Memory::read`]/[`Memory::write`] (relaxed atomic loads and stores per
//!   aligned word) or `cpu_atomic` (the CPU's atomic read-modify-writes),
//!   never through references or plain copies (see `transport::memory`).

use std::collections::HashMap;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::{Datatype, Memory};
use crate::error::{Error, Result};

struct Entry {
    mem: Arc<Memory<'static>>,
    datatype: Datatype,
    policy: u64,
}

/// Window id → exposed memory; dynamic windows: window id → the attached
/// regions exposed so far (found by address).
#[derive(Default)]
pub struct ExposedTable {
    map: RwLock<HashMap<u64, Entry>>,
    regions: RwLock<HashMap<u64, Vec<Entry>>>,
}

/// Keeps one attached region of a dynamic window exposed; dropping it
/// removes the region (waiting for handlers that are using it).
pub struct RegionEntry {
    table: Arc<ExposedTable>,
    id: u64,
    addr: u64,
}

/// Keeps a window exposed; dropping it removes the entry (waiting for
/// handlers that are using the table).
pub struct ExposedEntry {
    table: Arc<ExposedTable>,
    id: u64,
}

impl ExposedTable {
    // A panic in a handler must not leave memory exposed forever (or make
    // removal impossible): the map stays consistent under any panic, since
    // every update is a single insert or remove.
    fn read(&self) -> RwLockReadGuard<'_, HashMap<u64, Entry>> {
        self.map.read().unwrap_or_else(|e| e.into_inner())
    }
    fn write(&self) -> RwLockWriteGuard<'_, HashMap<u64, Entry>> {
        self.map.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Exposes `mem` as window `id` holding elements of `datatype`;
    /// `policy` is a word the handler interprets. The table keeps `mem`
    /// alive until the returned entry is dropped.
    ///
    /// # Errors
    /// `InvalidArgument` when window `id` is exposed already.
    pub fn expose(
        self: &Arc<Self>,
        id: u64,
        mem: &Arc<Memory<'static>>,
        datatype: Datatype,
        policy: u64,
    ) -> Result<ExposedEntry> {
        let mut map = self.write();
        if map.contains_key(&id) {
            return Err(Error::InvalidArgument(format!(
                "window {id} is already exposed to message handlers"
            )));
        }
        map.insert(
            id,
            Entry {
                mem: mem.clone(),
                datatype,
                policy,
            },
        );
        Ok(ExposedEntry {
            table: self.clone(),
            id,
        })
    }

    fn regions_read(&self) -> RwLockReadGuard<'_, HashMap<u64, Vec<Entry>>> {
        self.regions.read().unwrap_or_else(|e| e.into_inner())
    }
    fn regions_write(&self) -> RwLockWriteGuard<'_, HashMap<u64, Vec<Entry>>> {
        self.regions.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Exposes `mem`, a region attached to dynamic window `id`, to
    /// handlers that address it by its absolute address
    /// ([`ExposedTable::with_range`]). The table keeps `mem` alive until
    /// the returned entry is dropped.
    pub fn expose_region(
        self: &Arc<Self>,
        id: u64,
        mem: &Arc<Memory<'static>>,
        datatype: Datatype,
        policy: u64,
    ) -> RegionEntry {
        self.regions_write().entry(id).or_default().push(Entry {
            mem: mem.clone(),
            datatype,
            policy,
        });
        RegionEntry {
            table: self.clone(),
            id,
            addr: mem.addr(),
        }
    }

    /// Runs `f` on the memory that holds `len` bytes at `offset` of window
    /// `id`, with the offset inside that memory, the datatype and policy:
    /// a window's own memory (offsets are window offsets), or the attached
    /// region of a dynamic window that contains the range (offsets are
    /// absolute addresses). `None` when the window is not exposed, or no
    /// attached region holds the whole range.
    pub fn with_range<R>(
        &self,
        id: u64,
        offset: u64,
        len: u64,
        f: impl FnOnce(&Memory<'_>, usize, Datatype, u64) -> R,
    ) -> Option<R> {
        if let Some(e) = self.read().get(&id) {
            return Some(f(&e.mem, usize::try_from(offset).ok()?, e.datatype, e.policy));
        }
        let regions = self.regions_read();
        let e = regions.get(&id)?.iter().find(|e| {
            let start = e.mem.addr();
            offset >= start
                && offset
                    .checked_add(len)
                    .is_some_and(|end| end <= start.saturating_add(e.mem.len() as u64))
        })?;
        let local = usize::try_from(offset - e.mem.addr()).ok()?;
        Some(f(&e.mem, local, e.datatype, e.policy))
    }

    /// Runs `f` on window `id`'s memory, datatype and policy, if exposed.
    pub fn with<R>(&self, id: u64, f: impl FnOnce(&Memory<'_>, Datatype, u64) -> R) -> Option<R> {
        let map = self.read();
        let e = map.get(&id)?;
        Some(f(&e.mem, e.datatype, e.policy))
    }

    /// Runs `f` on window `id`'s memory (`None` when it is not exposed,
    /// e.g. a dynamic window), under the table's read lock.
    pub fn with_memory<R>(&self, id: u64, f: impl FnOnce(Option<&Memory<'static>>) -> R) -> R {
        let map = self.read();
        f(map.get(&id).map(|e| &*e.mem))
    }

    /// Number of exposed windows.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// True when nothing is exposed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for RegionEntry {
    fn drop(&mut self) {
        let mut regions = self.table.regions_write();
        if let Some(list) = regions.get_mut(&self.id) {
            list.retain(|e| e.mem.addr() != self.addr);
            if list.is_empty() {
                regions.remove(&self.id);
            }
        }
    }
}

impl Drop for ExposedEntry {
    fn drop(&mut self) {
        self.table.write().remove(&self.id);
    }
}
