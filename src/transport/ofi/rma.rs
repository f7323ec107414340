//! Posting RMA operations: retry on `-FI_EAGAIN` while driving progress, with
//! a bounded wait, and the completion semantics chosen per provider.

use std::sync::Arc;
use std::time::Instant;

use libfabric_sys as fi;

use super::cq::{self, OpContext};
use super::fault::{fabric_error, EAGAIN};
use super::mr::LocalMr;
use super::{staging, OfiTransport};
use crate::error::{Error, Result};
use crate::transport::{Completion, InFlight, RemoteAddr};

#[derive(Clone, Copy)]
enum Dir {
    Write,
    Read,
}

impl Dir {
    fn name(self) -> &'static str {
        match self {
            Dir::Write => "put",
            Dir::Read => "get",
        }
    }
}

/// Spins politely: a few busy iterations, then yields the core (ranks are
/// often oversubscribed on small machines).
pub fn backoff(round: &mut u32) {
    *round = round.saturating_add(1);
    if *round < 64 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

fn timed_out(t: &OfiTransport, start: Instant) -> bool {
    t.timeout.is_some_and(|limit| start.elapsed() > limit)
}

/// Calls `post` until it stops returning `-FI_EAGAIN`. On failure the
/// context (if any) is taken back and counted done.
pub(super) fn post_retry(
    t: &OfiTransport,
    call: &'static str,
    target: usize,
    ctx: *mut std::os::raw::c_void,
    mut post: impl FnMut() -> isize,
) -> Result<()> {
    let start = Instant::now();
    let mut round = 0;
    let fail = |e: Error| {
        // The provider rejected the post: no completion will come for it.
        if let Some(c) = t.ops.take(ctx) {
            c.complete();
        }
        Err(e)
    };
    loop {
        let rc = post();
        if rc == 0 {
            return Ok(());
        }
        if rc != EAGAIN {
            return fail(fabric_error(
                call,
                rc,
                format!("posting an operation to rank {target}"),
            ));
        }
        if let Err(e) = cq::drain(t) {
            return fail(e);
        }
        if timed_out(t, start) {
            return fail(Error::Timeout {
                what: format!(
                    "{call} to rank {target} kept returning FI_EAGAIN (is the peer alive?)"
                ),
                seconds: t.timeout.map(|d| d.as_secs()).unwrap_or(0),
            });
        }
        backoff(&mut round);
    }
}

/// Drives progress until `done` has nothing pending.
pub fn wait(t: &OfiTransport, done: &Completion, what: &dyn Fn() -> String) -> Result<()> {
    let start = Instant::now();
    let mut round = 0;
    while done.pending() != 0 {
        t.ensure_alive()?;
        cq::drain(t)?;
        if done.pending() == 0 {
            break;
        }
        if timed_out(t, start) {
            let msg = format!(
                "waiting for {} operation(s) while {}; the provider will not be used again",
                done.pending(),
                what()
            );
            t.poison(msg.clone());
            return Err(Error::Timeout {
                what: msg,
                seconds: t.timeout.map(|d| d.as_secs()).unwrap_or(0),
            });
        }
        backoff(&mut round);
    }
    done.check(what)
}

/// The trackers an operation counts on: its own and, optionally, a group's
/// (the window's, so that a flush covers request-based operations).
pub(super) struct Trackers<'a> {
    pub(super) done: &'a Arc<Completion>,
    pub(super) group: Option<&'a Arc<Completion>>,
}

impl<'a> Trackers<'a> {
    pub(super) fn own(done: &'a Arc<Completion>) -> Self {
        Trackers { done, group: None }
    }
}

/// A local buffer: start, length, and its descriptor if it is already
/// registered (staging slots); otherwise `post` registers it under
/// `FI_MR_LOCAL`.
struct Local {
    ptr: *mut u8,
    len: usize,
    desc: Option<*mut std::os::raw::c_void>,
}

impl Local {
    fn of(ptr: *mut u8, len: usize) -> Local {
        Local {
            ptr,
            len,
            desc: None,
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
            None,
            dir.name(),
            target,
        );
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
        return post_retry(t, "fi_inject_write", target, std::ptr::null_mut(), || {
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
        });
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
        };
        let done = Arc::new(Completion::new());
        return post_then_wait(t, dir, target, local, remote, &done, &what);
    }
    let done = Arc::new(Completion::new());
    post_then_wait(t, dir, target, Local::of(buf, len), remote, &done, &what)
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
        };
        let at = RemoteAddr {
            addr: remote.addr + off as u64,
            key: remote.key,
        };
        let done = Arc::new(Completion::new());
        post(t, dir, target, local, at, Trackers::own(&done))?;
        wait(t, &done, &|| {
            format!("{}ting {n} staged bytes with rank {target}", dir.name())
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

/// Takes a staging slot, driving progress while all are in use.
pub(super) fn acquire<'p>(
    t: &OfiTransport,
    pool: &'p staging::Staging,
) -> Result<staging::Slot<'p>> {
    let start = Instant::now();
    let mut round = 0;
    loop {
        if let Some(s) = pool.try_acquire() {
            return Ok(s);
        }
        cq::drain(t)?;
        if timed_out(t, start) {
            return Err(Error::Timeout {
                what: "waiting for a free staging buffer".into(),
                seconds: t.timeout.map(|d| d.as_secs()).unwrap_or(0),
            });
        }
        backoff(&mut round);
    }
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
        Local::of(src.as_ptr(), src.len()),
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
        Local::of(dst.as_ptr(), dst.len()),
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
