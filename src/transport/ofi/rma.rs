//! Posting RMA reads and writes with the completion semantics chosen per
//! provider (waiting and retrying live in `waiting.rs`).

use std::sync::Arc;

use libfabric_sys as fi;

use super::counters::Kind;
use super::cq::OpContext;
use super::mr::LocalMr;
use super::waiting::{acquire, post_retry, wait, Trackers};
use crate::transport::completion::with_own;
use super::{staging, OfiTransport};
use crate::error::Result;
use crate::transport::{Completion, InFlight, RemoteAddr};

#[derive(Clone, Copy)]
enum Dir {
    Write,
    Read,
}

impl Dir {
    fn kind(self) -> Kind {
        match self {
            Dir::Write => Kind::Write,
            Dir::Read => Kind::Read,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Dir::Write => "put",
            Dir::Read => "get",
        }
    }
}

/// A local buffer: start, length, and its descriptor if it is already
/// registered (staging slots); otherwise `post` registers it under
/// `FI_MR_LOCAL`. `keep` owns the buffer when it is not the caller's (a
/// bounce cell): every chunk's context holds it until it completes.
/// `caller`: the buffer is memory the caller gets back when the call
/// returns ([`OpContext::uses_caller`]).
struct Local {
    ptr: *mut u8,
    len: usize,
    desc: Option<*mut std::os::raw::c_void>,
    keep: Option<Arc<dyn std::any::Any + Send + Sync>>,
    caller: bool,
}

impl Local {
    fn of(ptr: *mut u8, len: usize) -> Local {
        Local {
            ptr,
            len,
            desc: None,
            keep: None,
            caller: true,
        }
    }

    /// A request's buffer (`InFlight`): never handed back or freed while
    /// an operation on it is pending.
    fn request(buf: &InFlight) -> Local {
        Local {
            caller: false,
            ..Local::of(buf.as_ptr(), buf.len())
        }
    }
}

/// Posts one read or write of `len` bytes at `local` (kept alive by the
/// caller until `done` counts it), in chunks of at most `max_msg_size`.
fn post(
    t: &OfiTransport,
    dir: Dir,
    target: usize,
    local: Local,
    remote: RemoteAddr,
    trackers: Trackers<'_>,
) -> Result<()> {
    let Trackers { done, group } = trackers;
    let Local {
        ptr: local,
        len,
        desc: registered,
        keep,
        caller: uses_caller,
    } = local;
    t.ensure_alive()?;
    let fi_addr = t.peer(target)?;
    let chunk = t.props.max_msg_size.max(1);
    let mut off = 0;
    while off < len {
        let n = chunk.min(len - off);
        // SAFETY: off + n <= len, inside the caller's buffer.
        let buf = unsafe { local.add(off) };
        let mr = if t.props.mr_local && registered.is_none() {
            let access = match dir {
                Dir::Write => fi::FI_WRITE,
                Dir::Read => fi::FI_READ,
            };
            Some(LocalMr::register(t, buf, n, access)?)
        } else {
            None
        };
        let desc = match (&mr, registered) {
            (Some(m), _) => m.desc(),
            (None, Some(d)) => d,
            (None, None) => std::ptr::null_mut(),
        };
        let addr = remote.addr + off as u64;
        let ctx = OpContext::track(
            t,
            Trackers { done, group },
            mr.into_iter().collect(),
            keep.clone(),
            (dir.name(), uses_caller),
            target,
        )?;
        match dir {
            Dir::Write if t.props.ordered_raw => post_retry(t, "fi_write", target, ctx, || {
                // SAFETY: live endpoint; buf/n stay valid until completion
                // (caller contract); ctx is our boxed context.
                unsafe {
                    fi::fi_write(
                        t.ep.as_ptr(),
                        buf.cast(),
                        n,
                        desc,
                        fi_addr,
                        addr,
                        remote.key,
                        ctx,
                    )
                }
            })?,
            Dir::Write => {
                let iov = libc_iovec(buf, n);
                let mut descs = [desc];
                let rma = fi::fi_rma_iov {
                    addr,
                    len: n,
                    key: remote.key,
                };
                let msg = fi::fi_msg_rma {
                    msg_iov: &iov,
                    desc: descs.as_mut_ptr(),
                    iov_count: 1,
                    addr: fi_addr,
                    rma_iov: &rma,
                    rma_iov_count: 1,
                    context: ctx,
                    data: 0,
                };
                post_retry(t, "fi_writemsg", target, ctx, || {
                    // SAFETY: msg and what it points to live across the call;
                    // the provider copies the descriptors.
                    unsafe { fi::fi_writemsg(t.ep.as_ptr(), &msg, fi::FI_DELIVERY_COMPLETE) }
                })?
            }
            Dir::Read => post_retry(t, "fi_read", target, ctx, || {
                // SAFETY: as for fi_write.
                unsafe {
                    fi::fi_read(
                        t.ep.as_ptr(),
                        buf.cast(),
                        n,
                        desc,
                        fi_addr,
                        addr,
                        remote.key,
                        ctx,
                    )
                }
            })?,
        }
        t.counters.posted(dir.kind(), n);
        off += n;
    }
    Ok(())
}

