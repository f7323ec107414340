//! Accumulate operations applied by this CPU, element by element, with
//! atomic instructions.
//!
//! This is what a target runs when the network cannot apply an accumulate
//! (the software path) and what node-local origins run directly on a mapped
//! peer window. MPI makes accumulates atomic *per basic element*, so each
//! element is one atomic read-modify-write (a single instruction for
//! `REPLACE`, `NO_OP` and the integer `SUM`/bitwise ops, a compare-exchange
//! loop for the rest). Two processes running these functions on the same
//! memory therefore never lose an update, and disjoint or overlapping
//! updates proceed in parallel without any lock.
//!
//! They are **not** atomic with respect to a provider's own atomics (which
//! may be plain read-modify-writes in the target's progress code, or a NIC's):
//! a window must never mix the two paths on one location. That choice is
//! made per window, identically on every rank (see `docs/semantics.md`).
//!
//! Operations and element types are the seam's [`AtomicOp`] and
//! [`Datatype`]. Semantics follow libfabric's software atomics (and what
//! NICs do), so the hardware and software paths give the same results:
//! integer `SUM`/`PROD` wrap, `MIN`/`MAX` keep the target unless the origin
//! compares strictly less/greater, logical ops yield 0 or 1, and
//! compare-and-swap compares bit patterns.

use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};

use super::{Atomic, AtomicOp, Datatype, Memory};
use crate::error::{Error, Result};

/// Whether `op` on `datatype` is supported by [`accumulate`] (every
/// operation defined on the type but compare-and-swap, which is
/// [`compare_swap`]).
pub fn supports(op: AtomicOp, datatype: Datatype) -> bool {
    op != AtomicOp::Cswap && op.defined_on(datatype)
}

/// A primitive element type: its bits, and the operations on its values.
trait Prim: Copy {
    type Bits: Copy;
    /// Integers: `SUM` and the bitwise operations on the bits are the
    /// operations on the values (two's complement), so one `lock xadd`,
    /// `lock and`, ... does them (floats need a compare-exchange loop).
    const INTEGER: bool;
    fn from_bits(b: Self::Bits) -> Self;
    fn to_bits(self) -> Self::Bits;
    /// `None` when `op` is not defined on this type.
    fn apply(op: AtomicOp, t: Self, o: Self) -> Option<Self>;
}

macro_rules! int_prim {
    ($($t:ty => $bits:ty),* $(,)?) => {$(
        impl Prim for $t {
            type Bits = $bits;
            const INTEGER: bool = true;
            #[inline(always)]
            fn from_bits(b: $bits) -> Self {
                b as $t
            }
            #[inline(always)]
            fn to_bits(self) -> $bits {
                self as $bits
            }
            fn apply(op: AtomicOp, t: Self, o: Self) -> Option<Self> {
                let truth = |x: Self| x != 0;
                Some(match op {
                    AtomicOp::Sum => t.wrapping_add(o),
                    AtomicOp::Prod => t.wrapping_mul(o),
                    AtomicOp::Min => if o < t { o } else { t },
                    AtomicOp::Max => if o > t { o } else { t },
                    AtomicOp::Band => t & o,
                    AtomicOp::Bor => t | o,
                    AtomicOp::Bxor => t ^ o,
                    AtomicOp::Land => (truth(t) && truth(o)) as $t,
                    AtomicOp::Lor => (truth(t) || truth(o)) as $t,
                    AtomicOp::Lxor => (truth(t) != truth(o)) as $t,
                    AtomicOp::Replace => o,
                    AtomicOp::Read => t,
                    _ => return None,
                })
            }
        }
    )*};
}

int_prim! {
    i8 => u8, u8 => u8, i16 => u16, u16 => u16,
    i32 => u32, u32 => u32, i64 => u64, u64 => u64,
}

