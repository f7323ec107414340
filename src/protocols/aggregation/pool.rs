//! Two-level pools of table elements: a per-window *local* pool in front of
//! the process-wide *global* pool.
//!
//! Invariants:
//! * Every element records its home ([`Home`]): the pool that created it
//!   and the only pool it ever returns to. So a window's local elements are
//!   usable by that window alone, whatever other windows do with the global
//!   pool: one window can never starve another of its local elements.
//! * A pool creates elements lazily, never more than its capacity
//!   (`created ≤ cap`): memory is bounded by the capacities, independent of
//!   the number of processes or targets.
//! * [`Local::take`] tries the local pool first, then the global one, and
//!   returns `None` only when both are empty and at their capacity: the
//!   caller then runs the cleanup (ship a batch), which returns elements.
//! * An element taken is returned exactly once ([`Local::give`]); a global
//!   element held by a window when the window goes away returns to the
//!   global pool (the op table's `Drop`), a local one is freed with it.

use std::sync::Mutex;

/// Which pool created an element (and gets it back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Home {
    /// The window's own pool.
    Local,
    /// The process-wide pool.
    Global,
}

/// A lazily filled free list with a fixed capacity.
#[derive(Debug)]
struct FreeList<E> {
    free: Vec<E>,
    created: usize,
    cap: usize,
}

impl<E> FreeList<E> {
    fn new(cap: usize) -> Self {
        FreeList {
            free: Vec::new(),
            created: 0,
            cap,
        }
    }

    fn take(&mut self, make: impl FnOnce() -> E) -> Option<E> {
        if let Some(e) = self.free.pop() {
            return Some(e);
        }
        if self.created < self.cap {
            self.created += 1;
            return Some(make());
        }
        None
    }
}

/// The process-wide pool of one element type (shared by every window).
#[derive(Debug)]
pub struct Global<E> {
    list: Mutex<FreeList<E>>,
}

impl<E> Global<E> {
    /// A pool that creates at most `cap` elements.
    pub fn new(cap: usize) -> Self {
        Global {
            list: Mutex::new(FreeList::new(cap)),
        }
    }

    fn take(&self, make: impl FnOnce() -> E) -> Option<E> {
        self.list.lock().ok()?.take(make)
    }

    /// Returns an element that came from [`Global`].
    pub fn give(&self, e: E) {
        if let Ok(mut l) = self.list.lock() {
            l.free.push(e);
        }
    }

    /// Elements created and not in the free list (held by windows).
    pub fn in_use(&self) -> usize {
        self.list
            .lock()
            .map(|l| l.created - l.free.len())
            .unwrap_or(0)
    }
}

/// A window's local pool of one element type.
#[derive(Debug)]
pub struct Local<E> {
    list: FreeList<E>,
}

impl<E> Local<E> {
    /// A local pool that creates at most `cap` elements.
    pub fn new(cap: usize) -> Self {
        Local {
            list: FreeList::new(cap),
        }
    }

    /// An element from this pool, else from `global`; `make(home)` builds a
    /// new one while a pool is below its capacity.
    pub fn take(&mut self, global: &Global<E>, make: impl Fn(Home) -> E) -> Option<E> {
        self.list
            .take(|| make(Home::Local))
            .or_else(|| global.take(|| make(Home::Global)))
    }

    /// Returns `e` to its home pool.
    pub fn give(&mut self, global: &Global<E>, e: E, home: Home) {
        match home {
            Home::Local => self.list.free.push(e),
            Home::Global => global.give(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_first_then_global_then_none() {
        let g = Global::new(1);
        let mut l = Local::new(1);
        let a = l.take(&g, |h| h).unwrap();
        let b = l.take(&g, |h| h).unwrap();
        assert_eq!((a, b), (Home::Local, Home::Global));
        assert!(l.take(&g, |h| h).is_none());
        l.give(&g, b, b);
        assert_eq!(g.in_use(), 0);
        assert_eq!(l.take(&g, |h| h), Some(Home::Global));
        l.give(&g, a, a);
        assert_eq!(l.take(&g, |h| h), Some(Home::Local));
    }

    #[test]
    fn a_window_keeps_its_local_elements() {
        let g = Global::new(2);
        let (mut greedy, mut other) = (Local::new(1), Local::new(1));
        let held: Vec<_> = (0..3).filter_map(|_| greedy.take(&g, |h| h)).collect();
        assert_eq!(held.len(), 3);
        assert!(greedy.take(&g, |h| h).is_none());
        // The global pool is empty, but `other` still has its own element.
        assert_eq!(other.take(&g, |h| h), Some(Home::Local));
    }
}