fn libc_iovec(buf: *mut u8, len: usize) -> fi::iovec {
    fi::iovec {
        iov_base: buf.cast(),
        iov_len: len,
    }
}

/// Blocking put: returns when `data` may be reused.
pub fn put_blocking(t: &OfiTransport, target: usize, data: &[u8], dst: RemoteAddr) -> Result<()> {
    if data.is_empty() {
        return Ok(());
    }
    if t.props.ordered_raw && data.len() <= t.props.inject_size && !t.props.mr_local {
        t.ensure_alive()?;
        let fi_addr = t.peer(target)?;
        // Injected data is copied by the provider before the call returns.
        // There is no completion: visibility comes from the ordered flush read.
        post_retry(t, "fi_inject_write", target, std::ptr::null_mut(), || {
            // SAFETY: live endpoint; data is valid for the call.
            unsafe {
                fi::fi_inject_write(
                    t.ep.as_ptr(),
                    data.as_ptr().cast(),
                    data.len(),
                    fi_addr,
                    dst.addr,
                    dst.key,
                )
            }
        })?;
        t.counters.posted(Kind::Write, data.len());
        return Ok(());
    }
    transfer(
        t,
        Dir::Write,
        target,
        data.as_ptr() as *mut u8,
        data.len(),
        dst,
    )
}

/// Blocking put of `data` to the remote ranges `dst` in order (range `i`
/// gets the next `dst[i].1` bytes): up to `rma_iov_limit` ranges per
/// `fi_writemsg` (one local buffer, several remote ranges). Returns when
/// `data` may be reused.
pub fn put_scatter(
    t: &OfiTransport,
    target: usize,
    data: &[u8],
    dst: &[(RemoteAddr, usize)],
) -> Result<()> {
    // The provider only reads the buffer for a write.
    scatter(t, Dir::Write, target, data.as_ptr() as *mut u8, data.len(), dst)
}

/// Blocking get of the remote ranges `src`, in order, into `buf`: up to
/// `rma_iov_limit` ranges per `fi_readmsg`. Returns when the data is in
/// `buf`.
pub fn get_gather(
    t: &OfiTransport,
    target: usize,
    buf: &mut [u8],
    src: &[(RemoteAddr, usize)],
) -> Result<()> {
    scatter(t, Dir::Read, target, buf.as_mut_ptr(), buf.len(), src)
}

