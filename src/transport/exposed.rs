//! Window memory exposed to active-message handlers: the target side of
//! the software accumulate path finds a window's memory here by window id.
//!
//! Invariants:
//! * An entry is a non-owning view of a window's memory. It is inserted by
//!   [`ExposedTable::expose`] and removed when the returned [`ExposedEntry`] is
//!   dropped; like a [`super::Registration`], the window drops its
//!   `ExposedEntry` before its memory (explicitly in `free`, and by field order
//!   on drop), so no view outlives the memory.
//! * Handlers use an entry only inside [`ExposedTable::with`], under the
//!   table's read lock; removal takes the write lock, so it waits until no
//!   handler is using any entry. A message for a window that is gone finds
//!   no entry and is refused.

use std::collections::HashMap;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::{Datatype, Memory};
use crate::error::{Error, Result};

struct Entry {
    mem: Memory<'static>,
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

    /// Exposes `mem` as window `id` holding elements of `datatype`
    /// ; `policy` is a word the handler interprets.
    pub fn expose(
        self: &Arc<Self>,
        id: u64,
        mem: &Memory<'_>,
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
                mem: mem.alias(),
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
