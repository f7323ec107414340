//! Atomic operations over the provider's atomics: `fi_atomic`,
//! `fi_fetch_atomic`, `fi_compare_atomic`, split into calls of at most the
//! provider's element count, with the completion semantics described in
//! `docs/semantics.md`:
//!
//! * with `FI_ORDER_ATOMIC_RAW` (tcp, sockets) an update completes locally
//!   and a flush is one atomic read of the target's control word;
//! * without it (shm) every update is posted as a *fetching* atomic into a
//!   scratch buffer: fetching atomics always have delivery-complete
//!   semantics (the result comes from the target), while shm 1.17 reports
//!   a plain `fi_atomicmsg(FI_DELIVERY_COMPLETE)` complete before the target
//!   applied it (lost updates seen in `tests/atomics.rs`).

use std::any::Any;
use std::os::raw::c_void;
use std::ptr;
use std::sync::Arc;

use libfabric_sys as fi;

use super::counters::Kind;
use super::cq::OpContext;
use super::mr::LocalMr;
use super::vocab;
use super::waiting::{acquire, post_retry, wait, Trackers};
use crate::transport::completion::with_own;
use super::{staging, OfiTransport};
use crate::error::{Error, Result};
use crate::transport::{Atomic, AtomicKind, AtomicOp, Datatype, InFlight, RemoteAddr};

/// Chunks of one large operation posted before waiting for them.
const MAX_CHUNKS_IN_FLIGHT: usize = 16;

/// What the provider answers for one call (`fi_atomicvalid` and friends):
/// its largest element count, `None` when not offered.
pub fn query(
    t: &OfiTransport,
    op: AtomicOp,
    datatype: Datatype,
    kind: AtomicKind,
) -> Option<usize> {
    if !t.props.atomics {
        return None;
    }
    // Compare-and-swap is the compare family's only operation here.
    if (op == AtomicOp::Cswap) != (kind == AtomicKind::Compare) {
        return None;
    }
    let (op, datatype) = (vocab::op(op), vocab::datatype(datatype));
    let mut count = 0usize;
    let ep = t.ep.as_ptr();
    // SAFETY: live endpoint; count is a valid out-pointer; providers answer
    // -FI_EOPNOTSUPP for op/datatype values they do not know.
    let rc = unsafe {
        match kind {
            AtomicKind::Update => fi::fi_atomicvalid(ep, datatype, op, &mut count),
            AtomicKind::Fetch => fi::fi_fetch_atomicvalid(ep, datatype, op, &mut count),
            AtomicKind::Compare => fi::fi_compare_atomicvalid(ep, datatype, op, &mut count),
        }
    };
    (rc == 0 && count > 0).then_some(count)
}

/// The largest element count of one call as this back-end posts it
/// (without ordered atomic reads, updates are posted as fetches): what the
/// capability table holds. Called once per entry, at open.
pub fn valid(
    t: &OfiTransport,
    op: AtomicOp,
    datatype: Datatype,
    kind: AtomicKind,
) -> Option<usize> {
    let kind = match kind {
        AtomicKind::Update if !t.props.ordered_atomic_raw => AtomicKind::Fetch,
        k => k,
    };
    query(t, op, datatype, kind)
}

/// The caller's buffers of one operation, `count * elem` bytes each; null
/// where the kind does not use one.
#[derive(Clone, Copy)]
struct Local {
    src: *const u8,
    compare: *const u8,
    result: *mut u8,
    /// Descriptor covering all three when they live in a registered
    /// staging slot; otherwise each is registered under `FI_MR_LOCAL`.
    desc: Option<*mut c_void>,
}

impl Local {
    fn of(src: *const u8, compare: *const u8, result: *mut u8) -> Local {
        Local {
            src,
            compare,
            result,
            desc: None,
        }
    }
}

/// Zeroed memory the provider writes results into that nobody reads.
struct Scratch(*mut [u8]);

impl Scratch {
    fn new(len: usize) -> Scratch {
        Scratch(Box::into_raw(vec![0u8; len].into_boxed_slice()))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // SAFETY: the pointer came from Box::into_raw in new, and the last
        // operation writing to it completed (its context held this value).
        drop(unsafe { Box::from_raw(self.0) });
    }
}

// SAFETY: only the provider writes through the pointer, between post and
// completion; the value itself is only dropped.
unsafe impl Send for Scratch {}
// SAFETY: as above; no method reads or writes the memory.
unsafe impl Sync for Scratch {}

fn kind_name(kind: AtomicKind) -> &'static str {
    kind.name()
}

