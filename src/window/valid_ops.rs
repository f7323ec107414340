//! A window's memo of which provider atomics exist for its element type
//! (`Transport::atomic_valid` answers under a mutex and a hash lookup; the
//! answer for one window never changes). One atomic word per
//! `AtomicKind`, two bits per `fi_op` below 32: known, valid.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::transport::AtomicKind;

/// See the module doc.
#[derive(Default)]
pub struct ValidOps {
    words: [AtomicU64; 3],
}

fn index(kind: AtomicKind) -> usize {
    match kind {
        AtomicKind::Update => 0,
        AtomicKind::Fetch => 1,
        AtomicKind::Compare => 2,
    }
}

impl ValidOps {
    /// Whether `op` of `kind` is offered: remembered, else `ask` (and
    /// remembered when `op` < 32). Concurrent askers store the same answer.
    #[inline]
    pub fn get(&self, op: u32, kind: AtomicKind, ask: impl FnOnce() -> bool) -> bool {
        if op >= 32 {
            return ask();
        }
        let w = &self.words[index(kind)];
        let (known, valid) = (1u64 << (2 * op), 1u64 << (2 * op + 1));
        let bits = w.load(Ordering::Relaxed);
        if bits & known != 0 {
            return bits & valid != 0;
        }
        let v = ask();
        w.fetch_or(known | if v { valid } else { 0 }, Ordering::Relaxed);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_per_kind() {
        let m = ValidOps::default();
        assert!(m.get(3, AtomicKind::Fetch, || true));
        assert!(m.get(3, AtomicKind::Fetch, || panic!("asked twice")));
        assert!(!m.get(3, AtomicKind::Update, || false));
        assert!(!m.get(3, AtomicKind::Update, || panic!("asked twice")));
        assert!(m.get(40, AtomicKind::Compare, || true));
        let mut n = 0;
        m.get(40, AtomicKind::Compare, || {
            n += 1;
            true
        });
        assert_eq!(n, 1, "ops of 32 and up are not remembered");
    }
}
