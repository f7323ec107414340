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

/// Window id → exposed memory.
#[derive(Default)]
pub struct ExposedTable {
    map: RwLock<HashMap<u64, Entry>>,
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

impl Drop for ExposedEntry {
    fn drop(&mut self) {
        self.table.write().remove(&self.id);
    }
}