macro_rules! float_prim {
    ($($t:ty => $bits:ty),* $(,)?) => {$(
        impl Prim for $t {
            type Bits = $bits;
            const INTEGER: bool = false;
            #[inline(always)]
            fn from_bits(b: $bits) -> Self {
                <$t>::from_bits(b)
            }
            #[inline(always)]
            fn to_bits(self) -> $bits {
                <$t>::to_bits(self)
            }
            fn apply(op: AtomicOp, t: Self, o: Self) -> Option<Self> {
                Some(match op {
                    AtomicOp::Sum => t + o,
                    AtomicOp::Prod => t * o,
                    AtomicOp::Min => if o < t { o } else { t },
                    AtomicOp::Max => if o > t { o } else { t },
                    AtomicOp::Replace => o,
                    AtomicOp::Read => t,
                    _ => return None,
                })
            }
        }
    )*};
}

float_prim! { f32 => u32, f64 => u64 }

/// An atomic cell holding the bits of a [`Prim`].
trait Cell {
    type Bits: Copy + Eq;
    /// # Safety
    /// `p` must be valid for reads and writes of `Self`, aligned, and only
    /// ever accessed atomically (or by the provider) while the reference lives.
    unsafe fn at<'a>(p: *mut u8) -> &'a Self;
    fn load(&self) -> Self::Bits;
    fn swap(&self, v: Self::Bits) -> Self::Bits;
    fn cas(&self, old: Self::Bits, new: Self::Bits) -> std::result::Result<Self::Bits, Self::Bits>;
    /// The read-modify-write instruction of an integer `op` on the bits
    /// (`SUM`, `BAND`, `BOR`, `BXOR`), or `None`.
    fn fetch_int(&self, op: AtomicOp, v: Self::Bits) -> Option<Self::Bits>;
}

macro_rules! cell {
    ($($a:ty => $bits:ty),* $(,)?) => {$(
        impl Cell for $a {
            type Bits = $bits;
            #[inline(always)]
            unsafe fn at<'a>(p: *mut u8) -> &'a Self {
                // SAFETY: the caller guarantees validity and alignment.
                unsafe { &*(p as *const $a) }
            }
            #[inline(always)]
            fn load(&self) -> $bits {
                <$a>::load(self, Ordering::Acquire)
            }
            #[inline(always)]
            fn swap(&self, v: $bits) -> $bits {
                <$a>::swap(self, v, Ordering::AcqRel)
            }
            #[inline(always)]
            fn cas(&self, old: $bits, new: $bits) -> std::result::Result<$bits, $bits> {
                self.compare_exchange_weak(old, new, Ordering::AcqRel, Ordering::Acquire)
            }
            #[inline(always)]
            fn fetch_int(&self, op: AtomicOp, v: $bits) -> Option<$bits> {
                Some(match op {
                    AtomicOp::Sum => self.fetch_add(v, Ordering::AcqRel),
                    AtomicOp::Band => self.fetch_and(v, Ordering::AcqRel),
                    AtomicOp::Bor => self.fetch_or(v, Ordering::AcqRel),
                    AtomicOp::Bxor => self.fetch_xor(v, Ordering::AcqRel),
                    _ => return None,
                })
            }
        }
    )*};
}

cell! { AtomicU8 => u8, AtomicU16 => u16, AtomicU32 => u32, AtomicU64 => u64 }

/// Native-endian element `i` of `bytes` (length checked by the caller).
#[inline(always)]
fn element<P: Prim>(bytes: &[u8], i: usize) -> P
where
    P::Bits: FromNe,
{
    let size = <P::Bits as FromNe>::SIZE;
    P::from_bits(P::Bits::from_ne(&bytes[i * size..(i + 1) * size]))
}

/// Native-endian conversions of the bit types.
trait FromNe: Sized + Copy {
    const SIZE: usize;
    fn from_ne(b: &[u8]) -> Self;
    fn write_ne(self, out: &mut [u8]);
}

