//! Registrations of the in-process back-end: per endpoint, a table from key
//! to the registered memory.
//!
//! Addressing is by offset from the registration's start (`MrCaps::
//! virt_addr` false, base 0) and keys may be chosen (`register_keyed`), as
//! on libfabric's tcp provider. The table holds an *alias* of the memory
//! ([`Memory::alias`]): peers' operations read and write it through
//! `Memory`'s relaxed-atomic copies and `cpu_atomic`, under the table's
//! read lock. Removal (dropping the [`Registration`]) takes the write lock,
//! so it waits for operations in progress; the memory outlives its
//! registration (`Registration::holding`, or the owner's field order), so
//! no operation ever reaches freed memory. An operation on an unknown key
//! or outside the registration is an error naming the rank, address and
//! key — a remote access error, never a panic or a stray write.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use super::conn::Fabric;
use crate::error::{Error, Result};
use crate::transport::{Memory, Registration, RemoteAddr};

/// `EFAULT`-like code of a remote access outside a registration.
const EFAULT: i32 = 14;
/// `ENOKEY`: no registration has the key.
const ENOKEY: i32 = 126;

/// Key → registered memory of one endpoint.
pub(super) struct Table {
    map: RwLock<HashMap<u64, Memory<'static>>>,
    /// Keys handed out when none is requested (odd: window keys are even).
    next: AtomicU64,
}

impl Default for Table {
    fn default() -> Self {
        Table {
            map: RwLock::new(HashMap::new()),
            next: AtomicU64::new(1),
        }
    }
}

impl Table {
    /// Registers `mem` under `want` if that key is free, else under a fresh
    /// key; returns the key.
    fn insert(&self, mem: &Memory<'_>, want: Option<u64>) -> u64 {
        // SAFETY: the alias lives in this table until `remove`, which the
        // registration's handle runs when it is dropped; the registration
        // is dropped before the memory it registers is freed (it holds the
        // memory, or its owner drops it first), as with a NIC's
        // registration.
        let alias = unsafe { mem.alias() };
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        let key = match want {
            Some(k) if !map.contains_key(&k) => k,
            _ => loop {
                let k = self.next.fetch_add(2, Ordering::Relaxed);
                if !map.contains_key(&k) {
                    break k;
                }
            },
        };
        map.insert(key, alias);
        key
    }

    fn remove(&self, key: u64) {
        // Waits for operations using the table (they hold the read lock).
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        map.remove(&key);
    }

    /// Runs `f` on the registration `at.key` with the byte offset of
    /// `at.addr`, after checking that `len` bytes from there lie inside it.
    /// `what` describes the operation for the error (`"put of 8 bytes"`).
    pub(super) fn with<R>(
        &self,
        rank: usize,
        at: RemoteAddr,
        len: usize,
        what: &dyn Fn() -> String,
        f: impl FnOnce(&Memory<'static>, usize) -> Result<R>,
    ) -> Result<R> {
        let map = self.map.read().unwrap_or_else(|e| e.into_inner());
        let context = || {
            format!(
                "{} to rank {rank} at address {:#x} (key {:#x})",
                what(),
                at.addr,
                at.key
            )
        };
        let mem = map.get(&at.key).ok_or_else(|| {
            Error::backend(
                "loopback",
                "remote access",
                context(),
                ENOKEY,
                format!("rank {rank} has no registration with key {:#x}", at.key),
            )
        })?;
        let inside = usize::try_from(at.addr)
            .ok()
            .and_then(|off| off.checked_add(len).map(|end| (off, end)))
            .filter(|&(_, end)| end <= mem.len());
        let Some((off, _)) = inside else {
            return Err(Error::backend(
                "loopback",
                "remote access",
                context(),
                EFAULT,
                format!(
                    "{len} bytes at offset {:#x} are outside rank {rank}'s {}-byte registration",
                    at.addr,
                    mem.len()
                ),
            ));
        };
        f(mem, off).map_err(|e| match e {
            Error::InvalidArgument(m) | Error::Unsupported(m) => {
                Error::backend("loopback", "remote access", context(), EFAULT, m)
            }
            other => other,
        })
    }
}

/// Deregisters on drop.
struct Handle {
    fabric: Arc<Fabric>,
    rank: usize,
    key: u64,
}

impl Drop for Handle {
    fn drop(&mut self) {
        if let Some(ep) = self.fabric.endpoints.get(self.rank) {
            ep.mrs.remove(self.key);
        }
    }
}

/// Registers `mem` at `rank`'s endpoint (under `want` if free).
pub(super) fn register(
    fabric: &Arc<Fabric>,
    rank: usize,
    mem: &Memory<'_>,
    want: Option<u64>,
) -> Result<Registration> {
    let ep = fabric.endpoint(rank, &|| "registering memory".into())?;
    let key = ep.mrs.insert(mem, want);
    let handle = Handle {
        fabric: fabric.clone(),
        rank,
        key,
    };
    Ok(Registration::new(key, 0, Box::new(handle)))
}
