//! Messages: a send copies the bytes into the target's inbox; the target's
//! [`Receiver`] sees them only when the *target* drives progress (its
//! progress agent or a thread waiting in the library), as on a back-end
//! with manual progress. So protocols that need the target's CPU (software
//! accumulate, the lock queue, batches, PSCW notifications) are exercised
//! for real. Replies built by the receiver go straight to the asker's
//! inbox.

use std::sync::atomic::Ordering;

use super::LoopbackTransport;
use crate::error::{Error, Result};
use crate::transport::{LARGEST_MESSAGE, MAX_MESSAGE};

/// A message in an inbox.
pub(super) struct Message {
    from: usize,
    bytes: Vec<u8>,
}

/// Messages handed to the receiver per progress call at most (bounds the
/// time one call spends).
const BURST: usize = 64;

/// Delivers `bytes` from us to `target`'s inbox.
fn deliver(t: &LoopbackTransport, target: usize, bytes: &[u8]) -> Result<()> {
    let what = || format!("sending a {}-byte message", bytes.len());
    let ep = t.fabric.endpoint(target, &what)?;
    ep.inbox
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push_back(Message {
            from: t.rank,
            bytes: bytes.to_vec(),
        });
    t.fabric.wake(target);
    t.counters.sends.fetch_add(1, Ordering::Relaxed);
    t.counters
        .send_bytes
        .fetch_add(bytes.len() as u64, Ordering::Relaxed);
    Ok(())
}

/// [`crate::transport::Transport::send`].
pub(super) fn send(t: &LoopbackTransport, target: usize, bytes: &[u8]) -> Result<()> {
    crate::transport::check_message(target, bytes.len(), LARGEST_MESSAGE)?;
    t.connected(target)?;
    t.queue.then(t, || deliver(t, target, bytes))
}

/// Hands up to [`BURST`] waiting messages to the receiver; returns how
/// many were taken from the inbox.
pub(super) fn serve(t: &LoopbackTransport) -> usize {
    let Some(ep) = t.fabric.endpoints.get(t.rank) else {
        return 0;
    };
    let mut buf: Vec<u8> = Vec::new();
    let mut n = 0;
    while n < BURST {
        let Some(m) = ep
            .inbox
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front()
        else {
            break;
        };
        n += 1;
        let receiver = t.receiver.read().ok().and_then(|r| r.clone());
        let Some(receiver) = receiver else {
            t.counters.dropped.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        // At least MAX_MESSAGE (room for a reply), and as long as the
        // message (`send` refused any beyond LARGEST_MESSAGE).
        let len = m.bytes.len();
        if buf.len() < len.max(MAX_MESSAGE) {
            buf = vec![0u8; len.max(MAX_MESSAGE)];
        }
        buf[..len].copy_from_slice(&m.bytes);
        t.counters.received.fetch_add(1, Ordering::Relaxed);
        let Some((to, reply)) = receiver.receive(&mut buf, len) else {
            continue;
        };
        let sent = if reply > buf.len() {
            Err(Error::InvalidArgument(format!(
                "a reply of {reply} bytes to rank {to} (message from rank {})",
                m.from
            )))
        } else if t.is_connected_rank(to) {
            deliver(t, to, &buf[..reply])
        } else {
            receiver
                .resolve(to)
                .and_then(|()| deliver(t, to, &buf[..reply]))
        };
        if let Err(e) = sent {
            tracing::debug!("loopback rank {}: reply dropped: {e}", t.rank);
            t.counters.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
    n
}
