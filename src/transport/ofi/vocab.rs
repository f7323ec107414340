//! The seam's vocabulary in libfabric's terms: the only place that maps a
//! [`Datatype`] or [`AtomicOp`] to an `fi_datatype` / `fi_op`.

use libfabric_sys as fi;

use crate::transport::{AtomicOp, AtomicOrder, Datatype};

/// The `fi_datatype` of `d`.
pub fn datatype(d: Datatype) -> fi::fi_datatype {
    match d {
        Datatype::I8 => fi::FI_INT8,
        Datatype::I16 => fi::FI_INT16,
        Datatype::I32 => fi::FI_INT32,
        Datatype::I64 => fi::FI_INT64,
        Datatype::U8 => fi::FI_UINT8,
        Datatype::U16 => fi::FI_UINT16,
        Datatype::U32 => fi::FI_UINT32,
        Datatype::U64 => fi::FI_UINT64,
        Datatype::F32 => fi::FI_FLOAT,
        Datatype::F64 => fi::FI_DOUBLE,
    }
}

/// The `fi_op` of `o` (`Replace` is `FI_ATOMIC_WRITE`, `Read` is
/// `FI_ATOMIC_READ`).
pub fn op(o: AtomicOp) -> fi::fi_op {
    match o {
        AtomicOp::Sum => fi::FI_SUM,
        AtomicOp::Prod => fi::FI_PROD,
        AtomicOp::Min => fi::FI_MIN,
        AtomicOp::Max => fi::FI_MAX,
        AtomicOp::Band => fi::FI_BAND,
        AtomicOp::Bor => fi::FI_BOR,
        AtomicOp::Bxor => fi::FI_BXOR,
        AtomicOp::Land => fi::FI_LAND,
        AtomicOp::Lor => fi::FI_LOR,
        AtomicOp::Lxor => fi::FI_LXOR,
        AtomicOp::Replace => fi::FI_ATOMIC_WRITE,
        AtomicOp::Read => fi::FI_ATOMIC_READ,
        AtomicOp::Cswap => fi::FI_CSWAP,
    }
}

/// The atomic orderings among libfabric's `msg_order` bits.
pub fn atomic_order(msg_order: u64) -> AtomicOrder {
    [
        (fi::FI_ORDER_ATOMIC_RAR, AtomicOrder::RAR),
        (fi::FI_ORDER_ATOMIC_RAW, AtomicOrder::RAW),
        (fi::FI_ORDER_ATOMIC_WAR, AtomicOrder::WAR),
        (fi::FI_ORDER_ATOMIC_WAW, AtomicOrder::WAW),
    ]
    .iter()
    .filter(|(bit, _)| msg_order & bit != 0)
    .fold(AtomicOrder::NONE, |acc, (_, o)| acc | *o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_maps_to_a_distinct_libfabric_value() {
        let dts: std::collections::HashSet<_> = Datatype::ALL.map(datatype).into();
        assert_eq!(dts.len(), Datatype::ALL.len());
        let ops: std::collections::HashSet<_> = AtomicOp::ALL.map(op).into();
        assert_eq!(ops.len(), AtomicOp::ALL.len());
        assert_eq!(
            atomic_order(fi::FI_ORDER_ATOMIC_RAW | fi::FI_ORDER_ATOMIC_WAW | fi::FI_ORDER_RMA_RAW),
            AtomicOrder::RAW | AtomicOrder::WAW
        );
    }
}