/// `put_scatter` and `get_gather`: `buf` (`len` bytes, borrowed by the
/// caller for the call, mutably for a read) against `ranges`.
fn scatter(
    t: &OfiTransport,
    dir: Dir,
    target: usize,
    buf: *mut u8,
    len: usize,
    ranges: &[(RemoteAddr, usize)],
) -> Result<()> {
    crate::transport::check_ranges(len, ranges)?;
    let ranges: Vec<(RemoteAddr, usize)> = ranges.iter().copied().filter(|r| r.1 > 0).collect();
    if t.props.rma_iov_limit < 2 || t.staging.is_some() || t.props.mr_local || ranges.len() < 2
    {
        // One transfer per range (registration or staging per buffer).
        let mut at = 0;
        for (remote, n) in ranges {
            // SAFETY: check_ranges: at + n <= len, inside the caller's buffer.
            let part = unsafe { buf.add(at) };
            transfer(t, dir, target, part, n, remote)?;
            at += n;
        }
        return Ok(());
    }
    let what = || {
        format!(
            "{}ting {len} bytes in {} ranges with rank {target}",
            dir.name(),
            ranges.len()
        )
    };
    let run = |local: Local, done: &Arc<Completion>| {
        let posted = post_ranges(t, dir, target, local, &ranges, done);
        // Wait even if a later post failed: earlier ones use the buffer.
        let waited = wait(t, done, &what);
        posted?;
        waited
    };
    if len <= t.props.bounce_max {
        return bounced(t, dir, buf, len, run);
    }
    with_own(|done| run(Local::of(buf, len), done))
}

/// Posts `ranges` against consecutive parts of `local` (a bounce cell,
/// which every operation's context keeps, or the caller's buffer), as
/// many ranges per
/// call as the provider takes and `max_msg_size` allows (a range larger
/// than that goes alone, in chunks).
fn post_ranges(
    t: &OfiTransport,
    dir: Dir,
    target: usize,
    local: Local,
    ranges: &[(RemoteAddr, usize)],
    done: &Arc<Completion>,
) -> Result<()> {
    let (buf, keep, caller) = (local.ptr, local.keep, local.caller);
    t.ensure_alive()?;
    let fi_addr = t.peer(target)?;
    let (limit, max) = (t.props.rma_iov_limit, t.props.max_msg_size.max(1));
    let (mut i, mut at) = (0, 0);
    while i < ranges.len() {
        // SAFETY: the ranges' lengths sum to the buffer's (check_ranges).
        let local = unsafe { buf.add(at) };
        if ranges[i].1 > max {
            let (remote, n) = ranges[i];
            let part = Local {
                ptr: local,
                len: n,
                desc: None,
                keep: keep.clone(),
                caller,
            };
            post(t, dir, target, part, remote, Trackers::own(done))?;
            (i, at) = (i + 1, at + n);
            continue;
        }
        let mut rma = Vec::with_capacity(limit);
        let mut bytes = 0;
        while let Some(&(r, n)) = ranges.get(i + rma.len()) {
            if rma.len() == limit || bytes + n > max {
                break;
            }
            rma.push(fi::fi_rma_iov {
                addr: r.addr,
                len: n,
                key: r.key,
            });
            bytes += n;
        }
        let ctx = OpContext::track(
            t,
            Trackers::own(done),
            Vec::new(),
            keep.clone(),
            // In either direction.
            (dir.name(), caller),
            target,
        )?;
        let iov = libc_iovec(local, bytes);
        let mut descs = [std::ptr::null_mut()];
        let msg = fi::fi_msg_rma {
            msg_iov: &iov,
            desc: descs.as_mut_ptr(),
            iov_count: 1,
            addr: fi_addr,
            rma_iov: rma.as_ptr(),
            rma_iov_count: rma.len(),
            context: ctx,
            data: 0,
        };
        match dir {
            Dir::Write => {
                let flags = if t.props.ordered_raw {
                    0
                } else {
                    fi::FI_DELIVERY_COMPLETE
                };
                post_retry(t, "fi_writemsg", target, ctx, || {
                    // SAFETY: live endpoint; msg, iov and rma live across
                    // the call (the provider copies them); the buffer stays
                    // borrowed until the caller's wait saw the completion.
                    unsafe { fi::fi_writemsg(t.ep.as_ptr(), &msg, flags) }
                })?
            }
            Dir::Read => post_retry(t, "fi_readmsg", target, ctx, || {
                // SAFETY: as for the write.
                unsafe { fi::fi_readmsg(t.ep.as_ptr(), &msg, 0) }
            })?,
        }
        t.counters.posted(dir.kind(), bytes);
        (i, at) = (i + rma.len(), at + bytes);
    }
    Ok(())
}

