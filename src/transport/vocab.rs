//! The seam's vocabulary: element datatypes and atomic operations as the
//! library names them. Back-ends map these to their own values (libfabric's
//! `fi_datatype`/`fi_op` in `ofi/vocab.rs`, verbs opcodes in `verbs/`); no
//! back-end value travels above the transport layer or on the wire of the
//! software protocols, which carry the `u8` codes defined here.

use std::fmt;

/// The element types of windows and atomic operations.
///
/// The discriminants are the wire codes (and the type tags stored in
/// window descriptors): stable, never reused.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Datatype {
    /// `i8`.
    I8 = 1,
    /// `i16`.
    I16 = 2,
    /// `i32`.
    I32 = 3,
    /// `i64`.
    I64 = 4,
    /// `u8`.
    U8 = 5,
    /// `u16`.
    U16 = 6,
    /// `u32`.
    U32 = 7,
    /// `u64`.
    U64 = 8,
    /// `f32`.
    F32 = 9,
    /// `f64`.
    F64 = 10,
}

impl Datatype {
    /// Every datatype, in code order.
    pub const ALL: [Datatype; 10] = [
        Datatype::I8,
        Datatype::I16,
        Datatype::I32,
        Datatype::I64,
        Datatype::U8,
        Datatype::U16,
        Datatype::U32,
        Datatype::U64,
        Datatype::F32,
        Datatype::F64,
    ];

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            Datatype::I8 | Datatype::U8 => 1,
            Datatype::I16 | Datatype::U16 => 2,
            Datatype::I32 | Datatype::U32 | Datatype::F32 => 4,
            Datatype::I64 | Datatype::U64 | Datatype::F64 => 8,
        }
    }

    /// Whether the type is an integer (bitwise and logical operations are
    /// defined on integers only).
    pub const fn is_integer(self) -> bool {
        !matches!(self, Datatype::F32 | Datatype::F64)
    }

    /// The Rust name (`i64`, `f64`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            Datatype::I8 => "i8",
            Datatype::I16 => "i16",
            Datatype::I32 => "i32",
            Datatype::I64 => "i64",
            Datatype::U8 => "u8",
            Datatype::U16 => "u16",
            Datatype::U32 => "u32",
            Datatype::U64 => "u64",
            Datatype::F32 => "f32",
            Datatype::F64 => "f64",
        }
    }

    /// The wire code.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// The datatype of a wire code; `None` for unknown codes (peer input).
    pub fn from_code(code: u64) -> Option<Datatype> {
        Datatype::ALL
            .into_iter()
            .find(|d| u64::from(d.code()) == code)
    }
}

impl fmt::Display for Datatype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Atomic operations on remote elements: MPI's reduction operations, the
/// atomic read (`MPI_NO_OP`) and write (`MPI_REPLACE`), and
/// compare-and-swap.
///
/// The discriminants are the wire codes and the bit numbers of a window's
/// software-path mask (`Sum` = bit 0 ... `Cswap` = bit 12).
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AtomicOp {
    /// Sum (integers wrap).
    Sum = 0,
    /// Product (integers wrap).
    Prod = 1,
    /// Minimum (the target is kept unless the operand is strictly less).
    Min = 2,
    /// Maximum (the target is kept unless the operand is strictly greater).
    Max = 3,
    /// Bitwise and.
    Band = 4,
    /// Bitwise or.
    Bor = 5,
    /// Bitwise exclusive or.
    Bxor = 6,
    /// Logical and (0 or 1).
    Land = 7,
    /// Logical or.
    Lor = 8,
    /// Logical exclusive or.
    Lxor = 9,
    /// Atomic write (`MPI_REPLACE`).
    Replace = 10,
    /// Atomic read (`MPI_NO_OP`).
    Read = 11,
    /// Compare-and-swap of one element (compares bit patterns).
    Cswap = 12,
}

impl AtomicOp {
    /// Every operation, in code order.
    pub const ALL: [AtomicOp; 13] = [
        AtomicOp::Sum,
        AtomicOp::Prod,
        AtomicOp::Min,
        AtomicOp::Max,
        AtomicOp::Band,
        AtomicOp::Bor,
        AtomicOp::Bxor,
        AtomicOp::Land,
        AtomicOp::Lor,
        AtomicOp::Lxor,
        AtomicOp::Replace,
        AtomicOp::Read,
        AtomicOp::Cswap,
    ];

    /// The wire code, also the bit of the operation in a window's
    /// software-path mask.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// The operation of a wire code; `None` for unknown codes (peer input).
    pub fn from_code(code: u64) -> Option<AtomicOp> {
        AtomicOp::ALL
            .into_iter()
            .find(|o| u64::from(o.code()) == code)
    }

