//! Connections: an RC queue pair per peer, made on first contact by a
//! handshake the target's progress serves, and made again after an error.
//!
//! ```text
//!  initiator (rank a)                         target (rank b)
//!  connect(b): new QP (gen g), Connecting
//!  REQ {a, gen g, QP addr} ──── UD ────────▶  progress: REQ newer than the
//!                                             connection in place → new QP
//!                                             (gen h), RTR/RTS, Ready
//!  progress: REP answers g → RTR/RTS, Ready ◀──── REP {b, gen h, answers g}
//! ```
//!
//! * **Generations** are per process and grow with every queue pair made;
//!   work request ids carry them, so completions of a replaced pair are
//!   rejected. A REQ whose generation is not newer than the one the target
//!   connected to last is stale (a duplicate is answered again, an older
//!   one ignored), so re-sent or crossed datagrams never replace a working
//!   connection.
//! * **Crossed connects** (both ranks connect at once): the lower rank's
//!   REQ wins; the higher rank accepts it and drops its own attempt, the
//!   lower rank ignores the higher rank's REQ while its own is pending.
//! * **Errors**: an error completion marks the pair broken; its other work
//!   requests complete flushed and fail; the next operation to the peer
//!   makes a new pair (REQ with a newer generation), which replaces the
//!   target's side too. Operations posted on the old pair are failed.
//! * **Lost datagrams**: the REQ is sent again every [`RESEND`] until the
//!   REP arrives or `ONESIDED_TIMEOUT` passes (an error naming the rank).
//! * Our own rank has a loopback pair (two queue pairs of this process
//!   connected to each other), made at open and used for the byte-order
//!   self-test.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::conn::RcQp;
use super::handshake::{Card, Hello};
use super::transport::{poisoned, VerbsTransport};
use crate::error::{Error, Result};
use crate::progress::wait::Waiter;

/// Interval between REQ retransmissions.
pub const RESEND: Duration = Duration::from_millis(500);

/// State of a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// REQ sent at this time; waiting for the REP.
    Connecting(Instant),
    /// Usable.
    Ready,
    /// An error completion; made again on next use.
    Broken(String),
}

/// The peer table: rank → connection. Hashed with one multiplication
/// ([`RankHasher`]) instead of SipHash: it is looked up by every operation
/// (SipHash cost ~500 instructions per put in the emulated guest, measured
/// with callgrind), and its keys are ranks below the job size, not
/// attacker-chosen.
pub type PeerMap = HashMap<usize, Peer, BuildHasherDefault<RankHasher>>;

/// Fibonacci hashing of a rank (see [`PeerMap`]).
#[derive(Default)]
pub struct RankHasher(u64);