/// Blocking get: returns when the data is in `buf`.
pub fn get_blocking(
    t: &OfiTransport,
    target: usize,
    buf: &mut [u8],
    src: RemoteAddr,
) -> Result<()> {
    if buf.is_empty() {
        return Ok(());
    }
    transfer(t, Dir::Read, target, buf.as_mut_ptr(), buf.len(), src)
}

/// A blocking transfer of the caller's buffer. Under `FI_MR_LOCAL`, small
/// transfers (and any whose buffer cannot be registered, e.g. read-only
/// memory) go through staging slots; otherwise the buffer is used in place.
fn transfer(
    t: &OfiTransport,
    dir: Dir,
    target: usize,
    buf: *mut u8,
    len: usize,
    remote: RemoteAddr,
) -> Result<()> {
    let what = || format!("{}ting {len} bytes with rank {target}", dir.name());
    if let Some(pool) = &t.staging {
        let direct = if len > staging::SLOT_BYTES {
            let access = match dir {
                Dir::Write => fi::FI_WRITE,
                Dir::Read => fi::FI_READ,
            };
            LocalMr::register(t, buf, len, access).ok()
        } else {
            None
        };
        if direct.is_none() {
            return staged(t, pool, dir, target, buf, len, remote);
        }
        let local = Local {
            ptr: buf,
            len,
            desc: direct.as_ref().map(|m| m.desc()),
            keep: None,
            caller: true,
        };
        return with_own(|done| post_then_wait(t, dir, target, local, remote, done, &what));
    }
    if len <= t.props.bounce_max {
        return bounced(t, dir, buf, len, |local, done| {
            post_then_wait(t, dir, target, local, remote, done, &what)
        });
    }
    // Larger (`Props::bounce_max`): the caller's buffer in place (a copy
    // would add a fifth to a megabyte over tcp, and on shm as much again
    // as the transfer); a timeout then condemns the provider
    // (`waiting::wait`, docs/transport.md).
    with_own(|done| post_then_wait(t, dir, target, Local::of(buf, len), remote, done, &what))
}

/// A blocking transfer through a bounce cell (a flush's control word, a
/// get, a put above the inject size, a layout's ranges): the provider
/// reads or writes the cell, which every chunk's context keeps, so a wait
/// that times out (a stopped or unreachable peer) gives the transfer up
/// without giving up the provider (`bounce.rs`). `run` posts `Local` (the
/// cell's first `len` bytes) and waits for it.
fn bounced(
    t: &OfiTransport,
    dir: Dir,
    buf: *mut u8,
    len: usize,
    run: impl FnOnce(Local, &Arc<Completion>) -> Result<()>,
) -> Result<()> {
    let cell = t.bounce.take(len);
    if let Dir::Write = dir {
        // SAFETY: the caller lent `len` bytes at `buf` for this call
        // (put_blocking and put_scatter take `&[u8]`); the cell was just
        // taken from the pool and is not posted yet.
        unsafe { cell.fill(0, std::slice::from_raw_parts(buf, len)) };
    }
    let local = Local {
        ptr: cell.as_mut_ptr(),
        len,
        desc: None,
        keep: Some(cell.clone()),
        caller: false,
    };
    let waited = with_own(|done| run(local, done));
    if let (Dir::Read, true) = (dir, waited.is_ok()) {
        // SAFETY: the caller lent `len` bytes at `buf` mutably for this
        // call (get_blocking and get_gather take `&mut [u8]`, put_signal
        // its own word); the wait succeeded, so the operation on the cell
        // completed.
        unsafe { cell.read(0, std::slice::from_raw_parts_mut(buf, len)) };
    }
    t.bounce.give(cell);
    waited
}

