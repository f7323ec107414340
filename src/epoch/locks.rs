//! Per-target passive-target locks held by one window (`lock`/`unlock`).
//!
//! Only locked targets are stored (a short vector, not an array sized by the
//! number of processes). An entry exists from the moment `lock` starts
//! acquiring the target's lock word until `unlock` has released it; RMA
//! operations to the target are allowed only once the entry is `held`.

/// The kind of a per-target lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockType {
    /// Many processes may hold it at once (readers).
    Shared,
    /// One process holds it, nobody else holds a lock on that target.
    Exclusive,
}

/// One locked (or being locked) target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    /// Target rank.
    pub rank: usize,
    /// Kind of lock.
    pub kind: LockType,
    /// `Assert::NOCHECK`: no lock word was touched, none to release.
    pub nocheck: bool,
    /// Acquired (false while `lock` is still spinning).
    pub held: bool,
}

/// The targets a window holds locks on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Locks {
    entries: Vec<Held>,
}

impl Locks {
    /// No entry at all.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Number of entries (held or being acquired).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The entry of `rank`.
    pub fn get(&self, rank: usize) -> Option<&Held> {
        self.entries.iter().find(|h| h.rank == rank)
    }

    /// Whether `rank` is locked and acquired.
    pub fn holds(&self, rank: usize) -> bool {
        self.get(rank).is_some_and(|h| h.held)
    }

    /// The entry, when there is exactly one.
    pub fn only(&self) -> Option<&Held> {
        match self.entries.as_slice() {
            [h] => Some(h),
            _ => None,
        }
    }

    /// Whether any lock is acquired.
    pub fn any_held(&self) -> bool {
        self.entries.iter().any(|h| h.held)
    }

    pub(super) fn insert(&mut self, h: Held) {
        self.entries.push(h);
    }

    pub(super) fn set_held(&mut self, rank: usize) {
        if let Some(h) = self.entries.iter_mut().find(|h| h.rank == rank) {
            h.held = true;
        }
    }

    pub(super) fn remove(&mut self, rank: usize) -> Option<Held> {
        let i = self.entries.iter().position(|h| h.rank == rank)?;
        Some(self.entries.swap_remove(i))
    }
}
