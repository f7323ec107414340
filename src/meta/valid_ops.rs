//! Which back-end atomics exist for a window's element type: the rows of the
//! back-end's capability table for that type, copied at creation into one
//! word per `AtomicKind` (bit = operation code), so the per-operation check
//! is a bit test, with no call into the back-end.

use crate::transport::{AtomicKind, AtomicOp, AtomicTable, Datatype};

/// See the module doc.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ValidOps {
    words: [u16; 3],
}

fn index(kind: AtomicKind) -> usize {
    match kind {
        AtomicKind::Update => 0,
        AtomicKind::Fetch => 1,
        AtomicKind::Compare => 2,
    }
}

impl ValidOps {
    /// The calls `table` offers on `datatype`.
    pub fn of(table: &AtomicTable, datatype: Datatype) -> ValidOps {
        let mut v = ValidOps::default();
        for kind in AtomicKind::ALL {
            for op in AtomicOp::ALL {
                if table.offers(op, datatype, kind) {
                    v.words[index(kind)] |= 1 << op.code();
                }
            }
        }
        v
    }

    /// Whether `op` of `kind` is offered.
    #[inline]
    pub fn get(&self, op: AtomicOp, kind: AtomicKind) -> bool {
        self.words[index(kind)] & (1 << op.code()) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_the_rows_of_one_type() {
        let mut t = AtomicTable::none();
        t.set(AtomicOp::Max, Datatype::F64, AtomicKind::Fetch, 1);
        t.set(AtomicOp::Max, Datatype::I64, AtomicKind::Update, 1);
        let v = ValidOps::of(&t, Datatype::F64);
        assert!(v.get(AtomicOp::Max, AtomicKind::Fetch));
        assert!(!v.get(AtomicOp::Max, AtomicKind::Update));
        assert!(!v.get(AtomicOp::Sum, AtomicKind::Fetch));
    }
}