/// Posts and waits; waits even when a later chunk's post failed, because
/// earlier chunks may still be using the caller's buffer.
fn post_then_wait(
    t: &OfiTransport,
    dir: Dir,
    target: usize,
    local: Local,
    remote: RemoteAddr,
    done: &Arc<Completion>,
    what: &dyn Fn() -> String,
) -> Result<()> {
    let posted = post(t, dir, target, local, remote, Trackers::own(done));
    let waited = wait(t, done, what);
    posted?;
    waited
}

/// Moves `len` bytes through staging slots, one slot-sized chunk at a time.
fn staged(
    t: &OfiTransport,
    pool: &staging::Staging,
    dir: Dir,
    target: usize,
    buf: *mut u8,
    len: usize,
    remote: RemoteAddr,
) -> Result<()> {
    let mut off = 0;
    while off < len {
        let n = staging::SLOT_BYTES.min(len - off);
        let slot = acquire(t, pool)?;
        if let Dir::Write = dir {
            // SAFETY: off + n <= len: the chunk lies inside the caller's
            // buffer, borrowed (shared) for this call.
            slot.fill(unsafe { std::slice::from_raw_parts(buf.add(off), n) })?;
        }
        let local = Local {
            ptr: slot.ptr(),
            len: n,
            desc: Some(slot.desc()),
            keep: None,
            // The slot returns to its pool when this call ends.
            caller: true,
        };
        let at = RemoteAddr {
            addr: remote.addr + off as u64,
            key: remote.key,
        };
        with_own(|done| {
            post(t, dir, target, local, at, Trackers::own(done))?;
            wait(t, done, &|| {
                format!("{}ting {n} staged bytes with rank {target}", dir.name())
            })
        })?;
        if let Dir::Read = dir {
            // SAFETY: as above; for reads the caller lent the buffer mutably
            // (get_blocking takes `&mut [u8]`).
            slot.drain(unsafe { std::slice::from_raw_parts_mut(buf.add(off), n) })?;
        }
        off += n;
    }
    Ok(())
}

/// Non-blocking put from a buffer the transport holds.
pub fn put_async(t: &OfiTransport, target: usize, src: &InFlight, dst: RemoteAddr) -> Result<()> {
    let trackers = Trackers {
        done: src.completion(),
        group: src.group(),
    };
    post(
        t,
        Dir::Write,
        target,
        Local::request(src),
        dst,
        trackers,
    )
}

/// Non-blocking get into a buffer the transport holds.
pub fn get_async(t: &OfiTransport, target: usize, dst: &InFlight, src: RemoteAddr) -> Result<()> {
    let trackers = Trackers {
        done: dst.completion(),
        group: dst.group(),
    };
    post(
        t,
        Dir::Read,
        target,
        Local::request(dst),
        src,
        trackers,
    )
}

/// Writes one word and waits until it is delivered at the target (used for
/// synchronization flags, which must never sit in a send queue).
pub fn put_signal(t: &OfiTransport, target: usize, value: u64, dst: RemoteAddr) -> Result<()> {
    let mut word = value.to_ne_bytes();
    transfer(t, Dir::Write, target, word.as_mut_ptr(), 8, dst)?;
    if t.props.ordered_raw {
        // The write completed only locally; an ordered read proves delivery.
        transfer(t, Dir::Read, target, word.as_mut_ptr(), 8, dst)?;
    }
    Ok(())
}

/// Writes one word and waits for its local completion only: never injected
/// (an injected word may still sit in the provider's queue), and without
/// the ordered read that proves delivery (`Transport::put_flag`).
pub fn put_flag(t: &OfiTransport, target: usize, value: u64, dst: RemoteAddr) -> Result<()> {
    let mut word = value.to_ne_bytes();
    transfer(t, Dir::Write, target, word.as_mut_ptr(), 8, dst)
}
