//! The reduction operations of the accumulate family (`MPI_Op`).

use std::fmt;

use libfabric_sys as fi;

/// What an accumulate does with the origin value `o` and the target value `t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// `t + o` (wrapping on integers).
    Sum,
    /// `t * o` (wrapping on integers).
    Prod,
    /// `min(t, o)`.
    Min,
    /// `max(t, o)`.
    Max,
    /// `t & o` (integers only).
    Band,
    /// `t | o` (integers only).
    Bor,
    /// `t ^ o` (integers only).
    Bxor,
    /// `(t != 0) && (o != 0)` as 0/1 (integers only).
    Land,
    /// `(t != 0) || (o != 0)` as 0/1 (integers only).
    Lor,
    /// `(t != 0) != (o != 0)` as 0/1 (integers only).
    Lxor,
    /// `o`: an atomic write (swap when fetching).
    Replace,
    /// `t` unchanged: an atomic read (only for fetching operations).
    NoOp,
}

impl Op {
    /// Every operation.
    pub const ALL: [Op; 12] = [
        Op::Sum,
        Op::Prod,
        Op::Min,
        Op::Max,
        Op::Band,
        Op::Bor,
        Op::Bxor,
        Op::Land,
        Op::Lor,
        Op::Lxor,
        Op::Replace,
        Op::NoOp,
    ];

    /// The MPI name (`MPI_SUM` without the prefix).
    pub fn name(self) -> &'static str {
        match self {
            Op::Sum => "SUM",
            Op::Prod => "PROD",
            Op::Min => "MIN",
            Op::Max => "MAX",
            Op::Band => "BAND",
            Op::Bor => "BOR",
            Op::Bxor => "BXOR",
            Op::Land => "LAND",
            Op::Lor => "LOR",
            Op::Lxor => "LXOR",
            Op::Replace => "REPLACE",
            Op::NoOp => "NO_OP",
        }
    }

    /// The libfabric `fi_op` (`REPLACE` is `FI_ATOMIC_WRITE`, `NO_OP` is
    /// `FI_ATOMIC_READ`).
    pub fn fi_op(self) -> u32 {
        match self {
            Op::Sum => fi::FI_SUM,
            Op::Prod => fi::FI_PROD,
            Op::Min => fi::FI_MIN,
            Op::Max => fi::FI_MAX,
            Op::Band => fi::FI_BAND,
            Op::Bor => fi::FI_BOR,
            Op::Bxor => fi::FI_BXOR,
            Op::Land => fi::FI_LAND,
            Op::Lor => fi::FI_LOR,
            Op::Lxor => fi::FI_LXOR,
            Op::Replace => fi::FI_ATOMIC_WRITE,
            Op::NoOp => fi::FI_ATOMIC_READ,
        }
    }

    /// Bitwise and logical operations: defined only on integer types (as in
    /// MPI, where `MPI_BAND` and `MPI_LAND` take integers, not floats).
    pub fn integer_only(self) -> bool {
        matches!(
            self,
            Op::Band | Op::Bor | Op::Bxor | Op::Land | Op::Lor | Op::Lxor
        )
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
