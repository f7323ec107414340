//! Active messages over [`Transport::send`]: one-way messages and
//! request/reply, dispatched by a one-byte *kind* to registered handlers.
//!
//! See `docs/active-messages.md` for the design. In short:
//!
//! * A message is a 24-byte [`Header`] and a payload: a request or a
//!   one-way message up to the back-end's `Caps::max_message` less the
//!   header ([`ActiveMessages::max_payload`]: 4072 bytes on most
//!   back-ends, 65512 on libfabric's `net`), a reply up to [`MAX_PAYLOAD`]
//!   bytes (every back-end's buffers hold it).
//! * **Who runs handlers.** Whoever reads the completion queue: the
//!   progress agent, or an application thread waiting inside the library.
//!   Two handlers (of the same or different kinds) may therefore run at the
//!   same time on two threads. A handler must be `Send + Sync`, must not
//!   block on the network (no [`ActiveMessages::request`], no waiting for
//!   completions), and must finish in bounded time; the receive buffer it
//!   runs on is held meanwhile.
//! * **Replies** are built in the request's own receive buffer and sent
//!   from there without blocking (see [`crate::transport::Receiver`]), so a
//!   reply needs no buffer and never waits for a credit: a handler cannot
//!   deadlock two processes that request from each other at once.
//! * **Flow control.** An origin has at most [`CREDITS`] requests awaiting
//!   replies (all targets together); [`ActiveMessages::request`] drives
//!   progress (serving incoming requests meanwhile) until a credit frees.
//!   Each process keeps a constant pool of receive buffers; messages beyond
//!   it wait in the provider (all providers here run with resource
//!   management, `FI_RM_ENABLED`: a message is held or the sender is
//!   back-pressured, never dropped). Nothing in this layer queues without
//!   bound.
//! * **Hostile or malformed messages** (bad header, unknown kind, source
//!   rank outside the job, reply with a stale token or from the wrong rank,
//!   a handler refusing the payload) are counted in
//!   [`AmStats::protocol_errors`], logged, and touch no state; a refused
//!   request gets an error reply, so its origin fails with the reason.

mod header;
mod pending;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

pub use header::{Class, Header, HEADER_BYTES, LARGEST_PAYLOAD, MAX_PAYLOAD};
pub use pending::{NoReply, OnReply, CREDITS};

use super::{Receiver, Transport};
use crate::error::{Error, Result};

/// Message kinds used by the library (one handler each).
pub mod kind {
    /// Software accumulate requests (`protocols::accumulate`).
    pub const ACCUMULATE: u8 = 1;
    /// Post/start/complete/wait notifications.
    pub const PSCW: u8 = 2;
    /// Software locks and lock-op-unlock (`protocols::soft_lock::wire`).
    pub const LOCK: u8 = 3;
    /// Batches of small puts and accumulates (`ops::BatchHandler`).
    pub const BATCH: u8 = 4;
    /// Strided gets (`protocols::aggregation::GetHandler`).
    pub const GET: u8 = 5;
    /// PSCW complete notifications where the back-end has no 64-bit
    /// fetch-add (`protocols::pscw::target::CompleteNotes`).
    pub const PSCW_COMPLETE: u8 = 6;
    /// First kind free for tests and experiments.
    pub const USER: u8 = 128;
}

/// What a handler does with one message.
pub trait Handler: Send + Sync {
    /// Handles `payload` from rank `from`. For a request, `reply` is the
    /// space for the reply payload ([`MAX_PAYLOAD`] bytes) and the result is
    /// its length; for a one-way message `reply` is `None`. `Err(reason)`
    /// refuses the message: it is counted as a protocol error, and a
    /// request's origin receives `reason`. A handler must validate
    /// everything in `payload` before it touches memory.
    fn handle(
        &self,
        from: usize,
        payload: &[u8],
        reply: Option<&mut [u8]>,
    ) -> std::result::Result<usize, String>;
}

/// Counters of the active-message layer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AmStats {
    /// Messages handed to a handler (one-way and requests).
    pub handled: u64,
    /// Requests sent.
    pub requests: u64,
    /// Replies received and matched to a request.
    pub replies: u64,
    /// Messages rejected: malformed, unknown kind or token, refused by the
    /// handler.
    pub protocol_errors: u64,
    /// Requests in flight (credits in use).
    pub in_flight: usize,
}

type Resolver = Box<dyn Fn(usize) -> Result<()> + Send + Sync>;

/// The dispatcher of one process; installed as the transport's receiver.
pub struct ActiveMessages {
    rank: usize,
    size: usize,
    timeout: Option<Duration>,
    handlers: RwLock<HashMap<u8, Arc<dyn Handler>>>,
    pending: Arc<pending::Pending>,
    resolver: Resolver,
    handled: AtomicU64,
    requests: AtomicU64,
    replies: AtomicU64,
    errors: AtomicU64,
}

