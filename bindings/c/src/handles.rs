//! Generation-checked handle tables: a C handle is `(generation << 32) |
//! (slot + 1)`, so 0 is never valid, and a handle whose object was removed
//! stays invalid forever — its slot's generation moves on when the slot is
//! reused (after 2^32 reuses of one slot a handle could alias; a program
//! would have to keep a stale handle across four billion frees of one
//! slot).
//!
//! Invariant: an occupied slot holds the object issued with the slot's
//! current generation; `remove` empties it and bumps the generation, under
//! the table's lock, so `get` never returns an object for a stale handle.

use std::sync::{Arc, Mutex};

struct Slot<T> {
    generation: u32,
    item: Option<Arc<T>>,
}

/// Objects of one kind behind `u64` handles.
pub struct Table<T> {
    slots: Mutex<Vec<Slot<T>>>,
}

impl<T> Table<T> {
    /// An empty table.
    pub const fn new() -> Self {
        Table {
            slots: Mutex::new(Vec::new()),
        }
    }

    fn split(h: u64) -> Option<(usize, u32)> {
        let index = (h & 0xffff_ffff) as usize;
        (index > 0).then(|| (index - 1, (h >> 32) as u32))
    }

    /// Stores `item` and returns its new handle.
    pub fn insert(&self, item: T) -> u64 {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let item = Some(Arc::new(item));
        let index = match slots.iter().position(|s| s.item.is_none()) {
            Some(i) => {
                slots[i].item = item;
                i
            }
            None => {
                slots.push(Slot {
                    generation: 1,
                    item,
                });
                slots.len() - 1
            }
        };
        (u64::from(slots[index].generation) << 32) | (index as u64 + 1)
    }

    /// The object of handle `h`, if it is live.
    pub fn get(&self, h: u64) -> Option<Arc<T>> {
        let (index, generation) = Self::split(h)?;
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let slot = slots.get(index)?;
        if slot.generation != generation {
            return None;
        }
        slot.item.clone()
    }

    /// Invalidates handle `h` (its object lives on while calls hold it).
    pub fn remove(&self, h: u64) {
        let Some((index, generation)) = Self::split(h) else {
            return;
        };
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(slot) = slots.get_mut(index) {
            if slot.generation == generation && slot.item.is_some() {
                slot.item = None;
                slot.generation = slot.generation.wrapping_add(1).max(1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Table;

    #[test]
    fn stale_and_forged_handles_are_refused() {
        let t = Table::new();
        assert!(t.get(0).is_none());
        let a = t.insert(1);
        assert_eq!(t.get(a).as_deref(), Some(&1));
        t.remove(a);
        assert!(t.get(a).is_none());
        let b = t.insert(2);
        // Same slot, new generation: the old handle stays dead.
        assert_eq!(b & 0xffff_ffff, a & 0xffff_ffff);
        assert_ne!(a, b);
        assert!(t.get(a).is_none());
        assert_eq!(t.get(b).as_deref(), Some(&2));
        t.remove(a); // removing a stale handle changes nothing
        assert_eq!(t.get(b).as_deref(), Some(&2));
        assert!(t.get(b + 1).is_none() && t.get(b ^ (1 << 40)).is_none());
        assert!(t.get(u64::MAX).is_none());
    }
}