macro_rules! from_ne {
    ($($t:ty),*) => {$(
        impl FromNe for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            #[inline(always)]
            fn from_ne(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(b);
                <$t>::from_ne_bytes(a)
            }
            #[inline(always)]
            fn write_ne(self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_ne_bytes());
            }
        }
    )*};
}

from_ne!(u8, u16, u32, u64);

/// Applies `op` to `count` elements at `base` (validated by the caller).
///
/// Inline: with the datatype and the count known to the caller (a typed
/// one-element call: `fetch_and_op`, a one-element `accumulate`) this is
/// the one atomic instruction and the copies.
///
/// # Safety
/// `base` must be valid for `count` aligned elements of `P`, accessed
/// concurrently only through atomics.
#[inline(always)]
unsafe fn run<P, C>(
    base: *mut u8,
    op: AtomicOp,
    src: &[u8],
    mut fetched: Option<&mut [u8]>,
    count: usize,
) -> Option<()>
where
    P: Prim,
    P::Bits: FromNe,
    C: Cell<Bits = P::Bits>,
{
    let size = <P::Bits as FromNe>::SIZE;
    for i in 0..count {
        // SAFETY: i < count; the caller guarantees the range and alignment.
        let cell = unsafe { C::at(base.add(i * size)) };
        let o: P = if op == AtomicOp::Read {
            P::from_bits(cell.load())
        } else {
            element(src, i)
        };
        // Integer SUM and bitwise: one read-modify-write instruction.
        let int = if P::INTEGER {
            cell.fetch_int(op, o.to_bits())
        } else {
            None
        };
        let old = match (int, op) {
            (Some(old), _) => old,
            (None, AtomicOp::Read) => cell.load(),
            (None, AtomicOp::Replace) => cell.swap(o.to_bits()),
            (None, _) => {
                let mut cur = cell.load();
                loop {
                    let new = P::apply(op, P::from_bits(cur), o)?;
                    match cell.cas(cur, new.to_bits()) {
                        Ok(prev) => break prev,
                        Err(now) => cur = now,
                    }
                }
            }
        };
        if let Some(out) = fetched.as_deref_mut() {
            old.write_ne(&mut out[i * size..(i + 1) * size]);
        }
    }
    Some(())
}

/// Checks `count` elements of `size` bytes at `offset` of `mem`: in bounds
/// and aligned. Returns the start pointer.
#[inline]
fn range(mem: &Memory<'_>, offset: usize, size: usize, count: usize) -> Result<*mut u8> {
    let bytes = count
        .checked_mul(size)
        .ok_or_else(|| Error::InvalidArgument(format!("{count} elements overflow")))?;
    match offset.checked_add(bytes) {
        Some(end) if end <= mem.len() => {}
        _ => {
            return Err(Error::InvalidArgument(format!(
                "atomic access at byte {offset}, {bytes} bytes, outside {} bytes",
                mem.len()
            )))
        }
    }
    let addr = mem.addr() as usize + offset;
    if addr % size != 0 {
        return Err(Error::InvalidArgument(format!(
            "atomic access at byte {offset} is not aligned to its {size}-byte elements"
        )));
    }
    // SAFETY: offset + bytes <= len, so the pointer stays inside the region.
    Ok(unsafe { mem.as_ptr().add(offset) })
}