impl ActiveMessages {
    /// A dispatcher for rank `rank` of `size`; `resolver` makes a rank
    /// reachable (adds it as a transport peer) before a message goes there.
    pub fn new(
        rank: usize,
        size: usize,
        timeout: Option<Duration>,
        resolver: impl Fn(usize) -> Result<()> + Send + Sync + 'static,
    ) -> ActiveMessages {
        ActiveMessages {
            rank,
            size,
            timeout,
            handlers: RwLock::new(HashMap::new()),
            pending: Arc::default(),
            resolver: Box::new(resolver),
            handled: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            replies: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        }
    }

    /// Installs the handler of `kind` (once per kind).
    pub fn register(&self, kind: u8, handler: Arc<dyn Handler>) -> Result<()> {
        let mut h = self
            .handlers
            .write()
            .map_err(|_| Error::InvalidArgument("handler table poisoned".into()))?;
        if h.contains_key(&kind) {
            return Err(Error::InvalidArgument(format!(
                "active-message kind {kind} already has a handler"
            )));
        }
        h.insert(kind, handler);
        Ok(())
    }

    /// Counters.
    pub fn stats(&self) -> AmStats {
        AmStats {
            handled: self.handled.load(Ordering::Relaxed),
            requests: self.requests.load(Ordering::Relaxed),
            replies: self.replies.load(Ordering::Relaxed),
            protocol_errors: self.errors.load(Ordering::Relaxed),
            in_flight: self.pending.in_flight(),
        }
    }

    /// The largest payload of a one-way message or request on `t`: its
    /// `Caps::max_message` less the header (at least [`MAX_PAYLOAD`]).
    pub fn max_payload(t: &dyn Transport) -> usize {
        t.caps()
            .max_message
            .clamp(super::MAX_MESSAGE, super::LARGEST_MESSAGE)
            - HEADER_BYTES
    }

    fn message(
        &self,
        t: &dyn Transport,
        class: Class,
        kind: u8,
        token: u64,
        payload: &[u8],
    ) -> Result<Vec<u8>> {
        let max = Self::max_payload(t);
        if payload.len() > max {
            return Err(Error::InvalidArgument(format!(
                "active message of kind {kind}: {} payload bytes, at most {max} on this \
                 back-end ({})",
                payload.len(),
                t.caps().name
            )));
        }
        // The header zeroed and encoded, the payload appended: the
        // payload's bytes are written once (not zeroed first).
        let mut m = Vec::with_capacity(HEADER_BYTES + payload.len());
        m.resize(HEADER_BYTES, 0);
        Header {
            class,
            kind,
            source: self.rank as u32,
            len: payload.len() as u32,
            token,
        }
        .encode(&mut m);
        m.extend_from_slice(payload);
        Ok(m)
    }

    fn reach(&self, t: &dyn Transport, target: usize) -> Result<()> {
        if target >= self.size {
            return Err(Error::InvalidArgument(format!(
                "active message to rank {target}, job size {}",
                self.size
            )));
        }
        if !t.is_connected(target) {
            (self.resolver)(target)?;
        }
        Ok(())
    }

    /// Sends a one-way message; returns when `payload` may be reused.
    pub fn send(&self, t: &dyn Transport, target: usize, kind: u8, payload: &[u8]) -> Result<()> {
        let m = self.message(t, Class::OneWay, kind, 0, payload)?;
        self.reach(t, target)?;
        t.send(target, &m)
    }

    /// Sends a request; `on_reply` runs once with the reply (on whichever
    /// thread reads it). Waits, driving progress, while all [`CREDITS`] are
    /// in use. On `Err` nothing was sent and `on_reply` is dropped uncalled.
    /// Must not be called from a handler.
    pub fn request(
        &self,
        t: &dyn Transport,
        target: usize,
        kind: u8,
        payload: &[u8],
        on_reply: OnReply,
    ) -> Result<()> {
        // Validate the size before taking a credit.
        self.message(t, Class::Request, kind, 1, payload)?;
        self.reach(t, target)?;
        let what = || {
            // The counters tell a lost reply from a peer that stopped serving.
            let (am, ts) = (self.stats(), t.stats());
            format!(
                "waiting for one of {CREDITS} request credits (request of kind {kind} \
                 to rank {target}): replies do not come back ({} requests sent, {} replies \
                 matched, {} messages handled here; the transport received {} messages, \
                 dropped {}, sent {}, has {} operations in flight)",
                am.requests,
                am.replies,
                am.handled,
                ts.messages_received,
                ts.messages_dropped,
                ts.sends,
                ts.ops_in_flight
            )
        };
        let mut wait = crate::progress::wait::Waiter::new(self.timeout, &what);
        let mut on_reply = on_reply;
        let token = loop {
            match self.pending.reserve(target, kind, on_reply) {
                Ok(token) => break token,
                Err(back) => on_reply = back,
            }
            t.progress()?;
            wait.step()?;
        };
        let m = self.message(t, Class::Request, kind, token, payload)?;
        // The reply proves delivery: the send is not waited for. If it fails
        // later, the request's slot is taken back and its `on_reply` learns
        // why (unless a reply already took it).
        let pending = self.pending.clone();
        let failed: crate::transport::SendFailed = Box::new(move |e| {
            if let Ok(on_reply) = pending.take(token, target, kind) {
                on_reply(Err(NoReply::Unsent(e)));
            }
        });
        if let Err(e) = t.send_posted(target, &m, failed) {
            // Nothing went out: give the credit back without running on_reply.
            drop(self.pending.take(token, target, kind));
            return Err(e);
        }
        self.requests.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn reject(&self, from: Option<usize>, why: &str) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let who = from.map_or("an unknown rank".to_string(), |r| format!("rank {r}"));
        tracing::warn!("active message from {who} rejected: {why}");
    }

