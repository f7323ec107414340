//! Atomics: applied by the origin's thread to the target's memory with
//! the CPU's atomic instructions (`transport::cpu_atomic`), one atomic
//! read-modify-write per element — atomic with respect to every other
//! rank's atomics and software accumulates on the same elements, which all
//! use the same instructions.

use super::LoopbackTransport;
use crate::error::{Error, Result};
use crate::transport::{cpu_atomic, Atomic, AtomicOp, Datatype, RemoteAddr};

fn bytes(what: Atomic) -> Result<usize> {
    what.count.checked_mul(what.datatype.size()).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "atomic {} of {} {} elements overflows",
            what.op, what.count, what.datatype
        ))
    })
}

/// Applies `what` with `data` to `dst` at `target`; the previous values
/// land in `fetched` when given.
pub(super) fn apply(
    t: &LoopbackTransport,
    target: usize,
    what: Atomic,
    data: &[u8],
    fetched: Option<&mut [u8]>,
    dst: RemoteAddr,
) -> Result<()> {
    let n = bytes(what)?;
    if what.op != AtomicOp::Read && data.len() != n {
        return Err(Error::InvalidArgument(format!(
            "atomic {} of {} {} elements with {} bytes of data",
            what.op,
            what.count,
            what.datatype,
            data.len()
        )));
    }
    let desc = || format!("atomic {} of {} {}", what.op, what.count, what.datatype);
    t.remote(target, dst, n, &desc, |m, off| {
        cpu_atomic::accumulate(m, off, what, data, fetched)
    })?;
    t.counters.atomic(n);
    Ok(())
}

/// Compare-and-swap of one element at `dst` of `target`.
pub(super) fn compare(
    t: &LoopbackTransport,
    target: usize,
    datatype: Datatype,
    (compare, swap): (&[u8], &[u8]),
    result: &mut [u8],
    dst: RemoteAddr,
) -> Result<()> {
    let n = datatype.size();
    let desc = || format!("compare-and-swap of one {datatype}");
    t.remote(target, dst, n, &desc, |m, off| {
        cpu_atomic::compare_swap(m, off, datatype, compare, swap, result)
    })?;
    t.counters.atomic(n);
    Ok(())
}
