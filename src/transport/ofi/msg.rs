//! Messages (`FI_MSG`): a constant pool of pre-posted receive buffers,
//! bounded sends, and replies built in place.
//!
//! Every process posts [`RECV_BUFFERS`] buffers of the provider's
//! `Caps::max_message` bytes (4 KiB, 8 KiB over rxm, 64 KiB on `net`:
//! `caps::max_message`) on its endpoint at start-up. A longer message is
//! refused by the sender ([`crate::transport::check_message`]); one that
//! arrives longer anyway (a peer with another setting) completes with an
//! error and is dropped and counted, never handed over truncated. A buffer cycles through three states, each
//! owned by exactly one party:
//!
//! 1. *posted*: the provider may write it; its context is in the op table
//!    with role [`MsgRole::Recv`];
//! 2. *handed over*: its receive completion was read; the thread that read
//!    it (progress agent or a waiting application thread) runs the
//!    [`Receiver`] on it, alone;
//! 3. *replying* (optional): the receiver built a reply in the buffer; it is
//!    sent from there with role [`MsgRole::Reply`], and the buffer is posted
//!    again only when that send completed.
//!
//! A post that returns `-FI_EAGAIN` is not waited for: the buffer goes on
//! the retry list, which every CQ drain works through first. The list holds
//! at most [`RECV_BUFFERS`] entries (one per buffer), so nothing here queues
//! without bound and no thread blocks while it holds a buffer.
//!
//! Plain `FI_MULTI_RECV` was considered: it saves posts, but a multi-receive
//! buffer is released only when *every* message in it was consumed, so one
//! slow reply would pin many messages; fixed buffers make the bound and the
//! in-place reply trivial.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use libfabric_sys as fi;

use super::cq::OpContext;
use super::fault::{fabric_error, EAGAIN};
use super::mr::LocalMr;
use super::waiting::{post_retry, wait, Trackers};
use super::OfiTransport;
use crate::error::Result;
use crate::transport::{Completion, Memory, Receiver, RECV_BUFFERS};

/// What a message context is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MsgRole {
    /// Receive buffer `i` is posted.
    Recv(usize),
    /// Receive buffer `i` is being sent as a reply.
    Reply(usize),
}

#[derive(Clone, Copy)]
enum Retry {
    Repost(usize),
    Reply {
        index: usize,
        to: fi::fi_addr_t,
        len: usize,
    },
}

/// The receive pool and message counters of one endpoint.
pub struct Messages {
    // Registration (FI_MR_LOCAL only) before the memory it covers.
    mr: Option<LocalMr>,
    mem: Memory<'static>,
    /// Bytes of each buffer (`Caps::max_message`).
    size: usize,
    receiver: RwLock<Option<Arc<dyn Receiver>>>,
    retry: Mutex<Vec<Retry>>,
    retries: AtomicUsize,
    tracker: Arc<Completion>,
    /// Contexts of this module in the op table (not "operations in flight").
    held: AtomicUsize,
    pub(super) sends: AtomicU64,
    pub(super) send_bytes: AtomicU64,
    pub(super) received: AtomicU64,
    pub(super) dropped: AtomicU64,
}

impl Messages {
    /// Allocates (and under `FI_MR_LOCAL` registers) the pool; nothing is
    /// posted yet (see [`post_all`]).
    pub fn new(t: &OfiTransport) -> Result<Messages> {
        let size = t.caps.max_message;
        let mem = Memory::allocate(RECV_BUFFERS * size)?;
        let mr = if t.props.mr_local {
            Some(LocalMr::register(
                t,
                mem.as_ptr(),
                mem.len(),
                fi::FI_RECV | fi::FI_SEND,
            )?)
        } else {
            None
        };
        Ok(Messages {
            mr,
            mem,
            size,
            receiver: RwLock::new(None),
            retry: Mutex::new(Vec::with_capacity(RECV_BUFFERS)),
            retries: AtomicUsize::new(0),
            tracker: Arc::new(Completion::new()),
            held: AtomicUsize::new(0),
            sends: AtomicU64::new(0),
            send_bytes: AtomicU64::new(0),
            received: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        })
    }

    fn ptr(&self, i: usize) -> *mut u8 {
        self.mem.as_ptr().wrapping_add(i * self.size)
    }

    fn desc(&self) -> *mut std::os::raw::c_void {
        self.mr.as_ref().map_or(std::ptr::null_mut(), |m| m.desc())
    }

    /// Installs the receiver.
    pub fn set_receiver(&self, r: Arc<dyn Receiver>) {
        if let Ok(mut g) = self.receiver.write() {
            *g = Some(r);
        }
    }

