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
