//! Buffers owned by the transport while a non-blocking operation uses them.
//!
//! A request takes ownership of the user's buffer (a `Vec<T>`, a
//! `Box<[T]>`, a `&'static mut [T]`, ...) so that neither the user nor
//! `std::mem::forget` can free or touch it while the NIC reads or writes it.
//! The buffer comes back only after every operation on it completed; a buffer
//! dropped while operations are still pending is leaked rather than freed
//! under the NIC's feet.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::completion::Completion;

/// `claims` once the buffer was given back or freed: no part may be
/// counted or delivered any more.
const CLOSED: u64 = u64::MAX;

/// An erased pointer/length pair into a buffer kept alive by an [`InFlight`].
pub struct InFlight {
    ptr: *mut u8,
    len: usize,
    done: Arc<Completion>,
    group: Option<Arc<Completion>>,
    keep: Option<Box<dyn std::any::Any + Send>>,
    // Parts counted by this buffer's sinks and not yet delivered or failed
    // (`CLOSED` once the buffer is given back or freed); see [`Sink`].
    claims: Arc<AtomicU64>,
}

// SAFETY: the pointed-to buffer is owned by `keep` (a Send value) and only
// accessed by the provider between post and completion.
unsafe impl Send for InFlight {}
// SAFETY: shared access hands the pointer only to the provider.
unsafe impl Sync for InFlight {}

impl InFlight {
    /// Takes a buffer of plain elements; `group` (e.g. the window's tracker)
    /// also counts its operations.
    pub fn new<T, B>(buf: B, group: Option<Arc<Completion>>) -> InFlight
    where
        T: bytemuck::Pod,
        B: AsMut<[T]> + Send + 'static,
    {
        let mut boxed: Box<B> = Box::new(buf);
        let bytes: &mut [u8] = bytemuck::cast_slice_mut((*boxed).as_mut());
        let (ptr, len) = (bytes.as_mut_ptr(), bytes.len());
        InFlight {
            ptr,
            len,
            done: Arc::new(Completion::new()),
            group,
            keep: Some(boxed),
            claims: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Closes the buffer to its sinks if no sink part is outstanding:
    /// afterwards a stale sink neither counts nor writes.
    fn close(&self) -> bool {
        match self
            .claims
            .compare_exchange(0, CLOSED, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => true,
            Err(v) => v == CLOSED,
        }
    }
    /// Byte length.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Counts the operations on this buffer.
    pub fn completion(&self) -> &Arc<Completion> {
        &self.done
    }
    /// The group tracker, if any.
    pub fn group(&self) -> Option<&Arc<Completion>> {
        self.group.as_ref()
    }
    /// Start pointer, for the provider only.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }
    /// Gives the buffer back once nothing is pending; otherwise returns self.
    pub fn into_inner<B: 'static>(mut self) -> Result<B, InFlight> {
        if self.done.pending() != 0 || !self.close() {
            return Err(self);
        }
        match self.keep.take().map(|k| k.downcast::<B>()) {
            Some(Ok(b)) => Ok(*b),
            Some(Err(k)) => {
                self.keep = Some(k);
                Err(self)
            }
            None => Err(self),
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.done.pending() != 0 || !self.close() {
            if let Some(k) = self.keep.take() {
                tracing::warn!(
                    "a request buffer was dropped with {} operations pending; leaking it",
                    self.done.pending()
                );
                std::mem::forget(k);
            }
        }
    }
}

/// Where the replies of software operations go: a [`Completion`] (and its
/// group) counting the outstanding parts, and optionally the byte buffer of
/// an [`InFlight`] the parts deliver into.
///
/// Invariant: a part is counted ([`Sink::add`]) before it is sent and
/// finished exactly once ([`Sink::deliver`] or [`Sink::fail`]). While any
/// part is pending the buffer is alive, because an `InFlight` neither gives
/// its buffer back nor frees it while its completion has work pending; a
/// delivery writes *before* counting its part done. Parts deliver into
/// disjoint ranges (the caller's segments), so deliveries running at the
/// same time on two threads never touch the same bytes.
///
/// The invariant is enforced, not only assumed, for sinks of a buffer:
/// `add` takes a claim, `deliver`/`fail` must consume one before touching
/// anything (an extra delivery finds none and is ignored), and the buffer
/// is given back or freed only after it closed the claims at zero (a sink
/// kept after that counts and writes nothing). So safe code holding a
/// sink cannot write a buffer that was handed back.
#[derive(Clone)]
pub struct Sink {
    ptr: *mut u8,
    len: usize,
    done: Arc<Completion>,
    group: Option<Arc<Completion>>,
    // The buffer's claims (`None` for a counter).
    claims: Option<Arc<AtomicU64>>,
}

// SAFETY: the pointer is only written through `deliver`, within bounds and
// while the buffer is kept alive (see the invariant above).
unsafe impl Send for Sink {}
// SAFETY: as above; concurrent deliveries write disjoint ranges.
unsafe impl Sync for Sink {}

impl Sink {
    /// Whether this sink's outcome goes to `c` (as its own completion or
    /// its group's).
    pub(crate) fn reports_to(&self, c: &Completion) -> bool {
        std::ptr::eq(&*self.done, c) || self.group.as_deref().is_some_and(|g| std::ptr::eq(g, c))
    }

    /// A sink that only counts (acknowledgements without data).
    pub fn counter(done: Arc<Completion>) -> Sink {
        Sink {
            ptr: std::ptr::null_mut(),
            len: 0,
            done,
            group: None,
            claims: None,
        }
    }

    /// Takes one outstanding part's claim (always true for a counter).
    fn claim(&self) -> bool {
        let Some(c) = &self.claims else {
            return true;
        };
        let took = c
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                (v != 0 && v != CLOSED).then(|| v - 1)
            })
            .is_ok();
        if !took {
            tracing::warn!("a reply for a part not outstanding (or a buffer given back) is ignored");
        }
        took
    }

