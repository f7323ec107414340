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
    /// The libfabric `fi_datatype` of the type (`FI_INT64`, `FI_DOUBLE`, ...),
    /// for atomic operations.
    const DATATYPE: u32;
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
pub trait Integer: Element {}

macro_rules! element {
    ($($t:ty => $tag:expr, $dt:ident, $int:expr);* $(;)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const TAG: u64 = $tag;
            const NAME: &'static str = stringify!($t);
            const DATATYPE: u32 = libfabric_sys::$dt;
            const INTEGER: bool = $int;
        }
    )*};
}

macro_rules! integer {
    ($($t:ty),*) => {$(
        impl Integer for $t {}
    )*};
}

integer!(i8, i16, i32, i64, u8, u16, u32, u64);

element! {
    i8 => 1, FI_INT8, true;
    i16 => 2, FI_INT16, true;
    i32 => 3, FI_INT32, true;
    i64 => 4, FI_INT64, true;
    u8 => 5, FI_UINT8, true;
    u16 => 6, FI_UINT16, true;
    u32 => 7, FI_UINT32, true;
    u64 => 8, FI_UINT64, true;
    f32 => 9, FI_FLOAT, false;
    f64 => 10, FI_DOUBLE, false;
}

/// Name of the element type with `tag`, for error messages.
pub fn tag_name(tag: u64) -> &'static str {
    match tag {
        1 => "i8",
        2 => "i16",
        3 => "i32",
        4 => "i64",
        5 => "u8",
        6 => "u16",
        7 => "u32",
        8 => "u64",
        9 => "f32",
        10 => "f64",
        _ => "unknown",
    }
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