    /// Contexts of posted receive buffers and replies in the op table.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    fn push_retry(&self, r: Retry) {
        if let Ok(mut l) = self.retry.lock() {
            l.push(r);
            self.retries.store(l.len(), Ordering::Release);
        }
    }
}

fn pool(t: &OfiTransport) -> Option<&Messages> {
    t.msgs.as_ref()
}

fn context(m: &Messages, role: MsgRole) -> OpContext {
    m.tracker.add();
    m.held.fetch_add(1, Ordering::Relaxed);
    OpContext {
        done: m.tracker.clone(),
        group: None,
        _mr: Vec::new(),
        _keep: None,
        what: match role {
            MsgRole::Recv(_) => "receive",
            MsgRole::Reply(_) => "reply",
        },
        target: usize::MAX,
        msg: Some(role),
        on_fail: None,
        // Receive buffers are the message layer's own.
        uses_caller: false,
    }
}

/// Takes back the context of a post the provider refused.
fn unpost(t: &OfiTransport, m: &Messages, token: *mut std::os::raw::c_void) {
    if let Some(c) = t.ops.take(token) {
        released(m, &c);
    }
}

/// Bookkeeping when a message context leaves the op table.
pub fn released(m: &Messages, c: &OpContext) {
    m.held.fetch_sub(1, Ordering::Relaxed);
    c.complete();
}

/// Posts buffer `i` for receiving; `-FI_EAGAIN` puts it on the retry list.
fn repost(t: &OfiTransport, m: &Messages, i: usize) {
    let token = t.ops.insert_reserved(context(m, MsgRole::Recv(i)));
    if token.is_null() {
        return;
    }
    // SAFETY: live endpoint; buffer i (m.size bytes inside the pool,
    // which outlives the endpoint) is owned by this post until its
    // completion is read; token is an op-table token.
    let rc = unsafe {
        fi::fi_recv(
            t.ep.as_ptr(),
            m.ptr(i).cast(),
            m.size,
            m.desc(),
            fi::FI_ADDR_UNSPEC,
            token,
        )
    };
    if rc != 0 {
        unpost(t, m, token);
        if rc == EAGAIN {
            m.push_retry(Retry::Repost(i));
        } else {
            tracing::warn!(
                "posting receive buffer {i} failed: {}",
                fabric_error("fi_recv", rc, "posting a receive buffer")
            );
        }
    }
}

/// Posts every receive buffer (at endpoint creation).
pub fn post_all(t: &OfiTransport) {
    if let Some(m) = pool(t) {
        for i in 0..RECV_BUFFERS {
            repost(t, m, i);
        }
    }
}

/// Sends buffer `i`'s first `len` bytes to `to` as a reply.
fn post_reply(t: &OfiTransport, m: &Messages, i: usize, to: fi::fi_addr_t, len: usize) {
    let token = t.ops.insert_reserved(context(m, MsgRole::Reply(i)));
    if token.is_null() {
        return;
    }
    // SAFETY: as in repost; buffer i is not posted for receiving while its
    // reply is in flight.
    let rc = unsafe { fi::fi_send(t.ep.as_ptr(), m.ptr(i).cast(), len, m.desc(), to, token) };
    if rc == 0 {
        m.sends.fetch_add(1, Ordering::Relaxed);
        m.send_bytes.fetch_add(len as u64, Ordering::Relaxed);
        return;
    }
    unpost(t, m, token);
    if rc == EAGAIN {
        m.push_retry(Retry::Reply { index: i, to, len });
    } else {
        m.dropped.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            "sending a reply failed: {}",
            fabric_error("fi_send", rc, "sending a reply")
        );
        repost(t, m, i);
    }
}

/// Whether posts wait on the retry list (a blocking CQ read would leave
/// them waiting until it returns).
pub fn retry_pending(t: &OfiTransport) -> bool {
    pool(t).is_some_and(|m| m.retries.load(Ordering::Acquire) != 0)
}

/// Works through the retry list (called at the start of every drain).
pub fn retry(t: &OfiTransport) {
    let Some(m) = pool(t) else { return };
    if m.retries.load(Ordering::Acquire) == 0 {
        return;
    }
    let list = match m.retry.lock() {
        Ok(mut l) => {
            m.retries.store(0, Ordering::Release);
            std::mem::take(&mut *l)
        }
        Err(_) => return,
    };
    for r in list {
        match r {
            Retry::Repost(i) => repost(t, m, i),
            Retry::Reply { index, to, len } => post_reply(t, m, index, to, len),
        }
    }
}

