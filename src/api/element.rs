//! The element types a window can hold.

mod sealed {
    pub trait Sealed {}
}

/// A plain numeric type usable in windows: `i8`…`i64`, `u8`…`u64`, `f32`,
/// `f64`. Sealed: the library relies on every bit pattern being valid and on
/// the type having no padding.
pub trait Element:
    bytemuck::Pod + Send + Sync + sealed::Sealed + std::fmt::Debug + 'static
{
    /// Tag stored in window descriptors so mismatched types across ranks are detected.
    const TAG: u64;
    /// Type name for messages.
    const NAME: &'static str;
    /// The element type in the transport's vocabulary, for atomic
    /// operations (its code is also [`Element::TAG`]).
    #[doc(hidden)]
    const DATATYPE: crate::transport::Datatype;
    /// Whether the type is an integer: bitwise and logical accumulate
    /// operations are defined only on integers.
    const INTEGER: bool;
}

/// The integer element types (`i8`…`i64`, `u8`…`u64`): the only ones the
/// bitwise and logical accumulate operations ([`IntOp`](crate::IntOp)) take.
/// Sealed.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an integer element type",
    label = "bitwise and logical operations (IntOp) are defined on i8…u64 only",
    note = "as in MPI, BAND/BOR/BXOR and LAND/LOR/LXOR take integers, not floating point; \
            use AnyOp to choose the operation at run time (checked when the call runs)"
)]
pub trait Integer: Element {
    /// The std atomic type of the same size (`AtomicU64` for `u64`, ...):
    /// the cells of [`Window::atomic_slice`](crate::Window::atomic_slice).
    type Atomic: crate::transport::memory::AtomicCell;
}

macro_rules! element {
    ($($t:ty => $dt:ident, $int:expr);* $(;)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const TAG: u64 = crate::transport::Datatype::$dt as u64;
            const NAME: &'static str = stringify!($t);
            const DATATYPE: crate::transport::Datatype = crate::transport::Datatype::$dt;
            const INTEGER: bool = $int;
        }
    )*};
}

macro_rules! integer {
    ($($t:ty => $a:ident),*) => {$(
        impl Integer for $t {
            type Atomic = std::sync::atomic::$a;
        }
    )*};
}

integer!(i8 => AtomicI8, i16 => AtomicI16, i32 => AtomicI32, i64 => AtomicI64,
         u8 => AtomicU8, u16 => AtomicU16, u32 => AtomicU32, u64 => AtomicU64);

element! {
    i8 => I8, true;
    i16 => I16, true;
    i32 => I32, true;
    i64 => I64, true;
    u8 => U8, true;
    u16 => U16, true;
    u32 => U32, true;
    u64 => U64, true;
    f32 => F32, false;
    f64 => F64, false;
}

/// Name of the element type with `tag`, for error messages.
pub fn tag_name(tag: u64) -> &'static str {
    crate::transport::Datatype::from_code(tag).map_or("unknown", |d| d.name())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flag<T: Element>() -> bool {
        T::INTEGER
    }

    fn integer<T: Integer>() -> bool {
        T::INTEGER
    }

    #[test]
    fn integer_marker_matches_the_integer_flag() {
        // The typed rule (`Integer`) and the run-time rule (`INTEGER`, used
        // for `AnyOp` and the path decision) must agree.
        let ints = [
            integer::<i8>(),
            integer::<i16>(),
            integer::<i32>(),
            integer::<i64>(),
            integer::<u8>(),
            integer::<u16>(),
            integer::<u32>(),
            integer::<u64>(),
        ];
        assert!(ints.iter().all(|&b| b));
        assert_eq!([flag::<f32>(), flag::<f64>()], [false, false]);
    }
}