/// Size of one element, checked against the byte length and the count.
fn elem_size(what: Atomic, bytes: usize) -> Result<usize> {
    let elem = what.datatype.size();
    if what.count == 0 || what.count.checked_mul(elem) != Some(bytes) {
        return Err(Error::InvalidArgument(format!(
            "atomic operation of {} {} elements on a buffer of {bytes} bytes",
            what.count, what.datatype
        )));
    }
    Ok(elem)
}

fn unsupported(t: &OfiTransport, what: Atomic, kind: AtomicKind) -> Error {
    Error::Unsupported(format!(
        "provider {} offers no {} of {} on {}",
        t.props.provider,
        kind_name(kind),
        what.op,
        what.datatype
    ))
}

/// Posts one operation in chunks of at most the provider's count. The
/// buffers of `local` must stay valid until the trackers count every chunk
/// done; `keep` is held by every chunk's context until it completes.
/// `caller`: the buffers of `local` are memory the caller gets back when
/// the call returns (not a bounce cell, not a request's buffers).
#[allow(clippy::too_many_arguments)]
fn post(
    t: &OfiTransport,
    kind: AtomicKind,
    target: usize,
    what: Atomic,
    elem: usize,
    local: Local,
    dst: RemoteAddr,
    trackers: Trackers<'_>,
    (keep, caller): (Option<Arc<dyn Any + Send + Sync>>, bool),
) -> Result<()> {
    let Trackers { done, group } = trackers;
    t.ensure_alive()?;
    // Without ordered atomic reads an update is a fetch into scratch memory
    // (delivery-complete by definition), kept alive by every chunk.
    let (kind, local, keep) = match kind {
        AtomicKind::Update if !t.props.ordered_atomic_raw && local.desc.is_some() => {
            // Staged operands: the slot's result area takes the old values.
            let result = local.src.wrapping_add(2 * what.count * elem).cast_mut();
            (AtomicKind::Fetch, Local { result, ..local }, keep)
        }
        AtomicKind::Update if !t.props.ordered_atomic_raw => {
            let scratch = Arc::new(Scratch::new(what.count * elem));
            let local = Local {
                result: scratch.0.cast(),
                ..local
            };
            let keep: Arc<dyn Any + Send + Sync> = match keep {
                Some(k) => Arc::new((scratch, k)),
                None => scratch,
            };
            (AtomicKind::Fetch, local, Some(keep))
        }
        k => (k, local, keep),
    };
    let fi_addr = t.peer(target)?;
    // The table holds updates under their posted kind (see `valid`).
    let max = t
        .caps
        .atomics
        .limit(what.op, what.datatype, kind)
        .ok_or_else(|| unsupported(t, what, kind))?;
    let ep = t.ep.as_ptr();
    let mut first = 0;
    let mut chunks = 0usize;
    while first < what.count {
        if chunks > 0 && chunks % MAX_CHUNKS_IN_FLIGHT == 0 {
            // Bound the chunks of one call in flight: with ~1000 outstanding
            // atomics the sockets provider stopped completing them, and with
            // 64 per call it stalled once under load (4 ranks, all-to-all,
            // fresh-clone CI); 16 has not stalled since. The provider-side
            // cause is not established.
            wait(t, done, &|| {
                format!(
                    "{} of {} elements at rank {target}",
                    kind_name(kind),
                    what.count
                )
            })?;
        }
        chunks += 1;
        let n = max.min(what.count - first);
        let (off, bytes) = (first * elem, n * elem);
        let at = |p: *const u8| -> *const u8 {
            if p.is_null() {
                p
            } else {
                // SAFETY: first + n <= count: inside the caller's buffer.
                unsafe { p.add(off) }
            }
        };
        let (src, cmp, res) = (
            at(local.src),
            at(local.compare),
            at(local.result).cast_mut(),
        );
        let mut mrs = Vec::new();
        let mut desc = |p: *const u8, access: u64| -> Result<*mut c_void> {
            if p.is_null() || !t.props.mr_local {
                return Ok(ptr::null_mut());
            }
            if let Some(d) = local.desc {
                return Ok(d);
            }
            let m = LocalMr::register(t, p.cast_mut(), bytes, access)?;
            let d = m.desc();
            mrs.push(m);
            Ok(d)
        };
        let src_desc = desc(src, fi::FI_WRITE)?;
        let cmp_desc = desc(cmp, fi::FI_WRITE)?;
        let res_desc = desc(res, fi::FI_READ)?;
        let addr = dst.addr + off as u64;
        let ctx = OpContext::track(
            t,
            Trackers { done, group },
            mrs,
            keep.clone(),
            (kind_name(kind), caller),
            target,
        )?;
        let (dt, op, key) = (vocab::datatype(what.datatype), vocab::op(what.op), dst.key);
        match kind {
            AtomicKind::Update => {
                post_retry(t, "fi_atomic", target, ctx, || {
                    // SAFETY: live endpoint; src holds n elements and stays
                    // valid until completion (caller contract); ctx is ours.
                    unsafe {
                        fi::fi_atomic(ep, src.cast(), n, src_desc, fi_addr, addr, key, dt, op, ctx)
                    }
                })?
            }
            AtomicKind::Fetch => post_retry(t, "fi_fetch_atomic", target, ctx, || {
                // SAFETY: as for fi_atomic; res holds n elements and is not
                // touched by anyone else until completion.
                unsafe {
                    fi::fi_fetch_atomic(
                        ep,
                        src.cast(),
                        n,
                        src_desc,
                        res.cast(),
                        res_desc,
                        fi_addr,
                        addr,
                        key,
                        dt,
                        op,
                        ctx,
                    )
                }
            })?,
            AtomicKind::Compare => post_retry(t, "fi_compare_atomic", target, ctx, || {
                // SAFETY: as for fi_fetch_atomic; cmp holds n elements.
                unsafe {
                    fi::fi_compare_atomic(
                        ep,
                        src.cast(),
                        n,
                        src_desc,
                        cmp.cast(),
                        cmp_desc,
                        res.cast(),
                        res_desc,
                        fi_addr,
                        addr,
                        key,
                        dt,
                        op,
                        ctx,
                    )
                }
            })?,
        }
        t.counters.posted(Kind::Atomic, bytes);
        first += n;
    }
    Ok(())
}

