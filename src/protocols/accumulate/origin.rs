//! The origin side of the software accumulate path: an operation is cut
//! into segments of at most [`SEGMENT_BYTES`] operand bytes, each sent as an
//! active-message request ([`Request`]) that the target applies with CPU
//! atomics ([`super::target`]) and acknowledges, with the previous values
//! when fetching. To oneself, the same CPU atomics run here, directly.
//!
//! Bounded buffering: a segment is copied into one message; at most
//! `am::CREDITS` requests of this process are in flight, and `request`
//! serves incoming messages while it waits for a credit. So an 8 MiB
//! accumulate needs 32 × 4 KiB in flight, not 8 MiB.
//!
//! Completion: every segment is counted on a [`Sink`] before it is sent and
//! counted done by its reply. Updates count on the window's tracker, so
//! `flush`/`unlock`/`fence` (which wait for it) return only after the
//! target acknowledged — and the target acknowledges after it applied the
//! update. A refused segment (error reply) fails the tracker with the
//! target's reason, reported by the next flush or wait.
//!
//! This side depends on [`Origin`], a narrow context (transport, active
//! messages, the window's id, element type and local memory), not on the
//! public `Window`.

use super::wire::{Request, SEGMENT_BYTES};
use crate::error::{Error, Result};
use crate::transport::am::{kind, ActiveMessages};
use crate::transport::inflight::Sink;
use crate::transport::{cpu_atomic, Atomic, AtomicOp, Datatype, InFlight, Memory, Transport};

/// What the origin side needs of a window: nothing more.
pub struct Origin<'c, 'm> {
    /// The back-end requests travel on.
    pub transport: &'c dyn Transport,
    /// The active-message layer (credits, replies).
    pub am: &'c ActiveMessages,
    /// This process's rank.
    pub me: usize,
    /// The window's id (named in requests and errors).
    pub window: u64,
    /// The element type of the window.
    pub datatype: Datatype,
    /// Bytes per element.
    pub size: usize,
    /// This process's window memory (segments to oneself apply here).
    pub mem: &'c Memory<'m>,
}

impl Origin<'_, '_> {
    /// Applies `op` to `count` elements at byte `off` of `rank`'s window
    /// with `data` (`count` operands; ignored for [`AtomicOp::Read`];
    /// compare then swap for [`AtomicOp::Cswap`]). Segment `k`'s reply is
    /// delivered to `sink` at its byte offset when the sink has a buffer
    /// (fetching), else only counted. Returns once every segment was sent.
    ///
    /// # Errors
    /// A local segment the CPU atomics refuse, or a request that could not
    /// be sent; the sink is failed with the same reason.
    pub fn post(
        &self,
        rank: usize,
        off: usize,
        op: AtomicOp,
        data: &[u8],
        count: usize,
        sink: &Sink,
    ) -> Result<()> {
        let size = self.size.max(1);
        let fetch = sink.has_buffer();
        let data: &[u8] = if op == AtomicOp::Read { &[] } else { data };
        // Operand bytes per element: 0 (read), 2 × size (CSWAP) or size.
        let per = data.len() / count.max(1);
        let max = (SEGMENT_BYTES / size).max(1);
        let mut first = 0;
        while first < count {
            let n = max.min(count - first);
            let operands = data.get(first * per..(first + n) * per).unwrap_or(&[]);
            let at = off + first * size;
            let result_at = first * size;
            if rank == self.me {
                sink.add();
                let mut out = vec![0u8; if fetch { n * size } else { 0 }];
                match self.apply_local(op, at, operands, n, fetch.then_some(&mut out[..])) {
                    Ok(()) => sink.deliver(if fetch { result_at } else { 0 }, &out),
                    Err(e) => {
                        sink.fail(e.to_string());
                        return Err(e);
                    }
                }
            } else {
                let payload = Request {
                    window: self.window,
                    offset: at as u64,
                    op,
                    datatype: self.datatype,
                    count: n as u32,
                    fetch,
                    data: operands,
                }
                .encode();
                let s = sink.clone();
                let want = if fetch { n * size } else { 0 };
                let (id, me) = (self.window, self.me);
                sink.add();
                let sent = self.am.request(
                    self.transport,
                    rank,
                    kind::ACCUMULATE,
                    &payload,
                    Box::new(move |reply| match reply {
                        Ok(b) if b.len() == want => s.deliver(if fetch { result_at } else { 0 }, b),
                        Ok(b) => s.fail(format!(
                            "window {id}: rank {rank} answered a software accumulate with \
                             {} bytes, {want} expected",
                            b.len()
                        )),
                        Err(no) => no.fail_sink(&s, |why| {
                            format!("window {id}: software accumulate from rank {me} refused: {why}")
                        }),
                    }),
                );
                if let Err(e) = sent {
                    sink.fail(e.to_string());
                    return Err(e);
                }
            }
            first += n;
        }
        Ok(())
    }

    /// One segment applied to our own window with the CPU atomics a
    /// handler would run.
    fn apply_local(
        &self,
        op: AtomicOp,
        at: usize,
        operands: &[u8],
        n: usize,
        fetched: Option<&mut [u8]>,
    ) -> Result<()> {
        if op == AtomicOp::Cswap {
            let old = fetched.ok_or_else(|| {
                Error::InvalidArgument("compare-and-swap without a result".into())
            })?;
            let (cmp, swap) = operands.split_at(self.size.min(operands.len()));
            return cpu_atomic::compare_swap(self.mem, at, self.datatype, cmp, swap, old);
        }
        let what = Atomic {
            op,
            datatype: self.datatype,
            count: n,
        };
        cpu_atomic::accumulate(self.mem, at, what, operands, fetched)
    }

    /// A blocking fetching operation on the software path: the previous
    /// values land in `result` (`count` elements).
    ///
    /// # Errors
    /// As [`Origin::post`], plus the target's refusal or a timeout while
    /// waiting for the replies.
    pub fn fetch(
        &self,
        rank: usize,
        off: usize,
        op: AtomicOp,
        data: &[u8],
        count: usize,
        result: &mut [u8],
    ) -> Result<()> {
        let f = InFlight::new(vec![0u8; result.len()], None);
        let posted = self.post(rank, off, op, data, count, &f.sink());
        // Wait even after a failed post: sent segments still deliver here.
        let id = self.window;
        let waited = self.transport.wait(f.completion(), &|| {
            format!("software accumulate of {count} elements at rank {rank} (window {id})")
        });
        posted?;
        waited?;
        let buf: Vec<u8> = f.into_inner().map_err(|_| {
            Error::InvalidArgument(format!(
                "window {id}: software fetch buffer still in use after completion"
            ))
        })?;
        result.copy_from_slice(&buf);
        Ok(())
    }
}