    /// The MPI name (`MPI_SUM` without the prefix; `CSWAP` for
    /// compare-and-swap).
    pub const fn name(self) -> &'static str {
        match self {
            AtomicOp::Sum => "SUM",
            AtomicOp::Prod => "PROD",
            AtomicOp::Min => "MIN",
            AtomicOp::Max => "MAX",
            AtomicOp::Band => "BAND",
            AtomicOp::Bor => "BOR",
            AtomicOp::Bxor => "BXOR",
            AtomicOp::Land => "LAND",
            AtomicOp::Lor => "LOR",
            AtomicOp::Lxor => "LXOR",
            AtomicOp::Replace => "REPLACE",
            AtomicOp::Read => "NO_OP",
            AtomicOp::Cswap => "CSWAP",
        }
    }

    /// Bitwise and logical operations: defined on integers only.
    pub const fn integer_only(self) -> bool {
        matches!(
            self,
            AtomicOp::Band
                | AtomicOp::Bor
                | AtomicOp::Bxor
                | AtomicOp::Land
                | AtomicOp::Lor
                | AtomicOp::Lxor
        )
    }

    /// Whether the operation is defined on `datatype`.
    pub const fn defined_on(self, datatype: Datatype) -> bool {
        datatype.is_integer() || !self.integer_only()
    }
}

impl fmt::Display for AtomicOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The three families of atomic calls a back-end may offer separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AtomicKind {
    /// Update, nothing returned.
    Update,
    /// Update, the previous value returned.
    Fetch,
    /// Compare-and-swap.
    Compare,
}

impl AtomicKind {
    /// Every kind.
    pub const ALL: [AtomicKind; 3] = [AtomicKind::Update, AtomicKind::Fetch, AtomicKind::Compare];

    /// For messages.
    pub const fn name(self) -> &'static str {
        match self {
            AtomicKind::Update => "atomic update",
            AtomicKind::Fetch => "fetching atomic",
            AtomicKind::Compare => "compare-and-swap",
        }
    }
}

/// One atomic call: `op` on `count` elements of `datatype`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Atomic {
    /// The operation.
    pub op: AtomicOp,
    /// The element type.
    pub datatype: Datatype,
    /// Number of elements.
    pub count: usize,
}

/// Orderings between atomic operations to one target (MPI's
/// `accumulate_ordering` info key): read-after-read, read-after-write,
/// write-after-read, write-after-write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AtomicOrder(pub u8);

impl AtomicOrder {
    /// Read after read.
    pub const RAR: AtomicOrder = AtomicOrder(1);
    /// Read after write.
    pub const RAW: AtomicOrder = AtomicOrder(2);
    /// Write after read.
    pub const WAR: AtomicOrder = AtomicOrder(4);
    /// Write after write.
    pub const WAW: AtomicOrder = AtomicOrder(8);
    /// No ordering.
    pub const NONE: AtomicOrder = AtomicOrder(0);
    /// All four (MPI's default).
    pub const ALL: AtomicOrder = AtomicOrder(15);

    /// Whether every ordering of `other` is in `self`.
    pub const fn contains(self, other: AtomicOrder) -> bool {
        self.0 & other.0 == other.0
    }

    /// The union.
    pub const fn union(self, other: AtomicOrder) -> AtomicOrder {
        AtomicOrder(self.0 | other.0)
    }

    /// The orderings of `self` that `other` lacks.
    pub const fn minus(self, other: AtomicOrder) -> AtomicOrder {
        AtomicOrder(self.0 & !other.0)
    }

    /// No ordering at all.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl std::ops::BitOr for AtomicOrder {
    type Output = AtomicOrder;
    fn bitor(self, rhs: AtomicOrder) -> AtomicOrder {
        self.union(rhs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_reject_unknown() {
        for d in Datatype::ALL {
            assert_eq!(Datatype::from_code(d.code().into()), Some(d));
        }
        for o in AtomicOp::ALL {
            assert_eq!(AtomicOp::from_code(o.code().into()), Some(o));
        }
        for bad in [0u64, 11, 255, 1 << 40] {
            assert_eq!(Datatype::from_code(bad), None);
        }
        for bad in [13u64, 255, u64::MAX] {
            assert_eq!(AtomicOp::from_code(bad), None);
        }
        // Mask bits: 13 operations fit below bit 63 (the put-policy bit).
        assert!(AtomicOp::ALL.iter().all(|o| o.code() < 63));
    }

    #[test]
    fn integer_only_ops_are_undefined_on_floats() {
        assert!(!AtomicOp::Band.defined_on(Datatype::F64));
        assert!(AtomicOp::Band.defined_on(Datatype::U8));
        assert!(AtomicOp::Sum.defined_on(Datatype::F32));
        assert_eq!(
            Datatype::ALL.iter().map(|d| d.size()).sum::<usize>(),
            1 + 2 + 4 + 8 + 1 + 2 + 4 + 8 + 4 + 8
        );
    }
}
