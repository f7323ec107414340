//! Generalized active-target synchronization (MPI_Win_post / start /
//! complete / wait / test). The state machine is `epoch::pscw`; the design
//! and why a counter suffices for completion are in docs/semantics.md
//! ("Post/start/complete/wait").
//!
//! * Completion: an origin's `complete` completes its operations at every
//!   target of the group (as `flush`), then adds 1 to the target's
//!   COMPLETE_WORD (word 11 of the window's descriptor) with a provider
//!   fetch-add — or, when every rank is on this node and the control
//!   regions are shared (`World::sync_words_by_cpu`, the same on every
//!   rank), with a CPU fetch-add on the mapped region, so the word never
//!   sees both kinds of atomics. A back-end without a 64-bit fetch-add
//!   (libfabric's `net` provider has no atomics) sends a one-way message
//!   of kind `PSCW_COMPLETE` instead, counted per window in the post box.
//!   The target's `wait` waits until the word plus that count reaches the
//!   cumulative number of origins it exposed the window to.
//! * Post notification: a target's `post` must tell each origin *which*
//!   target posted (a later epoch's target may post early), so it is one
//!   active message (kind `PSCW`, payload: the window id) per origin,
//!   counted at the origin by `protocols::pscw::target` — or, when every
//!   rank is on this node, an entry in the origin's post ring in its
//!   control region (`protocols::pscw::ring`), absorbed into the same
//!   count. An origin waits for the
//!   post of a target before its first operation to it and before telling
//!   it `complete`. With `Assert::NOCHECK` on both sides (the matching calls
//!   are known to have happened, e.g. across a barrier) nothing is sent.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::Window;
use crate::api::element::Element;
use crate::epoch::pscw::{normalize, Group};
use crate::epoch::Assert;
use crate::error::{Error, Result};
use crate::meta::directory;
use crate::protocols::pscw;
use crate::transport::am::kind;
use crate::transport::{Atomic, AtomicKind, AtomicOp, Datatype, RemoteAddr};

/// How long a PSCW wait only yields the core between progress calls before
/// it starts sleeping: a matching call on the peer usually follows within
/// microseconds (one message), so the handshake must not pay a sleep.
const SPIN: Duration = Duration::from_millis(1);
const FIRST_SLEEP: Duration = Duration::from_micros(1);
const MAX_SLEEP: Duration = Duration::from_micros(200);

