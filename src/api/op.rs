//! The reduction operations of the accumulate family (`MPI_Op`), typed so
//! that the combinations MPI forbids do not compile.
//!
//! * [`Op`] — `SUM PROD MIN MAX REPLACE`: defined on every element type.
//! * [`IntOp`] — `BAND BOR BXOR LAND LOR LXOR`: defined on integer types
//!   only ([`Integer`]), as in MPI-3.1 §5.9.2, where the logical operations
//!   take C integers and logicals and the bitwise ones C integers and bytes,
//!   never floating point.
//! * [`NoOp`] — `NO_OP`: an atomic read, accepted only by the fetching calls
//!   (`get_accumulate`, `rget_accumulate`, `fetch_and_op`).
//! * [`AnyOp`] — any of the twelve, for operations chosen at run time (a
//!   benchmark option, a randomized test). Its combinations are checked when
//!   the call runs: an integer-only operation on `f32`/`f64`, or `NO_OP` to
//!   `accumulate`, is an `Error::InvalidArgument`.
//!
//! The accumulate-family methods take `impl OpFor<T>` (updates) or
//! `impl FetchOpFor<T>` (fetching calls). A bitwise or logical operation on
//! a floating-point window does not compile:
//!
//! ```compile_fail
//! # fn f(win: &onesided::Window<'_, f64>) -> onesided::Result<()> {
//! win.accumulate(1, 0, &[1.0f64], onesided::IntOp::Band)?; // f64 is no Integer
//! # Ok(()) }
//! ```
//!
//! ```compile_fail
//! # fn f(win: &onesided::Window<'_, f32>) -> onesided::Result<()> {
//! let old = win.fetch_and_op(1, 0, 1.0f32, onesided::IntOp::Lor)?; // logical: integers only
//! # Ok(()) }
//! ```
//!
//! Nor does `NO_OP` where nothing is fetched:
//!
//! ```compile_fail
//! # fn f(win: &onesided::Window<'_, i64>) -> onesided::Result<()> {
//! win.accumulate(1, 0, &[1i64], onesided::NoOp)?; // NO_OP only fetches
//! # Ok(()) }
//! ```
//!
//! The same calls with allowed combinations compile (and the run-time
//! spelling compiles for any type, to be checked when it runs):
//!
//! ```no_run
//! # fn f(fw: &onesided::Window<'_, f64>, iw: &onesided::Window<'_, u32>) -> onesided::Result<()> {
//! use onesided::{AnyOp, IntOp, NoOp, Op};
//! fw.accumulate(1, 0, &[1.0f64], Op::Sum)?;
//! iw.accumulate(1, 0, &[0xf0u32], IntOp::Band)?;
//! let old: u32 = iw.fetch_and_op(1, 0, 1, IntOp::Lor)?;
//! let now: f64 = fw.fetch_and_op(1, 0, 0.0, NoOp)?;
//! let mut res = [0.0f64; 2];
//! fw.get_accumulate(1, 0, &[], &mut res, NoOp)?;
//! assert!(fw.accumulate(1, 0, &[1.0], AnyOp::Band).is_err()); // checked at run time
//! # let _ = (old, now); Ok(()) }
//! ```

use std::fmt;

use crate::api::element::{Element, Integer};
use crate::transport::AtomicOp;

mod sealed {
    pub trait Sealed {}
}

/// Operations defined on every element type.
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
    /// `o`: an atomic write (swap when fetching).
    Replace,
}

/// Bitwise and logical operations: defined on integer element types only
/// (`i8`…`u64`); on `f32`/`f64` they do not compile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IntOp {
    /// `t & o`.
    Band,
    /// `t | o`.
    Bor,
    /// `t ^ o`.
    Bxor,
    /// `(t != 0) && (o != 0)` as 0/1.
    Land,
    /// `(t != 0) || (o != 0)` as 0/1.
    Lor,
    /// `(t != 0) != (o != 0)` as 0/1.
    Lxor,
}

/// `NO_OP`: the target value unchanged, an atomic read. Only for the
/// fetching calls (`get_accumulate`, `rget_accumulate`, `fetch_and_op`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NoOp;

/// Any accumulate operation, chosen at run time: its combination with the
/// element type and the call is checked when the call runs (`Err`), not
/// when it compiles. Prefer [`Op`], [`IntOp`] and [`NoOp`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AnyOp {
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
    /// Every operation defined on every element type.
    pub const ALL: [Op; 5] = [Op::Sum, Op::Prod, Op::Min, Op::Max, Op::Replace];
}

impl IntOp {
    /// Every integer-only operation.
    pub const ALL: [IntOp; 6] = [
        IntOp::Band,
        IntOp::Bor,
        IntOp::Bxor,
        IntOp::Land,
        IntOp::Lor,
        IntOp::Lxor,
    ];
}

impl AnyOp {
    /// Every operation (this order numbers the software-path mask bits).
    pub const ALL: [AnyOp; 12] = [
        AnyOp::Sum,
        AnyOp::Prod,
        AnyOp::Min,
        AnyOp::Max,
        AnyOp::Band,
        AnyOp::Bor,
        AnyOp::Bxor,
        AnyOp::Land,
        AnyOp::Lor,
        AnyOp::Lxor,
        AnyOp::Replace,
        AnyOp::NoOp,
    ];