/// Copies the caller's operands (`bytes` each) into a buffer at `base`
/// laid out as [operand | compare | result] with `fill`, and points a
/// `Local` there (`desc`: the buffer's registration, if any).
fn lay_out(
    local: &Local,
    bytes: usize,
    (base, desc): (*mut u8, Option<*mut c_void>),
    mut fill: impl FnMut(usize, &[u8]) -> Result<()>,
) -> Result<Local> {
    for (i, p) in [local.src, local.compare].into_iter().enumerate() {
        if !p.is_null() {
            // SAFETY: the caller's operand holds `bytes` bytes (elem_size
            // and compare checked the lengths) and is borrowed for this call.
            fill(i * bytes, unsafe { std::slice::from_raw_parts(p, bytes) })?;
        }
    }
    let at = |i: usize, p: *const u8| -> *const u8 {
        if p.is_null() {
            p
        } else {
            base.wrapping_add(i * bytes)
        }
    };
    Ok(Local {
        src: at(0, local.src),
        compare: at(1, local.compare),
        result: at(2, local.result).cast_mut(),
        desc,
    })
}

/// Posts on a tracker of its own and waits for it, also after a failed post
/// (earlier chunks may still use the caller's buffers).
fn post_and_wait(
    t: &OfiTransport,
    kind: AtomicKind,
    target: usize,
    what: Atomic,
    elem: usize,
    local: Local,
    dst: RemoteAddr,
) -> Result<()> {
    let bytes = what.count * elem;
    // Under FI_MR_LOCAL, small operands go through a registered staging slot
    // laid out as [operand | compare | result]: the caller's memory may be
    // read-only (constants) and per-operation registration is a system call.
    let slot = match &t.staging {
        Some(pool) if 3 * bytes <= staging::SLOT_BYTES => Some(acquire(t, pool)?),
        _ => None,
    };
    // Elsewhere, the operands (and result) go through a bounce cell
    // ([operand | compare | result]) that its context keeps: a wait that
    // times out can give it up and keep the provider (`bounce.rs`; until
    // 2026-12-03 an update's operand was read in place, and a timed-out
    // update condemned the provider).
    let cell = match &slot {
        None if 3 * bytes <= t.props.bounce_max => Some(t.bounce.take(3 * bytes)),
        _ => None,
    };
    let staged = match (&slot, &cell) {
        (None, Some(c)) => lay_out(&local, bytes, (c.as_mut_ptr(), None), |at, d| {
            // SAFETY: the cell was just taken from the pool and is not
            // posted yet.
            unsafe { c.fill(at, d) };
            Ok(())
        })?,
        (Some(s), _) => lay_out(&local, bytes, (s.ptr(), Some(s.desc())), |at, d| s.fill_at(at, d))?,
        (None, None) => local,
    };
    let keep = cell
        .as_ref()
        .map(|c| c.clone() as Arc<dyn Any + Send + Sync>);
    let waited = with_own(|done| {
        let posted = post(
            t,
            kind,
            target,
            what,
            elem,
            staged,
            dst,
            Trackers::own(done),
            (keep, cell.is_none()),
        );
        let waited = wait(t, done, &|| {
            format!(
                "{} of {} elements at rank {target}",
                kind_name(kind),
                what.count
            )
        });
        posted.and(waited)
    });
    if let Some(c) = cell {
        // An update has no result.
        if waited.is_ok() && !local.result.is_null() {
            // SAFETY: the caller's result buffer holds `bytes` bytes and is
            // borrowed mutably for this call; the wait succeeded, so the
            // operation on the cell completed.
            unsafe { c.read(2 * bytes, std::slice::from_raw_parts_mut(local.result, bytes)) };
        }
        t.bounce.give(c);
    }
    waited?;
    if let (Some(s), false) = (&slot, local.result.is_null()) {
        // SAFETY: the caller's result buffer holds `bytes` bytes and is
        // borrowed mutably for this call.
        s.drain_at(2 * bytes, unsafe {
            std::slice::from_raw_parts_mut(local.result, bytes)
        })?;
    }
    Ok(())
}

