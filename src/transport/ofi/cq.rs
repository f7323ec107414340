//! Reading the completion queue.
//!
//! Every posted operation has an [`OpContext`] in the transport's op table
//! (see `ops.rs`); the provider carries only its token. Whoever reads the
//! completion (user thread or progress agent) takes the context back by
//! token, once, and marks the operation done on its [`Completion`].

use std::sync::Arc;
use std::time::Instant;

use libfabric_sys as fi;

use super::fault::{fabric_error, strerror, EAGAIN, EAVAIL};
use super::fid::Owned;
use super::mr::LocalMr;
use super::msg::{self, MsgRole};
use super::ops::Insert;
use super::waiting::Trackers;
use super::OfiTransport;
use crate::error::{Error, Result};
use crate::transport::Completion;

/// What an operation needs kept alive until it completes.
pub struct OpContext {
    /// Counted done when the completion is read.
    pub done: Arc<Completion>,
    /// A second tracker (the window's, so that a flush covers requests).
    pub group: Option<Arc<Completion>>,
    /// Registrations of the local buffers (`FI_MR_LOCAL`), closed afterwards.
    pub _mr: Vec<LocalMr>,
    /// A buffer the operation reads that nobody else owns (declared after
    /// `_mr`, so it is deregistered before it is freed).
    pub _keep: Option<Arc<dyn std::any::Any + Send + Sync>>,
    /// What the operation was, for error messages.
    pub what: &'static str,
    /// Target rank, for error messages.
    pub target: usize,
    /// Set for receive buffers and replies (`msg.rs`), which are not
    /// counted done on a tracker but handed to the message layer.
    pub msg: Option<MsgRole>,
    /// Run with the error if the operation fails (a posted send that
    /// nobody waits for: `msg::send_posted`).
    pub on_fail: Option<crate::transport::SendFailed>,
    /// The provider reads or writes memory the caller gets back when the
    /// call returns (a blocking get into or put from the caller's buffer,
    /// a fetched result, a staging slot that returns to its pool): such an
    /// operation cannot be given up while the provider holds it
    /// (`waiting::wait`). False where all it touches is kept by this
    /// context or by a request until it completes (`bounce.rs`, message
    /// buffers, a request's `InFlight`, which is leaked rather than freed
    /// while pending).
    pub uses_caller: bool,
}

