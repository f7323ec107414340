//! Collectives a one-sided program needs besides [`World::barrier`]:
//! [`World::broadcast`], [`World::allgather`] and [`World::allreduce`].
//!
//! Each runs over a scratch window created for the call (collective, with
//! the creation's agreement proving every rank passed the same count), and
//! moves data with puts inside post/start/complete/wait epochs between the
//! pairs of one round only: O(log P) rounds and messages per process, no
//! per-peer state, and the timeout and error rules of every other blocking
//! call (`ONESIDED_TIMEOUT`, the awaited rank in [`Error::rank`]).
//!
//! * broadcast: a binomial tree rooted at `root` (⌈log2 P⌉ rounds);
//! * allgather: Bruck's algorithm, each rank holding a run of consecutive
//!   blocks that doubles every round (⌈log2 P⌉ rounds, P − 1 blocks in);
//! * allreduce: recursive doubling over the largest power of two
//!   P' ≤ P, the P − P' others folded in before and served after
//!   (⌊log2 P⌋ + 2 rounds at most). Every pair combines the same two
//!   operands (`a ∘ b` on one side, `b ∘ a` on the other, equal for the
//!   commutative operations allowed), so every rank ends with the same
//!   bits, floating point included.
//!
//! [`Error::rank`]: crate::Error::rank

use crate::api::element::Element;
use crate::api::group::Team;
use crate::api::op::AnyOp;
use crate::api::window::Window;
use crate::api::world::World;
use crate::epoch::Assert;
use crate::error::{Error, Result};
use crate::transport::Datatype;

impl World {
    /// Copies `data` of rank `root` into `data` of every rank
    /// (MPI_Bcast). Collective: every rank passes the same `root` and a
    /// slice of the same length.
    ///
    /// # Errors
    /// `root` out of range or slices of different lengths: an error on
    /// every rank. A dead peer: [`ErrorKind::Timeout`] or
    /// [`ErrorKind::PeerUnreachable`] naming it.
    ///
    /// [`ErrorKind::Timeout`]: crate::ErrorKind::Timeout
    /// [`ErrorKind::PeerUnreachable`]: crate::ErrorKind::PeerUnreachable
    pub fn broadcast<T: Element>(&self, root: usize, data: &mut [T]) -> Result<()> {
        broadcast(Team::of(self), root, data)
    }

    /// Every rank's `mine`, concatenated in rank order (MPI_Allgather).
    /// Collective: every rank passes a slice of the same length.
    ///
    /// # Errors
    /// As [`World::broadcast`].
    pub fn allgather<T: Element>(&self, mine: &[T]) -> Result<Vec<T>> {
        allgather(Team::of(self), mine)
    }

    /// Combines `data` element-wise over every rank with `op` and leaves
    /// the result in `data` of every rank (MPI_Allreduce). `op` is one of
    /// `Sum`, `Prod`, `Min`, `Max` or, on integers, the bitwise and logical
    /// operations. Collective: every rank passes the same `op` and a slice
    /// of the same length.
    ///
    /// # Errors
    /// `Replace`, `NoOp`, or an integer operation on floating point:
    /// [`ErrorKind::InvalidArgument`] before anything is sent (on every
    /// rank, as every rank passes the same `op`). Otherwise as
    /// [`World::broadcast`].
    ///
    /// [`ErrorKind::InvalidArgument`]: crate::ErrorKind::InvalidArgument
    pub fn allreduce<T: Element>(&self, data: &mut [T], op: impl Into<AnyOp>) -> Result<()> {
        allreduce(Team::of(self), data, op.into())
    }
}

/// [`World::broadcast`] over `team`.
pub(crate) fn broadcast<T: Element>(team: Team<'_>, root: usize, data: &mut [T]) -> Result<()> {
    let p = team.size();
    if root >= p {
        return Err(Error::InvalidArgument(format!(
            "broadcast from root {root}: not a rank of {} (size {p})",
            team.describe()
        )));
    }
    let mut win = scratch::<T>(team, data.len(), "broadcast")?;
    // Relative rank: the root is 0, its children 1, 2, 4, ...
    let v = (team.rank() + p - root) % p;
    let abs = |v: usize| (v + root) % p;
    let mut mask = 1;
    while mask < p {
        if v < mask && v + mask < p {
            let to = abs(v + mask);
            win.start(&[to], Assert::NONE)?;
            win.put(to, 0, data)?;
            win.complete()?;
        } else if (mask..2 * mask).contains(&v) {
            let from = abs(v - mask);
            win.post(&[from], Assert::NONE)?;
            win.wait()?;
            win.local_read(0, data)?;
        }
        mask <<= 1;
    }
    win.free()
}

