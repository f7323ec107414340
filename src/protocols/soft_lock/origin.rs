//! The origin side of the software lock path: lock requests are active
//! messages of kind `LOCK` ([`LockMsg`]) served by the target's lock queue
//! ([`super::target::LockHandler`]); requests to oneself are served here,
//! directly. A queued request is polled until granted; a full queue answers
//! "busy" and the origin retries, pausing with the caller's backoff.
//!
//! This side depends on [`Origin`], a narrow context (transport, active
//! messages, our own lock handler, rank and window id), not on the public
//! `Window`. Which operations are stashed and when a lazy lock is acquired
//! is the window's lock epoch (`api::window::soft_lock`).

use std::sync::{Arc, Mutex};

use super::target::LockHandler;
use super::wire::{Carried, LockMsg, Status, SubOp};
use crate::epoch::LockType;
use crate::error::{Error, Result};
use crate::transport::am::{kind, ActiveMessages, NoReply};
use crate::transport::{Completion, Transport};

/// What the origin side of the lock protocol needs of a window.
pub struct Origin<'c> {
    /// The back-end requests travel on.
    pub transport: &'c dyn Transport,
    /// The active-message layer (credits, replies).
    pub am: &'c ActiveMessages,
    /// This process's lock queue (serves requests to oneself).
    pub queue: &'c LockHandler,
    /// This process's rank.
    pub me: usize,
    /// The window's id.
    pub window: u64,
}

impl Origin<'_> {
    /// One lock request to `rank` and its reply (served here for ourselves).
    ///
    /// # Errors
    /// The request could not be sent, timed out, or the target refused it
    /// ([`Error::Protocol`] naming the rank and the window).
    pub fn rpc(&self, rank: usize, m: &LockMsg<'_>) -> Result<Status> {
        let window = self.window;
        let refused = |why: String| Error::Protocol {
            peer: format!("rank {rank}"),
            message: format!("window {window}: lock request refused: {why}"),
        };
        if rank == self.me {
            return self.queue.serve(rank, m).map_err(refused);
        }
        let slot: Arc<Mutex<Option<std::result::Result<Status, NoReply>>>> = Arc::default();
        let done = Arc::new(Completion::new());
        done.add();
        let (s, d) = (slot.clone(), done.clone());
        self.am.request(
            self.transport,
            rank,
            kind::LOCK,
            &m.encode(),
            Box::new(move |reply| {
                let r = reply.and_then(|b| Status::decode(b).map_err(NoReply::Refused));
                if let Ok(mut g) = s.lock() {
                    *g = Some(r);
                }
                d.done();
            }),
        )?;
        self.transport.wait(&done, &|| {
            format!("lock request to rank {rank} (window {window})")
        })?;
        let got = slot.lock().ok().and_then(|mut g| g.take());
        match got {
            Some(Ok(s)) => Ok(s),
            Some(Err(no)) => Err(no.into_error(refused)),
            None => Err(refused("no reply recorded".into())),
        }
    }

    /// Takes `kind` on `rank` through its queue, carrying `op` (applied by
    /// the target when it grants) and, with `release`, giving the lock back
    /// right after it. Returns whether `op` was applied there: false when
    /// the request was queued, in which case the lock is held and `op` is
    /// still to do. `pause` is called between retries and polls (progress
    /// and backoff; its error, a timeout, ends the wait and withdraws the
    /// request).
    ///
    /// # Errors
    /// As [`Origin::rpc`], an unexpected reply, or `pause`'s error.
    pub fn take(
        &self,
        rank: usize,
        kind: LockType,
        op: Carried<'_>,
        release: bool,
        pause: &mut dyn FnMut() -> Result<()>,
    ) -> Result<bool> {
        let acquire = LockMsg {
            sub: SubOp::Acquire,
            kind,
            release,
            window: self.window,
            ticket: 0,
            op,
        };
        let ticket = loop {
            match self.rpc(rank, &acquire)? {
                Status::Granted => return Ok(true),
                Status::Queued(ticket) => break ticket,
                Status::Busy => pause()?,
                Status::Done => return Err(self.odd_reply(rank)),
            }
        };
        let poll = LockMsg {
            sub: SubOp::Poll,
            op: Carried::None,
            release: false,
            ticket,
            ..acquire
        };
        loop {
            if let Err(e) = pause() {
                // Withdraw (best effort: a granted lock is given back).
                let cancel = LockMsg {
                    sub: SubOp::Cancel,
                    ..poll
                };
                let _ = self.rpc(rank, &cancel);
                return Err(e);
            }
            match self.rpc(rank, &poll)? {
                Status::Granted => return Ok(false),
                Status::Queued(_) => {}
                _ => return Err(self.odd_reply(rank)),
            }
        }
    }

    fn odd_reply(&self, rank: usize) -> Error {
        Error::Protocol {
            peer: format!("rank {rank}"),
            message: format!("window {}: unexpected lock reply", self.window),
        }
    }

    /// Gives back `kind` on `rank` without waiting for the reply: the reply
    /// counts on `tracker` (which fails with the target's reason). To
    /// oneself, served at once.
    ///
    /// # Errors
    /// The request could not be sent (the tracker is then not counted), or
    /// our own queue refused it.
    pub fn release(&self, rank: usize, kind: LockType, tracker: &Arc<Completion>) -> Result<()> {
        let m = LockMsg {
            sub: SubOp::Release,
            kind,
            release: false,
            window: self.window,
            ticket: 0,
            op: Carried::None,
        };
        if rank == self.me {
            return self.rpc(rank, &m).map(|_| ());
        }
        tracker.add();
        let t = tracker.clone();
        let id = self.window;
        let sent = self.am.request(
            self.transport,
            rank,
            kind::LOCK,
            &m.encode(),
            Box::new(move |reply| {
                match reply.and_then(|b| Status::decode(b).map_err(NoReply::Refused)) {
                    Ok(Status::Done) => t.done(),
                    Ok(s) => t.failed(format!("window {id}: release answered {s:?}")),
                    Err(no) => {
                        no.fail_completion(&t, |why| format!("window {id}: release refused: {why}"))
                    }
                }
            }),
        );
        if sent.is_err() {
            tracker.done();
        }
        sent
    }
}
