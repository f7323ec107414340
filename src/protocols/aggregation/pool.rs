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

    /// Returns every element of `elems` to its home, the global ones under
    /// one lock of the global pool (a shipped batch returns its operation
    /// elements at once).
    pub fn give_all(&mut self, global: &Global<E>, elems: impl Iterator<Item = (E, Home)>) {
        let mut lock = None;
        for (e, home) in elems {
            match home {
                Home::Local => self.list.free.push(e),
                Home::Global => {
                    let l = lock.get_or_insert_with(|| global.list.lock());
                    if let Ok(l) = l {
                        l.free.push(e);
                    }
                }
            }
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

    /// Model-based property test: random take/give on two windows' local
    /// pools sharing one global pool, against a model of the counts
    /// (local first, then global, `None` only when both are exhausted;
    /// every element returns to its home; never more than the capacities;
    /// no element handed out twice).
    mod model {
        use super::*;
        use proptest::prelude::*;

        #[derive(Debug, Clone)]
        enum Step {
            Take(usize),
            /// Give back the i-th element window w holds (mod the count).
            Give(usize, usize),
        }

        #[derive(Debug, Default, Clone, Copy)]
        struct Counts {
            created: usize,
            free: usize,
            cap: usize,
        }

        impl Counts {
            fn take(&mut self) -> bool {
                if self.free > 0 {
                    self.free -= 1;
                    true
                } else if self.created < self.cap {
                    self.created += 1;
                    true
                } else {
                    false
                }
            }
        }

        fn step() -> impl Strategy<Value = Step> {
            prop_oneof![
                3 => (0..2usize).prop_map(Step::Take),
                2 => (0..2usize, any::<usize>()).prop_map(|(w, i)| Step::Give(w, i)),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]
            #[test]
            fn pools_match_model(
                gcap in 0..4usize,
                lcaps in (0..3usize, 0..3usize),
                steps in proptest::collection::vec(step(), 0..60),
            ) {
                let g = Global::new(gcap);
                let mut locals = [Local::new(lcaps.0), Local::new(lcaps.1)];
                let mut mg = Counts { cap: gcap, ..Counts::default() };
                let mut ml = [
                    Counts { cap: lcaps.0, ..Counts::default() },
                    Counts { cap: lcaps.1, ..Counts::default() },
                ];
                // Elements are (id, home); ids are unique at creation.
                let next_id = std::cell::Cell::new(0u32);
                let mut held: [Vec<(u32, Home)>; 2] = [Vec::new(), Vec::new()];
                let mut owner: std::collections::HashMap<u32, usize> = Default::default();
                for s in steps {
                    match s {
                        Step::Take(w) => {
                            let want = if ml[w].take() {
                                Some(Home::Local)
                            } else if mg.take() {
                                Some(Home::Global)
                            } else {
                                None
                            };
                            let got = locals[w].take(&g, |h| {
                                next_id.set(next_id.get() + 1);
                                (next_id.get(), h)
                            });
                            prop_assert_eq!(got.map(|e| e.1), want);
                            if let Some(e) = got {
                                // A local element only ever serves its window.
                                if e.1 == Home::Local {
                                    if let Some(&o) = owner.get(&e.0) {
                                        prop_assert_eq!(o, w);
                                    }
                                    owner.insert(e.0, w);
                                }
                                prop_assert!(
                                    !held.iter().flatten().any(|h| h.0 == e.0),
                                    "element {} handed out twice", e.0
                                );
                                held[w].push(e);
                            }
                        }
                        Step::Give(w, i) => {
                            if held[w].is_empty() {
                                continue;
                            }
                            let e = held[w].remove(i % held[w].len());
                            match e.1 {
                                Home::Local => ml[w].free += 1,
                                Home::Global => mg.free += 1,
                            }
                            locals[w].give(&g, e, e.1);
                        }
                    }
                    prop_assert_eq!(g.in_use(), mg.created - mg.free);
                    prop_assert!(mg.created <= gcap);
                    for w in 0..2 {
                        prop_assert_eq!(locals[w].list.created, ml[w].created);
                        prop_assert_eq!(locals[w].list.free.len(), ml[w].free);
                        prop_assert!(ml[w].created <= ml[w].cap);
                    }
                }
            }
        }
    }
}