impl<T: Element> Window<'_, T> {
    /// Checks the ranks of `group` and returns their world ranks, sorted
    /// and without duplicates (`normalize`).
    fn check_group(&self, op: &'static str, group: &[usize]) -> Result<Group> {
        // A loop of pushes: `collect::<Result<Group>>()` went through the
        // generic `try_process` and `SmallVec::extend` (~120 instructions
        // for a group of one, callgrind).
        let mut world = Group::with_capacity(group.len());
        for &r in group {
            world.push(self.check_rank(r)?);
        }
        normalize(self.id, op, world)
    }

    fn check_asserts(&self, op: &'static str, assert: Assert, allowed: Assert) -> Result<()> {
        let bad = assert.0 & !allowed.0;
        if bad != 0 {
            return Err(Error::InvalidArgument(format!(
                "window {}: {op}: assertion bits {bad:#x} are not allowed here",
                self.id
            )));
        }
        Ok(())
    }

    /// Opens an exposure epoch for the origins in `group` (MPI_Win_post):
    /// they may access this window until [`Window::wait`] (or a successful
    /// [`Window::test`]) returns. Assertions: `NOCHECK` (the matching
    /// `start` calls use NOCHECK too; no notification is sent), `NOSTORE`,
    /// `NOPUT` (accepted, change nothing).
    pub fn post(&self, group: &[usize], assert: Assert) -> Result<()> {
        self.alive("post")?;
        self.check_asserts(
            "post",
            assert,
            Assert::NOCHECK | Assert::NOSTORE | Assert::NOPUT,
        )?;
        let group = self.check_group("post", group)?;
        let nocheck = assert.contains(Assert::NOCHECK);
        let mut origins = if nocheck { Group::new() } else { group.clone() };
        let mut state = self.epoch()?;
        state.begin_pscw(self.id, "post")?;
        state.pscw.post(self.id, group)?;
        drop(state);
        // Local stores before the post are visible to the origins' accesses.
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.world.sync_words_by_cpu() {
            // Every rank is on this node: into each origin's post ring
            // (`protocols::pscw::ring`); a full ring leaves it to a message.
            let (me, entry) = (self.world.rank(), directory::entry_offset(self.slot));
            let mut rest = Group::new();
            for o in origins {
                // The origin's control region through the window's slot
                // when this rank reached it as a target, else the world's.
                let pushed = o != me
                    && match self.slot_ctrl(o) {
                        Some(m) => pscw::ring::push(&m, entry, me)?,
                        None => self
                            .world
                            .with_local_ctrl(o, |m| pscw::ring::push(m, entry, me))?
                            .unwrap_or(false),
                    };
                if !pushed {
                    rest.push(o);
                }
            }
            origins = rest;
        }
        pscw::Origin {
            transport: self.world.transport(),
            am: &self.world.am,
            posts: &self.world.posts,
            me: self.world.rank(),
            window: self.id,
        }
        .notify(&origins)?;
        Ok(())
    }

    /// Opens an access epoch to the targets in `group` (MPI_Win_start):
    /// operations to them are allowed until [`Window::complete`]; an
    /// operation to a target waits for its post. `NOCHECK`: the matching
    /// posts have happened already.
    pub fn start(&self, group: &[usize], assert: Assert) -> Result<()> {
        self.alive("start")?;
        self.check_asserts("start", assert, Assert::NOCHECK)?;
        let group = self.check_group("start", group)?;
        let nocheck = assert.contains(Assert::NOCHECK);
        let mut state = self.epoch()?;
        state.begin_pscw(self.id, "start")?;
        state.pscw.start(self.id, group, nocheck)?;
        drop(state);
        self.new_access_epoch();
        Ok(())
    }

    /// Waits until the post notification of `rank` for the open access
    /// epoch has arrived.
    pub(super) fn await_post(&self, op: &'static str, rank: usize) -> Result<()> {
        let id = self.id;
        let consume = || {
            let mut state = self.epoch()?;
            if state.pscw.access.is_none() {
                return Err(Error::Epoch {
                    window: self.id,
                    op,
                    state: "outside a start epoch".into(),
                });
            }
            if state.pscw.ready(rank) {
                return Ok(true);
            }
            // A post of `rank` found in the ring is consumed at once (posts
            // of one target to one window are interchangeable tokens).
            let mut found = false;
            if self.world.sync_words_by_cpu() {
                // Posts of node-local targets wait in our ring (we hold the
                // epoch lock: the one consumer).
                let entry = directory::entry_offset(self.slot);
                let size = self.world.size();
                let posts = &self.world.posts;
                let bad = pscw::ring::drain(self.world.control_memory(), entry, size, |r| {
                    if r == rank && !found {
                        found = true;
                    } else if let Err(e) = posts.arrive(id, r) {
                        tracing::warn!("post ring of window {id}: {e}");
                    }
                })?;
                if bad > 0 {
                    tracing::warn!("post ring of window {id}: {bad} entries that name no rank dropped");
                }
            }
            let arrived = found || self.world.posts.take(self.id, rank);
            if arrived {
                state.pscw.mark_ready(rank);
            }
            Ok(arrived)
        };
        self.poll_until(consume, &|| {
            format!("{op} of window {id}: waiting for the post of rank {rank}")
        })
        .map_err(|e| e.awaiting(rank))
    }

    /// Drives progress until `done` is true or the configured timeout
    /// passes: yielding the core for the first [`SPIN`] (a waiting peer
    /// costs one wake-up, not a sleep), then sleeping with bounded backoff
    /// so a long wait does not burn a core.
    fn poll_until(
        &self,
        mut done: impl FnMut() -> Result<bool>,
        what: &dyn Fn() -> String,
    ) -> Result<()> {
        // Node-local peers store posts and completions into shared memory.
        if self.world.sync_words_by_cpu() && crate::progress::wait::spin_local(&mut done)? {
            return Ok(());
        }
        let start = Instant::now();
        let mut sleep = FIRST_SLEEP;
        let t = self.world.transport();
        loop {
            if done()? {
                return Ok(());
            }
            if let Some(limit) = self.world.config.timeout {
                // An enclosing call's deadline (`complete`: one timeout for
                // the whole group) ends this wait too.
                if start.elapsed() > limit || crate::progress::wait::outer_passed() {
                    return Err(Error::timeout(what(), limit.as_secs()));
                }
            }
            t.progress()?;
            if start.elapsed() < SPIN {
                std::thread::yield_now();
            } else {
                std::thread::sleep(sleep);
                sleep = (sleep * 2).min(MAX_SLEEP);
            }
        }
    }

    fn complete_word(&self, rank: usize) -> Result<RemoteAddr> {
        let ctrl = self.world.control(rank)?;
        let off = directory::entry_offset(self.slot) + directory::COMPLETE_WORD;
        Ok(RemoteAddr {
            addr: ctrl.addr + off as u64,
            key: ctrl.key,
        })
    }

    /// Closes the access epoch (MPI_Win_complete): completes every operation
    /// at its target, then tells each target of the group (one fetch-add on
    /// its complete counter; after its post, unless NOCHECK). The epoch is
    /// closed even if this fails.
    ///
    /// # Errors
    /// The first member's error. Waits for posts share one
    /// `ONESIDED_TIMEOUT` for the whole group: members that never post (a
    /// stopped or dead rank) cost one timeout in all, not one each.
    /// Completing the operations to a member that posted keeps the
    /// timeouts of those operations (the member may be alive and told).
    pub fn complete(&self) -> Result<()> {
        self.alive("complete")?;
        let (group, posts_seen) = {
            let state = self.epoch()?;
            let a = state.pscw.check_complete(self.id)?;
            // `ready` is a subset of `group` (posts are consumed for
            // members only): equal lengths, every post was seen — the
            // usual epoch, which issued operations to each target — and
            // `complete` waits for none (no clock read, no mutex per target).
            (a.group.clone(), a.nocheck || a.ready.len() == a.group.len())
        };
        let done = self.complete_access(&group, posts_seen);
        self.epoch()?.pscw.end_complete();
        done
    }

    /// `posts_seen`: NOCHECK, or every target's post was consumed already.
    fn complete_access(&self, group: &[usize], posts_seen: bool) -> Result<()> {
        // Every target is completed and told even when another fails: a
        // stopped or dead member of the group must not leave the live ones
        // waiting in `wait` (each target's operations complete before it
        // is told). The first error is returned.
        // The waits for posts share one timeout (members that never post
        // cost one in all); completing a member that did post is not
        // bounded by it: its operations may still be in flight to a live
        // rank after a silent member used the time up.
        let deadline = if posts_seen {
            None
        } else {
            self.world
                .config
                .timeout
                .and_then(|l| Instant::now().checked_add(l))
        };
        let mut first = None;
        for &t in group {
            let done = if posts_seen {
                Ok(())
            } else {
                let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
                crate::progress::wait::within(left, || self.await_post("complete", t))
            }
            .and_then(|()| self.complete_local(Some(t)))
            .and_then(|()| self.complete_remote(t))
            .and_then(|()| self.tell_complete(t));
            if let Err(e) = done {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Tells target `t` that this origin's access epoch is complete.
    fn tell_complete(&self, t: usize) -> Result<()> {
        let add = Atomic {
            op: AtomicOp::Sum,
            datatype: Datatype::U64,
            count: 1,
        };
        if self.world.sync_words_by_cpu() {
            // Every rank is on this node: every origin adds with a CPU
            // atomic on the mapped control region (never mixed with the
            // provider's atomics on this word; see `api::node`).
            let off = directory::entry_offset(self.slot) + directory::COMPLETE_WORD;
            match self.slot_ctrl(t) {
                // Through the window's slot (no mapping-cache lookup).
                Some(m) => crate::api::node::word_fetch_add(&m, off, 1)?,
                None => self.world.ctrl_fetch_add(t, off, 1)?,
            };
            return Ok(());
        }
        let transport = self.world.transport();
        if !transport
            .caps()
            .atomics
            .offers(AtomicOp::Sum, Datatype::U64, AtomicKind::Fetch)
        {
            // No provider fetch-add (net): a one-way message, sent
            // after this origin's operations completed at `t` above.
            if t == self.world.rank() {
                self.world.posts.complete_arrive(self.id).map_err(|e| {
                    Error::InvalidArgument(format!("window {}: complete: {e}", self.id))
                })?;
            } else {
                // The send's own error (kind and peer) is the caller's:
                // a gone peer stays `PeerUnreachable`.
                let note = pscw::target::encode(self.id);
                self.world
                    .am
                    .send(transport, t, kind::PSCW_COMPLETE, &note)?;
            }
            return Ok(());
        }
        let at = self.complete_word(t)?;
        let mut old = [0u8; 8];
        transport.fetch_atomic(t, add, &1u64.to_ne_bytes(), &mut old, at)?;
        Ok(())
    }

    /// Our complete counter: how many origins have completed so far.
    fn completions(&self) -> Result<u64> {
        let off = directory::entry_offset(self.slot) + directory::COMPLETE_WORD;
        let word = self.world.control_memory().load_u64(off)?;
        if self.world.sync_words_by_cpu() {
            // Every origin adds to the word with a CPU atomic (ourselves
            // included, `complete_access`): no completion is counted by
            // message, so skip the post box's lock.
            return Ok(word);
        }
        Ok(word.wrapping_add(self.world.posts.completed(self.id)))
    }

    /// Checks the counter against the exposure epoch's target; `Ok(true)`
    /// closes the epoch.
    fn exposure_done(&self, until: u64) -> Result<bool> {
        let n = self.completions()?;
        if n < until {
            return Ok(false);
        }
        self.epoch()?.pscw.end_wait();
        std::sync::atomic::fence(Ordering::SeqCst);
        if n > until {
            return Err(Error::Epoch {
                window: self.id,
                op: "wait",
                state: format!(
                    "after {n} completions for {until} origins exposed to so far: some \
                     origin completed an access epoch this process never posted \
                     (start with NOCHECK but no matching post?)"
                ),
            });
        }
        Ok(true)
    }

    /// Closes the exposure epoch (MPI_Win_wait): returns once every origin
    /// of the `post` group has called `complete`, so all their operations
    /// on this window are applied.
    pub fn wait(&self) -> Result<()> {
        self.alive("wait")?;
        let until = self.epoch()?.pscw.check_wait(self.id, "wait")?;
        let id = self.id;
        // The counter cannot say which origin is missing (one word for the
        // whole group, O(1) state): the message says how many. The group is
        // read only for the message (the epoch is still open then).
        self.poll_until(|| self.exposure_done(until), &|| {
            let group = self
                .epoch()
                .ok()
                .and_then(|s| s.pscw.exposure.as_ref().map(|e| e.group.clone()))
                .unwrap_or_default();
            let from = until - group.len() as u64;
            let done = self.completions().map_or_else(
                |_| "some".to_string(),
                |n| n.saturating_sub(from).min(group.len() as u64).to_string(),
            );
            format!(
                "wait of window {id}: waiting for the origins of post group {group:?} to \
                 complete ({done} of {} did)",
                group.len()
            )
        })
    }

    /// Non-blocking [`Window::wait`] (MPI_Win_test): `Ok(true)` (and the
    /// exposure epoch is closed) once every origin completed, else
    /// `Ok(false)` after driving progress once.
    pub fn test(&self) -> Result<bool> {
        self.alive("test")?;
        let until = self.epoch()?.pscw.check_wait(self.id, "test")?;
        if self.exposure_done(until)? {
            return Ok(true);
        }
        self.world.transport().progress()?;
        self.exposure_done(until)
    }
}
