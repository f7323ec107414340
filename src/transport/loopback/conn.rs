//! The in-process fabric: one endpoint per rank, shared by the threads of
//! a job, and the connection hook.
//!
//! A card is the fabric's id and the rank (16 bytes): `connect` checks that
//! a card names an endpoint of *this* fabric (two jobs of threads in one
//! process never reach each other) and records the peer. There is no
//! connection to fail and re-make, so no generation numbers: an endpoint
//! whose rank left (its transport was dropped) answers every later
//! operation with [`Error::PeerUnreachable`].

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use nix::sys::eventfd::{EfdFlags, EventFd};

use super::mr;
use super::msg::Message;
use crate::error::{Error, Result};

/// Endpoint states.
pub(super) const FRESH: u8 = 0;
pub(super) const OPEN: u8 = 1;
pub(super) const CLOSED: u8 = 2;

/// Bytes of a card: fabric id and rank, little-endian.
pub(super) const CARD_LEN: usize = 16;

static NEXT_FABRIC: AtomicU64 = AtomicU64::new(1);

/// The shared medium of one job of threads: every rank's endpoint.
pub struct Fabric {
    pub(super) id: u64,
    pub(super) endpoints: Box<[Endpoint]>,
    /// Set when a rank failed (its closure returned an error or panicked):
    /// every endpoint's progress then reports the peer as unreachable, as
    /// a back-end reports a dead process, so that ranks waiting for it fail
    /// at once instead of at `ONESIDED_TIMEOUT`.
    failed: Mutex<Option<(usize, String)>>,
}

/// One rank's side of the fabric.
pub(super) struct Endpoint {
    pub(super) state: AtomicU8,
    /// Registrations: key → memory.
    pub(super) mrs: mr::Table,
    /// Messages delivered and not yet handed to the receiver.
    pub(super) inbox: Mutex<VecDeque<Message>>,
    /// Readable when a message arrived or an operation was posted (the
    /// progress agent sleeps on it); `None` if the eventfd could not be made.
    pub(super) wake: Option<EventFd>,
}

impl Fabric {
    /// A fabric of `size` endpoints, none open yet.
    pub fn new(size: usize) -> Arc<Fabric> {
        let endpoints = (0..size)
            .map(|_| Endpoint {
                state: AtomicU8::new(FRESH),
                mrs: mr::Table::default(),
                inbox: Mutex::new(VecDeque::new()),
                wake: EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK).ok(),
            })
            .collect();
        Arc::new(Fabric {
            id: NEXT_FABRIC.fetch_add(1, Ordering::Relaxed),
            endpoints,
            failed: Mutex::new(None),
        })
    }

    /// Number of endpoints (ranks).
    pub fn size(&self) -> usize {
        self.endpoints.len()
    }

    /// Records that `rank` failed with `why` (the first failure wins).
    pub fn fail(&self, rank: usize, why: String) {
        if let Ok(mut f) = self.failed.lock() {
            f.get_or_insert((rank, why));
        }
    }

    /// The failure recorded by [`Fabric::fail`], if any.
    pub(super) fn failure(&self) -> Option<(usize, String)> {
        self.failed.lock().ok().and_then(|f| f.clone())
    }

    /// `rank`'s endpoint, open: an error naming the rank otherwise.
    pub(super) fn endpoint(&self, rank: usize, what: &dyn Fn() -> String) -> Result<&Endpoint> {
        let ep = self.endpoints.get(rank).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{}: rank {rank} is not in the job of {} threads",
                what(),
                self.size()
            ))
        })?;
        match ep.state.load(Ordering::Acquire) {
            OPEN => Ok(ep),
            FRESH => Err(Error::peer_unreachable(
                rank,
                what(),
                "its endpoint is not open yet",
            )),
            _ => Err(Error::peer_unreachable(
                rank,
                what(),
                "it left the job (its endpoint is closed)",
            )),
        }
    }

    /// Wakes `rank`'s progress agent (new message, posted operation).
    pub(super) fn wake(&self, rank: usize) {
        if let Some(w) = self.endpoints.get(rank).and_then(|e| e.wake.as_ref()) {
            // A full counter (EAGAIN) is still readable: nothing is lost.
            let _ = w.arm();
        }
    }
}

/// Our card.
pub(super) fn card(fabric: &Fabric, rank: usize) -> Vec<u8> {
    let mut c = Vec::with_capacity(CARD_LEN);
    c.extend_from_slice(&fabric.id.to_le_bytes());
    c.extend_from_slice(&(rank as u64).to_le_bytes());
    c
}

/// Checks `rank`'s card and records the peer (idempotent).
pub(super) fn connect(
    fabric: &Fabric,
    peers: &Mutex<HashSet<usize>>,
    rank: usize,
    card: &[u8],
) -> Result<()> {
    let bad = |message: String| Error::Protocol {
        peer: format!("rank {rank}"),
        message,
    };
    if card.len() != CARD_LEN {
        return Err(bad(format!(
            "its loopback card has {} bytes, expected {CARD_LEN}",
            card.len()
        )));
    }
    let word = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&card[i..i + 8]);
        u64::from_le_bytes(b)
    };
    let (id, their_rank) = (word(0), word(8));
    if id != fabric.id {
        return Err(bad(format!(
            "its card names in-process fabric {id}, this rank is on fabric {}",
            fabric.id
        )));
    }
    if their_rank != rank as u64 || rank >= fabric.size() {
        return Err(bad(format!(
            "its card names rank {their_rank} of a job of {} threads",
            fabric.size()
        )));
    }
    peers
        .lock()
        .map_err(|_| Error::InvalidArgument("loopback peer table lock poisoned".into()))?
        .insert(rank);
    Ok(())
}