impl OpContext {
    /// Stores a new operation's context in the op table — reading the CQ
    /// while every slot is in use (see `ops.rs` for why that cannot
    /// deadlock) — and counts it on its trackers; returns the token to post
    /// with. Fails only if the transport is unusable or no slot freed within
    /// `ONESIDED_TIMEOUT`.
    /// `uses_caller`: see [`OpContext::uses_caller`].
    pub(super) fn track(
        t: &OfiTransport,
        trackers: Trackers<'_>,
        mr: Vec<LocalMr>,
        keep: Option<Arc<dyn std::any::Any + Send + Sync>>,
        (what, uses_caller): (&'static str, bool),
        target: usize,
    ) -> Result<*mut std::os::raw::c_void> {
        Self::track_with(t, trackers, (mr, keep), (what, uses_caller), target, None)
    }

    /// As [`OpContext::track`], with a hook run if the operation fails (a
    /// send: the provider writes nothing of the caller's).
    pub(super) fn track_failing(
        t: &OfiTransport,
        trackers: Trackers<'_>,
        (mr, keep): (Vec<LocalMr>, Option<Arc<dyn std::any::Any + Send + Sync>>),
        what: &'static str,
        target: usize,
        on_fail: Option<crate::transport::SendFailed>,
    ) -> Result<*mut std::os::raw::c_void> {
        Self::track_with(t, trackers, (mr, keep), (what, false), target, on_fail)
    }

    fn track_with(
        t: &OfiTransport,
        trackers: Trackers<'_>,
        (mr, keep): (Vec<LocalMr>, Option<Arc<dyn std::any::Any + Send + Sync>>),
        (what, uses_caller): (&'static str, bool),
        target: usize,
        on_fail: Option<crate::transport::SendFailed>,
    ) -> Result<*mut std::os::raw::c_void> {
        let Trackers { done, group } = trackers;
        let mut op = OpContext {
            done: done.clone(),
            group: group.cloned(),
            _mr: mr,
            _keep: keep,
            what,
            target,
            msg: None,
            on_fail,
            uses_caller,
        };
        let mut waiting: Option<(Instant, u32)> = None;
        let token = loop {
            match t.ops.try_insert(op) {
                Insert::Token(token) => break token,
                Insert::Broken => {
                    return Err(Error::InvalidArgument(
                        "the operation table is unusable (a thread panicked)".into(),
                    ))
                }
                Insert::Full(back) => {
                    op = back;
                    let (start, round) = waiting.get_or_insert_with(|| {
                        t.ops.note_exhausted();
                        (Instant::now(), 0)
                    });
                    t.ensure_alive()?;
                    drain(t)?;
                    if t.timeout.is_some_and(|limit| start.elapsed() > limit) {
                        return Err(Error::timeout(format!(
                                "waiting for a free operation slot ({} in use) to post a {what} to rank {target}",
                                t.ops.capacity()
                            ), t.timeout.map(|d| d.as_secs()).unwrap_or(0)).awaiting(target));
                    }
                    super::waiting::backoff(round);
                }
            }
        };
        // No completion can arrive before the post: counting now is in time.
        done.add();
        if let Some(g) = group {
            g.add();
        }
        Ok(token)
    }

    /// Counts the operation done on its trackers.
    pub fn complete(&self) {
        if let Some(g) = &self.group {
            g.done();
        }
        self.done.done();
    }
    /// Records a failure on its trackers.
    pub fn fail(&self, message: String) {
        if let Some(g) = &self.group {
            g.failed(message.clone());
        }
        self.done.failed(message);
    }
    /// Records a failure that says the target is gone.
    pub fn fail_peer_gone(&self, message: String) {
        if let Some(g) = &self.group {
            g.peer_gone(self.target, message.clone());
        }
        self.done.peer_gone(self.target, message);
    }
}

const BATCH: usize = 16;

/// The wait object to open the CQ with on `provider`: one whose blocking
/// read wakes on *any* traffic, or none.
///
/// * `ofi_rxm` (tcp, verbs): the CQ's wait set holds the fds of the message
///   endpoints' CQs and of the connection EQ, so a blocked `fi_cq_sread`
///   wakes when bytes arrive on any connection — also for incoming RMA,
///   which produces no completion at the target (measured: see
///   `docs/transport.md`, "Progress").
/// * net (xnet's own RDM endpoint, no rxm, 1.17): it accepts `FI_WAIT_FD`
///   (the wait set holds its progress engine's epoll fd), but the agent
///   then never sleeps: measured 98 % CPU per idle process (2026-11-28,
///   `examples/busy_target.rs`); polling costs 7-8 %.
/// * sockets: it accepts `FI_WAIT_FD`, but in manual progress its
///   `fi_cq_sread` busy-polls (it must drive progress itself): measured, an
///   idle process then burns its core, and a loaded machine saw 5 ms p90
///   latencies.
/// * shm (1.17): `fi_cq_open` refuses `FI_WAIT_FD` ("Function not
///   implemented"), and incoming commands arrive in shared memory without
///   any signal anyway.
///
/// Providers without a suitable wait object keep the polling agent.
pub fn wait_object(provider: &str) -> fi::fi_wait_obj {
    if provider.contains("ofi_rxm") {
        fi::FI_WAIT_FD
    } else {
        fi::FI_WAIT_NONE
    }
}

/// Opens the completion queue with the wait object [`wait_object`] chooses
/// (falling back to none if the provider refuses it); returns it and
/// whether it has a wait object.
pub(super) fn open(
    domain: &Owned<fi::fid_domain>,
    provider: &str,
) -> Result<(Owned<fi::fid_cq>, bool)> {
    let wanted = wait_object(provider);
    let mut tries = vec![wanted];
    if wanted != fi::FI_WAIT_NONE {
        tries.push(fi::FI_WAIT_NONE);
    }
    let mut last = 0;
    for wait_obj in tries {
        let mut cq_attr = fi::fi_cq_attr {
            format: fi::FI_CQ_FORMAT_MSG,
            wait_obj,
            ..Default::default()
        };
        let mut cq: *mut fi::fid_cq = std::ptr::null_mut();
        // SAFETY: live domain, initialised attr, valid out-pointer.
        let rc =
            unsafe { fi::fi_cq_open(domain.as_ptr(), &mut cq_attr, &mut cq, std::ptr::null_mut()) };
        if rc == 0 {
            let cq = Owned::new(cq)
                .ok_or_else(|| Error::NoProvider("fi_cq_open returned NULL".into()))?;
            return Ok((cq, wait_obj != fi::FI_WAIT_NONE));
        }
        tracing::debug!(
            "fi_cq_open with wait object {wait_obj} on {provider}: {}",
            strerror(-rc)
        );
        last = rc;
    }
    Err(fabric_error(
        "fi_cq_open",
        last as isize,
        format!("opening the completion queue on provider {provider}"),
    ))
}

/// Processes `entries` that a CQ read returned.
fn complete_all(t: &OfiTransport, entries: &[fi::fi_cq_msg_entry]) {
    for e in entries {
        if !e.op_context.is_null() {
            if let Some(ctx) = t.ops.take(e.op_context) {
                match ctx.msg {
                    Some(role) => msg::completed(t, ctx, role, e.len, true),
                    None => {
                        // What it kept goes before the waiter is told (a
                        // bounce cell then comes back to its pool).
                        // Registrations first, then the memory they cover.
                        let mut ctx = ctx;
                        ctx._mr.clear();
                        ctx._keep = None;
                        ctx.complete()
                    }
                }
            }
        }
    }
}

/// The file descriptor of the CQ's wait object, which becomes readable when
/// the provider has work: a completion or, for `ofi_rxm`, bytes on any
/// connection (see [`wait_object`]). `None` without a wait object.
pub fn wait_fd(cq: &Owned<fi::fid_cq>) -> Option<std::os::fd::RawFd> {
    let mut fd: std::os::raw::c_int = -1;
    // SAFETY: live CQ; FI_GETWAIT writes one int (the fd of an FI_WAIT_FD
    // wait object) through the pointer.
    let rc = unsafe {
        fi::fi_control(
            cq.fid(),
            fi::FI_GETWAIT as std::os::raw::c_int,
            (&mut fd as *mut std::os::raw::c_int).cast(),
        )
    };
    (rc == 0 && fd >= 0).then_some(fd)
}

/// Re-arms the CQ's wait object before the caller sleeps on [`wait_fd`]:
/// `true` when nothing is pending (`fi_trywait` succeeded), `false` when
/// the CQ must be read first.
pub fn arm(t: &OfiTransport) -> bool {
    if t.wait_fd.is_none() || msg::retry_pending(t) {
        // No wait object, or receive buffers wait to be posted again.
        return false;
    }
    let mut fids = [t.cq.fid()];
    // SAFETY: live fabric and CQ (the CQ belongs to that fabric's domain);
    // the array holds one fid.
    let rc = unsafe { fi::fi_trywait(t.fabric.as_ptr(), fids.as_mut_ptr(), 1) };
    rc == 0
}

/// Reads all available completions; returns how many there were. Posts
/// that returned `-FI_EAGAIN` in the message layer are retried first.
pub fn drain(t: &OfiTransport) -> Result<usize> {
    msg::retry(t);
    let mut total = 0;
    loop {
        let mut entries = [fi::fi_cq_msg_entry::default(); BATCH];
        // SAFETY: live CQ opened with FI_CQ_FORMAT_MSG; buffer holds BATCH entries.
        let n = unsafe { fi::fi_cq_read(t.cq.as_ptr(), entries.as_mut_ptr().cast(), BATCH) };
        if n > 0 {
            complete_all(t, &entries[..n as usize]);
            total += n as usize;
            if (n as usize) < BATCH {
                return Ok(total);
            }
        } else if n == EAGAIN || n == 0 {
            return Ok(total);
        } else if n == EAVAIL {
            read_error(t)?;
            total += 1;
        } else {
            return Err(fabric_error(
                "fi_cq_read",
                n,
                "reading the completion queue",
            ));
        }
    }
}

fn read_error(t: &OfiTransport) -> Result<()> {
    let mut err = fi::fi_cq_err_entry::default();
    // SAFETY: live CQ; err is a valid entry (err_data NULL: provider-owned buffer).
    let n = unsafe { fi::fi_cq_readerr(t.cq.as_ptr(), &mut err, 0) };
    if n == EAGAIN {
        return Ok(());
    }
    if n < 0 {
        return Err(fabric_error(
            "fi_cq_readerr",
            n,
            "reading an error completion",
        ));
    }
    let mut buf = [0 as std::os::raw::c_char; 256];
    // SAFETY: live CQ, provider errno and data from the entry, valid buffer.
    let prov = unsafe {
        fi::fi_cq_strerror(
            t.cq.as_ptr(),
            err.prov_errno,
            err.err_data,
            buf.as_mut_ptr(),
            buf.len(),
        )
    };
    let detail = if prov.is_null() {
        String::new()
    } else {
        // SAFETY: fi_cq_strerror returns a NUL-terminated string.
        unsafe { std::ffi::CStr::from_ptr(prov) }
            .to_string_lossy()
            .into_owned()
    };
    if err.op_context.is_null() {
        tracing::warn!(
            "error completion without context: {} ({detail})",
            strerror(err.err)
        );
        return Ok(());
    }
    let Some(mut ctx) = t.ops.take(err.op_context) else {
        return Ok(());
    };
    if let Some(role) = ctx.msg {
        if err.err != fi::FI_ECANCELED {
            tracing::warn!("{} failed: {} ({detail})", ctx.what, strerror(err.err));
        }
        msg::completed(t, ctx, role, err.len, false);
        return Ok(());
    }
    let message = format!(
        "{} to rank {} failed: {} (provider: {detail})",
        ctx.what,
        ctx.target,
        strerror(err.err)
    );
    // The connection to the target was refused, reset or closed (the tcp
    // provider cancels the operations of a broken connection and reports
    // the socket's errno as the provider errno).
    let gone = |e: i32| {
        [
            nix::errno::Errno::ECONNREFUSED as i32,
            nix::errno::Errno::ECONNRESET as i32,
            nix::errno::Errno::ENOTCONN as i32,
            nix::errno::Errno::EPIPE as i32,
            nix::errno::Errno::EHOSTUNREACH as i32,
        ]
        .contains(&e.abs())
    };
    let peer_gone = gone(err.err) || gone(err.prov_errno);
    if let Some(failed) = ctx.on_fail.take() {
        let what = format!("{} to rank {}", ctx.what, ctx.target);
        failed(if peer_gone {
            Error::peer_unreachable(ctx.target, what, message.clone())
        } else {
            Error::backend("ofi", "fi_cq_readerr", what, err.err, message.clone())
        });
    }
    // As in `complete_all`: what it kept goes before the waiter is told.
    ctx._mr.clear();
    ctx._keep = None;
    if peer_gone {
        ctx.fail_peer_gone(message);
    } else {
        ctx.fail(message);
    }
    Ok(())
}