    /// Whether parts deliver data (else they only count).
    pub fn has_buffer(&self) -> bool {
        !self.ptr.is_null()
    }

    /// Counts one more part (nothing, once the buffer was given back).
    pub fn add(&self) {
        if let Some(c) = &self.claims {
            let open = c
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                    (v != CLOSED).then(|| v + 1)
                })
                .is_ok();
            if !open {
                return;
            }
        }
        if let Some(g) = &self.group {
            g.add();
        }
        self.done.add();
    }

    /// Copies `bytes` to byte `at` of the buffer and counts the part done
    /// (failed, when the range is outside the buffer).
    pub fn deliver(&self, at: usize, bytes: &[u8]) {
        if !self.claim() {
            return;
        }
        match at.checked_add(bytes.len()) {
            Some(end) if end <= self.len => {
                if !bytes.is_empty() {
                    // SAFETY: in bounds; the buffer is alive while this part
                    // is pending; no other part writes this range.
                    unsafe {
                        std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr.add(at), bytes.len())
                    }
                }
                if let Some(g) = &self.group {
                    g.done();
                }
                self.done.done();
            }
            _ => self.count_failed(format!(
                "a reply of {} bytes at byte {at} does not fit the {}-byte result",
                bytes.len(),
                self.len
            )),
        }
    }

    /// Counts the part failed with `message`.
    pub fn fail(&self, message: String) {
        if self.claim() {
            self.count_failed(message);
        }
    }

    /// As [`Sink::fail`], for a part that failed because `rank` does not
    /// answer (its waiter gets [`Error::PeerUnreachable`](crate::Error)).
    pub fn fail_peer_gone(&self, rank: usize, message: String) {
        if self.claim() {
            if let Some(g) = &self.group {
                g.peer_gone(rank, message.clone());
            }
            self.done.peer_gone(rank, message);
        }
    }

    fn count_failed(&self, message: String) {
        if let Some(g) = &self.group {
            g.failed(message.clone());
        }
        self.done.failed(message);
    }
}

impl InFlight {
    /// A sink delivering into this buffer, counting on its trackers.
    pub fn sink(&self) -> Sink {
        Sink {
            ptr: self.ptr,
            len: self.len,
            done: self.done.clone(),
            group: self.group.clone(),
            claims: Some(self.claims.clone()),
        }
    }
}

std::thread_local! {
    /// This thread's result buffer for small blocking reads, reused while
    /// no operation holds it (see [`read_into`]).
    static SPARE: std::cell::Cell<Option<InFlight>> = const { std::cell::Cell::new(None) };
}

/// Capacity of the reusable result buffer: reads up to this size allocate
/// nothing.
const SPARE_BYTES: usize = 256;