/// A completion of a message context: a receive (`len` bytes arrived) or a
/// reply sent. `ok` is false for an error completion.
pub fn completed(t: &OfiTransport, ctx: OpContext, role: MsgRole, len: usize, ok: bool) {
    let Some(m) = pool(t) else { return };
    released(m, &ctx);
    match role {
        MsgRole::Reply(i) => repost(t, m, i),
        MsgRole::Recv(i) if !ok || len > m.size => {
            m.dropped.fetch_add(1, Ordering::Relaxed);
            repost(t, m, i);
        }
        MsgRole::Recv(i) => {
            m.received.fetch_add(1, Ordering::Relaxed);
            let r = m.receiver.read().ok().and_then(|g| g.clone());
            let Some(r) = r else {
                m.dropped.fetch_add(1, Ordering::Relaxed);
                return repost(t, m, i);
            };
            // SAFETY: buffer i lies inside the pool; its receive completed,
            // so the provider no longer writes it, and it is posted again
            // only after this call (or its reply): this thread owns it.
            let buf = unsafe { std::slice::from_raw_parts_mut(m.ptr(i), m.size) };
            match r.receive(buf, len) {
                None => repost(t, m, i),
                Some((to, n)) => {
                    let addr = t
                        .peer(to)
                        .or_else(|_| r.resolve(to).and_then(|_| t.peer(to)));
                    match addr {
                        Ok(a) => post_reply(t, m, i, a, n.min(m.size)),
                        Err(e) => {
                            m.dropped.fetch_add(1, Ordering::Relaxed);
                            tracing::warn!("cannot reply to rank {to}: {e}");
                            repost(t, m, i);
                        }
                    }
                }
            }
        }
    }
}

/// Blocking send of at most `Caps::max_message` bytes.
pub fn send(t: &OfiTransport, target: usize, bytes: &[u8]) -> Result<()> {
    let done = Arc::new(Completion::new());
    let len = bytes.len();
    let posted = post(t, target, bytes, &done, None);
    if posted.as_ref().is_ok_and(|injected| *injected) {
        return Ok(());
    }
    let waited = wait(t, &done, &|| format!("sending {len} bytes to rank {target}"));
    posted?;
    waited
}

/// Posts a send of at most `Caps::max_message` bytes and returns; `failed`
/// runs if it fails later (`Transport::send_posted`).
pub fn send_posted(
    t: &OfiTransport,
    target: usize,
    bytes: &[u8],
    failed: crate::transport::SendFailed,
) -> Result<()> {
    // Nobody waits on this tracker: the context's hook reports a failure.
    let done = Arc::new(Completion::new());
    post(t, target, bytes, &done, Some(failed)).map(|_| ())
}

/// Posts a send tracked on `done`; `Ok(true)` when it was injected (no
/// completion will come).
fn post(
    t: &OfiTransport,
    target: usize,
    bytes: &[u8],
    done: &Arc<Completion>,
    failed: Option<crate::transport::SendFailed>,
) -> Result<bool> {
    crate::transport::check_message(target, bytes.len(), t.caps.max_message)?;
    t.ensure_alive()?;
    let fi_addr = t.peer(target)?;
    let count = || {
        if let Some(m) = pool(t) {
            m.sends.fetch_add(1, Ordering::Relaxed);
            m.send_bytes
                .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        }
    };
    if !t.props.mr_local && bytes.len() <= t.props.inject_size {
        // The provider copies injected data before returning.
        post_retry(t, "fi_inject", target, std::ptr::null_mut(), || {
            // SAFETY: live endpoint; bytes is valid for the call.
            unsafe { fi::fi_inject(t.ep.as_ptr(), bytes.as_ptr().cast(), bytes.len(), fi_addr) }
        })?;
        count();
        return Ok(true);
    }
    // A copy: under FI_MR_LOCAL it is registered (the caller's bytes may be
    // read-only), and it is owned by the operation's context either way.
    let copy: Arc<Vec<u8>> = Arc::new(bytes.to_vec());
    let mr = if t.props.mr_local {
        vec![LocalMr::register(
            t,
            copy.as_ptr().cast_mut(),
            copy.len(),
            fi::FI_SEND,
        )?]
    } else {
        Vec::new()
    };
    let desc = mr.first().map_or(std::ptr::null_mut(), |m| m.desc());
    let (ptr, len) = (copy.as_ptr(), copy.len());
    let keep: Arc<dyn std::any::Any + Send + Sync> = copy;
    let ctx = OpContext::track_failing(
        t,
        Trackers::own(done),
        (mr, Some(keep)),
        "send",
        target,
        failed,
    )?;
    post_retry(t, "fi_send", target, ctx, || {
        // SAFETY: live endpoint; the copy is kept alive by the context until
        // the completion; desc covers it under FI_MR_LOCAL.
        unsafe { fi::fi_send(t.ep.as_ptr(), ptr.cast(), len, desc, fi_addr, ctx) }
    })?;
    count();
    Ok(false)
}