    /// The MPI name (`MPI_SUM` without the prefix).
    pub fn name(self) -> &'static str {
        match self {
            AnyOp::Sum => "SUM",
            AnyOp::Prod => "PROD",
            AnyOp::Min => "MIN",
            AnyOp::Max => "MAX",
            AnyOp::Band => "BAND",
            AnyOp::Bor => "BOR",
            AnyOp::Bxor => "BXOR",
            AnyOp::Land => "LAND",
            AnyOp::Lor => "LOR",
            AnyOp::Lxor => "LXOR",
            AnyOp::Replace => "REPLACE",
            AnyOp::NoOp => "NO_OP",
        }
    }

    /// The operation in the transport's vocabulary (`REPLACE` is an atomic
    /// write, `NO_OP` an atomic read).
    pub(crate) fn atomic_op(self) -> AtomicOp {
        match self {
            AnyOp::Sum => AtomicOp::Sum,
            AnyOp::Prod => AtomicOp::Prod,
            AnyOp::Min => AtomicOp::Min,
            AnyOp::Max => AtomicOp::Max,
            AnyOp::Band => AtomicOp::Band,
            AnyOp::Bor => AtomicOp::Bor,
            AnyOp::Bxor => AtomicOp::Bxor,
            AnyOp::Land => AtomicOp::Land,
            AnyOp::Lor => AtomicOp::Lor,
            AnyOp::Lxor => AtomicOp::Lxor,
            AnyOp::Replace => AtomicOp::Replace,
            AnyOp::NoOp => AtomicOp::Read,
        }
    }

    /// Bitwise and logical operations: defined only on integer types (as in
    /// MPI, where `MPI_BAND` and `MPI_LAND` take integers, not floats).
    pub fn integer_only(self) -> bool {
        matches!(
            self,
            AnyOp::Band | AnyOp::Bor | AnyOp::Bxor | AnyOp::Land | AnyOp::Lor | AnyOp::Lxor
        )
    }
}

impl fmt::Display for AnyOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl From<Op> for AnyOp {
    fn from(op: Op) -> AnyOp {
        match op {
            Op::Sum => AnyOp::Sum,
            Op::Prod => AnyOp::Prod,
            Op::Min => AnyOp::Min,
            Op::Max => AnyOp::Max,
            Op::Replace => AnyOp::Replace,
        }
    }
}

impl From<IntOp> for AnyOp {
    fn from(op: IntOp) -> AnyOp {
        match op {
            IntOp::Band => AnyOp::Band,
            IntOp::Bor => AnyOp::Bor,
            IntOp::Bxor => AnyOp::Bxor,
            IntOp::Land => AnyOp::Land,
            IntOp::Lor => AnyOp::Lor,
            IntOp::Lxor => AnyOp::Lxor,
        }
    }
}

impl From<NoOp> for AnyOp {
    fn from(_: NoOp) -> AnyOp {
        AnyOp::NoOp
    }
}

macro_rules! display_via_any {
    ($($t:ty),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(AnyOp::from(*self).name())
            }
        }
        impl sealed::Sealed for $t {}
    )*};
}
display_via_any!(Op, IntOp, NoOp);
impl sealed::Sealed for AnyOp {}

/// An operation `accumulate` and `raccumulate` take on elements of `T`:
/// [`Op`] for every `T`, [`IntOp`] for integers, [`AnyOp`] (checked at run
/// time). Sealed.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an accumulate operation on `{T}` elements",
    note = "NO_OP only fetches: use it with get_accumulate, rget_accumulate or fetch_and_op"
)]
pub trait OpFor<T: Element>: FetchOpFor<T> {}

/// An operation the fetching calls (`get_accumulate`, `rget_accumulate`,
/// `fetch_and_op`) take on elements of `T`: every [`OpFor<T>`] and
/// [`NoOp`]. Sealed.
pub trait FetchOpFor<T: Element>: Copy + fmt::Display + sealed::Sealed {
    /// The operation as its run-time value.
    fn any(self) -> AnyOp;
}

impl<T: Element> FetchOpFor<T> for Op {
    fn any(self) -> AnyOp {
        self.into()
    }
}
impl<T: Element> OpFor<T> for Op {}

impl<T: Integer> FetchOpFor<T> for IntOp {
    fn any(self) -> AnyOp {
        self.into()
    }
}
impl<T: Integer> OpFor<T> for IntOp {}

impl<T: Element> FetchOpFor<T> for AnyOp {
    fn any(self) -> AnyOp {
        self
    }
}
impl<T: Element> OpFor<T> for AnyOp {}

impl<T: Element> FetchOpFor<T> for NoOp {
    fn any(self) -> AnyOp {
        AnyOp::NoOp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_ops_map_onto_any_op() {
        let typed: Vec<AnyOp> = (Op::ALL.into_iter().map(AnyOp::from))
            .chain(IntOp::ALL.into_iter().map(AnyOp::from))
            .chain([AnyOp::from(NoOp)])
            .collect();
        // Every run-time operation has exactly one typed spelling, and the
        // typed split is exactly the integer-only rule.
        for op in AnyOp::ALL {
            assert_eq!(typed.iter().filter(|&&t| t == op).count(), 1, "{op}");
        }
        assert_eq!(typed.len(), AnyOp::ALL.len());
        for op in IntOp::ALL {
            assert!(AnyOp::from(op).integer_only(), "{op}");
        }
        assert!(!AnyOp::ALL
            .into_iter()
            .filter(|o| !o.integer_only())
            .any(|o| IntOp::ALL.iter().any(|&i| AnyOp::from(i) == o)));
        assert_eq!(IntOp::Lxor.to_string(), "LXOR");
        assert_eq!(NoOp.to_string(), "NO_OP");
        assert_eq!(<Op as FetchOpFor<f64>>::any(Op::Max), AnyOp::Max);
    }
}