/// A blocking read of `out.len()` bytes through a result buffer the
/// transport owns while the read is in flight: `post_and_wait` posts the
/// read(s) delivering into the buffer and waits for them; the bytes are
/// then copied to `out`. Small reads reuse a buffer of this thread's own
/// (no allocation); a buffer that an operation may still hold (a wait that
/// failed or timed out) is never reused — it is left to that operation, as
/// any dropped [`InFlight`].
///
/// # Errors
/// `post_and_wait`'s error (`out` is then unspecified).
pub(crate) fn read_into(
    out: &mut [u8],
    post_and_wait: impl FnOnce(&InFlight) -> crate::error::Result<()>,
) -> crate::error::Result<()> {
    let len = out.len();
    let small = len <= SPARE_BYTES;
    let mut buf = small
        .then(|| SPARE.with(|s| s.take()))
        .flatten()
        .unwrap_or_else(|| InFlight::new::<u8, Vec<u8>>(vec![0u8; if small { SPARE_BYTES } else { len }], None));
    // Within the buffer's capacity: a spare one has SPARE_BYTES.
    buf.len = len;
    post_and_wait(&buf)?;
    if buf.done.pending() != 0 {
        return Err(crate::error::Error::InvalidArgument(
            "a completed read is still in flight".into(),
        ));
    }
    // SAFETY: nothing is pending: every part was delivered (a delivery
    // writes before it counts its part done, and `pending` reads with
    // Acquire), so no sink writes these `len` bytes of the live buffer
    // any more (a late duplicate finds no claim, see `Sink::claim`).
    out.copy_from_slice(unsafe { std::slice::from_raw_parts(buf.ptr, len) });
    if small
        && buf.claims.load(Ordering::Acquire) == 0
        && Arc::get_mut(&mut buf.claims).is_some()
        && Arc::get_mut(&mut buf.done).is_some()
    {
        // No sink of it is left: nobody can count or write any more.
        buf.done.take_error();
        SPARE.with(|s| s.set(Some(buf)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reused_result_buffer_carries_nothing_over() {
        for (len, byte) in [(8usize, 1u8), (3, 2), (256, 3), (300, 4), (8, 5)] {
            let mut out = vec![0u8; len];
            read_into(&mut out, |b| {
                let s = b.sink();
                s.add();
                s.deliver(0, &vec![byte; len]);
                Ok(())
            })
            .unwrap();
            assert_eq!(out, vec![byte; len]);
        }
        // A read whose part is still out: its buffer is not reused.
        let mut kept = None;
        let mut out = [0u8; 8];
        let r = read_into(&mut out, |b| {
            let s = b.sink();
            s.add();
            kept = Some(s);
            Ok(())
        });
        assert!(r.is_err());
        let late = kept.unwrap();
        let mut out = [0u8; 8];
        read_into(&mut out, |b| {
            let s = b.sink();
            s.add();
            // The stale sink's late delivery must not land in this read.
            late.deliver(0, &[9; 8]);
            s.deliver(0, &[6; 8]);
            Ok(())
        })
        .unwrap();
        assert_eq!(out, [6; 8]);
    }

    #[test]
    fn a_sink_never_writes_a_buffer_given_back() {
        let f = InFlight::new::<u8, Vec<u8>>(vec![0u8; 8], None);
        let s = f.sink();
        s.add();
        // Outstanding part: the buffer is not given back.
        let f = f.into_inner::<Vec<u8>>().expect_err("a part is pending");
        s.deliver(0, &[7; 4]);
        // A second delivery of the same part finds no claim: ignored.
        s.deliver(4, &[9; 4]);
        assert_eq!(f.completion().pending(), 0);
        let v = f.into_inner::<Vec<u8>>().ok().expect("nothing pending");
        assert_eq!(v, [7, 7, 7, 7, 0, 0, 0, 0]);
        // The buffer is back: a stale sink neither counts nor writes.
        s.add();
        s.deliver(0, &[1; 8]);
        s.fail("late".into());
        assert_eq!(v, [7, 7, 7, 7, 0, 0, 0, 0]);
    }

    #[test]
    fn a_failed_part_releases_its_claim() {
        let f = InFlight::new::<u8, Vec<u8>>(vec![0u8; 4], None);
        let s = f.sink();
        s.add();
        s.fail("refused".into());
        assert!(f.into_inner::<Vec<u8>>().is_ok());
    }
}
