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
}

macro_rules! element {
    ($($t:ty => $tag:expr),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const TAG: u64 = $tag;
            const NAME: &'static str = stringify!($t);
        }
    )*};
}

element! {
    i8 => 1, i16 => 2, i32 => 3, i64 => 4,
    u8 => 5, u16 => 6, u32 => 7, u64 => 8,
    f32 => 9, f64 => 10,
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
