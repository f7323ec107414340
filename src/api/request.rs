//! Requests of the request-based operations (`rput`, `rget`).

use std::marker::PhantomData;

use crate::error::{Error, Result};
use crate::transport::{InFlight, Transport};

/// A pending `rput` or `rget`.
///
/// The request *owns* the buffer until the operation completed: [`wait`]
/// gives it back (for `rget`, filled). Owning rather than borrowing keeps the
/// library sound even if a request is leaked with `std::mem::forget`: the
/// buffer is then leaked too, never freed under the NIC. Dropping a request
/// waits for it.
///
/// Completion is *local*: an `rput`'s buffer may be reused, an `rget`'s data
/// has arrived. Remote completion of an `rput` needs a flush (or the end of
/// the epoch), as in MPI.
///
/// [`wait`]: Request::wait
pub struct Request<'w, B> {
    transport: &'w dyn Transport,
    inflight: Option<InFlight>,
    what: String,
    _buf: PhantomData<fn() -> B>,
}

impl<'w, B: Send + 'static> Request<'w, B> {
    pub(crate) fn new(transport: &'w dyn Transport, inflight: InFlight, what: String) -> Self {
        Request {
            transport,
            inflight: Some(inflight),
            what,
            _buf: PhantomData,
        }
    }

    /// Whether the operation completed (drives progress once).
    pub fn test(&self) -> bool {
        let _ = self.transport.progress();
        self.inflight
            .as_ref()
            .is_none_or(|f| f.completion().pending() == 0)
    }

    /// Waits for completion and returns the buffer.
    pub fn wait(mut self) -> Result<B> {
        let inflight = self
            .inflight
            .take()
            .ok_or_else(|| Error::InvalidArgument("request already completed".into()))?;
        let what = self.what.clone();
        let waited = self.transport.wait(inflight.completion(), &|| what.clone());
        let buf = inflight.into_inner::<B>().map_err(|_| {
            Error::InvalidArgument(format!(
                "{}: buffer still in use after completion",
                self.what
            ))
        });
        waited?;
        buf
    }
}

impl<B> Drop for Request<'_, B> {
    fn drop(&mut self) {
        if let Some(f) = self.inflight.take() {
            if let Err(e) = self.transport.wait(f.completion(), &|| self.what.clone()) {
                tracing::warn!("dropped request failed: {e}");
            }
        }
    }
}
