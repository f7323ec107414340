//! Requests waiting for their reply: a fixed table of [`CREDITS`] slots.
//!
//! A request takes a slot before it is sent and names it in the header by
//! a token (slot index + 1 in the low 32 bits, the slot's generation in the
//! high 32 bits). A reply is accepted only if its token names an occupied
//! slot of the same generation, and it comes from the rank and carries the
//! kind the request went to; anything else is a protocol error and touches
//! nothing. Each token is honoured at most once.
//!
//! The table is the origin's flow control: a process never has more than
//! [`CREDITS`] requests in flight, whatever the number of targets.

use std::sync::Mutex;

use crate::error::Error;
use crate::transport::inflight::Sink;
use crate::transport::Completion;

/// Requests a process may have in flight at once.
pub const CREDITS: usize = 32;

/// What to do with the reply: called exactly once, with the reply payload
/// or why there is none, by whichever thread reads the reply (or the
/// failed send's completion). It must not block.
pub type OnReply = Box<dyn FnOnce(Result<&[u8], NoReply>) + Send>;

/// Why a request has no reply payload.
#[derive(Debug)]
pub enum NoReply {
    /// The target answered with an error reply: why it refused.
    Refused(String),
    /// The request's send failed after it was posted (the connection broke,
    /// the peer is gone): no reply will come. The error names the target.
    Unsent(Error),
}

impl std::fmt::Display for NoReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoReply::Refused(why) => write!(f, "refused: {why}"),
            NoReply::Unsent(e) => write!(f, "not delivered: {e}"),
        }
    }
}

impl NoReply {
    /// Records this on `sink`: a refusal as `refused(why)`, an undelivered
    /// request as a failure naming the peer (kind `PeerUnreachable` when
    /// the peer is gone).
    pub fn fail_sink(self, sink: &Sink, refused: impl FnOnce(String) -> String) {
        match self {
            NoReply::Refused(why) => sink.fail(refused(why)),
            NoReply::Unsent(e) => match gone(&e) {
                Some(rank) => sink.fail_peer_gone(rank, e.to_string()),
                None => sink.fail(e.to_string()),
            },
        }
    }

    /// As [`NoReply::fail_sink`], on a completion tracker.
    pub fn fail_completion(self, c: &Completion, refused: impl FnOnce(String) -> String) {
        match self {
            NoReply::Refused(why) => c.failed(refused(why)),
            NoReply::Unsent(e) => match gone(&e) {
                Some(rank) => c.peer_gone(rank, e.to_string()),
                None => c.failed(e.to_string()),
            },
        }
    }

    /// The error a caller returns: a refusal becomes `refused(why)`.
    pub fn into_error(self, refused: impl FnOnce(String) -> Error) -> Error {
        match self {
            NoReply::Refused(why) => refused(why),
            NoReply::Unsent(e) => e,
        }
    }
}

fn gone(e: &Error) -> Option<usize> {
    (e.kind() == crate::error::ErrorKind::PeerUnreachable)
        .then(|| e.rank())
        .flatten()
}

struct Entry {
    target: usize,
    kind: u8,
    on_reply: OnReply,
}

struct Slot {
    generation: u32,
    entry: Option<Entry>,
}

/// The table.
pub struct Pending {
    slots: Mutex<(Vec<Slot>, Vec<u32>)>,
}

impl Default for Pending {
    fn default() -> Self {
        let slots = (0..CREDITS)
            .map(|_| Slot {
                generation: 1,
                entry: None,
            })
            .collect();
        Pending {
            slots: Mutex::new((slots, (0..CREDITS as u32).rev().collect())),
        }
    }
}

impl Pending {
    /// Takes a slot for a request of `kind` to `target`; gives `on_reply`
    /// back when all slots are taken.
    pub fn reserve(&self, target: usize, kind: u8, on_reply: OnReply) -> Result<u64, OnReply> {
        let Ok(mut g) = self.slots.lock() else {
            return Err(on_reply);
        };
        let (slots, free) = &mut *g;
        let Some(i) = free.pop() else {
            return Err(on_reply);
        };
        let s = &mut slots[i as usize];
        s.entry = Some(Entry {
            target,
            kind,
            on_reply,
        });
        Ok(((s.generation as u64) << 32) | (i as u64 + 1))
    }

    /// Takes the request of `token` back if it went to `from` with `kind`.
    pub fn take(&self, token: u64, from: usize, kind: u8) -> Result<OnReply, String> {
        let generation = (token >> 32) as u32;
        let index = (token & 0xffff_ffff).wrapping_sub(1) as usize;
        let mut g = self
            .slots
            .lock()
            .map_err(|_| "request table poisoned".to_string())?;
        let (slots, free) = &mut *g;
        let Some(s) = slots.get_mut(index).filter(|s| s.generation == generation) else {
            return Err(format!("reply with unknown or stale token {token:#x}"));
        };
        match s.entry.take() {
            Some(e) if e.target == from && e.kind == kind => {
                // Generation 0 is never used, so a zero token never matches.
                s.generation = s.generation.wrapping_add(1).max(1);
                free.push(index as u32);
                Ok(e.on_reply)
            }
            Some(e) => {
                let msg = format!(
                    "reply for token {token:#x} from rank {from} kind {kind}, \
                     but the request went to rank {} kind {}",
                    e.target, e.kind
                );
                s.entry = Some(e);
                Err(msg)
            }
            None => Err(format!("reply with unknown or stale token {token:#x}")),
        }
    }

    /// Requests in flight.
    pub fn in_flight(&self) -> usize {
        self.slots.lock().map(|g| CREDITS - g.1.len()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noop() -> OnReply {
        Box::new(|_| {})
    }

    #[test]
    fn credits_bound_and_tokens_are_checked() {
        let p = Pending::default();
        let toks: Vec<u64> = (0..CREDITS)
            .map(|i| p.reserve(i % 3, 1, noop()).ok().expect("credit"))
            .collect();
        assert!(p.reserve(0, 1, noop()).is_err(), "more than CREDITS");
        assert_eq!(p.in_flight(), CREDITS);
        // Wrong source, wrong kind, garbage: refused and nothing taken.
        assert!(p.take(toks[0], 1, 1).is_err());
        assert!(p.take(toks[0], 0, 2).is_err());
        for bad in [0u64, 1, u64::MAX, toks[0] ^ (1 << 32)] {
            assert!(p.take(bad, 0, 1).is_err(), "{bad:#x}");
        }
        assert!(p.take(toks[0], 0, 1).is_ok());
        assert!(p.take(toks[0], 0, 1).is_err(), "a token is honoured once");
        let again = p.reserve(0, 1, noop()).ok().expect("credit back");
        assert_ne!(again, toks[0], "a reused slot gets a new generation");
        assert!(p.take(toks[0], 0, 1).is_err());
        assert_eq!(p.in_flight(), CREDITS);
    }
}