/// Blocking update: returns when `data` may be reused.
pub fn update(
    t: &OfiTransport,
    target: usize,
    what: Atomic,
    data: &[u8],
    dst: RemoteAddr,
) -> Result<()> {
    let elem = elem_size(what, data.len())?;
    let local = Local::of(data.as_ptr(), ptr::null(), ptr::null_mut());
    post_and_wait(t, AtomicKind::Update, target, what, elem, local, dst)
}

/// Blocking fetching update: returns when `result` holds the old values.
pub fn fetch(
    t: &OfiTransport,
    target: usize,
    what: Atomic,
    data: &[u8],
    result: &mut [u8],
    dst: RemoteAddr,
) -> Result<()> {
    let elem = elem_size(what, data.len())?;
    if result.len() != data.len() {
        return Err(Error::InvalidArgument(format!(
            "fetching atomic: result buffer of {} bytes for {} bytes of data",
            result.len(),
            data.len()
        )));
    }
    let local = Local::of(data.as_ptr(), ptr::null(), result.as_mut_ptr());
    post_and_wait(t, AtomicKind::Fetch, target, what, elem, local, dst)
}

/// Blocking compare-and-swap of one element.
pub fn compare(
    t: &OfiTransport,
    target: usize,
    datatype: Datatype,
    (compare, swap): (&[u8], &[u8]),
    result: &mut [u8],
    dst: RemoteAddr,
) -> Result<()> {
    let n = swap.len();
    if n != datatype.size() || compare.len() != n || result.len() != n {
        return Err(Error::InvalidArgument(format!(
            "compare-and-swap: compare {} bytes, swap {n}, result {}",
            compare.len(),
            result.len()
        )));
    }
    let what = Atomic {
        op: AtomicOp::Cswap,
        datatype,
        count: 1,
    };
    let local = Local::of(swap.as_ptr(), compare.as_ptr(), result.as_mut_ptr());
    post_and_wait(t, AtomicKind::Compare, target, what, n, local, dst)
}

/// Non-blocking update from a buffer the transport holds.
pub fn update_async(
    t: &OfiTransport,
    target: usize,
    what: Atomic,
    src: &InFlight,
    dst: RemoteAddr,
) -> Result<()> {
    let elem = elem_size(what, src.len())?;
    let local = Local::of(src.as_ptr(), ptr::null(), ptr::null_mut());
    let trackers = Trackers {
        done: src.completion(),
        group: src.group(),
    };
    post(
        t,
        AtomicKind::Update,
        target,
        what,
        elem,
        local,
        dst,
        trackers,
        // The request's buffer.
        (None, false),
    )
}

/// Non-blocking fetching update: `data` is owned by the operation, the old
/// values land in `result`.
pub fn fetch_async(
    t: &OfiTransport,
    target: usize,
    what: Atomic,
    data: Vec<u8>,
    result: &InFlight,
    dst: RemoteAddr,
) -> Result<()> {
    let elem = elem_size(what, data.len())?;
    if result.len() != data.len() {
        return Err(Error::InvalidArgument(format!(
            "fetching atomic: result buffer of {} bytes for {} bytes of data",
            result.len(),
            data.len()
        )));
    }
    let data: Arc<Vec<u8>> = Arc::new(data);
    let local = Local::of(data.as_ptr(), ptr::null(), result.as_ptr());
    let trackers = Trackers {
        done: result.completion(),
        group: result.group(),
    };
    let keep: Arc<dyn Any + Send + Sync> = data;
    // The operand is kept by the context, the result is the request's.
    post(
        t,
        AtomicKind::Fetch,
        target,
        what,
        elem,
        local,
        dst,
        trackers,
        (Some(keep), false),
    )
}