/// Applies `what` (op, datatype, count) with the elements of `src` to the
/// elements of `mem` at byte `offset`, one atomic read-modify-write per
/// element. With `fetched`, the previous target values land there. `src` is
/// ignored for `FI_ATOMIC_READ`.
///
/// Always inline: a caller with a known datatype (a typed window) keeps one
/// arm of the match, and a one-element call no loop (measured with
/// callgrind: a CPU `fetch_and_op` + `flush` ~ 100 instructions fewer).
#[inline(always)]
pub fn accumulate(
    mem: &Memory<'_>,
    offset: usize,
    what: Atomic,
    src: &[u8],
    fetched: Option<&mut [u8]>,
) -> Result<()> {
    let Atomic {
        op,
        datatype,
        count,
    } = what;
    if !supports(op, datatype) {
        return Err(Error::Unsupported(format!("CPU atomic {op} on {datatype}")));
    }
    let size = datatype.size();
    let bytes = count.saturating_mul(size);
    if op != AtomicOp::Read && src.len() != bytes {
        return Err(Error::InvalidArgument(format!(
            "accumulate of {count} elements with {} source bytes",
            src.len()
        )));
    }
    if fetched.as_ref().is_some_and(|f| f.len() != bytes) {
        return Err(Error::InvalidArgument(format!(
            "fetching {count} elements into a buffer of the wrong length"
        )));
    }
    let base = range(mem, offset, size, count)?;
    // SAFETY: (all arms) `range` checked bounds and alignment for `count`
    // elements of `size` bytes; window memory is only accessed atomically
    // or through raw copies (see `Memory`), never through references.
    let done = unsafe {
        match datatype {
            Datatype::I8 => run::<i8, AtomicU8>(base, op, src, fetched, count),
            Datatype::U8 => run::<u8, AtomicU8>(base, op, src, fetched, count),
            Datatype::I16 => run::<i16, AtomicU16>(base, op, src, fetched, count),
            Datatype::U16 => run::<u16, AtomicU16>(base, op, src, fetched, count),
            Datatype::I32 => run::<i32, AtomicU32>(base, op, src, fetched, count),
            Datatype::U32 => run::<u32, AtomicU32>(base, op, src, fetched, count),
            Datatype::I64 => run::<i64, AtomicU64>(base, op, src, fetched, count),
            Datatype::U64 => run::<u64, AtomicU64>(base, op, src, fetched, count),
            Datatype::F32 => run::<f32, AtomicU32>(base, op, src, fetched, count),
            Datatype::F64 => run::<f64, AtomicU64>(base, op, src, fetched, count),
        }
    };
    done.ok_or_else(|| Error::Unsupported(format!("CPU atomic {op} on {datatype}")))
}

/// Compare-and-swap of one element of `datatype` at byte `offset` of `mem`:
/// writes `swap` where the target's bits equal `compare`'s; the previous
/// value lands in `old`. Always inline, as [`accumulate`]: a typed caller
/// keeps one arm.
#[inline(always)]
pub fn compare_swap(
    mem: &Memory<'_>,
    offset: usize,
    datatype: Datatype,
    compare: &[u8],
    swap: &[u8],
    old: &mut [u8],
) -> Result<()> {
    let size = datatype.size();
    if compare.len() != size || swap.len() != size || old.len() != size {
        return Err(Error::InvalidArgument(format!(
            "compare-and-swap of one {size}-byte element with buffers of {}, {} and {} bytes",
            compare.len(),
            swap.len(),
            old.len()
        )));
    }
    let p = range(mem, offset, size, 1)?;
    fn cas<C: Cell>(c: &C, cmp: C::Bits, new: C::Bits) -> C::Bits
    where
        C::Bits: FromNe,
    {
        loop {
            match c.cas(cmp, new) {
                Ok(prev) => return prev,
                // A weak CAS may fail spuriously: retry only while the value
                // still equals `cmp`.
                Err(now) if now == cmp => continue,
                Err(now) => return now,
            }
        }
    }
    // SAFETY: (all arms) `range` checked bounds and alignment of the element.
    unsafe {
        match size {
            1 => cas(AtomicU8::at(p), u8::from_ne(compare), u8::from_ne(swap)).write_ne(old),
            2 => cas(AtomicU16::at(p), u16::from_ne(compare), u16::from_ne(swap)).write_ne(old),
            4 => cas(AtomicU32::at(p), u32::from_ne(compare), u32::from_ne(swap)).write_ne(old),
            _ => cas(AtomicU64::at(p), u64::from_ne(compare), u64::from_ne(swap)).write_ne(old),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