    /// Writes an error reply for `h` into `buf`; returns its length.
    fn error_reply(&self, buf: &mut [u8], h: &Header, why: &str) -> usize {
        let mut n = why.len().min(MAX_PAYLOAD);
        while !why.is_char_boundary(n) {
            n -= 1;
        }
        buf[HEADER_BYTES..HEADER_BYTES + n].copy_from_slice(&why.as_bytes()[..n]);
        self.reply_header(buf, Class::ErrorReply, h, n)
    }

    fn reply_header(&self, buf: &mut [u8], class: Class, h: &Header, n: usize) -> usize {
        Header {
            class,
            kind: h.kind,
            source: self.rank as u32,
            len: n as u32,
            token: h.token,
        }
        .encode(&mut buf[..HEADER_BYTES]);
        HEADER_BYTES + n
    }

    fn handler(&self, kind: u8) -> Option<Arc<dyn Handler>> {
        self.handlers.read().ok()?.get(&kind).cloned()
    }
}

impl Receiver for ActiveMessages {
    fn receive(&self, buf: &mut [u8], len: usize) -> Option<(usize, usize)> {
        if buf.len() < crate::transport::MAX_MESSAGE {
            self.reject(None, "receive buffer smaller than MAX_MESSAGE");
            return None;
        }
        let Some(msg) = buf.get(..len) else {
            self.reject(None, "length beyond the receive buffer");
            return None;
        };
        let h = match Header::decode(msg) {
            Ok(h) => h,
            Err(why) => {
                self.reject(None, &why);
                return None;
            }
        };
        let from = h.source as usize;
        if from >= self.size {
            self.reject(None, &format!("source rank {from} outside the job"));
            return None;
        }
        let payload_end = HEADER_BYTES + h.len as usize;
        match h.class {
            Class::Reply | Class::ErrorReply => {
                let on_reply = match self.pending.take(h.token, from, h.kind) {
                    Ok(f) => f,
                    Err(why) => {
                        self.reject(Some(from), &why);
                        return None;
                    }
                };
                self.replies.fetch_add(1, Ordering::Relaxed);
                let payload = &buf[HEADER_BYTES..payload_end];
                if h.class == Class::Reply {
                    on_reply(Ok(payload));
                } else {
                    on_reply(Err(NoReply::Refused(
                        String::from_utf8_lossy(payload).into_owned(),
                    )));
                }
                None
            }
            Class::OneWay => {
                let Some(handler) = self.handler(h.kind) else {
                    self.reject(Some(from), &format!("no handler for kind {}", h.kind));
                    return None;
                };
                self.handled.fetch_add(1, Ordering::Relaxed);
                if let Err(why) = handler.handle(from, &buf[HEADER_BYTES..payload_end], None) {
                    self.reject(Some(from), &why);
                }
                None
            }
            Class::Request => {
                let Some(handler) = self.handler(h.kind) else {
                    let why = format!("rank {}: no handler for kind {}", self.rank, h.kind);
                    self.reject(Some(from), &why);
                    return Some((from, self.error_reply(buf, &h, &why)));
                };
                self.handled.fetch_add(1, Ordering::Relaxed);
                // The reply is written where the request was: hand the
                // handler a copy of the payload, on the stack up to
                // MAX_PAYLOAD (no allocation on the usual path), on the
                // heap beyond (a request may be larger where the
                // back-end's buffers are).
                let request = &buf[HEADER_BYTES..payload_end];
                let mut small = [0u8; MAX_PAYLOAD];
                let large: Vec<u8>;
                let payload: &[u8] = if request.len() <= MAX_PAYLOAD {
                    small[..request.len()].copy_from_slice(request);
                    &small[..request.len()]
                } else {
                    large = request.to_vec();
                    &large
                };
                let out = &mut buf[HEADER_BYTES..HEADER_BYTES + MAX_PAYLOAD];
                match handler.handle(from, payload, Some(out)) {
                    Ok(n) if n <= MAX_PAYLOAD => {
                        Some((from, self.reply_header(buf, Class::Reply, &h, n)))
                    }
                    Ok(n) => {
                        let why = format!("handler of kind {} built a {n}-byte reply", h.kind);
                        self.reject(Some(from), &why);
                        Some((from, self.error_reply(buf, &h, &why)))
                    }
                    Err(why) => {
                        self.reject(Some(from), &why);
                        let why = format!("rank {}: {why}", self.rank);
                        Some((from, self.error_reply(buf, &h, &why)))
                    }
                }
            }
        }
    }

    fn resolve(&self, rank: usize) -> Result<()> {
        (self.resolver)(rank)
    }
}