impl Hasher for RankHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = (self.0 ^ n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// One peer's connection.
pub struct Peer {
    /// Our queue pair.
    pub qp: Arc<RcQp>,
    /// Its generation.
    pub generation: u16,
    /// Our first packet sequence number.
    pub psn: u32,
    /// Where we are.
    pub state: State,
    /// How to reach the peer's handshake queue pair.
    pub card: Card,
    /// The peer's generation of the connection in place (its REQ or REP).
    pub remote: Option<u16>,
    /// For the loopback pair: the other queue pair.
    pub _partner: Option<Arc<RcQp>>,
}

/// `a` is newer than `b` (wrapping 16-bit generations).
fn newer(a: u16, b: u16) -> bool {
    (a.wrapping_sub(b) as i16) > 0
}

fn psn() -> u32 {
    let mut b = [0u8; 4];
    if getrandom::getrandom(&mut b).is_err() {
        b = (Instant::now().elapsed().subsec_nanos()).to_le_bytes();
    }
    u32::from_le_bytes(b) & 0x00ff_ffff
}

impl VerbsTransport {
    fn generation(&self) -> u16 {
        let mut g = self.next_generation.fetch_add(1, Ordering::Relaxed);
        if g == 0 {
            g = self.next_generation.fetch_add(1, Ordering::Relaxed);
        }
        self.ops.reuse(g);
        g
    }

    fn new_qp(&self) -> Result<Arc<RcQp>> {
        Ok(Arc::new(RcQp::with_srq(
            &self.dev,
            &self.cq,
            Some(&self.srq),
            1024,
            0,
        )?))
    }

    /// The loopback pair: two queue pairs of ours connected to each other.
    pub(super) fn self_pair(&self) -> Result<Peer> {
        let (a, b) = (self.new_qp()?, self.new_qp()?);
        let (pa, pb) = (psn(), psn());
        a.connect(&self.dev.address(b.qpn, pb), pa)?;
        b.connect(&self.dev.address(a.qpn, pa), pb)?;
        self.counters.connections.fetch_add(1, Ordering::Relaxed);
        Ok(Peer {
            qp: a,
            generation: self.generation(),
            psn: pa,
            state: State::Ready,
            card: Card {
                gid: self.dev.choice.gid.gid,
                lid: self.dev.choice.port.lid,
                ud_qpn: self.ud.qpn,
            },
            remote: None,
            _partner: Some(b),
        })
    }

    fn hello(&self, reply: bool, generation: u16, answers: u16, qp: &RcQp, psn: u32) -> Hello {
        Hello {
            reply,
            rank: u32::try_from(self.rank).unwrap_or(u32::MAX),
            generation,
            answers,
            qp: self.dev.address(qp.qpn, psn),
            ud_qpn: self.ud.qpn,
        }
    }

    fn send_hello(&self, card: &Card, h: &Hello) {
        let id = super::cq::WrId {
            generation: 0,
            kind: super::cq::OpKind::Handshake,
            slot: super::cq::WrId::MAX_SLOT,
        }
        .encode()
        .unwrap_or(0);
        if let Err(e) = self.ud.send(id, card, h) {
            self.handshake_failed(format!("sending a handshake datagram: {e}"));
        }
    }

    /// Records a handshake failure: logged, and named by the timeout error
    /// of a connect that waits in vain (the peer's side of the failure is
    /// not seen here).
    pub(super) fn handshake_failed(&self, why: String) {
        tracing::warn!("{why}");
        if let Ok(mut last) = self.handshake_error.lock() {
            *last = Some(why);
        }
    }

    /// The usable queue pair to `target` and its generation; connects
    /// (again) when there is none or it broke.
    pub(super) fn qp_for(&self, target: usize) -> Result<(Arc<RcQp>, u16)> {
        {
            let peers = self.peers.lock().map_err(|_| poisoned())?;
            if let Some(p) = peers.get(&target) {
                if p.state == State::Ready {
                    return Ok((p.qp.clone(), p.generation));
                }
            }
        }
        self.ensure(target, None)
    }

    /// Connects to `target` unless a usable connection exists: starts a
    /// handshake (with `card`, or the card known from before) and drives
    /// progress until the connection is ready, bounded by the timeout.
    pub(super) fn ensure(&self, target: usize, card: Option<Card>) -> Result<(Arc<RcQp>, u16)> {
        let sent = std::cell::Cell::new(0u32);
        let what = || {
            let last = self
                .handshake_error
                .lock()
                .ok()
                .and_then(|e| e.clone())
                .map_or(String::new(), |e| format!("; last handshake failure here: {e}"));
            format!(
                "connecting to rank {target} (verbs handshake: {} request(s) sent, no reply{last})",
                sent.get()
            )
        };
        let mut w = Waiter::new(self.timeout, &what);
        loop {
            {
                let mut peers = self.peers.lock().map_err(|_| poisoned())?;
                let start = match peers.get(&target) {
                    Some(p) if p.state == State::Ready => {
                        return Ok((p.qp.clone(), p.generation));
                    }
                    Some(p) => match &p.state {
                        State::Connecting(sent) if sent.elapsed() < RESEND => None,
                        State::Connecting(_) => {
                            // Not answered yet: send the same REQ again.
                            let h = self.hello(false, p.generation, 0, &p.qp, p.psn);
                            self.send_hello(&p.card, &h);
                            sent.set(sent.get() + 1);
                            if let Some(p) = peers.get_mut(&target) {
                                p.state = State::Connecting(Instant::now());
                            }
                            None
                        }
                        _ => Some(p.card),
                    },
                    None => match card {
                        Some(c) => Some(c),
                        None => {
                            return Err(Error::InvalidArgument(format!(
                                "rank {target} has not been added as a peer"
                            )))
                        }
                    },
                };
                if let Some(card) = start {
                    let reconnect = peers.contains_key(&target);
                    if target == self.rank {
                        let p = self.self_pair()?;
                        let out = (p.qp.clone(), p.generation);
                        peers.insert(target, p);
                        drop(peers);
                        self.fail_stale(target, out.1);
                        self.counters.reconnections.fetch_add(1, Ordering::Relaxed);
                        return Ok(out);
                    }
                    let qp = self.new_qp()?;
                    let generation = self.generation();
                    let psn = psn();
                    let h = self.hello(false, generation, 0, &qp, psn);
                    self.send_hello(&card, &h);
                    sent.set(sent.get() + 1);
                    let remote = peers.get(&target).and_then(|p| p.remote);
                    peers.insert(
                        target,
                        Peer {
                            qp,
                            generation,
                            psn,
                            state: State::Connecting(Instant::now()),
                            card,
                            remote,
                            _partner: None,
                        },
                    );
                    if reconnect {
                        self.counters.reconnections.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            self.progress_for_handshake()?;
            if let Err(e) = w.step() {
                // Give up this attempt: the next contact starts afresh.
                if let Ok(mut peers) = self.peers.lock() {
                    if peers
                        .get(&target)
                        .is_some_and(|p| matches!(p.state, State::Connecting(_)))
                    {
                        peers.remove(&target);
                    }
                }
                // The peer awaited, as a value (`Error::rank`).
                return Err(e.awaiting(target));
            }
        }
    }

    fn progress_for_handshake(&self) -> Result<()> {
        use crate::transport::Transport as _;
        self.progress().map(|_| ())
    }

    /// Serves a handshake datagram (called by progress).
    pub(super) fn on_hello(&self, h: &Hello) {
        let Ok(from) = usize::try_from(h.rank) else {
            return;
        };
        if from == self.rank || from >= self.size {
            // Not a peer of this job: at most one queue pair per rank.
            self.counters.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let Ok(mut peers) = self.peers.lock() else {
            return;
        };
        let card = Card {
            gid: h.qp.gid,
            lid: h.qp.lid,
            ud_qpn: h.ud_qpn,
        };
        if h.reply {
            let Some(p) = peers.get_mut(&from) else {
                return;
            };
            if !matches!(p.state, State::Connecting(_)) || p.generation != h.answers {
                return; // a REP to an attempt that is over
            }
            match p.qp.connect(&h.qp, p.psn) {
                Ok(()) => {
                    p.state = State::Ready;
                    p.remote = Some(h.generation);
                    self.counters.connections.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => p.state = State::Broken(e.to_string()),
            }
            return;
        }
        // A REQ.
        if let Some(p) = peers.get(&from) {
            if let Some(r) = p.remote {
                if h.generation == r && p.state == State::Ready {
                    // A duplicate (our REP was lost): answer again.
                    let rep = self.hello(true, p.generation, h.generation, &p.qp, p.psn);
                    self.send_hello(&p.card, &rep);
                    return;
                }
                if !newer(h.generation, r) {
                    return; // stale
                }
            }
            if matches!(p.state, State::Connecting(_)) && self.rank < from {
                return; // crossed connects: ours wins
            }
        }
        let made = self.new_qp().and_then(|qp| {
            let psn = psn();
            qp.connect(&h.qp, psn)?;
            Ok((qp, psn))
        });
        let (qp, psn) = match made {
            Ok(x) => x,
            Err(e) => {
                drop(peers);
                self.handshake_failed(format!("accepting a connection from rank {from}: {e}"));
                return;
            }
        };
        let generation = self.generation();
        let rep = self.hello(true, generation, h.generation, &qp, psn);
        let replaced = peers.insert(
            from,
            Peer {
                qp,
                generation,
                psn,
                state: State::Ready,
                card,
                remote: Some(h.generation),
                _partner: None,
            },
        );
        drop(peers);
        self.counters.connections.fetch_add(1, Ordering::Relaxed);
        if replaced.is_some_and(|p| p.state == State::Ready || matches!(p.state, State::Broken(_))) {
            self.counters.reconnections.fetch_add(1, Ordering::Relaxed);
        }
        self.fail_stale(from, generation);
        self.send_hello(&card, &rep);
    }

    /// Fails the operations posted to `target` on a queue pair other than
    /// generation `keep` (replaced: their completions will not come).
    fn fail_stale(&self, target: usize, keep: u16) {
        self.cells
            .fail_stale(target, keep, |s| self.staging.give(s), |g| self.ops.retire(g));
        for op in self.ops.take_stale(target, keep) {
            if let Some(s) = op.slot {
                self.staging.give(s);
            }
            op.sink.fail(format!(
                "the connection to rank {target} was made again while a {:?} was in flight{}",
                op.kind,
                super::transport::NOT_EXECUTED
            ));
        }
    }

    /// An error completion on `target`'s queue pair of `generation`.
    /// The queue pair to `target` of `generation`, if it is still the
    /// current one.
    pub(super) fn pair_of(&self, target: usize, generation: u16) -> Option<Arc<RcQp>> {
        let peers = self.peers.lock().ok()?;
        peers
            .get(&target)
            .filter(|p| p.generation == generation)
            .map(|p| p.qp.clone())
    }

    pub(super) fn broken(&self, target: usize, generation: u16, why: &str) {
        if let Ok(mut peers) = self.peers.lock() {
            if let Some(p) = peers.get_mut(&target) {
                if p.generation == generation && p.state == State::Ready {
                    p.state = State::Broken(why.to_string());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::newer;

    #[test]
    fn generations_compare_across_the_wrap() {
        assert!(newer(2, 1));
        assert!(!newer(1, 2));
        assert!(!newer(5, 5));
        assert!(newer(1, u16::MAX));
        assert!(!newer(u16::MAX, 1));
    }
}