/// [`World::allgather`] over `team`.
pub(crate) fn allgather<T: Element>(team: Team<'_>, mine: &[T]) -> Result<Vec<T>> {
    let (me, p, n) = (team.rank(), team.size(), mine.len());
    let total = n.checked_mul(p).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "allgather of {n} elements from {p} processes overflows"
        ))
    })?;
    let mut win = scratch::<T>(team, total, "allgather")?;
    win.local_write(me * n, mine)?;
    // After the round with distance d this rank holds the blocks
    // me, me + 1, ..., me + min(2d, p) - 1 (mod p) at their places.
    let mut dist = 1;
    let mut buf = Vec::new();
    while dist < p {
        let from = (me + dist) % p;
        let to = (me + p - dist) % p;
        let count = dist.min(p - dist);
        win.post(&[from], Assert::NONE)?;
        win.start(&[to], Assert::NONE)?;
        // Blocks me .. me + count, wrapping past the last rank.
        let first = count.min(p - me);
        for (block, blocks) in [(me, first), (0, count - first)] {
            if blocks > 0 {
                buf.resize(blocks * n, T::zeroed());
                win.local_read(block * n, &mut buf)?;
                win.put(to, block * n, &buf)?;
            }
        }
        win.complete()?;
        win.wait()?;
        dist *= 2;
    }
    let all = win.local_to_vec()?;
    win.free()?;
    Ok(all)
}

/// [`World::allreduce`] over `team`.
pub(crate) fn allreduce<T: Element>(team: Team<'_>, data: &mut [T], op: AnyOp) -> Result<()> {
    check_reduce_op::<T>(op)?;
    let (me, p) = (team.rank(), team.size());
    let mut win = scratch::<T>(team, data.len(), "allreduce")?;
    let mut theirs = vec![T::zeroed(); data.len()];
    let p2 = if p.is_power_of_two() {
        p
    } else {
        p.next_power_of_two() / 2
    };
    // One exchange: `to` receives `data` into its window while this
    // rank receives from `from` (either may be absent).
    let exchange = |to: Option<usize>, from: Option<usize>, data: &[T]| -> Result<()> {
        if let Some(from) = from {
            win.post(&[from], Assert::NONE)?;
        }
        if let Some(to) = to {
            win.start(&[to], Assert::NONE)?;
            win.put(to, 0, data)?;
            win.complete()?;
        }
        if from.is_some() {
            win.wait()?;
        }
        Ok(())
    };
    // Fold the ranks beyond the power of two into their partners.
    if me >= p2 {
        exchange(Some(me - p2), None, data)?;
    } else if me + p2 < p {
        exchange(None, Some(me + p2), data)?;
        win.local_read(0, &mut theirs)?;
        combine(op, data, &theirs)?;
    }
    if me < p2 {
        let mut mask = 1;
        while mask < p2 {
            let partner = me ^ mask;
            exchange(Some(partner), Some(partner), data)?;
            win.local_read(0, &mut theirs)?;
            combine(op, data, &theirs)?;
            mask <<= 1;
        }
    }
    // Serve the folded ranks.
    if me >= p2 {
        exchange(None, Some(me - p2), data)?;
        win.local_read(0, data)?;
    } else if me + p2 < p {
        exchange(Some(me + p2), None, data)?;
    }
    win.free()
}

/// The scratch window of one collective call: `len` elements on every
/// rank of `team`, or an error on every rank.
fn scratch<'a, T: Element>(team: Team<'a>, len: usize, what: &str) -> Result<Window<'a, T>> {
    let mut win = Window::<T>::allocate(team, len)?;
    if !win.same_len() {
        // Every rank saw the same agreement: every rank fails here.
        let _ = win.free();
        return Err(Error::InvalidArgument(format!(
            "{what}: the processes passed different element counts \
             (this rank {len} {})",
            T::NAME
        )));
    }
    Ok(win)
}

/// Refuses the operations an allreduce cannot take.
fn check_reduce_op<T: Element>(op: AnyOp) -> Result<()> {
    if matches!(op, AnyOp::Replace | AnyOp::NoOp) {
        return Err(Error::InvalidArgument(format!(
            "allreduce with {op}: not a reduction (use broadcast)"
        )));
    }
    if op.integer_only() && !T::INTEGER {
        return Err(Error::InvalidArgument(format!(
            "allreduce with {op} on {}: defined on integers only",
            T::NAME
        )));
    }
    Ok(())
}

