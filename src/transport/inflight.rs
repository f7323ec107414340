//! Buffers owned by the transport while a non-blocking operation uses them.
//!
//! A request takes ownership of the user's buffer (a `Vec<T>`, a
//! `Box<[T]>`, a `&'static mut [T]`, ...) so that neither the user nor
//! `std::mem::forget` can free or touch it while the NIC reads or writes it.
//! The buffer comes back only after every operation on it completed; a buffer
//! dropped while operations are still pending is leaked rather than freed
//! under the NIC's feet.

use std::sync::Arc;

use super::completion::Completion;

/// An erased pointer/length pair into a buffer kept alive by an [`InFlight`].
pub struct InFlight {
    ptr: *mut u8,
    len: usize,
    done: Arc<Completion>,
    group: Option<Arc<Completion>>,
    keep: Option<Box<dyn std::any::Any + Send>>,
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
        if self.done.pending() != 0 {
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
        if self.done.pending() != 0 {
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
#[derive(Clone)]
pub struct Sink {
    ptr: *mut u8,
    len: usize,
    done: Arc<Completion>,
    group: Option<Arc<Completion>>,
}

// SAFETY: the pointer is only written through `deliver`, within bounds and
// while the buffer is kept alive (see the invariant above).
unsafe impl Send for Sink {}
// SAFETY: as above; concurrent deliveries write disjoint ranges.
unsafe impl Sync for Sink {}

impl Sink {
    /// A sink that only counts (acknowledgements without data).
    pub fn counter(done: Arc<Completion>) -> Sink {
        Sink {
            ptr: std::ptr::null_mut(),
            len: 0,
            done,
            group: None,
        }
    }

    /// Whether parts deliver data (else they only count).
    pub fn has_buffer(&self) -> bool {
        !self.ptr.is_null()
    }

    /// Counts one more part.
    pub fn add(&self) {
        if let Some(g) = &self.group {
            g.add();
        }
        self.done.add();
    }

    /// Copies `bytes` to byte `at` of the buffer and counts the part done
    /// (failed, when the range is outside the buffer).
    pub fn deliver(&self, at: usize, bytes: &[u8]) {
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
            _ => self.fail(format!(
                "a reply of {} bytes at byte {at} does not fit the {}-byte result",
                bytes.len(),
                self.len
            )),
        }
    }

    /// Counts the part failed with `message`.
    pub fn fail(&self, message: String) {
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
        }
    }
}