/// `acc[i] = acc[i] op x[i]` for the concrete type behind `T`.
fn combine<T: Element>(op: AnyOp, acc: &mut [T], x: &[T]) -> Result<()> {
    macro_rules! ints {
        ($t:ty) => {{
            let (a, b) = cast::<T, $t>(acc, x)?;
            for (a, &b) in a.iter_mut().zip(b) {
                *a = match op {
                    AnyOp::Sum => a.wrapping_add(b),
                    AnyOp::Prod => a.wrapping_mul(b),
                    AnyOp::Min => (*a).min(b),
                    AnyOp::Max => (*a).max(b),
                    AnyOp::Band => *a & b,
                    AnyOp::Bor => *a | b,
                    AnyOp::Bxor => *a ^ b,
                    AnyOp::Land => <$t>::from(*a != 0 && b != 0),
                    AnyOp::Lor => <$t>::from(*a != 0 || b != 0),
                    AnyOp::Lxor => <$t>::from((*a != 0) != (b != 0)),
                    AnyOp::Replace | AnyOp::NoOp => *a,
                };
            }
        }};
    }
    macro_rules! floats {
        ($t:ty) => {{
            let (a, b) = cast::<T, $t>(acc, x)?;
            for (a, &b) in a.iter_mut().zip(b) {
                *a = match op {
                    AnyOp::Sum => *a + b,
                    AnyOp::Prod => *a * b,
                    // IEEE's total order (-0 < +0, NaNs ordered by sign):
                    // min(a, b) and min(b, a) are the same bits, so every
                    // rank ends with the same result.
                    AnyOp::Min if b.total_cmp(a).is_lt() => b,
                    AnyOp::Max if b.total_cmp(a).is_gt() => b,
                    _ => *a,
                };
            }
        }};
    }
    match T::DATATYPE {
        Datatype::I8 => ints!(i8),
        Datatype::I16 => ints!(i16),
        Datatype::I32 => ints!(i32),
        Datatype::I64 => ints!(i64),
        Datatype::U8 => ints!(u8),
        Datatype::U16 => ints!(u16),
        Datatype::U32 => ints!(u32),
        Datatype::U64 => ints!(u64),
        Datatype::F32 => floats!(f32),
        Datatype::F64 => floats!(f64),
    }
    Ok(())
}

/// Views `T` (the element type whose datatype is `U`'s) as `U`.
fn cast<'a, T: Element, U: Element>(acc: &'a mut [T], x: &'a [T]) -> Result<(&'a mut [U], &'a [U])> {
    let bad = |e| Error::InvalidArgument(format!("allreduce on {}: {e:?}", T::NAME));
    Ok((
        bytemuck::try_cast_slice_mut(acc).map_err(bad)?,
        bytemuck::try_cast_slice(x).map_err(bad)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combine_is_commutative_bit_for_bit() {
        let a = [1.5f64, f64::NAN, -0.0, 3.0];
        let b = [2.25f64, 1.0, 0.0, f64::NAN];
        for op in [AnyOp::Sum, AnyOp::Prod, AnyOp::Min, AnyOp::Max] {
            let (mut ab, mut ba) = (a, b);
            combine(op, &mut ab, &b).unwrap();
            combine(op, &mut ba, &a).unwrap();
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&ab), bits(&ba), "{op}");
        }
    }

    #[test]
    fn combine_integers() {
        let mut a = [5i32, -3, 0, i32::MAX];
        combine(AnyOp::Sum, &mut a, &[1, 3, 0, 1]).unwrap();
        assert_eq!(a, [6, 0, 0, i32::MIN]);
        let mut m = [5u8, 1, 7];
        combine(AnyOp::Min, &mut m, &[4, 2, 7]).unwrap();
        assert_eq!(m, [4, 1, 7]);
        let mut l = [0i64, 2, 3];
        combine(AnyOp::Lxor, &mut l, &[1, 0, 9]).unwrap();
        assert_eq!(l, [1, 1, 0]);
    }

    #[test]
    fn refuses_non_reductions() {
        assert!(check_reduce_op::<f32>(AnyOp::Band).is_err());
        assert!(check_reduce_op::<i32>(AnyOp::Replace).is_err());
        assert!(check_reduce_op::<i32>(AnyOp::NoOp).is_err());
        assert!(check_reduce_op::<u16>(AnyOp::Bor).is_ok());
        assert!(check_reduce_op::<f64>(AnyOp::Max).is_ok());
    }
}
